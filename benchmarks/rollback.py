"""What exact rollback costs on real models: time and memory of the per-pass snapshot.

    python benchmarks/rollback.py                 # writes benchmarks/ROLLBACK.md
    python benchmarks/rollback.py --quick --out /tmp/r.md

For each model (captured with ``torch.export``): the time to take a
:class:`fxpasses.snapshot.Snapshot` (taken before every pass), with and without
``copy_tensors=True``; the time to restore it after a pass that rewrote every call node; the
Python memory a snapshot holds (``tracemalloc``) and the tensor memory ``copy_tensors`` adds;
``copy.deepcopy(gm)`` (the naive alternative) for comparison; and the share of the built-in
``inference`` pipeline's run time that its snapshots (one per pass) take.

``measure_rollback(name, make_gm, inputs)`` returns one row as a dict and ``run(cfg)`` returns a
``common.Result`` for ``benchmarks/run.py`` (group name ``rollback``), so the numbers can join
``RESULTS.md``; this file also runs on its own.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import gc
import operator
import os
import statistics
import sys
import time
import tracemalloc
import warnings
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))


def _median_time(fn: Callable[[Any], Any], setup: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        arg = setup()
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn(arg)
            times.append(time.perf_counter() - t0)
        finally:
            gc.enable()
        del arg
    return statistics.median(times)


def _python_bytes(fn: Callable[[], Any]) -> tuple[int, Any]:
    """Bytes of Python objects allocated by ``fn()`` and still held by its result."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out = fn()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return after - before, out


def _wreck(gm: Any) -> None:
    """What a failing pass might leave: every call node renamed, re-wired and annotated."""
    graph = gm.graph
    for n in list(graph.nodes):
        if n.op != "call_function" or not n.args or not hasattr(n.args[0], "op"):
            continue
        with graph.inserting_before(n):
            neg = graph.call_function(operator.neg, (n.args[0],))
            neg2 = graph.call_function(operator.neg, (neg,))
        n.args = (neg2, *n.args[1:])
        n.meta["wrecked"] = True


def measure_rollback(name: str, make_gm: Callable[[], Any], inputs: list[Any], repeats: int = 5) -> dict[str, Any]:
    """One model's rollback costs (seconds, bytes) as a dict; see the module doc."""
    import torch

    import fxpasses
    from fxpasses.snapshot import Snapshot

    gm = make_gm()
    nodes = len(gm.graph.nodes)
    tensors = {id(t): t for t in [*gm.parameters(), *gm.buffers()]}
    tensor_bytes = sum(t.numel() * t.element_size() for t in tensors.values())

    snap_s = _median_time(lambda g: Snapshot(g), lambda: gm, repeats)
    snap_t_s = _median_time(lambda g: Snapshot(g, copy_tensors=True), lambda: gm, repeats)
    snap_bytes, _ = _python_bytes(lambda: Snapshot(gm))

    code = gm.graph.python_code("self").src

    def wrecked() -> Any:
        s = Snapshot(gm)
        _wreck(gm)
        return s

    restore_s = _median_time(lambda s: s.restore(), wrecked, repeats)
    if gm.graph.python_code("self").src != code:
        raise AssertionError(f"{name}: restore did not give the graph back")

    try:
        deepcopy_s: float | None = _median_time(lambda g: copy.deepcopy(g), lambda: gm, max(2, repeats // 2))
    except Exception:  # noqa: BLE001 - some graphs do not deep-copy
        deepcopy_s = None

    # the write guard (default rollback of tensors written in place): its cost per tensor
    # operator a guarded pass runs, and a pass's first in-place write to the largest tensor
    # (one clone, then restore) against copying every tensor up front (copy_tensors=True)
    from fxpasses.snapshot import _all_tensors
    from fxpasses.write_guard import WriteGuard

    named = _all_tensors(gm)
    v = torch.randn(64)

    def ops(guard: Any) -> None:
        if guard is None:
            for _ in range(2000):
                v.mul(2)
        else:
            with guard:
                for _ in range(2000):
                    v.mul(2)

    plain_s = _median_time(ops, lambda: None, repeats)
    guarded_s = _median_time(ops, lambda: WriteGuard(named), repeats)
    largest = max(named.values(), key=lambda t: t.numel())

    def write_largest(guard: Any) -> None:
        with guard, torch.no_grad():
            largest.mul_(1.0)
        guard.restore()

    one_write_s = _median_time(write_largest, lambda: WriteGuard(named), repeats)

    pipeline = fxpasses.Pipeline.from_string(
        "remove_dropout,fuse_conv_bn,simplify_algebra,fold_constants,eliminate_common_subexpressions,eliminate_dead_code"
    )
    steps = len(pipeline.plan().steps)
    with_s = _median_time(lambda g: pipeline.run(g, inputs), make_gm, repeats)
    del torch
    return {
        "model": name,
        "nodes": nodes,
        "tensor_bytes": tensor_bytes,
        "snapshot_s": snap_s,
        "snapshot_tensors_s": snap_t_s,
        "guard_per_op_s": max(0.0, (guarded_s - plain_s) / 2000),
        "guard_one_write_s": one_write_s,
        "largest_tensor_bytes": largest.numel() * largest.element_size(),
        "snapshot_bytes": snap_bytes,
        "restore_s": restore_s,
        "deepcopy_s": deepcopy_s,
        "pipeline_steps": steps,
        "pipeline_s": with_s,
        "rollback_share": steps * snap_s / with_s if with_s else 0.0,
    }


def _models(quick: bool) -> list[tuple[str, Callable[[], Any], list[Any]]]:
    import torch

    import models  # examples/models.py

    out = []
    x = torch.randn(2, 3, 32, 32)
    cnn = models.convnet()
    out.append(("convnet (examples)", lambda: torch.export.export(cnn, (x,)).module(), [x]))
    ids = torch.randint(0, 100, (1, 32))
    g2 = models.gpt2()
    out.append(("GPT-2 2 layers (examples)", lambda: torch.export.export(g2, (ids,)).module(), [ids]))
    if not quick:
        g6 = models.gpt2(n_layer=6, n_embd=256)
        out.append(("GPT-2 6 layers, 256 wide", lambda: torch.export.export(g6, (ids,)).module(), [ids]))
        bert = models.bert()
        out.append(("BERT (examples)", lambda: torch.export.export(bert, (ids,)).module(), [ids]))
    return out


def _fmt_s(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"


def _mib(b: float) -> str:
    return f"{b / 2**20:.2f} MiB"


def markdown(rows: list[dict[str, Any]]) -> str:
    head = [
        "model", "nodes", "snapshot", "snapshot + tensor copies", "write guard: per operator",
        "write guard: first write to the largest tensor, restored", "restore after a full rewrite",
        "deepcopy(gm)", "snapshot memory", "tensor copies", "inference pipeline", "snapshots' share",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [
            r["model"], str(r["nodes"]), _fmt_s(r["snapshot_s"]), _fmt_s(r["snapshot_tensors_s"]),
            f"{r['guard_per_op_s'] * 1e6:.1f} us",
            f"{_fmt_s(r['guard_one_write_s'])} ({_mib(r['largest_tensor_bytes'])})",
            _fmt_s(r["restore_s"]), _fmt_s(r["deepcopy_s"]),
            f"{_mib(r['snapshot_bytes'])} ({r['snapshot_bytes'] / r['nodes']:.0f} B/node)",
            _mib(r["tensor_bytes"]), _fmt_s(r["pipeline_s"]),
            f"{r['rollback_share'] * 100:.0f}% ({r['pipeline_steps']} snapshots)",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


EXPLANATION = (
    "One snapshot is taken before every pass (O(n): each node's fields and a shallow copy of its "
    "`meta`, the module tree by reference); a failed pass restores it in place. "
    "Tensors a pass writes in place are restored by default through the write guard "
    "(`fxpasses.write_guard`): while a pass that may write tensors runs, every tensor operator "
    "goes through a Python dispatch mode (its cost per operator is measured on `mul` of a "
    "64-element tensor, 2000 calls, against the same calls unguarded), and each recorded tensor "
    "is cloned before its first write (timed: one in-place write to the model's largest tensor "
    "and the restore). `snapshot_tensors=True` (what `fxpasses run --reproducer` uses) instead "
    "copies every parameter and buffer before each pass: that doubles tensor memory for the "
    "duration of a pass. `restore` is timed after a "
    "pass that inserted two nodes before every call node and re-wired it. `deepcopy(gm)` is the "
    "naive alternative to the snapshot. \"snapshots' share\" is the number of snapshots the "
    "built-in `inference` pipeline takes (one per pass) times the snapshot time, over that "
    "pipeline's run time (lint after each changing pass, one recompile at the end). Tensor copies "
    "are dominated by first-touch page faults of fresh memory, so they vary with machine load."
)


def run(cfg: Any) -> Any:
    """``benchmarks/run.py`` entry: a ``common.Result`` for group ``rollback``."""
    from common import Result

    warnings.simplefilter("ignore")
    quick = bool(getattr(cfg, "quick", False))
    rows = [measure_rollback(n, mk, x, repeats=3 if quick else 5) for n, mk, x in _models(quick)]
    res = Result("rollback", "Exact rollback: snapshot time and memory on real models")
    res.add(EXPLANATION)
    res.add(markdown(rows))
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="two small models, fewer repeats")
    ap.add_argument("--out", default=os.path.join(HERE, "ROLLBACK.md"), help="where to write the table")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    import platform

    import torch

    rows = []
    for name, make, inputs in _models(args.quick):
        print(f"{name} ...", flush=True)
        rows.append(measure_rollback(name, make, inputs, repeats=3 if args.quick else 5))
    text = "\n".join(
        [
            "# Rollback cost on real models",
            "",
            f"Generated by `python benchmarks/rollback.py{' --quick' if args.quick else ''}` on "
            f"{datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}: torch {torch.__version__}, Python "
            f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs. Medians of "
            f"{3 if args.quick else 5} runs, each on a fresh capture, garbage collector paused.",
            "",
            EXPLANATION,
            "",
            markdown(rows),
            "",
        ]
    )
    with open(args.out, "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
