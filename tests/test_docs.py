"""The documentation keeps its promises: the README's commands, documented hooks and passes
(the README's python blocks are run by test_readme_examples.py)."""

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


def readme_python_block(heading: str) -> str:
    """The first ```python block under the README section ``heading``."""
    text = (ROOT / "README.md").read_text()
    section = text.split(f"\n{heading}\n", 1)[1]
    return re.search(r"```python\n(.*?)\n```", section, re.S).group(1)


def test_the_readme_report_table_shows_the_real_columns():
    import torch

    block = readme_python_block("## Python API")
    shown = block.split("print(report.table())", 1)[1].splitlines()[1:]
    header = shown[0].lstrip("# ").split()
    gm = torch.fx.symbolic_trace(torch.nn.ReLU())
    real = fxpasses.Pipeline(["eliminate_dead_code"]).run(gm).table().splitlines()
    assert header == real[0].split()
    nodes = header.index("nodes")
    row = shown[2].lstrip("# ").split("  ")
    row = [c.strip() for c in row if c.strip()]
    assert re.fullmatch(r"\d+ -> \d+", row[nodes]), row
    assert re.fullmatch(r"\d+ -> \d+", [c.strip() for c in real[2].split("  ") if c.strip()][nodes])
    assert shown[-1].startswith("# total: ") and real[-1].startswith("total: ")


def test_the_readme_names_example_is_the_sorted_builtin_names(monkeypatch):
    block = readme_python_block("## Python API")
    shown = re.search(r"reg\.names\(\).*?\[(.*?)\]", block, re.S).group(1)
    listed = [n.strip().strip("'") for n in shown.split(",") if n.strip() not in ("", "...")]
    monkeypatch.setenv("FXPASSES_DISABLE_PLUGIN_AUTOLOAD", "1")
    names = fxpasses.Registry().names()
    assert names == sorted(names)
    assert listed == names[: len(listed)] and len(listed) >= 2
