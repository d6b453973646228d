"""propagate_shapes: exact shapes/dtypes in every dialect, fake and real, graph untouched."""

from __future__ import annotations

import pytest
import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.passes.shape_prop import TensorMetadata

import fxpasses
from fxpasses import GraphPass, Pipeline, UserError
from fxpasses.builtin_passes.shapes import MissingExampleInputsError, PropagateShapes
from fxpasses.capture import capture
from fxpasses.context import tensor_info
from fxpasses.errors import PassFailedError
from fxpasses.testing import normalized_code

DIALECTS = ("symbolic_trace", "dynamo", "export")
MODES = ("fake", "real", "auto")


class Mixed(torch.nn.Module):
    """Float, int64 and bool tensors in, a tuple of float/int64/bool tensors out."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.bn = torch.nn.BatchNorm1d(3)

    def forward(self, x, idx, mask):
        y = self.bn(self.lin(x))  # float32 [5, 3]
        z = y[idx]  # float32 [3, 3]
        w = torch.where(mask, z, 0.0)  # float32 [3, 3]
        return w.sum(-1), idx + 1, mask & (idx > 0)


def mixed_inputs():
    return (torch.randn(5, 4), torch.tensor([0, 2, 4]), torch.tensor([[True, False, True]] * 3))


EXPECTED_OUT = [((3,), torch.float32), ((3,), torch.int64), ((3, 3), torch.bool)]


class DataDependent(torch.nn.Module):
    def forward(self, x):
        return torch.nonzero(x > 0).float() * 2


def _truth(gm: torch.fx.GraphModule, inputs) -> dict[str, object]:
    """Every node's real value, from a plain Interpreter run (the ground truth)."""
    interp = torch.fx.Interpreter(gm, garbage_collect_values=False)
    with torch.no_grad():
        interp.run(*inputs)
    return {n.name: v for n, v in interp.env.items()}


def _state(gm: torch.nn.Module):
    return {k: (v._version, v.detach().clone()) for k, v in gm.state_dict(keep_vars=True).items()}


def _assert_same_state(gm, before):
    after = _state(gm)
    assert after.keys() == before.keys()
    for k, (version, value) in before.items():
        assert after[k][0] == version, k
        assert torch.equal(after[k][1], value), k


def _run(gm, inputs, mode="auto"):
    return Pipeline([("propagate_shapes", {"mode": mode})]).run(gm, inputs)


@pytest.fixture(scope="module")
def captured():
    """{dialect: Captured} of Mixed in eval mode (capture once; each test copies the graph)."""
    torch.manual_seed(0)
    model = Mixed().eval()
    return {d: capture(model, mixed_inputs(), d) for d in DIALECTS}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_records_exact_shapes_and_dtypes(captured, dialect, mode):
    cap = captured[dialect]
    gm = cap.gm
    for n in gm.graph.nodes:  # forget what the capture recorded
        for key in ("val", "tensor_meta"):
            n.meta.pop(key, None)
    truth = _truth(gm, cap.inputs)
    code = normalized_code(gm)
    report = _run(gm, cap.inputs, mode)
    assert normalized_code(gm) == code
    annotated = 0
    for node in gm.graph.nodes:
        real = truth[node.name]
        if isinstance(real, torch.Tensor):
            annotated += 1
            assert tensor_info(node) == (real.shape, real.dtype), node.name
            assert isinstance(node.meta["val"], FakeTensor), node.name
            tm = node.meta["tensor_meta"]
            assert isinstance(tm, TensorMetadata)
            assert (tm.shape, tm.dtype, tm.stride) == (real.shape, real.dtype, real.stride()), node.name
    out = gm.graph.output_node()
    assert [(tuple(v.shape), v.dtype) for v in out.meta["val"]] == EXPECTED_OUT
    assert [(tuple(t.shape), t.dtype) for t in out.meta["tensor_meta"]] == EXPECTED_OUT
    counters = report.passes[0].counters
    assert counters["nodes_annotated"] == annotated + 1  # the output node: a tuple of tensors
    assert "real_fallback" not in counters
    # the user inputs are there with their dtypes, whatever the dialect calls them
    dtypes = {n.meta["val"].dtype for n in gm.graph.find_nodes(op="placeholder")}
    assert {torch.float32, torch.int64, torch.bool} <= dtypes


@pytest.mark.parametrize("mode", ("fake", "real"))
@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_side_effects_in_training_mode(dialect, mode):
    """BatchNorm in training mode writes its statistics: neither mode may touch real state."""
    model = Mixed().train()
    cap = capture(model, mixed_inputs(), dialect)
    inputs_before = [(t._version, t.clone()) for t in cap.inputs]
    state = _state(cap.gm)
    rng = torch.get_rng_state()
    code = normalized_code(cap.gm)
    report = _run(cap.gm, cap.inputs, mode)  # an analysis pass that changes anything fails here
    assert report.passes[0].status == "ok"
    assert normalized_code(cap.gm) == code
    _assert_same_state(cap.gm, state)
    for t, (version, value) in zip(cap.inputs, inputs_before):
        assert t._version == version and torch.equal(t, value)
    assert torch.equal(torch.get_rng_state(), rng)
    assert tensor_info(cap.gm.graph.output_node().args[0][0]) == (torch.Size([3]), torch.float32)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_auto_falls_back_to_real_on_data_dependent_ops(dialect):
    x = torch.tensor([[1.0, -1.0, 2.0], [-3.0, 4.0, 5.0]])  # 4 positive entries
    cap = capture(DataDependent(), (x,), dialect)
    report = _run(cap.gm, cap.inputs, "auto")
    assert report.passes[0].counters["real_fallback"] == 1
    (out,) = [n for n in cap.gm.graph.nodes if n.op == "output"]
    result = out.args[0][0] if isinstance(out.args[0], (tuple, list)) else out.args[0]
    assert tensor_info(result) == (torch.Size([4, 2]), torch.float32)
    nonzero = next(n for n in cap.gm.graph.nodes if "nonzero" in n.name)
    assert tensor_info(nonzero) == (torch.Size([4, 2]), torch.int64)
    assert isinstance(nonzero.meta["val"], FakeTensor)


def test_fake_mode_does_not_fall_back():
    cap = capture(DataDependent(), (torch.randn(3, 3),), "symbolic_trace")
    code = normalized_code(cap.gm)
    with pytest.raises(PassFailedError, match="fake tensor propagation failed") as info:
        _run(cap.gm, cap.inputs, "fake")
    assert info.value.pass_name == "propagate_shapes"
    assert normalized_code(cap.gm) == code
    assert all("tensor_meta" not in n.meta for n in cap.gm.graph.nodes)  # rolled back


def test_without_inputs_is_a_user_error_naming_the_pass():
    gm = torch.fx.symbolic_trace(Mixed().eval())
    with pytest.raises(UserError, match="propagate_shapes.*needs example inputs") as info:
        Pipeline(["propagate_shapes"]).run(gm)
    assert isinstance(info.value, MissingExampleInputsError)


@pytest.mark.parametrize("dialect", ("dynamo", "export"))
def test_without_inputs_uses_recorded_placeholder_values(captured, dialect):
    """export and TorchDynamo record a value on every placeholder: that is enough for fake mode."""
    gm = captured[dialect].gm
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            n.meta.pop("val", None)
            n.meta.pop("tensor_meta", None)
    report = Pipeline(["propagate_shapes"]).run(gm)
    assert report.passes[0].counters["nodes_annotated"] > 5
    out = gm.graph.output_node()
    assert [(tuple(t.shape), t.dtype) for t in out.meta["tensor_meta"]] == EXPECTED_OUT
    with pytest.raises(MissingExampleInputsError, match="mode='real'"):
        Pipeline([("propagate_shapes", {"mode": "real"})]).run(gm)


def test_without_inputs_data_dependent_shapes_stay_symbolic():
    """export's own fake mode has a ShapeEnv: nonzero gets an unbacked size, nothing fails."""
    cap = capture(DataDependent(), (torch.randn(3, 3),), "export")
    report = Pipeline(["propagate_shapes"]).run(cap.gm)
    assert "real_fallback" not in report.passes[0].counters
    nonzero = next(n for n in cap.gm.graph.nodes if "nonzero" in n.name)
    shape, dtype = tensor_info(nonzero)
    assert isinstance(shape[0], torch.SymInt) and shape[1] == 2 and dtype == torch.int64


def test_auto_without_real_inputs_cannot_fall_back():
    from torch._subclasses.fake_tensor import FakeTensorMode

    gm = torch.fx.symbolic_trace(DataDependent())
    (x,) = gm.graph.find_nodes(op="placeholder")
    x.meta["val"] = FakeTensorMode().from_tensor(torch.randn(3, 3))  # no ShapeEnv: nonzero fails
    with pytest.raises(PassFailedError, match="real propagation needs real example inputs"):
        Pipeline(["propagate_shapes"]).run(gm)


def test_other_passes_read_tensor_info():
    seen = {}

    class Reader(GraphPass):
        """Reads shapes."""

        name = "read_shapes"
        kind = "analysis"
        requires = ("propagate_shapes",)

        def run(self, gm, ctx):
            seen.update({n.name: ctx.tensor_info(n) for n in gm.graph.nodes})
            seen["analysis"] = ctx.analyses["propagate_shapes"]
            return False

    gm = torch.fx.symbolic_trace(Mixed().eval())
    report = Pipeline([Reader]).run(gm, mixed_inputs())  # propagate_shapes is pulled in
    assert [p.name for p in report.passes] == ["propagate_shapes", "read_shapes"]
    assert seen["lin"] == (torch.Size([5, 3]), torch.float32)
    assert seen["add"] == (torch.Size([3]), torch.int64)
    assert seen["and_"] == (torch.Size([3, 3]), torch.bool)
    assert seen["analysis"] == {"mode": "fake", "nodes_annotated": 12}


def test_registered_as_builtin(registry):
    cls = registry.get("propagate_shapes")
    assert cls is PropagateShapes and cls.kind == "analysis"
    assert fxpasses.registry().get("propagate_shapes") is PropagateShapes


def test_invalid_mode_is_an_options_error():
    with pytest.raises(fxpasses.OptionsError, match="propagate_shapes.mode"):
        Pipeline.from_string("propagate_shapes{mode=wrong}")
