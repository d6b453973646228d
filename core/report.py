"""What a run reports: one :class:`PassReport` per pass, gathered in a :class:`RunReport`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PassReport", "RunReport"]


@dataclass
class PassReport:
    """The outcome of one pass over one graph.

    Attributes:
        name: the pass's registry name.
        status: ``"ok"``, ``"failed"`` (rolled back, pipeline stopped or raised),
            ``"skipped"`` (failed and rolled back, pipeline continued) or ``"cached"`` (an
            analysis whose result was still current: not run again).
        reasons: why the pass ran where it did (e.g. computed on demand for a pass requiring it).
        changed: whether the graph or module changed.
        nodes_before / nodes_after: node counts around the pass.
        seconds: wall time of the pass (hooks, surgery and verification), in seconds.
        counters: the pass's own counters (``ctx.count``), e.g. ``{"fused": 3}``.
        skipped: ``(node name, reason)`` for nodes the pass declined (``ctx.skip``).
        notes: why the pass changed the module's outputs on purpose (``ctx.changes_outputs``).
        error: the error message when the pass failed.
        iteration: fixpoint iteration this run belongs to (0 outside fixpoint groups).
        rewrites: under a rewrite limit (:mod:`fxpasses.rewrites`), how many rewrites the
            pass applied (None in ordinary runs); ``cut_off``: the limit stopped it early or
            kept it from running.
    """

    name: str
    status: str = "ok"
    changed: bool = False
    nodes_before: int = 0
    nodes_after: int = 0
    seconds: float = 0.0
    counters: dict[str, int] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    iteration: int = 0
    reasons: list[str] = field(default_factory=list)
    rewrites: int | None = None
    cut_off: bool = False

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class RunReport:
    """All pass reports of one pipeline run, in run order.

    Attributes:
        passes: one :class:`PassReport` per pass run.
        dialect: the graph dialect detected at the start.
        nodes_before / nodes_after: node counts of the whole run.
        seconds: wall time of the whole run, including the final ``recompile()``.
        verification: ``"none"``, ``"lint"`` or ``"numeric"``; ``max_abs_error`` is the largest
            absolute output difference seen by numeric verification (None otherwise).
        rewrites / rewrite_limit: under a rewrite limit, the rewrites applied and the limit.
        notes: remarks on the run as a whole from whoever ran it, e.g. the ``torch.compile``
            backend's ``freeze`` (what it made constants of the graph, what it left an input
            and why); printed after the table.
    """

    passes: list[PassReport] = field(default_factory=list)
    dialect: str = "unknown"
    nodes_before: int = 0
    nodes_after: int = 0
    seconds: float = 0.0
    verification: str = "lint"
    max_abs_error: float | None = None
    rewrites: int | None = None
    rewrite_limit: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(p.changed for p in self.passes)

    @property
    def failed(self) -> list[PassReport]:
        return [p for p in self.passes if p.status in ("failed", "skipped")]

    def __getitem__(self, name: str) -> PassReport:
        """The (last) report of the pass called ``name``; KeyError when it did not run."""
        for p in reversed(self.passes):
            if p.name == name:
                return p
        raise KeyError(name)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def table(self) -> str:
        """A plain-text table: pass, status, changed, nodes before/after, ms, counters."""
        rows = [("pass", "status", "changed", "nodes", "ms", "counters")]
        for p in self.passes:
            counters = ", ".join(f"{k}={v}" for k, v in sorted(p.counters.items()))
            rows.append(
                (
                    p.name + (f" #{p.iteration}" if p.iteration else ""),
                    p.status,
                    "yes" if p.changed else "no",
                    f"{p.nodes_before} -> {p.nodes_after}",
                    f"{p.seconds * 1000:.1f}",
                    counters,
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(
            f"total: {self.nodes_before} -> {self.nodes_after} nodes in "
            f"{self.seconds * 1000:.1f} ms ({self.dialect})"
        )
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)
