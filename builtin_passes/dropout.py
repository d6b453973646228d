"""``remove_dropout``: drop dropouts that do nothing (eval mode), in every dialect."""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from pydantic import Field
from torch.fx.node import Node

from fxpasses import ERASE, NodePass, PassContext, PassOptions, Replace, on
from fxpasses.ops import FAMILIES, callable_op_name, is_inplace_name

from fxpasses.effects import EffectAnalysis, module_hooks_reason

from ._facts import arg, is_torch_op, leaf_subclass_reason, substitution_problem

__all__ = ["RemoveDropout"]

_DROPOUT_MODULES = (
    torch.nn.Dropout,
    torch.nn.Dropout1d,
    torch.nn.Dropout2d,
    torch.nn.Dropout3d,
    torch.nn.AlphaDropout,
    torch.nn.FeatureAlphaDropout,
)
# Python functions whose ``training`` defaults to False (the others default to True).
_EVAL_BY_DEFAULT = {F.alpha_dropout, F.feature_alpha_dropout}
_F_DROPOUTS = {F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout}
_DROPOUT_NAMES = FAMILIES["dropout"]


# What the pass tells numeric verification (``ctx.changes_outputs``) when ``inference=True``
# removes a dropout that is active: the outputs change by design, and a failure should say so.
_CHANGES_OUTPUTS = (
    "remove_dropout{inference=true} removed dropout that is active in training mode, which changes "
    "the outputs by design (active dropout zeroes elements at random and scales the others); "
    'numeric verification cannot pass on this module: verify this pass with verify="lint", or run it '
    "on an eval-mode capture"
)
_MAY_CHANGE_OUTPUTS = (
    "remove_dropout{inference=true} removed dropout whose training flag is not a constant, which "
    "changes the outputs by design whenever the flag is true; numeric verification cannot pass then: "
    'verify this pass with verify="lint", or run it on an eval-mode capture'
)


class RemoveDropoutOptions(PassOptions):
    """Options of ``remove_dropout``."""

    inference: bool = Field(
        False,
        description="the graph is used for inference only: remove active (training-mode) dropouts "
        "too, as if the model were in eval mode",
    )
    keep_module_dropouts: bool = Field(
        False,
        description="keep call_module dropouts (symbolic_trace graphs) even in eval mode: such a "
        "module follows .train()/.eval() at call time, so removing an eval-mode one takes dropout "
        "away from later training (the training preset sets it)",
    )


class RemoveDropout(NodePass):
    """Remove dropouts that are the identity (eval mode), or every dropout with ``inference``.

    Recognised forms:

    - ``call_module`` ``nn.Dropout``, ``Dropout1d/2d/3d``, ``AlphaDropout``,
      ``FeatureAlphaDropout`` not in training mode (not a subclass, whose forward may be
      another, and without hooks: a forward hook may change the output, a backward hook the
      gradients; :func:`fxpasses.effects.module_hooks_reason`);
    - ``F.dropout``/``dropout1d/2d/3d``/``alpha_dropout``/``feature_alpha_dropout`` and
      ``torch.dropout``/``feature_dropout``/``alpha_dropout``/``feature_alpha_dropout`` with
      ``training=False`` (TorchDynamo and torch-level graphs);
    - ``aten.dropout``/``feature_dropout``/``alpha_dropout``/``feature_alpha_dropout`` with
      ``train=False`` (``torch.export``);
    - the in-place forms of each (the op family ``dropout_``, see :mod:`fxpasses.ops`):
      ``nn.Dropout(inplace=True)``, ``F.dropout(..., inplace=True)``, ``torch.dropout_``,
      ``aten.dropout_`` (what ``torch.export`` makes of the first two); in eval mode they
      leave their input as it is and return it;
    - after ``run_decompositions()``: ``aten.native_dropout(x, p, train=False)`` with its
      ``getitem(0)`` (and the unused mask ``getitem(1)``), and the ``aten.clone(x)`` that the
      decomposition of an eval-mode dropout leaves behind, recognised by its provenance
      (``meta["torch_fn"]`` / ``meta["from_node"]`` naming a dropout) and only without a
      ``memory_format``.

    A dropout with a literal ``p`` of 0 is the identity in either mode (it returns its input
    itself) and is removed as an eval-mode one is.

    An active dropout (training mode, or a training flag that is not a literal) is never
    removed unless the option ``inference=True`` declares the graph to be inference only;
    then it is removed as if the model were in eval mode, which changes the outputs: the pass
    says so (``ctx.changes_outputs``), and a failed numeric verification names it as the
    reason. A dropout whose mask output is used is kept.

    Aliasing: eval-mode ``dropout`` returns its input tensor itself, so removing it is exact.
    ``native_dropout``, the decomposition's ``clone`` and active dropouts return a new
    tensor; they are removed only where that cannot be observed (see
    :func:`fxpasses.builtin_passes._facts.substitution_problem`: the result is not returned
    by the graph, or its input is a fresh tensor not otherwise returned, and the graph writes
    neither of them in place, through any alias). Otherwise a clone remnant is kept (reported) and an active or
    ``native_dropout`` is replaced by a plain ``clone`` of its input.

    With ``keep_module_dropouts=True`` a ``call_module`` dropout (``symbolic_trace``) is kept
    even in eval mode: its module follows ``.train()``/``.eval()`` at call time, so removing it
    would take dropout away from the module trained later (the ``training`` preset sets it;
    TorchDynamo and ``torch.export`` fix the mode in the graph, where it changes nothing).

    Options: ``inference: bool = False``, ``keep_module_dropouts: bool = False``. Counters:
    ``removed`` (``kept_copy`` for dropouts replaced by a clone).
    """

    name = "remove_dropout"
    writes_tensors = False  # rewrites the graph; new tensors only (no rollback guard needed)
    journal_edits = True  # edits only through torch.fx's editing methods and the context
    Options = RemoveDropoutOptions
    before = ("eliminate_dead_code",)

    def setup(self, gm: torch.fx.GraphModule, ctx: PassContext) -> None:
        self._effects = EffectAnalysis(gm)  # swept on first use

    @on("dropout", "dropout_")
    def dropout(self, node: Node, ctx: PassContext) -> Any:
        if node.op == "call_module":
            mod = ctx.module(node)
            if not isinstance(mod, _DROPOUT_MODULES) or len(node.args) != 1 or node.kwargs:
                return None
            if type(mod) not in _DROPOUT_MODULES:  # a leaf subclass: its forward may be another
                return ctx.skip(node, leaf_subclass_reason("dropout", node.target, mod, _DROPOUT_MODULES))
            hooks = module_hooks_reason(mod)
            if hooks is not None:  # the call runs them: not the identity (outputs or gradients)
                return ctx.skip(node, f"{node.target}: {hooks}")
            if self.options.keep_module_dropouts and not self.options.inference:
                ctx.skip(node, "a dropout module follows .train()/.eval() at call time (keep_module_dropouts)")
                return None
            # (p = 0: the identity in either mode, its input itself)
            active = mod.training and not _zero(getattr(mod, "p", None))
            fresh_result = active and not mod.inplace
        elif node.op == "call_function" and is_torch_op(node.target):
            if callable_op_name(node.target) == "native_dropout":
                return self._native_dropout(node, ctx)
            if isinstance(node.target, torch._ops.OpOverload) and node.target._overloadname != "default":
                return None
            active = False if _zero(arg(node, 1, "p", None)) else _training(node)
            fresh_result = active is not False and not _inplace(node)
        else:
            return None
        x = arg(node, 0, "input", None)
        if not isinstance(x, Node):
            return None
        if active is not False and not self.options.inference:
            why = "in training mode" if active is True else "with a training flag that is not a constant"
            return ctx.skip(node, f"active dropout ({why}); set inference=true to remove it")
        if active is not False:
            ctx.changes_outputs(_CHANGES_OUTPUTS if active is True else _MAY_CHANGE_OUTPUTS)
        return Replace(self._substitute(node, x, fresh_result, ctx))

    def _native_dropout(self, node: Node, ctx: PassContext) -> Any:
        """``native_dropout(x, p, train)`` -> ``(out, mask)``, used through getitem."""
        x = arg(node, 0, "input", None)
        train = arg(node, 2, "train", None)
        if not isinstance(x, Node):
            return None
        if train is not False and not self.options.inference:
            return ctx.skip(node, "active dropout (native_dropout with train=True); set inference=true to remove it")
        outs, masks = [], []
        for user in node.users:
            if user.op != "call_function" or user.target is not operator.getitem:
                return ctx.skip(node, f"native_dropout result used by %{user.name} other than through getitem")
            (outs if user.args[1] == 0 else masks).append(user)
        if any(m.users for m in masks):
            return ctx.skip(node, "the dropout mask is used")
        if train is not False:
            ctx.changes_outputs(_CHANGES_OUTPUTS if train is True else _MAY_CHANGE_OUTPUTS)
        for out in outs:
            ctx.replace_uses(out, self._substitute(out, x, True, ctx))
            ctx.graph.erase_node(out)
        for m in masks:
            ctx.graph.erase_node(m)
        return ERASE

    @on(target=torch.ops.aten.clone.default, op="call_function")
    def clone_remnant(self, node: Node, ctx: PassContext) -> Any:
        """The ``clone`` an eval-mode ``aten.dropout`` decomposes into."""
        if node.kwargs.get("memory_format") is not None or len(node.args) != 1 or not _from_dropout(node):
            return None
        x = node.args[0]
        if not isinstance(x, Node):
            return None
        problem = substitution_problem(node, x, self._effects)
        if problem is not None:
            return ctx.skip(node, f"dropout remnant clone kept: {problem}")
        ctx.count("removed")
        return Replace(x)

    def _substitute(self, node: Node, x: Node, fresh_result: bool, ctx: PassContext) -> Node:
        """What replaces ``node`` (a dropout of ``x``): ``x``, or ``clone(x)`` where a copy is needed."""
        if fresh_result and substitution_problem(node, x, self._effects) is not None:
            if isinstance(node.target, torch._ops.OpOverload) or node.target is operator.getitem:
                copy = ctx.call_function(torch.ops.aten.clone.default, (x,))
            else:
                copy = ctx.call_method("clone", (x,))
            for key in ("val", "example_value", "tensor_meta"):
                if key in node.meta:
                    copy.meta[key] = node.meta[key]
            ctx.count("kept_copy")
            return copy
        ctx.count("removed")
        return x


def _training(node: Node) -> Any:
    """The training flag of a functional dropout: True, False or a non-literal value."""
    if len(node.args) > 2:
        return node.args[2]
    for key in ("training", "train"):
        if key in node.kwargs:
            return node.kwargs[key]
    return node.target not in _EVAL_BY_DEFAULT


def _zero(p: Any) -> bool:
    """Whether a dropout's probability ``p`` is a literal 0: the dropout then returns its input
    itself, in training mode too (ATen's ``_dropout_impl``: ``if (p == 0 || !train ...)
    return input``), so removing it is exact and changes no output."""
    return isinstance(p, (int, float)) and p == 0  # (False too, which torch reads as 0)


def _inplace(node: Node) -> bool:
    """An in-place dropout (``torch.dropout_``, ``aten.dropout_``, ...) or ``inplace=True`` of
    the ``torch.nn.functional`` dropouts: in training mode they return their input itself."""
    if is_inplace_name(callable_op_name(node.target) or ""):
        return True
    return node.target in _F_DROPOUTS and arg(node, 3, "inplace", False) is True


def _from_dropout(node: Node) -> bool:
    """Whether the node's provenance says it was produced by decomposing a dropout."""
    fn = node.meta.get("torch_fn")
    if isinstance(fn, tuple) and len(fn) == 2 and isinstance(fn[1], str):
        return fn[1].rsplit(".", 1)[-1] in _DROPOUT_NAMES
    for src in node.meta.get("from_node") or ():
        while getattr(src, "from_node", None):
            src = src.from_node[-1]
        target = str(getattr(src, "target", ""))
        if any(f"aten.{name}." in target for name in _DROPOUT_NAMES):
            return True
    return False
