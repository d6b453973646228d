"""The Python signatures of torch's C-bound functions (``torch.zeros``, ``torch._C._nn.avg_pool2d``),
read from torch's own type stubs (``torch/_C/_VariableFunctions.pyi``, ``torch/_C/_nn.pyi``).

The ATen schemas of a function's overloads (``torch.fx.operator_schemas``) are not its Python
interface: torch's argument parser adds ``requires_grad`` and ``pin_memory`` to factory
functions, and takes None for an ``int[]`` argument that has a default (``F.avg_pool2d(x, 2,
None)``, ``torch.roll(x, 1, dims=None)``), which the schemas do not say. Lint judged calls by
the schemas and refused correct graphs (a new-user check). The stubs, generated from the same
declarations as the argument parser, say both: each overload's parameter names, which are
keyword-only, which have defaults, and whether None is among an argument's types.

- ``overloads(fn)``: an :class:`Overload` per ``def`` of ``fn`` in its module's stub, or None
  when there is no stub for it (a torch build without stubs, a function of another module):
  callers then judge nothing.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Overload", "overloads"]

#: the stub of each module whose functions are C-bound, in ``torch/_C``
_STUB_FILES = {"torch": "_VariableFunctions.pyi", "torch._C._VariableFunctions": "_VariableFunctions.pyi", "torch._C._nn": "_nn.pyi"}
_STUBS: dict[str, str | None] = {}
_OVERLOADS: dict[Any, list["Overload"] | None] = {}
#: the end of a ``def`` header in a stub: ``) -> ReturnType:``
_HEADER_END = re.compile(r"\)\s*->[^:]*:")


@dataclass(frozen=True)
class Overload:
    """One ``def`` of a function in a stub: its signature, the names of the parameters
    that take None: their annotation admits it (``_int | _size | None``) or anything
    (``Any``), or an int list defaults to empty (``dims: _int | _size = ()``: the argument
    parser takes None for it, which torch's docstrings write as ``dims=None``), and the names
    of the parameters whose items take no None: a sequence of a type without None
    (``tensors: tuple[Tensor, ...] | list[Tensor]``; ``indices: list[Tensor | None]`` takes it)."""

    signature: inspect.Signature
    takes_none: frozenset[str]
    items_refuse_none: frozenset[str] = frozenset()

    def none_refused(self, args: tuple, kwargs: dict) -> str | None:
        """For a call that binds to this overload: the first parameter given None that does not
        take it, in words (``'input'``, ``an item of 'tensors'``); None when all do. Raises
        TypeError when the call does not bind."""
        bound = self.signature.bind(*args, **kwargs)
        for name, value in bound.arguments.items():
            kind = self.signature.parameters[name].kind
            values = value if kind is inspect.Parameter.VAR_POSITIONAL else (value,)
            if kind is inspect.Parameter.VAR_KEYWORD:
                continue
            if any(v is None for v in values) and name not in self.takes_none:
                return repr(name)
            if name in self.items_refuse_none and isinstance(value, (list, tuple)) and any(v is None for v in value):
                return f"an item of {name!r}"
        return None


def _stub(module: str) -> str | None:
    file = _STUB_FILES.get(module)
    if file is None:
        return None
    if file not in _STUBS:
        path = os.path.join(os.path.dirname(torch.__file__), "_C", file)
        try:
            with open(path, encoding="utf-8") as f:
                _STUBS[file] = f.read()
        except OSError:
            _STUBS[file] = None
    return _STUBS[file]


def _overload(header: str) -> Overload | None:
    """The :class:`Overload` of one ``def name(...) -> T:`` header, or None when it does not parse."""
    try:
        fn = ast.parse(header + " ...").body[0]
    except SyntaxError:
        return None
    if not isinstance(fn, ast.FunctionDef):
        return None
    a = fn.args
    P = inspect.Parameter
    params: list[inspect.Parameter] = []
    takes_none: set[str] = set()
    items_refuse_none: set[str] = set()

    def add(arg: ast.arg, kind: Any, default: ast.expr | None = None) -> None:
        text = ast.unparse(arg.annotation) if arg.annotation is not None else "Any"
        # None among its types, or an int list defaulting to empty: the argument parser takes
        # None for it (`roll(input, shifts, dims=None)`, as torch's own docstring writes it)
        empty_list = isinstance(default, (ast.Tuple, ast.List)) and not default.elts
        if "None" in text or "Any" in text or arg.annotation is None or empty_list:
            takes_none.add(arg.arg)
        elif kind is not P.VAR_POSITIONAL and _sequence_without_none(arg.annotation):
            items_refuse_none.add(arg.arg)
        params.append(P(arg.arg, kind, default=P.empty if default is None else None))

    positional = [*a.posonlyargs, *a.args]
    first_default = len(positional) - len(a.defaults)
    for i, arg in enumerate(positional):
        kind = P.POSITIONAL_ONLY if i < len(a.posonlyargs) else P.POSITIONAL_OR_KEYWORD
        add(arg, kind, a.defaults[i - first_default] if i >= first_default else None)
    if a.vararg is not None:
        add(a.vararg, P.VAR_POSITIONAL)
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        add(arg, P.KEYWORD_ONLY, default)
    if a.kwarg is not None:
        add(a.kwarg, P.VAR_KEYWORD)
    try:
        return Overload(inspect.Signature(params), frozenset(takes_none), frozenset(items_refuse_none))
    except ValueError:  # (a stub no Python signature can be: judged by nothing)
        return None


#: the sequence types of stub annotations (``tuple[Tensor, ...]``, ``list[Tensor]``, ``Sequence[Tensor]``)
_SEQUENCES = frozenset({"tuple", "list", "Sequence", "Tuple", "List"})


def _sequence_without_none(annotation: ast.expr) -> bool:
    """Whether every member of the union ``annotation`` is a sequence of items whose type
    text has neither None nor Any (``tuple[Tensor, ...] | list[Tensor]``); an alias
    (``_size``) or anything else is not judged."""
    members: list[ast.expr] = []
    todo = [annotation]
    while todo:
        a = todo.pop()
        if isinstance(a, ast.BinOp) and isinstance(a.op, ast.BitOr):
            todo += (a.left, a.right)
        else:
            members.append(a)
    for m in members:
        if not (isinstance(m, ast.Subscript) and isinstance(m.value, ast.Name) and m.value.id in _SEQUENCES):
            return False
        item = ast.unparse(m.slice)
        if "None" in item or "Any" in item:
            return False
    return True


def overloads(fn: Any) -> list[Overload] | None:
    """Every ``def`` of the C-bound torch function ``fn`` in torch's stub of its module, or
    None without one (no stub file, another module, a name the stub does not define)."""
    try:
        return _OVERLOADS[fn]
    except KeyError:
        pass
    except TypeError:  # unhashable
        return None
    found: list[Overload] | None = None
    name = getattr(fn, "__name__", None)
    text = _stub(getattr(fn, "__module__", None) or "") if isinstance(name, str) else None
    if text is not None:
        found = []
        for m in re.finditer(rf"^def {re.escape(name)}\(", text, re.MULTILINE):  # type: ignore[arg-type]
            end = _HEADER_END.search(text, m.start())
            parsed = _overload(text[m.start() : end.end()]) if end is not None else None
            if parsed is None:
                found = None  # one overload not understood: judge none of them
                break
            found.append(parsed)
        found = found or None
    _OVERLOADS[fn] = found
    return found
