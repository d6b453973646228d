"""fold_constants: folds what is constant, nothing else, and never grows the module (issue 5: 7, 8)."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.fx
import torch.nn as nn

import fxpasses
from fxpasses.capture import capture
from fxpasses.errors import PassFailedError
from fxpasses.testing import assert_preserves_outputs

DIALECTS = ("symbolic_trace", "dynamo", "export")
FOLD = "fold_constants"


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()


class BufferTracer(torch.fx.Tracer):
    # plain symbolic_trace evaluates buffer reads and writes at trace time
    proxy_buffer_attributes = True


def trace(model: nn.Module, dialect: str, inputs) -> tuple[torch.fx.GraphModule, list]:
    if dialect == "symbolic_trace":
        return torch.fx.GraphModule(model, BufferTracer().trace(model)), list(inputs)
    cap = capture(model, inputs, dialect)
    return cap.gm, cap.inputs


#: as the inference preset runs it: parameters are constants whatever the module's mode
FOLD_ALL = FOLD + "{fold_parameters=true}"


def fold(gm, inputs=None, text=FOLD_ALL):
    return fxpasses.Pipeline.from_string(text).run(gm, inputs)[FOLD]


def first(out):
    return out[0] if isinstance(out, (tuple, list)) and len(out) == 1 else out


def storage_numel(gm: nn.Module) -> int:
    return sum(t.numel() for t in gm.state_dict().values())


def get_attrs(gm) -> list[str]:
    return [str(n.target) for n in gm.graph.find_nodes(op="get_attr")]


class Foldable(nn.Module):
    """A linear layer with a weight built from parameters at run time, a scalar from a buffer,
    a shape read from a parameter, an int table and a bool mask."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 8))
        self.register_buffer("scale", torch.tensor([0.5, 2.0]))
        self.register_buffer("table", torch.arange(10))
        self.register_buffer("keep", torch.rand(8) > 0.5)
        self.lin = nn.Linear(8, 8)

    def forward(self, x, idx):
        w2 = (self.w * 2).t()  # folds: the 256-byte result replaces the 256-byte w
        y = x @ w2 + self.scale.sum()  # folds: 2 floats -> 1
        y = y.masked_fill(~self.keep, 0.0)  # folds: the inverted mask replaces the mask
        y = y + self.lin(x) + self.lin.weight.sum()  # lin.weight is still used by lin: stays
        return y.view(self.w.shape[0] // 4, -1), (self.table[idx] * 2)


def foldable_inputs():
    return (torch.randn(2, 8), torch.randint(0, 10, (4,)))


def test_outputs_preserved_and_exact_folds_in_every_dialect():
    results = assert_preserves_outputs(
        fxpasses.Pipeline.from_string(FOLD_ALL), Foldable(), foldable_inputs(), check_inputs=[foldable_inputs()]
    )
    # export: (w*2).t(), scale.sum() and ~keep
    # symbolic_trace: (w*2).t() and w.shape[0] // 4 (a literal); it evaluated the buffer
    #   expressions at trace time already (buffers are not proxied)
    # dynamo: parameters and buffers are placeholders, nothing is constant
    expected_folded = {"symbolic_trace": 2, "export": 3, "dynamo": 0}
    for dialect, (gm, report) in results.items():
        r = report[FOLD]
        assert r.counters.get("folded", 0) == expected_folded[dialect], (dialect, r.counters)
        if dialect == "dynamo":
            assert r.counters == {} and not r.changed
            continue
        # lin.weight.sum() would add 4 bytes: refused; w and scale and keep are gone
        assert r.counters["skipped_size"] == 1
        assert r.counters["bytes_added"] <= r.counters["bytes_freed"]
        state = gm.state_dict()
        assert "w" not in state and "scale" not in state and "keep" not in state
        assert "lin.weight" in state and "table" in state
        assert any(k.startswith("folded") for k in state)


def test_folded_values_are_stored_as_named_buffers_or_parameters():
    model = Foldable()
    gm, inputs = trace(model, "export", foldable_inputs())
    before = gm(*inputs)
    report = fold(gm, inputs)
    folded = sorted(k for k in gm.state_dict() if k.startswith("folded"))
    assert len(folded) == 3 == len(set(folded))
    for name in folded:
        assert name in get_attrs(gm)
    # (w * 2).t() is computed from a parameter that requires grad: a parameter that does too
    # (the outputs reading it keep requiring grad); the others are persistent buffers
    params = dict(gm.named_parameters())
    assert [n for n in folded if n in params] == ["folded_t"] and params["folded_t"].requires_grad
    assert all(n in dict(gm.named_buffers()) for n in folded if n != "folded_t")
    expected = (model.w * 2).t().detach()
    assert torch.equal(gm.folded_t, expected)
    for a, b in zip(gm(*inputs), before):
        assert torch.allclose(a, b)
    assert report.counters["removed_parameters"] == 1 and report.counters["removed_buffers"] == 2


# ------------------------------------------------------------------------------ issue 5, case 7


class Steps(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(1))

    def forward(self, x):
        self.steps.add_(1)
        return x + self.steps * 2


@pytest.mark.parametrize("dialect", DIALECTS)
def test_case7_a_buffer_written_in_the_graph_is_not_a_constant(dialect):
    model = Steps()
    gm, inputs = trace(model, dialect, (torch.zeros(1),))
    report = fold(gm, inputs)
    assert report.counters.get("folded", 0) == 0
    if dialect == "dynamo":  # the buffer is an input; the capture ran the model once
        model.steps.zero_()
        call = lambda: gm(*[a if a is model.steps else torch.zeros(1) for a in inputs])[0]  # noqa: E731
    else:
        gm.steps.zero_()
        call = lambda: gm(torch.zeros(1))  # noqa: E731
    assert [call().tolist() for _ in range(3)] == [[2.0], [4.0], [6.0]]


def test_case7_symbolic_trace_without_proxied_buffers_bakes_the_write_in():
    # documenting the limit of plain symbolic_trace, not of the pass: the tracer ran add_ once
    gm = torch.fx.symbolic_trace(Steps())
    fold(gm)
    assert [gm(torch.zeros(1)).tolist() for _ in range(2)] == [[2.0], [2.0]]


def test_views_of_written_buffers_and_fresh_constants_written_later_do_not_fold():
    root = nn.Module()
    root.register_buffer("buf", torch.zeros(4))

    def fn(g, x):
        view = g.call_method("view", (g.get_attr("buf"), 2, 2))
        g.call_method("add_", (g.call_function(operator.getitem, (view, 0)), 1))  # writes buf
        doubled = g.call_function(operator.mul, (g.get_attr("buf"), 2))
        acc = g.call_function(torch.zeros, (4,))  # a fresh constant ...
        g.call_method("add_", (acc, x))  # ... that is written: not a constant
        return g.call_function(operator.add, (acc, doubled))

    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output(fn(g, x))
    gm = torch.fx.GraphModule(root, g)
    # the literal-only zeros(4) would be allowed by the budget; it must still not fold
    report = fold(gm, text=f"{FOLD}{{fold_parameters=true,max_growth_bytes=1000}}")
    assert report.counters.get("folded", 0) == 0
    outs = [gm(torch.ones(4)).tolist() for _ in range(2)]
    assert outs == [[3.0, 3.0, 1.0, 1.0], [5.0, 5.0, 1.0, 1.0]]


# ------------------------------------------------------------------------------ issue 5, case 8


class Expand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b = nn.Parameter(torch.randn(1, 1024))

    def forward(self, x):
        return x + self.b.expand(1024, 1024)


@pytest.mark.parametrize("dialect", ["symbolic_trace", "export"])
def test_case8_folding_never_grows_the_module(dialect):
    gm, inputs = trace(Expand(), dialect, (torch.randn(1024, 1024),))
    before = gm(*inputs)
    nodes = len(gm.graph.nodes)
    report = fold(gm, inputs)
    assert report.counters == {"skipped_size": 1, "skipped": 1}
    assert "4194304 bytes would replace 4096 bytes" in report.skipped[0][1]
    assert len(gm.graph.nodes) == nodes
    assert storage_numel(gm) == 1024  # still the 4 KiB parameter, no 4 MiB constant
    assert list(gm.state_dict()) == ["b"]
    assert torch.equal(gm(*inputs), before)


def test_case8_the_growth_budget_and_max_numel():
    gm, inputs = trace(Expand(), "export", (torch.randn(1024, 1024),))
    before = gm(*inputs)
    # with a budget, folding is allowed (and the guard alone stopped it above) ...
    report = fold(gm, inputs, f"{FOLD}{{fold_parameters=true,max_growth_bytes=8000000}}")
    assert report.counters["folded"] == 1
    assert storage_numel(gm) == 1024 * 1024 and "b" not in gm.state_dict()
    assert torch.equal(gm(*inputs), before)
    # ... unless the result is above max_numel
    gm, inputs = trace(Expand(), "export", (torch.randn(1024, 1024),))
    report = fold(gm, inputs, f"{FOLD}{{fold_parameters=true,max_growth_bytes=8000000,max_numel=1000}}")
    assert report.counters == {"skipped_size": 1, "skipped": 1}
    assert "1048576 elements > max_numel=1000" in report.skipped[0][1]
    assert storage_numel(gm) == 1024


def test_case8_the_small_part_of_a_growing_chain_still_folds():
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.b = nn.Parameter(torch.randn(1, 1024))

        def forward(self, x):
            return x + (self.b * 2).expand(1024, 1024)

    gm, inputs = trace(M(), "export", (torch.randn(1024, 1024),))
    before = gm(*inputs)
    report = fold(gm, inputs)
    assert report.counters["folded"] == 1  # b * 2 (4 KiB for 4 KiB), not the expand
    assert report.counters["skipped_size"] == 1
    assert storage_numel(gm) == 1024 and "b" not in gm.state_dict()
    assert torch.equal(gm(*inputs), before)


def test_literal_only_constants_need_a_budget():
    class M(nn.Module):
        def forward(self, x):
            return x + torch.arange(4) * 2

    gm, inputs = trace(M(), "export", (torch.zeros(4, dtype=torch.int64),))
    report = fold(gm, inputs)
    assert report.counters == {"skipped_size": 1, "skipped": 1}  # arange * 2 (then arange, unreported)
    assert [name for name, _ in report.skipped] == ["mul"]
    assert storage_numel(gm) == 0
    report = fold(gm, inputs, f"{FOLD}{{fold_parameters=true,max_growth_bytes=64}}")
    assert report.counters["folded"] == 1 and report.counters["bytes_added"] == 32
    assert gm(*inputs).tolist() == [0, 2, 4, 6]
    assert storage_numel(gm) == 4


# ------------------------------------------------------------------------------ what never folds


class Mixed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4))

    def forward(self, x):
        noise = torch.rand(4) * self.w  # random: never constant
        return x * self.w + noise  # depends on x


@pytest.mark.parametrize("dialect", ["export", "dynamo"])
def test_random_and_input_dependent_nodes_never_fold(dialect):
    gm, inputs = trace(Mixed(), dialect, (torch.ones(4),))
    code = gm.code
    report = fold(gm, inputs, f"{FOLD}{{fold_parameters=true,max_growth_bytes=100000}}")
    assert report.counters.get("folded", 0) == 0
    assert gm.code == code
    torch.manual_seed(3)
    a = first(gm(*inputs))
    torch.manual_seed(4)
    assert not torch.equal(a, first(gm(*inputs)))  # still random


def test_results_reaching_the_output_are_not_folded():
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))

        def forward(self, x):
            return x + 1, self.w * 2

    gm, inputs = trace(M(), "export", (torch.zeros(3),))
    report = fold(gm, inputs)
    assert report.counters == {"skipped_output": 1, "skipped": 1}
    a = gm(*inputs)[1]
    a.add_(100)  # the caller owns the result: the next call is unaffected
    assert gm(*inputs)[1].tolist() == [2.0, 2.0, 2.0]


def test_fold_parameters_false_keeps_parameters():
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))
            self.register_buffer("b", torch.ones(3))

        def forward(self, x):
            return x * (self.w * 2) + (self.b * 3)

    gm, inputs = trace(M(), "export", (torch.ones(3),))
    report = fold(gm, inputs, f"{FOLD}{{fold_parameters=false}}")
    assert report.counters["folded"] == 1  # b * 3 only
    assert "w" in gm.state_dict() and "b" not in gm.state_dict()
    assert gm(*inputs).tolist() == [5.0, 5.0, 5.0]


class _Positions(nn.Module):
    """A trainable position embedding read with a constant index: ``pos(arange(4))``."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = nn.Embedding(4, 3)
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x + self.pos(torch.arange(4)))


@pytest.mark.parametrize("dialect", ["symbolic_trace", "export"])
def test_default_leaves_trainable_parameters_alone(dialect):
    """By default a parameter that requires grad in a training-mode module is not a constant
    (the folded result would silently stop its gradients); the skip says why and how to fold."""
    torch.manual_seed(0)
    model = _Positions().train()
    x = torch.randn(2, 4, 3)
    gm, inputs = trace(model, dialect, (x,))
    assert gm.training
    report = fold(gm, inputs, FOLD)
    assert report.counters.get("folded", 0) == 0
    assert any(why.endswith("in training mode (fold_parameters=true folds it)") for _, why in report.skipped), report.skipped
    gm(*inputs).sum().backward()
    grad = dict(gm.named_parameters())["pos.weight"].grad
    assert grad is not None and grad.abs().sum() > 0


def test_default_asks_the_module_that_holds_the_parameter():
    """An eval-mode model with one submodule in training mode: that submodule's parameter stays
    trainable (its folded result would not require grad), the eval-mode ones fold."""

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.ones(4))
            self.table = nn.Embedding(4, 4)

        def forward(self, x):
            return x * self.scale.exp() + self.table(torch.arange(4))

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Linear(4, 4)
            self.bias = nn.Parameter(torch.zeros(4))
            self.head = Head()

        def forward(self, x):
            return self.head(self.body(x) + self.bias.sin())

    torch.manual_seed(0)
    m = M().eval()
    m.head.train()
    x = torch.randn(4, 4)
    gm = torch.fx.symbolic_trace(m)
    report = fold(gm, [x], f"{FOLD}{{max_growth_bytes=1000}}")
    assert report.counters["folded"] == 1  # bias.sin(): the root is in eval mode
    skipped = dict(report.skipped)
    assert "reads a parameter (or tensor) that requires grad" in skipped["exp"]
    assert "calls a module whose parameters require grad" in skipped["head_table"]
    out = gm(x)
    assert out.requires_grad
    out.sum().backward()
    params = dict(gm.named_parameters())
    assert params["head.scale"].grad is not None and params["head.table.weight"].grad is not None


def test_default_leaves_plain_tensors_that_require_grad_alone_in_training():
    """Not only parameters: a plain tensor attribute that requires grad is left alone in
    training mode (gradients flow to it), and folds in eval mode."""
    root = nn.Module()
    root.t = torch.ones(3, requires_grad=True)
    g = torch.fx.Graph()
    x = g.placeholder("x")
    doubled = g.call_function(operator.mul, (g.get_attr("t"), 2))
    g.output(g.call_function(operator.mul, (x, doubled)))
    gm = torch.fx.GraphModule(root, g)
    xs = torch.randn(3)
    report = fold(gm, [xs], FOLD)
    assert report.counters.get("folded", 0) == 0
    assert "requires grad, in training mode" in dict(report.skipped)["mul"]
    gm(xs).sum().backward()
    assert torch.equal(root.t.grad, 2 * xs)
    gm.eval()
    assert fold(gm, [xs], f"{FOLD}{{max_growth_bytes=100}}").counters["folded"] == 1  # eval mode


def test_default_folds_parameters_of_eval_modules_and_frozen_ones():
    torch.manual_seed(0)
    x = torch.randn(2, 4, 3)
    model = _Positions().eval()
    gm, inputs = trace(model, "symbolic_trace", (x,))
    # pos(arange(4)), eval mode (symbolic_trace stores arange(4) as a constant: the result grows)
    assert fold(gm, inputs, f"{FOLD}{{max_growth_bytes=64}}").counters["folded"] == 1
    torch.testing.assert_close(gm(*inputs), model(x))
    # training mode (torch.export always says so), but the parameter does not require grad
    frozen = _Positions().train()
    frozen.pos.weight.requires_grad_(False)
    gm, inputs = trace(frozen, "export", (x,))
    assert fold(gm, inputs, FOLD).counters["folded"] == 1
    torch.testing.assert_close(gm(*inputs), frozen(x))
    # fold_parameters=true: folded whatever the mode (the inference preset sets it)
    trained = _Positions().train()
    gm, inputs = trace(trained, "export", (x,))
    assert fold(gm, inputs, f"{FOLD}{{fold_parameters=true}}").counters["folded"] == 1
    torch.testing.assert_close(gm(*inputs), trained(x))


def test_training_job_uses_the_training_preset(tmp_path):
    from fxpasses.config import parse_config
    from fxpasses.job import TRAINING_PRESET, run_job

    cfg = parse_config(
        {
            "model": {
                "factory": "fxpasses._example:convnet",
                "capture": "export",
                "train": True,
                "inputs": [{"shape": [2, 3, 32, 32], "dtype": "float32"}],
            },
            "output": str(tmp_path / "out"),
        },
        source="test",
    )
    result = run_job(cfg)
    assert TRAINING_PRESET == "training" and result.preset == "training"
    assert result.pipeline == fxpasses.Pipeline.from_preset("training").plan().as_pipeline_string()
    assert result.as_dict()["pipeline"] == result.pipeline and result.as_dict()["preset"] == "training"
    # no conv-bn fusion for a model still to be trained (it would train copies of the weights)
    assert [p.name for p in result.report.passes][:2] == ["remove_dropout", "simplify_algebra"]
    fold_report = result.report["fold_constants"]
    assert fold_report.counters.get("removed_parameters", 0) == 0
    assert fold_report.counters.get("removed_buffers", 0) == 0


def test_shapes_fold_to_literals_and_failing_evaluations_are_skipped():
    root = nn.Module()
    root.w = nn.Parameter(torch.ones(6, 2))

    def fn(g, x):
        w = g.get_attr("w")
        rows = g.call_function(operator.getitem, (g.call_function(getattr, (w, "shape")), 0))
        bad = g.call_method("view", (w, 5, -1))  # raises when evaluated: left alone
        y = g.call_method("view", (x, rows, -1))
        return (y, g.call_function(operator.add, (x, g.call_method("sum", (bad,)))))

    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output(fn(g, x))
    gm = torch.fx.GraphModule(root, g)
    report = fold(gm)
    assert report.counters == {"folded": 1, "removed_nodes": 2, "skipped": 1}
    assert "view_1 = x.view(6, -1)" in gm.code
    assert report.skipped[0][0] == "view" and "could not evaluate" in report.skipped[0][1]


def test_runs_before_dead_code_elimination():
    plan = fxpasses.Pipeline.from_string("eliminate_dead_code,fold_constants").plan()
    assert plan.names() == ["fold_constants", "eliminate_dead_code"]


def test_nothing_folds_under_autocast():
    class M(nn.Module):
        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = x @ (torch.ones(4, 4) * 2)
            return y

    cap = capture(M(), (torch.randn(2, 4),), "dynamo")
    report = fold(cap.gm, cap.inputs, f"{FOLD}{{fold_parameters=true,max_growth_bytes=100000}}")
    assert report.counters.get("folded", 0) == 0
    assert first(cap.gm(*cap.inputs)).dtype == torch.bfloat16
    # the same without autocast folds (the budget allows the literal-built constant)
    torch._dynamo.reset()

    class N(nn.Module):
        def forward(self, x):
            with torch.no_grad():  # grad mode does not change values
                y = x @ (torch.ones(4, 4) * 2)
            return y

    cap = capture(N(), (torch.randn(2, 4),), "dynamo")
    report = fold(cap.gm, cap.inputs, f"{FOLD}{{fold_parameters=true,max_growth_bytes=100000}}")
    assert report.counters["folded"] == 1
    assert torch.allclose(first(cap.gm(*cap.inputs)), cap.inputs[0] @ (torch.ones(4, 4) * 2))


def test_readers_of_global_state_do_not_fold():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(operator.mul, (x, g.call_function(torch.is_grad_enabled, ()))))
    gm = torch.fx.GraphModule(nn.Module(), g)
    assert fold(gm).counters == {}
    with torch.enable_grad():
        assert gm(torch.ones(1)).tolist() == [1.0]


def test_calls_of_a_module_whose_state_is_written_do_not_fold():
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = nn.BatchNorm1d(3).eval()
            self.register_buffer("ones", torch.ones(2, 3))

        def forward(self, x):
            self.bn.running_mean.add_(1)
            return x + self.bn(self.ones)  # constant inputs, but bn's state changes per call

    m = M()
    gm = torch.fx.GraphModule(m, BufferTracer().trace(m))
    report = fold(gm, text=f"{FOLD}{{fold_parameters=true,max_growth_bytes=100000}}")
    assert report.counters.get("folded", 0) == 0
    first_call, second_call = gm(torch.zeros(2, 3)), gm(torch.zeros(2, 3))
    assert torch.allclose(first_call - second_call, torch.ones(2, 3), atol=1e-4)


class ResidualScaled(nn.Module):
    """A residual block (its batch norm's output updated in place, as in torchvision's
    BasicBlock) scaled by a constant computed from the batch norm's weight."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4).eval()
        with torch.no_grad():
            self.bn.weight.uniform_(0.5, 2)
            self.bn.running_var.uniform_(0.5, 2)

    def forward(self, x):
        out = self.bn(self.conv(x))
        out += x
        return out * self.bn.weight.abs().view(1, -1, 1, 1)


def test_an_in_place_write_on_a_batch_norm_output_leaves_its_weight_constant():
    """export's ``aten.batch_norm`` carries the tag maybe_aliasing_or_mutating, but its output
    is a new tensor: ``out += x`` does not write the weight, whose expression folds."""
    text = f"{FOLD}{{fold_parameters=true,max_growth_bytes=100000}}"
    inputs = [torch.randn(2, 4, 5, 5)]
    results = assert_preserves_outputs(text, ResidualScaled(), inputs, check_inputs=[[torch.randn(2, 4, 5, 5)]])
    # dynamo: the weight is a placeholder, nothing is constant
    expected = {"symbolic_trace": 1, "export": 1, "dynamo": 0}
    for dialect, (_, report) in results.items():
        assert report[FOLD].counters.get("folded", 0) == expected[dialect], (dialect, report[FOLD].counters)


class WritesThroughTypeAs(nn.Module):
    """``type_as`` returns its input itself when the dtype already matches: the in-place add
    writes the buffer ``b``, so ``b * 2`` is not a constant."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("b", torch.ones(3))

    def forward(self, x):
        y = self.b * 2
        t = self.b.type_as(x)
        t.add_(1)
        return x + y


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_buffer_written_through_type_as_is_not_a_constant(dialect):
    model = WritesThroughTypeAs()
    gm, inputs = trace(model, dialect, (torch.zeros(3),))
    report = fold(gm, inputs, text=f"{FOLD}{{fold_parameters=true,max_growth_bytes=100000}}")
    assert report.counters.get("folded", 0) == 0, report.counters
    if dialect == "dynamo":  # the buffer is an input; the capture ran the model once
        model.b.fill_(1)
        call = lambda: first(gm(*[a if a is model.b else torch.zeros(3) for a in inputs]))  # noqa: E731
    else:
        gm.b.fill_(1)
        call = lambda: first(gm(torch.zeros(3)))  # noqa: E731
    assert [call().tolist() for _ in range(3)] == [[2.0] * 3, [4.0] * 3, [6.0] * 3]


# --------------------------------------------------------------------- storage bookkeeping
# Which parameters/buffers folding frees is decided from storages: a dead constant's storage
# is freed only when no other name of the module tree and nothing the graph still reads
# (a called module, a live get_attr) refers to it.


def _doubled_buffer_graph(root: nn.Module, call_sub: bool = False) -> torch.fx.GraphModule:
    """x + b * 2 (and sub(x) when ``call_sub``) on ``root``."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(torch.add, (x, g.call_function(torch.mul, (g.get_attr("b"), 2))))
    if call_sub:
        y = g.call_module("sub", (y,))
    g.output(y)
    return torch.fx.GraphModule(root, g)


def _root_with_b() -> nn.Module:
    root = nn.Module()
    root.register_buffer("b", torch.arange(4.0))
    return root


def test_a_dead_buffer_with_no_other_reference_is_freed():
    gm = _doubled_buffer_graph(_root_with_b())
    report = fold(gm)
    assert report.counters == {
        "folded": 1, "removed_nodes": 2, "removed_buffers": 1, "bytes_added": 16, "bytes_freed": 16,
    }
    assert "b" not in gm.state_dict()
    assert gm(torch.ones(4)).tolist() == [1.0, 3.0, 5.0, 7.0]


@pytest.mark.parametrize("where", ["tensor_attribute", "view_buffer", "same_tensor_buffer"])
def test_a_storage_another_name_refers_to_is_not_freed(where):
    root = _root_with_b()
    root.sub = nn.Module()
    if where == "tensor_attribute":  # a plain tensor attribute of a submodule (in its __dict__)
        root.sub.alias = root.b[1:]
    elif where == "view_buffer":  # another buffer viewing the same storage
        root.sub.register_buffer("v", root.b.view(2, 2))
    else:  # the very same tensor under a second name
        root.sub.register_buffer("same", root.b)
    gm = _doubled_buffer_graph(root)
    gm.sub = root.sub  # not read by the graph: GraphModule copies only what it reads
    report = fold(gm)
    # folding would add 16 bytes and free none: refused under the default budget
    assert report.counters["skipped_size"] == 1 and "folded" not in report.counters
    assert "b" in dict(gm.named_buffers())
    assert gm(torch.ones(4)).tolist() == [1.0, 3.0, 5.0, 7.0]


def test_a_storage_a_called_module_holds_is_not_freed():
    root = _root_with_b()
    root.sub = nn.Linear(4, 4, bias=False)
    with torch.no_grad():
        root.sub.weight.copy_(torch.eye(4))
    root.sub.shared = root.b  # the called module holds the storage as a tensor attribute
    gm = _doubled_buffer_graph(root, call_sub=True)
    report = fold(gm)
    assert report.counters["skipped_size"] == 1 and "folded" not in report.counters
    assert "b" in dict(gm.named_buffers())
    assert gm(torch.ones(4)).tolist() == [1.0, 3.0, 5.0, 7.0]


@pytest.mark.parametrize("nested", [False, True], ids=["called", "below_a_called_one"])
def test_the_weight_of_a_called_module_is_not_freed(nested):
    # (w * 2).sum() is constant, but the module holding w is called (or its parent is: the
    # tensors below a called module stay too), so w stays and storing the 4-byte result
    # would grow the module
    linear = nn.Linear(4, 4, bias=False)
    with torch.no_grad():
        linear.weight.copy_(torch.eye(4))
    root = nn.Module()
    root.sub = nn.Sequential(linear) if nested else linear
    weight = "sub.0.weight" if nested else "sub.weight"
    g = torch.fx.Graph()
    x = g.placeholder("x")
    total = g.call_method("sum", (g.call_function(torch.mul, (g.get_attr(weight), 2)),))
    g.output(g.call_function(torch.add, (g.call_module("sub", (x,)), total)))
    gm = torch.fx.GraphModule(root, g)
    report = fold(gm)
    assert report.counters["skipped_size"] == 1 and "folded" not in report.counters
    assert gm(torch.ones(4)).tolist() == [9.0, 9.0, 9.0, 9.0]
    # with 4 bytes of budget it folds, and the weight is kept
    gm = torch.fx.GraphModule(root, g)
    report = fold(gm, text=f"{FOLD}{{fold_parameters=true,max_growth_bytes=4}}")
    assert report.counters["folded"] == 1 and report.counters["bytes_added"] == 4
    assert "bytes_freed" not in report.counters and weight in dict(gm.named_parameters())
    assert gm(torch.ones(4)).tolist() == [9.0, 9.0, 9.0, 9.0]


def test_a_storage_a_module_outside_the_tree_holds_is_not_freed():
    # the called module is found through a class attribute, not _modules: named_modules()
    # never reaches it, yet its weight views the storage of b, which therefore stays
    gm = _doubled_buffer_graph(_root_with_b())
    hidden = nn.Linear(4, 1, bias=False)
    hidden.weight = nn.Parameter(gm.b.view(1, 4), requires_grad=False)
    type(gm).hidden = hidden  # GraphModule makes a class per instance
    out = gm.graph.output_node()
    with gm.graph.inserting_before(out):
        out.args = (gm.graph.call_module("hidden", out.args),)
    gm.recompile()
    assert "hidden" not in dict(gm.named_modules())
    report = fold(gm)
    assert report.counters["skipped_size"] == 1 and "folded" not in report.counters
    assert "b" in dict(gm.named_buffers())
    assert gm(torch.ones(4)).tolist() == [34.0]  # sum(b * (1 + 2 b)), b = 0, 1, 2, 3


@pytest.mark.parametrize("second_name", [False, True])
def test_an_empty_buffer_is_keyed_by_identity(second_name):
    # an empty tensor has no storage address: it is tracked by identity instead
    root = nn.Module()
    root.register_buffer("e", torch.zeros(0))
    if second_name:
        root.sub = nn.Module()
        root.sub.register_buffer("e2", root.e)  # the same tensor object under a second name
    g = torch.fx.Graph()
    x = g.placeholder("x")
    n = g.call_method("numel", (g.get_attr("e"),))
    g.output(g.call_function(operator.add, (x, n)))
    gm = torch.fx.GraphModule(root, g)
    if second_name:
        gm.sub = root.sub
    report = fold(gm)
    assert report.counters["folded"] == 1
    assert "add = x + 0" in gm.code
    assert ("e" in dict(gm.named_buffers())) is second_name
    assert report.counters.get("removed_buffers", 0) == (0 if second_name else 1)


def test_a_module_tree_that_contains_itself_fails_as_before():
    # named_modules(remove_duplicate=False) never ends on such a tree: the pass fails with
    # RecursionError (as it always did) and the graph is restored
    gm = _doubled_buffer_graph(_root_with_b())
    gm.sub = nn.Module()
    gm.sub._modules["again"] = gm.sub
    code = gm.code
    with pytest.raises(PassFailedError, match="RecursionError"):
        fold(gm)
    assert gm.code == code and "b" in dict(gm.named_buffers())


class _SizedByWeight(nn.Module):
    """Shapes read from trainable parameters: ``w.size(0)``, ``w.shape[1]`` and ``w.dtype``."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 3))
        self.only_sized = nn.Parameter(torch.randn(6))  # read for its size only

    def forward(self, x):
        rows = x.reshape(-1, self.w.size(1)) @ self.w.t()
        pad = torch.zeros(self.w.shape[0], dtype=self.w.dtype)
        return rows + pad + self.only_sized.numel()


def test_metadata_of_trainable_parameters_folds_in_training_mode():
    """The shape, dtype or numel of a parameter being trained does not change with its values:
    they fold even though the parameter itself stays (and keeps its gradient)."""
    torch.manual_seed(0)
    model = _SizedByWeight().train()
    x = torch.randn(2, 3, 3)
    gm, inputs = trace(model, "symbolic_trace", (x,))
    expected = model(x)
    report = fold(gm, inputs, FOLD)
    calls = [(n.op, n.target) for n in gm.graph.nodes if n.op in ("call_method", "call_function")]
    assert ("call_method", "size") not in calls and ("call_method", "numel") not in calls
    assert (("call_function", getattr)) not in calls
    # zeros(w.shape[0], dtype=w.dtype) now reads literals (storing its result would grow the
    # module: max_growth_bytes=0)
    (zeros,) = gm.graph.find_nodes(op="call_function", target=torch.zeros)
    assert zeros.args == (4,) and zeros.kwargs == {"dtype": torch.float32}
    # only the value read (w.t()) is reported as left alone for training
    assert [name for name, why in report.skipped if "requires grad" in why] == ["t"], report.skipped
    # the parameters stay, trainable, in the state dict (only_sized included)
    assert set(dict(gm.named_parameters())) == {"w", "only_sized"}
    out = gm(*inputs)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    assert gm.w.grad is not None and gm.w.grad.abs().sum() > 0
    # a value read from the same parameter still does not fold
    gm2, _ = trace(_Positions().train(), "symbolic_trace", (x,))
    assert fold(gm2, [x], FOLD).counters.get("folded", 0) == 0


class _Scaled(nn.Module):
    """A traced-through submodule whose parameter only feeds a constant chain."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.full((3,), 0.5))

    def forward(self, x):
        return x * (self.w * 2 + 1)


class _Holds(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = _Scaled()
        self.v = nn.Parameter(torch.full((3,), 2.0))

    def forward(self, x):
        return self.inner(x) + self.v * 3


def test_capture_gives_the_containers_torch_fx_makes_the_models_mode():
    """symbolic_trace rebuilds a traced-through submodule (``inner``) as a plain
    ``nn.Module()`` in training mode whatever the model's mode. ``capture`` gives it the
    model's mode, so the default fold treats ``inner.w`` of an eval-mode model as frozen, as it
    treats ``v``; and the parameters it frees are deleted even though nothing references
    ``inner`` any more (they stayed, while the growth check counted their bytes as freed)."""
    x = torch.randn(3)
    model = _Holds().eval()
    cap = capture(model, [x], "symbolic_trace")
    assert cap.gm.training is False and cap.gm.inner.training is False
    before = storage_numel(cap.gm)
    report = fold(cap.gm, cap.inputs, FOLD)
    assert report.counters["folded"] == 2 and not report.skipped
    assert report.counters["removed_parameters"] == 2
    assert sorted(cap.gm.state_dict()) == ["folded_add", "folded_mul_2"]  # no inner.w left
    assert report.counters["bytes_freed"] == report.counters["bytes_added"] == 24
    assert storage_numel(cap.gm) == before
    torch.testing.assert_close(cap.gm(x), model(x))
    # a submodule the user put in training mode keeps it, and its parameter stays trainable
    model = _Holds().eval()
    model.inner.train()
    cap = capture(model, [x], "symbolic_trace")
    assert cap.gm.inner.training is True
    report = fold(cap.gm, cap.inputs, FOLD)
    assert report.counters["folded"] == 1  # v * 3
    assert "requires grad, in training mode" in dict(report.skipped)["mul"]
    assert "'inner', which holds 'inner.w', is in training mode while the GraphModule is in eval mode" in dict(
        report.skipped
    )["mul"]
    assert "inner.w" in cap.gm.state_dict()


def test_a_skip_for_a_torch_fx_container_in_training_mode_says_how_to_fold():
    """Plain ``torch.fx.symbolic_trace`` of an eval-mode model: the container it made for
    ``inner`` is in training mode, so ``inner.w`` counts as trainable; the skip says that
    ``inner`` is in training mode while the GraphModule is not, why, and that gm.eval() fixes
    it."""
    x = torch.randn(3)
    model = _Holds().eval()
    gm = torch.fx.symbolic_trace(model)
    assert gm.training is False and gm.inner.training is True
    report = fold(gm, [x], FOLD)
    assert report.counters["folded"] == 1
    assert dict(report.skipped)["mul"] == (
        "reads a parameter (or tensor) that requires grad, in training mode (fold_parameters=true folds it); "
        "'inner', which holds 'inner.w', is in training mode while the GraphModule is in eval mode "
        "(torch.fx.symbolic_trace makes such a container in training mode whatever the model's mode: "
        "gm.eval() puts it in eval mode)"
    )
    gm = torch.fx.symbolic_trace(model).eval()
    report = fold(gm, [x], FOLD)
    assert report.counters["folded"] == 2 and not report.skipped
    torch.testing.assert_close(gm(x), model(x))


class _GradFreeConstants(nn.Module):
    """Constants computed from a parameter whose results do or do not require grad in eager
    mode: ``w * 2`` does, ``zeros_like(w)``, ``w.detach() + 1`` and ``w > 0`` do not."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3))

    def forward(self, x):
        return x + torch.zeros_like(self.w), x * (self.w.detach() + 1), (self.w > 0).float() + x, x * (self.w * 2)


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_a_folded_constant_requires_grad_exactly_when_eager_mode_computes_it_so(dialect):
    torch.manual_seed(0)
    model = _GradFreeConstants().eval()
    x = torch.randn(3)
    gm, inputs = trace(model, dialect, (x,))
    eager = model(x)
    assert [o.requires_grad for o in eager] == [False, False, False, True]
    # (torch.export says training mode whatever the model's: fold_parameters=true folds its
    # parameters, as the inference preset does)
    options = "{max_growth_bytes=1000, fold_parameters=true}" if dialect == "export" else "{max_growth_bytes=1000}"
    report = fold(gm, inputs, FOLD + options)
    # TorchDynamo passes parameters as placeholders: nothing is a constant there; torch.export
    # keeps w > 0 besides, for its _assert_tensor_metadata check
    folds = {"symbolic_trace": 4, "dynamo": 0, "export": 5}[dialect]
    assert report.counters.get("folded", 0) == folds
    out = gm(*inputs)
    assert [o.requires_grad for o in out] == [False, False, False, True]
    for a, b in zip(out, eager):
        torch.testing.assert_close(a, b)
    # stored as eager mode computes them: one parameter that requires grad, three buffers
    params = [n for n, p in gm.named_parameters() if n.startswith("folded")]
    buffers = [n for n, _ in gm.named_buffers() if n.startswith("folded")]
    assert (len(params), len(buffers)) == ((0, 0) if dialect == "dynamo" else (1, folds - 1))
    if dialect != "dynamo":
        assert all(p.requires_grad for n, p in gm.named_parameters() if n.startswith("folded"))
    assert_preserves_outputs(
        fxpasses.Pipeline.from_string(FOLD + options), _GradFreeConstants().eval(), (x,), dialects=[dialect]
    )


class _BufferArithmetic(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.full((4,), 4.0))

    def forward(self, x):
        return x * self.scale.sqrt() + self.scale.size(0)


@pytest.mark.parametrize("dialect", ["export", "symbolic_trace"])
def test_remove_unused_state_false_keeps_every_attribute_and_frees_nothing(dialect):
    """With remove_unused_state=false (the training preset) the buffers a fold leaves unread
    stay, so nothing counts as freed: a tensor fold adds storage, refused at the default
    max_growth_bytes=0, made when the budget allows it; literals fold either way."""
    x = torch.randn(2, 4)
    model = _BufferArithmetic()
    gm = capture(model, [x], dialect).gm
    names = list(gm.state_dict())
    expected = gm(x)
    report = fold(gm, [x], f"{FOLD}{{remove_unused_state=false}}")
    assert list(gm.state_dict()) == names
    assert report.counters.get("removed_buffers", 0) == 0 and report.counters.get("bytes_freed", 0) == 0
    assert not any(str(n.target).startswith("folded_") for n in gm.graph.find_nodes(op="get_attr"))
    if dialect == "export":  # scale.sqrt() is a graph node there (symbolic_trace evaluated it)
        assert report.counters["skipped_size"] >= 1
        gm2 = capture(model, [x], dialect).gm
        report = fold(gm2, [x], f"{FOLD}{{remove_unused_state=false,max_growth_bytes=16}}")
        assert report.counters["folded"] >= 1 and report.counters.get("bytes_freed", 0) == 0
        assert set(names) < set(gm2.state_dict())  # kept, and the folded one besides
        torch.testing.assert_close(gm2(x), expected)
    torch.testing.assert_close(gm(x), expected)
