"""relu6 is hardtanh(0, 6): one op name in every dialect, and in the family of hardtanh."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxpasses
from fxpasses import NodePass, on
from fxpasses.capture import capture
from fxpasses.ops import call_op_name, family_members, module_call_name, names_per_call, op_name

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

aten = torch.ops.aten


class Clips(nn.Module):
    """nn.ReLU6, F.relu6 and nn.Hardtanh(-1, 1), in that order."""

    def __init__(self) -> None:
        super().__init__()
        self.r6 = nn.ReLU6()
        self.ht = nn.Hardtanh(-1.0, 1.0)

    def forward(self, x):
        return self.ht(F.relu6(self.r6(x)))


class Visits(NodePass):
    """Records the nodes its relu6 and hardtanh hooks see (keeps every node)."""

    name = "record_clips"
    seen: list[tuple[str, torch.fx.Node]] = []

    @on("relu6")
    def relu6(self, node, ctx):
        self.seen.append(("relu6", node))

    @on("hardtanh")
    def hardtanh(self, node, ctx):
        self.seen.append(("hardtanh", node))


def _target(node: torch.fx.Node):
    return node.target if node.op != "call_module" else ("module", node.target)


#: per dialect, what each of the three calls is in the captured graph (and its op name)
EXPECTED = {
    "symbolic_trace": [(("module", "r6"), "relu6"), (F.relu6, "relu6"), (("module", "ht"), "hardtanh")],
    "dynamo": [(F.hardtanh, "relu6"), (F.relu6, "relu6"), (F.hardtanh, "hardtanh")],
    "export": [(aten.hardtanh.default, "relu6"), (aten.relu6.default, "relu6"),
               (aten.hardtanh.default, "hardtanh")],
}


def _visits(c, hook):
    Visits.seen = []
    fxpasses.Pipeline([Visits], verify="none").run(c.gm)
    return [(_target(n), op_name(n, c.gm)) for h, n in Visits.seen if h == hook]


def test_relu6_and_hardtanh_hooks_see_the_same_calls_in_every_dialect(dialect):
    c = capture(Clips(), [torch.randn(8)], dialect)
    calls = EXPECTED[dialect]
    # "relu6": nn.ReLU6 and F.relu6, whatever the dialect made of them; not Hardtanh(-1, 1)
    assert _visits(c, "relu6") == calls[:2]
    # "hardtanh": all three (relu6 is hardtanh with bounds (0, 6))
    assert _visits(c, "hardtanh") == calls
    if dialect == "export":  # nn.ReLU6 is aten.hardtanh(x, 0.0, 6.0) there
        first = next(n for n in c.gm.graph.nodes if n.target is aten.hardtanh.default)
        assert first.args[1:] == (0.0, 6.0)


class InPlaceClips(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.r6 = nn.ReLU6(inplace=True)
        self.ht = nn.Hardtanh(0.0, 6.0, inplace=True)

    def forward(self, x):
        y = x * 2  # a fresh tensor: the in-place ops below do not write the input
        y = self.r6(y)
        y = F.relu6(y, inplace=True)
        y = F.hardtanh(y, 0.0, 6.0, True)
        y = F.hardtanh_(y, 0, 6)
        y = self.ht(y)
        y = F.hardtanh_(y, -1.0, 1.0)
        return F.hardtanh(y, min_val=0.0, max_val=6.0)


def test_inplace_relu6_spellings_are_relu6_(dialect):
    gm = capture(InPlaceClips(), [torch.randn(8)], dialect).gm
    names = [op_name(n, gm) for n in gm.graph.nodes if n.op.startswith("call") and n.target != "_guards_fn"]
    assert names == ["mul", *["relu6_"] * 5, "hardtanh_", "relu6"]
    assert family_members("hardtanh_") == {"hardtanh_", "relu6_"}
    assert family_members("hardtanh") == {"hardtanh", "relu6"}
    assert family_members("relu6") == {"relu6"}


def test_hardtanh_with_other_or_unknown_bounds_is_not_relu6():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    lo = g.placeholder("lo")
    for target in (F.hardtanh, aten.hardtanh.default):
        assert names_per_call(target)
        assert call_op_name(target, (x, 0, 6), {}) == "relu6"
        assert call_op_name(target, (x,), {"min_val": 0.0, "max_val": 6.0}) == "relu6"
        assert call_op_name(target, (x, 0.0), {"max_val": 6}) == "relu6"
        assert call_op_name(target, (x,), {}) == "hardtanh"  # the defaults (-1, 1)
        assert call_op_name(target, (x, 0.0), {}) == "hardtanh"  # max left at 1
        assert call_op_name(target, (x, -1.0, 6.0), {}) == "hardtanh"
        assert call_op_name(target, (x, 0.0, 6.5), {}) == "hardtanh"
        assert call_op_name(target, (x, False, 6), {}) == "hardtanh"  # a bool is no bound
        assert call_op_name(target, (x, lo, 6.0), {}) == "hardtanh"  # known when it runs
        assert call_op_name(target, (x, torch.tensor(0.0), 6.0), {}) == "hardtanh"
    assert call_op_name(F.hardtanh, (x, 0.0, 6.0, True), {}) == "relu6_"
    assert call_op_name(F.hardtanh, (x, 0.0, 6.0), {"inplace": lo}) == "relu6_"  # may be true
    assert call_op_name(F.hardtanh, (x, 0.5, 6.0, True), {}) == "hardtanh_"
    assert call_op_name(F.hardtanh_, (x, 0, 6), {}) == "relu6_"
    assert call_op_name(aten.hardtanh_.default, (x, 1, 6), {}) == "hardtanh_"
    # names of other targets do not depend on the call: the runner takes them per bucket
    assert not names_per_call(torch.relu)
    assert not names_per_call(aten.relu6.default)
    assert not names_per_call(aten.clamp.default)
    # modules by their bounds
    assert module_call_name(nn.Hardtanh(0, 6)) == "relu6"
    assert module_call_name(nn.Hardtanh(0, 6, inplace=True)) == "relu6_"
    assert module_call_name(nn.Hardtanh()) == "hardtanh"
    assert module_call_name(nn.Hardtanh(0.0, 5.0)) == "hardtanh"
    changed = nn.ReLU6()
    changed.max_val = 3.0  # computes hardtanh(0, 3), as its traced call says in other dialects
    assert module_call_name(changed) == "hardtanh"


def test_non_relu6_bounds_in_every_dialect(dialect):
    class Other(nn.Module):
        def forward(self, x):
            return F.hardtanh(F.hardtanh(F.hardtanh(x, 0.0, 5.0), -6.0, 6.0), 0.0, 6.0) * 2

    c = capture(Other(), [torch.randn(8)], dialect)
    relu6 = [n for n in c.gm.graph.nodes if op_name(n, c.gm) == "relu6"]
    # only the last, hardtanh(0, 6), is relu6
    assert [_bounds(n) for n in relu6] == [(0.0, 6.0)]
    assert _visits(c, "relu6") == [(relu6[0].target, "relu6")]
    assert [name for _, name in _visits(c, "hardtanh")] == ["hardtanh", "hardtanh", "relu6"]


def _bounds(node: torch.fx.Node):
    args = dict(zip(("min_val", "max_val"), node.args[1:3]))
    args.update({k: v for k, v in node.kwargs.items() if k in ("min_val", "max_val")})
    return args.get("min_val"), args.get("max_val")


def test_a_traced_bound_is_not_relu6():
    """Under symbolic_trace a bound can be a graph input: not known to be 0 until it runs."""

    class Bounded(nn.Module):
        def forward(self, x, lo):
            return F.hardtanh(F.hardtanh(x, lo, 6.0), 0, 6.0)

    gm = torch.fx.symbolic_trace(Bounded())
    Visits.seen = []
    fxpasses.Pipeline([Visits], verify="none").run(gm)
    seen = [(h, _bounds(n)) for h, n in Visits.seen]
    lo = next(n for n in gm.graph.nodes if n.name == "lo")
    # graph order: the hardtanh with the traced bound (hardtanh only), then hardtanh(0, 6)
    assert seen == [("hardtanh", (lo, 6.0)), ("relu6", (0, 6.0)), ("hardtanh", (0, 6.0))]


def _module_classes():
    """Every module class of torch.nn that builds with no arguments (activations, dropouts,
    flatten, identity, ...), besides Hardtanh and ReLU6 with their bounds."""
    out = []
    for name in sorted(dir(nn)):
        cls = getattr(nn, name)
        if isinstance(cls, type) and issubclass(cls, nn.Module):
            try:
                out.append(cls())
            except Exception:
                continue
            try:
                out.append(cls(inplace=True))
            except Exception:
                pass
    return out + [nn.Hardtanh(0, 6), nn.Hardtanh(0.0, 6.0, True), nn.Hardtanh(-2, 2, True), nn.ReLU6(True)]


def test_module_call_names_holds_every_name_a_call_of_the_class_can_have():
    """The runner asks for a call's name only where a hook wants one of module_call_names:
    every name module_call_name gives must be among them, or a hook would miss its calls."""
    from fxpasses.ops import module_call_names

    mods = _module_classes()
    assert len(mods) > 60
    for mod in mods:
        assert module_call_name(mod) in module_call_names(type(mod)), type(mod)
    assert module_call_names(nn.ReLU) == {"relu", "relu_"}
    assert module_call_names(nn.ReLU6) == {"relu6", "relu6_", "hardtanh", "hardtanh_"}
    assert module_call_names(nn.Conv2d) == {"conv2d", "conv2d_"}
    changed = nn.ReLU()
    changed.inplace = True  # set after construction: a class's possible names cover it
    assert module_call_name(changed) == "relu_"


class _Relus(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.plain = nn.ReLU()
        self.inplace = nn.ReLU(inplace=True)
        self.bounded = nn.Hardtanh()
        self.r6 = nn.Hardtanh(0, 6)

    def forward(self, x):
        return self.r6(self.bounded(self.inplace(self.plain(x * 2))))


class _InPlaceAndRelu6(NodePass):
    name = "record_inplace_relu_and_relu6"
    seen: list[tuple[str, str]] = []

    @on("relu_")
    def relu_(self, node, ctx):
        self.seen.append(("relu_", node.target))

    @on("relu6")
    def relu6(self, node, ctx):
        self.seen.append(("relu6", node.target))


def test_hooks_see_module_calls_by_each_call_s_name_not_the_first_of_its_class():
    """Calls of one class with different names (nn.ReLU() then nn.ReLU(inplace=True);
    nn.Hardtanh() then nn.Hardtanh(0, 6)): a hook on one name sees exactly its calls."""
    gm = torch.fx.symbolic_trace(_Relus())
    _InPlaceAndRelu6.seen = []
    fxpasses.Pipeline([_InPlaceAndRelu6], verify="none").run(gm)
    assert _InPlaceAndRelu6.seen == [("relu_", "inplace"), ("relu6", "r6")]
