"""Numeric verification: run a module without leaving a trace, and compare nested outputs.

A model may write its inputs or buffers in place (``x.add_(1)``, BatchNorm statistics, step
counters) or draw random numbers. Comparing two runs is only fair when both start from the
same state, so :func:`call_isolated` runs ``gm`` on fresh copies of the inputs, with the
module's tensors reset to recorded values (:class:`TensorState`), under a fixed RNG seed in a
forked RNG (the caller's random stream is left as it was), and puts the tensors back after.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

import torch
import torch.fx

from ._layout import LayoutCopies, copy_inputs
from .errors import exception_message

__all__ = [
    "TensorState",
    "call_isolated",
    "clone_outputs",
    "Comparison",
    "compare_outputs",
    "compare_results",
    "LeafFacts",
    "OutputFacts",
    "compare_facts",
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


#: significant digits that print every value of each dtype so that it reads back exactly, and
#: two values apart: 1 + ceil(p * log10(2)) for p bits of significand (IEEE 754-2008, section
#: 5.12.2): float16 5, bfloat16 4, float32 9, float64 17
_DIGITS = {torch.float16: 5, torch.bfloat16: 4, torch.float32: 9, torch.float64: 17}


def tolerances(dtype: torch.dtype, atol: float, rtol: float, scale: float = 0.0) -> tuple[float, float]:
    """``(atol, rtol)`` for outputs of ``dtype``: the given ones, raised for float16/bfloat16
    to at least ``torch.testing.assert_close``'s defaults for the dtype.

    A low-precision result computed in another order (a fused conv sums the same products
    differently) can be off by more, by rounding errors of the magnitudes summed, which an
    element near zero does not bound: such a difference is judged against a float64 run of
    the module (:mod:`fxpasses.reference64`), not by a looser bound here (an ``atol`` scaled
    by the output's largest magnitude let a wrong rewrite through where one element was
    large, a mask's ``finfo(dtype).min``). ``scale`` is not used (kept for callers).
    """
    floor = _DTYPE_FLOORS.get(dtype)
    if floor is None:
        return atol, rtol
    return max(atol, floor[1]), max(rtol, floor[0])


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

    The states of the random number generators the module holds (a ``torch.Generator``
    attribute, which ``torch.export`` lifts as ``lifted_custom_N``) are recorded and put back
    too: every call then draws the same numbers, and verification leaves the caller's
    generators where they were (``torch.random.fork_rng`` covers only the global one).
    """

    def __init__(self, gm: torch.nn.Module) -> None:
        with torch.no_grad():
            self.saved = [(t, t.detach().clone()) for t in _module_tensors(gm)]
        self.generators = [(g, g.get_state()) for g in module_generators(gm)]

    def restore(self) -> None:
        """Write the recorded values back into every recorded tensor that differs from them,
        and the recorded state into every recorded generator."""
        with torch.no_grad():
            for t, value in self.saved:
                if not _same_bits(t, value):
                    t.copy_(value)
        for g, state in self.generators:
            g.set_state(state)


def module_generators(gm: torch.nn.Module) -> list[torch.Generator]:
    """The ``torch.Generator`` objects among the attributes of ``gm``'s modules and the
    arguments of its graphs' nodes (``symbolic_trace`` keeps ``generator=self.g`` as a
    constant argument), once each."""
    from torch.utils._pytree import tree_leaves

    seen: set[int] = set()
    out = []
    for m in gm.modules():
        values: Iterable[Any] = vars(m).values()
        graph = m.__dict__.get("_graph") if isinstance(m, torch.fx.GraphModule) else None
        if graph is not None:
            values = [*values, *(v for n in graph.nodes if n.args or n.kwargs for v in tree_leaves((n.args, n.kwargs)))]
        for value in values:
            if isinstance(value, torch.Generator) and id(value) not in seen:
                seen.add(id(value))
                out.append(value)
    return out


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
    """Detached copies of every tensor in a (nested) output, structure and container types
    kept: a named tuple stays that named tuple, a dict subclass (``OrderedDict``, a Hugging
    Face ``ModelOutput``, ``defaultdict``) stays of its class, with its other attributes."""
    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (list, tuple)):
        items = [clone_outputs(o) for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
    if type(out) is dict:
        return {k: clone_outputs(v) for k, v in out.items()}
    if isinstance(out, dict):
        # a shallow copy of the subclass (its class, its attributes: a ModelOutput's fields,
        # a defaultdict's factory), each value then replaced by its copy
        new = copy.copy(out)
        for k, v in out.items():
            dict.__setitem__(new, k, clone_outputs(v))
            if isinstance(k, str) and k in getattr(new, "__dict__", {}):  # ModelOutput: field too
                new.__dict__[k] = new[k]
        return new
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
    *,
    facts: bool = False,
    weight_dtypes: Sequence[torch.dtype] | None = None,
) -> Any:
    """``gm(*inputs, **kwargs)`` from the recorded ``state``, on input copies, under :data:`SEED`.

    The module's tensors are reset to ``state`` before the call and again after it, the
    inputs (positional and keyword) are copied with their layout (sizes, strides, storage
    offset, shared storage: :class:`fxpasses._layout.LayoutCopies`; the caller's tensors are
    not written), and the
    RNG is forked so the caller's random stream does not move. Returns detached copies of the
    outputs.

    With ``facts=True`` returns ``(outputs, OutputFacts)``: what the outputs are besides their
    values (:class:`OutputFacts`: each tensor leaf's ``requires_grad``, strides and which
    input, module tensor or other output it shares storage with, and the gradients of a fixed
    function of the outputs), for :func:`compare_facts`. The call then runs in the caller's
    grad mode (without ``facts`` always under ``no_grad``); the gradients are computed only
    when an output requires grad, so an inference call (under ``torch.no_grad()`` or
    ``torch.inference_mode()``, or with nothing that requires grad) runs no backward. A module
    that raises in grad mode (e.g. it writes in place an input that requires grad) is run
    again under ``no_grad``, and its facts say so (its gradients are not compared).
    ``weight_dtypes``: see :meth:`OutputFacts.of`.

    ``state`` must be recorded from the module as it is meant to be called: a pass may write
    weights in place (a correct rewrite), so record the state after the pass
    (:class:`TensorState` ``(gm)``) to verify it, not the one from before the pipeline.

    Raises:
        Exception: whatever the module raises on these inputs (its tensors are put back first).
    """
    grad_call_error = None
    if facts and torch.is_grad_enabled() and not torch.is_inference_mode_enabled():
        try:
            return _call(gm, inputs, state, kwargs, grad=True, weight_dtypes=weight_dtypes)
        except Exception as exc:  # noqa: BLE001 - e.g. an in-place write of a leaf that requires grad
            grad_call_error = f"{type(exc).__name__}: {exception_message(exc)[:300]}"
    out = _call(gm, inputs, state, kwargs, grad=False, facts=facts, weight_dtypes=weight_dtypes)
    if facts:  # what made the grad-mode call fail (compared: before the pass it may have run)
        out[1].grad_call_error = grad_call_error
    return out


def _unwrapped_call(gm: torch.nn.Module) -> Any:
    """``gm.__call__`` without the wrapper ``recompile()`` puts on a GraphModule's class
    (``torch.fx.graph_module._WrappedCall``): on an exception raised right in the generated
    code (a torch function given a float), that wrapper prints its own report and raises the
    exception without its traceback, which names the line, hence the node, that raised (see
    ``fxpasses.pipeline._running_node``). What the wrapper calls is called instead."""
    wrapper_type = getattr(torch.fx.graph_module, "_WrappedCall", None)
    wrapped = vars(type(gm)).get("_wrapped_call")  # what the class's __call__ calls
    if wrapper_type is None or not isinstance(wrapped, wrapper_type):
        return gm
    if wrapped.cls_call is not None:
        return functools.partial(wrapped.cls_call, gm)
    return super(wrapped.cls, gm).__call__  # type: ignore[misc]


def _call(
    gm: torch.nn.Module,
    inputs: Sequence[Any] | None,
    state: TensorState,
    kwargs: Mapping[str, Any] | None,
    *,
    grad: bool,
    facts: bool = True,
    weight_dtypes: Sequence[torch.dtype] | None = None,
) -> Any:
    """:func:`call_isolated`'s call, in grad mode ``grad``; with ``facts``, ``(outputs, facts)``."""
    state.restore()
    printed = io.StringIO()
    try:
        # a GraphModule prints its own traceback to stderr when its code raises; the caller
        # reports the exception (with its cause), so that print is dropped on failure
        with global_modes_kept(), torch.set_grad_enabled(grad), torch.random.fork_rng(devices=[]), contextlib.redirect_stderr(printed):
            torch.manual_seed(SEED)
            # copies keeping each input's layout and storage sharing: the module sees them as
            # it sees the caller's (an expanded input it writes fails here as it would there)
            copies = LayoutCopies()
            args = copy_inputs(list(inputs or ()), copies)
            keywords = copy_inputs(dict(kwargs), copies) if kwargs else {}
            raw = _unwrapped_call(gm)(*args, **keywords)
            out = clone_outputs(raw)
            if facts:
                seen = OutputFacts.of(
                    raw, args, keywords, gm, grad=grad, given=(inputs, kwargs), state=state, weight_dtypes=weight_dtypes
                )
    finally:
        state.restore()
    if printed.getvalue():  # the call succeeded: what it printed is the model's own output
        sys.stderr.write(printed.getvalue())
    return (out, seen) if facts else out


@dataclass(frozen=True)
class LeafFacts:
    """What one tensor output is besides its values (see :class:`OutputFacts`).

    ``strides`` is ``Tensor.stride()`` (None for an empty or non-strided tensor); strides of
    dimensions of size 1 are not compared (such a stride addresses no second element, and
    torch's contiguity ignores it); ``alias`` names the first input (``input[0]``,
    ``input 'mask'``), module tensor (``module tensor 'w'``) or earlier output
    (``output[0]``) that shares the leaf's storage, or is None (a tensor of its own)."""

    requires_grad: bool
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    contiguous: bool
    alias: str | None

    def layout(self) -> tuple[int | None, ...] | None:
        """The strides compared: those of dimensions of size 1 left out (None)."""
        if self.strides is None:
            return None
        return tuple(None if n == 1 else s for n, s in zip(self.shape, self.strides))


@dataclass
class OutputFacts:
    """Facts about a call's outputs that values do not show, by output path
    (``output[0]``, ``output['logits']``): :class:`LeafFacts` of each tensor leaf, and
    ``grads``: the gradients of ``sum(output * w)`` over the float outputs that require grad
    (``w``: fixed random weights of each output's shape) with respect to each input that
    requires grad, by name (``input[0]``, ``input 'mask'``; None where the outputs do not
    depend on it), or None when no output requires grad (then no backward runs), ``{}`` when
    no input requires grad. The module's own parameters' gradients are not compared: a pass
    may re-parametrise them (fused conv weights, frozen folds, rescaled weights), which
    changes their gradients but not the function of the inputs; an output that stops
    requiring grad is still told by ``requires_grad``, and when no input requires grad (a
    training batch) the backward to the parameters that require grad is run, so that one a
    pass broke (an in-place write of a tensor autograd saved) is told. ``grad_mode``: whether
    the call ran with grad mode on; ``grad_error``: the exception the backward raised, if it
    did; ``grad_call_error``: the exception the call itself raised in grad mode, when it was
    then run under ``no_grad`` (see :func:`call_isolated`)."""

    leaves: dict[str, LeafFacts]
    grads: dict[str, torch.Tensor | None] | None
    grad_mode: bool
    grad_error: str | None = None
    grad_call_error: str | None = None
    #: the inputs (``input[0]``) and module tensors (``module tensor 'bn.running_mean'``) the
    #: call wrote in place, with their values after it; the names it could have written; and
    #: each parameter's ``requires_grad``, by name
    writes: dict[str, torch.Tensor] = field(default_factory=dict)
    module_tensors: frozenset[str] = frozenset()
    parameter_flags: dict[str, bool] = field(default_factory=dict)
    #: the graph's placeholder of each positional input, by name (``input[2]`` ->
    #: ``l_self_modules_lin_parameters_weight_``), where the graph takes one placeholder per
    #: positional input (a TorchDynamo graph, whose parameters are inputs): for messages
    input_labels: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        out: Any,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        gm: torch.nn.Module,
        *,
        grad: bool,
        given: tuple[Sequence[Any] | None, Mapping[str, Any] | None] | None = None,
        state: "TensorState | None" = None,
        weight_dtypes: Sequence[torch.dtype] | None = None,
    ) -> "OutputFacts":
        """The facts of ``out``, returned by ``gm(*args, **kwargs)`` (the very tensors). With
        ``given``, the caller's ``(inputs, kwargs)`` that ``args``/``kwargs`` copy, and
        ``state``, the module's tensors recorded before the call: what the call wrote in place
        (``writes``), told by value, bit for bit (a version counter misses batch norm's running
        statistics). ``weight_dtypes``: the dtype each weight of the gradient's fixed function
        is rounded through, by differentiable output in order (default: the output's own), so
        that a float64 run computes the gradient of the function a low-precision run did
        (:mod:`fxpasses.reference64`)."""
        owners: dict[tuple[Any, int], str] = {}  # (device, storage pointer) -> first owner

        def own(t: torch.Tensor, name: str) -> None:
            key = _storage_key(t)
            if key is not None:
                owners.setdefault(key, name)

        named_inputs = _named_tensors(args, kwargs)
        for name, t in named_inputs:
            own(t, name)
        # one walk of the module's tensors: each is named by its last path (a tensor held
        # twice is one storage, which keeps its first owner)
        module_tensors = _named_module_tensors(gm)
        names = {id(t): n for n, t in module_tensors}
        for _, t in module_tensors:
            own(t, f"module tensor {names[id(t)]!r}")
        state_facts: dict[str, Any] = {}
        if given is not None and state is not None:
            writes = {
                name: t.detach().clone()
                for (name, t), (_, was) in zip(named_inputs, _named_tensors(list(given[0] or ()), dict(given[1] or {})))
                if not _same_bits(t, was.detach())
            }
            writes.update(
                (f"module tensor {names[id(t)]!r}", t.detach().clone())
                for t, was in state.saved
                if id(t) in names and not _same_bits(t, was)
            )
            state_facts = dict(
                writes=writes,
                module_tensors=frozenset(f"module tensor {n!r}" for n in names.values()) | {n for n, _ in named_inputs},
                parameter_flags={n: bool(p.requires_grad) for n, p in gm.named_parameters()},
            )
        leaves: dict[str, LeafFacts] = {}
        tensors: list[torch.Tensor] = []
        for path, t in _tensor_leaves(out, "output"):
            key = _storage_key(t)
            alias = owners.get(key) if key is not None else None
            if key is not None:
                owners.setdefault(key, path)
            empty = t.numel() == 0 or t.layout is not torch.strided
            strides = None if empty else tuple(t.stride())
            contiguous = t.is_contiguous() if t.layout is torch.strided else False
            leaves[path] = LeafFacts(bool(t.requires_grad), tuple(t.shape), strides, contiguous, alias)
            tensors.append(t)
        grads = None
        differentiable = [t for t in tensors if t.requires_grad and t.is_floating_point()]
        if grad and differentiable:
            # the inputs only: a pass may re-parametrise the module's own state (fuse_conv_bn's
            # fused weights, fold_constants{fold_parameters=true}'s frozen folds, rescaled
            # weights), which changes the gradients of its parameters but not the function of
            # the inputs or its derivative (TorchDynamo graphs take the parameters as inputs)
            targets = [(n, t) for n, t in named_inputs if t.requires_grad]
            grads = {}
            if not targets:
                # a training batch: only the parameters require grad. Their gradients are not
                # compared (above), but the backward must still run as it did before the pass
                params = [t for _, t in module_tensors if t.requires_grad and t.is_leaf]
                if params:
                    total = sum(t.sum() for t in differentiable)
                    try:
                        torch.autograd.grad(total, params, allow_unused=True)
                    except Exception as exc:  # noqa: BLE001 - compared: before the pass it may have run
                        return cls(leaves, grads, grad, f"{type(exc).__name__}: {str(exc)[:300]}", **state_facts)
            if targets:
                weights = torch.Generator().manual_seed(SEED)
                rounding = list(weight_dtypes or ()) + [t.dtype for t in differentiable[len(weight_dtypes or ()) :]]
                total = sum(
                    (t * torch.randn(t.shape, generator=weights, dtype=torch.float64).to(t.device, dt).to(t.dtype)).sum()
                    for t, dt in zip(differentiable, rounding)
                )
                try:
                    got = torch.autograd.grad(total, [t for _, t in targets], allow_unused=True)
                except Exception as exc:  # noqa: BLE001 - compared: before the pass it may have run
                    return cls(leaves, None, grad, f"{type(exc).__name__}: {str(exc)[:300]}", **state_facts)
                grads = {n: None if g is None else g.detach().clone() for (n, _), g in zip(targets, got)}
                state_facts["input_labels"] = _placeholder_labels(gm, args, kwargs)
        return cls(leaves, grads, grad, **state_facts)


def _state_difference(
    actual: OutputFacts,
    expected: OutputFacts,
    atol: float,
    rtol: float,
    reference: OutputFacts | None = None,
    reference_dtype: torch.dtype | None = None,
) -> str:
    """What the call does to the caller's inputs and the module's tensors, or which parameters
    require grad, that differs after the pass (``actual``) from before it (``expected``): a
    write it added or dropped (BatchNorm's running statistics), a value written differently,
    a parameter frozen or unfrozen; "" when none. Only names both calls have are compared (a
    pass may fold, fuse or remove module tensors). ``reference``: the facts of a float64 run,
    whose writes low-precision written values are judged against (see :func:`compare_outputs`)."""
    both = actual.module_tensors & expected.module_tensors
    for name in sorted(set(expected.writes) | set(actual.writes)):
        if name not in both:
            continue
        a, e = actual.writes.get(name), expected.writes.get(name)
        if a is None:
            return (
                f"{name} is no longer changed by the call (it was before the pass): the pass dropped a "
                "write of the caller's input or the module's state (e.g. BatchNorm's running statistics), or "
                "made it write the values already there (a BatchNorm's momentum of 0)"
            )
        if e is None:
            return f"{name} is written in place by the call after the pass (it was not before it)"
        r = reference.writes.get(name) if reference is not None else None
        cmp = compare_outputs(a, e, atol, rtol, path=f"{name} after the call", reference=r, reference_dtype=reference_dtype)
        if cmp.message:
            return cmp.message
    for name, e in expected.parameter_flags.items():
        a = actual.parameter_flags.get(name)
        if a is not None and a != e:
            now = "requires grad" if a else "no longer requires grad"
            return f"parameter {name!r} {now} after the pass (requires_grad={e} before it): a pass must not freeze or unfreeze parameters"
    return ""


def _storage_key(t: torch.Tensor) -> tuple[Any, int] | None:
    """``(device, storage data pointer)`` of a strided tensor with memory, else None."""
    if t.layout is not torch.strided:
        return None
    try:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
    except Exception:  # noqa: BLE001 - a tensor kind without a storage (fake, subclasses)
        return None
    return (t.device, ptr) if ptr and storage.nbytes() else None


def _named_tensors(args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[tuple[str, torch.Tensor]]:
    """The tensors of the inputs, named ``input[0]``, ``input[1][0]``, ``input 'mask'``."""
    out = list(_tensor_leaves(list(args), "input"))
    for k, v in kwargs.items():
        out.extend(_tensor_leaves(v, f"input {k!r}"))
    return out


def _placeholder_labels(gm: torch.nn.Module, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, str]:
    """``{"input[i]": placeholder name}`` when ``gm`` is an FX graph module whose graph takes
    exactly the positional ``args``, one placeholder each, in order, with no keyword inputs and
    no pytree code generator (a TorchDynamo graph); ``{}`` otherwise."""
    graph = getattr(gm, "graph", None)
    if not isinstance(graph, torch.fx.Graph) or kwargs or type(graph._codegen) is not torch.fx.graph.CodeGen:
        return {}
    names = [n.name for n in graph.find_nodes(op="placeholder")]
    if len(names) != len(args):
        return {}
    return {f"input[{i}]": name for i, name in enumerate(names)}


def _named_module_tensors(gm: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    out = list(gm.named_parameters(remove_duplicate=False))
    out.extend(gm.named_buffers(remove_duplicate=False))
    for prefix, m in gm.named_modules(remove_duplicate=False):
        for k, v in vars(m).items():
            if isinstance(v, torch.Tensor):
                out.append((f"{prefix}.{k}" if prefix else k, v))
    return out


def _tensor_leaves(value: Any, path: str) -> Iterator[tuple[str, torch.Tensor]]:
    """``(path, tensor)`` of every tensor in a nested value, paths as :func:`compare_outputs`
    spells them (``output[0]``, ``output['k']``, ``output.logits``)."""
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _tensor_leaves(v, f"{path}[{i}]")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _tensor_leaves(v, f"{path}[{k!r}]")
    else:
        children = _pytree_children(value)
        for key, v in children or ():
            yield from _tensor_leaves(v, f"{path}{key}")


def compare_facts(
    actual: OutputFacts,
    expected: OutputFacts,
    atol: float,
    rtol: float,
    reference_facts: OutputFacts | None = None,
    reference_dtype: torch.dtype | None = None,
) -> str:
    """The first difference between the facts of the outputs after a pass (``actual``) and
    before it (``expected``), as a message naming the output path and what changed, or ``""``.

    Compared, in this order, for each tensor output: whether it requires grad (when both calls
    ran in grad mode), which input, module tensor or earlier output it shares storage with,
    and its strides (exactly, except in dimensions of size 1); then the gradients of
    :class:`OutputFacts` with respect to each input that requires grad, within
    ``atol``/``rtol`` as :func:`compare_outputs` compares values (a gradient that is None,
    the outputs not depending on that input, counts as zeros).

    Call it after :func:`compare_outputs` found the values equal (it assumes the same output
    structure and shapes). ``reference_facts``: the facts of a float64 run of the module
    (:mod:`fxpasses.reference64`), whose gradients and in-place writes (BatchNorm's running
    statistics) low-precision ones outside ``atol``/``rtol`` are judged against (see
    :func:`compare_outputs`); ``reference_dtype``: the precision the module computes in.

    Raises:
        ValueError: ``atol`` or ``rtol`` is negative or not finite.
    """
    _check_tolerances(atol, rtol)
    grad_mode = actual.grad_mode and expected.grad_mode
    for path, e in expected.leaves.items():
        a = actual.leaves.get(path)
        if a is None:
            continue  # not a tensor after the pass: compare_outputs reports that
        if grad_mode and a.requires_grad != e.requires_grad:
            if e.requires_grad:
                return (
                    f"{path}: no longer requires grad (it did before the pass): the pass cut the autograd "
                    "graph (a .detach(), a no_grad region, or a tensor it made from ones that require grad "
                    "without requires_grad); gradients would no longer reach the inputs and parameters"
                )
            return f"{path}: requires grad after the pass and did not before it"
        if a.alias != e.alias:
            if a.alias is None:
                return (
                    f"{path}: a tensor of its own after the pass, but shared storage with {e.alias} before it "
                    "(the pass replaced a view by a copy)"
                )
            was = f"shared storage with {e.alias}" if e.alias else "was a tensor of its own"
            return (
                f"{path}: shares storage with {a.alias} after the pass; before it, it {was}: a caller "
                f"writing one would now change the other (keep the copy the graph made, e.g. .clone())"
            )
        if a.layout() != e.layout():
            fix = " (keep the .contiguous() call)" if e.contiguous and not a.contiguous else ""
            return (
                f"{path}: strides {_strides(a.strides)} vs {_strides(e.strides)} before the pass "
                f"(contiguous: {a.contiguous}, {e.contiguous} before){fix}"
            )
    if expected.grad_mode and not actual.grad_mode and actual.grad_call_error:
        return (
            "the module raises in grad mode after the pass (it ran before it; verified again under no_grad): "
            f"{actual.grad_call_error}"
        )
    state = _state_difference(actual, expected, atol, rtol, reference_facts, reference_dtype)
    if state:
        return state
    if grad_mode and actual.grad_error and not expected.grad_error:
        return f"the backward of the outputs fails after the pass (it ran before it): {actual.grad_error}"
    if not grad_mode or expected.grads is None or actual.grads is None:
        return ""
    for name, e in expected.grads.items():
        a = actual.grads.get(name)
        if e is None and a is None:
            continue
        ref = a if e is None else e
        e = torch.zeros_like(ref) if e is None else e
        a = torch.zeros_like(ref) if a is None else a
        label = name + (f" (placeholder %{expected.input_labels[name]})" if name in expected.input_labels else "")
        r = (reference_facts.grads or {}).get(name) if reference_facts is not None else None
        cmp = compare_outputs(
            a, e, atol, rtol, path=f"gradient of {label}", normwise=True, reference=r, reference_dtype=reference_dtype
        )
        if cmp.message:
            return (
                f"{cmp.message} (the outputs match, their gradients do not: the pass changed the "
                "backward, e.g. a detached part of an expression or an op with the same forward and "
                "another derivative; gradients are compared within atol + rtol * their largest magnitude)"
            )
    return ""


def _strides(strides: tuple[int, ...] | None) -> str:
    return "none (empty)" if strides is None else str(strides)


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
    #: whether every value was compared, so that ``max_abs`` is the outputs' largest error:
    #: False after a mismatch of their structure (a shape, dtype, device or type changed, NaN
    #: or infinity positions differ, a sequence's length or a dict's keys), where the walk
    #: stopped before the values (``max_abs`` is then of the leaves before it, often 0)
    values_compared: bool = True
    #: the largest finite ``|expected|`` of the float leaves compared (0 when none): the size
    #: ``max_abs`` is to be judged against
    scale: float = 0.0
    #: the mismatch is of the outputs' values (outside the tolerances): not of their
    #: structure, nor of what else a caller sees of them (gradients, aliasing, strides)
    values_differ: bool = False

    def error_figure(self) -> str | None:
        """``"max abs error 0.00012"``, or None where no values were compared to give one
        (:attr:`values_compared`): a message must not say "max abs error 0" of outputs whose
        shape changed."""
        return f"max abs error {self.max_abs:.3g}" if self.values_compared else None


def _check_tolerances(atol: float, rtol: float) -> None:
    if not (math.isfinite(atol) and math.isfinite(rtol)) or atol < 0 or rtol < 0:
        raise ValueError(f"atol and rtol must be finite and >= 0, got atol={atol!r}, rtol={rtol!r}")


def compare_results(
    actual: Any,
    actual_facts: OutputFacts,
    expected: Any,
    expected_facts: OutputFacts,
    atol: float,
    rtol: float,
    reference64: Any = None,
) -> Comparison:
    """What numeric verification compares between a run of the module and the run it must
    match: the outputs (:func:`compare_outputs`), then, when they match, what else a caller
    sees of them (:func:`compare_facts`: ``requires_grad``, aliasing, strides, gradients of
    the inputs). The message is the first difference found, ``""`` when none; ``max_abs``
    the outputs' largest absolute error.

    ``reference64``: a :class:`fxpasses.reference64.Float64Reference` of the module the
    expected run came from, for a module that computes in float16/bfloat16: a value or
    gradient outside ``atol``/``rtol`` is then judged by its error against the float64 run
    (see :func:`compare_outputs`); where that run could not be made, the message says why.

    Raises:
        ValueError: ``atol`` or ``rtol`` is negative or not finite.
    """
    outputs, facts64, unit = (
        (reference64.outputs, reference64.facts, reference64.dtype) if reference64 is not None else (None, None, None)
    )
    cmp = compare_outputs(actual, expected, atol, rtol, reference=outputs, reference_dtype=unit)
    if not cmp.message:
        cmp.message = compare_facts(actual_facts, expected_facts, atol, rtol, reference_facts=facts64, reference_dtype=unit)
    if cmp.message and reference64 is not None and reference64.outputs is None and reference64.why_not:
        cmp.message += (
            f" (the module computes in low precision, and no float64 run of it could be made to tell "
            f"rounding from a wrong result: {reference64.why_not})"
        )
    return cmp


#: how many times the error against a float64 run a low-precision result may have after a pass
#: what it had before it: the multiplier torch's own accuracy check uses for float16/bfloat16
#: results (``torch._dynamo.utils.same`` with an ``fp64_ref``, the check of TorchInductor's
#: benchmarks), applied here to each element's error and to the root-mean-square error
_FLOAT64_MULTIPLIER = 3.0

#: how many elements nearest in magnitude an element's rounding scale is taken from, at least
#: (see :func:`_float64_judgement`)
_FLOAT64_WINDOW = 32

#: the largest root-mean-square error of a module's own low-precision result against its float64
#: run, relative to the float64 result's, for that run to judge by: rounding is a few units of
#: the dtype (bfloat16's unit is 0.8%); a module drawing random numbers that the float64 run
#: draws otherwise (``randn_like``) is off by about 140%, and judged against it anything passed
_FLOAT64_USABLE = 0.25


def _float64_judgement(
    actual: torch.Tensor,
    expected: torch.Tensor,
    reference: torch.Tensor,
    keep: torch.Tensor,
    dtype: torch.dtype,
    atol: float,
) -> tuple[bool, str]:
    """Whether ``actual`` (float64 values of a low-precision result after a pass) is as close to
    ``reference`` (a float64 run of the module) as ``expected`` (before the pass) is; ``keep``:
    the elements compared (finite ones). Returns the verdict and the errors in words.

    Each element's error may be at most :data:`_FLOAT64_MULTIPLIER` times its rounding error
    before the pass (the larger of its own and the RMS of those of the elements nearest it in
    magnitude, :data:`_FLOAT64_WINDOW` of them or a 32nd of the leaf: a bound of the leaf's
    largest error let small elements beside large ones be anything), plus ``atol`` and two
    units of rounding of ``dtype`` (the precision the module computes in) of the larger of the
    element's magnitude and the leaf's median magnitude (an element near zero, whose terms
    cancelled, errs by the rounding of its terms, not of itself: a fused conv moves such
    elements where the unfused one, rounding once at its output, did not). So may the
    root-mean-square error. Magnitudes beyond a quarter of ``dtype``'s largest value (a mask's
    ``finfo.min``) are left out of the median and the RMS figures. Gradients are judged so too
    (judged as a whole, a rewrite detaching a few input features passed). An element whose
    ReLU gate flipped moves by all of its size, and such elements are refused, whatever the
    module's own: letting as many pass as the module has of its own (tried) admitted a
    rewrite cutting the gradient at one pixel of a conv network in 1 to 3 seeds of 10.

    Measured (``fuse_conv_bn``, inputs requiring grad): a two-conv BatchNorm network, 25 seeds
    in each dtype and dialect (symbolic_trace, export), grad in every other one, 4 correct
    fusions refused in float16 and 12 in bfloat16, for their input gradients;
    ``examples/models.py``'s convnet at batch 4, 32x32, 10 seeds, 9 in float16 and 10 in
    bfloat16 (``/tmp`` sweep script). The floor at the median magnitude is what a leaf mixing scales pays: small
    elements that are fewer than half of it (a score beside four box coordinates in pixels)
    are judged at the large ones' rounding (without the floor, 15 of the 25 correct bfloat16
    fusions were refused). No verdict but False, with the reason, when the module's own result
    is too far from the float64 run for it to judge by (:data:`_FLOAT64_USABLE`)."""
    keep = keep & torch.isfinite(reference)
    ref = reference[keep]
    err_a = (actual[keep] - ref).abs()
    err_e = (expected[keep] - ref).abs()
    if err_a.numel() == 0:
        return True, ""
    mag = ref.abs()
    info = torch.finfo(dtype)
    plain = mag < info.max / 4  # not a sentinel (a mask's finfo.min)
    if not bool(plain.any()):
        plain = torch.ones_like(plain)
    rms_a, rms_e, rms_r = (float(t[plain].pow(2).mean().sqrt()) for t in (err_a, err_e, mag))
    if rms_e > _FLOAT64_USABLE * rms_r:
        return False, (
            f"no float64 judgement: the module's own result is off its float64 run by an RMS error of {rms_e:.3g} "
            f"against values of RMS {rms_r:.3g}, more than rounding (random numbers drawn otherwise in float64?)"
        )
    m = _FLOAT64_MULTIPLIER
    magnitudes = mag[plain]
    median = float(torch.kthvalue(magnitudes.cpu(), max(1, (magnitudes.numel() + 1) // 2)).values)
    allowed = _element_bounds(err_e, mag, m, atol, 2 * info.eps * mag.clamp(min=median))
    within = bool((err_a <= allowed).all())
    ok = within and rms_a <= m * rms_e + atol
    worst = int((err_a - allowed).argmax())
    said = (
        f"against a float64 run of the module, max abs error {float(err_a.max()):.3g} and RMS error {rms_a:.3g} "
        f"after the pass, {float(err_e.max()):.3g} and {rms_e:.3g} before it"
        + f" (the element furthest beyond its bound off by {float(err_a[worst]):.3g}, before the pass by {float(err_e[worst]):.3g})"
        + f": more than the {m:g}x that low-precision rounding is allowed (a pass that rounds otherwise by "
        "design, an intermediate rounded to the dtype, takes a tolerance of its own: name[atol=...])"
    )
    return ok, said


def _element_bounds(err: torch.Tensor, mag: torch.Tensor, m: float, atol: float, floor: torch.Tensor) -> torch.Tensor:
    """Each element's bound in :func:`_float64_judgement`: ``m`` times the larger of its error
    ``err`` and the RMS of ``err`` over the elements nearest it in magnitude ``mag``
    (:data:`_FLOAT64_WINDOW` of them, or a 32nd of the leaf: an element's own error is one
    draw of its rounding, zero by luck at times, and the whole leaf's would let small elements
    beside large ones be anything), plus ``atol`` and ``floor``."""
    n = mag.numel()
    k = min(n, max(_FLOAT64_WINDOW, n // 32))
    order = torch.argsort(mag)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(n, device=order.device)
    sums = torch.cat([torch.zeros(1, dtype=err.dtype, device=err.device), torch.cumsum(err[order].pow(2), 0)])
    lo = (rank - k // 2).clamp(0, n - k)
    typical = ((sums[lo + k] - sums[lo]) / k).sqrt()
    return m * torch.maximum(err, typical) + atol + floor


def compare_outputs(
    actual: Any,
    expected: Any,
    atol: float,
    rtol: float,
    path: str = "output",
    *,
    normwise: bool = False,
    reference: Any = None,
    reference_dtype: torch.dtype | None = None,
) -> Comparison:
    """Compare nested outputs leaf by leaf: structure, dtype, shape, device, NaN positions,
    values.

    Float values match when ``|actual - expected| <= atol + rtol * |expected|`` elementwise
    (see :func:`tolerances` for float16/bfloat16); infinities must be equal; other dtypes and
    Python values must be equal. ``normwise``: ``atol`` is raised by ``rtol`` times the
    leaf's largest finite ``|expected|``, as gradients are compared. A gradient is a sum over
    every use of its input (a weight over each batch row and position), and the rounding error
    of a computed sum is bounded relative to the sum of its terms' magnitudes, not to the sum
    itself (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 4.2): an
    entry whose terms cancel is small with an error the size of its neighbours' (a pass
    reordering float32 arithmetic, ``x**3`` as ``x*x*x``, moved an entry of a Linear weight's
    gradient in a TorchDynamo graph by 1.8e-4 where the gradient's largest entry is 982:
    inside ``1e-5 + 1e-5 * 982``, about 1e-2). Returns the first mismatch as a message naming
    the leaf (``output[0][1]``) and the largest absolute error seen (0 when all match exactly).

    ``reference``: the same outputs from a float64 run of the module (its float leaves in
    float64; :mod:`fxpasses.reference64`), for a module that computes in float16/bfloat16,
    where reordered arithmetic (a fused conv) moves results by rounding errors that no
    elementwise bound separates from a wrong result. A float leaf outside the tolerances then
    matches when its error against the float64 leaf is at most 3 times (torch's own accuracy
    check's multiplier for these dtypes, ``torch._dynamo.utils.same``) what the expected
    leaf's is, element by element and in the root-mean-square error (see
    :func:`_float64_judgement`); the message of a mismatch gives both errors. A leaf whose
    expected values are too far from the float64 run for it to judge by is not judged so.
    ``reference_dtype``: the precision the module computes in (float16 or bfloat16: the
    rounding unit a float32 output of a half-precision module is judged by).

    Raises:
        ValueError: ``atol`` or ``rtol`` is negative or not finite.
    """
    _check_tolerances(atol, rtol)
    worst = largest = 0.0
    values_differ = False  # the first mismatch is of values (else of structure, or none)

    def walk(a: Any, e: Any, r: Any, p: str) -> str:
        nonlocal worst, largest, values_differ
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
                largest = max(largest, scale)
                at, rt = tolerances(e.dtype, atol + rtol * scale if normwise else atol, rtol, scale)
                diff = torch.where(skip, torch.zeros((), dtype=torch.float64), (aa - ea).abs())
                m = float(diff.max())
                worst = max(worst, m)
                magnitude = torch.where(skip, torch.zeros((), dtype=torch.float64), ea.abs())
                bad = diff > at + rt * magnitude
                if bad.any():
                    float64 = ""
                    # (a float leaf of the float64 run: float64, or what the graph cast it to)
                    if isinstance(r, torch.Tensor) and r.shape == e.shape and (r.is_floating_point() or r.is_complex()):
                        wide = r.detach().to(torch.complex128 if r.is_complex() else torch.float64)
                        unit = max((e.dtype, reference_dtype or e.dtype), key=lambda d: torch.finfo(d).eps)
                        # (a gradient's own atol: the bound above adds rtol * its largest entry)
                        ok, float64 = _float64_judgement(aa, ea, wide, ~skip, unit, atol if normwise else at)
                        if ok:
                            return ""
                    idx = tuple(int(i) for i in bad.nonzero()[0])
                    # |a - e| / |e|, infinite where e is 0 and a is not
                    rel = float(torch.where(diff > 0, diff / magnitude, torch.zeros((), dtype=torch.float64)).max())
                    values_differ = True
                    return (
                        f"{p}: max abs error {m:.3g} exceeds atol={at:g}, rtol={rt:g} (max rel error "
                        f"{rel:.3g}; {int(bad.sum())} of {bad.numel()} elements out of tolerance, the first at "
                        f"index {idx}: {aa[idx].item():.{_DIGITS.get(e.dtype, 6)}g} vs expected "
                        f"{ea[idx].item():.{_DIGITS.get(e.dtype, 6)}g}" + (f"; {float64}" if float64 else "") + ")"
                    )
                return ""
            if not torch.equal(a, e):
                m = float((a.to(torch.float64) - e.to(torch.float64)).abs().max())
                worst = max(worst, m)
                values_differ = True
                return f"{p}: values differ (max abs error {m:.3g})"
            return ""
        if isinstance(e, (list, tuple)):
            if not isinstance(a, (list, tuple)) or len(a) != len(e):
                got = f"{type(a).__name__} of {len(a)}" if isinstance(a, (list, tuple)) else type(a).__name__
                return f"{p}: expected a sequence of {len(e)}, got {got}"
            rs = r if isinstance(r, (list, tuple)) and len(r) == len(e) else [None] * len(e)
            for i, (x, y, z) in enumerate(zip(a, e, rs)):
                msg = walk(x, y, z, f"{p}[{i}]")
                if msg:
                    return msg
            return ""
        if isinstance(e, dict):
            if not isinstance(a, dict) or a.keys() != e.keys():
                return f"{p}: expected keys {sorted(map(str, e))}"
            for k in e:
                msg = walk(a[k], e[k], r.get(k) if isinstance(r, dict) else None, f"{p}[{k!r}]")
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
            theirs = _pytree_children(r) if type(r) is type(e) else None
            zs = [z for _, z in theirs] if theirs is not None and len(theirs) == len(children) else [None] * len(children)
            for (key, x), (_, y), z in zip(got, children, zs):
                msg = walk(x, y, z, f"{p}{key}")
                if msg:
                    return msg
            return ""
        if isinstance(e, float) and isinstance(a, float) and math.isnan(e) and math.isnan(a):
            return ""
        if type(a) is not type(e) or a != e:
            return f"{p}: expected {e!r}, got {a!r}"
        return ""

    try:
        msg = walk(actual, expected, reference, path)
    finally:
        del walk  # a recursive closure is a reference cycle (walk -> its cell -> walk)
    return Comparison(msg, worst, values_compared=not msg or values_differ, scale=largest, values_differ=values_differ)
