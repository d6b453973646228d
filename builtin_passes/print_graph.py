"""``print_graph``: write the graph out for debugging, at its place in a pipeline (analysis).

Formats (option ``format``):

- ``"table"`` (default): a title line, then one row per node: index, name, op, target, args
  (kwargs appended as ``key=value``), and the value's dtype and shape (``float32[2, 3]``;
  ``int64[]`` for a 0-d tensor; ``(float32[2], int64[2])`` for tuple outputs; ``-`` when
  unknown). Shapes come from ``node.meta`` (``val``, ``example_value`` or ``tensor_meta``):
  run ``propagate_shapes`` first to have them for every node. Long args are cut at 80
  characters.
- ``"code"``: the Python code of the graph as it is now (``graph.python_code``; accurate even
  before the pipeline's final recompile).
- ``"graph"``: the FX IR listing (``str(gm.graph)``).

Where it goes (option ``file``): by default to ``sys.stderr`` (printed, not logged: a debugging
pass should show its output without logging configuration; stdout stays free for the CLI's
report). With ``file = "path"`` the text is written to that file (parent directories are
created; the file is overwritten, or appended to with ``append = true``); ``file = "-"`` is
standard output, as for most command-line tools.

Option ``title``: the first line (default: ``graph (<dialect>, <n> nodes)``).

It does not change the graph. Counter ``nodes``: nodes printed. A ``file`` that is a folder,
empty, or under a file is an options error when the options are read (``fxpasses check`` says
so); one that cannot be written at run time (permissions, a disk full) raises a
``UserError`` naming it (the user's mistake, reported as such, not as the pass's failure).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

import torch
import torch.fx
from pydantic import Field, field_validator

from fxpasses import GraphPass, PassContext, PassOptions, UserError
from fxpasses.context import _short, describe_node
from fxpasses.errors import nearest_existing, os_reason

__all__ = ["PrintGraph", "format_graph", "value_str"]

_MAX_ARGS = 80


class PrintGraph(GraphPass):
    """Print the graph (a table with shapes, the code or the FX IR) to stderr or a file."""

    name = "print_graph"
    writes_tensors = False  # rewrites the graph; new tensors only (no rollback guard needed)
    kind = "analysis"

    class Options(PassOptions):
        format: Literal["table", "code", "graph"] = Field(
            "table",
            description='"table": one row per node with args, dtype and shape; "code": the Python '
            'code; "graph": the FX IR listing',
        )
        file: str | None = Field(
            None, description='write to this file instead of stderr (missing parent folders are created); "-": stdout'
        )
        append: bool = Field(False, description="append to `file` instead of overwriting it")

        @field_validator("file")
        @classmethod
        def _writable_place(cls, value: str | None) -> str | None:
            """A path that names a file: not empty, not a folder, and no file where a folder
            of it would go (found when the options are read: `fxpasses check` too)."""
            if value is None or value == "-":
                return value
            problem = _file_problem(value)
            if problem is not None:
                raise ValueError(problem)
            return value
        title: str | None = Field(
            None, description='first line of the output (default: "graph (<dialect>, <n> nodes)")'
        )

    def run(self, gm: torch.fx.GraphModule, ctx: PassContext) -> bool:
        o = self.options
        title = o.title if o.title is not None else f"graph ({ctx.dialect}, {len(gm.graph.nodes)} nodes)"
        text = format_graph(gm.graph, o.format, title)
        if o.file is None or o.file == "-":
            print(text, file=sys.stderr if o.file is None else sys.stdout, flush=True)
        else:
            path = Path(o.file)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("a" if o.append else "w", encoding="utf-8") as f:
                    f.write(text + "\n")
            except OSError as exc:  # the user's path (checked when read; changed since, or not permitted)
                why = _file_problem(o.file) or os_reason(exc)
                raise UserError(f"print_graph cannot write file={o.file!r}: {why}") from exc
        ctx.count("nodes", len(gm.graph.nodes))
        return False


def _file_problem(value: str) -> str | None:
    """Why ``value`` cannot be the file ``print_graph`` writes (in words naming the path), or
    None: empty, an existing folder, or a path through an existing file."""
    if not value.strip():
        return "an empty path names no file (leave file out to print to stderr, or give \"-\" for stdout)"
    path = Path(value)
    if path.is_dir():
        return f"{value!r} is a folder; give the path of a file in it (e.g. {str(path / 'graph.txt')!r})"
    parent = nearest_existing(path.parent)
    if not parent.is_dir():
        return f"{str(parent)!r} is a file, not a folder, so {value!r} cannot be made under it"
    return None


def format_graph(graph: torch.fx.Graph, fmt: str = "table", title: str | None = None) -> str:
    """The text ``print_graph`` writes for ``graph`` (see the module doc)."""
    if fmt == "code":
        body = graph.python_code("self").src.lstrip("\n").rstrip()
    elif fmt == "graph":
        body = str(graph)
    elif fmt == "table":
        body = _table(graph)
    else:
        raise ValueError(f"unknown format {fmt!r}; expected table, code or graph")
    return f"{title}\n{body}" if title else body


def _table(graph: torch.fx.Graph) -> str:
    header = ("#", "name", "op", "target", "args", "value")
    rows = [header]
    for i, node in enumerate(graph.nodes):
        d = describe_node(node)
        args = d["args"][1:-1].rstrip(",")  # drop the tuple's parentheses
        if node.kwargs:
            kw = ", ".join(f"{k}={_short(v)}" for k, v in node.kwargs.items())
            args = f"{args}, {kw}" if args else kw
        if len(args) > _MAX_ARGS:
            args = args[: _MAX_ARGS - 3] + "..."
        rows.append((str(i), node.name, node.op, d["target"], args, value_str(node)))
    widths = [max(len(r[c]) for r in rows) for c in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def value_str(node: torch.fx.Node) -> str:
    """``float32[2, 3]`` for a tensor node, ``(…, …)`` for tuples, ``-`` when nothing is recorded."""
    meta = node.meta
    for key in ("val", "example_value", "tensor_meta"):
        v = meta.get(key)
        if v is not None:
            s = _value(v)
            if s is not None:
                return s
    return "-"


def _value(v: Any) -> str | None:
    if isinstance(v, torch.Tensor) or (hasattr(v, "shape") and hasattr(v, "dtype")):
        dtype = str(v.dtype).removeprefix("torch.")
        return f"{dtype}[{', '.join(str(d) for d in v.shape)}]"
    if isinstance(v, (tuple, list)) and not hasattr(v, "_fields"):
        parts = [_value(e) for e in v]
        if any(p is not None for p in parts):
            inner = ", ".join(p if p is not None else repr(e) for p, e in zip(parts, v))
            if isinstance(v, list):
                return f"[{inner}]"
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        return None
    if isinstance(v, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return str(v)
    return None
