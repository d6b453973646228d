"""fxpasses.guards: when the shapes and dtypes recorded in node.meta hold for every input."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import fxpasses
from fxpasses.capture import capture
from fxpasses.effects import EffectAnalysis
from fxpasses.guards import facts_hold_for_every_input, input_facts, input_guard, inputs_reaching, unguardable_input, unguarded_inputs


class Two(nn.Module):
    def forward(self, x, n: int):
        return x.relu() * n


def _propagated(model, inputs):
    gm = torch.fx.symbolic_trace(model)
    fxpasses.Pipeline.from_string("propagate_shapes").run(gm, inputs)
    return gm


def test_symbolic_trace_facts_hold_only_once_every_tensor_input_is_checked():
    gm = _propagated(Two(), [torch.randn(2, 3), 4])
    x, n = list(gm.graph.nodes)[:2]
    assert input_facts(x) == ((2, 3), (3, 1), torch.float32, torch.device("cpu"))
    assert input_facts(n) is False  # a number: nothing to check
    assert unguarded_inputs(gm.graph) == [x]
    assert not facts_hold_for_every_input(gm)
    with gm.graph.inserting_after(n):
        gm.graph.call_function(input_guard, (x, "x", (2, 3), (3, 1), torch.float32, torch.device("cpu"), "a test"))
    gm.recompile()
    assert unguarded_inputs(gm.graph) == [] and facts_hold_for_every_input(gm)
    torch.testing.assert_close(gm(torch.ones(2, 3), 2), torch.full((2, 3), 2.0))
    with pytest.raises(AssertionError, match=r"^input 'x' is sizes \(3,\), strides \(1,\), torch.float32, on cpu; "):
        gm(torch.ones(3), 2)
    with pytest.raises(AssertionError, match=r"^input 'x' is of type int, not a tensor; the graph was specialised to sizes \(2, 3\)"):
        gm(5, 2)
    # an assert to the effect analysis and to torch's dead code elimination: kept, writes nothing
    guard = next(m for m in gm.graph.nodes if m.target is input_guard)
    eff = EffectAnalysis(gm).effects(guard)
    assert eff.kinds == frozenset({"assert"}) and eff.writes == () and not eff.state_writes
    assert guard.is_impure()  # torch.fx.node.has_side_effect
    gm.graph.eliminate_dead_code()
    assert guard in gm.graph.nodes


def test_no_facts_means_nothing_can_be_checked_and_guarded_captures_hold():
    gm = torch.fx.symbolic_trace(Two())
    assert input_facts(next(iter(gm.graph.nodes))) is None
    assert unguarded_inputs(gm.graph) is None and not facts_hold_for_every_input(gm)
    for dialect in ("dynamo", "export"):
        torch._dynamo.reset()
        cap = capture(nn.ReLU(), [torch.randn(2, 3)], dialect)
        assert facts_hold_for_every_input(cap.gm), dialect


class ListInput(nn.Module):
    def forward(self, x, extra, unused):
        return (x * 1).relu() + extra[0] * 1


def test_an_input_guards_cannot_check_is_named_with_why():
    """``simplify_algebra{specialize=true}`` after ``propagate_shapes`` kept every ``x * 1`` of a
    graph taking a list "as an input has no recorded shape and dtype (run propagate_shapes
    first)", naming neither the input nor the cause (an adversarial check). An unused input
    (None in the example) records nothing and needs no guard."""
    x, extra = torch.randn(2, 4), [torch.randn(2, 4)]
    gm = torch.fx.symbolic_trace(ListInput())
    assert unguardable_input(gm.graph)[1].startswith("input 'x' has no recorded shape and dtype")
    report = fxpasses.Pipeline.from_string("propagate_shapes,simplify_algebra{specialize=true}").run(gm, [x, extra, None])
    node, text = unguardable_input(gm.graph)
    assert node.name == "extra" and unguarded_inputs(gm.graph) is None
    assert report["simplify_algebra"].skipped == [
        (
            "mul_1",
            "x * 1 kept: a symbolic_trace graph takes inputs of any shape and dtype, and input 'extra' is a list in "
            "the example inputs, and input guards check tensors and numbers only (pass its tensors as separate "
            "inputs to specialise the graph)",
        )
    ]
    # what does not depend on the list is simplified under a guard of x (before, nothing was)
    assert report["simplify_algebra"].counters == {"simplified": 1, "input_guards": 1, "skipped": 1}
    assert unguarded_inputs(gm.graph, guardable_only=True) == []
    assert sorted(n.name for n in inputs_reaching([node])) == ["add", "extra", "getitem", "mul_1", "output"]
    torch.testing.assert_close(gm(x, extra, None), ListInput()(x, extra, None), atol=0, rtol=0)

    class NoList(nn.Module):
        def forward(self, x, unused):
            return (x * 1).relu()

    gm = torch.fx.symbolic_trace(NoList())
    report = fxpasses.Pipeline.from_string("propagate_shapes,simplify_algebra{specialize=true}").run(gm, [x, None])
    assert report["simplify_algebra"].counters == {"simplified": 1, "input_guards": 1}
    assert unguardable_input(gm.graph) is None and unguarded_inputs(gm.graph) == []
    assert torch.equal(gm(x, None), x.relu())
