"""7. Peak memory of a pipeline run with rollback snapshots, without them, and with
``snapshot_tensors=True``.

Python objects (the graph, snapshots) are measured with ``tracemalloc`` on the synthetic
graph; tensor memory (parameter copies of ``snapshot_tensors=True``) is invisible to
tracemalloc, so it is measured as peak resident memory (Linux ``VmHWM``, reset through
``/proc/self/clear_refs``) of a subprocess running a real model.

"Without rollback" replaces what the pipeline records for it by a stub, for the measurement
only (benchmark code, no switch in fxpasses): the built-in passes declare ``journal_edits``, so
by default each is preceded by a ``Journal`` of what it touches, not a ``Snapshot`` of the
whole graph; the stub stands in for both (journals off, so the pipeline would take a snapshot,
and the snapshot is the stub). Every pass then reports a change, nothing can be rolled back,
and each lint looks at the whole graph (it cannot ask a journal what the pass touched).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import subprocess
import sys
import time
import tracemalloc
import warnings
from typing import Any, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))


class NoSnapshot:
    """Stands in for fxpasses.snapshot.Snapshot: records nothing."""

    def __init__(self, gm: Any, *, copy_tensors: bool = False) -> None:
        self.unrestorable: list[str] = []

    def changed(self) -> bool:
        return True

    def arguments_of(self, node: Any) -> None:
        return None  # nothing recorded: lint checks every argument it looks at

    def guard(self) -> Any:
        return contextlib.nullcontext()

    def pass_done(self) -> None:
        pass

    def restore(self) -> None:  # pragma: no cover - not reached in the benchmark
        raise RuntimeError("benchmark run without snapshots cannot roll back")


@contextlib.contextmanager
def rollback_off() -> Iterator[None]:
    """No journal and no snapshot before any pass (see the module doc)."""
    import fxpasses.pipeline as pl

    saved = pl.Snapshot, pl.supports_journal
    pl.Snapshot = NoSnapshot  # type: ignore[misc,assignment]
    pl.supports_journal = lambda gm: False  # type: ignore[assignment]
    try:
        yield
    finally:
        pl.Snapshot, pl.supports_journal = saved  # type: ignore[misc]


def _records(pipe: Any, gm: Any) -> dict[str, int]:
    """How many journals and snapshots ``pipe.run(gm)`` makes (run on ``gm``)."""
    from fxpasses.journal import Journal
    from fxpasses.snapshot import Snapshot

    made: dict[str, list[Any]] = {"Journal": [], "Snapshot": []}  # held: no id is reused
    saved = Journal.__init__, Snapshot.__init__

    def counting(init: Any, key: str) -> Any:
        def counted(self: Any, *a: Any, **k: Any) -> None:
            made[key].append(self)
            init(self, *a, **k)

        return counted

    Journal.__init__ = counting(saved[0], "Journal")  # type: ignore[method-assign]
    Snapshot.__init__ = counting(saved[1], "Snapshot")  # type: ignore[method-assign]
    try:
        pipe.run(gm)
    finally:
        Journal.__init__, Snapshot.__init__ = saved  # type: ignore[method-assign]
    return {k: len({id(o) for o in v}) for k, v in made.items()}  # CheckedJournal's init calls Journal's


_DEFAULT = "rollback (default: a journal per pass)"
_OFF = "rollback off (stub)"
_TENSORS = "snapshot_tensors=True"
_VARIANTS = ((_DEFAULT, {}, False), (_OFF, {}, True), (_TENSORS, {"snapshot_tensors": True}, False))


def _mb(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def run(cfg: Any) -> Any:
    import torch

    from fxpasses.snapshot import Snapshot

    from bench_pipeline import BLOCK_OPTIONS, inference_pipeline
    from common import Result, Target, md_table
    from graphs import BlockModel, block_graph, n_blocks_for

    res = Result("memory", "7. Peak memory: rollback on vs off")
    n = cfg.small
    model = BlockModel(n_blocks_for(n))
    rows = []
    peaks: dict[str, int] = {}

    # size of the graph itself and of one snapshot
    gc.collect()
    tracemalloc.start()
    t0 = tracemalloc.get_traced_memory()[0]
    gm = block_graph(n, model=model, compile=False)
    graph_bytes = tracemalloc.get_traced_memory()[0] - t0
    t1 = tracemalloc.get_traced_memory()[0]
    snap = Snapshot(gm)
    snap_bytes = tracemalloc.get_traced_memory()[0] - t1
    tracemalloc.stop()
    del snap, gm
    gc.collect()

    # what each variant records for rollback, counted (the stub must leave the default's)
    made = {}
    for label, pipe_kwargs, off in _VARIANTS:
        with rollback_off() if off else contextlib.nullcontext():
            made[label] = _records(inference_pipeline(options=BLOCK_OPTIONS, **pipe_kwargs), block_graph(n, model=model, compile=False))
    assert made[_DEFAULT]["Journal"] > 0 and made[_OFF] == {"Journal": 0, "Snapshot": 0}, made
    for label, pipe_kwargs, off in _VARIANTS:
        pipe = inference_pipeline(options=BLOCK_OPTIONS, **pipe_kwargs)
        gm = block_graph(n, model=model, compile=False)
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        with rollback_off() if off else contextlib.nullcontext():
            pipe.run(gm)
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        peaks[label] = peak
        del gm
        gc.collect()
    ref = peaks[_OFF]
    for label, peak in peaks.items():
        what = ", ".join(f"{v} {k}{'s' if v != 1 else ''}" for k, v in made[label].items() if v) or "nothing"
        rows.append([label, what, _mb(peak), f"{peak / ref:.2f}x"])
    res.add(
        f"**Python heap** (`tracemalloc`), the `inference` preset over the {n:,}-node block graph: "
        f"peak traced memory above the start of the run. For scale: the graph module itself takes "
        f"{_mb(graph_bytes)} ({graph_bytes / n:.0f} B/node); one `Snapshot` {_mb(snap_bytes)} "
        f"({snap_bytes / n:.0f} B/node, {snap_bytes / graph_bytes:.0%} of the graph; only one "
        "lives at a time). The built-in passes declare `journal_edits`, so by default each is "
        "preceded by a journal of what it touches instead; `snapshot_tensors=True` takes a "
        "snapshot (with tensor copies) before each. Tensor storage is not seen by tracemalloc."
    )
    res.add(md_table(["pipeline run", "recorded for rollback", "peak above start", "vs rollback off"], rows))
    res.targets.append(
        Target(
            "peak heap with rollback / without (synthetic graph)",
            peaks[_DEFAULT] / ref,
            "(reported)",
            None,
        )
    )

    # RSS with a real model, one subprocess per variant
    model_kw = "quick" if cfg.quick else "full"
    rss_rows = []
    rss: dict[str, dict[str, Any]] = {}
    for variant in ("default", "nosnap", "tensors"):
        out = subprocess.run(
            [sys.executable, os.path.join(HERE, "bench_memory.py"), variant, model_kw],
            capture_output=True, text=True, timeout=600,
        )
        line = [x for x in out.stdout.splitlines() if x.startswith("{")]
        if out.returncode != 0 or not line:
            raise RuntimeError(f"memory subprocess {variant} failed: {out.stderr[-2000:]}")
        rss[variant] = json.loads(line[-1])
    ref_rss = rss["nosnap"]["peak_delta"]
    names = {"default": _DEFAULT, "nosnap": _OFF, "tensors": _TENSORS}
    params_b = rss["default"]["params_mb"] * 2**20
    for v, d in rss.items():
        rss_rows.append([names[v], _mb(d["peak_delta"]), f"{(d['peak_delta'] - ref_rss) / params_b:+.2f}"])
    d0 = rss["default"]
    res.add(
        f"**Resident memory** (peak `VmHWM` above the RSS before the run, one subprocess per row), "
        f"pipeline over `torch.export` of {d0['model']} ({d0['params_mb']:.0f} MiB of parameters "
        f"and buffers, {d0['nodes']} nodes)."
    )
    res.add(md_table(["pipeline run", "peak RSS above start", "extra vs rollback off, in parameter sizes"], rss_rows))
    extra = (rss["tensors"]["peak_delta"] - ref_rss) / (d0["params_mb"] * 2**20)
    res.targets.append(
        Target(
            "snapshot_tensors=True: extra peak RSS / parameter bytes (real model)",
            extra,
            "(reported; 1 = one copy)",
            None,
            "one copy of every parameter and buffer while a pass runs",
        )
    )
    return res


# ------------------------------------------------------------------ child process


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        m = re.search(rf"{key}:\s+(\d+) kB", f.read())
    return int(m.group(1)) * 1024 if m else 0


def _child(variant: str, size: str) -> None:
    warnings.simplefilter("ignore")
    import torch

    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
    import models

    from bench_pipeline import inference_pipeline

    if size == "quick":
        label, model = "GPT-2 2x128", models.gpt2(n_layer=2, n_embd=128, n_head=4)
    else:
        label, model = "GPT-2 12x768", models.gpt2(n_layer=12, n_embd=768, n_head=12)
    x = torch.randint(0, 1000, (1, 32))
    gm = torch.export.export(model, (x,)).module()
    del model
    params = sum(t.numel() * t.element_size() for t in list(gm.parameters()) + list(gm.buffers()))
    pipe = inference_pipeline(snapshot_tensors=(variant == "tensors"))
    nodes = len(gm.graph.nodes)
    gc.collect()
    time.sleep(0.1)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status("VmRSS")
    with rollback_off() if variant == "nosnap" else contextlib.nullcontext():
        pipe.run(gm)
    peak = _status("VmHWM")
    print(json.dumps({"peak_delta": peak - before, "model": label, "params_mb": params / 2**20, "nodes": nodes}))


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
