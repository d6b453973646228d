"""Property-based tests: every built-in pass keeps what random small FX graphs do.

Hypothesis generates small programs of pure and impure operations over inputs of several dtypes
(float32, float64, int64, bool) and shapes (0-d, broadcasting, inputs passed twice): arithmetic
with literals of every type (``1``, ``1.0``, ``0``, ``-0.0``, ``True``), neg/relu/abs, matmul,
views, reshapes, transposes, getitem (of tensors and of tuples), in-place ops (``add_``,
``mul_``, ``relu_``, ``copy_``, ``inplace=True``, ``x[i] = v``, ``out=``), random ops (``rand``,
``rand_like``, ``bernoulli_``, dropout in training and eval mode), asserts (which may fail),
buffers, parameters and constants read and written, standard submodules, a Conv1d +
BatchNorm1d (as modules and as functions), unknown user functions and modules, GraphModule
submodules, autocast and no-grad regions, and identities for ``simplify_algebra`` whose pieces
are sometimes written in place. Each program is realised

- directly as a ``torch.fx.Graph`` (``graph``; it may use ATen ops, ``operator.setitem`` and
  ``operator.iadd``, call unknown functions and modules next to torch-level ops), and
- as an ``nn.Module`` captured with ``symbolic_trace``, TorchDynamo and ``torch.export``
  (:func:`fxpasses.capture.capture`).

For every built-in transform pass (analyses only annotate), ``fold_constants`` with a storage
budget, and the default pipeline with and without ``propagate_shapes`` in front, the graph is
called twice in a row before and after the pass (module state carried from the first call to
the second), each call on fresh inputs, starting from the module's tensors as captured and the
same RNG seed (random ops are kept by default, so they draw the same numbers), and these must
agree:

- whether the call raises (an assert that fails before the pass still fails after it);
- the outputs: structure, dtype, shape, values (exact; floats within 1e-6 for reorderings),
  and which outputs share storage with an input, a module tensor or another output;
- the inputs and module tensors after the call (in-place writes are kept, none are added).

The hypothesis profile is derandomized and database-free: the same examples every run.
Each fault these tests (and their review) found is kept at the end as a plain regression test.
"""

from __future__ import annotations

import copy
import operator
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
import torch
import torch.fx
import torch.nn.functional as F
import torch.utils._pytree
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import fxpasses
from fxpasses.capture import capture
from fxpasses.job import DEFAULT_PRESET

aten = torch.ops.aten

# ---------------------------------------------------------------------------------------------
# the passes under test

_REGISTRY = fxpasses.Registry()
#: every built-in pass that may change a graph (analyses only annotate)
BUILTIN_TRANSFORMS = sorted(
    n
    for n in _REGISTRY.names()
    if _REGISTRY.info(n).distribution == "fxpasses" and _REGISTRY.get(n).kind != "analysis"
)
_OPTIONS: dict[str, dict[str, Any]] = {
    # renames every node to its op-ish stem: many conflicts, so many suffixed names
    "rename_nodes": {"pattern": r"^([a-z]+)[a-z_0-9]*$", "replacement": r"\1"},
}
#: the pipeline `fxpasses run` uses when a config names none (the "inference" preset)
DEFAULT_PIPELINE = _REGISTRY.preset(DEFAULT_PRESET).pipeline
PIPELINES: dict[str, str | list[Any]] = {
    **{n: [(n, _OPTIONS.get(n, {}))] for n in BUILTIN_TRANSFORMS},
    # the graphs here are symbolic_trace-like (inputs of any shape): the rewrites that rely on
    # the recorded shapes are made with the input checks that make them hold
    "propagate_shapes,simplify_algebra{specialize=true}": ["propagate_shapes", ("simplify_algebra", {"specialize": True})],
    # folds what literals build too (the default never lets the module grow)
    "fold_constants{max_growth_bytes=1048576}": [("fold_constants", {"max_growth_bytes": 1 << 20})],
    "default": DEFAULT_PIPELINE,
    "propagate_shapes,default": f"propagate_shapes,{DEFAULT_PIPELINE}",
}


def _pipeline(entries: str | list[Any]) -> fxpasses.Pipeline:
    if isinstance(entries, str):
        return fxpasses.Pipeline.from_string(entries, registry=_REGISTRY)
    return fxpasses.Pipeline(entries, registry=_REGISTRY)


def test_every_builtin_transform_is_covered() -> None:
    assert {
        "eliminate_dead_code",
        "eliminate_common_subexpressions",
        "fold_constants",
        "fuse_conv_bn",
        "remove_dropout",
        "simplify_algebra",
        "rename_nodes",
    } <= set(BUILTIN_TRANSFORMS)
    assert "propagate_shapes" not in BUILTIN_TRANSFORMS and "print_graph" not in BUILTIN_TRANSFORMS


# ---------------------------------------------------------------------------------------------
# programs

DTYPES = (torch.float32, torch.float64, torch.int64, torch.bool)
SHAPES = ((), (3,), (2, 3), (1, 3), (3, 1), (2, 1, 3))
LITERALS = (1, 1.0, 0, 0.0, -0.0, True, False, 2, 0.5, -1)
_FLOAT_POOL = torch.tensor([-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 3.0])


@dataclass(frozen=True)
class V:
    """A reference to the program's value number ``i`` (an input or a step's result)."""

    i: int


@dataclass(frozen=True)
class P:
    """While generating: the ``k``-th value made by the current pattern (negative: from the end)."""

    k: int


@dataclass
class Step:
    """One FX call: ``op``/``target``/``args``/``kwargs`` with :class:`V` for values.

    ``alt`` gives another spelling for dialects that cannot trace this one.
    """

    op: str
    target: Any
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    alt: dict[str, "Step"] = field(default_factory=dict)

    def for_dialect(self, dialect: str) -> "Step":
        return self.alt.get(dialect, self)

    def resolved(self, f: Callable[[P], Any]) -> "Step":
        return Step(
            self.op,
            self.target,
            _subst(self.args, f, P),
            _subst(self.kwargs, f, P),
            {d: s.resolved(f) for d, s in self.alt.items()},
        )


@dataclass
class Program:
    inputs: list[tuple[torch.dtype, tuple[int, ...], int]]  # dtype, shape, seed
    same_as: dict[int, int]  # input i is passed as the very tensor of input j (aliasing)
    training: dict[str, bool]  # submodule name -> training flag
    steps: list[tuple[int, Step]]  # (value number, or -1 for a None result; step)
    outputs: list[int]
    tuple_output: bool
    nesting: str = "flat"  # "flat" (a value or a tuple), "nested" ((a, (b, ...))), "dict"

    def describe(self) -> str:
        lines = [f"inputs: {[(str(d), s) for d, s, _ in self.inputs]}, same_as={self.same_as}"]
        lines.append(f"training: {self.training}")
        for i, s in self.steps:
            lines.append(f"  v{i} = {s.op} {_tname(s.target)} {s.args} {s.kwargs}")
        lines.append(f"  return {self.outputs} (tuple={self.tuple_output}, nesting={self.nesting})")
        return "\n".join(lines)


def _tname(t: Any) -> str:
    return t if isinstance(t, str) else getattr(t, "__name__", repr(t))


def _tensor(dtype: torch.dtype, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        idx = torch.randint(0, len(_FLOAT_POOL), shape, generator=g)
        return _FLOAT_POOL[idx].to(dtype).clone()  # (a 0-d index gives a view)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(-3, 4, shape, generator=g).to(dtype)


# functions and modules that are no torch operators (unknown code to the effect analysis)
def user_inplace(x: torch.Tensor) -> torch.Tensor:
    x.mul_(2)
    return x


def user_pure(x: torch.Tensor) -> torch.Tensor:
    return x * 2 + 1


def user_identity(x: torch.Tensor) -> torch.Tensor:
    return x


class AddOneInPlace(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.add_(1)
        return x


class Twice(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def _graph_module(fn: Callable[..., Any]) -> torch.fx.GraphModule:
    return torch.fx.symbolic_trace(fn)


class Model(torch.nn.Module):
    """The module every program runs in: buffers, a parameter, a constant, submodules."""

    def __init__(self, training: dict[str, bool] | None = None) -> None:
        super().__init__()
        self.register_buffer("b0", torch.tensor([1.0, -2.0, 0.5]))
        self.register_buffer("b1", torch.tensor([[3, -1, 0], [2, 2, -4]]))
        self.p0 = torch.nn.Parameter(torch.tensor([0.5, -1.0, 2.0]), requires_grad=False)
        self.c0 = torch.tensor([[2.0], [-1.0], [0.0]])  # a plain tensor attribute
        self.drop = torch.nn.Dropout(0.5)
        self.relu_ip = torch.nn.ReLU(inplace=True)
        self.lin = torch.nn.Linear(3, 3)
        self.conv = torch.nn.Conv1d(1, 2, 1)
        self.bn = torch.nn.BatchNorm1d(2)
        self.add_one = AddOneInPlace()
        self.twice = Twice()
        self.sub_inplace = _graph_module(AddOneInPlace())
        self.sub_pure = _graph_module(Twice())
        with torch.no_grad():
            self.lin.weight.copy_(torch.tensor([[1.0, 0.5, -1.0], [0.0, 2.0, 1.0], [-0.5, 1.0, 0.0]]))
            self.lin.bias.copy_(torch.tensor([0.25, -0.5, 1.0]))
            self.conv.weight.copy_(torch.tensor([[[1.5]], [[-0.5]]]))
            self.conv.bias.copy_(torch.tensor([0.25, 1.0]))
            self.bn.running_mean.copy_(torch.tensor([0.5, -1.0]))
            self.bn.running_var.copy_(torch.tensor([2.0, 0.25]))
            self.bn.weight.copy_(torch.tensor([1.5, -0.5]))
            self.bn.bias.copy_(torch.tensor([0.5, 0.25]))
        for name, flag in (training or {}).items():
            getattr(self, name).train(flag)


_ATTRS = ("b0", "b1", "p0", "c0", "b0", "conv.weight", "bn.running_mean", "lin.bias")
_SUBMODULES = ("lin", "drop", "add_one", "twice", "sub_inplace", "sub_pure")


def make_inputs(p: Program) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    for i, (dtype, shape, seed) in enumerate(p.inputs):
        out.append(out[p.same_as[i]] if i in p.same_as else _tensor(dtype, shape, seed))
    return out


# -------------------------------------------------------------------- step kinds (strategies)

_BINARY: list[tuple[str, Any]] = [
    ("call_function", operator.add),
    ("call_function", operator.sub),
    ("call_function", operator.mul),
    ("call_function", operator.truediv),
    ("call_function", torch.add),
    ("call_function", torch.sub),
    ("call_function", torch.mul),
    ("call_function", torch.div),
    ("call_method", "add"),
    ("call_method", "mul"),
    ("call_method", "sub"),
    ("call_method", "div"),
    ("call_function", aten.add.Tensor),
    ("call_function", aten.mul.Tensor),
    ("call_function", aten.sub.Tensor),
    ("call_function", operator.gt),
    ("call_function", torch.eq),
    ("call_function", operator.pow),
]
_UNARY: list[tuple[str, Any]] = [
    ("call_function", operator.neg),
    ("call_function", torch.neg),
    ("call_method", "neg"),
    ("call_function", aten.neg.default),
    ("call_function", torch.relu),
    ("call_function", F.relu),
    ("call_method", "relu"),
    ("call_function", aten.relu.default),
    ("call_function", torch.abs),
    ("call_method", "float"),
    ("call_method", "clone"),
    ("call_method", "contiguous"),
    ("call_method", "detach"),
    ("call_function", aten.clone.default),
]
_VIEWS: list[tuple[str, Any, tuple, dict]] = [
    ("call_method", "reshape", (-1,), {}),
    ("call_method", "view", (-1,), {}),
    ("call_function", torch.reshape, ((-1,),), {}),
    ("call_function", aten.view.default, ([-1],), {}),
    ("call_method", "transpose", (0, -1), {}),
    ("call_method", "t", (), {}),
    ("call_method", "unsqueeze", (0,), {}),
    ("call_method", "squeeze", (), {}),
    ("call_method", "flatten", (), {}),
    ("call_method", "expand", (2, 3), {}),
    ("call_function", torch.transpose, (0, -1), {}),
    ("call_function", operator.getitem, (0,), {}),
    ("call_function", operator.getitem, ((Ellipsis, slice(None, 1)),), {}),
    ("call_function", operator.getitem, (slice(1, None),), {}),
    ("call_function", operator.getitem, (None,), {}),
    ("call_function", aten.select.int, (0, 0), {}),
    ("call_method", "to", (torch.float32,), {}),
    ("call_method", "to", (torch.int64,), {}),
]
_INPLACE_BINARY = ("add_", "sub_", "mul_", "div_", "copy_")
_INPLACE_UNARY: list[tuple[str, Any, tuple, dict]] = [
    ("call_method", "relu_", (), {}),
    ("call_method", "neg_", (), {}),
    ("call_method", "zero_", (), {}),
    ("call_method", "fill_", (2,), {}),
    ("call_function", torch.relu_, (), {}),
    ("call_function", F.relu, (), {"inplace": True}),
    ("call_function", aten.relu_.default, (), {}),
    ("call_module", "relu_ip", (), {}),
]
_IDX = (0, -1, (Ellipsis, 0), slice(0, 1))
_ENTER = torch.amp.autocast_mode._enter_autocast
_EXIT = torch.amp.autocast_mode._exit_autocast
_KINDS = (
    "binary", "binary", "unary", "view", "view", "fill", "inplace", "inplace", "inplace_unary", "setitem",
    "out", "random", "assert", "attr", "attr", "module", "tuple", "const", "matmul", "repeat", "repeat",
    "convbn", "user", "region", "identity", "identity",
)
_ZERO_OPS = [operator.add, torch.add, aten.add.Tensor, operator.sub, torch.sub, "add", "sub"]
_ONE_OPS = [operator.mul, torch.mul, aten.mul.Tensor, operator.truediv, torch.div, operator.pow, "mul", "div"]


def _new_values(env: dict[int, Any]) -> int:
    return max(env) + 1 if env else 0


def _tensor_refs(env: dict[int, Any]) -> list[int]:
    return [i for i, v in env.items() if isinstance(v, torch.Tensor)]


@st.composite
def _operand(draw: Any, env: dict[int, Any]) -> V:
    refs = _tensor_refs(env)
    # mostly recent values (chains of operations), any value now and then
    return V(refs[-1 - draw(st.integers(0, len(refs) - 1))])


@st.composite
def _value_or_literal(draw: Any, env: dict[int, Any]) -> Any:
    if draw(st.booleans()):
        return draw(_operand(env))
    return draw(st.sampled_from(LITERALS))


def _is_operator(target: Any) -> bool:
    return callable(target) and getattr(target, "__module__", "") in ("_operator", "operator")


@st.composite
def _pattern(draw: Any, env: dict[int, Any], steps: list[Step], nested: bool = False) -> list[Step]:
    """One or a few steps (a little pattern) to append to the program; ``P(k)`` refers to the
    ``k``-th value the pattern itself makes."""
    kind = draw(st.sampled_from(_KINDS))
    if kind == "repeat" and steps:  # the same call again (what CSE merges, unless something changed)
        return [steps[-1 - draw(st.integers(0, len(steps) - 1))]]
    a = draw(_operand(env))
    if kind == "binary":
        op, target = draw(st.sampled_from(_BINARY))
        b = draw(_value_or_literal(env))
        args: tuple = (a, b)
        if _is_operator(target) and not isinstance(b, V) and draw(st.booleans()):
            args = (b, a)
        kwargs = {}
        if target in (torch.add, torch.sub) and draw(st.booleans()):
            kwargs["alpha"] = draw(st.sampled_from([2, 0, 1]))
        return [Step(op, target, args, kwargs)]
    if kind == "unary":
        op, target = draw(st.sampled_from(_UNARY))
        return [Step(op, target, (a,))]
    if kind == "view":
        op, target, rest, kw = draw(st.sampled_from(_VIEWS))
        return [Step(op, target, (a, *rest), dict(kw))]
    if kind == "matmul":
        b = draw(_operand(env))
        target = draw(st.sampled_from([operator.matmul, torch.matmul, "matmul"]))
        return [Step("call_method" if isinstance(target, str) else "call_function", target, (a, b))]
    if kind == "fill":
        shape = tuple(env[a.i].shape)
        choice = draw(st.integers(0, 4))
        if choice == 0:
            return [Step("call_function", torch.zeros_like, (a,))]
        if choice == 1:
            return [Step("call_function", torch.ones_like, (a,))]
        if choice == 2:
            return [Step("call_function", torch.zeros, (shape,))]
        if choice == 3:
            return [Step("call_function", torch.ones, (shape,), {"dtype": env[a.i].dtype})]
        return [Step("call_function", torch.full, (shape, draw(st.sampled_from([0, 1, 0.0, 1.0]))))]
    if kind == "inplace":
        name = draw(st.sampled_from(_INPLACE_BINARY))
        b = draw(_operand(env)) if name == "copy_" else draw(_value_or_literal(env))
        spelling = draw(st.integers(0, 3))
        if name == "add_" and spelling == 1:
            method = Step("call_method", "add_", (a, b))
            return [Step("call_function", operator.iadd, (a, b), alt={"symbolic_trace": method})]
        if name in ("add_", "mul_") and spelling == 2:
            target = aten.add_.Tensor if name == "add_" else aten.mul_.Tensor
            return [Step("call_function", target, (a, b))]
        if name == "copy_" and spelling == 2:
            return [Step("call_function", aten.copy_.default, (a, b))]
        return [Step("call_method", name, (a, b))]
    if kind == "inplace_unary":
        op, target, rest, kw = draw(st.sampled_from(_INPLACE_UNARY))
        return [Step(op, target, (a, *rest), dict(kw))]
    if kind == "setitem":
        idx = draw(st.sampled_from(_IDX))
        b = draw(_value_or_literal(env))
        as_method = Step("call_method", "__setitem__", (a, idx, b))
        if draw(st.booleans()):
            return [as_method]
        return [Step("call_function", operator.setitem, (a, idx, b), alt={"symbolic_trace": as_method})]
    if kind == "out":
        b = draw(_value_or_literal(env))
        target = draw(st.sampled_from([torch.add, torch.mul, torch.neg]))
        args = (a,) if target is torch.neg else (a, b)
        try:  # out= must have the result's shape and dtype (no resizing)
            r = target(*_subst(args, lambda v: env[v.i]))
        except Exception:
            return []
        fits = [i for i in _tensor_refs(env) if env[i].shape == r.shape and env[i].dtype == r.dtype]
        if not fits:
            return []
        out = V(fits[-1 - draw(st.integers(0, len(fits) - 1))])
        return [Step("call_function", target, args, {"out": out})]
    if kind == "random":
        shape = tuple(env[a.i].shape)
        choice = draw(st.integers(0, 6))
        flag = draw(st.booleans())
        if choice == 0:
            return [Step("call_function", torch.rand, (shape,))]
        if choice == 1:
            return [Step("call_function", torch.randn, (shape,))]
        if choice == 2:
            return [Step("call_function", torch.rand_like, (a,))]
        if choice == 3:
            return [Step("call_function", F.dropout, (a, 0.5), {"training": flag})]
        if choice == 4:
            return [Step("call_function", torch.dropout, (a, 0.5, flag))]
        if choice == 5:
            return [Step("call_module", "drop", (a,))]
        return [Step("call_method", "bernoulli_", (a, 0.5))]
    if kind == "assert" and not nested:
        thr = draw(st.sampled_from([-1e9, 0, 1]))
        cond = [Step("call_function", operator.ge, (a, thr)), Step("call_function", torch.all, (P(0),))]
        variant = draw(st.integers(0, 2))
        async_msg = Step("call_function", torch._assert_async, (P(1), "assertion failed"))
        if variant == 0:
            alt = {"dynamo": async_msg, "export": async_msg}
            check = Step("call_function", torch._assert, (P(1), "assertion failed"), alt=alt)
        elif variant == 1:
            check = async_msg
        else:
            alt = {"symbolic_trace": async_msg, "dynamo": async_msg, "export": async_msg}
            check = Step("call_function", aten._assert_async.msg, (P(1), "assertion failed"), alt=alt)
        return [*cond, check]
    if kind == "attr":
        return [Step("get_attr", draw(st.sampled_from(_ATTRS)))]
    if kind == "module":
        return [Step("call_module", draw(st.sampled_from(_SUBMODULES)), (a,))]
    if kind == "tuple":
        k = draw(st.integers(0, 1))
        first = draw(
            st.sampled_from(
                [
                    Step("call_function", torch.max, (a, 0)),
                    Step("call_method", "unbind", (a, 0)),
                    Step("call_function", torch.split, (a, 1)),
                ]
            )
        )
        return [first, Step("call_function", operator.getitem, (P(0), k))]
    if kind == "convbn":
        # a Conv1d + BatchNorm1d, as modules or as functions reading the modules' tensors
        flat = [Step("call_method", "float", (a,)), Step("call_method", "reshape", (P(0), 1, 1, -1))]
        if draw(st.booleans()):
            return [*flat, Step("call_module", "conv", (P(1),)), Step("call_module", "bn", (P(2),))]
        training = draw(st.booleans())
        names = ["conv.weight", "conv.bias", "bn.running_mean", "bn.running_var", "bn.weight", "bn.bias"]
        return [
            *flat,
            *(Step("get_attr", n) for n in names),
            Step("call_function", F.conv1d, (P(1), P(2), P(3))),
            Step("call_function", F.batch_norm, (P(8), P(4), P(5), P(6), P(7), training, 0.1, 1e-5)),
        ]
    if kind == "user":
        fn = draw(st.sampled_from([user_inplace, user_pure, user_identity]))
        return [Step("call_function", fn, (a,))]
    if kind == "region" and not nested:
        inner = draw(_pattern(env, steps, nested=True))
        if not inner:
            return []
        if draw(st.booleans()):  # the autocast object is the pattern's first value
            inner = [s.resolved(lambda p: P(p.k + 1) if p.k >= 0 else p) for s in inner]
            enter = Step("call_function", _ENTER, ("cpu", torch.bfloat16, True, None))
            return [enter, *inner, Step("call_function", _EXIT, (P(0),))]
        return [
            Step("call_function", torch._C._set_grad_enabled, (False,)),
            *inner,
            Step("call_function", torch._C._set_grad_enabled, (True,)),
        ]
    if kind == "identity":  # what simplify_algebra rewrites, its pieces sometimes written
        if draw(st.integers(0, 3)) == 0:
            inner = [Step("call_function", torch.neg, (a,))]
            if draw(st.booleans()):
                inner.append(Step("call_method", "add_", (P(0), 1)))
            return [*inner, Step("call_function", operator.neg, (P(0),))]
        zero = draw(st.booleans())
        pieces: list[Step] = []
        how = draw(st.integers(0, 2))
        if how == 0:
            operand: Any = draw(st.sampled_from([0, 0.0, -0.0, False] if zero else [1, 1.0, True]))
        else:
            if how == 1:
                fill = Step("call_function", torch.zeros_like if zero else torch.ones_like, (a,))
            else:
                fill = Step("call_function", torch.full, (tuple(env[a.i].shape), 0 if zero else 1))
            pieces.append(fill)
            operand = P(0)
            if draw(st.booleans()):
                pieces.append(Step("call_method", "add_", (P(0), 1)))
        target = draw(st.sampled_from(_ZERO_OPS if zero else _ONE_OPS))
        op = "call_method" if isinstance(target, str) else "call_function"
        args = (a, operand)
        if target in (operator.add, operator.mul) and draw(st.booleans()):
            args = (operand, a)
        return [*pieces, Step(op, target, args)]
    if kind == "const":
        if draw(st.booleans()):
            return [Step("call_function", torch.tensor, ([1.0, -0.0, 2.5],))]
        return [Step("call_function", torch.arange, (3,))]
    return []


def _subst(a: Any, f: Callable[[Any], Any], kind: type = V) -> Any:
    if isinstance(a, kind):
        return f(a)
    if isinstance(a, tuple):
        return tuple(_subst(x, f, kind) for x in a)
    if isinstance(a, list):
        return [_subst(x, f, kind) for x in a]
    if isinstance(a, dict):
        return {k: _subst(v, f, kind) for k, v in a.items()}
    return a


def _attr(model: torch.nn.Module, target: str) -> Any:
    obj: Any = model
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _execute(step: Step, env: dict[int, Any], model: torch.nn.Module) -> Any:
    """Run one step eagerly on real values."""
    args = _subst(step.args, lambda v: env[v.i])
    kwargs = _subst(step.kwargs, lambda v: env[v.i])
    if step.op == "get_attr":
        return _attr(model, step.target)
    if step.op == "call_module":
        return _attr(model, step.target)(*args, **kwargs)
    if step.op == "call_method":
        return getattr(args[0], step.target)(*args[1:], **kwargs)
    return step.target(*args, **kwargs)


@st.composite
def programs(draw: Any) -> Program:
    n_inputs = draw(st.integers(1, 3))
    inputs = []
    same_as: dict[int, int] = {}
    for i in range(n_inputs):
        if i and draw(st.integers(0, 5)) == 0:
            j = draw(st.integers(0, i - 1))
            same_as[i] = same_as.get(j, j)
            inputs.append(inputs[j])
            continue
        inputs.append((draw(st.sampled_from(DTYPES)), draw(st.sampled_from(SHAPES)), draw(st.integers(0, 1000))))
    training = {"drop": draw(st.booleans()), "bn": draw(st.booleans())}
    p = Program(inputs, same_as, training, [], [], True)
    model = Model(training)
    env: dict[int, Any] = dict(enumerate(make_inputs(p)))
    torch.manual_seed(0)
    failed = False
    with torch.no_grad():  # as the programs are run (grad regions toggle it as they do there)
        for _ in range(draw(st.integers(2, 10))):
            pattern = draw(_pattern(env, [s for i, s in p.steps if i >= 0]))
            added: list[tuple[int, Step]] = []
            trial = dict(env)
            made: list[int] = []
            ok = True
            open_regions: list[Any] = []
            for step in pattern:
                step = step.resolved(lambda r: V(made[r.k]))
                try:
                    value = _execute(step, trial, model)
                except Exception:
                    if "assert" in getattr(step.target, "__name__", ""):
                        failed = True  # the program raises here: it ends with this assert
                        added.append((-1, step))
                    else:
                        ok = False
                    break
                if step.target is _ENTER or step.target is torch._C._set_grad_enabled and step.args == (False,):
                    open_regions.append(value)
                elif step.target is _EXIT or step.target is torch._C._set_grad_enabled:
                    open_regions.pop()
                n = _new_values(trial)
                if value is None:
                    added.append((-1, step))
                    continue
                trial[n] = value
                made.append(n)
                added.append((n, step))
            for region in reversed(open_regions):  # a step inside failed: leave the region
                if region is None:
                    torch._C._set_grad_enabled(False)
                else:
                    _EXIT(region)
            if not ok or open_regions:
                failed = False
                continue
            env = trial
            p.steps.extend(added)
            if failed:
                break
    refs = _tensor_refs(env)
    k = draw(st.integers(1, 3))
    p.outputs = [refs[-1 - draw(st.integers(0, len(refs) - 1))] for _ in range(k)]
    p.tuple_output = k > 1 or draw(st.booleans())
    p.nesting = draw(st.sampled_from(["flat", "flat", "nested", "dict"])) if k > 1 else "flat"
    return p


def _structure(p: Program, values: list[Any]) -> Any:
    """The program's return value built from ``values`` (one per output), as it nests them."""
    if p.nesting == "nested":
        return (values[0], tuple(values[1:]))
    if p.nesting == "dict":
        return {"first": values[0], "rest": tuple(values[1:])}
    return tuple(values) if p.tuple_output else values[0]


# ---------------------------------------------------------------------------------------------
# realising a program in each dialect


def _code_arg(a: Any) -> str:
    if isinstance(a, V):
        return f"v{a.i}"
    if isinstance(a, tuple):
        inner = ", ".join(_code_arg(x) for x in a)
        return f"({inner},)" if len(a) == 1 else f"({inner})"
    if isinstance(a, list):
        return "[" + ", ".join(_code_arg(x) for x in a) + "]"
    if isinstance(a, slice):
        return f"slice({_code_arg(a.start)}, {_code_arg(a.stop)}, {_code_arg(a.step)})"
    if a is Ellipsis:
        return "Ellipsis"
    if isinstance(a, torch.dtype):
        return str(a)
    if isinstance(a, float) and a == 0 and str(a).startswith("-"):
        return "-0.0"
    return repr(a)


def module_source(p: Program, dialect: str) -> tuple[str, dict[str, Any]]:
    """``forward``'s source for ``dialect`` and the globals it needs."""
    names: dict[str, Any] = {"torch": torch}
    params = ", ".join(f"v{i}" for i in range(len(p.inputs)))
    lines = [f"def forward(self, {params}):"]
    indent = "    "
    for k, (i, step) in enumerate(p.steps):
        s = step.for_dialect(dialect)
        lhs = f"v{i} = " if i >= 0 else ""
        args = [_code_arg(a) for a in s.args]
        args += [f"{key}={_code_arg(v)}" for key, v in s.kwargs.items()]
        if s.target is _ENTER:  # regions: `with` blocks
            lines.append(f'{indent}with torch.autocast("cpu", dtype=torch.bfloat16):')
            indent += "    "
            lines.append(f"{indent}pass")
        elif s.target is torch._C._set_grad_enabled:
            if s.args[0] is False:
                lines.append(f"{indent}with torch.no_grad():")
                indent += "    "
                lines.append(f"{indent}pass")
            else:
                indent = indent[:-4]
        elif s.target is _EXIT:
            indent = indent[:-4]
        elif s.op == "get_attr":
            lines.append(f"{indent}{lhs}self.{s.target}")
        elif s.op == "call_module":
            lines.append(f"{indent}{lhs}self.{s.target}({', '.join(args)})")
        elif s.op == "call_method":
            lines.append(f"{indent}{lhs}{args[0]}.{s.target}({', '.join(args[1:])})")
        elif s.target is operator.setitem:
            lines.append(f"{indent}{args[0]}[{args[1]}] = {args[2]}")
        else:
            fn = f"_f{k}"
            names[fn] = s.target
            lines.append(f"{indent}{lhs}{fn}({', '.join(args)})")
    refs = [f"v{i}" for i in p.outputs]
    if p.nesting == "nested":
        lines.append(f"    return ({refs[0]}, ({', '.join(refs[1:])},))")
    elif p.nesting == "dict":
        lines.append(f"    return {{'first': {refs[0]}, 'rest': ({', '.join(refs[1:])},)}}")
    else:
        outs = ", ".join(refs)
        lines.append(f"    return ({outs},)" if p.tuple_output else f"    return {outs}")
    return "\n".join(lines), names


def build_graph(p: Program) -> torch.fx.GraphModule:
    """The program as a directly built ``torch.fx.Graph``."""
    model = Model(p.training)
    g = torch.fx.Graph()
    nodes: dict[int, torch.fx.Node] = {i: g.placeholder(f"x{i}") for i in range(len(p.inputs))}
    for i, step in p.steps:
        f = lambda v: nodes[v.i]  # noqa: E731
        if step.op == "get_attr":
            n = g.get_attr(step.target)
        else:
            n = g.create_node(step.op, step.target, _subst(step.args, f), _subst(step.kwargs, f))
        if i >= 0:
            nodes[i] = n
    g.output(_structure(p, [nodes[i] for i in p.outputs]))
    return torch.fx.GraphModule(model, g)


def build(p: Program, dialect: str) -> tuple[torch.fx.GraphModule, Callable[[], list[Any]]]:
    """The graph module of ``p`` in ``dialect`` and a factory of its (fresh) call inputs."""
    if dialect == "graph":
        return build_graph(p), lambda: make_inputs(p)
    src, names = module_source(p, dialect)
    exec(compile(src, f"<program {dialect}>", "exec"), names)
    cls = type("Program", (Model,), {"forward": names["forward"]})
    model = cls(p.training)
    # capture on distinct tensors (TorchDynamo would merge repeated inputs)
    example = [_tensor(d, s, seed) for d, s, seed in p.inputs]
    cap = capture(model, example, dialect)
    if dialect != "dynamo":
        return cap.gm, lambda: make_inputs(p)
    # TorchDynamo: parameters and buffers are inputs too; put user inputs where they were passed
    positions = {id(t): k for k, t in enumerate(example)}
    slots = [positions.get(id(t)) for t in cap.inputs]
    state = [t.detach().clone() for t in cap.inputs]

    def inputs() -> list[Any]:
        user = make_inputs(p)
        return [user[k] if k is not None else s.clone() for k, s in zip(slots, state)]

    return cap.gm, inputs

# ---------------------------------------------------------------------------------------------
# running and comparing


def _module_tensors(gm: torch.nn.Module) -> dict[str, torch.Tensor]:
    out = dict(gm.named_parameters(remove_duplicate=False))
    out.update(gm.named_buffers(remove_duplicate=False))
    for prefix, m in gm.named_modules(remove_duplicate=False):
        for k, v in vars(m).items():
            if isinstance(v, torch.Tensor):
                out[f"{prefix}.{k}" if prefix else k] = v
    return out


def _storage(t: torch.Tensor) -> int | None:
    s = t.untyped_storage()
    return s.data_ptr() if s.nbytes() else None


@dataclass
class Observation:
    error: str | None
    outputs: list[Any]  # leaves: (dtype, shape, values) or plain values
    aliases: list[tuple[frozenset[int], frozenset[int], frozenset[str]]]  # inputs, outputs, state
    inputs_after: list[torch.Tensor]
    state_after: dict[str, torch.Tensor]


def observe(
    gm: torch.fx.GraphModule, make_inputs: Callable[[], list[Any]], saved: dict[str, torch.Tensor], calls: int = 2
) -> list[Observation]:
    """Call ``gm`` ``calls`` times in a row, each on fresh inputs, starting from its tensors
    reset to ``saved`` and the RNG seeded (state written by a call is seen by the next)."""
    tensors = _module_tensors(gm)
    _restore(tensors, saved)
    torch.manual_seed(0)
    out = []
    for _ in range(calls):
        out.append(_call(gm, make_inputs(), tensors))
        if out[-1].error:
            break
    return out


def _restore(tensors: dict[str, torch.Tensor], saved: dict[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for name, t in tensors.items():
            # (an expanded constant cannot be written, and is never changed)
            if name in saved and not torch.equal(t, saved[name]):
                t.copy_(saved[name])


def _call(gm: torch.fx.GraphModule, inputs: list[Any], tensors: dict[str, torch.Tensor]) -> Observation:
    # an autocast region left by a failing assert must not leak into the next call
    with torch.no_grad(), torch.autocast("cpu", enabled=False):
        try:
            out = gm(*inputs)
            error = None
        except Exception as exc:  # an assert that fails, before and after
            out, error = None, type(exc).__name__
    # nested outputs (tuples in tuples, dicts) compare leaf by leaf, in pytree order
    leaves = [] if out is None else torch.utils._pytree.tree_leaves(out)
    in_ptrs = [_storage(t) if isinstance(t, torch.Tensor) else None for t in inputs]
    state_ptrs = {name: _storage(t) for name, t in tensors.items()}
    out_ptrs = [_storage(t) if isinstance(t, torch.Tensor) else None for t in leaves]
    aliases = []
    values = []
    for k, leaf in enumerate(leaves):
        if not isinstance(leaf, torch.Tensor):
            values.append(leaf)
            aliases.append((frozenset(), frozenset(), frozenset()))
            continue
        values.append((leaf.dtype, tuple(leaf.shape), leaf.detach().clone()))
        ptr = out_ptrs[k]
        if ptr is None:
            aliases.append((frozenset(), frozenset(), frozenset()))
            continue
        aliases.append(
            (
                frozenset(i for i, q in enumerate(in_ptrs) if q == ptr),
                frozenset(j for j, q in enumerate(out_ptrs) if q == ptr and j != k),
                frozenset(n for n, q in state_ptrs.items() if q == ptr),
            )
        )
    return Observation(
        error,
        values,
        aliases,
        [t.detach().clone() if isinstance(t, torch.Tensor) else t for t in inputs],
        {name: t.detach().clone() for name, t in tensors.items()},
    )


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.is_floating_point:
        return torch.allclose(a, b, rtol=1e-6, atol=1e-6, equal_nan=True)
    return torch.equal(a, b)


def compare(before: Observation, after: Observation, written: set[str]) -> str | None:
    """What differs between two observations (None: nothing)."""
    if before.error != after.error:
        return f"raised {before.error} before the pass, {after.error} after"
    if len(before.outputs) != len(after.outputs):
        return f"{len(before.outputs)} outputs before, {len(after.outputs)} after"
    for k, (b, a) in enumerate(zip(before.outputs, after.outputs)):
        if isinstance(b, tuple) and isinstance(a, tuple):
            if b[:2] != a[:2]:
                return f"output {k}: {b[0]} {b[1]} before, {a[0]} {a[1]} after"
            if not _same_tensor(a[2], b[2]):
                return f"output {k}: values {b[2].tolist()} before, {a[2].tolist()} after"
        elif type(a) is not type(b) or a != b:
            return f"output {k}: {b!r} before, {a!r} after"
    kept = set(before.state_after) & set(after.state_after)  # a pass may delete unused tensors
    for k, (b, a) in enumerate(zip(before.aliases, after.aliases)):
        if b[:2] != a[:2] or b[2] & kept != a[2] & kept or bool(b[2]) != bool(a[2]):
            return f"output {k}: aliases (inputs, outputs, module tensors) {b} before, {a} after"
    for k, (b, a) in enumerate(zip(before.inputs_after, after.inputs_after)):
        if isinstance(b, torch.Tensor) and not _same_tensor(a, b):
            return f"input {k} after the call: {b.tolist()} before the pass, {a.tolist()} after"
    for name in written:
        if name not in after.state_after:
            return f"module tensor {name!r} is written by the call but the pass removed it"
    for name, b in before.state_after.items():
        a = after.state_after.get(name)
        if a is not None and not _same_tensor(a, b):
            return f"module tensor {name!r} after the call: {b.tolist()} before the pass, {a.tolist()} after"
    return None


def check_program(p: Program, dialect: str, pipelines: dict[str, str | list[Any]] = PIPELINES) -> None:
    """Every pipeline of ``pipelines`` keeps what ``p`` does in ``dialect``."""
    note(p.describe())
    try:
        gm0, make = build(p, dialect)
    except fxpasses.UserError as exc:  # a construct the dialect cannot capture
        note(f"{dialect} could not capture the program: {exc}")
        event(f"not captured: {str(exc)[:60]}")
        return
    event(f"captured, {len(p.steps)} steps")
    event(f"outputs: {p.nesting}")
    note(gm0.code)
    saved0 = {n: t.detach().clone() for n, t in _module_tensors(gm0).items()}
    reference = observe(gm0, make, saved0)
    written = {n for n, t in reference[0].state_after.items() if not _same_tensor(t, saved0[n])}
    for label, entries in pipelines.items():
        gm = copy.deepcopy(gm0)
        _restore(_module_tensors(gm), saved0)  # the module's tensors as captured
        _pipeline(entries).run(gm, example_inputs=make())
        after = observe(gm, make, saved0)
        problem = None
        if len(after) != len(reference):
            problem = f"the call sequence stopped after {len(reference)} calls before the pass, {len(after)} after"
        for k, (b, a) in enumerate(zip(reference, after)):
            problem = problem or compare(b, a, written)
            if problem:
                problem = f"call {k + 1}: {problem}"
                break
        if problem:
            raise AssertionError(f"{label} in {dialect}: {problem}\nbefore:\n{gm0.code}\nafter:\n{gm.code}")


_SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@settings(max_examples=120, **_SETTINGS)
@given(programs())
def test_passes_keep_outputs_graph(p: Program) -> None:
    check_program(p, "graph")


@settings(max_examples=80, **_SETTINGS)
@given(programs())
def test_passes_keep_outputs_symbolic_trace(p: Program) -> None:
    check_program(p, "symbolic_trace")


@settings(max_examples=25, **_SETTINGS)
@given(programs())
def test_passes_keep_outputs_dynamo(p: Program) -> None:
    check_program(p, "dynamo")


@settings(max_examples=25, **_SETTINGS)
@given(programs())
def test_passes_keep_outputs_export(p: Program) -> None:
    check_program(p, "export")


# ---------------------------------------------------------------------------------------------
# Regressions: each failure the properties found (or a member of its kind), minimized, with
# the right values


def _run(gm: torch.fx.GraphModule, pipeline: str | list[Any], inputs: list[Any]) -> Any:
    return _pipeline(pipeline).run(gm, example_inputs=inputs)


def _graph(build: Callable[[torch.fx.Graph], Any], root: torch.nn.Module | None = None) -> torch.fx.GraphModule:
    g = torch.fx.Graph()
    g.output(build(g))
    return torch.fx.GraphModule(root if root is not None else torch.nn.Module(), g)


@pytest.mark.parametrize("mode", ["auto", "fake", "real"])
def test_propagate_shapes_steps_over_asserts_that_fail_on_the_example_inputs(mode: str) -> None:
    """propagate_shapes failed ('fake': data-dependent torch._assert; 'real': the assert
    raised on the example inputs): asserts are not evaluated for shapes."""

    def build(g: torch.fx.Graph) -> Any:
        x = g.placeholder("x")
        ok = g.call_function(torch.all, (g.call_function(operator.ge, (x, 0)),))
        g.call_function(torch._assert, (ok, "negative"))
        g.call_function(torch._assert_async, (ok, "negative"))
        return g.call_function(torch.add, (x, 1))

    gm = _graph(build)
    report = _run(gm, [("propagate_shapes", {"mode": mode})], [torch.full((3,), -1.0)])
    add = next(n for n in gm.graph.nodes if n.target is torch.add)
    assert tuple(add.meta["tensor_meta"].shape) == (3,) and add.meta["tensor_meta"].dtype == torch.float32
    assert report.passes[0].counters.get("real_fallback", 0) == 0
    with pytest.raises(AssertionError, match="negative"):
        gm(torch.full((3,), -1.0))  # the asserts are still there and still fire


def test_propagate_shapes_real_mode_writes_no_parameter_constant_or_parameter_input() -> None:
    """Real propagation wrote parameters and plain tensor attributes in place (only buffers
    and non-parameter inputs were copied), so the analysis changed the module."""
    root = torch.nn.Module()
    root.p = torch.nn.Parameter(torch.tensor([1.0, 2.0]), requires_grad=False)
    root.c = torch.tensor([3.0, 4.0])

    def build(g: torch.fx.Graph) -> Any:
        w = g.placeholder("w")  # a parameter passed as an input, as in TorchDynamo graphs
        p, c = g.get_attr("p"), g.get_attr("c")
        g.call_method("add_", (p, 1))
        g.call_method("mul_", (c, 2))
        g.call_method("bernoulli_", (w, 0.5))
        return g.call_function(torch.add, (p, c))

    gm = _graph(build, root)
    w = torch.nn.Parameter(torch.tensor([5.0, 6.0]), requires_grad=False)
    _run(gm, [("propagate_shapes", {"mode": "real"})], [w])
    assert gm.p.tolist() == [1.0, 2.0] and gm.c.tolist() == [3.0, 4.0] and w.tolist() == [5.0, 6.0]
    add = next(n for n in gm.graph.nodes if n.target is torch.add)
    assert tuple(add.meta["val"].shape) == (2,)


def user_doubles_in_place(x: torch.Tensor) -> torch.Tensor:
    x.mul_(2)
    return x


def test_simplify_algebra_sees_in_place_writes_of_unknown_functions() -> None:
    """`x * 1` was replaced by `x` although an unknown function wrote the product in place:
    the write then reached the caller's x. (_facts' own mutation scan only knew torch's
    in-place spellings; the pass now asks fxpasses.effects.)"""

    def build(g: torch.fx.Graph) -> Any:
        x = g.placeholder("x")
        y = g.call_function(torch.mul, (x, 1))
        z = g.call_function(user_doubles_in_place, (y,))
        return (x, g.call_method("sum", (z,)))

    gm = _graph(build)
    x = torch.tensor([1.0, 2.0])
    report = _run(gm, "propagate_shapes,simplify_algebra{specialize=true}", [x.clone()])
    assert "simplified" not in report.passes[1].counters
    out = gm(x)
    assert x.tolist() == [1.0, 2.0] and out[0].tolist() == [1.0, 2.0] and out[1].item() == 6.0


def test_remove_dropout_sees_in_place_writes_of_unknown_functions() -> None:
    """The same for an active dropout removed with inference=true: its (fresh) result is
    written by unknown code, so it becomes a clone, not the input itself."""

    def build(g: torch.fx.Graph) -> Any:
        x = g.placeholder("x")
        y = g.call_function(F.dropout, (x, 0.5), {"training": True})
        z = g.call_function(user_doubles_in_place, (y,))
        return (x, g.call_method("sum", (z,)))

    gm = _graph(build)
    report = _run(gm, [("remove_dropout", {"inference": True})], [torch.ones(4)])
    assert report.passes[0].counters == {"kept_copy": 1}
    x = torch.ones(4)
    out = gm(x)
    assert x.tolist() == [1.0] * 4 and out[0].tolist() == [1.0] * 4 and out[1].item() == 8.0


def test_cse_does_not_return_one_tensor_twice_through_an_unreturned_twin() -> None:
    """a, b, c all `x + 1`, b and c returned: b was merged into a (not returned), then c into
    a too, because the analysis still thought a was not returned: the caller got one tensor
    twice. What earlier merges send to the output now counts."""

    def build(g: torch.fx.Graph) -> Any:
        x = g.placeholder("x")
        g.call_function(torch.add, (x, 1))
        return tuple(g.call_function(torch.add, (x, 1)) for _ in range(2))

    gm = _graph(build)
    report = _run(gm, "eliminate_common_subexpressions", [torch.ones(2)])
    assert report.passes[0].counters == {"merged": 1, "kept_distinct_outputs": 1}
    b, c = gm(torch.ones(2))
    assert b is not c and b.untyped_storage().data_ptr() != c.untyped_storage().data_ptr()
    assert b.tolist() == c.tolist() == [2.0, 2.0]


def test_simplify_algebra_does_not_return_one_tensor_twice_either() -> None:
    """The same kind in simplify_algebra: `e * 1` twice, both returned, e fresh: only the
    first may become e."""

    def build(g: torch.fx.Graph) -> Any:
        x = g.placeholder("x")
        e = g.call_function(torch.exp, (x,))
        return tuple(g.call_function(torch.mul, (e, 1)) for _ in range(2))

    gm = _graph(build)
    report = _run(gm, "propagate_shapes,simplify_algebra{specialize=true}", [torch.zeros(2)])
    assert report.passes[1].counters.get("simplified") == 1
    b, c = gm(torch.zeros(2))
    assert b.untyped_storage().data_ptr() != c.untyped_storage().data_ptr()
    assert b.tolist() == c.tolist() == [1.0, 1.0]


class _ConvWriteBN(torch.nn.Module):
    """x is written between the conv that reads it and the batch norm."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv1d(1, 2, 1)
        self.bn = torch.nn.BatchNorm1d(2)
        with torch.no_grad():
            self.conv.weight.copy_(torch.tensor([[[1.5]], [[-0.5]]]))
            self.conv.bias.copy_(torch.tensor([0.25, 1.0]))
            self.bn.running_mean.copy_(torch.tensor([0.5, -1.0]))
            self.bn.running_var.copy_(torch.tensor([4.0, 0.25]))
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv(x)
        x.add_(1)
        return self.bn(c)


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_fuse_conv_bn_keeps_the_conv_where_its_input_is_written_before_the_bn(dialect: str) -> None:
    """The fused conv is computed where the BN was: it read x after `x.add_(1)`."""
    x = torch.zeros(1, 1, 2)
    cap = capture(_ConvWriteBN(), [x], dialect)  # (the capture ran the model: x is ones now)

    def inputs() -> list[torch.Tensor]:
        return [torch.zeros(1, 1, 2) if t is x else t.clone() for t in cap.inputs]

    report = _run(cap.gm, "fuse_conv_bn", inputs())
    assert "fused" not in report.passes[0].counters
    assert "may write" in report.passes[0].skipped[0][1]
    out = cap.gm(*inputs())
    out = out[0] if isinstance(out, (tuple, list)) else out
    # conv(0) = bias; BN: (c - mean) / sqrt(var + eps)
    expected = torch.tensor([(0.25 - 0.5) / (4.0 + 1e-5) ** 0.5, (1.0 + 1.0) / (0.25 + 1e-5) ** 0.5])
    torch.testing.assert_close(out.reshape(2, 2)[:, 0], expected)


def test_fuse_conv_bn_does_not_freeze_statistics_the_graph_writes() -> None:
    """BN statistics (get_attr) written in place by the graph were folded with their values at
    pass time: the write no longer reached the normalisation."""
    model = _ConvWriteBN()

    def build(g: torch.fx.Graph) -> Any:
        x = g.placeholder("x")
        w, b = g.get_attr("conv.weight"), g.get_attr("conv.bias")
        stats = [g.get_attr(f"bn.{n}") for n in ("running_mean", "running_var", "weight", "bias")]
        g.call_method("add_", (stats[0], 1))  # running_mean += 1 before the batch norm
        c = g.call_function(F.conv1d, (x, w, b))
        return g.call_function(F.batch_norm, (c, *stats, False, 0.1, 1e-5))

    gm = _graph(build, model)
    report = _run(gm, "fuse_conv_bn", [torch.zeros(1, 1, 1)])
    assert "fused" not in report.passes[0].counters
    assert "may write 'bn.running_mean' in place" in report.passes[0].skipped[0][1]
    for call in (1, 2):  # running_mean is 1.5 / -0.0, then 2.5 / 1.0
        out = gm(torch.zeros(1, 1, 1)).flatten()
        mean = torch.tensor([0.5, -1.0]) + call
        expected = (torch.tensor([0.25, 1.0]) - mean) / (torch.tensor([4.0, 0.25]) + 1e-5).sqrt()
        torch.testing.assert_close(out, expected)


def test_fuse_conv_bn_does_not_freeze_statistics_a_training_module_updates() -> None:
    """Found by the properties (graph dialect): the statistics a functional eval-mode batch
    norm reads through get_attr are updated by the BatchNorm module itself, called in training
    mode earlier in the graph (a state write, not a write through a node), and were folded
    with their values at pass time."""
    model = _ConvWriteBN()
    model.bn.train()

    def build(g: torch.fx.Graph) -> Any:
        x = g.placeholder("x")
        w, b = g.get_attr("conv.weight"), g.get_attr("conv.bias")
        trained = g.call_module("bn", (g.call_function(F.conv1d, (x, w, b)),))  # updates the stats
        stats = [g.get_attr(f"bn.{n}") for n in ("running_mean", "running_var", "weight", "bias")]
        c = g.call_function(F.conv1d, (x, w, b))
        return (g.call_function(F.batch_norm, (c, *stats, False, 0.1, 1e-5)), trained)

    gm = _graph(build, model)
    x = torch.tensor([[[0.0, 2.0]]])
    report = _run(gm, "fuse_conv_bn", [x])
    assert "fused" not in report.passes[0].counters
    # the training-mode module is a pair of its own (functional conv -> BatchNorm module)
    reasons = dict(report.passes[0].skipped)
    assert reasons.pop("bn") == "BatchNorm is in training mode (normalises with batch statistics)", reasons
    assert len(reasons) == 1 and "bn.running_mean" in next(iter(reasons.values())), reasons
    # the training call sees conv(x) = [[0.25, 3.25], [1.0, 0.0]]: batch means 1.75 and 0.5,
    # unbiased variances 4.5 and 0.5; momentum 0.1 moves the running statistics towards them
    mean = 0.9 * torch.tensor([0.5, -1.0]) + 0.1 * torch.tensor([1.75, 0.5])
    var = 0.9 * torch.tensor([4.0, 0.25]) + 0.1 * torch.tensor([4.5, 0.5])
    conv = torch.tensor([[0.25, 3.25], [1.0, 0.0]])
    expected = (conv - mean[:, None]) / (var[:, None] + 1e-5).sqrt()
    torch.testing.assert_close(gm(x)[0][0], expected)


@pytest.mark.parametrize("form", ["x * ones_like(x), ones written", "neg(neg(x)), inner neg written"])
def test_simplify_algebra_identity_operand_written_in_place(form: str) -> None:
    """`z = ones_like(x); z.add_(1); x * z` is x * 2, not x (and `-(-x)` is not x once the
    inner negation is written): the identity operand must not be written in place."""

    def build(g: torch.fx.Graph) -> Any:
        x = g.placeholder("x")
        if form.startswith("x * ones"):
            z = g.call_function(torch.ones_like, (x,))
            g.call_method("add_", (z, 1))
            y = g.call_function(torch.mul, (x, z))
        else:
            z = g.call_function(torch.neg, (x,))
            g.call_method("add_", (z, 1))
            y = g.call_function(torch.neg, (z,))
        return (g.call_function(torch.mul, (y, 2)),)

    gm = _graph(build)
    report = _run(gm, "propagate_shapes,simplify_algebra{specialize=true}", [torch.ones(2)])
    assert "simplified" not in report.passes[1].counters
    assert "may be written in place" in report.passes[1].skipped[0][1]
    expected = [4.0, 4.0] if form.startswith("x * ones") else [0.0, 0.0]
    assert gm(torch.ones(2))[0].tolist() == expected
