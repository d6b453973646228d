"""The pass registry: discovery through pluggy entry points, lookup, descriptions.

Discovery and loading are kept apart (as in flake8): :func:`discover` lists the entry points of
the ``fxpasses`` group as plain :class:`PluginRecord` records, sorted by distribution and entry
point name; :class:`Registry` then loads each one on its own, so one broken plugin is reported
with its distribution name and version and skipped while every other plugin keeps working
(``strict=True`` turns such a report into an exception).

Environment:
    ``FXPASSES_DISABLE_PLUGIN_AUTOLOAD=1``: load only the built-in passes (and plugins named in
    ``enable``), like pytest's ``PYTEST_DISABLE_PLUGIN_AUTOLOAD``.

Once the plugins are loaded, the registered passes' ``requires``/``after``/``before`` are
checked for ordering cycles (a pass in one, or one requiring a pass in one, can never be used),
and each plugin preset for what would refuse it when it is used (:meth:`Registry.preset_problems`):
each is reported as a plugin problem then, naming the distributions, not first when it is used.

A plugin named in both ``enable`` and ``disable`` is a :class:`~fxpasses.errors.ConfigError`.
When a pass or preset name is unknown and entry points were left unloaded (autoload off, or
disabled), the error names them, why they were not loaded and how to load one; they are not
imported to look (that is what disabling a plugin, or autoload, is for).
"""

from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import difflib
import enum
import gc
import graphlib
import importlib
import importlib.metadata as md
import inspect
import keyword
import os
import re
import sys
import threading
import traceback
import typing
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Collection, Iterable, Iterator, Mapping, Sequence

import pluggy
from pydantic import BaseModel

from . import hookspecs
from ._names import normal_name, not_normal
from ._hookcheck import (
    ALL_HOOKS,
    hook_name_problems,
    instrument_label,
    instrument_list,
    marked_hooks,
    signature_problems,
)
from .errors import (
    exception_message,
    exception_text,
    in_stdlib,
    ConfigError,
    DuplicatePassError,
    PassDefinitionError,
    PassDefinitionWarning,
    PluginError,
    PluginWarning,
    UnknownPassError,
    UserError,
    close_names,
    did_you_mean,
    plugin_label,
    plugin_setting_hint,
    prefer_hint,
    short_repr,
    warn,
)
from .passes import Pass, validate_pass_class

__all__ = [
    "ENTRY_POINT_GROUP",
    "BUILTIN_DISTRIBUTION",
    "PluginRecord",
    "Rejection",
    "PassInfo",
    "PresetInfo",
    "PresetProblem",
    "OptionInfo",
    "PassDescription",
    "Registry",
    "registry",
    "discover",
]

ENTRY_POINT_GROUP = "fxpasses"
BUILTIN_DISTRIBUTION = "fxpasses"
AUTOLOAD_ENV = "FXPASSES_DISABLE_PLUGIN_AUTOLOAD"


@dataclass(frozen=True)
class Rejection:
    """A pass or preset a plugin registered that the registry rejected while loading it.

    ``kind`` is ``"pass"`` or ``"preset"``; ``reason`` is the load-time message (also issued
    as a warning then), quoted again when a pipeline names it.
    """

    kind: str
    name: str
    reason: str


@dataclass
class PluginRecord:
    """One entry point of the ``fxpasses`` group and what became of it.

    ``status`` is ``"found"`` (not loaded yet), ``"loaded"``, ``"partial"``, ``"empty"``,
    ``"failed"`` or ``"disabled"`` (not loaded: ``off`` says why, ``"disabled"`` by
    ``disable``/``-p no:NAME`` or ``"autoload off"``); ``problems`` each problem it had (a failure, or what went
    wrong while it registered: the warnings' texts without the plugin's name) and ``error``
    their first lines, joined with "; "; ``passes`` the names it registered (each once),
    ``presets`` the presets it registered; ``rejected`` the passes and presets it registered that were rejected
    (:class:`Rejection`), so that naming one later says why it is missing.
    """

    distribution: str
    version: str
    name: str
    value: str
    status: str = "found"
    error: str | None = None
    passes: list[str] = field(default_factory=list)
    presets: list[str] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    off: str = ""  # why a "disabled" plugin is not loaded: "disabled" (disable, -p no:NAME) or "autoload off"

    @property
    def entry_point(self) -> str:
        return f"{self.name} = {self.value}"

    @property
    def label(self) -> str:
        return f"{self.distribution} {self.version}"

    @property
    def names(self) -> set[str]:
        """The names ``enable``/``disable``/``-p`` may call it by (distribution or entry
        point), normalised."""
        return {_norm(self.distribution), _norm(self.name)}

    def add_problem(self, message: str) -> None:
        """Record ``message`` among :attr:`problems` (:attr:`error` their first lines) and list
        the plugin as ``partial``: it loaded, but some of what it registers cannot be used."""
        self.problems.append(message)
        self.error = "; ".join(p.splitlines()[0] for p in self.problems)
        self.status = "partial"

    @property
    def plugin_name(self) -> str:
        """The name it is registered under in the pluggy plugin manager."""
        return f"{self.distribution}:{self.name}"

    @property
    def where(self) -> str:
        """``"plugin dist version (entry point name = value)"``, as a :class:`PluginError` names it."""
        return plugin_label(self.distribution, self.version, self._named_entry_point)

    def error_for(self, message: str) -> PluginError:
        """A :class:`~fxpasses.errors.PluginError` about this plugin, naming its distribution,
        version and entry point."""
        return PluginError(
            message, distribution=self.distribution, version=self.version, entry_point=self._named_entry_point
        )

    @property
    def _named_entry_point(self) -> str | None:
        """The entry point messages name; None for a plugin object given to
        :meth:`Registry.register_plugin` (it has none)."""
        return self.entry_point if self.value else None


@dataclass(frozen=True)
class PassInfo:
    """A registered pass: its class and where it came from."""

    name: str
    cls: type[Pass]
    distribution: str
    version: str

    @property
    def source(self) -> str:
        return f"{self.distribution} {self.version}".strip()


@dataclass(frozen=True)
class PresetInfo:
    """A named pipeline: its pipeline string, one-line description and source."""

    name: str
    pipeline: str
    description: str
    distribution: str
    version: str

    @property
    def source(self) -> str:
        return f"{self.distribution} {self.version}".strip()


@dataclass(frozen=True)
class PresetProblem:
    """Why a preset cannot be used as it is (:meth:`Registry.preset_problems`).

    ``message`` says it as the warning when the preset's plugin loads does. Where the problem
    is option values of the preset's pipeline that do not fit their pass (a wrong type, a
    required option left out) and a config's ``[options.NAME]`` table can give those options
    instead (its values replace the preset's), ``pass_name`` is that pass and ``options`` those
    options, as plans name them; else both are empty: nothing a config gives mends it (an
    unknown pass or option name, an ordering cycle).
    """

    message: str
    pass_name: str = ""
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class OptionInfo:
    """One option of a pass: name, type, default (``required`` when it has none), help."""

    name: str
    type: str
    default: Any
    required: bool
    description: str
    constraints: str = ""  # pydantic field constraints, e.g. ">= 1, <= 8"
    #: the fields of an options model this option holds (its type, inside ``Optional``, a
    #: list, tuple, set or dict value), named by their path: ``tiling.size``, ``tiles[].size``
    #: (each item of a list), ``by_name.<key>.size`` (each value of a dict), with the model's
    #: own defaults (what a table given for the option leaves out takes)
    fields: tuple[OptionInfo, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """As ``fxpasses show --format json`` gives it: the default as a config file writes
        it, nested fields too."""
        return {
            **{k: getattr(self, k) for k in ("name", "type", "required", "description", "constraints")},
            "default": config_value(self.default),
            "fields": [f.as_dict() for f in self.fields],
        }


_CONSTRAINT_SYMBOLS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "multiple_of": "multiple of"}


def _constraints(field: Any) -> str:
    """The constraints pydantic checks on an option (``Field(ge=1)``), as ``>= 1``."""
    parts = []
    for m in getattr(field, "metadata", ()):
        items = getattr(m, "__dict__", {}) or {}
        if not items and hasattr(m, "__dataclass_fields__"):
            items = {k: getattr(m, k) for k in m.__dataclass_fields__}
        for key, value in items.items():
            if value is None:
                continue
            symbol = _CONSTRAINT_SYMBOLS.get(key)
            parts.append(f"{symbol} {value!r}" if symbol else f"{key}={value!r}")
    return ", ".join(parts)


@dataclass(frozen=True)
class PassDescription:
    """Everything ``fxpasses show`` prints about a pass."""

    name: str
    summary: str
    doc: str
    kind: str
    options: tuple[OptionInfo, ...]
    requires: tuple[str, ...]
    after: tuple[str, ...]
    before: tuple[str, ...]
    dialects: tuple[str, ...]
    writes_tensors: bool
    #: the pass edits only through torch.fx's editing methods and the context (a journal of
    #: what it touches is its rollback record, and its lint looks at that alone)
    journal_edits: bool
    distribution: str
    version: str
    module: str
    #: :meth:`Registry.order_notes`: ``after``/``before`` names no registered pass has
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        # defaults as a config file writes them (an Enum member as its value, a Path as text)
        d["options"] = [o.as_dict() for o in self.options]
        return d


def discover() -> list[PluginRecord]:
    """The entry points of the ``fxpasses`` group, one record each, sorted, de-duplicated."""
    seen: set[tuple[str, str, str]] = set()
    records = []
    for ep in md.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        dname = dist.metadata["Name"] if dist is not None else "<unknown distribution>"
        version = dist.version if dist is not None else "?"
        key = (_norm(dname), ep.name, ep.value)
        if key in seen:
            continue
        seen.add(key)
        records.append(PluginRecord(dname, version, ep.name, ep.value))
    records.sort(key=lambda r: (_norm(r.distribution) != BUILTIN_DISTRIBUTION, _norm(r.distribution), r.name))
    return records


def _clash_opening(kind: str, name: str) -> str:
    """How every :func:`_clash_problem` of ``kind`` (pass, preset) ``name`` starts."""
    return f"{kind} {name!r} is also registered by"


def _clash_problem(kind: str, name: str, others: Sequence[str]) -> str:
    """The problem of a plugin whose ``kind`` ``name`` the sources ``others`` register too."""
    return f"{_clash_opening(kind, name)} {' and '.join(others)}; neither is used until {prefer_hint(name)} chooses one"


def _taken_by(owners: Sequence[Any], what: str) -> str:
    """``the name is taken by the [built-in ]<what> of <sources>`` (``owners``: PassInfo or
    PresetInfo records holding the name; "built-in" when all are the built-in plugin's)."""
    builtin = all(_norm(o.distribution) == BUILTIN_DISTRIBUTION for o in owners)
    return f"the name is taken by the {'built-in ' if builtin else ''}{what} of {', '.join(o.source for o in owners)}"


_IMPORTLIB_DIR = os.path.dirname(os.path.abspath(importlib.__file__)) + os.sep


def _raised_at(exc: BaseException) -> str:
    """`` (at FILE, line N: CODE)``: where an import raised ``exc`` (the innermost frame of
    its traceback that is neither importlib's nor this module's; for a ``SyntaxError``, the
    place it names), or "" when there is none."""
    if isinstance(exc, SyntaxError):  # its own file and line (the traceback ends in importlib)
        return f" (at {exc.filename}, line {exc.lineno})" if exc.filename and exc.lineno else ""
    here = os.path.abspath(__file__)
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<frozen ")
        and os.path.abspath(f.filename) != here
        # importlib.import_module and EntryPoint.load: an entry point naming a module that
        # does not exist was "at .../importlib/__init__.py, line 126"
        and not os.path.abspath(f.filename).startswith(_IMPORTLIB_DIR)
    ]
    if not frames:
        return ""
    # the plugin's own line, not the standard library's it called (json.loads of bad text
    # raises in json/decoder.py); the innermost frame when all are the library's
    own = [f for f in frames if not in_stdlib(f.filename)]
    f = (own or frames)[-1]
    return f" (at {f.filename}, line {f.lineno}" + (f": {f.line.strip()})" if f.line and f.line.strip() else ")")


_PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")


def _namespace_shadow(module_name: str) -> str:
    """``"; note: ..."`` when ``module_name`` (or a package above it) was imported as a
    namespace package (no ``__init__.py``) from a folder that is a project checkout named
    like the package (its ``pyproject.toml``/``setup.py``/``setup.cfg``, or the package
    inside it): run from the folder above it, Python imports that folder, not the installed
    plugin, whose import then "works" and defines nothing. ``""`` otherwise (a real PEP 420
    namespace package is left alone)."""
    parts = module_name.strip().split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        mod = sys.modules.get(name)
        if mod is None:
            return ""
        if getattr(mod, "__file__", None) is not None or not hasattr(mod, "__path__"):
            continue  # a regular package or module
        for folder in list(getattr(mod, "__path__", ())):
            leaf = parts[i - 1]
            checkout = any(os.path.isfile(os.path.join(folder, f)) for f in _PROJECT_FILES) or any(
                os.path.isfile(os.path.join(folder, *sub, leaf, "__init__.py")) for sub in ((), ("src",))
            )
            if checkout:
                return (
                    f"; note: {name!r} was imported as a namespace package (a folder without __init__.py) from "
                    f"{folder}, a project checkout named like the package, not from the installed distribution: "
                    "Python looks in the working directory (or the script's folder) first, so run from another "
                    "folder, or rename the checkout"
                )
    return ""


def _name_argument(name: Any, method: str, kind: str = "pass") -> str:
    """``name``, checked to be the ``str`` a lookup method of :class:`Registry` takes.

    Raises:
        TypeError: anything else (None, a number, a pass class), naming the method, the value
            and its type: a lookup by any other value has no name to compare, and failed as an
            ``AttributeError`` deep in the lookup (``'NoneType' object has no attribute
            'lower'``), naming neither."""
    if isinstance(name, str):
        return name
    shown = repr(name)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    hint = ""
    if isinstance(name, type) and issubclass(name, Pass) or isinstance(name, Pass):
        cls = name if isinstance(name, type) else type(name)
        hint = (
            f" (a pass class needs no lookup: give it to Pipeline([...]) as it is, or look it up by its "
            f"name, {getattr(cls, 'name', None)!r})"
        )
    elif isinstance(name, bytes):
        hint = f" (decode it first: {name.decode('utf-8', 'replace')!r})"
    raise TypeError(f"Registry.{method} takes a {kind} name (a str), got {shown} of type {type(name).__name__}{hint}")


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


#: the plugin (``"dist version"``) that registered each pass class, but the built-in passes
#: (for messages about a class with no registry at hand: a pipeline's ordering cycle)
_plugin_sources: weakref.WeakKeyDictionary[type, str] = weakref.WeakKeyDictionary()


def plugin_source(cls: Any) -> str | None:
    """``"dist version"`` of the plugin that registered the pass class ``cls`` (into any
    registry), or None: a built-in pass, a class registered from Python, or none."""
    try:
        return _plugin_sources.get(cls)
    except TypeError:  # (not weakly referable: no class)
        return None


def _cycle(graph: Mapping[str, Mapping[str, Any]], names: Collection[str]) -> list[str] | None:
    """A cycle of ``graph`` (``{node: {successor: ...}}``) among ``names``, as its path (first ==
    last, each node before the next), or None (stdlib ``graphlib``, fed in sorted order so
    that the same declarations give the same cycle)."""
    preds: dict[str, list[str]] = {n: [] for n in sorted(names)}
    for u in preds:
        for v in sorted(graph[u]):
            if v in preds:
                preds[v].append(u)
    try:
        graphlib.TopologicalSorter(preds).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])  # each node an immediate predecessor of the next
    return None


def _reach(graph: Mapping[str, Collection[str]], start: str, names: Collection[str]) -> set[str]:
    """The nodes of ``graph`` among ``names`` reachable from ``start`` (itself included)."""
    found = {start}
    stack = [start]
    while stack:
        for v in graph[stack.pop()]:
            if v in names and v not in found:
                found.add(v)
                stack.append(v)
    return found


def _and(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _not_a_plugin(names: Iterable[str]) -> str:
    """For names of installed Python distributions that are not fxpasses plugins (``-p
    pydantic``): a note saying so, else ``""``."""
    from importlib import metadata

    found = []
    for name in sorted(names):
        try:
            metadata.distribution(name)
        except (metadata.PackageNotFoundError, ValueError):
            continue
        found.append(name)
    if not found:
        return ""
    which = ", ".join(found)
    verb = "is an installed package" if len(found) == 1 else "are installed packages"
    return f" ({which} {verb}, but declares no {ENTRY_POINT_GROUP!r} entry point: not an fxpasses plugin)"


def plugin_names_problem(enable: Iterable[str], disable: Iterable[str]) -> str | None:
    """The error message when a plugin name is empty, or a plugin is named both to enable and
    to disable (None if neither)."""
    enable, disable = list(enable), list(disable)
    for names, what in ((enable, "enable (or -p NAME)"), (disable, "disable (or -p no:NAME)")):
        for n in names:
            if not isinstance(n, str) or not n.strip():
                return (
                    f"plugin name {n!r} in {what}: give the name of an installed plugin, its "
                    "distribution's or its entry point's (`fxpasses list` shows them)"
                )
    disabled = {_norm(n) for n in disable}
    both = sorted({n for n in enable if _norm(n) in disabled})
    if not both:
        return None
    which = f"plugin {both[0]!r} is" if len(both) == 1 else f"plugins {', '.join(map(repr, both))} are"
    return (
        f"{which} both enabled (`enable` in the [plugins] config section or Registry(), or -p NAME) and "
        "disabled (`disable`, or -p no:NAME): name each plugin in only one of them"
    )


class Registry:
    """Registered passes by name, loaded from plugins through pluggy.

    Args:
        autoload: load the ``fxpasses`` entry points now (see the module doc for the
            environment variable that limits this to the built-in passes).
        strict: raise :class:`~fxpasses.errors.PluginError` /
            :class:`~fxpasses.errors.DuplicatePassError` instead of reporting and skipping.
        enable: distribution or entry-point names to load even when autoload is disabled.
        disable: distribution or entry-point names never to load (``-p no:NAME``).
        prefer: ``{pass name: distribution}`` choosing the winner when two distributions
            register the same pass name. An entry that chooses nothing (no such distribution
            installed, or it registers no such pass) is a :class:`~fxpasses.errors.ConfigError`
            in ``problems`` (a warning; raised when ``strict``) with a "did you mean".
    """

    def __init__(
        self,
        *,
        autoload: bool = True,
        strict: bool = False,
        enable: Iterable[str] = (),
        disable: Iterable[str] = (),
        prefer: Mapping[str, str] | None = None,
    ) -> None:
        for flag, given in (("autoload", autoload), ("strict", strict)):
            if not isinstance(given, bool):  # Registry(strict="false") was strict
                raise TypeError(f"Registry({flag}=...) takes True or False, got {given!r}")
        problem = plugin_names_problem(enable, disable)
        if problem:
            raise ConfigError(problem)
        self.strict = strict
        self.enable = {_norm(n) for n in enable}
        self.disable = {_norm(n) for n in disable}
        self.prefer = {k: _norm(v) for k, v in (prefer or {}).items()}
        self._prefer_given = dict(prefer or {})  # (as typed, for messages)
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.plugins: list[PluginRecord] = []
        self.problems: list[Exception] = []
        #: labels of plugins that were still being imported when this registry loaded them
        #: (their import built it): see :func:`registry`
        self.half_imported: list[str] = []
        self._passes: dict[str, PassInfo] = {}
        self._conflicts: dict[str, list[PassInfo]] = {}
        # presets two distributions register under one name, until `prefer` chooses one
        self._preset_conflicts: dict[str, list[PresetInfo]] = {}
        self._presets: dict[str, PresetInfo] = {}
        # the ordering cycles reported, by the passes on each (see _check_cycles)
        self._reported_cycles: set[frozenset[str]] = set()
        # the plugin passes reported for a requires no registered pass has (see _check_requires)
        self._reported_requires: set[str] = set()
        # plugins whose instrumentation hooks raised, by id (the objects are kept: a freed
        # object's id could be given to a healthy one)
        self._muted: dict[int, Any] = {}
        if autoload:
            self.load_entry_points()
            for problem in self.problems:
                warn(PluginWarning(str(problem)))

    # ------------------------------------------------------------------ loading

    @property
    def hook(self) -> Any:
        """pluggy's hook relay: ``registry.hook.fxpasses_after_pass(...)``."""
        return self.pm.hook

    def call_instruments(self, hook_name: str, **kwargs: Any) -> None:
        """Call the instrumentation hook ``hook_name`` (``fxpasses_before_pass``,
        ``fxpasses_after_pass``, ``fxpasses_pass_failed``) of every plugin and instrument, in
        pluggy's order.

        A hook implementation that raises (``sys.exit()`` included) is a broken plugin, reported like any other (see
        the class doc): a :class:`~fxpasses.errors.PluginWarning` naming the plugin (its
        distribution and version, or the instrument's class), after which that plugin's
        instrumentation hooks are skipped for the rest of this registry's life; with
        ``strict``, the :class:`~fxpasses.errors.PluginError` is raised instead. The pipeline
        itself goes on either way: an instrument watches passes, it does not decide them.

        Instruments observe: while each hook runs, the graph of ``kwargs["gm"]`` is watched
        (:class:`~fxpasses.journal.GraphWatch`, which says what it sees and what it does not).
        A hook that changed it is a broken plugin too: the graph is put back as it was before
        that hook ran, and the plugin is reported and skipped from then on as above (an
        installed plugin's mistake does not stop every pipeline of the environment).

        Raises:
            PluginError: with ``strict``, a hook implementation raised or changed the graph;
                strict or not, a hook changed the graph in a way that could not be put back
                (the passes after it, and their verification, would work on a graph no pass
                made).
        """
        caller = getattr(self.pm.hook, hook_name)
        impls = caller.get_hookimpls()
        if not impls:
            return
        watch = None
        gm = kwargs.get("gm")
        if gm is not None:
            import torch.fx

            from .journal import GraphWatch

            if isinstance(gm, torch.fx.GraphModule):
                watch = GraphWatch(gm)
        try:
            if any(i.hookwrapper or getattr(i, "wrapper", False) for i in impls):  # pluggy runs those
                raised: BaseException | None = None
                try:
                    caller(**kwargs)
                except (Exception, SystemExit) as exc:  # (sys.exit in a hook is a broken plugin too)
                    raised = exc
                finally:  # (one report of a hook that raised and changed the graph)
                    if not self._check_watch(watch, None, hook_name, kwargs, raised) and raised is not None:
                        self._instrument_failed(None, hook_name, raised)
                return
            for impl in reversed(impls):  # pluggy's call order (last registered first)
                if id(impl.plugin) in self._muted:
                    continue
                raised = None
                try:
                    impl.function(*[kwargs[a] for a in impl.argnames])
                except (Exception, SystemExit) as exc:  # (sys.exit in a hook is a broken plugin too)
                    raised = exc
                finally:
                    if not self._check_watch(watch, impl, hook_name, kwargs, raised) and raised is not None:
                        self._instrument_failed(impl, hook_name, raised)
        finally:
            if watch is not None:
                watch.close()

    def _plugin_label(self, impl: Any) -> tuple[str, str, str | None]:
        """``(distribution or instrument label, version, entry point)`` of a hook
        implementation's plugin (``impl`` None: an unknown one of pluggy's wrapper calls)."""
        if impl is None:
            return "an instrument", "", None
        rec = next((r for r in self.plugins if r.plugin_name == impl.plugin_name), None)
        if rec is not None:
            return rec.distribution, rec.version, rec.entry_point if rec.value else None
        return instrument_label(impl.plugin), "", None  # an instrument given to Pipeline.run

    def _check_watch(
        self, watch: Any, impl: Any, hook_name: str, kwargs: dict[str, Any], raised: BaseException | None = None
    ) -> bool:
        """When the hook just called changed the watched graph: undo it, then report the
        plugin as :meth:`_instrument_failed` does (a warning, the plugin skipped from now on;
        strict: raised), or raise when the graph could not be put back; with what the hook
        ``raised``, if it did, in the same report. Returns whether it reported."""
        if watch is None:
            return False
        what = watch.change()
        if what is None:
            return False
        undone = watch.restore()
        label, version, entry_point = self._plugin_label(impl)
        when = {"fxpasses_before_pass": "before pass {}", "fxpasses_pass_failed": "after pass {} failed"}
        where = f" ({when.get(hook_name, 'after pass {}').format(repr(kwargs['pass_name']))})" if "pass_name" in kwargs else ""
        mute = undone and impl is not None and not self.strict
        did = f"raised {exception_text(raised)} and changed" if raised is not None else "changed"
        err = PluginError(
            f"its {hook_name} hook {did} the graph{where}: {what}. Instruments observe passes and "
            "must not change the graph (write a pass for that: it is verified and rolled back); "
            + (
                "the graph was put back as it was before the hook ran"
                if undone
                else "the graph was put back as far as it could be, but it still differs from before the hook"
            )
            + ("; its instrumentation hooks are skipped from now on" if mute else ""),
            distribution=label,
            version=version,
            entry_point=entry_point,
        )
        err.__cause__ = raised
        if not undone or self.strict:
            raise err
        if mute:
            self._muted[id(impl.plugin)] = impl.plugin
        warn(PluginWarning(str(err)))
        return True

    def _instrument_failed(self, impl: Any, hook_name: str, exc: BaseException) -> None:
        label, version, entry_point = self._plugin_label(impl)
        if impl is not None and not self.strict:  # strict: an error each time, never silently skipped
            self._muted[id(impl.plugin)] = impl.plugin
        err = PluginError(
            f"its {hook_name} hook raised {exception_text(exc)}"
            + ("" if self.strict else "; its instrumentation hooks are skipped from now on"),
            distribution=label,
            version=version,
            entry_point=entry_point,
        )
        err.__cause__ = exc
        if self.strict:
            raise err
        warn(PluginWarning(str(err)))

    @contextlib.contextmanager
    def instrumented(self, instruments: Any) -> Iterator[list[Any]]:
        """Register ``instruments`` (a list or tuple of them, or one) for the block: each is
        checked (:meth:`check_instrument`) before any is registered, and all are unregistered
        at the end. Yields the list.

        Raises:
            PluginError: an instrument is malformed (see :meth:`check_instrument`), given
                twice, or already one of the registry's plugins.
        """
        items = instrument_list(self.pm, instruments)
        seen: dict[int, Any] = {}
        for inst in items:
            if id(inst) in seen:
                raise PluginError(
                    "is given twice in instruments=[...]; give each instrument once",
                    distribution=instrument_label(inst),
                    version="",
                )
            seen[id(inst)] = inst
            self.check_instrument(inst)
        registered: list[Any] = []
        try:
            for inst in items:
                self._register_instrument(inst)
                registered.append(inst)
            yield items
        finally:
            for inst in registered:
                self.pm.unregister(inst)

    def check_instrument(self, obj: Any) -> None:
        """Check that ``obj`` is an instrument: an object (or module) with at least one
        ``@fxpasses.hookimpl`` method for an instrumentation hook
        (:data:`~fxpasses.hookspecs.INSTRUMENT_HOOKS`), none marked for another name, none
        named after a hook (or close to one, e.g. ``after_pas``) without the marker, each
        taking only arguments its hook passes, none with default values.

        Raises:
            PluginError: naming the instrument (``plugin instrument NAME: ...``) and each bad
                method, with the hook names it could mean and the arguments a hook passes.
        """
        hooks = hookspecs.INSTRUMENT_HOOKS
        label = instrument_label(obj)
        marked = marked_hooks(self.pm, obj)
        if isinstance(obj, type) and marked:
            raise PluginError(
                f"is a class, not an instance: give {obj.__name__}(...) in instruments=[...]",
                distribution=label,
                version="",
            )
        problems = hook_name_problems(self.pm, obj, hooks) + signature_problems(self.pm, obj)
        try:
            self._check_hookimpl_defaults(obj)
        except PassDefinitionError as exc:
            problems.append(str(exc))
        if problems:
            raise PluginError(
                "bad instrument hook(s):\n" + "\n".join(f"  {p}" for p in problems),
                distribution=label,
                version="",
            )
        if not any(n in hooks for n in marked):
            raise PluginError(
                f"{short_repr(obj)} is not an instrument: it has no @fxpasses.hookimpl method "
                f"{', '.join(hooks)} (an instrument is e.g. fxpasses.instruments.PrintChanged(); "
                "give one, or several in a list)",
                distribution=label,
                version="",
            )

    def _register_instrument(self, inst: Any) -> None:
        """``pm.register`` an instrument :meth:`check_instrument` passed, pluggy's own errors
        (a hook it validates otherwise, already registered as a plugin) named as ours."""
        label = instrument_label(inst)
        if self.pm.is_registered(inst):
            raise PluginError(
                f"is already a plugin of this registry (as {self.pm.get_name(inst)!r}, through "
                "Registry.register_plugin or an entry point): its hooks run in every run already; "
                "do not give it in instruments=[...] as well",
                distribution=label,
                version="",
            )
        try:
            self.pm.register(inst)
        except (pluggy.PluginValidationError, ValueError) as exc:
            detail = str(exc).split("\n", 1)[-1].strip() if isinstance(exc, pluggy.PluginValidationError) else str(exc)
            raise PluginError(f"pluggy rejects it: {detail}", distribution=label, version="") from exc

    def load_entry_points(self) -> None:
        """Load every ``fxpasses`` entry point not loaded yet (see the class doc).

        The cyclic garbage collector is paused while plugins load: importing them imports
        torch (about a million objects), and every collection triggered by the allocations of
        the imports would scan all of them again (a fifth of ``fxpasses list``'s start-up).
        """
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._load_entry_points()
        finally:
            if was_enabled:
                gc.enable()

    def _load_entry_points(self) -> None:
        autoload = os.environ.get(AUTOLOAD_ENV, "").strip() not in ("1", "true", "yes")
        loaded = {(r.distribution, r.name) for r in self.plugins}
        for rec in discover():
            if (rec.distribution, rec.name) in loaded:
                continue
            names = rec.names
            builtin = _norm(rec.distribution) == BUILTIN_DISTRIBUTION
            self.plugins.append(rec)
            if names & self.disable and names & self.enable:  # one plugin under two of its names
                on, off = sorted(names & self.enable)[0], sorted(names & self.disable)[0]
                raise ConfigError(
                    f"plugin {rec.distribution!r} (entry point {rec.name!r}) is both enabled (as {on!r}: "
                    f"`enable` in the [plugins] config section or Registry(), or -p {on}) and disabled (as {off!r}: "
                    f"`disable`, or -p no:{off}): name each plugin in only one of them"
                )
            if names & self.disable:
                rec.status, rec.off = "disabled", "disabled"
                continue
            if not (autoload or builtin or names & self.enable):
                rec.status, rec.off = "disabled", "autoload off"
                continue
            self._load_record(rec)
        self._check_prefer()
        self._mark_conflicts()
        graph = self._check_cycles()
        self._check_requires()
        self._check_presets(graph)
        known = {n for r in self.plugins for n in r.names}
        for name in sorted(self.disable - known):
            # `-p no:typo` would otherwise disable nothing, silently (pytest warns alike)
            self._problem(
                PluginError(
                    "disabled with disable/-p no:NAME but no installed plugin has that name; installed: "
                    + (", ".join(sorted({r.distribution for r in self.plugins})) or "(none)")
                    + did_you_mean(difflib.get_close_matches(name, sorted(known), n=2, cutoff=0.6)),
                    distribution=name,
                    version="",
                )
            )
        missing = self.enable - known
        if missing:
            # asked for by name: an error even without strict mode (as pytest's `-p NAME`)
            installed = sorted({r.distribution for r in self.plugins})
            # worded as the other plugin-name errors: "...; installed: ...; did you mean ...?"
            # among every name a plugin answers to (its distribution's, its entry point's), as
            # for `-p no:NAME` above
            # (not the built-in passes' distribution, always loaded: `acme-passes` was "did you
            # mean 'fxpasses'?")
            plugins = sorted(known - {BUILTIN_DISTRIBUTION})
            close = sorted({m for n in missing for m in difflib.get_close_matches(n, plugins, n=2, cutoff=0.6)})
            raise PluginError(
                f"requested with enable/-p but not installed; installed: {', '.join(installed) or '(none)'}"
                + did_you_mean(close)
                + _not_a_plugin(missing),
                distribution=", ".join(sorted(missing)),
                version="",
            )

    def _mark_conflicts(self) -> None:
        """Each plugin with a pass or preset that no one uses because another plugin registers
        that name too (``prefer`` chose none) is ``partial``, with that in its ``problems``: the
        problem was reported with the plugin that came second, the first showed ``loaded``."""
        for kind, conflicts, table in (("pass", self._conflicts, self._passes), ("preset", self._preset_conflicts, self._presets)):
            for name, infos in conflicts.items():
                if name in table:  # prefer chose one
                    continue
                for info in infos:
                    problem = _clash_problem(kind, name, [i.source for i in infos if i is not info])
                    for rec in self.plugins:
                        if rec.distribution != info.distribution or rec.status not in ("loaded", "partial"):
                            continue
                        if name not in (rec.passes if kind == "pass" else rec.presets):
                            continue  # another entry point of that distribution: not its problem
                        if not any(_clash_opening(kind, name) in p for p in rec.problems):
                            rec.add_problem(problem)
                        rec.status = "partial"

    def _check_presets(self, graph: dict[str, dict[str, tuple[str, str]]]) -> None:
        """Report presets that would be refused when used (kept: the error when one is used
        says the same, with its place): naming passes no installed plugin registers, naming
        passes that require such passes or that cannot be ordered (``graph``:
        :meth:`_ordering_graph`), or, for a plugin's preset, giving options that do not fit
        their passes (``fold_constants{max_numel=abc}``); :meth:`preset_problems` tells each.

        A name that a plugin left unloaded (disabled, or autoload off) may register is not the
        preset's fault: the preset is only unusable while that plugin is not loaded, and the
        error when it is used says so (see :meth:`_not_loaded_hint`). The built-in passes'
        names are known without loading them; another plugin that was not loaded is never
        imported to look, so while one is, no preset is reported here. A name two plugins
        register is reported as their clash. The built-in presets' options are the test
        suite's to check (not each start-up's)."""
        builtin_off = self._builtin_names_not_loaded()
        others_off = any(
            r.status == "disabled" and _norm(r.distribution) != BUILTIN_DISTRIBUTION for r in self.plugins
        )
        if others_off:
            return
        skip = builtin_off | set(self._conflicts)
        for info in self._presets.values():
            builtin = _norm(info.distribution) == BUILTIN_DISTRIBUTION
            for problem in self._preset_problems(info, graph, skip=skip, options=not builtin):
                self._problem(PluginError(problem.message, distribution=info.distribution, version=info.version))

    def preset_problems(self, name: str) -> list[PresetProblem]:
        """Why the preset ``name`` would be refused if used with this registry as it is now,
        one :class:`PresetProblem` each; [] when it can be used. The check that reports a
        plugin's preset as it loads (:meth:`_check_presets`), made in full: its pipeline
        names a pass no loaded plugin registers (or one its plugin registered but had rejected,
        a preset's name, or a name two plugins register that no ``prefer`` chose); or an
        option that does not fit its pass's ``Options`` (as :class:`~fxpasses.errors.OptionsError`
        words it; the built-in presets' too); or a pass whose ``requires`` names such a pass;
        or its passes, with those they require, form an ordering cycle.

        Raises:
            UnknownPassError: no preset ``name`` (as :meth:`preset`).
            DuplicatePassError: two plugins register a preset ``name`` and no ``prefer`` chose.
            TypeError: ``name`` is not a ``str``.
        """
        return self._preset_problems(self.preset(_name_argument(name, "preset_problems", "preset")), self._ordering_graph())

    def _preset_problems(
        self,
        info: PresetInfo,
        graph: dict[str, dict[str, tuple[str, str]]],
        *,
        skip: Collection[str] = (),
        options: bool = True,
    ) -> list[PresetProblem]:
        """:meth:`preset_problems` of ``info``, leaving the pass names in ``skip`` out (taken
        as fine), its options unchecked unless ``options``."""
        from .spec import parse_pipeline_string, pass_entries

        entries = pass_entries(parse_pipeline_string(info.pipeline))  # (a group's passes in place)
        names = list(dict.fromkeys(e.name for e in entries))
        missing = [n for n in names if n not in self._passes and n not in skip]
        if missing:
            return [PresetProblem(f"preset {info.name!r} names " + self._missing_text(missing))]
        problems = []
        if options:
            for e in entries:
                problems += self._preset_options_problems(info, e)
        # what its passes require is pulled in when it is used, and ordered with them
        pulled, unknown = self._requires_closure([n for n in names if n in self._passes], skip)
        problems += [
            PresetProblem(f"preset {info.name!r} names {by!r}, which requires " + self._missing_text(required))
            for by, required in unknown.items()
        ]
        cycle = _cycle(graph, pulled)
        if cycle is not None:
            problems.append(
                PresetProblem(
                    f"preset {info.name!r} cannot be ordered: pass ordering cycle: {' -> '.join(cycle)} "
                    f"(because: {self._cycle_reasons(graph, cycle)})"
                )
            )
        return problems

    def _missing_text(self, missing: Sequence[str]) -> str:
        """What the pass names ``missing`` are, as a preset's problem says it: names no plugin
        registers, a plugin's rejected pass, a preset's name, a name two plugins register."""
        rejected = [n for n in missing if self.rejected(n)]
        presets = [n for n in missing if n in self._presets and n not in rejected]
        clashes = [n for n in missing if n in self._conflicts and n not in rejected and n not in presets]
        registered = [n for n in missing if n not in rejected and n not in presets and n not in clashes]
        # (a name a plugin that was not loaded has, or may have, is "no loaded plugin"'s)
        unloaded = bool(set(registered) & self._builtin_names_not_loaded()) or any(
            r.status == "disabled" and _norm(r.distribution) != BUILTIN_DISTRIBUTION for r in self.plugins
        )
        # each with the registered names close to it (eliminate_dead_cod: eliminate_dead_code)
        spelled = [
            n + (f" (did you mean {' or '.join(map(repr, near))}?)" if (near := close_names(n, self._passes, n=2)) else "")
            for n in registered
        ]
        parts = (
            [f"pass(es) no {'loaded' if unloaded else 'installed'} plugin registers: {', '.join(spelled)}"]
            if registered
            else []
        )
        parts += [f"pass {n!r}, {self._rejected_clause(n)}" for n in rejected]
        parts += [f"{n!r}, which is a preset: a preset's pipeline names passes, not presets" for n in presets]
        parts += [
            f"pass {n!r}, which {' and '.join(c.source for c in self._conflicts[n])} each register "
            f"(choose one with {prefer_hint(n)})"
            for n in clashes
        ]
        return "; and ".join(parts)

    def _rejected_clause(self, name: str) -> str:
        """``"which dist 1.0 registered but which was rejected as it loaded (see its warning)"``:
        what a pass name ``name`` that plugins registered but the registry rejected is, as a
        preset's or a ``requires``' problem says it."""
        labels = ", ".join(sorted({r.label for r, _ in self.rejected(name)}))
        return f"which {labels} registered but which was rejected as it loaded (see its warning)"

    def _preset_options_problems(self, info: PresetInfo, entry: Any) -> list[PresetProblem]:
        """The problem of the options ``entry`` (of preset ``info``'s pipeline) gives its pass,
        if they do not fit its ``Options`` (unknown keys, wrong types:
        ``fold_constants{max_numel=abc}``, a required option left out), worded as using the
        preset words it; with the options a config's table could give instead, unless a key is
        no option of the pass, or two keys give one option (no table takes those away)."""
        from .config import _field_by_key, validate_options
        from .errors import OptionsError

        registered = self._passes.get(entry.name)
        if registered is None:
            return []
        if not entry.options and not any(f.is_required() for f in registered.cls.Options.model_fields.values()):
            return []  # (the defaults were validated when the pass was registered)
        try:
            keys = set(entry.options)  # a pipeline string's: a bare word may have been read as other than text
            validate_options(entry.name, registered.cls.Options, entry.options, f"preset {info.name!r}", keys, string_keys=keys)
        except OptionsError as exc:
            fields = _field_by_key(registered.cls.Options)
            given = [fields.get(k) for k in entry.options]
            bad = {fields.get(str(path).split(".")[0]) for path, _, _ in exc.problems}
            if None in given or len(set(given)) < len(given) or None in bad:
                return [PresetProblem(str(exc))]
            model = registered.cls.Options.model_fields
            return [PresetProblem(str(exc), entry.name, tuple(model[f].alias or f for f in sorted(bad, key=str)))]
        return []

    def _check_prefer(self) -> None:
        """Report ``prefer`` entries that choose nothing (a typo would otherwise pass silently)."""
        installed = sorted({_norm(r.distribution) for r in self.plugins})
        for name, dist in self.prefer.items():
            typed = self._prefer_given.get(name, dist)
            registering = sorted(
                {
                    _norm(c.distribution)
                    for c in (
                        *self._conflicts.get(name, ()),
                        *([self._passes[name]] if name in self._passes else []),
                        *self._preset_conflicts.get(name, ()),
                        *([self._presets[name]] if name in self._presets else []),
                    )
                    if c.distribution
                }
            )
            records = [r for r in self.plugins if _norm(r.distribution) == dist]
            if dist not in installed:
                problem = f"prefer = {{{name} = {typed!r}}}: no distribution {typed!r} is installed" + did_you_mean(
                    difflib.get_close_matches(dist, installed, n=2, cutoff=0.6)
                )
            elif dist not in registering and all(r.status == "disabled" for r in records):
                why = records[0].off or "disabled"
                how = (
                    f'give enable = ["{typed}"] in [plugins], or -p {typed}'
                    if why == "autoload off"
                    else f"it is disabled ([plugins] disable or -p no:{typed})"
                )
                problem = (
                    f"prefer = {{{name} = {typed!r}}}: {typed!r} is installed but not loaded ({why}), so it "
                    f"registers nothing here: {how}"
                )
            elif dist not in registering:
                # the names that distribution registers (its entry points' records): a misspelt
                # key is one of them
                own = sorted({n for r in self.plugins if _norm(r.distribution) == dist for n in (*r.passes, *r.presets)})
                problem = f"prefer = {{{name} = {typed!r}}}: {typed!r} registers no pass or preset {name!r}" + (
                    f" (registered by {', '.join(map(repr, registering))})" if registering else " (no plugin registers it)"
                ) + did_you_mean(close_names(name, own))
            else:
                continue
            self._problem(ConfigError(problem, source="[plugins]"))

    def _load_record(self, rec: PluginRecord) -> None:
        outer = getattr(_loading, "building", False)
        _loading.building = True  # (a plugin's import calling fxpasses.registry() is refused)
        try:
            self._load_record_now(rec)
        finally:
            _loading.building = outer

    def _load_record_now(self, rec: PluginRecord) -> None:
        module_name, _, attr = rec.value.partition(":")
        if _imported_by_this_thread(module_name.strip()):
            # its import is what is loading this registry (it calls fxpasses.registry() at
            # import time): importing it again gives the half-run module, without its hooks
            self.half_imported.append(rec.label)
            self._fail(
                rec,
                f"was still being imported when the registry loaded it: its module {module_name.strip()!r} builds a "
                "registry as it is imported (fxpasses.registry() at import time?), so its hooks were not defined yet; "
                "register passes in its fxpasses_register_passes hook, not at import time",
                None,
            )
            return
        try:
            obj: Any = importlib.import_module(module_name.strip())
            for part in filter(None, attr.strip().split(".")):
                obj = getattr(obj, part)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - a plugin may even sys.exit() on import
            # a SyntaxError's str() ends with its (file, line), which _raised_at gives in full
            said = exc.msg if isinstance(exc, SyntaxError) and exc.msg else exc
            shadow = _namespace_shadow(module_name)
            self._fail(rec, f"import failed: {type(exc).__name__}: {said}{_raised_at(exc)}{shadow}", exc)
            return
        self._register_plugin_object(obj, rec)

    def register_plugin(self, plugin: Any, name: str | None = None) -> PluginRecord:
        """Register a plugin object (module or instance with ``@hookimpl`` functions).

        Its ``fxpasses_register_passes`` hook runs at once. Returns the plugin's record;
        problems are reported as for entry points (an ordering cycle its passes make with the
        registered ones too).
        """
        label = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        rec = PluginRecord(label, "", label, f"{getattr(plugin, '__module__', '')}")
        self.plugins.append(rec)
        self._register_plugin_object(plugin, rec)
        self._check_cycles()
        self._check_requires()
        return rec

    def _register_plugin_object(self, obj: Any, rec: PluginRecord) -> None:
        plugin_name = rec.plugin_name
        try:
            self._check_hookimpl_defaults(obj)
            self.pm.register(obj, name=plugin_name)
        except Exception as exc:
            detail = exception_message(exc)
            if isinstance(exc, pluggy.PluginValidationError):  # named by method, not by pluggy's plugin id
                detail = "; ".join(signature_problems(self.pm, obj)) or detail
            # a misspelt or unmarked hook beside it is said now too, not once this is fixed
            also = hook_name_problems(self.pm, obj, ALL_HOOKS)
            self._fail(rec, f"invalid hook implementation: {detail}" + "".join(f"; also: {p}" for p in also), exc)
            return
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            self.pm.unregister(obj)
            detail = "; ".join(hook_name_problems(self.pm, obj, ALL_HOOKS, unmarked=False)) or str(exc)
            unmarked = [p for p in hook_name_problems(self.pm, obj, ALL_HOOKS) if p not in detail]
            self._fail(rec, f"unknown hook: {detail}" + "".join(f"; also: {p}" for p in unmarked), exc)
            return
        impls = [
            impl
            for impl in self.pm.hook.fxpasses_register_passes.get_hookimpls()
            if impl.plugin is obj
        ]
        added: list[str] = []
        offered: list[Any] = []  # what the plugin registered, each object once (kept: ids stay theirs)

        def register(pass_cls: type) -> None:
            if any(o is pass_cls for o in offered):  # the same class (or bad object) twice: once
                return
            offered.append(pass_cls)
            info = self._add(pass_cls, rec)
            if info is not None and info.cls is pass_cls and _norm(info.distribution) != BUILTIN_DISTRIBUTION:
                _plugin_sources[pass_cls] = info.source  # (an ordering cycle's message names it)
            if info is not None and info.name not in added:
                added.append(info.name)

        presets: list[str] = []

        def register_preset(name: str, pipeline: str, description: str) -> None:
            # a malformed preset is skipped on its own, as a malformed pass is: the plugin's
            # passes and other presets stay registered
            why = None
            if not isinstance(name, str) or not name.isidentifier():
                why = f"a preset name must be an identifier, got {short_repr(name)}"
                shown = name if isinstance(name, str) and name else f"<{short_repr(name)}>"
            elif keyword.iskeyword(name):  # as pass names (validate_pass_class)
                why = f"a preset name must be an identifier that is not a Python keyword, got {name!r}"
                shown = name
            elif not_normal(name):
                why = f"the name is {not_normal(name)}"
                shown = name
            elif not isinstance(pipeline, str) or not pipeline.strip():
                why = f"the pipeline must be a non-empty pipeline string, got {short_repr(pipeline)}"
                shown = name
            if why is not None:
                self._reject(rec, "preset", shown, why)
                self._problem(rec.error_for(f"preset {short_repr(name)} {self._skipped}: {why}"))
                return
            from .spec import parse_pipeline_string

            try:  # a syntax error is the plugin's, reported now rather than when the preset is used
                parse_pipeline_string(pipeline)
            except ConfigError as exc:
                why = f"its pipeline {pipeline!r} is malformed: {exc.detail}"
                self._reject(rec, "preset", name, why)
                self._problem(rec.error_for(f"preset {name!r} {self._skipped}: {why}"))
                return
            why = self._taken_by_other_kind(name, "preset")
            if why is not None:  # a pass's name (see _add for a pass named like a preset)
                if self._reject(rec, "preset", name, why):
                    self._problem(rec.error_for(f"preset {name!r} {self._skipped}: {why}"))
                return
            # (no description: "", not the text "None")
            info = PresetInfo(name, pipeline, "" if description is None else str(description), rec.distribution, rec.version)
            if self._add_preset(info, rec) and name not in presets:  # (registered again: once)
                presets.append(name)

        calls = [
            (impl, {"register": register})
            for impl in impls
        ] + [
            (impl, {"register": register_preset})
            for impl in self.pm.hook.fxpasses_register_presets.get_hookimpls()
            if impl.plugin is obj
        ]
        problems_before = len(self.problems)
        for impl, kwargs in calls:
            try:
                impl.function(**kwargs)
            except (DuplicatePassError, PluginError):
                raise  # only raised in strict mode, already naming the distribution
            except (Exception, SystemExit) as exc:  # (a registration hook's sys.exit: a broken plugin too)
                message = f"{impl.function.__name__} raised {exception_text(exc)}{_raised_at(exc)}"
                for n in added:  # all or nothing: a half-registered plugin is skipped whole
                    self._remove(n, rec.distribution)
                    self._reject(rec, "pass", n, f"dropped with the whole plugin: {message}")
                for n in presets:
                    self._presets.pop(n, None)
                    self._reject(rec, "preset", n, f"dropped with the whole plugin: {message}")
                # a misspelt or unmarked hook beside it would never run either: said now, not
                # only once the raising hook is fixed
                near = [p for p in hook_name_problems(self.pm, obj, ALL_HOOKS) if p.startswith(hookspecs.PREFIX)]
                self.pm.unregister(obj)
                self._fail(rec, message + "".join(f"; also: {p}" for p in near), exc)
                return
        rec.passes = added
        rec.presets = presets
        if not self.pm.get_hookcallers(obj):
            rec.status = "empty"
            near = hook_name_problems(self.pm, obj, ALL_HOOKS)  # unmarked functions named like hooks
            shadow = _namespace_shadow(obj.__name__) if inspect.ismodule(obj) else ""
            self._fail(
                rec,
                "implements no fxpasses hook (nothing was loaded from it)" + "".join(f"; {p}" for p in near) + shadow,
                None,
            )
            rec.status = "empty"
            return
        # beside marked hooks, a function named exactly after a hook but not marked is never
        # called either: reported as when it is the plugin's only one; so is an unmarked
        # fxpasses_* name close to a hook's (fxpasses_register_pass). Other near names
        # (register_passes) may be the plugin's own helpers, called by its hooks
        near = hook_name_problems(self.pm, obj, ALL_HOOKS)
        unmarked = [p for p in near if p.split(" ", 1)[0] in ALL_HOOKS]
        misspelled = [p for p in near if p.split(" ", 1)[0] not in ALL_HOOKS and p.startswith(hookspecs.PREFIX)]
        if unmarked:
            self._problem(rec.error_for("unmarked hook: " + "; ".join(unmarked)))
        if misspelled:
            self._problem(rec.error_for("misspelled hook: " + "; ".join(misspelled)))
        n_problems = len(self.problems) - problems_before
        if n_problems:
            # (instrument hooks that are marked run whatever else is wrong: partial, not failed)
            instruments = any(h.name in hookspecs.INSTRUMENT_HOOKS for h in self.pm.get_hookcallers(obj) or ())
            rec.status = "partial" if added or presets or instruments else "failed"
            # the problems themselves (list --format json shows them), without the plugin's
            # name that each warning starts with
            label = str(rec.error_for(""))
            rec.problems = [str(p)[len(label):] if str(p).startswith(label) else str(p) for p in self.problems[problems_before:]]
            rec.error = "; ".join(p.splitlines()[0] for p in rec.problems)
        else:
            rec.status = "loaded"

    @staticmethod
    def _reject(rec: PluginRecord, kind: str, name: Any, reason: str) -> bool:
        """Keep why ``rec``'s pass or preset ``name`` was not registered (see
        :meth:`Registry.rejected`); a name that is not a string cannot be asked for. Returns
        False when ``rec`` already has that very rejection (registered twice: kept once)."""
        if not isinstance(name, str):
            return True
        rejection = Rejection(kind, name, reason)
        if rejection in rec.rejected:
            return False
        rec.rejected.append(rejection)
        return True

    def _taken_by_other_kind(self, name: str, kind: str) -> str | None:
        """Why a plugin's pass (``kind="pass"``) named like a registered preset, or its preset
        (``"preset"``) named like a registered pass, is skipped; None when the name is free.

        Pass and preset names share one namespace (a preset name is not a pass name): were a
        name both, ``Pipeline.from_string(name)``, ``preset = "name"`` and ``fxpasses show
        name`` would each pick one of them silently. The one registered first keeps the name
        (the built-in plugin loads first, so a built-in name is never taken over)."""
        if kind == "pass":
            owners: list[Any] = [self._presets[name]] if name in self._presets else []
            other = "preset"
        else:
            owners = self.candidates(name)
            other = "pass" if len(owners) <= 1 else "passes"
        if not owners:
            return None
        return f"{_taken_by(owners, other)} (pass and preset names share one namespace; rename the plugin's {kind})"

    @staticmethod
    def _check_hookimpl_defaults(obj: Any) -> None:
        for attr in dir(obj):
            if not attr.startswith("fxpasses_"):
                continue
            fn = getattr(obj, attr, None)
            if not callable(fn):
                continue
            try:
                params = inspect.signature(fn).parameters.values()
            except (TypeError, ValueError):
                continue
            defaulted = [p.name for p in params if p.default is not inspect.Parameter.empty]
            if defaulted:
                raise PassDefinitionError(
                    f"hook {attr} gives a default to {', '.join(defaulted)}; pluggy does not pass "
                    "arguments that have defaults, so remove the defaults"
                )

    def _fail(self, rec: PluginRecord, message: str, cause: BaseException | None) -> None:
        rec.status = "failed"
        rec.error = message
        rec.problems = [message]
        err = rec.error_for(message)
        if cause is not None:
            err.__cause__ = cause
        self._problem(err)

    @property
    def _skipped(self) -> str:
        """What happens to a plugin's malformed or clashing pass or preset, in its message."""
        return "refused (strict mode)" if self.strict else "skipped"

    def _problem(self, err: Exception) -> None:
        if self.strict:
            raise err
        self.problems.append(err)

    def _ordering_graph(self) -> dict[str, dict[str, tuple[str, str]]]:
        """The registered passes' ordering declarations about each other: for each pass, the
        passes that must run after it when both are in a pipeline (that require it or declare
        ``after`` it, or that it declares ``before``), each with the pass that declares it and
        how, as an ordering cycle's reason words it (``("cyc_a", "requires cyc_b")``). A name
        no registered pass has orders nothing (:meth:`order_notes`)."""
        graph: dict[str, dict[str, tuple[str, str]]] = {n: {} for n in self._passes}
        for name, info in self._passes.items():
            cls = info.cls
            for other in getattr(cls, "requires", ()):
                if other in graph and other != name:
                    graph[other].setdefault(name, (name, f"requires {other}"))
            for other in getattr(cls, "after", ()):
                if other in graph and other != name:
                    graph[other].setdefault(name, (name, f"declares after = {other}"))
            for other in getattr(cls, "before", ()):
                if other in graph and other != name:
                    graph[name].setdefault(other, (name, f"declares before = {other}"))
        return graph

    def _requires_closure(self, names: Iterable[str], skip: Collection[str] = ()) -> tuple[set[str], dict[str, list[str]]]:
        """``(names with the registered passes they require, transitively; {pass: the names it
        requires that no registered pass has, but for those in skip}``): a pipeline holding
        ``names`` pulls the first in, and is refused for the second."""
        found = set(names)
        stack = list(found)
        unknown: dict[str, list[str]] = {}
        while stack:
            for r in getattr(self._passes[stack.pop()].cls, "requires", ()):
                if r in self._passes and r not in found:
                    found.add(r)
                    stack.append(r)
        for n in sorted(found):
            missing = [r for r in getattr(self._passes[n].cls, "requires", ()) if r not in self._passes and r not in skip]
            if missing:
                unknown[n] = missing
        return found, unknown

    def _cycle_reasons(self, graph: dict[str, dict[str, tuple[str, str]]], cycle: Sequence[str]) -> str:
        """The declaration behind each arrow of ``cycle`` (a path of ``graph``, first == last),
        each declaring pass named with the plugin that registered it."""
        from .ordering import with_plugin

        return "; ".join(with_plugin(who, how, self._passes[who].cls) for who, how in (graph[u][v] for u, v in zip(cycle, cycle[1:])))

    def _check_cycles(self) -> dict[str, dict[str, tuple[str, str]]]:
        """Report each ordering cycle among the registered passes' ``requires``, ``after`` and
        ``before`` (:meth:`_ordering_graph`; once each, by the passes on it) as a problem of the
        plugins that registered the passes declaring it: the passes on it cannot all be in one
        pipeline, and a pass whose ``requires`` pull in a whole cycle (``cyc_a`` requires
        ``cyc_b``, which requires ``cyc_a``) can never be used. Their plugins are ``partial``.
        Only the passes' declarations are read (nothing is imported or instantiated). Returns
        the graph."""
        graph = self._ordering_graph()
        left = set(graph)
        reverse: dict[str, set[str]] = {n: set() for n in graph}
        for u, succ in graph.items():
            for v in succ:
                reverse[v].add(u)
        while True:
            cycle = _cycle(graph, left)
            if cycle is None:
                return graph
            # the passes on a cycle with it (its strongly connected component): one report
            on = _reach(graph, cycle[0], left) & _reach(reverse, cycle[0], left)
            left -= on
            if frozenset(on) in self._reported_cycles:
                continue
            self._reported_cycles.add(frozenset(on))
            never = sorted(
                n for n in graph if (pulled := self._requires_closure([n])[0]) & on and _cycle(graph, pulled & on) is not None
            )
            together = sorted(on - set(never))
            said = []
            if together:
                # the cycle's own passes; others of its component are on other cycles through them
                others = sorted(on - set(cycle))
                said.append(
                    f"{_and(sorted(set(cycle)))} cannot all be in one pipeline"
                    + (f", nor with them {_and(others)} (on other cycles through them)" if others else "")
                )
            if never:
                it = "it" if len(never) == 1 else "one"
                said.append(
                    f"{_and(never)} can never be used (a pipeline holding {it} pulls in the passes it requires, "
                    "and with them the cycle)"
                )
            message = (
                f"pass ordering cycle: {' -> '.join(cycle)} (because: {self._cycle_reasons(graph, cycle)}): "
                f"{'; '.join(said)}; fix their requires, after and before"
            )
            declaring = list(dict.fromkeys(self._passes[graph[u][v][0]] for u, v in zip(cycle, cycle[1:])))
            # the built-in passes order themselves without a cycle: one through them is made by
            # the plugins that declare its other arrows
            declaring = [i for i in declaring if i.distribution != BUILTIN_DISTRIBUTION] or declaring
            sources = sorted({(i.distribution, i.version) for i in declaring}, key=lambda s: (_norm(s[0]), s[1]))
            # listed as partial: the plugins whose passes declare the cycle, or cannot be used
            # (not one whose pass another plugin's declarations put on it: the built-in passes)
            blamed = {i.name for i in declaring} | set(never)
            for rec in self.plugins:
                if rec.status in ("loaded", "partial") and set(rec.passes) & blamed:
                    rec.add_problem(message)
            if len(sources) == 1:
                self._problem(PluginError(message, distribution=sources[0][0], version=sources[0][1]))
            else:
                self._problem(PluginError(message, distribution=" and ".join(f"{d} {v}".strip() for d, v in sources), version=""))

    def _check_requires(self) -> None:
        """Report, once each, a plugin's pass whose ``requires`` names a pass no registered
        one has: a pipeline holding it pulls in what it requires, so it can never be used
        until a plugin registering that pass is installed (the error came only when a pipeline
        named it). Its plugin is ``partial``; a name close to a registered one is suggested."""
        for rec in self.plugins:
            if rec.status not in ("loaded", "partial"):
                continue
            for name in rec.passes:
                info = self._passes.get(name)
                if info is None or name in self._reported_requires:
                    continue
                missing = self._unregistered_requires(info.cls)
                if not missing:
                    continue
                self._reported_requires.add(name)
                said = []
                for r in missing:
                    if self.rejected(r):
                        said.append(f"{r!r}, {self._rejected_clause(r)}")
                    else:
                        said.append(f"{r!r}, which no installed plugin registers{self._requires_hint(info.cls, r)}")
                message = (
                    f"pass {name!r} requires {'; and '.join(said)}: it can never be used until one is registered "
                    "(a pipeline holding it pulls in what it requires)"
                )
                rec.add_problem(message)
                self._problem(PluginError(message, distribution=info.distribution, version=info.version))

    # ------------------------------------------------------------------ registering passes

    def register(self, pass_cls: type, *, source: str | None = None) -> PassInfo:
        """Register a pass class from Python code (not through a plugin).

        ``source`` names where it came from in descriptions (default: its module).

        Raises:
            PassDefinitionError: the class is malformed.
            DuplicatePassError: another source already registered that name.
        """
        validate_pass_class(pass_cls)
        src = source or f"python:{pass_cls.__module__}"
        existing = self._passes.get(pass_cls.name)
        if existing is not None and existing.cls is not pass_cls:
            # not two plugins: `prefer` cannot choose, and both may come from one module
            old_cls = f"{existing.cls.__module__}.{existing.cls.__qualname__}"
            new_cls = f"{pass_cls.__module__}.{pass_cls.__qualname__}"
            raise DuplicatePassError(
                pass_cls.name,
                [existing.source, src],
                message=f"register({new_cls}): pass name {pass_cls.name!r} is already registered, by "
                f"{old_cls} ({existing.source}); give the class another `name`, or register it in a "
                "registry of its own (fxpasses.Registry())",
            )
        info = PassInfo(pass_cls.name, pass_cls, src, "")
        self._passes[pass_cls.name] = info
        return info

    def _add(self, pass_cls: type, rec: PluginRecord) -> PassInfo | None:
        distribution, version = rec.distribution, rec.version
        try:
            # a definition warning (a misspelt @on name) names the plugin, as its problems do
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                validate_pass_class(pass_cls)
        except PassDefinitionError as exc:
            head, sep, rest = str(exc).partition("\n")  # say so on the first line, before any details
            # in list's rejected table under its name, or what it is when it has none (a
            # class without a name, an object that is not a class)
            name = getattr(pass_cls, "name", None) if isinstance(pass_cls, type) else None
            if not isinstance(name, str) or not name:
                what = f"class {pass_cls.__module__}.{pass_cls.__qualname__}" if isinstance(pass_cls, type) else short_repr(pass_cls)
                # not a pass name: never matched when a pipeline names a pass
                name = what if what.startswith("<") and what.endswith(">") else f"<{what}>"
            self._reject(rec, "pass", name, str(exc))
            fate = "an error in strict mode" if self.strict else "the pass is skipped (not registered)"
            self._problem(rec.error_for(f"{head}; {fate}{sep}{rest}"))
            return None
        finally:
            for w in said:
                if issubclass(w.category, PassDefinitionWarning):
                    warn(PassDefinitionWarning(str(rec.error_for(str(w.message)))))
                else:
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        name = pass_cls.name
        why = self._taken_by_other_kind(name, "pass")
        if why is not None:  # a preset's name: a pass of that name is skipped, as for a built-in pass's
            if self._reject(rec, "pass", name, why):
                self._problem(
                    rec.error_for(f"pass {name!r} ({pass_cls.__module__}.{pass_cls.__qualname__}) {self._skipped}: {why}")
                )
            return None
        info = PassInfo(name, pass_cls, distribution, version)
        existing = self._passes.get(name)
        if name in self._conflicts:
            same = [c for c in self._conflicts[name] if c.cls is pass_cls and c.distribution == distribution]
            if same:  # registered again by the same plugin: once
                return same[0]
            self._conflicts[name].append(info)
            self._resolve_conflict(name)
            return info
        if existing is None:
            self._passes[name] = info
            return info
        if existing.cls is pass_cls:
            return existing
        if existing.distribution == distribution:
            # one plugin, two classes under one name: its own mistake, which `prefer` (a
            # choice between distributions) cannot settle; the first class stays
            why = (
                f"{distribution} registers another class under this name, "
                f"{existing.cls.__module__}.{existing.cls.__qualname__} (rename one of them)"
            )
            if self._reject(rec, "pass", name, why):
                self._problem(
                    rec.error_for(f"pass {name!r} ({pass_cls.__module__}.{pass_cls.__qualname__}) {self._skipped}: {why}")
                )
            return None
        wanted = self.prefer.get(name)
        if (
            _norm(existing.distribution) == BUILTIN_DISTRIBUTION
            and _norm(distribution) != BUILTIN_DISTRIBUTION
            and wanted != _norm(distribution)
        ):
            # a built-in name is never taken over silently: the plugin's pass is skipped
            why = (
                f"{_taken_by([existing], 'pass')} (choose the plugin's with {prefer_hint(name, distribution)})"
            )
            self._reject(rec, "pass", name, why)
            self._problem(
                rec.error_for(f"pass {name!r} ({pass_cls.__module__}.{pass_cls.__qualname__}) {self._skipped}: {why}")
            )
            return None
        self._conflicts[name] = [existing, info]
        if name not in self.prefer:
            if self.strict:
                raise DuplicatePassError(name, [existing.source, info.source])
            self._problem(rec.error_for(_clash_problem("pass", name, [existing.source])))
        self._resolve_conflict(name)
        return info

    def _add_preset(self, info: PresetInfo, rec: Any) -> bool:
        """Register the preset ``info`` of plugin ``rec``; whether it was taken (or is one of
        the presets of a name in conflict). As for passes: a built-in preset's name is kept
        unless ``prefer`` chooses the plugin's; two plugins' presets of one name are both set
        aside until ``prefer = {name = "<distribution>"}`` chooses one (it was the one whose
        distribution sorted first, silently)."""
        name = info.name
        wanted = self.prefer.get(name)
        if name in self._preset_conflicts:
            if info not in self._preset_conflicts[name]:
                self._preset_conflicts[name].append(info)
            self._resolve_conflict(name, self._preset_conflicts, self._presets)
            return True
        existing = self._presets.get(name)
        if existing is None or existing == info:
            self._presets[name] = info
            return True
        if existing.distribution == info.distribution:  # one plugin, two presets of one name
            why = f"{info.distribution} registers another preset under this name ({existing.pipeline!r}; rename one of them)"
            if self._reject(rec, "preset", name, why):
                self._problem(rec.error_for(f"preset {name!r} ({info.pipeline!r}) {self._skipped}: {why}"))
            return False
        if _norm(existing.distribution) == BUILTIN_DISTRIBUTION and wanted != _norm(info.distribution):
            why = (
                f"{_taken_by([existing], 'preset')} (choose the plugin's with {prefer_hint(name, info.distribution)})"
            )
            if self._reject(rec, "preset", name, why):  # in list's rejected table, as a clash of passes
                self._problem(rec.error_for(f"preset {name!r} {self._skipped}: {why}"))
            return False
        self._preset_conflicts[name] = [existing, info]
        if name not in self.prefer:
            self._problem(rec.error_for(_clash_problem("preset", name, [existing.source])))
        self._resolve_conflict(name, self._preset_conflicts, self._presets)
        return True

    def _resolve_conflict(
        self, name: str, conflicts: dict[str, list[Any]] | None = None, table: dict[str, Any] | None = None
    ) -> None:
        """Bind ``name`` in ``table`` (the passes; or the presets) to the candidate of
        ``conflicts[name]`` that ``prefer`` chooses, or unbind it when it chooses none."""
        conflicts = self._conflicts if conflicts is None else conflicts
        table = self._passes if table is None else table
        wanted = self.prefer.get(name)
        chosen = [c for c in conflicts[name] if wanted and _norm(c.distribution) == wanted]
        if chosen:
            table[name] = chosen[0]
        else:
            table.pop(name, None)

    def _remove(self, name: str, distribution: str) -> None:
        info = self._passes.get(name)
        if info is not None and info.distribution == distribution:
            del self._passes[name]
        if name in self._conflicts:
            self._conflicts[name] = [c for c in self._conflicts[name] if c.distribution != distribution]
            if len(self._conflicts[name]) <= 1:
                rest = self._conflicts.pop(name)
                if rest:
                    self._passes[name] = rest[0]
            else:
                self._resolve_conflict(name)

    # ------------------------------------------------------------------ lookup

    def names(self) -> list[str]:
        """Every registered pass name, sorted (names in conflict included)."""
        return sorted(set(self._passes) | set(self._conflicts))

    def __contains__(self, name: str) -> bool:
        name = normal_name(name)
        return name in self._passes or name in self._conflicts

    def candidates(self, name: str) -> list[PassInfo]:
        """Every registration of ``name`` (more than one when two distributions clash)."""
        name = normal_name(_name_argument(name, "candidates"))
        if name in self._conflicts:
            return list(self._conflicts[name])
        return [self._passes[name]] if name in self._passes else []

    def get(self, name: str, *, source: str | None = None, not_suggested: Collection[str] = ()) -> type[Pass]:
        """The pass class registered as ``name`` (``not_suggested``: names left out of an
        unknown name's close names, e.g. the pass that requires it).

        Raises:
            UnknownPassError: no such pass; with close names (difflib, ignoring case) and installed plugins,
                and, when a plugin registered a pass of that name that was rejected as it
                loaded (:meth:`rejected`), that plugin and the reason.
            DuplicatePassError: two distributions register ``name`` and no ``prefer`` chose.
            TypeError: ``name`` is not a ``str`` (None, a number, a pass class).
        """
        return self.info(_name_argument(name, "get"), source=source, not_suggested=not_suggested).cls

    def info(self, name: str, *, source: str | None = None, not_suggested: Collection[str] = ()) -> PassInfo:
        """:class:`PassInfo` of ``name`` (raises as :meth:`get`)."""
        name = normal_name(_name_argument(name, "info"))
        info = self._passes.get(name)
        if info is not None:
            return info
        if name in self._conflicts:
            raise DuplicatePassError(name, [c.source for c in self._conflicts[name]])
        suggestions = close_names(name, [n for n in self.names() if n not in not_suggested])
        plugins = self._loaded_labels()
        hints = self._rejected_hints(name, "pass")
        if name in self._presets:
            hints.append(
                f"{name!r} is a preset (a named pipeline), not a pass: give it as `preset = \"{name}\"` "
                f"in a config, `--preset {name}` on the command line, Pipeline.from_preset({name!r}) in "
                f"Python, or options={{\"preset\": \"{name}\"}} to torch.compile"
            )
        elif name in self._preset_conflicts:  # a preset name two plugins claim, and no `prefer` chose one
            sources = " and ".join(c.source for c in self._preset_conflicts[name])
            hints.append(
                f"{name!r} is a preset (a named pipeline), not a pass, and {sources} both register it: "
                f"choose one with {prefer_hint(name)}, then give it as `preset = \"{name}\"` in a config, "
                f"`--preset {name}` on the command line or Pipeline.from_preset({name!r}) in Python"
            )
        elif " - " in name and not hints:  # YAML folds a list item indented deeper into the one above
            hints.append(
                "one name holding ' - ': in YAML, a list item indented deeper than the one above it is read "
                "as more of that item's text; line up the dashes"
            )
        elif name == "fixpoint" and not hints:  # a group's word without its passes in (...)
            hints.append(
                "a fixpoint group is written with its passes in parentheses: "
                "fixpoint(simplify_algebra,fold_constants) or fixpoint{max_iterations=5}(...) in a pipeline "
                "string, a {fixpoint = [...], max_iterations = 5} entry in a config, fxpasses.Fixpoint([...]) in Python"
            )
        elif not hints:  # (a plugin that registered it, rejected, is where it comes from)
            hints.extend(filter(None, [self._not_loaded_hint(name, "pass")]))
        raise UnknownPassError(
            name, suggestions, plugins, source=source, hint=hints, not_loaded=self._not_loaded_labels()
        )

    def unknown_name(self, name: str) -> UnknownPassError:
        """The error for ``name`` where a pass or a preset may be named (``fxpasses show``):
        close names of both kinds, and why a plugin's registration of it is missing."""
        name = _name_argument(name, "unknown_name", "pass or preset")
        hints = self._rejected_hints(name, "pass") + self._rejected_hints(name, "preset")
        if not hints:  # (a plugin that registered it, rejected, is where it comes from)
            hints.extend(filter(None, [self._not_loaded_hint(name, "pass")]))
        return UnknownPassError(
            name,
            close_names(name, [*self.names(), *self._presets]),
            self._loaded_labels(),
            kind="pass or preset",
            hint=hints,
            not_loaded=self._not_loaded_labels(),
        )

    def presets(self) -> dict[str, PresetInfo]:
        """Registered presets by name (sorted); a name two plugins register, which no
        ``prefer`` chose, is not among them (see :meth:`preset_conflicts`)."""
        return dict(sorted(self._presets.items()))

    def preset_conflicts(self) -> dict[str, list[PresetInfo]]:
        """Preset names two or more plugins register and no ``prefer`` chose one of (unusable
        until one does), with every registration, by name (sorted)."""
        return {n: list(c) for n, c in sorted(self._preset_conflicts.items()) if n not in self._presets}

    def preset(self, name: str, *, source: str | None = None) -> PresetInfo:
        """The preset ``name``.

        Raises:
            UnknownPassError: no such preset (with close names, a plugin's preset of that name
                rejected as it loaded, with the reason, and for a pass name how to give it as a
                pipeline); the message says "preset".
            TypeError: ``name`` is not a ``str``.
        """
        name = normal_name(_name_argument(name, "preset", "preset"))
        info = self._presets.get(name)
        if info is not None:
            return info
        if name in self._preset_conflicts:  # two plugins' presets, and no `prefer` chose one
            raise DuplicatePassError(name, [c.source for c in self._preset_conflicts[name]], kind="preset")
        suggestions = close_names(name, self._presets)
        plugins = self._loaded_labels()
        raise UnknownPassError(
            name,
            suggestions,
            plugins,
            source=source,
            kind="preset",
            available=list(self._presets),
            hint=(self._rejected_hints(name, "preset") or list(filter(None, [self._not_loaded_hint(name, "preset")])))
            + (
                [
                    f"{name!r} is a pass, not a preset: give it as a pipeline, `pipeline = \"{name}\"` in a "
                    f"config, `--pipeline {name}` on the command line or Pipeline.from_string({name!r}) in Python"
                ]
                if name in self
                else []
            ),
            not_loaded=self._not_loaded_labels(),
        )

    def rejected(self, name: str, kind: str = "pass") -> list[tuple[PluginRecord, Rejection]]:
        """The plugins that registered a pass (``kind="pass"``) or preset (``"preset"``) named
        ``name`` that was rejected while they loaded, each with the :class:`Rejection` (its
        reason); empty when none was."""
        name = normal_name(name)  # (a name rejected for not being NFKC-normal is found typed either way)
        return [(r, x) for r in self.plugins for x in r.rejected if x.kind == kind and normal_name(x.name) == name]

    def _rejected_hints(self, name: str, kind: str) -> list[str]:
        """One line per rejected registration of ``name``: which plugin, and why."""
        return [
            f"{kind} {name!r} was found in {rec.where} but rejected when the plugin was loaded, so it is "
            f"not registered until the plugin is fixed: {x.reason}"
            for rec, x in self.rejected(name, kind)
        ]

    # ------------------------------------------------------------------ entry points not loaded

    def _why_not_loaded(self, rec: PluginRecord) -> str:
        disabled_by = sorted(rec.names & self.disable)
        if disabled_by:
            return f"disabled: {plugin_setting_hint('disable', disabled_by[0])}"
        return f"plugin autoloading is off: {AUTOLOAD_ENV}=1"

    def _not_loaded_labels(self) -> list[str]:
        """``"dist version (why)"`` of each distribution with an entry point not loaded
        (disabled, autoloading off, or failed to load: the pass asked for may be its)."""
        labels = {}
        loaded = {r.label for r in self.plugins if r.status == "loaded"}
        for r in self.plugins:
            if r.status == "disabled":
                why = "disabled" if r.names & self.disable else "autoload off"
                labels.setdefault(r.label, f"{r.label} ({why})")
            elif r.status == "failed":
                first_line = r.error.splitlines()[0] if r.error else "error"
                if r.rejected and len(r.problems) > 1:
                    first_line = f"{len(r.problems)} problems, the first: {r.problems[0].splitlines()[0]}"
                # imported, but all it registered was rejected; or not imported
                failed = "registered nothing usable" if r.rejected else "failed to load"
                # a distribution whose other entry points loaded: name the one that did not
                several = sum(p.label == r.label for p in self.plugins) > 1
                text = f"entry point {r.entry_point!r} {failed}: {first_line}" if r.label in loaded or several else f"{failed}: {first_line}"
                labels.setdefault((r.label, r.name), f"{r.label} ({text})")
        return list(labels.values())

    def _builtin_names_not_loaded(self) -> frozenset[str]:
        """The built-in pass names when the built-in plugin was not loaded (``-p no:fxpasses``),
        else none. They are fxpasses' own and known without loading the plugin: its module is
        imported (it is part of fxpasses, and registers nothing by being imported)."""
        if not any(
            r.status == "disabled" and _norm(r.distribution) == BUILTIN_DISTRIBUTION for r in self.plugins
        ):
            return frozenset()
        from .builtin_passes import BUILTIN_PASSES

        return frozenset(cls.name for cls in BUILTIN_PASSES)

    def _not_loaded_hint(self, name: str, kind: str) -> str | None:
        """Why plugins that may have ``name`` were not searched, and how to load one. Entry
        points that were not loaded are never imported to look (a plugin is disabled, or
        autoload turned off, precisely so that it is not imported): the hint names them all.
        A built-in pass name while the built-in plugin was not loaded is known for sure: the
        hint names that plugin alone."""
        recs = list({r.distribution: r for r in self.plugins if r.status == "disabled"}.values())
        if not recs:
            return None
        if kind == "pass" and name in self._builtin_names_not_loaded():
            rec = next(r for r in recs if _norm(r.distribution) == BUILTIN_DISTRIBUTION)
            # (the built-in plugin loads even with autoload off: only `disable` leaves it out)
            return (
                f"pass {name!r} is a built-in pass, and the built-in plugin {rec.label} was not loaded "
                f"({self._why_not_loaded(rec)}); remove it from `disable` (or drop `-p no:NAME`) to load it"
            )
        whys = sorted({self._why_not_loaded(r) for r in recs})
        names = ", ".join(r.distribution for r in recs)
        how = (
            f"load one with {plugin_setting_hint('enable', 'NAME')}"
            if any(w.startswith("plugin autoloading") for w in whys)
            else "remove it from `disable` (or drop `-p no:NAME`) to load it"
        )
        return (
            f"{kind} {name!r} may come from a plugin that was not loaded and so not searched: {names} "
            f"({'; '.join(whys)}); {how}"
        )

    def _loaded_labels(self) -> list[str]:
        """``"dist version"`` of each distribution with a loaded entry point, once each (a
        distribution may register several entry points)."""
        return list(dict.fromkeys(r.label for r in self.plugins if r.status in ("loaded", "partial")))

    def describe(self, name: str, *, distribution: str | None = None) -> PassDescription:
        """Options (types, defaults, help), dependencies and source of pass ``name``.

        ``distribution`` picks one of several registrations of a name in conflict.
        """
        name = _name_argument(name, "describe")
        if distribution is not None:
            picked = [c for c in self.candidates(name) if _norm(c.distribution) == _norm(distribution)]
            if not picked:
                raise UnknownPassError(name, [], [c.source for c in self.candidates(name)])
            info = picked[0]
        else:
            info = self.info(name)
        cls = info.cls
        return PassDescription(
            name=name,
            summary=cls.summary(),
            doc=inspect.cleandoc(cls.__doc__ or ""),
            kind=cls.kind,
            options=_option_infos(cls.Options, "", ()),
            requires=tuple(cls.requires),
            after=tuple(cls.after),
            before=tuple(cls.before),
            dialects=tuple(cls.dialects),
            writes_tensors=bool(cls.writes_tensors),
            journal_edits=bool(getattr(cls, "journal_edits", False)),
            distribution=info.distribution,
            version=info.version,
            module=cls.__module__,
            notes=tuple(self._requires_notes(cls) + self.order_notes(cls)),
        )

    def _requires_notes(self, cls: type[Pass]) -> list[str]:
        """A note for each name in ``cls``'s ``requires`` that no registered pass has (the pass
        cannot be used until one is), with the registered names close to it."""
        return [
            f"{cls.name}: requires names {name!r}, which no registered pass has (the pass cannot be used until a "
            f"plugin registering it is installed){self._requires_hint(cls, name)}"
            for name in self._unregistered_requires(cls)
        ]

    def _unregistered_requires(self, cls: type[Pass]) -> list[str]:
        """The names in pass class ``cls``'s ``requires`` that no plugin registers (a name two
        plugins clash on is registered: ``prefer`` makes it usable, and the clash is reported
        as such), its own name aside."""
        return [r for r in getattr(cls, "requires", ()) if r != cls.name and r not in self]

    def _requires_hint(self, cls: type[Pass], name: str) -> str:
        """``"; did you mean 'x'?"`` for the registered pass names close to ``name`` (a name in
        ``cls``'s ``requires``), never ``cls`` itself; empty when none is."""
        return did_you_mean(close_names(name, sorted(set(self.names()) - {cls.name}), n=2))

    def order_notes(self, cls: type[Pass], *, also: Iterable[str] = (), typos_only: bool = False) -> list[str]:
        """A note for each name in pass class ``cls``'s ``after``/``before`` that no registered
        pass has (nor one of ``also``: a pipeline's own pass classes), with the registered
        names close to it. Not an error: a pass may order itself against an optional plugin's
        pass that is not installed; but a misspelt name orders nothing, silently, which
        ``fxpasses show`` and ``fxpasses check`` say. ``typos_only``: only the names close to
        a known one (what a :class:`~fxpasses.Pipeline` warns of)."""
        extra = set(also)
        known = sorted((set(self.names()) | extra) - {cls.name})  # (never the pass itself)
        which = "no registered pass has" if not extra else "no registered pass nor one of the pipeline has"
        notes = []
        for field in ("after", "before"):
            for name in getattr(cls, field, ()):
                if name in self or name in extra:
                    continue
                near = close_names(name, known, n=2)
                if typos_only and not near:
                    continue
                close = did_you_mean(near)
                notes.append(
                    f"{cls.name}: {field} names {name!r}, which {which} (it orders nothing "
                    f"unless a pass of that name is installed){close}"
                )
        return notes

    def __repr__(self) -> str:
        return f"<Registry {len(self._passes)} passes from {len(self.plugins)} plugins>"


def _option_infos(
    model: type[BaseModel], prefix: str, outer: tuple[type, ...], member: bool = False, listed: dict[type, str] | None = None
) -> tuple[OptionInfo, ...]:
    """An :class:`OptionInfo` per field of the options model ``model``, named ``prefix`` + the
    name it is given by (its alias, else the field's name), with the fields of the models a
    field holds (:func:`_held_models`) below it, each with its own default: what a field left
    out of a table given for the option takes (pydantic validates the table as a whole, not
    merged into the option's default). ``outer``: the models around this one, whose fields a
    model held inside itself does not list again. ``member``: ``model`` is one of several a
    union holds at this path, which each field's description names (``(Dog) ...``).
    ``listed``: the models listed so far under the top-level option (None: ``model`` is the
    options model itself), each with the path it was listed at."""
    infos = []
    for fname, f in model.model_fields.items():
        option_listed = {} if listed is None else listed  # (a top-level option: its own, below it)
        required = f.is_required()
        default = None if required else f.get_default(call_default_factory=True)
        name = prefix + (f.alias or fname)  # (the name the option is given by)
        fields: list[OptionInfo] = []
        held_models = _held_models(f.annotation)
        paths = collections.Counter(path for _, path in held_models)
        again = []
        for held, path in held_models:
            if held in outer or held is model:  # a model inside itself: listed once, above
                continue
            first = option_listed.get(held)
            if first is not None:  # listed already under this option: once (a DAG of models grew exponentially)
                again.append(f"{held.__name__}'s fields as under {first}")
                continue
            option_listed[held] = name + path
            fields.extend(_option_infos(held, name + path + ".", (*outer, model), member=paths[path] > 1, listed=option_listed))
        description = " ".join(filter(None, [f.description or "", *(f"({a})" for a in again)]))
        if member:
            description = f"({model.__name__}) {description}".rstrip()
        infos.append(
            OptionInfo(
                name=name,
                type=_type_str(f.annotation),
                default=default,
                required=required,
                description=description,
                constraints=", ".join(filter(None, (_constraints(f), _choices(f.annotation)))),
                fields=tuple(fields),
            )
        )
    return tuple(infos)


def _held_models(annotation: Any) -> list[tuple[type[BaseModel], str]]:
    """The pydantic models an option's type holds, each once at each path, with the path from
    the option to it: ``""`` (the type itself, also inside ``Optional``/``Union``), ``"[]"``
    (an item of a list, set or ``tuple[X, ...]``), ``"[0]"`` (an item of a fixed tuple),
    ``".<key>"`` (a value of a dict)."""
    found: dict[tuple[type, str], None] = {}
    stack: list[tuple[Any, str]] = [(annotation, "")]
    while stack:
        a, path = stack.pop()
        if isinstance(a, type) and issubclass(a, BaseModel):
            found[(a, path)] = None
            continue
        origin = typing.get_origin(a)
        args = [x for x in typing.get_args(a) if x is not Ellipsis]
        if origin is tuple and Ellipsis not in typing.get_args(a):
            stack.extend((x, f"{path}[{i}]") for i, x in reversed(list(enumerate(args))))
            continue
        sequence = isinstance(origin, type) and issubclass(origin, (collections.abc.Sequence, collections.abc.Set))
        if sequence and not issubclass(origin, (str, bytes)):
            stack.extend((x, path + "[]") for x in reversed(args))
        elif isinstance(origin, type) and issubclass(origin, collections.abc.Mapping):
            stack.extend((x, path + ".<key>") for x in reversed(args[1:]))
        else:  # Optional, Union, Annotated: the same place
            stack.extend((x, path) for x in reversed(args))
    return list(found)


#: a quoted string (left as it is) or a dotted name (``pathlib.Path``, ``f.<locals>.Tile``: given by its
#: last part)
_QUALIFIED = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|\b(?:(?:[A-Za-z_]\w*|<locals>)\.)+([A-Za-z_]\w*)""")


def _type_str(annotation: Any) -> str:
    """An option's type as ``fxpasses show`` prints it: ``int``, ``Optional[Tiling]``,
    ``list[Path]`` (classes by their names, without their modules)."""
    if annotation is None:
        return "None"
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    members: list[str] = []  # enum members (<Color.RED: 'red'>) as Color.RED, kept apart meanwhile

    def member(m: re.Match[str]) -> str:
        members.append(m.group(1))
        return f"\x00{len(members) - 1}\x00"

    text = re.sub(r"<(\w+\.\w+): [^<>]*>", member, repr(annotation))
    text = re.sub(r"<class '([^']*)'>", r"\1", text)
    text = _QUALIFIED.sub(lambda m: m.group(1) or m.group(2), text)
    return re.sub("\x00(\\d+)\x00", lambda m: members[int(m.group(1))], text)


def config_value(value: Any) -> Any:
    """An option's value as a config file writes it (pydantic's JSON conversion): an ``Enum``
    member as its value, a ``Path`` as a string, tuples and sets as lists, nested too; the
    ``repr`` of what has no such form."""
    from pydantic_core import to_jsonable_python

    try:
        return to_jsonable_python(value)
    except Exception:  # noqa: BLE001 - a value for a message: its repr then
        return repr(value)


def _choices(annotation: Any) -> str:
    """``one of 'safe', 'fast'``: the values of the ``Enum`` classes an option's type names
    (also inside ``Optional[...]``), as a config file writes them; "" when it names none."""
    found: list[Any] = []
    stack = [annotation]
    while stack:
        a = stack.pop()
        if isinstance(a, type) and issubclass(a, enum.Enum):
            found.extend(config_value(m) for m in a)
        else:
            stack.extend(typing.get_args(a))
    return "one of " + ", ".join(map(repr, found)) if found else ""


_default: Registry | None = None


#: per thread: ``building``, whether a registry of this thread is importing a plugin (set by
#: Registry._load_record); another thread's registry, loading at the same time, is no plugin's
#: import calling fxpasses.registry()
_loading = threading.local()


def _imported_by_this_thread(module_name: str) -> bool:
    """Whether ``module_name`` is being imported by this thread now (its import is on this
    thread's stack, so importing it again gives the half-run module). A module another thread
    is importing is not: an import from here waits for that one to finish (Python's per-module
    import lock, whose owner is read here; when it cannot be read, any import in progress
    counts, as before)."""
    half = sys.modules.get(module_name)
    if half is None or not getattr(getattr(half, "__spec__", None), "_initializing", False):
        return False
    try:
        from importlib import _bootstrap  # (CPython's import machinery: the module locks)

        ref = _bootstrap._module_locks.get(module_name)
        owner = getattr(ref() if ref is not None else None, "owner", None)
    except Exception:  # noqa: BLE001 - another Python: no owner to read
        owner = None
    return owner is None or owner == threading.get_ident()


def registry(*, reload: bool = False) -> Registry:
    """The process-wide default :class:`Registry` (loaded on first use).

    ``reload=True`` discards it and loads the entry points again (after installing a plugin).
    A registry built while one of its plugins was still being imported (that plugin's import
    called this) lacks that plugin's hooks: it is returned but not kept, and the next call
    builds the default again.

    Raises:
        UserError: called while a registry imports its plugins, by a plugin as it is imported
            (the registry it would register into was about to be replaced, or was another
            than the one importing it: its passes were lost without a word; an adversarial
            check).
    """
    global _default
    if getattr(_loading, "building", False):  # (even with a default registry: the one importing the plugin is another)
        raise UserError(
            "fxpasses.registry() was called while a registry is importing its plugins, by a plugin as it is "
            "imported: register passes in the plugin's fxpasses_register_passes hook, not at import time"
        )
    found = _default
    if found is None or reload:
        # (threads using it first at once each build one, the imports serialised by Python's
        # import locks; every one is complete, and the first kept is the default)
        built = Registry()
        if built.half_imported:
            return built
        if reload or _default is None:
            _default = built
        return _default
    return found


def problems_summary(problems: Sequence[Exception]) -> str:
    """One line per plugin problem, for warnings and the CLI."""
    return "\n".join(f"warning: {p}" for p in problems)
