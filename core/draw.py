"""``--draw DIR``: pictures of the graph before and after each pass that changed it.

Uses torch's own ``torch.fx.passes.graph_drawer.FxGraphDrawer`` (which needs ``pydot``: install
``fxpasses[draw]``). For each changing pass it writes ``NN_<pass>.before.dot`` and
``NN_<pass>.after.dot`` (Graphviz source) and, when Graphviz's ``dot`` program is installed
(``apt install graphviz``), the ``.svg`` pictures next to them. A pass that fails is drawn
only under ``on_error="raise"``, where its graph stays as it left it: ``NN_<pass>.before.dot``
and ``NN_<pass>.failed.dot`` (what the pass left, for debugging); a rolled-back or skipped
failure changed nothing, and the summary names it. Drawings an earlier run left
in the folder (files of those names) are removed when the run's first pass starts, with a
warning saying how many: the folder holds one run's drawings.
"""

from __future__ import annotations

import re
import shutil
import warnings
from pathlib import Path
from typing import Any

from .errors import ConfigWarning, UserError
from .hookspecs import hookimpl

__all__ = ["DrawGraphs", "require_drawing"]

#: the names of the files :class:`DrawGraphs` writes: ``NN_<pass>[_<iteration>].before.dot``,
#: ``.after.dot`` (``.failed.dot`` for a failed pass's graph) and their ``.svg`` (pass names
#: are Python identifiers)
_DRAWING = re.compile(r"\d{2,}_\w+\.(?:before|after|failed)\.(?:dot|svg)")


def require_drawing() -> None:
    """Raise a :class:`~fxpasses.errors.UserError` naming the extra to install when pydot is missing."""
    try:
        import pydot  # noqa: F401
    except ImportError:
        raise UserError(
            "drawing graphs needs pydot: pip install 'fxpasses[draw]' "
            "(and Graphviz's dot program for SVG files: apt install graphviz)"
        ) from None


class DrawGraphs:
    """Instrument writing ``.dot`` (and, with Graphviz installed, ``.svg``) files per changing pass.

    Attributes:
        written: the files written, in order.
        svg: whether SVG files are made (Graphviz's ``dot`` program was found).
        drawn: the passes drawn (those that changed the graph), in order.
        same_drawing: passes that changed the graph but not its drawing (only node ``meta``,
            say): not drawn, since the two pictures would be identical.
        failed: ``(pass, what became of it)`` of each failed pass: ``"drawn as it left the
            graph"`` (``on_error="raise"``), ``"rolled back, not drawn"``, or why its drawing
            could not be made.
    """

    def __init__(self, directory: str | Path) -> None:
        require_drawing()
        from .job import check_writable

        self.directory = Path(directory)
        check_writable(self.directory, "drawing directory")  # now, not after the whole run
        self.svg = shutil.which("dot") is not None
        self.written: list[Path] = []
        self.drawn: list[str] = []
        self.same_drawing: list[str] = []
        self.failed: list[tuple[str, str]] = []
        self._before: Any = None
        self._step = 0  # the plan step now running, from 1 (files are numbered by it)
        self._iteration = 0  # its fixpoint iteration (0 outside groups)
        self._cleared = False  # whether an earlier run's drawings in the folder were removed

    def _remove_earlier_drawings(self) -> None:
        """Remove, once, the drawings an earlier run left in the folder (files named as this
        writer names them, :data:`_DRAWING`; nothing else), so that they are not taken for
        this run's (two runs' ``01_*`` files side by side, or a run that draws nothing while
        the folder holds drawings); a :class:`~fxpasses.errors.ConfigWarning` says how many."""
        if self._cleared:
            return
        self._cleared = True
        try:
            earlier = [p for p in self.directory.iterdir() if _DRAWING.fullmatch(p.name) and p.is_file()]
        except OSError:  # (no folder yet: nothing drawn there)
            return
        removed = 0
        for path in earlier:
            try:
                path.unlink()
            except OSError:
                continue
            removed += 1
        if removed:
            warnings.warn(
                ConfigWarning(
                    f"{self.directory}: removed {removed} drawing{'' if removed == 1 else 's'} an earlier run "
                    "wrote there (its NN_<pass>.before/.after/.failed .dot and .svg files)"
                ),
                stacklevel=3,
            )

    def _dot(self, gm: Any, name: str) -> Any:
        from torch.fx.passes.graph_drawer import FxGraphDrawer

        return FxGraphDrawer(gm, name, ignore_getattr=False).get_dot_graph()

    @hookimpl
    def fxpasses_before_pass(self, pass_name: str, gm: Any, ctx: Any) -> None:
        self._remove_earlier_drawings()  # (the run has started: the folder is this run's)
        step = getattr(ctx, "step", None)
        self._step = step + 1 if step is not None else self._step + 1
        self._iteration = getattr(ctx, "iteration", 0)
        self._before = self._dot(gm, f"before_{pass_name}")

    @hookimpl
    def fxpasses_after_pass(self, pass_name: str, gm: Any, ctx: Any, report: Any) -> None:
        before, self._before = self._before, None
        if not report.changed or before is None:
            return
        after = self._dot(gm, f"after_{pass_name}")
        if _body(before.to_string()) == _body(after.to_string()):
            self.same_drawing.append(self._label(pass_name))
            return
        self.drawn.append(self._label(pass_name))
        self._write(pass_name, (("before", before), ("after", after)))

    @hookimpl
    def fxpasses_pass_failed(self, pass_name: str, gm: Any, error: Any) -> None:
        # rolled back (or skipped): the graph is as before the pass, nothing to draw; under
        # on_error="raise" the graph is as the pass left it: drawn beside the one before it
        before, self._before = self._before, None
        label = self._label(pass_name)
        if getattr(error, "rolled_back", True) or before is None:
            self.failed.append((label, "rolled back, not drawn"))
            return
        try:
            left = self._dot(gm, f"failed_{pass_name}")
        except Exception as exc:  # noqa: BLE001 - a graph broken enough that torch cannot draw it
            from .errors import exception_text

            self.failed.append((label, f"not drawn: the graph it left cannot be drawn ({exception_text(exc)})"))
            return
        self._write(pass_name, (("before", before), ("failed", left)))
        self.failed.append((label, "drawn as it left the graph"))

    def _label(self, pass_name: str) -> str:
        return pass_name + (f" #{self._iteration}" if self._iteration else "")

    def _write(self, pass_name: str, drawings: Any) -> None:
        """Write ``(label, pydot graph)`` pairs as ``NN_<pass>[_<iteration>].<label>.dot`` (and ``.svg``)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        # the step's number in the plan, as `fxpasses check` prints it (and in a fixpoint group
        # the iteration, as the run's table prints it: each iteration its own files)
        stem = f"{self._step:02d}_{pass_name}" + (f"_{self._iteration}" if self._iteration else "")
        for label, dot in drawings:
            path = self.directory / f"{stem}.{label}.dot"
            path.write_text(dot.to_string())
            self.written.append(path)
            if self.svg:
                svg = path.with_suffix(".svg")
                svg.write_bytes(dot.create_svg())
                self.written.append(svg)

    def summary(self) -> str:
        """What was drawn, for ``fxpasses run --draw`` to print: the files and passes, or that
        no pass changed the graph (so there is nothing to draw, and nothing was written)."""
        self._remove_earlier_drawings()  # (a run without passes: no earlier drawings stay either)
        same = (
            f"; changed the graph but not its drawing, not drawn: {', '.join(self.same_drawing)}"
            if self.same_drawing
            else ""
        )
        failed = "".join(f"; {name} failed: {what}" for name, what in self.failed)
        if not self.written:
            return (
                f"--draw: no pass changed the graph's drawing, nothing drawn (nothing written to "
                f"{self.directory}){same}{failed}"
            )
        what = ".dot and .svg" if self.svg else ".dot"
        hint = "" if self.svg else "; install Graphviz's dot program (apt install graphviz) for .svg drawings too"
        n = len(self.drawn)
        drew = f", before and after {n} changing pass{'' if n == 1 else 'es'}: {', '.join(self.drawn)}" if n else ""
        return f"drew {len(self.written)} {what} files in {self.directory}{drew}{same}{failed}{hint}"


def _body(dot_source: str) -> str:
    """A drawing's Graphviz source without its first line (``digraph before_x {``, named
    after the side it draws)."""
    return dot_source.split("\n", 1)[-1]
