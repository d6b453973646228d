"""Module hooks: a call of a module that has hooks is not its ``forward`` alone.

A new-user check found ``remove_dropout`` removing an eval-mode ``nn.Dropout`` with a forward
hook from a symbolic_trace graph: "ok", and the outputs then differed from the model's by 0.87
under the default ``verify="lint"``. The whole kind: a forward hook may change a call's output,
a backward hook its gradients (clipping, scaling), and a pass that removes a module call
(dropout removal), merges two (CSE) or folds one into another (conv-bn fusion) drops or moves
them. Backward hooks were not looked at anywhere (CSE merged two calls of a module whose
backward hook clips, fuse_conv_bn dropped a BatchNorm's). Each such call is now kept, with
the reason; outputs and gradients equal the model's.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from torch import nn

import fxpasses
from fxpasses.capture import capture
from fxpasses.effects import module_hooks_reason
from torch.nn.modules import module as nn_module


def _scale_output(m: nn.Module, i: Any, o: torch.Tensor) -> torch.Tensor:
    return o * 0.5


def _scale_input(m: nn.Module, i: tuple) -> tuple:
    return (i[0] * 3,)


def _scale_grad_in(m: nn.Module, gi: tuple, go: tuple) -> tuple:
    return (gi[0] * 10,)


def _clip_grad_out(m: nn.Module, go: tuple) -> tuple:
    return (go[0].clamp(-0.01, 0.01),)


#: name -> (register it on a module, or globally; the kind of hooks the reason names)
_HOOKS: dict[str, tuple[Callable[[nn.Module], Any], str]] = {
    "forward": (lambda m: m.register_forward_hook(_scale_output), "forward hooks"),
    "forward_pre": (lambda m: m.register_forward_pre_hook(_scale_input), "forward pre-hooks"),
    "backward": (lambda m: m.register_full_backward_hook(_scale_grad_in), "backward hooks"),
    "backward_pre": (lambda m: m.register_full_backward_pre_hook(_clip_grad_out), "backward pre-hooks"),
    "global_forward": (lambda m: nn_module.register_module_forward_hook(_scale_output), "forward hooks"),
    "global_backward": (lambda m: nn_module.register_module_full_backward_hook(_scale_grad_in), "backward hooks"),
}


class _LinDrop(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return self.drop(self.lin(x)).tanh()


class _ConvBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)

    def forward(self, x):
        return self.bn(self.conv(x)).tanh()


class _TanhTwice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(x) * self.act(x)


_CASES = {
    "remove_dropout": (_LinDrop, "drop", (2, 4), "drop: Dropout has {kind}"),
    "fuse_conv_bn/conv": (_ConvBn, "conv", (1, 3, 6, 6), "conv: Conv2d has {kind}"),
    "fuse_conv_bn/bn": (_ConvBn, "bn", (1, 3, 6, 6), "bn: BatchNorm2d has {kind}"),
    "eliminate_common_subexpressions": (_TanhTwice, "act", (2, 4), None),
}


def _outputs_and_grad(fn: Callable[..., torch.Tensor], x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.clone().requires_grad_(True)
    out = fn(x)
    out.sum().backward()
    return out.detach(), x.grad


@pytest.mark.parametrize("hook", list(_HOOKS))
@pytest.mark.parametrize("case", list(_CASES))
def test_a_call_of_a_module_with_hooks_is_kept_with_outputs_and_gradients(case, hook):
    model_cls, where, shape, said = _CASES[case]
    pass_name = case.split("/")[0]
    torch.manual_seed(0)
    model = model_cls().eval()
    x = torch.randn(*shape)
    register, kind = _HOOKS[hook]
    full_backward = nn_module._global_is_full_backward_hook  # (removing a global hook leaves it set)
    handle = register(getattr(model, where))
    try:
        gm = torch.fx.symbolic_trace(model)
        expected = _outputs_and_grad(model, x)
        report = fxpasses.Pipeline([pass_name]).run(gm, [x])
        got = _outputs_and_grad(gm, x)
        result = report[pass_name]
        assert result.status == "ok" and not result.changed, (result.status, result.counters)
        reasons = [why for _, why in result.skipped]
        if hook.startswith("global"):  # (every module runs them: the first one met is named)
            ran = f"runs the global {kind} (torch.nn.modules.module.register_module_*)"
            assert said is None or any(why.endswith(ran) for why in reasons), reasons
            assert module_hooks_reason(getattr(model, where)) == f"{type(getattr(model, where)).__name__} {ran}"
        else:
            assert said is None or said.format(kind=kind) in reasons, reasons
            assert module_hooks_reason(getattr(model, where)) == f"{type(getattr(model, where)).__name__} has {kind}"
    finally:
        handle.remove()
        nn_module._global_is_full_backward_hook = full_backward
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    # without the hook the same pass does its job (the test would pass on a pass that never acts)
    gm = torch.fx.symbolic_trace(model)
    assert fxpasses.Pipeline([pass_name]).run(gm, [x])[pass_name].changed
    assert module_hooks_reason(getattr(model, where)) is None


@pytest.mark.parametrize("dialect", ["dynamo", "export"])
def test_hooks_traced_into_the_graph_keep_their_effect_after_the_pipeline(dialect):
    """TorchDynamo and torch.export trace a forward hook's code into the graph (no
    ``call_module`` is left): the dropout goes, the hook's arithmetic stays."""
    if dialect == "dynamo":
        torch._dynamo.reset()
    torch.manual_seed(0)
    model = _LinDrop().eval()
    model.drop.register_forward_hook(_scale_output)
    x = torch.randn(2, 4)
    c = capture(model, [x], dialect)
    report = fxpasses.Pipeline.from_preset("inference").run(c.gm, c.inputs)
    assert report["remove_dropout"].changed
    got = c.gm(*c.inputs)
    torch.testing.assert_close(got[0] if dialect == "dynamo" else got, model(x))


def test_a_leaf_subclass_of_a_dropout_class_is_kept_with_the_reason():
    """A custom tracer may keep a subclass of nn.Dropout as a leaf; its forward may compute
    something else (here: twice the input), so remove_dropout keeps it and says why."""

    class Doubling(nn.Dropout):
        def forward(self, x):
            return super().forward(x) * 2

    class LeafTracer(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, Doubling) or super().is_leaf_module(m, qualname)

    model = _LinDrop().eval()
    model.drop = Doubling(0.1).eval()
    gm = torch.fx.GraphModule(model, LeafTracer().trace(model))
    x = torch.randn(2, 4)
    report = fxpasses.Pipeline(["remove_dropout"]).run(gm, [x])
    assert not report["remove_dropout"].changed
    assert report["remove_dropout"].skipped == [
        ("drop", "dropout module 'drop' is a test_a_leaf_subclass_of_a_dropout_class_is_kept_with_the_reason.<locals>.Doubling, "
                 "a subclass of Dropout called as a leaf: its forward may compute something else")
    ]
    torch.testing.assert_close(gm(x), model(x))
