"""Exact rollback: a failed pass leaves the GraphModule exactly as it was before that pass."""

from __future__ import annotations

import collections
import dataclasses
import enum
import operator
import warnings

import numpy as np

import pytest
import torch

import fxpasses
from fxpasses import ERASE, PassFailedError, Pipeline, Registry, Replace
from fxpasses._example import convnet
from fxpasses.capture import capture
from fxpasses.snapshot import Snapshot


def traced_convnet(*passes):
    """The example CNN, an input, its symbolic_trace graph, and a registry holding ``passes``."""
    model = convnet()
    x = torch.randn(1, 3, 32, 32)
    gm = capture(model, [x], "symbolic_trace").gm
    reg = Registry(autoload=False)
    for p in passes:
        reg.register(p)
    return model, x, gm, reg


def state(gm):
    """Everything rollback promises to restore, in comparable form."""
    nodes = list(gm.graph.nodes)
    return {
        "code": gm.graph.python_code("self").src,
        "nodes": [(n, n.name, n.op, n.target, n.args, n.kwargs, dict(n.meta), list(n.users)) for n in nodes],
        "params": {k: v for k, v in gm.named_parameters()},
        "buffers": {k: v for k, v in gm.named_buffers()},
        "modules": {k: v for k, v in gm.named_modules()},
        "values": {k: v.detach().clone() for k, v in gm.state_dict().items()},
    }


def assert_same_state(before, after):
    assert after["code"] == before["code"]
    assert len(after["nodes"]) == len(before["nodes"])
    for a, b in zip(after["nodes"], before["nodes"]):
        assert a[0] is b[0]
        assert a[1:6] == b[1:6]
        assert a[6].keys() == b[6].keys() and all(a[6][k] is b[6][k] for k in a[6])
        assert a[7] == b[7]
    for key in ("params", "buffers", "modules"):
        assert after[key].keys() == before[key].keys()
        assert all(after[key][k] is before[key][k] for k in after[key])
    for k, v in before["values"].items():
        assert torch.equal(after["values"][k], v)


class Wrecker(fxpasses.NodePass):
    """Rewrites every call_function node it visits, then fails at the k-th one."""

    name = "wrecker"

    class Options(fxpasses.PassOptions):
        fail_at: int = 0

    def setup(self, gm, ctx):
        self.seen = 0

    @fxpasses.on(op="call_function")
    def visit(self, node, ctx):
        if self.seen == self.options.fail_at:
            raise ValueError(f"planted failure at visit {self.seen}")
        self.seen += 1
        node.meta["wrecked"] = True
        node.meta.pop("stack_trace", None)
        ctx.rename(node, f"renamed_{node.name}")
        if node.args and isinstance(node.args[0], torch.fx.Node) and node.args[0].op != "get_attr":
            neg = ctx.call_function(operator.neg, (node.args[0],))
            neg2 = ctx.call_function(operator.neg, (neg,))
            node.args = (neg2, *node.args[1:])
        if not node.users and node.target is not operator.getitem:
            return ERASE
        return None


@pytest.fixture(scope="module")
def exported():
    model = convnet()
    x = torch.randn(2, 3, 32, 32)
    return model, x


def test_failure_at_every_node_restores_exactly(exported):
    model, x = exported
    cap = capture(model, [x], "export")
    gm = cap.gm
    reg = Registry(autoload=False)
    reg.register(Wrecker)
    n_calls = len(gm.graph.find_nodes(op="call_function", target=torch.ops.aten.conv2d.default)) and sum(
        1 for n in gm.graph.nodes if n.op == "call_function"
    )
    assert n_calls > 10
    expected = gm(x)
    before = state(gm)
    for k in range(n_calls):
        with pytest.raises(PassFailedError) as info:
            Pipeline([("wrecker", {"fail_at": k})], registry=reg).run(gm, [x])
        err = info.value
        assert err.rolled_back and err.pass_name == "wrecker"
        assert f"planted failure at visit {k}" in str(err)
        assert isinstance(err.__cause__, ValueError)
        assert err.node is not None and err.node["op"] == "call_function"
        assert_same_state(before, state(gm))
    assert torch.equal(gm(x), expected)


def test_error_names_node_and_user_source_line(exported):
    model, x = exported
    gm = capture(model, [x], "export").gm
    reg = Registry(autoload=False)
    reg.register(Wrecker)
    with pytest.raises(PassFailedError) as info:
        Pipeline([("wrecker", {"fail_at": 0})], registry=reg).run(gm, [x])
    text = str(info.value)
    first = next(n for n in gm.graph.nodes if n.op == "call_function")
    assert f"at node %{first.name} (op=call_function, target=aten.conv2d.default" in text
    assert "user code: File" in text and "_example.py" in text and "in forward:" in text
    assert "restored to its state before 'wrecker'" in text


def test_error_on_a_plain_symbolic_trace_graph_says_why_no_source_line(exported):
    """torch.fx.symbolic_trace records no stack traces by default: the error says so, and how
    to get them, instead of leaving the line out."""
    from fxpasses.errors import NO_STACK_TRACE

    model, x = exported
    gm = torch.fx.symbolic_trace(model)
    reg = Registry(autoload=False)
    reg.register(Wrecker)
    with pytest.raises(PassFailedError) as info:
        Pipeline([("wrecker", {"fail_at": 0})], registry=reg).run(gm, [x])
    assert info.value.source_line is None
    lines = str(info.value).splitlines()
    assert lines[2] == f"  user code: unknown ({NO_STACK_TRACE})"
    assert "record_stack_traces = True" in NO_STACK_TRACE


class SubmoduleThief(fxpasses.GraphPass):
    """Deletes a submodule, adds a buffer and changes a parameter, then fails lint."""

    name = "thief"

    def run(self, gm, ctx):
        with torch.no_grad():
            gm.fc.weight.mul_(0)
        del gm._modules["fc"]
        gm.register_buffer("stolen", torch.ones(3))
        # registries that were empty: a leaf module gets a parameter, a submodule and a
        # non-persistent buffer
        leaf = next(m for m in gm.modules() if not m._parameters and not m._buffers and not m._modules)
        leaf.register_parameter("grown", torch.nn.Parameter(torch.zeros(2)))
        leaf.add_module("child", torch.nn.Identity())
        leaf.register_buffer("scratch", torch.zeros(1), persistent=False)
        return True


@pytest.mark.parametrize("snapshot_tensors", [False, True])
def test_deleted_submodule_and_in_place_parameter_restored(snapshot_tensors):
    model, x, gm, reg = traced_convnet(SubmoduleThief)
    before = state(gm)
    weight = gm.fc.weight
    expected_weight = weight.detach().clone()
    with pytest.raises(PassFailedError) as info:
        Pipeline(["thief"], registry=reg, snapshot_tensors=snapshot_tensors).run(gm, [x])
    assert "fc" in str(info.value)  # lint: the call_module target no longer exists
    assert "could not be restored" not in str(info.value)
    assert_same_state(before, state(gm))
    assert gm.fc.weight is weight and torch.equal(weight, expected_weight)
    assert not hasattr(gm, "stolen")
    for m in gm.modules():
        assert not hasattr(m, "grown") and not hasattr(m, "child") and not hasattr(m, "scratch")
        assert "scratch" not in m._non_persistent_buffers_set
    assert torch.allclose(gm(x), model(x))


class HookPlanter(fxpasses.GraphPass):
    """Registers module hooks (on the root, on a submodule, global ones), then fails."""

    name = "hook_planter"

    def run(self, gm, ctx):
        gm.register_forward_hook(lambda m, i, o: o * 0)
        gm.fc.register_forward_pre_hook(lambda m, i: (i[0] * 0,))
        gm.conv1.register_forward_hook(lambda m, i, o: o + 1)
        gm.register_state_dict_pre_hook(lambda m, prefix, keep_vars: None)
        torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: o)
        raise RuntimeError("planted failure after the hooks")


def test_hooks_a_failing_pass_registers_are_removed():
    model, x, gm, reg = traced_convnet(HookPlanter)
    gm.conv1.register_forward_hook(lambda m, i, o: o)  # the user's own hook stays
    kept = dict(gm.conv1._forward_hooks)
    expected = gm(x)
    before = state(gm)
    global_hooks = dict(torch.nn.modules.module._global_forward_hooks)
    with pytest.raises(PassFailedError, match="planted failure"):
        Pipeline(["hook_planter"], registry=reg).run(gm, [x])
    assert_same_state(before, state(gm))
    assert not gm._forward_hooks and not gm._state_dict_pre_hooks and not gm.fc._forward_pre_hooks
    assert dict(gm.conv1._forward_hooks) == kept
    assert dict(torch.nn.modules.module._global_forward_hooks) == global_hooks
    assert torch.equal(gm(x), expected)
    # a hook alone counts as a change (a pass reporting nothing is still compared)
    from fxpasses.snapshot import Snapshot

    snap = Snapshot(gm)
    assert not snap.changed()
    handle = gm.fc.register_forward_hook(lambda m, i, o: o)
    assert snap.changed()
    handle.remove()
    assert not snap.changed()
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda m, i: i)
    assert snap.changed()
    handle.remove()


class FullBackwardHooker(fxpasses.GraphPass):
    """Registers a global full backward hook (which sets torch's module-level flag), then fails."""

    name = "full_backward_hooker"

    def run(self, gm, ctx):
        torch.nn.modules.module.register_module_full_backward_hook(lambda m, gi, go: None)
        raise RuntimeError("planted failure after the global hook")


def test_global_full_backward_flag_is_restored():
    import torch.nn.modules.module as module_mod

    model, x, gm, reg = traced_convnet(FullBackwardHooker)
    flag = module_mod._global_is_full_backward_hook
    with pytest.raises(PassFailedError, match="planted failure"):
        Pipeline(["full_backward_hooker"], registry=reg).run(gm, [x])
    assert module_mod._global_is_full_backward_hook is flag and not module_mod._global_backward_hooks
    # the user can still register a plain (non-full) global backward hook
    handle = module_mod.register_module_backward_hook(lambda m, gi, go: None)
    handle.remove()
    module_mod._global_is_full_backward_hook = flag


class Parametrizer(fxpasses.GraphPass):
    """Parametrizes a weight (which swaps the module's class), then fails."""

    name = "parametrizer"

    def run(self, gm, ctx):
        torch.nn.utils.parametrize.register_parametrization(gm.fc, "weight", torch.nn.Identity())
        raise RuntimeError("planted failure after the parametrization")


def test_parametrization_is_undone_with_the_module_class():
    import torch.nn.utils.parametrize as parametrize

    model, x, gm, reg = traced_convnet(Parametrizer)
    cls = type(gm.fc)
    before = state(gm)
    expected = gm(x)
    with pytest.raises(PassFailedError, match="planted failure"):
        Pipeline(["parametrizer"], registry=reg).run(gm, [x])
    assert type(gm.fc) is cls and not parametrize.is_parametrized(gm.fc)
    assert_same_state(before, state(gm))
    assert torch.equal(gm(x), expected)
    parametrize.register_parametrization(gm.fc, "weight", torch.nn.Identity())  # works again
    assert parametrize.is_parametrized(gm.fc, "weight")


class QuietWriter(fxpasses.GraphPass):
    """Writes tensors in place in the ways torch's dispatcher sees (through ``.data``, a view,
    ``out=``, a training-mode batch norm's running statistics), then fails."""

    name = "quiet_writer"

    def run(self, gm, ctx):
        with torch.no_grad():
            gm.fc.weight.data.mul_(0)  # .data: does not bump fc.weight._version
            gm.fc.bias[1:].fill_(7.0)  # a view
            torch.add(gm.conv1.weight, 1.0, out=gm.conv1.weight)
            bn = gm.bn1
            torch.nn.functional.batch_norm(
                torch.randn(2, bn.num_features, 4, 4), bn.running_mean, bn.running_var, training=True
            )
        raise RuntimeError("planted failure after the writes")


def test_writes_seen_by_the_dispatcher_are_restored_by_default():
    model, x, gm, reg = traced_convnet(QuietWriter)
    tensors = dict(gm.named_parameters()) | dict(gm.named_buffers())
    values = {k: v.detach().clone() for k, v in tensors.items()}
    before = state(gm)
    with pytest.raises(PassFailedError, match="planted failure") as info:
        Pipeline(["quiet_writer"], registry=reg).run(gm, [x])
    assert "could not be restored" not in str(info.value)
    assert_same_state(before, state(gm))
    now = dict(gm.named_parameters()) | dict(gm.named_buffers())
    for k, t in tensors.items():
        assert now[k] is t, k
        assert torch.equal(t, values[k]), k
    assert torch.allclose(gm(x), model(x))


class Rebinder(fxpasses.GraphPass):
    """Rebinds a parameter's data (which torch's dispatcher does not see), then fails lint."""

    name = "rebinder"

    def run(self, gm, ctx):
        gm.fc.weight.data = torch.zeros_like(gm.fc.weight)
        del gm._modules["fc"]
        return True


class UndeclaredWriter(fxpasses.GraphPass):
    """Declares writes_tensors=False but writes a parameter in place, then fails."""

    name = "undeclared_writer"
    writes_tensors = False

    def run(self, gm, ctx):
        with torch.no_grad():
            gm.fc.weight.mul_(0)
        raise RuntimeError("planted failure")


def test_write_by_a_pass_declaring_no_writes_is_reported_not_hidden():
    model, x, gm, reg = traced_convnet(UndeclaredWriter)
    with pytest.raises(PassFailedError) as info:
        Pipeline(["undeclared_writer"], registry=reg).run(gm, [x])
    text = str(info.value)
    assert "could not be restored" in text and "fc.weight" in text and "writes_tensors=False" in text
    gm = capture(model, [x], "symbolic_trace").gm
    with pytest.raises(PassFailedError) as info:
        Pipeline(["undeclared_writer"], registry=reg, snapshot_tensors=True).run(gm, [x])
    assert "could not be restored" not in str(info.value)
    assert torch.allclose(gm(x), model(x))


def test_rebound_parameter_data_is_reported_without_tensor_snapshot():
    model, x, gm, reg = traced_convnet(Rebinder)
    with pytest.raises(PassFailedError) as info:
        Pipeline(["rebinder"], registry=reg).run(gm, [x])
    assert "could not be restored" in str(info.value) and "fc.weight" in str(info.value)
    # (it declares writes_tensors=True: the message named writes_tensors=False among the causes)
    assert "no write guard saw it (the pass rebinds .data or swaps tensors, or writes through numpy)" in str(info.value)
    assert "fc" in dict(gm.named_children())  # structure is still restored
    gm2 = capture(model, [x], "symbolic_trace").gm
    with pytest.raises(PassFailedError) as info:
        Pipeline(["rebinder"], registry=reg, snapshot_tensors=True).run(gm2, [x])
    assert "could not be restored" not in str(info.value)
    assert torch.allclose(gm2(x), model(x))


class RebindThenWrite(fxpasses.GraphPass):
    """Gives a parameter new data, writes that in place, then fails."""

    name = "rebind_then_write"

    def run(self, gm, ctx):
        gm.fc.weight.data = torch.zeros_like(gm.fc.weight)
        with torch.no_grad():
            gm.fc.weight.add_(1.0)
        raise RuntimeError("planted failure")


def test_new_data_written_after_a_rebinding_is_not_put_back_as_the_tensors_own():
    """The write guard indexed the tensors by their storage at the first write: after
    `w.data = zeros`, the write of the new data cloned it, and the rollback put that back: the
    weight stayed ones, with no note (a final new-user check's case, without freeze). The
    guard skips a tensor rebound before its first write, and the rebinding is reported."""
    model, x, gm, reg = traced_convnet(RebindThenWrite)
    with pytest.raises(PassFailedError) as info:
        Pipeline(["rebind_then_write"], registry=reg).run(gm, [x])
    assert "could not be restored (run with snapshot_tensors=True to restore them): fc.weight" in str(info.value)
    gm2 = capture(model, [x], "symbolic_trace").gm  # (the model's tensors: as the first run left them)
    before = gm2.fc.weight.detach().clone()
    with pytest.raises(PassFailedError) as info:
        Pipeline(["rebind_then_write"], registry=reg, snapshot_tensors=True).run(gm2, [x])
    assert "could not be restored" not in str(info.value)
    assert torch.equal(gm2.fc.weight, before)


class Dangler(fxpasses.NodePass):
    """Points a node at a node from another graph (a dangling use)."""

    name = "dangler"

    @fxpasses.on("relu")
    def relu(self, node, ctx):
        other = torch.fx.Graph().placeholder("ghost")
        node.args = (other,)


def test_lint_failure_rolls_back_and_skip_continues():
    model, x, gm, reg = traced_convnet(Dangler)
    before = state(gm)
    with pytest.raises(PassFailedError, match="graph lint failed"):
        Pipeline(["dangler"], registry=reg).run(gm, [x])
    assert_same_state(before, state(gm))
    report = Pipeline(["dangler"], registry=reg, on_error="skip").run(gm, [x])
    assert report.passes[0].status == "skipped" and "lint" in report.passes[0].error
    assert_same_state(before, state(gm))


class Foreign(fxpasses.GraphPass):
    """Makes the output return a node of another graph."""

    name = "foreign_output"

    def run(self, gm, ctx):
        other = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.ReLU()))
        gm.graph.output_node().args = (list(other.graph.nodes)[1],)
        return True


@pytest.mark.parametrize("blocks", [3, 300])
def test_a_lint_failure_says_what_and_where_without_the_whole_graph(blocks):
    """torch's Graph.lint() ends two of its messages with the whole graph printed: the
    failure's message (and its JSON `cause`) held every node of it, twice (found by a new-user
    check). The message keeps torch's first line."""
    gm = torch.fx.symbolic_trace(torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(blocks)]))
    reg = Registry()
    reg.register(Foreign)
    with pytest.raises(PassFailedError) as info:
        Pipeline(["foreign_output"], registry=reg).run(gm, [torch.randn(2, 4)])
    assert str(info.value).splitlines() == [
        "pass 'foreign_output' failed: graph lint failed: RuntimeError: Argument '_0' of Node 'output' does not belong "
        "to this Graph, but was used as an argument! If you are copying nodes from another graph, make sure to use "
        "``arg_transform`` on node_copy() to remap values (the graph printed after it by Graph.lint() is left out)",
        # the node lint is about, as the pass left it and as the rollback put it back
        f"  at node %output (op=output, target=output, args=(%_0,), kwargs={{}}) (as the pass left it; after the "
        f"rollback: args=(%_{blocks - 1},))",
        "  user code: unknown (an output node records no stack trace)",
        "  the graph was restored to its state before 'foreign_output'",
    ]
    assert "graph():" not in str(info.value.__cause__)


class ScaleRelu(fxpasses.NodePass):
    """Numerically wrong, structurally fine: relu(x) -> relu(x) * 2."""

    name = "scale_relu"

    @fxpasses.on("relu")
    def relu(self, node, ctx):
        again = ctx.call_function(node.target, node.args, node.kwargs)
        return Replace(ctx.call_function(operator.mul, (again, 2.0)))


def test_entry_settings_in_a_pipeline_string_apply_to_that_pass_only():
    model = convnet()
    x = torch.randn(1, 3, 32, 32)
    reg = Registry(autoload=False)
    reg.register(Dangler)
    reg.register(ScaleRelu)
    gm = capture(model, [x], "symbolic_trace").gm
    before = state(gm)
    # the pipeline raises on error, but this entry is skipped (rolled back) and the run goes on
    report = Pipeline.from_string("dangler[on_error=skip]", registry=reg, on_error="raise").run(gm, [x])
    assert [p.status for p in report.passes] == ["skipped"]
    assert_same_state(before, state(gm))
    # lint does not see a wrong number; numeric verification of this one entry does
    with pytest.raises(PassFailedError, match="verification failed"):
        Pipeline.from_string("scale_relu[verify=numeric]", registry=reg).run(gm, [x])
    assert_same_state(before, state(gm))
    report = Pipeline.from_string("scale_relu", registry=reg).run(gm, [x])
    assert report.passes[0].status == "ok"
    assert not torch.allclose(gm(x), model(x))


def test_on_error_raise_leaves_the_broken_graph_for_debugging():
    model, x, gm, reg = traced_convnet(Dangler)
    with pytest.raises(PassFailedError) as info:
        Pipeline(["dangler"], registry=reg, on_error="raise").run(gm, [x])
    assert not info.value.rolled_back
    assert any(a.name == "ghost" for n in gm.graph.nodes for a in n.all_input_nodes)
    # its row says it changed the graph it left (it said "changed: no": a new-user check);
    # a rolled-back failure changed nothing
    (row,) = info.value.report.passes
    assert row.status == "failed" and row.changed and not row.rolled_back
    with pytest.raises(PassFailedError) as info:
        Pipeline(["dangler"], registry=reg).run(traced_convnet(Dangler)[2], [x])
    (row,) = info.value.report.passes
    assert row.status == "failed" and not row.changed and row.rolled_back


def test_erase_with_users_names_each_user():
    class EraseSum(fxpasses.NodePass):
        """Erase sum nodes."""

        name = "erase_sum"

        @fxpasses.on("sum")
        def s(self, node, ctx):
            return ERASE

    def f(x, mask):
        torch._assert(mask.sum() >= 0, "mask must be non-negative")
        return x + 1

    gm = torch.fx.symbolic_trace(f)
    reg = Registry(autoload=False)
    reg.register(EraseSum)
    with pytest.raises(PassFailedError) as info:
        Pipeline(["erase_sum"], registry=reg).run(gm, [torch.ones(2), torch.ones(2)])
    assert isinstance(info.value.__cause__, fxpasses.NodeHasUsersError)
    assert "cannot erase node %sum_1" in str(info.value) and "%ge (op=call_function)" in str(info.value)
    gm.graph.lint()


def _frame_hook_pass(op, answer):
    class Frame(fxpasses.NodePass):
        name = f"frame_{op}"

        @fxpasses.on(op=op)
        def h(self, node, ctx):
            return answer(node, ctx)

    return Frame


@pytest.mark.parametrize(
    "op, answer, message",
    [
        ("output", lambda n, c: ERASE, r"hook returned ERASE for the output node %output: a graph must keep its output node"),
        ("output", lambda n, c: Replace(1.0), r"hook returned Replace\(value=1.0\) for the output node %output, which nothing uses"),
        ("placeholder", lambda n, c: ERASE, r"hook returned ERASE for the input %x \(a placeholder\): erasing an input changes"),
    ],
)
def test_hooks_may_not_erase_the_graphs_frame(op, answer, message):
    """ERASE of the output node left a module returning None, and ERASE of an unused input
    changed its signature, both reported ok under verify="lint"."""

    def f(x, mask):
        return x + 1

    gm = torch.fx.symbolic_trace(f)
    code = gm.code
    reg = Registry(autoload=False)
    cls = _frame_hook_pass(op, answer)
    reg.register(cls)
    with pytest.raises(PassFailedError, match=message) as info:
        Pipeline([cls.name], registry=reg).run(gm, [torch.ones(2), torch.ones(2)])
    assert info.value.rolled_back
    assert gm.code == code and [n.op for n in gm.graph.nodes] == ["placeholder", "placeholder", "call_function", "output"]
    torch.testing.assert_close(gm(torch.ones(2), torch.ones(2)), torch.full((2,), 2.0))


@pytest.mark.parametrize("answer", ["erase", "replace"])
@pytest.mark.parametrize("fast", [True, False])
def test_a_hook_that_erased_its_node_itself_may_not_return_an_action_for_it(answer, fast):
    """torch warned "erase_node(relu) on an already erased node" and the pass went on."""

    class SelfErase(fxpasses.NodePass):
        name = "self_erase"

        @fxpasses.on("relu")
        def relu(self, node, ctx):
            src = node.args[0]
            node.replace_all_uses_with(src)
            ctx.graph.erase_node(node)
            return ERASE if answer == "erase" else Replace(src)

        if not fast:  # a second hook on the node: the general loop

            @fxpasses.on("relu")
            def other(self, node, ctx):
                return None

    def f(x):
        return torch.relu(x) + 1

    gm = torch.fx.symbolic_trace(f)
    reg = Registry(autoload=False)
    reg.register(SelfErase)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(PassFailedError, match=r"for %relu, which it had erased itself: after erasing a node, return None") as info:
            Pipeline(["self_erase"], registry=reg).run(gm, [torch.ones(2)])
    # described as the pass left it: erased, its arguments gone (torch's erase_node sets them to None)
    assert str(info.value).splitlines()[1] == (
        "  at node %relu (op=call_function, target=torch.relu), which the pass had erased from the graph"
    )
    assert info.value.node == {"name": "relu", "op": "call_function", "target": "torch.relu", "args": "?", "kwargs": "?", "erased": "yes"}
    assert [n.name for n in gm.graph.nodes] == ["x", "relu", "add", "output"]
    torch.testing.assert_close(gm(-torch.ones(2)), torch.ones(2))


def _last(g):
    return next(iter(reversed(g.nodes)))


def _last_input(g):
    return [n for n in g.nodes if n.op == "placeholder"][-1]


def _before_output(edit):
    def go(g):
        with g.inserting_before(_last(g)):
            edit(g)

    return go


@pytest.mark.parametrize(
    "edit, message, journalable",
    [
        (lambda g: g.erase_node(_last(g)), r"the graph has no output node \(the module would return None\)", True),
        (
            _before_output(lambda g: g.output(next(iter(g.nodes)))),
            r"the graph has 2 output nodes \(%output_1, %output\); it must have one",
            True,
        ),
        (
            _before_output(lambda g: g.placeholder("extra")),
            r"the graph's inputs \(placeholders\) are now \(x, mask, extra\), \(x, mask\) before: a pass changed how",
            True,
        ),
        (
            lambda g: g.erase_node(next(n for n in g.nodes if n.name == "mask")),
            r"the graph's inputs \(placeholders\) are now \(x\), \(x, mask\) before: a pass changed how",
            True,
        ),
        (
            lambda g: _last_input(g).append(next(iter(g.nodes))),
            r"the graph's inputs \(placeholders\) are now \(mask, x\), \(x, mask\) before: a pass changed how",
            False,
        ),
        (
            lambda g: setattr(_last_input(g), "target", "other"),
            r"the graph's inputs \(placeholders\) are now \(x, other\), \(x, mask\) before: a pass changed how",
            False,
        ),
    ],
)
def test_lint_checks_the_graphs_frame_after_a_graph_pass(edit, message, journalable):
    """A GraphPass that erased the output node or an input was reported ok under
    verify="lint" (torch's Graph.lint() checks neither); so was one that reordered or
    retargeted the inputs. Journaled and not (moving a node or assigning its target is not a
    journalable edit: those run with a snapshot only)."""
    for journaled in (True, False) if journalable else (False,):
        _frame_edit_fails(edit, message, journaled)


def _frame_edit_fails(edit, message, journaled):
    class Frame(fxpasses.GraphPass):
        name = "frame_edit"
        journal_edits = journaled
        writes_tensors = False

        def run(self, gm, ctx):
            edit(gm.graph)
            return True

    def f(x, mask):
        return x + 1

    gm = torch.fx.symbolic_trace(f)
    code = gm.code
    reg = Registry(autoload=False)
    reg.register(Frame)
    with pytest.raises(PassFailedError, match=message) as info:
        Pipeline(["frame_edit"], registry=reg).run(gm, [torch.ones(2), torch.ones(2)])
    assert info.value.rolled_back
    assert gm.code == code
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "placeholder", "call_function", "output"]


def test_an_input_graph_without_output_is_named_as_the_callers():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.call_function(torch.relu, (x,))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    with pytest.raises(fxpasses.InputGraphError, match=r"the graph has no output node"):
        Pipeline(["eliminate_dead_code"], on_error="raise").run(gm, [torch.ones(2)])


class WrongRelu(fxpasses.NodePass):
    """relu(x) -> x: wrong, it changes the outputs (the graph stays well formed)."""

    name = "wrong_relu"

    @fxpasses.on("relu")
    def relu(self, node, ctx):
        return Replace(node.args[0])


def test_numeric_verification_catches_a_wrong_rewrite_and_rolls_back():
    model, x, gm, reg = traced_convnet(WrongRelu)
    before = state(gm)
    with pytest.raises(PassFailedError, match="verification failed: output: max abs error"):
        Pipeline(["wrong_relu"], registry=reg, verify="numeric").run(gm, [x])
    assert_same_state(before, state(gm))
    assert torch.allclose(gm(x), model(x))


def test_hook_error_names_node_args_kwargs_and_keeps_the_cause():
    class SumBreaker(fxpasses.NodePass):
        """Fails on sum nodes."""

        name = "sum_breaker"

        @fxpasses.on("sum")
        def s(self, node, ctx):
            raise KeyError("no rule for this reduction")

    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.sum(x * 2, dim=1, keepdim=True)

    tracer = torch.fx.Tracer()
    tracer.record_stack_traces = True  # symbolic_trace records no source lines by default
    gm = torch.fx.GraphModule(Net(), tracer.trace(Net()))
    reg = Registry(autoload=False)
    reg.register(SumBreaker)
    with pytest.raises(PassFailedError) as info:
        Pipeline(["sum_breaker"], registry=reg).run(gm, [torch.ones(2, 3)])
    err = info.value
    assert err.node == {
        "name": "sum_1",
        "op": "call_function",
        "target": "torch.sum",
        "args": "(%mul,)",
        "kwargs": "{dim: 1, keepdim: True}",
    }
    assert "at node %sum_1 (op=call_function, target=torch.sum, args=(%mul,), kwargs={dim: 1, keepdim: True})" in str(err)
    assert "KeyError: 'no rule for this reduction'" in str(err)
    assert isinstance(err.__cause__, KeyError)
    assert "user code: File" in str(err) and "in forward: return torch.sum(x * 2, dim=1, keepdim=True)" in str(err)


def test_symbolic_trace_capture_records_the_user_source_line(tmp_path):
    from fxpasses.context import user_source_line

    (tmp_path / "usermod.py").write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        y = torch.relu(x)\n"
        "        return y + 1\n"
    )
    import importlib.util

    spec = importlib.util.spec_from_file_location("usermod", tmp_path / "usermod.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    gm = capture(mod.M(), [torch.ones(2)], "symbolic_trace").gm
    relu = next(n for n in gm.graph.nodes if n.target is torch.relu)
    line = user_source_line(relu)
    assert line == f'File "{tmp_path / "usermod.py"}", line 4, in forward: y = torch.relu(x)'


def test_source_line_of_a_frame_without_source_text():
    from fxpasses.context import user_source_line

    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["stack_trace"] = (
        '  File "<stdin>", line 12, in forward\n'
        '  File "/site-packages/torch/fx/proxy.py", line 800, in __torch_function__\n'
        "    return tracer.create_proxy()\n"
    )
    assert user_source_line(x) == 'File "<stdin>", line 12, in forward'


def test_a_model_without_a_source_file_has_no_user_line_rather_than_torchs():
    """A model defined in ``python -c``, ``exec`` or the REPL leaves only torch's frames in
    the trace symbolic_trace records: the error named torch's proxy.py as the "user code"."""
    from fxpasses.context import no_source_line_reason, user_source_line

    ns: dict = {}
    exec(
        compile(
            "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x) + 1\n",
            "<string>",
            "exec",
        ),
        ns,
    )
    gm = capture(ns["M"](), [torch.ones(2)], "symbolic_trace").gm
    relu = next(n for n in gm.graph.nodes if n.target is torch.relu)
    assert "torch/fx/proxy.py" in relu.meta["stack_trace"]
    assert user_source_line(relu) is None
    assert no_source_line_reason(relu).startswith("its recorded stack trace has only torch's")

    class Fails(fxpasses.NodePass):
        name = "fails_at_relu"

        @fxpasses.on("relu")
        def relu(self, node, ctx):
            raise RuntimeError("boom")

    reg = Registry(autoload=False)
    reg.register(Fails)
    with pytest.raises(PassFailedError) as info:
        Pipeline(["fails_at_relu"], registry=reg).run(gm, [torch.ones(2)])
    assert (
        "  user code: unknown (its recorded stack trace has only torch's, fxpasses' and the standard library's "
        "frames: code without a source file, such as a model defined in python -c, exec or the REPL, leaves none)"
    ) in str(info.value).splitlines()
    assert "proxy.py" not in str(info.value)


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_source_line_of_a_model_from_an_installed_library_names_its_line_and_the_callers(tmp_path, monkeypatch, dialect):
    """A model in an installed package (a Hugging Face model, say) is the model's code: its
    line, not the user's wrapper around it, with the wrapper named as the caller."""
    import importlib

    from dists import forget_modules
    from fxpasses.context import user_source_line

    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "fakelib").mkdir(parents=True)
    (site / "fakelib" / "__init__.py").write_text(
        "import torch\n"
        "class Block(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        h = x * 2\n"
        "        return torch.relu(h)\n"
    )
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "usermodel.py").write_text(
        "import torch, fakelib\n"
        "class Wrapper(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.block = fakelib.Block()\n"
        "    def forward(self, x):\n"
        "        return self.block(x) + 1\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(tmp_path / "proj"))
    importlib.invalidate_caches()
    forget_modules("fakelib", "usermodel")
    try:
        import usermodel

        gm = capture(usermodel.Wrapper(), [torch.randn(3)], dialect).gm
        relu = next(n for n in gm.graph.nodes if "relu" in str(n.target))
        add = next(n for n in gm.graph.nodes if "add" in str(n.target))
        assert user_source_line(relu) == (
            f'File "{site / "fakelib" / "__init__.py"}", line 5, in forward: return torch.relu(h) '
            f'(called from File "{tmp_path / "proj" / "usermodel.py"}", line 7, in forward)'
        )
        # the user's own line alone where it is the innermost
        assert user_source_line(add) == f'File "{tmp_path / "proj" / "usermodel.py"}", line 7, in forward: return self.block(x) + 1'
    finally:
        forget_modules("fakelib", "usermodel")


def test_source_line_skips_torch_and_the_standard_library_by_where_they_are():
    """torch's and the standard library's frames are skipped, those of a trace recorded on
    another machine too (by the layout of their path); a user's folder named torch is not."""
    from fxpasses.context import user_source_line

    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["stack_trace"] = (
        '  File "/home/me/proj/model.py", line 30, in forward\n'
        "    return self.lm(ids)\n"
        '  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1775, in _call_impl\n'
        "    return forward_call(*args, **kwargs)\n"
        '  File "/opt/conda/lib/python3.11/site-packages/transformers/models/gpt2/modeling_gpt2.py", line 603, in forward\n'
        "    hidden_states = self.drop(hidden_states)\n"
        '  File "/usr/lib/python3.11/contextlib.py", line 81, in inner\n'
        "    return func(*args, **kwds)\n"
        '  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/dropout.py", line 73, in forward\n'
        "    return F.dropout(input, self.p, self.training, self.inplace)\n"
    )
    assert user_source_line(x) == (
        'File "/opt/conda/lib/python3.11/site-packages/transformers/models/gpt2/modeling_gpt2.py", line 603, '
        'in forward: hidden_states = self.drop(hidden_states) (called from File "/home/me/proj/model.py", line 30, in forward)'
    )
    torch_dir = torch.__file__.rsplit("/", 1)[0]
    x.meta["stack_trace"] = (
        '  File "/home/me/torch/model.py", line 7, in forward\n'
        "    return self.act(x)\n"
        f'  File "{torch_dir}/nn/modules/activation.py", line 143, in forward\n'
        "    return F.relu(input, inplace=self.inplace)\n"
    )
    assert user_source_line(x) == 'File "/home/me/torch/model.py", line 7, in forward: return self.act(x)'


def test_per_entry_verify_and_on_error_override_the_pipeline_settings():
    model = convnet()
    x = torch.randn(1, 3, 32, 32)
    reg = Registry()
    reg.register(WrongRelu)
    expected = model(x)

    gm = capture(model, [x], "symbolic_trace").gm
    report = Pipeline(["wrong_relu", "remove_dropout"], registry=reg, verify="none").run(gm, [x])
    assert report["wrong_relu"].status == "ok"  # nothing checks it: the outputs are now wrong
    assert not torch.allclose(gm(x), expected)

    gm = capture(model, [x], "symbolic_trace").gm
    entries = [{"name": "wrong_relu", "verify": "numeric", "on_error": "skip"}, "remove_dropout"]
    report = Pipeline(entries, registry=reg, verify="none", on_error="raise").run(gm, [x])
    assert [(p.name, p.status) for p in report.passes] == [("wrong_relu", "skipped"), ("remove_dropout", "ok")]
    assert "verification failed: output: max abs error" in report["wrong_relu"].error
    assert torch.allclose(gm(x), expected, atol=1e-6)

    gm = capture(model, [x], "symbolic_trace").gm
    entries = [{"name": "wrong_relu", "verify": "numeric", "on_error": "raise"}]
    with pytest.raises(PassFailedError) as info:
        Pipeline(entries, registry=reg, verify="none", on_error="skip").run(gm, [x])
    assert not info.value.rolled_back


def test_graph_module_meta_is_restored():
    class Scribbler(fxpasses.GraphPass):
        """Writes gm.meta, then fails."""

        name = "scribbler"

        def run(self, gm, ctx):
            gm.meta["junk"] = 1
            gm.meta.pop("keep", None)
            raise RuntimeError("fails after writing meta")

    gm = torch.fx.symbolic_trace(torch.nn.ReLU())
    gm.meta["keep"] = "yes"
    meta = gm.meta
    reg = Registry(autoload=False)
    reg.register(Scribbler)
    with pytest.raises(PassFailedError):
        Pipeline(["scribbler"], registry=reg).run(gm, [torch.ones(1)])
    assert gm.meta is meta and gm.meta == {"keep": "yes"}


def test_on_error_raise_recompiles_so_the_module_runs_the_kept_graph():
    class NegateThenFail(fxpasses.NodePass):
        """Turns the first relu into neg, then fails at the second."""

        name = "negate_then_fail"

        def setup(self, gm, ctx):
            self.seen = 0

        @fxpasses.on("relu")
        def relu(self, node, ctx):
            self.seen += 1
            if self.seen == 2:
                raise RuntimeError("second relu")
            return Replace(ctx.call_function(torch.neg, node.args))

    class Two(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x), torch.relu(x + 1)

    gm = torch.fx.symbolic_trace(Two())
    reg = Registry(autoload=False)
    reg.register(NegateThenFail)
    with pytest.raises(PassFailedError):
        Pipeline(["negate_then_fail"], registry=reg, on_error="raise").run(gm, [torch.ones(2)])
    assert "torch.neg" in gm.code
    assert torch.equal(gm(torch.ones(2))[0], -torch.ones(2))


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_built_in_passes_that_declare_no_tensor_writes_write_none(dialect):
    """Run every built-in pass that declares writes_tensors=False under the write guard anyway,
    on a model with conv + batch norm, dropout and constants: nothing may be written."""
    from fxpasses.context import PassContext
    from fxpasses.registry import registry
    from fxpasses.runner import run_pass
    from fxpasses.snapshot import Snapshot

    model = convnet()
    x = torch.randn(2, 3, 32, 32)
    reg = registry()
    names = [n for n in reg.names() if reg.get(n).__module__.startswith("fxpasses.builtin_passes")]
    quiet = [n for n in names if not reg.get(n).writes_tensors]
    assert {"fuse_conv_bn", "eliminate_dead_code", "simplify_algebra", "remove_dropout"} <= set(quiet)
    cap = capture(model, [x], dialect)
    gm = cap.gm
    options = {"rename_nodes": {"pattern": "relu", "replacement": "act"}}
    for name in quiet:
        cls = reg.get(name)
        snap = Snapshot(gm)
        ctx = PassContext(gm, pass_name=name, dialect=dialect, example_inputs=cap.inputs)
        with snap.guard():
            run_pass(cls(cls.Options(**options.get(name, {}))), gm, ctx)
        assert not snap.write_guard.saved, (name, snap.write_guard.saved)
        assert not snap.modified_tensors(), (name, snap.modified_tensors())
    gm.recompile()
    out = gm(*cap.inputs)
    out = out[0] if isinstance(out, (tuple, list)) else out  # dynamo graphs return a tuple
    torch.testing.assert_close(out, model(x))


class LayoutChanger(fxpasses.GraphPass):
    """Moves buffers off their shared storage and turns gradients off, then fails."""

    name = "layout_changer"

    def run(self, gm, ctx):
        gm.a.set_(torch.zeros(3))
        gm.b.resize_(5)
        gm.c.unsqueeze_(0)
        for p in gm.parameters():
            p.requires_grad_(False)
        raise RuntimeError("planted failure")


class SharedStorage(torch.nn.Module):
    def __init__(self):
        super().__init__()
        base = torch.arange(9.0)
        self.register_buffer("a", base[:3])
        self.register_buffer("b", base[3:6])
        self.register_buffer("c", base[6:])
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x + self.a + self.b + self.c)


@pytest.mark.parametrize("snapshot_tensors", [False, True])
def test_rollback_puts_tensors_back_on_their_storage_and_restores_requires_grad(snapshot_tensors):
    model = SharedStorage()
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(2, 3)
    reg = Registry(autoload=False)
    reg.register(LayoutChanger)
    storage = gm.a.untyped_storage().data_ptr()
    layout = {k: (v.shape, v.stride(), v.storage_offset()) for k, v in gm.named_buffers()}
    values = {k: v.clone() for k, v in gm.named_buffers()}
    with pytest.raises(PassFailedError, match="planted failure") as info:
        Pipeline(["layout_changer"], registry=reg, snapshot_tensors=snapshot_tensors).run(gm, [x])
    assert "could not be restored" not in str(info.value)
    for k, v in gm.named_buffers():
        assert v.untyped_storage().data_ptr() == storage, k  # views of one storage again
        assert (v.shape, v.stride(), v.storage_offset()) == layout[k], k
        assert torch.equal(v, values[k]), k
    assert all(p.requires_grad for p in gm.parameters())
    torch.testing.assert_close(gm(x), model(x))


class GradChanger(fxpasses.GraphPass):
    """Sets, replaces and clears gradients, then fails."""

    name = "grad_changer"

    def run(self, gm, ctx):
        gm.lin.weight.grad = torch.ones_like(gm.lin.weight)  # had none
        gm.lin.bias.grad = torch.zeros_like(gm.lin.bias)  # replaces the user's
        gm.a.grad = None  # clears a buffer's
        raise RuntimeError("planted failure")


@pytest.mark.parametrize("snapshot_tensors", [False, True])
def test_rollback_restores_the_grad_of_each_tensor(snapshot_tensors):
    gm = torch.fx.symbolic_trace(SharedStorage())
    bias_grad = torch.full((3,), 7.0)
    buffer_grad = torch.full((3,), 5.0)
    gm.lin.bias.grad = bias_grad
    gm.a.grad = buffer_grad
    reg = Registry(autoload=False)
    reg.register(GradChanger)
    with pytest.raises(PassFailedError, match="planted failure") as info:
        Pipeline(["grad_changer"], registry=reg, snapshot_tensors=snapshot_tensors).run(gm, [torch.randn(2, 3)])
    assert info.value.rolled_back
    assert gm.lin.weight.grad is None
    assert gm.lin.bias.grad is bias_grad and torch.equal(bias_grad, torch.full((3,), 7.0))
    assert gm.a.grad is buffer_grad


def test_a_snapshot_records_no_grad_for_a_non_leaf_tensor_attribute_and_warns_nothing(recwarn):
    class NonLeaf(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.t = torch.ones(3, requires_grad=True) * 2  # a tensor attribute with a grad_fn

        def forward(self, x):
            return x * self.t

    gm = torch.fx.symbolic_trace(NonLeaf())
    assert not gm.t.is_leaf
    snap = Snapshot(gm)
    snap.restore()
    assert snap.tensor_grad_values == [None]
    assert [str(w.message) for w in recwarn if ".grad attribute" in str(w.message)] == []


class DataRebinder(fxpasses.GraphPass):
    name = "data_rebinder"

    def run(self, gm, ctx):
        gm.a.data = torch.zeros(3)
        raise RuntimeError("planted failure")


def test_rebound_data_goes_back_to_the_shared_storage_with_tensor_snapshot():
    gm = torch.fx.symbolic_trace(SharedStorage())
    reg = Registry(autoload=False)
    reg.register(DataRebinder)
    storage = gm.b.untyped_storage().data_ptr()
    with pytest.raises(PassFailedError) as info:
        Pipeline(["data_rebinder"], registry=reg, snapshot_tensors=True).run(gm, [torch.randn(2, 3)])
    assert "could not be restored" not in str(info.value)
    assert gm.a.untyped_storage().data_ptr() == storage
    assert torch.equal(gm.a, torch.arange(3.0))


class ReluOut(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


class ReluToSum(fxpasses.NodePass):
    """relu(x) -> x.sum(): wrong, and the output's shape changes (no values to compare)."""

    name = "relu_to_sum"

    @fxpasses.on("relu")
    def relu(self, node, ctx):
        with ctx.inserting_before(node):
            total = ctx.create_node("call_method", "sum", (node.args[0],))
        return Replace(total)


def test_a_shape_change_is_said_as_such_not_as_max_abs_error_0():
    """Notes about outputs an unverified pass changed said "(max abs error 0)" where the
    output's shape had changed and no value was compared (a pass-author check found the same
    in assert_preserves_outputs): the mismatch itself is said instead."""
    from fxpasses.verify import compare_outputs

    x = torch.randn(4, 4)
    cmp = compare_outputs(x.sum(), x, 1e-5, 1e-5)
    assert (cmp.message, cmp.values_compared, cmp.error_figure()) == ("output: shape changed from (4, 4) to ()", False, None)
    cmp = compare_outputs([x, x + 1], [x, x], 1e-5, 1e-5)
    assert cmp.values_compared and cmp.error_figure() == "max abs error 1"
    cmp = compare_outputs([x, x[:2]], [x + 1e-3, x], 1e-2, 0.0)  # (the first leaf's error is no figure for both)
    assert not cmp.values_compared and cmp.error_figure() is None
    assert compare_outputs(x, x, 0.0, 0.0).error_figure() == "max abs error 0"
    reg = Registry()
    reg.register(ReluToSum)
    gm = torch.fx.symbolic_trace(ReluOut())
    with pytest.raises(PassFailedError) as info:
        Pipeline.from_string(
            "relu_to_sum[verify=none],rename_nodes{pattern=mul,replacement=m}[verify=numeric]", registry=reg, verify="none"
        ).run(gm, [x])
    msg = str(info.value)
    assert "already differed from the module before the pipeline before this pass (output: shape changed from (4, 4) to ())" in msg
    assert "max abs error 0" not in msg


def test_numeric_failure_after_unverified_passes_names_the_culprits():
    reg = Registry()
    reg.register(WrongRelu)
    x = torch.randn(4, 4)
    gm = torch.fx.symbolic_trace(ReluOut())
    text = "wrong_relu[verify=none],rename_nodes{pattern=mul,replacement=m}[verify=numeric]"
    with pytest.raises(PassFailedError, match="verification failed") as info:
        Pipeline.from_string(text, registry=reg, verify="none").run(gm, [x])
    msg = str(info.value)
    assert "already differed from the module before the pipeline before this pass" in msg
    assert "without numeric verification (wrong_relu)" in msg
    # the pass that broke the outputs is named as such when it is the one verified
    gm = torch.fx.symbolic_trace(ReluOut())
    with pytest.raises(PassFailedError) as info:
        Pipeline.from_string(
            "rename_nodes{pattern=mul,replacement=m}[verify=none],wrong_relu[verify=numeric]", registry=reg
        ).run(gm, [x])
    assert "before this pass the outputs still matched" in str(info.value)
    assert "'wrong_relu' failed" in str(info.value)
    # kept for debugging (on_error=raise): the earlier passes are named as suspects
    gm = torch.fx.symbolic_trace(ReluOut())
    with pytest.raises(PassFailedError) as info:
        Pipeline.from_string(text, registry=reg, verify="none", on_error="raise").run(gm, [x])
    assert "the difference may come from them" in str(info.value) and "(wrong_relu)" in str(info.value)


class WeightWritingAnalysis(fxpasses.GraphPass):
    name = "weight_writing_analysis"
    kind = "analysis"

    def run(self, gm, ctx):
        with torch.no_grad():
            gm.fc.weight.mul_(2)


def test_analysis_that_writes_tensors_is_told_so():
    model = convnet()
    gm = capture(model, [torch.randn(1, 3, 32, 32)], "symbolic_trace").gm
    reg = Registry(autoload=False)
    reg.register(WeightWritingAnalysis)
    weight = gm.fc.weight.detach().clone()
    with pytest.raises(PassFailedError, match=r"changed the module \(tensors written in place: 'fc.weight'\)"):
        Pipeline(["weight_writing_analysis"], registry=reg).run(gm)
    assert torch.equal(gm.fc.weight, weight)


class ModuleEditingAnalysis(fxpasses.GraphPass):
    """An analysis that edits the module tree in one of several ways (``how``)."""

    name = "module_editing_analysis"
    kind = "analysis"
    how = ""

    def run(self, gm, ctx):
        if self.how == "attribute":
            gm.fc.cache = [1]
        elif self.how == "rebind":
            gm.fc.training = not gm.fc.training
        elif self.how == "parameter":
            gm.fc.weight = torch.nn.Parameter(gm.fc.weight.detach().clone())
        elif self.how == "submodule":
            del gm._modules["fc"]
        elif self.how == "buffer":
            gm.register_buffer("extra", torch.zeros(1))
        elif self.how == "hook":
            gm.fc.register_forward_hook(lambda *a: None)
        elif self.how == "class":
            gm.fc.__class__ = type("Linear2", (torch.nn.Linear,), {})
        elif self.how == "requires_grad":
            gm.fc.bias.requires_grad_(not gm.fc.bias.requires_grad)


@pytest.mark.parametrize(
    "how, said",
    [
        ("attribute", "submodule 'fc': attribute 'cache' added"),
        ("rebind", "submodule 'fc': attribute 'training' rebound"),
        ("parameter", "submodule 'fc': parameter 'weight' rebound"),
        ("submodule", "the root module: submodule 'fc' removed"),
        ("buffer", "the root module: buffer 'extra' added"),
        ("hook", "submodule 'fc': its hooks changed"),
        ("class", "submodule 'fc': its class changed from Linear to Linear2"),
        ("requires_grad", "requires_grad changed on 'fc.bias'"),
    ],
)
def test_analysis_that_edits_the_module_is_told_what_it_changed(how, said):
    """The error names the submodule and the entry an analysis changed, and rollback undoes it."""
    model = convnet()
    gm = capture(model, [torch.randn(1, 3, 32, 32)], "symbolic_trace").gm
    reg = Registry(autoload=False)
    cls = type("Editing", (ModuleEditingAnalysis,), {"how": how})
    reg.register(cls)
    code, fc, flags = gm.code, gm.fc, [p.requires_grad for p in gm.parameters()]
    with pytest.raises(PassFailedError) as info:
        Pipeline(["module_editing_analysis"], registry=reg).run(gm)
    assert f"analysis pass 'module_editing_analysis' changed the module ({said})" in str(info.value)
    assert gm.fc is fc and type(gm.fc) is torch.nn.Linear and "cache" not in vars(gm.fc)
    assert not gm.fc._forward_hooks and "extra" not in gm._buffers and gm.code == code
    assert [p.requires_grad for p in gm.parameters()] == flags


class _GraphEditingAnalysis(fxpasses.GraphPass):
    """An analysis that removes the relu it was meant to count (an author's mistake)."""

    name = "graph_editing_analysis"
    kind = "analysis"

    def run(self, gm, ctx):
        for node in list(gm.graph.nodes):
            if node.op == "call_function" and node.target is torch.relu:
                node.replace_all_uses_with(node.args[0])
                gm.graph.erase_node(node)
        return False


def test_analysis_that_edits_the_graph_is_told_which_nodes_and_what_to_do():
    """It said `analysis pass 'x' changed the graph` and no more, where a transform failing
    its verification names the nodes it changed; now the nodes and what an analysis may do."""

    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x).neg()

    gm = torch.fx.symbolic_trace(Net())
    code = gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([_GraphEditingAnalysis]).run(gm, [torch.randn(3)])
    assert str(info.value).splitlines()[0] == (
        "pass 'graph_editing_analysis' failed: verification failed: analysis pass 'graph_editing_analysis' changed "
        "the graph (%relu (erased), %neg (edited)): an analysis (kind = \"analysis\") leaves the graph and module as "
        "they are and hands its result over in ctx.analyses; a pass meant to rewrite is a transform "
        "(kind = \"transform\", the default)"
    )
    assert gm.code == code


#: a subprocess's pass that writes a weight under the guard (compiling a write too, with
#: ``W.compiled``) and fails; ``restored()`` runs it and says whether rollback put the weight back
_WRITE_THEN_FAIL = """
class W(fxpasses.GraphPass):
    name = "w"
    compiled = False
    def run(self, gm, ctx):
        with torch.no_grad():
            gm.weight.mul_(2)
            if self.compiled:
                torch.compile(lambda t: t.mul_(3), backend="eager")(gm.weight)
        raise RuntimeError("planted")
def restored():
    gm = torch.fx.symbolic_trace(torch.nn.Linear(3, 3))
    w = gm.weight.detach().clone()
    try:
        fxpasses.Pipeline([W]).run(gm, [torch.randn(2, 3)])
    except fxpasses.PassFailedError:
        pass
    return torch.equal(gm.weight, w)
"""


def test_write_guard_does_not_import_torchdynamo():
    """The guard keeps TorchDynamo out of its dispatch without importing it (about 1 s)."""
    import subprocess
    import sys

    code = "import sys, torch, fxpasses\n" + _WRITE_THEN_FAIL + 'print(restored(), "torch._dynamo" in sys.modules)\n'
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False"]


def test_write_guard_runs_its_plain_dispatch_while_torchdynamo_is_idle():
    """With TorchDynamo imported (after an export or a compile) but no frame hook installed,
    the guard's dispatch is the plain method (the disabled function would only set the hook to
    None around each operator); inside a compiled call it is the disabled one. Writes are
    restored either way."""
    import subprocess
    import sys

    code = """
import sys, torch, torch._dynamo, fxpasses
made = []
real_disable = torch._dynamo.disable
def counting(*a, **k):
    made.append(1)
    return real_disable(*a, **k)
torch._dynamo.disable = counting
""" + _WRITE_THEN_FAIL + """
for compiled in (False, True):
    W.compiled = compiled
    print(restored(), len(made) > 0)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False", "True", "True"]


class CompilesInside(fxpasses.GraphPass):
    """Exports and compiles code while the write guard is on, writes a weight, then fails."""

    name = "compiles_inside"

    def run(self, gm, ctx):
        lin = torch.nn.Linear(3, 3)
        x = torch.randn(2, 3)
        ep = torch.export.export(lin, (x,))
        torch.testing.assert_close(ep.module()(x), lin(x))
        f = torch.compile(lambda t: torch.sin(t) + 1, backend="eager")
        torch.testing.assert_close(f(x), torch.sin(x) + 1)
        with torch.no_grad():
            gm.weight.mul_(2)
        raise RuntimeError("planted failure")


def test_export_and_torch_compile_work_inside_a_guarded_pass():
    gm = torch.fx.symbolic_trace(torch.nn.Linear(3, 3))
    weight = gm.weight.detach().clone()
    with pytest.raises(PassFailedError, match="planted failure"):
        Pipeline([CompilesInside]).run(gm, [torch.randn(2, 3)])
    assert torch.equal(gm.weight, weight)


class Calibrate(fxpasses.GraphPass):
    """An analysis that calls the module (eval-mode batch norm reads its statistics)."""

    name = "calibrate"
    kind = "analysis"

    def run(self, gm, ctx):
        with torch.no_grad():
            gm(*ctx.example_inputs)
        return False


def test_eval_mode_batch_norm_is_not_a_write():
    """aten.native_batch_norm writes its running statistics only with training=True."""
    model = convnet().eval()
    x = torch.randn(1, 3, 32, 32)
    for dialect in ("symbolic_trace", "export"):
        cap = capture(model, [x], dialect)
        report = Pipeline([Calibrate]).run(cap.gm, cap.inputs)
        assert [(p.status, p.changed) for p in report.passes] == [("ok", False)], dialect
    bn = torch.nn.BatchNorm1d(2)
    guard = fxpasses.write_guard.WriteGuard({"mean": bn.running_mean, "var": bn.running_var})
    with guard, torch.no_grad():
        torch.nn.functional.batch_norm(torch.randn(4, 2), bn.running_mean, bn.running_var, training=False)
    assert guard.saved == {}
    with guard, torch.no_grad():
        torch.nn.functional.batch_norm(torch.randn(4, 2), bn.running_mean, bn.running_var, training=True)
    assert set(guard.saved) == {"mean", "var"}


def test_numeric_verification_runs_are_not_blamed_on_the_failing_pass():
    """Numeric verification runs the module after the pass; in training mode that updates
    batch norm's running statistics (put back afterwards, bumping their versions). A pass
    that fails verification must be reported for what *it* wrote: nothing here, so no
    "could not be restored" note, and the statistics are as before."""

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = torch.nn.BatchNorm1d(4)

        def forward(self, x):
            return torch.relu(self.bn(x))

    torch.manual_seed(0)
    model = Net().train()
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(8, 4)
    reg = Registry(autoload=False)
    reg.register(WrongRelu)
    stats = {k: v.clone() for k, v in gm.state_dict().items()}
    with pytest.raises(PassFailedError, match="verification failed") as info:
        Pipeline(["wrong_relu"], registry=reg, verify="numeric").run(gm, [x])
    assert "could not be restored" not in str(info.value), str(info.value)
    assert info.value.rolled_back
    for k, v in gm.state_dict().items():
        assert torch.equal(v, stats[k]), k


class _Opaque:
    """An object whose repr() is not Python (``<...Opaque object at 0x...>``)."""


class ClampWithObject(fxpasses.NodePass):
    """relu(x) -> clamp(x, min=<object>): a graph FX cannot write as code."""

    name = "clamp_with_object"
    writes_tensors = False

    @fxpasses.on("relu")
    def relu(self, node, ctx):
        return Replace(ctx.call_function(torch.clamp, (node.args[0],), {"min": _Opaque()}))


def _odd_return(value):
    class OddReturn(fxpasses.GraphPass):
        """Rewrites relu -> sigmoid, then returns ``value`` as its "changed" answer."""

        name = "odd_return"

        def run(self, gm, ctx):
            for n in gm.graph.nodes:
                if n.target is torch.relu:
                    n.target = torch.sigmoid
            return value

    return OddReturn


class _Relu(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1


@pytest.mark.parametrize(
    "pass_cls, match",
    [
        (ClampWithObject, r"node %clamp has an argument the generated code cannot spell: <.*_Opaque object"),
        (_odd_return(np.array([1, 2])), r"the pass returned ndarray array\(\[1, 2\]\), not True \(changed\)"),
        (_odd_return(torch.ones(2)), r"the pass returned Tensor tensor\(\[1., 1.\]\), not True"),
    ],
)
@pytest.mark.parametrize("verify", ["lint", "numeric"])
def test_any_failure_after_the_pass_rolls_it_back_and_names_it(pass_cls, match, verify):
    """Whatever goes wrong between the pass and the end of its verification (an argument the
    code generator cannot write, a return value that is not a truth value, ...) is the pass's
    failure: a PassFailedError naming it, the graph rolled back, and on_error honoured."""
    x = torch.randn(4)
    gm = torch.fx.symbolic_trace(_Relu())
    before = state(gm)
    reg = Registry(autoload=False)
    reg.register(pass_cls)
    with pytest.raises(PassFailedError, match=match) as info:
        Pipeline([pass_cls.name], registry=reg, verify=verify).run(gm, [x])
    assert info.value.pass_name == pass_cls.name and info.value.rolled_back
    assert_same_state(before, state(gm))
    torch.testing.assert_close(gm(x), torch.relu(x) + 1)
    # on_error="skip": reported, undone, and the pipeline goes on
    reg.register(WrongRelu)
    report = Pipeline([pass_cls.name, "wrong_relu"], registry=reg, verify=verify, on_error="skip").run(gm, [x]) if verify == "lint" else None
    if report is not None:
        assert report[pass_cls.name].status == "skipped" and report["wrong_relu"].changed
        torch.testing.assert_close(gm(x), x + 1)  # wrong_relu ran after the skipped pass


def test_arguments_the_graph_had_before_are_not_blamed_on_the_pass():
    """A node that already held an argument FX writes badly (here a tensor literal) before the
    pipeline is the input's doing: a pass that changes something else is not failed for it."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    odd = g.call_function(torch.add, (x, torch.ones(1)))  # a tensor literal in the arguments
    g.call_function(torch.neg, (x,))  # dead
    g.output(odd)
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    report = Pipeline(["eliminate_dead_code"]).run(gm, [torch.randn(3)])
    assert report["eliminate_dead_code"].changed and report["eliminate_dead_code"].status == "ok"
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [torch.add]


def test_verify_none_names_the_changing_passes_when_the_final_code_does_not_compile():
    reg = Registry(autoload=False)
    reg.register(ClampWithObject)
    gm = torch.fx.symbolic_trace(_Relu())
    with pytest.raises(fxpasses.errors.VerificationError, match=r"does not compile: SyntaxError.*passes that changed it: clamp_with_object"):
        Pipeline(["clamp_with_object"], registry=reg, verify="none").run(gm, [torch.randn(4)])


class _Interrupting(fxpasses.NodePass):
    """Rewrites relu -> sigmoid, then is interrupted (Ctrl-C) at the next node."""

    name = "interrupting"

    @fxpasses.on("relu")
    def relu(self, node, ctx):
        node.target = torch.sigmoid
        return None

    @fxpasses.on("add")
    def add(self, node, ctx):
        raise KeyboardInterrupt


@pytest.mark.parametrize("on_error", ["rollback", "skip", "raise"])
def test_an_interrupted_pass_is_rolled_back_and_the_interrupt_goes_on(on_error):
    gm = torch.fx.symbolic_trace(_Relu())
    before = state(gm)
    reg = Registry(autoload=False)
    reg.register(_Interrupting)
    with pytest.raises(KeyboardInterrupt) as info:
        Pipeline(["interrupting"], registry=reg, on_error=on_error).run(gm, [torch.randn(4)])
    if on_error == "raise":  # kept as the pass left it, for debugging
        assert any(n.target is torch.sigmoid for n in gm.graph.nodes)
        return
    assert_same_state(before, state(gm))
    assert any("'interrupting' was interrupted; the graph was rolled back" in n for n in getattr(info.value, "__notes__", []))


def test_outputs_that_cannot_be_compared_are_the_users_error_not_the_pass():
    """Numeric verification on meta tensors cannot compare values: a UserError saying so, and
    the pass (which did nothing wrong) is undone rather than blamed."""
    gm = torch.fx.symbolic_trace(_Relu())
    before = state(gm)
    reg = Registry(autoload=False)
    reg.register(WrongRelu)
    with pytest.raises(fxpasses.errors.UserError, match="numeric verification cannot compare the module's outputs") as info:
        Pipeline(["wrong_relu"], registry=reg, verify="numeric").run(gm, [torch.randn(4, device="meta")])
    assert not isinstance(info.value, PassFailedError)
    assert_same_state(before, state(gm))
    # the module runs the restored graph, not the code numeric verification compiled
    assert gm.code == gm.graph.python_code("self").src
    x = torch.randn(4)
    torch.testing.assert_close(gm(x), torch.relu(x) + 1)


def _identity(x, extra=None):
    return x


class _Color(enum.Enum):
    RED = 1


_Pair = collections.namedtuple("_Pair", "a b")


@dataclasses.dataclass
class _Cfg:
    a: int


def _with_extra(value):
    class AddExtra(fxpasses.NodePass):
        """relu(x) -> relu(_identity(x, extra=value))."""

        name = "add_extra"
        writes_tensors = False

        @fxpasses.on("relu")
        def relu(self, node, ctx):
            if node.args[0].op == "call_function" and node.args[0].target is _identity:
                return None
            with ctx.inserting_before(node):
                wrapped = ctx.call_function(_identity, (node.args[0],), {"extra": value})
            node.replace_input_with(node.args[0], wrapped)  # an edit FX tells the journal of
            return None

    return AddExtra


_UNWRITABLE = {
    "enum in a dict": {"k": _Color.RED},
    "overload in a dict": {"op": torch.ops.aten.add.Tensor},
    "enum in a named tuple": _Pair(_Color.RED, 2),
    "dict in a list": [{"k": _Color.RED}],
    "numpy scalar": np.float64(1.5),
    "dataclass": _Cfg(1),
    "lambda": lambda: 1,
    "tensor": torch.ones(1),
}
_WRITABLE = {
    "enum": _Color.RED,
    "named tuple": _Pair(1, 2.5),
    "slice": slice(1, None),
    "dtype and device": (torch.float32, torch.device("cpu")),
    "set": {1, 2},
    "dict": {"a": 1.5, "b": [None, "s"]},
    "size": torch.Size([2, 3]),
    "inf": float("-inf"),
    "range": range(3),
}


@pytest.mark.parametrize("journal_edits", [False, True], ids=["snapshot", "journaled"])
@pytest.mark.parametrize("value", _UNWRITABLE.values(), ids=_UNWRITABLE.keys())
def test_arguments_fx_cannot_write_back_fail_the_pass_at_lint(value, journal_edits):
    """FX writes what it does not know as ``repr()``: inside a dict or a named tuple's fields
    even an enum is ``<_Color.RED: 1>``, and a numpy scalar or a dataclass names something the
    generated code never imports. The pass that put them there fails at its lint (a journaled
    first pass too, whose arguments are checked only at the nodes it touched)."""
    pass_cls = _with_extra(value)
    pass_cls.journal_edits = journal_edits
    reg = Registry(autoload=False)
    reg.register(pass_cls)
    gm = torch.fx.symbolic_trace(_Relu())
    before = state(gm)
    with pytest.raises(PassFailedError, match="node %_identity has an argument the generated code cannot spell"):
        Pipeline(["add_extra"], registry=reg).run(gm, [torch.randn(4)])
    assert_same_state(before, state(gm))


@pytest.mark.parametrize("value", _WRITABLE.values(), ids=_WRITABLE.keys())
def test_arguments_fx_writes_back_pass_lint_and_run(value):
    reg = Registry(autoload=False)
    reg.register(_with_extra(value))
    gm = torch.fx.symbolic_trace(_Relu())
    x = torch.randn(4)
    report = Pipeline(["add_extra"], registry=reg).run(gm, [x])
    assert report["add_extra"].changed
    (node,) = gm.graph.find_nodes(op="call_function", target=_identity)
    assert node.kwargs["extra"] == value
    torch.testing.assert_close(gm(x), torch.relu(x) + 1)


def test_a_value_the_node_already_held_is_not_blamed_when_the_pass_rewires_it():
    """Replacing an input of a node rebuilds its arguments; a tensor literal it already held
    is still the input graph's, not the pass's."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    r = g.call_function(torch.relu, (x,))
    literal = torch.ones(1)
    g.output(g.call_function(torch.add, (r, literal)))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    reg = Registry(autoload=False)
    reg.register(WrongRelu)
    report = Pipeline(["wrong_relu"], registry=reg).run(gm, [torch.randn(3)])
    assert report["wrong_relu"].changed
    (add,) = gm.graph.find_nodes(op="call_function", target=torch.add)
    assert add.args[0] is x and add.args[1] is literal


@pytest.mark.parametrize("value", ["no", [1], 1.5, object()], ids=["str", "list", "float", "object"])
def test_a_run_that_returns_something_else_than_a_truth_value_fails(value):
    reg = Registry(autoload=False)
    reg.register(_odd_return(value))
    gm = torch.fx.symbolic_trace(_Relu())
    before = state(gm)
    with pytest.raises(PassFailedError, match=r"the pass returned \w+ .*, not True \(changed\), False \(unchanged\) or None"):
        Pipeline(["odd_return"], registry=reg).run(gm, [torch.randn(4)])
    assert_same_state(before, state(gm))


@pytest.mark.parametrize("value", [True, 3, np.bool_(True)], ids=["bool", "count", "numpy bool"])
def test_a_run_may_return_a_bool_a_count_or_numpys_bool(value):
    reg = Registry(autoload=False)
    reg.register(_odd_return(value))
    gm = torch.fx.symbolic_trace(_Relu())
    report = Pipeline(["odd_return"], registry=reg).run(gm, [torch.randn(4)])
    assert report["odd_return"].changed and report["odd_return"].status == "ok"


class CountingScaleRelu(ScaleRelu):
    """ScaleRelu, counting each relu it scales."""

    name = "counting_scale_relu"

    @fxpasses.on("relu")
    def relu(self, node, ctx):
        ctx.count("scaled")
        return ScaleRelu.relu(self, node, ctx)


def test_a_rolled_back_pass_reports_its_counts_as_rolled_back_not_as_its_counters():
    """on_error="skip": the pass's changes are undone, so its counters (what it changed) are
    empty; what it had counted is kept apart, marked rolled back, in the report and tables."""
    model, x, gm, reg = traced_convnet(CountingScaleRelu)
    before = state(gm)
    report = Pipeline(["counting_scale_relu"], registry=reg, verify="numeric", on_error="skip").run(gm, [x])
    assert_same_state(before, state(gm))
    (p,) = report.passes
    assert p.status == "skipped" and p.counters == {} and p.rolled_back_counters == {"scaled": 2}
    assert p.as_dict()["rolled_back_counters"] == {"scaled": 2}
    lines = report.table().splitlines()
    assert lines[2].startswith("counting_scale_relu") and lines[2].endswith("rolled back: scaled=2")
    # why it was skipped, under the table (the error's first line), as the CLI prints it
    assert lines[-1] == "skipped: counting_scale_relu: " + p.error.splitlines()[0]
    assert p.error.startswith("pass 'counting_scale_relu' failed: verification failed: output: max abs error")
    assert list(report) == report.passes and len(report) == 1  # iterating a report gives its passes
    # a pass that succeeds: its counters, nothing rolled back
    ok = Pipeline(["counting_scale_relu"], registry=reg, verify="lint").run(gm, [x])
    assert ok.passes[0].counters == {"scaled": 2} and ok.passes[0].rolled_back_counters == {}


class _ZeroInputs(fxpasses.GraphPass):
    """Writes every example tensor it is handed in place, then fails or not."""

    name = "zero_inputs"
    fail = False
    seen: list = []

    def run(self, gm, ctx):
        type(self).seen.append((ctx.example_inputs, ctx.example_kwargs))
        for t in [*ctx.example_inputs, *ctx.example_kwargs.values()]:
            if not isinstance(t, torch.nn.Parameter):
                t.mul_(0)
        if self.fail:
            raise RuntimeError("planted")
        return False


class _TwoInputs(torch.nn.Module):
    def forward(self, x, w, *, y):
        return x * w + y


@pytest.mark.parametrize("fail", [False, True])
def test_a_pass_that_writes_its_example_inputs_leaves_the_callers_as_they_were(fail, monkeypatch):
    """A pass is handed copies of the example tensors (made when it first reads them): writing
    them in place, whether the pass then fails or not, leaves the caller's values, and the
    copies keep each tensor's layout (strides, storage offset) and which ones share storage.
    Parameters (a TorchDynamo graph's inputs are the model's) are handed as they are."""
    monkeypatch.setattr(_ZeroInputs, "fail", fail)
    _ZeroInputs.seen = []
    base = torch.randn(6, 4)
    x = base[1:, ::2]  # strides (4, 2), offset 4
    y = base[0]  # the same storage as x
    w = torch.nn.Parameter(torch.randn(2))
    given = (x.clone(), y.clone(), w.detach().clone())
    reg = Registry(autoload=False)
    reg.register(_ZeroInputs)
    gm = torch.fx.symbolic_trace(_TwoInputs())
    report = Pipeline(["zero_inputs"], registry=reg, on_error="skip").run(gm, [x, w], example_kwargs={"y": y})
    assert report.passes[0].status == ("skipped" if fail else "ok")
    assert torch.equal(x, given[0]) and torch.equal(y, given[1]) and torch.equal(w.detach(), given[2])
    (args, kwargs), = _ZeroInputs.seen
    cx, cw, cy = args[0], args[1], kwargs["y"]
    assert cx is not x and cy is not y and cw is w
    assert (cx.stride(), cx.storage_offset()) == ((4, 2), 4) and cx.untyped_storage().data_ptr() == cy.untyped_storage().data_ptr()
    assert not cx.any() and not cy.any()  # the pass wrote its copies


def test_example_input_copies_keep_the_mapping_types():
    """``ctx.example_kwargs`` nested mappings keep their type (an OrderedDict stays one, a
    defaultdict keeps its factory), and a named tuple stays one."""
    import collections

    seen = {}

    class Look(fxpasses.GraphPass):
        name = "look"

        def run(self, gm, ctx):
            seen["args"], seen["kwargs"] = ctx.example_inputs, ctx.example_kwargs
            return False

    class Takes(torch.nn.Module):
        def forward(self, x, *, m):
            return x + m["a"]

    od = collections.OrderedDict(a=torch.ones(2))
    dd = collections.defaultdict(list, a=torch.ones(2))
    Pair = collections.namedtuple("Pair", "p q")
    gm = torch.fx.symbolic_trace(Takes())
    Pipeline([Look]).run(gm, [Pair(torch.zeros(2), 1)], example_kwargs={"m": od})
    assert type(seen["kwargs"]["m"]) is collections.OrderedDict and seen["kwargs"]["m"]["a"] is not od["a"]
    assert type(seen["args"][0]) is Pair and seen["args"][0].q == 1
    from fxpasses._layout import LayoutCopies, copy_inputs

    out = copy_inputs(dd, LayoutCopies())
    assert type(out) is collections.defaultdict and out.default_factory is list and torch.equal(out["a"], dd["a"])



class _WriteInputs(fxpasses.GraphPass):
    """Writes the example inputs that are parameters in place, then fails or returns."""

    name = "write_inputs"

    class Options(fxpasses.PassOptions):
        fail: bool = True

    def run(self, gm, ctx):
        with torch.no_grad():
            for t in ctx.example_inputs:
                if isinstance(t, torch.nn.Parameter):
                    t.mul_(0)
        if self.options.fail:
            raise RuntimeError("after writing")
        return False


@pytest.mark.parametrize("fail", [True, False])
def test_a_pass_writing_the_example_inputs_in_place_is_named(fail):
    """Under TorchDynamo the model's parameters are graph inputs: a pass writing them in place
    changed the user's model and the error said only that the graph was restored. The write
    is detected (version counters) and named, whether the pass then failed or returned."""
    import fxpasses.capture

    model = torch.nn.Linear(4, 4)
    cap = fxpasses.capture.capture(model, [torch.randn(2, 4)], "dynamo")
    params = [i for i, t in enumerate(cap.inputs) if isinstance(t, torch.nn.Parameter)]
    assert params
    code = cap.gm.code
    with pytest.raises(PassFailedError) as info:
        Pipeline([(_WriteInputs, {"fail": fail})]).run(cap.gm, cap.inputs)
    wrote = (
        f"wrote the example input(s) {', '.join(f'input[{i}]' for i in params)} in place, which no rollback undoes: "
        "they are the caller's tensors (for a TorchDynamo graph, the model's parameters and buffers too); a pass "
        "must copy an input before changing it"
    )
    text = str(info.value)
    if fail:
        assert f"note: before it failed, the pass {wrote}" in text
    else:
        assert text.startswith(f"pass 'write_inputs' failed: verification failed: the pass {wrote}")
    assert info.value.rolled_back and cap.gm.code == code
    # a pass that reads them only is not blamed
    Pipeline(["eliminate_dead_code", ("propagate_shapes", {"mode": "real"})]).run(cap.gm, cap.inputs)


class _SigmoidOfRelu(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x)  # the relu line
        return torch.sigmoid(y) + 1  # the sigmoid line


def _line_of(marker):
    import inspect

    src, first = inspect.getsourcelines(_SigmoidOfRelu.forward)
    (i,) = [k for k, line in enumerate(src) if marker in line]
    return first + i


def _node_named(gm, fragment):
    (n,) = [n for n in gm.graph.nodes if n.op == "call_function" and fragment in str(n.target)]
    return n


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_a_whole_graph_pass_failing_in_a_torch_fx_call_names_that_calls_node(dialect):
    """A GraphPass failure named no node (found by a new-user check): the node a failing
    torch.fx call was about is named, with its user source line."""
    if dialect == "dynamo":
        torch._dynamo.reset()
    cap = capture(_SigmoidOfRelu(), [torch.randn(3)], dialect)
    gm, code = cap.gm, cap.gm.code
    relu = _node_named(gm, "relu")
    relu_name, relu_target = relu.name, fxpasses.context.describe_node(relu)["target"]

    class EraseInUse(fxpasses.GraphPass):
        name = "erase_in_use"

        def run(self, gm, ctx):
            gm.graph.erase_node(_node_named(gm, "relu"))
            return True

    with pytest.raises(PassFailedError) as info:
        Pipeline([EraseInUse]).run(gm, cap.inputs)
    err = info.value
    assert err.node["name"] == relu_name and err.node["target"] == relu_target and "erased" not in err.node
    assert err.source_line.startswith(f'File "{__file__}", line {_line_of("the relu line")}, in forward')
    assert str(err).splitlines()[1].startswith(f"  at node %{relu_name} (op=call_function, target={relu_target}")
    assert gm.code == code


def test_a_whole_graph_pass_failing_in_its_own_code_or_an_interpreter_names_what_is_known():
    gm = torch.fx.symbolic_trace(_SigmoidOfRelu())

    class Own(fxpasses.GraphPass):
        name = "own_error"

        def run(self, gm, ctx):
            for n in gm.graph.nodes:  # a node in a local variable is not the node at fault
                pass
            raise ValueError("the pass's own error")

    with pytest.raises(PassFailedError) as info:
        Pipeline([Own]).run(gm, [torch.randn(3)])
    assert info.value.node is None and info.value.source_line is None
    assert str(info.value).splitlines()[:3] == [
        "pass 'own_error' failed: ValueError: the pass's own error",
        f"  raised in the pass's code at {__file__}:{Own.run.__code__.co_firstlineno + 3}, in run",
        "  the graph was restored to its state before 'own_error'",
    ]

    class SetsNode(fxpasses.GraphPass):
        name = "sets_node"

        def run(self, gm, ctx):
            ctx.node = _node_named(gm, "sigmoid")
            raise ValueError("at the node it said")

    with pytest.raises(PassFailedError) as info:
        Pipeline([SetsNode]).run(gm, [torch.randn(3)])
    assert info.value.node["name"] == "sigmoid"


    class Interprets(fxpasses.GraphPass):
        name = "interprets"

        def run(self, gm, ctx):
            torch.fx.Interpreter(gm).run(torch.ones(3, dtype=torch.bool))  # relu of bool raises
            return False

    with pytest.raises(PassFailedError) as info:
        Pipeline([Interprets]).run(gm, [torch.randn(3)])
    assert info.value.node["name"] == "relu", str(info.value)  # the node the interpreter ran

    class Lints(fxpasses.GraphPass):
        name = "lints"

        def run(self, gm, ctx):
            relu = _node_named(gm, "relu")
            with gm.graph.inserting_before(relu):
                gm.graph.call_function(torch.neg, (relu,))  # a use before the definition
            gm.graph.lint()
            return True

    with pytest.raises(PassFailedError) as info:
        Pipeline([Lints]).run(gm, [torch.randn(3)])
    # the node lint is about (its check_arg(arg, n) is about n), not the argument it names
    assert info.value.node["name"] == "neg", str(info.value)

    class RenamesThenFails(fxpasses.GraphPass):
        name = "renames_then_fails"

        def run(self, gm, ctx):
            for n in gm.graph.nodes:
                n.name = n.name + "_x"
            ctx.node = _node_named(gm, "sigmoid")  # (by target)
            raise ValueError("after renaming")

    renamed = torch.fx.symbolic_trace(_SigmoidOfRelu())
    names = [n.name for n in renamed.graph.nodes]
    with pytest.raises(PassFailedError) as info:
        Pipeline([RenamesThenFails]).run(renamed, [torch.randn(3)])
    # described as the pass left it, with the name the restored graph has (only that was
    # named: a user looking for %sigmoid_x did not find it; found by a new-user check)
    assert info.value.node["name"] == "sigmoid_x" and info.value.node["name_after_rollback"] == "sigmoid"
    assert "at node %sigmoid_x (named %sigmoid again after the rollback) (op=call_function" in str(info.value)
    assert [n.name for n in renamed.graph.nodes] == names
    with pytest.raises(PassFailedError) as info:  # not restored: the name it has
        Pipeline([RenamesThenFails], on_error="raise").run(renamed, [torch.randn(3)])
    assert info.value.node["name"] == "sigmoid_x" and "name_after_rollback" not in info.value.node


@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo", "export"])
def test_a_module_that_no_longer_runs_names_the_node_whose_code_raised(dialect):
    """Numeric verification of a module that raises named neither the node nor what the
    pass changed (found by a new-user check)."""
    if dialect == "dynamo":
        torch._dynamo.reset()
    cap = capture(_SigmoidOfRelu(), [torch.randn(3)], dialect)
    gm, code = cap.gm, cap.gm.code
    sig = _node_named(gm, "sigmoid")
    relu_name, sig_name, sig_target = _node_named(gm, "relu").name, sig.name, fxpasses.context.describe_node(sig)["target"]

    class ToFloat(fxpasses.NodePass):
        name = "relu_to_float"

        @fxpasses.on("relu")
        def r(self, node, ctx):
            return Replace(3.0)

    with pytest.raises(PassFailedError) as info:
        Pipeline([ToFloat], verify="numeric").run(gm, cap.inputs)
    err = info.value
    assert err.reason.startswith("verification failed: the module no longer runs on the example inputs: ")
    assert err.node["name"] == sig_name and err.node["target"] == sig_target
    assert err.source_line.startswith(f'File "{__file__}", line {_line_of("the sigmoid line")}, in forward')
    assert f"'relu_to_float' changed these nodes: %{relu_name} (erased), %{sig_name} (edited)" in err.notes
    assert gm.code == code


@pytest.mark.parametrize("returned", [True, 1])
def test_an_analysis_returning_true_is_told_so_not_that_it_changed_the_module(returned):
    """An analysis that returned True, changing nothing, was told it "changed the module (its
    submodules, attributes, hooks or tensors)" (a new-user check)."""

    class SaysChanged(fxpasses.GraphPass):
        name = "says_changed"
        kind = "analysis"

        def run(self, gm, ctx):
            return returned

    gm = torch.fx.symbolic_trace(_Relu())
    with pytest.raises(PassFailedError) as info:
        Pipeline([SaysChanged]).run(gm, [torch.randn(4)])
    msg = str(info.value)
    assert f"analysis pass 'says_changed' returned {returned!r}, which says it changed the graph" in msg, msg
    assert "changed the module" not in msg


class _CollectingOptions(fxpasses.PassOptions):
    skip_names: list[str] = []
    limits: dict[str, int] = {}


@pytest.mark.parametrize("how", ["append", "item", "rebind"])
def test_a_pass_changing_its_options_fails_and_the_next_run_sees_them_as_configured(how):
    """Options are frozen, but a list or dict in them was not: a pass appending to one changed
    the configuration of every later run of the same pipeline (a new-user check)."""

    class Collects(fxpasses.GraphPass):
        name = "collects"
        Options = _CollectingOptions

        def run(self, gm, ctx):
            if how == "append":
                self.options.skip_names.append("relu")
            elif how == "item":
                self.options.limits["relu"] = 1
            else:
                self.options = _CollectingOptions(skip_names=["x"])
            return False

    for pipeline, instance in ((Pipeline([Collects]), None), (Pipeline([Collects()]), True)):
        for _ in range(2):  # the second run sees the options as configured
            gm = torch.fx.symbolic_trace(_Relu())
            with pytest.raises(PassFailedError) as info:
                pipeline.run(gm, [torch.randn(4)])
            msg = str(info.value)
            if how == "rebind":
                assert "the pass replaced its options (self.options)" in msg, msg
            else:
                field = "'skip_names' (now ['relu'])" if how == "append" else "'limits' (now {'relu': 1})"
                assert f"the pass changed its options in place: {field}" in msg, msg
            step = pipeline.plan().steps[0]
            options = step.instance.options if instance else step.options
            assert options.skip_names == [] and options.limits == {}, options


def test_options_holding_only_values_a_frozen_model_keeps_are_not_pictured():
    from fxpasses.passes import changed_option, options_state

    class Plain(fxpasses.PassOptions):
        k: int = 1
        names: tuple[str, ...] = ("a",)
        path: str = "x"

    assert options_state(Plain()) is None
    opts = _CollectingOptions(skip_names=["a"])
    state = options_state(opts)
    assert changed_option(opts, state) is None
    opts.skip_names[0] = "b"
    assert changed_option(opts, state) == "'skip_names' (now ['b'])"


class _CatOfTwo(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x.relu(), y.sigmoid()], 0)


class _SwapsCatItemPastFX(fxpasses.GraphPass):
    """Wrong: edits torch.cat's list in place with list.__setitem__ (FX's immutable_list
    refuses `lst[0] = ...`, but not this), and says nothing changed."""

    name = "swaps_cat_item"

    def run(self, gm, ctx):
        cat = next(n for n in gm.graph.nodes if n.target is torch.cat)
        list.__setitem__(cat.args[0], 0, cat.args[0][1])  # cat([sigmoid, sigmoid])
        return False


@pytest.mark.parametrize("on_error", ["rollback", "skip"])
def test_a_list_inside_arguments_edited_in_place_is_seen_and_rolled_back(on_error):
    """A pass that changed `torch.cat`'s argument list in place, past FX's refusal, failed
    numeric verification and was reported "restored to its state before", yet the list kept
    the edit; with on_error="skip" the run finished with the module computing something else
    (a new-user check). A snapshot records the items of the lists and dicts inside the nodes'
    arguments: such an edit is a change (verified), and a rollback puts the items back."""
    x, y = torch.randn(2, 4), torch.randn(2, 4)
    gm = torch.fx.symbolic_trace(_CatOfTwo())
    code, expected = gm.code, gm(x, y)
    pipeline = Pipeline([_SwapsCatItemPastFX, "eliminate_dead_code"], verify="numeric", on_error=on_error)
    if on_error == "rollback":
        with pytest.raises(PassFailedError, match="verification failed: output") as info:
            pipeline.run(gm, [x, y])
        assert info.value.rolled_back
    else:
        report = pipeline.run(gm, [x, y])
        assert [(p.name, p.status) for p in report.passes] == [("swaps_cat_item", "skipped"), ("eliminate_dead_code", "ok")]
    cat = next(n for n in gm.graph.nodes if n.target is torch.cat)
    assert [a.name for a in cat.args[0]] == ["relu", "sigmoid"]
    assert [u.name for u in cat.args[0][0].users] == ["cat"]  # (the use edges as they were)
    gm.recompile()
    assert gm.code == code
    torch.testing.assert_close(gm(x, y), expected)


class _Lin(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.neg(self.lin(x))


class _OneRewrite(fxpasses.NodePass):
    """neg(x) -> a new neg(x): one rewrite, which exhausts rewrite_limit=1."""

    name = "one_rewrite"
    journal_edits = True
    writes_tensors = False

    @fxpasses.on("neg")
    def neg(self, node, ctx):
        with ctx.graph.inserting_before(node):
            return Replace(ctx.graph.call_function(torch.neg, node.args))


class _RebindsWeight(fxpasses.GraphPass):
    """Gives a weight new data (no write guard sees it)."""

    name = "rebinds_weight"

    def run(self, gm, ctx):
        gm.lin.weight.data = torch.zeros(4, 4)
        return True


class _NumpyWrite(fxpasses.GraphPass):
    """Writes a weight through numpy (no version counter moves)."""

    name = "numpy_write"

    def run(self, gm, ctx):
        gm.lin.weight.detach().numpy()[...] = 0
        return True


def test_a_pass_the_rewrite_limit_kept_from_running_leaves_no_tensor_change_behind():
    """A pass the limit keeps from running is run once to see whether it would have rewritten
    anything, and undone. That probe took its own snapshot: it ignored snapshot_tensors and what
    it could not restore, so a weight rebound through .data stayed zeroed and the pass was
    reported "ok, unchanged" (a rollback-attack check)."""
    x = torch.randn(2, 4)
    gm = torch.fx.symbolic_trace(_Lin())
    w0 = gm.lin.weight.detach().clone()
    with pytest.raises(PassFailedError) as info:
        Pipeline([_OneRewrite, _RebindsWeight]).run(gm, example_inputs=[x], rewrite_limit=1)
    text = str(info.value)
    assert info.value.pass_name == "rebinds_weight"
    assert "the rewrite limit kept the pass from running" in text and "lin.weight" in text
    assert "could not be restored (run with snapshot_tensors=True to restore them): lin.weight" in text
    # with snapshot_tensors=True the probe restores what no guard sees, as the rollback does
    for cls in (_RebindsWeight, _NumpyWrite):
        gm = torch.fx.symbolic_trace(_Lin())
        w0 = gm.lin.weight.detach().clone()
        report = Pipeline([_OneRewrite, cls], snapshot_tensors=True).run(gm, example_inputs=[x], rewrite_limit=1)
        row = report.passes[-1]
        assert (row.name, row.status, row.changed) == (cls.name, "ok", False)
        assert torch.equal(gm.lin.weight, w0), cls.name


class _ArgsThenRaise(fxpasses.GraphPass):
    """Assigns a node's args (which a journal does not record), then raises ``exc``."""

    name = "args_then_raise"
    journal_edits = True
    writes_tensors = False
    exc: type = RuntimeError

    def run(self, gm, ctx):
        neg = next(n for n in gm.graph.nodes if n.op == "call_method")
        neg.args = (neg.args[0].args[0],)
        raise self.exc("stop")


class _ReluNeg(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x).neg()


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_an_interrupted_journaled_pass_is_put_back_as_a_failed_one_is(exc, monkeypatch):
    """Ctrl-C in a third-party journaled pass left its `node.args` edit in place (the failure
    path puts it back from the pass's node frame; the interrupt path skipped that) and said
    "rolled back" (a rollback-attack check)."""
    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", "0")  # (check mode would fail the wrong declaration)
    gm = torch.fx.symbolic_trace(_ReluNeg())
    x = torch.tensor([[-1.0, 2.0]])
    code, out = gm.code, gm(x)
    cls = type("ArgsThenRaise", (_ArgsThenRaise,), {"exc": exc})
    with pytest.raises((PassFailedError, KeyboardInterrupt)) as info:
        Pipeline([cls]).run(gm, example_inputs=[x])
    assert gm.code == code and torch.equal(gm(x), out)
    text = str(info.value) + "".join(getattr(info.value, "__notes__", ()))
    assert "%neg's args" in text, text
    if exc is KeyboardInterrupt:
        assert info.value.__notes__ == [
            "fxpasses: 'args_then_raise' was interrupted; the graph was rolled back to before it (and what its "
            "journal does not record put back: %neg's args)"
        ]
