"""`fxpasses schema`: editors validate configs with it; shipped examples pass, broken ones fail."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from typing import Annotated, Optional, Union

import jsonschema
import pytest
import yaml
from click.testing import CliRunner
from pydantic import BaseModel, ConfigDict, Field

import fxpasses
from fxpasses.cli import cli
from fxpasses.schema import config_schema

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(path: Path):
    if path.name == "pyproject.toml":
        return tomllib.loads(path.read_text())["tool"]["fxpasses"]
    if path.suffix == ".toml":
        return tomllib.loads(path.read_text())
    if path.suffix in (".yaml", ".yml"):
        return yaml.safe_load(path.read_text())
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def validator():
    schema = config_schema(fxpasses.Registry())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


SHIPPED = sorted(
    p for p in EXAMPLES.rglob("*") if p.suffix in (".toml", ".yaml", ".yml", ".json") and "out" not in p.parts
)


def test_there_are_shipped_configs():
    assert len(SHIPPED) >= 5


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_configs_validate(validator, path):
    errors = list(validator.iter_errors(load(path)))
    assert errors == [], [e.message for e in errors]


@pytest.mark.parametrize(
    "config",
    [
        {"pipeline": "count_ops,no_such_pass"},
        {"pipeline": ["count_ops", "no_such_pass"]},
        {"pipeline": [{"name": "count_ops", "options": {"only": "relu"}}]},  # not a list
        {"pipeline": [{"name": "count_ops", "options": {"onl": ["relu"]}}]},  # unknown option
        {"pipeline": "count_ops", "options": {"count_ops": {"onl": []}}},
        {"pipeline": "count_ops", "options": {"no_such_pass": {}}},
        {"pipeline": "count_ops", "verify": "sometimes"},
        {"pipeline": "count_ops", "pipelin": "x"},
        {"pipeline": []},
        {"pipeline": "count_ops", "model": {"factory": "no-colon", "inputs": [{"shape": [1]}]}},
    ],
)
def test_broken_configs_are_rejected(validator, config):
    assert list(validator.iter_errors(config))


@pytest.mark.parametrize(
    "pipeline, valid",
    [
        ("fold_constants{max_numel=4096}[verify=numeric,on_error=skip],eliminate_dead_code", True),  # README's
        ("eliminate_dead_code[on_error=skip]", True),
        ("""remove_dropout[verify="numeric", on_error='skip']""", True),  # quoted setting values
        ('rename_nodes{pattern="a}b",replacement=x}', True),  # a brace inside quotes
        ("rename_nodes{pattern='[a-z]+_1',replacement=x}", True),
        ("remove_dropout , eliminate_dead_code", True),
        ("eliminate_dead_cod", False),
        ("eliminate_dead_code[bogus=1]", False),
        # an entry's own tolerances: numbers as the pipeline string reads them
        ("eliminate_dead_code[atol=1e-3,rtol=0],remove_dropout[rtol=.5,verify=numeric]", True),
        ("eliminate_dead_code[atol=-1]", False),
        ("eliminate_dead_code[atol=017]", False),
        ("eliminate_dead_code[atol=inf]", False),
        ("eliminate_dead_code[atol='1e-3']", False),
        ('rename_nodes{pattern="a}', False),
        ("remove_dropout,,eliminate_dead_code", False),
        # what the parser refuses (an adversarial check): inf written as 1e400, a setting twice
        ("eliminate_dead_code[atol=1e400]", False),
        ("eliminate_dead_code[atol=1e307,rtol=1e-400]", True),
        ("eliminate_dead_code[atol=1e-3,atol=1e-4]", False),
        ("eliminate_dead_code[verify=lint,rtol=0,verify=numeric]", False),
    ],
)
def test_pipeline_strings_the_schema_takes_are_those_check_takes(validator, pipeline, valid):
    """Entry settings in brackets and quoted braces were refused by the schema while
    `fxpasses check` took them (found by a new-user check)."""
    assert (not list(validator.iter_errors({"pipeline": pipeline}))) is valid
    checked = CliRunner().invoke(cli, ["check", "--pipeline", pipeline])
    assert (checked.exit_code == 0) is valid, checked.output


MODEL = {"factory": "fxpasses._example:convnet"}  # (check looks for the module)


@pytest.mark.parametrize(
    "config, valid",
    [
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [-1, 6]}]}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [0, 6]}]}}, True),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": []}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": {}}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": ""}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": {"x": {"shape": [1]}}}}, True),
        ({"pipeline": "remove_dropout", "output": ""}, False),
        ({"pipeline": "remove_dropout", "output": "  "}, False),
        ({"pipeline": "remove_dropout", "output": "out"}, True),
        ({"pipeline": [{"name": "eliminate_dead_code", "verify": None, "on_error": None}]}, True),
        ({"pipeline": [{"name": "eliminate_dead_code", "atol": 1e-3, "rtol": 0}]}, True),
        ({"pipeline": [{"name": "eliminate_dead_code", "atol": -1}]}, False),
        ({"pipeline": [{"name": "eliminate_dead_code", "rtol": "1e-3"}]}, False),
        # cross-field rules (a second new-user check)
        ({"pipeline": "remove_dropout", "preset": "cleanup"}, False),
        ({"preset": "cleanup"}, True),
        ({"pipeline": "remove_dropout", "plugins": {"enable": [""]}}, False),
        ({"pipeline": "remove_dropout", "plugins": {"disable": ["fxpasses-example-passes"]}}, True),
        ({"pipeline": "remove_dropout", "model": {"inputs": [{"shape": [1]}]}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "graph": "g.py", "inputs": [{"shape": [1]}]}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [1], "dtype": "bool", "low": 0}]}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [1], "dtype": "bool"}]}}, True),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [1], "dtype": "int32", "low": 0.5}]}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [1], "dtype": "int32", "low": 2}]}}, True),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [1], "low": 0.5}]}}, True),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": {"01": {"shape": [1]}}}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": {"00": {"shape": [1]}}}}, False),  # was input 0 to check
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": {"": {"shape": [1]}}}}, False),  # was a keyword "" to check
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": {"0": {"shape": [1]}, "mask": {"shape": [1]}}}}, True),
        ({"pipeline": "remove_dropout[verify=foo]"}, False),
        ({"pipeline": "remove_dropout[verify='numeric']"}, True),
        # a third check: null is "not given"; each dtype's bounds
        ({"pipeline": None, "preset": "cleanup"}, True),
        ({"pipeline": "remove_dropout", "preset": None}, True),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "graph": None, "inputs": [{"shape": [1]}]}}, True),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [1], "dtype": "bool", "low": None}]}}, True),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [1], "dtype": "int64", "low": None, "high": 5}]}}, True),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [1], "dtype": "uint8", "low": -5}]}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": {"x": {"shape": [1], "dtype": "uint8", "low": -5}}}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [1], "dtype": "uint8", "low": 0, "high": 256}]}}, True),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [1], "dtype": "int8", "high": 1000}]}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [1], "dtype": "int64", "high": 2**63}]}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [1], "dtype": "int64", "high": 2**63 - 1}]}}, True),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [1], "dtype": "float16", "high": 1e5}]}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [1], "high": 1e39}]}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": [{"shape": [1], "dtype": "float64", "high": 1e39}]}}, True),
        # a fourth check: inputs required but for a program, kwargs a factory's, finite tolerances
        ({"pipeline": "remove_dropout", "model": {**MODEL}}, False),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "inputs": None}}, False),
        ({"pipeline": "remove_dropout", "model": {"graph": "g.py", "kwargs": {"a": 1}, "inputs": [{"shape": [1]}]}}, False),
        ({"pipeline": "remove_dropout", "model": {"graph": "g.py", "kwargs": {}, "inputs": [{"shape": [1]}]}}, True),
        ({"pipeline": "remove_dropout", "model": {**MODEL, "kwargs": {"a": 1}, "inputs": [{"shape": [1]}]}}, True),
        ({"pipeline": "remove_dropout", "atol": float("inf")}, False),
        ({"pipeline": "remove_dropout", "rtol": float("inf")}, False),
        ({"pipeline": "remove_dropout", "atol": 1e300}, True),
        ({"pipeline": "remove_dropout", "model": {"program": "m.pt2"}}, True),
        ({"pipeline": "remove_dropout", "model": {"program": "m.pt2", "train": True}}, False),
        ({"pipeline": "remove_dropout", "model": {"program": "m.pt2", "capture": "dynamo"}}, False),
        ({"pipeline": "remove_dropout", "model": {"program": "m.pt2", "capture": "export"}}, True),
        # a factory's callable is Python names, the whole text (an adversarial check)
        ({"pipeline": "remove_dropout", "model": {"factory": "fxpasses._example:convnet.", "inputs": [{"shape": [1]}]}}, False),
        ({"pipeline": "remove_dropout", "model": {"factory": "fxpasses._example:a..b", "inputs": [{"shape": [1]}]}}, False),
        ({"pipeline": "remove_dropout", "model": {"factory": "fxpasses._example:convnet\n", "inputs": [{"shape": [1]}]}}, False),
        ({"pipeline": "remove_dropout", "model": {"factory": "fxpasses._example:convnet", "inputs": [{"shape": [1]}]}}, True),
    ],
)
def test_the_schema_and_check_agree_on_inputs_output_and_entry_settings(validator, tmp_path, config, valid):
    """Negative sizes, empty inputs and a blank output passed the schema and failed `fxpasses
    check`; a list entry's `verify: null` was the other way round (found by a new-user check
    validating configs against `fxpasses schema`)."""
    assert (not list(validator.iter_errors(config))) is valid
    (tmp_path / "c.json").write_text(json.dumps(config))
    for name in ("g.py", "m.pt2"):  # (check looks for the files [model] names; their content is run's)
        (tmp_path / name).write_text("")
    checked = CliRunner().invoke(cli, ["check", str(tmp_path / "c.json")])
    assert (checked.exit_code == 0) is valid, checked.output


def test_a_pass_without_options_is_described_so(validator):
    """The options of a pass that declares none were described by PassOptions' own docstring
    ("Base class of pass options ...")."""
    class Plain(fxpasses.GraphPass):
        """Declares no options."""

        name = "plain"

        def run(self, gm, ctx):
            return False

    reg = fxpasses.Registry()
    reg.register(Plain)
    schema = config_schema(reg)
    assert schema["$defs"]["options_plain"]["description"] == "plain takes no options"


def test_valid_options_accepted(validator):
    cfg = {"pipeline": [{"name": "count_ops", "options": {"only": ["relu"]}}, "remove_identity"],
           "options": {"count_ops": {"only": []}}}
    assert list(validator.iter_errors(cfg)) == []


def test_cli_schema_is_json():
    r = CliRunner().invoke(cli, ["schema"])
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    assert data["$schema"].endswith("2020-12/schema")
    assert "options_count_ops" in data["$defs"]


def _plugin_with_options(options_cls, name):
    """A plugin object registering one graph pass ``name`` with ``options_cls``."""

    class Opaque(fxpasses.GraphPass):
        """A pass whose options have a type JSON Schema cannot describe."""

        Options = options_cls

        def run(self, gm, ctx):
            return False

    Opaque.name = name

    class Plugin:
        @fxpasses.hookimpl
        def fxpasses_register_passes(self, register):
            register(Opaque)

    return Plugin()


def test_an_option_type_without_json_schema_leaves_that_field_open_and_warns():
    """One plugin's option typed torch.dtype (arbitrary_types_allowed) must not take the schema
    away from everyone: the field is left unconstrained, a PluginWarning names the pass and its
    source, and configs for every other pass are still checked."""
    import torch
    from pydantic import ConfigDict

    class Options(fxpasses.PassOptions):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        dtype: torch.dtype = torch.float32
        scale: float = 1.0

    reg = fxpasses.Registry()
    reg.register_plugin(_plugin_with_options(Options, "opaque_dtype"), name="opaque-plugin")
    with pytest.warns(fxpasses.PluginWarning) as caught:
        schema = config_schema(reg)
    (message,) = [str(w.message) for w in caught if "opaque_dtype" in str(w.message)]
    assert message == (
        "pass 'opaque_dtype' (opaque-plugin): option type(s) without a JSON Schema left unchecked in the "
        "schema: core_schema.IsInstanceSchema (<class 'torch.dtype'>)"
    )
    jsonschema.Draft202012Validator.check_schema(schema)
    props = schema["$defs"]["options_opaque_dtype"]["properties"]
    assert props["scale"] == {
        "default": 1.0,
        "title": "Scale",
        "anyOf": [{"type": "number"}, {"enum": ["inf", "-inf", "nan"], "description": "a float that is not finite, written as text"}],
    }
    assert "type" not in props["dtype"]  # unconstrained
    v = jsonschema.Draft202012Validator(schema)
    assert not list(v.iter_errors({"pipeline": "opaque_dtype", "options": {"opaque_dtype": {"dtype": "x", "scale": 2}}}))
    assert list(v.iter_errors({"pipeline": "opaque_dtype", "options": {"opaque_dtype": {"scale": "big"}}}))
    assert list(v.iter_errors({"pipeline": "count_ops", "options": {"count_ops": {"onl": []}}}))


def test_options_without_any_json_schema_accept_any_table_and_warn():
    class Broken(fxpasses.PassOptions):
        @classmethod
        def model_json_schema(cls, *args, **kwargs):
            raise RuntimeError("no schema here")

    reg = fxpasses.Registry()
    reg.register_plugin(_plugin_with_options(Broken, "opaque_broken"), name="broken-plugin")
    with pytest.warns(fxpasses.PluginWarning) as caught:
        schema = config_schema(reg)
    assert [str(w.message) for w in caught if "opaque_broken" in str(w.message)] == [
        "pass 'opaque_broken' (broken-plugin): its options have no JSON Schema (RuntimeError: no schema here); "
        "the schema accepts any table for them"
    ]
    assert schema["$defs"]["options_opaque_broken"]["type"] == "object"
    jsonschema.Draft202012Validator.check_schema(schema)


DTYPE_PLUGIN = '''
import fxpasses, torch
from pydantic import ConfigDict

class DtypeOptions(fxpasses.PassOptions):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    dtype: torch.dtype = torch.float32

class CastPass(fxpasses.GraphPass):
    """A pass with a torch.dtype option."""
    name = "cast_dtype"
    Options = DtypeOptions
    def run(self, gm, ctx):
        return False

@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register(CastPass)
'''


def test_fxpasses_schema_with_such_a_plugin_installed_prints_the_schema_and_a_warning_line(tmp_path, monkeypatch):
    from dists import installed_dist

    with installed_dist(monkeypatch, tmp_path / "site", "dtype-plugin", "0.2", "fxp_dtype_plugin", DTYPE_PLUGIN):
        r = CliRunner().invoke(cli, ["schema"])
    assert r.exit_code == 0, r.output
    assert (
        "warning: pass 'cast_dtype' (dtype-plugin 0.2): option type(s) without a JSON Schema left unchecked in the "
        "schema: core_schema.IsInstanceSchema (<class 'torch.dtype'>)"
    ) in r.stderr
    schema = json.loads(r.stdout)
    assert "cast_dtype" in schema["properties"]["options"]["properties"]
    assert "remove_dropout" in schema["properties"]["options"]["properties"]


def test_non_finite_defaults_inside_lists_and_dicts_keep_their_values():
    """pydantic writes a non-finite float inside a list or dict default as null (a top-level
    one was "inf"): `[inf, nan]` came out as `[null, null]` (found by a new-user check)."""
    from fxpasses.schema import _options_json_schema

    class Opts(fxpasses.PassOptions):
        top: float = float("inf")
        seq: list[float] = [float("inf"), float("nan")]
        table: dict[str, float] = {"a": float("-inf")}
        plain: list[int] = [1, 2]

    schema = _options_json_schema("p", Opts, "test")
    props = schema["properties"]
    assert props["seq"]["default"] == ["inf", "nan"]
    assert props["table"]["default"] == {"a": "-inf"}
    assert props["plain"]["default"] == [1, 2]
    assert json.loads(json.dumps(schema))["properties"]["seq"]["default"] == ["inf", "nan"]


def test_a_required_option_may_come_from_the_entry_or_the_options_table(tmp_path):
    """The loader merges an entry's options with the `[options.NAME]` table before validating
    them, but the schema required a required option in each: `pipeline = "needs{n=3}"` with an
    empty `[options.needs]`, which `fxpasses check` takes, failed the schema (an adversarial
    check). Neither requires it alone; the description names it."""
    class Needs(fxpasses.GraphPass):
        """Needs n."""

        name = "needs"

        class Options(fxpasses.PassOptions):
            n: int

        def run(self, gm, ctx):
            return False

    reg = fxpasses.Registry(autoload=False)
    reg.register(Needs)
    schema = config_schema(reg)
    v = jsonschema.Draft202012Validator(schema)
    for cfg in (
        {"pipeline": "needs{n=3}", "options": {"needs": {}}},
        {"pipeline": [{"name": "needs", "options": {}}], "options": {"needs": {"n": 3}}},
    ):
        assert list(v.iter_errors(cfg)) == []
        path = tmp_path / "c.json"
        path.write_text(json.dumps(cfg))
        assert fxpasses.Pipeline.from_config(path, registry=reg).plan().steps[0].options.n == 3
    assert "required, from the entry or the [options.needs] table: n" in schema["$defs"]["options_needs"]["description"]
    assert list(v.iter_errors({"pipeline": "needs", "options": {"needs": {"n": "3"}}}))  # (types still checked)


def test_the_schema_takes_an_aliased_option_by_either_name_and_a_set_with_repeats():
    """`fxpasses check` reads an option with an alias by either name, and a list with repeated
    items into a set option; the schema refused both (`uniqueItems`; the alias only): a
    second check."""
    from pydantic import Field

    class Aliased(fxpasses.GraphPass):
        """Aliased and set options."""

        name = "aliased_set"

        class Options(fxpasses.PassOptions):
            from_: int = Field(default=0, alias="from")
            names: set[str] = set()

        def run(self, gm, ctx):
            return False

    reg = fxpasses.Registry(autoload=False)
    reg.register(Aliased)
    v = jsonschema.Draft202012Validator(config_schema(reg))
    for cfg in (
        {"pipeline": [{"name": "aliased_set", "options": {"from_": 1}}]},
        {"pipeline": "aliased_set", "options": {"aliased_set": {"from": 2, "names": ["relu", "relu"]}}},
    ):
        assert list(v.iter_errors(cfg)) == [], cfg
    assert list(v.iter_errors({"pipeline": "aliased_set", "options": {"aliased_set": {"frm": 2}}}))
    # both names in one table: check refuses it, "given twice" (a third check)
    assert list(v.iter_errors({"pipeline": "aliased_set", "options": {"aliased_set": {"from": 2, "from_": 3}}}))
    assert list(v.iter_errors({"pipeline": [{"name": "aliased_set", "options": {"from": 2, "from_": 3}}]}))


class _Tile(fxpasses.PassOptions):
    size: int = 16


class _NestOptions(fxpasses.PassOptions):
    tiling: _Tile = _Tile()
    items: list[_Tile] = []
    deep: dict = {}


@pytest.mark.parametrize(
    "pipeline, valid",
    [
        # tables nested in options: the schema's pattern refused a brace inside an option's
        # braces, which the parser takes (an adversarial check)
        ("nest{tiling={size=8}}", True),
        ("nest{items=[{size=1},{size=2}]}", True),
        ("nest{deep={a={b={c=1}}}}", True),
        ("nest{tiling={size=8}", False),
        # max_iterations written as Python reads ints
        ("fixpoint{max_iterations=1_000}(nest)", True),
        ("fixpoint{max_iterations=+5}(nest)", True),
        ("fixpoint{max_iterations=1_001}(nest)", False),
        # white space is ASCII's: a no-break space is not (ECMA's \s took it)
        ("nest\u00a0", False),
        ("nest ,\tnest", True),
    ],
)
def test_the_schema_pattern_takes_the_pipeline_strings_the_loader_takes(pipeline, valid):
    reg = fxpasses.Registry(autoload=False)
    reg.register(type("Nest", (fxpasses.GraphPass,), {"__doc__": "x", "name": "nest", "Options": _NestOptions, "run": lambda self, gm, ctx: False}))
    v = jsonschema.Draft202012Validator(config_schema(reg))
    assert (not list(v.iter_errors({"pipeline": pipeline}))) is valid
    try:
        fxpasses.Pipeline.from_string(pipeline, registry=reg).plan()
        loaded = True
    except fxpasses.UserError:
        loaded = False
    assert loaded is valid



class _Range(BaseModel):  # a plain model: pydantic ignores unknown keys, the loader refuses them
    lo: float = 0.0
    hi: float = 1.0


class _Other(BaseModel):
    a: int = 0


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    k: int = 0


class _ByName(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    from_: int = Field(0, alias="from")


class _Closed(BaseModel):  # forbids unknown keys, takes a field by its name too
    model_config = ConfigDict(extra="forbid", validate_by_name=True)
    from_: int = Field(0, alias="from")


class _Holder(BaseModel):
    inner: _Range = _Range()
    inners: list[_Range] = []


class _Tree(BaseModel):
    v: int = 0
    kids: list["_Tree"] = []


class _NestedOptions(fxpasses.PassOptions):
    nested: _Range = _Range()
    maybe: Optional[_Range] = None
    many: list[_Range] = []
    by_key: dict[str, _Range] = {}
    pair: tuple[_Range, int] = (_Range(), 1)
    either: Union[_Range, _Other] = _Range()  # two models: the loader does not look
    one_or_int: Union[_Range, int] = 0
    one_or_list: Union[_Range, list[_Range]] = _Range()  # the list's items: not looked into
    open_: _Open = Field(_Open(), alias="open")
    by_name: _ByName = _ByName()
    closed: _Closed = _Closed()
    holder: _Holder = _Holder()
    tree: _Tree = _Tree()


def _nested_registry():
    class Rt(fxpasses.GraphPass):
        """Nested options."""

        name = "rt"
        Options = _NestedOptions

        def run(self, gm, ctx):
            return False

    reg = fxpasses.Registry(autoload=False)
    reg.register(Rt)
    return reg


@pytest.mark.parametrize(
    "options, valid",
    [
        ({"nested": {"lo": 0.5}}, True),
        ({"nested": {"typo": 1}}, False),
        ({"maybe": {"typo": 1}}, False),
        ({"maybe": None}, True),
        ({"many": [{"hi": 2}, {"typo": 1}]}, False),
        ({"by_key": {"k": {"typo": 1}}}, False),
        ({"pair": [{"typo": 1}, 1]}, False),
        ({"either": {"typo": 1}}, True),
        ({"either": {"a": 1, "typo": 1}}, True),
        ({"one_or_int": {"typo": 1}}, False),
        ({"one_or_int": 3}, True),
        ({"one_or_list": {"typo": 1}}, False),
        ({"one_or_list": [{"typo": 1}]}, True),
        ({"open": {"typo": 1}}, True),
        ({"by_name": {"from_": 1}}, True),
        ({"by_name": {"from": 1, "from_": 2}}, False),
        ({"by_name": {"typo": 1}}, False),
        ({"closed": {"from_": 1}}, True),
        ({"closed": {"typo": 1}}, False),
        ({"holder": {"typo": 1}}, False),
        ({"holder": {"inner": {"typo": 1}}}, False),
        ({"holder": {"inners": [{"typo": 1}]}}, False),
        ({"tree": {"kids": [{"kids": [{"typo": 1}]}]}}, False),
        ({"tree": {"kids": [{"kids": [{"v": 1}]}]}}, True),
    ],
)
def test_unknown_keys_of_a_nested_model_are_refused_where_the_loader_refuses_them(tmp_path, options, valid):
    """A misspelt key in the table of a nested plain BaseModel passed the schema (its
    definition had no additionalProperties: false) while the loader refused it (an adversarial
    check). The schema now refuses unknown keys exactly where the loader looks for them."""
    reg = _nested_registry()
    v = jsonschema.Draft202012Validator(config_schema(reg))
    config = {"pipeline": "rt", "options": {"rt": options}}
    assert (not list(v.iter_errors(config))) is valid
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    try:
        fxpasses.Pipeline.from_config(path, registry=reg).plan()
        loaded = True
    except fxpasses.UserError:
        loaded = False
    assert loaded is valid


def test_a_misspelt_key_of_a_nested_model_is_named_alike_by_the_schema_and_the_loader(tmp_path):
    reg = _nested_registry()
    schema = config_schema(reg)
    v = jsonschema.Draft202012Validator(schema)
    config = {"pipeline": "rt", "options": {"rt": {"nested": {"typo": 1}}}}
    assert [e.message for e in v.iter_errors(config)] == ["Additional properties are not allowed ('typo' was unexpected)"]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    with pytest.raises(fxpasses.OptionsError) as info:
        fxpasses.Pipeline.from_config(path, registry=reg).plan()
    assert str(info.value).splitlines()[1] == "  rt.nested.typo: unknown option (valid: lo, hi) (given: 1)"
    defs = schema["$defs"]
    # pydantic's definition stays for the union of two models, where the loader does not look
    assert defs["rt___Range"]["additionalProperties"] is False
    assert "additionalProperties" not in defs["rt___Range-unchecked"]
    assert defs["rt___Open"]["additionalProperties"] is True
    assert defs["rt___ByName"]["properties"]["from_"] == defs["rt___ByName"]["properties"]["from"]
    assert defs["rt___ByName"]["not"] == {"anyOf": [{"required": ["from", "from_"]}]}


def test_unknown_top_level_options_are_refused_whatever_the_models_extra_setting():
    """The loader refuses an unknown option of any Options model (it checks them itself where
    the model does not forbid them), but the schema kept pydantic's additionalProperties: true
    of an Options model with extra="allow", and took a plain model's field by a name it does
    not take."""

    class Loose(BaseModel):
        model_config = ConfigDict(extra="allow")
        scale: int = 1
        from_: int = Field(0, alias="from")

    class Lp(fxpasses.GraphPass):
        """Loose options."""

        name = "loose_opts"
        Options = Loose

        def run(self, gm, ctx):
            return False

    reg = fxpasses.Registry(autoload=False)
    reg.register(Lp)
    v = jsonschema.Draft202012Validator(config_schema(reg))
    for options, valid in (({"scale": 2, "from": 1}, True), ({"typo": 1}, False), ({"from_": 1}, False)):
        assert (not list(v.iter_errors({"pipeline": "loose_opts", "options": {"loose_opts": options}}))) is valid
        try:
            fxpasses.Pipeline.from_string("loose_opts", options={"loose_opts": options}, registry=reg).plan()
            loaded = True
        except fxpasses.UserError:
            loaded = False
        assert loaded is valid, options


class _Finite(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False)
    f: float = 0.0


class _Inner(BaseModel):
    f: float = 0.0
    g: float = Field(0.0, ge=0)


class _FloatOptions(fxpasses.PassOptions):
    plain: float = 0.0
    at_least_0: float = Field(0.0, ge=0)
    at_most_10: float = Field(0.0, le=10)
    between: float = Field(1.0, gt=0, lt=10)
    finite: float = Field(0.0, allow_inf_nan=False)
    maybe: Optional[float] = Field(None, ge=0)
    number: Union[float, int] = 0
    text: Union[float, str] = 0.0
    count: int = 0
    # inside lists, dicts, tuples and nested models
    seq: list[float] = []
    seq_at_least_0: list[Annotated[float, Field(ge=0)]] = []
    table: dict[str, Optional[float]] = {}
    pair: tuple[float, int] = (0.0, 1)
    inner: _Inner = _Inner()
    inners: list[_Inner] = []
    finite_model: _Finite = _Finite()


def _float_registry():
    class Fl(fxpasses.GraphPass):
        """Float options."""

        name = "fl"
        Options = _FloatOptions

        def run(self, gm, ctx):
            return False

    reg = fxpasses.Registry(autoload=False)
    reg.register(Fl)
    return reg


@pytest.mark.parametrize(
    "option, taken",
    [
        ("plain", ["inf", "-inf", "nan"]),
        ("at_least_0", ["inf"]),
        ("at_most_10", ["-inf"]),
        ("between", []),
        ("finite", []),
        ("maybe", ["inf"]),
        ("number", ["inf", "-inf", "nan"]),
        ("text", ["inf", "-inf", "nan"]),  # (as text)
        ("count", []),
    ],
)
def test_a_float_option_takes_the_strings_inf_and_nan_where_the_loader_does(option, taken):
    """The loader reads "inf", "-inf" and "nan" for a float option (how reproducers write
    non-finite floats in JSON), but the schema refused them: 'inf' is not of type 'number' (an
    adversarial check). Each is taken where the option's type and constraints take it."""
    reg = _float_registry()
    v = jsonschema.Draft202012Validator(config_schema(reg))
    for text in ("inf", "-inf", "nan"):
        options = {option: text}
        valid = not list(v.iter_errors({"pipeline": "fl", "options": {"fl": options}}))
        assert valid is (text in taken), text
        try:
            fxpasses.Pipeline.from_config({"pipeline": "fl", "options": {"fl": options}}, registry=reg).plan()
            loaded = True
        except fxpasses.UserError:
            loaded = False
        assert loaded is valid, text


@pytest.mark.parametrize(
    "options, valid",
    [
        ({"seq": ["inf", 1.5, "nan", "-inf"]}, True),
        ({"seq": ["Infinity"]}, False),
        ({"seq_at_least_0": ["inf"]}, True),
        ({"seq_at_least_0": ["-inf"]}, False),
        ({"table": {"a": "nan", "b": None}}, True),
        ({"pair": ["-inf", 1]}, True),
        ({"pair": [1.0, "inf"]}, False),
        ({"inner": {"f": "nan", "g": "inf"}}, True),
        ({"inner": {"g": "-inf"}}, False),
        ({"inners": [{"f": "-inf"}]}, True),
        ({"finite_model": {"f": "inf"}}, False),
    ],
)
def test_non_finite_strings_are_taken_wherever_a_float_is_expected(options, valid):
    """At any depth, by the float's own constraints (the loader is being taught to read them
    there too)."""
    v = jsonschema.Draft202012Validator(config_schema(_float_registry()))
    assert (not list(v.iter_errors({"pipeline": "fl", "options": {"fl": options}}))) is valid


def test_a_float_options_schema_names_the_strings_it_takes():
    props = config_schema(_float_registry())["$defs"]["options_fl"]["properties"]
    assert props["at_least_0"] == {
        "default": 0.0,
        "title": "At Least 0",
        "anyOf": [{"minimum": 0, "type": "number"}, {"enum": ["inf"], "description": "a float that is not finite, written as text"}],
    }
    assert props["finite"] == {"default": 0.0, "title": "Finite", "type": "number"}


PRESETS_SOURCE = """
import fxpasses


def declaring(name, **ordering):
    return type(name, (fxpasses.GraphPass,), {"__doc__": "A pass.", "name": name, "run": lambda self, gm, ctx: False, **ordering})


class NeedsN(fxpasses.PassOptions):
    n: int


CLASSES = [
    declaring("cyc_a", requires=("cyc_b",)),
    declaring("cyc_b", requires=("cyc_a",)),
    declaring("req_missing", requires=("no_such_required",)),
    declaring("needs_n", Options=NeedsN),
]


@fxpasses.hookimpl
def fxpasses_register_passes(register):
    for cls in CLASSES:
        register(cls)


@fxpasses.hookimpl
def fxpasses_register_presets(register):
    register("unknown_pass", "remove_dropout,no_such_pass", "Names a pass no plugin has.")
    register("misspelt_option", "fold_constants{max_numl=3}", "Misspells an option.")
    register("bad_value", "fold_constants{max_numel=abc}", "A value of the wrong type.")
    register("needs_option", "needs_n", "Leaves out a required option.")
    register("cycle", "remove_dropout,cyc_a", "Names a pass in a cycle.")
    register("requires_missing", "req_missing", "Names a pass requiring a pass no plugin has.")
    register("fine", "remove_dropout,eliminate_dead_code", "Fine.")
"""


def test_the_preset_enum_holds_only_the_presets_that_can_be_used(tmp_path, monkeypatch):
    """Plugin presets naming an unknown pass or a misspelt option were in the enum, and the
    loader refused them (an adversarial check). The registry's own check of a preset
    (Registry.preset_problems, which warns when the plugin loads) leaves them out, the
    description says why; one whose option values alone do not fit needs them from the
    config's options table, as the loader does."""
    from dists import installed_dist

    with installed_dist(monkeypatch, tmp_path / "site", "advcfg-presets", "0.0.1", "fxp_advcfg_presets", PRESETS_SOURCE):
        with pytest.warns(fxpasses.PluginWarning):
            reg = fxpasses.Registry()
    schema = config_schema(reg)
    jsonschema.Draft202012Validator.check_schema(schema)
    preset = schema["properties"]["preset"]
    assert preset["enum"] == ["bad_value", "cleanup", "example_cleanup", "fine", "inference", "needs_option", "training", None]
    assert preset["description"] == (
        "a named pipeline instead of `pipeline`; 'bad_value' needs [options.fold_constants] max_numel (the "
        "preset's own values are left out or do not fit); 'needs_option' needs [options.needs_n] n (the preset's "
        "own values are left out or do not fit); left out, as they cannot be used: advcfg-presets 0.0.1: preset "
        "'cycle' cannot be ordered: pass ordering cycle: cyc_a -> cyc_b -> cyc_a (because: cyc_b (advcfg-presets "
        "0.0.1) requires cyc_a; cyc_a (advcfg-presets 0.0.1) requires cyc_b); advcfg-presets 0.0.1: invalid options "
        "for pass 'fold_constants' (preset 'misspelt_option'): fold_constants.max_numl: unknown option; did you mean "
        "'max_numel'? (valid: max_numel, max_growth_bytes, remove_unused_state, fold_parameters, modules_may_train) "
        "(given: 3); advcfg-presets 0.0.1: preset 'requires_missing' names 'req_missing', which requires pass(es) no "
        "installed plugin registers: no_such_required; advcfg-presets 0.0.1: preset 'unknown_pass' names pass(es) no "
        "installed plugin registers: no_such_pass"
    )
    v = jsonschema.Draft202012Validator(schema)
    for config in (
        {"preset": "fine"},
        {"preset": "unknown_pass"},
        {"preset": "misspelt_option"},
        {"preset": "misspelt_option", "options": {"fold_constants": {"max_numel": 3}}},
        {"preset": "cycle"},
        {"preset": "requires_missing"},
        {"preset": "bad_value"},
        {"preset": "bad_value", "options": {"fold_constants": {"max_numel": 3}}},
        {"preset": "needs_option"},
        {"preset": "needs_option", "options": {"needs_n": {"n": 2}}},
    ):
        valid = not list(v.iter_errors(config))
        try:
            fxpasses.Pipeline.from_config(config, registry=reg).plan()
            loaded = True
        except fxpasses.UserError:
            loaded = False
        assert valid is loaded, config
    assert [p.message for p in reg.preset_problems("unknown_pass")] == [
        "preset 'unknown_pass' names pass(es) no installed plugin registers: no_such_pass"
    ]
    (bad,) = reg.preset_problems("bad_value")
    assert (bad.pass_name, bad.options) == ("fold_constants", ("max_numel",))
    assert reg.preset_problems("fine") == [] and reg.preset_problems("inference") == []
