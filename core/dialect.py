"""Which capture produced a graph: ``symbolic_trace``, ``dynamo`` or ``export``.

=================  ================================================================
dialect            recognised by
=================  ================================================================
``export``         a module made by ``torch.export(...).module()`` (or ``torch.export.load``),
                   or a graph with its pytree code generator whose placeholders all carry
                   ``meta["val"]`` (one rebuilt from a reproducer's ``graph.py``)
``dynamo``         placeholders carrying ``meta["example_value"]`` (TorchDynamo's fake
                   values) or ``gm.meta["dynamo_flat_name_to_original_fqn"]``
``symbolic_trace`` anything else (torch-level ops, ``call_module`` for submodules)
=================  ================================================================

ATen ``OpOverload`` targets alone do not make a graph ``export``: a symbolic_trace graph may
call ``torch.ops.aten.relu.default`` or a plugin's custom operator (a pass may insert one),
and ``export`` means the graph's input shapes are checked when it is called and its dtypes are
those it was traced for, which lets passes rely on the example inputs' (see
:mod:`fxpasses.guards`; ``simplify_algebra`` replaced ``y / 1`` by ``y`` in
such a symbolic_trace graph, and an integer ``y`` then came back as int64 instead of float:
a new-user check). ``make_fx`` graphs (ATen ops, ``meta["val"]``, no checks) are
``symbolic_trace`` for the same reason.
"""

from __future__ import annotations

import torch
import torch.fx

__all__ = ["detect_dialect", "DIALECTS"]

DIALECTS = ("symbolic_trace", "dynamo", "export")


def detect_dialect(gm: torch.fx.GraphModule) -> str:
    """Return ``"export"``, ``"dynamo"`` or ``"symbolic_trace"`` for ``gm`` (see module doc)."""
    if type(gm).__name__ == "_StatefulGraphModule" or any(
        c.__name__ == "_StatefulGraphModule" for c in type(gm).__mro__
    ):
        return "export"
    meta = getattr(gm, "meta", None) or {}
    if "dynamo_flat_name_to_original_fqn" in meta or "dynamo_compile_id" in meta:
        return "dynamo"
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    if placeholders and "example_value" in placeholders[0].meta:
        return "dynamo"
    if (
        isinstance(gm.graph._codegen, torch.fx.graph._PyTreeCodeGen)
        and placeholders
        and all("val" in n.meta for n in placeholders)
    ):
        return "export"
    return "symbolic_trace"
