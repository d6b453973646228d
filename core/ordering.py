"""Ordering a pipeline by the passes' declared dependencies.

Constraints, for an entry ``X`` of the pipeline:

- ``X.requires = (R,)``: some ``R`` runs before ``X``. The nearest ``R`` before ``X`` is used;
  else the first ``R`` after ``X`` is moved before it; else an ``R`` (with default options) is
  *pulled in* just before ``X``. Requirements of pulled-in passes are resolved the same way.
- ``X.after = (A,)``: an ``A`` runs before ``X`` when the pipeline has one (nothing is pulled
  in): the nearest ``A`` before ``X``; else the first ``A`` after ``X`` is moved before it.
- ``X.before = (B,)``: a ``B`` runs after ``X`` when the pipeline has one: the nearest ``B``
  after ``X``; else ``X`` is moved before the last ``B``.

So with one entry of ``A`` (``B``) the constraint orders ``X`` against it, and with several the
user's own order is kept where it already meets the constraint: in
``eliminate_dead_code,fuse_conv_bn,eliminate_dead_code`` the first dead code elimination stays
first (``fuse_conv_bn`` declares ``before = ("eliminate_dead_code",)``, which the second meets).

The order is a stable topological sort (stdlib ``graphlib``): among the entries whose
constraints are met, the one given first by the user runs first, where an entry that others
must wait for counts as given at the position of its earliest dependent. So the user's order is
kept wherever the constraints allow, and a required pass moves up to just before the first
pass that needs it rather than that pass moving down. A cycle is reported as its path, ``a -> b -> a`` (each arrow
reads "must run before"), with the declaration behind each arrow, naming the plugin that
registered the declaring pass (``cyc_a (advcfg-cycle 0.0.1) requires cyc_b``; not a built-in
pass's, nor that of a class registered from Python or given in the pipeline).
"""

from __future__ import annotations

import graphlib
import heapq
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import CycleError

__all__ = ["Item", "Move", "order"]


@dataclass
class Item:
    """A pipeline entry to be ordered: its pass name, class, and payload (options etc.)."""

    name: str
    cls: Any
    payload: Any = None
    pulled_in_by: str | None = None
    reasons: list[str] = field(default_factory=list)
    #: the pass names this item stands for, when not just ``name`` (a fixpoint group: its
    #: members' names, which other passes' constraints name)
    provides: tuple[str, ...] = ()

    def names(self) -> tuple[str, ...]:
        return self.provides or (self.name,)


@dataclass(frozen=True)
class Move:
    """Why ``first`` runs before ``second`` although the user gave them the other way."""

    first: str
    second: str
    why: str


def order(items: list[Item], resolve: Callable[[str, str], Any]) -> list[Item]:
    """Return ``items`` (plus pulled-in requirements) in a valid order.

    ``resolve(name, needed_by)`` returns the pass class for a required pass that is not in the
    pipeline (raising the registry's error when it does not exist). Each returned item has
    ``reasons`` explaining a pull-in or a move.

    Raises:
        CycleError: the constraints form a cycle.
    """
    items = list(items)
    _pull_in(items, resolve)
    by_name: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        for name in it.names():
            by_name.setdefault(name, []).append(i)

    preds: dict[int, set[int]] = {i: set() for i in range(len(items))}
    # who declares each arrow, how, and the declaring pass class (a cycle names its plugin)
    declared: dict[tuple[int, int], tuple[str, str, Any]] = {}

    def edge(u: int, v: int, it: Item, kind: str, name: str, how: str) -> None:
        if u != v and items[u].name != items[v].name:
            preds[v].add(u)
            # who declares it: the item's name, or the member of a group that does
            who = getattr(it.cls, "declared_by", None) or (lambda kind, name: it.name)
            declared.setdefault((u, v), (who(kind, name), how, _declaring_class(it, kind, name)))

    for i, it in enumerate(items):
        for r in it.cls.requires:  # (pulled in when missing: always present)
            edge(_nearest(by_name[r], i, before=True), i, it, "requires", r, f"requires {r}")
        for a in it.cls.after:
            if a in by_name:
                edge(_nearest(by_name[a], i, before=True), i, it, "after", a, f"declares after = {a}")
        for b in it.cls.before:
            if b in by_name:
                edge(i, _nearest(by_name[b], i, before=False), it, "before", b, f"declares before = {b}")

    ts = graphlib.TopologicalSorter(preds)
    try:
        ts.prepare()
    except graphlib.CycleError as exc:
        cycle = list(exc.args[1])  # each node is a predecessor of the next: u, v, ..., u
        names = [items[i].name for i in cycle]
        detail = "; ".join(with_plugin(*declared[(u, v)]) if (u, v) in declared else "?" for u, v in zip(cycle, cycle[1:]))
        raise CycleError(names, f"because: {detail}") from None

    # An entry that others wait for inherits the earliest position among them, so it moves up
    # to just before its first dependent instead of the dependent moving down.
    succs: dict[int, list[int]] = {i: [] for i in preds}
    for v, us in preds.items():
        for u in us:
            succs[u].append(v)
    rank = {i: i for i in preds}
    for i in reversed(list(graphlib.TopologicalSorter(preds).static_order())):
        for v in succs[i]:
            rank[i] = min(rank[i], rank[v])

    heap: list[tuple[int, int]] = []
    result: list[int] = []
    while ts.is_active():
        for i in ts.get_ready():
            heapq.heappush(heap, (rank[i], i))
        _, i = heapq.heappop(heap)
        result.append(i)
        ts.done(i)

    position = {i: k for k, i in enumerate(result)}
    for (u, v), (who, how, _) in declared.items():
        reason = f"moved before {items[v].name}: {who} {how}"
        if u > v and position[u] < position[v] and items[u].pulled_in_by is None and reason not in items[u].reasons:
            items[u].reasons.append(reason)  # (once: two instances of the pass may ask it)
    return [items[i] for i in result]


def _nearest(positions: list[int], i: int, *, before: bool) -> int:
    """Of the (ascending) ``positions`` of a pass's entries, the one a constraint of the entry
    at ``i`` orders it against: the nearest on the side asked for (``before``: the last one
    before ``i``; else the first after it), else the nearest on the other side (which moves)."""
    if before:
        earlier = [j for j in positions if j < i]
        return earlier[-1] if earlier else positions[0]
    later = [j for j in positions if j > i]
    return later[0] if later else positions[-1]


def _declaring_class(it: Item, kind: str, name: str) -> Any:
    """The pass class behind ``it`` that declares ``kind`` (``requires``, ``after``,
    ``before``) ``name``: the class of a fixpoint group's member (the steps of its payload)
    that declares it, else the item's own."""
    steps = it.payload if isinstance(it.payload, list) else [it.payload]
    for step in steps:
        cls = getattr(step, "cls", None)
        if isinstance(cls, type) and name in getattr(cls, kind, ()):
            return cls
    return it.cls


def with_plugin(who: str, how: str, cls: Any) -> str:
    """``who how``, ``who`` followed by the plugin that registered ``cls`` where one did:
    ``cyc_a (advcfg-cycle 0.0.1) requires cyc_b``."""
    from .registry import plugin_source  # (here: only a cycle's message needs it)

    source = plugin_source(cls)
    return f"{who} ({source}) {how}" if source else f"{who} {how}"


def _pull_in(items: list[Item], resolve: Callable[[str, str], Any]) -> None:
    present = {name for it in items for name in it.names()}
    i = 0
    while i < len(items):
        it = items[i]
        inserted = 0
        for r in it.cls.requires:
            if r in present:
                continue
            cls = resolve(r, it.name)
            new = Item(r, cls, None, pulled_in_by=it.name, reasons=[f"pulled in: required by {it.name}"])
            items.insert(i + inserted, new)
            present.add(r)
            inserted += 1
        if inserted:
            continue  # visit the pulled-in entries (they may require more) before ``it``
        i += 1
