"""The fast paths behind verification and dispatch agree with torch's own checks.

``fxpasses.lint.lint_passes`` may answer True only where ``Graph.lint()`` passes, and
``fxpasses._modpath.ModulePaths`` may only resolve what ``getattr``/``get_submodule`` resolve
to the same object.
"""

from __future__ import annotations

import operator

import pytest
import torch
import torch.fx
from torch import nn

import fxpasses
from fxpasses import _order, runner
from fxpasses._modpath import MISSING, ModulePaths
from fxpasses.lint import lint_passes
from fxpasses.pipeline import _lint


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.register_buffer("scale", torch.ones(4))
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x) * self.scale + 1)


def _gm() -> torch.fx.GraphModule:
    return torch.fx.symbolic_trace(Net())


def _torch_lint_ok(gm: torch.fx.GraphModule) -> bool:
    try:
        gm.graph.lint()
        for n in gm.graph.find_nodes(op="call_module"):
            gm.get_submodule(n.target)
    except Exception:
        return False
    return True


def test_valid_graphs_pass():
    gm = _gm()
    assert lint_passes(gm) and _torch_lint_ok(gm)
    gm = torch.export.export(Net(), (torch.randn(2, 4),)).module()
    assert lint_passes(gm) and _torch_lint_ok(gm)


def _use_before_def(gm):
    relu = next(n for n in gm.graph.nodes if n.op == "call_module" and n.target == "body.1")
    relu.prepend(next(n for n in gm.graph.nodes if n.target == "head"))


def _duplicate_name(gm):
    a, b = list(gm.graph.nodes)[1:3]
    object.__setattr__(b, "name", a.name)


def _missing_module(gm):
    del gm.head


def _missing_attr(gm):
    del gm._buffers["scale"]


def _not_a_module(gm):
    gm.body._modules["1"] = None
    gm.body.__dict__["1"] = torch.ones(1)


def _foreign_arg(gm):
    other = torch.fx.Graph()
    p = other.placeholder("z")
    n = next(n for n in gm.graph.nodes if n.op == "call_function")
    n.args = (p, *n.args[1:])


def _not_in_table(gm):
    n = next(n for n in gm.graph.nodes if n.op == "call_function")
    gm.graph._find_nodes_lookup_table.remove(n)


def _bad_target_type(gm):
    n = next(n for n in gm.graph.nodes if n.op == "call_module")
    gm.graph._find_nodes_lookup_table.remove(n)
    object.__setattr__(n, "target", 3)
    gm.graph._find_nodes_lookup_table.insert(n)


def _bad_op(gm):
    n = next(n for n in gm.graph.nodes if n.op == "call_function")
    object.__setattr__(n, "op", "call_nothing")


def _property_shadow(gm):
    # a class attribute named like the submodule: getattr finds the property, not the child
    cls = type(gm.body)
    sub = type("Shadowed", (cls,), {"0": property(lambda self: None)})
    gm.body.__class__ = sub


@pytest.mark.parametrize(
    "breakage",
    [_use_before_def, _duplicate_name, _missing_module, _missing_attr, _not_a_module, _foreign_arg,
     _not_in_table, _bad_target_type, _bad_op, _property_shadow],
)
def test_fast_lint_never_passes_what_torch_rejects(breakage):
    gm = _gm()
    breakage(gm)
    assert not _torch_lint_ok(gm)
    assert not lint_passes(gm)
    with pytest.raises(Exception):
        _lint(gm)


def test_fast_lint_defers_to_torch_when_unsure():
    gm = _gm()
    # a target only getattr resolves (a class attribute): torch's lint accepts it
    type(gm).extra = torch.ones(1)
    n = gm.graph.create_node("get_attr", "extra")
    assert not lint_passes(gm)
    _lint(gm)  # torch's lint decides: passes
    gm.graph.erase_node(n)


def test_module_paths_agree_with_get_submodule():
    gm = torch.export.export(Net(), (torch.randn(2, 4),)).module()
    paths = ModulePaths(gm)
    every = paths.all_modules()
    for name, mod in gm.named_modules(remove_duplicate=False):
        assert every[name] is mod
        assert paths.module(name) is mod
        assert paths.get_submodule(name) is mod
    for name, t in list(gm.named_parameters()) + list(gm.named_buffers()):
        assert paths.attr(name) is t
    assert paths.module("nope") is MISSING
    with pytest.raises(AttributeError):
        paths.get_submodule("body.nope")


def test_module_paths_skip_shadowed_names():
    m = nn.Module()
    m._modules["eval"] = nn.ReLU()  # nn.Module has a method of that name: getattr gives the method
    paths = ModulePaths(m)
    assert "eval" not in paths.all_modules()
    assert paths.module("eval") is MISSING


def test_node_pass_matches_modules_by_class():
    class Mul(nn.Module):
        def forward(self, x):
            return x * 2

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = Mul()
            self.r = nn.ReLU()

        def forward(self, x):
            return self.r(self.m(x) * 3)

    seen = []

    class Spy(fxpasses.NodePass):
        """Records the nodes it visits."""

        name = "spy"

        @fxpasses.on("mul")
        def mul(self, node, ctx):
            seen.append((node.op, str(node.target)))

    class Tracer(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, Mul) or super().is_leaf_module(m, qualname)

    model = M()
    gm = torch.fx.GraphModule(model, Tracer().trace(model))
    fxpasses.Pipeline([Spy], verify="none").run(gm)
    assert seen == [("call_module", "m"), ("call_function", str(operator.mul))]


def test_graph_order_in_c_is_the_sort_key_order():
    """``_order``'s comparisons of nodes (in C on torch >= 2.7) give the order of FX's
    ``_sort_key`` tuples, on a graph whose keys grew by insertions in the middle and moves."""
    import random

    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = x
    for _ in range(40):
        y = g.call_function(operator.add, (y, 1))
    g.output(y)
    rng = random.Random(0)
    for i in range(300):
        at = rng.choice([n for n in g.nodes if n.op != "placeholder"])
        with g.inserting_before(at):
            g.call_function(operator.mul, (x, i))
    nodes = list(g.nodes)
    for _ in range(30):  # moves re-key the moved node
        a, b = rng.sample(nodes[1:-1], 2)
        b.prepend(a)
    nodes = list(g.nodes)
    assert max(len(n._sort_key) for n in nodes) > 2  # keys of more than one level
    shuffled = nodes[::-1]
    rng.shuffle(shuffled)
    assert _order.in_graph_order(shuffled) == nodes
    assert _order._sorted_by_key(shuffled) == nodes
    pairs = [(a, b) for a in nodes[::11] for b in nodes[::7]]
    assert [_order.precedes(a, b) for a, b in pairs] == [a._sort_key < b._sort_key for a, b in pairs]
    assert [_order._precedes_by_key(a, b) for a, b in pairs] == [
        nodes.index(a) < nodes.index(b) for a, b in pairs
    ]


def test_dispatch_order_and_answers_on_every_work_list_path(monkeypatch):
    """One target (the index bucket as work list), two targets (merged), two hooks on one
    target (general loop): nodes in graph order, every answer applied, nodes erased on the
    way skipped, and the pass reports a change only when there was one."""

    def f(x):
        a = x * 1  # x*1 -> x
        b = a + 0  # x+0 -> x
        c = b * 2
        d = c * 1
        return d + c * 1

    def run(cls):
        gm = torch.fx.symbolic_trace(f)
        x = torch.randn(3)
        expected = f(x)
        report = fxpasses.Pipeline([cls], verify="lint").run(gm)
        torch.testing.assert_close(gm(x), expected, rtol=0, atol=0)
        return gm, report.passes[0].changed

    seen = []

    class One(fxpasses.NodePass):
        """x*1 -> x."""

        name = "one_target"

        @fxpasses.on(op="call_function", target=operator.mul)
        def mul(self, node, ctx):
            seen.append(node.name)
            if node.args[1] == 1:
                return fxpasses.Replace(node.args[0])
            return fxpasses.Replace(node)  # replacing a node by itself changes nothing

    gm, changed = run(One)
    assert seen == ["mul", "mul_1", "mul_2", "mul_3"] and changed

    # graph order, not the order of FX's index: ``late`` is moved before ``early`` once the
    # module is built (GraphModule re-indexes nodes in graph order)
    def made_out_of_order(padding):
        g = torch.fx.Graph()
        x = g.placeholder("x")
        early = g.call_function(operator.mul, (x, 1), name="early")
        late = g.call_function(operator.mul, (x, 1), name="late")
        y = g.call_function(operator.add, (early, late))
        for _ in range(padding):
            y = g.call_function(torch.neg, (y,))
        g.output(y)
        gm = torch.fx.GraphModule(nn.Module(), g)
        early.prepend(late)
        assert list(g.find_nodes(op="call_function", target=operator.mul, sort=False)) == [early, late]
        return gm

    # the work list sorted by nodes compared in C, and by key tuples (a torch without
    # _NodeBase.__lt__)
    for sort in (_order.in_graph_order, _order._sorted_by_key):
        for padding in (0, 20):  # candidates dense and sparse among the nodes
            seen.clear()
            monkeypatch.setattr(runner, "in_graph_order", sort)
            monkeypatch.setattr(runner, "NODES_COMPARE_IN_C", sort is _order.in_graph_order)
            fxpasses.Pipeline([One], verify="lint").run(made_out_of_order(padding))
            assert seen == ["late", "early"]
    monkeypatch.undo()

    class Two(fxpasses.NodePass):
        """x*1 -> x and x+0 -> x, one hook, two targets."""

        name = "two_targets"

        @fxpasses.on(op="call_function", target=(operator.mul, operator.add))
        def op(self, node, ctx):
            seen.append(node.name)
            if node.args[1] == (1 if node.target is operator.mul else 0):
                return fxpasses.Replace(node.args[0])
            return None

    seen.clear()
    gm, changed = run(Two)
    assert seen == ["mul", "add", "mul_1", "mul_2", "mul_3", "add_1"] and changed

    # candidates of two buckets (mul, add): dense ones filtered from the graph, sparse ones
    # sorted (merging the buckets), out of the index's order either way
    for sort in (_order.in_graph_order, _order._sorted_by_key):
        for padding in (0, 20):
            seen.clear()
            monkeypatch.setattr(runner, "in_graph_order", sort)
            monkeypatch.setattr(runner, "NODES_COMPARE_IN_C", sort is _order.in_graph_order)
            fxpasses.Pipeline([Two], verify="lint").run(made_out_of_order(padding))
            assert seen == ["late", "early", "add"], (sort, padding)
    monkeypatch.undo()
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [operator.mul, operator.add]

    seen.clear()

    class Both(fxpasses.NodePass):
        """Two hooks on one target: the first erases every use of x*1, the second sees the
        other nodes; a node erased by the first is not shown to the second."""

        name = "two_hooks"

        @fxpasses.on(op="call_function", target=operator.mul)
        def first(self, node, ctx):
            seen.append(("first", node.name))
            return fxpasses.Replace(node.args[0]) if node.args[1] == 1 else None

        @fxpasses.on(op="call_function", target=operator.mul)
        def second(self, node, ctx):
            seen.append(("second", node.name))
            return fxpasses.Replace(2.0) if node.args[1] == 7 else None

    gm, changed = run(Both)
    assert seen == [
        ("first", "mul"),
        ("first", "mul_1"),
        ("second", "mul_1"),
        ("first", "mul_2"),
        ("first", "mul_3"),
    ] and changed

    class Nothing(fxpasses.NodePass):
        """Keeps everything."""

        name = "keeps"

        @fxpasses.on(op="call_function", target=operator.mul)
        def mul(self, node, ctx):
            return fxpasses.KEEP

    assert run(Nothing)[1] is False


def test_compiled_subscriptions_follow_families_subclasses_and_hooks(monkeypatch):
    """The runner compiles a pass class's subscriptions once and keeps what they answer per
    target on the class: a family defined later, a subclass with another hook, a hook removed
    by an override and ``_hooks`` replaced on the class are each seen by the next run."""
    from fxpasses import ops

    monkeypatch.setattr(ops, "FAMILIES", dict(ops.FAMILIES))

    def f(x):
        return torch.sigmoid(torch.relu(x) * 2)

    seen: list[tuple[str, str]] = []

    class Act(fxpasses.NodePass):
        name = "sees_act"

        @fxpasses.on("fxp_test_act", op="call_function")
        def act(self, node, ctx):
            seen.append(("act", node.name))

    def visited(cls):
        seen.clear()
        fxpasses.Pipeline([cls], verify="none").run(torch.fx.symbolic_trace(f))
        return list(seen)

    assert visited(Act) == []  # a name no op has yet
    ops.define_family("fxp_test_act", ["relu"])
    assert visited(Act) == [("act", "relu")]
    ops.define_family("fxp_test_act", ["sigmoid"])
    assert visited(Act) == [("act", "relu"), ("act", "sigmoid")]

    class ActAndMul(Act):
        name = "sees_act_and_mul"

        @fxpasses.on("mul")
        def mul(self, node, ctx):
            seen.append(("mul", node.name))

    assert visited(ActAndMul) == [("act", "relu"), ("mul", "mul"), ("act", "sigmoid")]
    assert visited(Act) == [("act", "relu"), ("act", "sigmoid")]  # the base class's own answers

    class MulOnly(ActAndMul):
        name = "sees_mul_only"

        def act(self, node, ctx):  # overridden without @on: no longer a hook
            seen.append(("act", node.name))

    assert visited(MulOnly) == [("mul", "mul")]
    only_sigmoid = fxpasses.passes.Subscription(frozenset({"call_function"}), frozenset(), (torch.sigmoid,))
    monkeypatch.setattr(Act, "_hooks", (("act", only_sigmoid),))
    assert visited(Act) == [("act", "sigmoid")]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("which", ["itself_a_user", "after_a_user", "other_graph", "erased"])
def test_replace_by_a_node_that_cannot_take_the_place_fails_at_the_hook(which, fast):
    """Replace(value) with a value defined after a user, from another graph or erased: the
    hook's error names the node and the reason (not a lint failure after the pass), and the
    graph is rolled back. ``fast``: the single-hook loop; else two hooks (the general loop)."""

    def f(x):
        a = torch.relu(x)
        b = torch.neg(a)
        return torch.sin(b)

    other = torch.fx.symbolic_trace(f)
    gm = torch.fx.symbolic_trace(f)
    code = gm.code

    class Bad(fxpasses.NodePass):
        """Answers an impossible replacement for relu."""

        name = "bad_replace"

        @fxpasses.on(op="call_function", target=torch.relu)
        def relu(self, node, ctx):
            if which == "itself_a_user":
                return fxpasses.Replace(next(iter(node.users)))  # neg: uses relu itself
            if which == "after_a_user":  # sin: after neg, which uses relu
                return fxpasses.Replace(next(n for n in ctx.graph.nodes if n.target is torch.sin))
            if which == "other_graph":
                return fxpasses.Replace(next(iter(other.graph.nodes)))
            erased = ctx.graph.call_function(torch.cos, (node.args[0],))
            ctx.graph.erase_node(erased)
            return fxpasses.Replace(erased)

    if not fast:

        class Bad(Bad):  # noqa: F811 - a second hook on the same target: the general loop
            """The same, with a second hook that keeps everything."""

            name = "bad_replace_two_hooks"

            @fxpasses.on(op="call_function", target=torch.relu)
            def keep(self, node, ctx):
                return None

    expected = {
        "itself_a_user": "cannot replace %relu by %neg: %neg uses %relu (it would then use itself)",
        "after_a_user": "cannot replace %relu by %sin: %sin comes after %neg, which uses %relu",
        "other_graph": "belongs to another graph",
        "erased": "was erased",
    }[which]
    with pytest.raises(fxpasses.PassFailedError) as info:
        fxpasses.Pipeline([Bad]).run(gm)
    text = str(info.value)
    assert expected in text and "cannot replace %relu" in text and "at node %relu" in text
    assert "graph lint failed" not in text
    assert gm.code == code


def _user_fn(x):
    return x + 1


torch.fx.wrap("_user_fn")


def test_shared_effects_follow_edits_and_registrations():
    from fxpasses import effects

    class M(nn.Module):
        def forward(self, x):
            y = torch.relu(x)
            return _user_fn(y) * 2

    gm = torch.fx.symbolic_trace(M())
    relu = next(n for n in gm.graph.nodes if n.target is torch.relu)
    user = next(n for n in gm.graph.nodes if n.target is _user_fn)
    mul = next(n for n in gm.graph.nodes if n.target is operator.mul)
    a = effects.EffectAnalysis(gm)
    assert a.effects(relu).pure and a.effects(mul).pure
    assert not a.effects(user).pure  # an unknown function
    # an edit to the node (new args, new target) is seen by the next analysis
    relu.kwargs = {"inplace": False}
    relu.target = torch.relu_
    assert not effects.EffectAnalysis(gm).effects(relu).pure
    # registrations between analyses are seen
    effects.register_pure_function(_user_fn)
    try:
        assert effects.EffectAnalysis(gm).effects(user).pure
        effects.register_side_effect(operator.mul, effects.IO)
        assert effects.IO in effects.EffectAnalysis(gm).effects(mul).kinds
    finally:
        effects._user_pure.discard(_user_fn)
        effects._user_effects.pop(operator.mul, None)
    assert effects.EffectAnalysis(gm).effects(mul).pure


def test_mutated_attributes_shortcut_matches_full_answer():
    from fxpasses import effects

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.zeros(3))
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            self.b.add_(1)
            return self.lin(x) + self.b

    class Tracer(torch.fx.Tracer):
        proxy_buffer_attributes = True

    model = M()
    gm = torch.fx.GraphModule(model, Tracer().trace(model))
    assert effects.EffectAnalysis(gm).mutated_attributes() == {"b"}
    gm2 = torch.fx.symbolic_trace(Net())
    assert effects.EffectAnalysis(gm2).mutated_attributes() == set()


def test_effects_found_by_target_alone_are_reused_only_where_they_hold(monkeypatch):
    """Torch functions and Tensor methods whose effects follow from their name are answered
    per target (no signature binding per node), except for calls that give ``out=`` or
    ``inplace``, for a method object replaced on ``torch.Tensor``, and after registrations."""
    import torch.nn.functional as F

    from fxpasses import effects

    g = torch.fx.Graph()
    x, y = g.placeholder("x"), g.placeholder("y")
    s1 = g.call_function(torch.sigmoid, (x,))
    s2 = g.call_function(torch.sigmoid, (y,))
    s_out = g.call_function(torch.sigmoid, (x,), {"out": y})
    r1 = g.call_function(torch.rand, (3,))
    relu = g.call_function(F.relu, (x,))  # F.relu has an inplace parameter: never per target
    relu_inplace = g.call_function(F.relu, (y, True))
    m1 = g.call_method("mean", (x,))
    m2 = g.call_method("mean", (y, 0))
    g.output((s1, s2, s_out, r1, relu, relu_inplace, m1, m2))
    gm = torch.fx.GraphModule(nn.Module(), g)

    a = effects.EffectAnalysis(gm)
    assert a.effects(s1).pure and a.effects(s2).pure
    assert effects._static_targets[torch.sigmoid][1] is a.effects(s1)
    out = a.effects(s_out)
    assert out.kinds == {effects.MUTATION} and out.writes == (y,)
    assert a.effects(r1).kinds == {effects.RANDOM}
    assert effects._static_targets[torch.rand][1].kinds == {effects.RANDOM}
    assert a.effects(relu).pure and F.relu not in effects._static_targets
    inplace = a.effects(relu_inplace)
    assert inplace.kinds == {effects.MUTATION} and inplace.writes == (y,)
    assert a.effects(m1).pure and a.effects(m2).pure and "mean" in effects._static_methods

    # a node edited to give out= is not answered from the target
    s2.kwargs = {"out": x}
    e = effects.EffectAnalysis(gm).effects(s2)
    assert e.kinds == {effects.MUTATION} and e.writes == (x,)

    # a Tensor method replaced by one with an inplace parameter: bound per node again
    def mean(self, inplace=False):
        return self

    monkeypatch.setattr(torch.Tensor, "mean", mean)
    m2.args = (y, True)
    e = effects.EffectAnalysis(gm).effects(m2)
    assert e.kinds == {effects.MUTATION} and e.writes == (y,)
    monkeypatch.undo()

    # a registration between analyses is seen by the next one
    s1.args = (y,)  # a new args tuple: the node's shared entry is rebuilt
    effects.register_side_effect(torch.sigmoid, effects.IO)
    try:
        assert effects.EffectAnalysis(gm).effects(s1).kinds == {effects.IO}
    finally:
        effects._user_effects.pop(torch.sigmoid, None)
    s1.args = (x,)
    assert effects.EffectAnalysis(gm).effects(s1).pure


def test_has_writes_reads_the_shared_table_and_follows_edits():
    """``has_writes`` reads valid shared answers in place; a later analysis sees writes that
    edits added (a new in-place node, a node given ``out=``, a module made in-place)."""
    from fxpasses import effects

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = nn.ReLU()

        def forward(self, x):
            y = torch.sigmoid(x)
            return self.act(y).mean() + y

    gm = torch.fx.symbolic_trace(M())
    sig = next(n for n in gm.graph.nodes if n.target is torch.sigmoid)
    x = next(iter(gm.graph.find_nodes(op="placeholder")))
    assert not effects.EffectAnalysis(gm).has_writes()
    a = effects.EffectAnalysis(gm)
    assert not a.has_writes()  # from the shared table
    sig.kwargs = {"out": x}
    assert a.effects(sig).pure  # an analysis keeps the answers it gave (memoized by the walk)
    assert effects.EffectAnalysis(gm).has_writes()
    assert effects.EffectAnalysis(gm).is_written(x)
    sig.kwargs = {}
    assert not effects.EffectAnalysis(gm).has_writes()
    with gm.graph.inserting_after(sig):
        gm.graph.call_method("add_", (sig, 1))
    assert effects.EffectAnalysis(gm).has_writes()
    assert effects.EffectAnalysis(gm).is_written(sig)

    gm = torch.fx.symbolic_trace(M())
    assert not effects.EffectAnalysis(gm).has_writes()
    gm.act.inplace = True
    assert effects.EffectAnalysis(gm).has_writes()


def test_module_attributes_read_without_getattr_are_getattrs_answers(monkeypatch):
    """``effects._module_attr`` (the attribute reads of a module's effect summary) gives what
    ``getattr(module, name, default)`` gives: instance attributes, class attributes and
    properties (also ones added to the class later), registries, customised access, misses."""
    from fxpasses import effects

    class Prop(nn.ReLU):
        @property
        def inplace(self):  # shadows the instance attribute ReLU.__init__ sets
            return True

    class Custom(nn.Linear):
        def __getattr__(self, name):
            if name == "_is_impure":
                return True
            return super().__getattr__(name)

    flagged = nn.Linear(2, 2)
    flagged._is_impure = True
    with_buffer = nn.Identity()
    with_buffer.register_buffer("inplace", torch.ones(1))
    modules = [nn.Linear(2, 2), nn.ReLU(inplace=True), nn.ReLU(), flagged, Custom(2, 2), with_buffer]
    try:
        modules.append(Prop())
    except AttributeError:  # pragma: no cover - the property refuses ReLU.__init__'s assignment
        pass
    monkeypatch.setattr(nn.Tanh, "_is_impure", True, raising=False)
    modules.append(nn.Tanh())
    for m in modules:
        for name in ("_is_impure", "inplace", "training", "weight", "missing"):
            want = getattr(m, name, "default")
            got = effects._module_attr(m, name, "default")
            assert got is want, (type(m).__name__, name)
    assert effects._module_attr(flagged, "_is_impure", False) is True
    assert effects._module_attr(nn.Linear(2, 2), "_is_impure", False) is False
    assert effects._module_attr(nn.Tanh(), "_is_impure", False) is True
    assert effects._module_attr(Custom(2, 2), "_is_impure", False) is True

    # a class marked impure after an analysis: the next analysis sees it
    root = nn.Module()
    root.act = nn.Hardswish()
    g = torch.fx.Graph()
    g.output(g.call_module("act", (g.placeholder("x"),)))
    gm = torch.fx.GraphModule(root, g)
    node = next(iter(gm.graph.find_nodes(op="call_module")))
    assert effects.EffectAnalysis(gm).effects(node).pure
    monkeypatch.setattr(nn.Hardswish, "_is_impure", True, raising=False)
    assert effects.EffectAnalysis(gm).effects(node).kinds == {effects.UNKNOWN}


def _opaque(x):
    return x


def test_fresh_results_are_decided_per_target_and_follow_registrations():
    """Whether a call_function target returns a fresh value is remembered per target (with
    the registries' state): torch.sigmoid is fresh, getitem and unknown functions may return
    an input, and registering a function pure makes its next analysis call it fresh."""
    from fxpasses import effects

    g = torch.fx.Graph()
    x = g.placeholder("x")
    s = g.call_function(torch.sigmoid, (x,))
    s_out = g.call_function(torch.sigmoid, (x,), {"out": s})
    item = g.call_function(operator.getitem, (x, 0))
    opaque = g.call_function(_opaque, (x,))
    g.output((s, s_out, item, opaque))
    gm = torch.fx.GraphModule(nn.Module(), g)
    for _ in range(2):  # the second analysis answers from the per-target table
        a = effects.EffectAnalysis(gm)
        assert a.aliased_inputs(s) == ()
        assert a.aliased_inputs(s_out) == (s,)  # out= returns the written tensor
        assert a.aliased_inputs(item) == (x,)
        assert a.aliased_inputs(opaque) == (x,)
        assert effects._fresh_targets[torch.sigmoid][1] is True
    effects.register_pure_function(_opaque)
    try:
        opaque.args = (x,)  # a new args tuple: the node's shared entry is rebuilt
        assert effects.EffectAnalysis(gm).aliased_inputs(opaque) == ()
    finally:
        effects._user_pure.discard(_opaque)
    opaque.args = (x,)
    assert effects.EffectAnalysis(gm).aliased_inputs(opaque) == (x,)


def test_aten_overloads_answered_per_target_only_where_arguments_do_not_matter():
    """An ATen overload that does not mutate, draw random numbers or update batch-norm
    statistics is answered per overload (exported graphs repeat a few overloads thousands of
    times); dropout and batch norm, whose effects depend on their ``train``/``training``
    argument, are still decided per call, whichever call is asked first."""
    from fxpasses import effects

    aten = torch.ops.aten
    for order in (1, -1):  # either call of a pair asked first (a fresh graph each time)
        g = torch.fx.Graph()
        x, w, b, rm, rv = (g.placeholder(n) for n in ("x", "w", "b", "rm", "rv"))
        add1 = g.call_function(aten.add.Tensor, (x, x))
        add2 = g.call_function(aten.add.Tensor, (x, w))
        drop_eval = g.call_function(aten.dropout.default, (x, 0.5, False))
        drop_train = g.call_function(aten.dropout.default, (x, 0.5, True))
        bn_eval = g.call_function(aten._native_batch_norm_legit_no_training.default, (x, w, b, rm, rv, 0.1, 1e-5))
        bn_train = g.call_function(aten.native_batch_norm.default, (x, w, b, rm, rv, True, 0.1, 1e-5))
        bn_train_off = g.call_function(aten.native_batch_norm.default, (x, w, b, rm, rv, False, 0.1, 1e-5))
        inplace = g.call_function(aten.add_.Tensor, (w, x))
        g.output((add1, add2, drop_eval, drop_train, bn_eval, bn_train, bn_train_off, inplace))
        gm = torch.fx.GraphModule(nn.Module(), g)
        effects._static_targets.clear()
        a = effects.EffectAnalysis(gm)
        for n in list(gm.graph.nodes)[::order]:
            a.effects(n)
        assert a.effects(add1).pure and a.effects(add2).pure
        assert effects._static_targets[aten.add.Tensor][1] is a.effects(add1)
        assert a.effects(drop_eval).pure
        assert a.effects(drop_train).kinds == {effects.RANDOM}
        assert aten.dropout.default not in effects._static_targets
        assert a.effects(bn_eval).pure
        train = a.effects(bn_train)
        assert train.kinds == {effects.MUTATION} and set(train.writes) == {rm, rv}
        assert a.effects(bn_train_off).pure
        assert aten.native_batch_norm.default not in effects._static_targets
        ip = a.effects(inplace)
        assert ip.kinds == {effects.MUTATION} and ip.writes == (w,)
        assert aten.add_.Tensor not in effects._static_targets


def _scan_both(gm):
    """The index-driven scan's answer and the node-by-node walk's, each from a fresh analysis."""
    from fxpasses import effects

    return (
        effects.EffectAnalysis(gm)._scan_writes(),
        effects.EffectAnalysis(gm)._scan_writes_of(list(gm.graph.nodes)),
    )


@pytest.mark.parametrize(
    "kwargs, expected",
    [({}, False), ({"out": "buf"}, True), ({"inplace": True}, True)],
    ids=["no-flag", "out", "inplace"],
)
def test_scan_by_target_sees_a_write_at_any_call_of_a_bucket(kwargs, expected):
    """``has_writes`` passes over the buckets of FX's node index whose target is pure whatever
    its arguments, or whose effects follow from its name, after one node: a later call of the
    same target that writes (``out=``, ``inplace=True``) must still be found."""
    import torch.nn.functional as F

    from fxpasses import effects

    g = torch.fx.Graph()
    x = g.placeholder("x")
    buf = g.placeholder("buf")
    a = g.call_function(operator.add, (x, 1))
    b = g.call_function(operator.add, (a, 2))
    s1 = g.call_function(torch.sigmoid, (b,))
    s2 = g.call_function(torch.sigmoid, (s1,))
    r1 = g.call_function(F.relu, (s2,))
    flagged = {k: (buf if v == "buf" else v) for k, v in kwargs.items()}
    # the last call of its target: torch.sigmoid takes out=, F.relu inplace=
    target = torch.sigmoid if "out" in kwargs else F.relu
    last = g.call_function(target, (r1,), flagged)
    g.output(g.call_function(operator.add, (last, b)))
    gm = torch.fx.GraphModule(nn.Module(), g)
    assert _scan_both(gm) == (expected, expected)
    assert effects.EffectAnalysis(gm).has_writes() is expected
    if expected:
        assert effects.EffectAnalysis(gm).is_written(buf if "out" in kwargs else r1)


def test_scan_by_target_follows_a_retargeted_node():
    """A node whose target is set after creation moves to its new bucket of the index (torch's
    ``Node.__setattr__``): made in-place, it is found as a write."""
    gm = torch.fx.symbolic_trace(Net())
    adds = [n for n in gm.graph.nodes if n.target is operator.add]
    assert _scan_both(gm) == (False, False)
    adds[0].target = torch.Tensor.add_  # now a call_function of an in-place method
    assert _scan_both(gm) == (True, True)
    adds[0].target = operator.add
    mul = next(n for n in gm.graph.nodes if n.target is operator.mul)
    mul.target = operator.imul
    assert _scan_both(gm) == (True, True)


def test_scan_by_target_agrees_with_the_walk_on_real_graphs():
    """On traced, exported and decomposed graphs of a model with in-place updates (a
    training-mode BatchNorm writes its running statistics) and without them."""
    from fxpasses._example import convnet

    for train in (False, True):
        model = convnet().train(train)
        x = torch.randn(2, 3, 32, 32)
        graphs = [torch.fx.symbolic_trace(model)]
        ep = torch.export.export(model, (x,))
        graphs += [ep.module(), ep.run_decompositions().module()]
        for gm in graphs:
            got = _scan_both(gm)
            assert got[0] == got[1], (train, got)
            assert got[0] is train, (train, got)


def _leaf_cases() -> list[tuple[str, nn.Module]]:
    """Modules the pure-leaf shortcut must answer exactly as the full module analysis does."""
    hooked = nn.Linear(2, 2)
    hooked.register_forward_hook(lambda m, i, o: None)
    flagged = nn.Conv2d(1, 1, 1)
    flagged._is_impure = True
    unflagged = nn.Conv2d(1, 1, 1)
    unflagged._is_impure = False
    impure_buffer = nn.Identity()
    impure_buffer.register_buffer("_is_impure", torch.ones(1))
    inplace_buffer = nn.Identity()
    inplace_buffer.register_buffer("inplace", torch.ones(1))
    with_child = nn.Linear(2, 2)
    with_child.inner = nn.ReLU(inplace=True)
    return [
        ("linear", nn.Linear(2, 2)),
        ("conv", nn.Conv2d(1, 1, 3)),
        ("relu", nn.ReLU()),
        ("relu inplace", nn.ReLU(inplace=True)),
        ("dropout train", nn.Dropout(0.5)),
        ("dropout eval", nn.Dropout(0.5).eval()),
        ("rrelu train", nn.RReLU()),
        ("batchnorm train", nn.BatchNorm2d(3)),
        ("batchnorm eval", nn.BatchNorm2d(3).eval()),
        ("instancenorm stats", nn.InstanceNorm2d(3, track_running_stats=True)),
        ("embedding max_norm", nn.Embedding(4, 2, max_norm=1.0)),
        ("embedding", nn.Embedding(4, 2)),
        ("lazy linear", nn.LazyLinear(2)),
        ("attention dropout", nn.MultiheadAttention(4, 2, dropout=0.1)),
        ("attention eval", nn.MultiheadAttention(4, 2, dropout=0.1).eval()),
        ("lstm dropout", nn.LSTM(2, 2, num_layers=2, dropout=0.1)),
        ("lstm eval", nn.LSTM(2, 2, num_layers=2, dropout=0.1).eval()),
        ("instancenorm eval", nn.InstanceNorm2d(3, track_running_stats=True).eval()),
        ("embedding bag", nn.EmbeddingBag(4, 2)),
        ("hooked", hooked),
        ("_is_impure=True", flagged),
        ("_is_impure=False", unflagged),
        ("buffer named _is_impure", impure_buffer),
        ("buffer named inplace", inplace_buffer),
        ("child in place", with_child),
        ("sequential", nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1))),
    ]


@pytest.mark.parametrize("label, mod", _leaf_cases(), ids=[c[0] for c in _leaf_cases()])
def test_the_pure_leaf_shortcut_answers_as_the_full_module_analysis(monkeypatch, label, mod):
    """``effects._pure_leaf`` (call_module effects of a leaf answered from its class) says pure
    only where ``_module_effects`` says pure, and the answer of a call is the same with or
    without it; plain leaves (Linear, Conv2d, ReLU, Dropout and BatchNorm in eval mode) take
    the shortcut, as do an eval LSTM and InstanceNorm; a module with children (attention) does not."""
    from fxpasses import effects

    root = nn.Module()
    root.m = mod
    g = torch.fx.Graph()
    g.output(g.call_module("m", (g.placeholder("x"),)))
    gm = torch.fx.GraphModule(root, g)
    node = next(iter(gm.graph.find_nodes(op="call_module")))
    fast = effects.EffectAnalysis(gm).effects(node)
    full = effects.EffectAnalysis(gm)._module_effects(mod)
    # judged as in training mode (modules_may_train): the shortcut answers as the full analysis too
    fast_t = effects.EffectAnalysis(gm, modules_may_train=True).effects(node)
    full_t = effects.EffectAnalysis(gm, modules_may_train=True)._module_effects(mod)
    monkeypatch.setattr(effects, "_pure_leaf", lambda m, may_train=False: False)
    slow = effects.EffectAnalysis(gm).effects(node)
    slow_t = effects.EffectAnalysis(gm, modules_may_train=True).effects(node)
    assert (fast.kinds, fast.state_writes, fast.writes) == (slow.kinds, slow.state_writes, slow.writes)
    assert (fast_t.kinds, fast_t.state_writes, fast_t.writes) == (slow_t.kinds, slow_t.state_writes, slow_t.writes)
    monkeypatch.undo()
    if effects._pure_leaf(mod):
        assert not full.kinds, label
    if effects._pure_leaf(mod, True):
        assert not full_t.kinds, label
    # an eval-mode dropout or batch norm is pure now, not once trained
    assert effects._pure_leaf(mod, True) is (label in ("linear", "conv", "relu", "_is_impure=False", "buffer named inplace"))
    if label in ("dropout eval", "batchnorm eval"):
        assert full_t.kinds and not full.kinds
    shortcut = (
        *("linear", "conv", "relu", "_is_impure=False", "buffer named inplace"),
        *("dropout eval", "batchnorm eval", "lstm eval", "instancenorm eval"),
    )
    assert effects._pure_leaf(mod) is (label in shortcut)


def test_the_pure_leaf_shortcut_sees_global_hooks_and_later_class_attributes(monkeypatch):
    from fxpasses import effects

    lin = nn.Linear(2, 2)
    assert effects._pure_leaf(lin)
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
    try:
        assert not effects._pure_leaf(lin)
    finally:
        handle.remove()
    assert effects._pure_leaf(lin)
    monkeypatch.setattr(nn.Linear, "inplace", True, raising=False)
    assert not effects._pure_leaf(lin)
