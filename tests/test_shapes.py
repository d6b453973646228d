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


# ------------------------------------------------------------------ dynamic shapes


class DynamicNet(torch.nn.Module):
    """conv -> BN -> dropout -> relu, a reshape by the batch size, a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(6)
        self.drop = torch.nn.Dropout(0.3)
        self.lin = torch.nn.Linear(6 * 4 * 4, 5)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)

    def forward(self, x):
        y = torch.relu(self.drop(self.bn(self.conv(x))))
        return self.lin(y.reshape(x.shape[0], -1)) * 1


def _dynamic_export(model, batch=5):
    from torch.export import Dim

    x = torch.randn(batch, 3, 4, 4)
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: Dim("b", min=2, max=64)},))
    return ep.module(), x


def _batch_symbol(gm):
    (x,) = gm.graph.find_nodes(op="placeholder")
    size = x.meta["val"].shape[0]
    assert isinstance(size, torch.SymInt) and not size.node.is_constant(), size
    return str(size), size.node.shape_env


def _assert_symbolic(gm, symbol):
    """Every tensor value with a batch dimension has the symbol there, in val and tensor_meta."""
    checked = 0
    for n in gm.graph.nodes:
        val = n.meta.get("val")
        if isinstance(val, torch.Tensor) and val.ndim >= 2 and n.op != "get_attr":
            assert str(val.shape[0]) == symbol, (n.name, val.shape)
            assert str(n.meta["tensor_meta"].shape[0]) == symbol, (n.name, n.meta["tensor_meta"].shape)
            checked += 1
    out = gm.graph.output_node().meta["val"]
    assert str(out[0].shape[0]) == symbol, out
    assert checked >= 4
    return checked


@pytest.mark.parametrize("mode", MODES)
def test_dynamic_export_keeps_its_symbolic_shapes(mode):
    """Issue: the example input's sizes (5, ...) replaced the graph's symbolic batch size."""
    torch.manual_seed(0)
    gm, x = _dynamic_export(DynamicNet().eval())
    symbol, shape_env = _batch_symbol(gm)
    code = normalized_code(gm)
    report = _run(gm, [x], mode)
    assert normalized_code(gm) == code
    assert _batch_symbol(gm)[0] == symbol
    n = _assert_symbolic(gm, symbol)
    assert report.passes[0].counters["nodes_annotated"] >= n
    assert "real_fallback" not in report.passes[0].counters
    assert not shape_env.guards  # the analysis added no guard


def test_dynamic_export_range_is_not_narrowed_by_a_fake_kernel():
    """A new conv (after fuse_conv_bn: a fake-kernel cache miss) chooses its backend by the
    size hint; without suppressed guards that recorded `s < 16` and narrowed Dim(max=64)."""
    torch.manual_seed(0)
    gm, x = _dynamic_export(DynamicNet().eval())
    symbol, shape_env = _batch_symbol(gm)
    ranges = dict(shape_env.var_to_range)
    report = Pipeline.from_string("fuse_conv_bn,propagate_shapes").run(gm, [x])
    assert report["fuse_conv_bn"].counters == {"fused": 1}
    _assert_symbolic(gm, symbol)
    assert dict(shape_env.var_to_range) == ranges and not shape_env.guards


def test_dynamic_export_through_the_inference_pipeline_matches_at_several_batch_sizes():
    from fxpasses.builtin_passes import BUILTIN_PRESETS

    torch.manual_seed(0)
    model = DynamicNet().eval()
    gm, x = _dynamic_export(model)
    symbol, _ = _batch_symbol(gm)
    text = f"propagate_shapes,{BUILTIN_PRESETS['inference'][0]},print_graph{{file=/dev/null}}"
    report = Pipeline.from_string(text, verify="numeric").run(gm, [x])
    assert report["fuse_conv_bn"].counters == {"fused": 1}
    assert report["remove_dropout"].counters == {"removed": 1}
    _assert_symbolic(gm, symbol)
    report = _run(gm, [x], "auto")  # again, on the optimised graph
    _assert_symbolic(gm, symbol)
    for batch in (2, 5, 17, 64):
        t = torch.randn(batch, 3, 4, 4)
        with torch.no_grad():
            torch.testing.assert_close(gm(t), model(t), atol=1e-5, rtol=1e-5)


class DynamicMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.lin(torch.relu(x).reshape(x.shape[0], -1) * 2)


def test_dynamo_dynamic_shapes_stay_symbolic_in_the_fxpasses_backend():
    """In a torch.compile(dynamic=True) graph the placeholders' example values are symbolic;
    the backend's example tensors are concrete: the nodes got the first call's sizes."""
    import fxpasses.backend as B

    torch._dynamo.reset()
    model = DynamicMLP().eval()
    seen = []

    def then(gm, example_inputs):
        seen.append([n.meta["val"] for n in gm.graph.nodes if n.op == "call_function"])
        return gm.forward

    before = len(B.reports)
    options = {"pipeline": "propagate_shapes", "then": then}
    compiled = torch.compile(model, backend="fxpasses", dynamic=True, options=options)
    for batch in (5, 7, 20, 3):
        x = torch.randn(batch, 8)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x), atol=1e-6, rtol=1e-6)
    assert len(B.reports) - before == 1 and len(seen) == 1  # one graph for every batch size
    assert B.reports[-1]["propagate_shapes"].counters["nodes_annotated"] >= 4
    sizes = {str(v.shape[0]) for v in seen[0] if isinstance(v, torch.Tensor)}
    assert len(sizes) == 1 and not sizes.pop().isdigit()


def test_a_custom_backend_propagating_shapes_does_not_recompile_per_batch_size():
    """A backend of one's own that runs the pass on TorchDynamo's example inputs (concrete
    tensors, the sizes SymInt inputs): mixing the concrete tensors with those SymInts failed
    here (a data-dependent op in fake mode, SymInts in real mode); with a smaller graph it
    guarded the batch size to the example value, and every new batch size compiled again."""

    def compiles(run_pass: bool) -> int:
        torch._dynamo.reset()
        count = []

        def backend(gm, example_inputs):
            if run_pass:
                Pipeline(["propagate_shapes"]).run(gm, example_inputs)
            count.append(1)
            return gm.forward

        model = DynamicNet().eval()
        compiled = torch.compile(model, backend=backend, dynamic=True)
        for batch in (5, 7, 20, 3):
            x = torch.randn(batch, 3, 4, 4)
            with torch.no_grad():
                torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
        return len(count)

    assert compiles(True) == compiles(False)  # (2: TorchDynamo's own 0/1 specialisation)


class Recurrent(torch.nn.Module):
    """An LSTM or GRU: its forward rebuilds ``_flat_weights`` from the parameters it holds."""

    def __init__(self, cell: type) -> None:
        super().__init__()
        self.rnn = cell(8, 6, batch_first=True)
        self.fc = torch.nn.Linear(6, 4)

    def forward(self, x):
        h, _ = self.rnn(x)
        return self.fc(h[:, -1])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cell", (torch.nn.LSTM, torch.nn.GRU))
def test_recurrent_modules_keep_their_state(cell, mode):
    """propagate_shapes runs an LSTM on fake parameters: the ``_flat_weights`` list its forward
    rebuilt from them is put back, so the analysis changes nothing (it used to fail as an
    analysis that changed the module, and keep fakes in the user's LSTM with on_error=raise)."""
    model = Recurrent(cell).eval()
    x = torch.randn(2, 5, 8)
    gm = torch.fx.symbolic_trace(model)
    flat = list(gm.rnn._flat_weights)
    report = Pipeline.from_string(f"propagate_shapes{{mode={mode}}}", verify="none", on_error="raise").run(gm, [x])
    assert report.passes[0].status == "ok" and report.passes[0].changed is False
    assert all(a is b for a, b in zip(gm.rnn._flat_weights, flat)) and len(gm.rnn._flat_weights) == len(flat)
    assert not any(isinstance(t, FakeTensor) for t in gm.rnn._flat_weights)
    assert tensor_info(gm.graph.output_node().args[0]) == (torch.Size([2, 4]), torch.float32)
    torch.testing.assert_close(gm(x), model(x))


class Layouts(torch.nn.Module):
    """Results of every layout the real run's fast fake copy and memoized memory format meet:
    contiguous, channels-last, transposed, a view at a storage offset, an expanded (stride 0)
    view, 0-dim, zero-size, int64, bool, a complex conjugate (conj bit), a tensor that requires
    grad, a tuple of views; two results of one shape with different strides, two of one shape
    and strides with different dtypes."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(2, 3, 4, 5))
        self.register_buffer("c", torch.randn(3, 2, dtype=torch.complex64))

    def forward(self, x):
        a = x * 2  # contiguous [2, 3, 4, 5]
        cl = a.contiguous(memory_format=torch.channels_last)  # same shape, other strides
        t = a.transpose(1, 3)
        off = a[:, 1:]  # storage offset 20
        ex = a.sum((2, 3), keepdim=True).expand(2, 3, 4, 5)
        s = a.sum()  # 0-dim
        z = a[:0]  # zero-size
        i = a.to(torch.int64)  # same shape and strides as a, other dtype
        b = a > 0
        cj = self.c.conj()  # conj bit set: copied by torch's from_tensor, not the fast path
        g = self.w * 1  # outside no_grad it would require grad; run under no_grad it does not
        parts = a.split(1, dim=1)  # a tuple of views at offsets
        return a, cl, t, off, ex, s, z, i, b, cj, g, parts[2], self.w


def test_real_mode_records_each_layout_exactly():
    """``mode="real"`` builds ``meta["val"]`` from a result's metadata and memoizes the memory
    format by sizes and strides: each recorded value has the real result's sizes, strides,
    storage offset, dtype and device, and ``tensor_meta`` equals torch's own
    ``_extract_tensor_metadata`` of the real result field for field."""
    from torch.fx.passes.shape_prop import _extract_tensor_metadata

    gm = torch.fx.symbolic_trace(Layouts())
    x = torch.randn(2, 3, 4, 5)
    truth = _truth(gm, (x,))
    report = _run(gm, (x,), "real")
    assert report.passes[0].status == "ok"
    modes = set()
    checked = 0
    for node in gm.graph.nodes:
        real = truth[node.name]
        if not isinstance(real, torch.Tensor):
            continue
        val = node.meta["val"]
        assert isinstance(val, FakeTensor), node.name
        modes.add(id(val.fake_mode))
        assert (val.shape, val.stride(), val.storage_offset(), val.dtype, val.device) == (
            real.shape,
            real.stride(),
            real.storage_offset(),
            real.dtype,
            real.device,
        ), node.name
        assert node.meta["tensor_meta"] == _extract_tensor_metadata(real), node.name
        checked += 1
    assert checked == len([n for n in gm.graph.nodes if isinstance(truth[n.name], torch.Tensor)]) >= 14
    assert len(modes) == 1  # one fake mode for the whole run
    formats = {n.name: n.meta["tensor_meta"].memory_format for n in gm.graph.nodes if n.name in ("mul", "contiguous", "transpose", "expand")}
    assert formats == {
        "mul": torch.contiguous_format,
        "contiguous": torch.channels_last,
        "transpose": None,
        "expand": None,
    }
    # the parameter: a leaf that requires grad and is an nn.Parameter, as from_tensor makes it
    w = gm.graph.find_nodes(op="get_attr", target="w")[0].meta["val"]
    ref = torch._subclasses.fake_tensor.FakeTensorMode().from_tensor(gm.w, static_shapes=True)
    assert (w.requires_grad, w.is_leaf, isinstance(w, torch.nn.Parameter)) == (True, True, True)
    assert (ref.requires_grad, ref.is_leaf, isinstance(ref, torch.nn.Parameter)) == (True, True, True)


def test_a_write_past_the_real_runs_clones_fails_the_run_naming_the_tensor(monkeypatch):
    """propagate_shapes runs without a write guard (``writes_tensors = False``): its real run
    works on clones of what effect analysis finds the graph may write. Were a write to get past
    them (simulated: the analysis answers that nothing is written), the pipeline's check of an
    analysis pass fails the run and names the tensor, and says that it could not restore it."""
    from fxpasses.effects import EffectAnalysis

    class Writes(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))

        def forward(self, x):
            self.w.add_(1)
            return x + self.w

    from fxpasses.journal import WritesTensorsMismatch

    assert PropagateShapes.writes_tensors is False
    gm = torch.fx.symbolic_trace(Writes())
    monkeypatch.setattr(EffectAnalysis, "mutated_attributes", lambda self: frozenset())
    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", "0")  # the run users get
    with pytest.raises(PassFailedError) as info:
        Pipeline([("propagate_shapes", {"mode": "real"})]).run(gm, (torch.zeros(3),))
    msg = str(info.value)
    assert "analysis pass 'propagate_shapes' changed the module (tensors written in place: 'w')" in msg
    assert "could not be restored" in msg
    # check mode (the test suite, assert_preserves_outputs) holds it to writes_tensors=False
    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", "1")
    with pytest.raises(WritesTensorsMismatch, match=r"pass 'propagate_shapes' declares writes_tensors=False, but wrote these tensors of the module in place: 'w' "):
        Pipeline([("propagate_shapes", {"mode": "real"})]).run(torch.fx.symbolic_trace(Writes()), (torch.zeros(3),))
    monkeypatch.undo()
    # without the simulated miss, the parameter is cloned and left as it was
    gm = torch.fx.symbolic_trace(Writes())
    report = Pipeline([("propagate_shapes", {"mode": "real"})]).run(gm, (torch.zeros(3),))
    assert report.passes[0].status == "ok"
    assert torch.equal(gm.w.detach(), torch.ones(3)) and gm.w._version == 0


class _Strided(torch.nn.Module):
    """Buffers at an offset and expanded (stride 0), read as they are; the input transposed."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.arange(20.0)[4:])  # storage offset 4
        self.register_buffer("eb", torch.zeros(1, 4).expand(3, 4))  # strides (0, 1)

    def forward(self, x):
        return x.t(), self.buf + 0, self.buf, self.eb


def _layout(t: torch.Tensor):
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.is_conj())


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_records_the_layout_of_the_inputs_and_buffers_as_given(mode):
    """The real run used packed clones of inputs and buffers: a view at offset 6 with strides
    (6, 2) was recorded with (3, 1) and offset 0, an expanded buffer with strides (4, 1), a
    conjugate view without its bit (and every view of them wrong in turn). Its copies now keep
    the originals' layout, so every mode records what a run on the originals gives."""
    x = torch.randn(30)[6:].view(4, 6)[:, ::2]  # sizes (4, 3), strides (6, 2), offset 6
    gm = torch.fx.symbolic_trace(_Strided())
    truth = _truth(gm, (x,))
    _run(gm, (x,), mode)
    for node in gm.graph.nodes:
        real = truth[node.name]
        if isinstance(real, torch.Tensor):
            assert _layout(node.meta["val"]) == _layout(real), node.name
            assert node.meta["tensor_meta"].stride == real.stride(), node.name
    assert gm.buf.storage_offset() == 4 and gm.eb.stride() == (0, 1)  # the module's own, untouched

    class Conj(torch.nn.Module):
        def forward(self, x):
            return x.conj() * 1

    c = torch.randn(2, 2, dtype=torch.complex64).conj()
    gm = torch.fx.symbolic_trace(Conj())
    truth = _truth(gm, (c,))
    _run(gm, (c,), mode)
    for node in gm.graph.nodes:
        if node.op != "output":
            assert node.meta["val"].is_conj() == truth[node.name].is_conj(), node.name


def test_real_run_keeps_the_sharing_of_storage_between_buffers_and_between_inputs():
    """A buffer that views another, written in place through the other: the real run cloned
    each alone, the write no longer reached the view, and the data-dependent shape read from
    it came out (0, 1) where eager gives (4, 1); the same for two inputs sharing a storage."""
    root = torch.nn.Module()
    root.register_buffer("b1", torch.zeros(6))
    root.register_buffer("b2", root.b1[2:])  # a view of b1
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.call_method("add_", (g.get_attr("b1"), 1))
    nz = g.call_function(torch.nonzero, (g.call_function(torch.gt, (g.get_attr("b2"), 0.5)),))
    g.output(nz)
    gm = torch.fx.GraphModule(root, g)
    import copy

    eager = copy.deepcopy(gm)(torch.randn(1))
    assert tuple(eager.shape) == (4, 1)
    for mode in ("real", "auto"):
        report = _run(gm, (torch.randn(1),), mode)
        assert report.passes[0].status == "ok"
        assert tuple(nz.meta["val"].shape) == (4, 1), mode
        assert torch.equal(gm.b1, torch.zeros(6)) and gm.b2.data_ptr() == gm.b1.data_ptr() + 8  # untouched

    class WritesOne(torch.nn.Module):
        def forward(self, x, y):
            x.add_(1)
            return torch.nonzero(y > 0.5)

    base = torch.zeros(6)
    gm = torch.fx.symbolic_trace(WritesOne())
    _run(gm, (base, base[2:]), "real")
    assert tuple(gm.graph.output_node().args[0].meta["val"].shape) == (4, 1)
    assert torch.equal(base, torch.zeros(6)) and base._version == 0


def test_a_value_the_real_run_cannot_copy_leaves_no_value_of_an_earlier_attempt():
    """auto: the fake run fails on quantized tensors after recording float32 values; the real
    run, which cannot make fake quantized tensors, left those (a float32 ``val`` beside a
    quint8 ``tensor_meta``). It now removes them."""

    class Q(torch.nn.Module):
        def forward(self, x):
            q = torch.quantize_per_tensor(x, 0.1, 0, torch.quint8)
            return q.int_repr() + 0

    x = torch.randn(3, 4)
    for mode in ("real", "auto"):
        gm = torch.fx.symbolic_trace(Q())
        report = _run(gm, (x,), mode)
        assert report.passes[0].status == "ok"
        node = next(n for n in gm.graph.nodes if n.name == "quantize_per_tensor")
        assert "val" not in node.meta, mode
        assert node.meta["tensor_meta"].dtype == torch.quint8
        assert node.meta["tensor_meta"].is_quantized
        add = next(n for n in gm.graph.nodes if n.name == "add")
        assert (tuple(add.meta["val"].shape), add.meta["val"].dtype) == ((3, 4), torch.uint8)


def test_a_parameter_the_graph_writes_is_recorded_as_a_parameter():
    """The real run copies a parameter the graph writes; the copy was a plain tensor, so its
    recorded value was no ``nn.Parameter`` and did not require grad (unlike the parameter the
    graph only reads). Both are now leaf parameter fakes that require grad; the real one is
    not written."""

    class P(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.p = torch.nn.Parameter(torch.ones(3))
            self.q = torch.nn.Parameter(torch.ones(3))

        def forward(self, x):
            self.p.add_(1)
            return x * self.p * self.q

    gm = torch.fx.symbolic_trace(P())
    report = _run(gm, (torch.randn(3),), "real")
    assert report.passes[0].status == "ok"
    for node in gm.graph.find_nodes(op="get_attr"):
        v = node.meta["val"]
        assert (isinstance(v, torch.nn.Parameter), v.requires_grad, v.is_leaf) == (True, True, True), node.name
        assert node.meta["tensor_meta"].requires_grad, node.name
    assert torch.equal(gm.p.detach(), torch.ones(3)) and gm.p._version == 0


def test_real_mode_keeps_torchdynamos_symbolic_values():
    """TorchDynamo records ``meta["example_value"]``, not ``val``: real mode looked only at
    ``val``, so in a ``dynamic=True`` graph the tensors got the example's concrete sizes while
    the SymInt inputs stayed symbolic, and a later fake run propagated those."""
    seen = {}

    def backend(gm, example_inputs):
        import copy

        for order in (("real",), ("real", "fake")):
            g = copy.deepcopy(gm)
            for mode in order:
                report = _run(g, example_inputs, mode)
                assert report.passes[0].status == "ok"
            seen[order] = {n.name: n.meta["val"] for n in g.graph.nodes if n.op != "output"}
        return gm.forward

    torch._dynamo.reset()
    torch.compile(lambda x: (x * 2, x.shape[0] + 1), backend=backend, dynamic=True)(torch.randn(5, 8))
    for order, vals in seen.items():
        tensors = {k: v for k, v in vals.items() if isinstance(v, torch.Tensor)}
        assert len(tensors) == 2, (order, vals)  # the input and the product
        for name, v in tensors.items():
            assert not any(str(s).isdigit() for s in v.shape), (order, name, v.shape)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_real_mode_without_val_records_what_shapeprop_records(captured, dialect):
    """``record_val=False``: ``tensor_meta`` equal to ``ShapeProp``'s on every node (torch's
    own class run on a copy of the same graph), no ``meta["val"]`` left anywhere (a run with
    values recorded them first), the graph and the state unchanged."""
    import copy

    from torch.fx.passes.shape_prop import ShapeProp

    cap = captured[dialect]
    gm = copy.deepcopy(cap.gm)
    for n in gm.graph.nodes:
        n.meta.pop("tensor_meta", None)
    theirs = copy.deepcopy(gm)
    _run(gm, cap.inputs, "real")
    assert sum(isinstance(n.meta.get("val"), FakeTensor) for n in gm.graph.nodes) > 5
    with torch.no_grad():
        ShapeProp(theirs).propagate(*cap.inputs)
    code, state = normalized_code(gm), _state(gm)
    report = Pipeline([("propagate_shapes", {"mode": "real", "record_val": False})]).run(gm, cap.inputs)
    assert report.passes[0].status == "ok"
    assert normalized_code(gm) == code
    _assert_same_state(gm, state)
    recorded = 0
    for mine, ref in zip(gm.graph.nodes, theirs.graph.nodes):
        assert mine.name == ref.name
        assert "val" not in mine.meta, mine.name
        assert mine.meta.get("tensor_meta") == ref.meta.get("tensor_meta"), mine.name
        recorded += "tensor_meta" in mine.meta
    assert recorded == report.passes[0].counters["nodes_annotated"] > 5
    out = gm.graph.output_node()
    assert [(tuple(t.shape), t.dtype) for t in out.meta["tensor_meta"]] == EXPECTED_OUT
    # what the built-in passes read shapes with
    assert tensor_info(out.args[0][0]) == (torch.Size([3]), torch.float32)


def test_real_mode_without_val_keeps_symbolic_values():
    """A dynamic export: ``record_val=False`` removes no symbolic value (real execution cannot
    make one again); ``tensor_meta`` is made from it, as with values recorded. The output node,
    which export gives no value, gets none (values are what ``record_val=False`` leaves out)."""
    torch.manual_seed(0)
    gm, x = _dynamic_export(DynamicNet().eval())
    symbol, _ = _batch_symbol(gm)
    report = Pipeline([("propagate_shapes", {"mode": "real", "record_val": False})]).run(gm, [x])
    assert report.passes[0].status == "ok"
    out = gm.graph.output_node()
    assert "val" not in out.meta  # export records none there, and no value is made
    assert str(out.meta["tensor_meta"][0].shape[0]) == symbol
    out.meta["val"] = [n.meta["val"] for n in out.args[0]]  # what _assert_symbolic reads there
    assert _assert_symbolic(gm, symbol) >= 4


@pytest.mark.parametrize("mode", ("fake", "auto"))
def test_record_val_false_needs_real_mode(mode):
    with pytest.raises(fxpasses.errors.OptionsError, match=r'record_val=false needs mode="real"; mode=.' + mode):
        Pipeline([("propagate_shapes", {"mode": mode, "record_val": False})])


def test_real_mode_records_an_inputs_requires_grad():
    """The inputs were run on copies that did not require grad, so the placeholder of an input
    that does was recorded with ``requires_grad=False``; ``tensor_meta`` is now ShapeProp's
    under ``no_grad`` (an input and a parameter keep their flag, computed values have none),
    with values recorded or not, and the caller's input is left as it was."""
    import copy

    from torch.fx.passes.shape_prop import ShapeProp

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    x = torch.randn(2, 4, requires_grad=True)
    for dialect in ("symbolic_trace", "export"):
        for record_val in (True, False):
            gm = capture(model, (x,), dialect).gm
            theirs = copy.deepcopy(gm)
            with torch.no_grad():
                ShapeProp(theirs).propagate(x)
            Pipeline([("propagate_shapes", {"mode": "real", "record_val": record_val})]).run(gm, [x])
            for mine, ref in zip(gm.graph.nodes, theirs.graph.nodes):
                assert mine.meta.get("tensor_meta") == ref.meta.get("tensor_meta"), (dialect, mine.name)
            (ph,) = [n for n in gm.graph.find_nodes(op="placeholder") if n.meta["tensor_meta"].shape == (2, 4)]
            assert ph.meta["tensor_meta"].requires_grad, dialect
            if record_val:
                assert ph.meta["val"].requires_grad and ph.meta["val"].is_leaf, dialect
    assert x.requires_grad and x.is_leaf and x.grad is None and x._version == 0


def test_real_mode_without_val_gives_the_output_every_returned_tensors_meta():
    """A dynamic export returning a symbolic and a static tensor: with ``record_val=False`` the
    static one's ``meta["val"]`` is removed, and the output node's ``tensor_meta``, built from
    the returned nodes' values, had None for it; it is now the run's, as with values."""
    from torch.export import Dim

    class M(torch.nn.Module):
        def forward(self, x):
            return x * 2, x.sum(0)

    x = torch.randn(5, 8)
    metas = {}
    for record_val in (True, False):
        gm = torch.export.export(M(), (x,), dynamic_shapes=({0: Dim("b")},)).module()
        report = Pipeline([("propagate_shapes", {"mode": "real", "record_val": record_val})]).run(gm, [x])
        assert report.passes[0].status == "ok"
        out = gm.graph.output_node()
        tm = out.meta["tensor_meta"]
        assert len(tm) == 2 and all(isinstance(t, TensorMetadata) for t in tm), (record_val, tm)
        assert str(tm[0].shape[0]).startswith("s") and tm[0].shape[1] == 8
        assert tm[1].shape == (8,) and tm[1].dtype == torch.float32
        total = out.args[0][1]
        assert ("val" in total.meta) == record_val
        metas[record_val] = [(str(t.shape), t.dtype, str(t.stride)) for t in tm]
    assert metas[True] == metas[False]
