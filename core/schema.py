"""JSON Schema of the config, for editors (``fxpasses schema``).

The schema is the :class:`~fxpasses.config.Config` model's, with each pass's own ``Options``
schema selected by pass name: in ``[options.NAME]`` tables, in ``{name = ..., options = ...}``
pipeline entries (one ``oneOf`` branch per pass, told apart by ``name``), and a pattern for
pipeline strings that admits only registered pass names.

A pass's options schema is pydantic's, with what the loader
(:func:`fxpasses.config.validate_options`) reads besides written in: unknown keys are refused
at the top level whatever the model's ``extra`` setting, and in the table of a nested plain
``BaseModel`` (``extra="ignore"``) wherever the loader looks for them (a field's model, through
lists, tuples, sets, dicts and unions of one model; not inside a union of several models, where
such a model's definition is copied as ``NAME-unchecked``); an aliased field is taken by its
name where the model takes names; and a float option, at any depth, also takes the strings
``"inf"``, ``"-inf"`` and ``"nan"`` (how fxpasses' JSON writes non-finite floats) where its
type and constraints take that value. The ``preset`` enum holds the presets that can be used
(:meth:`~fxpasses.registry.Registry.preset_problems`); its description names the others and
why.
"""

from __future__ import annotations

import collections.abc
import copy
import re
import sys
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema

from .config import _FLOAT_MAX, _INT_RANGES, _NON_FINITE, Config, _field_by_key, _union_members, _unwrap, int_bounds
from .errors import PluginWarning, exception_text, warn
from .passes import PassOptions
from .registry import Registry

__all__ = ["config_schema"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class _LooseSchema(GenerateJsonSchema):
    """pydantic's schema generator, but a field whose type has no JSON Schema (an option typed
    ``torch.dtype`` under ``arbitrary_types_allowed``) is left unconstrained (``{}``) and
    recorded in :attr:`loose` instead of raising ``PydanticInvalidForJsonSchema`` (the hook
    pydantic documents for this: ``handle_invalid_for_json_schema``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loose: list[str] = []
        #: the models whose schemas were made, by the index each one's schema holds under
        #: :data:`_MODEL` (the definitions do not say which class they are)
        self.models: list[type[BaseModel]] = []

    def model_schema(self, schema: Any) -> dict[str, Any]:
        json_schema = super().model_schema(schema)
        self.models.append(schema["cls"])
        json_schema[_MODEL] = len(self.models) - 1
        return json_schema

    def handle_invalid_for_json_schema(self, schema: Any, error_info: str) -> dict[str, Any]:
        self.loose.append(error_info)
        return {}

    def encode_default(self, dft: Any) -> Any:
        """pydantic's encoding of a default, but one holding a non-finite float (``[inf,
        nan]``, which pydantic writes as ``[null, null]`` inside a list or dict) spelled as
        everywhere else in fxpasses' JSON: ``"inf"``, ``"-inf"``, ``"nan"``."""
        from pydantic_core import to_jsonable_python

        from ._json import finite

        try:
            raw = to_jsonable_python(dft, inf_nan_mode="constants")
        except Exception:  # noqa: BLE001 - pydantic's own encoding says what is wrong
            return super().encode_default(dft)
        spelled = finite(raw)
        return super().encode_default(dft) if spelled == raw else spelled


def _options_json_schema(name: str, options_cls: Any, source: str) -> dict[str, Any]:
    """``options_cls``'s JSON Schema; a field type with none is left unconstrained, and a pass
    whose options have no schema at all gets ``{"type": "object"}``, each with a
    :class:`~fxpasses.errors.PluginWarning` naming the pass and its distribution (one
    plugin's option type must not take the schema away from every other pass)."""
    where = f"pass {name!r} ({source})"
    generator: list[_LooseSchema] = []

    def make(*args: Any, **kwargs: Any) -> _LooseSchema:
        g = _LooseSchema(*args, **kwargs)
        generator.append(g)
        return g

    try:
        schema = options_cls.model_json_schema(schema_generator=make)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - a plugin's model: any error is its own
        warn(
            f"{where}: its options have no JSON Schema ({exception_text(exc)}); the schema accepts any "
            f"table for them",
            PluginWarning,
        )
        return {"type": "object", "description": f"options of {name} (no JSON Schema: {type(exc).__name__})"}
    loose = [e for g in generator for e in g.loose]
    if loose:
        warn(
            f"{where}: option type(s) without a JSON Schema left unchecked in the schema: {'; '.join(loose)}",
            PluginWarning,
        )
    return _as_the_loader_reads(schema, options_cls, [m for g in generator for m in g.models])


#: the key under which :class:`_LooseSchema` marks each model's schema with its class's index
#: (removed again by :func:`_as_the_loader_reads`)
_MODEL = "x-fxpasses-model"

#: the keys of a schema that describe it rather than constrain it (kept outside where a schema
#: is wrapped in an ``anyOf``)
_ANNOTATIONS = ("title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment")


def _as_the_loader_reads(schema: dict[str, Any], options_cls: Any, models: list[type[BaseModel]]) -> dict[str, Any]:
    """pydantic's schema of ``options_cls`` (made by :class:`_LooseSchema`, which marked each
    model's schema with the index of its class in ``models``), with what
    :func:`fxpasses.config.validate_options` reads besides pydantic written in (see the module
    doc): non-finite floats as strings (:func:`_non_finite_floats`), aliased fields by name, no
    unknown key at the top level, and none in the table of a nested model where the loader
    refuses them (:class:`_Checked`)."""
    defs: dict[str, Any] = schema.pop("$defs", {})
    classes = {k: models[d.pop(_MODEL)] for k, d in defs.items() if isinstance(d.get(_MODEL), int)}
    schema.pop(_MODEL, None)
    if "$ref" in schema and "properties" not in schema:  # a model holding itself: pydantic refers to its definition
        key = schema.pop("$ref").rsplit("/", 1)[-1]
        schema = {**copy.deepcopy(defs.get(key, {})), **schema}
    for key, d in defs.items():
        if key in classes:
            _model_fields_as_read(d, classes[key])
    _model_fields_as_read(schema, options_cls)
    # unknown keys are refused at the top level whatever ``extra`` says (validate_options)
    schema["additionalProperties"] = False
    _not_given_twice(schema, options_cls)
    checked = _Checked(defs, classes)
    props = schema.get("properties", {})
    for fname, info in options_cls.model_fields.items():
        node = props.get(info.alias or fname)
        if node is not None:
            checked.position(info.annotation, node)
    defs = checked.named(schema)
    if defs:
        schema["$defs"] = defs
    return _unmarked(schema)


def _unmarked(node: Any) -> Any:
    """``node`` without :data:`_MODEL` keys (one left where pydantic wrote a model's schema
    in place rather than as a definition), in place."""
    if isinstance(node, dict):
        node.pop(_MODEL, None)
        for v in node.values():
            _unmarked(v)
    elif isinstance(node, list):
        for v in node:
            _unmarked(v)
    return node


def _model_fields_as_read(node: dict[str, Any], cls: type[BaseModel]) -> None:
    """In the schema ``node`` of the model ``cls``: its float fields' non-finite strings
    (:func:`_non_finite_floats`), and each aliased field by its name too where ``cls`` takes
    names (``validate_by_name``; pydantic's schema has the alias alone)."""
    props = node.get("properties")
    if not isinstance(props, dict):
        return
    for fname, info in cls.model_fields.items():
        field_node = props.get(info.alias or fname)
        if isinstance(field_node, dict):
            ann = typing.Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
            _non_finite_floats(ann, field_node, cls.model_config)
    for key, fname in _field_by_key(cls).items():
        alias = cls.model_fields[fname].alias
        if key == fname and alias and alias in props and fname not in props:
            props[fname] = props[alias]


def _not_given_twice(node: dict[str, Any], cls: type[BaseModel]) -> None:
    """Refuse a table of ``cls`` that gives a field by both its name and its alias (the loader
    says "given twice"), in the schema ``node`` of ``cls``."""
    both = [
        {"required": [cls.model_fields[fname].alias, fname]}
        for key, fname in _field_by_key(cls).items()
        if key == fname and cls.model_fields[fname].alias in _field_by_key(cls)
    ]
    if both:
        node["not"] = {"anyOf": both}


def _non_finite_floats(ann: Any, node: dict[str, Any], config: Any) -> None:
    """Let each place of ``node`` (the schema of a value of type ``ann`` in a model with
    ``config``) where a float is expected also take the strings of :data:`~fxpasses.config._NON_FINITE`
    (``"inf"``, ``"-inf"``, ``"nan"``: how fxpasses' JSON, and so a reproducer, writes floats
    that are not finite) that its type and constraints take as that float (read by pydantic:
    ``ge=0`` takes ``"inf"`` alone, ``allow_inf_nan=False`` none). Through ``Optional``,
    unions, lists, tuples, sets and dicts; a model's fields are its own schema's."""
    base = _unwrap(ann)
    if isinstance(base, type) and issubclass(base, BaseModel):
        return
    members = _union_members(base) or [base]
    if any(_unwrap(m) is float for m in members):
        texts = _non_finite_texts(ann, config)
        if texts:
            inner = {k: v for k, v in node.items() if k not in _ANNOTATIONS}
            outer = {k: v for k, v in node.items() if k in _ANNOTATIONS}
            node.clear()
            node.update(outer)
            node["anyOf"] = [inner, {"enum": texts, "description": "a float that is not finite, written as text"}]
            node = inner
    for member in members:
        for item_ann, item_node in _element_schemas(_unwrap(member), node):
            if isinstance(item_node, dict):
                _non_finite_floats(item_ann, item_node, config)


def _element_schemas(ann: Any, node: Any) -> list[tuple[Any, Any]]:
    """``(type, schema)`` of each kind of element a container type ``ann`` holds, with the
    part of ``node`` (its schema) that describes it: a list's, set's or ``tuple[X, ...]``'s
    items, each position of a fixed tuple, a dict's values; [] for other types, or where
    ``node`` has no single branch of the container's shape (:func:`_shaped`)."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin in (list, set, frozenset, tuple) and args:
        array = _shaped(node, "array")
        if array is None:
            return []
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return list(zip(args, array.get("prefixItems", ())))
        return [(args[0], array.get("items"))]
    if origin in (dict, collections.abc.Mapping) and len(args) == 2:
        table = _shaped(node, "object")
        return [] if table is None else [(args[1], table.get("additionalProperties"))]
    return []


def _non_finite_texts(ann: Any, config: Any) -> list[str]:
    """The strings of :data:`~fxpasses.config._NON_FINITE` that a value of type ``ann`` (in a
    model with ``config``) takes as a float, as the loader reads one: the float the string
    stands for, validated by pydantic with the field's type and constraints."""
    try:
        finite_only = ConfigDict(allow_inf_nan=False) if config.get("allow_inf_nan") is False else None
        adapter: TypeAdapter[Any] = TypeAdapter(ann, config=finite_only)
    except Exception:  # noqa: BLE001 - a type pydantic cannot read on its own: left as it is
        return []
    texts = []
    for text in ("inf", "-inf", "nan"):
        try:
            value = adapter.validate_python(_NON_FINITE[text], strict=bool(config.get("strict")))
        except Exception:  # noqa: BLE001 - not taken (a ValidationError, or a validator's own error)
            continue
        if isinstance(value, float):
            texts.append(text)
    return texts


def _shaped(node: Any, kind: str) -> dict[str, Any] | None:
    """``node`` if it is a schema of ``type`` ``kind``, else its one branch of that type (an
    ``Optional`` list is ``anyOf: [array, null]``); None when there is none, or several."""
    if not isinstance(node, dict):
        return None
    if node.get("type") == kind:
        return node
    branches = [b for b in (*node.get("anyOf", ()), *node.get("oneOf", ())) if isinstance(b, dict) and b.get("type") == kind]
    return branches[0] if len(branches) == 1 else None


class _Checked:
    """The definitions of the nested models of an options schema, with a copy of each model's
    as the loader checks a table given for it (:func:`fxpasses.config._nested_unknown`): no
    unknown key where the model ignores them (a plain ``BaseModel``), no field by both its name
    and its alias, and the same rules for the models its fields hold. pydantic's own definition
    (unknown keys taken) stays for the places the loader does not look into: a union of several
    models, or what a union of one model holds besides that model."""

    def __init__(self, defs: dict[str, Any], classes: dict[str, type[BaseModel]]) -> None:
        self.defs = defs
        self.classes = classes
        self.copies: dict[str, str] = {}  # a definition's key -> its checked copy's (for now)

    def position(self, ann: Any, node: Any) -> None:
        """Point the model references of ``node`` (the schema of a value of type ``ann``) that
        the loader checks at the checked copies (mirrors ``_nested_unknown``)."""
        if not isinstance(node, dict):
            return
        ann = _unwrap(ann)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            self._refer(node, ann)
            return
        members = _union_members(ann)
        if members is not None:
            models = [m for m in map(_unwrap, members) if isinstance(m, type) and issubclass(m, BaseModel)]
            if len(models) == 1:
                self._refer(node, models[0])
            return
        for item_ann, item_node in _element_schemas(ann, node):
            self.position(item_ann, item_node)

    def _refer(self, node: dict[str, Any], cls: type[BaseModel]) -> None:
        """Point ``node``'s reference to ``cls``'s definition (``node``'s own, or one of its
        ``anyOf``/``oneOf``/``allOf`` branches) at its checked copy."""
        for branch in (node, *node.get("anyOf", ()), *node.get("oneOf", ()), *node.get("allOf", ())):
            ref = branch.get("$ref") if isinstance(branch, dict) else None
            if isinstance(ref, str) and self.classes.get(ref.rsplit("/", 1)[-1]) is cls:
                branch["$ref"] = "#/$defs/" + self._copy(ref.rsplit("/", 1)[-1])
                return

    def _copy(self, key: str) -> str:
        if key in self.copies:
            return self.copies[key]
        cls = self.classes[key]
        self.copies[key] = checked = f"{key}\x00checked"
        d = self.defs[checked] = copy.deepcopy(self.defs[key])
        if cls.model_config.get("extra") not in ("allow", "forbid"):  # (forbid: pydantic's schema says so)
            d["additionalProperties"] = False
        _not_given_twice(d, cls)
        props = d.get("properties", {})
        for fname, info in cls.model_fields.items():
            if (info.alias or fname) in props:
                self.position(info.annotation, props[info.alias or fname])
        return checked

    def named(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The definitions ``schema`` refers to, named: a checked copy that differs from its
        model's own definition takes the model's name (``NAME``), and the definition, where
        still referred to, ``NAME-unchecked``; a copy that does not differ is the definition.
        ``schema``'s references are renamed alike."""
        same = set(self.copies)
        changed = True
        while changed:  # the copies that are their definitions, once the copies they refer to are
            mapping = {f"#/$defs/{self.copies[k]}": f"#/$defs/{k}" for k in same}
            changed = False
            for k in list(same):
                if _rewritten(self.defs[self.copies[k]], mapping) != _rewritten(self.defs[k], mapping):
                    same.discard(k)
                    changed = True
        rename = {f"#/$defs/{self.copies[k]}": f"#/$defs/{k}" for k in same}
        both = set(self.copies) - same
        for k in both:
            rename[f"#/$defs/{k}"] = f"#/$defs/{k}-unchecked"
            rename[f"#/$defs/{self.copies[k]}"] = f"#/$defs/{k}"
        out: dict[str, Any] = {}
        for key in _referred(schema, self.defs):
            new = rename.get(f"#/$defs/{key}", f"#/$defs/{key}").rsplit("/", 1)[-1]
            if new in out:  # (a copy that is its definition: one of the two)
                continue
            d = _renamed_refs(self.defs[key], rename)
            if new.endswith("-unchecked"):
                d["$comment"] = (
                    f"{new[: -len('-unchecked')]} where the loader does not look for unknown keys (a member of a union "
                    "of several models, or inside one)"
                )
            out[new] = d
        renamed = _renamed_refs(schema, rename)
        schema.clear()
        schema.update(renamed)
        return out


def _referred(schema: Any, defs: dict[str, Any]) -> list[str]:
    """The keys of ``defs`` that ``schema`` refers to, directly or through other definitions,
    in the order found."""
    found: dict[str, None] = {}
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                key = ref[len("#/$defs/"):]
                if key in defs and key not in found:
                    found[key] = None
                    stack.append(defs[key])
            stack.extend(v for k, v in node.items() if k != "$ref")
        elif isinstance(node, list):
            stack.extend(node)
    return list(found)


def _renamed_refs(node: Any, rename: dict[str, str]) -> Any:
    """``node`` with each ``$ref`` found in ``rename`` replaced (a copy; everything else kept)."""
    if isinstance(node, dict):
        return {k: (rename.get(v, v) if k == "$ref" else _renamed_refs(v, rename)) for k, v in node.items()}
    if isinstance(node, list):
        return [_renamed_refs(v, rename) for v in node]
    return node


def _pass_options_schema(name: str, options_cls: Any, defs: dict[str, Any], source: str = "") -> dict[str, Any]:
    schema = copy.deepcopy(_options_json_schema(name, options_cls, source))
    local = schema.pop("$defs", {})
    prefix = f"{name}__"
    text_refs = {f"#/$defs/{k}": f"#/$defs/{prefix}{k}" for k in local}
    for k, v in local.items():
        defs[prefix + k] = _rewritten(v, text_refs)
    # a set option reads a list with repeated items (as a set, once each): no uniqueItems
    schema = _rewritten(schema, text_refs)
    # an entry's options and the [options.NAME] table are merged before they are validated, so
    # either may give a required option: neither alone requires it (check says what is missing)
    required = schema.pop("required", None)
    if required:
        note = f"required, from the entry or the [options.{name}] table: {', '.join(required)}"
        schema["description"] = f"{schema['description']} ({note})" if schema.get("description") else note
    schema["title"] = f"options of {name}"
    if options_cls is PassOptions:  # the base class's docstring is about writing options
        schema["description"] = f"{name} takes no options"
    return schema


def _rewritten(node: Any, text_refs: dict[str, str]) -> Any:
    """``node`` (JSON schema) with each ``$ref`` found in ``text_refs`` replaced by its value,
    and without ``uniqueItems`` (which pydantic gives set types; a module function, not a
    recursive closure: that would be a reference cycle)."""
    if isinstance(node, dict):
        return {
            k: (text_refs.get(v, v) if k == "$ref" else _rewritten(v, text_refs)) for k, v in node.items() if k != "uniqueItems"
        }
    if isinstance(node, list):
        return [_rewritten(v, text_refs) for v in node]
    return node


#: how deep the schema's pattern of a pipeline string follows tables nested in options
_TABLE_DEPTH = 4


def _pipeline_string_pattern(names: list[str]) -> str:
    """A pipeline string of the passes ``names`` (:mod:`fxpasses.spec`): each entry a known
    name, its options in braces (quoted values may hold braces and quotes of the other kind;
    tables nested in them up to :data:`_TABLE_DEPTH` + 1 braces deep: a regular expression
    cannot count deeper ones, which the parser reads)
    and its settings in brackets (``[verify=numeric,on_error=skip,atol=1e-3]``). Option names and values
    are left to the per-pass schemas of list entries; ``fxpasses check`` reads the string.
    Fixpoint groups, ``fixpoint{max_iterations=N}(entry,...)``, hold such entries."""
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) or "(?!)"
    quoted = r"'(?:[^'\\]|\\.)*'" + "|" + r'"(?:[^"\\]|\\.)*"'
    # options hold tables ({tiling={size=8}}, [{x=1}]): braces nested up to _TABLE_DEPTH deep
    # (a regular expression cannot count them; the parser takes any depth)
    options = r"\{(?:" + quoted + r"""|[^{}'"])*\}"""
    for _ in range(_TABLE_DEPTH):
        options = r"\{(?:" + quoted + "|" + options + r"""|[^{}'"])*\}"""
    word = r"(?:none|lint|numeric|rollback|raise|skip)"  # a setting's value (verify's or on_error's)
    value = rf"""(?:{word}|'{word}'|"{word}")"""  # bare or quoted
    # a tolerance: a number >= 0 as the pipeline string reads one (``1e-3``, ``.5``, ``2``,
    # ``1_000``; no leading zero, as in Python); inf and nan refused
    # (a positive exponent up to 307: 1e400 is inf, which the parser refuses)
    exponent = r"(?:[eE](?:-[0-9]+|\+?0*(?:[0-9]{1,2}|[12][0-9]{2}|30[0-7])))"
    number = (
        r"(?:\+?(?:(?:0|[1-9](?:_?[0-9])*)(?:\.[0-9]*)?|\.[0-9]+)" + exponent + r"?|-(?:0(?:\.0*)?|\.0+)"
        + r"(?:[eE][+-]?[0-9]+)?)"
    )
    setting = r"(?:(?:verify|on_error)\s*=\s*" + value + r"|[ar]tol\s*=\s*" + number + ")"
    # each setting once (the parser refuses one given twice)
    once = "".join(rf"(?![^\]]*\b{k}\s*=[^\]]*\b{k}\s*=)" for k in ("verify", "on_error", "atol", "rtol"))
    settings = r"\[" + once + r"\s*" + setting + r"\s*(?:,\s*" + setting + r"\s*)*\]"
    entry = rf"\s*(?:{alt})\s*(?:{options})?\s*(?:{settings})?\s*"
    # a fixpoint group: fixpoint{max_iterations=N}(entry,...) (groups do not nest)
    n = r"\+?(?:1(?:_?0){3}|[1-9](?:_?[0-9]){0,2})"  # max_iterations: 1 to 1000 (+5, 1_000 too, as the parser reads ints)
    group = rf"\s*fixpoint\s*(?:\{{\s*(?:max_iterations\s*=\s*{n}\s*)?\}})?\s*\((?:{entry})(?:,{entry})*\)\s*"
    item = f"(?:{group}|{entry})"
    # white space is the parser's, ASCII's (JSON Schema's \s, ECMA's, also takes U+00A0 and others)
    return rf"^{item}(?:,{item})*$".replace(r"\s", r"[ \t\r\n]")


def _cross_field_rules(schema: dict[str, Any]) -> None:
    """What the config models check across fields (pydantic validators, which leave no trace
    in the generated schema), written as JSON Schema, so that the schema refuses what
    ``fxpasses check`` refuses where JSON Schema can say it: ``pipeline`` and ``preset``
    together; a model with none or several of ``factory``/``graph``/``program``, without
    ``inputs`` (only a ``program`` brings its own), with ``kwargs`` but no factory, or a
    ``program`` with ``train = true`` or another capture than export; an infinite
    ``atol``/``rtol``; bounds on a bool input, fractional bounds on an integer one; a
    positional input named with a leading zero (``"01"``); a blank plugin name."""
    defs = schema["$defs"]
    given = {"not": {"type": "null"}}  # (null is "not given", as check reads it)
    schema["not"] = {"required": ["pipeline", "preset"], "properties": {"pipeline": given, "preset": given}}
    for key in ("atol", "rtol"):  # finite (allow_inf_nan=False): a TOML or YAML inf is a number too
        schema["properties"][key]["maximum"] = sys.float_info.max
    model = defs["ModelConfig"]
    model["oneOf"] = [{"required": [k], "properties": {k: given}} for k in ("factory", "graph", "program")]
    program = {"required": ["program"], "properties": {"program": given}}
    model["allOf"] = [
        # inputs, unless a saved program brings its own
        {"if": {"not": program}, "then": {"required": ["inputs"], "properties": {"inputs": given}}},
        # kwargs are a factory's
        {
            "if": {"not": {"required": ["factory"], "properties": {"factory": given}}},
            "then": {"properties": {"kwargs": {"type": "object", "maxProperties": 0}}},
        },
        # a saved program is used as it is: exported, in the mode export fixed
        {"if": program, "then": {"properties": {"train": {"const": False}, "capture": {"const": "export"}}}},
    ]
    spec = defs["InputSpec"]

    def bounds(dtype: str, kind: str, low: dict[str, Any], high: dict[str, Any]) -> dict[str, Any]:
        when: dict[str, Any] = {"properties": {"dtype": {"const": dtype}}}
        if dtype != "float32":  # float32 is the default dtype: no dtype key is float32
            when["required"] = ["dtype"]
        return {"if": when, "then": {"properties": {"low": {"type": [kind, "null"], **low}, "high": {"type": [kind, "null"], **high}}}}

    spec["allOf"] = [
        {
            "if": {"required": ["dtype"], "properties": {"dtype": {"const": "bool"}}},
            "then": {"properties": {"low": {"type": "null"}, "high": {"type": "null"}}},
        },
        # what each dtype holds ([low, high) and torch.randint's int64 high; empty ranges,
        # a comparison of two fields, are check's alone)
        *(
            bounds(d, "integer", {"minimum": lo, "maximum": hi - 1}, {"minimum": lo + 1, "maximum": hi})
            for d, (lo, hi) in ((d, int_bounds(d)) for d in _INT_RANGES)
        ),
        *(bounds(d, "number", {"minimum": -m, "maximum": m}, {"minimum": -m, "maximum": m}) for d, m in _FLOAT_MAX.items()),
    ]
    for branch in model["properties"]["inputs"]["anyOf"][0]["anyOf"]:
        if branch.get("type") == "object":  # positional inputs 0, 1, ...; any other name a keyword
            branch["propertyNames"] = {"pattern": r"^(0|[1-9][0-9]*|(?![0-9]+$).+)$"}
    plugins = defs["PluginsConfig"]["properties"]
    for key in ("enable", "disable"):
        plugins[key]["items"] = {"type": "string", "pattern": r"\S"}


def _preset_property(registry: Registry, schema: dict[str, Any]) -> dict[str, Any]:
    """The schema of ``preset``: the registry's presets that can be used, by the registry's own
    check of a preset (:meth:`~fxpasses.registry.Registry.preset_problems`). A preset whose
    pipeline names a pass that is not there or an option its pass does not have, or whose
    passes cannot be ordered, is left out, its problems said in the description. One whose
    option values alone do not fit (a wrong type, a required option it leaves out) is in, but
    needs those options from the config's ``[options.NAME]`` table, whose values replace the
    preset's: an ``if``/``then`` rule of ``schema`` says so."""
    usable: list[str] = []
    left_out: list[str] = []
    needs: list[str] = []
    for name, info in registry.presets().items():
        problems = registry.preset_problems(name)
        if any(not p.options for p in problems):
            left_out += [f"{info.source}: {' '.join(p.message.split())}" for p in problems]
            continue
        usable.append(name)
        if not problems:
            continue
        wanted: dict[str, list[str]] = {}
        for p in problems:
            wanted.setdefault(p.pass_name, []).extend(p.options)
        then: dict[str, Any] = {}
        for pass_name, options in wanted.items():
            fields = _field_by_key(registry.get(pass_name).Options)
            rules = []
            for option in dict.fromkeys(options):  # each by any key the loader reads it by
                keys = [k for k, f in fields.items() if f == fields.get(option, option)] or [option]
                rules.append({"required": keys} if len(keys) == 1 else {"anyOf": [{"required": [k]} for k in keys]})
            then[pass_name] = {"allOf": rules}
            needs.append(
                f"{name!r} needs [options.{pass_name}] {', '.join(dict.fromkeys(options))} (the preset's own values are "
                "left out or do not fit)"
            )
        schema.setdefault("allOf", []).append(
            {
                "if": {"required": ["preset"], "properties": {"preset": {"const": name}}},
                "then": {"required": ["options"], "properties": {"options": {"required": list(then), "properties": then}}},
            }
        )
    description = "a named pipeline instead of `pipeline`"
    if needs:
        description += "; " + "; ".join(needs)
    if left_out:
        description += "; left out, as they cannot be used: " + "; ".join(left_out)
    return {"description": description, "enum": [*usable, None]}


def config_schema(registry: Registry) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a config, with per-pass options by name."""
    schema = Config.model_json_schema()
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    _cross_field_rules(schema)
    names = []
    option_schemas: dict[str, dict[str, Any]] = {}
    for name in registry.names():
        try:
            cls = registry.get(name)
        except Exception:  # a name two plugins register: leave it out
            continue
        names.append(name)
        key = f"options_{name}"
        defs[key] = _pass_options_schema(name, cls.Options, defs, registry.info(name).source)
        option_schemas[name] = {"$ref": f"#/$defs/{key}"}

    entry_branches = [
        {
            "type": "object",
            "properties": {
                "name": {"const": n},
                "options": option_schemas[n],
                # (null: the pipeline's own setting, as a config's list entry takes it)
                "verify": {"enum": ["none", "lint", "numeric", None]},
                "on_error": {"enum": ["rollback", "raise", "skip", None]},
                # the entry's own tolerances of numeric verification (finite, >= 0)
                "atol": {"type": ["number", "null"], "minimum": 0, "maximum": sys.float_info.max},
                "rtol": {"type": ["number", "null"], "minimum": 0, "maximum": sys.float_info.max},
            },
            "required": ["name"],
            "additionalProperties": False,
        }
        for n in names
    ]
    props = schema["properties"]
    entry = {"anyOf": [{"enum": names}, *entry_branches]}
    group = {  # a fixpoint group of entries (fxpasses.fixpoint)
        "type": "object",
        "properties": {
            "fixpoint": {"type": "array", "minItems": 1, "items": entry},
            "max_iterations": {"type": "integer", "minimum": 1, "maximum": 1000},
        },
        "required": ["fixpoint"],
        "additionalProperties": False,
    }
    props["pipeline"] = {
        "description": "the passes, as a pipeline string or a list of names, {name, options} tables and "
        "{fixpoint = [...], max_iterations} groups",
        "anyOf": [
            {"type": "string", "pattern": _pipeline_string_pattern(names)},
            {"type": "array", "minItems": 1, "items": {"anyOf": [*entry["anyOf"], group]}},
            {"type": "null"},  # (not given, as check reads it)
        ],
    }
    props["preset"] = _preset_property(registry, schema)
    props["options"] = {
        "description": "options by pass name, merged into that pass's pipeline entries",
        "type": "object",
        "properties": option_schemas,
        "additionalProperties": False,
    }
    schema["$schema"] = SCHEMA_DIALECT
    schema["title"] = "fxpasses config"
    return schema
