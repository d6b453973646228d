"""fxpasses.effects: side effects, randomness, writes and aliasing in every dialect's spelling."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

import fxpasses
from fxpasses import effects
from fxpasses.capture import capture
from fxpasses.effects import (
    EffectAnalysis,
    has_side_effects,
    is_pure,
    is_random,
    may_alias_inputs,
    mutated_attributes,
    node_effects,
    written_inputs,
)

aten = torch.ops.aten


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()


def build(fn, root: nn.Module | None = None, n_inputs: int = 1) -> torch.fx.GraphModule:
    """A GraphModule whose graph is made by ``fn(graph, *placeholders)`` (returns the output)."""
    g = torch.fx.Graph()
    xs = [g.placeholder(f"x{i}") for i in range(n_inputs)]
    g.output(fn(g, *xs))
    return torch.fx.GraphModule(root if root is not None else nn.Module(), g)


def calls(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def only_call(gm: torch.fx.GraphModule, index: int = 0) -> torch.fx.Node:
    return calls(gm)[index]


def placeholder(gm: torch.fx.GraphModule, i: int = 0) -> torch.fx.Node:
    return list(gm.graph.find_nodes(op="placeholder"))[i]


def kinds(node: torch.fx.Node, gm: torch.fx.GraphModule) -> set[str]:
    return set(node_effects(node, gm).kinds)


# ------------------------------------------------------------------------------ in-place writes


WRITES_FIRST_INPUT = {
    "call_method add_": lambda g, x: g.call_method("add_", (x, 1)),
    "call_method __setitem__": lambda g, x: g.call_method("__setitem__", (x, 0, 1.0)),
    "call_method __iadd__": lambda g, x: g.call_method("__iadd__", (x, 1)),
    "call_method normal_": lambda g, x: g.call_method("normal_", (x,)),
    "torch.relu_": lambda g, x: g.call_function(torch.relu_, (x,)),
    "torch.Tensor.add_": lambda g, x: g.call_function(torch.Tensor.add_, (x, 1)),
    "F.relu_": lambda g, x: g.call_function(F.relu_, (x,)),
    "F.relu inplace kwarg": lambda g, x: g.call_function(F.relu, (x,), {"inplace": True}),
    "F.relu inplace positional": lambda g, x: g.call_function(F.relu, (x, True)),
    "F.dropout inplace": lambda g, x: g.call_function(F.dropout, (x,), {"training": False, "inplace": True}),
    "F.hardtanh inplace": lambda g, x: g.call_function(F.hardtanh, (x,), {"inplace": True}),
    "operator.iadd": lambda g, x: g.call_function(operator.iadd, (x, 1)),
    "operator.imul": lambda g, x: g.call_function(operator.imul, (x, 2)),
    "operator.setitem": lambda g, x: g.call_function(operator.setitem, (x, 0, 1.0)),
    "nn.init.normal_": lambda g, x: g.call_function(nn.init.normal_, (x,)),
    "aten.add_.Tensor": lambda g, x: g.call_function(aten.add_.Tensor, (x, x)),
    "aten.relu_.default": lambda g, x: g.call_function(aten.relu_.default, (x,)),
    "aten.index_put_.default": lambda g, x: g.call_function(aten.index_put_.default, (x, [None], x)),
    "aten.copy_.default": lambda g, x: g.call_function(aten.copy_.default, (x, 1.0)),
    "aten.add_ packet": lambda g, x: g.call_function(aten.add_, (x, 1)),
}


@pytest.mark.parametrize("case", list(WRITES_FIRST_INPUT))
def test_in_place_spellings_write_their_first_input(case):
    gm = build(WRITES_FIRST_INPUT[case])
    node, x = only_call(gm), placeholder(gm)
    assert has_side_effects(node, gm)
    assert not is_pure(node, gm)
    assert written_inputs(node, gm) == [x]
    assert "mutation" in kinds(node, gm)
    assert may_alias_inputs(node, gm)  # an in-place op returns its input


def test_out_kwarg_writes_the_out_tensor_only():
    for target in (torch.add, aten.add.out):
        gm = build(lambda g, x, y: g.call_function(target, (x, 1), {"out": y}), n_inputs=2)
        node = only_call(gm)
        assert written_inputs(node, gm) == [placeholder(gm, 1)], target
        assert kinds(node, gm) == {"mutation"}


def test_schema_writes_every_tensor_of_a_written_list():
    gm = build(lambda g, x, y: g.call_function(aten._foreach_add_.Scalar, ([x, y], 1.0)), n_inputs=2)
    assert written_inputs(only_call(gm), gm) == [placeholder(gm, 0), placeholder(gm, 1)]


def test_out_of_place_spellings_are_pure_and_fresh():
    cases = [
        lambda g, x: g.call_function(operator.add, (x, 1)),
        lambda g, x: g.call_function(torch.add, (x, 1)),
        lambda g, x: g.call_method("add", (x, 1)),
        lambda g, x: g.call_function(aten.add.Tensor, (x, x)),
        lambda g, x: g.call_function(F.relu, (x,)),
        lambda g, x: g.call_function(torch._C._nn.linear, (x, x)),
        lambda g, x: g.call_function(aten.matmul.default, (x, x)),
        lambda g, x: g.call_function(F.dropout, (x, 0.5, False)),
    ]
    for i, case in enumerate(cases):
        gm = build(case)
        node = only_call(gm)
        assert is_pure(node, gm), i
        assert not has_side_effects(node, gm), i
        assert written_inputs(node, gm) == [], i
    # dropout with training=False returns its input itself (the schema does not say so)
    assert may_alias_inputs(only_call(build(cases[-1])))
    assert not any(may_alias_inputs(only_call(gm := build(c)), gm) for c in cases[:-1])


def test_views_alias_their_input():
    for case in (
        lambda g, x: g.call_method("view", (x, -1)),
        lambda g, x: g.call_method("reshape", (x, -1)),
        lambda g, x: g.call_method("contiguous", (x,)),
        lambda g, x: g.call_function(aten.t.default, (x,)),
        lambda g, x: g.call_function(operator.getitem, (x, 0)),
        lambda g, x: g.call_function(torch.einsum, ("ij->ji", x)),
        lambda g, x: g.call_method("float", (x,)),
    ):
        gm = build(case)
        node = only_call(gm)
        assert may_alias_inputs(node, gm)
        assert is_pure(node, gm)


# ------------------------------------------------------------------------------ randomness

NATIVE_DROPOUT = aten.native_dropout.default
RANDOM = {
    "torch.rand": lambda g, x: g.call_function(torch.rand, (3,)),
    "torch.randn": lambda g, x: g.call_function(torch.randn, (3,)),
    "torch.randint": lambda g, x: g.call_function(torch.randint, (0, 5, (3,))),
    "torch.randperm": lambda g, x: g.call_function(torch.randperm, (5,)),
    "torch.rand_like": lambda g, x: g.call_function(torch.rand_like, (x,)),
    "torch.randn_like": lambda g, x: g.call_function(torch.randn_like, (x,)),
    "torch.bernoulli": lambda g, x: g.call_function(torch.bernoulli, (x,)),
    "torch.multinomial": lambda g, x: g.call_function(torch.multinomial, (x, 1)),
    "torch.normal": lambda g, x: g.call_function(torch.normal, (x, 1.0)),
    "torch.poisson": lambda g, x: g.call_function(torch.poisson, (x,)),
    "method bernoulli": lambda g, x: g.call_method("bernoulli", (x,)),
    "F.dropout default": lambda g, x: g.call_function(F.dropout, (x,)),
    "F.dropout training=True": lambda g, x: g.call_function(F.dropout, (x, 0.5, True)),
    "F.dropout2d": lambda g, x: g.call_function(F.dropout2d, (x,)),
    "F.alpha_dropout training": lambda g, x: g.call_function(F.alpha_dropout, (x, 0.5, True)),
    "F.rrelu training": lambda g, x: g.call_function(F.rrelu, (x,), {"training": True}),
    "F.gumbel_softmax": lambda g, x: g.call_function(F.gumbel_softmax, (x,)),
    "F.sdpa dropout": lambda g, x: g.call_function(
        F.scaled_dot_product_attention, (x, x, x), {"dropout_p": 0.1}
    ),
    "torch.dropout train": lambda g, x: g.call_function(torch.dropout, (x, 0.5, True)),
    "aten.rand.default": lambda g, x: g.call_function(aten.rand.default, ([3],)),
    "aten.randn_like.default": lambda g, x: g.call_function(aten.randn_like.default, (x,)),
    "aten.bernoulli.p": lambda g, x: g.call_function(aten.bernoulli.p, (x, 0.5)),
    "aten.dropout train=True": lambda g, x: g.call_function(aten.dropout.default, (x, 0.5, True)),
    "aten.native_dropout train=True": lambda g, x: g.call_function(NATIVE_DROPOUT, (x, 0.5, True)),
    "aten.native_dropout train=None": lambda g, x: g.call_function(NATIVE_DROPOUT, (x, 0.5, None)),
    "aten.uniform_": lambda g, x: g.call_function(aten.uniform_.default, (x,)),
}
NOT_RANDOM = {
    "F.dropout training=False": lambda g, x: g.call_function(F.dropout, (x, 0.5, False)),
    "F.dropout training kwarg False": lambda g, x: g.call_function(F.dropout, (x,), {"training": False}),
    "F.alpha_dropout default": lambda g, x: g.call_function(F.alpha_dropout, (x,)),
    "F.rrelu default": lambda g, x: g.call_function(F.rrelu, (x,)),
    "F.sdpa no dropout": lambda g, x: g.call_function(F.scaled_dot_product_attention, (x, x, x)),
    "torch.dropout train=False": lambda g, x: g.call_function(torch.dropout, (x, 0.5, False)),
    "aten.dropout train=False": lambda g, x: g.call_function(aten.dropout.default, (x, 0.5, False)),
    "aten.native_dropout train=False": lambda g, x: g.call_function(NATIVE_DROPOUT, (x, 0.5, False)),
    "torch.zeros": lambda g, x: g.call_function(torch.zeros, (3,)),
    "aten.empty": lambda g, x: g.call_function(aten.empty.memory_format, ([3],)),
}


@pytest.mark.parametrize("case", list(RANDOM))
def test_random_ops(case):
    gm = build(RANDOM[case])
    node = only_call(gm)
    assert is_random(node, gm)
    assert has_side_effects(node, gm)
    assert not is_pure(node, gm)


@pytest.mark.parametrize("case", list(NOT_RANDOM))
def test_not_random(case):
    gm = build(NOT_RANDOM[case])
    node = only_call(gm)
    assert not is_random(node, gm)
    assert is_pure(node, gm)


def test_dropout_whose_training_flag_is_a_graph_value_counts_as_random():
    gm = build(lambda g, x, t: g.call_function(F.dropout, (x, 0.5, t)), n_inputs=2)
    assert is_random(only_call(gm), gm)


# ------------------------------------------------------------------------------ other effects


def _assert_graph(target, with_msg):
    def fn(g, x):
        gt = g.call_function(aten.gt.Scalar, (x, -1e9))
        cond = g.call_function(aten.all.default, (gt,))
        g.call_function(target, (cond, "x too small") if with_msg else (cond,))
        return g.call_function(aten.add.Tensor, (x, 1))

    return fn


@pytest.mark.parametrize(
    "target,with_msg",
    [
        (torch._assert, True),
        (aten._assert_async.default, False),
        (aten._assert_async.msg, True),
        (aten._functional_assert_async.msg, True),
    ],
)
def test_asserts(target, with_msg):
    gm = build(_assert_graph(target, with_msg))
    node = only_call(gm, 2)
    assert kinds(node, gm) == {"assert"}
    assert written_inputs(node, gm) == []
    assert is_pure(only_call(gm, 0), gm) and is_pure(only_call(gm, 1), gm)  # the condition chain


def test_scalar_asserts_and_range_constraints():
    def fn(g, x):
        item = g.call_function(aten.item.default, (x,))
        g.call_function(aten._assert_scalar.default, (item, "msg"))
        g.call_function(aten.sym_constrain_range.default, (item,), {"min": 0, "max": 10})
        g.call_function(aten.sym_constrain_range_for_size.default, (item,))
        return x

    gm = build(fn)
    assert is_pure(only_call(gm, 0), gm)
    assert [kinds(n, gm) for n in calls(gm)[1:]] == [{"assert"}] * 3


def test_print_profiler_and_grad_mode():
    def fn(g, x):
        g.call_function(print, (x,))
        rec = g.call_function(torch.ops.profiler._record_function_enter_new.default, ("region",))
        g.call_function(torch.ops.profiler._record_function_exit._RecordFunction, (rec,))
        g.call_function(torch._C._set_grad_enabled, (False,))
        g.call_function(torch.autograd.grad_mode._enter_inference_mode, (True,))
        g.call_function(torch.manual_seed, (0,))
        return x

    gm = build(fn)
    assert [kinds(n, gm) for n in calls(gm)] == [
        {"io"},
        {"profiler"},
        {"profiler"},
        {"global_state"},
        {"global_state"},
        {"global_state"},
    ]
    assert all(written_inputs(n, gm) == [] for n in calls(gm))


def test_grad_mode_and_profiler_in_captured_graphs():
    class M(nn.Module):
        def forward(self, x):
            with torch.autograd.profiler.record_function("region"):
                y = x * 2
            with torch.no_grad():
                z = y + 1
            return z

    gm = capture(M(), (torch.ones(3),), "export").gm
    # export wraps the no_grad region in a higher-order op over a pure subgraph
    (hop,) = [n for n in calls(gm) if "wrap_with_set_grad_enabled" in str(n.target)]
    assert is_pure(hop, gm)
    gm = capture(M(), (torch.ones(3),), "dynamo").gm
    grad = [n for n in calls(gm) if n.target is torch._C._set_grad_enabled]
    assert len(grad) == 2 and all(kinds(n, gm) == {"global_state"} for n in grad)


def test_placeholders_output_and_get_attr():
    root = nn.Module()
    root.register_buffer("b", torch.ones(2))

    def fn(g, x):
        return g.call_function(operator.add, (x, g.get_attr("b")))

    gm = build(fn, root)
    ph, attr, add, out = list(gm.graph.nodes)
    assert kinds(ph, gm) == {"graph_io"} and kinds(out, gm) == {"graph_io"}
    assert not is_pure(ph, gm) and not is_pure(out, gm)
    assert is_pure(attr, gm) and is_pure(add, gm)


def test_unknown_functions_are_impure_and_write_every_input():
    def opaque(a, b):
        return a + b

    gm = build(lambda g, x, y: g.call_function(opaque, (x, y)), n_inputs=2)
    node = only_call(gm)
    assert kinds(node, gm) == {"unknown"}
    assert written_inputs(node, gm) == [placeholder(gm, 0), placeholder(gm, 1)]
    try:
        effects.register_pure_function(opaque)
        assert is_pure(node, gm) and not may_alias_inputs(node, gm)
        effects.register_side_effect(opaque, "io")
        assert kinds(node, gm) == {"io"}
    finally:
        effects._user_pure.discard(opaque)
        effects._user_effects.pop(opaque, None)


def test_methods_that_are_not_tensor_methods_are_unknown():
    gm = build(lambda g, x: g.call_method("append", (x, 1)))
    assert kinds(only_call(gm), gm) == {"unknown"}


def test_torch_side_effectful_registry_is_honoured():
    def logger(x):
        return x

    torch.fx.node.has_side_effect(logger)
    try:
        gm = build(lambda g, x: g.call_function(logger, (x,)))
        assert kinds(only_call(gm), gm) == {"declared"}
    finally:
        torch.fx.node._side_effectful_functions.discard(logger)


def test_stricter_than_torch_is_impure():
    # torch's Node.is_impure() calls in-place call_method nodes and GraphModule submodules with
    # in-place bodies pure; both are side effects here
    gm = build(lambda g, x: g.call_method("add_", (x, 1)))
    node = only_call(gm)
    assert not node.is_impure()
    assert has_side_effects(node, gm)


# ------------------------------------------------------------------------------ modules


class AddOneInPlace(nn.Module):
    def forward(self, x):
        x.add_(1)
        return x


class BufferTracer(torch.fx.Tracer):
    proxy_buffer_attributes = True  # symbolic_trace's default runs buffer writes at trace time


class LeafTracer(torch.fx.Tracer):
    def __init__(self, *leaves: type) -> None:
        super().__init__()
        self.leaves = leaves

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return isinstance(m, self.leaves) or super().is_leaf_module(m, qualname)


def call_module_node(module: nn.Module) -> tuple[torch.fx.Node, torch.fx.GraphModule]:
    root = nn.Module()
    root.m = module
    gm = build(lambda g, x: g.call_module("m", (x,)), root)
    return only_call(gm), gm


@pytest.mark.parametrize(
    "module",
    [nn.Linear(3, 3), nn.Conv2d(3, 3, 1), nn.ReLU(), nn.Dropout().eval(), nn.BatchNorm1d(3).eval(),
     nn.Sequential(nn.Linear(3, 3), nn.GELU()), nn.LayerNorm(3), nn.Embedding(4, 3),
     nn.MultiheadAttention(4, 2).eval(), nn.BatchNorm1d(3, track_running_stats=False)],
    ids=lambda m: type(m).__name__,
)
def test_standard_modules_are_pure(module):
    node, gm = call_module_node(module)
    assert is_pure(node, gm)


def test_in_place_modules_write_their_input():
    for module in (nn.ReLU(inplace=True), nn.Hardtanh(inplace=True), nn.Dropout(inplace=True).eval(),
                   nn.Sequential(nn.ReLU(inplace=True))):
        node, gm = call_module_node(module)
        assert kinds(node, gm) == {"mutation"}, module
        assert written_inputs(node, gm) == [placeholder(gm)]


def test_training_mode_modules():
    node, gm = call_module_node(nn.Dropout(0.1))
    assert kinds(node, gm) == {"random"}
    node, gm = call_module_node(nn.RReLU())
    assert kinds(node, gm) == {"random"}
    node, gm = call_module_node(nn.TransformerEncoderLayer(4, 2, 8))  # dropout children
    assert "random" in kinds(node, gm)
    node, gm = call_module_node(nn.BatchNorm1d(3))
    assert kinds(node, gm) == {"mutation"} and written_inputs(node, gm) == []
    assert node_effects(node, gm).state_writes == {"m.running_mean", "m.running_var", "m.num_batches_tracked"}
    assert mutated_attributes(gm) == {"m.running_mean", "m.running_var", "m.num_batches_tracked"}
    node, gm = call_module_node(nn.Embedding(4, 3, max_norm=1.0))
    assert kinds(node, gm) == {"mutation"} and mutated_attributes(gm) == {"m.weight"}


def test_unknown_leaf_modules_hooks_and_is_impure_flag():
    class Custom(nn.Module):
        def forward(self, x):
            return x * 2

    node, gm = call_module_node(Custom())
    assert kinds(node, gm) == {"unknown"}
    assert written_inputs(node, gm) == [placeholder(gm)]
    try:
        effects.register_pure_module(Custom)
        assert is_pure(*call_module_node(Custom()))
    finally:
        effects._user_pure_modules.discard(Custom)
    hooked = nn.Linear(3, 3)
    hooked.register_forward_hook(lambda m, i, o: None)
    assert kinds(*call_module_node(hooked)) == {"unknown"}
    backward_hooked = nn.Linear(3, 3)  # (a backward hook may change the gradients: was "pure")
    backward_hooked.register_full_backward_hook(lambda m, gi, go: None)
    node, gm = call_module_node(backward_hooked)
    assert kinds(node, gm) == {"unknown"} and node_effects(node, gm).reason == "m: Linear has backward hooks"
    flagged = nn.Linear(3, 3)
    flagged._is_impure = True
    assert kinds(*call_module_node(flagged)) == {"unknown"}


def test_graph_module_submodule_has_the_effects_of_its_body():
    impure = torch.fx.symbolic_trace(AddOneInPlace())
    node, gm = call_module_node(impure)
    assert not node.is_impure()  # torch: GraphModule submodules are pure
    assert kinds(node, gm) == {"mutation"}
    assert written_inputs(node, gm) == [placeholder(gm)]

    class Pure(nn.Module):
        def forward(self, x):
            return (x * 2).relu()

    node, gm = call_module_node(torch.fx.symbolic_trace(Pure()))
    assert is_pure(node, gm)

    class WritesOwnBuffer(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(1))

        def forward(self, x):
            self.count.add_(1)
            return x + 1

    m = WritesOwnBuffer()
    node, gm = call_module_node(torch.fx.GraphModule(m, BufferTracer().trace(m)))
    assert kinds(node, gm) == {"mutation"}
    assert written_inputs(node, gm) == []  # it writes its own state, not its input
    assert mutated_attributes(gm) == {"m.count"}


# ------------------------------------------------------------------------------ graph level


def test_mutated_attributes_through_views_and_shared_storage():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("a", torch.zeros(8))
            self.register_buffer("b", torch.zeros(4))
            self.register_buffer("c", torch.zeros(4))
            self.register_buffer("a_view", self.a[4:])  # shares a's storage

        def forward(self, x):
            self.a.view(2, 4)[0].add_(1)  # written through two views
            return x + self.b + self.c + self.a_view

    m = M()
    gm = torch.fx.GraphModule(m, BufferTracer().trace(m))
    assert mutated_attributes(gm) == {"a", "a_view"}
    export_gm = capture(M(), (torch.zeros(4),), "export").gm
    assert {"a", "a_view"} <= mutated_attributes(export_gm)
    assert not {"b", "c"} & mutated_attributes(export_gm)


def test_is_written_follows_aliases_and_inputs_may_alias_each_other():
    def fn(g, x, y):
        v = g.call_method("view", (x, -1))
        fresh = g.call_function(operator.mul, (y, 2))
        other = g.call_function(operator.mul, (y, 3))
        g.call_method("add_", (v, 1))
        g.call_method("mul_", (fresh, 2))
        return (other,)

    gm = build(fn, n_inputs=2)
    a = EffectAnalysis(gm)
    x, y, v, fresh, other = list(gm.graph.nodes)[:5]
    assert a.is_written(x) and a.is_written(v)
    assert a.is_written(y)  # placeholders may be the same tensor as x
    assert a.is_written(fresh)
    assert not a.is_written(other)
    assert a.alias_roots(x) <= a.alias_roots(v)
    assert a.alias_roots(other) == frozenset({other})


def test_may_alias_is_fresh_and_mark_reaches_output():
    def fn(g, x):
        e = g.call_function(torch.exp, (x,))
        v = g.call_method("view", (e, -1))
        other = g.call_function(torch.exp, (x,))
        return (g.call_function(operator.mul, (other, 2)),)

    gm = build(fn)
    a = EffectAnalysis(gm)
    x, e, v, other, mul = list(gm.graph.nodes)[:5]
    assert a.may_alias(e, v) and a.may_alias(v, e) and not a.may_alias(e, other)
    assert not a.may_alias(x, e)
    assert a.is_fresh(e) and a.is_fresh(other) and not a.is_fresh(v) and not a.is_fresh(x)
    assert a.reaches_output(mul) and not a.reaches_output(e) and not a.reaches_output(v)
    # a pass rewires the output to e (and keeps asking): e and its view now reach the output
    a.mark_reaches_output(e)
    assert a.reaches_output(e) and a.reaches_output(v) and not a.reaches_output(other)


def test_dialect_spellings_of_one_module():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("steps", torch.zeros(1))
            self.act = nn.ReLU(inplace=True)

        def forward(self, x):
            y = x * 1
            y += 1
            F.relu(y, inplace=True)
            torch.relu_(y)
            self.act(y)
            self.steps.add_(1)
            return y + self.steps, F.dropout(x, 0.5, True), F.dropout(x, 0.5, False)

    for dialect in ("dynamo", "export"):
        gm = capture(M(), (torch.zeros(3),), dialect).gm
        a = EffectAnalysis(gm)
        writes = [n for n in calls(gm) if "mutation" in a.effects(n).kinds]
        random = [n for n in calls(gm) if a.is_random(n)]
        assert len(writes) == 5, (dialect, [n.format_node() for n in writes])
        assert len(random) == 1, dialect
    assert mutated_attributes(gm) == {"steps"}  # export: buffers are get_attr


def test_readers_of_global_state_are_not_pure_but_have_no_side_effect():
    gm = build(lambda g, x: g.call_function(torch.is_grad_enabled, ()))
    node = only_call(gm)
    assert kinds(node, gm) == {"reads_state"}
    assert not is_pure(node, gm) and not has_side_effects(node, gm)


def test_large_alias_sets_collapse_to_any_and_stay_conservative():
    def fn(g, x):
        parts = [g.call_function(operator.mul, (x, float(i))) for i in range(70)]
        together = g.call_function(torch.broadcast_tensors, tuple(parts))  # may alias all 70
        unrelated = g.call_function(operator.mul, (x, 100.0))
        g.call_method("add_", (g.call_function(operator.getitem, (together, 0)), 1))
        return (unrelated,)

    gm = build(fn)
    a = EffectAnalysis(gm)
    together = next(n for n in gm.graph.nodes if n.target is torch.broadcast_tensors)
    unrelated = next(n for n in gm.graph.nodes if n.args[1:] == (100.0,))
    assert len(a.alias_roots(together)) == 1 and a.alias_roots(together) != a.alias_roots(unrelated)
    assert a.is_written(unrelated)  # a write through "any" may have hit it
    assert a.reaches_output(unrelated) and a.reaches_output(together)  # "any" overlaps the output


class _Views(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.randn(4, 3))
        self.lin = nn.Linear(3, 3)

    def forward(self, x, y):
        a = x.view(-1)
        b = a[1:]
        c = torch.relu(self.lin(y))
        d = c.t()
        e = self.table[0]
        f = (b * 2).reshape(-1, 1)
        return d, e.unsqueeze(0), f, x, torch.cat([c, y]), c


def _alias_graph(model: str, dialect: str):
    from fxpasses._example import convnet

    if model == "views":
        return capture(_Views(), [torch.randn(2, 4), torch.randn(2, 3)], dialect).gm
    return capture(convnet(), [torch.randn(1, 3, 32, 32)], dialect).gm


@pytest.mark.parametrize("model", ["views", "convnet"])
@pytest.mark.parametrize("dialect", ["symbolic_trace", "export"])
def test_roots_found_on_demand_equal_the_sweep(model, dialect):
    """With nothing written, alias roots and reaches_output come from a walk back along alias
    edges instead of the whole-graph sweep: the answers must be the sweep's."""
    gm = _alias_graph(model, dialect)
    lazy, swept = EffectAnalysis(gm), EffectAnalysis(gm)
    assert not lazy.has_writes()
    swept._sweep()
    nodes = list(gm.graph.nodes)
    for n in reversed(nodes):  # asked in an order unlike the sweep's
        assert lazy.alias_roots(n) == swept.alias_roots(n), n.name
        assert lazy.reaches_output(n) == swept.reaches_output(n), n.name
        assert lazy.is_fresh(n) == swept.is_fresh(n), n.name
    assert lazy._roots is None  # the sweep never ran
    returned = {n.name for n in nodes if lazy.reaches_output(n)}
    assert returned  # placeholders returned or viewed into the output reach it
    out = next(n for n in nodes if n.op == "output")
    assert all(lazy.reaches_output(a) for a in out.all_input_nodes)


def test_write_questions_without_writes_skip_the_sweep():
    gm = _alias_graph("views", "symbolic_trace")
    fx = EffectAnalysis(gm)
    assert fx.mutated_attributes() == set()
    assert not any(fx.is_written(n) for n in gm.graph.nodes)
    assert fx._roots is None

    class Writes(nn.Module):
        def forward(self, x):
            v = x.view(-1)
            v.add_(1)
            return x * 2

    gm = torch.fx.symbolic_trace(Writes())
    fx = EffectAnalysis(gm)
    assert fx.has_writes()
    x = next(iter(gm.graph.find_nodes(op="placeholder")))
    assert fx.is_written(x)  # through the view


@pytest.mark.parametrize(
    "op, args",
    [
        (torch.ops.aten.unbind.int, (0,)),
        (torch.ops.aten.split.Tensor, (1,)),
        (torch.ops.aten.chunk.default, (2,)),
        (torch.ops.aten.split_with_sizes.default, ([1, 1],)),
    ],
)
def test_aten_ops_returning_lists_of_views_alias_their_input(op, args):
    """``Tensor(a)[]`` returns: Python shows their alias_info with empty sets."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(torch.ops.aten.add.Tensor, (x, 0))
    parts = g.call_function(op, (y, *args))
    first = g.call_function(operator.getitem, (parts, 0))
    g.output((first,))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    fx = EffectAnalysis(gm)
    assert fx.aliased_inputs(parts) == (y,)
    assert fx.reaches_output(y)
    import fxpasses

    report = fxpasses.Pipeline(["propagate_shapes", "simplify_algebra"]).run(gm, [torch.zeros(2, 2, dtype=torch.int64)])
    assert report.passes[-1].counters.get("simplified", 0) == 0  # x + 0 kept: it is returned
    x_in = torch.zeros(2, 2, dtype=torch.int64)
    out = gm(x_in)[0]
    assert out.untyped_storage().data_ptr() != x_in.untyped_storage().data_ptr()


# ------------------------------------------------------------------ composite ops and their tags
#
# ATen ops tagged ``maybe_aliasing_or_mutating`` (CompositeImplicitAutograd kernels whose schema
# hides that they may return an input or write one) and the untagged composites known to
# return an input: fxpasses.effects answers each from one table. Every answer is checked here
# against eager: the op's graph is run, with an in-place write on its result, and the input is
# written exactly when the analysis says it may be.


class _Stats(nn.Module):
    """The tensors a batch norm reads, as module buffers (``get_attr`` nodes, like export's)."""

    def __init__(self) -> None:
        super().__init__()
        for name, t in (("w", torch.rand(3) + 0.5), ("b", torch.randn(3)), ("rm", torch.randn(3)),
                        ("rv", torch.rand(3) + 0.5)):
            self.register_buffer(name, t)


def _bn_args(g, x, training):
    w, b, rm, rv = (g.get_attr(n) for n in ("w", "b", "rm", "rv"))
    return (x, w, b, rm, rv, training, 0.1, 1e-5, False)


#: id -> (build(graph, x) -> node whose result (or first result) is written, input factory,
#: whether the result may alias the input). Inputs are chosen so that an op that may alias does
#: alias in eager (e.g. dropout with train=False returns its input itself).
COMPOSITE_CASES = {
    # tagged maybe_aliasing_or_mutating: fresh results
    "batch_norm eval": (
        lambda g, x: g.call_function(aten.batch_norm.default, _bn_args(g, x, False)), None, False),
    "batch_norm train": (
        lambda g, x: g.call_function(aten.batch_norm.default, _bn_args(g, x, True)), None, False),
    "_batch_norm_impl_index eval": (
        lambda g, x: g.call_function(aten._batch_norm_impl_index.default, _bn_args(g, x, False)), None, False),
    "_batch_norm_impl_index train": (
        lambda g, x: g.call_function(aten._batch_norm_impl_index.default, _bn_args(g, x, True)), None, False),
    # tagged: may return the input itself or a view of it
    "dropout train=False": (lambda g, x: g.call_function(aten.dropout.default, (x, 0.5, False)), None, True),
    "dropout p=0": (lambda g, x: g.call_function(aten.dropout.default, (x, 0.0, True)), None, True),
    "feature_dropout train=False": (
        lambda g, x: g.call_function(aten.feature_dropout.default, (x, 0.5, False)), None, True),
    "alpha_dropout train=False": (
        lambda g, x: g.call_function(aten.alpha_dropout.default, (x, 0.5, False)), None, True),
    "feature_alpha_dropout train=False": (
        lambda g, x: g.call_function(aten.feature_alpha_dropout.default, (x, 0.5, False)), None, True),
    "atleast_1d": (lambda g, x: g.call_function(aten.atleast_1d.default, (x,)), None, True),
    "atleast_2d": (lambda g, x: g.call_function(aten.atleast_2d.default, (x,)), lambda: torch.randn(3), True),
    "atleast_3d": (lambda g, x: g.call_function(aten.atleast_3d.default, (x,)), None, True),
    "cartesian_prod one tensor": (
        lambda g, x: g.call_function(aten.cartesian_prod.default, ([x],)), lambda: torch.randn(3), True),
    "conj_physical real": (lambda g, x: g.call_function(aten.conj_physical.default, (x,)), None, True),
    "unsafe_chunk": (lambda g, x: g.call_function(aten.unsafe_chunk.default, (x, 2, 1)), None, True),
    # not tagged, schema says fresh, but the kernel may return the input or a view of it
    "type_as": (lambda g, x: g.call_function(aten.type_as.default, (x, x)), None, True),
    "einsum permutation": (
        lambda g, x: g.call_function(aten.einsum.default, ("abcd->dcba", [x])), None, True),
    "broadcast_tensors": (lambda g, x: g.call_function(aten.broadcast_tensors.default, ([x],)), None, True),
    "meshgrid": (lambda g, x: g.call_function(aten.meshgrid.default, ([x],)), lambda: torch.randn(3), True),
    "atleast_1d.Sequence": (lambda g, x: g.call_function(aten.atleast_1d.Sequence, ([x],)), None, True),
    "sum_to_size": (lambda g, x: g.call_function(aten.sum_to_size.default, (x, [2, 3, 4, 4])), None, True),
    "to_dense strided": (lambda g, x: g.call_function(aten.to_dense.default, (x,)), None, True),
    "unsafe_split": (lambda g, x: g.call_function(aten.unsafe_split.Tensor, (x, 1)), None, True),
    "unsafe_split_with_sizes": (
        lambda g, x: g.call_function(aten.unsafe_split_with_sizes.default, (x, [1, 1])), None, True),
}


def _composite_graph(case: str) -> tuple[torch.fx.GraphModule, torch.fx.Node]:
    make, _, _ = COMPOSITE_CASES[case]
    g = torch.fx.Graph()
    x = g.placeholder("x")
    node = make(g, x)
    result = node
    if isinstance(node.target, torch._ops.OpOverload) and not (
        len(node.target._schema.returns) == 1 and str(node.target._schema.returns[0].type) == "Tensor"
    ):  # a list or tuple: write its first tensor
        result = g.call_function(operator.getitem, (node, 0))
    g.call_function(aten.add_.Tensor, (result, 1))
    g.output((g.call_function(aten.mul.Tensor, (x, 1)),))
    return torch.fx.GraphModule(_Stats(), g), node


@pytest.mark.parametrize("case", list(COMPOSITE_CASES))
def test_composite_op_results_alias_their_inputs_as_in_eager(case):
    _, factory, may_alias = COMPOSITE_CASES[case]
    gm, node = _composite_graph(case)
    fx = EffectAnalysis(gm)
    x = placeholder(gm)
    assert bool(fx.aliased_inputs(node)) == may_alias
    assert fx.is_written(x) == may_alias  # the write on the result reaches the input
    # eager: the input is written through the result exactly when the op returned an alias
    inp = factory() if factory else torch.randn(2, 3, 4, 4)
    before = inp.clone()
    gm(inp)
    assert (not torch.equal(inp, before)) == may_alias
    # the tensors a batch norm reads are never written through its output; its running
    # statistics are written in training mode, by the op itself (not through the result)
    training = "batch_norm" in case and "train" in case
    assert fx.mutated_attributes() == ({"rm", "rv"} if training else set())
    if "batch_norm" in case:
        assert fx.written_inputs(node) == ([n for n in node.all_input_nodes if n.target in ("rm", "rv")]
                                           if training else [])


def test_every_tagged_aten_op_has_an_answer_in_the_table():
    """The table must list every ATen op torch tags ``maybe_aliasing_or_mutating``: a new one
    (another torch) is treated as aliasing and writing all its inputs until it is read and added."""
    tagged = set()
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::"):
            continue
        packet = getattr(aten, schema.name[len("aten::"):], None)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue
        for overload in packet.overloads():
            if torch.Tag.maybe_aliasing_or_mutating in getattr(packet, overload).tags:
                tagged.add(packet.__name__)
    assert tagged and tagged <= set(effects._COMPOSITE_RESULT_ALIASES), sorted(
        tagged - set(effects._COMPOSITE_RESULT_ALIASES)
    )
    # and every tagged op listed has a case above
    assert {name for name in tagged if not any(c.startswith(name) for c in COMPOSITE_CASES)} == set()


_tag_lib = torch.library.Library("fxpasses_test_tags", "DEF")
_tag_lib.define("mystery(Tensor x, Tensor y) -> Tensor", tags=(torch.Tag.maybe_aliasing_or_mutating,))


def test_a_tagged_op_missing_from_the_table_may_alias_and_write_every_input():
    mystery = torch.ops.fxpasses_test_tags.mystery.default
    gm = build(lambda g, x, y: g.call_function(mystery, (x, y)), n_inputs=2)
    node = only_call(gm)
    assert kinds(node, gm) == {"unknown"}
    assert written_inputs(node, gm) == [placeholder(gm, 0), placeholder(gm, 1)]
    assert EffectAnalysis(gm).aliased_inputs(node) == (placeholder(gm, 0), placeholder(gm, 1))


class ResidualBlock(nn.Module):
    """torchvision's BasicBlock: the second batch norm's output is updated in place."""

    def __init__(self, c: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return torch.relu(out)


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_the_in_place_residual_add_writes_the_batch_norm_output_only(dialect):
    x = torch.randn(2, 4, 5, 5)
    gm = capture(ResidualBlock().eval(), (x,), dialect).gm
    fx = EffectAnalysis(gm)
    bns = [n for n in calls(gm) if "batch_norm" in str(n.target) or n.target in ("bn1", "bn2")]
    assert len(bns) == 2
    assert all(fx.aliased_inputs(n) == () for n in bns)  # a fresh result
    # symbolic_trace records ``out += x`` as ``out + x`` (a Proxy has no ``__iadd__``)
    assert fx.is_written(bns[1]) == (dialect != "symbolic_trace") and not fx.is_written(bns[0])
    assert fx.mutated_attributes() == set()
    # dynamo: the input and the parameters are placeholders, which may alias one another
    assert not any(fx.is_written(p) for p in gm.graph.find_nodes(op="placeholder"))


def test_the_residual_block_in_training_writes_the_running_statistics_not_the_weights():
    gm = capture(ResidualBlock().train(), (torch.randn(2, 4, 5, 5),), "export").gm
    stats = {f"bn{i}.{s}" for i in (1, 2) for s in ("running_mean", "running_var", "num_batches_tracked")}
    assert EffectAnalysis(gm).mutated_attributes() == stats


class _StatsNet(torch.nn.Module):
    """Modules whose paths share prefixes that are not module boundaries (`b` and `bb`)."""

    def __init__(self):
        super().__init__()
        self.b = torch.nn.Sequential(torch.nn.BatchNorm1d(3))
        self.bb = torch.nn.Linear(3, 3)
        self.c = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.c(self.bb(self.b(x)))


def test_reads_written_state_answers_by_module_path():
    """Which calls read state the graph writes: the module holding a written name, and every
    module above it, and no other (`bb` is not inside `b`)."""
    gm = torch.fx.symbolic_trace(_StatsNet().train())
    analysis = EffectAnalysis(gm, modules_may_train=True)
    assert analysis.mutated_attributes() == {"b.0.running_mean", "b.0.running_var", "b.0.num_batches_tracked"}
    calls = {n.target: analysis.reads_written_state(n) for n in gm.graph.nodes if n.op == "call_module"}
    assert calls == {"b.0": True, "bb": False, "c": False}
    fake = type("N", (), {"op": "call_module"})
    for target, expected in (("b", True), ("b.0", True), ("b.0.running_mean", False), ("bb", False), ("", False)):
        node = fake()
        node.target = target
        assert analysis.reads_written_state(node) is expected, target
    gm.eval()  # judged by its mode now: an eval-mode batch norm writes nothing
    assert not any(EffectAnalysis(gm).reads_written_state(n) for n in gm.graph.nodes if n.op == "call_module")


def test_the_training_presets_cse_does_work_linear_in_the_batch_norm_calls():
    """`reads_written_state` scanned every written name for each module call: with three
    written statistics per batch norm, the training preset's CSE made 6 n^2 calls on a net of
    n conv-bn-relu blocks (8.9 s of a 9.1 s pipeline at 16k nodes: a big-graph sweep).
    Counted, not timed: the Python calls of the pass grow as the blocks do."""
    import cProfile
    import pstats

    class Net(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.blocks = torch.nn.ModuleList(
                torch.nn.Sequential(torch.nn.Conv2d(2, 2, 3, padding=1), torch.nn.BatchNorm2d(2), torch.nn.ReLU())
                for _ in range(n)
            )

        def forward(self, x):
            for b in self.blocks:
                x = x + b(x)
            return x

    calls = {}
    for n in (50, 200):
        gm = torch.fx.symbolic_trace(Net(n).eval())
        pipe = fxpasses.Pipeline([("eliminate_common_subexpressions", {"modules_may_train": True})], verify="none")
        profile = cProfile.Profile()
        profile.enable()
        pipe.run(gm)
        profile.disable()
        calls[n] = sum(v[1] for v in pstats.Stats(profile).stats.values())
    assert calls[200] < 5 * calls[50], calls
