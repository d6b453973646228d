"""Pass, preset and option names: Python identifiers, compared in NFKC normal form.

Python normalizes identifiers to NFKC (PEP 3131), so ``café`` typed with a combining acute
accent (NFD, as some keyboards and macOS give it) is the identifier ``café``. Registered names
are required to be NFKC-normal (:func:`not_normal`) and every lookup by name normalizes what it
is given (:func:`normal_name`), so a name typed either way is the same name.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Callable, Mapping

__all__ = ["normal_name", "normal_keys", "not_normal"]


def normal_name(name: Any) -> Any:
    """``name`` NFKC-normalized, as Python normalizes identifiers (``"U\\u0308"`` typed
    decomposed is ``"\\xdc"``); anything not a string, and ASCII strings, as they are."""
    return unicodedata.normalize("NFKC", name) if isinstance(name, str) and not name.isascii() else name


def not_normal(name: str) -> str:
    """Why ``name`` cannot be a registered pass or preset name although it may look like one:
    it is not in NFKC normal form; ``""`` when it is."""
    normal = normal_name(name)
    if normal == name:
        return ""
    return (
        f"{ascii(name)}, not in NFKC normal form (the form Python gives identifiers and pipeline strings "
        f"give names): use {ascii(normal)} (both written with ascii(): they look alike)"
    )


def normal_keys(mapping: Mapping[Any, Any], clash: Callable[[Any, Any, Any, Any], Exception]) -> dict[Any, Any]:
    """``mapping`` with its keys NFKC-normalized (:func:`normal_name`), in order.

    Raises:
        the exception ``clash(name, first, second, value)`` makes, for two keys that are one
        name typed two ways (``first`` and ``second`` as given; ``value`` the second's): one
        would silently override the other."""
    out: dict[Any, Any] = {}
    given: dict[Any, Any] = {}
    for k, v in mapping.items():
        n = normal_name(k)
        if n in out:
            raise clash(n, given[n], k, v)
        out[n], given[n] = v, k
    return out
