"""Facts about FX nodes that several built-in passes need: arguments, mutation, aliasing.

Replacing a node by one of its inputs (``x * 1 -> x``, an active dropout -> its input) is exact
for values, but it can change *which tensors are the same object*:

- an output may start to alias a graph input, a parameter or another output
  (``return x * 1`` gives a fresh tensor, ``return x`` gives the caller's own tensor);
- an in-place op on the result now writes into the input, and an in-place op on the input is
  now seen by the result's users.

:func:`substitution_problem` tells whether such a replacement is safe. Its rules are
deliberately conservative (no full alias analysis):

1. if anything in the graph may write a tensor in place (:func:`may_mutate`), it is unsafe;
2. otherwise only outputs can observe aliasing: it is safe unless the replaced node reaches
   the output (directly or through ops that may return a view, see :func:`reaches_output`)
   and the replacement is not a fresh, otherwise unreturned tensor.
"""

from __future__ import annotations

import functools
import inspect
import operator
from typing import Any, Callable, Iterable

import torch
import torch.fx
from torch.fx.node import Node

from fxpasses.ops import callable_op_name, is_inplace_name, module_op_name

__all__ = [
    "arg",
    "is_torch_op",
    "may_mutate",
    "first_mutation",
    "lazy_first_mutation",
    "returns_fresh",
    "reaches_output",
    "substitution_problem",
    "erase_dead",
]

_MISSING = object()


def arg(node: Node, index: int, name: str, default: Any = _MISSING) -> Any:
    """Argument ``name`` of a call, given at position ``index`` or as a keyword.

    Raises ``KeyError`` when it is absent and no ``default`` is given.
    """
    if len(node.args) > index:
        return node.args[index]
    if name in node.kwargs:
        return node.kwargs[name]
    if default is _MISSING:
        raise KeyError(name)
    return default


def is_torch_op(target: Any) -> bool:
    """Whether a ``call_function`` target is PyTorch's or Python's own operator (an ATen
    overload, an ``operator`` function, a ``torch``/``torch.nn.functional``/``Tensor``
    function), not a user function that happens to share its name."""
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return target.namespace == "aten"
    module = getattr(target, "__module__", None)
    if module in ("_operator", "operator"):
        return True
    name = getattr(target, "__name__", None)
    if not isinstance(name, str):
        return False
    return any(getattr(ns, name, None) is target for ns in (torch, torch.nn.functional, torch.Tensor))


# Canonical op names (see fxpasses.ops) whose result is always a new tensor, never a view or
# the input itself. A whitelist on purpose: composite ops such as dropout or type_as may
# return their input although their schema says otherwise.
FRESH_OPS = frozenset(
    """
    add sub rsub mul div true_divide divide floor_divide remainder fmod pow neg abs exp exp2
    expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan atan2 sinh cosh tanh
    sigmoid relu relu6 gelu silu mish hardtanh hardswish hardsigmoid leaky_relu elu selu celu
    softplus erf erfc reciprocal sign floor ceil round trunc frac clamp clamp_min clamp_max
    minimum maximum where lerp addcmul addcdiv square bitwise_and bitwise_or bitwise_xor
    bitwise_not logical_and logical_or logical_not logical_xor eq ne lt le gt ge isnan isinf
    isfinite sum mean prod amax amin var std norm logsumexp argmax argmin all any cumsum
    cumprod softmax log_softmax matmul mm bmm addmm baddbmm linear conv1d conv2d conv3d
    convolution _convolution conv_transpose1d conv_transpose2d conv_transpose3d batch_norm
    layer_norm group_norm embedding max_pool1d max_pool2d max_pool3d avg_pool1d avg_pool2d
    avg_pool3d adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d zeros ones full empty
    arange rand randn randint zeros_like ones_like full_like empty_like rand_like randn_like
    randint_like new_zeros new_ones new_full new_empty linspace eye scalar_tensor clone cat
    concat concatenate stack _to_copy copy
    """.split()
)


@functools.lru_cache(maxsize=None)
def _signature(fn: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _inplace_flag(node: Node) -> bool:
    """``inplace=True`` given to a Python function such as ``F.relu``."""
    if node.kwargs.get("inplace") is True:
        return True
    if node.op != "call_function" or isinstance(node.target, torch._ops.OpOverload):
        return False
    try:
        sig = _signature(node.target)
    except TypeError:  # unhashable target
        return False
    if sig is None or "inplace" not in sig.parameters:
        return False
    try:
        bound = sig.bind(*node.args, **node.kwargs)
    except TypeError:
        return False
    return bound.arguments.get("inplace") is True


def may_mutate(node: Node, gm: torch.nn.Module) -> bool:
    """Whether ``node`` may write one of its tensor arguments in place.

    True for in-place ops (``add_``, ``aten.add_.Tensor``, ``operator.iadd``), ``out=``
    calls, ATen ops whose schema writes an argument, ``operator.setitem``,
    ``inplace=True`` calls and modules, and modules from outside ``torch`` (unknown code).
    """
    op = node.op
    if op in ("placeholder", "get_attr", "output"):
        return False
    if "out" in node.kwargs or _inplace_flag(node):
        return True
    if op == "call_method":
        return is_inplace_name(node.target) or node.target == "__setitem__"  # type: ignore[arg-type]
    if op == "call_module":
        try:
            mod = gm.get_submodule(node.target)  # type: ignore[arg-type]
        except AttributeError:
            return True
        if getattr(mod, "inplace", False) is True:
            return True
        if isinstance(mod, torch.fx.GraphModule):
            return first_mutation(mod) is not None
        return not type(mod).__module__.startswith("torch.")
    target = node.target
    if target is operator.setitem:
        return True
    if isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
        return True
    name = callable_op_name(target)
    return bool(name) and is_inplace_name(name)


def first_mutation(gm: torch.fx.GraphModule) -> Node | None:
    """The first node of ``gm`` that :func:`may_mutate`, or None."""
    for node in gm.graph.nodes:
        if may_mutate(node, gm):
            return node
    return None


def lazy_first_mutation(gm: torch.fx.GraphModule) -> Callable[[], Node | None]:
    """:func:`first_mutation`, computed on the first call only (an O(n) scan a pass should
    not pay when it finds nothing to do)."""
    found: list[Node | None] = []

    def get() -> Node | None:
        if not found:
            found.append(first_mutation(gm))
        return found[0]

    return get


def returns_fresh(node: Node, gm: torch.nn.Module) -> bool:
    """Whether ``node``'s result is certainly a new tensor (not a view, not an input).

    Placeholders, get_attr nodes (parameters), views, ``getitem`` and unknown ops are not.
    """
    if node.op == "call_function":
        name = callable_op_name(node.target)
    elif node.op == "call_method":
        name = node.target  # type: ignore[assignment]
    elif node.op == "call_module":
        try:
            mod = gm.get_submodule(node.target)  # type: ignore[arg-type]
        except AttributeError:
            return False
        if getattr(mod, "inplace", False) is True or not type(mod).__module__.startswith("torch.nn"):
            return False
        name = module_op_name(type(mod))
    else:
        return False
    return name in FRESH_OPS and not may_mutate(node, gm)


def reaches_output(node: Node, gm: torch.nn.Module) -> bool:
    """Whether ``node``'s tensor, or a view of it, may be returned by the graph.

    Follows users through every op that is not known to return a fresh tensor.
    """
    seen = {node}
    work = [node]
    while work:
        n = work.pop()
        for user in n.users:
            if user.op == "output":
                return True
            if user not in seen and not returns_fresh(user, gm):
                seen.add(user)
                work.append(user)
    return False


def substitution_problem(
    old: Node, new: Any, gm: torch.fx.GraphModule, find_mutation: Callable[[], Node | None]
) -> str | None:
    """Why replacing every use of ``old`` (a fresh result) by ``new`` changes aliasing.

    ``find_mutation`` returns the graph's first mutating node (see
    :func:`lazy_first_mutation`). Returns None when the replacement is safe (see the module
    doc for the rules).
    """
    if not isinstance(new, Node):
        return None
    mutation = find_mutation()
    if mutation is not None:
        return (
            f"the graph writes tensors in place (%{mutation.name}), so replacing a fresh "
            "result by its input could change what an in-place op writes or sees"
        )
    if reaches_output(old, gm) and (not returns_fresh(new, gm) or reaches_output(new, gm)):
        what = "a graph input" if new.op == "placeholder" else (
            "a parameter or buffer" if new.op == "get_attr" else f"%{new.name}"
        )
        return (
            f"%{old.name} is returned by the graph: returning {what} instead would make the "
            "output alias it"
        )
    return None


def erase_dead(graph: torch.fx.Graph, nodes: Iterable[Node], *, inputs: bool = True) -> int:
    """Erase each of ``nodes`` that is still in the graph and has no users.

    With ``inputs``, dead ``get_attr`` inputs of erased nodes go too (never placeholders).
    Only for nodes a pass itself orphaned and knows to be pure. Returns how many were erased.
    """
    count = 0
    work = list(nodes)
    while work:
        n = work.pop(0)
        if n._erased or n.users or n.op in ("placeholder", "output"):
            continue
        ins = list(n.all_input_nodes)
        graph.erase_node(n)
        count += 1
        if inputs:
            work.extend(i for i in ins if i.op == "get_attr")
    return count
