"""Plain FX pass functions as pipeline entries, as torch's own ``PassManager`` takes them.

torch.fx's pass infrastructure (``torch.fx.passes.infra``) runs callables ``p(gm)`` that
return a ``PassResult(graph_module, modified)``, the module, or None; ``PassBase`` instances
are such callables. :func:`function_pass` makes one a :class:`~fxpasses.GraphPass`, so a
pipeline runs it with verification, rollback and reporting like any pass:
``Pipeline([remove_my_nodes, "eliminate_dead_code"])``.

The pass must edit the module it is given, in place (as fxpasses' passes do): a callable that
returns another ``GraphModule`` fails, saying so (its result would be lost; torch's own
``PassBase`` passes such as ``CSEPass`` build a new module, and are not taken). It may return
the module, a ``PassResult`` of it, a bool or None; whether it changed anything is what the
pipeline sees comparing the module before and after, not what it says (torch's passes often
say ``PassResult(gm, True)`` whatever they did). A pipeline holding several callables of one
name (two lambdas, two partials of one function, two instances of one ``PassBase`` class)
numbers the later ones (``scale_2``); :func:`function_pass` with ``name=`` names one.
"""

from __future__ import annotations

import functools
import inspect
import keyword
import types
import weakref
from typing import Any, Callable

import torch

from .errors import PassDefinitionError
from .passes import GraphPass

__all__ = ["function_pass", "is_function_pass"]


def is_function_pass(obj: Any) -> bool:
    """Whether ``obj`` is a callable that :func:`function_pass` takes: a function, a bound
    method, a ``functools.partial`` or an instance with ``__call__`` (torch's ``PassBase``),
    not a class and not an fxpasses pass."""
    from .passes import Pass

    return callable(obj) and not isinstance(obj, (type, Pass))


def _name_of(fn: Any) -> str:
    """``fn``'s ``__name__``; a ``functools.partial``'s function's; ``Class_method`` for a
    bound method; its class's name for a callable instance such as a ``PassBase``; or
    ``"function_pass"`` when that is no identifier (a lambda's ``<lambda>``)."""
    if isinstance(fn, functools.partial):
        return _name_of(fn.func)
    name = getattr(fn, "__name__", None)
    owner = getattr(fn, "__self__", None)
    if isinstance(name, str) and owner is not None and not isinstance(owner, types.ModuleType):
        name = f"{type(owner).__name__}_{name}"  # a bound method: its class too
    if not isinstance(name, str):
        name = type(fn).__name__
    return name if name.isidentifier() and not keyword.iskeyword(name) else "function_pass"


#: the class made for each callable, so that one function given twice is one pass
_made: "weakref.WeakKeyDictionary[Any, type[GraphPass]]" = weakref.WeakKeyDictionary()


def function_pass(fn: Callable[..., Any], name: str | None = None) -> type[GraphPass]:
    """A :class:`~fxpasses.GraphPass` class that runs ``fn(gm)`` (see the module doc), named
    ``name`` or ``fn``'s ``__name__`` (its class's name for a callable instance).

    Raises:
        PassDefinitionError: ``fn`` is not callable, cannot be called with the module alone
            (``fn(gm, y)``: its signature, where Python can read one, does not bind one
            argument), or ``name`` is not an identifier.
    """
    if not callable(fn):
        raise PassDefinitionError(f"function_pass: {fn!r} is not callable")
    try:
        # (its own: a decorator's functools.wraps points __wrapped__ at a function it calls
        # with more arguments)
        signature = inspect.signature(fn, follow_wrapped=False)
    except (TypeError, ValueError):  # a builtin or C callable without one: called as it is
        signature = None
    if signature is not None:
        try:
            signature.bind(None)
        except TypeError as exc:
            raise PassDefinitionError(
                f"function_pass: {getattr(fn, '__qualname__', None) or _name_of(fn)}{signature} cannot be called with the module alone ({exc}): a pass "
                "function is called as fn(gm), as torch's PassManager calls it; give other arguments with "
                "functools.partial, or write a GraphPass"
            ) from None
    if name is None:
        try:
            made = _made.get(fn)
        except TypeError:  # not weakly referable, or unhashable: a class each time
            made = None
        if made is not None:
            return made
    pass_name = name if name is not None else _name_of(fn)
    if not isinstance(pass_name, str) or not pass_name.isidentifier():
        raise PassDefinitionError(f"function_pass: the name {pass_name!r} is not a Python identifier")
    where = getattr(fn, "__module__", None) or type(fn).__module__

    class FunctionPass(GraphPass):
        __doc__ = (getattr(fn, "__doc__", None) or "").strip() or f"The FX pass function {pass_name}."
        name = pass_name
        function = staticmethod(fn)

        def run(self, gm: torch.fx.GraphModule, ctx: Any) -> Any:
            result = type(self).function(gm)
            module = getattr(result, "graph_module", result)  # torch.fx.passes.infra.pass_base.PassResult
            if isinstance(module, torch.fx.GraphModule) and module is not gm:
                raise ValueError(
                    f"{pass_name} returned another GraphModule than the one it was given: fxpasses runs passes "
                    "in place (each pipeline edits one module), so its result would be lost; edit gm itself "
                    "(gm.graph, then return gm or PassResult(gm, modified))"
                )
            # what it says it did is not taken: the pipeline compares the graph before and after
            # (torch's passes often say PassResult(gm, True) whatever they did, which would
            # keep a fixpoint group from ever converging)
            if module is gm or result is None or isinstance(result, bool):
                return None
            raise ValueError(
                f"{pass_name} returned {type(result).__name__}: a pass function returns the module it was given, "
                "a PassResult, a bool (changed) or None"
            )

    FunctionPass.__qualname__ = FunctionPass.__name__ = f"FunctionPass_{pass_name}"
    FunctionPass.__module__ = where if isinstance(where, str) else __name__
    if name is None:
        try:
            _made[fn] = FunctionPass
        except TypeError:
            pass
    return FunctionPass
