"""fxpasses._diff.unified_diff: difflib's format, patience matching (linear on long texts)."""

from __future__ import annotations

import difflib
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from fxpasses._diff import unified_diff

_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def patch(a: list[str], diff: list[str]) -> list[str]:
    """``a`` with the unified ``diff`` applied, each hunk checked against ``a`` (its context
    and removed lines must be ``a``'s at the place its header names)."""
    out: list[str] = []
    pos = 0  # next line of a not yet copied
    k = 2 if diff else 0
    assert not diff or (diff[0].startswith("--- ") and diff[1].startswith("+++ "))
    while k < len(diff):
        m = _HUNK.match(diff[k])
        assert m, diff[k]
        start, length = int(m.group(1)), int(m.group(2) or 1)
        first = start - 1 if length else start  # 0-based index of the hunk's first old line
        assert first >= pos
        out += a[pos:first]
        pos = first
        k += 1
        while k < len(diff) and not diff[k].startswith("@@"):
            tag, line = diff[k][0], diff[k][1:]
            if tag in " -":
                assert a[pos] == line, (pos, a[pos], line)
                pos += 1
            if tag in " +":
                out.append(line)
            k += 1
    return out + a[pos:]


lines = st.lists(st.sampled_from([f"l{i}\n" for i in range(12)]), max_size=40)


@settings(max_examples=400, deadline=None)
@given(lines, lines, st.integers(0, 4))
def test_the_diff_turns_a_into_b_with_its_context_checked(a, b, n):
    diff = list(unified_diff(a, b, "a", "b", n=n))
    assert patch(a, diff) == b
    assert (diff == []) == (a == b)
    # each hunk has at most n lines of context at its ends
    for k, d in enumerate(diff):
        if d.startswith("@@"):
            body = []
            for e in diff[k + 1 :]:
                if e.startswith("@@"):
                    break
                body.append(e[0])
            lead = len(body) - len("".join(body).lstrip(" "))
            trail = len(body) - len("".join(body).rstrip(" "))
            assert lead <= n and trail <= n


def test_difflibs_format_exactly_on_a_pass_that_rewrote_every_block():
    """A graph's code before and after removing a dropout from each of 1,000 blocks: the same
    text as difflib.unified_diff (which takes seconds on it: quadratic where changes are
    everywhere; found by a new-user check of --print-changed on a 25k-node graph)."""
    a, b = [], []
    for i in range(1000):
        a += [f"dropout_{i} = self.drop(x_{i})\n", f"relu_{i} = torch.relu(dropout_{i});  dropout_{i} = None\n", f"x_{i + 1} = relu_{i} * 2\n"]
        b += [f"relu_{i} = torch.relu(x_{i})\n", f"x_{i + 1} = relu_{i} * 2\n"]
    ours = list(unified_diff(a, b, "before", "after", n=3))
    assert ours == list(difflib.unified_diff(a, b, "before", "after", n=3))
    # one hunk: each block's two lines out, one in, one of context
    assert patch(a, ours) == b and len(ours) == 3 + 4 * 1000


def test_hunk_headers_name_the_section_each_hunk_is_in():
    a = ["def f():\n", "    x = 1\n", "    return x\n", "# submodule 'b':\n", "def g():\n"] + [f"    y{i} = {i}\n" for i in range(8)]
    b = list(a)
    b[1] = "    x = 2\n"
    b[11] = "    y7 = 70\n"
    text = "".join(unified_diff(a, b, n=1, section=lambda line: line.startswith("# submodule")))
    headers = [line for line in text.splitlines() if line.startswith("@@")]
    # the first hunk is before any section line: no name; the second is inside 'b'
    assert headers == ["@@ -1,3 +1,3 @@", "@@ -11,3 +11,3 @@ # submodule 'b':"]
    assert text.replace(" # submodule 'b':", "") == "".join(difflib.unified_diff(a, b, n=1))
