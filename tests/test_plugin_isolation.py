"""Plugin isolation and control through the command line, with real broken distributions.

Each distribution is a module plus a ``*.dist-info`` folder (``dists.make_dist``) on sys.path:
``importlib.metadata`` finds its entry points as it finds a pip-installed package's.
"""

from __future__ import annotations

import importlib
import json
import re

import pytest
from click.testing import CliRunner

import fxpasses
from fxpasses import Registry
from fxpasses.cli import cli

from dists import forget_modules, good_pass_source, make_dist

BROKEN = {
    # distribution: (version, module, source, what the report says)
    "import-broken": ("1.1", "fxp_importbroken", "raise ImportError('no module named missing_dep')\n", "import failed: ImportError: no module named missing_dep"),
    "hook-raises": (
        "1.2",
        "fxp_hookraises",
        """
        import fxpasses
        @fxpasses.hookimpl
        def fxpasses_register_passes(register):
            raise RuntimeError("cannot register today")
        """,
        "fxpasses_register_passes raised RuntimeError: cannot register today",
    ),
    "name-taken": (
        "1.3",
        "fxp_nametaken",
        good_pass_source("eliminate_dead_code", "Claims a built-in name."),
        "pass 'eliminate_dead_code' (fxp_nametaken.EliminateDeadCodePass) skipped: the name is taken by the built-in pass of fxpasses",
    ),
    "bad-options": (
        "1.4",
        "fxp_badoptions",
        """
        import fxpasses
        class P(fxpasses.GraphPass):
            "Options that are not a pydantic model."
            name = "bad_options_pass"
            Options = dict
            def run(self, gm, ctx):
                return False
        class Q(fxpasses.GraphPass):
            "A fine pass next to it."
            name = "fine_sibling"
            def run(self, gm, ctx):
                return False
        @fxpasses.hookimpl
        def fxpasses_register_passes(register):
            register(P)
            register(Q)
        """,
        "pass 'bad_options_pass' (fxp_badoptions.P): Options must be a pydantic BaseModel subclass",
    ),
}
MODULES = [v[1] for v in BROKEN.values()] + ["fxp_healthy", "fxp_rival_a", "fxp_rival_b"]


@pytest.fixture
def site(tmp_path, monkeypatch):
    d = tmp_path / "site"
    for dist, (version, module, source, _) in BROKEN.items():
        make_dist(d, dist, version, module, source)
    make_dist(d, "healthy", "2.0", "fxp_healthy", good_pass_source("healthy_pass"))
    forget_modules(*MODULES)
    monkeypatch.syspath_prepend(str(d))
    monkeypatch.delenv("FXPASSES_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.chdir(tmp_path)
    importlib.invalidate_caches()
    yield d
    forget_modules(*MODULES)
    importlib.invalidate_caches()


def invoke(*args, env=None):
    return CliRunner().invoke(cli, list(args), env=env)


def warnings_of(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("warning: plugin ")]


def assert_each_broken_reported_once(output: str) -> None:
    lines = warnings_of(output)
    for dist, (version, _, _, what) in BROKEN.items():
        mine = [line for line in lines if line.startswith(f"warning: plugin {dist} {version}")]
        assert len(mine) == 1, (dist, output)
        assert what in mine[0], (what, mine[0])
    assert len(lines) == len(BROKEN), output


def test_list_reports_each_broken_plugin_once_and_lists_the_rest(site):
    r = invoke("list")
    assert r.exit_code == 0, r.output
    assert_each_broken_reported_once(r.output)
    rows = {line.split()[0]: line for line in r.output.splitlines() if line.strip() and not line.startswith("warning")}
    assert "healthy 2.0" in rows["healthy_pass"]
    assert "fxpasses 0.1.0" in rows["eliminate_dead_code"]  # the built-in keeps its name
    assert "bad-options 1.4" in rows["fine_sibling"]  # the bad pass's sibling still registers
    assert "bad_options_pass" not in rows
    assert "Traceback" not in r.output


def test_check_and_run_work_with_broken_plugins_installed(site):
    r = invoke("check", "--pipeline", "eliminate_dead_code,healthy_pass,fine_sibling,count_ops")
    assert r.exit_code == 0, r.output
    assert_each_broken_reported_once(r.output)
    assert "OK, 4 passes" in r.output
    r = invoke("run", "--pipeline", "remove_dropout,fuse_conv_bn,healthy_pass,eliminate_dead_code", "--no-save", "--repeat", "1")
    assert r.exit_code == 0, r.output
    assert_each_broken_reported_once(r.output)
    assert re.search(r"eliminate_dead_code\s+ok", r.output) and re.search(r"healthy_pass\s+ok", r.output)


@pytest.mark.parametrize("how", ["flag", "flag after the command", "config"])
def test_strict_mode_makes_the_first_broken_plugin_an_error(site, tmp_path, how):
    if how == "flag":
        r = invoke("--strict-plugins", "check", "--pipeline", "eliminate_dead_code")
    elif how == "flag after the command":
        r = invoke("check", "--pipeline", "eliminate_dead_code", "--strict-plugins")
    else:
        cfg = tmp_path / "strict.toml"
        cfg.write_text('pipeline = "eliminate_dead_code"\n[plugins]\nstrict = true\n')
        r = invoke("check", str(cfg))
    assert r.exit_code == 2, r.output
    errors = [line for line in r.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and len(r.output.strip().splitlines()) == 1, r.output
    # distributions load in name order: bad-options is the first broken one
    assert errors[0].startswith("error: plugin bad-options 1.4 (entry point bad-options = fxp_badoptions): pass 'bad_options_pass'")
    assert "Traceback" not in r.output


@pytest.mark.parametrize("how", ["flag", "config"])
def test_disable_selected_plugins(site, tmp_path, how):
    names = ["import-broken", "hook_raises", "Name_Taken"]  # distribution or entry point names, any spelling
    if how == "flag":
        args = [a for n in names for a in ("-p", f"no:{n}")] + ["check", "--pipeline", "healthy_pass"]
    else:
        cfg = tmp_path / "disable.toml"
        cfg.write_text('pipeline = "healthy_pass"\n[plugins]\ndisable = ["import-broken", "hook_raises", "name-taken"]\n')
        args = ["check", str(cfg)]
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    lines = warnings_of(r.output)
    assert len(lines) == 1 and lines[0].startswith("warning: plugin bad-options 1.4"), r.output


@pytest.mark.parametrize("how", ["flag", "config"])
def test_autoload_disabled_loads_only_builtins_and_named_plugins(site, tmp_path, how):
    env = {"FXPASSES_DISABLE_PLUGIN_AUTOLOAD": "1"}
    r = invoke("check", "--pipeline", "eliminate_dead_code", env=env)
    assert r.exit_code == 0 and warnings_of(r.output) == [], r.output
    r = invoke("check", "--pipeline", "healthy_pass", env=env)
    assert r.exit_code == 2 and "unknown pass 'healthy_pass'" in r.output
    assert "installed pass plugins: fxpasses 0.1.0\n" in r.output + "\n"  # only the built-ins loaded
    if how == "flag":
        r = invoke("-p", "healthy", "check", "--pipeline", "healthy_pass,eliminate_dead_code", env=env)
    else:
        cfg = tmp_path / "enable.toml"
        cfg.write_text('pipeline = "healthy_pass,eliminate_dead_code"\n[plugins]\nenable = ["healthy"]\n')
        r = invoke("check", str(cfg), env=env)
    assert r.exit_code == 0, r.output
    assert warnings_of(r.output) == []  # the broken ones were never imported
    assert "OK, 2 passes" in r.output


def test_prefer_gives_a_taken_name_to_the_plugin(site, tmp_path):
    cfg = tmp_path / "prefer.toml"
    cfg.write_text('pipeline = "eliminate_dead_code"\n[plugins]\nprefer = {eliminate_dead_code = "name-taken"}\n')
    r = invoke("check", str(cfg), "--format", "json")
    assert r.exit_code == 0, r.output
    assert not any("name-taken" in w for w in warnings_of(r.output))


def test_a_pass_skipped_for_a_built_in_name_is_in_the_rejected_table_of_list(site):
    r = invoke("list")
    assert r.exit_code == 0, r.output
    reason = (
        "the name is taken by the built-in pass of fxpasses 0.1.0 (choose the plugin's with "
        '`prefer = {eliminate_dead_code = "name-taken"}` in the [plugins] config section, or '
        '`Registry(prefer={"eliminate_dead_code": "name-taken"})` in Python)'
    )
    rejected = r.output.split("\n2 rejected\n", 1)[1]  # bad-options' and this one
    rows = [line.split(None, 4) for line in rejected.splitlines() if line.startswith("name-taken 1.3")]
    assert [row[2:] for row in rows] == [["pass", "eliminate_dead_code", reason]], r.output
    r = invoke("list", "--format", "json")
    (plugin,) = [p for p in json.loads(r.stdout)["plugins"] if p["distribution"] == "name-taken"]
    assert plugin["rejected"] == [{"kind": "pass", "name": "eliminate_dead_code", "reason": reason}]
    chosen = Registry(prefer={"eliminate_dead_code": "name-taken"})  # chosen with prefer: taken, not rejected
    assert chosen.rejected("eliminate_dead_code") == [] and chosen.info("eliminate_dead_code").distribution == "name-taken"


def test_two_plugins_with_one_name_reported_once_naming_both(site):
    make_dist(site, "rival-a", "0.1", "fxp_rival_a", good_pass_source("contested"))
    make_dist(site, "rival-b", "0.2", "fxp_rival_b", good_pass_source("contested"))
    importlib.invalidate_caches()
    r = invoke("check", "--pipeline", "healthy_pass")
    assert r.exit_code == 0, r.output
    contested = [w for w in warnings_of(r.output) if "contested" in w]
    assert contested == [
        "warning: plugin rival-b 0.2 (entry point rival-b = fxp_rival_b): pass 'contested' is also registered by rival-a 0.1; neither is used until "
        '`prefer = {contested = "<distribution>"}` in the [plugins] config section, or '
        '`Registry(prefer={"contested": "<distribution>"})` in Python chooses one'
    ]
    r = invoke("check", "--pipeline", "contested")
    assert r.exit_code == 2
    assert "registered by more than one plugin: rival-a 0.1 and rival-b 0.2" in r.output
    assert "Traceback" not in r.output


def test_an_import_failure_names_the_file_and_line_that_raised(tmp_path, monkeypatch):
    """The type and message alone left the user to find the line (``--strict-plugins
    --traceback`` showed it): the innermost frame outside importlib, or a SyntaxError's place."""
    d = tmp_path / "site"
    make_dist(d, "deep-raise", "0.1", "fxp_deepraise", "import fxp_deephelper\n")
    (d / "fxp_deephelper.py").write_text("x = 1\n\ndef f():\n    return {}['missing']\n\nf()\n")
    make_dist(d, "bad-syntax", "0.2", "fxp_badsyntax", "def f(:\n    pass\n")
    # an entry point naming a module that does not exist: no place (it was importlib's own
    # "at .../importlib/__init__.py, line 126"; found by a new-user check)
    make_dist(d, "no-module", "0.3", "fxp_nomodule", "", entry_points={"no-module": "fxp_no_such_module"})
    forget_modules("fxp_deepraise", "fxp_deephelper", "fxp_badsyntax")
    monkeypatch.syspath_prepend(str(d))
    monkeypatch.delenv("FXPASSES_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    importlib.invalidate_caches()
    try:
        with pytest.warns(fxpasses.PluginWarning) as caught:
            Registry()
        said = {w for w in map(lambda w: str(w.message), caught) if "deep-raise" in w or "bad-syntax" in w or "no-module" in w}
        assert said == {
            "plugin deep-raise 0.1 (entry point deep-raise = fxp_deepraise): import failed: KeyError: 'missing' "
            f"(at {d / 'fxp_deephelper.py'}, line 4: return {{}}['missing'])",
            "plugin bad-syntax 0.2 (entry point bad-syntax = fxp_badsyntax): import failed: SyntaxError: invalid syntax "
            f"(at {d / 'fxp_badsyntax.py'}, line 1)",
            "plugin no-module 0.3 (entry point no-module = fxp_no_such_module): import failed: ModuleNotFoundError: "
            "No module named 'fxp_no_such_module'",
        }
    finally:
        forget_modules("fxp_deepraise", "fxp_deephelper", "fxp_badsyntax")


def test_list_says_a_plugin_is_off_because_of_autoload_not_disabled(site):
    """`list` showed "disabled" for plugins left out only by FXPASSES_DISABLE_PLUGIN_AUTOLOAD=1,
    while the errors said "(autoload off)" and the fix differs (-p NAME, not removing it from
    `disable`); found by a new-user check."""
    import json

    r = invoke("list", env={"FXPASSES_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert r.exit_code == 0, r.output
    row = next(line for line in r.output.splitlines() if line.startswith("healthy 2.0"))
    assert row.split()[3:5] == ["autoload", "off"], row
    r = invoke("-p", "no:healthy", "list")
    row = next(line for line in r.output.splitlines() if line.startswith("healthy 2.0"))
    assert row.split()[3] == "disabled", row
    r = invoke("list", "--format", "json", env={"FXPASSES_DISABLE_PLUGIN_AUTOLOAD": "1"})
    (rec,) = [p for p in json.loads(r.stdout)["plugins"] if p["distribution"] == "healthy"]
    assert (rec["status"], rec["off"]) == ("disabled", "autoload off")
    r = invoke("-p", "no:healthy", "list", "--format", "json")
    (rec,) = [p for p in json.loads(r.stdout)["plugins"] if p["distribution"] == "healthy"]
    assert (rec["status"], rec["off"]) == ("disabled", "disabled")
