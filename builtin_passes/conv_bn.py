"""``fuse_conv_bn``: fold an eval-mode BatchNorm into the convolution that feeds it."""

from __future__ import annotations

import copy
import operator
from collections import OrderedDict
from typing import Any, Callable

import torch
import torch.fx
from pydantic import Field
from torch.fx.node import Node
from torch.nn.utils.fusion import fuse_conv_bn_weights

from fxpasses import ERASE, NodePass, PassContext, PassOptions, Replace, on
from fxpasses._modpath import MISSING, ModulePaths
from fxpasses.context import tensor_info
from fxpasses.effects import EffectAnalysis, module_hooks_reason
from fxpasses.ops import FAMILIES, callable_op_name

from ._facts import arg, erase_dead, is_torch_op, leaf_subclass_reason

__all__ = ["FuseConvBN"]

_CONV_MODULES = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
_BN_MODULES = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d, torch.nn.SyncBatchNorm)

# Argument layouts of the functional batch norms: (parameter names in order, returns a tuple).
# ``training`` absent from the names means the op is eval-only.
_ATEN_ORDER = ("input", "weight", "bias", "running_mean", "running_var", "training", "momentum", "eps")
_NO_TRAINING = ("input", "weight", "bias", "running_mean", "running_var", "momentum", "eps")
_F_ORDER = ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps")
_BN_LAYOUTS: dict[str, tuple[tuple[str, ...], bool]] = {
    "batch_norm": (_ATEN_ORDER, False),  # torch.batch_norm, aten.batch_norm (F.batch_norm below)
    "native_batch_norm": (_ATEN_ORDER, True),
    "_native_batch_norm_legit": (_ATEN_ORDER, True),
    "_native_batch_norm_legit_no_training": (_NO_TRAINING, True),
    "_batch_norm_no_update": (_NO_TRAINING, True),
}
_BN_FAMILY = FAMILIES["batch_norm"]
_BN_DEFAULTS = {"weight": None, "bias": None, "training": False, "momentum": 0.1, "eps": 1e-5}


class FuseConvBN(NodePass):
    """Fold eval-mode BatchNorm into the preceding Conv1d/2d/3d (one conv with a bias, no BN).

    Matches a convolution whose only user is a BatchNorm in eval mode (running statistics),
    in every dialect:

    - ``symbolic_trace``: ``call_module`` ``nn.Conv1d/2d/3d`` -> ``nn.BatchNorm1d/2d/3d``
      (or ``SyncBatchNorm``). The fused conv is a new module (a copy of the conv's
      configuration, with the folded weight and bias) added to the graph module,
      which the conv node then calls (``ctx.set_target``; the BN node is erased); the
      original conv and BN modules are never modified, so a conv called from several
      sites keeps working at its other sites, and a module shared with the user's model is
      untouched. A conv whose weight (or bias) a ``torch.nn.utils.parametrize``
      parametrization computes (``Parametrized<Conv>``: ``weight_norm``, ``spectral_norm``)
      fuses into a plain conv of its class holding the value the parametrization gives now
      (requiring grad when the parametrization's tensors do); another conv subclass called as
      a leaf (a custom tracer's) is skipped with the reason, its forward may differ. Modules
      that symbolic_trace traces through are matched too: a BatchNorm
      subclass whose forward calls ``F.batch_norm`` on its own statistics (``get_attr``
      nodes; timm's ``BatchNormAct2d``) after an ``nn.ConvNd`` module fuses the same way,
      and a conv subclass calling ``F.conv2d`` on its own weight before a BatchNorm module
      fuses as in ``torch.export`` (new buffers, one functional conv). A conv or BatchNorm
      module with hooks (forward, forward pre-, backward or backward pre-hooks, its own or
      global) is skipped with the reason: the fused call would not run them as they ran
      (a forward hook would see the fused output, a BN's backward hook would not run).
      Users of the conv
      output that read only its metadata (``x.ndim``, ``x.shape``, ``x.size()``, as timm
      asserts on) do not stop the fusion of a module conv: the fused output has the same.
    - ``torch.export``: ``aten.conv1d/2d/3d`` or ``aten.convolution`` whose weights are
      ``get_attr``, followed by ``aten.batch_norm(training=False)``, or after
      ``run_decompositions()`` by ``_native_batch_norm_legit_no_training`` + ``getitem(0)``.
      The folded weight and bias are stored as new buffers (``ctx.add_constant``) and the
      result is one convolution with a bias.
    - TorchDynamo: ``torch.conv2d``/``F.conv2d`` + ``F.batch_norm(training=False)`` whose
      parameters and statistics are *placeholders* (graph inputs): their values are not known
      when the pass runs, so by default the pair is **left unfused**, with the reason in the
      run report (``ctx.skip``) and the counter ``not_constant``. Folding them would mean
      emitting the fold as graph code that runs on every call (on the weights, a dozen extra
      nodes per pair); on the bundled example CNN under ``torch.compile(backend="fxpasses")``
      that made the graph grow from 33 to 60 nodes and each call slower, with ``then=eager``
      and with ``then=inductor``, and ``fold_constants`` cannot fold it away (its inputs are
      graph inputs). The same holds for torch-level graphs whose conv weights or BN
      parameters/statistics are anything but ``get_attr`` constants (say, computed in the
      graph), and for ATen graphs (always skipped, the option below does not apply there).
      For inference, ``torch.compile(backend="fxpasses", options={"freeze": True})`` makes
      the parameters and buffers ``get_attr`` constants before the pipeline runs, and the
      pairs fuse as constants (see :mod:`fxpasses.backend`).

      With the option ``fold_in_graph=true`` such pairs are fused anyway, the fold being
      emitted as graph code on the (small) weight tensors:
      ``w' = (w * (gamma * rsqrt(var + eps)).reshape(-1, 1, ...)).type_as(w)`` and
      ``b' = ((b - mean) * rsqrt(var + eps) * gamma + beta).type_as(b)`` feeding one conv.
      This removes the activation-sized normalisation at the price of that weight arithmetic
      on every call, and stays equal to the original within float rounding whatever values
      the placeholders get: worth it only when activations are large next to the weights (the
      example CNN, ``then=eager``, one thread: 7% slower at batch 1, 6% faster at batch 32).

    Math (``torch.nn.utils.fusion.fuse_conv_bn_weights``, used for the constant cases):
    ``W' = W * gamma / sqrt(var + eps)`` per output channel and
    ``b' = (b - mean) * gamma / sqrt(var + eps) + beta`` (``b = 0`` for a conv without bias).

    Left unchanged, with the reason in the run report (``ctx.skip``): BN in training mode or
    without running statistics (``track_running_stats=False``), a conv output with other users
    (the unnormalised value is still needed), a BN module called at several sites (issue 5,
    case 9; in a functional graph: batch norms reading the very same weight, bias and
    statistics; BNs that merely share a tensor, such as a tied weight, are separate and fuse),
    transposed convolutions, conv weights or BN parameters/statistics that are
    not constants (graph inputs such as TorchDynamo's parameters, or values computed in the
    graph; torch-level graphs fold them in graph code with ``fold_in_graph=true``), batch
    norms whose saved mean/invstd outputs are used, and a BN whose ``eps`` is 0 (below the
    smallest normal float32) with a channel whose ``running_var + eps`` is 0, or whose
    statistics are known only when the graph runs (the fused weight would be infinite, and
    the conv would sum infinities into NaN where the BN gives each element +-inf).

    Counters: ``fused``; ``not_constant`` (pairs left unfused because their weights or
    statistics are not constants, each also a ``skipped`` entry). The orphaned original
    modules / attributes stay in the module until ``eliminate_dead_code`` removes them (this
    pass orders itself before it).

    Options: ``fold_in_graph: bool = False`` (see TorchDynamo above).

    Raises: nothing of its own; a pair it cannot fold exactly is skipped, with the reason.
    """

    name = "fuse_conv_bn"
    writes_tensors = False  # rewrites the graph; new tensors only (no rollback guard needed)
    journal_edits = True  # edits only through torch.fx's editing methods and the context
    before = ("eliminate_dead_code",)

    class Options(PassOptions):
        fold_in_graph: bool = Field(
            False,
            description="conv weights or BatchNorm parameters/statistics that are not get_attr constants "
            "(graph inputs, e.g. TorchDynamo's parameters) at torch level: false skips the pair (and "
            "says why); true fuses it, emitting the fold as graph code that runs on every call",
        )

    def setup(self, gm: torch.fx.GraphModule, ctx: PassContext) -> None:
        self._dead: list[Node] = []
        self._module_refs: dict[int, int] | None = None
        self._effects = EffectAnalysis(gm)  # swept on first use
        self._folds = _Folds()
        self._graph = gm.graph
        self._attr_nodes: dict[Any, list[Node]] | None = None  # get_attr nodes by target, on first use

    def _get_attrs_of(self, target: Any) -> list[Node]:
        """The graph's ``get_attr`` nodes reading ``target``. torch.fx indexes ``get_attr``
        nodes by op only (``find_nodes(op="get_attr", target=t)`` scans them all), so asking
        once per batch norm was quadratic: 86% of a 50k-node exported conv net's pipeline
        (a big-graph sweep). They are grouped by target once; the pass adds ``get_attr``
        nodes only of new attributes (``ctx.add_constant``), so a group stays whole, less the
        nodes erased since."""
        if self._attr_nodes is None:
            by_target: dict[Any, list[Node]] = {}
            for n in self._graph.find_nodes(op="get_attr"):
                try:
                    by_target.setdefault(n.target, []).append(n)
                except TypeError:  # an unhashable target (lint refuses it): asked for by scan below
                    pass
            self._attr_nodes = by_target
        try:
            group = self._attr_nodes.get(target, ())
        except TypeError:
            return self._graph.find_nodes(op="get_attr", target=target)
        return [n for n in group if not n._erased and n.op == "get_attr" and n.target == target]

    def _write_problem(self, conv_node: Node, bn_node: Node, frozen: list[Node]) -> str | None:
        """Why the fused convolution would not compute what conv + BN computed, because of
        in-place writes: it runs where the BN ran, so nothing between the two may write what
        it reads (the conv's inputs, the BN's tensors); and values folded now (``frozen``:
        ``get_attr`` nodes, or ``call_module`` nodes for their module's state) are frozen, so
        the graph may not write them at all (a later call would see the new values)."""
        fx = self._effects
        for n in frozen:
            if n.op == "call_module":
                written = fx.reads_written_state(n)
            else:  # through a get_attr node, or by a module updating its own state
                written = n.target in fx.mutated_attributes() or fx.is_written(n)
            if written:
                what = f"module {n.target!r}" if n.op == "call_module" else repr(n.target)
                own = fx.effects(n) if n.op == "call_module" else None  # the module's own call?
                why = f" ({own.reason})" if own is not None and own.state_writes else ""
                return f"the graph may write {what} in place{why}, so its current values cannot be folded"
        reads = [*conv_node.all_input_nodes, *(i for i in bn_node.all_input_nodes if i is not conv_node)]
        # module state they read: the called modules' tensors, get_attr targets
        state = [f"{n.target}." for n in (conv_node, bn_node) if n.op == "call_module"]
        state += [str(r.target) for r in reads if r.op == "get_attr"]
        n = conv_node.next
        while n is not bn_node and n.op != "root":
            eff = fx.effects(n)
            writes_read = any(fx.may_alias(w, r) for w in eff.writes for r in reads)
            writes_state = any(_overlaps(w, q) for w in eff.state_writes for q in state)
            if writes_read or writes_state:
                return f"%{n.name}, between the conv and the batch norm, may write what they read"
            n = n.next
        return None

    def finish(self, gm: torch.fx.GraphModule, ctx: PassContext) -> None:
        self._folds.flush()
        erase_dead(ctx.graph, self._dead)

    @on("batch_norm")
    def fuse(self, node: Node, ctx: PassContext) -> Any:
        if node.op == "call_module":
            return self._fuse_modules(node, ctx)
        if node.op == "call_function":
            return self._fuse_functional(node, ctx)
        return None

    # ------------------------------------------------------------------ symbolic_trace

    def _fuse_modules(self, node: Node, ctx: PassContext) -> Any:
        bn = ctx.module(node)
        if type(bn) not in _BN_MODULES or len(node.args) != 1 or node.kwargs:
            return None
        conv_node = node.args[0]
        if not isinstance(conv_node, Node):
            return None
        if conv_node.op == "call_function":  # a conv module traced through (F.conv2d on its weight)
            conv_name = _conv_op_name(conv_node)
            if conv_name is None:
                return None
            return self._fuse_functional_conv_module_bn(node, bn, conv_node, conv_name, ctx)
        if conv_node.op != "call_module":
            return None
        conv = ctx.module(conv_node)
        if type(conv) not in _CONV_MODULES and _parametrized_conv(conv) is None:
            if isinstance(conv, _CONV_MODULES):  # a leaf subclass: its forward may be another
                return ctx.skip(node, leaf_subclass_reason("conv", conv_node.target, conv, _CONV_MODULES))
            return None
        reason = _module_bn_problem(bn)
        if reason is not None:
            return ctx.skip(node, reason)
        for n, mod in ((conv_node, conv), (node, bn)):  # the fused call would run neither's hooks as they ran
            hooks = module_hooks_reason(mod)
            if hooks is not None:
                return ctx.skip(node, f"{n.target}: {hooks}")
        if _other_users(conv_node, node):
            return ctx.skip(node, f"the output of conv %{conv_node.name} has other users")
        if self._refs(ctx).get(id(bn), 0) > 1:
            return ctx.skip(node, f"BatchNorm module {node.target!r} is used at more than one site")
        if conv.out_channels != bn.num_features:
            return ctx.skip(node, f"conv has {conv.out_channels} output channels, BatchNorm {bn.num_features}")
        problem = self._write_problem(conv_node, node, [conv_node, node]) or _zero_variance_problem(bn.running_var, bn.eps)
        if problem is not None:
            return ctx.skip(node, problem)
        stats = (bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
        return self._into_conv_module(node, conv_node, conv, stats, ctx)

    def _into_conv_module(
        self, node: Node, conv_node: Node, conv: torch.nn.Module, stats: tuple[Any, ...], ctx: PassContext
    ) -> Any:
        """Fuse the batch norm ``node`` into the ``call_module`` conv that feeds it: a new conv
        module (a copy of ``conv`` with the folded weight and bias) that ``conv_node`` calls
        from now on. ``stats``: the batch norm's (running_mean, running_var, eps, weight, bias)."""
        mean, var, eps, gamma, beta = stats
        fused = _copy_conv(conv)
        w, b = conv.weight, conv.bias
        plain = _parametrized_conv(conv)
        if plain is not None:  # weight (or bias) computed by a parametrization: fold its value
            requires_grad = _requires_grad(*conv.parametrizations.parameters(), w, b, gamma, beta)
            with torch.no_grad():
                w, b = conv.weight, conv.bias
            fused.__class__ = plain  # a plain conv, without the parametrization
            del fused._modules["parametrizations"]
        else:
            requires_grad = _requires_grad(w, b, gamma, beta)
        fused.weight, fused.bias = self._folds.add(w, b, mean, var, eps, gamma, beta, requires_grad=requires_grad)
        name = ctx.add_submodule(fused, f"{conv_node.target}_fused")
        # the conv node calls the fused module from now on (its only user is the BN, whose
        # uses it takes over, or users reading only its shape/dtype, the same after fusion):
        # no new node, no erased one. set_target comes first: its journal record holds the
        # meta that _copy_value_meta then changes in place
        ctx.set_target(conv_node, name)
        _copy_value_meta(node, conv_node)
        ctx.count("fused")
        return Replace(conv_node)

    def _fuse_functional_conv_module_bn(
        self, node: Node, bn: torch.nn.Module, conv_node: Node, conv_name: str, ctx: PassContext
    ) -> Any:
        """symbolic_trace of a conv module that is traced through (a Conv2d subclass whose
        forward calls ``F.conv2d`` on its own ``get_attr`` weight, such as a "same"-padding
        conv) followed by a BatchNorm module: the folded weight and bias become buffers and
        the result is one functional convolution, as in the ``torch.export`` form."""
        if conv_name in ("convolution", "_convolution") and arg(conv_node, 6, "transposed", True) is not False:
            return ctx.skip(node, "transposed convolution")
        reason = _module_bn_problem(bn)
        if reason is None:
            hooks = module_hooks_reason(bn)  # the fused call would not run them
            reason = None if hooks is None else f"{node.target}: {hooks}"
        if reason is not None:
            return ctx.skip(node, reason)
        if len(conv_node.users) != 1:
            return ctx.skip(node, f"the output of conv %{conv_node.name} has other users")
        if self._refs(ctx).get(id(bn), 0) > 1:
            return ctx.skip(node, f"BatchNorm module {node.target!r} is used at more than one site")
        w, b = arg(conv_node, 1, "weight"), arg(conv_node, 2, "bias", None)
        loose = [v for v in (w, b) if v is not None and not (isinstance(v, Node) and v.op == "get_attr")]
        if loose:
            ctx.count("not_constant")
            named = f" (%{loose[0].name})" if isinstance(loose[0], Node) else ""
            return ctx.skip(node, f"conv weights{named} are not constants (get_attr): their value is not known")
        frozen = [v for v in (w, b) if isinstance(v, Node)]
        problem = self._write_problem(conv_node, node, [*frozen, node])
        if problem is not None:
            return ctx.skip(node, problem)
        values = {"w": ctx.attr(w.target), "b": ctx.attr(b.target) if b is not None else None}
        values.update(weight=bn.weight, bias=bn.bias, running_mean=bn.running_mean, running_var=bn.running_var)
        problem = _zero_variance_problem(bn.running_var, bn.eps)
        if problem is not None:
            return ctx.skip(node, problem)
        new_w, new_b = self._store_fold(values, bn.eps, w.target, ctx)
        if new_w is None:
            return ctx.skip(node, "conv weight and BatchNorm statistics do not have matching shapes")
        self._dead.extend(frozen)
        return Replace(self._new_conv(node, conv_node, new_w, new_b, ctx))

    def _new_conv(self, node: Node, conv_node: Node, new_w: Any, new_b: Any, ctx: PassContext) -> Any:
        """A copy of the functional conv ``conv_node`` that takes the folded ``new_w``,
        ``new_b``, carrying the value metadata of the batch norm ``node`` it replaces."""
        new_args = list(conv_node.args)
        new_kwargs = dict(conv_node.kwargs)
        _set_arg(new_args, new_kwargs, 1, "weight", new_w)
        _set_arg(new_args, new_kwargs, 2, "bias", new_b)
        new = ctx.call_function(conv_node.target, tuple(new_args), new_kwargs)
        self._dead.append(conv_node)
        ctx.count("fused")
        _copy_value_meta(node, new)
        return new

    def _refs(self, ctx: PassContext) -> dict[int, int]:
        """id(module) -> number of nodes that call it or read something inside it."""
        if self._module_refs is None:
            refs: dict[int, int] = {}
            gm = ctx.gm
            # path -> (the object there, ids of the modules along it): nodes share prefixes
            # ("layers.7.conv", "layers.7.bn", ...), each is resolved once
            walked: dict[str, tuple[Any, tuple[int, ...]]] = {}
            paths = ModulePaths(gm)  # getattr's answers through the registries (dict lookups)

            def walk(path: str) -> tuple[Any, tuple[int, ...]]:
                found = walked.get(path)
                if found is None:
                    head, dot, part = path.rpartition(".")
                    obj, ids = walk(head) if dot else (gm, ())
                    found_fast = paths.member(obj, part)
                    obj = getattr(obj, part, None) if found_fast is MISSING else found_fast
                    if isinstance(obj, torch.nn.Module):
                        ids = (*ids, id(obj))
                    found = walked[path] = (obj, ids)
                return found

            try:
                for n in ctx.graph.nodes:
                    if n.op != "call_module" and n.op != "get_attr":
                        continue
                    for i in walk(n.target)[1]:  # type: ignore[arg-type]
                        refs[i] = refs.get(i, 0) + 1
            finally:
                # a recursive closure is a reference cycle (walk -> its cell -> walk) holding
                # ``walked``: left to the cyclic collector otherwise (tests/test_garbage.py)
                del walk
            self._module_refs = refs
        return self._module_refs

    # ------------------------------------------------------------------ call_function forms

    def _fuse_functional(self, node: Node, ctx: PassContext) -> Any:
        bn = _bind_bn(node)
        if bn is None:
            return None
        conv_node = bn["input"]
        if not isinstance(conv_node, Node):
            return None
        if conv_node.op == "call_module":  # a BatchNorm module traced through (F.batch_norm)
            conv = ctx.module(conv_node)
            if type(conv) not in _CONV_MODULES:
                return None
            hooks = module_hooks_reason(conv)  # its hooks would see the fused output
            if hooks is not None:
                return ctx.skip(node, f"{conv_node.target}: {hooks}")
            conv_name = None
        elif conv_node.op == "call_function":
            conv_name = _conv_op_name(conv_node)
            if conv_name is None:
                return None
            if conv_name in ("convolution", "_convolution") and arg(conv_node, 6, "transposed", True) is not False:
                return ctx.skip(node, "transposed convolution")
        else:
            return None
        if bn["training"] is not False:
            if bn["running_mean"] is None:
                reason = "BatchNorm has no running statistics (track_running_stats=False): it uses batch statistics"
            else:
                reason = "BatchNorm is in training mode (normalises with batch statistics)"
            return ctx.skip(node, reason)
        if bn["running_mean"] is None or bn["running_var"] is None:
            return ctx.skip(node, "BatchNorm has no running statistics")
        eps = bn["eps"]
        if not isinstance(eps, (int, float)) or isinstance(eps, bool):
            return ctx.skip(node, "BatchNorm eps is not a constant number")
        # a conv module node stays where it is (it calls the fused module): users reading only
        # its shape/dtype may stay; a functional conv is replaced by a new node at the BN
        if _other_users(conv_node, node) if conv_name is None else len(conv_node.users) != 1:
            return ctx.skip(node, f"the output of conv %{conv_node.name} has other users")
        getitems = list(node.users) if bn["tuple"] else []
        if bn["tuple"] and not getitems:
            return None
        if any(u.target is not operator.getitem or u.args[1] != 0 for u in getitems):
            return ctx.skip(node, "the saved mean/invstd outputs of the batch norm are used")
        shared = _shared_with(node, bn, self._get_attrs_of)
        if shared is not None:
            return ctx.skip(node, f"BatchNorm statistics are shared with batch norm %{shared.name}")
        if conv_name is None:
            fused = self._module_conv_functional_bn(node, bn, conv_node, conv, eps, ctx)
        else:
            fused = self._functional_pair(node, bn, conv_node, conv_name, eps, ctx)
        if not isinstance(fused, Node):
            return fused  # a skip, or None
        if not bn["tuple"]:
            return Replace(fused)
        for g in getitems:
            _copy_value_meta(g, fused)
            ctx.replace_uses(g, fused)
            ctx.graph.erase_node(g)
        return ERASE

    def _module_conv_functional_bn(
        self, node: Node, bn: dict[str, Any], conv_node: Node, conv: torch.nn.Module, eps: float, ctx: PassContext
    ) -> Any:
        """symbolic_trace of a BatchNorm module that is traced through (a BatchNorm2d subclass
        whose forward calls ``F.batch_norm`` on its own statistics, such as timm's
        ``BatchNormAct2d``) after an ``nn.ConvNd`` module: fused as the module pair is, the
        statistics read from their ``get_attr`` nodes. Returns the conv node, or a skip."""
        stats = [bn[k] for k in ("running_mean", "running_var", "weight", "bias")]
        loose = [v for v in stats if v is not None and not (isinstance(v, Node) and v.op == "get_attr")]
        if loose:
            ctx.count("not_constant")
            named = f" (%{loose[0].name})" if isinstance(loose[0], Node) else ""
            return ctx.skip(
                node, f"BatchNorm parameters/statistics{named} are not constants (get_attr): their value is not known"
            )
        frozen = [v for v in stats if isinstance(v, Node)]
        problem = self._write_problem(conv_node, node, [conv_node, *frozen])
        if problem is not None:
            return ctx.skip(node, problem)
        mean, var, gamma, beta = (ctx.attr(v.target) if isinstance(v, Node) else None for v in stats)
        tensors = [t for t in (mean, var, gamma, beta) if t is not None]
        if not all(isinstance(t, torch.Tensor) for t in tensors) or any(t.shape != (conv.out_channels,) for t in tensors):
            return ctx.skip(
                node, f"conv has {conv.out_channels} output channels, BatchNorm statistics of shape {tuple(mean.shape)}"
            )
        problem = _zero_variance_problem(var, eps)
        if problem is not None:
            return ctx.skip(node, problem)
        self._dead.extend(frozen)
        self._into_conv_module(node, conv_node, conv, (mean, var, eps, gamma, beta), ctx)
        return conv_node

    def _functional_pair(
        self, node: Node, bn: dict[str, Any], conv_node: Node, conv_name: str, eps: float, ctx: PassContext
    ) -> Any:
        """A functional conv + functional batch norm (torch.export, TorchDynamo, functional
        code under symbolic_trace). Returns the new conv node, or a skip."""
        w, b = arg(conv_node, 1, "weight"), arg(conv_node, 2, "bias", None)
        params = {"w": w, "b": b, **{k: bn[k] for k in ("weight", "bias", "running_mean", "running_var")}}
        constant = all(v is None or (isinstance(v, Node) and v.op == "get_attr") for v in params.values())
        frozen = [v for v in params.values() if isinstance(v, Node)] if constant else []
        problem = self._write_problem(conv_node, node, frozen)
        if problem is not None:
            return ctx.skip(node, problem)
        if constant:
            values = {k: (ctx.attr(v.target) if isinstance(v, Node) else None) for k, v in params.items()}
            problem = _zero_variance_problem(values["running_var"], eps)
            if problem is not None:
                return ctx.skip(node, problem)
            new_w, new_b = self._store_fold(values, eps, w.target, ctx)
            if new_w is None:
                return ctx.skip(node, "conv weight and BatchNorm statistics do not have matching shapes")
            self._dead.extend(frozen)
        elif isinstance(node.target, torch._ops.OpOverload):
            ctx.count("not_constant")
            return ctx.skip(node, "conv weights or BatchNorm statistics are not constants (get_attr) in an ATen graph")
        elif not self.options.fold_in_graph:
            ctx.count("not_constant")
            loose = [v for v in params.values() if isinstance(v, Node) and v.op != "get_attr"]
            if any(v.op == "placeholder" for v in loose):
                what = "graph inputs (placeholders)"
            else:  # computed in the graph, or a literal in the node's arguments
                what = "computed in the graph" if loose else "not get_attr nodes"
            named = ""
            if loose:
                more = f" and {len(loose) - 1} more" if len(loose) > 1 else ""
                named = f" (%{loose[0].name}{more})"
            return ctx.skip(
                node,
                f"conv weights or BatchNorm parameters/statistics{named} are {what}, not constants: "
                "fusing would put the fold in the graph, run on every call (option fold_in_graph=true)",
            )
        else:
            ndim = _weight_ndim(conv_name, w)
            if ndim is None:
                return ctx.skip(node, "the rank of the conv weight is unknown")
            problem = _zero_variance_problem(None, eps)  # (the statistics are known when the graph runs)
            if problem is not None:
                return ctx.skip(node, problem)
            w_info, mean_info = (tensor_info(v) if isinstance(v, Node) else None for v in (w, bn["running_mean"]))
            if w_info and mean_info and tuple(mean_info[0]) != (w_info[0][0],):
                return ctx.skip(node, "conv weight and BatchNorm statistics do not have matching shapes")
            new_w, new_b = _emit_fold(params, eps, ndim, ctx)
        return self._new_conv(node, conv_node, new_w, new_b, ctx)

    def _store_fold(self, values: dict[str, Any], eps: float, weight_name: str, ctx: PassContext) -> tuple[Any, Any]:
        """Fold constant tensors (``values``: ``w``, ``b`` of the conv, ``weight``, ``bias``,
        ``running_mean``, ``running_var`` of the batch norm, None where absent) with
        ``fuse_conv_bn_weights``; store the results as buffers named after the conv weight
        ``weight_name``. Returns their ``get_attr`` nodes, or (None, None) when the values are
        not tensors of matching shapes."""
        w, rm, rv = values["w"], values["running_mean"], values["running_var"]
        if not all(isinstance(t, torch.Tensor) for t in (w, rm, rv)) or rm.shape != (w.shape[0],) or rv.shape != rm.shape:
            return None, None
        # parameters that require grad in, parameters that require grad out: the outputs keep
        # requires_grad and gradients still reach the inputs (a plain buffer cut them off)
        trainable = _requires_grad(w, values["b"], values["weight"], values["bias"], rm, rv)
        fw, fb = self._folds.add(
            w, values["b"], rm, rv, eps, values["weight"], values["bias"], requires_grad=trainable or None
        )
        prefix = weight_name.removesuffix(".weight")
        return (
            ctx.add_constant(fw, f"{prefix}_fused_weight"),
            ctx.add_constant(fb, f"{prefix}_fused_bias"),
        )


def _conv_op_name(node: Node) -> str | None:
    """The convolution a ``call_function`` node calls (conv1d/2d/3d, convolution,
    _convolution), or None."""
    name = callable_op_name(node.target) if is_torch_op(node.target) else None
    return name if name in ("conv1d", "conv2d", "conv3d", "convolution", "_convolution") else None


#: reads of a tensor's metadata only: the same whether it is the conv's or the fused conv's
#: output (same shape, dtype, device), so such users do not stop a fusion that keeps the node
_METADATA_ATTRS = frozenset({"ndim", "shape", "dtype", "device", "layout", "is_cuda"})
_METADATA_METHODS = frozenset({"size", "dim", "ndimension", "numel", "nelement"})


def _other_users(conv_node: Node, bn_node: Node) -> list[Node]:
    """Users of ``conv_node`` besides ``bn_node`` that read its values (not only its
    metadata: ``x.ndim``, ``x.shape``, ``x.size()``, ... as timm's layers assert on)."""
    return [
        u
        for u in conv_node.users
        if u is not bn_node
        and not (u.op == "call_function" and u.target is getattr and len(u.args) == 2 and u.args[1] in _METADATA_ATTRS)
        and not (u.op == "call_method" and u.target in _METADATA_METHODS)
    ]


def _module_bn_problem(bn: torch.nn.Module) -> str | None:
    """Why a BatchNorm module cannot be folded (training mode, no running statistics)."""
    if bn.training:
        return "BatchNorm is in training mode (normalises with batch statistics)"
    if not bn.track_running_stats or bn.running_mean is None or bn.running_var is None:
        return "BatchNorm has no running statistics (track_running_stats=False): it uses batch statistics"
    return None


def _requires_grad(*tensors: Any) -> bool:
    """Whether any of the tensors given (None and non-tensors ignored) requires grad: then so
    do the fused weight and bias computed from them."""
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def _parametrized_conv(conv: torch.nn.Module) -> type | None:
    """The plain conv class (``Conv1d``/``2d``/``3d``) of a conv module whose weight or bias a
    parametrization computes at each call (``torch.nn.utils.parametrize``:
    ``parametrizations.weight_norm``, ``spectral_norm``, ``orthogonal``, or a user's), else
    None. Its fused copy is that plain class, holding the folded value of what the
    parametrization computes now."""
    from torch.nn.utils import parametrize

    if not parametrize.is_parametrized(conv):
        return None
    plain = parametrize.type_before_parametrizations(conv)
    if plain not in _CONV_MODULES or not set(conv.parametrizations.keys()) <= {"weight", "bias"}:
        return None
    return plain


def _copy_conv(conv: torch.nn.Module) -> torch.nn.Module:
    """A new module of ``conv``'s class with its configuration, hooks and training flag, and
    its own (shallow) copies of every container (``_parameters``, ``_buffers``, ``_modules``,
    hook dictionaries, ``_reversed_padding_repeated_twice``); the tensors are shared, for the
    caller to replace. ``copy.deepcopy`` did the same but cloned the weight and walked every
    attribute recursively: three quarters of this pass's time on a 30k-node graph."""
    fused = type(conv).__new__(type(conv))
    state = conv.__dict__.copy()
    for key, value in state.items():
        t = type(value)
        if t is dict or t is list or t is set or (t is OrderedDict and not value.__dict__):
            # what copy.copy gives, without its generic protocol (for an OrderedDict it goes
            # through __reduce_ex__: ~1.7 us each, eleven hook dictionaries a module)
            state[key] = value.copy()
        elif isinstance(value, (dict, list, set)):
            state[key] = copy.copy(value)  # OrderedDict stays an OrderedDict
    fused.__dict__.update(state)
    return fused


def _fused_weights(
    w: torch.Tensor,
    b: torch.Tensor | None,
    mean: torch.Tensor,
    var: torch.Tensor,
    eps: float,
    gamma: torch.Tensor | None,
    beta: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.nn.utils.fusion.fuse_conv_bn_weights`` computed in at least float32, the
    results cast back to the conv weight's dtype (detached).

    In float16/bfloat16 the ``rsqrt(var + eps)`` and the products lose bits: fusing a float16
    conv + BN in float16 was measured here 2 ulp off eager, in float32 then cast 1 ulp.
    """

    def up(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else _up(t)

    with torch.no_grad():
        fw, fb = fuse_conv_bn_weights(up(w), up(b), up(mean), up(var), eps, up(gamma), up(beta))
    return fw.detach().to(w.dtype), fb.detach().to(w.dtype)


#: most bytes of conv weights :class:`_Folds` stacks into one batch (the batch's temporaries
#: are a few times that; a bigger weight is folded alone)
_BATCH_BYTES = 4 << 20


class _Folds:
    """The conv-BN weight folds of one run of the pass, computed in batches by :meth:`flush`.

    :meth:`add` returns the fold's results at once, as new tensors still to be filled
    (``torch.empty_like`` of the conv weight: same shape, dtype, device and strides; the bias
    the shape of the running mean, in the weight's dtype), which the pass stores where they
    go; :meth:`flush` (the pass's ``finish``) fills them. Folds whose inputs agree in shape,
    dtype, device, ``eps`` and absent parts are stacked and computed by one call of each of
    ``fuse_conv_bn_weights``' elementwise ops, at most ``_BATCH_BYTES`` of weights a batch:
    one fold alone is nine small torch ops (about 80 us of dispatch here, for 4x4x3x3
    weights), a batch of 5,263 such folds about 35 us a fold, most of it copying the
    results out. An elementwise float op rounds each element the same way whatever else is
    in its tensor, so the values are bit for bit those of :func:`_fused_weights` on each pair
    (``tests/test_conv_bn.py`` holds that on float16 to float64, with and without bias and
    affine parameters).

    A fold whose inputs include a result still to be filled (a BN after an already fused
    conv: the pass fuses the chain one pair at a time) flushes first; inputs that are not
    plain strided tensors on one device are folded at once.
    """

    __slots__ = ("_groups", "_pending")

    def __init__(self) -> None:
        self._groups: dict[tuple[Any, ...], list[tuple[tuple[Any, ...], torch.Tensor, torch.Tensor]]] = {}
        self._pending: set[int] = set()  # ids of the results still to be filled (they are held)

    def add(
        self,
        w: torch.Tensor,
        b: torch.Tensor | None,
        mean: torch.Tensor,
        var: torch.Tensor,
        eps: float,
        gamma: torch.Tensor | None,
        beta: torch.Tensor | None,
        requires_grad: bool | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The fused weight and bias of one pair (see :func:`_fused_weights` for the
        arguments), filled by the next :meth:`flush`; ``requires_grad``: return them as
        ``nn.Parameter`` objects that do (True) or do not (False), else as plain tensors."""
        inputs = (w, b, mean, var, gamma, beta)
        present = [t for t in inputs if t is not None]
        if self._pending and any(id(t) in self._pending for t in present):
            self.flush()
        key = _batch_key(inputs, eps)
        if key is None:  # folded now, alone (under no_grad, by _fused_weights)
            fw, fb = _fused_weights(w, b, mean, var, eps, gamma, beta)
        else:  # factory functions: no autograd history, whatever the grad mode
            fw = torch.empty_like(w, requires_grad=False)
            fb = torch.empty(mean.shape, dtype=w.dtype, device=w.device, requires_grad=False)
        if requires_grad is not None:
            fw, fb = torch.nn.Parameter(fw, requires_grad), torch.nn.Parameter(fb, requires_grad)
        if key is not None:
            self._groups.setdefault(key, []).append((inputs, fw, fb))
            self._pending.update((id(fw), id(fb)))
        return fw, fb

    def flush(self) -> None:
        """Compute every fold added since the last flush into its result tensors."""
        groups, self._groups = self._groups, {}
        self._pending = set()
        with torch.no_grad():
            for key, items in groups.items():
                eps = key[0]
                per_batch = max(1, _BATCH_BYTES // max(1, items[0][0][0].nbytes))
                for i in range(0, len(items), per_batch):
                    _fold_batch(items[i : i + per_batch], eps)


def _batch_key(inputs: tuple[torch.Tensor | None, ...], eps: float) -> tuple[Any, ...] | None:
    """What folds must share to be stacked into one batch (None: fold this one alone)."""
    w, mean = inputs[0], inputs[2]
    if not isinstance(eps, float) or w.nbytes > _BATCH_BYTES:
        return None
    key: list[Any] = [eps, w.device]
    for t in inputs:
        if t is None:
            key.append(None)
            continue
        if (type(t) is not torch.Tensor and type(t) is not torch.nn.Parameter) or t.layout is not torch.strided:
            return None
        if t.device != w.device or (t is not w and t.shape != mean.shape):
            return None
        key.append((t.dtype, t.shape))
    return tuple(key)


def _fold_batch(items: list[tuple[tuple[Any, ...], torch.Tensor, torch.Tensor]], eps: float) -> None:
    """``fuse_conv_bn_weights``' arithmetic, op for op, on the stacked inputs of ``items``
    (inputs of the same shapes and dtypes), written into each item's result tensors (under
    ``no_grad``, by the caller)."""
    if len(items) == 1:
        (inputs, fw, fb) = items[0]
        w, b, mean, var, gamma, beta = inputs
        one_w, one_b = _fused_weights(w, b, mean, var, eps, gamma, beta)
        fw.copy_(one_w)
        fb.copy_(one_b)
        return

    def stacked(j: int) -> torch.Tensor | None:
        if items[0][0][j] is None:
            return None
        return torch.stack([_up(inputs[j]) for inputs, _, _ in items])  # type: ignore[misc]

    w, b, mean, var, gamma, beta = (stacked(j) for j in range(6))
    assert w is not None and mean is not None and var is not None
    w_dtype = w.dtype
    b_dtype = b.dtype if b is not None else w_dtype
    if b is None:
        b = torch.zeros_like(mean)
    if gamma is None:
        gamma = torch.ones_like(mean)
    if beta is None:
        beta = torch.zeros_like(mean)
    var_rsqrt = torch.rsqrt(var + eps)
    shape = [len(items), -1, 1] + [1] * (w.dim() - 3)
    fused_w = (w * (gamma * var_rsqrt).reshape(shape)).to(dtype=w_dtype)
    fused_b = ((b - mean) * var_rsqrt * gamma + beta).to(dtype=b_dtype)
    for (_, fw, fb), one_w, one_b in zip(items, fused_w.unbind(0), fused_b.unbind(0)):
        fw.copy_(one_w)  # casts back to the conv weight's dtype, as _fused_weights does
        fb.copy_(one_b)


def _up(t: torch.Tensor) -> torch.Tensor:
    """What :func:`_fused_weights` computes in: float16/bfloat16 as float32 (detached)."""
    return t.detach().float() if t.dtype in (torch.float16, torch.bfloat16) else t.detach()


def _overlaps(written: str, read: str) -> bool:
    """Whether a state write (a qualified name, ``prefix.*`` for everything under a prefix)
    touches ``read`` (a qualified name, or ``prefix.`` for everything under a module)."""
    if written.endswith("*"):
        prefix = written[:-1]
        return read.startswith(prefix) or (read.endswith(".") and prefix.startswith(read))
    return written.startswith(read) if read.endswith(".") else written == read


def _bind_bn(node: Node) -> dict[str, Any] | None:
    """The arguments of a functional batch norm by name, plus ``tuple`` (returns a tuple)."""
    target = node.target
    if not is_torch_op(target):
        return None
    if target is torch.nn.functional.batch_norm:
        names, is_tuple = _F_ORDER, False
    else:
        layout = _BN_LAYOUTS.get(callable_op_name(target) or "")
        if layout is None:
            return None
        if isinstance(target, torch._ops.OpOverload) and target._overloadname not in ("default",):
            return None  # e.g. _native_batch_norm_legit.no_stats, out= overloads
        names, is_tuple = layout
    out = dict(_BN_DEFAULTS)
    for i, name in enumerate(names):
        if i < len(node.args):
            out[name] = node.args[i]
        elif name in node.kwargs:
            out[name] = node.kwargs[name]
        elif name not in _BN_DEFAULTS:
            return None
    out["tuple"] = is_tuple
    return out


#: what makes a batch norm the one it is: two calls reading all of these from the same places
#: are one BN module called twice (as torch.export and TorchDynamo record it)
_BN_STATE = ("weight", "bias", "running_mean", "running_var")


def _state_key(bn: dict[str, Any]) -> tuple[Any, ...]:
    """Where a batch norm's :data:`_BN_STATE` arguments (``bn``, from :func:`_bind_bn`) come
    from: for each, the attribute a ``get_attr`` node reads (two ``get_attr`` nodes of one
    target read one tensor), else the value itself."""
    values = (bn[k] for k in _BN_STATE)
    return tuple(("get_attr", v.target) if isinstance(v, Node) and v.op == "get_attr" else v for v in values)


def _shared_with(bn_node: Node, bn: dict[str, Any], get_attrs_of: Callable[[Any], list[Node]]) -> Node | None:
    """Another batch norm that is the same BN as ``bn_node`` (its arguments ``bn``): one
    reading the very same weight, bias and running statistics, i.e. a BN module called at two
    sites, which is left alone as the module path leaves a module with several sites. Batch
    norms that share only some tensors (a tied weight, one running mean) are separate BNs, as
    two BN modules sharing tensors are: each fold only reads them, into new tensors.
    ``get_attrs_of(target)``: the graph's ``get_attr`` nodes of ``target``."""
    mean = bn["running_mean"]
    if not isinstance(mean, Node):
        return None
    key = _state_key(bn)
    twins = get_attrs_of(mean.target) if mean.op == "get_attr" else [mean]
    for twin in twins:
        for user in twin.users:
            if user is bn_node or user.op != "call_function" or callable_op_name(user.target) not in _BN_FAMILY:
                continue
            other = _bind_bn(user)
            if other is not None and _state_key(other) == key:
                return user
    return None


#: the smallest normal float32: an ``eps`` at least this keeps ``running_var + eps`` above 0,
#: and its ``rsqrt`` finite, for every variance (>= 0) in float32 or wider (float16/bfloat16
#: statistics are folded in float32)
_SAFE_EPS = 2.0**-126


def _zero_variance_problem(var: Any, eps: Any) -> str | None:
    """Why folding a batch norm of running variance ``var`` (a tensor; None: known only when
    the graph runs) and ``eps`` is not exact, or None: a channel whose ``var + eps`` is 0 makes
    the fused weight infinite (``gamma / sqrt(0)``), and the conv then sums infinities of both
    signs into NaN where the batch norm after it gave each element its own +-inf. Only an
    ``eps`` below :data:`_SAFE_EPS` (0 included) can make it 0 for a variance, which is
    never negative (an adversarial check found ``eps=0`` with a zero variance fused into
    NaN outputs)."""
    if not isinstance(eps, (int, float)) or eps >= _SAFE_EPS:
        return None
    if var is None:
        return (
            f"BatchNorm eps={eps}: a channel whose running variance is 0 would make the fused weight infinite "
            "(the conv would sum infinities into NaN where the batch norm gives +-inf), and the statistics are "
            "known only when the graph runs"
        )
    if not isinstance(var, torch.Tensor):
        return None
    with torch.no_grad():
        zero = (_up(var) + eps == 0).nonzero().flatten().tolist()
    if not zero:
        return None
    channels = ", ".join(map(str, zero[:5])) + (f" and {len(zero) - 5} more" if len(zero) > 5 else "")
    return (
        f"BatchNorm eps={eps} and running_var + eps is 0 in channel{'s' if len(zero) > 1 else ''} {channels}: "
        "the fused weight would be infinite, and the conv would sum infinities into NaN where the batch norm "
        "gives +-inf"
    )


def _weight_ndim(conv_name: str, w: Any) -> int | None:
    if conv_name in ("conv1d", "conv2d", "conv3d"):
        return int(conv_name[4]) + 2
    info = tensor_info(w) if isinstance(w, Node) else None
    return len(info[0]) if info is not None else None


def _emit_fold(params: dict[str, Any], eps: float, ndim: int, ctx: PassContext) -> tuple[Node, Node]:
    """Emit the fold as torch-level graph code (values unknown until the graph runs)."""
    w, b = params["w"], params["b"]
    gamma, beta, mean, var = (params[k] for k in ("weight", "bias", "running_mean", "running_var"))
    f = ctx.call_function
    inv_std = f(torch.rsqrt, (f(torch.add, (var, eps)),))
    scale = f(torch.mul, (gamma, inv_std)) if gamma is not None else inv_std
    shape = (-1,) + (1,) * (ndim - 1)
    new_w = ctx.call_method("type_as", (f(torch.mul, (w, ctx.call_method("reshape", (scale, shape)))), w))
    centred = f(torch.sub, (b, mean)) if b is not None else f(torch.neg, (mean,))
    new_b = f(torch.mul, (centred, scale)) if gamma is not None else f(torch.mul, (centred, inv_std))
    if beta is not None:
        new_b = f(torch.add, (new_b, beta))
    new_b = ctx.call_method("type_as", (new_b, b if b is not None else w))
    return new_w, new_b


def _set_arg(args: list[Any], kwargs: dict[str, Any], index: int, name: str, value: Any) -> None:
    if len(args) > index:
        args[index] = value
    elif name in kwargs or len(args) < index:
        kwargs[name] = value
    else:
        args.append(value)


def _copy_value_meta(src: Node, dst: Node) -> None:
    """``dst`` computes ``src``'s value from now on: carry its shape/dtype metadata (and drop
    what ``dst`` recorded of its own value where ``src`` has none)."""
    for key in ("val", "example_value", "tensor_meta"):
        if key in src.meta:
            dst.meta[key] = src.meta[key]
        else:
            dst.meta.pop(key, None)
