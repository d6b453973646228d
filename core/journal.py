"""Journaled rollback: record only what a pass touches, just before it touches it.

A :class:`~fxpasses.snapshot.Snapshot` records every node and every module before every pass:
about 0.23 s on a 100k-node graph with 26k modules, a third of the built-in pipeline, whatever
the pass then changes. A pass whose edits all go through channels the runner can see declares
``journal_edits = True`` (see :class:`fxpasses.Pass`), and the pipeline records a
:class:`Journal` for it instead, whose cost grows with the edits, not with the graph:

- torch.fx's own hooks on the ``GraphModule`` (``_create_node_hooks``, ``_erase_node_hooks``,
  ``_replace_hooks``, the ones ``GraphModule._register_*_hook`` installs) report every node
  ``Graph.create_node`` makes (and so ``call_function``, ``inserting_before`` ... and
  ``PassContext.create_node``), every node ``Graph.erase_node`` is about to erase, and every user
  whose input ``Node.replace_all_uses_with`` / ``replace_input_with`` or a rename is about to
  change. Before the first change of a node that existed before the pass, its record is taken
  (the fields, a copy of ``meta`` and the order of its users, as a snapshot records every
  node), together with the records of the nodes whose order of users the change moves (the
  inputs of an erased node or of a changed user: FX moves a node to the end of each input's
  ``users`` when its arguments are set).
- :class:`~fxpasses.PassContext` reports what FX cannot: a node rewritten with a constant
  (``replace_uses``), a rename, a new target (``set_target``), and each module it is about
  to change (``add_constant``, ``add_submodule``, ``before_module_edit``), whose
  ``__dict__``, registries and hooks are then recorded as a snapshot records every module.
- The graph's own attributes and its code generator's (the input and output specs of
  torch.export's), its name space (C-level copies), ``GraphModule.meta``, torch's global module
  hooks and the class's ``forward`` are recorded whole at the start.

:meth:`Journal.restore` puts all of it back, so that the graph and module tree are what a
snapshot's restore gives: the same ``Node`` objects in the same order with the same fields,
``meta`` and users, nodes the pass created gone, erased ones back in place (by their recorded
``_sort_key``, FX's order key), the recorded modules as they were.

What the journal cannot see, and so cannot undo: assignments to ``node.args``/``kwargs``/
``target`` (``node.args = ...``, ``update_arg``; ``PassContext.set_target`` is seen),
in-place changes of an existing node's ``meta`` (``replace_all_uses_with(propagate_meta=True)``
makes one), nodes moved with ``prepend``/``append``, modules changed other than through the context (a nested
GraphModule's graph included: ``before_module_edit`` of it records its nodes), tensors
written in place. A pass that does any of these keeps the default
(``journal_edits = False``, a snapshot before it). With the environment variable
``FXPASSES_CHECK_JOURNAL=1`` (:func:`checking`), the pipeline takes a snapshot as well, rolls
every journaled pass back through its journal, compares the result with the snapshot exactly
(:meth:`~fxpasses.snapshot.Snapshot.differences`) and fails the pass with an ``AssertionError``
naming what the journal missed; then it puts the pass's result back and goes on. The test suite
runs with it on; pass authors can too (``fxpasses.testing.assert_preserves_outputs`` does).

This module touches the same private fields of ``torch.fx`` as :mod:`fxpasses.snapshot`.
"""

from __future__ import annotations

import contextlib
import os
from itertools import compress, filterfalse
from operator import attrgetter, is_not
from typing import Any, Iterator

import torch
import torch.fx
from torch.fx.node import Node

from ._modpath import MISSING, ModulePaths
from ._order import in_graph_order
from .lint import _changed_atoms
from .snapshot import (
    GraphRecord,
    _same_items,
    detach_nodes,
    drop_stray_users,
    module_record_differs,
    node_change_kinds,
    node_changes,
    node_record,
    nodes_changed,
    put_users_in_order,
    record_module,
    record_namespace,
    record_differs,
    record_graph_attributes,
    record_surroundings,
    relink,
    reset_nodes,
    restore_graph_records,
    restore_graph_state,
    restore_module,
    restore_surroundings,
)

__all__ = [
    "Journal",
    "CheckedJournal",
    "JournalMismatch",
    "WritesTensorsMismatch",
    "hold_writes_tensors",
    "GraphWatch",
    "NodeFrame",
    "checking",
    "check_journals",
    "supports_journal",
]

_ENV = "FXPASSES_CHECK_JOURNAL"
_forced = 0  # nesting depth of check_journals()
_HOOK_LISTS = ("_create_node_hooks", "_erase_node_hooks", "_replace_hooks")


def checking() -> bool:
    """Whether pipelines check each journal against a snapshot (``FXPASSES_CHECK_JOURNAL`` set
    to anything but ``""``/``"0"``, or inside :func:`check_journals`)."""
    return _forced > 0 or os.environ.get(_ENV, "") not in ("", "0")


@contextlib.contextmanager
def check_journals() -> Iterator[None]:
    """Check every journal against a snapshot while inside (see :func:`checking`)."""
    global _forced
    _forced += 1
    try:
        yield
    finally:
        _forced -= 1


def supports_journal(gm: torch.fx.GraphModule) -> bool:
    """Whether ``gm`` has torch.fx's node-hook lists (attributes ``GraphModule.__init__``
    makes in the torch versions fxpasses supports; checked here, not assumed) and owns its
    graph, which journaling needs. Otherwise the pipeline takes a snapshot."""
    d = gm.__dict__
    return all(isinstance(d.get(k), list) for k in _HOOK_LISTS) and gm.graph.owning_module is gm


def _add_node_hooks(gm: torch.fx.GraphModule, hooks: tuple[Any, ...]) -> None:
    """Append ``hooks`` (create, erase, replace) to torch.fx's node-hook lists of ``gm``."""
    for name, hook in zip(_HOOK_LISTS, hooks):
        getattr(gm, name).append(hook)


def _remove_node_hooks(gm: torch.fx.GraphModule, hooks: tuple[Any, ...]) -> None:
    """Remove ``hooks`` from ``gm``'s node-hook lists again, by identity (the last of each)."""
    for name, hook in zip(_HOOK_LISTS, hooks):
        lst = gm.__dict__.get(name)
        if isinstance(lst, list):
            for i in range(len(lst) - 1, -1, -1):
                if lst[i] is hook:
                    del lst[i]
                    break


class Journal:
    """Records of the nodes and modules a pass is about to change (see the module doc).

    Use as ``journal.attach()`` before the pass and ``journal.detach()`` after it (a context
    manager: ``with journal:``); :meth:`restore` undoes what was recorded."""

    __slots__ = (
        "gm",
        "graph",
        "records",
        "created",
        "edited",
        "modules",
        "subgraphs",
        "graph_dict",
        "namespace",
        "surroundings",
        "unrestorable",
        "_attached",
        "_hooks",
    )

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.gm = gm
        graph = gm.graph
        self.graph = graph
        self.records: dict[Node, tuple[Any, ...]] = {}  # node -> its record before the pass
        self.created: dict[Node, None] = {}  # nodes the pass made, in order
        self.edited: dict[Node, None] = {}  # recorded nodes whose own fields change
        self.modules: dict[int, tuple[Any, ...]] = {}  # id(module) -> its record
        self.subgraphs: list[GraphRecord] = []  # graphs of the nested GraphModules among them
        self.graph_dict = record_graph_attributes(graph)
        self.namespace = record_namespace(graph)
        self.surroundings = record_surroundings(gm)  # GraphModule.meta, global hooks, forward
        self.unrestorable: list[str] = []  # (the interface of Snapshot; tensors are not journaled)
        self._attached = False
        # the bound methods while attached (removed again by identity), dropped on detach:
        # they hold the journal, which would otherwise be a reference cycle, freed only by
        # the cyclic collector (a pipeline's journals all lived until its end, then took a
        # collection of their records' objects: 0.9 s on the 100k-node built-in pipeline)
        self._hooks: tuple[Any, ...] = ()

    # ------------------------------------------------------------------ recording

    def attach(self) -> None:
        """Install the journal's hooks on the GraphModule (after any already there)."""
        if self._attached:
            return
        self._hooks = (self._on_create, self._on_erase, self._on_replace)
        _add_node_hooks(self.gm, self._hooks)
        self._attached = True

    def detach(self) -> None:
        """Remove the journal's hooks (what they recorded stays)."""
        if not self._attached:
            return
        _remove_node_hooks(self.gm, self._hooks)
        self._hooks = ()
        self._attached = False

    def __enter__(self) -> "Journal":
        self.attach()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.detach()

    def node(self, n: Node) -> None:
        """Record ``n`` before its users change (once; not a node the pass created)."""
        if n not in self.records and n not in self.created:
            self.records[n] = node_record(n)

    def edit(self, n: Node) -> None:
        """Record ``n`` before its own fields change (its name, arguments, target)."""
        self.node(n)
        self.edited[n] = None

    def user(self, n: Node) -> None:
        """Record ``n`` and its inputs before ``n``'s arguments change (setting them moves
        ``n`` to the end of each input's ``users``).

        An input with at most one user is not recorded for this: an order of one cannot be
        wrong, and its own fields are recorded when they are about to change (every edit of
        a node reaches the journal first). Its users then are its users before the pass,
        plus the ones the pass gave it (a node loses a user only through an edit of that
        user, which records the input while it still has it), so at most one before the
        pass. (The built-in pipeline on the 100k block graph: 131,575 records instead of
        142,101; most inputs passed over here are recorded later, when erased or edited.)"""
        self.edit(n)
        for i in n._input_nodes:
            if len(i.users) > 1:
                self.node(i)

    def module(self, m: torch.nn.Module) -> None:
        """Record module ``m`` before it changes (once); of a GraphModule nested in the tree,
        its graph too (the nodes of a ``torch.cond`` branch: no hook tells of their edits)."""
        if id(m) not in self.modules:
            self.modules[id(m)] = record_module(m)
            if m is not self.gm and isinstance(m, torch.fx.GraphModule):
                self.subgraphs.append(GraphRecord(m))

    def _on_create(self, n: Node) -> None:
        self.created[n] = None

    def _on_erase(self, n: Node) -> None:
        if n in self.created:
            return
        self.user(n)  # erasing sets its arguments to None: its inputs lose it as a user

    def _on_replace(self, old: Node, new: Any, user: Node) -> None:
        # ``user``'s input ``old`` becomes the node named ``new``, or ``old`` is renamed to
        # ``new`` (FX tells the two apart nowhere): both count as edited
        self.user(user)
        self.edit(old)  # a rename changes ``old`` itself: recorded whatever its users

    # ------------------------------------------------------------------ questions

    def changed(self) -> bool:
        """Whether anything recorded differs from its record, or the pass left a node it
        created in the graph."""
        if any(not n._erased for n in self.created):
            return True
        if any(n._erased or record_differs(n, rec) for n, rec in self.records.items()):
            return True
        return any(map(module_record_differs, self.modules.values())) or any(g.changed() for g in self.subgraphs)

    def arguments_of(self, node: Node) -> tuple[Any, Any] | None:
        """The ``(args, kwargs)`` objects ``node`` held before the pass (None: the pass made
        it); a node never recorded holds them still."""
        rec = self.records.get(node)
        if rec is not None:
            return rec[4], rec[5]
        if node in self.created:
            return None
        return node._args, node._kwargs

    def touched(self) -> list[Node]:
        """The nodes the pass created or edited (their arguments, target or name) that are in
        the graph now, in graph order: what lint and the argument check look at again. Nodes
        recorded only for the order of their users are left out: nothing of theirs that lint
        checks changed."""
        out = [n for n in self.created if not n._erased]
        out += [n for n in self.edited if not n._erased]
        return in_graph_order(out)

    def node_changes(self) -> list[str]:
        """What the pass did to the nodes, in words (:func:`fxpasses.snapshot.node_changes`)."""
        return node_changes(self.gm.graph, self.records.values(), self.created)

    def moved(self) -> list[Node]:
        """Recorded nodes of the graph whose place (``_sort_key``) differs from their record."""
        return [n for n, rec in self.records.items() if not n._erased and n._sort_key != rec[7]]

    def module_records(self) -> list[tuple[Any, ...]]:
        """The records of the modules the pass said it would change."""
        return list(self.modules.values())

    def module_answers_hold(self) -> bool:
        """Whether what effect analysis answered for ``call_module`` nodes before the pass
        still holds. A call's answer depends on the modules along its target's path (what
        each name resolves to) and on the called module's subtree (classes, flags, hooks,
        children), and on torch's global module hooks. So it holds when the hooks are as
        they were, no recorded module changed its class or ``__dict__``, the root only gained
        names (new submodules, buffers, parameters change neither what an existing target
        resolves to nor the summary of a called module, none of which contains the root),
        and every other recorded module (one that gained, lost or rebound names: e.g. the
        container a fused module was added to, or whose folded buffer was pruned; one
        recorded but left as it was counts alike) is neither a called module nor inside one,
        and no target passes through a name it lost or had rebound. A changed nested
        ``GraphModule`` (its own graph edited) never holds."""
        gm = self.gm
        changed: set[int] = set()  # ids of the non-root modules that changed
        lost: set[str] = set()  # names they lost or had rebound
        for rec in self.modules.values():
            atoms = _changed_atoms(rec)
            if atoms is None:
                return False
            m = rec[0]
            if m is gm:
                if atoms:
                    return False
                continue
            # (a module recorded but left as it was counts as changed: the cheaper question)
            if isinstance(m, torch.fx.GraphModule):
                return False
            changed.add(id(m))
            lost |= atoms
        if not all(_same_items(live, rec) for live, rec in self.surroundings[1]):
            return False
        if self.subgraphs and any(g.changed() for g in self.subgraphs):
            return False
        return not changed or not _calls_reach(gm, changed, lost)

    # interface shared with Snapshot (the pipeline's rollback uses either)
    def pass_done(self) -> None:
        """Nothing to note (tensors are not journaled)."""

    # ------------------------------------------------------------------ undoing

    def restore(self) -> None:
        """Put back everything recorded (see the module doc), in the order a snapshot's restore
        works: modules, then the graph's nodes, then its own state."""
        self.detach()
        gm = self.gm
        restore_surroundings(gm, self.surroundings)
        for rec in self.modules.values():
            restore_module(rec)
        graph = self.graph
        if gm.__dict__.get("_graph") is not graph:
            gm.__dict__["_graph"] = graph
        records = self.records
        # 1. nodes the pass created and left in the graph
        detach_nodes([n for n in self.created if not n._erased])
        # 2. erased (or moved) nodes back in place: order by the recorded place of recorded
        # nodes; every other node is where it was
        back = [n for n in records if n._erased]
        if back or self.moved():
            place = attrgetter("_sort_key")

            def key(n: Node) -> Any:
                rec = records.get(n)
                return rec[7] if rec is not None else place(n)

            nodes = sorted([*graph.nodes, *back], key=key)  # nearly sorted: Timsort's merge
            relink(graph, nodes)
        else:
            nodes = list(graph.nodes)
        # 3. the recorded nodes' fields, arguments and order of users; users torch.fx
        # registered for a node it never inserted (see drop_stray_users) anywhere
        reset_nodes(list(records.values()), every_args=False)
        drop_stray_users(nodes)
        # 4. the graph's own state, and the graphs of nested GraphModules it recorded
        restore_graph_state(graph, self.graph_dict, self.namespace, nodes)
        for sub in self.subgraphs:
            sub.restore()


class JournalMismatch(AssertionError):
    """Check mode (:func:`checking`): rolling a pass back through its journal did not give the
    state the snapshot taken before it recorded, so the pass edits something the journal
    cannot see (its ``journal_edits = True`` is wrong)."""

    def __init__(self, pass_name: str, when: str, differences: list[str]) -> None:
        super().__init__(
            f"pass {pass_name!r} declares journal_edits=True, but rolling it back through its journal "
            f"{when} left the graph or module differing from before the pass: " + "; ".join(differences)
            + " (set journal_edits = False, or make the edit through torch.fx's editing methods or the "
            "PassContext)"
        )
        self.pass_name = pass_name
        self.differences = differences


class WritesTensorsMismatch(JournalMismatch):
    """Check mode (:func:`checking`): a pass that declares ``writes_tensors = False`` wrote
    parameters, buffers or tensor attributes of the module in place, which a failed run then
    cannot restore (no write guard runs for it)."""

    def __init__(self, pass_name: str, written: list[str]) -> None:
        more = f" and {len(written) - 5} more" if len(written) > 5 else ""
        AssertionError.__init__(
            self,
            f"pass {pass_name!r} declares writes_tensors=False, but wrote these tensors of the module in place: "
            + ", ".join(repr(n) for n in written[:5]) + more
            + " (a failed run could not restore them: declare writes_tensors = True, with journal_edits = False, "
            "or write new tensors, ctx.add_constant(...), instead of changing existing ones)",
        )
        self.pass_name = pass_name
        self.differences = [f"tensors written in place: {', '.join(written)}"]
        self.written = written


def hold_writes_tensors(snapshot: Any, pass_name: str) -> None:
    """Check mode, after pass ``pass_name`` declaring ``writes_tensors = False``: if it wrote
    tensors of the module in place since ``snapshot`` (a :class:`~fxpasses.snapshot.Snapshot`
    taken before it), restore the snapshot and raise :class:`WritesTensorsMismatch` naming them."""
    written = snapshot.modified_tensors()
    if written:
        snapshot.restore()
        raise WritesTensorsMismatch(pass_name, written)


class CheckedJournal(Journal):
    """A :class:`Journal` checked against a :class:`~fxpasses.snapshot.Snapshot` taken with it
    (check mode). :meth:`verify`, after the pass, rolls the pass back through the journal,
    compares, and puts the pass's result back; :meth:`restore` rolls back through the journal
    and compares. A difference restores the snapshot and raises :class:`JournalMismatch`."""

    __slots__ = ("snapshot", "pass_name", "_spent")

    def __init__(self, gm: torch.fx.GraphModule, pass_name: str) -> None:
        from .snapshot import Snapshot

        self.snapshot = Snapshot(gm)
        super().__init__(gm)
        self.pass_name = pass_name
        self._spent = False

    def _compare(self, when: str) -> None:
        differences = self.snapshot.differences()
        if differences:
            self.snapshot.restore()
            self._spent = True
            raise JournalMismatch(self.pass_name, when, differences)

    def verify(self) -> None:
        """After the pass: undo it through the journal, compare, redo it (from a snapshot of
        its result)."""
        from .snapshot import Snapshot

        after = Snapshot(self.gm)
        super().restore()
        self._compare("after it ran")
        after.restore()

    def restore(self) -> None:
        if self._spent:
            return
        super().restore()
        self._compare("after it failed")

    def pass_done(self) -> None:
        self.snapshot.pass_done()  # what verification's runs write next is not the pass's

    def undeclared_writes(self) -> None:
        """Check mode, after a pass declaring ``writes_tensors = False``: raise
        :class:`WritesTensorsMismatch` (after restoring the snapshot) if it wrote tensors of
        the module in place."""
        try:
            hold_writes_tensors(self.snapshot, self.pass_name)
        except WritesTensorsMismatch:
            self._spent = True  # (the snapshot restored the module: nothing left to undo)
            raise


_USERS = attrgetter("users")
# what a node's code and its inputs' users depend on, and its name (the variable of the code:
# torch.fx tells the rename of a node with no users to no hook, so the journal cannot see it)
_FIELDS = ("op", "target", "_args", "_kwargs", "name")


class NodeFrame:
    """What a journal does not record and a pass that declares ``journal_edits=True`` must not
    change: the graph's nodes in order, with each one's ``target``, ``args`` and ``kwargs``,
    ``op`` and ``name`` (the objects, not copies, read and compared by identity in C: about 30 ms to
    take and 35 ms to check at 100k nodes, a fifth of it the names; an argument replaced by an equal one of another
    type, ``1`` by ``1.0``, is a change). Taken before a third-party journaled pass, it tells
    the edits the pass made outside its journal (:meth:`unjournaled`: moved nodes, assigned
    ``node.args``, ``node.target`` or ``node.op``, nodes inserted or taken out without
    torch.fx's node hooks) and puts them back after the journal's restore (:meth:`put_back`).
    Each node's order of ``users`` is recorded too (about 20 ms more at 100k nodes), since
    setting ``args`` moves the node to the end of each input's ``users``: :meth:`put_back`
    puts that order back with the arguments. ``meta`` and module attributes are not in it."""

    __slots__ = ("graph", "nodes", "fields", "keys", "users")

    def __init__(self, graph: torch.fx.Graph) -> None:
        self.graph = graph
        self.nodes = list(graph.nodes)
        self.fields = [list(map(attrgetter(f), self.nodes)) for f in _FIELDS]
        self.keys = list(map(attrgetter("_sort_key"), self.nodes))  # (put back with the order)
        # (one user or none: nothing to order)
        self.users = [tuple(u) if len(u) > 1 else None for u in map(_USERS, self.nodes)]

    def _changed(self) -> list[int]:
        """The positions, in order, of the frame's nodes whose op, target, args, kwargs or
        name object is not the recorded one."""
        nodes = self.nodes
        hit: set[int] = set()
        for f, before in zip(_FIELDS, self.fields):
            hit.update(compress(range(len(nodes)), map(is_not, before, map(attrgetter(f), nodes))))
        return sorted(hit)

    def unjournaled(self, journal: "Journal") -> list[str]:
        """The edits of the pass that ``journal`` did not record, one description each (for
        order, the first node out of place only: one move shifts every node after it); []
        when none."""
        recorded, created = journal.records, journal.created
        out = []
        for i in self._changed():
            n = self.nodes[i]
            if n._erased or n in recorded:
                continue
            what = [f.lstrip("_") for f, before in zip(_FIELDS, self.fields) if getattr(n, f) is not before[i]]
            was = self.fields[4][i]
            out.append(f"%{was}: {', '.join(what)} assigned" + (f" (now %{n.name})" if n.name != was else ""))
        survivors = list(filterfalse(attrgetter("_erased"), self.nodes))
        now = list(filterfalse(created.__contains__, self.graph.nodes))
        if now != survivors:
            known, in_graph = set(self.nodes), set(now)
            for i, n in enumerate(now):
                expected = survivors[i] if i < len(survivors) else None
                if n is not expected:
                    if n not in known:
                        out.append(f"%{n.name}: inserted without torch.fx's node hooks")
                    elif expected is not None and expected not in in_graph:
                        out.append(f"%{expected.name}: taken out of the graph without torch.fx's node hooks")
                    else:
                        out.append(f"%{n.name}: moved" + (f" before %{expected.name}" if expected is not None else ""))
                    break
            else:
                out.append(f"%{survivors[len(now)].name}: taken out of the graph without torch.fx's node hooks")
        return out

    def put_back(self) -> list[str] | None:
        """After the journal's restore: put the nodes' order and each one's ``op``,
        ``target``, ``args`` and ``kwargs`` back as the frame has them (torch.fx's own ``prepend`` for the
        order, which keeps the places consistent; setting ``args`` updates the inputs' users).
        Returns what was put back, one description each ([] when the journal restored all);
        None, changing nothing, when the graph's nodes are not the frame's (a node erased or
        inserted without torch.fx's node hooks): it cannot be put back."""
        graph, nodes = self.graph, self.nodes
        now = list(graph.nodes)
        out = []
        if now != nodes:
            if len(now) != len(nodes) or set(now) != set(nodes):
                return None
            out.append("the node order")
            root = graph._root  # type: ignore[attr-defined]
            for n in nodes:
                root.prepend(n)  # to the end, in order
            for n, key in zip(nodes, self.keys):  # the places' keys as they were (records hold them)
                object.__setattr__(n, "_sort_key", key)
        ops, targets, args, kwargs, names = self.fields
        for i in self._changed():
            n = nodes[i]
            what = []
            if n.name is not names[i]:
                # (as it was, without the rename hooks: the users' code is generated anew, and
                # the graph's namespace still holds the old name, never freed)
                object.__setattr__(n, "name", names[i])
                what.append("name")
            if n.op is not ops[i]:
                n.op = ops[i]
                what.append("op")
            if n.target is not targets[i]:
                n.target = targets[i]
                what.append("target")
            if n._args is not args[i] or n._kwargs is not kwargs[i]:
                n.args, n.kwargs = args[i], kwargs[i]  # (the setters rebuild the inputs' users)
                n._args, n._kwargs = args[i], kwargs[i]  # the very objects: equal, copied by the setters
                what.append("args")
            out.append(f"%{n.name}'s {' and '.join(what)}")
        if out:  # arguments set again moved nodes within their inputs' users
            for n, order in zip(nodes, self.users):
                if order is not None:
                    put_users_in_order(n.users, order)
        return out


def _calls_reach(gm: torch.fx.GraphModule, changed: set[int], lost: set[str]) -> bool:
    """Whether some ``call_module`` node of ``gm``'s graph may call one of the modules whose
    ids are ``changed`` or a module containing one, or has a target through one of the names
    ``lost`` (those spelled anywhere in a target count: no path is resolved for them); a
    target that does not resolve through the registries counts as reaching them."""
    paths = ModulePaths(gm)
    reaches: dict[int, bool] = {}  # id(called module) -> whether its subtree holds a changed one
    for node in gm.graph.find_nodes(op="call_module"):
        target = node.target
        if not isinstance(target, str) or (lost and not lost.isdisjoint(target.split("."))):
            return True
        mod = paths.module(target)
        if mod is MISSING:
            return True
        hit = reaches.get(id(mod))
        if hit is None:
            hit = False
            seen: set[int] = set()
            stack = [mod]
            while stack:  # mod.modules(), each module once
                m = stack.pop()
                if id(m) in seen:
                    continue
                seen.add(id(m))
                if id(m) in changed:
                    hit = True
                    break
                stack.extend(c for c in m._modules.values() if c is not None)
            reaches[id(mod)] = hit
        if hit:
            return True
    return False


class GraphWatch:
    """Whether code that must only read a GraphModule's graph (an instrument's hook) changed
    it, and the means to undo that.

    Cheap while nothing changes: a copy of the graph's attributes and name space (C-level
    dict copies, about 5 ms at 100k nodes), the node count and the last node. torch.fx's node
    hooks on the GraphModule (the ones a :class:`Journal` uses) tell of the first node
    created, erased, renamed or rewired through ``replace_all_uses_with`` /
    ``replace_input_with``; at that moment, before anything else can change, every node is
    recorded (O(n), as a :class:`~fxpasses.snapshot.Snapshot` records them), so that
    :meth:`change` compares each node exactly and :meth:`restore` puts the graph back exactly,
    assignments to ``node.args`` made after it included.

    Without any node hook, the last node (the output) is compared with its record (O(1)), so
    an assignment to ``output.args`` is seen and undone too. What it cannot see: other edits
    without a node hook (assigning ``node.args``/``kwargs``/``target`` of other existing nodes
    only, in-place ``meta`` edits, moving nodes inside the graph) are caught only when they
    change the node count or the last node, and then cannot be undone; modules and tensors are
    not watched. (A :class:`NodeFrame` would see those assignments and moves, at about 55 ms a
    hook call on a 100k-node graph: a second per pipeline of six passes with one instrument,
    measured; instruments such as ``--time-passes`` must stay cheap.) A GraphModule without
    torch.fx's hook lists (:func:`supports_journal`) is watched through the node count and the
    last node alone.

    Use: ``watch = GraphWatch(gm)``, run the code, :meth:`change` (None or what changed),
    :meth:`restore` when it did, :meth:`close` at the end (removes the hooks).
    """

    __slots__ = ("gm", "graph", "graph_dict", "namespace", "count", "last", "records", "created", "_hooks")

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.gm = gm
        graph = gm.graph
        self.graph = graph
        self.graph_dict = record_graph_attributes(graph)
        self.namespace = record_namespace(graph)
        self.count = len(graph.nodes)
        self.last = node_record(graph._root._prev)  # (the root itself in an empty graph)
        self.records: list[tuple[Any, ...]] | None = None  # every node, at the first node event
        self.created: list[Node] = []
        self._hooks: tuple[Any, ...] = ()
        if supports_journal(gm):
            self._hooks = (self._on_create, self._on_event, self._on_event)
            _add_node_hooks(gm, self._hooks)

    def _on_create(self, n: Node) -> None:
        self.created.append(n)
        if self.records is None:  # ``n`` is in the graph already; nothing else changed yet
            self.records = [node_record(m) for m in self.graph.nodes if m is not n]

    def _on_event(self, *args: Any, **kwargs: Any) -> None:  # about to erase, rewire, rename
        if self.records is None:
            self.records = list(map(node_record, self.graph.nodes))

    def change(self) -> str | None:
        """What changed in the graph since the watch began, in words (None: nothing seen)."""
        gm = self.gm
        if gm.__dict__.get("_graph") is not self.graph:
            return "gm.graph was replaced by another graph"
        if self.records is not None and nodes_changed(self.graph, self.records):
            kinds = node_change_kinds(self.graph, self.records)
            parts = []
            for label, kind in (("added", "new"), ("erased", "erased"), ("changed", "edited")):
                names = [name for _, k, name in kinds if k == kind]
                if names:
                    parts.append(
                        f"{label} {len(names)} node(s): "
                        + ", ".join(f"%{name}" for name in names[:5])
                        + (", ..." if len(names) > 5 else "")
                    )
            return "; ".join(parts) or "its nodes were reordered"
        graph = self.graph
        last = self.last[0]
        if len(graph.nodes) != self.count or graph._root._prev is not last:
            return "its node count or last node changed, by edits no torch.fx hook reports"
        if last.op != "root" and record_differs(last, self.last):
            return f"its last node %{last.name} changed (arguments, target or name)"
        return None

    def restore(self) -> bool:
        """Put the graph back as it was when the watch began; whether that was possible (it
        is not for changes no node hook reported: see the class doc)."""
        gm = self.gm
        if gm.__dict__.get("_graph") is not self.graph:
            gm.__dict__["_graph"] = self.graph
        if self.records is not None:
            restore_graph_records(gm, self.graph, self.records, self.graph_dict, self.namespace)
        elif len(self.graph.nodes) == self.count and self.graph._root._prev is self.last[0]:
            reset_nodes([self.last], every_args=False)
        return self.change() is None

    def close(self) -> None:
        """Remove the hooks (what was recorded stays)."""
        _remove_node_hooks(self.gm, self._hooks)
        self._hooks = ()

