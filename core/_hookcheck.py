"""What is wrong with a plugin's or an instrument's hook methods, in words (for
:class:`~fxpasses.registry.Registry`'s errors).

pluggy finds hook implementations by the ``@fxpasses.hookimpl`` marker and validates their
signatures itself (``PluginManager.register`` raises ``PluginValidationError``); what it does not
do is say which hook a misspelled name could mean, or notice a method named like a hook that is
not marked (it is ignored). These helpers add that, using pluggy's own
``parse_hookimpl_opts`` to tell marked methods from the others.
"""

from __future__ import annotations

import difflib
import inspect
import types
from collections.abc import Iterable
from typing import Any, Sequence

import pluggy

from .errors import did_you_mean
from .hookspecs import INSTRUMENT_HOOKS, PREFIX, REGISTRATION_HOOKS, close_hook_names

ALL_HOOKS = REGISTRATION_HOOKS + INSTRUMENT_HOOKS
_ROUTINES = (types.FunctionType, types.MethodType, staticmethod, classmethod, types.BuiltinFunctionType)


def marked_hooks(pm: pluggy.PluginManager, plugin: Any) -> list[str]:
    """The names of ``plugin``'s attributes marked ``@fxpasses.hookimpl`` (pluggy's test)."""
    return [name for name in dir(plugin) if _marked(pm, plugin, name)]


def _marked(pm: pluggy.PluginManager, plugin: Any, name: str) -> bool:
    return _impl_opts(pm, plugin, name) is not None


def _impl_opts(pm: pluggy.PluginManager, plugin: Any, name: str) -> Any:
    """pluggy's options of ``plugin``'s attribute ``name`` when it is marked ``@fxpasses.hookimpl``, else None."""
    try:
        return pm.parse_hookimpl_opts(plugin, name)
    except Exception:  # noqa: BLE001 - an attribute pluggy cannot read is not a hook either
        return None


def hook_of(pm: pluggy.PluginManager, plugin: Any, name: str) -> str:
    """The hook ``plugin``'s marked method ``name`` implements: pluggy's ``specname`` when the
    marker gives one (``@fxpasses.hookimpl(specname="fxpasses_register_passes")`` on a
    method of another name), else ``name``."""
    opts = _impl_opts(pm, plugin, name) or {}
    return opts.get("specname") or name


def hook_name_problems(
    pm: pluggy.PluginManager, plugin: Any, allowed: Sequence[str], *, unmarked: bool = True
) -> list[str]:
    """One sentence per method of ``plugin`` that is a failed attempt at a hook of ``allowed``:

    - marked ``@fxpasses.hookimpl`` but named after no hook of ``allowed`` (with the close
      names, :func:`~fxpasses.hookspecs.close_hook_names`);
    - with ``unmarked``: not marked, but named after a hook of ``allowed`` (pluggy ignores
      it), or close to one (``after_pas``, ``afterpass``; cutoff 0.8, so that names far from
      every hook, such as ``table`` or ``rows``, are an object's own business). Names starting
      with ``_`` are never looked at.
    """
    problems = []
    for name in dir(plugin):
        if name.startswith("_"):
            continue
        if _marked(pm, plugin, name):
            hook = hook_of(pm, plugin, name)
            if hook in allowed:
                continue
            if hook in ALL_HOOKS:  # a registration hook on an instrument
                problems.append(
                    f"{name} is called only for plugins a registry loads (an entry point of the "
                    "'fxpasses' group, or Registry.register_plugin), never for an instrument; "
                    f"an instrument implements {', '.join(allowed)}"
                )
            else:
                problems.append(
                    (
                        f"{name} is marked @fxpasses.hookimpl but no fxpasses hook has that name"
                        if hook == name
                        else f"{name} is marked @fxpasses.hookimpl(specname={hook!r}) but no fxpasses hook has that name"
                    )
                    + did_you_mean(close_hook_names(hook, allowed))
                    + f" (hooks: {', '.join(allowed)})"
                )
            continue
        if not unmarked:
            continue
        try:
            attr = inspect.getattr_static(plugin, name)
        except AttributeError:
            continue
        if not isinstance(attr, _ROUTINES):
            continue
        if name in allowed:
            problems.append(
                f"{name} is named after the hook but not marked @fxpasses.hookimpl, so pluggy "
                "never calls it: decorate it with @fxpasses.hookimpl"
            )
            continue
        close = close_hook_names(name, allowed, cutoff=0.8)
        if close:
            problems.append(
                f"{name} is not an fxpasses hook{did_you_mean(close)} (a hook method is named "
                f"exactly after its hook, {PREFIX}..., and marked @fxpasses.hookimpl; rename a "
                "method that is not meant as one, or start its name with '_')"
            )
    return problems


def signature_problems(pm: pluggy.PluginManager, plugin: Any) -> list[str]:
    """One sentence per marked hook method of ``plugin`` taking an argument its hook does not
    pass (what pluggy's ``PluginValidationError`` reports, naming the method instead of a
    plugin id), with the arguments the hook passes."""
    problems = []
    for name in marked_hooks(pm, plugin):
        caller = getattr(pm.hook, hook_of(pm, plugin, name), None)
        spec = getattr(caller, "spec", None)
        if spec is None:
            continue
        try:
            params = list(inspect.signature(getattr(plugin, name)).parameters)
        except (TypeError, ValueError, AttributeError):
            continue
        extra = [p for p in params if p not in spec.argnames]
        if not extra:
            continue
        guesses = []
        for p in extra:
            close = difflib.get_close_matches(p, spec.argnames, n=1, cutoff=0.6)
            if close:
                guesses.append(f"{close[0]!r} for {p!r}")
        hint = f" (did you mean {', '.join(guesses)}?)" if guesses else ""
        problems.append(
            f"{name}({', '.join(params)}) takes {', '.join(map(repr, extra))}, which the hook does "
            f"not pass{hint}; a {name} implementation may take any of: {', '.join(spec.argnames)}"
        )
    return problems


def instrument_label(obj: Any) -> str:
    """How errors name an instrument: ``instrument PrintChanged`` (its class), ``instrument
    module NAME``, ``instrument class NAME``."""
    if isinstance(obj, types.ModuleType):
        return f"instrument module {obj.__name__}"
    if isinstance(obj, type):
        return f"instrument class {obj.__name__}"
    return f"instrument {type(obj).__name__}"


def instrument_list(pm: pluggy.PluginManager, instruments: Any) -> list[Any]:
    """``instruments`` as a list: a list, tuple or other iterable of instruments, or one
    instrument (an object with a ``@fxpasses.hookimpl`` method; a string is one object, never
    a list of characters); None: none. Nothing is validated here."""
    if instruments is None:
        return []
    if (
        isinstance(instruments, (str, bytes, types.ModuleType, type))
        or not isinstance(instruments, Iterable)
        or marked_hooks(pm, instruments)
    ):
        return [instruments]
    return list(instruments)
