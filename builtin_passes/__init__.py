"""The built-in passes of fxpasses.

They are registered through the ``fxpasses`` entry-point group (``builtin =
"fxpasses.builtin_passes"`` in fxpasses' own pyproject.toml), exactly as a third-party package
registers its passes.
"""

from __future__ import annotations

from typing import Callable

from fxpasses import hookimpl

from .algebra import SimplifyAlgebra
from .constant_folding import FoldConstants
from .conv_bn import FuseConvBN
from .cse import EliminateCommonSubexpressions
from .dead_code import EliminateDeadCode
from .dropout import RemoveDropout
from .print_graph import PrintGraph
from .rename import RenameNodes
from .shapes import PropagateShapes

__all__ = ["BUILTIN_PASSES", "fxpasses_register_passes"]

BUILTIN_PASSES: tuple[type, ...] = (
    PropagateShapes,
    PrintGraph,
    EliminateDeadCode,
    EliminateCommonSubexpressions,
    FoldConstants,
    FuseConvBN,
    RemoveDropout,
    SimplifyAlgebra,
    RenameNodes,
)


@hookimpl
def fxpasses_register_passes(register: Callable[[type], None]) -> None:
    for cls in BUILTIN_PASSES:
        register(cls)
