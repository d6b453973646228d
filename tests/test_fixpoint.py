"""Fixpoint groups: passes repeated in order until an iteration changes nothing."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from click.testing import CliRunner

import fxpasses
from fxpasses import Fixpoint, FixpointWarning, GraphPass, NodePass, Pipeline, Registry, Replace, on
from fxpasses.errors import ConfigError, CycleError
from fxpasses.testing import assert_preserves_outputs


def _is_relu(n):
    return isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target is torch.relu


class Peel(NodePass):
    """relu(relu(y)) -> relu(y), for the outermost relu of a chain only: one a run, so a chain
    of three needs two iterations and a third to see that nothing is left."""

    name = "peel"
    writes_tensors = False
    journal_edits = True

    @on("relu")
    def visit(self, node, ctx):
        if any(_is_relu(u) for u in node.users) or not _is_relu(node.args[0]):
            return None
        ctx.count("peeled")
        return Replace(node.args[0])


class Chain(torch.nn.Module):
    def forward(self, x):
        return torch.relu(torch.relu(torch.relu(x))) + 1


def rows(report):
    return [(p.name, p.iteration, p.changed) for p in report.passes]


def test_a_group_runs_until_an_iteration_changes_nothing():
    gm = torch.fx.symbolic_trace(Chain())
    x = torch.randn(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FixpointWarning)
        report = Pipeline(["remove_dropout", Fixpoint([Peel, "eliminate_dead_code"]), "eliminate_common_subexpressions"]).run(gm, [x])
    assert rows(report) == [
        ("remove_dropout", 0, False),
        ("peel", 1, True), ("eliminate_dead_code", 1, False),
        ("peel", 2, True), ("eliminate_dead_code", 2, False),
        ("peel", 3, False), ("eliminate_dead_code", 3, False),
        ("eliminate_common_subexpressions", 0, False),
    ]
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [torch.relu, __import__("operator").add]
    torch.testing.assert_close(gm(x), torch.relu(x) + 1)
    assert report.notes == []
    assert "peel #3" in report.table() and "remove_dropout #" not in report.table()
    # a pass by name is its last iteration; by the table's label, that iteration (the label
    # was a KeyError: a less-traveled features check)
    assert report["peel"].iteration == 3 and report["peel"].counters == {}
    assert report["peel #1"].iteration == 1 and report["peel #1"].counters == {"peeled": 1}
    assert report["remove_dropout"].iteration == 0
    with pytest.raises(KeyError, match="no pass named 'peel #4' ran"):
        report["peel #4"]


def test_a_group_that_does_not_converge_in_max_iterations_says_so():
    gm = torch.fx.symbolic_trace(Chain())
    x = torch.randn(5)
    with pytest.warns(FixpointWarning, match=r"fixpoint\(peel\) stopped after 1 iteration \(max_iterations\)"):
        report = Pipeline([Fixpoint([Peel], max_iterations=1)]).run(gm, [x])
    assert rows(report) == [("peel", 1, True)]
    (note,) = report.notes
    assert "the last one still changing the graph: not converged" in note
    assert f"note: {note}" in report.table()
    assert sum(map(_is_relu, gm.graph.nodes)) == 2  # what one iteration did
    torch.testing.assert_close(gm(x), torch.relu(x) + 1)


@pytest.mark.parametrize(
    "entry",
    [
        Fixpoint(["simplify_algebra", ("fold_constants", {"max_numel": 64})], max_iterations=4),
        {"fixpoint": ["simplify_algebra", {"name": "fold_constants", "options": {"max_numel": 64}}], "max_iterations": 4},
    ],
    ids=["Fixpoint", "table"],
)
def test_every_way_of_writing_a_group_gives_one_plan_whose_string_reads_back(entry, tmp_path):
    text = "remove_dropout,fixpoint{max_iterations=4}(simplify_algebra,fold_constants{max_numel=64}),eliminate_dead_code"
    plan = Pipeline(["remove_dropout", entry, "eliminate_dead_code"]).plan()
    assert plan.as_pipeline_string() == text
    assert Pipeline.from_string(text).plan().as_pipeline_string() == text
    (tmp_path / "c.toml").write_text(
        'pipeline = ["remove_dropout", {fixpoint = ["simplify_algebra", {name = "fold_constants", options = '
        '{max_numel = 64}}], max_iterations = 4}, "eliminate_dead_code"]\n'
    )
    (tmp_path / "c.yaml").write_text(
        "pipeline:\n  - remove_dropout\n  - fixpoint: [simplify_algebra, {name: fold_constants, options: {max_numel: 64}}]\n"
        "    max_iterations: 4\n  - eliminate_dead_code\n"
    )
    for name in ("c.toml", "c.yaml"):
        assert Pipeline.from_config(tmp_path / name).plan().as_pipeline_string() == text, name
    # the default max_iterations is left out of the string, and the plan prints the group
    plan = Pipeline.from_string("fixpoint(simplify_algebra)").plan()
    assert plan.as_pipeline_string() == "fixpoint(simplify_algebra)"
    assert str(plan) == "    fixpoint, until an iteration changes nothing (at most 10):\n 1.   simplify_algebra"


@pytest.mark.parametrize(
    "make, said",
    [
        (lambda: Fixpoint([]), "a fixpoint group is empty"),
        (lambda: Fixpoint(None), "a fixpoint group needs a list of pipeline entries, got None"),
        (lambda: Fixpoint(["remove_dropout", Fixpoint(["eliminate_dead_code"])]), "fixpoint groups do not nest"),
        (lambda: Fixpoint(["remove_dropout"], max_iterations=0), "max_iterations must be an integer from 1 to 1000, got 0"),
        (lambda: Fixpoint(["remove_dropout"], max_iterations=True), "got True"),
        (lambda: Pipeline([{"fixpoint": ["remove_dropout"], "max_iterations": "3"}]), "got '3'"),
        (lambda: Pipeline([{"fixpoint": ["remove_dropout"], "max_iterations": 1001}]), "got 1001"),
        (lambda: Pipeline([{"fixpoint": ["remove_dropout"], "max_iteration": 3}]), "unknown key(s) 'max_iteration'"),
        (lambda: Pipeline([{"fixpoint": "remove_dropout"}]), "'fixpoint' must be a non-empty list of pipeline entries"),
        (lambda: Pipeline([{"fixpoint": [{"fixpoint": ["remove_dropout"]}]}]), "fixpoint groups do not nest"),
        (lambda: Pipeline.from_string("fixpoint(remove_dropout"), "is not closed: expected ')'"),
        (lambda: Pipeline.from_string("fixpoint()"), "the fixpoint group is empty"),
        (lambda: Pipeline.from_string("fixpoint(fixpoint(remove_dropout))"), "fixpoint groups do not nest"),
        (lambda: Pipeline.from_string("fixpoint{steps=3}(remove_dropout)"), "unknown option 'steps' of the fixpoint group"),
    ],
)
def test_malformed_groups_are_config_errors_saying_what_is_wrong(make, said):
    with pytest.raises(ConfigError) as info:
        make()
    assert said in str(info.value), str(info.value)


def test_a_misspelt_pass_in_a_group_is_named_with_its_place():
    with pytest.raises(fxpasses.UnknownPassError) as info:
        Pipeline.from_string("remove_dropout,fixpoint(simplify_algebra,fold_constant)")
    assert "entry 2 of the fixpoint group ('fold_constant') at column 42" in str(info.value)
    assert "did you mean 'fold_constants'" in str(info.value)


def test_a_pass_named_fixpoint_is_still_a_pass_when_no_group_follows():
    class Named(GraphPass):
        name = "fixpoint"

        class Options(fxpasses.PassOptions):
            k: int = 0

        def run(self, gm, ctx):
            return False

    reg = Registry(autoload=False)
    reg.register(Named)
    assert Pipeline.from_string("fixpoint{k=2}", registry=reg).plan().as_pipeline_string() == "fixpoint{k=2}"
    assert Pipeline.from_string("fixpoint{max_iterations=2}(fixpoint{k=1})", registry=reg).plan().as_pipeline_string() == (
        "fixpoint{max_iterations=2}(fixpoint{k=1})"
    )


class _After(GraphPass):
    name = "after_fold"
    after = ("fold_constants",)

    def run(self, gm, ctx):
        return False


class _Before(GraphPass):
    name = "before_fold"
    before = ("fold_constants",)

    def run(self, gm, ctx):
        return False


class _NeedsShapes(GraphPass):
    name = "needs_shapes_in_group"
    requires = ("propagate_shapes",)

    def run(self, gm, ctx):
        ctx.count("had_shapes", int(all("val" in n.meta for n in gm.graph.nodes if n.op == "call_function")))
        return False


def test_a_group_is_ordered_as_a_unit_and_its_members_among_themselves():
    reg = Registry()
    for cls in (_After, _Before, _NeedsShapes):
        reg.register(cls)
    # members: fold_constants declares before = eliminate_dead_code; outside: after_fold must
    # follow the group (it follows a member), before_fold precede it
    plan = Pipeline(
        ["after_fold", Fixpoint(["eliminate_dead_code", "fold_constants", "needs_shapes_in_group"]), "before_fold"], registry=reg
    ).plan()
    assert plan.names() == ["propagate_shapes", "before_fold", "fold_constants", "eliminate_dead_code", "needs_shapes_in_group", "after_fold"]
    assert [s.group is not None for s in plan.steps] == [False, False, True, True, True, False]
    assert plan.steps[0].reasons == ["pulled in: required by fixpoint(fold_constants,eliminate_dead_code,needs_shapes_in_group)"]
    # one pass both before and after members of one group cannot be placed
    class Between(GraphPass):
        name = "between"
        after = ("fold_constants",)
        before = ("eliminate_dead_code",)

        def run(self, gm, ctx):
            return False

    reg.register(Between)
    with pytest.raises(CycleError) as info:
        Pipeline([Fixpoint(["fold_constants", "eliminate_dead_code"]), "between"], registry=reg).plan()
    assert "between" in str(info.value) and "fixpoint(fold_constants,eliminate_dead_code)" in str(info.value)

    # a member's declaration is named as the member's (it was the group's: a new-user check)
    class AfterBetween(GraphPass):
        name = "after_between"
        after = ("between",)

        def run(self, gm, ctx):
            return False

    reg.register(AfterBetween)
    with pytest.raises(CycleError) as info:
        Pipeline([Fixpoint(["fold_constants", "after_between"]), "between"], registry=reg).plan()
    assert "after_between (in fixpoint(fold_constants,after_between)) declares after = between" in str(info.value)


def test_a_cycle_among_the_members_of_a_group_names_who_declares_each_arrow():
    """A cycle between two members of one group said `because: ? declares after = a_pass;
    ? declares after = b_pass` (a new-user check); outside a group it named the passes."""

    def declaring(name: str, **ordering: tuple[str, ...]) -> type[GraphPass]:
        return type(name, (GraphPass,), {"name": name, "run": lambda self, gm, ctx: False, **ordering})

    reg = Registry()
    for cls in (declaring("a_pass", after=("b_pass",)), declaring("b_pass", after=("a_pass",))):
        reg.register(cls)
    for entries in (["a_pass", "b_pass"], [Fixpoint(["a_pass", "b_pass"])]):
        with pytest.raises(CycleError) as info:
            Pipeline(entries, registry=reg).plan()
        assert str(info.value).endswith("because: b_pass declares after = a_pass; a_pass declares after = b_pass"), str(info.value)
    reg = Registry()
    for cls in (declaring("req_a", requires=("req_b",)), declaring("req_b", requires=("req_a",))):
        reg.register(cls)
    with pytest.raises(CycleError) as info:
        Pipeline([Fixpoint(["req_a", "req_b"])], registry=reg).plan()
    assert "?" not in str(info.value) and "req_a requires req_b" in str(info.value), str(info.value)


def test_an_analysis_a_member_requires_is_computed_again_in_each_iteration_that_needs_it():
    reg = Registry()
    reg.register(_NeedsShapes)
    gm = torch.fx.symbolic_trace(Chain())
    report = Pipeline([Fixpoint([Peel, "needs_shapes_in_group"])], registry=reg).run(gm, [torch.randn(5)])
    names = [(p.name, p.iteration, p.status) for p in report.passes]
    # pulled in before the group, then on demand after each iteration's peel changed the graph
    assert names[:3] == [("propagate_shapes", 0, "ok"), ("peel", 1, "ok"), ("propagate_shapes", 0, "ok")]
    assert [p.counters for p in report.passes if p.name == "needs_shapes_in_group"] == [{"had_shapes": 1}] * 3


class _FailsSecondTime(GraphPass):
    """Fails (after editing the graph) on its second run."""

    name = "fails_second_time"

    def __init__(self, options=None):
        super().__init__(options)
        self.runs = 0

    def run(self, gm, ctx):
        self.runs += 1
        if self.runs == 2:
            for n in gm.graph.nodes:
                if n.op == "call_function":
                    n.target = torch.sigmoid
            raise RuntimeError("second run")
        return False


def test_a_member_failing_in_a_later_iteration_is_rolled_back_there():
    gm = torch.fx.symbolic_trace(Chain())
    x = torch.randn(5)
    failing = _FailsSecondTime()
    report = Pipeline([Fixpoint([Peel, failing])], on_error="skip").run(gm, [x])
    assert [(p.name, p.iteration, p.status) for p in report.passes] == [
        ("peel", 1, "ok"), ("fails_second_time", 1, "ok"),
        ("peel", 2, "ok"), ("fails_second_time", 2, "skipped"),
        ("peel", 3, "ok"), ("fails_second_time", 3, "ok"),
    ]
    assert sum(map(_is_relu, gm.graph.nodes)) == 1 and not any(n.target is torch.sigmoid for n in gm.graph.nodes)
    torch.testing.assert_close(gm(x), torch.relu(x) + 1)
    gm = torch.fx.symbolic_trace(Chain())
    with pytest.raises(fxpasses.PassFailedError) as info:
        Pipeline([Fixpoint([Peel, _FailsSecondTime()])]).run(gm, [x])
    assert info.value.rolled_back and [p.iteration for p in info.value.report.passes] == [1, 1, 2, 2]
    assert "in iteration 2 of its fixpoint group (at most 10)" in info.value.notes
    assert sum(map(_is_relu, gm.graph.nodes)) == 1  # two peels kept, the failure undone
    torch.testing.assert_close(gm(x), torch.relu(x) + 1)


def test_built_in_passes_in_a_group_keep_outputs_and_converge_in_every_dialect():
    from fxpasses._example import convnet

    model = convnet().eval()
    group = Pipeline(
        ["remove_dropout", Fixpoint(["simplify_algebra", "fold_constants", "eliminate_common_subexpressions", "eliminate_dead_code"])]
    )
    x = torch.randn(2, 3, 16, 16)
    results = assert_preserves_outputs(group, model, [x], check_inputs=[[torch.randn(2, 3, 16, 16) * 3]])
    for dialect, (gm, report) in results.items():
        last = max(p.iteration for p in report.passes)
        assert last >= 1 and report.notes == [], dialect
        assert not any(p.changed for p in report.passes if p.iteration == last), (dialect, rows(report))


def test_bisect_names_the_plan_step_of_a_bad_rewrite_in_a_group():
    from fxpasses.bisect import bisect

    class Bad(NodePass):
        """Turns the one add into a sub: wrong outputs, found once peeling is done."""

        name = "bad_add"
        writes_tensors = False
        journal_edits = True

        @on("add")
        def visit(self, node, ctx):
            if any(_is_relu(n) and _is_relu(n.args[0]) for n in ctx.graph.nodes):
                return None  # (until peeling is done: in the second iteration)
            return Replace(ctx.call_function(__import__("operator").sub, node.args))

    gm = torch.fx.symbolic_trace(Chain())
    result = bisect(Pipeline(["remove_dropout", Fixpoint([Peel, Bad])]), gm, [torch.randn(5)])
    assert result.status == "found" and result.pass_name == "bad_add" and result.step == 3 and result.steps == 3
    assert result.culprit.pass_name == "bad_add" and result.culprit.step == 3
    # which iteration made it: the JSON and the text say so (they named the pass alone)
    assert result.iteration == 2 and result.culprit.iteration == 2
    assert result.as_dict()["iteration"] == 2 and result.as_dict()["culprit"]["iteration"] == 2
    text = result.text()
    assert "first bad pass: 'bad_add' (step 3 of 3, fixpoint iteration 2)" in text
    assert "(#1 of pass 'bad_add' in fixpoint iteration 2): Replace(%sub)" in text


def test_the_cli_prints_groups_in_check_and_iterations_in_run(tmp_path):
    from fxpasses.cli import cli

    cfg = tmp_path / "fp.toml"
    cfg.write_text(
        'pipeline = ["remove_dropout", {fixpoint = ["simplify_algebra", "fold_constants", "eliminate_dead_code"], '
        'max_iterations = 5}]\n[model]\nfactory = "fxpasses._example:convnet"\ninputs = [{ shape = [1, 3, 8, 8] }]\n'
    )
    r = CliRunner().invoke(cli, ["check", str(cfg)])
    assert r.exit_code == 0, r.output
    assert " 1. remove_dropout\n    fixpoint, until an iteration changes nothing (at most 5):\n 2.   simplify_algebra\n" in r.output
    r = CliRunner().invoke(cli, ["run", str(cfg), "--no-save", "--repeat", "1"])
    assert r.exit_code == 0, r.output
    assert "simplify_algebra #1" in r.output and "simplify_algebra #2" in r.output
    assert "pipeline: remove_dropout,fixpoint{max_iterations=5}(simplify_algebra,fold_constants,eliminate_dead_code)" in r.output
    r = CliRunner().invoke(cli, ["run", str(cfg), "--no-save", "--repeat", "1", "--format", "json"])
    out = json.loads(r.stdout)
    assert [p["iteration"] for p in out["report"]["passes"]][:4] == [0, 1, 1, 1]
    # check's JSON says which steps repeat (its steps were a flat list: a new-user check)
    r = CliRunner().invoke(cli, ["check", str(cfg), "--format", "json"])
    out = json.loads(r.stdout)
    assert out["fixpoint_groups"] == [{"steps": [1, 2, 3], "max_iterations": 5}]
    assert [s["fixpoint_group"] for s in out["steps"]] == [None, 0, 0, 0]
    assert out["pipeline"] == "remove_dropout,fixpoint{max_iterations=5}(simplify_algebra,fold_constants,eliminate_dead_code)"
    # a group that does not converge: a note line in the text output, no Python warning text
    r = CliRunner().invoke(
        cli, ["run", str(cfg), "--no-save", "--repeat", "1", "--pipeline", 'fixpoint{max_iterations=2}(rename_nodes{pattern="relu",replacement="relu_"})']
    )
    assert r.exit_code == 0, r.output
    assert "note: fixpoint(rename_nodes) stopped after 2 iterations (max_iterations)" in r.output
    assert "FixpointWarning" not in r.output


def test_a_reproducer_of_a_failure_in_a_group_keeps_the_group_from_the_failing_pass_on(tmp_path):
    """The reproducer numbered steps by the passes run (iterations and analyses on demand
    miscounted them) and wrote a group's passes as a flat list."""
    from fxpasses.reproducer import ReproducerWriter

    class FailsSecondTime(GraphPass):
        name = "fails_second_time"
        runs = 0  # across the instances a pipeline makes, one a run of the step

        def run(self, gm, ctx):
            type(self).runs += 1
            if type(self).runs == 2:
                raise RuntimeError("second run")
            return False

    reg = Registry()
    reg.register(Peel)
    reg.register(FailsSecondTime)
    pipeline = Pipeline(["remove_dropout", Fixpoint(["peel", "fails_second_time", "eliminate_dead_code"], max_iterations=6)], registry=reg)
    writer = ReproducerWriter(tmp_path / "rep", pipeline)
    x = torch.randn(5)
    gm = torch.fx.symbolic_trace(Chain())
    with pytest.raises(fxpasses.PassFailedError):
        pipeline.run(gm, [x], instruments=[writer])
    assert writer.written is not None and writer.step == 2
    cfg = json.loads(writer.written.read_text())
    entry = {"verify": "lint", "on_error": "rollback"}
    assert cfg["pipeline"] == [
        # the rest of iteration 2 once, then the whole group for the 4 iterations left
        {"fixpoint": [{"name": "fails_second_time", **entry}, {"name": "eliminate_dead_code", **entry}], "max_iterations": 1},
        {"fixpoint": [
            {"name": "peel", **entry}, {"name": "fails_second_time", **entry}, {"name": "eliminate_dead_code", **entry},
        ], "max_iterations": 4},
    ]
    assert "(step 3 of 4, iteration 2 of its fixpoint group)" in (tmp_path / "rep" / "README.md").read_text()


def test_print_after_and_draw_tell_the_iterations_apart(tmp_path):
    import io

    from fxpasses.instruments import PrintAfter

    out = io.StringIO()
    Pipeline([Fixpoint([Peel])]).run(torch.fx.symbolic_trace(Chain()), [torch.randn(5)], instruments=[PrintAfter(file=out)])
    heads = [line for line in out.getvalue().splitlines() if line.startswith("# *** graph after")]
    assert heads == [
        "# *** graph after peel #1 (5 nodes) ***",
        "# *** graph after peel #2 (4 nodes) ***",
        "# *** graph after peel #3 (4 nodes) ***",
    ]
    from fxpasses.draw import DrawGraphs

    drawer = DrawGraphs(tmp_path / "pics")
    Pipeline([Fixpoint([Peel])]).run(torch.fx.symbolic_trace(Chain()), [torch.randn(5)], instruments=[drawer])
    assert sorted(p.name for p in (tmp_path / "pics").glob("*.dot")) == [
        "01_peel_1.after.dot", "01_peel_1.before.dot", "01_peel_2.after.dot", "01_peel_2.before.dot",
    ]
    assert drawer.drawn == ["peel #1", "peel #2"] and "before and after 2 changing passes: peel #1, peel #2" in drawer.summary()


class _NodeCount(GraphPass):
    name = "node_count"
    kind = "analysis"

    def run(self, gm, ctx):
        ctx.analyses["node_count"] = len(gm.graph.nodes)
        return False


class _PeelReading(Peel):
    """Peel, reading the node count an analysis computed for it."""

    name = "peel_reading"
    requires = ("node_count",)

    def setup(self, gm, ctx):
        ctx.count("seen_nodes", ctx.analyses["node_count"])


@pytest.mark.parametrize("order", ["dependencies", "as-given"])
def test_an_analysis_a_member_requires_is_computed_again_in_every_iteration(order):
    """It was computed on demand once per step and run: in iteration 2 the member found the
    result the first iteration's change had dropped gone (KeyError), or read a stale one (a
    new-user check)."""
    gm = torch.fx.symbolic_trace(Chain())
    report = Pipeline([_NodeCount, Fixpoint([_PeelReading])], order=order).run(gm, [torch.randn(5)])
    assert [(p.name, p.iteration) for p in report.passes] == [
        ("node_count", 0), ("peel_reading", 1), ("node_count", 0), ("peel_reading", 2), ("node_count", 0), ("peel_reading", 3),
    ]
    assert [p.counters["seen_nodes"] for p in report.passes if p.name == "peel_reading"] == [6, 5, 4]


@pytest.mark.parametrize(
    "entry, said",
    [
        ('{fixpoint = ["simplify_algebra"], max_iterations = 0}', "pipeline.1.max_iterations: Input should be greater than or equal to 1 (given: 0)"),
        ("{fixpoint = []}", "pipeline.1.fixpoint: List should have at least 1 item"),
        ('{fixpoint = ["simplify_algebra", {fixpoint = ["fold_constants"]}]}', "pipeline.1.fixpoint: fixpoint groups do not nest"),
        ('{fixpoint = ["simplify_algebra"], max_iteration = 3}', "pipeline.1.max_iteration: unknown key; did you mean 'max_iterations'? (valid: fixpoint, max_iterations)"),
    ],
)
def test_a_malformed_group_in_a_config_file_gets_one_line_about_the_group(tmp_path, entry, said):
    """A group's bad max_iterations in a config file gave four lines, three about a pass table
    (`name: Field required`, `fixpoint: unknown key`); nesting and empty groups were not
    said to be that (a new-user check)."""
    (tmp_path / "c.toml").write_text(f'pipeline = ["remove_dropout", {entry}]\n')
    with pytest.raises(ConfigError) as info:
        Pipeline.from_config(tmp_path / "c.toml")
    lines = str(info.value).splitlines()
    assert len(lines) == 2 and said in lines[1], lines


def test_a_fixpoint_of_one_name_options_pair_is_one_entry_and_a_group_is_fixed_once_made():
    group = Fixpoint(("fold_constants", {"max_numel": 3}), max_iterations=2)
    assert Pipeline([group]).plan().as_pipeline_string() == "fixpoint{max_iterations=2}(fold_constants{max_numel=3})"
    with pytest.raises(AttributeError):
        group.max_iterations = 0  # (it printed a plan string that did not read back)
    group.entries.append("eliminate_dead_code")  # a copy
    assert Pipeline([group]).plan().names() == ["fold_constants"]


def test_a_graph_pass_returning_true_for_nothing_lets_its_group_converge():
    """A GraphPass whose run() returned True without changing anything was reported changed,
    and every fixpoint group holding it ran to max_iterations and warned "not converged" (a
    new-user check), while the same code as a plain FX function pass converged: the pipeline
    judged one by its return value, the other by what it saw. A pass without a journal is
    snapshotted, and the snapshot sees every change: that is what counts for both."""

    class Claims(GraphPass):
        name = "claims_change"

        def run(self, gm, ctx):
            return True

    class Scales(GraphPass):  # (changes the graph and says so: still changed)
        name = "scales_once"

        def run(self, gm, ctx):
            relu = next((n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch.relu), None)
            if relu is None:
                return False
            relu.target = torch.sigmoid
            return True

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) + 1

    with warnings.catch_warnings():
        warnings.simplefilter("error", FixpointWarning)
        gm = torch.fx.symbolic_trace(M())
        report = Pipeline([Fixpoint([Claims, Scales, "eliminate_dead_code"], max_iterations=4)]).run(gm, [torch.randn(3)])
    assert [(p.label, p.changed) for p in report.passes] == [
        ("claims_change #1", False),
        ("scales_once #1", True),
        ("eliminate_dead_code #1", False),
        ("claims_change #2", False),
        ("scales_once #2", False),
        ("eliminate_dead_code #2", False),
    ]
    assert not report.notes
    x = torch.randn(3)
    torch.testing.assert_close(gm(x), torch.sigmoid(x) + 1)


def test_an_analysis_computed_on_demand_in_each_iteration_gets_its_own_requirements_first(monkeypatch):
    """In a fixpoint group, an analysis computed on demand (for a transform that requires it)
    in iteration 2 ran without the analysis it requires itself, on the metadata of the graph
    before iteration 1's change (a pass-author check, seen once): the run remembered what each
    on-demand step had been given by the step object's id(), and a later on-demand step could
    get a freed one's id. Every on-demand analysis now gets its requirements, every time."""
    order = []

    class Base(GraphPass):
        name = "base_facts"
        kind = "analysis"

        def run(self, gm, ctx):
            order.append(("base", len(gm.graph.nodes)))
            ctx.analyses["base_facts"] = len(gm.graph.nodes)
            return False

    class Derived(GraphPass):
        name = "derived_facts"
        kind = "analysis"
        requires = ("base_facts",)

        def run(self, gm, ctx):
            order.append(("derived", ctx.analyses["base_facts"], len(gm.graph.nodes)))
            return False

    class Shrink(GraphPass):
        name = "shrink_once_per_iteration"
        requires = ("derived_facts",)

        def run(self, gm, ctx):
            order.append(("shrink",))
            relu = next((n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch.relu), None)
            if relu is None:
                return False
            relu.replace_all_uses_with(relu.args[0])
            gm.graph.erase_node(relu)
            return True

    class Chain(torch.nn.Module):
        def forward(self, x):
            for _ in range(6):
                x = torch.relu(x) + 1
            return x

    reg = Registry(autoload=False)
    for cls in (Base, Derived, Shrink):
        reg.register(cls)
    gm = torch.fx.symbolic_trace(Chain())
    # every on-demand step of derived_facts gets one id, as a freed one's id is given again
    import fxpasses.pipeline

    def reused_id(obj, _id=id):
        return -1 if getattr(obj, "name", None) == "derived_facts" and type(obj).__name__ == "PlanStep" else _id(obj)

    monkeypatch.setattr(fxpasses.pipeline, "id", reused_id, raising=False)
    Pipeline.from_string("fixpoint{max_iterations=10}(shrink_once_per_iteration)", registry=reg).run(gm)
    derived = [o for o in order if o[0] == "derived"]
    assert len(derived) == 7  # once per iteration: 6 shrink, 1 that finds nothing
    # each one computed from base facts of the graph as it then was
    assert all(base_nodes == nodes for _, base_nodes, nodes in derived), order
