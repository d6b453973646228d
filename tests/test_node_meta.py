"""``ctx.infer_meta``: the value metadata of a node a pass made, from its inputs' (pass
authors asked for it: a node they create had no ``meta["val"]``, so their later hooks, and
later passes, could not see its shape)."""

from __future__ import annotations

import operator

import pytest
import torch

from fxpasses import NodePass, PassFailedError, Pipeline, Registry, Replace, on
from fxpasses.capture import capture
from fxpasses.node_meta import infer_meta

REG = Registry(autoload=False)


class M(torch.nn.Module):
    def forward(self, x, y):
        return torch.matmul(x, y) * 2


X, Y = torch.randn(3, 4), torch.randn(4, 5)


def _add_for(target):
    """The add of the graph's dialect for a mul node of ``target``."""
    if isinstance(target, torch._ops.OpOverload):
        return torch.ops.aten.add.Tensor
    return operator.add if target is operator.mul else torch.add


class DoubleAsAdd(NodePass):
    """``a * 2`` -> ``a + a``, with the new node's value recorded; what it saw is kept."""

    name = "double_as_add"
    seen: list = []

    @on("mul")
    def rewrite(self, node, ctx):
        if node.args[1] != 2:
            return None
        a = node.args[0]
        new = ctx.call_function(_add_for(node.target), (a, a))
        value = ctx.infer_meta(new)
        type(self).seen.append((value is not None, ctx.tensor_info(new)))
        return Replace(new)


@pytest.mark.parametrize("dialect", ["export", "dynamo"])
def test_a_new_node_gets_the_value_its_inputs_give(dialect):
    cap = capture(M(), (X, Y), dialect)
    DoubleAsAdd.seen = []
    report = Pipeline([DoubleAsAdd], verify="numeric", registry=REG).run(cap.gm, cap.inputs)
    assert report["double_as_add"].changed
    assert DoubleAsAdd.seen == [(True, (torch.Size([3, 5]), torch.float32))]
    adds = (operator.add, torch.add, torch.ops.aten.add.Tensor)
    add = next(n for n in cap.gm.graph.nodes if n.op == "call_function" and n.target in adds)
    key = "val" if dialect == "export" else "example_value"
    assert isinstance(add.meta[key], torch._subclasses.fake_tensor.FakeTensor)
    assert add.meta[key].shape == (3, 5) and add.meta["tensor_meta"].shape == (3, 5)
    assert add.meta["tensor_meta"].stride == (5, 1)
    out = cap.gm(*cap.inputs)
    torch.testing.assert_close(out[0] if isinstance(out, tuple) else out, M()(X, Y))


def test_symbolic_trace_without_recorded_values_gets_none_and_after_propagate_shapes_a_value():
    from fxpasses import registry

    DoubleAsAdd.seen = []
    gm = torch.fx.symbolic_trace(M())
    Pipeline([DoubleAsAdd], registry=REG).run(gm, (X, Y))
    assert DoubleAsAdd.seen == [(False, None)]
    DoubleAsAdd.seen = []
    gm = torch.fx.symbolic_trace(M())
    Pipeline(["propagate_shapes", DoubleAsAdd], registry=registry()).run(gm, (X, Y))
    assert DoubleAsAdd.seen == [(True, (torch.Size([3, 5]), torch.float32))]


def test_dynamic_sizes_stay_symbolic_and_add_no_guard():
    batch = torch.export.Dim("batch", min=2, max=64)
    cap = capture(M(), (X, Y), "export", dynamic_shapes=({0: batch}, None))
    shape_env = next(n for n in cap.gm.graph.nodes if n.op == "placeholder").meta["val"].fake_mode.shape_env
    guards = len(shape_env.guards)
    DoubleAsAdd.seen = []
    Pipeline([DoubleAsAdd], registry=REG).run(cap.gm, cap.inputs)
    (shape, dtype), = [info for _, info in DoubleAsAdd.seen]
    assert isinstance(shape[0], torch.SymInt) and shape[1] == 5
    assert len(shape_env.guards) == guards
    # the module still takes other batch sizes
    assert cap.gm(torch.randn(7, 4), Y).shape == (7, 5)


def test_a_node_its_inputs_do_not_take_fails_the_pass_naming_it_and_is_rolled_back():
    class WrongMatmul(NodePass):
        name = "wrong_matmul"

        @on("mul")
        def rewrite(self, node, ctx):
            a = node.args[0]
            new = ctx.call_function(torch.ops.aten.mm.default, (a, a))  # (3, 5) @ (3, 5)
            ctx.infer_meta(new)
            return Replace(new)

    cap = capture(M(), (X, Y), "export")
    code = cap.gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([WrongMatmul], registry=REG).run(cap.gm, cap.inputs)
    text = str(info.value)
    assert text.startswith(
        "pass 'wrong_matmul' failed: InferMetaError: node %mm_default (call_function aten.mm.default) raises on "
        "its inputs' values ((3, 5), (3, 5)): RuntimeError: a and b must have same reduction dim, but got [3, 5] X [3, 5]"
    )
    assert cap.gm.code == code


def test_infer_meta_of_a_node_of_an_earlier_pass_is_rolled_back_with_its_meta():
    """A node that was there before the pass: its meta is recorded before it changes, so a
    failure puts the old value back."""

    class Relabel(NodePass):
        name = "relabel"
        journal_edits = True
        writes_tensors = False

        @on("mul")
        def rewrite(self, node, ctx):
            ctx.infer_meta(node)  # (recomputed, a new object)
            raise RuntimeError("fail after recording")

    cap = capture(M(), (X, Y), "export")
    mul = next(n for n in cap.gm.graph.nodes if n.target is torch.ops.aten.mul.Tensor)
    before = mul.meta["val"]
    with pytest.raises(PassFailedError):
        Pipeline([Relabel], registry=REG).run(cap.gm, cap.inputs)
    assert mul.meta["val"] is before


def test_infer_meta_function_leaves_placeholders_and_unrecorded_inputs_alone():
    gm = torch.fx.symbolic_trace(M())
    x = next(iter(gm.graph.nodes))
    assert infer_meta(gm, x) is None and "val" not in x.meta
    mm = next(n for n in gm.graph.nodes if n.op == "call_function")
    assert infer_meta(gm, mm) is None and "val" not in mm.meta


def test_module_calls_and_attributes_get_values_in_a_symbolic_trace_graph_after_propagate_shapes():
    from fxpasses import registry

    class L(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 6)
            self.register_buffer("b", torch.ones(6))

        def forward(self, x):
            return torch.relu(self.lin(x)) + self.b

    shapes = []

    class Rebuild(NodePass):
        """relu(lin(x)) -> lin(x) + b, each new node's value recorded."""

        name = "rebuild"

        @on("relu")
        def rewrite(self, node, ctx):
            x = next(iter(ctx.graph.nodes))
            call = ctx.call_module("lin", (x,))
            attr = ctx.get_attr("b")
            add = ctx.call_function(torch.add, (call, attr))
            shapes.extend(tuple(ctx.infer_meta(n).shape) for n in (call, attr, add))
            return Replace(add)

    gm = torch.fx.symbolic_trace(L())
    Pipeline(["propagate_shapes", Rebuild], registry=registry()).run(gm, (torch.randn(2, 4),))
    assert shapes == [(2, 6), (6,), (2, 6)]
    assert all(n.meta["tensor_meta"] is not None for n in gm.graph.nodes if n.op != "output")


def _probe_pass(probe):
    class Probe(NodePass):
        name = "probe"

        @on("mul")
        def rewrite(self, node, ctx):
            probe(node, ctx)
            return None

    return Probe


def test_an_in_place_op_does_not_rewrite_its_inputs_recorded_value():
    """infer_meta ran the op on the input node's own fake value: `t_` of a new node turned
    the input's recorded (3, 5) into (5, 3), and no rollback put it back (a check of the
    session's own features)."""
    cap = capture(M(), (X, Y), "export")
    mms = (torch.ops.aten.mm.default, torch.ops.aten.matmul.default)
    mm = next(n for n in cap.gm.graph.nodes if n.op == "call_function" and n.target in mms)
    before = (tuple(mm.meta["val"].shape), mm.meta["val"].stride())
    seen = []

    def probe(node, ctx):
        new = ctx.call_function(torch.ops.aten.t_.default, (mm,))
        seen.append(tuple(ctx.infer_meta(new).shape))
        ctx.graph.erase_node(new)

    Pipeline([_probe_pass(probe)], registry=REG).run(cap.gm, cap.inputs)
    assert seen == [(5, 3)]
    assert (tuple(mm.meta["val"].shape), mm.meta["val"].stride()) == before == ((3, 5), (5, 1))


def test_a_module_call_writes_no_real_tensor():
    """A training-mode BatchNorm called by infer_meta updated its real num_batches_tracked."""

    class B(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = torch.nn.BatchNorm1d(4)

        def forward(self, x):
            return self.bn(x) * 2

    from fxpasses import registry

    gm = torch.fx.symbolic_trace(B().train())
    state = {k: v.clone() for k, v in gm.state_dict().items()}
    shapes = []

    def probe(node, ctx):
        call = ctx.call_module("bn", (next(iter(ctx.graph.nodes)),))
        shapes.append(tuple(ctx.infer_meta(call).shape))
        ctx.graph.erase_node(call)

    report = Pipeline(["propagate_shapes", _probe_pass(probe)], registry=registry()).run(gm, (torch.randn(8, 4),))
    assert shapes == [(8, 4)]
    assert not report["probe"].changed
    for k, v in gm.state_dict().items():
        assert torch.equal(v, state[k]), k


def test_a_submodule_read_and_a_size_computation():
    from fxpasses import registry

    class L(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x) * 2

    gm = torch.fx.symbolic_trace(L())
    got = []

    def probe(node, ctx):
        attr = ctx.get_attr("lin")
        got.append(ctx.infer_meta(attr))
        assert "val" not in attr.meta
        ctx.graph.erase_node(attr)

    Pipeline(["propagate_shapes", _probe_pass(probe)], registry=registry()).run(gm, (torch.randn(3, 4),))
    assert got == [None]  # a module is no value
    # sizes only: x.size(0) * 2 of a dynamic export graph stays symbolic
    batch = torch.export.Dim("batch", min=2, max=64)
    cap = capture(M(), (X, Y), "export", dynamic_shapes=({0: batch}, None))
    sizes = []

    def size_probe(node, ctx):
        x = next(iter(ctx.graph.find_nodes(op="placeholder")))
        size = ctx.call_function(torch.ops.aten.sym_size.int, (x, 0))
        twice = ctx.call_function(operator.mul, (size, 2))
        ctx.infer_meta(size)
        sizes.append(str(ctx.infer_meta(twice)))
        ctx.graph.erase_node(twice)
        ctx.graph.erase_node(size)

    Pipeline([_probe_pass(size_probe)], registry=REG).run(cap.gm, cap.inputs)
    assert len(sizes) == 1 and sizes[0].startswith("2*s")


class ScaleByNewConstant(NodePass):
    """``a * 2`` -> ``a * c`` with ``c`` a new constant read by ``ctx.get_attr``, the new node's
    value inferred (the get_attr node left without one, as a pass author did)."""

    name = "scale_by_new_constant"
    seen: list = []

    @on("mul")
    def rewrite(self, node, ctx):
        if node.args[1] != 2:
            return None
        ctx.gm.register_buffer("two", torch.full((5,), 2.0))  # (a test pass: no journal declared)
        with ctx.inserting_before(node):
            two = ctx.get_attr("two")
            new = ctx.call_function(torch.mul if not isinstance(node.target, torch._ops.OpOverload) else torch.ops.aten.mul.Tensor, (node.args[0], two))
        type(self).seen.append(("val" in two.meta, ctx.infer_meta(new) is not None, ctx.tensor_info(new)))
        return Replace(new)


@pytest.mark.parametrize("dialect", ["export", "dynamo"])
def test_a_new_node_reading_a_new_get_attr_gets_its_value(dialect):
    """ctx.infer_meta of a node reading a get_attr the pass made (ctx.get_attr records no
    value) returned None, so a later analysis counted it as nothing (a pass-author check: FLOPs
    2688 -> 384). The attribute is read from the module instead; the get_attr node itself is
    left as it is."""
    if dialect == "dynamo":
        torch._dynamo.reset()
    cap = capture(M(), (X, Y), dialect)
    ScaleByNewConstant.seen = []
    report = Pipeline([ScaleByNewConstant], verify="numeric", registry=REG).run(cap.gm, cap.inputs)
    assert report["scale_by_new_constant"].changed
    assert ScaleByNewConstant.seen == [(False, True, (torch.Size([3, 5]), torch.float32))]
    # nothing to read a fake mode from (a symbolic_trace graph without values): still None
    gm = torch.fx.symbolic_trace(M())
    gm.register_buffer("two", torch.full((5,), 2.0))
    mm = next(n for n in gm.graph.nodes if n.op == "call_function")
    with gm.graph.inserting_after(mm):
        two = gm.graph.get_attr("two")
    with gm.graph.inserting_after(two):
        new = gm.graph.call_function(torch.mul, (mm, two))
    assert infer_meta(gm, new) is None and "val" not in new.meta
