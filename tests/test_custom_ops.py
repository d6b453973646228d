"""A plugin pass that inserts a custom operator: what fxpasses saves loads back in a fresh process.

The operator is defined by the plugin's module; a fresh process that has not imported it
cannot resolve ``torch.ops.acme_test.linear_relu``. `torch.export.load` of the saved program
failed with "Failed deserializing node ... (is it a program written by torch.export.save?)"
unless the user imported the plugin first, the saved ``module/module.py`` of a symbolic_trace
capture failed when called, and a reproducer replayed with plugin autoloading off failed
(a new-user check). Each is run in a subprocess: a custom operator cannot be unregistered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dists import make_dist

PLUGIN = '''
import operator

import torch
import fxpasses
from fxpasses import NodePass, Replace, on


@torch.library.custom_op("acme_test::linear_relu", mutates_args=())
def linear_relu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(torch.nn.functional.linear(x, w, b))


@linear_relu.register_fake
def _(x, w, b):
    return x.new_empty(*x.shape[:-1], w.shape[0])


def _setup(ctx, inputs, output):
    x, w, _ = inputs
    ctx.save_for_backward(x, w, output)


def _backward(ctx, grad):
    x, w, out = ctx.saved_tensors
    g = (grad * (out > 0)).flatten(0, -2)
    return (g @ w).reshape(x.shape), g.T @ x.flatten(0, -2), g.sum(0)


linear_relu.register_autograd(_backward, setup_context=_setup)


class FuseLinearRelu(NodePass):
    """relu(linear(x, w, b)) -> acme_test.linear_relu(x, w, b) (one use of the linear)."""

    name = "fuse_linear_relu"

    @on("relu")
    def visit(self, node, ctx):
        lin = node.args[0]
        if not isinstance(lin, torch.fx.Node) or len(lin.users) != 1 or lin.op != "call_function":
            return None
        if lin.target not in (torch.nn.functional.linear, torch._C._nn.linear, torch.ops.aten.linear.default):
            return None
        if len(lin.args) != 3 or lin.kwargs:
            return None
        ctx.count("fused")
        return Replace(ctx.call_function(torch.ops.acme_test.linear_relu.default, tuple(lin.args)))


@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register(FuseLinearRelu)
'''

MODEL = '''
import torch


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.nn.functional.relu(torch.nn.functional.linear(x, self.a.weight, self.a.bias)))


def mlp():
    torch.manual_seed(0)
    return Mlp().eval()
'''


@pytest.fixture
def plugin_site(tmp_path):
    site = tmp_path / "site"
    make_dist(site, "acme-test-ops", "0.1.0", "acme_test_ops", PLUGIN)
    (tmp_path / "models.py").write_text(textwrap.dedent(MODEL))
    return site


def _python(code: str, cwd: Path, site: Path | None, *, autoload: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FXPASSES_DISABLE_PLUGIN_AUTOLOAD")}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    if not autoload:
        env["FXPASSES_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _run(tmp_path: Path, site: Path, capture: str, *extra: str) -> subprocess.CompletedProcess:
    cfg = tmp_path / f"{capture}.toml"
    cfg.write_text(
        'pipeline = "fuse_linear_relu"\n'
        f'output = "out_{capture}"\n'
        f'[model]\nfactory = "models:mlp"\ncapture = "{capture}"\ninputs = [{{shape = [2, 8]}}]\n'
    )
    code = f"import sys\nfrom fxpasses.cli import main\nsys.argv = ['fxpasses', 'run', {str(cfg)!r}, '--repeat', '1', *{list(extra)!r}]\nmain()"
    return _python(code, tmp_path, site)


CHECK = r'''
import torch, sys
sys.path.insert(0, {models!r})
import models
{load}
x = torch.randn(2, 8)
torch.testing.assert_close(m(x), models.mlp()(x))
code = m.code if hasattr(m, "code") else open({module_py!r}).read()
import re
print("ops:", sorted(set(re.findall(r"torch\.ops\.acme_test\.\w+\.\w+", code))))
'''


def test_a_saved_program_calling_a_plugin_operator_loads_in_a_fresh_process(tmp_path, plugin_site):
    done = _run(tmp_path, plugin_site, "export")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fused=1" in done.stdout
    program = tmp_path / "out_export" / "model.pt2"
    # plugins not loaded: the module recorded with the program is imported by the loader
    load = f"import fxpasses.job\nm = fxpasses.job.load_program({str(program)!r})"
    done = _python(CHECK.format(models=str(tmp_path), load=load, module_py=""), tmp_path, plugin_site, autoload=False)
    assert done.returncode == 0, done.stderr
    assert "ops: ['torch.ops.acme_test.linear_relu.default']" in done.stdout, done.stdout
    # the recorded module cannot be imported (the plugin is not installed): named
    done = _python(f"import fxpasses.job\nfxpasses.job.load_program({str(program)!r})", tmp_path, None)
    assert done.returncode == 1
    assert "acme_test_ops" in done.stderr and "ConfigError" in done.stderr, done.stderr


def test_a_program_saved_by_torch_finds_its_operator_in_the_installed_plugins(tmp_path, plugin_site):
    """No record (saved by torch.export.save itself): the loader loads the installed plugins
    and tries again; with none defining the operator, the error names it."""
    program = tmp_path / "plain.pt2"
    save = f'''
    import sys, torch
    sys.path.insert(0, {str(tmp_path)!r})
    import acme_test_ops, models
    m = models.mlp()
    class Fused(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m
        def forward(self, x):
            return self.m.b(torch.ops.acme_test.linear_relu(x, self.m.a.weight, self.m.a.bias))
    torch.export.save(torch.export.export(Fused(), (torch.randn(2, 8),)), {str(program)!r})
    '''
    done = _python(save, tmp_path, plugin_site)
    assert done.returncode == 0, done.stderr
    load = f"import fxpasses.job\nm = fxpasses.job.load_program({str(program)!r})"
    done = _python(CHECK.format(models=str(tmp_path), load=load, module_py=""), tmp_path, plugin_site)
    assert done.returncode == 0, done.stderr
    assert "ops: ['torch.ops.acme_test.linear_relu.default']" in done.stdout, done.stdout
    done = _python(f"import fxpasses.job\nfxpasses.job.load_program({str(program)!r})", tmp_path, None)
    assert done.returncode == 1
    assert (
        "it calls torch.ops.acme_test.linear_relu.default, a custom operator that no imported module or installed "
        "pass plugin defines" in done.stderr
    ), done.stderr


def test_a_saved_module_imports_the_module_of_its_custom_operators(tmp_path, plugin_site):
    done = _run(tmp_path, plugin_site, "symbolic_trace")
    assert done.returncode == 0, done.stdout + done.stderr
    folder = tmp_path / "out_symbolic_trace" / "module"
    assert "import acme_test_ops  # defines custom operators the graph calls" in (folder / "module.py").read_text()
    load = f"import fxpasses.job\nm = fxpasses.job.load_folder({str(folder)!r})"
    done = _python(CHECK.format(models=str(tmp_path), load=load, module_py=str(folder / "module.py")), tmp_path, plugin_site, autoload=False)
    assert done.returncode == 0, done.stderr
    assert "ops: ['torch.ops.acme_test.linear_relu.default']" in done.stdout, done.stdout


def test_a_reproducer_imports_the_module_of_a_custom_operator_an_earlier_pass_inserted(tmp_path, plugin_site):
    cfg = tmp_path / "fail.toml"
    cfg.write_text(
        'pipeline = ["fuse_linear_relu", "fails"]\n'
        f'[model]\nfactory = "models:mlp"\ncapture = "export"\ninputs = [{{shape = [2, 8]}}]\n'
    )
    fails = tmp_path / "site" / "acme_test_fails.py"
    fails.write_text(
        "import fxpasses\n"
        "class Fails(fxpasses.GraphPass):\n"
        "    name = 'fails'\n"
        "    def run(self, gm, ctx):\n"
        "        raise RuntimeError('planted')\n"
        "@fxpasses.hookimpl\n"
        "def fxpasses_register_passes(register):\n"
        "    register(Fails)\n"
    )
    make_dist(tmp_path / "site", "acme-test-fails", "0.1.0", "acme_test_fails", fails.read_text())
    code = (
        "import sys\nfrom fxpasses.cli import main\n"
        f"sys.argv = ['fxpasses', 'run', {str(cfg)!r}, '--no-save', '--repeat', '1', '--reproducer', 'rep']\nmain()"
    )
    done = _python(code, tmp_path, plugin_site)
    assert done.returncode == 1 and "planted" in done.stdout + done.stderr, done.stdout + done.stderr
    graph_py = (tmp_path / "rep" / "graph.py").read_text()
    assert "b.imports(['acme_test_ops'])" in graph_py
    config = json.loads((tmp_path / "rep" / "fxpasses.json").read_text())
    assert [e["name"] for e in config["pipeline"]] == ["fails"]
    # replayed with autoloading off: only the failing pass's plugin is enabled, and the
    # operator's module is imported by the graph itself
    code = (
        "import sys\nfrom fxpasses.cli import main\n"
        f"sys.argv = ['fxpasses', 'run', {str(tmp_path / 'rep' / 'fxpasses.json')!r}, '--no-save', '--repeat', '1']\nmain()"
    )
    done = _python(code, tmp_path, plugin_site, autoload=False)
    assert done.returncode == 1 and "planted" in done.stdout + done.stderr, done.stdout + done.stderr
    assert "cannot import" not in done.stdout + done.stderr


def test_the_module_of_an_operator_defined_through_a_library_is_found_by_its_file(tmp_path, monkeypatch):
    """torch.library.custom_op keeps its function (and so its module); an operator defined
    with torch.library.Library.define is found through the file the dispatcher records."""
    import importlib

    import torch

    from fxpasses._custom_ops import defining_module, op_modules, unknown_op

    (tmp_path / "lib_ops_for_test.py").write_text(
        "import torch\n"
        "lib = torch.library.Library('fxpasses_lib_test', 'DEF')\n"
        "lib.define('twice(Tensor x) -> Tensor')\n"
        "lib.impl('twice', lambda x: x * 2, 'CompositeExplicitAutograd')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("lib_ops_for_test")
    op = torch.ops.fxpasses_lib_test.twice
    assert defining_module(op.default) == defining_module(op) == "lib_ops_for_test"
    assert op_modules([op.default, torch.ops.aten.add.Tensor, torch.add, "x"]) == ["lib_ops_for_test"]
    assert defining_module(torch.ops.aten.add.Tensor) is None
    assert unknown_op("Failed deserializing node Node(target='torch.ops.fxpasses_lib_test.twice.default')") is None
    assert unknown_op("Failed deserializing node Node(target='torch.ops.nowhere_ns.op.default')") == "torch.ops.nowhere_ns.op.default"
