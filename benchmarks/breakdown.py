"""Where the built-in pipeline's time goes on the synthetic block graph (for profiling work).

    python benchmarks/breakdown.py [N_NODES | --model NAME] [--repeats R] [--cpu] [--profile [PASS] [--callees REGEX]]

Prints the median of R runs (``--cpu``: process CPU time, steadier on a busy machine) (fresh graph each) of: one Snapshot, one lint (as the pipeline
runs it), one recompile() of the input, each pass's own time from the run report (pass and
lint), and the whole pipeline. ``--profile`` prints cProfile's top functions for the whole
pipeline, or for one pass (run after the passes before it in the pipeline).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    ap = argparse.ArgumentParser(
        description="Where the built-in pipeline's time goes on the synthetic block graph (or an exported "
        "model): one Snapshot, one lint and one recompile() of the input for scale, each pass with its "
        "lint, the whole pipeline, and the ratio pipeline / recompile(). A profiling aid, not a benchmark."
    )
    ap.add_argument("n", type=int, nargs="?", default=100_000, help="nodes of the block graph (at least 21; default 100000)")
    ap.add_argument("--repeats", type=int, default=3, help="runs on fresh graphs, medians printed (at least 1; default 3)")
    ap.add_argument(
        "--profile",
        nargs="?",
        const="all",
        default=None,
        metavar="PASS",
        help="print cProfile's top functions for the whole pipeline, or, with PASS, for a pipeline of that "
        "pass alone run after the passes before it (its final recompile() included)",
    )
    ap.add_argument("--callees", metavar="REGEX", help="with --profile: also what the functions matching REGEX call")
    ap.add_argument(
        "--model",
        metavar="NAME",
        help='instead of the block graph, torch.export of a model of group 4 (e.g. "GPT-2 96x64"); N is ignored',
    )
    ap.add_argument("--cpu", action="store_true", help="process CPU time instead of wall time (steadier on a busy machine)")
    args = ap.parse_args()
    if args.n < 21 and not args.model:
        ap.error(f"n: {args.n} nodes is less than one block of the graph (21 nodes with its input and output)")
    if args.repeats < 1:
        ap.error(f"--repeats: {args.repeats}, at least 1 run is needed")
    if args.callees and not args.profile:
        ap.error("--callees needs --profile")
    clock = time.process_time if args.cpu else time.perf_counter
    warnings.simplefilter("ignore")

    import fxpasses
    from fxpasses.pipeline import _lint
    from fxpasses.snapshot import Snapshot

    from bench_pipeline import PIPELINE, block_pipeline
    from common import fmt_s, gc_paused
    from graphs import BlockModel, block_graph, n_blocks_for

    if args.model:
        import torch

        from bench_models import _models
        from common import Config

        found = {name: (factory, x) for name, factory, x in _models(Config.make(quick=False))}
        if args.model not in found:
            ap.error(f"--model: {args.model!r} is not one of {', '.join(map(repr, found))}")
        factory, x = found[args.model]
        exported = torch.export.export(factory(), (x,))
        fresh = exported.module
    else:
        model = BlockModel(n_blocks_for(args.n))
        fresh = lambda: block_graph(args.n, model=model, compile=False)  # noqa: E731
    pipe = block_pipeline(PIPELINE)
    if args.profile:
        gm = fresh()
        target = pipe
        if args.profile != "all":
            if args.profile not in PIPELINE:
                ap.error(f"--profile: {args.profile!r} is not a pass of the pipeline ({', '.join(PIPELINE)})")
            i = PIPELINE.index(args.profile)
            if i:
                block_pipeline(PIPELINE[:i]).run(gm)
            target = block_pipeline([args.profile])
        with gc_paused():
            pr = cProfile.Profile()
            pr.enable()
            target.run(gm)
            pr.disable()
        st = pstats.Stats(pr)
        st.sort_stats("cumulative").print_stats(40)
        st.sort_stats("tottime").print_stats(25)
        if args.callees:
            st.print_callees(args.callees)
        return

    rows: dict[str, list[float]] = {}

    def add(k: str, v: float) -> None:
        rows.setdefault(k, []).append(v)

    class Clock:
        """Instrument: each pass's time (pass + lint) on ``clock``."""

        def __init__(self) -> None:
            self.t0 = 0.0
            self.times: dict[str, float] = {}

        @fxpasses.hookimpl
        def fxpasses_before_pass(self, pass_name: str) -> None:
            self.t0 = clock()

        @fxpasses.hookimpl
        def fxpasses_after_pass(self, pass_name: str) -> None:
            self.times[pass_name] = clock() - self.t0

    for _ in range(args.repeats):
        gm = fresh()
        with gc_paused():
            t0 = clock()
            Snapshot(gm)
            add("one Snapshot(gm) (for scale: built-in passes journal)", clock() - t0)
            t0 = clock()
            _lint(gm)
            add("lint", clock() - t0)
            t0 = clock()
            gm.recompile()
            add("recompile() of the input", clock() - t0)
        gm = fresh()
        inst = Clock()
        with gc_paused():
            t0 = clock()
            rep = pipe.run(gm, instruments=[inst])
            whole = clock() - t0
            add("whole pipeline", whole)
        for name, secs in inst.times.items():
            add(f"  {name} (pass + lint)", secs)
        add("  (rest: journals, final recompile, reports)", whole - sum(inst.times.values()))
        nodes = (rep.nodes_before, rep.nodes_after)
    print(f"{nodes[0]:,} -> {nodes[1]:,} nodes, median of {args.repeats}{' (CPU time)' if args.cpu else ''}")
    for k, v in rows.items():
        print(f"{k:54s} {fmt_s(statistics.median(v)):>10s}")
    ratio = statistics.median(rows["whole pipeline"]) / statistics.median(rows["recompile() of the input"])
    print(f"{'pipeline / recompile':54s} {ratio:10.2f}x")


if __name__ == "__main__":
    main()
