"""eliminate_dead_code: removes what is unused and pure, keeps every side effect (issue 5: 1-4, 14, 15)."""

from __future__ import annotations

import copy
import operator
import time

import pytest
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

import fxpasses
from fxpasses import GraphPass
from fxpasses.capture import capture
from fxpasses.errors import NodeHasUsersError, PassFailedError
from fxpasses.testing import assert_preserves_outputs

DIALECTS = ("symbolic_trace", "dynamo", "export")
aten = torch.ops.aten


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()


_SHIFTS_RNG = (
    "eliminate_dead_code{remove_random=true} removed unused random ops, and each removed draw shifts the "
    "global RNG stream: random ops that run after them (in this module, or in code after it) draw other "
    "numbers than before, by design; where the module draws again, numeric verification cannot pass: "
    'verify this pass with verify="lint", or keep remove_random off'
)


def dce(gm, text="eliminate_dead_code", inputs=None):
    return fxpasses.Pipeline.from_string(text).run(gm, inputs)["eliminate_dead_code"]


def build(fn, root: nn.Module | None = None, n_inputs: int = 1) -> torch.fx.GraphModule:
    g = torch.fx.Graph()
    xs = [g.placeholder(f"x{i}") for i in range(n_inputs)]
    g.output(fn(g, *xs))
    return torch.fx.GraphModule(root if root is not None else nn.Module(), g)


def targets(gm) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op not in ("placeholder", "output")]


class Net(nn.Module):
    """Conv, linear, attention-like matmuls, int indexing and bool masks, with dead branches."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.lin = nn.Linear(16, 8)
        self.unused = nn.Linear(16, 16)
        self.q = nn.Linear(8, 8)
        self.k = nn.Linear(8, 8)
        self.register_buffer("table", torch.randn(10, 8))

    def forward(self, x, idx, mask):
        h = F.relu(self.conv(x)).flatten(2)  # (B, 4, 16)
        dead1 = self.unused(h)  # noqa: F841  dead call_module
        dead2 = h * 3 + 1  # noqa: F841  dead arithmetic
        t = self.lin(h)
        att = (self.q(t) @ self.k(t).transpose(-1, -2)) / 8**0.5
        att = att.masked_fill(~mask, -1e9).softmax(-1)
        e = self.table[idx]  # int indices
        dead3 = e.sum()  # noqa: F841
        return att @ t + e, (idx * 2).sum(), mask.logical_not()


def net_inputs():
    return (torch.randn(2, 3, 4, 4), torch.randint(0, 10, (2, 4)), torch.rand(2, 4, 4) > 0.3)


def test_outputs_preserved_and_exact_removals_in_every_dialect():
    results = assert_preserves_outputs(
        fxpasses.Pipeline.from_string("eliminate_dead_code"),
        Net().eval(),
        net_inputs(),
        check_inputs=[net_inputs()],
    )
    expected = {
        # unused linear, h * 3, + 1, e.sum()
        "symbolic_trace": {"removed_nodes": 4, "removed_submodules": 1, "removed_parameters": 2},
        # dynamo passes the unused linear's parameters as placeholders: they stay
        "dynamo": {"removed_nodes": 4},
        # the same plus the two get_attr of unused.weight/bias; the export guards are kept
        "export": {"removed_nodes": 6, "removed_submodules": 1, "removed_parameters": 2, "kept_impure": 1},
    }
    for dialect, (gm, report) in results.items():
        r = report["eliminate_dead_code"]
        assert r.counters == expected[dialect], dialect
        assert r.nodes_before - r.nodes_after == expected[dialect]["removed_nodes"]
        assert not any(k.startswith("unused.") for k in gm.state_dict()), dialect
        assert dict(gm.named_modules()).get("unused") is None


# ------------------------------------------------------------------------------ issue 5, case 1


class MulInPlace(nn.Module):
    def forward(self, x):
        x.mul_(3)
        return x


class AddInPlaceThenMul(nn.Module):
    def forward(self, x):
        x.add_(1)
        return x * 2


class TorchReluInPlace(nn.Module):
    def forward(self, x):
        torch.relu_(x)
        return x


class FunctionalReluInPlace(nn.Module):
    def forward(self, x):
        F.relu(x, inplace=True)
        return x


class ModuleReluInPlace(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        self.act(x)
        return x


class OutArgument(nn.Module):
    def forward(self, x):
        y = torch.zeros_like(x)
        torch.add(x, 1, out=y)
        return y


@pytest.mark.parametrize(
    "module,expected",
    [
        (MulInPlace, [-3.0, 6.0]),
        (AddInPlaceThenMul, [0.0, 6.0]),
        (TorchReluInPlace, [0.0, 2.0]),
        (FunctionalReluInPlace, [0.0, 2.0]),
        (ModuleReluInPlace, [0.0, 2.0]),
        (OutArgument, [0.0, 3.0]),
    ],
)
def test_case1_in_place_statements_survive(module, expected):
    gm = torch.fx.symbolic_trace(module())
    nodes = len(gm.graph.nodes)
    report = dce(gm)
    assert len(gm.graph.nodes) == nodes
    assert report.counters == {"kept_impure": 1}
    x = torch.tensor([-1.0, 2.0])
    assert gm(x.clone()).tolist() == expected
    assert module()(x.clone()).tolist() == expected


@pytest.mark.parametrize("dialect", ["dynamo", "export"])
def test_case1_in_place_statements_survive_in_other_dialects(dialect):
    for module, expected in ((MulInPlace, [-3.0, 6.0]), (FunctionalReluInPlace, [0.0, 2.0])):
        torch._dynamo.reset()
        cap = capture(module(), (torch.tensor([-1.0, 2.0]),), dialect)
        dce(cap.gm)
        out = cap.gm(torch.tensor([-1.0, 2.0]))
        out = out[0] if isinstance(out, (tuple, list)) else out
        assert out.tolist() == expected, (dialect, module.__name__)


# ------------------------------------------------------------------------------ issue 5, case 2


class AddOneInPlace(nn.Module):
    def forward(self, x):
        x.add_(1)
        return x


class IgnoresSubmoduleResult(nn.Module):
    def __init__(self, sub: nn.Module) -> None:
        super().__init__()
        self.sub = sub

    def forward(self, x):
        self.sub(x)
        return x * 2


class LeafTracer(torch.fx.Tracer):
    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return isinstance(m, (AddOneInPlace, torch.fx.GraphModule)) or super().is_leaf_module(m, qualname)


def test_case2_impure_submodules_survive():
    graph_sub = IgnoresSubmoduleResult(torch.fx.symbolic_trace(AddOneInPlace()))
    leaf = IgnoresSubmoduleResult(AddOneInPlace())
    for gm in (
        torch.fx.GraphModule(graph_sub, LeafTracer().trace(graph_sub)),  # a GraphModule submodule
        torch.fx.GraphModule(leaf, LeafTracer().trace(leaf)),  # an opaque leaf module
    ):
        assert [n.op for n in gm.graph.nodes] == ["placeholder", "call_module", "call_function", "output"]
        report = dce(gm)
        assert report.counters == {"kept_impure": 1}
        assert gm(torch.zeros(3)).tolist() == [2.0, 2.0, 2.0]
        assert "sub" in dict(gm.named_modules())


def test_case2_pure_submodule_calls_go_with_their_state():
    class Pure(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x) * 2

    outer = IgnoresSubmoduleResult(torch.fx.symbolic_trace(Pure()))
    gm = torch.fx.GraphModule(outer, LeafTracer().trace(outer))
    report = dce(gm)
    assert report.counters == {"removed_nodes": 1, "removed_submodules": 2, "removed_parameters": 2}
    assert gm.state_dict() == {}
    assert gm(torch.zeros(3)).tolist() == [0.0, 0.0, 0.0]


# ------------------------------------------------------------------------------ issue 5, case 3


class DeadRand(nn.Module):
    def forward(self, y):
        torch.rand(3)
        return y + torch.rand(3)


def _dead_rand_symbolic() -> torch.fx.GraphModule:
    # symbolic_trace evaluates torch.rand(3) at trace time (no proxy argument): build the graph
    def fn(g, y):
        g.call_function(torch.rand, (3,))
        return g.call_function(torch.add, (y, g.call_function(torch.rand, (3,))))

    return build(fn)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_case3_dead_random_op_is_kept_by_default_and_dropped_on_request(dialect):
    y = torch.zeros(3)
    torch.manual_seed(0)
    eager = DeadRand()(y)

    def graph():
        if dialect == "symbolic_trace":
            return _dead_rand_symbolic()
        torch._dynamo.reset()
        return capture(DeadRand(), (y,), dialect).gm

    def out(gm):
        torch.manual_seed(0)
        r = gm(y)
        return r[0] if isinstance(r, (tuple, list)) else r

    gm = graph()
    n_rand = sum("rand" in t for t in targets(gm))
    assert n_rand == 2
    report = dce(gm)
    assert sum("rand" in t for t in targets(gm)) == 2
    assert report.counters.get("removed_nodes", 0) == 0
    assert torch.equal(out(gm), eager)  # bit-identical under the seed

    gm = graph()
    report = dce(gm, "eliminate_dead_code{remove_random=true}")
    assert report.counters["removed_random"] == 1
    assert report.counters["removed_nodes"] == 1
    assert sum("rand" in t for t in targets(gm)) == 1
    assert not torch.equal(out(gm), eager)  # the documented cost: the RNG stream shifts
    assert report.notes == [_SHIFTS_RNG] and dce(graph()).notes == []  # (and said so)

    # numeric verification fails on it (the later rand draws other numbers), and the failure
    # says that is the option's doing: it said only "max abs error" and pointed to bisect (a
    # new-user check)
    gm = graph()
    code = gm.code
    with pytest.raises(fxpasses.PassFailedError) as info:
        fxpasses.Pipeline.from_string("eliminate_dead_code{remove_random=true}", verify="numeric").run(gm, [y])
    assert "max abs error" in str(info.value) and info.value.notes[0] == _SHIFTS_RNG
    assert "eliminate_dead_code{remove_random=true} removed unused random ops" in str(info.value)
    assert "bisect" not in str(info.value) and gm.code == code


# ------------------------------------------------------------------------------ issue 5, case 4


class TorchAssert(nn.Module):
    def forward(self, x):
        torch._assert(torch.all(x > -1e9), "x too small")
        return x + 1


def _aten_assert_graph(target, with_msg):
    def fn(g, x):
        cond = g.call_function(aten.all.default, (g.call_function(aten.gt.Scalar, (x, -1e9)),))
        g.call_function(target, (cond, "x too small") if with_msg else (cond,))
        return g.call_function(aten.add.Tensor, (x, 1))

    return build(fn)


ASSERT_FORMS = {
    "torch._assert": lambda: torch.fx.symbolic_trace(TorchAssert()),
    "aten._assert_async.default": lambda: _aten_assert_graph(aten._assert_async.default, False),
    "aten._assert_async.msg": lambda: _aten_assert_graph(aten._assert_async.msg, True),
}


@pytest.mark.parametrize("form", list(ASSERT_FORMS))
def test_case4_asserts_still_raise_after_dce(form):
    gm = ASSERT_FORMS[form]()
    nodes = len(gm.graph.nodes)
    report = dce(gm)
    assert len(gm.graph.nodes) == nodes
    assert report.counters == {"kept_impure": 1}
    assert gm(torch.zeros(3)).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises((AssertionError, RuntimeError)):
        gm(torch.full((3,), -1e10))


@pytest.mark.parametrize("form", list(ASSERT_FORMS))
def test_case4_strip_asserts_removes_the_assert_and_its_condition_chain(form):
    gm = ASSERT_FORMS[form]()
    report = dce(gm, "eliminate_dead_code{strip_asserts=true}")
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "call_function", "output"]  # x + 1 only
    assert report.counters == {"removed_asserts": 1, "removed_nodes": 3}  # assert, all, gt
    x = torch.full((3,), -1e10)
    assert torch.equal(gm(x), x + 1)  # runs through: nothing checks x any more
    gm.graph.lint()


def test_export_input_guards_are_asserts():
    cap = capture(nn.Linear(3, 3), (torch.zeros(2, 3),), "export")
    x = torch.randn(2, 3)
    before = cap.gm(x)
    assert "_guards_fn" in targets(cap.gm)
    assert dce(cap.gm).counters == {"kept_impure": 1}
    assert "_guards_fn" in targets(cap.gm)
    report = dce(cap.gm, "eliminate_dead_code{strip_asserts=true}")
    assert report.counters == {"removed_asserts": 1, "removed_nodes": 1, "removed_submodules": 1}
    assert "_guards_fn" not in targets(cap.gm)
    assert torch.equal(cap.gm(x), before)


# ------------------------------------------------------------------------------ issue 5, case 14


class MaskChecked(nn.Module):
    def forward(self, x, mask):
        torch._assert(mask.sum() >= 0, "negative mask")
        return x + 1


def _erase_sum(with_dead_inputs: bool):
    class EraseSum(GraphPass):
        """Erase the mask.sum() node (test pass)."""

        name = "erase_sum"

        def run(self, gm, ctx):
            (node,) = [n for n in gm.graph.nodes if n.target == "sum"]
            if with_dead_inputs:
                # erasing the assert first: the chain sum -> ge goes with it, users first
                (a,) = [n for n in gm.graph.nodes if n.target is torch._assert]
                ctx.count("erased", len(ctx.erase(a, with_dead_inputs=True)))
            else:
                ctx.erase(node)
            return True

    return EraseSum


def test_case14_erasing_a_used_node_refuses_naming_its_users():
    gm = torch.fx.symbolic_trace(MaskChecked())
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        fxpasses.Pipeline([_erase_sum(False)]).run(gm)
    assert isinstance(info.value.__cause__, NodeHasUsersError)
    assert "%ge (op=call_function)" in str(info.value)
    assert gm.code == code  # rolled back
    gm.graph.lint()


def test_case14_the_dependent_chain_goes_in_reverse_order():
    gm = torch.fx.symbolic_trace(MaskChecked())
    report = fxpasses.Pipeline([_erase_sum(True)]).run(gm)
    assert report["erase_sum"].counters == {"erased": 3}
    assert [n.name for n in gm.graph.nodes] == ["x", "mask", "add", "output"]
    gm.graph.lint()
    assert gm(torch.zeros(2), -torch.ones(2)).tolist() == [1.0, 1.0]
    # the same through the pass
    gm = torch.fx.symbolic_trace(MaskChecked())
    report = dce(gm, "eliminate_dead_code{strip_asserts=true}")
    assert report.counters == {"removed_asserts": 1, "removed_nodes": 3}
    assert [n.name for n in gm.graph.nodes] == ["x", "mask", "add", "output"]


class _Broadcast(nn.Module):
    def forward(self, x):
        return (x + x.new_zeros(4, 8)).relu()  # broadcasts a (1, 8) input to (4, 8)


def test_strip_asserts_keeps_the_input_guard_a_specialising_rewrite_relies_on():
    """strip_asserts removed fxpasses' own input guard (simplify_algebra{specialize=true}
    dropped `+ zeros(4, 8)` for a (4, 8) example); the graph then returned a (1, 8) result for
    a (1, 8) input, which the model broadcasts to (4, 8), without an error (a dynamic-shapes
    check). The guard stays, counted; a model's own assert still goes."""
    m = _Broadcast()
    gm = torch.fx.symbolic_trace(m)
    report = fxpasses.Pipeline.from_string(
        "propagate_shapes,simplify_algebra{specialize=true,keep_signed_zeros=false},eliminate_dead_code{strip_asserts=true}",
        verify="numeric",
    ).run(gm, example_inputs=[torch.randn(4, 8)])
    assert report["simplify_algebra"].counters == {"input_guards": 1, "simplified": 1}
    assert report["eliminate_dead_code"].counters == {"kept_input_guards": 1}
    assert "fxpasses_guards_input_guard(x, 'x', (4, 8)" in gm.code
    with pytest.raises(AssertionError, match=r"input 'x' is sizes \(1, 8\).*specialised to sizes \(4, 8\)"):
        gm(torch.randn(1, 8))
    x = torch.randn(4, 8)
    assert torch.equal(gm(x), m(x))


# ------------------------------------------------------------------------------ issue 5, case 15


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(4, 4)

    def forward(self, x):
        return self.inner(x).relu()


class StateOwner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()  # a leaf module still called: its children stay
        self.head = nn.Linear(4, 4)  # only its weight is read through get_attr
        self.dropped = nn.Linear(4, 4)  # called, result unused
        self.scale = nn.Parameter(torch.full((4,), 2.0))  # read through get_attr

    def forward(self, x):
        self.dropped(x)
        return self.block(x) @ self.head.weight.t() * self.scale


class BlockLeafTracer(torch.fx.Tracer):
    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return isinstance(m, Block) or super().is_leaf_module(m, qualname)


def test_case15_state_of_removed_call_module_leaves_state_dict():
    model = StateOwner()
    gm = torch.fx.GraphModule(model, BlockLeafTracer().trace(model))
    x = torch.randn(3, 4)
    before = gm(x)
    # GraphModule copies what the graph references (head.bias is never read)
    assert sorted(gm.state_dict()) == [
        "block.inner.bias", "block.inner.weight", "dropped.bias", "dropped.weight", "head.weight", "scale",
    ]
    report = dce(gm)
    assert report.counters == {"removed_nodes": 1, "removed_submodules": 1, "removed_parameters": 2}
    assert sorted(gm.state_dict()) == ["block.inner.bias", "block.inner.weight", "head.weight", "scale"]
    assert torch.equal(gm(x), before)
    gm.graph.lint()


KEPT_STATE = ["block.inner.bias", "block.inner.weight", "head.weight", "scale"]


def test_case15_in_every_dialect():
    model = StateOwner()
    for dialect in ("dynamo", "export"):
        torch._dynamo.reset()
        cap = capture(model, (torch.randn(3, 4),), dialect)
        before = cap.gm(*cap.inputs)
        dce(cap.gm)
        assert torch.equal(cap.gm(*cap.inputs)[0] if dialect == "dynamo" else cap.gm(*cap.inputs),
                           before[0] if dialect == "dynamo" else before)
        if dialect == "export":
            assert sorted(cap.gm.state_dict()) == KEPT_STATE


# ------------------------------------------------------------------------------ more that must stay


def test_unused_placeholders_and_unknown_calls_stay():
    def opaque(x):
        return x

    def fn(g, x, unused):
        g.call_function(opaque, (x,))
        g.call_function(print, (x,))
        g.call_function(torch._C._set_grad_enabled, (False,))
        g.call_function(torch._C._set_grad_enabled, (True,))
        rec = g.call_function(torch.ops.profiler._record_function_enter_new.default, ("r",))
        g.call_function(torch.ops.profiler._record_function_exit._RecordFunction, (rec,))
        g.call_function(operator.mul, (x, 2))  # dead and pure: goes
        return x

    gm = build(fn, n_inputs=2)
    report = dce(gm)
    assert report.counters == {"removed_nodes": 1, "kept_impure": 5}  # enter has a user: not dead
    assert [n.op for n in gm.graph.nodes].count("placeholder") == 2
    assert len(gm.graph.nodes) == 2 + 6 + 1


def test_dead_get_attr_and_tensor_constants_go():
    root = nn.Module()
    root.register_buffer("used", torch.ones(2))
    root.register_buffer("unused", torch.ones(2))
    root.const = torch.ones(2)

    def fn(g, x):
        g.get_attr("unused")
        g.call_function(torch.mul, (g.get_attr("const"), 2))
        y = g.call_function(torch.add, (x, g.get_attr("used")))
        return g.call_function(torch.add, (y, g.get_attr("plain_used")))

    root.plain_used = torch.ones(2)
    gm = build(fn, root)  # GraphModule copies what the graph reads, as buffers
    assert sorted(gm.state_dict()) == ["const", "plain_used", "unused", "used"]
    gm.plain_used = gm._buffers.pop("plain_used")  # plain tensor attributes, as export makes
    gm.plain_dead = torch.ones(2)
    report = dce(gm)
    assert report.counters == {"removed_nodes": 3, "removed_buffers": 2, "removed_constants": 1}
    assert sorted(gm.state_dict()) == ["used"]
    assert not hasattr(gm, "plain_dead") and torch.equal(gm.plain_used, torch.ones(2))
    assert gm(torch.zeros(2)).tolist() == [2.0, 2.0]


def test_remove_unused_state_can_be_turned_off():
    gm = torch.fx.symbolic_trace(Net().eval())
    report = dce(gm, "eliminate_dead_code{remove_unused_state=false}")
    assert report.counters == {"removed_nodes": 4}
    assert "unused.weight" in gm.state_dict()


def test_training_mode_batch_norm_and_dropout_stay():
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = nn.BatchNorm1d(3)
            self.drop = nn.Dropout(0.5)

        def forward(self, x):
            self.bn(x)  # updates running stats
            self.drop(x)  # random
            F.dropout(x, 0.5, training=False)  # inactive dropout: pure, goes
            return x + 1

    m = M()
    gm = torch.fx.symbolic_trace(m)
    report = dce(gm)
    assert report.counters == {"kept_impure": 2, "removed_nodes": 1}
    gm(torch.randn(4, 3))
    assert int(gm.bn.num_batches_tracked) == 1
    assert dce(gm, "eliminate_dead_code{remove_random=true}").counters == {
        "kept_impure": 1, "removed_random": 1, "removed_nodes": 1, "removed_submodules": 1,
    }


def test_one_reverse_sweep_is_linear():
    def chain(n):
        def fn(g, x):
            v = x
            for _ in range(n):
                v = g.call_function(torch.relu, (v,))
            return x

        return build(fn)

    timings = []
    for n in (2000, 16000):
        gm = chain(n)
        t0 = time.perf_counter()
        report = dce(gm, "eliminate_dead_code")
        timings.append(time.perf_counter() - t0)
        assert report.counters == {"removed_nodes": n}
    # 8x the nodes: well under quadratic (64x) time
    assert timings[1] < timings[0] * 24 + 0.5, timings


def test_options_are_validated():
    with pytest.raises(fxpasses.OptionsError, match="remove_randoms"):
        fxpasses.Pipeline.from_string("eliminate_dead_code{remove_randoms=true}")


def test_readers_of_global_state_go_when_unused():
    gm = build(lambda g, x: (g.call_function(torch.is_grad_enabled, ()), x)[1])
    assert dce(gm).counters == {"removed_nodes": 1}


def test_prune_unused_state_with_candidates_deletes_only_unread_candidates():
    """Also under a submodule nothing references any more: fold_constants counts the bytes of
    the candidates it passes as freed (they stayed there, and its growth bound did not hold)."""
    from fxpasses.builtin_passes.dead_code import prune_unused_state

    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(torch.add, (g.call_module("d", (x,)), g.get_attr("a.b.keep")))
    g.output(g.call_function(torch.add, (y, g.get_attr("h.v"))))
    root = nn.Module()
    root.h = nn.Module()
    root.h.register_buffer("v", torch.ones(2))
    root.a = nn.Module()
    root.a.b = nn.Module()
    root.a.b.register_buffer("keep", torch.ones(2))
    root.d = nn.Linear(2, 2)
    gm = torch.fx.GraphModule(root, g)
    gm.a.b.register_buffer("w", torch.ones(2))  # unread candidate: deleted
    gm.register_buffer("top", torch.ones(2))  # unread top-level candidate: deleted
    gm.c = nn.Module()
    gm.c.register_buffer("w", torch.ones(2))  # unread, not a candidate: kept
    gm.e = nn.Module()
    gm.e.register_buffer("w", torch.ones(2))  # candidate under a module nothing reads: deleted (the module stays)
    gm.f = nn.Module()
    gm.f.register_buffer("w", torch.ones(2))  # neither read nor a candidate: kept
    gm.h.register_buffer("z", torch.ones(2))  # unread, not a candidate, beside a read buffer: kept
    counts = prune_unused_state(gm, candidates=["a.b.w", "a.b.keep", "d.weight", "e.w", "top"])
    assert counts == {"removed_buffers": 3}
    assert sorted(dict(gm.named_buffers())) == ["a.b.keep", "c.w", "f.w", "h.v", "h.z"]
    assert sorted(dict(gm.named_parameters())) == ["d.bias", "d.weight"]
    assert type(gm.e) is nn.Module  # with candidates, no submodule is deleted


def _shared_leaf() -> nn.Module:
    m = nn.Linear(3, 3, bias=False)  # bias registered as None
    m.register_parameter("again", m.weight)  # the same parameter under a second name
    m.register_buffer("none_buffer", None)
    return m


def _shared_tree() -> nn.Module:
    leaf = nn.BatchNorm2d(4)
    return nn.Sequential(leaf, nn.Sequential(leaf, nn.Conv2d(4, 4, 1)))  # a module held twice


@pytest.mark.parametrize(
    "make",
    [lambda: nn.Conv2d(4, 4, 3), lambda: nn.BatchNorm2d(4), lambda: nn.ReLU(), _shared_leaf, _shared_tree],
    ids=["conv", "batchnorm", "no-state", "shared-leaf", "shared-tree"],
)
def test_removed_state_counts_each_module_parameter_and_buffer_once(make):
    """The counts of a deleted subtree are those of ``modules()``/``parameters()``/``buffers()``
    (each object once), also for leaves counted from their registries."""
    from fxpasses.builtin_passes.dead_code import _subtree_counts

    mod = make()
    expected = (len(list(mod.modules())), len(list(mod.parameters())), len(list(mod.buffers())))
    assert _subtree_counts(mod) == expected
    if make is _shared_leaf:
        assert expected == (1, 1, 0)


def test_prune_unused_state_keeps_referenced_subtrees_and_the_paths_to_them():
    """A reference keeps what is under it (a called or read submodule, whole) and the modules
    on its path; everything else unreferenced goes, at every depth."""
    from fxpasses.builtin_passes.dead_code import prune_unused_state

    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_module("m.n", (x,))
    sub = g.get_attr("s")  # a submodule read whole (as higher-order operators read branches)
    g.output((g.call_function(torch.add, (y, g.get_attr("p.q.r.w"))), sub))
    root = nn.Module()
    root.m = nn.Module()
    root.m.n = nn.Linear(2, 2)
    root.s = nn.Module()
    root.s.t = nn.Module()
    root.s.t.register_buffer("u", torch.ones(1))
    root.p = nn.Module()
    root.p.q = nn.Module()
    root.p.q.r = nn.Module()
    root.p.q.r.register_buffer("w", torch.ones(2))
    gm = torch.fx.GraphModule(root, g)
    gm.m.register_buffer("beside", torch.ones(1))  # beside a called module: unreferenced
    gm.m.other = nn.ReLU()
    gm.p.q.register_parameter("extra", nn.Parameter(torch.ones(1)))
    gm.p.q.r.register_buffer("w2", torch.ones(1))
    gm.register_buffer("top", torch.ones(1))
    counts = prune_unused_state(gm)
    assert counts == {"removed_buffers": 3, "removed_parameters": 1, "removed_submodules": 1}
    assert sorted(dict(gm.named_buffers())) == ["p.q.r.w", "s.t.u"]
    assert sorted(dict(gm.named_parameters())) == ["m.n.bias", "m.n.weight"]
    assert sorted(name for name, _ in gm.named_modules()) == ["", "m", "m.n", "p", "p.q", "p.q.r", "s", "s.t"]


class _TwoGraphModule(torch.fx.GraphModule):
    """A GraphModule holding a train graph and an eval graph, switched by ``train()``, as
    torchvision's ``feature_extraction.DualGraphModule`` (what ``create_feature_extractor``
    returns) does: the graph not in use still calls the submodules."""

    def __init__(self, root: nn.Module, train_graph: torch.fx.Graph, eval_graph: torch.fx.Graph) -> None:
        super(torch.fx.GraphModule, self).__init__()
        for g in (train_graph, eval_graph):
            for node in g.nodes:
                if node.op in ("get_attr", "call_module"):
                    setattr(self, node.target, getattr(root, node.target))
        self.train_graph, self.eval_graph = train_graph, eval_graph
        self.training = True
        self.graph = train_graph

    def train(self, mode: bool = True):
        if mode and not self.training:
            self.graph = self.train_graph
        elif not mode and self.training:
            self.graph = self.eval_graph
        return super().train(mode)


class _ConvBnNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def test_state_the_modules_other_graph_uses_is_kept():
    torch.manual_seed(0)
    net = _ConvBnNet()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-0.5, 0.5)
        net.bn.running_var.uniform_(0.5, 2.0)
    gm = _TwoGraphModule(net, torch.fx.symbolic_trace(net).graph, torch.fx.symbolic_trace(net).graph)
    gm.eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        want_eval = net.eval()(x)
        want_train = copy.deepcopy(net).train()(x)  # (a copy: a train-mode call updates the statistics)
    report = fxpasses.Pipeline.from_preset("inference", verify="numeric").run(gm, [x])
    assert report["fuse_conv_bn"].counters == {"fused": 1}
    # the eval graph no longer reads conv and bn, the train graph still does: both stay
    assert report["eliminate_dead_code"].counters.get("removed_submodules", 0) == 0
    assert gm.conv is net.conv and gm.bn is net.bn
    with torch.no_grad():
        torch.testing.assert_close(gm(x), want_eval, atol=1e-5, rtol=1e-5)
        gm.train()
        torch.testing.assert_close(gm(x), want_train, atol=1e-5, rtol=1e-5)
