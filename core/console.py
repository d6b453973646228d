"""Terminal output: tables through ``rich`` on a terminal, plain aligned text otherwise."""

from __future__ import annotations

import sys
from typing import Sequence, TextIO

__all__ = ["print_table", "plain_table"]


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, a dashed rule under the header.

    A cell of several lines (a rejection reason with pydantic's per-field details) takes as
    many lines of its row, each continued in its own column, so no line of it starts at the
    left margin where a row would."""
    cells = [list(map(str, headers))] + [[str(c) for c in r] for r in rows]
    widths = [max(len(line) for r in cells for line in r[i].splitlines() or [""]) for i in range(len(headers))]
    lines = []
    for r in cells:
        parts = [c.splitlines() or [""] for c in r]
        for k in range(max(map(len, parts))):
            lines.append("  ".join((p[k] if k < len(p) else "").ljust(w) for p, w in zip(parts, widths)).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def print_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    file: TextIO | None = None,
) -> None:
    """Print a table: a ``rich`` table when ``file`` is a terminal, else :func:`plain_table`."""
    out = file or sys.stdout
    if out.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for h in headers:
            table.add_column(h)
        for r in rows:
            table.add_row(*(str(c) for c in r))
        Console(file=out).print(table)
        return
    if title:
        print(title, file=out)
    print(plain_table(headers, rows), file=out)
