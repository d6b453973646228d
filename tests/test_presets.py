"""Presets: named pipelines from plugins, used as `preset = "..."` or `--preset`."""

from __future__ import annotations

import copy
import importlib
import sys

import pytest
import torch
from click.testing import CliRunner

import fxpasses
from fxpasses.registry import Rejection
from fxpasses import ConfigError, Pipeline, UnknownPassError
from fxpasses.cli import cli

from dists import forget_modules, good_pass_source, make_dist


def test_builtin_presets():
    reg = fxpasses.Registry()
    presets = reg.presets()
    assert presets["cleanup"].pipeline == "eliminate_common_subexpressions,eliminate_dead_code"
    assert presets["inference"].pipeline.split(",") == [
        "remove_dropout", "simplify_algebra", "fold_constants{fold_parameters=true}", "fuse_conv_bn",
        "eliminate_common_subexpressions", "eliminate_dead_code",
    ]
    # for a model still to be trained: no conv-bn fusion, no parameter folded, no state
    # removed or added (a new-user check found fusion and folding broke both)
    assert presets["training"].pipeline.split(",") == [
        "remove_dropout{keep_module_dropouts=true}", "simplify_algebra",
        "fold_constants{fold_parameters=false", "remove_unused_state=false", "modules_may_train=true}",
        "eliminate_common_subexpressions{modules_may_train=true}",
        "eliminate_dead_code{remove_unused_state=false", "modules_may_train=true}",
    ]
    assert presets["inference"].source == "fxpasses 0.1.0"


def test_training_preset_keeps_the_dropout_of_an_eval_mode_symbolic_trace_capture():
    """A symbolic_trace module follows .train() at call time: the preset removed an eval-mode
    capture's nn.Dropout, so training it later had no dropout (a new-user check)."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)
            self.drop = torch.nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(self.lin(x))

    eager = Net().eval()
    gm = torch.fx.symbolic_trace(copy.deepcopy(eager))
    x = torch.randn(16, 8)
    report = Pipeline.from_preset("training", verify="numeric").run(gm, [x])
    assert report["remove_dropout"].changed is False and report["remove_dropout"].skipped
    gm.train()
    eager.train()
    torch.manual_seed(1)
    a = gm(x)
    torch.manual_seed(1)
    b = eager(x)
    assert (b == 0).sum() > 0 and torch.equal(a, b)  # dropout active in both, the same draws
    # the inference preset still removes it (eval mode is what inference means)
    gm = torch.fx.symbolic_trace(Net().eval())
    assert Pipeline.from_preset("inference").run(gm, [x])["remove_dropout"].counters == {"removed": 1}


class _TwiceCalled(torch.nn.Module):
    """Each dropout and batch-norm module called twice on one value, once more unused, and once
    on a buffer: in eval mode every such call is pure, in training mode none is."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.drop = torch.nn.Dropout(0.5)
        self.bn = torch.nn.BatchNorm1d(8)
        self.bn_plain = torch.nn.BatchNorm1d(8, affine=False)  # no parameters: fold_constants may look at it
        self.register_buffer("c", torch.randn(4, 8))

    def forward(self, x):
        h = self.lin(x)
        self.bn(h)  # unused: in training mode it still updates the statistics
        return self.drop(h) + self.drop(h) + self.bn(h) + self.bn(h) + self.drop(self.bn_plain(self.c)).sum(0)


def test_training_preset_merges_removes_and_folds_no_dropout_or_batch_norm_call_of_an_eval_mode_capture():
    """A symbolic_trace graph calls its modules, which follow .train() at call time. The
    training preset kept an eval-mode capture's dropout module but CSE then merged its two
    calls (one mask for both: outputs off by 2.9 once trained), and two calls of one batch
    norm (its statistics updated once a step, num_batches_tracked 1 for 2); DCE removed an
    unused batch-norm call and fold_constants folded a batch norm of a buffer, both pure in
    eval mode only (a real-model sweep). The preset's passes now judge module calls as in
    training mode (`modules_may_train`); by default they judge the module's mode now."""
    torch.manual_seed(0)
    eager = _TwiceCalled().eval()
    x = torch.randn(4, 8)
    gm = torch.fx.symbolic_trace(copy.deepcopy(eager))
    calls = [n.target for n in gm.graph.nodes if n.op == "call_module"]
    report = Pipeline.from_preset("training", verify="numeric").run(gm, [x])
    assert [n.target for n in gm.graph.nodes if n.op == "call_module"] == calls  # every call kept
    assert not report["eliminate_common_subexpressions"].counters.get("merged")
    assert not report["fold_constants"].counters.get("folded")
    gm.train()
    eager.train()
    for step in range(2):
        torch.manual_seed(step)
        want = eager(x)
        torch.manual_seed(step)
        got = gm(x)
        assert torch.equal(got, want)
    for name in ("bn", "bn_plain"):
        assert torch.equal(gm.get_submodule(name).running_mean, eager.get_submodule(name).running_mean)
    assert gm.bn.num_batches_tracked.item() == eager.bn.num_batches_tracked.item() == 6

    # the passes alone, by default, judge the modules' mode now: in eval mode all merge, go
    # or fold (what the inference preset wants)
    gm = torch.fx.symbolic_trace(copy.deepcopy(eager).eval())
    report = Pipeline.from_string("fold_constants,eliminate_dead_code,eliminate_common_subexpressions").run(gm, [x])
    assert report["fold_constants"].counters["folded"] == 1
    assert report["eliminate_dead_code"].counters["removed_nodes"] == 1  # the unused bn(h)
    assert report["eliminate_common_subexpressions"].counters["merged"] == 2
    assert len([n for n in gm.graph.nodes if n.op == "call_module"]) == 3  # lin, one drop, one bn


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


class _FineTuned(torch.nn.Module):
    """What fine-tuning looks like: a trainable conv before a frozen (eval-mode) batch norm, a
    frozen parameter and a buffer read through arithmetic, and an eval-mode submodule whose
    parameter still requires grad, in a model in training mode."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.pos = torch.nn.Parameter(torch.randn(8, 4), requires_grad=False)
        self.register_buffer("scale", torch.full((4,), 3.0))
        self.backbone = torch.nn.Module()
        self.backbone.w = torch.nn.Parameter(torch.randn(4, 4))
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        y = self.bn(self.conv(x)).relu().mean((2, 3))
        y = y + self.pos[:1] * 2 + self.scale.sqrt()
        y = y @ self.backbone.w.t()
        return self.head(y)


@pytest.mark.parametrize("dialect", ["symbolic_trace", "export"])
def test_training_preset_keeps_a_fine_tuned_model_trainable_as_it_is(dialect):
    """The training preset fused a frozen BN into the trainable conv (the conv's weight got no
    gradient any more: a new conv_fused.weight did) and fold_constants folded and deleted the
    frozen `pos`, the buffer `scale` and, under symbolic_trace, the eval-mode submodule's
    trainable `w` (state-dict names changed; an optimizer built on the model's parameters
    trained tensors the graph no longer read); found by a new-user check."""
    from fxpasses.capture import capture

    torch.manual_seed(0)
    model = _FineTuned().train()
    model.bn.eval()
    model.backbone.eval()
    x = torch.randn(2, 3, 8, 8)
    gm = capture(model, [x], dialect).gm
    names = list(gm.state_dict())
    checkpoint = {k: v.clone() for k, v in gm.state_dict().items()}
    report = Pipeline.from_preset("training", verify="numeric").run(gm, [x])
    assert list(gm.state_dict()) == names
    assert report["fold_constants"].counters.get("removed_parameters", 0) == 0
    assert report["fold_constants"].counters.get("removed_buffers", 0) == 0
    # every parameter that requires grad gets its gradient, and training it trains the graph
    eager = copy.deepcopy(model)
    opt_gm = torch.optim.SGD([p for p in gm.parameters() if p.requires_grad], lr=0.1)
    opt_eager = torch.optim.SGD([p for p in eager.parameters() if p.requires_grad], lr=0.1)
    for _ in range(2):
        for m, opt in ((gm, opt_gm), (eager, opt_eager)):
            opt.zero_grad()
            m(x).square().sum().backward()
            opt.step()
    grads = {k: p.grad for k, p in gm.named_parameters() if p.requires_grad}
    assert set(grads) == {"conv.weight", "conv.bias", "bn.weight", "bn.bias", "backbone.w", "head.weight", "head.bias"}
    assert all(g is not None for g in grads.values())
    torch.testing.assert_close(gm(x), eager(x), rtol=1e-5, atol=1e-6)
    # and a checkpoint loads both ways, strictly (symbolic_trace itself evaluates
    # `self.scale.sqrt()` into a `_tensor_constant0` at capture: there against the capture's)
    gm.load_state_dict(checkpoint)
    if dialect == "export":
        gm.load_state_dict(eager.state_dict())
        eager.load_state_dict(gm.state_dict())


def test_preset_in_config_and_errors(tmp_path):
    p = Pipeline.from_config({"preset": "cleanup", "verify": "none"})
    assert p.plan().names() == ["eliminate_common_subexpressions", "eliminate_dead_code"]
    with pytest.raises(ConfigError, match="either `pipeline` or `preset`"):
        Pipeline.from_config({"preset": "cleanup", "pipeline": "eliminate_dead_code"})
    with pytest.raises(UnknownPassError) as info:
        Pipeline.from_config({"preset": "inferenc"})
    assert "unknown preset 'inferenc'; did you mean 'inference'?" in str(info.value)
    assert "available presets: cleanup, inference" in str(info.value)


def test_from_preset_builds_the_presets_pipeline_with_pipeline_arguments():
    p = Pipeline.from_preset(
        "inference", verify="numeric", atol=1e-4, options={"fold_constants": {"max_numel": 64}}
    )
    assert p.plan().as_pipeline_string() == Pipeline.from_config({"preset": "inference"}).plan().as_pipeline_string().replace(
        "fold_constants{fold_parameters=true}", "fold_constants{max_numel=64,fold_parameters=true}"
    )
    assert (p.verify, p.atol, p.rtol, p.source) == ("numeric", 1e-4, 1e-5, "preset 'inference'")
    with pytest.raises(ConfigError, match=r"^preset 'cleanup': options given for pass\(es\) not in the pipeline: fuse_conv_bn; add each pass to the pipeline"):
        Pipeline.from_preset("cleanup", options={"fuse_conv_bn": {}})


def test_from_preset_options_change_an_option_the_preset_sets_as_a_config_table_does():
    """`options` changes the preset's own settings (fold_parameters=true in `inference`), as
    `[options.fold_constants]` does under `preset = "inference"` and with --preset."""
    override = {"fold_constants": {"fold_parameters": False}}
    p = Pipeline.from_preset("inference", options=override)
    from_config = Pipeline.from_config({"preset": "inference", "options": override})
    assert p.plan().as_pipeline_string() == from_config.plan().as_pipeline_string()
    assert "fold_constants{fold_parameters=false}" in p.plan().as_pipeline_string().split(",")
    assert "fold_parameters=true" not in p.plan().as_pipeline_string()


def test_from_preset_and_from_string_point_at_each_other():
    with pytest.raises(UnknownPassError) as info:
        Pipeline.from_string("inference")
    assert str(info.value).splitlines()[1] == (
        "('inference' is a preset (a named pipeline), not a pass: give it as `preset = \"inference\"` in a config, "
        "`--preset inference` on the command line, Pipeline.from_preset('inference') in Python, or "
        "options={\"preset\": \"inference\"} to torch.compile)"
    )
    with pytest.raises(UnknownPassError) as info:
        Pipeline.from_preset("eliminate_dead_code")
    lines = str(info.value).splitlines()
    assert lines[0] == "Pipeline.from_preset: unknown preset 'eliminate_dead_code'"
    assert lines[1] == (
        "('eliminate_dead_code' is a pass, not a preset: give it as a pipeline, `pipeline = \"eliminate_dead_code\"` "
        "in a config, `--pipeline eliminate_dead_code` on the command line or "
        "Pipeline.from_string('eliminate_dead_code') in Python)"
    )
    assert lines[2] == "available presets: cleanup, inference, training, example_cleanup"
    with pytest.raises(UnknownPassError, match=r"^Pipeline.from_preset: unknown preset 'inferenc'; did you mean 'inference'\?"):
        Pipeline.from_preset("inferenc")
    with pytest.raises(ConfigError, match=r"^Pipeline.from_preset takes a preset name \(a str\), got \['inference'\]$"):
        Pipeline.from_preset(["inference"])


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
        # (name, pipeline) or (name, pipeline, description)
        calls = "".join(
            f"\n            register({n!r}, {p!r}, {(d[0] if d else 'A preset from a plugin.')!r})" for n, p, *d in presets
        )
        source = f"""
        import fxpasses
        @fxpasses.hookimpl
        def fxpasses_register_presets(register):{calls}
        """
        make_dist(site, dist, version, module, source)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    forget_modules(*(d[2] for d in dists))


def test_two_plugins_presets_of_one_name_wait_for_prefer(tmp_path, monkeypatch):
    """The preset of the distribution whose name sorted first was taken silently (a warning
    for the other), and `prefer` could not choose (its check said the distribution "registers
    no pass 'fast'"); found by a new-user check. As for passes, neither is used until `prefer`
    chooses one."""
    install_presets(
        tmp_path,
        monkeypatch,
        ("aaa-presets", "1.0", "fxp_aaa", [("fast", "eliminate_dead_code")]),
        ("zzz-presets", "2.0", "fxp_zzz", [("fast", "remove_dropout")]),
    )
    reg = fxpasses.Registry()
    with pytest.raises(fxpasses.DuplicatePassError) as info:
        reg.preset("fast")
    assert str(info.value) == (
        "preset name 'fast' is registered by more than one plugin: aaa-presets 1.0 and zzz-presets 2.0; choose one "
        'with `prefer = {fast = "<distribution>"}` in the [plugins] config section, or '
        '`Registry(prefer={"fast": "<distribution>"})` in Python, or uninstall one of them'
    )
    (problem,) = [str(p) for p in reg.problems if "fast" in str(p)]
    assert "preset 'fast' is also registered by aaa-presets 1.0; neither is used until" in problem
    forget_modules("fxp_aaa", "fxp_zzz")
    chosen = fxpasses.Registry(prefer={"fast": "zzz-presets"})
    assert chosen.preset("fast").pipeline == "remove_dropout"
    assert not [p for p in chosen.problems if "prefer" in str(p) or "fast" in str(p)]  # prefer names a real choice
    forget_modules("fxp_aaa", "fxp_zzz")
    assert fxpasses.Registry(prefer={"fast": "aaa-presets"}).preset("fast").pipeline == "eliminate_dead_code"


def test_list_and_show_name_a_preset_two_plugins_register(tmp_path, monkeypatch):
    """A preset two plugins register (no prefer) had no row in `list` (text or JSON), and
    `show` said it was unknown, "from a plugin that was not loaded"; found by a new-user
    check. Both now name the clash and every registration, as for a pass."""
    import json

    from click.testing import CliRunner

    from fxpasses.cli import cli

    install_presets(
        tmp_path,
        monkeypatch,
        ("aaa-presets", "1.0", "fxp_aaa", [("fast", "eliminate_dead_code")]),
        ("zzz-presets", "2.0", "fxp_zzz", [("fast", "remove_dropout")]),
    )
    r = CliRunner().invoke(cli, ["list"])
    assert r.exit_code == 0, r.output
    (row,) = [line for line in r.output.splitlines() if line.startswith("fast ")]
    assert row.split()[:2] == ["fast", "CONFLICT"]
    assert "registered by aaa-presets 1.0 and zzz-presets 2.0: choose one with" in row
    forget_modules("fxp_aaa", "fxp_zzz")
    r = CliRunner().invoke(cli, ["list", "--format", "json"])
    (entry,) = [p for p in json.loads(r.stdout)["presets"] if p["name"] == "fast"]
    assert entry["source"] == "CONFLICT" and entry["pipeline"] is None
    assert [(c["source"], c["pipeline"]) for c in entry["candidates"]] == [
        ("aaa-presets 1.0", "eliminate_dead_code"),
        ("zzz-presets 2.0", "remove_dropout"),
    ]
    forget_modules("fxp_aaa", "fxp_zzz")
    r = CliRunner().invoke(cli, ["show", "fast"])
    assert r.exit_code == 0, r.output
    assert "preset name 'fast' is registered by more than one plugin: aaa-presets 1.0 and zzz-presets 2.0" in r.stderr
    assert "pipeline: eliminate_dead_code" in r.stdout and "pipeline: remove_dropout" in r.stdout
    forget_modules("fxp_aaa", "fxp_zzz")
    r = CliRunner().invoke(cli, ["show", "fast", "--format", "json"])
    assert [c["source"] for c in json.loads(r.stdout)["candidates"]] == ["aaa-presets 1.0", "zzz-presets 2.0"]
    forget_modules("fxp_aaa", "fxp_zzz")
    r = CliRunner().invoke(cli, ["-p", "aaa-presets", "-p", "zzz-presets", "show", "fast"])
    assert "not loaded" not in r.output


def test_a_preset_two_plugins_register_named_as_a_pipeline_says_so(tmp_path, monkeypatch):
    """`--pipeline fast` (or Pipeline.from_string) of a preset two plugins claim said only
    "unknown pass 'fast'", where a bound preset's name says it is a preset (a new-user check)."""
    install_presets(
        tmp_path,
        monkeypatch,
        ("aaa-presets", "1.0", "fxp_aaa", [("fast", "eliminate_dead_code")]),
        ("zzz-presets", "2.0", "fxp_zzz", [("fast", "remove_dropout")]),
    )
    with pytest.warns(fxpasses.PluginWarning):
        reg = fxpasses.Registry()
    with pytest.raises(fxpasses.UnknownPassError) as info:
        fxpasses.Pipeline.from_string("fast", registry=reg)
    assert (
        "'fast' is a preset (a named pipeline), not a pass, and aaa-presets 1.0 and zzz-presets 2.0 both "
        "register it: choose one with `prefer = {fast = \"<distribution>\"}`"
    ) in str(info.value)
    forget_modules("fxp_aaa", "fxp_zzz")


def test_list_and_show_apply_the_pyprojects_plugins_section(tmp_path, monkeypatch):
    """`fxpasses run` below a pyproject.toml whose [tool.fxpasses.plugins] prefers one of two
    plugins' presets used it, while `list` still said CONFLICT and `show` "choose one with
    prefer" (found by a new-user check): list, show and schema apply that section too."""
    import json

    from click.testing import CliRunner

    from fxpasses.cli import cli

    install_presets(
        tmp_path,
        monkeypatch,
        ("aaa-presets", "1.0", "fxp_aaa", [("fast", "eliminate_dead_code")]),
        ("zzz-presets", "2.0", "fxp_zzz", [("fast", "remove_dropout")]),
    )
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.fxpasses.plugins]\nprefer = {fast = "zzz-presets"}\n')
    monkeypatch.chdir(project / "src")
    r = CliRunner().invoke(cli, ["list", "--format", "json"])
    (entry,) = [p for p in json.loads(r.stdout)["presets"] if p["name"] == "fast"]
    assert (entry["source"], entry["pipeline"]) == ("zzz-presets 2.0", "remove_dropout")
    forget_modules("fxp_aaa", "fxp_zzz")
    r = CliRunner().invoke(cli, ["show", "fast"])
    assert r.exit_code == 0 and "pipeline: remove_dropout" in r.stdout and "warning" not in r.stderr, r.output
    forget_modules("fxp_aaa", "fxp_zzz")
    (project / "pyproject.toml").write_text("[tool.fxpasses.plugins]\nprefer = 3\n")
    r = CliRunner().invoke(cli, ["list"])
    assert r.exit_code == 0 and "its [plugins] section is not applied" in r.stderr, r.output
    forget_modules("fxp_aaa", "fxp_zzz")
    (project / "pyproject.toml").write_text("[tool.fxpasses\n")  # not TOML
    r = CliRunner().invoke(cli, ["list"])
    assert r.exit_code == 0 and "invalid TOML" in r.stderr and "not applied" in r.stderr, r.output
    forget_modules("fxp_aaa", "fxp_zzz")


def test_one_plugin_registering_two_presets_of_one_name_keeps_the_first_and_says_so(tmp_path, monkeypatch):
    install_presets(
        tmp_path, monkeypatch, ("twice-presets", "1.0", "fxp_twice", [("fast", "eliminate_dead_code"), ("fast", "remove_dropout")])
    )
    reg = fxpasses.Registry()
    assert reg.preset("fast").pipeline == "eliminate_dead_code"
    (problem,) = [str(p) for p in reg.problems if "fast" in str(p)]
    assert "preset 'fast' ('remove_dropout') skipped: twice-presets registers another preset under this name" in problem
    assert "prefer" not in problem


def test_a_preset_registered_twice_alike_by_one_plugin_is_listed_once(tmp_path, monkeypatch):
    install_presets(
        tmp_path, monkeypatch, ("again-presets", "1.0", "fxp_again", [("same", "eliminate_dead_code"), ("same", "eliminate_dead_code")])
    )
    reg = fxpasses.Registry()
    (rec,) = [r for r in reg.plugins if r.distribution == "again-presets"]
    assert rec.presets == ["same"] and rec.status == "loaded"
    assert not [p for p in reg.problems if "again-presets" in str(p)]


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
    why = (
        "the name is taken by the built-in preset of fxpasses 0.1.0 (choose the plugin's with "
        '`prefer = {cleanup = "clash-dist"}` in the [plugins] config section, or '
        '`Registry(prefer={"cleanup": "clash-dist"})` in Python)'
    )
    assert f"preset 'cleanup' skipped: {why}" in problem
    # and it is among what the plugin registered that was rejected (fxpasses list's table)
    (rec,) = [r for r in reg.plugins if r.distribution == "clash-dist"]
    assert rec.rejected == [Rejection("preset", "cleanup", why)]
    # prefer takes the plugin's over the built-in one, as for a pass
    assert fxpasses.Registry(prefer={"cleanup": "clash-dist"}).preset("cleanup").source == "clash-dist 0.9"
    forget_modules("fxp_presets", "fxp_clash")
    from click.testing import CliRunner

    from fxpasses.cli import cli

    r = CliRunner().invoke(cli, ["list"])
    assert r.exit_code == 0, r.output
    rows = [line.split()[:4] for line in r.output.splitlines() if line.startswith("clash-dist 0.9")]
    assert ["clash-dist", "0.9", "preset", "cleanup"] in rows
    forget_modules("fxp_presets", "fxp_clash")


def test_broken_plugin_presets_are_reported_when_the_plugin_loads(tmp_path, monkeypatch):
    presets = [
        ("bad_syntax", "eliminate_dead_code["),
        ("ghost_pass", "eliminate_dead_code,no_such_pass"),
        ("bad_options", "eliminate_dead_code,fold_constants{max_numel=abc,nope=1}"),
        ("fine", "eliminate_dead_code"),
    ]
    install_presets(tmp_path, monkeypatch, ("bad-presets", "0.1", "fxp_bad_presets", presets))
    with pytest.warns(fxpasses.PluginWarning):
        reg = fxpasses.Registry()
    problems = "\n".join(str(p) for p in reg.problems if "bad-presets" in str(p))
    assert "preset 'bad_syntax' skipped: its pipeline 'eliminate_dead_code[' is malformed" in problems
    assert "preset 'ghost_pass' names pass(es) no installed plugin registers: no_such_pass" in problems
    # options that do not fit are reported as the plugin loads too, not first when used
    assert (
        "invalid options for pass 'fold_constants' (preset 'bad_options'):\n"
        "  fold_constants.max_numel: Input should be a valid integer (given: 'abc')\n"
        "  fold_constants.nope: unknown option" in problems
    )
    assert "bad_options" in reg.presets()  # kept, as a preset naming a missing pass is
    assert "bad_syntax" not in reg.presets() and "fine" in reg.presets()
    status = {r.distribution: r.status for r in reg.plugins}
    assert status["bad-presets"] == "partial"
    with pytest.raises(UnknownPassError) as info:  # using it still names the pass and the plugin
        Pipeline.from_config({"preset": "ghost_pass"}, registry=reg)
    assert "unknown pass 'no_such_pass'" in str(info.value) and "bad-presets 0.1" in str(info.value)
    forget_modules("fxp_bad_presets")


NOT_NORMAL = (
    "'U\\u0308ber', not in NFKC normal form (the form Python gives identifiers and pipeline strings give names): "
    "use '\\xdcber' (both written with ascii(): they look alike)"
)


def test_a_malformed_preset_name_or_empty_pipeline_skips_that_preset_only(tmp_path, monkeypatch):
    """A preset whose name is not an identifier, or whose pipeline is empty, is rejected on its
    own, as a malformed pass is: it dropped the whole plugin, its good presets with it."""
    presets = [
        ("my-preset", "eliminate_dead_code"),
        (42, "eliminate_dead_code"),
        ("blank", "  "),
        ("U\u0308ber", "eliminate_dead_code"),  # decomposed: pipeline strings give names NFKC-normalized
        ("class", "eliminate_dead_code"),  # a keyword, as pass names may not be
        ("fine", "eliminate_dead_code"),
        ("\xdcber_fine", "eliminate_dead_code"),
        ("nodesc", "eliminate_dead_code", None),
    ]
    install_presets(tmp_path, monkeypatch, ("odd-presets", "0.1", "fxp_odd_presets", presets))
    with pytest.warns(fxpasses.PluginWarning):
        reg = fxpasses.Registry()
    assert reg.preset("fine").pipeline == "eliminate_dead_code"
    assert "my-preset" not in reg.presets() and "blank" not in reg.presets()
    (rec,) = [r for r in reg.plugins if r.distribution == "odd-presets"]
    assert rec.status == "partial"
    assert rec.rejected == [
        Rejection("preset", "my-preset", "a preset name must be an identifier, got 'my-preset'"),
        Rejection("preset", "<42>", "a preset name must be an identifier, got 42"),
        Rejection("preset", "blank", "the pipeline must be a non-empty pipeline string, got '  '"),
        Rejection("preset", "U\u0308ber", "the name is " + NOT_NORMAL),
        Rejection("preset", "class", "a preset name must be an identifier that is not a Python keyword, got 'class'"),
    ]
    # the rejected one is found typed either way, with its plugin and reason
    assert [x.name for _, x in reg.rejected("\xdcber", "preset")] == ["U\u0308ber"]
    with pytest.raises(UnknownPassError) as info:
        reg.preset("\xdcber")
    assert "was found in plugin odd-presets 0.1" in str(info.value) and "not in NFKC normal form" in str(info.value)
    # a lookup is made NFKC-normalized, as a pipeline string's names are
    assert reg.preset("U\u0308ber_fine").name == "\xdcber_fine"
    assert rec.problems == [
        "preset 'my-preset' skipped: a preset name must be an identifier, got 'my-preset'",
        "preset 42 skipped: a preset name must be an identifier, got 42",
        "preset 'blank' skipped: the pipeline must be a non-empty pipeline string, got '  '",
        "preset 'U\u0308ber' skipped: the name is " + NOT_NORMAL,
        "preset 'class' skipped: a preset name must be an identifier that is not a Python keyword, got 'class'",
    ]
    forget_modules("fxp_odd_presets")
    r = CliRunner().invoke(cli, ["show", "nodesc"])  # registered with description None
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == "nodesc (preset)"
    forget_modules("fxp_odd_presets")
    r = CliRunner().invoke(cli, ["show", "U\u0308ber_fine"])  # typed decomposed: the same preset
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == "\xdcber_fine (preset) — A preset from a plugin."
    forget_modules("fxp_odd_presets")
    r = CliRunner().invoke(cli, ["list"])
    assert r.exit_code == 0, r.output
    rows = [line.split()[:4] for line in r.output.splitlines() if line.startswith("odd-presets 0.1")]
    assert ["odd-presets", "0.1", "preset", "my-preset"] in rows and ["odd-presets", "0.1", "preset", "<42>"] in rows
    # the plugins table says what it registered: its presets (it showed its problems there)
    (row,) = [line for line in r.output.splitlines() if line.startswith("odd-presets 0.1") and " partial " in line]
    assert row.split("partial")[1].strip() == "fine (preset), \xdcber_fine (preset), nodesc (preset)"
    forget_modules("fxp_odd_presets")


def test_a_preset_naming_a_pass_of_a_plugin_not_loaded_is_not_a_broken_plugin(tmp_path, monkeypatch):
    """With the built-in plugin disabled (-p no:fxpasses), a plugin's preset that names a
    built-in pass is unusable, not broken: no warning, no PluginError under strict (the plugin
    and its other presets work), and using the preset names the plugin that has the pass. A
    name no plugin registers is still the preset's fault."""
    install_presets(
        tmp_path,
        monkeypatch,
        ("uses-builtin", "0.3", "fxp_uses_builtin", [("mine", "remove_dropout,eliminate_dead_code")]),
    )
    reg = fxpasses.Registry(strict=True, disable=["fxpasses"])  # raised PluginError before
    assert reg.problems == [] and "mine" in reg.presets()
    assert [r.status for r in reg.plugins if r.distribution == "uses-builtin"] == ["loaded"]
    with pytest.raises(UnknownPassError) as info:
        Pipeline.from_config({"preset": "mine"}, registry=reg)
    assert (
        "(pass 'remove_dropout' is a built-in pass, and the built-in plugin fxpasses 0.1.0 was not loaded "
        '(disabled: `disable = ["fxpasses"]` in the [plugins] config section, `-p no:fxpasses`, or '
        '`Registry(disable=["fxpasses"])` in Python); '
        "remove it from `disable` (or drop `-p no:NAME`) to load it)"
    ) in str(info.value)
    forget_modules("fxp_uses_builtin")

    # a name no plugin has, next to a built-in one: reported, naming only the unknown one
    install_presets(
        tmp_path / "2",
        monkeypatch,
        ("ghost-preset", "0.4", "fxp_ghost_preset", [("ghost", "remove_dropout,no_such_pass")]),
    )
    with pytest.raises(fxpasses.PluginError, match=r"preset 'ghost' names pass\(es\) no installed plugin registers: no_such_pass$"):
        fxpasses.Registry(strict=True, disable=["fxpasses"])
    forget_modules("fxp_ghost_preset")


def test_a_preset_naming_a_pass_of_a_disabled_third_party_plugin(tmp_path, monkeypatch):
    """A preset naming a pass that a disabled plugin registers: not reported (that plugin is
    never imported to look), and its use says which plugins were not searched."""
    site = tmp_path / "site"
    make_dist(site, "provider-dist", "2.0", "fxp_provider", good_pass_source("provided_pass"))
    install_presets(tmp_path, monkeypatch, ("user-dist", "1.0", "fxp_user", [("combo", "provided_pass")]))
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    forget_modules("fxp_provider")
    reg = fxpasses.Registry(strict=True, disable=["provider-dist"])
    assert reg.problems == [] and "combo" in reg.presets() and "fxp_provider" not in sys.modules
    with pytest.raises(UnknownPassError) as info:
        Pipeline.from_config({"preset": "combo"}, registry=reg)
    assert "(pass 'provided_pass' may come from a plugin that was not loaded and so not searched: provider-dist" in str(
        info.value
    )
    assert fxpasses.Registry(strict=True).preset("combo").pipeline == "provided_pass"  # all loaded: fine
    forget_modules("fxp_provider", "fxp_user")


def test_a_plugin_preset_holding_a_fixpoint_group_loads_and_runs(tmp_path, monkeypatch):
    """A preset whose pipeline holds `fixpoint(...)` made every registry fail to load
    (AttributeError: 'SpecGroup' object has no attribute 'name'): `fxpasses list` exited 3
    for everyone (a new-user check). A misspelt pass inside the group is reported as for any
    preset."""
    install_presets(
        tmp_path,
        monkeypatch,
        ("fp-presets", "1.0", "fxp_fp", [
            ("fp", "remove_dropout,fixpoint{max_iterations=4}(simplify_algebra,fold_constants)"),
            ("fp_typo", "fixpoint(simplify_algebra,fold_constantz)"),
        ]),
    )
    reg = fxpasses.Registry()
    plan = fxpasses.Pipeline.from_preset("fp", registry=reg).plan()
    assert plan.as_pipeline_string() == "remove_dropout,fixpoint{max_iterations=4}(simplify_algebra,fold_constants)"
    assert any("fold_constantz" in str(p) for p in reg.problems), reg.problems
    r = CliRunner().invoke(cli, ["list"])
    assert r.exit_code == 0 and "fp" in r.output
