"""Fixpoint groups: passes repeated, in order, until an iteration changes nothing.

A pass often makes work for another that ran before it: constant folding turns an
expression into a literal that algebraic simplification removes, dead code elimination
frees a value whose duplicate CSE can then merge. A *fixpoint group* runs its passes in
order, then again, until one whole iteration leaves the graph unchanged (every pass in it
reports ``changed=False``), or ``max_iterations`` iterations have run. Each pass of the group
is verified, rolled back on failure and reported as any pass is; its report's ``iteration``
says which iteration it belongs to (1, 2, ...; 0 outside groups). A group that stops at
``max_iterations`` while its last iteration still changed the graph has not converged: the
run report's ``notes`` say so, and a :class:`FixpointWarning` is issued.

This is what torch's ``PassManager(steps=N)`` does with its whole list (it stops early once
no pass changed anything) and what MLIR's greedy pattern driver does with its patterns
(``maxIterations``, 10 by default: the default here too), for a chosen run of passes.

Written:

- Python: ``Fixpoint(["simplify_algebra", "fold_constants"], max_iterations=5)`` as an entry
  of :class:`~fxpasses.Pipeline` (entries as a pipeline takes them: names, classes,
  instances, tables);
- a pipeline string: ``fixpoint(simplify_algebra,fold_constants)``, options in braces after
  the keyword: ``fixpoint{max_iterations=5}(simplify_algebra,fold_constants{max_numel=64})``;
- a config file: a table entry ``{fixpoint = ["simplify_algebra", "fold_constants"],
  max_iterations = 5}``.

Ordering (``order="dependencies"``): the members are ordered among themselves by their
declarations, and the group as one unit among the other entries: what a member requires from
outside the group (pulled in when missing) runs before the group, and a member's ``after`` /
``before`` of a pass outside it orders the whole group. Groups do not nest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .errors import ConfigError

__all__ = ["Fixpoint", "FixpointWarning", "DEFAULT_MAX_ITERATIONS", "MAX_ITERATIONS_LIMIT"]

#: iterations a group runs at most unless told otherwise (MLIR's greedy rewrite driver's
#: ``GreedyRewriteConfig::maxIterations`` default)
DEFAULT_MAX_ITERATIONS = 10
#: the largest ``max_iterations`` accepted (a typo such as 1e9 would hang a run)
MAX_ITERATIONS_LIMIT = 1000


class FixpointWarning(UserWarning):
    """A fixpoint group stopped at ``max_iterations`` while still changing the graph."""


def check_max_iterations(value: Any, where: str | None = None) -> int:
    """``value`` as a group's ``max_iterations``.

    Raises:
        ConfigError: not an integer (a bool neither) from 1 to :data:`MAX_ITERATIONS_LIMIT`.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ITERATIONS_LIMIT:
        raise ConfigError(
            f"fixpoint max_iterations must be an integer from 1 to {MAX_ITERATIONS_LIMIT}, got {value!r}",
            source=where,
        )
    return value


class Fixpoint:
    """A pipeline entry: ``entries`` run in order, repeatedly, until an iteration changes
    nothing or ``max_iterations`` (1 to 1000; default 10) iterations have run.

    ``entries`` are pipeline entries as :class:`~fxpasses.Pipeline` takes them (pass names,
    ``(name, options)`` pairs, tables, pass classes or instances), not other groups.

    Raises:
        ConfigError: no entries, a group among them, or a bad ``max_iterations``.
    """

    def __init__(self, entries: Sequence[Any], *, max_iterations: int = DEFAULT_MAX_ITERATIONS) -> None:
        if entries is None:
            raise ConfigError("a fixpoint group needs a list of pipeline entries, got None")
        from .pipeline import _as_entries  # (pipeline imports this module)

        # one entry (a name, a (name, options) pair, a pass, a pass function) or a list of them,
        # read as Pipeline reads its argument
        self._entries = tuple(_as_entries(entries, "Fixpoint"))
        if not self._entries:
            raise ConfigError("a fixpoint group is empty: name at least one pass in it")
        if any(isinstance(e, Fixpoint) for e in self._entries):
            raise ConfigError("fixpoint groups do not nest: list the inner group's passes in the outer one")
        self._max_iterations = check_max_iterations(max_iterations)

    @property
    def entries(self) -> list[Any]:
        """The group's pipeline entries (a copy: a group is fixed once made)."""
        return list(self._entries)

    @property
    def max_iterations(self) -> int:
        return self._max_iterations

    def __repr__(self) -> str:
        return f"Fixpoint({list(self._entries)!r}, max_iterations={self._max_iterations})"


@dataclass(eq=False)
class Group:
    """The run-time identity of one fixpoint group of a plan: its steps share this object."""

    max_iterations: int = DEFAULT_MAX_ITERATIONS
