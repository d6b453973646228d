"""The context a pass gets: graph editing with provenance, constants, counters, skips."""

from __future__ import annotations

import collections
import contextlib
import functools
import importlib.util
import os
import re
import site
import sysconfig
from typing import Any, Iterable, Iterator, Mapping, Sequence

import torch
import torch.fx
from torch.fx.node import Argument, Node, Target

from ._layout import LayoutCopies, copy_inputs
from ._order import precedes
from .errors import NO_STACK_TRACE, NodeHasUsersError, UserError, short_repr

__all__ = [
    "PassContext",
    "PROVENANCE_KEYS",
    "describe_node",
    "user_source_line",
    "no_source_line_reason",
    "failure_place",
    "tensor_info",
]

#: ``node.meta`` keys copied from the node being rewritten onto nodes created for it.
PROVENANCE_KEYS = (
    "stack_trace",
    "nn_module_stack",
    "source_fn_stack",
    "torch_fn",
    "seq_nr",
    "from_node",
    "custom",
)


class PassContext:
    """What a running pass sees besides the node: the module, the graph, helpers.

    New nodes made through the context are inserted before the node being visited (or where
    :meth:`inserting_before` says) and get its provenance metadata (:data:`PROVENANCE_KEYS`),
    so errors and profilers still point at the user's source line.

    Attributes:
        gm: the ``torch.fx.GraphModule`` being transformed (edited in place).
        graph: ``gm.graph``.
        dialect: ``"symbolic_trace"``, ``"dynamo"``, ``"export"`` or ``"unknown"``
            (see :func:`fxpasses.dialect.detect_dialect`).
        pass_name: the running pass's registry name.
        example_inputs: the positional example inputs given to the run (``()`` when only
            keyword inputs were given), or None. The pass gets its own copy, made when it
            first reads them: every tensor in them (nested in lists, tuples and dicts too) is
            a copy (same values, sizes, strides, storage offset, dtype, device and
            ``requires_grad``; inputs that shared a storage share the copy), so a pass that
            writes them in place leaves the caller's tensors as they were; ``nn.Parameter``
            objects (a TorchDynamo graph takes the model's parameters as inputs) and fake
            tensors are handed as they are, and must not be written.
        example_kwargs: the keyword example inputs given to the run (a dict, as
            ``torch.export.export(model, args, kwargs)`` takes them), or None, copied alike.
            The module is called ``gm(*example_inputs, **(example_kwargs or {}))``.
        node: the node being visited by a hook (None outside hooks).
        counters: the pass's own counters (``collections.Counter``), shown in the report.
        skipped: ``(node name, reason)`` for every node the pass declined, shown in the report.
        output_changes: why the pass changed the module's outputs on purpose
            (:meth:`changes_outputs`), in the report's ``notes``.
        analyses: results of analyses computed in this run, by name.
        step: the running pass's position in the pipeline's plan, from 0 (as
            ``pipeline.plan().steps`` holds it; every iteration of a fixpoint group runs the
            same steps), or None outside a pipeline (an analysis computed on demand too).
        iteration: the fixpoint iteration the pass runs in, from 1 (0 outside fixpoint
            groups), as its :class:`~fxpasses.report.PassReport` says.
    """

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        *,
        pass_name: str,
        dialect: str,
        example_inputs: Sequence[Any] | None = None,
        example_kwargs: Mapping[str, Any] | None = None,
        analyses: dict[str, Any] | None = None,
    ) -> None:
        self.gm = gm
        self.graph = gm.graph
        self.pass_name = pass_name
        self.dialect = dialect
        self._given = (example_inputs, example_kwargs)  # the caller's; copied on first read
        self._copies: tuple[Any, Any] | None = None
        self.node: Node | None = None
        self._counters: collections.Counter[str] | None = None  # made on first use (counters)
        self.skipped: list[tuple[str, str]] = []
        self.output_changes: list[str] = []
        self.analyses: dict[str, Any] = analyses if analyses is not None else {}
        self.step: int | None = None
        self.iteration = 0
        # what a rewrite limit (Pipeline.run(..., rewrite_limit=N)) leaves to this pass and the
        # ones after it when it starts (None: no limit); a reproducer replays with it
        self.rewrites_left: int | None = None
        self._provenance: Node | None = None
        self._paths: Any = None  # fxpasses._modpath.ModulePaths of gm, made on first use
        # the running pass's journal (fxpasses.journal.Journal) when its edits are journaled
        self._journal: Any = None

    @property
    def example_inputs(self) -> Sequence[Any] | None:
        return self._example_copies()[0]

    @example_inputs.setter
    def example_inputs(self, value: Sequence[Any] | None) -> None:
        self._given, self._copies = (value, self._given[1]), None

    @property
    def example_kwargs(self) -> Mapping[str, Any] | None:
        return self._example_copies()[1]

    @example_kwargs.setter
    def example_kwargs(self, value: Mapping[str, Any] | None) -> None:
        self._given, self._copies = (self._given[0], value), None

    def _example_copies(self) -> tuple[Any, Any]:
        if self._copies is None:
            copies = LayoutCopies()  # one for both: a keyword input may view a positional one
            args, kwargs = self._given
            self._copies = (copy_inputs(args, copies, _handed_as_is), copy_inputs(kwargs, copies, _handed_as_is))
        return self._copies

    # ------------------------------------------------------------------ bookkeeping

    @property
    def counters(self) -> collections.Counter[str]:
        # made on first use: most passes count nothing, and a Counter is a fixed cost of
        # every pass (32 us of a 1k-node pass's ~0.5 ms when its code is out of cache)
        if self._counters is None:
            self._counters = collections.Counter()
        return self._counters

    def count(self, key: str, n: int = 1) -> None:
        """Add ``n`` to the pass counter ``key`` (shown in the run report)."""
        self.counters[key] += n

    def skip(self, node: Node, reason: str) -> None:
        """Record that the pass left ``node`` alone and why (shown in the run report)."""
        self.skipped.append((node.name, reason))
        self.counters["skipped"] += 1

    def changes_outputs(self, reason: str) -> None:
        """Declare that the pass changes the module's outputs on purpose, and why (an option
        asked for it: e.g. removing dropout that is active in training mode).

        Nothing is relaxed: numeric verification still compares the outputs, and when they
        differ the pass's :class:`~fxpasses.errors.PassFailedError` carries ``reason`` as a
        note, so the failure says it was by design. The reason is also in the pass's report
        (``notes``). Each distinct reason is kept once."""
        if reason not in self.output_changes:
            self.output_changes.append(reason)

    # ------------------------------------------------------------------ creating nodes

    def inserting_before(self, node: Node) -> Any:
        """Context manager: create nodes before ``node``, copying its provenance."""
        return _InsertAt(self, node, before=True)

    def inserting_after(self, node: Node) -> Any:
        """Context manager: create nodes after ``node``, copying its provenance."""
        return _InsertAt(self, node, before=False)

    def create_node(
        self,
        op: str,
        target: Target,
        args: tuple[Argument, ...] = (),
        kwargs: dict[str, Argument] | None = None,
        name: str | None = None,
    ) -> Node:
        """Create a node with the current provenance, before the visited node by default.

        Inside :meth:`inserting_before`/:meth:`inserting_after` it goes where they say;
        outside a hook (no visited node) at the graph's current insertion point.

        Raises:
            TypeError: ``target`` is not what ``op`` takes: a callable for ``call_function``
                (a string there is a method's name: :meth:`call_method` takes it), a string
                for the others.
        """
        if op == "call_function" and not callable(target):
            hint = (
                f" ({target!r} is a method's name, the target of a call_method node: ctx.call_method({target!r}, ...) "
                "calls it)"
                if isinstance(target, str)
                else ""
            )
            raise TypeError(f"a call_function node's target must be callable, not the {type(target).__name__} {target!r}{hint}")
        if op != "call_function" and not isinstance(target, str):
            raise TypeError(
                f"a {op} node's target must be a str (a method name or an attribute path), not the "
                f"{type(target).__name__} {target!r}" + (" (ctx.call_function calls a function)" if callable(target) and op == "call_method" else "")
            )
        if self._provenance is None and self.node is not None:
            with self.graph.inserting_before(self.node):
                node = self.graph.create_node(op, target, tuple(args), dict(kwargs or {}), name)
        else:
            node = self.graph.create_node(op, target, tuple(args), dict(kwargs or {}), name)
        src = self._provenance if self._provenance is not None else self.node
        if src is not None:
            copy_provenance(src, node)
        return node

    def call_function(
        self, target: Target, args: tuple[Argument, ...] = (), kwargs: dict[str, Argument] | None = None
    ) -> Node:
        """A new ``call_function`` node (see :meth:`create_node`)."""
        return self.create_node("call_function", target, args, kwargs)

    def call_method(
        self, method: str, args: tuple[Argument, ...] = (), kwargs: dict[str, Argument] | None = None
    ) -> Node:
        """A new ``call_method`` node (see :meth:`create_node`)."""
        return self.create_node("call_method", method, args, kwargs)

    def call_module(
        self, qualname: str, args: tuple[Argument, ...] = (), kwargs: dict[str, Argument] | None = None
    ) -> Node:
        """A new ``call_module`` node; ``qualname`` must name a submodule of ``gm``."""
        self._submodule(qualname)  # AttributeError naming the path if missing
        return self.create_node("call_module", qualname, args, kwargs)

    def get_attr(self, qualname: str) -> Node:
        """A new ``get_attr`` node reading ``gm.<qualname>``; it must exist."""
        self.attr(qualname)
        return self.create_node("get_attr", qualname)

    # ------------------------------------------------------------------ module state

    def attr(self, qualname: str) -> Any:
        """The object at ``gm.<qualname>`` (a tensor, module or constant).

        Raises:
            AttributeError: naming the missing path element.
        """
        obj: Any = self.gm
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj

    def module(self, node: Node) -> torch.nn.Module:
        """The submodule a ``call_module`` node calls."""
        if node.op != "call_module":
            raise TypeError(f"node %{node.name} is {node.op}, not call_module")
        return self._submodule(node.target)

    def _submodule(self, qualname: Any) -> torch.nn.Module:
        """``gm.get_submodule(qualname)`` (its result or its ``AttributeError``), through the
        module registries (:meth:`fxpasses._modpath.ModulePaths.current_submodule`: no memo
        of paths, so edits of the tree between calls are seen)."""
        paths = self._paths
        if paths is None or paths.root is not self.gm:
            from ._modpath import ModulePaths

            paths = self._paths = ModulePaths(self.gm)
        return paths.current_submodule(qualname)

    def unique_attr_name(self, hint: str) -> str:
        """A top-level attribute name of ``gm`` that is free, derived from ``hint``."""
        base = re.sub(r"\W", "_", hint).rstrip("_") or "attr"
        if base[0].isdigit():
            base = "_" + base
        name = base
        i = 0
        while _has_attribute(self.gm, name):
            i += 1
            name = f"{base}_{i}"
        return name

    def add_constant(self, value: torch.Tensor, hint: str = "_folded") -> Node:
        """Store ``value`` as a new, uniquely named buffer of ``gm`` and return a get_attr node.

        The buffer is persistent (it is in ``state_dict()``), so saving and ``.to(device)``
        carry it. An ``nn.Parameter`` is registered as a parameter instead (with its
        ``requires_grad``): a value computed from tensors that require grad (fused conv
        weights) must keep requiring grad, or the outputs that read it lose it.

        Raises:
            TypeError: ``value`` is not a tensor or ``hint`` not a ``str`` (naming the
                argument and the type given).
        """
        _check_argument("add_constant", "value", value, torch.Tensor, "a torch.Tensor")
        _check_argument("add_constant", "hint", hint, str, "a str (the name to derive the buffer's from)")
        name = self.unique_attr_name(hint)
        self.before_module_edit(self.gm)
        if isinstance(value, torch.nn.Parameter):
            self.gm.register_parameter(name, value)
        else:
            self.gm.register_buffer(name, value)
        return self.create_node("get_attr", name)

    def add_submodule(self, module: torch.nn.Module, hint: str) -> str:
        """Attach ``module`` to ``gm`` under a free name derived from ``hint``; return the name.

        The module is attached as it is, in its own mode: a module made anew is in training
        mode (a fresh ``BatchNorm2d`` then normalizes with the batch's statistics in an
        eval-mode model). Give it the mode of the module it stands for (``new.train(old.training)``)
        before attaching it.

        Raises:
            TypeError: ``module`` is not a ``torch.nn.Module`` or ``hint`` not a ``str``
                (naming the argument and the type given).
        """
        _check_argument("add_submodule", "module", module, torch.nn.Module, "a torch.nn.Module")
        _check_argument("add_submodule", "hint", hint, str, "a str (the name to derive the submodule's from)")
        name = self.unique_attr_name(hint)
        self.before_module_edit(self.gm)
        self.gm.add_submodule(name, module)
        return name

    def before_module_edit(self, module: torch.nn.Module) -> None:
        """Say that the pass is about to change ``module`` directly: its parameters, buffers,
        submodules, attributes or hooks (``del m._modules[name]``, ``setattr(m, ...)``).

        A pass that declares ``journal_edits = True`` must call this before each module it
        changes other than through :meth:`add_constant`/:meth:`add_submodule` (which call it
        themselves), so that rollback can restore the module; the module's own tensors are
        not copied (declare ``writes_tensors = False`` only when none is written in place).
        For other passes it does nothing: the snapshot before them holds every module.
        """
        if self._journal is not None:
            self._journal.module(module)

    # ------------------------------------------------------------------ editing helpers

    def replace_uses(self, node: Node, value: Any) -> None:
        """Replace every use of ``node`` by ``value`` (a Node or a Python constant)."""
        replace_all_uses(node, value, self._journal)

    def erase(self, node: Node, *, with_dead_inputs: bool = False) -> list[str]:
        """Erase ``node``; return the names of the erased nodes.

        Raises :class:`~fxpasses.errors.NodeHasUsersError` (naming each user) when ``node``
        still has users. With ``with_dead_inputs``, inputs that become unused and have no side
        effects (per :func:`fxpasses.effects.has_side_effects`) are erased too, users first.
        """
        if node.users:
            raise NodeHasUsersError(node)
        from .effects import has_side_effects

        erased = []
        work = [node]
        while work:
            n = work.pop()
            if n._erased or n.users:
                continue
            inputs = list(n.all_input_nodes)
            self.graph.erase_node(n)
            erased.append(n.name)
            if with_dead_inputs:
                for i in inputs:
                    if not i.users and i.op != "placeholder" and not has_side_effects(i, self.gm):
                        work.append(i)
        return erased

    def rename(self, node: Node, name: str, *, on_conflict: str = "suffix") -> str:
        """Rename ``node`` to ``name`` and return the name it got.

        The name is made a valid identifier first (each character other than an ASCII
        letter, digit or ``_`` becomes ``_``; a leading digit gets a ``_``). A name is taken
        when a node has it, had it earlier (FX never reuses a name), or is reserved: a Python
        keyword or builtin, a name the generated code imports (``torch``, ``inf``, ...), or
        ``self``. For a taken name, ``on_conflict="suffix"`` gives FX's next free numbered
        variant (``name_1``, ``name_2``, ...; a name already ending in ``_<n>`` counts up from
        ``n``: ``relu_1`` -> ``relu_2``) and ``on_conflict="error"`` raises
        :class:`~fxpasses.errors.UserError` naming what holds it.
        """
        if on_conflict not in ("suffix", "error"):
            raise ValueError(f"on_conflict must be 'suffix' or 'error', got {on_conflict!r}")
        candidate = re.sub(r"[^0-9a-zA-Z_]", "_", name)  # FX's own names are ASCII
        if not candidate or candidate[0].isdigit():
            candidate = "_" + candidate
        if candidate == node.name:
            return candidate
        taken = self.graph._graph_namespace._used_names
        reserved = _reserved_name(candidate)
        if on_conflict == "error" and (candidate in taken or reserved):
            holder = next((n for n in self.graph.nodes if n.name == candidate), None)
            if holder is not None:
                who = f"node %{holder.name} (op={holder.op})"
            else:
                who = reserved or "an earlier node (erased or renamed; FX never reuses a name)"
            raise UserError(f"cannot rename %{node.name} to {candidate!r}: the name is taken by {who}")
        if reserved and candidate not in taken:
            # FX suffixes most reserved names itself, but not every one: `self` (which
            # forward(self, ...) needs) and `None` (it skips a builtin whose value is None, so
            # only the generated code says `None_1`). Taken, each gets the numbered variant on
            # the node itself, the name the code uses.
            taken.add(candidate)
        if self._journal is not None:
            self._journal.edit(node)
        node._rename(candidate)
        return node.name

    def set_target(self, node: Node, target: Target) -> None:
        """Make ``node`` call (or read) ``target`` instead, in place: its arguments, name,
        place in the graph, users and ``meta`` stay (a pass that swaps the op of a node, or
        points a ``call_module`` node at a new module, needs no new node).

        The target must suit the node's op: for ``call_module`` a submodule of ``gm``, for
        ``get_attr`` an existing attribute, for ``call_function`` a callable, for
        ``call_method`` a method name. The change is journaled (rollback puts the old
        target back); assigning ``node.target`` directly is not (see
        :class:`fxpasses.Pass`, ``journal_edits``).

        Raises:
            ValueError: ``node`` is not a node of this graph, or was erased.
            AttributeError: a ``call_module``/``get_attr`` target that does not resolve (naming
                the missing path element).
            TypeError: ``node`` is a placeholder or the output (no target to change), or the
                target does not suit its op.
        """
        if node.graph is not self.graph or node._erased:
            raise ValueError(f"node %{node.name} is not a node of this graph (erased, or of another graph)")
        op = node.op
        if op == "call_module":
            if not isinstance(target, str):
                raise TypeError(f"a call_module target is a qualified name, got {type(target).__name__}")
            self._submodule(target)  # AttributeError naming the path if missing
        elif op == "get_attr":
            if not isinstance(target, str):
                raise TypeError(f"a get_attr target is a qualified name, got {type(target).__name__}")
            self.attr(target)
        elif op == "call_function":
            if not callable(target):
                raise TypeError(f"a call_function target must be callable, got {type(target).__name__}")
        elif op == "call_method":
            if not isinstance(target, str):
                raise TypeError(f"a call_method target is a method name, got {type(target).__name__}")
        else:
            raise TypeError(f"node %{node.name} is {op}: it has no target to change")
        if self._journal is not None:
            self._journal.edit(node)
        node.target = target  # (FX moves the node to its new target's bucket of the index)

    def infer_meta(self, node: Node) -> Any:
        """Compute and record the value metadata of ``node`` (a node the pass made, or whose
        arguments it changed) from its inputs': ``meta["val"]`` (a ``FakeTensor``; also
        ``meta["example_value"]`` in a TorchDynamo graph) and ``meta["tensor_meta"]``, as
        ``torch.export`` and TorchDynamo record them for every node
        (:func:`fxpasses.node_meta.infer_meta`), so that the pass's later hooks and the passes
        after it see its shape (:meth:`tensor_info`). Rollback puts back the node's ``meta``
        as it was. Returns the value, or None (nothing recorded) where the inputs have no
        recorded fake value (a ``symbolic_trace`` graph before ``propagate_shapes``) or the
        op needs real data.

        Raises:
            Exception: what the op raises on its inputs' values (a shape mismatch: the node is
                not a call its inputs take), noted with the node's name.
        """
        from .node_meta import infer_meta

        if self._journal is not None:
            self._journal.node(node)  # (its meta changes: recorded first; not one made now)
        return infer_meta(self.gm, node)

    # ------------------------------------------------------------------ analysis helpers

    def tensor_info(self, node: Node) -> tuple[torch.Size, torch.dtype] | None:
        """``(shape, dtype)`` of a node's tensor value from its metadata, if recorded.

        In a graph with dynamic shapes (``torch.export`` with ``dynamic_shapes``,
        ``torch.compile(dynamic=True)``) a size may be a ``torch.SymInt``: ``int(size)`` or a
        comparison of it with a number specialises the graph to the example's size (under
        ``torch.compile``, a guard and a recompilation for each other size). Keep such sizes
        symbolic (arithmetic on them stays symbolic), or test ``isinstance(size, int)``."""
        return tensor_info(node)


class _InsertAt:
    def __init__(self, ctx: PassContext, node: Node, before: bool) -> None:
        self.ctx = ctx
        self.node = node
        self.before = before

    def __enter__(self) -> "_InsertAt":
        g = self.ctx.graph
        self._cm = g.inserting_before(self.node) if self.before else g.inserting_after(self.node)
        self._cm.__enter__()
        self._saved = self.ctx._provenance
        self.ctx._provenance = self.node
        return self

    def __exit__(self, *exc: Any) -> None:
        self.ctx._provenance = self._saved
        self._cm.__exit__(*exc)


def _has_attribute(m: torch.nn.Module, name: str) -> bool:
    """``hasattr(m, name) or name in m._modules``, without the ``AttributeError`` that
    ``nn.Module.__getattr__`` formats for every free name (about 5 us each: a pass adding
    thousands of constants asks once per constant). A name on the class counts as taken even
    where ``hasattr`` would say False (a property that raises): the safe answer."""
    d = m.__dict__
    if name in d:
        return True
    for registry in ("_parameters", "_buffers", "_modules"):
        r = d.get(registry)
        if r is not None and name in r:
            return True
    if hasattr(type(m), name):  # on the class or a base (a property is not called there)
        return True
    if type(m).__getattr__ is torch.nn.Module.__getattr__:  # nothing more to find
        return False
    return hasattr(m, name)  # a class with its own __getattr__: ask it


def copy_provenance(src: Node, dst: Node) -> None:
    """Copy :data:`PROVENANCE_KEYS` from ``src.meta`` to ``dst.meta`` (missing keys only)."""
    smeta = src.meta
    dmeta = dst.meta
    for key in PROVENANCE_KEYS:
        if key in smeta and key not in dmeta:
            dmeta[key] = smeta[key]


def check_replacement(node: Node, value: Node) -> None:
    """Raise ``ValueError`` when ``value`` cannot take the place of ``node`` in its uses: it
    belongs to another graph, was erased, or comes after a user of ``node`` (the graph would
    use it before defining it, or it would use itself)."""
    if value.graph is not node.graph:
        raise ValueError(f"cannot replace %{node.name} by %{value.name}: %{value.name} belongs to another graph")
    if value._erased:
        raise ValueError(f"cannot replace %{node.name} by %{value.name}: %{value.name} was erased")
    if precedes(node, value):  # after the node: it must still come before every user
        for user in node.users:
            if user is value:
                raise ValueError(
                    f"cannot replace %{node.name} by %{value.name}: %{value.name} uses %{node.name} "
                    "(it would then use itself)"
                )
            if not precedes(value, user):
                raise ValueError(
                    f"cannot replace %{node.name} by %{value.name}: %{value.name} comes after "
                    f"%{user.name}, which uses %{node.name}"
                )


def replace_all_uses(node: Node, value: Any, journal: Any = None) -> None:
    """Replace every use of ``node`` with ``value``: a Node, or a constant spelled in code.

    ``journal`` (a :class:`fxpasses.journal.Journal`, or None) records each user before a
    constant takes the node's place in its arguments (FX's replace hooks see only node
    replacements).

    Raises:
        TypeError: ``value`` is a tensor (store it with ``PassContext.add_constant``).
        ValueError: ``value`` is a node that cannot take ``node``'s place (see
            :func:`check_replacement`); or a constant, and ``node``'s value is a symbolic
            number of a graph with dynamic shapes (:func:`symbolic_value`): a size the graph's
            inputs decide, which a constant would fix to the example's.
    """
    if isinstance(value, Node):
        if value is not node:
            check_replacement(node, value)
            node.replace_all_uses_with(value)
        return
    if isinstance(value, torch.Tensor):
        raise TypeError(
            f"cannot replace %{node.name} by a tensor literal; store it with "
            "ctx.add_constant(tensor) and replace by the returned node"
        )
    symbolic = symbolic_value(node)
    if symbolic is not None:
        raise ValueError(
            f"cannot replace %{node.name} by the constant {_short(value)}: its value is {symbolic} of a graph with "
            "dynamic shapes, which a constant fixes to one size (other sizes would give wrong results, and numeric "
            "verification at the example's sizes cannot see it); keep the node (arithmetic on it stays symbolic), "
            "or leave the rewrite out where a value is symbolic"
        )

    def sub(a: Any) -> Any:
        return value if a is node else a

    for user in list(node.users):
        if journal is not None:
            journal.user(user)  # (node is among the inputs it records)
        user.args = torch.fx.node.map_aggregate(user.args, sub)
        user.kwargs = torch.fx.node.map_aggregate(user.kwargs, sub)


def symbolic_value(node: Node) -> str | None:
    """What makes ``node``'s recorded value (``meta["val"]``, TorchDynamo's
    ``meta["example_value"]``) a symbolic number whose value the graph's inputs decide, in
    words (``"the symbolic int s27 (in [2, 64]; 6 for the example inputs)"``), or None: not
    a ``SymInt``/``SymFloat``/``SymBool``, or one its shape environment fixes to one value
    (a symbol replaced by a constant, or a range of one value). A graph with dynamic shapes
    (``torch.export`` with ``dynamic_shapes``, ``torch.compile(dynamic=True)``) has them."""
    v = node.meta.get("val", node.meta.get("example_value"))
    if not isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return None
    try:
        sym = v.node
        env = sym.shape_env
        expr = env.replace(sym.expr) if env is not None else sym.expr
        if not getattr(expr, "free_symbols", None):
            return None
        bounds = env.bound_sympy(expr) if env is not None else None
        if bounds is not None and bounds.is_singleton():
            return None
        hint = sym.hint if sym.has_hint() else None
    except Exception:  # noqa: BLE001 - torch's symbolic internals changed: no answer, no check
        return None
    kind = {torch.SymInt: "int", torch.SymFloat: "float", torch.SymBool: "bool"}[type(v)]
    where = [f"in [{bounds.lower}, {bounds.upper}]"] if bounds is not None else []
    if hint is not None:
        where.append(f"{hint} for the example inputs")
    return f"the symbolic {kind} {expr}" + (f" ({'; '.join(where)})" if where else "")


def _short(arg: Any) -> str:
    if isinstance(arg, Node):
        return f"%{arg.name}"
    if isinstance(arg, (tuple, list)):
        inner = ", ".join(_short(a) for a in arg)
        return f"({inner}{',' if len(arg) == 1 and isinstance(arg, tuple) else ''})" if isinstance(arg, tuple) else f"[{inner}]"
    if isinstance(arg, dict):
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in arg.items()) + "}"
    if isinstance(arg, torch.Tensor):
        return f"tensor(shape={tuple(arg.shape)}, dtype={arg.dtype})"
    r = repr(arg)
    return r if len(r) <= 80 else r[:77] + "..."


def _reserved_name(name: str) -> str | None:
    """Why generated code cannot use ``name`` for a node's value (None when it can)."""
    import builtins
    import keyword

    if name == "self":
        return "the module itself (the first parameter of the generated forward)"
    if keyword.iskeyword(name):
        return "a Python keyword"
    fx_reserved = getattr(torch.fx.graph, "_illegal_names", builtins.__dict__)
    if name in fx_reserved:
        return "a Python builtin or a name the generated code imports"
    return None


def describe_node(node: Node) -> dict[str, str]:
    """``name``, ``op``, ``target``, ``args``, ``kwargs`` of a node as short strings; for a
    node erased from its graph (by the failing pass), ``erased`` too, and "?" for ``args`` and
    ``kwargs`` (torch's ``erase_node`` sets the node inputs of both to None)."""
    from .errors import _target_str

    if node._erased:
        return {"name": node.name, "op": node.op, "target": _target_str(node.target), "args": "?", "kwargs": "?", "erased": "yes"}
    return {
        "name": node.name,
        "op": node.op,
        "target": _target_str(node.target),
        "args": _short(tuple(node.args)),
        "kwargs": _short(dict(node.kwargs)),
    }


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)(?:\n(?![ \t]*File ")[ \t]*(.*))?')

#: Top-level packages whose frames are never the user's code: torch, the packages its wheel
#: ships beside it, and fxpasses.
_OWN_PACKAGES = ("torch", "functorch", "torchgen", "fxpasses")
_SITE_DIRS = ("site-packages", "dist-packages")


@functools.lru_cache(maxsize=1)
def _bundled_models() -> frozenset[str]:
    """The files of the models fxpasses ships (``fxpasses._example``): model code, the user's
    in `fxpasses run` without a config, though they are inside fxpasses."""
    out = set()
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.util.find_spec("fxpasses._example")
        if spec is not None and spec.origin:
            for v in (os.path.abspath(spec.origin), os.path.realpath(spec.origin)):
                out.add(v.replace("\\", "/"))
    return frozenset(out)


@functools.lru_cache(maxsize=1)
def _known_dirs() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(own, stdlib, site)``: folders (with a trailing ``/``, as given and resolved) of
    torch's and fxpasses' packages, of Python's standard library, and of installed packages."""

    def variants(paths: Iterable[str]) -> tuple[str, ...]:
        out: set[str] = set()
        for path in paths:
            if path:
                for v in (os.path.abspath(path), os.path.realpath(path)):
                    out.add(v.replace("\\", "/").rstrip("/") + "/")
        return tuple(sorted(out, key=len, reverse=True))

    own: list[str] = []
    # fxpasses.builtin_passes: a folder of its own in a source checkout
    for name in (*_OWN_PACKAGES, "fxpasses.builtin_passes"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            own.extend(spec.submodule_search_locations or ())
    paths = sysconfig.get_paths()
    site_dirs = [paths.get("purelib", ""), paths.get("platlib", "")]
    with contextlib.suppress(Exception):
        site_dirs += [*site.getsitepackages(), site.getusersitepackages()]
    stdlib = [paths.get("stdlib", ""), paths.get("platstdlib", "")]
    return variants(own), variants(stdlib), variants(site_dirs)


@functools.lru_cache(maxsize=4096)
def _frame_kind(path: str) -> str:
    """``"own"`` (torch's, the packages torch ships, fxpasses' (not its bundled example
    model), Python's standard library or generated code), ``"library"`` (another installed
    package) or ``"user"``, for the file of a stack frame.

    Decided by where the file is: under the folders these packages are imported from here, or,
    for a trace recorded elsewhere (a saved program, a reproducer's graph), by the layout of
    its path (``.../site-packages/torch/...``, ``.../lib/python3.11/...``)."""
    if path.startswith("<"):  # <frozen importlib._bootstrap>, fx's <eval_with_key>.3; <stdin>
        return "own" if path.startswith(("<frozen ", "<eval_with_key>")) else "user"
    own, stdlib, site_dirs = _known_dirs()
    candidates = {path.replace("\\", "/")}
    with contextlib.suppress(OSError, ValueError):
        candidates.add(os.path.realpath(path).replace("\\", "/"))
    if candidates & _bundled_models():
        return "user"
    for p in candidates:
        if any(p.startswith(d) for d in own):
            return "own"
    for p in candidates:
        if any(p.startswith(d) for d in site_dirs):
            return "library"
        for d in stdlib:
            if p.startswith(d) and p[len(d):].split("/", 1)[0] not in _SITE_DIRS:
                return "own"
    parts = path.replace("\\", "/").split("/")
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in _SITE_DIRS:
            return "own" if parts[i + 1] in _OWN_PACKAGES else "library"
    if re.search(r"/lib/python3\.\d+/[^/]", path.replace("\\", "/")):
        return "own"  # a standard library of elsewhere (site-packages was handled above)
    return "user"


def user_source_line(node: Node) -> str | None:
    """The user's source line recorded for ``node`` (from ``meta["stack_trace"]``).

    Returns the innermost frame that is not torch's own code (torch and the packages its
    wheel ships: functorch, torchgen), nor fxpasses', nor Python's standard library, formatted
    as ``File "model.py", line 12, in forward: return x + self.b``. A frame in another
    installed package is the model's code (a Hugging Face model's ``modeling_gpt2.py``); when
    the chosen frame is in one and an outer frame is in the user's own files, that is named
    too: ``File ".../modeling_gpt2.py", line 603, in forward: h = self.drop(h) (called from
    File "models.py", line 103, in forward)``. None when no trace is recorded, or when it
    has only torch's, fxpasses' and the standard library's frames (see
    :func:`no_source_line_reason`).
    """
    trace = node.meta.get("stack_trace")
    if not trace:
        return None
    frames = _FRAME.findall(trace)
    if not frames:
        return trace.strip().splitlines()[-1].strip() or None
    kinds = [_frame_kind(f[0]) for f in frames]
    chosen = next((i for i in range(len(frames) - 1, -1, -1) if kinds[i] != "own"), None)
    if chosen is None:  # torch's own line is not the user's code
        return None
    frame = frames[chosen]
    code = frame[3].strip()
    text = f'File "{frame[0]}", line {frame[1]}, in {frame[2]}' + (f": {code}" if code else "")
    if kinds[chosen] == "library":
        caller = next((i for i in range(chosen - 1, -1, -1) if kinds[i] == "user"), None)
        if caller is not None:
            outer = frames[caller]
            text += f' (called from File "{outer[0]}", line {outer[1]}, in {outer[2]})'
    return text


def no_source_line_reason(node: Node) -> str:
    """Why :func:`user_source_line` names no line for ``node`` (for "user code: unknown (...)")."""
    trace = node.meta.get("stack_trace")
    if trace and _FRAME.search(trace):
        return (
            "its recorded stack trace has only torch's, fxpasses' and the standard library's frames: code "
            "without a source file, such as a model defined in python -c, exec or the REPL, leaves none"
        )
    if node.op in ("placeholder", "get_attr", "output"):  # (no line of the model's code makes one)
        return f"{'an' if node.op == 'output' else 'a'} {node.op} node records no stack trace"
    gm = node.graph.owning_module
    if gm is not None:
        from .dialect import detect_dialect

        try:
            dialect = detect_dialect(gm)
        except Exception:  # noqa: BLE001 - a graph too broken to tell: the general reason
            dialect = "symbolic_trace"
        if dialect != "symbolic_trace":  # (the advice about symbolic_trace does not apply)
            article = "an" if dialect == "export" else "a"
            return f"no stack trace recorded on this node of {article} {dialect} graph (a node a pass made without its context carries none)"
    # a symbolic_trace graph whose traced calls have stack traces was traced recording them:
    # this node was made afterwards (the advice to record them does not apply)
    if any(n.meta.get("stack_trace") for n in node.graph.nodes if n.op.startswith("call_")):
        return (
            "no stack trace recorded on this node, where the graph's traced nodes have them (a node a pass "
            "made without its context carries none)"
        )
    return NO_STACK_TRACE


def failure_place(node: Node | None) -> dict[str, Any]:
    """Where a failure happened, as :class:`~fxpasses.errors.PassFailedError` takes it: the
    ``node``'s description, its user ``source_line``, and ``no_source_line`` (why there is
    none); all None without a node. Taken when the failure happens: a rollback afterwards
    puts the graph's nodes back as they were before the pass."""
    if node is None:
        return {"node": None, "source_line": None, "no_source_line": None}
    line = user_source_line(node)
    return {"node": describe_node(node), "source_line": line, "no_source_line": None if line else no_source_line_reason(node)}


def tensor_info(node: Node) -> tuple[torch.Size, torch.dtype] | None:
    """``(shape, dtype)`` from ``meta["val"]``, ``["example_value"]`` or ``["tensor_meta"]``."""
    meta = node.meta
    for key in ("val", "example_value"):
        v = meta.get(key)
        if isinstance(v, torch.Tensor):
            return v.shape, v.dtype
    tm = meta.get("tensor_meta")
    if tm is not None and hasattr(tm, "shape") and hasattr(tm, "dtype"):
        return torch.Size(tm.shape), tm.dtype
    return None


def iter_nodes(nodes: Iterable[Node]) -> Iterator[Node]:
    """Nodes of ``nodes`` that are still in their graph."""
    for n in nodes:
        if not n._erased:
            yield n


def _handed_as_is(t: torch.Tensor) -> bool:
    """Example tensors a pass gets as they are, not copied: ``nn.Parameter`` objects, fake
    tensors and other tensor subclasses."""
    return type(t) is not torch.Tensor


def _check_argument(method: str, argument: str, value: Any, expected: type, words: str) -> None:
    """A ``TypeError`` naming the method, the argument and what was given, unless ``value``
    is an ``expected``: ``PassContext.add_submodule: argument 'module' must be a
    torch.nn.Module, got int (42)``."""
    if not isinstance(value, expected):
        raise TypeError(
            f"PassContext.{method}: argument {argument!r} must be {words}, got "
            f"{type(value).__name__} ({short_repr(value, 60)})"
        )
