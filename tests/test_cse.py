"""eliminate_common_subexpressions: merges only what is truly equal (issue 5: cases 5, 6)."""

from __future__ import annotations

import operator
import time

import pytest
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

import fxpasses
from fxpasses.capture import capture
from fxpasses.testing import assert_preserves_outputs

DIALECTS = ("symbolic_trace", "dynamo", "export")
CSE = "eliminate_common_subexpressions"


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()


def cse(gm, inputs=None, text=CSE):
    return fxpasses.Pipeline.from_string(text).run(gm, inputs)[CSE]


def first(out):
    return out[0] if isinstance(out, (tuple, list)) and len(out) == 1 else out


def build(fn, root: nn.Module | None = None, n_inputs: int = 1) -> torch.fx.GraphModule:
    g = torch.fx.Graph()
    xs = [g.placeholder(f"x{i}") for i in range(n_inputs)]
    g.output(fn(g, *xs))
    return torch.fx.GraphModule(root if root is not None else nn.Module(), g)


class Repeats(nn.Module):
    """Attention-like block computing several things twice; int and bool tensors too."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.proj = nn.Linear(16, 16)

    def forward(self, x, idx, mask):
        h = self.conv(x).flatten(2)  # (B, 4, 16)
        q = self.proj(h)
        k = self.proj(h)  # same module, same input: merged
        scores = (q @ k.transpose(-1, -2)) / 4.0
        scores2 = (q @ k.transpose(-1, -2)) / 4.0
        att = scores.masked_fill(~mask, -1e4).softmax(-1) + scores2.masked_fill(~mask, -1e4).softmax(-1)
        i1 = (idx * 3) % 7
        i2 = (idx * 3) % 7
        return att @ h, i1 + i2, (~mask) & (~mask)


def repeats_inputs():
    return (torch.randn(2, 3, 4, 4), torch.randint(0, 50, (2, 4)), torch.rand(2, 4, 4) > 0.3)


def test_outputs_preserved_and_exact_merges_in_every_dialect():
    results = assert_preserves_outputs(
        fxpasses.Pipeline.from_string(CSE), Repeats(), repeats_inputs(), check_inputs=[repeats_inputs()]
    )
    # the second proj(h); transpose, matmul, div of scores2; ~mask, masked_fill, softmax;
    # idx * 3, % 7; both ~mask of the last output: 11, the same in every dialect's spelling
    expected = {"symbolic_trace": 11, "dynamo": 11, "export": 11}
    for dialect, (gm, report) in results.items():
        r = report[CSE]
        assert r.counters == {"merged": expected[dialect]}, dialect
        assert r.nodes_before - r.nodes_after == expected[dialect]


# ------------------------------------------------------------------------------ issue 5, case 5


class IntMinusOne(nn.Module):
    def forward(self, x):
        return x - 1, x - 1.0


@pytest.mark.parametrize("dialect", DIALECTS)
def test_case5_int_and_float_literals_are_not_merged(dialect):
    cap = capture(IntMinusOne(), (torch.arange(4),), dialect)
    report = cse(cap.gm, cap.inputs)
    assert report.counters == {}
    a, b = cap.gm(*cap.inputs)
    assert a.dtype == torch.int64 and a.tolist() == [-1, 0, 1, 2]
    assert b.dtype == torch.float32 and b.tolist() == [-1.0, 0.0, 1.0, 2.0]


def test_literals_compare_by_type_and_value():
    def fn(g, i, b, f):
        ops = [
            g.call_function(operator.add, (b, 1)),  # bool + 1 -> int64
            g.call_function(operator.add, (b, True)),  # bool + True -> bool
            g.call_function(operator.mul, (f, 0.0)),
            g.call_function(operator.mul, (f, -0.0)),  # sign of zero differs
            g.call_function(operator.add, (i, 1)),
            g.call_function(operator.add, (i, 1.0)),
            g.call_method("sum", (f, (0,))),
            g.call_method("sum", (f, [0])),  # list vs tuple: not merged (types differ)
            g.call_method("to", (f, torch.float64)),
            g.call_method("to", (f, torch.float16)),
        ]
        nan1 = g.call_function(operator.add, (f, float("nan")))
        nan2 = g.call_function(operator.add, (f, float("nan")))  # the same NaN: merged
        one = g.call_function(operator.mul, (f, 1))
        one2 = g.call_function(operator.mul, (f, 1))  # merged
        return (*ops, g.call_function(operator.add, (nan1, nan2)), g.call_function(operator.add, (one, one2)))

    gm = build(fn, n_inputs=3)
    inputs = (torch.arange(3), torch.tensor([True, False, True]), torch.tensor([1.0, -2.0, 3.0]))
    before = gm(*inputs)
    report = cse(gm)
    assert report.counters == {"merged": 2}
    after = gm(*inputs)
    assert [t.dtype for t in after] == [t.dtype for t in before]
    assert after[0].dtype == torch.int64 and after[1].dtype == torch.bool
    assert torch.signbit(after[2]).tolist() == [False, True, False]
    assert torch.signbit(after[3]).tolist() == [True, False, True]
    assert after[4].dtype == torch.int64 and after[5].dtype == torch.float32
    assert after[8].dtype == torch.float64 and after[9].dtype == torch.float16
    assert torch.isnan(after[10]).all()
    assert after[11].tolist() == [2.0, -4.0, 6.0]


# ------------------------------------------------------------------------------ issue 5, case 6


class RandomTwice(nn.Module):
    def forward(self, x):
        noise = torch.rand_like(x) - torch.rand_like(x)
        return noise, F.dropout(x, 0.5, training=True) - F.dropout(x, 0.5, training=True)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_case6_random_ops_are_never_merged(dialect):
    cap = capture(RandomTwice(), (torch.ones(64),), dialect)
    names = [str(n.target) for n in cap.gm.graph.nodes if n.op == "call_function"]
    n_random = sum("rand_like" in t or "dropout" in t for t in names)
    assert n_random == 4
    report = cse(cap.gm, cap.inputs)
    assert report.counters == {}
    d1, d2 = cap.gm(*cap.inputs)
    assert bool((d1 != 0).all())  # two independent uniform draws never coincide
    assert bool((d2 != 0).any())  # two dropout masks differ somewhere (1 - 2**-64)


def test_active_dropout_modules_are_not_merged_but_inactive_ones_are():
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.drop = nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(x) - self.drop(x)

    m = M()
    gm = torch.fx.symbolic_trace(m)
    assert cse(gm).counters == {}
    assert bool((gm(torch.ones(64)) != 0).any())
    gm = torch.fx.symbolic_trace(m.eval())
    assert cse(gm).counters == {"merged": 1}
    assert gm(torch.ones(64)).tolist() == [0.0] * 64


def test_skip_random_ops_cannot_be_turned_off():
    assert fxpasses.Pipeline.from_string(f"{CSE}{{skip_random_ops=true}}")
    with pytest.raises(fxpasses.OptionsError, match="skip_random_ops"):
        fxpasses.Pipeline.from_string(f"{CSE}{{skip_random_ops=false}}")
    with pytest.raises(fxpasses.OptionsError, match="skip_random_ops"):
        fxpasses.Pipeline.from_string(f"{CSE}{{skip_random_op=false}}")


# ------------------------------------------------------------------------------ mutation


class MutatesBetween(nn.Module):
    def forward(self, x):
        a = x * 2
        x.add_(1)
        b = x * 2  # not the same value as a
        c = x * 2  # the same as b
        return a + b + c


@pytest.mark.parametrize("dialect", DIALECTS)
def test_never_merges_across_a_mutation_of_an_input(dialect):
    cap = capture(MutatesBetween(), (torch.zeros(3),), dialect)
    report = cse(cap.gm, cap.inputs)
    assert report.counters == {"merged": 1}  # only b and c
    assert first(cap.gm(torch.zeros(3))).tolist() == [4.0, 4.0, 4.0]  # 0 + 2 + 2
    assert MutatesBetween()(torch.zeros(3)).tolist() == [4.0, 4.0, 4.0]


def test_mutation_through_a_view_and_of_another_input():
    def fn(g, x, y):
        a = g.call_function(operator.mul, (y, 2))
        v = g.call_method("view", (x, -1))
        g.call_method("add_", (v, 1))  # writes x; y may be the same tensor as x
        b = g.call_function(operator.mul, (y, 2))
        return g.call_function(operator.add, (a, b))

    gm = build(fn, n_inputs=2)
    assert cse(gm).counters == {}
    x = torch.zeros(3)
    assert gm(x, x).tolist() == [2.0, 2.0, 2.0]  # 0*2 + 1*2


def test_in_place_ops_and_their_written_results_are_not_merged():
    def fn(g, x):
        a = g.call_function(operator.mul, (x, 2))
        b = g.call_function(operator.mul, (x, 2))  # a is written below: not merged with b
        g.call_method("add_", (a, 1))
        y = g.call_function(operator.add, (x, 0))
        g.call_method("add_", (y, 1))
        g.call_method("add_", (y, 1))  # two in-place adds: both happen
        return g.call_function(operator.add, (g.call_function(operator.add, (a, b)), y))

    gm = build(fn)
    assert cse(gm).counters == {}
    assert gm(torch.zeros(2)).tolist() == [3.0, 3.0]  # (0*2+1) + 0*2 + (0+1+1)


def test_get_attr_of_a_written_buffer_is_not_merged():
    root = nn.Module()
    root.register_buffer("steps", torch.zeros(1))
    root.register_buffer("const", torch.ones(1))

    def fn(g, x):
        s1 = g.get_attr("steps")
        before = g.call_function(operator.mul, (s1, 1))
        g.call_method("add_", (s1, 1))
        s2 = g.get_attr("steps")
        c1 = g.get_attr("const")
        c2 = g.get_attr("const")  # never written: merged
        left = g.call_function(operator.add, (before, s2))
        return g.call_function(operator.add, (left, g.call_function(operator.add, (c1, c2))))

    gm = build(fn, root)
    report = cse(gm)
    assert report.counters == {"merged": 1}
    assert len(gm.graph.find_nodes(op="get_attr", target="steps")) == 2
    assert len(gm.graph.find_nodes(op="get_attr", target="const")) == 1
    assert gm(torch.zeros(1)).tolist() == [3.0]  # 0 + 1 + (1 + 1)


def test_two_results_returned_separately_stay_two_tensors():
    class M(nn.Module):
        def forward(self, x):
            return x + 1, x + 1

    gm = torch.fx.symbolic_trace(M())
    report = cse(gm)
    assert report.counters == {"kept_distinct_outputs": 1}
    a, b = gm(torch.zeros(2))
    assert a.data_ptr() != b.data_ptr()


def test_training_batch_norm_and_unknown_modules_are_not_merged():
    class Custom(nn.Module):
        def forward(self, x):
            return x * 2

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = nn.BatchNorm1d(3)
            self.custom = Custom()

        def forward(self, x):
            return self.bn(x) + self.bn(x) + self.custom(x) + self.custom(x)

    class Leaf(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, Custom) or super().is_leaf_module(m, qualname)

    m = M()
    gm = torch.fx.GraphModule(m, Leaf().trace(m))
    assert cse(gm).counters == {}
    gm(torch.randn(4, 3))
    assert int(gm.bn.num_batches_tracked) == 2


def test_hash_table_is_linear():
    def graph(n):
        def fn(g, x):
            acc = x
            for i in range(n):
                a = g.call_function(torch.mul, (x, float(i)))
                b = g.call_function(torch.mul, (x, float(i)))
                acc = g.call_function(torch.add, (acc, g.call_function(torch.sub, (a, b))))
            return acc

        return build(fn)

    timings = []
    for n in (500, 4000):
        gm = graph(n)
        t0 = time.perf_counter()
        report = cse(gm)
        timings.append(time.perf_counter() - t0)
        assert report.counters == {"merged": n}
    assert timings[1] < timings[0] * 24 + 0.5, timings


def test_never_merges_across_an_autocast_or_grad_mode_boundary():
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 4))

        def forward(self, x):
            a = x @ self.w
            with torch.autocast("cpu", dtype=torch.bfloat16):
                b = x @ self.w
            with torch.no_grad():
                c = x @ self.w
            d = x @ self.w  # the same as a
            return a + 1, b + 1, c + 1, d + 1

    cap = capture(M(), (torch.randn(2, 4),), "dynamo")
    before = cap.gm(*cap.inputs)
    report = cse(cap.gm, cap.inputs)
    assert report.counters == {}  # d stays: a grad-mode switch lies between (requires_grad differs)
    after = cap.gm(*cap.inputs)
    assert [t.dtype for t in after] == [torch.float32, torch.bfloat16, torch.float32, torch.float32]
    assert [t.requires_grad for t in after] == [t.requires_grad for t in before] == [True, True, False, True]


def test_long_view_chains_stay_linear():
    def fn(g, x):
        v = x
        for _ in range(8000):
            v = g.call_method("view", (v, -1))
        return v

    gm = build(fn)
    t0 = time.perf_counter()
    assert cse(gm).counters == {}
    assert time.perf_counter() - t0 < 3.0


def test_calls_of_a_module_whose_state_is_written_are_not_merged():
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = nn.BatchNorm1d(3).eval()

        def forward(self, x):
            a = self.bn(x)
            self.bn.running_mean.add_(1)  # written between two identical calls
            b = self.bn(x)
            return a - b

    class Tracer(torch.fx.Tracer):
        proxy_buffer_attributes = True

    m = M()
    gm = torch.fx.GraphModule(m, Tracer().trace(m))
    assert cse(gm).counters == {}
    assert torch.allclose(gm(torch.zeros(2, 3)), torch.full((2, 3), 1.0), atol=1e-4)


# ------------------------------------------------------------------ keys (fast paths)


def test_argument_keys_of_the_inline_path_are_the_typed_literal_keys():
    import struct

    from fxpasses.builtin_passes.cse import _EMPTY_DICT_KEY, _items_key, _key

    g = torch.fx.Graph()
    x = g.placeholder("x")
    nk = lambda n: (n, 7)  # noqa: E731
    args = (x, 1, True, 2.5, -0.0, "s", None, (x, 3), [4.0], torch.float16, slice(1, None))
    want = (
        ("node", (x, 7)),
        (int, 1),
        (bool, True),
        (float, struct.pack("<d", 2.5)),
        (float, struct.pack("<d", -0.0)),
        (str, "s"),
        (type(None), None),
        ("tuple", (("node", (x, 7)), (int, 3))),
        ("list", ((float, struct.pack("<d", 4.0)),)),
        (torch.dtype, torch.float16),
        ("slice", (int, 1), (type(None), None), (type(None), None)),
    )
    assert _items_key(args, nk) == want
    assert _key(args, nk) == ("tuple", want)
    assert _key(list(args), nk) == ("list", want)
    assert _key({}, nk) == _EMPTY_DICT_KEY == ("dict", ())
    assert _key({"dim": (0, 1), "keepdim": True}, nk) == (
        "dict",
        (("'dim'", ("tuple", ((int, 0), (int, 1)))), ("'keepdim'", (bool, True))),
    )
    # a torch.Size and a named tuple are not plain tuples
    assert _items_key((torch.Size([2, 3]),), nk) == (("size", (2, 3)),)


def test_keyword_arguments_merge_only_when_equal():
    def body(g, x):
        sums = [
            g.call_function(torch.sum, (x,), {"dim": (0, 1), "keepdim": True}),
            g.call_function(torch.sum, (x,), {"dim": (0, 1), "keepdim": True}),
            g.call_function(torch.sum, (x,), {"dim": (0, 1), "keepdim": False}),
            g.call_function(torch.sum, (x,), {"dim": [0, 1], "keepdim": True}),
        ]
        acc = sums[0]
        for n in sums[1:]:
            acc = g.call_function(operator.add, (acc, n))
        return acc

    gm = build(body)
    report = cse(gm)
    assert report.counters == {"merged": 1}
    left = list(gm.graph.find_nodes(op="call_function", target=torch.sum))
    assert [n.name for n in left] == ["sum_1", "sum_3", "sum_4"]
    x = torch.arange(6.0).reshape(2, 3)
    assert torch.equal(gm(x), 2 * x.sum((0, 1), keepdim=True) + x.sum((0, 1)) + x.sum([0, 1], keepdim=True))


class _UnhashableStr(str):
    __hash__ = None  # type: ignore[assignment]


@pytest.mark.parametrize("unhashable", [False, True])
def test_an_argument_whose_key_cannot_be_hashed_is_not_merged(unhashable):
    # str arguments are keyed by value; a str subclass without a hash makes the key unhashable
    mode = _UnhashableStr("floor") if unhashable else "floor"
    gm = build(
        lambda g, x: g.call_function(
            operator.add,
            (
                g.call_function(torch.div, (x, 2), {"rounding_mode": mode}),
                g.call_function(torch.div, (x, 2), {"rounding_mode": mode}),
            ),
        )
    )
    report = cse(gm)
    assert report.counters == ({} if unhashable else {"merged": 1})
    assert len(list(gm.graph.find_nodes(op="call_function", target=torch.div))) == (2 if unhashable else 1)
    assert torch.equal(gm(torch.arange(5.0)), 2 * torch.div(torch.arange(5.0), 2, rounding_mode="floor"))


def test_a_returned_first_copy_takes_a_later_unreturned_one():
    # a = x + 1 is returned, b = x + 1 is not: b becomes a (only a returned node kept apart)
    gm = build(
        lambda g, x: (
            lambda a, b: (a, g.call_function(operator.mul, (b, 2)))
        )(g.call_function(operator.add, (x, 1)), g.call_function(operator.add, (x, 1)))
    )
    report = cse(gm)
    assert report.counters == {"merged": 1}
    x = torch.arange(3.0)
    a, b2 = gm(x)
    assert torch.equal(a, x + 1) and torch.equal(b2, (x + 1) * 2)
    (mul,) = gm.graph.find_nodes(op="call_function", target=operator.mul)
    assert mul.args[0].name == "add"
