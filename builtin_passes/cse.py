"""``eliminate_common_subexpressions``: merge nodes that compute the same value."""

from __future__ import annotations

import struct
from typing import Any, Literal

import torch
import torch.fx
from pydantic import Field
from torch.fx.node import Node

from fxpasses import GraphPass, PassContext, PassOptions
from fxpasses.effects import GLOBAL_STATE, EffectAnalysis, WriteClock

from ._facts import modules_may_train_field

__all__ = ["EliminateCommonSubexpressions", "CSEOptions"]


class CSEOptions(PassOptions):
    """Options of ``eliminate_common_subexpressions``."""

    skip_random_ops: Literal[True] = Field(
        default=True,
        description=(
            "Random ops are never merged (two draws are two different values); the option "
            "exists to say so and accepts only true."
        ),
    )
    modules_may_train: bool = modules_may_train_field(
        "each dropout call is random and each batch-norm call updates its running statistics, and none may be merged with another"
    )


class _Unkeyable(Exception):
    """An argument that cannot be compared safely: the node is not merged."""


class EliminateCommonSubexpressions(GraphPass):
    """Merge pure nodes that compute the same value (same op, target, args and kwargs).

    One forward sweep with a hash table (O(n)): each candidate's key is its op kind, target,
    and arguments, where

    - nodes compare by identity *and* by how often their storage was written so far, so
      ``x * 2`` after ``x.add_(1)`` differs from ``x * 2`` before it (every placeholder is
      assumed to possibly alias every other, parameters/buffers alias when they share storage);
    - literals compare by type and value: ``1``, ``1.0`` and ``True`` differ, ``0.0`` and
      ``-0.0`` differ (floats compare by their bit pattern, so NaN matches the same NaN);
      lists differ from tuples; ``dtype``/``device``/``slice``/``torch.Size`` by value;
    - tensors and any other objects compare by identity;
    - nodes on either side of a global state change (grad mode, autocast enter/exit, default
      dtype, ...) never match: ``x @ w`` under autocast is not ``x @ w`` outside it.

    Never merged: nodes with any effect per :mod:`fxpasses.effects` (random ops, in-place and
    ``out=`` ops, ops writing an input, asserts, calls of unknown functions or modules, ...);
    nodes whose value is written anywhere in the graph (through any alias), including
    ``get_attr`` of a parameter/buffer the graph mutates and ``call_module`` of a module whose
    state the graph mutates; and two nodes that would both flow to the graph's output (the
    caller would get one tensor twice where it got two), counting what flows there through
    earlier merges (``a``, ``b``, ``c`` all ``x + 1``, ``b`` and ``c`` returned: ``b`` becomes
    ``a``, then ``c`` is kept).

    Options: ``skip_random_ops`` (default true, and only true is accepted: merging two draws
    would change results, so no option allows it); ``modules_may_train`` (default false: a
    ``call_module`` node is judged by its module's mode now; true: as in training mode, for a
    graph whose modules are switched to ``.train()`` later).

    Counters: ``merged``, ``kept_distinct_outputs``.

    Source: value numbering keyed by ``(target, args, kwargs)`` as in
    ``torch.fx.passes.dialect.common.cse_pass``, extended with mutation epochs and typed
    literal keys.
    """

    name = "eliminate_common_subexpressions"
    writes_tensors = False  # rewrites the graph; new tensors only (no rollback guard needed)
    journal_edits = True  # edits only through torch.fx's editing methods and the context
    # merged nodes are replaced by an equal node: the recorded shapes of what remains hold
    preserves = ("propagate_shapes",)
    Options = CSEOptions

    def run(self, gm: torch.fx.GraphModule, ctx: PassContext) -> bool:
        opts: CSEOptions = self.options  # type: ignore[assignment]
        analysis = EffectAnalysis(gm, modules_may_train=opts.modules_may_train)
        clock = WriteClock(analysis)
        graph = gm.graph
        state = 0  # global state changes so far (grad mode, autocast, ...): regions differ
        table: dict[Any, Node] = {}
        version = clock.version
        effects = analysis.effects
        is_written = analysis.is_written
        reads_written_state = analysis.reads_written_state
        reaches_output = analysis.reaches_output
        record = clock.record

        def node_key(n: Node) -> Any:
            return (n, version(n))

        merged = 0
        for node in list(graph.nodes):
            eff = effects(node)
            if (
                node.op in _CANDIDATE_OPS
                and not eff.kinds
                and not is_written(node)
                and not reads_written_state(node)
            ):
                try:
                    args, kwargs = node.args, node.kwargs
                    key: Any = (
                        state,
                        node.op,
                        _target_key(node.target),
                        ("tuple", _items_key(args, node_key)) if type(args) is tuple else _key(args, node_key),
                        _key(kwargs, node_key) if kwargs else _EMPTY_DICT_KEY,
                    )
                except (_Unkeyable, TypeError):
                    key = None
                prev = None
                if key is not None:
                    try:
                        prev = table.get(key)  # hashes the key once (no separate hash() first)
                    except TypeError:
                        if _hashable(key):  # raised by a comparison, not by hashing: as before
                            raise
                        key = None
                if key is not None and prev is None:
                    table[key] = node
                elif prev is not None:
                    # whether both would flow to the output; the node is asked first, as the
                    # answer for prev only matters when the node reaches the output
                    node_returned = reaches_output(node)
                    if node_returned and reaches_output(prev):
                        ctx.count("kept_distinct_outputs")
                    else:
                        if node_returned:  # prev is returned from now on
                            analysis.mark_reaches_output(prev)
                        node.replace_all_uses_with(prev)
                        graph.erase_node(node)
                        merged += 1
                        continue
            if eff.writes:  # (what record() looks at: no call for the nodes that write nothing)
                record(node)
            if GLOBAL_STATE in eff.kinds:
                state += 1
        if merged:
            ctx.count("merged", merged)
        return merged > 0


_CANDIDATE_OPS = ("call_function", "call_method", "call_module", "get_attr")


def _target_key(target: Any) -> Any:
    if isinstance(target, str):
        return target
    try:
        hash(target)
    except TypeError:
        return ("id", id(target))
    return target


_SCALAR_TYPES = (
    torch.dtype, torch.device, torch.layout, torch.memory_format, str, bytes, type(None), type(...)
)


_pack_double = struct.Struct("<d").pack
_EMPTY_DICT_KEY = ("dict", ())  # _key({}): most calls have no keyword arguments


def _hashable(key: Any) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


def _items_key(a: Any, node_key: Any) -> tuple[Any, ...]:
    """``_key(a)[1]`` for a list or tuple ``a``: the common element types (nodes, ints,
    bools, floats) inline, the others through :func:`_key`."""
    out = []
    append = out.append
    for x in a:
        t = type(x)
        if t is Node:
            append(("node", node_key(x)))
        elif t is int or t is bool:
            append((t, x))
        elif t is float:
            append((float, _pack_double(x)))
        else:
            append(_key(x, node_key))
    return tuple(out)


def _key(a: Any, node_key: Any) -> Any:
    """A hashable key equal for two arguments only when they are interchangeable."""
    if isinstance(a, Node):
        return ("node", node_key(a))
    t = type(a)
    if t is bool or t is int:
        return (t, a)
    if t is float:
        return (float, _pack_double(a))
    if t is tuple:  # a plain tuple: none of the checks below before the sequence one applies
        return ("tuple", _items_key(a, node_key))
    if t is complex:
        return (complex, struct.pack("<dd", a.real, a.imag))
    if isinstance(a, _SCALAR_TYPES):
        return (t, a)
    if isinstance(a, torch.Size):
        return ("size", tuple(a))
    if isinstance(a, slice):
        return ("slice", _key(a.start, node_key), _key(a.stop, node_key), _key(a.step, node_key))
    if isinstance(a, (list, tuple)) and not hasattr(a, "_fields"):
        kind = "list" if isinstance(a, list) else "tuple"
        return (kind, _items_key(a, node_key))
    if isinstance(a, dict):
        items = sorted(((repr(k), _key(v, node_key)) for k, v in a.items()), key=lambda kv: kv[0])
        return ("dict", tuple(items))
    if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise _Unkeyable(a)
    # tensors, functions, enums, other objects: the same object only
    return ("id", t, id(a))
