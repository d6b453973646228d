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
takes none and returns none, outside autocast. Ops that fix their dtype in the graph
(``x.to(torch.bfloat16)``, an export graph's ``_to_copy``) still round there: the reference is
as precise as the graph lets it be.
"""

from __future__ import annotations

import copy
import contextlib
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import torch
from torch.utils import _pytree as pytree

from .errors import exception_message
from .verify import OutputFacts, TensorState, _module_tensors, _tensor_leaves, call_isolated

__all__ = ["Float64Reference", "LOW_PRECISION", "computes_in_low_precision", "float64_reference"]

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


def _autocast_on() -> bool:
    return any(torch.is_autocast_enabled(d) for d in ("cpu", "cuda") if d == "cpu" or torch.cuda.is_available())


def computes_in_low_precision(
    gm: torch.nn.Module,
    inputs: Sequence[Any] | None,
    kwargs: Mapping[str, Any] | None,
    outputs: Any = None,
    state: TensorState | None = None,
) -> bool:
    """Whether ``gm`` holds, takes or returns a float16/bfloat16 tensor, or runs under autocast.
    ``state``: a :class:`~fxpasses.verify.TensorState` of ``gm`` recorded now, whose list of
    the module's tensors is read instead of walking the module again."""
    if _autocast_on():
        return True
    held = [t for t, _ in state.saved] if state is not None else _module_tensors(gm)
    leaves = [*held, *pytree.tree_leaves([list(inputs or ()), dict(kwargs or {}), outputs])]
    return any(isinstance(t, torch.Tensor) and t.dtype in LOW_PRECISION for t in leaves)


def _wide(t: Any) -> Any:
    """``t`` in float64 (complex128), a float input keeping ``requires_grad``; else as it is."""
    if not isinstance(t, torch.Tensor):
        return t
    if t.is_floating_point():
        return t.detach().to(torch.float64).requires_grad_(t.requires_grad)
    if t.is_complex():
        return t.detach().to(torch.complex128).requires_grad_(t.requires_grad)
    return t


def _float64_copy(gm: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of ``gm`` with every floating (complex) tensor it holds in float64
    (complex128): parameters and buffers through ``Module._apply`` (a tied parameter stays one
    object), tensor attributes in each module's ``__dict__``; without the dtype assertions of
    an export graph (``aten._assert_tensor_metadata``)."""
    wide = copy.deepcopy(gm)
    if isinstance(wide, torch.fx.GraphModule):
        # an export graph asserts the dtype of what it casts (``x.float()``): the float64 run
        # gives it float64 on purpose
        meta_assert = getattr(torch.ops.aten, "_assert_tensor_metadata", None)
        asserts = [] if meta_assert is None else wide.graph.find_nodes(op="call_function", target=meta_assert.default)
        for n in asserts:
            if not n.users:
                wide.graph.erase_node(n)
        if asserts:
            wide.recompile()
    wide._apply(lambda t: t.to(torch.complex128 if t.is_complex() else torch.float64) if t.is_floating_point() or t.is_complex() else t)
    for m in wide.modules():
        attrs = vars(m)
        for k, v in list(attrs.items()):
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter):
                attrs[k] = _wide(v)
    return wide


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
    if not computes_in_low_precision(gm, inputs, kwargs, expected, state):
        return None
    weight_dtypes = [
        t.dtype
        for path, t in _tensor_leaves(expected, "output")
        if t.is_floating_point() and expected_facts is not None and getattr(expected_facts.leaves.get(path), "requires_grad", False)
    ]
    try:
        wide = _float64_copy(gm)
    except Exception as exc:  # noqa: BLE001 - a module deepcopy refuses: no reference
        return Float64Reference(None, None, f"copying the module failed: {type(exc).__name__}: {exception_message(exc)[:200]}")
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
        return Float64Reference(None, None, f"it does not run in float64: {type(exc).__name__}: {exception_message(exc)[:200]}")
    finally:
        del wide
    return Float64Reference(out, facts)
