"""What a run reports: one :class:`PassReport` per pass, gathered in a :class:`RunReport`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterator

__all__ = ["PassReport", "RunReport", "counters_cell", "rewrites_cell", "rewrites_summary"]


def counters_cell(p: "PassReport") -> str:
    """A pass's counters for a table: ``fused=3``; for a pass rolled back after a failure,
    what it had counted, marked as undone: ``rolled back: rewired=1``."""
    text = ", ".join(f"{k}={v}" for k, v in sorted(p.counters.items()))
    if p.rolled_back_counters:
        undone = ", ".join(f"{k}={v}" for k, v in sorted(p.rolled_back_counters.items()))
        text = f"{text}; rolled back: {undone}" if text else f"rolled back: {undone}"
    return text


def rewrites_cell(p: "PassReport") -> str:
    """A pass's rewrites under a rewrite limit, for a table: ``3``, or ``2 (cut off)`` when
    the limit stopped a rewrite it would have made; ``-`` for a pass with no count (cached,
    or failed before the count was taken)."""
    if p.rewrites is None:
        return "(cut off)" if p.cut_off else "-"
    marks = [m for m, on in (("rolled back", p.rolled_back and p.rewrites), ("cut off", p.cut_off)) if on]
    return f"{p.rewrites} ({', '.join(marks)})" if marks else str(p.rewrites)


def rewrites_summary(rep: "RunReport") -> str:
    """``"5 rewrites counted"``, with how many of them a failed pass took with it when it was
    rolled back (they count towards the limit, as bisection numbers them, but are not in the
    graph)."""
    undone = [(p.name, p.rewrites) for p in rep.passes if p.rolled_back and p.rewrites]
    text = f"{rep.rewrites} rewrite{'' if rep.rewrites == 1 else 's'} counted"
    if undone:
        n = sum(k for _, k in undone)
        text += f" ({n} rolled back with {', '.join(name for name, _ in undone)}, not in the graph)"
    return text


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
        counters: the pass's own counters (``ctx.count``), e.g. ``{"fused": 3}``; empty for
            a pass that failed and was rolled back (its counts describe changes undone).
        rolled_back: the pass failed and was rolled back (not under ``on_error="raise"``,
            which keeps the broken graph).
        rolled_back_counters: what a pass that failed and was rolled back (status
            ``"skipped"``, or ``"failed"`` under ``on_error="rollback"``) had counted before
            its failure, for debugging; none of it is in the graph.
        skipped: ``(node name, reason)`` for nodes the pass declined (``ctx.skip``).
        notes: why the pass changed the module's outputs on purpose (``ctx.changes_outputs``).
        error: the error message when the pass failed.
        iteration: the fixpoint iteration this run belongs to, from 1 (0 outside fixpoint
            groups: :class:`~fxpasses.Fixpoint`); the table shows it as ``name #2``.
        rewrites: under a rewrite limit (:mod:`fxpasses.rewrites`), how many rewrites the
            pass applied (None in ordinary runs); ``cut_off``: the limit stopped a rewrite the
            pass would have made (in it, or by keeping it from running); False when it applied
            every rewrite it would have.
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
    rolled_back_counters: dict[str, int] = field(default_factory=dict)
    rolled_back: bool = False

    @property
    def label(self) -> str:
        """The pass's name, with its fixpoint iteration when it has one: ``fold_constants #2``."""
        return self.name + (f" #{self.iteration}" if self.iteration else "")

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
        atol / rtol: the tolerances the outputs after the run are held to against those
            before it: the pipeline's, raised where a pass that changed the graph (and was
            kept) has larger ones of its own (an entry's ``[atol=...]``; see
            :class:`fxpasses.Pipeline`). ``fxpasses run`` compares the outputs with these.
        rewrites / rewrite_limit: under a rewrite limit, the rewrites applied and the limit.
        notes: remarks on the run as a whole: a fixpoint group that stopped at its
            ``max_iterations`` unconverged; from whoever ran it, e.g. the ``torch.compile``
            backend's ``freeze`` (what it made constants of the graph, what it left an input
            and why); printed after the table.
        analyses: the results of the analyses still current when the run ended (valid for
            the graph as the run left it), by name: what each handed over in
            ``ctx.analyses[name]`` (``propagate_shapes``: its mode and the nodes it annotated,
            its results being in ``node.meta``; ``True`` for one that handed over nothing); an
            analysis a later transform invalidated is not there. :meth:`as_dict` gives their
            names only.
    """

    passes: list[PassReport] = field(default_factory=list)
    dialect: str = "unknown"
    nodes_before: int = 0
    nodes_after: int = 0
    seconds: float = 0.0
    verification: str = "lint"
    max_abs_error: float | None = None
    atol: float | None = None
    rtol: float | None = None
    rewrites: int | None = None
    rewrite_limit: int | None = None
    notes: list[str] = field(default_factory=list)
    analyses: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def changed(self) -> bool:
        return any(p.changed for p in self.passes)

    @property
    def failed(self) -> list[PassReport]:
        return [p for p in self.passes if p.status in ("failed", "skipped")]

    def __getitem__(self, name: str) -> PassReport:
        """The (last) report of the pass called ``name``, or the report labelled ``name`` as
        the table labels it (``"simplify_algebra #2"``: its second iteration in a fixpoint
        group).

        Raises:
            KeyError: no pass of that name ran; the message names those that did (with a
                close name first, when there is one).
        """
        for p in reversed(self.passes):
            if p.name == name:
                return p
        for p in self.passes:
            if p.label == name:
                return p
        from .errors import close_names, did_you_mean

        ran = list(dict.fromkeys(p.name for p in self.passes))
        close = close_names(name, ran) if isinstance(name, str) else []
        labels = [p.label for p in self.passes if p.iteration]  # (a fixpoint group's, as the table shows them)
        holds = ", ".join(map(repr, ran)) if ran else "no pass"
        if labels:
            holds += f"; by iteration: {', '.join(map(repr, labels))}"
        raise KeyError(f"no pass named {name!r} ran (the report holds {holds}){did_you_mean(close)}")

    def __contains__(self, name: object) -> bool:
        """Whether ``report[name]`` finds a report: a pass of that name ran, or one labelled so
        (``"simplify_algebra #2"``)."""
        return any(p.name == name or p.label == name for p in self.passes)

    def __iter__(self) -> Iterator[PassReport]:
        """The pass reports, in the order the passes ran (``report.passes``)."""
        return iter(self.passes)

    def __len__(self) -> int:
        return len(self.passes)

    def as_dict(self) -> dict[str, Any]:
        """The report as plain data; ``analyses`` as the names of the results (their values are
        whatever the analyses handed over, not data to copy or print)."""
        out = dataclasses.asdict(dataclasses.replace(self, analyses={}))
        out["analyses"] = sorted(self.analyses)
        return out

    def table(self, *, failures: bool = True) -> str:
        """A plain-text table: pass, status, changed, nodes before/after, ms, counters; under a
        rewrite limit also each pass's rewrites, marked ``(cut off)`` where the limit stopped
        one; then, with ``failures``, why each failed or skipped pass did (shown apart, as
        ``fxpasses run`` shows the error of the pass that stopped the run, pass ``False``)."""
        limited = self.rewrite_limit is not None
        head = ["pass", "status", "changed", "nodes", "ms", "counters"]
        if limited:
            head.insert(3, "rewrites")
        rows = [tuple(head)]
        for p in self.passes:
            counters = counters_cell(p)
            row = [
                p.label,
                p.status,
                "yes" if p.changed else "no",
                f"{p.nodes_before} -> {p.nodes_after}",
                f"{p.seconds * 1000:.1f}",
                counters,
            ]
            if limited:
                row.insert(3, rewrites_cell(p))
            rows.append(tuple(row))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(
            f"total: {self.nodes_before} -> {self.nodes_after} nodes in "
            f"{self.seconds * 1000:.1f} ms ({self.dialect})"
            + (f"; rewrite limit {self.rewrite_limit}: {rewrites_summary(self)}" if limited else "")
        )
        for p in self.passes if failures else ():  # why a pass failed or was skipped (its error's first line)
            if p.error and p.status in ("failed", "skipped"):
                lines.append(f"{p.status}: {p.name}: {p.error.splitlines()[0]}")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)
