"""fuse_conv_bn: exact folding in every dialect, and everything it must leave alone."""

from __future__ import annotations

import copy
import operator

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxpasses
from fxpasses.capture import capture
from fxpasses.ops import op_name
from fxpasses.testing import assert_preserves_outputs, normalized_code

DIALECTS = ("symbolic_trace", "dynamo", "export")
BN_NAMES = {"batch_norm", "_native_batch_norm_legit_no_training", "_native_batch_norm_legit", "native_batch_norm"}
CONV_NAMES = {"conv1d", "conv2d", "conv3d", "convolution"}


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    # every capture compiles the same forward code objects again; keep dynamo's recompile
    # limit (8 per code object) from failing later captures
    torch._dynamo.reset()


def randomize_bn(bn: nn.modules.batchnorm._BatchNorm) -> None:
    """Non-trivial statistics and affine parameters, so that a wrong fold shows."""
    with torch.no_grad():
        bn.running_mean.uniform_(-2, 2)
        bn.running_var.uniform_(0.25, 4)
        if bn.weight is not None:
            bn.weight.uniform_(0.5, 2)
            bn.bias.uniform_(-1, 1)


def ops_of(gm: torch.fx.GraphModule) -> list[str]:
    return [op_name(n, gm) for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def run(gm, text="fuse_conv_bn", inputs=None):
    return fxpasses.Pipeline.from_string(text).run(gm, inputs)["fuse_conv_bn"]


class ConvNet(nn.Module):
    """conv(bias) -> bn -> relu -> conv(no bias) -> bn -> + skip, in 1, 2 or 3 dimensions."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        Conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dim]
        BN = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}[dim]
        self.conv1 = Conv(3, 6, 3, padding=1, bias=True)
        self.bn1 = BN(6)
        self.conv2 = Conv(6, 6, 3, padding=1, stride=1, groups=2, bias=False)
        self.bn2 = BN(6, affine=dim != 3)  # the 3-d net also covers BN without weight/bias
        for bn in (self.bn1, self.bn2):
            randomize_bn(bn)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return self.bn2(self.conv2(y)) + y


NOT_CONSTANT = "are graph inputs (placeholders), not constants"


@pytest.mark.parametrize("dim", [1, 2, 3])
def test_convnet_outputs_preserved_and_bn_gone_where_weights_are_constants(dim):
    """symbolic_trace and export: weights are module attributes, folded at pass time.
    TorchDynamo: they are graph inputs; by default left unfused, and the report says why."""
    shape = {1: (2, 3, 10), 2: (2, 3, 6, 6), 3: (1, 3, 4, 4, 4)}[dim]
    model = ConvNet(dim).eval()
    results = assert_preserves_outputs(
        fxpasses.Pipeline.from_string("fuse_conv_bn"),
        model,
        [torch.randn(shape)],
        check_inputs=[[torch.randn(shape) * 3]],
    )
    for dialect, (gm, report) in results.items():
        ops = ops_of(gm)
        gm.graph.lint()
        pr = report["fuse_conv_bn"]
        if dialect == "dynamo":
            assert pr.counters == {"not_constant": 2, "skipped": 2} and not pr.changed, pr.counters
            assert len(pr.skipped) == 2 and all(NOT_CONSTANT in why for _, why in pr.skipped), pr.skipped
            assert sum(o in BN_NAMES for o in ops) == 2 and "rsqrt" not in ops, ops
            continue
        assert pr.counters == {"fused": 2}, dialect
        assert not BN_NAMES & set(ops), (dialect, ops)
        assert sum(o in CONV_NAMES for o in ops) == 2, (dialect, ops)
        x = torch.randn(shape)  # against eager too, not only against the captured graph
        torch.testing.assert_close(gm(x), model(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dim", [1, 2, 3])
def test_dynamo_fold_in_graph_option_fuses_with_the_fold_as_graph_code(dim):
    """Opt-in: the fold runs in the graph on the placeholders' values at every call, so it
    follows weights changed after capture."""
    shape = {1: (2, 3, 10), 2: (2, 3, 6, 6), 3: (1, 3, 4, 4, 4)}[dim]
    model = ConvNet(dim).eval()
    x0 = torch.randn(shape)
    cap = capture(model, [x0], "dynamo")
    unfused = copy.deepcopy(cap.gm)
    n_before = len(cap.gm.graph.nodes)
    report = run(cap.gm, "fuse_conv_bn{fold_in_graph=true},eliminate_dead_code")
    assert report.counters == {"fused": 2}
    ops = ops_of(cap.gm)
    assert not BN_NAMES & set(ops) and sum(o in CONV_NAMES for o in ops) == 2, ops
    assert "rsqrt" in ops and len(cap.gm.graph.nodes) > n_before  # the per-call weight arithmetic
    x = torch.randn(shape)
    inputs = [x if t is x0 else t for t in cap.inputs]  # the parameters are inputs too
    torch.testing.assert_close(_first(cap.gm(*inputs)), model(x), atol=1e-5, rtol=1e-5)
    # other weights and statistics (positive stay positive) given as the placeholders' values
    other = [t if t is x else t.detach() * 1.5 for t in inputs]
    with torch.no_grad():
        torch.testing.assert_close(_first(cap.gm(*other)), _first(unfused(*other)), atol=1e-5, rtol=1e-5)


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def test_symbolic_trace_fused_module_equals_torch_fusion_and_originals_untouched():
    model = ConvNet(2).eval()
    gm = torch.fx.symbolic_trace(model)
    w_before = model.conv1.weight.detach().clone()
    convs = [n for n in gm.graph.nodes if n.op == "call_module" and n.target.startswith("conv")]
    report = run(gm)
    assert report.counters == {"fused": 2}
    # the conv nodes themselves now call the fused modules: same nodes, names and source lines
    assert [n for n in gm.graph.nodes if n.op == "call_module"] == convs
    assert [(n.name, n.target) for n in convs] == [("conv1", "conv1_fused"), ("conv2", "conv2_fused")]
    assert all("bn" not in n.name for n in gm.graph.nodes)
    expected = torch.nn.utils.fusion.fuse_conv_bn_eval(model.conv1, model.bn1)
    assert torch.equal(gm.conv1_fused.weight, expected.weight)
    assert torch.equal(gm.conv1_fused.bias, expected.bias)
    assert gm.conv2_fused.bias is not None  # conv without bias gets one
    # the user's modules (shared with the traced module) are not modified
    assert torch.equal(model.conv1.weight, w_before)
    assert model.conv2.bias is None
    assert gm.conv1 is model.conv1


def test_export_constant_fold_stores_new_buffers():
    model = ConvNet(2).eval()
    cap = capture(model, [torch.randn(1, 3, 6, 6)], "export")
    gm = cap.gm
    run(gm)
    convs = [n for n in gm.graph.nodes if op_name(n) in CONV_NAMES]
    assert [n.args[1].target for n in convs] == ["conv1_fused_weight", "conv2_fused_weight"]
    assert [n.args[2].target for n in convs] == ["conv1_fused_bias", "conv2_fused_bias"]
    assert "conv1_fused_weight" in gm.state_dict()
    # no dead nodes of the pass's own making are left behind
    assert not [n for n in gm.graph.nodes if n.op == "get_attr" and not n.users and "bn" in n.target and "num_batches" not in n.target]


class ResidualBlock(nn.Module):
    """torchvision's BasicBlock (and transformers' ResNet layer): the second batch norm's output
    is updated in place by the residual add, ``out = bn2(conv2(out)); out += identity``; with
    ``downsample`` the identity is a strided conv + BN of the input (three pairs)."""

    def __init__(self, downsample: bool = False) -> None:
        super().__init__()
        stride = 2 if downsample else 1
        self.conv1 = nn.Conv2d(4, 4, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(4)
        self.downsample = (
            nn.Sequential(nn.Conv2d(4, 4, 1, stride=stride, bias=False), nn.BatchNorm2d(4)) if downsample else None
        )
        for bn in (self.bn1, self.bn2, *([self.downsample[1]] if downsample else [])):
            randomize_bn(bn)

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return torch.relu(out)


@pytest.mark.parametrize("downsample", [False, True], ids=["basic", "downsample"])
def test_residual_block_whose_bn_output_is_added_to_in_place_fuses_every_pair(downsample):
    """The in-place add writes the batch norm's (fresh) output, not its weight or statistics:
    export's ``aten.batch_norm`` is tagged maybe_aliasing_or_mutating, which once made the
    analysis think its output might be its weight."""
    model = ResidualBlock(downsample).eval()
    x = torch.randn(2, 4, 8, 8)
    # dynamo: the parameters are placeholders, fused with the fold as graph code on request
    results = assert_preserves_outputs(
        "fuse_conv_bn{fold_in_graph=true}", model, [x], check_inputs=[[torch.randn(2, 4, 8, 8) * 3]]
    )
    pairs = 3 if downsample else 2
    for dialect, (gm, report) in results.items():
        pr = report["fuse_conv_bn"]
        assert pr.counters == {"fused": pairs} and pr.skipped == [], (dialect, pr.counters, pr.skipped)
        ops = ops_of(gm)
        assert not BN_NAMES & set(ops) and sum(o in CONV_NAMES for o in ops) == pairs, (dialect, ops)
        if dialect != "dynamo":  # against eager too (dynamo's graph takes the parameters as inputs)
            torch.testing.assert_close(gm(x), model(x), atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------ issue 5, case 11


class ConvBNReLU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, bias=False)
        self.bn = nn.BatchNorm2d(4)
        randomize_bn(self.bn)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


@pytest.mark.parametrize("decompose", [False, True])
def test_case11_export_conv_without_bias_bn_relu(decompose):
    model = ConvBNReLU().eval()
    x = torch.randn(1, 3, 8, 8)
    ep = torch.export.export(model, (x,))
    if decompose:
        ep = ep.run_decompositions()
    gm = ep.module()
    before = [(n.op, str(n.target)) for n in gm.graph.nodes if n.op == "call_function"]
    if decompose:
        assert before == [
            ("call_function", "aten.convolution.default"),
            ("call_function", "aten._native_batch_norm_legit_no_training.default"),
            ("call_function", "<built-in function getitem>"),
            ("call_function", "aten.relu.default"),
        ]
        conv = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.convolution.default)
        assert conv.args[2] is None
    report = run(gm)
    assert report.counters == {"fused": 1}
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    conv_target = torch.ops.aten.convolution.default if decompose else torch.ops.aten.conv2d.default
    assert [n.target for n in calls] == [conv_target, torch.ops.aten.relu.default]
    conv = calls[0]
    assert isinstance(conv.args[2], torch.fx.Node) and conv.args[2].op == "get_attr"
    assert tuple(getattr(gm, conv.args[2].target).shape) == (4,)
    gm.graph.lint()
    torch.testing.assert_close(gm(x), model(x), atol=1e-5, rtol=0)
    x2 = torch.randn(1, 3, 8, 8)
    torch.testing.assert_close(gm(x2), model(x2), atol=1e-5, rtol=0)


# ------------------------------------------------------------------ issue 5, case 9


class SharedConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1)
        self.bn = nn.BatchNorm2d(2)
        randomize_bn(self.bn)

    def forward(self, x, y):
        return self.conv(x), self.bn(self.conv(y))


def test_case9_conv_called_twice_is_cloned_for_the_fused_site():
    model = SharedConv().eval()
    x, y = torch.randn(1, 2, 4, 4), torch.randn(1, 2, 4, 4)
    want = model(x, y)
    for dialect in DIALECTS:
        torch._dynamo.reset()
        cap = capture(model, [x, y], dialect)
        # dynamo: parameters are placeholders, fused only on request (fold as graph code)
        report = run(cap.gm, "fuse_conv_bn{fold_in_graph=true}" if dialect == "dynamo" else "fuse_conv_bn")
        assert report.counters == {"fused": 1}, dialect
        ops = ops_of(cap.gm)
        assert not BN_NAMES & set(ops) and sum(o in CONV_NAMES for o in ops) == 2, (dialect, ops)
        got = cap.gm(*cap.inputs)
        torch.testing.assert_close(got[0], want[0], atol=1e-6, rtol=0)
        torch.testing.assert_close(got[1], want[1], atol=1e-6, rtol=0)
        if dialect == "symbolic_trace":
            # the unfused site still calls the original, unmodified conv
            assert [n.target for n in cap.gm.graph.nodes if n.op == "call_module"] == ["conv", "conv_fused"]
            assert cap.gm.conv is not cap.gm.conv_fused
            torch.testing.assert_close(cap.gm.conv(x), want[0], atol=0, rtol=0)


class SharedBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(2, 3, 3)
        self.conv2 = nn.Conv2d(2, 3, 3)
        self.bn = nn.BatchNorm2d(3)
        randomize_bn(self.bn)

    def forward(self, x):
        return self.bn(self.conv1(x)) + self.bn(self.conv2(x))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_case9_bn_shared_by_two_convs_is_left_alone(dialect):
    model = SharedBN().eval()
    cap = capture(model, [torch.randn(1, 2, 5, 5)], dialect)
    code = normalized_code(cap.gm)
    results = assert_preserves_outputs("fuse_conv_bn", model, [torch.randn(1, 2, 5, 5)], dialects=[dialect])
    gm, report = results[dialect]
    pr = report["fuse_conv_bn"]
    assert pr.counters == {"skipped": 2} and not pr.changed
    assert all("shared" in why or "more than one site" in why for _, why in pr.skipped), pr.skipped
    assert normalized_code(gm) == code


class TiedBNs(nn.Module):
    """Two BN modules that share a weight and a running mean (tied tensors), each after its
    own conv: two separate BNs, unlike SharedBN's one BN called twice."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(2, 3, 3, padding=1), nn.Conv2d(2, 3, 3, padding=1)
        self.bn1, self.bn2 = nn.BatchNorm2d(3), nn.BatchNorm2d(3)
        randomize_bn(self.bn1)
        randomize_bn(self.bn2)
        self.bn2.weight = self.bn1.weight
        self.bn2.running_mean = self.bn1.running_mean

    def forward(self, x):
        return self.bn1(self.conv1(x)) + self.bn2(self.conv2(x))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_bns_that_share_some_tensors_fuse_in_every_dialect(dialect):
    """symbolic_trace fused both pairs (two modules), torch.export and TorchDynamo skipped both
    ("statistics are shared"): a functional batch norm is left alone only when it reads the
    very same weight, bias and statistics as another (one BN module called twice, case 9)."""
    model = TiedBNs().eval()
    x = torch.randn(2, 2, 5, 5)
    results = assert_preserves_outputs(
        "fuse_conv_bn{fold_in_graph=true}", model, [x], dialects=[dialect], check_inputs=[[torch.randn(2, 2, 5, 5) * 3]]
    )
    gm, report = results[dialect]
    assert report["fuse_conv_bn"].counters == {"fused": 2}, report["fuse_conv_bn"].skipped
    left = [
        n.name
        for n in gm.graph.nodes
        if (n.op == "call_function" and "batch_norm" in str(n.target))
        or (n.op == "call_module" and isinstance(gm.get_submodule(n.target), nn.modules.batchnorm._BatchNorm))
    ]
    assert left == []


# ------------------------------------------------------------------ issue 5, case 10


class ConvBN(nn.Module):
    def __init__(self, **bn_kwargs) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4, **bn_kwargs)

    def forward(self, x):
        return self.bn(self.conv(x))


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda: ConvBN().train(), "training mode"),
        (lambda: ConvBN(track_running_stats=False).eval(), "track_running_stats=False"),
    ],
    ids=["train", "no_running_stats"],
)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_case10_training_and_batch_statistics_are_skipped_with_reason(make, reason, dialect):
    model = make()
    x = torch.randn(2, 3, 6, 6)
    cap = capture(copy.deepcopy(model), [x], dialect)
    code = normalized_code(cap.gm)
    before = cap.gm(*cap.inputs)
    report = fxpasses.Pipeline.from_string("fuse_conv_bn").run(cap.gm)  # no exception
    pr = report["fuse_conv_bn"]
    assert pr.status == "ok" and not pr.changed and "fused" not in pr.counters
    assert len(pr.skipped) == 1 and reason in pr.skipped[0][1], pr.skipped
    assert normalized_code(cap.gm) == code
    torch.testing.assert_close(cap.gm(*cap.inputs), before, atol=0, rtol=0)


# ------------------------------------------------------------------ other refusals


class ConvUsedTwice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        randomize_bn(self.bn)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y), y


@pytest.mark.parametrize("dialect", DIALECTS)
def test_conv_output_with_other_users_is_skipped(dialect):
    model = ConvUsedTwice().eval()
    results = assert_preserves_outputs("fuse_conv_bn", model, [torch.randn(1, 3, 6, 6)], dialects=[dialect])
    gm, report = results[dialect]
    pr = report["fuse_conv_bn"]
    assert not pr.changed and len(pr.skipped) == 1 and "other users" in pr.skipped[0][1]
    assert BN_NAMES & set(ops_of(gm))


class StatsAsInput(nn.Module):
    """BN statistics that are graph inputs: not constants."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.register_buffer("var", torch.rand(4) + 0.5)
        self.gamma = nn.Parameter(torch.rand(4) + 0.5)
        self.beta = nn.Parameter(torch.randn(4))

    def forward(self, x, mean):
        return F.batch_norm(self.conv(x), mean, self.var, self.gamma, self.beta, False, 0.1, 1e-3)


def test_non_constant_statistics_skipped_unless_fold_in_graph_for_dynamo():
    model = StatsAsInput().eval()
    inputs = [torch.randn(1, 3, 6, 6), torch.randn(4)]
    other = [[torch.randn(1, 3, 6, 6), torch.randn(4) * 5]]  # other values of the mean too
    dialects = ["dynamo", "export", "symbolic_trace"]
    results = assert_preserves_outputs("fuse_conv_bn", model, inputs, dialects=dialects, check_inputs=other)
    export_report = results["export"][1]["fuse_conv_bn"]
    assert not export_report.changed and export_report.counters == {"not_constant": 1, "skipped": 1}
    assert "not constants" in export_report.skipped[0][1]
    gm, report = results["dynamo"]  # by default: left alone, saying why
    pr = report["fuse_conv_bn"]
    assert not pr.changed and pr.counters == {"not_constant": 1, "skipped": 1}
    assert NOT_CONSTANT in pr.skipped[0][1] and "fold_in_graph=true" in pr.skipped[0][1], pr.skipped
    assert "batch_norm" in ops_of(gm) and "rsqrt" not in ops_of(gm)
    # symbolic_trace: an nn.Conv2d module followed by F.batch_norm is not a recognised pair
    assert "batch_norm" in ops_of(results["symbolic_trace"][0])
    # on request, torch level: the fold is emitted as graph code
    results = assert_preserves_outputs(
        "fuse_conv_bn{fold_in_graph=true}", model, inputs, dialects=dialects, check_inputs=other
    )
    gm, report = results["dynamo"]
    assert report["fuse_conv_bn"].counters == {"fused": 1}
    assert "batch_norm" not in ops_of(gm)
    assert {"rsqrt", "type_as"} <= set(ops_of(gm))
    assert not results["export"][1]["fuse_conv_bn"].changed  # ATen graphs: never in graph code


def test_statistics_computed_in_the_graph_are_not_constants():
    """A torch-level graph (symbolic_trace) whose BN weight is computed in the graph: not a
    get_attr constant either, so skipped by default."""

    class Computed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 3, 3, 3))
            self.register_buffer("mean", torch.randn(4))
            self.register_buffer("var", torch.rand(4) + 0.5)
            self.gamma = nn.Parameter(torch.rand(4) + 0.5)

        def forward(self, x):  # the BN weight is computed from a parameter (a proxy when traced)
            return F.batch_norm(F.conv2d(x, self.w), self.mean, self.var, self.gamma * 2, None, False, 0.1, 1e-3)

    model = Computed().eval()
    inputs = [torch.randn(1, 3, 6, 6)]
    gm = torch.fx.symbolic_trace(model)
    want = model(*inputs)
    pr = run(gm)
    assert pr.counters == {"not_constant": 1, "skipped": 1} and "computed in the graph" in pr.skipped[0][1]
    pr = run(gm, "fuse_conv_bn{fold_in_graph=true}")
    assert pr.counters == {"fused": 1} and "batch_norm" not in ops_of(gm)
    torch.testing.assert_close(gm(*inputs), want, atol=1e-5, rtol=1e-5)


class FunctionalConstants(nn.Module):
    """F.conv1d + F.batch_norm on attributes: get_attr constants at torch level."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(5, 2, 3))
        self.register_buffer("rm", torch.randn(5))
        self.register_buffer("rv", torch.rand(5) + 0.5)

    def forward(self, x):
        return F.batch_norm(F.conv1d(x, self.w, padding=1), self.rm, self.rv, None, None, False, 0.1, 1e-5)


def test_torch_level_functional_with_constants_is_folded():
    model = FunctionalConstants().eval()
    results = assert_preserves_outputs("fuse_conv_bn", model, [torch.randn(2, 2, 7)], check_inputs=[[torch.randn(2, 2, 7)]])
    gm, report = results["symbolic_trace"]
    assert report["fuse_conv_bn"].counters == {"fused": 1}
    assert ops_of(gm) == ["conv1d"]
    conv = next(n for n in gm.graph.nodes if n.op == "call_function")
    assert conv.kwargs == {"padding": 1} and conv.args[2].target == "w_fused_bias"


class TransposedConvBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        randomize_bn(self.bn)

    def forward(self, x):
        return self.bn(self.conv(x))


def test_transposed_convolution_is_not_fused():
    model = TransposedConvBN().eval()
    for dialect in DIALECTS:
        results = assert_preserves_outputs("fuse_conv_bn", model, [torch.randn(1, 3, 5, 5)], dialects=[dialect])
        assert not results[dialect][1]["fuse_conv_bn"].changed, dialect
    gm = torch.export.export(model, (torch.randn(1, 3, 5, 5),)).run_decompositions().module()
    pr = run(gm)
    assert not pr.changed and "transposed" in pr.skipped[0][1]


def test_saved_statistics_output_used_is_skipped():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    w, rm, rv = (g.get_attr(n) for n in ("w", "rm", "rv"))
    conv = g.call_function(torch.ops.aten.convolution.default, (x, w, None, [1], [0], [1], False, [0], 1))
    bn = g.call_function(torch.ops.aten._native_batch_norm_legit_no_training.default, (conv, None, None, rm, rv, 0.1, 1e-5))
    out0 = g.call_function(operator.getitem, (bn, 0))
    out1 = g.call_function(operator.getitem, (bn, 1))
    g.output((out0, out1))
    root = nn.Module()
    root.w = nn.Parameter(torch.randn(2, 2, 1))
    root.register_buffer("rm", torch.zeros(2))
    root.register_buffer("rv", torch.ones(2))
    gm = torch.fx.GraphModule(root, g)
    pr = run(gm)
    assert not pr.changed and "saved mean/invstd" in pr.skipped[0][1]


def test_float64_conv_keeps_its_dtype_and_precision():
    model = ConvBNReLU().eval().to(torch.float64)
    x = torch.randn(1, 3, 8, 8, dtype=torch.float64)
    # fold_in_graph: dynamo's fold (graph code) is checked too; the other dialects fold constants
    results = assert_preserves_outputs("fuse_conv_bn{fold_in_graph=true}", model, [x], atol=1e-12, rtol=1e-12)
    for dialect, (gm, report) in results.items():
        assert report["fuse_conv_bn"].counters == {"fused": 1}, dialect


def test_rollback_restores_graph_and_module_when_a_later_pass_fails_lint():
    """The pass adds modules/buffers: a failure in the same pass must leave nothing behind."""
    model = ConvBNReLU().eval()
    gm = torch.fx.symbolic_trace(model)
    code = normalized_code(gm)
    names = set(dict(gm.named_modules()))
    from fxpasses.builtin_passes.conv_bn import FuseConvBN

    class Broken(FuseConvBN):
        name = "broken_fuse"

        def finish(self, gm, ctx):
            super().finish(gm, ctx)
            raise RuntimeError("boom")

    with pytest.raises(fxpasses.PassFailedError, match="boom"):
        fxpasses.Pipeline([Broken]).run(gm)
    assert normalized_code(gm) == code
    assert set(dict(gm.named_modules())) == names


# ------------------------------------------------------------------ helpers (fast paths)


def test_a_copied_conv_has_its_own_containers_with_the_same_contents():
    from collections import OrderedDict

    from fxpasses.builtin_passes.conv_bn import _copy_conv

    class Hooks(OrderedDict):
        pass

    conv = nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect")
    conv.register_forward_hook(lambda m, i, o: o + 1)
    conv._forward_pre_hooks.tag = "kept"  # an OrderedDict with attributes: copy.copy keeps them
    conv._state_dict_hooks = Hooks(conv._state_dict_hooks)  # a subclass stays one
    fused = _copy_conv(conv)
    assert type(fused) is nn.Conv2d and fused is not conv
    for key, value in conv.__dict__.items():
        copied = fused.__dict__[key]
        if isinstance(value, (dict, list, set)):
            assert copied is not value and type(copied) is type(value) and copied == value, key
            if isinstance(value, dict):
                assert list(copied) == list(value), key
        else:
            assert copied is value, key
    assert fused._forward_pre_hooks.tag == "kept"
    assert fused._parameters["weight"] is conv.weight  # tensors shared, for the caller to replace
    fused.weight = nn.Parameter(torch.zeros_like(conv.weight))
    assert conv._parameters["weight"] is not fused.weight
    x = torch.randn(1, 2, 5, 5)
    assert torch.equal(fused(x), F.conv2d(F.pad(x, [1, 1, 1, 1], mode="reflect"), fused.weight, conv.bias) + 1)


def test_module_references_count_every_call_and_read_under_each_module():
    from fxpasses.builtin_passes.conv_bn import FuseConvBN
    from fxpasses.context import PassContext

    shared = nn.BatchNorm2d(3)
    root = nn.Module()
    root.a = nn.Module()
    root.a.conv = nn.Conv2d(3, 3, 1)
    root.a.bn = shared
    root.b = nn.Module()
    root.b.bn = shared  # the same module under two paths
    root.register_buffer("scale", torch.ones(3))
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_module("a.conv", (x,))
    y = g.call_module("a.bn", (y,))
    y = g.call_module("b.bn", (y,))
    w = g.get_attr("a.conv.weight")
    s = g.get_attr("scale")
    g.output((y, w, s))
    gm = torch.fx.GraphModule(root, g)
    with gm.graph.inserting_before(gm.graph.output_node()):
        # resolves to nothing (GraphModule would not copy it, so added afterwards): counts "a" only
        m = gm.graph.create_node("get_attr", "a.missing.thing")
    gm.graph.output_node().args = ((*gm.graph.output_node().args[0], m),)
    p = FuseConvBN()
    p.setup(gm, PassContext(gm, pass_name="fuse_conv_bn", dialect="symbolic_trace"))
    refs = p._refs(PassContext(gm, pass_name="fuse_conv_bn", dialect="symbolic_trace"))
    assert refs == {id(gm.a): 4, id(gm.a.conv): 2, id(shared): 2, id(gm.b): 1}


# ---------------------------------------------------------------------- batched folds

def _random_pair(dim: int, dtype: torch.dtype, bias: bool, affine: bool, seed: int) -> tuple[nn.Module, nn.Module]:
    g = torch.Generator().manual_seed(seed)
    conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dim](3, 5, 3, bias=bias)
    bn = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}[dim](5, affine=affine)
    with torch.no_grad():
        conv.weight.copy_(torch.randn(conv.weight.shape, generator=g))
        if bias:
            conv.bias.copy_(torch.randn(5, generator=g))
        bn.running_mean.copy_(torch.randn(5, generator=g))
        bn.running_var.copy_(torch.rand(5, generator=g) * 4 + 0.01)
        if affine:
            bn.weight.copy_(torch.randn(5, generator=g))
            bn.bias.copy_(torch.randn(5, generator=g))
    return conv.to(dtype).eval(), bn.to(dtype).eval()


@pytest.mark.parametrize("batch_bytes", [None, 600])
def test_batched_folds_are_bit_for_bit_the_folds_of_each_pair(monkeypatch, batch_bytes):
    """_Folds stacks the pairs whose inputs agree and folds a batch at a time: every result
    must equal _fused_weights (fuse_conv_bn_weights in at least float32) on its own pair, in
    every dtype, with and without conv bias and BN affine parameters; with a small
    _BATCH_BYTES the groups are split into several batches (and 3-d weights fold alone)."""
    from fxpasses.builtin_passes import conv_bn

    if batch_bytes is not None:
        monkeypatch.setattr(conv_bn, "_BATCH_BYTES", batch_bytes)
    folds = conv_bn._Folds()
    pairs, results = [], []
    seed = 0
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        for dim in (1, 2, 3):
            for bias in (True, False):
                for affine in (True, False):
                    for _ in range(3):  # several pairs of the same kind: one group
                        seed += 1
                        conv, bn = _random_pair(dim, dtype, bias, affine, seed)
                        args = (conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
                        pairs.append(args)
                        results.append(folds.add(*args))
    # one group per kind (dtype, rank, bias, affine) of pair: 4 * 3 * 2 * 2. With the bound
    # at 600 bytes, weights over it were folded at once, alone: 3-d ones in every dtype (810
    # bytes in float16) and 2-d ones in float64 (1,080), 5 (dtype, rank) kinds * 4; the
    # 2-d float16 weights (270 bytes) fold two a batch, the float32 ones (540) one a batch
    assert len(folds._groups) == (48 if batch_bytes is None else 48 - 5 * 4)
    folds.flush()
    for args, (fw, fb) in zip(pairs, results):
        ew, eb = conv_bn._fused_weights(*args)
        assert fw.dtype == args[0].dtype and fb.dtype == args[0].dtype
        assert fw.shape == args[0].shape and fb.shape == args[2].shape
        assert torch.equal(fw, ew), (fw - ew).abs().max()
        assert torch.equal(fb, eb), (fb - eb).abs().max()
    assert not folds._pending and not folds._groups


def test_batched_folds_keep_the_weights_memory_format_and_parameter_flags():
    from fxpasses.builtin_passes import conv_bn

    conv, bn = _random_pair(2, torch.float32, True, True, 7)
    w = conv.weight.detach().to(memory_format=torch.channels_last)
    folds = conv_bn._Folds()
    fw, fb = folds.add(w, conv.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias, requires_grad=True)
    fw2, _ = folds.add(w, conv.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias, requires_grad=False)
    folds.flush()
    assert isinstance(fw, nn.Parameter) and fw.requires_grad and not fw2.requires_grad
    assert fw.is_contiguous(memory_format=torch.channels_last)
    ew, eb = conv_bn._fused_weights(w, conv.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
    assert torch.equal(fw, ew) and torch.equal(fb, eb) and torch.equal(fw2, ew)


class ConvBNBN(nn.Module):
    """conv -> bn -> bn, three times: the second BN of each chain is fused into the conv
    already fused with the first, whose weights are still to be computed in the batch."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(3, 3, 3, padding=1) for _ in range(3))
        self.bn1 = nn.ModuleList(nn.BatchNorm2d(3) for _ in range(3))
        self.bn2 = nn.ModuleList(nn.BatchNorm2d(3) for _ in range(3))
        for bn in [*self.bn1, *self.bn2]:
            randomize_bn(bn)

    def forward(self, x):
        for conv, b1, b2 in zip(self.convs, self.bn1, self.bn2):
            x = b2(b1(conv(x)))
        return x


@pytest.mark.parametrize("dialect", ["symbolic_trace", "export"])
def test_chained_batch_norms_fold_into_a_conv_fused_in_the_same_run(dialect):
    model = ConvBNBN().eval()
    x = torch.randn(2, 3, 6, 6)
    gm = capture(model, [x], dialect).gm
    report = run(gm)
    assert report.counters["fused"] == 6
    ops = ops_of(gm)
    assert not set(ops) & BN_NAMES
    assert sum(o in CONV_NAMES for o in ops) == 3
    torch.testing.assert_close(gm(x), model(x), atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- modules traced through
# symbolic_trace records the body of a module that is not a torch.nn leaf: a BatchNorm2d
# subclass whose forward calls F.batch_norm (timm's BatchNormAct2d, in timm's regnet, resnet
# and efficientnet) gives call_module conv -> call_function batch_norm on get_attr
# statistics, and a Conv2d subclass calling F.conv2d (a "same"-padding conv) gives
# call_function conv on get_attr weights -> call_module BatchNorm. Both were left unfused
# with no skip reason (found on timm's regnetx_002 by the real-model sweep).


class BatchNormAct(nn.BatchNorm2d):
    """timm.layers.BatchNormAct2d, reduced: the rank assert, F.batch_norm, the activation."""

    def forward(self, x):
        torch._assert(x.ndim == 4, "expected a 4-d input")
        y = F.batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, self.training, self.momentum, self.eps
        )
        return F.relu(y)


class SamePadConv(nn.Conv2d):
    """A Conv2d whose forward pads ("same" for stride 1) then calls F.conv2d on its weight."""

    def forward(self, x):
        return F.conv2d(F.pad(x, (1, 1, 1, 1)), self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


class TracedThrough(nn.Module):
    def __init__(self, conv_bias: bool = True) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, bias=conv_bias)
        self.bn1 = BatchNormAct(6)
        self.conv2 = SamePadConv(6, 4, 3, bias=conv_bias)
        self.bn2 = nn.BatchNorm2d(4)
        randomize_bn(self.bn1)
        randomize_bn(self.bn2)

    def forward(self, x):
        return self.bn2(self.conv2(self.bn1(self.conv1(x))))


@pytest.mark.parametrize("conv_bias", [True, False], ids=["bias", "no_bias"])
def test_modules_traced_through_fuse_on_every_dialect(conv_bias):
    model = TracedThrough(conv_bias).eval()
    x = torch.randn(2, 3, 9, 9)
    results = assert_preserves_outputs("fuse_conv_bn", model, [x], check_inputs=[[torch.randn(2, 3, 9, 9) * 3]])
    for dialect, (gm, report) in results.items():
        pr = report["fuse_conv_bn"]
        ops = ops_of(gm)
        if dialect == "dynamo":  # parameters are graph inputs there: skipped, as for plain modules
            assert pr.counters == {"not_constant": 2, "skipped": 2}, pr.counters
            continue
        assert pr.counters == {"fused": 2}, (dialect, pr.counters, pr.skipped)
        assert not BN_NAMES & set(ops), (dialect, ops)
        assert sum(o in CONV_NAMES or o.startswith("Conv2d") for o in ops) == 2, (dialect, ops)
        torch.testing.assert_close(gm(x), model(x), atol=1e-5, rtol=1e-5)
    gm, _ = results["symbolic_trace"]
    # BatchNormAct's statistics are gone with the batch norm; the conv module calls the fused copy
    assert not [n.target for n in gm.graph.nodes if n.op == "get_attr" and n.target.startswith("bn1.")]
    fused1 = next(n for n in gm.graph.nodes if n.op == "call_module" and n.target.startswith("conv1"))
    assert fused1.target == "conv1_fused"
    ref_w, ref_b = torch.nn.utils.fusion.fuse_conv_bn_weights(
        model.conv1.weight, model.conv1.bias, model.bn1.running_mean, model.bn1.running_var,
        model.bn1.eps, model.bn1.weight, model.bn1.bias,
    )
    torch.testing.assert_close(gm.conv1_fused.weight, ref_w, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(gm.conv1_fused.bias, ref_b, rtol=1e-6, atol=1e-6)
    # the rank assert still reads the conv output (same shape after fusion)
    assert any(n.target is getattr and n.args[1] == "ndim" and n.args[0] is fused1 for n in gm.graph.nodes)
    assert model.conv1.weight.data_ptr() != gm.conv1_fused.weight.data_ptr()  # originals untouched


def test_bn_traced_through_in_training_mode_or_reading_the_conv_values_is_skipped_with_reason():
    model = TracedThrough()
    model.eval()
    model.bn1.train()
    gm = torch.fx.symbolic_trace(model)
    pr = run(gm)
    assert pr.counters == {"fused": 1, "skipped": 1}, pr.counters
    assert pr.skipped[0][1] == "BatchNorm is in training mode (normalises with batch statistics)"

    class ValueUser(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            self.bn = BatchNormAct(4).eval()

        def forward(self, x):
            y = self.conv(x)
            return self.bn(y) + y.mean()

    gm = torch.fx.symbolic_trace(ValueUser().eval())
    pr = run(gm)
    assert pr.counters == {"skipped": 1} and "other users" in pr.skipped[0][1], pr.skipped


def test_same_pad_conv_with_a_metadata_user_is_skipped_with_reason():
    """A functional conv is replaced by a new node at the batch norm: a user before it that
    reads the old output (even only its rank) keeps the pair apart, and the report says so."""

    class Checked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = SamePadConv(3, 4, 3)
            self.bn = nn.BatchNorm2d(4).eval()

        def forward(self, x):
            y = self.conv(x)
            torch._assert(y.ndim == 4, "rank")
            return self.bn(y)

    gm = torch.fx.symbolic_trace(Checked().eval())
    pr = run(gm)
    assert pr.counters == {"skipped": 1} and "other users" in pr.skipped[0][1], pr.skipped


class ParametrizedConvNet(nn.Module):
    """A conv whose weight a torch parametrization computes at each call, then BN and ReLU."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        from torch.nn.utils import parametrizations

        conv = nn.Conv2d(3, 6, 3, padding=1)
        self.conv = parametrizations.weight_norm(conv) if kind == "weight_norm" else parametrizations.spectral_norm(conv)
        self.bn = nn.BatchNorm2d(6)
        randomize_bn(self.bn)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


@pytest.mark.parametrize("kind", ["weight_norm", "spectral_norm"])
def test_parametrized_conv_fuses_under_the_inference_preset_in_every_dialect(kind):
    """A weight-norm (or eval-mode spectral-norm) conv before a BN stayed unfused: in
    symbolic_trace the Parametrized* module was not a Conv2d by type, and its class not a
    standard one (so it "may write" its state); in export fuse_conv_bn ran before
    fold_constants computed the weight. The fused conv is a plain Conv2d holding the value."""
    model = ParametrizedConvNet(kind).eval()
    x = torch.randn(2, 3, 6, 6)
    results = assert_preserves_outputs(
        fxpasses.Pipeline.from_preset("inference"), model, [x], check_inputs=[[torch.randn(2, 3, 6, 6) * 3]]
    )
    for dialect, (gm, report) in results.items():
        pr = report["fuse_conv_bn"]
        if dialect == "dynamo":  # the parametrization's tensors are graph inputs
            assert pr.counters == {"not_constant": 1, "skipped": 1}, pr.counters
            continue
        assert pr.counters == {"fused": 1}, (dialect, pr.counters, pr.skipped)
        assert not BN_NAMES & set(ops_of(gm)), (dialect, ops_of(gm))
        torch.testing.assert_close(gm(x), model(x), atol=1e-5, rtol=1e-5)
        if dialect == "symbolic_trace":
            (conv,) = [m for m in gm.modules() if isinstance(m, nn.Conv2d)]
            assert type(conv) is nn.Conv2d and not hasattr(conv, "parametrizations")
            assert conv.weight.requires_grad and type(conv.weight) is nn.Parameter  # as its originals did
    # the model itself is untouched: still parametrized, its BN still there
    assert type(model.conv).__name__ == "ParametrizedConv2d" and isinstance(model.bn, nn.BatchNorm2d)


def test_spectral_norm_in_training_mode_writes_its_vectors_so_the_pair_is_skipped():
    """spectral_norm's parametrization takes a power-iteration step in place at each call in
    training mode: its conv's weight then changes call to call, and folding it is wrong."""
    model = ParametrizedConvNet("spectral_norm").eval()
    model.conv.train()
    gm = torch.fx.symbolic_trace(model)
    pr = run(gm)
    assert pr.counters == {"skipped": 1}, pr.counters
    ((where, why),) = pr.skipped
    assert where == "bn" and "module 'conv'" in why and "spectral_norm in training mode" in why, why


def test_conv_subclass_called_as_a_leaf_is_skipped_with_reason():
    """A Conv2d subclass that a custom tracer keeps as a leaf may compute anything in its
    forward: left alone, and the report says so (it was passed over silently)."""

    class ScaledConv(nn.Conv2d):
        def forward(self, x):
            return super().forward(x) * 2

    class Tracer(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, ScaledConv) or super().is_leaf_module(m, qualname)

    model = nn.Sequential(ScaledConv(3, 6, 3), nn.BatchNorm2d(6)).eval()
    randomize_bn(model[1])
    gm = torch.fx.GraphModule(model, Tracer().trace(model))
    x = torch.randn(1, 3, 6, 6)
    pr = run(gm)
    assert pr.counters == {"skipped": 1} and not pr.changed, pr.counters
    ((where, why),) = pr.skipped
    assert where == "_1" and "'0' is a " in why and "ScaledConv, a subclass of Conv2d called as a leaf" in why, why
    torch.testing.assert_close(gm(x), model(x))


def _zero_variance(*bns: nn.Module) -> None:
    """eps=0 and a channel of zero running variance (its mean not 0): eager gives +-inf there."""
    for bn in bns:
        bn.eps = 0.0
        with torch.no_grad():
            bn.running_var[1] = 0.0
            bn.running_mean[1] = 0.5


class _Pair(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)
        randomize_bn(self.bn)

    def forward(self, x):
        return self.bn(self.conv(x))


@pytest.mark.parametrize("dialect", ["symbolic_trace", "export"])
def test_a_zero_variance_with_eps_zero_is_not_fused(dialect):
    """fuse_conv_bn turned eager's -inf into NaN: with eps=0, a channel of zero running variance
    made the fused weight infinite (gamma / sqrt(0)) and the conv summed infinities of both
    signs, where the batch norm after the conv divides each element by 0 (an adversarial
    check; verify="lint" passed it). Each kind of pair is checked: module pair, conv module +
    traced-through batch norm (bn1 of TracedThrough), traced-through conv + BatchNorm module
    (bn2), functional constants (export)."""
    pair, last, first = _Pair().eval(), TracedThrough().eval(), TracedThrough().eval()
    _zero_variance(pair.bn, last.bn2, first.bn1)
    zero = "BatchNorm eps=0.0 and running_var + eps is 0 in channel 1: the fused weight would be infinite"
    for model in (pair, last, first):
        x = torch.randn(2, 3, 9, 9)
        expected = model(x)
        # +-inf reach the output (through bn1, the next conv makes them NaN in eager too)
        assert torch.isinf(expected).any() if model is not first else torch.isnan(expected).any()
        gm = capture(model, [x], dialect).gm
        pr = run(gm, inputs=[x])
        assert [why[: len(zero)] for _, why in pr.skipped] == [zero], pr.skipped
        assert pr.counters == {"skipped": 1, **({} if model is pair else {"fused": 1})}, pr.counters
        torch.testing.assert_close(gm(x), expected, atol=1e-5, rtol=1e-5, equal_nan=True)
    # eps=0 with every variance above 0 fuses: the rule reads the statistics
    model = _Pair().eval()
    model.bn.eps = 0.0
    x = torch.randn(2, 3, 9, 9)
    gm = capture(model, [x], dialect).gm
    assert run(gm, inputs=[x]).counters == {"fused": 1}
    torch.testing.assert_close(gm(x), model(x), atol=1e-5, rtol=1e-5)


def test_eps_zero_is_not_folded_in_the_graph_where_the_statistics_are_unknown():
    model = ConvNet(2).eval()
    model.bn1.eps = 0.0  # (every variance above 0 now, but the graph may be given others)
    x = torch.randn(2, 3, 6, 6)
    cap = capture(model, [x], "dynamo")
    pr = run(cap.gm, "fuse_conv_bn{fold_in_graph=true}", cap.inputs)
    assert pr.counters == {"fused": 1, "skipped": 1}, pr.counters
    assert pr.skipped[0][1].startswith("BatchNorm eps=0.0: a channel whose running variance is 0 would make the fused weight infinite")
    torch.testing.assert_close(_first(cap.gm(*cap.inputs)), model(x), atol=1e-5, rtol=1e-5)


class _DeepConvNet(nn.Module):
    def __init__(self, blocks: int):
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU()) for _ in range(blocks)
        )
        for b in self.blocks:
            randomize_bn(b[1])

    def forward(self, x):
        for b in self.blocks:
            x = x + b(x)
        return x


def test_no_pass_scans_every_get_attr_node_per_batch_norm(monkeypatch):
    """fuse_conv_bn asked torch.fx for the get_attr nodes of each batch norm's running mean,
    which torch answers by scanning every get_attr node (it indexes only call_function nodes
    by target): quadratic, 86% of the pipeline on a 50k-node exported conv net (a big-graph
    sweep). Counted, not timed: the entries torch's index scans for a target lookup of an op
    it does not index, over the whole inference preset, stay below one walk of the graph."""
    import torch.fx.graph as fx_graph

    scanned = []
    find = fx_graph._FindNodesLookupTable.find_nodes

    def counting(self, *, op, target=None):
        if target is not None and op != "call_function":
            scanned.append(len(self.table[(op, None)]))
        return find(self, op=op, target=target)

    monkeypatch.setattr(fx_graph._FindNodesLookupTable, "find_nodes", counting)
    model, x = _DeepConvNet(40).eval(), torch.randn(1, 4, 6, 6)
    gm = torch.export.export(model, (x,)).module()
    nodes = len(gm.graph.nodes)
    report = fxpasses.Pipeline.from_preset("inference").run(gm, example_inputs=[x])
    assert next(p for p in report.passes if p.name == "fuse_conv_bn").counters["fused"] == 40
    assert sum(scanned) < nodes, (sum(scanned), nodes)
    with torch.no_grad():
        torch.testing.assert_close(gm(x), model(x), atol=1e-5, rtol=1e-5)
