"""Instruments: pluggy hooks around passes, and the print/time features built on them."""

from __future__ import annotations

import io

import torch
from click.testing import CliRunner

import fxpasses
from fxpasses import Pipeline
from fxpasses.cli import cli
from fxpasses.instruments import PrintAfter, PrintChanged, TimePasses


class Net(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.dropout(x * 1, 0.5, training=False) + 0


def test_hooks_called_in_order_with_reports():
    calls = []

    class Recorder:
        @fxpasses.hookimpl
        def fxpasses_before_pass(self, pass_name, gm, ctx):
            calls.append(("before", pass_name, len(gm.graph.nodes)))

        @fxpasses.hookimpl
        def fxpasses_after_pass(self, pass_name, gm, ctx, report):
            calls.append(("after", pass_name, report.nodes_after, report.changed))

    gm = torch.fx.symbolic_trace(Net())
    Pipeline.from_string("remove_dropout,eliminate_dead_code").run(gm, [torch.ones(2)], instruments=[Recorder()])
    assert calls == [
        ("before", "remove_dropout", 5),
        ("after", "remove_dropout", 4, True),
        ("before", "eliminate_dead_code", 4),
        ("after", "eliminate_dead_code", 4, False),
    ]
    # instruments are active for that run only
    Pipeline.from_string("remove_dropout").run(torch.fx.symbolic_trace(Net()), [torch.ones(2)])
    assert len(calls) == 4


def test_pass_failed_hook_sees_the_restored_graph():
    seen = []

    class Boom(fxpasses.NodePass):
        """Fails."""

        name = "boom"

        @fxpasses.on("add")
        def add(self, node, ctx):
            node.args = (node.args[0], 5)
            raise RuntimeError("bad")

    class Watcher:
        @fxpasses.hookimpl
        def fxpasses_pass_failed(self, pass_name, gm, error):
            seen.append((pass_name, error.rolled_back, [n.args for n in gm.graph.nodes if n.name == "add"]))

    reg = fxpasses.Registry(autoload=False)
    reg.register(Boom)
    gm = torch.fx.symbolic_trace(Net())
    try:
        Pipeline(["boom"], registry=reg).run(gm, [torch.ones(2)], instruments=[Watcher()])
    except fxpasses.PassFailedError:
        pass
    assert len(seen) == 1 and seen[0][:2] == ("boom", True)
    assert seen[0][2][0][1] == 0  # the original literal, not 5


def test_print_changed_diff_and_print_after():
    out = io.StringIO()
    gm = torch.fx.symbolic_trace(Net())
    Pipeline.from_string("remove_dropout,eliminate_dead_code,simplify_algebra").run(
        gm, [torch.ones(2)], instruments=[PrintChanged(file=out), PrintAfter(["simplify_algebra"], file=out)]
    )
    text = out.getvalue()
    assert "# *** remove_dropout changed the graph (5 -> 4 nodes) ***" in text
    assert "-    dropout = torch.nn.functional.dropout(mul, p = 0.5, training = False" in text
    assert "+    add = mul + 0;  mul = None" in text
    assert "eliminate_dead_code changed" not in text  # nothing changed: no diff
    after = text.split("# *** graph after simplify_algebra (4 nodes) ***\n")[1]
    assert after.startswith("def forward(self, x):\n    mul = x * 1")


def test_time_passes_rows_sorted_and_totals():
    t = TimePasses()
    t._add("a", 0.002)
    t._add("b", 0.006)
    t._add("a", 0.002)
    rows = t.rows()
    assert [(n, r) for n, r, _, _ in rows] == [("b", 1), ("a", 2)]
    assert abs(rows[0][3] - 0.6) < 1e-9
    assert "total: 10.00 ms" in t.table()


def test_cli_flags(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["run", "--no-save", "--repeat", "1", "--print-changed", "--time-passes", "--print-after", "fuse_conv_bn"])
    assert r.exit_code == 0, r.output
    assert "# *** fuse_conv_bn changed the graph" in r.output
    assert "# *** graph after fuse_conv_bn" in r.output
    assert "share" in r.output and "total:" in r.output
    r = CliRunner().invoke(cli, ["run", "--no-save", "--print-after", "fuse_conv"])
    assert r.exit_code == 2 and "did you mean 'fuse_conv_bn'" in r.output


def test_progress_counts_passes():
    from fxpasses.instruments import Progress

    out = io.StringIO()
    gm = torch.fx.symbolic_trace(Net())
    with Progress(total=3, file=out) as progress:
        Pipeline.from_string("remove_dropout,simplify_algebra,eliminate_dead_code").run(
            gm, [torch.ones(2)], instruments=[progress]
        )
        assert progress.completed == 3


def test_cli_print_after_a_list_and_print_after_all(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(
        cli, ["run", "--no-save", "--repeat", "1", "--print-after", "remove_dropout, eliminate_dead_code"]
    )
    assert r.exit_code == 0, r.output
    printed = [line for line in r.output.splitlines() if line.startswith("# *** graph after ")]
    assert [line.split()[4] for line in printed] == ["remove_dropout", "eliminate_dead_code"]
    r = CliRunner().invoke(cli, ["run", "--no-save", "--repeat", "1", "--print-after-all"])
    assert r.exit_code == 0, r.output
    printed = [line.split()[4] for line in r.output.splitlines() if line.startswith("# *** graph after ")]
    table = [line.split()[0] for line in r.output.splitlines() if line.split() and line.split()[0] in printed]
    assert printed == [
        "remove_dropout", "fuse_conv_bn", "simplify_algebra", "fold_constants",
        "eliminate_common_subexpressions", "eliminate_dead_code",
    ]
    assert set(table) == set(printed)
    r = CliRunner().invoke(cli, ["run", "--no-save", "--print-after", "remove_dropout,fold_constant"])
    assert r.exit_code == 2 and "--print-after: unknown pass 'fold_constant'; did you mean 'fold_constants'?" in r.output


class _Broken:
    """An instrument whose after-pass hook raises (a buggy plugin)."""

    def __init__(self) -> None:
        self.calls = 0

    @fxpasses.hookimpl
    def fxpasses_before_pass(self, pass_name, gm, ctx):
        self.calls += 1

    @fxpasses.hookimpl
    def fxpasses_after_pass(self, pass_name, gm, ctx, report):
        raise ValueError("after_pass hook blew up")


def test_an_instrument_that_raises_is_reported_once_and_skipped(recwarn):
    """A plugin's instrumentation hook that raises is a broken plugin: one PluginWarning naming
    it, its hooks skipped from then on, and the pipeline runs to the end as without it."""
    reg = fxpasses.Registry()
    broken = _Broken()
    reg.register_plugin(broken, name="broken-instrumentation")
    gm = torch.fx.symbolic_trace(Net())
    report = Pipeline.from_string("remove_dropout,eliminate_dead_code", registry=reg).run(gm, [torch.ones(2)])
    assert [p.status for p in report.passes] == ["ok", "ok"] and report["remove_dropout"].changed
    assert not any(n.target is torch.nn.functional.dropout for n in gm.graph.nodes)
    warned = [str(w.message) for w in recwarn if isinstance(w.message, fxpasses.errors.PluginWarning)]
    assert len(warned) == 1, warned
    assert warned[0].startswith("plugin broken-instrumentation")
    assert "its fxpasses_after_pass hook raised ValueError: after_pass hook blew up" in warned[0]
    assert broken.calls == 1  # muted after the first failure: not called before the second pass


def test_an_instrument_that_raises_is_an_error_with_a_strict_registry():
    reg = fxpasses.Registry(strict=True)
    gm = torch.fx.symbolic_trace(Net())
    try:
        Pipeline.from_string("remove_dropout", registry=reg).run(gm, [torch.ones(2)], instruments=[_Broken()])
    except fxpasses.errors.PluginError as exc:
        assert str(exc).startswith("plugin instrument _Broken: its fxpasses_after_pass hook raised ValueError")
        assert isinstance(exc.__cause__, ValueError)
    else:
        raise AssertionError("no PluginError")


class _Healthy:
    def __init__(self) -> None:
        self.calls: list[str] = []

    @fxpasses.hookimpl
    def fxpasses_after_pass(self, pass_name, gm, ctx, report):
        self.calls.append(pass_name)


def test_a_muted_instrument_never_silences_a_later_healthy_one(recwarn):
    """Broken instruments are skipped by identity; a freed one's id can be given to a new
    object, which must still be called."""
    import gc

    reg = fxpasses.Registry()
    pipe = Pipeline.from_string("remove_dropout", registry=reg)
    for _ in range(20):
        pipe.run(torch.fx.symbolic_trace(Net()), [torch.ones(2)], instruments=[_Broken()])
        gc.collect()
        healthy = _Healthy()
        pipe.run(torch.fx.symbolic_trace(Net()), [torch.ones(2)], instruments=[healthy])
        assert healthy.calls == ["remove_dropout"]


def test_strict_reports_a_broken_instrument_every_time():
    reg = fxpasses.Registry(strict=True)
    broken = _Broken()
    reg.register_plugin(broken, name="broken")
    pipe = Pipeline.from_string("remove_dropout", registry=reg)
    for _ in range(2):
        try:
            pipe.run(torch.fx.symbolic_trace(Net()), [torch.ones(2)])
        except fxpasses.errors.PluginError as exc:
            assert "its fxpasses_after_pass hook raised ValueError" in str(exc) and "skipped" not in str(exc)
        else:
            raise AssertionError("no PluginError")
