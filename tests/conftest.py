"""Shared fixtures. Tests import fxpasses as installed (``pip install -e .``), never from core/."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest
import torch
from dists import installed_dist
from planted import PLANTED_SOURCE

DIALECTS = ("symbolic_trace", "dynamo", "export")

# every journaled pass in the suite is rolled back through its journal and compared with a
# snapshot (fxpasses.journal.checking); tests of the unchecked path turn it off themselves
os.environ.setdefault("FXPASSES_CHECK_JOURNAL", "1")


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch) -> None:
    """Plain tables wrap their last column to ``COLUMNS`` when it is set (a shell or CI may
    export it): the tests read whole lines."""
    monkeypatch.delenv("COLUMNS", raising=False)


#: the fxpasses plugins of this project (the built-in one and the bundled example); a test
#: installs others in a site folder of its own (tests/dists.py)
OWN_PLUGINS = {"fxpasses", "fxpasses-example-passes"}
#: where the environment's distributions are (any plugin a user installed is in one)
_START_PATHS = {os.path.realpath(p) for p in sys.path if p}


@pytest.fixture(autouse=True)
def _only_this_projects_plugins(monkeypatch) -> None:
    """Entry points of fxpasses plugins installed in the environment besides this project's
    are hidden from the registry, so that the tests' exact messages ("installed pass
    plugins: ...", "did you mean ...") do not depend on what else a user installed (found by a
    new-user check: seven tests failed beside an installed plugin). Distributions the tests
    make in their own site folders are kept."""
    import importlib.metadata as md

    import fxpasses  # noqa: F401 - (fxpasses.registry is also the name of a function there)

    registry_module = sys.modules["fxpasses.registry"]
    entry_points = md.entry_points

    def own(ep: Any) -> bool:
        dist = getattr(ep, "dist", None)
        path = getattr(dist, "_path", None)
        if dist is None or path is None:
            return True
        name = dist.metadata["Name"].lower().replace("_", "-")
        return name in OWN_PLUGINS or os.path.realpath(os.path.dirname(str(path))) not in _START_PATHS

    def filtered(**kwargs: Any) -> Any:
        found = entry_points(**kwargs)
        if kwargs.get("group") != registry_module.ENTRY_POINT_GROUP:
            return found
        return md.EntryPoints(ep for ep in found if own(ep))

    monkeypatch.setattr(registry_module.md, "entry_points", filtered)


@pytest.fixture
def fresh_dynamo() -> None:
    """``torch._dynamo.reset()`` first: keeps dynamo's recompile limit out of the way of
    repeated captures (``pytestmark = pytest.mark.usefixtures("fresh_dynamo")``)."""
    torch._dynamo.reset()


@pytest.fixture(params=DIALECTS)
def dialect(request: pytest.FixtureRequest) -> str:
    """Each of the three graph dialects in turn."""
    return request.param


@pytest.fixture
def registry():
    """A fresh registry loaded from the installed entry points."""
    import fxpasses

    return fxpasses.Registry()


@pytest.fixture
def planted_site(tmp_path, monkeypatch):
    """The planted-passes distribution (tests/planted.py) installed on sys.path."""
    with installed_dist(monkeypatch, tmp_path / "site", "planted-passes", "0.3", "fxp_planted", PLANTED_SOURCE) as site:
        yield site
