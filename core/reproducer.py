"""Crash reproducers: a directory that replays a failed pass without the user's model code.

``fxpasses run CONFIG --reproducer DIR`` writes, when a pass fails:

============================  ==================================================================
``DIR/fxpasses.json``         the config: the failing pass and every pass after it, in plan
                              order (``order = "as-given"``: nothing is moved or pulled in),
                              with their options and verification, and the plugin selection
``DIR/graph.py``              the graph as it was before the failing pass, as Python code: the
                              FX code of ``forward`` (for people) and a ``build`` function that
                              recreates every node with its name, op, target, args, kwargs and
                              metadata (``stack_trace``, ``val``, ``nn_module_stack``, ...), the
                              submodule tree (classes and plain attributes) and the code
                              generator (pytree in/out specs of ``torch.export`` modules);
                              it first imports the modules that define (and register) the
                              specs' pytree types, a ``ModelOutput``'s among them, and the
                              custom operators a pass inserted (a plugin's module)
``DIR/tensors.safetensors``   parameters, buffers and tensor attributes, as laid out (strides,
                              offsets, views sharing a storage: see :func:`save_tensors`;
                              ``.pt`` written with ``torch.save`` when safetensors is not
                              installed or cannot hold one of them; read back with
                              ``weights_only=True``)
``DIR/inputs.safetensors``    the example inputs, exactly (``.pt`` likewise): positional ones
                              named ``0``, ``1``, ..., keyword ones by their keyword
``DIR/error.txt``             the failure as reported
``DIR/README.md``             what failed and how to replay it
============================  ==================================================================

(and ``reference.py`` with ``reference_tensors.safetensors`` for a numeric failure after passes
that changed the graph: see :func:`write_reproducer`). A folder that holds an earlier
reproducer loses the files of it that the new one does not write again (an earlier
``reference.py``, a ``tensors.pt`` where the new one writes ``tensors.safetensors``), with a
:class:`~fxpasses.errors.ConfigWarning` naming them; the folder's other files stay.

``fxpasses run DIR/fxpasses.json`` then fails the same way (same pass, same node, same source
line) on any machine with fxpasses and the pass packages installed: the config's
``[model] graph = "graph.py"`` loads the graph with :func:`load_graph` instead of calling a
model factory. Only submodules called by ``call_module`` nodes need their classes importable
(``torch.nn`` ones always are).
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import importlib
import importlib.util
import json
import math
import os
import re
import shlex
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import torch
import torch.fx

from ._json import dumps as json_dumps
from .config import has_gaps, is_positional_name, positional_names, split_named_inputs
from .errors import ConfigError, ConfigWarning, FxPassesError, PassFailedError, exception_text, require_file
from .hookspecs import hookimpl

__all__ = [
    "ReproducerError",
    "ReproducerWriter",
    "write_reproducer",
    "graph_source",
    "load_graph",
    "save_tensors",
    "load_tensors",
    "load_inputs",
    "load_example_inputs",
    "GraphBuilder",
]

CONFIG_NAME = "fxpasses.json"
GRAPH_NAME = "graph.py"
REFERENCE_NAME = "reference.py"
README_NAME = "README.md"
ERROR_NAME = "error.txt"
#: the first line of a reproducer's README.md: what tells a folder holds one fxpasses wrote
_README_TITLE = "# fxpasses reproducer\n"
#: the names of the files write_reproducer writes (each tensor file: .safetensors, or .pt)
_REPRODUCER_FILE = re.compile(
    r"fxpasses\.json|graph\.py|reference\.py|README\.md|error\.txt|(?:tensors|inputs|reference_tensors)\.(?:safetensors|pt)"
)
#: the line of a graph.py (graph_source) that names its tensor file
_TENSORS_LINE = re.compile(r"^TENSORS = '([^'\\]+)'$", re.MULTILINE)


class ReproducerError(FxPassesError):
    """A reproducer cannot be written (an object in the graph has no spelling in code)."""


# ------------------------------------------------------------------------------------ tensors


#: the safetensors metadata key under which :func:`save_tensors` records each tensor's layout
_LAYOUT_KEY = "fxpasses.layout"


def save_tensors(stem: Path, tensors: dict[str, torch.Tensor]) -> Path:
    """Write ``tensors`` to ``stem.safetensors`` (or ``stem.pt`` with ``torch.save`` when
    safetensors cannot), each exactly as it is laid out: its dtype, sizes, strides and storage
    offset, and tensors that share a storage (views of one buffer, tied weights) sharing it
    again when :func:`load_tensors` reads them. safetensors holds contiguous tensors only, so
    each storage is written once as its bytes and each tensor's place in it goes in the file's
    metadata (a reproducer replayed with a parameter made contiguous, or with a view turned
    into a copy, ran other kernels or other aliasing and passed where the run failed: an
    adversarial check). Of a storage, the bytes its tensors span are written (a small view of
    a large buffer: not the whole buffer); of a tensor on another device, from a CPU copy. One
    without a strided storage of its own (quantized, a conjugate view) is written contiguous,
    as a copy; a file safetensors cannot hold (sparse, meta tensors) is ``torch.save``'s."""
    plain: dict[str, torch.Tensor] = {}
    layout: dict[str, list[Any]] = {}
    prefix = "__storage_"
    while any(k.startswith(prefix) for k in tensors):  # (a name no tensor has)
        prefix = "_" + prefix
    groups: dict[tuple[Any, ...], tuple[Any, list[tuple[str, torch.Tensor]]]] = {}  # by storage
    for k, v in tensors.items():
        place = _storage_place(v.detach())
        if place is None:
            plain[k] = v.detach()  # (made contiguous below, for safetensors)
        else:
            groups.setdefault(place[0], (place[1], []))[1].append((k, v.detach()))
    for i, (storage, members) in enumerate(groups.values()):
        # the bytes the storage's tensors span (a small view of a large buffer: not the whole
        # buffer), from a multiple of 16 so that every tensor's offset stays whole elements
        spans = [_byte_span(v) for _, v in members]
        low = min(a for a, _ in spans) // 16 * 16
        high = max(b for _, b in spans)
        base = f"{prefix}{i}"
        whole = torch.empty(0, dtype=torch.uint8, device=members[0][1].device).set_(storage)
        plain[base] = whole[low:high].to("cpu").clone()
        for k, v in members:
            shift = low // v.element_size()
            layout[k] = [base, str(v.dtype).removeprefix("torch."), list(v.shape), list(v.stride()), v.storage_offset() - shift]
    try:
        from safetensors.torch import save_file

        for k in [k for k in plain if not k.startswith(prefix)]:  # (no layout: contiguous, values resolved)
            plain[k] = plain[k].to("cpu").resolve_conj().resolve_neg().contiguous().clone()
        path = stem.with_suffix(".safetensors")
        recorded = {"order": list(tensors), "layout": layout}
        save_file(plain, str(path), metadata={_LAYOUT_KEY: json.dumps(recorded)} if layout else None)
        return path
    except Exception:  # not installed, a dtype it does not hold, a sparse tensor: torch.save keeps layouts itself
        path = stem.with_suffix(".pt")
        torch.save({k: (v.detach() if v.device.type == "meta" else v.detach().to("cpu")) for k, v in tensors.items()}, path)
        return path


def _byte_span(t: torch.Tensor) -> tuple[int, int]:
    """The bytes of its storage a strided tensor reads: ``(first, last + 1)``."""
    size = t.element_size()
    start = t.storage_offset() * size
    if t.numel() == 0:
        return start, start
    last = t.storage_offset() + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))  # (strides are >= 0)
    return start, (last + 1) * size


def _storage_place(t: torch.Tensor) -> tuple[tuple[Any, ...], Any] | None:
    """``((device, storage address), untyped storage)`` of a strided tensor with real storage,
    None for one without (sparse, quantized, meta, fake)."""
    if (
        type(t) not in (torch.Tensor, torch.nn.Parameter)
        or t.layout != torch.strided
        or t.is_quantized
        or t.device.type == "meta"
        or t.is_conj()  # (a conjugate or negative view: its bytes are not its values)
        or t.is_neg()
    ):
        return None
    try:
        storage = t.untyped_storage()
        return (str(t.device), storage.data_ptr(), storage.nbytes()), storage
    except Exception:  # noqa: BLE001 - a tensor subclass or functional wrapper without one
        return None


def _with_layouts(data: dict[str, torch.Tensor], metadata: dict[str, str] | None) -> dict[str, torch.Tensor]:
    """The tensors :func:`save_tensors` wrote, rebuilt from the storages' bytes and the
    recorded layouts (a file written without them is read as it is)."""
    recorded = json.loads((metadata or {}).get(_LAYOUT_KEY, "{}"))
    if not recorded:
        return data
    out = {}
    for name in recorded["order"]:
        place = recorded["layout"].get(name)
        if place is None:
            out[name] = data[name]
            continue
        base, dtype, size, stride, offset = place
        storage = data[base].untyped_storage()
        out[name] = torch.empty(0, dtype=getattr(torch, dtype)).set_(storage, offset, size, stride)
    return out


def load_tensors(path: str | Path) -> dict[str, torch.Tensor]:
    """Read a tensor file written by :func:`save_tensors` (``weights_only`` for ``.pt``).

    Raises:
        ConfigError: the file is missing, unreadable, or safetensors is not installed.
    """
    path = Path(path)
    require_file(path, "tensor file", ".safetensors, or .pt written by torch.save")
    try:
        if path.suffix == ".safetensors":
            try:
                from safetensors.torch import load_file
            except ImportError:
                raise ConfigError(f"{path} needs the safetensors package: pip install safetensors") from None
            from safetensors import safe_open

            with safe_open(str(path), framework="pt") as f:
                metadata = f.metadata()
            return _with_layouts(dict(load_file(str(path))), metadata)
        data = torch.load(path, weights_only=True, map_location="cpu")
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"cannot read tensor file {path}: {exception_text(exc)}") from None
    if not isinstance(data, dict) or not all(isinstance(v, torch.Tensor) for v in data.values()):
        held = type(data).__name__ if not isinstance(data, dict) else "a dict with values other than tensors"
        hint = (
            ": save the positional inputs by position, torch.save({str(i): t for i, t in enumerate(inputs)}, path)"
            if isinstance(data, (list, tuple))
            else ""
        )
        raise ConfigError(f"{path} does not hold a name -> tensor mapping (it holds {held}){hint}")
    return data


def load_example_inputs(path: str | Path) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """Example inputs saved by a reproducer: ``(positional, keywords)``.

    Tensors named ``0``, ``1``, ... are the positional inputs, in that order; every other
    name is a keyword input of that name (``input_ids``, ``attention_mask``).

    Raises:
        ConfigError: the file cannot be read (see :func:`load_tensors`), or the positional
            names are not ``0`` to ``n - 1``.
    """
    data = load_tensors(path)
    positional = positional_names(data)
    if has_gaps(positional):
        raise ConfigError(
            f"{path}: positional input tensors must be named 0, 1, 2, ... without gaps, got "
            + ", ".join(positional)
        )
    return split_named_inputs(data)


def load_inputs(path: str | Path) -> list[torch.Tensor]:
    """Positional example inputs saved by a reproducer: tensors named ``0``, ``1``, ... in order.

    Raises:
        ConfigError: the file cannot be read, or it holds keyword inputs (tensors with other
            names: read it with :func:`load_example_inputs`).
    """
    args, kwargs = load_example_inputs(path)
    if kwargs:
        raise ConfigError(
            f"{path} holds keyword inputs ({', '.join(sorted(kwargs))}): read it with load_example_inputs"
        )
    return args


# ------------------------------------------------------------------------------ naming things


def resolve(qualname: str) -> Any:
    """The object called ``qualname`` (``torch.ops.aten.add.Tensor``, ``operator.add``, ...)."""
    parts = qualname.split(".")
    obj: Any = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 1):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(".".join(parts[: i + 1]))
    return obj


def _qualname(obj: Any) -> str | None:
    """An importable name for a function, op or class, checked by resolving it back."""
    candidates: list[str] = []
    if isinstance(obj, torch._ops.OpOverload):
        ns, _, name = obj._schema.name.partition("::")
        candidates.append(f"torch.ops.{ns}.{name}.{obj._overloadname}")
    elif isinstance(obj, torch._ops.OpOverloadPacket):
        ns, _, name = obj._qualified_op_name.partition("::")
        candidates.append(f"torch.ops.{ns}.{name}")
    elif isinstance(obj, torch._ops.HigherOrderOperator):
        candidates.append(f"torch.ops.higher_order.{obj.name()}")
    if isinstance(obj, type):
        candidates.append(f"{obj.__module__}.{obj.__qualname__}")
    try:
        from torch.fx.node import _get_qualified_name

        candidates.append(_get_qualified_name(obj))
    except Exception:
        pass
    mod, qn = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if mod and qn:
        candidates.append(f"{mod}.{qn}")
    for name in candidates:
        if "<" in name:
            continue
        try:
            if resolve(name) is obj:
                return name
        except Exception:
            continue
    return _file_module_name(obj, mod, qn)


def _file_module_name(obj: Any, mod: Any, qn: Any) -> str | None:
    """``module.function`` for a top-level function of a model file that was loaded by path
    (``factory = "models.py:net"``: its module ``models`` is not importable by name here), when
    the file is ``models.py``: with its folder on ``PYTHONPATH`` the replay imports it (the
    reproducer's README says so, :func:`_model_code`); else None."""
    import inspect
    import types

    if not isinstance(obj, types.FunctionType) or not isinstance(mod, str) or not isinstance(qn, str):
        return None
    if "." in mod or "." in qn or "<" in qn:
        return None
    try:
        file = inspect.getsourcefile(obj)
    except TypeError:
        return None
    return f"{mod}.{qn}" if file and Path(file).stem == mod else None


class _Unsupported(Exception):
    pass


@functools.lru_cache(maxsize=1)
def _sympy_names() -> dict[str, Any]:
    """sympy's names and torch's own sympy functions (``FloorDiv``, ``Mod``, ``Max``, ...),
    what symbolic sizes are written with."""
    import sympy
    from torch.utils._sympy import functions as sympy_functions

    return {
        **{k: getattr(sympy, k) for k in dir(sympy) if not k.startswith("_")},
        # every class the module defines or imports (Max and Min are not in its __all__)
        **{k: v for k, v in vars(sympy_functions).items() if not k.startswith("_") and isinstance(v, type)},
    }


def _read_sym(text: str, symbols: dict[str, Any]) -> Any:
    """A symbolic size as sympy prints it, ``8*s77``, over ``symbols`` (name -> Symbol);
    None when it does not read."""
    import sympy

    try:
        return sympy.sympify(text, locals={**_sympy_names(), **symbols})
    except Exception:  # noqa: BLE001 - a size that does not read back: not written this way
        return None


def _read_sym_repr(text: str, symbols: dict[str, Any]) -> Any:
    """A symbolic size as ``sympy.srepr`` writes it, its symbols replaced by ``symbols``'
    (name -> Symbol); None when it does not read."""
    try:
        e = eval(text, dict(_sympy_names()))  # noqa: S307 - the reproducer's own graph.py, which runs as code anyway
        return e.xreplace({s: symbols[s.name] for s in e.free_symbols})
    except Exception:  # noqa: BLE001
        return None


class _Encoder:
    """Python source for values found in args, kwargs, metadata and module attributes."""

    def __init__(self) -> None:
        self.tensor_literals = False
        self.pytree_modules: set[str] = set()  # modules defining the types of encoded TreeSpecs
        # the free symbols of the symbolic sizes written (torch.export with dynamic_shapes,
        # torch.compile(dynamic=True)): name -> (example value, lower bound, upper bound)
        self.symbols: dict[str, tuple[int | None, int | None, int | None]] = {}
        # each symbolic size's expression -> (builder call, its text), None: no spelling
        self.spelled: dict[Any, tuple[str, str] | None] = {}

    def symint(self, v: Any) -> str:
        """``b.sym("8*s77", 32)``: a symbolic size as its expression over free symbols (each
        recorded in :attr:`symbols` with its example value and range) and its example value;
        an expression that does not read back the same is unsupported."""
        import sympy

        node = v.node
        expr = node.expr
        if not expr.free_symbols:
            return repr(int(expr))
        hint = node.hint
        hint_text = repr(int(hint) if hint is not None else None)
        spelled = self.spelled.get(expr, False)  # (each expression read back once: s77 is every node's)
        if spelled is None:
            raise _Unsupported(f"the symbolic size {expr}")
        if spelled:
            return f"{spelled[0]}({spelled[1]!r}, {hint_text})"
        self.spelled[expr] = None  # (until it reads back)
        names = {str(s): s for s in expr.free_symbols}
        # as printed (8*s77) where it reads back the same, else as sympy's repr: torch's
        # FloorDiv prints as (s77//2), which sympy reads as floor(s77/2)
        text, call = str(expr), "b.sym"
        if _read_sym(text, names) != expr:
            text, call = sympy.srepr(expr), "b.sym_repr"
            if _read_sym_repr(text, names) != expr:
                raise _Unsupported(f"the symbolic size {expr}")
        env = node.shape_env
        values = getattr(env, "backed_var_to_val", None)
        if values is None:
            values = env.var_to_val
        for name, sym in names.items():
            rng = env.var_to_range.get(sym)
            bounds = [None, None]
            if rng is not None:
                # (an unbounded side is torch's int_oo, or sympy's oo: None)
                bounds = [int(b) if isinstance(b, (int, sympy.Integer)) else None for b in (rng.lower, rng.upper)]
            value = values.get(sym)
            self.symbols[name] = (int(value) if value is not None else None, *bounds)
        self.spelled[expr] = (call, text)
        return f"{call}({text!r}, {hint_text})"

    def size(self, d: Any) -> str:
        """A size or stride: the int, or :meth:`symint` of a symbolic one."""
        return self.symint(d) if isinstance(d, torch.SymInt) else repr(int(d))

    def treespec(self, spec: Any) -> str:
        """``b.treespec(...)`` of a pytree spec; notes the modules that define its types."""
        from torch.utils._pytree import treespec_dumps

        from ._pytree_types import spec_modules

        self.pytree_modules.update(spec_modules([spec]))
        return f"b.treespec({treespec_dumps(spec)!r})"

    def __call__(self, v: Any, *, in_meta: bool = False) -> str:
        return self.enc(v, in_meta)

    def enc(self, v: Any, meta: bool) -> str:
        if v is None or isinstance(v, (bool, int, str)) and type(v) in (bool, int, str):
            return repr(v)
        if type(v) is float:
            if math.isnan(v):
                return 'float("nan")'
            if math.isinf(v):
                return 'float("inf")' if v > 0 else 'float("-inf")'
            return repr(v)
        if type(v) is complex:
            return f"complex({self.enc(v.real, meta)}, {self.enc(v.imag, meta)})"
        if isinstance(v, torch.SymInt):
            if not meta:  # (a pass's own: node arguments hold the nodes that compute sizes)
                raise _Unsupported(f"the symbolic size {v} in node arguments")
            return self.symint(v)
        if isinstance(v, torch.fx.Node):
            return f"N[{v.name!r}]"
        if isinstance(v, torch.Size):
            # (never int() of a symbolic size: that guards on its value, and specialises the
            # graph's own ShapeEnv to the example)
            return f"torch.Size([{', '.join(map(self.size, v))}])"
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            from torch.fx.passes.shape_prop import TensorMetadata

            if isinstance(v, TensorMetadata):
                fields = ", ".join(f"{k}={self.enc(getattr(v, k), meta)}" for k in v._fields)
                return f"b.tensor_meta({fields})"
            raise _Unsupported(f"named tuple {type(v).__name__}")
        if isinstance(v, tuple):
            inner = ", ".join(self.enc(x, meta) for x in v)
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        if isinstance(v, list):
            return "[" + ", ".join(self.enc(x, meta) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{self.enc(k, meta)}: {self.enc(x, meta)}" for k, x in v.items()) + "}"
        if isinstance(v, slice):
            return f"slice({self.enc(v.start, meta)}, {self.enc(v.stop, meta)}, {self.enc(v.step, meta)})"
        if v is Ellipsis:
            return "..."
        if isinstance(v, (torch.dtype, torch.layout, torch.memory_format)):
            text = repr(v)
            if not text.startswith("torch."):
                raise _Unsupported(text)
            return text
        if isinstance(v, torch.device):
            return f"torch.device({str(v)!r})"
        if isinstance(v, torch.Tensor):
            if not meta:
                raise _Unsupported("a tensor in node arguments (store it as a module attribute)")
            # (int() of a symbolic size gives its example value: a size-dependent failure
            # did not replay; each is written as its expression, see symint)
            shape = "[" + ", ".join(map(self.size, v.shape)) + "]"
            stride = "[" + ", ".join(map(self.size, v.stride())) + "]" if v.layout == torch.strided else None
            return (
                f"b.fake({shape}, {stride}, {v.dtype}, {str(v.device)!r}, "
                f"requires_grad={bool(v.requires_grad)}, parameter={isinstance(v, torch.nn.Parameter)})"
            )
        if type(v).__name__ == "NodeSource" and hasattr(v, "to_dict"):
            return f"b.node_source({self.enc(v.to_dict(), meta)})"
        if type(v).__name__ in ("TreeSpec", "LeafSpec") or type(v).__module__ == "torch.utils._pytree":
            return self.treespec(v)
        if isinstance(v, type):
            return f"b.cls({v.__module__ + '.' + v.__qualname__!r})"
        if callable(v):
            name = _qualname(v)
            if name is None:
                raise _Unsupported(f"a {type(v).__name__} without an importable name")
            return f"b.target({name!r})"
        raise _Unsupported(f"a {type(v).__module__}.{type(v).__qualname__}")


# ------------------------------------------------------------------------------ writing graphs

_MODULE_INTERNALS = frozenset(vars(torch.nn.Module()).keys()) - {"training"}
_GM_INTERNALS = frozenset(vars(torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())).keys()) - {"training"}


def graph_source(gm: torch.fx.GraphModule, *, title: str = "", tensor_file: str = "tensors.safetensors") -> tuple[str, dict[str, torch.Tensor]]:
    """Python source that rebuilds ``gm``, and the tensors it refers to by name.

    Raises:
        ReproducerError: a node target or argument, or a called submodule's class, cannot be
            written as code; the message names the node or module.
    """
    enc = _Encoder()
    lines: list[str] = []
    dropped: dict[str, set[str]] = {}
    tensors: dict[str, torch.Tensor] = {}
    tensor_keys: dict[int, str] = {}
    emit = lines.append

    def tensor_key(name: str, t: torch.Tensor) -> tuple[str, bool]:
        key = tensor_keys.get(id(t))
        if key is not None:
            return key, False
        if type(t) not in (torch.Tensor, torch.nn.Parameter) and not isinstance(t, torch.nn.Parameter):
            raise ReproducerError(f"tensor {name!r} is a {type(t).__name__}, which a reproducer cannot store")
        tensor_keys[id(t)] = name
        tensors[name] = t
        return name, True

    # -- modules
    seen: dict[int, str] = {}
    emit("    # modules: qualified name, class, plain attributes")
    for qualname, mod in gm.named_modules(remove_duplicate=False):
        if id(mod) in seen:
            emit(f"    b.alias_module({qualname!r}, {seen[id(mod)]!r})")
            continue
        seen[id(mod)] = qualname
        internals = _GM_INTERNALS if qualname == "" else _MODULE_INTERNALS
        if qualname and isinstance(mod, torch.fx.GraphModule):
            raise ReproducerError(
                f"submodule {qualname!r} is itself a GraphModule (control flow); reproducers do not "
                "support nested graphs yet"
            )
        cls = type(mod)
        # a class that cannot be imported is written by name all the same: loading replaces
        # it by torch.nn.Module unless a call_module node calls it (then it must be importable)
        cls_name = (_qualname(cls) or f"{cls.__module__}.{cls.__qualname__}") if qualname else None
        attrs: list[str] = []
        for k, v in vars(mod).items():
            if k in internals or (qualname == "" and k == "meta"):
                continue
            if isinstance(v, torch.Tensor):
                full = f"{qualname}.{k}" if qualname else k
                key, _ = tensor_key(full, v)
                attrs.append(f"{k!r}: b.tensor({key!r})")
                continue
            try:
                attrs.append(f"{k!r}: {enc(v, in_meta=True)}")
            except (_Unsupported, TypeError, ValueError) as exc:
                dropped.setdefault(f"module {qualname or '(root)'}", set()).add(f"{k} ({exc})")
        body = "{" + ", ".join(attrs) + "}"
        if qualname == "":
            emit(f"    b.root({body})")
        else:
            emit(f"    b.module({qualname!r}, {cls_name!r}, {body})")
        for pname, p in mod._parameters.items():
            full = f"{qualname}.{pname}" if qualname else pname
            if p is None:
                emit(f"    b.parameter({full!r}, None)")
                continue
            key, _ = tensor_key(full, p)
            emit(f"    b.parameter({full!r}, {key!r}, requires_grad={bool(p.requires_grad)})")
        for bname, buf in mod._buffers.items():
            full = f"{qualname}.{bname}" if qualname else bname
            persistent = bname not in mod._non_persistent_buffers_set
            if buf is None:
                emit(f"    b.buffer({full!r}, None, persistent={persistent})")
                continue
            key, _ = tensor_key(full, buf)
            emit(f"    b.buffer({full!r}, {key!r}, persistent={persistent})")
    meta_items = []
    for k, v in (getattr(gm, "meta", None) or {}).items():
        try:
            meta_items.append(f"{k!r}: {enc(v, in_meta=True)}")
        except (_Unsupported, TypeError, ValueError) as exc:
            dropped.setdefault("gm.meta", set()).add(f"{k} ({exc})")
    emit(f"    b.gm_meta({{{', '.join(meta_items)}}})")

    # -- nodes
    emit("")
    emit("    # nodes: op, name, target, args, kwargs, metadata")
    for n in gm.graph.nodes:
        if n.op == "call_function":
            name = _qualname(n.target)
            if name is None:
                raise ReproducerError(
                    f"node %{n.name}: its target {n.target!r} cannot be imported by name (a local "
                    "function or lambda?), so a reproducer cannot refer to it"
                )
            target = f"b.target({name!r})"
        else:
            target = repr(n.target)
        try:
            args = enc(tuple(n.args))
            kwargs = enc(dict(n.kwargs))
        except _Unsupported as exc:
            raise ReproducerError(f"node %{n.name} (op={n.op}): cannot write its arguments: {exc}") from None
        meta = []
        for k, v in n.meta.items():
            try:
                meta.append(f"{k!r}: {enc(v, in_meta=True)}")
            except (_Unsupported, TypeError, ValueError, RuntimeError) as exc:
                dropped.setdefault(f"node meta[{k!r}]", set()).add(str(exc))
        type_expr = ""
        if isinstance(n.type, str):
            type_expr = f", type_expr={n.type!r}"
        elif n.type is not None:
            tname = _qualname(n.type) if isinstance(n.type, type) else None
            if tname is not None:
                type_expr = f", type_expr=b.target({tname!r})"
        emit(
            f"    N[{n.name!r}] = b.node({n.op!r}, {n.name!r}, {target}, {args}, {kwargs}, "
            f"{{{', '.join(meta)}}}{type_expr})"
        )

    # -- graph state
    emit("")
    ns = gm.graph._graph_namespace
    used = sorted(getattr(ns, "_used_names", ()))
    base = dict(sorted(getattr(ns, "_base_count", {}).items()))
    emit(f"    b.namespace({used!r}, {base!r})")
    codegen = gm.graph._codegen
    info = getattr(codegen, "pytree_info", None)
    if info is not None:
        in_spec = enc.treespec(info.in_spec) if info.in_spec is not None else None
        out_spec = enc.treespec(info.out_spec) if info.out_spec is not None else None
        emit(f"    b.pytree_codegen({list(info.orig_args)!r}, {in_spec or None}, {out_spec or None})")
    from ._custom_ops import graph_op_modules

    if enc.symbols:
        # first: the symbolic sizes of the fake values below are expressions over them
        lines.insert(0, "    # the symbols of the symbolic sizes: example value, lower and upper bound")
        lines.insert(1, f"    b.symbols({dict(sorted(enc.symbols.items()))!r})")
    imports = sorted({*enc.pytree_modules, *graph_op_modules(gm)})
    if imports:
        # first: loading a TreeSpec needs its types registered, and resolving a custom
        # operator its definition, which importing their modules does
        lines.insert(0, "    # modules that define (and register) the pytree types and custom operators below")
        lines.insert(1, f"    b.imports({imports!r})")

    code = gm.graph.python_code("self").src.strip("\n")
    notes = ""
    if dropped:
        notes = "\nNot written (no spelling in code; passes rarely read them):\n" + "\n".join(
            f"  {where}: {', '.join(sorted(what))}" for where, what in sorted(dropped.items())
        )
    header = (
        f'"""{title or "A graph saved by fxpasses"}.\n\n'
        "Load it with ``fxpasses.reproducer.load_graph(path)``; ``TENSORS`` names the file with\n"
        "its parameters, buffers and tensor attributes.\n"
        f"{notes}\n\n"
        "Its code:\n\n" + textwrap.indent(code, "    ").replace('"""', "'''").replace("\\", "\\\\") + '\n"""\n'
    )
    src = (
        header
        + "\nimport torch\n\n"
        + f"TENSORS = {tensor_file!r}\n\n\n"
        + "def build(b):\n"
        + "    N = b.nodes\n"
        + "\n".join(lines)
        + "\n"
    )
    return src, tensors


# ------------------------------------------------------------------------------ loading graphs


class GraphBuilder:
    """What a ``graph.py`` file's ``build(b)`` calls to recreate a GraphModule."""

    def __init__(self, tensors: dict[str, torch.Tensor], source: str) -> None:
        self.tensors = tensors
        self.source = source
        self.graph = torch.fx.Graph()
        self.nodes: dict[str, torch.fx.Node] = {}
        self.gm = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
        self._fake_mode: Any = None
        self._used: list[str] | None = None
        self._base: dict[str, int] | None = None

    # values
    def tensor(self, key: str) -> torch.Tensor:
        try:
            return self.tensors[key]
        except KeyError:
            raise ConfigError(f"{self.source}: the tensor file has no tensor {key!r}") from None

    def target(self, qualname: str) -> Any:
        try:
            return resolve(qualname)
        except Exception as exc:
            raise ConfigError(
                f"{self.source}: cannot import {qualname!r} ({exception_text(exc)}), which the graph calls; "
                "install the package that defines it, or put the folder of its module on PYTHONPATH (model code: "
                "the reproducer's README names the file)"
            ) from None

    def cls(self, qualname: str) -> type:
        """The class, or a stand-in with the same name when it cannot be imported here."""
        try:
            obj = resolve(qualname)
            if isinstance(obj, type):
                return obj
        except Exception:
            pass
        module, _, name = qualname.rpartition(".")
        return type(name, (), {"__module__": module, "__qualname__": name})

    def imports(self, modules: list[str]) -> None:
        """Import the modules that define the graph's pytree types and custom operators
        (registering them).

        Raises:
            ConfigError: one cannot be imported (naming it and the package to install).
        """
        from ._pytree_types import import_modules

        import_modules(modules, self.source, base_dir=Path(self.source).parent, source="[model] graph")

    def treespec(self, text: str) -> Any:
        """The pytree spec ``text`` (``treespec_dumps``) spells.

        Raises:
            ConfigError: a type of it is not registered and importing the module its name
                names does not register it (naming the type and the module).
        """
        from torch.utils._pytree import treespec_loads

        from ._pytree_types import loading

        return loading(lambda: treespec_loads(text), self.source, base_dir=Path(self.source).parent, source="[model] graph")

    def node_source(self, d: dict[str, Any]) -> Any:
        from torch.fx.traceback import NodeSource

        try:
            return NodeSource._from_dict(d)
        except Exception:
            return d

    def tensor_meta(self, **fields: Any) -> Any:
        from torch.fx.passes.shape_prop import TensorMetadata

        return TensorMetadata(**fields)

    def symbols(self, spec: dict[str, tuple[int | None, int | None, int | None]]) -> None:
        """Make the free symbols of the graph's symbolic sizes, by the names they had, each
        with its example value and range, in a new ``ShapeEnv`` that the fake values share
        (their symbols get new names there: ``s77`` may read ``s3``)."""
        from torch._dynamo.source import ConstantSource
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv
        from torch.utils._sympy.numbers import int_oo

        env = ShapeEnv()
        self._symbols: dict[str, Any] = {}
        for name, (hint, lower, upper) in spec.items():
            if hint is None:  # an unbacked size (data-dependent): no example value
                sym = env.create_unbacked_symint().node.expr
            else:
                sym = env.create_symbol(hint, source=ConstantSource(name), dynamic_dim=DimDynamic.DYNAMIC)
            if lower is not None or upper is not None:  # (None: unbounded on that side)
                low = -int_oo if lower is None else lower
                env.constrain_symbol_range(sym, compiler_min=low, compiler_max=int_oo if upper is None else upper)
            self._symbols[name] = sym
        self._fake_mode = FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)

    def sym(self, expr: str, hint: int | None) -> Any:
        """The symbolic size ``expr`` (as sympy prints it) over :meth:`symbols`' symbols, with
        example value ``hint``."""
        return self._symint(_read_sym(expr, self._symbols), hint)

    def sym_repr(self, expr: str, hint: int | None) -> Any:
        """:meth:`sym` of a size written as ``sympy.srepr`` gives it."""
        return self._symint(_read_sym_repr(expr, self._symbols), hint)

    def _symint(self, e: Any, hint: int | None) -> Any:
        if e.is_number:
            return int(e)
        return self._fake_mode.shape_env.create_symintnode(e, hint=hint)

    def fake(
        self,
        shape: list[int],
        stride: list[int] | None,
        dtype: torch.dtype,
        device: str,
        *,
        requires_grad: bool = False,
        parameter: bool = False,
    ) -> torch.Tensor:
        from torch._subclasses.fake_tensor import FakeTensorMode

        if self._fake_mode is None:
            self._fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        with self._fake_mode:
            if stride is None:
                t = torch.empty(shape, dtype=dtype, device=device)
            else:
                t = torch.empty_strided(shape, stride, dtype=dtype, device=device)
        if requires_grad and (dtype.is_floating_point or dtype.is_complex):
            t.requires_grad_(True)
        if parameter:
            t = torch.nn.Parameter(t, requires_grad=t.requires_grad)
        return t

    # modules
    def _owner(self, qualname: str) -> tuple[torch.nn.Module, str]:
        *path, last = qualname.split(".")
        mod: torch.nn.Module = self.gm
        for p in path:
            mod = mod._modules[p]  # type: ignore[assignment]
        return mod, last

    def root(self, attrs: dict[str, Any]) -> None:
        self.gm.__dict__.update(attrs)

    def module(self, qualname: str, cls_name: str, attrs: dict[str, Any]) -> None:
        try:
            cls = resolve(cls_name)
        except Exception:
            cls = None
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            called = any(
                n.op == "call_module" and (n.target == qualname or str(n.target).startswith(qualname + "."))
                for n in self.graph.nodes
            )
            if called:
                raise ConfigError(f"{self.source}: submodule {qualname!r} needs class {cls_name}, which cannot be imported")
            cls = torch.nn.Module
        mod = cls.__new__(cls)
        torch.nn.Module.__init__(mod)
        mod.__dict__.update(attrs)
        owner, name = self._owner(qualname)
        owner._modules[name] = mod

    def alias_module(self, qualname: str, existing: str) -> None:
        owner, name = self._owner(qualname)
        owner._modules[name] = self.gm.get_submodule(existing)

    def parameter(self, qualname: str, key: str | None, requires_grad: bool = True) -> None:
        owner, name = self._owner(qualname)
        if key is None:
            owner._parameters[name] = None
            return
        t = self.tensor(key)
        p = t if isinstance(t, torch.nn.Parameter) else torch.nn.Parameter(t, requires_grad=requires_grad)
        self.tensors[key] = p
        owner._parameters[name] = p

    def buffer(self, qualname: str, key: str | None, persistent: bool = True) -> None:
        owner, name = self._owner(qualname)
        owner._buffers[name] = None if key is None else self.tensor(key)
        if not persistent:
            owner._non_persistent_buffers_set.add(name)

    def gm_meta(self, meta: dict[str, Any]) -> None:
        self.gm.meta.update(meta)

    # nodes
    def node(
        self, op: str, name: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], meta: dict[str, Any],
        type_expr: Any = None,
    ) -> torch.fx.Node:
        n = self.graph.create_node(op, target, args, kwargs, name=name, type_expr=type_expr)
        if n.name != name:
            raise ConfigError(f"{self.source}: node {name!r} came out as {n.name!r} (names out of order?)")
        n.meta.clear()
        n.meta.update(meta)
        return n

    def namespace(self, used: list[str], base_count: dict[str, int]) -> None:
        self._used, self._base = used, base_count

    def pytree_codegen(self, orig_args: list[str], in_spec: Any, out_spec: Any) -> None:
        """The graph's code generator: torch.export's pytree one, with these specs (``TreeSpec``
        objects from :meth:`treespec`, or the ``treespec_dumps`` text of older graph files)."""
        from torch.fx.graph import _PyTreeCodeGen, _PyTreeInfo

        def spec(s: Any) -> Any:
            return self.treespec(s) if isinstance(s, str) else s

        info = _PyTreeInfo(list(orig_args), spec(in_spec), spec(out_spec))
        self.graph._codegen = _PyTreeCodeGen(info)

    def finish(self) -> torch.fx.GraphModule:
        ns = self.graph._graph_namespace
        if self._used is not None and hasattr(ns, "_used_names"):
            ns._used_names.update(self._used)
        if self._base is not None and hasattr(ns, "_base_count"):
            for k, v in self._base.items():
                ns._base_count[k] = max(ns._base_count.get(k, 0), v)
        self.gm.graph = self.graph
        self.gm.recompile()
        return self.gm


def load_graph(path: str | Path, source: str = "[model] graph") -> torch.fx.GraphModule:
    """The GraphModule a ``graph.py`` written by :func:`graph_source` describes.

    ``source``: the config key that named it, for error messages.

    Raises:
        ConfigError: the file is missing or does not build (naming what is wrong).
    """
    path = Path(path)
    require_file(path, "graph file", "a graph.py written by --reproducer", source=source)
    name = f"_fxpasses_graph_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot load {path} as Python", source=source)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ConfigError(f"cannot load {path}: {exception_text(exc)}", source=source) from None
    build = getattr(module, "build", None)
    tensor_file = getattr(module, "TENSORS", None)
    if not callable(build) or not isinstance(tensor_file, str):
        raise ConfigError(f"{path} is not a graph file: it needs `TENSORS = \"...\"` and `def build(b)`", source=source)
    tensors = load_tensors(path.parent / tensor_file)
    b = GraphBuilder(tensors, str(path))
    try:
        build(b)
        return b.finish()
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"{path} does not build: {exception_text(exc)}", source=source) from None


# ------------------------------------------------------------------------------ the directory


def _earlier_reproducer_files(directory: Path) -> set[str]:
    """The names of the files of the reproducer an earlier run wrote in ``directory`` (told by
    its ``README.md``'s first line), as its ``fxpasses.json`` and graph files name them: the
    config, README, ``error.txt``, ``[model] graph``, ``inputs`` and ``reference``, and the
    tensor files the graph files' ``TENSORS`` lines name; only names :func:`write_reproducer`
    writes (:data:`_REPRODUCER_FILE`). Empty when the folder holds no reproducer."""
    try:
        with (directory / README_NAME).open(encoding="utf-8") as f:
            if f.readline() != _README_TITLE:
                return set()
        model = json.loads((directory / CONFIG_NAME).read_text(encoding="utf-8")).get("model")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return set()
    names = {CONFIG_NAME, README_NAME, ERROR_NAME}
    if isinstance(model, dict):
        names.update(v for k in ("graph", "inputs", "reference") if isinstance(v := model.get(k), str))
    for graph in [n for n in names if n.endswith(".py") and _REPRODUCER_FILE.fullmatch(n)]:
        try:
            found = _TENSORS_LINE.search((directory / graph).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
        if found:
            names.add(found.group(1))
    return {n for n in names if _REPRODUCER_FILE.fullmatch(n)}


def _remove_earlier_reproducer_files(directory: Path, earlier: set[str], written: set[str]) -> None:
    """Remove the files of an earlier reproducer in ``directory`` (``earlier``:
    :func:`_earlier_reproducer_files`, read before this one was written) that this one did not
    write again (``written``): its ``reference.py`` and tensors beside a reproducer without a
    reference were another model's, to be taken for this one's. A
    :class:`~fxpasses.errors.ConfigWarning` names them, as ``fxpasses run -o DIR`` names the
    earlier run's outputs it removes."""
    removed = []
    for name in sorted(earlier - written):
        path = directory / name
        if path.is_file():
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(name)
    if removed:
        warnings.warn(
            ConfigWarning(
                f"{directory}: removed {', '.join(removed)}, written there by an earlier reproducer and not by this one"
            ),
            stacklevel=3,
        )


def _entry(step: Any, verify: str, on_error: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": step.name}
    from .pipeline import changed_options

    try:
        opts = changed_options(step.options, mode="json")
    except Exception as exc:  # noqa: BLE001 - an option value JSON cannot hold (bytes that are not UTF-8)
        raise ReproducerError(f"the options of pass {step.name!r} cannot be written as JSON: {exception_text(exc)}") from None
    if opts:
        entry["options"] = opts
    entry["verify"] = verify
    entry["on_error"] = on_error
    for key in ("atol", "rtol"):  # the entry's own tolerances, where it has them
        if getattr(step, key) is not None:
            entry[key] = getattr(step, key)
    return entry


def replay_args(cfg_path: str | Path, rewrite_limit: int | None = None) -> list[str]:
    """The command line that replays the reproducer whose config is ``cfg_path``: with
    ``--rewrite-limit`` when the run that failed had a rewrite limit (``rewrite_limit``: what
    it left when the failing pass started)."""
    args = ["fxpasses", "run", str(cfg_path)]
    if rewrite_limit is not None:
        args += ["--rewrite-limit", str(rewrite_limit)]
    return args


def write_reproducer(
    directory: str | Path,
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any] | None,
    *,
    example_kwargs: Mapping[str, Any] | None = None,
    pipeline: Any,
    failed_step: int,
    error: BaseException,
    plugins: dict[str, Any] | None = None,
    iteration: int = 0,
    original: tuple[str, dict[str, torch.Tensor]] | None = None,
    rewrite_limit: int | None = None,
) -> Path:
    """Write a reproducer of ``pipeline``'s failure at plan step ``failed_step`` (0-based).

    ``original``: :func:`graph_source` of the module before the pipeline, for a numeric
    failure after earlier passes changed the graph: written as ``reference.py`` (with its
    tensors), the module the replay holds the outputs to (``[model] reference``), and the
    failing entry gets the tolerances its check used (``PassFailedError.tolerances``: its own
    raised to what the earlier passes were allowed). The replay's checks then compare with the
    module before the whole pipeline, as the run's did, so a failure that needed the earlier
    passes' difference shows again.

    ``gm`` must be the graph as it was before that step (after a rollback). ``iteration``: the
    fixpoint iteration the failing step ran in (0: not in a group); the replay runs its group
    from the failing pass on, for the iterations the run had left (``max_iterations`` less
    the ones before), numbered from 1 again. ``rewrite_limit``: what the run's rewrite limit
    left when the failing pass started (``PassContext.rewrites_left``); the replay command is
    then ``fxpasses run DIR/fxpasses.json --rewrite-limit N``, so the pass stops where it
    stopped in the run. Returns the
    config's path. The inputs file holds ``example_inputs`` as tensors named ``0``, ``1``, ...
    and ``example_kwargs`` by their keywords; the replay calls the graph with both.

    Raises:
        ReproducerError: the graph cannot be written as code (see :func:`graph_source`), an
            example input (positional or keyword) is not a tensor, or a keyword is all digits
            (it would read back as a positional input).
    """
    directory = Path(directory)
    steps = pipeline.plan().steps
    failing = steps[failed_step]
    title = f"The graph before pass {failing.name!r} (step {failed_step + 1} of {len(steps)}) failed"
    tensors_stem = directory / "tensors"
    src, tensors = graph_source(gm, title=title, tensor_file="tensors.safetensors")
    inputs = list(example_inputs or ())
    bad = [i for i, x in enumerate(inputs) if not isinstance(x, torch.Tensor)]
    if bad:
        raise ReproducerError(f"example input {bad[0]} is a {type(inputs[bad[0]]).__name__}, not a tensor")
    keywords = dict(example_kwargs or {})
    for key, value in keywords.items():
        if not isinstance(value, torch.Tensor):
            raise ReproducerError(f"keyword example input {key!r} is a {type(value).__name__}, not a tensor")
        if is_positional_name(key):
            raise ReproducerError(f"keyword example input {key!r} would read back as positional input {key}")
    earlier = _earlier_reproducer_files(directory)  # (before this one writes over it)
    directory.mkdir(parents=True, exist_ok=True)
    tensor_path = save_tensors(tensors_stem, tensors)
    if tensor_path.name != "tensors.safetensors":
        src = src.replace("TENSORS = 'tensors.safetensors'", f"TENSORS = {tensor_path.name!r}")
    (directory / GRAPH_NAME).write_text(src)
    input_path = save_tensors(directory / "inputs", {**{str(i): x for i, x in enumerate(inputs)}, **keywords})
    entries: list[dict[str, Any]] = []
    group = None  # the fixpoint group being written: its steps go in one table
    tolerances = getattr(error, "tolerances", None) if original is not None else None
    # a failure after the first member of a fixpoint group: the rest of that iteration once,
    # then the whole group for the iterations the run had left (the members before the
    # failing one run in those too)
    fgroup = failing.group
    mid_group = fgroup is not None and failed_step > 0 and steps[failed_step - 1].group is fgroup
    rest = fgroup.max_iterations - max(iteration, 1) if mid_group else 0
    whole_pending = mid_group and rest >= 1  # the whole group, once the rest of the iteration is written

    def whole_group() -> dict[str, Any]:
        members = [
            _entry(s, s.verify or pipeline.verify, s.on_error or pipeline.on_error) for s in steps if s.group is fgroup
        ]
        return {"fixpoint": members, "max_iterations": rest}

    for i, s in enumerate(steps[failed_step:]):
        if whole_pending and group is fgroup and s.group is not fgroup:
            entries.append(whole_group())  # (after the rest of the failing iteration)
            whole_pending = False
        verify = s.verify or pipeline.verify
        on_error = s.on_error or pipeline.on_error
        if i == 0 and on_error == "skip":
            on_error = "rollback"  # the failure must show
        entry = _entry(s, verify, on_error)
        if i == 0 and tolerances is not None:
            entry["atol"], entry["rtol"] = tolerances
        if s.group is None:
            entries.append(entry)
        elif s.group is group:
            entries[-1]["fixpoint"].append(entry)
        elif i == 0 and mid_group:  # the rest of the failing iteration: once
            entries.append({"fixpoint": [entry], "max_iterations": 1})
        else:  # (from the failing pass, the group's first: the group's later iterations start there)
            left = s.group.max_iterations - (iteration - 1 if i == 0 and iteration > 1 else 0)
            entries.append({"fixpoint": [entry], "max_iterations": max(left, 1)})
        group = s.group
    if whole_pending:  # (the failing group was the plan's last)
        entries.append(whole_group())
    model: dict[str, Any] = {"graph": GRAPH_NAME, "inputs": input_path.name}
    grad = [str(i) for i, x in enumerate(inputs) if x.requires_grad] + [k for k, v in keywords.items() if v.requires_grad]
    if grad:  # (an inputs file holds values only: the replay makes them require grad again)
        model["requires_grad"] = grad
    written = {GRAPH_NAME, tensor_path.name, input_path.name, CONFIG_NAME, ERROR_NAME, README_NAME}
    if original is not None:
        ref_src, ref_tensors = original
        ref_path = save_tensors(directory / "reference_tensors", ref_tensors)
        ref_src = ref_src.replace("TENSORS = 'tensors.safetensors'", f"TENSORS = {ref_path.name!r}")
        (directory / REFERENCE_NAME).write_text(ref_src)
        model["reference"] = REFERENCE_NAME
        written |= {REFERENCE_NAME, ref_path.name}
    config: dict[str, Any] = {
        "pipeline": entries,
        "order": "as-given",
        "verify": pipeline.verify,
        "on_error": "rollback",
        "atol": pipeline.atol,
        "rtol": pipeline.rtol,
        "model": model,
    }
    plugins = _with_pass_plugins(plugins, pipeline, steps[failed_step:])
    if plugins:
        config["plugins"] = plugins
    cfg_path = directory / CONFIG_NAME
    cfg_path.write_text(json_dumps(config, indent=2) + "\n")
    # the failure as the replay reports it: its bisect command is the reproducer's own (the
    # run's names a config and a model the replay machine does not have)
    text = str(error)
    hint = getattr(pipeline, "_bisect_hint", None)
    if hint:
        from .pipeline import bisect_hint

        text = text.replace(hint, bisect_hint(f"`{shlex.join(['fxpasses', 'bisect', str(cfg_path)])}`"))
    (directory / ERROR_NAME).write_text(text + "\n")
    versions = _versions(s.cls for s in steps[failed_step:])
    model_code = _model_code(gm)
    folders = sorted({str(Path(f).parent) for f in model_code.values()})
    replay = shlex.join(replay_args(cfg_path, rewrite_limit))
    if folders:
        replay = f"PYTHONPATH={shlex.quote(os.pathsep.join(folders))} {replay}"
    hooks = unsaved_hooks(gm)
    needs = (
        "needs fxpasses, the pass packages, and the model code the graph calls: "
        + ", ".join(f"`{q}` ({f})" for q, f in model_code.items())
        + "; put its folder on PYTHONPATH, as below, or install its package"
        if model_code
        else "needs only fxpasses and the pass packages, not the model's code"
    )
    (directory / README_NAME).write_text(
        f"{_README_TITLE}\n"
        f"Written {datetime.datetime.now().isoformat(timespec='seconds')} by fxpasses "
        f"{_version('fxpasses')}, torch {torch.__version__}, Python {sys.version.split()[0]}.\n\n"
        f"Pass `{failing.name}` (step {failed_step + 1} of {len(steps)}"
        + (f", iteration {iteration} of its fixpoint group" if iteration else "")
        + ") failed:\n\n"
        + textwrap.indent(text, "    ")
        + (
            f"\n\nThe replay runs the rest of iteration {max(iteration, 1)} of its fixpoint group, from "
            f"`{failing.name}` on, once, then the whole group for the {rest} iteration(s) the run had left, "
            "numbered from 1 again (`ctx.iteration`): a pass that acts on `ctx.iteration` may act otherwise."
            if mid_group and rest >= 1
            else f"\n\nThe replay runs the rest of iteration {max(iteration, 1)} of its fixpoint group, from "
            f"`{failing.name}` on, once: it was the group's last."
            if mid_group
            else f"\n\nThe replay runs its fixpoint group from `{failing.name}` on, as iteration 1 (`ctx.iteration` "
            f"counts from there), for the {max(failing.group.max_iterations - iteration + 1, 1)} iteration(s) "
            "the run had left: a pass that acts on `ctx.iteration` may act otherwise."
            if iteration > 1 and failing.group is not None
            else ""
        )
        + (
            "\n\nNot in the reproducer (the replay runs without them, so a failure that depends on them "
            "may not show): " + "; ".join(hooks) + "."
            if hooks
            else ""
        )
        + (
            f"\n\nThe run applied only its first rewrites (`--rewrite-limit`): the replay applies the "
            f"{rewrite_limit} that the limit left when `{failing.name}` started, as the run did, with "
            f"`--rewrite-limit {rewrite_limit}` (without it every rewrite is applied, and the failure may not show)."
            if rewrite_limit is not None
            else ""
        )
        + f"\n\nReplay it ({needs}):\n\n"
        f"    {replay}\n\n"
        "Files: `fxpasses.json` (the failing pass and the passes after it, in order), "
        f"`graph.py` (the graph before the pass, as code), `{tensor_path.name}` (parameters and "
        f"buffers), `{input_path.name}` (the example inputs: positional ones named 0, 1, ..., "
        "keyword ones by their keyword), "
        + (
            f"`{REFERENCE_NAME}` and its tensors (the module before the whole pipeline: the passes before "
            "this one changed the graph, and the replay holds the outputs to this module, as the run did), "
            if original is not None
            else ""
        )
        + "`error.txt`.\n\n"
        "Pass packages: " + (", ".join(versions) or "(built-in passes only)") + "\n"
    )
    _remove_earlier_reproducer_files(directory, earlier, written)
    return cfg_path


def unsaved_hooks(gm: torch.fx.GraphModule) -> list[str]:
    """The hooks of ``gm``'s modules (``path: Class has forward hooks``; global ones once)
    that a reproducer does not hold: ``graph.py`` has the graph and the tensors, not Python
    callables. A failure that depends on them (a pass removing a call whose hook changes the
    output) replays without them, and the replay passed without a word (a new-user check).
    Hooks defined in torch (those ``torch.export``'s ``.module()`` puts on its root to flatten
    the inputs and check their constraints, which the replay's module gets again) are not
    named."""
    from torch.nn.modules import module as nn_module

    from .effects import _HOOK_KINDS
    from .lint import _of_torch

    found: list[str] = []
    for path, m in gm.named_modules(remove_duplicate=True):
        d = m.__dict__
        for key, kind in _HOOK_KINDS:
            if any(not _of_torch(h) for h in (d.get(key) or {}).values()):
                found.append(f"{path or '(root)'}: {type(m).__name__} has {kind}hooks")
                break
    for key, kind in _HOOK_KINDS:
        if any(not _of_torch(h) for h in (getattr(nn_module, "_global" + key, None) or {}).values()):
            found.append(f"global {kind}hooks (torch.nn.modules.module.register_module_*)")
    return found


def _model_code(gm: torch.fx.GraphModule) -> dict[str, str]:
    """``{qualified name: source file}`` of the Python functions the graph calls that are the
    model's own code (``torch.fx.wrap``'d helpers): neither torch's, the standard library's nor
    an installed package's. The replay imports them by name, so it needs their module."""
    import inspect
    import types

    from .errors import _PACKAGE_DIRS, in_stdlib

    found: dict[str, str] = {}
    for node in gm.graph.nodes:
        fn = node.target
        if node.op != "call_function" or not isinstance(fn, types.FunctionType):
            continue
        module = getattr(fn, "__module__", None) or ""
        if module.partition(".")[0] in ("torch", "fxpasses"):
            continue
        try:
            file = inspect.getsourcefile(fn)
        except TypeError:
            continue
        if not file or in_stdlib(file) or os.path.abspath(file).startswith(_PACKAGE_DIRS) or "site-packages" in file:
            continue
        found.setdefault(f"{module}.{fn.__qualname__}", os.path.abspath(file))
    return found


def _with_pass_plugins(plugins: Mapping[str, Any] | None, pipeline: Any, steps: Sequence[Any]) -> dict[str, Any]:
    """The ``[plugins]`` table ``plugins`` with the distributions of the plugins whose passes
    ``steps`` run added to its ``enable``: the replay then loads them even with autoloading
    off, and where one is not installed it fails naming it ("requested with enable/-p but not
    installed") rather than with an unknown pass. Passes registered from Python code
    (``Registry.register``) and the built-in ones need no entry."""
    from .errors import FxPassesError
    from .registry import BUILTIN_DISTRIBUTION, _norm

    out = dict(plugins or {})
    registry = pipeline.registry
    loaded = {r.distribution for r in registry.plugins if r.status != "disabled"}
    enable = list(out.get("enable") or ())
    have = {_norm(e) for e in enable}
    for step in steps:
        try:
            info = registry.info(step.name)
        except FxPassesError:
            continue
        dist = info.distribution
        if info.cls is step.cls and dist in loaded and _norm(dist) not in have | {BUILTIN_DISTRIBUTION}:
            enable.append(dist)
            have.add(_norm(dist))
    if enable:
        out["enable"] = enable
    return out


def _version(dist: str) -> str:
    try:
        import importlib.metadata as md

        return md.version(dist)
    except Exception:
        return "?"


def _versions(classes: Iterable[type]) -> list[str]:
    mods = sorted({c.__module__.split(".")[0] for c in classes})
    out = []
    for m in mods:
        try:
            import importlib.metadata as md

            dists = md.packages_distributions().get(m, [])
        except Exception:
            dists = []
        for d in dists:
            out.append(f"{d} {_version(d)}")
    return sorted(set(out))


class ReproducerWriter:
    """An instrument that writes a reproducer when the first pass of a run fails.

    Args:
        directory: where to write.
        pipeline: the pipeline being run (for its plan and settings).
        plugins: the config's ``[plugins]`` table, copied into the reproducer's config.

    After the run, ``written`` is the config's path (None if nothing failed) and ``error``
    says why a reproducer could not be written.
    """

    def __init__(self, directory: str | Path, pipeline: Any, plugins: dict[str, Any] | None = None) -> None:
        from .job import check_writable

        self.directory = Path(directory)
        check_writable(self.directory, "reproducer directory")  # now, not after the run has failed
        self.pipeline = pipeline
        self.plugins = plugins
        self.step = -1
        self.iteration = 0
        self.inputs: Sequence[Any] | None = None
        self.kwargs: Mapping[str, Any] | None = None
        self.written: Path | None = None
        self.error: str | None = None
        self.failed_pass: str | None = None
        #: what the reproducer written does not hold (module hooks), for the caller to say
        self.warnings: list[str] = []
        #: the module before the pipeline (graph_source, its tensors copied), taken at its
        #: first pass when a step verifies numerically
        self.original: tuple[str, dict[str, torch.Tensor]] | None = None
        self.taken = False
        self.changed = False  # a pass before the failing one changed the graph and was kept
        #: what the run's rewrite limit left when the failing pass started (None: no limit);
        #: the replay command gives it as --rewrite-limit
        self.rewrite_limit: int | None = None

    @hookimpl
    def fxpasses_before_pass(self, pass_name: str, gm: Any, ctx: Any) -> None:
        # the plan step (counting the passes run miscounted analyses computed on demand and
        # the iterations of fixpoint groups)
        self.step = ctx.step if getattr(ctx, "step", None) is not None else self.step + 1
        self.iteration = getattr(ctx, "iteration", 0) or 0
        self.rewrite_limit = getattr(ctx, "rewrites_left", None)
        self.inputs = ctx.example_inputs
        self.kwargs = ctx.example_kwargs
        if not self.taken:
            self.taken = True
            pipeline = self.pipeline
            if any((s.verify or pipeline.verify) == "numeric" for s in pipeline.plan().steps):
                try:
                    src, tensors = graph_source(gm, title="The module before the pipeline")
                except ReproducerError:
                    self.original = None  # (the failing graph's own error is said when it is written)
                else:
                    # copies: rollback and numeric verification restore tensors in place, and a
                    # kept pass may write them (version counters cannot tell these apart)
                    self.original = (src, {k: t.detach().clone() for k, t in tensors.items()})

    @hookimpl
    def fxpasses_after_pass(self, pass_name: str, gm: Any, ctx: Any, report: Any) -> None:
        if getattr(report, "changed", False):
            self.changed = True

    @hookimpl
    def fxpasses_pass_failed(self, pass_name: str, gm: Any, error: Any) -> None:
        if self.written is not None or self.error is not None:
            return
        self.failed_pass = pass_name
        if isinstance(error, PassFailedError) and not error.rolled_back:
            self.error = "the graph was not rolled back (on_error = raise), so the graph before the pass is gone"
            return
        original = None
        if self.changed and self.original is not None and getattr(error, "tolerances", None) is not None:
            original = self.original
        try:
            self.written = write_reproducer(
                self.directory,
                gm,
                self.inputs,
                example_kwargs=self.kwargs,
                pipeline=self.pipeline,
                failed_step=self.step,
                error=error,
                plugins=self.plugins,
                iteration=self.iteration,
                original=original,
                rewrite_limit=self.rewrite_limit,
            )
            hooks = unsaved_hooks(gm)
            if hooks:
                self.warnings.append(f"the reproducer does not hold the modules' hooks, and its replay runs without them: {'; '.join(hooks)}")
        except Exception as exc:  # never hide the pass's own failure
            self.error = f"{exception_text(exc)}"
