"""Crash reproducers: written on a pass failure, replayed without the model's code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typing import Annotated, Optional, Union

import pytest
import torch
from click.testing import CliRunner
from pydantic import BaseModel, Field

import fxpasses

from fxpasses.capture import capture
from fxpasses.cli import cli
from fxpasses.job import load_factory
from fxpasses.reproducer import graph_source, load_graph, load_tensors, save_tensors


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PIPELINE = "remove_dropout,fuse_conv_bn,simplify_algebra,{planted},fold_constants,eliminate_common_subexpressions,eliminate_dead_code"


def roundtrip(gm, tmp_path):
    src, tensors = graph_source(gm)
    (tmp_path / "graph.py").write_text(src)
    save_tensors(tmp_path / "tensors", tensors)
    return load_graph(tmp_path / "graph.py")


@pytest.mark.parametrize(
    "name, dialect, inputs",
    [
        ("convnet", "export", lambda: [torch.randn(2, 3, 32, 32)]),
        ("convnet", "symbolic_trace", lambda: [torch.randn(2, 3, 32, 32)]),
        ("convnet", "dynamo", lambda: [torch.randn(2, 3, 32, 32)]),
        ("gpt2", "export", lambda: [torch.randint(0, 100, (1, 8))]),
    ],
)
def test_graph_as_code_rebuilds_the_same_graph(tmp_path, name, dialect, inputs):
    model = load_factory(f"models:{name}", EXAMPLES)()
    cap = capture(model, inputs(), dialect)
    gm = cap.gm
    loaded = roundtrip(gm, tmp_path)
    assert loaded.graph.python_code("self").src == gm.graph.python_code("self").src
    for a, b in zip(gm.graph.nodes, loaded.graph.nodes, strict=True):
        assert (a.name, a.op, a.target) == (b.name, b.op, b.target)
        assert str(a.args) == str(b.args) and str(a.kwargs) == str(b.kwargs)
        for key in ("stack_trace", "nn_module_stack", "torch_fn"):
            assert a.meta.get(key) is None or str(a.meta[key]) == str(b.meta[key]) or key == "nn_module_stack"
        if isinstance(a.meta.get("val"), torch.Tensor):
            assert (b.meta["val"].shape, b.meta["val"].dtype) == (a.meta["val"].shape, a.meta["val"].dtype)
    assert {k: v.shape for k, v in gm.state_dict().items()} == {k: v.shape for k, v in loaded.state_dict().items()}
    for k, v in gm.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k])
    assert [k for k, _ in gm.named_modules()] == [k for k, _ in loaded.named_modules()]
    with torch.no_grad():
        torch.testing.assert_close(loaded(*cap.inputs), gm(*cap.inputs), rtol=0, atol=0)


def test_tensors_fall_back_to_torch_save_read_with_weights_only(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "safetensors", None)  # "not installed"
    monkeypatch.setitem(sys.modules, "safetensors.torch", None)
    t = {"a": torch.arange(6.0).reshape(2, 3).t(), "b": torch.ones(2, dtype=torch.int64)}
    path = save_tensors(tmp_path / "t", t)
    assert path.suffix == ".pt"
    back = torch.load(path, weights_only=True)
    assert torch.equal(back["a"], t["a"]) and torch.equal(back["b"], t["b"])
    assert torch.equal(load_tensors(path)["a"], t["a"])




def model_config(tmp_path, planted: str, capture_kind: str = "export", extra: str = "") -> Path:
    """A config whose model factory lives next to it, in a module the replay will not have."""
    d = tmp_path / "project"
    d.mkdir(exist_ok=True)
    (d / "repro_models.py").write_text((EXAMPLES / "models.py").read_text())
    cfg = d / "fxpasses.toml"
    cfg.write_text(
        f'pipeline = "{PIPELINE.format(planted=planted)}"\n'
        f"{extra}"
        "[model]\n"
        'factory = "repro_models:convnet"\n'
        f'capture = "{capture_kind}"\n'
        "inputs = [{shape = [2, 3, 32, 32]}]\n"
    )
    return cfg


def failure_lines(text: str) -> list[str]:
    """The lines that identify a failure: pass and reason head, node, user source line."""
    keep = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("error: pass '") or line.startswith("pass '"):  # (not the table's header: "pass  status ...")
            keep.append(line.replace("error: ", "").split(" max abs error")[0])
        elif line.startswith("at node %") or line.startswith("user code:"):
            keep.append(line)
    return keep


def replay_in_subprocess(reproducer_dir: Path, site: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`fxpasses run DIR/fxpasses.json` with only the pass package on the path, elsewhere."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(site)
    script = Path(sys.executable).parent / "fxpasses"
    return subprocess.run(
        [str(script), "run", str(reproducer_dir / "fxpasses.json"), "--repeat", "1", "--no-save"],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=300,
    )


@pytest.mark.parametrize(
    "capture_kind, planted, cause",
    [
        ("export", "planted{raise_at=2}", "RuntimeError: planted failure at %"),
        ("dynamo", "planted{wrong_at=3}", "verification failed: output"),
    ],
)
def test_reproducer_replays_the_same_failure_without_the_model(planted_site, tmp_path, capture_kind, planted, cause):
    verify = 'verify = "numeric"\n' if "wrong_at" in planted else ""
    cfg = model_config(tmp_path, planted, capture_kind, extra=verify)
    rep = tmp_path / "repro"
    r = CliRunner().invoke(cli, ["run", str(cfg), "--reproducer", str(rep), "--repeat", "1", "--no-save"])
    assert r.exit_code == 1, r.output
    assert cause in r.output
    assert f"replay it with: fxpasses run {rep / 'fxpasses.json'}" in r.output
    assert "hooks" not in r.output  # (torch.export's own hooks on its module's root are not named)
    original = failure_lines(r.output)
    assert original[0].startswith("pass 'planted' failed")
    if "raise_at" in planted:
        assert original[1].startswith("at node %relu_1 (op=call_function, target=aten.relu.default")
        assert original[2].startswith('user code: File "') and "repro_models.py" in original[2]

    # what was written
    # a numeric failure after passes that changed the graph: the module before the pipeline too,
    # which the replay's outputs are held to
    numeric = "wrong_at" in planted
    reference = ["reference.py", "reference_tensors.safetensors"] if numeric else []
    assert sorted(p.name for p in rep.iterdir()) == sorted(
        ["README.md", "error.txt", "fxpasses.json", "graph.py", "inputs.safetensors", "tensors.safetensors", *reference]
    )
    config = json.loads((rep / "fxpasses.json").read_text())
    assert [e["name"] for e in config["pipeline"]] == [
        "planted", "fold_constants", "eliminate_common_subexpressions", "eliminate_dead_code"
    ]
    model = {"graph": "graph.py", "inputs": "inputs.safetensors", **({"reference": "reference.py"} if numeric else {})}
    grad = config["model"].pop("requires_grad", [])  # (TorchDynamo's parameter inputs require grad)
    assert bool(grad) is (capture_kind == "dynamo")
    assert config["order"] == "as-given" and config["model"] == model
    if numeric:  # bisect of the reproducer holds the outputs to its reference as well
        b = CliRunner().invoke(cli, ["bisect", str(rep / "fxpasses.json")])
        assert b.exit_code == 1 and "pass 'planted'" in b.output, b.output
    # the plugin whose pass failed is named, so a replay without it says which package it needs
    assert config["plugins"] == {"enable": ["planted-passes"]}
    assert "def forward(self" in (rep / "graph.py").read_text()
    assert "repro_models" not in (rep / "fxpasses.json").read_text()

    # the replay: another directory, the model's module gone, only the pass package on the path
    (cfg.parent / "repro_models.py").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = replay_in_subprocess(rep, planted_site, elsewhere)
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr
    assert failure_lines(out.stderr) == original
    if "raise_at" in planted:  # (once: a subprocess) without the pass package installed
        empty = tmp_path / "empty-site"
        empty.mkdir()
        out = replay_in_subprocess(rep, empty, elsewhere)
        assert out.returncode == 2 and "Traceback" not in out.stderr
        assert "plugin planted-passes: requested with enable/-p but not installed" in out.stderr


def test_no_reproducer_when_nothing_fails(planted_site, tmp_path):
    ok = model_config(tmp_path, "planted")
    rep = tmp_path / "repro"
    r = CliRunner().invoke(cli, ["run", str(ok), "--reproducer", str(rep), "--repeat", "1", "--no-save"])
    assert r.exit_code == 0, r.output
    assert not rep.exists()
    assert "reproducer" not in r.output


def test_reproducer_of_a_dynamo_skip_is_replayed_in_process(planted_site, tmp_path):
    # raise_at=2: the second of the three relus (the graph's only relu/add/mul nodes)
    cfg = model_config(tmp_path, "planted{raise_at=2}", "dynamo", extra='on_error = "skip"\n')
    rep = tmp_path / "repro"
    r = CliRunner().invoke(cli, ["run", str(cfg), "--reproducer", str(rep), "--repeat", "1", "--no-save"])
    assert r.exit_code == 0, r.output  # skipped: the run goes on
    assert "reproducer of the failure of 'planted'" in r.output
    config = json.loads((rep / "fxpasses.json").read_text())
    assert config["pipeline"][0]["on_error"] == "rollback"  # so that the replay shows the failure
    assert config["pipeline"][1]["on_error"] == "skip"
    replay = CliRunner().invoke(cli, ["run", str(rep / "fxpasses.json"), "--repeat", "1", "--no-save"])
    assert replay.exit_code == 1
    error = (rep / "error.txt").read_text()
    assert failure_lines(replay.output) == failure_lines(error)
    assert "planted failure at %" in replay.output


def test_reproducer_refuses_on_error_raise(planted_site, tmp_path):
    cfg = model_config(tmp_path, "planted{raise_at=1}", extra='on_error = "raise"\n')
    rep = tmp_path / "repro"
    r = CliRunner().invoke(cli, ["run", str(cfg), "--reproducer", str(rep)])
    assert r.exit_code == 2
    assert "on_error = 'raise'" in r.output and "Traceback" not in r.output
    assert not rep.exists()


def test_graph_with_a_local_function_target_is_refused_with_the_node(tmp_path):
    def local_fn(x):
        return x + 1

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    y = graph.call_function(local_fn, (x,))
    graph.output(y)
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    from fxpasses.reproducer import ReproducerError

    with pytest.raises(ReproducerError, match="node %local_fn: its target .* cannot be imported by name"):
        graph_source(gm)


def test_the_commands_a_failure_prints_are_this_runs_and_shell_quoted(planted_site, tmp_path):
    """The replay hint printed `fxpasses run repro dir/fxpasses.json` unquoted, and the bisect
    note said `fxpasses bisect CONFIG` though the run knew its config, pipeline and plugins
    (found by a new-user check): both are now commands that run as printed."""
    import shlex

    cfg = model_config(tmp_path, "planted{wrong_at=3}", "export", extra='verify = "numeric"\n')
    spaced = tmp_path / "my project"
    cfg.parent.rename(spaced)
    cfg = spaced / "fxpasses.toml"
    rep = tmp_path / "repro dir"
    pipeline = PIPELINE.format(planted="planted{wrong_at=3}")
    r = CliRunner().invoke(
        cli, ["run", str(cfg), "--pipeline", pipeline, "-p", "planted-passes", "--reproducer", str(rep), "--repeat", "1", "--no-save"]
    )
    assert r.exit_code == 1, r.output
    assert f"replay it with: fxpasses run {shlex.quote(str(rep / 'fxpasses.json'))}" in r.output
    bisect = shlex.join(["fxpasses", "bisect", str(cfg), "--pipeline", pipeline, "-p", "planted-passes"])
    assert f"note: to find the rewrite that changed the outputs, run `{bisect}`" in r.output
    assert "bisect CONFIG" not in r.output
    # the reproducer's own texts name its own bisect command, not the run's (whose config and
    # model the replay machine does not have)
    own = shlex.join(["fxpasses", "bisect", str(rep / "fxpasses.json")])
    for name in ("error.txt", "README.md"):
        text = (rep / name).read_text()
        assert f"run `{own}`" in text and str(cfg) not in text, name
    # as printed, the bisect command finds the planted rewrite
    argv = shlex.split(bisect)[1:]
    b = CliRunner().invoke(cli, argv)
    assert b.exit_code == 1, b.output
    assert "first bad pass: 'planted'" in b.output


def test_a_failed_run_shows_the_passes_that_ran_before_the_failure(planted_site, tmp_path):
    """A pass failure printed only the error: nothing said which passes had run and what they
    did (found by a new-user check). The table of the run so far goes to stdout, and to the
    JSON error object as `passes`."""
    cfg = model_config(tmp_path, "planted{raise_at=2}")
    r = CliRunner().invoke(cli, ["run", str(cfg), "--repeat", "1", "--no-save"])
    assert r.exit_code == 1, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "passes run until the failure (export):"
    names = [line.split()[0] for line in lines[3:] if line and not line.startswith(("total:", "failed:"))]
    planned = PIPELINE.format(planted="planted").split(",")
    assert names == planned[: planned.index("planted") + 1]
    assert [line.split()[1] for line in lines[3:] if line.startswith("planted ")] == ["failed"]
    assert r.stderr.startswith("error: pass 'planted' failed: RuntimeError: planted failure")
    j = CliRunner().invoke(cli, ["run", str(cfg), "--repeat", "1", "--no-save", "--format", "json"])
    error = json.loads(j.stdout)["error"]
    assert [p["name"] for p in error["passes"]] == names
    assert error["passes"][-1]["status"] == "failed" and "report" not in error


def test_a_capture_other_than_a_saved_graphs_own_dialect_is_an_error(tmp_path):
    """`[model] graph = ...` with `capture = "symbolic_trace"` ran the saved export graph as it
    was, the capture silently ignored (as it is refused for a saved program: a new-user check)."""
    model = load_factory("models:convnet", EXAMPLES)()
    cap = capture(model, [torch.randn(1, 3, 8, 8)], "export")
    roundtrip(cap.gm, tmp_path)
    save_tensors(tmp_path / "inputs", {"0": cap.inputs[0]})
    for given, ok in (('capture = "symbolic_trace"\n', False), ('capture = "export"\n', True), ("", True)):
        cfg = tmp_path / "g.toml"
        cfg.write_text(f'pipeline = "eliminate_dead_code"\n[model]\ngraph = "graph.py"\ninputs = "inputs.safetensors"\n{given}')
        r = CliRunner().invoke(cli, ["run", str(cfg), "--no-save", "--repeat", "1"])
        if ok:
            assert r.exit_code == 0, r.output
        else:
            assert r.exit_code == 2 and (
                "[model] capture: [model] graph graph.py is a saved export graph, used as it is: "
                "`capture = 'symbolic_trace'` cannot apply to it; remove `capture` (or set it to 'export')"
            ) in r.output, r.output


def test_a_replayed_export_reproducer_can_be_saved(planted_site, tmp_path):
    """`fxpasses run DIR/fxpasses.json -o OUT` of an export capture's reproducer ran its pipeline
    and then failed to save: torch.fx's module writer cannot write the pytree code generator
    (`'OptimizedModule' object has no attribute '_in_spec'`), and OUT was left empty (a new-user
    check). A saved export graph is exported again, as an export capture is."""
    cfg = model_config(tmp_path, "planted{raise_at=2}", "export")
    rep = tmp_path / "repro"
    r = CliRunner().invoke(cli, ["run", str(cfg), "--reproducer", str(rep), "--repeat", "1", "--no-save"])
    assert r.exit_code == 1, r.output
    out = tmp_path / "replayed"
    r = CliRunner().invoke(cli, ["run", str(rep / "fxpasses.json"), "--pipeline", "eliminate_dead_code", "-o", str(out), "--repeat", "1"])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["model.pt2", "report.json"]
    from fxpasses.job import load_program
    from fxpasses.reproducer import load_example_inputs, load_graph

    args, kwargs = load_example_inputs(rep / "inputs.safetensors")
    torch.testing.assert_close(load_program(out / "model.pt2")(*args, **kwargs), load_graph(rep / "graph.py")(*args, **kwargs))


_WRAPPED_MODELS = '''
import torch


@torch.fx.wrap
def my_scale(x, s):
    return x * s


class WrapNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(my_scale(self.lin(x), 2.0))


def wrapnet():
    return WrapNet().eval()
'''


@pytest.mark.parametrize("factory", ["wrapped_models:wrapnet", "wrapped_models.py:wrapnet"])
def test_a_reproducer_of_a_graph_calling_model_code_names_it_and_replays_with_it(planted_site, tmp_path, factory):
    """A symbolic_trace graph calling a `torch.fx.wrap` function of the model's own module
    cannot replay without that module; the README said the replay needs no model code, and
    the replay's error said to install a package, even in the folder of the model's file (a
    new-user check). The reproducer's README names the function and its file and gives the
    replay command with that folder on PYTHONPATH; without it the error says so too. A factory
    given by file path (`models.py:net`, whose module is not importable by name) wrote no
    reproducer at all (a second new-user check)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "wrapped_models.py").write_text(_WRAPPED_MODELS)
    cfg = project / "fxpasses.toml"
    cfg.write_text(
        'pipeline = "planted{raise_at=1},eliminate_dead_code"\n'
        "[model]\n"
        f'factory = "{factory}"\n'
        'capture = "symbolic_trace"\n'
        "inputs = [{shape = [2, 4]}]\n"
    )
    rep = tmp_path / "repro"
    r = CliRunner().invoke(cli, ["run", str(cfg), "--reproducer", str(rep), "--repeat", "1", "--no-save"])
    assert r.exit_code == 1, r.output
    readme = (rep / "README.md").read_text()
    assert (
        "Replay it (needs fxpasses, the pass packages, and the model code the graph calls: "
        f"`wrapped_models.my_scale` ({project / 'wrapped_models.py'}); put its folder on PYTHONPATH, as below, "
        "or install its package):"
    ) in readme, readme
    assert f"    PYTHONPATH={project} fxpasses run {rep / 'fxpasses.json'}" in readme, readme
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = replay_in_subprocess(rep, planted_site, elsewhere)  # (the model's folder not on the path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "cannot import 'wrapped_models.my_scale'" in out.stderr and "put the folder of its module on PYTHONPATH" in out.stderr
    out = replay_in_subprocess(rep, Path(f"{planted_site}{os.pathsep}{project}"), elsewhere)
    assert out.returncode == 1, out.stderr
    assert failure_lines(out.stderr) == failure_lines(r.output)


def test_a_reproducer_of_a_failure_in_a_later_fixpoint_iteration_keeps_the_iterations_left(tmp_path):
    """A failure in iteration 2 of a fixpoint group was written as the group from the failing
    pass on with the whole `max_iterations` again, and nothing said that the replay counts
    iterations from 1 (a new-user check: a pass acting on `ctx.iteration` did not fail again).
    The replay's group gets the iterations the run had left, and its README says how the
    iterations are numbered. A failure after the group's first member replays the rest of its
    iteration once, then the whole group: the members before it were dropped."""
    import fxpasses
    from fxpasses.reproducer import ReproducerWriter

    class Grows(fxpasses.GraphPass):
        name = "grows_each_time"

        def run(self, gm, ctx):
            out = next(n for n in gm.graph.nodes if n.op == "output")
            with gm.graph.inserting_before(out):
                gm.graph.call_function(torch.add, (out.args[0], 0.0))  # (unused: dead code)
            return True

    class FailsLater(fxpasses.GraphPass):
        name = "fails_in_iteration_2"

        def run(self, gm, ctx):
            if ctx.iteration == 2:
                raise RuntimeError("iteration 2")
            return False

    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU()))
    pipeline = fxpasses.Pipeline([fxpasses.Fixpoint([Grows, FailsLater, "eliminate_dead_code"], max_iterations=5)])
    writer = ReproducerWriter(tmp_path / "repro", pipeline)
    with pytest.raises(fxpasses.PassFailedError, match="in iteration 2 of its fixpoint group"):
        pipeline.run(gm, [torch.randn(2, 3)], instruments=[writer])
    config = json.loads((tmp_path / "repro" / "fxpasses.json").read_text())
    # the rest of iteration 2 once, then the whole group (grows_each_time too, which the
    # replay dropped) for the 3 iterations the run had left
    rest, whole = config["pipeline"]
    assert [e["name"] for e in rest["fixpoint"]] == ["fails_in_iteration_2", "eliminate_dead_code"]
    assert rest["max_iterations"] == 1
    assert [e["name"] for e in whole["fixpoint"]] == ["grows_each_time", "fails_in_iteration_2", "eliminate_dead_code"]
    assert whole["max_iterations"] == 3
    readme = (tmp_path / "repro" / "README.md").read_text()
    assert "Pass `fails_in_iteration_2` (step 2 of 3, iteration 2 of its fixpoint group) failed:" in readme, readme
    assert (
        "The replay runs the rest of iteration 2 of its fixpoint group, from `fails_in_iteration_2` on, once, then "
        "the whole group for the 3 iteration(s) the run had left, numbered from 1 again (`ctx.iteration`): a pass "
        "that acts on `ctx.iteration` may act otherwise."
    ) in readme, readme
    # a failure at the group's first member: the group from there, for the iterations left
    pipeline = fxpasses.Pipeline([fxpasses.Fixpoint([FailsLater, Grows, "eliminate_dead_code"], max_iterations=5)])
    writer = ReproducerWriter(tmp_path / "repro2", pipeline)
    with pytest.raises(fxpasses.PassFailedError):
        pipeline.run(torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(3, 3))), [torch.randn(2, 3)], instruments=[writer])
    (group,) = json.loads((tmp_path / "repro2" / "fxpasses.json").read_text())["pipeline"]
    assert [e["name"] for e in group["fixpoint"]] == ["fails_in_iteration_2", "grows_each_time", "eliminate_dead_code"]
    assert group["max_iterations"] == 4
    # a failure in the group's last iteration, with another group after it: that group keeps
    # its own max_iterations (it was written with the failing iteration's 1)
    pipeline = fxpasses.Pipeline([
        fxpasses.Fixpoint([Grows, FailsLater], max_iterations=2),
        fxpasses.Fixpoint(["eliminate_dead_code"], max_iterations=5),
    ])
    writer = ReproducerWriter(tmp_path / "repro3", pipeline)
    with pytest.raises(fxpasses.PassFailedError):
        pipeline.run(torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(3, 3))), [torch.randn(2, 3)], instruments=[writer])
    rest, after = json.loads((tmp_path / "repro3" / "fxpasses.json").read_text())["pipeline"]
    assert ([e["name"] for e in rest["fixpoint"]], rest["max_iterations"]) == (["fails_in_iteration_2"], 1)
    assert ([e["name"] for e in after["fixpoint"]], after["max_iterations"]) == (["eliminate_dead_code"], 5)


def test_a_reproducer_says_it_does_not_hold_the_modules_hooks(planted_site, tmp_path):
    """A reproducer holds the graph and the tensors, not a module's hooks: a failure that
    depended on one (a pass removing a call whose hook changed the output) replayed as
    "outputs: match" without a word (a new-user check). The run warns, and the reproducer's
    README lists the hooks left out."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "hooked_models.py").write_text(
        "import torch\n"
        "class Hooked(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = torch.nn.Linear(4, 4)\n"
        "        self.lin.register_forward_hook(lambda m, i, o: o * 2)\n"
        "    def forward(self, x):\n"
        "        return torch.relu(self.lin(x))\n"
        "def hooked():\n    return Hooked().eval()\n"
    )
    cfg = project / "fxpasses.toml"
    cfg.write_text(
        'pipeline = "planted{raise_at=1}"\n[model]\nfactory = "hooked_models:hooked"\ncapture = "symbolic_trace"\n'
        "inputs = [{shape = [2, 4]}]\n"
    )
    rep = tmp_path / "repro"
    r = CliRunner().invoke(cli, ["run", str(cfg), "--reproducer", str(rep), "--repeat", "1", "--no-save"])
    assert r.exit_code == 1, r.output
    assert (
        "warning: the reproducer does not hold the modules' hooks, and its replay runs without them: "
        "lin: Linear has forward hooks"
    ) in r.output, r.output
    assert (
        "Not in the reproducer (the replay runs without them, so a failure that depends on them may not show): "
        "lin: Linear has forward hooks."
    ) in (rep / "README.md").read_text()


def test_a_tensor_file_holding_a_list_says_how_to_save_it_by_name(tmp_path):
    """`inputs = "inputs.pt"` holding `torch.save([x], ...)`: "does not hold a name -> tensor
    mapping" said neither what it held nor how to save it (a new-user check)."""
    from fxpasses.errors import ConfigError
    from fxpasses.reproducer import load_tensors

    path = tmp_path / "inputs.pt"
    torch.save([torch.ones(2)], path)
    with pytest.raises(ConfigError) as info:
        load_tensors(path)
    assert str(info.value) == (
        f"{path} does not hold a name -> tensor mapping (it holds list): save the positional inputs by position, "
        "torch.save({str(i): t for i, t in enumerate(inputs)}, path)"
    )
    torch.save({"0": torch.ones(2), "mask": [1]}, path)
    with pytest.raises(ConfigError, match=r"\(it holds a dict with values other than tensors\)$"):
        load_tensors(path)


def test_a_reproducer_keeps_the_entries_own_tolerances(planted_site, tmp_path):
    """The replayed entries are written with their settings: an entry's `atol`/`rtol` too."""
    cfg = model_config(tmp_path, "planted{wrong_at=3}[rtol=0.5]", extra='verify = "numeric"\n')
    text = cfg.read_text().replace(',fold_constants,', ',fold_constants[atol=1e-3],')
    assert text != cfg.read_text()
    cfg.write_text(text)
    rep = tmp_path / "repro"
    r = CliRunner().invoke(cli, ["run", str(cfg), "--reproducer", str(rep), "--repeat", "1", "--no-save"])
    assert r.exit_code == 1, r.output
    assert "pass 'planted' failed" in r.output and "rtol=0.5" in r.output
    config = json.loads((rep / "fxpasses.json").read_text())
    entries = {e["name"]: e for e in config["pipeline"]}
    # the failing entry: its check's tolerances (its own rtol; the pipeline's atol, which the
    # passes before it did not raise), with the module before the pipeline to replay against
    assert (entries["planted"]["rtol"], entries["planted"]["atol"]) == (0.5, config["atol"])
    assert config["model"]["reference"] == "reference.py"
    assert (entries["fold_constants"]["atol"], "rtol" in entries["fold_constants"]) == (1e-3, False)
    assert "atol" not in entries["eliminate_dead_code"]


class _Counting(torch.nn.Module):
    """Writes a buffer in its forward (numeric verification restores it after each call)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        self.count.add_(1)
        return self.lin(x).relu()


@pytest.mark.parametrize("snapshot, model", [(False, "plain"), (True, "plain"), (False, "counting")])
def test_a_reproducer_of_a_failure_that_needs_earlier_passes_difference_fails_again(tmp_path, snapshot, model):
    """Each check compares with the module before the pipeline, so a pass can fail by adding its
    difference to what earlier kept passes were allowed. The replay compared with the graph
    before the failing pass, and at the pipeline's tolerances: it passed, exit 0 (an
    adversarial check). The reproducer now holds the module before the pipeline
    (`reference.py`, `[model] reference`) and the failing check's tolerances. With
    `snapshot_tensors` (what `--reproducer` turns on) or a buffer the forward writes, the
    restores moved the tensors' version counters, taken for an earlier pass's write: no
    reference was written (a second check); the module's tensors are copied instead."""
    import fxpasses
    from fxpasses.config import load_config_file as load_config
    from fxpasses.job import run_job
    from fxpasses.reproducer import ReproducerWriter

    class Perturb(fxpasses.GraphPass):
        """Add eps to the output."""

        name = "perturb"
        writes_tensors = False

        class Options(fxpasses.PassOptions):
            eps: float = 0.0

        def run(self, gm, ctx):
            out = next(n for n in gm.graph.nodes if n.op == "output")
            with gm.graph.inserting_before(out):
                new = gm.graph.call_function(torch.add, (out.args[0], self.options.eps))
            out.args = (new,)
            return True

    registry = fxpasses.Registry(autoload=False)
    registry.register(Perturb)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()) if model == "plain" else _Counting()
    gm = torch.fx.symbolic_trace(net)
    x = torch.randn(2, 4)
    pipeline = fxpasses.Pipeline.from_string(
        "perturb{eps=0.005}[atol=1e-2],perturb{eps=0.008}[atol=1e-2]", registry=registry, verify="numeric", atol=0, rtol=0
    )
    pipeline.snapshot_tensors = snapshot
    writer = ReproducerWriter(tmp_path / "repro", pipeline)
    with pytest.raises(fxpasses.PassFailedError) as info:
        pipeline.run(gm, [x], instruments=[writer])
    assert info.value.pass_name == "perturb" and info.value.tolerances == (1e-2, 0.0)
    assert "max abs error 0.013" in str(info.value), str(info.value)
    rep = tmp_path / "repro"
    config = json.loads((rep / "fxpasses.json").read_text())
    assert config["model"] == {"graph": "graph.py", "inputs": "inputs.safetensors", "reference": "reference.py"}
    (entry,) = config["pipeline"]
    assert (entry["atol"], entry["rtol"]) == (1e-2, 0.0)
    # the reference is the module before the pipeline: no add
    assert [n.target for n in load_graph(rep / "reference.py").graph.nodes if n.target is torch.add] == []
    with pytest.raises(fxpasses.PassFailedError) as again:
        run_job(load_config(rep / "fxpasses.json"), registry=registry, repeat=1, save=False)
    assert "max abs error 0.013" in str(again.value), str(again.value)
    # bisect reads it too: the failure is found again
    from fxpasses.bisect import bisect

    cfg = load_config(rep / "fxpasses.json")
    replay = load_graph(rep / "graph.py")
    found = bisect(
        fxpasses.Pipeline._from_config_obj(cfg, registry=registry), replay, [load_tensors(rep / "inputs.safetensors")["0"]],
        reference_module=load_graph(rep / "reference.py"),
    )
    assert found.pass_name == "perturb" and "max abs error 0.013" in found.error, found.error
    # without the reference (as before), the replay passed: the second pass alone is 0.008 off
    config["model"].pop("reference")
    (rep / "fxpasses.json").write_text(json.dumps(config))
    result = run_job(load_config(rep / "fxpasses.json"), registry=registry, repeat=1, save=False)
    assert abs(result.max_abs_error - 0.008) < 1e-6


def test_a_bad_reference_is_named_as_such(tmp_path):
    """A missing `[model] reference` said "[model] reference: [model] reference: [model] graph:
    graph file not found"; a reference returning other shapes than the graph was not checked,
    and the first, correct, pass was blamed ("output: shape changed") (a second check)."""
    import fxpasses
    from fxpasses.config import load_config_file
    from fxpasses.job import run_job

    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()))
    x = torch.randn(2, 4)
    (tmp_path / "graph.py").write_text(graph_source(gm)[0])
    save_tensors(tmp_path / "tensors", graph_source(gm)[1])
    save_tensors(tmp_path / "inputs", {"0": x})
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({
        "pipeline": "eliminate_dead_code", "verify": "numeric",
        "model": {"graph": "graph.py", "inputs": "inputs.safetensors", "reference": "missing.py"},
    }))
    with pytest.raises(fxpasses.ConfigError) as info:
        run_job(load_config_file(cfg), repeat=1, save=False)
    text = str(info.value)
    assert text.count("[model] reference") == 1 and "[model] graph" not in text and "not found" in text, text

    class Other(torch.nn.Module):
        def forward(self, x):
            return x[:, :3]

    with pytest.raises(fxpasses.UserError, match=r"the reference module does not return what the graph returns: output 0 is "
                       r"torch.float32 of shape \(2, 3\) there, torch.float32 of shape \(2, 8\) in the graph"):
        fxpasses.Pipeline.from_string("eliminate_dead_code", verify="numeric").run(
            gm, [x], reference_module=torch.fx.symbolic_trace(Other())
        )


def test_a_reproducer_keeps_which_inputs_require_grad(tmp_path):
    """A TorchDynamo graph takes the model's parameters as inputs, which require grad; the
    inputs file held their values only, so the replay ran no backward, and a pass breaking
    the gradients replayed as "outputs: match", exit 0 (a second check). `[model]
    requires_grad` names them."""
    import fxpasses
    from fxpasses.config import load_config_file
    from fxpasses.job import run_job
    from fxpasses.reproducer import ReproducerWriter

    class DetachRelu(fxpasses.NodePass):
        """relu(x) -> relu(x.detach()): the same forward, no gradient through it."""

        name = "detach_relu"
        writes_tensors = False

        @fxpasses.on("relu")
        def rewrite(self, node, ctx):
            if node.args[0].op == "call_method" and node.args[0].target == "detach":
                return None
            d = ctx.call_method("detach", (node.args[0],))
            return fxpasses.Replace(ctx.call_function(torch.relu, (d,)))

    registry = fxpasses.Registry(autoload=False)
    registry.register(DetachRelu)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    cap = capture(model, [torch.randn(3, 4)], "dynamo")
    assert any(t.requires_grad for t in cap.inputs)
    pipeline = fxpasses.Pipeline(["detach_relu"], registry=registry, verify="numeric")
    writer = ReproducerWriter(tmp_path / "repro", pipeline)
    with pytest.raises(fxpasses.PassFailedError, match="gradient"):
        pipeline.run(cap.gm, cap.inputs, instruments=[writer])
    config = json.loads((tmp_path / "repro" / "fxpasses.json").read_text())
    assert config["model"]["requires_grad"] == [str(i) for i, t in enumerate(cap.inputs) if t.requires_grad]
    with pytest.raises(fxpasses.PassFailedError, match="gradient"):
        run_job(load_config_file(tmp_path / "repro" / "fxpasses.json"), registry=registry, repeat=1, save=False)
    config["model"]["requires_grad"] = ["9"]
    (tmp_path / "repro" / "bad.json").write_text(json.dumps(config))
    with pytest.raises(fxpasses.ConfigError) as info:
        run_job(load_config_file(tmp_path / "repro" / "bad.json"), registry=registry, repeat=1, save=False)
    assert str(info.value).endswith("bad.json: [model] requires_grad: '9' is not an input (inputs: 0, 1, 2, 3, 4)"), str(info.value)


class _Transposed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.p = torch.nn.Parameter(torch.randn(8, 6).t())  # strides (1, 6)
        self.register_buffer("v", self.p.detach()[1:3])  # a view of p's storage

    def forward(self, x):
        return self.p * x, self.v + x.sum()


@pytest.mark.parametrize("where", ["parameter", "input"])
def test_a_reproducer_keeps_strides_and_views_so_a_layout_failure_replays(tmp_path, where):
    """The reproducer stored every tensor contiguous (safetensors holds only those) and each
    view as a copy of its own: a pass that changed an output's strides failed the run (numeric
    verification compares strides) and passed the replay, exit 0 (an adversarial check). The
    storages are stored once, with each tensor's dtype, sizes, strides and offset."""
    import fxpasses
    from fxpasses.config import load_config_file as load_config
    from fxpasses.job import run_job
    from fxpasses.reproducer import ReproducerWriter

    class Contiguous(fxpasses.GraphPass):
        """Make the first output contiguous."""

        name = "make_contiguous"
        writes_tensors = False

        def run(self, gm, ctx):
            out = next(n for n in gm.graph.nodes if n.op == "output")
            first = out.args[0][0]
            with gm.graph.inserting_before(out):
                new = gm.graph.call_method("contiguous", (first,))
            out.args = ((new, *out.args[0][1:]),)
            return True

    registry = fxpasses.Registry(autoload=False)
    registry.register(Contiguous)
    torch.manual_seed(0)
    net = _Transposed()
    if where == "parameter":
        x = torch.randn(1)
    else:  # a channels_last input: p * x broadcast keeps x's layout
        net.p = torch.nn.Parameter(torch.randn(1))
        x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    gm = torch.fx.symbolic_trace(net)
    pipeline = fxpasses.Pipeline(["make_contiguous"], registry=registry, verify="numeric")
    writer = ReproducerWriter(tmp_path / "repro", pipeline)
    with pytest.raises(fxpasses.PassFailedError) as info:
        pipeline.run(gm, [x], instruments=[writer])
    assert "output[0]: strides" in str(info.value), str(info.value)
    rep = tmp_path / "repro"
    tensors, inputs = load_tensors(rep / "tensors.safetensors"), load_tensors(rep / "inputs.safetensors")
    if where == "parameter":
        assert tensors["p"].stride() == (1, 6) and torch.equal(tensors["p"], net.p.detach())
        # the view shares the parameter's storage again, at its offset
        assert tensors["v"].untyped_storage().data_ptr() == tensors["p"].untyped_storage().data_ptr()
        assert tensors["v"].storage_offset() == 1 and torch.equal(tensors["v"], net.v)
    else:
        assert inputs["0"].stride() == x.stride() and torch.equal(inputs["0"], x)
    with pytest.raises(fxpasses.PassFailedError) as again:
        run_job(load_config(rep / "fxpasses.json"), registry=registry, repeat=1, save=False)
    assert "output[0]: strides" in str(again.value), str(again.value)


class _Scaled(torch.nn.Module):
    def forward(self, x, scale):
        y = x.relu() * scale.unsqueeze(-1)
        return y.reshape(-1), x.shape[0] * 2


def _dynamic_export():
    from torch.export import Dim

    batch = Dim("batch", min=2, max=64)
    x, s = torch.randn(4, 8), torch.randn(4)
    ep = torch.export.export(_Scaled(), (x, s), dynamic_shapes={"x": {0: batch}, "scale": {0: batch}})
    return ep.module(), [x, s]


def test_a_graph_with_symbolic_sizes_is_written_with_them(tmp_path):
    """The reproducer wrote `int(size)` of each symbolic size, which gives its example value
    (the comment said a SymInt raises): a graph exported with dynamic shapes came back with the
    example's sizes (an adversarial check). Each size is written as its expression over the
    graph's symbols, which keep their example values and ranges."""
    gm, _ = _dynamic_export()
    loaded = roundtrip(gm, tmp_path)
    for a, b in zip(gm.graph.nodes, loaded.graph.nodes, strict=True):
        va, vb = a.meta.get("val"), b.meta.get("val")
        if isinstance(va, torch.Tensor):
            # (writing it did not specialise the graph's own sizes either: int() of a
            # symbolic size in tensor_meta guarded on it, and the user's ShapeEnv replaced
            # the symbol by 4)
            assert all(isinstance(d, torch.SymInt) for d in va.shape[:1]), (a.name, va.shape)
            assert [type(d) for d in vb.shape] == [type(d) for d in va.shape], (a.name, va.shape, vb.shape)
        elif isinstance(va, torch.SymInt):
            assert isinstance(vb, torch.SymInt) and vb.node.hint == va.node.hint
    x_val = next(iter(loaded.graph.nodes)).meta["val"]
    batch = x_val.shape[0]
    assert isinstance(batch, torch.SymInt) and batch.node.hint == 4
    env = batch.node.shape_env
    rng = env.var_to_range[batch.node.expr]
    assert (int(rng.lower), int(rng.upper)) == (2, 64)
    reshape = next(n for n in loaded.graph.nodes if n.name == "reshape").meta["val"]
    assert str(reshape.shape[0]) == f"8*{batch.node.expr}"


def test_a_size_dependent_failure_of_a_dynamic_graph_replays(tmp_path):
    """A pass that wrote the example's size into the graph failed the run (lint: a SymInt the
    code cannot spell) and passed the replay, whose sizes were concrete."""
    import fxpasses
    from fxpasses.config import load_config_file as load_config
    from fxpasses.job import run_job
    from fxpasses.reproducer import ReproducerWriter

    class Bake(fxpasses.NodePass):
        """Reshape each relu's input to its recorded sizes."""

        name = "bake_sizes"
        writes_tensors = False
        journal_edits = True

        @fxpasses.on("relu")
        def relu(self, node, ctx):
            x = node.args[0]
            shaped = ctx.call_function(torch.ops.aten.reshape.default, (x, list(x.meta["val"].shape)))
            return fxpasses.Replace(ctx.call_function(torch.ops.aten.relu.default, (shaped,)))

    registry = fxpasses.Registry(autoload=False)
    registry.register(Bake)
    gm, inputs = _dynamic_export()
    pipeline = fxpasses.Pipeline(["bake_sizes"], registry=registry, verify="numeric")
    writer = ReproducerWriter(tmp_path / "repro", pipeline)
    with pytest.raises(fxpasses.PassFailedError) as info:
        pipeline.run(gm, inputs, instruments=[writer])
    assert "cannot spell" in str(info.value) and "SymInt" in str(info.value), str(info.value)
    with pytest.raises(fxpasses.PassFailedError) as again:
        run_job(load_config(tmp_path / "repro" / "fxpasses.json"), registry=registry, repeat=1, save=False)
    assert "cannot spell" in str(again.value) and "SymInt" in str(again.value), str(again.value)


def test_a_dynamo_graph_with_symbolic_sizes_and_floor_division_is_written_with_them(tmp_path):
    """torch.compile(dynamic=True): sizes are graph inputs and `x.shape[0] // 2` is torch's
    FloorDiv, which prints as `(s77//2)` and sympy reads as floor(s77/2): written as sympy's repr."""

    class Half(torch.nn.Module):
        def forward(self, x):
            return (x.relu() * 2).reshape(-1)[: x.shape[0] // 2]

    captured = {}

    def backend(gm, inputs):
        captured["gm"] = gm
        return gm

    torch._dynamo.reset()
    torch.compile(Half(), backend=backend, dynamic=True)(torch.randn(6, 3))
    gm = captured["gm"]
    src, _ = graph_source(gm)
    assert "b.sym_repr(\"FloorDiv(" in src and "b.sym('s" in src, src
    loaded = roundtrip(gm, tmp_path)
    shapes = {n.name: n.meta.get("example_value") for n in loaded.graph.nodes}
    first, second = (n for n in loaded.graph.nodes if n.op == "placeholder" and isinstance(shapes[n.name], torch.SymInt))
    s0, s1 = shapes[first.name].node.expr, shapes[second.name].node.expr
    assert str(shapes["floordiv"].node.expr) == str(sympy_floordiv(s0)) and shapes["floordiv"].node.hint == 3
    assert [str(d) for d in shapes["reshape"].shape] == [str(s0 * s1)]
    assert torch.equal(loaded(6, 3, torch.ones(6, 3))[0], torch.full((3,), 2.0))


def sympy_floordiv(s):
    from torch.utils._sympy.functions import FloorDiv

    return FloorDiv(s, 2)


def test_symbolic_sizes_with_max_and_min_are_written(tmp_path):
    """torch's Max and Min are not in its sympy module's __all__: sizes holding them (a conv's
    output `Max(1, s16 - 2)`) did not read back and their nodes' values were dropped (a
    second check)."""
    from torch.export import Dim

    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()).eval()
    ep = torch.export.export(conv, (torch.randn(2, 3, 16, 16),), dynamic_shapes=({0: Dim.DYNAMIC, 2: Dim.DYNAMIC, 3: Dim.DYNAMIC},))
    gm = ep.module()
    src, _ = graph_source(gm)
    assert "node meta['val']" not in src and "node meta['tensor_meta']" not in src, src[:2000]
    loaded = roundtrip(gm, tmp_path)
    before = [n.name for n in gm.graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)]
    after = [n.name for n in loaded.graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)]
    assert after == before and "relu" in after
    relu = next(n for n in loaded.graph.nodes if n.name == "relu").meta["val"]
    assert any("Max" in str(d) for d in (*relu.shape, *relu.stride())), (relu.shape, relu.stride())


def test_a_small_view_of_a_large_storage_stores_its_bytes_only(tmp_path):
    """The whole storage was written for a 10-element view of a 10-million-element buffer
    (40 MB); and a tensor named like a storage took its place (a second check)."""
    big = torch.arange(10_000_000, dtype=torch.float32)
    tensors = {"small": big[1000:1010], "strided": big[2000:2100:10], "__storage_0": torch.ones(3)}
    path = save_tensors(tmp_path / "t", tensors)
    assert path.stat().st_size < 10_000
    back = load_tensors(path)
    assert list(back) == list(tensors)
    for k, v in tensors.items():
        assert torch.equal(back[k], v) and back[k].stride() == v.stride(), k
    assert back["small"].untyped_storage().data_ptr() == back["strided"].untyped_storage().data_ptr()


def test_options_json_cannot_hold_are_a_reproducer_error_and_non_finite_floats_replay():
    """A bytes option that is not UTF-8 made writing the reproducer raise UnicodeDecodeError;
    and nan/inf options were written "nan"/"inf" (fxpasses' JSON spells them so), which the
    replay refused for a float (a second check)."""
    import math

    import fxpasses
    from fxpasses.reproducer import ReproducerError, _entry

    class Knobs(fxpasses.GraphPass):
        name = "knobs"

        class Options(fxpasses.PassOptions):
            f: float = 0.0
            g: float = 0.0
            data: bytes = b""

        def run(self, gm, ctx):
            return False

    reg = fxpasses.Registry(autoload=False)
    reg.register(Knobs)
    step = fxpasses.Pipeline(["knobs"], registry=reg, options={"knobs": {"data": b"\xff"}}).plan().steps[0]
    with pytest.raises(ReproducerError, match="the options of pass 'knobs' cannot be written as JSON"):
        _entry(step, "lint", "rollback")
    step = fxpasses.Pipeline.from_string("knobs{f=nan,g=-inf}", registry=reg).plan().steps[0]
    from fxpasses._json import dumps

    entry = json.loads(dumps(_entry(step, "lint", "rollback")))  # (as the reproducer writes fxpasses.json)
    assert entry["options"] == {"f": "nan", "g": "-inf"}
    again = fxpasses.Pipeline.from_config({"pipeline": [entry]}, registry=reg).plan().steps[0].options
    assert math.isnan(again.f) and again.g == float("-inf")


class _Range(BaseModel):
    lo: float = 0.0
    hi: Optional[float] = Field(default=None, alias="high")


class _DeepFloatsPass(fxpasses.GraphPass):
    """Non-finite floats in lists, tuples, dicts and nested models, beside text."""

    name = "deep_floats"

    class Options(fxpasses.PassOptions):
        lf: list[float] = []
        d: dict[str, float] = {}
        nested: _Range = _Range()
        ranges: dict[str, list[_Range]] = {}
        t: tuple[float, str] = (0.0, "")
        maybe: Optional[list[Union[Annotated[float, Field(le=0)], int]]] = None
        either: list[Union[float, str]] = []
        words: list[str] = []
        positive: list[Annotated[float, Field(ge=0)]] = []

    def run(self, gm, ctx):
        return False


def test_non_finite_floats_replay_at_any_depth_and_text_stays_text():
    """The reproducer writes options with fxpasses' JSON ("nan", "inf", "-inf" for floats that
    are not finite); the replay read that spelling only for a top-level float option: in a
    list, a dict or a nested model it was "Input should be a valid number (given: 'nan')" (an
    adversarial check). It is read by the type at each place: a float where one is taken, the
    text where text is (a str, or a float | str union, holding "nan" stays "nan")."""
    import math

    from fxpasses._json import dumps
    from fxpasses.reproducer import _entry

    reg = fxpasses.Registry(autoload=False)
    reg.register(_DeepFloatsPass)
    nan, inf = float("nan"), float("inf")
    options = {
        "lf": [nan, -inf, 1.5],
        "d": {"a": inf},
        "nested": {"lo": nan, "high": -inf},
        "ranges": {"r": [{"lo": -inf}]},
        "t": (inf, "nan"),
        "maybe": [-inf, 2],
        "either": ["nan", "inf"],
        "words": ["nan", "-inf"],
    }
    step = fxpasses.Pipeline([(_DeepFloatsPass, options)], registry=reg).plan().steps[0]
    written = json.loads(dumps({"pipeline": [_entry(step, "lint", "raise")]}))  # (as fxpasses.json holds it)
    assert written["pipeline"][0]["options"]["lf"] == ["nan", "-inf", 1.5]
    again = fxpasses.Pipeline.from_config(written, registry=reg).plan().steps[0].options
    assert math.isnan(again.lf[0]) and again.lf[1:] == [-inf, 1.5]
    assert again.d == {"a": inf}
    assert math.isnan(again.nested.lo) and again.nested.hi == -inf
    assert again.ranges["r"][0].lo == -inf
    assert again.t[0] == inf and again.t[1] == "nan"
    assert again.maybe == [-inf, 2] and type(again.maybe[1]) is int
    assert again.either == ["nan", "inf"] and again.words == ["nan", "-inf"]
    # a value read so is still checked against its constraints
    with pytest.raises(fxpasses.OptionsError) as info:
        fxpasses.Pipeline.from_config({"pipeline": [{"name": "deep_floats", "options": {"positive": ["-inf"]}}]}, registry=reg)
    assert [p[:2] for p in info.value.problems] == [("positive.0", "Input should be greater than or equal to 0")]


COMPENSATED_SOURCE = '''
import fxpasses
from fxpasses import Replace


class Compensated(fxpasses.NodePass):
    """x * 2 -> x * 4 at the first match and x * 1 at the second: wrong alone, right together."""

    name = "compensated"

    def setup(self, gm, ctx):
        self.n = 0

    @fxpasses.on("mul", op="call_function")
    def visit(self, node, ctx):
        if node.args[1] != 2:
            return None
        self.n += 1
        factor = 4 if self.n == 1 else 1 if self.n == 2 else 2
        return Replace(ctx.call_function(node.target, (node.args[0], factor)))


@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register(Compensated)
'''

DOUBLES_SOURCE = '''
import torch


class Doubles(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.lin(x)).relu() * 2 * 2 + x * 2


def doubles():
    torch.manual_seed(0)
    return Doubles().eval()
'''


def test_a_reproducer_of_a_run_under_a_rewrite_limit_replays_with_the_limit(tmp_path, monkeypatch):
    """`fxpasses run CONFIG --rewrite-limit N --reproducer DIR` (bisect's "reproduce with"
    command plus --reproducer) wrote a reproducer whose replay, `fxpasses run DIR/fxpasses.json`,
    applied every rewrite of the failing pass: a failure that needed the limit (a wrong rewrite
    that a later one undoes) replayed as "outputs: match", exit 0. The replay command (printed
    and in the README) now gives what the limit left when the failing pass started."""
    from dists import installed_dist

    project = tmp_path / "project"
    project.mkdir()
    (project / "doubles_models.py").write_text(DOUBLES_SOURCE)
    cfg = project / "fxpasses.toml"
    cfg.write_text(
        'pipeline = "remove_dropout,compensated,eliminate_dead_code"\nverify = "numeric"\n'
        '[model]\nfactory = "doubles_models:doubles"\ncapture = "export"\ninputs = [{shape = [3, 4]}]\n'
    )
    with installed_dist(monkeypatch, tmp_path / "site", "compensated-passes", "0.1", "fxp_compensated", COMPENSATED_SOURCE):
        run = ["run", str(cfg), "--repeat", "1", "--no-save"]
        whole = CliRunner().invoke(cli, run)
        assert whole.exit_code == 0, whole.output  # the pass's two wrong rewrites cancel out
        rep = tmp_path / "repro"
        # remove_dropout's rewrite is #1, compensated's first #2: stop there
        r = CliRunner().invoke(cli, [*run, "--rewrite-limit", "2", "--reproducer", str(rep)])
        assert r.exit_code == 1, r.output
        assert "pass 'compensated' failed: verification failed" in r.output
        assert f"replay it with: fxpasses run {rep / 'fxpasses.json'} --rewrite-limit 1" in r.output
        readme = (rep / "README.md").read_text()
        assert f"    fxpasses run {rep / 'fxpasses.json'} --rewrite-limit 1\n" in readme, readme
        replay = CliRunner().invoke(cli, ["run", str(rep / "fxpasses.json"), "--repeat", "1", "--no-save", "--rewrite-limit", "1"])
        assert replay.exit_code == 1, replay.output
        assert failure_lines(replay.output) == failure_lines(r.output)
        assert "rewrite limit 1: 1 rewrite counted (1 rolled back with compensated, not in the graph)" in replay.output
        # --format json gives the replay command beside the reproducer's path
        r = CliRunner().invoke(cli, [*run, "--rewrite-limit", "2", "--reproducer", str(tmp_path / "repro3"), "--format", "json"])
        assert r.exit_code == 1
        error = json.loads(r.stdout)["error"]
        assert error["reproducer"] == str(tmp_path / "repro3" / "fxpasses.json")
        assert error["replay_command"] == ["fxpasses", "run", error["reproducer"], "--rewrite-limit", "1"]
        # a run without a limit: the replay command is the plain one
        rep2 = tmp_path / "repro2"
        r = CliRunner().invoke(cli, [*run, "--pipeline", "compensated{}", "--reproducer", str(rep2)])
    assert r.exit_code == 0, r.output  # (nothing failed: nothing written)
    assert not (rep2 / "fxpasses.json").exists()


STALE_REFERENCE_MODEL = """
import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.lin(x) * 1) + x


def m():
    return M()
"""


def test_a_reused_reproducer_folder_loses_the_earlier_reproducers_files(planted_site, tmp_path, monkeypatch):
    """`--reproducer DIR` into a folder holding an earlier reproducer left that one's
    reference.py and reference_tensors.safetensors (another failure's module and weights)
    beside a new reproducer without a reference, without a word (a new-user check); so did a
    tensors.pt beside a new tensors.safetensors. The files of the earlier reproducer (told by
    its README's first line, named by its fxpasses.json and graph files) that the new one
    does not write are now removed, a warning line naming them; the folder's other files
    stay, those named like a reproducer's among them, and so does a folder that holds none."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(STALE_REFERENCE_MODEL)
    (tmp_path / "c.toml").write_text(
        'verify = "numeric"\n[model]\nfactory = "m:m"\ncapture = "export"\ntrain = true\n'
        'inputs = [{shape = [2, 8], dtype = "float32"}]\n'
    )
    rep = tmp_path / "rep"
    written = ["README.md", "error.txt", "fxpasses.json", "graph.py"]

    def run(pipeline, folder="rep"):
        r = CliRunner().invoke(cli, ["run", "c.toml", "--pipeline", pipeline, "--reproducer", folder, "--repeat", "1", "--no-save"])
        assert r.exit_code == 1 and f"written to {folder}; replay it with" in r.stderr, r.output
        return r

    def removed(names):
        return f"warning: rep: removed {names}, written there by an earlier reproducer and not by this one"

    # a numeric failure after a pass that changed the graph: with the module before the pipeline
    r = run("simplify_algebra,remove_dropout{inference=true}")
    assert "warning:" not in r.stderr, r.stderr
    reference = ["reference.py", "reference_tensors.safetensors"]
    assert sorted(os.listdir(rep)) == sorted([*written, "inputs.safetensors", "tensors.safetensors", *reference])
    (rep / "notes.txt").write_text("mine")
    (rep / "reference_tensors.pt").write_text("mine too")  # (named like a reproducer's: not the earlier one's)
    mine = ["notes.txt", "reference_tensors.pt"]
    # a crash: no reference
    r = run("planted{raise_at=1}")
    assert removed("reference.py, reference_tensors.safetensors") in r.stderr.splitlines(), r.stderr
    assert sorted(os.listdir(rep)) == sorted([*written, "inputs.safetensors", "tensors.safetensors", *mine])
    assert json.loads((rep / "fxpasses.json").read_text())["model"] == {"graph": "graph.py", "inputs": "inputs.safetensors"}
    # tensor files written by torch.save (safetensors missing), then as safetensors again
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "safetensors", None)
        m.setitem(sys.modules, "safetensors.torch", None)
        r = run("planted{raise_at=1}")
    assert removed("inputs.safetensors, tensors.safetensors") in r.stderr.splitlines(), r.stderr
    assert sorted(os.listdir(rep)) == sorted([*written, "inputs.pt", "tensors.pt", *mine])
    r = run("planted{raise_at=1}")
    assert removed("inputs.pt, tensors.pt") in r.stderr.splitlines(), r.stderr
    assert sorted(os.listdir(rep)) == sorted([*written, "inputs.safetensors", "tensors.safetensors", *mine])
    assert (rep / "notes.txt").read_text() == "mine" and (rep / "reference_tensors.pt").read_text() == "mine too"
    r = run("planted{raise_at=1}")  # the same files again: no word
    assert "warning:" not in r.stderr, r.stderr
    # a folder without a reproducer of fxpasses' (its README is the user's): nothing removed
    other = tmp_path / "other"
    other.mkdir()
    (other / "README.md").write_text("# my notes\n")
    (other / "fxpasses.json").write_text('{"model": {"graph": "graph.py", "inputs": "inputs.pt", "reference": "reference.py"}}')
    (other / "inputs.pt").write_text("mine")
    (other / "reference.py").write_text("mine")
    r = run("planted{raise_at=1}", "other")
    assert "warning:" not in r.stderr, r.stderr
    assert (other / "inputs.pt").read_text() == "mine" and (other / "reference.py").read_text() == "mine"
