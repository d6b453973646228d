"""The documentation keeps its promises: the README's commands, documented hooks and passes."""

from __future__ import annotations

import re
from pathlib import Path

import fxpasses
from fxpasses import hookspecs

ROOT = Path(__file__).resolve().parents[1]


def readme_commands():
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```bash\n(python3 -m venv .*?)\n```", text)


def test_ci_runs_the_readme_test_command_verbatim():
    commands = readme_commands()
    assert len(commands) == 2
    test_cmd = commands[1]
    assert "pytest" in test_cmd
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_cmd in ci


def test_readme_main_job_command_installs_torch_cpu_build_first():
    main_cmd = readme_commands()[0]
    assert main_cmd.index("pip install torch==2.13.0") < main_cmd.index("pip install -e")
    assert main_cmd.endswith("fxpasses run")


def test_every_hookspec_is_prefixed_and_documented():
    specs = hookspecs._all_specs()
    assert set(specs) >= {"fxpasses_register_passes", "fxpasses_before_pass", "fxpasses_after_pass", "fxpasses_pass_failed"}
    for name, fn in specs.items():
        assert name.startswith("fxpasses_")
        doc = fn.__doc__ or ""
        for param in fn.__code__.co_varnames[: fn.__code__.co_argcount]:
            assert f":param {param}:" in doc, f"{name} does not document {param}"


def test_every_registered_pass_has_a_summary_and_documented_options():
    reg = fxpasses.Registry()
    for name in reg.names():
        d = reg.describe(name)
        assert d.summary, f"{name} has no summary line"
        assert d.summary.endswith("."), f"{name}: summary should be a sentence"


def test_every_builtin_pass_option_has_a_description():
    reg = fxpasses.Registry()
    for name in reg.names():
        info = reg.info(name)
        if info.distribution != "fxpasses":
            continue
        for opt in reg.describe(name).options:
            assert opt.description, f"option {name}.{opt.name} has no description (Field(description=...))"
