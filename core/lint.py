"""A fast check that ``Graph.lint()`` would pass, for the pipeline's ``verify="lint"``.

``torch.fx.Graph.lint()`` formats an error context string for every argument of every node
before it checks anything, and walks the graph twice; on a 100k-node graph it takes about as
long as a pass. :func:`lint_passes` checks the same invariants in one walk without formatting:

- every node's op is legal, its ``graph`` is this graph, and the node is in the graph's
  ``(op, target)`` lookup table under its own key;
- every input node was defined before the node (so it belongs to this graph: only this graph's
  nodes are recorded as defined);
- node names are unique;
- with an owning module: ``call_function`` targets are callable, the others strings, and every
  ``get_attr``/``call_module`` target resolves in the owning module (``call_module`` to a
  module), which also implies that ``GraphModule.get_submodule`` finds it.

It answers True only when ``Graph.lint()`` (and the pipeline's own submodule check) would
succeed: target paths are resolved through the modules' own registries (``_modules``,
``_parameters``, ``_buffers``, ``__dict__``), and any path it cannot resolve that way, or that a
class attribute could shadow, makes it answer False. On False the caller runs the real
``Graph.lint()``, which raises torch's exact error (or passes, for the rare target that only
``getattr`` resolves). Behaviour is therefore identical to calling ``Graph.lint()``, only
faster when the graph is fine.
"""

from __future__ import annotations

import torch
import torch.fx

from ._modpath import MISSING, ModulePaths

__all__ = ["lint_passes"]

_LEGAL_OPS = frozenset(("call_function", "call_method", "get_attr", "call_module", "placeholder", "output"))


def lint_passes(gm: torch.fx.GraphModule) -> bool:
    """True when ``gm.graph.lint()`` and a ``gm.get_submodule`` of every ``call_module``
    target would succeed (see the module doc); False when unsure."""
    graph = gm.graph
    root = graph.owning_module
    if root is not gm:
        return False
    table = getattr(getattr(graph, "_find_nodes_lookup_table", None), "table", None)
    if not isinstance(table, dict):
        return False
    legal = _LEGAL_OPS
    seen: set[torch.fx.Node] = set()
    add = seen.add
    defined = seen.issuperset
    targets: dict[tuple[str, str], bool] = {}
    paths = ModulePaths(root)
    count = 0
    for node in graph.nodes:
        count += 1
        op = node.op
        if op not in legal or node.graph is not graph:
            return False
        target = node.target
        try:
            bucket = table.get((op, target) if op == "call_function" else (op, None))
        except TypeError:  # unhashable target: let Graph.lint() say what it says
            return False
        if bucket is None or node not in bucket:
            return False
        if not defined(node._input_nodes):  # an input not defined before the node
            return False
        add(node)
        if op == "call_function":
            if not callable(target):
                return False
        elif not isinstance(target, str):
            return False
        elif op == "get_attr" or op == "call_module":
            key = (op, target)
            ok = targets.get(key)
            if ok is None:
                if op == "call_module":
                    ok = paths.module(target) is not MISSING
                else:
                    value = paths.attr(target)
                    ok = value is not MISSING and value is not None
                targets[key] = ok
            if not ok:
                return False
    # node names are unique (one set built in C instead of a check per node)
    return len({n.name for n in graph.nodes}) == count
