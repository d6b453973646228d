"""The global rewrite counter (``rewrite_limit``) and ``fxpasses bisect`` on real passes and models."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import fxpasses
from fxpasses import Pipeline, Registry
from fxpasses.bisect import bisect
from fxpasses.capture import capture
from fxpasses.cli import cli
from fxpasses.job import load_factory
from fxpasses.rewrites import RewriteLimit

from planted import load_planted, planted_registry

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
REAL = "remove_dropout,fuse_conv_bn,simplify_algebra,{planted},fold_constants,eliminate_common_subexpressions,eliminate_dead_code"


@pytest.fixture(scope="module")
def planted():
    return load_planted("fxp_planted_inprocess")


@pytest.fixture
def reg(planted):
    return planted_registry(planted)


@pytest.fixture(scope="module")
def convnet_export():
    model = load_factory("models:convnet", EXAMPLES)()
    x = torch.randn(2, 3, 32, 32)
    return model, [x]


def fresh(model, inputs, dialect="export"):
    return capture(model, inputs, dialect)


def rewrites_before(reg, model, inputs, prefix: str, dialect="export") -> int:
    """How many rewrites the passes before the planted one make (counted independently)."""
    cap = fresh(model, inputs, dialect)
    counter = RewriteLimit(None)
    Pipeline.from_string(prefix, registry=reg).run(cap.gm, cap.inputs, rewrite_limit=counter)
    return counter.count


def test_rewrite_limit_counts_node_actions_and_graph_pass_runs(reg, convnet_export):
    model, inputs = convnet_export
    cap = fresh(model, inputs)
    counter = RewriteLimit(None)
    report = Pipeline.from_string("remove_dropout,fuse_conv_bn,propagate_shapes,eliminate_dead_code", registry=reg).run(
        cap.gm, cap.inputs, rewrite_limit=counter
    )
    by_name = {p.name: p for p in report.passes}
    assert by_name["remove_dropout"].rewrites == by_name["remove_dropout"].counters["removed"] == 1
    assert by_name["fuse_conv_bn"].rewrites == by_name["fuse_conv_bn"].counters["fused"] == 3
    assert by_name["propagate_shapes"].rewrites == 0  # analyses never count
    assert by_name["eliminate_dead_code"].rewrites == 1  # one whole-graph run
    assert report.rewrites == counter.count == 5
    assert [(s.name, s.first, s.count) for s in counter.spans] == [
        ("remove_dropout", 1, 1),
        ("fuse_conv_bn", 2, 3),
        ("propagate_shapes", 5, 0),
        ("eliminate_dead_code", 5, 1),
    ]


def test_rewrite_limit_stops_applying_rewrites_past_n(reg, convnet_export):
    model, inputs = convnet_export
    pipeline = Pipeline.from_string("remove_dropout,fuse_conv_bn,propagate_shapes,eliminate_dead_code", registry=reg)
    cap = fresh(model, inputs)
    before = cap.gm.graph.python_code("self").src
    report = pipeline.run(cap.gm, cap.inputs, rewrite_limit=0)
    assert cap.gm.graph.python_code("self").src == before
    assert [p.cut_off for p in report.passes] == [True, True, False, True]
    assert not report.changed

    cap = fresh(model, inputs)
    limit = RewriteLimit(2)
    report = pipeline.run(cap.gm, cap.inputs, rewrite_limit=limit)
    fused = [p for p in report.passes if p.name == "fuse_conv_bn"][0]
    assert (fused.rewrites, fused.cut_off, fused.counters["fused"]) == (1, True, 1)
    assert report["eliminate_dead_code"].cut_off and report["eliminate_dead_code"].rewrites == 0
    bn = [n for n in cap.gm.graph.nodes if "batch_norm" in str(n.target)]
    assert len(bn) == 2  # one of three batch norms fused
    assert limit.last.index == 2 and limit.last.pass_name == "fuse_conv_bn" and limit.last.pass_index == 1
    assert limit.last.node["op"] == "call_function" and "batch_norm" in limit.last.node["target"]
    with pytest.raises(fxpasses.UserError, match="rewrite_limit must be an int >= 0"):
        pipeline.run(cap.gm, cap.inputs, rewrite_limit=-1)


@pytest.fixture(scope="module")
def gpt2_model():
    model = load_factory("models:gpt2", EXAMPLES)()
    return model, [torch.randint(0, 100, (1, 16))]


@pytest.mark.parametrize(
    "model_name, dialect, wrong_at", [("convnet", "export", 2), ("convnet", "dynamo", 5), ("gpt2", "export", 11)]
)
def test_bisect_finds_the_planted_rewrite_among_real_passes(
    reg, planted, convnet_export, gpt2_model, model_name, dialect, wrong_at
):
    model, inputs = convnet_export if model_name == "convnet" else gpt2_model
    prefix = "remove_dropout,fuse_conv_bn,simplify_algebra"
    real = REAL.format(planted=f"planted{{wrong_at={wrong_at}}}")
    if dialect == "dynamo":  # parameters are graph inputs: fuse_conv_bn rewrites only on request
        prefix, real = (t.replace("fuse_conv_bn", "fuse_conv_bn{fold_in_graph=true}") for t in (prefix, real))
    k = rewrites_before(reg, model, inputs, prefix, dialect)
    assert k >= 3  # the real passes before it rewrite something
    pipeline = Pipeline.from_string(real, registry=reg)
    cap = fresh(model, inputs, dialect)
    code = cap.gm.graph.python_code("self").src
    planted.Planted.log.clear()
    result = bisect(pipeline, cap.gm, cap.inputs)
    assert result.status == "found"
    assert (result.pass_name, result.step) == ("planted", 4)
    assert result.first == k + 1
    assert result.culprit.index == k + wrong_at
    assert result.culprit.pass_index == wrong_at
    assert result.culprit.pass_name == "planted"
    assert result.culprit.step == 4  # as result.step counts, from 1 (it read 3 beside it)
    assert result.as_dict()["culprit"]["step"] == result.as_dict()["step"] == 4
    # the first, full run had no limit (its trial said the rewrites it made as one)
    assert result.trials[0].limit is None and result.trials[0].bad
    assert result.trials[0].message.endswith(f" (after {result.last} rewrites)")
    assert all(t.limit is not None for t in result.trials[1:])
    assert set(planted.Planted.log) == {result.culprit.node["name"]}  # the node it broke, every time
    assert result.culprit.action.startswith("Replace(%")
    assert result.good.limit == k + wrong_at - 1 and not result.good.bad
    assert result.bad.limit == k + wrong_at and result.bad.bad and "max abs error" in result.bad.message
    assert len(result.trials) <= 2 + (result.last - result.first + 1).bit_length() + 1
    # the graph is handed back exactly as it was
    assert cap.gm.graph.python_code("self").src == code
    text = result.text()
    assert f"first bad rewrite #{k + wrong_at} (#{wrong_at} of pass 'planted')" in text
    assert f"at node %{result.culprit.node['name']}" in text


def test_bisect_blames_a_whole_graph_pass_run(reg, convnet_export):
    model, inputs = convnet_export
    k = rewrites_before(reg, model, inputs, "remove_dropout,fuse_conv_bn,eliminate_dead_code")
    pipeline = Pipeline.from_string("remove_dropout,fuse_conv_bn,eliminate_dead_code,planted_graph", registry=reg)
    cap = fresh(model, inputs)
    result = bisect(pipeline, cap.gm, cap.inputs)
    assert result.status == "found" and result.pass_name == "planted_graph"
    assert result.culprit.index == k + 1 and result.culprit.node is None
    assert "the whole-graph pass run" in result.text()
    assert f"with rewrites #1..#{k}: outputs match" in result.text()


def test_bisect_clean_pipeline_and_raising_pass(reg, convnet_export):
    model, inputs = convnet_export
    cap = fresh(model, inputs)
    clean = bisect(Pipeline.from_string(REAL.format(planted="planted"), registry=reg), cap.gm, cap.inputs)
    assert clean.status == "clean" and clean.culprit is None
    assert "no failure" in clean.text()
    raised = bisect(Pipeline.from_string(REAL.format(planted="planted{raise_at=2}"), registry=reg), cap.gm, cap.inputs)
    assert raised.status == "raised" and raised.pass_name == "planted"
    assert "planted failure at %" in raised.error and "at node %" in raised.error




def write_config(tmp_path, pipeline: str) -> Path:
    (tmp_path / "bisect_models.py").write_text((EXAMPLES / "models.py").read_text())
    cfg = tmp_path / "bisect.toml"
    cfg.write_text(
        f'pipeline = "{pipeline}"\n'
        "[model]\n"
        'factory = "bisect_models:convnet"\n'
        "inputs = [{shape = [2, 3, 32, 32]}]\n"
    )
    return cfg


def test_cli_bisect_names_pass_rewrite_and_node(planted_site, tmp_path):
    cfg = write_config(tmp_path, REAL.format(planted="planted{wrong_at=3}"))
    r = CliRunner().invoke(cli, ["bisect", str(cfg)])
    assert r.exit_code == 1, r.output
    import fxp_planted

    (node,) = set(fxp_planted.Planted.log)
    assert "first bad pass: 'planted' (step 4 of 7)" in r.output
    assert "(#3 of pass 'planted'): Replace(%" in r.output
    assert f"at node %{node} (op=call_function" in r.output
    assert "Traceback" not in r.output
    index = int(r.output.split("first bad rewrite #")[1].split()[0])
    assert f"reproduce with: fxpasses run {cfg} --rewrite-limit {index}" in r.output
    # the limit it names reproduces the bad outputs; one less keeps them
    out = tmp_path / "out"
    bad = CliRunner().invoke(cli, ["run", str(cfg), "--rewrite-limit", str(index), "--repeat", "1", "-o", str(out)])
    assert bad.exit_code == 1 and "outputs differ" in bad.output and not out.exists()
    good = CliRunner().invoke(cli, ["run", str(cfg), "--rewrite-limit", str(index - 1), "--repeat", "1", "--no-save"])
    assert good.exit_code == 0, good.output


def test_cli_bisect_reproduce_command_keeps_the_plugin_options(planted_site, tmp_path, monkeypatch):
    """With plugin autoloading off, the plugin given as `-p` was missing from the command
    bisect printed, which then failed with "unknown pass 'planted'" (found by a new-user check)."""
    monkeypatch.setenv("FXPASSES_DISABLE_PLUGIN_AUTOLOAD", "1")
    cfg = write_config(tmp_path, REAL.format(planted="planted{wrong_at=3}"))
    r = CliRunner().invoke(cli, ["-p", "planted-passes", "bisect", str(cfg), "-p", "no:fxpasses-example-passes"])
    assert r.exit_code == 1, r.output
    index = int(r.output.split("first bad rewrite #")[1].split()[0])
    tail = f"-p planted-passes -p no:fxpasses-example-passes --rewrite-limit {index}"
    line = f"reproduce with: fxpasses run {cfg} {tail}"
    assert line in r.output
    bad = CliRunner().invoke(cli, ["run", str(cfg), *tail.split(), "--repeat", "1", "--no-save"])
    assert bad.exit_code == 1 and "outputs differ" in bad.output, bad.output
    # and the JSON has the whole command (reproduce_args alone lacked the -p options)
    r = CliRunner().invoke(cli, ["-p", "planted-passes", "bisect", str(cfg), "-p", "no:fxpasses-example-passes", "--format", "json"])
    assert r.exit_code == 1, r.output
    assert json.loads(r.stdout)["reproduce_command"] == ["fxpasses", "run", str(cfg), *tail.split()]


def test_cli_bisect_of_a_pyproject_names_the_file_in_its_reproduce_command(planted_site, tmp_path, monkeypatch):
    """Bisect of the nearest pyproject.toml printed `fxpasses run CONFIG ...`, which failed with
    "config file not found: CONFIG" (found by a new-user check)."""
    cfg = write_config(tmp_path, REAL.format(planted="planted{wrong_at=3}"))
    text = cfg.read_text().replace("[model]", "[tool.fxpasses.model]")
    (tmp_path / "pyproject.toml").write_text("[tool.fxpasses]\n" + text)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # found on the way up
    r = CliRunner().invoke(cli, ["bisect", "--format", "json"])
    assert r.exit_code == 1, r.output
    command = json.loads(r.stdout)["reproduce_command"]
    assert command[:3] == ["fxpasses", "run", os.path.join("..", "pyproject.toml")] and "CONFIG" not in command
    bad = CliRunner().invoke(cli, [*command[1:], "--repeat", "1", "--no-save"])
    assert bad.exit_code == 1 and "outputs differ" in bad.output, bad.output


def test_cli_bisect_clean_exits_0_and_json(planted_site, tmp_path):
    cfg = write_config(tmp_path, REAL.format(planted="planted"))
    r = CliRunner().invoke(cli, ["bisect", str(cfg), "--format", "json"])
    assert r.exit_code == 0, r.output
    import json

    data = json.loads(r.stdout)
    assert data["status"] == "clean" and data["total_rewrites"] > 5


def test_cli_bisect_needs_a_model(tmp_path):
    cfg = tmp_path / "nomodel.toml"
    cfg.write_text('pipeline = "eliminate_dead_code"\n')
    r = CliRunner().invoke(cli, ["bisect", str(cfg)])
    assert r.exit_code == 2 and "no [model] section" in r.output and "Traceback" not in r.output


class SilentEditor(fxpasses.NodePass):
    """Edits the graph inside a hook and returns keep: no rewrite is counted."""

    name = "silent_editor"

    @fxpasses.on("relu")
    def relu(self, node, ctx):
        node.target = torch.ops.aten.sigmoid.default if node.op == "call_function" else node.target
        return None


def test_bisect_pass_that_reports_no_rewrite(convnet_export):
    reg = Registry(autoload=False)
    reg.register(SilentEditor)
    model, inputs = convnet_export
    cap = fresh(model, inputs)
    lines = []
    result = bisect(Pipeline(["silent_editor"], registry=reg), cap.gm, cap.inputs, log=lines.append)
    assert result.status == "unreported" and result.pass_name == "silent_editor"
    assert "fails; it reported no rewrite" in lines[0], lines
    assert "#1..#0" not in "\n".join(lines) + result.text()
    assert "no rewrite to blame inside it" in result.text()


class ScaleWeight(fxpasses.NodePass):
    """Doubles each linear weight in place and returns keep: the graph is as it was."""

    name = "scale_weight"
    writes_tensors = True

    @fxpasses.on("linear")
    def lin(self, node, ctx):
        with torch.no_grad():
            ctx.graph.owning_module.get_submodule(node.target).weight.mul_(2)
        return None


def test_bisect_a_pass_that_writes_a_weight_in_place_is_not_said_to_change_the_graph():
    """A pass that broke the outputs by writing a parameter in place, graph untouched, was said
    to have "changed the graph without returning a rewrite" (a new-user check)."""
    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(4, 4)))
    result = bisect(Pipeline([ScaleWeight], verify="numeric"), gm, [torch.randn(2, 4)])
    assert result.status == "unreported" and result.pass_name == "scale_weight"
    assert (
        "'scale_weight' changed the graph or the module's tensors without returning a rewrite (a hook that edits "
        "the graph, or writes a parameter or buffer in place, and returns keep): no rewrite to blame inside it"
    ) in result.text(), result.text()


class _DropoutThenAlgebra(torch.nn.Module):
    """Two identity dropouts, then x*1 and x-0 (simplified), then x*2 (a node simplify_algebra
    visits and keeps)."""

    def __init__(self):
        super().__init__()
        self.d1, self.d2 = torch.nn.Dropout(0.2), torch.nn.Dropout(0.3)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.d1(self.lin(x)) * 1
        y = self.d2(y) - 0
        return torch.relu(y * 2)


def test_cut_off_only_when_the_limit_stopped_a_rewrite():
    """A pass whose remaining nodes would all be kept applied every rewrite it would have
    made: not cut off, though the limit was reached before it visited them (it was before)."""
    x = torch.randn(2, 4)
    pipeline = Pipeline.from_string("remove_dropout,simplify_algebra,fuse_conv_bn,eliminate_dead_code")

    def run(n):
        gm = torch.export.export(_DropoutThenAlgebra().eval(), (x,)).module()
        report = pipeline.run(gm, [x], rewrite_limit=n)
        return {p.name: (p.rewrites, p.cut_off, dict(p.counters)) for p in report.passes}

    full = run(None)
    assert full["simplify_algebra"][2] == {"simplified": 2}
    # 2 dropouts + both simplifications: every rewrite of simplify_algebra applied, x*2 kept
    assert run(4) == {
        "remove_dropout": (2, False, {"removed": 2}),
        "simplify_algebra": (2, False, {"simplified": 2}),
        "fuse_conv_bn": (0, False, {}),  # not run, but it has nothing to fuse here
        # a whole-graph pass's run is a rewrite, but this one would have erased nothing (it
        # was marked cut off, found by a new-user check)
        "eliminate_dead_code": (0, False, {}),
    }
    r3 = run(3)
    assert r3["simplify_algebra"] == (1, True, {"simplified": 1})  # x-0 was stopped
    r2 = run(2)
    assert r2["remove_dropout"] == (2, False, {"removed": 2})
    assert r2["simplify_algebra"] == (0, True, {})  # not run, and it would have rewritten
    assert r2["fuse_conv_bn"] == (0, False, {})


class _DeadAdd(torch.nn.Module):
    def forward(self, x):
        unused = x + 1  # noqa: F841 - dead code for eliminate_dead_code
        return x * 2


@pytest.mark.parametrize("journal", [True, False])
def test_a_whole_graph_pass_kept_from_running_is_cut_off_only_when_it_would_change_the_graph(journal):
    """A whole-graph pass the limit kept from running was marked cut off whatever it would have
    done. It is now run and undone, as a node pass's hooks are called: cut off when it would
    have changed the graph, and the graph is left as the limit left it."""

    class Dce(fxpasses.GraphPass):
        name = "dce_probe"
        journal_edits = journal
        writes_tensors = not journal

        def run(self, gm, ctx):
            return gm.graph.eliminate_dead_code()

    x = torch.randn(3)
    gm = torch.fx.symbolic_trace(_DeadAdd())
    code = gm.code
    report = Pipeline([Dce]).run(gm, [x], rewrite_limit=0)
    assert (report["dce_probe"].rewrites, report["dce_probe"].cut_off) == (0, True)
    assert gm.code == code and len(gm.graph.nodes) == 4  # x, add (dead), mul, output
    report = Pipeline([Dce]).run(gm, [x], rewrite_limit=1)
    assert (report["dce_probe"].rewrites, report["dce_probe"].cut_off, len(gm.graph.nodes)) == (1, False, 3)
    report = Pipeline([Dce]).run(gm, [x], rewrite_limit=0)  # nothing left to erase
    assert (report["dce_probe"].rewrites, report["dce_probe"].cut_off, len(gm.graph.nodes)) == (0, False, 3)


class _CopyAndStash(fxpasses.NodePass):
    """Per relu: writes the linear weight in place, adds a constant and a node, counts and
    skips, then replaces the relu by a copy of itself (everything a hook can do besides its
    return value)."""

    name = "copy_and_stash"

    @fxpasses.on("relu", op="call_function")
    def relu(self, node, ctx):
        with torch.no_grad():
            ctx.gm.get_parameter("lin.weight").mul_(2)
        ctx.add_constant(torch.ones(3), "_stash")
        ctx.count("copied")
        ctx.skip(node, "stashed")
        ctx.changes_outputs("on purpose")
        return fxpasses.Replace(ctx.call_function(node.target, node.args, node.kwargs))


class _TwoRelus(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(torch.relu(self.lin(x)) + 1)


@pytest.mark.parametrize("limit", [0, 1])
def test_finding_cut_off_leaves_no_trace_of_the_hooks_it_calls(limit):
    """The hooks called to find out whether the limit stopped a rewrite change nothing: the
    graph, the module's tensors and constants, and the report are those of the same run
    without that check (probe=False)."""
    reg = Registry(autoload=False)
    reg.register(_CopyAndStash)
    x = torch.randn(2, 4)
    model = _TwoRelus().eval()
    results = []
    for probe in (True, False):
        # a copy each time: the exported module shares the model's parameters
        gm = torch.export.export(copy.deepcopy(model), (x,)).module()
        report = Pipeline(["copy_and_stash"], registry=reg, verify="none").run(
            gm, [x], rewrite_limit=RewriteLimit(limit, probe=probe)
        )
        (p,) = report.passes
        state = {k: v.clone() for k, v in gm.state_dict().items()}
        results.append((gm.code, sorted(state), state, p.rewrites, p.cut_off, dict(p.counters), p.skipped, p.notes))
    probed, plain = results
    assert probed[0] == plain[0] and probed[1] == plain[1]
    assert all(torch.equal(probed[2][k], plain[2][k]) for k in probed[2])
    assert probed[3:] == plain[3:]
    assert probed[4] is True and probed[3] == limit  # a relu left would have been rewritten
    assert probed[5] == ({"copied": 1, "skipped": 1} if limit else {})
    assert sum(k.startswith("_stash") for k in probed[1]) == limit


def test_cli_run_with_a_rewrite_limit_shows_rewrites_and_cut_off(tmp_path):
    """The text table of `fxpasses run --rewrite-limit` says what each pass applied and which
    ones the limit cut off (bisect users read it); without a limit there is no such column."""
    cfg = write_config(tmp_path, "remove_dropout,fuse_conv_bn,eliminate_dead_code")
    r = CliRunner().invoke(cli, ["run", str(cfg), "--rewrite-limit", "2", "--repeat", "1", "--no-save"])
    assert r.exit_code == 0, r.output
    rows = {line.split()[0]: line.split() for line in r.output.splitlines() if line.split()}
    assert "rewrites" in rows["pass"]
    assert rows["remove_dropout"][3] == "1" and rows["remove_dropout"][4] != "(cut"
    assert rows["fuse_conv_bn"][3:5] == ["1", "(cut"]  # 1 of its 3 fusions
    assert rows["eliminate_dead_code"][3:5] == ["0", "(cut"]
    assert "rewrite limit 2: 2 rewrites counted; cut off (a rewrite stopped): fuse_conv_bn, eliminate_dead_code" in r.output
    r = CliRunner().invoke(cli, ["run", str(cfg), "--rewrite-limit", "5", "--repeat", "1", "--no-save"])
    assert r.exit_code == 0, r.output
    assert "rewrite limit 5: 5 rewrites counted; no pass was cut off" in r.output
    r = CliRunner().invoke(cli, ["run", str(cfg), "--rewrite-limit", "1", "--repeat", "1", "--no-save"])
    assert "rewrite limit 1: 1 rewrite counted; cut off" in r.output, r.output  # (was "1 rewrites")
    r = CliRunner().invoke(cli, ["run", str(cfg), "--repeat", "1", "--no-save"])
    assert "rewrites" not in r.output.splitlines()[2] and "rewrite limit" not in r.output


def test_cli_bisect_reproducing_command_works_with_on_error_skip(planted_site, tmp_path):
    """With on_error = "skip" the pipeline rolls the failing pass back and goes on, so
    `fxpasses run CONFIG --rewrite-limit N` exits 0; bisect's command adds `--on-error
    rollback`, which fails there (and not at N - 1). A pipeline given to bisect with --pipeline
    is passed on too."""
    cfg = write_config(tmp_path, REAL.format(planted="planted{wrong_at=3}"))
    cfg.write_text('verify = "numeric"\non_error = "skip"\n' + cfg.read_text())
    r = CliRunner().invoke(cli, ["bisect", str(cfg)])
    assert r.exit_code == 1, r.output
    index = int(r.output.split("first bad rewrite #")[1].split()[0])
    assert f"reproduce with: fxpasses run {cfg} --rewrite-limit {index} --on-error rollback\n" in r.output
    run = ["run", str(cfg), "--repeat", "1", "--no-save"]
    skipped = CliRunner().invoke(cli, [*run, "--rewrite-limit", str(index)])
    assert skipped.exit_code == 0 and "planted  " in skipped.output and "skipped: pass 'planted' failed" in skipped.output
    bad = CliRunner().invoke(cli, [*run, "--rewrite-limit", str(index), "--on-error", "rollback"])
    assert bad.exit_code == 1 and "pass 'planted' failed: verification failed" in bad.output, bad.output
    good = CliRunner().invoke(cli, [*run, "--rewrite-limit", str(index - 1), "--on-error", "rollback"])
    assert good.exit_code == 0, good.output

    # the pipeline given on bisect's command line is part of the command
    other = "remove_dropout,planted{wrong_at=2}[on_error=skip]"
    r = CliRunner().invoke(cli, ["bisect", str(cfg), "--pipeline", other])
    assert r.exit_code == 1, r.output
    index = int(r.output.split("first bad rewrite #")[1].split()[0])
    line = f"reproduce with: fxpasses run {cfg} --pipeline '{other}' --rewrite-limit {index} --on-error rollback"
    assert line in r.output
    bad = CliRunner().invoke(cli, [*run, "--pipeline", other, "--rewrite-limit", str(index), "--on-error", "rollback"])
    assert bad.exit_code == 1 and "pass 'planted' failed" in bad.output, bad.output


def test_cli_bisect_adds_on_error_rollback_only_when_the_bad_pass_is_skipped(planted_site, tmp_path):
    """Another entry's on_error=skip made bisect add `--on-error rollback` with a note that the
    bad pass "would be rolled back and the run would go on", false for a pass that rolls back
    (found by a new-user check)."""
    cfg = write_config(tmp_path, "planted{wrong_at=3},eliminate_dead_code[on_error=skip]")
    cfg.write_text('verify = "numeric"\n' + cfg.read_text())
    r = CliRunner().invoke(cli, ["bisect", str(cfg)])
    assert r.exit_code == 1, r.output
    index = int(r.output.split("first bad rewrite #")[1].split()[0])
    assert r.output.rstrip().endswith(f"reproduce with: fxpasses run {cfg} --rewrite-limit {index}")
    assert "--on-error" not in r.output
    bad = CliRunner().invoke(cli, ["run", str(cfg), "--rewrite-limit", str(index), "--repeat", "1", "--no-save"])
    assert bad.exit_code == 1 and "pass 'planted' failed" in bad.output, bad.output


def test_cli_bisect_without_a_pipeline_bisects_the_preset_run_would_use(tmp_path):
    """A config with no `pipeline`/`preset` runs the `inference` preset under `fxpasses run`;
    bisect runs the same (it said "no pipeline given")."""
    cfg = write_config(tmp_path, "x")
    cfg.write_text("\n".join(line for line in cfg.read_text().splitlines() if not line.startswith("pipeline")) + "\n")
    r = CliRunner().invoke(cli, ["bisect", str(cfg), "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["status"] == "clean" and data["steps"] == 6  # the inference preset's six passes


def test_a_pass_the_limit_kept_from_running_is_not_changed_even_when_probed():
    """Probing a pass whose hook writes a parameter undoes the write (moving the tensor's
    version): the pass, which never ran, must still be reported unchanged, as without probing."""
    import torch.nn as nn

    from fxpasses import NodePass, Pipeline, Replace, on
    from fxpasses.rewrites import RewriteLimit

    class ScaleLinear(NodePass):
        name = "scale_linear"
        writes_tensors = True

        @on("linear")
        def visit(self, node, ctx):
            with torch.no_grad():
                ctx.gm.get_parameter(node.args[1].target).mul_(2)
            return Replace(ctx.call_function(node.target, node.args, node.kwargs))

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3)

        def forward(self, x):
            return self.a(x)

    torch.manual_seed(0)
    x = torch.randn(2, 3)
    for probe in (True, False):
        gm = torch.export.export(M(), (x,)).module()
        w0 = gm.a.weight.detach().clone()
        rep = Pipeline([ScaleLinear], verify="lint").run(gm, [x], rewrite_limit=RewriteLimit(0, probe=probe))
        (p,) = rep.passes
        assert (p.status, p.rewrites, p.cut_off, p.changed) == ("ok", 0, True, False), probe
        assert torch.equal(gm.a.weight, w0)


def test_rewrites_of_a_rolled_back_pass_are_counted_but_said_to_be_rolled_back(planted_site, tmp_path):
    """Under a limit, a pass skipped after failing keeps its place in the numbering (as
    bisection numbers rewrites) but its rewrites are not in the graph: the table says so."""
    cfg = write_config(tmp_path, "remove_dropout,planted{wrong_at=2}[on_error=skip],fuse_conv_bn")
    cfg.write_text('verify = "numeric"\n' + cfg.read_text())
    r = CliRunner().invoke(cli, ["run", str(cfg), "--rewrite-limit", "4", "--repeat", "1", "--no-save"])
    assert r.exit_code == 0, r.output
    rows = {line.split()[0]: line.split() for line in r.output.splitlines() if line.split()}
    assert rows["planted"][1] == "skipped" and rows["planted"][3:6] == ["3", "(rolled", "back)"]
    assert "rewrite limit 4: 4 rewrites counted (3 rolled back with planted, not in the graph); cut off" in r.output


class _FourRelus(torch.nn.Module):
    def forward(self, x):
        for _ in range(4):
            x = torch.sigmoid(torch.relu(x) + 1)
        return x


def test_bisect_finds_the_rewrite_after_which_the_module_no_longer_runs():
    """A rewrite that makes the module raise (a tensor replaced by a float): bisect stopped
    with "raised" once the failure named the node whose code raised, and before that a trial
    that raised ended bisect with a UserError. The failing run is bisected like a mismatch."""

    class Rewrites(fxpasses.NodePass):  # four rewrites, the third of which breaks the module
        name = "relu_rewrites"

        @fxpasses.on("relu")
        def r(self, node, ctx):
            if node.name == "relu_2":
                return fxpasses.Replace(3.0)
            with ctx.inserting_before(node):
                return fxpasses.Replace(ctx.call_function(torch.relu, node.args))

    gm = torch.fx.symbolic_trace(_FourRelus())
    code = gm.code
    result = bisect(Pipeline([Rewrites]), gm, [torch.randn(3)])
    assert result.status == "found", result
    assert (result.first, result.last) == (1, 4)
    assert result.culprit.index == 3 and result.culprit.node["name"] == "relu_2"
    assert result.culprit.action == "Replace(3.0)"
    assert result.bad.message.startswith("the module does not run on the example inputs: ")
    assert gm.code == code  # bisect leaves the module as it was


@pytest.mark.parametrize("kind", ["graph_pass", "hook"])
def test_a_pass_whose_own_code_raises_is_reported_as_raised(kind):
    """A whole-graph pass that raised (print_graph writing under a path that is a file) was
    reported as one that "changed the graph without returning a rewrite" (a new-user check)."""

    class BoomGraph(fxpasses.GraphPass):
        name = "boom"

        def run(self, gm, ctx):
            raise FileExistsError("afile")

    class BoomHook(fxpasses.NodePass):
        name = "boom"

        @fxpasses.on("relu")
        def visit(self, node, ctx):
            raise FileExistsError("afile")

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) + 1

    gm = torch.fx.symbolic_trace(M())
    result = bisect(Pipeline(["remove_dropout", BoomGraph if kind == "graph_pass" else BoomHook]), gm, [torch.randn(3)])
    assert result.status == "raised" and result.pass_name == "boom" and result.step == 2
    text = result.text(None)
    assert "FileExistsError: afile" in text and "changed the graph without returning a rewrite" not in text
    said = "the pass raised (in a hook: the node above)" if kind == "hook" else "the pass raised;"
    assert said in text, text


@pytest.mark.parametrize("dialect", ["symbolic_trace", "export"])
def test_a_whole_graph_pass_that_breaks_lint_is_bisected_to_its_run(dialect):
    """A whole-graph pass that raised nothing but left a graph torch's lint refuses (a node
    using a later one) was reported as "the pass raised (in a hook: the node above); there is
    no rewrite to bisect" (a new-user check). It is a rewrite gone wrong: bisect names the
    pass's run, rewrite #2 after remove_dropout's one."""

    class Corrupt(fxpasses.GraphPass):
        name = "corrupt"

        def run(self, gm, ctx):
            calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module") and n.target != "_guards_fn"]
            calls[0].args = (calls[-1], *calls[0].args[1:])
            return True

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = torch.nn.Dropout(0.1)

        def forward(self, x):
            return torch.relu(self.drop(x)) + 1

    x = torch.randn(3)
    model = M().eval()
    gm = torch.fx.symbolic_trace(model) if dialect == "symbolic_trace" else torch.export.export(model, (x,)).module()
    code = gm.code
    result = bisect(Pipeline(["remove_dropout", Corrupt]), gm, [x])
    assert (result.status, result.pass_name, result.step) == ("found", "corrupt", 2), result.text(None)
    assert result.culprit.index == 2 and result.culprit.action == "run"
    assert "graph lint failed: RuntimeError" in result.error and "there is no rewrite to bisect" not in result.text(None)
    assert gm.code == code


def test_bisect_progress_says_no_rewrite_and_one_rewrite_in_words():
    """A trial with no rewrite applied was logged `rewrites #1..#0: good`, one rewrite as
    `(1 rewrites)` (a less-traveled features check)."""

    class FirstBad(fxpasses.NodePass):  # rewrite #1 of 2 changes the outputs (relu(x) -> x)
        name = "first_bad"

        @fxpasses.on("relu")
        def r(self, node, ctx):
            if node.name == "relu":
                return fxpasses.Replace(node.args[0])
            if node.name == "relu_1":  # (rewrite #2: the same relu again, harmless)
                with ctx.inserting_before(node):
                    return fxpasses.Replace(ctx.call_function(torch.relu, node.args))
            return None

    lines: list[str] = []
    x = torch.tensor([-1.0, 0.5, 2.0])
    result = bisect(Pipeline([FirstBad]), torch.fx.symbolic_trace(_FourRelus()), [x], log=lines.append)
    assert result.status == "found" and result.culprit.index == 1, lines
    assert lines[0] == "full run: pass 'first_bad' (step 1) fails; its rewrites #1..#2"
    assert lines[1].startswith("rewrites #1..#2: bad (output: max abs error")
    assert lines[2].startswith("rewrite #1: bad (output: max abs error")  # (was "rewrites #1..#1")
    assert lines[3:] == ["no rewrite: good (outputs match (max abs error 0))"]  # (was "rewrites #1..#0")
    clean = bisect(Pipeline([FirstBad]), torch.fx.symbolic_trace(_FourRelus()), [x.abs()], log=lines.append)
    assert lines[-1] == "full run: every pass keeps the outputs (2 rewrites)"
    assert clean.text() == "no failure: the pass keeps the outputs (2 rewrites); nothing to bisect"  # (was "each of the 1 passes")


def test_the_first_rewrites_are_named_in_the_singular_for_one():
    """The bisect text said "with rewrites #1..#1" where its progress log said "rewrite #1"
    (an adversarial check): one helper words both."""
    from fxpasses.bisect import _applied

    assert [_applied(n) for n in (None, 0, 1, 2, 7)] == ["no rewrite", "no rewrite", "rewrite #1", "rewrites #1..#2", "rewrites #1..#7"]


def test_a_hook_replacing_the_node_by_itself_is_no_rewrite():
    """`return Replace(node)` of the visited node changes nothing, but under a rewrite limit it
    was counted as a rewrite (and the pass marked cut off at limit 0; a pass-author check)."""

    class Itself(fxpasses.NodePass):
        name = "replace_by_itself"

        @fxpasses.on("relu", op="call_function")
        def relu(self, node, ctx):
            return fxpasses.Replace(node)

    gm = torch.fx.symbolic_trace(_TwoRelus())
    x = torch.randn(2, 4)
    for limit in (0, 5):
        report = Pipeline([Itself]).run(gm, [x], rewrite_limit=limit)
        p = report["replace_by_itself"]
        assert (p.rewrites, p.cut_off, p.changed) == (0, False, False), limit


def test_a_whole_graph_pass_probed_under_the_limit_is_judged_by_what_it_did_and_leaves_nothing():
    """The probe took a whole-graph pass's `return True` for a change (a run without a limit
    reports changed=False for it), and left a buffer written by a pass declaring
    writes_tensors=False that the limit had kept from running (an adversarial check)."""

    class SaysTrue(fxpasses.GraphPass):
        name = "says_true"

        def run(self, gm, ctx):
            return True  # (changes nothing)

    class WritesQuietly(fxpasses.GraphPass):
        name = "writes_quietly"
        writes_tensors = False

        def run(self, gm, ctx):
            with torch.no_grad():
                gm.get_parameter("lin.weight").mul_(3)
            return None

    gm = torch.fx.symbolic_trace(_TwoRelus())
    weight = gm.get_parameter("lin.weight").detach().clone()
    report = Pipeline([SaysTrue, WritesQuietly]).run(gm, [torch.randn(2, 4)], rewrite_limit=0)
    assert [(p.name, p.cut_off) for p in report.passes] == [("says_true", False), ("writes_quietly", True)]
    assert torch.equal(gm.get_parameter("lin.weight"), weight)
