"""Superlinear torch baselines, run in a subprocess with a time limit.

``torch.fx.Transformer`` and ``torch.fx.experimental.optimization.remove_dropout`` (which is a
Transformer after a re-trace) grow faster than linearly with the graph (measured here: a
Transformer over 100k nodes takes minutes), so on big graphs they run in a child process that
is stopped after ``--limit`` seconds of pass time; the parent then reports a lower bound.

The child prints ``built`` when its graph is ready and ``{"seconds": ...}`` when done.
Usage: ``python benchmarks/slow.py KIND N_NODES``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import warnings
from typing import Any

__all__ = ["run_limited"]

HERE = os.path.dirname(os.path.abspath(__file__))


def run_limited(kind: str, n_nodes: int, limit: float) -> tuple[float, bool, dict[str, Any]]:
    """``(seconds, finished, extra)``: the pass time of ``kind`` on ``n_nodes`` nodes, or
    ``limit`` with ``finished=False`` when it ran longer."""
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "slow.py"), kind, str(n_nodes)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    built = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.strip())
            if line.strip() == "built":
                built.set()

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    if not built.wait(timeout=600):
        proc.kill()
        raise RuntimeError(f"slow baseline {kind}: the graph was not built in 10 minutes")
    try:
        proc.wait(timeout=limit + 5)  # the child times itself; +5 s for its exit
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        th.join(timeout=5)
        return limit, False, {}
    th.join(timeout=5)
    for line in lines:
        if line.startswith("{"):
            data = json.loads(line)
            if data["seconds"] > limit:
                return limit, False, data
            return data["seconds"], True, data
    raise RuntimeError(f"slow baseline {kind} failed (exit {proc.returncode})")


def _child(kind: str, n_nodes: int) -> None:
    import gc

    warnings.simplefilter("ignore")
    sys.path.insert(0, HERE)
    from graphs import block_graph
    import torch_baselines as tb

    gc.disable()
    gm = block_graph(n_nodes, compile=True)
    gc.collect()
    fn = tb.SLOW[kind]
    print("built", flush=True)
    t0 = time.perf_counter()
    out = fn(gm)
    dt = time.perf_counter() - t0
    print(json.dumps({"seconds": dt, "nodes_after": len(out.graph.nodes)}), flush=True)


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]))
