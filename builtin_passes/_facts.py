"""Helpers several built-in passes share: argument access, op identity, substitution, cleanup,
and the ``modules_may_train`` option.

What a node does besides computing its result (writes, aliasing, what reaches the output) is
:mod:`fxpasses.effects`' business; this module only holds pass-local policy built on it.

Replacing a node by one of its inputs (``x * 1 -> x``, an active dropout -> its input) is exact
for values, but it can change *which tensors are the same object*:

- an output may start to alias a graph input, a parameter or another output
  (``return x * 1`` gives a fresh tensor, ``return x`` gives the caller's own tensor);
- an in-place op on the result now writes into the input, and an in-place op on the input is
  now seen by the result's users.

:func:`substitution_problem` tells whether such a replacement is safe, from the pass's
:class:`~fxpasses.effects.EffectAnalysis`:

1. if the graph may write the replaced value or the replacement in place (through any alias,
   by any op: in-place, ``out=``, ``setitem``, unknown functions and modules that may write
   their inputs, ...), it is unsafe;
2. otherwise only outputs can observe aliasing: it is safe unless the replaced node reaches
   the output (directly or as a view) and the replacement is not a fresh, otherwise
   unreturned tensor.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable

import torch
import torch.fx
from torch.fx.node import Node

from fxpasses.effects import EffectAnalysis

__all__ = ["arg", "is_torch_op", "substitution_problem", "erase_dead"]

_MISSING = object()


def arg(node: Node, index: int, name: str, default: Any = _MISSING) -> Any:
    """Argument ``name`` of a call, given at position ``index`` or as a keyword.

    Raises ``KeyError`` when it is absent and no ``default`` is given.
    """
    if len(node.args) > index:
        return node.args[index]
    if name in node.kwargs:
        return node.kwargs[name]
    if default is _MISSING:
        raise KeyError(name)
    return default


def is_torch_op(target: Any) -> bool:
    """Whether a ``call_function`` target is PyTorch's or Python's own operator (an ATen
    overload, an ``operator`` function, a ``torch``/``torch.nn.functional``/``Tensor``
    function), not a user function that happens to share its name."""
    if isinstance(target, torch._ops.OpOverload):
        return target.namespace == "aten"
    if isinstance(target, torch._ops.OpOverloadPacket):  # torch.ops.aten.add: no .namespace
        return str(getattr(target, "_qualified_op_name", "")).startswith("aten::")
    module = getattr(target, "__module__", None)
    if module in ("_operator", "operator"):
        return True
    name = getattr(target, "__name__", None)
    if not isinstance(name, str):
        return False
    return (
        getattr(torch, name, None) is target
        or getattr(torch.nn.functional, name, None) is target
        or getattr(torch.Tensor, name, None) is target
    )


def substitution_problem(old: Node, new: Any, analysis: EffectAnalysis) -> str | None:
    """Why replacing every use of ``old`` (a fresh result) by ``new`` is not exact.

    ``analysis`` is the pass's :class:`~fxpasses.effects.EffectAnalysis` of the graph. Returns
    None when the replacement is safe (see the module doc for the rules); the caller then makes
    it, and the analysis records that ``new`` reaches the output where ``old`` did.
    """
    if not isinstance(new, Node):
        return None
    for node, what in ((old, f"%{old.name}"), (new, _describe(new))):
        if analysis.is_written(node):
            return (
                f"{what} may be written in place (through some alias), so replacing "
                f"%{old.name} by %{new.name} could change what an in-place op writes or sees"
            )
    if analysis.reaches_output(old):
        if not analysis.is_fresh(new) or analysis.reaches_output(new):
            return (
                f"%{old.name} is returned by the graph: returning {_describe(new)} instead would "
                "make the output alias it"
            )
        analysis.mark_reaches_output(new)
    return None


def leaf_subclass_reason(what: str, target: Any, mod: torch.nn.Module, classes: tuple[type, ...]) -> str:
    """Why a pass keeps a ``call_module`` of ``mod``, an instance of a subclass of one of
    ``classes`` called as a leaf (a custom tracer's): its forward may compute something else
    than the class the pass knows (``what``: ``"conv"``, ``"dropout"``)."""
    base = next(c for c in classes if isinstance(mod, c))
    return (
        f"{what} module {target!r} is a {type(mod).__qualname__}, a subclass of {base.__name__} called as a "
        "leaf: its forward may compute something else"
    )


def _describe(node: Node) -> str:
    if node.op == "placeholder":
        return "a graph input"
    if node.op == "get_attr":
        return "a parameter or buffer"
    return f"%{node.name}"


def erase_dead(graph: torch.fx.Graph, nodes: Iterable[Node], *, inputs: bool = True) -> int:
    """Erase each of ``nodes`` that is still in the graph and has no users.

    With ``inputs``, dead ``get_attr`` inputs of erased nodes go too (never placeholders).
    Only for nodes a pass itself orphaned and knows to be pure. Returns how many were erased.
    """
    count = 0
    work = deque(nodes)  # first in, first out (list.pop(0) is linear: quadratic for many nodes)
    while work:
        n = work.popleft()
        if n._erased or n.users or n.op in ("placeholder", "output"):
            continue
        ins = list(n.all_input_nodes)
        graph.erase_node(n)
        count += 1
        if inputs:
            work.extend(i for i in ins if i.op == "get_attr")
    return count


def modules_may_train_field(consequence: str) -> Any:
    """The ``modules_may_train`` option of a pass that asks :class:`~fxpasses.effects.EffectAnalysis`
    about module calls (``EffectAnalysis(gm, modules_may_train=...)``); ``consequence`` says
    what the pass then leaves alone."""
    from pydantic import Field

    return Field(
        default=False,
        description=(
            "Judge call_module nodes as if each module were in training mode: a symbolic_trace "
            "graph calls its modules, which follow .train()/.eval() at call time, so in an "
            f"eval-mode capture trained later {consequence} (the training preset sets it)."
        ),
    )
