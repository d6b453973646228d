"""Graph order of nodes: FX's ``Node._sort_key``, compared in C where torch can.

Recent torch (2.13, for one) keeps each node's sort key in its C base (``torch._C._NodeBase``)
and compares nodes by it there (``_NodeBase.__lt__`` and the other rich comparisons). Reading
``node._sort_key`` from Python builds a new tuple on every read (about 0.15 us), so the helpers
here compare the nodes themselves when :data:`NODES_COMPARE_IN_C` holds, and the key tuples
otherwise (a torch whose ``Node`` is pure Python and may define no order).

- ``precedes(a, b)``: whether node ``a`` comes before node ``b`` of the same graph (both linked
  into it); ``operator.lt`` itself when nodes compare in C.
- ``in_graph_order(nodes)``: a new list of the nodes of one graph, sorted into graph order.
"""

from __future__ import annotations

import operator
from typing import Callable, Iterable

import torch
from torch.fx.node import Node

__all__ = ["NODES_COMPARE_IN_C", "precedes", "in_graph_order"]

NODES_COMPARE_IN_C: bool = "__lt__" in vars(getattr(torch._C, "_NodeBase", object))

_SORT_KEY = operator.attrgetter("_sort_key")


def _precedes_by_key(a: Node, b: Node) -> bool:
    return a._sort_key < b._sort_key  # type: ignore[attr-defined, no-any-return]


def _sorted_by_key(nodes: Iterable[Node]) -> list[Node]:
    return sorted(nodes, key=_SORT_KEY)


precedes: Callable[[Node, Node], bool]
in_graph_order: Callable[[Iterable[Node]], list[Node]]
if NODES_COMPARE_IN_C:
    precedes = operator.lt
    in_graph_order = sorted  # type: ignore[assignment]
else:  # pragma: no cover - a torch without _NodeBase.__lt__
    precedes = _precedes_by_key
    in_graph_order = _sorted_by_key
