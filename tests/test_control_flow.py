"""Higher-order ops (``torch.cond``): built-in passes leave their branch subgraphs alone."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import fxpasses
from fxpasses.capture import capture
from fxpasses.job import DEFAULT_PRESET
from fxpasses.ops import op_name
from fxpasses.testing import assert_preserves_outputs

DEFAULT_PIPELINE = fxpasses.Registry().preset(DEFAULT_PRESET).pipeline


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class Branchy(nn.Module):
    """The same removable ops (eval dropout, ``x * 1``) outside and inside the branches."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        def true_fn(y):
            return self.drop(y * 1) - 0

        def false_fn(y):
            return (y * 1).relu()

        return torch.cond(x.sum() > 0, true_fn, false_fn, (self.drop(self.lin(x)) * 1,))


def branches(gm: torch.fx.GraphModule) -> dict[str, str]:
    """The code of every GraphModule a higher-order op of ``gm`` calls, by attribute name."""
    return {
        name: sub.code
        for name, sub in gm.named_children()
        if isinstance(sub, torch.fx.GraphModule)
    }


@pytest.mark.parametrize("dialect", ["export", "dynamo"])  # symbolic_trace cannot trace torch.cond
def test_default_pipeline_keeps_outputs_and_leaves_cond_branches_unchanged(dialect):
    x = torch.ones(2, 3)
    before = branches(capture(Branchy().eval(), [x], dialect).gm)
    assert len(before) == 2 and all("mul" in code for code in before.values())
    torch._dynamo.reset()
    results = assert_preserves_outputs(
        DEFAULT_PIPELINE, Branchy().eval(), [x], dialects=[dialect],
        check_inputs=[[-torch.ones(2, 3)]],  # the false branch
    )
    gm, report = results[dialect]
    # the top level was rewritten: its dropout and its x * 1 are gone ...
    top = [op_name(n, gm) for n in gm.graph.nodes if n.op == "call_function"]
    assert "dropout" not in top and "mul" not in top, top
    assert report["remove_dropout"].counters == {"removed": 1}
    # ... the branches, called by torch.ops.higher_order.cond, are not entered
    assert branches(gm) == before
    (cond,) = [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.cond]
    assert [a.target for a in cond.args[1:3]] == list(before)
