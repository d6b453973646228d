"""Tests of the example plugin, through the installed entry point like any user would."""

from __future__ import annotations

import torch
from torch import nn

import fxpasses
from fxpasses.testing import assert_preserves_outputs


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.id = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.id(self.lin(x)).to(torch.float32).relu()


def test_passes_come_from_this_distribution() -> None:
    reg = fxpasses.Registry()
    for name in ("remove_identity", "count_ops"):
        info = reg.info(name)
        assert info.distribution == "fxpasses-example-passes"
        assert info.version == "0.1.0"


def test_remove_identity_preserves_outputs_and_removes_the_identity() -> None:
    results = assert_preserves_outputs(
        "remove_identity", Net(), [torch.randn(3, 4)], dialects=("symbolic_trace",)
    )
    gm, report = results["symbolic_trace"]
    assert [n.op for n in gm.graph.nodes].count("call_module") == 1  # only the Linear
    assert report["remove_identity"].counters == {"removed": 1}


def test_remove_identity_drops_to_same_dtype_only_when_known() -> None:
    gm = torch.fx.symbolic_trace(Net())
    fxpasses.Pipeline.from_string("remove_identity").run(gm, [torch.randn(3, 4)])
    assert any(n.target == "to" for n in gm.graph.nodes)  # dtype unknown: kept
    gm = torch.fx.symbolic_trace(Net())
    torch.fx.passes.shape_prop.ShapeProp(gm).propagate(torch.randn(3, 4))
    fxpasses.Pipeline.from_string("remove_identity").run(gm, [torch.randn(3, 4)])
    assert not any(n.target == "to" for n in gm.graph.nodes)


def test_count_ops_counts_by_op_name() -> None:
    gm = torch.fx.symbolic_trace(Net())
    report = fxpasses.Pipeline.from_string("count_ops{only=[linear,relu]}").run(gm)
    assert report["count_ops"].counters == {"linear": 1, "relu": 1}
    assert report["count_ops"].changed is False
