"""Copy-on-write of a module's tensors while a pass runs, so that rollback restores them.

Copying every parameter and buffer before each pass would make rollback exact for tensors
written in place, but costs a full copy of the model per pass (328 MiB and about 0.1 s for
GPT-2 12x768, see ``benchmarks/ROLLBACK.md``). A :class:`WriteGuard` instead watches the
operators the pass dispatches: before the first operator that *writes* a tensor sharing storage
with a recorded parameter, buffer or tensor attribute, it clones that tensor. Rollback copies the
clones back. A pass that writes nothing costs nothing but the dispatch of its tensor operators
through one Python mode (about 2 us per operator).

Which arguments an operator writes is read from its schema (``Tensor(a!)`` arguments:
``alias_info.is_write``), the same information functionalization uses, so in-place methods
(``mul_``, ``copy_``, ``zero_``), ``out=`` variants, writes through ``.data`` or through a view,
and batch norm's running statistics in training mode are all seen; ``set_``, ``resize_`` and
``as_strided_`` are undone onto the original storage. Writes that bypass the dispatcher are
not seen: rebinding ``param.data = other`` is still detected by the snapshot (``data_ptr()``) and
reported, and writes through ``Tensor.numpy()`` memory or the raw storage are not detected at
all (only a snapshot with ``copy_tensors=True`` undoes them).
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch._subclasses.fake_tensor import is_fake
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["CallersTensors", "WriteGuard", "flag_changes", "put_back_flags", "restore_tensor", "same_layout", "tensor_flags"]

_Written = tuple[tuple[int, str], ...]  # ((position, name), ...) of written arguments

# operator overload -> (arguments it always writes, and those it writes in training mode with
# the position of its ``training`` argument, or None)
_WRITES: dict[Any, tuple[_Written, tuple[int, _Written] | None]] = {}


# Operators whose schemas do not mark the running statistics they update in training mode
# (``native_batch_norm`` is what ``F.batch_norm(training=True)`` reaches on CPU); AOT autograd
# works around the same gap by decomposing it into ``_native_batch_norm_legit``, whose schema
# states the mutation (torch/_decomp/decompositions.py, ``native_batch_norm_decomposition``).
# They write the statistics only in training mode (their ``training`` argument).
_UNANNOTATED_WRITES = {
    "aten::native_batch_norm": ("running_mean", "running_var"),
    "aten::cudnn_batch_norm": ("running_mean", "running_var"),
    "aten::miopen_batch_norm": ("running_mean", "running_var"),
}


def _written_arguments(func: Any) -> tuple[_Written, tuple[int, _Written] | None]:
    """What ``func`` writes (see :data:`_WRITES`), from its schema and the table above."""
    try:
        schema = func._schema
        arguments = schema.arguments
    except AttributeError:  # not an OpOverload (e.g. a higher-order operator)
        return (), None
    always = tuple((i, a.name) for i, a in enumerate(arguments) if a.alias_info is not None and a.alias_info.is_write)
    extra = _UNANNOTATED_WRITES.get(schema.name, ())
    names = [a.name for a in arguments]
    if extra and not schema.overload_name and "training" in names:  # .out overloads are annotated
        stats = tuple((i, a.name) for i, a in enumerate(arguments) if a.name in extra)
        return always, (names.index("training"), stats)
    return always, None


def _storage_key(t: Any) -> int:
    """The address of ``t``'s storage, or 0 where it has none (meta, fake, sparse, empty)."""
    if t.is_meta or is_fake(t):  # no real storage (and torch warns on a fake data_ptr)
        return 0
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return 0


class WriteGuard(TorchDispatchMode):
    """Clone each recorded tensor before the first operator that writes its storage.

    Args:
        tensors: the tensors to protect, by qualified name (``Snapshot`` records them).
        data_ptrs: each one's ``data_ptr()`` when recorded: one whose data the pass rebound
            (``t.data = other``) before its first write is not cloned, since what is then
            written is the new data, not the tensor's own (putting that clone back left the
            tensor on the new data: a final new-user check); the rebinding is the caller's to
            see (``Snapshot`` reports it) or undo.

    Use as a context manager around the pass; then :meth:`restore` copies the clones back into
    the very same tensor objects (identity kept), and :attr:`saved` names what was written.
    """

    # Higher-order operators (torch.cond, while_loop, scan, map) reach __torch_dispatch__
    # whole: they have no schema of writes, so they run as they are, their bodies outside the
    # guard (torch requires those bodies not to write their inputs; a write to a module tensor
    # in one is not seen here, and a snapshot names it as it names one through .data)
    supports_higher_order_operators = True

    def __init__(self, tensors: dict[str, torch.Tensor], data_ptrs: dict[str, int] | None = None) -> None:
        super().__init__()
        self.tensors = tensors
        self.data_ptrs = data_ptrs
        self.saved: dict[str, torch.Tensor] = {}
        # an alias of each saved tensor as it was (same storage, offset, sizes, strides), so
        # that ``set_``/``resize_``/``as_strided_`` are undone onto the original storage
        self.layouts: dict[str, torch.Tensor] = {}
        self._by_storage: dict[int, list[tuple[str, torch.Tensor]]] | None = None

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        known = _WRITES.get(func)
        if known is None:
            known = _WRITES[func] = _written_arguments(func)
        written, conditional = known
        if conditional is not None:
            pos, stats = conditional
            training = args[pos] if pos < len(args) else kwargs.get("training")
            if training is not False:  # True, or unknown (a symbolic value): as written
                written = written + stats
        for i, name in written:
            value = args[i] if i < len(args) else kwargs.get(name)
            if isinstance(value, torch.Tensor):
                self._before_write(value)
            elif isinstance(value, (list, tuple)):
                for v in value:
                    if isinstance(v, torch.Tensor):
                        self._before_write(v)
        return func(*args, **kwargs)

    def _before_write(self, t: torch.Tensor) -> None:
        key = _storage_key(t)
        if not key:
            return
        if self._by_storage is None:  # built at the first write: most passes write nothing
            index: dict[int, list[tuple[str, torch.Tensor]]] = {}
            ptrs = self.data_ptrs
            for name, tensor in self.tensors.items():
                if ptrs is not None and tensor.data_ptr() != ptrs[name]:
                    continue  # rebound: its own data is not what is written
                k = _storage_key(tensor)
                if k:
                    index.setdefault(k, []).append((name, tensor))
            self._by_storage = index
        for name, tensor in self._by_storage.get(key, ()):
            if name not in self.saved:
                # modes are off inside __torch_dispatch__: this clone is not seen by the guard
                self.layouts[name] = tensor.detach()
                self.saved[name] = tensor.detach().clone()

    def restore(self) -> list[str]:
        """Copy every saved tensor back into its tensor object; return their names."""
        with torch.no_grad():
            for name, copy in self.saved.items():
                restore_tensor(self.tensors[name], self.layouts[name], copy)
        return list(self.saved)


def _lazy_dynamo_disable(cls: type) -> None:
    """Keep TorchDynamo out of the guard's ``__torch_dispatch__`` without importing it.

    torch wraps every mode's ``__torch_dispatch__`` so that TorchDynamo does not trace it (a
    pass may compile or export code while the guard is on); the wrapper imports
    ``torch._dynamo`` at the first operator (about 1 s) to build the disabled function, and
    caches that in the function's ``__dynamo_disable`` attribute (``torch/_compile.py``). This
    pre-fills the cache with a function that runs the plain method while ``torch._dynamo`` is not
    imported or has no frame hook installed (``get_eval_frame_callback()`` is None: nothing can
    be tracing then, and the disabled function's work is to set that hook to None around the
    call), and the disabled one otherwise. Should torch rename the attribute, its wrapper
    imports TorchDynamo as usual: slower, still correct.
    """
    wrapped = cls.__dict__.get("__torch_dispatch__")
    raw = getattr(wrapped, "__wrapped__", None)
    if raw is None:
        return
    disabled: list[Any] = []
    try:  # the C-level frame hook TorchDynamo installs while it runs (None: none installed)
        callback = torch._C._dynamo.eval_frame.get_eval_frame_callback
    except AttributeError:  # pragma: no cover - a torch without it: always the disabled one
        callback = None
    is_compiling = torch.compiler.is_compiling

    def dispatch(*args: Any, **kwargs: Any) -> Any:
        if "torch._dynamo" not in sys.modules:
            return raw(*args, **kwargs)
        if callback is not None and not is_compiling() and callback() is None:
            # no frame hook installed: nothing can trace this call, and the disabled function
            # would only set the hook to None around it (about 1 us an operator). (While
            # TorchDynamo traces this function, is_compiling() is True, and the C call it
            # cannot trace is not made.)
            return raw(*args, **kwargs)
        if not disabled:
            import torch._dynamo

            disabled.append(torch._dynamo.disable(raw, recursive=True, wrapping=False))
        return disabled[0](*args, **kwargs)

    raw.__dynamo_disable = dispatch  # type: ignore[attr-defined]


_lazy_dynamo_disable(WriteGuard)


def same_layout(t: torch.Tensor, alias: torch.Tensor) -> bool:
    """Whether ``t`` views the same storage as ``alias``, at the same offset, sizes, strides
    and dtype."""
    return (
        t.dtype == alias.dtype
        and t.shape == alias.shape
        and t.untyped_storage().data_ptr() == alias.untyped_storage().data_ptr()
        and t.storage_offset() == alias.storage_offset()
        and t.stride() == alias.stride()
    )


class CallersTensors:
    """The caller's own tensors a module holds (the ``torch.compile`` backend's frozen
    parameters and buffers, which the uncompiled model reads too), guarded while a pass runs
    whatever the pass declares (``writes_tensors = False`` included): a context manager around
    the pass; then :meth:`written` names those it wrote in place (through any alias:
    ``.data``, views, ``out=``, as :class:`WriteGuard` sees them) or gave new data
    (``t.data = other``: its data pointer moved), and :meth:`restore` puts them back. Writes
    through ``Tensor.numpy()`` memory or the raw storage are not seen.

    Args:
        tensors: ``(qualified name, tensor)`` of each.
    """

    def __init__(self, tensors: Any) -> None:
        self.tensors = dict(tensors)
        # the data as it was, for a rebinding: an alias of it (same storage and layout)
        self.data = {name: t.detach() for name, t in self.tensors.items()}
        self.guard = WriteGuard(self.tensors, {name: t.data_ptr() for name, t in self.data.items()})
        self.flags = tensor_flags(self.tensors.items())

    def __enter__(self) -> "CallersTensors":
        self.guard.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.guard.__exit__(*exc)

    def written(self) -> list[str]:
        """The names of the tensors written in place or given new data, in the given order."""
        return [
            name
            for name, t in self.tensors.items()
            if name in self.guard.saved or not same_layout(t, self.data[name])
        ]

    def flags_changed(self) -> list[str]:
        """The names of the tensors whose ``requires_grad`` or ``.grad`` the pass changed (the
        model's training reads both), in the given order."""
        return [name for name, t, requires_grad, grad in self.flags if _flag_moves(t, requires_grad, grad)]

    def restore(self) -> list[str]:
        """Put every tensor the pass wrote, rebound, or changed ``requires_grad`` or ``.grad``
        of back (values, storage, layout, flags; the same objects); return their names."""
        names = self.written()
        with torch.no_grad():
            for name in names:
                if name in self.guard.saved:  # (its data too, if rebound after the write)
                    restore_tensor(self.tensors[name], self.data[name], self.guard.saved[name])
                else:  # rebound only: its own data again, which nothing wrote
                    self.tensors[name].data = self.data[name]
        self.guard.saved.clear()
        flagged = self.flags_changed()
        put_back_flags(self.flags)
        return names + [n for n in flagged if n not in names]


def tensor_flags(tensors: Any) -> list[tuple[str, torch.Tensor, bool, Any]]:
    """``(label, tensor, requires_grad, .grad)`` of each ``(label, tensor)`` (``.grad`` by
    reference, a leaf's only: a non-leaf has none to set): what a pass could change of a
    caller's tensor besides its values, for :func:`flag_changes` and :func:`put_back_flags`."""
    return [(label, t, t.requires_grad, t.grad if t.is_leaf else None) for label, t in tensors]


def _flag_moves(t: torch.Tensor, requires_grad: bool, grad: Any) -> list[str]:
    """What changed of ``t``'s recorded ``requires_grad`` and ``.grad``, in words."""
    what = []
    if t.requires_grad != requires_grad:
        what.append(f"requires_grad {requires_grad} -> {t.requires_grad}")
    now = t.grad if t.is_leaf else None
    if now is not grad:
        what.append(".grad " + ("set" if grad is None else "cleared" if now is None else "replaced"))
    return what


def flag_changes(flags: list[tuple[str, Any, bool, Any]]) -> list[str]:
    """The tensors of ``flags`` (:func:`tensor_flags`) whose ``requires_grad`` or ``.grad``
    changed, in words: ``input[0] (requires_grad True -> False, .grad set)``."""
    return [f"{label} ({', '.join(what)})" for label, t, rg, grad in flags if (what := _flag_moves(t, rg, grad))]


def put_back_flags(flags: list[tuple[str, Any, bool, Any]]) -> None:
    """Give each tensor of ``flags`` (:func:`tensor_flags`) its recorded ``requires_grad`` and
    ``.grad`` again (a leaf's: a non-leaf's cannot be set)."""
    for _, t, requires_grad, grad in flags:
        if t.requires_grad != requires_grad and t.is_leaf:
            t.requires_grad_(requires_grad)
        if t.is_leaf and t.grad is not grad:
            t.grad = grad


def restore_tensor(t: torch.Tensor, alias: torch.Tensor, values: torch.Tensor) -> None:
    """Put ``t`` back onto ``alias``'s storage and layout (``set_``, ``resize_`` or a rebound
    ``.data`` moved it) and its values back to ``values``, keeping the object ``t``. Call
    under ``torch.no_grad()``."""
    if not same_layout(t, alias):
        t.data = alias  # the original storage again: views that shared it share it again
    t.copy_(values)
