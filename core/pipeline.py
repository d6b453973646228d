"""Pipelines: which passes run, in which order, with which options, and the run itself.

The run, for each pass of the plan:

1. a :class:`~fxpasses.snapshot.Snapshot` of the graph and module (O(n), no graph copy);
2. ``fxpasses_before_pass`` instruments, the pass (node dispatch or ``GraphPass.run``);
3. verification: ``none``, ``lint`` (``Graph.lint()``), or ``numeric`` (the module's outputs
   against the outputs of the module as it was before the pipeline, on the example inputs,
   within ``atol + rtol * |expected|``);
4. on failure, by ``on_error``: ``rollback`` (default: restore the snapshot and raise
   :class:`~fxpasses.errors.PassFailedError`), ``skip`` (restore, report, go on) or ``raise``
   (raise without restoring, to debug the broken graph);
5. ``fxpasses_after_pass`` / ``fxpasses_pass_failed`` instruments.

The module is recompiled once, at the end (and before numeric checks), not after every pass.
"""

from __future__ import annotations

import collections
import copy
import contextlib
import gc
import itertools
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch
import torch.fx
from torch.fx.node import Node
from pydantic import BaseModel, ValidationError

from ._modpath import ModulePaths
from ._names import normal_keys
from .analyses import AnalysisCache
from .config import (
    Config,
    FixpointEntryConfig,
    PassEntryConfig,
    find_project_config,
    load_config_file,
    canonical_option_keys,
    normal_option_keys,
    same_field_twice,
    pass_name_as_key,
    parse_config,
    validate_options,
    validation_problems,
)
from .context import PassContext, describe_node, failure_place
from .dialect import detect_dialect
from .effects import end_run, new_module_epoch
from .errors import (
    ConfigError,
    InputGraphError,
    OptionsError,
    PassDefinitionWarning,
    PassFailedError,
    UnknownPassError,
    UserError,
    VerificationError,
    close_names,
    did_you_mean,
    did_you_mean_value,
    exception_line,
    is_yaml_source,
    model_table,
    not_one_of,
    value_hint,
    warn,
)
from .errors import exception_text, reports_users_mistake
from .errors import short_repr as _short_repr
from .inputs import check_accepted, check_example_inputs
from .journal import CheckedJournal, Journal, JournalMismatch, NodeFrame, checking, hold_writes_tensors, supports_journal
from .lint import (
    cycle_through,
    _MAX_NESTING,
    input_signature,
    lint_culprit,
    lint_edits,
    lint_passes,
    names_in_namespace,
    stale_code_problem,
    structure_problem,
    frame_signature,
    unspellable_argument,
)
from .ordering import Item, order
from .passes import NodePass, Pass, changed_option, options_state, validate_pass_class
from .function_pass import function_pass, is_function_pass
from .fixpoint import DEFAULT_MAX_ITERATIONS, Fixpoint, FixpointWarning, Group, check_max_iterations
from .registry import Registry, registry as default_registry
from .report import PassReport, RunReport
from .rewrites import RewriteLimit, run_pass_limited
from .runner import HookError, hook_failure, hook_name, run_pass
from .other_sizes import OtherSizes, other_sizes
from .snapshot import Snapshot, graph_changed
from .reference64 import float64_reference
from .verify import Comparison, TensorState, call_isolated, clone_outputs, compare_outputs, compare_results
from .write_guard import CallersTensors, flag_changes, put_back_flags, tensor_flags
from .spec import SpecEntry, SpecGroup, format_option_name, format_value, parse_pipeline_string

__all__ = ["Pipeline", "PlanStep", "Plan", "run", "compare_outputs", "clone_outputs"]

_VERIFY = ("none", "lint", "numeric")
_ON_ERROR = ("rollback", "raise", "skip")


@dataclass
class PlanStep:
    """One pass of an ordered pipeline, with its validated options and why it is there."""

    name: str
    cls: type[Pass]
    options: BaseModel
    source: str | None = None
    verify: str | None = None
    on_error: str | None = None
    reasons: list[str] = field(default_factory=list)
    #: the entry's own tolerances of numeric verification (None: the pipeline's); see
    #: :class:`Pipeline` for how they apply to the passes after it
    atol: float | None = None
    rtol: float | None = None
    #: the pass instance the pipeline was given for this step (run as it is), or None (a new
    #: instance of ``cls`` with ``options`` runs)
    instance: Pass | None = field(default=None, repr=False, compare=False)
    #: the fixpoint group this step belongs to (its steps share the object), or None
    group: Group | None = field(default=None, repr=False, compare=False)

    def describe(self) -> str:
        opts = changed_options(self.options)
        text = self.name
        if opts:
            text += "{" + ",".join(f"{format_option_name(k)}={format_value(v)}" for k, v in opts.items()) + "}"
        settings = self.settings()
        if settings:
            text += "[" + ",".join(settings) + "]"
        return text

    def settings(self, atol: str | None = None) -> list[str]:
        """The entry's own settings as a pipeline string gives them in ``[...]`` (``verify``,
        ``on_error``, ``atol``, ``rtol``, those it sets); ``atol``: that text as its atol."""
        out = [f"{k}={v}" for k, v in (("verify", self.verify), ("on_error", self.on_error)) if v]
        if atol is not None or self.atol is not None:
            out.append(f"atol={atol if atol is not None else format_value(self.atol)}")
        if self.rtol is not None:
            out.append(f"rtol={format_value(self.rtol)}")
        return out


def changed_options(options: BaseModel, *, mode: str = "python") -> dict[str, Any]:
    """The options of ``options`` that are not their defaults, by the names a pipeline string
    and a config give them (an alias where the field has one), each as ``model_dump`` gives it
    in ``mode``, whole: a nested model with every field, since one left out because it equals
    its default can read back as another value (a discriminated union's member, ``Dog`` with
    ``kind="dog"`` left out, read back as the default member ``Cat``: an adversarial check).
    "Not the default" is :func:`_identical`'s: ``1.0`` for a default ``1``, or ``0.0`` for
    ``-0.0``, is given (``==`` took them for the default, and they read back as it)."""
    fields = type(options).model_fields
    dumped = options.model_dump(mode=mode, by_alias=True)
    out: dict[str, Any] = {}
    for name, f in fields.items():
        key = f.alias or name
        if key not in dumped:  # (a field the model leaves out of its dump)
            continue
        if not f.is_required() and _identical(getattr(options, name), f.get_default(call_default_factory=True)):
            continue
        out[key] = dumped[key]
    return out


def _identical(a: Any, b: Any) -> bool:
    """Whether option values ``a`` and ``b`` are the same value of the same type: floats by
    their sign too (``0.0`` is not ``-0.0``) and NaN the same as NaN; containers and models
    item by item."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (a == b and math.copysign(1.0, a) == math.copysign(1.0, b)) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(_identical, a, b))
    if isinstance(a, Mapping):
        return list(a) == list(b) and all(_identical(a[k], b[k]) for k in a)
    if isinstance(a, BaseModel):
        return _identical(dict(a), dict(b))
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - a value without a plain ==: the same object only
        return a is b


@dataclass
class Plan:
    """The ordered pipeline: steps in run order, each with the reasons it moved or was added."""

    steps: list[PlanStep]

    def names(self) -> list[str]:
        return [s.name for s in self.steps]

    def __str__(self) -> str:
        lines = []
        group = None
        for i, s in enumerate(self.steps, 1):
            if s.group is not None and s.group is not group:
                lines.append(f"    fixpoint, until an iteration changes nothing (at most {s.group.max_iterations}):")
            group = s.group
            line = f"{i:>2}. {'  ' if group is not None else ''}{s.describe()}"
            if s.reasons:
                line += "    (" + "; ".join(s.reasons) + ")"
            lines.append(line)
        return "\n".join(lines)

    def as_pipeline_string(self) -> str:
        """The plan as a pipeline string that reads back to it (fixpoint groups as
        ``fixpoint{max_iterations=N}(...)``, the option left out at its default)."""
        parts: list[str] = []
        for group, run in _runs(self.steps):
            if group is None:
                parts.extend(s.describe() for s in run)
                continue
            head = "fixpoint" if group.max_iterations == DEFAULT_MAX_ITERATIONS else f"fixpoint{{max_iterations={group.max_iterations}}}"
            parts.append(f"{head}({','.join(s.describe() for s in run)})")
        return ",".join(parts)

    def groups(self) -> list[list[PlanStep]]:
        """The steps of each fixpoint group, in plan order."""
        return [run for group, run in _runs(self.steps) if group is not None]


def _runs(steps: Sequence[PlanStep]) -> list[tuple[Group | None, list[PlanStep]]]:
    """``steps`` in runs of one fixpoint group (or of none: ``(None, steps)``); a group's steps
    stand together in a plan. (``Group`` compares by identity.)"""
    return [(group, list(run)) for group, run in itertools.groupby(steps, key=lambda s: s.group)]


EntryLike = Any  # str | (str, dict) | PassEntryConfig | Pass subclass | Pass instance

#: what a pipeline string has and a single pass name has not
_STRING_SYNTAX = frozenset(",{}[]()= \t\n")


def _tensor_versions(example_inputs: Sequence[Any] | None, example_kwargs: Mapping[str, Any] | None) -> list[tuple[str, Any, int]]:
    """``(label, tensor, version counter)`` of each tensor among the example inputs, to tell
    afterwards whether a pass wrote one in place (``input[3]``, ``kwargs['mask']``)."""
    if example_inputs is None and not example_kwargs:
        return []
    from torch.utils._pytree import keystr, tree_flatten_with_path

    leaves, _ = tree_flatten_with_path((list(example_inputs or ()), dict(example_kwargs or {})))
    out = []
    for path, value in leaves:
        if isinstance(value, torch.Tensor):
            try:
                version = value._version
            except Exception:  # noqa: BLE001 - inference tensors keep no version counter
                continue
            label = ("input" if path[0].idx == 0 else "kwargs") + keystr(path[1:])
            out.append((label, value, version))
    return out


def _written(versions: list[tuple[str, Any, int]]) -> str | None:
    """What a pass wrote in place of the example inputs recorded by :func:`_tensor_versions`
    (their version counters moved), as the end of a sentence; None when nothing."""
    wrote = [label for label, t, v in versions if t._version != v]
    if not wrote:
        return None
    return (
        f"wrote the example input(s) {', '.join(wrote)} in place, which no rollback undoes: they are the "
        "caller's tensors (for a TorchDynamo graph, the model's parameters and buffers too); a pass must "
        "copy an input before changing it"
    )


def _lost_tensors(snap: Any, put_back: Sequence[torch.Tensor]) -> list[str]:
    """The tensors a restore from ``snap`` could not put back (``snap.unrestorable``), less
    the caller's tensors ``put_back`` already (:class:`~fxpasses.write_guard.CallersTensors`)."""
    held = getattr(snap, "tensors", {})
    return [n for n in snap.unrestorable if not any(held.get(n) is t for t in put_back)]


def _input_flags(versions: list[tuple[str, Any, int]]) -> list[tuple[str, Any, bool, Any]]:
    """:func:`~fxpasses.write_guard.tensor_flags` of each example input of ``versions``
    (:func:`_tensor_versions`) that passes get as it is, not a copy (``nn.Parameter`` and other
    tensor subclasses: a TorchDynamo graph takes the model's parameters): what a pass could
    change of the caller's tensors besides their values, and a rollback can put back."""
    return tensor_flags((label, t) for label, t, _ in versions if type(t) is not torch.Tensor)


def _as_entries(passes: Any, who: str = "Pipeline") -> list[EntryLike]:
    """``Pipeline``'s ``passes`` (``who``: ``"Fixpoint"`` for a group's entries) as a list of
    entries: one pass (a class, an instance, a name, a table or a parsed entry) is a
    one-element pipeline.

    Raises:
        ConfigError: a pipeline string (it points at ``from_string``), or something that is
            neither an entry nor a list of them (naming it and its type).
    """
    if isinstance(passes, str):
        if not passes:
            return []  # "the pipeline is empty", as for []
        if _STRING_SYNTAX.isdisjoint(passes):
            return [passes]
        if who == "Fixpoint":
            names = [n.strip() for n in passes.split(",")]
            how = (
                f"give the passes as a list, Fixpoint({names!r}), or write the group in a pipeline string, "
                f"Pipeline.from_string(\"fixpoint({passes})\")"
                if all(n.isidentifier() for n in names)
                else "give the passes as a list, or write the group in a pipeline string, Pipeline.from_string(\"fixpoint(...)\")"
            )
        else:
            how = "use Pipeline.from_string for a pipeline string"
        raise ConfigError(f"{who}() takes a list of entries or one pass, got the pipeline string {passes!r}; {how}")
    if isinstance(passes, (type, Pass, SpecEntry, SpecGroup, PassEntryConfig, FixpointEntryConfig, Fixpoint, Mapping)):
        return [passes]
    if (
        isinstance(passes, tuple)
        and len(passes) == 2
        and isinstance(passes[0], (str, type, Pass))
        and (passes[1] is None or isinstance(passes[1], (Mapping, BaseModel)))
    ):  # one (name or class, options) pair (an instance's: refused by _entry, with the way to write it)
        return [passes]
    if isinstance(passes, (list, tuple)):
        return list(passes)
    if is_function_pass(passes) and not hasattr(passes, "__iter__"):  # one pass function
        return [passes]
    if isinstance(passes, (bytes, bytearray)) or not hasattr(passes, "__iter__"):
        raise ConfigError(
            f"Pipeline() takes a list of entries or one pass (a pass name, a pass class or "
            f"instance, or a table), got {_short_repr(passes)} of type {type(passes).__name__}"
        )
    return list(passes)


class Pipeline:
    """An ordered list of passes with options, and how to verify them.

    Args:
        passes: entries, each one of: a pass name (``"eliminate_dead_code"``); a
            ``(name, options)`` pair; a mapping ``{"name": ..., "options": {...}}``; a pass
            class (registered or not) or a ``(class, options)`` pair; a pass instance (run
            as it is, so what it collects stays on it and its own constructor arguments
            hold; options from ``options=`` are set on it). One entry alone (``Pipeline(MyPass)``) is a one-pass pipeline;
            anything else is a :class:`~fxpasses.errors.ConfigError` naming it and its type.
        registry: where names are looked up (default: :func:`fxpasses.registry`).
        verify: ``"none"``, ``"lint"`` (default) or ``"numeric"``.
        on_error: ``"rollback"`` (default), ``"raise"`` or ``"skip"``.
        atol, rtol: tolerances of numeric verification (``|a - b| <= atol + rtol * |b|``).
            An entry may carry its own (``"fuse_conv_bn[rtol=1e-2]"``, ``{"name": ...,
            "atol": 1e-3}``): they replace these for that pass's check, and since every check
            compares with the module before the pipeline, the difference a pass that changed
            the graph was allowed stays allowed: each check uses, elementwise, the larger of
            its own tolerances (the entry's, else these) and those of every earlier pass that
            changed the graph and was kept. :attr:`RunReport.atol` / ``rtol`` give what the
            run's outputs are held to at its end.
        snapshot_tensors: copy every parameter and buffer before each pass (doubles their
            memory during the run). Without it, rollback still restores tensors written in
            place: each is cloned just before the pass first writes it
            (:class:`fxpasses.write_guard.WriteGuard`); the copies are needed only for writes
            that bypass torch's dispatcher (``Tensor.numpy()`` memory, the raw storage,
            rebinding ``.data``) and for passes declaring ``writes_tensors = False``.
        options: extra options by pass name, merged into every entry of that pass; options for
            a pass not in the pipeline are an error (a typo) unless ``ignore_unused_options``
            (then only those naming no registered pass are, ``UnknownPassError``, and those
            holding an option their pass does not take or a bad value, ``OptionsError``).
            An option set both here and in an entry is an error naming both (a config's
            ``[options.NAME]`` table and its pipeline alike); only a preset's entries take the
            table's value instead (a preset's options are defaults).
        order: ``"dependencies"`` (default: order by ``requires``/``after``/``before`` and pull
            in missing requirements) or ``"as-given"`` (run the entries exactly as listed;
            reproducers use it, their list being a slice of an ordered plan).

    Option values are validated as their source gives them: a pipeline string's, and a config
    file's (:meth:`from_config`), are JSON-like data, so a string is read as an ``Enum`` member
    or a ``Path`` where the field takes one (:func:`fxpasses.config.validate_options`); Python
    values are validated as they are (an ``Enum`` field takes a member, a ``Path`` field a
    ``Path``). Neither reads ``"12"`` as a number.

    Raises (at construction, before anything runs):
        UnknownPassError, OptionsError, CycleError, DuplicatePassError, ConfigError (also: an
        option set both in an entry and in ``options``).
    """

    def __init__(
        self,
        passes: Sequence[EntryLike] | EntryLike,
        *,
        registry: Registry | None = None,
        verify: str = "lint",
        on_error: str = "rollback",
        atol: float = 1e-5,
        rtol: float = 1e-5,
        snapshot_tensors: bool = False,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        source: str | None = None,
        order: str = "dependencies",
        ignore_unused_options: bool = False,
        _from_config: str | None = None,
        _from_preset: bool = False,
    ) -> None:
        if verify not in _VERIFY:
            raise ConfigError(not_one_of("verify", verify, _VERIFY))
        if on_error not in _ON_ERROR:
            raise ConfigError(not_one_of("on_error", on_error, _ON_ERROR))
        if order not in ("dependencies", "as-given"):
            raise ConfigError(
                f"order must be 'dependencies' or 'as-given', got {order!r}"
                + did_you_mean_value(order, ("dependencies", "as-given"))
            )
        self.order = order
        passes = _as_entries(passes)
        self.registry = registry if registry is not None else default_registry()
        self.verify = verify
        self.on_error = on_error
        # (a config's tolerances are its own; from_string's and from_preset's are keyword
        # arguments, not part of the string or preset that `source` names)
        self.atol = tolerance("atol", atol, source=_from_config)
        self.rtol = tolerance("rtol", rtol, source=_from_config)
        self.snapshot_tensors = snapshot_tensors
        self.source = source or "pipeline"
        self._from_config = _from_config  # where the config is: entries and options are its data (JSON-like)
        self._from_preset = _from_preset  # entries are a preset's: the options table changes them
        # the note of a numeric verification failure (`fxpasses run` names its own bisect command)
        self._bisect_hint = BISECT_HINT
        # ``(qualified name, tensor)`` of the caller's tensors held on the module (the
        # backend's frozen parameters and buffers, which the uncompiled model reads too):
        # guarded while each pass runs (CallersTensors); a pass writing one fails, and it is
        # put back
        self._callers_tensors: list[tuple[str, torch.Tensor]] = []
        extra = self._options_tables({} if options is None else options, source)
        self._steps = []
        bad: list[OptionsError] = []  # every entry with invalid options is reported, not the first
        for i, e in enumerate(passes):
            found = self._group_of(e, i)
            if found is None:
                try:
                    self._steps.append(self._entry(e, i, extra))
                except OptionsError as err:
                    bad.append(err)
                continue
            members, group = found
            for k, inner in enumerate(members):
                if self._group_of(inner, i) is not None:
                    raise ConfigError(
                        "fixpoint groups do not nest: list the inner group's passes in the outer one",
                        source=f"{self.source}, entry {i + 1}",
                    )
                try:
                    step = self._entry(inner, i, extra, member=k)
                except OptionsError as err:
                    bad.append(err)
                    continue
                step.group = group
                self._steps.append(step)
        if bad:
            first = bad[0]
            if len(bad) == 1:
                raise first
            raise OptionsError(
                first.pass_name,
                first.problems,
                source=first.source,
                places=first.places,
                others=bad[1:],
                python_keys=first.python_keys,
            ) from None
        if not self._steps:
            raise ConfigError("the pipeline is empty: name at least one pass", source=source)
        _number_function_passes(self._steps)
        _check_one_class_per_name(self._steps, self.source)
        self._tables = extra  # the options tables by pass name, for passes no entry names
        self._plan = self._order()
        self._warn_order_typos()
        # options for a pass the plan pulls in (a requirement), or that a run computes on demand
        # (an analysis an entry requires, with order="as-given"), are its options, as an entry's
        demanded = self._on_demand_names()
        unused = set(extra) - {s.name for s in self._plan.steps} - demanded
        for name in sorted(demanded & set(extra)):  # validated now, not when a run first needs it
            self._table_options(name, self.registry.get(name))
        if unused and ignore_unused_options:
            # left for the pipeline the given one replaced; a table naming no registered pass,
            # or holding an option its pass does not take, is still a typo, never silently
            # ignored (`check --pipeline` said OK of a misspelt option: an adversarial check)
            for name in sorted(unused):
                self._table_options(name, self.registry.get(name, source=self._table_source(name)))
        elif unused:
            names = [s.name for s in self._plan.steps]
            registered = self.registry.names()

            def said(n: str) -> str:
                near = _close_step(n, names)
                if near or n in registered:
                    return near
                close = close_names(n, registered, n=2)  # a misspelt name of a pass not in it
                return f" (no pass is named so; {did_you_mean(close)[2:]})" if close else " (no pass is named so)"

            raise ConfigError(
                "options given for pass(es) not in the pipeline: "
                + ", ".join(f"{n}{said(n)}" for n in sorted(unused))
                + "; add each pass to the pipeline, or remove its options",
                source=source,
            )

    # ------------------------------------------------------------------ construction

    def _group_of(self, e: EntryLike, index: int) -> tuple[list[EntryLike], Group] | None:
        """``(member entries, its Group)`` when ``e`` is a fixpoint group (a
        :class:`~fxpasses.Fixpoint`, a pipeline string's ``fixpoint(...)``, a table with a
        ``fixpoint`` key), else None.

        Raises:
            ConfigError: a table with a ``fixpoint`` key that is malformed (no list of passes,
                an empty one, other keys than ``max_iterations``, a bad ``max_iterations``).
        """
        where = f"{self.source}, entry {index + 1}"
        if isinstance(e, Fixpoint):
            return list(e.entries), Group(e.max_iterations)
        if isinstance(e, SpecGroup):
            n = e.max_iterations if e.max_iterations is not None else DEFAULT_MAX_ITERATIONS
            return list(e.entries), Group(check_max_iterations(n, e.source))
        if isinstance(e, FixpointEntryConfig):
            return list(e.fixpoint), Group(e.max_iterations)
        if isinstance(e, Mapping) and "fixpoint" in e:
            members = e["fixpoint"]
            others = sorted(set(e) - {"fixpoint", "max_iterations"}, key=str)
            if others:
                raise ConfigError(
                    f"bad fixpoint group {dict(e)!r}: unknown key(s) {', '.join(map(repr, others))}; a group takes "
                    "'fixpoint' (its passes) and 'max_iterations'",
                    source=where,
                )
            if isinstance(members, (str, bytes)) or not isinstance(members, (list, tuple)) or not members:
                raise ConfigError(
                    f"bad fixpoint group {dict(e)!r}: 'fixpoint' must be a non-empty list of pipeline entries, "
                    f"got {_short_repr(members)}",
                    source=where,
                )
            n = e.get("max_iterations", DEFAULT_MAX_ITERATIONS)
            return list(members), Group(check_max_iterations(n, where))
        return None

    def _entry(
        self, e: EntryLike, index: int, extra: dict[str, dict[str, Any]], member: int | None = None
    ) -> PlanStep:
        where = f"{self.source}, entry {index + 1}" + (f", pass {member + 1} of its fixpoint group" if member is not None else "")
        verify = on_error = atol = rtol = None
        instance: Pass | None = None
        entry = e
        if isinstance(e, SpecEntry):
            where = f"{self.source}: {e.source}" if self.source != "pipeline string" else e.source
            verify, on_error, atol, rtol = e.verify, e.on_error, e.atol, e.rtol
            e = (e.name, e.options)

        def bad_table(exc: ValidationError, table: Mapping[str, Any]) -> ConfigError:
            problems = "; ".join(
                f"{path}: {msg} (given: {_short_repr(value)})"
                for path, msg, value in validation_problems(exc, PassEntryConfig, unknown="key")
            )
            key = pass_name_as_key(table)
            hint = (
                ""
                if key is None
                else f'; for pass {key!r} with options write {{"name": {key!r}, "options": {{...}}}} or ({key!r}, {{...}})'
            )
            named = table.get("name")
            if is_function_pass(named) and not isinstance(named, (type, Pass)):
                hint += (
                    "; a pass function is an entry by itself, and takes settings as a pass class: "
                    "{'name': fxpasses.function_pass.function_pass(fn), 'verify': ...}"
                )
            return ConfigError(f"bad pipeline entry {dict(table)!r}: {problems}{hint}", source=where)

        if isinstance(e, Mapping) and isinstance(e.get("name"), (type, Pass)):
            # {"name": PassClass or instance, "options": ..., "verify": ..., "on_error": ...}: an
            # unregistered pass with settings of its own, as a registered one's name takes them
            target = e["name"]
            rest = {k: v for k, v in e.items() if k != "name"}
            given = rest.get("options")  # an Options instance, as (PassClass, options) takes one
            try:
                ec = PassEntryConfig.model_validate(
                    {"name": "entry", **{k: v for k, v in rest.items() if not (k == "options" and isinstance(v, BaseModel))}}
                )
            except ValidationError as exc:
                raise bad_table(exc, {"name": target, **rest}) from None
            verify, on_error, atol, rtol = ec.verify, ec.on_error, ec.atol, ec.rtol
            if isinstance(target, Pass):
                if "options" in rest:
                    cls_name = type(target).__name__
                    raise ConfigError(
                        f"bad pipeline entry {{'name': {cls_name} instance, 'options': {_short_repr(rest['options'])}}}: "
                        f"an instance carries its own options; give the class, {{'name': {cls_name}, 'options': "
                        f"{{...}}}}, or the options to the instance, {cls_name}({cls_name}.Options(...))",
                        source=where,
                    )
                e = target
            else:
                e = (target, given if isinstance(given, BaseModel) else ec.options)
        if isinstance(e, (tuple, list)) and len(e) == 2 and isinstance(e[0], Pass):
            cls_name = type(e[0]).__name__
            raise ConfigError(
                f"bad pipeline entry ({cls_name} instance, {_short_repr(e[1])}): an instance carries its own "
                f"options; give the class with the options, ({cls_name}, {{...}}), or the options to the "
                f"instance, {cls_name}({cls_name}.Options(...))",
                source=where,
            )
        if isinstance(e, (tuple, list)) and len(e) == 2 and isinstance(e[0], type):
            validate_pass_class(e[0])  # (PassClass, options): a pass not registered anywhere
            cls, raw, name = e[0], e[1], e[0].name
        elif isinstance(e, Pass):
            cls, raw, name, instance = type(e), e.options, type(e).name, e
        elif isinstance(e, type):
            validate_pass_class(e)
            cls, raw, name = e, {}, e.name
        elif is_function_pass(e):  # a plain FX pass function (or torch's PassBase): p(gm)
            cls = function_pass(e)
            validate_pass_class(cls)
            raw, name = {}, cls.name
        else:
            if isinstance(e, str):
                name, raw = e, {}
            elif isinstance(e, PassEntryConfig):
                name, raw, verify, on_error, atol, rtol = e.name, e.options, e.verify, e.on_error, e.atol, e.rtol
            elif isinstance(e, Mapping):
                try:
                    ec = PassEntryConfig.model_validate(dict(e))
                except ValidationError as exc:  # one line per problem, as a config file's
                    raise bad_table(exc, e) from None
                name, raw, verify, on_error, atol, rtol = ec.name, ec.options, ec.verify, ec.on_error, ec.atol, ec.rtol
            elif isinstance(e, (tuple, list)) and len(e) == 2 and isinstance(e[0], str):
                name, raw = e[0], e[1]
            else:
                raise ConfigError(
                    f"bad pipeline entry {_short_repr(e)} of type {type(e).__name__}: expected a pass name, "
                    "a pass class or instance, (name or class, options), a table, a fixpoint group or a pass "
                    "function",
                    source=where,
                )
            cls = self.registry.get(name, source=where)
            name = cls.name  # as registered: NFKC-normalized (the registry looks names up so)
        from_table: set[str] = set()  # keys that come from the [options.NAME] table
        if name in extra:
            own = raw.model_dump(exclude_unset=True) if isinstance(raw, BaseModel) else dict(raw or {})
            own = normal_option_keys(name, own, where)  # (the table's are: one option typed two ways is one)
            table = extra[name]
            # an option given by its name here and by its alias there is one option
            same_field_twice(name, cls.Options, own, where)
            same_field_twice(name, cls.Options, table, self._table_source(name))
            own, table = canonical_option_keys(cls.Options, own), canonical_option_keys(cls.Options, table)
            both = sorted(set(own) & set(table))
            if both and not self._from_preset:
                raise ConfigError(
                    f"option(s) of pass {name!r} set twice, here and in {self._table_name(name)}: "
                    + ", ".join(f"{k}={format_value(own[k])} here, {k}={format_value(table[k])} there" for k in both)
                    + "; set each option in one place (the entry or the table)",
                    source=where,
                )
            from_table = set(table)
            raw = {**own, **table}  # a preset's options are defaults that the table changes
        # what a config file or pipeline string gave is JSON-like data (strings for enums and
        # paths); what Python gave is validated as it is
        from_text = self._from_config is not None or isinstance(entry, SpecEntry)
        config_keys = set(raw) if from_text and isinstance(raw, Mapping) else set()
        if self._from_config is None:
            config_keys -= from_table  # Python's options={...} with a pipeline string's entries
        # the keys a pipeline string wrote (a bare word there reads as None, a number, ...)
        string_keys = set(raw) - from_table if isinstance(entry, SpecEntry) and isinstance(raw, Mapping) else set()
        try:
            options = validate_options(name, cls.Options, raw, where, config_keys, string_keys=string_keys)
        except OptionsError as err:
            fields = {str(path).split(".")[0] for path, _, _ in err.problems}
            note = self._chosen_note(name, cls)
            where_table = self._table_source(name) if self._from_config is not None else f"options={{{name!r}: ...}}"
            if from_table and fields <= from_table:
                # every bad value came from the options table: say so, not the entry
                raise OptionsError(name, err.problems, source=where_table, python_keys=err.python_keys, note=note) from None
            if from_table & fields:  # some from the table, some from the entry: mark the table's
                problems = [
                    (path, f"{msg} (set in {where_table})" if str(path).split(".")[0] in from_table else msg, value)
                    for path, msg, value in err.problems
                ]
                err = OptionsError(name, problems, source=err.source, python_keys=err.python_keys, note=note)
            if isinstance(entry, SpecEntry) and entry.option_places:  # where each bad option stands
                places = {k: c for k, c in entry.option_places.items() if k not in from_table}
                raise OptionsError(
                    name, err.problems, source=err.source, places=places, python_keys=err.python_keys, note=note
                ) from None
            if note is not None:
                raise OptionsError(name, err.problems, source=err.source, python_keys=err.python_keys, note=note) from None
            if err.__traceback__ is None:  # (made here: the table's problems marked)
                raise err from None
            raise
        if instance is not None and options != instance.options:
            instance.options = options  # the options table changed some of them
        return PlanStep(name, cls, options, where, verify, on_error, instance=instance, atol=atol, rtol=rtol)

    @staticmethod
    def _options_tables(options: Mapping[str, Any], source: str | None) -> dict[str, dict[str, Any]]:
        """``options`` by pass name, the names and option names NFKC-normalized as the
        registry's and the Options fields' are.

        Raises:
            ConfigError: two tables for one pass name typed two ways (``Ü`` and ``U`` with
                U+0308), which would merge, one silently overriding the other.
            OptionsError: one option name typed two ways in a table."""

        def clash(name: str, first: str, second: str, value: Any) -> Exception:
            return ConfigError(
                f"options for pass {name!r} given twice, as {ascii(first)} and as {ascii(second)} (one name in two "
                "Unicode forms): give them in one table",
                source=source,
            )

        # checked here, as a config's [options] tables are by its schema: a list, a number or a
        # key that is no name failed deep inside as an AttributeError or TypeError naming none
        example = "options={'fold_constants': {'max_numel': 4096}}"
        if not isinstance(options, Mapping):
            raise ConfigError(
                f"options must be a mapping of pass name -> its options ({example}), got {_short_repr(options)} "
                f"of type {type(options).__name__}",
                source=source,
            )
        for name, table in options.items():
            if not isinstance(name, str):
                hint = (
                    f" (key a pass class's options by its name, {name.name!r})"
                    if isinstance(name, type) and isinstance(getattr(name, "name", None), str)
                    else ""
                )
                raise ConfigError(
                    f"options: a key must be a pass name (a str), got {_short_repr(name)} of type "
                    f"{type(name).__name__}{hint}",
                    source=source,
                )
            if not isinstance(table, (Mapping, BaseModel)):
                raise ConfigError(
                    f"options[{name!r}] must be a mapping of option name -> value ({example}), got "
                    f"{_short_repr(table)} of type {type(table).__name__}",
                    source=source,
                )

        return {n: normal_option_keys(n, dict(v), source) for n, v in normal_keys(options, clash).items()}

    def _warn_order_typos(self) -> None:
        """A :class:`~fxpasses.errors.PassDefinitionWarning` for each ``after``/``before`` name
        of a planned pass that no pass has but is close to one (a misspelling orders nothing;
        a name far from every pass may be an optional plugin's: ``fxpasses check`` notes those)."""
        names = [s.name for s in self._plan.steps]
        for cls in dict.fromkeys(s.cls for s in self._plan.steps):
            for note in self.registry.order_notes(cls, also=names, typos_only=True):
                warn(PassDefinitionWarning(note))

    def _table_name(self, name: str) -> str:
        """The options table of pass ``name`` as its author wrote it (config or Python)."""
        if self._from_config is not None:
            return self._table_source(name)
        return f"options[{name!r}]"

    def _table_source(self, name: str) -> str:
        """Where ``[options.NAME]`` stands: ``file [options.NAME]`` or pyproject's section."""
        base = self._from_config or self.source
        if base.endswith("[tool.fxpasses]"):
            return f"{base[: -len('[tool.fxpasses]')]}[tool.fxpasses.options.{name}]"
        if base.lower().endswith((".yaml", ".yml", ".json")):  # not TOML: named as its keys are
            return f"{base} options.{name}"
        return f"{base} [options.{name}]"

    def _required(self, name: str, needed_by: str, cls: type | None) -> type[Pass]:
        """The pass ``name`` that pass ``needed_by`` (class ``cls``, when known) requires.

        Raises:
            UnknownPassError: no such pass; the message names the requiring pass with its
                distribution (a plugin's ``requires`` misspelt reads otherwise as the user's
                config error), and does not offer the requiring pass itself as a close name.
        """
        info = self._registered(needed_by, cls)
        by = f"pass {needed_by!r}" + (f" ({info.source})" if info is not None else "")
        try:
            return self.registry.get(name, source=f"{self.source}: required by {by}", not_suggested=(needed_by,))
        except UnknownPassError as exc:
            if exc.suggestions or info is not None:  # (a misspelt name, or a plugin's requires)
                raise
            # a pass class of one's own requiring another of one's own (a pass-author check)
            raise UnknownPassError(
                name, [], exc.plugins, source=f"{self.source}: required by {by}",
                hint="a required pass is looked up by name: register its class (fxpasses.registry().register(cls), "
                "or a plugin's fxpasses_register_passes), or give the class in the pipeline too",
                not_loaded=exc.not_loaded,
            ) from None

    def _order(self) -> Plan:
        """The plan: the entries in dependency order with the passes they require pulled in,
        each of those with its options table (:meth:`_table_options`)."""
        if self.order == "as-given":
            given = {s.name for s in self._steps}
            for s in self._steps:  # a requirement must exist (analyses are computed on demand)
                for r in s.cls.requires:
                    if r not in given:
                        self._required(r, s.name, s.cls)
            return Plan(list(self._steps))
        items = []
        for group, run in _runs(self._steps):  # each fixpoint group one item, ordered as a unit
            items.extend([Item(s.name, s.cls, s) for s in run] if group is None else [_group_item(run)])

        classes = {s.name: s.cls for s in self._steps}

        def resolve(name: str, needed_by: str) -> type[Pass]:
            return self._required(name, needed_by, classes.get(needed_by))

        ordered = order(items, resolve)
        steps = []
        for it in ordered:
            if isinstance(it.payload, list):  # a fixpoint group: its members in their order
                for k, step in enumerate(it.payload):
                    step.reasons = [*(it.reasons if k == 0 else ()), *step.reasons]
                    steps.append(step)
                continue
            if it.payload is None:  # pulled in
                step = PlanStep(it.name, it.cls, self._table_options(it.name, it.cls), None)
            else:
                step = it.payload
            step.reasons = list(it.reasons)
            steps.append(step)
        return Plan(steps)

    def _table_options(self, name: str, cls: type[Pass]) -> BaseModel:
        """The options of a pass no entry names (pulled in, or computed on demand): its options
        table, validated as an entry's (a config's table is JSON-like data), or the defaults."""
        raw = self._tables.get(name)
        if raw is None:
            return cls.Options()
        keys = set(raw) if self._from_config is not None else set()
        return validate_options(name, cls.Options, raw, self._table_name(name), keys)

    def _on_demand_names(self) -> set[str]:
        """The analyses a run may compute on demand for the plan's steps (what they require,
        transitively through analyses): with ``order="dependencies"`` the plan holds them."""
        seen: set[str] = set()
        todo = [r for s in self._plan.steps for r in s.cls.requires]
        while todo:
            name = todo.pop()
            if name in seen or not self._is_analysis(name):
                continue
            seen.add(name)
            todo.extend(self._class_of(name).requires)
        return seen

    @classmethod
    def from_string(cls, text: str, **kwargs: Any) -> "Pipeline":
        """A pipeline from ``"name{key=value,...},name2"`` (see :mod:`fxpasses.spec`).

        The names are pass names; a preset's is an :class:`~fxpasses.errors.UnknownPassError`
        that points at :meth:`from_preset`.
        """
        kwargs.setdefault("source", "pipeline string")
        return cls(parse_pipeline_string(text), **kwargs)

    @classmethod
    def from_preset(cls, name: str, *, registry: Registry | None = None, **kwargs: Any) -> "Pipeline":
        """The pipeline of the preset ``name`` (a named pipeline: ``"inference"``, ``"training"``,
        ``"cleanup"`` or a plugin's; ``fxpasses list`` lists them), as ``preset = "inference"``
        in a config or ``--preset inference`` on the command line give it.

        The other keyword arguments are the :class:`Pipeline`'s (``verify``, ``on_error``,
        ``atol``, ``rtol``, ``options={"fold_constants": {"max_numel": 4096}}`` to change the
        options of a pass the preset holds, ...).

        Raises:
            ConfigError: ``name`` is not a str.
            UnknownPassError: no preset ``name`` (with close names and the presets there are;
                for a pass name, how to give it as a pipeline).
            What :class:`Pipeline` raises at construction.
        """
        if not isinstance(name, str):
            raise ConfigError(f"Pipeline.from_preset takes a preset name (a str), got {name!r}")
        if registry is None:
            registry = default_registry()
        preset = registry.preset(name, source="Pipeline.from_preset")
        kwargs.setdefault("source", f"preset {preset.name!r}")
        # the preset's own options are defaults that `options` changes, as a config's
        # [options.NAME] table changes them under `preset = ...`
        kwargs["_from_preset"] = True
        return cls(parse_pipeline_string(preset.pipeline, kwargs["source"]), registry=registry, **kwargs)

    @classmethod
    def from_config(
        cls, config: str | Path | Mapping[str, Any] | Config | None = None, *, registry: Registry | None = None
    ) -> "Pipeline":
        """A pipeline from a config file, a mapping or a :class:`~fxpasses.config.Config`.

        ``config=None`` reads the nearest project config (a ``fxpasses.toml``, or
        ``[tool.fxpasses]`` in a ``pyproject.toml``; :func:`~fxpasses.config.find_project_config`).
        The config's ``[plugins]`` section, when present, selects the registry's plugins. A
        config with a ``[model]`` that names no pipeline or preset gets the preset ``fxpasses
        run`` gives it: ``inference``, or ``training`` for ``train = true``.

        Raises:
            ConfigError, UnknownPassError, OptionsError, CycleError.
        """
        cfg = _as_config(config)
        return cls._from_config_obj(cfg, registry=registry)

    @classmethod
    def _from_config_obj(cls, cfg: Config, *, registry: Registry | None = None) -> "Pipeline":
        if registry is None:
            registry = registry_for(cfg)
        if cfg.pipeline is not None and cfg.preset is not None:
            raise ConfigError("give either `pipeline` or `preset`, not both", source=cfg._source)
        if cfg.pipeline is None and cfg.preset is None and cfg.model is not None:
            from .job import with_default_preset  # (job imports this module)

            # what `fxpasses run`/`check` run for it: `inference`, or `training` with train = true
            cfg = with_default_preset(cfg)
        from_preset = cfg.preset is not None
        config_source = cfg._source  # where its [options.NAME] tables are
        if from_preset:
            where = "--preset" if cfg._source == "--preset" or cfg._preset_from_cli else f"{cfg._source}: preset"
            preset = registry.preset(cfg.preset, source=where)
            cfg = cfg.model_copy(update={"pipeline": preset.pipeline, "preset": None})
            cfg._source = f"{cfg._source}: preset {preset.name!r}"
        if cfg.pipeline is None:
            src = (cfg._source or "").lower()
            if ".json" in src:  # written in the file's own syntax
                keys = ('`"pipeline": "pass1,pass2"`', '`"preset": "inference"`', '`"train": true`')
            elif is_yaml_source(src):
                keys = ("`pipeline: pass1,pass2`", "`preset: inference`", "`train: true`")
            else:
                keys = ('`pipeline = "pass1,pass2"`', '`preset = "inference"`', "`train = true`")
            # (a config with a [model] gets `fxpasses run`'s preset first: this one has none)
            raise ConfigError(
                f"no pipeline given: set {keys[0]} (or a list) or {keys[1]}; only a config with "
                f"a {model_table(src)} runs a preset by default (`inference`, or `training` with {keys[2]})",
                source=cfg._source,
            )
        common = dict(
            registry=registry,
            verify=cfg.verify,
            on_error=cfg.on_error,
            atol=cfg.atol,
            rtol=cfg.rtol,
            options=cfg.options,
            # a pipeline given on the command line replaces the config's: options the config
            # sets for passes it no longer has are not typos
            ignore_unused_options=cfg._pipeline_overridden,
            order=cfg.order,
            _from_config=config_source,
            _from_preset=from_preset,
        )
        if cfg._pipeline_from_cli:  # errors in it name the option, not the config file
            return cls(parse_pipeline_string(cfg.pipeline, "--pipeline"), source="--pipeline", **common)
        if isinstance(cfg.pipeline, str):
            return cls(parse_pipeline_string(cfg.pipeline, cfg._source), source=cfg._source, **common)
        return cls(cfg.pipeline, source=f"{cfg._source}: pipeline", **common)

    # ------------------------------------------------------------------ inspection

    def plan(self) -> Plan:
        """The passes in run order, each with why it moved or was pulled in."""
        return self._plan

    def __repr__(self) -> str:
        plan = getattr(self, "_plan", None)  # (a pipeline whose construction raised has none)
        passes = plan.as_pipeline_string() if plan is not None else "<not built>"
        return f"Pipeline({passes!r}, verify={getattr(self, 'verify', None)!r}, on_error={getattr(self, 'on_error', None)!r})"

    # ------------------------------------------------------------------ running

    def run(
        self,
        gm: torch.fx.GraphModule,
        example_inputs: Sequence[Any] | None = None,
        *,
        example_kwargs: Mapping[str, Any] | None = None,
        instruments: Sequence[Any] = (),
        rewrite_limit: "int | RewriteLimit | None" = None,
        reference_module: torch.fx.GraphModule | None = None,
    ) -> RunReport:
        """Run the pipeline over ``gm`` in place and return the report.

        ``example_inputs`` (positional inputs of ``gm``, a list or tuple) and ``example_kwargs``
        (its keyword inputs, a mapping, as ``torch.export.export(model, args, kwargs)`` takes
        them) are needed for ``verify="numeric"`` and by passes that evaluate the graph
        (``propagate_shapes``): the module is called ``gm(*example_inputs, **example_kwargs)``.
        Give the keywords a module was exported with as ``example_kwargs``: its code flattens
        ``(args, kwargs)`` against the exported input spec. Passes see them as
        ``ctx.example_inputs`` (``()`` when only keywords are given) and ``ctx.example_kwargs``.

        ``instruments`` are pluggy plugins (``@fxpasses.hookimpl`` methods for
        ``fxpasses_before_pass`` etc., e.g. :class:`fxpasses.instruments.PrintChanged`) active
        for this run only: a list or tuple of them, or one (None: none). Each is checked
        before any pass runs (:meth:`~fxpasses.Registry.check_instrument`). Instruments
        observe: a hook that changes the graph is put back and reported like one that raises
        (see :meth:`~fxpasses.Registry.call_instruments`).
        ``rewrite_limit=N`` applies only the first ``N`` rewrites of the run (see
        :mod:`fxpasses.rewrites`); each pass report then gives its ``rewrites`` and whether
        the limit ``cut_off`` the pass. A :class:`~fxpasses.rewrites.RewriteLimit` object
        (``limit=None`` to count only) is filled in with every step's range of rewrites.
        ``reference_module``: the module whose outputs numeric verification compares with,
        instead of ``gm`` as given: a GraphModule taking the same inputs, such as the module
        before earlier passes that ran outside this call (a reproducer's ``reference.py``:
        the replay of a failure then holds the failing pass to the difference from the module
        before the whole pipeline, earlier passes' included). It is run, never changed; it
        must return what ``gm`` returns, of the same shapes and dtypes (``UserError`` else).

        Raises:
            PassFailedError: a pass failed and ``on_error`` is ``rollback`` or ``raise``; with
                ``rollback`` the graph is as it was before that pass.
            PluginError: before any pass runs, an instrument is malformed (not an instrument,
                a class instead of an instance, a misspelled or unmarked hook method, an
                argument its hook does not pass, given twice); during the run, with a
                ``strict`` registry, an instrument's hook raised or changed the graph, or,
                strict or not, changed it in a way that could not be put back (what could be
                is put back first, so the graph is what the passes before it made).
            UserError (before any pass runs): ``gm`` is not a GraphModule; ``example_inputs``
                is not a list or tuple (a dict: the message points at ``example_kwargs=``);
                ``example_kwargs`` is not a mapping with ``str`` keys; the module does not take
                these keywords, or misses keywords it was exported with (see
                :func:`fxpasses.inputs.check_accepted`); numeric verification lacks inputs; or,
                with numeric verification, the module does not run on the example inputs.
        """
        if not isinstance(gm, torch.fx.GraphModule):
            from torch.export import ExportedProgram

            hint = ""
            if isinstance(gm, ExportedProgram):
                hint = ": run it on the program's module, ep.module() (an ExportedProgram is not a module)"
            elif isinstance(gm, torch.nn.Module):
                hint = (
                    ": capture the model as a graph first (torch.export.export(model, args).module(), "
                    "torch.fx.symbolic_trace(model), or fxpasses.capture.capture(model, inputs, dialect))"
                )
            raise UserError(f"Pipeline.run takes a torch.fx.GraphModule, got {type(gm).__name__}{hint}")
        steps = self._plan.steps
        needs_numeric = any((s.verify or self.verify) == "numeric" for s in steps)
        example_inputs, example_kwargs = check_example_inputs(example_inputs, example_kwargs)
        if needs_numeric and example_inputs is None:
            raise UserError("numeric verification needs example_inputs (positional) or example_kwargs (keyword)")
        if example_inputs is not None:
            check_accepted(gm, example_inputs, example_kwargs)
        if reference_module is not None and not isinstance(reference_module, torch.fx.GraphModule):
            raise UserError(f"reference_module must be a torch.fx.GraphModule, got {type(reference_module).__name__}")
        limit = rewrite_limit
        if limit is not None and not isinstance(limit, RewriteLimit):
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise UserError(f"rewrite_limit must be an int >= 0, got {limit!r}")
            limit = RewriteLimit(limit)
        if limit is not None and self.snapshot_tensors:
            limit.copy_tensors = True  # (a probe undoes writes no guard sees, as the rollback does)
        with self.registry.instrumented(instruments), _gc_paused():
            return self._run(gm, example_inputs, example_kwargs, steps, needs_numeric, limit, reference_module)

    def _run(
        self,
        gm: torch.fx.GraphModule,
        example_inputs: Sequence[Any] | None,
        example_kwargs: dict[str, Any] | None,
        steps: list[PlanStep],
        needs_numeric: bool,
        limit: RewriteLimit | None = None,
        reference_module: torch.fx.GraphModule | None = None,
    ) -> RunReport:
        t_start = time.perf_counter()
        dialect = detect_dialect(gm)
        report = RunReport(
            dialect=dialect, nodes_before=len(gm.graph.nodes), verification=self.verify, atol=self.atol, rtol=self.rtol
        )
        # the tolerances of the passes that changed the graph and were kept: the difference
        # each was allowed stays allowed to the checks after it (see the class doc)
        allowed = (0.0, 0.0)
        state = TensorState(gm) if needs_numeric else None
        if state is not None:
            # the reference comes from running the module: code its graph no longer holds would
            # make the first pass that recompiles it look wrong (a new-user check)
            stale = stale_code_problem(gm)
            if stale is not None:
                raise InputGraphError(f"numeric verification cannot start: {stale}")
        # the outputs before the pipeline, and what they are besides values (requires_grad,
        # aliases, strides, gradients: fxpasses.verify.OutputFacts)
        # (or of the reference module given: a reproducer's module before the whole pipeline)
        ref_gm, ref_state = gm, state
        if reference_module is not None and state is not None:
            ref_gm, ref_state = reference_module, TensorState(reference_module)
        try:
            reference, reference_facts = (
                _run_module(ref_gm, example_inputs, ref_state, example_kwargs, facts=True) if state is not None else (None, None)
            )
        except UserError as exc:
            if ref_gm is gm:
                raise
            raise UserError(f"the reference module does not run on the example inputs: {exc}") from exc
        if ref_gm is not gm:  # another module: it must return what the graph returns (a check finding
            # otherwise blamed the first pass, "output: shape changed")
            unlike = _unlike_outputs(_run_module(gm, example_inputs, state, example_kwargs), reference)
            if unlike is not None:
                raise UserError(f"the reference module does not return what the graph returns: {unlike}")
        # a module computing in float16/bfloat16: a float64 run, which low-precision results
        # outside the tolerances are judged against (fxpasses.reference64)
        reference64 = (
            float64_reference(ref_gm, example_inputs, example_kwargs, reference, reference_facts, ref_state)
            if state is not None
            else None
        )
        # a graph with dynamic shapes: each pass verified at other sizes it accepts too (a size
        # of the example baked into the graph keeps the example's outputs: fxpasses.other_sizes)
        other: OtherSizes | None = None
        other_reference: tuple[Any, Any, Any] | None = None
        if state is not None:
            other, why = other_sizes(gm, example_inputs, example_kwargs)
            if other is not None:
                try:
                    other_reference = _outputs_at(ref_gm, other, ref_state)
                except UserError as exc:
                    why = f"the module does not run at {other.description()}: {exception_text(exc.__cause__ or exc)[:200]}"
                    other = None
                else:
                    report.notes.append(
                        f"numeric verification ran each pass at other sizes the graph accepts too: {other.description()}"
                    )
            if why is not None:
                report.notes.append(f"numeric verification ran at the example inputs' sizes only, though the graph has symbolic sizes: {why}")
        del ref_gm, ref_state
        # the reference before a skipped pass's unrestorable change moved the outputs, and by
        # how much: later checks hold to it as well (see on_error="skip" below)
        first_reference: tuple[Any, Any, Any, float] | None = None
        last_outputs = (reference, reference_facts)  # of the last numeric check that passed
        notify = self.registry.call_instruments
        spelled: dict[Any, Any] = {}  # nodes whose arguments were found spellable (see _lint)
        analyses: dict[str, Any] = {}
        cache = AnalysisCache()
        queue = collections.deque(steps)
        position = {id(s_): i for i, s_ in enumerate(steps)}  # each step's place in the plan
        # fixpoint groups: each group's steps, the iteration each is in, whether it changed
        members = {id(run[0].group): run for run in Plan(steps).groups()}
        iteration: dict[int, int] = {}
        group_changed: dict[int, bool] = {}

        def group_step_done(step: PlanStep, changed: bool) -> None:
            """After a step of a fixpoint group: at the end of an iteration that changed the
            graph, queue the group's steps again (or note that it stopped unconverged)."""
            group = step.group
            if group is None:
                return
            key = id(group)
            group_changed[key] = group_changed.get(key, False) or changed
            if step is not members[key][-1]:
                return
            if not group_changed.pop(key):
                return
            if iteration[key] < group.max_iterations:
                iteration[key] += 1
                queue.extendleft(reversed(members[key]))
                return
            label = f"fixpoint({','.join(m.name for m in members[key])})"
            note = (
                f"{label} stopped after {group.max_iterations} iteration{'s' if group.max_iterations != 1 else ''} "
                "(max_iterations), the last one still changing the graph: not converged (more iterations may "
                "go on changing it: raise max_iterations, or look for passes that undo each other's rewrites)"
            )
            report.notes.append(note)
            warn(FixpointWarning(note))
        # (id of the step, iteration, analysis) computed for it -> that step: held, so that no
        # later step (an on-demand one, made anew each time) gets its id, and compared by
        # identity (an analysis computed on demand once went without its own requirements)
        on_demand: dict[tuple[int, int, str], PlanStep] = {}
        dirty = False  # graph differs from the compiled code
        clean = False  # the graph passed a lint since it last changed (incremental lint may start from it)
        unverified: list[str] = []  # passes that changed the graph since its last lint, without one
        unlinted: list[str] = []  # every pass that changed the graph without a lint after it
        pristine = True  # no pass has changed the graph yet (it is as the caller gave it)
        names_kept = False  # ... and the graph's name space held every node's name then
        failing = False
        index = -1
        # passes that changed the graph since the outputs were last checked against the
        # reference (numeric verification compares with the module before the pipeline)
        unchecked: list[str] = []
        # effect analysis may share its call_module answers between the run's passes while
        # the module tree stays as it was (fxpasses.effects: module epochs)
        epoch_graphs = [gm.graph]
        new_module_epoch(gm.graph)
        inputs = input_signature(gm.graph)  # how the module is called: every pass keeps it
        io_frame = frame_signature(gm.graph)  # ... and how it packs its inputs and outputs
        try:
            while queue:
                step = queue.popleft()
                if step.group is not None:
                    iteration.setdefault(id(step.group), 1)
                round_ = iteration[id(step.group)] if step.group is not None else 0
                if step.cls.kind == "analysis" and cache.is_current(step.name, step.options):
                    n = len(gm.graph.nodes)
                    report.passes.append(
                        PassReport(
                            step.name, status="cached", nodes_before=n, nodes_after=n, reasons=list(step.reasons), iteration=round_
                        )
                    )
                    group_step_done(step, False)
                    continue
                # (once for each step, and in a fixpoint group once in each iteration)
                needed = [
                    r
                    for r in step.cls.requires
                    if on_demand.get((id(step), round_, r)) is not step and not cache.is_current(r) and self._is_analysis(r)
                ]
                if needed:
                    queue.appendleft(step)
                    for r in reversed(needed):
                        on_demand[(id(step), round_, r)] = step
                        rcls = self._class_of(r)
                        queue.appendleft(
                            PlanStep(r, rcls, self._table_options(r, rcls), None, reasons=[f"on demand: required by {step.name}"])
                        )
                    continue
                index += 1
                verify = step.verify or self.verify
                on_error = step.on_error or self.on_error
                own = (
                    self.atol if step.atol is None else step.atol,
                    self.rtol if step.rtol is None else step.rtol,
                )
                atol, rtol = max(own[0], allowed[0]), max(own[1], allowed[1])
                # what rollback restores from: a journal of what the pass touches when it
                # declares its edits journalable (fxpasses.journal), else a snapshot of everything
                journaled = (
                    step.cls.journal_edits
                    and not step.cls.writes_tensors
                    and step.cls.kind != "analysis"
                    and not self.snapshot_tensors
                    and limit is None
                    and supports_journal(gm)
                )
                if (on_error == "raise" or (journaled and not _is_builtin(step.cls))) and verify != "none" and pristine and not clean:
                    # nothing is rolled back under "raise", and a third-party pass's journal
                    # is trusted for what it does not record (module attributes set directly),
                    # so a failed lint after the pass (or of the graph rolled back after it)
                    # could not tell a graph broken as given from one the pass broke: lint it
                    # as given first (the pass's own lint then looks only at what it edits)
                    try:
                        _lint(gm, as_given=True)
                    except Exception as exc:
                        raise _input_graph_error(exc, f"no pass was run ({step.name!r} was next)") from exc
                    names_kept, clean = names_in_namespace(gm.graph), True
                ctx = PassContext(
                    gm,
                    pass_name=step.name,
                    dialect=dialect,
                    example_inputs=example_inputs,
                    example_kwargs=example_kwargs,
                    analyses=analyses,
                )
                ctx.step, ctx.iteration = position.get(id(step)), round_
                if limit is not None and limit.limit is not None:
                    ctx.rewrites_left = max(limit.limit - limit.count, 0)
                pr = PassReport(step.name, nodes_before=len(gm.graph.nodes), reasons=list(step.reasons), iteration=round_)
                snap = None  # free the previous pass's snapshot first (tensor copies: one set at a time)
                if journaled:
                    # (a journal records no tensors: watching them would walk the whole module
                    # tree, what a snapshot costs; check mode holds writes_tensors=False instead)
                    snap = CheckedJournal(gm, step.name) if checking() else Journal(gm)
                else:
                    snap = Snapshot(gm, copy_tensors=self.snapshot_tensors)
                if not (clean and names_kept):
                    # a node an earlier pass renamed by assigning node.name, which the graph's
                    # name space does not see, would give a node of this pass the same name,
                    # and this (correct) pass would fail lint for it (a final new-user check):
                    # every name in the graph is counted as used first (names are never reused)
                    gm.graph._graph_namespace._used_names.update(n.name for n in gm.graph.nodes)
                clean_before, names_before = clean, names_kept
                # what a journal does not record, and journal_edits=True rules out (moved
                # nodes, assigned node.args or node.target): before a third-party journaled
                # pass, to check its promise after it and put back what it broke (about 50 ms
                # at 100k nodes; the built-in passes' journals are checked by the test suite).
                # Under verify="none" too: an edit the journal missed left the pass "unchanged",
                # so the module was not recompiled and ran its old code, and analyses were
                # served from the cache (a new-user check)
                frame = NodeFrame(gm.graph) if journaled and not _is_builtin(step.cls) else None
                input_versions = _tensor_versions(example_inputs, example_kwargs)
                # the caller's tensors the module holds: guarded whatever the pass declares
                callers = CallersTensors(self._callers_tensors) if self._callers_tensors else None
                input_flags = _input_flags(input_versions)
                notify("fxpasses_before_pass", pass_name=step.name, gm=gm, ctx=ctx)
                t0 = time.perf_counter()
                stage = "creating the pass"  # what was running when an exception came (for its message)
                try:
                    # (its constructor is the pass's code too: a failure there is the pass's)
                    pass_ = step.instance if step.instance is not None else step.cls(step.options)
                    # options are the pass's configuration, the same for every run: what a run
                    # changes in them in place would carry over to the next run (a frozen model
                    # keeps its fields, not the lists and dicts they hold)
                    options = pass_.options
                    options_before = options_state(options)
                    saved_options = _saved_fields(options, options_before)
                    stage = "the pass"
                    try:
                        if journaled:
                            snap.attach()
                            ctx._journal = snap
                        guard = snap.guard() if step.cls.writes_tensors else contextlib.nullcontext()
                        # (each clones a tensor before the pass first writes it)
                        with guard, callers if callers is not None else contextlib.nullcontext():
                            span = None
                            if limit is None:
                                hint = run_pass(pass_, gm, ctx)
                            else:
                                # (rewrites name the plan step that made them: its position,
                                # the same in every iteration of a fixpoint group)
                                hint, span = run_pass_limited(pass_, gm, ctx, limit, position.get(id(step), index))
                                pr.rewrites, pr.cut_off = span.count, span.cut_off
                    finally:
                        ctx.graph = gm.graph
                        if journaled:
                            snap.detach()
                            ctx._journal = None
                    if not step.cls.writes_tensors and limit is None and checking():
                        # (not under a rewrite limit: a probe's undo of a pass writes its tensors back)
                        # check mode: writes_tensors=False is held to as journal_edits=True is
                        # (before the journal's check, whose advice would be about journal_edits)
                        if isinstance(snap, CheckedJournal):
                            snap.undeclared_writes()
                        elif isinstance(snap, Snapshot) and snap.write_guard is None and snap.tensor_copies is None:
                            hold_writes_tensors(snap, step.name)
                    if isinstance(snap, CheckedJournal):
                        snap.verify()  # check mode: the journal undoes exactly what the pass did
                    if frame is not None:
                        stage = "checking what the pass changed"
                        unjournaled = frame.unjournaled(snap)
                        if unjournaled:
                            raise VerificationError(
                                f"{step.name!r} declares journal_edits=True but edited the graph outside its "
                                f"journal: {_first_ones(unjournaled, '; ')}"
                                + " (moving an existing node with prepend/append, assigning its args, target, op or "
                                "name, and linking or unlinking nodes by hand are not allowed then: set journal_edits = "
                                "False, or use torch.fx's editing methods and the PassContext: ctx.rename for a name)"
                            )
                        stage = "the pass"
                    if verify == "numeric":
                        # numeric verification runs the module, which may write tensors (batch
                        # norm statistics): note now which ones the pass wrote. Otherwise
                        # nothing runs before a restore, which works that out itself.
                        snap.pass_done()
                    stage = "checking what the pass changed"
                    wrote = _written(input_versions)
                    if wrote:
                        raise VerificationError(f"the pass {wrote}")
                    held = callers.written() if callers is not None else None
                    if held:
                        raise VerificationError(
                            f"the pass wrote the model's parameter(s)/buffer(s) {', '.join(map(repr, held))} in place "
                            "or gave them new data, which freeze made constants of the graph: they are the caller's "
                            "tensors, which the uncompiled model reads too (put back); a pass must copy one before "
                            "changing it"
                        )
                    held = callers.flags_changed() if callers is not None else None
                    if held:
                        raise VerificationError(
                            f"the pass changed requires_grad or .grad of the model's parameter(s)/buffer(s) "
                            f"{', '.join(map(repr, held))}, which freeze made constants of the graph: they are the "
                            "caller's tensors, which the uncompiled model reads too (put back); a pass must copy one "
                            "before changing it"
                        )
                    flagged = flag_changes(input_flags)
                    if flagged:
                        raise VerificationError(
                            f"the pass changed the example input(s) {', '.join(flagged)}: they are the caller's "
                            "tensors, handed to the pass as they are (for a TorchDynamo graph, the model's "
                            "parameters); a pass must not change them"
                        )
                    if pass_.options is not options:
                        pass_.options = options
                        raise VerificationError(
                            "the pass replaced its options (self.options): they are its configuration, the "
                            "same for every run; keep what a run collects on the pass instance or in ctx"
                        )
                    if options_before is not None:
                        what = changed_option(options, options_before)
                        if what is not None:
                            if saved_options is not None:  # as they were, for the next run
                                options.__dict__.update(saved_options)
                            raise VerificationError(
                                f"the pass changed its options in place: {what}; they are its configuration, "
                                "the same for every run (put back), and a change would carry over to the next "
                                "run: keep what a run collects on the pass instance or in ctx"
                            )
                    if not _is_truth_value(hint):  # e.g. "no", [1], an array, a tensor
                        raise VerificationError(
                            f"the pass returned {type(hint).__name__} {_short_repr(hint)}, not True "
                            "(changed), False (unchanged) or None (unknown)"
                        )
                    # a pass the rewrite limit kept from running changed nothing (its probe
                    # put back what its hooks did, which moved tensor versions). A True
                    # stands for what is verified (a write through `.data` moves no version
                    # counter: only the pass can tell of it). What the report says and what a
                    # fixpoint group's convergence is judged by is what the snapshot of a pass
                    # without a journal sees (graph, module tree, tensors written,
                    # requires_grad): a GraphPass returning True for nothing kept its group
                    # from converging (a new-user check); a journaled pass's True is its
                    # rewrites, which its journal recorded
                    observed = (span is None or span.ran) and (not hint or not journaled) and snap.changed()
                    changed = bool(hint) or observed
                    seen = changed if journaled else observed
                    if changed and step.cls.kind == "analysis":
                        if hint and not observed:
                            raise VerificationError(
                                f"analysis pass {step.name!r} returned {_short_repr(hint)}, which says it changed "
                                "the graph: an analysis leaves the graph as it is and returns False or None "
                                "(its result goes in ctx.analyses)"
                            )
                        # (a torch.cond branch's graph edited is that, not its recompile's '_code' rebound)
                        if graph_changed(snap):
                            nodes = snap.node_changes()
                            what = f"the graph ({_first_ones(nodes, ', ')})" if nodes else "the graph"
                        else:
                            what = snap.subgraph_change() or (
                                f"the module ({snap.module_change() or 'its submodules, attributes, hooks or tensors'})"
                            )
                        raise VerificationError(
                            f"analysis pass {step.name!r} changed {what}: an analysis (kind = \"analysis\") leaves "
                            "the graph and module as they are and hands its result over in ctx.analyses; a pass "
                            "meant to rewrite is a transform (kind = \"transform\", the default)"
                        )
                    if changed and verify != "none":
                        stage = "graph lint"
                        # from a clean graph, only what a journaled pass touched can be wrong
                        whole = _lint(
                            gm,
                            spelled,
                            snap,
                            edits=snap if journaled and clean else None,
                            names_kept=names_kept,
                            journal=snap if journaled else None,
                            inputs=inputs,
                            frame=io_frame,
                            # a third-party journal is trusted for the module tree: what every
                            # call_module/get_attr target resolves to is checked again
                            all_targets=frame is not None,
                        )
                        if whole:
                            names_kept = names_in_namespace(gm.graph)
                        clean = True
                        unverified.clear()
                    elif changed:
                        clean = False  # unverified
                        unverified.append(step.name)
                        unlinted.append(step.name)
                    if changed:
                        dirty = True
                        pristine = False
                    if verify == "numeric" and changed:
                        stage = "recompiling the module"
                        if journaled:
                            snap.module(gm)  # recompile() rebinds the root's code attributes
                        gm.recompile()
                        dirty = False
                        stage = "numeric verification"
                        try:
                            # from the module as the pass left it (it may have written
                            # weights), back to that after the call
                            actual, facts = call_isolated(gm, example_inputs, TensorState(gm), example_kwargs, facts=True)
                        except Exception as exc:
                            raise _NoLongerRuns(
                                f"the module no longer runs on the example inputs: {exception_text(exc)}",
                                snap.node_changes(),
                                _running_node(gm, exc),
                            ) from exc
                        try:
                            # requires_grad, aliasing, strides, input gradients too
                            err = compare_results(actual, facts, reference, reference_facts, atol, rtol, reference64)
                        except Exception as exc:  # not a mismatch: the outputs cannot be compared
                            raise UserError(
                                f"numeric verification cannot compare the module's outputs: "
                                f"{exception_text(exc)[:300]} (give example inputs whose "
                                "outputs hold real values, not meta or fake tensors)"
                            ) from exc
                        report.max_abs_error = max(report.max_abs_error or 0.0, err.max_abs)
                        if not err.message and first_reference is not None:
                            # after a rebase (below): the module before the pipeline too, with
                            # what the skipped pass moved the outputs by allowed besides, so
                            # the passes' differences still do not add up
                            ref0, facts0, ref64_0, moved_by = first_reference
                            err0 = compare_results(actual, facts, ref0, facts0, atol + moved_by, rtol, ref64_0)
                            if err0.message:
                                err = err0
                                err.message = (
                                    f"{err0.message} (against the module before the pipeline, allowing besides the "
                                    f"{moved_by:.3g} a skipped pass moved the outputs by)"
                                )
                        if err.message:
                            raise _OutputsDiffer(err.message, snap.node_changes(), err)
                        if other is not None and other_reference is not None:
                            _verify_other_sizes(gm, other, other_reference, atol, rtol, snap)
                        last_outputs = (actual, facts)
                except Exception as exc:
                    pr.seconds = time.perf_counter() - t0
                    if isinstance(exc, JournalMismatch):  # check mode: a wrong declaration, not a pass failure
                        raise
                    clean, names_kept = clean_before, names_before  # rolled back (or raised)
                    # the caller's tensors put back whatever on_error says (the user's model)
                    put = callers.restore() if callers is not None else []
                    # each restore puts back the graph's attributes as recorded, the module
                    # epoch among them: a new one after it (the pass may have changed modules,
                    # and effect answers about them were shared under the old one)
                    if isinstance(exc, HookError) and reports_users_mistake(exc.cause):
                        # the pass reports a user error (e.g. missing example inputs): undo
                        # what it did and let the user see the error itself
                        snap.restore()
                        put_back_flags(input_flags)
                        _new_epoch(gm, epoch_graphs)
                        cause = exc.cause
                        text = str(cause)
                        if step.name not in text and cause.args == (text,):  # which pass says so
                            cause.args = (f"pass {step.name!r}: {text}",)
                        raise cause from None
                    if isinstance(exc, UserError):  # verification could not be done: not the pass's fault
                        snap.restore()
                        put_back_flags(input_flags)
                        _new_epoch(gm, epoch_graphs)
                        raise
                    failure = self._failure(
                        step.name,
                        exc,
                        snap,
                        on_error,
                        stage,
                        hooks=issubclass(step.cls, NodePass),
                        put_back=[callers.tensors[n] for n in put] if callers is not None else (),
                    )
                    if step.group is not None:  # which run of the step it was
                        failure.notes.append(
                            f"in iteration {round_} of its fixpoint group (at most {step.group.max_iterations})"
                        )
                    chosen = self._chosen_note(step.name, step.cls)
                    if chosen:
                        failure.notes.append(chosen)
                    _new_epoch(gm, epoch_graphs)
                    wrote = _written(input_versions) if stage == "the pass" else None
                    if wrote:  # (checked after a pass that returned: its failure says it)
                        failure.notes.append(f"before it failed, the pass {wrote}")
                    if put and stage == "the pass":
                        failure.notes.append(
                            "before it failed, the pass changed the model's parameter(s)/buffer(s) "
                            f"{', '.join(map(repr, put))} (their values, data, requires_grad or .grad), which freeze "
                            "made constants of the graph: put back"
                        )
                    flagged = flag_changes(input_flags)
                    if flagged and failure.rolled_back:  # what a rollback can put back
                        put_back_flags(input_flags)
                        failure.notes.append(
                            f"requires_grad and .grad of the example input(s) the pass changed were put back: {', '.join(flagged)}"
                        )
                    elif flagged and stage == "the pass":
                        failure.notes.append(f"before it failed, the pass changed the example input(s) {', '.join(flagged)}")
                    put_back = frame.put_back() if frame is not None and failure.rolled_back else []
                    if put_back is None:  # the journal's restore left other nodes: not restored
                        failure.rolled_back = False
                        failure.notes.append(
                            f"{step.name!r} declares journal_edits=True but erased or inserted nodes without "
                            "torch.fx's node hooks: the graph could not be restored, and the run stops here "
                            "whatever on_error says (FXPASSES_CHECK_JOURNAL=1 checks the declaration)"
                        )
                    if failure.rolled_back and type(snap) is Journal and not _is_builtin(step.cls):
                        # a journal undoes what it recorded: what the pass promised is all it did
                        failure.from_journal = True
                        failure.notes.append(
                            f"{step.name!r} declares journal_edits=True, so the restore undid its edits made "
                            "through torch.fx's editing methods and the PassContext"
                            + (
                                ", and put back the nodes' order, ops, targets, arguments and names; an edit of node meta or "
                                "module attributes made any other way is not recorded and stays"
                                if frame is not None
                                else "; an edit made any other way (assigning node.args, node.target, ...) is not "
                                "recorded and stays"
                            )
                            + ": run with FXPASSES_CHECK_JOURNAL=1 to check the declaration"
                        )
                        if clean_before and put_back is not None:
                            # the graph passed lint before the pass: one failing it now holds an
                            # edit the journal missed (a submodule deleted directly, ...)
                            try:
                                _lint(gm, as_given=True)
                            except Exception as broken:  # noqa: BLE001 - any lint failure is the answer
                                put_back = None  # (not restored: the run stops, as below)
                                failure.notes.append(
                                    f"the graph fails lint after that restore ({exception_line(broken)}) and passed it "
                                    f"before {step.name!r}: the pass changed what its journal does not record (a "
                                    "submodule or module attribute deleted or set without ctx.before_module_edit, for "
                                    "one), so the run stops here whatever on_error says"
                                )
                    if put_back:
                        failure.notes.append(
                            f"{step.name!r} declares journal_edits=True but changed what its journal does not "
                            f"record; put back from a record made before the pass: {_first_ones(put_back, ', ')}"
                        )
                    if not clean_before and failure.rolled_back and stage in ("the pass", "graph lint"):
                        # the pass failed (in its code, or at the run's first lint of the whole
                        # graph) on a graph no lint has passed: was it broken before this pass?
                        self._blame_before(gm, step.name, failure, pristine, unverified, exc, stage)
                    if isinstance(exc, _OutputsDiffer):
                        failure.tolerances = (atol, rtol)  # (bisection judges its trials by them)
                        # the pass said it changes the outputs on purpose (ctx.changes_outputs):
                        # why, and how to accept it
                        failure.notes.extend(ctx.output_changes)
                        hint = _tolerance_hint(step, exc.comparison) if ctx.output_changes else None
                        if hint is not None:
                            failure.notes.append(hint)
                        if exc.changes:
                            failure.notes.append(_changes_note(step.name, exc.changes))
                    if isinstance(exc, _OutputsDiffer) and unchecked:
                        failure.notes.append(
                            self._earlier_blame(
                                gm,
                                example_inputs,
                                example_kwargs,
                                (reference, reference_facts, reference64),
                                unchecked,
                                failure.rolled_back,
                                (report.atol, report.rtol),
                            )
                        )
                    if isinstance(exc, _OutputsDiffer) and limit is None and not ctx.output_changes:
                        # (not when bisecting: it runs with a limit; nor for a pass that said
                        # why it changes the outputs)
                        failure.notes.append(self._bisect_hint)
                    # rolled back: the compiled code may have been replaced; kept (raise): the
                    # broken graph is what the module should run, for debugging
                    dirty = True
                    pr.status = "skipped" if on_error == "skip" and put_back is not None else "failed"
                    pr.error = str(failure)
                    pr.nodes_after = len(gm.graph.nodes)
                    pr.rolled_back = failure.rolled_back
                    if failure.rolled_back:
                        # what it counted describes changes undone: not the pass's counters
                        pr.rolled_back_counters = dict(ctx.counters)
                    else:  # on_error="raise": the graph keeps what it counted, and its changes
                        pr.counters = dict(ctx.counters)
                        try:
                            pr.changed = bool(snap.changed())
                        except Exception:  # noqa: BLE001 - a graph too broken to compare: say changed
                            pr.changed = True
                    pr.skipped = list(ctx.skipped)
                    pr.notes = list(ctx.output_changes)
                    report.passes.append(pr)
                    notify("fxpasses_pass_failed", pass_name=step.name, gm=gm, error=failure)
                    # the failure's cause holds a traceback through this frame, which holds
                    # the failure: drop the frame's reference, or the two (and the pass's
                    # snapshot, context, ...) make a cycle left to the cyclic collector
                    if on_error == "skip" and put_back is not None:  # (a graph not restored: stop)
                        if wrote or snap.unrestorable:
                            from .errors import SkippedPassWarning

                            lost = wrote or ("changed tensors no rollback could restore: " + ", ".join(snap.unrestorable))
                            warnings.warn(
                                SkippedPassWarning(
                                    f"pass {step.name!r} failed and was skipped (on_error='skip'), but before it "
                                    f"failed it {lost}: {failure.reason}"
                                ),
                                stacklevel=3,
                            )
                            now = None
                            if state is not None:
                                with contextlib.suppress(UserError):  # (no longer runs: each later check says so)
                                    now = _run_module(gm, example_inputs, TensorState(gm), example_kwargs, facts=True)
                            moved = None
                            if now is not None:
                                tol = (max(self.atol, allowed[0]), max(self.rtol, allowed[1]))
                                moved = compare_results(now[0], now[1], reference, reference_facts, *tol, reference64)
                            if moved is not None and moved.message:
                                # what this pass alone moved them by: against the outputs before it
                                by = compare_results(now[0], now[1], *last_outputs, 0.0, 0.0).max_abs
                                if first_reference is None:
                                    first_reference = (reference, reference_facts, reference64, by)
                                else:  # (a second such pass: what both moved the outputs by)
                                    first_reference = (*first_reference[:3], first_reference[3] + by)
                                last_outputs = now
                                # what it left changed the outputs, and the module before the
                                # pipeline cannot be had again: every later pass was blamed for
                                # it (an adversarial check). The passes after it are held to the
                                # module as it left it (with what earlier passes were allowed
                                # still allowed: the differences may add up from here)
                                reference, reference_facts = now
                                reference64 = float64_reference(
                                    gm, example_inputs, example_kwargs, reference, reference_facts, TensorState(gm)
                                )
                                if other is not None:  # (the same at the other sizes, or no more checks there)
                                    other_reference = None
                                    with contextlib.suppress(UserError):
                                        other_reference = _outputs_at(gm, other, TensorState(gm))
                                report.notes.append(
                                    f"{step.name!r} {lost} before it failed and was skipped, which changed the outputs "
                                    f"({_difference(moved)} against the module before the pipeline): the "
                                    "passes after it were checked against the module as it left it"
                                )
                        del failure
                        group_step_done(step, False)  # (rolled back: it changed nothing)
                        continue
                    failure.report = report  # the passes that ran, this one's row last
                    try:
                        raise failure from failure.__cause__
                    finally:
                        del failure
                except BaseException as exc:  # KeyboardInterrupt, SystemExit: undo, then go on
                    # the steps of a failure's restore (the caller's tensors whatever on_error
                    # says, a third-party journal's node frame): an interrupt skipped them, and
                    # said "rolled back" over a pass's edits left in place (a rollback attack)
                    put = callers.restore() if callers is not None else []
                    said = f"fxpasses: {step.name!r} was interrupted; "
                    if on_error != "raise":
                        snap.restore()
                        put_back_flags(input_flags)
                        put_back = frame.put_back() if frame is not None else []
                        lost = _lost_tensors(snap, [callers.tensors[n] for n in put] if callers is not None else ())
                        if put_back is None:
                            said += (
                                "the graph could not be restored: the pass declares journal_edits=True but erased or "
                                "inserted nodes without torch.fx's node hooks"
                            )
                        else:
                            said += "the graph was rolled back to before it"
                            if put_back:
                                said += f" (and what its journal does not record put back: {_first_ones(put_back, ', ')})"
                        if lost:
                            said += f"; these tensors it changed could not be restored (snapshot_tensors=True restores them): {', '.join(lost)}"
                    else:
                        said += "the graph is as the pass left it (on_error='raise')"
                    if put:
                        said += f"; the model's parameter(s)/buffer(s) it changed, which freeze made constants, were put back: {', '.join(map(repr, put))}"
                    _add_note(exc, said)
                    _new_epoch(gm, epoch_graphs)
                    dirty = True
                    raise
                pr.seconds = time.perf_counter() - t0
                pr.changed = seen
                group_step_done(step, seen)  # (before the test of what is left to run)
                # (with no pass left, nothing would read the answers: no need to ask)
                if changed and not (journaled and queue and snap.module_answers_hold()):
                    _new_epoch(gm, epoch_graphs)
                if changed:
                    allowed = (max(allowed[0], own[0]), max(allowed[1], own[1]))
                    report.atol, report.rtol = max(self.atol, allowed[0]), max(self.rtol, allowed[1])
                if verify == "numeric" and changed:
                    unchecked.clear()  # the outputs match the reference again
                elif changed:
                    unchecked.append(step.name)
                if step.cls.kind == "analysis":
                    cache.computed(step.name, step.options)
                    analyses.setdefault(step.name, True)
                elif changed:
                    for name in cache.transformed(step.cls.preserves):
                        analyses.pop(name, None)  # a stale result must not be read
                pr.nodes_after = len(gm.graph.nodes)
                pr.counters = dict(ctx.counters)
                pr.skipped = list(ctx.skipped)
                pr.notes = list(ctx.output_changes)
                report.passes.append(pr)
                notify("fxpasses_after_pass", pass_name=step.name, gm=gm, ctx=ctx, report=pr)
        except BaseException:
            failing = True
            raise
        finally:
            for graph in dict.fromkeys([*epoch_graphs, gm.graph]):  # a pass may have replaced it
                end_run(graph)
            if dirty:
                try:
                    gm.recompile()
                except Exception as exc:
                    if not failing:  # a graph kept broken by on_error="raise" may not compile
                        changers = [p.label for p in report.passes if p.changed]
                        if unlinted:
                            hint = (
                                f"run without a lint after them: {', '.join(dict.fromkeys(unlinted))}; "
                                "verify='lint' checks each pass's graph and rolls back the one that breaks it"
                            )
                        else:
                            hint = (
                                "each was linted, and lint found nothing: a gap in fxpasses' lint, please "
                                "report it with this graph"
                            )
                        raise VerificationError(
                            f"the graph after the pipeline does not compile: {exception_text(exc)} "
                            f"(passes that changed it: {', '.join(changers) or 'none'}, {hint}). The module's "
                            "graph holds what the passes did; its code is still what it was before the pipeline"
                        ) from exc
            report.nodes_after = len(gm.graph.nodes)
            report.analyses = dict(analyses)  # (those still current: stale ones were dropped)
            report.seconds = time.perf_counter() - t_start
            if limit is not None:
                report.rewrites = limit.count
                report.rewrite_limit = limit.limit
        return report

    def _class_of(self, name: str) -> type[Pass]:
        """The pass class named ``name``: one of this pipeline's entries (a class given
        directly needs no registration) or else the registry's.

        Raises:
            UnknownPassError: neither has it.
        """
        for step in self._steps:
            if step.name == name:
                return step.cls
        return self.registry.get(name)

    def _is_analysis(self, name: str) -> bool:
        try:
            return self._class_of(name).kind == "analysis"
        except Exception:  # an unknown name was reported when the plan was made
            return False

    def _earlier_blame(
        self,
        gm: torch.fx.GraphModule,
        example_inputs: Sequence[Any] | None,
        example_kwargs: Mapping[str, Any] | None,
        reference: tuple[Any, Any, Any],
        unchecked: list[str],
        rolled_back: bool,
        tolerances: tuple[float, float],
    ) -> str:
        """A note for a numeric mismatch after passes that changed the graph unverified: did
        the outputs (or their facts, ``reference``: ``(outputs, OutputFacts, Float64Reference or
        None)``) differ from the
        reference already before the failing pass, beyond ``tolerances`` (``(atol, rtol)``: what
        the outputs were held to before it)?"""
        names = ", ".join(unchecked)
        if rolled_back:
            gm.recompile()  # the module as it was before the failing pass
            try:
                before, facts = call_isolated(gm, example_inputs, TensorState(gm), example_kwargs, facts=True)
            except Exception:  # noqa: BLE001 - a note only
                before = facts = None
            if facts is not None:
                err = compare_results(before, facts, reference[0], reference[1], *tolerances, reference[2])
                if err.message:
                    return (
                        f"the outputs already differed from the module before the pipeline before "
                        f"this pass ({_difference(err)}): the difference comes from an "
                        f"earlier pass that changed the graph without numeric verification ({names})"
                    )
                return (
                    "before this pass the outputs still matched the module before the pipeline: "
                    "this pass changed them"
                )
        return (
            f"earlier passes changed the graph without numeric verification ({names}); the "
            "difference may come from them"
        )

    @staticmethod
    def _blame_before(
        gm: torch.fx.GraphModule,
        name: str,
        failure: PassFailedError,
        pristine: bool,
        unverified: list[str],
        exc: BaseException,
        stage: str = "graph lint",
    ) -> None:
        """After pass ``name`` failed (``stage``: in its own code, ``"pass"``, or at the run's
        first lint of the whole graph) on a graph no lint had passed, and was rolled back: lint
        the graph as it was before the pass (its structure; arguments it held then are not the
        pass's doing). When that fails too, the graph was broken before the pass: raise
        :class:`InputGraphError` if no pass had changed the graph (it is the caller's), else
        add a note naming the passes that changed it without a lint."""
        if not failure.rolled_back:  # (a restore that could not be completed: nothing to lint)
            return
        try:
            _lint(gm, as_given=True)
        except Exception as before:  # noqa: BLE001 - any lint failure is the answer
            if pristine:
                what = (
                    f"pass {name!r}, the first to change it, was rolled back and is not at fault"
                    if stage == "graph lint"
                    else f"pass {name!r} failed on it ({exception_line(getattr(exc, 'cause', None) or exc)}) and was rolled back"
                )
                raise _input_graph_error(before, what) from exc
            failure.notes.append(
                f"the graph already failed this lint before {name!r} ran ({exception_line(before)}); since "
                "its last lint it was changed, without one, by: " + ", ".join(repr(n) for n in unverified)
            )

    def _chosen_note(self, name: str, cls: type) -> str | None:
        """For a pass whose name several plugins register, where ``prefer`` chose ``cls``:
        which one it is (the user may expect another, e.g. the built-in pass, whose options a
        preset of the built-in passes gives it)."""
        try:
            candidates = self.registry.candidates(name)
        except Exception:
            return None
        ran = [c for c in candidates if c.cls is cls]
        if len(candidates) < 2 or not ran:
            return None
        others = " and ".join(c.source for c in candidates if c is not ran[0])
        return f"{name!r} here is the pass of {ran[0].source}, chosen by `prefer` over {others}"

    def _make_passes(self) -> None:
        """Make each pass of the plan as a run makes it (its class with its options), for
        ``fxpasses check``: a constructor that raises fails here as it fails a run.

        Raises:
            PassFailedError: at stage ``"creating the pass"``, naming the pass and where in its
                code the constructor raised.
        """
        for step in self.plan().steps:
            if step.instance is None:
                try:
                    step.cls(step.options)
                except Exception as exc:
                    raise self._failure(step.name, exc, None, "raise", "creating the pass", hooks=False) from exc

    def _failure(
        self,
        name: str,
        exc: BaseException,
        snap: Snapshot | None,
        on_error: str,
        stage: str = "graph lint",
        *,
        hooks: bool = True,
        put_back: Sequence[torch.Tensor] = (),
    ) -> PassFailedError:
        """The error for pass ``name`` failing with ``exc`` at ``stage``, after putting the
        graph back from ``snap`` (unless ``on_error`` is ``raise``; None: nothing ran to put
        back, ``on_error`` is ``raise``). ``hooks``: whether the pass
        is a node pass (whose hooks' answers the notes may blame)."""
        notes: list[str] = []
        rolled_back = False
        where: dict[str, Any] = {}
        node: Node | None = None
        if isinstance(exc, _NoLongerRuns):
            where, node = exc.place, exc.node
        elif stage == "graph lint":  # the node the lint is about, described before a rollback
            if isinstance(exc, _NodeProblem):
                node = exc.node
            elif not isinstance(exc, VerificationError):  # torch's Graph.lint() raised
                node = lint_culprit(snap.gm)
                cycle = cycle_through(node) if node is not None else None
                if cycle:
                    chain = " -> ".join(f"%{n.name}" for n in cycle)
                    note = f"the nodes use each other in a cycle ({chain}, each using the next)"
                    if hooks:
                        note += (
                            ": this is what a hook returning Replace(new) makes when `new` was built from the node it "
                            "visited (replacing every use of that node makes `new` use itself). To wrap the visited node, build "
                            "the new nodes after it (`with ctx.graph.inserting_after(node):`), replace its other uses "
                            "yourself (`node.replace_all_uses_with(new, delete_user_cb=lambda user: user is not "
                            "first)`, `first` being the new node that takes `node`) and return None"
                        )
                    else:
                        note += ", which no order of the nodes can define before use: an edit made a node use one of its own users"
                    notes.append(note)
            where = failure_place(node) if node is not None else {}
        if on_error != "raise":
            snap.restore()
            rolled_back = True
            lost = _lost_tensors(snap, put_back)
            if lost:
                # (a snapshot with a write guard: the pass declares writes_tensors=True)
                how = "" if getattr(snap, "write_guard", None) is not None else "declares writes_tensors=False, "
                notes.append(
                    f"these tensors were changed by the pass where no write guard saw it (the pass {how}"
                    "rebinds .data or swaps tensors, or writes through numpy) and "
                    "could not be restored (run with snapshot_tensors=True to restore them): " + ", ".join(lost)
                )
        if rolled_back and isinstance(exc, HookError):
            _name_after_rollback(exc.place, exc.node)
        elif rolled_back and where:
            _name_after_rollback(where, node)
        if isinstance(exc, HookError):
            failure = hook_failure(name, exc, rolled_back=rolled_back, notes=notes)
            failure.raised_at = self._raised_at(name, exc.cause)
            if exc.returned_by is not None:  # what the hook returned, not its code, failed
                failure.notes.insert(0, f"the action was returned by the hook {hook_name(exc.returned_by)}")
        else:
            reason = f"verification failed: {exc}" if isinstance(exc, VerificationError) else f"{stage} failed: {exception_text(exc)}"
            failure = PassFailedError(name, reason, rolled_back=rolled_back, notes=notes, **where)
            failure.__cause__ = exc
            if stage in ("the pass", "creating the pass"):
                failure.raised_at = self._raised_at(name, exc)
        failure.stage = stage
        return failure

    def _raised_at(self, name: str, exc: BaseException) -> str | None:
        """Where in pass ``name``'s own code ``exc`` was raised (:func:`~fxpasses.errors.raising_frame`),
        with the distribution and version of a plugin's pass; None when no frame is the pass's."""
        from .errors import raising_frame
        from .registry import BUILTIN_DISTRIBUTION

        frame = raising_frame(exc)
        if frame is None:
            return None
        info = self._registered(name, next((s.cls for s in self.plan().steps if s.name == name), None))
        if info is not None and info.distribution and info.distribution != BUILTIN_DISTRIBUTION:
            return f"{frame} ({info.source})"
        return frame

    def _registered(self, name: str, cls: type | None) -> Any:
        """The registry's :class:`~fxpasses.registry.PassInfo` of pass ``name`` when it is
        registered as this very class (``cls`` None: any), else None (a pass class given
        directly, or another class of that name): for messages naming its distribution."""
        try:
            info = self.registry.info(name)
        except Exception:  # noqa: BLE001 - not registered
            return None
        return info if cls is None or info.cls is cls else None


# ------------------------------------------------------------------------------------ helpers


class _OutputsDiffer(VerificationError):
    """Numeric verification: the outputs differ from the module before the pipeline.
    ``changes``: what the pass did to the nodes (``Journal.node_changes``)."""

    def __init__(self, message: str, changes: list[str], comparison: Comparison | None = None) -> None:
        super().__init__(message)
        self.changes = changes
        self.comparison = comparison  # (how far they moved: for a pass that moves them on purpose)


class _NodeProblem(VerificationError):
    """Lint: what is wrong is about ``node`` (named by the failure, with its source line)."""

    def __init__(self, message: str, node: Node) -> None:
        super().__init__(message)
        self.node = node


class _NoLongerRuns(_OutputsDiffer):
    """Numeric verification: the module raised on the example inputs. ``place``: where, the
    node whose code raised (:func:`_running_node`; :func:`~fxpasses.context.failure_place`,
    taken before a rollback puts the graph's nodes back)."""

    def __init__(self, message: str, changes: list[str], node: Node | None) -> None:
        super().__init__(message, changes)
        self.node = node
        self.place = failure_place(node)


def _name_after_rollback(place: dict[str, Any], node: Node | None) -> None:
    """Add to ``place["node"]`` (described as the pass left the node) what the rollback gave
    the node back, where it differs: its name (``name_after_rollback``; a pass that renamed
    nodes and failed named the node by a name the restored graph does not have), and its op,
    target, arguments (``after_rollback``, the fields that differ: a pass that retargeted or
    rewired the node before failing)."""
    desc = place.get("node")
    if node is None or desc is None:
        return
    if not any(n is node for n in node.graph.nodes):  # (once, on the error path) one the pass made
        return
    if node.name != desc.get("name"):
        desc["name_after_rollback"] = node.name
    if desc.get("erased"):  # its arguments as the pass left it are not known
        return
    now = describe_node(node)
    changed = {k: now[k] for k in ("op", "target", "args", "kwargs") if now[k] != desc.get(k)}
    if changed:
        desc["after_rollback"] = changed


def _running_node(gm: torch.fx.GraphModule, exc: BaseException) -> Node | None:
    """The node of ``gm`` whose generated code was running when ``exc`` was raised by
    ``gm``'s ``forward`` (its line in the traceback, through ``recompile()``'s line map, as
    TorchDynamo maps a GraphModule's lines to nodes); None when the traceback does not pass
    through that code or the line maps to no node."""
    code = getattr(getattr(type(gm), "forward", None), "__code__", None)
    lines = getattr(gm, "_lineno_map", None)
    if code is None or not lines:
        return None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            index = lines.get(tb.tb_lineno - code.co_firstlineno)
            return None if index is None else next(itertools.islice(gm.graph.nodes, index, None), None)
        tb = tb.tb_next
    return None


#: How many of the nodes a pass changed a numeric verification failure names.
CHANGES_SHOWN = 5

def bisect_hint(command: str) -> str:
    """The note of a numeric verification failure saying how to find the rewrite at fault:
    run ``command`` (``fxpasses bisect fx.toml ...``)."""
    return f"to find the rewrite that changed the outputs, run {command}"


#: :func:`bisect_hint` where the run's own command is not known (Python).
BISECT_HINT = bisect_hint(
    "`fxpasses bisect CONFIG` with this run's config, or in Python "
    "`fxpasses.bisect.bisect(pipeline, gm, example_inputs, example_kwargs=...)`"
)


def _close_step(name: str, steps: list[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest pass names among ``steps`` to ``name`` (a
    misspelt ``[options.X]`` table, a ``--print-after`` name not in the pipeline), or ``""``."""
    close = close_names(name, steps, n=2)
    return f" ({did_you_mean(close)[2:]})" if close else ""


#: the largest error, as a fraction of the outputs' largest magnitude, that a pass changing
#: the outputs on purpose is told to accept with a tolerance: an approximation's (a tanh gelu
#: moves a float32 model's outputs by about 1e-4 of their size); a larger change (active
#: dropout removed: whole elements) is no tolerance's to accept
_TOLERABLE_FRACTION = 1e-2


def _tolerance_hint(step: PlanStep, cmp: Comparison | None) -> str | None:
    """How to accept the outputs a pass changes on purpose (``ctx.changes_outputs``): the
    tolerance ``atol`` in its pipeline entry, with a value from how far they moved here (the
    largest absolute error, rounded up to one significant digit), written into the entry's
    own settings. None unless the outputs' values differ (not their structure, nor their
    gradients, which the figure does not bound) by at most :data:`_TOLERABLE_FRACTION` of
    their largest magnitude: no tolerance is the answer then, and the pass's own reason says
    what is."""
    if cmp is None or not cmp.values_differ or not math.isfinite(cmp.max_abs) or cmp.max_abs <= 0:
        return None
    if cmp.max_abs > _TOLERABLE_FRACTION * cmp.scale:
        return None
    exponent = math.floor(math.log10(cmp.max_abs))
    digit = math.ceil(cmp.max_abs / 10**exponent * (1 - 1e-12))
    if digit == 10:
        digit, exponent = 1, exponent + 1
    atol = f"{digit}e{exponent}"
    # the entry's settings with atol in them; its options stand as "{...}" (they may come from
    # a config's [options.NAME] table, which an entry giving them again would clash with)
    settings = step.settings(atol=atol)
    options = "{...}" if changed_options(step.options) else ""
    where = " (its options as you gave them in the {...})" if options else ""
    return (
        f"to accept outputs that {step.name!r} changes on purpose, give its pipeline entry the tolerance "
        f"atol={atol}: {step.name}{options}[{','.join(settings)}] in a pipeline string{where}, atol = {atol} in a "
        f"config's pass entry, {{\"name\": ..., \"atol\": {atol}}} in a Python pipeline list; or verify=lint for it. "
        f"The outputs moved by up to {cmp.max_abs:.3g} on these inputs, and other inputs may move them further"
    )


def _difference(cmp: Comparison) -> str:
    """How outputs differ, for a note: the largest error, or where no values were compared (a
    shape changed) the mismatch itself."""
    return cmp.error_figure() or cmp.message.strip().splitlines()[0]


def _first_ones(items: list[str], sep: str) -> str:
    """The first :data:`CHANGES_SHOWN` of ``items`` joined with ``sep``, and how many more."""
    more = f" (and {len(items) - CHANGES_SHOWN} more)" if len(items) > CHANGES_SHOWN else ""
    return sep.join(items[:CHANGES_SHOWN]) + more


def _changes_note(name: str, changes: list[str]) -> str:
    """The note naming the first :data:`CHANGES_SHOWN` node changes of pass ``name``."""
    shown = ", ".join(changes[:CHANGES_SHOWN])
    more = f" (the first {CHANGES_SHOWN} of {len(changes)}, in graph order)" if len(changes) > CHANGES_SHOWN else ""
    return f"{name!r} changed these nodes{more}: {shown}"


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the run.

    A pass over a large graph allocates many small objects; each allocation burst makes the
    collector re-scan the whole (huge, long-lived) graph. Measured on a 100k-node graph: a
    snapshot takes 0.71 s with the collector on and 0.06 s with it paused. Memory is still
    freed by reference counting; cycles are collected once the collector resumes.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _new_epoch(gm: torch.fx.GraphModule, graphs: list[torch.fx.Graph]) -> None:
    """A new module epoch on the module's graph (a pass may have changed the module tree)."""
    if gm.graph not in graphs:
        graphs.append(gm.graph)
    new_module_epoch(gm.graph)


def _as_config(config: str | Path | Mapping[str, Any] | Config | None) -> Config:
    if isinstance(config, Config):
        return config
    if config is None:
        found = find_project_config()
        if found is None:
            raise ConfigError("no config given, and no fxpasses.toml, nor pyproject.toml with a [tool.fxpasses] table, found here or above")
        return load_config_file(found)
    if isinstance(config, (str, Path)):
        return load_config_file(config)
    if isinstance(config, Mapping):
        return parse_config(config)
    raise ConfigError(f"a config must be a path, a mapping or a Config, got {type(config).__name__}")


def tolerance(label: str, value: Any, *, source: str | None = None) -> float:
    """``value`` as a tolerance of numeric verification (``atol``/``rtol``), a float.

    Raises:
        ConfigError: ``value`` is not a finite number >= 0 (a bool is not a number here); the
            message starts with ``label``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        hint = value_hint(value, source, "valid number", python=True) if isinstance(value, str) else ""
        raise ConfigError(f"{label} must be a finite number >= 0, got {value!r}{hint}", source=source)
    return float(value)


def registry_for(cfg: Config) -> Registry:
    """The default registry, or a new one when the config's [plugins] section selects plugins."""
    p = cfg.plugins
    if not (p.enable or p.disable or p.strict or p.prefer):
        return default_registry()
    return Registry(enable=p.enable, disable=p.disable, strict=p.strict, prefer=p.prefer)


def _unlike_outputs(mine: Any, theirs: Any) -> str | None:
    """How the outputs ``mine`` differ from ``theirs`` in structure, or in a tensor's shape or
    dtype, in words; None when they are alike."""
    from torch.utils import _pytree as pytree

    a, spec_a = pytree.tree_flatten(mine)
    b, spec_b = pytree.tree_flatten(theirs)
    if spec_a != spec_b:
        return f"its outputs are {spec_b}, the graph's {spec_a}"
    for i, (x, y) in enumerate(zip(a, b)):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return (
                    f"output {i} is {y.dtype} of shape {tuple(y.shape)} there, {x.dtype} of shape {tuple(x.shape)} "
                    "in the graph"
                )
        elif isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return f"output {i} is a {type(y).__name__} there, a {type(x).__name__} in the graph"
    return None


def _target_name(target: Any) -> str:
    """``torch.relu``, ``aten.add.Tensor``: a call_function target as FX prints it."""
    try:
        name = torch.fx.node._get_qualified_name(target) if callable(target) and not isinstance(target, torch._ops.OpOverload) else str(target)
    except Exception:  # noqa: BLE001 - no qualified name
        return repr(target)
    return "operator." + name[len("_operator.") :] if name.startswith("_operator.") else name  # (as FX prints it)


def _input_graph_error(lint_error: BaseException, what_ran: str) -> InputGraphError:
    """The error for a graph that fails lint as the caller gave it (``lint_error``: the lint's)."""
    return InputGraphError(
        f"the graph fails lint as given, before any pass changed it ({exception_line(lint_error)}); "
        f"{what_ran}: fix the input graph, or run with verify='none'"
    )


def _lint(
    gm: torch.fx.GraphModule,
    spelled: dict[Any, Any] | None = None,
    before: Snapshot | Journal | None = None,
    *,
    edits: Journal | None = None,
    names_kept: bool = False,
    as_given: bool = False,
    journal: Journal | None = None,
    inputs: tuple[str, ...] | None = None,
    frame: Any = None,
    all_targets: bool = False,
) -> bool:
    """``Graph.lint()`` (through :func:`~fxpasses.lint.lint_passes` when it can answer), every
    ``call_module`` target a submodule, and every argument something the generated code can
    spell (:func:`~fxpasses.lint.unspellable_argument`, which skips the nodes in ``spelled``
    whose arguments are unchanged; a value a node already held in the snapshot ``before`` the
    pass is not the pass's doing and is let through).

    ``edits``: the journal of the pass, when the graph passed this lint before it: only the
    nodes and modules it touched are looked at (:func:`~fxpasses.lint.lint_edits`, with
    ``names_kept``), and the whole graph only when that cannot answer. Returns whether the
    whole graph was linted.

    ``as_given``: the graph as the caller gave it (no pass changed it yet): every argument is a
    value its node held before any pass, let through as above, so arguments are not looked at.

    ``journal``: the journal of the pass (``edits`` is one too), also when the graph was not
    linted before it: only the arguments of the nodes it touched are looked at (every other
    node holds the arguments it held before the pass, which are let through as above).

    ``inputs``: the graph's inputs when the run began (:func:`~fxpasses.lint.input_signature`;
    see :func:`~fxpasses.lint.structure_problem`, which also requires one output node).

    ``all_targets``: with ``edits``, resolve every ``call_module``/``get_attr`` target again,
    not only those a recorded module change can touch (after a third-party journaled pass,
    whose module edits outside the context its journal does not see: ``del gm.sub``).

    Raises:
        VerificationError: the graph has no output node, or several, or other inputs than
            ``inputs``; a submodule is missing; or an argument cannot be spelled
            in code.
        RuntimeError: torch's ``Graph.lint()`` failed.
    """
    problem = structure_problem(gm.graph, inputs, frame)
    if problem is not None:
        raise VerificationError(problem)
    accept = _unchanged_since(before) if before is not None else None
    journal = edits if edits is not None else journal
    touched = journal.touched() if journal is not None else None
    paths = ModulePaths(gm)  # (one resolution of module paths for the argument check and lint_edits)
    bad = None if as_given else unspellable_argument(gm.graph, spelled if spelled is not None else {}, accept, touched, paths)
    if bad is not None:
        node, value, what = bad
        if what == "keyword":
            text = (
                f"node %{node.name} has a keyword argument named {_short_repr(value)}, which the generated "
                "code cannot write (it writes `name=value`: a keyword's name must be a Python identifier "
                "and not a reserved word)"
            )
        elif what == "method":
            text = (
                f"node %{node.name} ({node.op}) has the target {_short_repr(value)}, which the generated code "
                "cannot write (it writes each dotted part as `.part`, so a reserved word is a syntax error, or "
                "as getattr(x, \"part\"), which a quote, a backslash or a line break breaks)"
            )
        elif what == "schema":
            text = f"node %{node.name} calls {_target_name(node.target)} with {value}"
        elif what == "module":
            text = f"node %{node.name} calls {value}"
        elif what == "int-self":
            text = (
                f"node %{node.name} calls the method {node.target!r} of the int {value!r}, which the generated code "
                f"cannot write (`{value!r}.{node.target}(...)` reads as a float literal and is a syntax error): call "
                "the function instead (operator.mul for __mul__)"
            )
        elif what == "self":
            text = (
                f"node %{node.name} calls the method {node.target!r} of {_short_repr(value)} ({type(value).__name__}), "
                f"which has no such method: the object a call_method node is called on (its first argument) "
                "must be a node, or a constant that has the method"
            )
        elif what == "nested":
            text = (
                f"node %{node.name} has an argument nested more than {_MAX_NESTING} containers deep, "
                "which the generated code cannot write (Python's parser reads at most 200 levels of "
                "brackets); store it as a module attribute or flatten it"
            )
        else:
            text = (
                f"node %{node.name} has an argument the generated code cannot spell: {_short_repr(value)} "
                f"({type(value).__name__}); store objects as module attributes (PassContext.add_constant "
                "for tensors) or pass plain values"
            )
        raise _NodeProblem(text, node)
    if edits is not None and lint_edits(gm, touched, edits.module_records(), names_kept, paths, all_targets=all_targets):
        return False
    if lint_passes(gm):  # the same checks, several times faster; on doubt, torch's own lint
        return True
    try:
        gm.graph.lint()
    except RuntimeError as exc:
        # two of torch's messages end with the whole graph printed (megabytes on a big
        # graph, then repeated as the failure's cause): the first line says what and where
        text = str(exc)
        head, sep, _ = text.partition("\ngraph(")
        if not sep:
            raise
        raise RuntimeError(f"{head} (the graph printed after it by Graph.lint() is left out)") from None
    for node in gm.graph.find_nodes(op="call_module"):
        try:
            gm.get_submodule(node.target)  # type: ignore[arg-type]
        except AttributeError as exc:
            raise _NodeProblem(f"node %{node.name} calls submodule {node.target!r}, which does not exist", node) from exc
    return True


class _Constraints:
    """Ordering declarations standing in for a pass class's (:func:`fxpasses.ordering.order`
    reads ``requires``, ``after`` and ``before``)."""

    def __init__(
        self, requires: Sequence[str], after: Sequence[str], before: Sequence[str], by: dict[tuple[str, str], str] | None = None
    ) -> None:
        self.requires = tuple(dict.fromkeys(requires))
        self.after = tuple(dict.fromkeys(after))
        self.before = tuple(dict.fromkeys(before))
        self._by = by or {}

    def declared_by(self, kind: str, name: str) -> str:
        """The member of a fixpoint group that declares ``kind`` (``requires``, ``after``,
        ``before``) ``name`` (for a cycle's or a move's reason), in the group's words."""
        return self._by.get((kind, name), "?")


def _group_item(members: list[PlanStep]) -> Item:
    """A fixpoint group as one item of the pipeline's ordering: its members ordered among
    themselves by their declarations about each other; the group answering to their names,
    with their declarations about passes outside it (what they require from outside is
    pulled in before the group)."""
    names = {m.name for m in members}

    def within(m: PlanStep) -> _Constraints:  # (a cycle among members names who declares each arrow)
        return _declared([m.cls], names.__contains__, {(kind, n): m.name for kind in _ORDERING for n in getattr(m.cls, kind)})

    def unreachable(name: str, needed_by: str) -> Any:  # pragma: no cover - requirements are members
        raise AssertionError(name)

    inner = order([Item(m.name, within(m), m) for m in members], unreachable)
    ordered = []
    for it in inner:
        it.payload.reasons = list(it.reasons)
        ordered.append(it.payload)
    label = f"fixpoint({','.join(m.name for m in ordered)})"
    by: dict[tuple[str, str], str] = {}
    for m in members:
        for kind in _ORDERING:
            for name in getattr(m.cls, kind):
                by.setdefault((kind, name), f"{m.name} (in {label})")
    outside = _declared([m.cls for m in members], lambda name: name not in names, by)
    return Item(label, outside, ordered, provides=tuple(names))


#: the ordering declarations of a pass class
_ORDERING = ("requires", "after", "before")


def _declared(classes: list[type[Pass]], keep: Callable[[str], bool], by: dict[tuple[str, str], str] | None = None) -> _Constraints:
    """The ``requires``/``after``/``before`` names of ``classes`` for which ``keep`` holds."""
    return _Constraints(*([n for cls in classes for n in getattr(cls, kind) if keep(n)] for kind in _ORDERING), by)


def _number_function_passes(steps: list[PlanStep]) -> None:
    """Give pass functions of one name (two lambdas, two partials of one function, two
    ``PassBase`` instances of one class) names of their own: ``scale``, ``scale_2``, ... in
    the order given, as torch's ``PassManager`` runs such a list (a name names one pass in the
    report, the options tables and the ordering)."""
    taken: dict[str, type] = {}
    for step in steps:
        fn = getattr(step.cls, "function", None)
        first = taken.setdefault(step.name, step.cls)
        if first is step.cls or fn is None:
            continue
        k = 2
        while f"{step.name}_{k}" in taken and taken[f"{step.name}_{k}"] is not step.cls:
            k += 1
        if f"{step.name}_{k}" not in taken:
            cls = function_pass(fn, name=f"{step.name}_{k}")
            taken[cls.name] = cls
        else:
            cls = taken[f"{step.name}_{k}"]
        step.name, step.cls = cls.name, cls


def _check_one_class_per_name(steps: list[PlanStep], source: str) -> None:
    """Refuse two different pass classes under one name: the run report, the options tables
    and the passes' ordering constraints all go by name, so one of them would be taken for
    the other (a plugin's duplicate is refused at registration the same way)."""
    first: dict[str, PlanStep] = {}
    for step in steps:
        seen = first.setdefault(step.name, step)
        if seen.cls is step.cls:
            continue
        a, b = (_pass_class_label(c) for c in (seen.cls, step.cls))
        functions = [c for c in (seen.cls, step.cls) if getattr(c, "function", None) is not None]
        if functions:
            advice = (
                "; give the pass function another name: fxpasses.function_pass.function_pass(fn, name=...)"
            )
        else:
            inherited = "name" not in vars(step.cls) or "name" not in vars(seen.cls)
            advice = "; give each pass class its own `name`" + (" (a subclass inherits its base class's)" if inherited else "")
        raise ConfigError(
            f"two different passes are named {step.name!r} in this pipeline: {a} ({seen.source or 'given'}) and "
            f"{b} ({step.source or 'given'}){advice}",
            source=source,
        )


def _pass_class_label(cls: type) -> str:
    """``module.Class``; for a pass function's class, ``the pass function module.fn``."""
    fn = getattr(cls, "function", None)
    if fn is not None:
        inner = getattr(fn, "func", fn)  # (a functools.partial: its function)
        name = getattr(inner, "__qualname__", None) or type(inner).__qualname__
        return f"the pass function {getattr(inner, '__module__', None) or type(inner).__module__}.{name}"
    return f"{cls.__module__}.{cls.__qualname__}"


def _unchanged_since(before: Snapshot | Journal) -> Any:
    """A test: did ``node`` hold this very ``value`` among its arguments in the snapshot
    ``before`` the pass (so that it is the input graph's, not the pass's doing)?"""

    def held(node: Any, value: Any) -> bool:
        arguments = before.arguments_of(node)
        return arguments is not None and _holds(arguments, value)

    return held


def _holds(container: Any, value: Any) -> bool:
    """Whether ``value`` itself (by identity) is inside ``container`` (nested tuples, lists,
    dicts, slices)."""
    if container is value:
        return True
    if isinstance(container, (tuple, list)):
        return any(_holds(c, value) for c in container)
    if isinstance(container, dict):
        return any(_holds(c, value) for c in container.values()) or any(k is value for k in container)
    if isinstance(container, slice):
        return any(_holds(c, value) for c in (container.start, container.stop, container.step))
    return False


def _saved_fields(options: Any, state: Any) -> dict[str, Any] | None:
    """Deep copies of the fields of ``options`` that :func:`~fxpasses.passes.options_state`
    pictured (``state``), to put back after a run that changed them; None when there are none
    or one cannot be copied."""
    if state is None:
        return None
    try:
        return {name: copy.deepcopy(getattr(options, name)) for name in state}
    except Exception:  # noqa: BLE001 - then the change is reported, not put back
        return None


def _is_truth_value(hint: Any) -> bool:
    """What a pass may return: None, a bool, a count (an int), or numpy's bool."""
    t = type(hint)
    return hint is None or isinstance(hint, int) or (t.__module__ == "numpy" and t.__name__ in ("bool_", "bool"))


def _add_note(exc: BaseException, note: str) -> None:
    if hasattr(exc, "add_note"):  # Python 3.11+
        exc.add_note(note)


def _outputs_at(gm: torch.nn.Module, other: OtherSizes, state: TensorState) -> tuple[Any, Any, Any]:
    """``(outputs, OutputFacts, float64 outputs or None)`` of ``gm`` on the inputs of
    :class:`~fxpasses.other_sizes.OtherSizes`: what numeric verification (and bisect) hold a
    pass to there, as the example inputs' reference.

    Raises:
        UserError: ``gm`` does not run on them (see :func:`_run_module`).
    """
    outputs, facts = _run_module(gm, other.args, state, other.kwargs, facts=True)
    return outputs, facts, float64_reference(gm, other.args, other.kwargs, outputs, facts, state)


def _verify_other_sizes(
    gm: torch.fx.GraphModule, other: OtherSizes, reference: tuple[Any, Any, Any], atol: float, rtol: float, snap: Any
) -> None:
    """Numeric verification of a pass at :class:`~fxpasses.other_sizes.OtherSizes` (after the
    example inputs' check passed), against ``reference`` (outputs, facts, float64 outputs of
    the module before the pass at those inputs).

    Raises:
        _NoLongerRuns: the module no longer runs on the inputs of other sizes.
        _OutputsDiffer: its outputs there differ.
        UserError: they cannot be compared.
    """
    try:
        actual, facts = call_isolated(gm, other.args, TensorState(gm), other.kwargs, facts=True)
    except Exception as exc:
        raise _NoLongerRuns(
            f"the module no longer runs at other sizes the graph accepts ({other.description()}), though it runs on "
            f"the example inputs: {exception_text(exc)} (a size of the example inputs made a constant?)",
            snap.node_changes(),
            _running_node(gm, exc),
        ) from exc
    try:
        err = compare_results(actual, facts, reference[0], reference[1], atol, rtol, reference[2])
    except Exception as exc:  # not a mismatch: the outputs cannot be compared
        raise UserError(
            f"numeric verification cannot compare the module's outputs at other sizes: {exception_text(exc)[:300]}"
        ) from exc
    if err.message:
        raise _OutputsDiffer(
            f"at other sizes the graph accepts ({other.description()}), where the example inputs' outputs match: "
            f"{err.message} (a size of the example inputs made a constant?)",
            snap.node_changes(),
            err,
        )


def _run_module(
    gm: torch.nn.Module,
    inputs: Sequence[Any] | None,
    state: TensorState,
    kwargs: Mapping[str, Any] | None = None,
    *,
    facts: bool = False,
) -> Any:
    """``gm(*inputs, **kwargs)`` like for like (see :func:`fxpasses.verify.call_isolated`;
    ``facts``: ``(outputs, OutputFacts)``).

    Raises:
        UserError: the module does not run on its example inputs (the user's error, named as
            such, with the module's exception as ``__cause__``).
    """
    try:
        return call_isolated(gm, inputs, state, kwargs, facts=facts)
    except Exception as exc:
        what = "example inputs"
        if kwargs:
            what += " (keywords: " + ", ".join(map(repr, kwargs)) + ")"
        raise UserError(f"the module does not run on the {what}: {exception_text(exc)}") from exc


def run(
    gm: torch.fx.GraphModule,
    pipeline: str | Sequence[EntryLike] | EntryLike | Pipeline,
    example_inputs: Sequence[Any] | None = None,
    *,
    example_kwargs: Mapping[str, Any] | None = None,
    instruments: Sequence[Any] = (),
    rewrite_limit: "int | RewriteLimit | None" = None,
    **kwargs: Any,
) -> RunReport:
    """Run ``pipeline`` (a string, a list of entries, one entry such as a pass class, or a
    :class:`Pipeline`) over ``gm``.

    ``example_inputs``/``example_kwargs``, ``instruments`` and ``rewrite_limit`` are
    :meth:`Pipeline.run`'s; the other keyword arguments are the :class:`Pipeline`'s
    (``verify``, ``on_error``, ``atol``, ...), for a string or list.

    Raises:
        UserError: ``pipeline`` is a :class:`Pipeline` and Pipeline options are given too
            (they are set when it is made; they would be ignored).
        What :class:`Pipeline` raises at construction and :meth:`Pipeline.run` raises.
    """
    if isinstance(pipeline, str):
        pipeline = Pipeline.from_string(pipeline, **kwargs)
    elif not isinstance(pipeline, Pipeline):
        pipeline = Pipeline(pipeline, **kwargs)
    elif kwargs:
        raise UserError(
            f"fxpasses.run got a Pipeline and the Pipeline option(s) {', '.join(sorted(kwargs))}: "
            "a Pipeline's options are set when it is made (Pipeline(..., verify=...)), or give "
            "the pipeline as a string or list"
        )
    return pipeline.run(
        gm, example_inputs, example_kwargs=example_kwargs, instruments=instruments, rewrite_limit=rewrite_limit
    )


def _is_builtin(cls: type) -> bool:
    """Whether a pass class is one of fxpasses' own (their journal declarations are tested)."""
    return cls.__module__.startswith("fxpasses.")
