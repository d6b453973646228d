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

It can also change *what requires grad*: in a region where the graph turned grad mode off
(``torch.no_grad()`` in a TorchDynamo graph) ``x * 1`` does not require grad and ``x`` may
(:func:`grad_mode_problem`, which :func:`substitution_problem` asks first).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable

import torch
import torch.fx
from torch.fx.node import Node

from fxpasses._order import in_graph_order, precedes
from fxpasses.effects import EffectAnalysis

__all__ = ["arg", "is_torch_op", "substitution_problem", "grad_mode_problem", "erase_dead"]

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
    problem = grad_mode_problem(old, new)
    if problem is not None:
        return problem
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


#: call_function targets with which a graph turns grad mode off or on inside it (TorchDynamo
#: writes ``with torch.no_grad():`` as ``_set_grad_enabled(False)`` ...
#: ``_set_grad_enabled(True)``; ``torch.inference_mode()`` as the enter/exit pair)
_GRAD_MODE_SETTERS = (
    torch._C._set_grad_enabled,
    torch.autograd.grad_mode._enter_inference_mode,
    torch.autograd.grad_mode._exit_inference_mode,
)


def grad_mode_problem(old: Node, new: Any) -> str | None:
    """Why replacing every use of ``old`` by ``new`` may change what requires grad, or None.

    Where the graph turned grad mode off (``torch.no_grad()`` in a TorchDynamo graph), ``x * 1``
    is a tensor that does not require grad, while ``x`` may: replacing one by the other lets
    gradients flow through a region the model kept out of autograd, once the graph turns grad
    mode back on. Unsafe when a grad-mode node precedes ``old`` and the last one before it is
    not ``_set_grad_enabled(True)``, unless the values recorded for both (``meta["val"]`` or
    ``["example_value"]``, which TorchDynamo guards on) require grad alike. A constant
    ``new`` requires no grad. O(k log k) for the graph's k grad-mode nodes (none, in most
    graphs: one index lookup per target)."""
    if not isinstance(new, Node):
        return None
    graph = old.graph
    table = getattr(getattr(graph, "_find_nodes_lookup_table", None), "table", None)
    setters: list[Node] = []
    for target in _GRAD_MODE_SETTERS:
        bucket = table.get(("call_function", target)) if isinstance(table, dict) else graph.find_nodes(op="call_function", target=target)
        if bucket:
            setters.extend(bucket)
    before = [n for n in setters if precedes(n, old)]
    if not before:
        return None
    last = in_graph_order(before)[-1]
    if last.target is torch._C._set_grad_enabled and last.args == (True,) and not last.kwargs:
        return None
    a, b = _recorded_tensor(old), _recorded_tensor(new)
    if a is not None and b is not None and a.requires_grad == b.requires_grad:
        return None
    return (
        f"%{old.name} is computed where grad mode may be off (after %{last.name}), so it may not require grad "
        f"where {_describe(new)} does: replacing it would let gradients flow where the model turned them off"
    )


def _recorded_tensor(node: Node) -> torch.Tensor | None:
    """The tensor recorded as ``node``'s value (``meta["val"]``, else ``["example_value"]``), or None."""
    for key in ("val", "example_value"):
        value = node.meta.get(key)
        if isinstance(value, torch.Tensor):
            return value
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
