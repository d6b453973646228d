"""Copies of tensors that keep their layout (sizes, strides, storage offset, conjugate and
negative bits, and which of them share a storage), for running graph code on copies: the
real shape propagation (``propagate_shapes``) and the example inputs a pass is handed
(:class:`fxpasses.context.PassContext`)."""

from __future__ import annotations

import copy
from typing import Any, Callable

import torch

__all__ = ["LayoutCopies", "copy_inputs"]


class LayoutCopies:
    """Copies of tensors for a real run that keep their layout: each strided tensor becomes a
    view, at the original's storage offset, sizes and strides (and conjugate / negative bits),
    of a copy of its storage, one copy per storage, so tensors that shared a storage (a buffer
    and a view of it, an input and its slice) share the copy as they shared the original; a
    parameter's copy is an ``nn.Parameter`` with its ``requires_grad``, and the copy of any other
    tensor that requires grad requires grad too (a leaf: the run is under ``no_grad``).

    ``t.detach().clone()`` gave a packed tensor of its own to each: an expanded buffer
    (stride 0) got strides (4, 1), a view at offset 6 got offset 0, a conjugate view lost its
    bit, a write through one buffer no longer reached its view (so a data-dependent shape read
    after it came out wrong), and a written parameter's recorded value was not a parameter.
    Other tensors (sparse, quantized, subclasses) are cloned as they are.
    """

    def __init__(self) -> None:
        self._storages: dict[tuple[Any, int], Any] = {}  # (device, data_ptr) -> copied storage

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        copy = self._copy(t)
        if isinstance(t, torch.nn.Parameter):
            copy = torch.nn.Parameter(copy, requires_grad=t.requires_grad)
        elif t.requires_grad and copy.is_leaf:  # an input that requires grad is recorded so
            copy.requires_grad_(True)
        return copy

    def _copy(self, t: torch.Tensor) -> torch.Tensor:
        if type(t) not in (torch.Tensor, torch.nn.Parameter) or t.layout is not torch.strided or t.is_quantized:
            return t.detach().clone()
        try:
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
        except Exception:  # noqa: BLE001 - no storage to share (e.g. a tensor kind without one)
            return t.detach().clone()
        key = (t.device, ptr)
        new = self._storages.get(key) if ptr else None
        if new is None:
            new = storage.clone()
            if ptr:
                self._storages[key] = new
        out = torch.empty(0, dtype=t.dtype, device=t.device).set_(new, t.storage_offset(), t.size(), t.stride())
        if t.is_conj():
            out = out.conj()
        if t.is_neg():
            out = out._neg_view()
        return out


def copy_inputs(value: Any, copies: LayoutCopies, keep: Callable[[torch.Tensor], bool] | None = None) -> Any:
    """``value`` (inputs of a module: nested lists, tuples, named tuples and dicts) with every
    tensor copied by ``copies`` (so that inputs sharing a storage share the copy), each
    container rebuilt as its own type (``OrderedDict``, ``defaultdict`` with its factory, ...),
    other values as they are; a tensor for which ``keep(t)`` is true is not copied."""
    if isinstance(value, torch.Tensor):
        if keep is not None and keep(value):
            return value
        with torch.no_grad():
            return copies(value)
    if isinstance(value, (list, tuple)):
        items = [copy_inputs(v, copies, keep) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        out = copy.copy(value)  # the same mapping type (and a defaultdict's factory)
        for k, v in value.items():
            out[k] = copy_inputs(v, copies, keep)
        return out
    return value
