"""Presets: named pipelines from plugins, used as `preset = "..."` or `--preset`."""

from __future__ import annotations

import importlib

import pytest
from click.testing import CliRunner

import fxpasses
from fxpasses import ConfigError, Pipeline, UnknownPassError
from fxpasses.cli import cli

from dists import forget_modules, make_dist


def test_builtin_presets():
    reg = fxpasses.Registry()
    presets = reg.presets()
    assert presets["cleanup"].pipeline == "eliminate_common_subexpressions,eliminate_dead_code"
    assert presets["inference"].pipeline.split(",") == [
        "remove_dropout", "fuse_conv_bn", "simplify_algebra", "fold_constants{fold_parameters=true}",
        "eliminate_common_subexpressions", "eliminate_dead_code",
    ]
    # the same passes for a model still to be trained: fold_constants at its default, which
    # leaves parameters that require grad alone in training mode
    assert presets["training"].pipeline == presets["inference"].pipeline.replace("{fold_parameters=true}", "").replace(
        "eliminate_dead_code", "eliminate_dead_code{remove_unused_state=false}"
    )
    assert presets["inference"].source == "fxpasses 0.1.0"


def test_training_preset_keeps_every_state_dict_name_and_gradient():
    """Unused and tied parameters stay (a checkpoint loads with strict=True, optimizer groups
    keep their names), and every parameter still gets its gradient."""
    import torch
    import torch.nn as nn

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.enc = nn.Linear(4, 4)
            self.aux = nn.Linear(4, 2)  # trained by another loss
            self.dec = nn.Linear(4, 4)
            self.dec.weight = self.enc.weight  # tied

        def forward(self, x):
            return self.dec(self.enc(x) * 1)

    torch.manual_seed(0)
    model = M().train()
    x = torch.randn(2, 4)
    gm = torch.export.export(model, (x,)).module()
    before = set(gm.state_dict())
    Pipeline.from_config({"preset": "training"}).run(gm, [x])
    assert set(gm.state_dict()) == before
    gm(x).sum().backward()
    grads = {k: p.grad for k, p in gm.named_parameters()}
    assert grads["enc.weight"] is not None and grads["enc.bias"] is not None and grads["dec.bias"] is not None


def test_preset_in_config_and_errors(tmp_path):
    p = Pipeline.from_config({"preset": "cleanup", "verify": "none"})
    assert p.plan().names() == ["eliminate_common_subexpressions", "eliminate_dead_code"]
    with pytest.raises(ConfigError, match="either `pipeline` or `preset`"):
        Pipeline.from_config({"preset": "cleanup", "pipeline": "eliminate_dead_code"})
    with pytest.raises(UnknownPassError) as info:
        Pipeline.from_config({"preset": "inferenc"})
    assert "unknown preset 'inferenc'; did you mean 'inference'?" in str(info.value)
    assert "available presets: cleanup, inference" in str(info.value)


def test_cli_preset_flag():
    r = CliRunner().invoke(cli, ["check", "--preset", "cleanup"])
    assert r.exit_code == 0, r.output
    assert " 1. eliminate_common_subexpressions" in r.output and " 2. eliminate_dead_code" in r.output
    r = CliRunner().invoke(cli, ["check", "--preset", "cleanup", "--pipeline", "x"])
    assert r.exit_code == 2 and "either --pipeline or --preset" in r.output
    r = CliRunner().invoke(cli, ["check", "--preset", "nope"])
    assert r.exit_code == 2 and "--preset: unknown preset 'nope'" in r.output


def install_presets(tmp_path, monkeypatch, *dists):
    """Install distributions (name, version, module, [(preset, pipeline), ...]) whose plugin
    registers those presets; forget their modules so that each registry imports them anew."""
    site = tmp_path / "site"
    for dist, version, module, presets in dists:
        calls = "".join(f"\n            register({n!r}, {p!r}, 'A preset from a plugin.')" for n, p in presets)
        source = f"""
        import fxpasses
        @fxpasses.hookimpl
        def fxpasses_register_presets(register):{calls}
        """
        make_dist(site, dist, version, module, source)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    forget_modules(*(d[2] for d in dists))


def test_plugin_presets_and_clashes(tmp_path, monkeypatch):
    install_presets(
        tmp_path,
        monkeypatch,
        ("preset-dist", "1.2", "fxp_presets", [("tidy", "eliminate_dead_code")]),
        ("clash-dist", "0.9", "fxp_clash", [("cleanup", "remove_dropout")]),
    )
    reg = fxpasses.Registry()
    assert reg.preset("tidy").pipeline == "eliminate_dead_code"
    assert reg.preset("tidy").source == "preset-dist 1.2"
    # the built-in one wins (loaded first); the clash is reported naming both
    assert reg.preset("cleanup").source == "fxpasses 0.1.0"
    (problem,) = [str(p) for p in reg.problems if "clash-dist" in str(p)]
    assert "preset 'cleanup' is already registered by fxpasses 0.1.0" in problem
    forget_modules("fxp_presets", "fxp_clash")


def test_broken_plugin_presets_are_reported_when_the_plugin_loads(tmp_path, monkeypatch):
    presets = [
        ("bad_syntax", "eliminate_dead_code["),
        ("ghost_pass", "eliminate_dead_code,no_such_pass"),
        ("fine", "eliminate_dead_code"),
    ]
    install_presets(tmp_path, monkeypatch, ("bad-presets", "0.1", "fxp_bad_presets", presets))
    with pytest.warns(fxpasses.PluginWarning):
        reg = fxpasses.Registry()
    problems = "\n".join(str(p) for p in reg.problems if "bad-presets" in str(p))
    assert "preset 'bad_syntax' skipped: its pipeline 'eliminate_dead_code[' is malformed" in problems
    assert "preset 'ghost_pass' names pass(es) no installed plugin registers: no_such_pass" in problems
    assert "bad_syntax" not in reg.presets() and "fine" in reg.presets()
    status = {r.distribution: r.status for r in reg.plugins}
    assert status["bad-presets"] == "partial"
    with pytest.raises(UnknownPassError) as info:  # using it still names the pass and the plugin
        Pipeline.from_config({"preset": "ghost_pass"}, registry=reg)
    assert "unknown pass 'no_such_pass'" in str(info.value) and "bad-presets 0.1" in str(info.value)
    forget_modules("fxp_bad_presets")
