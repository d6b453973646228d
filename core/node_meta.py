"""A new node's value metadata, from its inputs': what ``torch.export`` and TorchDynamo record
for every node they make (``meta["val"]`` / ``meta["example_value"]``: a ``FakeTensor`` with
the node's sizes, strides, dtype and device, symbolic where the graph's shapes are dynamic;
``meta["tensor_meta"]``), computed for a node a pass made, so that the pass's later hooks
and the passes after it see its shape (``PassContext.tensor_info``).

The node's op runs on its inputs' recorded fake values in the fake tensor mode they belong
to, as ``torch.fx.passes.fake_tensor_prop.FakeTensorProp`` runs every node, with the mode's
guards suppressed (an analysis adds no guards to the ShapeEnv TorchDynamo compiles, as
``propagate_shapes`` does not).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch.fx import Node
from torch.fx.node import map_aggregate, map_arg
from torch.fx.passes.shape_prop import TensorMetadata, _extract_tensor_metadata
from torch.utils import _pytree as pytree

__all__ = ["InferMetaError", "infer_meta", "recorded_value", "tensor_metadata"]


class InferMetaError(RuntimeError):
    """A node's op raised on its inputs' recorded values (:func:`infer_meta`): the node is not
    a call its inputs take (``node %mm (call_function aten.mm.default) raises on its inputs'
    values (sizes (3, 5), (3, 5)): RuntimeError: a and b must have same reduction dim ...``).
    The op's exception is its ``__cause__``."""

#: where a graph records a node's value: ``val`` (torch.export, propagate_shapes),
#: ``example_value`` (TorchDynamo)
VALUE_KEYS = ("val", "example_value")


def recorded_value(node: Node) -> Any:
    """``node.meta["val"]``, else ``["example_value"]``, else None."""
    meta = node.meta
    for key in VALUE_KEYS:
        v = meta.get(key)
        if v is not None:
            return v
    return None


def _fake_mode_of(values: Any) -> Any:
    """The one fake tensor mode the fake tensors among ``values`` belong to; None when there
    are none, or they belong to several."""
    from torch._subclasses.fake_tensor import FakeTensor

    modes = {id(v.fake_mode): v.fake_mode for v in pytree.tree_leaves(values) if isinstance(v, FakeTensor)}
    return next(iter(modes.values())) if len(modes) == 1 else None


def _graph_fake_mode(graph: torch.fx.Graph) -> Any:
    """The fake tensor mode of the graph's recorded placeholder values (for a node without
    inputs: a ``get_attr``)."""
    return _fake_mode_of([recorded_value(n) for n in graph.find_nodes(op="placeholder")])


#: what a fake tensor mode raises for an op it cannot run without real data (not a fault of
#: the node): the node is left without a value
def _cannot_run() -> tuple[type[BaseException], ...]:
    from torch._subclasses import fake_tensor as ft
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    kinds = [GuardOnDataDependentSymNode]
    for name in ("UnsupportedFakeTensorException", "DataDependentOutputException", "DynamicOutputShapeException", "UnsupportedOperatorException"):
        kind = getattr(ft, name, None)
        if isinstance(kind, type):
            kinds.append(kind)
    return tuple(kinds)


def _sizes(value: Any) -> str:
    return "(" + ", ".join(str(tuple(v.shape)) if isinstance(v, torch.Tensor) else repr(v) for v in value) + ")"


def _symbolic_call(node: Node, values: dict[Node, Any]) -> Any:
    """``node``'s value from inputs that are sizes only (SymInts, numbers), computed on them
    with the guards of their ShapeEnv suppressed; recorded as :func:`infer_meta` records; None
    when it cannot be computed."""
    syms = [v for v in pytree.tree_leaves(list(values.values())) if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool))]
    shape_env = syms[0].node.shape_env if syms else None
    no_guards = shape_env.suppress_guards() if shape_env is not None else contextlib.nullcontext()
    args, kwargs = map_arg((node.args, node.kwargs), values.__getitem__)
    try:
        with no_guards:
            value = node.target(*args, **kwargs)  # type: ignore[operator]
    except Exception:  # noqa: BLE001 - not computable from sizes alone: no value, as for no fake mode
        return None
    return _record(node, value)


def _record(node: Node, value: Any) -> Any:
    """Record ``value`` as ``node``'s: under each key of :data:`VALUE_KEYS` its inputs record
    theirs under (``val`` when none do), with its ``tensor_meta`` (dropped when it holds no
    tensor). Returns ``value``."""
    for key in [k for k in VALUE_KEYS if any(k in n.meta for n in node.all_input_nodes)] or ["val"]:
        node.meta[key] = value
    tensor_meta = tensor_metadata(value)
    if tensor_meta is not None:
        node.meta["tensor_meta"] = tensor_meta
    else:
        node.meta.pop("tensor_meta", None)
    return value


def tensor_metadata(value: Any, formats: dict[Any, Any] | None = None) -> Any:
    """``TensorMetadata`` for each tensor of ``value`` (None when it holds no tensor), as
    ``torch.fx.passes.shape_prop._extract_tensor_metadata`` makes it.

    ``formats``: a memo of the memory format by ``(sizes, strides)`` for one propagation
    (:func:`_metadata`)."""
    if isinstance(value, torch.Tensor):  # the usual value, without map_aggregate (~10 us a call)
        return _metadata(value, formats)
    found = False

    def extract(v: Any) -> Any:
        nonlocal found
        if isinstance(v, torch.Tensor):
            found = True
            return _metadata(v, formats)
        return v

    meta = map_aggregate(value, extract)
    return meta if found else None


def _metadata(t: torch.Tensor, formats: dict[Any, Any] | None) -> TensorMetadata:
    """``_extract_tensor_metadata(t)``, with the memory format taken from ``formats`` when a
    tensor of the same sizes and strides had it computed before.

    The memory format is the first of contiguous, channels-last, channels-last-3d whose
    layout ``t`` has (``is_contiguous_for_memory_format_or_false``): a function of the
    sizes and strides alone, and most of the 10 us the extraction takes (four layout tests
    in Python). A dense, non-quantized tensor with concrete sizes gets a new
    ``TensorMetadata`` of its own sizes, dtype, ``requires_grad``, strides and the memoized
    format; any other tensor (sparse, quantized, symbolic sizes: not hashable) is extracted
    by torch.
    """
    if formats is None or t.layout is not torch.strided or t.is_quantized:
        return _extract_tensor_metadata(t)
    shape, stride = t.shape, t.stride()
    key = (shape, stride)
    try:
        fmt = formats[key]
    except KeyError:
        tm = _extract_tensor_metadata(t)
        formats[key] = tm.memory_format
        return tm
    except TypeError:  # a SymInt size or stride
        return _extract_tensor_metadata(t)
    return TensorMetadata(shape, t.dtype, t.requires_grad, stride, fmt, False, {})



def _attribute_value(gm: torch.fx.GraphModule, target: Any, mode: Any) -> Any:
    """The value a ``get_attr`` of ``target`` reads, as a value to record: a tensor made fake
    in ``mode``, a number as it is; None for anything else (a submodule).

    Raises:
        AttributeError: ``gm`` has no such attribute.
    """
    value: Any = gm
    for part in str(target).split("."):
        value = getattr(value, part)
    if isinstance(value, torch.Tensor):
        return mode.from_tensor(value, static_shapes=True)
    if isinstance(value, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value
    return None


def infer_meta(gm: torch.fx.GraphModule, node: Node) -> Any:
    """Compute and record ``node``'s value metadata from its inputs' (see the module doc):
    ``meta["val"]`` (and ``meta["example_value"]`` where the inputs have that key, a
    TorchDynamo graph's) and ``meta["tensor_meta"]``. Returns the value: a ``FakeTensor``, a
    tuple of them, a SymInt, ... .

    Returns None and records nothing when the value cannot be computed: an input node has no
    recorded fake value (a ``symbolic_trace`` graph before ``propagate_shapes``; a
    placeholder or output ``node``; a ``get_attr`` input without one, such as a pass's
    ``ctx.get_attr``, is read from the module instead, where the other inputs or the graph
    give a fake mode), the op needs real data (a data-dependent output size, an
    op without a fake implementation), or a ``get_attr`` reads no tensor or number (a
    submodule).

    Nothing but ``node.meta`` is written: the op runs on copies of its inputs' values (an
    in-place op, ``x.t_()``, would rewrite the input's recorded value), and a ``call_module``
    on fake copies of the submodule's parameters and buffers (``torch.func.functional_call``:
    a training-mode BatchNorm would update its real statistics). The mode's guards are
    suppressed, as ``propagate_shapes``'s are (no guard is added to the graph TorchDynamo
    compiles): in a graph with dynamic sizes, a call valid at the example's sizes only
    (``x.view(32)`` of an ``x`` of ``(s0, 4)`` with ``s0 = 8``) gets a value, not an error;
    numeric verification runs the example's sizes, and ``torch.export`` or TorchDynamo refuse
    such a graph when they trace it again.

    Raises:
        InferMetaError: the op raises on those values (``a and b must have same reduction
            dim``): the node is not a call its inputs take; the message names the node, its
            target and its inputs' sizes.
    """
    from .capture import _quiet_fake_tensor_log

    op = node.op
    if op in ("placeholder", "output"):
        return None
    inputs = node.all_input_nodes
    values = {n: recorded_value(n) for n in inputs}
    # a get_attr input without a recorded value (one the pass made: ctx.get_attr) is read from
    # the module now, not recorded on it; any other input without one: nothing to compute from
    unread = [n for n, v in values.items() if v is None]
    if any(n.op != "get_attr" for n in unread):
        return None
    known = [v for v in values.values() if v is not None]
    mode = _fake_mode_of(known) if known else _graph_fake_mode(node.graph)
    if unread:
        if mode is None:
            return None
        for n in unread:
            try:
                with _quiet_fake_tensor_log():
                    values[n] = _attribute_value(gm, n.target, mode)
            except AttributeError:
                return None
            if values[n] is None:
                return None
    if mode is None:
        if op != "call_function" or not inputs or any(isinstance(v, torch.Tensor) for v in pytree.tree_leaves(list(values.values()))):
            return None
        return _symbolic_call(node, values)  # sizes only (``x.size(0) * 2``): no fake mode needed
    args, kwargs = map_arg((node.args, node.kwargs), values.__getitem__)
    shape_env = mode.shape_env
    no_guards = shape_env.suppress_guards() if shape_env is not None else contextlib.nullcontext()
    try:
        # (without torch's error log and traceback for an op that fails: InferMetaError says it)
        with mode, no_guards, _quiet_fake_tensor_log():
            # copies: an in-place op must not rewrite the inputs' recorded values
            args, kwargs = pytree.tree_map_only(torch.Tensor, torch.Tensor.clone, (args, kwargs))
            if op == "call_function":
                value = node.target(*args, **kwargs)  # type: ignore[operator]
            elif op == "call_method":
                value = getattr(args[0], node.target)(*args[1:], **kwargs)  # type: ignore[arg-type]
            elif op == "get_attr":
                value = _attribute_value(gm, node.target, mode)
                if value is None:
                    return None  # a submodule, or another object: no value to record
            else:  # call_module: on fake copies of its parameters and buffers (written, if at all, there)
                sub = gm.get_submodule(str(node.target))
                state = {
                    name: mode.from_tensor(t, static_shapes=True)
                    for name, t in [*sub.named_parameters(remove_duplicate=False), *sub.named_buffers(remove_duplicate=False)]
                }
                value = torch.func.functional_call(sub, state, tuple(args), dict(kwargs), tie_weights=False, strict=False)
    except _cannot_run():
        return None
    except Exception as exc:
        target = torch.fx.node._get_qualified_name(node.target) if op == "call_function" and not isinstance(
            node.target, torch._ops.OpOverload
        ) else str(node.target)
        raise InferMetaError(
            f"node %{node.name} ({op} {target}) raises on its inputs' values "
            f"{_sizes(pytree.tree_leaves((args, kwargs)))}: {type(exc).__name__}: {exc}"
        ) from exc
    return _record(node, value)
