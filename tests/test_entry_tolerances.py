"""A pipeline entry's own tolerances of numeric verification (``name[atol=...,rtol=...]``, a
table's ``atol``/``rtol``): asked for twice by pass authors (one pass that reorders
arithmetic, the others held bit-exact)."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

import fxpasses
from fxpasses import GraphPass, NodePass, Pipeline, Registry, Replace, on
from fxpasses.bisect import bisect
from fxpasses.cli import cli
from fxpasses.errors import ConfigError, PassFailedError
from fxpasses.spec import parse_pipeline_string


class Nudge(GraphPass):
    """Adds 1e-4 to the graph's output: a change of the outputs within 1e-3, not 1e-5."""

    name = "nudge"

    def run(self, gm, ctx):
        out = next(n for n in gm.graph.nodes if n.op == "output")
        value = out.args[0]
        with gm.graph.inserting_before(out):
            moved = gm.graph.call_function(torch.add, (value, 1e-4))
        out.args = (moved,)
        return True


class Exact(NodePass):
    """Rewrites ``x * 1`` to ``x`` (bit-exact)."""

    name = "exact"

    @on("mul")
    def drop(self, node, ctx):
        if node.args[1] == 1:
            return Replace(node.args[0])
        return None


class Breaker(NodePass):
    """Drops each ``relu``: harmless on the first (of a sigmoid), wrong on the second."""

    name = "breaker"

    @on("relu")
    def drop(self, node, ctx):
        return Replace(node.args[0])


class M(torch.nn.Module):
    def forward(self, x):
        a = torch.relu(torch.sigmoid(x))
        b = torch.relu(x)
        return (a + b) * 1


def _graph():
    return torch.fx.symbolic_trace(M())


X = torch.linspace(-2, 2, 12).reshape(3, 4)
REG = Registry(autoload=False)


def test_pipeline_string_settings_read_and_write_back():
    entries = parse_pipeline_string("fuse_conv_bn{fold_in_graph=true}[rtol=1e-2,atol=0],eliminate_dead_code")
    assert (entries[0].atol, entries[0].rtol) == (0.0, 0.01)
    assert (entries[1].atol, entries[1].rtol) == (None, None)
    p = Pipeline.from_string("simplify_algebra[atol=1e-3,verify=numeric],eliminate_dead_code[rtol=0.5]")
    steps = p.plan().steps
    assert [(s.atol, s.rtol, s.verify) for s in steps] == [(1e-3, None, "numeric"), (None, 0.5, None)]
    text = p.plan().as_pipeline_string()
    assert text == "simplify_algebra[verify=numeric,atol=0.001],eliminate_dead_code[rtol=0.5]"
    again = Pipeline.from_string(text).plan().steps
    assert [(s.atol, s.rtol) for s in again] == [(1e-3, None), (None, 0.5)]


@pytest.mark.parametrize(
    "text, message",
    [
        ("simplify_algebra[atol=-1]", "atol of 'simplify_algebra' must be a finite number >= 0, such as 1e-3, got -1"),
        ("simplify_algebra[rtol=nan]", "rtol of 'simplify_algebra' must be a finite number >= 0, such as 1e-3, got nan"),
        ("simplify_algebra[atol=inf]", "got inf"),
        ("simplify_algebra[atol=true]", "got True"),
        ("simplify_algebra[atol='1e-3']", "got '1e-3'"),
        ("simplify_algebra[atol=1e-3,atol=0]", "setting 'atol' of 'simplify_algebra' given twice"),
        (
            "simplify_algebra[tol=1]",
            "unknown setting 'tol' for 'simplify_algebra': settings in [...] are verify, on_error, atol and rtol",
        ),
    ],
)
def test_bad_tolerance_settings_name_the_entry_and_column(text, message):
    with pytest.raises(ConfigError) as info:
        parse_pipeline_string(text)
    assert message in str(info.value)
    assert "column" in str(info.value)


def test_a_tolerance_written_as_an_option_says_where_settings_go():
    with pytest.raises(fxpasses.OptionsError) as info:
        Pipeline.from_string("simplify_algebra{atol=1e-3}")
    assert "atol is a setting of the entry, not an option of the pass" in str(info.value)
    assert "name{...}[atol=...]" in str(info.value)


def test_table_entries_take_tolerances_and_refuse_text():
    p = Pipeline([{"name": "simplify_algebra", "atol": 1e-3, "rtol": 0}])
    assert (p.plan().steps[0].atol, p.plan().steps[0].rtol) == (1e-3, 0.0)
    assert Pipeline([{"name": Exact, "atol": 2e-3}]).plan().steps[0].atol == 2e-3
    with pytest.raises(ConfigError) as info:
        Pipeline([{"name": "simplify_algebra", "atol": "1e-3"}])
    assert "atol: Input should be a valid number (given: '1e-3')" in str(info.value)
    with pytest.raises(ConfigError) as info:
        Pipeline([{"name": "simplify_algebra", "atl": 1}])
    assert "did you mean 'atol'?" in str(info.value)
    assert "(valid: name, options, verify, on_error, atol, rtol)" in str(info.value)


def test_an_entry_tolerance_admits_its_pass_and_the_checks_after_it():
    # the pipeline's tolerances refuse the nudge ...
    gm = _graph()
    with pytest.raises(PassFailedError) as info:
        Pipeline([Nudge, Exact], verify="numeric", registry=REG).run(gm, (X,))
    assert "exceeds atol=1e-05" in str(info.value)
    # ... its own admit it, and the exact pass after it, checked against the module before
    # the pipeline, is held to what the nudge was allowed, not to its own atol=0
    gm = _graph()
    report = Pipeline(
        [{"name": Nudge, "atol": 1e-3}, {"name": Exact, "atol": 0, "rtol": 0}], verify="numeric", registry=REG
    ).run(gm, (X,))
    assert [p.status for p in report] == ["ok", "ok"]
    assert (report.atol, report.rtol) == (1e-3, 1e-5)
    assert report.max_abs_error == pytest.approx(1e-4, rel=1e-3)
    assert torch.allclose(gm(X), M()(X) + 1e-4)


def test_a_tighter_entry_tolerance_holds_its_own_pass():
    # with nothing changed before it, an entry's atol=0 refuses what the pipeline's admits
    report = Pipeline([Nudge], verify="numeric", atol=1e-3, registry=REG).run(_graph(), (X,))
    assert report["nudge"].status == "ok" and report.atol == 1e-3
    with pytest.raises(PassFailedError) as info:
        Pipeline([{"name": Nudge, "atol": 0, "rtol": 0}], verify="numeric", atol=1e-3, registry=REG).run(_graph(), (X,))
    assert "exceeds atol=0, rtol=0" in str(info.value)


def test_a_rolled_back_entry_allows_nothing_to_the_passes_after_it():
    class BigNudge(Nudge):
        name = "big_nudge"

        def run(self, gm, ctx):
            super().run(gm, ctx)
            out = next(n for n in gm.graph.nodes if n.op == "output")
            with gm.graph.inserting_before(out):
                moved = gm.graph.call_function(torch.add, (out.args[0], 1.0))
            out.args = (moved,)
            return True

    # big_nudge fails its own check and is skipped: the nudge after it is held to 1e-5
    entries = [{"name": BigNudge, "atol": 1e-3, "on_error": "skip"}, Nudge]
    with pytest.raises(PassFailedError) as info:
        Pipeline(entries, verify="numeric", registry=REG).run(_graph(), (X,))
    assert info.value.pass_name == "nudge"
    assert "exceeds atol=1e-05" in str(info.value)


def test_bisect_trials_use_the_tolerances_of_the_passes_run():
    """A trial compares the outputs with the module before the pipeline: with the nudge's
    drift it must allow what the nudge was allowed, or every trial fails and the harmless
    first rewrite of the breaking pass is blamed."""
    pipeline = Pipeline([{"name": Nudge, "atol": 1e-3}, Breaker], verify="numeric", registry=REG)
    gm = _graph()
    code = gm.code
    result = bisect(pipeline, gm, (X,))
    assert result.status == "found" and result.pass_name == "breaker"
    assert (result.first, result.last) == (2, 3)  # the nudge's run is rewrite #1
    assert result.culprit.index == 3 and result.culprit.pass_index == 2
    assert not result.good.bad and result.good.limit == 2
    assert gm.code == code


MODEL = '[model]\nfactory = "fxpasses._example:convnet"\ninputs = [{shape = [1, 3, 8, 8]}]\n'


def test_fxpasses_run_compares_with_the_tolerances_the_run_ended_with(tmp_path):
    """`fxpasses run` compares the outputs after the pipeline with those before it: with
    exact tolerances for the pipeline, fuse_conv_bn's rounding fails that comparison unless
    its entry allows it."""
    cfg = tmp_path / "strict.toml"
    cfg.write_text('pipeline = "fuse_conv_bn"\natol = 0.0\nrtol = 0.0\n' + MODEL)
    r = CliRunner().invoke(cli, ["run", str(cfg), "--repeat", "1"])
    assert r.exit_code != 0
    assert "outputs differ from the original" in r.output and "exceeds atol=0, rtol=0" in r.output
    cfg.write_text('pipeline = "fuse_conv_bn[atol=1e-4],eliminate_dead_code"\natol = 0.0\nrtol = 0.0\n' + MODEL)
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["run", str(cfg), "--repeat", "1", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "outputs: match" in r.output
    report = json.loads((out / "report.json").read_text())["report"]
    assert (report["atol"], report["rtol"]) == (1e-4, 0.0)
    # a list entry's table takes them as well
    cfg.write_text(
        'pipeline = [{name = "fuse_conv_bn", atol = 1e-4}, "eliminate_dead_code"]\natol = 0.0\nrtol = 0.0\n' + MODEL
    )
    r = CliRunner().invoke(cli, ["run", str(cfg), "--repeat", "1"])
    assert r.exit_code == 0, r.output


def test_a_config_table_entry_with_a_quoted_tolerance_names_the_key(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('pipeline = [{name = "fuse_conv_bn", atol = "1e-4"}]\n' + MODEL)
    r = CliRunner().invoke(cli, ["check", str(cfg)])
    assert r.exit_code == 2, r.output
    assert "pipeline.0.atol" in r.output and "'1e-4'" in r.output
