"""``propagate_shapes``: record the shape and dtype of every node (an analysis pass).

After the pass, every node whose value is a tensor (or a tuple/list of tensors) carries:

- ``node.meta["val"]``: a ``FakeTensor`` with the node's shape, dtype, strides and device (a
  tuple/list of them for multi-output nodes; Python ints/floats/bools as they are), unless
  ``record_val=False`` (below);
- ``node.meta["tensor_meta"]``: ``torch.fx.passes.shape_prop.TensorMetadata`` (shape, dtype,
  requires_grad, stride, memory_format, ...), as ``ShapeProp`` writes it.

so that other passes can call ``ctx.tensor_info(node)`` -> ``(torch.Size, torch.dtype)``.
Nodes whose value is not a tensor or number (``None``, modules) get nothing.

The facts are those of the example inputs. A TorchDynamo graph is guarded on its inputs'
shapes and dtypes, and a ``torch.export`` graph is specialised to them (its module checks the
shapes), so there they hold for every input the graph accepts; a ``symbolic_trace`` graph
takes inputs of any shape and dtype, and a pass must not rely on them there unless the inputs
are checked (:mod:`fxpasses.guards`; ``simplify_algebra{specialize=true}`` adds the checks).

How values are computed (option ``mode``):

- ``"fake"``: ``torch.fx.passes.fake_tensor_prop.FakeTensorProp`` under a ``FakeTensorMode``:
  no real computation, no memory for activations. The graph's parameters and buffers (read by
  ``call_module`` or ``get_attr``) are swapped for fake copies while it runs, so nothing real
  is read or written; example inputs are converted to fake tensors with static shapes (inputs
  that are already fake keep their mode, e.g. inside a ``torch.compile`` backend); on a graph
  with dynamic shapes, see below.
  Data-dependent ops (``nonzero``, ``.item()``, boolean masking) and ops without a fake
  kernel fail here.
- ``"real"``: the graph is executed on the real example inputs (``torch.fx.Interpreter``, under
  ``torch.no_grad()``, with the CPU/CUDA RNG state restored afterwards); buffers, plain tensor
  attributes, non-parameter inputs, and the parameters (and parameter inputs) the graph may
  write are cloned first, so in-place writes (BatchNorm statistics in training mode, ``add_``
  on a parameter) do not reach the module or the caller's tensors. The results are recorded as fake
  copies (metadata only; no activation is kept alive). ``requires_grad`` is False for every
  computed value (the run is under ``no_grad``; ``ShapeProp`` with grad mode on records True
  for values computed from tensors that require grad); parameters and inputs keep their own
  (a parameter's copy is a leaf ``nn.Parameter`` fake that requires grad). The
  copies of two views of one tensor do not share a fake storage (each has its own, sized for
  its offset and strides): their sizes, strides and storage offsets are the real ones.
  With ``record_val=False`` (``"real"`` only) a real run records ``tensor_meta`` alone, which
  is what ``ShapeProp`` records under ``torch.no_grad()``, and removes any earlier
  ``meta["val"]`` (a symbolic one is kept, see below): the fake copy per node (about 8 us,
  most of it ``FakeTensor.__new__``'s Python; one ``FakeTensor`` object alive per node
  afterwards) is the larger part of what a real run costs over ``ShapeProp``. The built-in passes read shapes from either key
  (:func:`fxpasses.context.tensor_info`).
- ``"auto"`` (default): ``"fake"``, and ``"real"`` when the fake propagation fails (the
  counter ``real_fallback`` is 1 and the reason is logged on the ``fxpasses.propagate_shapes``
  logger).

In every mode, runtime asserts whose result is unused (``torch._assert``,
``aten._assert_async``, torch.export's input guards; see :mod:`fxpasses.effects`) are stepped
over, not evaluated: their condition is data-dependent, and example inputs that fail it still
have shapes.

Dialects: ``symbolic_trace`` (submodules as ``call_module``), ``dynamo`` (parameters and
buffers are placeholders, so the example inputs include them: pass the inputs the capture
returned), ``export`` (parameters as ``get_attr``; on a static graph, existing ``meta["val"]``
is overwritten with values for the run's example inputs).

Inputs: the run's example inputs (``ctx.example_inputs``: the positional inputs of ``gm``, and
``ctx.example_kwargs``: its keyword inputs). Keyword inputs are mapped to the graph's
placeholders as ``gm(*example_inputs, **example_kwargs)`` would: for a graph with a pytree
input spec (``torch.export``, e.g. a model exported with
``torch.export.export(model, (), {"input_ids": ids, "attention_mask": mask})``) by torch's own
flattening against that spec, for a plain graph by binding them to ``forward``'s parameters,
which are the placeholders' targets (see :func:`fxpasses.inputs.placeholder_values`). Without them, in ``"fake"``/``"auto"`` mode, the placeholders' own values are used when every
placeholder has one (``meta["val"]`` from ``torch.export``, ``meta["example_value"]`` from
TorchDynamo).

Dynamic shapes: when every placeholder has a recorded value and one of them is symbolic (a
size, stride or SymInt input that is a symbol: ``torch.export`` with ``dynamic_shapes``,
``torch.compile(dynamic=True)``), the graph's symbolic shapes are kept:

- ``"fake"``/``"auto"`` propagate the placeholders' recorded values, in the fake mode they
  belong to (their ShapeEnv holds the symbols), instead of the example inputs, so every node
  gets symbolic sizes (``(s77, 8)``, not the example's ``(5, 8)``). ``"auto"`` falls back to
  ``"real"`` on the example inputs, as for static graphs.
- ``"real"`` runs the example inputs, but a node whose ``meta["val"]`` is symbolic keeps it
  (and its ``tensor_meta`` is made from it); the output node gets the values it returns. Nodes
  without a symbolic value (new ones, say) get the example's concrete sizes: real execution
  cannot tell which sizes are symbolic.

Fake propagation records no guards in the fake mode's ShapeEnv (``suppress_guards``): a
fake kernel that chooses by the size hints (convolution picks its backend so) would otherwise
narrow a dynamic size's range there (``Dim("b", max=64)`` became ``[2, 15]``), or add guards
to the graph TorchDynamo is compiling.

The graph is not changed (it is an analysis pass: the pipeline checks). The pass result is
also stored in ``ctx.analyses["propagate_shapes"]`` (``{"mode": "fake" | "real",
"nodes_annotated": int}``). Counter ``nodes_annotated``: nodes given tensor metadata.

Raises:
    MissingExampleInputsError (a ``UserError``, from ``setup``: before anything runs): no
        example inputs and (``mode="real"``, or a placeholder without a recorded value), or
        ``mode="real"`` with fake example inputs.
    RuntimeError: propagation failed (``"fake"``: the fake error; ``"auto"``: both errors).
    fxpasses.errors.OptionsError (when the pipeline is built): ``record_val=False`` with a
        mode other than ``"real"``.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Callable, Iterator, Literal, Sequence

import torch
import torch.fx
from pydantic import Field, model_validator
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.node import map_aggregate
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from fxpasses import GraphPass, PassContext, PassOptions, UserError
from fxpasses.errors import exception_line
from fxpasses.effects import ASSERT, EffectAnalysis
from fxpasses._layout import LayoutCopies
from fxpasses.inputs import placeholder_values
from fxpasses.node_meta import tensor_metadata as _tensor_meta
from fxpasses.verify import global_modes_kept

__all__ = ["PropagateShapes", "MissingExampleInputsError"]

log = logging.getLogger("fxpasses.propagate_shapes")


class MissingExampleInputsError(UserError):
    """``propagate_shapes`` has no inputs to propagate (see the module doc)."""


class PropagateShapes(GraphPass):
    """Record each node's shape and dtype in node.meta (val, tensor_meta), using fake tensors where possible."""

    name = "propagate_shapes"
    kind = "analysis"
    # no existing tensor is written: "fake" runs on fake copies of the module's state, "real"
    # on clones of every buffer, plain tensor attribute and input, and of each parameter
    # effect analysis finds the graph may write (an unknown call or module counts as writing
    # its inputs and state). So no write guard: under one, each tensor operator of a real run
    # goes through a Python dispatch mode (0.24 s of 0.99 s on the 10k-node block graph). A
    # write that gets past the clones anyway moves the tensor's _version, and the pipeline's
    # check of an analysis pass fails the run naming the module.
    writes_tensors = False

    class Options(PassOptions):
        mode: Literal["fake", "real", "auto"] = Field(
            "auto",
            description='"fake": FakeTensorProp, no real computation; "real": execute the graph on '
            'the example inputs; "auto": fake, and real when fake propagation fails',
        )
        record_val: bool = Field(
            True,
            description='mode "real" only: False records meta["tensor_meta"] alone, as ShapeProp '
            'does under torch.no_grad(), without a fake meta["val"] per node (most of a real '
            "run's cost over ShapeProp's); an earlier meta[\"val\"] is removed",
        )

        @model_validator(mode="after")
        def _val_needs_real_mode(self) -> "PropagateShapes.Options":
            if not self.record_val and self.mode != "real":
                raise ValueError(
                    f'record_val=false needs mode="real"; mode={self.mode!r} computes meta["val"] '
                    "by propagating fake tensors"
                )
            return self

    def setup(self, gm: torch.fx.GraphModule, ctx: PassContext) -> None:
        mode = self.options.mode
        self._flat = False  # True: the inputs are the placeholders' values, not gm's inputs
        self._recorded = False  # True: those values are the placeholders' recorded meta values
        recorded = [_placeholder_value(n) for n in gm.graph.find_nodes(op="placeholder")]
        # dynamic shapes: propagate the placeholders' symbolic values, in their fake mode
        self._symbolic: list[Any] | None = None
        if all(v is not None for v in recorded) and any(_is_symbolic(v) for v in recorded):
            self._symbolic = recorded
        if ctx.example_inputs is not None:
            if ctx.example_kwargs:
                # keyword inputs: the value of each placeholder, flattened as gm's code would
                self._inputs, self._flat = placeholder_values(gm, ctx.example_inputs, ctx.example_kwargs), True
            else:
                self._inputs = list(ctx.example_inputs)
            if mode == "real" and any(isinstance(t, FakeTensor) for t in self._inputs):
                raise MissingExampleInputsError(
                    "pass 'propagate_shapes' (mode='real') needs real example inputs, "
                    "got fake tensors; use mode='fake' or 'auto'"
                )
            return
        if mode != "real" and all(v is not None for v in recorded):
            self._inputs, self._flat, self._recorded = recorded, True, True
            return
        why = "" if mode == "real" else " and not every placeholder has a recorded meta['val']"
        raise MissingExampleInputsError(
            f"pass 'propagate_shapes' (mode={mode!r}) needs example inputs: none were given{why}; "
            "pass them as pipeline.run(gm, example_inputs=[...]) and, for keyword inputs, "
            "example_kwargs={...} (for a TorchDynamo graph: the inputs the capture returned, "
            "parameters included)"
        )

    def run(self, gm: torch.fx.GraphModule, ctx: PassContext) -> bool:
        keep_symbolic = self._symbolic is not None
        if self.options.mode == "real":
            n = _propagate_real(
                gm, self._inputs, keep_symbolic=keep_symbolic, flat=self._flat, record_val=self.options.record_val
            )
            used = "real"
        else:
            try:
                if self._symbolic is not None:
                    n = _propagate_fake(gm, self._symbolic, flat=True, own_mode=True)
                else:
                    n = _propagate_fake(gm, self._inputs, flat=self._flat)
                used = "fake"
            except Exception as exc:
                n, used = self._fall_back(gm, exc), "real"
                ctx.count("real_fallback")
        ctx.count("nodes_annotated", n)
        ctx.analyses[self.name] = {"mode": used, "nodes_annotated": n}
        return False

    def _fall_back(self, gm: torch.fx.GraphModule, fake_exc: Exception) -> int:
        """Real propagation after the fake one failed (``mode="auto"`` only)."""
        why = f"fake tensor propagation failed ({exception_line(fake_exc)})"
        if self.options.mode == "fake":
            raise RuntimeError(why) from fake_exc
        if self._recorded or any(isinstance(t, FakeTensor) for t in self._inputs):
            raise RuntimeError(f"{why} and real propagation needs real example inputs") from fake_exc
        log.info("propagate_shapes: %s; running the graph on the real example inputs", why)
        try:
            return _propagate_real(gm, self._inputs, keep_symbolic=self._symbolic is not None, flat=self._flat)
        except Exception as real_exc:
            raise RuntimeError(f"{why} and real propagation failed ({exception_line(real_exc)})") from real_exc


# ------------------------------------------------------------------------------------ helpers


def _placeholder_value(node: torch.fx.Node) -> Any:
    meta = node.meta
    return meta["val"] if meta.get("val") is not None else meta.get("example_value")


def _is_symbolic(value: Any) -> bool:
    """Whether ``value`` (a fake tensor, a SymInt/SymFloat/SymBool, or a tuple/list of them)
    has a size, stride or value that is a symbol rather than a number."""
    from torch.fx.experimental.symbolic_shapes import has_free_symbols

    if isinstance(value, (tuple, list)):
        return any(_is_symbolic(v) for v in value)
    if isinstance(value, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
        try:
            return has_free_symbols(value)
        except Exception:  # a tensor kind without sizes (sparse, nested): not symbolic here
            return False
    return False


@contextlib.contextmanager
def _swapped_state(
    gm: torch.nn.Module,
    convert: Callable[[torch.Tensor], torch.Tensor],
    keep: Callable[[str, torch.Tensor], bool] | None = None,
) -> Iterator[None]:
    """Replace the parameters, buffers and plain tensor attributes of ``gm``'s module tree by
    ``convert(t)`` inside (those for which ``keep(qualified_name, t)`` is false, when given).

    A tensor shared by several modules is converted once. The very same objects are put back,
    and so is every module's ``__dict__``, ``_parameters`` and ``_buffers`` as it was before:
    a forward run on the converted tensors may cache what it derives from them (``nn.LSTM``
    rebuilds ``_flat_weights`` from its parameters), which must not outlive the run.
    """
    states: list[tuple[dict[str, Any], dict[str, Any]]] = []
    seen: set[int] = set()
    swaps: list[tuple[dict[str, Any], str, torch.Tensor]] = []
    is_tensor = torch.Tensor.__instancecheck__  # isinstance(v, torch.Tensor), callable from filter()
    # one walk: every path of every module (a shared module is swapped under each name, its
    # registries recorded once)
    for prefix, m in gm.named_modules(remove_duplicate=False):
        for store in (m._parameters, m._buffers, vars(m)):
            if id(store) not in seen:
                seen.add(id(store))
                states.append((store, store.copy()))
            if next(filter(is_tensor, store.values()), None) is None:
                continue  # no tensor in it (most modules' __dict__): looked for in C
            for k, t in store.items():
                if not isinstance(t, torch.Tensor) or k.startswith("__"):
                    continue
                if keep is not None and keep(f"{prefix}.{k}" if prefix else k, t):
                    continue
                swaps.append((store, k, t))
    converted: dict[int, torch.Tensor] = {}
    try:
        for store, k, t in swaps:
            if id(t) not in converted:
                converted[id(t)] = convert(t)
            store[k] = converted[id(t)]
        yield
    finally:
        # every registry back as recorded: the swapped tensors, and whatever the run cached
        for store, before in states:
            if store.keys() != before.keys() or any(store[k] is not v for k, v in before.items()):
                store.clear()
                store.update(before)


def _is_unused_assert(analysis: EffectAnalysis, n: torch.fx.Node) -> bool:
    """A runtime assert whose (None) result nothing uses: propagation steps over it.

    Its condition is data-dependent (fake tensors cannot decide it) and whether it holds on the
    example inputs says nothing about shapes.
    """
    return n.op in ("call_function", "call_method", "call_module") and not n.users and (
        ASSERT in analysis.effects(n).kinds
    )


class _FakeProp(FakeTensorProp):
    """FakeTensorProp that also fakes plain tensor attributes and writes ``tensor_meta``;
    runtime asserts are not evaluated (:func:`_is_unused_assert`)."""

    annotated = 0

    def __init__(self, gm: torch.fx.GraphModule, mode: Any) -> None:
        super().__init__(gm, mode)
        self._effects = EffectAnalysis(gm)
        self._formats: dict[Any, Any] = {}  # see _metadata

    def get_attr(self, target: Any, args: Any, kwargs: Any) -> Any:
        value = super().get_attr(target, args, kwargs)
        if isinstance(value, torch.Tensor) and not isinstance(value, FakeTensor):
            value = self._mode.from_tensor(value, static_shapes=True)
        return value

    def run_node(self, n: torch.fx.Node) -> Any:
        if _is_unused_assert(self._effects, n):
            return None
        result = super().run_node(n)
        tm = _tensor_meta(result, self._formats)
        if tm is not None:
            n.meta["tensor_meta"] = tm
            self.annotated += 1
        return result


def _propagate_fake(gm: torch.fx.GraphModule, inputs: Sequence[Any], *, flat: bool, own_mode: bool = False) -> int:
    """Run ``gm`` on fake tensors, annotating each node; return the number annotated.

    ``own_mode``: run in the fake mode the fake ``inputs`` belong to (the placeholders'
    symbolic values: their symbols live in its ShapeEnv), not the one ``detect_fake_mode``
    prefers (inside a TorchDynamo backend, the tracing context's fresh mode, which the graph's
    recorded values do not belong to).
    """
    from torch._guards import detect_fake_mode

    modes = {id(t.fake_mode): t.fake_mode for t in inputs if isinstance(t, FakeTensor)} if own_mode else {}
    if len(modes) == 1:
        (mode,) = modes.values()
    else:
        mode = detect_fake_mode(inputs) or FakeTensorMode(allow_non_fake_inputs=True)

    def fake(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and not isinstance(t, FakeTensor):
            return mode.from_tensor(t, static_shapes=True)
        return t

    prop = _FakeProp(gm, mode)
    args = [fake(t) for t in inputs]
    # an analysis adds no guards to the graph's ShapeEnv: a fake kernel choosing by the size
    # hints (convolution picks its backend so) would narrow a dynamic size's range there
    # (export's Dim(max=64) became [2, 15]) or add guards to the graph TorchDynamo compiles
    shape_env = mode.shape_env
    no_guards = shape_env.suppress_guards() if shape_env is not None else contextlib.nullcontext()
    with global_modes_kept(), _swapped_state(gm, fake), mode, no_guards:
        prop.run(*args, enable_io_processing=not flat)
    return prop.annotated


class _RealProp(torch.fx.Interpreter):
    """Executes the graph on real tensors; records fake copies and ``tensor_meta`` per node.
    Runtime asserts are not evaluated (:func:`_is_unused_assert`). With ``keep_symbolic``, a
    node whose ``meta["val"]`` is symbolic keeps it (and gets ``tensor_meta`` from it) instead
    of the example's concrete sizes."""

    def __init__(self, gm: torch.fx.GraphModule, keep_symbolic: bool = False, record_val: bool = True) -> None:
        super().__init__(gm)
        self.fake_mode = FakeTensorMode()
        self.annotated = 0
        self.keep_symbolic = keep_symbolic
        self.record_val = record_val
        self._effects = EffectAnalysis(gm)
        self._formats: dict[Any, Any] = {}  # see _metadata

    def _fake(self, v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            try:
                return _fake_copy(self.fake_mode, v)
            except Exception:  # a tensor kind fake tensors cannot represent: no "val"
                return None
        return v if isinstance(v, (int, float, bool, torch.SymInt)) else None

    def run_node(self, n: torch.fx.Node) -> Any:
        if not n.users and _is_unused_assert(self._effects, n):
            return None
        result = super().run_node(n)
        if not self.keep_symbolic and isinstance(result, torch.Tensor):
            # the usual case, in one place (the general steps below give the same)
            meta = n.meta
            val = self._fake(result) if self.record_val else None
            if val is not None:
                meta["val"] = val
            else:  # none of an earlier run, or of a failed fake attempt, either
                meta.pop("val", None)
            meta["tensor_meta"] = _tensor_meta(result, self._formats)
            self.annotated += 1
            return result
        old = _placeholder_value(n)  # meta["val"], or TorchDynamo's meta["example_value"]
        own = old
        if self.keep_symbolic and n.op == "output":  # the values it returns, as recorded
            old = torch.fx.node.map_arg(n.args[0], _placeholder_value)
            if not self.record_val:  # returned nodes without a symbolic value recorded none:
                old = _symbolic_or_real(old, result)  # their real results, for tensor_meta
        if self.keep_symbolic and _is_symbolic(old):
            if self.record_val:
                n.meta["val"] = old
            elif not _is_symbolic(own):  # record_val=False keeps a node's own symbolic value
                n.meta.pop("val", None)
            tm = _tensor_meta(old, self._formats)
        else:
            val = map_aggregate(result, self._fake) if self.record_val else None
            if val is not None:
                n.meta["val"] = val
            else:  # nothing to record: no value of an earlier run or a failed fake attempt
                n.meta.pop("val", None)
            tm = _tensor_meta(result, self._formats)
        if tm is not None:
            n.meta["tensor_meta"] = tm
            self.annotated += 1
        else:
            n.meta.pop("tensor_meta", None)
        return result


def _symbolic_or_real(recorded: Any, real: Any) -> Any:
    """``recorded`` where it is symbolic, ``real`` elsewhere, element by element of the tuples,
    lists and dicts both are (an output node's returned values: recorded ones, with None for a
    node that recorded nothing, and the run's results)."""
    if isinstance(recorded, (tuple, list)) and isinstance(real, (tuple, list)) and len(recorded) == len(real):
        merged = [_symbolic_or_real(a, b) for a, b in zip(recorded, real)]
        return tuple(merged) if isinstance(real, tuple) else merged
    if isinstance(recorded, dict) and isinstance(real, dict) and recorded.keys() == real.keys():
        return {k: _symbolic_or_real(recorded[k], real[k]) for k in real}
    return recorded if _is_symbolic(recorded) else real


def _fake_copy(mode: FakeTensorMode, t: torch.Tensor) -> FakeTensor:
    """A fake tensor of ``mode`` with ``t``'s sizes, strides, storage offset, dtype, device
    and ``requires_grad``, for recording a real result as ``meta["val"]``.

    A plain dense tensor (exactly ``torch.Tensor``, strided layout, not quantized, no
    conjugate/negative bit, not requiring grad: every intermediate result of a run under
    ``no_grad``), and a dense ``nn.Parameter`` at offset 0 (``get_attr`` of a weight), is
    rebuilt from its metadata on the meta device and wrapped (``FakeTensor(mode, meta,
    device)``; a parameter's copy is a leaf marked ``_is_param``, so that it is an instance of
    ``nn.Parameter``, as ``mode.from_tensor`` makes it): about 10 us against 80 us for
    ``mode.from_tensor``, which also describes the tensor's view base and memoizes it (1k-node
    block graph: 990 results, 0.34 s of a 0.53 s profile; GPT-2 96x64 export: 1,157
    parameters, 0.2 s of 0.57 s). Consequence: the recorded values of two views of one
    tensor do not share a fake storage; each has its own, of the size its offset and strides
    need. Any other tensor goes through ``mode.from_tensor``.
    """
    kind = type(t)
    param = kind is torch.nn.Parameter
    if (
        not (kind is torch.Tensor or param)
        or t.layout is not torch.strided
        or (t.requires_grad and not param)
        or t.is_quantized
        or t.is_conj()
        or t.is_neg()
        or (param and t.storage_offset())
    ):
        return mode.from_tensor(t, static_shapes=True)
    size, stride, offset = t.shape, t.stride(), t.storage_offset()
    # made past the Python dispatch modes (the pipeline's write guard is one): a new meta
    # tensor writes nothing, and the mode's Python call would cost more than the tensor
    with torch._C._DisableTorchDispatch():
        if offset:
            extent = 0 if 0 in size else 1 + sum((s - 1) * st for s, st in zip(size, stride))
            meta = torch.empty((offset + extent,), dtype=t.dtype, device="meta").as_strided(size, stride, offset)
        else:
            meta = torch.empty_strided(size, stride, dtype=t.dtype, device="meta", requires_grad=t.requires_grad)
    # FakeTensorConverter.from_meta_and_device without its memo (5 us): no one looks this
    # meta tensor up again
    fake = FakeTensor(mode, meta, t.device)
    if param:
        fake._is_param = True  # as meta_utils marks the copy of a parameter
    return fake


def _propagate_real(
    gm: torch.fx.GraphModule,
    inputs: Sequence[Any],
    *,
    keep_symbolic: bool = False,
    flat: bool = False,
    record_val: bool = True,
) -> int:
    """Execute ``gm`` on ``inputs`` without side effects on them or on its tensors.

    ``flat``: ``inputs`` are the placeholders' values (:func:`fxpasses.inputs.placeholder_values`),
    not ``gm``'s positional inputs to be flattened by its code generator.

    Buffers, plain tensor attributes and inputs are run on copies (:class:`fxpasses._layout.LayoutCopies`:
    the sizes, strides, offsets and sharing of storage of the originals, so that what is
    recorded, and what views and in-place writes see, is what a run on the originals would
    give); parameters too when the graph may write them (:meth:`fxpasses.effects.EffectAnalysis.mutated_attributes`, and
    every input when the graph writes one), other parameters are used as they are.
    ``keep_symbolic``: symbolic ``meta["val"]`` entries are kept (see :class:`_RealProp`).
    ``record_val``: False records ``tensor_meta`` alone (no fake copy per node) and removes
    every other ``meta["val"]``.
    """
    analysis = EffectAnalysis(gm)
    written = analysis.mutated_attributes()
    inputs_written = any(analysis.is_written(p) for p in gm.graph.find_nodes(op="placeholder"))

    copies = LayoutCopies()  # one for inputs and module state: an input may view a buffer

    def clone(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and (inputs_written or not isinstance(t, torch.nn.Parameter)):
            return copies(t)
        return t

    def keep(name: str, t: torch.Tensor) -> bool:
        return isinstance(t, torch.nn.Parameter) and name not in written

    tensors = [*inputs, *gm.parameters()]
    devices = sorted({t.device.index or 0 for t in tensors if isinstance(t, torch.Tensor) and t.device.type == "cuda"})
    prop = _RealProp(gm, keep_symbolic, record_val)
    args = [clone(t) for t in inputs]
    with (
        global_modes_kept(),
        _swapped_state(gm, copies, keep),
        torch.random.fork_rng(devices=devices),
        torch.no_grad(),
    ):
        prop.run(*args, enable_io_processing=not flat)
    return prop.annotated
