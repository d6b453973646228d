"""Built-in instruments: LLVM-style ``print-after``, ``print-changed`` and ``time-passes``.

Each instrument is an ordinary pluggy plugin implementing the ``fxpasses_before_pass`` /
``fxpasses_after_pass`` / ``fxpasses_pass_failed`` hooks, exactly like a third-party one; pass
instances to ``Pipeline.run(..., instruments=[...])`` or use the ``fxpasses run`` flags
``--print-after-all``, ``--print-after=NAME,...``, ``--print-changed`` and ``--time-passes``.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Iterable, TextIO

from ._diff import unified_diff
from .errors import exception_text
from .hookspecs import hookimpl

__all__ = ["PrintAfter", "PrintChanged", "TimePasses", "Progress", "graph_code"]


def graph_code(gm: Any) -> str:
    """The Python code of ``gm``'s *current* graph (valid before the final recompile), then
    that of each ``GraphModule`` below it (the branches of ``torch.cond``, the body of
    ``while_loop``, ...), each under a ``# submodule 'path':`` line, in ``named_modules()``
    order: a pass that edits only a branch changes this text too."""
    import torch.fx

    parts = [_code(gm)]
    for path, sub in gm.named_modules():
        if path and isinstance(sub, torch.fx.GraphModule):
            parts.append(f"# submodule {path!r}:\n" + _code(sub))
    return "\n".join(parts)


def _is_submodule_line(line: str) -> bool:
    return line.startswith("# submodule ")


def _code(gm: Any) -> str:
    """One graph's code, without the blank lines and indentation torch puts around it."""
    return gm.graph.python_code("self").src.strip("\n").rstrip() + "\n"


class PrintAfter:
    """Print the graph's code after passes: all (``names=None``) or those named. After a
    failed pass: one line saying so when it was rolled back (the graph is the one before it),
    else (``on_error="raise"``) the graph as the pass left it.

    Args:
        names: pass names to print after, or None for every pass.
        file: where to write (default ``sys.stderr``).
    """

    def __init__(self, names: Iterable[str] | None = None, file: TextIO | None = None) -> None:
        self.names = None if names is None else set(names)
        self.file = file

    @hookimpl
    def fxpasses_after_pass(self, pass_name: str, gm: Any, ctx: Any, report: Any) -> None:
        if self.names is None or pass_name in self.names:
            out = self.file or sys.stderr
            round_ = f" #{report.iteration}" if getattr(report, "iteration", 0) else ""  # (a fixpoint iteration)
            print(f"# *** graph after {pass_name}{round_} ({report.nodes_after} nodes) ***", file=out)
            print(graph_code(gm), file=out)

    @hookimpl
    def fxpasses_pass_failed(self, pass_name: str, gm: Any, error: Any) -> None:
        # a failed pass has a graph after it too: the one before it (rolled back: said in one
        # line), or the one it left (on_error="raise": printed, for debugging)
        if self.names is None or pass_name in self.names:
            out = self.file or sys.stderr
            if error.rolled_back:
                print(f"# *** no graph after {pass_name}: it failed {_failed(error)} and was rolled back; the graph is as before it ***", file=out)
                return
            print(f"# *** graph after {pass_name}, which failed {_failed(error)}, as it left it ({len(gm.graph.nodes)} nodes) ***", file=out)
            print(_code_or_why(gm), file=out)


class PrintChanged:
    """Print a unified diff of the graph's code for every pass that changed it. A failed pass
    gets one line saying so when it was rolled back (no change kept), else
    (``on_error="raise"``) that line and the diff of what it left."""

    def __init__(self, file: TextIO | None = None, context: int = 3) -> None:
        self.file = file
        self.context = context
        self._before: str | None = None

    @hookimpl
    def fxpasses_before_pass(self, pass_name: str, gm: Any, ctx: Any) -> None:
        self._before = graph_code(gm)

    @hookimpl
    def fxpasses_after_pass(self, pass_name: str, gm: Any, ctx: Any, report: Any) -> None:
        before, self._before = self._before, None
        if not report.changed or before is None:
            return
        diff = self._diff(pass_name, before, graph_code(gm))
        out = self.file or sys.stderr
        print(f"# *** {getattr(report, 'label', pass_name)} changed the graph ({report.nodes_before} -> {report.nodes_after} nodes) ***", file=out)
        if not diff:  # the module changed, not its code (submodules, parameters or buffers removed)
            counters = ", ".join(f"{k}={v}" for k, v in sorted(report.counters.items()))
            print(f"# (the graph's code is unchanged: it changed the module's state{f': {counters}' if counters else ''})", file=out)
        out.write("".join(diff))

    @hookimpl
    def fxpasses_pass_failed(self, pass_name: str, gm: Any, error: Any) -> None:
        # rolled back: said in one line (nothing it changed stayed); on_error="raise": the
        # diff of what it left, for debugging
        before, self._before = self._before, None
        out = self.file or sys.stderr
        if error.rolled_back:
            print(f"# *** {pass_name} failed {_failed(error)} and was rolled back: no change kept ***", file=out)
            return
        after = _code_or_why(gm)
        diff = self._diff(pass_name, before, after) if before is not None else []
        what = "what it left (on_error=\"raise\")" if diff else "the graph's code is as before it"
        print(f"# *** {pass_name} failed {_failed(error)}; {what} ***", file=out)
        out.write("".join(diff))

    def _diff(self, pass_name: str, before: str, after: str) -> list[str]:
        return list(unified_diff(  # (difflib's is quadratic on a graph changed all over: seconds at 9k nodes)
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"before {pass_name}",
            f"after {pass_name}",
            n=self.context,
            section=_is_submodule_line,  # a hunk in a branch's code names the branch
        ))


def _failed(error: Any) -> str:
    """"in STAGE (REASON)" of a :class:`~fxpasses.PassFailedError`, on one line (the reason's
    first line, at most 200 characters)."""
    reason = str(error.reason).strip().splitlines()[0] if str(error.reason).strip() else "no reason given"
    if len(reason) > 200:
        reason = reason[:197] + "..."
    stage = getattr(error, "stage", None)
    return f"{f'in {stage} ' if stage else ''}({reason})"


def _code_or_why(gm: Any) -> str:
    """:func:`graph_code` of ``gm``, or a line saying why the graph a failed pass left has
    no code (its code generator raises on it)."""
    try:
        return graph_code(gm)
    except Exception as exc:  # noqa: BLE001 - a graph broken enough that torch cannot write its code
        return f"# (its code cannot be generated: {exception_text(exc)})\n"


class TimePasses:
    """Collect wall time per pass; :meth:`table` lists them, slowest first, with shares."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self.runs: dict[str, int] = {}
        self._started: float | None = None  # perf_counter() when the running pass began

    @hookimpl
    def fxpasses_before_pass(self, pass_name: str, gm: Any, ctx: Any) -> None:
        self._started = time.perf_counter()

    @hookimpl
    def fxpasses_after_pass(self, pass_name: str, gm: Any, ctx: Any, report: Any) -> None:
        self._add(pass_name, report.seconds)
        self._started = None

    @hookimpl
    def fxpasses_pass_failed(self, pass_name: str, gm: Any, error: Any) -> None:
        # a failed (or skipped) pass took its time too: from its start to the failure (its
        # rollback included), as a pass's own row counts its verification
        started, self._started = self._started, None
        if started is not None:
            self._add(pass_name, time.perf_counter() - started)
        else:
            self.runs.setdefault(pass_name, 0)

    def _add(self, name: str, seconds: float) -> None:
        self.times[name] = self.times.get(name, 0.0) + seconds
        self.runs[name] = self.runs.get(name, 0) + 1

    def rows(self) -> list[tuple[str, int, float, float]]:
        """``(pass, runs, seconds, share of total)``, slowest first."""
        total = sum(self.times.values()) or 1.0
        items = sorted(self.times.items(), key=lambda kv: (-kv[1], kv[0]))
        return [(n, self.runs[n], s, s / total) for n, s in items]

    def table(self) -> str:
        from .console import plain_table

        rows = [(n, str(r), f"{s * 1000:.2f}", f"{share * 100:.1f}%") for n, r, s, share in self.rows()]
        total = sum(self.times.values())
        return plain_table(("pass", "runs", "ms", "share"), rows) + f"\ntotal: {total * 1000:.2f} ms"


class Progress:
    """A progress bar over the passes of a run (``rich``), for terminals.

    ``total`` is the number of passes in the plan (None: unknown, the bar counts up); the bar
    shows the running pass's name and the graph's size. Use it as a context manager around
    the run so that the bar is closed even on failure.
    """

    def __init__(self, total: int | None = None, file: TextIO | None = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        self._progress = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(file=file or sys.stderr),
            transient=True,
        )
        self._task = self._progress.add_task("passes", total=total)

    def __enter__(self) -> "Progress":
        self._progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.stop()

    @hookimpl
    def fxpasses_before_pass(self, pass_name: str, gm: Any, ctx: Any) -> None:
        self._progress.update(self._task, description=f"{pass_name} ({len(gm.graph.nodes)} nodes)")

    @hookimpl
    def fxpasses_after_pass(self, pass_name: str, gm: Any, ctx: Any, report: Any) -> None:
        self._progress.advance(self._task)

    @hookimpl
    def fxpasses_pass_failed(self, pass_name: str, gm: Any, error: Any) -> None:
        self._progress.advance(self._task)

    @property
    def completed(self) -> int:
        """How many passes have finished (ok or failed)."""
        return int(self._progress.tasks[0].completed)
