"""The built-in pipeline's rewrites on the block graph, hand-written: the floor of group 2.

:func:`hand_pipeline` does to a :func:`graphs.block_graph` what the built-in pipeline does
(dropout removal, conv-bn fusion, ``x * 1``/``x - 0`` removal, folding ``scale * 2.0 + 1.0``,
merging the duplicate ``sigmoid``/``mul``, dead code elimination, one ``recompile()``) the way
a user who knows the graph would write it in place: one loop over ``graph.nodes`` per rewrite,
modules found through one ``named_modules()`` dictionary, torch's own
``torch.nn.utils.fusion.fuse_conv_bn_weights`` for the fused weights and
``Graph.eliminate_dead_code`` for dead code. It checks nothing the block graph does not need:
no effect analysis (writes, aliasing, module hooks), no shape or dtype proofs, no storage
bound on folds, no journal for rollback, no lint. It is therefore not a general pass: on
another graph it may be wrong (it would merge ``torch.rand`` calls, drop ``x * 1`` that
broadcasts, fold a buffer the graph writes).

What it measures is how close to the bare rewrites fxpasses' general, checked passes come:
``fxpasses pipeline / hand-written`` in group 2 is the price of generality and safety on this
graph, and ``hand-written / recompile()`` how much of the 1.5x bound the rewrites themselves
take. Its output equals the pipeline's, but for the one input guard that
``simplify_algebra{specialize=true}`` adds (tests/test_benchmarks_smoke.py checks node counts
and outputs).
"""

from __future__ import annotations

import copy
import operator
from typing import Any

import torch
import torch.fx
from torch import nn
from torch.fx import Node
from torch.nn.utils.fusion import fuse_conv_bn_weights

__all__ = ["hand_pipeline"]


def _fused(conv: nn.Conv2d, bn: nn.BatchNorm2d) -> nn.Conv2d:
    """``conv`` with ``bn`` (eval mode) folded in: a shallow copy with new parameters (what
    ``torch.nn.utils.fusion.fuse_conv_bn_eval`` does, without its ``deepcopy`` of weights it
    then replaces)."""
    fused = copy.copy(conv)
    fused._parameters = dict(conv._parameters)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    return fused


def hand_pipeline(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Rewrite the block graph ``gm`` in place as the built-in pipeline does; recompile it.

    ``gm`` must be a :func:`graphs.block_graph` (eval mode); returns ``gm``.
    """
    graph = gm.graph
    modules = dict(gm.named_modules())

    # remove_dropout
    for n in list(graph.nodes):
        if n.op == "call_module" and isinstance(modules[n.target], nn.Dropout):
            n.replace_all_uses_with(n.args[0])
            graph.erase_node(n)

    # fuse_conv_bn
    for n in list(graph.nodes):
        if n.op != "call_module" or not isinstance(modules[n.target], nn.BatchNorm2d):
            continue
        conv = n.args[0]
        if conv.op == "call_module" and isinstance(modules[conv.target], nn.Conv2d) and len(conv.users) == 1:
            parent, _, name = conv.target.rpartition(".")
            fused = _fused(modules[conv.target], modules[n.target])
            setattr(modules[parent], name, fused)
            modules[conv.target] = fused
            n.replace_all_uses_with(conv)
            graph.erase_node(n)

    # simplify_algebra: x * 1 -> x, x - 0 -> x (same shape and dtype on this graph)
    for n in list(graph.nodes):
        if n.op == "call_function" and len(n.args) == 2 and isinstance(n.args[1], int):
            if (n.target is operator.mul and n.args[1] == 1) or (n.target is operator.sub and n.args[1] == 0):
                n.replace_all_uses_with(n.args[0])
                graph.erase_node(n)

    # fold_constants: scale * 2.0 + 1.0 -> a new buffer; the old one deleted when unread
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target is not operator.add:
            continue
        mul = n.args[0]
        if not (isinstance(mul, Node) and mul.target is operator.mul and mul.args[0].op == "get_attr"):
            continue
        attr = mul.args[0]
        parent, _, name = attr.target.rpartition(".")
        owner = modules[parent]
        with torch.no_grad():
            value = getattr(owner, name) * mul.args[1] + n.args[1]
        owner.register_buffer(f"{name}_folded", value)
        with graph.inserting_before(n):
            const = graph.get_attr(f"{parent}.{name}_folded")
        const.meta = dict(n.meta)
        n.replace_all_uses_with(const)
        graph.erase_node(n)
        if not mul.users:
            graph.erase_node(mul)
        if not attr.users:
            graph.erase_node(attr)
            delattr(owner, name)

    # eliminate_common_subexpressions: same target and arguments (all pure on this graph)
    seen: dict[Any, Node] = {}
    for n in list(graph.nodes):
        if n.op not in ("call_function", "call_method"):
            continue
        key = (n.op, n.target, n.args, tuple(n.kwargs.items()))
        first = seen.setdefault(key, n)
        if first is not n:
            n.replace_all_uses_with(first)
            graph.erase_node(n)

    # eliminate_dead_code
    graph.eliminate_dead_code()
    gm.recompile()
    return gm
