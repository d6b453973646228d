"""Real installed distributions for plugin tests, built in a temporary directory.

``make_dist`` writes a module and a ``*.dist-info`` folder (METADATA, entry_points.txt) into a
directory that the test puts on ``sys.path``: ``importlib.metadata`` then finds the entry
points exactly as it finds a pip-installed package's. Nothing is mocked.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator


def make_dist(
    site: Path,
    dist: str,
    version: str,
    module: str,
    source: str,
    entry_points: dict[str, str] | None = None,
) -> Path:
    """Create distribution ``dist`` with module ``module`` (``source``) in ``site``.

    ``entry_points`` maps entry point names of the ``fxpasses`` group to values; default
    ``{dist: module}``.
    """
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    eps = entry_points if entry_points is not None else {dist: module}
    lines = ["[fxpasses]"] + [f"{k} = {v}" for k, v in eps.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    (info / "RECORD").write_text("")
    return info


def forget_modules(*names: str) -> None:
    for n in names:
        sys.modules.pop(n, None)


@contextlib.contextmanager
def installed_dist(monkeypatch: Any, site: Path, dist: str, version: str, module: str, source: str) -> Iterator[Path]:
    """Distribution ``dist`` (see :func:`make_dist`) installed in ``site`` on ``sys.path`` for
    the ``with`` block; its module is imported afresh and forgotten after."""
    make_dist(site, dist, version, module, source)
    forget_modules(module)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    try:
        yield site
    finally:
        forget_modules(module)


GOOD_PASS = '''
import fxpasses
from fxpasses import NodePass, on, Replace

class {cls}(NodePass):
    """{doc}"""
    name = "{name}"

    @on("mul")
    def mul(self, node, ctx):
        return None

@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register({cls})
'''


def good_pass_source(name: str, doc: str = "A test pass.") -> str:
    cls = "".join(p.title() for p in name.split("_")) + "Pass"
    return GOOD_PASS.format(cls=cls, name=name, doc=doc)
