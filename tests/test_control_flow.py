"""Higher-order ops (``torch.cond``): built-in passes leave their branch subgraphs alone."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import fxpasses
from fxpasses.capture import capture
from fxpasses.job import DEFAULT_PRESET
from fxpasses.ops import op_name
from fxpasses.testing import assert_preserves_outputs

DEFAULT_PIPELINE = fxpasses.Registry().preset(DEFAULT_PRESET).pipeline


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class Branchy(nn.Module):
    """The same removable ops (eval dropout, ``x * 1``) outside and inside the branches."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        def true_fn(y):
            return self.drop(y * 1) - 0

        def false_fn(y):
            return (y * 1).relu()

        return torch.cond(x.sum() > 0, true_fn, false_fn, (self.drop(self.lin(x)) * 1,))


def branches(gm: torch.fx.GraphModule) -> dict[str, str]:
    """The code of every GraphModule a higher-order op of ``gm`` calls, by attribute name."""
    return {
        name: sub.code
        for name, sub in gm.named_children()
        if isinstance(sub, torch.fx.GraphModule)
    }


@pytest.mark.parametrize("dialect", ["export", "dynamo"])  # symbolic_trace cannot trace torch.cond
def test_default_pipeline_keeps_outputs_and_leaves_cond_branches_unchanged(dialect):
    x = torch.ones(2, 3)
    before = branches(capture(Branchy().eval(), [x], dialect).gm)
    assert len(before) == 2 and all("mul" in code for code in before.values())
    torch._dynamo.reset()
    results = assert_preserves_outputs(
        DEFAULT_PIPELINE, Branchy().eval(), [x], dialects=[dialect],
        check_inputs=[[-torch.ones(2, 3)]],  # the false branch
    )
    gm, report = results[dialect]
    # the top level was rewritten: its dropout and its x * 1 are gone ...
    top = [op_name(n, gm) for n in gm.graph.nodes if n.op == "call_function"]
    assert "dropout" not in top and "mul" not in top, top
    assert report["remove_dropout"].counters == {"removed": 1}
    # ... the branches, called by torch.ops.higher_order.cond, are not entered
    assert branches(gm) == before
    (cond,) = [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.cond]
    assert [a.target for a in cond.args[1:3]] == list(before)


class Recompiling(fxpasses.GraphPass):
    """An analysis that calls ``recompile()`` on the module and on every GraphModule below it
    (a torch.cond branch): the code generated again is the same."""

    name = "recompiling_analysis"
    kind = "analysis"
    rebind = False

    def run(self, gm, ctx):
        for m in gm.modules():
            if isinstance(m, torch.fx.GraphModule):
                m.recompile()
        if self.rebind:  # code that differs, which is a change
            gm._code = gm._code + "\n"
        return False


@pytest.mark.parametrize("dialect", ["symbolic_trace", "export", "dynamo"])
def test_recompile_of_an_unchanged_graph_is_not_a_change(dialect):
    """`recompile()` rebinds `_code` and `_lineno_map` to equal values: an analysis that
    called it was "changed the module (the root module: attribute '_code' rebound)", on the
    branches of a torch.cond too (found by a new-user check)."""
    model = Branchy().eval() if dialect != "symbolic_trace" else nn.Sequential(nn.Linear(3, 3), nn.Dropout(), nn.ReLU()).eval()
    gm = capture(model, [torch.ones(2, 3)], dialect).gm
    reg = fxpasses.Registry(autoload=False)
    reg.register(Recompiling)
    report = fxpasses.Pipeline(["recompiling_analysis"], registry=reg).run(gm)
    assert [(r.status, r.changed) for r in report.passes] == [("ok", False)]
    # after a transform too, whose edits the module's code catches up with only at the end of
    # the pipeline: its recompile() is not a change either (it failed as '_code' rebound;
    # found by a third new-user check)
    for verify in ("none", "lint", "numeric"):
        cap = capture(model, [torch.ones(2, 3)], dialect)
        report = fxpasses.Pipeline(["remove_dropout", Recompiling], verify=verify).run(cap.gm, cap.inputs)
        assert [(r.name, r.status, r.changed) for r in report.passes] == [
            ("remove_dropout", "ok", True), ("recompiling_analysis", "ok", False)
        ], verify
    # a rebinding to other code is still one, named
    cls = type("Rebinding", (Recompiling,), {"rebind": True})
    reg = fxpasses.Registry(autoload=False)
    reg.register(cls)
    code = gm._code
    with pytest.raises(fxpasses.PassFailedError) as info:
        fxpasses.Pipeline(["recompiling_analysis"], registry=reg).run(gm)
    assert "analysis pass 'recompiling_analysis' changed the module (the root module: attribute '_code' rebound)" in str(info.value)
    assert gm._code == code


@pytest.mark.parametrize("dialect", ["export", "dynamo"])
def test_an_analysis_that_edits_a_branch_graph_is_told_it_changed_that_graph(dialect):
    """It was told "changed the module (the root module: attribute '_code' rebound)", the
    recompile after the edit, not the edit (found by a new-user check)."""

    class EditsBranch(fxpasses.GraphPass):
        name = "branch_editing_analysis"
        kind = "analysis"

        def run(self, gm, ctx):
            name, sub = next((k, m) for k, m in gm.named_children() if isinstance(m, torch.fx.GraphModule))
            out = next(n for n in sub.graph.nodes if n.op == "output")
            with sub.graph.inserting_before(out):
                sub.graph.call_function(torch.relu, (next(iter(sub.graph.nodes)),))  # a node nothing uses
            sub.recompile()
            return False

    gm = capture(Branchy().eval(), [torch.ones(2, 3)], dialect).gm
    branch = next(k for k, m in gm.named_children() if isinstance(m, torch.fx.GraphModule))
    reg = fxpasses.Registry(autoload=False)
    reg.register(EditsBranch)
    with pytest.raises(fxpasses.PassFailedError) as info:
        fxpasses.Pipeline(["branch_editing_analysis"], registry=reg).run(gm)
    assert f"analysis pass 'branch_editing_analysis' changed the graph of submodule {branch!r}" in str(info.value)


def test_an_analysis_recompiling_after_dead_code_elimination_is_no_change():
    """The third new-user check's case: `eliminate_dead_code` then an analysis calling
    `recompile()`, on a symbolic_trace graph, failed as "'_code' rebound" at every verify
    but numeric."""

    class S(nn.Module):
        def forward(self, x):
            a = x + 1
            dead = x.sin()  # noqa: F841
            return torch.relu(a)

    for verify in ("none", "lint", "numeric"):
        gm = torch.fx.symbolic_trace(S())
        report = fxpasses.Pipeline(["eliminate_dead_code", Recompiling], verify=verify).run(gm, [torch.randn(3)])
        assert [(r.status, r.changed) for r in report.passes] == [("ok", True), ("ok", False)], verify


@pytest.mark.parametrize("dialect", ["export", "dynamo"])
def test_print_changed_and_print_after_show_a_branch_only_edit(dialect):
    """A transform that edits only a torch.cond branch changed nothing in the root's code, so
    --print-changed printed its header and no diff (found by a new-user check)."""
    import io

    from fxpasses.instruments import PrintAfter, PrintChanged

    class BranchRelu(fxpasses.GraphPass):
        name = "branch_relu"

        def run(self, gm, ctx):
            sub = next(m for _, m in gm.named_children() if isinstance(m, torch.fx.GraphModule))
            out = next(n for n in sub.graph.nodes if n.op == "output")
            (ret,) = out.args[0] if isinstance(out.args[0], (tuple, list)) else (out.args[0],)
            with sub.graph.inserting_before(out):
                relu = sub.graph.call_function(torch.relu, (ret,))
            ret.replace_all_uses_with(relu, delete_user_cb=lambda u: u is out)
            sub.recompile()
            return True

    cap = capture(Branchy().eval(), [torch.ones(2, 3)], dialect)
    branch = next(k for k, m in cap.gm.named_children() if isinstance(m, torch.fx.GraphModule))
    out = io.StringIO()
    fxpasses.Pipeline([BranchRelu], verify="none").run(
        cap.gm, cap.inputs, instruments=[PrintChanged(file=out), PrintAfter(file=out)]
    )
    text = out.getvalue()
    diff = text.split("# *** branch_relu changed the graph")[1].split("# *** graph after")[0]
    added = [line for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert len(added) >= 1 and all("relu" in line for line in added if "torch.relu" in line)
    assert any("= torch.relu(" in line for line in added), diff
    hunks = [line for line in diff.splitlines() if line.startswith("@@")]
    assert len(hunks) == 1 and hunks[0].endswith(f" @@ # submodule {branch!r}:")  # names the branch
    after = text.split("# *** graph after branch_relu")[1].split("# *** branch_relu changed")[0]
    assert f"# submodule {branch!r}:" in after and after.count("def forward(self") == 3
    # no trailing whitespace (each diff ended with a context line of torch's indentation), but
    # the one space that marks an empty context line in a unified diff
    assert [line for line in text.splitlines() if line != line.rstrip() and line != " "] == []
