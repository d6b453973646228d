"""The fxpasses command line: output, exit status, and one clear message per user error."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pydantic
import pytest
from click.testing import CliRunner

import fxpasses
from dists import installed_dist
from fxpasses.cli import cli
from fxpasses.config import PluginsConfig


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_list_shows_passes_with_their_source():
    r = invoke("list")
    assert r.exit_code == 0, r.output
    lines = {line.split()[0]: line for line in r.output.splitlines() if line.strip()}
    assert "fxpasses-example-passes 0.1.0" in lines["count_ops"]
    assert "analysis" in lines["count_ops"]


def test_list_json():
    r = invoke("list", "--format", "json")
    data = json.loads(r.stdout)
    passes = {p["name"]: p for p in data["passes"]}
    assert passes["remove_identity"]["source"] == "fxpasses-example-passes 0.1.0"
    assert {p["distribution"] for p in data["plugins"]} >= {"fxpasses", "fxpasses-example-passes"}


def test_show_options_and_dependencies():
    r = invoke("show", "count_ops")
    assert r.exit_code == 0
    assert "count_ops (analysis)" in r.output
    assert "only" in r.output and "list[str]" in r.output and "[]" in r.output
    assert "fxpasses-example-passes 0.1.0" in r.output
    d = json.loads(invoke("show", "remove_identity", "--format", "json").stdout)
    assert d["before"] == ["eliminate_dead_code"] and [(o["name"], o["type"], o["default"]) for o in d["options"]] == [
        ("specialize", "bool", False)
    ]
    assert d["writes_tensors"] is False and d["journal_edits"] is True  # the example declares both
    r = invoke("show", "count_ops")
    assert "edits:    any (a snapshot of the graph and modules before it, a lint of the whole graph after it)" in r.output
    r = invoke("show", "remove_identity")
    assert "edits:    through torch.fx's editing methods and the context only (journal_edits = True" in r.output
    assert "writes none in place" in invoke("show", "eliminate_dead_code").output
    assert json.loads(invoke("show", "fuse_conv_bn", "--format", "json").stdout)["writes_tensors"] is False
    folding = json.loads(invoke("show", "fold_constants", "--format", "json").stdout)
    assert {o["name"]: o["constraints"] for o in folding["options"]}["max_numel"] == ">= 0"
    assert "int (>= 0)" in invoke("show", "fold_constants").output


def test_unknown_pass_exit_2_one_message_no_traceback():
    r = CliRunner().invoke(cli, ["show", "count_op"])
    assert r.exit_code == 2
    assert "unknown pass or preset 'count_op'; did you mean 'count_ops'?" in r.output
    assert "Traceback" not in r.output


def test_traceback_flag_shows_the_traceback_and_keeps_the_exit_status_and_json():
    """--traceback adds the traceback to stderr; the exit status (2 for a user error) and
    the --format json object stay what they are without it (it re-raised: exit 1, no JSON)."""
    r = CliRunner().invoke(cli, ["--traceback", "show", "count_op"])
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("Traceback (most recent call last):\n")
    assert "fxpasses.errors.UnknownPassError: unknown pass or preset 'count_op'; did you mean 'count_ops'?" in r.stderr
    assert r.stderr.splitlines()[-2:][0].startswith("error: unknown pass or preset 'count_op'")
    r = CliRunner().invoke(cli, ["check", "--pipeline", "nope", "--traceback", "--format", "json"])
    assert r.exit_code == 2
    obj = json.loads(r.stdout)
    assert (obj["ok"], obj["exit_status"], obj["error"]["type"]) == (False, 2, "UnknownPassError")
    assert "Traceback (most recent call last):" in r.stderr


def test_check_prints_plan(tmp_path):
    cfg = tmp_path / "p.toml"
    cfg.write_text('pipeline = "count_ops{only=[add]},remove_identity"\nverify = "none"\n')
    r = invoke("check", str(cfg))
    assert r.exit_code == 0, r.output
    assert "OK, 2 passes (verify=none, on_error=rollback)" in r.output
    assert " 1. count_ops{only=[add]}" in r.output and " 2. remove_identity" in r.output


@pytest.mark.parametrize(
    "text, preset",
    [
        ('[model]\nfactory = "fxpasses._example:convnet"\ninputs = [{ shape = [1, 3, 8, 8] }]\n', "inference"),
        ('[model]\nfactory = "fxpasses._example:convnet"\ntrain = true\ninputs = [{ shape = [1, 3, 8, 8] }]\n', "training"),
    ],
)
def test_check_of_a_config_without_a_pipeline_prints_the_preset_run_uses(tmp_path, text, preset):
    """check said "no pipeline given" (exit 2) for a config that run and bisect accept."""
    cfg = tmp_path / "m.toml"
    cfg.write_text(text)
    r = invoke("check", str(cfg))
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    expected = fxpasses.Pipeline.from_preset(preset).plan()
    assert lines[:2] == [
        f"{cfg}: OK, {len(expected.steps)} passes (verify=lint, on_error=rollback)",
        f"no pipeline or preset given: preset {preset!r}, as `fxpasses run` uses",
    ]
    assert "\n".join(lines[2:]) == str(expected)
    out = json.loads(invoke("check", str(cfg), "--format", "json").stdout)
    assert out["default_preset"] == preset and [s["name"] for s in out["steps"]] == expected.names()
    # a config with neither a pipeline nor a model is what run refuses too
    cfg.write_text('verify = "lint"\n')
    r = CliRunner().invoke(cli, ["check", str(cfg)])
    assert r.exit_code == 2 and "no pipeline given" in r.output
    # and says when a preset would have been run (a new-user check read the README's "no
    # pipeline: the preset run uses" as applying here)
    assert "only a config with a [model] section runs a preset by default" in r.output


def test_check_of_an_empty_pyproject_table_prints_the_preset_run_uses(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.fxpasses]\n')
    monkeypatch.chdir(tmp_path)
    r = invoke("check")
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[1] == "no pipeline or preset given: preset 'inference', as `fxpasses run` uses"
    out = json.loads(invoke("check", "--format", "json").stdout)
    assert out["default_preset"] == "inference" and out["steps"][0]["name"] == "remove_dropout"
    assert json.loads(invoke("check", "--pipeline", "count_ops", "--format", "json").stdout)["default_preset"] is None


@pytest.mark.parametrize(
    "args, text",
    [
        (["check", "--pipeline", "count_ops{onl=[add]}"], "did you mean 'only'"),
        (["check", "--pipeline", "count_ops,,"], "expected a pass name"),
        (["check", "does-not-exist.toml"], "config file not found"),
    ],
)
def test_check_user_errors_exit_2(args, text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2, r.output
    assert text in r.output
    assert "Traceback" not in r.output


@pytest.mark.parametrize(
    "model, text",
    [
        ('factory = "modls:convnet"', "c.toml: [model] factory: cannot find model factory module 'modls' (looked for beside the config, in DIR, and on sys.path)"),
        ('factory = "models.py:convnet"', "c.toml: [model] factory: model factory file not found: DIR/models.py"),
        ('program = "nothere.pt2"', "c.toml: [model] program: program file not found: DIR/nothere.pt2"),
        ('graph = "g.py"', "c.toml: [model] graph: graph file not found: DIR/g.py"),
        ('factory = "fxpasses._example:convnet"\ninputs = "nothere.pt"', "c.toml: [model] inputs: tensor file not found: DIR/nothere.pt"),
    ],
)
def test_check_refuses_a_model_whose_files_or_factory_module_are_missing(model, text, tmp_path, monkeypatch):
    """`fxpasses check` said OK for a config whose factory module or program file was missing,
    which `run` refused at once (a new-user check): it now looks for what `[model]` names
    (nothing is imported or built), and says what `run` says."""
    monkeypatch.chdir(tmp_path)
    inputs = "" if "inputs" in model or "program" in model else "\ninputs = [{shape = [1, 3, 8, 8]}]"
    (tmp_path / "c.toml").write_text(f"[model]\n{model}{inputs}\n")
    r = CliRunner().invoke(cli, ["check", "c.toml"])
    assert r.exit_code == 2, r.output
    assert r.output.strip() == "error: " + text.replace("DIR", str(tmp_path)), r.output
    (tmp_path / "ok.toml").write_text('[model]\nfactory = "fxpasses._example:convnet"\ninputs = [{shape = [1, 3, 8, 8]}]\n')
    assert CliRunner().invoke(cli, ["check", "ok.toml"]).exit_code == 0


@pytest.mark.parametrize(
    "inputs, requires_grad, text",
    [
        ("[{shape = [1, 3, 8, 8]}]", '["5", "", "zz"]', "'5' is not an input (inputs: 0)"),
        ("[{shape = [1, 3, 8, 8]}]", '["0", ""]', "'' is not an input (inputs: 0)"),
        ('[{shape = [1, 3, 8, 8], dtype = "int64"}]', '["0"]', "input '0' is torch.int64, which cannot require grad"),
        ('{0 = {shape = [1, 3, 8, 8]}, mask = {shape = [1], dtype = "bool"}}', '["0", "mask"]',
         "input 'mask' is torch.bool, which cannot require grad"),
        ('{0 = {shape = [1, 3, 8, 8]}, mask = {shape = [1]}}', '["1"]', "'1' is not an input (inputs: 0, mask)"),
        ('"in.safetensors"', '["0", "x"]', "'x' is not an input (inputs: 0, 1, scale)"),
    ],
)
def test_check_refuses_the_requires_grad_run_refuses_with_runs_message(tmp_path, monkeypatch, inputs, requires_grad, text):
    """`fxpasses check` said OK for `requires_grad = ["5", "", "zz"]` with one input, which
    `run` refused at once (an adversarial check): check runs run's own check on the inputs'
    dtypes (the specs', or the tensors of an inputs file)."""
    import torch

    from fxpasses.reproducer import save_tensors

    monkeypatch.chdir(tmp_path)
    save_tensors(tmp_path / "in", {"0": torch.randn(1, 3, 8, 8), "1": torch.randn(2), "scale": torch.ones(1)})
    path = tmp_path / "c.toml"
    path.write_text(f'[model]\nfactory = "fxpasses._example:convnet"\ninputs = {inputs}\nrequires_grad = {requires_grad}\n')
    expected = f"error: c.toml: [model] requires_grad: {text}"
    for command in ("check", "run"):
        r = CliRunner().invoke(cli, [command, "c.toml", "--no-save"] if command == "run" else [command, "c.toml"])
        assert r.exit_code == 2 and r.output.strip() == expected, (command, r.output)
    path.write_text('[model]\nfactory = "fxpasses._example:convnet"\ninputs = "in.safetensors"\nrequires_grad = ["0", "scale"]\n')
    assert CliRunner().invoke(cli, ["check", "c.toml"]).exit_code == 0


def test_a_factory_name_not_in_its_module_gets_a_suggestion(tmp_path):
    """`factory = "models:convnt"`: "module 'models' has no attribute 'convnt'" gave no "did you
    mean", where other names get one (a new-user check)."""
    from fxpasses.errors import ConfigError
    from fxpasses.job import load_factory

    with pytest.raises(ConfigError, match=r"module 'fxpasses._example' has no attribute 'convnt'; did you mean 'convnet'\?"):
        load_factory("fxpasses._example:convnt")


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "fxpasses"
    assert script.is_file()
    out = subprocess.run([str(script), "show", "nope"], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.startswith("error: unknown pass or preset 'nope'")
    assert out.stdout == ""


def test_closed_pipe_is_not_an_error():
    script = Path(sys.executable).parent / "fxpasses"
    proc = subprocess.Popen([str(script), "schema"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    assert proc.wait() == 0
    assert first.strip() == b"{"
    assert proc.stderr.read() == b""


def test_broken_pyproject_on_the_way_up_is_reported(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.fxpasses]\npipeline = "eliminate_dead_code"\n')
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text("[tool.fxpasses\n")
    monkeypatch.chdir(sub)
    r = CliRunner().invoke(cli, ["check"])
    assert r.exit_code == 2
    assert f"{sub / 'pyproject.toml'}: invalid TOML" in r.output


def test_another_projects_broken_pyproject_on_the_way_up_is_skipped_with_a_warning(tmp_path, monkeypatch):
    """An unrelated project's pyproject.toml that is not valid TOML (and names no fxpasses
    table) made every `fxpasses` command, and every torch.compile with the backend, fail
    below it, even with the pipeline given explicitly (a new-user check). It cannot hold the
    table: skipped with a warning, and the search goes on up."""
    import fxpasses.backend as backend

    (tmp_path / "pyproject.toml").write_text('[tool.fxpasses]\npipeline = "eliminate_dead_code"\n')
    sub = tmp_path / "unrelated"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["torch"] extra\n')
    monkeypatch.chdir(sub)
    r = CliRunner().invoke(cli, ["check"])
    assert r.exit_code == 0, r.output
    assert " 1. eliminate_dead_code" in r.stdout
    assert f"{sub / 'pyproject.toml'} is not valid TOML" in r.stderr and "does not mention fxpasses: skipped" in r.stderr
    import torch

    torch._dynamo.reset()
    backend.reports.clear()
    with pytest.warns(UserWarning, match="does not mention fxpasses: skipped"):
        out = torch.compile(torch.nn.Linear(2, 2), backend="fxpasses", options={"pipeline": "remove_dropout", "then": "eager"})(torch.ones(1, 2))
    assert out.shape == (1, 2) and [p.name for p in backend.reports[-1].passes] == ["remove_dropout"]


def test_pipeline_flag_replaces_the_configs_pipeline_and_its_options(tmp_path):
    cfg = tmp_path / "merge.toml"
    cfg.write_text('pipeline = "fold_constants"\n[options.fold_constants]\nmax_numel = 10\n')
    r = CliRunner().invoke(cli, ["check", str(cfg), "--pipeline", "eliminate_dead_code"])
    assert r.exit_code == 0, r.output
    assert " 1. eliminate_dead_code" in r.output and "fold_constants" not in r.output
    r = CliRunner().invoke(cli, ["check", str(cfg)])
    assert r.exit_code == 0 and " 1. fold_constants{max_numel=10}" in r.output


def test_show_a_preset():
    r = CliRunner().invoke(cli, ["show", "inference"])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("inference (preset) — ")
    assert "pipeline: remove_dropout,simplify_algebra,fold_constants{fold_parameters=true},fuse_conv_bn," in r.output
    assert "problem:" not in r.output  # (a preset that cannot be used says why)
    r = CliRunner().invoke(cli, ["show", "inference", "--format", "json"])
    assert json.loads(r.stdout)["problems"] == []


def test_p_names_a_plugin_that_is_not_installed_exit_2():
    r = CliRunner().invoke(cli, ["-p", "nosuch-dist", "list"])
    assert r.exit_code == 2
    assert "plugin nosuch-dist: requested with enable/-p but not installed" in r.output
    assert "Traceback" not in r.output
    r = CliRunner().invoke(cli, ["-p", "no:nosuch-dist", "list"])
    assert r.exit_code == 0  # disabling nothing is a warning (an error with --strict-plugins)
    assert r.stderr.startswith("warning: plugin nosuch-dist: disabled with disable/-p no:NAME but no installed plugin")


def test_p_typo_of_an_entry_point_name_is_suggested_as_for_no_typo():
    # the example plugin answers to its distribution's name and to its entry point's, "example"
    for args, out in ((["-p", "exampl", "list"], "output"), (["-p", "no:exampl", "list"], "stderr")):
        r = CliRunner().invoke(cli, args)
        assert "did you mean 'example'?" in getattr(r, out), (args, r.output)


def test_a_pass_name_in_another_case_is_suggested_everywhere(tmp_path):
    cfg = tmp_path / "fx.toml"
    cfg.write_text('pipeline = ["eliminate_dead_code", "Remove_Dropout"]\n')
    cases = [
        (["show", "REMOVE_DROPOUT"], "error: unknown pass or preset 'REMOVE_DROPOUT'; did you mean 'remove_dropout' or 'remove_identity'?\n"),
        # show takes presets too: suggested from both (found by a new-user check)
        (["show", "inferenc"], "error: unknown pass or preset 'inferenc'; did you mean 'inference'?\n"),
        (["check", "--pipeline", "REMOVE_DROPOUT"], "error: --pipeline: pipeline string, entry 1 ('REMOVE_DROPOUT') at column 1: unknown pass 'REMOVE_DROPOUT'; did you mean 'remove_dropout' or 'remove_identity'?\n"),
        (["check", str(cfg)], f"error: {cfg}: pipeline, entry 2: unknown pass 'Remove_Dropout'; did you mean 'remove_dropout' or 'remove_identity'?\n"),
        (["check", "--preset", "Inference"], "error: --preset: unknown preset 'Inference'; did you mean 'inference'?\n"),
    ]
    for args, first in cases:
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 2, r.output
        assert r.output.startswith(first), r.output


def test_unknown_preset_on_the_command_line_blames_the_option():
    examples = Path(__file__).resolve().parents[1] / "examples"
    for args in (["run", "--preset", "nosuch", "--no-save"], ["check", str(examples / "mlp.json"), "--preset", "nosuch"]):
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 2
        assert r.output.startswith("error: --preset: unknown preset 'nosuch'"), r.output


def test_print_after_on_a_config_without_a_pipeline_checks_the_preset_run_uses(tmp_path):
    """--print-after on a config naming no pipeline said "no pipeline given" (found by a
    new-user check): it is checked against the preset run uses."""
    cfg = tmp_path / "m.toml"
    cfg.write_text('[model]\nfactory = "fxpasses._example:convnet"\ninputs = [{ shape = [1, 3, 8, 8] }]\n')
    r = CliRunner().invoke(cli, ["run", str(cfg), "--no-save", "--repeat", "1", "--print-after", "fuse_conv_bn"])
    assert r.exit_code == 0, r.output
    assert "after fuse_conv_bn" in r.stderr and "(preset inference)" in r.stdout
    r = CliRunner().invoke(cli, ["run", str(cfg), "--no-save", "--repeat", "1", "--print-after", "rename_nodes"])
    assert r.exit_code == 2 and "rename_nodes" in r.output and "the pipeline's passes: remove_dropout" in r.output
    # a name typed in another Unicode form (fullwidth letters, NFKC-normalized as Python
    # reads identifiers) is the pass, as in --pipeline (found by a new-user check)
    fullwidth = "\uff46use_conv_bn"
    r = CliRunner().invoke(cli, ["run", str(cfg), "--no-save", "--repeat", "1", "--print-after", fullwidth])
    assert r.exit_code == 0, r.output
    assert "after fuse_conv_bn" in r.stderr


def test_run_prints_the_pipeline_it_ran_as_a_string_that_reads_back(tmp_path):
    """A config's preset was printed as "pipeline: preset inference", without its
    [options.NAME] overrides, which did not read back (found by a new-user check)."""
    cfg = tmp_path / "m.toml"
    cfg.write_text(
        '[model]\nfactory = "fxpasses._example:convnet"\ninputs = [{ shape = [1, 3, 8, 8] }]\n'
        "[options.fold_constants]\nmax_numel = 7\n"
    )
    r = CliRunner().invoke(cli, ["run", str(cfg), "--no-save", "--repeat", "1", "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["preset"] == "inference"
    assert "fold_constants{max_numel=7,fold_parameters=true}" in out["pipeline"]
    plan = fxpasses.Pipeline.from_string(out["pipeline"]).plan()
    assert plan.names() == fxpasses.Pipeline.from_preset("inference").plan().names()
    assert plan.steps[2].name == "fold_constants" and plan.steps[2].options.max_numel == 7


@pytest.mark.parametrize("given", ["", " ", ",", " , "])
def test_print_after_naming_no_pass_is_an_error(given):
    """--print-after '' printed nothing and said nothing (found by a new-user check)."""
    r = CliRunner().invoke(cli, ["run", "--no-save", "--repeat", "1", "--print-after", given])
    assert r.exit_code == 2, r.output
    assert r.output == (
        f"error: --print-after {given!r} names no pass: give pass names separated by commas "
        "(--print-after fold_constants,eliminate_dead_code), or --print-after-all\n"
    )


def test_print_after_a_pass_outside_the_pipeline_is_an_error():
    """It would print nothing: exit status 2, naming the pass and the pipeline's passes, with a
    "did you mean" among them, before anything runs."""
    r = CliRunner().invoke(cli, ["run", "--no-save", "--repeat", "1", "--pipeline", "remove_dropout", "--print-after", "fold_constants"])
    assert r.exit_code == 2, r.output
    assert r.output == (
        "error: --print-after: pass(es) not in the pipeline, nothing to print: fold_constants; "
        "the pipeline's passes: remove_dropout\n"
    )
    r = CliRunner().invoke(
        cli,
        ["run", "--no-save", "--pipeline", "remove_dropout,eliminate_dead_code", "--print-after",
         "remove_identity,eliminate_dead_code,count_ops", "--format", "json"],
    )
    assert r.exit_code == 2, r.output
    message = (
        "--print-after: pass(es) not in the pipeline, nothing to print: remove_identity (did you mean "
        "'remove_dropout'?), count_ops; the pipeline's passes: remove_dropout, eliminate_dead_code"
    )
    assert json.loads(r.stdout) == {"ok": False, "exit_status": 2, "error": {"type": "UserError", "message": message}}
    assert r.stderr == f"error: {message}\n"


def test_global_options_are_accepted_after_the_command_too():
    """`fxpasses run x.toml --traceback` is what the error's hint says to run."""
    from fxpasses.errors import UnknownPassError

    r = CliRunner().invoke(cli, ["show", "count_op", "--traceback"])
    assert r.exit_code == 2 and "No such option" not in r.output, r.output
    assert f"{UnknownPassError.__module__}.UnknownPassError: unknown pass or preset 'count_op'" in r.stderr  # the traceback
    r = CliRunner().invoke(cli, ["show", "count_op"])
    assert r.exit_code == 2 and r.exception is not None and isinstance(r.exception, SystemExit)
    # -p after the command, alone and added to one before it
    r = CliRunner().invoke(cli, ["list", "-p", "nosuch-dist"])
    assert r.exit_code == 2
    assert "plugin nosuch-dist: requested with enable/-p but not installed" in r.output
    r = CliRunner().invoke(cli, ["-p", "no:other-dist", "check", "--pipeline", "eliminate_dead_code", "-p", "nosuch-dist"])
    assert r.exit_code == 2 and "plugin nosuch-dist" in r.output
    r = CliRunner().invoke(cli, ["list", "-p", "no:nosuch-dist", "--strict-plugins"])
    assert r.exit_code == 2 and "error: plugin nosuch-dist: disabled with disable/-p no:NAME" in r.stderr
    assert "--traceback" in CliRunner().invoke(cli, ["run", "--help"]).output


def test_an_unexpected_error_hint_names_an_option_that_works(tmp_path, monkeypatch):
    """The hint `(run with --traceback for details)` is followed as written: after the command."""
    import fxpasses.job

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in fxpasses")

    monkeypatch.setattr(fxpasses.job, "run_job", broken)
    r = CliRunner().invoke(cli, ["run", "--no-save"])
    assert r.exit_code == 3  # an internal error: not 1, which says a pass failed or outputs changed
    assert "error: unexpected RuntimeError: a bug in fxpasses\n(run with --traceback for details)" in r.output
    r = CliRunner().invoke(cli, ["run", "--no-save", "--traceback"])
    assert r.exit_code == 3  # the same status with the traceback shown
    assert "RuntimeError: a bug in fxpasses" in r.stderr and 'raise RuntimeError("a bug in fxpasses")' in r.stderr
    assert r.stderr.rstrip().endswith("error: unexpected RuntimeError: a bug in fxpasses")  # no hint: it was followed


@pytest.mark.parametrize("command", ["check", "run"])
@pytest.mark.parametrize(
    "spec, expected",
    [
        ("fuse_conv_bn{fold_in_graph=yes}", "invalid options for pass 'fuse_conv_bn' (--pipeline: pipeline string, entry 1"),
        ("fuse_conv_bn{", "--pipeline: pipeline string, column 14: expected an option name"),
        ("fuse_conv_bm", "unknown pass 'fuse_conv_bm'"),
    ],
    ids=["options", "syntax", "unknown"],
)
def test_a_bad_pipeline_flag_is_blamed_on_the_flag_not_the_config_file(tmp_path, command, spec, expected):
    """``--pipeline`` replaces the config's pipeline: a fault in it is the option's, so the
    message names ``--pipeline`` and never the config file it was given with."""
    cfg = tmp_path / "fx.toml"
    cfg.write_text(
        'pipeline = "eliminate_dead_code"\n[model]\nfactory = "fxpasses._example:convnet"\n'
        'inputs = [{ shape = [1, 3, 32, 32], dtype = "float32" }]\n'
    )
    r = CliRunner().invoke(cli, [command, str(cfg), "--pipeline", spec])
    assert r.exit_code == 2, r.output
    assert expected in r.output
    assert "fx.toml" not in r.output


@pytest.mark.parametrize("flag", [["--pipeline", "remove_dropout,eliminate_dead_code"], ["--preset", "cleanup"]])
def test_a_misspelt_options_table_is_an_error_under_a_pipeline_or_preset_flag_too(tmp_path, flag):
    """With --pipeline or --preset replacing the config's pipeline, a table for a pass the new
    one does not run is left (it was the old one's), but a misspelt one was dropped without a
    word, its setting lost (a new-user check)."""
    cfg = tmp_path / "fx.toml"
    cfg.write_text(
        'pipeline = "remove_dropout,eliminate_dead_code"\n'
        "[options.eliminate_dead_cod]\nremove_random = true\n"
        "[options.fold_constants]\nmax_numel = 3\n"  # another registered pass's: left
    )
    r = CliRunner().invoke(cli, ["check", str(cfg), *flag])
    assert r.exit_code == 2, r.output
    assert f"{cfg} [options.eliminate_dead_cod]: unknown pass 'eliminate_dead_cod'; did you mean 'eliminate_dead_code'?" in r.stderr
    cfg.write_text('pipeline = "remove_dropout"\n[options.fold_constants]\nmax_numel = 3\n')
    r = CliRunner().invoke(cli, ["check", str(cfg), *flag])
    assert r.exit_code == 0, r.output
    # a misspelt option in a left table is a typo too (it was said OK: an adversarial check)
    cfg.write_text('pipeline = "fold_constants,remove_dropout"\n[options.fold_constants]\nmax_numl = 5\n')
    r = CliRunner().invoke(cli, ["check", str(cfg), *flag])
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines() == [
        f"error: invalid options for pass 'fold_constants' ({cfg} [options.fold_constants]):",
        "  fold_constants.max_numl: unknown option; did you mean 'max_numel'? (valid: max_numel, max_growth_bytes, "
        "remove_unused_state, fold_parameters, modules_may_train) (given: 5)",
    ]


def test_fxpasses_tables_at_a_pyprojects_top_level_are_warned_about(tmp_path):
    """README's config example pasted into a pyproject.toml put `[options.X]` at the top level,
    where nothing reads it: its setting was dropped without a word (a new-user check)."""
    from fxpasses.config import load_config_file
    from fxpasses.errors import ConfigWarning

    py = tmp_path / "pyproject.toml"
    py.write_text('[tool.fxpasses]\npreset = "cleanup"\n[options.eliminate_dead_code]\nremove_random = true\n')
    with pytest.warns(ConfigWarning) as record:
        cfg = load_config_file(py)
    assert cfg.options == {}
    assert [str(w.message) for w in record] == [
        f"{py}: [options.eliminate_dead_code] at the top level is read by nothing: fxpasses reads its settings "
        "from [tool.fxpasses] in a pyproject.toml (write [tool.fxpasses.options.eliminate_dead_code])"
    ]
    r = CliRunner().invoke(cli, ["check", str(py)])
    assert r.exit_code == 0 and "warning: " in r.stderr and "[options.eliminate_dead_code] at the top level" in r.stderr


def test_run_with_a_pyproject_without_a_model_keeps_its_settings_and_names_it_in_errors(tmp_path, monkeypatch):
    """``fxpasses run`` with no CONFIG finds pyproject.toml's [tool.fxpasses]; without a
    [model] it runs the bundled example model with *all* of that table's settings (verify was
    dropped before), and an error in its pipeline names the file (it was blamed on the
    "embedded default config")."""
    monkeypatch.chdir(tmp_path)
    py = tmp_path / "pyproject.toml"
    py.write_text('[project]\nname = "x"\n[tool.fxpasses]\npipeline = "eliminate_dead_cod"\n')
    r = CliRunner().invoke(cli, ["run"])
    assert r.exit_code == 2
    assert f"{py} [tool.fxpasses]: pipeline string, entry 1 ('eliminate_dead_cod')" in r.output
    assert "did you mean 'eliminate_dead_code'" in r.output and "embedded default config" not in r.output
    py.write_text('[project]\nname = "x"\n[tool.fxpasses]\npipeline = "eliminate_dead_code"\nverify = "numeric"\n')
    r = CliRunner().invoke(cli, ["run"])
    assert r.exit_code == 0, r.output
    report = json.loads((tmp_path / "fxpasses-out" / "example" / "report.json").read_text())
    assert report["pipeline"] == "eliminate_dead_code"
    assert report["report"]["verification"] == "numeric"
    assert [p["name"] for p in report["report"]["passes"]] == ["eliminate_dead_code"]
    # and says so under the model line (it ran the example quietly; found by a new-user check)
    lines = r.stdout.splitlines()
    assert lines[0].startswith("model: fxpasses._example:convnet (")
    assert lines[1] == (
        f"note: {py} [tool.fxpasses] has no [model]: this is the bundled example model (add a [model] table for yours)"
    )
    r = CliRunner().invoke(cli, ["run", "--no-save", "--repeat", "1", "--format", "json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["model_note"] == lines[1][len("note: "):]
    # --pipeline replaces the pyproject's pipeline only: the note still (it read no pyproject.toml
    # then, running the bundled example even where the project's table has a [model])
    r = CliRunner().invoke(cli, ["run", "--pipeline", "eliminate_dead_code", "--no-save", "--repeat", "1"])
    assert r.exit_code == 0 and "has no [model]" in r.stdout.splitlines()[1]


def test_pipeline_and_preset_flags_replace_the_pyproject_pipeline_and_keep_its_model(tmp_path, monkeypatch):
    """`fxpasses run --pipeline X` without CONFIG ran the bundled example, not the nearest
    pyproject.toml's [tool.fxpasses.model], and `bisect --pipeline X` said "no [model] section"
    (found by a new-user check)."""
    (tmp_path / "tiny_models.py").write_text(
        "import torch\nclass Tiny(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x * 1)\n"
        "def tiny():\n    return Tiny()\n"
    )
    (tmp_path / "pyproject.toml").write_text(
        '[tool.fxpasses]\npipeline = "remove_dropout"\n[tool.fxpasses.model]\nfactory = "tiny_models:tiny"\n'
        "inputs = [{shape = [2, 3]}]\n"
    )
    monkeypatch.chdir(tmp_path)
    for flag in (["--pipeline", "eliminate_dead_code"], ["--preset", "cleanup"]):
        r = CliRunner().invoke(cli, ["run", *flag, "--no-save", "--repeat", "1"])
        assert r.exit_code == 0, r.output
        assert r.stdout.startswith("model: tiny_models:tiny ("), r.stdout
    r = CliRunner().invoke(cli, ["bisect", "--pipeline", "eliminate_dead_code"])
    assert r.exit_code == 0 and "no failure" in r.output, r.output


BISECT_NOTE = "note: to find the rewrite that changed the outputs, run `{}`"


def _bisect_note_command(output):
    """The argv (without "fxpasses") of the bisect command a run's failure note names."""
    import shlex

    line = next(line.strip() for line in output.splitlines() if "to find the rewrite that changed the outputs" in line)
    return shlex.split(line.split("run `", 1)[1].rstrip("`"))[1:]


def test_run_bisect_note_on_the_bundled_example_model_runs(planted_site, tmp_path, monkeypatch):
    """`fxpasses run --pipeline BAD,...` of the bundled example model (no config) told to run
    `fxpasses bisect --pipeline BAD,...`, which then failed: "--pipeline: no [model] section"
    (exit 2). Bisect runs the model run ran, finds the bad pass, and its reproduce command runs."""
    (tmp_path / "w").mkdir()
    monkeypatch.chdir(tmp_path / "w")
    pipeline = "planted_graph,eliminate_dead_code"
    r = CliRunner().invoke(cli, ["run", "--no-save", "--repeat", "1", "--pipeline", pipeline])
    assert r.exit_code == 1, r.output
    assert "  " + BISECT_NOTE.format(f"fxpasses bisect --pipeline {pipeline}") in r.stderr.splitlines()
    r = CliRunner().invoke(cli, _bisect_note_command(r.stderr))
    assert r.exit_code == 1, r.output
    assert r.stdout.startswith("first bad pass: 'planted_graph' (step 1 of 2)\n"), r.stdout
    assert f"reproduce with: fxpasses run --pipeline {pipeline} --rewrite-limit 1" in r.stdout.splitlines()
    bad = CliRunner().invoke(cli, ["run", "--pipeline", pipeline, "--rewrite-limit", "1", "--repeat", "1", "--no-save"])
    assert bad.exit_code == 1 and "outputs differ" in bad.output, bad.output
    # a bare `fxpasses bisect` bisects the example with run's default preset
    r = CliRunner().invoke(cli, ["bisect"])
    assert r.exit_code == 0 and r.stdout.startswith("no failure: each of the"), r.output


def test_run_bisect_note_for_a_project_config_without_a_model_runs(planted_site, tmp_path, monkeypatch):
    """A project fxpasses.toml with pipeline and verify = "numeric" but no [model]: run's note
    said `fxpasses bisect fxpasses.toml` (text and --format json), which failed with "no [model]
    section". It says `fxpasses bisect`, which bisects the bundled example model as run ran it."""
    (tmp_path / "w").mkdir()
    monkeypatch.chdir(tmp_path / "w")
    project = tmp_path / "w" / "fxpasses.toml"
    project.write_text('pipeline = "planted_graph,eliminate_dead_code"\nverify = "numeric"\n')
    r = CliRunner().invoke(cli, ["run", "--no-save", "--repeat", "1"])
    assert r.exit_code == 1, r.output
    assert "  " + BISECT_NOTE.format("fxpasses bisect") in r.stderr.splitlines()
    r = CliRunner().invoke(cli, ["run", "--no-save", "--repeat", "1", "--format", "json"])
    assert r.exit_code == 1, r.output
    error = json.loads(r.stdout)["error"]
    assert error["message"].endswith("\n  " + BISECT_NOTE.format("fxpasses bisect")), error["message"]
    assert error["notes"][-1] == BISECT_NOTE.format("fxpasses bisect")[len("note: "):]
    r = CliRunner().invoke(cli, _bisect_note_command(error["message"]))
    assert r.exit_code == 1, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == f"note: {project} has no [model]: this is the bundled example model (add a [model] table for yours)"
    assert lines[1] == "first bad pass: 'planted_graph' (step 1 of 2)"
    assert lines[-1] == "reproduce with: fxpasses run --rewrite-limit 1"
    r = CliRunner().invoke(cli, ["bisect", "--format", "json"])
    assert r.exit_code == 1, r.output
    data = json.loads(r.stdout)
    assert data["pass_name"] == "planted_graph" and data["reproduce_command"] == ["fxpasses", "run", "--rewrite-limit", "1"]
    assert data["model_note"] == lines[0][len("note: "):]
    bad = CliRunner().invoke(cli, [*data["reproduce_command"][1:], "--repeat", "1", "--no-save"])
    assert bad.exit_code == 1, bad.output
    assert "error: pass 'planted_graph' failed: verification failed: output: max abs error" in bad.stderr
    # given as CONFIG, a config without a [model] is still an error, as for `fxpasses run`
    error, _ = json_failure(["bisect", "fxpasses.toml", "--format", "json"], 2, "ConfigError")
    assert error["message"] == (
        "fxpasses.toml: no [model] section: `fxpasses bisect` needs a model factory (or saved graph) and inputs"
    )


# ---------------------------------------------------------------------- --format json failures

MODEL = '[model]\nfactory = "fxpasses._example:convnet"\ninputs = [{ shape = [1, 3, 32, 32], dtype = "float32" }]\n'


def json_failure(args, status, error_type):
    """Run ``args``; stdout must be exactly one JSON object saying the failure (the `error:`
    line stays on stderr for people)."""
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == status, r.output
    data = json.loads(r.stdout)  # one object, nothing else on stdout
    assert list(data)[:3] == ["ok", "exit_status", "error"], data
    assert data["ok"] is False and data["exit_status"] == status
    assert data["error"]["type"] == error_type
    assert "Traceback" not in r.output
    return data["error"], r.stderr


def test_json_unknown_pass_in_check_has_the_errors_fields():
    error, stderr = json_failure(["check", "--pipeline", "count_op", "--format", "json"], 2, "UnknownPassError")
    assert error["name"] == "count_op" and error["kind"] == "pass"
    assert error["suggestions"] == ["count_ops"]
    assert error["source"] == "--pipeline: pipeline string, entry 1 ('count_op') at column 1"
    assert "fxpasses-example-passes 0.1.0" in error["plugins"]
    assert error["message"].startswith(
        "--pipeline: pipeline string, entry 1 ('count_op') at column 1: unknown pass 'count_op'; did you mean 'count_ops'?"
    )
    assert stderr.startswith("error: --pipeline: pipeline string, entry 1 ('count_op')")


def test_json_unknown_pass_in_show_and_list_strict_plugin():
    error, _ = json_failure(["show", "count_op", "--format", "json"], 2, "UnknownPassError")
    assert error["suggestions"] == ["count_ops"]
    error, _ = json_failure(["list", "-p", "nosuch-dist", "--format", "json"], 2, "PluginError")
    assert error["distribution"] == "nosuch-dist" and error["version"] == ""
    assert error["message"].startswith("plugin nosuch-dist: requested with enable/-p but not installed")


@pytest.mark.parametrize(
    "args, error_type, fields",
    [
        (["check", "does-not-exist.toml"], "ConfigError", {"message": "config file not found: does-not-exist.toml", "source": None}),
        (["check", "--pipeline", "count_ops,,"], "ConfigError", {"source": "--pipeline: pipeline string, column 11"}),
        (["check", "--pipeline", "a", "--preset", "inference"], "ConfigError", {"message": "give either --pipeline or --preset, not both"}),
        (["check", "--pipeline", "count_ops{onl=[add]}"], "OptionsError", {"pass_name": "count_ops", "problems": [{"field": "onl", "message": "unknown option; did you mean 'only'? (valid: only)", "given": ["add"]}]}),
    ],
    ids=["missing-file", "syntax", "pipeline-and-preset", "options"],
)
def test_json_config_errors_exit_2(args, error_type, fields, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    error, _ = json_failure([*args, "--format", "json"], 2, error_type)
    for key, value in fields.items():
        assert error[key] == value, (key, error)


def test_json_every_entry_with_invalid_options_is_in_the_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    error, _ = json_failure(
        ["check", "--pipeline", "count_ops{onl=[add]},eliminate_dead_code,count_ops{only=3}", "--format", "json"],
        2,
        "OptionsError",
    )
    assert error["pass_name"] == "count_ops" and [p["field"] for p in error["problems"]] == ["onl"]
    assert error["others"] == [
        {
            "pass_name": "count_ops",
            "source": "--pipeline: pipeline string, entry 3 ('count_ops') at column 42",
            "places": {"only": "column 52"},
            "problems": [{"field": "only", "message": error["others"][0]["problems"][0]["message"], "given": 3}],
        }
    ]
    assert error["message"].count("invalid options for pass 'count_ops'") == 2


def test_json_a_pass_failure_names_the_pass_and_node(planted_site, tmp_path):
    cfg = tmp_path / "fx.toml"
    cfg.write_text('pipeline = "planted{raise_at=1}"\n' + MODEL)
    error, stderr = json_failure(["run", str(cfg), "--no-save", "--repeat", "1", "--format", "json"], 1, "PassFailedError")
    assert error["pass_name"] == "planted"
    assert error["reason"].startswith("RuntimeError: planted failure at %")
    assert error["node"]["op"] == "call_function" and error["node"]["name"] == error["reason"].rsplit("%", 1)[1]
    assert error["rolled_back"] is True
    assert error["cause"].startswith("RuntimeError: planted failure at %")
    assert stderr.startswith("error: pass 'planted' failed: RuntimeError: planted failure")


def test_json_changed_outputs_and_a_reproducer(planted_site, tmp_path):
    cfg = tmp_path / "fx.toml"
    cfg.write_text('pipeline = "planted_graph"\n' + MODEL)
    error, _ = json_failure(["run", str(cfg), "--no-save", "--repeat", "1", "--format", "json"], 1, "VerificationError")
    assert error["message"].startswith("the optimized model's outputs differ from the original: output: max abs error")
    cfg.write_text('pipeline = "planted_graph"\nverify = "numeric"\n' + MODEL)
    repro = tmp_path / "repro"
    args = ["run", str(cfg), "--no-save", "--repeat", "1", "--reproducer", str(repro), "--format", "json"]
    error, stderr = json_failure(args, 1, "PassFailedError")
    assert error["pass_name"] == "planted_graph" and error["node"] is None
    assert error["reproducer"] == str(repro / "fxpasses.json")
    assert "reproducer of the failure of 'planted_graph' written to" in stderr


def test_json_bisect_found_and_clean(planted_site, tmp_path):
    cfg = tmp_path / "fx.toml"
    cfg.write_text('pipeline = "eliminate_dead_code,planted_graph"\n' + MODEL)
    r = CliRunner().invoke(cli, ["bisect", str(cfg), "--format", "json"])
    assert r.exit_code == 1, r.output
    data = json.loads(r.stdout)
    assert (data["ok"], data["exit_status"], data["error"]["type"]) == (False, 1, "BisectFound")
    assert data["error"]["pass_name"] == data["pass_name"] == "planted_graph"
    assert data["error"]["message"].startswith("first bad pass: 'planted_graph' (step 2 of 2)")
    assert data["pass_error"].startswith("pass 'planted_graph' failed: verification failed: output")
    cfg.write_text('pipeline = "eliminate_dead_code"\n' + MODEL)
    r = CliRunner().invoke(cli, ["bisect", str(cfg), "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["ok"] is True and data["status"] == "clean" and "error" not in data and data["pass_error"] is None


NOISY_SOURCE = """
import sys

import torch

import fxpasses
from fxpasses import GraphPass


class Prints(GraphPass):
    name = "prints"
    kind = "analysis"

    def run(self, gm, ctx):
        print("hello from a pass")
        return False


class Exits(GraphPass):
    name = "exits"

    def run(self, gm, ctx):
        x = next(n for n in gm.graph.nodes if n.op == "placeholder")
        with gm.graph.inserting_after(x):
            gm.graph.call_function(torch.neg, (x,))  # an edit, then leave
        sys.exit(5)


@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register(Prints)
    register(Exits)
"""


@pytest.fixture
def noisy_site(tmp_path, monkeypatch):
    """A distribution whose passes print to stdout and call sys.exit()."""
    with installed_dist(monkeypatch, tmp_path / "site", "noisy-passes", "0.1", "fxp_noisy", NOISY_SOURCE) as site:
        yield site


@pytest.mark.parametrize("command", ["run", "bisect"])
def test_json_stdout_is_one_object_when_a_pass_prints(noisy_site, tmp_path, command):
    """What passes (and model code) print goes to stderr under --format json: stdout is the
    JSON object alone."""
    cfg = tmp_path / "fx.toml"
    cfg.write_text('pipeline = "prints,eliminate_dead_code"\n' + MODEL)
    extra = ["--no-save", "--repeat", "1"] if command == "run" else []
    r = CliRunner().invoke(cli, [command, str(cfg), *extra, "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["ok"] is True
    assert "hello from a pass" not in r.stdout and "hello from a pass" in r.stderr
    r = CliRunner().invoke(cli, [command, str(cfg), *extra])  # text: the print stays on stdout
    assert r.exit_code == 0 and "hello from a pass" in r.stdout


RAW_FD_MODELS = """
import os

import torch


def model():
    os.write(1, b"raw fd write\\n")  # straight to file descriptor 1, past sys.stdout
    os.system("echo from a subprocess")
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
"""


@pytest.mark.parametrize("command", ["run", "bisect"])
def test_json_stdout_is_one_object_when_code_writes_to_fd_1(tmp_path, command):
    """Writes straight to file descriptor 1 (os.write, a subprocess, a C extension) go to stderr
    under --format json too: fd 1 points at stderr while the command runs (the console
    script, where sys.stdout is fd 1; CliRunner has no fd to swap, hence a subprocess)."""
    (tmp_path / "rawmodels.py").write_text(RAW_FD_MODELS)
    cfg = tmp_path / "fx.toml"
    cfg.write_text('pipeline = "eliminate_dead_code"\n[model]\nfactory = "rawmodels:model"\ninputs = [{shape = [2, 4]}]\n')
    extra = ["--no-save", "--repeat", "1"] if command == "run" else []
    script = Path(sys.executable).parent / "fxpasses"
    out = subprocess.run([str(script), command, str(cfg), *extra, "--format", "json"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)  # the whole of stdout: one JSON object, nothing before it
    assert data["ok"] is True and out.stdout.startswith("{")
    assert out.stderr.count("raw fd write\n") == 1 and out.stderr.count("from a subprocess\n") == 1
    # text: the writes stay on stdout
    out = subprocess.run([str(script), command, str(cfg), *extra], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0 and "raw fd write\n" in out.stdout and "raw fd write" not in out.stderr


def test_json_error_object_after_fd_1_writes_is_alone_on_stdout(tmp_path):
    """The failure's JSON object (here a model that fails after writing to fd 1) is alone on
    stdout as well, and fd 1 is restored for it."""
    (tmp_path / "rawmodels.py").write_text(RAW_FD_MODELS + '\n\ndef broken():\n    model()\n    raise RuntimeError("no model")\n')
    cfg = tmp_path / "fx.toml"
    cfg.write_text('pipeline = "eliminate_dead_code"\n[model]\nfactory = "rawmodels:broken"\ninputs = [{shape = [2, 4]}]\n')
    script = Path(sys.executable).parent / "fxpasses"
    out = subprocess.run([str(script), "run", str(cfg), "--no-save", "--format", "json"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    data = json.loads(out.stdout)
    assert data["ok"] is False and data["exit_status"] == 2
    assert "no model" in data["error"]["message"]
    assert "raw fd write\n" in out.stderr and "from a subprocess\n" in out.stderr


def test_a_pass_calling_sys_exit_is_a_failing_pass(noisy_site, tmp_path):
    """SystemExit from a pass fails the pass (as a test calling sys.exit() fails in pytest):
    rolled back, exit status 1, the JSON object saying so."""
    cfg = tmp_path / "fx.toml"
    cfg.write_text('pipeline = "exits"\n' + MODEL)
    args = ["run", str(cfg), "--no-save", "--repeat", "1", "--format", "json"]
    error, stderr = json_failure(args, 1, "PassFailedError")
    assert error["pass_name"] == "exits" and error["rolled_back"] is True
    assert error["reason"] == "SystemExit: 5" and error["cause"] == "SystemExit: 5"
    assert stderr.startswith("error: pass 'exits' failed: SystemExit: 5")
    cfg.write_text('pipeline = "exits"\non_error = "skip"\n' + MODEL)
    r = CliRunner().invoke(cli, ["run", str(cfg), "--no-save", "--repeat", "1", "--format", "json"])
    assert r.exit_code == 0, r.output
    (report,) = json.loads(r.stdout)["report"]["passes"]
    assert (report["name"], report["status"]) == ("exits", "skipped")


def test_json_bad_model_files_and_output_directories(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "somedir").mkdir()
    (tmp_path / "afile").write_text("x")
    cfg = tmp_path / "fx.toml"
    cfg.write_text('[model]\ngraph = "somedir"\ninputs = [{ shape = [1, 3, 32, 32] }]\n')
    error, _ = json_failure(["run", str(cfg), "--no-save", "--format", "json"], 2, "ConfigError")
    # named after the config file, as other config errors are (found by a new-user check)
    assert error["message"] == (
        f"{cfg}: [model] graph: {tmp_path / 'somedir'} is a directory, expected a file (a graph.py written by --reproducer)"
    )
    assert error["source"] == f"{cfg}: [model] graph"
    error, _ = json_failure(["run", "somedir", "--format", "json"], 2, "ConfigError")
    assert error["message"] == "somedir is a directory, expected a file (a config file: .toml, .yaml, .yml or .json)"
    # an existing file: fxpasses' error, not click's usage text, naming the directory the option is for
    for flag, what in (("-o", "output"), ("--draw", "drawing"), ("--reproducer", "reproducer")):
        args = ["run", flag, "afile", "--format", "json"] + (["--no-save"] if flag != "-o" else [])
        error, _ = json_failure(args, 2, "UserError")
        assert error["message"] == f"cannot write the {what} directory afile: afile exists and is not a directory"
    error, _ = json_failure(["run", "-o", "afile/out", "--format", "json"], 2, "UserError")
    assert error["message"] == "cannot write the output directory afile/out: afile is not a directory"
    error, _ = json_failure(["run", "-o", "/proc/fxpasses-nope", "--format", "json"], 2, "UserError")
    assert error["message"] == (
        "cannot write the output directory /proc/fxpasses-nope: cannot create a directory in /proc: no such file "
        "or directory (nothing can be created there: a virtual file system such as /proc?) (ENOENT)"
    )
    error, _ = json_failure(["run", "-o", "out", "--no-save", "--format", "json"], 2, "UserError")
    assert error["message"] == (
        "-o/--output out and --no-save conflict: -o says where to save the result, --no-save not to save it; give one of them"
    )
    assert not (tmp_path / "out").exists()


def test_json_internal_error_exit_3(monkeypatch):
    import fxpasses.job

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in fxpasses")

    monkeypatch.setattr(fxpasses.job, "run_job", broken)
    error, stderr = json_failure(["run", "--no-save", "--format", "json"], 3, "RuntimeError")
    assert error == {"type": "RuntimeError", "message": "a bug in fxpasses", "internal": True}
    assert stderr == "error: unexpected RuntimeError: a bug in fxpasses\n(run with --traceback for details)\n"


def test_json_interrupt_exit_130_says_interrupted(monkeypatch):
    import fxpasses.job

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fxpasses.job, "run_job", interrupted)
    error, stderr = json_failure(["run", "--no-save", "--format", "json"], 130, "KeyboardInterrupt")
    assert error == {"type": "KeyboardInterrupt", "message": "interrupted"}
    assert stderr == "interrupted\n"


def test_an_interrupted_pass_is_named_with_what_became_of_the_graph(monkeypatch):
    """Ctrl-C during a pass printed only "interrupted", not which pass it stopped nor that the
    graph was rolled back (a new-user check)."""
    import fxpasses.job
    from click.testing import CliRunner

    from fxpasses.cli import cli

    import torch
    import torch.fx

    class Slow(fxpasses.GraphPass):
        """Interrupted while it runs."""

        name = "slow_plugin_pass"

        def run(self, gm, ctx):
            relu = next(n for n in gm.graph.nodes if n.op == "call_module")
            relu.replace_all_uses_with(relu.args[0])
            gm.graph.erase_node(relu)
            raise KeyboardInterrupt

    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Flatten()))
    before = gm.code

    def run_job(*args, **kwargs):
        fxpasses.Pipeline([Slow]).run(gm)

    monkeypatch.setattr(fxpasses.job, "run_job", run_job)
    r = CliRunner().invoke(cli, ["run", "--no-save"])
    assert r.exit_code == 130, r.output
    assert r.stderr == "interrupted: 'slow_plugin_pass' was interrupted; the graph was rolled back to before it\n"
    assert gm.code == before
    r = CliRunner().invoke(cli, ["run", "--no-save", "--format", "json"])
    assert r.exit_code == 130, r.output
    assert json.loads(r.stdout)["error"] == {
        "type": "KeyboardInterrupt",
        "message": "interrupted",
        "notes": ["'slow_plugin_pass' was interrupted; the graph was rolled back to before it"],
    }

    def run_job_raise(*args, **kwargs):
        fxpasses.Pipeline([Slow], on_error="raise").run(gm)

    monkeypatch.setattr(fxpasses.job, "run_job", run_job_raise)
    r = CliRunner().invoke(cli, ["run", "--no-save"])
    assert r.stderr == "interrupted: 'slow_plugin_pass' was interrupted; the graph is as the pass left it (on_error='raise')\n"
    assert gm.code != before


def test_json_success_objects_say_ok(tmp_path):
    for args in (["list"], ["show", "count_ops"], ["show", "inference"], ["check", "--pipeline", "eliminate_dead_code"]):
        r = CliRunner().invoke(cli, [*args, "--format", "json"])
        assert r.exit_code == 0, r.output
        data = json.loads(r.stdout)
        assert list(data)[0] == "ok" and data["ok"] is True, args
    r = CliRunner().invoke(cli, ["run", "--no-save", "--repeat", "1", "--pipeline", "eliminate_dead_code", "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["ok"] is True and data["pipeline"] == "eliminate_dead_code" and data["saved"] == []


def test_json_usage_errors_stay_click_text():
    """A bad flag is click's usage error: plain text on stderr, exit 2, nothing on stdout."""
    r = CliRunner().invoke(cli, ["check", "--format", "json", "--no-such-flag"])
    assert r.exit_code == 2 and r.stdout == ""
    assert "Error: No such option '--no-such-flag'." in r.stderr


# ---------------------------------------------------------------------- output directories, --draw


@pytest.mark.parametrize("flag", ["--output", "-o", "--draw", "--reproducer"])
def test_an_empty_directory_option_is_a_usage_error_not_the_current_directory(flag, tmp_path, monkeypatch):
    """`-o ''` (an unset shell variable) saved into the current directory (found by a new-user
    check)."""
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["run", flag, "", "--repeat", "1"])
    assert r.exit_code == 2, r.output
    assert "an empty path (''); give a directory" in r.stderr
    assert list(tmp_path.iterdir()) == []  # nothing saved anywhere
    for blank in ("", " "):  # (a blank one made a folder named " ")
        (tmp_path / "c.toml").write_text(f'output = "{blank}"\n')
        r = CliRunner().invoke(cli, ["run", "c.toml", "--repeat", "1"])
        assert r.exit_code == 2 and f"output: an empty path ({blank!r}); give a directory (given: {blank!r})" in r.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]


@pytest.mark.parametrize(
    "code, reason",
    [
        (errno.EACCES, "permission denied (EACCES)"),
        (errno.EROFS, "read-only file system (EROFS)"),
        (errno.ENOTDIR, "not a directory (ENOTDIR)"),
    ],
)
def test_an_output_directory_that_cannot_be_made_names_the_path_and_the_reason(code, reason, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.chdir(tmp_path)

    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(tempfile, "TemporaryDirectory", refuse)
    r = CliRunner().invoke(cli, ["run", "-o", "out/model"])
    assert r.exit_code == 2
    assert r.stderr == f"error: cannot write the output directory out/model: cannot create a directory in .: {reason}\n"


def test_draw_says_when_no_pass_changed_the_graph(tmp_path, monkeypatch):
    pytest.importorskip("pydot")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["run", "--no-save", "--repeat", "1", "--draw", "pics", "--pipeline", "eliminate_common_subexpressions"])
    assert r.exit_code == 0, r.output
    assert "--draw: no pass changed the graph's drawing, nothing drawn (nothing written to pics)\n" in r.stderr
    assert not (tmp_path / "pics").exists()
    r = CliRunner().invoke(cli, ["run", "--no-save", "--repeat", "1", "--draw", "pics", "--pipeline", "remove_dropout,eliminate_common_subexpressions"])
    assert r.exit_code == 0, r.output
    assert "in pics, before and after 1 changing pass: remove_dropout" in r.stderr
    assert sorted(p.name for p in (tmp_path / "pics").glob("*.dot")) == ["01_remove_dropout.after.dot", "01_remove_dropout.before.dot"]


# ---------------------------------------------------------------------- -p no:NAME


def test_disabling_a_plugin_no_installed_plugin_has_warns_with_suggestions_and_is_an_error_when_strict():
    r = CliRunner().invoke(cli, ["-p", "no:fxpasses-exampel-passes", "list"])
    assert r.exit_code == 0
    assert r.stderr == (
        "warning: plugin fxpasses-exampel-passes: disabled with disable/-p no:NAME but no installed plugin has that "
        "name; installed: fxpasses, fxpasses-example-passes; did you mean 'fxpasses-example-passes'?\n"
    )
    r = CliRunner().invoke(cli, ["list", "-p", "no:typo", "--strict-plugins", "--format", "json"])
    assert r.exit_code == 2
    error = json.loads(r.stdout)["error"]
    assert (error["type"], error["distribution"]) == ("PluginError", "typo")
    assert error["message"] == (
        "plugin typo: disabled with disable/-p no:NAME but no installed plugin has that name; "
        "installed: fxpasses, fxpasses-example-passes"
    )


@pytest.mark.parametrize("arg, where", [("", "enable (or -p NAME)"), (" ", "enable (or -p NAME)"), ("no:", "disable (or -p no:NAME)")])
def test_p_with_an_empty_plugin_name_is_an_error_exit_2(arg, where):
    """`-p ''` and `-p no:` name no plugin: an error saying so (not "plugin : not installed",
    nor a warning that disables nothing)."""
    r = CliRunner().invoke(cli, ["-p", arg, "list"])
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: plugin name {arg[3:] if arg == 'no:' else arg!r} in {where}: give the name of an installed plugin")
    assert "Traceback" not in r.output


def test_empty_plugin_name_in_the_config_is_a_config_error():
    with pytest.raises(fxpasses.ConfigError, match=r"plugin name '' in disable \(or -p no:NAME\)"):
        fxpasses.Registry(disable=[""])
    with pytest.raises(pydantic.ValidationError, match=r"plugin name '' in enable"):
        PluginsConfig(enable=[""])


def test_p_names_an_installed_package_that_is_not_a_plugin():
    """`-p pydantic`: installed, but no fxpasses plugin; the error says which of the two."""
    r = CliRunner().invoke(cli, ["-p", "pydantic", "-p", "nosuch-dist", "list"])
    assert r.exit_code == 2
    assert "plugin nosuch-dist, pydantic: requested with enable/-p but not installed" in r.output
    assert r.output.rstrip().endswith(
        "(pydantic is an installed package, but declares no 'fxpasses' entry point: not an fxpasses plugin)"
    )
    r = CliRunner().invoke(cli, ["-p", "nosuch-dist", "list"])
    assert "installed package" not in r.output


def test_plain_table_pads_by_terminal_cells_and_keeps_a_multi_line_cell_in_its_column():
    """Widths counted code points: a name typed decomposed (U and U+0308, one cell on a
    terminal) or in CJK (two cells a character) pushed its row's later columns out of line
    (found by a new-user check)."""
    from fxpasses.console import plain_table

    text = plain_table(["name", "x"], [["U\u0308ber", "1"], ["名前", "2"], ["abc", "3\nmore"]])
    assert text.splitlines() == ["name  x", "----  ----", "U\u0308ber  1", "名前  2", "abc   3", "      more"]


ORDERED_SOURCE = '''
import fxpasses


class Ordered(fxpasses.GraphPass):
    """Orders itself against a misspelt and an optional pass."""

    name = "ordered_pass"
    after = ("eliminate_dead_cod", "optional_plugins_pass")
    before = ("fold_constants",)

    def run(self, gm, ctx):
        return False


@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register(Ordered)
'''


def test_after_and_before_naming_no_registered_pass_are_noted_by_show_and_check(tmp_path, monkeypatch):
    """A typo in `after`/`before` passed `fxpasses check` silently and `show` listed it as a
    real name, the constraint ordering nothing (found by a new-user check). Not an error: a
    name may be an optional plugin's pass; a note says so, with a close name."""
    with installed_dist(monkeypatch, tmp_path / "site", "ordered-passes", "0.1", "fxp_ordered", ORDERED_SOURCE):
        typo = (
            "ordered_pass: after names 'eliminate_dead_cod', which no registered pass has (it orders nothing "
            "unless a pass of that name is installed); did you mean 'eliminate_dead_code'?"
        )
        optional = (
            "ordered_pass: after names 'optional_plugins_pass', which no registered pass has (it orders nothing "
            "unless a pass of that name is installed)"
        )
        r = CliRunner().invoke(cli, ["show", "ordered_pass"])
        assert r.exit_code == 0, r.output
        assert f"note:     {typo}\nnote:     {optional}\n" in r.output
        assert "fold_constants" not in r.output.split("note:")[1]  # a registered name: no note
        r = CliRunner().invoke(cli, ["show", "ordered_pass", "--format", "json"])
        assert json.loads(r.output)["notes"] == [typo, optional]
        r = CliRunner().invoke(cli, ["check", "--pipeline", "ordered_pass,remove_dropout"])
        assert r.exit_code == 0, r.output
        assert r.output.endswith(f"note: {typo}\nnote: {optional}\n")
        r = CliRunner().invoke(cli, ["check", "--pipeline", "ordered_pass", "--format", "json"])
        assert json.loads(r.output)["notes"] == [typo, optional]
        r = CliRunner().invoke(cli, ["check", "--pipeline", "remove_dropout"])  # not in the plan: no note
        assert "note:" not in r.output


def test_a_misspelt_after_name_is_warned_of_by_a_pipeline_and_fxpasses_run(tmp_path, monkeypatch):
    """Notes for unknown after/before names were only in `show`/`check`: a Python pass class
    with `after = ("eliminate_dead_cod",)` in a Pipeline, and `fxpasses run`, said nothing (a
    new-user check). A name close to a pass's is warned of (PassDefinitionWarning; a
    `warning:` line in the CLI); one far from all (an optional plugin's pass) is not."""
    import warnings

    import fxpasses

    class Local(fxpasses.GraphPass):
        """Orders itself after a misspelt pass, and after a local one spelt right."""

        name = "local_ordered"
        after = ("eliminate_dead_cod", "other_local", "some_optional_plugins_pass")

        def run(self, gm, ctx):
            return False

    class OtherLocal(fxpasses.GraphPass):
        """Another local pass."""

        name = "other_local"

        def run(self, gm, ctx):
            return False

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fxpasses.Pipeline([Local, OtherLocal, "remove_dropout"])
    messages = [str(w.message) for w in record if issubclass(w.category, fxpasses.PassDefinitionWarning)]
    assert messages == [
        "local_ordered: after names 'eliminate_dead_cod', which no registered pass nor one of the pipeline has (it "
        "orders nothing unless a pass of that name is installed); did you mean 'eliminate_dead_code'?"
    ]
    # never the pass itself as the suggestion (`after = ("my_bb",)` on `my_b` suggested 'my_b'... and 'my_a')

    class Ab(fxpasses.GraphPass):
        """after a misspelt local pass."""

        name = "my_a"
        after = ("my_bb",)

        def run(self, gm, ctx):
            return False

    class Bb(fxpasses.GraphPass):
        """The local pass."""

        name = "my_b"

        def run(self, gm, ctx):
            return False

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fxpasses.Pipeline([Ab, Bb])
    (w,) = [w for w in record if issubclass(w.category, fxpasses.PassDefinitionWarning)]
    assert str(w.message).endswith("did you mean 'my_b'?")
    assert record[0].filename == __file__  # the user's line
    with installed_dist(monkeypatch, tmp_path / "site", "ordered-passes", "0.1", "fxp_ordered", ORDERED_SOURCE):
        monkeypatch.chdir(tmp_path)
        r = CliRunner().invoke(cli, ["run", "--pipeline", "ordered_pass,remove_dropout", "--no-save", "--repeat", "1"])
        assert r.exit_code == 0, r.output
        typo = "warning: ordered_pass: after names 'eliminate_dead_cod', which no registered pass nor one of the pipeline has"
        assert r.stderr.count(typo) == 1 and "optional_plugins_pass" not in r.stderr
        r = CliRunner().invoke(cli, ["check", "--pipeline", "ordered_pass"])  # notes, not warnings too
        assert "warning:" not in r.output and r.output.count("eliminate_dead_cod'") == 1


def test_fxpasses_warnings_in_a_command_are_warning_lines_each_text_once(capsys):
    """Every command prints fxpasses' own warnings as `warning: ...` lines (a plugin
    instrument raising mid-run showed Python's warning, pointing at click); a text issued
    again (bisect reruns the pipeline) is printed once."""
    import warnings as _warnings

    from fxpasses.cli import _warning_lines
    from fxpasses.errors import PassDefinitionWarning, PluginWarning

    with _warning_lines(PluginWarning, PassDefinitionWarning):
        for _ in range(3):
            _warnings.warn(PluginWarning("plugin x: broken"))
        _warnings.warn(PassDefinitionWarning("pass y: typo"))
        _warnings.warn(PluginWarning("plugin x: broken"))
    assert capsys.readouterr().err.splitlines() == ["warning: plugin x: broken", "warning: pass y: typo"]


def test_json_output_has_no_infinity_or_nan_tokens():
    """A plugin option's default float("inf") made `fxpasses show --format json` and `fxpasses
    schema` print `Infinity`, which JSON parsers outside Python reject (found by a new-user
    check): non-finite floats are written as "inf", "-inf", "nan"."""
    import contextlib
    import io

    from fxpasses._json import dumps
    from fxpasses.cli import _echo_json
    from fxpasses.registry import Registry

    text = dumps({"a": float("inf"), "b": [float("-inf"), (1.5, float("nan"))], float("inf"): {"c": 2}})
    assert json.loads(text) == {"a": "inf", "b": ["-inf", [1.5, "nan"]], "inf": {"c": 2}}
    assert "Infinity" not in text and "NaN" not in text

    class Unbounded(fxpasses.GraphPass):
        """Unbounded."""

        name = "unbounded"

        class Options(fxpasses.PassOptions):
            limit: float = float("inf")

        def run(self, gm, ctx):
            return False

    reg = Registry(autoload=False)
    reg.register(Unbounded)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        _echo_json(reg.describe("unbounded").as_dict())
    assert json.loads(buf.getvalue(), parse_constant=lambda c: pytest.fail(f"non-JSON token {c}"))["options"][0]["default"] == "inf"


@pytest.mark.parametrize("where", ["factory", "forward"])
@pytest.mark.parametrize("code", ["0", "'bye'", "3"])
def test_sys_exit_in_model_code_is_an_error_naming_where_not_a_silent_success(tmp_path, where, code):
    """A factory (or a forward) calling sys.exit(0) made `fxpasses run` exit 0 with nothing
    printed, not even the JSON object; sys.exit(3) read as an internal error, sys.exit('bye')
    as a failed pass (a new-user check)."""
    body = f"import sys\nsys.exit({code})" if where == "factory" else "return Exits()"
    (tmp_path / "exiting_models.py").write_text(
        "import sys\nimport torch\n\n"
        "class Exits(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        f"        sys.exit({code})\n\n"
        "def build():\n" + "".join(f"    {line}\n" for line in body.splitlines())
    )
    cfg = tmp_path / "m.toml"
    cfg.write_text('[model]\nfactory = "exiting_models:build"\ninputs = [{ shape = [2, 3] }]\n')
    for command in (["run", str(cfg), "--no-save", "--repeat", "1"], ["bisect", str(cfg)]):
        r = CliRunner().invoke(cli, [*command, "--format", "json"])
        assert r.exit_code == 2, (command, r.output)
        out = json.loads(r.stdout)
        line = 10 if where == "factory" else 6
        assert out["error"]["type"] == "UserError" and out["error"]["message"].startswith(
            f"sys.exit({eval(code)!r}) was called at exiting_models.py:{line} in {'build' if where == 'factory' else 'forward'}, "
            "in code run for the model"
        ), out


def test_plugin_problems_from_a_projects_plugins_section_name_its_file(tmp_path, monkeypatch):
    """An ancestor pyproject.toml enabling a plugin that is not installed made every `list`
    exit 2 with "plugin nope-dist: requested with enable/-p but not installed", not saying
    where that came from; its `prefer` warnings said "[plugins]: prefer = ..." (a new-user check)."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.fxpasses.plugins]\nenable = ["nope-dist"]\n')
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    r = CliRunner().invoke(cli, ["list"])
    assert r.exit_code == 2
    assert f"error: {tmp_path / 'pyproject.toml'} [tool.fxpasses]: [plugins]: plugin nope-dist: requested with enable/-p but not installed" in r.output
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.fxpasses.plugins]\nprefer = {remove_dropout = "nope"}\n')
    r = CliRunner().invoke(cli, ["list"])
    assert r.exit_code == 0
    assert f"warning: {tmp_path / 'pyproject.toml'} [tool.fxpasses]: [plugins]: prefer = {{remove_dropout = 'nope'}}" in r.output


INIT_RAISES_SOURCE = '''
import fxpasses
from fxpasses import GraphPass

class InitRaises(GraphPass):
    """Raises when made."""
    name = "init_raises"

    def __init__(self, *args, **kwargs):
        raise RuntimeError("init broke")

    def run(self, gm, ctx):
        return False

@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register(InitRaises)
'''


def test_check_and_run_name_a_pass_whose_constructor_raises(tmp_path, monkeypatch):
    """A plugin's pass whose constructor raised passed `fxpasses check` ("OK, 1 pass"), and
    `fxpasses run` ended with "unexpected RuntimeError: init broke", exit 3, naming neither the
    pass nor its plugin (a new-user check). Both now fail naming the pass, its line and its
    distribution (exit 1, a failed pass)."""
    with installed_dist(monkeypatch, tmp_path / "site", "init-passes", "0.3", "fxp_init", INIT_RAISES_SOURCE):
        r = CliRunner().invoke(cli, ["check", "--pipeline", "init_raises"])
        assert r.exit_code == 1, r.output
        lines = r.output.strip().splitlines()
        assert lines[0] == "error: pass 'init_raises' failed: creating the pass failed: RuntimeError: init broke"
        assert lines[1].startswith("  raised in the pass's code at ") and lines[1].endswith(", in __init__ (init-passes 0.3)")
        r = CliRunner().invoke(cli, ["run", "--pipeline", "init_raises", "--no-save", "--repeat", "1"])
        assert r.exit_code == 1, r.output
        assert "error: pass 'init_raises' failed: creating the pass failed: RuntimeError: init broke" in r.output
        assert "(init-passes 0.3)" in r.output and "unexpected" not in r.output


def test_another_tools_name_for_a_command_says_which_command_is_meant():
    """`fxpasses describe NAME` (the Python API's Registry.describe) was click's bare "No such
    command 'describe'" (a new-user check); close spellings keep click's own suggestion."""
    r = CliRunner().invoke(cli, ["describe", "fold_constants"])
    assert r.exit_code == 2
    assert "Error: No such command 'describe': the command is show (the Python API's Registry.describe)" in r.output
    r = CliRunner().invoke(cli, ["ls"])
    assert r.exit_code == 2 and "No such command 'ls': the command is list" in r.output
    r = CliRunner().invoke(cli, ["shwo", "x"])
    assert r.exit_code == 2 and "No such command 'shwo'. Did you mean 'show'?" in r.output
    assert CliRunner().invoke(cli, ["show", "fold_constants"]).exit_code == 0


def test_check_without_any_config_checks_what_run_runs(tmp_path, monkeypatch):
    """`fxpasses check` with no config anywhere was an error while `fxpasses run` ran the bundled
    example with the inference preset (a new-user check): it checks that plan now."""
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["check"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == (
        "no config found (no fxpasses.toml, nor pyproject.toml with [tool.fxpasses], here or above): "
        "the bundled example with preset 'inference', as `fxpasses run` uses"
    )
    assert lines[1] == "embedded default config: OK, 6 passes (verify=lint, on_error=rollback)"
    out = json.loads(CliRunner().invoke(cli, ["check", "--format", "json"]).stdout)
    assert out["steps"][0]["name"] == "remove_dropout" and len(out["steps"]) == 6


def test_plain_tables_wrap_their_last_column_to_columns_when_it_is_set(monkeypatch):
    """`fxpasses show fold_constants | less` printed option descriptions as one cell of up to
    599 columns, even with COLUMNS=100 (a new-user check). With COLUMNS set, a plain table's
    last column wraps to fit; unset, lines stay whole (for grep)."""
    whole = CliRunner().invoke(cli, ["show", "fold_constants"])
    table = whole.output.split("\n\n")[1]
    assert max(map(len, table.splitlines())) > 300
    monkeypatch.setenv("COLUMNS", "100")
    wrapped = CliRunner().invoke(cli, ["show", "fold_constants"])
    table = wrapped.output.split("\n\n")[1]
    assert max(map(len, table.splitlines())) <= 100
    assert " ".join(table.split()).count("Never store a folded tensor with more elements than this") == 1


def test_schema_stdout_is_the_schema_alone_when_a_plugin_prints_as_it_is_imported(tmp_path, monkeypatch):
    """A plugin that printed as it was imported put its line before the schema's JSON on
    stdout (`json.load` failed at line 1); list, show and check with --format json kept it
    off stdout already (an adversarial check)."""
    source = 'print("noisy plugin importing")\n' + NOISY_SOURCE
    with installed_dist(monkeypatch, tmp_path / "site", "noisy-import", "0.1", "fxp_noisy_import", source):
        r = CliRunner().invoke(cli, ["schema"])
    assert r.exit_code == 0, r.output
    schema = json.loads(r.stdout)
    assert "noisy plugin importing" in r.stderr and "noisy plugin importing" not in r.stdout
    assert schema["$schema"].startswith("https://json-schema.org/")


def test_print_skipped_lists_each_node_a_pass_left_alone_and_why(tmp_path):
    """The reasons a pass gave for nodes it left alone (`ctx.skip`) were only in `--format
    json`; the text run showed a `skipped=1` counter at most (a pass-author check)."""
    (tmp_path / "times_one.py").write_text(
        "import torch\n\nclass TimesOne(torch.nn.Module):\n    def forward(self, x):\n        return x * 1 + 2\n\n"
        "def make():\n    return TimesOne()\n"
    )
    cfg = tmp_path / "t.toml"
    cfg.write_text(
        'pipeline = "propagate_shapes,simplify_algebra"\n[model]\nfactory = "times_one:make"\ncapture = "symbolic_trace"\n'
        "inputs = [{ shape = [2, 3] }]\n"
    )
    args = ["run", str(cfg), "--no-save", "--repeat", "1"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    assert "1 node left alone by a pass, each with a reason: --print-skipped prints them" in r.stdout
    r = CliRunner().invoke(cli, [*args, "--print-skipped"])
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    i = lines.index("simplify_algebra left 1 node alone:")
    assert lines[i + 1].startswith("  %mul: x * 1 kept: the shapes and dtypes in node.meta are the example inputs'")
    assert "--print-skipped prints them" not in r.stdout


def test_run_says_why_it_runs_the_passes_in_another_order_than_given():
    """`fxpasses run --pipeline eliminate_dead_code,fuse_conv_bn` printed `pipeline:
    fuse_conv_bn,eliminate_dead_code` without a word on why (check and --format json said it;
    a new-user check)."""
    r = CliRunner().invoke(cli, ["run", "--pipeline", "eliminate_dead_code,fuse_conv_bn", "--no-save", "--repeat", "1"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("pipeline: "))
    assert lines[i : i + 2] == [
        "pipeline: fuse_conv_bn,eliminate_dead_code",
        "  order: fuse_conv_bn: moved before eliminate_dead_code: fuse_conv_bn declares before = eliminate_dead_code",
    ]
