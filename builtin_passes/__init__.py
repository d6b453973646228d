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

__all__ = ["BUILTIN_PASSES", "BUILTIN_PRESETS", "fxpasses_register_passes", "fxpasses_register_presets"]

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


#: name -> (pipeline string, description)
BUILTIN_PRESETS: dict[str, tuple[str, str]] = {
    "cleanup": (
        "eliminate_common_subexpressions,eliminate_dead_code",
        "Merge duplicate pure nodes and remove dead code.",
    ),
    "inference": (
        "remove_dropout,simplify_algebra,fold_constants{fold_parameters=true},fuse_conv_bn,"
        "eliminate_common_subexpressions,eliminate_dead_code",
        "Everything that keeps eval-mode outputs: dropout removal, algebraic simplification, "
        "constant folding (weights included: they are frozen), conv-bn fusion (after the "
        "folding, so a conv weight computed from parameters, as weight norm or a pruning mask "
        "computes it, is a constant by then), CSE and DCE.",
    ),
    "training": (
        "remove_dropout{keep_module_dropouts=true},simplify_algebra,"
        "fold_constants{fold_parameters=false,remove_unused_state=false,modules_may_train=true},"
        "eliminate_common_subexpressions{modules_may_train=true},"
        "eliminate_dead_code{remove_unused_state=false,modules_may_train=true}",
        "The inference passes that keep a model trainable as it is: no conv-bn fusion and no "
        "folding of parameters (the optimizer keeps updating the very tensors the graph "
        "reads), active dropout and training-mode batch norm left alone, and so every dropout "
        "or batch-norm module call (a module called by the graph follows .train() later: none "
        "is removed, merged or taken for pure), and no parameter, buffer or submodule removed "
        "or added: the state-dict names stay.",
    ),
}


@hookimpl
def fxpasses_register_passes(register: Callable[[type], None]) -> None:
    for cls in BUILTIN_PASSES:
        register(cls)


@hookimpl
def fxpasses_register_presets(register: Callable[[str, str, str], None]) -> None:
    for name, (pipeline, description) in BUILTIN_PRESETS.items():
        register(name, pipeline, description)
