"""Numeric verification at other sizes for graphs with dynamic shapes (fxpasses.other_sizes).

A dynamic-shapes check found that a pass baking a size of the example inputs into the graph
(here: the sequence length written into a division) passed verify="numeric", which ran at the
example's sizes only, and the model then gave wrong values at every other size."""

from __future__ import annotations

import pytest
import torch
import torch.fx
from torch import nn
from torch.export import Dim

from fxpasses import GraphPass, PassFailedError, Pipeline
from fxpasses.other_sizes import other_sizes

from dynamic_models import MeanBySize, assert_compile_fails


class BakeLength(GraphPass):
    """Wrong on purpose: writes the example's value of the divisor (a symbolic size) into the
    division, through node.args (which ctx.replace_uses's own check does not see)."""

    name = "bake_length"

    def run(self, gm, ctx):
        for n in gm.graph.nodes:
            if n.op == "call_function" and "div" in str(n.target) and isinstance(n.args[1], torch.fx.Node):
                v = n.args[1].meta.get("val", n.args[1].meta.get("example_value"))
                n.args = (n.args[0], int(v.node.hint))
                return True
        return False


DIMS = ({0: Dim("b", min=2, max=64), 1: Dim("s", min=2, max=64)},)


def exported(model=None, x=None, dims=DIMS):
    x = torch.randn(2, 6, 8) if x is None else x
    return torch.export.export(model or MeanBySize(), (x,), dynamic_shapes=dims).module(), x


def dynamo_graph(model, x):
    """TorchDynamo's graph of ``model`` under dynamic=True and its inputs as the fxpasses
    backend gives them to a pipeline (symbolic sizes as their example values)."""
    from fxpasses.backend import _concrete

    seen = {}

    def keep(gm, inputs):
        seen["gm"], seen["inputs"] = gm, inputs
        return gm

    torch._dynamo.reset()
    torch.compile(model, backend=keep, dynamic=True)(x)
    torch._dynamo.reset()
    return seen["gm"], _concrete(seen["inputs"])


def test_a_size_baked_into_an_export_graph_fails_at_other_sizes_and_is_rolled_back():
    gm, x = exported()
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([BakeLength], verify="numeric").run(gm, [x])
    text = str(info.value)
    assert text.startswith(
        "pass 'bake_length' failed: verification failed: at other sizes the graph accepts (x.size(0) = 3 (2 in the "
        "example inputs), x.size(1) = 9 (6 in the example inputs)), where the example inputs' outputs match: output: max abs error"
    ), text
    assert "(a size of the example inputs made a constant?)" in text
    assert info.value.rolled_back and gm.code == code
    y = torch.randn(5, 3, 8)
    torch.testing.assert_close(gm(y), MeanBySize()(y))


def test_a_size_baked_into_a_torch_compile_dynamic_graph_fails():
    assert_compile_fails(
        BakeLength,
        r"at other sizes the graph accepts \(L_x_.size\(0\) = 3 \(2 in the example inputs\), L_x_.size\(1\) = 9 \(6 in "
        r"the example inputs\), L_x_.size\(2\) = 12 \(8 in the example inputs\)\)",
    )


def test_the_built_in_pipeline_passes_at_other_sizes_and_says_it_ran_there():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn, self.drop = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Dropout(0.1)

        def forward(self, x):
            y = self.drop(self.bn(self.conv(x))) * 1
            return y.mean((2, 3)) / x.shape[0]

    model = Block().eval()
    x = torch.randn(2, 3, 8, 8)
    gm, _ = exported(model, x, ({0: Dim("b", min=2, max=16), 2: Dim("h", min=4, max=32)},))
    report = Pipeline.from_preset("inference", verify="numeric").run(gm, [x])
    assert report["fuse_conv_bn"].counters == {"fused": 1}
    assert [n for n in report.notes if "other sizes" in n] == [
        "numeric verification ran each pass at other sizes the graph accepts too: x.size(0) = 3 (2 in the example inputs), "
        "x.size(2) = 12 (8 in the example inputs)"
    ]
    y = torch.randn(4, 3, 12, 8)
    torch.testing.assert_close(gm(y), model(y), atol=1e-5, rtol=1e-5)


def test_other_sizes_keep_the_ranges_and_solve_derived_sizes():
    """A range's upper end (a batch of 4 at most, the example's) makes the size go down; a
    size derived from a symbol (torch.export's 2 * Dim) is solved for it, the symbol moved."""

    class Pairs(nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0], -1, 2).sum(-1)

    x = torch.randn(4, 6)
    half = Dim("half", min=1, max=32)
    gm, _ = exported(Pairs(), x, ({0: Dim("b", min=2, max=4), 1: 2 * half},))
    found, why = other_sizes(gm, [x], None)
    # (the derived size said as the size it is, not by the shape environment's symbol: a new-user check)
    assert why is None and found.description() == "x.size(0) = 3 (4 in the example inputs), x.size(1) = 8 (6 in the example inputs)"
    assert [tuple(a.shape) for a in found.args] == [(3, 8)]
    assert torch.equal(found.args[0], torch.cat([x, x], 1)[:3, :8])  # the example's own values, cut and repeated
    report = Pipeline(["simplify_algebra"], verify="numeric").run(gm, [x])
    assert "x.size(1) = 8 (6 in the example inputs)" in report.notes[-1]
    grown = other_sizes(exported()[0], [torch.arange(96.0).reshape(2, 6, 8)], None)[0].args[0]
    assert tuple(grown.shape) == (3, 9, 8) and torch.equal(grown[2, :6], torch.arange(48.0).reshape(6, 8))  # repeated


def test_a_guard_of_the_shape_environment_chooses_the_step():
    """TorchDynamo's guard (an even length, from the model's own check) rules out the sizes
    that break it: every size found is even."""

    class Even(nn.Module):
        def forward(self, x):
            torch._check(x.shape[1] % 2 == 0)
            return x.reshape(x.shape[0], -1, 2).sum(-1)

    found, why = other_sizes(*dynamo_graph(Even(), torch.randn(4, 6)), None)
    assert why is None
    assert found.values == {"L_x_.size(0)": 8, "L_x_.size(1)": 12} and found.hints == {"L_x_.size(0)": 4, "L_x_.size(1)": 6}


def test_graphs_without_symbolic_sizes_get_no_second_input_set_and_no_note():
    x = torch.randn(2, 6, 8)
    assert other_sizes(torch.fx.symbolic_trace(MeanBySize()), [x], None) == (None, None)
    static = torch.export.export(MeanBySize(), (x,)).module()
    assert other_sizes(static, [x], None) == (None, None)
    report = Pipeline(["eliminate_dead_code"], verify="numeric").run(static, [x])
    assert not [n for n in report.notes if "sizes" in n]


def test_a_second_input_set_that_cannot_be_made_is_said_in_the_report():
    gm, x = exported()
    dynamo, inputs = dynamo_graph(MeanBySize(), x)  # (inputs taken positionally: its sizes, then x)
    assert other_sizes(dynamo, [*inputs, x], None) == (None, f"{len(inputs) + 1} inputs for {len(inputs)} placeholders")
    found, why = other_sizes(gm, [torch.randn(2, 6)], None)
    assert found is None and why == "input 0 is not a tensor of 3 dimensions as the graph records"


class Halves(nn.Module):
    def forward(self, x):
        h = x.shape[1] // 2
        return x[:, :h].sum(1) - x[:, h:].sum(1)


class MeanBy4(nn.Module):
    def forward(self, x):
        torch._check(x.shape[1] % 4 == 0)
        return x.reshape(x.shape[0], -1, 4).sum(1) / x.shape[1]


class BakeSlice(GraphPass):
    """Wrong on purpose: writes the example's value of each symbolic bound of the first slice."""

    name = "bake_slice"

    def run(self, gm, ctx):
        for n in gm.graph.nodes:
            if n.op == "call_function" and "slice" in str(n.target):
                sym = [a for a in n.args if isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.SymInt)]
                if sym:
                    n.args = tuple(int(a.meta["val"].node.hint) if a in sym else a for a in n.args)
                    return True
        return False


@pytest.mark.parametrize(
    "model, x, dims, bake, sizes",
    [
        # x.shape[1] // 2 is 4 at 8 and at 9: +1 alone let the baked slice through
        (Halves(), torch.randn(2, 8, 4), ({0: Dim("b", min=2, max=16), 1: Dim.AUTO},), BakeSlice, "x.size(1) = 12 (8 in"),
        # a multiple of 4: no step of at most 3 keeps it one (it said no other sizes existed)
        (MeanBy4(), torch.randn(2, 8), ({0: Dim("b", min=2, max=16), 1: Dim.AUTO},), BakeLength, "x.size(1) = 12 (8 in"),
        # batch at its lower end, length at its upper end: no one step moves both
        (MeanBySize(), torch.randn(2, 8), ({0: Dim("b", min=2, max=16), 1: Dim("s", min=2, max=8)},), BakeLength, "x.size(0) = 3 (2 in the example inputs), x.size(1) = 7 (8 in"),
    ],
    ids=["floor-division", "multiple-of-4", "range-ends"],
)
def test_sizes_one_step_missed_are_found(model, x, dims, bake, sizes):
    """A helper check's cases where the first version's one step for every symbol (+1, +2,
    -1, ...) found no other sizes, or sizes where the wrong graph gave the right outputs."""
    gm = torch.export.export(model, (x,), dynamic_shapes=dims).module()
    with pytest.raises(PassFailedError, match="at other sizes the graph accepts") as info:
        Pipeline([bake], verify="numeric").run(gm, [x])
    assert sizes in str(info.value), str(info.value)


def test_a_static_empty_input_does_not_stop_the_search():
    """An input with a static size 0 beside the dynamic ones ruled out every size (sizes of
    0 were refused for every dimension, the static ones too)."""

    class WithEmpty(nn.Module):
        def forward(self, x, extra):
            return x.sum(1) / x.shape[1] + extra.sum()

    x, extra = torch.randn(2, 6), torch.randn(2, 0)
    b = Dim("b", min=2, max=16)
    gm = torch.export.export(WithEmpty(), (x, extra), dynamic_shapes=({0: b, 1: Dim("s", min=2, max=64)}, {0: b})).module()
    found, why = other_sizes(gm, [x, extra], None)
    assert why is None and found.description() == "x.size(0) = 3 (2 in the example inputs), x.size(1) = 9 (6 in the example inputs)"
    assert [tuple(a.shape) for a in found.args] == [(3, 9), (3, 0)]


def test_bisect_judges_its_trials_at_other_sizes_too():
    """A failure at other sizes only: bisect (which the failure's note points to) judged its
    trials at the example's sizes, found them good and said "not reproducible (a pass that does
    not always do the same thing?)" (a new-user check)."""
    from fxpasses.bisect import bisect

    gm, x = exported()
    result = bisect(Pipeline([BakeLength], verify="numeric"), gm, [x])
    assert result.status == "found" and result.pass_name == "bake_length" and (result.first, result.last) == (1, 1)
    assert result.good.message == "outputs match (max abs error 0)"
    assert result.bad.message.startswith(
        "at other sizes the graph accepts (x.size(0) = 3 (2 in the example inputs), x.size(1) = 9 (6 in the example "
        "inputs)): output: max abs error"
    ), result.bad.message
