"""Low-precision numeric verification against a float64 run of the module
(:mod:`fxpasses.reference64`), from a pass author's check: an ``atol`` scaled by the output's
largest magnitude let a wrong rewrite through in float16/bfloat16 where one element was a
mask's ``finfo(dtype).min``, while correct conv-BN fusions were refused on a float32 output
of a half-precision model and on bfloat16 input gradients."""

from __future__ import annotations

import operator

import pytest
import torch
from torch import nn

import fxpasses
from fxpasses import NodePass, PassFailedError, Pipeline, Registry, Replace, on
from fxpasses.capture import capture
from fxpasses.reference64 import computes_in_low_precision, float64_reference
from fxpasses.verify import TensorState, call_isolated, compare_outputs

REG = Registry(autoload=False)
LOW = [torch.float16, torch.bfloat16]


class WrongSigmoid(NodePass):
    """Wrong on purpose: sigmoid(x) -> x * 0."""

    name = "wrong_sigmoid"

    @on("sigmoid")
    def rewrite(self, node, ctx):
        return Replace(ctx.call_function(torch.mul, (node.args[0], 0.0)))


class Masked(nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.fill = torch.finfo(dtype).min

    def forward(self, x, mask):
        return (torch.sigmoid(x) * 4).masked_fill(mask, self.fill)


@pytest.mark.parametrize("dtype", LOW)
def test_a_wrong_rewrite_beside_a_masked_element_is_refused(dtype):
    torch.manual_seed(0)
    x = torch.randn(4, 8, dtype=dtype)
    mask = torch.zeros(4, 8, dtype=torch.bool)
    mask[:, -1] = True
    gm = torch.fx.symbolic_trace(Masked(dtype))
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([WrongSigmoid], verify="numeric", registry=REG).run(gm, [x, mask])
    text = str(info.value)
    assert "verification failed: output: max abs error" in text
    assert "against a float64 run of the module" in text
    assert gm.code == code


class CNN(nn.Module):
    def __init__(self, upcast=False):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.b2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32, 10)
        self.upcast = upcast

    def forward(self, x):
        x = self.b1(self.c1(x)).relu()
        x = self.b2(self.c2(x)).relu()
        out = self.fc(x.mean((2, 3)))
        return out.float() if self.upcast else out


def cnn(dtype, upcast=False):
    torch.manual_seed(0)
    m = CNN(upcast)
    with torch.no_grad():
        for bn in (m.b1, m.b2):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
            bn.weight.uniform_(0.5, 2)
            bn.bias.uniform_(-1, 1)
    return m.eval().to(dtype)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("dialect", ["symbolic_trace", "export"])
def test_a_half_precision_model_with_a_float32_output_fuses_under_numeric_verification(dtype, dialect):
    x = torch.randn(2, 3, 16, 16).to(dtype)
    cap = capture(cnn(dtype, upcast=True), [x], dialect)
    report = Pipeline.from_string("fuse_conv_bn", verify="numeric").run(cap.gm, cap.inputs)
    assert report["fuse_conv_bn"].counters["fused"] == 2
    # the fused module is as close to float64 as the unfused one
    truth = cnn(torch.float64)(x.double())
    unfused = cnn(dtype, upcast=True)(x)
    fused = cap.gm(*cap.inputs)
    assert fused.dtype == torch.float32
    assert (fused.double() - truth).abs().max() <= 3 * (unfused.double() - truth).abs().max()


def test_a_bfloat16_fusion_whose_relu_gates_flip_is_refused_with_its_figures_and_an_entry_atol_admits_it():
    """Gradients are judged element by element too: the fused conv rounds near-zero
    pre-activations by the size of their terms, more ReLU gates flip, and their entries move by
    all of their size (a whole-gradient judgement had admitted a rewrite detaching a few input
    features). The message says so with the float64 figures, and the entry's atol admits it."""
    torch.manual_seed(1)
    x = torch.randn(2, 3, 16, 16).to(torch.bfloat16).requires_grad_()
    gm = torch.fx.symbolic_trace(cnn(torch.bfloat16))
    with pytest.raises(PassFailedError) as info:
        Pipeline.from_string("fuse_conv_bn", verify="numeric").run(gm, [x])
    text = str(info.value)
    assert "gradient of input[0]" in text and "against a float64 run of the module" in text
    assert "takes a tolerance of its own: name[atol=...]" in text
    report = Pipeline.from_string("fuse_conv_bn[atol=1e-2]", verify="numeric").run(gm, [x])
    assert report["fuse_conv_bn"].counters["fused"] == 2


class Features(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(64, 64)
        with torch.no_grad():
            self.inp.weight[:, -8:] *= 0.03  # 8 input features of little weight
        self.out = nn.Linear(64, 64)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        return torch.relu(self.out(h)) + h


class DetachTail(NodePass):
    """Wrong on purpose: the first linear sees its last 8 input features detached (the same
    forward, their gradients gone)."""

    name = "detach_tail"

    @on("linear")
    def rewrite(self, node, ctx):
        if node.target != "inp":
            return None
        x = node.args[0]
        head = ctx.call_function(operator.getitem, (x, (slice(None), slice(None, -8))))
        tail = ctx.call_method("detach", (ctx.call_function(operator.getitem, (x, (slice(None), slice(-8, None)))),))
        return Replace(ctx.call_module(node.target, (ctx.call_function(torch.cat, ([head, tail], 1)),)))


@pytest.mark.parametrize("dtype", LOW)
def test_gradients_wrong_in_a_few_entries_are_refused(dtype):
    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(Features().to(dtype))
    x = torch.randn(32, 64, dtype=dtype, requires_grad=True)
    with pytest.raises(PassFailedError) as info:
        Pipeline([DetachTail], verify="numeric", registry=REG).run(gm, [x])
    assert "gradient of input[0]" in str(info.value)


def test_gradients_are_judged_against_float64_with_the_same_rounded_weights():
    """The float64 run differentiates the function the low-precision run did: the weights of
    the fixed function are rounded through the output's dtype, so that an exact module's
    low-precision gradient is within rounding of the float64 one."""
    model = nn.Linear(8, 4).to(torch.bfloat16)
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(3, 8).to(torch.bfloat16).requires_grad_()
    out, facts = call_isolated(gm, [x], TensorState(gm), facts=True)
    ref = float64_reference(gm, [x], None, out, facts)
    assert ref is not None and ref.why_not == ""
    g64 = ref.facts.grads["input[0]"]
    assert g64.dtype == torch.float64
    weights = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    exact = weights.to(torch.bfloat16).double() @ model.weight.double()
    torch.testing.assert_close(g64, exact, rtol=1e-12, atol=1e-12)
    assert (facts.grads["input[0]"].double() - exact).abs().max() > 0  # (the bfloat16 one is rounded)


def test_no_float64_run_for_a_float32_module():
    gm = torch.fx.symbolic_trace(nn.Linear(4, 2))
    x = torch.randn(3, 4)
    out, facts = call_isolated(gm, [x], TensorState(gm), facts=True)
    assert not computes_in_low_precision(gm, [x], None, out)
    assert float64_reference(gm, [x], None, out, facts) is None
    # a float16 input, a float16 buffer, autocast: low precision
    assert computes_in_low_precision(gm, [x.half()], None)
    gm.register_buffer("scale", torch.ones(1, dtype=torch.bfloat16))
    assert computes_in_low_precision(gm, [x], None)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert computes_in_low_precision(torch.fx.symbolic_trace(nn.Linear(4, 2)), [x], None)


@torch.fx.wrap
def _half_only(x):
    if x.dtype == torch.float64:
        raise TypeError("this kernel has no float64 version")
    return x * 3


class HalfOnly(nn.Module):
    def forward(self, x):
        return torch.sigmoid(_half_only(x))


def test_a_module_that_does_not_run_in_float64_says_so_in_the_failure():
    x = torch.randn(4, 4, dtype=torch.float16)
    gm = torch.fx.symbolic_trace(HalfOnly())
    with pytest.raises(PassFailedError) as info:
        Pipeline([WrongSigmoid], verify="numeric", registry=REG).run(gm, [x])
    text = str(info.value)
    assert "no float64 run of it could be made to tell rounding from a wrong result" in text
    assert "TypeError: this kernel has no float64 version" in text


def test_compare_outputs_with_a_float64_reference():
    big = torch.tensor([4.0, 0.01], dtype=torch.float16)
    moved = big + torch.tensor([0.0, 0.007], dtype=torch.float16)
    # without a reference, the error near zero is out of tolerance (no bound scaled by 4.0)
    assert compare_outputs(moved, big, 1e-5, 1e-5).message
    # the module itself was 0.004 off float64 there: 0.007 is rounding of that order
    truth = torch.tensor([4.0, 0.014], dtype=torch.float64)
    assert compare_outputs(moved, big, 1e-5, 1e-5, reference=truth).message == ""
    # where the module was exact, it is not
    exact = big.double()
    message = compare_outputs(moved, big, 1e-5, 1e-5, reference=exact).message
    assert "against a float64 run of the module, max abs error 0.007 and RMS error 0.00495 after the pass, 0 and 0 before it" in message
    assert "more than the 3x that low-precision rounding is allowed" in message


def test_run_compares_a_half_precision_model_against_float64(tmp_path):
    """`fxpasses run`'s own before/after comparison judges low-precision results so too."""
    from click.testing import CliRunner

    from fxpasses.cli import cli

    (tmp_path / "halfmodels.py").write_text(
        "import torch\nfrom torch import nn\n"
        "class CNN(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.c = nn.Conv2d(3, 16, 3, padding=1)\n"
        "        self.b = nn.BatchNorm2d(16)\n"
        "    def forward(self, x):\n"
        "        return self.b(self.c(x)).relu().mean((2, 3)).float()\n"
        "def make():\n"
        "    torch.manual_seed(0)\n"
        "    m = CNN()\n"
        "    with torch.no_grad():\n"
        "        m.b.running_mean.uniform_(-1, 1); m.b.running_var.uniform_(0.5, 2)\n"
        "        m.b.weight.uniform_(0.5, 2); m.b.bias.uniform_(-1, 1)\n"
        "    return m.eval().to(torch.bfloat16)\n"
    )
    cfg = tmp_path / "fxpasses.toml"
    cfg.write_text(
        'pipeline = "fuse_conv_bn"\n[model]\nfactory = "halfmodels:make"\n'
        'inputs = [{shape = [2, 3, 16, 16], dtype = "bfloat16"}]\n'
    )
    r = CliRunner().invoke(cli, ["run", str(cfg), "--repeat", "1", "--no-save"])
    assert r.exit_code == 0, r.output
    assert "fused=1" in r.output and "outputs: match" in r.output


class SigmoidToHalf(NodePass):
    """Wrong on purpose: sigmoid(x) -> x * 0 + 0.5."""

    name = "sigmoid_to_half"

    @on("sigmoid")
    def rewrite(self, node, ctx):
        zero = ctx.call_function(torch.mul, (node.args[0], 0.0))
        return Replace(ctx.call_function(torch.add, (zero, 0.5)))


class Concat(nn.Module):
    """Boxes in pixels beside scores in [0, 1], in one output (detection heads do so)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 8)

    def forward(self, x, g):
        return torch.cat([self.lin(x) * 1000, torch.sigmoid(g)], dim=1)


class AdditiveMask(nn.Module):
    """A Hugging Face style additive mask: scores + (1 - mask) * finfo.min."""

    def __init__(self, dtype):
        super().__init__()
        self.fill = torch.finfo(dtype).min

    def forward(self, s, mask):
        return torch.sigmoid(s) * 4 + (1.0 - mask) * self.fill


class RandomNoise(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x) + torch.randn_like(x)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("case", ["concat", "additive_mask", "random"])
def test_wrong_rewrites_the_float64_run_must_not_admit(dtype, case):
    """A check of the session's own feature found these admitted: small elements beside large
    ones judged by the leaf's largest error; an additive mask's elements; a module drawing
    random numbers that the float64 run draws otherwise (its own error then about 140%)."""
    torch.manual_seed(0)
    if case == "concat":
        gm, inputs, wrong = torch.fx.symbolic_trace(Concat().to(dtype)), [torch.randn(16, 64, dtype=dtype), torch.randn(16, 8, dtype=dtype)], SigmoidToHalf
    elif case == "additive_mask":
        mask = torch.tril(torch.ones(8, 8, dtype=dtype)).expand(4, 8, 8)
        gm, inputs, wrong = torch.fx.symbolic_trace(AdditiveMask(dtype)), [torch.randn(4, 8, 8, dtype=dtype) * 8, mask], WrongSigmoid
    else:
        gm, inputs, wrong = torch.fx.symbolic_trace(RandomNoise()), [torch.randn(4, 8, dtype=dtype)], WrongSigmoid
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([wrong], verify="numeric", registry=REG).run(gm, inputs)
    text = str(info.value)
    if case == "random":
        assert (
            "no float64 run of it could be made to tell rounding from a wrong result: it draws random numbers "
            "(%randn_like), which a float64 run draws otherwise"
        ) in text
    else:
        assert "more than the 3x that low-precision rounding is allowed" in text
    assert gm.code == code


class CastsInside(nn.Module):
    """A float32 model computing its attention in bfloat16 (casts in the graph)."""

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(16, 16)

    def forward(self, x):
        h = self.q(x).to(torch.bfloat16)
        return torch.softmax(h @ h.transpose(-1, -2), -1).to(torch.float32) @ x


class Upcasts(nn.Module):
    """Attention of a bfloat16 model with its softmax in float32 (casts to float32 and back)."""

    def forward(self, x):
        scores = (x @ x.transpose(-1, -2)).float()
        return torch.softmax(scores, -1).to(torch.bfloat16) @ x


class DropNarrowing(NodePass):
    """Wrong on purpose: drops the model's cast to bfloat16 (its rounding is the model's)."""

    name = "drop_narrowing"

    @on("to")
    def rewrite(self, node, ctx):
        return Replace(node.args[0]) if node.args[1:] == (torch.bfloat16,) else None


def test_casts_of_the_models_own_dtype_run_in_float64_and_others_round_as_in_the_graph():
    """GPT-2's eager attention casts to the value's dtype in its graph: the float64 run failed
    there ("expected scalar type Double but found BFloat16"); casts to the module's own dtype
    and to float32 compute in float64 in the reference. A dtype the module does not hold is
    the graph's choice (a float32 model rounding through bfloat16 on purpose, a float8
    quantize-dequantize): the reference rounds there too, and a pass removing it is refused
    (widened, the removal looked like a correction)."""
    torch.manual_seed(0)
    x = torch.randn(2, 8, 16)
    gm = torch.fx.symbolic_trace(CastsInside())
    out, facts = call_isolated(gm, [x], TensorState(gm), facts=True)
    ref = float64_reference(gm, [x], None, out, facts)
    assert ref is not None and ref.why_not == "" and ref.dtype == torch.bfloat16
    assert ref.outputs.dtype == torch.float64  # (the cast back to float32 computes in float64)
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([DropNarrowing], verify="numeric", registry=REG).run(gm, [x])
    assert "against a float64 run of the module" in str(info.value)
    assert gm.code == code
    # a bfloat16 model's own casts (to float32 and back, as attention upcasts) compute in float64
    gm = torch.fx.symbolic_trace(Upcasts())
    xb = x.to(torch.bfloat16)
    out, facts = call_isolated(gm, [xb], TensorState(gm), facts=True)
    ref = float64_reference(gm, [xb], None, out, facts)
    assert ref.why_not == "" and ref.outputs.dtype == torch.float64


def test_bisect_of_an_entry_stricter_than_the_pipeline_finds_its_rewrite():
    """The verified run refused an entry by its own atol=0; the bisect trials used the run's end
    tolerances (the pipeline's, larger) and called the failure not reproducible."""
    from fxpasses.bisect import bisect

    class Tiny(NodePass):
        name = "tiny"

        @on("relu")
        def rewrite(self, node, ctx):
            return Replace(node.args[0])  # wrong at the one negative element, by 0.5

    class R(nn.Module):
        def forward(self, x):
            return torch.relu(x) + 1

    x = torch.rand(4, 4) + 0.1
    x[0, 0] = -0.5
    gm = torch.fx.symbolic_trace(R())
    pipeline = Pipeline([{"name": Tiny, "atol": 0, "rtol": 0}], verify="numeric", atol=1.0, registry=REG)
    result = bisect(pipeline, gm, [x])
    assert result.status == "found" and result.culprit.pass_name == "tiny"


class FakeQuant(nn.Module):
    """A bfloat16 layer whose input goes through a float8 quantize-dequantize (its semantics)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(32, 32)

    def forward(self, x):
        return self.lin(x.to(torch.float8_e4m3fn).to(torch.bfloat16))


class DropFakeQuant(NodePass):
    """Wrong on purpose: removes the float8 round trip."""

    name = "drop_fake_quant"

    @on("to")
    def rewrite(self, node, ctx):
        inner = node.args[0]
        narrowed = isinstance(inner, torch.fx.Node) and inner.op == "call_method" and inner.args[1:] == (torch.float8_e4m3fn,)
        return Replace(inner.args[0]) if narrowed and node.args[1:] == (torch.bfloat16,) else None


def test_a_float8_quantize_dequantize_is_the_models_and_removing_it_is_refused():
    """Widening every float dtype in the float64 run took the float8 rounding out of the
    reference, and a pass removing the quantization looked like a correction (accepted)."""
    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(FakeQuant().to(torch.bfloat16))
    x = torch.randn(16, 32, dtype=torch.bfloat16)
    with pytest.raises(PassFailedError) as info:
        Pipeline([DropFakeQuant], verify="numeric", registry=REG).run(gm, [x])
    assert "against a float64 run of the module" in str(info.value)


class CutPixelGrad(fxpasses.GraphPass):
    """Wrong on purpose: x -> where(mask, x.detach(), x), the same forward with the gradient of
    one pixel of sample 0 (its 3 channels) cut."""

    name = "cut_pixel_grad"

    def run(self, gm, ctx):
        x = next(n for n in gm.graph.nodes if n.op == "placeholder")
        users = list(x.users)
        mask = torch.zeros(1, 1, 16, 16, dtype=torch.bool)
        mask[0, 0, 0, 0] = True
        gm.register_buffer("wrong_mask", mask)
        with gm.graph.inserting_after(x):
            m = gm.graph.get_attr("wrong_mask")
        with gm.graph.inserting_after(m):
            d = gm.graph.call_method("detach", (x,))
        with gm.graph.inserting_after(d):
            w = gm.graph.call_function(torch.where, (m, d, x))
        for u in users:
            u.replace_input_with(x, w)
        return True


def test_a_gradient_cut_at_one_pixel_after_a_fusion_is_refused():
    """Letting elements beyond their bounds pass where the module has as many outliers (flipped
    ReLU gates) of its own admitted this wrong pass after `fuse_conv_bn` in 3 seeds of 10 in
    bfloat16 (an adversarial check of that rule, which was dropped): 3 wrong elements hide
    among flips. It is refused in every seed."""
    kept = []
    for seed in range(10):
        torch.manual_seed(seed)
        x = torch.randn(2, 3, 16, 16).to(torch.bfloat16).requires_grad_()
        gm = torch.fx.symbolic_trace(cnn(torch.bfloat16))
        report = Pipeline(["fuse_conv_bn", CutPixelGrad], verify="numeric", on_error="skip").run(gm, [x])
        if report["cut_pixel_grad"].status != "skipped":
            kept.append(seed)
    assert kept == []


def test_a_low_precision_exported_module_runs_without_torchs_pytree_future_warning():
    """The float64 copy of an exported module copied its pytree specs, and torch warned
    "`isinstance(treespec, LeafSpec)` is deprecated" on every low-precision run (a new-user
    check; the suite's filter hid it)."""
    import warnings

    x = torch.randn(2, 3, 16, 16).to(torch.bfloat16)
    cap = capture(cnn(torch.bfloat16), [x], "export")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        Pipeline.from_string("fuse_conv_bn[atol=1e-2]", verify="numeric").run(cap.gm, cap.inputs)
    assert [str(w.message) for w in said if "LeafSpec" in str(w.message)] == []
