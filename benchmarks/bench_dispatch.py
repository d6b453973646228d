"""1. Dispatch overhead: the same rewrite (``x * 1 -> x``) as an fxpasses ``NodePass``, a
hand-written in-place loop over ``graph.nodes`` and a ``torch.fx.Transformer`` subclass."""

from __future__ import annotations

import operator
import time
from typing import Any

import torch
import torch.fx
from torch.fx.node import Node

import fxpasses
from fxpasses import NodePass, Replace, on
from fxpasses.context import PassContext
from fxpasses.runner import run_pass

import torch_baselines as tb
from common import Config, Result, Run, Target, fmt_s, fmt_x, md_table, measure, measure_interleaved
from graphs import BlockModel, block_graph, n_blocks_for
from slow import run_limited

MULS = tb.MULS
PASS_SETUP_BUDGET_S = 20.0  # graph building allowed to the pass-only rounds of one size
PASS_MAX_ROUNDS = 61


class MulByOne(NodePass):
    """x * 1 -> x (the dispatch benchmark's rewrite), on the node kinds the hand loop visits."""

    name = "bench_mul_by_one"
    # what a pass that only rewires nodes declares (see fxpasses.Pass): no write guard, and
    # rollback from a journal of what it touches instead of a snapshot of the whole graph
    writes_tensors = False
    journal_edits = True

    @on("mul", op=("call_function", "call_method"))
    def mul(self, node: Node, ctx: PassContext) -> Any:
        a = node.args
        if len(a) == 2 and type(a[1]) is int and a[1] == 1 and isinstance(a[0], Node):
            return Replace(a[0])
        return None


class MulByOneAnyKind(NodePass):
    """x * 1 -> x subscribed with plain ``@on("mul")``: call_module nodes too (a module whose
    class is named ``Mul`` would match), so the runner looks up every called module's class."""

    name = "bench_mul_by_one_any_kind"

    @on("mul")
    def mul(self, node: Node, ctx: PassContext) -> Any:
        return MulByOne.mul(self, node, ctx)  # type: ignore[arg-type]


def hand_loop(gm: torch.fx.GraphModule) -> int:
    """The rewrite as most hand-written FX code does it: one walk over every node."""
    graph = gm.graph
    n = 0
    for node in graph.nodes:
        if (node.op == "call_function" and node.target in MULS) or (node.op == "call_method" and node.target == "mul"):
            a = node.args
            if len(a) == 2 and type(a[1]) is int and a[1] == 1 and isinstance(a[0], Node):
                node.replace_all_uses_with(a[0])
                graph.erase_node(node)
                n += 1
    return n


def run_node_pass(gm: torch.fx.GraphModule, cls: type[NodePass] = MulByOne) -> bool | None:
    """The pass's own time: the runner's dispatch and surgery, no snapshot/lint/recompile."""
    ctx = PassContext(gm, pass_name=cls.name, dialect="symbolic_trace")
    return run_pass(cls(), gm, ctx)


def run_node_pass_any_kind(gm: torch.fx.GraphModule) -> bool | None:
    return run_node_pass(gm, MulByOneAnyKind)


def run(cfg: Config) -> Result:
    res = Result("dispatch", "1. Dispatch overhead (x * 1 -> x)")
    res.add(
        "The same rewrite three ways on the synthetic block graph (`benchmarks/graphs.py`; one "
        "`x * 1` per 19-node block). **Pass only**: the transformation itself (fxpasses: "
        "`runner.run_pass`, i.e. the node index lookup, hook calls and surgery, with the hook "
        "subscribed as `@on(\"mul\", op=(\"call_function\", \"call_method\"))`, the node kinds "
        "the loop visits; a plain `@on(\"mul\")` also matches modules whose class is named "
        "`Mul`, so the runner resolves the class of every `call_module` node; Transformer: "
        "`Transformer.run` building the new graph, without the final `GraphModule`). "
        "**Whole run**: what a user calls, ready to run: `Pipeline([...]).run(gm)` (the pass "
        "declares `journal_edits`: a journal of what it touches for rollback, the pass, lint, one "
        "`recompile()`), the hand loop followed by `recompile()`, "
        "and `Transformer.transform()` (which builds and compiles a new `GraphModule`). "
        "Ratios are against the hand-written loop measured in the same run."
    )
    pass_rows, whole_rows = [], []
    targets: dict[str, float] = {}
    pipe = fxpasses.Pipeline([MulByOne], verify="none")
    pipe_lint = fxpasses.Pipeline([MulByOne])
    # warm-up (imports, first-call caches) on a tiny graph, for every variant alike
    for fn in (hand_loop, run_node_pass, run_node_pass_any_kind, tb.transformer_graph, tb.transformer_module, pipe.run, pipe_lint.run):
        fn(block_graph(100, compile=False))
    for n in cfg.sizes:
        reps = cfg.repeats_small if n <= 10_000 else cfg.repeats_big
        model = BlockModel(n_blocks_for(n))

        def fresh(compile: bool = False) -> torch.fx.GraphModule:
            return block_graph(n, model=model, compile=compile)

        def check_count(gm: Any, out: Any) -> None:
            left = sum(1 for x in gm.graph.nodes if x.target in MULS and x.args[1:] == (1,))
            assert left == 0, f"{left} x*1 nodes left"

        t0 = time.perf_counter()
        nodes = len(fresh().graph.nodes)
        build_s = time.perf_counter() - t0
        # A sub-millisecond timing moves with one scheduler tick on a shared machine (five
        # rounds at 1k nodes read 1.41x; 301 read 1.15x): take as many rounds as fit in
        # PASS_SETUP_BUDGET_S of graph building (three graphs a round), at most PASS_MAX_ROUNDS.
        pass_reps = reps
        if not cfg.quick:
            pass_reps = max(reps, min(PASS_MAX_ROUNDS, int(PASS_SETUP_BUDGET_S / (3 * build_s))))
        timed = measure_interleaved(
            {
                "loop": Run(hand_loop, fresh, check_count),
                "pass": Run(run_node_pass, fresh, check_count),
                "any": Run(run_node_pass_any_kind, fresh, check_count),
            },
            pass_reps,
        )
        loop, npass, npass_any = timed["loop"], timed["pass"], timed["any"]
        tr_reps = 1 if cfg.quick and n >= 10_000 else min(reps, 3)  # seconds each, 300x the rest
        if n <= 30_000:
            tr = measure(tb.transformer_graph, fresh, tr_reps)
            tr_s, tr_done = tr.median, True
            tr_txt = str(tr)
        else:
            tr_s, tr_done, _ = run_limited("transformer_graph", n, cfg.slow_timeout)
            tr_txt = fmt_s(tr_s) if tr_done else f"> {fmt_s(tr_s)} (stopped)"
        pass_rows.append(
            [
                f"{nodes:,}",
                str(loop),
                str(npass),
                str(npass_any),
                tr_txt,
                fmt_x(npass.median / loop.median),
                fmt_x(npass_any.median / loop.median),
                fmt_x(tr_s / npass.median, lower_bound=not tr_done),
            ]
        )
        targets[f"np_vs_loop_{n}"] = npass.median / loop.median
        targets[f"tr_vs_np_{n}"] = tr_s / npass.median
        targets[f"tr_done_{n}"] = float(tr_done)

        # whole runs
        timed = measure_interleaved(
            {
                "loop": Run(lambda gm: (hand_loop(gm), gm.recompile()), fresh, check_count),
                "none": Run(lambda gm: pipe.run(gm), fresh, check_count),
                "lint": Run(lambda gm: pipe_lint.run(gm), fresh, check_count),
            },
            reps,
        )
        loop_rc, whole, whole_lint = timed["loop"], timed["none"], timed["lint"]
        if n <= 30_000:
            trm = measure(tb.transformer_module, fresh, tr_reps)
            trm_s, trm_done, trm_txt = trm.median, True, str(trm)
        else:  # transform() = the graph-only run + a new compiled GraphModule: not run again
            trm_s, trm_done = tr_s, False
            trm_txt = f"> {fmt_s(tr_s)} (its graph-only part)"
        whole_rows.append(
            [
                f"{nodes:,}",
                str(loop_rc),
                str(whole),
                str(whole_lint),
                trm_txt,
                fmt_x(whole.median / loop_rc.median),
                fmt_x(whole_lint.median / loop_rc.median),
                fmt_x(trm_s / whole_lint.median, lower_bound=not trm_done),
            ]
        )
        del model
    res.add("**Pass only** (median of repeats; n, min-max)")
    res.add(
        md_table(
            [
                "nodes",
                "hand loop",
                "NodePass",
                "NodePass, plain @on(\"mul\")",
                "Transformer",
                "NodePass / loop",
                "plain @on / loop",
                "Transformer / NodePass",
            ],
            pass_rows,
        )
    )
    res.add("**Whole run** (ready-to-run module)")
    res.add(
        md_table(
            [
                "nodes",
                "loop + recompile",
                "Pipeline verify=none",
                "Pipeline verify=lint",
                "Transformer.transform()",
                "none / loop",
                "lint / loop",
                "Transformer / lint",
            ],
            whole_rows,
        )
    )
    for n in cfg.sizes:
        r = targets[f"np_vs_loop_{n}"]
        res.targets.append(Target(f"dispatch {n:,} nodes: NodePass / hand loop", r, "<= 1.2x", r <= 1.2))
    for n in cfg.sizes:
        r = targets[f"tr_vs_np_{n}"]
        lb = not targets[f"tr_done_{n}"]
        res.targets.append(
            Target(
                f"dispatch {n:,} nodes: Transformer / NodePass",
                r,
                ">= 10x",
                r >= 10,
                "lower bound (Transformer stopped)" if lb else "",
            )
        )
    return res
