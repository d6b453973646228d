"""The main job behind ``fxpasses run``: build, capture, optimize, verify, time, save.

1. Build the model from ``[model] factory`` (``module:callable``; the module is looked up next to
   the config file first), in eval mode unless ``train = true``. A factory may return an
   exported module (``torch.export``'s ``ExportedProgram``, taken as its ``.module()``, or
   that module, e.g. ``torch.export.load(path).module()``): it is used as it is, in the mode
   it was exported in (``train = true`` is an error: that mode is fixed at export).
2. Make the example inputs from ``[model] inputs`` (seeded by ``[model] seed``), or read them
   from the tensor file it names: positional inputs, and keyword inputs when it is a table
   with keyword names (or the file holds tensors named other than ``0``, ``1``, ...). The
   model is called ``model(*positional, **keywords)``.
3. Capture it (``symbolic_trace``, ``dynamo`` or ``export``; an exported module is not captured
   again: its dialect is ``export``). With ``[model] graph`` (a graph saved by a reproducer,
   :mod:`fxpasses.reproducer`) or ``[model] program`` (a program saved by
   ``torch.export.save``, such as the ``model.pt2`` of step 6) steps 1 and 3 are replaced by
   loading it.
4. Run the pipeline over the captured graph.
5. Check the outputs of the optimized graph against the captured graph before the pipeline
   (``atol``/``rtol`` of the config) and measure the latency of both (the fastest of repeated
   runs, after warm-up: robust to other processes' load, which the median was not).
6. Save (the output directory is checked for writability first, before any work): for the
   export capture a ``model.pt2`` (re-exported from the optimized graph) that
   ``torch.export.load`` reads back, checked to give the same outputs, recording the modules
   that define the pytree types of its inputs and outputs (:func:`save_program`), which
   loading it as a ``[model] program`` imports first; otherwise torch.fx's
   ``GraphModule.to_folder``: ``module/module.py`` (a class ``OptimizedModule`` with its
   imports) and ``module/state_dict.pt`` (every parameter, buffer and tensor attribute under
   each of its names, as the tensors were: dtype, strides, views sharing memory,
   ``requires_grad``); for the dynamo capture also ``inputs.pt`` (the
   graph's inputs, parameters included, since TorchDynamo passes them as inputs).
   ``report.json`` always. Relative output paths are relative to the working directory.

Outputs are compared with :func:`fxpasses.verify.call_isolated`: each call starts from the
same module state, on copies of the inputs, under one RNG seed.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import importlib.util
import inspect
import json
import logging
import math
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch

from ._json import dumps as json_dumps
from ._hookcheck import instrument_list
from .capture import Captured, capture
from .config import EXPORTED_MODE_FIXED, Config, InputSpec, ModelConfig, is_positional_name, parse_config, split_named_inputs
from .errors import ConfigError, FxPassesError, PassFailedError, UserError, VerificationError, close_names, did_you_mean, exception_line, exception_text, is_yaml_source, model_table, nearest_existing, os_reason, require_file, root_cause_note
from .inputs import in_spec_order
from .pipeline import BISECT_HINT, Pipeline, Plan, bisect_hint
from .registry import Registry
from .report import RunReport
from .reference64 import float64_reference
from .verify import TensorState, call_isolated, clone_outputs, compare_results, global_modes_kept

__all__ = [
    "JobResult",
    "PreparedModel",
    "run_job",
    "prepare_model",
    "load_factory",
    "make_inputs",
    "make_example_inputs",
    "load_model_inputs",
    "load_model_example_inputs",
    "load_folder",
    "default_config",
    "DEFAULT_PRESET",
]

#: The preset ``fxpasses run`` uses when the config names no pipeline or preset.
DEFAULT_PRESET = "inference"
#: ... and when the model runs in training mode (``train = true``): nothing that freezes weights.
TRAINING_PRESET = "training"

_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}


@dataclass
class JobResult:
    """What ``fxpasses run`` did.

    Attributes:
        report: the pipeline's :class:`~fxpasses.RunReport`.
        max_abs_error: largest absolute output difference after vs before the pipeline.
        latency_before_ms / latency_after_ms: latency of one forward call, in ms: the fastest
            of ``repeat`` timed calls after warm-up calls (the minimum, as ``timeit``
            recommends: load from other processes only ever adds time).
        saved: the files written.
        capture_seconds: wall time of the capture (or of loading a saved graph or program).
        captured: False when the model was not captured but used as saved (a ``graph``, a
            ``program``, or a factory's exported module).
        pipeline: what ran, as a pipeline string that reads back (the preset's passes with
            the config's ``[options.NAME]`` applied, for a preset).
        preset: the preset it came from (the config's, or the one run uses for a config that
            names no pipeline), or None.
        latency_note: "" or why the latency figures may not be the model's
            (:func:`latency_note`).
    """

    report: RunReport
    max_abs_error: float
    latency_before_ms: float
    latency_after_ms: float
    saved: list[Path] = field(default_factory=list)
    capture_seconds: float = 0.0
    captured: bool = True
    model_name: str = ""
    pipeline: str = ""
    latency_note: str = ""
    preset: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model_name,
            "pipeline": self.pipeline,
            "preset": self.preset,
            "report": self.report.as_dict(),
            "max_abs_error": self.max_abs_error,
            "latency_before_ms": self.latency_before_ms,
            "latency_after_ms": self.latency_after_ms,
            "latency_note": self.latency_note,
            "capture_seconds": self.capture_seconds,
            "captured": self.captured,
            "saved": [str(p) for p in self.saved],
        }


def default_config() -> Config:
    """The embedded config of ``fxpasses run`` without a CONFIG: the bundled example model."""
    return parse_config(
        {
            "preset": "inference",
            "model": {
                "factory": "fxpasses._example:convnet",
                "capture": "export",
                "inputs": [{"shape": [1, 3, 32, 32], "dtype": "float32"}],
            },
            "output": "fxpasses-out/example",
        },
        source="embedded default config",
    )


@contextlib.contextmanager
def _on_path(path: Path | None) -> Iterator[None]:
    if path is None:
        yield
        return
    entry = str(path)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def _beside_config(value: str | os.PathLike[str], base_dir: Path | None) -> Path:
    """A path a ``[model]`` key gives, relative to the config's folder ``base_dir`` (when
    there is one) unless absolute."""
    path = Path(value)
    return base_dir / path if not path.is_absolute() and base_dir is not None else path


def _factory_parts(spec: str) -> tuple[str, str]:
    """``(module, callable)`` of a factory ``module:callable``, the module stripped of white
    space; a path may hold colons itself (``C:/models/m.py:build``): the callable follows the
    last one. Without a colon, ``(spec, "")``."""
    module, _, attr = spec.rpartition(":") if ":" in spec else (spec, "", "")
    return module.strip(), attr


def load_factory(spec: str, base_dir: Path | None = None) -> Callable[..., Any]:
    """Import ``module:callable`` (``module`` may also be a ``.py`` path, relative to ``base_dir``).

    Raises:
        ConfigError: the module cannot be imported or has no such callable; names both.
    """
    module_name, attr = _factory_parts(spec)
    try:
        if module_name.endswith(".py"):
            path = _beside_config(module_name, base_dir)
            require_file(path, "model factory file", "a Python file defining the factory", source="[model] factory")
            mod_spec = importlib.util.spec_from_file_location(path.stem, path)
            assert mod_spec is not None and mod_spec.loader is not None
            module = importlib.util.module_from_spec(mod_spec)
            with _on_path(path.parent):
                mod_spec.loader.exec_module(module)
        else:
            with _on_path(base_dir):
                _check_not_shadowing(module_name, attr, base_dir)
                if base_dir is not None and module_name in sys.modules:
                    cached = getattr(sys.modules[module_name], "__file__", None) or ""
                    if cached and not Path(cached).resolve().is_relative_to(base_dir.resolve()):
                        del sys.modules[module_name]  # a same-named module from elsewhere
                module = importlib.import_module(module_name)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"cannot import model factory module {module_name!r}: {exception_text(exc)}",
            source="[model] factory",
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            from .errors import close_names, did_you_mean

            close = close_names(part, [n for n in dir(obj) if not n.startswith("_")], n=1)
            raise ConfigError(f"module {module_name!r} has no attribute {attr!r}{did_you_mean(close)}", source="[model] factory")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(f"{spec!r} is not callable", source="[model] factory")
    return obj


def _check_not_shadowing(module_name: str, attr: str, base_dir: Path | None) -> None:
    """Refuse a factory module next to the config whose top-level name is a standard library
    module's, or an installed package's that the process has imported: importing the local
    file would replace that module for the whole process (``json.py`` holding the factory
    broke torch.export, which uses ``json``).

    Raises:
        ConfigError: naming both files and the path form, which imports the file apart.
    """
    top = module_name.split(".")[0]
    if base_dir is None or not ((base_dir / f"{top}.py").is_file() or (base_dir / top / "__init__.py").is_file()):
        return
    loaded = sys.modules.get(top)
    where = getattr(loaded, "__file__", None) or ""
    if top in sys.stdlib_module_names:
        what = "a standard library module"
    elif where and _under_library_dirs(where) and not Path(where).resolve().is_relative_to(base_dir.resolve()):
        what = f"an installed module ({where})"
    else:
        return
    raise ConfigError(
        f"the factory's module {module_name!r} next to the config has the name of {what}, which the "
        f"process uses: rename the file, or name it as a path (factory = \"{module_name.replace('.', '/')}.py:{attr}\"), "
        "which imports it apart",
        source="[model] factory",
    )


def _under_library_dirs(path: str) -> bool:
    """Whether ``path`` is under one of the interpreter's library directories (the standard
    library's, site-packages)."""
    import sysconfig

    resolved = Path(path).resolve()
    roots = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return any(root and resolved.is_relative_to(Path(root).resolve()) for root in roots)


#: Largest example input ``make_inputs`` makes (bytes): a typo in a shape should be an error,
#: not an attempt to allocate terabytes.
_MAX_INPUT_BYTES = 16 * 2**30


def make_inputs(specs: Sequence[InputSpec], seed: int = 0) -> list[torch.Tensor]:
    """Random tensors for ``[model] inputs`` (see :class:`~fxpasses.config.InputSpec`).

    Raises:
        ConfigError: an input would take more than 16 GiB, or ``high <= low`` for integers.
    """
    gen = torch.Generator().manual_seed(seed)
    return [_random_input(str(i), s, gen) for i, s in enumerate(specs)]


def make_example_inputs(
    specs: Sequence[InputSpec] | Mapping[str, InputSpec], seed: int = 0
) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """``(positional, keywords)``: random tensors for ``[model] inputs``, a list of specs
    (positional inputs) or a table of specs by name (keys ``0``, ``1``, ... positional, other
    keys keyword inputs), drawn in the order given from one generator seeded with ``seed``.

    Raises:
        ConfigError: as :func:`make_inputs`.
    """
    if not isinstance(specs, Mapping):
        return make_inputs(specs, seed), {}
    gen = torch.Generator().manual_seed(seed)
    made = {name: _random_input(name if is_positional_name(name) else repr(name), s, gen) for name, s in specs.items()}
    return split_named_inputs(made)


def _float_range(lo: float, hi: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The smallest and the largest value of ``dtype`` in ``[lo, hi)`` (first > last: none)."""
    up, down = torch.tensor(math.inf, dtype=dtype), torch.tensor(-math.inf, dtype=dtype)
    first, last = torch.tensor(lo, dtype=dtype), torch.tensor(hi, dtype=dtype)
    if float(first) < lo:
        first = torch.nextafter(first, up)
    if float(last) >= hi:
        last = torch.nextafter(last, down)
    return first, last


def _random_input(label: str, s: InputSpec, gen: torch.Generator) -> torch.Tensor:
    """One random tensor for the spec ``s`` of input ``label``, drawn from ``gen``."""
    dtype = _DTYPES[s.dtype]
    shape = tuple(s.shape)
    numel = math.prod(shape)
    if numel * torch.empty((), dtype=dtype).element_size() > _MAX_INPUT_BYTES:
        raise ConfigError(
            f"input {label} of shape {list(shape)} ({s.dtype}) would take "
            f"{numel * torch.empty((), dtype=dtype).element_size() / 2**30:.1f} GiB; "
            f"the limit is {_MAX_INPUT_BYTES / 2**30:.0f} GiB",
            source="[model] inputs",
        )
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype.is_floating_point:
        drawn = s.drawn_range()
        if drawn is not None:
            lo, hi = drawn
            # drawn in float64 and as lo*(1-r) + hi*r: (hi - lo) * r + lo overflowed to inf for
            # bounds near the dtype's largest value, and float32 draws had float32's precision
            r = torch.rand(shape, generator=gen, dtype=torch.float64)
            # rounding to the dtype can land on high or below low: clamped to the dtype's
            # values in [low, high), of which there must be one
            first, last = _float_range(lo, hi, dtype)
            if first > last:
                raise ConfigError(
                    f"input {label}: no {s.dtype} value lies in [low, high) = [{lo!r}, {hi!r}): widen the range",
                    source="[model] inputs",
                )
            return (lo * (1 - r) + hi * r).to(dtype).clamp(first, last)
        return torch.randn(shape, generator=gen).to(dtype)
    lo, hi = s.drawn_range()  # type: ignore[misc]  # (InputSpec holds it to what the dtype can hold, not empty)
    return torch.randint(lo, hi, shape, generator=gen, dtype=dtype)


def _factory_kwargs_error(
    mc: ModelConfig, signature: inspect.Signature, exc: TypeError, source: str | None
) -> ConfigError:
    """The error for ``[model] kwargs`` that the factory's ``signature`` does not bind
    (``exc``, from :meth:`inspect.Signature.bind`): kwargs it does not take (with the close
    names it takes), else the required arguments the kwargs leave out, named with how to give
    them in the syntax of the config file at ``source``, or a positional-only argument it
    needs, which kwargs cannot give; else ``exc`` as it is."""
    params = list(signature.parameters.values())
    keywords = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    any_keyword = any(p.kind is p.VAR_KEYWORD for p in params)
    # (a positional-only argument given by name: exc says so)
    unexpected = [] if any_keyword else [k for k in mc.kwargs if k not in signature.parameters]
    if unexpected:  # (a misspelt name leaves its argument missing as well: the name is the fault)
        takes = [n for n in keywords if n not in mc.kwargs]
        close = {k: close_names(k, takes, n=1) for k in unexpected}
        if len(unexpected) == 1:
            (k,) = unexpected
            said = f"got an unexpected keyword argument {k!r}{did_you_mean(close[k])}"
        else:
            said = f"got unexpected keyword arguments {', '.join(map(repr, unexpected))}" + "".join(
                f"; {k!r}: did you mean {c[0]!r}?" for k, c in close.items() if c
            )
        return ConfigError(f"{mc.factory} does not take kwargs {mc.kwargs}: {said}", source="[model] kwargs")
    positional = [p.name for p in params if p.kind is p.POSITIONAL_ONLY and p.default is p.empty]
    if positional:  # (kwargs cannot give one: a config has no positional arguments)
        them = f"argument {positional[0]!r}" if len(positional) == 1 else f"arguments {', '.join(map(repr, positional))}"
        return ConfigError(
            f"{mc.factory} needs the positional-only {them}, which [model] kwargs cannot give (a config "
            "gives a factory keyword arguments only): name a factory of your own that calls it, "
            f"e.g. `def make(**kwargs): return {mc.factory.rpartition(':')[2]}(...)`",
            source="[model] factory",
        )
    missing = [p.name for p in params if p.name in keywords and p.default is p.empty and p.name not in mc.kwargs]
    if not missing:
        return ConfigError(f"{mc.factory} does not take kwargs {mc.kwargs}: {exc}", source="[model] kwargs")
    # each missing argument as the config file's syntax writes a key of the kwargs table
    if is_yaml_source(source):
        entries, table = [f"{n}: ..." for n in missing], "kwargs: {{{}}}"
    elif source is not None and ".json" in source.lower():
        entries, table = [f'"{n}": ...' for n in missing], '"kwargs": {{{}}}'
    else:
        entries, table = [f"{n} = ..." for n in missing], "kwargs = {{{}}}"
    them = "it" if len(missing) == 1 else "them"
    needs = f"the argument {missing[0]!r}" if len(missing) == 1 else f"the arguments {', '.join(map(repr, missing))}"
    if mc.kwargs:  # (some given: what to add to them)
        return ConfigError(
            f"{mc.factory} needs {needs} as well as the kwargs given ({', '.join(mc.kwargs)}): "
            f"add {them} to [model] kwargs ({', '.join(entries)})",
            source="[model] factory",
        )
    return ConfigError(
        f"{mc.factory} needs {needs}: give {them} in [model] kwargs ({table.format(', '.join(entries))})",
        source="[model] factory",
    )


def _build_model(mc: ModelConfig, base_dir: Path | None, source: str | None = None) -> tuple[torch.nn.Module, bool]:
    """``(model, exported)``: the factory's model in the mode ``train`` asks for, or, when the
    factory returns an exported module (``torch.export``'s ``ExportedProgram``, taken as its
    ``.module()``, or such a module), that module as it is (``exported`` True). ``source``:
    the config file, whose syntax a message's example is written in.

    Raises:
        ConfigError: the factory cannot be loaded, does not take ``kwargs`` or needs arguments
            they leave out (named, with how to give them), raises (named,
            with the exception as ``__cause__``), returns something else than a module;
            ``train = true`` for an exported module (its mode is fixed at export); the
            model's own ``train()`` raises.
    """
    assert mc.factory is not None
    factory = load_factory(mc.factory, base_dir)
    try:
        signature = inspect.signature(factory)
    except (ValueError, TypeError):  # no signature (a builtin): let the call say
        signature = None
    if signature is not None:
        try:
            signature.bind(**mc.kwargs)
        except TypeError as exc:
            raise _factory_kwargs_error(mc, signature, exc, source) from exc
    try:
        model = factory(**mc.kwargs)
    except Exception as exc:
        raise ConfigError(
            f"the model factory {mc.factory} raised {exception_text(exc)}{root_cause_note(exc)}", source="[model] factory"
        ) from exc
    if isinstance(model, torch.export.ExportedProgram):
        try:
            model = program_module(model)
        except Exception as exc:
            raise ConfigError(
                f"{mc.factory} returned an ExportedProgram whose .module() raised {exception_text(exc)}",
                source="[model] factory",
            ) from exc
    if not isinstance(model, torch.nn.Module):
        raise ConfigError(f"{mc.factory} returned {type(model).__name__}, not a torch.nn.Module", source="[model] factory")
    if _is_exported_module(model):
        if mc.train:
            raise ConfigError(
                f"{mc.factory} returned an exported module: {EXPORTED_MODE_FIXED}", source="[model] train"
            )
        _check_export_capture(mc, f"{mc.factory} returned an exported module")
        return model, True
    try:
        return model.train(mc.train), False
    except Exception as exc:  # the model's own train() (or a module that refuses mode changes)
        raise ConfigError(
            f"the model {mc.factory} returned cannot be put in {'training' if mc.train else 'eval'} mode: "
            f"{type(model).__name__}.train({mc.train}) raised {exception_text(exc)}",
            source="[model] train",
        ) from exc


def _is_exported_module(model: Any) -> bool:
    """Whether ``model`` is the module of an exported program (``ExportedProgram.module()``,
    also after ``torch.export.load``): its graph is already in the export dialect and its
    ``train()``/``eval()`` refuse to change the mode it was exported in."""
    return isinstance(model, torch.fx.GraphModule) and any(
        c.__name__ == "_StatefulGraphModule" for c in type(model).__mro__
    )


def _check_export_capture(mc: ModelConfig, what: str) -> None:
    """An exported module is used as it is: a ``capture`` other than ``export``, given in the
    config, is an error rather than silently ignored."""
    if "capture" in mc.model_fields_set and mc.capture != "export":
        raise ConfigError(
            f"{what}, which is used as it is, in the export dialect: `capture = {mc.capture!r}` cannot "
            'apply to it; remove `capture` (or set it to "export")',
            source="[model] capture",
        )


class _Kept(logging.Handler):
    """Keeps the records logged to it (instead of printing them)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def _quiet_loggers(*names: str) -> Iterator[list[logging.LogRecord]]:
    """Keep torch's loggers ``names`` from printing the traceback of an error (torch.export.load
    logs one, at WARNING level, for a file that is not a program, then raises an error that
    only says to read it) that the ConfigError then says in one line. Yields the records they
    logged meanwhile, so the error can quote what torch said."""
    loggers = [logging.getLogger(n) for n in names]
    saved = [(lg.propagate, lg.handlers[:]) for lg in loggers]
    kept = _Kept()
    for lg in loggers:
        lg.propagate = False
        lg.handlers[:] = [kept]
    try:
        yield kept.records
    finally:
        for lg, (propagate, handlers) in zip(loggers, saved):
            lg.propagate = propagate
            lg.handlers[:] = handlers


def load_program(path: str | os.PathLike[str], base_dir: Path | None = None) -> torch.nn.Module:
    """The module of the exported program saved at ``path`` (``torch.export.save``, e.g. the
    ``model.pt2`` ``fxpasses run`` writes): ``torch.export.load(path).module()``.

    Raises:
        ConfigError: see :func:`load_exported_program`.
    """
    try:
        return program_module(load_exported_program(Path(path), base_dir))
    except ConfigError as exc:
        if exc.source != "[model] program":
            raise
        # (called from Python, not for a config: its messages name no config key)
        raise ConfigError(exc.detail) from exc.__cause__


#: The extra file of a ``.pt2`` written by ``fxpasses run`` listing the modules that define
#: the pytree types of the program's inputs and outputs (:mod:`fxpasses._pytree_types`).
PYTREE_MODULES_FILE = "fxpasses/pytree_modules.json"


def _no_reproducer_note(pipeline: Pipeline, reproducer: Any) -> str:
    """The note of an error found after every pass succeeded (the optimized model's outputs
    differ, or it no longer runs) when a reproducer was asked for: none is written, since no
    pass failed, and why none did (``""`` without ``reproducer``)."""
    if reproducer is None:
        return ""
    unchecked = [s.name for s in pipeline.plan().steps if (s.verify or pipeline.verify) != "numeric"]
    if unchecked:
        n = len(unchecked)
        names = ", ".join(dict.fromkeys(unchecked))
        why = (
            f"verify = \"lint\" for {'pass' if n == 1 else 'passes'} {names}, which does not run the model, so no "
            "pass failed; with verify = \"numeric\" the first pass that changes the outputs fails, and its "
            "reproducer is written"
        )
    else:
        why = (
            "every pass passed its own numeric check, so no pass failed; the difference shows only when "
            "the whole run is compared (see the bisect note)"
        )
    return f"\n  note: no reproducer written (--reproducer): {why}"


def _check_program_savable(gm: torch.fx.GraphModule, cfg: Config) -> None:
    """Refuse, before the run, an exported module whose input or output pytree types
    ``torch.export.save`` cannot write (:func:`fxpasses._pytree_types.unserializable_types`):
    the save failed after the whole run as an internal error that printed none of its results
    (a new-user check).

    Raises:
        ConfigError: naming the types and how to register them.
    """
    from ._pytree_types import unserializable_note, unserializable_types

    info = getattr(getattr(gm.graph, "_codegen", None), "pytree_info", None)
    specs = [getattr(info, "in_spec", None), getattr(info, "out_spec", None)] if info is not None else []
    types = unserializable_types(specs)
    if types:
        raise ConfigError(f"cannot save the optimized program: {unserializable_note(types)}", source=_in_config(cfg, "[model]"))


def save_program(ep: Any, path: Path) -> None:
    """``torch.export.save(ep, path)``, recording the modules that define the pytree types of
    its inputs and outputs (a Hugging Face ``ModelOutput``, a registered dataclass) and the
    custom operators its graph calls (a pass plugin's ``torch.ops.acme.linear_relu``,
    :mod:`fxpasses._custom_ops`), which :func:`load_exported_program` imports before loading
    it in another process."""
    from ._custom_ops import graph_op_modules
    from ._pytree_types import program_specs, spec_modules

    modules = sorted({*spec_modules(program_specs(ep)), *graph_op_modules(ep.graph_module)})
    try:
        torch.export.save(ep, str(path), extra_files={PYTREE_MODULES_FILE: json.dumps(modules)})
    except NotImplementedError:
        from ._pytree_types import unserializable_note, unserializable_types

        types = unserializable_types(program_specs(ep))
        if not types:
            raise
        raise UserError(f"cannot save the program to {path}: {unserializable_note(types)}") from None


def _recorded_pytree_modules(path: Path) -> list[str]:
    """The modules :func:`save_program` recorded in the program file (none when it was saved
    otherwise: by ``torch.export.save`` itself)."""
    try:
        from torch.export.pt2_archive._package import PT2ArchiveReader
        from torch.export.pt2_archive.constants import EXTRA_DIR

        with PT2ArchiveReader(str(path)) as reader:
            modules = json.loads(reader.read_string(f"{EXTRA_DIR}{PYTREE_MODULES_FILE}"))
    except Exception:  # noqa: BLE001 - no record (or not an archive: torch.export.load says)
        return []
    return [m for m in modules if isinstance(m, str)] if isinstance(modules, list) else []


#: the ``GraphModule.meta`` key under which :func:`program_module` keeps the program's
#: ``range_constraints`` (the sizes its inputs may take), for saving it again
RANGES_META = "fxpasses_range_constraints"


def program_module(program: Any) -> torch.fx.GraphModule:
    """``program.module()`` of a ``torch.export.ExportedProgram``, with the program's
    ``range_constraints`` in its ``meta`` (:data:`RANGES_META`): the module does not keep
    them, and its shape environment's lower bounds are torch's tracing assumptions (2, where
    the program takes sizes 0 and 1), so a save would export it again with other ranges."""
    gm = program.module()
    with contextlib.suppress(Exception):  # (a program without them saves with the traced ranges)
        gm.meta[RANGES_META] = dict(program.range_constraints)
    return gm


def load_exported_program(path: str | os.PathLike[str], base_dir: Path | None = None) -> Any:
    """The ``torch.export.ExportedProgram`` saved at ``path`` (``torch.export.load``).

    The modules that define the pytree types of its inputs and outputs and its custom
    operators are imported first (with ``base_dir``, the config's directory, first on
    ``sys.path``): the ones :func:`save_program` recorded, and for a file saved without that
    record, the module a type that is not registered names (``transformers.modeling_outputs``
    for a Hugging Face model's ``ModelOutput``), when it is installed. A custom operator no
    imported module defines (a file saved by ``torch.export.save`` itself) is looked for in
    the installed pass plugins: they are loaded (:func:`fxpasses.registry`) and the load tried
    again.

    Raises:
        ConfigError: the file is missing or is not a saved exported program; a recorded
            module cannot be imported, or a pytree type of the program is not registered and
            importing the module it names does not register it (the message names the type
            and the module to import); it calls a custom operator that no imported module or
            installed pass plugin defines (the message names the operator).
    """
    from ._pytree_types import import_modules, loading

    path = Path(path)
    require_file(path, "program file", "a program saved by torch.export.save, .pt2", source="[model] program")
    import_modules(_recorded_pytree_modules(path), str(path), base_dir=base_dir, source="[model] program")
    return loading(lambda: _torch_export_load(path), str(path), base_dir=base_dir, source="[model] program")


def _torch_export_load(path: Path, plugins_loaded: bool = False) -> Any:
    """``torch.export.load(path)``; a pytree type that is not registered is raised as the
    error torch logged (for :func:`fxpasses._pytree_types.loading`), a custom operator that
    is not registered is looked for in the installed plugins (once), any other failure is a
    ConfigError quoting it."""
    logged: list[logging.LogRecord] = []
    try:
        with _quiet_loggers("torch.export", "torch.export.pt2_archive._package", "torch._subclasses.fake_tensor") as logged:
            return torch.export.load(str(path))
    except Exception as exc:
        # torch logs the real error and raises one saying "check the warnings above", which
        # were kept from printing: quote the logged exception instead
        cause = next((r.exc_info[1] for r in reversed(logged) if r.exc_info and r.exc_info[1] is not None), exc)
        from ._pytree_types import unregistered_type

        if unregistered_type(cause) is not None:
            raise cause from None  # for loading() to register the type and try again
        from ._custom_ops import unknown_op

        op = unknown_op(exception_text(cause))
        if op is not None and not plugins_loaded:
            from .registry import registry

            registry()  # imports the installed pass plugins, which may define it
            return _torch_export_load(path, plugins_loaded=True)
        if op is not None:
            raise ConfigError(
                f"cannot load {path} with torch.export.load: it calls {op}, a custom operator that no imported "
                "module or installed pass plugin defines: import the module that defines it before loading (or "
                "install the package that provides it)",
                source="[model] program",
            ) from exc
        said = exception_line(cause)
        said = said.split(". ", 1)[0][:300]  # torch's advice about checkpoints follows
        raise ConfigError(
            f"cannot load {path} with torch.export.load: {said} (is it a program written by "
            "torch.export.save? a file of torch.save is not one)",
            source="[model] program",
        ) from exc


def _saved_example_inputs(program: Any, path: Path) -> tuple[list[Any], dict[str, Any]]:
    """``(positional, keywords)``: the example inputs saved with an exported program.

    Raises:
        ConfigError: the program holds none (saved without them, or by an older torch).
    """
    saved = getattr(program, "example_inputs", None)
    if not (isinstance(saved, tuple) and len(saved) == 2 and isinstance(saved[1], dict)):
        raise ConfigError(
            f"{path} holds no example inputs to run it on; give them as [model] inputs",
            source="[model] program",
        )
    return list(saved[0]), dict(saved[1])


@dataclass
class PreparedModel:
    """A model made ready for a pipeline: the captured (or loaded) graph and its inputs."""

    captured: Captured
    name: str
    seconds: float
    loaded: bool = False  # used as saved (a graph, a program, an exported module), not captured


def load_model_inputs(mc: ModelConfig, base_dir: Path | None) -> list[torch.Tensor]:
    """``[model] inputs``, positional ones only: random tensors from specs, or the tensors of
    an inputs file.

    Raises:
        ConfigError: bad inputs (see :func:`load_model_example_inputs`), or keyword inputs.
    """
    args, kwargs = load_model_example_inputs(mc, base_dir)
    if kwargs:
        raise ConfigError(
            f"keyword inputs ({', '.join(sorted(kwargs))}) need load_model_example_inputs", source="[model] inputs"
        )
    return args


def check_model_sources(cfg: Config) -> None:
    """What ``fxpasses check`` can say of ``[model]`` without building the model: each file it
    names is there (``program``, ``graph``, an ``inputs`` file, a factory's ``path/models.py``),
    and a factory's module can be found (``importlib.util.find_spec``: its parent packages are
    imported, the module itself is not). ``fxpasses check`` said OK for a config whose factory
    module or program file was missing, which ``run`` then refused at once (a new-user check).
    And the inputs ``requires_grad`` names are inputs that can require grad
    (:func:`check_requires_grad`, run's own check: an inputs file is read for it), which
    ``check`` took where ``run`` refused them (an adversarial check).

    Raises:
        ConfigError: naming the key and the file, module or input, as ``fxpasses run`` would.
    """
    mc, base_dir = cfg.model, cfg._base_dir
    if mc is None:
        return
    for key, what, expected in (
        ("program", "program file", "a program saved by torch.export.save, .pt2"),
        ("graph", "graph file", "a graph.py written by --reproducer"),
        ("inputs", "tensor file", "a file of named tensors: .safetensors or .pt"),
    ):
        value = getattr(mc, key, None)
        if isinstance(value, str):
            require_file(_beside_config(value, base_dir), what, expected, source=_in_config(cfg, f"[model] {key}"))
    if mc.requires_grad and mc.inputs is not None:  # (run checks the inputs it makes alike)
        try:
            check_requires_grad(mc.requires_grad, _input_dtypes(mc, base_dir))
        except ConfigError as exc:
            raise ConfigError(exc.detail, source=_in_config(cfg, exc.source or "[model]")) from None
    if not isinstance(mc.factory, str):
        return
    module_name = _factory_parts(mc.factory)[0]
    if module_name.endswith(".py"):
        require_file(_beside_config(module_name, base_dir), "model factory file", "a Python file defining the factory", source=_in_config(cfg, "[model] factory"))
        return
    try:
        with _on_path(base_dir):
            found = importlib.util.find_spec(module_name)
    except Exception as exc:  # a parent package that does not import, or is not a package
        raise ConfigError(f"cannot import model factory module {module_name!r}: {exception_text(exc)}", source=_in_config(cfg, "[model] factory")) from exc
    if found is None:
        where = f" (looked for beside the config, in {base_dir}, and on sys.path)" if base_dir is not None else " (on sys.path)"
        raise ConfigError(f"cannot find model factory module {module_name!r}{where}", source=_in_config(cfg, "[model] factory"))


def load_model_example_inputs(
    mc: ModelConfig, base_dir: Path | None
) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """``[model] inputs`` as ``(positional, keywords)``: random tensors from a list or table of
    specs (:func:`make_example_inputs`), or the tensors of an inputs file
    (:func:`fxpasses.reproducer.load_example_inputs`: named ``0``, ``1``, ... positional, other
    names keyword inputs).

    Raises:
        ConfigError: the file cannot be read or names its positional tensors with gaps; an
            input too large, or integer bounds ``high <= low``.
    """
    if mc.inputs is None:
        raise ConfigError("no [model] inputs: the example inputs to run the model on", source="[model] inputs")
    if isinstance(mc.inputs, str):
        args, kwargs = _load_inputs_file(mc.inputs, base_dir)
    else:
        args, kwargs = make_example_inputs(mc.inputs, mc.seed)
    named = {**{str(i): a for i, a in enumerate(args)}, **kwargs}
    check_requires_grad(mc.requires_grad, {name: t.dtype for name, t in named.items()})
    for name in mc.requires_grad:
        named[name].requires_grad_(True)
    return args, kwargs


def _load_inputs_file(inputs: str, base_dir: Path | None) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """The tensors of the inputs file ``[model] inputs`` names, ``(positional, keywords)``.

    Raises:
        ConfigError: the file cannot be read or names its positional tensors with gaps (see
            :func:`fxpasses.reproducer.load_example_inputs`), from ``[model] inputs``.
    """
    from .reproducer import load_example_inputs

    try:
        return load_example_inputs(_beside_config(inputs, base_dir))
    except ConfigError as exc:
        raise ConfigError(str(exc), source="[model] inputs") from None


def check_requires_grad(names: Sequence[str], dtypes: Mapping[str, torch.dtype]) -> None:
    """Whether the inputs ``[model] requires_grad`` names can require grad: ``dtypes`` is each
    input's dtype by name, positional ones (``0``, ``1``, ...) first, as the model takes them.
    (``fxpasses run`` checks the inputs it made; ``fxpasses check`` the specs' dtypes, or the
    inputs file's tensors.)

    Raises:
        ConfigError: from ``[model] requires_grad``: a name that is no input (naming the
            inputs), or an input that is not floating point or complex.
    """
    for name in names:
        if name not in dtypes:
            raise ConfigError(
                f"{name!r} is not an input (inputs: {', '.join(dtypes) or 'none'})",
                source="[model] requires_grad",
            )
        if not (dtypes[name].is_floating_point or dtypes[name].is_complex):
            raise ConfigError(f"input {name!r} is {dtypes[name]}, which cannot require grad", source="[model] requires_grad")


def _input_dtypes(mc: ModelConfig, base_dir: Path | None) -> dict[str, torch.dtype]:
    """The dtype of each of ``[model] inputs`` by name, in the order :func:`check_requires_grad`
    takes: a list or table of specs' (no tensor is made), or the tensors of an inputs file.

    Raises:
        ConfigError: the inputs file cannot be read (as :func:`load_model_example_inputs`).
    """
    if isinstance(mc.inputs, str):
        positional, keywords = _load_inputs_file(mc.inputs, base_dir)
    elif isinstance(mc.inputs, Mapping):
        positional, keywords = split_named_inputs(mc.inputs)
    else:
        positional, keywords = list(mc.inputs or ()), {}
    named = {**{str(i): v for i, v in enumerate(positional)}, **keywords}
    return {name: v.dtype if isinstance(v, torch.Tensor) else _DTYPES[v.dtype] for name, v in named.items()}


def prepare_model(cfg: Config) -> PreparedModel:
    """Build and capture ``[model] factory``, or load ``[model] graph`` or ``[model] program``;
    make the inputs.

    Raises:
        ConfigError/UserError: no [model] section, a bad factory, graph, inputs or capture; a
            ``ConfigError`` about a ``[model]`` value names the config file before it, as other
            config errors do (``fx.toml: [model] factory: ...``).
    """
    try:
        return _prepare_model(cfg)
    except ConfigError as exc:
        if exc.source and exc.source.startswith("[model]"):
            exc.source = _in_config(cfg, exc.source)
            exc.args = (f"{exc.source}: {exc.detail}",)
        raise


def _in_config(cfg: Config, where: str) -> str:
    """``where`` (``"[model] inputs"``) after the config file that holds it, when the config
    came from one: ``"fx.toml: [model] inputs"``."""
    return f"{cfg._source}: {where}" if cfg._source and cfg._source != "config" else where


def _reference_module(cfg: Config) -> torch.fx.GraphModule:
    """The ``[model] reference`` graph file, loaded (see :class:`~fxpasses.config.ModelConfig`)."""
    from .reproducer import load_graph

    return load_graph(_beside_config(cfg.model.reference, cfg._base_dir), source=_in_config(cfg, "[model] reference"))


def _prepare_model(cfg: Config) -> PreparedModel:
    """:func:`prepare_model`'s work."""
    mc = cfg.model
    if mc is None:
        raise ConfigError(f"no {model_table(cfg._source)}: a model factory (or saved graph) and inputs are needed", source=cfg._source)
    base_dir = cfg._base_dir
    torch.manual_seed(mc.seed)
    if mc.graph is not None:
        from .dialect import detect_dialect
        from .reproducer import load_graph

        path = _beside_config(mc.graph, base_dir)
        inputs, kwargs = load_model_example_inputs(mc, base_dir)
        t0 = time.perf_counter()
        gm = load_graph(path)
        dialect = detect_dialect(gm)
        if "capture" in mc.model_fields_set and mc.capture != dialect and dialect != "unknown":
            # (it was ignored: the graph runs in the dialect it was saved in)
            raise ConfigError(
                f"[model] graph {mc.graph} is a saved {dialect} graph, used as it is: `capture = {mc.capture!r}` "
                f"cannot apply to it; remove `capture` (or set it to {dialect!r})",
                source="[model] capture",
            )
        captured = Captured(gm, inputs, dialect, kwargs)
        return PreparedModel(captured, str(mc.graph), time.perf_counter() - t0, loaded=True)
    if mc.program is not None:
        path = _beside_config(mc.program, base_dir)
        t0 = time.perf_counter()
        program = load_exported_program(path, base_dir)
        if mc.inputs is None:  # the example inputs torch.export saved with it
            inputs, kwargs = _saved_example_inputs(program, path)
        else:
            inputs, kwargs = load_model_example_inputs(mc, base_dir)
        # an exported module already: used as it is (the config's validation refused
        # `train = true` and another `capture`)
        captured = Captured(program_module(program), inputs, "export", kwargs)
        return PreparedModel(captured, str(mc.program), time.perf_counter() - t0, loaded=True)
    model, exported = _build_model(mc, base_dir, cfg._source)
    inputs, kwargs = load_model_example_inputs(mc, base_dir)
    _check_inputs_fit(model, inputs, kwargs, mc)
    t0 = time.perf_counter()
    if exported:  # torch.export's module already: not captured again
        assert isinstance(model, torch.fx.GraphModule)
        cap = Captured(model, list(inputs), "export", dict(kwargs))
    else:
        try:
            cap = capture(model, inputs, mc.capture, kwargs)
        except UserError as exc:  # (the inputs fit forward's signature; their shapes may not fit the model)
            exc.add_note(f"fxpasses: the example inputs were {_input_summary(inputs, kwargs)} ({_in_config(cfg, '[model] inputs')})")
            raise
    return PreparedModel(cap, str(mc.factory), time.perf_counter() - t0, loaded=exported)


def _input_summary(inputs: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """The example inputs in a few words: each tensor's shape and dtype (``(2, 3) float32``),
    keywords by name."""

    def one(v: Any) -> str:
        if isinstance(v, torch.Tensor):
            return f"{tuple(v.shape)} {str(v.dtype).removeprefix('torch.')}"
        return type(v).__name__

    parts = [one(v) for v in inputs] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return ", ".join(parts) if parts else "none"


def _check_inputs_fit(model: torch.nn.Module, inputs: Sequence[Any], kwargs: Mapping[str, Any], mc: ModelConfig) -> None:
    """Raise a ``ConfigError`` about ``[model] inputs`` when they cannot be passed to the
    model's ``forward`` at all (too many, a keyword it does not take, a required one missing):
    said before capturing, naming the signature, where torch.export's or the tracer's own
    error blamed the capture. A ``forward`` whose signature Python cannot read is left to
    the capture."""
    try:
        sig = inspect.signature(model.forward)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*inputs, **kwargs)
    except TypeError as exc:
        given = f"{len(inputs)} positional" + (f" and keyword {', '.join(map(repr, kwargs))}" if kwargs else "")
        where = f" (read from {mc.inputs})" if isinstance(mc.inputs, str) else ""
        params = [n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        takes_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
        hints = []
        for key in kwargs:
            if key not in params and not takes_any:
                close = close_names(key, params)
                if close:
                    hints.append(f"{key!r}: did you mean {close[0]!r}?")
        hint = f" ({'; '.join(hints)})" if hints else ""
        raise ConfigError(
            f"{given} input(s){where} do not fit {type(model).__name__}.forward{sig}: {exc}{hint}",
            source="[model] inputs",
        ) from None


def _latency_ms(fn: Callable[[], Any], repeat: int, warmup: int = 5) -> float:
    """The fastest of ``repeat`` timed calls of ``fn`` after ``warmup`` calls, in ms.

    The minimum, not the median: on a loaded machine other processes only add time, and the
    median of 20 calls was seen 0.33 ms before and 83 ms after the same pipeline."""
    with global_modes_kept(), torch.no_grad():
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return min(times) * 1000.0


#: a change of latency beyond this factor either way gets :func:`latency_note` (rewrites of a
#: graph's ops seldom move a CPU model's latency that far; a core busy with another process
#: does: the fastest of 20 calls of a 0.3 ms model was seen at 32 ms with two intra-op threads)
LATENCY_NOTE_FACTOR = 5.0


def latency_note(before_ms: float, after_ms: float, threads: int) -> str:
    """Why latencies measured ``before_ms`` and ``after_ms`` (in ms) with ``threads``
    intra-op threads (``torch.get_num_threads()``) may not be the model's, or "": when they
    differ by more than :data:`LATENCY_NOTE_FACTOR` either way and torch used more than one
    thread (with one thread, a slow call is the model's own or a pass's doing)."""
    if threads <= 1 or before_ms <= 0 or after_ms <= 0:
        return ""
    factor = max(before_ms, after_ms) / min(before_ms, after_ms)
    if factor <= LATENCY_NOTE_FACTOR:
        return ""
    return (
        f"latency changed {factor:.0f}-fold; with other processes on the cores, torch's {threads} intra-op "
        "threads can make every timed call slow: time it again with OMP_NUM_THREADS=1"
    )


def with_default_preset(cfg: Config, *, example_model: bool = False) -> Config:
    """``cfg``, or, when it names no pipeline or preset, a copy naming the preset ``fxpasses
    run`` (and ``fxpasses bisect``) use then: ``training`` for a model with ``train = true``,
    else ``inference``. A config without a ``[model]`` gets none, unless ``example_model``:
    the bundled example model stands in for it (``fxpasses run`` without CONFIG, from a
    pyproject.toml's ``[tool.fxpasses]``)."""
    if cfg.pipeline is not None or cfg.preset is not None or (cfg.model is None and not example_model):
        return cfg
    base, source = cfg._base_dir, cfg._source
    preset = TRAINING_PRESET if cfg.model is not None and cfg.model.train else DEFAULT_PRESET
    cfg = cfg.model_copy(update={"preset": preset})
    cfg._base_dir, cfg._source = base, source
    return cfg


def run_job(
    cfg: Config,
    *,
    registry: Registry | None = None,
    output: str | Path | None = None,
    repeat: int = 20,
    save: bool = True,
    instruments: Sequence[Any] = (),
    rewrite_limit: int | None = None,
    reproducer: Any = None,
    snapshot_tensors: bool = False,
    on_error: str | None = None,
    bisect_command: str | None = None,
) -> JobResult:
    """Run the main job described by ``cfg`` (see the module doc).

    ``on_error`` (``rollback``, ``skip`` or ``raise``) replaces the config's ``on_error``
    and every pipeline entry's own (``fxpasses run --on-error``);
    ``rewrite_limit`` applies only the first N rewrites (:mod:`fxpasses.rewrites`);
    ``reproducer`` (a :class:`~fxpasses.reproducer.ReproducerWriter`) writes a reproducer
    when a pass fails; ``snapshot_tensors`` lets rollback restore tensors written in place;
    ``bisect_command`` (``fxpasses bisect fx.toml --pipeline ...``) is what an outputs-changed
    failure's note tells to run (else the generic :data:`~fxpasses.pipeline.BISECT_HINT`).

    Raises:
        ConfigError/UserError: a bad model section, factory or capture.
        PassFailedError: a pass failed (the graph was rolled back; under ``on_error =
            "raise"`` it was not, and with saving on, the graph as the pass left it is written
            to ``OUT/broken_graph.txt``, which a note names).
        VerificationError: outputs changed beyond ``atol``/``rtol``, or the saved program
            does not reproduce them.
    """
    if cfg.model is None:
        raise ConfigError(f"no {model_table(cfg._source)}: `fxpasses run` needs a model factory and inputs", source=cfg._source)
    cfg = with_default_preset(cfg)
    pipeline = Pipeline._from_config_obj(cfg, registry=registry)
    if on_error is not None:
        if on_error not in ("rollback", "skip", "raise"):
            raise UserError(f"on_error must be 'rollback', 'skip' or 'raise', got {on_error!r}")
        pipeline.on_error = on_error
        pipeline._plan = Plan([dataclasses.replace(s, on_error=None) for s in pipeline.plan().steps])
    if snapshot_tensors:
        pipeline.snapshot_tensors = True
    if reproducer is not None:
        raising = [s.name for s in pipeline.plan().steps if (s.on_error or pipeline.on_error) == "raise"]
        if raising:
            raise ConfigError(
                "a reproducer needs the graph as it was before the failing pass, which on_error = "
                f"'raise' does not keep (passes: {', '.join(raising)}); use 'rollback' or 'skip'",
                source=cfg._source,
            )
        reproducer.pipeline = pipeline
        instruments = [*instrument_list(pipeline.registry.pm, instruments), reproducer]
    mc = cfg.model
    out_dir = Path(output) if output is not None else (Path(cfg.output) if cfg.output else None)
    if save and out_dir is not None:
        check_writable(out_dir)  # before the expensive part, and without writing anything
        _check_output_names(out_dir, mc)
        _check_not_overwriting_model_files(out_dir, mc, cfg._base_dir)
    with _earlier_outputs_noted(out_dir if save else None):
        model_in = prepare_model(cfg)
        cap = model_in.captured
        gm = cap.gm
        if save and out_dir is not None and cap.dialect == "export":
            _check_program_savable(gm, cfg)  # (before the run: its save would fail after it)
        # Every comparison call starts from the same module state, on input copies, under one
        # seed (fxpasses.verify), so models that write buffers/inputs or draw random numbers
        # compare like for like; timing runs in between do not leak into the comparison.
        state = TensorState(gm)
        # a reproducer's module before the whole pipeline: what the outputs are held to
        ref = _reference_module(cfg) if mc.reference is not None else None
        base, base_state = (ref, TensorState(ref)) if ref is not None else (gm, state)
        try:
            expected, expected_facts = call_isolated(base, cap.inputs, base_state, cap.kwargs, facts=True)
        except Exception as exc:
            what = "the captured model"
            if mc.graph is not None or mc.program is not None:
                what = "[model] graph" if mc.graph is not None else "[model] program"
            if ref is not None:
                what = "[model] reference"
            raise ConfigError(
                f"{what} does not run on the given inputs: {exception_text(exc)}", source=_in_config(cfg, "[model] inputs")
            ) from exc
        # float16/bfloat16 results outside the tolerances: judged against a float64 run
        reference64 = float64_reference(base, cap.inputs, cap.kwargs, expected, expected_facts, base_state)
        before_ms = _latency_ms(lambda: gm(*clone_outputs(cap.inputs), **clone_outputs(cap.kwargs)), repeat)
        state.restore()
        hint = bisect_hint(f"`{bisect_command}`") if bisect_command else BISECT_HINT
        pipeline._bisect_hint = hint  # a pass's numeric verification failure says it too
        try:
            report = pipeline.run(
                gm,
                cap.inputs,
                example_kwargs=cap.kwargs or None,
                instruments=instruments,
                rewrite_limit=rewrite_limit,
                reference_module=ref,
            )
        except PassFailedError as exc:
            if not exc.rolled_back:  # on_error = "raise", or no rollback could be made: keep what it left
                kept = _kept_because(pipeline, exc.pass_name)
                if save and out_dir is not None:
                    _write_broken_graph(gm, exc, out_dir, kept)
                else:
                    why = "--no-save" if not save else 'no output folder: give -o DIR, or output = "DIR" in the config'
                    exc.notes.append(f"the graph as {exc.pass_name!r} left it ({kept}) is not written ({why})")
            raise
        if save and out_dir is not None:
            _remove_broken_graph(out_dir)
        with _reported(report):  # an error after the passes carries the table of what they did
            state = TensorState(gm)  # as the pipeline left it (a pass may write weights)
            # passes that said they change the outputs on purpose (ctx.changes_outputs)
            notes = "".join(f"\n  note: {n}" for p in report.passes for n in p.notes)
            if notes:
                notes += (
                    "\n  note: `fxpasses run` compares the outputs after the pipeline with those before it "
                    "whatever `verify` is, so a pipeline that changes them on purpose cannot pass it"
                )
            try:
                actual, facts = call_isolated(gm, cap.inputs, state, cap.kwargs, facts=True)
            except Exception as exc:
                changers = [p.label for p in report.passes if p.changed]
                raise VerificationError(
                    f"the optimized model no longer runs on the inputs: {exception_text(exc)} (passes that "
                    f"changed it: {', '.join(changers) or 'none'}; verify = \"numeric\" checks each pass and rolls "
                    f"back the one that breaks it){notes}{_no_reproducer_note(pipeline, reproducer)}"
                ) from exc
            # requires_grad, aliasing, strides and input gradients too (fxpasses.verify.compare_facts)
            # the config's tolerances, or larger ones a pass entry of the run has (report.atol)
            tolerances = (report.atol, report.rtol)
            cmp = compare_results(actual, facts, expected, expected_facts, *tolerances, reference64)
            message = cmp.message
            if message:
                raise VerificationError(
                    f"the optimized model's outputs differ from the original: {message}{notes}\n  note: {hint}"
                    f"{_no_reproducer_note(pipeline, reproducer)}"
                )
            after_ms = _latency_ms(lambda: gm(*clone_outputs(cap.inputs), **clone_outputs(cap.kwargs)), repeat)
            state.restore()
            result = JobResult(
                report=report,
                max_abs_error=cmp.max_abs,
                latency_before_ms=before_ms,
                latency_after_ms=after_ms,
                latency_note=latency_note(before_ms, after_ms, torch.get_num_threads()),
                capture_seconds=model_in.seconds,
                captured=not model_in.loaded,
                model_name=model_in.name,
                pipeline=pipeline.plan().as_pipeline_string(),
                preset=cfg.preset,
            )
            if save and out_dir is not None:
                # (a saved export graph, a reproducer's, is exported again: torch.fx's module writer
                # cannot write its pytree code generator's input spec)
                kind = cap.dialect if mc.graph is None or cap.dialect == "export" else "graph"
                try:
                    result.saved = _save(gm, cap.inputs, kind, out_dir, (expected, expected_facts, reference64), tolerances, state, cap.kwargs)
                    (out_dir / "report.json").write_text(json_dumps(result.as_dict(), indent=2, default=str))
                except OSError as exc:  # (the folder changed during the run: a user error, with the run's table)
                    where = f" ({exc.filename})" if exc.filename else ""
                    raise UserError(f"cannot save into the output directory {out_dir}{where}: {os_reason(exc)}") from exc
                result.saved.append(out_dir / "report.json")
            return result


@contextlib.contextmanager
def _earlier_outputs_noted(out_dir: Path | None) -> Iterator[None]:
    """When the run fails, note on its error the files an earlier run saved in ``out_dir``
    (those its ``report.json`` there lists, and that file): they are still there, and are not
    this run's (``fxpasses run`` prints the note). So is a ``broken_graph.txt`` that an earlier
    run under ``on_error = "raise"`` wrote there and this run did not write again: the graph of
    another failure, to be taken for this one's."""
    broken_before = _broken_graph_stamp(out_dir) if out_dir is not None else None
    try:
        yield
    except FxPassesError as exc:
        if broken_before is not None and _broken_graph_stamp(out_dir) == broken_before:
            path = out_dir / BROKEN_GRAPH  # type: ignore[operator]
            exc.add_note(f"fxpasses: {path} is an earlier run's ({broken_before[0]}), not this run's")
        saved = _earlier_saved(out_dir) if out_dir is not None else None
        if saved is not None:
            left = sorted(f"{parent}/{name}" if parent == "module" else name for parent, name in saved)
            here = [n for n in left if (out_dir / n).is_file()] + ["report.json"]  # type: ignore[operator]
            exc.add_note(
                f"fxpasses: {out_dir} still holds what an earlier run saved ({', '.join(here)}); this run saved nothing"
            )
        raise


#: what `fxpasses run` writes when a pass fails under on_error = "raise" (the graph it left)
BROKEN_GRAPH = "broken_graph.txt"
_BROKEN_HEADER = "# fxpasses: the graph as pass "


def _kept_because(pipeline: Pipeline, pass_name: str) -> str:
    """Why a failed pass's graph was kept, not rolled back: its ``on_error`` is ``raise``, or
    (a node linked or unlinked by hand) no rollback could be made, whatever it says."""
    for step in pipeline.plan().steps:
        if step.name == pass_name and (step.on_error or pipeline.on_error) == "raise":
            return 'on_error = "raise"'
    return "it could not be rolled back"


def _write_broken_graph(gm: torch.fx.GraphModule, failure: PassFailedError, out_dir: Path, kept: str) -> None:
    """Write, for a pass that failed and was not rolled back (``on_error = "raise"``, or no
    rollback could be made: ``kept`` says which), the graph as it left it to
    ``out_dir/broken_graph.txt``: FX's text of the graph (which any graph has, lint or not)
    and the code ``recompile()`` would generate when it can; a note on ``failure`` names the
    file. In Python the module itself is kept; ``fxpasses run`` would otherwise end with
    nothing left to look at. What cannot be written is a note."""
    path = out_dir / BROKEN_GRAPH
    parts = [f"{_BROKEN_HEADER}{failure.pass_name!r} left it ({kept}): {failure.reason.splitlines()[0]}\n"]
    try:
        parts.append(str(gm.graph))
    except Exception as exc:  # noqa: BLE001 - a debugging aid: say why it is missing
        parts.append(f"(the graph cannot be printed: {exception_text(exc)})")
    try:
        parts.append("\n# the code recompile() would generate:\n" + gm.graph.python_code("self").src)
    except Exception as exc:  # noqa: BLE001 - a broken graph may have no code
        parts.append(f"\n# no code: recompile() would fail: {exception_text(exc)}")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(parts) + "\n")
    except OSError as exc:
        failure.notes.append(f"the graph as {failure.pass_name!r} left it was not written to {path}: {os_reason(exc)}")
        return
    failure.notes.append(f"the graph as {failure.pass_name!r} left it ({kept}): {path}")


def _broken_graph_stamp(out_dir: Path) -> tuple[str, int, int, int] | None:
    """What names the ``broken_graph.txt`` fxpasses wrote in ``out_dir`` (told by its first
    line): what it shows (``the graph as pass 'p' left it``) and its inode, size and time of
    last change, or None when there is none."""
    path = out_dir / BROKEN_GRAPH
    try:
        with path.open(encoding="utf-8") as f:
            first = f.readline()
        st = path.stat()
    except (OSError, UnicodeDecodeError):
        return None
    if not first.startswith(_BROKEN_HEADER):
        return None
    what = first[len("# fxpasses: "):].split(" left it (", 1)[0] + " left it"
    return (what, st.st_ino, st.st_size, st.st_mtime_ns)


def _remove_broken_graph(out_dir: Path) -> None:
    """Remove the ``broken_graph.txt`` an earlier failed run wrote in ``out_dir`` (told by its
    first line), now that the pipeline ran through."""
    if _broken_graph_stamp(out_dir) is not None:
        with contextlib.suppress(OSError):
            (out_dir / BROKEN_GRAPH).unlink()


@contextlib.contextmanager
def _reported(report: RunReport) -> Iterator[None]:
    """Give an error raised inside (the outputs differ, the saved model reads back otherwise)
    the run's ``report`` as ``report``, as a pass failure carries its run so far
    (:class:`~fxpasses.errors.PassFailedError`), for ``fxpasses run`` to show the table."""
    try:
        yield
    except FxPassesError as exc:
        if getattr(exc, "report", None) is None:
            exc.report = report  # type: ignore[attr-defined]
        raise


def _relocatable(module_py: Path, folder: str) -> None:
    """Make the module.py of ``GraphModule.to_folder`` load its tensors from next to itself.

    torch writes ``torch.load(r'<folder>/state_dict.pt')`` with the folder as given, so the
    module would only load from the directory the run was made in.
    """
    text = module_py.read_text()
    prefix = f"r'{folder}/"
    if prefix not in text:
        return
    text = text.replace(prefix, "_HERE + r'")
    header = "import os as _os\n_HERE = _os.path.dirname(_os.path.abspath(__file__)) + _os.sep\n"
    module_py.write_text(header + text)


def check_writable(out_dir: Path, what: str = "output directory") -> None:
    """Raise a UserError now if ``out_dir`` could not be created or written later, naming it
    (``what``: "output directory", "reproducer directory", ...), the path and why (from the
    errno: permission denied, read-only file system, not a directory)."""
    said = f"cannot write the {what} {out_dir}"
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"{said}: {out_dir} exists and is not a directory")
    probe = nearest_existing(out_dir)
    if not probe.is_dir():
        raise UserError(f"{said}: {probe} is not a directory")
    # make and remove a directory there: access() says yes to root everywhere (/proc too) and
    # cannot tell a read-only file system from a missing permission
    try:
        tempfile.TemporaryDirectory(dir=probe, prefix=".fxpasses-probe-").cleanup()
    except OSError as exc:
        raise UserError(f"{said}: cannot create a directory in {probe}: {os_reason(exc)}") from None


#: what `fxpasses run` saves for each capture (besides report.json), under the output folder
_OUTPUTS = {"export": ("model.pt2",), "symbolic_trace": ("module",), "dynamo": ("module", "inputs.pt")}
#: the files to_folder and the module writer put in module/ (a submodule torch cannot write
#: as code is pickled under its attribute name: 0.pt in a Sequential, lin.pt)
_MODULE_FILE = re.compile(r"(module\.py|__init__\.py|state_dict\.pt|\w+\.pt)")


def _earlier_saved(out_dir: Path) -> set[tuple[str, str]] | None:
    """``(folder name, file name)`` of each file the ``report.json`` of an earlier run in
    ``out_dir`` lists as saved (``("module", "module.py")``), or None without a readable one."""
    try:
        listed = json.loads((out_dir / "report.json").read_text()).get("saved", [])
    except (OSError, ValueError, AttributeError):
        return None
    return {(Path(p).parent.name, Path(p).name) for p in listed if isinstance(p, str)}


def _save_names(mc: Any) -> set[str]:
    """The names a save for ``mc`` (a ``[model]`` section) may write in the output folder:
    ``report.json`` and what :data:`_OUTPUTS` lists for its capture (a program is exported;
    a saved graph's dialect is known once it is loaded: any)."""
    kinds = {"export"} if mc.program is not None else set(_OUTPUTS) if mc.graph is not None else {mc.capture}
    return {"report.json", *(n for k in kinds for n in _OUTPUTS.get(k, ()))}


def _check_output_names(out_dir: Path, mc: Any) -> None:
    """Refuse, before the run, an output folder where a name the save writes is taken by
    something it cannot write over: a directory named ``model.pt2``, ``inputs.pt`` or
    ``report.json``, or a file named ``module`` (the save failed after the whole run, as an
    internal error that printed none of its results: a new-user check).

    Raises:
        UserError: naming the path and what is in the way.
    """
    if mc is None or not out_dir.is_dir():
        return
    for name in sorted(_save_names(mc)):
        path = out_dir / name
        if name == "module":
            if path.exists() and not path.is_dir():
                raise UserError(
                    f"cannot save into the output directory {out_dir}: {path} is a file, and the optimized module "
                    "is saved as a folder of that name: remove it, or give another output folder (-o DIR or `output`)"
                )
        elif path.is_dir() or (path.exists() and not path.is_file()):
            raise UserError(
                f"cannot save into the output directory {out_dir}: {path} is a {'directory' if path.is_dir() else 'special file'}, "
                "and the run saves a file of that name: remove it, or give another output folder (-o DIR or `output`)"
            )


def _check_not_overwriting_model_files(out_dir: Path, mc: Any, base_dir: Path | None) -> None:
    """Refuse an output folder where saving would overwrite a file of the user's that
    ``[model]`` reads (a ``program = "model.pt2"`` saved by ``torch.export.save``, an
    ``inputs = "inputs.pt"``, with ``output = "."``): it would be lost. A file an earlier run
    saved there (listed in its ``report.json``) may be written again: running on the
    ``model.pt2`` fxpasses saved and saving in place re-optimizes it.

    Raises:
        UserError: naming the key, the file and what would overwrite it.
    """
    if mc is None:
        return
    ours = {name for parent, name in _earlier_saved(out_dir) or () if parent != "module"}
    names = _save_names(mc)
    written = {(out_dir / n).resolve() for n in names if n != "module"}
    module = (out_dir / "module").resolve() if "module" in names else None
    for key in ("program", "graph", "inputs", "factory"):
        value = getattr(mc, key, None)
        if not isinstance(value, str):
            continue
        if key == "factory":
            value = _factory_parts(value)[0]
            if not value.endswith(".py"):
                continue
        path = _beside_config(value, base_dir)
        path = path.resolve()
        if path.parent == out_dir.resolve() and path.name in ours:
            continue  # fxpasses' own output of an earlier run: re-optimized in place
        if path in written or (module is not None and path.is_relative_to(module)):
            raise UserError(
                f"the output folder {out_dir} would overwrite [model] {key} {value!r} ({path}), which this run "
                "reads: give another output folder (-o DIR or `output`)"
            )


def _remove_if_emptied(module: Path) -> None:
    """Remove the ``module/`` folder whose saved files were removed: its ``__pycache__`` (made
    by loading it back), then the folder itself when nothing else is left in it."""
    if module.is_dir():
        shutil.rmtree(module / "__pycache__", ignore_errors=True)
        with contextlib.suppress(OSError):  # (kept when it holds other files)
            module.rmdir()


def _remove_stale_outputs(out_dir: Path, capture_kind: str) -> None:
    """Remove what an earlier run saved in ``out_dir`` for another capture (its
    ``model.pt2``, or its ``module/`` and ``inputs.pt``), and ``module/``'s files before
    writing it again, which this save would not overwrite: a user could load the other
    capture's, older, model. Only files the earlier run's ``report.json`` there lists as
    saved are removed (a file of the user's with one of these names stays, and so does
    everything without a ``report.json``); each removal is a
    :class:`~fxpasses.errors.ConfigWarning`."""
    from .errors import ConfigWarning

    saved = _earlier_saved(out_dir)
    if saved is None:  # no earlier run's report (or not ours): nothing is removed
        return
    keep = set(_OUTPUTS.get(capture_kind, ()))
    removed = []
    for name in ("model.pt2", "inputs.pt"):
        path = out_dir / name
        if name not in keep and path.is_file() and any(n == name and parent != "module" for parent, n in saved):
            path.unlink()
            removed.append(name)
    module = out_dir / "module"
    if module.is_dir():
        for path in sorted(module.iterdir()):
            if path.is_file() and _MODULE_FILE.fullmatch(path.name) and ("module", path.name) in saved:
                path.unlink()
                if "module" not in keep:
                    removed.append(f"module/{path.name}")
        _remove_if_emptied(module)
    if removed:
        warnings.warn(
            ConfigWarning(
                f"{out_dir}: removed {', '.join(removed)}, saved there by an earlier run for another capture than "
                f"this one ({capture_kind}: {', '.join(sorted(keep))})"
            ),
            stacklevel=3,
        )


def _save(
    gm: torch.fx.GraphModule,
    inputs: list[Any],
    capture_kind: str,
    out_dir: Path,
    expected: tuple[Any, Any, Any],
    tolerances: tuple[float, float],
    state: TensorState,
    kwargs: dict[str, Any] | None = None,
) -> list[Path]:
    """Write the optimized model (see the module doc); check that what is written reads back
    as ``expected`` (the original's outputs, their facts and its float64 reference or None:
    :func:`_check_read_back`), within
    ``tolerances`` (``(atol, rtol)``).
    ``kwargs``: the keyword inputs the model is called with (re-exported with them)."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the output directory {out_dir}: {os_reason(exc)}") from exc
    _remove_stale_outputs(out_dir, capture_kind)
    with _removed_on_failure(out_dir, capture_kind):
        if capture_kind == "export":
            path = out_dir / "model.pt2"
            state.restore()
            # (the keywords in the module's spec order: see fxpasses.inputs.in_spec_order)
            args, kw = tuple(clone_outputs(inputs)), clone_outputs(in_spec_order(gm, kwargs)) if kwargs else None
            dynamic = _dynamic_shapes(gm, args, kw)
            try:
                ep = torch.export.export(gm, args, kw, dynamic_shapes=dynamic)
            except Exception as exc:
                if dynamic is None:
                    raise
                raise VerificationError(
                    "the optimized module cannot be exported again with the dynamic sizes of its inputs "
                    f"({_describe_dynamic(gm)}): {exception_line(exc)[:300]}"
                ) from exc
            finally:
                state.restore()
            save_program(ep, path)
            loaded = torch.export.load(str(path)).module()
            _check_read_back(loaded, inputs, expected, tolerances, f"{path} read back with torch.export.load", kwargs)
            return [path]
        # torch.fx's own writer: a module.py with imports and a class, plus state_dict.pt;
        # `import <out_dir>.module` (or run module.py's class) gives the module back.
        folder = out_dir / "module"
        code_globals = gm.graph.python_code("self").globals
        # (raises before anything is written)
        # (each line once: both may define the loader of a module from its file)
        definitions = list(dict.fromkeys([*_op_module_imports(gm), *_global_definitions(code_globals)]))
        with warnings.catch_warnings():
            # submodules without a repr torch can rebuild are pickled instead: expected, and the
            # folder is loaded back and checked below
            warnings.filterwarnings("ignore", message="Was not able to save the following children", category=UserWarning)
            gm.to_folder(folder, "OptimizedModule")
        _relocatable(folder / "module.py", str(folder))
        _define_globals(folder / "module.py", definitions)
        _keep_module_state(folder / "module.py", gm)
        saved = sorted(p for p in folder.rglob("*") if p.is_file())
        if capture_kind == "dynamo":
            # TorchDynamo graphs take parameters and buffers as inputs: keep them to call it
            path = out_dir / "inputs.pt"
            # (parameters among them keep requires_grad: a model saved for training stays trainable)
            torch.save([_detached(t) if isinstance(t, torch.Tensor) else t for t in inputs], path)
            saved.append(path)
        _check_read_back(load_folder(folder), inputs, expected, tolerances, f"{folder / 'module.py'} read back", kwargs)
        return saved


@contextlib.contextmanager
def _removed_on_failure(out_dir: Path, capture_kind: str) -> Iterator[None]:
    """Remove what a save wrote in the block when the block raises (:func:`_remove_partial_save`)."""
    before = _stamped(_files_under(out_dir, capture_kind))
    try:
        yield
    except BaseException:
        _remove_partial_save(out_dir, capture_kind, before)
        raise


def _stamped(paths: set[Path]) -> dict[Path, tuple[int, int, int]]:
    """Each file of ``paths`` with its inode, size and modification time (ns), by which a
    file written over since is told from one left as it was."""
    stamps = {}
    for path in paths:
        with contextlib.suppress(OSError):
            st = path.stat()
            stamps[path] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return stamps


def _files_under(out_dir: Path, capture_kind: str) -> set[Path]:
    """The files a save for ``capture_kind`` may write that exist in ``out_dir`` now."""
    found: set[Path] = set()
    for name in _OUTPUTS.get(capture_kind, ("model.pt2", "module", "inputs.pt")):
        path = out_dir / name
        if path.is_dir():
            found.update(p for p in path.rglob("*") if p.is_file())
        elif path.is_file():
            found.add(path)
    return found


def _remove_partial_save(out_dir: Path, capture_kind: str, before: dict[Path, tuple[int, int, int]]) -> None:
    """After a save failed: remove the files it wrote (those not in ``before``, or written over
    since: :func:`_stamped`), ``module/``'s ``__pycache__`` and the folder itself when nothing
    else is left in it, and the ``report.json`` of an earlier run whose saved files are no
    longer all there. A half-written ``module/`` (a ``module.py`` without its
    ``state_dict.pt``, or one whose read-back check failed), or a ``model.pt2`` written over
    an earlier run's and failing its check, would otherwise be loaded as the optimized model."""
    now = _stamped(_files_under(out_dir, capture_kind))
    for path, stamp in now.items():
        if before.get(path) != stamp:
            with contextlib.suppress(OSError):
                path.unlink()
    _remove_if_emptied(out_dir / "module")
    report = out_dir / "report.json"
    saved = _earlier_saved(out_dir)
    if saved and any(not (out_dir / (name if parent != "module" else f"module/{name}")).is_file() for parent, name in saved):
        with contextlib.suppress(OSError):
            report.unlink()


def _detached(t: torch.Tensor) -> torch.Tensor:
    """``t`` detached from its autograd graph, still requiring grad when it did (a leaf)."""
    d = t.detach()
    return d.requires_grad_() if t.requires_grad and (d.is_floating_point() or d.is_complex()) else d


def _dynamic_shapes(gm: torch.fx.GraphModule, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> Any:
    """The dynamic sizes of an exported module's inputs, for exporting it again: a
    ``torch.export.ShapesCollection`` giving each input tensor (of ``args``/``kwargs``, the
    very objects given to ``torch.export.export``) a ``Dim`` for every size its placeholder
    holds as a symbol (one ``Dim`` per symbol, so sizes that were equal stay equal, with the
    symbol's range: :func:`_symbol_range`, from the program's ``range_constraints`` when the
    module was taken from one, :func:`program_module`), a derived ``Dim`` (``2 * d + 1``) for
    a size that is a linear expression of one symbol, ``Dim.AUTO`` for another expression of
    symbols; None when every size is static. Without it a program exported with
    ``dynamic_shapes`` was saved for the example's sizes only."""
    from torch.export import Dim, ShapesCollection

    from .inputs import placeholder_values

    ranges = gm.meta.get(RANGES_META)

    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    if not any(_symbolic_sizes(p) for p in placeholders):
        return None
    values = placeholder_values(gm, args, kwargs)
    dims: dict[Any, Any] = {}
    shapes = ShapesCollection()
    for node, value in zip(placeholders, values):
        sizes = _symbolic_sizes(node)
        if not sizes or not isinstance(value, torch.Tensor):
            continue
        spec: dict[int, Any] = {}
        for i, size in sizes:
            expr = size.node.expr
            root, scale, offset = _linear_in_one_symbol(expr)
            if root is None:
                spec[i] = Dim.AUTO
                continue
            if root not in dims:
                low, high = _symbol_range(root, size.node.shape_env, ranges)
                dims[root] = Dim(f"d_{root}", min=low, max=high)
            # a size derived from another (`y: 2 * d` beside `x: d`) is written so, else
            # torch refuses the re-export ("Constraints violated")
            spec[i] = dims[root] if (scale, offset) == (1, 0) else dims[root] * scale + offset
        shapes[value] = spec
    return shapes


def _linear_in_one_symbol(expr: Any) -> tuple[Any, int, int]:
    """``(symbol, a, b)`` when the size expression ``expr`` is ``a * symbol + b`` with
    integers ``a >= 1`` and ``b`` (what ``torch.export.Dim`` arithmetic writes: a derived
    dim), else ``(None, 0, 0)``."""
    import sympy

    if isinstance(expr, sympy.Symbol):
        return expr, 1, 0
    free = getattr(expr, "free_symbols", ())
    if len(free) != 1:
        return None, 0, 0
    (symbol,) = free
    try:
        poly = sympy.Poly(expr, symbol)
    except sympy.PolynomialError:
        return None, 0, 0
    coeffs = poly.all_coeffs()
    if poly.degree() != 1 or not all(c.is_Integer for c in coeffs) or coeffs[0] < 1:
        return None, 0, 0
    return symbol, int(coeffs[0]), int(coeffs[1])


def _symbol_range(symbol: Any, shape_env: Any, ranges: Mapping[Any, Any] | None) -> tuple[int | None, int | None]:
    """The ``(min, max)`` of a size symbol (None: unbounded), for a ``Dim``: from the
    program's ``range_constraints`` (``ranges``) when it has the symbol, else from the shape
    environment, whose lower bound of 2 there is torch's own assumption while tracing (the
    "0/1 specialization": the program takes sizes 0 and 1) and is not kept."""
    import sympy
    from torch.utils._sympy.numbers import int_oo

    def bound(v: Any) -> int | None:
        return None if v in (int_oo, sympy.oo, -int_oo, -sympy.oo) else int(v)

    if ranges:
        # the symbol's own range, and those of the sizes derived from it (`s + 1: [1, 41]`
        # where `s` is never a size itself: torch gives `s` the tracing assumption [2, 40]),
        # each taken back to the symbol: the loosest, the sizes the program takes
        found = []
        for key, vr in ranges.items():
            root, a, b = _linear_in_one_symbol(key)
            if root == symbol:
                low, high = bound(vr.lower), bound(vr.upper)
                found.append((None if low is None else -((b - low) // a), None if high is None else (high - b) // a))
        if found:
            lows, highs = [lo for lo, _ in found], [hi for _, hi in found]
            return (None if None in lows else max(min(lows), 0)), (None if None in highs else max(highs))
    vr = shape_env.var_to_range.get(symbol)
    if vr is None:
        return None, None
    low, high = bound(vr.lower), bound(vr.upper)
    if low == 2:
        sloc = getattr(shape_env, "var_to_range_sloc", {}).get(symbol)
        if "0/1 specialization" in str(getattr(getattr(sloc, "lower", None), "framework_loc", "")):
            low = None
    return low, high


def _symbolic_sizes(node: torch.fx.Node) -> list[tuple[int, Any]]:
    """``(dim, SymInt)`` for each symbolic size of a placeholder's recorded value."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return []
    return [(i, s) for i, s in enumerate(val.shape) if isinstance(s, torch.SymInt)]


def _describe_dynamic(gm: torch.fx.GraphModule) -> str:
    return ", ".join(
        f"{p.name}: {list(p.meta['val'].shape)}" for p in gm.graph.find_nodes(op="placeholder") if _symbolic_sizes(p)
    )


def _check_read_back(
    loaded: torch.nn.Module,
    inputs: list[Any],
    expected: tuple[Any, Any, Any],
    tolerances: tuple[float, float],
    what: str,
    kwargs: dict[str, Any] | None = None,
) -> None:
    """Raise a VerificationError when the saved module, read back, gives other outputs than
    ``expected`` (the original's outputs and :class:`~fxpasses.verify.OutputFacts`), or
    outputs a caller sees otherwise (``requires_grad``, aliasing, strides, input gradients),
    as the run's own comparison does."""
    try:
        outputs, facts = call_isolated(loaded, inputs, TensorState(loaded), kwargs, facts=True)
    except Exception as exc:  # the save's fault, not an internal error (exit status 3)
        raise VerificationError(f"{what} does not run on the inputs: {exception_text(exc)}") from exc
    cmp = compare_results(outputs, facts, expected[0], expected[1], *tolerances, expected[2])
    if cmp.message:
        # (compare_results words a difference as a pass's: here the save made it)
        raise VerificationError(f"{what} gives other outputs than the module saved: {cmp.message.replace(' before the pass', ' before saving')}")


#: the names the module.py of ``GraphModule.to_folder`` defines before its class (its imports)
_TO_FOLDER_NAMES = frozenset({"torch", "inf", "nan", "NoneType", "device", "fx_pytree", "pytree"})

#: the call torch's code generator puts in the class body for a ``torch.fx.wrap``-ped function;
#: ``wrap`` raises there (it must be called at the top level of a module)
_WRAP_LINE = re.compile(r'^[ \t]*torch\.fx\._symbolic_trace\.wrap\(("[A-Za-z_]\w*")\)[ \t]*\n', re.M)


def _global_definitions(code_globals: dict[str, Any]) -> list[str]:
    """Lines of Python that define the globals the generated code uses and ``to_folder``'s
    module.py does not: the names of annotation types (``{"_torch_Tensor_": "torch.Tensor"}``:
    the code generator refers to them through globals whose values are strings) and the
    functions and classes outside torch that the graph calls (``models_my_gelu``: a
    ``torch.fx.wrap``-ped function, or one a pass inserted), imported from their module, or,
    for a function of a module loaded from its file (a factory given as
    ``path/models.py:fn``), loaded from that file again by the saved module.

    Raises:
        UserError: the graph calls an object that can neither be imported by name nor loaded
            from its module's file (a lambda, a local function, an instance): the module could
            not be saved as code; before anything is written.
    """
    lines: list[str] = []
    imports: dict[str, str] = {}  # import lines, each once
    aliases: dict[str, str] = {}  # "module:" (or "module:its file") -> the name it is bound to
    for name, value in sorted(code_globals.items()):
        if name in _TO_FOLDER_NAMES:
            continue
        if isinstance(value, str):
            if re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*", value):
                if "." in value:
                    top = value.split(".")[0]
                    imports.setdefault(top, f"import {top}")
                lines.append(f"{name} = {value}")
            continue
        module = getattr(value, "__module__", None)
        qualname = getattr(value, "__qualname__", None)
        found: Any = None
        # (__main__ is another module in the process that loads the file)
        if isinstance(module, str) and module != "__main__" and isinstance(qualname, str) and "<" not in qualname:
            try:
                found = importlib.import_module(module)
                for part in qualname.split("."):
                    found = getattr(found, part)
            except Exception:  # noqa: BLE001 - not importable by name: reported below
                found = None
        source = None if found is value else _loaded_from_file(value, module, qualname)
        if found is not value and source is None:
            raise UserError(
                f"cannot save the optimized graph as Python code: it calls {value!r} (global {name!r} of the "
                "generated code), which cannot be imported by name (define it at the top level of an importable "
                "module), or capture with torch.export (capture = \"export\"), whose saved program needs no code"
            )
        key = f"{module}:" if source is None else f"{module}:{source}"
        alias = aliases.get(key)
        if alias is None:
            alias = aliases[key] = f"_fxpasses_import_{len(aliases)}"
            if source is None:
                imports[key] = f"import {module} as {alias}"
            else:  # a module loaded from its file (a factory given as path/models.py:fn): from there again
                imports.setdefault("_fxpasses_load_file", _LOAD_FILE)
                imports[key] = f"{alias} = _fxpasses_load_file({module!r}, {str(source)!r})"
        lines.append(f"{name} = {alias}.{qualname}")
    return [*imports.values(), *lines]


#: what a saved module.py defines to load a module from its file, as ``load_factory`` loads a
#: factory given as ``path/models.py:fn`` (its folder on ``sys.path`` while it runs)
_LOAD_FILE = """import importlib.util as _fxpasses_importlib_util
import os as _fxpasses_os
import sys as _fxpasses_sys


def _fxpasses_load_file(name, path):
    folder = _fxpasses_os.path.dirname(path)
    _fxpasses_sys.path.insert(0, folder)
    try:
        spec = _fxpasses_importlib_util.spec_from_file_location(name, path)
        module = _fxpasses_importlib_util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        _fxpasses_sys.path.remove(folder)
    return module
"""


def _op_module_imports(gm: torch.fx.GraphModule) -> list[str]:
    """Lines of Python that import the modules defining the custom operators ``gm`` calls
    (:func:`fxpasses._custom_ops.graph_op_modules`: a plugin pass's ``torch.ops.acme.op``),
    which the generated code names through ``torch.ops`` alone: by name where a fresh process
    can import it, else from its file (as :func:`_global_definitions` loads functions)."""
    from importlib.machinery import PathFinder

    from ._custom_ops import graph_op_modules

    imports: list[str] = []
    loads: list[str] = []  # (after the loader's definition)
    for i, name in enumerate(graph_op_modules(gm)):
        if PathFinder.find_spec(name.split(".")[0]) is not None:
            imports.append(f"import {name}  # defines custom operators the graph calls")
            continue
        file = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(file, str) and file.endswith(".py") and os.path.isfile(file):
            loads.append(f"_fxpasses_op_module_{i} = _fxpasses_load_file({name!r}, {str(Path(file).resolve())!r})")
    return [*imports, *([_LOAD_FILE, *loads] if loads else [])]


def _loaded_from_file(value: Any, module: Any, qualname: Any) -> Path | None:
    """The ``.py`` file of the module that defines the function ``value`` at its top level,
    when that module was loaded from its file (not importable by name as this very object:
    :func:`load_factory` of ``path/models.py:fn``); else None."""
    namespace = getattr(value, "__globals__", None)
    if not isinstance(namespace, dict) or not isinstance(qualname, str) or "." in qualname:
        return None
    file = namespace.get("__file__")
    if namespace.get("__name__") != module or not isinstance(file, str) or not file.endswith(".py"):
        return None
    if namespace.get(qualname) is not value or not os.path.isfile(file):
        return None
    return Path(file).resolve()


def _define_globals(module_py: Path, definitions: list[str]) -> None:
    """Put ``definitions`` (:func:`_global_definitions`) into the module.py of ``to_folder``,
    before its class, and move the ``torch.fx.wrap`` calls torch writes into the class body
    (where they raise ``NotImplementedError: wrap must be called at the top level of a
    module``) after them, at the top level, so a wrapped function stays a leaf when the
    loaded module is traced again. Without the definitions the module did not import
    (``NameError``) whenever ``forward`` was annotated or the graph called a function outside
    torch."""
    text = module_py.read_text()
    wrapped = _WRAP_LINE.findall(text)
    text = _WRAP_LINE.sub("", text)
    lines = [*definitions, *(f"torch.fx.wrap({name})" for name in wrapped)]
    if not lines:
        return
    marker = "\nclass OptimizedModule("
    head, sep, tail = text.partition(marker)
    if not sep:
        return
    module_py.write_text(head + "\n" + "\n".join(lines) + "\n" + sep + tail)


def _keep_module_state(module_py: Path, gm: torch.nn.Module) -> None:
    """Make the ``OptimizedModule`` of ``to_folder``'s module.py put each of its modules in
    the training or eval mode it had in ``gm``, and leave its parameters that did not require
    grad so. ``to_folder`` rebuilds modules from their ``repr`` (or a pickle) and loads a
    state dict into them, so every module came back in training mode (an eval-mode model's
    BatchNorm then normalized with batch statistics, dropout was active again) and every
    parameter required grad (a frozen backbone was trainable again, outputs required grad).

    It also ties again the parameters and buffers that were one tensor in ``gm`` (a tied
    embedding and output projection): ``to_folder`` saves and loads each name apart, so they
    came back as separate tensors that training moved apart.

    The mode most modules have is written once (``_MODE``), with the paths of those in the
    other mode (``_OTHER``), the paths of the frozen parameters (``_FROZEN``) and the names of
    each tied tensor (``_TIED``); lines appended to ``__init__`` apply them (the module.py
    stays importable on its own, with no fxpasses)."""
    text = module_py.read_text()
    try:
        tree = ast.parse(text)
    except SyntaxError:  # pragma: no cover - torch wrote it; _check_read_back says what it gives
        return
    cls = next((c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "OptimizedModule"), None)
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None) if cls else None
    if cls is None or init is None or init.end_lineno is None:  # pragma: no cover - torch's writer changed
        return
    modes = {name: m.training for name, m in gm.named_modules(remove_duplicate=False)}
    mode = sum(modes.values()) * 2 >= len(modes)
    other = sorted(name for name, t in modes.items() if t != mode)
    frozen = sorted(name for name, p in gm.named_parameters(remove_duplicate=False) if not p.requires_grad)
    shared: dict[int, list[str]] = {}
    for named in (gm.named_parameters(remove_duplicate=False), gm.named_buffers(remove_duplicate=False)):
        for name, t in named:
            shared.setdefault(id(t), []).append(name)
    for path, m in gm.named_modules(remove_duplicate=False):  # plain tensor attributes too
        for attr, t in vars(m).items():  # (symbolic_trace's _tensor_constant0: a buffer's tensor)
            if isinstance(t, torch.Tensor):
                shared.setdefault(id(t), []).append(f"{path}.{attr}" if path else attr)
    tied = [names for names in shared.values() if len(names) > 1]
    # every tensor under every name, as the objects they are, into state_dict.pt (torch.save
    # keeps each one's dtype, strides, Parameter-ness and requires_grad, one object saved
    # once, and views of one storage sharing it): to_folder's own state_dict.pt was loaded
    # into modules rebuilt from their repr, in float32 and contiguous, each name apart, so a
    # float16/float64 model did not run, a transposed buffer came back contiguous and a view
    # of another buffer stopped sharing its memory
    tensors: dict[str, torch.Tensor] = {}
    for named in (gm.named_parameters(remove_duplicate=False), gm.named_buffers(remove_duplicate=False)):
        tensors.update(named)
    plain = set()
    for path, m in gm.named_modules(remove_duplicate=False):
        for attr, t in vars(m).items():
            if isinstance(t, torch.Tensor):
                name = f"{path}.{attr}" if path else attr
                tensors[name] = t
                plain.add(name)
    state_file = module_py.parent / "state_dict.pt"
    load = next((i for i, line in enumerate(text.splitlines()) if "self.load_state_dict(torch.load(" in line), None)
    if load is not None and state_file.exists():
        torch.save({name: _detached_keeping_kind(t) for name, t in tensors.items()}, state_file)
    lines = text.splitlines(keepends=True)
    if load is not None and state_file.exists():
        indent = lines[load][: len(lines[load]) - len(lines[load].lstrip())]
        # the file as the line names it (relative to module.py once _relocatable made it so)
        where = lines[load].split("torch.load(", 1)[1].rstrip().removesuffix("))")
        lines[load] = "".join(
            indent + line + "\n"
            for line in (
                "# every parameter, buffer and tensor attribute under each of its names, as saved (dtype,",
                "# strides, storage shared between views, requires_grad): to_folder's modules rebuilt from",
                "# their repr hold float32 placeholders",
                f"for _name, _tensor in torch.load({where}).items():",
                "    _path, _, _attr = _name.rpartition('.')",
                "    _module = self.get_submodule(_path)",
                "    if isinstance(_tensor, torch.nn.Parameter):",
                "        _module._parameters[_attr] = _tensor",
                "    elif _name in _PLAIN:",
                "        object.__setattr__(_module, _attr, _tensor)",
                "    else:",
                "        _module._buffers[_attr] = _tensor",
            )
        )
    body = [
        "        # each module's training/eval mode when saved (to_folder rebuilds them all in training mode)\n",
        "        for _name, _module in self.named_modules(remove_duplicate=False):\n",
        "            _module.training = _MODE != (_name in _OTHER)\n",
        "        # the parameters and buffers that were one tensor when saved (tied weights): the first's\n",
        "        for _names in _TIED:\n",
        "            _path, _, _attr = _names[0].rpartition('.')\n",
        "            _module = self.get_submodule(_path)\n",
        "            _tensor = getattr(_module, _attr)\n",
        "            for _name in _names[1:]:\n",
        "                _path, _, _attr = _name.rpartition('.')\n",
        "                _module = self.get_submodule(_path)\n",
        "                if _attr in _module._parameters:\n",
        "                    _module._parameters[_attr] = _tensor\n",
        "                elif _attr in _module._buffers:\n",
        "                    _module._buffers[_attr] = _tensor\n",
        "                else:  # a plain tensor attribute\n",
        "                    object.__setattr__(_module, _attr, _tensor)\n",
        "        # the parameters that did not require grad (load_state_dict makes them all require it)\n",
        "        for _name, _parameter in self.named_parameters(remove_duplicate=False):\n",
        "            _parameter.requires_grad_(_name not in _FROZEN)\n",
    ]
    head = [
        "\n# the mode of most modules when saved, and the paths of the modules in the other mode\n",
        f"_MODE = {mode!r}\n",
        f"_OTHER = frozenset({other!r})\n",
        "# the parameters that did not require grad when saved\n",
        f"_FROZEN = frozenset({frozen!r})\n",
        "# the names of each parameter, buffer or tensor attribute held under several (to_folder saves each apart)\n",
        f"_TIED = {tied!r}\n",
        "# the names of the plain tensor attributes (neither parameters nor buffers)\n",
        f"_PLAIN = frozenset({sorted(plain)!r})\n",
    ]
    end = init.end_lineno
    lines[end:end] = body
    lines[cls.lineno - 1 : cls.lineno - 1] = head + ["\n"]
    module_py.write_text("".join(lines))


def _detached_keeping_kind(t: torch.Tensor) -> torch.Tensor:
    """``t`` as saved: a parameter as itself (its ``requires_grad`` is saved with it), any
    other tensor detached from the graph that made it (torch.save refuses a non-leaf tensor
    that requires grad; views of one storage still share it)."""
    if isinstance(t, torch.nn.Parameter):
        return t
    return t.detach() if t.requires_grad and not t.is_leaf else t


def load_folder(folder: str | os.PathLike[str]) -> torch.nn.Module:
    """The optimized module ``fxpasses run`` saved for a ``symbolic_trace`` or ``dynamo``
    capture: ``folder`` is the ``module`` directory of the run's output (``module.py`` with
    the class ``OptimizedModule``, its tensors beside it). The file is imported under a
    private name (nothing is added to ``sys.path``) and the class instantiated; the module
    takes the inputs the captured graph took (for ``dynamo``, the tensors of ``inputs.pt``
    next to ``module``: ``m(*torch.load(out / "inputs.pt"))``).

    Raises:
        UserError: ``folder`` holds no ``module.py`` (naming the path).
    """
    folder = Path(folder)
    if not (folder / "module.py").is_file():
        raise UserError(
            f"{folder} holds no module.py: give the 'module' folder of an `fxpasses run` output "
            "(written for the symbolic_trace and dynamo captures; an export capture saves model.pt2, "
            "read with torch.export.load(path).module())"
        )
    spec = importlib.util.spec_from_file_location(f"_fxpasses_saved_{abs(hash(str(folder)))}", folder / "module.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.OptimizedModule()
