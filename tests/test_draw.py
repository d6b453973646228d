"""--draw DIR: Graphviz pictures of the graph before and after each changing pass."""

from __future__ import annotations

import shutil
import sys

import pytest
from click.testing import CliRunner

from fxpasses.cli import cli


def test_draw_writes_before_and_after_for_each_changing_pass(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["run", "--no-save", "--repeat", "1", "--draw", "pics"])
    assert r.exit_code == 0, r.output
    dots = sorted(p.name for p in (tmp_path / "pics").glob("*.dot"))
    # the default pipeline changes the graph in remove_dropout, simplify_algebra, fold_constants,
    # fuse_conv_bn and eliminate_dead_code (CSE finds nothing in the example); the last one
    # only drops parameters no node uses, so its two drawings would be the same: not drawn
    changed = ["remove_dropout", "simplify_algebra", "fold_constants", "fuse_conv_bn"]
    assert dots == sorted(f"{i + 1:02d}_{n}.{w}.dot" for i, n in enumerate(changed) for w in ("before", "after"))
    assert (
        f" files in pics, before and after 4 changing passes: {', '.join(changed)}; changed the graph but "
        "not its drawing, not drawn: eliminate_dead_code"
    ) in r.stderr
    before = (tmp_path / "pics" / "04_fuse_conv_bn.before.dot").read_text()
    after = (tmp_path / "pics" / "04_fuse_conv_bn.after.dot").read_text()
    assert before.startswith("digraph before_fuse_conv_bn {") and "batch_norm" in before
    assert "batch_norm" not in after
    svgs = list((tmp_path / "pics").glob("*.svg"))
    if shutil.which("dot"):
        assert len(svgs) == len(dots)
    else:
        assert svgs == [] and "drew 8 .dot files in pics" in r.stderr
        assert r.stderr.splitlines()[-1].endswith("; install Graphviz's dot program (apt install graphviz) for .svg drawings too")
    # files are numbered by the plan's steps, as `fxpasses check` numbers them (they were
    # numbered among the drawn passes only: 01_remove_dropout here)
    r = CliRunner().invoke(cli, ["run", "--no-save", "--repeat", "1", "--draw", "pics2", "--pipeline", "eliminate_common_subexpressions,remove_dropout"])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (tmp_path / "pics2").glob("*.dot")) == ["02_remove_dropout.after.dot", "02_remove_dropout.before.dot"]


def test_draw_without_pydot_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "pydot", None)  # as if not installed
    r = CliRunner().invoke(cli, ["run", "--no-save", "--draw", "pics"])
    assert r.exit_code == 2
    assert "pip install 'fxpasses[draw]'" in r.output
    assert not (tmp_path / "pics").exists()


def test_unwritable_draw_directory_is_reported_before_any_work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    r = CliRunner().invoke(cli, ["run", "--no-save", "--draw", "afile/pics"])
    assert r.exit_code == 2
    assert "cannot write the drawing directory afile/pics" in r.output
    assert "model:" not in r.output  # nothing ran


@pytest.mark.parametrize("flag", ["--draw", "--reproducer", "-o"])
def test_directory_access_allows_but_mkdir_refuses_is_reported_before_any_work(flag, tmp_path, monkeypatch):
    """As root, access() says /proc is writable; making a directory there fails."""
    monkeypatch.chdir(tmp_path)
    args = ["run", flag, "/proc/fxpasses-test/out"] + (["--no-save"] if flag != "-o" else [])
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2, r.output
    what = {"--draw": "drawing", "--reproducer": "reproducer", "-o": "output"}[flag]
    assert f"cannot write the {what} directory /proc/fxpasses-test/out" in r.output
    assert "model:" not in r.output  # nothing ran


def test_a_reused_draw_directory_loses_the_earlier_runs_drawings(tmp_path, monkeypatch):
    """`--draw DIR` into a folder an earlier run drew into kept that run's drawings beside the
    new ones (01_remove_dropout.* and 01_fuse_conv_bn.* side by side), without a word, and a
    run that drew nothing said "nothing written to DIR" while the folder still held drawings
    (a new-user check). The earlier drawings (files named as --draw names them, nothing else)
    are now removed when the run starts, and a warning line says how many."""
    monkeypatch.chdir(tmp_path)
    per_drawing = 2 if shutil.which("dot") else 1  # (.dot, and .svg with Graphviz)

    def draw(pipeline):
        r = CliRunner().invoke(cli, ["run", "--no-save", "--repeat", "1", "--draw", "pics", "--pipeline", pipeline])
        assert r.exit_code == 0, r.output
        return r, sorted(p.name for p in (tmp_path / "pics").iterdir())

    r, files = draw("remove_dropout,fuse_conv_bn")
    assert "warning:" not in r.stderr, r.stderr  # (nothing earlier)
    assert [f for f in files if f.endswith(".dot")] == [
        "01_remove_dropout.after.dot", "01_remove_dropout.before.dot", "02_fuse_conv_bn.after.dot", "02_fuse_conv_bn.before.dot",
    ]
    # the user's own files there stay, a folder named like a drawing too
    (tmp_path / "pics" / "notes.txt").write_text("mine")
    (tmp_path / "pics" / "01_mine.dot").write_text("digraph mine {}")
    (tmp_path / "pics" / "09_kept.before.dot").mkdir()
    mine = ["01_mine.dot", "09_kept.before.dot", "notes.txt"]
    r, files = draw("fuse_conv_bn")
    n = 4 * per_drawing
    assert f"warning: pics: removed {n} drawings an earlier run wrote there (its NN_<pass>.before/.after/.failed .dot and .svg files)" in r.stderr.splitlines(), r.stderr
    assert [f for f in files if f.endswith(".dot")] == ["01_fuse_conv_bn.after.dot", "01_fuse_conv_bn.before.dot", *mine[:2]]
    assert sorted(set(files) - {f for f in files if f.startswith("01_fuse_conv_bn.")}) == mine
    # a run that draws nothing: the folder holds no drawing, as its message says
    r, files = draw("eliminate_common_subexpressions")
    n = 2 * per_drawing
    lines = r.stderr.splitlines()
    assert f"warning: pics: removed {n} drawings an earlier run wrote there (its NN_<pass>.before/.after/.failed .dot and .svg files)" in lines, r.stderr
    assert "--draw: no pass changed the graph's drawing, nothing drawn (nothing written to pics)" in lines, r.stderr
    assert files == mine
    assert (tmp_path / "pics" / "notes.txt").read_text() == "mine"
    r, files = draw("eliminate_common_subexpressions")  # nothing earlier left: no warning
    assert "warning:" not in r.stderr and files == mine, r.stderr


def test_draw_says_what_became_of_a_failed_pass_and_draws_what_it_left_under_raise(planted_site, tmp_path, monkeypatch):
    """`--draw` on a run whose pass failed printed no summary at all (the failure path left it
    out), and the failed pass was not drawn even under `--on-error raise`, where the graph it
    left is kept for debugging. The summary now comes on a failed run too and names the failed
    pass: rolled back, it is not drawn (nothing it did stayed); under raise its graph before
    and the graph it left are drawn (NN_<pass>.before/.failed.dot)."""
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "fx.toml"
    cfg.write_text(
        'pipeline = "remove_dropout,planted{wrong_at=1}"\nverify = "numeric"\n[model]\n'
        'factory = "fxpasses._example:convnet"\ninputs = [{ shape = [1, 3, 8, 8] }]\n'
    )
    run = ["run", str(cfg), "--no-save", "--repeat", "1", "--draw", "pics"]
    r = CliRunner().invoke(cli, run)
    assert r.exit_code == 1, r.output
    dots = sorted(p.name for p in (tmp_path / "pics").glob("*.dot"))
    assert dots == ["01_remove_dropout.after.dot", "01_remove_dropout.before.dot"]
    lines = r.stderr.splitlines()
    summary = [line for line in lines if line.startswith("drew ")]
    assert len(summary) == 1 and summary[0].split(" files in pics")[1].startswith(
        ", before and after 1 changing pass: remove_dropout; planted failed: rolled back, not drawn"
    ), r.stderr
    assert any(line.startswith("error: pass 'planted' failed") for line in lines), r.stderr
    r = CliRunner().invoke(cli, [*run, "--on-error", "raise"])
    assert r.exit_code == 1, r.output
    dots = sorted(p.name for p in (tmp_path / "pics").glob("*.dot"))
    assert dots == [
        "01_remove_dropout.after.dot", "01_remove_dropout.before.dot", "02_planted.before.dot", "02_planted.failed.dot",
    ]
    assert "; planted failed: drawn as it left the graph" in r.stderr, r.stderr
    before = (tmp_path / "pics" / "02_planted.before.dot").read_text()
    left = (tmp_path / "pics" / "02_planted.failed.dot").read_text()
    assert before.startswith("digraph before_planted {") and left.startswith("digraph failed_planted {")
    # the planted pass replaced one node by its first argument: one node fewer in what it left
    assert left.count("[label=") == before.count("[label=") - 1
    # skipped (on_error = "skip"): the run goes on and its summary names the failed pass
    r = CliRunner().invoke(cli, [*run, "--on-error", "skip"])
    assert r.exit_code == 0, r.output
    assert "; planted failed: rolled back, not drawn" in r.stderr, r.stderr
    assert not (tmp_path / "pics" / "02_planted.failed.dot").exists()  # (the earlier run's removed)
