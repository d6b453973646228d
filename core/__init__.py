"""fxpasses: a plugin-based pass registry for PyTorch FX graphs.

Public surface (everything else is internal):

- Writing passes: :class:`NodePass`, :class:`GraphPass`, :func:`on`, :class:`PassOptions`,
  the hook return values :data:`KEEP`, :class:`Replace`, :data:`ERASE`, :class:`PassContext`,
  and :data:`hookimpl` for plugin hooks.
- Finding passes: :func:`registry`, :class:`Registry`.
- Running passes: :class:`Pipeline` (``from_string``, ``from_config``, ``plan``, ``run``),
  :class:`Fixpoint` (a group of passes repeated until nothing changes), :func:`run`,
  :class:`RunReport`, :class:`PassReport`.
- Errors: :mod:`fxpasses.errors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    ConfigError,
    CycleError,
    DuplicatePassError,
    FxPassesError,
    InputGraphError,
    NodeHasUsersError,
    OptionsError,
    PassDefinitionError,
    PassDefinitionWarning,
    PassFailedError,
    PluginError,
    PluginWarning,
    ConfigWarning,
    UnknownPassError,
    UserError,
    VerificationError,
)
from .fixpoint import Fixpoint, FixpointWarning
from .hookspecs import hookimpl
from .passes import ERASE, KEEP, GraphPass, NodePass, Pass, PassOptions, Replace, on
from .registry import Registry, registry
from .report import PassReport, RunReport

__version__ = "0.1.0"

__all__ = [
    "__version__",
    # writing passes
    "NodePass",
    "GraphPass",
    "Pass",
    "PassOptions",
    "on",
    "KEEP",
    "ERASE",
    "Replace",
    "PassContext",
    "hookimpl",
    # finding and running passes
    "registry",
    "Registry",
    "Pipeline",
    "Fixpoint",
    "FixpointWarning",
    "run",
    "RunReport",
    "PassReport",
    # errors
    "FxPassesError",
    "UserError",
    "ConfigError",
    "UnknownPassError",
    "OptionsError",
    "CycleError",
    "DuplicatePassError",
    "PluginError",
    "PluginWarning",
    "ConfigWarning",
    "PassDefinitionError",
    "PassDefinitionWarning",
    "NodeHasUsersError",
    "PassFailedError",
    "VerificationError",
    "InputGraphError",
]

if TYPE_CHECKING:  # pragma: no cover
    from .context import PassContext
    from .pipeline import Pipeline, run

# Importing fxpasses does not import torch (the pytest plugin is imported by every pytest run
# in an environment where fxpasses is installed): these load on first use.
_LAZY = {"Pipeline": "pipeline", "run": "pipeline", "PassContext": "context"}


def _submodules() -> list[str]:
    """The public submodules (``fxpasses.bisect``, ``fxpasses.testing``, ...)."""
    import pkgutil

    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    if name.startswith("_"):
        raise AttributeError(f"module 'fxpasses' has no attribute {name!r}")
    submodules = _submodules()
    if name in submodules:
        # `fxpasses.bisect.bisect(...)` after a plain `import fxpasses`, as the README writes
        # it (a submodule is otherwise an attribute only once something imported it)
        return importlib.import_module(f".{name}", __name__)
    from .errors import close_names, did_you_mean

    close = close_names(name, [*__all__, *submodules], n=1)
    raise AttributeError(f"module 'fxpasses' has no attribute {name!r}{did_you_mean(close)}")
