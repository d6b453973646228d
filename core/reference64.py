"""A float64 run of a module that computes in float16/bfloat16, to tell rounding from a wrong
result in numeric verification.

A pass that reorders low-precision arithmetic (``fuse_conv_bn`` folds BatchNorm into the conv's
weights; a fused kernel sums in another order) moves each result by rounding errors of the
magnitudes summed, which no elementwise bound on the difference separates from a wrong
result: a bound loose enough for the first (scaled by the output's largest magnitude)
admitted a rewrite of ``sigmoid(x)`` to ``x * 0`` in an output holding one masked
``finfo(float16).min``, and one tight enough for the second refused a correct fusion whose
error against float64 was smaller than the unfused module's. So, as torch's own accuracy
check does (``torch._dynamo.utils.same`` with an ``fp64_ref``), a low-precision result outside
the tolerances is judged by its error against a float64 run of the module before the
pipeline, which must be at most a few times the error the module had itself
(:func:`fxpasses.verify.compare_outputs`).

The float64 run is a deep copy of the module with every floating tensor (parameters, buffers,
tensor attributes) in float64 (complex ones in complex128), called once, on float64 copies of
the inputs, with autocast off: memory for the copy (four times the parameters of a bfloat16
model) while it runs, and one more forward (and backward, when gradients are compared) at the
start of a verified run. Nothing is made for a module that holds no float16/bfloat16 tensor,
takes none, returns none and whose graph casts to none, outside autocast. Where the graph
names a float dtype (a cast, ``x.to(torch.bfloat16)``, ``x.float()`` or an export graph's
``_to_copy``; a factory's ``dtype``) the copy's graph computes in float64 instead, and an
autocast region it enters is entered disabled; a module that is not an FX graph and casts in
its Python code may not run in float64, and is then compared by the tolerances alone.
"""

from __future__ import annotations

import copy
import contextlib
import warnings
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import torch
from torch.utils import _pytree as pytree

from .errors import exception_message
from .verify import OutputFacts, TensorState, _module_tensors, _tensor_leaves, call_isolated

__all__ = ["Float64Reference", "LOW_PRECISION", "computes_in_low_precision", "float64_reference", "low_precision_dtype"]

#: the dtypes whose results are judged against a float64 run
LOW_PRECISION = (torch.float16, torch.bfloat16)


@dataclass
class Float64Reference:
    """A float64 run of a module: its ``outputs`` (float leaves in float64) and their
    :class:`~fxpasses.verify.OutputFacts` (``facts.grads``: the input gradients, in float64);
    both None when the run could not be made, ``why_not`` saying why."""

    outputs: Any
    facts: OutputFacts | None
    why_not: str = ""
    #: the precision the module computes in: bfloat16 where it holds, takes, returns or casts
    #: to any (or autocasts to it), else float16
    dtype: torch.dtype = torch.float16


def low_precision_dtype(
    gm: torch.nn.Module,
    inputs: Sequence[Any] | None,
    kwargs: Mapping[str, Any] | None,
    outputs: Any = None,
    state: TensorState | None = None,
) -> torch.dtype | None:
    """The coarsest float16/bfloat16 dtype ``gm`` holds, takes or returns a tensor of, casts to
    in its graph, or autocasts to; None for none. ``state``: a :class:`~fxpasses.verify.TensorState` of ``gm``
    recorded now, whose list of the module's tensors is read instead of walking the module."""
    return _coarsest(gm, _held_dtypes(gm, inputs, kwargs, outputs, state))


def _held_dtypes(
    gm: torch.nn.Module,
    inputs: Sequence[Any] | None,
    kwargs: Mapping[str, Any] | None,
    outputs: Any,
    state: TensorState | None,
) -> set[torch.dtype]:
    """The float16/bfloat16 dtypes of the tensors ``gm`` holds, takes or returns (see
    :func:`low_precision_dtype`)."""
    held = [t for t, _ in state.saved] if state is not None else _module_tensors(gm)
    leaves = [*held, *pytree.tree_leaves([list(inputs or ()), dict(kwargs or {}), outputs])]
    return {t.dtype for t in leaves if isinstance(t, torch.Tensor) and t.dtype in LOW_PRECISION}


def _coarsest(gm: torch.nn.Module, held: set[torch.dtype]) -> torch.dtype | None:
    """The coarsest of ``held``, the dtypes ``gm``'s graphs cast to and the autocast dtypes."""
    found = {torch.get_autocast_dtype(d) for d in ("cpu", "cuda") if (d == "cpu" or torch.cuda.is_available()) and torch.is_autocast_enabled(d)}
    found |= held
    for sub in gm.modules():  # a float32 model casting inside its graph (x.to(torch.bfloat16))
        if torch.bfloat16 not in found and isinstance(sub, torch.fx.GraphModule):
            found.update(_graph_dtypes(sub.graph))
    found &= set(LOW_PRECISION)
    return max(found, key=lambda d: torch.finfo(d).eps) if found else None


def _graph_dtypes(graph: torch.fx.Graph) -> set[torch.dtype]:
    """The low-precision dtypes ``graph`` names in its calls' arguments (casts, factories,
    autocast regions) or by a cast method (``x.half()``)."""
    low = set(LOW_PRECISION)
    found: set[torch.dtype] = set()
    dtype = torch.dtype
    for n in graph.nodes:  # (top-level arguments only: where casts and factories take a dtype)
        if n.op == "call_method" and _CAST_METHODS.get(n.target) in low:
            found.add(_CAST_METHODS[n.target])
        elif n.op in ("call_function", "call_method"):
            found.update(v for v in (*n.args, *n.kwargs.values()) if isinstance(v, dtype) and v in low)
    return found


def computes_in_low_precision(
    gm: torch.nn.Module,
    inputs: Sequence[Any] | None,
    kwargs: Mapping[str, Any] | None,
    outputs: Any = None,
    state: TensorState | None = None,
) -> bool:
    """Whether ``gm`` holds, takes or returns a float16/bfloat16 tensor, or runs under autocast
    (:func:`low_precision_dtype`)."""
    return low_precision_dtype(gm, inputs, kwargs, outputs, state) is not None


def _random_op(gm: torch.nn.Module) -> str | None:
    """The first node of ``gm``'s graphs that draws random numbers (``%randn_like``), or None:
    a float64 run draws other numbers (``randn`` in float64 is not the bfloat16 draw rounded),
    and judged against it, a module's own error is the noise, within which a pass removing the
    sampling passed."""
    from .effects import EffectAnalysis

    for sub in gm.modules():
        if isinstance(sub, torch.fx.GraphModule):
            effects = EffectAnalysis(sub)
            for n in sub.graph.nodes:
                if n.op in ("call_function", "call_method", "call_module") and effects.is_random(n):
                    return f"%{n.name}"
    return None


def _wide(t: Any) -> Any:
    """``t`` in float64 (complex128), a float input keeping ``requires_grad``; else as it is."""
    if not isinstance(t, torch.Tensor):
        return t
    if t.is_floating_point():
        return t.detach().to(torch.float64).requires_grad_(t.requires_grad)
    if t.is_complex():
        return t.detach().to(torch.complex128).requires_grad_(t.requires_grad)
    return t


def _float64_copy(gm: torch.nn.Module, widened: set[torch.dtype]) -> torch.nn.Module:
    """A deep copy of ``gm`` with every floating (complex) tensor it holds in float64
    (complex128): parameters and buffers through ``Module._apply`` (a tied parameter stays one
    object), tensor attributes in each module's ``__dict__``; its graphs computing in float64
    where they name a dtype of ``widened`` (:func:`_widen_graph`)."""
    with warnings.catch_warnings():
        # torch's own deprecation of its pytree LeafSpec, raised by copying an exported
        # module's specs (copyreg): a FutureWarning on every low-precision run (a new-user check)
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*LeafSpec")
        wide = copy.deepcopy(gm)
    for sub in wide.modules():
        if isinstance(sub, torch.fx.GraphModule) and _widen_graph(sub.graph, widened):
            sub.recompile()
    wide._apply(lambda t: t.to(torch.complex128 if t.is_complex() else torch.float64) if t.is_floating_point() or t.is_complex() else t)
    for m in wide.modules():
        attrs = vars(m)
        for k, v in list(attrs.items()):
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter):
                attrs[k] = _wide(v)
    return wide


#: the methods that cast to a float dtype: the dtype, and the method casting to float64
_CAST_METHODS = {"half": torch.float16, "bfloat16": torch.bfloat16, "float": torch.float32}


def _widen_graph(graph: torch.fx.Graph, widened: set[torch.dtype]) -> bool:
    """Make the float64 copy's graph compute in float64 where it names a dtype of ``widened``
    (the module's own low-precision dtype and float32): a cast (``x.type(v.dtype)``, as an
    export graph's ``_to_copy(dtype=torch.bfloat16)``, ``x.half()``, ``x.float()``) or a
    factory's ``dtype`` casts to or makes float64 instead (GPT-2's eager attention casts its
    weights to the value's dtype, and float64 values then met bfloat16 weights; a cast back to
    float32 would meet float64 values). A dtype the module does not hold is the graph's own
    choice, kept: a float8 quantize-dequantize, or a float32 model rounding an activation
    through bfloat16 on purpose, rounds in the float64 run too, so a pass that removes it is
    seen (widened, such a removal looked like a correction). Export's dtype assertions
    (``aten._assert_tensor_metadata``) go. Returns whether anything changed."""
    from torch.fx.node import map_aggregate

    def widen(v: Any) -> Any:
        if isinstance(v, torch.dtype) and v in widened:
            return torch.complex128 if v.is_complex else torch.float64
        return v

    meta_assert = getattr(getattr(torch.ops.aten, "_assert_tensor_metadata", None), "default", None)
    changed = False
    for n in list(graph.nodes):
        if n.op == "call_function" and meta_assert is not None and n.target is meta_assert and not n.users:
            graph.erase_node(n)
            changed = True
            continue
        if n.op not in ("call_function", "call_method"):
            continue
        if n.op == "call_method" and _CAST_METHODS.get(n.target) in widened:
            n.target = "double"
            changed = True
        args, kwargs = map_aggregate(n.args, widen), map_aggregate(n.kwargs, widen)
        if args != n.args or kwargs != n.kwargs:
            n.args, n.kwargs = args, kwargs
            changed = True
    return changed


@contextlib.contextmanager
def _no_autocast() -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for device in ("cpu", "cuda"):
            if device == "cpu" or torch.cuda.is_available():
                stack.enter_context(torch.autocast(device_type=device, enabled=False))
        yield


def float64_reference(
    gm: torch.nn.Module,
    inputs: Sequence[Any] | None,
    kwargs: Mapping[str, Any] | None,
    expected: Any,
    expected_facts: OutputFacts | None,
    state: TensorState | None = None,
) -> Float64Reference | None:
    """The float64 run of ``gm`` on ``inputs``/``kwargs`` (see the module doc), for comparing
    against the run that gave ``expected`` (its outputs) and ``expected_facts``; None when
    ``gm`` does not compute in low precision (:func:`computes_in_low_precision`). The gradient
    weights are rounded through the dtypes of the expected run's outputs, so the float64 run
    differentiates the same function. A module that cannot be copied or does not run in
    float64 gives a reference without outputs, saying why (the comparison then has none).
    ``state``: see :func:`computes_in_low_precision`."""
    own = _held_dtypes(gm, inputs, kwargs, expected, state)
    dtype = _coarsest(gm, own)
    if dtype is None:
        return None
    random = _random_op(gm)
    if random is not None:
        return Float64Reference(
            None, None, f"it draws random numbers ({random}), which a float64 run draws otherwise", dtype
        )
    weight_dtypes = [
        t.dtype
        for path, t in _tensor_leaves(expected, "output")
        if t.is_floating_point() and expected_facts is not None and getattr(expected_facts.leaves.get(path), "requires_grad", False)
    ]
    try:
        wide = _float64_copy(gm, own | {torch.float32, torch.complex64})
    except Exception as exc:  # noqa: BLE001 - a module deepcopy refuses: no reference
        return Float64Reference(None, None, f"copying the module failed: {type(exc).__name__}: {exception_message(exc)[:200]}", dtype)
    try:
        with _no_autocast():
            out, facts = call_isolated(
                wide,
                pytree.tree_map(_wide, list(inputs or ())),
                TensorState(wide),
                pytree.tree_map(_wide, dict(kwargs or {})),
                facts=True,
                weight_dtypes=weight_dtypes,
            )
    except Exception as exc:  # noqa: BLE001 - an op without a float64 kernel, a dtype check
        return Float64Reference(None, None, f"it does not run in float64: {type(exc).__name__}: {exception_message(exc)[:200]}", dtype)
    finally:
        del wide
    return Float64Reference(out, facts, "", dtype)
