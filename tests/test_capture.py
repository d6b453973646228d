"""Capturing leaves the caller's model and inputs as they were, in every dialect."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from torch import nn

from fxpasses.capture import DIALECTS, capture
from fxpasses.errors import UserError


class _WritesInput(nn.Module):
    def forward(self, x):
        x.add_(1)
        return x * 2


@pytest.mark.parametrize("dialect", DIALECTS)
def test_capture_leaves_batch_norm_statistics_and_written_inputs_as_they_were(dialect):
    """The dynamo capture runs the model to capture it: a training-mode BatchNorm's running
    statistics and num_batches_tracked moved, and an input the forward adds to kept the
    addition, so `fxpasses run` saved them changed (a new-user check)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    capture(model, [torch.randn(2, 3, 8, 8)], dialect)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before), dialect
    x = torch.zeros(3)
    cap = capture(_WritesInput(), [x], dialect)
    assert torch.equal(x, torch.zeros(3)), dialect
    # the captured graph still does what the model does, on fresh inputs
    y = torch.zeros(3)
    torch.testing.assert_close(cap.gm(y) if dialect != "dynamo" else cap.gm(y)[0], torch.full((3,), 2.0))


def test_a_parameter_the_dynamo_capture_wrote_is_warned_about():
    class WritesWeight(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(3), requires_grad=False)

        def forward(self, x):
            self.w.mul_(2)
            return x * self.w

    with pytest.warns(UserWarning, match=r"wrote parameter\(s\) w in place: they keep the new values"):
        capture(WritesWeight(), [torch.ones(3)], "dynamo")


class _CountsCalls(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))
        self.register_buffer("scale", torch.full((3,), 2.0))

    def forward(self, x):
        self.count += 1
        return x * self.scale


def test_a_buffer_written_while_symbolic_trace_traced_is_put_back_and_warned_about():
    """symbolic_trace reads buffers as the tensors themselves (torch.fx's
    proxy_buffer_attributes is False): `self.count += 1` ran on the user's buffer while
    tracing, left it at 1 after the capture, and is not in the graph, so the captured module
    never counts; nothing said so (left alone in the thirty-first session, fixed in the next).
    The buffer is put back and a CaptureWarning names it; a buffer only read is not named."""
    from fxpasses.errors import CaptureWarning

    model = _CountsCalls()
    with pytest.warns(CaptureWarning, match=r"buffer\(s\) count while tracing.*the graph does not contain them") as record:
        cap = capture(model, [torch.ones(3)], "symbolic_trace")
    assert [str(w.message).count("scale") for w in record if issubclass(w.category, CaptureWarning)] == [0]
    assert model.count.item() == 0.0
    torch.testing.assert_close(cap.gm(torch.ones(3)), torch.full((3,), 2.0))
    assert model.count.item() == 0.0  # (the graph has no write: what the warning says)
    for dialect in ("export", "dynamo"):  # these keep the write in the graph: no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error", CaptureWarning)
            capture(_CountsCalls(), [torch.ones(3)], dialect)


class _WritesALocalTensor(nn.Module):
    def forward(self, x):
        t = torch.zeros(3)
        t.add_(x)  # (t does not depend on x: symbolic_trace made it a constant)
        return t * 2


class _RandomButTraced(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x):
        return self.drop(self.bn(x)) + torch.rand_like(x)


def test_a_symbolic_trace_graph_that_does_not_compute_what_the_model_does_is_warned_about():
    """`t = torch.zeros(3); t.add_(x); return t * 2` traced to a graph returning zeros, a
    constant made while tracing, and nothing said so; passes, verification and `fxpasses run`'s
    "outputs: match" then worked on that graph (a new-user check). The capture now calls the
    model and the graph on the example inputs and warns when they differ. A model with random
    ops, batch norm in training mode and dropout, traced correctly, is not warned about, and
    what the calls write is put back."""
    from fxpasses.errors import CaptureWarning

    with pytest.warns(CaptureWarning, match=r"the symbolic_trace graph of _WritesALocalTensor does not compute what the model does on the example inputs \(output: max abs error 2 exceeds"):
        cap = capture(_WritesALocalTensor(), [torch.ones(3)], "symbolic_trace")
    torch.testing.assert_close(cap.gm(torch.ones(3)), torch.zeros(3))  # (what the warning is about)
    model = _RandomButTraced().train()
    x = torch.randn(4, 3)
    x0, stats = x.clone(), model.bn.running_mean.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureWarning)
        capture(model, [x], "symbolic_trace")
        capture(_WritesALocalTensor(), [], "symbolic_trace")  # (no inputs: the model raises; nothing checked)
        for dialect in ("export", "dynamo"):  # these trace the write
            out = capture(_WritesALocalTensor(), [torch.ones(3)], dialect).gm(torch.ones(3))
            torch.testing.assert_close(out[0] if isinstance(out, tuple) else out, torch.full((3,), 2.0))
    assert torch.equal(model.bn.running_mean, stats) and model.bn.num_batches_tracked.item() == 0 and torch.equal(x, x0)


class _Autocasts(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return torch.mm(x, self.w)


class _NoGradRegion(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        with torch.no_grad():
            return torch.mm(x, self.w)


def test_the_symbolic_trace_output_check_names_a_dropped_autocast_or_no_grad_region():
    """symbolic_trace records no context manager. A `torch.autocast` region's code then ran in
    float32, and the warning blamed constants evaluated while tracing; a `torch.no_grad`
    region's output required grad in the graph and nothing was said, since the check ran
    under no_grad (a new-user check). The check runs in the caller's grad mode and names the
    context manager when an output's dtype or requires_grad differs."""
    from fxpasses.errors import CaptureWarning

    x = torch.randn(3, 4)
    with pytest.warns(CaptureWarning) as record:
        capture(_Autocasts(), [x], "symbolic_trace")
    (said,) = [str(w.message) for w in record if issubclass(w.category, CaptureWarning)]
    assert (
        "(output: dtype changed from torch.bfloat16 to torch.float32): symbolic_trace records no context manager, so "
        "the code of a torch.autocast region runs in the dtypes of its inputs" in said
    ), said
    with pytest.warns(CaptureWarning) as record:
        cap = capture(_NoGradRegion(), [x], "symbolic_trace")
    (said,) = [str(w.message) for w in record if issubclass(w.category, CaptureWarning)]
    assert (
        "(an output's requires_grad is True where the model's is False): symbolic_trace records no context manager, "
        "so the code of a torch.no_grad (enable_grad, set_grad_enabled, inference_mode) region runs in the caller's "
        "grad mode" in said
    ), said
    assert cap.gm(x).requires_grad and not _NoGradRegion()(x).requires_grad  # (what the warning is about)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureWarning)
        for dialect in ("export", "dynamo"):  # these record the regions
            capture(_Autocasts(), [x], dialect)
            capture(_NoGradRegion(), [x], dialect)


def test_the_symbolic_trace_output_check_is_quiet_where_it_cannot_compare_and_keeps_python_state(capsys):
    """A dataclass or sparse output made the comparison raise, reported as "the graph raises"
    (a false warning); the check's calls moved Python's `random` state, printed what forward
    prints a second time, and warned again about a parameter forward writes (a new-user check)."""
    import dataclasses
    import random

    from fxpasses.errors import CaptureWarning

    @dataclasses.dataclass
    class Out:
        a: torch.Tensor
        b: int

    class DataclassOut(nn.Module):
        def forward(self, x):
            print("forward ran")
            return Out(x * 2, random.randint(0, 0))

    class SparseOut(nn.Module):
        def forward(self, x):
            return (x * 2).to_sparse()

    class ClampsItsWeight(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(3), requires_grad=False)

        def forward(self, x):
            self.w.clamp_(max=0.5)
            return x * self.w

    random.seed(5)
    torch.fx.symbolic_trace(DataclassOut())  # (tracing itself runs forward: what it draws is drawn)
    expected = random.random()
    capsys.readouterr()
    random.seed(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureWarning)
        capture(DataclassOut(), [torch.randn(2, 3)], "symbolic_trace")
        capture(SparseOut(), [torch.randn(2, 3)], "symbolic_trace")
    assert random.random() == expected
    assert capsys.readouterr().out == "forward ran\n"  # (tracing's call; the check's are not printed)
    model = ClampsItsWeight()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (tracing writes no parameter: nothing to warn about)
        capture(model, [torch.ones(3)], "symbolic_trace")
    assert torch.equal(model.w, torch.ones(3))  # the check's calls wrote it: put back


def test_an_export_failing_on_a_returned_key_value_cache_says_to_turn_it_off():
    """GPT-2 built with its default use_cache=True returns a DynamicCache, which torch.export
    cannot return: the error said so in torch's words only (a new-user check)."""
    import transformers
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2)).eval()
    ids = torch.randint(0, 100, (1, 8))
    with pytest.raises(Exception) as info:
        capture(model, [ids], "export")
    assert str(info.value).endswith(
        "(GPT2LMHeadModel returns its key/value cache, config.use_cache=True: build it with use_cache=False, "
        "or set model.config.use_cache = False, to capture the forward without it)"
    )
    model.config.use_cache = False
    assert capture(model, [ids], "export").gm is not None


class _Swap(nn.Module):
    def forward(self, x, y):
        return y, x, x


def test_a_forward_dynamo_makes_no_graph_for_is_explained():
    """A forward with no tensor operation (`return y, x, x`) failed the dynamo capture with
    "TorchDynamo produced no graph for _Swap" and nothing else (a new-user check): why, and the
    dialects that capture it, are said."""
    import fxpasses

    inputs = [torch.randn(2), torch.randn(2)]
    with pytest.raises(fxpasses.UserError) as info:
        capture(_Swap(), inputs, "dynamo")
    assert str(info.value) == (
        "TorchDynamo produced no graph for _Swap: TorchDynamo makes none for a forward with no tensor operation to "
        "compile (one that returns its inputs as they are, rearranged, or values computed without tensors); capture "
        'it with capture = "export" or "symbolic_trace" (the dialect argument of fxpasses.capture.capture), which '
        "capture it"
    )
    for dialect in ("export", "symbolic_trace"):  # as it says
        out = capture(_Swap(), inputs, dialect).gm(*inputs)
        assert [torch.equal(a, b) for a, b in zip(out, (inputs[1], inputs[0], inputs[0]))] == [True] * 3, dialect


class _Refuses(torch.nn.Module):
    def forward(self, x):
        raise ValueError("model refuses: expected 3 channels")


def test_a_model_raising_under_dynamo_is_named_by_its_own_exception():
    """TorchDynamo reports a model's own exception as "Unsupported: Observed exception",
    without it; export and symbolic_trace named it (a new-user check). The dynamo capture now
    names what the model raises, as its cause too."""
    from fxpasses.capture import capture
    from fxpasses.errors import UserError

    with pytest.raises(UserError) as info:
        capture(_Refuses(), [torch.randn(4, 5)], "dynamo")
    assert str(info.value) == (
        "TorchDynamo could not capture _Refuses: the model raises ValueError: model refuses: expected 3 channels on "
        "these inputs (run without TorchDynamo too)"
    )
    assert isinstance(info.value.__cause__, ValueError)


def test_symbolic_trace_of_a_traced_size_given_to_a_factory_or_builtin_names_the_line_and_the_fix():
    """symbolic_trace of `torch.ones(idx.shape[0], x.shape[1])` failed with torch's "ones() takes
    1 positional argument but 2 were given" and the general hint about *args forwards (a
    new-user check): the model's line is now named, with the fix (the sizes as one tuple
    trace); a traced size given to range() or int() is named likewise. A TypeError of the
    model's own keeps the general hint."""
    import inspect

    class Factory(torch.nn.Module):
        def forward(self, x, idx):
            return x + torch.ones(idx.shape[0], x.shape[1]).sum()

    class Loop(torch.nn.Module):
        def forward(self, x):
            return sum(x[i] for i in range(x.shape[0]))

    class OwnBug(torch.nn.Module):
        def forward(self, x):
            return x * len(3)

    x, idx = torch.randn(3, 4), torch.zeros(5, dtype=torch.long)
    with pytest.raises(UserError) as info:
        capture(Factory(), (x, idx), "symbolic_trace")
    line = inspect.getsourcelines(Factory.forward)[1] + 1
    assert str(info.value) == (
        "symbolic_trace could not trace Factory: TypeError: ones() takes 1 positional argument but 2 were given "
        f"(at {__file__}:{line}: return x + torch.ones(idx.shape[0], x.shape[1]).sum(): torch.ones was given its "
        "sizes as separate arguments, some of them traced values (sizes read from a traced tensor, as x.shape[0]), "
        "which symbolic_trace cannot pass to it: give the sizes as one tuple (torch.ones((a, b))), or use the "
        "export or dynamo capture)"
    )

    class FactoryFixed(torch.nn.Module):  # the fix the message gives: it traces, and is right at other sizes
        def forward(self, x, idx):
            return x + torch.ones((idx.shape[0], x.shape[1])).sum()

    class Random(torch.nn.Module):  # torch's parser says it otherwise here: "received an invalid combination"
        def forward(self, x):
            return x + torch.randn(x.shape[0], x.shape[1])

    with pytest.raises(UserError) as info:
        capture(Random(), (x,), "symbolic_trace")
    assert str(info.value).startswith("symbolic_trace could not trace Random: TypeError: randn() received an invalid combination")
    assert str(info.value).endswith(
        "torch.randn was given its sizes as separate arguments, some of them traced values (sizes read from a traced "
        "tensor, as x.shape[0]), which symbolic_trace cannot pass to it: give the sizes as one tuple "
        "(torch.randn((a, b))), or use the export or dynamo capture)"
    )
    gm = capture(FactoryFixed(), (x, idx), "symbolic_trace").gm
    other = (torch.randn(2, 6), torch.zeros(7, dtype=torch.long))
    assert torch.equal(gm(*other), other[0] + 42.0)
    with pytest.raises(UserError) as info:
        capture(Loop(), (x,), "symbolic_trace")
    line = inspect.getsourcelines(Loop.forward)[1] + 1
    assert str(info.value) == (
        "symbolic_trace could not trace Loop: TypeError: 'Proxy' object cannot be interpreted as an integer "
        f"(at {__file__}:{line}: return sum(x[i] for i in range(x.shape[0])): a traced value (a Proxy: "
        "symbolic_trace records calls and computes no values; a size read from a traced tensor, as x.shape[0], is "
        "one) was given to Python code that needs a real value (range(), int(), a loop over a size); the export "
        "and dynamo captures take such code)"
    )
    torch.testing.assert_close(capture(Loop(), (x,), "export").gm(x), x[0] + x[1] + x[2])
    with pytest.raises(UserError) as info:
        capture(OwnBug(), (x,), "symbolic_trace")
    assert str(info.value).endswith("(symbolic_trace cannot follow *args/**kwargs forwards and much of what model libraries do, "
                                    "which the export and dynamo captures take; Python control flow on tensor values needs "
                                    "torch.cond in any capture)")


class _Optional(nn.Module):
    def forward(self, a, mask=None, *, scale=None, flag=False):
        r = a.relu()
        if mask is not None:
            r = r + mask
        if scale is not None:
            r = r * scale
        if flag:
            r = r - 1
        return r


def test_symbolic_trace_specialises_the_python_constants_a_call_gives_or_leaves_to_defaults():
    """`forward(a, mask=None, *, scale=None, flag=False)` called without mask: symbolic_trace
    traced mask as an input, so `mask is not None` took the branch for a given mask, and the
    graph raised on the example inputs (with a warning listing unrelated causes); `if flag:`
    failed the trace. Arguments given as, or left to, None or a plain number, bool or string
    are now torch.fx's concrete_args: the graph computes what the call does, keeps the
    arguments' names, and asserts a call gives the same values."""
    x, s = torch.randn(3), torch.randn(3)
    model = _Optional()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no CaptureWarning)
        c = capture(model, [x], "symbolic_trace", {"scale": s})
        flagged = capture(model, [x, None], "symbolic_trace", {"scale": 2.0, "flag": True})
    torch.testing.assert_close(c.gm(*c.inputs, **c.kwargs), model(x, scale=s), rtol=0, atol=0)
    torch.testing.assert_close(c.gm(x, mask=None, scale=s, flag=False), model(x, scale=s), rtol=0, atol=0)
    assert [n.target for n in c.gm.graph.find_nodes(op="placeholder")] == ["a", "mask", "scale", "flag"]
    with pytest.raises(AssertionError, match=r"mask has been specialized to have value None but got another value"):
        c.gm(x, mask=x, scale=s)
    torch.testing.assert_close(flagged.gm(x, None, scale=2.0, flag=True), (x.relu() * 2.0) - 1, rtol=0, atol=0)
    # a tensor given where a default is None stays an input
    given = capture(model, [x, s], "symbolic_trace")
    torch.testing.assert_close(given.gm(x, s), x.relu() + s, rtol=0, atol=0)
    torch.testing.assert_close(given.gm(x, 2 * s), x.relu() + 2 * s, rtol=0, atol=0)


class _NanDefault(nn.Module):
    def forward(self, x, eps=float("nan")):
        return x if math.isnan(eps) else x + eps


def test_symbolic_trace_specialises_a_nan_argument_without_a_check_no_call_passes():
    """A NaN left to its default was traced as an input (`math.isnan(eps)` then failed the
    trace); specialised, torch.fx's check `eps == nan` failed every call (a final new-user
    check). A NaN is specialised without that check."""
    x = torch.randn(3)
    for inputs, kwargs in (([x], {}), ([x, float("nan")], {}), ([x], {"eps": 0.5})):
        c = capture(_NanDefault(), inputs, "symbolic_trace", kwargs)
        torch.testing.assert_close(c.gm(*c.inputs, **c.kwargs), _NanDefault()(*inputs, **kwargs), rtol=0, atol=0)
    assert not [n for n in capture(_NanDefault(), [x], "symbolic_trace").gm.graph.nodes if n.op == "call_function"]
