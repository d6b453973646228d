"""The global rewrite counter (``rewrite_limit``) and ``fxpasses bisect`` on real passes and models."""

from __future__ import annotations

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
