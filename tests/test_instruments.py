"""Instruments: pluggy hooks around passes, and the print/time features built on them."""

from __future__ import annotations

import io

import pytest

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


class _Boom(fxpasses.NodePass):
    """Fails (after changing an add's argument)."""

    name = "boom"

    @fxpasses.on("add")
    def add(self, node, ctx):
        node.args = (node.args[0], 5)
        raise RuntimeError("bad")


def test_pass_failed_hook_sees_the_restored_graph():
    seen = []

    class Watcher:
        @fxpasses.hookimpl
        def fxpasses_pass_failed(self, pass_name, gm, error):
            seen.append((pass_name, error.rolled_back, [n.args for n in gm.graph.nodes if n.name == "add"]))

    reg = fxpasses.Registry(autoload=False)
    reg.register(_Boom)
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


def test_print_after_and_print_changed_say_what_became_of_a_failed_pass():
    """A failed pass printed nothing under print-after / print-changed (a debugging-workflow
    check): rolled back, one line says so; kept (on_error="raise"), the graph it left and the
    diff of it are printed."""
    reg = fxpasses.Registry(autoload=False)
    reg.register(_Boom)
    out = io.StringIO()
    with pytest.raises(fxpasses.PassFailedError):
        Pipeline(["boom"], registry=reg).run(
            torch.fx.symbolic_trace(Net()), [torch.ones(2)], instruments=[PrintAfter(["boom"], file=out), PrintChanged(file=out)]
        )
    assert sorted(out.getvalue().splitlines()) == [  # (pluggy calls the last registered first)
        "# *** boom failed in the pass (RuntimeError: bad) and was rolled back: no change kept ***",
        "# *** no graph after boom: it failed in the pass (RuntimeError: bad) and was rolled back; the graph is as before it ***",
    ]
    out = io.StringIO()
    with pytest.raises(fxpasses.PassFailedError):
        Pipeline(["boom"], registry=reg, on_error="raise").run(
            torch.fx.symbolic_trace(Net()), [torch.ones(2)], instruments=[PrintAfter(file=out), PrintChanged(file=out)]
        )
    text = out.getvalue()
    after = text.split("# *** graph after boom, which failed in the pass (RuntimeError: bad), as it left it (5 nodes) ***\n")[1]
    assert "    add = dropout + 5;  dropout = None\n" in after.split("# ***")[0]
    assert '# *** boom failed in the pass (RuntimeError: bad); what it left (on_error="raise") ***\n' in text
    assert "-    add = dropout + 0;  dropout = None\n+    add = dropout + 5;  dropout = None\n" in text
    # a pass named in neither list prints nothing
    out = io.StringIO()
    with pytest.raises(fxpasses.PassFailedError):
        Pipeline(["boom"], registry=reg).run(torch.fx.symbolic_trace(Net()), [torch.ones(2)], instruments=[PrintAfter(["other"], file=out)])
    assert out.getvalue() == ""


def test_print_changed_says_when_a_pass_changed_the_module_but_not_its_code():
    """A pass that only removed a submodule printed the header and no diff (a new-user check)."""

    out = io.StringIO()
    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    gm.add_submodule("spare", torch.nn.Linear(2, 2))  # never called
    Pipeline.from_string("eliminate_dead_code").run(gm, [torch.ones(2)], instruments=[PrintChanged(file=out)])
    assert out.getvalue().splitlines() == [
        "# *** eliminate_dead_code changed the graph (3 -> 3 nodes) ***",
        "# (the graph's code is unchanged: it changed the module's state: removed_parameters=2, removed_submodules=1)",
    ]


def test_time_passes_rows_sorted_and_totals():
    t = TimePasses()
    t._add("a", 0.002)
    t._add("b", 0.006)
    t._add("a", 0.002)
    rows = t.rows()
    assert [(n, r) for n, r, _, _ in rows] == [("b", 1), ("a", 2)]
    assert abs(rows[0][3] - 0.6) < 1e-9
    assert "total: 10.00 ms" in t.table()


def test_time_passes_counts_a_failed_and_a_skipped_pass():
    """A failed or skipped pass's time was left out (`eliminate_dead_code 1 0.10 100.0%` beside
    a skipped pass that took longer: a new-user check): it counts from its start to the
    failure."""
    import time as _time

    class Slow(fxpasses.GraphPass):
        """Takes 30 ms, then fails."""

        name = "slow_boom"

        def run(self, gm, ctx):
            _time.sleep(0.03)
            raise RuntimeError("late")

    reg = fxpasses.Registry()
    reg.register(Slow)
    t = TimePasses()
    Pipeline(["slow_boom", "eliminate_dead_code"], registry=reg, on_error="skip").run(
        torch.fx.symbolic_trace(Net()), [torch.ones(2)], instruments=[t]
    )
    rows = {n: (r, s) for n, r, s, _ in t.rows()}
    assert set(rows) == {"slow_boom", "eliminate_dead_code"} and rows["slow_boom"][0] == 1
    assert rows["slow_boom"][1] >= 0.03 and t.rows()[0][0] == "slow_boom"
    t2 = TimePasses()
    with pytest.raises(fxpasses.PassFailedError):
        Pipeline(["slow_boom"], registry=reg).run(torch.fx.symbolic_trace(Net()), [torch.ones(2)], instruments=[t2])
    assert t2.rows()[0][:2] == ("slow_boom", 1) and t2.rows()[0][2] >= 0.03


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
        "remove_dropout", "simplify_algebra", "fold_constants", "fuse_conv_bn",
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


class _Exits:
    @fxpasses.hookimpl
    def fxpasses_before_pass(self, pass_name):
        if pass_name == "eliminate_dead_code":
            import sys

            sys.exit(3)

    @fxpasses.hookimpl
    def fxpasses_pass_failed(self, pass_name):
        raise SystemExit("from pass_failed")


def test_an_instrument_calling_sys_exit_is_a_broken_plugin_not_the_end_of_the_run(recwarn):
    """`sys.exit()` in a plugin's instrumentation hook ended the whole run (SystemExit passed
    the `except Exception` that makes a raising hook a broken plugin; a new-user check).
    KeyboardInterrupt still ends it: that is the user's."""
    reg = fxpasses.Registry()
    reg.register_plugin(_Exits(), name="exiting-instrumentation")
    gm = torch.fx.symbolic_trace(Net())
    report = Pipeline.from_string("remove_dropout,eliminate_dead_code", registry=reg).run(gm, [torch.ones(2)])
    assert [p.status for p in report.passes] == ["ok", "ok"]
    warned = [str(w.message) for w in recwarn if isinstance(w.message, fxpasses.errors.PluginWarning)]
    assert len(warned) == 1 and "its fxpasses_before_pass hook raised SystemExit: 3" in warned[0], warned

    class Interrupts:
        @fxpasses.hookimpl
        def fxpasses_before_pass(self):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Pipeline.from_string("remove_dropout", registry=fxpasses.Registry()).run(
            torch.fx.symbolic_trace(Net()), [torch.ones(2)], instruments=[Interrupts()]
        )


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


# ---------------------------------------------------------------------------- checked instruments


class _Recorder:
    """A healthy instrument that records every hook call (given next to a bad one: it must
    never be called, the bad one being reported before any pass runs)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    @fxpasses.hookimpl
    def fxpasses_before_pass(self, pass_name, gm, ctx):
        self.calls.append(("before", pass_name))

    @fxpasses.hookimpl
    def fxpasses_after_pass(self, pass_name, gm, ctx, report):
        self.calls.append(("after", pass_name))


def _bad_instrument_error(instruments):
    """Run remove_dropout with ``instruments`` (and a recorder); the PluginError, after
    checking that no pass ran and the graph is as given."""
    gm = torch.fx.symbolic_trace(Net())
    code = gm.code
    recorder = _Recorder()
    given = instruments if isinstance(instruments, list) else [instruments]
    with pytest.raises(fxpasses.errors.PluginError) as info:
        Pipeline.from_string("remove_dropout").run(gm, [torch.ones(2)], instruments=[recorder, *given])
    assert recorder.calls == []
    assert gm.code == code and any(n.target is torch.nn.functional.dropout for n in gm.graph.nodes)
    return str(info.value)


class _Misspelled:
    def after_pas(self, pass_name, gm, ctx, report):
        pass

    def table(self):  # an ordinary method, far from every hook name: no error
        return ""

    def _helper(self):  # private: never looked at
        pass


def test_a_misspelled_hook_method_is_an_error_naming_the_hook_it_could_mean():
    msg = _bad_instrument_error(_Misspelled())
    assert msg.startswith("plugin instrument _Misspelled: bad instrument hook(s):\n")
    assert "after_pas is not an fxpasses hook; did you mean 'fxpasses_after_pass'?" in msg
    assert "table" not in msg and "_helper" not in msg


class _MarkedTypo:
    @fxpasses.hookimpl
    def fxpasses_pass_fail(self, pass_name, gm, error):
        pass


class _Unmarked:
    def fxpasses_before_pass(self, pass_name, gm, ctx):
        pass


class _RegistrationHook:
    @fxpasses.hookimpl
    def fxpasses_register_passes(self, register):
        pass


def test_marked_unknown_unmarked_and_registration_hooks_on_an_instrument_are_errors():
    msg = _bad_instrument_error(_MarkedTypo())
    assert "plugin instrument _MarkedTypo" in msg
    assert (
        "fxpasses_pass_fail is marked @fxpasses.hookimpl but no fxpasses hook has that name; "
        "did you mean 'fxpasses_pass_failed'?" in msg
    )
    msg = _bad_instrument_error(_Unmarked())
    assert "fxpasses_before_pass is named after the hook but not marked @fxpasses.hookimpl" in msg
    msg = _bad_instrument_error(_RegistrationHook())
    assert "fxpasses_register_passes is called only for plugins a registry loads" in msg


class _WrongSignature:
    @fxpasses.hookimpl
    def fxpasses_after_pass(self, pass_nam, gm):
        pass


class _Defaulted:
    @fxpasses.hookimpl
    def fxpasses_after_pass(self, pass_name, gm, ctx, report=None):
        pass


def test_a_hook_argument_the_hook_does_not_pass_is_named_with_the_allowed_ones():
    """Not pluggy's PluginValidationError naming a numeric plugin id."""
    msg = _bad_instrument_error(_WrongSignature())
    assert "plugin instrument _WrongSignature" in msg
    assert (
        "fxpasses_after_pass(pass_nam, gm) takes 'pass_nam', which the hook does not pass "
        "(did you mean 'pass_name' for 'pass_nam'?); a fxpasses_after_pass implementation may take "
        "any of: pass_name, gm, ctx, report" in msg
    )
    msg = _bad_instrument_error(_Defaulted())
    assert "hook fxpasses_after_pass gives a default to report" in msg


def test_objects_that_are_no_instrument_are_errors():
    msg = _bad_instrument_error(object())
    assert msg.startswith("plugin instrument object: <object object at ")
    assert "is not an instrument: it has no @fxpasses.hookimpl method fxpasses_before_pass" in msg
    msg = _bad_instrument_error("print-changed")
    assert msg.startswith("plugin instrument str: 'print-changed' is not an instrument")
    msg = _bad_instrument_error(TimePasses)
    assert msg == "plugin instrument class TimePasses: is a class, not an instance: give TimePasses(...) in instruments=[...]"
    timer = TimePasses()
    msg = _bad_instrument_error([timer, timer])
    assert msg == "plugin instrument TimePasses: is given twice in instruments=[...]; give each instrument once"


def test_one_instrument_may_be_given_without_a_list():
    timer = TimePasses()
    gm = torch.fx.symbolic_trace(Net())
    Pipeline.from_string("remove_dropout,eliminate_dead_code").run(gm, [torch.ones(2)], instruments=timer)
    assert sorted(timer.runs.items()) == [("eliminate_dead_code", 1), ("remove_dropout", 1)]
    gm = torch.fx.symbolic_trace(Net())
    fxpasses.run(gm, "remove_dropout", [torch.ones(2)], instruments=(TimePasses(), PrintChanged(file=io.StringIO())))


def test_the_built_in_instruments_pass_the_check(tmp_path):
    from fxpasses.instruments import Progress
    from fxpasses.reproducer import ReproducerWriter

    reg = fxpasses.Registry(autoload=False)
    with Progress(file=io.StringIO()) as progress:
        for inst in (PrintAfter(), PrintChanged(), TimePasses(), progress, ReproducerWriter(tmp_path, None)):
            reg.check_instrument(inst)  # raises on any problem


# ---------------------------------------------------------------------------- instruments observe


def _relu_after_the_output_value(gm):
    out = next(n for n in gm.graph.nodes if n.op == "output")
    with gm.graph.inserting_before(out):
        relu = gm.graph.call_function(torch.relu, (out.args[0],))
    out.args = (relu,)


class _AfterEditor:
    @fxpasses.hookimpl
    def fxpasses_after_pass(self, pass_name, gm, ctx, report):
        if pass_name == "remove_dropout":
            _relu_after_the_output_value(gm)


class _BeforeEraser:
    @fxpasses.hookimpl
    def fxpasses_before_pass(self, pass_name, gm, ctx):
        for n in list(gm.graph.nodes):
            if n.target is torch.nn.functional.dropout:
                n.replace_all_uses_with(n.args[0])
                gm.graph.erase_node(n)


class _OutputRewirer:
    """Changes only the output's arguments (no node hook of torch.fx reports it)."""

    @fxpasses.hookimpl
    def fxpasses_after_pass(self, pass_name, gm, ctx, report):
        out = next(n for n in gm.graph.nodes if n.op == "output")
        out.args = (next(iter(gm.graph.nodes)),)


AFTER_DROPOUT = "def forward(self, x):\n    mul = x * 1;  x = None\n    add = mul + 0;  mul = None\n    return add"


class _EveryPassEditor:
    """Edits the graph after every pass (counting its calls)."""

    def __init__(self):
        self.calls = 0

    @fxpasses.hookimpl
    def fxpasses_after_pass(self, pass_name, gm, ctx, report):
        self.calls += 1
        _relu_after_the_output_value(gm)


def _editing_warnings(record):
    return [str(w.message) for w in record if issubclass(w.category, fxpasses.errors.PluginWarning)]


@pytest.mark.parametrize("verify", ["lint", "numeric"])
def test_an_instrument_that_edits_the_graph_is_named_its_edit_undone_and_the_run_goes_on(verify):
    """Not the next pass blamed by numeric verification, nor an edit after the last pass left
    unverified: the instrument is named, the graph is what the pass made, and the pipeline
    goes on without that instrument, as after an instrument that raises."""
    recorder = _Recorder()
    gm = torch.fx.symbolic_trace(Net())
    with pytest.warns(fxpasses.errors.PluginWarning) as record:
        report = Pipeline.from_string("remove_dropout,simplify_algebra", verify=verify).run(
            gm, [torch.ones(2)], instruments=[recorder, _AfterEditor()]
        )
    assert _editing_warnings(record) == [
        "plugin instrument _AfterEditor: its fxpasses_after_pass hook changed the graph (after pass "
        "'remove_dropout'): added 1 node(s): %relu; changed 1 node(s): %output. Instruments observe passes "
        "and must not change the graph (write a pass for that: it is verified and rolled back); the graph "
        "was put back as it was before the hook ran; its instrumentation hooks are skipped from now on"
    ]
    assert [p.status for p in report.passes] == ["ok", "ok"]
    assert gm.code.strip() == AFTER_DROPOUT
    assert ("before", "simplify_algebra") in recorder.calls
    gm.graph.lint()
    assert torch.equal(gm(torch.ones(2)), torch.ones(2))


def test_an_instrument_editing_after_every_pass_is_reported_once_and_skipped_after():
    editor = _EveryPassEditor()
    gm = torch.fx.symbolic_trace(Net())
    with pytest.warns(fxpasses.errors.PluginWarning) as record:
        Pipeline.from_string("remove_dropout,simplify_algebra,eliminate_dead_code").run(
            gm, [torch.ones(2)], instruments=editor
        )
    assert editor.calls == 1
    assert len(_editing_warnings(record)) == 1
    assert gm.code.strip() == AFTER_DROPOUT


class _EditThenRaise:
    @fxpasses.hookimpl
    def fxpasses_before_pass(self, pass_name, gm, ctx):
        _relu_after_the_output_value(gm)
        raise ValueError("oops")


def test_an_instrument_that_edits_the_graph_and_raises_is_reported_once():
    """Two warnings came, the first (it raised) not saying the graph was put back (a new-user
    check): one now says both."""
    gm = torch.fx.symbolic_trace(Net())
    with pytest.warns(fxpasses.errors.PluginWarning) as record:
        Pipeline.from_string("remove_dropout").run(gm, [torch.ones(2)], instruments=_EditThenRaise())
    (msg,) = _editing_warnings(record)
    assert msg.startswith(
        "plugin instrument _EditThenRaise: its fxpasses_before_pass hook raised ValueError: oops and changed the "
        "graph (before pass 'remove_dropout'): added 1 node(s): %relu;"
    )
    assert msg.endswith("the graph was put back as it was before the hook ran; its instrumentation hooks are skipped from now on")
    assert gm.code.strip() == AFTER_DROPOUT


def test_an_instrument_that_edits_the_graph_is_an_error_with_a_strict_registry():
    reg = fxpasses.Registry(strict=True)
    gm = torch.fx.symbolic_trace(Net())
    with pytest.raises(fxpasses.errors.PluginError) as info:
        Pipeline.from_string("remove_dropout,simplify_algebra", registry=reg).run(
            gm, [torch.ones(2)], instruments=[_AfterEditor()]
        )
    assert str(info.value) == (
        "plugin instrument _AfterEditor: its fxpasses_after_pass hook changed the graph (after pass "
        "'remove_dropout'): added 1 node(s): %relu; changed 1 node(s): %output. Instruments observe passes "
        "and must not change the graph (write a pass for that: it is verified and rolled back); the graph "
        "was put back as it was before the hook ran"
    )
    assert gm.code.strip() == AFTER_DROPOUT


def test_edits_after_the_last_pass_and_before_a_pass_are_caught():
    gm = torch.fx.symbolic_trace(Net())
    with pytest.warns(fxpasses.errors.PluginWarning, match=r"its fxpasses_after_pass hook changed the graph \(after pass 'remove_dropout'\): its last node %output changed"):
        Pipeline.from_string("remove_dropout").run(gm, [torch.ones(2)], instruments=_OutputRewirer())
    assert gm.code.strip() == AFTER_DROPOUT
    gm = torch.fx.symbolic_trace(Net())
    with pytest.warns(fxpasses.errors.PluginWarning) as record:
        Pipeline.from_string("remove_dropout").run(gm, [torch.ones(2)], instruments=_BeforeEraser())
    assert _editing_warnings(record)[0].startswith(
        "plugin instrument _BeforeEraser: its fxpasses_before_pass hook changed the graph (before pass "
        "'remove_dropout'): erased 1 node(s): %dropout; changed 1 node(s): %add."
    )
    # the eraser's edit was put back, and remove_dropout then removed the dropout itself
    assert gm.code.strip() == AFTER_DROPOUT


def test_a_plugin_whose_instrumentation_hook_edits_the_graph_is_named_by_its_distribution_and_skipped():
    """An installed plugin's mistake does not stop every pipeline of the environment: the
    plugin is named and skipped, and other pipelines run."""
    reg = fxpasses.Registry()
    editor = _EveryPassEditor()
    reg.register_plugin(editor, name="editing-plugin")
    gm = torch.fx.symbolic_trace(Net())
    with pytest.warns(fxpasses.errors.PluginWarning, match=r"^plugin editing-plugin \(entry point .*\): its fxpasses_after_pass hook changed the graph.*skipped from now on$"):
        Pipeline.from_string("remove_dropout", registry=reg).run(gm, [torch.ones(2)])
    assert gm.code.strip() == AFTER_DROPOUT
    gm = torch.fx.symbolic_trace(Net())
    Pipeline.from_string("remove_dropout", registry=reg).run(gm, [torch.ones(2)])
    assert editor.calls == 1
    assert gm.code.strip() == AFTER_DROPOUT


def test_an_instrument_leaves_no_hook_on_the_module():
    gm = torch.fx.symbolic_trace(Net())
    lists = {k: list(getattr(gm, k)) for k in ("_create_node_hooks", "_erase_node_hooks", "_replace_hooks")}
    Pipeline.from_string("remove_dropout").run(gm, [torch.ones(2)], instruments=[_Recorder()])
    assert {k: list(getattr(gm, k)) for k in lists} == lists


class _FailedEditor:
    @fxpasses.hookimpl
    def fxpasses_pass_failed(self, pass_name, gm, error):
        _relu_after_the_output_value(gm)


def test_an_edit_in_pass_failed_is_undone_too():
    reg = fxpasses.Registry(autoload=False)
    reg.register(_Boom)
    gm = torch.fx.symbolic_trace(Net())
    before = gm.code
    with pytest.warns(fxpasses.errors.PluginWarning, match=r"its fxpasses_pass_failed hook changed the graph \(after pass 'boom' failed\): added 1 node\(s\): %relu"):
        report = Pipeline(["boom"], registry=reg, on_error="skip").run(gm, [torch.ones(2)], instruments=[_FailedEditor()])
    assert [p.status for p in report.passes] == ["skipped"]
    assert gm.code == before


def test_a_plugin_of_the_registry_given_as_an_instrument_too_is_an_error_and_none_is_no_instrument():
    timer = TimePasses()
    reg = fxpasses.Registry()
    reg.register_plugin(timer, name="timer")
    pipe = Pipeline.from_string("remove_dropout", registry=reg)
    with pytest.raises(fxpasses.errors.PluginError) as info:
        pipe.run(torch.fx.symbolic_trace(Net()), [torch.ones(2)], instruments=[timer])
    assert str(info.value).startswith(
        "plugin instrument TimePasses: is already a plugin of this registry (as 'timer:timer', through "
        "Registry.register_plugin or an entry point)"
    )
    assert timer.runs == {}
    pipe.run(torch.fx.symbolic_trace(Net()), [torch.ones(2)], instruments=None)
    assert timer.runs == {"remove_dropout": 1}


def test_the_command_line_prints_a_raising_plugin_instrument_as_a_warning_line(tmp_path, monkeypatch):
    """A plugin's instrument raising during `fxpasses run` was shown as Python's warning,
    pointing at click's decorators.py and its source line (found by a new-user check): every
    fxpasses warning a command issues is a `warning: ...` line, as the plugin problems."""
    import importlib
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from dists import forget_modules, make_dist

    site = tmp_path / "site"
    make_dist(
        site,
        "raising-instrument",
        "0.1",
        "fxp_raising_instrument",
        """
        import fxpasses

        @fxpasses.hookimpl
        def fxpasses_before_pass(pass_name, gm, ctx):
            if pass_name == "eliminate_dead_code":
                raise RuntimeError("instrument hook boom")
        """,
    )
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    forget_modules("fxp_raising_instrument")
    cfg = tmp_path / "m.toml"
    cfg.write_text('[model]\nfactory = "fxpasses._example:convnet"\ninputs = [{ shape = [1, 3, 8, 8] }]\n')
    r = CliRunner().invoke(
        cli, ["-p", "raising-instrument", "run", str(cfg), "--pipeline", "remove_dropout,eliminate_dead_code", "--no-save", "--repeat", "1"]
    )
    forget_modules("fxp_raising_instrument")
    assert r.exit_code == 0, r.output
    lines = [line for line in r.stderr.splitlines() if "instrument hook boom" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: plugin raising-instrument 0.1"), r.stderr
    assert "decorators.py" not in r.stderr and "PluginWarning" not in r.stderr
