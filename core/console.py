"""Terminal output: tables through ``rich`` on a terminal, plain aligned text otherwise."""

from __future__ import annotations

import sys
from typing import Sequence, TextIO

__all__ = ["print_table", "plain_table"]


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, a dashed rule under the header.

    Widths are terminal cells (``rich.cells.cell_len``): a combining mark takes none (a name
    typed decomposed, ``U`` and U+0308), a CJK character two. A cell of several lines (a
    rejection reason with pydantic's per-field details) takes as many lines of its row, each
    continued in its own column, so no line of it starts at the left margin where a row would."""
    from rich.cells import cell_len

    split = _split_cells(headers, rows)
    widths = _widths(split, len(headers))
    lines = []
    for parts in split:
        for k in range(max(map(len, parts))):
            texts = [p[k] if k < len(p) else "" for p in parts]
            lines.append("  ".join(t + " " * (w - cell_len(t)) for t, w in zip(texts, widths)).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _split_cells(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[list[list[str]]]:
    """The header and each row, each cell as its lines (an empty cell as one empty line)."""
    return [[str(c).splitlines() or [""] for c in r] for r in [headers, *rows]]


def _widths(split: list[list[list[str]]], n: int) -> list[int]:
    """The width in terminal cells (``rich.cells.cell_len``) of each of the first ``n``
    columns of :func:`_split_cells`' cells: their widest line."""
    from rich.cells import cell_len

    return [max(cell_len(line) for r in split for line in r[i]) for i in range(n)]


def print_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    file: TextIO | None = None,
) -> None:
    """Print a table: a ``rich`` table when ``file`` is a terminal, else :func:`plain_table`,
    its last column wrapped to fit ``COLUMNS`` when that is set (as ``COLUMNS=100 fxpasses
    show NAME | less`` asks; unset, lines stay whole, for ``grep``)."""
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
    width = _columns()
    if width and rows:
        rows = _last_column_wrapped(headers, rows, width)
    print(plain_table(headers, rows), file=out)


def _columns() -> int | None:
    """``COLUMNS`` as a number of terminal cells, or None when unset or not a number."""
    import os

    try:
        value = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return None
    return value if value > 0 else None


def _last_column_wrapped(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[list[str]]:
    """``rows`` with each last cell wrapped (:func:`textwrap.fill`) to what ``width`` leaves
    it after the other columns, at least 20 characters."""
    import textwrap

    n = len(headers)
    others = _widths(_split_cells(headers, rows), n - 1)
    room = max(20, width - sum(others) - 2 * (n - 1))
    return [
        [*map(str, r[:-1]), "\n".join(textwrap.fill(line, room) if line else "" for line in str(r[-1]).splitlines())]
        for r in rows
    ]
