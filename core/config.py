"""Config files and config models.

A config is a mapping with these keys (all optional except where a command needs one)::

    pipeline = "remove_dropout,fold_constants{max_numel=4096},eliminate_dead_code"
    # or a list: ["remove_dropout", {name = "fold_constants", options = {max_numel = 4096}}]
    # an entry's own verify, on_error, atol, rtol: {name = "fuse_conv_bn", rtol = 1e-2}
    verify = "lint"            # none | lint | numeric
    on_error = "rollback"      # rollback | raise | skip
    order = "dependencies"     # or "as-given": run the entries as listed, pull nothing in
    atol = 1e-5                # numeric verification tolerances
    rtol = 1e-5
    output = "out/model"       # where `fxpasses run` saves the result

    [options.fold_constants]   # options by pass name (merged into its pipeline entries)
    max_numel = 4096

    [plugins]
    enable = []                # load these even with FXPASSES_DISABLE_PLUGIN_AUTOLOAD=1
    disable = []               # never load these (distribution or entry point names)
    strict = false             # a broken plugin is an error, not a warning
    prefer = {}                # {pass name = distribution} when two register one name

    [model]                    # for `fxpasses run`
    factory = "models:convnet" # module:callable (module resolved next to the config file too)
    # graph = "graph.py"       # or: a graph saved by a reproducer, instead of factory/capture
    # program = "model.pt2"    # or: a program saved by torch.export.save (the model.pt2 of
                               # `fxpasses run`), used as it is (capture "export", mode as exported)
    kwargs = {}
    capture = "export"         # symbolic_trace | dynamo | export
    inputs = [{shape = [1, 3, 32, 32], dtype = "float32"}]   # or "inputs.safetensors"
    # keyword inputs: a table by keyword (keys 0, 1, ... are positional), like an inputs file
    # inputs = {input_ids = {shape = [2, 16], dtype = "int64", high = 1000}, attention_mask = {...}}
    seed = 0

Files: ``.toml`` (``pyproject.toml``: the ``[tool.fxpasses]`` table), ``.yaml``/``.yml``
(YAML 1.1, as PyYAML reads it: a number that YAML 1.2 reads otherwise, ``017``, ``1:30`` or
``1:30.5``, is an error), ``.json``. Values are strict, as JSON data: nothing is converted
between types (``atol = "1e-5"`` is an error, as a quoted number for a pass option is), and
pass options are read as pydantic reads JSON (:func:`validate_options`: an ``Enum`` or a
``Path`` from a string). Values nest at most 200 lists or tables deep. Every error is a
:class:`~fxpasses.errors.ConfigError` naming the file and the key path, or an
:class:`~fxpasses.errors.OptionsError` for pass options.
"""

from __future__ import annotations

import collections.abc
import contextlib
import datetime
import difflib
import enum
import functools
import json
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Collection, Literal, Mapping, Union

import pydantic_core
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PydanticSchemaGenerationError,
    Tag,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from ._names import normal_keys, normal_name
from .spec import SETTING_NAMES, nested_field_hint
from .errors import (
    exception_text,
    ConfigError,
    ConfigWarning,
    OptionsError,
    PassDefinitionError,
    close_names,
    did_you_mean,
    did_you_mean_value,
    is_yaml_source,
    value_hint,
    warn,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "PassEntryConfig",
    "FixpointEntryConfig",
    "PluginsConfig",
    "InputSpec",
    "ModelConfig",
    "Config",
    "load_config_file",
    "parse_config",
    "validation_problems",
    "validate_options",
    "config_values",
    "find_project_config",
    "PROJECT_CONFIG",
]

VerifyMode = Literal["none", "lint", "numeric"]
OnError = Literal["rollback", "raise", "skip"]
Capture = Literal["symbolic_trace", "dynamo", "export"]
DTYPES = (
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
)


def _non_empty_branches(schema: dict[str, Any], pattern: str | None = None) -> None:
    """Put a field's "not empty" where JSON Schema applies it: pydantic writes ``min_length``
    of a union once, beside its ``anyOf``, where it constrains strings only; each branch gets
    its own (``minItems``, ``minProperties``, ``minLength``; ``pattern`` for strings too: a
    blank path is refused as an empty one)."""
    schema.pop("minLength", None)
    for branch in schema.get("anyOf", ()):
        branch.pop("minLength", None)
        if "anyOf" in branch:
            _non_empty_branches(branch, pattern)
        kind = branch.get("type")
        if kind == "array":
            branch["minItems"] = 1
        elif kind == "object":
            branch["minProperties"] = 1
        elif kind == "string":
            branch["minLength"] = 1
            if pattern is not None:
                branch["pattern"] = pattern


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PassEntryConfig(_Strict):
    """One pipeline entry written as a table: ``{name = "...", options = {...}}``."""

    name: str = Field(min_length=1)
    options: dict[str, Any] = Field(default_factory=dict)
    verify: VerifyMode | None = None
    on_error: OnError | None = None
    #: the tolerances of numeric verification from this entry on (see :class:`fxpasses.Pipeline`)
    atol: float | None = Field(default=None, ge=0, allow_inf_nan=False, strict=True)
    rtol: float | None = Field(default=None, ge=0, allow_inf_nan=False, strict=True)


#: a pipeline list entry's keys, as messages list them ("name, options, verify, ...")
_ENTRY_KEYS = ", ".join(PassEntryConfig.model_fields)


class FixpointEntryConfig(_Strict):
    """A fixpoint group written as a table: ``{fixpoint = ["pass", {name = "pass2", ...}],
    max_iterations = 10}``: its passes run in order, repeatedly, until an iteration changes
    nothing (see :mod:`fxpasses.fixpoint`)."""

    fixpoint: list[Union[str, PassEntryConfig]] = Field(min_length=1)
    max_iterations: int = Field(default=10, ge=1, le=1000)

    @field_validator("fixpoint", mode="before")
    @classmethod
    def _no_nesting(cls, value: Any) -> Any:
        if isinstance(value, list) and any(isinstance(v, Mapping) and "fixpoint" in v for v in value):
            raise ValueError("fixpoint groups do not nest: list the inner group's passes in the outer one")
        return value


def _item_kind(value: Any) -> str | None:
    """Which kind of pipeline list entry ``value`` is: a pass name, a table naming a pass,
    or a fixpoint group (a table with a ``fixpoint`` key); None for anything else."""
    if isinstance(value, str):
        return "name"
    if isinstance(value, FixpointEntryConfig) or (isinstance(value, Mapping) and "fixpoint" in value):
        return "fixpoint"
    if isinstance(value, (PassEntryConfig, Mapping)):
        return "table"
    return None


#: a pipeline list entry: told apart by its form, so that an error names what was meant (a
#: group's bad max_iterations is not also "name: Field required")
_PipelineItem = Annotated[
    Union[
        Annotated[str, Tag("name")],
        Annotated[PassEntryConfig, Tag("table")],
        Annotated[FixpointEntryConfig, Tag("fixpoint")],
    ],
    Discriminator(
        _item_kind,
        custom_error_type="pipeline_entry",
        custom_error_message=(
            f"Input should be a valid string or a table ({_ENTRY_KEYS}) or a fixpoint group "
            "(fixpoint, max_iterations)"
        ),
    ),
]


class PluginsConfig(_Strict):
    """Which plugin distributions to load (see :class:`fxpasses.Registry`)."""

    enable: list[str] = Field(default_factory=list)
    disable: list[str] = Field(default_factory=list)
    strict: bool = False
    prefer: dict[str, str] = Field(default_factory=dict)

    # the config file it came from, for messages (not a config key)
    _source: str | None = None

    @model_validator(mode="after")
    def _plugin_names(self) -> "PluginsConfig":
        from .registry import plugin_names_problem

        problem = plugin_names_problem(self.enable, self.disable)
        if problem:
            raise ValueError(problem)
        return self


_POSITIONAL_NAME = re.compile(r"[0-9]+")


def is_positional_name(name: Any) -> bool:
    """Whether an input name stands for a positional input: all digits (``0``, ``1``, ...),
    in a ``[model] inputs`` table and in an inputs file alike; any other name is a keyword."""
    return bool(_POSITIONAL_NAME.fullmatch(str(name)))


def positional_names(names: Any) -> list[str]:
    """The positional input names among ``names``, in index order."""
    return sorted((n for n in names if is_positional_name(n)), key=int)


def has_gaps(positional: list[str]) -> bool:
    """Whether positional input names (in index order) are not exactly ``0`` .. ``n - 1``,
    spelt so (``"00"`` for input 0 was taken, ``"01"`` for input 1 refused)."""
    return positional != [str(i) for i in range(len(positional))]


def split_named_inputs(named: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """``(positional values in index order, keyword values by name)`` of inputs by name."""
    return [named[k] for k in positional_names(named)], {k: v for k, v in named.items() if not is_positional_name(k)}


#: the values each integer dtype holds, [min, max] (``torch.iinfo``; written out so that
#: validating a config does not import torch)
_INT_RANGES = {
    "int64": (-(2**63), 2**63 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int8": (-128, 127),
    "uint8": (0, 255),
}
#: the largest finite value of each floating dtype (``torch.finfo(dtype).max``)
_FLOAT_MAX = {"float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308, "float16": 65504.0, "bfloat16": 3.3895313892515355e38}


def int_bounds(dtype: str) -> tuple[int, int]:
    """``(smallest low, largest high)`` of an integer input of ``dtype``: the values it holds,
    ``high`` exclusive, and no more than an int64 (``torch.randint``'s ``high`` is one)."""
    lo_min, hi_max = _INT_RANGES[dtype]
    return lo_min, min(hi_max + 1, 2**63 - 1)


def _blank_path(value: Any, give: str) -> Any:
    """``value``, refused when a blank string (``""`` would be the current directory, ``" "`` a
    file or folder named so): ``give`` says what to give instead (``"a file"``)."""
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"an empty path ({value!r}); give {give}")
    return value


class InputSpec(_Strict):
    """One example input: a random tensor of this shape and dtype.

    Floats are drawn from N(0, 1) (``low``/``high`` given: uniform in [low, high), a missing
    one 0 or 1); integers uniformly from [``low``, ``high``) (default [0, 10)), whole numbers
    the dtype holds (``high`` up to its largest value + 1); bools uniformly (no bounds).
    """

    # (a spec changed after it is made is checked again: `spec.low = -5` on a uint8 input)
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    shape: list[int] = Field(min_length=0, json_schema_extra={"items": {"type": "integer", "minimum": 0}})
    dtype: Literal[DTYPES] = "float32"  # type: ignore[valid-type]
    # (an int stays an int: 2**63 - 1 as a float is 2**63, which int64 does not hold)
    low: int | float | None = None
    high: int | float | None = None

    @field_validator("shape")
    @classmethod
    def _non_negative(cls, v: list[int]) -> list[int]:
        if any(d < 0 for d in v):
            raise ValueError("dimensions must be >= 0")
        return v

    @field_validator("low", "high", mode="before")
    @classmethod
    def _not_a_boolean(cls, v: Any) -> Any:
        if isinstance(v, bool):  # (pydantic's lax int takes True as 1)
            raise ValueError(f"{v!r}: a bound is a number, not a boolean")
        return v

    @model_validator(mode="after")
    def _bounds_fit_the_dtype(self) -> "InputSpec":
        """The bounds draw values of the dtype: torch's own errors for those that do not
        ("from is out of bounds for unsigned char", "Overflow when unpacking long long") came
        only when the input was made, as an internal error."""
        low, high, dtype = self.low, self.high, self.dtype
        if dtype == "bool":
            if low is not None or high is not None:
                raise ValueError("a bool input takes no low/high (its values are drawn as True or False)")
            return self
        both = low is not None and high is not None
        if dtype in _INT_RANGES:
            lo_min, hi_max = int_bounds(dtype)
            for name, v in (("low", low), ("high", high)):
                if v is not None and not float(v).is_integer():
                    raise ValueError(f"{name} = {v!r}: the bounds of an integer input ({dtype}) are whole numbers")
            lo, hi = self.drawn_range()  # type: ignore[misc]
            if not (lo_min <= lo < hi_max and lo_min < hi <= hi_max):
                raise ValueError(f"[low, high) = [{lo}, {hi}) is outside what {dtype} holds: low >= {lo_min}, high <= {hi_max}")
            if hi <= lo:
                which = "" if both else " (the default low is 0, high 10)"
                raise ValueError(f"high ({hi}) must be greater than low ({lo}){which}")
            return self
        biggest = _FLOAT_MAX[dtype]
        for name, v in (("low", low), ("high", high)):
            if v is not None and not abs(v) <= biggest:  # (nan too)
                raise ValueError(f"{name} = {v!r} is not a finite {dtype} (largest {biggest:g})")
        drawn = self.drawn_range()
        if drawn is not None and drawn[1] <= drawn[0]:
            which = "" if both else " (a missing low is 0, a missing high 1)"
            raise ValueError(f"high ({drawn[1]:g}) must be greater than low ({drawn[0]:g}){which}")
        return self

    def drawn_range(self) -> tuple[int, int] | tuple[float, float] | None:
        """``(low, high)`` the values are drawn from, uniformly in ``[low, high)``, defaults
        filled in: an integer input's (default ``[0, 10)``), a float input's given a bound (the
        other one 0 or 1); None for a bool input and a float one drawn from N(0, 1)."""
        low, high = self.low, self.high
        if self.dtype in _INT_RANGES:
            return (0 if low is None else int(low)), (10 if high is None else int(high))
        if self.dtype == "bool" or (low is None and high is None):
            return None
        return (0.0 if low is None else float(low)), (1.0 if high is None else float(high))


#: Why ``train = true`` cannot apply to an exported module (a saved ``program``, or a factory
#: returning ``torch.export``'s ``ExportedProgram`` or its ``.module()``).
EXPORTED_MODE_FIXED = (
    "the training/eval mode of an exported module is fixed when it is exported (torch.export "
    "records dropout and batch norm as that mode runs them), so it cannot be put in training mode; "
    "remove `train = true` (the module runs in the mode it was exported in; `preset = \"training\"` "
    "keeps its parameters unfrozen), or give a factory returning the model itself, not exported, "
    "for `capture` to export in training mode"
)


#: a callable in a module: a Python name, or dotted names (``Net.build``)
_CALLABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
#: ``module:callable``, the module a dotted name or a path (which may hold colons: the
#: callable follows the last one); matched whole (``fullmatch``: ``$`` matches before a last
#: line break too, and ``"models:convnet\n"`` passed)
_FACTORY = re.compile(rf".+:{_CALLABLE.pattern}")


class ModelConfig(_Strict):
    """The model ``fxpasses run`` optimizes: a factory to capture, a saved graph, or a saved
    exported program.

    ``factory`` (``module:callable``) builds an ``nn.Module`` that is captured with
    ``capture`` (a factory may also return an exported module, ``torch.export``'s
    ``ExportedProgram`` or its ``.module()``: that is used as it is, not captured again);
    ``graph`` instead names a graph file written by a reproducer (:mod:`fxpasses.reproducer`),
    loaded as it is; ``program`` names a program saved by ``torch.export.save`` (a ``.pt2``,
    such as the ``model.pt2`` that ``fxpasses run`` writes), loaded with
    ``torch.export.load(...).module()`` and used as it is: its dialect is ``export`` and its
    training/eval mode is the one it was exported in, so ``train = true`` and another
    ``capture`` are errors. ``inputs`` is a list of input specs
    (random tensors, the positional inputs), a table of input specs by name (keys ``0``,
    ``1``, ... are positional inputs, any other key is a keyword input: the model is called
    ``model(*positional, **keywords)``, as ``torch.export.export(model, args, kwargs)`` calls
    it), or the path of a tensor file (``.safetensors`` or ``.pt``) holding the exact inputs,
    named the same way (tensors ``0``, ``1``, ... positional, others keyword inputs). A saved
    ``program`` without ``inputs`` is run on the example inputs ``torch.export`` saved with it
    (``ExportedProgram.example_inputs``). Paths are relative to the config file.
    ``reference`` (with ``graph`` only) names a second graph file whose outputs numeric
    verification and the before/after comparison are held to instead of ``graph``'s: a
    reproducer writes it, the module before the whole pipeline, where passes before the
    failing one changed the outputs (within their tolerances).
    ``requires_grad`` names the inputs (``"0"``, ``"1"``, ... positional, others by keyword)
    to make require grad, as the run the reproducer replays had them (an inputs file holds
    values only): numeric verification then compares their gradients too.
    """

    # the pattern stays in the JSON Schema for editors; the validator below explains a mismatch
    # (`$(?!\n)`: the end of the text, to Python's re, which jsonschema searches with, as well)
    factory: str | None = Field(default=None, json_schema_extra={"pattern": rf"^{_FACTORY.pattern}$(?!\n)"})
    graph: str | None = Field(default=None, min_length=1, json_schema_extra=lambda schema: _non_empty_branches(schema, r"\S"))
    program: str | None = Field(default=None, min_length=1, json_schema_extra=lambda schema: _non_empty_branches(schema, r"\S"))
    reference: str | None = Field(default=None, min_length=1, json_schema_extra=lambda schema: _non_empty_branches(schema, r"\S"))
    # names of inputs (0, 1, ... positional; keywords) that require grad (a file stores none)
    requires_grad: list[str] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    capture: Capture = "export"
    inputs: Union[list[InputSpec], dict[str, InputSpec], str, None] = Field(
        default=None, min_length=1, json_schema_extra=lambda schema: _non_empty_branches(schema, r"\S")
    )
    # torch.manual_seed's range (it raises a bare "Overflow when unpacking long long" beyond)
    seed: int = Field(default=0, ge=-(2**63), le=2**64 - 1)
    train: bool = False

    @field_validator("graph", "program", "reference", "inputs", mode="before")
    @classmethod
    def _path_not_blank(cls, value: Any) -> Any:
        return _blank_path(value, "a file")  # ("" was pydantic's "at least 1 item")

    @field_validator("factory")
    @classmethod
    def _module_callable(cls, value: str | None) -> str | None:
        """``value`` when it is ``module:callable``.

        Raises:
            ValueError: saying which part is wrong: no colon, no module, a callable that is no
                Python name or dotted names (``convnet.``, ``a..b``, a line break after it), a
                module holding a line break."""
        if value is not None and not _FACTORY.fullmatch(value):
            module, colon, attr = value.rpartition(":") if ":" in value else (value, "", "")
            if not colon:
                why = "no ':callable' part: give the module and the function that builds the model"
                head, dot, tail = value.rpartition(".")
                if dot and head and tail.isidentifier():  # models.make: the function after a dot
                    why += f": '{head}:{tail}' (a ':' before the function, not a '.'), or '{value}:build'"
                else:
                    why += f", e.g. '{value}:build'"
            elif not module:
                why = "no module before the ':'"
            elif not _CALLABLE.fullmatch(attr):
                why = f"{attr!r} after the ':' is not a Python name (or dotted names)"
            else:
                why = f"the module {module!r} holds a line break"
            raise ValueError(f"`factory` must be 'module:callable' (as \"models:convnet\"): {why}")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> "ModelConfig":
        given = [k for k in ("factory", "graph", "program") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "give either `factory` (a model to capture) or `graph` (a saved graph file) or `program` "
                "(a saved exported program, .pt2), just one of them"
                + (f" (got {', '.join(given)})" if given else "")
            )
        if self.inputs is None and self.program is None:
            raise ValueError(
                "`inputs` is required: the example inputs to run the model on (a list or table of "
                "input specs, or a tensor file); only a saved `program` brings its own"
            )
        if self.reference is not None and self.graph is None:
            raise ValueError("`reference` (a graph file the outputs are compared with) goes with a saved `graph` only")
        if self.factory is None and self.kwargs:
            what = "a saved `graph`" if self.graph is not None else "a saved `program`"
            raise ValueError(f"`kwargs` are for a factory; {what} takes none")
        if self.program is not None:
            if self.train:
                raise ValueError(f"`train = true`: {EXPORTED_MODE_FIXED}")
            if "capture" in self.model_fields_set and self.capture != "export":
                raise ValueError(
                    f"`capture = {self.capture!r}`: a saved `program` is an exported module already and is "
                    'used as it is, in the export dialect; remove `capture` (or set it to "export")'
                )
        return self

    @field_validator("inputs", mode="before")
    @classmethod
    def _integer_keys(cls, v: Any) -> Any:
        """YAML reads the key ``0:`` as the integer 0 (TOML and JSON keys are strings): a
        non-negative integer key names the positional input of that index."""
        if isinstance(v, dict):
            return {str(k) if type(k) is int and k >= 0 else k: x for k, x in v.items()}
        return v

    @field_validator("inputs")
    @classmethod
    def _named_inputs(cls, v: Any) -> Any:
        if isinstance(v, dict):
            positional = positional_names(v)
            if has_gaps(positional):
                raise ValueError(
                    "in a table of inputs, keys 0, 1, ... are the positional inputs and must have no "
                    f"gaps nor leading zeros (got {', '.join(positional)}); other keys are keyword inputs"
                )
            if "" in v:
                raise ValueError("in a table of inputs, a key is an input's position or keyword, not empty")
        return v


class Config(_Strict):
    """A whole config (see the module doc)."""

    pipeline: Union[str, list[_PipelineItem], None] = None
    preset: str | None = None
    options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    verify: VerifyMode = "lint"
    on_error: OnError = "rollback"
    order: Literal["dependencies", "as-given"] = "dependencies"
    atol: float = Field(default=1e-5, ge=0, allow_inf_nan=False)
    rtol: float = Field(default=1e-5, ge=0, allow_inf_nan=False)
    plugins: PluginsConfig = Field(default_factory=PluginsConfig)
    model: ModelConfig | None = None
    output: str | None = Field(default=None, json_schema_extra=lambda schema: _non_empty_branches(schema, r"\S"))

    @field_validator("output")
    @classmethod
    def _output_not_blank(cls, v: str | None) -> str | None:
        return _blank_path(v, "a directory")

    # where it came from, for messages (not a config key)
    _source: str = "config"
    _base_dir: Path | None = None
    _found: Path | None = None  # the project config found, not given (find_project_config)
    _pipeline_overridden: bool = False  # --pipeline/--preset replaced the file's pipeline
    _preset_from_cli: bool = False  # the preset came from --preset (errors name the option)
    _pipeline_from_cli: bool = False  # the pipeline came from --pipeline (errors name the option)


#: the string choices in pydantic's ``expected`` of a literal or enum error ("'a', 'b' or 'c'")
_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'")


def validation_problems(
    exc: ValidationError, model: type[BaseModel] | None = None, *, unknown: str = "option"
) -> list[tuple[str, str, Any]]:
    """``(field path, message, given value)`` for each error of a pydantic ``ValidationError``.

    Unknown keys get a "did you mean" suggestion from the model's field names, worded
    ``unknown <unknown>`` (``"option"`` for a pass's options; ``"key"`` for a config's own
    tables). For a field that
    takes one of several types (``pipeline``: a string or a list), pydantic reports a failure
    under every alternative; only the alternative that fits the given value is kept (the one
    whose errors reach deepest), and alternatives that all fail at once are merged into one
    "should be X or Y" message. Union tags are left out of the field paths.
    """
    items = [_Problem(err, model) for err in exc.errors()]
    items = _pick_union_branches(items)
    problems = []
    for it in items:
        err = it.err
        loc = ".".join(str(p) for p in it.loc) or "(root)"
        msg = it.msg
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        # a pipeline list entry: a pass name or a table, not our model's class name
        for said in ("a valid dictionary or instance of PassEntryConfig", "instance of PassEntryConfig"):
            msg = msg.replace(said, f"a table ({_ENTRY_KEYS})")
        for said in ("a valid dictionary or instance of FixpointEntryConfig", "instance of FixpointEntryConfig"):
            msg = msg.replace(said, "a fixpoint group (fixpoint, max_iterations)")
        if err["type"] == "extra_forbidden" and model is not None:
            msg = _unknown_option_message(it.loc[-1] if it.loc else None, it.parent_fields, unknown)
        elif err["type"] in ("literal_error", "enum"):  # one of some strings: the closest
            msg += did_you_mean_value(it.input, _QUOTED.findall(str(err.get("ctx", {}).get("expected", ""))))
        problems.append((loc, msg, it.input))
    return problems


class _Problem:
    """One pydantic error with union tags taken out of its location."""

    def __init__(self, err: Any, model: type[BaseModel] | None) -> None:
        self.err = err
        self.msg = err["msg"]
        self.input = err.get("input")
        self.loc: tuple[Any, ...] = ()
        self.unions: list[tuple[tuple[Any, ...], str]] = []  # (path of the union, branch tag)
        self.parent_fields: list[str] = []
        cur: Any = model
        raw = tuple(err["loc"])
        for i, part in enumerate(raw):
            cur = _unwrap(cur)
            members = _union_members(cur)
            if members is not None and isinstance(part, str):
                chosen = _branch(members, part)
                if chosen is not _NO_BRANCH:
                    self.unions.append((self.loc, part))
                    cur = chosen
                    continue
            if i == len(raw) - 1 and isinstance(cur, type) and issubclass(cur, BaseModel):
                self.parent_fields = _given_names(cur)
            self.loc += (part,)
            cur = _child(cur, part)
        if not raw and isinstance(cur, type) and issubclass(cur, BaseModel):
            self.parent_fields = _given_names(cur)


_NO_BRANCH = object()


def _unwrap(ann: Any) -> Any:
    """``Annotated[X, ...]`` -> X; ``Optional[X]`` -> X."""
    import typing

    while True:
        origin = typing.get_origin(ann)
        if origin is typing.Annotated:
            ann = typing.get_args(ann)[0]
            continue
        members = _union_members(ann, keep_none=True)
        if members is not None:
            rest = [m for m in members if m is not type(None)]
            if len(rest) == 1:
                ann = rest[0]
                continue
        return ann


def _union_members(ann: Any, keep_none: bool = False) -> list[Any] | None:
    import types
    import typing

    if typing.get_origin(ann) in (Union, types.UnionType):
        members = list(typing.get_args(ann))
        return members if keep_none else [m for m in members if m is not type(None)]
    return None


def _branch(members: list[Any], tag: str) -> Any:
    """The union member pydantic names ``tag`` (``str``, ``list[...]``, a model's name)."""
    import typing

    for m in members:
        if typing.get_origin(m) is typing.Annotated and any(
            isinstance(a, Tag) and a.tag == tag for a in typing.get_args(m)[1:]
        ):  # a tagged union's member (pydantic names it by its Tag)
            return _unwrap(m)
        m2 = _unwrap(m)
        origin = typing.get_origin(m2)
        if isinstance(m2, type) and m2.__name__ == tag:
            return m2
        if origin is not None and tag.startswith(f"{getattr(origin, '__name__', origin)}["):
            return m2
        if typing.get_origin(m2) is Literal and tag.startswith("literal["):
            return m2
    return _NO_BRANCH


def _child(ann: Any, part: Any) -> Any:
    import typing

    ann = _unwrap(ann)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        f = ann.model_fields.get(part) if isinstance(part, str) else None
        return f.annotation if f is not None else None
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin in (list, set, frozenset) and args:
        return args[0]
    if origin is tuple and args:
        return args[0] if len(args) == 2 and args[1] is Ellipsis else (args[part] if isinstance(part, int) and part < len(args) else None)
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def _pick_union_branches(items: list[_Problem]) -> list[_Problem]:
    """At each union where alternatives disagree, keep the alternative that fits the value."""
    while True:
        points: dict[tuple[Any, ...], set[str]] = {}
        for it in items:
            for path, tag in it.unions:
                points.setdefault(path, set()).add(tag)
        contested = sorted((p for p, tags in points.items() if len(tags) > 1), key=len)
        if not contested:
            return items
        path = contested[0]
        through = [it for it in items if any(p == path for p, _ in it.unions)]
        others = [it for it in items if it not in through]
        depth: dict[str, int] = {}
        for it in through:
            tag = next(t for p, t in it.unions if p == path)
            depth[tag] = max(depth.get(tag, 0), len(it.loc))
        best = max(depth.values())
        keep = {t for t, d in depth.items() if d == best}
        chosen = [it for it in through if next(t for p, t in it.unions if p == path) in keep]
        if len(keep) > 1 and best == len(path):
            # every alternative failed on the value itself: one merged message
            first = chosen[0]
            wants = []
            for it in chosen:
                m = it.msg[len("Input should be "):] if it.msg.startswith("Input should be ") else it.msg
                if m not in wants:
                    wants.append(m)
            first.msg = "Input should be " + " or ".join(wants)
            first.unions = [(p, t) for p, t in first.unions if p != path]
            chosen = [first]
        else:
            for it in chosen:
                it.unions = [(p, t) for p, t in it.unions if p != path]
        items = others + chosen
        items.sort(key=lambda it: [str(x) for x in it.loc])


def normal_option_keys(pass_name: str, raw: Mapping[Any, Any], source: str | None) -> dict[Any, Any]:
    """``raw`` with its keys NFKC-normalized (:func:`~fxpasses._names.normal_keys`), as the
    field names of the Options class are (Python normalizes identifiers): ``e\u0301chelle``
    is ``\xe9chelle``.

    Raises:
        OptionsError: two keys that are the same name typed two ways."""

    def clash(name: Any, first: Any, second: Any, value: Any) -> Exception:
        why = f"given twice, as {ascii(first)} and as {ascii(second)} (one name in two Unicode forms)"
        return OptionsError(pass_name, [(str(name), why, value)], source=source)

    return normal_keys(raw, clash)


def same_field_twice(pass_name: str, options_cls: type[BaseModel], raw: Mapping[Any, Any], source: str | None) -> None:
    """Raise :class:`OptionsError` when two keys of ``raw`` set one field of ``options_cls``:
    its name and its alias (``from_`` and ``from``). (In the tables of nested models,
    :func:`_nested_unknown` reports it.)"""
    fields = _field_by_key(options_cls)
    seen: dict[str, Any] = {}
    for key in raw:
        field = fields.get(key) if isinstance(key, str) else None
        if field is None:
            continue
        if field in seen:
            raise OptionsError(pass_name, [_given_twice(options_cls, field, seen[field], key, raw[key])], source=source)
        seen[field] = key


def _given_twice(model: type[BaseModel], field: str, first: Any, second: Any, value: Any, path: str = "") -> tuple[str, str, Any]:
    """The problem of ``field`` of ``model`` set by two keys, its name and its alias."""
    given = model.model_fields[field].alias or field
    return path + given, f"given twice, as {first!r} and as {second!r} (its name and its alias)", value


def canonical_option_keys(options_cls: type[BaseModel], raw: Mapping[Any, Any]) -> dict[Any, Any]:
    """``raw`` with each key that sets a field of ``options_cls`` by its name or alias written
    as the option is given (its alias if it has one, :func:`_given_names`); other keys as they
    are. Two keys for one field are :func:`same_field_twice`'s to refuse."""
    fields = _field_by_key(options_cls)
    out: dict[Any, Any] = {}
    for key, value in raw.items():
        field = fields.get(key) if isinstance(key, str) else None
        name = (options_cls.model_fields[field].alias or field) if field is not None else key
        out[name if name not in out else key] = value
    return out


def validate_options(
    pass_name: str,
    options_cls: type[BaseModel],
    raw: Any,
    source: str | None,
    config_keys: Collection[str] = (),
    *,
    string_keys: Collection[str] | None = None,
) -> BaseModel:
    """Validate ``raw`` against a pass's ``Options`` model.

    ``config_keys`` are the keys of ``raw`` whose values were read from a config file or a
    pipeline string: JSON-like data, read as pydantic reads JSON (:func:`config_values`): a
    string is an ``Enum`` member (by value), a ``Path``, a ``date``; a list is a ``tuple``; and,
    the model being strict, a string is still never a number (``"12"`` is not an ``int``). The
    other keys are Python values, validated as given (an ``Enum`` field takes a member, a
    ``Path`` field a ``Path``: pydantic's strict Python mode). ``string_keys``: those of
    ``config_keys`` written in a pipeline string, where a bare word may have been read as
    something other than text (``none``, ``true``, ``1_000``, ``[...]``), which the errors then
    say (default: all of ``config_keys`` when ``source`` names a pipeline string).

    Raises:
        OptionsError: naming the pass, each field path, the expectation and the given value.
        PassDefinitionError: a validator of the model raised something pydantic does not turn
            into a validation error (not ``ValueError``/``AssertionError``/pydantic's own): a
            bug of the pass, named with its ``Options`` class and the exception.
    """
    if isinstance(raw, options_cls):
        _check_options_depth(pass_name, raw.__dict__, source)
        return raw
    if raw is None:
        raw = {}
    if isinstance(raw, BaseModel):  # another model's instance: another pass's Options, most likely
        theirs = f"{type(raw).__module__}.{type(raw).__qualname__}"
        ours = f"{options_cls.__module__}.{options_cls.__qualname__}"
        raise OptionsError(
            pass_name,
            [("(options)", f"options are a {theirs}, not this pass's Options ({ours}): another pass's options?", raw)],
            source=source,
        )
    if not isinstance(raw, Mapping):
        raise OptionsError(pass_name, [("(options)", "options must be a table of key = value", raw)], source=source)
    _check_options_depth(pass_name, raw, source)
    if not all(k.isascii() for k in raw if isinstance(k, str)):  # option names as Python's identifiers
        raw, config_keys = normal_option_keys(pass_name, raw, source), {normal_name(k) for k in config_keys}
    same_field_twice(pass_name, options_cls, raw, source)
    # (a nested plain BaseModel drops a misspelt key: looked for before the values are read;
    # a nested field given twice is refused first, as a top-level one is, before pydantic
    # calls one of the two keys unknown)
    nested_unknown, nested_twice = _unknown_nested_keys(options_cls, raw)
    if nested_twice:
        raise OptionsError(pass_name, nested_twice, source=source)
    dotted = [k for k in raw if isinstance(k, str) and "." in k]  # tiling.size: a nested field's path?
    raw, problems = config_values(options_cls, raw, config_keys)
    problems += nested_unknown
    python_keys = {str(k) for k in raw if k not in config_keys}  # hints in Python's words for these
    if options_cls.model_config.get("extra") != "forbid":
        # an Options model that is a plain BaseModel ignores unknown keys: a misspelt option
        # would be dropped without a word, so they are refused here as PassOptions refuses them
        problems += _unknown_options(options_cls, raw)
        raw = {k: v for k, v in raw.items() if k not in {p[0] for p in problems}}
    try:
        options = options_cls.model_validate(raw)
    except ValidationError as exc:
        bad = {path.split(".")[0] for path, _, _ in problems}  # left out of raw: not "missing"
        problems += [
            _enum_member_hint(options_cls, p) for p in validation_problems(exc, options_cls) if p[0].split(".")[0] not in bad
        ]
    except Exception as exc:
        if problems:  # the model may need the values that did not fit: those are the fault
            problems = _nested_field_paths(options_cls, problems, dotted)
            raise OptionsError(pass_name, problems, source=source, python_keys=python_keys) from None
        where = f" ({source})" if source else ""
        raise PassDefinitionError(
            f"pass {pass_name!r}{where}: its options model {options_cls.__module__}.{options_cls.__qualname__} "
            f"raised {exception_text(exc)} while validating {dict(raw)!r} (a validator should raise "
            "ValueError for a bad value)"
        ) from exc
    if problems:
        if string_keys is None:
            string_keys = config_keys if source and "pipeline string" in source else ()
        problems = _nested_field_paths(options_cls, problems, dotted)
        raise OptionsError(pass_name, _text_read_as_other(problems, string_keys), source=source, python_keys=python_keys)
    return options


def _nested_field_paths(
    options_cls: type[BaseModel], problems: list[tuple[str, str, Any]], dotted: Collection[str]
) -> list[tuple[str, str, Any]]:
    """``problems`` with the "unknown option" of each key of ``dotted`` (the given keys holding a
    ``.``) that is the path of a nested options model's field, as ``fxpasses show`` lists it
    (``tiling.size``), saying so and how it is given (:func:`~fxpasses.spec.nested_field_hint`):
    it was "unknown option; did you mean 'tiling'?" (a new-user check)."""
    out = []
    for path, msg, given in problems:
        fields = _nested_field_path(options_cls, path) if path in dotted and msg.startswith("unknown option") else None
        if fields is not None:
            of = f"option {fields[0]!r}" if len(fields) == 2 else f"{'.'.join(fields[:-1])}, in option {fields[0]!r}"
            msg = f"unknown option; {path} is the field {fields[-1]} of {of}, " + nested_field_hint(fields, given)
        out.append((path, msg, given))
    return out


def _nested_field_path(options_cls: type[BaseModel], key: str) -> list[str] | None:
    """``key`` split at its dots when it is the path of a field of a model an option holds (the
    option's type, inside ``Optional`` or a union), at any depth: ``["tiling", "size"]`` for
    ``tiling.size``; else None."""
    parts = key.split(".")
    ann: Any = options_cls
    for part in parts:
        ann = _unwrap(ann)
        models = [ann] if isinstance(ann, type) and issubclass(ann, BaseModel) else [
            m for m in map(_unwrap, _union_members(ann) or []) if isinstance(m, type) and issubclass(m, BaseModel)
        ]
        model = next((m for m in models if part in _field_by_key(m)), None)
        if model is None:
            return None
        ann = model.model_fields[_field_by_key(model)[part]].annotation
    return parts if len(parts) > 1 else None


def _enum_member_hint(options_cls: type[BaseModel], problem: tuple[str, str, Any]) -> tuple[str, str, Any]:
    """``problem`` with the member to give where Python gave an ``Enum`` field a member's value
    (``mode="fast"``: "give Mode.fast"; a config's text is read as the member, Python's is not)."""
    path, msg, given = problem
    field = options_cls.model_fields.get(path)
    annotation = field.annotation if field is not None else None
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum) and msg.startswith("Input should be an instance"):
        members = [m for m in annotation if m.value == given or m.name == given]
        if members:
            msg += f" (give {annotation.__name__}.{members[0].name}, the member, from Python; {given!r} is read as it only from text)"
    return path, msg, given


def _text_read_as_other(problems: list[tuple[str, str, Any]], string_keys: Collection[str]) -> list[tuple[str, str, Any]]:
    """``problems`` with a hint where a pipeline string's unquoted value (of an option of
    ``string_keys``) was read as something other than the text a text field wanted: ``[...]``
    (a regular expression's character class, most likely) as a list, ``none``/``null`` as
    None, ``true``/``false`` as a boolean, ``inf``, ``nan`` or ``1_000`` as a number."""
    out = []
    for path, msg, given in problems:
        top = path.split(".")[0]
        # the innermost key holding it: an option (names), a table's key (thresholds.tag),
        # or a list's element (names.0: that list's key)
        parts = path.split(".")
        last = parts[-1]
        if last.isdigit():
            key = next((p for p in reversed(parts) if not p.isdigit()), top)
            quoted = f'{key}=[..., "...", ...]'
        else:
            quoted = f'{last}="..."'
        choice = _choice_typed(msg, given) if top in string_keys else None
        if choice is not None:  # a Literal's or Enum's text, read as None, a boolean or a number
            what = "None" if given is None else "a boolean" if isinstance(given, bool) else "a number"
            typed = "none or null" if given is None else choice if isinstance(given, bool) else str(given)
            written = quoted.replace('"..."', f'"{choice}"')
            msg += f" (an unquoted {typed} in a pipeline string is {what}: quote the text, {written})"
        elif top in string_keys and msg == "Input should be a valid string":
            if isinstance(given, (list, tuple)):
                quoted = quoted.replace('"..."', '"[...]"')
                msg += f" (an unquoted [...] in a pipeline string is a list: quote the text, {quoted})"
            elif given is None:
                msg += f" (an unquoted none or null in a pipeline string is None: quote the text, {quoted})"
            elif isinstance(given, bool):
                msg += f" (an unquoted true or false in a pipeline string is a boolean: quote the text, {quoted})"
            elif isinstance(given, (int, float)):
                msg += f" (an unquoted number in a pipeline string is a number: quote the text, {quoted})"
        out.append((path, msg, given))
    return out


def _choice_typed(msg: str, given: Any) -> str | None:
    """The choice of a Literal's or Enum's error (``Input should be 'none' or 'tanh'``) that
    ``given`` is what a pipeline string reads as when typed unquoted (``none`` as None, ``true``
    as True, ``2`` as 2), else None."""
    if not msg.startswith("Input should be ") or not (given is None or isinstance(given, (bool, int, float))):
        return None
    for choice in re.findall(r"'([^']*)'", msg):
        low = choice.lower()
        if given is None and low in ("none", "null"):
            return choice
        if isinstance(given, bool):
            if low == str(given).lower():
                return choice
        elif given is not None and _reads_as(choice, given):
            return choice
    return None


def _reads_as(text: str, number: Any) -> bool:
    """Whether ``text`` is a number equal to ``number`` (``"2"`` for 2, ``"0.5"`` for 0.5)."""
    try:
        return float(text.replace("_", "")) == number
    except ValueError:
        return False


def _unknown_options(options_cls: type[BaseModel], raw: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """``(key, message, value)`` for each key of ``raw`` that names no field of ``options_cls``
    (by name or alias), worded as :func:`validation_problems` words pydantic's
    ``extra_forbidden``."""
    known = _field_by_key(options_cls)
    fields = _given_names(options_cls)
    return [(str(k), _unknown_option_message(k, fields), v) for k, v in raw.items() if k not in known]


def _unknown_nested_keys(
    options_cls: type[BaseModel], raw: Mapping[str, Any]
) -> tuple[list[tuple[str, str, Any]], list[tuple[str, str, Any]]]:
    """``(field path, message, value)`` for each key, inside a value of ``raw`` given as a
    table for a nested model (through lists, tuples, sets, dicts and optional or one-model
    unions), that names no field of that model, where the model ignores such keys (a plain
    ``BaseModel``: pydantic's default ``extra="ignore"``): ``{rng={lo=1.0}}`` for a field
    ``rng: Range`` was validated as ``Range()``, the misspelt ``lo`` dropped without a word (a
    new-user check). A model that forbids them reports them itself; one that allows them
    keeps them. Second, in the same form, each field given by both its name and its alias
    (pydantic kept one of the two values, or called the name unknown: an adversarial check).
    (The top-level keys are :func:`_unknown_options`' and :func:`same_field_twice`'s.)"""
    fields = _field_by_key(options_cls)
    problems: list[tuple[str, str, Any]] = []
    twice: list[tuple[str, str, Any]] = []
    for key, value in raw.items():
        if key in fields:
            _nested_unknown(options_cls.model_fields[fields[key]].annotation, value, str(key), problems, twice)
    return problems, twice


def _nested_unknown(
    ann: Any, data: Any, path: str, problems: list[tuple[str, str, Any]], twice: list[tuple[str, str, Any]]
) -> None:
    import typing

    ann = _unwrap(ann)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        if not isinstance(data, Mapping):
            return
        fields = _field_by_key(ann)  # (a name a model with an alias does not take is no key of it)
        ignored = ann.model_config.get("extra") not in ("allow", "forbid")
        seen: dict[str, Any] = {}
        for key, value in data.items():
            if key in fields:
                field = fields[key]
                if field in seen:  # its name and its alias: pydantic kept one, or called the name unknown
                    twice.append(_given_twice(ann, field, seen[field], key, value, f"{path}."))
                    continue
                seen[field] = key
                _nested_unknown(ann.model_fields[field].annotation, value, f"{path}.{key}", problems, twice)
            elif ignored:
                problems.append((f"{path}.{key}", _unknown_option_message(key, _given_names(ann)), value))
        return
    members = _union_members(ann)
    if members is not None:
        models = [m for m in map(_unwrap, members) if isinstance(m, type) and issubclass(m, BaseModel)]
        if len(models) == 1 and isinstance(data, Mapping):
            _nested_unknown(models[0], data, path, problems, twice)
        return
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin in (list, set, frozenset, tuple) and args and isinstance(data, (list, tuple)):
        fixed = origin is tuple and not (len(args) == 2 and args[1] is Ellipsis)
        for i, item in enumerate(data):
            if fixed and i >= len(args):
                break
            _nested_unknown(args[i] if fixed else args[0], item, f"{path}.{i}", problems, twice)
    elif origin in (dict, collections.abc.Mapping) and len(args) == 2 and isinstance(data, Mapping):
        for key, value in data.items():
            _nested_unknown(args[1], value, f"{path}.{key}", problems, twice)


def _unknown_option_message(key: Any, fields: list[str], what: str = "option") -> str:
    """``unknown option; did you mean 'x'? (valid: ...)`` for an option ``key`` no field has
    (``what``: ``"key"`` for a config's own tables)."""
    close = close_names(str(key), fields, n=1) if key is not None else []  # case ignored: MAX_NUMEL
    msg = f"unknown {what}" + did_you_mean(close)
    if what == "option" and key in SETTING_NAMES and not close:
        msg += (
            f"; {key} is a setting of the entry, not an option of the pass: in a pipeline string it goes in "
            f"brackets after the options (name{{...}}[{key}=...]), in a config's table or a Python dict it is "
            "the entry's own key"
        )
    return msg + (f" (valid: {', '.join(fields)})" if fields else "")


def config_values(
    options_cls: type[BaseModel], raw: Mapping[str, Any], keys: Collection[str]
) -> tuple[dict[str, Any], list[tuple[str, str, Any]]]:
    """``(raw with the values of keys read, problems)``: each value of ``keys`` (read from a
    config file or a pipeline string) turned into the Python value its field takes, read as
    pydantic reads JSON (strict when the model is): ``"fast"`` becomes ``Mode.fast``,
    ``"out/x.txt"`` a ``Path``, ``[1, 2]`` a ``tuple``; the model then validates the whole, its
    validators seeing those values. A key that is not a field, or a field whose type pydantic
    cannot read from JSON (an arbitrary class), is left as it is for the model to judge. A value
    that does not fit its field is left out, with ``(field path, message, given value)`` in
    ``problems``.
    """
    out = dict(raw)
    problems: list[tuple[str, str, Any]] = []
    strict = bool(options_cls.model_config.get("strict"))
    for key in [k for k in raw if k in keys]:  # in the order given, as the model reports
        field = _field_by_key(options_cls).get(key)
        adapter = _json_adapter(options_cls, field) if field is not None and key in out else None
        if adapter is None:
            continue
        try:
            # a nested model's fields left out take their defaults as JSON data too: pydantic
            # validates a default in the mode of the call, and a Path default is no JSON string
            text = pydantic_core.to_json(_with_json_defaults(options_cls.model_fields[field].annotation, out[key]))
        except pydantic_core.PydanticSerializationError:
            continue  # not JSON data (a Python object): the model judges it as it is
        try:
            try:
                out[key] = adapter.validate_json(text, strict=strict)
            except ValidationError:
                # the text fxpasses' JSON writes for a float that is not finite (a reproducer's
                # options, at any depth): the float, where the field's type takes one there
                ann = options_cls.model_fields[field].annotation
                floats = _non_finite_floats(ann, out[key])
                if floats is out[key]:
                    raise
                out[key] = adapter.validate_json(pydantic_core.to_json(_with_json_defaults(ann, floats)), strict=strict)
        except ValidationError as exc:
            del out[key]
            for path, msg, value in validation_problems(exc, options_cls.model_fields[field].annotation):
                problems.append((key if path == "(root)" else f"{key}.{path}", msg, value))
            continue
        # a date or time TOML/YAML read from an unquoted value (`path = 1979-05-27`) is JSON
        # text after the round trip above, which a text field took: the pass got text the
        # user did not write as text, YAML's reformatted (an adversarial check). Refused
        # where it became text, with the fix
        found = list(_dates_read_as_text(raw[key], out[key], key))
        if found and type(raw[key]) in _DATE_KINDS:
            # a field that takes the date itself as well as text (`str | date`): the date
            try:
                value = adapter.validate_python(raw[key], strict=True)
            except ValidationError:
                pass
            else:
                if not isinstance(value, str):
                    out[key] = value
                    continue
        if found:
            del out[key]
            for path, value in found:
                problems.append(
                    (
                        path,
                        f"an unquoted {value.isoformat()} in a config file is a {_DATE_KINDS[type(value)]} (TOML and "
                        f'YAML read it so), not text: quote it to mean the text, "{value.isoformat()}"',
                        value,
                    )
                )
    return out, problems


_DATE_KINDS = {datetime.date: "date", datetime.time: "time", datetime.datetime: "date and time"}


def _dates_read_as_text(raw: Any, read: Any, path: str) -> Any:
    """``(field path, value)`` of each date, time or datetime in ``raw`` (an option's value as a
    config file gave it) that is text in ``read`` (the value validated from its JSON): through
    lists, tuples, dict values and nested models (by field name or alias)."""
    if type(raw) in _DATE_KINDS:
        if isinstance(read, str):
            yield path, raw
    elif isinstance(raw, (list, tuple)) and isinstance(read, (list, tuple)) and len(raw) == len(read):
        for i, (a, b) in enumerate(zip(raw, read)):
            yield from _dates_read_as_text(a, b, f"{path}.{i}")
    elif isinstance(raw, Mapping):
        for k, v in raw.items():
            if isinstance(read, Mapping) and k in read:
                yield from _dates_read_as_text(v, read[k], f"{path}.{k}")
            elif isinstance(read, BaseModel) and isinstance(k, str):
                name = _field_by_key(type(read)).get(k)
                if name is not None:
                    yield from _dates_read_as_text(v, getattr(read, name), f"{path}.{k}")


#: non-finite floats as :mod:`fxpasses._json` writes them (a reproducer's options)
_NON_FINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}
#: the types a value may have where a non-finite float's spelling is read as the float
_NUMBERS = (float, int, bool, type(None))


def _non_finite_floats(ann: Any, data: Any) -> Any:
    """``data`` (JSON-like, for a field of type ``ann``) with each string :mod:`fxpasses._json`
    writes for a non-finite float (``"nan"``, ``"inf"``, ``"-inf"``) read as that float where
    the type there takes a float and no text: ``float`` (``Optional``, ``Annotated``, or a union
    of numbers), through lists, tuples, sets, dict values, nested models (by field name or
    alias) and a union's one member that holds such data; elsewhere (``str``, ``float | str``,
    ``Any``) the string stays. ``data`` itself when nothing is read so.

    A reproducer writes options as JSON, spelling a float that is not finite so, and its
    replay read the spelling only as a top-level float option: ``[nan]`` for a ``list[float]``,
    or ``nan`` in a nested model, was "Input should be a valid number" (an adversarial check)."""
    import typing

    ann = _unwrap(ann)
    if isinstance(data, str):
        members = [_unwrap(m) for m in _union_members(ann, keep_none=True) or [ann]]
        takes = float in members and all(m in _NUMBERS for m in members)
        return _NON_FINITE[data] if takes and data in _NON_FINITE else data
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        if not isinstance(data, dict):
            return data
        fields = _field_by_key(ann)
        read = {k: _non_finite_floats(ann.model_fields[fields[k]].annotation, v) if k in fields else v for k, v in data.items()}
        return data if all(read[k] is data[k] for k in data) else read
    members = _union_members(ann)
    if members is not None:
        fits = [m for m in map(_unwrap, members) if _holds(m, data)]
        return _non_finite_floats(fits[0], data) if len(fits) == 1 else data
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin in (list, set, frozenset, tuple) and args and isinstance(data, list):
        fixed = origin is tuple and not (len(args) == 2 and args[1] is Ellipsis)
        items = [_non_finite_floats(args[i] if fixed else args[0], d) for i, d in enumerate(data[: len(args)] if fixed else data)]
        items += data[len(items):]
        return data if all(a is b for a, b in zip(items, data)) else items
    if origin in (dict, collections.abc.Mapping) and len(args) == 2 and isinstance(data, dict):
        read = {k: _non_finite_floats(args[1], v) for k, v in data.items()}
        return data if all(read[k] is data[k] for k in data) else read
    return data


def _holds(ann: Any, data: Any) -> bool:
    """Whether the (unwrapped) type ``ann`` holds JSON data of ``data``'s shape: a list for a
    list, tuple or set type; a table for a dict or a model."""
    import typing

    origin = typing.get_origin(ann)
    if isinstance(data, list):
        return origin in (list, set, frozenset, tuple)
    if isinstance(data, dict):
        return origin in (dict, collections.abc.Mapping) or (isinstance(ann, type) and issubclass(ann, BaseModel))
    return False


def _with_json_defaults(ann: Any, data: Any) -> Any:
    """``data`` (JSON-like, for a field of type ``ann``) with the defaults of every nested
    model's fields it leaves out filled in as JSON data (``Path("x.txt")`` as ``"x.txt"``),
    through lists, tuples, sets and dicts of models. pydantic's JSON mode validates a default
    as it validates the input, and refuses a ``Path`` (or ``list[Path]``) default that is not a
    string: a table giving some of a nested model's fields failed on one it left out. A union
    is looked into only where one of its members is a model; data of another shape is left."""
    import typing

    ann = _unwrap(ann)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name, info in ann.model_fields.items():
            keys = {name, info.alias} - {None}
            given = next((k for k in keys if k in out), None)
            if given is not None:
                out[given] = _with_json_defaults(info.annotation, out[given])
            elif not info.is_required():
                try:
                    default = info.get_default(call_default_factory=True, validated_data={})
                    out[info.alias or name] = pydantic_core.to_jsonable_python(default, by_alias=True)
                except Exception:  # (a default that is no JSON data: left to the model's default)
                    continue
        return out
    members = _union_members(ann)
    if members is not None:
        models = [m for m in map(_unwrap, members) if isinstance(m, type) and issubclass(m, BaseModel)]
        return _with_json_defaults(models[0], data) if len(models) == 1 and isinstance(data, dict) else data
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin in (list, set, frozenset, tuple) and args and isinstance(data, list):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return [_with_json_defaults(a, d) for a, d in zip(args, data)] + data[len(args):]
        return [_with_json_defaults(args[0], d) for d in data]
    if origin is dict and len(args) == 2 and isinstance(data, dict):
        return {k: _with_json_defaults(args[1], v) for k, v in data.items()}
    return data


@functools.lru_cache(maxsize=None)
def _field_by_key(options_cls: type[BaseModel]) -> dict[str, str]:
    """The field each input key of ``options_cls`` sets: its alias if it has one, and its name
    where the model takes names (``PassOptions`` does; a plain model with an alias, only with
    ``populate_by_name``/``validate_by_name``: a name it does not take is an unknown key, which
    pydantic dropped without a word for a model that ignores extra keys: an adversarial check)."""
    cfg = options_cls.model_config
    by_alias = cfg.get("validate_by_alias", True) is not False
    by_name = bool(cfg.get("validate_by_name") or cfg.get("populate_by_name")) or not by_alias
    out: dict[str, str] = {}
    for name, f in options_cls.model_fields.items():
        if not (f.alias and by_alias) or by_name:
            out[name] = name
        if f.alias and by_alias:
            out[f.alias] = name
    return out


def _given_names(options_cls: type[BaseModel]) -> list[str]:
    """The names the fields of ``options_cls`` are given by, as plans print them: the alias
    of a field that has one (``from`` for ``from_: int = Field(alias="from")``), else its name."""
    return [f.alias or name for name, f in options_cls.model_fields.items()]


@functools.lru_cache(maxsize=None)
def _json_adapter(options_cls: type[BaseModel], field: str) -> TypeAdapter[Any] | None:
    """A validator of one field of ``options_cls`` (its type and constraints), or None when
    pydantic cannot build one (a type it does not know, allowed by ``arbitrary_types_allowed``)."""
    info = options_cls.model_fields[field]
    try:
        return TypeAdapter(Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation)
    except PydanticSchemaGenerationError:
        return None


_TOML_PLACE = re.compile(r"\(at line (\d+), column (\d+)\)$")


def _toml_problem(exc: Exception, text: str) -> str:
    """tomllib's message, with the key named where it only says "Cannot overwrite a value"
    (a key given twice: ``verify = ...`` twice, ``a.b`` after ``a.b``), read from the line it
    points at."""
    message = str(exc)
    place = _TOML_PLACE.search(message)
    if not message.startswith("Cannot overwrite a value") or place is None:
        return message
    lines = text.splitlines()
    end = int(place.group(1))  # (the line where the repeated value ends)
    key = None
    for start in range(end - 1, max(end - 200, 0) - 1, -1):  # the statement it ends, read by tomllib
        try:
            parsed = tomllib.loads("\n".join(lines[start:end]))
        except tomllib.TOMLDecodeError:
            continue
        key = _only_path(parsed)
        break
    if key is None:
        return message
    for header in reversed(lines[:start]):  # the table it is in: [model] seed = 1 is model.seed
        try:
            table = tomllib.loads(header) if header.lstrip().startswith("[") else None
        except tomllib.TOMLDecodeError:
            table = None
        if table is not None:
            prefix = _only_path(table)
            key = f"{prefix}.{key}" if prefix else key
            break
    return f"duplicate key {key!r}, given a value before (tomllib: {message})"


def _only_path(data: Any) -> str | None:
    """The dotted path of the one key at each level of ``data`` (what one TOML statement or
    table header parses to: ``{"a": {"b": 1}}`` is ``a.b``), or None when some level has none
    or several."""
    parts = []
    while isinstance(data, dict) and data:
        if len(data) != 1:
            return None
        (k, data), = data.items()
        parts.append(k)
    return ".".join(parts) or None


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte order mark (some editors write one) is dropped
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a directory, expected a file (a config file: .toml, .yaml, .yml or .json)") from None
    except UnicodeDecodeError:
        hint = "a config file is UTF-8 text: .toml, .yaml, .yml or .json"
        try:
            head = path.read_bytes()[:4]
        except OSError:
            head = b""
        # (UTF-32 first: its little-endian mark starts as UTF-16's does)
        marks = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))
        for bom, encoding in marks:
            if head.startswith(bom):
                hint = f"its byte order mark says {encoding}; save it as UTF-8"
                break
        if path.suffix.lower() in (".pt2", ".pt", ".pth", ".zip", ".safetensors"):
            hint = (
                f"a saved model or tensor file is named in a config: [model] program = {str(path)!r} for a saved "
                "exported program (.pt2), inputs = '...' for a tensor file"
            )
        raise ConfigError(f"cannot read config file {path}: it is not UTF-8 text ({hint})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix in (".yaml", ".yml"):
            data = _load_yaml(text, name=str(path))
        elif suffix == ".json":
            data = _load_json(text)
        else:
            raise ConfigError(
                f"unsupported config file type {suffix or '(none)'!r}: use .toml, .yaml, .yml or .json",
                source=str(path),
            )
    except ConfigError:
        raise
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {_toml_problem(exc, text)}", source=str(path)) from None
    except _DuplicateKey as exc:  # (a YAML key that is not text too)
        kind = "JSON" if suffix == ".json" else "YAML"
        raise ConfigError(f"invalid {kind}: {exc}", source=str(path)) from None
    except _Yaml11Number as exc:
        raise ConfigError(f"ambiguous YAML number: {exc}", source=str(path)) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON: {exc}", source=str(path)) from None
    except RecursionError:  # any of the three parsers, on values nested hundreds deep
        kind = {".toml": "TOML", ".json": "JSON"}.get(suffix, "YAML")
        raise ConfigError(
            f"invalid {kind}: values nested too deep for the parser (Python's recursion limit); no config "
            "value needs more than a few levels",
            source=str(path),
        ) from None
    except Exception as exc:  # yaml.YAMLError and friends
        raise ConfigError(f"invalid YAML: {exc}", source=str(path)) from None
    return data


class _DuplicateKey(ValueError):
    pass


def _article(noun: str) -> str:
    """``an int``, ``a bool``."""
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _load_json(text: str) -> Any:
    """``json.loads`` that refuses a key given twice in an object (json keeps the last one
    silently), naming the line and column of the object that has it.

    The object hook json calls gets no position, so objects are parsed through
    ``json.decoder.JSONObject`` wrapped to know where each starts, with the pure-Python
    scanner that calls it (a config file is small)."""
    import json.decoder
    import json.scanner

    if not text.strip():  # an empty file reads as an empty config, as an empty TOML or YAML file does
        return {}
    decoder = json.JSONDecoder()

    def parse_object(s_and_end: tuple[str, int], *args: Any) -> Any:
        s, end = s_and_end  # end: just after the object's "{"

        def no_duplicates(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
            out: dict[Any, Any] = {}
            for k, v in pairs:
                if k in out:
                    line = s.count("\n", 0, end - 1) + 1
                    column = end - 1 - (s.rfind("\n", 0, end - 1) + 1) + 1
                    raise _DuplicateKey(f"duplicate key {k!r} in the object at line {line}, column {column}")
                out[k] = v
            return out

        strict, scan_once, object_hook, _, *rest = args
        return json.decoder.JSONObject(s_and_end, strict, scan_once, object_hook, no_duplicates, *rest)

    decoder.parse_object = parse_object  # type: ignore[assignment]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)
    return decoder.decode(text)


def _load_yaml(text: str, name: str | None = None) -> Any:
    """``yaml.safe_load`` that refuses a mapping key given twice (PyYAML keeps the last one).
    Merge keys (``<<: *anchor``, YAML 1.1) work as in ``yaml.safe_load``: the mapping's own
    keys override the merged ones, and only its own keys given twice are refused. ``name``
    (the file's path) is what PyYAML's own errors name the text by, ``in "fx.yaml", line 3``,
    instead of ``in "<unicode string>"``."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader: Any, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        texts: dict[str, Any] = {}  # each key as the text it is read as later -> the key
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # (merged by construct_mapping)
                continue
            key = loader.construct_object(key_node, deep=deep)
            mark = key_node.start_mark
            where = f"(line {mark.line + 1}, column {mark.column + 1})"
            # TOML's and JSON's keys are text. A YAML integer key is read as its digits (an
            # input's position, `0:`); any other key that is not text (null, true, 1.5, a
            # date) would be read as Python's text for it ('None', 'True'): refused. And 1
            # and "1" were one key, the first value lost without a word (an adversarial check)
            if not isinstance(key, str) and (type(key) is not int):
                if not isinstance(key_node.value, str):  # a list or mapping as a key (`? [a, b]`)
                    written = " ".join(yaml.serialize(key_node).split())  # (as written: its items come later)
                    raise _DuplicateKey(f"key {written} {where} is {_article(type(key).__name__)}: a config's keys are text")
                shown = "null" if key is None else "true" if key is True else "false" if key is False else key_node.value
                raise _DuplicateKey(
                    f"key {shown} {where} is {'null' if key is None else _article(type(key).__name__)}, and a "
                    f"config's keys are text: quote it, '{key_node.value}'"
                )
            text = key if isinstance(key, str) else str(key)
            if text in texts and texts[text] != key:
                raise _DuplicateKey(f"key {key!r} {where} is key {texts[text]!r} again once read as text")
            texts.setdefault(text, key)
            try:
                dup = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: let PyYAML report it
                continue
            if dup:
                mark = key_node.start_mark
                raise _DuplicateKey(f"duplicate key {key!r} (line {mark.line + 1}, column {mark.column + 1})")
        return loader.construct_mapping(node, deep=deep)

    def number(loader: Any, node: Any) -> Any:
        """An integer or a float, refused where YAML 1.2 reads its text otherwise."""
        integer = node.tag == "tag:yaml.org,2002:int"
        value = loader.construct_yaml_int(node) if integer else loader.construct_yaml_float(node)
        surprise = _yaml11_number_surprise(node.value, value)
        if surprise:
            mark = node.start_mark
            raise _Yaml11Number(f"line {mark.line + 1}, column {mark.column + 1}: {surprise}")
        return value

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    Loader.add_constructor("tag:yaml.org,2002:int", number)
    Loader.add_constructor("tag:yaml.org,2002:float", number)
    loader = Loader(text)  # (as yaml.load does, with the text named)
    if name is not None:
        loader.name = name
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


class _Yaml11Number(ValueError):
    pass


def _yaml11_number_surprise(text: str, value: int | float) -> str | None:
    """Why the YAML number written ``text``, which PyYAML (YAML 1.1) read as ``value``, is
    not the number it looks like (YAML 1.2 and TOML read it otherwise), or None: colons
    (``1:30``: base 60, 90; ``1:30.5``, 90.5: a float was taken without a word, an adversarial
    check) or an integer's leading zero (``017``: octal 15 in YAML 1.1, 17 in YAML 1.2)."""
    plain = text.replace("_", "")
    if ":" in plain:
        return (
            f"{text} is a base-60 number in YAML 1.1, which PyYAML reads as {value}: quote it to mean "
            f"the string, or write {value}"
        )
    digits = plain.lstrip("+-")
    if isinstance(value, float):  # (a float's leading zero is decimal in YAML 1.1 too: 017.5)
        return None
    if len(digits) > 1 and digits[0] == "0" and digits[1] not in "xXbBoO" and int(digits, 10) != abs(value):
        return (
            f"{text} has a leading zero, so YAML 1.1 (PyYAML) reads it as octal {value}, YAML 1.2 as "
            f"{int(plain, 10)}: write {int(plain, 10)} (or {value}) without the leading zero, or quote it "
            "to mean the string"
        )
    return None


def read_config_data(path: str | Path) -> Any:
    """The data of a config file, unvalidated: a ``pyproject.toml``'s ``[tool.fxpasses]``
    table (None when it has none), another file's whole content.

    Raises:
        ConfigError: the file cannot be read or parsed."""
    path = Path(path)
    data = _read(path)
    return _fxpasses_table(data)[0] if path.name == "pyproject.toml" else data


def _fxpasses_table(data: Any) -> tuple[Any, Any]:
    """A ``pyproject.toml``'s ``[tool.fxpasses]`` table (None when it has none), and its
    ``[tool]`` table."""
    tool = (data.get("tool") or {}) if isinstance(data, dict) else {}
    return (tool.get("fxpasses") if isinstance(tool, dict) else None), tool


def _warn_top_level_keys(path: Path, data: Any) -> None:
    """Warn about top-level tables or keys of a pyproject.toml named as fxpasses' config keys
    (``[options.X]``, ``pipeline = ...``): pasted from a config file of its own, they are
    read by nothing there (fxpasses reads ``[tool.fxpasses]``; PEP 518 reserves the top level
    for ``[build-system]``, ``[project]`` and ``[tool]``)."""
    if not isinstance(data, dict):
        return
    misplaced = [k for k in data if k in Config.model_fields]
    if misplaced:
        from .errors import ConfigWarning, warn

        def table(k: str) -> str:  # the table as written: [options.X] for options' tables
            inner = data[k]
            sub = next((n for n, v in inner.items() if isinstance(v, dict)), None) if isinstance(inner, dict) else None
            return f"{k}.{sub}" if sub is not None else k

        shown = ", ".join(f"[{table(k)}]" if isinstance(data[k], dict) else k for k in misplaced)
        first = misplaced[0]
        meant = f"[tool.fxpasses.{table(first)}]" if isinstance(data[first], dict) else f"{first} under [tool.fxpasses]"
        warn(
            ConfigWarning(
                f"{path}: {shown} at the top level is read by nothing: fxpasses reads its settings from "
                f"[tool.fxpasses] in a pyproject.toml (write {meant})"
            )
        )


def load_config_file(path: str | Path) -> Config:
    """Read and validate a config file (``pyproject.toml``: its ``[tool.fxpasses]`` table).

    Raises:
        ConfigError: unreadable file, bad syntax, or a key/value that does not fit.
    """
    path = Path(path)
    data = _read(path)
    source = str(path)
    if data is None and path.suffix.lower() in (".yaml", ".yml"):
        data = {}  # an empty YAML file: an empty mapping, as an empty TOML file is
    if path.name == "pyproject.toml":
        _warn_top_level_keys(path, data)
        data, tool = _fxpasses_table(data)
        source = f"{path} [tool.fxpasses]"
        if data is None:
            near = _near_tool_table(tool)
            hint = f" (it has [tool.{near}]: did you mean [tool.fxpasses]?)" if near else ""
            raise ConfigError(f"no [tool.fxpasses] table{hint}", source=str(path))
    elif isinstance(data, dict) and isinstance(data.get("tool"), dict):
        # a pyproject-style table (or a misspelt one) in a config file of its own: its keys go
        # at the top level
        name = "fxpasses" if "fxpasses" in data["tool"] else _near_tool_table(data["tool"])
        if name is not None:
            toml = path.suffix.lower() == ".toml"
            table = f"[tool.{name}] table" if toml else f"tool: {{{name}: ...}} mapping"
            keys = "pipeline, [model], [options.NAME], ..." if toml else "pipeline, model, options, ..."
            near = "" if name == "fxpasses" else " (did you mean tool.fxpasses?)"
            raise ConfigError(
                f"a {table}{near}: that table is read only from a file named pyproject.toml; in a config file "
                f"of its own, write its keys ({keys}) at the top level, without the tool.{name} prefix",
                source=str(path),
            )
    cfg = parse_config(data, source=source)
    cfg._base_dir = path.resolve().parent
    return cfg


def parse_config(data: Any, *, source: str = "config") -> Config:
    """Validate a config mapping (see the module doc).

    Raises:
        ConfigError: naming ``source`` and the key path of every problem.
    """
    if data is None:
        raise ConfigError("the config is empty", source=source)
    if not isinstance(data, Mapping):
        raise ConfigError(f"the config must be a table/mapping, got {type(data).__name__}", source=source)
    _check_depth(data, source)
    try:
        cfg = Config.model_validate(dict(data), strict=True)
    except ValidationError as exc:
        yaml = is_yaml_source(source)
        lines = [
            f"  {path}: {msg} (given: {_short(value)}{value_hint(value, source, msg)})"
            for path, msg, value in validation_problems(exc, Config, unknown="key")
        ]
        lines += _entry_spelling_hints(data.get("pipeline"), yaml)
        raise ConfigError("invalid config:\n" + "\n".join(lines), source=source) from None
    cfg._source = source
    cfg.plugins._source = source
    return cfg


#: lists and tables nested deeper than this in a config are an error: a pipeline string's
#: values nest up to 100 deep (:mod:`fxpasses.spec`), inside a few tables of the config (a
#: reproducer's ``pipeline`` entries); pydantic's JSON reading stops at 200 levels of its own
_MAX_DEPTH = 200


def _check_depth(data: Any, source: str) -> None:
    """Refuse config data nested more than :data:`_MAX_DEPTH` lists or tables deep, before
    anything walks it recursively. A TOML file's table header (``[a.a.a. ... .a]``) nests
    thousands deep without the parser recursing (a JSON or YAML file that deep fails in its
    parser), and Python's ``repr`` of it in an error message, pydantic's reading of an option
    and the like then raised ``RecursionError``, an internal error (an adversarial check).

    Raises:
        ConfigError: naming ``source`` and the key path where the nesting goes too deep.
    """
    path = _too_deep(data)
    if path is not None:
        shown = _shown_path(path)
        raise ConfigError(
            f"values nested too deep: more than {_MAX_DEPTH} tables or lists, at {shown}; no config value "
            "needs more than a few levels",
            source=source,
        )


class _NestedTooDeep:
    """The given value of a problem with a value nested too deep: its ``repr`` is short (the
    value's own would raise ``RecursionError``)."""

    def __repr__(self) -> str:
        return f"<nested more than {_MAX_DEPTH} deep>"


def _check_options_depth(pass_name: str, options: Mapping[str, Any], source: str | None) -> None:
    """Refuse options given from Python nested more than :data:`_MAX_DEPTH` lists or dicts
    deep, as a config file's are (:func:`_check_depth`): copying, printing and validating such
    a value raised ``RecursionError`` inside the run, or as the pipeline was built.

    Raises:
        OptionsError: naming the pass and the option's path down to where it goes too deep.
    """
    path = _too_deep(options)
    if path is not None:
        shown = _shown_path(path)
        message = f"nested more than {_MAX_DEPTH} lists or dicts deep; no option value needs more than a few levels"
        raise OptionsError(pass_name, [(shown, message, _NestedTooDeep())], source=source)


def _shown_path(path: tuple[Any, ...]) -> str:
    """The first keys of ``path`` (from :func:`_too_deep`), dotted, ``...`` for the rest."""
    return ".".join(str(k) for k in path[:6]) + (" ..." if len(path) > 6 else "")


def _too_deep(data: Any) -> tuple[Any, ...] | None:
    """The keys (and list indices) down to a list or table of ``data`` nested more than
    :data:`_MAX_DEPTH` deep, or None. Iterative (it is what keeps the recursive walks from such
    data); a container reached again (a YAML alias, ``*anchor``) is looked into again only from
    deeper than before, and one that holds itself counts as nested too deep."""
    deepest: dict[int, int] = {}  # id of a container -> the deepest level it was looked into at
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(data, 1, ())]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, Mapping):
            items: Any = value.items()
        elif isinstance(value, (list, tuple, set, frozenset)):
            items = enumerate(value)
        else:
            continue
        if depth > _MAX_DEPTH:
            return path
        if deepest.get(id(value), 0) >= depth:
            continue
        deepest[id(value)] = depth
        stack.extend((v, depth + 1, (*path, k)) for k, v in items)
    return None


def pass_name_as_key(entry: Any) -> str | None:
    """The pass name of a pipeline entry spelled ``{pass_name: {options}}`` (a spelling some
    tools use; fxpasses' is ``{name = ..., options = {...}}``), else None."""
    if not isinstance(entry, Mapping) or len(entry) != 1:
        return None
    ((key, value),) = entry.items()
    if isinstance(key, str) and key not in PassEntryConfig.model_fields and (value is None or isinstance(value, Mapping)):
        return key
    return None


def _entry_spelling_hints(pipeline: Any, yaml: bool) -> list[str]:
    """For pipeline entries spelled ``{pass_name: {options}}``, how to write them."""
    out: list[str] = []
    for i, e in enumerate(pipeline if isinstance(pipeline, list) else ()):
        key = pass_name_as_key(e)
        if key is not None:
            form = f"{{name: {key}, options: {{...}}}}" if yaml else f"{{name = {key!r}, options = {{...}}}}"
            out.append(f"  pipeline.{i}: for pass {key!r} with options write {form}")
    return out


def _short(value: Any) -> str:
    r = repr(value)
    return r if len(r) <= 60 else r[:57] + "..."


#: the project's own config file, found as ``pyproject.toml`` is (it comes first in its folder)
PROJECT_CONFIG = "fxpasses.toml"


def find_project_config(start: str | Path | None = None) -> Path | None:
    """The nearest project config from ``start`` (default: the working directory) upwards: in
    each folder, a ``fxpasses.toml`` (the whole file is the config), else a ``pyproject.toml``
    with a ``[tool.fxpasses]`` table; None when no folder up to the root has one. Where a
    folder has both, ``fxpasses.toml`` is read and a :class:`ConfigWarning` says the table is
    not (as ruff's ``ruff.toml`` comes before ``pyproject.toml``); a ``fxpasses.toml`` was not
    looked for at all, so one in the working directory was ignored without a word (a new-user
    check).

    A ``pyproject.toml`` that is not valid TOML and does not mention ``fxpasses`` anywhere
    cannot hold the table: it is skipped with a :class:`ConfigWarning` (another project's
    broken file made every ``torch.compile`` with the fxpasses backend fail below it, even
    with a pipeline given in code: a new-user check).

    Raises:
        ConfigError: a ``pyproject.toml`` on the way up that mentions ``fxpasses`` cannot be
            parsed, or one cannot be read (it is not skipped: it may hold the table meant); a
            ``fxpasses.toml`` that is not a file (a directory, a broken link).
    """
    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        own = d / PROJECT_CONFIG
        candidate = d / "pyproject.toml"
        if not own.is_file() and (own.exists() or own.is_symlink()):  # never passed over in silence
            what = "a directory" if own.is_dir() else "a link to nothing" if own.is_symlink() and not own.exists() else "not a file"
            raise ConfigError(f"{own} is {what}: the project config must be a TOML file")
        if own.is_file():
            if candidate.is_file():
                with contextlib.suppress(OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                    if "fxpasses" in (tomllib.loads(candidate.read_text(encoding="utf-8")).get("tool") or {}):
                        warn(f"{candidate}'s [tool.fxpasses] table is not read: {own} beside it comes first", ConfigWarning)
            return own
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8")
                data = tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                if "fxpasses" not in text:
                    warn(f"{candidate} is not valid TOML ({exc}) and does not mention fxpasses: skipped", ConfigWarning)
                    continue
                # it may well hold the [tool.fxpasses] table meant here: never skip it silently
                raise ConfigError(f"invalid TOML: {_toml_problem(exc, text)}", source=str(candidate)) from None
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"cannot read {candidate}: {exc}") from None
            tool = data.get("tool") or {}
            if "fxpasses" in tool:
                return candidate
            near = _near_tool_table(tool)
            if near is not None:
                warn(
                    f"{candidate} has a [tool.{near}] table, which is not read: did you mean [tool.fxpasses]? "
                    "(looking further up for [tool.fxpasses])",
                    ConfigWarning,
                )
    return None


def _near_tool_table(tool: Any) -> str | None:
    """A ``[tool.X]`` key that is probably a misspelt ``fxpasses`` (``fxpass``, ``fx-passes``,
    ``FXPasses``), else None."""
    if not isinstance(tool, dict):
        return None
    keys = [k for k in tool if isinstance(k, str) and k != "fxpasses"]
    by_lower = {k.lower().replace("-", "").replace("_", ""): k for k in keys}
    if "fxpasses" in by_lower:
        return by_lower["fxpasses"]
    close = difflib.get_close_matches("fxpasses", keys, n=1, cutoff=0.75)
    return close[0] if close else None
