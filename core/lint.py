"""A fast check that ``Graph.lint()`` would pass, for the pipeline's ``verify="lint"``.

``torch.fx.Graph.lint()`` formats an error context string for every argument of every node
before it checks anything, and walks the graph twice; on a 100k-node graph it takes about as
long as a pass. :func:`lint_passes` checks the same invariants in one walk without formatting:

- every node's op is legal, its ``graph`` is this graph, and the node is in the graph's
  ``(op, target)`` lookup table under its own key;
- every input node was defined before the node (so it belongs to this graph: only this graph's
  nodes are recorded as defined);
- node names are unique;
- with an owning module: ``call_function`` targets are callable, the others strings, and every
  ``get_attr``/``call_module`` target resolves in the owning module (``call_module`` to a
  module), which also implies that ``GraphModule.get_submodule`` finds it.

It answers True only when ``Graph.lint()`` (and the pipeline's own submodule check) would
succeed: target paths are resolved through the modules' own registries (``_modules``,
``_parameters``, ``_buffers``, ``__dict__``), and any path it cannot resolve that way, or that a
class attribute could shadow, makes it answer False. On False the caller runs the real
``Graph.lint()``, which raises torch's exact error (or passes, for the rare target that only
``getattr`` resolves). Behaviour is therefore identical to calling ``Graph.lint()``, only
faster when the graph is fine.
"""

from __future__ import annotations

import collections.abc
import enum
import inspect
import keyword
import operator
import re
import types
import typing
from typing import Any, Callable, Iterable

import torch
import torch.fx

from ._modpath import MISSING, ModulePaths
from ._order import in_graph_order, precedes
from ._torch_signatures import overloads
from .errors import short_repr
from .snapshot import _containers_hold, _linked, _same_items

try:  # torch >= 2.8: objects FX spells through their registered repr
    from torch._library.opaque_object import is_opaque_value_type as _is_opaque
except ImportError:  # pragma: no cover - older torch

    def _is_opaque(t: type) -> bool:
        return False

__all__ = [
    "lint_passes",
    "lint_edits",
    "names_in_namespace",
    "unspellable_argument",
    "structure_problem",
    "input_signature",
    "frame_signature",
    "describe_structure",
]

_LEGAL_OPS = frozenset(("call_function", "call_method", "get_attr", "call_module", "placeholder", "output"))


def input_signature(graph: torch.fx.Graph) -> tuple[str, ...]:
    """The targets of the graph's placeholders in graph order: the parameters of the generated
    ``forward`` (a placeholder's name may change; its target is the argument's name)."""
    return tuple(str(n.target) for n in in_graph_order(graph.find_nodes(op="placeholder")))


def frame_signature(graph: torch.fx.Graph) -> tuple[Any, Any, tuple]:
    """How the generated ``forward`` packs its inputs and outputs, besides the placeholders
    (:func:`input_signature`): the graph's code generator (``torch.export`` modules'
    ``_PyTreeCodeGen`` flattens ``(args, kwargs)`` by an input spec and rebuilds the outputs by
    an output spec: its class and specs), the structure of the output node's argument (a
    tuple of two values, a dict, ...; the values are leaves: torch's pytree counts None as one),
    and, for each leaf that is a node, its name and whether its value is known to be a tensor
    (``meta["val"]`` or ``meta["example_value"]`` a tensor, or ``meta["tensor_meta"]`` set), else
    None (see :func:`structure_problem`)."""
    from torch.utils._pytree import tree_flatten

    codegen = getattr(graph, "_codegen", None)
    info = getattr(codegen, "pytree_info", None)
    specs = (getattr(info, "in_spec", None), getattr(info, "out_spec", None)) if info is not None else None
    outputs = graph.find_nodes(op="output")
    if len(outputs) == 1 and outputs[0].args:
        leaves, shape = tree_flatten(outputs[0].args[0])
        kinds = tuple((leaf.name, _known_tensor(leaf)) if isinstance(leaf, torch.fx.Node) else None for leaf in leaves)
    else:
        shape, kinds = None, ()
    return (type(codegen), specs), shape, kinds


def describe_structure(spec: Any, limit: int = 160) -> str:
    """A pytree structure (``TreeSpec``, as :func:`frame_signature` records the output node's
    argument) in words: ``a single value``, ``a 1-tuple``, ``a tuple of 2 values``, ``a dict
    with keys 'logits', 'loss'``, ``a tuple of (a value, a list of 2 values)``; cut to about
    ``limit`` characters."""
    if spec is None:
        return "nothing"
    if spec.is_leaf():
        return "a single value (in no tuple or other container)"
    text = _described(spec)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _described(spec: Any) -> str:
    """:func:`describe_structure` of a node of the structure, not cut."""
    if spec.is_leaf():
        return "a value"
    typ, context, kids = spec.type, spec.context, spec.children()
    if isinstance(context, type) and not isinstance(typ, type):  # a namedtuple: its class
        typ = context
    name = getattr(typ, "__name__", str(typ))
    article = "an" if name[:1].lower() in "aeiou" else "a"
    if isinstance(typ, type) and issubclass(typ, dict):
        keys = list(context or ())
        if all(k.is_leaf() for k in kids):
            return f"{article} {name} with keys " + ", ".join(map(repr, keys)) if keys else f"an empty {name}"
        return f"{article} {name} of (" + ", ".join(f"{k!r}: {_described(c)}" for k, c in zip(keys, kids)) + ")"
    if not kids:
        return f"an empty {name}"
    if all(k.is_leaf() for k in kids):
        if len(kids) == 1 and typ is tuple:
            return "a 1-tuple"
        return f"{article} {name} of {len(kids)} value{'s' if len(kids) != 1 else ''}"
    return f"{article} {name} of (" + ", ".join(_described(k) for k in kids) + ")"


def _known_tensor(node: torch.fx.Node) -> bool:
    """Whether the capture or a shape analysis recorded that ``node``'s value is a tensor."""
    meta = node.meta
    for key in ("val", "example_value"):
        if isinstance(meta.get(key), torch.Tensor):
            return True
    return meta.get("tensor_meta") is not None and not isinstance(meta.get("tensor_meta"), (list, tuple, dict))


def structure_problem(
    graph: torch.fx.Graph, inputs: tuple[str, ...] | None = None, frame: tuple[Any, Any] | None = None
) -> str | None:
    """What is wrong with the graph's frame, or None: it must have one ``output`` node
    (without one the generated ``forward`` returns None, and with two it returns at the first;
    ``Graph.lint()`` checks neither), and, when ``inputs`` is given (:func:`input_signature`
    when the run began), still those inputs in that order (a pass that adds, erases, reorders
    or retargets a placeholder changes how the module must be called). Nodes after the output
    node are let through, as torch lets them (``graph.create_node`` without an insertion point
    puts a node there; it never runs, and a use of it before is a use before its definition,
    which the lint refuses). Looks at the index's buckets only: O(1) in the graph's size
    (O(p log p) for its p placeholders)."""
    outputs = graph.find_nodes(op="output")
    if not outputs:
        return "the graph has no output node (the module would return None)"
    if len(outputs) > 1:
        names = ", ".join(f"%{n.name}" for n in outputs)
        return f"the graph has {len(outputs)} output nodes ({names}); it must have one"
    if inputs is not None:
        now = input_signature(graph)
        if now != inputs:
            return (
                f"the graph's inputs (placeholders) are now ({', '.join(now)}), ({', '.join(inputs)}) "
                "before: a pass changed how the module must be called"
            )
    if frame is not None:
        now_frame = frame_signature(graph)
        if now_frame[0] != frame[0]:
            (now_cls, now_specs), (was_cls, was_specs) = now_frame[0], frame[0]
            if now_cls is not was_cls:
                what = f"the graph's code generator is now {now_cls.__name__}, {was_cls.__name__} before"
            else:  # the same class, other specs: say which
                which = [
                    label
                    for label, i in (("input spec", 0), ("output spec", 1))
                    if now_specs is None or was_specs is None or now_specs[i] != was_specs[i]
                ]
                what = f"the {' and '.join(which)} of the graph's code generator ({now_cls.__name__}) changed"
            return (
                f"{what}: the module would take or return its values packed otherwise (a graph made anew "
                "needs new_graph.set_codegen(old_graph._codegen))"
            )
        if now_frame[1] != frame[1]:
            return (
                f"the structure of what the graph returns changed: {describe_structure(now_frame[1])} now, "
                f"{describe_structure(frame[1])} before (the output node's argument): the module would return "
                "its values packed otherwise"
            )
        if any(frame[2]):
            from torch.utils._pytree import tree_leaves

            leaves = tree_leaves(graph.find_nodes(op="output")[0].args[0])
            for i, (was, leaf) in enumerate(zip(frame[2], leaves)):
                # a returned node may become another node; a returned tensor cannot become a
                # constant (the generated code cannot write a tensor), and a returned value
                # becomes None only when something replaced it by nothing (Replace(None))
                if was is None or isinstance(leaf, torch.fx.Node) or (leaf is not None and not was[1]):
                    continue
                where = f"output {i}" if len(leaves) > 1 else "the output"
                what = "a tensor" if was[1] else "a value the graph computed"
                how = (
                    "a node replaced by None, e.g. Replace(None), while the graph still returned it"
                    if leaf is None
                    else f"e.g. Replace({short_repr(leaf)}) of the returned node; a tensor the module returns "
                    "stays a node: make the constant a tensor attribute (PassContext.add_constant) and return that"
                )
                return (
                    f"{where} of the graph was %{was[0]} ({what}) when the run began, and is now the constant "
                    f"{short_repr(leaf)}: a pass replaced what the module returns by a constant ({how})"
                )
    return None


def _index(gm: torch.fx.GraphModule) -> dict | None:
    """The graph's ``(op, target)`` index as a dict, when ``gm`` owns the graph and torch keeps
    one (else None: the fast checks cannot answer)."""
    graph = gm.graph
    if graph.owning_module is not gm:
        return None
    table = getattr(getattr(graph, "_find_nodes_lookup_table", None), "table", None)
    return table if isinstance(table, dict) else None


def lint_passes(gm: torch.fx.GraphModule) -> bool:
    """True when ``gm.graph.lint()`` and a ``gm.get_submodule`` of every ``call_module``
    target would succeed (see the module doc); False when unsure."""
    graph = gm.graph
    root = graph.owning_module
    table = _index(gm)
    if table is None:
        return False
    legal = _LEGAL_OPS
    seen: set[torch.fx.Node] = set()
    add = seen.add
    defined = seen.issuperset
    targets: dict[tuple[str, str], bool] = {}
    paths = ModulePaths(root)
    count = 0
    for node in graph.nodes:
        count += 1
        op = node.op
        if op not in legal or node.graph is not graph:
            return False
        target = node.target
        try:
            bucket = table.get((op, target) if op == "call_function" else (op, None))
        except TypeError:  # unhashable target: let Graph.lint() say what it says
            return False
        if bucket is None or node not in bucket:
            return False
        if not defined(node._input_nodes):  # an input not defined before the node
            return False
        add(node)
        if op == "call_function":
            if not callable(target):
                return False
        elif not isinstance(target, str):
            return False
        elif op == "get_attr" or op == "call_module":
            key = (op, target)
            ok = targets.get(key)
            if ok is None:
                ok = targets[key] = _resolves(paths, op, target)
            if not ok:
                return False
    # node names are unique (one set built in C instead of a check per node)
    return len(set(map(_NAME, graph.nodes))) == count


def lint_edits(
    gm: torch.fx.GraphModule,
    nodes: list[torch.fx.Node],
    module_records: list[tuple],
    names_kept: bool = False,
    paths: ModulePaths | None = None,
    *,
    all_targets: bool = False,
) -> bool:
    """True when ``gm.graph.lint()`` and the submodule check would succeed, given that they
    succeeded before a pass that changed only ``nodes`` (created or edited, as
    :meth:`fxpasses.journal.Journal.touched` lists them) and the modules of
    ``module_records``, and moved no node (what a pass declaring ``journal_edits`` promises);
    False when unsure (the caller then runs :func:`lint_passes` / ``Graph.lint()`` on the
    whole graph).

    Every check of :func:`lint_passes` is made for ``nodes`` alone: op, graph, place in the
    index, targets, and each input alive, linked into the graph and before the node (by FX's
    ``_sort_key``, the order key ``Node.__lt__`` compares). Names: with ``names_kept`` (the
    graph's name space held every node's name before the pass, :func:`names_in_namespace`,
    and the pass named nodes only through it, as ``journal_edits`` promises: it hands out
    each name once) each node's name must be the one the name space holds for it; else
    every name of the graph is checked (one set, in C). When a recorded module lost
    or rebound entries, every ``get_attr`` and ``call_module`` target that spells one of their
    names is resolved again (every target, when a module changed class or ``__dict__``);
    entries only added to ``_parameters``, ``_buffers`` or ``_modules`` cannot change what an
    existing path resolves to (those are ``nn.Module.__getattr__``'s fallback, consulted only
    where the path failed before). ``paths``: a :class:`ModulePaths` of ``gm`` made after the
    pass, to share its resolutions (:func:`unspellable_argument` takes one too).
    ``all_targets``: resolve every target again, as for a module that changed otherwise (the
    module edits of a pass whose journal is trusted for them are not all recorded).
    """
    graph = gm.graph
    root = graph.owning_module
    table = _index(gm)
    if table is None:
        return False
    legal = _LEGAL_OPS
    get = table.get
    for node in nodes:
        op = node.op
        if op not in legal or node.graph is not graph or node._erased:
            return False
        target = node.target
        try:
            bucket = get((op, target) if op == "call_function" else (op, None))
        except TypeError:
            return False
        if bucket is None or node not in bucket:
            return False
        for i in node._input_nodes:
            # of this graph, alive and linked into its node list, and before the node
            if i.graph is not graph or not _linked(i) or not precedes(i, node):
                return False
        if op == "call_function":
            if not callable(target):
                return False
        elif not isinstance(target, str):
            return False
        elif op == "get_attr" or op == "call_module":
            if paths is None:
                paths = ModulePaths(root)
            if not _resolves(paths, op, target):
                return False
    lost: set[str] | None = None if all_targets else set()  # names removed or rebound in a recorded module
    for rec in module_records if lost is not None else ():
        atoms = _changed_atoms(rec)
        if atoms is None:  # class or attributes changed: any path may resolve differently
            lost = None  # type: ignore[assignment]
            break
        lost |= atoms
    if lost is None or lost:
        # a target can only stop resolving through a name that went: re-resolve those that
        # spell one of them (all of them, when a module changed otherwise)
        if paths is None:
            paths = ModulePaths(root)
        for op in ("get_attr", "call_module"):
            for node in get((op, None), ()):
                target = node.target
                if not isinstance(target, str):
                    return False
                if lost is not None and lost.isdisjoint(target.split(".")):
                    continue
                if not _resolves(paths, op, target):
                    return False
    if not names_kept:
        return len(set(map(_NAME, graph.nodes))) == len(graph.nodes)
    given = graph._graph_namespace._obj_to_name.get
    return all(given(n) == n.name for n in nodes)


def names_in_namespace(graph: torch.fx.Graph) -> bool:
    """Whether the graph's name space holds every node under its name and counts it as used
    (so that it gives no new node a name a node has). False after a node was renamed by
    assigning ``node.name``, which the name space does not see."""
    ns = graph._graph_namespace
    nodes = list(graph.nodes)
    names = list(map(_NAME, nodes))
    return list(map(ns._obj_to_name.get, nodes)) == names and ns._used_names.issuperset(names)


_NAME = operator.attrgetter("name")


def cycle_through(node: torch.fx.Node, limit: int = 64) -> list[torch.fx.Node] | None:
    """A chain of inputs ``[node, a, b, ..., node]`` by which ``node`` uses itself (each uses
    the next), at most ``limit`` nodes deep, or None. For the error path only."""
    stack: list[tuple[torch.fx.Node, list[torch.fx.Node]]] = [(node, [node])]
    seen: set[torch.fx.Node] = set()
    while stack:
        current, path = stack.pop()
        for i in current._input_nodes:
            if i is node:
                return [*path, node]
            if i not in seen and len(path) < limit:
                seen.add(i)
                stack.append((i, [*path, i]))
    return None


def stale_code_problem(gm: torch.fx.GraphModule) -> str | None:
    """What is wrong when the module ``gm`` does not run its graph: the graph was edited after
    the last ``recompile()``, so ``gm.code`` is not what ``gm.graph`` generates (the first line
    that differs, in words), or None. A ``_LazyGraphModule`` waiting to recompile is not
    stale (it generates its code from the graph when first called). Costs one code
    generation of the graph (about 0.4x a ``recompile()``): for numeric verification, whose
    reference outputs come from running the module."""
    lazy = getattr(gm, "_needs_recompile", None)
    if callable(lazy) and lazy():
        return None
    code = getattr(gm, "_code", None)
    if not isinstance(code, str):
        return None
    try:
        from torch.fx.experimental import _config as fx_config

        record_func = bool(getattr(fx_config, "enrich_profiler_metadata", False))
    except ImportError:  # pragma: no cover - older torch
        record_func = False
    try:
        generated = gm.graph.python_code(root_module="self", record_func=record_func).src
    except Exception:  # noqa: BLE001 - a graph without code: lint says what is wrong
        return None
    if generated == code:
        return None
    old, new = code.splitlines(), generated.splitlines()
    i = next((k for k, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
    shown = lambda lines: repr(lines[i].strip()) if i < len(lines) else "(no line)"  # noqa: E731
    return (
        "the module's code is not its graph's: the graph was edited after the last recompile(), so the "
        f"module runs code the graph no longer holds (line {i + 1} of gm.code is {shown(old)}, the graph "
        f"generates {shown(new)}); call gm.recompile() so that it runs its graph"
    )


def lint_culprit(gm: torch.fx.GraphModule) -> torch.fx.Node | None:
    """The node a failed ``gm.graph.lint()`` is about, for the error to name: the first node,
    in graph order, that breaks a rule of lint's first walk (a legal op, this graph's node, in
    its ``(op, target)`` index, every input a node of this graph defined before it, a name no
    node before it has), else the first whose target is not callable (``call_function``), not
    a string (the others), or does not resolve in the owning module (``get_attr``,
    ``call_module``; a ``call_module`` target must be a module). None when none does (lint
    then fails for a reason no single node holds). Slow (``getattr`` per target): for the
    error path only."""
    graph = gm.graph
    table = getattr(graph, "_find_nodes_lookup_table", None)
    seen: set[torch.fx.Node] = set()
    names: set[str] = set()
    for node in graph.nodes:
        if node.op not in _LEGAL_OPS or node.graph is not graph:
            return node
        try:
            indexed = table is None or node in table
        except Exception:  # noqa: BLE001 - an unhashable target: lint fails on it
            indexed = False
        if not indexed or not all(i.graph is graph and i in seen for i in node._input_nodes):
            return node
        seen.add(node)
        if node.name in names:
            return node
        names.add(node.name)
    root = graph.owning_module
    if root is None:
        return None
    for node in graph.nodes:
        op, target = node.op, node.target
        if op == "call_function":
            if not callable(target):
                return node
            continue
        if not isinstance(target, str):
            return node
        if op in ("get_attr", "call_module"):
            obj: object = root
            for atom in target.split("."):
                obj = getattr(obj, atom, MISSING)
                if obj is MISSING:
                    return node
            if op == "call_module" and not isinstance(obj, torch.nn.Module):
                return node
    return None


def _resolves(paths: ModulePaths, op: str, target: str) -> bool:
    if op == "call_module":
        return paths.module(target) is not MISSING
    value = paths.attr(target)
    return value is not MISSING and value is not None


def _changed_atoms(rec: tuple) -> set[str] | None:
    """The names a module (record in the ``fxpasses.snapshot`` layout) lost or had rebound in
    its parameters, buffers or submodules since the record; None when its class or its
    ``__dict__`` changed (then any attribute may resolve differently). Names only added do
    not count: they are ``nn.Module.__getattr__``'s fallback, consulted only where a path
    failed before."""
    m, d, params, bufs, mods, _, _, cls, inner = rec
    live = m.__dict__
    if type(m) is not cls or not _same_items(live, d) or not _containers_hold(inner):
        return None
    out: set[str] = set()
    registries = ((m._parameters, params), (m._buffers, bufs), (m._modules, mods))
    for now, then in registries:
        if _same_items(now, then):
            continue
        if then:
            out.update(k for k, v in then.items() if now.get(k, _ABSENT) is not v)
        added = now.keys() - then.keys()
        if added:
            # an added name another registry (or the instance) also holds may now be found
            # first (nn.Module.__getattr__ looks in _parameters, _buffers, _modules in turn)
            others = [r for r, _ in registries if r is not now]
            out.update(k for k in added if k in live or any(k in r for r in others))
    return out


_ABSENT = object()


# How ``torch.fx.Graph._gen_python_code`` writes an argument (its ``_get_repr``): nodes by name;
# operator overloads, higher-order operators and enum members through a global; tuples, lists
# and slices element by element; a named tuple as its class (a global) applied to the plain
# ``repr()`` of its fields; anything else (dicts included) as its plain ``repr()``, evaluated
# with ``torch``, ``device``, ``inf`` and ``nan`` among the generated code's globals.
_GLOBAL = (torch._ops.OpOverload, torch._ops.HigherOrderOperator, enum.Enum)
# values whose plain ``repr()`` is Python that evaluates back to them in that code
_PLAIN = frozenset(
    {
        int, float, bool, str, bytes, complex, type(None), type(...), torch.fx.Node,
        torch.dtype, torch.device, torch.layout, torch.memory_format,
    }
)
# containers whose plain ``repr()`` is their items' (subclasses that keep the base's repr too)
_PLAIN_REPR = {c.__repr__: c for c in (tuple, list, set, frozenset, dict)}


def unspellable_argument(
    graph: torch.fx.Graph,
    spelled: dict[torch.fx.Node, tuple],
    accept: Callable[[torch.fx.Node, object], bool] | None = None,
    nodes: Iterable[torch.fx.Node] | None = None,
    paths: ModulePaths | None = None,
) -> tuple[torch.fx.Node, object, str] | None:
    """The first node with an argument that ``GraphModule.recompile()`` cannot write as
    Python, with that value and what is wrong with it (``"value"``, ``"keyword"``: a keyword
    argument's name, ``"method"``: a ``call_method``, ``call_module`` or ``get_attr`` target,
    ``"nested"``: a container nested
    deeper than Python's parser reads; ``"schema"``: an ATen operator or torch function called
    with arguments it does not take, the value then the problem in words,
    :func:`schema_problem`, :func:`call_problem`; ``"module"``: a ``call_module`` node whose
    module's ``forward`` does not take its arguments, :func:`module_call_problem`; ``"self"``: a
    ``call_method`` called on a constant that has no such method, ``None.cos()``, the value then
    that constant; ``"int-self"``: one called on an int, which FX writes as ``2.__mul__(x)``, a
    syntax error), or None.

    FX writes an argument it does not know (see ``_GLOBAL``/``_PLAIN`` above) as its
    ``repr()``: an object whose ``repr`` is not an expression (``<Foo object at 0x...>``, a
    lambda, an enum member inside a dict), or that names something the generated code does
    not import (a dataclass, ``np.float64(1.5)``), makes ``recompile()`` raise or the module
    fail when called, and a tensor becomes ``torch.Tensor(size=..., dtype=...)``, a different
    tensor. All are reported: only values FX is known to write back exactly pass. FX writes
    keyword arguments as ``name=value`` and a method call as ``x.name(...)``, so such a name
    must be a Python identifier and not a keyword (``from``, ``a b`` or ``3`` made the
    generated code a syntax error), and a target's parts must be written (see
    :func:`_unwritable_target`); and arguments nested deeper than ``_MAX_NESTING``
    brackets are too (CPython's tokenizer reads at most 200 levels: "too many nested
    parentheses").
    ``spelled`` maps nodes already checked to their ``(args, kwargs)``; a node whose
    ``args`` and ``kwargs`` are still those very objects (FX builds new ones on every edit) is
    not looked at again, so a pipeline checks each node once, plus the ones passes edit.
    A node with such an argument ``value`` for which ``accept(node, value)`` is true (e.g. the
    node held that very value before the pass) is recorded as checked and not reported.
    ``nodes``: look only at these (the nodes a journaled pass touched; the others are
    unchanged), instead of every node of ``graph``. ``paths``: a :class:`ModulePaths` of the
    graph's module to resolve ``call_module`` targets with (else one is made).
    """
    get = spelled.get
    for node in graph.nodes if nodes is None else nodes:
        args, kwargs = node._args, node._kwargs
        seen = get(node)
        if seen is not None and seen[0] is args and seen[1] is kwargs:
            continue
        bad = _unspelled(args)
        if bad is _OK and kwargs:
            bad = _unspelled(tuple(kwargs.values()))
            if bad is _OK:
                bad = next((k for k in kwargs if not _is_name(k)), _OK)
                if bad is not _OK and (accept is None or not accept(node, bad)):
                    return node, bad, "keyword"
                bad = _OK
        if bad is not _OK:
            nested = isinstance(bad, _Nested)
            value = bad.value if nested else bad  # type: ignore[union-attr]
            if accept is None or not accept(node, value):
                return node, value, "nested" if nested else "value"
        op = node.op
        if (op == "call_method" or op == "call_module" or op == "get_attr") and _unwritable_target(node.target):
            return node, node.target, "method"
        if op == "call_method" and not args and (accept is None or not accept(node, args)):
            # FX writes `args[0].name(...)`: recompile() raised IndexError
            return node, "no arguments: a call_method node's first argument is the object it is called on", "schema"
        if op == "call_method" and args and type(args[0]) is not _Node:
            # a constant (None, 3.0) put in place of the tensor a method is called on; FX writes
            # an int's as `2.__mul__(x)`, which Python reads as a float literal
            what = "self" if not hasattr(args[0], node.target) else "int-self" if type(args[0]) is int else None
            if what is not None and (accept is None or not accept(node, args)):
                return node, args[0], what
        if op == "call_function" and (
            kwargs
            or type(node.target) in _CHECKED_CALLS
            or _has_none(args)
            or (type(node.target) is _Builtin and _operator_problem(node.target, args, kwargs) is not None)
        ):
            target = node.target
            problem = schema_problem(target, args, kwargs) if type(target) is _OpOverload else call_problem(target, args, kwargs)
            if problem is not None and (accept is None or not accept(node, args)):
                return node, problem, "schema"
        if op == "call_module":
            if paths is None and graph.owning_module is not None:  # (made at the first call_module node)
                paths = ModulePaths(graph.owning_module)
            problem = module_call_problem(graph.owning_module, node.target, args, kwargs, paths)
            if problem is not None and (accept is None or not accept(node, args)):
                return node, problem, "module"
        spelled[node] = (args, kwargs)
    return None


_OpOverload = torch._ops.OpOverload
_Node = torch.fx.Node


def _has_none(args: Iterable[Any]) -> bool:
    """Whether a value of ``args``, or an item of a list or tuple among them, is None (a tensor
    node replaced by None inside ``torch.cat([x, y])``)."""
    for a in args:
        if a is None:
            return True
        if isinstance(a, (list, tuple)):  # (FX's immutable_list too)
            for item in a:
                if item is None:
                    return True
    return False


#: the kinds of schema argument types (``torch._C.Type.kind()``) that do not take None unless
#: declared optional (``Tensor?``): a None there fails when the module runs ("Expected a proper
#: Tensor but got None"); other kinds (``Any``, type variables) are not judged
_NOT_NONE_KINDS = frozenset(
    {
        "TensorType", "NumberType", "IntType", "SymIntType", "FloatType", "BoolType", "ComplexType",
        "ListType", "StringType", "DeviceObjType",
    }
)


def _none_rejected(argument: Any) -> bool:
    """Whether the schema argument ``argument`` (``torch._C.Argument``) cannot take None."""
    return argument.type.kind() in _NOT_NONE_KINDS


def _items_reject_none(argument: Any) -> bool:
    """Whether the schema argument ``argument`` is a list whose items cannot be None
    (``Tensor[] tensors``; ``Tensor?[] indices`` takes None items)."""
    t = argument.type
    return t.kind() == "ListType" and t.getElementType().kind() in _NOT_NONE_KINDS


def _none_argument(schema: Any, args: tuple, kwargs: dict) -> str | None:
    """The first argument of ``schema`` that ``args``/``kwargs`` give None although its type
    does not take None, in words (``'self'``; ``an item of 'tensors'``: a None in a list
    whose item type does not take it), or None."""
    positional = [a for a in schema.arguments if not a.kwarg_only]
    given = [*zip(positional, args), *((a, kwargs[a.name]) for a in schema.arguments if a.name in kwargs)]
    for param, value in given:
        if value is None and _none_rejected(param):
            return repr(param.name)
        if isinstance(value, (list, tuple)) and _items_reject_none(param) and any(v is None for v in value):
            return f"an item of {param.name!r}"
    return None


def schema_problem(op: torch._ops.OpOverload, args: tuple, kwargs: dict) -> str | None:
    """What is wrong with calling the ATen operator ``op`` with ``args``/``kwargs`` by the
    count and the names of its schema's arguments, or None: more positional arguments than it
    takes, a keyword it has not (or one given positionally too), a required argument left
    out, None for an argument whose type is not optional (``aten.cos.default(None)``: a hook
    that returned ``Replace(None)`` for a tensor node). Types are not judged otherwise (ATen
    takes a Python number for many ``Tensor`` arguments). Such a call fails only when the
    module runs (``aten.add.Tensor(x)`` passed lint, and numeric verification alone caught it)."""
    schema = op._schema
    params = schema.arguments
    positional = [a for a in params if not a.kwarg_only]
    if len(args) > len(positional):
        return f"{len(args)} positional arguments, where {schema.name}.{schema.overload_name or 'default'} takes at most {len(positional)}"
    names = {a.name for a in params}
    for key in kwargs:
        if key not in names:
            return f"the keyword {key!r}, which {_schema_text(schema)} has not"
        if any(a.name == key for a in positional[: len(args)]):
            return f"{key!r} both by position and by keyword"
    missing = [
        a.name for i, a in enumerate(params) if not a.has_default_value() and a.name not in kwargs and (a.kwarg_only or i >= len(args))
    ]
    if missing:
        return f"no {', '.join(map(repr, missing))}, which {_schema_text(schema)} requires"
    name = _none_argument(schema, args, kwargs)
    if name is not None:
        return f"None for {name}, which {_schema_text(schema)} does not take as None (its type is not optional)"
    return None


#: the keyword names each function takes (None: any), by the function (see keyword_problem)
_KEYWORDS: dict[Any, tuple[frozenset[str], str] | None] = {}
#: keywords torch's Python argument parser takes for another name (numpy compatibility:
#: ``numpy_compatibility_arg_names`` in torch/csrc/utils/python_arg_parser.cpp)
_NUMPY_ALIASES = {"dim": ("axis",), "keepdim": ("keepdims",), "input": ("x", "a", "x1"), "other": ("x2",)}


def _keywords_of(target: Any) -> tuple[frozenset[str], str] | None:
    """The keyword names ``target`` (a ``call_function`` target other than an ATen operator)
    takes, with its argument names as a message lists them, or None when any may be right: it
    takes ``**kwargs``, or its signature is not known. A C-bound torch function's are the
    parameter names of all its overloads in torch's own type stubs
    (:mod:`fxpasses._torch_signatures`: the Python interface, with ``requires_grad`` and
    ``pin_memory`` of factories, which the ATen schemas do not list), with ``out`` and the
    numpy aliases the argument parser accepts; a Python function's come from ``inspect.signature``."""
    try:
        return _KEYWORDS[target]
    except KeyError:
        pass
    except TypeError:  # unhashable target
        return None
    names: tuple[frozenset[str], str] | None = None
    try:
        if isinstance(target, types.BuiltinFunctionType):
            found = overloads(target)
            if found and not any(p.kind is inspect.Parameter.VAR_KEYWORD for o in found for p in o.signature.parameters.values()):
                own = {
                    n for o in found for n, p in o.signature.parameters.items() if p.kind is not inspect.Parameter.VAR_POSITIONAL
                }
                aliases = {a for n in own for a in _NUMPY_ALIASES.get(n, ())}
                names = frozenset({"out", *own, *aliases}), ", ".join(sorted(own - {"out"}))
        elif isinstance(target, types.FunctionType):
            sig = _signature(target)  # (None: no signature to check against)
            params = () if sig is None else sig.parameters.values()
            if sig is not None and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
                own = {p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
                names = frozenset(own), ", ".join(sorted(own))
    except Exception:  # noqa: BLE001 - no signature to check against
        names = None
    _KEYWORDS[target] = names
    return names


#: call_function targets whose every call is checked, keywords or not (ATen operators against
#: their schema, overload packets against their overloads' schemas, Python functions against
#: their signature, a tensor method's descriptor ``torch.Tensor.cos`` for what it is called on)
_CHECKED_CALLS = (_OpOverload, types.FunctionType, types.MethodDescriptorType, torch._ops.OpOverloadPacket)
#: the signature of each Python function and module class's forward (None: none known)
_SIGNATURES: dict[Any, inspect.Signature | None] = {}


def _signature(fn: Any) -> inspect.Signature | None:
    try:
        return _SIGNATURES[fn]
    except KeyError:
        pass
    except TypeError:  # unhashable
        return None
    try:
        sig: inspect.Signature | None = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to check against
        sig = None
    _SIGNATURES[fn] = sig
    return sig


def _bind_problem(sig: inspect.Signature | None, args: tuple, kwargs: dict, torchs: bool = False) -> str | None:
    """Why ``sig`` does not bind ``args``/``kwargs`` (Python's own words), or None. ``torchs``:
    the signature is of torch's own Python code (``torch.nn.functional.relu``, ``nn.Linear.forward``),
    whose parameters annotated ``Tensor`` without a default take no None (a tensor node
    replaced by None reached ``F.relu``, and the module failed when it ran); other code's
    annotations are not relied on."""
    if sig is None:
        return None
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as exc:
        return str(exc)
    if torchs:
        for name, value in bound.arguments.items():
            param = sig.parameters[name]
            if param.default is not param.empty:
                continue
            if value is None and param.annotation in _TENSOR_ANNOTATIONS:
                return f"None for {name!r}, which it takes as a Tensor"
            if isinstance(value, (list, tuple)) and _tensor_sequence(param.annotation) and any(v is None for v in value):
                return f"None for an item of {name!r}, which it takes as a sequence of Tensors"
    return None


_TENSOR_ANNOTATIONS = (torch.Tensor, "Tensor", "torch.Tensor")
#: a sequence of tensors in a string annotation (``"List[Tensor]"``, ``"tuple[torch.Tensor, ...]"``)
_TENSOR_SEQUENCE_TEXT = re.compile(r"(?:typing\.)?(?:List|list|Tuple|tuple|Sequence)\[(?:torch\.)?Tensor(?:, \.\.\.)?\]")


def _tensor_sequence(annotation: Any) -> bool:
    """Whether ``annotation`` is a list, tuple or sequence of Tensors (no None among its items)."""
    if isinstance(annotation, str):
        return _TENSOR_SEQUENCE_TEXT.fullmatch(annotation) is not None
    origin = typing.get_origin(annotation)
    if origin not in (list, tuple, collections.abc.Sequence):
        return False
    items = [a for a in typing.get_args(annotation) if a is not Ellipsis]
    return bool(items) and all(a is torch.Tensor for a in items)
#: operator functions that no operand None takes (``x + None``, ``-None``): TypeError in Python
_NO_NONE_OPERATORS = frozenset(
    {
        operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod, operator.pow,
        operator.matmul, operator.lshift, operator.rshift, operator.and_, operator.or_, operator.xor, operator.neg,
        operator.pos, operator.invert, operator.abs, operator.lt, operator.le, operator.gt, operator.ge,
        operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv, operator.imod, operator.ipow,
    }
)


def _of_torch(obj: Any) -> bool:
    """Whether ``obj`` (a function or class) is defined in torch's own code."""
    module = getattr(obj, "__module__", None) or ""
    return module == "torch" or module.startswith("torch.")


#: module_call_problem's answers, by (class, which positional arguments are None, keywords and which are None)
_MODULE_CALLS: dict[tuple, str | None] = {}


def _guards_call_problem(root: Any, target: str, args: tuple, kwargs: dict) -> str | None:
    """What is wrong with the call of an exported module's input checks (``_guards_fn``, a
    ``GuardsFn`` whose forward takes ``*args``, so its signature tells nothing): torch.export
    calls it with the graph's inputs, every placeholder in order, and it checks each by its
    position (a call without them failed only when the module ran: ``IndexError``)."""
    graph = getattr(root, "graph", None)
    if not isinstance(graph, torch.fx.Graph):
        return None
    inputs = tuple(graph.find_nodes(op="placeholder"))
    if not kwargs and len(args) == len(inputs) and all(a is b for a, b in zip(args, inputs)):
        return None
    wanted = ", ".join(f"%{n.name}" for n in inputs) or "none"
    return (
        f"submodule {target!r} (GuardsFn, torch.export's checks of the inputs) with arguments other than the "
        f"graph's inputs in order ({wanted}): it checks each input by its position"
    )


def module_call_problem(root: Any, target: Any, args: tuple, kwargs: dict, paths: ModulePaths | None = None) -> str | None:
    """What is wrong with calling the submodule ``target`` of ``root`` with ``args``/``kwargs``
    by its ``forward``'s signature (too many or too few arguments, a keyword it has not), or
    None; also None when it cannot be told: the path does not resolve (lint says so), the
    module has forward pre-hooks (they may take other arguments) or its own ``__call__``.
    A ``call_module`` node rewired with arguments its module does not take passed lint and
    failed only when the module ran. ``paths``: a :class:`ModulePaths` of ``root`` to resolve
    ``target`` with (its memo shared by the targets of one graph)."""
    if root is None or not isinstance(target, str):
        return None
    mod = (paths or ModulePaths(root)).module(target)
    if mod is MISSING:  # not through the registries: exactly as get_submodule
        try:
            mod = root.get_submodule(target)
        except AttributeError:
            return None
    cls = type(mod)
    if cls.__name__ == "GuardsFn" and cls.__module__.startswith("torch.export"):
        return _guards_call_problem(root, target, args, kwargs)
    if cls.__call__ is not torch.nn.Module.__call__ or mod._forward_pre_hooks:
        return None
    # the answer depends on the class, the number of arguments, the keywords and which are None
    key = (cls, tuple(a is None for a in args), tuple((k, v is None) for k, v in kwargs.items()))
    try:
        problem = _MODULE_CALLS[key]
    except KeyError:
        problem = _MODULE_CALLS[key] = _bind_problem(_signature(cls.forward), (mod, *args), kwargs, torchs=_of_torch(cls))
    if problem is None:
        return None
    sig = _signature(cls.forward)
    shown = str(sig).replace("(self, ", "(", 1).replace("(self)", "()", 1)
    return f"submodule {target!r} ({cls.__name__}) with arguments that its forward{shown} does not take: {problem}"


def call_problem(target: Any, args: tuple, kwargs: dict) -> str | None:
    """What is wrong with calling ``target`` (a ``call_function`` target other than an ATen
    operator) with ``args``/``kwargs``, or None: a keyword it does not take
    (:func:`keyword_problem`); for a Python function, arguments its signature does not bind
    (too many, a required one left out); for a torch function, None for an argument that no
    overload of it takes as None (``torch.cos(None)``), by torch's type stubs (only the
    overloads these arguments bind to count: torch takes deprecated forms the stubs do not
    list, so counts are not judged there)."""
    kind = type(target)
    if kind is _Builtin:
        problem = _operator_problem(target, args, kwargs)
        if problem is not None:
            return problem
    if kind is types.MethodDescriptorType:  # torch.Tensor.cos(x): x must be a tensor
        return _tensor_method_problem(target, args)
    if kind is _OpOverloadPacket:
        return _packet_problem(target, args, kwargs)
    problem = keyword_problem(target, kwargs)
    if problem is None and type(target) is types.FunctionType:
        problem = _bind_problem(_signature(target), args, kwargs, torchs=_of_torch(target))
        if problem is not None:
            return f"arguments it does not take: {problem} (its signature: {target.__name__}{_signature(target)})"
    if problem is None and type(target) is types.BuiltinFunctionType and target in _NO_NONE_OPERATORS and _has_none(args):
        return "None as an operand, which no operand of it takes"
    if problem is not None or not (_has_none(args) or _has_none(kwargs.values())):
        return problem
    found = overloads(target) if isinstance(target, types.BuiltinFunctionType) else None
    refused = set()
    for overload in found or ():
        try:
            name = overload.none_refused(args, kwargs)
        except TypeError:  # this overload does not take these arguments
            continue
        if name is None:
            return None  # an overload takes these Nones
        refused.add(name)
    if not refused:
        return None  # no overload binds: left to the call (deprecated forms the stubs do not list)
    return f"None for {', '.join(sorted(refused))}, which no overload of it takes as None (the type is not optional)"


_OpOverloadPacket = torch._ops.OpOverloadPacket
_Builtin = types.BuiltinFunctionType


def _operator_arity() -> dict[Any, tuple[int, int]]:
    """``(least, most)`` positional arguments of each function of :mod:`operator` (all take
    positional arguments only) and of ``getattr``: FX writes ``operator.add(a, b)`` as
    ``a + b``, filling the operator's format with the arguments, so one argument too few made
    ``recompile()`` raise IndexError, and one too many (or a keyword) was dropped unseen."""
    out: dict[Any, tuple[int, int]] = {getattr: (2, 3)}
    for f in vars(operator).values():
        if type(f) is not _Builtin:
            continue
        try:
            params = list(inspect.signature(f).parameters.values())
        except (TypeError, ValueError):  # pragma: no cover - a function without a text signature
            continue
        if any(p.kind is not p.POSITIONAL_ONLY for p in params):
            continue
        out[f] = (sum(p.default is p.empty for p in params), len(params))
    return out


#: see :func:`_operator_arity`
_ARITY = _operator_arity()
#: in-place operators, which FX writes as a statement, ``a += b``: ``a`` must be a name
_INPLACE_OPERATORS = frozenset(getattr(operator, name) for name in torch.fx.graph.inplace_methods)
#: the subscript operators and the method the object they are called on must have (setitem
#: is an in-place operator: a constant to update is refused as such)
_ITEM_PROTOCOLS = {operator.getitem: "__getitem__", operator.delitem: "__delitem__"}


def _operator_problem(target: Any, args: tuple, kwargs: dict) -> str | None:
    """What is wrong, in words, with a call of the builtin ``target`` when it is an
    :mod:`operator` function or ``getattr`` (:data:`_ARITY`): keywords, a count of arguments
    it does not take, an in-place operator updating a constant, a constant attribute name that
    is not a str, a constant subscripted that has no ``__getitem__`` (``__delitem__``:
    ``None[0]``, ``del 3[x]``); None when nothing is (or ``target`` is another builtin).
    Lint asks it of every builtin call node it looks at, so the answer for a good call is a
    dictionary lookup and a few comparisons."""
    arity = _ARITY.get(target)
    if arity is None:
        return None
    if kwargs:
        return f"keyword arguments ({', '.join(map(str, kwargs))}), which it does not take (it takes positional arguments only)"
    least, most = arity
    if not least <= len(args) <= most:
        took = str(least) if least == most else f"{least} to {most}"
        return f"{len(args)} argument{'' if len(args) == 1 else 's'}, where it takes {took}"
    if target is getattr and type(args[1]) is not _Node and not isinstance(args[1], str):
        return f"the attribute name {short_repr(args[1])} ({type(args[1]).__name__}), which is not a str"
    if not args or type(args[0]) is _Node:
        return None
    if target in _INPLACE_OPERATORS:
        written = torch.fx.graph.inplace_methods[target.__name__].format(short_repr(args[0]), *["..."] * (len(args) - 1))
        return (
            f"the constant {short_repr(args[0])} to update in place: FX writes it as a statement (`{written}`), "
            "whose target must be a node"
        )
    protocol = _ITEM_PROTOCOLS.get(target)
    if protocol is not None and not hasattr(type(args[0]), protocol) and not isinstance(args[0], type):
        # (`None[0]`: a tensor node replaced by None; a class subscripted, list[int], takes
        # __class_getitem__: not judged)
        return f"the constant {short_repr(args[0])} ({type(args[0]).__name__}) to index, which has no {protocol}"
    return None


def _tensor_method_problem(target: Any, args: tuple) -> str | None:
    """What is wrong with calling the descriptor of a tensor method (``torch.Tensor.cos``, a
    ``call_function`` target) with ``args``: nothing to call it on, or a constant that is not a
    tensor (``torch.Tensor.cos(None)``: Python refuses it, "descriptor 'cos' ... requires a
    'torch._C.TensorBase' object"); a node is not judged (its value is not known here)."""
    owner = getattr(target, "__objclass__", None)
    if not (isinstance(owner, type) and issubclass(owner, torch._C.TensorBase)):
        return None
    if not args:
        return "no arguments: no tensor to call the method on"
    first = args[0]
    if type(first) is _Node or isinstance(first, owner):
        return None
    return f"{first!r} ({type(first).__name__}) to call it on, which is not a tensor"


def _packet_problem(packet: Any, args: tuple, kwargs: dict) -> str | None:
    """What is wrong with calling the ATen overload packet ``packet`` (``aten.cos``, which picks
    an overload when called) with ``args``/``kwargs``: None when one of its overloads takes them
    by :func:`schema_problem` (counts, keywords, None), else the first overload's problem."""
    problems = []
    for name in packet.overloads():
        try:
            op = getattr(packet, name)
        except (AttributeError, RuntimeError):
            return None  # (an overload not known: not judged)
        problem = schema_problem(op, args, kwargs)
        if problem is None:
            return None
        problems.append(problem)
    if not problems:
        return None
    more = f" (and none of its {len(problems) - 1} other overloads takes these arguments)" if len(problems) > 1 else ""
    return problems[0] + more


def keyword_problem(target: Any, kwargs: dict) -> str | None:
    """The keyword argument that ``target`` (a torch function such as ``torch.relu``, or a
    Python function) does not take, in words, or None. Only keyword names are checked: a
    torch function's positional forms include deprecated ones its schemas do not list
    (``torch.add(x, 2, y)``), so a count of positional arguments could refuse a valid call.
    ``torch.relu(x, bogus=1)`` passed lint and failed only when the module ran."""
    known = _keywords_of(target)
    if known is None:
        return None
    names, shown = known
    for key in kwargs:
        if key not in names:
            return f"the keyword {key!r}, which it does not take (its arguments: {shown or 'none'})"
    return None


def _schema_text(schema: object) -> str:
    """``aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor``, cut short."""
    text = str(schema)
    return text if len(text) <= 160 else text[:157] + "..."


_OK = object()
#: the deepest nesting of containers in one argument that the generated code can hold: the
#: line ``name = target(arg, ...)`` adds one level of brackets, and CPython's tokenizer
#: reads at most 200 (MAXLEVEL in Parser/tokenizer.h: "too many nested parentheses")
_MAX_NESTING = 190


def _unwritable_target(target: object) -> bool:
    """Whether FX's code generator cannot write ``target`` (a method name, a submodule or
    attribute path): it writes each dotted part as ``.part`` when it is an identifier, so a
    reserved word (``x.lambda``) is a syntax error, and other parts as ``getattr(x, "part")``,
    which a quote, a backslash or a line break breaks (``torch.fx.graph._format_target``)."""
    if not isinstance(target, str):
        return True
    for part in target.split("."):
        if part.isidentifier():
            if keyword.iskeyword(part):
                return True
        elif any(c in part for c in '"\\\n\r'):
            return True
    return False


def _is_name(key: object) -> bool:
    """Whether ``key`` can be written as a keyword argument's or a method's name."""
    return isinstance(key, str) and key.isidentifier() and not keyword.iskeyword(key)


class _Nested:
    """What :func:`_unspelled` returns for a container nested too deep (``value``: the
    container at the limit)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def _unspelled(values: tuple | list, depth: int = 0) -> object:
    """The first value in ``values`` (recursively, as FX writes them) that cannot be spelled,
    a :class:`_Nested` for a container nested more than ``_MAX_NESTING`` deep, or ``_OK``."""
    plain = _PLAIN
    if depth > _MAX_NESTING:
        return _Nested(values)
    depth += 1
    for v in values:
        t = type(v)
        if t in plain:
            continue
        if t is tuple or t is list:
            bad = _unspelled(v, depth)
        elif isinstance(v, tuple) and hasattr(v, "_fields"):  # Cls(*repr of the fields)
            bad = _unrepresented(tuple(v), depth)
        elif isinstance(v, _GLOBAL) or _is_opaque(t):
            continue
        elif isinstance(v, torch.Tensor):
            return v
        elif isinstance(v, (tuple, list)):  # torch.Size, list subclasses: element by element
            bad = _unspelled(tuple(v), depth)
        elif isinstance(v, slice):
            bad = _unspelled((v.start, v.stop, v.step), depth)
        else:  # written as repr(v)
            bad = _unrepresented((v,), depth)
        if bad is not _OK:
            return bad
    return _OK


def _unrepresented(values: tuple, depth: int = 0) -> object:
    """The first value in ``values`` whose plain ``repr()`` (recursively) is not Python that
    evaluates back to it in the generated code, a :class:`_Nested` (as :func:`_unspelled`),
    or ``_OK``."""
    if depth > _MAX_NESTING:
        return _Nested(values)
    depth += 1
    for v in values:
        t = type(v)
        if t in _PLAIN:
            continue
        base = _PLAIN_REPR.get(t.__repr__)  # FX's immutable_list/immutable_dict print as lists/dicts
        if base is dict:
            bad = _unrepresented(tuple(v) + tuple(v.values()), depth)
        elif base is not None:
            bad = _unrepresented(tuple(v), depth)
        elif t is slice:
            bad = _unrepresented((v.start, v.stop, v.step), depth)
        elif t is torch.Size or t is range:  # torch.Size([2, 3]), range(0, 3)
            continue
        else:
            return v
        if bad is not _OK:
            return bad
    return _OK
