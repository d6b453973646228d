"""simplify_algebra: identities removed only where dtype, shape and aliasing stay the same."""

from __future__ import annotations

import io
import operator
import re

import pytest
import torch
import torch.nn as nn

import fxpasses
from fxpasses.capture import capture
from fxpasses.guards import input_guard
from fxpasses.ops import op_name
from fxpasses.testing import assert_preserves_outputs, normalized_code

DIALECTS = ("symbolic_trace", "dynamo", "export")
# symbolic_trace records no shapes: the shape pass runs first there (and is harmless elsewhere),
# and the graph is specialised to the example inputs' shapes (input guards; the others are
# guarded by their capture). x + 0 on floats is kept by default (signed zeros); these tests
# cover every spelling
PIPELINE = "propagate_shapes,simplify_algebra{keep_signed_zeros=false,specialize=true}"


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()  # keep dynamo's recompile limit out of the way of repeated captures


def simplify(gm, inputs, text=PIPELINE):
    return fxpasses.Pipeline.from_string(text).run(gm, inputs)["simplify_algebra"]


def op_names(gm):
    return [op_name(n, gm) for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module") and n.target != "_guards_fn"]


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


# ------------------------------------------------------------------ issue 5, case 13


class Case13(nn.Module):
    """The four expressions of the issue on tensors made inside the graph (fresh tensors)."""

    def forward(self, x):
        i = torch.arange(3)
        f = torch.ones(3)
        b = x > 0
        m = torch.ones(2, 3)
        return i * 1.0, f + torch.zeros_like(m), b * 1, f * 1


CASE13_EXPECTED = [
    (torch.float32, (3,), [0.0, 1.0, 2.0]),
    (torch.float32, (2, 3), [[1.0] * 3] * 2),
    (torch.int64, (3,), [1, 0, 1]),
    (torch.float32, (3,), [1.0, 1.0, 1.0]),
]


def check_case13_outputs(outs):
    assert len(outs) == 4
    for out, (dtype, shape, values) in zip(outs, CASE13_EXPECTED):
        assert out.dtype == dtype and tuple(out.shape) == shape and out.tolist() == values


@pytest.mark.parametrize("dialect", ["dynamo", "export"])
def test_case13_only_f_times_one_is_simplified(dialect):
    x = torch.tensor([1.0, -1.0, 2.0])  # b = [True, False, True]
    cap = capture(Case13(), [x], dialect)
    check_case13_outputs(as_tuple(cap.gm(*cap.inputs)))
    pr = simplify(cap.gm, cap.inputs, "simplify_algebra")
    assert pr.counters == {"simplified": 1, "skipped": 3}
    reasons = sorted(why for _, why in pr.skipped)
    assert reasons == [
        "x * 1 kept: the result is torch.float32, the operand torch.int64 (type promotion)",
        "x * 1 kept: the result is torch.int64, the operand torch.bool (type promotion)",
        "x + 0 kept: the result has shape (2, 3), the operand (3) (broadcasting)",
    ]
    names = op_names(cap.gm)
    assert names.count("mul") == 2 and names.count("add") == 1, names  # i * 1.0, b * 1; f + zeros
    check_case13_outputs(as_tuple(cap.gm(*cap.inputs)))


class Case13Inputs(nn.Module):
    def forward(self, i, f, b, m):
        return i * 1.0, f + torch.zeros_like(m), b * 1, f * 1


@pytest.mark.parametrize("dialect", DIALECTS)
def test_case13_with_inputs_f_times_one_is_kept_because_it_would_alias_f(dialect):
    inputs = [torch.arange(3), torch.ones(3), torch.tensor([True, False, True]), torch.ones(2, 3)]
    results = assert_preserves_outputs(PIPELINE, Case13Inputs(), inputs, dialects=[dialect], atol=0, rtol=0)
    gm, report = results[dialect]
    pr = report["simplify_algebra"]
    assert "simplified" not in pr.counters and pr.counters["skipped"] == 4
    assert any("alias" in why for _, why in pr.skipped)
    cap_inputs = inputs if dialect != "dynamo" else capture(Case13Inputs(), inputs, dialect).inputs
    outs = as_tuple(gm(*cap_inputs))
    check_case13_outputs(outs)
    assert not any(o is t for o in outs for t in cap_inputs)  # no output aliases an input


# ------------------------------------------------------------------ every spelling


class Spellings(nn.Module):
    def forward(self, x):
        y = torch.relu(x)  # a fresh tensor: its identities may go
        a = y * 1
        b = 1 * a
        c = b + 0
        d = 0 + c
        e = d - 0
        f = e / 1
        g = f**1
        h = torch.mul(g, 1.0)
        i = h.mul(1)
        j = torch.add(i, 0, alpha=3)  # i + 3*0
        k = torch.sub(j, 0.0, alpha=2)
        m = torch.true_divide(k, 1)
        n = -(-m)
        o = torch.neg(torch.neg(n))
        p = o * torch.ones_like(o)
        q = p + torch.zeros_like(p)
        r = q.add(x.new_zeros(4, 3))
        return torch.tanh(r)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_spelling_of_every_identity_goes(dialect):
    x = torch.randn(4, 3)
    results = assert_preserves_outputs(
        PIPELINE, Spellings(), [x], dialects=[dialect], atol=0, rtol=0, check_inputs=[[torch.randn(4, 3)]]
    )
    gm, report = results[dialect]
    # symbolic_trace: the one input is checked against its recorded shape and dtype (specialize)
    guards = {"input_guards": 1} if dialect == "symbolic_trace" else {}
    assert report["simplify_algebra"].counters == {"simplified": 17, **guards}, report["simplify_algebra"].skipped
    guard_ops = ["input_guard"] if guards else []
    assert op_names(gm) == [*guard_ops, "relu", "tanh"], op_names(gm)  # the fill nodes went too


def test_after_decompositions_aten_overloads():
    x = torch.randn(4, 3)
    gm = torch.export.export(Spellings(), (x,)).run_decompositions().module()
    want = gm(x)
    pr = simplify(gm, [x], "simplify_algebra{keep_signed_zeros=false}")
    assert "skipped" not in pr.counters, pr.skipped
    assert op_names(gm) == ["relu", "tanh"]
    assert torch.equal(gm(x), want)


def test_aten_packets_as_targets():
    """``torch.ops.aten.add`` (an OpOverloadPacket, no overload chosen) as a target, as
    symbolic_trace records a call of it: recognised as torch's op (it used to fail the pass
    with AttributeError: no ``namespace``)."""

    class Packets(nn.Module):
        def forward(self, x):
            return torch.relu(torch.ops.aten.mul(torch.ops.aten.add(x, 0), 1))

    x = torch.randn(4, 3)
    gm = torch.fx.symbolic_trace(Packets())
    assert isinstance(next(n for n in gm.graph.nodes if n.op == "call_function").target, torch._ops.OpOverloadPacket)
    want = gm(x)
    pr = simplify(gm, [x], PIPELINE)
    assert pr.counters == {"simplified": 2, "input_guards": 1}, (pr.counters, pr.skipped)
    assert op_names(gm) == ["input_guard", "relu"]
    assert torch.equal(gm(x), want)


class Refused(nn.Module):
    def forward(self, x, n, flag):
        y = torch.relu(x)
        return (
            n * 1.0,  # int64 -> float32
            flag * 1,  # bool -> int64
            n / 1,  # true division: int64 -> float32
            y + x.new_zeros(2, 4, 3),  # broadcasts to (2, 4, 3)
            torch.rsub(y, 0),  # 0 - y
            torch.div(y, 1, rounding_mode="floor"),  # floor(y)
            torch.add(torch.zeros_like(y), y, alpha=2),  # 2 * y
            y * 2,
            y ** 2,
            y.expand(2, 4, 3) * 1,  # strides differ: the expanded view is not dense
        )


@pytest.mark.parametrize("dialect", DIALECTS)
def test_not_identities_or_changing_dtype_shape_strides_are_kept(dialect):
    inputs = [torch.randn(4, 3) * 3, torch.arange(12).reshape(4, 3), torch.rand(4, 3) > 0.5]
    results = assert_preserves_outputs(PIPELINE, Refused(), inputs, dialects=[dialect], atol=0, rtol=0)
    gm, report = results[dialect]
    pr = report["simplify_algebra"]
    assert "simplified" not in pr.counters, pr.skipped
    whys = " | ".join(why for _, why in pr.skipped)
    for expected in ("torch.int64, the operand torch.bool", "torch.float32, the operand torch.int64", "broadcasting", "strides"):
        assert expected in whys, whys
    assert pr.counters["skipped"] == 5, pr.skipped  # n * 1.0, flag * 1, n / 1, + zeros, expand * 1


# ------------------------------------------------------------------ aliasing


class ReturnsTimesOne(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        return x * 1, y * 1, y, (x * 1).view(-1), torch.exp(x) * 1


def test_aliasing_of_outputs_is_unchanged():
    x = torch.randn(2, 3)
    for dialect in DIALECTS:
        torch._dynamo.reset()
        cap = capture(ReturnsTimesOne(), [x], dialect)
        pr = simplify(cap.gm, cap.inputs)
        # x * 1 (would alias the input), y * 1 (would alias output 2), (x * 1).view (a view of x):
        # kept; exp(x) * 1 -> exp(x): fresh and returned nowhere else
        guards = {"input_guards": 1} if dialect == "symbolic_trace" else {}
        assert pr.counters == {"simplified": 1, "skipped": 3, **guards}, (dialect, pr.skipped)
        outs = as_tuple(cap.gm(*cap.inputs))
        ins = cap.inputs
        assert not any(o is i or o.untyped_storage().data_ptr() == i.untyped_storage().data_ptr() for o in outs for i in ins if isinstance(i, torch.Tensor))
        assert outs[1] is not outs[2]
        torch.testing.assert_close(outs[4], torch.exp(x))


class InplaceGraph(nn.Module):
    def forward(self, x):
        y = x * 1
        y.add_(1)
        return y * 2


def test_graph_with_inplace_writes_is_left_alone():
    x = torch.zeros(3)
    gm = torch.fx.symbolic_trace(InplaceGraph())
    code = normalized_code(gm)
    pr = simplify(gm, [x.clone()])
    assert "simplified" not in pr.counters and "in place" in pr.skipped[0][1]
    assert normalized_code(gm) == code
    out = gm(x)
    assert torch.equal(x, torch.zeros(3)) and torch.equal(out, torch.full((3,), 2.0))


def test_without_metadata_only_double_negation_is_simplified():
    class M(nn.Module):
        def forward(self, x):
            return torch.neg(-torch.relu(x)) * 1

    gm = torch.fx.symbolic_trace(M())
    pr = simplify(gm, None, "simplify_algebra")
    assert pr.counters == {"simplified": 1, "skipped": 1}
    assert "propagate_shapes" in pr.skipped[0][1]
    assert op_names(gm) == ["relu", "mul"]
    x = torch.randn(5)
    assert torch.equal(gm(x), torch.relu(x))


class SignedZero(nn.Module):
    def forward(self, x):
        z = (torch.relu(x) - 1) * 0.0  # -0.0 where relu(x) < 1
        return (z + 0) * 2, z - 0


def test_signed_zeros_kept_by_default_so_outputs_stay_bit_identical():
    class Reciprocal(torch.nn.Module):
        def forward(self, x):
            return 1.0 / (x * 0 + 0)

    x = torch.tensor([-0.0, 0.0, 1.0, -2.0])
    for dialect in ("export", "dynamo"):
        cap = capture(Reciprocal(), [x], dialect)
        want = cap.gm(*cap.inputs)
        fxpasses.run(cap.gm, "simplify_algebra", cap.inputs)
        got = cap.gm(*cap.inputs)
        want, got = (want[0], got[0]) if isinstance(want, (tuple, list)) else (want, got)
        assert got.tolist() == want.tolist() == [float("inf")] * 4


def test_keep_signed_zeros_option():
    x = torch.tensor([-3.0, 0.5, 4.0])  # z = [-0.0, -0.0, +0.0]
    for keep, simplified, signs in ((False, 2, [True, True, False]), (True, 1, [False, False, False])):
        cap = capture(SignedZero(), [x], "export")
        want = cap.gm(x)
        assert torch.signbit(want[0]).tolist() == [False, False, False]  # -0.0 + 0 is +0.0
        pr = simplify(cap.gm, [x], f"simplify_algebra{{keep_signed_zeros={str(keep).lower()}}}")
        assert pr.counters.get("simplified") == simplified, pr.skipped
        got = cap.gm(x)
        torch.testing.assert_close(got, want, atol=0, rtol=0)  # -0.0 == +0.0
        assert torch.signbit(got[0]).tolist() == signs
        if keep:
            assert pr.skipped == [("add", "x + 0 kept (keep_signed_zeros): it turns -0.0 into +0.0")]


class ZeroForms(nn.Module):
    """Zeros added through a filled tensor or with ``alpha``: the first three add ``+0.0``
    (they turn ``-0.0`` into ``+0.0``), the last three add ``-0.0`` (exact identities)."""

    def forward(self, x):
        y = x * 2
        flips = (
            y - torch.full_like(y, -0.0),  # y + 0.0
            torch.sub(y, 0.0, alpha=-1),  # y - (-1 * 0.0) = y + 0.0
            torch.add(y, -0.0, alpha=-1),  # y + (-1 * -0.0) = y + 0.0
        )
        keeps = (
            y - torch.full_like(y, 0.0),  # y - 0.0
            torch.add(y, 0.0, alpha=-1),  # y + (-0.0)
            torch.add(y, torch.full_like(y, -0.0)),  # y + (-0.0)
        )
        return tuple(1 / t for t in (*flips, *keeps))


@pytest.mark.parametrize("dialect", ["dynamo", "export"])
def test_signed_zeros_of_filled_tensors_and_alpha_are_kept(dialect):
    """``_may_flip_zero_sign`` read the zero's sign only from a float literal and ignored
    ``alpha``: ``y - full_like(y, -0.0)``, ``sub(y, 0.0, alpha=-1)`` and ``add(y, -0.0,
    alpha=-1)`` were simplified to ``y`` by default, and ``1 / out`` became ``-inf`` where it
    was ``+inf`` (an adversarial check). The zero actually added decides."""
    x = torch.tensor([-0.0, 1.0, -3.0])
    cap = capture(ZeroForms(), [x], dialect)
    want = cap.gm(*cap.inputs)
    assert [t[0].item() for t in want] == [float("inf")] * 3 + [float("-inf")] * 3
    pr = simplify(cap.gm, cap.inputs, "simplify_algebra")
    got = cap.gm(*cap.inputs)
    assert [t.tolist() for t in got] == [t.tolist() for t in want]  # inf and -inf, exactly
    kept = [reason for _, reason in pr.skipped if "keep_signed_zeros" in reason]
    assert len(kept) == 3, pr.skipped
    assert pr.counters["simplified"] >= 3  # the three exact identities


def test_options_are_validated():
    with pytest.raises(fxpasses.OptionsError, match="keep_signed_zero"):
        fxpasses.Pipeline.from_string("simplify_algebra{keep_signed_zero=true}")


def test_call_method_and_operator_forms_in_a_hand_built_graph():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    r = g.call_function(torch.relu, (x,))
    a = g.call_method("mul", (r, 1))
    b = g.call_function(operator.truediv, (a, 1))
    c = g.call_function(operator.pow, (b, 1))
    d = g.call_method("neg", (g.call_method("neg", (c,)),))
    g.output(g.call_function(torch.tanh, (d,)))
    gm = torch.fx.GraphModule(nn.Module(), g)
    inp = torch.randn(3)
    pr = simplify(gm, [inp])
    assert pr.counters == {"simplified": 4, "input_guards": 1}
    guard = input_guard
    assert [n.target for n in gm.graph.nodes if n.op != "placeholder" and n.op != "output"] == [guard, torch.relu, torch.tanh]
    assert torch.equal(gm(inp), torch.tanh(torch.relu(inp)))


def mul(a, b):
    """A user function that shares the name of torch.mul but is not the identity at b == 1."""
    return a * b + 1


def test_user_function_named_like_an_operator_is_not_touched():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    r = g.call_function(torch.relu, (x,))
    g.output(g.call_function(torch.tanh, (g.call_function(mul, (r, 1)),)))
    gm = torch.fx.GraphModule(nn.Module(), g)
    inp = torch.randn(3)
    pr = simplify(gm, [inp])  # shapes recorded: only the target's identity protects it
    assert not pr.changed and pr.counters == {}
    assert torch.equal(gm(inp), torch.tanh(torch.relu(inp) + 1))


# ------------------------------------------------------------------ helpers (fast paths)


class _Unhashable:
    __hash__ = None  # type: ignore[assignment]
    __name__ = "mul"  # named like PyTorch's, but not PyTorch's

    def __call__(self, a, b):
        return a * b


def test_op_names_are_cached_per_target_and_match_the_uncached_answer():
    from fxpasses.builtin_passes.algebra import _identity, _name

    def mul(a, b):  # a user function named like an operator: not PyTorch's
        return a * b

    g = torch.fx.Graph()
    x = g.placeholder("x")
    nodes = [
        g.call_function(operator.mul, (x, 1)),
        g.call_function(torch.mul, (1, x)),
        g.call_function(torch.ops.aten.mul.Tensor, (x, 1.0)),
        g.call_function(mul, (x, 1)),
        # FX's graph cannot hold an unhashable target; a node made outside it can
        torch.fx.Node(g, "odd", "call_function", _Unhashable(), (x, 1), {}),
        g.call_method("mul", (x, 1)),
        g.call_function(torch.sigmoid, (x,)),
    ]
    names: dict = {}
    got = [(_name(n, names), _identity(n, names)) for n in nodes]
    assert got == [(_name(n), _identity(n)) for n in nodes]
    assert [name for name, _ in got] == ["mul", "mul", "mul", None, None, "mul", "sigmoid"]
    assert [found[2] if found else None for _, found in got] == ["x * 1", "1 * x", "x * 1", None, None, "x * 1", None]
    # call_function targets only, the unhashable one not at all
    assert names == {operator.mul: "mul", torch.mul: "mul", torch.ops.aten.mul.Tensor: "mul", mul: None, torch.sigmoid: "sigmoid"}


def test_fill_values_of_numbers_and_nodes():
    import numpy as np

    from fxpasses.builtin_passes.algebra import _fill

    g = torch.fx.Graph()
    x = g.placeholder("x")
    assert [_fill(v) for v in (1, 0.0, True, 2j, np.float64(1.0), "1", None, x)] == [1, 0.0, True, 2j, 1.0, None, None, None]
    assert type(_fill(True)) is bool and type(_fill(np.float64(1.0))) is np.float64
    made = [
        g.call_function(torch.zeros_like, (x,)),
        g.call_method("new_ones", (x, (2,))),
        g.call_function(torch.full, ((2,), 0.5)),
        g.call_function(torch.full_like, (x,), {"fill_value": 1}),
        g.call_function(torch.full, ((2,), x)),
        g.call_function(torch.ones, ((2,),), {"out": x}),
        g.call_function(torch.sigmoid, (x,)),
    ]
    assert [_fill(n, {}) for n in made] == [0, 1, 0.5, 1, None, None, None]


def test_is_torch_op_accepts_pytorch_s_own_callables_only():
    import torch.nn.functional as F

    from fxpasses.builtin_passes._facts import is_torch_op

    def relu(t):
        return t

    yes = [torch.relu, F.relu, F.gelu, torch.Tensor.add, operator.mul, torch.ops.aten.add.Tensor]
    no = [relu, torch.ops.prims.add.default, print, _Unhashable(), len]
    assert [is_torch_op(t) for t in yes] == [True] * len(yes)
    assert [is_torch_op(t) for t in no] == [False] * len(no)


def test_erase_dead_erases_unused_listed_nodes_and_then_their_dead_attribute_reads():
    from fxpasses.builtin_passes._facts import erase_dead

    root = nn.Module()
    root.register_buffer("b", torch.ones(2))
    root.register_buffer("c", torch.ones(2))
    g = torch.fx.Graph()
    x = g.placeholder("x")
    b = g.get_attr("b")
    c = g.get_attr("c")
    dead1 = g.call_function(torch.add, (x, b))
    dead2 = g.call_function(torch.mul, (c, 2))
    used = g.call_function(torch.sub, (x, c))
    g.output(used)
    gm = torch.fx.GraphModule(root, g)
    # listed: a dead node, one with a user, the placeholder, a dead node again (already gone)
    assert erase_dead(gm.graph, [dead1, used, x, dead2, dead1]) == 3  # dead1, dead2, then b
    assert [n.name for n in gm.graph.nodes] == ["x", "c", "sub", "output"]
    g2 = torch.fx.Graph()
    y = g2.placeholder("y")
    a = g2.get_attr("b")
    d = g2.call_function(torch.add, (y, a))
    g2.output(y)
    gm2 = torch.fx.GraphModule(root, g2)
    assert erase_dead(gm2.graph, [d], inputs=False) == 1
    assert [n.name for n in gm2.graph.nodes] == ["y", "b", "output"]


# ------------------------------------------------------------------ facts of the example inputs
# A symbolic_trace graph takes inputs of any shape and dtype; the shapes propagate_shapes
# records on it are the example's. Rewrites relying on them changed what the graph computed
# for other inputs (found by the adversarial sweep: x - zeros(5) -> x broadcast differently for
# an x of shape (1,), x * 1.0 -> x stayed int64 for an int input).


class ExampleFacts(nn.Module):
    def forward(self, x):
        a = (x - torch.zeros(5, device=x.device)).relu()  # x - 0: (5,) when x is (1,)
        b = (x * 1.0).neg()  # float when x is int
        return a, b


OTHER_INPUTS = [torch.randn(1), torch.arange(5), torch.randn(5, 4).t()]


def test_symbolic_trace_facts_of_the_example_inputs_do_not_simplify_by_default():
    model = ExampleFacts()
    gm = torch.fx.symbolic_trace(model)
    pr = simplify(gm, [torch.randn(4, 5)], "propagate_shapes,simplify_algebra")
    assert pr.counters == {"skipped": 2} and not pr.changed, pr.counters
    assert {why for _, why in pr.skipped} == {
        f"{what} kept: the shapes and dtypes in node.meta are the example inputs', and a symbolic_trace graph "
        "takes inputs of any shape and dtype (option specialize=true simplifies and adds a check of each input)"
        for what in ("x - 0", "x * 1")
    }
    for x in OTHER_INPUTS:  # the graph still computes what the model does, whatever the input
        for got, want in zip(gm(x), model(x)):
            assert got.shape == want.shape and got.dtype == want.dtype
            torch.testing.assert_close(got, want, atol=0, rtol=0)


def test_specialize_simplifies_and_checks_every_input_against_its_recorded_facts():
    model = ExampleFacts()
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(4, 5)
    pr = simplify(gm, [x], "propagate_shapes,simplify_algebra{specialize=true}")
    assert pr.counters == {"simplified": 2, "input_guards": 1}, (pr.counters, pr.skipped)
    guard = next(n for n in gm.graph.nodes if n.op == "call_function")
    assert guard.target is input_guard
    by = "simplify_algebra{specialize=true}"
    assert guard.args == (next(iter(gm.graph.nodes)), "x", (4, 5), (5, 1), torch.float32, torch.device("cpu"), by)
    for got, want in zip(gm(x), model(x)):
        torch.testing.assert_close(got, want, atol=0, rtol=0)
    want = "the graph was specialised to sizes (4, 5), strides (5, 1), torch.float32, on cpu by " + by
    for other, got in [
        (torch.randn(1), "sizes (1,), strides (1,), torch.float32, on cpu"),
        (torch.arange(20).reshape(4, 5), "sizes (4, 5), strides (5, 1), torch.int64, on cpu"),
        (torch.randn(5, 4).t(), "sizes (4, 5), strides (1, 4), torch.float32, on cpu"),
    ]:
        with pytest.raises(AssertionError, match=re.escape(f"input 'x' is {got}; {want} (its rewrites hold")):
            gm(other)
    # torch's own dead code elimination keeps the check too, and a saved module checks on load
    gm.graph.eliminate_dead_code()
    gm.recompile()
    buffer = io.BytesIO()
    torch.save(gm, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    with pytest.raises(AssertionError, match=re.escape("input 'x' is sizes (1,)")):
        loaded(torch.randn(1))
    torch.testing.assert_close(loaded(x)[1], model(x)[1], atol=0, rtol=0)
    # dead code elimination keeps the check (an assert), and a second run counts the graph as
    # guarded: it adds no second check
    fxpasses.Pipeline.from_string("eliminate_dead_code").run(gm, [x])
    assert sum(n.target is input_guard for n in gm.graph.nodes) == 1

    class Twice(nn.Module):
        def forward(self, x):
            return (x * 1).relu() + 0

    gm = torch.fx.symbolic_trace(Twice())
    first = simplify(gm, [x], "propagate_shapes,simplify_algebra{specialize=true}")
    assert first.counters == {"simplified": 1, "input_guards": 1, "skipped": 1}, first.skipped  # + 0: signed zeros
    # no specialize option now: the check is there and matches the facts, so they hold
    again = simplify(gm, [x], "propagate_shapes,simplify_algebra{keep_signed_zeros=false}")
    assert again.counters == {"simplified": 1}, (again.counters, again.skipped)
    assert sum(n.target is input_guard for n in gm.graph.nodes) == 1
    torch.testing.assert_close(gm(x), x.relu(), atol=0, rtol=0)


def test_a_check_for_other_facts_or_an_input_without_facts_does_not_count_as_guarded():
    class Two(nn.Module):
        def forward(self, x, y):
            return (x * 1.0).relu(), y.relu()

    # a check of x for other sizes than those propagated: the facts do not hold for every input
    g = torch.fx.symbolic_trace(Two()).graph
    x, y = list(g.nodes)[:2]
    with g.inserting_after(y):
        cpu = torch.device("cpu")
        g.call_function(input_guard, (x, "x", (2, 2), (2, 1), torch.float32, cpu, "a test"))
        g.call_function(input_guard, (y, "y", (3,), (1,), torch.float32, cpu, "a test"))
    gm = torch.fx.GraphModule(nn.Module(), g)
    pr = simplify(gm, [torch.randn(4, 5), torch.randn(3)], "propagate_shapes,simplify_algebra")
    assert pr.counters == {"skipped": 1} and "specialize=true" in pr.skipped[0][1], pr.skipped
    # y has no recorded facts (cleared after the propagation): nothing can check it, and what
    # depends on y is kept; x * 1 does not, and is simplified under a guard of x (before, one
    # input without facts kept every rewrite: noticed in an earlier session)
    class TwoScaled(nn.Module):
        def forward(self, x, y):
            return (x * 1.0).relu(), (y.relu() * 1).cos() + (x * 1)

    gm = torch.fx.symbolic_trace(TwoScaled())
    fxpasses.Pipeline.from_string("propagate_shapes").run(gm, [torch.randn(4, 5), torch.randn(5)])
    list(gm.graph.nodes)[1].meta.clear()
    pr = simplify(gm, [torch.randn(4, 5), torch.randn(5)], "simplify_algebra{specialize=true}")
    assert pr.counters == {"simplified": 2, "input_guards": 1, "skipped": 1}, pr.counters
    assert pr.skipped == [
        (
            "mul_1",
            "x * 1 kept: a symbolic_trace graph takes inputs of any shape and dtype, and input 'y' has no recorded "
            "shape and dtype to check (run propagate_shapes first, with example inputs; an input that is None in them "
            "records none)",
        )
    ]
    (guard,) = [n for n in gm.graph.nodes if n.target is input_guard]
    assert guard.args[:3] == (list(gm.graph.nodes)[0], "x", (4, 5))
    x, y = torch.randn(4, 5), torch.randn(5)
    outputs = gm(x, y)
    torch.testing.assert_close(outputs, TwoScaled()(x, y), atol=0, rtol=0)
    with pytest.raises(Exception, match="x"):
        gm(torch.randn(3, 5), y)  # x * 1 -> x relied on x's recorded facts: the guard checks them
    # without specialize, the message for the guardable input is unchanged
    gm = torch.fx.symbolic_trace(TwoScaled())
    fxpasses.Pipeline.from_string("propagate_shapes").run(gm, [torch.randn(4, 5), torch.randn(5)])
    list(gm.graph.nodes)[1].meta.clear()
    pr = simplify(gm, [torch.randn(4, 5), torch.randn(5)], "simplify_algebra")
    assert pr.counters == {"skipped": 3} and sum("specialize=true" in why for _, why in pr.skipped) == 2, pr.skipped


@pytest.mark.parametrize("dialect", ["dynamo", "export"])
def test_guarded_captures_simplify_without_the_option_and_without_checks(dialect):
    model = ExampleFacts()
    cap = capture(model, [torch.randn(4, 5)], dialect)
    pr = simplify(cap.gm, cap.inputs, "propagate_shapes,simplify_algebra")
    assert pr.counters.get("simplified") == 2 and "input_guards" not in pr.counters, (pr.counters, pr.skipped)
    assert not any(n.target is input_guard for n in cap.gm.graph.nodes)


class _AtenInSymbolicTrace(torch.nn.Module):
    def forward(self, x, y):
        return torch.ops.aten.relu.default(x), (y / 1).neg()


def test_an_aten_call_does_not_make_a_symbolic_trace_graph_an_export_one():
    """Any OpOverload target (an aten call in the model, a plugin's custom operator a pass
    inserted) made detect_dialect say "export", whose inputs are checked when called: so
    simplify_algebra replaced `y / 1` by `y` without a check, and an int64 `y` came back int64
    instead of float (a new-user check). Only export's module (or its pytree code generator with
    every placeholder's `val`) is export now; make_fx graphs are symbolic_trace too."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from fxpasses.dialect import detect_dialect

    x, y = torch.randn(2, 4), torch.randn(3)
    gm = torch.fx.symbolic_trace(_AtenInSymbolicTrace())
    assert detect_dialect(gm) == "symbolic_trace"
    report = fxpasses.Pipeline(["propagate_shapes", "simplify_algebra"]).run(gm, [x, y])
    assert report.dialect == "symbolic_trace" and not report["simplify_algebra"].changed
    ints = torch.tensor([3, 4, 5])
    assert gm(x, ints)[1].dtype == torch.float32
    torch.testing.assert_close(gm(x, ints)[1], _AtenInSymbolicTrace()(x, ints)[1])
    assert detect_dialect(make_fx(_AtenInSymbolicTrace())(x, y)) == "symbolic_trace"
    assert detect_dialect(torch.export.export(_AtenInSymbolicTrace(), (x, y)).module()) == "export"


class _NoGradBlock(nn.Module):
    def forward(self, x):
        with torch.no_grad():
            y = x * 1
            z = -(-x)
        w = x * 1  # grad mode back on: the same requires_grad as x
        return y * 3, z * 2, w + 1


@pytest.mark.parametrize("grad", [True, False])
def test_no_rewrite_inside_a_no_grad_block_lets_gradients_through(grad):
    """In a TorchDynamo graph `with torch.no_grad(): y = x * 1` is `_set_grad_enabled(False)`,
    `mul`, `_set_grad_enabled(True)`: simplify_algebra replaced `y` by `x`, so the output
    required grad and x.grad got 3 where eager gives none (an adversarial check). A rewrite
    after the block, or one whose recorded values require grad alike, is still made."""
    x = torch.randn(3, requires_grad=grad)
    cap = capture(_NoGradBlock(), [x], "dynamo")
    assert [n.target for n in cap.gm.graph.nodes].count(torch._C._set_grad_enabled) == 2
    report = fxpasses.Pipeline.from_string("simplify_algebra", verify="numeric").run(cap.gm, cap.inputs)
    simplified = report["simplify_algebra"].counters.get("simplified", 0)
    skipped = [why for _, why in report["simplify_algebra"].skipped]
    if grad:
        assert simplified == 1  # w = x * 1 only
        assert len(skipped) == 2 and all("is computed where grad mode may be off (after %_set_grad_enabled)" in w for w in skipped), skipped
        assert skipped[0].endswith(
            "so it may not require grad where a graph input does: replacing it would let gradients flow where "
            "the model turned them off"
        )
    else:
        assert simplified == 3 and skipped == []
    out = cap.gm(*cap.inputs)
    assert [o.requires_grad for o in out] == [False, False, grad]
    if grad:
        out[2].sum().backward()
        assert torch.equal(x.grad, torch.ones(3))  # from w + 1 only
