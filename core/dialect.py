"""Which capture produced a graph: ``symbolic_trace``, ``dynamo`` or ``export``.

=================  ================================================================
dialect            recognised by
=================  ================================================================
``export``         ATen ``OpOverload`` targets (``torch.ops.aten.*``) in call_function
                   nodes, or a module made by ``torch.export(...).module()``
``dynamo``         placeholders carrying ``meta["example_value"]`` (TorchDynamo's fake
                   values) or ``gm.meta["dynamo_flat_name_to_original_fqn"]``
``symbolic_trace`` anything else (torch-level ops, ``call_module`` for submodules)
=================  ================================================================
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
    overload = torch._ops.OpOverload
    for key in gm.graph._find_nodes_lookup_table.table:
        if key[0] == "call_function" and isinstance(key[1], overload):
            return "export"
    for node in gm.graph.find_nodes(op="placeholder"):
        if "example_value" in node.meta:
            return "dynamo"
        break
    return "symbolic_trace"
