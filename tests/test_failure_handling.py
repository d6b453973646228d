"""What a failing pass turns into: which exceptions are the pass's failure, what the error
says about the node after a rollback, and what is put back besides the graph."""

from __future__ import annotations

import operator
from typing import Any, Callable

import pytest
import torch

import fxpasses
from fxpasses import GraphPass, NodePass, PassFailedError, Pipeline, Replace, UserError, on
from fxpasses.capture import capture
from fxpasses.testing import normalized_code
from fxpasses.errors import ConfigError, CycleError, OptionsError, UnknownPassError


class _Helper(GraphPass):
    name = "helper"

    def run(self, gm, ctx):
        return False


def _relu_graph():
    return torch.fx.symbolic_trace(torch.nn.ReLU()), [torch.randn(3)]


@pytest.mark.parametrize(
    "build, error",
    [
        (lambda: _Helper(nope=1), OptionsError),
        (lambda: Pipeline(["no_such_pass_anywhere"]), UnknownPassError),
        (lambda: Pipeline(["eliminate_dead_code"], verify="sometimes"), ConfigError),
    ],
)
@pytest.mark.parametrize("kind", ["node", "graph"])
def test_errors_of_building_passes_in_a_pass_are_that_passs_failure(build, error, kind):
    class Builder(NodePass):
        name = "builder"

        @on("relu")
        def visit(self, node, ctx):
            build()

    class WholeBuilder(GraphPass):
        name = "builder"

        def run(self, gm, ctx):
            build()

    cls = Builder if kind == "node" else WholeBuilder
    gm, x = _relu_graph()
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([cls]).run(gm, x)
    assert info.value.pass_name == "builder"
    assert isinstance(info.value.__cause__, error)
    assert info.value.reason.startswith(f"{error.__name__}: ")
    if kind == "node":
        assert info.value.node["name"] == "relu"
    assert gm.code == code
    report = Pipeline([cls, "eliminate_dead_code"], on_error="skip").run(gm, x)  # skipped, the run goes on
    assert [(p.name, p.status) for p in report.passes] == [("builder", "skipped"), ("eliminate_dead_code", "ok")]


def test_a_cycle_error_of_a_pipeline_a_pass_builds_is_its_failure():
    class A(GraphPass):
        name = "cyc_a"
        after = ("cyc_b",)

        def run(self, gm, ctx):
            return False

    class B(GraphPass):
        name = "cyc_b"
        after = ("cyc_a",)

        def run(self, gm, ctx):
            return False

    class Outer(GraphPass):
        name = "outer"

        def run(self, gm, ctx):
            Pipeline([A, B]).run(gm)

    gm, x = _relu_graph()
    with pytest.raises(PassFailedError) as info:
        Pipeline([Outer]).run(gm, x)
    assert isinstance(info.value.__cause__, CycleError)


class _NeedsSomething(UserError):
    pass


@pytest.mark.parametrize("error", [UserError("give me example inputs"), _NeedsSomething("give me example inputs")])
@pytest.mark.parametrize("on_error", ["rollback", "skip"])
def test_a_user_error_a_pass_raises_is_raised_as_it_is(error, on_error):
    class Asks(NodePass):
        name = "asks"

        @on("relu")
        def visit(self, node, ctx):
            ctx.set_target(node, torch.sigmoid)
            raise error

    gm, x = _relu_graph()
    code = gm.code
    with pytest.raises(type(error), match="give me example inputs") as info:
        Pipeline([Asks], on_error=on_error).run(gm, x)
    assert not isinstance(info.value, PassFailedError)
    assert gm.code == code
    # it names the pass that raised it (it did not: a new-user check)
    assert str(info.value) == "pass 'asks': give me example inputs"


class _Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.lin(x))


@pytest.mark.parametrize("fail", [False, True])
@pytest.mark.parametrize("change", ["freeze", "grad"])
def test_a_pass_changing_requires_grad_or_grad_of_parameter_inputs_fails_and_they_are_put_back(fail, change):
    model = _Small()
    c = capture(model, [torch.randn(2, 4)], "dynamo")
    params = [t for t in c.inputs if isinstance(t, torch.nn.Parameter)]
    assert len(params) == 2
    grads = [None, torch.ones(3)]
    params[1].grad = grads[1]

    class Meddler(GraphPass):
        name = "meddler"

        def run(self, gm, ctx):
            for t in ctx.example_inputs:
                if isinstance(t, torch.nn.Parameter):
                    if change == "freeze":
                        t.requires_grad_(False)
                    else:
                        t.grad = torch.zeros_like(t)
            if fail:
                raise RuntimeError("boom")
            return False

    code = c.gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([Meddler]).run(c.gm, c.inputs)
    text = str(info.value)
    said = "requires_grad True -> False" if change == "freeze" else ".grad set"
    assert said in text
    if fail:
        assert "boom" in info.value.reason
    else:
        assert "the pass changed the example input(s)" in info.value.reason
    assert "were put back" in text
    assert [p.requires_grad for p in model.parameters()] == [True, True]
    assert [p.grad for p in params] == grads and params[1].grad is grads[1]
    assert c.gm.code == code


def test_requires_grad_changed_by_a_pass_run_with_on_error_raise_is_named_and_kept():
    model = _Small()
    c = capture(model, [torch.randn(2, 4)], "dynamo")

    class Freezer(GraphPass):
        name = "freezer"

        def run(self, gm, ctx):
            for t in ctx.example_inputs:
                if isinstance(t, torch.nn.Parameter):
                    t.requires_grad_(False)
            raise RuntimeError("boom")

    with pytest.raises(PassFailedError) as info:
        Pipeline([Freezer], on_error="raise").run(c.gm, c.inputs)
    assert "before it failed, the pass changed the example input(s)" in str(info.value)
    assert [p.requires_grad for p in model.parameters()] == [False, False]  # nothing rolled back


@pytest.mark.parametrize("journal_edits", [False, True])
def test_the_failing_node_is_described_as_the_pass_left_it_and_as_the_rollback_put_it_back(journal_edits):
    gm = capture(_Small(), [torch.randn(2, 4)], "export").gm
    relu = next(n for n in gm.graph.nodes if n.op == "call_function" and "relu" in str(n.target))
    before = (relu.target, relu.args)

    class Retarget(NodePass):
        name = "retarget"

        @on("relu")
        def visit(self, node, ctx):
            if journal_edits:
                ctx.set_target(node, torch.ops.aten.sigmoid.default)
            else:
                node.target = torch.ops.aten.sigmoid.default
                node.args = (node.args[0], 100)
            raise RuntimeError("boom")

    Retarget.journal_edits = journal_edits
    Retarget.writes_tensors = not journal_edits
    with pytest.raises(PassFailedError) as info:
        Pipeline([Retarget]).run(gm, [torch.randn(2, 4)])
    assert (relu.target, relu.args) == before
    node = info.value.node
    assert node["target"] == "aten.sigmoid.default"
    assert node["after_rollback"]["target"] == "aten.relu.default"
    line = str(info.value).splitlines()[1]
    assert "target=aten.sigmoid.default" in line
    assert "(as the pass left it; after the rollback: target=aten.relu.default" in line
    if not journal_edits:
        assert "args=(%linear, 100)" in line
        assert node["after_rollback"]["args"] == "(%linear,)"


def test_a_failing_node_the_pass_did_not_change_gets_no_after_rollback_note():
    gm, x = _relu_graph()

    class Fails(NodePass):
        name = "fails"

        @on("relu")
        def visit(self, node, ctx):
            raise RuntimeError("boom")

    with pytest.raises(PassFailedError) as info:
        Pipeline([Fails]).run(gm, x)
    assert "after_rollback" not in info.value.node
    assert "after the rollback" not in str(info.value)


class _Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("str fails")


@pytest.mark.parametrize("kind", ["node", "graph"])
def test_an_exception_whose_str_raises_is_still_named_and_kept_as_the_cause(kind):
    class NodeRaises(NodePass):
        name = "raises"

        @on("relu")
        def visit(self, node, ctx):
            raise _Unprintable()

    class GraphRaises(GraphPass):
        name = "raises"

        def run(self, gm, ctx):
            raise _Unprintable()

    gm, x = _relu_graph()
    with pytest.raises(PassFailedError) as info:
        Pipeline([NodeRaises if kind == "node" else GraphRaises]).run(gm, x)
    assert type(info.value.__cause__) is _Unprintable
    assert info.value.reason == "_Unprintable: <str() of the _Unprintable raised RuntimeError: str fails>"
    if kind == "node":
        assert info.value.node["name"] == "relu"
    from fxpasses.cli import _error_object

    obj = _error_object(info.value, 1)
    assert obj["error"]["cause"] == "_Unprintable: <str() of the _Unprintable raised RuntimeError: str fails>"
    assert _error_object(_Unprintable(), 1)["error"]["message"].startswith("<str() of the _Unprintable raised")


def test_exception_text_never_raises():
    from fxpasses.errors import exception_line, exception_message, exception_text

    class Worse(Exception):
        def __str__(self):
            raise _Unprintable()

    assert exception_message(ValueError("plain")) == "plain"
    assert exception_text(ValueError("a\nb")) == "ValueError: a\nb"
    assert exception_line(ValueError("a\nb")) == "ValueError: a"
    assert exception_text(Worse()) == "Worse: <str() of the Worse raised _Unprintable: ?>"


class _Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1


def _refused(pass_cls: type, model: torch.nn.Module | None = None) -> PassFailedError:
    """The failure of ``pass_cls`` alone on the symbolic_trace graph of ``model`` (``_Model``),
    checked to leave the graph's code as it was."""
    gm = torch.fx.symbolic_trace(model if model is not None else _Model())
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([pass_cls]).run(gm, [torch.randn(3)])
    assert gm.code == code
    return info.value


@pytest.mark.parametrize("journal_edits", [False, True])
def test_a_lint_failure_names_the_node_it_is_about_and_its_source_line(journal_edits, tmp_path):
    class Misplaced(NodePass):
        """Inserts cos(sin(x)) with cos before sin: used before defined."""

        name = "misplaced"

        @on("relu")
        def visit(self, node, ctx):
            with ctx.inserting_before(node):
                sin = ctx.call_function(torch.sin, (node.args[0],))
            with ctx.inserting_before(sin):
                cos = ctx.call_function(torch.cos, (sin,))
            return Replace(ctx.call_function(torch.add, (node, cos)))

    Misplaced.journal_edits = journal_edits
    Misplaced.writes_tensors = not journal_edits
    c = capture(_Model(), [torch.randn(3)], "export")
    code = c.gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([Misplaced]).run(c.gm, c.inputs)
    err = info.value
    assert "was used before it has been defined" in err.reason
    assert err.node is not None and err.node["target"] == "torch.cos" and err.node["args"] == "(%sin,)"
    assert f"at node %{err.node['name']} (op=call_function, target=torch.cos" in str(err)
    # made through the context while %relu was visited: it carries that node's user line
    assert err.source_line is not None and "return torch.relu(x) + 1" in err.source_line
    assert c.gm.code == code


def test_an_unspellable_argument_names_its_node_and_the_users_line():
    class Unspellable(NodePass):
        name = "unspellable"

        @on("relu")
        def visit(self, node, ctx):
            node.args = (node.args[0], object())

    c = capture(_Model(), [torch.randn(3)], "export")
    with pytest.raises(PassFailedError) as info:
        Pipeline([Unspellable]).run(c.gm, c.inputs)
    err = info.value
    assert "cannot spell" in err.reason
    assert err.node["name"] == "relu" and err.node["after_rollback"]["args"] == "(%x,)"
    assert err.source_line is not None and "torch.relu(x) + 1" in err.source_line


def _scaled(x, **kw):
    return x * 100


torch.fx.wrap("_scaled")


def _nested(depth):
    v = 1
    for _ in range(depth):
        v = [v]
    return v


@pytest.mark.parametrize("journal_edits", [True, False])
@pytest.mark.parametrize(
    "edit, said",
    [
        ({"kwargs": {"from": 1}}, "keyword argument named 'from'"),
        ({"kwargs": {"a b": 1}}, "keyword argument named 'a b'"),
        ({"kwargs": {3: 1}}, "keyword argument named 3,"),
        ({"method": 'a"b'}, "(call_method) has the target 'a\"b'"),
        ({"method": "lambda"}, "(call_method) has the target 'lambda'"),
        ({"kwargs": {"k": _nested(250)}}, "nested more than 190 containers deep"),
    ],
)
def test_names_and_nesting_the_generated_code_cannot_write_fail_the_pass_and_are_rolled_back(edit, said, journal_edits):
    """Lint passed a keyword argument named `from` (or `a b`, or 3), a method named `a b`, and
    an argument nested 250 lists deep: the pass was reported ok, then the final recompile()
    raised a SyntaxError with nothing rolled back, leaving gm.graph changed and gm's code
    the old one (a new-user check)."""

    class Unwritable(NodePass):
        name = "unwritable"

        @on("relu")
        def visit(self, node, ctx):
            if "method" in edit:
                with ctx.inserting_before(node):
                    return Replace(ctx.call_method(edit["method"], (node.args[0],)))
            return Replace(ctx.call_function(_scaled, (node.args[0],), edit["kwargs"]))

    Unwritable.journal_edits = journal_edits
    Unwritable.writes_tensors = not journal_edits
    gm = torch.fx.symbolic_trace(_Model())
    code, x = gm.code, torch.randn(3)
    with pytest.raises(PassFailedError) as info:
        Pipeline([Unwritable]).run(gm, [x])
    assert said in info.value.reason and "the generated code" in info.value.reason and "cannot write" in info.value.reason, info.value.reason
    assert gm.code == code and normalized_code(gm.graph) == normalized_code(torch.fx.symbolic_trace(_Model()))
    torch.testing.assert_close(gm(x), torch.relu(x) + 1)


def test_arguments_nested_within_the_parsers_limit_pass_lint_and_compile():
    class Nested(NodePass):
        name = "nested"

        @on("relu")
        def visit(self, node, ctx):
            return Replace(ctx.call_function(_scaled, (node.args[0],), {"k": _nested(150), "from_": 1}))

    gm = torch.fx.symbolic_trace(_Model())
    x = torch.randn(3)
    assert Pipeline([Nested]).run(gm, [x])["nested"].status == "ok"
    torch.testing.assert_close(gm(x), x * 100 + 1)


def test_lint_culprit_finds_what_torchs_lint_names():
    from fxpasses.lint import lint_culprit

    gm = torch.fx.symbolic_trace(_Model())
    assert lint_culprit(gm) is None
    relu = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch.relu)
    add = relu.next
    add.args = (add, 1)  # itself, before it is defined
    assert lint_culprit(gm) is add
    add.args = (relu, 1)
    gm.graph.get_attr("missing.weight")
    missing = next(n for n in gm.graph.nodes if n.op == "get_attr")
    with pytest.raises(RuntimeError):
        gm.graph.lint()
    assert lint_culprit(gm) is missing


def _replacing_relu(make: Callable[[Any, Any], Any]) -> type[NodePass]:
    """A journaled pass named ``miscall`` replacing each relu by ``make(node, ctx)``."""

    class Miscall(NodePass):
        name = "miscall"
        writes_tensors = False
        journal_edits = True

        @on("relu")
        def visit(self, node, ctx):
            return Replace(make(node, ctx))

    return Miscall


@pytest.mark.parametrize(
    "args, kwargs, said",
    [
        ("x", {}, "with no 'other', which aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor requires"),
        ("xxxx", {}, "with 4 positional arguments, where aten::add.Tensor takes at most 2"),
        ("xx", {"beta": 2}, "with the keyword 'beta', which aten::add.Tensor"),
        ("x", {"self": 1}, "with 'self' both by position and by keyword"),
    ],
)
def test_an_aten_call_its_schema_does_not_take_fails_lint(args, kwargs, said):
    """`aten.add.Tensor(x)` with its second argument missing passed lint; only numeric
    verification (or running the module) caught it (a new-user check)."""
    # (args and kwargs are read when the hook runs: reassigned below for the call that passes)
    Miscall = _replacing_relu(lambda node, ctx: ctx.call_function(torch.ops.aten.add.Tensor, tuple(node.args[0] for _ in args), kwargs))

    c = capture(_Model(), [torch.randn(3)], "export")
    code = c.gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([Miscall]).run(c.gm, c.inputs)
    assert f"calls aten.add.Tensor {said}" in info.value.reason, info.value.reason
    assert c.gm.code == code
    # the same call with what its schema takes passes
    ok = capture(_Model(), [torch.randn(3)], "export")
    args, kwargs = "xx", {"alpha": 2}
    assert Pipeline([Miscall]).run(ok.gm, ok.inputs)["miscall"].status == "ok"


def _helper(x, scale=1.0, *, shift=0.0):
    return x * scale + shift


@pytest.mark.parametrize(
    "target, kwargs, said",
    [
        (torch.relu, {"bogus": 1}, "calls torch.relu with the keyword 'bogus', which it does not take (its arguments: input)"),
        (torch.sum, {"keepdm": True}, "calls torch.sum with the keyword 'keepdm', which it does not take (its arguments: dim, dtype, input, keepdim)"),
        (torch.nn.functional.relu, {"inplce": False}, "calls torch.nn.functional.relu with the keyword 'inplce', which it does not take (its arguments: inplace, input)"),
        (_helper, {"shfit": 1.0}, "with the keyword 'shfit', which it does not take (its arguments: scale, shift, x)"),
    ],
)
def test_a_call_with_a_keyword_its_function_does_not_take_fails_lint(target, kwargs, said):
    """`torch.relu(x, bogus=1)` passed lint (only ATen calls were checked against a schema) and
    the module failed when it ran (a new-user check). Keyword names are checked against the
    torch function's overloads (with torch's numpy aliases: `axis`, `keepdims`) or the Python
    function's signature; positional counts are not (torch takes deprecated forms its schemas
    do not list)."""
    Miscall = _replacing_relu(lambda node, ctx: ctx.call_function(target, (node.args[0],), kwargs))

    gm = torch.fx.symbolic_trace(_Model())
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([Miscall]).run(gm, [torch.randn(3)])
    assert said in info.value.reason, info.value.reason
    assert gm.code == code


@pytest.mark.parametrize(
    "target, kwargs",
    [
        (torch.sum, {"axis": 0, "keepdims": True}),  # numpy aliases torch takes
        (torch.sum, {"dim": 0, "dtype": torch.float64}),
        (torch.add, {"other": 1.0, "alpha": 2}),
        (torch.nn.functional.relu, {"inplace": False}),
        (torch.nn.functional.max_pool1d, {"kernel_size": 1, "return_indices": False}),  # boolean_dispatch
        (_helper, {"scale": 2.0, "shift": 1.0}),
        (torch.clamp, {"min": 0.0}),
    ],
)
def test_a_call_with_keywords_its_function_takes_passes_lint(target, kwargs):
    from fxpasses.lint import keyword_problem

    assert keyword_problem(target, kwargs) is None
    x = torch.randn(1, 3, 4)
    target(x, **kwargs)  # (and torch takes it)


class _SinCos(torch.nn.Module):
    def forward(self, x):
        return x.sin().cos() + torch.cos(x.relu())


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
@pytest.mark.parametrize("value", [None, 3.0])
def test_a_constant_put_where_a_call_cannot_take_it_fails_lint(dialect, value):
    """A hook returning `Replace(None)` (a helper that returned None) or `Replace(3.0)` for
    `x.sin()` passed lint; the module then failed on its first call: `None.cos()`,
    `aten.cos.default(None)` (a new-user check). Lint now refuses a method called on a constant
    that has no such method, and None for an argument whose type is not optional (ATen
    schemas, and every overload of a torch function). A number for a Tensor argument is left
    to numeric verification: ATen takes numbers for some (`aten.add.Tensor(x, 2)`)."""
    if dialect == "dynamo":
        torch._dynamo.reset()

    class ToConstant(NodePass):
        name = "to_constant"

        @on("sin")
        def sin(self, node, ctx):
            return Replace(value)

    c = capture(_SinCos(), [torch.randn(3)], dialect)
    code = c.gm.code
    if dialect == "export" and value == 3.0:  # aten.cos.default(3.0): left to numeric verification
        assert Pipeline([ToConstant]).run(c.gm, c.inputs)["to_constant"].status == "ok"
        with pytest.raises(PassFailedError, match="the module no longer runs on the example inputs"):
            Pipeline([ToConstant], verify="numeric").run(capture(_SinCos(), [torch.randn(3)], dialect).gm, c.inputs)
        return
    with pytest.raises(PassFailedError) as info:
        Pipeline([ToConstant]).run(c.gm, c.inputs)
    reason = info.value.reason
    if dialect == "export":
        assert "calls aten.cos.default with None for 'self', which aten::cos(Tensor self) -> Tensor does not take as None" in reason, reason
    else:
        assert f"calls the method 'cos' of {value!r} ({type(value).__name__}), which has no such method" in reason, reason
    assert info.value.node["name"] == "cos"
    assert c.gm.code == code


def test_none_for_a_torch_function_argument_no_overload_takes_as_none_fails_lint():
    """`torch.cos(None)` (symbolic_trace, TorchDynamo): every overload of torch.cos types its
    argument Tensor or a number. None where an overload takes it passes: `F.linear`'s bias,
    `torch.sum`'s dim, `x[None]`."""
    from fxpasses.lint import call_problem, schema_problem

    assert call_problem(torch.cos, (None,), {}) == "None for 'input', which no overload of it takes as None (the type is not optional)"
    assert call_problem(torch.cat, (["n"], None), {}) is not None
    assert call_problem(torch.nn.functional.linear, ("x", "w", None), {}) is None
    assert call_problem(torch.nn.functional.linear, ("x", "w"), {"bias": None}) is None
    assert call_problem(torch.sum, ("x", None), {}) is None
    assert call_problem(operator.getitem, ("x", None), {}) is None  # x[None] adds a dimension
    assert call_problem(torch.add, ("x", None), {}) is not None
    assert schema_problem(torch.ops.aten.sum.dim_IntList, ("x", None), {}) is None
    assert schema_problem(torch.ops.aten.addmm.default, (None, "a", "b"), {}) is not None

    Miscall = _replacing_relu(lambda node, ctx: ctx.call_function(torch.cos, (None,)))
    assert "calls torch.cos with None for 'input', which no overload of it takes as None" in _refused(Miscall).reason
    x = torch.randn(2, 3)
    torch.nn.functional.linear(x, torch.randn(4, 3), None), torch.sum(x, None), x[None]  # (torch takes these)


class _CatRelu(torch.nn.Module):
    def forward(self, x):
        return torch.cat([torch.relu(x), x.sin()]) * 2


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_none_inside_a_list_of_tensors_fails_lint(dialect):
    """`Replace(None)` for a relu read inside `torch.cat([relu, sin])` passed lint (only None
    itself was judged, not the items of a list), and the module failed when it ran (left
    noticed by the last session). A list whose item type takes no None refuses a None item:
    ATen's `Tensor[]`, the stubs' `tuple[Tensor, ...] | list[Tensor]`, torch's own Python
    functions' `List[Tensor]`; `Tensor?[]` (`aten.index.Tensor`'s indices) takes it."""
    from fxpasses.lint import call_problem, schema_problem

    if dialect == "dynamo":
        torch._dynamo.reset()
    c = capture(_CatRelu(), [torch.randn(3)], dialect)
    code = c.gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([_replacing_relu(lambda node, ctx: None)]).run(c.gm, c.inputs)
    said = {
        "symbolic_trace": "node %cat calls torch.cat with None for an item of 'tensors', which no overload of it takes as None",
        "dynamo": "node %cat calls torch.cat with None for an item of 'tensors', which no overload of it takes as None",
        "export": "calls aten.cat.default with None for an item of 'tensors', which aten::cat(Tensor[] tensors, int dim=0) -> Tensor does not take as None",
    }[dialect]
    assert said in info.value.reason, info.value.reason
    assert c.gm.code == code
    assert call_problem(torch.stack, (), {"tensors": ("x", None)}) == (
        "None for an item of 'tensors', which no overload of it takes as None (the type is not optional)"
    )
    assert call_problem(torch.cat, (["x", "y"],), {}) is None
    assert schema_problem(torch.ops.aten.index.Tensor, ("x", [None, "i"]), {}) is None  # (Tensor?[])
    x = torch.randn(2, 3)
    torch.ops.aten.index.Tensor(x, [None, torch.tensor([1])])  # (torch takes it)
    with pytest.raises(TypeError):
        torch.cat([x, None])


def test_none_given_to_an_overload_packet_or_a_tensor_method_descriptor_fails_lint():
    """`aten.cos` (an overload packet, which picks its overload when called) and
    `torch.Tensor.cos` (a method descriptor) as `call_function` targets were not judged, so
    `aten.cos(None)` and `torch.Tensor.cos(None)` passed lint (left noticed by the last
    session). A packet's call is refused when none of its overloads takes it; a descriptor's
    when it is called on a constant that is not a tensor."""
    from fxpasses.lint import call_problem

    assert call_problem(torch.ops.aten.cos, (None,), {}) == (
        "None for 'self', which aten::cos(Tensor self) -> Tensor does not take as None (its type is not optional)"
        f" (and none of its {len(torch.ops.aten.cos.overloads()) - 1} other overloads takes these arguments)"
    )
    assert call_problem(torch.ops.aten.sum, ("x", None), {}) is None  # (sum.dim_IntList takes dim=None)
    # counts and keywords too (a second new-user check): refused when no overload takes them
    assert call_problem(torch.ops.aten.cos, ("x", "x"), {}).startswith("2 positional arguments, where aten::cos.default takes at most 1")
    assert call_problem(torch.ops.aten.add, ("x", "x"), {"alph": 2}).startswith("the keyword 'alph', which aten::add.Tensor(")
    for target, args, kwargs in [
        (torch.ops.aten.add, ("x", "x"), {"alpha": 2}),
        (torch.ops.aten.add, ("x", 2), {}),
        (torch.ops.aten.add, ("x",), {"other": "y"}),
        (torch.ops.aten.view, ("x", [2, 3]), {}),
    ]:
        assert call_problem(target, args, kwargs) is None, (target, args, kwargs)
    assert call_problem(operator.getitem, (None, 0), {}) == "the constant None (NoneType) to index, which has no __getitem__"
    assert call_problem(operator.getitem, ((1, 2), 0), {}) is None and call_problem(operator.getitem, (list, int), {}) is None
    assert call_problem(operator.getitem, ("x", None), {}) is None
    assert call_problem(torch.Tensor.cos, (None,), {}) == "None (NoneType) to call it on, which is not a tensor"
    assert call_problem(torch.Tensor.add, (2, "x"), {}) == "2 (int) to call it on, which is not a tensor"
    assert call_problem(torch.Tensor.cos, (torch.ones(1),), {}) is None
    for target, said in [
        (torch.ops.aten.cos, "calls torch.ops.aten.cos with None for 'self', which aten::cos(Tensor self) -> Tensor does not take as None"),
        (torch.Tensor.cos, "calls torch.Tensor.cos with None (NoneType) to call it on, which is not a tensor"),
    ]:
        reason = _refused(_replacing_relu(lambda node, ctx, target=target: ctx.call_function(target, (None,)))).reason
        assert said in reason, reason
    with pytest.raises(TypeError):
        torch.Tensor.cos(None)
    with pytest.raises(RuntimeError):
        torch.ops.aten.cos(None)


def test_a_call_function_node_of_a_method_name_says_to_call_the_method_without_printing_the_graph():
    """`ctx.call_function(node.target, ...)` with a call_method node's target (a str) failed
    with torch's `ValueError: Node [graph = graph(): ...the whole graph...] target sum has type
    str but a Callable is expected` as the reason (a new-user check): megabytes on a big graph.
    The context says what the target must be and how to call a method; torch's own Node errors
    reach messages without the graph."""
    from fxpasses.errors import exception_message

    class Resum(NodePass):
        name = "resum"

        @on("relu")
        def visit(self, node, ctx):
            return Replace(ctx.call_function("sum", (node.args[0],)))

    assert _refused(Resum).reason == (
        "TypeError: a call_function node's target must be callable, not the str 'sum' ('sum' is a method's name, "
        "the target of a call_method node: ctx.call_method('sum', ...) calls it)"
    )
    gm = torch.fx.symbolic_trace(_Model())
    with pytest.raises(ValueError) as torchs:
        gm.graph.create_node("call_function", "sum", (next(iter(gm.graph.nodes)),), name="resummed")
    assert exception_message(torchs.value) == "Node [name = 'resummed'] target sum has type str but a Callable is expected"
    assert "graph():" in str(torchs.value)  # (what torch says)
    with pytest.raises(TypeError, match=r"a call_method node's target must be a str \(a method name or an attribute path\), not the builtin_function_or_method <built-in method sum"):
        fxpasses.PassContext(gm, pass_name="resum", dialect="symbolic_trace").call_method(torch.sum, ())


class _LinRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x).relu()


def _two(a, b):
    return a + b


def test_a_call_its_module_or_python_function_does_not_take_fails_lint():
    """A call_module node rewired with an argument its module's forward does not take
    (`self.lin(x, x)`), or a call of a Python function missing a required argument, passed lint
    and failed when the module ran: the kind of `Replace(None)` (a new-user check). Lint binds
    the arguments to the forward's, or the function's, signature."""
    from fxpasses.lint import call_problem, module_call_problem

    class ExtraArgument(NodePass):
        name = "extra_argument"

        @on("relu")
        def r(self, node, ctx):
            lin = node.args[0]
            lin.args = (lin.args[0], lin.args[0])
            return None

    class MissingArgument(NodePass):
        name = "missing_argument"

        @on("relu")
        def r(self, node, ctx):
            return Replace(ctx.call_function(_two, (node.args[0],)))

    for bad, said in [
        (ExtraArgument, "node %lin calls submodule 'lin' (Linear) with arguments that its forward(input: torch.Tensor) -> torch.Tensor does not take: too many positional arguments"),
        (MissingArgument, "calls tests.test_failure_handling._two with arguments it does not take: missing a required argument: 'b' (its signature: _two(a, b))"),
    ]:
        gm = torch.fx.symbolic_trace(_LinRelu())
        code = gm.code
        with pytest.raises(PassFailedError) as info:
            Pipeline([bad]).run(gm, [torch.randn(2, 3)])
        assert said in info.value.reason, info.value.reason
        assert gm.code == code
    root = torch.nn.Module()
    root.lin, root.seq, root.mha = torch.nn.Linear(3, 3), torch.nn.Sequential(torch.nn.ReLU()), torch.nn.MultiheadAttention(4, 2)
    assert module_call_problem(root, "lin", ("x",), {}) is None
    assert module_call_problem(root, "lin", (), {"input": "x"}) is None
    assert module_call_problem(root, "lin", (), {"inpt": "x"}) == (
        "submodule 'lin' (Linear) with arguments that its forward(input: torch.Tensor) -> torch.Tensor does not take: "
        "missing a required argument: 'input'"
    )
    assert module_call_problem(root, "seq", ("x",), {}) is None
    assert module_call_problem(root, "mha", ("q", "k", "v"), {"need_weights": False}) is None
    assert module_call_problem(root, "missing", ("x",), {}) is None  # (lint names a missing submodule itself)
    root.lin.register_forward_pre_hook(lambda m, a: a[:1])  # a hook may take other arguments: not judged
    assert module_call_problem(root, "lin", ("x", "y"), {}) is None
    assert call_problem(_two, ("x", "y"), {}) is None and call_problem(_two, ("x",), {"b": 1}) is None
    assert call_problem(torch.nn.functional.linear, ("x", "w"), {}) is None  # (a builtin: counts not judged)


def _retarget(node, target, args):
    node.target, node.args = target, args


class _AddRelu(torch.nn.Module):
    def forward(self, x):
        return getattr(x.relu() + 1, "shape"), x.cos()


@pytest.mark.parametrize(
    "edit, said",
    [
        # FX writes operator.add(a, b) as `a + b` from a format: one argument made recompile()
        # raise IndexError after the pipeline, with the graph left broken (an adversarial check)
        (lambda n: n.target is operator.add and setattr(n, "args", n.args[:1]), "node %add calls operator.add with 1 argument, where it takes 2"),
        # a third one, or a keyword, was dropped from `a + b` unseen
        (lambda n: n.target is operator.add and setattr(n, "args", (*n.args, 2)), "node %add calls operator.add with 3 arguments, where it takes 2"),
        (lambda n: n.target is operator.add and setattr(n, "kwargs", {"alpha": 2}), "calls operator.add with keyword arguments (alpha), which it does not take"),
        (lambda n: n.target is getattr and setattr(n, "args", n.args[:1]), "calls getattr with 1 argument, where it takes 2 to 3"),
        (lambda n: n.op == "call_method" and n.target == "cos" and setattr(n, "args", ()), "node %cos calls cos with no arguments"),
        # an in-place operator on a constant: FX writes `3 += x`, a syntax error (a second check)
        (
            lambda n: n.target is operator.add and _retarget(n, operator.iadd, (3, n.args[0])),
            "node %add calls operator.iadd with the constant 3 to update in place: FX writes it as a statement (`3 += ...`)",
        ),
        # calls that recompile and fail only when run (noticed in an earlier session)
        (lambda n: n.target is getattr and setattr(n, "args", (n.args[0], 3)), "node %getattr_1 calls getattr with the attribute name 3 (int), which is not a str"),
        (
            lambda n: n.target is getattr and _retarget(n, operator.getitem, (None, 0)),
            "calls operator.getitem with the constant None (NoneType) to index, which has no __getitem__",
        ),
        (
            lambda n: n.target is getattr and _retarget(n, operator.delitem, (3, n.args[0])),
            "calls operator.delitem with the constant 3 (int) to index, which has no __delitem__",
        ),
    ],
)
def test_a_call_the_generated_code_cannot_write_fails_lint_and_is_rolled_back(edit, said):
    class Edit(GraphPass):
        name = "edit"

        def run(self, gm, ctx):
            return any([edit(n) is None and False for n in list(gm.graph.nodes)]) or True

    gm = torch.fx.symbolic_trace(_AddRelu())
    code = gm.code
    nodes = [n.format_node() for n in gm.graph.nodes]
    with pytest.raises(PassFailedError) as info:
        Pipeline([Edit]).run(gm, [torch.randn(3)])
    assert said in info.value.reason, info.value.reason
    assert gm.code == code and [n.format_node() for n in gm.graph.nodes] == nodes
    gm.recompile()
    torch.testing.assert_close(gm(torch.ones(3)), _AddRelu()(torch.ones(3)))


class _PoolsWithNoneStride(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, x):
        a = torch.zeros((x.size(0), 3, 4, 4), requires_grad=False)  # (requires_grad: Python's, not ATen's)
        b = torch.ones((x.size(0), 3, 4, 4), requires_grad=False)
        return torch.nn.functional.avg_pool2d(self.drop(x), 2, None) + a + b + torch.roll(x, 1, dims=None)[..., :4, :4]


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_calls_torch_takes_are_not_refused_by_lint(dialect):
    """Lint judged torch functions by their ATen schemas, which are not their Python interface,
    and refused correct models under the inference preset (a new-user check):
    `F.avg_pool2d(x, 2, None)` and `torch.roll(x, 1, dims=None)` (torch takes None for an int
    list that has a default) and `torch.zeros(..., requires_grad=False)` (a keyword torch's
    argument parser adds to factories) once remove_dropout or CSE rewired them. They are judged
    by torch's own type stubs now."""
    from fxpasses.lint import call_problem, keyword_problem

    if dialect == "dynamo":
        torch._dynamo.reset()
    x = torch.randn(2, 3, 8, 8)
    model = _PoolsWithNoneStride().eval()
    c = capture(model, [x], dialect)
    report = fxpasses.Pipeline.from_preset("inference", verify="numeric").run(c.gm, c.inputs)
    assert all(p.status == "ok" for p in report.passes), [(p.name, p.status) for p in report.passes]
    torch.testing.assert_close(c.gm(*c.inputs)[0] if dialect == "dynamo" else c.gm(x), model(x))
    for target, args, kwargs in [
        (torch.nn.functional.avg_pool2d, ("x", 2, None), {}),
        (torch.roll, ("x", 1), {"dims": None}),
        (torch.amax, ("x", None), {}),
        (torch.zeros, ((2, 4),), {"requires_grad": False}),
        (torch.tensor, ([1.0],), {"pin_memory": False}),
        (torch.arange, (5,), {"requires_grad": False, "dtype": None}),
    ]:
        assert call_problem(target, args, kwargs) is None, target
        target(*[torch.randn(1, 2, 4, 4) if a == "x" else a for a in args], **kwargs)  # (torch takes it)
    assert keyword_problem(torch.zeros, {"requires_gard": False}).startswith("the keyword 'requires_gard', which it does not take")
    assert call_problem(torch.flip, ("x", None), {}) == "None for 'dims', which no overload of it takes as None (the type is not optional)"


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_replace_none_for_a_tensor_that_a_module_function_or_operator_reads_fails_lint(dialect):
    """`Replace(None)` for a relu whose users were a Linear module, `F.relu` or `+` passed lint in
    symbolic_trace graphs and the module failed when it ran (a new-user check). torch's own
    functions and modules take no None where they annotate a Tensor without a default, and no
    arithmetic operator takes a None operand."""
    if dialect == "dynamo":
        torch._dynamo.reset()

    class Uses(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(torch.relu(x)), torch.nn.functional.gelu(torch.nn.functional.relu(x)), torch.relu(x) + 1

    class ReplaceByNone(NodePass):
        name = "replace_by_none"

        @on("relu")
        def visit(self, node, ctx):
            return Replace(None)

    said = {
        "symbolic_trace": "node %lin calls submodule 'lin' (Linear) with arguments that its forward(input: torch.Tensor) -> torch.Tensor does not take: None for 'input', which it takes as a Tensor",
        "dynamo": "calls torch._C._nn.linear with None for 'input', which no overload of it takes as None",
        "export": "calls aten.linear.default with None for 'input'",
    }[dialect]
    c = capture(Uses(), [torch.randn(2, 4)], dialect)
    code = c.gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([ReplaceByNone]).run(c.gm, c.inputs)
    assert said in info.value.reason, info.value.reason
    assert c.gm.code == code
    from fxpasses.lint import call_problem

    assert call_problem(torch.nn.functional.relu, (None,), {}).endswith("None for 'input', which it takes as a Tensor (its signature: relu(input: torch.Tensor, inplace: bool = False) -> torch.Tensor)")
    assert call_problem(operator.add, ("x", None), {}) == "None as an operand, which no operand of it takes"
    assert call_problem(torch.nn.functional.layer_norm, ("x", [4], None, None), {}) is None  # (Optional[Tensor])
    assert call_problem(operator.getitem, ("x", None), {}) is None and call_problem(operator.eq, ("x", None), {}) is None


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_replace_none_for_a_returned_node_fails_lint(dialect):
    """`Replace(None)` for a relu the graph returned passed lint in every dialect: the pass was
    "ok" and the module returned None (left noticed by the last session). Lint now refuses a
    returned node replaced by a constant: None for any node, any constant for one whose value
    the capture recorded as a tensor. A returned node replaced by another node passes."""
    if dialect == "dynamo":
        torch._dynamo.reset()

    class Returns(torch.nn.Module):
        def forward(self, x):
            return x.sin(), torch.relu(x)

    class ReplaceBy(NodePass):
        name = "replace_returned"
        value: Any = None

        @on("relu")
        def visit(self, node, ctx):
            return Replace(node.args[0] if self.value == "input" else self.value)

    c = capture(Returns(), [torch.randn(3)], dialect)
    code = c.gm.code
    for value in (None, 2.0):
        ReplaceBy.value = value
        if value == 2.0 and dialect == "symbolic_trace":  # (no meta: a number may be what it computed)
            continue
        with pytest.raises(PassFailedError) as info:
            Pipeline([ReplaceBy]).run(c.gm, c.inputs)
        what = "a value the graph computed" if dialect == "symbolic_trace" else "a tensor"
        assert info.value.reason.startswith(
            f"verification failed: output 1 of the graph was %relu ({what}) when the run began, and is now the constant {value!r}: "
            "a pass replaced what the module returns by a constant"
        ), info.value.reason
        # what it says of how it came about fits the constant given (it said Replace(None) of 2.0)
        how = "(a node replaced by None, e.g. Replace(None)" if value is None else "(e.g. Replace(2.0) of the returned node; a tensor"
        assert how in info.value.reason and ("Replace(None)" in info.value.reason) == (value is None), info.value.reason
        assert c.gm.code == code
    ReplaceBy.value = "input"  # relu(x) -> x: another node, passes lint (numeric verification tells it)
    assert Pipeline([ReplaceBy]).run(c.gm, c.inputs)["replace_returned"].status == "ok"
    out = c.gm(*c.inputs)
    assert torch.equal(out[1], c.inputs[0])


def test_a_pass_whose_constructor_raises_is_a_failure_of_that_pass():
    """A pass class whose `__init__` raised ended the run with the bare exception (`fxpasses
    run`: "unexpected RuntimeError: init broke", exit 3), naming neither the pass nor its
    plugin (a new-user check). It is that pass's failure: named, with the line of its code,
    and `on_error="skip"` goes on without it."""
    class InitRaises(GraphPass):
        name = "init_raises"

        def __init__(self, *args, **kwargs):
            raise RuntimeError("init broke")

        def run(self, gm, ctx):
            return False

    reg = fxpasses.Registry(autoload=False)
    reg.register(InitRaises)
    reg.register(fxpasses.registry().get("eliminate_dead_code"))
    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()))
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline(["init_raises", "eliminate_dead_code"], registry=reg).run(gm)
    failure = info.value
    assert (failure.pass_name, failure.stage) == ("init_raises", "creating the pass")
    assert failure.reason == "creating the pass failed: RuntimeError: init broke"
    assert failure.raised_at.startswith(f"{__file__}:") and ", in __init__ (" in failure.raised_at
    assert gm.code == code
    report = Pipeline(["init_raises", "eliminate_dead_code"], registry=reg, on_error="skip").run(gm)
    assert [(p.name, p.status) for p in report.passes] == [("init_raises", "skipped"), ("eliminate_dead_code", "ok")]


def test_a_method_called_on_an_int_fails_lint_which_recompile_cannot_write():
    """`call_method("__mul__", (2, x))`: FX writes `2.__mul__(x)`, which Python reads as a float
    literal: lint passed it, and the failure came only from the final recompile, after the
    whole pipeline, which bisect could not bisect (a new-user check)."""

    class IntSelf(GraphPass):
        name = "int_self"

        def run(self, gm, ctx):
            relu = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch.relu)
            with gm.graph.inserting_after(relu):
                mul = gm.graph.call_method("__mul__", (2, relu))
            relu.replace_all_uses_with(mul, delete_user_cb=lambda user: user is not mul)
            return True

    assert _refused(IntSelf).reason == (
        "verification failed: node %mul calls the method '__mul__' of the int 2, which the generated code cannot write "
        "(`2.__mul__(...)` reads as a float literal and is a syntax error): call the function instead (operator.mul for __mul__)"
    )


class _DictOut(torch.nn.Module):
    def forward(self, x):
        return {"a": torch.relu(x), "b": (x + 1, x * 2)}


def test_a_pass_changing_how_the_module_packs_its_outputs_fails_lint():
    """A pass that made the graph anew (copying its nodes into a new Graph, as torch.fx code
    often does) dropped an exported module's pytree code generator: the module returned a
    tuple instead of its dict, and lint passed it; so did a pass turning the output into a
    tuple of one value (a new-user check)."""

    class Rebuild(GraphPass):
        name = "rebuild"

        def run(self, gm, ctx):
            new = torch.fx.Graph()
            env = {}
            for n in gm.graph.nodes:
                env[n] = new.node_copy(n, lambda a: env[a])
            gm.graph = new
            return True

    class Repack(GraphPass):
        name = "repack"

        def run(self, gm, ctx):
            (out,) = gm.graph.find_nodes(op="output")
            out.args = ((out.args[0],),)
            return True

    for cls, said in (
        (Rebuild, "the graph's code generator is now CodeGen, _PyTreeCodeGen before"),
        # in words (it printed torch's TreeSpec reprs: `TreeSpec(tuple, None, [*, ...])`)
        (Repack, "the structure of what the graph returns changed: a tuple of (a tuple of 3 values) now, a tuple of 3 values before"),
    ):
        c = capture(_DictOut(), [torch.randn(3)], "export")
        x = torch.randn(3)
        with pytest.raises(PassFailedError) as info:
            Pipeline([cls]).run(c.gm, [x])
        assert said in info.value.reason, info.value.reason
        out = c.gm(x)
        assert isinstance(out, dict) and set(out) == {"a", "b"}  # rolled back
    # a graph made anew keeping the code generator passes
    class RebuildKeeping(Rebuild):
        name = "rebuild_keeping"

        def run(self, gm, ctx):
            old = gm.graph
            super().run(gm, ctx)
            gm.graph.set_codegen(old._codegen)
            return True

    c = capture(_DictOut(), [torch.randn(3)], "export")
    assert Pipeline([RebuildKeeping]).run(c.gm, [torch.randn(3)])["rebuild_keeping"].status == "ok"


@pytest.mark.parametrize("journal", [False, True])
def test_a_failed_pass_that_rebound_the_code_generators_output_spec_is_rolled_back_whole(journal):
    """A pass that rebound ``pytree_info`` on the graph's code generator and then failed was
    reported restored, but the record held the generator object, not its specs: the module
    returned a flat tuple instead of its dict after the next recompile, and the next, correct
    pass was blamed and skipped (an adversarial check)."""

    class ChangeOutSpec(GraphPass):
        name = "change_out_spec"
        journal_edits = journal
        writes_tensors = not journal

        def run(self, gm, ctx):
            info = gm.graph._codegen.pytree_info
            gm.graph._codegen.pytree_info = info._replace(out_spec=None)
            raise RuntimeError("fails after editing the code generator")

    class Dropout(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = torch.nn.Dropout(0.5)

        def forward(self, x):
            return {"a": self.drop(x) + 1, "b": (x * 2,)}

    x = torch.randn(2, 3)
    c = capture(Dropout().eval(), [x], "export")
    spec = c.gm.graph._codegen.pytree_info.out_spec
    report = Pipeline([ChangeOutSpec, "remove_dropout"], on_error="skip").run(c.gm, [x])
    assert [(p.name, p.status) for p in report.passes] == [("change_out_spec", "skipped"), ("remove_dropout", "ok")]
    assert c.gm.graph._codegen.pytree_info.out_spec == spec
    out = c.gm(x)
    assert set(out) == {"a", "b"} and torch.equal(out["a"], x + 1) and torch.equal(out["b"][0], x * 2)


def test_a_changed_spec_of_the_same_code_generator_is_named():
    """A pass that kept the code generator's class but changed its output spec was told
    "the graph's code generator is now _PyTreeCodeGen, _PyTreeCodeGen before"."""

    class KeepFailing(GraphPass):
        name = "change_out_spec_and_return"

        def run(self, gm, ctx):
            info = gm.graph._codegen.pytree_info
            gm.graph._codegen.pytree_info = info._replace(out_spec=None)
            return True

    c = capture(_DictOut(), [torch.randn(3)], "export")
    with pytest.raises(PassFailedError) as info:
        Pipeline([KeepFailing]).run(c.gm, [torch.randn(3)])
    assert "the output spec of the graph's code generator (_PyTreeCodeGen) changed: " in info.value.reason, info.value.reason
    assert isinstance(c.gm(torch.randn(3)), dict)


def test_a_failure_raised_in_a_plugins_pass_names_where_in_its_code_and_the_distribution(planted_site, registry):
    """A plugin's hook that raised was named with the node and the user's source line, but not
    where in the pass's code it raised nor which distribution the pass came from: that took
    --traceback (a new-user check). The line is the innermost frame of the pass's own code
    (not fxpasses', torch's or the standard library's)."""
    gm = torch.fx.symbolic_trace(_Model())
    with pytest.raises(PassFailedError) as info:
        Pipeline.from_string("planted{raise_at=1}", registry=registry).run(gm, [torch.randn(3)])
    module = planted_site / "fxp_planted.py"
    line = next(i for i, text in enumerate(module.read_text().splitlines(), 1) if 'raise RuntimeError(f"planted failure' in text)
    assert info.value.raised_at == f"{module}:{line}, in visit (planted-passes 0.3)"
    assert f"\n  raised in the pass's code at {module}:{line}, in visit (planted-passes 0.3)\n" in str(info.value)


def test_a_failure_raised_inside_torch_names_the_pass_line_that_called_it():
    class Broadcasts(GraphPass):
        name = "broadcasts"

        def run(self, gm, ctx):
            return bool(torch.zeros(2) + torch.zeros(3))

    gm = torch.fx.symbolic_trace(_Model())
    with pytest.raises(PassFailedError) as info:
        Pipeline([Broadcasts]).run(gm, [torch.randn(3)])
    line = Broadcasts.run.__code__.co_firstlineno + 1
    assert info.value.raised_at == f"{__file__}:{line}, in run"  # (a class given directly: no distribution)
    # a verification failure is not the pass's code raising: no such line
    class Wrong(GraphPass):
        name = "wrong"

        def run(self, gm, ctx):
            out = next(n for n in gm.graph.nodes if n.op == "output")
            out.args = (out.args[0].args[0],)
            return True

    with pytest.raises(PassFailedError) as info:
        Pipeline([Wrong], verify="numeric").run(torch.fx.symbolic_trace(_Model()), [torch.randn(3)])
    assert info.value.raised_at is None and "raised in the pass's code" not in str(info.value)


def test_a_skipped_pass_that_wrote_what_no_rollback_undoes_is_warned_about():
    """Under on_error="skip" a pass that wrote the caller's tensors (in a TorchDynamo graph,
    the model's parameters) and then raised was skipped with no word: the run went on with the
    weights changed (a new-user check of torch.compile). It is now a SkippedPassWarning; a
    skipped pass that changed nothing it cannot undo is not warned about."""
    from fxpasses.errors import SkippedPassWarning

    class WritesThenRaises(GraphPass):
        name = "writes_then_raises"

        def run(self, gm, ctx):
            ctx.example_inputs[0].mul_(2)
            raise RuntimeError("something went wrong")

    class Raises(GraphPass):
        name = "raises"

        def run(self, gm, ctx):
            raise RuntimeError("something else")

    weight = torch.nn.Parameter(torch.ones(3), requires_grad=False)
    gm = torch.fx.symbolic_trace(_Model())
    with pytest.warns(SkippedPassWarning, match=r"pass 'writes_then_raises' failed and was skipped .* it wrote the example input\(s\) input\[0\] in place"):
        report = Pipeline([WritesThenRaises], on_error="skip").run(gm, [weight])
    assert report["writes_then_raises"].status == "skipped" and torch.equal(weight, torch.full((3,), 2.0))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", SkippedPassWarning)
        assert Pipeline([Raises], on_error="skip").run(torch.fx.symbolic_trace(_Model()), [torch.ones(3)])["raises"].status == "skipped"


def test_after_a_skipped_pass_changed_what_no_rollback_undoes_later_passes_are_judged_on_their_own():
    """Under on_error="skip" with numeric verification, a pass that rebinds a weight's `.data`
    (not restorable) and fails verification was skipped, and every correct pass after it then
    failed too, "max abs error 0.595", and was skipped: the reference was still the module
    before the pipeline, which no longer exists (an adversarial check). The passes after it
    are checked against the module as it left it, and the report says so; the warning names
    the failure without fxpasses' internal class."""
    from fxpasses.errors import SkippedPassWarning

    class DataAssign(GraphPass):
        name = "data_assign"

        def run(self, gm, ctx):
            gm.lin.weight.data = gm.lin.weight.data * 2
            return False

    class Clones(GraphPass):
        name = "clones_output"

        def run(self, gm, ctx):
            out = next(n for n in gm.graph.nodes if n.op == "output")
            with gm.graph.inserting_before(out):
                c = gm.graph.call_method("clone", (out.args[0],))
            out.args = (c,)
            return True

    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(_LinRelu().eval())
    x = torch.randn(2, 3)
    with pytest.warns(SkippedPassWarning) as said:
        report = Pipeline([DataAssign, Clones], verify="numeric", on_error="skip").run(gm, [x])
    (w,) = said
    assert "lin.weight: verification failed: output: max abs error" in str(w.message) and "_OutputsDiffer" not in str(w.message)
    assert [p.status for p in report.passes] == ["skipped", "ok"]
    (note,) = report.notes
    assert note.startswith(
        "'data_assign' changed tensors no rollback could restore: lin.weight before it failed and was skipped, which "
        "changed the outputs (max abs error "
    ) and note.endswith("against the module before the pipeline): the passes after it were checked against the module as it left it")
    assert gm.graph.find_nodes(op="call_method", target="clone")


def test_a_skipped_unrestorable_change_that_keeps_the_outputs_keeps_the_reference():
    """Taking the module as the skipped pass left it as the reference whatever it did let a later
    pass add its difference to what an earlier one was allowed (they do not add up): a pass
    rebinding `.data` to an equal copy changes no output, and the reference stays the module
    before the pipeline (a second check)."""
    import warnings

    class Shift(GraphPass):
        name = "shift"

        def run(self, gm, ctx):
            out = next(n for n in gm.graph.nodes if n.op == "output")
            with gm.graph.inserting_before(out):
                new = gm.graph.call_function(torch.add, (out.args[0], 0.001))
            out.args = (new,)
            return True

    class RebindEqual(GraphPass):
        name = "rebind_equal"

        def run(self, gm, ctx):
            gm.lin.weight.data = gm.lin.weight.data.clone()
            raise RuntimeError("bug in the pass")

    class RebindMoved(GraphPass):
        name = "rebind_moved"

        def run(self, gm, ctx):
            gm.lin.bias.data = gm.lin.bias.data + 0.002  # moves every output that ReLU passes
            raise RuntimeError("bug in the pass")

    for passes in ([Shift, Shift], [Shift, RebindEqual, Shift], [Shift, RebindMoved, Shift]):
        torch.manual_seed(0)
        gm = torch.fx.symbolic_trace(_LinRelu().eval())
        pipeline = Pipeline([(p, {}) for p in passes], verify="numeric", on_error="skip", atol=1.5e-3, rtol=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = pipeline.run(gm, [torch.randn(2, 3)])
        # 0.002 off the module before the pipeline: more than 1.5e-3. After the rebind that
        # moved the outputs (the reference rebased), the last pass is 0.001 off the module as
        # the rebind left it, but the module before the pipeline allows 1.5e-3 plus the 0.002
        # the rebind moved it by, and it is 0.004 off it (a third check: it was admitted)
        assert [p.status for p in report.passes][-1] == "skipped", [p.name for p in passes]
        if RebindMoved in passes:
            assert "allowing besides the 0.002 a skipped pass moved the outputs by" in report.passes[-1].error
            assert "which changed the outputs" in report.notes[0]
        else:
            assert report.notes == []




def test_the_raising_frame_of_a_plugin_installed_in_site_packages_is_named():
    """With the plugin installed (not editable) its frames are in site-packages, the folder of
    the one-file module typing_extensions.py, which was taken for library code: `raised_at`
    was None for every installed plugin (a new-user check)."""
    import os
    import sysconfig

    import typing_extensions

    from fxpasses.errors import raising_frame

    site = os.path.dirname(os.path.abspath(typing_extensions.__file__))
    assert site == os.path.abspath(sysconfig.get_path("purelib"))
    filename = os.path.join(site, "fake_installed_plugin.py")
    namespace = {}
    exec(compile("def helper():\n    return {}['missing']\n", filename, "exec"), namespace)
    try:
        namespace["helper"]()
    except KeyError as exc:
        assert raising_frame(exc) == f"{filename}:2, in helper"
    try:
        torch.zeros(2) + torch.zeros(3)  # raised inside torch, called from here
    except RuntimeError as exc:
        assert raising_frame(exc).startswith(f"{__file__}:")


def test_a_replacement_built_from_the_visited_node_is_named_as_a_cycle_with_the_way_to_wrap():
    """`Replace(neg(neg(node)))` made the new nodes use each other once every use of `node`
    was replaced; lint said only "used before it has been defined" (a new-user check). The
    failure now names the cycle and how to wrap the visited node, and that way works."""

    class Wrap(NodePass):
        name = "wrap"

        @on("relu")
        def visit(self, node, ctx):
            return Replace(ctx.call_function(torch.neg, (ctx.call_function(torch.neg, (node,)),)))

    class WrapAfter(NodePass):
        name = "wrap_after"

        @on("relu")
        def visit(self, node, ctx):
            with ctx.graph.inserting_after(node):
                first = ctx.graph.call_function(torch.neg, (node,))
            with ctx.graph.inserting_after(first):
                new = ctx.graph.call_function(torch.neg, (first,))
            node.replace_all_uses_with(new, delete_user_cb=lambda user: user is not first)
            return None

    gm = torch.fx.symbolic_trace(_Model())
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([Wrap]).run(gm, [torch.randn(3)])
    assert "the nodes use each other in a cycle (%neg -> %neg_1 -> %neg, each using the next)" in str(info.value)
    assert gm.code == code
    x = torch.randn(3)
    report = Pipeline([WrapAfter], verify="numeric").run(gm, [x])
    assert report["wrap_after"].status == "ok" and sum(n.target is torch.neg for n in gm.graph.nodes) == 2
    torch.testing.assert_close(gm(x), _Model()(x))


@pytest.mark.parametrize("dialect", ["symbolic_trace", "export"])
def test_a_cycle_made_by_a_graph_pass_is_named_without_blaming_hooks(dialect):
    """A whole-graph pass that made a node use its own user was told "a hook returned
    Replace(new)": it has no hooks and returned no Replace (a new-user check). The cycle is
    named with what it means for any edit; the hook advice is for node passes only."""

    class M(torch.nn.Module):
        def forward(self, x):
            return x.relu().sin()

    class Rewire(GraphPass):
        name = "rewire"

        def run(self, gm, ctx):
            relu = next(n for n in gm.graph.nodes if n.target in ("relu", torch.ops.aten.relu.default))
            sin = next(n for n in gm.graph.nodes if n.target in ("sin", torch.ops.aten.sin.default))
            relu.replace_input_with(relu.args[0], sin)
            return True

    x = torch.randn(3)
    gm = torch.fx.symbolic_trace(M()) if dialect == "symbolic_trace" else torch.export.export(M(), (x,)).module()
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([Rewire]).run(gm, [x])
    text = str(info.value)
    assert "the nodes use each other in a cycle (%relu -> %sin -> %relu, each using the next), which no order" in text
    assert "Replace" not in text and "hook" not in text
    assert gm.code == code


def test_no_source_line_reason_fits_the_node_and_the_graph():
    """A node of an export graph without a stack trace was told to record one with
    symbolic_trace's `record_stack_traces` (a new-user check); placeholders, get_attr and
    output nodes record none in any capture."""
    from fxpasses.context import no_source_line_reason
    from fxpasses.errors import NO_STACK_TRACE

    gm = torch.export.export(_Model(), (torch.randn(3),)).module()
    made = gm.graph.call_function(torch.ops.aten.neg.default, (next(iter(gm.graph.nodes)),))
    assert no_source_line_reason(made) == (
        "no stack trace recorded on this node of an export graph (a node a pass made without its context carries none)"
    )
    placeholder = next(n for n in gm.graph.nodes if n.op == "placeholder")
    assert no_source_line_reason(placeholder) == "a placeholder node records no stack trace"
    traced = torch.fx.symbolic_trace(_Model())
    relu = next(n for n in traced.graph.nodes if n.op == "call_function")
    assert no_source_line_reason(relu) == NO_STACK_TRACE
    # a symbolic_trace graph traced recording stack traces (fxpasses.capture.capture): a node
    # without one was made after; the advice to record them misled (a new-user check)
    recorded = capture(_Model(), [torch.randn(3)], "symbolic_trace").gm
    made = recorded.graph.call_function(torch.neg, (next(iter(recorded.graph.nodes)),))
    assert no_source_line_reason(made) == (
        "no stack trace recorded on this node, where the graph's traced nodes have them (a node a pass made "
        "without its context carries none)"
    )


def test_describe_structure_says_a_pytree_structure_in_words():
    """The output-structure lint failure printed torch's `TreeSpec` reprs (`*, TreeSpec(tuple,
    None, [*]) before`), which a new user could not read; it now says it in words."""
    import collections

    from torch.utils._pytree import tree_flatten

    from fxpasses.lint import describe_structure

    Pair = collections.namedtuple("Pair", "a b")
    cases = [
        (1, "a single value (in no tuple or other container)"),
        ((1,), "a 1-tuple"),
        ((1, 2), "a tuple of 2 values"),
        ((1, (2, 3)), "a tuple of (a value, a tuple of 2 values)"),
        ({"a": 1, "b": 2}, "a dict with keys 'a', 'b'"),
        ({"a": 1, "b": (2,)}, "a dict of ('a': a value, 'b': a 1-tuple)"),
        ([1], "a list of 1 value"),
        ((), "an empty tuple"),
        (Pair(1, 2), "a Pair of 2 values"),
    ]
    for value, words in cases:
        assert describe_structure(tree_flatten(value)[1]) == words, value
    long = describe_structure(tree_flatten(tuple((i, i) for i in range(50)))[1])
    assert len(long) == 160 and long.endswith("...")
    assert describe_structure(None) == "nothing"


def test_a_pass_unwrapping_a_returned_tuple_is_told_in_words():
    """The new-user check's case: a dynamo graph returning a 1-tuple, a pass returning the
    value bare."""
    torch._dynamo.reset()

    class Unwrap(GraphPass):
        name = "unwrap"

        def run(self, gm, ctx):
            (out,) = gm.graph.find_nodes(op="output")
            out.args = (out.args[0][0],)
            return True

    c = capture(torch.nn.ReLU(), [torch.randn(3)], "dynamo")
    with pytest.raises(PassFailedError) as info:
        Pipeline([Unwrap]).run(c.gm, c.inputs)
    assert "changed: a single value (in no tuple or other container) now, a 1-tuple before" in info.value.reason, info.value.reason


def test_lint_checks_the_call_of_an_exported_modules_input_checks():
    """torch.export's `_guards_fn` takes *args, so its signature told lint nothing: a pass that
    dropped its arguments passed `verify="lint"` and the module then failed with IndexError
    (a new-user check)."""
    from fxpasses import GraphPass

    class DropGuardArgs(GraphPass):
        name = "drop_guard_args"

        def run(self, gm, ctx):
            guards = next(n for n in gm.graph.nodes if n.op == "call_module" and n.target == "_guards_fn")
            guards.args = ()
            return True

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(4, 4)

        def forward(self, x, y):
            return self.l(x).relu() + y

    x, y = torch.randn(2, 4), torch.randn(2, 4)
    gm = torch.export.export(M(), (x, y)).module()
    code, expected = gm.code, gm(x, y)
    with pytest.raises(fxpasses.PassFailedError) as info:
        fxpasses.Pipeline([DropGuardArgs], verify="lint").run(gm, [x, y])
    assert (
        "node %_guards_fn calls submodule '_guards_fn' (GuardsFn, torch.export's checks of the inputs) with "
        "arguments other than the graph's inputs in order (%x, %y): it checks each input by its position"
    ) in str(info.value)
    assert gm.code == code
    torch.testing.assert_close(gm(x, y), expected)
    # the export graphs of the built-in pipeline pass the check (their inputs in order)
    fxpasses.Pipeline.from_preset("inference", verify="lint").run(gm, [x, y])


def test_a_failure_applying_what_a_hook_returned_names_the_hook_and_its_line():
    """A hook returning Replace for a node it had erased itself failed without naming the hook
    (the runner raised, not the hook's code, so there was no "raised in the pass's code" line;
    a pass-author check). A hook that raises itself is named by its raising line, as before."""

    class EraseThenReplace(fxpasses.NodePass):
        name = "erase_then_replace"

        @fxpasses.on("relu", op="call_function")
        def relu(self, node, ctx):
            x = node.args[0]
            node.replace_all_uses_with(x)
            ctx.graph.erase_node(node)
            return fxpasses.Replace(x)

    class Raises(EraseThenReplace):
        name = "raises_in_hook"

        @fxpasses.on("relu", op="call_function")
        def relu(self, node, ctx):
            raise RuntimeError("own failure")

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) + 1

    gm = torch.fx.symbolic_trace(M())
    with pytest.raises(PassFailedError) as info:
        Pipeline([EraseThenReplace]).run(gm, [torch.randn(3)])
    line = EraseThenReplace.relu.__code__.co_firstlineno
    assert info.value.notes[0] == (
        "the action was returned by the hook test_a_failure_applying_what_a_hook_returned_names_the_hook_and_its_line."
        f"<locals>.EraseThenReplace.relu ({__file__}:{line})"
    )
    with pytest.raises(PassFailedError) as info:
        Pipeline([Raises]).run(gm, [torch.randn(3)])
    assert not any(n.startswith("the action was returned") for n in info.value.notes)
    assert info.value.raised_at.startswith(f"{__file__}:")


def test_an_error_inside_torch_fxs_node_constructor_is_the_one_reported(monkeypatch):
    """The failure's node is found among the nodes torch.fx's frames in the traceback hold;
    a node whose construction raised (Node.__init__'s half-built self, which has no arguments
    yet) was taken, and describing it raised an AttributeError that hid the pass's own error
    (a fault-injection check)."""

    class Boom(RuntimeError):
        pass

    def my_pass(gm):
        x = next(iter(gm.graph.find_nodes(op="placeholder")))

        def failing(self, *args, **kwargs):
            raise Boom("inside Node.__init__")

        monkeypatch.setattr(torch.fx.Node, "_update_args_kwargs", failing)
        try:
            gm.graph.call_function(torch.neg, (x,))
        finally:
            monkeypatch.undo()
        return gm

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) + 1

    gm = torch.fx.symbolic_trace(M())
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        fxpasses.Pipeline([my_pass]).run(gm, example_inputs=[torch.randn(3)])
    assert str(info.value).splitlines()[0] == "pass 'my_pass' failed: Boom: inside Node.__init__"
    assert isinstance(info.value.__cause__, Boom) and gm.code == code
