"""Journaled rollback (fxpasses.journal) and the lint of a journaled pass's edits.

The suite runs with FXPASSES_CHECK_JOURNAL=1 (conftest.py), which compares every journaled
rollback with a snapshot; the tests here also run the unchecked path users get, against a
snapshot taken by the test itself.
"""

from __future__ import annotations

import operator

import pytest
import torch
import torch.fx
from torch import nn

import fxpasses
from fxpasses import GraphPass, PassFailedError, Pipeline, Registry
from fxpasses import pipeline as pipeline_mod
from fxpasses.capture import capture
from fxpasses.errors import PassDefinitionError
from fxpasses.journal import Journal, JournalMismatch, check_journals, checking, supports_journal
from fxpasses.lint import lint_edits, lint_passes
from fxpasses.snapshot import Snapshot

JOURNALED = [
    "remove_dropout",
    "fuse_conv_bn",
    "simplify_algebra",
    "fold_constants",
    "eliminate_common_subexpressions",
    "eliminate_dead_code",
]
# the built-in pipeline's order, with the shape analysis simplify_algebra reads first
ORDER = ["propagate_shapes", "remove_dropout", "fuse_conv_bn", "simplify_algebra", "fold_constants",
         "eliminate_common_subexpressions", "eliminate_dead_code"]


class Block(nn.Module):
    """One block of benchmarks/graphs.py's model: work for every journaled pass."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(0.1)
        self.fc = nn.Linear(4, 4)
        self.register_buffer("scale", torch.rand(4, 1, 1) + 0.5)
        self.gain = nn.Parameter(torch.rand(4, 1, 1) + 0.5)  # a get_attr in symbolic_trace too
        with torch.no_grad():
            self.bn.running_mean.normal_(0, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        act = torch.relu(self.drop(self.bn(self.conv(x))))
        zero = self.fc(act) * 1 - 0
        h = zero * torch.sigmoid(zero) + zero * torch.sigmoid(zero)
        out = h * (self.scale * 2.0 + 1.0) * (self.gain - 0.5) + x
        dead = out.mean() * 2  # noqa: F841 - dead code on purpose
        return out


def blocks(dialect: str):
    if dialect == "dynamo":
        torch._dynamo.reset()  # a fresh model each time: TorchDynamo would count recompiles
    torch.manual_seed(0)
    model = nn.Sequential(Block(), Block(), Block()).eval()
    x = torch.randn(2, 4, 4, 4)
    return model, x, capture(model, [x], dialect)


@pytest.fixture
def unchecked(monkeypatch):
    """The path users run: no snapshot beside the journal."""
    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", "0")
    assert not checking()


@pytest.fixture
def snapshots(monkeypatch):
    """Counts the snapshots the pipeline takes."""
    taken = []
    real = pipeline_mod.Snapshot

    def counting(gm, **kw):
        taken.append(gm)
        return real(gm, **kw)

    monkeypatch.setattr(pipeline_mod, "Snapshot", counting)
    return taken


def _compiled(gm) -> None:
    """Write the module's code now (TorchDynamo's lazy GraphModule writes it when first called)."""
    real = getattr(gm, "real_recompile", None)
    (real or gm.recompile)()


def _differences(before: Snapshot) -> list[str]:
    """``before.differences()`` once the code the pipeline's final ``recompile()`` wrote is
    found equal to the recorded code (the recompile rebinds ``_code`` and ``_lineno_map``);
    ``before`` must be taken after :func:`_compiled`."""
    _compiled(before.gm)
    d = before.gm.__dict__
    root = next(rec for rec in before.modules if rec[0] is before.gm)
    for key in ("_code", "_lineno_map"):
        if key in root[1] and d.get(key) is not root[1][key]:
            assert d.get(key) == root[1][key], key
            d[key] = root[1][key]
    cls = type(before.gm)
    if before.class_forward is not None and cls.__dict__.get("forward") is not before.class_forward:
        cls.forward = before.class_forward
    return before.differences()


def _before(name):
    return ORDER[: ORDER.index(name)]


def _planted_lint_failure(monkeypatch):
    """The lint after the pass fails, as if the pass had broken the graph; the pipeline's
    check of the graph as it was before the pass (after the rollback) is the real lint."""
    real = pipeline_mod._lint
    calls = []

    def fail(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("planted lint failure")
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline_mod, "_lint", fail)


# TorchDynamo graphs hold no constants to fold: their parameters and buffers are placeholders
WITH_WORK = [(d, n) for d in ("symbolic_trace", "dynamo", "export") for n in JOURNALED
             if (d, n) != ("dynamo", "fold_constants")]


@pytest.mark.parametrize("dialect, name", WITH_WORK)
def test_each_journaled_pass_is_rolled_back_exactly_after_it_ran(dialect, name, unchecked, snapshots, monkeypatch):
    model, x, cap = blocks(dialect)
    gm = cap.gm
    Pipeline(_before(name)).run(gm, cap.inputs)
    _compiled(gm)
    # the pass has work here (else the test would prove nothing)
    probe = capture(model, [x], dialect).gm
    Pipeline(_before(name)).run(probe, cap.inputs)
    # options that give the pass work: TorchDynamo's weights are placeholders, and the
    # modules symbolic_trace's GraphModule makes between the root and the leaves are in
    # training mode, so that parameters held there count as trainable
    options = {("fuse_conv_bn", "dynamo"): {"fold_in_graph": True},
               ("fold_constants", "symbolic_trace"): {"fold_parameters": True},
               # symbolic_trace: the recorded shapes hold for other inputs once checked
               ("simplify_algebra", "symbolic_trace"): {"specialize": True}}
    entry = (name, options[name, dialect]) if (name, dialect) in options else name
    report = Pipeline([entry]).run(probe, cap.inputs)
    assert report.passes[-1].changed, report.passes[-1]
    before = Snapshot(gm)
    code = gm.code
    snapshots.clear()
    _planted_lint_failure(monkeypatch)
    with pytest.raises(PassFailedError, match="planted lint failure") as info:
        Pipeline([entry]).run(gm, cap.inputs)
    assert info.value.rolled_back
    assert snapshots == []  # journaled: no snapshot was taken
    assert _differences(before) == []
    gm.recompile()
    assert gm.code == code
    torch.testing.assert_close(_out(gm(*cap.inputs)), model(x))


def _out(out):
    return out[0] if isinstance(out, (tuple, list)) else out


@pytest.mark.parametrize("name", JOURNALED)
@pytest.mark.parametrize("fail_at", [1, 2])
def test_a_journaled_pass_failing_in_the_middle_of_its_edits_is_rolled_back_exactly(name, fail_at, unchecked, monkeypatch):
    model, x, cap = blocks("export")
    gm = cap.gm
    Pipeline(_before(name)).run(gm, cap.inputs)
    _compiled(gm)
    before = Snapshot(gm)
    real = torch.fx.Graph.erase_node
    calls = []

    def erase_node(self, node):
        calls.append(node.name)
        if len(calls) == fail_at:
            raise RuntimeError(f"planted failure erasing %{node.name}")
        return real(self, node)

    monkeypatch.setattr(torch.fx.Graph, "erase_node", erase_node)
    with pytest.raises(PassFailedError, match="planted failure erasing"):
        Pipeline([name]).run(gm, cap.inputs)
    monkeypatch.setattr(torch.fx.Graph, "erase_node", real)
    assert len(calls) == fail_at
    assert _differences(before) == []
    gm.recompile()
    torch.testing.assert_close(_out(gm(*cap.inputs)), model(x))


def test_the_built_in_pipeline_lints_only_the_first_pass_whole(unchecked, monkeypatch):
    """After one whole-graph lint, each journaled pass is linted by what it touched."""
    model, x, cap = blocks("export")
    whole, partial = [], []
    real_whole, real_partial = pipeline_mod.lint_passes, pipeline_mod.lint_edits

    def count_whole(gm):
        whole.append(1)
        return real_whole(gm)

    def count_partial(*args, **kwargs):
        ok = real_partial(*args, **kwargs)
        partial.append(ok)
        return ok

    monkeypatch.setattr(pipeline_mod, "lint_passes", count_whole)
    monkeypatch.setattr(pipeline_mod, "lint_edits", count_partial)
    report = Pipeline(ORDER).run(cap.gm, cap.inputs)
    assert [p.name for p in report.passes if p.changed] == ORDER[1:]
    assert len(whole) == 1  # remove_dropout's, the first lint of the run
    assert partial == [True, True, True, True, True]
    torch.testing.assert_close(cap.gm(x), model(x))


# ------------------------------------------------------------------------ passes that break the graph


class _Breaker(GraphPass):
    """A journaled pass that breaks the graph in one of the ways lint must catch."""

    name = "breaker"
    writes_tensors = False
    journal_edits = True

    class Options(fxpasses.PassOptions):
        how: str = ""

    def run(self, gm, ctx):
        graph = gm.graph
        nodes = list(graph.nodes)
        how = self.options.how
        if how == "use_before_def":
            last = [n for n in nodes if n.op == "call_function"][-1]
            with graph.inserting_after(nodes[0]):
                graph.call_function(torch.relu, (last,))
        elif how == "replace_by_later":
            calls = [n for n in nodes if n.op == "call_function"]
            calls[0].replace_all_uses_with(calls[-1])
        elif how == "deleted_submodule":
            ctx.before_module_edit(gm)
            del gm._modules[next(iter(gm._modules))]
        elif how == "missing_attr":
            graph.get_attr("no_such_buffer")
        elif how == "call_module_of_a_tensor":
            with graph.inserting_before(nodes[-1]):
                graph.create_node("call_module", "scale", (nodes[0],))
        return True


class Harmless(fxpasses.NodePass):
    """x + 0 -> x: a change, so that the breaker runs on a graph the run has linted."""

    name = "harmless"
    writes_tensors = False
    journal_edits = True

    @fxpasses.on("add")
    def visit(self, node, ctx):
        if len(node.args) == 2 and node.args[1] == 0:
            return fxpasses.Replace(node.args[0])
        return None


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x):
        return torch.sigmoid(self.body(x + 0) * self.scale) * 2


@pytest.mark.parametrize(
    "how, said",
    [
        ("use_before_def", "used before it has been defined"),
        ("replace_by_later", "used before it has been defined"),
        ("deleted_submodule", "references nonexistent attribute"),
        ("missing_attr", "references nonexistent attribute"),
        ("call_module_of_a_tensor", "does not reference an nn.Module"),
    ],
)
@pytest.mark.parametrize("check", [False, True])
def test_the_partial_lint_refuses_each_breakage_and_torch_names_it(how, said, check, monkeypatch):
    """The breaker runs after a pass that changed the graph in the same run: its lint is the
    partial one, which must answer False, and torch's lint then gives its own message; the
    pass is rolled back (through its journal, checked or not)."""
    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", "1" if check else "0")

    class Net2(Net):
        def forward(self, x):
            return torch.sigmoid(self.body(x + 0 + 0) * self.scale) * 2

    gm = torch.fx.symbolic_trace(Net2())
    reg = Registry()
    reg.register(_Breaker)
    reg.register(Harmless)
    verdicts = []
    real = pipeline_mod.lint_edits

    def spy(*args, **kwargs):
        verdicts.append(real(*args, **kwargs))
        return verdicts[-1]

    monkeypatch.setattr(pipeline_mod, "lint_edits", spy)
    with pytest.raises(PassFailedError, match=said) as info:
        Pipeline(["harmless", ("breaker", {"how": how})], registry=reg).run(gm)
    assert "'breaker'" in str(info.value) and "graph lint failed" in str(info.value)
    assert info.value.rolled_back
    # harmless's (a third-party journaled first pass: the graph is linted whole before it, and
    # its own lint is the partial one), then the breaker's
    assert verdicts == [True, False]
    # the graph is harmless's result: the breaker's edits are gone
    expected = torch.fx.symbolic_trace(Net2())
    assert Pipeline(["harmless"], registry=reg).run(expected).passes[0].changed
    gm.graph.lint()
    gm.recompile()
    assert gm.code == expected.code
    assert [(n.name, n.op, n.target) for n in gm.graph.nodes] == [(n.name, n.op, n.target) for n in expected.graph.nodes]


# ------------------------------------------------------------------------ wrong declarations


class _Liar(GraphPass):
    """Declares journal_edits but edits where the journal cannot see."""

    name = "liar"
    writes_tensors = False
    journal_edits = True

    class Options(fxpasses.PassOptions):
        how: str = ""

    def run(self, gm, ctx):
        nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
        how = self.options.how
        if how == "args":
            nodes[1].args = (nodes[0], *nodes[1].args[1:])
        elif how == "meta":
            nodes[0].meta["tag"] = 1
        elif how == "move":
            nodes[-1].prepend(nodes[1])  # sigmoid(x) to just before its user: still valid
        elif how == "module":
            gm.extra = nn.ReLU()
        elif how == "target":
            nodes[-1].target = operator.mul if nodes[-1].target is not operator.mul else operator.add
        return True


class LiarNet(nn.Module):
    def forward(self, x):
        a = torch.relu(x)
        b = torch.sigmoid(x)
        c = torch.tanh(a)
        return c * 2 + b


@pytest.mark.parametrize("how, said", [
    ("args", "args"), ("meta", "meta"), ("module", "'extra' added"), ("target", "target"),
    # (it said "same nodes in another order" and then torch.fx's private `_sort_key (3,) -> (0, 0)`: a new-user check)
    ("move", r"the same nodes in another order: %tanh now stands where %sigmoid stood \(a node moved"),
])
def test_check_mode_catches_a_pass_that_edits_where_the_journal_cannot_see(how, said):
    gm = torch.fx.symbolic_trace(LiarNet())
    reg = Registry()
    reg.register(_Liar)
    before = Snapshot(gm)
    with check_journals():
        with pytest.raises(JournalMismatch, match=said) as info:
            Pipeline([("liar", {"how": how})], registry=reg, on_error="skip").run(gm)
    assert "declares journal_edits=True" in str(info.value)
    assert info.value.pass_name == "liar"
    assert _differences(before) == []  # put back from the snapshot of check mode


def test_journal_edits_needs_writes_tensors_false_and_a_bool():
    class Both(GraphPass):
        name = "both"
        journal_edits = True

        def run(self, gm, ctx):
            return False

    with pytest.raises(PassDefinitionError, match="needs `writes_tensors = False`"):
        Registry(autoload=False).register(Both)

    class NotBool(GraphPass):
        name = "not_bool"
        writes_tensors = False
        journal_edits = "yes"

        def run(self, gm, ctx):
            return False

    with pytest.raises(PassDefinitionError, match="`journal_edits` must be True or False, got 'yes'"):
        Registry(autoload=False).register(NotBool)


def test_built_in_passes_declare_journal_edits_where_they_edit_through_fx_and_the_context():
    reg = fxpasses.registry()
    built_in = [n for n in reg.names() if reg.info(n).distribution == "fxpasses"]
    assert sorted(n for n in built_in if reg.get(n).journal_edits) == sorted(JOURNALED + ["rename_nodes"])


# ------------------------------------------------------------------------ the journal itself


def test_a_node_recorded_after_it_gained_users_gets_its_old_users_back():
    """x gains a user (a replaced input), then is recorded (its other user is erased): the
    users it had before keep their order, the gained one goes."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.relu, (x,))
    b = g.call_function(torch.sigmoid, (x,))
    c = g.call_function(torch.tanh, (a,))
    d = g.call_function(torch.neg, (c,))
    g.output((b, d))
    gm = torch.fx.GraphModule(nn.Module(), g)
    before = Snapshot(gm)
    code = gm.code
    with Journal(gm) as j:
        c.replace_all_uses_with(x)  # d now uses x: x.users = [a, b, d]
        g.erase_node(c)
        g.erase_node(a)  # x recorded here, with d among its users
        with g.inserting_before(d):
            e = g.call_function(torch.exp, (x,))
        d.replace_input_with(x, e)
    assert [u.name for u in x.users] == ["sigmoid", "exp"]
    assert j.changed()
    j.restore()
    assert _differences(before) == []
    assert [u.name for u in x.users] == ["relu", "sigmoid"]
    gm.recompile()
    assert gm.code == code


def test_a_node_that_loses_one_of_its_users_gets_it_back_in_its_place():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    users = [g.call_function(f, (x,)) for f in (torch.relu, torch.sigmoid, torch.tanh)]
    g.output(tuple(users))
    gm = torch.fx.GraphModule(nn.Module(), g)
    before = Snapshot(gm)
    with Journal(gm) as j:
        users[1].replace_input_with(x, y)
    assert [u.name for u in x.users] == ["relu", "tanh"]
    j.restore()
    assert [u.name for u in x.users] == ["relu", "sigmoid", "tanh"]
    assert _differences(before) == []


def test_journal_restores_names_modules_and_the_name_space():
    gm = torch.fx.symbolic_trace(Net())
    before = Snapshot(gm)
    reg = Registry()

    class Renamer(GraphPass):
        name = "renamer"
        writes_tensors = False
        journal_edits = True

        def run(self, gm, ctx):
            for n in gm.graph.nodes:
                if n.op == "call_function":
                    ctx.rename(n, "renamed")
            ctx.add_constant(torch.ones(2), "c")
            ctx.add_submodule(nn.ReLU(), "act")
            ctx.before_module_edit(gm.body)
            del gm.body._modules["1"]
            raise RuntimeError("planted")

    reg.register(Renamer)
    with check_journals():  # and the check mode agrees
        with pytest.raises(PassFailedError, match="planted"):
            Pipeline(["renamer"], registry=reg).run(gm)
    assert _differences(before) == []
    assert "1" in gm.body._modules and not hasattr(gm, "c") and "act" not in gm._modules


def test_a_graph_module_without_node_hooks_falls_back_to_a_snapshot(unchecked, snapshots):
    gm = torch.fx.symbolic_trace(Net())
    del gm.__dict__["_replace_hooks"]
    assert not supports_journal(gm)
    algebra = ("simplify_algebra", {"keep_signed_zeros": False, "specialize": True})
    report = Pipeline(["propagate_shapes", algebra, "eliminate_dead_code"]).run(
        gm, [torch.randn(2, 4)]
    )
    assert len(snapshots) == 3  # one for each pass, the analysis too
    assert report.passes[1].changed


def test_the_journal_leaves_no_hooks_behind(unchecked, monkeypatch):
    _model, _x, cap = blocks("symbolic_trace")
    gm = cap.gm
    Pipeline(ORDER).run(gm, cap.inputs)
    assert gm._create_node_hooks == [] and gm._erase_node_hooks == [] and gm._replace_hooks == []
    _planted_lint_failure(monkeypatch)
    gm = capture(_model, [_x], "symbolic_trace").gm
    with pytest.raises(PassFailedError):
        Pipeline(["eliminate_dead_code"]).run(gm)
    assert gm._create_node_hooks == [] and gm._erase_node_hooks == [] and gm._replace_hooks == []


def test_lint_edits_needs_coverage_and_agrees_with_the_whole_lint_on_valid_edits():
    gm = torch.fx.symbolic_trace(Net())
    with Journal(gm) as j:
        add = next(n for n in gm.graph.nodes if n.target is operator.add)
        add.replace_all_uses_with(add.args[0])
        gm.graph.erase_node(add)
    assert lint_edits(gm, j.touched(), j.module_records())
    assert lint_passes(gm)


def test_assert_preserves_outputs_holds_a_journaled_pass_to_its_declaration(unchecked):
    from fxpasses.testing import assert_preserves_outputs

    reg = Registry()
    reg.register(_Liar)
    with pytest.raises(JournalMismatch, match="'liar' declares journal_edits=True"):
        assert_preserves_outputs([("liar", {"how": "meta"})], LiarNet(), [torch.randn(3)], registry=reg,
                                 dialects=["symbolic_trace"])
    # an honest journaled pass passes, in every dialect
    results = assert_preserves_outputs(
        "propagate_shapes,simplify_algebra{keep_signed_zeros=false,specialize=true}", Net(), [torch.randn(2, 4)]
    )
    assert all(report.passes[-1].changed for _gm, report in results.values())


# ------------------------------------------------------------------------ found by review


class _TrainBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(4)  # training mode: a call updates its running statistics

    def forward(self, x):
        self.bn(x)  # the result is unused: the call is kept for its side effect
        return x + 1


class _AskThenFail(GraphPass):
    """Swaps the batch norm for an eval-mode one, asks whether its call has side effects
    (no, now), then fails: the answer must not outlive the rollback."""

    name = "ask_then_fail"
    writes_tensors = False
    journal_edits = True

    def run(self, gm, ctx):
        from fxpasses.effects import has_side_effects

        node = next(n for n in gm.graph.nodes if n.op == "call_module")
        ctx.before_module_edit(gm)
        gm._modules["bn"] = nn.BatchNorm1d(4).eval()
        assert not has_side_effects(node, gm)
        raise RuntimeError("planted")


class _Warm(GraphPass):
    """Asks effect analysis about a node (so that the graph's shared table exists)."""

    name = "warm"
    writes_tensors = False
    journal_edits = True

    def run(self, gm, ctx):
        from fxpasses.effects import has_side_effects

        has_side_effects(next(n for n in gm.graph.nodes if n.op == "call_function"), gm)
        return False


@pytest.mark.parametrize("journal_edits", [True, False])
def test_effect_answers_about_modules_a_failed_pass_changed_do_not_outlive_its_rollback(journal_edits, unchecked, monkeypatch):
    monkeypatch.setattr(_AskThenFail, "journal_edits", journal_edits)
    gm = torch.fx.symbolic_trace(_TrainBN().train())
    reg = Registry()
    reg.register(_AskThenFail)
    reg.register(_Warm)
    report = Pipeline(["warm", "ask_then_fail", "eliminate_dead_code"], registry=reg, on_error="skip").run(
        gm, [torch.randn(8, 4)]
    )
    assert [p.status for p in report.passes] == ["ok", "skipped", "ok"]
    assert report.passes[-1].counters == {"kept_impure": 1}
    assert [n.target for n in gm.graph.nodes if n.op == "call_module"] == ["bn"]
    before = gm.bn.running_mean.clone()
    gm(torch.randn(8, 4) + 5)
    assert not torch.equal(before, gm.bn.running_mean)  # the statistics still update


class _DirectRename(GraphPass):
    """Renames relu to "add" by assigning node.name (the graph's name space is not told)."""

    name = "direct_rename"

    def run(self, gm, ctx):
        for n in gm.graph.nodes:
            if n.target is torch.relu:
                n.name = "add"
        return True


class _AddOne(GraphPass):
    """A journaled pass that adds a node FX names "add", as the name space has it free."""

    name = "add_one"
    writes_tensors = False
    journal_edits = True

    def run(self, gm, ctx):
        out = next(n for n in gm.graph.nodes if n.op == "output")
        mul = out.args[0]
        with gm.graph.inserting_after(mul):
            new = gm.graph.call_function(operator.add, (mul, 1.0))
        mul.replace_all_uses_with(new, delete_user_cb=lambda u: u is not new)
        return True


class _ReluTimes3(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 3


@pytest.mark.parametrize("verify", ["lint", "none"])
@pytest.mark.parametrize("check", [False, True])
def test_a_name_taken_behind_the_name_space_is_not_given_to_the_journaled_pass(check, verify, monkeypatch):
    """direct_rename's name, assigned behind the name space, was given to add_one's new node,
    and the correct add_one failed its lint ("Node redefined name add!"), blamed for it. The
    graph's names are counted as used before a pass runs on a graph whose names the name space
    may not hold (after an unverified pass, or a lint that found one not there)."""
    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", "1" if check else "0")
    gm = torch.fx.symbolic_trace(_ReluTimes3())
    reg = Registry()
    reg.register(_DirectRename)
    reg.register(_AddOne)
    x = torch.randn(3)
    report = Pipeline([("direct_rename", {}), "add_one"], registry=reg, verify=verify).run(gm, [x])
    assert [p.status for p in report.passes] == ["ok", "ok"]
    assert [n.name for n in gm.graph.nodes] == ["x", "add", "mul", "add_1", "output"]
    gm.graph.lint()
    torch.testing.assert_close(gm(x), torch.relu(x) * 3 + 1.0)


class _IntToFloat(GraphPass):
    """x + 1 -> x + 1.0 (an equal constant of another type), returning None (unknown)."""

    name = "int_to_float"

    def run(self, gm, ctx):
        for n in gm.graph.nodes:
            if n.target is operator.add and type(n.args[1]) is int:
                n.args = (n.args[0], float(n.args[1]))
        return None


class _AddOneInt(nn.Module):
    def forward(self, x):
        return x + 1


def test_a_constant_changed_to_an_equal_one_of_another_type_is_a_change():
    """1 == 1.0, but the code differs (an integer input now gives floats): the pass changed the
    graph, and the module runs the new code."""
    gm = torch.fx.symbolic_trace(_AddOneInt())
    reg = Registry()
    reg.register(_IntToFloat)
    report = Pipeline(["int_to_float"], registry=reg).run(gm)
    assert report.passes[0].changed
    assert gm(torch.arange(3)).dtype == torch.float32
    from fxpasses.snapshot import _differs

    assert _differs((1,), (1.0,)) and _differs(0.0, -0.0) and _differs([True], [1]) and _differs({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not _differs(float("nan"), float("nan")) and not _differs((1, [2.5, "x"]), (1, [2.5, "x"]))


class _CondModel(nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,))


class _EditBranch(GraphPass):
    """Edits the true branch of a torch.cond (a nested GraphModule), then fails."""

    name = "edit_branch"
    writes_tensors = False
    journal_edits = True

    def run(self, gm, ctx):
        branch = gm.true_graph_0
        ctx.before_module_edit(branch)
        g = branch.graph
        sin = next(n for n in g.nodes if n.op == "call_function")
        with g.inserting_after(sin):
            neg = g.call_function(torch.ops.aten.neg.default, (sin,))
        sin.replace_all_uses_with(neg, delete_user_cb=lambda u: u is not neg)
        raise RuntimeError("planted")


@pytest.mark.parametrize("journal_edits", [True, False])
def test_edits_of_a_nested_graph_module_are_rolled_back(journal_edits, unchecked, monkeypatch):
    monkeypatch.setattr(_EditBranch, "journal_edits", journal_edits)
    x = torch.ones(3)
    gm = torch.export.export(_CondModel(), (x,)).module()
    branch = gm.true_graph_0
    nodes = [(n, n.name, n.args) for n in branch.graph.nodes]
    code = branch.code
    reg = Registry()
    reg.register(_EditBranch)
    with pytest.raises(PassFailedError, match="planted"):
        Pipeline(["edit_branch"], registry=reg).run(gm, [x])
    assert [(n, n.name, n.args) for n in branch.graph.nodes] == nodes
    branch.recompile()
    assert branch.code == code
    torch.testing.assert_close(gm(x), torch.sin(x))


@pytest.mark.parametrize("journal_edits", [True, False])
def test_a_node_torch_fx_never_inserted_is_no_user_after_rollback(journal_edits, unchecked):
    """A create-node hook of the user's raises: torch.fx has already made the node a user of
    its inputs. Rollback leaves no such phantom user behind."""

    class Neg(GraphPass):
        name = "neg"
        writes_tensors = False

        def run(self, gm, ctx):
            relu = next(n for n in gm.graph.nodes if n.target is torch.relu)
            with gm.graph.inserting_after(relu):
                gm.graph.call_function(torch.neg, (relu,))
            return True

    Neg.journal_edits = journal_edits
    gm = torch.fx.symbolic_trace(_ReluTimes3())

    def refuse(node):
        raise RuntimeError("the user's hook refuses")

    gm._register_create_node_hook(refuse)
    before = Snapshot(gm)
    reg = Registry()
    reg.register(Neg)
    with pytest.raises(PassFailedError, match="the user's hook refuses") as info:
        Pipeline(["neg"], registry=reg).run(gm, [torch.randn(3)])
    assert info.value.rolled_back
    relu = next(n for n in gm.graph.nodes if n.target is torch.relu)
    assert [u.name for u in relu.users] == ["mul"]
    assert _differences(before) == []


class _TrainingConvBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.bn(self.conv(x)))


@pytest.mark.parametrize("dialect", ["symbolic_trace", "export"])
def test_check_mode_does_not_blame_numeric_verification_writes_on_the_pass(dialect, monkeypatch):
    """Numeric verification runs the module (its batch norm updates running statistics, put
    back after); a journaled pass that fails it is skipped, not taken for a wrong journal."""
    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", "1")
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8)
    cap = capture(_TrainingConvBN().train(), [x], dialect)
    before = {k: v.clone() for k, v in cap.gm.state_dict().items()}
    pipe = Pipeline.from_string("remove_dropout{inference=true}", verify="numeric", on_error="skip")
    report = pipe.run(cap.gm, cap.inputs)
    assert report.passes[0].status == "skipped" and report.passes[0].rolled_back
    assert all(torch.equal(before[k], v) for k, v in cap.gm.state_dict().items())


def test_a_journal_restores_exactly_again_after_a_snapshot_restore_in_between():
    """What check mode does: undo through the journal, redo from a snapshot of the result,
    then (the pass failing later) undo through the journal again. A snapshot's restore keeps
    the very args objects, so the second undo sees unchanged nodes as unchanged."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    emb = g.call_function(torch.relu, (x,))
    guard = g.call_function(torch.sigmoid, (x,))
    drop = g.call_function(torch.tanh, (emb,))
    g.output((drop, guard))
    gm = torch.fx.GraphModule(nn.Module(), g)
    before = Snapshot(gm)
    args = {n: n._args for n in g.nodes}
    with Journal(gm) as j:
        drop.replace_all_uses_with(emb)
        g.erase_node(drop)
    after = Snapshot(gm)
    j.restore()
    assert _differences(before) == []
    after.restore()
    assert emb._args is args[emb] and guard._args is args[guard]  # the very objects
    j.restore()
    assert [u.name for u in x.users] == ["relu", "sigmoid"]
    assert _differences(before) == []


@pytest.mark.parametrize("dialect", ["export", "dynamo"])
def test_propagate_shapes_runs_through_control_flow_operators(dialect):
    """The write guard lets higher-order operators (torch.cond) through whole."""
    x = torch.randn(3, 4)
    if dialect == "dynamo":
        torch._dynamo.reset()
    cap = capture(_CondModel(), [x], dialect)
    report = Pipeline(["propagate_shapes"], verify="numeric").run(cap.gm, cap.inputs)
    assert report.passes[0].status == "ok"
    cond = next(n for n in cap.gm.graph.nodes if n.op == "call_function" and "cond" in str(n.target))
    val = cond.meta.get("val", cond.meta.get("tensor_meta"))
    val = val[0] if isinstance(val, (tuple, list)) else val
    assert tuple(val.shape) == (3, 4)


# ------------------------------------------------------- effect answers across module edits


class _TwoCalls(nn.Module):
    """Two calls whose results are unused (kept only if they have side effects): the leaf
    container ``blk`` (its child does the work) and ``outer.bn`` (through a container)."""

    def __init__(self) -> None:
        super().__init__()
        self.blk = nn.Sequential()  # a standard container, called as a leaf
        self.blk.add_module("bn", nn.BatchNorm1d(4).eval())
        self.outer = nn.Module()
        self.outer.bn = nn.BatchNorm1d(4).eval()

    def forward(self, x):
        self.blk(x)
        self.outer.bn(x)
        return x + 1


class _BlkLeaf(torch.fx.Tracer):
    def is_leaf_module(self, m, qualname):
        return isinstance(m, nn.Sequential) or super().is_leaf_module(m, qualname)


class _WarmModules(GraphPass):
    """Asks effect analysis about every call_module node (the answers are shared)."""

    name = "warm_modules"
    writes_tensors = False
    journal_edits = True

    def run(self, gm, ctx):
        from fxpasses.effects import has_side_effects

        assert not any(has_side_effects(n, gm) for n in gm.graph.find_nodes(op="call_module"))
        return False


class _SwapModule(GraphPass):
    """Puts a training-mode batch norm (a call updates its statistics) somewhere in the tree,
    through the context's module records, as a journaled pass may."""

    name = "swap_module"
    writes_tensors = False
    journal_edits = True
    where = "blk"

    def run(self, gm, ctx):
        parent = gm.get_submodule(self.where)
        ctx.before_module_edit(parent)
        if self.where == "spare":
            parent._modules["extra"] = nn.BatchNorm1d(4)  # a name gained off every call path
        elif self.where == "blk.bn":  # a hook on the module the container calls
            parent.register_forward_hook(lambda m, i, o: None)
        else:
            parent._modules["bn"] = nn.BatchNorm1d(4)  # rebound: training mode
        return True


@pytest.mark.parametrize(
    "where, kept",
    [
        ("blk", ["blk"]),  # the called container's child rebound
        ("blk.bn", ["blk"]),  # a hook added inside the called container
        ("outer", ["outer.bn"]),  # a name on the called module's path rebound
        ("spare", []),  # off every call path: both calls stay pure
    ],
)
def test_effect_answers_about_called_modules_follow_edits_inside_and_above_them(where, kept, unchecked, monkeypatch):
    """After a journaled pass changes a module other than the root, the shared ``call_module``
    answers are used again only when no call reaches the change: DCE then keeps exactly the
    calls that became side-effectful (a stale "pure" would drop them), and asks nothing again
    when the change is off every call path."""
    from fxpasses import effects as effects_mod

    monkeypatch.setattr(_SwapModule, "where", where)
    root = _TwoCalls()
    gm = torch.fx.GraphModule(root, _BlkLeaf().trace(root))
    reg = Registry()
    reg.register(_WarmModules)
    reg.register(_SwapModule)
    computed = []
    real = effects_mod.EffectAnalysis._call_module

    def counting(self, node):
        computed.append(node.target)
        return real(self, node)

    gm.spare = nn.Module()  # GraphModule copies only what the graph uses
    monkeypatch.setattr(effects_mod.EffectAnalysis, "_call_module", counting)
    Pipeline(["warm_modules", "swap_module", "eliminate_dead_code"], registry=reg, on_error="raise").run(gm)
    assert [n.target for n in gm.graph.find_nodes(op="call_module")] == kept
    # the warm pass computed both answers once; DCE asked again only about what changed
    assert sorted(computed[:2]) == ["blk", "outer.bn"]
    assert sorted(computed[2:]) == ([] if where == "spare" else ["blk", "outer.bn"])
    if kept:
        bn = gm.get_submodule(kept[0] if kept[0] != "blk" else "blk.bn")
        before = bn.running_mean.clone()
        gm(torch.randn(8, 4) + 5)
        assert not torch.equal(before, bn.running_mean) or where == "blk.bn"


class _RenameThenFail(GraphPass):
    """A journaled pass that renames the nodes it is given through ``Node._rename`` (torch.fx's
    replace hooks tell the journal, once per user) and then fails."""

    name = "rename_then_fail"
    writes_tensors = False
    journal_edits = True
    targets: tuple = ()

    def run(self, gm, ctx):
        for n in list(gm.graph.nodes):
            if n.target in self.targets:
                n._rename(f"renamed_{n.name}")
        raise RuntimeError("after the renames")


class _OneAndTwoUsers(nn.Module):
    def forward(self, x):
        a = torch.relu(x)  # one user (the sigmoid)
        b = torch.sigmoid(a)  # two users (the mul and the add)
        return b * 2 + b


@pytest.mark.parametrize("target", [torch.relu, torch.sigmoid])
def test_a_renamed_node_is_named_as_before_after_rollback_whatever_its_number_of_users(target, unchecked, monkeypatch):
    # the journal records a node's inputs for the order of their users only from two users
    # on: a rename (the replace hook with the node as ``old``) records the node itself
    monkeypatch.setattr(_RenameThenFail, "targets", (target,))
    gm = torch.fx.symbolic_trace(_OneAndTwoUsers())
    names = [n.name for n in gm.graph.nodes]
    code = gm.code
    reg = Registry()
    reg.register(_RenameThenFail)
    with pytest.raises(PassFailedError, match="after the renames"):
        Pipeline(["rename_then_fail"], registry=reg).run(gm, [torch.randn(3)])
    assert [n.name for n in gm.graph.nodes] == names == ["x", "relu", "sigmoid", "mul", "add", "output"]
    gm.recompile()
    assert gm.code == code


class _ArgsAssigner(GraphPass):
    """Declares journal_edits but assigns node.args (unrecorded), then raises."""

    name = "args_assigner"
    journal_edits = True
    writes_tensors = False

    def run(self, gm, ctx):
        for n in gm.graph.nodes:
            if n.op == "call_function" and n.target is torch.relu:
                n.args = (n.args[0].args[0],)
        raise RuntimeError("oops")


class _ReluOfAdd(nn.Module):
    def forward(self, x):
        return torch.relu(x + 1)


def test_a_journaled_restore_of_a_third_party_pass_says_what_it_cannot_undo(monkeypatch):
    """Found by the new-user check: the error said the graph was restored while an edit the
    journal never saw stayed; the note says what the restore covers and how to check."""
    monkeypatch.delenv("FXPASSES_CHECK_JOURNAL", raising=False)
    assert not checking()
    gm = torch.fx.symbolic_trace(_ReluOfAdd())
    code, order = gm.code, [(n, n.args) for n in gm.graph.nodes]
    with pytest.raises(PassFailedError) as info:
        Pipeline([_ArgsAssigner]).run(gm, [torch.randn(3)])
    assert info.value.notes == [
        "'args_assigner' declares journal_edits=True, so the restore undid its edits made through torch.fx's "
        "editing methods and the PassContext, and put back the nodes' order, ops, targets, arguments and names; an edit of "
        "node meta or module attributes made any other way is not recorded and stays: run with "
        "FXPASSES_CHECK_JOURNAL=1 to check the declaration",
        "'args_assigner' declares journal_edits=True but changed what its journal does not record; put back from "
        "a record made before the pass: %relu's args",
    ]
    # the assigned args are put back (a second new-user check found them left in the graph)
    assert [(n, n.args) for n in gm.graph.nodes] == order
    gm.recompile()
    assert gm.code == code
    # with verify="none" the record is made too (an edit the journal missed left a pass that
    # raised nothing "unchanged" and the module's code stale: a new-user check)
    gm = torch.fx.symbolic_trace(_ReluOfAdd())
    order = [(n, n.args) for n in gm.graph.nodes]
    with pytest.raises(PassFailedError) as info:
        Pipeline([_ArgsAssigner], verify="none").run(gm, [torch.randn(3)])
    assert info.value.notes[1].endswith("put back from a record made before the pass: %relu's args")
    assert [(n, n.args) for n in gm.graph.nodes] == order
    # (W3 of a new-user check: the line said the graph was restored, which the edit belied)
    assert info.value.from_journal and (
        "  the graph was restored to its state before 'args_assigner', as far as its journal records (see the note)"
        in str(info.value).splitlines()
    )
    # with the check on, the broken declaration is the error
    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", "1")
    gm = torch.fx.symbolic_trace(_ReluOfAdd())
    with pytest.raises(JournalMismatch, match="args_assigner"):
        Pipeline([_ArgsAssigner]).run(gm, [torch.randn(3)])


class _FoldsReshapesByAssigning(fxpasses.NodePass):
    """Declares journal_edits but folds reshape(reshape(x)) by assigning node.args, and keeps."""

    name = "folds_by_assigning"
    journal_edits = True
    writes_tensors = False

    @fxpasses.on("reshape")
    def visit(self, node, ctx):
        inner = node.args[0]
        if isinstance(inner, torch.fx.Node) and inner.op == "call_method" and inner.target == "reshape":
            node.args = (inner.args[0], *node.args[1:])
        return None


class _TwoReshapes(nn.Module):
    def forward(self, x):
        return x.reshape(2, 2, 4).reshape(4, 4) * 2


def test_a_broken_journal_promise_fails_under_verify_none_too(monkeypatch):
    """Under verify="none" a journaled third-party pass that assigned node.args (and returned
    keep) was reported "ok, changed: no": the module was not recompiled and ran its old code,
    and the next analysis was served from the cache (a new-user check)."""
    monkeypatch.delenv("FXPASSES_CHECK_JOURNAL", raising=False)  # (as a user runs: that check off)
    gm = torch.fx.symbolic_trace(_TwoReshapes())
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline(["propagate_shapes", _FoldsReshapesByAssigning, "propagate_shapes"], verify="none").run(gm, [torch.randn(4, 4)])
    assert "'folds_by_assigning' declares journal_edits=True but edited the graph outside its journal: %reshape_1: args" in info.value.reason
    assert gm.code == code and [n.args[0].name for n in gm.graph.nodes if n.name == "reshape_1"] == ["reshape"]


class _TwoRelus(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        a = torch.relu(self.lin(x))
        return torch.relu(a) * 2 + 1


class _MovesANode(GraphPass):
    """Moves the second relu before the first (journal_edits=True rules moves out)."""

    name = "moves_a_node"
    journal_edits = True
    writes_tensors = False

    def run(self, gm, ctx):
        first, second = [n for n in gm.graph.nodes if n.op == "call_function" and "relu" in str(n.target)]
        first.prepend(second)
        return True


@pytest.mark.parametrize("on_error", ["rollback", "skip"])
@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_a_journaled_pass_that_moves_a_node_is_blamed_and_the_order_put_back(dialect, on_error, monkeypatch):
    """Found by a new-user check: the first pass's lint failed, the journal's restore left the
    move, and the lint of the graph "as given" then blamed the user's (valid) input graph
    with an InputGraphError, leaving the graph broken."""
    monkeypatch.delenv("FXPASSES_CHECK_JOURNAL", raising=False)
    if dialect == "dynamo":
        torch._dynamo.reset()
    cap = capture(_TwoRelus(), [torch.randn(2, 4)], dialect)
    gm, inputs = cap.gm, cap.inputs
    order, code, expected = list(gm.graph.nodes), gm.code, gm(*inputs)
    pipe = Pipeline([_MovesANode], on_error=on_error)
    if on_error == "rollback":
        with pytest.raises(PassFailedError) as info:
            pipe.run(gm, inputs)
        failure = info.value
    else:
        failure = pipe.run(gm, inputs)["moves_a_node"]
    text = failure.error if on_error == "skip" else str(failure)
    first_relu, second_relu = [n.name for n in order if n.op == "call_function" and "relu" in str(n.target)]
    assert text.splitlines()[0] == (
        "pass 'moves_a_node' failed: verification failed: 'moves_a_node' declares journal_edits=True but edited the "
        f"graph outside its journal: %{second_relu}: moved before %{first_relu} (moving an existing node with "
        "prepend/append, assigning its args, target, op or name, and linking or unlinking nodes by hand are not allowed "
        "then: set journal_edits = False, or use torch.fx's editing methods and the PassContext: ctx.rename for a name)"
    )
    assert (
        "  the graph was restored to its state before 'moves_a_node', as far as its journal records (see the note)"
        in text.splitlines()
    )
    assert (
        "note: 'moves_a_node' declares journal_edits=True but changed what its journal does not record; put back "
        "from a record made before the pass: the node order" in text
    )
    assert list(gm.graph.nodes) == order and gm.code == code
    gm.graph.lint()
    torch.testing.assert_close(gm(*inputs), expected)


class _RenamesEveryCall(fxpasses.GraphPass):
    """Renames every call node by assignment, then fails or returns (journal_edits: not allowed)."""

    name = "renames_every_call"
    journal_edits = True
    writes_tensors = False

    class Options(fxpasses.PassOptions):
        fail: bool = True

    def run(self, gm, ctx):
        for n in gm.graph.nodes:
            if n.op == "call_function":
                n.name = n.name + "_renamed"
        if self.options.fail:
            raise RuntimeError("fails on purpose")
        return True


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_a_journaled_pass_that_renames_a_node_without_users_is_put_back(dialect, monkeypatch):
    """A third-party journaled pass renaming nodes by assignment, then failing: torch.fx tells
    the rename of a node with no users (an export graph's `_assert_tensor_metadata`) to no
    hook, so the restore left its new name (a real-model sweep, on Llama). The record made
    before the pass holds the names too: the rename is put back, and a pass that returns after
    one fails, pointing at ctx.rename."""
    monkeypatch.delenv("FXPASSES_CHECK_JOURNAL", raising=False)
    if dialect == "dynamo":
        torch._dynamo.reset()

    class Casts(torch.nn.Module):
        def forward(self, x):
            return x.to(torch.int64).float().relu() + 1

    cap = capture(Casts(), [torch.randn(2, 3)], dialect)
    gm, inputs = cap.gm, cap.inputs
    names, code, expected = [n.name for n in gm.graph.nodes], gm.code, gm(*inputs)
    with pytest.raises(PassFailedError) as info:
        Pipeline([_RenamesEveryCall]).run(gm, inputs)
    assert [n.name for n in gm.graph.nodes] == names and gm.code == code
    torch.testing.assert_close(gm(*inputs), expected)
    unseen = [n.name for n in gm.graph.nodes if n.op == "call_function" and not n.users]
    assert bool(unseen) == (dialect == "export")  # (the other renames go through the hooks: journaled)
    if not unseen:
        return
    assert f"put back from a record made before the pass: %{unseen[0]}'s name" in str(info.value)
    with pytest.raises(PassFailedError) as info:  # returning after such a rename fails the pass
        Pipeline([(_RenamesEveryCall, {"fail": False})]).run(gm, inputs)
    assert f"edited the graph outside its journal: %{unseen[0]}: name assigned (now %{unseen[0]}_renamed)" in str(info.value)
    assert "ctx.rename for a name" in str(info.value)
    assert [n.name for n in gm.graph.nodes] == names and gm.code == code


def test_a_broken_input_graph_before_a_journaled_pass_is_still_the_input_graphs_fault(monkeypatch):
    """The order record tells a move from a broken input: with nothing moved, an input graph
    that fails lint is reported as such."""
    monkeypatch.delenv("FXPASSES_CHECK_JOURNAL", raising=False)
    gm = torch.fx.symbolic_trace(_TwoRelus())
    first, second = [n for n in gm.graph.nodes if n.target is torch.relu]
    first.prepend(second)  # broken as given
    order = list(gm.graph.nodes)
    with pytest.raises(fxpasses.InputGraphError, match="the graph fails lint as given"):
        Pipeline([_AddOne]).run(gm, [torch.randn(2, 4)])  # a journaled pass that adds a node
    assert list(gm.graph.nodes) == order


def _breaks_its_journal(how):
    """A third-party journaled pass that returns True after one edit journal_edits rules out."""

    def run(self, gm, ctx):
        relu, second = [n for n in gm.graph.nodes if n.op == "call_function" and "relu" in str(n.target)]
        lin = relu.args[0]
        if how == "append":  # the first relu after its user
            second.append(relu)
        elif how == "args":  # a use before its definition
            relu.args = (second,)
        elif how == "args_valid":  # still lints: only numeric verification would see it
            second.args = (lin,)
        elif how == "target":
            second.target = torch.sigmoid if second.target is torch.relu else torch.ops.aten.sigmoid.default
        return True

    return type(f"Breaks_{how}", (GraphPass,), {"name": f"breaks_{how}", "journal_edits": True, "writes_tensors": False, "run": run})


@pytest.mark.parametrize(
    "how, said",
    [("append", "moved before %relu"), ("args", "args assigned"), ("args_valid", "args assigned"), ("target", "target assigned")],
)
@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize("on_error", ["rollback", "skip"])
def test_a_third_party_journaled_pass_editing_outside_its_journal_is_caught_and_put_back(how, said, first, on_error, monkeypatch):
    """A second new-user check: as the first pass, an assigned node.args was blamed on the
    input graph (InputGraphError) and stayed; as a later pass, a move or an assignment passed
    lint (which looks at the journaled edits only) and the module no longer ran. The nodes'
    order, targets and arguments are now checked after a third-party journaled pass and put
    back after its rollback."""
    monkeypatch.delenv("FXPASSES_CHECK_JOURNAL", raising=False)
    cls = _breaks_its_journal(how)
    gm = torch.fx.symbolic_trace(_TwoRelus())
    x = torch.randn(2, 4)
    expected = gm(x)
    passes = [cls] if first else [_AddOne, cls]
    if not first:  # the state before the pass at fault
        Pipeline([_AddOne]).run(gm, [x])
        expected = gm(x)
        passes = [cls]
    code, nodes = gm.code, [(n, n.target, n.args) for n in gm.graph.nodes]
    pipe = Pipeline(passes, on_error=on_error)
    if on_error == "rollback":
        with pytest.raises(PassFailedError) as info:
            pipe.run(gm, [x])
        text = str(info.value)
    else:
        report = pipe.run(gm, [x])
        assert report[cls.name].status == "skipped" and report[cls.name].rolled_back
        text = report[cls.name].error
    node = [n for n, *_ in nodes if n.op == "call_function" and "relu" in str(n.target)][0 if how == "args" else 1]
    assert text.startswith(
        f"pass {cls.name!r} failed: verification failed: {cls.name!r} declares journal_edits=True but edited the graph "
        f"outside its journal: %{node.name}: {said}"
    ), text
    assert [(n, n.target, n.args) for n in gm.graph.nodes] == nodes
    gm.graph.lint()
    gm.recompile()
    assert gm.code == code
    torch.testing.assert_close(gm(x), expected)


def test_a_third_party_journaled_pass_that_keeps_its_promise_passes_the_check(monkeypatch):
    monkeypatch.delenv("FXPASSES_CHECK_JOURNAL", raising=False)
    gm = torch.fx.symbolic_trace(_TwoRelus())
    x = torch.randn(2, 4)
    expected = gm(x) + 1.0
    report = Pipeline([_AddOne, _AddOne], on_error="raise").run(gm, [x])  # (it adds 1: lint, not numeric)
    assert [p.status for p in report.passes] == ["ok", "ok"]
    torch.testing.assert_close(gm(x), expected + 1.0)


class _IntAdd(nn.Module):
    def forward(self, x):
        return (x + 1) * 2


def _journaled(name, run):
    return type(name.title(), (GraphPass,), {"name": name, "journal_edits": True, "writes_tensors": False, "run": run})


def test_the_frame_compares_objects_an_equal_argument_of_another_type_is_a_change(monkeypatch):
    """A third new-user check: `x + 1` -> `x + 1.0` by assigning node.args was neither caught
    nor put back (the frame compared values), and under skip the run ended with the float
    output numeric verification had rejected."""
    monkeypatch.delenv("FXPASSES_CHECK_JOURNAL", raising=False)

    def run(self, gm, ctx):
        add = next(n for n in gm.graph.nodes if n.target is operator.add)
        add.args = (add.args[0], 1.0)
        return True

    gm = torch.fx.symbolic_trace(_IntAdd())
    x = torch.arange(4)
    code = gm.code
    report = Pipeline([_journaled("to_float", run), "eliminate_dead_code"], on_error="skip").run(gm, [x])
    assert report["to_float"].status == "skipped"
    assert report["to_float"].error.startswith(
        "pass 'to_float' failed: verification failed: 'to_float' declares journal_edits=True but edited the graph "
        "outside its journal: %add: args assigned"
    )
    assert gm.code == code and gm(x).dtype == torch.int64


def test_an_assigned_op_is_caught_and_put_back(monkeypatch):
    monkeypatch.delenv("FXPASSES_CHECK_JOURNAL", raising=False)

    def run(self, gm, ctx):
        lin = next(n for n in gm.graph.nodes if n.op == "call_module")
        lin.op = "get_attr"
        return True

    gm = torch.fx.symbolic_trace(_TwoRelus())
    code, x = gm.code, torch.randn(2, 4)
    expected = gm(x)
    with pytest.raises(PassFailedError, match=r"outside its journal: %lin: op assigned") as info:
        Pipeline([_journaled("op_flip", run)]).run(gm, [x])
    assert "put back from a record made before the pass: %lin's op" in info.value.notes[-1]
    gm.recompile()
    assert gm.code == code
    torch.testing.assert_close(gm(x), expected)


def test_a_node_unlinked_by_hand_stops_the_run_even_under_skip(monkeypatch):
    """The journal cannot put back a node taken out of the list by hand: the failure said the
    graph was restored and put back, and under skip the next (built-in) pass was rolled back
    with an InputGraphError blaming the user's graph."""
    monkeypatch.delenv("FXPASSES_CHECK_JOURNAL", raising=False)

    def run(self, gm, ctx):
        mul = next(n for n in gm.graph.nodes if n.target is operator.mul)
        mul._remove_from_list()
        return True

    gm = torch.fx.symbolic_trace(_IntAdd())
    with pytest.raises(PassFailedError) as info:
        Pipeline([_journaled("unlink", run), "eliminate_dead_code"], on_error="skip").run(gm, [torch.arange(4)])
    err = info.value
    assert not err.rolled_back and not err.from_journal
    assert str(err).splitlines()[0].startswith(
        "pass 'unlink' failed: verification failed: 'unlink' declares journal_edits=True but edited the graph outside "
        "its journal: %mul: taken out of the graph without torch.fx's node hooks"
    )
    assert err.notes == [
        "'unlink' declares journal_edits=True but erased or inserted nodes without torch.fx's node hooks: the graph "
        "could not be restored, and the run stops here whatever on_error says (FXPASSES_CHECK_JOURNAL=1 checks the "
        "declaration)"
    ]
    assert not any(line.startswith("  the graph was restored") for line in str(err).splitlines())


def test_a_journaled_pass_moving_and_assigning_outside_its_journal_is_put_back_exactly(monkeypatch):
    """A third-party pass declaring `journal_edits` that moved a node and assigned another's
    `args` without the journal, then failed, was put back in order, but with new sort keys
    for every node and copies of the argument containers: not the graph exactly as it was.
    The node frame now restores the very keys and objects."""

    class M(torch.nn.Module):
        def forward(self, x):
            return ((x * 2) + 1).relu().sin()

    class MoveThenFail(fxpasses.GraphPass):
        name = "move_then_fail"
        journal_edits = True
        writes_tensors = False

        def run(self, gm, ctx):
            nodes = {n.name: n for n in gm.graph.nodes}
            nodes["add"].prepend(nodes["relu"])  # a move no journal records
            nodes["sin"].args = (nodes["add"],)  # an assignment no journal records
            raise RuntimeError("boom")

    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", "0")  # (the check would fail the declaration instead)
    gm = torch.fx.symbolic_trace(M())
    before = [(n, n._sort_key, n._args, n._kwargs) for n in gm.graph.nodes]
    with pytest.raises(fxpasses.PassFailedError, match="boom"):
        fxpasses.Pipeline([MoveThenFail]).run(gm, [torch.randn(3)])
    after = [(n, n._sort_key, n._args, n._kwargs) for n in gm.graph.nodes]
    assert len(after) == len(before)
    for (n, key, args, kwargs), (m, key2, args2, kwargs2) in zip(before, after):
        assert n is m and key == key2 and args is args2 and kwargs is kwargs2, n.name


def test_an_assigned_args_outside_the_journal_puts_the_inputs_users_back_in_order(monkeypatch):
    """The node frame put an assigned ``node.args`` back, but setting ``args`` (the pass's and
    the put-back's) moved the node to the end of each input's ``users``: ``%x``'s users read
    ``add, _guards_fn, linear`` after the rollback, ``add, linear, _guards_fn`` before (an
    adversarial check)."""

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return torch.relu(self.lin(x)) + x

    class AssignArgs(fxpasses.GraphPass):
        name = "assign_args"
        journal_edits = True
        writes_tensors = False

        def run(self, gm, ctx):
            lin = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.linear.default)
            lin.args = (lin.args[0], lin.args[1], lin.args[2])
            raise RuntimeError("boom")

    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", "0")  # (the check would fail the declaration instead)
    x = torch.randn(2, 4)
    gm = torch.export.export(M(), (x,)).module()
    users = {n: list(n.users) for n in gm.graph.nodes}
    (ph,) = [n for n in gm.graph.nodes if n.name == "x"]
    assert [u.name for u in users[ph]] == ["add", "linear", "_guards_fn"]  # (linear not last: a move shows)
    with pytest.raises(fxpasses.PassFailedError, match="boom"):
        fxpasses.Pipeline([AssignArgs]).run(gm, [x])
    assert {n: list(n.users) for n in gm.graph.nodes} == users


class _LinAct(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.lin(x))


def _deletes_act(name, *, fails):
    """A third-party journaled pass deleting ``gm.act`` directly (no ``ctx.before_module_edit``),
    then raising (``fails``) or returning True."""

    def run(self, gm, ctx):
        del gm.act
        if fails:
            raise RuntimeError("boom in the pass")
        return True

    return type(name.title(), (fxpasses.GraphPass,), {"name": name, "journal_edits": True, "writes_tensors": False, "run": run})


@pytest.mark.parametrize("on_error", ["rollback", "skip"])
def test_a_journaled_pass_deleting_a_submodule_directly_is_not_blamed_on_the_input(on_error, monkeypatch):
    """A third-party journaled pass that deleted a submodule without
    ``ctx.before_module_edit`` and then raised was reported as an input graph that "fails lint
    as given" (InputGraphError), and the run went on under skip with the module still gone (an
    adversarial check). The input is now linted before such a first pass; a restored graph
    that fails lint after it names the pass's unrecorded edit and stops the run."""

    DropSub = _deletes_act("drop_sub", fails=True)
    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", "0")  # (the check would name the declaration instead)
    gm = torch.fx.symbolic_trace(_LinAct())
    with pytest.raises(fxpasses.PassFailedError) as info:
        fxpasses.Pipeline([DropSub, "eliminate_dead_code"], on_error=on_error).run(gm, [torch.randn(2, 4)])
    assert not isinstance(info.value, fxpasses.errors.InputGraphError)
    assert info.value.notes[-1].startswith(
        "the graph fails lint after that restore (RuntimeError: Node act target act references nonexistent attribute "
    )
    assert info.value.notes[-1].endswith(
        "and passed it before 'drop_sub': the pass changed what its journal does not record (a submodule or module "
        "attribute deleted or set without ctx.before_module_edit, for one), so the run stops here whatever on_error says"
    )


def test_a_broken_input_before_a_third_party_journaled_pass_is_named_before_it_runs(monkeypatch):
    """The graph is linted as given before a third-party journaled first pass (its restore is
    trusted for module attributes), so a broken input is the input's fault, and the pass
    does not run."""
    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", "0")
    ran = []

    class Counts(fxpasses.GraphPass):
        name = "counts"
        journal_edits = True
        writes_tensors = False

        def run(self, gm, ctx):
            ran.append(1)
            return False

    gm = torch.fx.symbolic_trace(_TwoRelus())
    relu = next(n for n in gm.graph.nodes if n.op == "call_function")
    with gm.graph.inserting_before(relu):
        gm.graph.create_node("call_module", "missing", (relu.args[0],))  # (no such submodule)
    with pytest.raises(fxpasses.errors.InputGraphError, match=r"no pass was run \('counts' was next\)"):
        fxpasses.Pipeline([Counts], on_error="skip").run(gm, [torch.randn(2, 4)])
    assert ran == []


def test_a_journaled_pass_deleting_a_submodule_directly_and_succeeding_fails_lint(monkeypatch):
    """`del gm.act` in a third-party journaled pass that returned was "ok": the partial lint
    re-resolved only targets a recorded module change could touch, and the module called a
    submodule that was gone (an adversarial check). Every target is resolved again after
    such a pass; the failure then stops the run, the restore being incomplete."""

    DropSubOk = _deletes_act("drop_sub_ok", fails=False)
    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", "0")
    gm = torch.fx.symbolic_trace(_LinAct())
    with pytest.raises(fxpasses.PassFailedError) as info:
        fxpasses.Pipeline(["eliminate_dead_code", DropSubOk], on_error="skip").run(gm, [torch.randn(2, 4)])
    assert str(info.value).startswith(
        "pass 'drop_sub_ok' failed: graph lint failed: RuntimeError: Node act target act references nonexistent attribute act"
    )
    assert info.value.notes[-1].endswith("so the run stops here whatever on_error says")


# ------------------------------------------------------- an undeclared write of a tensor


class _ScaleNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * 2.0


def _fold_scale(journal_edits: bool, factor: float) -> type:
    """A pass folding ``lin(x) * 2`` into the linear's weights in place while declaring
    ``writes_tensors = False`` (the author's mistake); ``factor`` 3 gets the fold wrong."""

    class _FoldScale(fxpasses.NodePass):
        name = "fold_scale"
        writes_tensors = False

        @fxpasses.on("mul")
        def mul(self, node, ctx):
            lin = node.args[0]
            if not isinstance(lin, torch.fx.Node) or lin.op != "call_module":
                return None
            m = ctx.module(lin)
            with torch.no_grad():
                m.weight.mul_(factor)
                m.bias.mul_(factor)
            return fxpasses.Replace(lin)

    _FoldScale.journal_edits = journal_edits
    return _FoldScale


@pytest.mark.parametrize("journal_edits", [False])
def test_a_failed_run_names_the_tensors_a_pass_declaring_writes_tensors_false_wrote(journal_edits, unchecked):
    """The README: a write such a pass makes anyway through a tensor method is named in the
    error of a failed run (not for a journaled pass, whose journal records no tensors: check
    mode, below, holds it to its declaration)."""
    gm = torch.fx.symbolic_trace(_ScaleNet())
    weight = gm.lin.weight.clone()
    with pytest.raises(PassFailedError) as info:
        Pipeline([_fold_scale(journal_edits, 3.0)], verify="numeric").run(gm, [torch.randn(2, 4)])
    note = [n for n in info.value.notes if "could not be restored" in n]
    assert len(note) == 1 and note[0].endswith(": lin.weight, lin.bias"), info.value.notes
    assert "declares writes_tensors=False" in note[0]
    assert torch.equal(gm.lin.weight, weight * 3.0)  # (what the note is about)


@pytest.mark.parametrize("journal_edits", [False, True])
def test_check_mode_holds_a_pass_to_writes_tensors_false(journal_edits):
    """assert_preserves_outputs (check mode) passed a pass that declares writes_tensors=False
    and writes weights in place while keeping the outputs (journal_edits=False), or blamed
    journal_edits (True), whose removal then passed: the declaration to fix is writes_tensors."""
    from fxpasses.journal import WritesTensorsMismatch
    from fxpasses.testing import assert_preserves_outputs

    with pytest.raises(WritesTensorsMismatch) as info:
        assert_preserves_outputs(_fold_scale(journal_edits, 2.0), _ScaleNet(), [torch.randn(2, 4)],
                                 dialects=["symbolic_trace"])
    message = str(info.value)
    assert message.startswith(
        "pass 'fold_scale' declares writes_tensors=False, but wrote these tensors of the module in place: "
        "'lin.weight', 'lin.bias' (a failed run could not restore them: declare writes_tensors = True"
    ), message
    assert isinstance(info.value, AssertionError) and info.value.written == ["lin.weight", "lin.bias"]
    # the same pass declaring its writes passes, its fold kept
    honest = _fold_scale(False, 2.0)
    honest.writes_tensors = True
    results = assert_preserves_outputs(honest, _ScaleNet(), [torch.randn(2, 4)], dialects=["symbolic_trace"])
    assert results["symbolic_trace"][1].passes[0].changed


class _RenameMulToSigmoid(fxpasses.GraphPass):
    """Renames the mul node 'sigmoid' by assignment (a node with users: allowed without a journal)."""

    name = "rename_mul_to_sigmoid"

    def run(self, gm, ctx):
        mul = next(n for n in gm.graph.nodes if n.op == "call_function" and n.name == "mul")
        mul.name = "sigmoid"
        return True


class _AddsSigmoid(fxpasses.GraphPass):
    """Applies torch.sigmoid to the output, through the context (correct)."""

    name = "adds_sigmoid"
    journal_edits = True
    writes_tensors = False

    def run(self, gm, ctx):
        out = next(n for n in gm.graph.nodes if n.op == "output")
        value = out.args[0]
        with ctx.inserting_before(out):
            new = ctx.call_function(torch.sigmoid, (value,))
        out.replace_input_with(value, new)  # (the output node: its args edited through torch.fx)
        return True


def test_a_name_assigned_by_one_pass_is_not_given_to_a_node_of_a_later_one():
    """A pass renaming a node by assigning node.name (which torch.fx's name space does not
    see) made the name space give the same name to a node of a later, correct pass, which
    then failed lint ("Node redefined name sigmoid!") and was blamed (a final new-user
    check). After a pass's whole-graph lint, the names the name space does not hold are
    registered as used."""

    class Net(torch.nn.Module):
        def forward(self, x):
            return (x * 2).relu()

    reg = Registry(autoload=False)
    reg.register(_RenameMulToSigmoid)
    reg.register(_AddsSigmoid)
    gm = torch.fx.symbolic_trace(Net())
    x = torch.randn(3)
    report = Pipeline(["rename_mul_to_sigmoid", "adds_sigmoid"], registry=reg).run(gm, [x])
    assert [p.status for p in report.passes] == ["ok", "ok"]
    assert [n.name for n in gm.graph.nodes] == ["x", "sigmoid", "relu", "sigmoid_1", "output"]
    torch.testing.assert_close(gm(x), torch.sigmoid((x * 2).relu()))
