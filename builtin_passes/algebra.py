"""``simplify_algebra``: remove arithmetic identities (x*1, x+0, neg(neg(x)), ...)."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx
from pydantic import Field
from torch.fx.node import Node

from fxpasses import NodePass, PassContext, PassOptions, Replace, on
from fxpasses.ops import callable_op_name

from fxpasses.dialect import detect_dialect
from fxpasses.effects import EffectAnalysis
from fxpasses.guards import guard_inputs, inputs_reaching, unguardable_inputs, unguarded_inputs

from ._facts import arg, erase_dead, is_torch_op, substitution_problem

__all__ = ["SimplifyAlgebra"]

_ZERO_FILLS = {"zeros": None, "zeros_like": None, "new_zeros": None}
_ONE_FILLS = {"ones": None, "ones_like": None, "new_ones": None}
# creation ops with an explicit fill value: name -> (position, keyword) of the value
_FULL = {"full": (1, "fill_value"), "full_like": (1, "fill_value"), "new_full": (2, "fill_value"),
         "scalar_tensor": (0, "s")}
_KNOWN_KWARGS = {"input", "self", "other", "exponent", "alpha", "rounding_mode"}


class SimplifyAlgebraOptions(PassOptions):
    """Options of ``simplify_algebra``."""

    keep_signed_zeros: bool = Field(
        True,
        description="keep floating-point x + 0 and x - (-0.0): they turn -0.0 into +0.0, which "
        "1/x, atan2 or copysign tell apart (1/(x*0 + 0) is +inf where 1/(x*0) is -inf for "
        "negative x); false simplifies them anyway, as TorchInductor does",
    )
    specialize: bool = Field(
        False,
        description="on a symbolic_trace graph (which takes inputs of any shape and dtype), rewrites that "
        "rely on the shapes and dtypes recorded from the example inputs (propagate_shapes): false keeps them "
        "(and says why); true makes them and adds a check of every input's sizes, strides, dtype and device: "
        "the graph then raises for inputs unlike the example",
    )


class SimplifyAlgebra(NodePass):
    """Replace x*1, 1*x, x+0, 0+x, x-0, x/1, x**1 and neg(neg(x)) by x where that is exact.

    Every dialect's spelling is matched through the op families ``mul``, ``add``, ``sub``,
    ``div``, ``pow`` and ``neg``: ``operator.mul``, ``torch.mul``, ``Tensor.mul``
    (call_method), ``aten.mul.Tensor``/``aten.mul.Scalar``, ``aten.add.Tensor`` with
    ``alpha``, ``torch.true_divide``, ``aten.neg.default``, ... The identity operand is a
    Python number (``1``, ``1.0``, ``True``; ``0``, ``0.0``) or a node that creates a filled
    tensor (``zeros``/``ones``/``zeros_like``/``ones_like``/``new_zeros``/``full(..., 0)``...).

    A node is replaced by its operand ``x`` only when all of these hold:

    - **dtype, shape, device and strides are provably unchanged**: both the node and ``x``
      carry ``meta["val"]``/``["example_value"]``/``["tensor_meta"]`` (export, TorchDynamo,
      or ``propagate_shapes`` run first) and they agree. Type promotion (``int * 1.0`` is
      float, ``bool * 1`` is int64, ``int / 1`` is float) and broadcasting
      (``x + zeros(bigger)``) therefore block it. Without metadata only ``neg(neg(x))`` is
      simplified (negation never changes dtype or shape; on a bool tensor, where ``-x``
      raises, the simplified graph returns ``x`` instead of raising).
    - **the recorded facts hold for every input the graph accepts**: TorchDynamo guards its
      graphs on every input's shape, stride, dtype and device, and ``torch.export``'s module
      checks the inputs' shapes. An exported program is specialised to the dtypes and
      layouts of its example inputs as well ("run on different inputs as long as they satisfy
      the same conditions", torch.export's programming model), which its module does not
      check: called with another dtype or a non-contiguous input, it may compute something
      else after this pass (``(x * 1).view(-1)`` becomes ``x.view(-1)``, which refuses a
      non-contiguous ``x``), as it may after torch's own export passes. A
      ``symbolic_trace`` graph takes inputs of any shape and dtype, and the facts
      ``propagate_shapes`` (or ``ShapeProp``) records on it are those of the example inputs:
      ``x - zeros(5)`` is ``x`` for an ``x`` of shape ``(4, 5)``, not for one of shape
      ``(1,)``; ``x * 1.0`` is ``x`` for a float ``x``, not an int one. There the rewrite is
      kept (and the report says why) unless ``specialize=true``, which makes it and adds, at
      the top of the graph, a check of each input's recorded sizes, strides, dtype and device
      (:func:`fxpasses.guards.input_guard`, an assert that ``eliminate_dead_code``
      and torch's keep; counter ``input_guards``): the graph then raises ``AssertionError:
      input 'x' is sizes (1,), strides (1,), torch.float32, on cpu; the graph was specialised
      to sizes (4, 5), strides (5, 1), torch.float32, on cpu by simplify_algebra{specialize=true}
      ...`` for an input unlike the example instead of computing something else. A graph with
      such checks (matching the recorded facts) counts as guarded in later runs.
    - the op is the plain identity: ``alpha`` finite (``x + a*0``) or 1 (``0 + a*x``), no
      ``rounding_mode`` (``floor(x / 1)`` is not ``x`` for floats), no ``out=``, never
      ``rsub``.
    - the identity operand is what it was made as: a filled tensor (or the inner ``neg``)
      that the graph may write in place (``z = zeros_like(x); z.add_(1); x + z``) is not one.
    - **aliasing is unchanged** (``_facts.substitution_problem``): ``x * 1`` is a new tensor
      while ``x`` may be the caller's input; the node is kept when it (or a view of it) is
      returned by the graph and ``x`` is not a fresh, otherwise unreturned tensor, and when
      the graph may write the node's value or ``x`` in place (through any alias, by any op,
      unknown functions and modules included; see :mod:`fxpasses.effects`).

    ``x + 0`` turns ``-0.0`` into ``+0.0`` (``1 / (x * 0 + 0)`` is ``+inf`` where
    ``1 / (x * 0)`` is ``-inf`` for negative ``x``), so on floating point it is kept by
    default: outputs stay bit-identical. ``keep_signed_zeros=false`` simplifies it anyway, like
    TorchInductor's ``remove_no_ops`` (``torch/_inductor/fx_passes/joint_graph.py``).

    Options: ``keep_signed_zeros: bool = True``, ``specialize: bool = False``. Counters:
    ``simplified``, ``input_guards``; refused candidates are reported with the reason.
    """

    name = "simplify_algebra"
    writes_tensors = False  # rewrites the graph; new tensors only (no rollback guard needed)
    journal_edits = True  # edits only through torch.fx's editing methods and the context
    Options = SimplifyAlgebraOptions
    after = ("propagate_shapes",)
    before = ("eliminate_dead_code",)

    def setup(self, gm: torch.fx.GraphModule, ctx: PassContext) -> None:
        self._effects = EffectAnalysis(gm)  # swept on first use
        self._orphans: list[Node] = []
        self._names: dict[Any, str | None] = {}  # call_function target -> _name, for this run
        self._unguarded: list[Node] | bool = True  # (unknown yet) see _facts_problem
        self._unguardable: dict[Node, str] = {}  # node -> why no guard makes its facts hold
        self._guard = False  # a rewrite relied on facts that input guards must make hold

    def finish(self, gm: torch.fx.GraphModule, ctx: PassContext) -> None:
        erase_dead(ctx.graph, self._orphans, inputs=False)
        if self._guard and self._unguarded:
            ctx.count("input_guards", guard_inputs(ctx, self._unguarded, "simplify_algebra{specialize=true}"))

    def _facts_problem(self, ctx: PassContext, node: Node) -> str | None:
        """Why the recorded shapes and dtypes of ``node`` and its inputs may not hold for the
        graph's other inputs (a ``symbolic_trace`` graph without input guards), or None; with
        ``specialize``, None and the guards are added at the end of the run. A node whose
        value depends on an input no guard can check (a list, None, symbolic sizes) is kept;
        the others do not depend on it and are simplified under the other inputs' guards."""
        if self._unguarded is True:
            self._unguarded = []
            if detect_dialect(ctx.gm) == "symbolic_trace":
                self._unguarded = unguarded_inputs(ctx.graph, guardable_only=True) or []
                found = unguardable_inputs(ctx.graph)
                why = dict(found)
                self._unguardable = {n: why[p] for n, p in inputs_reaching([p for p, _ in found]).items()}
        why = self._unguardable.get(node)
        if why is not None:
            return f"a symbolic_trace graph takes inputs of any shape and dtype, and {why}"
        if not self._unguarded or self.options.specialize:
            return None  # (specialize: the caller asks for the guards once the rewrite is made)
        return (
            "the shapes and dtypes in node.meta are the example inputs', and a symbolic_trace graph takes "
            "inputs of any shape and dtype (option specialize=true simplifies and adds a check of each input)"
        )

    @on("mul", "add", "sub", "div", "pow", "neg", op=("call_function", "call_method"))
    def simplify(self, node: Node, ctx: PassContext) -> Any:
        found = _identity(node, self._names)
        if found is None:
            return None
        x, spent, what = found
        problem = _type_problem(node, x, allow_unknown=what == "neg(neg(x))")
        relies_on_facts = what != "neg(neg(x))"
        if problem is None and relies_on_facts:
            problem = self._facts_problem(ctx, node)
        if problem is not None:
            return ctx.skip(node, f"{what} kept: {problem}")
        if isinstance(spent, Node) and self._effects.is_written(spent):
            # the filled tensor (or the inner neg) may hold other values by the time it is read
            return ctx.skip(node, f"{what} kept: %{spent.name} may be written in place")
        if self.options.keep_signed_zeros and _may_flip_zero_sign(node, spent, what, self._names):
            facts = _tensor_facts(x)
            if facts is None or facts[1].is_floating_point:
                return ctx.skip(node, f"{what} kept (keep_signed_zeros): it turns -0.0 into +0.0")
        problem = substitution_problem(node, x, self._effects)
        if problem is not None:
            return ctx.skip(node, f"{what} kept: {problem}")
        if isinstance(spent, Node):
            self._orphans.append(spent)
        if relies_on_facts and self._unguarded:
            self._guard = True  # specialize: the facts must hold for every input (finish)
        ctx.count("simplified")
        return Replace(x)


def _name(node: Node, names: dict[Any, str | None] | None = None) -> str | None:
    """Canonical op name of a call_method, or of a call_function of PyTorch's own operators.

    ``names`` caches the answer per call_function target (the caller keeps it for one run).
    """
    op = node.op
    if op == "call_method":
        return node.target  # type: ignore[return-value]
    if op != "call_function":
        return None
    target = node.target
    if names is not None:
        try:
            return names[target]
        except KeyError:
            name = names[target] = callable_op_name(target) if is_torch_op(target) else None
            return name
        except TypeError:  # an unhashable target: not cached
            pass
    return callable_op_name(target) if is_torch_op(target) else None


# every name _identity can simplify (other names give None whatever the arguments)
_BINARY = frozenset({"mul", "multiply", "add", "sub", "subtract", "div", "divide", "true_divide", "pow"})


def _identity(node: Node, names: dict[Any, str | None] | None = None) -> tuple[Node, Any, str] | None:
    """``(x, the identity operand or inner neg, description)`` when ``node`` is an identity.

    ``names``: a cache for :func:`_name`.
    """
    name = _name(node, names)
    if not isinstance(name, str):
        return None
    kwargs = node.kwargs
    if kwargs and (not _KNOWN_KWARGS.issuperset(kwargs) or kwargs.get("rounding_mode") is not None):
        return None
    args = node.args
    a = args[0] if len(args) > 0 else kwargs.get("input", kwargs.get("self"))
    if name in ("neg", "negative"):
        if len(args) + len(kwargs) != 1 or not isinstance(a, Node):
            return None
        inner = _name(a, names)
        x = arg(a, 0, "input", a.kwargs.get("self"))
        if inner in ("neg", "negative") and len(a.args) + len(a.kwargs) == 1 and isinstance(x, Node):
            return x, a, "neg(neg(x))"
        return None
    if name not in _BINARY:
        return None
    b = args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("exponent"))
    alpha = kwargs.get("alpha", 1) if kwargs else 1
    if not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        return None
    if name in ("mul", "multiply"):
        if isinstance(a, Node) and _fill(b, names) == 1:
            return a, b, "x * 1"
        if isinstance(b, Node) and _fill(a, names) == 1:
            return b, a, "1 * x"
    elif name == "add":
        if isinstance(a, Node) and _fill(b, names) == 0:
            return a, b, "x + 0"
        if alpha == 1 and isinstance(b, Node) and _fill(a, names) == 0:
            return b, a, "x + 0"
    elif name in ("sub", "subtract"):
        if isinstance(a, Node) and _fill(b, names) == 0:
            return a, b, "x - 0"
    elif name in ("div", "divide", "true_divide"):
        if isinstance(a, Node) and _fill(b, names) == 1:
            return a, b, "x / 1"
    elif name == "pow":
        if isinstance(a, Node) and _fill(b, names) == 1:
            return a, b, "x ** 1"
    return None


def _fill(v: Any, names: dict[Any, str | None] | None = None) -> Any:
    """The value of a Python number, or of a node that creates a tensor filled with one value.

    ``names``: a cache for :func:`_name`.
    """
    t = type(v)
    if t is int or t is float or t is bool:
        return v
    if t is not Node:
        if isinstance(v, (bool, int, float, complex)):
            return v
        if not isinstance(v, Node):
            return None
    if "out" in v.kwargs:
        return None
    name = _name(v, names)
    if name in _ZERO_FILLS:
        return 0
    if name in _ONE_FILLS:
        return 1
    if name in _FULL:
        index, key = _FULL[name]
        value = arg(v, index, key, None)
        return value if isinstance(value, (bool, int, float)) else None
    return None


def _tensor_facts(node: Node) -> tuple[tuple[str, ...], torch.dtype, Any, Any] | None:
    """``(shape, dtype, device or None, strides or None)`` recorded in the node's meta."""
    meta = node.meta
    for key in ("val", "example_value"):
        v = meta.get(key)
        if isinstance(v, torch.Tensor):
            strides = tuple(map(str, v.stride())) if v.layout == torch.strided else None
            return tuple(map(str, v.shape)), v.dtype, v.device, strides
    tm = meta.get("tensor_meta")
    if tm is not None and hasattr(tm, "shape") and hasattr(tm, "dtype"):
        stride = getattr(tm, "stride", None)
        return tuple(map(str, tm.shape)), tm.dtype, None, tuple(map(str, stride)) if stride is not None else None
    return None


def _may_flip_zero_sign(node: Node, zero: Any, what: str, names: dict[Any, str | None] | None = None) -> bool:
    """Whether ``x + 0`` or ``x - 0`` (``node``; ``zero`` the zero operand: a number or a node
    filling a tensor with one) gives ``+0.0`` for ``x = -0.0``.

    IEEE 754 (section 6.3): a sum of two zeros of opposite sign is ``+0.0``, so the result
    keeps ``x``'s ``-0.0`` only when the zero actually added is ``-0.0``. That zero is
    ``alpha * zero`` for ``add`` and ``-(alpha * zero)`` for ``sub`` (torch computes
    ``input + alpha * other``), with the zero's own sign: a float literal's, a fill value's
    (``full_like(x, -0.0)``), ``+0.0`` for an integer zero or ``zeros_like``. ``x - 0`` with
    ``alpha=-1`` adds ``+0.0`` and flips, as ``x + 0`` does; ``x - (-0.0)`` flips too."""
    if what not in ("x + 0", "x - 0"):
        return False
    value = _fill(zero, names)
    if not isinstance(value, (bool, int, float)):
        return True  # (not known: the safe answer)
    alpha = node.kwargs.get("alpha", 1) if node.kwargs else 1
    added = float(alpha) * float(value)  # a signed zero by IEEE rules (0.0 * -1 is -0.0)
    if what == "x - 0":
        added = -added
    return math.copysign(1.0, added) > 0

def _type_problem(node: Node, x: Node, *, allow_unknown: bool = False) -> str | None:
    """Why the node's value may differ from ``x`` in dtype, shape, device or strides.

    With ``allow_unknown``, missing metadata is no problem (for ops that keep them anyway).
    """
    got, want = _tensor_facts(node), _tensor_facts(x)
    if got is None or want is None:
        if allow_unknown:
            return None
        return "shape/dtype not recorded in node.meta (run propagate_shapes first)"
    (shape, dtype, device, strides), (xshape, xdtype, xdevice, xstrides) = got, want
    if dtype != xdtype:
        return f"the result is {dtype}, the operand {xdtype} (type promotion)"
    if dtype.is_complex:
        return "complex multiplication and addition are not exact identities (inf * 0 is nan)"
    if shape != xshape:
        return f"the result has shape ({', '.join(shape)}), the operand ({', '.join(xshape)}) (broadcasting)"
    if device is not None and xdevice is not None and device != xdevice:
        return f"the result is on {device}, the operand on {xdevice}"
    if strides is not None and xstrides is not None and strides != xstrides:
        return "the result and the operand have different strides"
    return None
