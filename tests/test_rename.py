"""rename_nodes and PassContext.rename: a taken name gets a documented suffix or a clear error."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import fxpasses
from fxpasses import PassContext, UserError
from fxpasses.testing import assert_preserves_outputs, normalized_code

DIALECTS = ("symbolic_trace", "dynamo", "export")


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()  # keep dynamo's recompile limit out of the way of repeated captures


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        a = torch.relu(self.lin(x))
        b = a + 1
        c = torch.relu(b)
        return c * 2


def traced():
    gm = torch.fx.symbolic_trace(Net())
    assert [n.name for n in gm.graph.nodes] == ["x", "lin", "relu", "add", "relu_1", "mul", "output"]
    return gm


def rename(gm, options: str):
    report = fxpasses.Pipeline.from_string(f"rename_nodes{{{options}}}").run(gm)
    return report["rename_nodes"]


def names(gm):
    return [n.name for n in gm.graph.nodes]


def test_pattern_and_template_rename_and_the_mapping_is_returned():
    gm = traced()
    x = torch.randn(2, 4)
    want = gm(x)
    pr = rename(gm, r"pattern='^relu(_\d+)?$', replacement='act\1'")
    assert names(gm) == ["x", "lin", "act", "add", "act_1", "mul", "output"]
    assert gm.meta["rename_nodes"] == {"relu": "act", "relu_1": "act_1"}
    assert pr.counters == {"renamed": 2} and pr.changed
    gm.graph.lint()
    assert "act_1 = torch.relu(add)" in gm.code
    assert torch.equal(gm(x), want)


def test_mapping_is_available_to_later_passes_of_the_run():
    seen = {}

    class Reader(fxpasses.GraphPass):
        """Records what rename_nodes left in ctx.analyses."""

        name = "read_rename_mapping"
        kind = "analysis"
        after = ("rename_nodes",)

        def run(self, gm, ctx):
            seen.update(ctx.analyses["rename_nodes"])
            return False

    gm = traced()
    fxpasses.Pipeline([Reader, ("rename_nodes", {"pattern": "^add$", "replacement": "plus"})]).run(gm)
    assert seen == {"add": "plus"}


def test_taken_name_gets_the_documented_suffix():
    gm = traced()
    pr = rename(gm, "pattern='^add$', replacement=relu")  # held by node %relu
    assert gm.meta["rename_nodes"] == {"add": "relu_2"}  # relu, relu_1 are taken
    assert pr.counters == {"renamed": 1, "suffixed": 1}
    gm.graph.lint()
    gm2 = traced()
    rename(gm2, "pattern='^mul$', replacement=lin")
    assert gm2.meta["rename_nodes"] == {"mul": "lin_1"}


def test_taken_name_with_on_conflict_error_fails_clearly_and_rolls_back():
    gm = traced()
    code = normalized_code(gm)
    with pytest.raises(UserError) as info:
        rename(gm, "pattern='^(add|mul)$', replacement=relu, on_conflict=error")
    assert str(info.value) == (
        "rename_nodes (pattern '^(add|mul)$', on_conflict='error'): cannot rename %add to 'relu': "
        "the name is taken by node %relu (op=call_function)"
    )
    assert normalized_code(gm) == code and names(gm) == ["x", "lin", "relu", "add", "relu_1", "mul", "output"]


def test_a_name_held_earlier_stays_taken():
    gm = traced()
    rename(gm, "pattern='^add$', replacement=plus")
    with pytest.raises(UserError, match="earlier node"):
        rename(gm, "pattern='^mul$', replacement=add, on_conflict=error")
    rename(gm, "pattern='^mul$', replacement=add")
    assert gm.meta["rename_nodes"] == {"mul": "add_1"}


@pytest.mark.parametrize(
    "wanted, suffixed, why",
    [
        ("self", "self_1", "the module itself"),
        ("input", "input_1", "builtin"),
        ("torch", "torch_1", "imports"),
        ("lambda", "lambda_1", "keyword"),
        ("None", "None_1", "keyword"),  # FX leaves the node `None` (the builtin's value is None)
        ("True", "True_1", "keyword"),
    ],
)
def test_reserved_names(wanted, suffixed, why):
    gm = traced()
    x = torch.randn(2, 4)
    want = gm(x)
    with pytest.raises(UserError, match=why):
        rename(gm, f"pattern='^add$', replacement={wanted!r}, on_conflict=error")
    pr = rename(gm, f"pattern='^add$', replacement={wanted!r}")
    assert gm.meta["rename_nodes"] == {"add": suffixed} and pr.counters == {"renamed": 1, "suffixed": 1}
    assert names(gm) == ["x", "lin", "relu", suffixed, "relu_1", "mul", "output"]
    gm.recompile()
    assert f"{suffixed} = relu + 1" in gm.code  # the node's name is its name in the code
    assert torch.equal(gm(x), want)  # a node named `self` would break `self.lin(...)`


def test_invalid_characters_are_replaced_not_counted_as_conflicts():
    """...and counted as made_identifier: the report said only renamed=1 where the name asked
    for was changed (a new-user check)."""
    gm = traced()
    pr = rename(gm, "pattern='^add$', replacement='plus.one'")
    assert gm.meta["rename_nodes"] == {"add": "plus_one"} and pr.counters == {"renamed": 1, "made_identifier": 1}
    pr = rename(gm, "pattern='^mul$', replacement='2x'")
    assert gm.meta["rename_nodes"] == {"mul": "_2x"} and pr.counters == {"renamed": 1, "made_identifier": 1}
    pr = rename(gm, "pattern='^relu$', replacement=''")
    assert gm.meta["rename_nodes"] == {"relu": "_"} and pr.counters == {"renamed": 1, "made_identifier": 1}
    pr = rename(gm, "pattern='^lin$', replacement='linear'")
    assert gm.meta["rename_nodes"] == {"lin": "linear"} and pr.counters == {"renamed": 1}


def test_placeholders_keep_the_forward_signature():
    gm = traced()
    x = torch.randn(2, 4)
    want = gm(x)
    rename(gm, "pattern='^x$', replacement=inp")
    assert names(gm)[0] == "inp"
    assert "def forward(self, x)" in gm.code
    assert torch.equal(gm(x=x), want)


def test_ops_option_limits_the_node_kinds():
    gm = traced()
    rename(gm, "pattern='^(.*)$', replacement='n_\\1', ops=[call_module]")
    assert gm.meta["rename_nodes"] == {"lin": "n_lin"}


def test_no_match_changes_nothing():
    gm = traced()
    code = normalized_code(gm)
    pr = rename(gm, "pattern=nothing_here, replacement=x")
    assert not pr.changed and pr.counters == {} and gm.meta["rename_nodes"] == {}
    assert normalized_code(gm) == code


@pytest.mark.parametrize(
    "options, field",
    [
        ("pattern='(', replacement=x", "rename_nodes.pattern"),
        (r"pattern=a, replacement='\2'", "invalid group reference 2"),
        ("pattern=a, replacement=b, on_conflict=overwrite", "rename_nodes.on_conflict"),
        ("replacement=b", "rename_nodes.pattern"),
    ],
)
def test_invalid_options_are_reported_before_running(options, field):
    with pytest.raises(fxpasses.OptionsError, match=field.replace(".", r"\.")):
        fxpasses.Pipeline.from_string(f"rename_nodes{{{options}}}")


def test_outputs_preserved_and_lint_passes_in_every_dialect():
    results = assert_preserves_outputs(
        "rename_nodes{pattern='^(.*)$', replacement='v_\\1'}", Net(), [torch.randn(3, 4)], atol=0, rtol=0
    )
    for dialect, (gm, report) in results.items():
        gm.graph.lint()
        mapping = gm.meta["rename_nodes"]
        renamable = [n for n in gm.graph.nodes if n.op != "output"]
        assert len(mapping) == len(renamable) and report["rename_nodes"].counters["renamed"] == len(renamable)
        assert all(n.name.startswith("v_") for n in renamable), dialect
        assert all(new == "v_" + old for old, new in mapping.items()), (dialect, mapping)


# ------------------------------------------------------------------ the context helper


def make_ctx():
    gm = traced()
    return gm, PassContext(gm, pass_name="test", dialect="symbolic_trace")


def test_context_rename_suffix_and_error():
    gm, ctx = make_ctx()
    nodes = {n.name: n for n in gm.graph.nodes}
    assert ctx.rename(nodes["add"], "relu") == "relu_2"
    assert ctx.rename(nodes["mul"], "relu_1") == "relu_3"  # a numbered name counts up
    with pytest.raises(UserError, match=r"taken by node %lin \(op=call_module\)"):
        ctx.rename(nodes["relu"], "lin", on_conflict="error")
    with pytest.raises(UserError, match="earlier node"):
        ctx.rename(nodes["relu"], "add", on_conflict="error")  # %add is now relu_2
    assert ctx.rename(nodes["relu"], "relu") == "relu"  # its own name: unchanged
    assert ctx.rename(nodes["relu"], "fresh", on_conflict="error") == "fresh"
    with pytest.raises(ValueError, match="on_conflict"):
        ctx.rename(nodes["relu"], "x", on_conflict="ignore")
    gm.graph.lint()
    gm.recompile()
    gm(torch.randn(1, 4))


def test_every_reserved_name_is_renamed_to_the_name_the_generated_code_uses():
    import keyword
    import re

    reserved = sorted(set(keyword.kwlist) | set(torch.fx.graph._illegal_names) | {"self"})
    mismatched = []
    for wanted in reserved:
        gm = torch.fx.symbolic_trace(nn.Sequential(nn.ReLU(), nn.ReLU()))
        node = next(n for n in gm.graph.nodes if n.op == "call_module")
        got = PassContext(gm, pass_name="t", dialect="symbolic_trace").rename(node, wanted)
        gm.recompile()
        if got == wanted or not re.search(rf"^    {re.escape(got)} = ", gm.code, re.M):
            mismatched.append((wanted, got))
    assert len(reserved) > 150 and mismatched == []


class _NoMetaGraphModule(torch.fx.GraphModule):
    """A GraphModule subclass whose ``__init__`` skips ``GraphModule.__init__`` (as
    torchvision's ``feature_extraction.DualGraphModule``, which
    ``create_feature_extractor`` returns, does): no ``meta`` dict, no node-hook lists."""

    def __init__(self, root: nn.Module, graph: torch.fx.Graph) -> None:
        super(torch.fx.GraphModule, self).__init__()
        for node in graph.nodes:
            if node.op in ("get_attr", "call_module"):
                setattr(self, node.target, getattr(root, node.target))
        self.graph = graph


def test_a_graph_module_without_meta_is_renamed_and_gets_the_mapping():
    net = Net()
    gm = _NoMetaGraphModule(net, torch.fx.symbolic_trace(net).graph)
    assert "meta" not in gm.__dict__
    x = torch.randn(2, 4)
    want = gm(x)
    pr = rename(gm, r"pattern='^relu(_\d+)?$', replacement='act\1'")
    assert pr.status == "ok" and pr.counters == {"renamed": 2}
    assert names(gm) == ["x", "lin", "act", "add", "act_1", "mul", "output"]
    assert gm.meta["rename_nodes"] == {"relu": "act", "relu_1": "act_1"}
    assert torch.equal(gm(x), want)


def test_a_meta_dict_a_failed_pass_added_is_removed_by_the_rollback():
    net = Net()
    for journaled in (True, False):
        gm = _NoMetaGraphModule(net, torch.fx.symbolic_trace(net).graph)
        code = gm.code

        class AddsMeta(fxpasses.GraphPass):
            name = "adds_meta"
            writes_tensors = False
            journal_edits = journaled

            def run(self, gm, ctx):
                gm.meta = {"adds_meta": 1}
                raise RuntimeError("boom")

        with pytest.raises(fxpasses.PassFailedError, match="boom"):
            fxpasses.Pipeline([AddsMeta]).run(gm, [torch.randn(2, 4)])
        assert "meta" not in gm.__dict__, journaled
        assert gm.code == code
