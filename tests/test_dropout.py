"""remove_dropout: eval-mode dropouts go in every dialect; active ones stay unless declared."""

from __future__ import annotations

import operator
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxpasses
from fxpasses.capture import capture
from fxpasses.ops import FAMILIES, op_name
from fxpasses.testing import assert_preserves_outputs, normalized_code

DIALECTS = ("symbolic_trace", "dynamo", "export")
DROPOUT_NAMES = FAMILIES["dropout"]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()  # keep dynamo's recompile limit out of the way of repeated captures


def run(gm, text="remove_dropout"):
    return fxpasses.Pipeline.from_string(text).run(gm)["remove_dropout"]


def calls(gm):
    """(op name, args) of every computing node, the export guard module excluded."""
    return [
        (op_name(n, gm), n.args)
        for n in gm.graph.nodes
        if n.op in ("call_function", "call_method", "call_module") and n.target != "_guards_fn"
    ]


def call1(gm, *args):
    """The single output (dynamo graphs return a 1-tuple)."""
    out = gm(*args)
    return out[0] if isinstance(out, (tuple, list)) else out


def only_times_three(gm) -> bool:
    """The graph computes exactly x * 3 (one mul of the input by 3, nothing else)."""
    (x,) = gm.graph.find_nodes(op="placeholder")
    return calls(gm) == [("mul", (x, 3))]


class DropThenTriple(nn.Module):
    def __init__(self, drop: nn.Module | None = None) -> None:
        super().__init__()
        self.drop = drop if drop is not None else nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(x) * 3


# ------------------------------------------------------------------ issue 5, case 12


@pytest.mark.parametrize("decompose", [False, True])
@pytest.mark.parametrize("train", [False, True])
def test_case12_export_eval_and_train_with_and_without_inference(train, decompose):
    model = DropThenTriple().train(train)
    x = torch.ones(1000)
    for inference in (False, True):
        ep = torch.export.export(model, (x,))
        gm = (ep.run_decompositions() if decompose else ep).module()
        before = [name for name, _ in calls(gm)]
        if decompose:
            assert before == (["native_dropout", "getitem", "mul"] if train else ["clone", "mul"])
        else:
            assert before == ["dropout", "mul"]
        pr = run(gm, f"remove_dropout{{inference={str(inference).lower()}}}")
        if train and not inference:  # an active dropout stays
            assert [name for name, _ in calls(gm)] == before
            assert pr.counters == {"skipped": 1} and "active dropout" in pr.skipped[0][1]
            out = gm(x)
            assert set(out.unique().tolist()) <= {0.0, 6.0} and (out == 0).any() and (out == 6).any()
        else:
            assert only_times_three(gm), calls(gm)
            assert pr.counters == {"removed": 1}
            assert torch.equal(gm(x), torch.full((1000,), 3.0))
        gm.graph.lint()


MODULE_FORMS = [
    (lambda: nn.Dropout(0.5), (6, 4)),
    (lambda: nn.Dropout1d(0.5), (2, 4, 6)),
    (lambda: nn.Dropout2d(0.5), (2, 4, 3, 3)),
    (lambda: nn.Dropout3d(0.5), (1, 2, 4, 3, 3)),
    (lambda: nn.AlphaDropout(0.5), (6, 4)),
    (lambda: nn.FeatureAlphaDropout(0.5), (2, 4, 3, 3)),
]


@pytest.mark.parametrize("make, shape", MODULE_FORMS, ids=[type(m()).__name__ for m, _ in MODULE_FORMS])
@pytest.mark.parametrize("dialect", ["symbolic_trace", "dynamo"])
def test_case12_torch_level_modules(make, shape, dialect):
    x = torch.ones(shape)
    for train, inference in [(False, False), (True, False), (True, True)]:
        torch._dynamo.reset()
        model = DropThenTriple(make()).train(train)
        gm = capture(model, [x], dialect).gm
        pr = run(gm, f"remove_dropout{{inference={str(inference).lower()}}}")
        kind = type(model.drop).__name__
        if train and not inference:
            assert pr.counters == {"skipped": 1}, kind
            assert any(name in DROPOUT_NAMES or name in ("dropout", "alpha_dropout") for name, _ in calls(gm)), kind
        else:
            assert only_times_three(gm), (kind, calls(gm))
            assert pr.counters == {"removed": 1}, kind
            assert torch.equal(call1(gm, x), x * 3)


class Functional(nn.Module):
    def forward(self, x):
        a = F.dropout(x, 0.5, training=False)
        b = F.dropout(a, 0.2, False, False)
        c = F.alpha_dropout(b, 0.5)  # training defaults to False here
        d = F.feature_alpha_dropout(c.unsqueeze(0), 0.5).squeeze(0)
        e = torch.dropout(d, 0.3, False)
        f = F.dropout2d(e.unsqueeze(0), 0.5, training=False).squeeze(0)
        return f * 3


@pytest.mark.parametrize("dialect", DIALECTS)
def test_case12_functional_forms_with_training_false(dialect):
    x = torch.randn(2, 4, 5)
    results = assert_preserves_outputs("remove_dropout", Functional(), [x], dialects=[dialect], atol=0, rtol=0)
    gm, report = results[dialect]
    assert not {name for name, _ in calls(gm)} & DROPOUT_NAMES, calls(gm)
    assert report["remove_dropout"].counters == {"removed": 6}


class ActiveFunctional(nn.Module):
    def forward(self, x):
        return F.dropout(x, 0.5) * 3  # training defaults to True


@pytest.mark.parametrize("dialect", DIALECTS)
def test_active_functional_dropout_is_never_removed_by_default(dialect):
    x = torch.ones(1000)
    gm = capture(ActiveFunctional(), [x], dialect).gm
    code = normalized_code(gm)
    pr = run(gm)
    assert normalized_code(gm) == code and pr.counters == {"skipped": 1}
    torch.manual_seed(1)
    assert (call1(gm, x) == 0).any()  # still drops
    pr = run(gm, "remove_dropout{inference=true}")
    assert pr.counters == {"removed": 1} and only_times_three(gm)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.d1 = nn.Linear(8, 16), nn.Dropout(0.3)
        self.l2, self.d2 = nn.Linear(16, 16), nn.Dropout(0.1)
        self.l3 = nn.Linear(16, 4)

    def forward(self, x):
        x = self.d1(torch.relu(self.l1(x)))
        x = self.d2(F.gelu(self.l2(x)))
        return self.l3(x)


def test_mlp_eval_outputs_preserved_in_every_dialect():
    results = assert_preserves_outputs(
        fxpasses.Pipeline.from_string("remove_dropout"),
        MLP().eval(),
        [torch.randn(5, 8)],
        check_inputs=[[torch.randn(5, 8) * 10]],
        atol=0,
        rtol=0,
    )
    for dialect, (gm, report) in results.items():
        assert not {name for name, _ in calls(gm)} & DROPOUT_NAMES, dialect
        assert report["remove_dropout"].counters == {"removed": 2}, dialect
    gm = torch.export.export(MLP().eval(), (torch.randn(5, 8),)).run_decompositions().module()
    assert sum(name == "clone" for name, _ in calls(gm)) == 2
    assert run(gm).counters == {"removed": 2}
    assert not [name for name, _ in calls(gm) if name == "clone"]


# ------------------------------------------------------------------ aliasing


class ReturnsDropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(x)


def test_clone_remnant_that_is_returned_is_kept():
    """Removing it would make the output the caller's own input tensor."""
    x = torch.randn(4)
    gm = torch.export.export(ReturnsDropout().eval(), (x,)).run_decompositions().module()
    assert [name for name, _ in calls(gm)] == ["clone"]
    pr = run(gm)
    assert [name for name, _ in calls(gm)] == ["clone"]
    assert "alias" in pr.skipped[0][1] and "removed" not in pr.counters
    out = gm(x)
    assert out is not x and torch.equal(out, x)


class UserClone(nn.Module):
    def forward(self, x):
        return x.clone() * 3


def test_clone_not_from_a_dropout_is_left_alone():
    x = torch.randn(4)
    gm = torch.export.export(UserClone(), (x,)).run_decompositions().module()
    assert [name for name, _ in calls(gm)] == ["clone", "mul"]
    pr = run(gm)
    assert not pr.changed and [name for name, _ in calls(gm)] == ["clone", "mul"] and not pr.skipped


def test_active_dropout_returned_directly_becomes_a_clone_with_inference():
    x = torch.randn(8)
    for dialect in DIALECTS:
        torch._dynamo.reset()
        gm = capture(ReturnsDropout().train(), [x], dialect).gm
        pr = run(gm, "remove_dropout{inference=true}")
        assert pr.counters == {"kept_copy": 1}, dialect
        assert [name for name, _ in calls(gm)] == ["clone"], dialect
        out = call1(gm, x)
        assert out is not x and torch.equal(out, x), dialect


class NativeDropout(nn.Module):
    def __init__(self, use_mask: bool) -> None:
        super().__init__()
        self.use_mask = use_mask

    def forward(self, x):
        out, mask = torch.native_dropout(x, 0.5, False)
        return out * mask if self.use_mask else out + 1


@pytest.mark.parametrize("use_mask", [False, True])
def test_native_dropout_eval_and_its_mask(use_mask):
    x = torch.randn(6)
    model = NativeDropout(use_mask)
    gm = torch.export.export(model, (x,)).module()
    assert [name for name, _ in calls(gm)][0] == "native_dropout"
    pr = run(gm)
    if use_mask:
        assert not pr.changed and "mask is used" in pr.skipped[0][1]
    else:
        (xn,) = gm.graph.find_nodes(op="placeholder")
        assert calls(gm) == [("add", (xn, 1))] and pr.counters == {"removed": 1}
    torch.testing.assert_close(gm(x), model(x), atol=0, rtol=0)


def test_non_constant_training_flag():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    flag = g.placeholder("training")
    d = g.call_function(F.dropout, (x, 0.5, flag))
    g.output(g.call_function(operator.mul, (d, 3)))
    gm = torch.fx.GraphModule(nn.Module(), g)
    pr = run(gm)
    assert not pr.changed and "not a constant" in pr.skipped[0][1]
    pr = run(gm, "remove_dropout{inference=true}")
    assert pr.counters == {"removed": 1}
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [operator.mul]


class InplaceAfter(nn.Module):
    """An active dropout whose result is written in place: removal must not write into x."""

    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        y = self.drop(x)
        y.add_(1)
        return y * 2


def test_inplace_write_on_removed_dropout_result_does_not_reach_the_input():
    model = InplaceAfter().train()
    gm = torch.fx.symbolic_trace(model)
    pr = run(gm, "remove_dropout{inference=true}")
    assert pr.counters == {"kept_copy": 1}
    x = torch.zeros(5)
    out = gm(x)
    assert torch.equal(x, torch.zeros(5)) and torch.equal(out, torch.full((5,), 2.0))


def dropout(x, p, training):
    """A user function that shares the name of F.dropout."""
    return x * 2


def test_user_function_named_dropout_is_not_removed():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(dropout, (x, 0.5, False)))
    gm = torch.fx.GraphModule(nn.Module(), g)
    pr = run(gm, "remove_dropout{inference=true}")
    assert not pr.changed and pr.counters == {}
    assert torch.equal(gm(torch.ones(2)), torch.full((2,), 2.0))


# ------------------------------------------------- removing active dropout changes outputs by design


@pytest.mark.parametrize("dialect", [*DIALECTS, "export, decomposed"])
def test_inference_on_a_training_mode_model_fails_numeric_verification_saying_why(dialect):
    model = DropThenTriple().train()
    x = torch.ones(1000)
    if dialect == "export, decomposed":  # native_dropout + getitem
        gm = torch.export.export(model, (x,)).run_decompositions().module()
    else:
        gm = capture(model, [x], dialect).gm
    code = normalized_code(gm)
    pipeline = fxpasses.Pipeline.from_string("remove_dropout{inference=true}", verify="numeric")
    with pytest.raises(fxpasses.PassFailedError) as info:
        pipeline.run(gm, [x])
    err = info.value
    assert "verification failed: output" in str(err) and "max abs error" in str(err)
    assert err.notes[0] == (
        "remove_dropout{inference=true} removed dropout that is active in training mode, which changes the "
        "outputs by design (active dropout zeroes elements at random and scales the others); numeric "
        'verification cannot pass on this module: verify this pass with verify="lint", or run it on an '
        "eval-mode capture"
    )
    # then the nodes it changed (the dropout erased, its user edited), and no pointer to
    # bisect: the pass said why the outputs changed
    assert len(err.notes) == 2
    assert re.fullmatch(r"'remove_dropout' changed these nodes: .*%\w+ \(erased\).*%\w+ \(edited\).*", err.notes[1])
    assert "  note: remove_dropout{inference=true} removed dropout that is active in training mode" in str(err)
    assert normalized_code(gm) == code  # rolled back
    # verified by lint, it goes through; the report keeps the reason
    report = fxpasses.Pipeline.from_string("remove_dropout{inference=true}", verify="lint").run(gm, [x])
    assert report["remove_dropout"].notes == err.notes[:1] and only_times_three(gm)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_inference_on_an_eval_mode_model_has_nothing_to_say(dialect):
    x = torch.ones(1000)
    gm = capture(DropThenTriple().eval(), [x], dialect).gm
    report = fxpasses.Pipeline.from_string("remove_dropout{inference=true}", verify="numeric").run(gm, [x])
    assert report["remove_dropout"].counters == {"removed": 1} and report["remove_dropout"].notes == []


def test_a_training_flag_that_is_not_a_constant_is_said_to_change_outputs_when_true():
    class Flagged(nn.Module):
        def forward(self, x, flag: bool):
            return F.dropout(x, 0.5, training=flag) * 3

    gm = torch.fx.symbolic_trace(Flagged())
    x = torch.ones(1000)
    with pytest.raises(fxpasses.PassFailedError) as info:
        fxpasses.Pipeline.from_string("remove_dropout{inference=true}", verify="numeric").run(gm, [x, True])
    assert len(info.value.notes) == 2  # the pass's reason, then the nodes it changed
    assert info.value.notes[1] == "'remove_dropout' changed these nodes: %dropout (erased), %mul (edited)"
    assert info.value.notes[0].startswith(
        "remove_dropout{inference=true} removed dropout whose training flag is not a constant, which changes "
        "the outputs by design whenever the flag is true"
    )


class _ZeroP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.d = torch.nn.Dropout(0.0)

    def forward(self, x):
        return torch.nn.functional.dropout(x, 0.0, True) * 1, torch.nn.functional.dropout(x, 0.0, True), self.d(x) + 1


@pytest.mark.parametrize("dialect", ["symbolic_trace", "export", "dynamo"])
@pytest.mark.parametrize("inference", [False, True])
def test_a_dropout_of_probability_zero_is_its_input_in_training_mode_too(dialect, inference):
    """`F.dropout(x, 0.0, True)` returns x itself: it was an active dropout, kept (or with
    inference=true replaced by a clone, so the second output stopped aliasing the input and
    numeric verification refused the pass). It is the identity, removed in either mode."""
    from fxpasses.capture import capture

    x = torch.randn(4)
    c = capture(_ZeroP().train(), [x], dialect)
    report = fxpasses.Pipeline.from_string(f"remove_dropout{{inference={str(inference).lower()}}}", verify="numeric").run(
        c.gm, c.inputs
    )
    assert report["remove_dropout"].counters == {"removed": 3}
    assert report["remove_dropout"].status == "ok" and not report["remove_dropout"].notes
    assert not [n for n in c.gm.graph.nodes if "dropout" in str(n.target) or "clone" in str(n.target)]
    out = c.gm(*c.inputs)
    assert torch.equal(out[0], c.inputs[0]) and torch.equal(out[2], c.inputs[0] + 1)
    assert out[1] is c.inputs[0]  # the input itself, as eager returns it


def test_a_dropout_probability_of_false_is_zero():
    """`F.dropout(x, p=False, training=True)`: torch reads False as 0 (it returns x); it was kept
    as an active dropout (an adversarial check)."""

    class PFalse(torch.nn.Module):
        def forward(self, x):
            return F.dropout(x, p=False, training=True) + 1

    x = torch.randn(4)
    gm = torch.fx.symbolic_trace(PFalse())
    report = fxpasses.Pipeline.from_string("remove_dropout", verify="numeric").run(gm, [x])
    assert report["remove_dropout"].counters == {"removed": 1}
    assert torch.equal(gm(x), x + 1)
