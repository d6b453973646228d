"""Shared fixtures. Tests import fxpasses as installed (``pip install -e .``), never from core/."""

from __future__ import annotations

import pytest
import torch

DIALECTS = ("symbolic_trace", "dynamo", "export")


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture(params=DIALECTS)
def dialect(request: pytest.FixtureRequest) -> str:
    """Each of the three graph dialects in turn."""
    return request.param


@pytest.fixture
def registry():
    """A fresh registry loaded from the installed entry points."""
    import fxpasses

    return fxpasses.Registry()
