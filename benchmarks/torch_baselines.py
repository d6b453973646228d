"""torch's own nearest equivalents of the built-in passes, as ``GraphModule -> GraphModule``.

Checked against torch 2.13 (what exists there):

========================================  =================================================
fxpasses pass                             torch's nearest equivalent
========================================  =================================================
``remove_dropout``                        ``torch.fx.experimental.optimization.remove_dropout``
                                          (re-traces the module, then a ``Transformer``)
``fuse_conv_bn``                          ``torch.fx.experimental.optimization.fuse``
                                          (``inplace=True, no_trace=True``: no model copy)
``simplify_algebra``                      none for FX graphs (Inductor's ``remove_no_ops``
                                          works only on ATen graphs inside ``torch.compile``,
                                          with zero/one *tensor* nodes, not literals)
``fold_constants``                        ``torch.fx.experimental.const_fold.split_const_subgraphs``
                                          + ``run_folding()``
``eliminate_common_subexpressions``       ``torch.fx.passes.dialect.common.cse_pass.CSEPass``
``eliminate_dead_code``                   ``torch.fx.Graph.eliminate_dead_code`` (there is no
                                          ``torch.fx.passes.dead_code_elimination`` module)
``propagate_shapes`` (``mode="real"``)    ``torch.fx.passes.shape_prop.ShapeProp``
                                          (``tensor_meta`` only, no ``meta["val"]``)
``propagate_shapes`` (``mode="fake"``)    ``torch.fx.passes.fake_tensor_prop.FakeTensorProp``
                                          (``meta["val"]`` only, no ``tensor_meta``)
========================================  =================================================

``torch.fx.experimental.optimization.optimize_for_inference`` (fuse + remove_dropout + MKLDNN
layouts) is compared in the model benchmark.

Each function returns a ``GraphModule`` ready to run: functions that edit the graph in place
recompile it (as ``PassManager`` does after every pass); the others build a new one.
"""

from __future__ import annotations

import operator
import warnings
from typing import Any, Callable

import torch
import torch.fx
from torch.fx.experimental import optimization as opt
from torch.fx.experimental.const_fold import split_const_subgraphs
from torch.fx.passes.dialect.common.cse_pass import CSEPass
from torch.fx.passes.infra.pass_base import PassResult
from torch.fx.passes.infra.pass_manager import PassManager
from torch.fx.proxy import Proxy

__all__ = [
    "remove_dropout",
    "fuse",
    "const_fold",
    "cse",
    "dce",
    "EQUIVALENTS",
    "shape_prop",
    "fake_tensor_prop",
    "pass_manager",
    "MulByOneTransformer",
    "transformer_graph",
    "transformer_module",
    "SLOW",
]


def remove_dropout(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    return opt.remove_dropout(gm)


def fuse(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    return opt.fuse(gm, inplace=True, no_trace=True)


def const_fold(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folded = split_const_subgraphs(gm)
        folded.run_folding()
    return folded


def cse(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    return CSEPass()(gm).graph_module


def dce(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def shape_prop(gm: torch.fx.GraphModule, *inputs: Any) -> int:
    """``ShapeProp(gm).propagate(*inputs)`` under ``torch.no_grad()``: runs the graph on real
    tensors, records ``meta["tensor_meta"]``; returns the number of nodes it recorded.

    ``no_grad`` as propagate_shapes' real mode runs: the ``requires_grad`` recorded is then the
    same on both sides (with grad mode on, ShapeProp records True for every value computed
    from a parameter), and neither keeps an autograd graph of the run (timed alike either
    way here: 0.75x-0.76x for ``record_val=false`` on the 10k block graph and GPT-2 96x64)."""
    from torch.fx.passes.shape_prop import ShapeProp

    with torch.no_grad():
        ShapeProp(gm).propagate(*inputs)
    return sum(1 for n in gm.graph.nodes if "tensor_meta" in n.meta)


def fake_tensor_prop(gm: torch.fx.GraphModule, *inputs: Any) -> int:
    """``FakeTensorProp(gm, mode).propagate(*inputs)`` in a fresh ``FakeTensorMode`` that
    accepts the module's real parameters (``allow_non_fake_inputs``); records ``meta["val"]``,
    returns the number of nodes that got a tensor there."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    FakeTensorProp(gm, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*inputs)
    return sum(1 for n in gm.graph.nodes if isinstance(n.meta.get("val"), (torch.Tensor, tuple, list)))


#: fxpasses pass name -> (torch's equivalent, its name), None where torch has none
EQUIVALENTS: dict[str, tuple[Callable[[torch.fx.GraphModule], torch.fx.GraphModule], str] | None] = {
    "remove_dropout": (remove_dropout, "optimization.remove_dropout"),
    "fuse_conv_bn": (fuse, "optimization.fuse"),
    "simplify_algebra": None,
    "fold_constants": (const_fold, "const_fold.split_const_subgraphs + run_folding"),
    "eliminate_common_subexpressions": (cse, "CSEPass"),
    "eliminate_dead_code": (dce, "Graph.eliminate_dead_code"),
}


def _wrapped(fn: Callable[[torch.fx.GraphModule], torch.fx.GraphModule]) -> Callable[[torch.nn.Module], PassResult]:
    def run(gm: torch.nn.Module) -> PassResult:
        return PassResult(fn(gm), True)  # type: ignore[arg-type]

    run.__name__ = fn.__name__
    return run


def _dce_pass(gm: torch.nn.Module) -> PassResult:
    return PassResult(gm, gm.graph.eliminate_dead_code())  # type: ignore[union-attr]


def pass_manager(names: list[str]) -> PassManager:
    """torch's ``PassManager`` running torch's equivalents of ``names`` (fxpasses names, in
    that order; passes without an equivalent are left out). It recompiles after every pass."""
    passes: list[Callable[..., Any]] = []
    for name in names:
        if name == "eliminate_dead_code":
            passes.append(_dce_pass)
        elif name == "eliminate_common_subexpressions":
            passes.append(CSEPass())
        elif EQUIVALENTS.get(name) is not None:
            passes.append(_wrapped(EQUIVALENTS[name][0]))  # type: ignore[index]
    return PassManager(passes=passes)


def run_pass_manager(names: list[str], gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pass_manager(names)(gm).graph_module


# ------------------------------------------------------------------ the dispatch benchmark

MULS = frozenset({operator.mul, torch.mul})


class MulByOneTransformer(torch.fx.Transformer):
    """``x * 1 -> x`` as a ``torch.fx.Transformer`` (copies every other node)."""

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        if target in MULS and len(args) == 2 and type(args[1]) is int and args[1] == 1 and isinstance(args[0], Proxy):
            return args[0]
        return super().call_function(target, args, kwargs)

    def call_method(self, target: Any, args: Any, kwargs: Any) -> Any:
        if target == "mul" and len(args) == 2 and type(args[1]) is int and args[1] == 1:
            return args[0]
        return super().call_method(target, args, kwargs)


def transformer_graph(gm: torch.fx.GraphModule) -> torch.fx.Graph:
    """The Transformer's own work: ``Transformer.transform()`` without its final
    ``GraphModule`` construction (which recompiles)."""
    from torch.fx import traceback as fx_traceback
    from torch.fx.node import map_aggregate

    t = MulByOneTransformer(gm)
    with fx_traceback.preserve_node_meta():
        result = t.run(enable_io_processing=False)
    t.new_graph.output(map_aggregate(result, lambda a: a.node if isinstance(a, Proxy) else a))
    return t.new_graph


def transformer_module(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``Transformer.transform()``: the new graph and a new, compiled ``GraphModule``."""
    return MulByOneTransformer(gm).transform()


class _GraphOnly:
    def __init__(self, graph: torch.fx.Graph) -> None:
        self.graph = graph


#: superlinear baselines that run in a subprocess with a time limit on big graphs (slow.py)
SLOW: dict[str, Callable[[torch.fx.GraphModule], Any]] = {
    "transformer_graph": lambda gm: _GraphOnly(transformer_graph(gm)),
    "transformer_module": transformer_module,
    "remove_dropout": remove_dropout,
    "pm_dropout_cse_dce": lambda gm: run_pass_manager(
        ["remove_dropout", "eliminate_common_subexpressions", "eliminate_dead_code"], gm
    ),
    "pm_all": lambda gm: run_pass_manager(
        ["remove_dropout", "fuse_conv_bn", "fold_constants", "eliminate_common_subexpressions", "eliminate_dead_code"],
        gm,
    ),
}
