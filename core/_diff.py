"""Unified diffs of long texts: a graph's code before and after a pass.

``difflib.SequenceMatcher`` looks for the longest matching block in every gap between the
matches it has found. On two texts with changes spread all over (a pass that rewrote every
block of a 9k-node graph) that is quadratic: 10 s for one diff of 9k lines, 15 s for 25k
(found by a new-user check of ``fxpasses run --print-changed``). Here the lines that occur
exactly once in each text are matched first, in the order of both (the longest increasing
subsequence of their positions: Bram Cohen's patience diff, as ``git diff --patience``), the
same is done again inside each gap between them, and ``difflib`` runs only in gaps with no
such line left (short in a graph's code, whose lines name its nodes; on a text of repeated
lines it is difflib's ordinary speed). The output has ``difflib.unified_diff``'s format.
"""

from __future__ import annotations

import bisect
import difflib
from collections import Counter
from typing import Callable, Iterator, Sequence

__all__ = ["unified_diff"]


def unified_diff(
    a: Sequence[str],
    b: Sequence[str],
    fromfile: str = "",
    tofile: str = "",
    n: int = 3,
    lineterm: str = "\n",
    section: Callable[[str], bool] | None = None,
) -> Iterator[str]:
    """The lines of a unified diff from ``a`` to ``b`` (lists of lines, as
    ``str.splitlines(keepends=True)`` gives), with ``n`` lines of context: the format of
    ``difflib.unified_diff`` (no dates), in time about linear in the number of lines where
    the texts share most of their unique lines. Nothing is yielded when they are equal.

    ``section``: which lines of ``a`` start a section; each hunk header then ends with the
    last such line at or before the hunk's first line (as ``git diff`` names the function a
    hunk is in: ``@@ -19,7 +19,8 @@ # submodule 'true_graph_0':``)."""
    starts = [i for i, line in enumerate(a) if section(line)] if section is not None else []
    started = False
    for group in _PatienceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(n):
        if not started:
            started = True
            yield f"--- {fromfile}{lineterm}"
            yield f"+++ {tofile}{lineterm}"
        first, last = group[0], group[-1]
        k = bisect.bisect_right(starts, first[1]) - 1
        name = " " + a[starts[k]].rstrip("\r\n") if k >= 0 else ""
        yield f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@{name}{lineterm}"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for line in a[i1:i2]:
                    yield " " + line
                continue
            if tag in ("replace", "delete"):
                for line in a[i1:i2]:
                    yield "-" + line
            if tag in ("replace", "insert"):
                for line in b[j1:j2]:
                    yield "+" + line


def _range(start: int, stop: int) -> str:
    """A hunk's range in the unified format (as difflib writes it: 1-based, ``start,length``;
    the length left out when it is 1, and an empty range at the line before it)."""
    beginning = start + 1
    length = stop - start
    if length == 1:
        return str(beginning)
    if not length:
        beginning -= 1
    return f"{beginning},{length}"


class _PatienceMatcher(difflib.SequenceMatcher):
    """A ``SequenceMatcher`` whose matching blocks come from :func:`_match` (its opcodes and
    grouped opcodes are the base class's, computed from them)."""

    def get_matching_blocks(self) -> list[difflib.Match]:
        if self.matching_blocks is not None:
            return self.matching_blocks
        pairs: list[tuple[int, int]] = []
        _match(self.a, self.b, 0, len(self.a), 0, len(self.b), pairs)
        blocks: list[list[int]] = []
        for i, j in pairs:  # runs of consecutive matched lines, as difflib's blocks
            if blocks and blocks[-1][0] + blocks[-1][2] == i and blocks[-1][1] + blocks[-1][2] == j:
                blocks[-1][2] += 1
            else:
                blocks.append([i, j, 1])
        self.matching_blocks = [difflib.Match(i, j, k) for i, j, k in blocks] + [difflib.Match(len(self.a), len(self.b), 0)]
        return self.matching_blocks


def _match(a: Sequence[str], b: Sequence[str], alo: int, ahi: int, blo: int, bhi: int, out: list[tuple[int, int]]) -> None:
    """Append to ``out``, in order, the ``(i, j)`` of the lines ``a[i] == b[j]`` matched in
    ``a[alo:ahi]`` and ``b[blo:bhi]`` (see the module doc).

    ``todo`` holds gaps ``(alo, ahi, blo, bhi)`` still to match and matched pairs ``(i, j)``,
    the leftmost at the end: what is popped is left of everything still on it, so pairs found
    while matching it go straight to ``out`` (an explicit stack: a recursion would be as deep
    as a long text has unique lines)."""
    todo: list[tuple[int, ...]] = [(alo, ahi, blo, bhi)]
    while todo:
        item = todo.pop()
        if len(item) == 2:
            out.append(item)  # type: ignore[arg-type]
            continue
        alo, ahi, blo, bhi = item
        # equal lines at both ends first (most of a text a pass left alone)
        while alo < ahi and blo < bhi and a[alo] == b[blo]:
            out.append((alo, blo))
            alo += 1
            blo += 1
        while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
            ahi -= 1
            bhi -= 1
            todo.append((ahi, bhi))  # after the middle: pushed first, right to left
        if alo == ahi or blo == bhi:
            continue
        anchors = _unique_common(a, b, alo, ahi, blo, bhi)
        if anchors:
            items: list[tuple[int, ...]] = []
            pi, pj = alo, blo
            for i, j in anchors:
                items += [(pi, i, pj, j), (i, j)]
                pi, pj = i + 1, j + 1
            items.append((pi, ahi, pj, bhi))
            todo.extend(reversed(items))
            continue
        # no line occurs once on each side: difflib's own matching, on this gap only, with
        # its default heuristic for lines that fill the text (autojunk=False is about cubic
        # on a run of repeated lines: 4 s for 1,000 of them)
        sm = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi])
        for m in sm.get_matching_blocks()[:-1]:
            out.extend((alo + m.a + k, blo + m.b + k) for k in range(m.size))


def _unique_common(a: Sequence[str], b: Sequence[str], alo: int, ahi: int, blo: int, bhi: int) -> list[tuple[int, int]]:
    """The lines that occur once in ``a[alo:ahi]`` and once in ``b[blo:bhi]``, as ``(i, j)``
    pairs: the longest chain of them increasing in both ``i`` and ``j`` (patience sorting:
    the piles' tops in a sorted list, bisected; O(k log k) for k such lines)."""
    ca = Counter(a[alo:ahi])
    cb = Counter(b[blo:bhi])
    where_b = {b[j]: j for j in range(blo, bhi) if cb[b[j]] == 1}
    pairs = [(i, where_b[a[i]]) for i in range(alo, ahi) if ca[a[i]] == 1 and a[i] in where_b]
    if not pairs:
        return []
    tops: list[int] = []  # the smallest j ending an increasing chain of each length
    top_at: list[int] = []  # index into pairs of that chain's end
    back: list[int] = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        p = bisect.bisect_left(tops, j)
        if p == len(tops):
            tops.append(j)
            top_at.append(k)
        else:
            tops[p] = j
            top_at[p] = k
        back[k] = top_at[p - 1] if p else -1
    chain = []
    k = top_at[-1]
    while k >= 0:
        chain.append(pairs[k])
        k = back[k]
    chain.reverse()
    return chain
