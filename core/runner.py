"""Running one pass over one graph: node dispatch and the return protocol.

The runner visits only the nodes a :class:`~fxpasses.NodePass` subscribed to. Candidates are
found through FX's own index of nodes by ``(op, target)`` (``Graph.find_nodes``), so a pass
that wants ``conv`` nodes never looks at the other 99% of a graph; matched nodes are visited in
graph order. Nodes created during the pass are not visited; nodes erased before their turn
are skipped. The graph is edited in place and is *not* recompiled here.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Protocol

import torch
import torch.fx
from torch.fx.node import Node

from ._modpath import MISSING, ModulePaths
from ._order import NODES_COMPARE_IN_C, in_graph_order, precedes
from .context import PassContext, check_replacement, failure_place, replace_all_uses
from .errors import NodeHasUsersError, PassFailedError, exception_message, exception_text
from .ops import (
    call_op_name,
    callable_op_name,
    family_members,
    module_call_name,
    module_call_names,
    names_per_call,
    ops_generation,
)
from .passes import ERASE, KEEP, Erase, GraphPass, Keep, NodePass, Pass, Replace, Subscription, _defined_at

__all__ = ["run_pass", "would_rewrite", "HookError"]


#: what a pass's code (setup, run, hooks, finish) raises that fails the pass: any exception,
#: and SystemExit too (a pass calling sys.exit() is a failing pass, as a test is in pytest);
#: KeyboardInterrupt and GeneratorExit go through (the pipeline rolls back and re-raises)
PASS_ERRORS: tuple[type[BaseException], ...] = (Exception, SystemExit)


class HookError(Exception):
    """Raised by the runner when a hook fails; carries the node. Wrapped by the pipeline.
    ``returned_by``: the hook whose returned action the runner failed to apply (its code did
    not raise; the failure names it and its line), else None."""

    def __init__(self, node: Node | None, cause: BaseException, returned_by: Callable[..., Any] | None = None) -> None:
        super().__init__(exception_message(cause))
        self.node = node
        self.cause = cause
        self.place = failure_place(node)  # (described now: a rollback puts the node back)
        self.returned_by = returned_by


def _returned_by(exc: BaseException, hook: Callable[..., Any]) -> Callable[..., Any] | None:
    """``hook`` when ``exc`` was not raised in its own code (no frame of its traceback runs
    the hook's function: the runner raised it applying what the hook returned), else None.
    Read from the traceback on failure only: nothing is added to the loop over the nodes."""
    code = getattr(getattr(hook, "__func__", hook), "__code__", None)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return None
        tb = tb.tb_next
    return hook


def hook_name(hook: Callable[..., Any]) -> str:
    """``Class.method (file:line)`` of a bound hook: where its ``@on`` stands."""
    func = getattr(hook, "__func__", hook)
    defined = _defined_at(func)
    return f"{getattr(func, '__qualname__', repr(hook))}{f' ({defined})' if defined else ''}"


class _Matcher:
    """One subscription compiled for fast tests: op kinds, canonical names, exact targets.

    ``index`` is its position among the class's hooks (the run binds ``hooks[index]``)."""

    __slots__ = ("ops", "names", "targets", "module_targets", "all_of_op", "attr", "index")

    def __init__(self, sub: Subscription, attr: str, index: int) -> None:
        self.ops = sub.ops
        names: set[str] = set()
        for n in sub.names:
            names |= family_members(n)
        self.names = frozenset(names)
        self.module_targets = tuple(t for t in sub.targets if isinstance(t, type))
        self.targets = tuple(t for t in sub.targets if not isinstance(t, type))
        self.all_of_op = sub.wants_all_of_op()
        self.attr = attr
        self.index = index

    def match_function(self, target: Any, name: Any = MISSING) -> bool:
        """For a ``call_function`` node of ``target`` whose op name is ``name`` (default: the
        target's, :func:`~fxpasses.ops.callable_op_name`; a call's own comes from
        :func:`~fxpasses.ops.call_op_name` where its arguments name it: ``inplace`` makes it
        in-place, hardtanh's bounds (0, 6) make it relu6; see
        :func:`~fxpasses.ops.names_per_call`)."""
        if "call_function" not in self.ops:
            return False
        if self.all_of_op:
            return True
        if self.names and (callable_op_name(target) if name is MISSING else name) in self.names:
            return True
        return any(target is t or _same_op(target, t) for t in self.targets)

    def match_node(self, node: Node, gm: torch.nn.Module) -> bool:
        op = node.op
        if op not in self.ops:
            return False
        if op == "call_function":
            return self.match_function(node.target, call_op_name(node.target, node.args, node.kwargs))
        if self.all_of_op:
            return True
        if op == "call_method":
            return node.target in self.names or node.target in self.targets
        if op == "call_module":
            try:
                mod = gm.get_submodule(node.target)  # type: ignore[arg-type]
            except AttributeError:
                return False
            return self.match_module(mod)
        return node.target in self.targets

    def match_module(self, mod: torch.nn.Module | None) -> bool:
        """For a ``call_module`` node of this matcher's ops calling ``mod`` (None: missing)."""
        if self.all_of_op:
            return True
        if mod is None:
            return False
        if self.module_targets and isinstance(mod, self.module_targets):
            return True
        return bool(self.names) and module_call_name(mod) in self.names


#: which hooks match: indices into the class's hooks (one tuple object per distinct answer)
_Hits = tuple[int, ...]


class _Compiled:
    """A NodePass class's subscriptions compiled once, with the answers that depend on the
    class alone: which hooks match the ``call_function`` nodes of a target (when the target
    names all its calls alike) and the ``call_method`` nodes of a name. Kept on the class
    (:func:`_compiled`) and rebuilt when its ``_hooks`` or the op families change, so a run
    does not compile its subscriptions again (a pass over a small graph is mostly this
    fixed cost)."""

    __slots__ = ("hooks", "families", "matchers", "wanted_ops", "by_function", "by_method", "hits")

    def __init__(self, cls: type[NodePass]) -> None:
        self.hooks = cls._hooks
        self.families = ops_generation()
        self.matchers = tuple(_Matcher(sub, attr, i) for i, (attr, sub) in enumerate(cls._hooks))
        self.wanted_ops = frozenset().union(*(m.ops for m in self.matchers))
        self.by_function: dict[Any, _Hits] = {}
        self.by_method: dict[Any, _Hits] = {}
        self.hits: dict[_Hits, _Hits] = {}  # one object per answer (the runner compares them)

    def answer(self, ms: Any) -> _Hits:
        """The shared tuple of the indices of the matchers ``ms``."""
        key = tuple(m.index for m in ms)
        return self.hits.setdefault(key, key)

    def function_hits(self, target: Any) -> _Hits:
        """Hooks matching every ``call_function`` node of ``target`` (one not named per call)."""
        hits = self.by_function.get(target)
        if hits is None:
            hits = self.by_function[target] = self.answer(m for m in self.matchers if m.match_function(target))
        return hits


def _compiled(cls: type[NodePass]) -> _Compiled:
    """The class's :class:`_Compiled` (its own, not a base class's), made on first use."""
    comp = vars(cls).get("_fxpasses_compiled")
    if comp is None or comp.hooks is not cls._hooks or comp.families != ops_generation():
        comp = _Compiled(cls)
        type.__setattr__(cls, "_fxpasses_compiled", comp)
    return comp


def _same_op(target: Any, wanted: Any) -> bool:
    """An OpOverloadPacket subscription matches each of its overloads."""
    if isinstance(wanted, torch._ops.OpOverloadPacket) and isinstance(target, torch._ops.OpOverload):
        return target.overloadpacket is wanted
    return False


_FX_DIR = os.path.dirname(torch.fx.__file__) + os.sep


def fx_call_node(exc: BaseException, graph: torch.fx.Graph) -> Node | None:
    """The node of ``graph`` that the torch.fx call raising ``exc`` was about, for a
    whole-graph pass's failure: the first argument that is a node of ``graph`` (``self``
    first) of the outermost frame of torch.fx's code in ``exc``'s traceback that has one:
    ``graph.erase_node(n)``'s ``n``, ``node.replace_all_uses_with(v)``'s node, an
    ``Interpreter``'s ``run_node(n)`` (ShapeProp). None when the exception did not come
    through torch.fx, or no call there took a node of ``graph``."""
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        code = frame.f_code
        if code.co_filename.startswith(_FX_DIR):
            values = frame.f_locals
            names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            # the node the call is about first: a Node method's self, then a parameter torch.fx
            # names so (check_arg(arg, n) of Graph.lint is about n, whose argument is arg)
            for name in sorted(names, key=lambda a: a not in _NODE_PARAMETERS):
                v = values.get(name)
                # (not a node whose construction raised: Node.__init__'s half-built self,
                # which has no arguments to describe, hid the pass's error behind an
                # AttributeError of its own: a fault-injection check)
                if isinstance(v, Node) and v.graph is graph and hasattr(v, "_args") and hasattr(v, "_kwargs"):
                    return v
        tb = tb.tb_next
    return None


_NODE_PARAMETERS = ("self", "node", "n", "to_erase")


def _work_list(
    p: NodePass, gm: torch.fx.GraphModule
) -> tuple[list[Node], dict[Node, _Hits], _Hits | None, list[Callable[..., Any]]]:
    """The subscribed nodes in graph order, the hooks that match each (indices into the
    pass's bound hooks, the last item), and the hooks of every node when all share them
    (``found`` is then left empty: the work list of a pass subscribed to one call_function
    target is that target's bucket of the graph's index, not a copy)."""
    comp = _compiled(type(p))
    matchers = comp.matchers
    hooks = [getattr(p, m.attr) for m in matchers]
    graph = gm.graph
    found: dict[Node, _Hits] = {}
    groups: list[tuple[dict[Node, Any], _Hits]] = []  # call_function buckets
    table = getattr(graph, "_find_nodes_lookup_table", None)
    wanted_ops = comp.wanted_ops
    modules: dict[str, torch.nn.Module] | None = None
    if table is not None and isinstance(getattr(table, "table", None), dict):
        runs = 0  # index buckets the candidates come from (each in creation order)
        for (op, target), nodes in list(table.table.items()):
            if op not in wanted_ops or not nodes:
                continue
            before = len(found)
            if op == "call_function":
                if not names_per_call(target):  # one name for the whole bucket
                    hits = comp.function_hits(target)
                    if hits:
                        groups.append((nodes, hits))
                        runs += 1
                    continue
                # F.relu(x, inplace=True) is "relu_", F.relu(x) "relu", F.hardtanh(x, 0, 6)
                # "relu6": per call
                by_call: dict[Any, _Hits] = {}
                for n in nodes:
                    name = call_op_name(target, n.args, n.kwargs)
                    hits = by_call.get(name)  # type: ignore[assignment]
                    if hits is None:
                        hits = by_call[name] = comp.answer(m for m in matchers if m.match_function(target, name))
                    if hits:
                        found[n] = hits
            elif op == "call_module":
                # one module lookup per node for all matchers, through the registries
                mms = [m for m in matchers if "call_module" in m.ops]
                if modules is None:
                    modules = ModulePaths(gm).all_modules()
                # what matches depends on the class and the call's op name only; the name
                # only where some matcher wants one of the names a call of the class can have
                by_type: dict[tuple[type, str | None], _Hits] = {}
                named: dict[type, bool] = {}
                for n in nodes:
                    t = n.target
                    mod = modules.get(t, MISSING) if isinstance(t, str) else MISSING
                    if mod is MISSING:  # not a plain registry path: exactly as get_submodule
                        try:
                            mod = gm.get_submodule(t)  # type: ignore[arg-type]
                        except AttributeError:
                            mod = None
                    cls = type(mod)
                    wants_name = named.get(cls)
                    if wants_name is None:
                        can_be = module_call_names(cls)
                        wants_name = named[cls] = mod is not None and any(not m.names.isdisjoint(can_be) for m in mms)
                    key = (cls, module_call_name(mod) if wants_name else None)
                    hits = by_type.get(key)  # type: ignore[assignment]
                    if hits is None:
                        hits = by_type[key] = comp.answer(m for m in mms if m.match_module(mod))
                    if hits:
                        found[n] = hits
            elif op == "call_method":
                by_name = comp.by_method  # what matches depends on the name only
                for n in nodes:
                    t = n.target
                    try:
                        hits = by_name[t]
                    except KeyError:
                        hits = by_name[t] = comp.answer(m for m in matchers if m.match_node(n, gm))
                    except TypeError:  # unhashable target
                        hits = comp.answer(m for m in matchers if m.match_node(n, gm))
                    if hits:
                        found[n] = hits
            else:
                for n in nodes:
                    hits = comp.answer(m for m in matchers if m.match_node(n, gm))
                    if hits:
                        found[n] = hits
            runs += len(found) > before
        common: _Hits | None = None
        member: dict[Node, Any] = found
        if len(groups) == 1 and not found:
            member, common = groups[0]
        else:
            for bucket, hits in groups:
                found.update(dict.fromkeys(bucket, hits))
        if (runs > 1 or not NODES_COMPARE_IN_C) and len(member) * 6 > len(graph.nodes):
            # dense candidates of several buckets: sorting merges the buckets' runs (about
            # n log(runs) comparisons: 10 ms against 4.6 ms for 52k candidates of 10 buckets
            # at 100k nodes), and without nodes compared in C a sort builds a key tuple per
            # node: one walk of the graph filtered in C
            return list(filter(member.__contains__, graph.nodes)), found, common, hooks
        # the candidates of one bucket are mostly in graph order already (buckets fill in
        # creation order), which timsort takes in one pass of comparisons (in C, see
        # _order), without the walk of every node that filtering the graph makes
        return in_graph_order(member), found, common, hooks
    for n in graph.nodes:  # pragma: no cover - torch without the lookup table
        hits = comp.answer(m for m in matchers if m.match_node(n, gm))
        if hits:
            found[n] = hits
    return list(found), found, None, hooks


def _apply(node: Node, action: Any, ctx: PassContext) -> bool:
    """Carry out a hook's returned action; True when the graph changed.

    Raises:
        ValueError: the hook erased ``node`` itself and still returned an action for it;
            ``ERASE`` of the output node or of a placeholder (the module's inputs: erasing one
            changes how the module must be called), or ``Replace`` of the output node.
        NodeHasUsersError: ``ERASE`` of a node that other nodes still use.
    """
    if action is None or action is KEEP or isinstance(action, Keep):
        return False
    if node._erased:
        raise ValueError(
            f"hook returned {action!r} for %{node.name}, which it had erased itself: after erasing "
            "a node, return None (keep); or return ERASE or Replace(value) and let the runner erase it"
        )
    if isinstance(action, Replace):
        value = action.value
        if value is node:
            return False
        if node.op == "output":
            raise ValueError(
                f"hook returned {action!r} for the output node %{node.name}, which nothing uses: to "
                "change what the graph returns, replace the output node's arguments (node.args)"
            )
        replace_all_uses(node, value, ctx._journal)
        if not node.users and node.op != "placeholder":
            ctx.graph.erase_node(node)
        return True
    if action is ERASE or isinstance(action, Erase):
        if node.op == "output":
            raise ValueError(f"hook returned ERASE for the output node %{node.name}: a graph must keep its output node")
        if node.op == "placeholder":
            raise ValueError(
                f"hook returned ERASE for the input %{node.name} (a placeholder): erasing an input "
                "changes how the module must be called; Replace(value) replaces its uses instead"
            )
        if node.users:
            raise NodeHasUsersError(node)
        ctx.graph.erase_node(node)
        return True
    if isinstance(action, Node):
        raise TypeError(
            f"hook returned the node %{action.name}; return fxpasses.Replace(node) to replace "
            "uses, or None to keep the node"
        )
    raise TypeError(
        f"hook returned {action!r}; expected None, fxpasses.KEEP, fxpasses.Replace(value) "
        "or fxpasses.ERASE"
    )


class RewriteBudget(Protocol):
    """Counts rewrites against a limit (see :mod:`fxpasses.rewrites`)."""

    exhausted: bool

    def take(self, node: Node | None, action: Any) -> None:
        """Count one rewrite: ``action`` about to be applied to ``node`` (None, None: a
        whole-graph pass about to run)."""

    def cut(self) -> None:
        """The limit stopped a rewrite the pass would have made."""

    probe: bool
    """Whether to find out, once the budget is exhausted, if the pass would have rewritten
    any of its remaining nodes (:func:`would_rewrite`); False: :meth:`cut` as soon as nodes
    remain."""

    copy_tensors: bool
    """Whether that probe copies every tensor first (a pipeline's ``snapshot_tensors``)."""


def run_pass(
    p: Pass, gm: torch.fx.GraphModule, ctx: PassContext, budget: RewriteBudget | None = None
) -> bool | None:
    """Run ``p`` over ``gm`` in place.

    Returns whether the pass reported a change (node passes: any action other than keep;
    graph passes: what ``run`` returned, possibly None = unknown). With a ``budget``, every
    action other than keep (and a whole-graph pass's run) is counted, and the pass stops
    once the budget is exhausted.

    Raises:
        HookError: a hook or the pass raised; ``node`` is the node being visited, if any.
    """
    try:
        p.setup(gm, ctx)
    except PASS_ERRORS as exc:
        raise HookError(None, exc) from exc
    if isinstance(p, GraphPass):
        if budget is not None:
            budget.take(None, None)
        try:
            return p.run(gm, ctx)
        except PASS_ERRORS as exc:
            raise HookError(ctx.node or fx_call_node(exc, ctx.graph), exc) from exc
    assert isinstance(p, NodePass)
    changed = False
    nodes, found, common, hooks = _work_list(p, gm)
    if common is None and nodes:
        # answers are shared tuples (_Compiled.answer): one object when all nodes agree
        if len(hooks) == 1 or len({id(hits) for hits in found.values()}) <= 1:
            common = found[nodes[0]]
    if budget is None and common is not None and len(common) == 1:
        # the common case: every visited node has the same single hook; the same steps as
        # the general loop below, without its per-node bookkeeping
        hook = hooks[common[0]]
        graph = ctx.graph
        for node in nodes:
            if node._erased:
                continue
            ctx.node = node
            try:
                action = hook(node, ctx)
                if action is None or action is KEEP:
                    continue
                if type(action) is Replace and isinstance(action.value, Node) and not node._erased and node.op != "output":
                    # _apply's steps for the usual answer, inline
                    value = action.value
                    if value is node:
                        continue
                    if value.graph is not graph or value._erased or precedes(node, value):
                        check_replacement(node, value)  # the full check (it may raise)
                    node.replace_all_uses_with(value)
                    if not node.users and node.op != "placeholder":
                        graph.erase_node(node)
                    changed = True
                elif _apply(node, action, ctx):
                    changed = True
            except PASS_ERRORS as exc:
                raise HookError(node, exc, returned_by=_returned_by(exc, hook)) from exc
        nodes = []
    pending: list[tuple[Node, list[Callable[..., Any]]]] = []  # left unvisited by an exhausted budget
    for i, node in enumerate(nodes):
        if budget is not None and budget.exhausted:
            pending.extend((n, [hooks[j] for j in (found[n] if common is None else common)]) for n in nodes[i:])
            break
        hits = found[node] if common is None else common
        for j, k in enumerate(hits):
            if node._erased:
                break
            ctx.node = node
            try:
                action = hooks[k](node, ctx)
                if action is None or action is KEEP or isinstance(action, Keep):
                    continue  # the common answer, without a call
                if _is_self(action, node):
                    continue  # the node by itself: a keep (no rewrite to count)
                if budget is not None:
                    budget.take(node, action)
                did = _apply(node, action, ctx)
            except PASS_ERRORS as exc:
                raise HookError(node, exc, returned_by=_returned_by(exc, hooks[k])) from exc
            if did:
                changed = True
                break
            if budget is not None and budget.exhausted:
                if j + 1 < len(hits):
                    pending.append((node, [hooks[x] for x in hits[j + 1 :]]))
                break
    ctx.node = None
    try:
        p.finish(gm, ctx)
    except PASS_ERRORS as exc:
        raise HookError(None, exc) from exc
    if budget is not None and pending:
        if not budget.probe or _probe(p, gm, ctx, pending, budget.copy_tensors):
            budget.cut()
    return changed


def _is_self(action: Any, node: Node) -> bool:
    """Whether ``action`` is ``Replace(node)``: the node by itself, which changes nothing (a
    keep, not a rewrite)."""
    return isinstance(action, Replace) and action.value is node


def would_rewrite(p: Pass, gm: torch.fx.GraphModule, ctx: PassContext, copy_tensors: bool = False) -> bool:
    """Whether ``p`` would rewrite anything in ``gm`` as it is now, without changing it: the
    pass's ``setup`` and hooks run as in :func:`run_pass` until one returns an action other
    than keep (or raises), or a whole-graph pass's ``setup`` and ``run``, and everything is
    then put back (see :func:`_probe`; ``copy_tensors``: as a pipeline's
    ``snapshot_tensors``).

    Raises:
        ProbeLeftChanges: the pass changed tensors the undo could not put back."""
    return _probe(p, gm, ctx, None, copy_tensors)


class ProbeLeftChanges(RuntimeError):
    """A pass run to find out whether it would rewrite anything (:func:`would_rewrite`)
    changed tensors that could not be put back: it rebound ``.data``, swapped tensors or wrote
    through numpy, where no write guard sees it. The pass fails with it (its pipeline's
    rollback then says what it could not restore)."""


def _probe(
    p: Pass,
    gm: torch.fx.GraphModule,
    ctx: PassContext,
    pending: list[tuple[Node, list[Callable[..., Any]]]] | None,
    copy_tensors: bool = False,
) -> bool:
    """Call the hooks of ``pending`` (None: ``p.setup`` and then every subscribed node, as a
    run would) until one returns an action other than keep, or raises: True then, False when
    every one keeps its node. A whole-graph pass (:class:`GraphPass`, ``pending`` None) is
    run: True when it raises, or changed the graph, the module tree or a tensor in place
    (compared with before, as a run's ``changed`` is: not what ``run`` returned). Nothing a
    hook returns is applied, and whatever the hooks (and
    ``setup``, and a whole-graph pass's ``run``) did themselves is undone: the graph and module tree through a
    :class:`~fxpasses.snapshot.Snapshot` (tensors written in place inside its write guard,
    whatever the pass declares), and the context's counters, skips, notes and
    analyses. Not undone: the pass object's own attributes (its ``finish`` has run, or it
    never runs: nothing reads them afterwards), and what the hooks do outside the module.

    This answers what the rewrite limit stopped: a pass cut off by the limit would have gone
    on with these hooks (they see the pass's state after ``finish`` rather than before it).
    ``copy_tensors``: every tensor copied first (a pipeline's ``snapshot_tensors``), so that
    writes no guard sees are undone too; a change that could not be undone raises
    :class:`ProbeLeftChanges` (a rollback-attack check: a pass the limit kept from running
    zeroed a weight through ``.data``, silently)."""
    from .snapshot import Snapshot

    snap = Snapshot(gm, copy_tensors=copy_tensors)
    would = _probe_calls(p, gm, ctx, pending, snap)  # (everything put back after the calls)
    if snap.unrestorable:
        raise ProbeLeftChanges(
            "the rewrite limit kept the pass from running, and it was run once to find out whether it would "
            "have rewritten anything (what it did then undone), but it changed tensors no undo could put back "
            f"(it rebinds .data, swaps tensors, or writes through numpy): {', '.join(snap.unrestorable)}; "
            "snapshot_tensors=True restores them"
        )
    return would


def _probe_calls(
    p: Pass,
    gm: torch.fx.GraphModule,
    ctx: PassContext,
    pending: list[tuple[Node, list[Callable[..., Any]]]] | None,
    snap: Any,
) -> bool:
    """:func:`_probe`'s calls of the hooks (or of a whole-graph pass), with everything put
    back from ``snap`` after them."""
    saved = (
        ctx.counters.copy(),
        list(ctx.skipped),
        list(ctx.output_changes),
        dict(ctx.analyses),
        ctx.node,
    )
    # every tensor guarded: a pass declaring writes_tensors=False that writes one anyway would
    # otherwise leave the write of a pass the limit kept from running (its run is put back)
    guard = snap.guard()
    try:
        with guard:
            if isinstance(p, GraphPass):
                p.setup(gm, ctx)
                p.run(gm, ctx)  # (what it returns is not taken, as a run's changed is not)
                return bool(snap.changed())  # (tensors written in place included)
            assert isinstance(p, NodePass)
            if pending is None:
                p.setup(gm, ctx)
                nodes, found, common, hooks = _work_list(p, gm)
                pending = [(n, [hooks[j] for j in (found[n] if common is None else common)]) for n in nodes]
            for node, ms in pending:
                for hook in ms:
                    if node._erased:
                        break
                    ctx.node = node
                    action = hook(node, ctx)
                    if not (action is None or action is KEEP or isinstance(action, Keep) or _is_self(action, node)):
                        return True
        return False
    except PASS_ERRORS:  # the hook would have failed the pass: the limit stopped that too
        return True
    finally:
        snap.restore()
        counters, skipped, output_changes, analyses, node = saved
        ctx.counters.clear()
        ctx.counters.update(counters)
        ctx.skipped[:] = skipped
        ctx.output_changes[:] = output_changes
        ctx.analyses.clear()
        ctx.analyses.update(analyses)
        ctx.node = node
        ctx.graph = gm.graph


def hook_failure(pass_name: str, err: HookError, *, rolled_back: bool, notes: list[str]) -> PassFailedError:
    """The user-facing error for a failed hook, with node context and source line."""
    cause = err.cause
    reason = f"{exception_text(cause)}"
    exc = PassFailedError(
        pass_name,
        reason,
        **err.place,
        rolled_back=rolled_back,
        notes=notes,
    )
    exc.__cause__ = cause
    return exc
