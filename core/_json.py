"""JSON text that every JSON parser reads.

Python's ``json`` writes ``Infinity``, ``-Infinity`` and ``NaN`` for non-finite floats, which
RFC 8259 does not allow and other parsers (JavaScript's ``JSON.parse``, ``jq``) reject; a
plugin option's default ``float("inf")`` or an output error of ``nan`` then made ``fxpasses
show --format json``, ``fxpasses schema`` or ``report.json`` unreadable outside Python.
:func:`dumps` writes them as the strings ``"inf"``, ``"-inf"`` and ``"nan"``, as TOML and YAML
spell them.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["dumps", "finite"]


def _spelled(x: float) -> Any:
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def finite(obj: Any) -> Any:
    """``obj`` (JSON-able: lists, tuples, dicts, scalars) with every non-finite float written
    as the string ``"inf"``, ``"-inf"`` or ``"nan"``, tuples as lists."""
    if isinstance(obj, float):
        return _spelled(obj)
    if isinstance(obj, dict):
        return {(_spelled(k) if isinstance(k, float) else k): finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(obj, **kwargs)`` with every non-finite float (in lists, tuples and dicts,
    keys too) written as the string ``"inf"``, ``"-inf"`` or ``"nan"``; never ``Infinity`` or
    ``NaN``. A ``default`` that returns a non-finite float raises ``ValueError``."""
    return json.dumps(finite(obj), allow_nan=False, **kwargs)
