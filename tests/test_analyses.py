"""Analyses are cached in a run, preserved or invalidated by transforms, computed on demand."""

from __future__ import annotations

import torch

from fxpasses import NodePass, Pipeline, Registry, Replace, on
from fxpasses._example import convnet
from fxpasses.capture import capture


class DropRelu(NodePass):
    """relu(x) -> x: a transform that changes the graph (and invalidates analyses)."""

    name = "drop_relu"

    @on("relu")
    def relu(self, node, ctx):
        return Replace(node.args[0])


def statuses(report):
    return [(p.name, p.status) for p in report.passes]


def test_cached_analysis_is_reused_until_a_transform_invalidates_it():
    cap = capture(convnet(), [torch.randn(1, 3, 32, 32)], "export")
    report = Pipeline.from_string(
        "propagate_shapes,eliminate_dead_code,propagate_shapes,fuse_conv_bn,propagate_shapes", order="as-given"
    ).run(cap.gm, cap.inputs)
    assert statuses(report) == [
        ("propagate_shapes", "ok"),
        ("eliminate_dead_code", "ok"),
        ("propagate_shapes", "cached"),  # DCE changed the graph but preserves shapes
        ("fuse_conv_bn", "ok"),
        ("propagate_shapes", "ok"),  # fusion made new nodes: computed again
    ]
    assert report["fuse_conv_bn"].changed
    assert report.passes[1].changed  # the cached run followed a real change
    # after the recomputation, every node has its shape again
    assert all("val" in n.meta for n in cap.gm.graph.nodes if n.op == "call_function")


def test_other_options_are_not_the_same_result():
    cap = capture(convnet(), [torch.randn(1, 3, 32, 32)], "symbolic_trace")
    report = Pipeline.from_string(
        "propagate_shapes{mode=real},propagate_shapes{mode=real},propagate_shapes{mode=fake}", order="as-given"
    ).run(cap.gm, cap.inputs)
    assert [p.status for p in report.passes] == ["ok", "cached", "ok"]


class NeedsShapes(NodePass):
    """Counts relus whose shape is recorded."""

    name = "needs_shapes"
    requires = ("propagate_shapes",)

    @on("relu")
    def relu(self, node, ctx):
        if ctx.tensor_info(node) is not None:
            ctx.count("with_shape")


class MakesNodes(NodePass):
    """Rewrites relu(x) as a fresh relu node (no shape recorded)."""

    name = "makes_nodes"

    @on("relu")
    def relu(self, node, ctx):
        return Replace(ctx.call_function(node.target, node.args, node.kwargs))


def test_required_analysis_is_computed_on_demand_when_not_current():
    reg = Registry()
    reg.register(NeedsShapes)
    reg.register(MakesNodes)
    cap = capture(convnet(), [torch.randn(1, 3, 32, 32)], "export")
    report = Pipeline(["needs_shapes", "makes_nodes", "needs_shapes"], registry=reg).run(cap.gm, cap.inputs)
    assert statuses(report) == [
        ("propagate_shapes", "ok"),  # pulled into the plan
        ("needs_shapes", "ok"),
        ("makes_nodes", "ok"),
        ("propagate_shapes", "ok"),  # on demand: makes_nodes invalidated the shapes
        ("needs_shapes", "ok"),
    ]
    assert report.passes[3].reasons == ["on demand: required by needs_shapes"]
    assert report.passes[1].counters == {"with_shape": 2}
    assert report.passes[4].counters == {"with_shape": 2}  # the new relus have shapes again


def test_an_unregistered_analysis_class_of_the_pipeline_is_computed_again_on_demand():
    """An analysis given as a class in the pipeline (no registration, as the README allows)
    was not recomputed after a transform invalidated it: the pass requiring it found its
    result gone (KeyError: 'fanout'), in both orders (a new-user check)."""
    from fxpasses import GraphPass

    class Fanout(GraphPass):
        name = "fanout"
        kind = "analysis"

        def run(self, gm, ctx):
            ctx.analyses["fanout"] = {n.name: len(n.users) for n in gm.graph.nodes}
            return False

    seen = []

    class UsesFanout(GraphPass):
        name = "uses_fanout"
        kind = "analysis"
        requires = ("fanout",)

        def run(self, gm, ctx):
            seen.append(ctx.analyses["fanout"])
            return False

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) + 1

    for order in ("dependencies", "as-given"):
        seen.clear()
        report = Pipeline([Fanout, DropRelu, UsesFanout], order=order, registry=Registry(autoload=False)).run(
            torch.fx.symbolic_trace(M())
        )
        assert statuses(report) == [("fanout", "ok"), ("drop_relu", "ok"), ("fanout", "ok"), ("uses_fanout", "ok")], order
        assert report.passes[2].reasons == ["on demand: required by uses_fanout"]
        assert seen == [{"x": 1, "add": 1, "output": 0}], order  # of the graph without the relu


def test_a_requirement_no_pass_has_is_an_error_in_the_as_given_order_too():
    """With order="as-given" a misspelt `requires` was not reported; the pass then failed at
    run time on the missing result."""
    import pytest

    from fxpasses import GraphPass
    from fxpasses.errors import UnknownPassError

    class Typo(GraphPass):
        name = "typo"
        requires = ("propagate_shapez",)

        def run(self, gm, ctx):
            return False

    for order in ("dependencies", "as-given"):
        with pytest.raises(UnknownPassError, match=r"required by pass 'typo': unknown pass 'propagate_shapez'.*did you mean 'propagate_shapes'"):
            Pipeline([Typo], order=order).plan()


def test_the_run_report_hands_over_the_analyses_still_current():
    """An analysis hands its result over in `ctx.analyses[name]`, but nothing gave it to the
    caller after the run: a FLOPs count had to be fished out with an instrument (a pass-author
    check). `RunReport.analyses` holds the results still current when the run ended; one a
    later transform invalidated is not there (it no longer describes the graph)."""
    import json

    from fxpasses import GraphPass

    class CountCalls(GraphPass):
        name = "count_calls"
        kind = "analysis"

        def run(self, gm, ctx):
            ctx.analyses["count_calls"] = {"calls": sum(n.op.startswith("call_") for n in gm.graph.nodes)}
            return False

    reg = Registry()
    reg.register(CountCalls)
    reg.register(DropRelu)
    gm = capture(convnet().eval(), [torch.randn(1, 3, 8, 8)], "symbolic_trace").gm
    calls = sum(n.op.startswith("call_") for n in gm.graph.nodes)
    report = Pipeline(["propagate_shapes", "count_calls"], registry=reg).run(gm, [torch.randn(1, 3, 8, 8)])
    assert report.analyses == {"propagate_shapes": {"mode": "fake", "nodes_annotated": 15}, "count_calls": {"calls": calls}}
    assert json.loads(json.dumps(report.as_dict()))["analyses"] == ["count_calls", "propagate_shapes"]
    report = Pipeline(["count_calls", "drop_relu"], registry=reg, order="as-given").run(gm)
    assert report["drop_relu"].changed and report.analyses == {}  # invalidated by drop_relu


def test_a_required_pass_class_not_registered_is_named_with_how_to_make_it_found():
    """A pass class requiring another of one's own classes, unregistered, failed with "unknown
    pass 'my_an'" and nothing on how a requirement is found (a pass-author check)."""
    import pytest

    from fxpasses import GraphPass
    from fxpasses.errors import UnknownPassError

    class MyAn(GraphPass):
        name = "my_an"
        kind = "analysis"

        def run(self, gm, ctx):
            return False

    class MyTr(GraphPass):
        name = "my_tr"
        requires = ("my_an",)

        def run(self, gm, ctx):
            return False

    with pytest.raises(UnknownPassError) as info:
        Pipeline([MyTr])
    assert str(info.value).splitlines()[:2] == [
        "pipeline: required by pass 'my_tr': unknown pass 'my_an'",
        "(a required pass is looked up by name: register its class (fxpasses.registry().register(cls), or a "
        "plugin's fxpasses_register_passes), or give the class in the pipeline too)",
    ]
    Pipeline([MyAn, MyTr]).run(torch.fx.symbolic_trace(torch.nn.ReLU()))  # given as a class: found
