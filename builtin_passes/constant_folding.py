"""``fold_constants``: evaluate the parts of a graph that depend only on constants."""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.fx
from pydantic import Field
from torch.fx.node import Node

from fxpasses import GraphPass, PassContext, PassOptions
from fxpasses._modpath import MISSING, ModulePaths
from fxpasses.effects import GLOBAL_STATE, EffectAnalysis
from fxpasses.effects import _storage_key
from fxpasses.errors import exception_text

from ._facts import modules_may_train_field
from .dead_code import prune_unused_state

__all__ = ["FoldConstants", "FoldConstantsOptions"]

_CALLS = ("call_function", "call_method", "call_module")
#: Python values a folded node may be replaced by, spelled as literals in the generated code.
_LITERALS = (bool, int, float, complex, str, type(None), torch.dtype, torch.device)
_META_KEYS = ("val", "tensor_meta", "example_value")
_MAX_CONE = 64
#: Global state changes that do not change values (only whether autograd records).
_GRAD_MODE = frozenset(
    {
        torch._C._set_grad_enabled,
        torch.autograd.grad_mode._enter_inference_mode,
        torch.autograd.grad_mode._exit_inference_mode,
    }
)


class FoldConstantsOptions(PassOptions):
    """Options of ``fold_constants``."""

    max_numel: int = Field(
        default=1 << 20,
        ge=0,
        description=(
            "Never store a folded tensor with more elements than this (default 1048576 = 2**20, "
            "4 MiB of float32): a bigger result is left to be computed at run time."
        ),
    )
    max_growth_bytes: int = Field(
        default=0,
        ge=0,
        description=(
            "How many bytes folding may add to the module's tensor storage in total: the bytes "
            "of the new constants minus those of the parameters/buffers they leave unused. "
            "The default 0 never lets the module grow (x + b.expand(1024, 1024) keeps the small "
            "b); raise it to fold constants built from literals (torch.arange(n), masks)."
        ),
    )
    remove_unused_state: bool = Field(
        default=True,
        description=(
            "Delete the parameters/buffers that folding leaves unread (so the storage bound holds "
            "without a later eliminate_dead_code). False keeps every one, so the state-dict names "
            "stay (the `training` preset): nothing is freed then, and a fold that adds a tensor is "
            "refused unless max_growth_bytes allows it."
        ),
    )
    fold_parameters: Optional[bool] = Field(
        default=None,
        description=(
            "Treat parameters as constants: true folds them all (inference: the weights' "
            "current values are baked in, and later training of them no longer reaches the "
            "folded results, which still require grad where eager mode's would, stored as "
            "parameters); false folds only buffers and "
            "literals; unset (the default) folds a parameter (or any tensor) unless it requires "
            "grad and the module holding it is in training mode (torch.export's `.module()` always says "
            "training, so there only parameters with requires_grad=False fold). The "
            "`inference` preset sets it to true."
        ),
    )
    modules_may_train: bool = modules_may_train_field(
        "a dropout or batch-norm call on constants is random or updates running statistics, and is not folded"
    )


class FoldConstants(GraphPass):
    """Evaluate subgraphs that depend only on constants and store their results as buffers.

    A node is *constant* when it is a ``get_attr`` of a tensor (or plain scalar) that no node of
    the graph writes (see :meth:`fxpasses.effects.EffectAnalysis.mutated_attributes`: in-place
    ops on it or a view of it, ``out=``, submodules updating their own state, shared storage),
    or a pure call (:func:`fxpasses.effects.is_pure`: no random, in-place, assert, ... op) whose
    inputs are all constant and whose value no node writes (for a ``call_module``: whose
    module's state no node writes either). A parameter counts only with ``fold_parameters``
    true, or by default when it does not require grad or the module holding it is in eval
    mode (so a model still being trained keeps its gradients); what such a parameter's metadata
    answers (``w.size(0)``, ``w.shape``, ``w.dtype``, ``w.numel()``: see
    ``_METADATA_METHODS``) is constant all the same and folds. Anything that depends on a
    placeholder is not constant: in the TorchDynamo dialect parameters and buffers are
    placeholders, so only literal-built values can fold there (unless the ``torch.compile``
    backend's ``freeze`` option made them constants, see :mod:`fxpasses.backend`).

    Constants are evaluated one node at a time on the real tensors, under ``torch.no_grad()``
    (with grad enabled for a node that reads a constant that requires grad, such as an
    eval-mode module's parameter, as eager mode runs it), in graph order, with values cached
    (O(n) evaluations). A node is then *folded* when its value is needed at run time (a
    non-constant node or the output uses it): a tensor result is stored with
    :meth:`PassContext.add_constant` (a new, uniquely named persistent buffer,
    ``folded_<node name>``; a parameter that requires grad when the result requires grad, by
    autograd's own rules: ``w * 2`` does, ``zeros_like(w)``, ``w.detach() + 1`` or ``w > 0``
    do not, so that the outputs reading it require grad exactly as in eager mode) and
    replaces the node's uses; a Python scalar, dtype or device result becomes a literal.

    Refused, and left as they are (the constants they read are then folded where possible):

    - results with more than ``max_numel`` elements (counter ``skipped_size``);
    - results that would make the module's tensor storage grow by more than
      ``max_growth_bytes`` (default 0) - the bytes of the new buffers against the bytes of the
      parameters/buffers that folding leaves unused, accounted per connected group of constant
      nodes; ``x + self.b.expand(1024, 1024)`` keeps the 4 KiB ``b`` rather than storing 4 MiB
      (counter ``skipped_size``);
    - results that reach the graph's output (directly or as a view): the caller would receive
      the module's buffer itself, shared between calls (counter ``skipped_output``);
    - results that are not tensors or literals (tuples, lists), and nodes whose evaluation
      raises (recorded in the report's skips);
    - anything after a change of global state other than grad mode (autocast enter/exit in
      TorchDynamo graphs, ``torch.set_default_dtype``, ...): its value depends on that state.

    After replacing uses, the pass erases the constant nodes it made dead and deletes the
    parameters/buffers no node reads any more (so the storage bound holds without a later
    ``eliminate_dead_code``; ``remove_unused_state=false`` keeps them, and then counts nothing
    as freed); it runs before ``eliminate_dead_code`` when both are in a pipeline, which
    removes any other dead code.

    Options (see :class:`FoldConstantsOptions`): ``max_numel`` (default 2**20 elements),
    ``max_growth_bytes`` (default 0), ``remove_unused_state`` (default true),
    ``fold_parameters`` (default: parameters that may be trained are left alone),
    ``modules_may_train`` (default false: a ``call_module`` node is judged by its module's mode
    now; true: as in training mode, for a graph whose modules are switched to ``.train()``
    later).

    Caveats: the values are computed once, with the global state at folding time (default
    dtype, autocast off, grad off unless a constant requires grad); a folded parameter's
    value is baked in: training it afterwards no longer changes the folded results (see
    ``fold_parameters``). A
    call left unfolded only because it reads a parameter that may be trained is reported
    (``ctx.skip``).

    Counters: ``folded``, ``skipped_size``, ``skipped_output``, ``removed_nodes``,
    ``removed_parameters``/``removed_buffers``/``removed_constants``, ``bytes_added``,
    ``bytes_freed``.

    Source: the constant-subgraph split of ``torch.fx.experimental.const_fold``, evaluated in
    place (no graph copy) with :mod:`fxpasses.effects` deciding what is constant.
    """

    name = "fold_constants"
    Options = FoldConstantsOptions
    before = ("eliminate_dead_code",)
    # it evaluates only calls effect analysis finds pure (no argument written, per the
    # schemas the write guard also reads; no module with hooks or in-place flags) and stores
    # clones: existing tensors are read, never written
    writes_tensors = False
    journal_edits = True  # edits only through torch.fx's editing methods and the context

    def run(self, gm: torch.fx.GraphModule, ctx: PassContext) -> bool:
        opts: FoldConstantsOptions = self.options  # type: ignore[assignment]
        analysis = EffectAnalysis(gm, modules_may_train=opts.modules_may_train)
        values = self._evaluate(gm, ctx, analysis, opts)
        if not values:
            return False
        # (storage key, storage bytes) of each constant tensor attribute, built once
        storages = {
            n: (_storage_key(v), _storage_bytes(v))
            for n, v in values.items()
            if n.op == "get_attr" and isinstance(v, torch.Tensor)
        }
        folds, needed = self._choose(ctx, analysis, values, storages, opts)
        if not folds:
            return False
        accepted, removable = self._check_growth(gm, ctx, values, storages, folds, needed, opts)
        if not accepted:
            return False
        self._apply(gm, ctx, values, accepted, removable if opts.remove_unused_state else set())
        return True

    # ------------------------------------------------------------------ 1. evaluate

    def _evaluate(
        self, gm: torch.fx.GraphModule, ctx: PassContext, analysis: EffectAnalysis, opts: FoldConstantsOptions
    ) -> dict[Node, Any]:
        """Values of the constant nodes, in graph order."""
        mutated = analysis.mutated_attributes()
        values: dict[Node, Any] = {}
        constant = values.keys()
        state_changed = False  # values after autocast/default-dtype changes depend on them
        paths = ModulePaths(gm)  # the module tree does not change while evaluating
        effects = analysis.effects
        is_grad_enabled = torch.is_grad_enabled
        set_grad_enabled = torch._C._set_grad_enabled  # torch.no_grad() without its objects
        fold_parameters = opts.fold_parameters
        # tensors left alone only because they may be trained (their metadata still folds)
        trainable: dict[Node, torch.Tensor] = {}
        # constant nodes whose value requires grad (their users are evaluated with grad on)
        requires_grad_nodes: set[Node] = set()
        for node in gm.graph.nodes:
            op = node.op
            if op == "get_attr":  # (get_attr, placeholder and output nodes change no state)
                obj = _attr(gm, node.target, paths)
                if isinstance(obj, torch.Tensor):
                    if node.target not in mutated and not analysis.is_written(node):
                        if fold_parameters is None:
                            # any tensor gradients flow to (a parameter, or a plain attribute
                            # that requires grad), held by a module in training mode
                            if obj.requires_grad and _owner_training(gm, str(node.target), paths):
                                trainable[node] = obj
                            else:
                                values[node] = obj
                        elif fold_parameters or not isinstance(obj, torch.nn.Parameter):
                            values[node] = obj
                        if obj.requires_grad and node in values:
                            requires_grad_nodes.add(node)
                elif isinstance(obj, _LITERALS):
                    values[node] = obj
                continue
            if op not in _CALLS:
                continue
            if not state_changed and GLOBAL_STATE in effects(node).kinds and node.target not in _GRAD_MODE:
                state_changed = True
            if state_changed or not node.users:
                continue
            if not node._input_nodes.keys() <= constant:  # an input is not constant
                if trainable and not trainable.keys().isdisjoint(node._input_nodes) and all(
                    i in values or i in trainable for i in node._input_nodes
                ):
                    if _reads_metadata_only(node, trainable):
                        # w.size(0) of a trainable w: its value does not depend on training
                        try:
                            value = _run(gm, node, {**values, **trainable})
                        except Exception:  # noqa: BLE001 - left to run, like any call that raises
                            value = None
                        if value is not None and not isinstance(value, torch.Tensor):
                            values[node] = value
                            continue
                    ctx.skip(
                        node,
                        "reads a parameter (or tensor) that requires grad, in training mode "
                        "(fold_parameters=true folds it)"
                        + _container_note(gm, [i for i in node._input_nodes if i in trainable], paths),
                    )
                continue
            if not analysis.is_pure(node) or analysis.is_written(node) or analysis.reads_written_state(node):
                continue
            if op == "call_module" and not fold_parameters:
                mod = gm.get_submodule(node.target)  # type: ignore[arg-type]
                if fold_parameters is False:
                    if any(True for _ in mod.parameters()):
                        continue
                elif _trains_parameters(mod):
                    ctx.skip(
                        node,
                        "calls a module whose parameters require grad, in training mode "
                        "(fold_parameters=true folds it)",
                    )
                    continue
            # from a tensor that requires grad (a parameter of an eval-mode module), the
            # node runs with grad enabled, as in eager mode: its value then requires grad
            # exactly when eager mode's would (w * 2 does; zeros_like(w), w.detach() + 1,
            # w > 0 do not), which decides how the fold is stored (_apply)
            grad = not requires_grad_nodes.isdisjoint(node._input_nodes)
            try:
                prev = is_grad_enabled()
                set_grad_enabled(grad)
                try:
                    value = _run(gm, node, values)
                finally:
                    set_grad_enabled(prev)
            except Exception as exc:  # evaluation is best effort: leave the node alone
                ctx.skip(node, f"could not evaluate: {exception_text(exc)}"[:200])
                continue
            values[node] = value
            if grad and isinstance(value, torch.Tensor) and value.requires_grad:
                requires_grad_nodes.add(node)
        return values

    # ------------------------------------------------------------------ 2. choose

    def _choose(
        self,
        ctx: PassContext,
        analysis: EffectAnalysis,
        values: dict[Node, Any],
        storages: dict[Node, tuple[Any, int]],
        opts: FoldConstantsOptions,
    ) -> tuple[dict[Node, Any], set[Node]]:
        """Constant nodes to replace, and the constant nodes that stay needed.

        Chosen from the output backwards: a node is folded when its value is needed at run
        time and it passes the per-node limits; otherwise it stays and its constant inputs
        become needed (so the small part of a chain that ends in a large result still folds).
        """
        # storages of the constant attributes each node reads (None: too many to track; the
        # exact per-group check in _check_growth decides then)
        cone: dict[Node, dict[Any, int] | None] = {}
        for node in values:
            storage = storages.get(node)
            if storage is not None:
                cone[node] = {storage[0]: storage[1]}
                continue
            merged: dict[Any, int] | None = {}
            for i in node._input_nodes:
                c = cone.get(i, {})
                if c is None or merged is None or len(merged) + len(c) > _MAX_CONE:
                    merged = None
                    break
                merged.update(c)
            cone[node] = merged
        needed: set[Node] = set()
        folds: dict[Node, Any] = {}
        constant = values.keys()
        for node in reversed(list(values)):
            users = node.users
            frontier = not users.keys() <= constant  # used by a run-time node
            if not frontier and needed.isdisjoint(users):
                continue
            if node.op == "get_attr":
                needed.add(node)
                continue
            value = values[node]
            reason = counter = None
            if isinstance(value, torch.Tensor):
                nbytes = value.numel() * value.element_size()
                c = cone[node]
                replaced = sum(c.values()) if c is not None else float("inf")
                if value.numel() > opts.max_numel:
                    reason = f"result has {value.numel()} elements > max_numel={opts.max_numel}"
                    counter = "skipped_size"
                elif nbytes > replaced + opts.max_growth_bytes:
                    reason = (
                        f"result of {nbytes} bytes would replace {replaced} bytes of constants "
                        f"(max_growth_bytes={opts.max_growth_bytes})"
                    )
                    counter = "skipped_size"
                elif analysis.reaches_output(node):
                    reason = "result reaches the output (it would be the module's own buffer)"
                    counter = "skipped_output"
            elif not isinstance(value, _LITERALS):
                reason = f"result is a {type(value).__name__}, not a tensor or literal"
            if reason is None:
                folds[node] = value
                continue
            needed.add(node)  # computed at run time: its constant inputs are needed instead
            if frontier:  # report where a constant meets run-time code, not every node above
                ctx.skip(node, reason)
                if counter:
                    ctx.count(counter)
        return folds, needed

    # ------------------------------------------------------------------ 3. storage bound

    def _check_growth(
        self,
        gm: torch.fx.GraphModule,
        ctx: PassContext,
        values: dict[Node, Any],
        storages: dict[Node, tuple[Any, int]],
        folds: dict[Node, Any],
        needed: set[Node],
        opts: FoldConstantsOptions,
    ) -> tuple[dict[Node, Any], set[str]]:
        """The folds of each connected group of constant nodes whose new buffers do not
        outweigh the parameters/buffers they free, within ``max_growth_bytes`` overall, and the
        qualified names those folds leave unused."""
        parent: dict[Any, Any] = {}

        def find(x: Any) -> Any:
            parent.setdefault(x, x)
            while parent[x] is not x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def union(a: Any, b: Any) -> None:
            parent[find(a)] = find(b)

        for node in values:
            find(node)
            for i in node._input_nodes:
                if i in values:
                    union(node, i)
            storage = storages.get(node)
            if storage is not None:
                union(node, storage[0])
        dead_targets: dict[Any, set[str]] = {}  # storage key -> targets of dead constant get_attrs
        dead_bytes: dict[Any, int] = {}
        for node, (k, nbytes) in storages.items():
            if node not in needed and opts.remove_unused_state:  # (kept: nothing is freed)
                dead_targets.setdefault(k, set()).add(str(node.target))
                dead_bytes[k] = nbytes
        live_keys, names_by_key = (
            _live_storages(gm, values, needed, set(dead_targets), ModulePaths(gm)) if dead_targets else (set(), {})
        )
        groups: dict[Any, list[Node]] = {}
        for node in folds:
            groups.setdefault(find(node), []).append(node)
        freed_by_group: dict[Any, int] = {}
        removable: set[str] = set()
        removable_by_group: dict[Any, set[str]] = {}
        for k, targets in dead_targets.items():
            if k in live_keys or not names_by_key.get(k, set()) <= targets:
                continue
            g = find(k)
            freed_by_group[g] = freed_by_group.get(g, 0) + dead_bytes[k]
            removable_by_group.setdefault(g, set()).update(targets)
        budget = opts.max_growth_bytes
        accepted: dict[Node, Any] = {}
        for g, nodes in groups.items():
            added = sum(_nbytes(folds[n]) for n in nodes)
            growth = added - freed_by_group.get(g, 0)
            if growth > budget:
                for n in nodes:
                    ctx.count("skipped_size")
                    ctx.skip(
                        n,
                        f"folding its group would grow the module by {growth} bytes "
                        f"(max_growth_bytes={opts.max_growth_bytes})",
                    )
                continue
            budget -= max(growth, 0)
            for n in nodes:
                accepted[n] = folds[n]
            removable |= removable_by_group.get(g, set())
            for key, n in (("bytes_added", added), ("bytes_freed", freed_by_group.get(g, 0))):
                if n:
                    ctx.count(key, n)
        return accepted, removable

    # ------------------------------------------------------------------ 4. rewrite

    def _apply(
        self,
        gm: torch.fx.GraphModule,
        ctx: PassContext,
        values: dict[Node, Any],
        accepted: dict[Node, Any],
        removable: set[str],
    ) -> None:
        """Replace the accepted nodes, erase the constant nodes left without users (only pure
        constants: their groups' nodes), delete the attributes left unread."""
        graph = gm.graph
        for node, value in accepted.items():
            if isinstance(value, torch.Tensor):
                folded = value.detach().clone()
                if value.requires_grad:
                    # computed with grad from tensors that require grad, as eager mode would
                    # (see _evaluate): stored as a parameter that requires grad, so the
                    # outputs that read it still do
                    folded = torch.nn.Parameter(folded, requires_grad=True)
                with ctx.inserting_before(node):
                    const = ctx.add_constant(folded, hint=f"folded_{node.name}")
                for key in _META_KEYS:
                    if key in node.meta:
                        const.meta[key] = node.meta[key]
                node.replace_all_uses_with(const)
            else:
                ctx.replace_uses(node, value)
            ctx.count("folded")
        removed = 0
        for node in reversed(list(values)):
            if not node.users and not node._erased:
                graph.erase_node(node)
                removed += 1
        if removed:
            ctx.count("removed_nodes", removed)
        for key, n in prune_unused_state(gm, candidates=removable, before_edit=ctx.before_module_edit).items():
            ctx.count(key, n)


def _owner_training(gm: torch.fx.GraphModule, target: str, paths: ModulePaths) -> bool:
    """Whether the module holding the attribute ``target`` (``a.b.weight``: ``a.b``) is in
    training mode (True when it cannot be found: the safe answer)."""
    owner = _attr(gm, target.rpartition(".")[0], paths) if "." in target else gm
    return bool(getattr(owner, "training", True))


def _container_note(gm: torch.fx.GraphModule, reads: list[Node], paths: ModulePaths) -> str:
    """What to add to the skip of a node reading the trainable ``get_attr`` nodes ``reads``
    when a module holding one is a plain ``torch.nn.Module`` container in training mode while
    the GraphModule is in eval mode: ``torch.fx.symbolic_trace`` of an eval-mode model makes its
    containers so (``fxpasses.capture`` gives each the model's mode, so there it is the user's
    own choice, which the note names as well)."""
    if gm.training:
        return ""
    for r in reads:
        owner_path = str(r.target).rpartition(".")[0]
        owner = _attr(gm, owner_path, paths) if owner_path else None
        if type(owner) is torch.nn.Module and owner.training:
            return (
                f"; {owner_path!r}, which holds {str(r.target)!r}, is in training mode while the GraphModule is "
                "in eval mode (torch.fx.symbolic_trace makes such a container in training mode whatever the "
                "model's mode: gm.eval() puts it in eval mode)"
            )
    return ""


def _trains_parameters(mod: torch.nn.Module) -> bool:
    """Whether a module under ``mod`` (itself included) is in training mode and holds a
    parameter that requires grad."""
    return any(
        m.training and any(p is not None and p.requires_grad for p in m._parameters.values())
        for m in mod.modules()
    )


def _live_storages(
    gm: torch.fx.GraphModule, values: dict[Node, Any], needed: set[Node], keys: set[Any], paths: ModulePaths
) -> tuple[set[Any], dict[Any, set[str]]]:
    """Of the storages ``keys``, those that stay referenced whatever is folded (non-constant or
    needed get_attr nodes, called modules, get_attr of submodules), and the qualified names of
    each (every parameter, buffer and tensor attribute under every path of the module tree).

    Only the storage keys of ``keys`` are built (``_storage_key`` of a tensor whose storage
    address is among theirs); each tensor and each module's own tensors are looked at once."""
    ptrs = {k[3] for k in keys if k[0] == "storage"}
    ids = {k[1] for k in keys if k[0] == "tensor"}

    def key_of(t: torch.Tensor) -> Any:
        """``_storage_key(t)`` when it is in ``keys``, else None (built only for a candidate)."""
        try:
            ptr = t.untyped_storage().data_ptr()
        except Exception:
            ptr = 0
        if ptr:  # _storage_key gives ("storage", device type, device index, ptr)
            if ptr not in ptrs:
                return None
        elif id(t) not in ids:  # _storage_key gives ("tensor", id(t))
            return None
        k = _storage_key(t)
        return k if k in keys else None

    own_hits: dict[int, tuple[torch.nn.Module, list[tuple[str, Any]]]] = {}
    tensor = torch.Tensor
    is_tensor = tensor.__instancecheck__  # isinstance(v, torch.Tensor), callable from filter()

    def own(m: torch.nn.Module) -> list[tuple[str, Any]]:
        """(attribute name, key) of ``m``'s own parameters, buffers and tensor attributes
        whose storage is in ``keys`` (memoized per module)."""
        entry = own_hits.get(id(m))
        if entry is not None:
            return entry[1]
        found: list[tuple[str, Any]] = []
        for registry in (m._parameters, m._buffers):
            for name, v in registry.items():
                if v is not None:
                    k = key_of(v)
                    if k is not None:
                        found.append((name, k))
        d = m.__dict__
        if next(filter(is_tensor, d.values()), None) is not None:  # rare: look for them in C first
            for name, v in d.items():
                if isinstance(v, tensor):
                    k = key_of(v)
                    if k is not None:
                        found.append((name, k))
        own_hits[id(m)] = (m, found)  # the module is held, so its id stays its own
        return found

    live: set[Any] = set()
    walked: set[int] = set()  # modules whose whole subtree is in live already

    def add_module(mod: torch.nn.Module) -> None:
        # the tensors of mod.modules(): each module reachable through _modules, once
        stack = [mod]
        while stack:
            m = stack.pop()
            if id(m) in walked:
                continue
            walked.add(id(m))
            live.update(k for _, k in own(m))
            stack.extend(c for c in m._modules.values() if c is not None)

    graph = gm.graph
    for node in graph.find_nodes(op="get_attr"):
        if node not in values or node in needed:
            obj = _attr(gm, node.target, paths)
            if isinstance(obj, torch.Tensor):
                k = key_of(obj)
                if k is not None:
                    live.add(k)
            elif isinstance(obj, torch.nn.Module):
                add_module(obj)
    for node in graph.find_nodes(op="call_module"):
        mod = _attr(gm, node.target, paths)
        if isinstance(mod, torch.nn.Module):
            add_module(mod)

    # names: the walk of named_modules(remove_duplicate=False) (each path of the tree)
    names: dict[Any, set[str]] = {}
    on_path: set[int] = set()
    stack: list[Any] = [("", gm)]
    while stack:
        prefix, m = stack.pop()
        if prefix is None:  # exit marker
            on_path.discard(id(m))
            continue
        if id(m) in on_path:  # a module inside itself: named_modules recurses forever
            _named_tensors(gm)  # raises RecursionError as it did
            raise RecursionError(f"module {prefix!r} contains itself")  # pragma: no cover
        p = prefix + "." if prefix else ""
        for name, k in own(m):
            names.setdefault(k, set()).add(p + name)
        children = m._modules
        if children:
            on_path.add(id(m))
            stack.append((None, m))
            stack.extend((p + name, c) for name, c in children.items() if c is not None)
    return live, names


def _attr(gm: torch.nn.Module, target: Any, paths: ModulePaths | None = None) -> Any:
    """``getattr`` along the path ``target`` (None when an element is missing)."""
    if paths is not None and isinstance(target, str):
        obj = paths.attr(target)  # through the module registries: dict lookups
        if obj is not MISSING:
            return obj
    obj = gm
    try:
        for part in str(target).split("."):
            obj = getattr(obj, part)
    except AttributeError:
        return None
    return obj


#: Tensor methods, attributes and operators whose result depends only on a tensor's metadata
#: (shape, strides, dtype, device), never on its values: reading them from a parameter that is
#: being trained gives the same answer after every optimizer step.
_METADATA_METHODS = frozenset(
    {
        "size", "dim", "ndimension", "numel", "nelement", "stride", "element_size",
        "is_floating_point", "is_complex", "is_contiguous", "get_device",
    }
)
_METADATA_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "layout", "is_cuda", "is_sparse", "is_meta"})
_METADATA_FUNCTIONS = frozenset(
    {
        torch.numel,
        torch.is_floating_point,
        torch.is_complex,
        torch.ops.aten.sym_size.int,
        torch.ops.aten.sym_stride.int,
        torch.ops.aten.sym_numel.default,
        torch.ops.aten.dim.default,
    }
)


def _reads_metadata_only(node: Node, trainable: dict[Node, torch.Tensor]) -> bool:
    """Whether ``node`` asks only for metadata of a trainable tensor: its first argument is
    that tensor, no other argument is one, and the call is a metadata query (above)."""
    args = node.args
    if not args or args[0] not in trainable or any(i in trainable for i in node._input_nodes if i is not args[0]):
        return False
    if node.op == "call_method":
        return node.target in _METADATA_METHODS
    if node.op != "call_function":
        return False
    target = node.target
    if target is getattr:
        return len(args) == 2 and args[1] in _METADATA_ATTRIBUTES
    try:
        return target in _METADATA_FUNCTIONS
    except TypeError:  # unhashable target
        return False


def _run(gm: torch.fx.GraphModule, node: Node, values: dict[Node, Any]) -> Any:
    args = torch.fx.node.map_arg(node.args, values.__getitem__)
    kwargs = torch.fx.node.map_arg(node.kwargs, values.__getitem__)
    if node.op == "call_function":
        return node.target(*args, **kwargs)  # type: ignore[operator]
    if node.op == "call_method":
        self_obj, *rest = args
        return getattr(self_obj, node.target)(*rest, **kwargs)  # type: ignore[arg-type]
    return gm.get_submodule(node.target)(*args, **kwargs)  # type: ignore[arg-type]


def _nbytes(v: Any) -> int:
    return v.numel() * v.element_size() if isinstance(v, torch.Tensor) else 0


def _storage_bytes(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().nbytes())
    except Exception:
        return t.numel() * t.element_size()


def _named_tensors(gm: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """(qualified name, tensor) for every parameter, buffer and tensor attribute under every
    path of the module tree (shared tensors under each of their names), in one walk."""
    out: list[tuple[str, torch.Tensor]] = []
    for prefix, m in gm.named_modules(remove_duplicate=False):
        p = prefix + "." if prefix else ""
        out += [(p + k, v) for k, v in m._parameters.items() if v is not None]
        out += [(p + k, v) for k, v in m._buffers.items() if v is not None]
        out += [(p + k, v) for k, v in m.__dict__.items() if isinstance(v, torch.Tensor)]
    return out
