"""Example third-party passes for fxpasses.

- ``remove_identity``: drops no-op nodes (``nn.Identity`` modules, ``aten.alias``, and
  ``contiguous()``/``.to(same dtype)`` calls on values known to be unchanged by them).
- ``count_ops``: an analysis that counts the graph's nodes by canonical op name.
- the preset ``example_cleanup``: ``remove_identity,eliminate_dead_code``.

Registered through the ``fxpasses`` entry-point group (see pyproject.toml).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.fx
from pydantic import Field

import fxpasses
from fxpasses import GraphPass, NodePass, PassOptions, Replace, guards, on
from fxpasses.ops import op_name

__all__ = ["RemoveIdentity", "CountOps", "fxpasses_register_passes", "fxpasses_register_presets"]


class RemoveIdentity(NodePass):
    """Remove no-op nodes: nn.Identity, aten.alias, and .to() to the dtype a value already has.

    A ``.to(dtype)`` call is removed only when the node's recorded metadata (``meta["val"]``,
    ``["example_value"]`` or ``["tensor_meta"]``, e.g. from ``propagate_shapes``) proves its
    input already has that dtype; otherwise it is left alone. On a ``symbolic_trace`` graph
    those dtypes are the example inputs' only (the graph takes inputs of any dtype), so there
    it is removed only when input guards make them hold for every input
    (``fxpasses.guards.facts_hold_for_every_input``), or with ``specialize=true``, which adds
    them (``fxpasses.guards.input_guard``: another input then raises an ``AssertionError``).
    """

    name = "remove_identity"
    before = ("eliminate_dead_code",)
    # it edits the graph only through what its hooks return (no tensor written, no node's
    # fields assigned): declaring so lets the pipeline record only what it touches for a
    # rollback, and lint only that, instead of a snapshot and a lint of the whole graph
    writes_tensors = False
    journal_edits = True

    class Options(PassOptions):
        specialize: bool = Field(
            default=False,
            description="on a symbolic_trace graph, also remove .to(dtype) calls that the example inputs' "
            "dtypes make no-ops, and add a check of each input's recorded shape and dtype",
        )

    def setup(self, gm, ctx):
        # the symbolic_trace inputs no guard checks yet (None: one has no recorded facts to check)
        self._unguarded = guards.unguarded_inputs(ctx.graph) if ctx.dialect == "symbolic_trace" else []
        self._guard = False

    def finish(self, gm, ctx):
        if self._guard:
            ctx.count("input_guards", guards.guard_inputs(ctx, self._unguarded, "remove_identity{specialize=true}"))

    @on("identity", op="call_module")
    def identity_module(self, node, ctx):
        ctx.count("removed")
        return Replace(node.args[0])

    @on("alias", op="call_function")
    def alias(self, node, ctx):
        ctx.count("removed")
        return Replace(node.args[0])

    @on("to", op=("call_method", "call_function"))  # x.to(dtype), aten.to.dtype
    def to_same_dtype(self, node, ctx):
        src = node.args[0]
        if len(node.args) != 2 or node.kwargs or not isinstance(node.args[1], torch.dtype):
            return None
        info = ctx.tensor_info(src) if isinstance(src, torch.fx.Node) else None
        if info is None or info[1] != node.args[1]:
            return None
        if self._unguarded is None:
            return ctx.skip(node, "its dtype is the example inputs', and an input of this symbolic_trace graph has no recorded dtype to check")
        if self._unguarded:  # (a symbolic_trace graph, inputs not all checked)
            if not self.options.specialize:
                return ctx.skip(
                    node,
                    "its dtype is the example inputs', and a symbolic_trace graph takes inputs of any dtype "
                    "(option specialize=true removes it and adds a check of each input)",
                )
            self._guard = True
        ctx.count("removed")
        return Replace(src)


class CountOps(GraphPass):
    """Count the graph's nodes by canonical op name (shown as the pass's counters)."""

    name = "count_ops"
    kind = "analysis"
    # it only reads the graph, no tensor: no write guard needed (a write anyway would move the
    # tensor's _version, and the pipeline's check of an analysis fails the run naming it)
    writes_tensors = False

    class Options(PassOptions):
        # the description is what `fxpasses show count_ops` and `fxpasses schema` print
        only: list[str] = Field(default=[], description="only count these op names (empty: all)")

    def run(self, gm, ctx):
        for node in gm.graph.nodes:
            name = op_name(node, gm) or node.op
            if not self.options.only or name in self.options.only:
                ctx.count(name)
        return False


@fxpasses.hookimpl
def fxpasses_register_passes(register: Callable[[type], None]) -> None:
    register(RemoveIdentity)
    register(CountOps)


@fxpasses.hookimpl
def fxpasses_register_presets(register: Callable[[str, str, str], None]) -> None:
    # a named pipeline: `fxpasses run --preset example_cleanup`, Pipeline.from_preset(...)
    register("example_cleanup", "remove_identity,eliminate_dead_code", "Drop no-op nodes, then dead code.")
