"""A global rewrite counter with a limit, in the spirit of LLVM's ``-opt-bisect-limit``.

A *rewrite* is one action a node hook returns other than keep (``Replace(...)`` or ``ERASE``;
``Replace(node)`` of the visited node itself changes nothing and is a keep),
or one run of a transforming :class:`~fxpasses.GraphPass`. Rewrites are numbered from 1 across
the whole pipeline run, in the order they are applied. With a limit ``N`` the runner applies
rewrites 1..N and then stops: the pass that made rewrite ``N`` calls no further hook (its
``finish`` still runs, to clean up after the rewrites it made) and every later transforming
pass is not run at all. Analyses (``kind = "analysis"``) never rewrite, are not counted and
always run.

A pass is *cut off* when the limit stopped a rewrite it would have made: a whole-graph pass
that was not run and would have changed the graph (or failed), and a node pass whose hooks
would have returned an action other than keep (or raised) on a node the limit kept them
from. That is found by calling those hooks anyway, after the pass's ``finish`` (or, for a
node pass not run at all, after its ``setup``), until the first one that does not keep its
node, and by running a whole-graph pass anyway; nothing the hooks return is applied, and
what they (or the pass's ``run``) did to the graph, the module and the pass's counters is
undone (:func:`fxpasses.runner.would_rewrite`). A pass whose remaining hooks all keep their
nodes, or a whole-graph pass that would have changed nothing, applied every rewrite it would
have made: not cut off. ``RewriteLimit(N, probe=False)`` skips those calls and marks a pass
cut off as soon as the limit leaves any of its nodes unvisited, or keeps it from running
(``fxpasses bisect``, which does not read it, does so).

``Pipeline.run(gm, inputs, rewrite_limit=N)`` and ``fxpasses run --rewrite-limit N`` apply a
limit by hand; ``fxpasses bisect`` (:mod:`fxpasses.bisect`) searches for the first bad one.
Runs without a limit take the ordinary, uncounted path of :func:`fxpasses.runner.run_pass`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch.fx

from .context import PassContext, describe_node, user_source_line
from .errors import node_text
from .passes import ERASE, KEEP, Erase, Keep, Pass, Replace
from .runner import run_pass, would_rewrite

__all__ = ["RewriteRecord", "RewriteLimit", "run_pass_limited"]


@dataclass
class RewriteRecord:
    """One rewrite: its global number, the pass and plan step that made it, the node.

    Attributes:
        index: global rewrite number, from 1.
        pass_name: the pass that made it; ``step`` its plan position, from 1 (as
            ``fxpasses check`` numbers the plan and bisect's ``step`` counts).
        pass_index: the rewrite's number within that pass's run, from 1.
        node: ``describe_node`` of the node (``name``, ``op``, ``target``, ``args``,
            ``kwargs``) as it was before the rewrite; None for a whole-graph pass.
        source_line: the node's user source line (``meta["stack_trace"]``), if recorded.
        action: what was done: ``Replace(%x)``, ``Replace(0.0)``, ``ERASE`` or ``run``.
        iteration: the fixpoint iteration of the pass that made it (1, 2, ...; 0 outside
            a fixpoint group), as ``PassReport.iteration``.
    """

    index: int
    pass_name: str
    step: int
    pass_index: int
    node: dict[str, str] | None
    source_line: str | None
    action: str
    iteration: int = 0

    def describe(self) -> str:
        of = f"pass {self.pass_name!r}" + (f" in fixpoint iteration {self.iteration}" if self.iteration else "")
        where = f"rewrite #{self.index} (#{self.pass_index} of {of})"
        if self.node is None:
            return f"{where}: the whole-graph pass run"
        text = f"{where}: {self.action} at node {node_text(self.node)}"
        if self.source_line:
            text += f"\n  user code: {self.source_line}"
        return text

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class PassSpan:
    """The rewrites of one plan step: numbers ``first .. first + count - 1``. ``ran``: False
    when the limit was reached before the step, so the pass did not run (its hooks may have
    been probed, with whatever they did undone). ``iteration``: the fixpoint iteration that
    ran it (0 outside a fixpoint group)."""

    name: str
    step: int
    first: int
    count: int = 0
    cut_off: bool = False
    ran: bool = True
    iteration: int = 0


@dataclass
class RewriteLimit:
    """Counts rewrites across one pipeline run and stops applying them past ``limit``.

    ``limit=None`` counts without stopping. After the run, ``count`` is the number of
    rewrites applied, ``spans`` gives each step's range and whether the limit cut it off, and
    ``last`` describes rewrite number ``limit`` (the last one applied) when the run got that
    far. ``probe=False``: a pass counts as cut off once the limit leaves any of its nodes
    unvisited, without calling their hooks to see whether they would have rewritten them
    (see the module doc).
    """

    limit: int | None = None
    count: int = 0
    last: RewriteRecord | None = None
    spans: list[PassSpan] = field(default_factory=list)
    probe: bool = True
    #: a probe copies every tensor first (set by a pipeline run with ``snapshot_tensors``)
    copy_tensors: bool = False

    def __post_init__(self) -> None:
        if self.limit is not None and (not isinstance(self.limit, int) or self.limit < 0):
            raise ValueError(f"rewrite limit must be an int >= 0, got {self.limit!r}")

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.count >= self.limit

    def _take(self, span: PassSpan, node: torch.fx.Node | None, action: Any) -> None:
        self.count += 1
        span.count += 1
        if self.limit is not None and self.count == self.limit:
            self.last = RewriteRecord(
                index=self.count,
                pass_name=span.name,
                step=span.step + 1,
                pass_index=span.count,
                node=describe_node(node) if node is not None else None,
                source_line=user_source_line(node) if node is not None else None,
                action=_action_str(action),
                iteration=span.iteration,
            )


def _is_keep(action: Any) -> bool:
    return action is None or action is KEEP or isinstance(action, Keep)


def _action_str(action: Any) -> str:
    if action is None:
        return "run"
    if action is ERASE or isinstance(action, Erase):
        return "ERASE"
    if isinstance(action, Replace):
        v = action.value
        return f"Replace(%{v.name})" if isinstance(v, torch.fx.Node) else f"Replace({v!r})"
    return repr(action)


def run_pass_limited(
    p: Pass, gm: torch.fx.GraphModule, ctx: PassContext, limit: RewriteLimit, step: int
) -> tuple[bool | None, PassSpan]:
    """Run ``p`` like :func:`~fxpasses.runner.run_pass`, counting rewrites against ``limit``.

    Returns the pass's change hint and its :class:`PassSpan`; ``span.cut_off`` tells that
    the limit stopped a rewrite the pass would have made, in it or by keeping it from
    running at all (see the module doc).

    Raises:
        HookError: as :func:`~fxpasses.runner.run_pass`.
    """
    span = PassSpan(type(p).name, step, limit.count + 1, iteration=getattr(ctx, "iteration", 0) or 0)
    limit.spans.append(span)
    if type(p).kind == "analysis":
        return run_pass(p, gm, ctx), span
    if limit.exhausted:
        span.ran = False
        if limit.probe:
            span.cut_off = would_rewrite(p, gm, ctx, limit.copy_tensors)
        else:
            span.cut_off = True
        return False, span
    return run_pass(p, gm, ctx, budget=_Budget(limit, span)), span


class _Budget:
    """The runner's view of a :class:`RewriteLimit` while one pass runs."""

    def __init__(self, limit: RewriteLimit, span: PassSpan) -> None:
        self.limit = limit
        self.span = span

    @property
    def exhausted(self) -> bool:
        return self.limit.exhausted

    def take(self, node: torch.fx.Node | None, action: Any) -> None:
        self.limit._take(self.span, node, action)

    @property
    def probe(self) -> bool:
        return self.limit.probe

    @property
    def copy_tensors(self) -> bool:
        return self.limit.copy_tensors

    def cut(self) -> None:
        self.span.cut_off = True
