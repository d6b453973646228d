"""Keyword example inputs (``example_kwargs``), as ``torch.export.export(model, args, kwargs)``
names them: numeric verification, shapes, bisection, reproducers, ``assert_preserves_outputs``,
capture and the CLI, on modules that must be called with their keywords."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import fxpasses
from fxpasses import GraphPass, Pipeline, UserError
from fxpasses.bisect import bisect
from fxpasses.capture import capture
from fxpasses.cli import cli
from fxpasses.errors import ConfigError, PassFailedError
from fxpasses.reproducer import ReproducerError, load_example_inputs, load_inputs, save_tensors, write_reproducer
from fxpasses.testing import assert_preserves_outputs
from fxpasses.verify import TensorState, call_isolated

from planted import load_planted, planted_registry

DIALECTS = ("symbolic_trace", "dynamo", "export")


class Masked(torch.nn.Module):
    """``x`` positional, ``mask`` keyword-only: ``lin(x) * mask`` per position, plus ``scale``
    (keyword-only, another shape, so that mixing the keywords up shows)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 4)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x, *, mask=None, scale=None):
        y = self.drop(self.lin(x))  # [2, 5, 4]
        y = y * mask.unsqueeze(-1)  # mask [2, 5]
        return torch.relu(y) + scale  # scale [4]


def masked_inputs():
    x = torch.randn(2, 5, 3)
    mask = torch.tensor([[1.0, 1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 1.0, 1.0, 1.0]])
    scale = torch.randn(4)
    return [x], {"scale": scale, "mask": mask}  # not in the signature's order, on purpose


@pytest.fixture(scope="module")
def planted():
    return load_planted("fxp_planted_keywords")


@pytest.fixture
def reg(planted):
    return planted_registry(planted)


def exported_masked():
    model = Masked().eval()
    args, kwargs = masked_inputs()
    return model, torch.export.export(model, tuple(args), kwargs).module(), args, kwargs


class IgnoreMask(GraphPass):
    """Replace the placeholder whose name holds "mask" by ones (wrong unless the mask is all ones)."""

    name = "ignore_mask"

    def run(self, gm, ctx):
        placeholders = list(gm.graph.find_nodes(op="placeholder"))
        mask = next(p for p in placeholders if "mask" in p.name)
        with gm.graph.inserting_after(placeholders[-1]):
            ones = gm.graph.call_function(torch.ops.aten.ones_like.default, (mask,))
        # the export input check (_guards_fn, a call_module) keeps the real input
        mask.replace_all_uses_with(ones, delete_user_cb=lambda u: u is not ones and u.op != "call_module")
        return True


class SeenInputs(GraphPass):
    """Record the example inputs the pass sees."""

    name = "seen_inputs"
    kind = "analysis"
    seen: list = []

    def run(self, gm, ctx):
        type(self).seen.append((ctx.example_inputs, ctx.example_kwargs))
        return False


# ------------------------------------------------------------------------ numeric verification


def test_numeric_verification_of_an_exported_module_with_keyword_inputs(planted, reg):
    model, gm, args, kwargs = exported_masked()
    with pytest.raises(ValueError, match="keyword"):  # torch.export's module takes its keywords only so
        gm(*args, kwargs["mask"], kwargs["scale"])
    report = Pipeline.from_string("remove_dropout,simplify_algebra,eliminate_dead_code", verify="numeric").run(
        gm, args, example_kwargs=kwargs
    )
    assert report["remove_dropout"].changed and report.max_abs_error == 0.0
    torch.testing.assert_close(gm(*args, **kwargs), model(*args, **kwargs), rtol=0, atol=0)

    # a wrong pass: drops the multiplication by the mask (planted's 1st rewrite replaces
    # mul(linear, unsqueeze(mask)) by linear). Caught only if verification ran on the real mask.
    _, gm, args, kwargs = exported_masked()
    code = gm.graph.python_code("self").src
    with pytest.raises(PassFailedError, match=r"pass 'planted' failed: verification failed: output: max abs error"):
        Pipeline.from_string("planted{wrong_at=1}", registry=reg, verify="numeric").run(gm, args, example_kwargs=kwargs)
    assert planted.Planted.log == ["mul"]
    assert gm.graph.python_code("self").src == code  # rolled back
    # the same wrong pass is right where the mask is all ones: the mask decided it
    _, gm, args, kwargs = exported_masked()
    ones = {**kwargs, "mask": torch.ones(2, 5)}
    Pipeline.from_string("planted{wrong_at=1}", registry=reg, verify="numeric").run(gm, args, example_kwargs=ones)


def test_earlier_blame_reruns_the_module_with_its_keywords(reg):
    """A numeric mismatch after a pass that changed the graph unverified: the note comes from
    running the module as it was before the failing pass, on the keyword inputs too."""
    _, gm, args, kwargs = exported_masked()
    pipeline = Pipeline.from_string("remove_dropout[verify=lint],planted{wrong_at=1}", registry=reg, verify="numeric")
    with pytest.raises(PassFailedError) as info:
        pipeline.run(gm, args, example_kwargs=kwargs)
    assert "before this pass the outputs still matched the module before the pipeline: this pass changed them" in str(
        info.value
    )


def test_module_level_run_and_context_see_the_keywords():
    _, gm, args, kwargs = exported_masked()
    SeenInputs.seen.clear()
    report = fxpasses.run(gm, [SeenInputs, "remove_dropout"], args, example_kwargs=kwargs, verify="numeric")
    assert report["remove_dropout"].changed
    (seen_args, seen_kwargs), = SeenInputs.seen
    # copies: the same values, not the caller's tensors (a pass may not write those)
    assert len(seen_args) == len(args) and seen_kwargs.keys() == kwargs.keys() and seen_kwargs is not kwargs
    for seen, given in [*zip(seen_args, args), *((seen_kwargs[k], kwargs[k]) for k in kwargs)]:
        assert torch.equal(seen, given) and seen is not given and seen.stride() == given.stride()
    # keywords only: the positional inputs are ()
    gm = torch.export.export(torch.nn.ReLU(), (), {"input": torch.randn(3)}).module()
    SeenInputs.seen.clear()
    fxpasses.run(gm, [SeenInputs], example_kwargs={"input": torch.randn(3)}, verify="numeric")
    assert SeenInputs.seen[0][0] == () and set(SeenInputs.seen[0][1]) == {"input"}


@pytest.fixture(scope="module")
def gpt2():
    """A small GPT-2 LM from transformers (random weights, no download), exported as Hugging
    Face models are called: keyword inputs only."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=32, use_cache=False,
        bos_token_id=99, eos_token_id=99,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[0, :3] = 0  # left padding
    kwargs = {"input_ids": ids, "attention_mask": mask}
    ep = torch.export.export(model, (), kwargs)
    return model, ep, kwargs


def test_gpt2_exported_with_keyword_inputs_is_verified_numerically(gpt2):
    model, ep, kwargs = gpt2
    gm = ep.module()
    expected = model(**kwargs).logits
    report = Pipeline.from_string(
        "remove_dropout,simplify_algebra,eliminate_common_subexpressions,eliminate_dead_code", verify="numeric"
    ).run(gm, example_kwargs=kwargs)
    assert report["remove_dropout"].changed and report.max_abs_error < 1e-5
    torch.testing.assert_close(gm(**kwargs)["logits"], expected)

    # ignoring the attention mask changes the logits of the padded row: caught, rolled back
    gm = ep.module()
    code = gm.graph.python_code("self").src
    with pytest.raises(PassFailedError, match=r"pass 'ignore_mask' failed: verification failed: output\['logits'\]"):
        Pipeline([IgnoreMask], verify="numeric").run(gm, example_kwargs=kwargs)
    assert gm.graph.python_code("self").src == code
    # with a mask of ones the same pass is harmless: the test depends on the mask given
    Pipeline([IgnoreMask], verify="numeric").run(
        ep.module(), example_kwargs={**kwargs, "attention_mask": torch.ones(2, 8, dtype=torch.int64)}
    )


# ------------------------------------------------------------------------------------- shapes


@pytest.mark.parametrize("mode", ["fake", "real"])
@pytest.mark.parametrize("dialect", ["export", "symbolic_trace"])
def test_propagate_shapes_maps_keywords_to_their_placeholders(mode, dialect):
    args, kwargs = masked_inputs()
    model = Masked().eval()
    if dialect == "export":
        gm = torch.export.export(model, tuple(args), kwargs).module()
        for p in gm.graph.find_nodes(op="placeholder"):  # shapes from the run only
            p.meta.pop("val", None)
            p.meta.pop("tensor_meta", None)
    else:
        gm = torch.fx.symbolic_trace(model)
    # keywords in another order than the signature's (mask, scale) and the export's (scale, mask)
    for order in (["scale", "mask"], ["mask", "scale"]):
        for node in gm.graph.nodes:
            node.meta.pop("tensor_meta", None)
        Pipeline.from_string(f"propagate_shapes{{mode={mode}}}").run(
            gm, args, example_kwargs={k: kwargs[k] for k in order}
        )
        shapes = {p.name: tuple(p.meta["tensor_meta"].shape) for p in gm.graph.find_nodes(op="placeholder")}
        assert shapes == {"x": (2, 5, 3), "mask": (2, 5), "scale": (4,)}
        out = next(iter(gm.graph.find_nodes(op="output"))).args[0]
        result = out[0] if isinstance(out, (tuple, list)) else out
        assert tuple(result.meta["tensor_meta"].shape) == (2, 5, 4)


def test_propagate_shapes_on_gpt2_keyword_placeholders(gpt2):
    _, ep, kwargs = gpt2
    gm = ep.module()
    for p in gm.graph.find_nodes(op="placeholder"):
        p.meta.pop("val", None)
    kwargs = {"attention_mask": kwargs["attention_mask"], "input_ids": kwargs["input_ids"]}  # other order
    report = Pipeline.from_string("propagate_shapes{mode=fake}").run(gm, example_kwargs=kwargs)
    assert report.passes[0].counters["nodes_annotated"] > 50
    placeholders = {p.name: p.meta["tensor_meta"] for p in gm.graph.find_nodes(op="placeholder")}
    assert {k: (tuple(v.shape), v.dtype) for k, v in placeholders.items()} == {
        "input_ids": ((2, 8), torch.int64),
        "attention_mask": ((2, 8), torch.int64),
    }
    logits = next(iter(gm.graph.find_nodes(op="output"))).args[0][0]
    assert tuple(logits.meta["tensor_meta"].shape) == (2, 8, 100)


# ----------------------------------------------------------------------------------- bisection


def test_bisect_with_keyword_inputs(reg, planted):
    _, gm, args, kwargs = exported_masked()
    code = gm.graph.python_code("self").src
    # rewrites: remove_dropout 1, then planted's copies of mul, relu, add: the 1st (mul) is wrong
    pipeline = Pipeline.from_string("remove_dropout,planted{wrong_at=1}", registry=reg)
    result = bisect(pipeline, gm, args, example_kwargs=kwargs)
    assert result.status == "found", result.text()
    assert result.pass_name == "planted" and result.culprit.index == 2 and result.culprit.pass_index == 1
    assert result.culprit.node["name"] == "mul"
    assert result.good.limit == 1 and not result.good.bad and result.bad.bad
    assert gm.graph.python_code("self").src == code
    # with an all-ones mask the dropped multiplication is right: nothing to find
    clean = bisect(pipeline, gm, args, example_kwargs={**kwargs, "mask": torch.ones(2, 5)})
    assert clean.status == "clean"
    with pytest.raises(UserError, match="bisect needs example inputs"):
        bisect(pipeline, gm, None)
    with pytest.raises(UserError, match="does not take: 'bogus'"):
        bisect(pipeline, gm, args, example_kwargs={**kwargs, "bogus": torch.ones(1)})


# ---------------------------------------------------------------------------------- reproducer


KW_MODELS = '''
import torch


class Masked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 4)

    def forward(self, x, *, mask=None):
        return torch.relu(self.lin(x) * mask.unsqueeze(-1))


def masked():
    torch.manual_seed(0)
    return Masked()
'''


def kw_config(tmp_path: Path, pipeline: str, capture_kind: str = "export") -> Path:
    d = tmp_path / "project"
    d.mkdir(exist_ok=True)
    (d / "kw_models.py").write_text(KW_MODELS)
    cfg = d / "fxpasses.toml"
    cfg.write_text(
        f'pipeline = "{pipeline}"\n'
        'verify = "numeric"\n'
        "[model]\n"
        'factory = "kw_models:masked"\n'
        f'capture = "{capture_kind}"\n'
        "seed = 3\n"
        "[model.inputs]\n"
        "0 = {shape = [2, 5, 3]}\n"
        'mask = {shape = [2, 5], dtype = "int64", low = 0, high = 2}\n'
    )
    return cfg


def test_reproducer_saves_and_replays_keyword_inputs(planted_site, tmp_path):
    cfg = kw_config(tmp_path, "remove_dropout,planted{wrong_at=1},eliminate_dead_code")
    rep = tmp_path / "repro"
    r = CliRunner().invoke(cli, ["run", str(cfg), "--reproducer", str(rep), "--repeat", "1", "--no-save"])
    assert r.exit_code == 1, r.output
    assert "pass 'planted' failed: verification failed: output" in r.output
    args, kwargs = load_example_inputs(rep / "inputs.safetensors")
    assert [a.shape for a in args] == [(2, 5, 3)] and list(kwargs) == ["mask"]
    assert kwargs["mask"].dtype == torch.int64 and 0 < int(kwargs["mask"].sum()) < 10  # zeros and ones
    with pytest.raises(ConfigError, match="holds keyword inputs \\(mask\\): read it with load_example_inputs"):
        load_inputs(rep / "inputs.safetensors")
    assert "keyword ones by their keyword" in (rep / "README.md").read_text()

    # the replay, without the model's module: fails the same way, so it called with the mask
    (cfg.parent / "kw_models.py").unlink()
    replay = CliRunner().invoke(cli, ["run", str(rep / "fxpasses.json"), "--repeat", "1", "--no-save"])
    assert replay.exit_code == 1, replay.output
    assert "pass 'planted' failed: verification failed: output" in replay.output
    # and with the mask made all ones the replayed wrong rewrite goes unnoticed: the mask counts
    save_tensors(rep / "inputs", {"0": args[0], "mask": torch.ones_like(kwargs["mask"])})
    ok = CliRunner().invoke(cli, ["run", str(rep / "fxpasses.json"), "--repeat", "1", "--no-save"])
    assert ok.exit_code == 0, ok.output


@pytest.mark.parametrize("capture_kind", ["symbolic_trace", "dynamo", "export"])
def test_cli_run_and_save_with_keyword_inputs(tmp_path, capture_kind):
    cfg = kw_config(tmp_path, "remove_dropout,eliminate_dead_code", capture_kind)
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["run", str(cfg), "--repeat", "1", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "outputs: match" in r.output  # checked again after reading the saved model back


def test_write_reproducer_refuses_keyword_inputs_it_cannot_store(tmp_path):
    _, gm, args, kwargs = exported_masked()
    pipeline = Pipeline.from_string("eliminate_dead_code")
    with pytest.raises(ReproducerError, match="keyword example input 'mask' is a float, not a tensor"):
        write_reproducer(tmp_path, gm, args, example_kwargs={**kwargs, "mask": 1.0}, pipeline=pipeline,
                         failed_step=0, error=RuntimeError("x"))
    with pytest.raises(ReproducerError, match="keyword example input '1' would read back as positional input 1"):
        write_reproducer(tmp_path, gm, args, example_kwargs={"1": torch.ones(1)}, pipeline=pipeline,
                         failed_step=0, error=RuntimeError("x"))


def test_inputs_file_positional_names_without_gaps(tmp_path):
    save_tensors(tmp_path / "inputs", {"0": torch.ones(1), "2": torch.ones(1), "mask": torch.ones(1)})
    with pytest.raises(ConfigError, match="positional input tensors must be named 0, 1, 2, ... without gaps, got 0, 2"):
        load_example_inputs(tmp_path / "inputs.safetensors")


# ------------------------------------------------------------------------ assert_preserves_outputs


def test_assert_preserves_outputs_with_keyword_inputs_in_every_dialect(planted, reg):
    args, kwargs = masked_inputs()
    more_args, more_kwargs = masked_inputs()
    results = assert_preserves_outputs(
        "remove_dropout,simplify_algebra,eliminate_dead_code", Masked().eval(), args, example_kwargs=kwargs,
        check_inputs=[more_args], check_kwargs=[more_kwargs],
    )
    assert set(results) == set(DIALECTS)
    assert all(report["remove_dropout"].changed for _, report in results.values())
    # a wrong pass (drops the multiplication by the mask) is caught in each dialect
    for dialect in DIALECTS:
        with pytest.raises(AssertionError, match=f"planted.* changed the outputs of Masked captured with {dialect} on example_inputs"):
            assert_preserves_outputs(
                "planted{wrong_at=1}", Masked().eval(), args, example_kwargs=kwargs, dialects=(dialect,), registry=reg
            )
    # on the check set only: the example mask all ones, the check set's not
    ones = {**kwargs, "mask": torch.ones(2, 5)}
    with pytest.raises(AssertionError, match="captured with export on check_inputs\\[0\\]"):
        assert_preserves_outputs(
            "planted{wrong_at=1}", Masked().eval(), args, example_kwargs=ones, dialects=("export",), registry=reg,
            check_inputs=[more_args], check_kwargs=[more_kwargs],
        )


def test_assert_preserves_outputs_argument_errors():
    args, kwargs = masked_inputs()
    with pytest.raises(UserError, match=r"check_inputs \(2 sets\) and check_kwargs \(1 sets\)"):
        assert_preserves_outputs("eliminate_dead_code", Masked(), args, example_kwargs=kwargs,
                                 check_inputs=[args, args], check_kwargs=[kwargs])
    with pytest.raises(UserError, match="check_kwargs name keyword input\\(s\\) that example_kwargs does not: 'bogus'"):
        assert_preserves_outputs("eliminate_dead_code", Masked(), args, example_kwargs=kwargs, dialects=("dynamo",),
                                 check_inputs=[args], check_kwargs=[{**kwargs, "bogus": torch.ones(1)}])
    with pytest.raises(UserError, match="example_kwargs keys must be keyword names \\(str\\): got the key 0 \\(int\\)"):
        assert_preserves_outputs("eliminate_dead_code", Masked(), args, example_kwargs={0: torch.ones(1)})


def test_fixture_runs_with_keyword_inputs(fxpasses_run, planted, reg):
    _, gm, args, kwargs = exported_masked()
    report = fxpasses_run(gm, "remove_dropout", args, example_kwargs=kwargs)  # numeric by default
    assert report.verification == "numeric" and report["remove_dropout"].changed
    _, gm, args, kwargs = exported_masked()
    with pytest.raises(PassFailedError, match="verification failed"):
        fxpasses_run(gm, Pipeline.from_string("planted{wrong_at=1}", registry=reg, verify="numeric"), args, example_kwargs=kwargs)


# -------------------------------------------------------------------------------------- capture


@pytest.mark.parametrize("dialect", DIALECTS)
def test_capture_with_keyword_inputs(dialect):
    args, kwargs = masked_inputs()
    model = Masked().eval()
    cap = capture(model, args, dialect, kwargs)
    if dialect == "dynamo":  # TorchDynamo passes every input positionally
        assert cap.kwargs == {} and any(t is kwargs["mask"] for t in cap.inputs)
    else:
        assert cap.kwargs == kwargs and cap.inputs == args
    out = call_isolated(cap.gm, cap.inputs, TensorState(cap.gm), cap.kwargs)
    torch.testing.assert_close(out if isinstance(out, torch.Tensor) else out[0], model(*args, **kwargs))


def test_call_isolated_copies_keyword_inputs():
    class WritesMask(torch.nn.Module):
        def forward(self, x, *, mask):
            mask.add_(1)
            return x * mask

    mask = torch.zeros(3)
    gm = torch.fx.symbolic_trace(WritesMask())
    out = call_isolated(gm, [torch.ones(3)], TensorState(gm), {"mask": mask})
    assert torch.equal(out, torch.ones(3)) and torch.equal(mask, torch.zeros(3))


# ---------------------------------------------------------------------------------------- errors


def test_a_dict_of_example_inputs_points_at_example_kwargs():
    _, gm, args, kwargs = exported_masked()
    with pytest.raises(UserError, match=r"got dict \(keyword inputs go in example_kwargs=, e\.g\. run\(gm, example_kwargs="):
        Pipeline.from_string("eliminate_dead_code", verify="numeric").run(gm, {"x": args[0], **kwargs})


@pytest.mark.parametrize(
    "bad, message",
    [
        ([torch.ones(2, 5)], "example_kwargs must be a mapping of keyword name -> input (a dict), got list"),
        ({("mask",): torch.ones(2, 5)}, "example_kwargs keys must be keyword names (str): got the key ('mask',) (tuple)"),
        ({1: torch.ones(2, 5)}, "example_kwargs keys must be keyword names (str): got the key 1 (int)"),
    ],
)
def test_example_kwargs_must_be_a_mapping_with_str_keys(bad, message):
    _, gm, args, _ = exported_masked()
    with pytest.raises(UserError) as info:
        Pipeline.from_string("eliminate_dead_code").run(gm, args, example_kwargs=bad)
    assert str(info.value) == message


@pytest.mark.parametrize("dialect", ["export", "symbolic_trace", "dynamo"])
def test_a_keyword_the_module_does_not_take_is_refused_before_any_pass(dialect):
    args, kwargs = masked_inputs()
    cap = capture(Masked().eval(), args, dialect, kwargs)
    gm = cap.gm
    code = gm.graph.python_code("self").src
    SeenInputs.seen.clear()
    for verify in ("lint", "numeric"):
        with pytest.raises(UserError) as info:
            Pipeline([SeenInputs, "remove_dropout"], verify=verify).run(
                gm, cap.inputs, example_kwargs={**cap.kwargs, "bogus": torch.ones(1)}
            )
        msg = str(info.value)
        if dialect == "export":
            assert msg == (
                "example_kwargs has keyword input(s) the module does not take: 'bogus'; the module takes 1 "
                "positional input(s) and the keyword input(s) 'scale', 'mask', as torch.export recorded them"
            )
        else:
            assert "the module does not take these example inputs: got an unexpected keyword argument 'bogus'" in msg
        if dialect == "dynamo":
            assert "a TorchDynamo graph takes every input positionally" in msg
    assert SeenInputs.seen == []  # no pass ran
    assert gm.graph.python_code("self").src == code


def test_keywords_of_an_exported_module_given_positionally_or_missing():
    _, gm, args, kwargs = exported_masked()
    SeenInputs.seen.clear()
    with pytest.raises(UserError) as info:
        Pipeline([SeenInputs]).run(gm, [*args, kwargs["mask"], kwargs["scale"]])
    assert str(info.value) == (
        "the example inputs miss the keyword input(s) 'scale', 'mask' (give them as example_kwargs={...}); the "
        "module takes 1 positional input(s) and the keyword input(s) 'scale', 'mask', as torch.export recorded them"
    )
    with pytest.raises(UserError, match=r"the example inputs miss the keyword input\(s\) 'scale'; the module takes"):
        Pipeline([SeenInputs]).run(gm, args, example_kwargs={"mask": kwargs["mask"]})
    with pytest.raises(UserError, match=r"got 0 positional example input\(s\) with example_kwargs; the module takes 1"):
        Pipeline([SeenInputs]).run(gm, example_kwargs=kwargs)
    with pytest.raises(UserError, match="does not take: 'x'"):
        Pipeline([SeenInputs]).run(gm, example_kwargs={"x": args[0], **kwargs})
    assert SeenInputs.seen == []


def test_a_module_that_does_not_run_on_its_keyword_inputs_is_a_user_error():
    _, gm, args, kwargs = exported_masked()
    with pytest.raises(UserError, match=r"the module does not run on the example inputs \(keywords: 'scale', 'mask'\): "):
        Pipeline.from_string("remove_dropout", verify="numeric").run(gm, args, example_kwargs={**kwargs, "mask": torch.ones(7)})
    with pytest.raises(UserError, match=r"numeric verification needs example_inputs \(positional\) or example_kwargs"):
        Pipeline.from_string("remove_dropout", verify="numeric").run(gm)


# ------------------------------------------------------------------------------------------ CLI


def test_config_inputs_table_gives_keyword_inputs(tmp_path):
    from fxpasses.config import parse_config
    from fxpasses.job import make_example_inputs

    cfg = parse_config({"model": {"factory": "m:f", "inputs": {
        "attention_mask": {"shape": [2, 4], "dtype": "int64", "low": 1, "high": 2},
        "0": {"shape": [3]},
    }}})
    args, kwargs = make_example_inputs(cfg.model.inputs, seed=0)
    assert [a.shape for a in args] == [(3,)] and list(kwargs) == ["attention_mask"]
    assert torch.equal(kwargs["attention_mask"], torch.ones(2, 4, dtype=torch.int64))
    again = make_example_inputs(cfg.model.inputs, seed=0)
    assert torch.equal(again[0][0], args[0])  # seeded
    with pytest.raises(ConfigError, match="keys 0, 1, ... are the positional inputs and must have no gaps nor leading zeros \\(got 1\\)"):
        parse_config({"model": {"factory": "m:f", "inputs": {"1": {"shape": [3]}}}})


def test_yaml_inputs_table_with_integer_keys(tmp_path):
    """YAML reads `0:` as the integer 0: it names the positional input, as "0" does in TOML."""
    from fxpasses.config import load_config_file
    from fxpasses.job import make_example_inputs

    path = tmp_path / "c.yaml"
    path.write_text(
        "model:\n  factory: m:f\n  inputs:\n    0: {shape: [4, 8]}\n    1: {shape: [2]}\n"
        "    mask: {shape: [4, 8], dtype: int64, high: 2}\n"
    )
    cfg = load_config_file(path)
    args, kwargs = make_example_inputs(cfg.model.inputs, seed=0)
    assert [tuple(a.shape) for a in args] == [(4, 8), (2,)] and list(kwargs) == ["mask"]
    path.write_text("model:\n  factory: m:f\n  inputs:\n    1: {shape: [2]}\n")
    with pytest.raises(ConfigError, match=r"must have no gaps nor leading zeros \(got 1\)"):
        load_config_file(path)


def test_cli_run_gpt2_with_keyword_inputs(tmp_path):
    examples = Path(__file__).resolve().parents[1] / "examples"
    cfg = tmp_path / "gpt2.toml"
    text = (examples / "gpt2_kwargs.toml").read_text()
    text = text.replace('factory = "models:gpt2"', f'factory = "{examples / "models.py"}:gpt2"')
    text = text.replace("n_layer = 2, n_embd = 128", "n_layer = 1, n_embd = 32").replace("vocab_size = 1000", "vocab_size = 100")
    text = text.replace("high = 1000", "high = 100").replace("[2, 32]", "[2, 8]")
    cfg.write_text(text)
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["run", str(cfg), "--repeat", "1", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "outputs: match" in r.output
    loaded = torch.export.load(str(out / "model.pt2"))
    assert set(loaded.call_spec.in_spec.child(1).context) == {"input_ids", "attention_mask"}
    report = json.loads((out / "report.json").read_text())
    assert report["report"]["passes"][0]["name"] == "remove_dropout"


def test_an_example_input_too_many_is_a_user_error_before_any_pass():
    """gm(a, a, a) of a two-input graph raises TypeError; the pipeline took the three inputs
    silently (propagate_shapes ran on the first two). It now refuses them, naming forward's
    signature, for a plain graph and for an exported one alike, and nothing runs."""
    import fxpasses
    from fxpasses.errors import UserError

    class Two(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    a = torch.randn(2)
    gm = torch.fx.symbolic_trace(Two())
    code = gm.code
    for pipeline in (["propagate_shapes"], ["eliminate_dead_code"]):
        with pytest.raises(UserError, match=r"the module does not take these example inputs: too many positional arguments \(it is forward\(x, y\); 3 positional given\)"):
            fxpasses.Pipeline(pipeline).run(gm, example_inputs=[a, a, a])
    assert gm.code == code and all("val" not in n.meta for n in gm.graph.nodes)
    report = fxpasses.Pipeline(["propagate_shapes"]).run(gm, example_inputs=[a, a])
    assert report.passes[0].status == "ok"
    exported = torch.export.export(Two(), (a, a)).module()
    with pytest.raises(UserError, match=r"got 3 positional example input\(s\); the module takes 2 positional input\(s\)"):
        fxpasses.Pipeline(["propagate_shapes"]).run(exported, example_inputs=[a, a, a])


@pytest.mark.parametrize("capture_kind", ["export", "symbolic_trace", "dynamo"])
def test_inputs_that_do_not_fit_forward_name_the_config_the_signature_and_the_input(tmp_path, capture_kind):
    """A keyword forward() does not take was "torch.export could not capture Masked:
    TypeError: ..." (blaming the capture) or "[model] inputs: ..." without the config file,
    depending on the capture (found by a new-user check)."""
    cfg = kw_config(tmp_path, "eliminate_dead_code", capture_kind)
    cfg.write_text(cfg.read_text() + "bogus = {shape = [2]}\n")
    r = CliRunner().invoke(cli, ["run", str(cfg), "--repeat", "1", "--no-save"])
    assert r.exit_code == 2, r.output
    assert r.stderr.strip() == (
        f"error: {cfg}: [model] inputs: 1 positional and keyword 'mask', 'bogus' input(s) do not fit "
        "Masked.forward(x, *, mask=None): got an unexpected keyword argument 'bogus'"
    )
    # a required input missing: the same place
    cfg.write_text(cfg.read_text().replace("0 = {shape = [2, 5, 3]}\n", "").replace("bogus = {shape = [2]}\n", ""))
    r = CliRunner().invoke(cli, ["run", str(cfg), "--repeat", "1", "--no-save"])
    assert r.exit_code == 2 and "do not fit Masked.forward(x, *, mask=None): missing a required argument: 'x'" in r.stderr
    # a misspelt keyword gets the name forward takes (a new-user check: none was suggested)
    cfg.write_text(cfg.read_text().replace("mask = {", "0 = {shape = [2, 5, 3]}\nmaks = {"))
    r = CliRunner().invoke(cli, ["run", str(cfg), "--repeat", "1", "--no-save"])
    assert r.exit_code == 2 and r.stderr.strip().endswith(
        "do not fit Masked.forward(x, *, mask=None): got an unexpected keyword argument 'maks' ('maks': did you mean 'mask'?)"
    ), r.stderr


def test_a_capture_that_fails_on_the_configs_inputs_names_them(tmp_path):
    """Inputs of shapes the model cannot take (4 channels into a 3-channel layer) were
    "torch.export could not capture M: RuntimeError: ..." and nothing on where the inputs came
    from (a new-user check): a note now gives their shapes and the config key."""
    d = tmp_path / "p"
    d.mkdir()
    (d / "m.py").write_text("import torch\ndef make():\n    return torch.nn.Linear(3, 2)\n")
    cfg = d / "c.toml"
    cfg.write_text('[model]\nfactory = "m:make"\ninputs = [{shape = [2, 4]}]\n')
    r = CliRunner().invoke(cli, ["run", str(cfg), "--repeat", "1", "--no-save"])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("error: torch.export could not capture Linear: RuntimeError")
    assert lines[-1] == f"  note: the example inputs were (2, 4) float32 ({cfg}: [model] inputs)"


def test_a_deep_copied_dynamo_graph_given_too_few_inputs_names_its_placeholders():
    # a deep copy of a GraphModule is lazily recompiled: its forward is (*args, **kwargs) until
    # first called, so the inputs were refused by the call itself, without the dynamo hint
    import copy

    args, kwargs = masked_inputs()
    cap = capture(Masked().eval(), args, "dynamo", kwargs)
    gm = copy.deepcopy(cap.gm)
    with pytest.raises(UserError) as info:
        Pipeline.from_string("eliminate_dead_code", verify="numeric").run(gm, cap.inputs[:1])
    msg = str(info.value)
    assert msg.startswith("the module does not take these example inputs: missing a required argument")
    assert "a TorchDynamo graph takes every input positionally" in msg
    Pipeline.from_string("eliminate_dead_code", verify="numeric").run(gm, cap.inputs)  # the whole set runs


def test_a_long_signature_is_shortened_in_the_refusal():
    """A TorchDynamo graph takes every parameter of the model as an input: its refusal printed
    the whole signature, 3-4 KB for a 2-layer Llama (a real-model sweep). A long one now shows
    its first parameters and how many there are, and how many inputs were given."""
    from fxpasses.inputs import check_accepted

    class Wide(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(6)])

        def forward(self, x):
            return self.layers(x)

    x = torch.randn(3, 2)
    gm = capture(Wide().eval(), [x], "dynamo").gm
    placeholders = [n.target for n in gm.graph.find_nodes(op="placeholder")]
    assert len(placeholders) == 13
    with pytest.raises(UserError) as info:
        check_accepted(gm, [x], None)
    assert str(info.value) == (
        f"the module does not take these example inputs: missing a required argument: {placeholders[1]!r} (it is "
        f"forward({', '.join(placeholders[:8])}, ... 5 more: 13 parameters); 1 positional given); a TorchDynamo graph "
        "takes every input positionally, keyword inputs and parameters included, in the order of its placeholders"
    )
