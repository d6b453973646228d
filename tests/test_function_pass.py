"""Plain FX pass functions and torch's PassBase instances as pipeline entries."""

from __future__ import annotations

import operator

import pytest
import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

import fxpasses
from fxpasses import PassFailedError, Pipeline
from fxpasses.testing import assert_preserves_outputs


class M(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 1 + torch.neg(torch.neg(x))


def drop_mul_one(gm):
    """x * 1 -> x (torch-level graphs)."""
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target is operator.mul and n.args[1] == 1:
            n.replace_all_uses_with(n.args[0])
            gm.graph.erase_node(n)
    return gm


class DoubleNeg(PassBase):
    def call(self, gm):
        changed = False
        for n in list(gm.graph.nodes):
            if n.target is torch.neg and getattr(n.args[0], "target", None) is torch.neg:
                n.replace_all_uses_with(n.args[0].args[0])
                gm.graph.erase_node(n)
                changed = True
        return PassResult(gm, changed)


def test_functions_and_passbase_instances_run_as_passes_named_after_them():
    """They were refused ("bad pipeline entry"), so torch.fx passes had to be wrapped by hand
    to join a pipeline (a new-user check)."""
    gm = torch.fx.symbolic_trace(M())
    x = torch.randn(4)
    report = Pipeline([drop_mul_one, DoubleNeg(), "eliminate_dead_code", drop_mul_one]).run(gm, [x])
    assert [(p.name, p.changed) for p in report.passes] == [
        ("drop_mul_one", True), ("DoubleNeg", True), ("eliminate_dead_code", True), ("drop_mul_one", False),
    ]
    torch.testing.assert_close(gm(x), torch.relu(x) + x)
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [torch.relu, operator.add]
    assert Pipeline(drop_mul_one).plan().names() == ["drop_mul_one"]
    assert fxpasses.run(torch.fx.symbolic_trace(M()), drop_mul_one, [x])["drop_mul_one"].changed


def test_a_pass_function_keeps_outputs_in_every_dialect():
    results = assert_preserves_outputs(Pipeline([drop_mul_one, DoubleNeg()]), M(), [torch.randn(4)])
    assert results["symbolic_trace"][1]["drop_mul_one"].changed  # (export's aten.mul is not operator.mul)


@pytest.mark.parametrize(
    "fn, said",
    [
        (lambda gm: torch.fx.symbolic_trace(M()), "function_pass returned another GraphModule than the one it was given"),
        (lambda gm: 3, "function_pass returned int: a pass function returns the module it was given, a PassResult"),
    ],
)
def test_a_pass_function_returning_something_else_fails_and_is_rolled_back(fn, said):
    def breaks_then(gm):
        for n in gm.graph.nodes:
            if n.target is torch.relu:
                n.target = torch.sigmoid
        return fn(gm)

    breaks_then.__name__ = "function_pass"
    gm = torch.fx.symbolic_trace(M())
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([breaks_then]).run(gm, [torch.randn(4)])
    assert said in str(info.value) and info.value.rolled_back
    assert gm.code == code and all(n.target is not torch.sigmoid for n in gm.graph.nodes)


def test_callables_of_one_name_are_numbered_and_one_given_twice_is_one_pass():
    """Two lambdas, two partials of one function, two instances of one PassBase class, two
    bound methods of one class were refused as "two different passes named X", with advice
    (give each class its own name) that cannot be followed for them (a new-user check)."""
    import functools

    class A:
        def run(self, gm):
            return gm

    def scaled(gm, k=1):
        return gm

    def other():
        def drop_mul_one(gm):
            return gm

        return drop_mul_one

    names = Pipeline(
        [
            drop_mul_one, drop_mul_one, other(),
            lambda gm: gm, lambda gm: None,
            functools.partial(scaled, k=1), functools.partial(scaled, k=2),
            DoubleNeg(), DoubleNeg(),
            A().run, A().run,
        ]
    ).plan().names()
    assert names == [
        "drop_mul_one", "drop_mul_one", "drop_mul_one_2",
        "function_pass", "function_pass_2",
        "scaled", "scaled_2",
        "DoubleNeg", "DoubleNeg_2",
        "A_run", "A_run_2",
    ]


def test_what_a_pass_function_says_it_did_is_not_taken_for_what_it_did():
    """A PassResult(gm, True) from a pass that changed nothing was believed: a fixpoint group
    of it never converged, warning of passes undoing each other (a new-user check)."""
    from fxpasses import Fixpoint

    def says_changed(gm):
        return PassResult(gm, True)

    def says_unchanged(gm):
        drop_mul_one(gm)
        return PassResult(gm, False)

    gm = torch.fx.symbolic_trace(M())
    report = Pipeline([Fixpoint([says_changed, says_unchanged, "eliminate_dead_code"], max_iterations=4)]).run(gm, [torch.randn(4)])
    assert [(p.label, p.changed) for p in report.passes] == [
        ("says_changed #1", False), ("says_unchanged #1", True), ("eliminate_dead_code #1", False),
        ("says_changed #2", False), ("says_unchanged #2", False), ("eliminate_dead_code #2", False),
    ]
    assert report.notes == []


def test_a_passbase_class_given_for_an_instance_says_to_give_an_instance():
    """A new-user check gave `Pipeline([DoubleNeg])`, the class: the error said it was no
    subclass of NodePass or GraphPass, not that an instance is what the pipeline takes."""
    with pytest.raises(fxpasses.PassDefinitionError) as info:
        Pipeline([DoubleNeg])
    assert str(info.value) == (
        f"{__name__}.DoubleNeg is a torch PassBase class: give an instance, DoubleNeg(...), which the "
        "pipeline runs as a pass function (or subclass fxpasses.NodePass or GraphPass)"
    )


def test_a_pass_function_named_like_another_pass_is_told_to_take_another_name():
    from fxpasses.function_pass import function_pass

    def cleanup(gm):
        return None

    with pytest.raises(fxpasses.ConfigError) as info:
        Pipeline([function_pass(cleanup, name="eliminate_dead_code"), "eliminate_dead_code"])
    message = str(info.value)
    assert (
        f"two different passes are named 'eliminate_dead_code' in this pipeline: the pass function "
        f"{__name__}.test_a_pass_function_named_like_another_pass_is_told_to_take_another_name.<locals>.cleanup"
    ) in message
    assert "fxpasses.builtin_passes.dead_code.EliminateDeadCode" in message
    assert message.endswith(
        "give the pass function another name: fxpasses.function_pass.function_pass(fn, name=...)"
    )
    assert "FunctionPass_" not in message


def test_a_function_that_needs_more_than_the_module_is_refused_when_the_pipeline_is_built():
    """`Pipeline([fn])` with `fn(gm, y)` was accepted and failed only at run time with a bare
    TypeError (a new-user check); its signature is read when it becomes a pass."""
    import functools

    def needs_two(gm, y):
        return None

    def takes_defaults(gm, y=1, *, z=2):
        return None

    with pytest.raises(fxpasses.errors.PassDefinitionError) as info:
        Pipeline([needs_two])
    assert str(info.value) == (
        "function_pass: test_a_function_that_needs_more_than_the_module_is_refused_when_the_pipeline_is_built.<locals>."
        "needs_two(gm, y) cannot be called with the module alone (missing a required argument: 'y'): a pass function is "
        "called as fn(gm), as torch's PassManager calls it; give other arguments with functools.partial, or write a "
        "GraphPass"
    )
    with pytest.raises(fxpasses.errors.PassDefinitionError, match=r"<lambda>\(\) cannot be called .*too many positional"):
        Pipeline([lambda: None])
    gm = torch.fx.symbolic_trace(torch.nn.ReLU())
    for fn in (takes_defaults, functools.partial(needs_two, y=2)):
        assert Pipeline([fn]).run(gm).passes[0].status == "ok"


def test_assert_preserves_outputs_names_a_tensor_written_by_a_pass_declaring_no_writes():
    """A pass declaring writes_tensors=False that wrote a parameter was reported by
    assert_preserves_outputs only as "changed the outputs ... max abs error"; the pipeline's
    own numeric verification named the tensor (a pass-author check)."""

    class SneakyWriter(fxpasses.GraphPass):
        name = "sneaky_writer"
        writes_tensors = False

        def run(self, gm, ctx):
            with torch.no_grad():
                gm.get_parameter("lin.weight").mul_(2)
            return True

    class Lin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x)

    # (held to its declaration before its outputs are compared: the write is named whether
    # or not it changed them)
    from fxpasses.journal import WritesTensorsMismatch

    with pytest.raises(WritesTensorsMismatch) as info:
        assert_preserves_outputs(SneakyWriter, Lin(), [torch.randn(2, 3)], dialects="symbolic_trace")
    assert str(info.value).startswith(
        "pass 'sneaky_writer' declares writes_tensors=False, but wrote these tensors of the module in place: "
        "'lin.weight' (a failed run could not restore them: declare writes_tensors = True"
    )


def test_assert_preserves_outputs_with_the_pass_and_module_swapped_says_so():
    """The module given in the pass's place was traced: "symbolic_trace could not trace type:
    AttributeError: type object 'P' has no attribute 'named_buffers'"."""
    with pytest.raises(fxpasses.UserError) as info:
        assert_preserves_outputs(torch.nn.ReLU(), "eliminate_dead_code", [torch.randn(2)])
    assert str(info.value) == (
        "module: 'eliminate_dead_code' is not a torch.nn.Module; the pass comes first: "
        "assert_preserves_outputs(pass_or_pipeline, module, example_inputs)"
    )


def test_assert_preserves_outputs_given_a_bare_tensor_says_so_without_the_capture_note():
    """A bare tensor as `example_inputs` was said, with a note suggesting other dialects (as
    for a model one capture cannot take), which does not apply (a new-user check)."""
    with pytest.raises(fxpasses.UserError) as info:
        assert_preserves_outputs("remove_dropout", torch.nn.Linear(3, 3), torch.randn(2, 3))
    assert str(info.value) == (
        "example_inputs must be a list or tuple of the module's positional inputs, got Tensor (wrap a single input "
        "in a list: [x])"
    )


def test_a_decorated_pass_function_is_judged_by_its_own_signature_not_the_wrapped_ones():
    """`inspect.signature` follows `__wrapped__`: a decorator (functools.wraps) that supplies an
    argument had its function refused as needing it (an adversarial check)."""
    import functools

    def inject(f):
        @functools.wraps(f)
        def wrapper(gm):
            return f(gm, {"k": 1})

        return wrapper

    @inject
    def with_config(gm, cfg):
        return None

    gm = torch.fx.symbolic_trace(torch.nn.ReLU())
    assert Pipeline([with_config]).run(gm).passes[0].status == "ok"
