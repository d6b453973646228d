"""The bad-input corpus (tests/corpus/cases.toml): every malformed config or pipeline string
gives exit status 2, one message naming the fault, no traceback, and writes nothing."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from fxpasses.cli import cli

from dists import forget_modules, make_dist

CORPUS = Path(__file__).resolve().parent / "corpus"
CASES = tomllib.loads((CORPUS / "cases.toml").read_text())["case"]


def test_the_corpus_is_big_and_every_file_is_a_case():
    assert len(CASES) >= 50
    files = {c["file"] for c in CASES}
    assert len(files) == len(CASES), "one file per case"
    on_disk = {
        str(p.relative_to(CORPUS))
        for p in CORPUS.rglob("*")
        if p.is_file() and p.suffix in (".toml", ".yaml", ".yml", ".json", ".ini", ".pipeline") and p.name != "cases.toml"
    }
    on_disk = {f if "a_directory" not in f else "syntax/a_directory.toml" for f in on_disk}
    assert on_disk <= files, f"corpus files without a case: {sorted(on_disk - files)}"
    kinds = {c["file"].split("/")[0] for c in CASES}
    assert kinds == {"syntax", "keys", "passes", "strings", "model", "plugins"}


@pytest.fixture(scope="module")
def corpus_plugins(tmp_path_factory):
    """The corpus_* passes, installed as a real distribution (dist-info on sys.path)."""
    site = tmp_path_factory.mktemp("corpus_site")
    make_dist(site, "corpus-passes", "0.9", "corpus_passes", (CORPUS / "plugin/corpus_passes.py").read_text())
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    yield site
    sys.path.remove(str(site))
    forget_modules("corpus_passes")
    importlib.invalidate_caches()


#: the corpus plugin's own warning as it loads: its corpus_cycle_a and corpus_cycle_b form an
#: ordering cycle on purpose (the cycle cases), which loading reports (a registry check)
CYCLE_WARNING = (
    "warning: plugin corpus-passes 0.9: pass ordering cycle: corpus_cycle_a -> corpus_cycle_b -> corpus_cycle_a "
    "(because: corpus_cycle_a (corpus-passes 0.9) declares before = corpus_cycle_b; corpus_cycle_b (corpus-passes "
    "0.9) declares before = corpus_cycle_a): corpus_cycle_a and corpus_cycle_b cannot all be in one pipeline; fix "
    "their requires, after and before"
)
#: and its corpus_needs_missing requires a pass no plugin registers, on purpose
REQUIRES_WARNING = (
    "warning: plugin corpus-passes 0.9: pass 'corpus_needs_missing' requires 'corpus_not_installed', which no "
    "installed plugin registers: it can never be used until one is registered (a pipeline holding it pulls in what it "
    "requires)"
)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_bad_input_exits_2_with_one_message_and_writes_nothing(case, corpus_plugins, tmp_path, monkeypatch):
    work = tmp_path / "corpus"
    shutil.copytree(CORPUS, work)
    monkeypatch.chdir(work)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.delenv("FXPASSES_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    forget_modules("corpus_models", "corpus_broken_models")
    before = snapshot(work)
    path = work / case["file"]
    if path.suffix == ".pipeline":
        target = ["--pipeline", path.read_text()]
    else:
        target = [str(path)]
    args = [case["command"], *target]
    out = tmp_path / "out"
    if case["command"] == "run":
        args += ["--repeat", "1"] + ([] if case.get("keep_output") else ["-o", str(out)])
    args += case.get("args", [])

    r = CliRunner().invoke(cli, args)

    assert r.exit_code == 2, f"exit {r.exit_code}:\n{r.output}"
    assert r.exception is None or isinstance(r.exception, SystemExit)
    assert "Traceback" not in r.output
    assert "error: unexpected" not in r.output  # not an internal error
    assert r.output.count(CYCLE_WARNING) <= 1 and r.output.count(REQUIRES_WARNING) <= 1, r.output
    lines = [line for line in r.output.rstrip("\n").splitlines() if line not in (CYCLE_WARNING, REQUIRES_WARNING)]
    errors = [line for line in lines if line.startswith("error:") or line.startswith("Error:")]
    assert len(errors) == 1 and (lines[0] == errors[0] or lines[0].startswith("Usage:")), r.output
    assert not any(line.startswith("warning:") for line in lines), r.output
    assert case["expect"] in r.output, f"expected {case['expect']!r} in:\n{r.output}"
    assert not out.exists()
    assert snapshot(work) == before, "the run wrote files"
    assert os.listdir(tmp_path) == ["corpus"]


@pytest.mark.parametrize("capture", ["export", "dynamo"])
def test_capture_failure_prints_one_line_in_a_real_process(capture, tmp_path):
    """torch's fake-tensor logger writes a traceback to the process's stderr (which CliRunner
    does not see): a real `fxpasses run` must print only the one error line."""
    import subprocess

    (tmp_path / "m.toml").write_text(
        'pipeline = "eliminate_dead_code"\n[model]\n'
        f'factory = "{(CORPUS / "model" / "corpus_models.py").as_posix()}:convnet"\n'
        f'capture = "{capture}"\ninputs = [{{shape = [1, 7, 5]}}]\n'
    )
    r = subprocess.run(
        [str(Path(sys.executable).parent / "fxpasses"), "run", "m.toml", "--no-save"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and "fake_tensor.py" not in r.stderr, r.stderr
    assert r.stderr.startswith("error: ") and r.stderr.count("error:") == 1, r.stderr
