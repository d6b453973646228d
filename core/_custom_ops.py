"""The Python modules that define a graph's custom operators: recorded on saving, imported on loading.

A pass may insert a custom operator (``torch.ops.acme.linear_relu``, made with
``torch.library.custom_op`` or ``torch.library.Library.define`` in a plugin's module). A saved
program or reproducer graph names it by its qualified name only, and a fresh process knows
it only once the module that defines it is imported: ``torch.export.load`` then failed with
"Failed deserializing node ...", which said nothing of the operator's module.

:func:`op_modules` finds the defining module of each such operator: the module of the
function ``torch.library.custom_op`` wrapped, or, for an operator defined through
``torch.library.Library``, the module whose file the dispatcher records as the place of its
definition (``torch._C._dispatch_dump``'s ``registered at FILE:LINE``). Operators of torch's
own namespaces and those defined in C++ have none. The writers record these modules with
the pytree modules (:mod:`fxpasses._pytree_types`), and the loaders import them first.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Iterable

import torch

__all__ = ["defining_module", "op_modules", "graph_op_modules", "unknown_op"]

#: Namespaces of torch's own operators (never a user's module).
_TORCH_NAMESPACES = frozenset({"aten", "prims", "prim", "_c10d_functional", "c10d", "quantized", "higher_order", "profiler", "inductor", "_quantized", "torchvision"})

_REGISTERED_AT = re.compile(r"^debug: registered at (.+?):\d+\s*$", re.M)
_UNKNOWN_OP = re.compile(r"torch\.ops\.([A-Za-z_][\w]*)\.([A-Za-z_][\w]*)(?:\.([A-Za-z_][\w]*))?")


def defining_module(op: Any) -> str | None:
    """The importable module that defines the custom operator ``op`` (an ``OpOverload`` or
    ``OpOverloadPacket``), or None: an operator of torch's own namespaces, one defined in C++
    or in ``__main__``, or one whose definition is not found."""
    if isinstance(op, torch._ops.OpOverload):
        namespace, qualname = op.namespace, op._schema.name
    elif isinstance(op, torch._ops.OpOverloadPacket):
        namespace, qualname = op._qualified_op_name.split("::")[0], op._qualified_op_name
    else:
        return None
    if namespace in _TORCH_NAMESPACES:
        return None
    module = None
    try:
        from torch._library.custom_ops import OPDEFS

        opdef = OPDEFS.get(qualname)
        if opdef is not None:
            module = getattr(getattr(opdef, "_init_fn", None), "__module__", None)
    except Exception:  # noqa: BLE001 - torch's private table changed: fall back on the dispatcher
        module = None
    if module is None:
        try:
            dump = torch._C._dispatch_dump(qualname)
        except Exception:  # noqa: BLE001 - not a registered operator
            return None
        found = _REGISTERED_AT.search(dump)
        if found is None or not found.group(1).endswith(".py"):
            return None
        module = _module_of_file(found.group(1))
    if not module or module == "__main__" or module.split(".")[0] == "torch":
        return None
    return module


def _module_of_file(path: str) -> str | None:
    """The name of the imported module whose file is ``path``, or None."""
    try:
        want = os.path.realpath(path)
    except (OSError, ValueError):
        return None
    for name, mod in list(sys.modules.items()):
        file = getattr(mod, "__file__", None)
        if isinstance(file, str):
            try:
                if os.path.realpath(file) == want:
                    return name
            except (OSError, ValueError):
                continue
    return None


def op_modules(targets: Iterable[Any]) -> list[str]:
    """The modules (sorted) that define the custom operators among ``targets`` (the targets of
    a graph's ``call_function`` nodes; anything else among them is skipped)."""
    found: set[str] = set()
    seen: set[int] = set()
    for t in targets:
        if id(t) in seen:
            continue
        seen.add(id(t))
        module = defining_module(t)
        if module is not None:
            found.add(module)
    return sorted(found)


def graph_op_modules(gm: torch.fx.GraphModule) -> list[str]:
    """:func:`op_modules` of the ``call_function`` targets of ``gm``'s graph and of the graphs
    of its submodules (``torch.cond`` branches)."""
    targets = []
    for m in gm.modules():
        graph = getattr(m, "graph", None)
        if isinstance(graph, torch.fx.Graph):
            targets.extend(n.target for n in graph.nodes if n.op == "call_function")
    return op_modules(targets)


def unknown_op(text: str) -> str | None:
    """The operator (``torch.ops.acme.linear_relu.default``) an error message ``text`` names
    when that operator is not registered in this process, or None."""
    for found in _UNKNOWN_OP.finditer(text):
        namespace, name = found.group(1), found.group(2)
        if namespace in _TORCH_NAMESPACES:
            continue
        try:
            torch._C._dispatch_find_schema_or_throw(f"{namespace}::{name}", found.group(3) if found.group(3) not in (None, "default") else "")
        except Exception:  # noqa: BLE001 - not registered: this is the one
            return found.group(0)
    return None
