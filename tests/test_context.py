"""PassContext.set_target (a journaled in-place change of a node's target) and the free-name
test behind unique_attr_name / add_constant / add_submodule."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.fx
from torch import nn

from fxpasses import GraphPass, PassContext, PassFailedError, Pipeline, Registry
from fxpasses.context import _has_attribute
from fxpasses.journal import check_journals
from fxpasses.snapshot import Snapshot

from dynamic_models import MeanBySize, assert_compile_fails


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("scale", torch.full((4,), 2.0))

    def forward(self, x):
        return torch.relu(self.lin(x)).add(1) * self.scale


def setup():
    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(Net())
    gm.add_submodule("other", nn.Linear(4, 4))  # targets to switch to
    gm.register_buffer("shift", torch.full((4,), 3.0))
    return gm, PassContext(gm, pass_name="test", dialect="symbolic_trace"), {n.name: n for n in gm.graph.nodes}


def test_set_target_changes_each_op_in_place_and_the_module_computes_the_new_value():
    gm, ctx, nodes = setup()
    x = torch.randn(2, 4)
    users_before = list(nodes["lin"].users)
    ctx.set_target(nodes["lin"], "other")
    ctx.set_target(nodes["relu"], torch.tanh)
    ctx.set_target(nodes["add"], "sub")
    ctx.set_target(nodes["scale"], "shift")
    assert [n.name for n in gm.graph.nodes] == ["x", "lin", "relu", "add", "scale", "mul", "output"]
    assert list(nodes["lin"].users) == users_before
    # the (op, target) index follows: find_nodes sees the new targets, not the old ones
    assert gm.graph.find_nodes(op="call_function", target=torch.tanh) == [nodes["relu"]]
    assert gm.graph.find_nodes(op="call_function", target=torch.relu) == []
    gm.graph.lint()
    gm.recompile()
    want = torch.tanh(gm.other(x)).sub(1) * gm.shift
    torch.testing.assert_close(gm(x), want, rtol=0, atol=0)


@pytest.mark.parametrize(
    "node, target, error, said",
    [
        ("lin", "nope", AttributeError, "nope"),
        ("lin", "lin.weight", AttributeError, "not an nn.Module"),
        ("lin", torch.relu, TypeError, "qualified name"),
        ("scale", "missing_buffer", AttributeError, "missing_buffer"),
        ("scale", 3, TypeError, "qualified name"),
        ("relu", "relu", TypeError, "callable"),
        ("add", torch.add, TypeError, "method name"),
        ("x", "y", TypeError, "placeholder: it has no target"),
        ("output", "out", TypeError, "output: it has no target"),
    ],
)
def test_set_target_refuses_a_target_that_does_not_suit_the_op_and_changes_nothing(node, target, error, said):
    gm, ctx, nodes = setup()
    old = nodes[node].target
    with pytest.raises(error, match=said):
        ctx.set_target(nodes[node], target)
    assert nodes[node].target is old or nodes[node].target == old


def test_set_target_refuses_a_node_of_another_graph_or_an_erased_one():
    gm, ctx, nodes = setup()
    other = torch.fx.symbolic_trace(Net())
    stranger = next(n for n in other.graph.nodes if n.op == "call_function")
    with pytest.raises(ValueError, match=r"%relu is not a node of this graph"):
        ctx.set_target(stranger, torch.tanh)
    mul = nodes["mul"]
    mul.replace_all_uses_with(nodes["add"])
    gm.graph.erase_node(mul)
    with pytest.raises(ValueError, match=r"%mul is not a node of this graph"):
        ctx.set_target(mul, operator.add)


def pipeline_of(body) -> Pipeline:
    """A pipeline of one journaled pass whose ``run(gm, ctx)`` is ``body``."""
    reg = Registry()
    reg.register(type("Retarget", (GraphPass,), {
        "name": "retarget", "writes_tensors": False, "journal_edits": True,
        "run": lambda self, gm, ctx: body(gm, ctx),
    }))
    return Pipeline(["retarget"], registry=reg)


def test_a_failed_pass_that_set_targets_is_rolled_back_with_the_old_targets_and_index():
    gm, _, nodes = setup()
    gm.recompile()
    before = Snapshot(gm)
    code = gm.code

    def body(gm, ctx):
        for n in gm.graph.nodes:
            if n.op == "call_module":
                ctx.set_target(n, ctx.add_submodule(nn.Identity(), "ident"))
            elif n.target is torch.relu:
                ctx.set_target(n, torch.sigmoid)
        raise RuntimeError("planted")

    with check_journals():  # the check mode compares the journal's rollback with a snapshot
        with pytest.raises(PassFailedError, match="planted"):
            pipeline_of(body).run(gm, [torch.randn(2, 4)])
    # (the pipeline's recompile after the rollback writes the same code again: no difference)
    assert before.differences() == []
    assert nodes["lin"].target == "lin" and nodes["relu"].target is torch.relu
    assert gm.graph.find_nodes(op="call_function", target=torch.relu) == [nodes["relu"]]
    assert gm.graph.find_nodes(op="call_function", target=torch.sigmoid) == []
    assert gm.code == code


def test_a_journaled_pass_that_set_targets_passes_the_check_mode_and_the_lint():
    gm, _, _ = setup()
    x = torch.randn(2, 4)
    want = torch.sigmoid(gm.lin(x)).add(1) * gm.scale

    def body(gm, ctx):
        for n in gm.graph.find_nodes(op="call_function", target=torch.relu):
            ctx.set_target(n, torch.sigmoid)

    with check_journals():
        pipeline_of(body).run(gm, [x])
    torch.testing.assert_close(gm(x), want, rtol=0, atol=0)


def test_a_target_set_to_a_missing_module_fails_the_pass_and_leaves_the_graph():
    gm, _, _ = setup()
    code = (gm.recompile(), gm.code)[1]

    def body(gm, ctx):
        ctx.set_target(next(iter(gm.graph.find_nodes(op="call_module"))), "missing.sub")

    with pytest.raises(PassFailedError, match="missing"):
        pipeline_of(body).run(gm)
    assert gm.code == code


# ------------------------------------------------------------------ the free-name test


class WithProperty(nn.Module):
    @property
    def broken(self):
        raise RuntimeError("a property that raises")

    flag = True


class WithGetattr(nn.Module):
    def __getattr__(self, name):
        if name == "virtual":
            return 1
        return super().__getattr__(name)


@pytest.mark.parametrize(
    "module, name, taken",
    [
        (nn.Linear(2, 2), "weight", True),  # a parameter
        (nn.BatchNorm1d(2), "running_mean", True),  # a buffer
        (nn.Sequential(nn.ReLU()), "0", True),  # a submodule
        (nn.Linear(2, 2), "forward", True),  # a method on the class
        (nn.Linear(2, 2), "in_features", True),  # an instance attribute
        (WithProperty(), "broken", True),  # hasattr says False: the name is taken all the same
        (WithProperty(), "flag", True),
        (WithGetattr(), "virtual", True),  # only the class's own __getattr__ knows it
        (WithGetattr(), "free", False),
        (nn.Linear(2, 2), "free", False),
    ],
)
def test_has_attribute_counts_every_way_a_name_can_be_taken(module, name, taken):
    assert _has_attribute(module, name) is taken


def test_unique_attr_name_steps_over_names_taken_every_way():
    gm, ctx, _ = setup()
    gm.register_buffer("c", torch.ones(1))
    gm.c_1 = 5  # a plain attribute
    gm.add_submodule("c_2", nn.ReLU())
    assert ctx.unique_attr_name("c") == "c_3"
    assert ctx.unique_attr_name("lin") == "lin_1"
    assert ctx.unique_attr_name("recompile") == "recompile_1"  # a GraphModule method
    assert ctx.unique_attr_name("fresh") == "fresh"


@pytest.mark.parametrize(
    "call, said",
    [
        (
            lambda ctx: ctx.add_submodule(42, "m"),
            "PassContext.add_submodule: argument 'module' must be a torch.nn.Module, got int (42)",
        ),
        (
            lambda ctx: ctx.add_submodule(nn.ReLU, "m"),  # the class, not an instance
            "PassContext.add_submodule: argument 'module' must be a torch.nn.Module, got type "
            "(<class 'torch.nn.modules.activation.ReLU'>)",
        ),
        (
            lambda ctx: ctx.add_submodule(nn.ReLU(), 3),
            "PassContext.add_submodule: argument 'hint' must be a str (the name to derive the "
            "submodule's from), got int (3)",
        ),
        (
            lambda ctx: ctx.add_constant([1.0, 2.0]),
            "PassContext.add_constant: argument 'value' must be a torch.Tensor, got list ([1.0, 2.0])",
        ),
        (
            lambda ctx: ctx.add_constant(torch.ones(2), hint=None),
            "PassContext.add_constant: argument 'hint' must be a str (the name to derive the "
            "buffer's from), got NoneType (None)",
        ),
    ],
    ids=["module-int", "module-class", "submodule-hint", "constant-list", "constant-hint"],
)
def test_module_editing_helpers_name_the_argument_of_the_wrong_type(call, said):
    gm, ctx, _ = setup()
    names = [n for n, _ in gm.named_children()], [n for n, _ in gm.named_buffers()]
    with pytest.raises(TypeError) as info:
        call(ctx)
    assert str(info.value) == said
    assert ([n for n, _ in gm.named_children()], [n for n, _ in gm.named_buffers()]) == names  # nothing added


# -------------------------------------------------- a symbolic size replaced by a constant


class SpecializeSizes(GraphPass):
    """Wrong on purpose: replaces every symbolic-int node by its value for the example inputs
    (a dynamic-shapes check found that such a pass passed numeric verification, which runs at
    the example's sizes only, and the model then gave wrong values at every other size)."""

    name = "specialize_sizes"

    def run(self, gm, ctx):
        changed = False
        for n in list(gm.graph.nodes):
            v = n.meta.get("val", n.meta.get("example_value"))
            if isinstance(v, torch.SymInt) and n.users:
                ctx.replace_uses(n, int(v.node.hint))
                changed = True
        return changed


def test_a_symbolic_size_replaced_by_its_example_value_fails_the_pass_and_is_rolled_back():
    from torch.export import Dim

    x = torch.randn(2, 6, 8)
    ep = torch.export.export(MeanBySize(), (x,), dynamic_shapes=({0: Dim("b", min=2, max=64), 1: Dim("s", min=2, max=64)},))
    gm = ep.module()
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([SpecializeSizes], verify="numeric").run(gm, [x])
    assert str(info.value).startswith(
        "pass 'specialize_sizes' failed: ValueError: cannot replace %sym_size_int_2 by the constant 6: its value is "
        "the symbolic int s27 (in [2, 64]; 6 for the example inputs) of a graph with dynamic shapes, which a "
        "constant fixes to one size (other sizes would give wrong results"
    ), str(info.value)
    assert info.value.rolled_back and gm.code == code
    y = torch.randn(3, 5, 8)
    assert torch.allclose(gm(y), MeanBySize()(y))


def test_a_symbolic_size_under_torch_compile_dynamic_fails_the_pass():
    assert_compile_fails(
        SpecializeSizes,
        r"cannot replace %s\d+ by the constant 6: its value is the symbolic int s\d+ \(in \[2, int_oo\]; 6 for the example inputs\)",
    )


def test_a_size_the_shape_environment_fixes_may_become_a_constant():
    """A symbol whose range is one value (Dim(min=6, max=6) is refused by export; a symbol
    specialised by a guard is replaced by its value): no check, the constant holds."""
    from fxpasses.context import symbolic_value
    from torch.export import Dim

    x = torch.randn(2, 6, 8)
    ep = torch.export.export(MeanBySize(), (x,), dynamic_shapes=({0: Dim("b", min=2, max=64), 1: Dim("s", min=2, max=64)},))
    node = next(n for n in ep.module().graph.nodes if isinstance(n.meta.get("val"), torch.SymInt))
    assert symbolic_value(node) == "the symbolic int s27 (in [2, 64]; 6 for the example inputs)"
    env = node.meta["val"].node.shape_env
    sym = next(iter(node.meta["val"].node.expr.free_symbols))
    env._set_replacement(sym, __import__("sympy").Integer(6), "test")  # as a guard Eq(s27, 6) makes it
    assert symbolic_value(node) is None
    gm = torch.fx.symbolic_trace(MeanBySize())  # no symbolic values at all
    assert [symbolic_value(n) for n in gm.graph.nodes] == [None] * len(gm.graph.nodes)
