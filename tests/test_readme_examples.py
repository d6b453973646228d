"""Every ```python block of README.md runs as written, as a reader would copy-paste it.

Each block is one test case, named by its line in README.md and its first line, run with
``exec`` in a fresh namespace, in a temporary working directory (files a block writes land
there). What a block leaves to the reader (``model``, a model of their own; ``MyModel``;
``RemoveIdentity``, the plugin's pass) is supplied by ``CONTEXT``, and nothing more; where
the README shows what a block prints or what it does, ``CHECKS`` asserts it.

Chained sections: in "## Python API" the keyword-input (GPT-2) block goes on from the first
block (it uses its ``import torch, fxpasses``), so a block of a section in ``CHAINED`` runs
after the earlier blocks of its section, in one namespace. Other blocks stand alone.

A block that is not named in ``CONTEXT`` runs in an empty namespace: a new block that needs
context fails here until it is given some. ``SKIPPED`` lists blocks that cannot run in a test
at all, with the reason; it is empty, and its size is asserted.
"""

from __future__ import annotations

import re
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
from torch import nn

import fxpasses

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: fxpasses depends on tomli there
    import tomli as tomllib

README = Path(__file__).resolve().parents[1] / "README.md"


@dataclass(frozen=True)
class Block:
    line: int  # README line of the block's first code line
    section: str  # the nearest heading above it, e.g. "## Python API"
    lang: str
    code: str

    @property
    def first(self) -> str:
        return self.code.splitlines()[0].strip()

    @property
    def key(self) -> tuple[str, str]:
        return (self.section, self.first)

    @property
    def id(self) -> str:
        return f"L{self.line}: {self.first[:50]}"


def readme_blocks(lang: str) -> list[Block]:
    blocks: list[Block] = []
    section = ""
    lines = README.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#") and not line.startswith("#!"):
            section = line.strip()
        m = re.fullmatch(r"```(\w*)", line)
        if m:
            end = lines.index("```", i + 1)
            if m.group(1) == lang:
                blocks.append(Block(i + 2, section, lang, "\n".join(lines[i + 1 : end]) + "\n"))
            i = end
        i += 1
    return blocks


PYTHON_BLOCKS = readme_blocks("python")
CHAINED = {"## Python API"}

# (section, first line) -> reason; a block that cannot run in a test at all
SKIPPED: dict[tuple[str, str], str] = {}


# ------------------------------------------------------------------ what the reader supplies


class _ConvBnDropout(nn.Module):
    """The Python API block's model (it defines it itself), for the torch.compile block."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.bn(self.conv(x)).relu()).mean((2, 3))


def _model_and_x(ns: dict[str, Any]) -> None:
    """The torch.compile block uses the reader's ``model`` and its input ``x``."""
    ns["model"] = _ConvBnDropout().eval()
    ns["x"] = torch.randn(1, 3, 8, 8)


def _imports_fxpasses(ns: dict[str, Any]) -> None:
    """The Presets block goes on from the Python API's ``import torch, fxpasses``."""
    ns["fxpasses"] = fxpasses


def _compile_context(ns: dict[str, Any]) -> None:
    ns["torch"] = torch
    _model_and_x(ns)


def _register_context(ns: dict[str, Any]) -> None:
    """The plugin's module: ``import fxpasses`` and its pass class (the README's entry point
    names ``fxpasses_example_passes``, whose pass is ``RemoveIdentity``)."""
    from fxpasses_example_passes import RemoveIdentity

    ns["fxpasses"] = fxpasses
    ns["RemoveIdentity"] = RemoveIdentity


class MyModel(nn.Module):
    """The reader's model with one ``nn.Identity`` for ``remove_identity`` to remove."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.id = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.id(self.fc(x)).relu()


def _my_model(ns: dict[str, Any]) -> None:
    ns["MyModel"] = MyModel


CONTEXT: dict[tuple[str, str], Callable[[dict[str, Any]], None]] = {
    ("### Presets", "pipeline = fxpasses.Pipeline.from_preset(\"inference\", verify=\"numeric\", atol=1e-4,"): _imports_fxpasses,
    ("## torch.compile", "compiled = torch.compile(model, backend=\"fxpasses\", options={\"pipeline\": \"remove_dropout,eliminate_dead_code\", \"then\": \"inductor\"})"): _compile_context,
    ("## Publishing a pass", "@fxpasses.hookimpl"): _register_context,
    ("## Publishing a pass", "import torch"): _my_model,
}


# ------------------------------------------------------------------ what the README promises


def _cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"\s{2,}", row.strip()) if c.strip()]


def _check_api(ns: dict[str, Any], block: Block, out: str, request: pytest.FixtureRequest) -> None:
    """The table printed is the one the README shows, but for the timings."""
    shown = block.code.split("print(report.table())", 1)[1].splitlines()[1:]
    shown = [s.strip()[2:] for s in shown if s.strip().startswith("#")]
    printed = out.rstrip("\n").splitlines()[-len(shown) :]
    assert len(printed) == len(shown)
    ms = _cells(shown[0]).index("ms")
    for real, doc in zip(printed, shown):
        if set(doc) <= {"-", " "}:  # the rule: one run of dashes a column, as wide
            widths = [len(c) for c in real.split()]
            assert set(real) <= {"-", " "} and widths[:ms] + widths[ms + 1 :] == [len(c) for i, c in enumerate(doc.split()) if i != ms]
            continue
        if doc.startswith("total: "):
            no_time = r"( in )[\d.]+( ms)"
            assert re.sub(no_time, r"\1?\2", real) == re.sub(no_time, r"\1?\2", doc)
            continue
        r, d = _cells(real), _cells(doc)
        if d[0] != "pass":  # a pass's row: its time is the one cell that may differ
            assert re.fullmatch(r"[\d.]+", r[ms]) and re.fullmatch(r"[\d.]+", d[ms])
            del r[ms], d[ms]
        assert r == d, f"README shows {doc!r}, the block prints {real!r}"
    assert [p.status for p in ns["report"].passes] == ["ok"] * 4


def _check_gpt2(ns: dict[str, Any], block: Block, out: str, request: pytest.FixtureRequest) -> None:
    report = ns["report"]
    assert [(p.name, p.status) for p in report.passes] == [("remove_dropout", "ok"), ("eliminate_dead_code", "ok")]
    assert report["remove_dropout"].counters["removed"] > 0


def _check_preset(ns: dict[str, Any], block: Block, out: str, request: pytest.FixtureRequest) -> None:
    pipeline = ns["pipeline"]
    assert (pipeline.verify, pipeline.atol) == ("numeric", 1e-4)
    assert "fold_constants{max_numel=4096,fold_parameters=true}" in pipeline.plan().as_pipeline_string()


def _check_pass(ns: dict[str, Any], block: Block, out: str, request: pytest.FixtureRequest) -> None:
    """As the comment says: propagate_shapes (pulled in) first; remove_scale_by_one changed
    yes, nodes 4 -> 3, removed=1."""
    report = ns["report"]
    assert [(p.name, p.status) for p in report.passes] == [("propagate_shapes", "ok"), ("remove_scale_by_one", "ok")]
    step = report["remove_scale_by_one"]
    assert (step.changed, step.nodes_before, step.nodes_after, step.counters) == (True, 4, 3, {"removed": 1})
    assert "mul" not in ns["gm"].code
    assert "remove_scale_by_one" in out and "removed=1" in out


def _check_compile(ns: dict[str, Any], block: Block, out: str, request: pytest.FixtureRequest) -> None:
    """torch.compile is lazy: call the compiled model, so that the backend and its options run."""
    import fxpasses.backend

    torch._dynamo.reset()
    fxpasses.backend.reports.clear()
    model, x = ns["model"], ns["x"]
    torch.testing.assert_close(ns["compiled"](x), model(x))
    (report,) = fxpasses.backend.reports
    assert [p.name for p in report.passes] == ["remove_dropout", "eliminate_dead_code"]
    assert report["remove_dropout"].counters == {"removed": 1}


def _check_hookimpl(ns: dict[str, Any], block: Block, out: str, request: pytest.FixtureRequest) -> None:
    """The block is a working plugin module: a registry loading it has its pass."""
    plugin = types.ModuleType("readme_plugin")
    plugin.__dict__.update(ns)
    reg = fxpasses.Registry(autoload=False)
    reg.register_plugin(plugin)
    assert not reg.problems
    assert reg.get("remove_identity") is ns["RemoveIdentity"]


def _check_plugin_tests(ns: dict[str, Any], block: Block, out: str, request: pytest.FixtureRequest) -> None:
    """The block's tests pass, given the fixture the plugin provides."""
    ns["test_remove_identity_keeps_outputs"]()
    ns["test_it_removes_the_identity"](request.getfixturevalue("fxpasses_run"))


CHECKS: dict[tuple[str, str], Callable[..., None]] = {
    ("## Python API", "import torch, fxpasses"): _check_api,
    ("## Python API", "from transformers import GPT2Config, GPT2LMHeadModel   # random weights, no download"): _check_gpt2,
    ("### Presets", "pipeline = fxpasses.Pipeline.from_preset(\"inference\", verify=\"numeric\", atol=1e-4,"): _check_preset,
    ("## Writing a pass", "import torch, fxpasses"): _check_pass,
    ("## torch.compile", "compiled = torch.compile(model, backend=\"fxpasses\", options={\"pipeline\": \"remove_dropout,eliminate_dead_code\", \"then\": \"inductor\"})"): _check_compile,
    ("## Publishing a pass", "@fxpasses.hookimpl"): _check_hookimpl,
    ("## Publishing a pass", "import torch"): _check_plugin_tests,
}


# ------------------------------------------------------------------ the tests


def test_the_tables_name_real_blocks():
    """No stale entries: every block the tables name is in the README, once; nothing is
    skipped (a block added to SKIPPED must change this number, with its reason)."""
    keys = [b.key for b in PYTHON_BLOCKS]
    assert len(keys) == len(set(keys))
    assert set(CONTEXT) <= set(keys) and set(CHECKS) <= set(keys) and set(SKIPPED) <= set(keys)
    assert len(SKIPPED) == 0
    assert len(PYTHON_BLOCKS) >= 7


def _run(block: Block, ns: dict[str, Any]) -> None:
    exec(compile(block.code, f"README.md:{block.line}", "exec"), ns)


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[b.id for b in PYTHON_BLOCKS])
def test_readme_python_block_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, request) -> None:
    if block.key in SKIPPED:
        pytest.skip(SKIPPED[block.key])
    monkeypatch.chdir(tmp_path)
    ns: dict[str, Any] = {"__name__": "__readme__"}
    earlier = []
    if block.section in CHAINED:
        earlier = [b for b in PYTHON_BLOCKS if b.section == block.section and b.line < block.line]
    for b in [*earlier, block]:
        if b.key in CONTEXT:
            CONTEXT[b.key](ns)
        _run(b, ns)
    out = capsys.readouterr().out
    if block.key in CHECKS:
        CHECKS[block.key](ns, block, out, request)


@pytest.mark.parametrize("block", readme_blocks("toml"), ids=lambda b: f"L{b.line}: {b.first[:50]}")
def test_readme_toml_block_parses(block: Block) -> None:
    tomllib.loads(block.code)
