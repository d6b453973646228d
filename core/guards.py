"""Input guards: the shapes and dtypes recorded in ``node.meta`` made to hold for every input.

The shapes and dtypes in ``node.meta`` are facts about the inputs a graph was captured or
propagated with. TorchDynamo guards its graphs on every input's shape, stride, dtype and
device, and ``torch.export``'s module checks the inputs' shapes (its graph was traced for
their dtypes, which the module does not check: an input of another dtype runs, and a rewrite
that relied on the recorded dtype then differs from the model): a rewrite that relies on the
recorded facts holds for every input such a graph is meant for. A ``symbolic_trace`` graph takes inputs of any shape and dtype, so the facts recorded
on it (by ``propagate_shapes``, or torch's ``ShapeProp``) hold only for inputs like the example;
they hold for every input once each input is checked by :func:`input_guard` at the top of the
graph. A pass that relies on them calls :func:`unguarded_inputs` (None: some input has no
facts, nothing can be checked) and, to specialise the graph, :func:`guard_inputs`; where some
inputs have no facts a guard can check (:func:`unguardable_inputs`: a list, None, symbolic
sizes), the facts of the nodes that do not depend on them (:func:`inputs_reaching`) still hold
once the other inputs are guarded.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
from torch.fx.node import Node

__all__ = [
    "input_guard",
    "input_facts",
    "unguarded_inputs",
    "unguardable_input",
    "unguardable_inputs",
    "inputs_reaching",
    "guard_inputs",
    "facts_hold_for_every_input",
]


def facts_hold_for_every_input(gm: torch.fx.GraphModule) -> bool:
    """Whether the shapes and dtypes recorded on ``gm``'s nodes hold for every input the
    graph accepts: a TorchDynamo or ``torch.export`` graph, or a ``symbolic_trace`` graph
    whose every tensor input has an :func:`input_guard` of its recorded facts."""
    from .dialect import detect_dialect

    return detect_dialect(gm) != "symbolic_trace" or unguarded_inputs(gm.graph) == []


@torch.fx.node.has_side_effect  # an assert: torch's eliminate_dead_code keeps it too
def input_guard(
    x: Any,
    name: str,
    sizes: tuple[int, ...],
    strides: tuple[int, ...] | None,
    dtype: torch.dtype,
    device: torch.device | None,
    by: str,
) -> None:
    """Check that the graph input ``name`` is a tensor with these ``sizes``, ``strides``
    (element counts; None: not checked), ``dtype`` and ``device`` (None: not checked): the
    recorded facts a pass (``by``) relied on when it specialised a ``symbolic_trace`` graph
    to its example inputs.

    Raises ``AssertionError`` (as torch.export's input guards do) naming the input, what it
    is and what the graph was specialised to, when the input differs in any of them.
    Registered with ``torch.fx.node.has_side_effect``, so torch's ``eliminate_dead_code``
    keeps it, and an assert to :mod:`fxpasses.effects`. Traceable: on a ``torch.fx.Proxy``
    (symbolic tracing, as ``torch.load`` of a GraphModule re-traces its code) or another
    ``__torch_function__`` override it goes through that override, which records the call."""
    if torch.overrides.has_torch_function_unary(x):
        return torch.overrides.handle_torch_function(
            input_guard, (x,), x, name, sizes, strides, dtype, device, by
        )
    if (
        isinstance(x, torch.Tensor)
        and x.dtype == dtype
        and tuple(x.shape) == sizes
        and (device is None or x.device == device)
        and (strides is None or (x.layout == torch.strided and tuple(x.stride()) == strides))
    ):
        return
    want = _describe_facts(sizes, strides, dtype, device)
    if isinstance(x, torch.Tensor):
        got = _describe_facts(
            tuple(x.shape), tuple(x.stride()) if x.layout == torch.strided else None, x.dtype, x.device
        )
    else:
        got = f"of type {type(x).__name__}, not a tensor"
    raise AssertionError(
        f"input {name!r} is {got}; the graph was specialised to {want} by {by} (its rewrites hold "
        "for inputs like the example inputs only)"
    )


def _describe_facts(sizes: Any, strides: Any, dtype: Any, device: Any) -> str:
    text = f"sizes {tuple(sizes)}"
    if strides is not None:
        text += f", strides {tuple(strides)}"
    text += f", {dtype}"
    return text + (f", on {device}" if device is not None else "")


def input_facts(placeholder: Node) -> tuple[tuple[int, ...], tuple[int, ...] | None, torch.dtype, Any] | None | bool:
    """``(sizes, strides or None, dtype, device or None)`` recorded for a placeholder's
    tensor value; False when a number was recorded (nothing to check); None when nothing
    usable was (no value, or symbolic sizes)."""
    meta = placeholder.meta
    for key in ("val", "example_value"):
        v = meta.get(key)
        if isinstance(v, torch.Tensor):
            strided = v.layout == torch.strided
            dims = (*v.shape, *(v.stride() if strided else ()))
            if any(isinstance(d, torch.SymInt) for d in dims):  # not a symbolic_trace graph's facts
                return None
            return tuple(map(int, v.shape)), tuple(map(int, v.stride())) if strided else None, v.dtype, v.device
        if isinstance(v, (bool, int, float)):
            return False
    tm = meta.get("tensor_meta")
    if tm is not None and hasattr(tm, "shape") and hasattr(tm, "dtype"):
        stride = getattr(tm, "stride", None)
        try:
            return tuple(map(int, tm.shape)), tuple(map(int, stride)) if stride else None, tm.dtype, None
        except TypeError:
            return None
    return None


def unguarded_inputs(graph: torch.fx.Graph, *, guardable_only: bool = False) -> list[Node] | None:
    """The tensor placeholders of a ``symbolic_trace`` graph whose recorded facts (see
    :func:`input_facts`) no input guard checks yet; None when a used placeholder has no usable
    facts (then no guard can make the recorded facts hold for every input), unless
    ``guardable_only``: those are then left out (see :func:`inputs_reaching`)."""
    out = []
    for p in graph.find_nodes(op="placeholder"):
        facts = input_facts(p)
        if facts is False:
            continue
        if facts is None:
            # an unused input: no recorded fact comes from it (guardable_only: nor is one
            # asked of it; the caller keeps what depends on it)
            if not p.users or guardable_only:
                continue
            return None
        if not any(u.op == "call_function" and u.target is input_guard and tuple(u.args[2:6]) == facts for u in p.users):
            out.append(p)
    return out


def unguardable_inputs(graph: torch.fx.Graph) -> list[tuple[Node, str]]:
    """The used placeholders with no facts an input guard can check (what makes
    :func:`unguarded_inputs` None), each with why, in words naming the input."""
    return [(p, why) for p in graph.find_nodes(op="placeholder") if (why := _unguardable_reason(p)) is not None]


def unguardable_input(graph: torch.fx.Graph) -> tuple[Node, str] | None:
    """The first of :func:`unguardable_inputs`, or None when every placeholder has usable
    facts, is a number or is unused."""
    found = unguardable_inputs(graph)
    return found[0] if found else None


def inputs_reaching(placeholders: list[Node]) -> dict[Node, Node]:
    """Each node whose value depends on one of ``placeholders`` (they included), mapped to the
    first of them (in the list's order) it depends on: the nodes whose recorded facts no
    input guard can make hold when those are :func:`unguardable_inputs`; the facts of every
    other node depend only on the other inputs (and the module's state). One walk of the
    nodes reached (their users, transitively)."""
    reached: dict[Node, Node] = {}
    for p in placeholders:
        stack = [p]
        while stack:
            n = stack.pop()
            if n in reached:
                continue
            reached[n] = p
            stack.extend(n.users)
    return reached


def _unguardable_reason(p: Node) -> str | None:
    """Why no input guard can check placeholder ``p``'s facts, naming it; None when one can,
    or it is a number, or unused."""
    if input_facts(p) is not None or not p.users:
        return None
    name = repr(str(p.target).lstrip("*"))
    v = p.meta.get("val", p.meta.get("example_value"))
    if isinstance(v, (list, tuple, dict)):
        kind = "dict" if isinstance(v, dict) else "tuple" if isinstance(v, tuple) else "list"
        return (
            f"input {name} is a {kind} in the example inputs, and input guards check tensors and numbers only "
            "(pass its tensors as separate inputs to specialise the graph)"
        )
    if isinstance(v, torch.Tensor):
        return f"input {name} has symbolic sizes, which input guards cannot check"
    if "val" in p.meta or "example_value" in p.meta or "tensor_meta" in p.meta:
        what = "None" if v is None else f"a {type(v).__name__}"
        return f"input {name} is {what} in the example inputs, which input guards cannot check"
    return (
        f"input {name} has no recorded shape and dtype to check (run propagate_shapes first, with example "
        "inputs; an input that is None in them records none)"
    )


def guard_inputs(ctx: Any, placeholders: list[Node], by: str) -> int:
    """Insert an :func:`input_guard` call with its recorded facts for each of
    ``placeholders`` (after the last placeholder), for the pass ``by``. Returns how many."""
    graph = ctx.graph
    first = next((n for n in graph.nodes if n.op != "placeholder"), None)
    count = 0
    for p in placeholders:
        facts = input_facts(p)
        if not facts:
            continue
        with ctx.inserting_before(first):
            ctx.call_function(input_guard, (p, str(p.target), *facts, by))
        count += 1
    return count
