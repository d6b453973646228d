"""Saved programs and reproducers of models with pytree outputs (a Hugging Face ModelOutput, a
user's registered dataclass or class) load in a fresh process, which has not imported the
module that registers the type."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from fxpasses.cli import cli
from fxpasses.job import PYTREE_MODULES_FILE, save_program

HF_MODEL = '''
import torch
from transformers import GPT2Config, GPT2LMHeadModel


def gpt2():
    """A tiny GPT-2 LM (random weights) returning its ModelOutput."""
    config = GPT2Config(
        n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=16, use_cache=False,
        bos_token_id=99, eos_token_id=99,
    )
    torch.manual_seed(0)
    return GPT2LMHeadModel(config).eval()
'''

USER_OUTPUTS = '''
import dataclasses

import torch
import torch.utils._pytree as pytree


@dataclasses.dataclass
class Out:
    y: torch.Tensor
    z: torch.Tensor


torch.export.register_dataclass(Out, serialized_type_name="my_outputs.Out")


class Pair:
    """A plain class registered under a name that is not its module's."""

    def __init__(self, a, b):
        self.a, self.b = a, b


pytree.register_pytree_node(
    Pair, lambda p: ([p.a, p.b], None), lambda xs, _: Pair(*xs), serialized_type_name="pairs.Pair"
)


class ToOut(torch.nn.Module):
    def forward(self, x):
        return Out(x + 1, x * 2)


class ToPair(torch.nn.Module):
    def forward(self, x):
        return Pair(x - 1, x / 2)
'''

# run in a fresh interpreter: load a program, call it, print what came out
LOAD = '''
import sys
from pathlib import Path
from fxpasses.errors import ConfigError
from fxpasses.job import load_exported_program

assert "transformers.modeling_outputs" not in sys.modules and "my_outputs" not in sys.modules
base = Path(sys.argv[2]) if len(sys.argv) > 2 else None
try:
    ep = load_exported_program(Path(sys.argv[1]), base)
except ConfigError as exc:
    print("ConfigError:", exc)
    raise SystemExit(3)
args, kwargs = ep.example_inputs
out = ep.module()(*args, **kwargs)
print(type(out).__module__, type(out).__name__)
'''


def fresh(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", LOAD, *args], capture_output=True, text=True, cwd=cwd, timeout=300,
        env={**os.environ, "PYTHONPATH": ""},
    )


@pytest.fixture
def project(tmp_path, monkeypatch):
    d = tmp_path / "project"
    d.mkdir()
    (d / "hf_model.py").write_text(HF_MODEL)
    (d / "my_outputs.py").write_text(USER_OUTPUTS)
    monkeypatch.syspath_prepend(str(d))
    yield d
    sys.modules.pop("hf_model", None)


@pytest.fixture
def gpt2_program(project):
    import hf_model

    ids = torch.randint(0, 100, (1, 8), generator=torch.Generator().manual_seed(0))
    ep = torch.export.export(hf_model.gpt2(), (), {"input_ids": ids})
    path = project / "gpt2.pt2"
    torch.export.save(ep, str(path))  # by torch itself: no record of the modules
    return ep, path


def recorded(path: Path) -> list[str]:
    extra = {PYTREE_MODULES_FILE: ""}
    torch.export.load(str(path), extra_files=extra)
    return json.loads(extra[PYTREE_MODULES_FILE])


def test_hugging_face_program_loads_in_a_fresh_process(gpt2_program, tmp_path):
    ep, path = gpt2_program
    assert ep.call_spec.out_spec.type.__module__ == "transformers.modeling_outputs"
    # saved by torch.export.save: the module the unregistered type names is imported
    out = fresh(str(path), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "transformers.modeling_outputs CausalLMOutputWithCrossAttentions"
    # saved by fxpasses: the module is recorded in the file and imported first
    save_program(ep, tmp_path / "recorded.pt2")
    assert recorded(tmp_path / "recorded.pt2") == ["transformers.modeling_outputs"]
    out = fresh(str(tmp_path / "recorded.pt2"), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "transformers.modeling_outputs CausalLMOutputWithCrossAttentions"


def test_fxpasses_run_of_a_hugging_face_program_saves_one_that_loads(gpt2_program, tmp_path):
    _, path = gpt2_program
    cfg = path.parent / "fxpasses.toml"
    cfg.write_text('pipeline = "remove_dropout,eliminate_dead_code"\n[model]\nprogram = "gpt2.pt2"\n')
    script = Path(sys.executable).parent / "fxpasses"
    out_dir = tmp_path / "out"
    run = subprocess.run(
        [str(script), "run", str(cfg), "--repeat", "1", "--output", str(out_dir)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, env={**os.environ, "PYTHONPATH": ""},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert recorded(out_dir / "model.pt2") == ["transformers.modeling_outputs"]
    out = fresh(str(out_dir / "model.pt2"), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "transformers.modeling_outputs CausalLMOutputWithCrossAttentions"


def test_user_dataclass_and_class_outputs(project, tmp_path):
    import my_outputs

    x = torch.randn(3)
    out_ep = torch.export.export(my_outputs.ToOut(), (x,))
    pair_ep = torch.export.export(my_outputs.ToPair(), (x,))
    torch.export.save(out_ep, str(project / "out.pt2"))
    torch.export.save(pair_ep, str(project / "pair.pt2"))
    save_program(pair_ep, project / "pair_recorded.pt2")
    assert recorded(project / "pair_recorded.pt2") == ["my_outputs"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    # the module next to the config (base_dir) registers the dataclass under its own name
    out = fresh(str(project / "out.pt2"), str(project), cwd=elsewhere)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "my_outputs Out"
    # not importable from here: the error names the type and the module to import
    out = fresh(str(project / "out.pt2"), cwd=elsewhere)
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stdout.strip() == (
        f"ConfigError: [model] program: cannot load {project / 'out.pt2'}: its inputs or outputs hold "
        "the pytree type my_outputs.Out, which is not registered in this process; the module that "
        "defines it, my_outputs, registers it when imported: install it (pip install my_outputs, or put "
        "the module my_outputs on the Python path, if it is that package) and make it importable here "
        "(fxpasses imports it by itself then), or import it before loading the file"
    )
    assert "torch.save" not in out.stdout
    # a name that is not the module's ("pairs.Pair"): only the record says where it is defined
    out = fresh(str(project / "pair.pt2"), str(project), cwd=elsewhere)
    assert out.returncode == 3
    assert "the pytree type pairs.Pair, which is not registered in this process; the module that defines it, pairs," in out.stdout
    out = fresh(str(project / "pair_recorded.pt2"), str(project), cwd=elsewhere)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "my_outputs Pair"
    # the recorded module missing: named, with what needs it
    out = fresh(str(project / "pair_recorded.pt2"), cwd=elsewhere)
    assert out.returncode == 3
    assert out.stdout.strip().startswith(
        f"ConfigError: [model] program: {project / 'pair_recorded.pt2'} needs module my_outputs (it defines "
        "the pytree types of its inputs or outputs, or custom operators its graph calls), which cannot be "
        "imported (ModuleNotFoundError: No module named 'my_outputs'); install the package that provides it"
    )


def test_reproducer_of_a_hugging_face_export_replays_in_a_fresh_process(planted_site, project, tmp_path):
    cfg = project / "fxpasses.toml"
    cfg.write_text(
        'pipeline = "remove_dropout,planted{raise_at=1},eliminate_dead_code"\n'
        "[model]\n"
        'factory = "hf_model:gpt2"\n'
        'capture = "export"\n'
        "[model.inputs]\n"
        'input_ids = { shape = [1, 8], dtype = "int64", low = 0, high = 100 }\n'
    )
    rep = tmp_path / "repro"
    r = CliRunner().invoke(cli, ["run", str(cfg), "--reproducer", str(rep), "--repeat", "1", "--no-save"])
    assert r.exit_code == 1, r.output
    assert "planted failure at %" in r.output
    graph = (rep / "graph.py").read_text()
    assert "    b.imports(['transformers.modeling_outputs'])\n" in graph
    # a graph file written before the imports were recorded: the module the type names is imported
    shutil.copytree(rep, tmp_path / "old")
    (tmp_path / "old" / "graph.py").write_text(graph.replace("    b.imports(['transformers.modeling_outputs'])\n", ""))

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = Path(sys.executable).parent / "fxpasses"
    for d in (rep, tmp_path / "old"):
        out = subprocess.run(
            [str(script), "run", str(d / "fxpasses.json"), "--repeat", "1", "--no-save"],
            capture_output=True, text=True, cwd=elsewhere, timeout=300,
            env={**os.environ, "PYTHONPATH": str(planted_site)},
        )
        assert out.returncode == 1, out.stderr
        assert "planted failure at %" in out.stderr and "pytree" not in out.stderr, out.stderr
        assert "Traceback" not in out.stderr


def test_graph_file_with_an_unregistered_type_names_it(tmp_path):
    spec = torch.utils._pytree.treespec_dumps(torch.utils._pytree.tree_structure((1, 2)))
    missing = spec.replace("builtins.tuple", "nowhere_pkg.outputs.Thing")
    (tmp_path / "graph.py").write_text(
        textwrap.dedent(
            f'''
            TENSORS = "tensors.safetensors"

            def build(b):
                b.treespec({missing!r})
            '''
        )
    )
    from fxpasses.errors import ConfigError
    from fxpasses.reproducer import load_graph, save_tensors

    save_tensors(tmp_path / "tensors", {})
    with pytest.raises(ConfigError) as info:
        load_graph(tmp_path / "graph.py")
    assert str(info.value) == (
        f"[model] graph: cannot load {tmp_path / 'graph.py'}: its inputs or outputs hold the pytree "
        "type nowhere_pkg.outputs.Thing, which is not registered in this process; the module that "
        "defines it, nowhere_pkg.outputs, registers it when imported: install it (pip install "
        "nowhere_pkg, or put the module nowhere_pkg on the Python path, if it is that package) and make "
        "it importable here (fxpasses imports it by itself then), or import it before loading the file"
    )


@pytest.mark.parametrize(
    "type_name, says",
    [
        # the module imports but registers no such name
        ("json.Thing", "; importing json did not register it (the type is registered under a name that "
         "is not its module's): import the module that registers it before loading the file"),
        # the module next to the graph file raises when imported
        ("broken_outputs.Thing", "; the module that defines it, broken_outputs, registers it when imported "
         "(importing it raised RuntimeError: boom): install it"),
    ],
)
def test_graph_file_type_whose_import_does_not_register_it(tmp_path, type_name, says):
    (tmp_path / "broken_outputs.py").write_text("raise RuntimeError('boom')\n")
    spec = torch.utils._pytree.treespec_dumps(torch.utils._pytree.tree_structure((1, 2)))
    (tmp_path / "graph.py").write_text(
        f'TENSORS = "tensors.safetensors"\n\n\ndef build(b):\n    b.treespec({spec.replace("builtins.tuple", type_name)!r})\n'
    )
    from fxpasses.errors import ConfigError
    from fxpasses.reproducer import load_graph, save_tensors

    save_tensors(tmp_path / "tensors", {})
    with pytest.raises(ConfigError) as info:
        load_graph(tmp_path / "graph.py")
    assert str(info.value).startswith(
        f"[model] graph: cannot load {tmp_path / 'graph.py'}: its inputs or outputs hold the pytree type "
        f"{type_name}, which is not registered in this process{says}"
    )
    sys.modules.pop("broken_outputs", None)


UNNAMED_DATACLASS = '''
import dataclasses, torch

@dataclasses.dataclass
class Out:
    logits: torch.Tensor
    hidden: torch.Tensor

torch.export.register_dataclass(Out)  # (no serialized_type_name)

class DC(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 3)

    def forward(self, x):
        return Out(logits=self.lin(x * 1), hidden=x)

def dc():
    torch.manual_seed(0)
    return DC().eval()
'''


def test_a_program_returning_a_dataclass_without_a_serialized_name_is_refused_before_the_run(tmp_path, monkeypatch):
    """A model returning a dataclass registered with `register_dataclass(Out)` alone: the
    `-o` run went through the whole pipeline, then `torch.export.save` raised
    NotImplementedError ("No registered serialization name") as an internal error (exit 3),
    printing none of the results and saving nothing (a new-user check). It is refused before
    the run (exit 2), naming the type and the registration to make; saving a program of such
    a type from Python is the same user error."""
    from click.testing import CliRunner

    from fxpasses.cli import cli
    from fxpasses.errors import UserError
    from fxpasses.job import save_program

    (tmp_path / "dcmodels_x.py").write_text(UNNAMED_DATACLASS)
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = tmp_path / "c.toml"
    cfg.write_text('pipeline = "simplify_algebra"\n[model]\nfactory = "dcmodels_x:dc"\ncapture = "export"\ninputs = [{shape = [2, 8]}]\n')
    said = (
        "cannot save the optimized program: the model takes or returns dcmodels_x.Out, registered as a pytree node "
        "without a serialized_type_name, which torch.export.save needs to write the program: register it with "
        'torch.export.register_dataclass(Out, serialized_type_name="dcmodels_x.Out") (or run with --no-save)'
    )
    r = CliRunner().invoke(cli, ["run", str(cfg), "-o", str(tmp_path / "out"), "--repeat", "1"])
    assert r.exit_code == 2, r.output
    assert r.output.strip() == f"error: {cfg}: [model]: {said}", r.output
    assert not (tmp_path / "out").exists()
    r = CliRunner().invoke(cli, ["run", str(cfg), "--no-save", "--repeat", "1"])
    assert r.exit_code == 0, r.output
    import dcmodels_x

    ep = torch.export.export(dcmodels_x.dc(), (torch.randn(2, 8),))
    with pytest.raises(UserError, match="dcmodels_x.Out, registered as a pytree node without a serialized_type_name"):
        save_program(ep, tmp_path / "m.pt2")


def test_load_program_from_python_names_no_config_key(tmp_path):
    """`fxpasses.job.load_program(path)` from Python prefixed its errors with "[model] program:",
    a config key no config gave (a new-user check); a config's run still names it."""
    from fxpasses.errors import ConfigError
    from fxpasses.job import load_program

    bad = tmp_path / "not_a_program.pt2"
    torch.save({"x": torch.ones(1)}, bad)
    with pytest.raises(ConfigError) as info:
        load_program(bad)
    assert info.value.source is None
    assert str(info.value).startswith(f"cannot load {bad} with torch.export.load:"), str(info.value)
    with pytest.raises(ConfigError) as info:
        load_program(tmp_path / "missing.pt2")
    assert str(info.value) == f"program file not found: {tmp_path / 'missing.pt2'}"
