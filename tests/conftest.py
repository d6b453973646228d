"""Shared fixtures. Tests import fxpasses as installed (``pip install -e .``), never from core/."""

from __future__ import annotations

import os

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
