"""Synthetic FX graphs for the benchmarks (and the smoke test that keeps them honest).

:func:`block_graph` builds a torch-level (``symbolic_trace`` dialect) ``GraphModule`` of
``n_nodes`` nodes, made of repeated blocks that give every built-in pass, and each of
torch's nearest equivalents, real work::

    conv   = layers.i.conv(x)              nn.Conv2d (no bias)       \\
    bn     = layers.i.bn(conv)             nn.BatchNorm2d, eval      / fuse_conv_bn
    drop   = layers.i.drop(bn)             nn.Dropout, eval            remove_dropout
    act    = torch.relu(drop)
    fc     = layers.i.fc(act)              nn.Linear
    one    = fc * 1                                                 \\
    zero   = one - 0                                                / simplify_algebra
    s1     = torch.sigmoid(zero)
    s2     = torch.sigmoid(zero)           duplicate of s1          \\
    g1     = zero * s1                                              |  eliminate_common_
    g2     = zero * s2                     duplicate once s2 -> s1  /  subexpressions
    h      = g1 + g2
    scale  = layers.i.scale                buffer [C, 1, 1]         \\
    scale2 = scale * 2.0                                            |  fold_constants
    scale3 = scale2 + 1.0                                           /
    y      = h * scale3
    out    = y + x                         residual, next block's x
    dead1  = out.mean()                    unused                   \\
    dead2  = dead1 * 2                     unused                   /  eliminate_dead_code

19 nodes a block. Every tensor node carries ``meta["tensor_meta"]`` as ``ShapeProp`` (or
``propagate_shapes``) records it, so shape-dependent rewrites (``x * 1 -> x``) can be proven
exact. Modules are nested as a model's would be (``layers.<i>.conv``); weights and batch-norm
statistics are random (fixed seed), so fusion and folding change values measurably if wrong.

The graph is built directly with the ``torch.fx.Graph`` API (tracing a 100k-node model costs
seconds per copy and every benchmark repeat needs a fresh graph); the result is, node for node
and name for name, the graph ``symbolic_trace`` gives for :class:`BlockModel`'s ``forward``
with buffers proxied (:func:`trace`; checked by tests/test_benchmarks_smoke.py).
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
from torch import nn
from torch.fx.passes.shape_prop import TensorMetadata

__all__ = ["NODES_PER_BLOCK", "block_graph", "n_blocks_for", "BlockModel", "example_input", "count_ops", "trace"]

NODES_PER_BLOCK = 19
C = 4  # channels
HW = 4  # height = width (= the Linear's features)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(C, C, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(C)
        self.drop = nn.Dropout(0.1)
        self.fc = nn.Linear(HW, HW)
        self.register_buffer("scale", torch.rand(C, 1, 1) + 0.5)
        with torch.no_grad():
            self.bn.running_mean.normal_(0, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.normal_(0, 0.1)


class BlockModel(nn.Module):
    """The model whose graph :func:`block_graph` builds (for the smoke test's comparison)."""

    def __init__(self, n_blocks: int, seed: int = 0) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.layers = nn.ModuleList([Block() for _ in range(n_blocks)])
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for blk in self.layers:
            act = torch.relu(blk.drop(blk.bn(blk.conv(x))))
            zero = blk.fc(act) * 1 - 0  # x - 0 is exact (x + 0 would turn -0.0 into +0.0)
            s1 = torch.sigmoid(zero)
            s2 = torch.sigmoid(zero)
            h = zero * s1 + zero * s2
            out = h * (blk.scale * 2.0 + 1.0) + x
            dead = out.mean() * 2  # noqa: F841 - dead code on purpose
            x = out
        return x


def example_input(batch: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch, C, HW, HW, generator=g)


def _meta(shape: tuple[int, ...]) -> TensorMetadata:
    t = torch.empty(shape)
    return TensorMetadata(
        shape=torch.Size(shape),
        dtype=torch.float32,
        requires_grad=False,
        stride=t.stride(),
        memory_format=torch.contiguous_format,
        is_quantized=False,
        qparams={},
    )


def n_blocks_for(n_nodes: int) -> int:
    return max(1, (n_nodes - 2) // NODES_PER_BLOCK)


def block_graph(
    n_nodes: int, *, seed: int = 0, model: BlockModel | None = None, compile: bool = True
) -> torch.fx.GraphModule:
    """A ``GraphModule`` of about ``n_nodes`` nodes (see the module doc).

    ``model`` reuses an existing :class:`BlockModel` of at least as many blocks: as with
    ``symbolic_trace``, the graph module gets its own module tree (new containers) around the
    model's leaf modules, which no pass here modifies (they replace them). Reusing one model
    saves seconds of setup per repeat on big graphs.

    ``compile=False`` skips generating ``forward`` (``GraphModule.recompile``, seconds on 100k
    nodes) for callers that only transform the graph; the first ``recompile()`` (which every
    pipeline does at its end) then generates it. Set-up only: it changes no timed work.
    """
    n_blocks = n_blocks_for(n_nodes)
    if model is None:
        model = BlockModel(n_blocks, seed)
    elif len(model.layers) < n_blocks:
        raise ValueError(f"model has {len(model.layers)} blocks, {n_blocks} needed")
    act_meta = _meta((1, C, HW, HW))
    scale_meta = _meta((C, 1, 1))
    scalar_meta = _meta(())
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["tensor_meta"] = act_meta
    cf = g.call_function
    for i in range(n_blocks):
        p = f"layers.{i}"
        u = f"layers_{i}"
        tensors = []
        conv = g.create_node("call_module", f"{p}.conv", (x,), {}, f"{u}_conv")
        bn = g.create_node("call_module", f"{p}.bn", (conv,), {}, f"{u}_bn")
        drop = g.create_node("call_module", f"{p}.drop", (bn,), {}, f"{u}_drop")
        act = cf(torch.relu, (drop,))
        fc = g.create_node("call_module", f"{p}.fc", (act,), {}, f"{u}_fc")
        one = cf(operator.mul, (fc, 1))
        zero = cf(operator.sub, (one, 0))
        s1 = cf(torch.sigmoid, (zero,))
        s2 = cf(torch.sigmoid, (zero,))
        g1 = cf(operator.mul, (zero, s1))
        g2 = cf(operator.mul, (zero, s2))
        h = cf(operator.add, (g1, g2))
        tensors += [conv, bn, drop, act, fc, one, zero, s1, s2, g1, g2, h]
        scale = g.get_attr(f"{p}.scale")
        scale2 = cf(operator.mul, (scale, 2.0))
        scale3 = cf(operator.add, (scale2, 1.0))
        for n in (scale, scale2, scale3):
            n.meta["tensor_meta"] = scale_meta
        y = cf(operator.mul, (h, scale3))
        out = cf(operator.add, (y, x))
        tensors += [y, out]
        dead1 = g.call_method("mean", (out,))
        dead2 = cf(operator.mul, (dead1, 2))
        for n in tensors:
            n.meta["tensor_meta"] = act_meta
        dead1.meta["tensor_meta"] = scalar_meta
        dead2.meta["tensor_meta"] = scalar_meta
        x = out
    g.output(x)
    if compile:
        return torch.fx.GraphModule(model, g, class_name="BlockModel")
    recompile = torch.fx.GraphModule.recompile
    torch.fx.GraphModule.recompile = lambda self: None  # type: ignore[method-assign]
    try:
        return torch.fx.GraphModule(model, g, class_name="BlockModel")
    finally:
        torch.fx.GraphModule.recompile = recompile  # type: ignore[method-assign]


def trace(model: BlockModel) -> torch.fx.GraphModule:
    """``symbolic_trace`` of ``model`` with buffers proxied (``get_attr``) as parameters are:
    the graph :func:`block_graph` builds directly (the smoke test compares them)."""

    class _Tracer(torch.fx.Tracer):
        proxy_buffer_attributes = True

    return torch.fx.GraphModule(model, _Tracer().trace(model), class_name="BlockModel")


def count_ops(gm: torch.fx.GraphModule) -> dict[str, Any]:
    """How many nodes of each op kind (for reports)."""
    out: dict[str, int] = {}
    for n in gm.graph.nodes:
        out[n.op] = out.get(n.op, 0) + 1
    return out
