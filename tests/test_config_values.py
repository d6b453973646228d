"""Values from config files, pipeline strings and the command line: how they are read.

Config data is JSON-like, so pass options from it are read as pydantic reads JSON (an Enum or
a Path from a string) and every config value is strict (a quoted number is an error, with a
hint); YAML 1.1 surprises are named; an option set twice is an error naming both places.
"""

from __future__ import annotations

import datetime
import enum
import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from dists import installed_dist
from pydantic import BaseModel, Field

import fxpasses
from fxpasses import ConfigError, OptionsError, Pipeline, Registry
from fxpasses.cli import cli


class Mode(enum.Enum):
    fast = "fast"
    exact = "exact"


class ValueOptions(fxpasses.PassOptions):
    mode: Mode = Mode.fast
    out: Path = Path("out.txt")
    sizes: tuple[int, ...] = ()
    max_numel: int = Field(default=4096, ge=0)
    scale: float = 1.0


class ValuePass(fxpasses.GraphPass):
    """A pass whose options are an Enum, a Path, a tuple and numbers."""

    name = "values"
    Options = ValueOptions

    def run(self, gm, ctx):
        return False


@pytest.fixture
def reg():
    r = Registry(autoload=False)
    r.register(ValuePass)
    return r


def options(p):
    return p.plan().steps[0].options


WANTED = (Mode.exact, Path("out/x.txt"), (1, 2), 8)


@pytest.mark.parametrize(
    "filename, text",
    [
        ("c.toml", 'pipeline = "values"\n[options.values]\nmode = "exact"\nout = "out/x.txt"\nsizes = [1, 2]\nmax_numel = 8\n'),
        ("c.toml", 'pipeline = [{name = "values", options = {mode = "exact", out = "out/x.txt", sizes = [1, 2], max_numel = 8}}]\n'),
        ("c.toml", "pipeline = \"values{mode=exact,out='out/x.txt',sizes=[1,2],max_numel=8}\"\n"),
        ("c.yaml", "pipeline: values\noptions:\n  values: {mode: exact, out: out/x.txt, sizes: [1, 2], max_numel: 8}\n"),
        ("c.json", json.dumps({"pipeline": [{"name": "values", "options": {"mode": "exact", "out": "out/x.txt", "sizes": [1, 2], "max_numel": 8}}]})),
    ],
)
def test_enum_and_path_options_are_read_from_config_files(tmp_path, reg, filename, text):
    path = tmp_path / filename
    path.write_text(text)
    o = options(Pipeline.from_config(path, registry=reg))
    assert (o.mode, o.out, o.sizes, o.max_numel) == WANTED


def test_enum_and_path_options_are_read_from_pipeline_strings(reg):
    o = options(Pipeline.from_string("values{mode=exact,out=out/x.txt,sizes=[1,2],max_numel=8}", registry=reg))
    assert (o.mode, o.out, o.sizes, o.max_numel) == WANTED


def test_a_wrong_enum_value_from_a_string_names_the_members(reg):
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string("values{mode=fats}", registry=reg)
    # the column of the option in the string (it named the entry's only)
    assert str(info.value).splitlines()[1] == (
        "  values.mode (column 8): Input should be 'fast' or 'exact'; did you mean 'fast'? (given: 'fats')"
    )
    with pytest.raises(OptionsError) as info:  # nothing close: no suggestion
        Pipeline.from_string("values{mode=zzz}", registry=reg)
    assert str(info.value).splitlines()[1] == "  values.mode (column 8): Input should be 'fast' or 'exact' (given: 'zzz')"


@pytest.mark.parametrize("key, given, meant", [("verify", "numerc", "numeric"), ("on_error", "rolback", "rollback")])
def test_a_misspelt_setting_gets_the_closest_choice_wherever_it_is_given(tmp_path, reg, key, given, meant):
    import torch

    from fxpasses.backend import fxpasses_backend

    hint = f"; did you mean {meant!r}?"
    with pytest.raises(ConfigError) as info:
        Pipeline(["values"], registry=reg, **{key: given})
    assert str(info.value).endswith(f"got {given!r}{hint}")
    with pytest.raises(ConfigError) as info:
        Pipeline.from_string(f"values[{key}={given}]", registry=reg)
    assert f"got {given!r}{hint}" in str(info.value)
    (tmp_path / "c.toml").write_text(f'pipeline = "values"\n{key} = "{given}"\n')
    with pytest.raises(ConfigError) as info:
        Pipeline.from_config(tmp_path / "c.toml", registry=reg)
    assert f"{hint} (given: {given!r})" in str(info.value)
    gm = torch.fx.symbolic_trace(torch.nn.ReLU())
    with pytest.raises(ConfigError) as info:
        fxpasses_backend(gm, [torch.randn(2)], options={"pipeline": "eliminate_dead_code", key: given})
    assert str(info.value) == f"torch.compile option {key!r} must be one of {', '.join(fxpasses.spec.SETTINGS[key])}, got {given!r}{hint}"


def test_strings_are_still_not_numbers_in_pipeline_strings(reg):
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string("values{max_numel='12'}", registry=reg)
    assert str(info.value).splitlines()[1] == (
        "  values.max_numel (column 8): Input should be a valid integer (given: '12'; a number in quotes is a string: "
        "write 12 without the quotes)"
    )
    with pytest.raises(OptionsError, match=r"values.max_numel \(column 8\): Input should be greater than or equal to 0 \(given: -1\)"):
        Pipeline.from_string("values{max_numel=-1}", registry=reg)


def test_python_callers_give_enum_members_and_paths(reg):
    o = options(Pipeline([("values", {"mode": Mode.exact, "out": Path("out/x.txt"), "sizes": (1, 2), "max_numel": 8})], registry=reg))
    assert (o.mode, o.out, o.sizes, o.max_numel) == WANTED
    o = options(Pipeline([ValuePass(ValueOptions(mode=Mode.exact))], registry=reg))
    assert o.mode is Mode.exact
    # Python values are validated as they are (pydantic's strict Python mode): a member, not its value
    with pytest.raises(OptionsError) as info:
        Pipeline([("values", {"mode": "exact"})], registry=reg)
    assert str(info.value).splitlines()[1] == (
        "  values.mode: Input should be an instance of Mode (give Mode.exact, the member, from Python; 'exact' is read "
        "as it only from text) (given: 'exact')"
    )


def test_python_options_beside_a_pipeline_strings_are_each_read_as_their_source_gives_them(reg):
    p = Pipeline.from_string("values{mode=exact}", registry=reg, options={"values": {"out": Path("out/x.txt")}})
    assert (options(p).mode, options(p).out) == (Mode.exact, Path("out/x.txt"))
    with pytest.raises(OptionsError, match="values.out: Input should be an instance of Path"):
        Pipeline.from_string("values{mode=exact}", registry=reg, options={"values": {"out": "out/x.txt"}})


def test_a_python_mapping_config_reads_as_a_config_file(reg):
    o = options(Pipeline.from_config({"pipeline": "values", "options": {"values": {"mode": "exact"}}}, registry=reg))
    assert o.mode is Mode.exact


def test_a_quoted_boolean_says_to_drop_the_quotes(tmp_path):
    """A quoted number was told to drop its quotes, a quoted true was not (found by a new-user check)."""
    (tmp_path / "c.toml").write_text('pipeline = "remove_dropout"\n[options.remove_dropout]\ninference = "True"\n')
    with pytest.raises(OptionsError) as info:
        Pipeline.from_config(tmp_path / "c.toml")
    assert str(info.value).splitlines()[1] == (
        "  remove_dropout.inference: Input should be a valid boolean (given: 'True'; a boolean in quotes is a string: "
        "write true without the quotes)"
    )
    with pytest.raises(OptionsError) as info:  # a word that is not a boolean at all: no such hint
        Pipeline.from_string("remove_dropout{inference='maybe'}")
    assert "in quotes" not in str(info.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Pipeline([("remove_dropout", {"inference": "true"})]),
        lambda: Pipeline(["remove_dropout"], options={"remove_dropout": {"inference": "true"}}),
        lambda: Pipeline.from_string("remove_dropout", options={"remove_dropout": {"inference": "true"}}),
        lambda: fxpasses.registry().get("remove_dropout")(inference="true"),
        lambda: Pipeline([("remove_dropout", {"inference": "true"}), ("fold_constants", {"max_numel": "7"})]),
    ],
)
def test_a_quoted_boolean_given_from_python_is_told_pythons_true(make):
    """The hint said ``write true`` to Python code, where the boolean is ``True``; a config file
    or a pipeline string is still told ``true``."""
    with pytest.raises(OptionsError) as info:
        make()
    assert "a boolean in quotes is a string: write True without the quotes)" in str(info.value).splitlines()[1]
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string("remove_dropout{inference='true'}", options={"fold_constants": {}})
    assert "write true without the quotes" in str(info.value)


# ------------------------------------------------------------------ top-level keys: strict too


@pytest.mark.parametrize(
    "filename, text, line",
    [
        ("c.toml", 'pipeline = "values"\natol = "1e-5"\n', "  atol: Input should be a valid number (given: '1e-5'; a number in quotes is a string: write 1e-5 without the quotes)"),
        ("c.json", '{"pipeline": "values", "rtol": "0.001"}', "  rtol: Input should be a valid number (given: '0.001'; a number in quotes is a string: write 0.001 without the quotes)"),
        ("c.yaml", 'pipeline: values\natol: "0.5"\n', "  atol: Input should be a valid number (given: '0.5'; a number in quotes is a string: write 0.5 without the quotes)"),
        ("c.toml", 'pipeline = "values"\n[model]\nfactory = "m:f"\ninputs = [{shape = [1]}]\nseed = "3"\n', "  model.seed: Input should be a valid integer (given: '3'; a number in quotes is a string: write 3 without the quotes)"),
        ("c.toml", 'pipeline = "values"\n[options.values]\nmax_numel = "12"\n', None),
    ],
)
def test_a_quoted_number_is_an_error_naming_the_key_and_the_file(tmp_path, reg, filename, text, line):
    path = tmp_path / filename
    path.write_text(text)
    with pytest.raises((ConfigError, OptionsError)) as info:
        Pipeline.from_config(path, registry=reg)
    msg = str(info.value)
    assert str(path) in msg
    if line is None:  # an option: the same rule, the same hint
        line = "  values.max_numel: Input should be a valid integer (given: '12'; a number in quotes is a string: write 12 without the quotes)"
    assert line in msg.splitlines()


# ------------------------------------------------------------------ YAML 1.1


@pytest.mark.parametrize(
    "value, fault",
    [
        ("017", "line 3, column 23: 017 has a leading zero, so YAML 1.1 (PyYAML) reads it as octal 15, YAML 1.2 as 17: "
                "write 17 (or 15) without the leading zero, or quote it to mean the string"),
        ("1:30", "line 3, column 23: 1:30 is a base-60 number in YAML 1.1, which PyYAML reads as 90: quote it to mean "
                 "the string, or write 90"),
    ],
)
def test_yaml_integers_that_yaml_versions_read_differently_are_errors(tmp_path, reg, value, fault):
    path = tmp_path / "c.yaml"
    path.write_text(f"pipeline: values\noptions:\n  values: {{max_numel: {value}}}\n")
    with pytest.raises(ConfigError) as info:
        Pipeline.from_config(path, registry=reg)
    assert str(info.value) == f"{path}: ambiguous YAML number: {fault}"


@pytest.mark.parametrize(
    "text, fault",
    [
        ("pipeline: remove_dropout\natol: 1:30.5\n", "line 2, column 7: 1:30.5 is a base-60 number in YAML 1.1, which "
         "PyYAML reads as 90.5: quote it to mean the string, or write 90.5"),
        ("pipeline: values\noptions:\n  values: {scale: -1:00:30.25}\n", "line 3, column 19: -1:00:30.25 is a base-60 "
         "number in YAML 1.1, which PyYAML reads as -3630.25: quote it to mean the string, or write -3630.25"),
    ],
)
def test_yaml_base_60_floats_are_errors_as_base_60_integers_are(tmp_path, reg, text, fault):
    """`atol: 1:30.5` was read as 90.5 without a word (`fxpasses check` said OK); the base-60
    integer `1:30` was already an error naming its line (an adversarial check)."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        fxpasses.config.load_config_file(path)
    assert str(info.value) == f"{path}: ambiguous YAML number: {fault}"
    if "atol" in text:
        r = CliRunner().invoke(cli, ["check", str(path)])
        assert r.exit_code == 2 and r.output == f"error: {path}: ambiguous YAML number: {fault}\n"
    # a float every reading agrees on is taken: a leading zero is decimal in YAML 1.1's floats too
    path.write_text("pipeline: values\natol: 017.5\noptions:\n  values: {scale: 1_000.5}\n")
    pipe = Pipeline.from_config(path, registry=reg)
    assert pipe.atol == 17.5 and options(pipe).scale == 1000.5


@pytest.mark.parametrize("value, read", [("07", 7), ("00", 0), ("0x1f", 31), ("1_000", 1000), ("'017'", None)])
def test_yaml_integers_every_reading_agrees_on_are_taken(tmp_path, reg, value, read):
    path = tmp_path / "c.yaml"
    path.write_text(f"pipeline: values\noptions:\n  values: {{max_numel: {value}}}\n")
    if read is None:  # quoted: the string, refused with the hint for a quoted number
        with pytest.raises(OptionsError, match=r"\(given: '017'; YAML 1.1 reads a number with a leading zero as octal"):
            Pipeline.from_config(path, registry=reg)
        return
    assert options(Pipeline.from_config(path, registry=reg)).max_numel == read


def test_a_yaml_leading_zero_number_read_as_a_string_is_explained(tmp_path, reg):
    path = tmp_path / "c.yaml"
    path.write_text("pipeline: values\noptions:\n  values: {max_numel: 08}\n")  # PyYAML: the string '08'
    with pytest.raises(OptionsError) as info:
        Pipeline.from_config(path, registry=reg)
    assert str(info.value).splitlines()[1] == (
        "  values.max_numel: Input should be a valid integer (given: '08'; YAML 1.1 reads a number with a "
        "leading zero as octal, or as a string when it holds an 8 or 9: write it without the leading zero)"
    )


@pytest.mark.parametrize(
    "value, fault",
    [
        # an int option: only the digits read as an int (1.0e+3 is a float, refused)
        ("{max_numel: 1e3}", "values.max_numel: Input should be a valid integer (given: '1e3'; YAML 1.1 (PyYAML) reads an "
                             "exponent number as a float only with a dot and a signed exponent (1.0e+3), so 1e3 (no dot, no "
                             "exponent sign) is a string: write 1000)"),
        ("{max_numel: 1.5e3}", "(given: '1.5e3'; YAML 1.1 (PyYAML) reads an exponent number as a float only with a dot and a "
                               "signed exponent (1.0e+3), so 1.5e3 (no exponent sign) is a string: write 1500)"),
        ("{max_numel: 2.55e1}", "is a string: write a whole number)"),
        # a float option: a form PyYAML reads as a float
        ("{scale: 1e-5}", "values.scale: Input should be a valid number (given: '1e-5'; YAML 1.1 (PyYAML) reads an exponent "
                          "number as a float only with a dot and a signed exponent (1.0e+3), so 1e-5 (no dot) is a string: "
                          "write 1.0e-05)"),
        ("{scale: 2e20}", "is a string: write 2.0e+20)"),
        ("{scale: 1.5e3}", "is a string: write 1500.0)"),
    ],
)
def test_a_yaml_exponent_number_read_as_a_string_is_explained_for_the_options_type(tmp_path, reg, value, fault):
    path = tmp_path / "c.yaml"
    path.write_text(f"pipeline: values\noptions:\n  values: {value}\n")
    with pytest.raises(OptionsError) as info:
        Pipeline.from_config(path, registry=reg)
    assert fault in str(info.value).splitlines()[1]


def test_each_written_form_a_yaml_exponent_hint_offers_reads_back_as_the_number(tmp_path, reg):
    """The form the hint says to write is one PyYAML reads as the option's type and value."""
    import yaml

    from fxpasses.errors import value_hint

    for text, message, want in [("1e3", "valid integer", 1000), ("1e-5", "valid number", 1e-5), ("3e20", "valid number", 3e20)]:
        written = value_hint(text, "c.yaml", f"Input should be a {message}").rsplit("write ", 1)[1]
        assert yaml.safe_load(written) == want and type(yaml.safe_load(written)) is type(want)


def test_yaml_12_octal_read_as_a_string_is_explained(tmp_path, reg):
    path = tmp_path / "c.yaml"
    path.write_text("pipeline: values\noptions:\n  values: {max_numel: 0o17}\n")
    with pytest.raises(OptionsError) as info:
        Pipeline.from_config(path, registry=reg)
    assert "(given: '0o17'; YAML 1.1 (PyYAML) reads 0o octal as a string: write 15)" in str(info.value)


def test_a_yaml_boolean_word_for_an_enum_is_explained(tmp_path, reg):
    path = tmp_path / "c.yaml"
    path.write_text("pipeline: values\noptions:\n  values: {mode: off}\n")
    with pytest.raises(OptionsError, match=r"\(given: False; YAML reads yes/no/on/off \(any case\) as true/false"):
        Pipeline.from_config(path, registry=reg)


# ------------------------------------------------------------------ an option set twice


@pytest.mark.parametrize(
    "text, where",
    [
        ('pipeline = "values{max_numel=8}"\n[options.values]\nmax_numel = 4096\n',
         "{path}: pipeline string, entry 1 ('values') at column 1"),
        ('pipeline = [{name = "values", options = {max_numel = 8}}]\n[options.values]\nmax_numel = 4096\n',
         "{path}: pipeline, entry 1"),
        # pyproject.toml: the table is named by its section
        ('[tool.fxpasses]\npipeline = "values{max_numel=8}"\n[tool.fxpasses.options.values]\nmax_numel = 4096\n',
         "{path} [tool.fxpasses]: pipeline string, entry 1 ('values') at column 1"),
    ],
)
def test_an_option_in_the_pipeline_and_in_the_options_table_is_an_error_naming_both(tmp_path, reg, text, where):
    path = tmp_path / ("pyproject.toml" if "tool.fxpasses" in text else "c.toml")
    path.write_text(text)
    table = f"{path} [tool.fxpasses.options.values]" if path.name == "pyproject.toml" else f"{path} [options.values]"
    with pytest.raises(ConfigError) as info:
        Pipeline.from_config(path, registry=reg)
    assert str(info.value) == (
        where.format(path=path) + f": option(s) of pass 'values' set twice, here and in {table}: "
        "max_numel=8 here, max_numel=4096 there; set each option in one place (the entry or the table)"
    )


def test_an_option_in_an_entry_and_in_python_options_is_an_error_naming_both(reg):
    with pytest.raises(ConfigError) as info:
        Pipeline.from_string("values{mode=exact}", registry=reg, options={"values": {"mode": Mode.fast}})
    assert str(info.value) == (
        "pipeline string, entry 1 ('values') at column 1: option(s) of pass 'values' set twice, here and in "
        "options['values']: mode=exact here, mode=fast there; set each option in one place (the entry or the table)"
    )
    with pytest.raises(ConfigError, match=r"set twice, here and in options\['values'\]: max_numel=8 here, max_numel=9 there"):
        Pipeline([ValuePass(ValueOptions(max_numel=8))], registry=reg, options={"values": {"max_numel": 9}})


def test_the_options_table_changes_a_presets_options(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('preset = "inference"\n[options.fold_constants]\nfold_parameters = false\n')
    steps = {s.name: s.options for s in Pipeline.from_config(path).plan().steps}
    assert steps["fold_constants"].fold_parameters is False  # the preset says true


# ------------------------------------------------------------------ the command line


PLUGIN = '''
import enum
from pathlib import Path
import fxpasses

class Mode(enum.Enum):
    fast = "fast"
    exact = "exact"

class CliValues(fxpasses.GraphPass):
    """Records its options."""
    name = "cli_values"

    class Options(fxpasses.PassOptions):
        mode: Mode = Mode.fast
        out: Path = Path("out.txt")

    def run(self, gm, ctx):
        return False

@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register(CliValues)
'''


@pytest.fixture
def cli_site(tmp_path, monkeypatch):
    with installed_dist(monkeypatch, tmp_path / "site", "cli-values", "1.0", "fxp_cli_values", PLUGIN) as site:
        yield site


def test_enum_and_path_options_from_the_command_line_and_a_config_file(tmp_path, cli_site):
    r = CliRunner().invoke(cli, ["check", "--pipeline", "cli_values{mode=exact,out=out/x.txt}", "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["steps"][0]["options"] == {"mode": "exact", "out": "out/x.txt"}
    path = tmp_path / "c.yaml"
    path.write_text("pipeline: cli_values\noptions:\n  cli_values: {mode: exact, out: out/x.txt}\n")
    r = CliRunner().invoke(cli, ["check", str(path), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["steps"][0]["options"] == {"mode": "exact", "out": "out/x.txt"}


# ------------------------------------------------------------------ white space in pipeline strings


@pytest.mark.parametrize(
    "text, column, name",
    [("values,\u00a0values", 8, "no-break space (U+00A0)"), ("values{mode=exact\u2003}", 18, "em space (U+2003)"), ("\u3000", 1, "ideographic space (U+3000)")],
)
def test_unicode_white_space_in_a_pipeline_string_is_an_error_naming_it(reg, text, column, name):
    with pytest.raises(ConfigError) as info:
        Pipeline.from_string(text, registry=reg)
    assert str(info.value).splitlines()[0] == (
        f"pipeline string, column {column}: {name} is not white space here (pasted from a document?): "
        "use a plain space, or quote the value that holds it"
    )


@pytest.mark.parametrize(
    "text, column, number",
    [("values{max_numel=017}", 18, "17"), ("values{max_numel=00}", 18, "0"), ("values{scale=-007.5}", 14, "-7.5"),
     ("values{sizes=[1,02]}", 17, "2"), ("values{max_numel=0_1}", 18, "1"), ("values{scale=00e3}", 14, "0e3")],
)
def test_a_number_with_a_leading_zero_in_a_pipeline_string_is_an_error(reg, text, column, number):
    """017 is octal 15 to YAML 1.1 and an error to TOML and Python: not silently 17 (or 17.0)."""
    token = text.split("=", 1)[1].strip("}").strip("[]").split(",")[-1]
    with pytest.raises(ConfigError) as info:
        Pipeline.from_string(text, registry=reg)
    assert str(info.value).splitlines()[0] == (
        f"pipeline string, column {column}: {token} has a leading zero (octal to YAML 1.1, an error to TOML and "
        f"to Python's int): write {number}, or quote it ('{token}') to mean the string"
    )
    assert str(info.value).splitlines()[2] == "  " + " " * (column - 1) + "^"


def test_zero_and_numbers_below_one_and_a_quoted_leading_zero_are_taken(reg):
    p = Pipeline.from_string("values{max_numel=0,scale=0.5,out='017'}", registry=reg)
    assert (options(p).max_numel, options(p).scale, options(p).out) == (0, 0.5, Path("017"))
    assert options(Pipeline.from_string("values{scale=0e3,sizes=[0,10]}", registry=reg)).sizes == (0, 10)


def test_ascii_white_space_and_quoted_unicode_white_space_are_taken(reg):
    p = Pipeline.from_string("values{ mode = exact ,\n\tout = 'a\u00a0b' }", registry=reg)
    assert (options(p).mode, options(p).out) == (Mode.exact, Path("a\u00a0b"))


def test_a_bad_option_from_the_table_of_a_preset_names_the_table(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('preset = "inference"\n[options.fold_constants]\nmax_numel = "12"\n')
    with pytest.raises(OptionsError) as info:
        Pipeline.from_config(path)
    assert str(info.value).splitlines()[0] == f"invalid options for pass 'fold_constants' ({path} [options.fold_constants]):"


def test_every_bad_option_of_a_pipeline_string_is_named_at_once(reg):
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string("values{mode=fats,scale=true,max_numel=-1,colour=red}", registry=reg)
    assert str(info.value).splitlines()[1:] == [
        "  values.mode (column 8): Input should be 'fast' or 'exact'; did you mean 'fast'? (given: 'fats')",
        "  values.scale (column 18): Input should be a valid number (given: True)",
        "  values.max_numel (column 29): Input should be greater than or equal to 0 (given: -1)",
        "  values.colour (column 42): unknown option (valid: mode, out, sizes, max_numel, scale) (given: 'red')",
    ]


# ------------------------------------------------------------------ found by the new-user check


def test_a_config_with_a_byte_order_mark_reads_like_one_without(tmp_path):
    from fxpasses.config import load_config_file

    for suffix, body in ((".toml", 'pipeline = "fold_constants"\n'), (".yaml", "pipeline: fold_constants\n")):
        path = tmp_path / f"bom{suffix}"
        path.write_bytes(b"\xef\xbb\xbf" + body.encode())
        assert load_config_file(path).pipeline == "fold_constants", suffix


def test_a_binary_file_given_as_config_says_what_to_write_instead(tmp_path):
    from fxpasses.config import load_config_file

    program = tmp_path / "model.pt2"
    program.write_bytes(b"PK\x03\x04\x81\x82\xff binary")
    with pytest.raises(ConfigError) as info:
        load_config_file(program)
    assert str(info.value) == (
        f"cannot read config file {program}: it is not UTF-8 text (a saved model or tensor file is named in a "
        f"config: [model] program = {str(program)!r} for a saved exported program (.pt2), inputs = '...' for a "
        "tensor file)"
    )
    other = tmp_path / "conf.toml"
    other.write_bytes(b"\x80 p")
    with pytest.raises(ConfigError, match=r"it is not UTF-8 text \(a config file is UTF-8 text: .toml, .yaml, .yml or .json\)"):
        load_config_file(other)
    # a byte order mark names the encoding an editor saved it in (a new-user check: a UTF-16
    # file was "not UTF-8 text" only)
    for encoding, named in (("utf-16", "UTF-16"), ("utf-16-be", None), ("utf-32", "UTF-32")):
        text = 'pipeline = "remove_dropout"\n'
        other.write_bytes(("\ufeff" if encoding == "utf-16-be" else "") .encode(encoding) + text.encode(encoding))
        with pytest.raises(ConfigError) as info:
            load_config_file(other)
        assert str(info.value) == (
            f"cannot read config file {other}: it is not UTF-8 text (its byte order mark says {named or 'UTF-16'}; save it as UTF-8)"
        )


@pytest.mark.parametrize(
    "factory, why",
    [
        ("fm", "no ':callable' part: give the module and the function that builds the model, e.g. 'fm:build'"),
        # the function after a dot: that is the likely meaning (a new-user check: only 'models.make:build')
        (
            "models.make",
            "no ':callable' part: give the module and the function that builds the model: 'models:make' (a ':' "
            "before the function, not a '.'), or 'models.make:build'",
        ),
        (":build", "no module before the ':'"),
        ("fm:1build", "'1build' after the ':' is not a Python name (or dotted names)"),
        # an empty name in the dotted ones, a line break after them ($ matched before it): `check`
        # said OK and `run` failed later (an adversarial check)
        ("models:convnet.", "'convnet.' after the ':' is not a Python name (or dotted names)"),
        ("a:b..c", "'b..c' after the ':' is not a Python name (or dotted names)"),
        ("models:convnet\n", "'convnet\\n' after the ':' is not a Python name (or dotted names)"),
        ("mod\nels:convnet", "the module 'mod\\nels' holds a line break"),
    ],
)
def test_a_factory_that_is_not_module_colon_callable_says_which_part_is_wrong(tmp_path, factory, why):
    from fxpasses.config import load_config_file

    path = tmp_path / "c.toml"
    path.write_text(f'pipeline = "eliminate_dead_code"\n[model]\nfactory = {json.dumps(factory)}\ninputs = [{{shape=[2,3]}}]\n')
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert f"model.factory: `factory` must be 'module:callable' (as \"models:convnet\"): {why}" in str(info.value)
    load_config_file_ok = tmp_path / "ok.toml"
    load_config_file_ok.write_text('pipeline = "eliminate_dead_code"\n[model]\nfactory = "fm:lin"\ninputs = [{shape=[2,3]}]\n')
    assert load_config_file(load_config_file_ok).model.factory == "fm:lin"


@pytest.mark.parametrize("seed", [2**64, -(2**63) - 1])
def test_a_seed_outside_torch_manual_seeds_range_is_a_config_error(tmp_path, seed):
    """`check` said OK and `run` died in torch.manual_seed ("Overflow when unpacking long
    long", exit 3): the range is the config's, reported as model.seed with exit 2."""
    cfg = tmp_path / "s.toml"
    cfg.write_text(f'[model]\nfactory = "fxpasses._example:convnet"\nseed = {seed}\n')
    for command in (["check", str(cfg)], ["run", str(cfg), "--no-save"]):
        r = CliRunner().invoke(cli, command)
        assert r.exit_code == 2, r.output
        bound = "less than or equal to 18446744073709551615" if seed > 0 else "greater than or equal to -9223372036854775808"
        assert f"model.seed: Input should be {bound} (given: {seed})" in r.output
    import torch

    for ok in (2**64 - 1, -(2**63)):  # the ends of the range: torch takes them
        assert fxpasses.config.ModelConfig(factory="a:b", inputs=[{"shape": [1]}], seed=ok).seed == ok
        torch.manual_seed(ok)
    with pytest.raises(ValueError, match="Overflow"):
        torch.manual_seed(seed)
    torch.manual_seed(0)


@pytest.mark.parametrize("table", ["fxpass", "fx-passes", "FXPasses"])
def test_a_misspelt_tool_table_in_pyproject_is_named(tmp_path, monkeypatch, table):
    """A [tool.fxpass] table was skipped without a word (the search went on upwards and
    `fxpasses run` ran the bundled example): a ConfigWarning says which table was found, and
    loading that file by name says it in the error."""
    from fxpasses.config import find_project_config, load_config_file

    (tmp_path / "pyproject.toml").write_text(f'[tool.{table}]\npipeline = "eliminate_dead_code"\n')
    with pytest.warns(fxpasses.ConfigWarning) as caught:
        assert find_project_config(tmp_path) is None or find_project_config(tmp_path) != tmp_path / "pyproject.toml"
    assert str(caught[0].message) == (
        f"{tmp_path / 'pyproject.toml'} has a [tool.{table}] table, which is not read: did you mean "
        "[tool.fxpasses]? (looking further up for [tool.fxpasses])"
    )
    with pytest.raises(ConfigError) as info:
        load_config_file(tmp_path / "pyproject.toml")
    assert str(info.value) == (
        f"{tmp_path / 'pyproject.toml'}: no [tool.fxpasses] table (it has [tool.{table}]: did you mean [tool.fxpasses]?)"
    )


@pytest.mark.parametrize(
    "name, text",
    [("fx.toml", '[tool.fxpasses]\npipeline = "remove_dropout"\n'), ("fx.yaml", "tool:\n  fxpasses:\n    pipeline: remove_dropout\n")],
)
def test_a_tool_fxpasses_table_in_a_config_file_of_its_own_says_where_it_is_read(tmp_path, name, text):
    """It was "tool: unknown option; did you mean 'rtol'?" (found by a new-user check)."""
    from fxpasses.config import load_config_file

    (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config_file(tmp_path / name)
    table, keys = (
        ("[tool.fxpasses] table", "pipeline, [model], [options.NAME], ...")
        if name.endswith(".toml")
        else ("tool: {fxpasses: ...} mapping", "pipeline, model, options, ...")
    )
    assert str(info.value) == (
        f"{tmp_path / name}: a {table}: that table is read only from a file named pyproject.toml; in a config "
        f"file of its own, write its keys ({keys}) at the top level, without the tool.fxpasses prefix"
    )
    (tmp_path / "near.toml").write_text('[tool.fxpass]\npipeline = "remove_dropout"\n')  # misspelt too
    with pytest.raises(ConfigError, match=r"a \[tool\.fxpass\] table \(did you mean tool\.fxpasses\?\): that table is read only"):
        load_config_file(tmp_path / "near.toml")
    (tmp_path / "other.toml").write_text('pipeline = "remove_dropout"\n[tool.black]\nx = 1\n')  # any other tool: unknown key
    with pytest.raises(ConfigError, match="tool: unknown"):
        load_config_file(tmp_path / "other.toml")


def test_an_unrelated_tool_table_in_pyproject_is_not_taken_for_a_misspelling(tmp_path, recwarn):
    from fxpasses.config import find_project_config

    (tmp_path / "pyproject.toml").write_text('[tool.pytest]\nx = 1\n[tool.flake8]\ny = 2\n[tool.fxpasses_extra]\nz = 3\n')
    find_project_config(tmp_path)
    assert not [w for w in recwarn if issubclass(w.category, fxpasses.ConfigWarning)]


def test_a_fxpasses_toml_is_found_as_a_pyproject_table_is_and_comes_first(tmp_path, monkeypatch):
    """A `fxpasses.toml` in the working directory was ignored without a word: `fxpasses check`
    said no config was found, and `fxpasses run` optimized the bundled example instead of its
    model (a new-user check; the README's config section is headed `# fxpasses.toml`). It is
    found from the working directory up, before a pyproject.toml of the same folder, whose
    [tool.fxpasses] table is then named as not read; by the CLI, `Pipeline.from_config()` and
    the torch.compile backend."""
    from fxpasses.config import find_project_config

    (tmp_path / "fxpasses.toml").write_text(
        'pipeline = "eliminate_dead_code"\n[model]\nfactory = "fxpasses._example:convnet"\n'
        'inputs = [{ shape = [1, 3, 8, 8] }]\n'
    )
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert find_project_config() == tmp_path / "fxpasses.toml"
    r = CliRunner().invoke(cli, ["check"])
    assert r.exit_code == 0, r.output
    assert "eliminate_dead_code" in r.output and "remove_dropout" not in r.output
    r = CliRunner().invoke(cli, ["run", "--no-save", "--repeat", "1", "--format", "json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert [p["name"] for p in report["report"]["passes"]] == ["eliminate_dead_code"]
    assert fxpasses.Pipeline.from_config().plan().names() == ["eliminate_dead_code"]
    # beside a pyproject.toml with the table: fxpasses.toml is read, and the table named as not read
    (tmp_path / "pyproject.toml").write_text('[tool.fxpasses]\npipeline = "remove_dropout"\n')
    with pytest.warns(fxpasses.ConfigWarning) as caught:
        assert find_project_config(sub) == tmp_path / "fxpasses.toml"
    assert str(caught[0].message) == (
        f"{tmp_path / 'pyproject.toml'}'s [tool.fxpasses] table is not read: {tmp_path / 'fxpasses.toml'} beside it comes first"
    )
    # a nearer pyproject.toml with the table is nearer
    (sub / "pyproject.toml").write_text('[tool.fxpasses]\npipeline = "remove_dropout"\n')
    assert find_project_config(sub) == sub / "pyproject.toml"
    # one that is not a file is an error, not passed over
    (sub / "fxpasses.toml").mkdir()
    with pytest.raises(ConfigError, match=r"fxpasses.toml is a directory: the project config must be a TOML file"):
        find_project_config(sub)
    (sub / "fxpasses.toml").rmdir()
    (sub / "fxpasses.toml").symlink_to(tmp_path / "nowhere.toml")
    with pytest.raises(ConfigError, match=r"fxpasses.toml is a link to nothing"):
        find_project_config(sub)


def test_the_backend_reads_a_fxpasses_toml(tmp_path, monkeypatch):
    import fxpasses.backend

    torch._dynamo.reset()
    (tmp_path / "fxpasses.toml").write_text('pipeline = "eliminate_dead_code"\nverify = "none"\n')
    monkeypatch.chdir(tmp_path)
    fxpasses.backend.reports.clear()
    x = torch.randn(2, 3)
    out = torch.compile(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU()), backend="fxpasses", options={"then": "eager"})(x)
    assert out.shape == (2, 3)
    (report,) = fxpasses.backend.reports
    assert [p.name for p in report.passes] == ["eliminate_dead_code"]
    torch._dynamo.reset()
    fxpasses.backend.reports.clear()
    torch.compile(torch.nn.ReLU(), backend="fxpasses", options={"then": "eager", "pyproject": False})(x)
    assert [p.name for p in fxpasses.backend.reports[0].passes] == ["remove_dropout", "simplify_algebra", "eliminate_common_subexpressions", "eliminate_dead_code"]
    torch._dynamo.reset()


def test_fxpasses_run_names_a_misspelt_tool_table_on_a_warning_line(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.fxpass]\npipeline = "eliminate_dead_code"\n')
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["check"])
    assert r.stderr.splitlines()[0] == (
        f"warning: {tmp_path / 'pyproject.toml'} has a [tool.fxpass] table, which is not read: did you mean "
        "[tool.fxpasses]? (looking further up for [tool.fxpasses])"
    )


def test_a_plain_basemodel_options_rejects_unknown_keys_too():
    """An Options model that is a plain pydantic BaseModel (extra keys ignored) dropped a
    misspelt option without a word: fxpasses refuses unknown keys for it as PassOptions does."""
    from pydantic import BaseModel

    class Plain(fxpasses.GraphPass):
        """A pass whose options are a plain BaseModel."""

        name = "plain_bm"

        class Options(BaseModel):
            threshold: int = 1

        def run(self, gm, ctx):
            return False

    reg = Registry(autoload=False)
    reg.register(Plain)
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string("plain_bm{threshhold=5}", registry=reg)
    assert info.value.problems == [
        ("threshhold", "unknown option; did you mean 'threshold'? (valid: threshold)", 5)
    ]
    with pytest.raises(OptionsError):
        Pipeline([("plain_bm", {"threshold": 2, "other": 1})], registry=reg)
    assert Pipeline.from_string("plain_bm{threshold=5}", registry=reg).plan().steps[0].options.threshold == 5


class _Range(BaseModel):
    low: float = 0.0
    high: float = 1.0


class _NestedOpts(fxpasses.GraphPass):
    """A pass with nested plain-model options."""

    name = "nested_opts"

    class Options(fxpasses.PassOptions):
        rng: _Range = _Range()
        rngs: list[_Range] = []
        opt: _Range | None = None

    def run(self, gm, ctx):
        return False


def test_a_misspelt_key_of_a_nested_plain_basemodel_option_is_refused(tmp_path):
    """A nested option whose model is a plain BaseModel (`rng: Range`) dropped a misspelt key
    without a word: `nested_opts{rng={lo=1.0}}` planned as `nested_opts` and ran with the
    defaults, and `[options.nested_opts.rng]` with `lo = 5.0` lost `lo` (a new-user check).
    Such keys are refused at any depth (lists of models, optional models), from text, from a
    config and from Python; a nested PassOptions refused them already."""
    reg = Registry(autoload=False)
    reg.register(_NestedOpts)
    cases = [
        ("nested_opts{rng={lo=1.0}}", ("rng.lo", "unknown option; did you mean 'low'? (valid: low, high)", 1.0)),
        ("nested_opts{rngs=[{low=1.0},{hgh=2.0}]}", ("rngs.1.hgh", "unknown option; did you mean 'high'? (valid: low, high)", 2.0)),
        ("nested_opts{opt={lo=1.0}}", ("opt.lo", "unknown option; did you mean 'low'? (valid: low, high)", 1.0)),
    ]
    for text, problem in cases:
        with pytest.raises(OptionsError) as info:
            Pipeline.from_string(text, registry=reg)
        assert info.value.problems == [problem], text
    with pytest.raises(OptionsError) as info:
        Pipeline([("nested_opts", {"rng": {"lo": 2.0, "high": 3.0}})], registry=reg)
    assert [p[0] for p in info.value.problems] == ["rng.lo"]
    path = tmp_path / "fxpasses.toml"
    path.write_text('pipeline = ["nested_opts"]\n[options.nested_opts.rng]\nlo = 5.0\nhigh = 9.0\n')
    with pytest.raises(OptionsError, match=r"nested_opts.rng.lo.*unknown option; did you mean 'low'"):
        Pipeline.from_config(path, registry=reg)
    good = Pipeline.from_string("nested_opts{rng={low=1.0,high=3.0},rngs=[{high=2.0}]}", registry=reg)
    options = good.plan().steps[0].options
    assert (options.rng.low, options.rng.high, options.rngs[0].high) == (1.0, 3.0, 2.0)


def test_a_duplicate_key_in_a_json_config_names_the_object_where_it_is(tmp_path):
    """JSON's error said only "duplicate key 'max_numel'", where YAML's names the line (found
    by a new-user check): json's object hook gets no position, so the object's is given."""
    path = tmp_path / "c.json"
    path.write_text('{\n  "pipeline": "fold_constants",\n  "options": {"fold_constants":\n     {"max_numel": 1, "max_numel": 2}}}\n')
    with pytest.raises(ConfigError) as info:
        Pipeline.from_config(path)
    assert "invalid JSON: duplicate key 'max_numel' in the object at line 4, column 6" in str(info.value)


def test_yaml_merge_keys_work_as_in_yaml_safe_load(tmp_path):
    """A YAML 1.1 merge key (`<<: *checked`) was refused: "could not determine a constructor for
    the tag 'tag:yaml.org,2002:merge'" (the duplicate-key check constructed every key; an
    adversarial check). The mapping's own keys override merged ones; its own key given twice
    is still refused."""
    path = tmp_path / "c.yaml"
    path.write_text(
        "pipeline:\n"
        "  - &checked {name: fuse_conv_bn, verify: numeric, atol: 1.0e-4}\n"
        "  - {<<: *checked, name: fold_constants}\n"
        "  - eliminate_dead_code\n"
    )
    described = [s.describe() for s in Pipeline.from_config(path).plan().steps]
    assert described == [
        "fuse_conv_bn[verify=numeric,atol=0.0001]",
        "fold_constants[verify=numeric,atol=0.0001]",
        "eliminate_dead_code",
    ]
    path.write_text(
        "pipeline:\n  - &checked {name: fuse_conv_bn, verify: numeric}\n  - {<<: *checked, name: a, name: b}\n"
    )
    with pytest.raises(ConfigError, match=r"duplicate key 'name' \(line 3, column 29\)"):
        Pipeline.from_config(path)


@pytest.mark.parametrize(
    "model, key",
    [
        ({"factory": "m:make", "inputs": ""}, "inputs"),
        ({"factory": "m:make", "inputs": " "}, "inputs"),
        ({"graph": " ", "inputs": [{"shape": [1]}]}, "graph"),
        ({"program": ""}, "program"),
    ],
)
def test_a_blank_model_path_is_an_empty_path(model, key):
    """`inputs = " "` ran into "tensor file not found: /dir/ " and `inputs = ""` was pydantic's
    "Value should have at least 1 item after validation" (a new-user check), as `output`
    was before."""
    from fxpasses.config import parse_config

    with pytest.raises(ConfigError) as info:
        parse_config({"pipeline": "remove_dropout", "model": model})
    assert f"model.{key}: an empty path ({model[key]!r}); give a file" in str(info.value)


def test_python_wording_for_a_quoted_tolerance_and_flags_that_must_be_booleans():
    """`Pipeline(..., atol="1e-5")` got no "drop the quotes" hint, and `Registry(strict="true")`
    was strict, "false" too (a new-user check)."""
    with pytest.raises(ConfigError) as info:
        Pipeline(["remove_dropout"], atol="1e-5")
    assert str(info.value) == "atol must be a finite number >= 0, got '1e-5'; a number in quotes is a string: write 1e-5 without the quotes"
    # a keyword argument of from_string/from_preset is not the string's or the preset's (it
    # said "pipeline string: atol must be ...": an adversarial check)
    for make in (lambda: Pipeline.from_string("remove_dropout", atol=float("inf")), lambda: Pipeline.from_preset("inference", atol=float("inf"))):
        with pytest.raises(ConfigError) as info:
            make()
        assert str(info.value) == "atol must be a finite number >= 0, got inf"
    for flag in ("strict", "autoload"):
        with pytest.raises(TypeError, match=rf"Registry\({flag}=\.\.\.\) takes True or False, got 'false'"):
            Registry(**{flag: "false"})


def test_json_errors_hold_no_python_reprs(tmp_path):
    """`--format json` error objects carried `"python_keys": "frozenset()"` (a new-user check):
    a set is written as a sorted list."""
    (tmp_path / "c.toml").write_text('pipeline = "remove_dropout{inference=3}"\n')
    r = CliRunner().invoke(cli, ["check", str(tmp_path / "c.toml"), "--format", "json"])
    error = json.loads(r.stdout)["error"]
    assert error["type"] == "OptionsError" and error["python_keys"] == []
    assert "frozenset" not in r.stdout


@pytest.mark.parametrize("train, preset", [("false", "inference"), ("true", "training")])
def test_pipeline_from_config_with_a_model_and_no_pipeline_runs_what_the_cli_runs(tmp_path, train, preset):
    """`fxpasses check`/`run` gave such a config its default preset; Pipeline.from_config
    refused it, saying only a config with a [model] gets one (a new-user check)."""
    cfg = tmp_path / "m.toml"
    cfg.write_text(f'[model]\nfactory = "fxpasses._example:convnet"\ntrain = {train}\ninputs = [{{ shape = [1, 3, 8, 8] }}]\n')
    plan = fxpasses.Pipeline.from_config(cfg).plan()
    assert plan.as_pipeline_string() == fxpasses.Pipeline.from_preset(preset).plan().as_pipeline_string()


def test_values_nested_hundreds_deep_are_config_errors_naming_the_format(tmp_path):
    """A pipeline string with an option nested 400 lists deep was an internal error
    (RecursionError, exit status 3); a TOML or JSON file nested 1500 deep was "invalid YAML"
    (a new-user check)."""
    deep = "[" * 400 + "]" * 400
    with pytest.raises(fxpasses.errors.ConfigError, match=r"column 126: values nested more than 100 lists or tables deep"):
        fxpasses.Pipeline.from_string(f"remove_dropout{{inference={deep}}}")
    nested = "[" * 1500 + "]" * 1500
    (tmp_path / "deep.toml").write_text(f'pipeline = "remove_dropout"\n[options.remove_dropout]\nx = {nested}\n')
    (tmp_path / "deep.json").write_text(f'{{"pipeline": "remove_dropout", "options": {{"remove_dropout": {{"x": {nested}}}}}}}')
    for name, kind in (("deep.toml", "TOML"), ("deep.json", "JSON")):
        with pytest.raises(fxpasses.errors.ConfigError, match=rf"invalid {kind}: values nested too deep for the parser"):
            fxpasses.Pipeline.from_config(tmp_path / name)


@pytest.mark.parametrize("table", ["", "options.remove_dropout.", "model.", "pipeline.options.", "model.kwargs."])
def test_a_toml_table_header_thousands_deep_is_a_config_error_naming_the_keys(tmp_path, table):
    """`[a.a. ... .a]` 5000 deep: TOML's parser builds it without recursing, and the error
    message's repr of the value (or a later walk of it) raised RecursionError, an internal
    error (exit status 3; an adversarial check). It is refused before anything walks it."""
    path = tmp_path / "d.toml"
    header = table + ".".join(["a"] * 5000)
    first = "" if table.startswith("pipeline") else 'pipeline = "remove_dropout"\n'
    path.write_text(f"{first}[{header}]\n")
    shown = ".".join((table + "a.a.a.a.a.a").split(".")[:6])
    expected = (
        f"{path}: values nested too deep: more than 200 tables or lists, at {shown} ...; no config value needs "
        "more than a few levels"
    )
    with pytest.raises(ConfigError) as info:
        fxpasses.config.load_config_file(path)
    assert str(info.value) == expected
    r = CliRunner().invoke(cli, ["check", str(path)])
    assert r.exit_code == 2 and r.output == f"error: {expected}\n", r.output


def test_config_data_nested_too_deep_is_refused_wherever_it_comes_from():
    """The depth is checked on config data from Python too, and a YAML alias that holds itself
    (`x: &a [1, *a]`) is nested too deep; 200 levels are still read."""
    deep: dict = {}
    inner = deep
    for _ in range(300):
        inner["k"] = {}
        inner = inner["k"]
    with pytest.raises(ConfigError) as info:
        fxpasses.config.parse_config({"pipeline": "remove_dropout", "model": {"kwargs": deep}})
    assert str(info.value) == (
        "config: values nested too deep: more than 200 tables or lists, at model.kwargs.k.k.k.k ...; no config "
        "value needs more than a few levels"
    )
    with pytest.raises(ConfigError, match=r"at options\.remove_dropout\.x\.1\.1\.1 \.\.\.;"):
        fxpasses.config.parse_config(fxpasses.config._load_yaml("pipeline: remove_dropout\noptions:\n  remove_dropout:\n    x: &a [1, *a]\n"))
    value: list = []
    for _ in range(196):  # 197 lists in [model] kwargs: 200 levels in all
        value = [value]
    cfg = fxpasses.config.parse_config({"pipeline": "remove_dropout", "model": {"factory": "m:f", "inputs": [{"shape": [1]}], "kwargs": {"x": value}}})
    assert cfg.model.kwargs["x"] == value


class AnyValuePass(fxpasses.GraphPass):
    """Takes any value, and a dict, as options."""

    name = "any_value"

    class Options(fxpasses.PassOptions):
        x: object = None
        table: dict = {}

    def run(self, gm, ctx):
        return False


def test_options_nested_too_deep_from_python_are_options_errors_naming_the_path():
    """`Pipeline([(P, {"x": <a list 5000 deep>})])` was built, then failed in the run with
    "creating the pass failed: RecursionError" (a dict field's raised RecursionError as the
    pipeline was built): options from Python were never depth-checked, as a config file's are.
    They are refused as the pipeline is built, naming the pass and the path; a value that holds
    itself is nested too deep; an Options instance given as is is checked too; 200 levels are
    still taken."""
    listed: object = 1
    for _ in range(5000):
        listed = [listed]
    tabled: dict = {}
    for _ in range(5000):
        tabled = {"a": tabled}
    itself: list = []
    itself.append(itself)
    given = {"x": listed, "table": {"t": tabled}, "x_self": itself}
    for key, path in (("x", "x.0.0.0.0.0 ..."), ("table", "table.t.a.a.a.a ..."), ("x_self", "x.0.0.0.0.0 ...")):
        options = {key.removesuffix("_self"): given[key]}
        with pytest.raises(OptionsError) as info:
            Pipeline([(AnyValuePass, options)])
        assert str(info.value) == (
            "invalid options for pass 'any_value' (pipeline, entry 1):\n"
            f"  any_value.{path}: nested more than 200 lists or dicts deep; no option value needs more than a few "
            "levels (given: <nested more than 200 deep>)"
        )
    with pytest.raises(OptionsError, match=r"any_value\.x\.0\.0\.0\.0\.0 \.\.\.: nested more than 200"):
        Pipeline([(AnyValuePass, AnyValuePass.Options(x=listed))])
    fine: object = 1
    for _ in range(199):  # 200 levels with the options' own dict
        fine = [fine]
    gm = torch.fx.symbolic_trace(torch.nn.ReLU())
    assert Pipeline([(AnyValuePass, {"x": fine})]).run(gm).passes[0].status == "ok"


class AliasSetPass(fxpasses.GraphPass):
    """Options with an alias and of set types."""

    name = "alias_set"

    class Options(fxpasses.PassOptions):
        from_: int = Field(default=0, alias="from")
        names: set[str] = set()
        ids: frozenset[int] = frozenset()

    def run(self, gm, ctx):
        return False


def test_options_with_an_alias_or_a_set_type_print_as_they_read_back():
    """A plan printed an aliased option by its field name (`from_=3`), which only the alias
    read, and a set as Python's repr (`{'b', 'a'}`, `frozenset({1, 2})`), which the pipeline
    syntax reads as a table or refuses: plans, `report.json` and reproducers did not read back
    (an adversarial check). An option prints by its alias and reads by either name; a set
    prints as a sorted list."""
    from fxpasses.reproducer import _entry

    r = Registry(autoload=False)
    r.register(AliasSetPass)
    p = Pipeline.from_string("alias_set{from=3,names=[b,a],ids=[2,1]}", registry=r)
    (printed,) = [s.describe() for s in p.plan().steps]
    assert printed == "alias_set{from=3,names=[a,b],ids=[1,2]}"
    again = Pipeline.from_string(printed, registry=r).plan().steps[0].options
    assert again == p.plan().steps[0].options and again.from_ == 3 and again.names == {"a", "b"}
    assert Pipeline.from_string("alias_set{from_=3}", registry=r).plan().steps[0].options.from_ == 3
    with pytest.raises(OptionsError, match=r"unknown option; did you mean 'from'\? \(valid: from, names, ids\)"):
        Pipeline.from_string("alias_set{frm=3}", registry=r)
    entry = _entry(p.plan().steps[0], "lint", "rollback")
    assert sorted(entry["options"]) == ["from", "ids", "names"] and entry["options"]["from"] == 3
    assert sorted(entry["options"]["names"]) == ["a", "b"] and sorted(entry["options"]["ids"]) == [1, 2]
    assert Pipeline([{"name": "alias_set", "options": entry["options"]}], registry=r).plan().steps[0].options == again
    assert [o.name for o in r.describe("alias_set").options] == ["from", "names", "ids"]
    # one option by its name and its alias is one option given twice, not an unknown one (it
    # said "from_: unknown option; did you mean 'from'?": a second check)
    with pytest.raises(OptionsError, match=r"alias_set.from \(column \d+\): given twice, as 'from_' and as 'from'"):
        Pipeline.from_string("alias_set{from_=1,from=2}", registry=r)
    with pytest.raises(ConfigError, match=r"set twice, here and in options\['alias_set'\]: from=2 here, from=5 there"):
        Pipeline.from_string("alias_set{from=2}", registry=r, options={"alias_set": {"from_": 5}})


def test_a_required_option_with_an_alias_registers_and_is_required_by_either_name():
    """A required option declared with an alias made registration fail, "invalid default option
    value(s) ... from: Field required": the required-field check compared field names with the
    alias pydantic names a missing field by (a second check)."""

    class NeedsFrom(fxpasses.GraphPass):
        """Needs from."""

        name = "needs_from"

        class Options(fxpasses.PassOptions):
            from_: int = Field(alias="from")

        def run(self, gm, ctx):
            return False

    r = Registry(autoload=False)
    r.register(NeedsFrom)
    assert Pipeline.from_string("needs_from{from=3}", registry=r).plan().steps[0].options.from_ == 3
    assert Pipeline.from_string("needs_from{from_=4}", registry=r).plan().steps[0].options.from_ == 4
    with pytest.raises(OptionsError, match=r"needs_from.from: Field required"):
        Pipeline.from_string("needs_from", registry=r)


@pytest.mark.parametrize(
    "key, shown",
    [("null", "key null (line 3, column 34) is null"), ("on", "key true (line 3, column 34) is a bool"), ("1.5", "key 1.5 (line 3, column 34) is a float")],
)
def test_a_yaml_key_that_is_not_text_is_refused_naming_it(tmp_path, key, shown):
    """PyYAML reads `null:`/`on:` as None/True keys, which were read later as 'None'/'True'
    text; and `{1: 2.0, "1": 3.0}` was one key, 2.0 lost without a word (an adversarial
    check). TOML's and JSON's keys are text: a YAML key that is not is refused, naming its
    place, but for an integer (an input's position, `0:`), read as its digits; an integer and
    the text of its digits in one mapping are refused as one key twice."""
    from fxpasses.config import load_config_file

    path = tmp_path / "c.yaml"
    path.write_text(f'pipeline: [fold_constants]\noptions:\n  fold_constants: {{max_numel: 4, {key}: 2.0}}\n')
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert f"invalid YAML: {shown}, and a config's keys are text: quote it, '{key}'" in str(info.value), str(info.value)
    path.write_text("pipeline: [fold_constants]\noptions:\n  fold_constants: {max_numel: 4, '1': 2.0}\n")
    assert load_config_file(path).options["fold_constants"]["1"] == 2.0  # quoted: text, read (and refused later as no option)
    path.write_text("pipeline: [fold_constants]\noptions:\n  ? [a, b]\n  : 1\n")  # a list as a key: shown as read
    with pytest.raises(ConfigError, match=r"invalid YAML: key \[a, b\] \(line 3, column 5\) is a list: a config's keys are text"):
        load_config_file(path)
    path.write_text("pipeline: [fold_constants]\noptions:\n  fold_constants: {max_numel: 4, 1: 2.0, '1': 3.0}\n")
    with pytest.raises(ConfigError, match=r"invalid YAML: key '1' \(line 3, column 42\) is key 1 again once read as text"):
        load_config_file(path)


class _AliasedInner(BaseModel):
    model_config = {"populate_by_name": True}
    inner_name: int = Field(1, alias="innerAlias")


class _AliasedOnlyInner(BaseModel):
    inner_name: int = Field(1, alias="innerAlias")


class _AliasedInnerOptions(fxpasses.PassOptions):
    inner_name: int = Field(1, alias="innerAlias")


class _HoldsAliased(fxpasses.PassOptions):
    al: _AliasedInner = _AliasedInner()
    ap: _AliasedInnerOptions = _AliasedInnerOptions()
    many: list[_AliasedInner] = []
    only: _AliasedOnlyInner = _AliasedOnlyInner()


@pytest.mark.parametrize(
    "text, said",
    [
        # a plain model taking names: one of the two values was kept without a word
        ("h{al={inner_name=5,innerAlias=6}}", "h.al.innerAlias (column 3): given twice, as 'inner_name' and as 'innerAlias'"),
        # a nested PassOptions: "unknown option; did you mean 'innerAlias'" for a name it takes
        ("h{ap={inner_name=5,innerAlias=6}}", "h.ap.innerAlias (column 3): given twice, as 'inner_name' and as 'innerAlias'"),
        ("h{many=[{innerAlias=1},{inner_name=5,innerAlias=6}]}", "h.many.1.innerAlias (column 3): given twice"),
    ],
)
def test_a_nested_field_given_by_its_name_and_its_alias_is_given_twice(text, said):
    """(an adversarial check) The top-level options said so; the tables of nested models did not."""
    r = Registry(autoload=False)
    r.register(type("H", (fxpasses.GraphPass,), {"__doc__": "x", "name": "h", "Options": _HoldsAliased, "run": lambda self, gm, ctx: False}))
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string(text, registry=r).plan()
    assert said in str(info.value) and "unknown option" not in str(info.value), str(info.value)
    # one name alone is read; a model taking its alias only still calls the name unknown
    assert Pipeline.from_string("h{al={inner_name=5},ap={inner_name=4}}", registry=r).plan().steps[0].options.ap.inner_name == 4
    with pytest.raises(OptionsError, match=r"h\.only\.inner_name .*unknown option"):
        Pipeline.from_string("h{only={inner_name=5,innerAlias=6}}", registry=r).plan()


def test_options_errors_from_the_entry_and_the_table_say_which_came_from_the_table(tmp_path):
    """With bad options in both a pipeline entry and the [options.NAME] table, every problem
    was listed under the entry's source, the table's too (a new-user check)."""
    from fxpasses.errors import OptionsError

    path = tmp_path / "n3.toml"
    path.write_text(
        'pipeline = ["remove_dropout", {name = "fold_constants", options = {max_numl = 5}}]\n'
        "[options.fold_constants]\nremove_unused_state = 1\n"
    )
    with pytest.raises(OptionsError) as info:
        fxpasses.Pipeline.from_config(str(path)).plan()
    lines = str(info.value).splitlines()
    assert lines[0] == f"invalid options for pass 'fold_constants' ({path}: pipeline, entry 2):"
    assert lines[1] == (
        f"  fold_constants.remove_unused_state: Input should be a valid boolean (set in {path} [options.fold_constants]) "
        "(given: 1)"
    )
    assert lines[2].startswith("  fold_constants.max_numl: unknown option; did you mean 'max_numel'?")
    assert "set in" not in lines[2]


def test_a_toml_key_given_twice_is_named(tmp_path):
    """tomllib says only "Cannot overwrite a value (at line 3, column 19)"; YAML and JSON name
    the duplicate key (a new-user check)."""
    path = tmp_path / "d.toml"
    path.write_text('pipeline = "remove_dropout"\nverify = "lint"\nverify = "numeric"\n')
    with pytest.raises(fxpasses.ConfigError) as info:
        fxpasses.Pipeline.from_config(str(path))
    assert str(info.value) == (
        f"{path}: invalid TOML: duplicate key 'verify', given a value before (tomllib: Cannot overwrite a value "
        "(at line 3, column 19))"
    )


@pytest.mark.parametrize(
    "text, key",
    [
        ('pipeline = "a"\npipeline = """\nsimplify_algebra{k=1}"""\n', "pipeline"),  # a value of several lines
        ('"x=y" = 1\n"x=y" = 2\n', "x=y"),  # a quoted key holding =
        ('pipeline = ["a"]\npipeline = [\n "x",\n]\n', "pipeline"),
        ('pipeline = "a"\n[model]\nseed = 1\nseed = 2\n', "model.seed"),  # in a table
    ],
)
def test_a_toml_key_given_twice_is_named_whatever_its_value_spans(tmp_path, text, key):
    """The key was read from the line tomllib points at, which is where the repeated value
    ends: `pipeline = \"\"\"...{k=1}\"\"\"` named 'simplify_algebra{k' (an adversarial check)."""
    path = tmp_path / "d.toml"
    path.write_text(text)
    with pytest.raises(fxpasses.ConfigError) as info:
        fxpasses.Pipeline.from_config(str(path))
    assert str(info.value).startswith(f"{path}: invalid TOML: duplicate key {key!r}, given a value before (tomllib: ")


@pytest.mark.parametrize(
    "text, first",
    [
        ("pipeline: [remove_dropout\n", "while parsing a flow sequence"),
        ("pipeline: remove_dropout\n  bad: indent\n", "mapping values are not allowed here"),
        ("pipeline: !!python/object:os.system {}\n", "could not determine a constructor for the tag"),
        ("pipeline: a\n---\npipeline: b\n", "expected a single document in the stream"),
    ],
)
def test_a_yaml_syntax_error_names_the_file_where_pyyaml_names_its_text(tmp_path, text, first):
    """PyYAML's own errors located the problem ``in "<unicode string>", line 1, column 11``:
    the config was read as text, and PyYAML names text so (a new-user check). They name the
    file, as the message's first words do."""
    path = tmp_path / "fx.yaml"
    path.write_text(text)
    with pytest.raises(fxpasses.ConfigError) as info:
        fxpasses.config.load_config_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}: invalid YAML: {first}")
    assert "<unicode string>" not in message
    assert f'in "{path}", line ' in message


class _Tiling(BaseModel):
    size: int = 4


class _Outer(BaseModel):
    tiling: _Tiling = _Tiling()


class _DottedPass(fxpasses.GraphPass):
    """A pass with nested options models, one inside another."""

    name = "dotted"

    class Options(fxpasses.PassOptions):
        tiling: _Tiling = _Tiling(size=8)
        outer: _Outer | None = None

    def run(self, gm, ctx):
        return False


_TILING_SIZE_HINT = (
    "unknown option; tiling.size is the field size of option 'tiling', given in a table for it: tiling={size=16} "
    "in a pipeline string, {'tiling': {'size': 16}} in Python (in a TOML file, the key tiling.size unquoted makes "
    "that table); a table given for an option replaces its default as a whole (the fields it leaves out take their "
    "own defaults)"
)


def test_a_nested_field_given_by_the_dotted_name_show_lists_says_how_it_is_given(tmp_path):
    """`fxpasses show` and `Registry.describe` list a nested options model's field as
    `tiling.size`, but `{"tiling.size": 16}` (from Python, a list entry, a config's quoted TOML
    key) said "unknown option; did you mean 'tiling'? (valid: tiling, outer)", not how to give
    it (a new-user check). The error now says it is the field `size` of option `tiling`, given
    in a table for it, which replaces the option's default as a whole."""
    reg = Registry(autoload=False)
    reg.register(_DottedPass)
    assert [f.name for o in reg.describe("dotted").options for f in o.fields][:1] == ["tiling.size"]
    problem = ("tiling.size", _TILING_SIZE_HINT, 16)
    for make in (
        lambda: Pipeline(["dotted"], options={"dotted": {"tiling.size": 16}}, registry=reg),
        lambda: Pipeline([("dotted", {"tiling.size": 16})], registry=reg),
        lambda: Pipeline.from_string("dotted{'tiling.size'=16}", registry=reg),  # a quoted name
    ):
        with pytest.raises(OptionsError) as info:
            make()
        assert info.value.problems == [problem]
    path = tmp_path / "fxpasses.toml"
    path.write_text('pipeline = ["dotted"]\n[options.dotted]\n"tiling.size" = 16\n')
    with pytest.raises(OptionsError) as info:
        Pipeline.from_config(path, registry=reg)
    assert info.value.problems == [problem]
    # deeper, through an Optional model
    with pytest.raises(OptionsError) as info:
        Pipeline([("dotted", {"outer.tiling.size": 2})], registry=reg)
    assert info.value.problems == [
        (
            "outer.tiling.size",
            "unknown option; outer.tiling.size is the field size of outer.tiling, in option 'outer', given in a "
            "table for it: outer={tiling={size=2}} in a pipeline string, {'outer': {'tiling': {'size': 2}}} in "
            "Python (in a TOML file, the key outer.tiling.size unquoted makes that table); a table given for an "
            "option replaces its default as a whole (the fields it leaves out take their own defaults)",
            2,
        )
    ]
    # a dotted name that is no field's path keeps the plain message
    with pytest.raises(OptionsError) as info:
        Pipeline([("dotted", {"tiling.sise": 2})], registry=reg)
    assert info.value.problems == [("tiling.sise", "unknown option; did you mean 'tiling'? (valid: tiling, outer)", 2)]
    # the unquoted TOML key is the table, which replaces the default (size=8) as a whole
    path.write_text('pipeline = ["dotted"]\n[options.dotted]\ntiling.size = 16\n')
    assert Pipeline.from_config(path, registry=reg).plan().steps[0].options.tiling == _Tiling(size=16)


# ------------------------------------------------------------------ dates and times


class Stamp(BaseModel):
    label: str = ""


class DatedOptions(fxpasses.PassOptions):
    tag: str = ""
    tags: list[str] = []
    stamp: Stamp = Stamp()
    day: datetime.date | None = None
    either: str | datetime.date = ""


class DatedPass(fxpasses.GraphPass):
    """A pass with text options and one date option."""

    name = "dated"
    Options = DatedOptions

    def run(self, gm, ctx):
        return False


@pytest.mark.parametrize(
    "filename, text, lines",
    [
        (
            "c.toml",
            'pipeline = [{name = "dated", options = {tag = 1979-05-27, tags = ["a", 07:32:00], stamp = {label = 1979-05-27T07:32:00}}}]\n',
            [
                '  dated.tag: an unquoted 1979-05-27 in a config file is a date (TOML and YAML read it so), not text: '
                'quote it to mean the text, "1979-05-27" (given: datetime.date(1979, 5, 27))',
                '  dated.tags.1: an unquoted 07:32:00 in a config file is a time (TOML and YAML read it so), not text: '
                'quote it to mean the text, "07:32:00" (given: datetime.time(7, 32))',
                '  dated.stamp.label: an unquoted 1979-05-27T07:32:00 in a config file is a date and time (TOML and YAML '
                'read it so), not text: quote it to mean the text, "1979-05-27T07:32:00" (given: '
                "datetime.datetime(1979, 5, 27, 7, 32))",
            ],
        ),
        (
            "c.yaml",
            "pipeline: dated\noptions:\n  dated: {tag: 2001-12-14}\n",
            ['  dated.tag: an unquoted 2001-12-14 in a config file is a date (TOML and YAML read it so), not text: quote '
             'it to mean the text, "2001-12-14" (given: datetime.date(2001, 12, 14))'],
        ),
    ],
)
def test_an_unquoted_date_or_time_for_a_text_option_is_an_error_saying_to_quote_it(tmp_path, filename, text, lines):
    """TOML and YAML read an unquoted 1979-05-27 as a date; the JSON round trip of config
    values made it text, which a text option took: the pass got '1979-05-27' (YAML's
    datetimes reformatted) though the user wrote no text, and `fxpasses schema` refused what
    `check` took (an adversarial check). It is now an error saying to quote it; a date option
    still takes it, and so does one taking text or a date (`str | date`: a final new-user
    check found it refused)."""
    r = Registry(autoload=False)
    r.register(DatedPass)
    path = tmp_path / filename
    path.write_text(text)
    with pytest.raises(OptionsError) as info:
        Pipeline.from_config(path, registry=r)
    got = str(info.value).splitlines()
    for line in lines:
        assert line in got, got
    path = tmp_path / "right.toml"
    path.write_text('pipeline = [{name = "dated", options = {tag = "1979-05-27", day = 1979-05-27, either = 1979-05-27}}]\n')
    o = options(Pipeline.from_config(path, registry=r))
    assert (o.tag, o.day, o.either) == ("1979-05-27", datetime.date(1979, 5, 27), datetime.date(1979, 5, 27))
    path.write_text('pipeline = [{name = "dated", options = {either = "1979-05-27"}}]\n')
    assert options(Pipeline.from_config(path, registry=r)).either == "1979-05-27"
