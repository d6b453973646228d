"""Tests of the example plugin, through the installed entry point like any user would.

They use fxpasses' pytest plugin (installed with fxpasses, entry point ``pytest11``): the
``fxpasses_registry`` / ``fxpasses_run`` fixtures and ``assert_preserves_outputs``.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fxpasses.pytest_plugin import assert_preserves_outputs


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.id = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.id(self.lin(x)).to(torch.float32).relu()


def test_passes_come_from_this_distribution(fxpasses_registry) -> None:
    for name in ("remove_identity", "count_ops"):
        info = fxpasses_registry.info(name)
        assert info.distribution == "fxpasses-example-passes"
        assert info.version == "0.1.0"


def test_remove_identity_preserves_outputs_in_every_dialect() -> None:
    results = assert_preserves_outputs("remove_identity", Net(), [torch.randn(3, 4)])
    gm, report = results["symbolic_trace"]
    assert [n.op for n in gm.graph.nodes].count("call_module") == 1  # only the Linear
    assert [n.target for n in gm.graph.nodes].count("to") == 1  # dtype unknown: kept
    assert report["remove_identity"].counters == {"removed": 1}
    # TorchDynamo and torch.export inline nn.Identity; they record dtypes, so the .to goes
    for dialect in ("dynamo", "export"):
        gm, report = results[dialect]
        assert report["remove_identity"].counters == {"removed": 1}
        assert not [n for n in gm.graph.nodes if str(n.target) in ("to", "aten.to.dtype")]


def test_remove_identity_drops_to_same_dtype_only_when_known(fxpasses_run) -> None:
    gm = torch.fx.symbolic_trace(Net())
    fxpasses_run(gm, "remove_identity", [torch.randn(3, 4)])
    assert any(n.target == "to" for n in gm.graph.nodes)  # dtype unknown: kept
    gm = torch.fx.symbolic_trace(Net())
    report = fxpasses_run(gm, "propagate_shapes,remove_identity{specialize=true}", [torch.randn(3, 4)])
    assert not any(n.target == "to" for n in gm.graph.nodes)
    assert report["remove_identity"].counters == {"input_guards": 1, "removed": 2}


class ToFloat(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.float32) * 2


def test_remove_identity_keeps_a_dtype_that_holds_for_the_example_only(fxpasses_run) -> None:
    """On a symbolic_trace graph the recorded dtype is the example's: the .to was removed for
    a float32 example, and a float64 input then gave float64 where the model gives float32,
    without an error (a dynamic-shapes check). It is kept, saying why; with specialize=true it
    goes and a check of the input is added, which another dtype fails."""
    m = ToFloat()
    gm = torch.fx.symbolic_trace(m)
    report = fxpasses_run(gm, "propagate_shapes,remove_identity", [torch.randn(4, 3)])
    assert [n.target for n in gm.graph.nodes].count("to") == 1
    assert report["remove_identity"].skipped == [
        (
            "to",
            "its dtype is the example inputs', and a symbolic_trace graph takes inputs of any dtype "
            "(option specialize=true removes it and adds a check of each input)",
        )
    ]
    x = torch.randn(4, 3, dtype=torch.float64)
    assert gm(x).dtype == m(x).dtype == torch.float32
    gm = torch.fx.symbolic_trace(m)
    report = fxpasses_run(gm, "propagate_shapes,remove_identity{specialize=true}", [torch.randn(4, 3)])
    assert report["remove_identity"].counters == {"input_guards": 1, "removed": 1}
    with pytest.raises(AssertionError, match="input 'x' is sizes \\(4, 3\\), strides \\(3, 1\\), torch.float64"):
        gm(x)
    # TorchDynamo and torch.export graphs check (or are traced for) their inputs' dtypes: removed there
    for gm2 in (torch.export.export(m, (torch.randn(4, 3),)).module(),):
        report = fxpasses_run(gm2, "remove_identity", [torch.randn(4, 3)])
        assert report["remove_identity"].counters == {"removed": 1}


def test_count_ops_counts_by_op_name(fxpasses_run) -> None:
    gm = torch.fx.symbolic_trace(Net())
    report = fxpasses_run(gm, "count_ops{only=[linear,relu]}")
    assert report["count_ops"].counters == {"linear": 1, "relu": 1}
    assert fxpasses_run(gm, "count_ops").passes[0].counters == {
        "placeholder": 1, "linear": 1, "identity": 1, "to": 1, "relu": 1, "output": 1
    }
    assert report["count_ops"].changed is False


def test_the_preset_runs_remove_identity_then_dead_code(fxpasses_registry) -> None:
    import fxpasses

    preset = fxpasses_registry.preset("example_cleanup")
    assert preset.distribution == "fxpasses-example-passes"
    gm = torch.fx.symbolic_trace(Net())
    report = fxpasses.Pipeline.from_preset("example_cleanup", registry=fxpasses_registry).run(gm, [torch.randn(3, 4)])
    assert [p.name for p in report.passes] == ["remove_identity", "eliminate_dead_code"]
    assert report["remove_identity"].counters == {"removed": 1}
