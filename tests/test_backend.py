"""torch.compile(model, backend="fxpasses")."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch import nn

import fxpasses.backend as backend


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        y = self.drop(self.lin(x)) * 1
        return (y + 0).relu() - y.sigmoid()


class Broken(Net):
    def forward(self, x):
        y = self.drop(self.lin(x)) * 1
        torch._dynamo.graph_break()
        return (y + 0).relu()


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    backend.reports.clear()
    yield
    torch._dynamo.reset()


def test_registered_through_entry_point_and_outputs_match_eager():
    model = Net().eval()
    x = torch.randn(4, 8)
    compiled = torch.compile(model, backend="fxpasses", options={"then": "eager", "pipeline": "remove_dropout,simplify_algebra,eliminate_dead_code"})
    torch.testing.assert_close(compiled(x), model(x))
    (report,) = backend.reports
    assert report.dialect == "dynamo"
    assert report["remove_dropout"].counters == {"removed": 1}
    # x * 1 goes; y + 0 stays (it would turn -0.0 into +0.0)
    assert report["simplify_algebra"].counters["simplified"] == 1
    assert report.nodes_after == report.nodes_before - 2


def test_graph_breaks_each_graph_goes_through_the_pipeline():
    model = Broken().eval()
    x = torch.randn(4, 8)
    compiled = torch.compile(model, backend="fxpasses", options={"then": "eager", "pipeline": "remove_dropout,simplify_algebra"})
    torch.testing.assert_close(compiled(x), model(x))
    assert len(backend.reports) == 2
    # x * 1 before the break goes; y + 0 after it stays (signed zeros)
    assert [r["simplify_algebra"].counters.get("simplified", 0) for r in backend.reports] == [1, 0]


def test_pipeline_from_environment(monkeypatch):
    monkeypatch.setenv("FXPASSES_PIPELINE", "remove_dropout")
    model = Net().eval()
    torch.compile(model, backend="fxpasses", options={"then": "eager"})(torch.randn(2, 8))
    assert [p.name for p in backend.reports[-1].passes] == ["remove_dropout"]


def test_pipeline_from_pyproject(tmp_path, monkeypatch):
    monkeypatch.delenv("FXPASSES_PIPELINE", raising=False)
    (tmp_path / "pyproject.toml").write_text('[tool.fxpasses]\npipeline = "simplify_algebra"\n')
    monkeypatch.chdir(tmp_path)
    torch.compile(Net().eval(), backend="fxpasses", options={"then": "eager"})(torch.randn(2, 8))
    assert [p.name for p in backend.reports[-1].passes] == ["simplify_algebra"]
    (tmp_path / "pyproject.toml").write_text('[tool.fxpasses]\npipeline = "simplify_algebra{"\n')
    torch._dynamo.reset()
    with pytest.raises(Exception) as info:
        torch.compile(Net().eval(), backend="fxpasses", options={"then": "eager"})(torch.randn(2, 8))
    assert "pyproject.toml [tool.fxpasses]: pipeline string, column" in str(info.value)


def test_default_pipeline_then_inductor(tmp_path, monkeypatch):
    monkeypatch.delenv("FXPASSES_PIPELINE", raising=False)
    monkeypatch.chdir(tmp_path)  # no pyproject.toml with [tool.fxpasses] above
    model = Net().eval()
    x = torch.randn(4, 8)
    compiled = torch.compile(model, backend="fxpasses")
    torch.testing.assert_close(compiled(x), model(x))
    assert [p.name for p in backend.reports[-1].passes] == backend.DEFAULT_BACKEND_PIPELINE.split(",")


def test_unknown_option_is_named():
    with pytest.raises(Exception) as info:
        torch.compile(Net(), backend="fxpasses", options={"pipline": "x"})(torch.randn(2, 8))
    assert "unknown torch.compile option(s) for backend 'fxpasses': pipline" in str(info.value)


def test_capture_keeps_working_past_dynamos_recompile_limit():
    from fxpasses.capture import capture

    class Scaled(nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k

        def forward(self, x):
            return x * self.k

    for k in range(12):  # recompile_limit is 8
        cap = capture(Scaled(k), [torch.ones(2)], "dynamo")
        assert torch.equal(cap.gm(*cap.inputs)[0], torch.full((2,), float(k)))


class Reshape(nn.Module):
    def forward(self, x):
        return x.view(-1, x.shape[1]) * 2 + 0 * x.sum()


@pytest.mark.parametrize("dynamic", [None, True])
def test_numeric_verification_with_dynamic_shapes(dynamic, capsys):
    """After a recompile for a new size TorchDynamo passes the size as a SymInt input: numeric
    verification runs the graph with the size it was traced for."""
    model = Reshape()
    compiled = torch.compile(
        model,
        backend="fxpasses",
        dynamic=dynamic,
        options={"then": "eager", "pipeline": "propagate_shapes,simplify_algebra", "verify": "numeric"},
    )
    for cols in (5, 6, 7):
        x = torch.randn(3, cols)
        torch.testing.assert_close(compiled(x), model(x))
    assert all(r.verification == "numeric" for r in backend.reports)
    assert all(p.status == "ok" for r in backend.reports for p in r.passes)
    assert any(r.dialect == "dynamo" and r.nodes_before > 0 for r in backend.reports)
    assert "Traceback" not in capsys.readouterr().err


def test_concrete_example_inputs():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    s = env.create_unbacked_symint()
    t = torch.ones(2)
    assert backend._concrete([3, t]) == [3, t]
    assert backend._concrete([s, t]) is None  # an unbacked size has no value


@pytest.mark.parametrize(
    "options, message",
    [
        ({"then": 3}, "option 'then' must be a backend name"),
        ({"pipeline": ""}, "option 'pipeline' is empty"),
        ({"pipeline": "inference"}, "'inference' is a preset (a named pipeline), not a pass"),
        ({"preset": "nope"}, "options['preset']: unknown preset 'nope'"),
        ({"preset": "inference", "pipeline": "eliminate_dead_code"}, "either 'pipeline' or 'preset'"),
        ({"pipeline": "eliminate_dead_code{"}, "options['pipeline']: pipeline string, column"),
    ],
)
def test_bad_backend_options_are_named(options, message):
    with pytest.raises(Exception) as info:
        torch.compile(Net().eval(), backend="fxpasses", options=options)(torch.randn(2, 8))
    assert message in str(info.value)


def test_preset_option_and_backend_callable():
    seen = []

    def then(gm, example_inputs):
        seen.append(len(gm.graph.nodes))
        return gm.forward

    model = Net().eval()
    x = torch.randn(4, 8)
    compiled = torch.compile(model, backend="fxpasses", options={"preset": "inference", "then": then})
    torch.testing.assert_close(compiled(x), model(x))
    (report,) = backend.reports
    assert [p.name for p in report.passes][:2] == ["remove_dropout", "fuse_conv_bn"]
    assert seen == [report.nodes_after]
