"""Side effects, randomness, mutation and aliasing of FX nodes, in every dialect.

Passes that delete, merge, reorder or evaluate nodes must know what a node does besides
computing its result. This module answers that for the three dialects fxpasses handles
(``symbolic_trace``, TorchDynamo, ``torch.export``) and is public: third-party passes use it too.

Quick use::

    from fxpasses.effects import has_side_effects, is_random, written_inputs, is_pure

    has_side_effects(node, gm)   # must be kept even when its result is unused
    is_random(node, gm)          # draws from a random number generator
    written_inputs(node, gm)     # the input nodes whose value the node mutates
    is_pure(node, gm)            # result depends only on the inputs, and nothing else happens

Passes that ask about many nodes build one :class:`EffectAnalysis` (caches per node and per
submodule, O(n) over a graph), which also answers graph-level questions: which nodes may share
storage (:meth:`EffectAnalysis.alias_roots`), whether a node's value is written anywhere
(:meth:`EffectAnalysis.is_written`) and which parameters/buffers the graph mutates
(:meth:`EffectAnalysis.mutated_attributes`).

What counts as an effect (the *kinds* in :attr:`NodeEffects.kinds`)
===================  ==========================================================================
kind                 nodes
===================  ==========================================================================
``graph_io``         placeholders and the output node
``mutation``         writes an input or module state: in-place ``call_method`` (``x.add_``,
                     ``x.__setitem__``, ``x.__iadd__``); in-place torch functions
                     (``torch.relu_``, ``F.relu_``, ``torch.nn.init.normal_``); ``operator.iadd``
                     and the other ``operator.i*``, ``operator.setitem``/``delitem``;
                     ``inplace=True`` (``F.relu(x, inplace=True)``); an ``out=`` argument;
                     ATen ``OpOverload`` whose schema writes an argument (``alias_info.is_write``,
                     e.g. ``aten.add_.Tensor``, ``aten.add.out``, ``aten.copy_``); batch norm in
                     training mode (updates ``running_mean``/``running_var``, which the
                     ``aten.batch_norm``/``native_batch_norm`` schemas do not declare);
                     ``F.embedding(max_norm=...)`` (renormalises the weight); ``setattr``
``random``           draws from a generator: ``rand``, ``randn``, ``randint``, ``randperm``,
                     ``*_like``, ``bernoulli``, ``multinomial``, ``normal``, ``poisson``, the
                     in-place ``uniform_``/``normal_``/... and every ATen op tagged
                     ``nondeterministic_seeded``; conditionally: dropout and its relatives
                     (``F.dropout``/``torch.dropout``/``aten.dropout``/``native_dropout``...)
                     unless ``training``/``train`` is literally False, ``rrelu`` when training,
                     ``scaled_dot_product_attention`` unless ``dropout_p`` is literally 0, RNNs
                     with dropout in training, ``F.fractional_max_pool*`` without samples,
                     ``F.gumbel_softmax``
``assert``           ``torch._assert``, ``torch._assert_async``, ``torch._check*``,
                     ``torch._assert_tensor_metadata``, fxpasses' input guards, ``aten._assert_async`` (``.default`` and ``.msg``),
                     ``aten._assert_scalar``, ``aten._assert_tensor_metadata``,
                     ``aten.sym_constrain_range*`` and their ``_functional_`` forms
``io``               ``print``, ``aten._print``, ``warnings.warn``
``profiler``         ``torch.ops.profiler.*`` (record_function enter/exit),
                     ``torch.autograd.profiler.record_function``
``global_state``     grad mode and autocast (``torch._C._set_grad_enabled``,
                     ``torch.set_grad_enabled``, inference-mode and autocast enter/exit), RNG
                     seeding/state, ``torch.set_*``, tensor hooks, functorch nesting
``reads_state``      no side effect, but the result depends on global state, not only on
                     the inputs (``torch.is_grad_enabled()``, ``torch.get_default_dtype()``):
                     not pure (never merged or folded), removable when unused
``declared``         declared effectful to torch: ``torch.fx.node._side_effectful_functions``
                     (``torch.fx.node.has_side_effect``), the effect-token registry
                     (``torch._higher_order_ops.effects``), ``node.is_impure()``
``unknown``          cannot be shown pure, so treated as writing every input: calls of
                     arbitrary Python functions (``torch.fx.wrap``), methods that are not
                     ``torch.Tensor`` methods, unknown higher-order operators, leaf modules
                     that are not standard ``torch.nn`` modules, modules with hooks,
                     ops tagged ``maybe_aliasing_or_mutating`` that the table of composite
                     ops (below) does not list
===================  ==========================================================================

``call_module``: a submodule that is a ``GraphModule`` has the effects of the nodes of its
graph (recursively). A standard ``torch.nn`` module (its class defined in
``torch.nn.modules``, or such a module with tensors parametrized by torch's own
parametrizations, ``torch.nn.utils.parametrizations``) is pure unless ``inplace=True``
(writes its input), it is a dropout / ``RReLU`` / ``MultiheadAttention`` / RNN with dropout
in training mode (random), a batch or instance norm tracking running statistics in training
mode, an ``Embedding`` with ``max_norm`` (writes its own state), or a spectral-norm
parametrization in training mode (one power-iteration step on its vectors a call); its
children are checked the same way. Any other leaf
module is ``unknown`` unless registered with :func:`register_pure_module`. Modules marked
``_is_impure = True`` (torch's own flag) or with hooks (forward, forward pre-, backward or
backward pre-hooks, their own or global: a backward hook may change the gradients) are
``unknown``.

Sources: ``torch.fx.node._side_effectful_functions`` and ``Node.is_impure`` (used as one
input), ``torch._library.utils.is_impure`` (schema mutability, ``nondeterministic_seeded``),
ATen schemas (``FunctionSchema.arguments[i].alias_info.is_write``, return alias sets) and
tags (``maybe_aliasing_or_mutating``), and the ATen implementations of the composite ops whose
schemas understate what they do (batch norm, dropout returning its input): one table,
``_COMPOSITE_RESULT_ALIASES``, says for each ATen op tagged ``maybe_aliasing_or_mutating`` (all
of torch 2.13's) and for the other composites known to return an input whether its result may
alias an input, with the kernel each answer comes from.

Aliasing: a node's output *may alias* an input when its ATen schema says so (views,
``reshape``, ``contiguous``, in-place ops return ``self``, ``out=`` returns ``out``), when it is
a composite that may return an input as is or a view of it (the ``maybe_aliasing_or_mutating``
ops that do, such as ``dropout``, ``atleast_1d``, ``conj_physical``, ``unsafe_chunk``; and
``type_as``, ``einsum``, ``broadcast_tensors``...; in every spelling, ATen overloads
included), when it is tagged ``maybe_aliasing_or_mutating`` and not in the table,
``getitem``/``getattr``, and whenever nothing proves otherwise (unknown functions, non-standard
modules). A tagged op whose result is always new is fresh: the batch norm
(``aten.batch_norm``, ``_batch_norm_impl_index``) output never aliases its input, weight, bias
or statistics. All placeholders
are assumed to possibly alias one another (callers may pass one tensor twice); parameters and
buffers alias when they share storage.
"""

from __future__ import annotations

import builtins
import inspect
import operator
import types
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import torch
import torch.fx
from torch.fx.node import Node
from torch.nn.utils.parametrize import ParametrizationList as _ParametrizationList
from torch.nn.modules import module as nn_module

from ._modpath import ModulePaths
from .guards import input_guard
from .ops import callable_op_name, is_inplace_name, module_op_name

__all__ = [
    "NodeEffects",
    "EffectAnalysis",
    "WriteClock",
    "node_effects",
    "has_side_effects",
    "is_random",
    "written_inputs",
    "is_pure",
    "may_alias_inputs",
    "mutated_attributes",
    "register_side_effect",
    "register_pure_function",
    "register_pure_module",
    "module_hooks_reason",
    "KINDS",
    "NO_SIDE_EFFECT",
    "MUTATION",
    "RANDOM",
    "ASSERT",
    "IO",
    "PROFILER",
    "GLOBAL_STATE",
    "READS_STATE",
    "DECLARED",
    "GRAPH_IO",
    "UNKNOWN",
]

MUTATION = "mutation"
RANDOM = "random"
ASSERT = "assert"
IO = "io"
PROFILER = "profiler"
GLOBAL_STATE = "global_state"
READS_STATE = "reads_state"
DECLARED = "declared"
GRAPH_IO = "graph_io"
UNKNOWN = "unknown"
#: Every effect kind, see the module documentation.
KINDS = (GRAPH_IO, MUTATION, RANDOM, ASSERT, IO, PROFILER, GLOBAL_STATE, READS_STATE, DECLARED, UNKNOWN)
#: Kinds that are no side effect: such a node is not pure, but removing it when unused is safe.
NO_SIDE_EFFECT = frozenset({READS_STATE})


@dataclass(frozen=True)
class NodeEffects:
    """What a node does besides computing its result.

    Attributes:
        kinds: effect kinds (:data:`KINDS`); empty for a pure node.
        writes: input nodes whose value the node may mutate (for ``unknown`` effects: all of
            its inputs).
        state_writes: qualified names of parameters/buffers of the graph's module that the node
            writes without reading them through an input node (a submodule updating its own
            state); a name ending in ``.*`` stands for everything under that prefix.
        reason: a short human-readable explanation (empty for pure nodes).
    """

    kinds: frozenset[str] = frozenset()
    writes: tuple[Node, ...] = ()
    state_writes: frozenset[str] = frozenset()
    reason: str = ""

    @property
    def pure(self) -> bool:
        return not self.kinds


_PURE = NodeEffects()

# ---------------------------------------------------------------------------------------------
# registries (extension points for third-party code)

_user_effects: dict[Any, str] = {}
_user_pure: set[Any] = set()
_user_pure_modules: set[type] = set()


def register_side_effect(fn: Any, kind: str = DECLARED) -> Any:
    """Declare that calling ``fn`` (a ``call_function`` target) has an effect of ``kind``.

    Usable as a decorator. For new operators prefer torch's own mechanisms (a mutable schema,
    ``torch.library._register_effectful_op``), which this module reads as well.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown effect kind {kind!r}; expected one of {', '.join(KINDS)}")
    _user_effects[fn] = kind
    _user_pure.discard(fn)
    return fn


def register_pure_function(fn: Any) -> Any:
    """Declare that ``fn`` (a ``call_function`` target) is pure and returns a fresh value
    (no aliasing of its inputs). Usable as a decorator."""
    _user_pure.add(fn)
    _user_effects.pop(fn, None)
    return fn


def register_pure_module(cls: type) -> type:
    """Declare that calling an instance of the ``nn.Module`` subclass ``cls`` is pure (its
    ``inplace`` attribute, hooks and children are still checked). Usable as a decorator."""
    _user_pure_modules.add(cls)
    return cls


# ---------------------------------------------------------------------------------------------
# tables


def _resolve(path: str) -> Any:
    obj: Any = None
    parts = path.split(".")
    try:
        obj = __import__(parts[0])
        for p in parts[1:]:
            obj = getattr(obj, p)
    except (AttributeError, ImportError, RuntimeError):
        return None
    return obj


def _table(kind: str, *paths: str) -> dict[Any, str]:
    out = {}
    for p in paths:
        obj = _resolve(p)
        if obj is not None:
            try:
                out[obj] = kind
            except TypeError:  # pragma: no cover - unhashable
                pass
    return out


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_SPECIAL: dict[Any, str] = {}
_SPECIAL.update(
    _table(
        ASSERT,
        *"""torch._assert torch._assert_async torch._assert_scalar torch._check torch._check_is_size
        torch._check_with torch._check_index torch._check_value torch._check_type
        torch._check_tensor_all torch._check_not_implemented torch._assert_tensor_metadata
        torch.sym_constrain_range
        torch.sym_constrain_range_for_size torch._constrain_as_size""".split(),
    )
)
_SPECIAL[input_guard] = ASSERT  # fxpasses.guards: a check of an input's recorded facts
_SPECIAL.update(_table(IO, "builtins.print", "warnings.warn"))
_SPECIAL.update(
    _table(
        PROFILER,
        *"""torch.autograd.profiler.record_function torch.profiler.record_function
        torch._C._autograd._record_function_with_args_enter
        torch._C._autograd._record_function_with_args_exit""".split(),
    )
)
_SPECIAL.update(
    _table(
        GLOBAL_STATE,
        *"""torch._C._set_grad_enabled torch.set_grad_enabled torch._C._set_fwd_grad_enabled
        torch.autograd.grad_mode._enter_inference_mode torch.autograd.grad_mode._exit_inference_mode
        torch.amp._enter_autocast torch.amp._exit_autocast torch.amp.autocast_mode._enter_autocast
        torch.amp.autocast_mode._exit_autocast torch._C._set_autocast_enabled torch.manual_seed
        torch.seed torch.set_rng_state torch.get_rng_state torch.random.manual_seed
        torch.random.seed torch.random.set_rng_state
        torch._C._set_deterministic_algorithms""".split(),
    )
)

#: The same by qualified name: wrappers keep it (``import torch._dynamo`` wraps
#: ``torch.manual_seed`` in a new function object).
def _qualified(t: Any) -> str:
    return f"{getattr(t, '__module__', '')}.{getattr(t, '__qualname__', '')}"


_SPECIAL_BY_NAME = {_qualified(k): v for k, v in _SPECIAL.items()}

#: ATen overload packets by name: asserts and printing (every overload).
_ATEN_KIND_BY_NAME = {
    **dict.fromkeys(
        _names(
            """_assert_async _assert_scalar _assert_tensor_metadata _functional_assert_async
            _functional_assert_scalar sym_constrain_range sym_constrain_range_for_size
            _functional_sym_constrain_range _functional_sym_constrain_range_for_size"""
        ),
        ASSERT,
    ),
    "_print": IO,
    "_make_dep_token": DECLARED,
}

_DROPOUT_NAMES = _names(
    "dropout dropout1d dropout2d dropout3d feature_dropout alpha_dropout feature_alpha_dropout native_dropout"
)
_RRELU_NAMES = _names("rrelu rrelu_with_noise rrelu_with_noise_functional")
_RNN_NAMES = _names("lstm gru rnn_tanh rnn_relu _cudnn_rnn miopen_rnn")
#: torch-level random functions that have no ATen op of the same name.
_TORCH_RANDOM = _names("gumbel_softmax")
#: ``torch.nn.init`` functions that do not draw random numbers.
_INIT_DETERMINISTIC = _names("constant_ ones_ zeros_ eye_ dirac_ calculate_gain")
_BATCH_NORM_NAMES = _names(
    "batch_norm native_batch_norm _batch_norm_impl_index cudnn_batch_norm miopen_batch_norm"
)
#: In-place dunder methods (``is_inplace_name`` excludes dunders).
_INPLACE_DUNDERS = _names(
    """__iadd__ __isub__ __imul__ __itruediv__ __ifloordiv__ __imod__ __ipow__ __imatmul__
    __iand__ __ior__ __ixor__ __ilshift__ __irshift__ __setitem__ __delitem__ __setstate__"""
)
#: Tensor methods with effects that their names do not reveal.
_METHOD_EFFECTS = {
    "backward": UNKNOWN,
    **dict.fromkeys(
        _names("register_hook register_post_accumulate_grad_hook retain_grad record_stream"), GLOBAL_STATE
    ),
}
_OPERATOR_WRITES = frozenset(
    getattr(operator, n)
    for n in """iadd isub imul itruediv ifloordiv imod ipow imatmul iand ior ixor ilshift irshift
    iconcat setitem delitem""".split()
)
_PURE_BUILTINS = frozenset(
    getattr(builtins, n)
    for n in """abs all any bool callable chr complex dict divmod enumerate float format frozenset
    getattr hasattr hash id int isinstance issubclass len list max min ord pow range repr reversed
    round set slice sorted str sum tuple type zip""".split()
)
#: Modules whose functions are pure unless a rule of ``_by_name`` says otherwise.
_TORCH_PURE_MODULES = _names(
    """torch torch.functional torch.nn.functional torch.nn.init torch._C._nn
    torch._C._VariableFunctions torch._C._linalg torch._C._special torch._C._fft torch._C._nested
    torch.linalg torch.special torch.fft torch._tensor torch._refs torch._refs.nn.functional
    torch.fx.experimental.sym_node torch.fx.experimental.symbolic_shapes torch.random
    torch.overrides math cmath _operator operator"""
)
#: ATen composite ops whose schema does not say how their result relates to their inputs, by
#: overload packet name: True when the result may be an input itself or share an input's
#: storage (a view), False when it is always a new tensor. Every name applies to all the
#: overloads of the packet whose schema declares no alias on its returns (``out=`` overloads
#: say what they return) and to the torch function / ``Tensor`` method / module of that name.
#:
#: 1. Every op that carries ``torch.Tag.maybe_aliasing_or_mutating`` in torch 2.13 (all twelve;
#:    each on its ``.default`` overload). The tag marks CompositeImplicitAutograd kernels that
#:    may alias or mutate an input although their schema says neither; it does not say which,
#:    so each answer below comes from the kernel in ``aten/src/ATen/native`` (and was checked
#:    in eager, comparing ``untyped_storage().data_ptr()`` of results and inputs). A tagged op
#:    missing here (a newer torch) may alias every input and write every input (see
#:    :func:`_tag_unlisted`). Writes: only the batch norms write, their running statistics when
#:    ``training`` is not literally False (``_BATCH_NORM_NAMES``, :func:`_batch_norm_writes`);
#:    the other tagged ops write nothing.
#: 2. Ops not tagged whose schema declares a fresh result but which may return an input or a
#:    view of it (found by running them: ``einsum('ij->ji', x)`` is a view of ``x``).
_COMPOSITE_RESULT_ALIASES: dict[str, bool] = {
    # 1. tagged maybe_aliasing_or_mutating ------------------------------------------------
    # Normalization.cpp ``batch_norm``: ``std::get<0>(at::_batch_norm_impl_index(...))``, or
    # ``input.clone()`` (times weight[0], plus bias[0]) for an empty input ("don't return view
    # of input"). Tagged for the running statistics it updates in training.
    "batch_norm": False,
    # Normalization.cpp ``_batch_norm_impl_index``: the results of ``cudnn_batch_norm``,
    # ``miopen_batch_norm`` or ``native_batch_norm`` (schemas: fresh results) and a new
    # ``reserve`` tensor; ``input.clone()`` and new ``save_mean``/``save_invstd`` for an empty
    # input. Tagged for the running statistics it updates in training.
    "_batch_norm_impl_index": False,
    # Dropout.cpp ``_dropout_impl`` (``dropout`` takes it unless its fused CUDA kernel does):
    # ``if (p == 0 || !train || input.sym_numel() == 0) return input;`` - the input itself,
    # e.g. always in eval mode.
    "dropout": True,
    "feature_dropout": True,
    "alpha_dropout": True,
    "feature_alpha_dropout": True,
    # TensorShape.cpp ``atleast_{1,2,3}d``: ``self`` when it has enough dimensions, else
    # ``self.reshape(...)`` / ``self.unsqueeze(...)`` (views); the untagged ``.Sequence``
    # overloads do the same per tensor.
    "atleast_1d": True,
    "atleast_2d": True,
    "atleast_3d": True,
    # Itertools.cpp ``cartesian_prod``: ``if (tensors.size() == 1) return tensors[0];``
    # (``at::stack`` of the flattened meshgrid otherwise).
    "cartesian_prod": True,
    # UnaryOps.cpp ``conj_physical``: ``if (!self.is_complex()) return self;``
    "conj_physical": True,
    # TensorShape.cpp ``unsafe_chunk``: ``self.unsafe_split(...)`` - views of ``self`` whose
    # aliasing autograd does not track.
    "unsafe_chunk": True,
    # 2. not tagged -----------------------------------------------------------------------
    "type_as": True,  # ``self.to(other.options())``: self when dtype and device match
    "einsum": True,  # a permuted view of a single operand (``'ij->ji'``)
    "broadcast_tensors": True,  # ``expand`` views (the inputs themselves when same shape)
    "meshgrid": True,  # ``expand`` views of the inputs
    "sum_to_size": True,  # ``self`` when it already has the size
    "to_dense": True,  # a strided input is returned as is
    "to_sparse": True,  # an input already in the layout is returned as is
    "unsafe_split": True,  # views of self (TensorShape.cpp, like ``unsafe_chunk``)
    "unsafe_split_with_sizes": True,
}
#: Ops (torch functions, ``Tensor`` methods, modules and ATen packets, by name) whose result
#: may be an input as is or share its storage though their schema says otherwise: the
#: may-alias entries above, dropout in all its spellings, and torch-level composites.
_MAY_RETURN_INPUT = (
    _DROPOUT_NAMES
    | frozenset(n for n, may in _COMPOSITE_RESULT_ALIASES.items() if may)
    | _names("chain_matmul multi_dot linalg_multi_dot coalesce to_mkldnn pin_memory identity")
)
#: Higher-order operators that are pure when their subgraphs are.
_PURE_HOPS = _names(
    """cond while_loop map_impl scan associative_scan wrap wrap_with_set_grad_enabled
    wrap_with_autocast invoke_subgraph flex_attention flex_attention_backward out_dtype
    tag_activation_checkpoint strict_mode hints_wrapper auto_functionalized
    auto_functionalized_v2 triton_kernel_wrapper_functional"""
)
#: Functions of the ``torch`` namespace that change global state (besides ``set_*``).
_TORCH_GLOBAL_STATE = _names("save load compile use_deterministic_algorithms manual_seed seed")
#: Functions of the ``torch`` namespace whose result depends on global state, not on inputs.
_TORCH_READS_STATE = _names(
    """is_grad_enabled is_inference_mode_enabled is_autocast_enabled is_autocast_cpu_enabled
    get_autocast_dtype get_autocast_gpu_dtype get_autocast_cpu_dtype get_default_dtype
    get_default_device are_deterministic_algorithms_enabled get_num_threads initial_seed"""
)
_RANDOM_HOPS = _names("run_and_save_rng_state run_with_rng_state graphsafe_run_with_rng_state")

_MISSING = object()
_INPUT_ROOT = ("input",)
_ANY_ROOT = ("any",)
_ANY_ROOTS = frozenset({_ANY_ROOT})
_MAX_ROOTS = 64  # larger alias-root sets collapse to "any": keeps the sweep O(n)


def _overlap(a: frozenset[Any], b: frozenset[Any] | set[Any]) -> bool:
    """Whether two root sets may share storage ("any" overlaps every non-empty set)."""
    if not a or not b:
        return False
    return _ANY_ROOT in a or _ANY_ROOT in b or not a.isdisjoint(b)


def _torch_side_effectful() -> Any:
    try:
        from torch.fx.node import _side_effectful_functions

        return _side_effectful_functions
    except ImportError:  # pragma: no cover
        return set()


def _declared_effect(op: Any) -> bool:
    """Torch's effect-token registry (``torch.library._register_effectful_op``)."""
    try:
        from torch._higher_order_ops.effects import _get_effect
    except ImportError:  # pragma: no cover
        return False
    try:
        return _get_effect(op) is not None
    except Exception:
        return False


# ---------------------------------------------------------------------------------------------
# ATen lookups


_packets: dict[str, Any] = {}


def _aten_packet(name: str | None) -> Any:
    """``torch.ops.aten.<name>`` or None (cached, including misses)."""
    if not name:
        return None
    try:
        return _packets[name]
    except KeyError:
        pass
    try:
        pk = getattr(torch.ops.aten, name)
        if not isinstance(pk, torch._ops.OpOverloadPacket):
            pk = None
    except (AttributeError, RuntimeError):
        pk = None
    _packets[name] = pk
    return pk


def _overloads(pk: Any) -> list[Any]:
    out = []
    for ov in pk.overloads():
        try:
            out.append(getattr(pk, ov))
        except (AttributeError, RuntimeError):  # pragma: no cover
            pass
    return out


def _tag_unlisted(op: Any) -> bool:
    """Whether the ``OpOverload`` ``op`` is tagged ``maybe_aliasing_or_mutating`` but is not an
    ATen op of :data:`_COMPOSITE_RESULT_ALIASES`: then nothing says what it returns or writes,
    so its result may alias, and it may write, every input."""
    if torch.Tag.maybe_aliasing_or_mutating not in getattr(op, "tags", ()):
        return False
    return getattr(op, "namespace", None) != "aten" or op.overloadpacket.__name__ not in _COMPOSITE_RESULT_ALIASES


_packet_info: dict[str, tuple[bool, bool, bool]] = {}


def _name_info(name: str) -> tuple[bool, bool, bool] | None:
    """``(seeded, aliasing, unlisted)`` of the ATen packet ``name`` over all overloads, or None
    (``unlisted``: an overload is :func:`_tag_unlisted`)."""
    if name in _packet_info:
        return _packet_info[name]
    pk = _aten_packet(name)
    if pk is None:
        return None
    seeded = aliasing = unlisted = False
    for op in _overloads(pk):
        tags = getattr(op, "tags", ())
        if torch.Tag.nondeterministic_seeded in tags:
            seeded = True
        if _tag_unlisted(op):
            aliasing = unlisted = True
        elif _COMPOSITE_RESULT_ALIASES.get(name):  # tagged or not: may return an input
            aliasing = True
        # a view-like return (``Tensor(a)``); ``Tensor(a!)`` returns of in-place and out=
        # overloads alias the written argument, which the write rules already cover
        if any(r.alias_info is not None and not r.alias_info.is_write for r in op._schema.returns):
            aliasing = True
    _packet_info[name] = (seeded, aliasing, unlisted)
    return seeded, aliasing, unlisted


def _schema_pairs(schema: Any, args: tuple, kwargs: dict) -> Iterator[tuple[Any, Any]]:
    """(schema argument, value) for each given argument of a call."""
    positional = [a for a in schema.arguments if not a.kwarg_only]
    by_name = {a.name: a for a in schema.arguments}
    for i, v in enumerate(args):
        if i < len(positional):
            yield positional[i], v
    for k, v in kwargs.items():
        a = by_name.get(k)
        if a is not None:
            yield a, v


def _schema_bind(schema: Any, args: tuple, kwargs: dict) -> dict[str, Any] | None:
    positional = [a for a in schema.arguments if not a.kwarg_only]
    names = {a.name for a in schema.arguments}
    if len(args) > len(positional) or any(k not in names for k in kwargs):
        return None
    bound: dict[str, Any] = {}
    for a in schema.arguments:
        if a.has_default_value():
            bound[a.name] = a.default_value
    for a, v in _schema_pairs(schema, args, kwargs):
        bound[a.name] = v
    return bound


_signatures: dict[Any, Any] = {}


def _bind(target: Any, name: str | None, args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """Arguments of a call by parameter name, defaults included; None when unknown.

    Uses the OpOverload schema, else the Python signature, else the schema of the ATen op of
    the same name (torch builtins such as ``torch.dropout`` have no Python signature).
    """
    if isinstance(target, torch._ops.OpOverload):
        return _schema_bind(target._schema, args, kwargs)
    if target is not None and not isinstance(target, str):
        try:
            sig = _signatures[target]
        except (KeyError, TypeError):
            try:
                sig = inspect.signature(target)
            except (TypeError, ValueError):
                sig = None
            try:
                _signatures[target] = sig
            except TypeError:  # pragma: no cover
                pass
        if sig is not None and not any(
            p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values()
        ):
            try:
                b = sig.bind(*args, **kwargs)
            except TypeError:
                return None
            b.apply_defaults()
            return dict(b.arguments)
    pk = _aten_packet(name)
    if pk is None:
        return None
    for op in _overloads(pk):
        bound = _schema_bind(op._schema, args, kwargs)
        if bound is not None:
            return bound
    return None


def _nodes_in(a: Any) -> list[Node]:
    out: list[Node] = []
    torch.fx.node.map_arg(a, lambda n: out.append(n) or n)
    return out


def _literal_false(v: Any) -> bool:
    """A flag given as a literal false value (not a graph value, not absent, not None)."""
    return isinstance(v, (bool, int, float)) and not v


def _literal_zero(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0


def _conditional_random(name: str, bound: dict[str, Any] | None) -> bool | None:
    """Random-or-not for ops whose randomness depends on arguments; None: not such an op."""
    base = name[:-1] if is_inplace_name(name) else name
    if base in _DROPOUT_NAMES:
        if bound is None:
            return True
        train = bound.get("train", bound.get("training", _MISSING))
        return not _literal_false(train)
    if base in _RRELU_NAMES:
        if bound is None:
            return True
        return not _literal_false(bound.get("training", _MISSING))
    if base in _RNN_NAMES:
        if bound is None:
            return True
        return not (_literal_zero(bound.get("dropout")) or _literal_false(bound.get("train", _MISSING)))
    if base == "multi_head_attention_forward":
        if bound is None:
            return True
        return not (_literal_zero(bound.get("dropout_p")) or _literal_false(bound.get("training", _MISSING)))
    if "scaled_dot_product" in base or base.endswith("_attention_forward"):
        if bound is None:
            return True
        return not _literal_zero(bound.get("dropout_p", _MISSING))
    if base.startswith("fractional_max_pool"):
        if bound is None:
            return True
        if "_random_samples" in bound:
            return bound["_random_samples"] is None
        return None
    return None


def _batch_norm_writes(name: str, bound: dict[str, Any] | None, args: tuple) -> list[Node]:
    """Running statistics written by a batch/instance norm in training mode."""
    if name in _BATCH_NORM_NAMES:
        flag = "training"
    elif name == "instance_norm":
        flag = "use_input_stats"
    else:
        return []
    if bound is None:
        return [n for a in args for n in _nodes_in(a)]
    if _literal_false(bound.get(flag, _MISSING)):
        return []
    return _nodes_in(bound.get("running_mean")) + _nodes_in(bound.get("running_var"))


# ---------------------------------------------------------------------------------------------
# the analysis


def _effects(
    kinds: Iterable[str], writes: Iterable[Node] = (), reason: str = "", state: Iterable[str] = ()
) -> NodeEffects:
    ws = tuple(dict.fromkeys(writes))
    return NodeEffects(frozenset(kinds), ws, frozenset(state), reason)


def _merge(parts: list[NodeEffects], reason: str = "") -> NodeEffects:
    kinds: set[str] = set()
    writes: list[Node] = []
    state: set[str] = set()
    reasons = []
    for p in parts:
        kinds |= p.kinds
        writes.extend(p.writes)
        state |= p.state_writes
        if p.reason:
            reasons.append(p.reason)
    if not kinds:
        return _PURE
    return _effects(kinds, writes, reason or "; ".join(reasons), state)


def _torch_module_of(fn: Any) -> str | None:
    objclass = getattr(fn, "__objclass__", None)
    if objclass is not None and isinstance(objclass, type) and issubclass(objclass, torch._C.TensorBase):
        return "torch._tensor"
    mod = getattr(fn, "__module__", None)
    if mod is None and isinstance(fn, types.BuiltinFunctionType):
        self_obj = getattr(fn, "__self__", None)
        if self_obj is torch._C._VariableFunctions or self_obj is torch._C._VariableFunctionsClass:
            return "torch"
    return mod


def _is_tensor_method(fn: Any) -> bool:
    return _torch_module_of(fn) == "torch._tensor"


def _module_is_standard(mod: torch.nn.Module) -> bool:
    """Whether ``mod`` is a standard ``torch.nn`` module: its class defined in
    ``torch.nn.modules``, torch's own parametrizations (``torch.nn.utils.parametrizations``:
    weight norm, spectral norm, orthogonal) and their container
    (``torch.nn.utils.parametrize.ParametrizationList``), or such a module with parametrized
    tensors (``torch.nn.utils.parametrize``'s ``Parametrized<Class>``, whose parametrizations,
    its children, are looked at as children are)."""
    cls = type(mod)
    module = cls.__module__
    if module.startswith("torch.nn.modules."):
        return True
    if module == "torch.nn.utils.parametrizations" or cls is _ParametrizationList:
        return True
    if module == "torch.nn.utils.parametrize" and cls.__name__.startswith("Parametrized"):
        from torch.nn.utils import parametrize

        return parametrize.type_before_parametrizations(mod).__module__.startswith("torch.nn.modules.")
    return False



def _has_hooks(mod: torch.nn.Module) -> bool:
    """Whether a call of ``mod`` runs hooks: its own or global (``register_module_*``) forward,
    forward pre-, backward or backward pre-hooks. A forward hook may change the output, a
    backward hook the gradients (clipping, scaling): either way the call is not its
    ``forward``, and neither removing, merging nor folding it keeps what the module computes.
    (Asked of every module a pass looks at: plain lookups, the kind is :func:`_hook_kind`'s.)"""
    d = mod.__dict__
    return bool(
        d.get("_forward_hooks")
        or d.get("_forward_pre_hooks")
        or d.get("_backward_hooks")
        or d.get("_backward_pre_hooks")
        or _global_hooks()
    )


def _global_hooks() -> bool:
    """Whether torch's global module hooks (``register_module_forward_hook`` and the like) are set."""
    m = nn_module
    return bool(
        getattr(m, "_global_forward_hooks", None)
        or getattr(m, "_global_forward_pre_hooks", None)
        or getattr(m, "_global_backward_hooks", None)
        or getattr(m, "_global_backward_pre_hooks", None)
    )


def _hook_kind(mod: torch.nn.Module) -> str | None:
    """The first kind of hook a call of ``mod`` runs (see :func:`_has_hooks`), as the word
    before ``hooks``: ``"forward "``, ``"forward pre-"``, ``"backward "``, ``"backward pre-"``,
    or one of these after ``"global "``; None when it runs none."""
    if not _has_hooks(mod):
        return None
    d = mod.__dict__
    for key, kind in _HOOK_KINDS:
        if d.get(key):
            return kind
    for key, kind in _HOOK_KINDS:
        if getattr(nn_module, "_global" + key, None):
            return "global " + kind
    return None


#: a module's hook dictionaries (``_global`` + the name: torch's global ones) and their kinds
_HOOK_KINDS = (
    ("_forward_hooks", "forward "),
    ("_forward_pre_hooks", "forward pre-"),
    ("_backward_hooks", "backward "),
    ("_backward_pre_hooks", "backward pre-"),
)


def module_hooks_reason(mod: torch.nn.Module) -> str | None:
    """Why a call of ``mod`` is not its ``forward`` alone, in words (``"Dropout has forward
    pre-hooks"``; ``"Dropout runs the global backward hooks (torch.nn.modules.module.register_module_*)"``:
    :func:`_has_hooks`), or None: for a pass that replaces the call by what its forward
    computes (dropout removal, conv-bn fusion)."""
    kind = _hook_kind(mod)
    if kind is None:
        return None
    if kind.startswith("global"):
        return f"{type(mod).__name__} runs the {kind}hooks (torch.nn.modules.module.register_module_*)"
    return f"{type(mod).__name__} has {kind}hooks"


_MODULE_GETATTR = torch.nn.Module.__getattr__
_OBJECT_GETATTRIBUTE = object.__getattribute__

#: standard module classes whose effects depend on their options or initialisation:
#: :meth:`EffectAnalysis._module_effects` looks at each instance
_OPTION_DEPENDENT_MODULES: tuple[type, ...] = (
    torch.nn.modules.lazy.LazyModuleMixin,
    torch.nn.Embedding,
    torch.nn.EmbeddingBag,
)
#: standard module classes that are random or update their state in training mode only
_TRAINING_DEPENDENT_MODULES: tuple[type, ...] = (
    torch.nn.modules.dropout._DropoutNd,
    torch.nn.RReLU,
    torch.nn.MultiheadAttention,
    torch.nn.RNNBase,
    torch.nn.modules.batchnorm._BatchNorm,
    torch.nn.modules.instancenorm._InstanceNorm,
)
_ALWAYS, _IN_EVAL = 1, 2
_leaf_kinds: dict[type, tuple[tuple[type, ...], int]] = {}  # cls -> (its __mro__, kind)


def _pure_leaf_kind(cls: type) -> int:
    """When an instance of ``cls`` is pure by class alone, once it has no children, no forward
    hooks and no ``_is_impure``/``inplace=True`` of its own: ``_ALWAYS``, ``_IN_EVAL`` (one
    of :data:`_TRAINING_DEPENDENT_MODULES`, pure when not training) or 0 (look at the
    instance). Only standard ``torch.nn.modules`` classes with plain attribute access that
    define none of ``_is_impure``, ``inplace`` and ``training`` qualify. Looked at on each call
    (a class may gain attributes later); the subclass tests are memoized for as long as the
    class keeps its MRO."""
    if (
        not cls.__module__.startswith("torch.nn.modules.")
        or cls.__getattribute__ is not _OBJECT_GETATTRIBUTE
        or cls.__getattr__ is not _MODULE_GETATTR
        or hasattr(cls, "_is_impure")
        or hasattr(cls, "inplace")
        or hasattr(cls, "training")
    ):
        return 0
    mro = cls.__mro__
    hit = _leaf_kinds.get(cls)
    if hit is None or hit[0] is not mro:
        if issubclass(cls, _OPTION_DEPENDENT_MODULES):
            kind = 0
        elif issubclass(cls, _TRAINING_DEPENDENT_MODULES):
            kind = _IN_EVAL
        else:
            kind = _ALWAYS
        hit = _leaf_kinds[cls] = (mro, kind)
    return hit[1]


def _pure_leaf(mod: torch.nn.Module, may_train: bool = False) -> bool:
    """True when :meth:`EffectAnalysis._module_effects` would answer pure for ``mod`` from its
    class alone (see :func:`_pure_leaf_kind`; its training flag for the training-dependent
    ones, which ``may_train`` takes as set): a leaf without hooks whose ``_is_impure`` and ``inplace``, read as
    :func:`_module_attr` reads them, are unset or false. False means "look at it": the full
    analysis decides. (Most modules of a traced model are such leaves: Conv, Linear,
    activations, eval-mode norms and dropout; the full path costs several times more.)"""
    kind = _pure_leaf_kind(type(mod))
    if not kind:
        return False
    d = mod.__dict__
    params, buffers = d.get("_parameters"), d.get("_buffers")
    if d.get("_modules", True) or params is None or buffers is None or _has_hooks(mod):
        return False  # children (or registries missing: the full analysis says what it says)
    if "_is_impure" in d:
        if d["_is_impure"]:
            return False
    elif "_is_impure" in params or "_is_impure" in buffers:
        return False
    if kind == _IN_EVAL and (may_train or d.get("training", True) is not False):
        return False
    return d.get("inplace", False) is not True


def _module_attr(mod: torch.nn.Module, name: str, default: Any) -> Any:
    """``getattr(mod, name, default)``, read from the instance ``__dict__`` and the module
    registries as ``nn.Module.__getattr__`` would (a missing attribute costs an exception
    there); through ``getattr`` itself when the class defines ``name`` (a descriptor or class
    default takes part) or customises attribute access."""
    cls = type(mod)
    if (
        cls.__getattribute__ is not _OBJECT_GETATTRIBUTE
        or cls.__getattr__ is not _MODULE_GETATTR
        or hasattr(cls, name)
    ):
        return getattr(mod, name, default)
    d = mod.__dict__
    v = d.get(name, _MISSING)
    if v is not _MISSING:
        return v
    for registry in ("_parameters", "_buffers", "_modules"):
        if registry in d:
            r = d[registry]
            if name in r:
                return r[name]
    return default


def _storage_key(t: torch.Tensor) -> Any:
    try:
        ptr = t.untyped_storage().data_ptr()
    except Exception:
        ptr = 0
    if ptr:
        return ("storage", t.device.type, t.device.index, ptr)
    return ("tensor", id(t))


_op_infos: dict[Any, tuple[str | None, bool, bool, bool, bool]] = {}


def _op_info(t: Any, ops: list[Any], name: str) -> tuple[str | None, bool, bool, bool, bool]:
    """``(kind by name/namespace, schema mutable, nondeterministic_seeded, declared effectful,
    tagged maybe_aliasing_or_mutating but unlisted)`` of an ATen/custom op or packet, over its
    overloads (cached)."""
    try:
        return _op_infos[t]
    except KeyError:
        pass
    namespace = getattr(t, "namespace", None) or getattr(t, "_qualified_op_name", "::").split("::")[0]
    kind = {"profiler": PROFILER, "aten": _ATEN_KIND_BY_NAME.get(name)}.get(namespace)
    side = _torch_side_effectful()
    mutable = any(op._schema.is_mutable for op in ops)
    seeded = any(torch.Tag.nondeterministic_seeded in getattr(op, "tags", ()) for op in ops)
    declared = any(op in side or _declared_effect(op) for op in ops)
    unlisted = any(_tag_unlisted(op) for op in ops)
    info = (kind, mutable, seeded, declared, unlisted)
    _op_infos[t] = info
    return info


def _lookups(t: Any) -> tuple[str | None, bool, str | None, bool, bool, bool]:
    """Table lookups for a call_function target (any of them may be unhashable)."""
    special = _SPECIAL_BY_NAME.get(_qualified(t))
    try:
        return (
            _user_effects.get(t),
            t in _user_pure,
            _SPECIAL.get(t, special),
            t in _OPERATOR_WRITES,
            t in _PURE_BUILTINS,
            t in _torch_side_effectful(),
        )
    except TypeError:
        return None, False, special, False, False, False


# Per-node answers that depend only on the node's own target, args and kwargs (call_function
# and call_method nodes, higher-order operators excepted) are shared by every EffectAnalysis of
# a graph: a pipeline builds one analysis per pass, and deriving every node's effects again
# dominated those passes on big graphs. An entry ``[target, args, kwargs, token, effects,
# aliases]`` is used only while the node still holds the very same target, args and kwargs
# objects (FX replaces the args tuple and kwargs dict on every edit) and the effect registries
# (ours and torch's side-effectful functions) are unchanged. The table lives on the graph
# (entries reference its nodes: a table outside it would keep the graph alive).
#
# A call_module node's answers depend on the module tree as well (the module its target
# resolves to, and that module's class, flags, hooks and children), which no cheap test shows
# unchanged. They are shared only while the graph holds a *module epoch* (an object under
# ``_EPOCH_ATTR``, in the entry's last slot): a pipeline sets one for its run and replaces it
# whenever a pass may have changed the module tree in a way that could change them (see
# :func:`new_module_epoch`, ``fxpasses.journal.Journal.module_answers_hold``); without one
# (outside a pipeline) they are not shared at all.
_SHARED_ATTR = "_fxpasses_node_facts"
_EPOCH_ATTR = "_fxpasses_module_epoch"
_ANY_EPOCH: Any = None  # the epoch slot of entries that do not depend on the module tree
_NO_EPOCH = object()  # matches no entry's epoch


def new_module_epoch(graph: Any) -> None:
    """Start a new module epoch on ``graph``: the call_module answers shared so far no longer
    hold (the module tree may have changed)."""
    graph.__dict__[_EPOCH_ATTR] = object()


def end_run(graph: Any) -> None:
    """A pipeline's run over ``graph`` is over: stop sharing call_module answers (what happens
    to the module tree next is not known), and drop the shared entries no later analysis can
    use: those of erased nodes, of nodes whose target or arguments changed since, and those
    tied to the run's module epochs. Each holds its node and the arguments it was made for,
    so that erased nodes and the old argument tuples of edited ones stayed alive with the
    graph (5 MB after the built-in pipeline on the 100k-node block graph)."""
    d = graph.__dict__
    d.pop(_EPOCH_ATTR, None)
    table = d.get(_SHARED_ATTR)
    if table:
        stale = [
            n
            for n, e in table.items()
            if n._erased or e[0] is not n.target or e[1] is not n._args or e[2] is not n._kwargs or e[6] is not _ANY_EPOCH
        ]
        for node in stale:
            del table[node]


_last_token: Any = None


def _registry_token() -> Any:
    """The state of the effect registries; the same object while they do not change."""
    global _last_token
    token = (frozenset(_user_effects.items()), frozenset(_user_pure), len(_torch_side_effectful()))
    if token != _last_token:
        _last_token = token
    return _last_token


def _new_entry(node: Node, table: dict[Node, list[Any]], token: Any, epoch: Any) -> list[Any] | None:
    """A fresh shared entry for ``node`` (None when its answers may depend on more than the
    node itself, or, for a call_module node, on a module tree no epoch vouches for)."""
    op = node.op
    if op != "call_function" and op != "call_method":
        if op != "call_module" or epoch is None:
            return None
        entry = table[node] = [node.target, node._args, node._kwargs, token, None, None, epoch]
        return entry
    if isinstance(node.target, torch._ops.HigherOrderOperator):  # reads submodules of the graph
        return None
    entry = table[node] = [node.target, node._args, node._kwargs, token, None, None, _ANY_EPOCH]
    return entry


#: call_function targets found pure by a rule that looks at the target only (registered pure,
#: or an ``operator``/``math``/pure builtin function; torch's Node.is_impure agreeing), mapped to
#: the registry token they were found under: such nodes need no per-node analysis.
_pure_targets: dict[Any, Any] = {}


def _pure_whatever_args(t: Any) -> bool:
    """Whether :meth:`EffectAnalysis._function` answers pure for ``t`` without looking at the
    arguments (its first rules), so that the answer holds for every call of ``t``."""
    try:
        user, pure, special, op_write, pure_builtin, in_torch_table = _lookups(t)
        hash(t)
    except TypeError:
        return False
    if pure:
        return not isinstance(t, torch._ops.HigherOrderOperator)
    if user is not None or special is not None or op_write or in_torch_table:
        return False
    if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket, torch._ops.HigherOrderOperator)):
        return False
    if t is builtins.setattr or t is builtins.delattr:
        return False
    mod = getattr(t, "__module__", None)
    return mod in ("_operator", "operator", "math", "cmath") or pure_builtin


#: Torch functions (``call_function`` targets) and ``torch.Tensor`` methods (``call_method``
#: names, with the method object) whose effects :meth:`EffectAnalysis._by_name` finds from the
#: name alone (see :func:`_static_call`), mapped to the registry token they were found under and
#: the node's effects: every call of the target whose kwargs give neither ``out`` nor
#: ``inplace`` has those effects, so no signature binding is needed per node.
_static_targets: dict[Any, tuple[Any, NodeEffects]] = {}
_static_methods: dict[str, tuple[Any, Any, NodeEffects]] = {}
_static_names: dict[str, bool] = {}
#: call_function targets (not OpOverloads) -> (registry token, whether a call returns a fresh
#: value besides the written inputs it returns): see :meth:`EffectAnalysis._target_fresh`.
_fresh_targets: dict[Any, tuple[Any, bool]] = {}
_static_fns: dict[Any, bool] = {}


def _no_flag_kwargs(kwargs: Any) -> bool:
    """No ``out``/``inplace`` keyword argument (the only keywords a name-only answer ignores)."""
    return not kwargs or ("out" not in kwargs and "inplace" not in kwargs)


def _static_name(name: str) -> bool:
    """Whether :meth:`EffectAnalysis._by_name` answers for ``name`` without looking at the
    arguments except ``out=`` and ``inplace`` (no in-place name, no batch norm / embedding,
    no randomness that depends on arguments, no per-method effect, no ATen op of that name
    tagged ``maybe_aliasing_or_mutating`` that :func:`_tag_unlisted` finds)."""
    try:
        return _static_names[name]
    except KeyError:
        pass
    base = name[:-1] if is_inplace_name(name) else name
    ok = not (
        is_inplace_name(name)
        or name in _INPLACE_DUNDERS
        or base in _BATCH_NORM_NAMES
        or base == "instance_norm"
        or base in ("embedding", "embedding_bag")
        or name in _METHOD_EFFECTS
        or _conditional_random(name, None) is not None
        or (_name_info(name) or (False, False, False))[2]  # writes its inputs, whatever they are
    )
    _static_names[name] = ok
    return ok


def _static_call(fn: Any, name: str) -> bool:
    """Whether calls of the torch callable ``fn`` (op name ``name``) have effects that do not
    depend on their arguments, when no ``out``/``inplace`` keyword is given: the name is
    :func:`_static_name` and no signature :func:`_bind` may use has an ``inplace``
    parameter (so the bound arguments never hold one)."""
    if not _static_name(name):
        return False
    try:
        return _static_fns[fn]
    except KeyError:
        pass
    except TypeError:  # unhashable
        return False
    ok = not _may_bind_inplace(fn, name)
    _static_fns[fn] = ok
    return ok


def _may_bind_inplace(fn: Any, name: str) -> bool:
    """Whether :func:`_bind` (``fn``, ``name``) could return arguments with ``inplace``."""
    try:
        sig = _signatures[fn]
    except KeyError:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            sig = None
        _signatures[fn] = sig
    if sig is not None and not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values()):
        return "inplace" in sig.parameters
    pk = _aten_packet(name)
    if pk is None:
        return False
    return any(a.name == "inplace" for op in _overloads(pk) for a in op._schema.arguments)


class EffectAnalysis:
    """Effects, aliasing and mutation of the nodes of one graph (caches; O(n) overall).

    Args:
        gm: the ``GraphModule`` whose graph is analysed (submodules are looked up in it).
        modules_may_train: judge ``call_module`` nodes as if each module were in training
            mode, whatever its flag says now: a ``symbolic_trace`` graph calls its modules,
            which follow ``.train()``/``.eval()`` at call time, so an eval-mode dropout or
            batch norm module of a graph trained later is random or writes its running
            statistics (the ``training`` preset's CSE and DCE ask so). Such answers are not
            shared with other analyses of the graph.

    Per-node answers (:meth:`effects`, :meth:`aliased_inputs`) are computed on demand and
    cached. Graph-level answers (:meth:`alias_roots`, :meth:`is_written`,
    :meth:`reaches_output`, :meth:`may_alias`, :meth:`mutated_attributes`) come from one
    forward sweep done on first use; build a new analysis after editing the graph in ways that
    add writes, and call :meth:`mark_reaches_output` when rewiring uses of a returned value.
    """

    def __init__(self, gm: torch.nn.Module, *, modules_may_train: bool = False) -> None:
        self.gm = gm
        self._may_train = modules_may_train
        self._token = _registry_token()
        self._table_graph: Any = None
        self._table: dict[Node, list[Any]] = {}
        self._epoch: Any = None  # the module epoch of the graph of the shared table
        self._paths: ModulePaths | None = None
        self._node: dict[Node, NodeEffects] = {}
        self._aliases: dict[Node, tuple[Node, ...]] = {}
        self._module: dict[int, NodeEffects] = {}
        self._sub: dict[int, "EffectAnalysis"] = {}
        self._in_progress: set[int] = set()
        self._roots: dict[Node, frozenset[Any]] | None = None
        self._written: set[Any] = set()
        self._state_written: set[str] = set()
        self._mutated: set[str] | None = None
        # (the set mutated_attributes() answered, its size, the module paths above its names)
        self._mutated_owners: tuple[set[str], int, set[str]] | None = None
        self._out_roots: frozenset[Any] = frozenset()
        self._has_writes: bool | None = None
        self._lazy: dict[Node, frozenset[Any]] = {}  # roots found on demand (nothing writes)
        self._lazy_out: bool = False
        self._static: Any = None  # set by _torch_callable/_method: the answer holds for the target

    # ------------------------------------------------------------------ per node

    def effects(self, node: Node) -> NodeEffects:
        """The :class:`NodeEffects` of ``node``."""
        eff = self._node.get(node)
        if eff is not None:
            return eff
        if node.op == "call_function":
            # answers found from the target alone (recorded by _compute for its other calls):
            # no shared entry needed
            t = node.target
            try:
                if _pure_targets.get(t) is self._token:
                    self._node[node] = _PURE
                    return _PURE
                hit = _static_targets.get(t)
            except TypeError:  # unhashable target
                hit = None
            if hit is not None and hit[0] is self._token and _no_flag_kwargs(node._kwargs):
                eff = self._node[node] = hit[1]
                return eff
        entry = self._entry(node)
        if entry is None:
            eff = self._compute(node)
        else:
            eff = entry[4]
            if eff is None:
                eff = entry[4] = self._compute(node)
        self._node[node] = eff
        return eff

    def _shared_table(self, graph: Any) -> dict[Node, list[Any]] | None:
        """The per-node table shared by the analyses of ``graph`` (None: it cannot hold one)."""
        if graph is self._table_graph:
            return self._table
        d = getattr(graph, "__dict__", None)
        if d is None:  # pragma: no cover - a graph without instance attributes
            return None
        table = d.get(_SHARED_ATTR)
        if table is None:
            table = d[_SHARED_ATTR] = {}
        self._table_graph, self._table = graph, table
        # (answers judged as in training mode are this analysis' own: no epoch, no sharing)
        self._epoch = None if self._may_train else d.get(_EPOCH_ATTR)
        return table

    def _entry(self, node: Node) -> list[Any] | None:
        """The graph's shared entry for ``node``, valid for its current target/args/kwargs."""
        table = self._shared_table(node.graph)
        if table is None:  # pragma: no cover
            return None
        entry = table.get(node)
        if (
            entry is not None
            and entry[0] is node.target
            and entry[1] is node._args
            and entry[2] is node._kwargs
            and entry[3] is self._token
            and (entry[6] is _ANY_EPOCH or entry[6] is self._epoch)
        ):
            return entry
        return _new_entry(node, table, self._token, self._epoch)

    def has_side_effects(self, node: Node) -> bool:
        return not self.effects(node).kinds <= NO_SIDE_EFFECT

    def is_random(self, node: Node) -> bool:
        return RANDOM in self.effects(node).kinds

    def written_inputs(self, node: Node) -> list[Node]:
        return list(self.effects(node).writes)

    def is_pure(self, node: Node) -> bool:
        return node.op not in ("placeholder", "output") and not self.effects(node).kinds

    def _compute(self, node: Node) -> NodeEffects:
        op = node.op
        self._static = None
        if op in ("placeholder", "output"):
            return _effects({GRAPH_IO}, reason=f"{op} node")
        if op == "get_attr":
            return _PURE
        if op == "call_function":
            # (the answers found from the target alone, pure whatever the arguments or
            # name-static, were given by effects() before it called this)
            eff = self._function(node)
        elif op == "call_method":
            t = node.target
            hit = _static_methods.get(t) if isinstance(t, str) else None
            if (
                hit is not None
                and hit[0] is self._token
                and _no_flag_kwargs(node._kwargs)
                and getattr(torch.Tensor, t, None) is hit[1]
            ):
                return hit[2]
            eff = self._method(node)
        elif op == "call_module":
            eff = self._call_module(node)
        else:  # pragma: no cover - unknown op kind
            return _effects({UNKNOWN}, node.all_input_nodes, f"unknown op kind {op!r}")
        if not eff.kinds and op != "call_module" and not isinstance(node.target, torch._ops.OpOverload):
            # torch's own judgement, as one more input (it covers registered effects)
            try:
                impure = node.is_impure(impure_random=False)
            except TypeError:  # older torch: no impure_random (and no random rule)
                impure = node.is_impure()
            except Exception:
                impure = False
            if impure:
                eff = _effects({DECLARED}, (), "torch.fx Node.is_impure()")
        if eff is _PURE and op == "call_function" and _pure_whatever_args(node.target):
            _pure_targets[node.target] = self._token
        elif self._static is not None:  # found by the target alone: the same for its other calls
            if op == "call_function":
                _static_targets[node.target] = (self._token, eff)
            else:
                _static_methods[node.target] = (self._token, self._static, eff)
        self._static = None
        return eff

    # call_function -------------------------------------------------------------------------

    def _function(self, node: Node) -> NodeEffects:
        t = node.target
        args, kwargs = tuple(node.args), dict(node.kwargs)
        user, pure, special, op_write, pure_builtin, in_torch_table = _lookups(t)
        if pure:
            return _PURE
        if user is not None:
            writes = node.all_input_nodes if user in (MUTATION, UNKNOWN) else ()
            return _effects({user}, writes, f"{_name(t)} registered as {user}")
        parts: list[NodeEffects] = []
        if special is not None:
            parts.append(_effects({special}, reason=f"{_name(t)} ({special})"))
        if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            return _merge([*parts, self._aten(node, t, args, kwargs)])
        if isinstance(t, torch._ops.HigherOrderOperator):
            return _merge([*parts, self._hop(node, t, args)])
        if op_write or t is builtins.setattr or t is builtins.delattr:
            parts.append(_effects({MUTATION}, _nodes_in(args[:1]), f"{_name(t)} writes its first argument"))
        elif in_torch_table and special is None:
            reason = f"{_name(t)} is in torch.fx.node._side_effectful_functions"
            parts.append(_effects({DECLARED}, reason=reason))
        if parts:
            return _merge(parts)
        mod = getattr(t, "__module__", None)
        if mod in ("_operator", "operator", "math", "cmath") or pure_builtin:
            return _PURE
        if isinstance(t, type) and (mod == "builtins" or mod == "torch" or t is torch.Size):
            return _PURE  # constructing a value: int(...), torch.Size(...), torch.device(...)
        tmod = _torch_module_of(t)
        if tmod in _TORCH_PURE_MODULES:
            return self._torch_callable(node, t, tmod, args, kwargs)
        return _effects({UNKNOWN}, node.all_input_nodes, f"{_name(t)} is not known to be pure")

    def _torch_callable(self, node: Node, t: Any, tmod: str, args: tuple, kwargs: dict) -> NodeEffects:
        name = callable_op_name(t) or ""
        if tmod.startswith("torch") and (name.startswith(("set_", "_set_")) or name in _TORCH_GLOBAL_STATE):
            return _effects({GLOBAL_STATE}, reason=f"torch.{name} changes global state")
        if tmod.startswith("torch") and name in _TORCH_READS_STATE:
            return _effects({READS_STATE}, reason=f"torch.{name} reads global state")
        if _no_flag_kwargs(kwargs) and _static_call(t, name):
            self._static = t
            return self._by_name(node, name, None, (), {}, is_init=(tmod == "torch.nn.init"))
        bound = _bind(t, name, args, kwargs)
        return self._by_name(node, name, bound, args, kwargs, is_init=(tmod == "torch.nn.init"))

    def _by_name(
        self,
        node: Node,
        name: str,
        bound: dict[str, Any] | None,
        args: tuple,
        kwargs: dict,
        *,
        is_init: bool = False,
    ) -> NodeEffects:
        """Effects of a torch-level function or Tensor method from its name and arguments."""
        kinds: set[str] = set()
        writes: list[Node] = []
        reasons = []
        if is_inplace_name(name) or name in _INPLACE_DUNDERS:
            kinds.add(MUTATION)
            writes += _nodes_in(args[:1])
            reasons.append(f"{name} is in-place")
        if kwargs.get("out") is not None:
            kinds.add(MUTATION)
            writes += _nodes_in(kwargs["out"])
            reasons.append("out= argument")
        inplace = bound.get("inplace", _MISSING) if bound is not None else kwargs.get("inplace", _MISSING)
        if inplace is not _MISSING and not _literal_false(inplace) and inplace is not None:
            kinds.add(MUTATION)
            writes += _nodes_in(args[:1]) if args else _nodes_in(bound.get("input") if bound else None)
            reasons.append("inplace=True")
        base = name[:-1] if is_inplace_name(name) else name
        bn = _batch_norm_writes(base, bound, args)
        if bn:
            kinds.add(MUTATION)
            writes += bn
            reasons.append(f"{name} in training mode updates running statistics")
        info = _name_info(name)
        if info is not None and info[2]:
            kinds.add(UNKNOWN)
            writes += node.all_input_nodes
            reasons.append(f"aten.{name} is tagged maybe_aliasing_or_mutating, and what it writes is not known")
        if base in ("embedding", "embedding_bag") and bound is not None:
            mn = bound.get("max_norm")
            if mn is not None:
                kinds.add(MUTATION)
                writes += _nodes_in(bound.get("weight"))
                reasons.append(f"{name} with max_norm renormalises its weight in place")
        # randomness
        cond = _conditional_random(name, bound)
        if cond is None:
            info = _name_info(name) or _name_info(base)
            random = (
                bool(info and info[0])
                or base in _TORCH_RANDOM
                or (is_init and name not in _INIT_DETERMINISTIC)
            )
        else:
            random = cond
        if random:
            kinds.add(RANDOM)
            reasons.append(f"{name} draws random numbers")
        if name in _METHOD_EFFECTS:
            k = _METHOD_EFFECTS[name]
            kinds.add(k)
            if k == UNKNOWN:
                writes += node.all_input_nodes
            reasons.append(f"{name} ({k})")
        if not kinds:
            return _PURE
        return _effects(kinds, writes, "; ".join(reasons))

    def _aten(self, node: Node, t: Any, args: tuple, kwargs: dict) -> NodeEffects:
        ops = [t] if isinstance(t, torch._ops.OpOverload) else _overloads(t)
        name = t.__name__ if isinstance(t, torch._ops.OpOverloadPacket) else t.overloadpacket.__name__
        kind, mutable, seeded, declared, unlisted = _op_info(t, ops, name)
        if (
            not mutable
            and not seeded
            and not unlisted
            and name not in _BATCH_NORM_NAMES
            and name != "instance_norm"
            and isinstance(t, torch._ops.OpOverload)
        ):  # the answer depends on the overload alone: the same for its other calls
            self._static = t
        kinds: set[str] = {kind} if kind else set()
        writes: list[Node] = []
        reasons = [f"{t} ({kind})"] if kind else []
        if mutable:
            for op in ops:
                for a, v in _schema_pairs(op._schema, args, kwargs):
                    if a.alias_info is not None and a.alias_info.is_write:
                        writes += _nodes_in(v)
            if writes or isinstance(t, torch._ops.OpOverload):
                kinds.add(MUTATION)
                reasons.append(f"{t} writes its argument(s) per its schema")
        if unlisted:
            kinds.add(UNKNOWN)
            writes += node.all_input_nodes
            reasons.append(f"{t} is tagged maybe_aliasing_or_mutating, and what it writes is not known")
        if declared and not kinds:
            kinds.add(DECLARED)
            reasons.append(f"{t} is declared effectful to torch")
        if name in _BATCH_NORM_NAMES or name == "instance_norm" or seeded:
            bound = _bind(t if isinstance(t, torch._ops.OpOverload) else None, name, args, kwargs)
            bn = _batch_norm_writes(name, bound, args)
            if bn:
                kinds.add(MUTATION)
                writes += bn
                reasons.append(f"{t} in training mode updates running statistics")
            if seeded and _conditional_random(name, bound) is not False:
                kinds.add(RANDOM)
                reasons.append(f"{t} draws random numbers")
        if not kinds:
            return _PURE
        return _effects(kinds, writes, "; ".join(reasons))

    def _hop(self, node: Node, t: Any, args: tuple) -> NodeEffects:
        name = getattr(t, "_name", None) or getattr(t, "__name__", "") or ""
        if _declared_effect(t):
            return _effects({DECLARED}, node.all_input_nodes, f"{name} is registered as effectful")
        if name in ("auto_functionalized", "auto_functionalized_v2"):
            if args and args[0] in _torch_side_effectful():
                return _effects({DECLARED}, (), f"{name} of a side-effectful op")
            return _PURE
        if name in _RANDOM_HOPS:
            return _effects({RANDOM}, (), f"{name} uses the RNG state")
        if name not in _PURE_HOPS:
            reason = f"higher-order operator {name} is not known to be pure"
            return _effects({UNKNOWN}, node.all_input_nodes, reason)
        parts = []
        for a in _nodes_in(args) + _nodes_in(dict(node.kwargs)):
            if a.op == "get_attr":
                try:
                    sub = self.gm.get_submodule(a.target)  # type: ignore[arg-type]
                except AttributeError:
                    continue
                if isinstance(sub, torch.fx.GraphModule):
                    parts.append(self._module_call(sub, a.target, node))  # type: ignore[arg-type]
        return _merge(parts, f"{name} runs a subgraph with effects") if parts else _PURE

    # call_method ---------------------------------------------------------------------------

    def _method(self, node: Node) -> NodeEffects:
        name = node.target
        assert isinstance(name, str)
        if not hasattr(torch.Tensor, name):
            return _effects({UNKNOWN}, node.all_input_nodes, f".{name}() is not a torch.Tensor method")
        fn = getattr(torch.Tensor, name)
        if _no_flag_kwargs(node._kwargs) and _static_call(fn, name):
            self._static = fn
            return self._by_name(node, name, None, (), {})
        args, kwargs = tuple(node.args), dict(node.kwargs)
        bound = _bind(fn, name, args, kwargs)
        return self._by_name(node, name, bound, args, kwargs)

    # call_module ---------------------------------------------------------------------------

    def _submodule(self, target: Any) -> torch.nn.Module:
        """``gm.get_submodule(target)``, through the module registries (dict lookups instead of
        hasattr/getattr per path element; the same result or AttributeError)."""
        paths = self._paths
        if paths is None:
            paths = self._paths = ModulePaths(self.gm)
        return paths.current_submodule(target)

    def _call_module(self, node: Node) -> NodeEffects:
        try:
            mod = self._submodule(node.target)
        except AttributeError:
            return _effects({UNKNOWN}, node.all_input_nodes, f"submodule {node.target!r} not found")
        return self._module_call(mod, node.target, node)  # type: ignore[arg-type]

    def _module_call(self, mod: torch.nn.Module, prefix: str, node: Node) -> NodeEffects:
        """Effects of calling ``mod`` (qualified name ``prefix``) at ``node``."""
        me = self._module_summary(mod)
        if not me.kinds:
            return _PURE
        # module-level summary -> this call: input writes are marked by the sentinel "input"
        writes = node.all_input_nodes if "input" in me.state_writes else ()
        state = {f"{prefix}.{s}" for s in me.state_writes if s != "input"}
        return _effects(me.kinds, writes, f"{prefix}: {me.reason}", state)

    def _module_summary(self, mod: torch.nn.Module) -> NodeEffects:
        """:meth:`_module_effects`, cached per module object; a module reached again while
        being analysed (a cycle in the module tree) is ``unknown``."""
        key = id(mod)
        me = self._module.get(key)
        if me is not None:
            return me
        if _pure_leaf(mod, self._may_train):
            self._module[key] = _PURE
            return _PURE
        if key in self._in_progress:
            return _effects({UNKNOWN}, (), f"{type(mod).__name__} contains itself", {"input", "*"})
        self._in_progress.add(key)
        try:
            me = self._module_effects(mod)
        finally:
            self._in_progress.discard(key)
        self._module[key] = me
        return me

    def _module_effects(self, mod: torch.nn.Module) -> NodeEffects:
        """Effects of calling ``mod``; ``state_writes`` holds names relative to ``mod`` and the
        sentinel ``"input"`` when the call may write its inputs."""
        cls = type(mod)
        if cls.__name__ == "GuardsFn" and cls.__module__ == "torch.export._unlift":
            # torch.export's input guards: torch._assert calls on the inputs' shapes
            return _effects({ASSERT}, (), "torch.export input guards")
        if _module_attr(mod, "_is_impure", False):
            return _effects({UNKNOWN}, (), f"{cls.__name__} is marked _is_impure", {"input", "*"})
        hooks = module_hooks_reason(mod)
        if hooks is not None:
            return _effects({UNKNOWN}, (), hooks, {"input", "*"})
        if isinstance(mod, torch.fx.GraphModule):
            sub = self._sub.get(id(mod))
            if sub is None:
                sub = self._sub[id(mod)] = EffectAnalysis(mod, modules_may_train=self._may_train)
            return sub._summary()
        standard = _module_is_standard(mod)
        anything = {"input", "*"}  # may write its inputs and all of its state
        if not standard and not any(issubclass(cls, c) for c in _user_pure_modules):
            return _effects({UNKNOWN}, (), f"{cls.__name__} is not a standard torch.nn module", anything)
        lazy = isinstance(mod, torch.nn.modules.lazy.LazyModuleMixin)
        if standard and lazy and mod.has_uninitialized_params():  # type: ignore[operator]
            reason = f"{cls.__name__} initialises its parameters on first call"
            return _effects({UNKNOWN}, (), reason, anything)
        kinds: set[str] = set()
        state: set[str] = set()
        reasons = []
        if _module_attr(mod, "inplace", False) is True:
            kinds.add(MUTATION)
            state.add("input")
            reasons.append(f"{cls.__name__}(inplace=True) writes its input")
        nn = torch.nn
        training = mod.training or self._may_train
        if standard and training:
            if isinstance(mod, (nn.modules.dropout._DropoutNd, nn.RReLU)):
                kinds.add(RANDOM)
                reasons.append(f"{cls.__name__} in training mode is random")
            if isinstance(mod, nn.MultiheadAttention) and mod.dropout:
                kinds.add(RANDOM)
                reasons.append("MultiheadAttention with dropout in training mode is random")
            if isinstance(mod, nn.RNNBase) and mod.dropout and mod.num_layers > 1:
                kinds.add(RANDOM)
                reasons.append(f"{cls.__name__} with dropout in training mode is random")
            if isinstance(mod, (nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm)) and (
                mod.track_running_stats
            ):
                kinds.add(MUTATION)
                state |= {n for n, _ in mod.named_buffers(recurse=False)}
                reasons.append(f"{cls.__name__} in training mode updates its running statistics")
        if standard and training and cls.__name__ == "_SpectralNorm" and cls.__module__ == "torch.nn.utils.parametrizations":
            kinds.add(MUTATION)  # one power-iteration step a call, in place (torch's parametrizations.py)
            state |= {n for n, _ in mod.named_buffers(recurse=False)}
            reasons.append("spectral_norm in training mode updates its power-iteration vectors")
        if standard and isinstance(mod, (nn.Embedding, nn.EmbeddingBag)) and mod.max_norm is not None:
            kinds.add(MUTATION)
            state.add("weight")
            reasons.append(f"{cls.__name__}(max_norm=...) renormalises its weight in place")
        for cname, child in mod.named_children():
            ce = self._module_summary(child)
            if ce.kinds:
                kinds |= ce.kinds
                state |= {"input" if s == "input" else f"{cname}.{s}" for s in ce.state_writes}
                reasons.append(f"{cname}: {ce.reason}")
        if not kinds:
            return _PURE
        return _effects(kinds, (), "; ".join(reasons), state)

    def _summary(self) -> NodeEffects:
        """Effects of running this analysis' graph as a submodule (relative state names)."""
        graph = self.gm.graph  # type: ignore[union-attr]
        kinds: set[str] = set()
        reasons = []
        for n in graph.nodes:
            if n.op in ("placeholder", "output"):
                continue
            e = self.effects(n)
            if e.kinds:
                kinds |= e.kinds
                if len(reasons) < 3:
                    reasons.append(f"%{n.name}: {e.reason}")
        if not kinds:
            return _PURE
        self._sweep()
        state = set(self.mutated_attributes())
        if _INPUT_ROOT in self._written:
            state.add("input")
        state |= {s for s in self._state_written if s.endswith("*")}
        return _effects(kinds, (), "; ".join(reasons), state)

    # ------------------------------------------------------------------ aliasing

    def aliased_inputs(self, node: Node) -> tuple[Node, ...]:
        """Input nodes whose storage ``node``'s output may share (conservative)."""
        try:
            return self._aliases[node]
        except KeyError:
            pass
        entry = self._entry(node)
        if entry is None:
            res = self._compute_aliases(node)
        else:
            res = entry[5]
            if res is None:
                res = entry[5] = self._compute_aliases(node)
        self._aliases[node] = res
        return res

    def _compute_aliases(self, node: Node) -> tuple[Node, ...]:
        op = node.op
        if op in ("placeholder", "get_attr", "output"):
            return ()
        inputs = tuple(node.all_input_nodes)
        if not inputs:
            return ()
        t = node.target
        if op == "call_function" and isinstance(t, torch._ops.OpOverload):
            return self._schema_aliases(node, t)
        writes = self._returned_writes(node)
        if op == "call_function":
            try:
                hit = _fresh_targets.get(t)
            except TypeError:  # unhashable: `t in _user_pure` below raises as it always did
                hit = None
            if hit is not None and hit[0] is self._token:
                fresh = hit[1]
            else:
                fresh = self._target_fresh(t)
                _fresh_targets[t] = (self._token, fresh)
            return tuple(writes) if fresh else inputs
        if op == "call_method":
            if not self._name_may_alias(t):  # type: ignore[arg-type]
                return tuple(writes)
            return inputs
        if op == "call_module":
            try:
                mod = self._submodule(t)
            except AttributeError:
                return inputs
            if (
                _module_is_standard(mod)
                and not getattr(mod, "inplace", False)
                and not list(mod.children())
                and not self._name_may_alias(module_op_name(type(mod)))
            ):
                return ()
            return inputs
        return inputs  # pragma: no cover

    def _target_fresh(self, t: Any) -> bool:
        """Whether a call of the ``call_function`` target ``t`` (not an ``OpOverload``) returns
        a fresh value, apart from the written inputs it returns (:meth:`_returned_writes`);
        else it may alias any input. Decided by the target alone (and the registries)."""
        if t in _user_pure:
            return True
        if t is operator.getitem or t is builtins.getattr:
            return False
        if isinstance(t, torch._ops.OpOverloadPacket) or isinstance(t, torch._ops.HigherOrderOperator):
            return False
        mod = getattr(t, "__module__", None)
        if t in _PURE_BUILTINS or mod in ("math", "cmath"):
            return True
        name = callable_op_name(t)
        if mod in ("_operator", "operator") and name and not self._name_may_alias(name):
            return True
        if _torch_module_of(t) in _TORCH_PURE_MODULES and name and not self._name_may_alias(name):
            return True
        return False

    def _returned_writes(self, node: Node) -> tuple[Node, ...]:
        """Written inputs that the call also returns: ``self`` of an in-place op
        (``x.add_``, ``torch.relu_``, ``inplace=True``, ``operator.iadd``) and ``out=``."""
        eff = self.effects(node)
        if not eff.writes:
            return ()
        if UNKNOWN in eff.kinds:
            return tuple(node.all_input_nodes)
        t = node.target
        name = t if isinstance(t, str) else (callable_op_name(t) or "")
        out: list[Node] = []
        inplace = node.kwargs.get("inplace")
        if is_inplace_name(name) or name in _INPLACE_DUNDERS or inplace or t in _OPERATOR_WRITES:
            out += _nodes_in(node.args[:1])
        first = _nodes_in(node.args[:1])
        if inplace is None and node.op == "call_function" and any(w in first for w in eff.writes):
            # inplace=True given positionally (F.relu(x, True)): the first argument is written
            out += _nodes_in(node.args[:1])
        out += _nodes_in(node.kwargs.get("out"))
        return tuple(dict.fromkeys(out))

    @staticmethod
    def _name_may_alias(name: str) -> bool:
        base = name[:-1] if is_inplace_name(name) else name
        if base in _MAY_RETURN_INPUT or name in _INPLACE_DUNDERS:
            return True
        info = _name_info(name)
        if info is None:
            return True
        return info[1]

    @staticmethod
    def _schema_aliases(node: Node, op: Any) -> tuple[Node, ...]:
        schema = op._schema
        sets: set[str] = set()
        # a list return whose elements alias an argument (``unbind``, ``split``, ``chunk``:
        # ``Tensor(a)[]``) shows an alias_info with empty sets in Python: the element's set is
        # not exposed. Then every argument with an alias annotation may be aliased.
        opaque = False
        for r in schema.returns:
            ai = r.alias_info
            if ai is not None:
                s = set(ai.before_set) | set(ai.after_set)
                sets |= s
                opaque = opaque or not s
        if _tag_unlisted(op):
            return tuple(node.all_input_nodes)
        if not sets and not opaque:  # the schema says: a fresh result
            # unless the composite may return an input (the tagged ops and the others known)
            if op.namespace == "aten" and _COMPOSITE_RESULT_ALIASES.get(op.overloadpacket.__name__):
                return tuple(node.all_input_nodes)
            return ()
        out: list[Node] = []
        for a, v in _schema_pairs(schema, tuple(node.args), dict(node.kwargs)):
            ai = a.alias_info
            if ai is not None and (opaque or (set(ai.before_set) | set(ai.after_set)) & sets):
                out += _nodes_in(v)
        return tuple(out) if out else tuple(node.all_input_nodes)

    # ------------------------------------------------------------------ graph level

    def _root_of_attr(self, node: Node) -> Any:
        try:
            obj: Any = self.gm
            for part in str(node.target).split("."):
                obj = getattr(obj, part)
        except AttributeError:
            return ("attr", node.target)
        if isinstance(obj, torch.Tensor):
            return _storage_key(obj)
        return ("attr", node.target)

    def _sweep(self) -> None:
        if self._roots is not None:
            return
        roots: dict[Node, frozenset[Any]] = {}
        written: set[Any] = set()
        state_written: set[str] = set()
        for n in self.gm.graph.nodes:  # type: ignore[union-attr]
            if n.op == "placeholder":
                roots[n] = frozenset({_INPUT_ROOT})
            elif n.op == "get_attr":
                roots[n] = frozenset({self._root_of_attr(n)})
            elif n.op == "output":
                roots[n] = frozenset()
            else:
                al = self.aliased_inputs(n)
                if al:
                    # a fresh result that is written marks its inputs' roots: conservative
                    r: frozenset[Any] = frozenset().union(*(roots.get(a, frozenset({a})) for a in al))
                    roots[n] = r if len(r) <= _MAX_ROOTS else _ANY_ROOTS
                else:
                    roots[n] = frozenset({n})
                eff = self.effects(n)
                for w in eff.writes:
                    written |= roots.get(w, frozenset({w}))
                state_written |= eff.state_writes
        self._roots = roots
        self._written = written
        self._state_written = state_written
        out = next(iter(self.gm.graph.find_nodes(op="output")), None)  # type: ignore[union-attr]
        self._out_roots = frozenset().union(*(roots[a] for a in out.all_input_nodes)) if out else frozenset()

    def alias_roots(self, node: Node) -> frozenset[Any]:
        """Storage roots ``node``'s value may share: one root for all placeholders (they may
        alias each other), one per parameter/buffer storage, the node itself when its value is
        fresh, or the single root "any" when the set grew beyond 64 (it overlaps everything)."""
        if self._roots is None and not self.has_writes():
            return self._lazy_root(node)
        self._sweep()
        assert self._roots is not None
        r = self._roots.get(node)
        return r if r is not None else frozenset({node})

    def _lazy_root(self, node: Node) -> frozenset[Any]:
        """The roots the sweep would give ``node``, found by walking back only along alias
        edges (a fresh value stops the walk at once), for graphs where nothing writes: then
        only the roots of asked-about values and of the output are needed, not all of them.
        Values are computed from the graph as it is when first asked about."""
        memo = self._lazy
        r = memo.get(node)
        if r is not None:
            return r
        stack = [node]
        active = {node}
        while stack:
            n = stack[-1]
            if n in memo:
                stack.pop()
                active.discard(n)
                continue
            op = n.op
            if op == "placeholder":
                r = frozenset({_INPUT_ROOT})
            elif op == "get_attr":
                r = frozenset({self._root_of_attr(n)})
            elif op == "output":
                r = frozenset()
            else:
                al = self.aliased_inputs(n)
                pending = [a for a in al if a not in memo and a not in active]
                if pending:
                    stack.extend(pending)
                    active.update(pending)
                    continue
                if al:
                    r = frozenset().union(*(memo.get(a, frozenset({a})) for a in al))
                    if len(r) > _MAX_ROOTS:
                        r = _ANY_ROOTS
                else:
                    r = frozenset({n})
            memo[n] = r
            stack.pop()
            active.discard(n)
        return memo[node]

    def _lazy_out_roots(self) -> frozenset[Any]:
        if not self._lazy_out:
            self._lazy_out = True
            out = next(iter(self.gm.graph.find_nodes(op="output")), None)  # type: ignore[union-attr]
            if out is not None:
                self._out_roots = frozenset().union(*(self._lazy_root(a) for a in out.all_input_nodes))
        return self._out_roots

    def has_writes(self) -> bool:
        """Whether any node of the graph may write a tensor or module state. When none does,
        nothing is written through any alias, so the questions about writes are answered
        without the aliasing sweep (which is most of this analysis's cost on big graphs)."""
        if self._has_writes is None:
            if self._roots is not None:
                self._has_writes = bool(self._written or self._state_written)
            else:
                self._has_writes = self._scan_writes()
        return self._has_writes

    def _scan_writes(self) -> bool:
        """Whether some node writes: :meth:`effects` of every node that may write, with the
        shared table's valid answers read in place (the same answers, memoized as effects()
        memoizes them, without a call per node: this walk is done once per pass)."""
        graph = self.gm.graph  # type: ignore[union-attr]
        index = getattr(getattr(graph, "_find_nodes_lookup_table", None), "table", None)
        if isinstance(index, dict):
            return self._scan_writes_by_target(index)
        return self._scan_writes_of(graph.nodes)  # pragma: no cover - torch without the index

    def _scan_writes_by_target(self, index: dict[tuple[str, Any], dict[Node, None]]) -> bool:
        """:meth:`_scan_writes` through FX's index of nodes by ``(op, call_function target)``:
        a target pure whatever its arguments (``_pure_targets``) writes nothing at any of its
        calls, and one whose effects follow from its name (``_static_targets``) writes nothing
        at a call without ``out=``/``inplace``, so their buckets are passed over after one
        node (three quarters of the nodes of an exported or traced model are such calls)."""
        token = self._token
        for (op, target), bucket in list(index.items()):
            if not bucket or op == "placeholder" or op == "get_attr" or op == "output":
                continue  # they write nothing
            if op != "call_function":
                if self._scan_writes_of(bucket):
                    return True
                continue
            nodes = list(bucket)
            if self._scan_writes_of(nodes[:1]):  # its answer tells what the target is
                return True
            rest = nodes[1:]
            if _pure_targets.get(target) is token:
                continue
            hit = _static_targets.get(target)
            if hit is not None and hit[0] is token and not (hit[1].writes or hit[1].state_writes):
                # the rest write nothing unless a flag keyword asks for a write
                rest = [m for m in rest if not _no_flag_kwargs(m._kwargs)]
            if self._scan_writes_of(rest):
                return True
        return False

    def _scan_writes_of(self, nodes: Any) -> bool:
        """Whether one of ``nodes`` may write (the per-node part of :meth:`_scan_writes`)."""
        graph = self.gm.graph  # type: ignore[union-attr]
        table = self._shared_table(graph) or {}
        token = self._token
        epoch = self._epoch if self._epoch is not None else _NO_EPOCH
        memo = self._node
        effects = self.effects
        for n in nodes:
            op = n.op
            if op == "call_function" or op == "call_method" or op == "call_module":
                eff = memo.get(n)
                if eff is None:
                    e = table.get(n)
                    if (
                        e is not None
                        and e[4] is not None
                        and e[0] is n.target
                        and e[1] is n._args
                        and e[2] is n._kwargs
                        and e[3] is token
                        and (e[6] is _ANY_EPOCH or e[6] is epoch)
                    ):
                        eff = memo[n] = e[4]  # as effects() would leave it
                    else:
                        eff = effects(n)
            elif op == "placeholder" or op == "get_attr" or op == "output":  # write nothing
                continue
            else:
                eff = effects(n)
            if eff.writes or eff.state_writes:
                return True
        return False

    def is_written(self, node: Node) -> bool:
        """Whether some node of the graph may write ``node``'s value (through any alias)."""
        if not self.has_writes():
            return False
        self._sweep()
        return _overlap(self.alias_roots(node), self._written)

    def reads_written_state(self, node: Node) -> bool:
        """Whether a ``call_module`` node's module has a parameter/buffer that the graph may
        write (so two calls with equal inputs may differ, and no call is a constant)."""
        if node.op != "call_module":
            return False
        mutated = self.mutated_attributes()
        if not mutated:
            return False
        owners = self._mutated_owners
        if owners is None or owners[0] is not mutated or owners[1] != len(mutated):
            # every module path that holds a written name ("a.b.c": "a" and "a.b"), once: a
            # scan of the names per call was quadratic (the training preset's CSE asked it for
            # each module call, with three written statistics per batch norm module)
            paths = {name[:i] for name in mutated for i, c in enumerate(name) if c == "."}
            owners = self._mutated_owners = (mutated, len(mutated), paths)
        return node.target in owners[2]

    def reaches_output(self, node: Node) -> bool:
        """Whether ``node``'s value may be returned by the graph (itself or through a view)."""
        if self._roots is None and not self.has_writes():
            return _overlap(self._lazy_root(node), self._lazy_out_roots())
        self._sweep()
        return _overlap(self.alias_roots(node), self._out_roots)

    def may_alias(self, a: Node, b: Node) -> bool:
        """Whether the values of ``a`` and ``b`` may share storage."""
        return _overlap(self.alias_roots(a), self.alias_roots(b))

    def is_fresh(self, node: Node) -> bool:
        """Whether ``node``'s value is a new tensor when it is made: not a placeholder or
        module tensor, not a view or the very tensor of another value (views of it come later)."""
        return self.alias_roots(node) == frozenset({node})

    def mark_reaches_output(self, node: Node) -> None:
        """Record that ``node``'s value now reaches the output (with everything that may alias
        it): call it when a pass rewires the uses of a value that reached the output to
        ``node`` and keeps asking this analysis (graph-level answers come from one sweep and
        do not follow edits by themselves)."""
        if self._roots is None and not self.has_writes():
            self._out_roots = self._lazy_out_roots() | self._lazy_root(node)
            return
        self._sweep()
        self._out_roots = self._out_roots | self.alias_roots(node)

    def mutated_attributes(self) -> set[str]:
        """Qualified names of parameters, buffers and tensor attributes of ``gm`` that the graph
        may write: directly, through views, through storage shared with a written tensor, or
        inside a called submodule."""
        if self._mutated is not None:
            return self._mutated
        if not self.has_writes():
            self._mutated = set()
            return self._mutated
        self._sweep()
        if (
            not self._state_written
            and _ANY_ROOT not in self._written
            and not any(isinstance(k, tuple) and k[0] in ("storage", "tensor") for k in self._written)
        ):  # nothing writes module state: no need to name every tensor of the module
            self._mutated = set()
            return self._mutated
        gm = self.gm
        named: dict[str, torch.Tensor] = {}
        for name, t in gm.named_parameters(remove_duplicate=False):
            named[name] = t
        for name, t in gm.named_buffers(remove_duplicate=False):
            named[name] = t
        for n in gm.graph.find_nodes(op="get_attr"):  # type: ignore[union-attr]
            try:
                obj: Any = gm
                for part in str(n.target).split("."):
                    obj = getattr(obj, part)
            except AttributeError:
                continue
            if isinstance(obj, torch.Tensor):
                named[str(n.target)] = obj
        keys = {name: _storage_key(t) for name, t in named.items()}
        written_keys = {k for k in self._written if isinstance(k, tuple) and k[0] in ("storage", "tensor")}
        if _ANY_ROOT in self._written:  # a write through a value that may alias anything
            written_keys = set(keys.values())
        mutated = {name for name, k in keys.items() if k in written_keys}
        for s in self._state_written:
            if s.endswith("*"):
                prefix = s[:-1]
                mutated |= {name for name in named if name.startswith(prefix)}
            elif s in named:
                mutated.add(s)
        mutated_keys = {keys[m] for m in mutated if m in keys}
        mutated |= {name for name, k in keys.items() if k in mutated_keys}
        self._mutated = mutated
        return mutated


class WriteClock:
    """Versions of values along a forward walk of the graph, for comparing two reads.

    Call :meth:`record` on each node in graph order (after looking at it); two reads of one
    node give the same :meth:`version` exactly when no write that may alias the node's value
    happened between them.
    """

    def __init__(self, analysis: EffectAnalysis) -> None:
        self.analysis = analysis
        self._epoch: dict[Any, int] = {}
        self._writes = 0  # all writes
        self._any_writes = 0  # writes through values that may alias anything

    def record(self, node: Node) -> None:
        """Account for the writes ``node`` does."""
        for w in self.analysis.effects(node).writes:
            self._writes += 1
            roots = self.analysis.alias_roots(w)
            if _ANY_ROOT in roots:
                self._any_writes += 1
            else:
                for r in roots:
                    self._epoch[r] = self._epoch.get(r, 0) + 1

    def version(self, node: Node) -> int:
        """A number that grows whenever a write may have changed ``node``'s value."""
        if not self._writes:  # no write yet on this walk: every value is at version 0
            return 0
        roots = self.analysis.alias_roots(node)
        if _ANY_ROOT in roots:
            return self._writes
        return self._any_writes + sum(self._epoch.get(r, 0) for r in roots)


def _name(t: Any) -> str:
    if isinstance(t, str):
        return t
    mod = getattr(t, "__module__", None)
    qual = getattr(t, "__qualname__", None) or getattr(t, "__name__", None)
    if qual is None:
        return str(t)
    return f"{mod}.{qual}" if mod and mod != "builtins" else qual


# ---------------------------------------------------------------------------------------------
# convenience functions


def _analysis(node: Node, gm: torch.nn.Module | None) -> EffectAnalysis:
    root = gm if gm is not None else node.graph.owning_module
    if root is None:
        root = torch.fx.GraphModule(torch.nn.Module(), node.graph)
    return EffectAnalysis(root)


def node_effects(node: Node, gm: torch.nn.Module | None = None) -> NodeEffects:
    """The :class:`NodeEffects` of ``node`` (``gm``: the module owning its graph, default the
    graph's owning module)."""
    return _analysis(node, gm).effects(node)


def has_side_effects(node: Node, gm: torch.nn.Module | None = None) -> bool:
    """True when ``node`` must be kept even if its result is unused: it mutates, is random
    (advances the global RNG), asserts, prints, profiles, changes global state, is a
    placeholder/output, or cannot be shown pure."""
    return not node_effects(node, gm).kinds <= NO_SIDE_EFFECT


def is_random(node: Node, gm: torch.nn.Module | None = None) -> bool:
    """True when ``node`` draws random numbers (see the module documentation)."""
    return RANDOM in node_effects(node, gm).kinds


def written_inputs(node: Node, gm: torch.nn.Module | None = None) -> list[Node]:
    """Input nodes whose value ``node`` may mutate (all inputs for unknown effects)."""
    return list(node_effects(node, gm).writes)


def is_pure(node: Node, gm: torch.nn.Module | None = None) -> bool:
    """True when ``node`` computes its result from its inputs only and does nothing else:
    no effect of any kind (``get_attr`` is pure; placeholders and output are not)."""
    return node.op not in ("placeholder", "output") and not node_effects(node, gm).kinds


def may_alias_inputs(node: Node, gm: torch.nn.Module | None = None) -> bool:
    """True when ``node``'s output may share storage with one of its inputs."""
    return bool(_analysis(node, gm).aliased_inputs(node))


def mutated_attributes(gm: torch.fx.GraphModule) -> set[str]:
    """Qualified names of the parameters/buffers/tensor attributes ``gm``'s graph may write."""
    return EffectAnalysis(gm).mutated_attributes()
