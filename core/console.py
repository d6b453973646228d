"""Terminal output: tables through ``rich`` on a terminal, plain aligned text otherwise."""

from __future__ import annotations

import sys
from typing import Sequence, TextIO

__all__ = ["print_table", "plain_table"]


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, a dashed rule under the header."""
    cells = [list(map(str, headers))] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
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
