"""Which analysis results are current during a run (LLVM's ``PreservedAnalyses`` idea).

An analysis pass (``kind = "analysis"``) computes facts about the graph (e.g.
``propagate_shapes`` records shapes in ``node.meta``) and may leave a result in
``ctx.analyses[name]``. Once computed, a result stays *current* until a transform changes the
graph, unless that transform declares the analysis in its ``preserves`` (or
``preserves = "all"``). In a run:

- an analysis step whose result is current (computed with the same options) is not run again:
  its report has status ``"cached"``;
- before a pass runs, each analysis in its ``requires`` that is not current is computed on
  demand (its report says so in ``reasons``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["AnalysisCache"]


class AnalysisCache:
    """Current analyses of one run: name -> the options they were computed with."""

    def __init__(self) -> None:
        self._current: dict[str, Any] = {}

    def is_current(self, name: str, options: Any = None) -> bool:
        """Whether ``name``'s result is current (with ``options``, when given)."""
        if name not in self._current:
            return False
        return options is None or self._current[name] == options

    def computed(self, name: str, options: Any) -> None:
        """Record that analysis ``name`` ran with ``options`` on the current graph."""
        self._current[name] = options

    def transformed(self, preserves: Any) -> list[str]:
        """A transform changed the graph: keep only what it ``preserves`` (``"all"``: all).

        Returns the names of the analyses no longer current.
        """
        if preserves == "all":
            return []
        keep = set(preserves)
        dropped = [k for k in self._current if k not in keep]
        for k in dropped:
            del self._current[k]
        return dropped

    def names(self) -> list[str]:
        return sorted(self._current)
