"""``torch.compile(model, backend="fxpasses")``: run a pipeline on every TorchDynamo graph.

Registered through torch's ``torch_dynamo_backends`` entry-point group, so it works as soon as
fxpasses is installed. The pipeline is taken from, in order:

1. ``torch.compile(..., options={"pipeline": "remove_dropout,eliminate_dead_code"})``
   (a pipeline string or a list of entries), or ``options={"preset": "inference"}``;
2. the ``FXPASSES_PIPELINE`` environment variable (a pipeline string);
3. ``pipeline`` or ``preset`` in the nearest project config, from the working directory up: a
   ``fxpasses.toml``, or the ``[tool.fxpasses]`` table of a ``pyproject.toml``
   (:func:`fxpasses.config.find_project_config`);
4. :data:`DEFAULT_BACKEND_PIPELINE`.

Whichever gave the pipeline, that project config's ``[options.NAME]`` tables,
``verify``, ``on_error``, ``atol``, ``rtol`` and ``order`` apply, as they do to ``fxpasses run``
there (with ``--pipeline``: a table for a pass the pipeline does not run is left, one naming no
registered pass or an option its pass does not take is an error); its ``[model]`` and ``output`` are ``fxpasses run``'s alone and
are not read. Options given to ``torch.compile`` (``verify``, ``on_error``, ``atol``, ``rtol``)
override the table's.

After the pipeline the graph goes to the backend named by ``options={"then": ...}``
(default ``"inductor"``; ``"eager"`` runs the optimized graph as is). Other options:
``verify`` (``none``/``lint``/``numeric``, default ``lint``), ``on_error`` (default
``rollback``), ``atol`` and ``rtol`` (the tolerances of numeric verification, as
:class:`~fxpasses.Pipeline`'s and with its defaults, ``1e-5`` each), ``freeze`` (default
``False``, below), ``pyproject`` (default ``True``; ``False``: no project config is read,
neither ``fxpasses.toml`` nor ``pyproject.toml``, so nothing of it applies), and ``plugins``: which plugin
distributions name the passes, a table as a config's ``[plugins]`` section (``{"enable": [...], "disable": [...], "prefer": {pass:
distribution}, "strict": bool}``). Without it the ``[plugins]`` section of the nearest project
config applies, as it does to ``fxpasses run`` there, whichever of the
sources above gave the pipeline.

``freeze=True`` (for inference; like inductor's ``torch._inductor.config.freezing``):
TorchDynamo lifts every parameter and buffer of the model into a graph input, so passes see no
weights (``fuse_conv_bn`` leaves every pair, ``not_constant``; ``fold_constants`` folds nothing
derived from them). With ``freeze`` the inputs that are a module's parameters or buffers (told
by their TorchDynamo ``Source``) become constants of the graph before the pipeline runs: each
tensor is registered on the graph module (its qualified name, sanitised:
``features_0_0_weight``) and read with ``get_attr``; the function handed back to TorchDynamo
drops those positions from the inputs it is called with, and the ``then`` backend gets the
remaining example inputs. Left graph inputs, with the reason in the report: tensors the graph
writes in place (a training-mode BatchNorm's running statistics and ``num_batches_tracked``) or
that share storage with one it writes; tensors written in place before every call
(:data:`_VOLATILE`: by another graph of the model across a graph break; frozen again once
:data:`QUIET_CALLS` calls in a row found them unwritten); tensors that
require grad while grad mode is on at compile time (training: gradients must reach them; compile under ``torch.no_grad()`` or
``torch.inference_mode()``, or ``requires_grad_(False)`` the model, to freeze its parameters;
TorchDynamo guards on grad mode, so a call under the other mode recompiles); inference
tensors (made under ``torch.inference_mode()``: they keep no version counter, so a later write
could not be seen); fake tensors; tensors with symbolic sizes. Module attributes that are plain numbers, which TorchDynamo
makes inputs under ``dynamic=True`` (a BatchNorm's ``eps``: a 0-dim tensor the graph reads
with ``.item()``), become literals of the graph (:attr:`Freezing.numbers`); each call compares
the values it is called with, and freezes again when one changed. One the graph uses as a
tensor stays an input.

Inductor's freezing assumes that after compilation the weights are not written; here each
call of a frozen graph compares the version counters of the frozen tensors the pipeline folded
or fused away (:attr:`Freezing.consumed`) with those it froze, and freezes again when one was
written in place (``p.mul_()``, ``load_state_dict``, an optimizer step) or given new data
(``p.data = t``: its data pointer is compared too), since what was computed from them is not
recomputed and TorchDynamo does not guard on their values. A write that moves neither
(``p.data.mul_(2)``: ``.data`` is a tensor with a version counter of its own) is not seen:
results would be stale. An
in-place update of a frozen tensor that no pass folded (a linear layer's weight, used as it is) is still seen,
since the graph module holds that very tensor; call ``torch._dynamo.reset()`` after changing
weights to recompile. Which tensors a frozen graph is called with is checked on every call
(:class:`_FrozenVariants`): a graph TorchDynamo reuses for another instance of a module class,
or called after a parameter was replaced (``module.weight = nn.Parameter(...)``), is frozen
again for those tensors. The report of each
graph says how many placeholders were frozen and which stayed inputs, and why
(:attr:`~fxpasses.RunReport.notes`).

Every graph's :class:`~fxpasses.RunReport` is appended to :data:`reports` (the last 100) and
logged at INFO level on the ``fxpasses.backend`` logger. With graph breaks, each graph
TorchDynamo produces goes through the pipeline on its own.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import logging
import operator
import os
import re
import weakref
from typing import Any, Callable, Sequence

import torch
import torch.fx

__all__ = ["fxpasses_backend", "reports", "DEFAULT_BACKEND_PIPELINE"]

#: The pipeline used when no option, environment variable or project config names one.
DEFAULT_BACKEND_PIPELINE = "remove_dropout,simplify_algebra,eliminate_common_subexpressions,eliminate_dead_code"

#: Reports of the most recent compiled graphs, newest last.
reports: collections.deque[Any] = collections.deque(maxlen=100)

log = logging.getLogger("fxpasses.backend")

_KNOWN = {"pipeline", "preset", "then", "verify", "on_error", "atol", "rtol", "freeze", "plugins", "pyproject"}



def _bisect_command(freeze: bool, grad: bool) -> str:
    """How to bisect a failure the backend met (the command of
    :func:`fxpasses.pipeline.bisect_hint`): capture the graph as the backend got it, frozen as
    it was under ``freeze`` (compiled with grad mode ``grad``: it decides what freezes)."""
    if not freeze:
        return (
            "in Python: `c = fxpasses.capture.capture(model, example_inputs, \"dynamo\")`, then "
            "`fxpasses.bisect.bisect(pipeline, c.gm, c.inputs)` (the graph TorchDynamo gives a backend is that capture's)"
        )
    return (
        "in Python: `c = fxpasses.capture.capture(model, example_inputs, \"dynamo\", freeze=True)`"
        + ("" if grad else " under torch.no_grad()")
        + ", then `fxpasses.bisect.bisect(pipeline, c.gm, c.inputs)` (the graph TorchDynamo gives a backend, frozen "
        "as this one was, is that capture's)"
    )

def _registry(options: dict[str, Any]) -> tuple[Any, tuple[Any, Any] | None]:
    """The registry that names the passes: from ``options["plugins"]`` (a ``[plugins]``
    table), else from the nearest project config's ``[plugins]`` (``fxpasses.toml``, or
    ``pyproject.toml``'s ``[tool.fxpasses.plugins]``), else the default one; and ``(path,
    Config)`` of that project config (:func:`_project_config`:
    its pipeline, options tables and settings), None without one.

    Raises:
        ConfigError: ``plugins`` that is not a valid ``[plugins]`` table (named as the option).
    """
    from pydantic import ValidationError

    from .config import Config, PluginsConfig, find_project_config, validation_problems
    from .errors import ConfigError, value_hint
    from .pipeline import registry_for
    from .registry import registry as default_registry

    def plugins_from(raw: Any, where: str, python: bool = False) -> Any:
        try:  # strict, as a config file's values are (a quoted "true" is not true)
            plugins = PluginsConfig.model_validate(raw, strict=True)
        except ValidationError as exc:
            problems = "; ".join(
                f"{path}: {msg} (given: {value!r}{value_hint(value, where, msg, python=python)})"
                for path, msg, value in validation_problems(exc, PluginsConfig, unknown="key")
            )
            raise ConfigError(f"{where}: {problems}") from None
        return registry_for(Config(plugins=plugins))

    # the option first: what the call itself gives is checked before the project's table
    given = plugins_from(options["plugins"], "torch.compile option 'plugins'", python=True) if "plugins" in options else None
    use_project = options.get("pyproject", True)
    if not isinstance(use_project, bool):
        raise ConfigError(f"torch.compile option 'pyproject' must be true or false, got {use_project!r}")
    found = find_project_config() if use_project else None
    project = (found, _project_config(found)) if found is not None else None
    if given is not None:
        return given, project
    if project is None:
        return default_registry(), None
    return registry_for(project[1]), project


def _project_config(found: Any) -> Any:
    """The project config ``found`` (a ``fxpasses.toml``, or a pyproject.toml's ``[tool.fxpasses]``
    table) as the backend reads it: everything but ``[model]`` and ``output``, which are
    ``fxpasses run``'s (a ``[model]`` this run never builds does not stop ``torch.compile``).

    Raises:
        ConfigError: the file cannot be read, or the rest of its table does not fit."""
    from .config import parse_config, read_config_data
    from .errors import ConfigError

    data = read_config_data(found)
    if data is None:
        raise ConfigError("no [tool.fxpasses] table", source=str(found))
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k not in ("model", "output")}
    cfg = parse_config(data, source=f"{found} [tool.fxpasses]" if found.name == "pyproject.toml" else str(found))
    cfg._base_dir = found.resolve().parent
    return cfg


def _pipeline_spec(options: dict[str, Any], reg: Any, project: tuple[Any, Any] | None = None) -> tuple[Any, str]:
    """The pipeline and where it came from (see the module doc); ``project``: the nearest
    pyproject.toml's ``(path, Config)``, None without one. The pipeline is a pipeline string,
    a list of entries, or the pyproject's whole ``Config`` when its pipeline or preset gives it
    (:meth:`fxpasses.Pipeline.from_config` reads it)."""
    from .errors import ConfigError

    if "pipeline" in options and "preset" in options:
        raise ConfigError("torch.compile options for backend 'fxpasses': give either 'pipeline' or 'preset', not both")
    if "preset" in options:
        name = options["preset"]
        if not isinstance(name, str):
            raise ConfigError(f"torch.compile option 'preset' must be a preset name, got {name!r}")
        return reg.preset(name, source="options['preset']").pipeline, f"options['preset'] {name!r}"
    if "pipeline" in options:
        spec = options["pipeline"]
        if isinstance(spec, str) and not spec.strip() or isinstance(spec, (list, tuple)) and not spec:
            raise ConfigError("torch.compile option 'pipeline' is empty: name at least one pass")
        from .pipeline import Pipeline, _as_entries

        if isinstance(spec, Pipeline):  # with its own settings (torch.compile's override them)
            return spec, "options['pipeline']"
        if not isinstance(spec, str):
            from .fixpoint import Fixpoint
            from .function_pass import is_function_pass
            from .passes import Pass

            one = isinstance(spec, (Pass, Fixpoint, dict, list, tuple)) or (isinstance(spec, type) and issubclass(spec, Pass))
            if not (one or is_function_pass(spec)):
                raise ConfigError(
                    "torch.compile option 'pipeline' must be a pipeline string, a list of entries, one entry (a pass "
                    f"class or instance, a table, a (name, options) pair, a fixpoint group, a pass function) or a "
                    f"Pipeline, got {spec!r}"
                )
            spec = _as_entries(spec)  # as Pipeline(spec) reads it: one entry, a pair, or a list
        return spec, "options['pipeline']"
    env = os.environ.get("FXPASSES_PIPELINE", "").strip()
    if env:
        return env, "FXPASSES_PIPELINE"
    if project is not None:
        found, cfg = project
        if cfg.pipeline is not None or cfg.preset is not None:
            return cfg, f"{found} [tool.fxpasses]"
    return DEFAULT_BACKEND_PIPELINE, "default"


def _concrete(example_inputs: Sequence[Any]) -> list[Any] | None:
    """The example inputs with symbolic scalars (a dynamic size TorchDynamo passes as a graph
    input, e.g. ``s0``) replaced by the value they had when the graph was traced; None when a
    value is unknown (an unbacked symbol) or a tensor has symbolic sizes or is fake."""
    from torch._subclasses.fake_tensor import FakeTensor

    out: list[Any] = []
    for v in example_inputs:
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            node = v.node
            if not node.has_hint():
                return None
            out.append(node.hint)
        elif isinstance(v, torch.Tensor):
            if isinstance(v, FakeTensor) or any(not isinstance(d, int) for d in v.shape):
                return None
            out.append(v)
        else:
            out.append(v)
    return out


#: Why a parameter or buffer stayed a graph input under ``freeze`` (key: note text).
_KEPT_REASONS = {
    "written": "the graph writes them in place (e.g. a training-mode BatchNorm's running statistics)",
    "storage": "they share storage with an input the graph writes in place",
    "volatile": "they were written in place before every call (by another graph of the model across a graph "
    "break, or outside it): folded into constants, they would be frozen anew on each call",
    "grad": "they require grad and grad mode was on at compile time (training)",
    "inference": "they are inference tensors (made under torch.inference_mode()), which keep no version counter, "
    "so a later write to them (load_state_dict or an in-place update under inference_mode) could not be seen "
    "and what was computed from them would be stale: make the model outside inference_mode (and call it "
    "inside) to freeze them",
    "fake": "their example values are not real tensors",
    "symbolic": "their sizes are symbolic (dynamic shapes)",
}


@dataclasses.dataclass
class Freezing:
    """What ``freeze`` did to one TorchDynamo graph.

    Attributes:
        kept: positions (in TorchDynamo's inputs) of the placeholders that stay graph inputs,
            in order; the compiled function is called with these only.
        frozen: ``(qualified name, attribute of the graph module)`` of each parameter or
            buffer made a constant of the graph (a ``get_attr`` of the very tensor).
        not_frozen: ``(qualified name, reason key)`` of each parameter or buffer left a graph
            input (reason keys: ``written``, ``storage``, ``volatile``, ``grad``,
            ``inference``, ``fake``, ``symbolic``).
    """

    kept: list[int]
    frozen: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    not_frozen: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    sources: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)  # attribute -> Source
    inputs: list[tuple[int, torch.Tensor]] = dataclasses.field(default_factory=list, repr=False)  # (position, tensor) frozen
    #: the frozen tensors the graph no longer reads after the pipeline (folded or fused into
    #: other constants), with their version counters then: written in place after that (an
    #: optimizer step, load_state_dict), what was computed from them is stale
    consumed: list[tuple[torch.Tensor, int]] = dataclasses.field(default_factory=list, repr=False)
    #: ``(qualified name, position, value)`` of each number attribute of a module (a
    #: BatchNorm's ``eps``) that TorchDynamo made a graph input (``dynamic=True`` does not
    #: specialise floats: it passes each as a 0-dim tensor the graph reads with ``.item()``),
    #: made a constant of the graph; each call checks the value it is called with
    numbers: list[tuple[str, int, Any]] = dataclasses.field(default_factory=list)
    #: qualified names of such numbers left graph inputs (the graph uses them as tensors)
    numbers_kept: list[str] = dataclasses.field(default_factory=list)
    #: ``id(counter) -> the frozen statistics it watches for``: the ``num_batches_tracked`` of
    #: each batch norm whose running statistics were folded away (:func:`_batch_counters`),
    #: in ``consumed`` beside them
    stand_ins: dict[int, list[torch.Tensor]] = dataclasses.field(default_factory=dict, repr=False)
    #: qualified names of folded-away running statistics with no such counter to watch
    unwatched_stats: list[str] = dataclasses.field(default_factory=list)
    #: attributes of the frozen tensors a batch-norm call of the graph read as its running
    #: statistics, whatever their names (:func:`_statistics_read`, :func:`_batch_counters`)
    norm_inputs: set[str] = dataclasses.field(default_factory=set, repr=False)
    #: the tensors kept graph inputs as ``volatile``: watched, and frozen again once
    #: :data:`QUIET_CALLS` calls in a row found them unwritten (:class:`_FrozenVariants`)
    volatile: list[torch.Tensor] = dataclasses.field(default_factory=list, repr=False)

    @property
    def changed(self) -> bool:
        """Whether anything was frozen (a tensor or a number): the graph lost inputs."""
        return bool(self.frozen or self.numbers)

    def notes(self) -> list[str]:
        """One note for the count of frozen placeholders, one per reason for those kept."""
        total = len(self.frozen) + len(self.not_frozen)
        left = len(self.kept)
        out = [
            f"freeze: {len(self.frozen)} of {total} parameter/buffer placeholders frozen as constants "
            f"of the graph ({left} graph input{'' if left == 1 else 's'} left)"
        ]
        by_reason: dict[str, list[str]] = {}
        for name, reason in self.not_frozen:
            by_reason.setdefault(reason, []).append(name)
        for reason, names in by_reason.items():
            out.append(f"freeze: kept as graph inputs, {_KEPT_REASONS[reason]}: {', '.join(names)}")
        if self.numbers:
            out.append(
                f"freeze: {len(self.numbers)} module attribute number{'' if len(self.numbers) == 1 else 's'} "
                "TorchDynamo made graph inputs frozen as constants (each call checks the value): "
                + ", ".join(f"{name} = {value!r}" for name, _, value in self.numbers)
            )
        if self.numbers_kept:
            out.append(
                "freeze: kept as graph inputs, module attribute numbers the graph uses as tensors: "
                + ", ".join(self.numbers_kept)
            )
        if self.unwatched_stats:
            out.append(
                "freeze: batch-norm running statistics folded into constants with no num_batches_tracked beside them "
                "to watch (batch norm updates them in training mode without moving their version counters): a "
                "training-mode call outside this graph is not seen, call torch._dynamo.reset() after one: "
                + ", ".join(self.unwatched_stats)
            )
        return out


def _state_name(source: Any) -> str | None:
    """The qualified name (``features.0.0.weight``) of the module parameter or buffer that a
    TorchDynamo graph input comes from, read from its ``Source`` chain
    (``L['self']._modules['features']._modules['0']._parameters['weight']``); None when the
    input is not a module's parameter or buffer."""
    from torch._dynamo import source as S

    if source is None:
        return None
    if (
        isinstance(source, S.DictGetItemSource)
        and isinstance(source.base, S.AttrSource)
        and source.base.member in ("_parameters", "_buffers")
        and isinstance(source.index, str)
    ):
        parts = [source.index]
        s = source.base.base
    elif isinstance(source, S.ParamBufferSource):  # a specialized module's attribute
        parts = [source.member]
        s = source.base
    else:
        return _state_name_from_string(source)
    return ".".join(reversed(parts + _module_path(s)))


def _number_name(source: Any) -> str | None:
    """The qualified name (``features.1.eps``) of the module attribute that a TorchDynamo graph
    input comes from when it is a plain attribute of a module (``AttrSource`` on a module
    source), not a parameter, buffer or submodule; None otherwise (a user's argument, a
    global)."""
    from torch._dynamo import source as S

    if type(source) is not S.AttrSource or source.member in ("_parameters", "_buffers", "_modules"):
        return None
    if not isinstance(source.base, S.NNModuleSource):
        return None
    return ".".join(reversed([source.member, *_module_path(source.base)]))


def _module_path(s: Any) -> list[str]:
    """The names, innermost first, of the module path of the module source ``s``
    (``L['self']._modules['features']._modules['0']``: ``["0", "features"]``)."""
    from torch._dynamo import source as S

    parts: list[str] = []
    while s is not None:
        if isinstance(s, S.NNModuleSource):  # (Unspecialized[Builtin])NNModuleSource: a marker
            s = s.base
        elif (
            isinstance(s, S.DictGetItemSource)
            and isinstance(s.base, S.AttrSource)
            and s.base.member == "_modules"
            and isinstance(s.index, (str, int))
        ):
            parts.append(str(s.index))
            s = s.base.base
        elif type(s) is S.AttrSource:  # a module held as a plain attribute
            parts.append(s.member)
            s = s.base
        elif isinstance(s, (S.GetItemSource, S.DictGetItemSource)) and isinstance(s.index, (str, int)):
            parts.append(str(s.index))  # a module in a list or dict
            s = s.base
        elif isinstance(s, S.GlobalSource):
            parts.append(s.global_name)
            break
        else:  # a local (an argument of the compiled function: self, fn) or anything else
            break
    return parts


_STATE_NAME = re.compile(r"\._(?:parameters|buffers)\[(['\"])(?P<name>[^'\"]+)\1\]$")
_MODULE_NAME = re.compile(r"\._modules\[(['\"])(?P<name>[^'\"]+)\1\]")


def _state_name_from_string(source: Any) -> str | None:
    """Fallback of :func:`_state_name`: parse the source's name string."""
    try:
        text = source.name() if callable(getattr(source, "name", None)) else str(source.name)
    except Exception:  # pragma: no cover - a source without a name
        return None
    m = _STATE_NAME.search(text)
    if m is None:
        return None
    return ".".join([*(mm.group("name") for mm in _MODULE_NAME.finditer(text[: m.start()])), m.group("name")])


def _attr_name(gm: torch.nn.Module, qualified: str) -> str:
    """A free top-level attribute name of ``gm`` for the tensor ``qualified`` (sanitised)."""
    base = re.sub(r"\W", "_", qualified).strip("_") or "frozen"
    if base[0].isdigit():
        base = "_" + base
    name, i = base, 0
    while hasattr(gm, name) or name in gm._modules:
        i += 1
        name = f"{base}_{i}"
    return name


def _writes(gm: torch.fx.GraphModule) -> tuple[set[torch.fx.Node], set[str]]:
    """The placeholders whose value some node of ``gm`` may write in place (directly or through
    a view of it), and the qualified names of module state nodes write (``a.*``: all under
    ``a``).

    :meth:`fxpasses.effects.EffectAnalysis.is_written` is not used for placeholders: it
    assumes every placeholder may alias every other (a caller may pass one tensor twice), so
    one written input (a BatchNorm's running mean) would make them all written; here the real
    tensors are at hand, and the caller compares their storages instead."""
    from .effects import EffectAnalysis

    fx = EffectAnalysis(gm)
    placeholders: set[torch.fx.Node] = set()
    state: set[str] = set()
    seen: set[torch.fx.Node] = set()
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "get_attr", "output"):
            continue
        eff = fx.effects(n)
        state |= eff.state_writes
        stack = list(eff.writes)
        while stack:  # back along alias edges to the inputs the written value may share
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if v.op == "placeholder":
                placeholders.add(v)
            elif v.op not in ("get_attr", "output"):
                stack.extend(fx.aliased_inputs(v))
    return placeholders, state


#: Storages (:func:`fxpasses.effects._storage_key`) of parameters and buffers that were
#: written in place between two calls of a frozen graph, and again before the next, after the
#: graph had folded them into constants: written on every call (a counter one graph of the
#: model updates and the next, after a graph break, reads), so a graph that froze them would
#: be frozen anew on each call. Such tensors stay graph inputs. A tensor written now and then
#: (an optimizer step between evaluation epochs) is frozen again once each time instead
#: (:class:`_FrozenVariants`); one found unwritten over :data:`QUIET_CALLS` calls in a row of
#: a graph that kept it an input leaves the table (one evaluation call per epoch made the
#: weights volatile, and fusion was lost for good: a new-user check). Each storage is kept
#: with a weak reference to its tensor: an entry counts while that tensor is alive and still
#: has that storage.
_VOLATILE: dict[Any, "weakref.ref[torch.Tensor]"] = {}

#: How many calls in a row of a graph must find its volatile inputs (:data:`_VOLATILE`)
#: unwritten before it is frozen again with them: a freeze then costs one compile per this
#: many calls at most, where a tensor is written now and then.
QUIET_CALLS = 8


def _volatile_storages() -> set[Any]:
    """The storages of :data:`_VOLATILE` whose tensors are alive and still hold them (dropping
    the other entries)."""
    from .effects import _storage_key

    live = set()
    for key, ref in list(_VOLATILE.items()):
        t = ref()
        if t is not None and _storage_key(t) == key:
            live.add(key)
        else:
            del _VOLATILE[key]
    return live


def _freeze(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Freezing:
    """Make the placeholders of ``gm`` that are the model's parameters and buffers constants of
    the graph (``get_attr`` of the very tensor, registered on ``gm``), where that is safe: not
    written by the graph, not requiring grad while grad mode is on, a real tensor with static
    sizes, sharing no storage with what the graph writes. Returns what was done; ``gm`` gets a
    new, recompiled graph when anything was frozen."""
    from torch._subclasses.fake_tensor import FakeTensor

    from .effects import _storage_key

    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    result = Freezing(kept=list(range(len(example_inputs))))
    if len(placeholders) != len(example_inputs):  # pragma: no cover - TorchDynamo passes one per input
        log.warning(
            "fxpasses backend: freeze: %d placeholders for %d example inputs; nothing frozen",
            len(placeholders), len(example_inputs),
        )
        return result
    written_nodes, state_names = _writes(gm)
    written = [n in written_nodes for n in placeholders]
    # storages the graph may write: of the inputs it writes (through views too) and of module
    # state it writes; ``None`` in it when one of them has no real storage to compare
    written_storage = {
        _storage_key(v) if isinstance(v, torch.Tensor) and not isinstance(v, FakeTensor) else None
        for v, w in zip(example_inputs, written)
        if w
    }
    if state_names:
        for qual, t in [*gm.named_parameters(), *gm.named_buffers()]:
            if any(qual == s or s.endswith("*") and qual.startswith(s[:-1]) for s in state_names):
                written_storage.add(_storage_key(t))
    grad = torch.is_grad_enabled()
    chosen: list[tuple[int, torch.fx.Node, torch.Tensor, str]] = []
    numbers: list[tuple[int, torch.fx.Node, Any, str]] = []
    volatile = _volatile_storages()
    for i, (node, value) in enumerate(zip(placeholders, example_inputs)):
        source = getattr(node.meta.get("grapharg"), "source", None)
        name = _state_name(source)
        if name is None:
            number = _number_name(source)
            if (
                number is not None
                and type(value) is torch.Tensor
                and value.dim() == 0
                and value.dtype in (torch.float64, torch.int64, torch.bool)
                and not written[i]
            ):
                if all(u.op == "call_method" and u.target == "item" and len(u.args) == 1 and not u.kwargs for u in node.users):
                    numbers.append((i, node, value.item(), number))
                else:
                    result.numbers_kept.append(number)
            continue
        if not isinstance(value, torch.Tensor):
            continue
        fake = node.meta.get("example_value", node.meta.get("val"))
        if isinstance(value, FakeTensor):
            reason = "fake"
        elif isinstance(fake, torch.Tensor) and any(not isinstance(d, int) for d in fake.shape):
            reason = "symbolic"
        elif written[i]:
            reason = "written"
        elif None in written_storage or _storage_key(value) in written_storage:
            reason = "storage"
        elif _storage_key(value) in volatile:
            reason = "volatile"
            result.volatile.append(value)
        elif value.requires_grad and grad:
            reason = "grad"
        elif value.is_inference():
            # no version counter: a write after the freeze could not be seen (a serving
            # model made under inference_mode, load_state_dict'ed later: a new-user check)
            reason = "inference"
        else:
            chosen.append((i, node, value, name))
            continue
        result.not_frozen.append((name, reason))
    if not chosen and not numbers:
        return result
    # Edit a copy: TorchDynamo generates the call of the compiled function from the
    # placeholders of its own graph (the one ``gm`` came with), so that graph keeps them all and
    # the function returned to TorchDynamo drops the frozen positions itself.
    graph = _copy_dynamo_graph(gm.graph)
    copies = dict(zip(placeholders, graph.find_nodes(op="placeholder")))
    first = next(n for n in graph.nodes if n.op != "placeholder")  # the output node at least
    attrs: dict[int, str] = {}  # id(tensor) -> attribute (one tensor behind two inputs: one attribute)
    for i, original, value, name in chosen:
        node = copies[original]
        attr = attrs.get(id(value))
        if attr is None:
            attr = attrs[id(value)] = _attr_name(gm, name)
            if isinstance(value, torch.nn.Parameter):
                gm.register_parameter(attr, value)
            else:
                gm.register_buffer(attr, value)
            source = getattr(original.meta.get("grapharg"), "source", None)
            if source is not None:
                result.sources[attr] = source
        with graph.inserting_before(first):
            get = graph.get_attr(attr)
        get.meta.update({k: v for k, v in node.meta.items() if k not in ("grapharg", "tensor_dict")})
        if any(node in _statistics_read(u) for u in node.users):
            result.norm_inputs.add(attr)
        node.replace_all_uses_with(get)
        graph.erase_node(node)
        result.frozen.append((name, attr))
        result.inputs.append((i, value))
    for i, original, number, name in numbers:
        # the graph reads the number as `placeholder.item()`: each such call becomes the literal
        node = copies[original]
        for item in list(node.users):
            for user in list(item.users):
                user.args = torch.fx.node.map_arg(user.args, lambda a, item=item: number if a is item else a)
                user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda a, item=item: number if a is item else a)
            graph.erase_node(item)
        graph.erase_node(node)
        result.numbers.append((name, i, number))
    frozen_positions = {i for i, *_ in chosen} | {i for i, *_ in numbers}
    result.kept = [i for i in result.kept if i not in frozen_positions]
    gm.graph = graph  # (recompiles)
    return result


def _sync_param_sources(gm: torch.fx.GraphModule, sources: dict[str, Any]) -> None:
    """Give every parameter and buffer of a TorchDynamo graph module a ``Source`` in
    ``gm._param_name_to_source``, which aot_autograd (inductor) requires of a graph from
    TorchDynamo: a frozen parameter its own (``sources``), a tensor a pass added
    (``fold_constants``' results, ``fuse_conv_bn``'s fused weights) a ``ConstantSource``
    named after its attribute. TorchDynamo's own table is copied, not changed."""
    table = getattr(gm, "_param_name_to_source", None)
    if not isinstance(table, dict):
        return
    names = [n for n, _ in gm.named_parameters(remove_duplicate=False)]
    names += [n for n, _ in gm.named_buffers(remove_duplicate=False)]
    missing = [n for n in names if n not in table]
    if not missing:
        return
    from torch._dynamo.source import ConstantSource

    table = dict(table)
    for n in missing:
        table[n] = sources.get(n) or ConstantSource(source_name=n)
    gm._param_name_to_source = table


def _inductor_mode(mode: Any, then: Any) -> dict[str, Any]:
    """The inductor settings of ``torch.compile``'s ``mode`` (``torch._inductor.list_mode_options``).

    Raises:
        ConfigError: ``mode`` is not one of inductor's modes, or ``then`` is not inductor
            (``mode`` means nothing to another backend).
    """
    from .errors import ConfigError

    if then != "inductor":
        raise ConfigError(
            f"torch.compile mode={mode!r} sets inductor's options, and backend 'fxpasses' hands its graphs to "
            f"{then!r}: leave mode out, or use then='inductor'"
        )
    import torch._inductor

    try:
        return dict(torch._inductor.list_mode_options(mode))
    except Exception as exc:  # noqa: BLE001 - torch's "Unrecognized mode=..., should be one of ..."
        raise ConfigError(f"torch.compile mode: {exc}") from None


def fxpasses_backend(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any
) -> Callable[..., Any]:
    """TorchDynamo backend: run the fxpasses pipeline over ``gm``, then hand it on.

    Raises:
        ConfigError: unknown keys in ``options`` (naming them and the known ones, with a
            "did you mean" for close ones), a bad pipeline, or an ``atol``/``rtol`` that is not
            a finite number >= 0.
        PassFailedError: a pass failed (with ``on_error="rollback"`` the graph is restored
            first; TorchDynamo then reports the backend failure).
    """
    from .errors import ConfigError, close_names, did_you_mean, did_you_mean_value, not_one_of

    options = dict(kwargs.get("options") or {})
    unknown = set(options) - _KNOWN
    if unknown:
        # the closest known option to each unknown one
        named = sorted(map(str, unknown))
        close = list(dict.fromkeys(m for k in named for m in close_names(k, _KNOWN, n=1)))
        raise ConfigError(
            f"unknown torch.compile option(s) for backend 'fxpasses': {', '.join(named)} "
            f"(known: {', '.join(sorted(_KNOWN))})" + did_you_mean(close)
        )
    reg, project = _registry(options)
    spec, source = _pipeline_spec(options, reg, project)
    from .pipeline import tolerance

    for key in ("atol", "rtol"):  # checked once, before any graph; absent: the Pipeline's default
        if key in options:
            options[key] = tolerance(f"torch.compile option {key!r}", options[key])
    from .spec import SETTINGS

    for key, allowed in SETTINGS.items():  # verify, on_error: checked once, named as options
        if key in options and options[key] not in allowed:
            raise ConfigError(not_one_of(f"torch.compile option {key!r}", options[key], allowed))
    freeze = options.get("freeze", False)
    if not isinstance(freeze, bool):
        raise ConfigError(f"torch.compile option 'freeze' must be true or false, got {freeze!r}")
    then = options.get("then", "inductor")
    mode = kwargs.get("mode")
    if mode is not None:
        # torch.compile(..., mode=...) reaches a custom backend as a keyword (and cannot be
        # given with options=): it was dropped, so inductor ran with its defaults
        options["_inductor_config"] = _inductor_mode(mode, then)
    if not (isinstance(then, str) or callable(then)):
        raise ConfigError(
            f"torch.compile option 'then' must be a backend name (e.g. 'inductor', 'eager') or a "
            f"backend callable, got {then!r}"
        )
    if then == "fxpasses":
        raise ConfigError(
            "torch.compile option 'then' is 'fxpasses', this backend itself: the pipeline would run twice "
            "(name the backend that compiles the optimized graph: 'inductor', 'eager', ...)"
        )
    if callable(then):  # a backend callable takes (gm, example_inputs), as TorchDynamo calls it
        import inspect

        try:
            inspect.signature(then).bind(gm, example_inputs)
        except TypeError as exc:
            raise ConfigError(
                f"torch.compile option 'then' must take (gm, example_inputs), as a TorchDynamo backend "
                f"does: {then!r} cannot ({exc})"
            ) from None
        except ValueError:  # no signature to read (a builtin): called as it is
            pass
    if isinstance(then, str) and then != "eager":  # a misspelt name: said before any pipeline runs
        from torch._dynamo.backends.registry import list_backends, lookup_backend

        try:
            lookup_backend(then)
        except Exception:
            every = [b for b in list_backends(exclude_tags=()) if b != "fxpasses"]
            main = ", ".join(["eager", "aot_eager", *(b for b in list_backends() if b != "fxpasses")])
            raise ConfigError(
                f"torch.compile option 'then' names no TorchDynamo backend: {then!r}"
                + did_you_mean_value(then, every)
                + f" (backends: {main}, ...: torch._dynamo.list_backends(exclude_tags=()) lists them all; "
                "or give a backend callable)"
            ) from None

    def compile_one(
        g: torch.fx.GraphModule, inputs: Sequence[Any], frozen: bool, eager: bool = False
    ) -> tuple[Callable[..., Any], Any]:
        return _compile(g, inputs, spec, source, options, "eager" if eager else then, frozen, reg, project[1] if project else None)

    if not freeze:
        return compile_one(gm, example_inputs, False)[0]
    pristine = _copy_dynamo_module(gm)  # before freezing: the graph again, for other tensors
    compiled, freezing = compile_one(gm, example_inputs, True)
    if not freezing.changed and not freezing.volatile:
        return compiled
    return _FrozenVariants(pristine, compiled, freezing, compile_one, example_inputs)


def _compile(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    spec: Any,
    source: str,
    options: dict[str, Any],
    then: Any,
    freeze: bool,
    reg: Any = None,
    project: Any = None,
) -> tuple[Callable[..., Any], Any]:
    """Freeze (when asked), run the pipeline over ``gm`` and hand it to ``then``; returns the
    function to call with the graph's inputs (the frozen ones dropped) and the Freezing
    (None without ``freeze``). ``project``: the nearest pyproject.toml's ``Config``, whose
    options tables and settings apply (see the module doc)."""
    from .pipeline import Pipeline, bisect_hint
    from .spec import parse_pipeline_string

    from .config import Config

    from_file = isinstance(spec, Config)  # the pyproject's pipeline, options and settings
    given = spec if isinstance(spec, Pipeline) else None  # a Pipeline object: its own settings
    if given is not None:
        verify = options.get("verify", given.verify)
    else:
        verify = options.get("verify", project.verify if project is not None else "lint")
    freezing = _freeze(gm, example_inputs) if freeze else None
    if freezing is not None and freezing.changed:
        example_inputs = [example_inputs[i] for i in freezing.kept]
    inputs = _concrete(example_inputs)
    if inputs is None:
        inputs = list(example_inputs)
        if verify == "numeric":
            log.warning(
                "fxpasses backend: verify='numeric' needs concrete example inputs, and this graph's have "
                "symbolic sizes without a value (dynamic shapes); verifying with 'lint' instead"
            )
            verify = "lint"
    common: dict[str, Any] = dict(verify=verify, on_error=options.get("on_error", "rollback"), registry=reg)
    if project is not None and not from_file:
        # the table's settings and options tables with a pipeline from elsewhere, as `fxpasses
        # run --pipeline` keeps them (a table for a pass it does not run is left)
        common.update(
            on_error=options.get("on_error", project.on_error),
            atol=project.atol,
            rtol=project.rtol,
            order=project.order,
            options=project.options,
            ignore_unused_options=True,
            _from_config=project._source,
            _from_preset=source.startswith("options['preset']"),
        )
    common.update({k: options[k] for k in ("atol", "rtol") if k in options})
    if given is not None:
        pipeline = copy.copy(given)  # (the caller's object keeps its settings)
        pipeline.verify = verify
        for key in ("on_error", "atol", "rtol"):
            if key in options:
                setattr(pipeline, key, options[key])
    elif from_file:
        # the torch.compile options over the table's settings
        cfg = spec.model_copy(update={"verify": verify, **{k: options[k] for k in ("on_error", "atol", "rtol") if k in options}})
        pipeline = Pipeline._from_config_obj(cfg, registry=reg)
    elif isinstance(spec, str):
        pipeline = Pipeline(parse_pipeline_string(spec, source), source=source, **common)
    else:
        pipeline = Pipeline(list(spec), source=source, **common)
    # a numeric failure's note: no config names this graph, the model does
    pipeline._bisect_hint = bisect_hint(_bisect_command(freeze, torch.is_grad_enabled()))
    if freezing is not None:
        # the frozen tensors are the model's own: a pass's in-place write of one would change
        # the uncompiled model too, as a write of the inputs they were does (a new-user check:
        # it passed lint, and the user's eager model came out wrong)
        pipeline._callers_tensors = [(name, t) for (name, _), (_, t) in zip(freezing.frozen, freezing.inputs)]
    report = pipeline.run(gm, inputs)
    if freezing is not None and freezing.frozen:
        from .snapshot import _versions  # (None for an inference tensor: it keeps no version counter)

        read = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
        tensors = [t for _, t in freezing.inputs]
        stats: dict[int, tuple[str, torch.Tensor]] = {}
        for tensor, (name, attr), version in zip(tensors, freezing.frozen, _versions(tensors)):
            if attr not in read and version is not None:
                freezing.consumed.append((tensor, version))
                # (read by a batch-norm call, or named as nn.BatchNorm names its statistics)
                if attr in freezing.norm_inputs or name.rpartition(".")[2] in _BATCH_NORM_STATISTICS:
                    stats[id(tensor)] = (name, tensor)
        if stats:
            counters = _batch_counters([t for _, t in stats.values()])
            for (counter, held), version in zip(counters, _versions([c for c, _ in counters])):
                if version is not None:
                    freezing.consumed.append((counter, version))
                    freezing.stand_ins[id(counter)] = held
            watched = {id(t) for _, held in counters for t in held}
            freezing.unwatched_stats = [name for i, (name, _) in stats.items() if i not in watched]
    if freezing is not None:
        report.notes.extend(freezing.notes())
        log.debug("fxpasses backend: frozen %s", ", ".join(f"{n} (as {a})" for n, a in freezing.frozen))
    reports.append(report)
    log.info("fxpasses pipeline (%s) on a %d-node graph:\n%s", source, report.nodes_before, report.table())
    if then == "eager":
        compiled = gm.forward
    else:
        _sync_param_sources(gm, freezing.sources if freezing is not None else {})
        if callable(then):
            compiled = then(gm, example_inputs)
            if not callable(compiled):
                from .errors import ConfigError

                raise ConfigError(
                    f"torch.compile option 'then' ({then!r}) returned {type(compiled).__name__} "
                    f"{compiled!r:.80}, not the callable a TorchDynamo backend returns"
                )
        else:
            from torch._dynamo.backends.registry import lookup_backend

            patches = options.get("_inductor_config")
            if then == "inductor" and patches:
                from torch._inductor.compile_fx import compile_fx

                compiled = compile_fx(gm, example_inputs, config_patches=dict(patches))
            else:
                compiled = lookup_backend(then)(gm, example_inputs)
    if freezing is None or not freezing.changed:
        return compiled, freezing
    kept = tuple(freezing.kept)

    def without_frozen(*args: Any) -> Any:
        # TorchDynamo still passes every original input, the frozen parameters included
        return compiled(*[args[i] for i in kept])

    return without_frozen, freezing


#: Buffer names of a batch norm's running statistics, which its kernel updates in training
#: mode without moving their version counters (see :func:`_batch_counters`).
_BATCH_NORM_STATISTICS = ("running_mean", "running_var")


def _statistics_read(node: torch.fx.Node) -> set[torch.fx.Node]:
    """The nodes a batch-norm call reads as its running statistics: its ``running_mean`` and
    ``running_var`` arguments, bound by parameter name as effect analysis binds a call
    (:func:`fxpasses.effects._bind`: ``F.batch_norm``'s signature, an ATen schema); empty for
    any other node."""
    from .effects import _bind, _nodes_in
    from .ops import family_members, op_name

    name = op_name(node) if node.op == "call_function" else None
    if name is None or name not in family_members("batch_norm"):
        return set()
    bound = _bind(node.target, name, node.args, node.kwargs)
    if bound is None:
        return set()
    return set(_nodes_in(bound.get("running_mean"))) | set(_nodes_in(bound.get("running_var")))


def _batch_counters(stats: list[torch.Tensor]) -> list[tuple[torch.Tensor, list[torch.Tensor]]]:
    """The ``num_batches_tracked`` buffer beside batch-norm running statistics (in the same
    module's ``_buffers``), with the statistics among ``stats`` it stands for.

    torch's batch-norm kernel updates ``running_mean`` and ``running_var`` in place in training
    mode without moving their version counters (in grad mode, under ``no_grad`` and under
    ``inference_mode``: a real-model check found it), so a training-mode call of the model
    outside the frozen graph (recalibrating the statistics, ``torch.optim.swa_utils.update_bn``)
    went unseen, and the fused weights stayed stale. ``nn.BatchNorm*`` counts each such call in
    ``num_batches_tracked`` with ``add_(1)``, which moves that buffer's counter: watching it
    sees the update. The modules' buffer dicts are found through Python's garbage collector
    (``gc.get_referrers`` of the statistics: one walk of the tracked objects, once per freeze
    that folded statistics away); statistics outside such a module (``F.batch_norm`` of a
    module's own tensors) have no counter, and are named in the report's notes."""
    import gc

    ids = {id(t) for t in stats}
    found: dict[int, tuple[torch.Tensor, list[torch.Tensor]]] = {}
    for holder in gc.get_referrers(*stats):
        if not isinstance(holder, dict):
            continue
        counter = holder.get("num_batches_tracked")
        if not isinstance(counter, torch.Tensor):
            continue
        held = [v for v in holder.values() if id(v) in ids]
        if held:
            entry = found.setdefault(id(counter), (counter, []))
            entry[1].extend(t for t in held if all(t is not h for h in entry[1]))
    return list(found.values())


#: How many frozen variants of one TorchDynamo graph are compiled (one per set of parameter
#: tensors it is called with) before the others run an unfrozen compile; TorchDynamo's own
#: default limit of recompilations per frame.
MAX_FROZEN_VARIANTS = 8
_DATA_PTR = torch.Tensor.data_ptr


class _FrozenVariants:
    """The function TorchDynamo gets for a frozen graph: it checks that the tensors at the
    frozen input positions are the very ones frozen, and otherwise compiles (once per set of
    tensors) a variant frozen with those.

    TorchDynamo does not guard on which parameter tensors a graph is called with (only
    inductor's own freezing makes it), and it reuses one compiled graph for every instance of
    a module class (``torch.compile`` of each block, a repeated layer with a graph break): a
    graph frozen with the first instance's weights would silently compute with them for the
    others. After :data:`MAX_FROZEN_VARIANTS` variants, one unfrozen compile serves the rest."""

    def __init__(
        self,
        pristine: torch.fx.GraphModule,
        compiled: Callable[..., Any],
        freezing: Any,
        compile_one: Callable[..., Any],
        example_inputs: Sequence[Any],
    ) -> None:
        self.pristine = pristine
        self.compile_one = compile_one
        # what TorchDynamo compiled the graph with (symbolic sizes of a dynamic graph among
        # them): a graph frozen again is compiled with these, its parameters' and buffers'
        # positions taken from the call (other tensors of a module instance). Compiling with
        # the call's own inputs specialised a dynamic graph to the call's sizes, and inductor's
        # code then failed at the next size ("expected size 5==2": a new-user check)
        self.example_inputs = list(example_inputs)
        # A graph with symbolic sizes (dynamic shapes) is compiled by `then` inside
        # TorchDynamo's tracing context, which a call does not have: compiled from a call,
        # inductor specialised it to the example's sizes. Frozen again, it runs as the
        # optimized FX graph (then="eager"), correct for every size, with a warning once
        self.dynamic = any(isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)) for a in example_inputs) or any(
            isinstance(v, torch.Tensor) and any(not isinstance(d, int) for d in v.shape)
            for v in (n.meta.get("example_value") for n in pristine.graph.find_nodes(op="placeholder"))
        )
        self.warned_dynamic = False
        self.state_positions = [
            i
            for i, n in enumerate(pristine.graph.find_nodes(op="placeholder"))
            if _state_name(source := getattr(n.meta.get("grapharg"), "source", None)) is not None
            or _number_name(source) is not None
        ]
        # each variant: (take the frozen positions' tensors from a call, those tensors, the
        # frozen numbers' positions and values, the compiled graph, the tensors it folded away,
        # their version counters then followed by their data pointers, the batch-norm
        # counters standing in for statistics, the volatile inputs, [their version counters
        # and data pointers at the last call, the calls in a row that found them so] or None)
        self.variants: list[tuple[Any, ...]] = []
        self.unfrozen: Callable[..., Any] | None = None
        self.refroze = False  # the last call froze again for a folded tensor written since
        from .snapshot import _version_of

        self._version_of = _version_of
        self._add(freezing, compiled)

    def _add(self, freezing: Any, compiled: Callable[..., Any]) -> None:
        positions = [i for i, _ in freezing.inputs]
        tensors = tuple(t for _, t in freezing.inputs)
        # the tensors at those positions as a tuple, taken in C (one call per call)
        if len(positions) > 1:
            take = operator.itemgetter(*positions)
        elif positions:
            take = lambda args: (args[positions[0]],)  # noqa: E731
        else:  # only numbers were frozen
            take = lambda args: ()  # noqa: E731
        watched = tuple(t for t, _ in freezing.consumed)
        # the version counters then, and the data pointers (`p.data = new` rebinds a tensor's
        # data without moving its version counter)
        versions = tuple(v for _, v in freezing.consumed) + tuple(map(_DATA_PTR, watched))
        numbers = tuple((i, v) for _, i, v in freezing.numbers)
        # the volatile inputs: their version counters at the last call, and the calls in a
        # row that found them so
        volatile = tuple(freezing.volatile)
        quiet = [self._versions(volatile), 0] if volatile else None
        self.variants.append((take, tensors, numbers, compiled, watched, versions, dict(freezing.stand_ins), volatile, quiet))

    def _versions(self, tensors: tuple[torch.Tensor, ...]) -> tuple[Any, ...]:
        """The version counters of ``tensors`` followed by their data pointers (read in C)."""
        return tuple(map(self._version_of, tensors)) + tuple(map(_DATA_PTR, tensors))

    def _still_volatile(self, volatile: tuple[torch.Tensor, ...], quiet: list[Any]) -> bool:
        """Whether the volatile inputs of a variant stay so: False once :data:`QUIET_CALLS`
        calls in a row found them unwritten (their storages then leave :data:`_VOLATILE`)."""
        now = self._versions(volatile)
        if now != quiet[0]:
            quiet[0], quiet[1] = now, 0
            return True
        quiet[1] += 1
        if quiet[1] < QUIET_CALLS:
            return True
        from .effects import _storage_key

        for t in volatile:
            _VOLATILE.pop(_storage_key(t), None)
        log.info("fxpasses backend: freeze: %d volatile input(s) unwritten over %d calls; freezing again", len(volatile), QUIET_CALLS)
        return False

    def _eager(self) -> bool:
        """Whether a variant compiled now runs as the FX graph itself (see ``dynamic``)."""
        if not self.dynamic:
            return False
        if not self.warned_dynamic:
            self.warned_dynamic = True
            log.warning(
                "fxpasses backend: freeze: a graph with dynamic shapes was frozen again (a folded weight was "
                "written, a frozen module number such as a BatchNorm's eps changed, or another module instance "
                "called it); it now runs without its `then` backend, which "
                "compiles only inside TorchDynamo: call torch._dynamo.reset() to compile it again"
            )
        return True

    def _inputs_for(self, args: tuple[Any, ...]) -> list[Any]:
        """The example inputs to compile a variant for ``args`` with: TorchDynamo's, with the
        call's tensors at the positions of parameters and buffers."""
        inputs = list(self.example_inputs)
        if len(inputs) != len(args):  # pragma: no cover - TorchDynamo calls with every input
            return list(args)
        for i in self.state_positions:
            inputs[i] = args[i]
        return inputs

    def __call__(self, *args: Any) -> Any:
        for k, (take, tensors, numbers, compiled, watched, versions, stand_ins, volatile, quiet) in enumerate(self.variants):
            if all(map(operator.is_, take(args), tensors)) and (not numbers or _same_numbers(args, numbers)):
                now = self._versions(watched) if watched else versions
                if now == versions:
                    self.refroze = False
                    if quiet is None or self._still_volatile(volatile, quiet):
                        return compiled(*args)
                    del self.variants[k]  # unwritten for a while: frozen again with them
                    break
                # a tensor folded or fused into constants was written in place since (an
                # optimizer step, load_state_dict, another graph of the model): what was
                # computed from it is stale. Written again right after the last such freeze:
                # written on every call, so kept an input from now on (_VOLATILE)
                n = len(watched)
                moved = [t for t, v, v0, p, p0 in zip(watched, now, versions, now[n:], versions[n:]) if v != v0 or p != p0]
                # (a batch norm's counter moved: its statistics were written, see _batch_counters)
                moved = [s for t in moved for s in stand_ins.get(id(t), (t,))]
                if self.refroze:
                    from .effects import _storage_key

                    _VOLATILE.update((_storage_key(t), weakref.ref(t)) for t in moved)
                log.info("fxpasses backend: freeze: %d tensor(s) folded into constants were written in place; freezing again", len(moved))
                self.refroze = True
                del self.variants[k]
                break
        if len(self.variants) >= MAX_FROZEN_VARIANTS:
            if self.unfrozen is None:
                log.warning(
                    "fxpasses backend: freeze: one graph was called with %d different sets of parameters; "
                    "the others run a compile without freezing",
                    len(self.variants),
                )
                self.unfrozen = self.compile_one(_copy_dynamo_module(self.pristine), self._inputs_for(args), False, self._eager())[0]
            return self.unfrozen(*args)
        compiled, freezing = self.compile_one(_copy_dynamo_module(self.pristine), self._inputs_for(args), True, self._eager())
        self._add(freezing, compiled)  # (nothing frozen: it takes every input, and matches every call)
        return compiled(*args)


def _same_numbers(args: tuple[Any, ...], numbers: tuple[tuple[int, Any], ...]) -> bool:
    """Whether the call ``args`` holds the frozen ``numbers`` (``(position, value)``; TorchDynamo
    passes each as a 0-dim tensor) at their positions (NaN equal to NaN)."""
    for i, value in numbers:
        a = args[i]
        now = a.item() if isinstance(a, torch.Tensor) else a
        if now != value and not (now != now and value != value):
            return False
    return True


def _copy_dynamo_graph(graph: torch.fx.Graph) -> torch.fx.Graph:
    """A copy of a TorchDynamo graph (nodes, names and order; each node's meta shallowly), with
    each placeholder's ``_dynamo_source``, which aot_autograd (inductor) reads off it."""
    new = copy.deepcopy(graph)
    for old, node in zip(graph.find_nodes(op="placeholder"), new.find_nodes(op="placeholder")):
        if hasattr(old, "_dynamo_source"):
            node._dynamo_source = old._dynamo_source
    return new


def _copy_dynamo_module(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A GraphModule with a copy of ``gm``'s graph (:func:`_copy_dynamo_graph`), sharing its
    submodules and tensors, with what TorchDynamo's backends read off it (``meta``,
    ``_param_name_to_source``)."""
    new = torch.fx.GraphModule(gm, _copy_dynamo_graph(gm.graph), class_name=type(gm).__name__)
    for key in ("meta", "_param_name_to_source"):
        if key in gm.__dict__:
            new.__dict__[key] = copy.copy(gm.__dict__[key])
    return new
