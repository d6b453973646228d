"""Op names and families: in-place calls are one op in every dialect, never the out-of-place op."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxpasses
from fxpasses import NodePass, Replace, on
from fxpasses.capture import DIALECTS, capture
from fxpasses.job import DEFAULT_PRESET
from fxpasses.ops import FAMILIES, call_op_name, define_family, family_members, inplace_position, op_name
from fxpasses.testing import assert_preserves_outputs


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class Activations(nn.Module):
    """Every spelling of an in-place relu, then of an out-of-place one, then adds."""

    def __init__(self) -> None:
        super().__init__()
        self.act_ip = nn.ReLU(inplace=True)
        self.act = nn.ReLU()

    def forward(self, x):
        y = x * 2  # a fresh tensor: the in-place ops below do not write the input
        y = self.act_ip(y)
        y = F.relu(y, inplace=True)
        y = F.relu(y, True)  # inplace given by position
        y = torch.relu_(y)
        y = y.relu_()
        y = self.act(y)
        y = F.relu(y)
        y = F.relu(y, inplace=False)
        y = torch.relu(y)
        y = y.relu()
        y.add_(1)
        y = torch.add(y, 1)
        return y + 1


EXPECTED = ["relu_"] * 5 + ["relu"] * 5 + ["add_", "add", "add"]


def _recorder(name: str):
    @on(name)
    def hook(self, node, ctx):
        self.seen.append((name, op_name(node, ctx.gm)))

    return hook


class Record(NodePass):
    """Records which hook saw which node (keeps every node)."""

    name = "record_ops"
    seen: list[tuple[str, str | None]] = []
    relu = _recorder("relu")
    relu_ = _recorder("relu_")
    add = _recorder("add")
    add_ = _recorder("add_")


def test_inplace_spellings_match_the_same_nodes_in_every_dialect(dialect):
    c = capture(Activations(), [torch.randn(4)], dialect)
    Record.seen = []
    fxpasses.Pipeline([Record], verify="none").run(c.gm)
    assert [hook for hook, _ in Record.seen] == EXPECTED
    # the hook that saw a node is the node's own op name
    assert all(hook == name for hook, name in Record.seen)


def test_inplace_dropout_spellings_are_dropout_(dialect):
    class Drops(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.d_ip = nn.Dropout(0.5, inplace=True)
            self.d = nn.Dropout(0.5)

        def forward(self, x):
            y = x * 2
            y = self.d_ip(y)
            y = F.dropout(y, 0.3, self.training, True)
            y = torch.dropout_(y, 0.2, self.training)
            return self.d(y) + F.dropout(y, 0.1, self.training)

    gm = capture(Drops().eval(), [torch.randn(4)], dialect).gm
    names = [op_name(n, gm) for n in gm.graph.nodes if n.op.startswith("call") and n.target != "_guards_fn"]
    assert names == ["mul", "dropout_", "dropout_", "dropout_", "dropout", "dropout", "add"]
    assert {"dropout_"} <= family_members("dropout_")
    assert not any(name.endswith("_") for name in family_members("dropout"))


class ReluToClamp(NodePass):
    """Rewrites relu(x) as x.clamp(min=0): right for relu, wrong for relu_ (drops the write)."""

    name = "relu_to_clamp"

    @on("relu")
    def relu(self, node, ctx):
        ctx.count("replaced")
        return Replace(ctx.call_method("clamp", (node.args[0],), {"min": 0}))


class WritesThroughRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        y = x * 2
        z = self.act(y)  # writes y
        w = F.relu(y - 3, inplace=True)
        return y + z + w  # y is the relu'd value


def test_a_relu_rewrite_never_sees_an_inplace_relu():
    """Formerly nn.ReLU(inplace=True) and F.relu(inplace=True) were "relu" under
    symbolic_trace and TorchDynamo: the rewrite dropped the write and the outputs changed."""
    results = assert_preserves_outputs(ReluToClamp, WritesThroughRelu(), [torch.randn(8)])
    for dialect, (_, report) in results.items():
        assert report["relu_to_clamp"].counters.get("replaced", 0) == 0, dialect
    # ... while the out-of-place module is rewritten in every dialect
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    results = assert_preserves_outputs(ReluToClamp, model, [torch.randn(2, 4)])
    assert {d: r["relu_to_clamp"].counters.get("replaced", 0) for d, (_, r) in results.items()} == {
        d: 1 for d in DIALECTS
    }


def test_call_op_name_reads_the_inplace_argument():
    x = torch.fx.Graph().placeholder("x")
    assert inplace_position(F.relu) == 1
    assert inplace_position(F.dropout) == 3
    assert inplace_position(torch.relu) is None
    assert inplace_position(torch.ops.aten.relu.default) is None
    assert call_op_name(F.relu, (x,), {}) == "relu"
    assert call_op_name(F.relu, (x, False), {}) == "relu"
    assert call_op_name(F.relu, (x,), {"inplace": True}) == "relu_"
    assert call_op_name(F.dropout, (x, 0.5, False, True), {}) == "dropout_"
    assert call_op_name(F.leaky_relu, (x, 0.1, True), {}) == "leaky_relu_"
    # a flag known only when the graph runs may be true: not the out-of-place op
    assert call_op_name(F.relu, (x, x), {}) == "relu_"
    assert call_op_name(torch.relu_, (x,), {}) == "relu_"


def test_inplace_twins_of_families():
    assert family_members("div_") == {"div_", "true_divide_", "divide_"}
    assert family_members("mul_") == {"mul_", "multiply_"}
    assert family_members("dropout_") == {m + "_" for m in FAMILIES["dropout"]}
    assert family_members("relu_") == {"relu_"}
    with pytest.raises(ValueError, match=r"family 'act' may not contain in-place op names \['relu_'\]"):
        define_family("act", ["relu", "relu_"])


@pytest.mark.parametrize(
    "name, members, error, message",
    [
        ("fam", "sigmoid", TypeError, r"not one string \(it would be read as its characters\); write \['sigmoid'\]"),
        ("fam", b"relu", TypeError, r"members must be a collection of op names \(str\), not bytes"),
        ("fam", 42, TypeError, r"members must be an iterable of op names, not int"),
        ("fam", ["relu", 42], TypeError, r"members must be op names \(str\), not 42"),
        (3, ["relu"], TypeError, r"the family name must be a str, not int"),
        ("fam", [], ValueError, r"give at least one member"),
        ("Bad Name", ["relu"], ValueError, r"'Bad Name' is not an op name"),
        ("fam", ["re lu"], ValueError, r"'re lu' is not an op name"),
        ("relu_", ["relu"], ValueError, r"family 'relu_' may not contain out-of-place op names \['relu'\]"),
    ],
)
def test_define_family_refuses_what_would_match_wrongly(monkeypatch, name, members, error, message):
    """A string of members would be its characters (``@on("fam")`` then matched nothing, in
    silence); other bad arguments raised an AttributeError from inside, or were accepted."""
    from fxpasses import ops

    monkeypatch.setattr(ops, "FAMILIES", dict(ops.FAMILIES))
    before = dict(ops.FAMILIES)
    with pytest.raises(error, match=message):
        define_family(name, members)
    assert ops.FAMILIES == before
    define_family("fam", ("tanh",))
    assert family_members("fam") == {"fam", "tanh"}


class InPlaceNet(nn.Module):
    """Conv + BN + in-place relu, in-place eval dropouts, in-place adds, x*1 and constants."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.act = nn.ReLU(inplace=True)
        self.drop = nn.Dropout(0.5, inplace=True)
        self.register_buffer("scale", torch.full((4, 1, 1), 2.0))
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)

    def forward(self, x):
        y = self.act(self.bn(self.conv(x)))
        y = self.drop(y)
        y = F.dropout(y, 0.3, self.training, True)
        y = torch.dropout_(y, 0.2, self.training)
        y.add_(self.scale * 1)
        y = F.relu(y * 1, inplace=True)
        y = y.relu_()
        y += 1
        return y * (self.scale + 1)


_REGISTRY = fxpasses.Registry()
#: every built-in pass that may change a graph
BUILTIN_TRANSFORMS = sorted(
    n for n in _REGISTRY.names()
    if _REGISTRY.info(n).distribution == "fxpasses" and _REGISTRY.get(n).kind != "analysis"
)
DEFAULT_PIPELINE = _REGISTRY.preset(DEFAULT_PRESET).pipeline
_OPTIONS = {"rename_nodes": {"pattern": r"^([a-z]+)[a-z_0-9]*$", "replacement": r"\1"}}


@pytest.mark.parametrize("passes", [*([(n, _OPTIONS.get(n, {}))] for n in BUILTIN_TRANSFORMS), DEFAULT_PIPELINE],
                         ids=[*BUILTIN_TRANSFORMS, "default"])
def test_builtin_passes_keep_outputs_with_inplace_ops(passes):
    model = InPlaceNet().eval()
    results = assert_preserves_outputs(passes, model, [torch.randn(2, 3, 5, 5)],
                                       check_inputs=[[torch.randn(2, 3, 5, 5)]])
    for dialect, (gm, report) in results.items():
        names = [op_name(n, gm) for n in gm.graph.nodes if n.op.startswith("call")]
        if "remove_dropout" in {p.name for p in report}:  # the three in-place eval dropouts go
            assert report["remove_dropout"].counters == {"removed": 3}, dialect
            assert not any(n and n.startswith("dropout") for n in names), (dialect, names)
        # every in-place relu is still there, written where it was
        assert names.count("relu_") == 3, (dialect, names)


def test_augmented_add_is_in_place_except_under_symbolic_trace(dialect):
    """What the README's Limits say: torch.fx proxies have no in-place ``+=``."""

    class AddInPlace(nn.Module):
        def forward(self, x):
            y = x * 2
            y += 1
            return y

    gm = capture(AddInPlace(), [torch.randn(3)], dialect).gm
    names = [op_name(n, gm) for n in gm.graph.nodes if n.op == "call_function"]
    assert names == ["mul", "add" if dialect == "symbolic_trace" else "add_"]


def test_define_family_takes_a_family_member_as_its_members_and_warns_of_a_misspelt_one(monkeypatch):
    """``["conv"]`` matched no conv (a call is named after its op, never its family), and
    ``["rleu"]`` was taken in silence where ``@on("rleu")`` warns."""
    import warnings

    from fxpasses import ops
    from fxpasses.errors import PassDefinitionWarning

    monkeypatch.setattr(ops, "FAMILIES", dict(ops.FAMILIES))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        define_family("fxp_convs", ["conv", "zq_blockwise"])  # a name unlike any known one: no warning
    assert family_members("fxp_convs") == {"fxp_convs", "zq_blockwise"} | family_members("conv")
    assert "conv2d" in family_members("fxp_convs")
    with pytest.warns(PassDefinitionWarning, match=r"define_family\('fxp_act', ...\): 'rleu' names no known op or family; did you mean 'relu'\?"):
        define_family("fxp_act", ["rleu"])
    assert family_members("fxp_act") == {"fxp_act", "rleu"}


class _Aliases(torch.nn.Module):
    def forward(self, x):
        a = torch.clip(x, 0, 1) + x.clip(min=0) + torch.clamp(x, max=2)
        b = x.absolute() + torch.arccos(x.clamp(-0.5, 0.5)) + torch.fix(x)
        c = torch.swapaxes(x.unsqueeze(0), 0, 1).squeeze(1) + torch.concat([x, x]).sum()
        d = torch.greater(x, 0) & x.less_equal(1) & torch.not_equal(x, 2)
        e = torch.special.expit(x) + torch.special.erf(x) + torch.linalg.matmul(x.unsqueeze(0), x.unsqueeze(1)).sum()
        return a + b + c + d + e


class _CountAliases(NodePass):
    name = "count_aliases"
    writes_tensors = False
    journal_edits = True

    @on("clamp", "abs", "acos", "trunc", "transpose", "cat", "gt", "le", "ne", "sigmoid", "erf", "matmul")
    def count(self, node, ctx):
        families = ("clamp", "abs", "acos", "trunc", "transpose", "cat", "gt", "le", "ne", "sigmoid", "erf", "matmul")
        ctx.count(next(f for f in families if op_name(node, ctx.gm) in FAMILIES[f]))


def test_a_subscription_to_an_op_matches_torchs_aliases_of_it_in_every_dialect():
    """`@on("clamp")` missed `clip` (and `abs` missed `absolute`, ...) under symbolic_trace and
    TorchDynamo, where the alias is its own function; export had normalized them (a new-user
    check). The families follow torch's alias map (normalize_ops.cpp)."""
    x = torch.randn(4)
    results = assert_preserves_outputs(_CountAliases, _Aliases(), [x])
    want = {"clamp": 4, "abs": 1, "acos": 1, "trunc": 1, "transpose": 1, "cat": 1, "gt": 1, "le": 1, "ne": 1, "sigmoid": 1, "erf": 1, "matmul": 1}
    for dialect, (_, report) in results.items():
        assert report["count_aliases"].counters == want, dialect


class _RsubAddmm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w, self.b = torch.nn.Parameter(torch.randn(4, 3)), torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        return torch.rsub(x, 1.0) * 2, torch.addmm(self.b, x, self.w), x - 1.0, torch.nn.functional.linear(x, self.w.t(), self.b)


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_sub_and_linear_do_not_match_rsub_and_addmm(dialect):
    """`@on("sub")` matched `rsub` (`rsub(x, c)` is `c - x`) and `@on("linear")` matched
    `addmm(bias, x, w)` (another operand order, `w` transposed): a textbook `x - c -> x + (-c)`
    pass changed `1.0 - x` into `x - 1.0` under torch.export, and a linear rewrite broke
    GPT-2's `Conv1D` (a pass-author check). They are not aliases; each has its own name."""
    from fxpasses.capture import capture
    from fxpasses.ops import family_members, op_name

    if dialect == "dynamo":
        torch._dynamo.reset()
    assert "rsub" not in family_members("sub") and "addmm" not in family_members("linear")
    gm = capture(_RsubAddmm(), [torch.randn(2, 4)], dialect).gm
    seen = {"sub": [], "linear": []}

    class Watch(NodePass):
        name = "watch"

        @on("sub")
        def sub(self, node, ctx):
            seen["sub"].append(op_name(node, gm))

        @on("linear")
        def linear(self, node, ctx):
            seen["linear"].append(op_name(node, gm))

    fxpasses.Pipeline([Watch]).run(gm)
    assert seen == {"sub": ["sub"], "linear": ["linear"]}, seen


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_matches_tests_a_node_as_a_subscription_would(dialect):
    """A pass author tested the input of a transpose with `op_name(inner) == "transpose"`,
    which is false for `swapaxes` (op name "swapaxes") though `@on("transpose")` delivers it:
    every swapaxes pair was missed silently. `ops.matches(node, name)` answers as the
    subscription does, in every dialect."""
    from fxpasses.capture import capture
    from fxpasses.ops import matches

    class Pairs(torch.nn.Module):
        def forward(self, x):
            return x.swapaxes(0, 1).transpose(0, 1).relu_() + torch.nn.functional.relu(x)

    if dialect == "dynamo":
        torch._dynamo.reset()
    gm = capture(Pairs(), [torch.randn(2, 3)], dialect).gm
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
    transposes = [n for n in calls if matches(n, "transpose", gm)]
    assert len(transposes) == 2
    assert [op_name(n, gm) for n in transposes] == ["swapaxes", "transpose"]  # (what == "transpose" missed)
    assert [matches(n, "relu", gm) for n in calls if op_name(n, gm) in ("relu", "relu_")].count(True) == 1  # not relu_
    assert sum(matches(n, "relu_", gm) for n in calls) == 1
    assert not any(matches(n, "conv", gm) for n in gm.graph.nodes)  # (placeholders and output: no op name)
