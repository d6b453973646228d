"""`fxpasses run`: the main job on the bundled example and on real models (GPT-2, BERT, a CNN)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import fxpasses
from fxpasses import Registry
from fxpasses.cli import cli
from fxpasses.config import load_config_file
from fxpasses.errors import UserError
from fxpasses.job import load_factory, load_folder, make_inputs

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_cli(*args):
    return CliRunner().invoke(cli, list(args))



def run_config(tmp_path, text: str):
    """`fxpasses run` of a config written from ``text``; the output directory."""
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(text)
    out = tmp_path / "out"
    r = run_cli("run", str(cfg), "-o", str(out), "--repeat", "1")
    assert r.exit_code == 0, r.output
    return out


def import_saved(out, name: str):
    """The OptimizedModule saved under ``out/module``, imported from its file as a user would."""
    spec = importlib.util.spec_from_file_location(name, out / "module" / "module.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.OptimizedModule()


def test_default_run_optimizes_the_bundled_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = run_cli("run", "--repeat", "2")
    assert r.exit_code == 0, r.output
    report = json.loads((tmp_path / "fxpasses-out/example/report.json").read_text())
    passes = {p["name"]: p for p in report["report"]["passes"]}
    assert passes["fuse_conv_bn"]["counters"]["fused"] == 2
    assert passes["remove_dropout"]["counters"]["removed"] == 1
    assert report["report"]["nodes_after"] < report["report"]["nodes_before"]
    assert report["max_abs_error"] <= 1e-5
    assert "latency:" in r.output and "nodes:" in r.output
    # the saved program reads back and gives the model's outputs
    from fxpasses._example import convnet

    program = torch.export.load(str(tmp_path / "fxpasses-out/example/model.pt2")).module()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert torch.allclose(program(x), convnet()(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "name, min_removed, pass_counts",
    [
        ("convnet", 10, {"fuse_conv_bn": ("fused", 3), "remove_dropout": ("removed", 1)}),
        ("gpt2", 10, {"remove_dropout": ("removed", 5), "eliminate_common_subexpressions": ("merged", 6)}),
        ("bert", 10, {"remove_dropout": ("removed", 5)}),
    ],
)
def test_real_models_shrink_and_keep_outputs(tmp_path, name, min_removed, pass_counts):
    out = tmp_path / name
    r = run_cli("run", str(EXAMPLES / f"{name}.toml"), "-o", str(out), "--repeat", "2")
    assert r.exit_code == 0, r.output
    data = json.loads((out / "report.json").read_text())
    rep = data["report"]
    assert rep["dialect"] == "export"
    assert rep["nodes_before"] - rep["nodes_after"] >= min_removed
    assert data["max_abs_error"] <= 1e-5
    passes = {p["name"]: p for p in rep["passes"]}
    assert all(p["status"] == "ok" for p in passes.values())
    for pass_name, (counter, value) in pass_counts.items():
        assert passes[pass_name]["counters"][counter] == value
    # the .pt2 reproduces the original model's outputs on fresh inputs
    cfg = load_config_file(EXAMPLES / f"{name}.toml")
    model = load_factory(cfg.model.factory, cfg._base_dir)(**cfg.model.kwargs).eval()
    inputs = make_inputs(cfg.model.inputs, seed=123)
    program = torch.export.load(str(out / "model.pt2")).module()
    with torch.no_grad():
        torch.testing.assert_close(program(*inputs), model(*inputs), atol=1e-5, rtol=1e-5)


def test_symbolic_trace_capture_saves_a_loadable_module(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "mlp"
    r = run_cli("run", str(EXAMPLES / "mlp.json"), "-o", "mlp", "--repeat", "2")  # a relative path
    monkeypatch.chdir(EXAMPLES)  # load it from elsewhere
    assert r.exit_code == 0, r.output
    assert "class OptimizedModule(torch.nn.Module)" in (out / "module" / "module.py").read_text()
    saved = import_saved(out, "saved_mlp")
    cfg = load_config_file(EXAMPLES / "mlp.json")
    model = load_factory(cfg.model.factory, cfg._base_dir)(**cfg.model.kwargs).eval()
    inputs = make_inputs(cfg.model.inputs, seed=7)
    with torch.no_grad():
        torch.testing.assert_close(saved(*inputs), model(*inputs), atol=1e-5, rtol=1e-5)


def test_saved_module_of_an_annotated_forward_imports_and_runs(tmp_path):
    """torch's to_folder writes annotations (`x : _torch_Tensor_`) it does not define."""
    out = run_config(
        tmp_path,
        f'pipeline = "remove_dropout,fuse_conv_bn"\n[model]\nfactory = "{(EXAMPLES / "models.py").as_posix()}:convnet"\n'
        'capture = "symbolic_trace"\ninputs = [{shape = [4, 3, 16, 16]}]\n',
    )
    text = (out / "module" / "module.py").read_text()
    assert "x : _torch_Tensor_" in text and "_torch_Tensor_ = torch.Tensor" in text
    model = load_factory(f"{(EXAMPLES / 'models.py').as_posix()}:convnet", tmp_path)().eval()
    x = torch.randn(4, 3, 16, 16)
    with torch.no_grad():
        torch.testing.assert_close(import_saved(out, "saved_convnet")(x), model(x), atol=1e-5, rtol=1e-5)


def test_dynamo_capture_saves_module_and_its_inputs(tmp_path):
    out = run_config(
        tmp_path,
        f'preset = "cleanup"\n[model]\nfactory = "{(EXAMPLES / "models.py").as_posix()}:mlp"\n'
        'capture = "dynamo"\ninputs = [{shape = [4, 32]}]\n',
    )
    inputs = torch.load(out / "inputs.pt", weights_only=True)
    assert any(t.ndim == 2 and t.shape[0] != 4 for t in inputs)  # the weights came along
    result = import_saved(out, "saved_dyn")(*inputs)
    assert isinstance(result, (tuple, list))
    # the documented loader, from a str path, gives the same module
    loaded = load_folder(str(out / "module"))
    assert type(loaded).__name__ == "OptimizedModule"
    torch.testing.assert_close(loaded(*inputs), result, atol=0, rtol=0)


@pytest.mark.parametrize("train", [False, True])
def test_a_saved_module_keeps_each_modules_training_mode(tmp_path, train):
    """to_folder rebuilds every module in training mode: an eval-mode model whose BatchNorm1d
    no pass fuses (no conv before it) read back normalizing with batch statistics, and the
    run failed its own read-back check (found by a new-user check: `fxpasses run` of a
    Linear-BatchNorm1d MLP with the default preset). Mixed modes are kept too."""
    (tmp_path / "mbn.py").write_text(
        "import torch\n"
        "def mlpbn():\n"
        "    torch.manual_seed(0)\n"
        "    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(),\n"
        "                            torch.nn.Dropout(0.5), torch.nn.Linear(16, 4))\n"
        "    with torch.no_grad():\n"
        "        m[1].running_mean.fill_(0.5)\n"
        "        m[1].running_var.fill_(2.0)\n"
        "    return m\n"
    )
    pipeline = "fold_constants" if train else "remove_dropout"
    out = run_config(
        tmp_path,
        f'pipeline = "{pipeline}"\n[model]\nfactory = "mbn:mlpbn"\ncapture = "symbolic_trace"\n'
        f"train = {str(train).lower()}\ninputs = [{{shape = [4, 8]}}]\n",
    )
    loaded = load_folder(out / "module")
    modes = {name: m.training for name, m in loaded.named_modules()}
    assert {"", "0", "1", "4"} <= modes.keys() and set(modes.values()) == {train}
    if not train:  # the eval-mode BatchNorm normalizes with its running statistics
        x = torch.randn(4, 8)
        lin = loaded.get_submodule("0")(x)
        expected = (lin - 0.5) / torch.sqrt(torch.tensor(2.0) + 1e-5) * loaded.get_submodule("1").weight
        torch.testing.assert_close(loaded.get_submodule("1")(lin), expected + loaded.get_submodule("1").bias)
    # modules in mixed modes (a GraphModule saved as `fxpasses run` saves it)
    from fxpasses.job import _keep_module_state

    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2)))
    gm.eval()
    gm.get_submodule("0").train()
    gm.to_folder(tmp_path / "mixed", "OptimizedModule")
    _keep_module_state(tmp_path / "mixed" / "module.py", gm)
    modes = {name: m.training for name, m in load_folder(tmp_path / "mixed").named_modules()}
    assert modes == {"": False, "0": True, "1": False, "2": False}


FROZEN_SOURCE = (
    "import torch\n"
    "def frozen():\n"
    "    torch.manual_seed(0)\n"
    "    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))\n"
    "    m[0].requires_grad_(False)\n"
    "    return m\n"
    "def allfrozen():\n"
    "    return frozen().requires_grad_(False)\n"
)


@pytest.mark.parametrize("factory", ["frozen", "allfrozen"])
def test_a_saved_module_keeps_frozen_parameters_frozen(tmp_path, monkeypatch, factory):
    """`load_state_dict` into the rebuilt modules made every parameter require grad: a frozen
    backbone came back trainable, and a frozen model's outputs required grad (found by a
    new-user check); the read-back check compared values only, so the run said the outputs
    matched. The saved dynamo inputs (parameters among them) keep requires_grad too."""
    (tmp_path / "fz.py").write_text(FROZEN_SOURCE)
    text = f'pipeline = "eliminate_dead_code"\n[model]\nfactory = "fz:{factory}"\ncapture = "CAPTURE"\ntrain = true\ninputs = [{{shape = [4, 8]}}]\n'
    expected = {"0.weight": False, "0.bias": False, "2.weight": factory == "frozen", "2.bias": factory == "frozen"}
    out = run_config(tmp_path, text.replace("CAPTURE", "symbolic_trace"))
    loaded = load_folder(out / "module")
    assert {n: p.requires_grad for n, p in loaded.named_parameters()} == expected
    assert loaded(torch.randn(4, 8)).requires_grad is (factory == "frozen")
    out = run_config(tmp_path, text.replace("CAPTURE", "dynamo"))
    saved_inputs = torch.load(out / "inputs.pt", weights_only=True)
    assert [t.requires_grad for t in saved_inputs] == [False, *expected.values()]
    if factory == "frozen":
        return
    # without the fix, the read-back check itself now catches the outputs' requires_grad
    import fxpasses.job

    monkeypatch.setattr(fxpasses.job, "_keep_module_state", lambda module_py, gm: None)
    (tmp_path / "cfg.toml").write_text(text.replace("CAPTURE", "symbolic_trace"))
    r = run_cli("run", str(tmp_path / "cfg.toml"), "-o", str(tmp_path / "out2"), "--repeat", "1")
    assert r.exit_code == 1 and "read back gives other outputs than the module saved: output: requires grad" in r.output, r.output


@pytest.mark.parametrize("earlier", ["other", "same"])
@pytest.mark.parametrize("capture", ["symbolic_trace", "dynamo", "export"])
def test_a_failed_save_leaves_no_partial_model(tmp_path, monkeypatch, capture, earlier):
    """A save that failed (here its read-back check, as when a rebuilt module computes
    otherwise) left `module/module.py` and `state_dict.pt` (or `model.pt2`) behind, which a
    user could load as the optimized model; and the earlier run's report.json, whose saved
    files the failed save had replaced, still listed them. Now the failed save removes what
    it wrote and the stale report; what the earlier run saved for another capture is gone.
    `earlier="same"`: an earlier run of the same capture saved there; a `model.pt2` the failed
    save wrote over it was kept (it was there before), with the earlier report listing it."""
    import fxpasses.job
    from fxpasses.errors import VerificationError

    (tmp_path / "fz.py").write_text(FROZEN_SOURCE)
    text = 'pipeline = "eliminate_dead_code"\n[model]\nfactory = "fz:frozen"\ncapture = "CAPTURE"\ninputs = [{shape = [4, 8]}]\n'
    other = "export" if capture != "export" else "symbolic_trace"
    out = run_config(tmp_path, text.replace("CAPTURE", other if earlier == "other" else capture))
    assert (out / "report.json").is_file()
    user_file = out / "notes.txt"  # not ours: stays
    user_file.write_text("mine")

    def fail(*args, **kwargs):
        raise VerificationError("read back gives other outputs (planted)")

    monkeypatch.setattr(fxpasses.job, "_check_read_back", fail)
    (tmp_path / "cfg.toml").write_text(text.replace("CAPTURE", capture))
    r = run_cli("run", str(tmp_path / "cfg.toml"), "-o", str(out), "--repeat", "1")
    assert r.exit_code == 1 and "planted" in r.output, r.output
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == ["notes.txt"]
    assert user_file.read_text() == "mine"


def test_a_saved_module_keeps_tied_weights_tied(tmp_path):
    """to_folder saves and loads each parameter apart: with `train = true` and symbolic_trace a
    tied pair came back as two tensors, and fine-tuning the saved module moved them apart
    (found by a new-user check; the read-back check saw equal outputs)."""
    (tmp_path / "tied.py").write_text(
        "import torch\n"
        "class Tied(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)\n"
        "        self.b.weight = self.a.weight\n"
        "    def forward(self, x):\n"
        "        return self.b(self.a(x))\n"
        "def tied():\n"
        "    torch.manual_seed(0)\n"
        "    return Tied()\n"
    )
    out = run_config(
        tmp_path,
        'pipeline = "eliminate_dead_code"\n[model]\nfactory = "tied:tied"\ncapture = "symbolic_trace"\n'
        "train = true\ninputs = [{shape = [2, 4]}]\n",
    )
    loaded = load_folder(out / "module")
    assert loaded.get_submodule("a").weight is loaded.get_submodule("b").weight
    assert loaded.get_submodule("a").bias is not loaded.get_submodule("b").bias
    # fine-tuning the saved module tracks the model
    import importlib

    model = importlib.import_module("tied").tied()
    x = torch.randn(2, 4)
    for m in (model, loaded):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            m(x).square().sum().backward()
            opt.step()
    torch.testing.assert_close(loaded(x), model(x))
    # a buffer under two names (symbolic_trace keeps one name per tensor: a graph built so)
    from fxpasses.job import _keep_module_state

    root = torch.nn.Module()
    root.register_buffer("s", torch.ones(4))
    root.c = torch.nn.Module()
    root.c.register_buffer("s2", root.s)
    graph = torch.fx.Graph()
    x_ = graph.placeholder("x")
    graph.output(graph.call_function(torch.add, (graph.call_function(torch.mul, (x_, graph.get_attr("s"))), graph.get_attr("c.s2"))))
    gm = torch.fx.GraphModule(root, graph)
    assert gm.get_buffer("s") is gm.get_buffer("c.s2")
    gm.to_folder(tmp_path / "buffers", "OptimizedModule")
    _keep_module_state(tmp_path / "buffers" / "module.py", gm)
    again = load_folder(tmp_path / "buffers")
    assert again.get_buffer("s") is again.get_buffer("c.s2")
    # a plain tensor attribute that is a buffer's tensor (a graph reading it under both names)
    root = torch.nn.Module()
    root.register_buffer("s", torch.ones(4))
    object.__setattr__(root, "const", root.s)  # not a buffer: a plain attribute
    graph = torch.fx.Graph()
    x_ = graph.placeholder("x")
    graph.output(graph.call_function(torch.add, (graph.call_function(torch.mul, (x_, graph.get_attr("s"))), graph.get_attr("const"))))
    gm = torch.fx.GraphModule(root, graph)
    assert gm.get_buffer("s") is gm.const
    gm.to_folder(tmp_path / "plain", "OptimizedModule")
    _keep_module_state(tmp_path / "plain" / "module.py", gm)
    again = load_folder(tmp_path / "plain")
    assert again.get_buffer("s") is again.const
    again.get_buffer("s").add_(1)
    torch.testing.assert_close(again(torch.zeros(4)), torch.full((4,), 2.0))


def test_load_folder_names_a_folder_without_a_saved_module(tmp_path):
    with pytest.raises(UserError, match=r"out holds no module\.py: give the 'module' folder.*model\.pt2"):
        load_folder(tmp_path / "out")


def test_stateful_and_random_models_compare_like_for_like(tmp_path):
    (tmp_path / "m.py").write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__(); self.register_buffer('n', torch.zeros(1))\n"
        "    def forward(self, x):\n"
        "        self.n.add_(1); x.mul_(2)\n"
        "        return x * 1 + self.n + torch.randn_like(x)\n"
        "def make():\n    return M()\n"
    )
    cfg = tmp_path / "c.toml"
    cfg.write_text('pipeline = "simplify_algebra,eliminate_common_subexpressions,eliminate_dead_code"\n'
                   '[model]\nfactory = "m:make"\ncapture = "export"\ninputs = [{shape = [3]}]\n')
    r = run_cli("run", str(cfg), "--no-save", "--repeat", "2")
    assert r.exit_code == 0, r.output
    assert "outputs: match (max abs error 0)" in r.output


@pytest.mark.parametrize(
    "config, fault",
    [
        ('pipeline = "eliminate_dead_code"\n[model]\nfactory = "nowhere_module:f"\ninputs = [{shape = [1]}]\n', "cannot import model factory module 'nowhere_module'"),
        ('pipeline = "eliminate_dead_code"\n[model]\nfactory = "models:nothing"\ninputs = [{shape = [1]}]\n', "has no attribute 'nothing'"),
        ('pipeline = "eliminate_dead_code"\n[model]\nfactory = "models:convnet"\ninputs = []\n', "inputs"),
        ('pipeline = "eliminate_dead_code"\n[model]\nfactory = "models:convnet"\ninputs = [{shape = [1, 3], dtype = "complex"}]\n', "dtype"),
        ('pipeline = "eliminate_dead_code"\n[model]\nfactory = "models:convnet"\ncapture = "jit"\ninputs = [{shape = [1]}]\n', "capture"),
        ('pipeline = "eliminate_dead_code"\n[model]\nfactory = "models:convnet"\ninputs = [{shape = [1, 7, 5, 5]}]\n', "could not capture"),
    ],
)
def test_bad_run_configs_exit_2_and_write_nothing(tmp_path, config, fault):
    (tmp_path / "models.py").write_text((EXAMPLES / "models.py").read_text())
    cfg = tmp_path / "bad.toml"
    cfg.write_text(config)
    out = tmp_path / "out"
    r = run_cli("run", str(cfg), "-o", str(out))
    assert r.exit_code == 2, r.output
    assert fault in r.output
    assert "Traceback" not in r.output
    assert not out.exists()


def test_skipped_pass_reason_is_printed(tmp_path, monkeypatch):
    from dists import forget_modules, make_dist

    site = tmp_path / "site"
    make_dist(
        site, "failing-dist", "0.1", "fxp_failing",
        """
        import fxpasses
        class Fails(fxpasses.GraphPass):
            "Always fails."
            name = "always_fails"
            def run(self, gm, ctx):
                raise RuntimeError("nothing works today")
        @fxpasses.hookimpl
        def fxpasses_register_passes(register):
            register(Fails)
        """,
    )
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    forget_modules("fxp_failing")
    monkeypatch.chdir(tmp_path)
    r = run_cli("run", "--no-save", "--repeat", "1", "--pipeline", "always_fails,eliminate_dead_code")
    assert r.exit_code == 1 and "nothing works today" in r.output
    cfg = tmp_path / "skip.toml"
    cfg.write_text('pipeline = "always_fails,eliminate_dead_code"\non_error = "skip"\n'
                   '[model]\nfactory = "fxpasses._example:convnet"\ninputs = [{shape = [1, 3, 32, 32]}]\n')
    r = run_cli("run", str(cfg), "--no-save", "--repeat", "1")
    assert r.exit_code == 0, r.output
    assert "skipped: pass 'always_fails' failed: RuntimeError: nothing works today" in r.output
    forget_modules("fxp_failing")


def test_absurd_input_shape_is_a_user_error(tmp_path):
    cfg = tmp_path / "huge.toml"
    cfg.write_text('preset = "cleanup"\n[model]\nfactory = "fxpasses._example:convnet"\n'
                   'inputs = [{shape = [100000, 100000, 100000]}]\n')
    r = run_cli("run", str(cfg), "--no-save")
    assert r.exit_code == 2
    assert "[model] inputs: input 0 of shape [100000, 100000, 100000] (float32) would take" in r.output


def test_latency_is_the_fastest_timed_call_not_the_median():
    """Load from other processes only adds time: one slow call in three must not show."""
    import itertools
    import time

    from fxpasses.job import _latency_ms

    delays = itertools.cycle([0.0, 0.03, 0.03])
    ms = _latency_ms(lambda: time.sleep(next(delays)), repeat=6, warmup=0)
    assert ms < 15.0  # the median would be about 30 ms


def test_latency_note_only_for_a_change_beyond_five_fold_with_several_threads():
    from fxpasses.job import latency_note

    note = latency_note(0.344, 31.913, 2)
    assert note == (
        "latency changed 93-fold; with other processes on the cores, torch's 2 intra-op threads can make "
        "every timed call slow: time it again with OMP_NUM_THREADS=1"
    )
    assert latency_note(31.913, 0.344, 2).startswith("latency changed 93-fold")  # either way
    assert latency_note(1.0, 5.0, 2) == "" and latency_note(5.0, 1.0, 8) == ""  # at most 5x
    assert latency_note(0.344, 31.913, 1) == ""  # one thread: the model's own time
    assert latency_note(0.0, 3.0, 2) == ""


def test_run_prints_the_latency_note_and_puts_it_in_the_json(tmp_path, monkeypatch):
    import fxpasses.job as job

    times = iter([0.3, 30.0])
    monkeypatch.setattr(job, "_latency_ms", lambda fn, repeat, warmup=5: next(times))
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    monkeypatch.chdir(tmp_path)
    r = run_cli("run", "--repeat", "1")
    assert r.exit_code == 0, r.output
    assert "latency: 0.300 ms -> 30.000 ms (best of 1; 0.01x)\nnote: latency changed 100-fold; with other " in r.output
    report = json.loads((tmp_path / "fxpasses-out/example/report.json").read_text())
    assert report["latency_note"].startswith("latency changed 100-fold") and "OMP_NUM_THREADS=1" in report["latency_note"]
    times = iter([0.3, 0.31])
    r = run_cli("run", "--repeat", "1", "--no-save")
    assert r.exit_code == 0 and "note:" not in r.output


# ------------------------------------------------------------------ saved exported programs

SMALL_CNN = """
import torch, torch.nn as nn

def small_cnn():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Dropout(0.2), nn.Flatten(), nn.Linear(144, 5))
    with torch.no_grad():
        m[1].running_mean.uniform_(-1, 1); m[1].running_var.uniform_(0.5, 2)
    return m.eval()
"""


def saved_program(tmp_path):
    """A small CNN (conv + BN + dropout), exported, saved as tmp_path/model.pt2; (model, x)."""
    ns: dict = {}
    exec(SMALL_CNN, ns)
    model = ns["small_cnn"]()
    x = torch.randn(2, 3, 8, 8)
    torch.export.save(torch.export.export(model, (x,)), str(tmp_path / "model.pt2"))
    (tmp_path / "small_models.py").write_text(
        SMALL_CNN
        + "\ndef loaded():\n    return torch.export.load(__file__.rsplit('/', 1)[0] + '/model.pt2').module()\n"
        + "\ndef program():\n    return torch.export.load(__file__.rsplit('/', 1)[0] + '/model.pt2')\n"
    )
    return model, x


def test_run_optimizes_a_saved_exported_program_and_its_own_model_pt2(tmp_path):
    model, _ = saved_program(tmp_path)
    cfg = tmp_path / "pt2.toml"
    cfg.write_text('verify = "numeric"\n[model]\nprogram = "model.pt2"\ninputs = [{shape = [2, 3, 8, 8]}]\n')
    out = tmp_path / "out"
    r = run_cli("run", str(cfg), "-o", str(out), "--repeat", "1")
    assert r.exit_code == 0, r.output
    data = json.loads((out / "report.json").read_text())
    passes = {p["name"]: p for p in data["report"]["passes"]}
    assert data["report"]["dialect"] == "export" and data["model"] == "model.pt2"
    assert passes["fuse_conv_bn"]["counters"]["fused"] == 1
    assert passes["remove_dropout"]["counters"]["removed"] == 1
    assert data["max_abs_error"] <= 1e-5
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(torch.export.load(str(out / "model.pt2")).module()(x), model(x), atol=1e-5, rtol=1e-5)
    # `fxpasses run` on the model.pt2 it saved, writing it again in place
    again = tmp_path / "again.toml"
    again.write_text(f'[model]\nprogram = "{(out / "model.pt2").as_posix()}"\ninputs = [{{shape = [2, 3, 8, 8]}}]\n')
    r = run_cli("run", str(again), "-o", str(out), "--repeat", "1")
    assert r.exit_code == 0, r.output
    assert "outputs: match (max abs error 0)" in r.output
    assert "(export, loaded in " in r.output and "captured in" not in r.output
    assert json.loads((out / "report.json").read_text())["report"]["passes"][0]["changed"] is False  # nothing left
    with torch.no_grad():
        torch.testing.assert_close(torch.export.load(str(out / "model.pt2")).module()(x), model(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("factory", ["loaded", "program"])
def test_a_factory_returning_an_exported_module_is_used_as_it_is(tmp_path, factory, monkeypatch):
    """torch.export.load(p).module() (whose train() raises) or the ExportedProgram itself."""
    from fxpasses.config import parse_config
    from fxpasses.job import prepare_model

    saved_program(tmp_path)
    cfg = tmp_path / "f.toml"
    cfg.write_text(f'[model]\nfactory = "small_models:{factory}"\ninputs = [{{shape = [2, 3, 8, 8]}}]\n')
    r = run_cli("run", str(cfg), "--no-save", "--repeat", "1")
    assert r.exit_code == 0, r.output
    assert "(export, loaded in" in r.output and "outputs: match" in r.output
    # not captured again: the graph optimized is the exported module's own
    c = parse_config({"model": {"factory": f"small_models:{factory}", "inputs": [{"shape": [2, 3, 8, 8]}]}})
    c._base_dir = tmp_path

    def no_export(*args, **kwargs):
        raise AssertionError("captured again")

    monkeypatch.setattr(torch.export, "export", no_export)
    cap = prepare_model(c).captured
    assert cap.dialect == "export"
    assert "_StatefulGraphModule" in [k.__name__ for k in type(cap.gm).__mro__]


@pytest.mark.parametrize(
    "model_table, fault",
    [
        ('program = "model.pt2"\ntrain = true', "model: `train = true`: the training/eval mode of an exported module is fixed when it is exported"),
        ('factory = "small_models:loaded"\ntrain = true', "[model] train: small_models:loaded returned an exported module: the training/eval mode of an exported module is fixed when it is exported"),
        ('factory = "small_models:program"\ntrain = true', "[model] train: small_models:program returned an exported module"),
        ('program = "model.pt2"\ncapture = "symbolic_trace"', "`capture = 'symbolic_trace'`: a saved `program` is an exported module already"),
        ('factory = "small_models:loaded"\ncapture = "dynamo"', "[model] capture: small_models:loaded returned an exported module"),
        ('program = "nowhere.pt2"', "[model] program: program file not found"),
        ('program = "small_models.py"', "[model] program: cannot load"),
        ('program = "state.pt2"', "with torch.export.load: RuntimeError: PytorchStreamReader failed locating file archive_format: file not found (is it a program written by torch.export.save? a file of torch.save is not one)"),
        ('program = "folder.pt2"', "folder.pt2 is a directory, expected a file (a program saved by torch.export.save, .pt2)"),
        ('program = "model.pt2"\nkwargs = {a = 1}', "`kwargs` are for a factory; a saved `program` takes none"),
        ('program = "model.pt2"\ngraph = "g.py"', "give either `factory` (a model to capture) or `graph` (a saved graph file) or `program`"),
    ],
)
def test_exported_module_config_errors_exit_2(tmp_path, model_table, fault):
    saved_program(tmp_path)
    torch.save({"w": torch.zeros(2)}, tmp_path / "state.pt2")  # torch.save: not a program
    (tmp_path / "folder.pt2").mkdir()
    cfg = tmp_path / "bad.toml"
    cfg.write_text(f"[model]\n{model_table}\ninputs = [{{shape = [2, 3, 8, 8]}}]\n")
    out = tmp_path / "out"
    r = run_cli("run", str(cfg), "-o", str(out))
    assert r.exit_code == 2, r.output
    assert fault in r.output
    assert "Traceback" not in r.output and "unexpected" not in r.output
    assert not out.exists()


def test_errors_from_the_models_own_code_are_user_errors_naming_it(tmp_path):
    (tmp_path / "odd.py").write_text(
        "import torch\n"
        "class NoModes(torch.nn.Linear):\n"
        "    def train(self, mode=True):\n"
        "        raise NotImplementedError('modes are not for me')\n"
        "def no_modes():\n    return NoModes(2, 2)\n"
        "def raises():\n    raise KeyError('weights.bin')\n"
        "def _lazy():\n    raise RuntimeError('operator torchvision::nms does not exist')\n"
        "def hides_its_cause():\n"
        "    try:\n        _lazy()\n"
        "    except RuntimeError as e:\n        raise ModuleNotFoundError('Could not import module GPT2LMHeadModel') from e\n"
    )
    for factory, fault in [
        ("no_modes", "[model] train: the model odd:no_modes returned cannot be put in eval mode: "
                     "NoModes.train(False) raised NotImplementedError: modes are not for me"),
        ("raises", "[model] factory: the model factory odd:raises raised KeyError: 'weights.bin'\n"),
        # (transformers' lazy import hid torchvision's error two levels down: a new-user check)
        ("hides_its_cause", "the model factory odd:hides_its_cause raised ModuleNotFoundError: Could not import module "
                            "GPT2LMHeadModel (its root cause: RuntimeError: operator torchvision::nms does not exist)"),
    ]:
        cfg = tmp_path / f"{factory}.toml"
        cfg.write_text(f'[model]\nfactory = "odd:{factory}"\ninputs = [{{shape = [2]}}]\n')
        r = run_cli("run", str(cfg), "--no-save")
        assert r.exit_code == 2, r.output
        assert fault in r.output
        assert "unexpected" not in r.output


def test_a_pipeline_that_changes_the_outputs_on_purpose_says_so(tmp_path):
    """remove_dropout{inference=true} on a training-mode model, verified by lint only: the
    job's own comparison fails (exit 1) and names the pass's reason."""
    (tmp_path / "drop.py").write_text(
        "import torch\n"
        "def drop():\n    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5))\n"
    )
    cfg = tmp_path / "drop.toml"
    cfg.write_text('pipeline = "remove_dropout{inference=true}"\nverify = "lint"\n'
                   '[model]\nfactory = "drop:drop"\ntrain = true\ninputs = [{shape = [4, 8]}]\n')
    r = run_cli("run", str(cfg), "--no-save", "--repeat", "1")
    assert r.exit_code == 1, r.output
    assert "error: the optimized model's outputs differ from the original" in r.output
    assert "note: remove_dropout{inference=true} removed dropout that is active in training mode, which changes the outputs by design" in r.output
    assert "whatever `verify` is" in r.output
    assert f"note: to find the rewrite that changed the outputs, run `fxpasses bisect {cfg}`" in r.output
    # the passes that ran are shown (on stdout; as `passes` in JSON), as for a pass failure
    # (they were not when the run's own comparison failed: a new-user check)
    assert r.stdout.startswith("passes run until the failure (export):\npass ")
    assert "remove_dropout  ok" in r.stdout and "failed:" not in r.stdout
    j = run_cli("run", str(cfg), "--no-save", "--repeat", "1", "--format", "json")
    error = json.loads(j.stdout)["error"]
    assert error["type"] == "VerificationError" and [p["name"] for p in error["passes"]] == ["remove_dropout"]


def test_reproducer_asked_for_says_why_none_is_written_when_only_the_end_differs(tmp_path):
    """--reproducer, and outputs that differ only at the job's own comparison after the run
    (a pass verified by lint): no pass failed, so no reproducer is written, and the error says
    so and why (before, it said nothing about the reproducer asked for)."""
    (tmp_path / "drop.py").write_text(
        "import torch\n"
        "def drop():\n    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5))\n"
    )
    cfg = tmp_path / "drop.toml"
    cfg.write_text('pipeline = "eliminate_dead_code,remove_dropout{inference=true}"\nverify = "lint"\n'
                   '[model]\nfactory = "drop:drop"\ntrain = true\ninputs = [{shape = [4, 8]}]\n')
    repro = tmp_path / "repro"
    r = run_cli("run", str(cfg), "--no-save", "--repeat", "1", "--reproducer", str(repro))
    assert r.exit_code == 1, r.output
    assert (
        'note: no reproducer written (--reproducer): verify = "lint" for passes remove_dropout, '
        "eliminate_dead_code, which does not run the model, so no pass failed; with verify = \"numeric\" the first "
        "pass that changes the outputs fails, and its reproducer is written"
    ) in r.output
    assert not (repro / "fxpasses.json").exists()
    # without --reproducer, no such note
    r = run_cli("run", str(cfg), "--no-save", "--repeat", "1")
    assert r.exit_code == 1 and "no reproducer written" not in r.output


def test_no_reproducer_note_when_every_pass_verified_numerically():
    """The note's other case: every pass was checked numerically and passed, so the
    difference shows only in the whole run's comparison; none at all without a reproducer."""
    from fxpasses import Pipeline
    from fxpasses.job import _no_reproducer_note

    numeric = Pipeline(["eliminate_dead_code", "remove_dropout"], verify="numeric")
    assert _no_reproducer_note(numeric, object()) == (
        "\n  note: no reproducer written (--reproducer): every pass passed its own numeric check, so no pass "
        "failed; the difference shows only when the whole run is compared (see the bisect note)"
    )
    assert _no_reproducer_note(numeric, None) == ""
    mixed = Pipeline(["eliminate_dead_code", {"name": "remove_dropout", "verify": "numeric"}], verify="lint")
    assert 'verify = "lint" for pass eliminate_dead_code, which' in _no_reproducer_note(mixed, object())


def test_integer_input_range_error_names_the_input():
    """An empty [low, high) for an integer input is a ConfigError naming that input, found
    when the config is read (`fxpasses check` too), not when the input is made."""
    from fxpasses.config import parse_config
    from fxpasses.errors import ConfigError

    model = {"factory": "m:make"}
    with pytest.raises(ConfigError, match=r"model\.inputs\.mask: high \(5\) must be greater than low \(5\)"):
        parse_config({"model": {**model, "inputs": {"0": {"shape": [2]}, "mask": {"shape": [2], "dtype": "int64", "low": 5, "high": 5}}}})
    with pytest.raises(ConfigError, match=r"model\.inputs\.1: high \(3\) must be greater than low \(4\)"):
        parse_config({"model": {**model, "inputs": [{"shape": [1]}, {"shape": [2], "dtype": "int32", "low": 4, "high": 3}]}})


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"dtype": "uint8", "low": -5, "high": 300}, "[low, high) = [-5, 300) is outside what uint8 holds: low >= 0, high <= 256"),
        ({"dtype": "int8", "high": 1000}, "[low, high) = [0, 1000) is outside what int8 holds: low >= -128, high <= 128"),
        ({"dtype": "int64", "high": 1e30}, "is outside what int64 holds: low >= -9223372036854775808, high <= 9223372036854775807"),
        ({"dtype": "int32", "low": 0.5}, "low = 0.5: the bounds of an integer input (int32) are whole numbers"),
        ({"dtype": "int64", "high": 0}, "high (0) must be greater than low (0) (the default low is 0, high 10)"),
        ({"low": 5, "high": 1}, "high (1) must be greater than low (5)"),
        ({"low": 2}, "high (1) must be greater than low (2) (a missing low is 0, a missing high 1)"),
        ({"dtype": "float16", "high": 1e6}, "high = 1000000.0 is not a finite float16 (largest 65504)"),
        ({"dtype": "bool", "high": 2}, "a bool input takes no low/high (its values are drawn as True or False)"),
    ],
)
def test_input_bounds_that_do_not_fit_the_dtype_are_config_errors(tmp_path, spec, message):
    """Bounds outside the dtype crashed `fxpasses run` with an internal error (exit 3: torch's
    "from is out of bounds for unsigned char") and passed `fxpasses check`; bounds that draw
    nothing, or are ignored (a bool input's), passed silently (found by a new-user check)."""
    import json

    (tmp_path / "cfg.json").write_text(
        json.dumps({"pipeline": "eliminate_dead_code", "model": {"factory": "m:make", "inputs": [{"shape": [3], **spec}]}})
    )
    for command in ("check", "run"):
        r = run_cli(command, str(tmp_path / "cfg.json"), *(["--no-save"] if command == "run" else []))
        assert r.exit_code == 2, r.output
        assert f"model.inputs.0: {message}" in r.output or (message.startswith("is outside") and message in r.output)
    # the ends of each range are fine
    from fxpasses.config import InputSpec
    from fxpasses.job import make_inputs

    (x,) = make_inputs([InputSpec(shape=[1000], dtype="uint8", low=0, high=256)], seed=0)
    assert x.dtype == torch.uint8 and int(x.min()) == 0 and int(x.max()) == 255


def test_input_bounds_at_the_ends_of_the_dtypes_range_draw_finite_values():
    """Bounds fxpasses took as fitting crashed or drew garbage (a new-user check): int64's
    largest value read as a float was 2**63 ("Overflow when unpacking long long"); floats were
    drawn as (high - low) * r + low in float32, which overflowed to inf (float32 ±2e38) or NaN
    (float64 ±1e308), and a float64 range narrower than float32's precision drew one value."""
    from fxpasses.config import InputSpec
    from fxpasses.job import make_inputs

    specs = [
        InputSpec(shape=[64], dtype="int64", low=-(2**63), high=2**63 - 1),
        InputSpec(shape=[64], low=-2e38, high=2e38),
        InputSpec(shape=[64], dtype="float64", low=-1e308, high=1e308),
        InputSpec(shape=[64], dtype="float64", low=1e10, high=1e10 + 1),
        InputSpec(shape=[64], dtype="float16", low=-65504, high=65504),
    ]
    big, f32, f64, narrow, f16 = make_inputs(specs, seed=0)
    assert big.dtype == torch.int64 and int(big.min()) < -(2**60) and int(big.max()) > 2**60
    for t, lo, hi in ((f32, -2e38, 2e38), (f64, -1e308, 1e308), (narrow, 1e10, 1e10 + 1)):
        assert bool(torch.isfinite(t).all()) and lo <= float(t.min()) and float(t.max()) <= hi
    assert bool(torch.isfinite(f16).all())
    assert len(set(narrow.tolist())) == 64  # float64 draws, not float32's 1e10 = 1e10 + 1


@pytest.mark.parametrize(
    "dtype, low, high",
    [("float16", 65000, 65504), ("float16", -65504, 65504), ("float32", 3.4e38, 3.4028234663852886e38),
     ("float64", 1, 1 + 1e-15), ("float64", 0, 5e-324)],
)
def test_float_inputs_stay_in_low_high_after_rounding_to_the_dtype(dtype, low, high):
    """Drawn in float64 and rounded to the dtype, values landed on `high` or below `low`
    (float16 [65000, 65504): 3,260 of 100,000 at or over high; a new-user check)."""
    from fxpasses.config import InputSpec
    from fxpasses.job import make_inputs

    (x,) = make_inputs([InputSpec(shape=[20000], dtype=dtype, low=low, high=high)], seed=0)
    assert float(x.min()) >= low and float(x.max()) < high


def test_no_value_of_the_dtype_in_the_range_is_a_config_error():
    from fxpasses.config import InputSpec
    from fxpasses.errors import ConfigError
    from fxpasses.job import make_inputs

    with pytest.raises(ConfigError, match=r"input 0: no float16 value lies in \[low, high\) = \[1.0001, 1.0002\): widen the range"):
        make_inputs([InputSpec(shape=[2], dtype="float16", low=1.0001, high=1.0002)], seed=0)


def test_an_input_spec_is_checked_when_changed_and_takes_no_boolean_bounds():
    """From Python, `spec.low = -5` on a uint8 spec was not checked (the run then crashed with
    torch's "from is out of bounds"), `low=True` was taken as 1, and `low=2**64` said "high
    (10) must be greater than low" (a new-user check)."""
    import pydantic

    from fxpasses.config import InputSpec

    spec = InputSpec(shape=[2], dtype="uint8")
    with pytest.raises(pydantic.ValidationError, match=r"\[low, high\) = \[-5, 10\) is outside what uint8 holds"):
        spec.low = -5
    with pytest.raises(pydantic.ValidationError, match="True: a bound is a number, not a boolean"):
        InputSpec(shape=[2], dtype="int32", low=True, high=2)
    with pytest.raises(pydantic.ValidationError, match=r"is outside what int64 holds"):
        InputSpec(shape=[2], dtype="int64", low=2**64)


def test_a_saved_program_without_inputs_runs_on_the_inputs_saved_with_it(tmp_path):
    """`[model] program` alone: the example inputs torch.export saved in the .pt2 (positional
    and keyword ones) are what the pipeline and the output comparison use."""

    class Masked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.drop = torch.nn.Dropout(0.5)

        def forward(self, x, *, mask):
            return self.drop(self.lin(x)) * mask + x * 1

    torch.manual_seed(0)
    model = Masked().eval()
    x, mask = torch.randn(3, 4), (torch.rand(3, 4) > 0.5).float()
    torch.export.save(torch.export.export(model, (x,), {"mask": mask}), str(tmp_path / "masked.pt2"))
    cfg = tmp_path / "p.toml"
    cfg.write_text('verify = "numeric"\n[model]\nprogram = "masked.pt2"\n')
    out = tmp_path / "out"
    r = run_cli("run", str(cfg), "-o", str(out), "--repeat", "1")
    assert r.exit_code == 0, r.output
    data = json.loads((out / "report.json").read_text())
    assert {p["name"]: p for p in data["report"]["passes"]}["remove_dropout"]["counters"]["removed"] == 1
    assert data["max_abs_error"] <= 1e-6
    saved = torch.export.load(str(out / "model.pt2"))
    args, kwargs = saved.example_inputs  # the re-saved program keeps them too
    assert torch.equal(args[0], x) and torch.equal(kwargs["mask"], mask)
    with torch.no_grad():
        torch.testing.assert_close(saved.module()(x, mask=mask), model(x, mask=mask))


def test_inputs_are_required_unless_a_saved_program_brings_them(tmp_path):
    saved_program(tmp_path)
    ep = torch.export.load(str(tmp_path / "model.pt2"))
    ep._example_inputs = None  # a program saved without example inputs
    torch.export.save(ep, str(tmp_path / "bare.pt2"))
    for table, fault in (
        ('program = "bare.pt2"', "[model] program: " + str(tmp_path / "bare.pt2") + " holds no example inputs to run it on; give them as [model] inputs"),
        ('factory = "small_models:small_cnn"', "`inputs` is required: the example inputs to run the model on"),
    ):
        cfg = tmp_path / "c.toml"
        cfg.write_text(f"[model]\n{table}\n")
        r = run_cli("run", str(cfg), "--no-save")
        assert r.exit_code == 2, r.output
        assert fault in r.output, r.output


DYNAMIC_MODELS = """
import torch
from torch.export import Dim

class Masked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x, *, mask):
        return self.drop(self.lin(x)) * mask + x * 1

def program():
    torch.manual_seed(0)
    model = Masked().eval()
    batch, seq = Dim("batch", min=2, max=64), Dim("seq", min=3, max=50)
    x, mask = torch.randn(4, 6, 8), torch.ones(4, 6, 8)
    shapes = {"x": {0: batch, 1: seq}, "mask": {0: batch, 1: seq}}
    return torch.export.export(model, (x,), {"mask": mask}, dynamic_shapes=shapes)
"""


def test_a_program_with_dynamic_shapes_is_saved_with_them(tmp_path):
    """model.pt2 keeps the dynamic sizes (and their ranges, and which sizes are equal) of a
    program exported with dynamic_shapes; it was saved for the example's sizes only."""
    (tmp_path / "dyn_models.py").write_text(DYNAMIC_MODELS)
    cfg = tmp_path / "d.toml"
    cfg.write_text('[model]\nfactory = "dyn_models:program"\n[model.inputs]\n0 = {shape = [4, 6, 8]}\nmask = {shape = [4, 6, 8]}\n')
    out = tmp_path / "out"
    r = run_cli("run", str(cfg), "-o", str(out), "--repeat", "1")
    assert r.exit_code == 0, r.output
    ep = torch.export.load(str(out / "model.pt2"))
    ranges = sorted((int(v.lower), int(v.upper)) for v in ep.range_constraints.values())
    assert ranges == [(2, 64), (3, 50)]
    x, mask = torch.randn(9, 17, 8), torch.rand(9, 17, 8)
    ns: dict = {}
    exec(DYNAMIC_MODELS, ns)
    torch.manual_seed(0)
    model = ns["Masked"]().eval()
    with torch.no_grad():
        torch.testing.assert_close(ep.module()(x, mask=mask), model(x, mask=mask))
    with pytest.raises(Exception, match="mask.size|batch|Guard"):  # the sizes stay tied together
        ep.module()(x, mask=torch.rand(8, 17, 8))


DERIVED_MODELS = """
import torch
from torch.export import Dim

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, y, z):
        return self.lin(torch.cat([x, x])) + y, z * 2

def program(low=None):
    torch.manual_seed(0)
    d, e = Dim("d", min=low, max=32), Dim("e", max=40)
    args = (torch.randn(3, 4), torch.randn(6, 4), torch.randn(5))
    return torch.export.export(Net().eval(), args, dynamic_shapes=({0: d}, {0: 2 * d}, {0: e + 1}))

def module():
    return program(1).module()
"""


@pytest.mark.parametrize("low", [None, 1, 3])
def test_a_program_with_derived_dims_and_small_sizes_is_saved_with_them(tmp_path, low):
    """A program exported with a derived size (`y: 2 * d` beside `x: d`) could not be saved:
    the re-export gave that size `Dim.AUTO` and torch refused it ("Constraints violated"), and
    the error said the optimized graph no longer allows its sizes, for a pipeline that changed
    nothing (a dynamic-shapes sweep). A size whose range began at 0 or 1 was saved beginning
    at 2 (torch's tracing assumption in the module's shape environment). The saved program
    now has the derived sizes and the program's own ranges."""
    (tmp_path / "derived_models.py").write_text(DERIVED_MODELS)
    cfg = tmp_path / "d.toml"
    inputs = "inputs = [{shape = [3, 4]}, {shape = [6, 4]}, {shape = [5]}]\n"
    cfg.write_text(f'pipeline = "eliminate_dead_code"\n[model]\nfactory = "derived_models:program"\nkwargs = {{low = {low or 0}}}\n' + inputs)
    out = tmp_path / "out"
    r = run_cli("run", str(cfg), "-o", str(out), "--repeat", "1")
    assert r.exit_code == 0, r.output
    ns: dict = {}
    exec(DERIVED_MODELS, ns)
    original = ns["program"](low or 0)
    ep = torch.export.load(str(out / "model.pt2"))
    as_ranges = lambda p: sorted((int(v.lower), int(v.upper)) for v in p.range_constraints.values())  # noqa: E731
    assert as_ranges(ep) == as_ranges(original)
    assert (low or 0, 32) in as_ranges(ep)
    n = max(low or 1, 1)
    x, y = torch.randn(n, 4), torch.randn(2 * n, 4)
    with torch.no_grad():
        for size in (1, 2, 41):  # z: e + 1, e in [0, 40]
            z = torch.randn(size)
            for a, b in zip(ep.module()(x, y, z), original.module()(x, y, z)):
                torch.testing.assert_close(a, b)
    for module in (ep.module(), original.module()):
        with pytest.raises(Exception, match="Guard failed"):  # y stays twice x
            module(x, torch.randn(2 * n + 1, 4), torch.randn(1))
        with pytest.raises(Exception, match="Guard failed"):
            module(x, y, torch.randn(42))


def test_a_module_of_a_program_given_by_a_factory_keeps_the_traced_ranges_less_the_tracing_assumption(tmp_path):
    """A factory returning `program.module()` (no `range_constraints` to read): the lower
    bound 2 the shape environment holds from torch's 0/1 specialization is not kept (the
    program's 1 for `x` cannot be told from 0 there; torch's check takes 0 either way)."""
    (tmp_path / "derived_models.py").write_text(DERIVED_MODELS)
    cfg = tmp_path / "d.toml"
    cfg.write_text('[model]\nfactory = "derived_models:module"\ninputs = [{shape = [3, 4]}, {shape = [6, 4]}, {shape = [5]}]\n')
    out = tmp_path / "out"
    r = run_cli("run", str(cfg), "-o", str(out), "--repeat", "1")
    assert r.exit_code == 0, r.output
    ep = torch.export.load(str(out / "model.pt2"))
    # x: d and y: 2 * d from 0; z: e + 1 from 1 (torch's own [2, 40] for e, as in the program)
    assert sorted(int(v.lower) for v in ep.range_constraints.values()) == [0, 0, 1, 2]
    with torch.no_grad():
        for n, size in ((1, 1), (2, 2), (5, 41)):
            ep.module()(torch.randn(n, 4), torch.randn(2 * n, 4), torch.randn(size))


def test_a_config_without_output_says_nothing_was_saved(tmp_path, monkeypatch):
    """`fxpasses run` saves only into `output` (or -o): without either it says so, instead of
    ending as if it had saved."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text("import torch\ndef lin():\n    return torch.nn.Linear(4, 2)\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text('[model]\nfactory = "m:lin"\ninputs = [{shape = [3, 4]}]\n')
    r = run_cli("run", str(cfg), "--repeat", "1")
    assert r.exit_code == 0, r.output
    assert r.output.rstrip().endswith('saved: nothing (the config has no `output`; give `output = "DIR"` or -o DIR to save the model)')
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == ["c.toml", "m.py"]
    r = run_cli("run", str(cfg), "--repeat", "1", "--no-save")
    assert "saved:" not in r.output


WRAPPED_MODEL = '''
import torch

def my_gelu(x):
    return x * torch.sigmoid(1.702 * x)

torch.fx.wrap("my_gelu")

class W(torch.nn.Module):
    def forward(self, x):
        return my_gelu(x) * 1

def w():
    return W()
'''


def test_saved_module_of_a_graph_calling_a_wrapped_function_imports_it(tmp_path, monkeypatch):
    """torch's to_folder neither imports a function outside torch that the graph calls nor
    writes a working torch.fx.wrap line for it (it puts the call in the class body, where
    wrap raises NotImplementedError): the run ended with an internal error after the
    pipeline. The saved module imports it from its module and wraps it at the top level."""
    (tmp_path / "wrapmod.py").write_text(WRAPPED_MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = run_config(
        tmp_path,
        'pipeline = "simplify_algebra,eliminate_dead_code"\n[model]\nfactory = "wrapmod:w"\n'
        'capture = "symbolic_trace"\ninputs = [{shape = [4, 8]}]\n',
    )
    text = (out / "module" / "module.py").read_text()
    head, _, body = text.partition("class OptimizedModule(")
    assert "import wrapmod as _fxpasses_import_0\nwrapmod_my_gelu = _fxpasses_import_0.my_gelu\n" in head
    assert 'torch.fx.wrap("wrapmod_my_gelu")' in head and "wrap(" not in body
    saved = import_saved(out, "saved_wrapped")
    import wrapmod

    x = torch.randn(4, 8)
    torch.testing.assert_close(saved(x), wrapmod.w()(x))
    # traced again, the wrapped function is still one call (a leaf), as in the original trace
    retraced = torch.fx.symbolic_trace(saved)
    targets = [n.target for n in retraced.graph.nodes if n.op == "call_function"]
    assert targets[0] is wrapmod.my_gelu and torch.sigmoid not in targets


def test_saved_module_loads_a_wrapped_function_of_a_factory_given_by_path(tmp_path):
    """A factory given as ``path/models.py:fn`` is loaded from its file, under a name no other
    process can import: a wrapped function of it was refused at the save step (exit 2). The
    saved module loads that file again, from its path, in a fresh process and from anywhere."""
    models = tmp_path / "src" / "pathmodels.py"
    models.parent.mkdir()
    models.write_text(WRAPPED_MODEL)
    out = run_config(
        tmp_path,
        f'pipeline = "simplify_algebra,eliminate_dead_code"\n[model]\nfactory = "{models.as_posix()}:w"\n'
        'capture = "symbolic_trace"\ninputs = [{shape = [4, 8]}]\n',
    )
    head = (out / "module" / "module.py").read_text().partition("class OptimizedModule(")[0]
    assert f"_fxpasses_import_0 = _fxpasses_load_file('pathmodels', {str(models.resolve())!r})\n" in head
    assert "pathmodels_my_gelu = _fxpasses_import_0.my_gelu\n" in head
    script = (
        "import sys, torch\n"
        "from fxpasses.job import load_folder\n"
        f"m = load_folder({str(out / 'module')!r})\n"
        "x = torch.linspace(-3, 3, 32).reshape(4, 8)\n"
        "print(torch.allclose(m(x), x * torch.sigmoid(1.702 * x)))\n"
        "g = torch.fx.symbolic_trace(m).graph\n"
        "print([n.target.__name__ for n in g.nodes if n.op == 'call_function'])\n"
        "print('pathmodels' in sys.modules, sys.path.count(%r))\n" % str(models.parent)
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path.anchor, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # the same values; traced again, the wrapped function is still a leaf; nothing left behind
    assert done.stdout.splitlines() == ["True", "['my_gelu', 'mul']", "False 0"]


def test_a_graph_calling_an_object_that_cannot_be_imported_is_not_saved_as_code(tmp_path):
    """A function a pass inserted that has no importable name (a lambda) cannot be written
    as code: a UserError naming it before anything is written, not a NameError on reading
    the file back."""
    from fxpasses import UserError
    from fxpasses.job import _save
    from fxpasses.verify import TensorState

    class M(torch.nn.Module):
        def forward(self, x):
            return x + 1

    gm = torch.fx.symbolic_trace(M())
    add = next(n for n in gm.graph.nodes if n.op == "call_function")
    with gm.graph.inserting_after(add):
        f = gm.graph.call_function(lambda v: v * 2, (add,))
    add.replace_all_uses_with(f, delete_user_cb=lambda u: u is not f)
    gm.recompile()
    x = torch.randn(3)
    cfg = load_config_file_from_text(tmp_path, 'pipeline = "eliminate_dead_code"\n')
    with pytest.raises(UserError) as info:
        _save(gm, [x], "symbolic_trace", tmp_path / "out", (gm(x), None, None), (cfg.atol, cfg.rtol), TensorState(gm))
    message = str(info.value)
    assert message.startswith("cannot save the optimized graph as Python code: it calls <function ")
    assert "which cannot be imported by name (define it at the top level of an importable module)" in message
    assert not (tmp_path / "out" / "module").exists()
    # a function of the running script (__main__) is no name another process can import
    from fxpasses.job import _global_definitions

    def main_function(v):
        return v

    main_function.__module__ = "__main__"
    main_function.__qualname__ = "main_function"
    import __main__

    monkey = getattr(__main__, "main_function", None)
    __main__.main_function = main_function
    try:
        with pytest.raises(UserError, match="cannot be imported by name"):
            _global_definitions({"main_function": main_function})
    finally:
        if monkey is None:
            del __main__.main_function
    assert _global_definitions({"torch": torch, "_torch_Tensor_": "torch.Tensor"}) == [
        "import torch",
        "_torch_Tensor_ = torch.Tensor",
    ]


ARGUMENT_MODELS = """
import torch


def needs_args(width):
    return torch.nn.Linear(width, 2)


def needs_three(width, depth, *, bias, scale=1.0):
    return torch.nn.Linear(width, 2, bias=bias)


def positional(width, /):
    return torch.nn.Linear(width, 2)
"""


@pytest.mark.parametrize(
    "factory, kwargs, message",
    [
        (
            "needs_args", "",
            "[model] factory: argument_models:needs_args needs the argument 'width': give it in [model] kwargs "
            "(kwargs = {width = ...})",
        ),
        (
            "needs_three", "",
            "[model] factory: argument_models:needs_three needs the arguments 'width', 'depth', 'bias': give them "
            "in [model] kwargs (kwargs = {width = ..., depth = ..., bias = ...})",
        ),
        (
            "needs_three", "kwargs = {width = 4}",
            "[model] factory: argument_models:needs_three needs the arguments 'depth', 'bias' as well as the kwargs "
            "given (width): add them to [model] kwargs (depth = ..., bias = ...)",
        ),
        # kwargs the factory does not take: the message as before, and a misspelt name's
        # argument (left missing as well) is not asked for: the name is what is wrong
        (
            "needs_args", "kwargs = {width = 4, depth = 3}",
            "[model] kwargs: argument_models:needs_args does not take kwargs {'width': 4, 'depth': 3}: got an "
            "unexpected keyword argument 'depth'",
        ),
        (
            "needs_args", "kwargs = {widht = 4}",
            "[model] kwargs: argument_models:needs_args does not take kwargs {'widht': 4}: got an unexpected "
            "keyword argument 'widht'; did you mean 'width'?",
        ),
        # a positional-only argument: kwargs cannot give it (a final new-user check found the
        # old message, which blamed the kwargs, and then "passed as a keyword" for them)
        *[
            (
                "positional", kwargs,
                "[model] factory: argument_models:positional needs the positional-only argument 'width', which "
                "[model] kwargs cannot give (a config gives a factory keyword arguments only): name a factory of "
                "your own that calls it, e.g. `def make(**kwargs): return positional(...)`",
            )
            for kwargs in ("", "kwargs = {width = 4}")
        ],
    ],
    ids=["one-missing", "several-missing", "some-given", "unexpected", "misspelt", "positional-only", "positional-given"],
)
def test_a_factory_that_needs_arguments_names_them_and_how_to_give_them(tmp_path, monkeypatch, factory, kwargs, message):
    """`def needs_args(width)` without `kwargs` said "cfg.toml: [model] kwargs:
    models:needs_args does not take kwargs {}: missing a required argument: 'width'" (a user
    report): it takes no kwargs, it needs one. The error names the arguments the kwargs leave
    out and how to give them."""
    (tmp_path / "argument_models.py").write_text(ARGUMENT_MODELS)
    (tmp_path / "cfg.toml").write_text(
        f'[model]\nfactory = "argument_models:{factory}"\n{kwargs}\ninputs = [{{shape = [2, 4]}}]\n'
    )
    monkeypatch.chdir(tmp_path)
    r = run_cli("run", "cfg.toml", "--no-save", "--repeat", "1")
    assert r.exit_code == 2, r.output
    assert f"error: cfg.toml: {message}" in r.stderr.splitlines(), r.stderr


def test_a_factory_that_needs_arguments_is_told_in_the_config_files_syntax(tmp_path, monkeypatch):
    """The example of how to give a missing argument is written as the config file writes
    its kwargs: a TOML inline table would not read in a YAML or JSON file."""
    (tmp_path / "argument_models.py").write_text(ARGUMENT_MODELS)
    (tmp_path / "cfg.yaml").write_text("model:\n  factory: argument_models:needs_args\n  inputs: [{shape: [2, 4]}]\n")
    (tmp_path / "cfg.json").write_text('{"model": {"factory": "argument_models:needs_args", "inputs": [{"shape": [2, 4]}]}}')
    monkeypatch.chdir(tmp_path)
    for name, example in [("cfg.yaml", "kwargs: {width: ...}"), ("cfg.json", '"kwargs": {"width": ...}')]:
        r = run_cli("run", name, "--no-save", "--repeat", "1")
        assert r.exit_code == 2, r.output
        assert r.stderr.splitlines()[0] == (
            f"error: {name}: [model] factory: argument_models:needs_args needs the argument 'width': give it in "
            f"[model] kwargs ({example})"
        ), r.stderr


def load_config_file_from_text(tmp_path, text):
    path = tmp_path / "c.toml"
    path.write_text(text)
    return load_config_file(path)


@pytest.mark.parametrize("name", ["json", "torch"])
def test_a_factory_module_named_like_a_library_module_is_refused_and_the_path_form_works(tmp_path, name):
    """A json.py next to the config replaced the standard library's json for the whole
    process (torch.export then failed on json.JSONEncoder, blamed on the capture: a new-user
    check). The path form imports the file apart."""
    import json as stdlib_json
    import sys

    from fxpasses.errors import ConfigError
    from fxpasses.job import load_factory

    (tmp_path / f"{name}.py").write_text("import torch\n\ndef build():\n    return torch.nn.Linear(3, 3)\n")
    before = sys.modules[name]
    with pytest.raises(ConfigError, match=rf"the factory's module '{name}' next to the config has the name of .*factory = \"{name}.py:build\""):
        load_factory(f"{name}:build", tmp_path)
    assert sys.modules[name] is before and sys.modules["json"] is stdlib_json
    model = load_factory(f"{name}.py:build", tmp_path)()
    assert isinstance(model, torch.nn.Linear) and sys.modules[name] is before


def test_a_factory_path_holding_colons_takes_the_callable_after_the_last_one(tmp_path):
    """`factory = "a:b/models.py:build"` was refused ("'b/models.py:build' after the ':' is
    not a Python name"), as a Windows path C:/...:build would be (a new-user check)."""
    from fxpasses.config import ModelConfig
    from fxpasses.job import load_factory

    folder = tmp_path / "a:b"
    folder.mkdir()
    (folder / "mödels.py").write_text("import torch\n\ndef build():\n    return torch.nn.Linear(3, 3)\n")
    ModelConfig(factory="a:b/mödels.py:build", inputs=[{"shape": [2, 3]}])  # validates
    assert isinstance(load_factory("a:b/mödels.py:build", tmp_path)(), torch.nn.Linear)
    with pytest.raises(Exception, match=r"no ':callable' part"):
        ModelConfig(factory="models", inputs=[{"shape": [2, 3]}])


SAVED_TENSORS_SOURCE = """
import torch
from torch import nn

def lin64():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU()).double()

def half():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).eval()
    return m.to(torch.bfloat16)

class Strided(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.register_buffer("w", torch.randn(8, 6).t())
    def forward(self, x):
        return self.w * x.sum()

class Views(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        base = torch.randn(3, 8)
        self.register_buffer("base", base)
        self.register_buffer("head", base[:, :4])
    def forward(self, x):
        self.head.mul_(x.mean())
        return self.base + x.sum()
"""


@pytest.mark.parametrize(
    "factory, shape, dtype",
    [("lin64", "3, 8", "float64"), ("half", "1, 3, 8, 8", "bfloat16"), ("Strided", "3, 8", "float32"), ("Views", "3, 8", "float32")],
)
def test_a_saved_symbolic_trace_module_keeps_dtypes_strides_and_views(tmp_path, factory, shape, dtype):
    """to_folder rebuilds modules from their repr (float32) and loads a state dict into them:
    a float64 or bfloat16 model's save failed ("unexpected RuntimeError", exit 3), a transposed
    buffer came back contiguous and a view of another buffer no longer shared its memory, so
    the read-back check failed (a new-user check)."""
    (tmp_path / "saved_tensors.py").write_text(SAVED_TENSORS_SOURCE)
    out = run_config(
        tmp_path,
        f'preset = "training"\n[model]\nfactory = "saved_tensors:{factory}"\ncapture = "symbolic_trace"\n'
        f'inputs = [{{shape = [{shape}], dtype = "{dtype}"}}]\n',
    )
    loaded = load_folder(out / "module")
    import importlib

    model = importlib.import_module("saved_tensors")
    model = getattr(model, factory)()
    for name, t in model.state_dict().items():
        got = loaded.state_dict()[name]
        assert got.dtype == t.dtype and got.stride() == t.stride() and torch.equal(got, t), name
    if factory == "Views":
        assert loaded.head.untyped_storage().data_ptr() == loaded.base.untyped_storage().data_ptr()
    x = torch.randn(*map(int, shape.split(",")), dtype=getattr(torch, dtype))
    for _ in range(2):  # twice: the view's write shows through the base on the second call
        torch.testing.assert_close(loaded(x), model(x))


def test_an_output_folder_reused_for_another_capture_loses_the_earlier_runs_files(tmp_path):
    """A symbolic_trace run into the folder of an export run left its model.pt2 beside the new
    module/ (and a dynamo run its inputs.pt): a user could load the older model (a new-user
    check). What fxpasses wrote is removed and said; other files stay."""
    base = '[model]\nfactory = "fxpasses._example:convnet"\ninputs = [{ shape = [1, 3, 8, 8] }]\ncapture = '
    out = tmp_path / "out"
    (tmp_path / "d.toml").write_text(base + '"dynamo"\n')
    (tmp_path / "e.toml").write_text(base + '"export"\n')
    (tmp_path / "s.toml").write_text(base + '"symbolic_trace"\n')
    r = run_cli("run", str(tmp_path / "d.toml"), "-o", str(out), "--repeat", "1")
    assert r.exit_code == 0 and (out / "inputs.pt").is_file() and (out / "module" / "module.py").is_file()
    (out / "notes.txt").write_text("mine")
    r = run_cli("run", str(tmp_path / "e.toml"), "-o", str(out), "--repeat", "1")
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["model.pt2", "notes.txt", "report.json"]
    assert f"warning: {out}: removed inputs.pt, module/__init__.py, module/module.py, module/state_dict.pt" in r.output
    r = run_cli("run", str(tmp_path / "s.toml"), "-o", str(out), "--repeat", "1")
    assert r.exit_code == 0 and sorted(p.name for p in out.iterdir()) == ["module", "notes.txt", "report.json"]
    assert f"warning: {out}: removed model.pt2," in r.output
    r = run_cli("run", str(tmp_path / "s.toml"), "-o", str(out), "--repeat", "1")  # the same capture again: no word
    assert r.exit_code == 0 and "warning:" not in r.output


PICKLED_SUBMODULE_SOURCE = """
import torch
from torch import nn


class Scale(nn.Module):  # (not a torch.nn class: to_folder pickles it as scale.pt)
    def __init__(self):
        super().__init__()
        self.s = nn.Parameter(torch.full((4,), 2.0))

    def forward(self, x):
        return x * self.s


class WithPickled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = Scale()

    def forward(self, x):
        return self.scale(self.lin(x))


def plain():
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU())
"""


def test_a_pickled_submodule_of_an_earlier_run_is_removed_and_not_listed_as_saved(tmp_path, monkeypatch):
    """An output folder reused for another model kept the earlier run's pickled submodule
    (module/lin.pt: only N.pt names were known) and the new run listed it under "saved:" and
    in report.json although its module.py does not read it (a new-user check)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pickled.py").write_text(PICKLED_SUBMODULE_SOURCE)
    base = 'pipeline = "eliminate_dead_code"\n[model]\ncapture = "symbolic_trace"\ninputs = [{ shape = [2, 4] }]\nfactory = '
    (tmp_path / "a.toml").write_text(base + '"pickled:WithPickled"\n')
    (tmp_path / "b.toml").write_text(base + '"pickled:plain"\n')
    r = run_cli("run", "a.toml", "-o", "out", "--repeat", "1")
    assert r.exit_code == 0 and (tmp_path / "out" / "module" / "scale.pt").is_file(), r.output
    r = run_cli("run", "b.toml", "-o", "out", "--repeat", "1")
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "out" / "module" / "scale.pt").exists() and "scale.pt" not in r.output
    saved = json.loads((tmp_path / "out" / "report.json").read_text())["saved"]
    # what module/ holds is what this run saved, and that is what its module.py reads
    assert sorted(Path(p).name for p in saved if Path(p).parent.name == "module") == sorted(
        p.name for p in (tmp_path / "out" / "module").iterdir() if p.is_file()
    )
    assert "scale.pt" not in str(saved) and "module.py" in str(saved)


def _relu_to(pass_name: str, target) -> type:
    """A wrong pass, on purpose: every relu becomes a call of ``target``."""

    class ReluTo(fxpasses.NodePass):
        name = pass_name

        @fxpasses.on("relu")
        def r(self, node, ctx):
            return fxpasses.Replace(ctx.call_function(target, node.args))

    return ReluTo


def _relu_rewriters():
    """A registry of ``to_sigmoid`` and ``to_tanh`` (:func:`_relu_to`), and the example convnet's
    ``[model]`` table."""
    reg = Registry(autoload=False)
    reg.register(_relu_to("to_sigmoid", torch.sigmoid))
    reg.register(_relu_to("to_tanh", torch.tanh))
    return reg, {"factory": "fxpasses._example:convnet", "inputs": [{"shape": [1, 3, 8, 8]}]}


def test_on_error_raise_writes_the_graph_the_failing_pass_left(tmp_path):
    """`fxpasses run --on-error raise` ("keep the broken graph for debugging") printed the error
    and left nothing to debug (a new-user check). The graph as the pass left it is written to
    OUT/broken_graph.txt (FX's text of the graph and the code it would compile to), which a
    note names; a later run that goes through removes it."""
    from fxpasses.config import parse_config
    from fxpasses.job import run_job

    reg, model = _relu_rewriters()
    out = tmp_path / "out"
    with pytest.raises(fxpasses.PassFailedError) as info:
        run_job(parse_config({"pipeline": "to_sigmoid", "verify": "numeric", "model": model}), registry=reg, output=out, repeat=1, on_error="raise")
    assert info.value.notes[-1] == f"the graph as 'to_sigmoid' left it (on_error = \"raise\"): {out / 'broken_graph.txt'}"
    text = (out / "broken_graph.txt").read_text()
    assert text.startswith("# fxpasses: the graph as pass 'to_sigmoid' left it (on_error = \"raise\"): verification failed: output: max abs error")
    assert "call_function[target=torch.sigmoid]" in text and "sigmoid = torch.sigmoid(" in text and "relu" not in text.split("graph():")[1]
    with pytest.raises(fxpasses.PassFailedError) as info:  # no output folder: said
        run_job(parse_config({"pipeline": "to_sigmoid", "verify": "numeric", "model": model}), registry=reg, repeat=1, on_error="raise")
    assert info.value.notes[-1] == (
        "the graph as 'to_sigmoid' left it (on_error = \"raise\") is not written (no output folder: give -o DIR, or "
        'output = "DIR" in the config)'
    )
    with pytest.raises(fxpasses.PassFailedError) as info:  # rolled back: nothing written
        run_job(parse_config({"pipeline": "to_sigmoid", "verify": "numeric", "model": model}), registry=reg, output=tmp_path / "o2", repeat=1)
    assert not (tmp_path / "o2").exists() and "broken_graph" not in str(info.value)
    run_job(parse_config({"pipeline": "eliminate_dead_code", "model": model}), output=out, repeat=1, on_error="raise")
    assert not (out / "broken_graph.txt").exists()


def test_a_failed_run_says_the_broken_graph_in_the_output_folder_is_an_earlier_runs(tmp_path):
    """`fxpasses run --on-error raise` wrote OUT/broken_graph.txt; the next run into OUT that
    failed under rollback (the debugging loop: fix the pass, run again) left it there without a
    word, and no report.json being there, not even the "still holds what an earlier run saved"
    note: the graph of the earlier failure was there to be taken for this run's. The error now
    says the file is an earlier run's, and which pass it shows; the file is left as it was."""
    from fxpasses.config import parse_config
    from fxpasses.job import run_job

    reg, model = _relu_rewriters()
    out = tmp_path / "out"
    with pytest.raises(fxpasses.PassFailedError):
        run_job(parse_config({"pipeline": "to_sigmoid", "verify": "numeric", "model": model}), registry=reg, output=out, repeat=1, on_error="raise")
    broken = out / "broken_graph.txt"
    before = (broken.read_text(), broken.stat().st_mtime_ns)
    note = f"{broken} is an earlier run's (the graph as pass 'to_sigmoid' left it), not this run's"
    with pytest.raises(fxpasses.PassFailedError) as info:  # rolled back: this run writes none
        run_job(parse_config({"pipeline": "to_tanh", "verify": "numeric", "model": model}), registry=reg, output=out, repeat=1)
    assert f"fxpasses: {note}" in getattr(info.value, "__notes__", []), info.value
    assert (broken.read_text(), broken.stat().st_mtime_ns) == before
    with pytest.raises(fxpasses.PassFailedError) as info:  # this run writes its own: no such note
        run_job(parse_config({"pipeline": "to_tanh", "verify": "numeric", "model": model}), registry=reg, output=out, repeat=1, on_error="raise")
    assert not any("earlier run" in n for n in getattr(info.value, "__notes__", [])), info.value.__notes__
    assert broken.read_text().startswith("# fxpasses: the graph as pass 'to_tanh' left it")
    with pytest.raises(fxpasses.PassFailedError) as info:  # --no-save: the folder is not this run's
        run_job(parse_config({"pipeline": "to_sigmoid", "verify": "numeric", "model": model}), registry=reg, output=out, repeat=1, save=False)
    assert not any("earlier run" in n for n in getattr(info.value, "__notes__", [])), info.value.__notes__


def test_a_failed_run_names_the_earlier_runs_files_left_in_the_output_folder(tmp_path, monkeypatch):
    """A run that failed into a folder an earlier run saved in left that run's model.pt2 and
    report.json there without a word, to be taken for this run's (left noticed by an earlier
    session). The error now says they are an earlier run's and this run saved nothing, in
    text and in `--format json`."""
    monkeypatch.chdir(tmp_path)
    model = '[model]\nfactory = "fxpasses._example:convnet"\ninputs = [{shape = [1, 3, 8, 8]}]\n'
    (tmp_path / "ok.toml").write_text('pipeline = "eliminate_dead_code"\n' + model)
    r = run_cli("run", "ok.toml", "-o", "out", "--repeat", "1")
    assert r.exit_code == 0, r.output
    written = {p: p.stat().st_mtime_ns for p in (tmp_path / "out").iterdir()}
    assert sorted(p.name for p in written) == ["model.pt2", "report.json"]

    # a run that fails (a factory that is not there)
    (tmp_path / "bad.toml").write_text('pipeline = "eliminate_dead_code"\n' + model.replace("convnet", "convnet_nope"))
    r = run_cli("run", "bad.toml", "-o", "out", "--repeat", "1")
    assert r.exit_code != 0
    assert "note: out still holds what an earlier run saved (model.pt2, report.json); this run saved nothing" in r.output, r.output
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "out").iterdir()} == written
    r = run_cli("run", "bad.toml", "-o", "out", "--repeat", "1", "--format", "json")
    error = json.loads(r.stdout)["error"]
    assert error["notes"] == ["out still holds what an earlier run saved (model.pt2, report.json); this run saved nothing"]
    r = run_cli("run", "bad.toml", "-o", "fresh", "--repeat", "1")  # nothing earlier: no note
    assert r.exit_code != 0 and "earlier run" not in r.output


@pytest.mark.parametrize(
    "capture, blocked",
    [("export", "model.pt2"), ("export", "report.json"), ("symbolic_trace", "module"), ("dynamo", "inputs.pt")],
)
def test_a_name_the_save_writes_taken_in_the_output_folder_is_refused_before_the_run(tmp_path, capture, blocked):
    """A directory named `model.pt2` or `report.json` (or a file named `module`) in the output
    folder made the save fail after the whole run, as an internal error (exit 3) that printed
    none of the run's results (a new-user check). It is refused before the run, naming the
    path (exit 2), and nothing is written."""
    out = tmp_path / "out"
    out.mkdir()
    if blocked == "module":
        (out / blocked).write_text("mine")
    else:
        (out / blocked).mkdir()
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[model]\nfactory = "fxpasses._example:convnet"\ncapture = "{capture}"\ninputs = [{{shape = [1, 3, 8, 8]}}]\n')
    r = run_cli("run", str(cfg), "-o", str(out), "--repeat", "1")
    assert r.exit_code == 2, r.output
    kind = "a file, and the optimized module is saved as a folder" if blocked == "module" else "a directory, and the run saves a file"
    assert f"error: cannot save into the output directory {out}: {out / blocked} is {kind} of that name" in r.output, r.output
    assert sorted(p.name for p in out.iterdir()) == [blocked]


def test_files_of_the_users_in_the_output_folder_are_neither_removed_nor_overwritten(tmp_path, monkeypatch):
    """The cleanup of an earlier run's outputs removed the user's own inputs.pt (an `inputs`
    file in the output folder), and a `program = "model.pt2"` with `output = "."` was
    overwritten by the optimized program (a new-user check)."""
    monkeypatch.chdir(tmp_path)
    torch.save({"0": torch.randn(1, 3, 8, 8)}, tmp_path / "inputs.pt")
    model = 'output = "."\n[model]\nfactory = "fxpasses._example:convnet"\n'
    (tmp_path / "s.toml").write_text(model + 'capture = "symbolic_trace"\ninputs = "inputs.pt"\n')
    (tmp_path / "d.toml").write_text(model + 'capture = "dynamo"\ninputs = "inputs.pt"\n')
    (tmp_path / "e.toml").write_text(model + 'capture = "export"\ninputs = "inputs.pt"\n')
    for cfg in ("s.toml", "e.toml", "s.toml"):
        r = run_cli("run", cfg, "--repeat", "1")
        assert r.exit_code == 0 and (tmp_path / "inputs.pt").is_file(), (cfg, r.output)
    r = run_cli("run", "d.toml", "--repeat", "1")  # it would write inputs.pt
    assert r.exit_code == 2 and "the output folder . would overwrite [model] inputs 'inputs.pt'" in r.output, r.output
    # a program of the user's (torch.export.save), not one an earlier run saved there
    from fxpasses._example import convnet

    (tmp_path / "report.json").unlink()
    x = torch.randn(1, 3, 8, 8)
    torch.export.save(torch.export.export(convnet().eval(), (x,)), str(tmp_path / "model.pt2"))
    before = (tmp_path / "model.pt2").read_bytes()
    (tmp_path / "p.toml").write_text('output = "."\n[model]\nprogram = "model.pt2"\n')
    r = run_cli("run", "p.toml", "--repeat", "1")
    assert r.exit_code == 2 and "would overwrite [model] program 'model.pt2'" in r.output, r.output
    assert (tmp_path / "model.pt2").read_bytes() == before
    # the model.pt2 an earlier run saved is fxpasses' own: re-optimized in place
    assert run_cli("run", "e.toml", "--repeat", "1").exit_code == 0
    r = run_cli("run", "p.toml", "--repeat", "1")
    assert r.exit_code == 0, r.output


class _TwoKeywords(torch.nn.Module):
    def forward(self, input_ids, attention_mask):
        return input_ids * 2 + attention_mask


def test_a_program_given_keyword_inputs_in_another_order_saves_the_same_function(tmp_path):
    """`torch.export.export` of an exported module binds its keyword inputs by position: with
    `attention_mask` listed before `input_ids` (as a reproducer's inputs file, sorted by name,
    lists them) the program saved by `-o` fed each into the other's place, and the read-back
    check failed with "max abs error 104" on a run that changed nothing (a less-traveled
    features check). The keywords now go in the module's own order."""
    from fxpasses.capture import capture

    ids, mask = torch.randn(2, 3), torch.randn(2, 3)
    program = torch.export.export(_TwoKeywords(), (), {"input_ids": ids, "attention_mask": mask})
    torch.export.save(program, str(tmp_path / "model.pt2"))
    cfg = tmp_path / "swapped.toml"
    cfg.write_text(
        'pipeline = "eliminate_dead_code"\n[model]\nprogram = "model.pt2"\n'
        "[model.inputs]\nattention_mask = {shape = [2, 3]}\ninput_ids = {shape = [2, 3]}\n"
    )
    out = tmp_path / "out"
    r = run_cli("run", str(cfg), "-o", str(out), "--repeat", "1")
    assert r.exit_code == 0, r.output
    saved = torch.export.load(str(out / "model.pt2")).module()
    assert torch.equal(saved(input_ids=ids, attention_mask=mask), ids * 2 + mask)
    # the same for a capture of an exported module (fxpasses.capture, assert_preserves_outputs)
    c = capture(program.module(), [], "export", {"attention_mask": mask, "input_ids": ids})
    assert torch.equal(c.gm(input_ids=ids, attention_mask=mask), ids * 2 + mask)


class _UnlinksARelu(fxpasses.GraphPass):
    """Takes a relu node out of the graph's list by hand (journal_edits: it cannot be put back)."""

    name = "unlinks_a_relu"
    journal_edits = True
    writes_tensors = False

    def run(self, gm, ctx):
        relu = next(n for n in gm.graph.nodes if n.op in ("call_function", "call_module") and "relu" in str(n.target))
        relu._remove_from_list()
        return True


def test_a_graph_kept_because_no_rollback_could_be_made_is_not_said_to_be_on_error_raise(tmp_path, monkeypatch):
    """A pass that unlinked a node by hand stops the run whatever on_error says, and its graph is
    written to OUT/broken_graph.txt; the note said "(on_error = \\"raise\\")" under the default
    rollback (a final new-user check). It now says why the graph was kept."""
    from fxpasses.config import parse_config
    from fxpasses.job import run_job

    monkeypatch.delenv("FXPASSES_CHECK_JOURNAL", raising=False)
    reg = Registry(autoload=False)
    reg.register(_UnlinksARelu)
    model = {"factory": "fxpasses._example:convnet", "inputs": [{"shape": [1, 3, 8, 8]}]}
    out = tmp_path / "out"
    with pytest.raises(fxpasses.PassFailedError) as info:
        run_job(parse_config({"pipeline": "unlinks_a_relu", "model": model}), registry=reg, output=out, repeat=1)
    assert not info.value.rolled_back
    assert info.value.notes[-1] == f"the graph as 'unlinks_a_relu' left it (it could not be rolled back): {out / 'broken_graph.txt'}"
    assert (out / "broken_graph.txt").read_text().startswith(
        "# fxpasses: the graph as pass 'unlinks_a_relu' left it (it could not be rolled back): "
    )
