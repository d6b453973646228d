"""The pytest11 plugin: registered, light to import, fixtures and assertion messages."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from fxpasses import NodePass, Replace, on

pytest_plugins = ["pytester"]


def test_importing_the_plugin_does_not_import_torch():
    code = "import sys, fxpasses.pytest_plugin; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_plugin_is_active_in_a_fresh_pytest_run(pytester):
    pytester.makepyfile(
        """
        import torch
        def test_it(fxpasses_registry, fxpasses_run):
            assert "count_ops" in fxpasses_registry
            gm = torch.fx.symbolic_trace(torch.nn.ReLU())
            assert fxpasses_run(gm, "count_ops").passes[0].counters == {"placeholder": 1, "relu": 1, "output": 1}
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_failure_message_names_pass_dialect_and_output():
    from fxpasses import NodePass, Registry, Replace, on
    from fxpasses.pytest_plugin import assert_preserves_outputs

    class DropRelu(NodePass):
        """Wrong on purpose: relu(x) -> x."""

        name = "drop_relu"

        @on("relu")
        def r(self, node, ctx):
            return Replace(node.args[0])

    reg = Registry(autoload=False)
    reg.register(DropRelu)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    with pytest.raises(AssertionError) as info:
        assert_preserves_outputs("drop_relu", model, [torch.randn(8, 4)], registry=reg, dialects=("export",))
    msg = str(info.value)
    assert "drop_relu changed the outputs of Sequential captured with export" in msg
    assert msg.count("max abs error") == 1 and "output" in msg  # (it was given twice)


def test_assert_preserves_outputs_takes_what_pipeline_takes():
    """A `("name", {options})` pair was read as two entries ("entry 2: bad pipeline entry
    {...}: name: Field required"), though Pipeline(...) takes it (found by a new-user check)."""
    from fxpasses.testing import assert_preserves_outputs

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.1)).eval()
    for given in (("fold_constants", {"max_numel": 7}), [("fold_constants", {"max_numel": 7})], "fold_constants{max_numel=7}"):
        results = assert_preserves_outputs(given, model, [torch.randn(3, 4)], dialects=("export",))
        (report,) = [r for _, r in results.values()]
        assert [(p.name, p.status) for p in report.passes] == [("fold_constants", "ok")]
    with pytest.raises(Exception, match="max_numel: Input should be a valid integer"):
        assert_preserves_outputs(("fold_constants", {"max_numel": "x"}), model, [torch.randn(3, 4)], dialects=("export",))


#: a pass that is wrong on purpose (relu dropped), as the source of a pytester test file
_DROP_RELU = """
        class DropRelu(fxpasses.NodePass):
            "Wrong on purpose."
            name = "drop_relu_fixture"
            @fxpasses.on("relu")
            def r(self, node, ctx):
                return fxpasses.Replace(node.args[0])

"""


#: a pass whose hook raises, as the source of a pytester test file
_RAISES = """
        class Raises(fxpasses.NodePass):
            "Raises in its hook."
            name = "raises_in_hook"
            @fxpasses.on("relu")
            def r(self, node, ctx):
                raise ValueError("the hook's own error")

"""


def test_fixture_verifies_numerically_when_given_inputs(pytester):
    pytester.makepyfile(
        """
        import pytest, torch, fxpasses
        """
        + _DROP_RELU
        + """
        def test_it(fxpasses_run):
            gm = torch.fx.symbolic_trace(torch.nn.ReLU())
            with pytest.raises(fxpasses.PassFailedError, match="verification failed"):
                fxpasses_run(gm, [DropRelu], [torch.tensor([-1.0, 2.0])])
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_failure_through_the_fixture_shows_the_message_not_fxpasses_source(pytester):
    """A failing pass through `fxpasses_run` printed about 790 lines, most of them the
    pipeline's own source, before the failure's message (a new-user check). fxpasses' frames
    are left out; the test's line, the message, and a pass's own code that raised stay."""
    pytester.makepyfile(
        """
        import torch, fxpasses
        """
        + _DROP_RELU
        + _RAISES
        + """
        def test_wrong(fxpasses_run):
            gm = torch.fx.symbolic_trace(torch.nn.ReLU())
            fxpasses_run(gm, [DropRelu], [torch.tensor([-1.0, 2.0])])

        def test_raises(fxpasses_run):
            gm = torch.fx.symbolic_trace(torch.nn.ReLU())
            fxpasses_run(gm, [Raises], [torch.tensor([-1.0, 2.0])])
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert "pass 'drop_relu_fixture' failed: verification failed: output: max abs error 1" in text
    assert "raise ValueError(\"the hook's own error\")" in text  # (the pass's code is shown)
    assert "pipeline.py" not in text and "runner.py" not in text, text
    assert len(text.splitlines()) < 150, len(text.splitlines())


def test_a_failure_through_assert_preserves_outputs_shows_the_message_not_fxpasses_source(pytester):
    """A raising pass checked with `assert_preserves_outputs` printed about 480 lines, nearly all
    of them the pipeline's and the runner's source, before the failure's message (a new-user
    check; the fixture `fxpasses_run` had been fixed before). A model that cannot be captured
    in one of the dialects says how to leave that dialect out (`dialects=`), which the README
    documents but the error did not say."""
    pytester.makepyfile(
        """
        import torch, fxpasses
        from fxpasses.testing import assert_preserves_outputs
        """
        + _RAISES
        + """
        class Branchy(torch.nn.Module):
            def forward(self, x):
                return x.relu() if x.sum() > 0 else -x

        def test_raises():
            assert_preserves_outputs(Raises, torch.nn.ReLU(), [torch.tensor([-1.0, 2.0])])

        def test_untraceable():
            assert_preserves_outputs("remove_dropout", Branchy(), [torch.tensor([-1.0, 2.0])])
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert "pass 'raises_in_hook' failed: ValueError: the hook's own error" in text, text
    assert "raise ValueError(\"the hook's own error\")" in text  # (the pass's code is shown)
    assert "pipeline.py" not in text and "runner.py" not in text, text
    assert (
        "note: assert_preserves_outputs captures with each of dialects=('symbolic_trace', 'dynamo', 'export'); "
        "dialects=('dynamo', 'export') checks the others"
    ) in text, text
    assert len(text.splitlines()) < 200, len(text.splitlines())


def test_fixture_applies_verify_and_its_default_to_a_built_pipeline_too(pytester):
    """Given a Pipeline object, the fixture dropped both the numeric verification its inputs
    imply and an explicit verify= (a new-user check)."""
    pytester.makepyfile(
        """
        import pytest, torch, fxpasses

        class DropRelu(fxpasses.NodePass):
            "Wrong on purpose."
            name = "drop_relu_built"
            @fxpasses.on("relu")
            def r(self, node, ctx):
                return fxpasses.Replace(node.args[0])

        @pytest.mark.parametrize("options", [{}, {"verify": "numeric"}])
        def test_caught(fxpasses_run, options):
            pipe = fxpasses.Pipeline([DropRelu])
            with pytest.raises(fxpasses.PassFailedError, match="verification failed"):
                fxpasses_run(torch.fx.symbolic_trace(torch.nn.ReLU()), pipe, [torch.tensor([-1.0, 2.0])], **options)
            assert pipe.verify == "lint"  # the caller's Pipeline is left as it is

        def test_lint_when_asked_and_errors(fxpasses_run):
            pipe = fxpasses.Pipeline([DropRelu])
            report = fxpasses_run(torch.fx.symbolic_trace(torch.nn.ReLU()), pipe, [torch.tensor([-1.0, 2.0])], verify="lint")
            assert report.verification == "lint"
            with pytest.raises(fxpasses.ConfigError, match="verify must be one of none, lint, numeric, got 'numerc'"):
                fxpasses_run(torch.fx.symbolic_trace(torch.nn.ReLU()), pipe, None, verify="numerc")
            with pytest.raises(TypeError, match="order cannot be applied to a built Pipeline"):
                fxpasses_run(torch.fx.symbolic_trace(torch.nn.ReLU()), pipe, None, order="as-given")
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_check_inputs_the_capture_cannot_take_are_named_as_the_tests_inputs():
    """An export is specialised to the example inputs' shapes: a check input of another batch
    size fails before any pass ran. That is the test's input, named as such (not an
    AssertionError that looks like the pass's failure)."""
    from fxpasses.errors import UserError
    from fxpasses.pytest_plugin import assert_preserves_outputs

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    with pytest.raises(UserError) as info:
        assert_preserves_outputs(
            "eliminate_dead_code", model, [torch.randn(2, 4)], dialects=("export",), check_inputs=[[torch.randn(5, 4)]]
        )
    msg = str(info.value)
    assert msg.startswith("the export capture of Sequential does not run on check_inputs[0], before any pass")
    assert "specialised to the example inputs' shapes" in msg


class _Flatten(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(12, 3)

    def forward(self, x):
        return self.lin(x.reshape(x.size(0), -1) * 1)


def test_dynamic_shapes_let_check_inputs_of_other_sizes_catch_a_pass_that_specialises():
    """With `dynamic_shapes` the export capture keeps the batch size symbolic, so check inputs
    of other batch sizes run, and a pass that writes the example's size into the graph (a
    `sym_size` node replaced by its value) is caught there; the built-in pipeline passes.
    Before, every capture was specialised to the example's sizes and such check inputs were
    refused (a dynamic-shapes sweep found no way to test this in the export and dynamo
    dialects). The dynamo capture marks the sizes dynamic; its graph takes the batch size as
    an input, which the check sets' tensors give."""
    from torch.export import Dim

    from fxpasses.errors import UserError
    from fxpasses.pytest_plugin import assert_preserves_outputs

    class Specialise(NodePass):
        name = "specialise_sizes"

        @on(target=torch.ops.aten.sym_size.int)
        def size(self, node, ctx):
            return Replace(int(node.meta["val"]))

    torch.manual_seed(0)
    model, x = _Flatten().eval(), torch.randn(4, 3, 4)
    checks = [[torch.randn(1, 3, 4)], [torch.randn(7, 3, 4)]]
    batch = ({0: Dim("batch", max=64)},)
    builtin = "simplify_algebra,fold_constants,eliminate_common_subexpressions,eliminate_dead_code"
    results = assert_preserves_outputs(builtin, model, [x], check_inputs=checks, dynamic_shapes=batch)
    gm, report = results["export"]
    assert report["simplify_algebra"].counters["simplified"] == 1  # (x * 1, with a symbolic batch)
    assert any(n.target is torch.ops.aten.sym_size.int for n in gm.graph.nodes)  # still symbolic
    gm, report = results["dynamo"]  # the batch size is an input of the graph
    assert report["simplify_algebra"].counters["simplified"] == 1
    assert [type(n.meta["example_value"]).__name__ for n in gm.graph.find_nodes(op="placeholder")][0] == "SymInt"
    with pytest.raises(AssertionError) as info:
        assert_preserves_outputs(Specialise, model, [x], dialects=("export",), check_inputs=checks, dynamic_shapes=batch)
    assert "specialise_sizes broke _Flatten captured with export: it no longer runs on check_inputs[0]" in str(info.value)
    # the example's tensors are left unmarked by the dynamo capture
    assert not any(a in x.__dict__ for a in ("_dynamo_dynamic_indices", "_dynamo_dynamic_range"))
    with pytest.raises(UserError, match=r"dynamic_shapes names 'y', which _Flatten.forward is not given \(its inputs: x\)"):
        assert_preserves_outputs(builtin, model, [x], dialects=("dynamo",), dynamic_shapes={"y": {0: Dim("b")}})


@pytest.mark.parametrize("bounds", [{}, {"min": 2}, {"max": 64}, {"min": 1, "max": 64}, "DYNAMIC"])
def test_the_dynamo_capture_takes_a_dim_with_either_bound_or_none(bounds):
    """The README's `dynamic_shapes=({0: Dim("batch")},)` failed the dynamo capture ("not
    simple sympy type <class 'NoneType'>"): a Dim without `max` reached `mark_dynamic` with one
    bound, which torch takes both of or neither (a real-model sweep); only `Dim(..., max=N)`
    worked. The missing bound is now 0 or unbounded."""
    from torch.export import Dim

    from fxpasses.capture import capture

    torch._dynamo.reset()
    dim = Dim.DYNAMIC if bounds == "DYNAMIC" else Dim("batch", **bounds)
    model, x = _Flatten().eval(), torch.randn(4, 3, 4)
    c = capture(model, [x], "dynamo", dynamic_shapes=({0: dim},))
    sizes = [n for n in c.gm.graph.find_nodes(op="placeholder") if type(n.meta["example_value"]).__name__ == "SymInt"]
    assert len(sizes) == 1  # the batch size is an input of the graph
    y = torch.randn(9, 3, 4)
    placeholders = c.gm.graph.find_nodes(op="placeholder")
    given = [9 if p in sizes else y if v is x else v for p, v in zip(placeholders, c.inputs)]
    assert sum(v is y for v in given) == 1
    assert torch.equal(c.gm(*given)[0], model(y))


class _OptionalSecond(torch.nn.Module):
    def forward(self, x, y=None):
        if y is not None:
            x = x + y
        return x.relu()


class _ViewThree(torch.nn.Module):
    def forward(self, x):
        return x.view(-1, 3)  # (traces; raises on 8 elements)


def test_example_inputs_a_symbolic_trace_capture_cannot_take_are_not_told_about_check_inputs():
    """`forward(x, y=None)` given only x: symbolic_trace recorded y as an input and took the
    `y is not None` path, so the capture failed on the example inputs themselves; the message
    spoke of check inputs (found by a new-user check). The capture now specialises y=None,
    and the test passes in every dialect; a capture that does not run on its own inputs still
    gets the message about the capture, not check inputs."""
    from fxpasses.errors import UserError
    from fxpasses.pytest_plugin import assert_preserves_outputs

    assert_preserves_outputs("eliminate_dead_code", _OptionalSecond(), [torch.randn(2, 4)])
    with pytest.raises(UserError) as info:
        assert_preserves_outputs("eliminate_dead_code", _ViewThree(), [torch.randn(2, 4)], dialects=("symbolic_trace",))
    msg = str(info.value)
    assert msg.startswith("the symbolic_trace capture of _ViewThree does not run on example_inputs, before any pass: ")
    assert msg.endswith(
        "(the capture was made with these inputs: does the model itself run on them? symbolic_trace also keeps what does "
        "not depend on the inputs as constants, and records an argument they leave to a default other than None or a "
        "plain number, bool or string (a tensor, a list) as an input: give every argument, or check the other dialects)"
    )
    assert "check inputs" not in msg


def test_a_pass_that_stops_the_module_running_is_named_with_the_input_set():
    from fxpasses import GraphPass, Registry
    from fxpasses.pytest_plugin import assert_preserves_outputs

    class BreakRelu(GraphPass):
        """relu(x) -> relu(x, 1): the module then raises when called."""

        name = "break_relu"

        def run(self, gm, ctx):
            for n in gm.graph.nodes:
                if n.target is torch.ops.aten.relu.default:
                    n.target = torch.ops.aten.softmax.int
            return True

    reg = Registry(autoload=False)
    reg.register(BreakRelu)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    with pytest.raises(AssertionError) as info:
        assert_preserves_outputs("break_relu", model, [torch.randn(2, 4)], registry=reg, dialects=("export",), check_inputs=[[torch.randn(2, 4)]])
    assert str(info.value).startswith("break_relu broke Sequential captured with export: it no longer runs on example_inputs: ")


def test_fixture_takes_one_pass_as_pipeline_does(pytester):
    """``fxpasses_run`` reads ``pipeline`` as ``Pipeline(...)`` does: one pass class, one pass
    instance or one ``(name or class, options)`` pair is a one-pass pipeline (not iterated)."""
    pytester.makepyfile(
        """
        import pytest, torch, fxpasses

        class Tag(fxpasses.GraphPass):
            "Counts its option."
            name = "tag_fixture"
            class Options(fxpasses.PassOptions):
                level: int = 1
            def run(self, gm, ctx):
                ctx.count(f"level{self.options.level}")
                return False

        @pytest.fixture
        def fxpasses_registry():
            reg = fxpasses.Registry(autoload=False)
            reg.register(Tag)
            return reg

        @pytest.mark.parametrize(
            "pipeline, counters",
            [
                (Tag, {"level1": 1}),
                (Tag(Tag.Options(level=2)), {"level2": 1}),
                (("tag_fixture", {"level": 3}), {"level3": 1}),
                ((Tag, {"level": 4}), {"level4": 1}),
                ("tag_fixture{level=5}", {"level5": 1}),
                ([("tag_fixture", {"level": 6})], {"level6": 1}),
            ],
        )
        def test_one_pass(fxpasses_run, pipeline, counters):
            gm = torch.fx.symbolic_trace(torch.nn.ReLU())
            report = fxpasses_run(gm, pipeline, [torch.tensor([-1.0, 2.0])])
            assert [(p.name, p.counters) for p in report.passes] == [("tag_fixture", counters)]

        def test_not_a_pass(fxpasses_run):
            gm = torch.fx.symbolic_trace(torch.nn.ReLU())
            with pytest.raises(fxpasses.ConfigError) as info:
                fxpasses_run(gm, 3)
            assert str(info.value) == (
                "Pipeline() takes a list of entries or one pass (a pass name, a pass class or "
                "instance, or a table), got 3 of type int"
            )
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=7)


def test_assert_graph_equal_takes_code_written_by_hand_without_the_generators_frees():
    """The generator's `;  x = None` suffixes follow from the graph: expected code written by
    hand need not copy them; a real difference is still reported as a diff."""
    import torch

    from fxpasses.testing import assert_graph_equal

    class M(torch.nn.Module):
        def forward(self, x, y):
            return (x + y).relu()

    gm = torch.fx.symbolic_trace(M())
    assert "add = x + y;  x = y = None" in gm.code
    assert_graph_equal(
        gm,
        """
        def forward(self, x, y):
            add = x + y
            relu = add.relu()
            return relu
        """.replace("\n        ", "\n"),
    )
    assert_graph_equal(gm, gm.code)  # the generator's own text, suffixes and all
    with pytest.raises(AssertionError) as info:
        assert_graph_equal(gm, "def forward(self, x, y):\n    add = x * y\n    relu = add.relu()\n    return relu\n")
    assert "-    add = x * y\n+    add = x + y" in str(info.value)


def test_dialects_given_as_one_name_or_none_and_a_failure_names_its_dialect():
    """`dialects="export"` was read letter by letter ("unknown capture 'e'"), `dialects=()`
    checked nothing and passed, and a pass failing in one capture did not say which (a
    new-user check)."""
    import fxpasses
    from fxpasses.testing import assert_preserves_outputs

    class M(torch.nn.Module):
        def forward(self, x):
            return x.abs() + 1

    class FailOnAten(fxpasses.NodePass):
        """Fails on export's aten op only."""

        name = "fail_on_aten"

        @fxpasses.on("abs")
        def a(self, node, ctx):
            if isinstance(node.target, torch._ops.OpOverload):
                raise ValueError("cannot handle this")
            return None

    assert list(assert_preserves_outputs("eliminate_dead_code", M(), [torch.randn(3)], dialects="export")) == ["export"]
    with pytest.raises(fxpasses.UserError, match="dialects is empty: name at least one of symbolic_trace, dynamo, export"):
        assert_preserves_outputs("eliminate_dead_code", M(), [torch.randn(3)], dialects=())
    with pytest.raises(fxpasses.PassFailedError) as info:
        assert_preserves_outputs(FailOnAten, M(), [torch.randn(3)])
    assert str(info.value).endswith("note: in the graph of M captured with export")


def test_one_tensor_given_for_two_example_inputs_with_check_sets_is_warned_about():
    """TorchDynamo merges the two inputs and export specialises to them being one: check_inputs
    giving them different values passed there without testing them (a new-user check)."""
    import warnings

    from fxpasses.testing import assert_preserves_outputs

    class M(torch.nn.Module):
        def forward(self, x, y):
            return x.abs() + y

    pos = torch.rand(3, 4) + 0.1
    with pytest.warns(UserWarning, match=r"example_inputs\[0\] and example_inputs\[1\] are one tensor"):
        assert_preserves_outputs("eliminate_dead_code", M(), [pos, pos], check_inputs=[[-pos, pos]], dialects="symbolic_trace")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # two tensors of their own: no warning
        assert_preserves_outputs("eliminate_dead_code", M(), [pos, pos.clone()], check_inputs=[[-pos, pos]], dialects="symbolic_trace")


def test_assert_preserves_outputs_names_the_node_where_a_broken_module_raises():
    """A pass that left a graph which raises when run (a float put in `torch.cat`'s list)
    failed `assert_preserves_outputs` with about 115 lines, torch's frames and FX's generated
    code among them, naming neither the node nor the user's line (a new-user check): the
    failure names both, short."""
    import fxpasses
    from fxpasses.testing import assert_preserves_outputs

    class CatTwo(torch.nn.Module):
        def forward(self, x):
            return torch.cat([x.relu(), x.sigmoid()], 1)

    class SigmoidToHalf(fxpasses.NodePass):
        name = "sigmoid_to_half"

        @fxpasses.on("sigmoid")
        def r(self, node, ctx):
            return fxpasses.Replace(0.5)

    with pytest.raises(AssertionError) as info:
        assert_preserves_outputs(SigmoidToHalf, CatTwo(), [torch.randn(2, 4)], dialects=("symbolic_trace",))
    said = str(info.value)
    assert said.startswith(
        "sigmoid_to_half broke CatTwo captured with symbolic_trace: it no longer runs on example_inputs: TypeError: "
        "expected Tensor as element 1 in argument 0, but got float\n"
        "  at node %cat (op=call_function, target=torch.cat, args=([%relu, 0.5], 1), kwargs={})\n"
        '  user code: File "'
    ), said
    assert "return torch.cat([x.relu(), x.sigmoid()], 1)" in said.splitlines()[2]
    assert "(verify='numeric' runs the module after each pass: it names the pass that broke it and rolls it back)" in said
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_assert_graph_equal_given_no_graph_names_the_argument_and_the_type():
    """``assert_graph_equal(gm, 3)`` failed as ``AttributeError: 'int' object has no attribute
    'python_code'``, and a model not captured, or the arguments swapped, alike (a new-user
    check): each names the function, the argument, what it takes and the type given."""
    import torch

    from fxpasses.testing import assert_graph_equal, normalized_code

    model = torch.nn.Sequential(torch.nn.ReLU())
    gm = torch.fx.symbolic_trace(model)
    with pytest.raises(TypeError) as info:
        assert_graph_equal(gm, 3)
    assert str(info.value) == (
        "assert_graph_equal: expected must be a torch.fx.GraphModule, a torch.fx.Graph or the expected code "
        "(a str), got int"
    )
    with pytest.raises(TypeError) as info:
        assert_graph_equal(model, gm.code)
    assert str(info.value) == (
        "assert_graph_equal: gm must be a torch.fx.GraphModule or a torch.fx.Graph, got Sequential (capture the "
        "model first: torch.fx.symbolic_trace(model), or torch.export.export(model, args).module())"
    )
    with pytest.raises(TypeError) as info:
        assert_graph_equal(gm.code, gm)
    assert str(info.value).endswith(
        "got str (the graph comes first, the expected code second: assert_graph_equal(gm, expected))"
    )
    with pytest.raises(TypeError) as info:
        normalized_code(None)
    assert str(info.value) == "normalized_code: gm must be a torch.fx.GraphModule or a torch.fx.Graph, got NoneType"
    assert_graph_equal(gm, gm.graph)  # a graph and a module still compare
    assert normalized_code(gm.graph) == normalized_code(gm)


def test_failure_message_gives_no_error_figure_for_a_shape_change():
    """A pass changing an output's shape was reported as "output: shape changed from (4, 2, 3)
    to (2, 3, 4) (max abs error 0)": no values were compared, so the 0 read as "values equal"
    (found by a pass author's check: a wrong permute cancellation)."""
    from fxpasses import NodePass, Registry, Replace, on
    from fxpasses.pytest_plugin import assert_preserves_outputs

    class CancelAnyPermutes(NodePass):
        """Wrong on purpose: x.permute(p).permute(q) -> x for any p, q."""

        name = "cancel_any_permutes"

        @on("permute")
        def p(self, node, ctx):
            inner = node.args[0]
            if isinstance(inner, torch.fx.Node) and inner.target == node.target:
                return Replace(inner.args[0])

    class M(torch.nn.Module):
        def forward(self, x):
            return x.permute(1, 2, 0).permute(1, 2, 0) * 2

    reg = Registry(autoload=False)
    reg.register(CancelAnyPermutes)
    with pytest.raises(AssertionError) as info:
        assert_preserves_outputs("cancel_any_permutes", M(), [torch.randn(2, 3, 4)], registry=reg, dialects=("export",))
    msg = str(info.value)
    assert "output: shape changed from (4, 2, 3) to (2, 3, 4)\n" in msg
    assert "max abs error" not in msg
