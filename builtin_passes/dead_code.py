"""``eliminate_dead_code``: remove nodes whose results are unused and that do nothing else."""

from __future__ import annotations

import collections
from typing import Callable, Iterable

import torch
import torch.fx
from pydantic import Field

from fxpasses import GraphPass, PassContext, PassOptions
from fxpasses.effects import ASSERT, NO_SIDE_EFFECT, RANDOM, EffectAnalysis
from fxpasses.guards import input_guard

from ._facts import modules_may_train_field

__all__ = ["EliminateDeadCode", "DeadCodeOptions", "prune_unused_state"]


class DeadCodeOptions(PassOptions):
    """Options of ``eliminate_dead_code``."""

    remove_random: bool = Field(
        default=False,
        description=(
            "Also remove dead random ops (torch.rand, active dropout, ...). Off by default: each "
            "removed draw shifts the global RNG stream, so later random ops would no longer give "
            "the numbers eager mode gives under the same seed."
        ),
    )
    strip_asserts: bool = Field(
        default=False,
        description=(
            "Also remove runtime asserts (torch._assert, aten._assert_async, aten._assert_scalar, "
            "sym_constrain_range, torch.export's input guards) and with them their now-dead "
            "condition chains. Off by default: inputs that used to raise would run through. "
            "fxpasses' own input guards (fxpasses.guards.input_guard, which a pass that specialised "
            "the graph to its example inputs added, e.g. simplify_algebra{specialize=true}) stay: "
            "without them, inputs that ran correctly would give wrong results."
        ),
    )
    remove_unused_state: bool = Field(
        default=True,
        description=(
            "After removing nodes, delete the submodules, parameters, buffers and tensor "
            "constants that no get_attr/call_module node references any more."
        ),
    )
    modules_may_train: bool = modules_may_train_field(
        "each dropout call is random and each batch-norm call updates its running statistics, and none may be removed as pure"
    )


# What the pass tells numeric verification (``ctx.changes_outputs``) when ``remove_random`` removed
# a random op: a failure then comes of the option, not of a wrong rewrite.
_SHIFTS_RNG = (
    "eliminate_dead_code{remove_random=true} removed unused random ops, and each removed draw shifts the "
    "global RNG stream: random ops that run after them (in this module, or in code after it) draw other "
    "numbers than before, by design; where the module draws again, numeric verification cannot pass: "
    'verify this pass with verify="lint", or keep remove_random off'
)


class EliminateDeadCode(GraphPass):
    """Remove unused nodes without side effects, then the module state nothing references.

    One reverse sweep over the graph (O(n)): a node with no users is erased when
    :mod:`fxpasses.effects` finds it pure, so its inputs are seen after it and go too when it
    was their last user. Never removed: placeholders and the output; nodes that mutate (in-place
    ``call_method``/``call_function``/``call_module``, ``out=``, ``inplace=True``, schemas that
    write an argument, modules updating their own state); asserts (unless ``strip_asserts``;
    fxpasses' own input guards always stay);
    random ops (unless ``remove_random``); print, profiler, grad-mode/autocast and other global
    state changes; ``call_module`` of a submodule with any such node inside, or of a leaf module
    that cannot be shown pure (anything but standard ``torch.nn`` modules with
    ``inplace=False``); calls of unknown Python functions.

    Then (``remove_unused_state``, default on) every submodule, parameter, buffer and root
    tensor constant that no ``get_attr``/``call_module`` node references is deleted, so it also
    leaves ``state_dict()``: a module still called keeps all its children and state, an
    attribute still read by ``get_attr`` stays with its owning modules (see
    :func:`prune_unused_state`); what another ``torch.fx.Graph`` the module holds references
    (the train graph of torchvision's ``create_feature_extractor`` module, run after
    ``.train()``) stays too. Subgraphs of submodules are not swept.

    Options (see :class:`DeadCodeOptions`): ``remove_random`` (default false),
    ``strip_asserts`` (default false), ``remove_unused_state`` (default true),
    ``modules_may_train`` (default false: a ``call_module`` node is judged by its module's mode
    now; true: as in training mode, for a graph whose modules are switched to ``.train()``
    later).

    Counters: ``removed_nodes`` (of which ``removed_random``, ``removed_asserts``),
    ``kept_impure`` (unused nodes kept for their effects), ``kept_input_guards`` (fxpasses'
    input guards kept under ``strip_asserts``), ``removed_submodules``,
    ``removed_parameters``, ``removed_buffers``, ``removed_constants``.

    Sources: the sweep is ``torch.fx.Graph.eliminate_dead_code``'s, with
    :mod:`fxpasses.effects` in place of ``Node.is_impure`` (which treats in-place
    ``call_method`` nodes, GraphModule submodules with impure bodies and non-standard leaf
    modules as pure).

    An error an unused op would raise is not an effect it keeps: an unused ``x.view(-1, 3)``
    of a tensor whose size is not a multiple of 3, or an unused ``.item()`` of a tensor with
    several elements, is removed, and the graph no longer raises for those inputs (as with
    torch's ``eliminate_dead_code``, and the dead code elimination of LLVM and MLIR, where
    only side effects count). Checks the program means to make are asserts, which stay.
    """

    name = "eliminate_dead_code"
    writes_tensors = False  # rewrites the graph; new tensors only (no rollback guard needed)
    journal_edits = True  # edits only through torch.fx's editing methods and the context
    # only removes nodes: the recorded shapes of what remains hold
    preserves = ("propagate_shapes",)
    Options = DeadCodeOptions

    def run(self, gm: torch.fx.GraphModule, ctx: PassContext) -> bool:
        opts: DeadCodeOptions = self.options  # type: ignore[assignment]
        removable = set(NO_SIDE_EFFECT)
        if opts.remove_random:
            removable.add(RANDOM)
        if opts.strip_asserts:
            removable.add(ASSERT)
        analysis = EffectAnalysis(gm, modules_may_train=opts.modules_may_train)
        graph = gm.graph
        removed = 0
        random = False  # a random op removed
        for node in reversed(graph.nodes):
            if node.users or node.op in ("placeholder", "output"):
                continue
            kinds = analysis.effects(node).kinds
            if not kinds <= removable:
                ctx.count("kept_impure")
                continue
            if RANDOM in kinds:
                ctx.count("removed_random")
                random = True
            if ASSERT in kinds:
                if node.op == "call_function" and node.target is input_guard:
                    # a rewrite of the graph relies on it (see the option's description)
                    ctx.count("kept_input_guards")
                    continue
                ctx.count("removed_asserts")
            graph.erase_node(node)
            removed += 1
        if removed:
            ctx.count("removed_nodes", removed)
        if random:
            ctx.changes_outputs(_SHIFTS_RNG)
        pruned = 0
        if opts.remove_unused_state:
            for key, n in prune_unused_state(gm, before_edit=ctx.before_module_edit).items():
                ctx.count(key, n)
                pruned += n
        return bool(removed or pruned)


def _graphs(gm: torch.fx.GraphModule) -> list[torch.fx.Graph]:
    """``gm.graph`` and every other ``torch.fx.Graph`` that ``gm`` holds as an attribute: a
    module that switches between graphs (torchvision's ``DualGraphModule``, which
    ``create_feature_extractor`` returns, holds ``train_graph`` and ``eval_graph`` and runs one
    of them by its mode) calls its submodules from the graph not in use too."""
    graphs = [gm.graph]
    for value in vars(gm).values():
        if isinstance(value, torch.fx.Graph) and all(value is not g for g in graphs):
            graphs.append(value)
    return graphs


def _referenced(gm: torch.fx.GraphModule) -> tuple[set[str], set[str]]:
    """(targets of get_attr/call_module nodes of ``gm``'s graphs, see :func:`_graphs`, and
    their proper ancestors' paths)."""
    subtrees = {
        n.target
        for graph in _graphs(gm)
        for op in ("get_attr", "call_module")
        for n in graph.find_nodes(op=op)  # FX's index by op: no walk of the other nodes
        if isinstance(n.target, str)
    }
    ancestors: set[str] = set()
    for target in subtrees:
        parent = target.rpartition(".")[0]
        while parent and parent not in ancestors:  # (its own ancestors are in already)
            ancestors.add(parent)
            parent = parent.rpartition(".")[0]
    return subtrees, ancestors


def _subtree_counts(mod: torch.nn.Module) -> tuple[int, int, int]:
    """``(len(list(mod.modules())), len(list(mod.parameters())), len(list(mod.buffers())))``:
    each module, parameter and buffer once however often it is registered. A leaf module (a
    convolution, a batch norm) is counted from its registries, without the three generator
    walks, which cost more than deleting it."""
    if not mod._modules:
        return (
            1,
            len({id(p) for p in mod._parameters.values() if p is not None}),
            len({id(b) for b in mod._buffers.values() if b is not None}),
        )
    return (
        sum(1 for _ in mod.modules()),
        sum(1 for _ in mod.parameters(recurse=True)),
        sum(1 for _ in mod.buffers(recurse=True)),
    )


def _prefixes(q: str) -> list[str]:
    """The proper prefixes of the qualified name ``q`` (``a.b.c`` -> ``a``, ``a.b``)."""
    parts = q.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def prune_unused_state(
    gm: torch.fx.GraphModule,
    candidates: Iterable[str] | None = None,
    *,
    before_edit: Callable[[torch.nn.Module], None] | None = None,
) -> collections.Counter[str]:
    """Delete the parts of ``gm`` that no node of its graph references; return counts. A
    ``torch.fx.Graph`` that ``gm`` holds besides ``gm.graph`` (a train and an eval graph that
    ``.train()`` switches between) counts as its graph too.

    A qualified name is *referenced* when a ``get_attr`` or ``call_module`` node targets it or
    something above it (a called module keeps its whole subtree; ``get_attr`` of a submodule, as
    higher-order operators use, keeps that subtree) or below it (the modules on the path to a
    referenced attribute stay). Unreferenced submodules (with everything in them), parameters,
    buffers and plain tensor attributes of ``gm`` itself (constants created by tracing) are
    deleted.

    Args:
        candidates: when given, only these qualified names of parameters, buffers and tensor
            attributes may be deleted (no submodules), each one that nothing references, also
            under a submodule that nothing references any more (which stays, emptied).
        before_edit: called with each module just before something is deleted from it
            (``PassContext.before_module_edit``, so that a journaled rollback restores it).

    Returns counts under ``removed_submodules``, ``removed_parameters``, ``removed_buffers``,
    ``removed_constants``.
    """
    subtrees, ancestors = _referenced(gm)
    allowed = None if candidates is None else set(candidates)
    # with candidates, only the modules on their paths can hold something to delete
    leads_to = None if allowed is None else {q.rsplit(".", 1)[0] for q in allowed if "." in q}
    if leads_to is not None:
        leads_to |= {p for q in list(leads_to) for p in _prefixes(q)}
    counts: collections.Counter[str] = collections.Counter()

    # visit() enters a module only when no path element above it is a referenced subtree
    # (those are skipped whole), so a name met there is used when it is referenced itself or
    # lies on the path to a reference
    def used(q: str) -> bool:
        return q in ancestors or q in subtrees

    def may_remove(q: str) -> bool:
        return (allowed is None or q in allowed) and not used(q)

    edited: set[int] = set()

    def edit(mod: torch.nn.Module) -> None:
        if before_edit is not None and id(mod) not in edited:
            edited.add(id(mod))
            before_edit(mod)

    def visit(mod: torch.nn.Module, prefix: str) -> None:
        for name in list(mod._parameters):
            if may_remove(prefix + name):
                edit(mod)
                del mod._parameters[name]
                counts["removed_parameters"] += 1
        for name in list(mod._buffers):
            if may_remove(prefix + name):
                edit(mod)
                del mod._buffers[name]
                mod._non_persistent_buffers_set.discard(name)
                counts["removed_buffers"] += 1
        for name, child in list(mod._modules.items()):
            q = prefix + name
            if child is None or q in subtrees:
                continue
            if leads_to is not None and q not in leads_to:
                continue  # nothing under it may be deleted
            if used(q) or allowed is not None:
                # with candidates, an unreferenced submodule is not deleted but searched for
                # them (a folded parameter may be all that a traced submodule held)
                visit(child, q + ".")
            elif allowed is None:
                n_modules, n_params, n_buffers = _subtree_counts(child)
                counts["removed_submodules"] += n_modules
                counts["removed_parameters"] += n_params
                counts["removed_buffers"] += n_buffers
                edit(mod)
                del mod._modules[name]

    try:
        visit(gm, "")
    finally:
        # a recursive closure is a reference cycle (visit -> its cell -> visit) holding what
        # it closes over: left to the cyclic collector otherwise (tests/test_garbage.py)
        del visit
    for name, value in list(vars(gm).items()):
        if isinstance(value, torch.Tensor) and not name.startswith("__") and may_remove(name):
            edit(gm)
            delattr(gm, name)
            counts["removed_constants"] += 1
    return +counts
