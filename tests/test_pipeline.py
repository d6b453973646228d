"""Pipelines: construction from lists, strings and config files; ordering; plans; errors."""

from __future__ import annotations

import enum
import json
import pathlib
import re
from typing import Annotated, Literal, Union

from pathlib import Path

import pydantic
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import fxpasses
from fxpasses import ConfigError, CycleError, OptionsError, Pipeline, Registry, UnknownPassError, UserError
from fxpasses.spec import format_value, parse_pipeline_string


def make_pass(name, requires=(), after=(), before=(), options=None):
    ns = {
        "__doc__": f"{name} pass",
        "name": name,
        "requires": tuple(requires),
        "after": tuple(after),
        "before": tuple(before),
        "run": lambda self, gm, ctx: False,
    }
    if options is not None:
        ns["Options"] = options
    return type(name.title(), (fxpasses.GraphPass,), ns)


class CSEOptions(fxpasses.PassOptions):
    skip_random_ops: bool = True
    max_numel: int = 4096
    scale: float = 1.0
    names: list[str] = []


@pytest.fixture
def reg():
    r = Registry(autoload=False)
    for p in [
        make_pass("a"),
        make_pass("b"),
        make_pass("c", requires=("a",)),
        make_pass("d", after=("b",)),
        make_pass("e", before=("a",)),
        make_pass("f", requires=("c",)),
        make_pass("cse", options=CSEOptions),
        make_pass("x", after=("y",)),
        make_pass("y", after=("z",)),
        make_pass("z", after=("x",)),
    ]:
        r.register(p)
    return r


def names(p):
    return p.plan().names()


def test_user_order_kept_when_no_constraints(reg):
    assert names(Pipeline(["b", "a", "cse"], registry=reg)) == ["b", "a", "cse"]


def test_requires_pulls_in_missing_pass_before_its_user(reg):
    plan = Pipeline(["b", "f"], registry=reg).plan()
    assert plan.names() == ["b", "a", "c", "f"]
    assert plan.steps[1].reasons == ["pulled in: required by c"]
    assert plan.steps[2].reasons == ["pulled in: required by f"]


def test_options_for_a_pulled_in_pass_are_its_options(reg, tmp_path):
    """The plan showed the pulled-in pass, and its [options.NAME] table was "options given for
    pass(es) not in the pipeline" (found by a new-user check)."""
    reg.register(make_pass("needs_cse", requires=("cse",)))
    plan = Pipeline(["needs_cse"], options={"cse": {"max_numel": 7}}, registry=reg).plan()
    assert [(s.name, s.reasons) for s in plan.steps] == [("cse", ["pulled in: required by needs_cse"]), ("needs_cse", [])]
    assert plan.steps[0].options.max_numel == 7
    (tmp_path / "c.toml").write_text('pipeline = "needs_cse"\n[options.cse]\nmax_numel = 9\nnames = ["a"]\n')
    step = Pipeline.from_config(tmp_path / "c.toml", registry=reg).plan().steps[0]
    assert (step.name, step.options.max_numel, step.options.names) == ("cse", 9, ["a"])
    # validated as an entry's options are, named as the table
    (tmp_path / "c.toml").write_text('pipeline = "needs_cse"\n[options.cse]\nmax_numl = 9\n')
    with pytest.raises(OptionsError) as info:
        Pipeline.from_config(tmp_path / "c.toml", registry=reg)
    assert str(info.value).splitlines() == [
        f"invalid options for pass 'cse' ({tmp_path / 'c.toml'} [options.cse]):",
        "  cse.max_numl: unknown option; did you mean 'max_numel'? (valid: skip_random_ops, max_numel, scale, names) (given: 9)",
    ]
    # a pass neither named nor pulled in still may not be given options
    with pytest.raises(ConfigError, match="options given for pass\\(es\\) not in the pipeline: a"):
        Pipeline(["needs_cse"], options={"a": {}}, registry=reg)


def test_options_for_an_analysis_run_on_demand_under_as_given_are_its_options():
    """With order="as-given" an analysis an entry requires still runs, on demand, but its options
    table was "options given for pass(es) not in the pipeline" (found by a new-user check)."""
    seen = []

    class Stats(fxpasses.GraphPass):
        """An analysis with an option."""

        name = "stats"
        kind = "analysis"
        Options = CSEOptions

        def run(self, gm, ctx):
            seen.append(self.options.max_numel)
            return False

    r = Registry(autoload=False)
    r.register(Stats)
    r.register(make_pass("uses_stats", requires=("stats",)))
    gm = torch.fx.symbolic_trace(torch.nn.ReLU())
    p = Pipeline(["uses_stats"], order="as-given", options={"stats": {"max_numel": 3}}, registry=r)
    assert p.plan().names() == ["uses_stats"]  # pulled into no plan
    report = p.run(gm)
    assert [(x.name, x.reasons) for x in report.passes] == [("stats", ["on demand: required by uses_stats"]), ("uses_stats", [])]
    assert seen == [3]
    with pytest.raises(OptionsError, match="stats.max_numel: Input should be a valid integer"):  # when built
        Pipeline(["uses_stats"], order="as-given", options={"stats": {"max_numel": "x"}}, registry=r)
    with pytest.raises(ConfigError, match="not in the pipeline: cse"):  # neither planned nor demanded
        Pipeline(["uses_stats"], order="as-given", options={"cse": {}}, registry=r)


def test_requires_moves_a_later_instance_earlier(reg):
    plan = Pipeline(["c", "b", "a"], registry=reg).plan()
    assert plan.names() == ["a", "c", "b"]
    assert plan.steps[0].reasons == ["moved before c: c requires a"]


def test_after_and_before_only_order_present_passes(reg):
    assert names(Pipeline(["d", "a"], registry=reg)) == ["d", "a"]  # b absent: nothing pulled in
    assert names(Pipeline(["d", "b"], registry=reg)) == ["b", "d"]
    assert names(Pipeline(["a", "e"], registry=reg)) == ["e", "a"]



def test_after_and_before_with_several_instances_keep_the_users_order_where_it_meets_them(reg):
    """`eliminate_dead_code,fuse_conv_bn,eliminate_dead_code` ran fuse, DCE, DCE: `before`
    ordered the pass before every instance, so the dead code elimination the user put first
    was moved behind it although the second one already met the declaration."""
    # d: after = (b,); e: before = (a,)
    assert names(Pipeline(["b", "d", "b"], registry=reg)) == ["b", "d", "b"]
    assert names(Pipeline(["a", "e", "a"], registry=reg)) == ["a", "e", "a"]
    # none on the side the declaration asks for: the nearest instance moves, the other stays
    plan = Pipeline(["d", "b", "a", "b"], registry=reg).plan()
    assert plan.names() == ["b", "d", "a", "b"]
    assert plan.steps[0].reasons == ["moved before d: d declares after = b"]
    assert names(Pipeline(["a", "b", "a", "e"], registry=reg)) == ["a", "b", "e", "a"]
    # each instance of the declaring pass is ordered against its own nearest one
    assert names(Pipeline(["a", "e", "a", "e"], registry=reg)) == ["a", "e", "e", "a"]
    # a move two instances ask for is said once
    plan = Pipeline(["d", "d", "b"], registry=reg).plan()
    assert plan.names() == ["b", "d", "d"] and plan.steps[0].reasons == ["moved before d: d declares after = b"]
    # the built-in passes: fuse_conv_bn and remove_dropout declare before = eliminate_dead_code
    spec = "eliminate_dead_code,fuse_conv_bn,eliminate_dead_code"
    assert names(Pipeline.from_string(spec)) == spec.split(",")
    assert names(Pipeline.from_string("eliminate_dead_code,fuse_conv_bn")) == ["fuse_conv_bn", "eliminate_dead_code"]

def test_cycle_is_reported_as_path(reg):
    with pytest.raises(CycleError) as info:
        Pipeline(["x", "y", "z"], registry=reg)
    cycle = info.value.cycle
    assert cycle[0] == cycle[-1] and set(cycle) == {"x", "y", "z"} and len(cycle) == 4
    text = str(info.value)
    assert " -> ".join(cycle) in text
    # each arrow reads "runs before": x must run after y, so y -> x appears
    i = cycle.index("y")
    assert cycle[i + 1] == "x"
    assert "x declares after = y" in text


@pytest.mark.parametrize("attr", ["requires", "after", "before"])
def test_a_pass_naming_itself_in_requires_after_or_before_is_a_definition_error(attr):
    """`requires = ("ps",)` on pass ps was accepted and planned as one step: a cycle of one."""
    bad = make_pass("ps", **{attr: ("other", "ps")})
    with pytest.raises(fxpasses.PassDefinitionError) as info:
        Registry(autoload=False).register(bad)
    assert str(info.value).endswith(f"`{attr}` names the pass itself ({attr} = ('other', 'ps'))")
    with pytest.raises(fxpasses.PassDefinitionError):
        Pipeline([bad])


def test_a_table_entry_takes_an_unregistered_pass_class_or_instance_with_its_own_settings():
    """`{"name": MyPass, "verify": "numeric"}` was refused (name: a valid string): an unregistered
    pass could not carry its own verify/on_error (a new-user check)."""

    class DropRelu(fxpasses.NodePass):
        """relu(x) -> x: changes outputs."""

        name = "drop_relu_entry"

        class Options(fxpasses.PassOptions):
            k: int = 0

        @fxpasses.on("relu")
        def relu(self, node, ctx):
            return fxpasses.Replace(node.args[0])

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) * 2

    gm = torch.fx.symbolic_trace(M())
    pipe = Pipeline([{"name": DropRelu, "options": {"k": 2}, "verify": "numeric", "on_error": "skip"}])
    (step,) = pipe.plan().steps
    assert (step.cls, step.options.k, step.verify, step.on_error) == (DropRelu, 2, "numeric", "skip")
    report = pipe.run(gm, [torch.randn(4)])
    assert report.passes[0].status == "skipped" and "torch.relu" in gm.code
    (step,) = Pipeline([{"name": DropRelu(DropRelu.Options(k=3)), "on_error": "raise"}]).plan().steps
    assert (step.options.k, step.on_error, step.instance is not None) == (3, "raise", True)
    with pytest.raises(fxpasses.ConfigError, match=r"an instance carries its own options"):
        Pipeline([{"name": DropRelu(), "options": {"k": 1}}])
    # an Options instance, as (DropRelu, DropRelu.Options(k=4)) takes one
    (step,) = Pipeline([{"name": DropRelu, "options": DropRelu.Options(k=4), "verify": "none"}]).plan().steps
    assert (step.options.k, step.verify) == (4, "none")
    with pytest.raises(fxpasses.ConfigError, match=r"verify: Input should be 'none', 'lint' or 'numeric'; did you mean 'numeric'"):
        Pipeline([{"name": DropRelu, "verify": "numerc"}])


def test_duplicate_entries_allowed_and_kept(reg):
    assert names(Pipeline(["a", "b", "a"], registry=reg)) == ["a", "b", "a"]


def test_pipeline_string_with_options(reg):
    p = Pipeline.from_string("cse{skip_random_ops=false,max_numel=10,scale=0.5,names=[p, 'q r']},a", registry=reg)
    step = p.plan().steps[0]
    assert step.options.model_dump() == {"skip_random_ops": False, "max_numel": 10, "scale": 0.5, "names": ["p", "q r"]}
    assert p.plan().as_pipeline_string() == "cse{skip_random_ops=false,max_numel=10,scale=0.5,names=[p,'q r']},a"


def test_pipeline_string_entry_settings(reg):
    p = Pipeline.from_string("cse{max_numel=3}[verify=numeric, on_error=skip],a[on_error=raise]", registry=reg)
    cse, a = p.plan().steps
    assert (cse.verify, cse.on_error, cse.options.max_numel) == ("numeric", "skip", 3)
    assert (a.verify, a.on_error) == (None, "raise")
    text = p.plan().as_pipeline_string()
    assert text == "cse{max_numel=3}[verify=numeric,on_error=skip],a[on_error=raise]"
    quoted = Pipeline.from_string("cse[verify='numeric', on_error=\"skip\"]", registry=reg).plan().steps[0]
    assert (quoted.verify, quoted.on_error) == ("numeric", "skip")
    again = Pipeline.from_string(text, registry=reg).plan().steps
    assert [(s.name, s.verify, s.on_error) for s in again] == [("cse", "numeric", "skip"), ("a", None, "raise")]


def test_options_error_names_pass_field_suggestion_and_position(reg):
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string("a, cse{skip_random_op=false}", registry=reg)
    msg = str(info.value)
    assert "cse.skip_random_op" in msg
    assert "did you mean 'skip_random_ops'" in msg
    assert "entry 2 ('cse') at column 4" in msg
    with pytest.raises(OptionsError) as info:
        Pipeline([("cse", {"max_numel": "lots"})], registry=reg)
    assert info.value.problems[0][0] == "max_numel" and info.value.problems[0][2] == "lots"


def test_every_entry_with_invalid_options_is_reported_at_once(reg, tmp_path):
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string("cse{max_numel=lots}, a, cse{skip_random_ops=maybe, nope=1}", registry=reg)
    err = info.value
    assert (err.pass_name, err.problems, err.places) == ("cse", [("max_numel", err.problems[0][1], "lots")], {"max_numel": "column 5"})
    assert [(o.pass_name, o.source, sorted(p[0] for p in o.problems), o.places) for o in err.others] == [
        (
            "cse",
            "pipeline string, entry 3 ('cse') at column 25",
            ["nope", "skip_random_ops"],
            {"skip_random_ops": "column 29", "nope": "column 52"},
        )
    ]
    lines = str(err).splitlines()
    assert lines[0] == "invalid options for pass 'cse' (pipeline string, entry 1 ('cse') at column 1):"
    assert lines[2] == "invalid options for pass 'cse' (pipeline string, entry 3 ('cse') at column 25):"
    assert len(lines) == 5
    # options tables: each table's pass named with its own problems
    with pytest.raises(OptionsError) as info:
        Pipeline(["cse", "a"], options={"cse": {"max_numel": "lots"}}, registry=reg)
    assert info.value.others == []
    # a structural error of a later entry still stops construction, as before
    with pytest.raises(UnknownPassError):
        Pipeline.from_string("cse{max_numel=lots}, nosuch", registry=reg)


def test_unknown_pass_in_string_names_position_and_suggests(reg):
    with pytest.raises(UnknownPassError) as info:
        Pipeline.from_string("a,cs", registry=reg)
    assert info.value.suggestions[0] == "cse"
    assert "entry 2 ('cs') at column 3" in str(info.value)


def test_required_pass_that_does_not_exist():
    r = Registry(autoload=False)
    r.register(make_pass("needs_ghost", requires=("ghost",)))
    with pytest.raises(UnknownPassError) as info:
        Pipeline(["needs_ghost"], registry=r)
    assert "required by pass 'needs_ghost'" in str(info.value)


_REQUIRES_MISSING = """
import fxpasses


class UsesCensus(fxpasses.GraphPass):
    name = "uses_census"
    requires = ("usescensus",)

    def run(self, gm, ctx):
        return False


@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register(UsesCensus)
"""


@pytest.mark.parametrize("order", ["dependencies", "as-given"])
def test_a_plugins_misspelt_requirement_names_the_plugin_and_not_itself_as_the_fix(tmp_path, monkeypatch, order):
    """A plugin pass requiring a pass no one registers: the error read as the user's config
    error (no plugin named) and offered the requiring pass itself, `did you mean
    'uses_census'?` (a new-user check)."""
    from dists import installed_dist

    with installed_dist(monkeypatch, tmp_path / "site", "census-passes", "0.2", "fxp_census", _REQUIRES_MISSING):
        reg = Registry()
        with pytest.raises(UnknownPassError) as info:
            Pipeline(["uses_census"], registry=reg, order=order).plan()
    text = str(info.value)
    assert "required by pass 'uses_census' (census-passes 0.2): unknown pass 'usescensus'" in text, text
    assert "uses_census'?" not in text and "uses_census" not in info.value.suggestions


@pytest.mark.parametrize(
    "text, fault",
    [
        ("", "empty"),
        ("a,,b", "column 3"),
        ("a{x}", "expected '='"),
        ("a{x=1", "expected ',' or '}'"),
        ("a{x=[1,2}", "expected ',' or ']'"),
        ("a{x='open}", "unterminated string"),
        ("a b", "expected ',' between passes"),
        ("a{x=1,x=2}", "given twice"),
        ("1a", "expected a pass name"),
        ("a[verify=numeric", "expected ',' or ']' in the settings of 'a'"),
        ("a[verfy=numeric]", "unknown setting 'verfy' for 'a'"),
        ("a[verify=strict]", "verify of 'a' must be one of none, lint, numeric, got 'strict'"),
        ("a[on_error=ignore]", "on_error of 'a' must be one of rollback, raise, skip"),
        ("a[verify=lint,verify=none]", "setting 'verify' of 'a' given twice"),
        ("a[]", "expected a setting of 'a'"),
        ("a[verify=none]{x=1}", "expected ',' between passes"),
    ],
)
def test_malformed_pipeline_strings(text, fault):
    with pytest.raises(ConfigError, match=fault):
        parse_pipeline_string(text)


@pytest.mark.parametrize(
    "text, column, found",
    [
        ("rename_nodes{pattern=[a-z]+, replacement=y}", 27, "'+'"),
        ("rename_nodes{pattern=a{2}, replacement=y}", 23, "'{'"),
        ("rename_nodes{pattern=a b}", 24, "'b'"),
        ("rename_nodes{pattern=x=y}", 23, "'='"),
    ],
)
def test_an_unquoted_value_with_punctuation_says_to_quote_it(text, column, found):
    with pytest.raises(ConfigError) as info:
        parse_pipeline_string(text)
    assert str(info.value).splitlines()[0] == (
        f"pipeline string, column {column}: expected ',' or '}}' after the value of option 'pattern' of "
        f"'rename_nodes', found {found}: a value holding , {{ }} [ ] = quotes or spaces is quoted "
        "(pattern=\"...\", or '...')"
    )
    quoted = text.replace("pattern=", 'pattern="').replace(", replacement", '", replacement')
    if "replacement" in quoted:  # quoted, it reads as the text
        (entry,) = parse_pipeline_string(quoted)
        assert entry.options["pattern"] == text.split("pattern=")[1].split(", replacement")[0]


def test_an_unquoted_bracket_read_as_a_list_for_a_text_option_says_to_quote_it():
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string("rename_nodes{pattern=[a-z], replacement=y}")
    assert str(info.value).splitlines()[1] == (
        "  rename_nodes.pattern (column 14): Input should be a valid string (an unquoted [...] in a pipeline string is a "
        "list: quote the text, pattern=\"[...]\") (given: ['a-z'])"
    )
    # a list given from Python is not told about pipeline strings
    with pytest.raises(OptionsError) as info:
        Pipeline([("rename_nodes", {"pattern": ["a-z"], "replacement": "y"})])
    assert "unquoted" not in str(info.value) and "Input should be a valid string" in str(info.value)


@pytest.mark.parametrize(
    "bare, read, what",
    [
        ("null", None, "none or null in a pipeline string is None"),
        ("None", None, "none or null in a pipeline string is None"),
        ("TRUE", True, "true or false in a pipeline string is a boolean"),
        ("inf", float("inf"), "number in a pipeline string is a number"),
        ("1_000", 1000, "number in a pipeline string is a number"),
    ],
)
def test_a_bare_word_read_as_none_a_boolean_or_a_number_for_a_text_option_says_to_quote_it(bare, read, what):
    """They were "Input should be a valid string (given: None)" with no word of why (found
    by a new-user check)."""
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string(f"rename_nodes{{pattern=a,replacement={bare}}}")
    assert str(info.value).splitlines()[1] == (
        f"  rename_nodes.replacement (column 24): Input should be a valid string (an unquoted {what}: "
        f"quote the text, replacement=\"...\") (given: {read!r})"
    )
    assert Pipeline.from_string(f"rename_nodes{{pattern=a,replacement='{bare}'}}").plan().steps[0].options.replacement == bare
    assert Pipeline.from_string("rename_nodes{pattern=a,replacement=0x10}").plan().steps[0].options.replacement == "0x10"


def test_a_text_value_inside_a_table_read_as_a_number_says_to_quote_it_as_the_table_writes_it():
    """The hint pointed at list syntax and the top-level option (`thresholds=[..., "...", ...]`)
    for `thresholds={tag=1}`, which another error then followed (a new-user check)."""

    class Tagged(fxpasses.PassOptions):
        tag: str = ""
        tags: list[str] = []

    class Outer(fxpasses.PassOptions):
        thresholds: Tagged = Tagged()

    reg = Registry(autoload=False)
    reg.register(make_pass("tagged", options=Outer))
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string("tagged{thresholds={tag=1, tags=[a, true]}}", registry=reg)
    lines = str(info.value).splitlines()[1:]
    assert lines[0].endswith('(an unquoted number in a pipeline string is a number: quote the text, tag="...") (given: 1)')
    assert lines[1].endswith('(an unquoted true or false in a pipeline string is a boolean: quote the text, tags=[..., "...", ...]) (given: True)')
    assert Pipeline.from_string('tagged{thresholds={tag="1"}}', registry=reg).plan().steps[0].options.thresholds.tag == "1"


def test_an_element_of_a_text_list_option_read_as_none_a_boolean_or_a_number_says_to_quote_it():
    """Each element of a list of text is text as well: a bare none/number/true/[...] inside
    it was "Input should be a valid string (given: None)" with no word of why."""

    class ListOptions(fxpasses.PassOptions):
        names: list[str] = []
        pair: tuple[str, int] = ("a", 1)

    class ListPass(fxpasses.GraphPass):
        """Takes a list of text."""

        name = "list_text"
        Options = ListOptions

        def run(self, gm, ctx):
            return False

    reg = Registry(autoload=False)
    reg.register(ListPass)
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string("list_text{names=[none, 1, true, ok, [a]], pair=[null, 2]}", registry=reg)
    quote = 'quote the text, names=[..., "...", ...])'
    assert str(info.value).splitlines()[1:] == [
        f"  list_text.names.0 (column 11): Input should be a valid string (an unquoted none or null in a pipeline string is None: {quote} (given: None)",
        f"  list_text.names.1 (column 11): Input should be a valid string (an unquoted number in a pipeline string is a number: {quote} (given: 1)",
        f"  list_text.names.2 (column 11): Input should be a valid string (an unquoted true or false in a pipeline string is a boolean: {quote} (given: True)",
        "  list_text.names.4 (column 11): Input should be a valid string (an unquoted [...] in a pipeline string is a list: "
        "quote the text, names=[..., \"[...]\", ...]) (given: ['a'])",
        "  list_text.pair.0 (column 43): Input should be a valid string (an unquoted none or null in a pipeline string is None: "
        "quote the text, pair=[..., \"...\", ...]) (given: None)",
    ]
    options = Pipeline.from_string("list_text{names=['none', '1', ok]}", registry=reg).plan().steps[0].options
    assert options.names == ["none", "1", "ok"]


@pytest.mark.parametrize(
    "name, text",
    [
        ("c.toml", 'pipeline = "rename_nodes{pattern=a}"\n[options.rename_nodes]\nreplacement = false\n'),
        ("c.yaml", "pipeline: rename_nodes{pattern=a}\noptions:\n  rename_nodes:\n    replacement: false\n"),
        ("c.json", '{"pipeline": "rename_nodes{pattern=a}", "options": {"rename_nodes": {"replacement": false}}}'),
    ],
)
def test_an_options_tables_value_is_not_told_about_pipeline_strings(tmp_path, name, text):
    """A wrong value in an `[options.X]` table got the pipeline-string hint ("an unquoted
    true or false in a pipeline string ...") because the entry itself was a pipeline string
    (found by a new-user check); from Python the table was called "pipeline [options.X]"."""
    (tmp_path / name).write_text(text)
    with pytest.raises(OptionsError) as info:
        Pipeline.from_config(tmp_path / name)
    yaml = "; YAML reads yes/no/on/off (any case) as true/false: quote the word to mean the string" if name.endswith("yaml") else ""
    table = "[options.rename_nodes]" if name.endswith(".toml") else "options.rename_nodes"  # as the file writes it
    assert str(info.value).splitlines() == [
        f"invalid options for pass 'rename_nodes' ({tmp_path / name} {table}):",
        f"  rename_nodes.replacement: Input should be a valid string (given: False{yaml})",
    ]
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string("rename_nodes{pattern=a}", options={"rename_nodes": {"replacement": False}})
    assert str(info.value).splitlines() == [
        "invalid options for pass 'rename_nodes' (options={'rename_nodes': ...}):",
        "  rename_nodes.replacement: Input should be a valid string (given: False)",
    ]
    with pytest.raises(OptionsError, match="an unquoted true or false in a pipeline string"):  # the string's own
        Pipeline.from_string("rename_nodes{pattern=a,replacement=false}")


def test_a_pass_named_in_any_script_is_named_in_pipeline_strings_too():
    """The registry takes any Python identifier as a pass name (str.isidentifier), the
    pipeline string parser only ASCII ones: such a pass ran from a list only, and the pipeline
    string a run prints for it did not read back (found by a new-user check)."""
    r = Registry(autoload=False)

    class Opts(fxpasses.PassOptions):
        clé: int = 1

    cls = type("Uni", (fxpasses.GraphPass,), {"__doc__": "x", "name": "Ünïcode_pass", "Options": Opts, "run": lambda self, gm, ctx: False})
    r.register(cls)
    pipe = Pipeline.from_string("Ünïcode_pass{clé=2}", registry=r)
    assert pipe.plan().names() == ["Ünïcode_pass"] and pipe.plan().steps[0].options.clé == 2
    assert str(pipe.plan()).strip() == "1. Ünïcode_pass{clé=2}"
    assert Pipeline.from_string(pipe.plan().as_pipeline_string(), registry=r).plan().names() == ["Ünïcode_pass"]
    (entry,) = parse_pipeline_string("名前")
    assert entry.name == "名前"
    # typed decomposed (U+0308 combining diaeresis after I, as some keyboards give it): the
    # same name, NFKC-normalized as Python normalizes identifiers (it was "found '̈'")
    decomposed = "U\u0308ni\u0308code_pass{cle\u0301=3}"
    assert Pipeline.from_string(decomposed, registry=r).plan().steps[0].options.clé == 3
    assert Pipeline(["U\u0308ni\u0308code_pass"], registry=r).plan().names() == ["Ünïcode_pass"]
    assert "U\u0308ni\u0308code_pass" in r
    # option names and options tables' pass names too, from Python and config files alike
    assert Pipeline([("Ünïcode_pass", {"cle\u0301": 5})], registry=r).plan().steps[0].options.clé == 5
    table = Pipeline(["Ünïcode_pass"], options={"U\u0308ni\u0308code_pass": {"cle\u0301": 4}}, registry=r)
    assert table.plan().steps[0].options.clé == 4
    cfg = Pipeline.from_config({"pipeline": ["Ünïcode_pass"], "options": {"U\u0308ni\u0308code_pass": {"cle\u0301": 6}}}, registry=r)
    assert cfg.plan().steps[0].options.clé == 6
    # a preset's option changed by a table typing its name the other way (it was "given twice,
    # as 'cl\xe9' and as 'cle\u0301'"), and an entry and a table typing it two ways: set twice
    preset = Pipeline([("Ünïcode_pass", {"clé": 5})], options={"Ünïcode_pass": {"cle\u0301": 7}}, registry=r, _from_preset=True)
    assert preset.plan().steps[0].options.clé == 7
    with pytest.raises(ConfigError, match="option\\(s\\) of pass 'Ünïcode_pass' set twice, here and in"):
        Pipeline([("Ünïcode_pass", {"clé": 5})], options={"Ünïcode_pass": {"cle\u0301": 7}}, registry=r)
    # two tables for one pass typed two ways merged, one silently overriding the other
    with pytest.raises(ConfigError) as info:
        Pipeline(["Ünïcode_pass"], options={"Ünïcode_pass": {"clé": 4}, "U\u0308ni\u0308code_pass": {"clé": 5}}, registry=r)
    assert "options for pass 'Ünïcode_pass' given twice, as '\\xdcn\\xefcode_pass' and as 'U\\u0308ni\\u0308code_pass'" in str(info.value)
    with pytest.raises(fxpasses.OptionsError) as err:
        Pipeline([("Ünïcode_pass", {"cle\u0301": 5, "clé": 5})], registry=r)
    assert "clé: given twice, as 'cle\\u0301' and as 'cl\\xe9' (one name in two Unicode forms) (given: 5)" in str(err.value)
    # in one pipeline string: the two forms named too (it said "given twice" of two names that look alike)
    with pytest.raises(ConfigError) as info:
        Pipeline.from_string("Ünïcode_pass{cle\u0301=1,clé=2}", registry=r)
    assert str(info.value).splitlines()[0] == (
        "pipeline string, column 21: option 'clé' of 'Ünïcode_pass' given twice, as 'cle\\u0301' and as 'cl\\xe9' "
        "(one name in two Unicode forms)"
    )
    with pytest.raises(ConfigError) as info:  # typed alike: no forms to name
        Pipeline.from_string("Ünïcode_pass{clé=1,clé=2}", registry=r)
    assert str(info.value).splitlines()[0] == "pipeline string, column 20: option 'clé' of 'Ünïcode_pass' given twice"
    # and a name only NFKC makes an identifier is still not one
    with pytest.raises(ConfigError) as info:
        parse_pipeline_string("a,x²")
    assert str(info.value).splitlines()[0] == (
        "pipeline string, column 3: expected a pass name, found 'x²', which is not a Python identifier"
    )
    # a registered name is NFKC-normal, the form every lookup is made in
    bad = type("Nfd", (fxpasses.GraphPass,), {"__doc__": "x", "name": "U\u0308ber", "run": lambda self, gm, ctx: False})
    with pytest.raises(fxpasses.PassDefinitionError) as err:
        r.register(bad)
    assert str(err.value) == (
        "tests.test_pipeline.Nfd: `name` 'U\\u0308ber', not in NFKC normal form (the form Python gives identifiers "
        "and pipeline strings give names): use '\\xdcber' (both written with ascii(): they look alike)"
    )
    # so are the names a pass orders itself by: a decomposed `requires` never matched the
    # registered pass, which was pulled in a second time and ran twice (found by a new-user check)
    for attr in ("requires", "after", "before"):
        needs = type("Needs", (fxpasses.GraphPass,), {"__doc__": "x", "name": "needs", attr: ("U\u0308ni\u0308code_pass",), "run": lambda self, gm, ctx: False})
        with pytest.raises(fxpasses.PassDefinitionError) as err:
            r.register(needs)
        assert str(err.value).startswith(f"pass 'needs' (tests.test_pipeline.Needs): `{attr}` names 'U\\u0308ni\\u0308code_pass', not in NFKC")


@pytest.mark.parametrize("token", ["1_", "1__0", "1_.5", "_1", "1_e5"])
def test_a_number_with_a_stray_underscore_is_text_not_an_internal_error(token):
    """`max_numel=1_` was "unexpected ValueError" (exit 3), and a plan holding the string
    "1_" could not be printed (found by a new-user check): Python reads underscores only
    between digits, so such a token is text."""
    (entry,) = parse_pipeline_string(f"p{{x={token}}}")
    assert entry.options == {"x": token}
    assert parse_pipeline_string(f"p{{x={format_value(token)}}}")[0].options == {"x": token}
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string(f"fold_constants{{max_numel={token}}}")
    assert str(info.value).splitlines()[1] == f"  fold_constants.max_numel (column 16): Input should be a valid integer (given: {token!r})"
    # a plan holding the text prints and reads back
    text = Pipeline([("rename_nodes", {"pattern": token, "replacement": "x"})]).plan().as_pipeline_string()
    assert Pipeline.from_string(text).plan().steps[0].options.pattern == token
    assert parse_pipeline_string("p{x=1_0}")[0].options == {"x": 10}  # between digits: a number


def test_scalars_in_pipeline_strings():
    (e,) = parse_pipeline_string("p{a=1,b=-2.5e3,c=true,d=False,e=none,f=hello,g=\"1\",h=[],i=1e-5}")
    assert e.options == {"a": 1, "b": -2500.0, "c": True, "d": False, "e": None, "f": "hello", "g": "1", "h": [], "i": 1e-5}
    assert type(e.options["a"]) is int


class TextOptions(fxpasses.PassOptions):
    text: str = ""
    texts: list[str] = []


@pytest.mark.parametrize(
    "value",
    [r"\d x", "a'b\"c", "it's", 'say "hi"', "\\", "ends with \\", "é ∑ 😀", "\x00\x7f", "q r"],
)
def test_as_pipeline_string_reads_back_the_same_strings(value):
    # the plan's pipeline string (`pipeline:` of `fxpasses run`, report.json) quotes these with repr()
    r = Registry(autoload=False)
    r.register(make_pass("t", options=TextOptions))
    text = Pipeline([("t", {"text": value, "texts": [value, "x"]})], registry=r).plan().as_pipeline_string()
    back = Pipeline.from_string(text, registry=r).plan().steps[0].options
    assert (back.text, back.texts) == (value, [value, "x"])


@pytest.mark.parametrize("value", ["true", "12", "none", "1.5", "a\nb", "a\tb", "a\u2028b"])
def test_as_pipeline_string_quotes_strings_that_read_back_as_other_values(value):
    r = Registry(autoload=False)
    r.register(make_pass("t", options=TextOptions))
    text = Pipeline([("t", {"text": value})], registry=r).plan().as_pipeline_string()
    assert Pipeline.from_string(text, registry=r).plan().steps[0].options.text == value


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.text() | st.lists(st.text(), max_size=3))
def test_format_value_is_read_back_as_the_same_value(value):
    (entry,) = parse_pipeline_string(f"p{{v={format_value(value)}}}")
    assert entry.options["v"] == value


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=8,
    )
)
def test_format_value_reads_back_tables_and_lists_of_them(value):
    (entry,) = parse_pipeline_string(f"p{{v={format_value(value)}}}")
    assert entry.options["v"] == value


class _Thresholds(fxpasses.PassOptions):
    low: float = 0.0
    high: float = 1.0


class _NestedOptions(fxpasses.PassOptions):
    thresholds: _Thresholds = _Thresholds()
    weights: dict[str, float] = {}
    mode: str = "a"


def test_a_nested_options_model_and_a_mapping_option_print_as_tables_and_read_back():
    """The plan's pipeline string (`pipeline:` of `fxpasses run`, report.json) printed a nested
    options model as a Python dict, which the pipeline string did not read."""
    r = Registry(autoload=False)
    r.register(make_pass("t", options=_NestedOptions))
    opts = {"thresholds": {"low": -1.0, "high": 2.0}, "weights": {"conv 1": 0.5, "bn": 2.0}}
    text = Pipeline([("t", opts)], registry=r).plan().as_pipeline_string()
    assert text == "t{thresholds={low=-1.0,high=2.0},weights={'conv 1'=0.5,bn=2.0}}"
    back = Pipeline.from_string(text, registry=r).plan().steps[0].options
    assert back.thresholds == _Thresholds(low=-1.0, high=2.0)
    assert back.weights == {"conv 1": 0.5, "bn": 2.0}
    # a table typed by hand, with spaces, and one field left to its default
    again = Pipeline.from_string("t{ thresholds = { high = 3 } , mode=b }", registry=r).plan().steps[0].options
    assert (again.thresholds, again.mode) == (_Thresholds(low=0.0, high=3.0), "b")
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string("t{thresholds={hihg=3}}", registry=r)
    assert "t.thresholds.hihg" in str(info.value)


class _PathMode(enum.Enum):
    a = "a"
    b = "b"


class _WithPaths(fxpasses.PassOptions):
    out: Path = Path("x.txt")
    outs: list[Path] = [Path("a")]
    mode: _PathMode = _PathMode.a
    n: int = 0


class _Holder(fxpasses.PassOptions):
    inner: _WithPaths = _WithPaths()
    items: list[_WithPaths] = []
    by_name: dict[str, _WithPaths] = {}


class _PathsOptions(fxpasses.PassOptions):
    inner: _WithPaths = _WithPaths()
    holder: _Holder = _Holder()


@pytest.mark.parametrize(
    "text",
    [
        "t{inner={n=1}}",
        "t{inner={}}",
        "t{inner={out=y.txt,outs=[b,c]}}",
        "t{holder={inner={n=2},items=[{n=3},{out=z}],by_name={k={mode=b}}}}",
    ],
)
def test_a_table_leaving_out_a_nested_path_default_is_read_and_reads_back(text):
    """A table giving some of a nested model's fields was refused when one it left out had a
    Path default (`inner.out: Input should be a valid string (given: PosixPath('x.txt'))`):
    pydantic validates a default in the mode of the call, JSON's here (a new-user check)."""
    r = Registry(autoload=False)
    r.register(make_pass("t", options=_PathsOptions))
    options = Pipeline.from_string(text, registry=r).plan().steps[0].options
    assert isinstance(options.inner.out, Path) and isinstance(options.holder.inner.outs[0], Path)
    printed = Pipeline([("t", options)], registry=r).plan().as_pipeline_string()
    assert Pipeline.from_string(printed, registry=r).plan().steps[0].options == options
    if text == "t{holder={inner={n=2},items=[{n=3},{out=z}],by_name={k={mode=b}}}}":
        assert options.holder.items[1].out == Path("z") and options.holder.items[1].outs == [Path("a")]
        assert options.holder.by_name["k"].mode is _PathMode.b
    with pytest.raises(OptionsError, match=r"t\.inner\.n.*Input should be a valid integer"):
        Pipeline.from_string("t{inner={n='1'}}", registry=r)  # a string is still no number


@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        ("t{v={'low': 1}}", "expected '=' after key 'low' in table (a table is written {key=value,...}), found ':'", 11),
        ("t{v={a=1,a=2}}", "key 'a' given twice in table", 10),
        ("t{v={a=1", "expected ',' or '}' in table", 9),
        ("t{v={=1}}", "expected a key in table, found '='", 6),
    ],
)
def test_table_errors_name_the_fault_and_its_column(text, message, column):
    with pytest.raises(fxpasses.ConfigError) as info:
        parse_pipeline_string(text)
    assert str(info.value).startswith(f"pipeline string, column {column}: {message}\n")


@pytest.mark.parametrize(("value", "printed"), [("\x00", r"'\x00'"), ("a\x7fb", r"'a\x7fb'"), ("x\u200by", r"'x\u200by'")])
def test_a_control_or_invisible_character_is_printed_escaped(value, printed):
    """A NUL, DEL or zero-width space was printed bare: invisible on a terminal, and a NUL
    cannot be passed through --pipeline (a new-user check)."""
    assert format_value(value) == printed
    assert format_value({value: 1}) == "{" + printed + "=1}"
    assert parse_pipeline_string(f"p{{v={printed}}}")[0].options["v"] == value


def test_format_value_of_scalars_and_lists():
    values = {"i": 3, "f": -2.5, "inf": float("inf"), "b": True, "n": None, "l": [1, "a,b", []], "s": "plain"}
    text = "p{" + ",".join(f"{k}={format_value(v)}" for k, v in values.items()) + "}"
    assert text == "p{i=3,f=-2.5,inf=inf,b=true,n=none,l=[1,'a,b',[]],s=plain}"
    assert parse_pipeline_string(text)[0].options == values


class _Mode(enum.Enum):
    fast = "fast"
    slow = "slow"


class _Level(enum.IntEnum):
    low = 1
    high = 2


class _TypedOptions(fxpasses.PassOptions):
    mode: _Mode = _Mode.fast
    level: _Level = _Level.low
    path: pathlib.Path = pathlib.Path("out")


def test_enum_and_path_options_print_as_values_that_read_back():
    """An enum option prints as its value (`mode=slow`, not `Mode.slow`, which the option
    rejects when read back) and a path as its string, in plan(), repr and the reports."""
    r = Registry(autoload=False)
    r.register(make_pass("t", options=_TypedOptions))
    p = Pipeline([("t", {"mode": _Mode.slow, "level": _Level.high, "path": pathlib.Path("a b/c")})], registry=r)
    text = p.plan().as_pipeline_string()
    assert text == "t{mode=slow,level=2,path='a b/c'}"
    assert "mode=slow" in repr(p) and "mode=slow" in str(p.plan())
    back = Pipeline.from_string(text, registry=r).plan().steps[0].options
    assert (back.mode, back.level, back.path) == (_Mode.slow, _Level.high, pathlib.Path("a b/c"))


@pytest.mark.parametrize(
    "text, value",
    [
        (r"p{v='\\d x'}", r"\d x"),  # what repr() writes for a backslash
        (r"p{v='it\'s \"x\"'}", "it's \"x\""),
        (r'p{v="a\"b"}', 'a"b'),
        (r"p{v='\n\r\t\u00e9\x41\U0001F600'}", "\n\r\té" + "A\U0001F600"),
        # every other backslash stays: regular expressions and re.sub templates read as written
        (r"p{v='^relu(_\d+)?$'}", r"^relu(_\d+)?$"),
        (r"p{v='act\1\g<0>\b\x4'}", r"act\1\g<0>\b\x4"),
        ("p{v='two\nlines'}", "two\nlines"),  # a line break inside quotes, as before
    ],
)
def test_quoted_strings_decode_the_escapes_repr_writes_and_keep_other_backslashes(text, value):
    assert parse_pipeline_string(text)[0].options["v"] == value


def test_an_escape_beyond_the_last_code_point_is_an_error_naming_its_column():
    with pytest.raises(ConfigError) as info:
        parse_pipeline_string(r"p{v='ab\UFFFFFFFF'}")
    assert str(info.value).splitlines()[0] == (
        r"pipeline string, column 8: invalid escape \UFFFFFFFF in a string: illegal Unicode character"
    )


def test_empty_pipeline_and_options_for_absent_pass(reg):
    with pytest.raises(ConfigError, match="empty"):
        Pipeline([], registry=reg)
    with pytest.raises(ConfigError, match="not in the pipeline: cse"):
        Pipeline(["a"], registry=reg, options={"cse": {"max_numel": 1}})


def test_options_for_a_misspelt_pass_suggest_the_pipelines_pass(tmp_path, reg):
    path = tmp_path / "c.toml"
    path.write_text('pipeline = ["a", "cse"]\n[options.cs]\nmax_numel = 1\n[options.zzz]\n[options.b]\n')
    with pytest.raises(ConfigError) as info:
        Pipeline.from_config(path, registry=reg)
    # 'b' is a pass, but not in this pipeline; 'zzz' is near no pass of it
    assert str(info.value) == (
        f"{path}: pipeline: options given for pass(es) not in the pipeline: b, cs (did you mean 'cse'?), zzz (no pass "
        "is named so); add each pass to the pipeline, or remove its options"
    )
    # a misspelt name of a registered pass the pipeline does not run (a new-user check: no hint)
    path.write_text('pipeline = ["a"]\n[options.cs]\nmax_numel = 1\n')
    with pytest.raises(ConfigError) as info:
        Pipeline.from_config(path, registry=reg)
    assert str(info.value).endswith(
        "not in the pipeline: cs (no pass is named so; did you mean 'cse' or 'c'?); add each pass to the pipeline, or "
        "remove its options"
    )


TOML = """
pipeline = ["b", {name = "cse", options = {max_numel = 7}}, "c"]
verify = "none"
on_error = "skip"
[options.cse]
scale = 2.0
"""
YAML = """
pipeline: "b,cse{max_numel=7},c"
verify: none
on_error: skip
options:
  cse: {scale: 2.0}
"""
JSON = json.dumps({"pipeline": ["b", {"name": "cse", "options": {"max_numel": 7}}, "c"], "verify": "none", "on_error": "skip", "options": {"cse": {"scale": 2.0}}})
PYPROJECT = "[project]\nname='x'\n[tool.fxpasses]\n" + TOML.replace("[options.cse]", "[tool.fxpasses.options.cse]")


@pytest.mark.parametrize("filename, text", [("c.toml", TOML), ("c.yaml", YAML), ("c.json", JSON), ("pyproject.toml", PYPROJECT)])
def test_config_files_give_the_same_pipeline(tmp_path, reg, filename, text):
    path = tmp_path / filename
    path.write_text(text)
    p = Pipeline.from_config(path, registry=reg)
    assert p.plan().names() == ["b", "cse", "a", "c"]
    cse = p.plan().steps[1].options
    assert (cse.max_numel, cse.scale) == (7, 2.0)
    assert (p.verify, p.on_error) == ("none", "skip")


def test_pyproject_found_from_cwd(tmp_path, reg, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    sub = tmp_path / "deep" / "er"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert Pipeline.from_config(None, registry=reg).plan().names() == ["b", "cse", "a", "c"]


@pytest.mark.parametrize(
    "filename, text, fault",
    [
        ("bad.toml", "pipeline = [", "invalid TOML"),
        ("bad.yaml", "pipeline: [a, b", "invalid YAML"),
        ("bad.json", "{", "invalid JSON"),
        ("bad.toml", "pipelin = 'a'", "pipelin: unknown key; did you mean 'pipeline'"),
        ("bad.toml", "pipeline = 'a'\nverify = 'sometimes'", "verify"),
        ("bad.toml", "pipeline = 'a'\natol = -1", "atol"),
        ("bad.ini", "x", "unsupported config file type"),
        ("pyproject.toml", "[project]\nname='x'", "no [tool.fxpasses] table"),
        ("bad.yaml", "- a\n- b", "must be a table"),
        ("bad.toml", "", 'no pipeline given: set `pipeline = "pass1,pass2"` (or a list) or `preset = "inference"`'),
        ("bad.yaml", "", "no pipeline given: set `pipeline: pass1,pass2` (or a list) or `preset: inference`"),  # as in TOML
        ("bad.yaml", "# nothing but a comment\n", "no pipeline given"),
        # an empty JSON file too (it was "invalid JSON: Expecting value"), told in JSON's syntax
        ("bad.json", " \n", 'no pipeline given: set `"pipeline": "pass1,pass2"` (or a list) or `"preset": "inference"`'),
        # YAML 1.1: a bare off is false; the error says why a string field got a bool
        ("bad.yaml", "pipeline: a\non_error: off", "(given: False; YAML reads yes/no/on/off (any case) as true/false"),
    ],
)
def test_bad_config_files(tmp_path, reg, filename, text, fault):
    path = tmp_path / filename
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        Pipeline.from_config(path, registry=reg)
    assert fault in str(info.value)
    assert str(path) in str(info.value)


def test_an_empty_string_is_an_empty_pipeline_as_an_empty_list_is():
    """`Pipeline("")` said "unknown pass ''" (found by a new-user check)."""
    for empty in ("", []):
        with pytest.raises(ConfigError) as info:
            Pipeline(empty, registry=Registry(autoload=False))
        assert str(info.value) == "the pipeline is empty: name at least one pass"
    # one (name, None) pair is one entry, as in a list (it was "entry 2: bad pipeline entry None")
    reg = _reg_with_a()
    assert Pipeline(("a", None), registry=reg).plan().names() == Pipeline([("a", None)], registry=reg).plan().names() == ["a"]


def test_yaml_numbers_read_as_strings_are_explained_in_option_errors(tmp_path):
    """PyYAML reads 1e3 (no dot, no exponent sign) as a string: an int option given it says so;
    the same value quoted in a TOML file gets the hint for a quoted number instead."""
    path = tmp_path / "c.yaml"
    path.write_text("pipeline:\n  - name: fold_constants\n    options: {max_numel: 1e3}\n")
    with pytest.raises(fxpasses.OptionsError) as info:
        Pipeline.from_config(path)
    msg = str(info.value)
    assert "fold_constants.max_numel" in msg and str(path) in msg
    assert "(given: '1e3'; YAML 1.1 (PyYAML) reads an exponent number as a float only with a dot and a signed exponent (1.0e+3), so 1e3 (no dot, no exponent sign) is a string" in msg
    toml = tmp_path / "c.toml"
    toml.write_text('pipeline = [{name = "fold_constants", options = {max_numel = "1e3"}}]\n')
    with pytest.raises(fxpasses.OptionsError) as info:
        Pipeline.from_config(toml)
    # a quoted number in TOML is a string: the hint says to drop the quotes (and the exponent)
    assert "(given: '1e3'; a number in quotes is a string: write 1000 without the quotes)" in str(info.value)


def test_missing_config_file(tmp_path, reg):
    with pytest.raises(ConfigError, match="not found"):
        Pipeline.from_config(tmp_path / "nope.toml", registry=reg)


def test_run_report_counts_and_changed_flags():
    class MulOne(fxpasses.NodePass):
        """x*1 -> x"""

        name = "mul_one"

        @fxpasses.on("mul")
        def mul(self, node, ctx):
            if node.args[1] == 1 and type(node.args[1]) is int:
                ctx.count("removed")
                return fxpasses.Replace(node.args[0])
            ctx.skip(node, "not a multiply by the int 1")

    class M(torch.nn.Module):
        def forward(self, x):
            return (x * 1) * 2

    r = Registry(autoload=False)
    r.register(MulOne)
    gm = torch.fx.symbolic_trace(M())
    report = Pipeline(["mul_one", "mul_one"], registry=r).run(gm, [torch.ones(2)])
    first, second = report.passes
    assert (first.changed, first.nodes_before, first.nodes_after) == (True, 4, 3)
    assert first.counters == {"removed": 1, "skipped": 1}
    assert first.skipped == [("mul_1", "not a multiply by the int 1")]
    assert (second.changed, second.nodes_before, second.nodes_after) == (False, 3, 3)
    assert report.nodes_before == 4 and report.nodes_after == 3
    assert torch.equal(gm(torch.ones(2)), torch.full((2,), 2.0))
    assert "mul_1" not in gm.code or "x * 2" in gm.code.replace("mul_1", "x")


@pytest.mark.parametrize(
    "spec, field, given",
    [
        ("cse{max_numel=true}", "max_numel", True),
        ("cse{max_numel='12'}", "max_numel", "12"),
        ("cse{max_numel=1e3}", "max_numel", 1000.0),
        ("cse{skip_random_ops=1}", "skip_random_ops", 1),
        ("cse{scale='0.5'}", "scale", "0.5"),
        ("cse{names=a}", "names", "a"),
    ],
)
def test_options_are_not_coerced_between_types(reg, spec, field, given):
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string(spec, registry=reg)
    assert info.value.problems[0][0] == field and info.value.problems[0][2] == given


def test_int_accepted_for_float_and_list_for_tuple():
    class TupleOptions(fxpasses.PassOptions):
        ops: tuple[str, ...] = ()
        scale: float = 1.0

    r = Registry(autoload=False)
    r.register(make_pass("tup", options=TupleOptions))
    step = Pipeline.from_string("tup{ops=[a, b],scale=2}", registry=r).plan().steps[0]
    assert step.options.ops == ("a", "b") and step.options.scale == 2.0 and type(step.options.scale) is float


def test_unregistered_pass_class_with_options(reg):
    p = Pipeline([(make_pass("local_one", options=CSEOptions), {"max_numel": 3}), "a"], registry=reg)
    assert p.plan().names() == ["local_one", "a"]
    assert p.plan().steps[0].options.max_numel == 3
    with pytest.raises(OptionsError, match="local_two.max_numel"):
        Pipeline([(make_pass("local_two", options=CSEOptions), {"max_numel": "x"})], registry=reg)


@pytest.mark.parametrize(
    "filename, text, where",
    [
        ("c.toml", 'pipeline = "cse"\n[options.cse]\nskip_random_op = false\n', "c.toml [options.cse]"),
        ("c.toml", 'pipeline = [{name = "cse", options = {skip_random_op = false}}]\n', "c.toml: pipeline, entry 1"),
        ("c.yaml", "pipeline: a,cse{skip_random_op=false}\n", "c.yaml: pipeline string, entry 2 ('cse') at column 3"),
        ("pyproject.toml", '[tool.fxpasses]\npipeline = "cse"\n[tool.fxpasses.options.cse]\nskip_random_op = false\n',
         "pyproject.toml [tool.fxpasses.options.cse]"),
    ],
)
def test_issue5_case20_option_typo_names_field_suggestion_pass_and_origin(tmp_path, reg, filename, text, where):
    path = tmp_path / filename
    path.write_text(text)
    with pytest.raises(OptionsError) as info:
        Pipeline.from_config(path, registry=reg)
    msg = str(info.value)
    assert "invalid options for pass 'cse'" in msg
    assert re.search(r"cse\.skip_random_op( \(column \d+\))?: unknown option; did you mean 'skip_random_ops'\?", msg)
    assert f"{tmp_path}/{where}" in msg


@pytest.mark.parametrize("inputs", [{"x": torch.ones(3)}, torch.ones(3), "x"], ids=["dict", "tensor", "str"])
def test_example_inputs_must_be_a_list_or_tuple_of_positional_inputs(inputs):
    """A dict (keyword inputs), a lone tensor or a string would be iterated as if it were the
    positional inputs: refused, saying what is expected."""
    gm = torch.fx.symbolic_trace(torch.nn.ReLU())
    with pytest.raises(fxpasses.errors.UserError, match=r"example_inputs must be a list or tuple of the module's positional inputs, got (dict|Tensor|str)"):
        Pipeline(["eliminate_dead_code"], verify="numeric").run(gm, inputs)


class ScaleOnPurpose(fxpasses.NodePass):
    """Replace x*2 by x*3, saying it changes the outputs (or not, with quiet=true)."""

    name = "scale_on_purpose"

    class Options(fxpasses.PassOptions):
        quiet: bool = False
        factor: float = 3

    @fxpasses.on("mul")
    def mul(self, node, ctx):
        if node.args[1] == 2:
            if not self.options.quiet:
                ctx.changes_outputs("scale_on_purpose makes it x*3 on purpose")
                ctx.changes_outputs("scale_on_purpose makes it x*3 on purpose")  # kept once
            node.args = (node.args[0], self.options.factor)
        return None


@pytest.mark.parametrize("verify", ["numeric", "lint"])
def test_a_pass_saying_it_changes_outputs_gets_a_note_on_its_failure(verify):
    class M(torch.nn.Module):
        def forward(self, x):
            return x * 2

    r = Registry(autoload=False)
    r.register(ScaleOnPurpose)
    x = torch.ones(3)
    gm = torch.fx.symbolic_trace(M())
    if verify == "lint":  # not checked: it goes through, and the report keeps the reason
        report = Pipeline(["scale_on_purpose"], registry=r, verify="lint").run(gm, [x])
        assert report["scale_on_purpose"].notes == ["scale_on_purpose makes it x*3 on purpose"]
        assert report.as_dict()["passes"][0]["notes"] == ["scale_on_purpose makes it x*3 on purpose"]
        return
    with pytest.raises(fxpasses.PassFailedError) as info:
        Pipeline(["scale_on_purpose"], registry=r, verify="numeric").run(gm, [x])
    changed = "'scale_on_purpose' changed these nodes: %mul (edited)"
    # x*3 for x*2 moves the outputs by half their size: no tolerance is the answer, none suggested
    assert info.value.notes == ["scale_on_purpose makes it x*3 on purpose", changed]
    assert str(info.value).endswith(f"\n  note: scale_on_purpose makes it x*3 on purpose\n  note: {changed}")
    # an approximation (x*2.001: 5e-4 of the outputs' size) is told how to accept it (a
    # pass-author check: the failure gave no way, and the bisect pointer was dropped): a
    # tolerance in its entry, from how far the outputs moved; the options stay, a tolerance given is replaced
    with pytest.raises(fxpasses.PassFailedError) as info:
        Pipeline.from_string("scale_on_purpose{factor=2.001}[atol=1e-5]", registry=r, verify="numeric").run(gm, [x])
    accept = (
        "to accept outputs that 'scale_on_purpose' changes on purpose, give its pipeline entry the tolerance "
        "atol=1e-3: scale_on_purpose{...}[atol=1e-3] in a pipeline string (its options as you gave them in the {...}), "
        'atol = 1e-3 in a config\'s pass entry, {"name": ..., "atol": 1e-3} in a Python pipeline list; or verify=lint '
        "for it. The outputs moved by up to 0.001 on these inputs, and other inputs may move them further"
    )
    assert info.value.notes == ["scale_on_purpose makes it x*3 on purpose", accept, changed]
    report = Pipeline.from_string("scale_on_purpose{factor=2.001}[atol=1e-3]", registry=r, verify="numeric").run(gm, [x])
    assert report["scale_on_purpose"].status == "ok" and torch.equal(gm(x), x * 2.001)
    gm = torch.fx.symbolic_trace(M())
    # the entry's own settings stay, in one [...] (a final new-user check: "[verify=numeric][atol=...]"
    # did not parse, and an rtol was dropped); the options from a config's table are not repeated
    with pytest.raises(fxpasses.PassFailedError) as info:
        Pipeline.from_string(
            "scale_on_purpose[verify=numeric,on_error=rollback,rtol=0]", registry=r, verify="lint",
            options={"scale_on_purpose": {"factor": 2.001}},
        ).run(gm, [x])
    assert ": scale_on_purpose{...}[verify=numeric,on_error=rollback,atol=1e-3,rtol=0.0] in a pipeline string" in info.value.notes[1]
    accepted = Pipeline.from_string(
        "scale_on_purpose[verify=numeric,on_error=rollback,atol=1e-3,rtol=0.0]", registry=r, verify="lint",
        options={"scale_on_purpose": {"factor": 2.001}},
    ).run(gm, [x])
    assert accepted["scale_on_purpose"].status == "ok"
    # only the gradients differ (the outputs within atol): no tolerance from the outputs' error,
    # which does not bound them (a final new-user check: the suggested entry failed again, on them)
    gm = torch.fx.symbolic_trace(M())
    small = torch.full((3,), 1e-3, requires_grad=True)
    with pytest.raises(fxpasses.PassFailedError) as info:
        Pipeline([("scale_on_purpose", {"factor": 2.001})], registry=r, verify="numeric").run(gm, [small])
    assert "gradient of input[0]" in str(info.value) and not any("tolerance" in n for n in info.value.notes)
    gm = torch.fx.symbolic_trace(M())
    # the note is the pass's own word: another pass's failure, or one saying nothing, has none
    # (and gets the pointer to bisect instead, which a pass saying why does not)
    with pytest.raises(fxpasses.PassFailedError) as info:
        Pipeline([("scale_on_purpose", {"quiet": True})], registry=r, verify="numeric").run(gm, [x])
    assert info.value.notes == [changed, fxpasses.pipeline.BISECT_HINT]
    # said, but the outputs are kept (x*2 -> x*2): nothing fails
    report = Pipeline([("scale_on_purpose", {"factor": 2})], registry=r, verify="numeric").run(gm, [x])
    assert report["scale_on_purpose"].status == "ok"


def test_module_level_run_takes_run_options_and_refuses_ignored_pipeline_options():
    """fxpasses.run passes instruments and rewrite_limit to Pipeline.run; Pipeline options
    next to a ready Pipeline (which would be ignored) are a UserError naming them."""
    seen = []

    class Recorder:
        @fxpasses.hookimpl
        def fxpasses_after_pass(self, pass_name, gm, ctx, report):
            seen.append(pass_name)

    class Model(torch.nn.Module):
        def forward(self, x):
            return (x * 1) + 0 + (x * 1)

    x = torch.randn(3)
    gm = torch.export.export(Model(), (x,)).module()  # shapes known: x * 1 -> x is safe
    report = fxpasses.run(gm, "simplify_algebra", [x], instruments=[Recorder()], rewrite_limit=1)
    assert seen == ["simplify_algebra"]
    assert report.passes[0].rewrites == 1 and report.passes[0].cut_off is True
    pipe = Pipeline(["eliminate_dead_code"])
    with pytest.raises(UserError, match=r"got a Pipeline and the Pipeline option\(s\) atol, verify"):
        fxpasses.run(torch.fx.symbolic_trace(Model()), pipe, verify="numeric", atol=0.1)


@pytest.mark.parametrize(
    "text, found",
    [(None, "NoneType"), (["remove_dropout"], "list (a list of pass names goes to Pipeline([...]))"), (b"x", "bytes"), (3, "int")],
    ids=["none", "list", "bytes", "int"],
)
def test_a_pipeline_string_of_another_type_is_a_config_error_naming_it(text, found):
    """Every entry point that parses a pipeline string raises ConfigError (a FxPassesError),
    not the parser's AttributeError, for a value that is not a str."""
    from fxpasses.errors import ConfigError
    from fxpasses.spec import parse_pipeline_string

    with pytest.raises(ConfigError) as err:
        fxpasses.Pipeline.from_string(text)
    assert str(err.value) == f"pipeline string: a pipeline string must be a str, got {found}"
    with pytest.raises(ConfigError, match=f"^fx.toml: pipeline string: a pipeline string must be a str, got {type(text).__name__}"):
        parse_pipeline_string(text, "fx.toml")


@pytest.mark.parametrize(
    "entry, said",
    [
        (
            {"name": "fold_constants", "optionz": {}},
            "optionz: unknown key; did you mean 'options'? (valid: name, options, verify, on_error, atol, rtol) (given: {})",
        ),
        ({"name": "fold_constants", "options": "max_numel=3"}, "options: Input should be a valid dictionary (given: 'max_numel=3')"),
        ({"options": {}}, "name: Field required"),
    ],
)
def test_a_malformed_table_entry_in_python_gets_the_config_files_one_line_message(entry, said):
    """A dict entry of ``Pipeline([...])`` is checked as a config file's table: one line per
    problem with a suggestion, not pydantic's multi-line dump with its URL."""
    with pytest.raises(fxpasses.ConfigError) as info:
        fxpasses.Pipeline([entry])
    msg = str(info.value)
    assert msg.startswith(f"pipeline, entry 1: bad pipeline entry {entry!r}: ")
    assert said in msg
    assert "errors.pydantic.dev" not in msg and "\n" not in msg and "PassEntryConfig" not in msg


def test_a_list_entry_of_the_wrong_type_in_a_config_names_the_kinds_an_entry_can_be():
    from fxpasses.config import parse_config

    with pytest.raises(fxpasses.ConfigError) as info:
        parse_config({"pipeline": ["fold_constants", 3]}, source="x.toml")
    assert (
        "pipeline.1: Input should be a valid string or a table (name, options, verify, on_error, atol, rtol) or a fixpoint "
        "group (fixpoint, max_iterations) (given: 3)"
    ) in str(info.value)
    assert "PassEntryConfig" not in str(info.value)


def test_an_entry_spelled_pass_name_to_options_says_how_to_write_it(tmp_path):
    """``{fold_constants: {max_numel: 1000}}`` (a spelling some tools use) is not an entry:
    the error says how to write it, in the file's syntax, or in Python for the API."""
    path = tmp_path / "c.yaml"
    path.write_text("pipeline:\n  - fold_constants: {max_numel: 1000}\n")
    with pytest.raises(ConfigError) as info:
        Pipeline.from_config(path)
    assert str(info.value).endswith("  pipeline.0: for pass 'fold_constants' with options write {name: fold_constants, options: {...}}")
    path = tmp_path / "c.toml"
    path.write_text('pipeline = [{fold_constants = {max_numel = 1000}}]\n')
    with pytest.raises(ConfigError) as info:
        Pipeline.from_config(path)
    assert str(info.value).endswith("write {name = 'fold_constants', options = {...}}")
    with pytest.raises(ConfigError) as info:
        Pipeline([{"fold_constants": {"max_numel": 3}}])
    assert str(info.value).endswith("""write {"name": 'fold_constants', "options": {...}} or ('fold_constants', {...})""")


class _Double(fxpasses.NodePass):
    """x + x -> x * 2 (a pass class that no plugin registers)."""

    name = "double_add"
    writes_tensors = False

    @fxpasses.on("add")
    def add(self, node, ctx):
        if len(node.args) == 2 and node.args[0] is node.args[1]:
            ctx.count("doubled")
            return fxpasses.Replace(ctx.call_function(torch.mul, (node.args[0], 2)))
        return None


class _AddSelf(torch.nn.Module):
    def forward(self, x):
        return x + x


@pytest.mark.parametrize(
    "one, expected",
    [
        (_Double, "double_add"),
        (_Double(), "double_add"),
        ((_Double, {}), "double_add"),
        ({"name": "eliminate_dead_code"}, "eliminate_dead_code"),
        ("eliminate_dead_code", "eliminate_dead_code"),
        (("fold_constants", {"max_numel": 3}), "fold_constants{max_numel=3}"),
    ],
    ids=["class", "instance", "class-options", "table", "name", "name-options"],
)
def test_one_pass_not_in_a_list_is_a_one_pass_pipeline(one, expected):
    """``Pipeline(MyPass)`` / ``fxpasses.run(gm, MyPass)`` raised ``TypeError: 'type' object is
    not iterable``: one entry alone is a pipeline of one pass."""
    plan = Pipeline(one).plan()
    assert plan.as_pipeline_string() == expected
    assert Pipeline([one]).plan().as_pipeline_string() == expected


def test_run_takes_one_pass_class_or_instance():
    x = torch.randn(3)
    for one in (_Double, _Double()):
        gm = torch.fx.symbolic_trace(_AddSelf())
        report = fxpasses.run(gm, one, [x], verify="numeric")
        assert [p.name for p in report.passes] == ["double_add"]
        assert report["double_add"].counters == {"doubled": 1}
        assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [torch.mul]
        torch.testing.assert_close(gm(x), x * 2)


@pytest.mark.parametrize(
    "bad, said",
    [
        (42, "Pipeline() takes a list of entries or one pass (a pass name, a pass class or instance, or a table), got 42 of type int"),
        (None, "Pipeline() takes a list of entries or one pass (a pass name, a pass class or instance, or a table), got None of type NoneType"),
        (b"eliminate_dead_code", "got b'eliminate_dead_code' of type bytes"),
        (
            "remove_dropout,eliminate_dead_code",
            "Pipeline() takes a list of entries or one pass, got the pipeline string "
            "'remove_dropout,eliminate_dead_code'; use Pipeline.from_string for a pipeline string",
        ),
        ([42], "pipeline, entry 1: bad pipeline entry 42 of type int: expected a pass name, a pass class or instance, (name or class, options), a table, a fixpoint group or a pass function"),
        (["eliminate_dead_code", 1.5], "pipeline, entry 2: bad pipeline entry 1.5 of type float: expected"),
    ],
)
def test_something_that_is_not_a_pass_is_a_config_error_naming_it_and_its_type(bad, said):
    with pytest.raises(ConfigError) as info:
        Pipeline(bad)
    assert said in str(info.value)
    gm = torch.fx.symbolic_trace(_AddSelf())
    if not isinstance(bad, str):
        with pytest.raises(ConfigError) as info:
            fxpasses.run(gm, bad)
        assert said in str(info.value)


def test_a_pass_instance_given_to_a_pipeline_is_the_one_that_runs():
    """Found by the new-user check: the pipeline ran type(instance)(instance.options), so what
    a pass collected on itself was lost and a constructor argument got the options object."""
    import torch

    from fxpasses import NodePass, PassOptions, on

    class Collect(NodePass):
        """Collects the relu nodes it saw, scaled by its own constructor argument."""

        name = "collect_relus"

        class Options(PassOptions):
            k: int = 1

        def __init__(self, factor, options=None):
            super().__init__(options)
            self.factor = factor
            self.seen = []

        @on("relu")
        def relu(self, node, ctx):
            self.seen.append((node.name, self.factor, self.options.k))

    inst = Collect(3.0, Collect.Options(k=5))
    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU()))
    pipe = fxpasses.Pipeline(inst)
    assert pipe.plan().steps[0].instance is inst
    pipe.run(gm, [torch.randn(2)])
    pipe.run(gm, [torch.randn(2)])  # the same instance, run again
    assert inst.seen == [("_0", 3.0, 5), ("_0", 3.0, 5)]
    # options from the options table are set on it
    other = Collect(2.0)
    fxpasses.Pipeline([other], options={"collect_relus": {"k": 7}}).run(gm, [torch.randn(2)])
    assert other.seen == [("_0", 2.0, 7)] and other.options.k == 7


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_capture_of_a_bare_tensor_says_to_wrap_it_in_a_list(dialect):
    """Found by the new-user check: capture(model, x, dialect) raised torch's 'Boolean value
    of Tensor with more than one value is ambiguous'."""
    import torch

    from fxpasses.capture import capture
    from fxpasses.errors import UserError

    with pytest.raises(UserError) as info:
        capture(torch.nn.ReLU(), torch.randn(2, 3), dialect)
    assert str(info.value) == (
        "example_inputs must be a list or tuple of the module's positional inputs, got Tensor "
        "(wrap a single input in a list: [x])"
    )


class _OtherOptions(fxpasses.PassOptions):
    factor: int = 2


def test_a_pass_instance_given_options_beside_it_says_how_to_write_it():
    """`Pipeline((MyPass(), {...}))` was read as two entries ("entry 2: bad pipeline entry
    {...}: name: Field required"); it is one entry, refused with the two ways to write it."""
    p = make_pass("inst", options=_OtherOptions)
    expected = (
        "bad pipeline entry (Inst instance, {'factor': 3}): an instance carries its own options; give the class with "
        "the options, (Inst, {...}), or the options to the instance, Inst(Inst.Options(...))"
    )
    for given, entry in (((p(), {"factor": 3}), 1), ([p(), (p(), {"factor": 3})], 2)):
        with pytest.raises(ConfigError) as info:
            Pipeline(given, registry=Registry(autoload=False))
        assert str(info.value) == f"pipeline, entry {entry}: {expected}"
    assert Pipeline((p, {"factor": 3}), registry=Registry(autoload=False)).plan().steps[0].options.factor == 3


def test_a_pass_takes_its_options_as_a_model_a_mapping_or_keywords_validated():
    """`MyPass(k=2)` was a bare TypeError, and `MyPass({"k": 2})` kept the dict as its options,
    so `self.options.k` failed when the pass ran outside a pipeline (found by a new-user check)."""
    p = make_pass("inst", options=_OtherOptions)
    for made in (p(factor=3), p({"factor": 3}), p(_OtherOptions(factor=3))):
        assert type(made.options) is _OtherOptions and made.options.factor == 3
    assert p().options.factor == _OtherOptions().factor
    with pytest.raises(OptionsError) as info:
        p(factr=3)
    assert str(info.value).splitlines() == [
        "invalid options for pass 'inst' (Inst(...)):",
        "  inst.factr: unknown option; did you mean 'factor'? (valid: factor) (given: 3)",
    ]
    with pytest.raises(OptionsError, match=r"inst.factor: Input should be a valid integer \(given: 2.5\)"):
        p({"factor": 2.5})
    with pytest.raises(OptionsError, match=r"given both as dict and as keywords \(factor\): give one"):
        p({"factor": 2}, factor=3)


def test_a_pass_instance_holding_another_pass_options_is_named():
    p = make_pass("inst", options=_OtherOptions)
    with pytest.raises(OptionsError) as info:
        Pipeline(p(CSEOptions()), registry=Registry(autoload=False))
    assert info.value.problems[0][:2] == (
        "(options)",
        f"options are a {__name__}.CSEOptions, not this pass's Options ({__name__}._OtherOptions): another pass's options?",
    )


@pytest.mark.parametrize(
    "text, suggestion",
    [
        ("fold_constants{MAX_NUMEL=3}", "did you mean 'max_numel'?"),  # case ignored, as for pass names
        ("fold_constants{Max_Growth_Byte=3}", "did you mean 'max_growth_bytes'?"),
        ("fold_constants{zzz=1}", None),
    ],
)
def test_unknown_option_suggestions_ignore_case(text, suggestion):
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string(text)
    line = next(ln for ln in str(info.value).splitlines() if "unknown option" in ln)
    valid = "(valid: max_numel, max_growth_bytes, remove_unused_state, fold_parameters, modules_may_train)"
    expected = f"unknown option; {suggestion} {valid}" if suggestion else f"unknown option {valid}"
    assert expected in line


def test_two_different_passes_of_one_name_in_a_pipeline_are_refused():
    """Both ran and ``report[name]`` returned the last one; options tables and ordering go
    by name too."""
    from fxpasses.builtin_passes.dead_code import EliminateDeadCode

    class MyDCE(fxpasses.GraphPass):
        name = "eliminate_dead_code"

        def run(self, gm, ctx):
            return False

    class Tweaked(EliminateDeadCode):  # inherits the name
        pass

    mine = f"{__name__}.test_two_different_passes_of_one_name_in_a_pipeline_are_refused.<locals>"
    with pytest.raises(ConfigError) as info:
        fxpasses.Pipeline(["eliminate_dead_code", MyDCE])
    assert str(info.value) == (
        "pipeline: two different passes are named 'eliminate_dead_code' in this pipeline: "
        "fxpasses.builtin_passes.dead_code.EliminateDeadCode (pipeline, entry 1) and "
        f"{mine}.MyDCE (pipeline, entry 2); give each pass class its own `name`"
    )
    with pytest.raises(ConfigError, match=r"give each pass class its own `name` \(a subclass inherits its base class's\)$"):
        fxpasses.Pipeline([Tweaked, "eliminate_common_subexpressions", "eliminate_dead_code"])
    # the same pass twice, and a subclass alone under its base's name, stay allowed
    assert [s.name for s in fxpasses.Pipeline(["eliminate_dead_code", EliminateDeadCode], order="as-given").plan().steps] == [
        "eliminate_dead_code",
        "eliminate_dead_code",
    ]
    assert fxpasses.Pipeline([Tweaked]).plan().steps[0].cls is Tweaked


def test_errors_in_a_pipeline_string_of_several_lines_name_the_line_and_place_the_caret_by_cells():
    """A TOML multi-line pipeline string's error said "column 46" and drew the whole text with
    the caret at cell 46 of a 30-character line; carets under decomposed, CJK or emoji text
    were off by the cells those take (found by a new-user check)."""
    with pytest.raises(ConfigError) as info:
        parse_pipeline_string("\nremove_dropout,\n    fold_constants{max_numel=}")
    assert str(info.value).splitlines() == [
        "pipeline string, line 3, column 30: expected a value, found '}'",
        "      fold_constants{max_numel=}",
        "                               ^",
    ]
    for text, caret in (("U\u0308ni\u0308code{x=}", 10), ("名前{x=}", 7), ("a{x='😀😀',y=}", 13)):
        with pytest.raises(ConfigError) as info:
            parse_pipeline_string(text)
        assert str(info.value).splitlines()[2] == "  " + " " * caret + "^", text
    # tabs (white space in pipeline strings) are copied, so the caret reaches the same stop
    with pytest.raises(ConfigError) as info:
        parse_pipeline_string("a,\n\tb{x=1,\ty=}")
    assert str(info.value).splitlines()[1:] == ["  \tb{x=1,\ty=}", "  \t" + " " * 6 + "\t  ^"]
    with pytest.raises(fxpasses.OptionsError) as info:
        Pipeline.from_string("remove_dropout,\n    fold_constants{max_numel='3'}")
    assert str(info.value).splitlines() == [
        "invalid options for pass 'fold_constants' (pipeline string, entry 2 ('fold_constants') at line 2, column 5):",
        "  fold_constants.max_numel (line 2, column 20): Input should be a valid integer (given: '3'; a number in "
        "quotes is a string: write 3 without the quotes)",
    ]


def test_repr_of_a_pipeline_whose_construction_raised_does_not_raise():
    """pytest showed `[AttributeError("'Pipeline' object has no attribute '_plan'") raised in
    repr()]` in tracebacks through a Pipeline that failed while being built (found by a
    new-user check)."""
    half = Pipeline.__new__(Pipeline)
    assert repr(half) == "Pipeline('<not built>', verify=None, on_error=None)"
    assert repr(Pipeline(["a"], registry=_reg_with_a())) == "Pipeline('a', verify='lint', on_error='rollback')"


def _reg_with_a():
    r = Registry(autoload=False)
    r.register(make_pass("a"))
    return r


def test_a_model_symbolic_trace_cannot_take_is_pointed_at_the_other_captures():
    from fxpasses.capture import capture

    class Branches(torch.nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    with pytest.raises(UserError) as info:
        capture(Branches(), [torch.ones(2)], "symbolic_trace")
    assert str(info.value).startswith("symbolic_trace could not trace Branches: TraceError: ")
    assert str(info.value).endswith(
        "which the export and dynamo captures take; Python control flow on tensor values needs torch.cond in any capture)"
    )



def test_a_model_using_torch_cond_is_not_told_to_use_torch_cond():
    """symbolic_trace of a model that already uses torch.cond said "Python control flow on
    tensor values needs torch.cond" (a new-user check): the operator is named instead."""
    from fxpasses.capture import capture

    class Cond(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,))

    with pytest.raises(UserError) as info:
        capture(Cond(), [torch.ones(2)], "symbolic_trace")
    assert str(info.value).startswith("symbolic_trace could not trace Cond: RuntimeError: Expected pred to be bool or tensor")
    assert str(info.value).endswith(
        "(symbolic_trace cannot trace a control-flow operator (cond) on tensor values, which the export and dynamo "
        "captures take)"
    )

def test_a_nan_default_is_not_printed_as_a_setting_in_the_plan():
    """`nanval=nan` appeared in the plan's pipeline string for an option nobody set whose
    default is nan (nan != nan); found by a new-user check."""

    class NanDefault(fxpasses.GraphPass):
        name = "nan_default"

        class Options(fxpasses.PassOptions):
            nanval: float = float("nan")
            limit: float = 1.0

        def run(self, gm, ctx):
            return False

    plan = Pipeline([NanDefault]).plan()
    assert plan.as_pipeline_string() == "nan_default"
    plan = Pipeline([(NanDefault, {"limit": 2.0})]).plan()
    assert plan.as_pipeline_string() == "nan_default{limit=2.0}"


def test_a_pass_report_is_truthy_and_a_run_report_iterates_over_its_passes():
    """PassReport carried RunReport's __iter__/__len__ (over a `passes` it has not): `if
    report["x"]:` raised AttributeError, as did len() and list() of a pass report."""
    from fxpasses.report import PassReport

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) * 1

    report = fxpasses.Pipeline(["simplify_algebra", "eliminate_dead_code"]).run(torch.fx.symbolic_trace(M()), [torch.randn(3)])
    assert bool(report["eliminate_dead_code"]) and len(report) == 2 and [p.name for p in report] == ["simplify_algebra", "eliminate_dead_code"]
    with pytest.raises(TypeError):
        len(PassReport("a"))
    assert PassReport("a", iteration=2).label == "a #2" and PassReport("a").label == "a"


def test_a_report_asked_for_a_pass_that_did_not_run_names_those_that_did():
    """`report["nonexistent"]` was a bare KeyError of the name (a new-user check)."""

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) * 1

    report = fxpasses.Pipeline(["simplify_algebra", "eliminate_dead_code"]).run(torch.fx.symbolic_trace(M()), [torch.randn(3)])
    with pytest.raises(KeyError) as info:
        report["eliminate_dead_cod"]
    assert info.value.args[0] == (
        "no pass named 'eliminate_dead_cod' ran (the report holds 'simplify_algebra', 'eliminate_dead_code'); "
        "did you mean 'eliminate_dead_code'?"
    )
    with pytest.raises(KeyError, match=r"^\"no pass named 'fold_constants' ran \(the report holds 'simplify_algebra', 'eliminate_dead_code'\)\"$"):
        report["fold_constants"]


def test_running_a_pipeline_on_a_program_or_a_plain_module_says_what_to_give():
    """`Pipeline.run(ep)` said "takes a torch.fx.GraphModule, got ExportedProgram" and no
    more (a new-user check): it now points at `ep.module()`, and for a plain module at the
    captures."""
    model = torch.nn.Linear(2, 2)
    ep = torch.export.export(model, (torch.randn(1, 2),))
    with pytest.raises(fxpasses.UserError) as info:
        fxpasses.Pipeline("eliminate_dead_code").run(ep)
    assert str(info.value) == (
        "Pipeline.run takes a torch.fx.GraphModule, got ExportedProgram: run it on the program's module, "
        "ep.module() (an ExportedProgram is not a module)"
    )
    with pytest.raises(fxpasses.UserError, match=r"got Linear: capture the model as a graph first \(torch.export.export"):
        fxpasses.Pipeline("eliminate_dead_code").run(model)
    assert fxpasses.Pipeline("eliminate_dead_code").run(ep.module())["eliminate_dead_code"].status == "ok"


def test_a_choice_of_a_literal_or_enum_read_as_none_a_boolean_or_a_number_says_to_quote_it():
    """`approx=none` for `approx: Literal["none", "tanh"]` (torch's own gelu spelling) read the
    bare word as None: "Input should be 'none' or 'tanh' (given: None)", without the quoting
    hint a text option gets (a pass-author check). The same for an Enum, a boolean's and a
    number's spelling, and a list's element."""
    import enum
    from typing import Literal

    class Approx(enum.Enum):
        NONE = "none"
        TANH = "tanh"

    class Choices(fxpasses.PassOptions):
        approx: Literal["none", "tanh"] = "tanh"
        mode: Approx = Approx.TANH
        level: Literal["1", "2"] = "1"
        flag: Literal["true", "auto"] = "auto"
        many: list[Literal["none", "tanh"]] = []

    reg = Registry(autoload=False)
    reg.register(make_pass("choices", options=Choices))
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string("choices{approx=none, mode=null, level=2, flag=true, many=[tanh, none]}", registry=reg)
    lines = str(info.value).splitlines()[1:]
    assert [line.split(": ", 1)[1] for line in lines] == [
        "Input should be 'none' or 'tanh' (an unquoted none or null in a pipeline string is None: quote the text, approx=\"none\") (given: None)",
        "Input should be 'none' or 'tanh' (an unquoted none or null in a pipeline string is None: quote the text, mode=\"none\") (given: None)",
        "Input should be '1' or '2' (an unquoted 2 in a pipeline string is a number: quote the text, level=\"2\") (given: 2)",
        "Input should be 'true' or 'auto' (an unquoted true in a pipeline string is a boolean: quote the text, flag=\"true\") (given: True)",
        "Input should be 'none' or 'tanh' (an unquoted none or null in a pipeline string is None: quote the text, many=[..., \"none\", ...]) (given: None)",
    ]
    options = Pipeline.from_string('choices{approx="none", mode="none", many=[tanh, "none"]}', registry=reg).plan().steps[0].options
    assert (options.approx, options.mode, options.many) == ("none", Approx.NONE, ["tanh", "none"])


def test_a_setting_given_as_an_option_and_settings_on_a_group_say_where_settings_go():
    """`fold_constants{on_error=skip}` (what the hyphen hint for `on-error` in braces led to)
    was "unknown option (valid: ...)"; `fixpoint{...}[on_error=skip](...)` was "expected ','
    between passes, found '('" (a check of this session's changes)."""
    with pytest.raises(OptionsError) as info:
        Pipeline.from_string("fold_constants{on_error=skip}")
    assert (
        "unknown option; on_error is a setting of the entry, not an option of the pass: in a pipeline string it "
        "goes in brackets after the options (name{...}[on_error=...])"
    ) in str(info.value)
    with pytest.raises(ConfigError) as info:
        Pipeline.from_string("fixpoint{max_iterations=3}[on_error=skip](fold_constants)")
    assert str(info.value).startswith(
        "pipeline string, column 42: a fixpoint group takes no settings in [...]: give each pass in it its own"
    )
    assert Pipeline.from_string("fixpoint{max_iterations=3}(fold_constants[on_error=skip])").plan().steps


def test_in_tells_whether_a_report_finds_a_name_or_a_label():
    """`"simplify_algebra" in report` was False for a pass that ran (the report iterates over
    pass reports); a missing label's KeyError now lists the labels there are."""

    class M(torch.nn.Module):
        def forward(self, x):
            x.sin()  # dead: the first iteration removes it, the second changes nothing
            return x.relu()

    report = Pipeline.from_string("fixpoint(simplify_algebra,eliminate_dead_code)").run(torch.fx.symbolic_trace(M()), [torch.randn(2)])
    assert [p.label for p in report] == ["simplify_algebra #1", "eliminate_dead_code #1", "simplify_algebra #2", "eliminate_dead_code #2"]
    assert "simplify_algebra" in report and "simplify_algebra #1" in report and "eliminate_dead_code #2" in report
    assert "simplify_algebra #3" not in report and "fold_constants" not in report and 3 not in report
    with pytest.raises(KeyError) as info:
        report["simplify_algebra #3"]
    assert "by iteration: 'simplify_algebra #1', 'eliminate_dead_code #1', 'simplify_algebra #2', 'eliminate_dead_code #2')" in info.value.args[0]


class _Cat(pydantic.BaseModel):
    kind: Literal["cat"] = "cat"
    lives: int = 9


class _Dog(pydantic.BaseModel):
    kind: Literal["dog"] = "dog"
    bark: str = "woof"


class _PetOptions(fxpasses.PassOptions):
    pet: Annotated[Union[_Cat, _Dog], pydantic.Field(discriminator="kind")] = pydantic.Field(default_factory=_Cat)
    pets: list[Union[_Cat, _Dog]] = pydantic.Field(default_factory=list)
    fl: Union[int, float] = 1
    neg0: float = -0.0
    data: bytes = b""
    hy: int = pydantic.Field(1, alias="my-opt")


@pytest.mark.parametrize(
    "text, printed",
    [
        # a field equal to its default was left out of a nested model, so Dog printed as {}
        # and read back as the default Cat (an adversarial check): nested models print whole
        ("pets{pet={kind=dog}}", "pets{pet={kind=dog,bark=woof}}"),
        ("pets{pets=[{kind=dog},{lives=3}]}", "pets{pets=[{kind=dog,bark=woof},{kind=cat,lives=3}]}"),
        # == took 1.0 for the default 1 and 0.0 for -0.0: printed nothing, read back as them
        ("pets{fl=1.0}", "pets{fl=1.0}"),
        ("pets{neg0=0.0}", "pets{neg0=0.0}"),
        ("pets{neg0=-0.0,fl=1}", "pets"),
        # bytes printed as b'abc', which does not parse
        ("pets{data=abc}", "pets{data=abc}"),
        # an alias that is no identifier printed bare (my-opt=3), which does not parse: quoted
        ("pets{'my-opt'=3}", "pets{'my-opt'=3}"),
    ],
)
def test_printed_options_read_back_as_the_same_values(text, printed):
    import math

    r = Registry(autoload=False)
    r.register(make_pass("pets", options=_PetOptions))
    options = Pipeline.from_string(text, registry=r).plan().steps[0].options
    assert Pipeline([("pets", options)], registry=r).plan().as_pipeline_string() == printed
    back = Pipeline.from_string(printed, registry=r).plan().steps[0].options
    assert back == options and type(back.pet) is type(options.pet) and type(back.fl) is type(options.fl)
    assert [type(p) for p in back.pets] == [type(p) for p in options.pets]
    assert math.copysign(1.0, back.neg0) == math.copysign(1.0, options.neg0)
    # and so does a reproducer's entry (JSON)
    from fxpasses.pipeline import changed_options

    entry = {"name": "pets", "options": json.loads(json.dumps(changed_options(options, mode="json")))}
    again = Pipeline.from_config({"pipeline": [entry]}, registry=r).plan().steps[0].options
    assert again == options and type(again.pet) is type(options.pet) and type(again.fl) is type(options.fl)


def test_a_missing_closing_brace_in_a_pipeline_string_is_suggested():
    """`fold_constants{max_numel=4096,eliminate_dead_code` read the next pass as an option and
    said only "expected '=' after option 'eliminate_dead_code'" (a new-user check)."""
    with pytest.raises(fxpasses.ConfigError) as info:
        Pipeline.from_string("remove_dropout,fold_constants{max_numel=4096,eliminate_dead_code")
    assert str(info.value).splitlines()[0] == (
        "pipeline string, column 65: expected '=' after option 'eliminate_dead_code' of 'fold_constants', found end "
        "of string (the options of 'fold_constants' have no closing '}': is one missing before a pass name read as an "
        "option?)"
    )


_OPTIONS_EXAMPLE = "options={'fold_constants': {'max_numel': 4096}}"


@pytest.mark.parametrize(
    "options, message",
    [
        ([1], f"options must be a mapping of pass name -> its options ({_OPTIONS_EXAMPLE}), got [1] of type list"),
        ([], f"options must be a mapping of pass name -> its options ({_OPTIONS_EXAMPLE}), got [] of type list"),
        (
            "remove_dropout",
            f"options must be a mapping of pass name -> its options ({_OPTIONS_EXAMPLE}), got 'remove_dropout' of type str",
        ),
        (
            {"remove_dropout": 5},
            f"options['remove_dropout'] must be a mapping of option name -> value ({_OPTIONS_EXAMPLE}), got 5 of type int",
        ),
        ({3: {}}, "options: a key must be a pass name (a str), got 3 of type int"),
    ],
)
def test_python_options_that_are_no_tables_of_tables_are_a_config_error_naming_them(options, message):
    """``Pipeline(..., options=[1])`` failed with ``AttributeError: 'list' object has no attribute
    'items'``, ``options={'p': 5}`` with ``TypeError: 'int' object is not iterable`` and
    ``options={3: {}}`` with ``AttributeError: 'int' object has no attribute 'lower'``: none
    named ``options`` (a new-user check; a config file's tables were checked by its schema)."""
    with pytest.raises(ConfigError) as info:
        Pipeline("remove_dropout", options=options)
    assert str(info.value) == message
    with pytest.raises(ConfigError) as info:  # the constructors that take options= too
        Pipeline.from_preset("inference", options=options)
    assert str(info.value) == f"preset 'inference': {message}"
    with pytest.raises(ConfigError) as info:
        Pipeline.from_string("remove_dropout", options=options)
    assert str(info.value) == f"pipeline string: {message}"


def test_python_options_keyed_by_a_pass_class_name_its_name():
    reg = Registry()
    cls = reg.get("remove_dropout")
    with pytest.raises(ConfigError) as info:
        Pipeline([cls], options={cls: {"inference": True}}, registry=reg)
    assert str(info.value).endswith("of type type (key a pass class's options by its name, 'remove_dropout')")
    # what was accepted still is: None, {}, and an Options instance as a table
    assert Pipeline("remove_dropout", options=None).plan().steps[0].name == "remove_dropout"
    assert Pipeline("remove_dropout", options={}).plan().steps[0].name == "remove_dropout"
    options = reg.get("fold_constants").Options(max_numel=3)
    step = Pipeline("fold_constants", options={"fold_constants": options}).plan().steps[0]
    assert step.options.max_numel == 3


def test_a_dotted_option_name_in_a_pipeline_string_says_how_a_nested_field_is_given():
    """`fxpasses show` lists a nested options model's field as `tiling.size`, and the README said
    it lists options "as --pipeline takes them", but `tiled{tiling.size=8}` said only "expected
    '=' after option 'tiling' of 'tiled', found '.'" (a new-user check)."""
    with pytest.raises(ConfigError) as info:
        Pipeline.from_string("tiled{tiling.size=8}")
    assert str(info.value) == (
        "pipeline string, column 13: expected '=' after option 'tiling' of 'tiled', found '.': tiling.size names a "
        "field of option 'tiling' (as fxpasses show lists a nested options model's fields), given in a table for "
        "it: tiling={size=8}; a table given for an option replaces its default as a whole (the fields it leaves "
        "out take their own defaults)\n"
        "  tiled{tiling.size=8}\n"
        "              ^"
    )
    with pytest.raises(ConfigError) as info:
        Pipeline.from_string("a{outer.tiling.size=[1, 2],b=1}")
    assert str(info.value).splitlines()[0].endswith(
        "found '.': outer.tiling.size names a field of option 'outer' (as fxpasses show lists a nested options "
        "model's fields), given in a table for it: outer={tiling={size=[1,2]}}; a table given for an option "
        "replaces its default as a whole (the fields it leaves out take their own defaults)"
    )
    # a value that does not parse is shown as ...; a '.' not followed by a name and '=' is as before
    with pytest.raises(ConfigError, match=r"given in a table for it: t=\{s=\.\.\.\};"):
        Pipeline.from_string("a{t.s=[1,}")
    with pytest.raises(ConfigError) as info:
        Pipeline.from_string("a{t.5=1}")
    assert str(info.value).splitlines()[0] == "pipeline string, column 4: expected '=' after option 't' of 'a', found '.'"
