"""2. The built-in pipeline vs torch's PassManager and one recompile(); 3. each built-in pass
vs torch's equivalent; 5. scaling from the small to the big graph."""

from __future__ import annotations

import contextlib
import operator
import time
import warnings
from typing import Any, Callable, Iterator

import torch
import torch.fx

import fxpasses
from fxpasses.builtin_passes import BUILTIN_PRESETS
from fxpasses.spec import parse_pipeline_string

import torch_baselines as tb
from common import Config, Result, Run, Stat, Target, fmt_s, fmt_x, gc_paused, md_table, measure, measure_interleaved
from graphs import BlockModel, block_graph, n_blocks_for
from hand_pipeline import hand_pipeline
from slow import run_limited

#: the built-in "inference" preset, the pipeline `fxpasses run` uses by default, and its passes
INFERENCE = BUILTIN_PRESETS["inference"][0]
PIPELINE = [e.name for e in parse_pipeline_string(INFERENCE)]


#: options of the passes on the block graph. It is a symbolic_trace graph with recorded shapes
#: (``tensor_meta``, as ``ShapeProp`` records them), which hold for every input only once the
#: input is checked: ``simplify_algebra`` makes its shape-dependent rewrites (``x * 1 -> x``)
#: there with ``specialize=true`` (one input guard), as a user of such a graph would run it
BLOCK_OPTIONS: dict[str, dict[str, Any]] = {"simplify_algebra": {"specialize": True}}


def block_pipeline(names: list[str], **kwargs: Any) -> fxpasses.Pipeline:
    """``fxpasses.Pipeline(names)`` with :data:`BLOCK_OPTIONS` for the passes among ``names``."""
    options = {k: v for k, v in BLOCK_OPTIONS.items() if k in names}
    return fxpasses.Pipeline(names, options=options, **kwargs) if options else fxpasses.Pipeline(names, **kwargs)


def inference_pipeline(**kwargs: Any) -> fxpasses.Pipeline:
    """The ``inference`` preset with its options (``fold_constants`` folds parameters; the
    names in :data:`PIPELINE` alone fold them only in an eval-mode module, and
    ``torch.export``'s ``.module()`` always says training)."""
    return fxpasses.Pipeline.from_string(INFERENCE, **kwargs)
TORCH_TRIO = ["remove_dropout", "eliminate_common_subexpressions", "eliminate_dead_code"]


def run_pipeline(names: list[str]) -> Callable[[torch.fx.GraphModule], Any]:
    pipe = block_pipeline(names)

    def go(gm: torch.fx.GraphModule) -> Any:
        return pipe.run(gm)

    return go


class _Sizes:
    """Fresh graphs of one size around one shared model (see graphs.block_graph)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.model = BlockModel(n_blocks_for(n))

    def fresh(self, compile: bool = False) -> torch.fx.GraphModule:
        return block_graph(self.n, model=self.model, compile=compile)

    def compiled(self) -> torch.fx.GraphModule:
        return self.fresh(True)


def _nodes_after(store: list[int]) -> Callable[[Any, Any], None]:
    def check(gm: Any, out: Any) -> None:
        m = out if isinstance(out, torch.fx.GraphModule) else gm
        store.append(len(m.graph.nodes))

    return check


# --------------------------------------------------------------------------- leftovers

def _is_dropout(gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
    if n.op == "call_module":
        return isinstance(gm.get_submodule(n.target), torch.nn.modules.dropout._DropoutNd)
    return n.op == "call_function" and "dropout" in getattr(n.target, "__name__", "")


def _is_bn(gm: torch.fx.GraphModule, n: torch.fx.Node) -> bool:
    return n.op == "call_module" and isinstance(gm.get_submodule(n.target), torch.nn.modules.batchnorm._BatchNorm)


def _constant_calls(gm: torch.fx.GraphModule) -> int:
    const: set[torch.fx.Node] = set()
    count = 0
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            const.add(n)
        elif n.op in ("call_function", "call_method", "call_module"):
            ins = n.all_input_nodes
            if ins and all(i in const for i in ins):
                const.add(n)
                count += 1
    return count


def _duplicates(gm: torch.fx.GraphModule) -> int:
    seen: set[Any] = set()
    dup = 0
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method", "call_module"):
            continue
        try:
            key = (n.op, n.target, n.args, tuple(sorted(n.kwargs.items())))
            if key in seen:
                dup += 1
            seen.add(key)
        except TypeError:
            pass
    return dup


def _dead(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if not n.users and n.op not in ("output", "placeholder") and not n.is_impure())


def _is_int(rest: tuple[Any, ...], value: int) -> bool:
    return len(rest) == 1 and type(rest[0]) is int and rest[0] == value


#: what is left of each pass's job after it ran (0: all done)
LEFTOVER: dict[str, tuple[str, Callable[[torch.fx.GraphModule], int]]] = {
    "remove_dropout": ("dropout nodes", lambda gm: sum(_is_dropout(gm, n) for n in gm.graph.nodes)),
    "fuse_conv_bn": ("batch-norm nodes", lambda gm: sum(_is_bn(gm, n) for n in gm.graph.nodes)),
    "simplify_algebra": (
        "x*1 / x-0 nodes",
        lambda gm: sum(
            1
            for n in gm.graph.nodes
            if (n.target is operator.mul and _is_int(n.args[1:], 1)) or (n.target is operator.sub and _is_int(n.args[1:], 0))
        ),
    ),
    "fold_constants": ("run-time ops on constants only", _constant_calls),
    "eliminate_common_subexpressions": ("duplicate nodes", _duplicates),
    "eliminate_dead_code": ("unused pure nodes", _dead),
}


# --------------------------------------------------------------------------- where the time goes

@contextlib.contextmanager
def _timing_parts(parts: dict[str, float]) -> Iterator[None]:
    """Add the time spent in each safety step of a pipeline run to ``parts`` (wall clock):
    ``snapshot`` (``Snapshot()`` or ``Journal()`` before each pass; what a journal records
    while the pass runs is part of the pass's time), ``check`` (after each pass: which tensors
    moved, whether anything changed), ``lint`` and ``recompile``."""
    import fxpasses.journal as jn
    import fxpasses.pipeline as pl
    import fxpasses.snapshot as sn

    patched = [
        (sn.Snapshot, "__init__", "snapshot"),
        (jn.Journal, "__init__", "snapshot"),
        (jn.Journal, "changed", "check"),
        (sn.Snapshot, "pass_done", "check"),
        (sn.Snapshot, "changed", "check"),
        (pl, "_lint", "lint"),
        (torch.fx.GraphModule, "recompile", "recompile"),
    ]
    saved = [(obj, name, obj.__dict__[name]) for obj, name, _ in patched]

    def timed(fn: Callable[..., Any], key: str) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                parts[key] = parts.get(key, 0.0) + time.perf_counter() - t0

        return wrapper

    for (obj, name, key), (_, _, fn) in zip(patched, saved):
        setattr(obj, name, timed(fn, key))
    try:
        yield
    finally:
        for obj, name, fn in saved:
            setattr(obj, name, fn)


def where_time_goes(sz: "_Sizes", repeats: int, recompile_s: float) -> list[list[str]]:
    """Rows of the built-in pipeline's time split into the passes' own work and each safety
    step (medians over ``repeats`` fresh graphs), each as a ratio to one ``recompile()`` of
    the input (``recompile_s``)."""
    pipe = block_pipeline(PIPELINE)
    runs: dict[str, list[float]] = {}
    for _ in range(repeats):
        gm = sz.fresh()
        parts: dict[str, float] = {}
        with gc_paused(), _timing_parts(parts):
            t0 = time.perf_counter()
            rep = pipe.run(gm)
            whole = time.perf_counter() - t0
        in_reports = sum(p.seconds for p in rep.passes)  # pass, checks, lint
        parts["passes"] = in_reports - parts.get("check", 0.0) - parts.get("lint", 0.0)
        parts["rest"] = whole - in_reports - parts.get("snapshot", 0.0) - parts.get("recompile", 0.0)
        parts["whole"] = whole
        parts["floor"] = parts["passes"] + parts.get("recompile", 0.0)
        for k, v in parts.items():
            runs.setdefault(k, []).append(v)
    labels = [
        ("passes", "the passes' own work (with what their journals record)"),
        ("snapshot", "rollback snapshot or journal before each pass"),
        ("check", "after each pass: tensors moved? anything changed?"),
        ("lint", "lint after each pass"),
        ("recompile", "the one final recompile()"),
        ("rest", "the rest (freeing the journals' records, instruments, reports)"),
        ("whole", "whole pipeline"),
        ("floor", "the passes' own work + the final recompile() (no snapshot or journal, no lint)"),
    ]
    rows = []
    for key, label in labels:
        if key not in runs:  # (the built-in passes report their changes: nothing to compare)
            rows.append([label, "not run", "-"])
            continue
        m = _median(runs[key]) or 0.0
        rows.append([label, fmt_s(m), fmt_x(m / recompile_s)])
    return rows


# --------------------------------------------------------------------------- 2 + 5

def run_pipeline_group(cfg: Config) -> tuple[Result, Result]:
    res = Result("pipeline", "2. The built-in pipeline vs torch's PassManager and one recompile()")
    scale = Result("scaling", "5. Scaling (small -> big graph)")
    big, small = _Sizes(cfg.big), _Sizes(cfg.small)
    pipe_all = run_pipeline(PIPELINE)
    rows = []
    per_pass: dict[int, dict[str, list[float]]] = {}
    stats: dict[int, Stat] = {}
    recompiles: dict[int, float] = {}
    nodes: dict[int, tuple[int, int]] = {}
    for sz, reps in ((small, cfg.repeats_small), (big, cfg.repeats_big)):
        after: list[int] = []
        passes: dict[str, list[float]] = {}

        def go(gm: torch.fx.GraphModule, _after: list[int] = after, _passes: dict = passes) -> Any:
            rep = pipe_all(gm)
            for p in rep.passes:
                _passes.setdefault(p.name, []).append(p.seconds)
            return rep

        before = len(sz.fresh().graph.nodes)
        hand_after: list[int] = []
        timed = measure_interleaved(
            {
                "pipeline": Run(go, sz.fresh, _nodes_after(after)),
                "recompile": Run(lambda gm: gm.recompile(), sz.fresh),
                "hand": Run(hand_pipeline, sz.fresh, _nodes_after(hand_after)),
            },
            reps,
        )
        st, rc, hand = timed["pipeline"], timed["recompile"], timed["hand"]
        stats[sz.n] = st
        recompiles[sz.n] = rc.median
        per_pass[sz.n] = passes
        nodes[sz.n] = (before, after[-1])
        rows.append(
            [
                f"{before:,}",
                f"{after[-1]:,}",
                str(st),
                str(rc),
                fmt_x(st.median / rc.median),
                f"{str(hand)}, {hand_after[-1]:,} nodes",
                fmt_x(hand.median / rc.median),
                fmt_x(st.median / hand.median),
            ]
        )
        if sz is big:
            big_ratio = st.median / rc.median
            big_recompile = rc.median
            big_hand = hand.median / rc.median
    res.add(
        "The built-in pipeline (`" + ",".join(PIPELINE) + "`, with `simplify_algebra{specialize=true}`: the "
        "block graph is a `symbolic_trace` graph whose shapes hold only for inputs like the example, which "
        "that option checks; default `verify=lint`, "
        "`on_error=rollback`: every built-in pass declares `journal_edits`, so a journal of what it "
        "touches before and a lint of what it touched after each pass (the first lint of the run "
        "looks at the whole graph), one "
        "`recompile()` at the end) against one `GraphModule.recompile()` of the input graph "
        "(the cost every FX transformation pays at least once). *Hand-written*: the same rewrites "
        "written for this graph alone (`benchmarks/hand_pipeline.py`: one loop per rewrite, "
        "torch's `fuse_conv_bn_weights` and `Graph.eliminate_dead_code`, one `recompile()`; no "
        "effect analysis, shape proofs, storage bound, journal or lint, so wrong on other graphs; "
        "its output is the pipeline's less the one input guard): the floor under any general pass "
        "infrastructure, and *pipeline / hand-written* what generality and safety cost on top of it."
    )
    res.add(
        md_table(
            [
                "nodes",
                "after",
                "fxpasses pipeline",
                "one recompile()",
                "pipeline / recompile",
                "hand-written",
                "hand-written / recompile",
                "pipeline / hand-written",
            ],
            rows,
        )
    )
    res.targets.append(Target(f"pipeline {cfg.big:,} nodes / one recompile()", big_ratio, "<= 1.5x", big_ratio <= 1.5))
    parts = where_time_goes(big, cfg.repeats_big, big_recompile)
    res.add(
        f"Where the time goes on {nodes[cfg.big][0]:,} nodes (medians of {cfg.repeats_big} more "
        "runs, each step timed where the pipeline calls it). The last row is what the pipeline "
        "would cost with no safety at all: the passes' own work and the one `recompile()` "
        "every transformation needs."
    )
    res.add(md_table(["part", "time", "/ one recompile()"], parts))
    floor = parts[-1][2]
    res.targets[-1].note = f"without journals and lint: {floor}; hand-written for this graph: {fmt_x(big_hand)}"

    # torch's PassManager at the small size (in process) and the big one (limited subprocess)
    pm_rows = []
    for label, names in (("dropout + CSE + DCE", TORCH_TRIO), ("all equivalents", PIPELINE)):
        ours_after: list[int] = []
        theirs_after: list[int] = []
        reps = max(1, cfg.repeats_small - 2) if names is TORCH_TRIO else max(1, cfg.repeats_small - 3)
        timed = measure_interleaved(
            {
                "ours": Run(run_pipeline(names), small.fresh, _nodes_after(ours_after)),
                "theirs": Run(
                    lambda gm, _names=names: tb.run_pass_manager(_names, gm),
                    small.compiled,
                    _nodes_after(theirs_after),
                    repeats=reps,
                ),
            },
            cfg.repeats_small,
        )
        ours, theirs = timed["ours"], timed["theirs"]
        r = theirs.median / ours.median
        torch_names = [n for n in names if tb.EQUIVALENTS.get(n) is not None]
        pm_rows.append(
            [
                f"{nodes[cfg.small][0]:,}",
                label,
                str(ours),
                f"{ours_after[-1]:,}",
                str(theirs),
                f"{theirs_after[-1]:,}",
                fmt_x(r),
            ]
        )
        if names is TORCH_TRIO:
            res.targets.append(
                Target(f"{cfg.small:,} nodes: torch PassManager (dropout, CSE, DCE) / fxpasses", r, ">= 15x", r >= 15)
            )
        _ = torch_names
    big_pm = (("dropout + CSE + DCE", "pm_dropout_cse_dce", TORCH_TRIO),)  # the rest only adds time
    for label, kind, names in big_pm if cfg.slow_timeout > 0 else ():
        ours = measure(run_pipeline(names), big.fresh, 1)
        secs, done, extra = run_limited(kind, cfg.big, cfg.slow_timeout)
        pm_rows.append(
            [
                f"{nodes[cfg.big][0]:,}",
                label,
                str(ours),
                "",
                fmt_s(secs) if done else f"> {fmt_s(secs)} (stopped)",
                f"{extra.get('nodes_after', ''):,}" if done else "",
                fmt_x(secs / ours.median, lower_bound=not done),
            ]
        )
    res.add(
        "torch's `PassManager` (it recompiles after every pass) running torch's equivalents "
        "(see `benchmarks/torch_baselines.py`; simplify_algebra has none), against an fxpasses "
        "pipeline of the same passes. "
        + (
            f"On the big graph torch runs once in a subprocess and is stopped after "
            f"{cfg.slow_timeout:.0f} s (its remove_dropout re-traces the module and grows "
            "superlinearly): the ratio is then a lower bound."
            if cfg.slow_timeout > 0
            else "(The quick run skips the big graph, where torch takes minutes.)"
        )
    )
    res.add(
        md_table(
            ["nodes", "passes", "fxpasses", "nodes after", "torch PassManager", "nodes after", "torch / fxpasses"],
            pm_rows,
        )
    )

    # 5. scaling
    ratio = stats[cfg.big].median / stats[cfg.small].median
    node_ratio = nodes[cfg.big][0] / nodes[cfg.small][0]
    srows = [["whole pipeline", fmt_s(stats[cfg.small].median), fmt_s(stats[cfg.big].median), fmt_x(ratio)]]
    for name in PIPELINE:
        a = _median(per_pass[cfg.small].get(name, []))
        b = _median(per_pass[cfg.big].get(name, []))
        srows.append([name, fmt_s(a), fmt_s(b), fmt_x(b / a) if a and b else "-"])
    scale.add(
        f"Pipeline time on {nodes[cfg.small][0]:,} vs {nodes[cfg.big][0]:,} nodes "
        f"({node_ratio:.1f}x the nodes), from the runs of group 2; per pass: the pass's own "
        "time from the run report (pass, verification)."
    )
    scale.add(md_table(["", f"{cfg.small:,} nodes", f"{cfg.big:,} nodes", "time ratio"], srows))
    bound = 12 * node_ratio / 10
    rc_ratio = recompiles[cfg.big] / recompiles[cfg.small]
    scale.add(
        f"For comparison, one `recompile()` of the input took {rc_ratio:.1f}x as long on the big "
        "graph as on the small one in the same run: even linear walks slow down per node once "
        "the graph no longer fits in the CPU caches."
    )
    scale.targets.append(
        Target(
            f"scaling {cfg.small:,} -> {cfg.big:,} nodes ({node_ratio:.1f}x nodes)",
            ratio,
            f"<= {bound:.1f}x",
            ratio <= bound,
            f"one recompile(): {rc_ratio:.1f}x",
        )
    )
    _exported_scaling(cfg, scale)
    return res, scale


def _exported_scaling(cfg: Config, scale: Result) -> None:
    """Scaling on a real model's graphs, which the block graph cannot show: a deep residual
    conv net (``examples/models.py``'s ``deep_convnet``) of 4x the blocks, under the
    ``inference`` preset as ``torch.export`` captures it, and under the ``training`` preset
    as ``symbolic_trace`` does. Export graphs hold every parameter and buffer as a
    ``get_attr`` node, which torch.fx indexes by op only: a per-node lookup by target there
    was quadratic (``fuse_conv_bn`` took 86% of a 50k-node pipeline). The training preset
    counts every batch norm module as writing its statistics: its CSE scanned all of them
    for each module call (8.9 s of a 9.1 s pipeline at 16k nodes)."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
    import models  # examples/models.py

    small_b, big_b = (60, 240) if cfg.quick else (250, 1000)
    x = torch.randn(1, 8, 8, 8, generator=torch.Generator().manual_seed(0))
    cases = (
        ("inference preset, torch.export", inference_pipeline(), "export"),
        ("training preset, symbolic_trace", fxpasses.Pipeline.from_preset("training"), "symbolic_trace"),
    )
    rows = []
    for label, pipe, dialect in cases:
        medians, counts, recompiles = {}, {}, {}
        for blocks in (small_b, big_b):
            model = models.deep_convnet(blocks)
            if dialect == "export":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fresh = torch.export.export(model, (x,)).module
            else:
                fresh = lambda model=model: torch.fx.symbolic_trace(model)  # noqa: E731
            counts[blocks] = len(fresh().graph.nodes)
            timed = measure_interleaved(
                {"pipeline": Run(lambda gm: pipe.run(gm), fresh), "recompile": Run(lambda gm: gm.recompile(), fresh)},
                cfg.repeats_small,
            )
            medians[blocks], recompiles[blocks] = timed["pipeline"], timed["recompile"]
            del fresh, model
        ratio = medians[big_b].median / medians[small_b].median
        node_ratio = counts[big_b] / counts[small_b]
        rc_ratio = recompiles[big_b].median / recompiles[small_b].median
        rows.append([label, f"{counts[small_b]:,} -> {counts[big_b]:,}", str(medians[small_b]), str(medians[big_b]), fmt_x(ratio), fmt_x(rc_ratio)])
        bound = 12 * node_ratio / 10
        scale.targets.append(
            Target(
                f"scaling, conv net ({label}) {counts[small_b]:,} -> {counts[big_b]:,} nodes ({node_ratio:.1f}x nodes)",
                ratio,
                f"<= {bound:.1f}x",
                ratio <= bound,
                f"one recompile(): {rc_ratio:.1f}x",
            )
        )
    scale.add(
        f"On a real model's graphs: `deep_convnet` (`examples/models.py`: residual conv-bn-relu blocks, "
        f"width 8) of {small_b} and {big_b} blocks, captured once per size (`torch.export`; `symbolic_trace` "
        "for each repeat), every repeat on a fresh module, timed interleaved with one `recompile()` of it."
    )
    scale.add(
        md_table(
            ["pipeline, capture", "nodes", f"{small_b} blocks", f"{big_b} blocks", "time ratio", "one recompile(): ratio"],
            rows,
        )
    )


def _median(xs: list[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


# --------------------------------------------------------------------------- 3

def run_per_pass(cfg: Config) -> Result:
    res = Result("per_pass", "3. Each built-in pass vs torch's equivalent")
    sz = _Sizes(cfg.small)
    rows = []
    nodes0 = len(sz.fresh().graph.nodes)
    for name in PIPELINE:
        eq = tb.EQUIVALENTS[name]
        ours_after: list[int] = []
        ours_left: list[int] = []
        own: list[float] = []
        pipe = block_pipeline([name])

        def ours_run(gm: torch.fx.GraphModule, _own: list[float] = own) -> Any:
            rep = pipe.run(gm)
            _own.append(rep.passes[0].seconds)
            return gm

        what, left_fn = LEFTOVER[name]

        def ours_check(gm: Any, out: Any, _a: list[int] = ours_after, _l: list[int] = ours_left, _f: Any = left_fn) -> None:
            _a.append(len(out.graph.nodes))
            _l.append(_f(out))

        if eq is None:
            ours = measure(ours_run, sz.fresh, cfg.repeats_small, ours_check)
            rows.append(
                [name, "(none)", str(ours), "-", "-", f"{nodes0 - ours_after[-1]:,}", "-", f"{ours_left[-1]} / -", what]
            )
            res.targets.append(Target(f"{name} vs torch", None, "no slower, >= nodes", None, "torch has no equivalent"))
            continue
        fn, tname = eq
        theirs_after: list[int] = []
        theirs_left: list[int] = []

        def theirs_check(gm: Any, out: Any, _a: list[int] = theirs_after, _l: list[int] = theirs_left, _f: Any = left_fn) -> None:
            _a.append(len(out.graph.nodes))
            _l.append(_f(out))

        setup = sz.compiled if name == "remove_dropout" else sz.fresh
        reps = max(1, cfg.repeats_small - 2) if name == "remove_dropout" else cfg.repeats_small
        timed = measure_interleaved(
            {"ours": Run(ours_run, sz.fresh, ours_check), "theirs": Run(fn, setup, theirs_check, repeats=reps)},
            cfg.repeats_small,
        )
        ours, theirs = timed["ours"], timed["theirs"]
        ratio = ours.median / theirs.median
        ours_removed = nodes0 - ours_after[-1]
        theirs_removed = nodes0 - theirs_after[-1]
        rows.append(
            [
                name,
                tname,
                str(ours),
                str(theirs),
                fmt_x(ratio),
                f"{ours_removed:,}",
                f"{theirs_removed:,}",
                f"{ours_left[-1]} / {theirs_left[-1]}",
                what,
            ]
        )
        ok = ratio <= 1.0 and ours_left[-1] <= theirs_left[-1]
        res.targets.append(
            Target(
                f"{name}: time fxpasses / torch",
                ratio,
                "<= 1x, job done at least as fully",
                ok,
                f"left undone: {ours_left[-1]} vs torch {theirs_left[-1]} {what}",
            )
        )
    res.add(
        f"Each pass alone on the fresh {nodes0:,}-node block graph, as a user runs it, output ready "
        "to run: fxpasses `Pipeline([name]).run(gm)` (a journal of what the pass touches, for rollback; the "
        "pass; lint; one `recompile()`); "
        "torch's function (those that build a new `GraphModule` compile it; "
        "`eliminate_dead_code` is followed by `recompile()`). *Left undone* counts what the pass "
        "is for that remains in its output (e.g. dropout nodes after dropout removal); *nodes "
        "removed* counts every node either removes, including side effects: torch's "
        "`remove_dropout` re-traces the module, which evaluates the buffer arithmetic "
        "(`scale * 2 + 1`) into constants, and `split_const_subgraphs` drops dead code (that is "
        "`eliminate_dead_code`'s job in fxpasses)."
    )
    res.add(
        md_table(
            [
                "pass",
                "torch equivalent",
                "fxpasses",
                "torch",
                "fxpasses / torch",
                "nodes removed (fxpasses)",
                "nodes removed (torch)",
                "left undone (fxpasses / torch)",
                "of",
            ],
            rows,
        )
    )
    _shape_analyses(cfg, res)
    return res


def _strip_shapes(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Forget what the capture recorded (``val``, ``tensor_meta``): each side records it anew."""
    for n in gm.graph.nodes:
        n.meta.pop("val", None)
        n.meta.pop("tensor_meta", None)
    return gm


def _layout(value: Any) -> Any:
    """What to compare of a recorded ``tensor_meta`` or ``val``: a ``TensorMetadata`` as it is
    (both sides run under ``no_grad``: ``torch_baselines.shape_prop``), a tensor's sizes,
    strides and dtype; tuples and lists of them."""
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.stride(), value.dtype)
    if isinstance(value, (tuple, list)):
        return tuple(_layout(v) for v in value)
    return value


def _recorded(key: str) -> Callable[[torch.fx.GraphModule], int]:
    """A counter of the nodes with something (not None) under ``meta[key]`` after a run."""

    def count(gm: torch.fx.GraphModule) -> int:
        return sum(1 for n in gm.graph.nodes if key in n.meta and n.meta[key] is not None)

    return count


def _shape_analyses(cfg: Config, res: Result) -> None:
    """propagate_shapes against torch's ShapeProp (real run) and FakeTensorProp (fake run), on
    the small block graph and an exported GPT-2: time, nodes annotated, and (untimed) that what
    both record (``tensor_meta``; ``val``'s sizes, strides and dtypes) is torch's, node for node."""
    from bench_models import _models
    from graphs import example_input

    gpt = "GPT-2 2x128" if cfg.quick else "GPT-2 96x64"
    factory, tokens = next((f, x) for name, f, x in _models(cfg) if name == gpt)
    exported = torch.export.export(factory(), (tokens,))
    block_model = BlockModel(n_blocks_for(cfg.small))
    graphs: list[tuple[str, Callable[[], torch.fx.GraphModule], torch.Tensor]] = [
        (f"block graph {cfg.small:,}", lambda: _strip_shapes(block_graph(cfg.small, model=block_model)), example_input(2)),
        (f"{gpt} (torch.export)", lambda: _strip_shapes(exported.module()), tokens),
    ]
    rows = []
    for label, fresh, x in graphs:
        nodes = len(fresh().graph.nodes)
        # (label, options, torch's equivalent, its name, the key both record, same job as torch's)
        for mode, options, theirs_fn, tname, key, same_job in (
            ("real", {"mode": "real"}, tb.shape_prop, "ShapeProp", "tensor_meta", False),
            ("real, record_val=false", {"mode": "real", "record_val": False}, tb.shape_prop, "ShapeProp", "tensor_meta", True),
            ("fake", {"mode": "fake"}, tb.fake_tensor_prop, "FakeTensorProp", "val", True),
        ):
            pipe = fxpasses.Pipeline([("propagate_shapes", options)])
            count = _recorded(key)
            ours_n: list[int] = []
            theirs_n: list[int] = []
            # untimed: a first run of each (warm-up: first-call caches of fake tensors, which
            # both sides share), and the same metadata as torch's, node for node
            a, b = fresh(), fresh()
            pipe.run(a, example_inputs=[x])
            theirs_fn(b, x)
            mismatch = [n.name for n, m in zip(a.graph.nodes, b.graph.nodes) if _layout(n.meta.get(key)) != _layout(m.meta.get(key))]
            assert not mismatch, f"{label}: meta[{key!r}] differs from {tname}'s at {mismatch[:5]}"
            reps = cfg.repeats_small if mode != "fake" else max(2, cfg.repeats_small - 2)
            timed = measure_interleaved(
                {
                    "ours": Run(
                        lambda gm, _p=pipe, _x=x: _p.run(gm, example_inputs=[_x]),
                        fresh,
                        lambda gm, out, _c=count, _l=ours_n: _l.append(_c(gm)),
                    ),
                    "theirs": Run(
                        lambda gm, _f=theirs_fn, _x=x: _f(gm, _x),
                        fresh,
                        lambda gm, out, _c=count, _l=theirs_n: _l.append(_c(gm)),
                    ),
                },
                reps,
            )
            ours, theirs = timed["ours"], timed["theirs"]
            ratio = ours.median / theirs.median
            rows.append(
                [label, f"{nodes:,}", mode, tname, str(ours), str(theirs), fmt_x(ratio), f"{ours_n[-1]:,} / {theirs_n[-1]:,}"]
            )
            annotated = f"nodes with meta[{key!r}]: {ours_n[-1]:,} vs torch {theirs_n[-1]:,}"
            res.targets.append(
                Target(
                    f"propagate_shapes {mode}, {label}: time fxpasses / {tname}",
                    ratio,
                    "<= 1x, job done at least as fully" if same_job else "- (more job: meta['val'] too)",
                    (ratio <= 1.0 and ours_n[-1] >= theirs_n[-1]) if same_job else None,
                    annotated if same_job else f"{annotated}; a fake tensor per node besides, which ShapeProp does not make",
                )
            )
    res.add(
        "**Analyses**: `propagate_shapes` as a user runs it, `Pipeline([(\"propagate_shapes\", "
        "{\"mode\": ...})]).run(gm, example_inputs=[x])` (snapshot, the pass, the check that an "
        "analysis changed nothing), against torch's nearest equivalent on the same fresh graph "
        "(what the capture recorded removed first, on both sides). `mode=\"real\"` runs the graph "
        "like `ShapeProp(gm).propagate(x)` (here under `no_grad`, as propagate_shapes runs) and records the same `tensor_meta` (checked node for "
        "node, all fields, in an untimed first run of each), and by default besides a fake tensor in `meta[\"val\"]` (ShapeProp records none; about 8 us a node, `FakeTensor.__new__`); with `record_val=false` `tensor_meta` alone, ShapeProp's job; both on "
        "clones of the module's buffers and of the parameters the graph may write (ShapeProp "
        "runs on the module's own: training-mode batch norm statistics move); "
        "`mode=\"fake\"` runs on fake tensors like `FakeTensorProp(gm, FakeTensorMode("
        "allow_non_fake_inputs=True)).propagate(x)`, and records `tensor_meta` besides "
        "(FakeTensorProp records only `meta[\"val\"]`; the values' sizes, strides and dtypes are checked to be "
        "FakeTensorProp's, node for node, in the untimed first run). *Annotated*: nodes that got the key both record."
    )
    res.add(
        md_table(
            ["graph", "nodes", "mode", "torch equivalent", "fxpasses", "torch", "fxpasses / torch", "annotated (fxpasses / torch)"],
            rows,
        )
    )
