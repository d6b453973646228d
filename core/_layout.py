"""Copies of tensors that keep their layout (sizes, strides, storage offset, conjugate and
negative bits, and which of them share a storage), for running graph code on copies: the
real shape propagation (``propagate_shapes``) and the example inputs a pass is handed
(:class:`fxpasses.context.PassContext`)."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["LayoutCopies"]


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
