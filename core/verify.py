"""Numeric verification: run a module without leaving a trace, and compare nested outputs.

A model may write its inputs or buffers in place (``x.add_(1)``, BatchNorm statistics, step
counters) or draw random numbers. Comparing two runs is only fair when both start from the
same state, so :func:`call_isolated` runs ``gm`` on fresh copies of the inputs, with the
module's tensors reset to recorded values (:class:`TensorState`), under a fixed RNG seed in a
forked RNG (the caller's random stream is left as it was), and puts the tensors back after.
"""

from __future__ import annotations

import contextlib
import io
import math
import sys
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import torch

from ._layout import LayoutCopies, copy_inputs

__all__ = [
    "TensorState",
    "call_isolated",
    "clone_outputs",
    "Comparison",
    "compare_outputs",
    "tolerances",
    "SEED",
]

#: The RNG seed every verification call runs under.
SEED = 0

# Lower bounds for the tolerances of low-precision float outputs: torch.testing.assert_close's
# defaults for these dtypes (rtol, atol). A float16 result of an exact rewrite can differ by an
# ulp or two (~1e-3 relative), which no float32 tolerance admits.
_DTYPE_FLOORS = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
}


def tolerances(dtype: torch.dtype, atol: float, rtol: float, scale: float = 0.0) -> tuple[float, float]:
    """``(atol, rtol)`` for outputs of ``dtype``: the given ones, raised for float16/bfloat16.

    For those dtypes ``rtol`` is at least ``torch.testing.assert_close``'s default for the
    dtype, and ``atol`` at least two units of rounding (``2 * finfo(dtype).eps``) times
    ``scale``, the largest magnitude of the expected tensor: a low-precision result computed
    in another order (a fused conv sums the same products differently) is off by rounding
    errors of the magnitudes summed, which an element near zero does not bound.
    """
    floor = _DTYPE_FLOORS.get(dtype)
    if floor is None:
        return atol, rtol
    return max(atol, floor[1], 2 * torch.finfo(dtype).eps * scale), max(rtol, floor[0])


def _module_tensors(gm: torch.nn.Module) -> list[torch.Tensor]:
    seen: set[int] = set()
    out = []
    for t in (*gm.parameters(), *gm.buffers()):
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    for m in gm.modules():
        for value in vars(m).values():
            if isinstance(value, torch.Tensor) and id(value) not in seen:
                seen.add(id(value))
                out.append(value)
    return out


class TensorState:
    """The values of every tensor a module holds (parameters, buffers, tensor attributes),
    recorded by identity so that they can be put back after a run that wrote them.

    :meth:`restore` compares every tensor with its recorded value, bit for bit:
    ``Tensor._version`` would miss writes through ``.data`` and batch norm's running-statistics
    updates, which do not bump it. Only tensors that differ are written back, so the others
    keep their version: autograd refuses to backpropagate through a tensor written in place
    after it was saved for backward (a ``symbolic_trace`` tensor constant computed from a
    parameter, for one).
    """

    def __init__(self, gm: torch.nn.Module) -> None:
        with torch.no_grad():
            self.saved = [(t, t.detach().clone()) for t in _module_tensors(gm)]

    def restore(self) -> None:
        """Write the recorded values back into every recorded tensor that differs from them."""
        with torch.no_grad():
            for t, value in self.saved:
                if not _same_bits(t, value):
                    t.copy_(value)


_SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _same_bits(t: torch.Tensor, value: torch.Tensor) -> bool:
    """Whether ``t`` holds exactly ``value``: same shape, dtype and bits (NaNs and the sign of
    zero included, which ``torch.equal`` does not tell apart)."""
    if t.shape != value.shape or t.dtype != value.dtype or t.device != value.device:
        return False
    if t.is_floating_point() or t.is_complex():
        as_int = _SAME_SIZE_INT.get(t.element_size())
        if as_int is None:
            return False  # e.g. complex128: no integer type that wide; write it back
        try:
            return torch.equal(t.detach().view(as_int), value.view(as_int))
        except RuntimeError:  # a layout that cannot be viewed: write it back
            return False
    return torch.equal(t.detach(), value)


def clone_outputs(out: Any) -> Any:
    """Detached copies of every tensor in a (nested) output, structure kept."""
    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (list, tuple)):
        items = [clone_outputs(o) for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
    if isinstance(out, dict):
        return {k: clone_outputs(v) for k, v in out.items()}
    if _pytree_children(out) is not None:  # a registered dataclass or other pytree node
        from torch.utils import _pytree as pytree

        return pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone(), out)
    return out


_AUTOCAST_DEVICES = ("cpu", "cuda")


@contextlib.contextmanager
def global_modes_kept() -> Iterator[None]:
    """Put torch's global modes back after running graph code: grad mode and autocast (enabled,
    dtype, cache) per device type.

    Graphs can switch them without switching back: a TorchDynamo graph cut by a graph break
    inside ``torch.no_grad()`` or ``torch.autocast`` holds only the ``_set_grad_enabled`` /
    ``_enter_autocast`` call; running it (to verify, time or propagate shapes) left the caller's
    process without gradients or with autocast on.
    """
    grad = torch.is_grad_enabled()
    autocast = [(d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _AUTOCAST_DEVICES]
    cache = torch.is_autocast_cache_enabled()
    try:
        yield
    finally:
        torch._C._set_grad_enabled(grad)
        for device, enabled, dtype in autocast:
            if torch.is_autocast_enabled(device) != enabled:
                torch.set_autocast_enabled(device, enabled)
            if torch.get_autocast_dtype(device) != dtype:
                torch.set_autocast_dtype(device, dtype)
        if torch.is_autocast_cache_enabled() != cache:
            torch.set_autocast_cache_enabled(cache)


def call_isolated(
    gm: torch.nn.Module,
    inputs: Sequence[Any] | None,
    state: TensorState,
    kwargs: Mapping[str, Any] | None = None,
) -> Any:
    """``gm(*inputs, **kwargs)`` from the recorded ``state``, on input copies, under :data:`SEED`.

    The module's tensors are reset to ``state`` before the call and again after it, the
    inputs (positional and keyword) are copied with their layout (sizes, strides, storage
    offset, shared storage: :class:`fxpasses._layout.LayoutCopies`; the caller's tensors are
    not written), and the
    RNG is forked so the caller's random stream does not move. Returns detached copies of the
    outputs.

    ``state`` must be recorded from the module as it is meant to be called: a pass may write
    weights in place (a correct rewrite), so record the state after the pass
    (:class:`TensorState` ``(gm)``) to verify it, not the one from before the pipeline.

    Raises:
        Exception: whatever the module raises on these inputs (its tensors are put back first).
    """
    state.restore()
    printed = io.StringIO()
    try:
        # a GraphModule prints its own traceback to stderr when its code raises; the caller
        # reports the exception (with its cause), so that print is dropped on failure
        with global_modes_kept(), torch.no_grad(), torch.random.fork_rng(devices=[]), contextlib.redirect_stderr(printed):
            torch.manual_seed(SEED)
            # copies keeping each input's layout and storage sharing: the module sees them as
            # it sees the caller's (an expanded input it writes fails here as it would there)
            copies = LayoutCopies()
            args = copy_inputs(list(inputs or ()), copies)
            keywords = copy_inputs(dict(kwargs), copies) if kwargs else {}
            out = clone_outputs(gm(*args, **keywords))
    finally:
        state.restore()
    if printed.getvalue():  # the call succeeded: what it printed is the model's own output
        sys.stderr.write(printed.getvalue())
    return out


def _pytree_children(value: Any) -> list[tuple[str, Any]] | None:
    """``(key, child)`` of a value of a registered pytree node type other than the list,
    tuple and dict types compared above (a dataclass registered with
    ``torch.export.register_dataclass``), keys as pytree spells them (``.logits``); None for
    other values."""
    from torch.utils import _pytree as pytree

    node = pytree.SUPPORTED_NODES.get(type(value))
    if node is None or isinstance(value, (list, tuple, dict)):
        return None
    if node.flatten_with_keys_fn is not None:
        keyed, _ = node.flatten_with_keys_fn(value)
        return [(pytree.keystr([k]), v) for k, v in keyed]
    flat, _ = node.flatten_fn(value)
    return [(f"[{i}]", v) for i, v in enumerate(flat)]


@dataclass
class Comparison:
    """Result of :func:`compare_outputs`: an empty ``message`` means equal within tolerance."""

    message: str
    max_abs: float


def compare_outputs(actual: Any, expected: Any, atol: float, rtol: float, path: str = "output") -> Comparison:
    """Compare nested outputs leaf by leaf: structure, dtype, shape, device, NaN positions,
    values.

    Float values match when ``|actual - expected| <= atol + rtol * |expected|`` elementwise
    (see :func:`tolerances` for float16/bfloat16); infinities must be equal; other dtypes and
    Python values must be equal. Returns the first mismatch as a message naming the leaf
    (``output[0][1]``) and the largest absolute error seen (0 when all match exactly).

    Raises:
        ValueError: ``atol`` or ``rtol`` is negative or not finite.
    """
    if not (math.isfinite(atol) and math.isfinite(rtol)) or atol < 0 or rtol < 0:
        raise ValueError(f"atol and rtol must be finite and >= 0, got atol={atol!r}, rtol={rtol!r}")
    worst = 0.0

    def walk(a: Any, e: Any, p: str) -> str:
        nonlocal worst
        if isinstance(e, torch.Tensor):
            e = e.detach()
            if not isinstance(a, torch.Tensor):
                return f"{p}: expected a tensor, got {type(a).__name__}"
            a = a.detach()
            if a.dtype != e.dtype:
                return f"{p}: dtype changed from {e.dtype} to {a.dtype}"
            if a.shape != e.shape:
                return f"{p}: shape changed from {tuple(e.shape)} to {tuple(a.shape)}"
            if a.device != e.device:  # e.g. a folded constant made on the CPU for a GPU model
                return f"{p}: device changed from {e.device} to {a.device}"
            if e.numel() == 0:
                return ""
            if e.is_floating_point() or e.is_complex():
                ea, aa = e.to(torch.complex128 if e.is_complex() else torch.float64), a.to(
                    torch.complex128 if e.is_complex() else torch.float64
                )
                nan_e, nan_a = torch.isnan(ea), torch.isnan(aa)
                if not torch.equal(nan_e, nan_a):
                    return f"{p}: NaN positions differ"
                inf_e, inf_a = torch.isinf(ea), torch.isinf(aa)
                inf = inf_e | inf_a
                if inf.any() and not torch.equal(ea[inf], aa[inf]):
                    return f"{p}: infinities differ"
                skip = nan_e | inf
                finite = ea[~skip]
                scale = float(finite.abs().max()) if finite.numel() else 0.0
                at, rt = tolerances(e.dtype, atol, rtol, scale)
                diff = torch.where(skip, torch.zeros((), dtype=torch.float64), (aa - ea).abs())
                m = float(diff.max())
                worst = max(worst, m)
                magnitude = torch.where(skip, torch.zeros((), dtype=torch.float64), ea.abs())
                bad = diff > at + rt * magnitude
                if bad.any():
                    idx = tuple(int(i) for i in bad.nonzero()[0])
                    # |a - e| / |e|, infinite where e is 0 and a is not
                    rel = float(torch.where(diff > 0, diff / magnitude, torch.zeros((), dtype=torch.float64)).max())
                    return (
                        f"{p}: max abs error {m:.3g} exceeds atol={at:g}, rtol={rt:g} (max rel error "
                        f"{rel:.3g}; {int(bad.sum())} of {bad.numel()} elements out of tolerance, the first at "
                        f"index {idx}: {aa[idx].item():.6g} vs expected {ea[idx].item():.6g})"
                    )
                return ""
            if not torch.equal(a, e):
                m = float((a.to(torch.float64) - e.to(torch.float64)).abs().max())
                worst = max(worst, m)
                return f"{p}: values differ (max abs error {m:.3g})"
            return ""
        if isinstance(e, (list, tuple)):
            if not isinstance(a, (list, tuple)) or len(a) != len(e):
                got = f"{type(a).__name__} of {len(a)}" if isinstance(a, (list, tuple)) else type(a).__name__
                return f"{p}: expected a sequence of {len(e)}, got {got}"
            for i, (x, y) in enumerate(zip(a, e)):
                msg = walk(x, y, f"{p}[{i}]")
                if msg:
                    return msg
            return ""
        if isinstance(e, dict):
            if not isinstance(a, dict) or a.keys() != e.keys():
                return f"{p}: expected keys {sorted(map(str, e))}"
            for k in e:
                msg = walk(a[k], e[k], f"{p}[{k!r}]")
                if msg:
                    return msg
            return ""
        children = _pytree_children(e)
        if children is not None:  # a registered pytree node: a dataclass, a ModelOutput ...
            if type(a) is not type(e):
                return f"{p}: expected a {type(e).__name__}, got {type(a).__name__}"
            got = _pytree_children(a)
            assert got is not None
            if [k for k, _ in got] != [k for k, _ in children]:
                return f"{p}: expected the fields {[k for k, _ in children]}, got {[k for k, _ in got]}"
            for (key, x), (_, y) in zip(got, children):
                msg = walk(x, y, f"{p}{key}")
                if msg:
                    return msg
            return ""
        if isinstance(e, float) and isinstance(a, float) and math.isnan(e) and math.isnan(a):
            return ""
        if type(a) is not type(e) or a != e:
            return f"{p}: expected {e!r}, got {a!r}"
        return ""

    msg = walk(actual, expected, path)
    return Comparison(msg, worst)
