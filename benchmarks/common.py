"""Timing, fair garbage-collector state, machine facts and result records for the benchmarks."""

from __future__ import annotations

import contextlib
import gc
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

__all__ = [
    "Config",
    "Stat",
    "measure",
    "Run",
    "measure_interleaved",
    "gc_paused",
    "Result",
    "Target",
    "machine_info",
    "fmt_s",
    "fmt_x",
    "md_table",
]


@dataclass
class Config:
    """Sizes and repeat counts of one benchmark run (``--quick`` makes a smaller one)."""

    quick: bool
    sizes: tuple[int, ...]  # dispatch graph sizes
    big: int  # the "100k" graph
    small: int  # the "10k" graph
    repeats_small: int
    repeats_big: int
    slow_timeout: float  # seconds allowed to a superlinear torch baseline in a subprocess (0: skip)

    @classmethod
    def make(cls, quick: bool) -> "Config":
        if quick:
            return cls(True, (1_000, 10_000), 20_000, 2_000, 3, 2, 0.0)
        return cls(False, (1_000, 10_000, 100_000), 100_000, 10_000, 5, 5, 15.0)


@dataclass
class Stat:
    """Median (and spread) of repeated wall-clock timings, in seconds."""

    times: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def max(self) -> float:
        return max(self.times)

    def __str__(self) -> str:
        return f"{fmt_s(self.median)} (n={len(self.times)}, {fmt_s(self.min)}-{fmt_s(self.max)})"


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Collect, then pause the cyclic GC (the state fxpasses' pipeline runs in), for every
    timed region, baselines included: otherwise a baseline pays for collections of garbage the
    previous measurement left and big graphs make each collection slow."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def measure(
    run: Callable[[Any], Any],
    setup: Callable[[], Any] | None = None,
    repeats: int = 5,
    check: Callable[[Any, Any], None] | None = None,
) -> Stat:
    """Median wall time of ``run(setup())`` over ``repeats`` fresh setups (setup untimed).

    ``check(setup_value, result)`` runs after each timed call (untimed), e.g. to count nodes.
    """
    return measure_interleaved({"run": Run(run, setup, check)}, repeats)["run"]


@dataclass
class Run:
    """One contender of :func:`measure_interleaved`: ``run(setup())`` timed, ``check`` after."""

    run: Callable[[Any], Any]
    setup: Callable[[], Any] | None = None
    check: Callable[[Any, Any], None] | None = None
    repeats: int | None = None  # fewer than the others (a slow baseline); None: all rounds


def measure_interleaved(runs: dict[str, Run], repeats: int) -> dict[str, Stat]:
    """:func:`measure` of each of ``runs``, interleaved: ``repeats`` rounds, each timing every
    contender once (on its own fresh setup), the order rotated from round to round.

    A ratio between contenders measured one block after the other takes in whatever drifts
    between the blocks: on a shared machine the load, and within one process the heap, which
    grows as big graphs come and go (the first ``recompile()`` of a fresh 100k-node graph in
    a process was measured at 5.1 s, the next ones at 3.8 s and 3.0 s). Interleaved, every
    contender sees the same drift, and the first round's costs fall on each in turn.
    """
    names = list(runs)
    times: dict[str, list[float]] = {k: [] for k in names}
    for r in range(repeats):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            c = runs[name]
            if c.repeats is not None and len(times[name]) >= c.repeats:
                continue
            arg = c.setup() if c.setup is not None else None
            with gc_paused():
                t0 = time.perf_counter()
                out = c.run(arg)
                dt = time.perf_counter() - t0
            if c.check is not None:
                c.check(arg, out)
            del out, arg
            times[name].append(dt)
    gc.collect()
    return {k: Stat(v) for k, v in times.items()}


@dataclass
class Target:
    """One target of issue 6: a measured value against its bound."""

    name: str
    value: float | None
    bound: str  # human text, e.g. "<= 1.2x"
    ok: bool | None
    note: str = ""

    def row(self) -> list[str]:
        status = "n/a" if self.ok is None else ("met" if self.ok else "**missed**")
        v = "-" if self.value is None else f"{self.value:.3g}"
        return [self.name, v, self.bound, status, self.note]


@dataclass
class Result:
    """What one benchmark group reports: markdown sections and target checks."""

    group: str
    title: str
    sections: list[str] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, text: str) -> None:
        self.sections.append(text)


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def fmt_x(ratio: float | None, lower_bound: bool = False) -> str:
    if ratio is None:
        return "-"
    prefix = ">= " if lower_bound else ""
    if ratio >= 100:
        return f"{prefix}{ratio:.0f}x"
    if ratio >= 10:
        return f"{prefix}{ratio:.1f}x"
    return f"{prefix}{ratio:.2f}x"


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, str]:
    import torch

    import fxpasses

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
            cwd=os.path.dirname(os.path.abspath(__file__)),
        ).stdout.strip()
    except Exception:
        commit = ""
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count() or 0
    try:
        import transformers

        tf = transformers.__version__
    except Exception:
        tf = "not installed"
    return {
        "CPU": _cpu_model(),
        "cores": f"{os.cpu_count()} logical, {affinity} usable; torch threads {torch.get_num_threads()}",
        "OS": f"{platform.system()} {platform.release()}",
        "Python": sys.version.split()[0] + f" ({platform.python_implementation()})",
        "torch": torch.__version__,
        "transformers": tf,
        "fxpasses": fxpasses.__version__ + (f" (git {commit})" if commit else ""),
    }
