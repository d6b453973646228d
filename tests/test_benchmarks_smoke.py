"""The benchmarks' graph builders and baselines stay valid (no timing here: benchmarks/run.py).

Runs the builders at a few hundred nodes: the synthetic graph is the graph symbolic_trace gives
for its model, every built-in pass has work to do on it, the pipeline preserves its outputs, and
the torch baselines and the dispatch variants compute the same thing.
"""

from __future__ import annotations

import os
import sys
import warnings

import pytest
import torch

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, BENCH)
    try:
        import bench_dispatch
        import bench_pipeline
        import graphs
        import torch_baselines

        yield graphs, torch_baselines, bench_dispatch, bench_pipeline
    finally:
        sys.path.remove(BENCH)


N = 300


def test_builder_matches_symbolic_trace(bench):
    graphs = bench[0]
    model = graphs.BlockModel(graphs.n_blocks_for(N))
    built = graphs.block_graph(N, model=model)
    traced = graphs.trace(model)
    spell = lambda gm: [(n.op, str(n.target), n.name, tuple(map(str, n.args))) for n in gm.graph.nodes]  # noqa: E731
    assert spell(built) == spell(traced)
    x = graphs.example_input()
    assert torch.equal(built(x), model(x))
    lazy = graphs.block_graph(N, model=model, compile=False)
    lazy.recompile()
    assert lazy.code == built.code


@pytest.mark.parametrize("compile", [True, False])
def test_pipeline_does_every_pass_and_keeps_outputs(bench, compile):
    import fxpasses

    graphs, _, _, bench_pipeline = bench
    model = graphs.BlockModel(graphs.n_blocks_for(N))
    gm = graphs.block_graph(N, model=model, compile=compile)
    x = graphs.example_input()
    nb = graphs.n_blocks_for(N)
    # numeric verification runs the module before the pipeline: only when it is compiled
    verify = "numeric" if compile else "lint"
    rep = bench_pipeline.block_pipeline(bench_pipeline.PIPELINE, verify=verify, atol=1e-4, rtol=1e-4).run(gm, [x])
    counters = {p.name: p.counters for p in rep.passes}
    assert counters["remove_dropout"]["removed"] == nb
    assert counters["fuse_conv_bn"]["fused"] == nb
    assert counters["simplify_algebra"] == {"simplified": 2 * nb, "input_guards": 1}  # specialize=true
    assert counters["fold_constants"]["folded"] == nb
    assert counters["eliminate_common_subexpressions"]["merged"] == 2 * nb
    assert counters["eliminate_dead_code"]["removed_nodes"] == 2 * nb
    assert len(gm.graph.nodes) == 9 * nb + 3  # a placeholder, the input guard, the output
    torch.testing.assert_close(gm(x), model(x), atol=1e-4, rtol=1e-4)
    for name, (what, left) in bench_pipeline.LEFTOVER.items():
        assert left(gm) == 0, f"{name}: {what} left"


def test_hand_written_pipeline_is_the_pipeline_less_the_input_guard(bench):
    """The group-2 floor does the pipeline's whole job: the same nodes (but the guard that
    simplify_algebra{specialize=true} adds) in the same order, and outputs
    identical to the pipeline's and close to the model's."""
    graphs, _, _, bench_pipeline = bench
    import hand_pipeline

    model = graphs.BlockModel(graphs.n_blocks_for(N))
    x = graphs.example_input()
    hand = hand_pipeline.hand_pipeline(graphs.block_graph(N, model=model))
    ours = graphs.block_graph(N, model=model)
    bench_pipeline.block_pipeline(bench_pipeline.PIPELINE).run(ours)
    # call_function/call_method targets compared; module and attribute paths are named apart
    shape = lambda gm: [(n.op, n.target if n.op in ("call_function", "call_method") else None) for n in gm.graph.nodes]  # noqa: E731
    ours_shape, hand_shape = shape(ours), shape(hand)
    guards = [i for i, n in enumerate(ours.graph.nodes) if getattr(n.target, "__name__", "") == "input_guard"]
    assert len(guards) == 1
    del ours_shape[guards[0]]
    assert ours_shape == hand_shape
    assert len(hand.graph.nodes) == 9 * graphs.n_blocks_for(N) + 2
    assert torch.equal(hand(x), ours(x))
    torch.testing.assert_close(hand(x), model(x), atol=1e-4, rtol=1e-4)
    for name, (what, left) in bench_pipeline.LEFTOVER.items():
        assert left(hand) == 0, f"{name}: {what} left"


def test_torch_baselines_keep_outputs(bench):
    graphs, tb, _, bench_pipeline = bench
    model = graphs.BlockModel(graphs.n_blocks_for(N))
    x = graphs.example_input()
    ref = model(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, eq in tb.EQUIVALENTS.items():
            if eq is None:
                continue
            out = eq[0](graphs.block_graph(N, model=model))
            torch.testing.assert_close(out(x), ref, atol=1e-4, rtol=1e-4, msg=name)
            what, left = bench_pipeline.LEFTOVER[name]
            if name != "fold_constants":  # torch leaves getitem nodes of its folded tuple
                assert left(out) == 0, f"{name}: {what} left by torch"
        for names in (bench_pipeline.TORCH_TRIO, bench_pipeline.PIPELINE):
            out = tb.run_pass_manager(list(names), graphs.block_graph(N, model=model))
            torch.testing.assert_close(out(x), ref, atol=1e-4, rtol=1e-4)
    # the shared model's leaf modules are never modified by any of them
    torch.testing.assert_close(model(x), ref)


def test_shape_baselines_and_propagate_shapes_record_the_same_layouts(bench):
    """Group 3's analyses: ShapeProp / FakeTensorProp and propagate_shapes in each mode
    annotate the same nodes with the same sizes, strides and dtypes (the check the benchmark
    makes before timing), and the counts the benchmark reports are those nodes."""
    graphs, tb, _, bench_pipeline = bench
    import fxpasses

    model = graphs.BlockModel(graphs.n_blocks_for(N))
    x = graphs.example_input(2)
    fresh = lambda: bench_pipeline._strip_shapes(graphs.block_graph(N, model=model))  # noqa: E731
    nodes = len(fresh().graph.nodes)
    for options, theirs, key in (
        ({"mode": "real"}, tb.shape_prop, "tensor_meta"),
        ({"mode": "real", "record_val": False}, tb.shape_prop, "tensor_meta"),
        ({"mode": "fake"}, tb.fake_tensor_prop, "val"),
    ):
        a, b = fresh(), fresh()
        report = fxpasses.Pipeline([("propagate_shapes", options)]).run(a, example_inputs=[x])
        n_theirs = theirs(b, x)
        assert n_theirs == bench_pipeline._recorded(key)(b) == nodes  # every node here has a tensor value
        assert bench_pipeline._recorded(key)(a) == nodes
        assert report.passes[0].counters["nodes_annotated"] == nodes
        for n, m in zip(a.graph.nodes, b.graph.nodes):
            assert bench_pipeline._layout(n.meta[key]) == bench_pipeline._layout(m.meta[key]), (options, n.name)
            assert ("val" in n.meta) == options.get("record_val", True), (options, n.name)
        out = a.graph.output_node().meta["tensor_meta"]
        assert tuple(out.shape) == tuple(model(x).shape)


def test_dispatch_variants_agree(bench):
    graphs, tb, bd, _ = bench
    model = graphs.BlockModel(graphs.n_blocks_for(N))
    x = graphs.example_input()
    ref = model(x)
    codes = []
    for fn in (bd.hand_loop, bd.run_node_pass):
        gm = graphs.block_graph(N, model=model, compile=False)
        fn(gm)
        gm.recompile()
        torch.testing.assert_close(gm(x), ref)
        codes.append(gm.code)
    assert codes[0] == codes[1]
    gm = graphs.block_graph(N, model=model)
    new = tb.transformer_module(gm)
    torch.testing.assert_close(new(x), ref)
    expected = len(gm.graph.nodes) - graphs.n_blocks_for(N)  # one x * 1 per block
    assert len(tb.transformer_graph(gm).nodes) == len(new.graph.nodes) == expected


def test_memory_benchmark_stub_runs_the_pipeline_recording_nothing(bench, monkeypatch):
    """bench_memory's "rollback off" stands in for what the pipeline records for rollback: it
    must offer what the pipeline calls, or the memory group fails at run time, and it must
    leave nothing recorded (the built-in passes journal, so a stub of Snapshot alone left the
    default run's six journals: the comparison measured the same run twice)."""
    graphs, _, _, bench_pipeline = bench
    sys.path.insert(0, BENCH)
    try:
        import bench_memory
    finally:
        sys.path.remove(BENCH)

    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", "0")  # as the benchmark runs (the suite checks journals)
    pipe = bench_pipeline.block_pipeline(bench_pipeline.PIPELINE)
    assert bench_memory._records(pipe, graphs.block_graph(N)) == {"Journal": len(bench_pipeline.PIPELINE), "Snapshot": 0}
    with bench_memory.rollback_off():
        gm = graphs.block_graph(N)
        assert bench_memory._records(pipe, gm) == {"Journal": 0, "Snapshot": 0}
    report = pipe.run(gm)  # (the stub is gone: a real run over what the stubbed one left)
    assert [p.status for p in report.passes] == ["ok"] * len(bench_pipeline.PIPELINE)
    gm = graphs.block_graph(N)
    with bench_memory.rollback_off():
        report = pipe.run(gm)
    assert [p.status for p in report.passes] == ["ok"] * len(bench_pipeline.PIPELINE)
    assert report.nodes_after < report.nodes_before


def test_interleaved_measurement_rotates_the_order_and_gives_each_its_own_setup(bench):
    """``common.measure_interleaved``: every round times each contender once, on a fresh setup,
    starting with a different one each round; a contender with fewer repeats drops out."""
    import common

    order: list[str] = []
    checked: list[tuple[str, int, int]] = []
    made = {"a": 0, "b": 0, "c": 0}

    def setup(name):
        def make():
            made[name] += 1
            return made[name]

        return make

    def run(name):
        def go(arg):
            order.append(name)
            return arg * 10

        return go

    def check(name):
        return lambda arg, out: checked.append((name, arg, out))

    runs = {k: common.Run(run(k), setup(k), check(k), repeats=2 if k == "c" else None) for k in "abc"}
    stats = common.measure_interleaved(runs, 4)
    assert order == ["a", "b", "c", "b", "c", "a", "a", "b", "a", "b"]
    assert [len(stats[k].times) for k in "abc"] == [4, 4, 2]
    assert all(t >= 0 for s in stats.values() for t in s.times)
    assert made == {"a": 4, "b": 4, "c": 2}
    assert [c for c in checked if c[0] == "a"] == [("a", i, 10 * i) for i in (1, 2, 3, 4)]
