"""Numeric verification compares like for like and leaves no trace on the user's objects."""

from __future__ import annotations

import math
import re
import sys

import pytest
import torch
from torch import nn

import fxpasses
from fxpasses import ConfigError, NodePass, Pipeline, Registry, Replace, on
from fxpasses.verify import TensorState, call_isolated, compare_outputs, tolerances


class Stateful(nn.Module):
    """Writes a buffer and its input, draws random numbers: each call differs."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("n", torch.zeros(1))

    def forward(self, x):
        self.n.add_(1)
        x.mul_(2)
        return (x + self.n) + torch.randn_like(x)


class SwapAdd(NodePass):
    """Rewrites a + b as b + a (exact): a correct pass."""

    name = "swap_add"

    @on("add", op="call_function")
    def add(self, node, ctx):
        a, b = node.args[:2]
        if isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node) and not node.kwargs:
            new = ctx.call_function(node.target, (b, a))
            return Replace(new)


@pytest.fixture
def reg():
    r = Registry(autoload=False)
    r.register(SwapAdd)
    return r


def test_correct_pass_on_stateful_random_model_verifies_and_leaves_no_trace(reg):
    gm = torch.export.export(Stateful(), (torch.ones(3),)).module()
    x = torch.ones(3)
    rng = torch.get_rng_state()
    report = Pipeline(["swap_add"], registry=reg, verify="numeric").run(gm, [x])
    assert report.passes[0].status == "ok" and report.passes[0].changed
    assert report.max_abs_error == 0.0
    assert torch.equal(x, torch.ones(3))  # the caller's input was not written
    assert torch.equal(gm.n, torch.zeros(1))  # nor the module's buffer
    assert torch.equal(torch.get_rng_state(), rng)  # nor the caller's random stream


def test_call_isolated_gives_the_same_result_every_time():
    gm = torch.export.export(Stateful(), (torch.ones(3),)).module()
    state = TensorState(gm)
    first = call_isolated(gm, [torch.ones(3)], state)
    second = call_isolated(gm, [torch.ones(3)], state)
    assert torch.equal(first, second)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        expected = torch.full((3,), 3.0) + torch.randn(3)
    torch.testing.assert_close(first, expected)


def test_module_that_does_not_run_on_the_inputs_is_a_user_error(reg):
    gm = torch.fx.symbolic_trace(nn.Linear(4, 4))
    with pytest.raises(fxpasses.UserError, match="does not run on the example inputs: RuntimeError"):
        Pipeline(["swap_add"], registry=reg, verify="numeric").run(gm, [torch.ones(2, 5)])


class _LinDropTimesOne(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin, self.drop = nn.Linear(3, 3), nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.lin(x)) * 1


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_numeric_verification_refuses_a_module_whose_code_is_not_its_graphs(dialect):
    """A GraphModule whose graph was edited without `recompile()` runs code its graph no
    longer holds. Numeric verification took its reference outputs from that code, the first
    pass that changed anything recompiled the module, and the innocent pass was blamed
    ("max abs error 1.83", a bisect hint) and rolled back (a new-user check). The run now
    refuses to start, naming the first line that differs; the graph and the module are left
    as they were. Freshly captured modules of every dialect are not stale."""
    from fxpasses.capture import capture
    from fxpasses.errors import InputGraphError
    from fxpasses.lint import stale_code_problem

    if dialect == "dynamo":
        torch._dynamo.reset()
    torch.manual_seed(0)
    x = torch.randn(2, 3)
    model = _LinDropTimesOne().eval()
    c = capture(model, [x], dialect)
    assert stale_code_problem(c.gm) is None
    mul = next(n for n in c.gm.graph.nodes if n.args and n.args[-1] == 1)
    mul.args = (*mul.args[:-1], 3)  # edited, not recompiled
    code, before = c.gm.code, c.gm(*c.inputs)
    with pytest.raises(InputGraphError) as info:
        Pipeline.from_string("remove_dropout", verify="numeric").run(c.gm, c.inputs)
    said = str(info.value)
    assert said.startswith(
        "numeric verification cannot start: the module's code is not its graph's: the graph was edited after the last "
        "recompile(), so the module runs code the graph no longer holds (line "
    ), said
    assert said.endswith("); call gm.recompile() so that it runs its graph"), said
    old_line, new_line = said.split("the graph generates")  # (`mul = drop * 1;  drop = None`, `mul.Tensor(..., 1)`)
    assert re.search(r"(\* 1;|, 1\))", old_line) and re.search(r"(\* 3;|, 3\))", new_line), said
    assert c.gm.code == code
    torch.testing.assert_close(c.gm(*c.inputs), before)
    c.gm.recompile()
    report = Pipeline.from_string("remove_dropout", verify="numeric").run(c.gm, c.inputs)
    assert report["remove_dropout"].changed
    torch.testing.assert_close(c.gm(*c.inputs)[0] if dialect == "dynamo" else c.gm(*c.inputs), model(x) * 3)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, True, "1e-5"])
def test_tolerances_must_be_finite_non_negative_numbers(reg, bad):
    with pytest.raises(ConfigError, match="atol must be a finite number >= 0"):
        Pipeline(["swap_add"], registry=reg, verify="numeric", atol=bad)
    with pytest.raises(ValueError):
        compare_outputs(torch.ones(1), torch.ones(1), bad if isinstance(bad, float) else -1.0, 0.0)


@pytest.mark.parametrize("text, given", [("nan", "nan"), ("inf", "inf"), ("-inf", "-inf")])
def test_config_tolerances_must_be_finite(tmp_path, text, given):
    """``atol = nan`` in a config said "should be greater than or equal to 0" (found by a
    new-user check); a config's tolerance is refused as not finite, as Pipeline(atol=...) does."""
    from fxpasses.config import load_config_file

    cfg = tmp_path / "fx.toml"
    for key in ("atol", "rtol"):
        cfg.write_text(f'pipeline = "eliminate_dead_code"\n{key} = {text}\n')
        with pytest.raises(ConfigError) as info:
            load_config_file(cfg)
        assert str(info.value) == f"{cfg}: invalid config:\n  {key}: Input should be a finite number (given: {given})"


def test_low_precision_floors():
    assert tolerances(torch.float32, 1e-5, 1e-5, scale=100.0) == (1e-5, 1e-5)
    assert tolerances(torch.float16, 1e-5, 1e-5) == (1e-5, 1e-3)
    assert tolerances(torch.bfloat16, 0.0, 0.0) == (1e-5, 1.6e-2)
    # no atol scaled by the largest magnitude: one large element (a mask's finfo.min) made it
    # admit anything (fxpasses.reference64 judges low-precision rounding instead)
    assert tolerances(torch.float16, 1e-5, 1e-5, scale=4.0) == (1e-5, 1e-3)
    masked = torch.tensor([1.0, 3.5, torch.finfo(torch.float16).min], dtype=torch.float16)
    wrong = torch.tensor([0.0, 0.0, torch.finfo(torch.float16).min], dtype=torch.float16)
    assert compare_outputs(wrong, masked, 1e-5, 1e-5).message.startswith("output: max abs error 3.5 exceeds")
    a = torch.tensor([2.0], dtype=torch.float16)
    b = torch.tensor([2.0 + 2**-9], dtype=torch.float16)  # one ulp apart at 2.0
    assert compare_outputs(b, a, 1e-5, 1e-5).message == ""
    assert compare_outputs(b.float(), a.float(), 1e-5, 1e-5).message  # not in float32


def test_compare_outputs_structure_dtype_nan_and_python_values():
    t = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare_outputs((t, {"k": 3}), (t.clone(), {"k": 3}), 0, 0).message == ""
    assert "NaN positions differ" in compare_outputs(torch.tensor([1.0, 0.0]), torch.tensor([1.0, float("nan")]), 1, 1).message
    assert "infinities differ" in compare_outputs(torch.tensor([-math.inf]), torch.tensor([math.inf]), 1, 1).message
    assert "dtype changed from torch.int64 to torch.float32" in compare_outputs(torch.ones(1), torch.ones(1, dtype=torch.long), 1, 1).message
    assert "output[1]: expected 3, got 3.0" in compare_outputs((t, 3.0), (t, 3), 0, 0).message
    assert "output['k']" in compare_outputs({"k": torch.zeros(2)}, {"k": torch.ones(2)}, 0, 0).message
    # a leaf on another device is a mismatch, not outputs that cannot be compared
    moved = compare_outputs((t, torch.ones(2, device="meta")), (t, torch.ones(2)), 1, 1).message
    assert moved == "output[1]: device changed from cpu to meta"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dialect", ["symbolic_trace", "export"])
def test_half_precision_conv_bn_fusion_verifies_numerically(dtype, dialect):
    from fxpasses.capture import capture

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)).eval()
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2)
        model[1].weight.uniform_(0.5, 2)
    model = model.to(dtype)
    x = torch.randn(2, 3, 8, 8).to(dtype)
    cap = capture(model, [x], dialect)
    report = fxpasses.run(cap.gm, "fuse_conv_bn", cap.inputs, verify="numeric", atol=1e-5, rtol=1e-5)
    assert report["fuse_conv_bn"].counters["fused"] == 1
    weights = [t for t in cap.gm.state_dict().values() if t.ndim == 4]
    assert weights and all(t.dtype == dtype for t in weights)  # the fused weight keeps the dtype


class Lin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(4, 4)

    def forward(self, x):
        return self.l(x)


class DoubleWeightsHalveOutput(fxpasses.GraphPass):
    """Correct: doubles the Linear's weight and bias in place and halves its output."""

    name = "double_halve"

    def run(self, gm, ctx):
        with torch.no_grad():
            gm.l.weight.mul_(2)
            gm.l.bias.mul_(2)
        (out,) = [n for n in gm.graph.nodes if n.op == "call_module"]
        with gm.graph.inserting_after(out):
            half = gm.graph.call_function(torch.mul, (out, 0.5))
        out.replace_all_uses_with(half, delete_user_cb=lambda u: u is not half)
        return True


class DoubleWeightsOnly(fxpasses.GraphPass):
    """Wrong: doubles the weights through .data (which does not bump the tensor version)."""

    name = "double_only"

    def run(self, gm, ctx):
        gm.l.weight.data.mul_(2)
        return True


def test_pass_that_writes_weights_in_place_is_verified_as_it_left_them():
    reg = Registry(autoload=False)
    reg.register(DoubleWeightsHalveOutput)
    reg.register(DoubleWeightsOnly)
    model = Lin()
    x = torch.randn(3, 4)
    gm = torch.fx.symbolic_trace(model)
    expected = model(x)
    report = Pipeline(["double_halve"], registry=reg, verify="numeric").run(gm, [x])
    assert report.passes[0].status == "ok"
    torch.testing.assert_close(gm(x), expected)
    for snapshot_tensors in (False, True):  # restored by the write guard, or from full copies
        gm = torch.fx.symbolic_trace(Lin())
        weight = gm.l.weight.detach().clone()
        with pytest.raises(fxpasses.PassFailedError, match="verification failed") as info:
            Pipeline(["double_only"], registry=reg, verify="numeric", snapshot_tensors=snapshot_tensors).run(gm, [x])
        assert "could not be restored" not in str(info.value)
        assert torch.equal(gm.l.weight, weight)  # restored although .data did not bump the version


def test_train_mode_batch_norm_statistics_untouched_by_numeric_verification():
    model = nn.Sequential(nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3)).train()
    for dialect in ("symbolic_trace", "export"):
        from fxpasses.capture import capture

        cap = capture(model, [torch.randn(2, 3, 4, 4)], dialect)
        before = {k: v.clone() for k, v in cap.gm.state_dict().items()}
        Pipeline.from_string("rename_nodes{pattern=zzz,replacement=y}", verify="numeric").run(cap.gm, cap.inputs)
        after = cap.gm.state_dict()
        assert all(torch.equal(before[k], after[k]) for k in before), dialect


class Rebinder(fxpasses.GraphPass):
    """Binds a new (equal) Parameter; fails when told to."""

    name = "rebinder"

    class Options(fxpasses.PassOptions):
        fail: bool = False

    def run(self, gm, ctx):
        gm.l.weight = nn.Parameter(gm.l.weight.detach().clone())
        gm.register_buffer("extra", torch.ones(2))
        if self.options.fail:
            raise ValueError("pass bug")
        return True


def test_numeric_verification_leaves_unwritten_tensors_unwritten():
    """Verification runs put back only what the run changed: a tensor it did not write keeps
    its version, so autograd still backpropagates through a tensor constant that a
    ``symbolic_trace`` computed from a parameter-like tensor (``exp`` saves its result)."""

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 4))
            self.plain = torch.ones(4, requires_grad=True)

        def forward(self, x):
            return (x @ self.w) * self.plain.exp()

    torch.manual_seed(0)
    x = torch.randn(4, 4)
    gm = torch.fx.symbolic_trace(M().train())
    constant = gm._tensor_constant0
    assert constant.grad_fn is not None
    version = constant._version
    Pipeline.from_string("eliminate_dead_code", verify="numeric").run(gm, [x])
    assert constant._version == version
    gm(x).sum().backward()  # raised "modified by an inplace operation" before
    assert gm.w.grad is not None


def test_tensor_state_restores_every_changed_bit():
    t = torch.tensor([0.0, 1.0, float("nan"), 2.0])
    i = torch.tensor([1, 2, 3])
    state = TensorState.__new__(TensorState)
    with torch.no_grad():
        state.saved, state.generators = [(t, t.clone()), (i, i.clone())], []
    t[0] = -0.0  # equal to 0.0 for torch.equal, not the same bits
    t.data[3] = 5.0  # through .data: no version bump
    i_version = i._version
    state.restore()
    assert math.copysign(1.0, t[0].item()) == 1.0 and t[3].item() == 2.0 and math.isnan(t[2].item())
    assert i._version == i_version  # unchanged: not written


def test_rebinding_parameters_is_detected_and_rolled_back_by_identity():
    reg = Registry(autoload=False)
    reg.register(Rebinder)
    gm = torch.fx.symbolic_trace(Lin())
    original = gm.l.weight
    with pytest.raises(fxpasses.PassFailedError, match="pass bug"):
        Pipeline([("rebinder", {"fail": True})], registry=reg).run(gm, [torch.randn(2, 4)])
    assert gm.l.weight is original and not hasattr(gm, "extra")
    report = Pipeline(["rebinder"], registry=reg, verify="numeric").run(gm, [torch.randn(2, 4)])
    assert report.passes[0].changed and gm.l.weight is not original


def _explode(x):
    raise RuntimeError("planted runtime failure")


class Explode(fxpasses.NodePass):
    """Makes the module raise when it runs."""

    name = "explode"

    @fxpasses.on("relu")
    def relu(self, node, ctx):
        return fxpasses.Replace(ctx.call_function(_explode, node.args))


def _say(x):
    """A graph function that writes to stderr when it runs (as a model's own logging may)."""
    sys.stderr.write("the model speaks\n")
    return x


def _speaking_relu_graph():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(torch.relu, (g.call_function(_say, (x,)),)))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_failed_verification_run_prints_no_torch_traceback(capsys):
    reg = Registry(autoload=False)
    reg.register(Explode)
    x = torch.randn(3)
    with pytest.raises(fxpasses.PassFailedError, match="no longer runs on the example inputs: RuntimeError: planted"):
        Pipeline(["explode"], registry=reg, verify="numeric").run(_speaking_relu_graph(), [x])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "FX-traced" not in captured.err
    # a run that succeeds keeps what the model itself wrote to stderr (reference run + check)
    Pipeline.from_string("rename_nodes{pattern=relu,replacement=r}", verify="numeric").run(_speaking_relu_graph(), [x])
    assert capsys.readouterr().err.count("the model speaks") == 2


def _mode_switching_graph():
    """A graph that turns gradients off and autocast on without turning them back, as a
    TorchDynamo graph cut by a graph break inside no_grad()/autocast holds."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.call_function(torch._C._set_grad_enabled, (False,))
    g.call_function(torch.amp.autocast_mode._enter_autocast, ("cpu", torch.bfloat16, True, None))
    g.output((g.call_function(torch.relu, (x,)),))
    return torch.fx.GraphModule(torch.nn.Module(), g)


@pytest.mark.parametrize("pipeline", ["propagate_shapes{mode=fake}", "propagate_shapes{mode=real}", "rename_nodes{pattern=relu,replacement=r}"])
def test_running_a_graph_leaves_grad_mode_and_autocast_as_they_were(pipeline):
    gm = _mode_switching_graph()
    assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")
    dtype = torch.get_autocast_dtype("cpu")
    Pipeline.from_string(pipeline, verify="numeric").run(gm, [torch.randn(3)])
    assert torch.is_grad_enabled()
    assert not torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == dtype
    from fxpasses.job import _latency_ms

    _latency_ms(lambda: gm(torch.randn(3)), repeat=2)
    assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")


class _AddLin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x, y):
        return self.lin(x + y)


class DropLin(fxpasses.GraphPass):
    """Deletes the submodule ``lin`` that the graph still calls (breaks the graph)."""

    name = "drop_lin"

    def run(self, gm, ctx):
        del gm.lin
        return True


@pytest.fixture
def reg_breaking():
    r = Registry(autoload=False)
    r.register(SwapAdd)
    r.register(DropLin)
    return r


@pytest.mark.parametrize("on_error", ["rollback", "skip"])
def test_an_input_graph_that_fails_lint_is_blamed_on_the_input_not_the_first_pass(reg, on_error):
    """The run's first lint of the whole graph fails after the first pass that changed it: the
    pass is rolled back, and since the graph as given fails the same lint, the error is an
    InputGraphError naming the fault, not a PassFailedError blaming the pass."""
    gm = torch.fx.symbolic_trace(_AddLin())
    del gm.lin  # broken before any pass
    code = gm.code
    with pytest.raises(fxpasses.InputGraphError) as info:
        Pipeline(["swap_add"], registry=reg, on_error=on_error).run(gm)
    msg = str(info.value)
    assert "fails lint as given, before any pass changed it" in msg
    assert "references nonexistent attribute lin" in msg
    assert "'swap_add', the first to change it, was rolled back and is not at fault" in msg
    assert isinstance(info.value, fxpasses.UserError)
    assert gm.code == code and [n.target for n in gm.graph.nodes if n.op == "call_function"][0].__name__ == "add"
    add = next(n for n in gm.graph.nodes if n.op == "call_function")
    assert [a.name for a in add.args] == ["x", "y"]  # the swap was undone


class _DropThenLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.d = nn.Dropout()
        self.l = nn.Linear(3, 3)

    def forward(self, x):
        return self.l(self.d(x)) + 1


@pytest.mark.parametrize("on_error", ["rollback", "skip"])
def test_a_pass_failing_in_its_own_code_on_a_broken_input_graph_blames_the_input(on_error):
    """The input uses a value before it is defined; remove_dropout fails on it in its hook
    (it cannot put %add where %d was): the run says the input fails lint, with the pass's
    own error beside it, and leaves the graph as given."""
    gm = torch.fx.symbolic_trace(_DropThenLinear().eval())
    dropout = next(n for n in gm.graph.nodes if n.op == "call_module")
    out = next(iter(gm.graph.find_nodes(op="output"))).args[0]
    dropout.args = (out,)  # %d now reads %add, defined after it
    code = gm.code
    with pytest.raises(fxpasses.InputGraphError) as info:
        Pipeline(["remove_dropout", "eliminate_dead_code"], on_error=on_error).run(gm, [torch.randn(2, 3)])
    msg = str(info.value)
    assert msg.startswith("the graph fails lint as given, before any pass changed it (RuntimeError: Argument 'add' of Node 'd'")
    assert "pass 'remove_dropout' failed on it (ValueError: cannot replace %d by %add" in msg
    assert gm.code == code and dropout.args == (out,)


def test_a_pass_failing_in_its_own_code_on_a_clean_input_is_the_one_blamed():
    class Boom(fxpasses.GraphPass):
        name = "boom"

        def run(self, gm, ctx):
            raise ValueError("planted")

    reg = Registry(autoload=False)
    reg.register(Boom)
    gm = torch.fx.symbolic_trace(_AddLin())
    with pytest.raises(fxpasses.PassFailedError, match="pass 'boom' failed: ValueError: planted") as info:
        Pipeline(["boom"], registry=reg).run(gm)
    assert not isinstance(info.value, fxpasses.InputGraphError) and not info.value.notes


def test_a_pass_that_breaks_a_clean_graph_is_still_the_one_blamed(reg_breaking):
    gm = torch.fx.symbolic_trace(_AddLin())
    with pytest.raises(fxpasses.PassFailedError) as info:
        Pipeline(["drop_lin"], registry=reg_breaking, on_error="rollback").run(gm)
    assert "pass 'drop_lin' failed: graph lint failed" in str(info.value)
    assert not info.value.notes
    assert isinstance(gm.lin, nn.Linear)  # rolled back


def test_a_graph_broken_by_an_unverified_pass_names_that_pass(reg_breaking):
    """drop_lin runs with verify=none and breaks the graph; swap_add, linted next, is rolled
    back, and its error says the graph failed the lint before it, changed by drop_lin."""
    gm = torch.fx.symbolic_trace(_AddLin())
    pipe = Pipeline.from_string("drop_lin[verify=none],swap_add", registry=reg_breaking)
    with pytest.raises(fxpasses.PassFailedError) as info:
        pipe.run(gm)
    err = info.value
    assert "pass 'swap_add' failed: graph lint failed" in str(err)
    assert len(err.notes) == 1
    note = err.notes[0]
    assert note.startswith(
        "the graph already failed this lint before 'swap_add' ran (RuntimeError: Node lin target lin "
        "references nonexistent attribute lin"
    )
    assert note.endswith("since its last lint it was changed, without one, by: 'drop_lin'")


def test_with_on_error_raise_an_input_graph_that_fails_lint_is_blamed_before_any_pass_runs(reg):
    gm = torch.fx.symbolic_trace(_AddLin())
    del gm.lin
    code = gm.code
    with pytest.raises(fxpasses.InputGraphError) as info:
        Pipeline(["swap_add"], registry=reg, on_error="raise").run(gm)
    msg = str(info.value)
    assert "fails lint as given, before any pass changed it" in msg
    assert "no pass was run ('swap_add' was next)" in msg
    add = next(n for n in gm.graph.nodes if n.op == "call_function")
    assert [a.name for a in add.args] == ["x", "y"] and gm.code == code  # swap_add never ran


def test_with_on_error_raise_a_clean_input_is_linted_once_and_a_breaking_pass_still_blamed(reg_breaking, monkeypatch):
    import fxpasses.pipeline as pl

    class JournaledSwapAdd(SwapAdd):
        name = "journaled_swap_add"
        writes_tensors = False
        journal_edits = True

    reg_breaking.register(JournaledSwapAdd)
    wholes = []
    real = pl.lint_passes
    monkeypatch.setattr(pl, "lint_passes", lambda gm: wholes.append(1) or real(gm))
    for name, whole_lints in (("journaled_swap_add", 1), ("swap_add", 2)):
        wholes.clear()
        gm = torch.fx.symbolic_trace(_AddLin())
        report = Pipeline([name], registry=reg_breaking, on_error="raise").run(gm)
        # the graph as given, before the pass; after it, a journaled pass's edits only
        assert report.passes[0].changed and len(wholes) == whole_lints, name
    gm = torch.fx.symbolic_trace(_AddLin())
    with pytest.raises(fxpasses.PassFailedError, match="pass 'drop_lin' failed: graph lint failed"):
        Pipeline(["drop_lin"], registry=reg_breaking, on_error="raise").run(gm)


def test_an_argument_the_input_already_held_does_not_shift_the_blame_off_a_breaking_pass(reg_breaking):
    """The input holds an argument the generated code cannot spell (let through: the caller's,
    not a pass's); drop_lin then breaks the graph. Linting the graph as given again looks at
    its structure only, which is fine, so drop_lin is the one blamed."""
    gm = torch.fx.symbolic_trace(_AddLin())
    odd = object()
    add = next(n for n in gm.graph.nodes if n.op == "call_function")
    g = gm.graph
    with g.inserting_after(add):
        keep = g.call_function(torch._assert, (True, odd))  # an argument repr() cannot spell
    del keep
    with pytest.raises(fxpasses.PassFailedError, match="pass 'drop_lin' failed: graph lint failed") as info:
        Pipeline(["drop_lin"], registry=reg_breaking).run(gm)
    assert info.value.rolled_back and not info.value.notes


class _AddsToInput(nn.Module):
    def forward(self, x):
        x.add_(1)
        return x * 2


def test_the_reference_run_sees_the_inputs_layout_so_a_module_that_cannot_run_on_them_is_the_users_error():
    """An expanded input (stride 0) that the module writes in place fails in eager mode; the
    reference run copied inputs packed and succeeded, so propagate_shapes (which keeps the
    layout) was blamed. The reference run now keeps the layout too."""
    x = torch.arange(4.0)[None].expand(3, 4)
    gm = torch.fx.symbolic_trace(_AddsToInput())
    with pytest.raises(fxpasses.UserError, match="the module does not run on the example inputs: RuntimeError: unsupported operation") as info:
        Pipeline.from_string("propagate_shapes{mode=real},eliminate_dead_code", verify="numeric").run(gm, [x])
    assert not isinstance(info.value, fxpasses.PassFailedError)
    assert torch.equal(x, torch.arange(4.0)[None].expand(3, 4))


def test_verification_copies_keep_shared_storage_between_inputs():
    """Two inputs that are views of one tensor: a write through one shows in the other in the
    reference run, as in the caller's call (packed copies gave 2 * y, not 2 * (y + 1))."""

    class WriteThroughA(nn.Module):
        def forward(self, a, b):
            a.add_(1)
            return b * 2

    base = torch.zeros(4)
    a, b = base[:2], base[:2]
    gm = torch.fx.symbolic_trace(WriteThroughA())
    from fxpasses.verify import TensorState, call_isolated

    out = call_isolated(gm, [a, b], TensorState(gm))
    assert torch.equal(out, torch.full((2,), 2.0)) and torch.equal(base, torch.zeros(4))


class DropSecondAdd(NodePass):
    """Replaces the second add by its first argument (wrong): a journaled node-level pass."""

    name = "drop_second_add"
    journal_edits = True
    writes_tensors = False

    def setup(self, gm, ctx):
        self.n = 0

    @on("add", op="call_function")
    def visit(self, node, ctx):
        self.n += 1
        return Replace(node.args[0]) if self.n == 2 else None


class TwoOutputs(nn.Module):
    def forward(self, x):
        a = x + 1
        b = a + 2
        return a * 2, {"y": b + 0.5}


@pytest.mark.parametrize("journal", [True, False])
def test_numeric_failure_names_output_errors_nodes_and_bisect(journal, monkeypatch):
    monkeypatch.setattr(DropSecondAdd, "journal_edits", journal)  # journal or snapshot rollback
    gm = torch.fx.symbolic_trace(TwoOutputs())
    x = torch.ones(3)
    with pytest.raises(fxpasses.PassFailedError) as info:
        Pipeline([DropSecondAdd], verify="numeric", atol=1e-4, rtol=1e-3).run(gm, [x])
    text = str(info.value)
    lines = text.splitlines()
    # which output, how far off (abs and rel) against which tolerances, where first
    assert lines[0] == (
        "pass 'drop_second_add' failed: verification failed: output[1]['y']: max abs error 2 exceeds "
        "atol=0.0001, rtol=0.001 (max rel error 0.444; 3 of 3 elements out of tolerance, the first at "
        "index (0,): 2.5 vs expected 4.5)"
    )
    # the node the pass changed (the erased add; its user got the add's input)
    assert "  note: 'drop_second_add' changed these nodes: %add_1 (erased), %add_2 (edited)" in lines
    assert (
        "  note: to find the rewrite that changed the outputs, run `fxpasses bisect CONFIG` with this "
        "run's config, or in Python `fxpasses.bisect.bisect(pipeline, gm, example_inputs, example_kwargs=...)`"
    ) in lines
    assert callable(__import__("fxpasses.bisect", fromlist=["bisect"]).bisect)


def test_numeric_failure_names_at_most_five_changed_nodes():
    class ChainOfAdds(nn.Module):
        def forward(self, x):
            for _ in range(8):
                x = x + 1
            return x

    class DropAllAdds(NodePass):
        name = "drop_all_adds"
        journal_edits = True
        writes_tensors = False

        @on("add", op="call_function")
        def visit(self, node, ctx):
            return Replace(node.args[0])

    gm = torch.fx.symbolic_trace(ChainOfAdds())
    with pytest.raises(fxpasses.PassFailedError) as info:
        Pipeline([DropAllAdds], verify="numeric").run(gm, [torch.zeros(2)])
    note = next(line for line in str(info.value).splitlines() if "changed these nodes" in line)
    assert note == (
        "  note: 'drop_all_adds' changed these nodes (the first 5 of 9, in graph order): "
        "%add (erased), %add_1 (erased), %add_2 (erased), %add_3 (erased), %add_4 (erased)"
    )


def test_compare_outputs_walks_registered_dataclasses():
    import dataclasses

    @dataclasses.dataclass
    class Out:
        logits: torch.Tensor
        extra: torch.Tensor

    torch.utils._pytree.register_dataclass(Out)
    try:
        e = Out(torch.zeros(2), torch.ones(2))
        assert compare_outputs(Out(torch.zeros(2), torch.ones(2)), e, 1e-5, 1e-5).message == ""
        msg = compare_outputs(Out(torch.zeros(2), torch.ones(2) * 3), e, 1e-5, 1e-5).message
        assert msg.startswith("output.extra: max abs error 2 exceeds atol=1e-05, rtol=1e-05 (max rel error 2;")
        assert compare_outputs((1,), e, 1e-5, 1e-5).message == "output: expected a Out, got tuple"
        cloned = fxpasses.verify.clone_outputs(e)
        assert type(cloned) is Out and cloned.logits is not e.logits and torch.equal(cloned.extra, e.extra)
    finally:
        torch.utils._pytree._deregister_pytree_node(Out)


def test_clone_outputs_keeps_dict_subclasses_and_copies_their_tensors():
    """A Hugging Face ModelOutput, an OrderedDict and a defaultdict stay of their class (with
    their fields and factory), and every tensor in them is a detached copy."""
    import collections

    from transformers.modeling_outputs import CausalLMOutputWithCrossAttentions

    from fxpasses.verify import clone_outputs

    t = torch.randn(2, 3, requires_grad=True) * 2
    out = CausalLMOutputWithCrossAttentions(logits=t, hidden_states=(t, t))
    c = clone_outputs(out)
    assert type(c) is CausalLMOutputWithCrossAttentions
    assert list(c.keys()) == ["logits", "hidden_states"] and c.loss is None
    assert c.logits is c["logits"] and c.hidden_states is c["hidden_states"]
    assert not c.logits.requires_grad and torch.equal(c.logits, t)
    assert c.logits.data_ptr() != t.data_ptr() and c.hidden_states[1].data_ptr() != t.data_ptr()
    assert out.logits is t  # the original is left as it was

    od = clone_outputs(collections.OrderedDict(b=t, a=t))
    assert type(od) is collections.OrderedDict and list(od) == ["b", "a"] and od["a"].data_ptr() != t.data_ptr()
    dd = clone_outputs(collections.defaultdict(list, a=t))
    assert type(dd) is collections.defaultdict and dd.default_factory is list
    assert torch.equal(dd["a"], t) and dd["a"].data_ptr() != t.data_ptr()
    plain = clone_outputs({"a": t})
    assert type(plain) is dict and plain["a"].data_ptr() != t.data_ptr()


def test_a_mismatch_prints_its_values_with_the_digits_that_tell_them_apart():
    """`0.235238 vs expected 0.235238`: six digits hid a float32 difference over the tolerance
    (a pass-author check). Each dtype's values print with the digits that read them back
    exactly: 9 for float32, 17 for float64, 5 for float16, 4 for bfloat16."""
    from fxpasses.verify import compare_outputs

    e = torch.tensor([0.2352380007505417], dtype=torch.float32)
    a = torch.nextafter(e, torch.tensor(1.0))
    msg = compare_outputs(a, e, 0.0, 0.0).message
    assert msg.endswith(f"the first at index (0,): {a.item():.9g} vs expected {e.item():.9g})"), msg
    assert f"{a.item():.9g}" != f"{e.item():.9g}" and f"{a.item():.6g}" == f"{e.item():.6g}"
    for dtype, digits in ((torch.float64, 17), (torch.float16, 5), (torch.bfloat16, 4)):
        e = torch.tensor([1.0 / 3.0], dtype=dtype)
        a = e * 1.1 if dtype != torch.float64 else torch.nextafter(e, torch.tensor(1.0, dtype=dtype))  # (over the float16/bfloat16 floors)
        msg = compare_outputs(a, e, 0.0, 0.0).message
        shown = f"{a.item():.{digits}g} vs expected {e.item():.{digits}g})"
        assert msg.endswith(shown), msg
        assert torch.equal(torch.tensor([float(shown.split(" ")[0])], dtype=dtype), a)  # reads back exactly


class _DrawsFromItsGenerator(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.g = torch.Generator().manual_seed(0)

    def forward(self, x):
        return x + torch.randn(x.shape, generator=self.g)


@pytest.mark.parametrize("dialect", ["export", "symbolic_trace"])
def test_numeric_verification_starts_each_call_from_the_modules_generator_state(dialect):
    """A module drawing from a torch.Generator it holds: verification reseeded only the global
    generator, so each call drew other numbers (a pass that only renames a node failed with
    "max abs error 1"), and a run left the caller's generator advanced (an adversarial check)."""
    from fxpasses.capture import capture

    import warnings

    x = torch.randn(4)
    with warnings.catch_warnings():
        # (symbolic_trace's own check of the graph drew other numbers too, and warned)
        warnings.simplefilter("error", fxpasses.errors.CaptureWarning)
        c = capture(_DrawsFromItsGenerator(), [x], dialect)
    graph_args = [v for n in c.gm.graph.nodes for v in n.kwargs.values()]
    (gen,) = [v for m in c.gm.modules() for v in [*vars(m).values(), *graph_args] if isinstance(v, torch.Generator)][:1]
    state = gen.get_state().clone()
    report = fxpasses.Pipeline.from_string(
        "simplify_algebra,rename_nodes{pattern='add',replacement=plus}", verify="numeric"
    ).run(c.gm, c.inputs)
    assert [p.status for p in report.passes] == ["ok", "ok"]
    assert torch.equal(gen.get_state(), state)
