"""torch.compile(model, backend="fxpasses")."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch import nn

import fxpasses
import fxpasses.backend as backend


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        y = self.drop(self.lin(x)) * 1
        return (y + 0).relu() - y.sigmoid()


class Broken(Net):
    def forward(self, x):
        y = self.drop(self.lin(x)) * 1
        torch._dynamo.graph_break()
        return (y + 0).relu()


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    backend.reports.clear()
    yield
    torch._dynamo.reset()


def test_registered_through_entry_point_and_outputs_match_eager():
    model = Net().eval()
    x = torch.randn(4, 8)
    compiled = torch.compile(model, backend="fxpasses", options={"then": "eager", "pipeline": "remove_dropout,simplify_algebra,eliminate_dead_code"})
    torch.testing.assert_close(compiled(x), model(x))
    (report,) = backend.reports
    assert report.dialect == "dynamo"
    assert report["remove_dropout"].counters == {"removed": 1}
    # x * 1 goes; y + 0 stays (it would turn -0.0 into +0.0)
    assert report["simplify_algebra"].counters["simplified"] == 1
    assert report.nodes_after == report.nodes_before - 2


def test_graph_breaks_each_graph_goes_through_the_pipeline():
    model = Broken().eval()
    x = torch.randn(4, 8)
    compiled = torch.compile(model, backend="fxpasses", options={"then": "eager", "pipeline": "remove_dropout,simplify_algebra"})
    torch.testing.assert_close(compiled(x), model(x))
    assert len(backend.reports) == 2
    # x * 1 before the break goes; y + 0 after it stays (signed zeros)
    assert [r["simplify_algebra"].counters.get("simplified", 0) for r in backend.reports] == [1, 0]


def test_pipeline_from_environment(monkeypatch):
    monkeypatch.setenv("FXPASSES_PIPELINE", "remove_dropout")
    model = Net().eval()
    torch.compile(model, backend="fxpasses", options={"then": "eager"})(torch.randn(2, 8))
    assert [p.name for p in backend.reports[-1].passes] == ["remove_dropout"]


def test_pipeline_from_pyproject(tmp_path, monkeypatch):
    monkeypatch.delenv("FXPASSES_PIPELINE", raising=False)
    (tmp_path / "pyproject.toml").write_text('[tool.fxpasses]\npipeline = "simplify_algebra"\n')
    monkeypatch.chdir(tmp_path)
    torch.compile(Net().eval(), backend="fxpasses", options={"then": "eager"})(torch.randn(2, 8))
    assert [p.name for p in backend.reports[-1].passes] == ["simplify_algebra"]
    (tmp_path / "pyproject.toml").write_text('[tool.fxpasses]\npipeline = "simplify_algebra{"\n')
    torch._dynamo.reset()
    with pytest.raises(Exception) as info:
        torch.compile(Net().eval(), backend="fxpasses", options={"then": "eager"})(torch.randn(2, 8))
    assert "pyproject.toml [tool.fxpasses]: pipeline string, column" in str(info.value)


def _compile_under(tmp_path, monkeypatch, table, **options):
    """Compile Net() (eval) with the backend, under a pyproject.toml holding ``table``; the report."""
    monkeypatch.delenv("FXPASSES_PIPELINE", raising=False)
    (tmp_path / "pyproject.toml").write_text("[tool.fxpasses]\n" + table)
    monkeypatch.chdir(tmp_path)
    torch._dynamo.reset()
    model = Net().eval()
    x = torch.randn(2, 8)
    torch.testing.assert_close(torch.compile(model, backend="fxpasses", options={"then": "eager", **options})(x), model(x))
    return backend.reports[-1]


def test_the_pyprojects_preset_options_tables_and_settings_apply(tmp_path, monkeypatch):
    """The backend took only `pipeline` from [tool.fxpasses]: a `preset`, the [options.NAME]
    tables and `verify` were dropped without a word (a new-user check)."""
    report = _compile_under(tmp_path, monkeypatch, 'preset = "inference"\n')
    preset = fxpasses.Pipeline.from_preset("inference").plan().names()
    assert [p.name for p in report.passes] == preset
    table = 'pipeline = "simplify_algebra"\nverify = "numeric"\n[tool.fxpasses.options.simplify_algebra]\nkeep_signed_zeros = false\n'
    report = _compile_under(tmp_path, monkeypatch, table)
    assert report.verification == "numeric"
    assert report["simplify_algebra"].counters["simplified"] == 2  # y * 1 and y + 0
    # a torch.compile option overrides the table's setting
    assert _compile_under(tmp_path, monkeypatch, table, verify="lint").verification == "lint"


def test_the_default_pipeline_takes_the_pyprojects_options_for_its_passes(tmp_path, monkeypatch):
    table = (
        'verify = "numeric"\n[tool.fxpasses.options.simplify_algebra]\nkeep_signed_zeros = false\n'
        "[tool.fxpasses.options.fold_constants]\nmax_numel = 10\n"  # for `fxpasses run`'s preset: left
    )
    report = _compile_under(tmp_path, monkeypatch, table)
    assert [p.name for p in report.passes] == backend.DEFAULT_BACKEND_PIPELINE.split(",")
    assert report.verification == "numeric"
    assert report["simplify_algebra"].counters["simplified"] == 2


@pytest.mark.parametrize(
    "table",
    [
        'pipeline = "simplify_algebra"\n[tool.fxpasses.options.simplify_algebr]\nkeep_signed_zeros = false\n',
        "[tool.fxpasses.options.simplify_algebr]\nkeep_signed_zeros = false\n",
    ],
    ids=["with-pipeline", "default-pipeline"],
)
def test_a_misspelt_options_table_in_the_pyproject_is_an_error(tmp_path, monkeypatch, table):
    with pytest.raises(Exception) as info:
        _compile_under(tmp_path, monkeypatch, table)
    assert "simplify_algebr" in str(info.value) and "did you mean 'simplify_algebra'" in str(info.value)


@pytest.mark.parametrize("given", ["option", "environment"])
def test_the_pyprojects_settings_and_tables_apply_to_a_pipeline_given_elsewhere(tmp_path, monkeypatch, given):
    """A project-wide `verify = "numeric"` stopped applying once the pipeline came from the
    torch.compile options or FXPASSES_PIPELINE, where `fxpasses check --pipeline` keeps it
    (a new-user check)."""
    table = (
        'verify = "numeric"\n[tool.fxpasses.options.simplify_algebra]\nkeep_signed_zeros = false\n'
        "[tool.fxpasses.options.fold_constants]\nmax_numel = 10\n"  # a pass it does not run: left
    )
    options = {"pipeline": "simplify_algebra"} if given == "option" else {}
    if given == "environment":
        monkeypatch.setenv("FXPASSES_PIPELINE", "simplify_algebra")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.fxpasses]\n" + table)
    model = Net().eval()
    x = torch.randn(2, 8)
    torch.testing.assert_close(torch.compile(model, backend="fxpasses", options={"then": "eager", **options})(x), model(x))
    report = backend.reports[-1]
    assert [p.name for p in report.passes] == ["simplify_algebra"]
    assert report.verification == "numeric"
    assert report["simplify_algebra"].counters["simplified"] == 2


def test_an_invalid_model_section_of_the_pyproject_does_not_stop_torch_compile(tmp_path, monkeypatch):
    """[model] and output are `fxpasses run`'s: a bad one made every torch.compile under that
    directory fail (a new-user check)."""
    table = 'pipeline = "remove_dropout"\noutput = "out"\n[tool.fxpasses.model]\nfactory = "models:nothing_here"\ntrain = "yes"\n'
    assert [p.name for p in _compile_under(tmp_path, monkeypatch, table).passes] == ["remove_dropout"]


def test_a_misspelt_then_is_named_before_any_pipeline_runs():
    with pytest.raises(Exception) as info:
        torch.compile(Net(), backend="fxpasses", options={"then": "indcutor"})(torch.randn(2, 8))
    assert "torch.compile option 'then' names no TorchDynamo backend: 'indcutor'; did you mean 'inductor'?" in str(info.value)
    assert not backend.reports


@pytest.mark.parametrize(
    ("then", "message", "reports"),
    [
        (lambda gm: gm, "torch.compile option 'then' must take (gm, example_inputs), as a TorchDynamo backend does", 0),
        ("fxpasses", "torch.compile option 'then' is 'fxpasses', this backend itself: the pipeline would run twice", 0),
        (lambda gm, inputs: 3, "returned int 3, not the callable a TorchDynamo backend returns", 1),
    ],
    ids=["signature", "itself", "returns"],
)
def test_a_bad_then_callable_is_named_as_the_option(then, message, reports):
    """A `then` callable of the wrong signature failed with a bare TypeError after the pipeline
    had run, one returning no callable with torch's "compiler_fn did not return callable", and
    `then="fxpasses"` ran the pipeline twice (a new-user check)."""
    with pytest.raises(Exception) as info:
        torch.compile(Net().eval(), backend="fxpasses", options={"then": then})(torch.randn(2, 8))
    assert message in str(info.value)
    assert len(backend.reports) == reports  # a wrong signature or name: before any pipeline


def test_default_pipeline_then_inductor(tmp_path, monkeypatch):
    monkeypatch.delenv("FXPASSES_PIPELINE", raising=False)
    monkeypatch.chdir(tmp_path)  # no pyproject.toml with [tool.fxpasses] above
    model = Net().eval()
    x = torch.randn(4, 8)
    compiled = torch.compile(model, backend="fxpasses")
    torch.testing.assert_close(compiled(x), model(x))
    assert [p.name for p in backend.reports[-1].passes] == backend.DEFAULT_BACKEND_PIPELINE.split(",")


def test_unknown_option_is_named():
    with pytest.raises(Exception) as info:
        torch.compile(Net(), backend="fxpasses", options={"pipline": "x"})(torch.randn(2, 8))
    assert "unknown torch.compile option(s) for backend 'fxpasses': pipline" in str(info.value)


def test_unknown_option_suggests_the_close_known_one():
    with pytest.raises(Exception) as info:
        torch.compile(Net(), backend="fxpasses", options={"pipelin": "x", "ATOL": 1})(torch.randn(2, 8))
    assert (
        "ConfigError: unknown torch.compile option(s) for backend 'fxpasses': ATOL, pipelin (known: atol, "
        "freeze, on_error, pipeline, plugins, preset, pyproject, rtol, then, verify); did you mean 'atol' or 'pipeline'?\n"
    ) in str(info.value)


def test_capture_keeps_working_past_dynamos_recompile_limit():
    from fxpasses.capture import capture

    class Scaled(nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k

        def forward(self, x):
            return x * self.k

    for k in range(12):  # recompile_limit is 8
        cap = capture(Scaled(k), [torch.ones(2)], "dynamo")
        assert torch.equal(cap.gm(*cap.inputs)[0], torch.full((2,), float(k)))


class Reshape(nn.Module):
    def forward(self, x):
        return x.view(-1, x.shape[1]) * 2 + 0 * x.sum()


@pytest.mark.parametrize("dynamic", [None, True])
def test_numeric_verification_with_dynamic_shapes(dynamic, capsys):
    """After a recompile for a new size TorchDynamo passes the size as a SymInt input: numeric
    verification runs the graph with the size it was traced for."""
    model = Reshape()
    compiled = torch.compile(
        model,
        backend="fxpasses",
        dynamic=dynamic,
        options={"then": "eager", "pipeline": "propagate_shapes,simplify_algebra", "verify": "numeric"},
    )
    for cols in (5, 6, 7):
        x = torch.randn(3, cols)
        torch.testing.assert_close(compiled(x), model(x))
    assert all(r.verification == "numeric" for r in backend.reports)
    assert all(p.status == "ok" for r in backend.reports for p in r.passes)
    assert any(r.dialect == "dynamo" and r.nodes_before > 0 for r in backend.reports)
    assert "Traceback" not in capsys.readouterr().err


def test_concrete_example_inputs():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    s = env.create_unbacked_symint()
    t = torch.ones(2)
    assert backend._concrete([3, t]) == [3, t]
    assert backend._concrete([s, t]) is None  # an unbacked size has no value


@pytest.mark.parametrize(
    "options, message",
    [
        ({"then": 3}, "option 'then' must be a backend name"),
        ({"pipeline": ""}, "option 'pipeline' is empty"),
        ({"pipeline": "inference"}, "'inference' is a preset (a named pipeline), not a pass"),
        ({"preset": "nope"}, "options['preset']: unknown preset 'nope'"),
        ({"preset": "inference", "pipeline": "eliminate_dead_code"}, "either 'pipeline' or 'preset'"),
        ({"pipeline": "eliminate_dead_code{"}, "options['pipeline']: pipeline string, column"),
    ],
)
def test_bad_backend_options_are_named(options, message):
    with pytest.raises(Exception) as info:
        torch.compile(Net().eval(), backend="fxpasses", options=options)(torch.randn(2, 8))
    assert message in str(info.value)


class Nudge(fxpasses.GraphPass):
    """Change the first output by ``x * scale + shift`` (to test the tolerances)."""

    name = "nudge"

    class Options(fxpasses.PassOptions):
        scale: float = 1.0
        shift: float = 0.0

    def run(self, gm, ctx):
        out = next(n for n in gm.graph.nodes if n.op == "output")
        first, *rest = out.args[0]
        with gm.graph.inserting_before(out):
            moved = gm.graph.call_function(torch.add, (gm.graph.call_function(torch.mul, (first, self.options.scale)), self.options.shift))
        out.args = ((moved, *rest),)
        return True


def test_a_numeric_failure_under_the_backend_says_how_to_bisect_there():
    """A numeric failure under `torch.compile` said to run `fxpasses bisect CONFIG` with the
    run's config, which a backend run has not (a new-user check). It says how to bisect the
    graph TorchDynamo gave: capture with the dynamo dialect, then `fxpasses.bisect.bisect`."""
    model = Net().eval()
    x = torch.randn(4, 8) + 3.0
    options = {"then": "eager", "pipeline": [(Nudge, {"shift": 1.0})], "verify": "numeric", "on_error": "skip"}
    torch.compile(model, backend="fxpasses", options=options)(x)
    (report,) = backend.reports
    assert report["nudge"].status == "skipped"
    assert (
        "to find the rewrite that changed the outputs, run in Python: `c = fxpasses.capture.capture(model, "
        'example_inputs, "dynamo")`, then `fxpasses.bisect.bisect(pipeline, c.gm, c.inputs)`'
    ) in report["nudge"].error, report["nudge"].error
    assert "fxpasses bisect CONFIG" not in report["nudge"].error


@pytest.mark.parametrize(
    "nudge, tolerance",
    [({"shift": 1e-3}, {"atol": 1e-2}), ({"scale": 1.001}, {"rtol": 1e-2, "atol": 0.0})],
)
def test_atol_and_rtol_options_set_the_numeric_verification_tolerances(nudge, tolerance):
    model = Net().eval()
    x = torch.randn(4, 8) + 3.0  # outputs well away from zero: |a - b| = 1e-3 * |b| > 1e-5 + 1e-5 * |b|
    options = {"then": "eager", "pipeline": [(Nudge, nudge)], "verify": "numeric", "on_error": "skip"}
    torch.compile(model, backend="fxpasses", options=options)(x)
    (default,) = backend.reports
    assert default["nudge"].status == "skipped"
    assert "exceeds atol=1e-05, rtol=1e-05" in default["nudge"].error
    torch._dynamo.reset()
    backend.reports.clear()
    torch.compile(model, backend="fxpasses", options={**options, **tolerance})(x)
    (loose,) = backend.reports
    assert (loose["nudge"].status, loose["nudge"].changed) == ("ok", True)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"atol": -1.0}, "torch.compile option 'atol' must be a finite number >= 0, got -1.0"),
        ({"rtol": "1e-3"}, "torch.compile option 'rtol' must be a finite number >= 0, got '1e-3'"),
        ({"atol": True}, "torch.compile option 'atol' must be a finite number >= 0, got True"),
        ({"rtol": float("nan")}, "torch.compile option 'rtol' must be a finite number >= 0, got nan"),
        # named as options too (they were "verify must be one of ..."; found by a new-user check)
        ({"verify": "nope"}, "torch.compile option 'verify' must be one of none, lint, numeric, got 'nope'"),
        ({"on_error": "x"}, "torch.compile option 'on_error' must be one of rollback, raise, skip, got 'x'"),
    ],
)
def test_bad_tolerance_options_are_named(options, message):
    with pytest.raises(Exception) as info:
        torch.compile(Net().eval(), backend="fxpasses", options={"then": "eager", **options})(torch.randn(2, 8))
    assert message in str(info.value)


def test_preset_option_and_backend_callable():
    seen = []

    def then(gm, example_inputs):
        seen.append(len(gm.graph.nodes))
        return gm.forward

    model = Net().eval()
    x = torch.randn(4, 8)
    compiled = torch.compile(model, backend="fxpasses", options={"preset": "inference", "then": then})
    torch.testing.assert_close(compiled(x), model(x))
    (report,) = backend.reports
    assert [p.name for p in report.passes][:2] == ["remove_dropout", "simplify_algebra"]
    assert seen == [report.nodes_after]


# ---------------------------------------------------------------------------------- freeze

from pathlib import Path

from fxpasses.job import load_factory

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
INFERENCE = {"preset": "inference", "verify": "numeric"}


def _convnet():
    return load_factory("models:convnet", EXAMPLES)()


def _conv_bn_pairs(model) -> int:
    return sum(isinstance(m, nn.BatchNorm2d) for m in model.modules())


def _frozen_count(report) -> int:
    (note,) = [n for n in report.notes if " placeholders frozen " in n]
    return int(note.split()[1])


def test_freeze_fuses_the_example_cnn_under_torch_compile():
    model = _convnet()
    x = torch.randn(2, 3, 32, 32)
    graphs = []

    def then(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    with torch.no_grad():
        expected = model(x)
        unfrozen = torch.compile(model, backend="fxpasses", options={**INFERENCE, "then": "eager"})
        torch.testing.assert_close(unfrozen(x), expected)
        torch._dynamo.reset()
        frozen = torch.compile(model, backend="fxpasses", options={**INFERENCE, "freeze": True, "then": then})
        torch.testing.assert_close(frozen(x), expected)
        # new inputs of the same shape: no recompile, the wrapper drops the frozen positions
        x2 = torch.randn(2, 3, 32, 32)
        torch.testing.assert_close(frozen(x2), model(x2))
    before, after = backend.reports
    assert before["fuse_conv_bn"].counters == {"not_constant": 3, "skipped": 3}
    pairs = _conv_bn_pairs(model)
    assert after["fuse_conv_bn"].counters == {"fused": pairs}
    assert after.nodes_after < before.nodes_after
    assert after.verification == "numeric" and not after.failed
    (gm,) = graphs
    assert not any("batch_norm" in str(n.target) for n in gm.graph.nodes)
    # every parameter and buffer frozen; x, the third placeholder TorchDynamo made, is left
    assert [n.op for n in gm.graph.nodes].count("placeholder") == 1
    n_state = len(list(model.parameters())) + len(list(model.buffers())) - pairs  # no num_batches_tracked
    assert _frozen_count(after) == n_state
    assert after.notes[0] == (
        f"freeze: {n_state} of {n_state} parameter/buffer placeholders frozen as constants of the graph "
        "(1 graph input left)"
    )
    assert before.notes == []


def test_freeze_then_inductor():
    model = _convnet()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        compiled = torch.compile(model, backend="fxpasses", options={"preset": "inference", "freeze": True, "then": "inductor"})
        torch.testing.assert_close(compiled(x), model(x))
        x2 = torch.randn(2, 3, 32, 32)
        torch.testing.assert_close(compiled(x2), model(x2))
    (report,) = backend.reports
    assert report["fuse_conv_bn"].counters == {"fused": _conv_bn_pairs(model)}


class WeightMath(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 8))
        self.register_buffer("b", torch.randn(8))

    def forward(self, x):
        return x @ (self.w * 2 + self.b)


@pytest.mark.parametrize("freeze", [False, True])
def test_fold_constants_folds_weight_math_only_with_freeze(freeze):
    model = WeightMath().eval().requires_grad_(False)  # frozen even with grad mode on
    x = torch.randn(3, 4)
    compiled = torch.compile(model, backend="fxpasses", options={**INFERENCE, "freeze": freeze, "then": "eager"})
    torch.testing.assert_close(compiled(x), model(x))
    (report,) = backend.reports
    counters = report["fold_constants"].counters
    if freeze:
        # w * 2 + b is one constant: the get_attrs of w and b, mul and add give way to one get_attr
        assert counters["folded"] == 1 and counters["removed_nodes"] == 4
        assert report.nodes_after == report.nodes_before - 3
    else:
        assert "folded" not in counters and report.nodes_after == report.nodes_before


def test_freeze_keeps_training_batch_norm_statistics_as_inputs():
    """Training-mode BN writes its running statistics: they stay inputs, and are updated."""
    model = _convnet().train()
    model.dropout.p = 0.0  # (dropout is random: compare outputs exactly)
    twin = _convnet().train()
    twin.dropout.p = 0.0
    compiled = torch.compile(model, backend="fxpasses", options={**INFERENCE, "verify": "lint", "freeze": True, "then": "eager"})
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(4, 3, 32, 32)
            torch.testing.assert_close(compiled(x), twin(x))
            for (name, a), b in zip(model.named_buffers(), twin.buffers()):
                torch.testing.assert_close(a, b, msg=name)
    (report,) = backend.reports
    assert report["fuse_conv_bn"].counters.get("fused", 0) == 0
    kept = [n for n in report.notes if "kept as graph inputs, the graph writes them" in n]
    assert len(kept) == 1
    for i in range(3):
        for stat in ("running_mean", "running_var", "num_batches_tracked"):
            assert f"features.{i}.1.{stat}" in kept[0]
    # the convolution and BN weights are not written: frozen
    assert _frozen_count(report) == len(list(model.parameters()))


class _WritesThenReads(nn.Module):
    """A buffer written in one graph and read, after a graph break, in the next."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.ones(8))

    def forward(self, x):
        self.scale.mul_(2.0)
        torch._dynamo.graph_break()
        return x * (self.scale + 1.0)


class _ReadsThenWrites(_WritesThenReads):
    def forward(self, x):
        y = x * (self.scale + 1.0)
        torch._dynamo.graph_break()
        self.scale.mul_(2.0)
        return y


@pytest.mark.parametrize("cls", [_WritesThenReads, _ReadsThenWrites])
def test_freeze_keeps_a_buffer_another_graph_writes_as_an_input(cls):
    """A graph wrote `scale` in place and, after a graph break, the next graph only read it:
    that one froze it and fold_constants folded `scale + 1`, so the compiled model returned
    the first call's value forever (eager 3, 5, 9; compiled 3, 3, 3: a new-user check). A
    buffer some graph writes is now kept an input of the others; a reader frozen before the
    writer was compiled is frozen again on its next call."""
    eager, model = cls().eval(), cls().eval()
    compiled = torch.compile(model, backend="fxpasses", options={**INFERENCE, "freeze": True, "then": "eager"})
    x = torch.ones(8)
    with torch.no_grad():
        got = [(eager(x)[0].item(), compiled(x)[0].item()) for _ in range(4)]
    assert [e for e, _ in got] == [c for _, c in got]
    assert got[-1][0] == (17.0 if cls is _WritesThenReads else 9.0)
    # written before every call: after freezing again twice, kept an input for good
    kept = [n for r in backend.reports for n in r.notes if "they were written in place before every call" in n]
    assert kept and all(n.endswith(": scale") for n in kept)
    n_reports = len(backend.reports)
    with torch.no_grad():
        for _ in range(backend.QUIET_CALLS + 2):  # (written on every call: never quiet for long)
            assert eager(x)[0].item() == compiled(x)[0].item()
    assert len(backend.reports) == n_reports  # no more freezing


def test_freeze_in_a_train_and_evaluate_loop_fuses_again_after_each_training():
    """Training through the compiled model writes the BatchNorm statistics (its train-mode
    graph) and the optimizer the weights: the evaluation graph freezes again at its first call
    after training, fused as before, and then runs without freezing again (a first version
    kept the statistics inputs for good, since another graph wrote them: no fusion after the
    first training, eval 1.5x slower: a new-user check)."""
    torch.manual_seed(0)
    model, twin = _convnet(), _convnet()
    twin.load_state_dict(model.state_dict())
    model.dropout.p = twin.dropout.p = 0.0
    compiled = torch.compile(model, backend="fxpasses", options={**INFERENCE, "verify": "lint", "freeze": True, "then": "eager"})
    opt, opt_twin = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(twin.parameters(), lr=0.1)
    x = torch.randn(4, 3, 32, 32)
    for epoch in range(3):
        model.train(), twin.train()
        for _ in range(2):
            for m, o in ((compiled, opt), (twin, opt_twin)):
                o.zero_grad()
                m(x).square().mean().backward()
                o.step()
        model.eval(), twin.eval()
        before = len(backend.reports)
        with torch.no_grad():
            for _ in range(3):
                torch.testing.assert_close(compiled(x), twin(x), msg=f"epoch {epoch}")
        evals = list(backend.reports)[before:]
        assert len(evals) == 1, epoch  # one freeze per evaluation epoch (the first call), fused
        assert evals[0]["fuse_conv_bn"].counters == {"fused": 3}, epoch


class FineTune(nn.Module):
    """A frozen backbone (conv + eval-mode BN, requires_grad off) and a trainable head."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)).eval().requires_grad_(False)
        with torch.no_grad():
            self.backbone[1].running_mean.normal_()
            self.backbone[1].running_var.uniform_(0.5, 1.5)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.backbone(x).mean(dim=(2, 3)))


def test_freeze_leaves_parameters_that_require_grad_as_inputs_gradients_flow():
    torch.manual_seed(0)
    model = FineTune()
    model.head.train()
    twin = FineTune()
    twin.load_state_dict(model.state_dict())
    twin.head.train()
    compiled = torch.compile(model, backend="fxpasses", options={**INFERENCE, "freeze": True, "then": "eager"})
    x = torch.randn(2, 3, 10, 10)
    out = compiled(x)
    expected = twin(x)
    torch.testing.assert_close(out, expected)
    out.square().sum().backward()
    expected.square().sum().backward()
    for p, q in zip(model.head.parameters(), twin.head.parameters()):
        assert p.grad is not None
        torch.testing.assert_close(p.grad, q.grad)
    (report,) = backend.reports
    assert report["fuse_conv_bn"].counters == {"fused": 1}  # the backbone is frozen
    assert _frozen_count(report) == 6  # conv weight/bias, BN weight/bias/mean/var
    assert "freeze: kept as graph inputs, they require grad and grad mode was on at compile time " \
        "(training): head.weight, head.bias" in report.notes


class Interleaved(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.register_buffer("scale", torch.tensor([2.0, 3.0, 4.0, 5.0]))

    def forward(self, x, y, z):
        return self.a(x) + y * self.scale - self.b(z) * y


def test_freeze_with_user_inputs_between_parameters():
    model = Interleaved().eval()
    inputs = [torch.randn(3, 4) for _ in range(3)]
    order = []

    def record(gm, example_inputs):
        order.extend("param" if isinstance(v, nn.Parameter) or v is model.scale else "input" for v in example_inputs)
        return gm.forward

    torch.compile(model, backend=record)(*inputs)
    # TorchDynamo orders placeholders by first use: inputs among the parameters
    assert order == ["param", "param", "input", "param", "input", "param", "param", "input"]
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = torch.compile(model, backend="fxpasses", options={**INFERENCE, "freeze": True, "then": "eager"})
        for _ in range(3):
            inputs = [torch.randn(3, 4) for _ in range(3)]
            torch.testing.assert_close(compiled(*inputs), model(*inputs))
    (report,) = backend.reports
    assert _frozen_count(report) == 5


def test_in_place_update_of_a_frozen_parameter():
    """An in-place update of a frozen parameter that was not folded is seen (the graph holds
    the very tensor) without freezing again; one that was folded makes the graph freeze
    again (it was stale: the assumption inductor's freezing makes). A parameter replaced by
    another tensor is seen: the graph is frozen again for the new tensor."""
    model = _convnet()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        compiled = torch.compile(model, backend="fxpasses", options={"preset": "inference", "freeze": True, "then": "eager"})
        compiled(x)
        model.head.weight.mul_(2)  # used as it is by the linear layer
        model.head.bias.add_(1)
        torch.testing.assert_close(compiled(x), model(x))
        assert len(backend.reports) == 1  # no recompile
        model.features[0][1].weight.mul_(2)  # folded into the first conv
        torch.testing.assert_close(compiled(x), model(x))
        assert len(backend.reports) == 2  # frozen again
        model.features[0][1].weight.div_(2)
        torch.testing.assert_close(compiled(x), model(x))
        assert len(backend.reports) == 3
        model.head.weight = nn.Parameter(torch.zeros_like(model.head.weight))  # replaced
        torch.testing.assert_close(compiled(x), model(x))
    assert len(backend.reports) == 4  # frozen again, with the new tensor


class _HalveWeights(fxpasses.GraphPass):
    """A broken third-party pass: halves every weight it can reach, in place."""

    name = "halve_weights"

    def run(self, gm, ctx):
        held = [getattr(gm, n.target) for n in gm.graph.find_nodes(op="get_attr")]
        for t in held + [t for t in ctx.example_inputs if isinstance(t, nn.Parameter)]:
            with torch.no_grad():
                t.mul_(0.5)
        return False


class _HalveThroughData(_HalveWeights):
    """The same through `.data`, which moves no version counter, and declaring it writes no
    tensor (so no rollback write guard runs)."""

    name = "halve_through_data"
    writes_tensors = False

    def run(self, gm, ctx):
        for n in gm.graph.find_nodes(op="get_attr"):
            getattr(gm, n.target).data.mul_(0.5)
        return False


class _RebindData(_HalveWeights):
    """New data for each weight (`t.data = ...`): no write at all, a new storage."""

    name = "rebind_data"

    def run(self, gm, ctx):
        for n in gm.graph.find_nodes(op="get_attr"):
            t = getattr(gm, n.target)
            t.data = torch.zeros_like(t)
        return False


class _RebindThenWrite(_HalveWeights):
    """New data for each weight, then an in-place write of the new data: the write guard sees
    only the write, to a storage that is not the weight's own."""

    name = "rebind_then_write"

    def run(self, gm, ctx):
        for n in gm.graph.find_nodes(op="get_attr"):
            t = getattr(gm, n.target)
            t.data = torch.zeros_like(t)
            with torch.no_grad():
                t.add_(1.0)
        return False


@pytest.mark.parametrize("on_error", ["rollback", "raise"])
@pytest.mark.parametrize("cls", [_HalveWeights, _HalveThroughData, _RebindData, _RebindThenWrite])
def test_a_pass_writing_frozen_weights_in_place_fails_and_the_model_is_put_back(cls, on_error):
    """Without freeze, a pass writing the parameters TorchDynamo passes as inputs fails, naming
    them; with freeze they are attributes of the graph module, and the same pass passed lint
    while changing the user's own model (its eager outputs and the compiled ones both wrong:
    a new-user check); so did one writing through `.data`, giving new data, or declaring
    writes_tensors=False (a final new-user check). The frozen tensors are now guarded whatever
    the pass declares: a write or new data fails the pass, naming them, and they are put back,
    whatever on_error says (they are the user's)."""
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(3, 4)
    options = {"pipeline": [cls], "then": "eager", "freeze": True, "pyproject": False, "on_error": on_error}
    compiled = torch.compile(model, backend="fxpasses", options=options)
    with torch.no_grad(), pytest.raises(Exception) as info:
        compiled(x)
    text = str(getattr(info.value, "inner_exception", info.value))
    assert text.startswith(
        f"pass '{cls.name}' failed: verification failed: the pass wrote the model's parameter(s)/buffer(s) "
        "'0.weight', '0.bias', '2.weight', '2.bias' in place or gave them new data, which freeze made constants of the "
        "graph: they are the caller's tensors, which the uncompiled model reads too (put back); a pass must copy one "
        "before changing it"
    ), text
    assert "could not be restored" not in text
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


class _FailsAfterHalving(_HalveThroughData):
    name = "fails_after_halving"

    def run(self, gm, ctx):
        super().run(gm, ctx)
        raise RuntimeError("gave up")


def test_frozen_weights_a_failing_pass_wrote_are_put_back_and_named():
    model = nn.Sequential(nn.Linear(4, 4)).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    compiled = torch.compile(model, backend="fxpasses", options={"pipeline": [_FailsAfterHalving], "then": "eager", "freeze": True, "pyproject": False})
    with torch.no_grad(), pytest.raises(Exception) as info:
        compiled(torch.randn(3, 4))
    text = str(info.value.inner_exception)
    assert (
        "note: before it failed, the pass changed the model's parameter(s)/buffer(s) '0.weight', '0.bias' (their values, "
        "data, requires_grad or .grad), which freeze made constants of the graph: put back"
    ) in text, text
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


class _InterruptedAfterHalving(_HalveThroughData):
    name = "interrupted_after_halving"

    def run(self, gm, ctx):
        super().run(gm, ctx)
        raise KeyboardInterrupt


def test_frozen_weights_an_interrupted_pass_wrote_are_put_back_and_named():
    """Ctrl-C in a pass that wrote frozen weights left the user's model changed: the interrupt
    path did not put the caller's tensors back, and said "rolled back" (a rollback-attack check)."""
    torch._dynamo.reset()
    model = nn.Sequential(nn.Linear(4, 4)).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    compiled = torch.compile(model, backend="fxpasses", options={"pipeline": [_InterruptedAfterHalving], "then": "eager", "freeze": True, "pyproject": False})
    with torch.no_grad(), pytest.raises(KeyboardInterrupt) as info:
        compiled(torch.randn(3, 4))
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert info.value.__notes__[-1] == (
        "fxpasses: 'interrupted_after_halving' was interrupted; the graph was rolled back to before it; the model's "
        "parameter(s)/buffer(s) it changed, which freeze made constants, were put back: '0.weight', '0.bias'"
    )


class _FlipsFrozenFlags(fxpasses.GraphPass):
    """Turns requires_grad off and sets .grad on the frozen weights (declares a journal)."""

    name = "flips_frozen_flags"
    journal_edits = True
    writes_tensors = False
    fail = True

    def run(self, gm, ctx):
        for n in gm.graph.find_nodes(op="get_attr"):
            t = getattr(gm, n.target)
            t.requires_grad_(False)
            t.grad = torch.ones_like(t)
        if self.fail:
            raise RuntimeError("gave up")
        return False


@pytest.mark.parametrize("fail", [True, False])
def test_frozen_weights_requires_grad_and_grad_a_pass_changed_are_put_back(fail, monkeypatch):
    """Under freeze a pass that turned requires_grad off and set .grad on the model's frozen
    parameters left them so after a "rollback" (the caller's tensors were checked for writes
    and new data only; without freeze the same tensors are example inputs, whose flags are put
    back): the eager model then trained nothing (a rollback-attack check)."""
    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", "0")  # (check mode fails the journal's declaration first)
    torch._dynamo.reset()
    model = nn.Sequential(nn.Linear(4, 4)).eval()
    cls = type("Flips", (_FlipsFrozenFlags,), {"fail": fail})
    compiled = torch.compile(model, backend="fxpasses", options={"pipeline": [cls], "then": "eager", "freeze": True, "pyproject": False})
    with torch.no_grad(), pytest.raises(Exception) as info:
        compiled(torch.randn(3, 4))
    text = str(info.value.inner_exception)
    if fail:
        assert "the pass changed the model's parameter(s)/buffer(s) '0.weight', '0.bias' (their values, data, requires_grad" in text, text
    else:  # a pass that returns having changed them fails: they are the caller's
        assert "the pass changed requires_grad or .grad of the model's parameter(s)/buffer(s) '0.weight', '0.bias'" in text, text
    assert all(p.requires_grad and p.grad is None for p in model.parameters())


class _ScaleFrozenBias(fxpasses.GraphPass):
    """A broken third-party pass: multiplies every bias read with get_attr by 1.01."""

    name = "scale_frozen_bias"

    def run(self, gm, ctx):
        nodes = [n for n in gm.graph.find_nodes(op="get_attr") if n.target.endswith("bias")]
        for n in nodes:
            with gm.graph.inserting_after(n):
                new = gm.graph.call_function(torch.mul, (n, 1.01))
            n.replace_all_uses_with(new, delete_user_cb=lambda u, new=new: u is not new)
        return bool(nodes)


def test_the_bisect_hint_under_freeze_captures_the_frozen_graph():
    """Under freeze the pipeline runs on the frozen graph, but the failure's hint told to bisect
    an unfrozen capture, where a pass acting on frozen weights does nothing: bisect said
    "clean" (a new-user check). The hint now names capture(..., freeze=True) and the grad
    mode, and that capture reproduces the failure."""
    from fxpasses.bisect import bisect
    from fxpasses.capture import capture

    model, x = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).eval(), torch.randn(2, 4)
    pipeline = fxpasses.Pipeline([_ScaleFrozenBias], verify="numeric")
    with torch.no_grad(), pytest.raises(Exception) as info:
        torch.compile(model, backend="fxpasses", options={"pipeline": pipeline, "freeze": True, "then": "eager", "pyproject": False})(x)
    text = str(info.value.inner_exception)
    assert (
        'note: to find the rewrite that changed the outputs, run in Python: `c = fxpasses.capture.capture(model, '
        'example_inputs, "dynamo", freeze=True)` under torch.no_grad(), then `fxpasses.bisect.bisect(pipeline, c.gm, '
        "c.inputs)` (the graph TorchDynamo gives a backend, frozen as this one was, is that capture's)"
    ) in text
    with torch.no_grad():
        c = capture(model, [x], "dynamo", freeze=True)
        assert [n.op for n in c.gm.graph.nodes].count("placeholder") == 1 and len(c.inputs) == 1
        assert bisect(pipeline, c.gm, c.inputs).status == "found"
        c0 = capture(model, [x], "dynamo")  # (what the hint said before: the pass finds no frozen bias there)
        assert bisect(pipeline, c0.gm, c0.inputs).status == "clean"
    with pytest.raises(fxpasses.UserError, match=r"capture: freeze=True with the 'export' capture; freeze=True is the dynamo capture's"):
        capture(model, [x], "export", freeze=True)


def test_freeze_off_by_default():
    model = _convnet()
    with torch.no_grad():
        torch.compile(model, backend="fxpasses", options={"preset": "inference", "then": "eager"})(torch.randn(1, 3, 32, 32))
    (report,) = backend.reports
    assert report["fuse_conv_bn"].counters["not_constant"] == 3
    assert report.notes == []


def test_freeze_option_must_be_a_bool():
    with pytest.raises(Exception) as info:
        torch.compile(Net().eval(), backend="fxpasses", options={"freeze": "yes"})(torch.randn(2, 8))
    assert "option 'freeze' must be true or false, got 'yes'" in str(info.value)


class LiteralMath(nn.Module):
    def forward(self, x):
        return x + torch.arange(4.0) * 2


def test_constants_a_pass_adds_to_a_dynamo_graph_compile_with_inductor():
    """aot_autograd wants a TorchDynamo source for every parameter and buffer of the graph
    module: a buffer fold_constants added used to fail with 'folded_mul not found in
    param_name_to_source'."""
    x = torch.randn(4)
    compiled = torch.compile(
        LiteralMath(), backend="fxpasses", options={"pipeline": "fold_constants{max_growth_bytes=1024}", "then": "inductor"}
    )
    torch.testing.assert_close(compiled(x), LiteralMath()(x))
    (report,) = backend.reports
    assert report["fold_constants"].counters["folded"] == 1


def test_parameter_names_from_dynamo_sources():
    from torch._dynamo import source as S

    module = S.UnspecializedNNModuleSource(S.LocalSource("self"))
    sub = S.UnspecializedBuiltinNNModuleSource(S.DictGetItemSource(S.AttrSource(module, "_modules"), "features"))
    conv = S.UnspecializedBuiltinNNModuleSource(S.DictGetItemSource(S.AttrSource(sub, "_modules"), "0"))
    weight = S.DictGetItemSource(S.UnspecializedParamBufferSource(conv, "_parameters"), "weight")
    mean = S.DictGetItemSource(S.UnspecializedParamBufferSource(conv, "_buffers"), "running_mean")
    assert backend._state_name(weight) == "features.0.weight"
    assert backend._state_name(mean) == "features.0.running_mean"
    assert backend._state_name(S.LocalSource("x")) is None
    assert backend._state_name(None) is None

    class Named:  # the fallback: a source whose structure is not known, by its name
        name = "L['fn']._modules['0']._parameters['weight']"

    assert backend._state_name(Named()) == "0.weight"
    Named.name = "L['x']"
    assert backend._state_name(Named()) is None


class _Block(nn.Module):
    def __init__(self, graph_break: bool = False) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.graph_break = graph_break

    def forward(self, x):
        if self.graph_break:
            torch._dynamo.graph_break()
        return torch.relu(self.lin(x))


class _Stack(nn.Module):
    """A repeated block with a graph break: TorchDynamo compiles the block's graph once and
    calls it for every layer, each time with that layer's parameters as inputs."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_Block(graph_break=True) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


FREEZE_EAGER = {"preset": "inference", "freeze": True, "then": "eager"}


def test_freeze_is_right_for_every_instance_a_graph_is_reused_for():
    """TorchDynamo reuses one graph for all instances of a class and does not guard on which
    parameter tensors it gets: a graph frozen with the first instance's weights returned the
    first instance's outputs for the second. Each set of tensors now gets its own variant."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    a, b = _Block().eval(), _Block().eval()
    x = torch.randn(2, 4)
    before = len(backend.reports)
    ca = torch.compile(a, backend="fxpasses", options=FREEZE_EAGER)
    cb = torch.compile(b, backend="fxpasses", options=FREEZE_EAGER)
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(ca(x), a(x))
            torch.testing.assert_close(cb(x), b(x))
    assert len(backend.reports) - before == 2  # one frozen variant each, compiled once

    torch._dynamo.reset()
    net = _Stack(3).eval()
    before = len(backend.reports)
    c = torch.compile(net, backend="fxpasses", options=FREEZE_EAGER)
    with torch.no_grad():
        torch.testing.assert_close(c(x), net(x))
        torch.testing.assert_close(c(x * 2), net(x * 2))
    assert len(backend.reports) - before >= 3  # a variant per layer (and the frame around them)


def test_freeze_variants_are_bounded_then_an_unfrozen_compile_serves(monkeypatch, caplog):
    torch._dynamo.reset()
    monkeypatch.setattr(backend, "MAX_FROZEN_VARIANTS", 2)
    torch.manual_seed(0)
    blocks = [_Block().eval() for _ in range(4)]
    x = torch.randn(2, 4)
    compiled = [torch.compile(m, backend="fxpasses", options=FREEZE_EAGER) for m in blocks]
    before = len(backend.reports)
    with torch.no_grad(), caplog.at_level("WARNING", logger="fxpasses.backend"):
        for _ in range(2):
            for m, c in zip(blocks, compiled):
                torch.testing.assert_close(c(x), m(x))
    assert len(backend.reports) - before == 3  # two frozen variants, then one unfrozen compile
    assert "one graph was called with 2 different sets of parameters" in caplog.text
    assert "freeze:" not in backend.reports[-1].table()  # the unfrozen one


def test_plugin_settings_come_from_the_plugins_option_or_the_pyproject(tmp_path, monkeypatch):
    """The backend read `pipeline` from the nearest pyproject.toml but not its
    [tool.fxpasses.plugins]: with autoloading off, `enable` was ignored and the pass unknown;
    and there was no option for plugin settings (found by a new-user check)."""
    import importlib

    monkeypatch.setenv("FXPASSES_DISABLE_PLUGIN_AUTOLOAD", "1")
    # the default registry loaded again, with autoloading off
    monkeypatch.setattr(importlib.import_module("fxpasses.registry"), "_default", None)
    monkeypatch.chdir(tmp_path)
    model = nn.Sequential(nn.Linear(4, 4), nn.Identity()).eval()
    x = torch.randn(2, 4)

    def passes_run(options):
        torch._dynamo.reset()
        torch.compile(model, backend="fxpasses", options={"then": "eager", **options})(x)
        return [(p.name, p.status) for p in backend.reports[-1].passes]

    # the example plugin's pass is unknown with autoloading off and nothing enabling it
    with pytest.raises(Exception, match="unknown pass 'remove_identity'"):
        passes_run({"pipeline": "remove_identity"})
    assert passes_run({"pipeline": "remove_identity", "plugins": {"enable": ["fxpasses-example-passes"]}}) == [
        ("remove_identity", "ok")
    ]
    with pytest.raises(Exception, match="torch.compile option 'plugins': enabel: unknown key; did you mean 'enable'"):
        passes_run({"pipeline": "remove_identity", "plugins": {"enabel": ["fxpasses-example-passes"]}})
    (tmp_path / "pyproject.toml").write_text(
        '[tool.fxpasses]\npipeline = "remove_identity"\n[tool.fxpasses.plugins]\nenable = ["fxpasses-example-passes"]\n'
    )
    assert passes_run({}) == [("remove_identity", "ok")]  # the pipeline and the plugins from there
    assert passes_run({"pipeline": "remove_identity,eliminate_dead_code"})[0] == ("remove_identity", "ok")
    # with the pipeline given as an option, the project's [model] and output are not this
    # run's (an output the CLI would refuse failed the compile); its settings apply, as they
    # do to `fxpasses check --pipeline`, so a bad one is an error naming the file
    (tmp_path / "pyproject.toml").write_text(
        '[tool.fxpasses]\noutput = ""\n[tool.fxpasses.plugins]\nenable = ["fxpasses-example-passes"]\n'
    )
    assert passes_run({"pipeline": "remove_identity"}) == [("remove_identity", "ok")]
    (tmp_path / "pyproject.toml").write_text(
        '[tool.fxpasses]\nverify = "sometimes"\n[tool.fxpasses.plugins]\nenable = ["fxpasses-example-passes"]\n'
    )
    with pytest.raises(Exception, match=r"pyproject.toml \[tool.fxpasses\]: invalid config:\n  verify: Input should be 'none', 'lint' or 'numeric'"):
        passes_run({"pipeline": "remove_identity"})
    # values as strict as a config file's: a quoted "true" is not true
    # (given from Python: the hint writes Python's True)
    with pytest.raises(Exception, match="strict: Input should be a valid boolean \\(given: 'true'; a boolean in quotes is a string: write True "):
        passes_run({"pipeline": "remove_identity", "plugins": {"strict": "true"}})
    (tmp_path / "pyproject.toml").write_text('[tool.fxpasses.plugins]\nstrict = "true"\n')
    with pytest.raises(Exception, match="pyproject.toml \\[tool.fxpasses\\]: invalid config:\n  plugins.strict: Input should be a valid boolean .*write true "):
        passes_run({"pipeline": "remove_identity"})


def _count_nodes(gm):
    return None  # changes nothing


@pytest.mark.parametrize(
    "entry, ran",
    [
        (_count_nodes, ["_count_nodes"]),
        (fxpasses.Fixpoint(["remove_dropout", "eliminate_dead_code"]), ["remove_dropout #1", "eliminate_dead_code #1", "remove_dropout #2", "eliminate_dead_code #2"]),
        ({"name": "remove_dropout"}, ["remove_dropout"]),
    ],
    ids=["function", "Fixpoint", "table"],
)
def test_one_entry_is_a_pipeline_option_as_pipeline_takes_it(entry, ran):
    """`options={"pipeline": fn}` was refused ("must be a pipeline string or a list"), where
    Pipeline(fn) takes one entry (a new-user check)."""
    model = Net().eval()
    x = torch.randn(4, 8)
    compiled = torch.compile(model, backend="fxpasses", options={"then": "eager", "pipeline": entry})
    torch.testing.assert_close(compiled(x), model(x))
    (report,) = backend.reports
    assert [p.label for p in report.passes] == ran


def test_a_pipeline_option_of_another_kind_names_what_it_takes():
    with pytest.raises(Exception, match=r"must be a pipeline string, a list of entries, one entry .* or a Pipeline, got 42"):
        torch.compile(Net().eval(), backend="fxpasses", options={"pipeline": 42})(torch.randn(4, 8))


def test_torch_compile_mode_reaches_inductor_and_a_wrong_one_is_an_error(monkeypatch):
    """`torch.compile(m, backend="fxpasses", mode="max-autotune")` was accepted and dropped:
    inductor ran with its defaults, and a made-up mode was accepted too (a new-user check). The
    mode's inductor settings now reach inductor; a mode with another `then` or an unknown one
    is a ConfigError."""
    import torch._inductor.compile_fx as compile_fx_module

    seen = []

    def spy(gm, example_inputs, **kwargs):
        seen.append(kwargs.get("config_patches"))
        return gm.forward

    monkeypatch.setattr(compile_fx_module, "compile_fx", spy)
    m, x = nn.Linear(4, 4), torch.ones(2, 4)
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(m, backend="fxpasses", mode="max-autotune-no-cudagraphs")(x), m(x))
    assert seen == [{"max_autotune": True, "coordinate_descent_tuning": True}]
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"ConfigError: torch.compile mode: Unrecognized mode=no-such-mode, should be one of: default"):
        torch.compile(m, backend="fxpasses", mode="no-such-mode")(x)
    torch._dynamo.reset()
    monkeypatch.setenv("FXPASSES_PIPELINE", "eliminate_dead_code")
    with pytest.raises(Exception, match=r"sets inductor's options, and backend 'fxpasses' hands its graphs to 'eager'"):
        backend.fxpasses_backend(torch.fx.symbolic_trace(m), [x], mode="max-autotune", options={"then": "eager"})


def test_the_pipeline_option_takes_what_pipeline_takes_a_pipeline_object_and_a_pair():
    """A Pipeline object (from_preset, from_config) was refused, and a (name, options) pair,
    which Pipeline(pair) reads as one entry, was read as two entries: "entry 2: bad pipeline
    entry {'max_numel': 5}" (a new-user check). A Pipeline keeps its own settings unless
    torch.compile's options give them; the caller's object is not changed."""
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1)).eval()
    x = torch.ones(2, 4)
    given = fxpasses.Pipeline.from_preset("inference", verify="numeric")
    torch._dynamo.reset()
    backend.reports.clear()
    torch.testing.assert_close(torch.compile(m, backend="fxpasses", options={"pipeline": given, "then": "eager"})(x), m(x))
    (report,) = backend.reports
    assert [p.name for p in report.passes] == [s.name for s in given.plan().steps]
    assert report.verification == "numeric" and report["remove_dropout"].changed
    torch._dynamo.reset()
    torch.compile(m, backend="fxpasses", options={"pipeline": given, "verify": "lint", "then": "eager"})(x)
    assert backend.reports[-1].verification == "lint" and given.verify == "numeric"
    torch._dynamo.reset()
    torch.compile(m, backend="fxpasses", options={"pipeline": ("fold_constants", {"max_numel": 5}), "then": "eager"})(x)
    assert [(p.name, p.status) for p in backend.reports[-1].passes] == [("fold_constants", "ok")]


def test_freeze_sees_an_in_place_update_of_a_folded_weight_and_freezes_again():
    """The fused conv + BN weights were computed once: after an optimizer step (or any in-place
    write of the conv or BN tensors) the frozen graph kept computing with the old ones,
    silently (a new-user check: eval error 0.088, then 0.213 over a train/eval loop; inductor's
    own freezing does the same). A frozen graph now checks the version counters of the tensors
    it folded away on each call, and freezes again when one moved."""
    torch.manual_seed(0)
    model = _convnet().eval()
    compiled = torch.compile(model, backend="fxpasses", options={**INFERENCE, "verify": "lint", "freeze": True, "then": "eager"})
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
        (report,) = backend.reports
        assert report["fuse_conv_bn"].counters["fused"] == 3
        for p in model.parameters():  # an optimizer step
            p.add_(0.05 * torch.randn_like(p))
        model.features[0][1].running_var.mul_(2.0)
        torch.testing.assert_close(compiled(x), model(x))
        assert len(backend.reports) == 2  # frozen again, once
        torch.testing.assert_close(compiled(x), model(x))
        assert len(backend.reports) == 2


def test_freeze_sees_new_data_given_to_a_folded_weight_and_freezes_again():
    """`conv.weight.data = new` moves no version counter: the frozen graph kept the fused
    weights of the old data, silently (left noticed by an earlier session). A frozen graph now
    compares the data pointers of the tensors it folded away too. A write through `.data` in
    place (`p.data.mul_()`) moves neither and is documented as not seen."""
    torch.manual_seed(0)
    model = _convnet().eval()
    compiled = torch.compile(model, backend="fxpasses", options={**INFERENCE, "verify": "lint", "freeze": True, "then": "eager"})
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
        assert len(backend.reports) == 1
        conv = model.features[0][0]
        version = conv.weight._version
        conv.weight.data = conv.weight.data * 1.5 + 0.1  # (a weight loader's way)
        assert conv.weight._version == version
        torch.testing.assert_close(compiled(x), model(x))
        assert len(backend.reports) == 2  # frozen again, once
        torch.testing.assert_close(compiled(x), model(x))
        assert len(backend.reports) == 2


def test_weights_kept_volatile_by_one_evaluation_call_per_epoch_are_frozen_again_once_quiet():
    """One evaluation call between optimizer steps finds the weights written before every call:
    after the second such freeze they are kept graph inputs, since freezing on every call would
    compile on every call. Kept for good, fusion was lost for every later epoch, however many
    calls it made (a new-user check). A graph now watches its volatile inputs, and freezes
    again with them once QUIET_CALLS calls in a row found them unwritten; the next epoch's
    write then makes it freeze again once, fused, as the README says."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()).eval()
    x = torch.randn(2, 3, 16, 16)
    compiled = torch.compile(model, backend="fxpasses", options={**INFERENCE, "freeze": True, "then": "eager", "pyproject": False})
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    fused = []
    for epoch, calls in enumerate([1, 1, 1, backend.QUIET_CALLS + 3, 2]):
        for p in model.parameters():
            p.grad = torch.randn_like(p) * 0.01
        opt.step()
        before = len(backend.reports)
        with torch.no_grad():
            for _ in range(calls):
                torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
        fused.append([r["fuse_conv_bn"].counters.get("fused", 0) for r in list(backend.reports)[before:]])
    # epoch 2: volatile (unfused); epoch 3: the first call unfused, frozen again after
    # QUIET_CALLS quiet calls, fused; epoch 4: its write seen, frozen again once, fused
    assert fused == [[1], [1], [0], [1], [1]]


def test_freeze_leaves_inference_tensors_inputs_their_writes_could_not_be_seen():
    """A model made under torch.inference_mode() (serving code) has inference tensors, which
    keep no version counter: frozen and fused, a load_state_dict under inference_mode went
    unseen and the compiled model kept the old fused weights (error 2.3, no note: a new-user
    check). Such tensors now stay graph inputs, named in the notes; outputs follow the update."""
    with torch.inference_mode():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).eval()
    assert model[0].weight.is_inference()
    x = torch.randn(1, 3, 8, 8)
    compiled = torch.compile(model, backend="fxpasses", options={**INFERENCE, "freeze": True, "then": "eager", "pyproject": False})
    with torch.inference_mode():
        torch.testing.assert_close(compiled(x), model(x))
        model.load_state_dict({k: v * 2 if v.is_floating_point() else v for k, v in model.state_dict().items()})
        torch.testing.assert_close(compiled(x), model(x))
    (report,) = backend.reports
    assert report["fuse_conv_bn"].counters == {"not_constant": 1, "skipped": 1}
    assert report.notes[0] == "freeze: 0 of 6 parameter/buffer placeholders frozen as constants of the graph (7 graph inputs left)"
    assert report.notes[1] == (
        "freeze: kept as graph inputs, they are inference tensors (made under torch.inference_mode()), which keep no "
        "version counter, so a later write to them (load_state_dict or an in-place update under inference_mode) could "
        "not be seen and what was computed from them would be stale: make the model outside inference_mode (and call "
        "it inside) to freeze them: 0.weight, 0.bias, 1.running_mean, 1.running_var, 1.weight, 1.bias"
    )
    # made outside inference_mode and called inside: frozen, fused, and the update is seen
    torch._dynamo.reset()
    backend.reports.clear()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).eval()
    compiled = torch.compile(model, backend="fxpasses", options={**INFERENCE, "freeze": True, "then": "eager", "pyproject": False})
    with torch.inference_mode():
        torch.testing.assert_close(compiled(x), model(x))
        model.load_state_dict({k: v * 2 if v.is_floating_point() else v for k, v in model.state_dict().items()})
        torch.testing.assert_close(compiled(x), model(x))
    assert [r["fuse_conv_bn"].counters for r in backend.reports] == [{"fused": 1}, {"fused": 1}]


def test_freeze_sees_batch_norm_statistics_updated_by_a_training_mode_call_outside_the_graph():
    """torch's batch-norm kernel updates running_mean/running_var in place in training mode
    without moving their version counters: after the uncompiled model recalibrated its
    statistics (a training-mode forward: AdaBN, swa_utils.update_bn), the frozen graph kept
    computing with the fused weights of the old ones, silently (a real-model sweep: error 0.29,
    0.094 on a MobileNet-like net). A frozen graph now watches each such batch norm's
    num_batches_tracked, which its training-mode forward moves, and freezes again; statistics
    written before every call end up graph inputs, as any tensor written so."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)).eval()
    compiled = torch.compile(model, backend="fxpasses", options={**INFERENCE, "freeze": True, "then": "eager", "pyproject": False})
    x = torch.randn(2, 3, 8, 8)
    bn = model[1]
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
        assert backend.reports[0]["fuse_conv_bn"].counters["fused"] == 1
        version = bn.running_mean._version
        model.train()
        model(torch.randn(8, 3, 8, 8) * 3 + 1)  # recalibrated
        model.eval()
        assert bn.running_mean._version == version  # (what made it unseen)
        torch.testing.assert_close(compiled(x), model(x))
        assert len(backend.reports) == 2  # frozen again, once
        assert backend.reports[-1]["fuse_conv_bn"].counters["fused"] == 1
        torch.testing.assert_close(compiled(x), model(x))
        assert len(backend.reports) == 2
        for _ in range(3):  # a train/evaluate loop of the uncompiled model: frozen anew, then kept inputs
            model.train()
            model(torch.randn(8, 3, 8, 8))
            model.eval()
            torch.testing.assert_close(compiled(x), model(x))
    # frozen anew after the first; written again right after that freeze, kept inputs after the second
    assert len(backend.reports) == 4
    assert "1.running_mean, 1.running_var" in [n for n in backend.reports[-1].notes if "written in place before every call" in n][0]


def test_freeze_names_batch_norm_statistics_it_cannot_watch():
    """Statistics given to F.batch_norm by a module of the user's own have no
    num_batches_tracked beside them: a training-mode call outside the graph cannot be seen, and
    the report's notes say so, naming them."""

    class OwnNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            self.register_buffer("running_mean", torch.randn(4))
            self.register_buffer("running_var", torch.rand(4) + 0.5)

        def forward(self, x):
            return nn.functional.batch_norm(self.conv(x), self.running_mean, self.running_var, training=self.training)

    model = OwnNorm().eval()
    compiled = torch.compile(model, backend="fxpasses", options={**INFERENCE, "freeze": True, "then": "eager", "pyproject": False})
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    (report,) = backend.reports
    assert report["fuse_conv_bn"].counters["fused"] == 1
    assert (
        "freeze: batch-norm running statistics folded into constants with no num_batches_tracked beside them to watch "
        "(batch norm updates them in training mode without moving their version counters): a training-mode call "
        "outside this graph is not seen, call torch._dynamo.reset() after one: running_mean, running_var"
    ) in report.notes
    # whatever their names: statistics are what batch norm reads as such (a final new-user
    # check: buffers named rm/rv were neither watched nor named, and served stale values)

    class OwnNames(OwnNorm):
        def __init__(self):
            super().__init__()
            self.register_buffer("rm", self._buffers.pop("running_mean"))
            self.register_buffer("rv", self._buffers.pop("running_var"))

        def forward(self, x):
            return nn.functional.batch_norm(self.conv(x), self.rm, self.rv, None, None, self.training, 0.1, 1e-5)

    torch._dynamo.reset()
    model = OwnNames().eval()
    compiled = torch.compile(model, backend="fxpasses", options={**INFERENCE, "freeze": True, "then": "eager", "pyproject": False})
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    report = backend.reports[-1]
    assert report["fuse_conv_bn"].counters["fused"] == 1
    assert [n for n in report.notes if "no num_batches_tracked" in n][0].endswith("call torch._dynamo.reset() after one: rm, rv")
    # an nn.BatchNorm's weight and bias, read by the same call, are no statistics: not named
    torch._dynamo.reset()
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).eval()
    torch.compile(model, backend="fxpasses", options={**INFERENCE, "freeze": True, "then": "eager", "pyproject": False})(x)
    assert not any("no num_batches_tracked" in n for n in backend.reports[-1].notes)


def test_the_pyproject_option_leaves_the_projects_table_out(tmp_path, monkeypatch):
    """A project's `[options.fold_constants]` table made `options={"pipeline":
    "fold_constants{max_numel=3}"}` an error (set twice), and its `verify` applied to a
    pipeline given in code, with no way to opt out (a new-user check). `pyproject=False`
    reads no pyproject.toml."""
    (tmp_path / "pyproject.toml").write_text('[tool.fxpasses]\nverify = "numeric"\n[tool.fxpasses.options.fold_constants]\nmax_numel = 7\n')
    monkeypatch.chdir(tmp_path)
    m, x = nn.Linear(4, 4), torch.ones(2, 4)
    options = {"pipeline": "fold_constants{max_numel=3}", "then": "eager"}
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"set twice"):
        torch.compile(m, backend="fxpasses", options=options)(x)
    torch._dynamo.reset()
    backend.reports.clear()
    torch.compile(m, backend="fxpasses", options={**options, "pyproject": False})(x)
    (report,) = backend.reports
    assert report.verification == "lint" and [p.name for p in report.passes] == ["fold_constants"]
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"option 'pyproject' must be true or false, got 'no'"):
        torch.compile(m, backend="fxpasses", options={**options, "pyproject": "no"})(x)


def test_freeze_of_a_dynamic_shape_graph_frozen_again_keeps_working_at_every_size(caplog):
    """A dynamic-batch graph frozen again (a folded weight written in place; another module
    instance) was compiled by inductor outside TorchDynamo's tracing context, from one call's
    inputs: specialised to that batch size, it failed at the next with "expected size 5==2"
    (a new-user check). It now runs as the optimized FX graph, with a warning once."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)).eval()
    with torch.no_grad():
        m[1].running_mean.normal_()
    compiled = torch.compile(m, backend="fxpasses", options={"preset": "inference", "freeze": True, "then": "inductor"})
    with torch.no_grad(), caplog.at_level("WARNING", logger="fxpasses.backend"):
        for bs in (2, 3):  # the second compiles a dynamic-batch graph
            x = torch.randn(bs, 3, 8, 8)
            torch.testing.assert_close(compiled(x), m(x))
        m[0].weight.mul_(1.5)  # folded into the fused conv: frozen again
        for bs in (2, 5, 4):
            x = torch.randn(bs, 3, 8, 8)
            torch.testing.assert_close(compiled(x), m(x))
    assert sum("a graph with dynamic shapes was frozen again" in r.message for r in caplog.records) == 1
    assert backend.reports[-1]["fuse_conv_bn"].counters == {"fused": 1}


def _eps_net() -> nn.Module:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).eval()
    with torch.no_grad():
        m[1].running_mean.normal_()
        m[1].running_var.uniform_(0.5, 2.0)
    return m


def test_freeze_with_dynamic_true_freezes_batch_norm_eps_and_fuses():
    """``torch.compile(dynamic=True)`` does not specialise floats: a BatchNorm's ``eps`` (and
    ``momentum``) reach the backend as 0-dim tensor inputs read with ``.item()``, so
    ``fuse_conv_bn`` skipped every pair ("eps is not a constant number") even with ``freeze``.
    Freezing makes them literals; each call checks their values, and a changed ``eps``
    freezes the graph again with the new value."""
    m = _eps_net()
    compiled = torch.compile(m, backend="fxpasses", dynamic=True, options={"preset": "inference", "freeze": True, "then": "eager"})
    with torch.no_grad():
        for bs in (2, 3, 5):
            x = torch.randn(bs, 3, 10, 10)
            torch.testing.assert_close(compiled(x), m(x))
        (report,) = backend.reports
        assert report["fuse_conv_bn"].counters == {"fused": 1}
        assert report.notes[1] == (
            "freeze: 2 module attribute numbers TorchDynamo made graph inputs frozen as constants (each call "
            "checks the value): 1.momentum = 0.1, 1.eps = 1e-05"
        )
        m[1].eps = 0.5  # read at every call: the frozen graph would still divide by sqrt(var + 1e-5)
        x = torch.randn(4, 3, 10, 10)
        out = compiled(x)
        torch.testing.assert_close(out, m(x))
    assert len(backend.reports) == 2
    assert backend.reports[-1].notes[1].endswith("1.momentum = 0.1, 1.eps = 0.5")
    assert backend.reports[-1]["fuse_conv_bn"].counters == {"fused": 1}


def test_freeze_leaves_a_module_number_the_graph_uses_as_a_tensor_an_input():
    """A module's number that TorchDynamo passed as a 0-dim tensor and the graph uses other
    than through ``.item()`` stays an input, and the report says which."""
    m = _eps_net()
    seen = []

    def grab(gm, example_inputs):
        # (inside the backend call: TorchDynamo removes the placeholders' sources afterwards)
        (eps,) = [n for n in gm.graph.find_nodes(op="placeholder") if n.name.endswith("eps")]
        (out,) = gm.graph.find_nodes(op="output")
        out.args = ((*out.args[0], eps),)  # now also returned: a use as a tensor
        freezing = backend._freeze(gm, example_inputs)
        seen.append((freezing, [n.name for n in gm.graph.find_nodes(op="placeholder")]))
        return lambda *args: (torch.zeros(2, 8, 8, 8),)  # (what TorchDynamo's graph returns: one tensor)

    with torch.no_grad():
        torch.compile(m, backend=grab, dynamic=True)(torch.randn(2, 3, 10, 10))
    ((freezing, placeholders),) = seen
    assert [name for name, *_ in freezing.numbers] == ["1.momentum"]
    assert freezing.numbers_kept == ["1.eps"]
    assert freezing.notes()[-1] == "freeze: kept as graph inputs, module attribute numbers the graph uses as tensors: 1.eps"
    assert any(p.endswith("eps") for p in placeholders) and not any(p.endswith("momentum") for p in placeholders)
    assert len(placeholders) == len(freezing.kept)
