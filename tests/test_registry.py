"""The registry: discovery through real entry points, isolation of broken plugins, lookup."""

from __future__ import annotations

import enum
import importlib
import json
import sys
from pathlib import Path
from typing import Literal, Optional

import pydantic
import re
import textwrap
import warnings

import pytest
import torch
import torch.fx
from click.testing import CliRunner

import fxpasses
from fxpasses import ConfigError, DuplicatePassError, PluginError, Registry, UnknownPassError
from fxpasses.cli import cli
from fxpasses.config import parse_config
from fxpasses.errors import PassDefinitionError
from fxpasses.registry import Rejection

from dists import forget_modules, good_pass_source, make_dist


@pytest.fixture
def site(tmp_path, monkeypatch):
    d = tmp_path / "site"
    d.mkdir()
    monkeypatch.syspath_prepend(str(d))
    importlib.invalidate_caches()
    yield d
    importlib.invalidate_caches()


def test_builtin_and_example_plugin_come_through_entry_points():
    reg = Registry()
    by_dist = {r.distribution: r for r in reg.plugins}
    assert by_dist["fxpasses"].status == "loaded"
    assert by_dist["fxpasses"].entry_point == "builtin = fxpasses.builtin_passes"
    assert by_dist["fxpasses-example-passes"].passes == ["remove_identity", "count_ops"]
    assert reg.info("count_ops").source == "fxpasses-example-passes 0.1.0"


def test_a_distribution_with_two_entry_points_is_named_once(site):
    make_dist(site, "two-eps", "1.0", "fxp_two_eps_a", good_pass_source("two_a"), entry_points={"first": "fxp_two_eps_a", "second": "fxp_two_eps_b"})
    (site / "fxp_two_eps_b.py").write_text(good_pass_source("two_b"))
    forget_modules("fxp_two_eps_a", "fxp_two_eps_b")
    reg = Registry()
    assert [(r.name, r.status) for r in reg.plugins if r.distribution == "two-eps"] == [("first", "loaded"), ("second", "loaded")]
    with pytest.raises(UnknownPassError) as info:
        reg.get("no_such_pass")
    installed = str(info.value).split("installed pass plugins: ")[1]
    assert installed.count("two-eps 1.0") == 1


def test_an_entry_point_that_fails_beside_one_that_loaded_is_named_in_the_hint(site):
    """A distribution with two entry points, the second broken: the unknown-pass error names
    that entry point, not the whole distribution as "not loaded" (its other passes work)."""
    make_dist(site, "half-eps", "1.0", "fxp_half_a", good_pass_source("half_a"), entry_points={"good": "fxp_half_a", "bad": "fxp_half_b"})
    (site / "fxp_half_b.py").write_text("raise ImportError('no such dependency: missing_lib')\n")
    forget_modules("fxp_half_a", "fxp_half_b")
    reg = Registry()
    assert reg.info("half_a").distribution == "half-eps"
    with pytest.raises(UnknownPassError) as info:
        reg.get("half_b")
    last = str(info.value).splitlines()[-1]
    assert last.startswith("installed but not loaded: half-eps 1.0 (entry point 'bad = fxp_half_b' failed to load: ")
    assert "missing_lib" in last
    forget_modules("fxp_half_a", "fxp_half_b")


def test_six_distributions_third_broken_all_healthy_registered(site):
    names = []
    for i in range(6):
        mod = f"fxp_test_pass_{i}"
        src = "raise ImportError('no such dependency: missing_lib')\n" if i == 2 else good_pass_source(f"pass_{i}")
        make_dist(site, f"pass-{i}", "1.0", mod, src)
        names.append(mod)
    forget_modules(*names)
    reg = Registry()
    for i in (0, 1, 3, 4, 5):
        assert reg.info(f"pass_{i}").distribution == f"pass-{i}"
    assert "pass_2" not in reg
    failed = [r for r in reg.plugins if r.status == "failed"]
    assert [r.distribution for r in failed] == ["pass-2"]
    assert len(reg.problems) == 1
    msg = str(reg.problems[0])
    assert "pass-2 1.0" in msg and "fxp_test_pass_2" in msg and "missing_lib" in msg
    # asking for its pass names the plugin that failed, not only the healthy ones
    with pytest.raises(UnknownPassError) as info:
        reg.get("pass_2")
    lines = str(info.value).splitlines()
    assert lines[-1].startswith("installed but not loaded: pass-2 1.0 (failed to load: ")
    assert "missing_lib" in lines[-1] and "pass-2" not in lines[-2]
    forget_modules(*names)


def test_a_name_in_conflict_is_charged_to_the_entry_point_that_registered_it_only(site):
    """A distribution's other entry points, which registered nothing in conflict, were marked
    partial and given the conflict as their problem (a new-user check)."""
    preset = (
        "\n@fxpasses.hookimpl\ndef fxpasses_register_presets(register):\n"
        "    register('shared_preset', 'remove_dropout', 'a preset')\n"
    )
    make_dist(
        site, "dist-ep", "1.0", "fxp_ep_a1", good_pass_source("shared_ep") + preset,
        entry_points={"a1": "fxp_ep_a1", "a2": "fxp_ep_a2"},
    )
    (site / "fxp_ep_a2.py").write_text(textwrap.dedent(good_pass_source("only_a2")))
    make_dist(site, "dist-other", "1.0", "fxp_ep_b", good_pass_source("shared_ep") + preset)
    forget_modules("fxp_ep_a1", "fxp_ep_a2", "fxp_ep_b")
    reg = Registry()
    status = {(r.distribution, r.name): (r.status, r.problems) for r in reg.plugins if r.distribution in ("dist-ep", "dist-other")}
    assert status[("dist-ep", "a2")] == ("loaded", [])
    assert status[("dist-ep", "a1")][0] == status[("dist-other", "dist-other")][0] == "partial"
    for key in (("dist-ep", "a1"), ("dist-other", "dist-other")):
        assert [p.split(" is also")[0] for p in status[key][1]] == ["pass 'shared_ep'", "preset 'shared_preset'"]
    assert "only_a2" in reg


def test_a_failing_pass_chosen_by_prefer_over_another_says_whose_it_is(site):
    """`prefer = {eliminate_dead_code = "dce-override"}`: its failure read "pass
    'eliminate_dead_code' failed: RuntimeError: ..." with nothing saying that the plugin's
    class ran, not the built-in pass (a new-user check)."""
    make_dist(
        site,
        "dce-override",
        "1.0",
        "fxp_dce_override",
        """
        import fxpasses

        class Dce(fxpasses.GraphPass):
            \"\"\"A dead code pass that fails.\"\"\"
            name = "eliminate_dead_code"

            def run(self, gm, ctx):
                raise RuntimeError("plugin DCE ran")

        @fxpasses.hookimpl
        def fxpasses_register_passes(register):
            register(Dce)
        """,
    )
    forget_modules("fxp_dce_override")
    reg = Registry(prefer={"eliminate_dead_code": "dce-override"})
    gm = torch.fx.symbolic_trace(torch.nn.ReLU())
    with pytest.raises(fxpasses.PassFailedError) as info:
        fxpasses.Pipeline(["eliminate_dead_code"], registry=reg).run(gm)
    assert (
        "'eliminate_dead_code' here is the pass of dce-override 1.0, chosen by `prefer` over fxpasses "
    ) in str(info.value)
    # a preset of the built-in passes gives it the built-in pass's options: the error said
    # only "unknown option", as if the built-in pass refused its own (a new-user check)
    with pytest.raises(fxpasses.errors.OptionsError) as info:
        fxpasses.Pipeline.from_preset("training", registry=reg).plan()
    lines = str(info.value).splitlines()
    assert lines[1].startswith("  eliminate_dead_code.remove_unused_state (column ") and "unknown option" in lines[1]
    assert lines[-1].startswith(
        "  ('eliminate_dead_code' here is the pass of dce-override 1.0, chosen by `prefer` over fxpasses "
    ), lines
    forget_modules("fxp_dce_override")


def test_a_plugin_error_raised_inside_the_standard_library_names_the_plugins_line(site):
    """`json.loads` of bad text in a plugin was reported "at .../json/decoder.py, line 353",
    never the plugin's own line (a new-user check)."""
    make_dist(
        site,
        "stdlib-raise",
        "0.1",
        "fxp_stdlib_raise",
        """
        import json
        import fxpasses

        @fxpasses.hookimpl
        def fxpasses_register_passes(register):
            json.loads("{not json")
        """,
    )
    make_dist(site, "stdlib-import", "0.1", "fxp_stdlib_import", 'import json\nCONFIG = json.loads("{not json")\n')
    forget_modules("fxp_stdlib_raise", "fxp_stdlib_import")
    with pytest.warns(fxpasses.PluginWarning):
        reg = Registry()
    errors = {r.distribution: r.error for r in reg.plugins if r.distribution.startswith("stdlib-")}
    assert re.search(r"JSONDecodeError: .* \(at .*fxp_stdlib_raise\.py, line 7: json\.loads\(\"\{not json\"\)\)$", errors["stdlib-raise"])
    assert re.search(r"\(at .*fxp_stdlib_import\.py, line 2: CONFIG = json\.loads\(\"\{not json\"\)\)$", errors["stdlib-import"])
    forget_modules("fxp_stdlib_raise", "fxp_stdlib_import")


def test_strict_mode_makes_a_broken_plugin_an_error(site):
    make_dist(site, "broken-dist", "2.3", "fxp_broken", "1/0\n")
    forget_modules("fxp_broken")
    with pytest.raises(PluginError) as info:
        Registry(strict=True)
    assert info.value.distribution == "broken-dist" and info.value.version == "2.3"
    assert "ZeroDivisionError" in str(info.value)


def test_two_distributions_same_pass_name_error_names_both(site):
    make_dist(site, "dist-a", "1.0", "fxp_dup_a", good_pass_source("shared_name"))
    make_dist(site, "dist-b", "2.0", "fxp_dup_b", good_pass_source("shared_name"))
    forget_modules("fxp_dup_a", "fxp_dup_b")
    reg = Registry()
    with pytest.raises(DuplicatePassError) as info:
        reg.get("shared_name")
    assert "dist-a 1.0" in str(info.value) and "dist-b 2.0" in str(info.value)
    assert "shared_name" in reg.names()
    # both plugins are partial, each naming the other (the first showed "loaded": a new-user check)
    status = {r.distribution: (r.status, r.problems) for r in reg.plugins if r.distribution.startswith("dist-")}
    assert status["dist-a"][0] == status["dist-b"][0] == "partial"
    assert status["dist-a"][1] == [
        "pass 'shared_name' is also registered by dist-b 2.0; neither is used until `prefer = {shared_name = "
        '"<distribution>"}` in the [plugins] config section, or `Registry(prefer={"shared_name": "<distribution>"})` '
        "in Python chooses one"
    ]
    assert len(status["dist-b"][1]) == 1 and "is also registered by dist-a 1.0" in status["dist-b"][1][0]
    # a documented override picks one; never a silent winner
    reg2 = Registry(prefer={"shared_name": "dist-b"})
    assert reg2.info("shared_name").distribution == "dist-b"
    assert {r.distribution: r.status for r in reg2.plugins if r.distribution.startswith("dist-")} == {
        "dist-a": "loaded",
        "dist-b": "loaded",
    }
    with pytest.raises(DuplicatePassError):
        Registry(strict=True)


BAD_OPTIONS_SOURCE = """
import fxpasses
class P(fxpasses.GraphPass):
    "doc"
    name = "bad_options"
    Options = dict
    def run(self, gm, ctx):
        return False
@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register(P)
"""


def test_hook_that_raises_and_bad_options_are_isolated(site):
    make_dist(
        site,
        "raising-dist",
        "0.1",
        "fxp_raising",
        """
        import fxpasses
        @fxpasses.hookimpl
        def fxpasses_register_passes(register):
            raise RuntimeError("cannot register today")
        """,
    )
    make_dist(site, "bad-options-dist", "0.2", "fxp_badopts", BAD_OPTIONS_SOURCE)
    forget_modules("fxp_raising", "fxp_badopts")
    reg = Registry()
    messages = [str(p) for p in reg.problems]
    assert any("raising-dist 0.1" in m and "cannot register today" in m for m in messages)
    assert any("bad-options-dist 0.2" in m and "pydantic" in m for m in messages)
    assert "bad_options" not in reg
    assert "eliminate_dead_code" in reg or len(reg.names()) >= 2  # the rest keep working
    assert reg.get("count_ops").name == "count_ops"


def test_hookimpl_with_default_argument_is_reported(site):
    make_dist(
        site,
        "default-arg-dist",
        "0.3",
        "fxp_defaultarg",
        """
        import fxpasses
        @fxpasses.hookimpl
        def fxpasses_register_passes(register=None):
            register(None)
        """,
    )
    forget_modules("fxp_defaultarg")
    reg = Registry()
    (problem,) = [p for p in reg.problems if "default-arg-dist" in str(p)]
    assert "gives a default to register" in str(problem)


def test_misspelled_hook_is_reported(site):
    make_dist(
        site,
        "typo-dist",
        "0.4",
        "fxp_typo",
        """
        import fxpasses
        @fxpasses.hookimpl
        def fxpasses_register_pases(register):
            pass
        """,
    )
    forget_modules("fxp_typo")
    reg = Registry()
    (problem,) = [p for p in reg.problems if "typo-dist" in str(p)]
    assert str(problem).startswith(
        "plugin typo-dist 0.4 (entry point typo-dist = fxp_typo): unknown hook: fxpasses_register_pases is "
        "marked @fxpasses.hookimpl but no fxpasses hook has that name; did you mean "
        "'fxpasses_register_passes' or 'fxpasses_register_presets'? (hooks: fxpasses_register_passes, "
    )


def test_a_hook_argument_the_hook_does_not_pass_and_an_unmarked_hook_are_reported(site):
    make_dist(
        site,
        "badarg-dist",
        "0.5",
        "fxp_badarg",
        """
        import fxpasses
        @fxpasses.hookimpl
        def fxpasses_register_passes(regster):
            pass
        """,
    )
    make_dist(
        site,
        "unmarked-dist",
        "0.6",
        "fxp_unmarked",
        """
        def fxpasses_register_passes(register):
            pass
        def register_preset(register):  # close to a hook name, not marked
            pass
        """,
    )
    forget_modules("fxp_badarg", "fxp_unmarked")
    reg = Registry()
    messages = {p.distribution: str(p) for p in reg.problems if isinstance(p, PluginError)}
    assert messages["badarg-dist"] == (
        "plugin badarg-dist 0.5 (entry point badarg-dist = fxp_badarg): invalid hook implementation: "
        "fxpasses_register_passes(regster) takes 'regster', which the hook does not pass (did you mean "
        "'register' for 'regster'?); a fxpasses_register_passes implementation may take any of: register"
    )
    msg = messages["unmarked-dist"]
    assert msg.startswith("plugin unmarked-dist 0.6 (entry point unmarked-dist = fxp_unmarked): implements no fxpasses hook")
    assert "fxpasses_register_passes is named after the hook but not marked @fxpasses.hookimpl" in msg
    assert "register_preset is not an fxpasses hook; did you mean 'fxpasses_register_presets' or " in msg
    assert "count_ops" in reg  # the other plugins keep working


def test_a_module_with_several_hook_mistakes_reports_them_all_at_once(site):
    """A wrong argument name stopped the report there: a misspelt marked hook and an unmarked
    one beside it were said only once it was fixed (a new-user check)."""
    make_dist(
        site,
        "many-dist",
        "0.1",
        "fxp_many",
        """
        import fxpasses

        @fxpasses.hookimpl
        def fxpasses_register_passes(registr):
            pass

        @fxpasses.hookimpl
        def fxpasses_register_pass(register):
            pass

        def fxpasses_register_presets(register):
            pass

        @fxpasses.hookimpl
        def fxpasses_after_pass(pass_name, gm, ctx, report, extra):
            pass
        """,
    )
    forget_modules("fxp_many")
    reg = Registry()
    (msg,) = [str(p) for p in reg.problems if isinstance(p, PluginError) and p.distribution == "many-dist"]
    assert msg.startswith("plugin many-dist 0.1 (entry point many-dist = fxp_many): invalid hook implementation: ")
    for part in (
        "fxpasses_register_passes(registr) takes 'registr'",
        "fxpasses_after_pass(pass_name, gm, ctx, report, extra) takes 'extra'",
        "also: fxpasses_register_pass is marked @fxpasses.hookimpl but no fxpasses hook has that name",
        "also: fxpasses_register_presets is named after the hook but not marked @fxpasses.hookimpl",
    ):
        assert part in msg, part
    forget_modules("fxp_many")


def test_disable_and_autoload_env(site, monkeypatch):
    make_dist(site, "extra-dist", "1.0", "fxp_extra", good_pass_source("extra_pass"))
    forget_modules("fxp_extra")
    assert "extra_pass" in Registry()
    assert "extra_pass" not in Registry(disable=["extra-dist"])
    monkeypatch.setenv("FXPASSES_DISABLE_PLUGIN_AUTOLOAD", "1")
    reg = Registry()
    assert "extra_pass" not in reg and "count_ops" not in reg
    assert reg.plugins[0].distribution == "fxpasses" and reg.plugins[0].status == "loaded"
    assert "extra_pass" in Registry(enable=["extra-dist"])


EXTRA_WITH_PRESET = good_pass_source("extra_pass") + '''
@fxpasses.hookimpl
def fxpasses_register_presets(register):
    register("extra_preset", "extra_pass", "The extra pass.")
'''


def test_an_unknown_name_a_plugin_rejected_does_not_point_at_plugins_not_loaded(site):
    """The rejection says where the pass is; "may come from" a disabled, unrelated plugin
    only misled."""
    make_dist(site, "extra-dist", "1.0", "fxp_extra_rj", EXTRA_WITH_PRESET)
    make_dist(site, "rejects-dist", "1.0", "fxp_rejects", BAD_OPTIONS_SOURCE)
    forget_modules("fxp_extra_rj", "fxp_rejects")
    with pytest.warns(fxpasses.PluginWarning):
        reg = Registry(disable=["extra-dist"])
    with pytest.raises(UnknownPassError) as info:
        reg.get("bad_options")
    text = str(info.value)
    assert "pass 'bad_options' was found in plugin rejects-dist 1.0" in text
    assert "may come from" not in text
    with pytest.raises(UnknownPassError) as info:  # a name no plugin rejected still gets the hint
        reg.get("extra_pass")
    assert "(pass 'extra_pass' may come from a plugin that was not loaded and so not searched: extra-dist" in str(info.value)
    forget_modules("fxp_extra_rj", "fxp_rejects")


@pytest.mark.parametrize(
    "env, kwargs, why, how",
    [
        (
            {"FXPASSES_DISABLE_PLUGIN_AUTOLOAD": "1"},
            {},
            "plugin autoloading is off: FXPASSES_DISABLE_PLUGIN_AUTOLOAD=1",
            'load one with `enable = ["NAME"]` in the [plugins] config section, `-p NAME`, or '
            '`Registry(enable=["NAME"])` in Python',
        ),
        (
            {},
            {"disable": ["extra_dist"]},
            'disabled: `disable = ["extra-dist"]` in the [plugins] config section, `-p no:extra-dist`, or '
            '`Registry(disable=["extra-dist"])` in Python',
            "remove it from `disable` (or drop `-p no:NAME`) to load it",
        ),
    ],
    ids=["autoload-off", "disabled"],
)
def test_unknown_name_of_an_entry_point_not_loaded_says_which_why_and_how(site, monkeypatch, env, kwargs, why, how):
    """An unknown name while some installed plugins were not loaded: the error says which were
    not searched, why, and how to load one; they are never imported to look (a plugin is
    disabled, or autoload turned off, precisely so that it is not imported)."""
    make_dist(site, "extra-dist", "1.0", "fxp_extra_np", EXTRA_WITH_PRESET)
    forget_modules("fxp_extra_np")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    reg = Registry(**kwargs)
    problems = list(reg.problems)
    with pytest.raises(UnknownPassError) as info:
        reg.get("extra_pass")
    lines = str(info.value).splitlines()
    dists = "extra-dist, fxpasses-example-passes" if env else "extra-dist"
    assert lines[1] == f"(pass 'extra_pass' may come from a plugin that was not loaded and so not searched: {dists} ({why}); {how})"
    # with autoload off, the example plugin is not loaded either
    not_loaded = ["extra-dist 1.0 (autoload off)", "fxpasses-example-passes 0.1.0 (autoload off)"] if env else ["extra-dist 1.0 (disabled)"]
    assert info.value.not_loaded == not_loaded
    assert lines[-1] == "installed but not loaded: " + ", ".join(not_loaded)
    with pytest.raises(UnknownPassError) as info:
        reg.preset("extra_preset")
    assert "(preset 'extra_preset' may come from a plugin that was not loaded" in str(info.value)
    # nothing was imported or loaded into this registry to answer
    assert "fxp_extra_np" not in sys.modules
    assert "extra_pass" not in reg and "extra_preset" not in reg.presets() and reg.problems == problems
    assert [r.status for r in reg.plugins if r.distribution == "extra-dist"] == ["disabled"]


@pytest.mark.parametrize("enable, disable", [(["extra-dist"], ["extra-dist"]), (["Extra_Dist", "other"], ["extra-dist"])])
def test_a_plugin_both_enabled_and_disabled_is_an_error_naming_it(enable, disable):
    with pytest.raises(ConfigError) as info:
        Registry(enable=enable, disable=disable)
    name = enable[0]
    assert str(info.value) == (
        f"plugin {name!r} is both enabled (`enable` in the [plugins] config section or Registry(), or -p NAME) "
        "and disabled (`disable`, or -p no:NAME): name each plugin in only one of them"
    )
    with pytest.raises(ConfigError) as info:
        parse_config({"pipeline": "x", "plugins": {"enable": enable, "disable": disable}})
    assert f"plugins: plugin {name!r} is both enabled" in str(info.value)


@pytest.mark.parametrize(
    "enable, disable", [(["example"], ["fxpasses-example-passes"]), (["fxpasses_example_passes"], ["example"])]
)
def test_a_plugin_enabled_and_disabled_under_its_two_names_is_an_error(enable, disable):
    """``-p`` takes a distribution or an entry-point name: one plugin named both ways is still
    one plugin both enabled and disabled."""
    with pytest.raises(ConfigError) as info:
        Registry(enable=enable, disable=disable)
    msg = str(info.value)
    assert msg.startswith("plugin 'fxpasses-example-passes' (entry point 'example') is both enabled (as ")
    assert "name each plugin in only one of them" in msg


def test_unknown_pass_suggests_close_names_and_lists_plugins():
    reg = Registry()
    with pytest.raises(UnknownPassError) as info:
        reg.get("count_op")
    assert info.value.suggestions[0] == "count_ops"
    assert "fxpasses-example-passes 0.1.0" in info.value.plugins
    assert "did you mean 'count_ops'" in str(info.value)


def test_a_name_differing_only_in_case_is_suggested():
    """Suggestions compare names lower-cased and give the registered spelling: passes, presets,
    and the options table of a pass in the pipeline."""
    from fxpasses import Pipeline
    from fxpasses.errors import ConfigError

    reg = Registry()
    for name in ("REMOVE_DROPOUT", "Remove_Dropout"):
        with pytest.raises(UnknownPassError) as info:
            reg.get(name)
        assert info.value.suggestions == ["remove_dropout", "remove_identity"]
        assert str(info.value).startswith(
            f"unknown pass {name!r}; did you mean 'remove_dropout' or 'remove_identity'?\n"
        )
    with pytest.raises(UnknownPassError) as info:
        Pipeline.from_string("eliminate_dead_code,Fold_Constants", registry=reg)
    assert str(info.value).startswith(
        "pipeline string, entry 2 ('Fold_Constants') at column 21: unknown pass 'Fold_Constants'; "
        "did you mean 'fold_constants'?\n"
    )
    with pytest.raises(UnknownPassError) as info:
        reg.preset("INFERENCE")
    assert str(info.value).startswith("unknown preset 'INFERENCE'; did you mean 'inference'?\n")
    with pytest.raises(ConfigError) as info:
        Pipeline(["fold_constants"], registry=reg, options={"FOLD_CONSTANTS": {"max_numel": 1}})
    assert str(info.value) == (
        "options given for pass(es) not in the pipeline: FOLD_CONSTANTS (did you mean 'fold_constants'?); add each "
        "pass to the pipeline, or remove its options"
    )


def test_programmatic_register_and_describe():
    class Scale(fxpasses.NodePass):
        """Scale things.

        Longer text.
        """

        name = "scale_things"
        requires = ("count_ops",)

        class Options(fxpasses.PassOptions):
            factor: float = 2.0
            names: list[str] = []
            mode: str

        @fxpasses.on("mul")
        def mul(self, node, ctx):
            return None

    reg = Registry()
    reg.register(Scale)
    d = reg.describe("scale_things")
    assert d.summary == "Scale things."
    assert [(o.name, o.type, o.default, o.required) for o in d.options] == [
        ("factor", "float", 2.0, False),
        ("names", "list[str]", [], False),
        ("mode", "str", None, True),
    ]
    assert d.requires == ("count_ops",)
    assert d.distribution == f"python:{__name__}" or d.distribution.startswith("python:")

    class Other(fxpasses.GraphPass):
        """x"""

        name = "scale_things"

        def run(self, gm, ctx):
            return False

    with pytest.raises(DuplicatePassError) as info:
        reg.register(Other)
    # two Python registrations: not "more than one plugin", whose `prefer` cannot choose here
    # (both sources printed alike: a new-user check)
    assert str(info.value) == (
        f"register({__name__}.{Other.__qualname__}): pass name 'scale_things' is already registered, by "
        f"{__name__}.{Scale.__qualname__} (python:{__name__}); give the class another `name`, or register it "
        "in a registry of its own (fxpasses.Registry())"
    )
    assert info.value.sources == [f"python:{__name__}"] * 2


@pytest.mark.parametrize(
    "attrs, message",
    [
        ({"name": "has space"}, "identifier"),
        ({"name": "ok", "Options": int}, "pydantic"),
        ({"name": "ok", "requires": "single_string"}, "tuple of pass names"),
        ({"name": "ok", "kind": "mutation"}, "kind"),
        ({"name": "ok", "writes_tensors": "no"}, "`writes_tensors` must be True or False"),
        ({"name": "ok", "preserves": "propagate_shapes"}, "`preserves` must be a tuple"),
        # (accepted, then shown by `fxpasses show` as if it meant something: a new-user check)
        ({"name": "ok", "dialects": ("torchscript",)}, "`dialects` names 'torchscript', not a graph dialect"),
        ({"name": "ok", "dialects": "export"}, "`dialects` must be a non-empty tuple"),
        ({"name": "ok", "setup": lambda self, gm: None}, r"setup\(\) must take \(self, gm, ctx\), takes \(self, gm\)"),
    ],
)
def test_malformed_pass_classes_are_rejected(attrs, message):
    def hook(self, node, ctx):
        return None

    ns = {"__doc__": "doc", "h": fxpasses.on("mul")(hook), **attrs}
    cls = type("Bad", (fxpasses.NodePass,), ns)
    with pytest.raises(PassDefinitionError, match=message):
        Registry(autoload=False).register(cls)


def test_a_graph_pass_whose_run_does_not_take_gm_and_ctx_is_rejected_when_registered():
    """`run(self, gm)` registered fine and failed only when run, with `TypeError: run() takes 2
    positional arguments but 3 were given` (a new-user check); wrong @on hook signatures were
    already rejected at load time. Signatures that take (self, gm, ctx) pass, defaults and
    *args included."""

    class RunSig(fxpasses.GraphPass):
        name = "run_sig"

        def run(self, gm):
            return False

    with pytest.raises(PassDefinitionError, match=r"pass 'run_sig' .*: run\(\) must take \(self, gm, ctx\), takes \(self, gm\)"):
        Registry(autoload=False).register(RunSig)

    class Flexible(fxpasses.GraphPass):
        name = "flexible"
        dialects = ("export",)

        def run(self, gm, ctx=None, *rest):
            return False

    Registry(autoload=False).register(Flexible)


def test_an_options_default_that_does_not_fit_its_field_is_a_definition_error():
    class BadDefault(fxpasses.GraphPass):
        """x"""

        name = "bad_default"

        class Options(fxpasses.PassOptions):
            n: int = "not an int"
            k: int = pydantic.Field(1, ge=2)
            ok: float = 1  # an int fits a float
            required: str

        def run(self, gm, ctx):
            return False

    reg = Registry(autoload=False)
    with pytest.raises(PassDefinitionError) as info:
        reg.register(BadDefault)
    assert str(info.value) == (
        f"pass 'bad_default' ({__name__}.test_an_options_default_that_does_not_fit_its_field_is_a_definition_error"
        ".<locals>.BadDefault): invalid default option value(s) in "
        "test_an_options_default_that_does_not_fit_its_field_is_a_definition_error.<locals>.BadDefault.Options\n"
        "  bad_default.n: Input should be a valid integer (default: 'not an int')\n"
        "  bad_default.k: Input should be greater than or equal to 2 (default: 1)"
    )
    assert "bad_default" not in reg
    # made directly, the class gave pydantic's bare ValidationError (a new-user check)
    with pytest.raises(PassDefinitionError) as direct:
        BadDefault()
    assert str(direct.value) == str(info.value)


def test_an_options_validator_raising_a_non_validation_error_names_the_pass():
    """A validator raising ``KeyError`` (pydantic passes it through) escaped as a bare
    ``KeyError`` naming neither the pass nor its options; it is now a PassDefinitionError that
    names both, the options given and the exception, with it as the cause."""

    class Raises(fxpasses.GraphPass):
        """x"""

        name = "validator_raises"

        class Options(fxpasses.PassOptions):
            k: int = 0

            @pydantic.field_validator("k")
            @classmethod
            def _v(cls, v):
                if v == 1:
                    raise KeyError("boom")
                return v

        def run(self, gm, ctx):
            return False

    with pytest.raises(PassDefinitionError) as info:
        fxpasses.Pipeline([(Raises, {"k": 1})])
    assert str(info.value) == (
        "pass 'validator_raises' (pipeline, entry 1): its options model "
        f"{__name__}.test_an_options_validator_raising_a_non_validation_error_names_the_pass.<locals>.Raises.Options "
        "raised KeyError: 'boom' while validating {'k': 1} (a validator should raise ValueError for a bad value)"
    )
    assert isinstance(info.value.__cause__, KeyError)
    assert "validator_raises{k=2}" in repr(fxpasses.Pipeline([(Raises, {"k": 2})]))  # valid options build


def test_a_plain_basemodel_options_default_is_validated_too():
    def pass_with(options):
        ns = {"__doc__": "x", "name": "plain", "Options": options, "run": lambda self, gm, ctx: False}
        return type("Plain", (fxpasses.GraphPass,), ns)

    class Bad(pydantic.BaseModel):  # no validate_default of its own
        names: list[str] = "abc"

    class Good(pydantic.BaseModel):
        names: list[str] = ["abc"]

    with pytest.raises(PassDefinitionError, match=r"plain\.names: Input should be a valid list \(default: 'abc'\)"):
        Registry(autoload=False).register(pass_with(Bad))
    good = pass_with(Good)
    assert Registry(autoload=False).register(good).cls is good


class _InnerModel(pydantic.BaseModel):  # a nested options model that does not validate its defaults
    n: int = pydantic.Field(default=-1, ge=0)


class _InnerOptions(fxpasses.PassOptions):  # one that does (its constructor raises)
    n: int = pydantic.Field(default=-1, ge=0)


class _GoodInner(fxpasses.PassOptions):
    low: float = 0.0
    high: float = pydantic.Field(1.0, le=2.0)


@pytest.mark.parametrize(
    "default",
    [
        pytest.param(lambda: pydantic.Field(default_factory=_InnerModel), id="model-factory"),
        pytest.param(lambda: _InnerModel(), id="model-instance"),
        pytest.param(lambda: _InnerOptions.model_construct(), id="constructed-options"),
        pytest.param(lambda: pydantic.Field(default_factory=_InnerOptions), id="options-factory"),
    ],
)
def test_a_default_inside_a_nested_options_model_is_validated_and_named_by_its_path(default):
    """A nested model's default its own field refuses was accepted (pydantic takes a model
    instance as it is), shown by `fxpasses show` and run, while the same value given in a config
    was refused; through a default factory that raises, the error lacked the field's name
    (`nested.n`, not `nested.inner.n`). Found by a new-user check."""
    value = default()
    annotation = type(value) if isinstance(value, pydantic.BaseModel) else value.default_factory
    ns = {"__annotations__": {"inner": annotation}, "inner": value}
    options = type("NestedOptions", (fxpasses.PassOptions,), ns)
    cls = type("Nested", (fxpasses.GraphPass,), {"__doc__": "x", "name": "nested", "Options": options, "run": lambda self, gm, ctx: False})
    with pytest.raises(PassDefinitionError) as info:
        Registry(autoload=False).register(cls)
    assert str(info.value).splitlines()[1:] == ["  nested.inner.n: Input should be greater than or equal to 0 (default: -1)"]


@pytest.mark.parametrize(
    ("annotation", "default", "path"),
    [
        (list[_InnerOptions], [_InnerOptions.model_construct(n=-5)], "items.0.n"),
        (dict[str, _InnerOptions], {"a": _InnerOptions.model_construct(n=-6)}, "items.a.n"),
        (tuple[_InnerOptions, ...], (_InnerOptions.model_construct(n=-7),), "items.0.n"),
    ],
    ids=["list", "dict", "tuple"],
)
def test_a_default_of_a_model_inside_a_container_is_validated_too(annotation, default, path):
    options = type("Held", (fxpasses.PassOptions,), {"__annotations__": {"items": annotation}, "items": default})
    cls = type("HeldPass", (fxpasses.GraphPass,), {"__doc__": "x", "name": "held", "Options": options, "run": lambda self, gm, ctx: False})
    with pytest.raises(PassDefinitionError) as info:
        Registry(autoload=False).register(cls)
    assert str(info.value).splitlines()[1].startswith(f"  held.{path}: Input should be greater than or equal to 0")


def test_valid_nested_options_defaults_are_accepted():
    class Options(fxpasses.PassOptions):
        inner: _GoodInner = pydantic.Field(default_factory=_GoodInner)
        other: _GoodInner = _GoodInner(high=1.5)
        many: list[_GoodInner] = [_GoodInner(), _GoodInner(low=-1.0)]
        by_name: dict[str, _GoodInner] = {"a": _GoodInner()}
        k: int = 3

    cls = type("NestedOk", (fxpasses.GraphPass,), {"__doc__": "x", "name": "nested_ok", "Options": Options, "run": lambda self, gm, ctx: False})
    assert Registry(autoload=False).register(cls).cls is cls
    assert cls().options.other.high == 1.5


def test_default_options_are_shared_only_where_no_instance_can_differ_or_change():
    def pass_with(options):
        return type("P", (fxpasses.GraphPass,), {"name": "p", "Options": options, "run": lambda self, gm, ctx: False})

    class Empty(fxpasses.PassOptions):
        pass

    class Field(fxpasses.PassOptions):
        names: tuple[str, ...] = ("a",)

    class Private(fxpasses.PassOptions):
        _seen: list[int] = pydantic.PrivateAttr(default_factory=list)

    class Extra(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="allow")

    class PostInit(fxpasses.PassOptions):
        def model_post_init(self, context):
            pass

    shared = pass_with(Empty)
    assert shared().options is shared().options and shared().options == Empty()
    plain = pass_with(fxpasses.PassOptions)  # a pass that declares no options
    assert plain().options is plain().options
    assert type(pass_with(Empty)().options) is Empty
    for options in (Field, Private, Extra, PostInit):
        cls = pass_with(options)
        a, b = cls(), cls()
        assert a.options is not b.options and type(a.options) is options, options
    # a subclass of a shared empty model has its own default, of its own class
    class EmptyChild(Empty):
        pass

    assert type(pass_with(EmptyChild)().options) is EmptyChild
    # state of one pass's private attribute is not another's
    priv = pass_with(Private)
    first = priv()
    first.options._seen.append(1)
    assert priv().options._seen == []
    # an explicit instance is kept as given
    given = Field(names=("b",))
    assert pass_with(Field)(given).options is given


def test_a_plugin_pass_with_an_invalid_default_is_reported_and_skipped(site):
    make_dist(
        site,
        "bad-default-dist",
        "0.3",
        "fxp_bad_default",
        """
        import fxpasses

        class BadDefault(fxpasses.GraphPass):
            \"\"\"Options default of the wrong type.\"\"\"
            name = "bad_default"

            class Options(fxpasses.PassOptions):
                n: int = "not an int"

            def run(self, gm, ctx):
                return False

        class NoHooks(fxpasses.NodePass):
            \"\"\"Forgot its hooks.\"\"\"
            name = "no_hooks"

        class Fine(fxpasses.GraphPass):
            \"\"\"Fine.\"\"\"
            name = "fine_pass"

            def run(self, gm, ctx):
                return False

        @fxpasses.hookimpl
        def fxpasses_register_passes(register):
            register(BadDefault)
            register(NoHooks)
            register(Fine)
        """,
    )
    forget_modules("fxp_bad_default")
    with pytest.warns(fxpasses.errors.PluginWarning):
        reg = Registry()
    assert "fine_pass" in reg and "bad_default" not in reg and "no_hooks" not in reg
    (rec,) = [r for r in reg.plugins if r.distribution == "bad-default-dist"]
    assert (rec.status, rec.passes) == ("partial", ["fine_pass"])
    problems = [str(p) for p in reg.problems if "bad-default-dist" in str(p)]
    assert problems == [
        "plugin bad-default-dist 0.3 (entry point bad-default-dist = fxp_bad_default): pass 'bad_default' "
        "(fxp_bad_default.BadDefault): invalid default option value(s) in BadDefault.Options; the pass is "
        "skipped (not registered)\n"
        "  bad_default.n: Input should be a valid integer (default: 'not an int')",
        "plugin bad-default-dist 0.3 (entry point bad-default-dist = fxp_bad_default): pass 'no_hooks' "
        "(fxp_bad_default.NoHooks) is a NodePass with no @on hooks; the pass is skipped (not registered)",
    ]
    # `fxpasses list`'s rejected table keeps the reason's second line in the reason column: it
    # started at the left margin, where the next row's plugin name would be
    from click.testing import CliRunner

    from fxpasses.cli import cli

    forget_modules("fxp_bad_default")
    r = CliRunner().invoke(cli, ["list"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    (i,) = [k for k, line in enumerate(lines) if line.startswith("bad-default-dist 0.3  pass") and "bad_default " in line]
    column = lines[i].index("pass 'bad_default'")
    assert lines[i + 1] == " " * column + "  bad_default.n: Input should be a valid integer (default: 'not an int')"
    assert lines[i + 2].startswith("bad-default-dist 0.3  pass      no_hooks")
    forget_modules("fxp_bad_default")
    # strict mode: an error, not "skipped" (a new-user check); so for a clash with a built-in
    with pytest.raises(PluginError) as info:
        Registry(strict=True)
    assert str(info.value).endswith("invalid default option value(s) in BadDefault.Options; an error in strict mode\n"
                                    "  bad_default.n: Input should be a valid integer (default: 'not an int')")
    forget_modules("fxp_bad_default")


def test_node_pass_without_hooks_and_hook_with_wrong_signature():
    class NoHooks(fxpasses.NodePass):
        name = "no_hooks"

    with pytest.raises(PassDefinitionError, match="no @on hooks"):
        Registry(autoload=False).register(NoHooks)

    class WrongSig(fxpasses.NodePass):
        name = "wrong_sig"

        @fxpasses.on("mul")
        def mul(self, node):
            return None

    with pytest.raises(PassDefinitionError, match=r"\(self, node, ctx\)"):
        Registry(autoload=False).register(WrongSig)


def test_plugin_statuses_empty_partial_failed_and_prefer_typos(site, monkeypatch):
    make_dist(site, "empty-dist", "1.0", "fxp_empty", "X = 1\n")
    bad_pass = '''
        class Bad(fxpasses.GraphPass):
            "doc."
            name = "bad one"
            def run(self, gm, ctx):
                return False
    '''
    make_dist(
        site, "partial-dist", "1.0", "fxp_partial",
        good_pass_source("partial_good").replace("@fxpasses.hookimpl", bad_pass.replace("\n        ", "\n") + "\n@fxpasses.hookimpl")
        .replace("    register(PartialGoodPass)", "    register(PartialGoodPass)\n    register(Bad)"),
    )
    make_dist(
        site, "allbad-dist", "1.0", "fxp_allbad",
        "import fxpasses\n" + bad_pass.replace("\n        ", "\n") + "\n@fxpasses.hookimpl\ndef fxpasses_register_passes(register):\n    register(Bad)\n",
    )
    forget_modules("fxp_empty", "fxp_partial", "fxp_allbad")
    reg = Registry(
        prefer={
            "count_ops": "no-such-dist",
            "eliminate_dead_code": "fxpasses-example-passes",
            "partial_good": "partial-dsit",
            "no_such_pass": "empty-dist",
            "partial_goood": "partial-dist",  # a misspelt key: the distribution's own name is meant
        }
    )
    status = {r.distribution: r.status for r in reg.plugins}
    assert status["empty-dist"] == "empty"
    assert status["partial-dist"] == "partial" and "partial_good" in reg
    assert status["allbad-dist"] == "failed"
    text = "\n".join(str(p) for p in reg.problems)
    assert "empty-dist 1.0" in text and "implements no fxpasses hook" in text
    prefer = [str(p) for p in reg.problems if "prefer" in str(p)]
    assert prefer == [  # named as a config key, not as a plugin; with what was meant where it can tell
        "[plugins]: prefer = {count_ops = 'no-such-dist'}: no distribution 'no-such-dist' is installed",
        "[plugins]: prefer = {eliminate_dead_code = 'fxpasses-example-passes'}: 'fxpasses-example-passes' "
        "registers no pass or preset 'eliminate_dead_code' (registered by 'fxpasses')",
        "[plugins]: prefer = {partial_good = 'partial-dsit'}: no distribution 'partial-dsit' is installed; "
        "did you mean 'partial-dist'?",
        "[plugins]: prefer = {no_such_pass = 'empty-dist'}: 'empty-dist' registers no pass or preset 'no_such_pass' "
        "(no plugin registers it)",
        "[plugins]: prefer = {partial_goood = 'partial-dist'}: 'partial-dist' registers no pass or preset "
        "'partial_goood' (no plugin registers it); did you mean 'partial_good'?",
    ]
    assert all(isinstance(p, fxpasses.ConfigError) for p in reg.problems if "prefer" in str(p))
    with pytest.raises(UnknownPassError) as info:  # a partly loaded plugin is installed too
        reg.get("partial_gooood")
    assert any(p.startswith("partial-dist") for p in info.value.plugins)
    assert not any(p.startswith("allbad-dist") for p in info.value.plugins)
    # with autoloading off, a distribution that does register the name is not loaded: said so,
    # with the name as typed (it was "registers no pass", and 'Partial_Dist' became 'partial-dist')
    monkeypatch.setenv("FXPASSES_DISABLE_PLUGIN_AUTOLOAD", "1")
    forget_modules("fxp_empty", "fxp_partial", "fxp_allbad")
    off = Registry(prefer={"partial_good": "Partial_Dist", "x": "Partial_Dsit"})
    assert [str(p) for p in off.problems if "prefer" in str(p)] == [
        "[plugins]: prefer = {partial_good = 'Partial_Dist'}: 'Partial_Dist' is installed but not loaded (autoload "
        "off), so it registers nothing here: give enable = [\"Partial_Dist\"] in [plugins], or -p Partial_Dist",
        "[plugins]: prefer = {x = 'Partial_Dsit'}: no distribution 'Partial_Dsit' is installed; did you mean "
        "'partial-dist'?",
    ]
    forget_modules("fxp_empty", "fxp_partial", "fxp_allbad")


def test_a_prefer_typo_is_an_error_in_strict_mode():
    with pytest.raises(fxpasses.ConfigError) as info:
        Registry(strict=True, prefer={"count_ops": "fxpasses-exampel-passes"})
    assert str(info.value) == (
        "[plugins]: prefer = {count_ops = 'fxpasses-exampel-passes'}: no distribution 'fxpasses-exampel-passes' "
        "is installed; did you mean 'fxpasses-example-passes'?"
    )


def test_show_lists_every_registration_of_a_name_in_conflict(site):
    from click.testing import CliRunner

    from fxpasses.cli import cli

    make_dist(site, "dist-a", "1.0", "fxp_show_a", good_pass_source("clashing", "First one."))
    make_dist(site, "dist-b", "2.0", "fxp_show_b", good_pass_source("clashing", "Second one."))
    forget_modules("fxp_show_a", "fxp_show_b")
    r = CliRunner().invoke(cli, ["show", "clashing"])
    assert r.exit_code == 0, r.output
    assert "clashing (transform) — First one." in r.output and "clashing (transform) — Second one." in r.output
    assert "source:   dist-a 1.0" in r.output and "source:   dist-b 2.0" in r.output
    assert "warning: pass name 'clashing' is registered by more than one plugin: dist-a 1.0 and dist-b 2.0; choose one" in r.stderr
    forget_modules("fxp_show_a", "fxp_show_b")


def test_python_api_users_get_a_warning_per_plugin_problem(site):
    make_dist(site, "warn-dist", "3.1", "fxp_warn", "raise ImportError('missing thing')\n")
    forget_modules("fxp_warn")
    with pytest.warns(fxpasses.PluginWarning, match="warn-dist 3.1.*missing thing"):
        Registry()
    forget_modules("fxp_warn")


@pytest.mark.parametrize("failing", ["aaa-broken", "zzz-broken"])
def test_issue5_case17_good_passes_registered_whatever_the_discovery_order(site, failing):
    make_dist(site, "mmm-good", "1.0", "fxp_mmm_good", good_pass_source("mmm_pass"))
    make_dist(site, failing, "0.5", "fxp_order_broken", "import not_installed_anywhere\n")
    forget_modules("fxp_mmm_good", "fxp_order_broken")
    reg = Registry()
    assert reg.info("mmm_pass").distribution == "mmm-good"
    (problem,) = [p for p in reg.problems if failing in str(p)]
    assert f"{failing} 0.5 (entry point {failing} = fxp_order_broken)" in str(problem)
    assert "not_installed_anywhere" in str(problem)
    forget_modules("fxp_mmm_good", "fxp_order_broken")
    with pytest.raises(PluginError, match=failing):
        Registry(strict=True)
    forget_modules("fxp_mmm_good", "fxp_order_broken")


def test_issue5_case19_two_distributions_registering_fuse_conv_bn(site):
    make_dist(site, "fuse-a", "1.0", "fxp_fuse_a", good_pass_source("fuse_conv_bn", "Fuse A."))
    make_dist(site, "fuse-b", "2.0", "fxp_fuse_b", good_pass_source("fuse_conv_bn", "Fuse B."))
    forget_modules("fxp_fuse_a", "fxp_fuse_b")
    reg = Registry()
    # never a silent winner: the built-in keeps the name and each plugin is told, by name
    assert reg.info("fuse_conv_bn").distribution == "fxpasses"
    text = "\n".join(str(p) for p in reg.problems)
    assert "plugin fuse-a 1.0" in text and "plugin fuse-b 2.0" in text
    assert text.count("pass 'fuse_conv_bn'") == 2 and "taken by the built-in pass of fxpasses 0.1.0" in text
    # the documented override chooses one
    forget_modules("fxp_fuse_a", "fxp_fuse_b")
    chosen = Registry(prefer={"fuse_conv_bn": "fuse-b"})
    assert chosen.info("fuse_conv_bn").distribution == "fuse-b"
    assert chosen.describe("fuse_conv_bn").summary == "Fuse B."
    forget_modules("fxp_fuse_a", "fxp_fuse_b")
    with pytest.raises(PluginError) as info:  # strict: refused, not "skipped"
        Registry(strict=True)
    assert "pass 'fuse_conv_bn' (fxp_fuse_a.FuseConvBnPass) refused (strict mode): the name is taken by the built-in pass" in str(info.value)
    forget_modules("fxp_fuse_a", "fxp_fuse_b")


def test_misspelled_op_name_in_on_warns_with_a_suggestion():
    class Typo(fxpasses.NodePass):
        """Subscribes to a misspelled op."""

        name = "typo_sub"

        @fxpasses.on("mull", "my_custom_op_xyz", "conv")
        def h(self, node, ctx):
            return None

    with pytest.warns(fxpasses.PassDefinitionWarning) as record:
        Registry(autoload=False).register(Typo)
    (w,) = record
    # the hook by its class and its @on line (it said "on h", the method's name alone)
    line = Typo.h.__code__.co_firstlineno
    assert (
        f"@on('mull') on the hook Typo.h, {__file__}:{line} names no known op or family; did you mean 'mul'?"
        in str(w.message)
    )
    assert "my_custom_op_xyz" not in str(w.message)  # unlike any known name: a custom op's


def test_an_on_name_differing_in_case_suggests_the_op_not_a_lookalike():
    """`@on("Relu")` was told "did you mean 'elu'?" (a pass-author check)."""
    from fxpasses.ops import misspelled_op_name

    assert misspelled_op_name("Relu")[0] == "relu" and "elu" not in misspelled_op_name("Relu")
    assert misspelled_op_name("MUL_")[0] == "mul_"
    assert misspelled_op_name("Mull")[0] == "mul"


def test_a_plugins_misspelled_op_name_warning_names_the_plugin(site):
    """The warning named the pass and its class but no distribution or entry point, unlike
    every other plugin warning (a new-user check)."""
    make_dist(site, "typo-on", "0.3", "fxp_typo_on", good_pass_source("typo_on").replace('@on("mul")', '@on("rleu")'))
    forget_modules("fxp_typo_on")
    with pytest.warns(fxpasses.PassDefinitionWarning) as record:
        reg = Registry()
    (msg,) = [str(w.message) for w in record if issubclass(w.category, fxpasses.PassDefinitionWarning)]
    assert msg.startswith("plugin typo-on 0.3 (entry point typo-on = fxp_typo_on): pass 'typo_on' (fxp_typo_on.TypoOnPass): @on('rleu')")
    assert "did you mean 'relu'" in msg
    assert "typo_on" in reg
    forget_modules("fxp_typo_on")


def test_two_swapped_letters_in_an_on_name_are_a_misspelling():
    """`@on("reul")` (for relu) was below difflib's cutoff and passed without a warning, the
    hook never running."""
    from fxpasses.ops import misspelled_op_name

    assert misspelled_op_name("reul") == ["relu"]
    assert misspelled_op_name("lienar")[0] == "linear"
    assert misspelled_op_name("relu") == [] and misspelled_op_name("my_custom_op_xyz") == []

    class Swapped(fxpasses.NodePass):
        """Subscribes to relu with two letters swapped."""

        name = "swapped_sub"

        @fxpasses.on("reul")
        def h(self, node, ctx):
            return None

    with pytest.warns(fxpasses.PassDefinitionWarning) as record:
        Registry(autoload=False).register(Swapped)
    assert "@on('reul') on the hook Swapped.h, " in str(record[0].message)
    assert str(record[0].message).endswith("names no known op or family; did you mean 'relu'? (custom ops may have any name; subscribe them by target= to silence this)")


def test_cli_prints_pass_definition_warnings_as_warning_lines(site):
    from click.testing import CliRunner

    from fxpasses.cli import cli

    source = good_pass_source("typo_cli").replace('@on("mul")', '@on("mull")')
    assert "mull" in source
    make_dist(site, "typo-dist", "1.0", "fxp_typo", source)
    forget_modules("fxp_typo")
    r = CliRunner().invoke(cli, ["list"])
    assert r.exit_code == 0, r.output
    assert "warning: plugin typo-dist 1.0 (entry point typo-dist = fxp_typo): pass 'typo_cli'" in r.output
    assert "did you mean 'mul'?" in r.output
    forget_modules("fxp_typo")


REJECTED_SOURCE = BAD_OPTIONS_SOURCE + '''
@fxpasses.hookimpl
def fxpasses_register_presets(register):
    register("broken_preset", "bad_options{", "A malformed pipeline.")
'''


def test_a_preset_naming_a_pass_its_plugin_had_rejected_says_so(site):
    """The warning said "no installed plugin registers" a pass its plugin did register but had
    rejected (found by a new-user check)."""
    make_dist(
        site,
        "preset-of-rejected",
        "0.5",
        "fxp_preset_rejected",
        BAD_OPTIONS_SOURCE
        + """
@fxpasses.hookimpl
def fxpasses_register_presets(register):
    register("uses_bad", "eliminate_dead_code,bad_options,no_such_pass,cleanup", "Names a rejected pass.")
""",
    )
    forget_modules("fxp_preset_rejected")
    with pytest.warns(fxpasses.errors.PluginWarning) as caught:
        Registry()
    (message,) = [str(w.message) for w in caught if "uses_bad" in str(w.message)]
    # (and a preset named where passes are: it was "no installed plugin registers: cleanup")
    assert message.endswith(
        "preset 'uses_bad' names pass(es) no installed plugin registers: no_such_pass; and pass 'bad_options', "
        "which preset-of-rejected 0.5 registered but which was rejected as it loaded (see its warning); and "
        "'cleanup', which is a preset: a preset's pipeline names passes, not presets"
    )
    # `fxpasses show` of it says so too (it showed the pipeline alone: a new-user check)
    problem = message[message.index("preset 'uses_bad' names") :]
    forget_modules("fxp_preset_rejected")
    r = CliRunner().invoke(cli, ["show", "uses_bad"])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[-1] == f"problem:  {problem}"
    forget_modules("fxp_preset_rejected")
    r = CliRunner().invoke(cli, ["show", "uses_bad", "--format", "json"])
    assert json.loads(r.stdout)["problems"] == [problem]
    forget_modules("fxp_preset_rejected")


def test_a_pass_or_preset_rejected_at_load_is_reported_with_its_plugin_and_reason(site):
    """Naming a pass (or preset) a plugin registered but the registry rejected as it loaded
    says which plugin and why, not only "unknown pass"."""
    make_dist(site, "rejecting-dist", "1.2", "fxp_rejecting", REJECTED_SOURCE)
    forget_modules("fxp_rejecting")
    with pytest.warns(fxpasses.errors.PluginWarning):
        reg = Registry()
    (rec,) = [r for r in reg.plugins if r.distribution == "rejecting-dist"]
    reason = (
        "pass 'bad_options' (fxp_rejecting.P): Options must be a pydantic BaseModel subclass "
        "(e.g. fxpasses.PassOptions), got <class 'dict'>"
    )
    assert reg.rejected("bad_options") == [(rec, Rejection("pass", "bad_options", reason))]
    with pytest.raises(UnknownPassError) as info:
        fxpasses.Pipeline.from_string("eliminate_dead_code,bad_options", registry=reg)
    lines = str(info.value).splitlines()
    assert lines[0] == "pipeline string, entry 2 ('bad_options') at column 21: unknown pass 'bad_options'"
    assert lines[1] == (
        "(pass 'bad_options' was found in plugin rejecting-dist 1.2 (entry point rejecting-dist = fxp_rejecting) "
        f"but rejected when the plugin was loaded, so it is not registered until the plugin is fixed: {reason})"
    )
    with pytest.raises(UnknownPassError) as info:
        reg.preset("broken_preset")
    # a hint of several lines is not in parentheses: the ")" came after the caret line
    assert str(info.value).splitlines()[1:4] == [
        "preset 'broken_preset' was found in plugin rejecting-dist 1.2 (entry point rejecting-dist = "
        "fxp_rejecting) but rejected when the plugin was loaded, so it is not registered until the plugin is "
        "fixed: its pipeline 'bad_options{' is malformed: expected an option name for 'bad_options', found end of string",
        "    bad_options{",
        "                ^",
    ]
    assert reg.rejected("eliminate_dead_code") == [] and reg.rejected("bad_options", "preset") == []
    forget_modules("fxp_rejecting")


def test_fxpasses_list_shows_what_a_plugin_had_rejected_and_why(site):
    """`fxpasses list` (text and JSON) names each rejected registration with its plugin and
    reason: a pass that is missing from the list is explained where the list is read."""
    import json

    from click.testing import CliRunner

    from fxpasses.cli import cli

    make_dist(site, "rejecting-dist", "1.2", "fxp_rejecting", REJECTED_SOURCE)
    forget_modules("fxp_rejecting")
    reason = (
        "pass 'bad_options' (fxp_rejecting.P): Options must be a pydantic BaseModel subclass "
        "(e.g. fxpasses.PassOptions), got <class 'dict'>"
    )
    r = CliRunner().invoke(cli, ["list"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert "2 rejected" in lines
    rows = [line.split() for line in lines if line.startswith("rejecting-dist 1.2")]
    assert [row[:4] for row in rows[-2:]] == [
        ["rejecting-dist", "1.2", "pass", "bad_options"],
        ["rejecting-dist", "1.2", "preset", "broken_preset"],
    ]
    assert not any(line.split()[:1] == ["bad_options"] for line in lines)  # not listed as a pass
    forget_modules("fxp_rejecting")
    r = CliRunner().invoke(cli, ["list", "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    (plugin,) = [p for p in out["plugins"] if p["distribution"] == "rejecting-dist"]
    assert plugin["rejected"][0] == {"kind": "pass", "name": "bad_options", "reason": reason}
    assert [x["name"] for x in plugin["rejected"]] == ["bad_options", "broken_preset"]
    (builtin,) = [p for p in out["plugins"] if p["entry_point"] == "builtin = fxpasses.builtin_passes"]
    assert builtin["rejected"] == []
    forget_modules("fxp_rejecting")


def test_nameless_registrations_are_in_the_rejected_table_as_what_they_are(site):
    """register(42) and a class without a name were only in the warnings: `fxpasses list`
    left them out of its rejected table (only a name was recorded)."""
    import json

    from click.testing import CliRunner

    from fxpasses.cli import cli

    make_dist(
        site,
        "nameless-dist",
        "0.1",
        "fxp_nameless",
        """
        import fxpasses

        class NoName(fxpasses.GraphPass):
            \"\"\"Has no name.\"\"\"
            def run(self, gm, ctx):
                return False

        @fxpasses.hookimpl
        def fxpasses_register_passes(register):
            register(42)
            register(NoName)
        """,
    )
    forget_modules("fxp_nameless")
    with pytest.warns(fxpasses.PluginWarning):
        reg = Registry()
    (rec,) = [r for r in reg.plugins if r.distribution == "nameless-dist"]
    assert [(x.kind, x.name) for x in rec.rejected] == [("pass", "<42>"), ("pass", "<class fxp_nameless.NoName>")]
    assert rec.status == "failed" and rec.error == (
        "expected a pass class (a subclass of fxpasses.NodePass or fxpasses.GraphPass), got 42 (an int, not a "
        "class); the pass is skipped (not registered); fxp_nameless.NoName has no `name`: give the class one "
        "(`name = \"my_pass\"`, a Python identifier), the name pipelines and configs call it by; the pass is "
        "skipped (not registered)"
    )
    assert [x.reason for x in rec.rejected] == [
        "expected a pass class (a subclass of fxpasses.NodePass or fxpasses.GraphPass), got 42 (an int, not a class)",
        "fxp_nameless.NoName has no `name`: give the class one (`name = \"my_pass\"`, a Python identifier), the "
        "name pipelines and configs call it by",
    ]
    assert rec.problems == [x.reason + "; the pass is skipped (not registered)" for x in rec.rejected]
    # it imported: not "failed to load" where an unknown name lists what was not loaded
    assert reg._not_loaded_labels() == [
        "nameless-dist 0.1 (registered nothing usable: 2 problems, the first: expected a pass class (a subclass "
        "of fxpasses.NodePass or fxpasses.GraphPass), got 42 (an int, not a class); the pass is skipped (not registered))"
    ]
    assert reg.rejected("<42>") and not reg.rejected("NoName")  # (no pipeline can name either)
    forget_modules("fxp_nameless")
    r = CliRunner().invoke(cli, ["list", "--format", "json"])
    assert r.exit_code == 0, r.output
    (plugin,) = [p for p in json.loads(r.stdout)["plugins"] if p["distribution"] == "nameless-dist"]
    assert [x["name"] for x in plugin["rejected"]] == ["<42>", "<class fxp_nameless.NoName>"]
    assert plugin["error"] == rec.error and "problem(s)" not in plugin["error"]
    assert plugin["problems"] == rec.problems
    forget_modules("fxp_nameless")


def test_passes_dropped_with_a_plugin_whose_hook_raised_say_so_when_named(site):
    make_dist(
        site,
        "dropping-dist",
        "0.4",
        "fxp_dropping",
        good_pass_source("dropped_pass").replace(
            "    register(DroppedPassPass)", "    register(DroppedPassPass)\n    raise RuntimeError('half way')"
        ),
    )
    forget_modules("fxp_dropping")
    with pytest.warns(fxpasses.errors.PluginWarning):
        reg = Registry()
    assert "dropped_pass" not in reg
    with pytest.raises(UnknownPassError) as info:
        reg.get("dropped_pass")
    line = str(info.value).splitlines()[1]
    assert line.startswith(
        "(pass 'dropped_pass' was found in plugin dropping-dist 0.4 (entry point dropping-dist = fxp_dropping) "
        "but rejected when the plugin was loaded, so it is not registered until the plugin is fixed: dropped "
        "with the whole plugin: fxpasses_register_passes raised RuntimeError: half way (at "
    )
    # where the hook raised, as for a plugin whose import fails
    assert line.endswith("fxp_dropping.py, line 16: raise RuntimeError('half way')))")
    forget_modules("fxp_dropping")


def test_a_registration_hook_calling_sys_exit_is_a_broken_plugin_not_the_end_of_the_process(site):
    """`sys.exit(6)` in `fxpasses_register_passes` ended `fxpasses.registry()`, every command
    and every torch.compile with the backend (a script that does not catch SystemExit ended),
    where a RuntimeError there is a warning and the plugin skipped (a new-user check)."""
    make_dist(
        site,
        "exiting-dist",
        "0.2",
        "fxp_exiting",
        good_pass_source("exiting_pass").replace("    register(ExitingPassPass)", "    register(ExitingPassPass)\n    import sys\n    sys.exit(6)"),
    )
    forget_modules("fxp_exiting")
    with pytest.warns(fxpasses.errors.PluginWarning, match=r"fxpasses_register_passes raised SystemExit: 6 \(at .*fxp_exiting\.py"):
        reg = Registry()
    assert "exiting_pass" not in reg and "eliminate_dead_code" in reg
    forget_modules("fxp_exiting")


def test_an_empty_name_is_called_empty():
    """`fxpasses show ""` said "unknown pass or preset ''" with a hint that a plugin not loaded
    may have it (a new-user check)."""
    from click.testing import CliRunner

    from fxpasses.cli import cli

    r = CliRunner().invoke(cli, ["show", ""], catch_exceptions=False)
    assert r.exit_code == 2
    assert r.output == "error: empty pass or preset name '': give the name of one (`fxpasses list` shows them)\n"
    with pytest.raises(fxpasses.errors.UnknownPassError) as info:
        fxpasses.Pipeline(["remove_dropout", " "]).plan()
    assert str(info.value) == "pipeline, entry 2: empty pass name ' ': give the name of one (`fxpasses list` shows them)"


@pytest.mark.parametrize("base", [fxpasses.NodePass, fxpasses.GraphPass, fxpasses.passes.Pass])
def test_registering_a_base_class_says_it_is_the_base_class(base):
    """register(fxpasses.NodePass) said "fxpasses.passes.NodePass is not a subclass of
    fxpasses.NodePass or GraphPass", which is false as written (a new-user check)."""
    with pytest.raises(PassDefinitionError) as info:
        Registry(autoload=False).register(base)
    assert str(info.value) == (
        f"fxpasses.passes.{base.__name__} is fxpasses' own base class, not a pass: register a subclass of it that "
        "defines the pass (its name, and hooks or run())"
    )


@pytest.mark.parametrize(
    "registered, shown, name",
    [
        ('"not a class"', "'not a class' (a str, not a class)", "<'not a class'>"),
        ("P()", "<P> (an instance of P, not a class); give the class itself, not an instance", "<P>"),
        ("None", "None (a NoneType, not a class)", "<None>"),
    ],
)
def test_registering_something_not_a_class_names_the_plugin_the_object_and_what_was_expected(site, registered, shown, name):
    make_dist(
        site,
        "not-a-class-dist",
        "2.0",
        "fxp_not_a_class",
        f'''
import fxpasses

class P(fxpasses.GraphPass):
    """Fine."""
    name = "fine_p"
    def run(self, gm, ctx):
        return False
    def __repr__(self):
        return "<P>"

@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register({registered})
''',
    )
    forget_modules("fxp_not_a_class")
    with pytest.warns(fxpasses.errors.PluginWarning):
        reg = Registry()
    (problem,) = [str(p) for p in reg.problems if "not-a-class-dist" in str(p)]
    assert problem == (
        "plugin not-a-class-dist 2.0 (entry point not-a-class-dist = fxp_not_a_class): expected a pass class "
        f"(a subclass of fxpasses.NodePass or fxpasses.GraphPass), got {shown}; the pass is skipped (not registered)"
    )
    (rec,) = [r for r in reg.plugins if r.distribution == "not-a-class-dist"]
    # in list's rejected table as what it is (it has no name)
    assert (rec.status, rec.rejected) == ("failed", [Rejection("pass", name, problem.split(": ", 1)[1].split("; the pass")[0])])
    with pytest.raises(PassDefinitionError, match=r"^expected a pass class .*got 'x' \(a str, not a class\)$"):
        Registry(autoload=False).register("x")
    forget_modules("fxp_not_a_class")


def test_one_plugin_registering_the_same_class_twice_lists_it_once(site):
    make_dist(
        site,
        "twice-dist",
        "1.0",
        "fxp_twice",
        good_pass_source("twice_pass").replace("    register(TwicePassPass)", "    register(TwicePassPass)\n" * 2),
    )
    forget_modules("fxp_twice")
    reg = Registry()
    (rec,) = [r for r in reg.plugins if r.distribution == "twice-dist"]
    assert (rec.status, rec.passes) == ("loaded", ["twice_pass"])
    assert [p for p in reg.problems if "twice-dist" in str(p)] == []
    assert reg.candidates("twice_pass") == [reg.info("twice_pass")]
    forget_modules("fxp_twice")


def test_a_class_registered_twice_into_a_name_in_conflict_is_one_candidate(site):
    """The conflict rules stay (two distributions, one name: neither is used until `prefer`),
    and a plugin registering its class twice is still one candidate, named once."""
    make_dist(site, "dist-a", "1.0", "fxp_twice_a", good_pass_source("twice_shared"))
    make_dist(
        site,
        "dist-b",
        "2.0",
        "fxp_twice_b",
        good_pass_source("twice_shared").replace("    register(TwiceSharedPass)", "    register(TwiceSharedPass)\n" * 2),
    )
    forget_modules("fxp_twice_a", "fxp_twice_b")
    reg = Registry()
    assert [c.distribution for c in reg.candidates("twice_shared")] == ["dist-a", "dist-b"]
    with pytest.raises(DuplicatePassError) as info:
        reg.get("twice_shared")
    assert info.value.sources == ["dist-a 1.0", "dist-b 2.0"]
    assert Registry(prefer={"twice_shared": "dist-b"}).info("twice_shared").distribution == "dist-b"
    forget_modules("fxp_twice_a", "fxp_twice_b")


def test_two_classes_one_name_from_one_plugin_keep_the_first_and_say_so(site):
    """Two classes under one name from one plugin were a conflict between "two-classes-dist
    1.0 and two-classes-dist 1.0" whose `prefer` took the first class and dropped the other
    silently (found by a new-user check): a choice between distributions cannot settle a
    plugin's own mistake. The first class stays, the second is skipped and named."""
    make_dist(
        site,
        "two-classes-dist",
        "1.0",
        "fxp_two_classes",
        good_pass_source("same_name").replace(
            "    register(SameNamePass)", "    register(SameNamePass)\n    register(type('Other', (SameNamePass,), {}))"
        ),
    )
    forget_modules("fxp_two_classes")
    reg = Registry()
    assert [c.cls.__name__ for c in reg.candidates("same_name")] == ["SameNamePass"]
    assert reg.get("same_name").__name__ == "SameNamePass"
    (problem,) = [str(p) for p in reg.problems if "two-classes-dist" in str(p)]
    assert "pass 'same_name' (fxp_two_classes.Other) skipped: two-classes-dist registers another class under this name, " in problem
    assert "fxp_two_classes.SameNamePass (rename one of them)" in problem and "prefer" not in problem
    (rec,) = [r for r in reg.plugins if r.distribution == "two-classes-dist"]
    assert rec.status == "partial" and [x.name for x in rec.rejected] == ["same_name"]
    forget_modules("fxp_two_classes")
    with pytest.raises(PluginError, match="registers another class under this name"):
        Registry(strict=True)
    forget_modules("fxp_two_classes")


def test_disabling_a_name_no_plugin_has_warns_with_the_close_names_and_raises_when_strict(tmp_path):
    """``disable``/``-p no:NAME`` with a typo disabled nothing, silently."""
    with pytest.warns(fxpasses.PluginWarning) as caught:
        reg = Registry(disable=["fxpasses_example_passez"])
    said = [str(w.message) for w in caught if isinstance(w.message, fxpasses.PluginWarning)]
    assert said == [
        "plugin fxpasses-example-passez: disabled with disable/-p no:NAME but no installed plugin has that "
        "name; installed: fxpasses, fxpasses-example-passes; did you mean 'fxpasses-example-passes'?"
    ]
    assert "count_ops" in reg.names()  # the plugin meant stays loaded
    with pytest.raises(PluginError) as info:
        Registry(disable=["nothing-like-it"], strict=True)
    assert str(info.value) == (
        "plugin nothing-like-it: disabled with disable/-p no:NAME but no installed plugin has that name; "
        "installed: fxpasses, fxpasses-example-passes"
    )
    # from a config file's [plugins] table, strict there too
    cfg = tmp_path / "fx.toml"
    cfg.write_text('pipeline = "eliminate_dead_code"\n[plugins]\ndisable = ["typo"]\nstrict = true\n')
    with pytest.raises(PluginError, match="plugin typo: disabled with disable/-p no:NAME"):
        fxpasses.Pipeline.from_config(cfg)
    # an entry point's name disables it as well as its distribution's: no warning for it
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", fxpasses.PluginWarning)
        assert "count_ops" not in Registry(disable=["example"]).names()


CROSS_NAMED_SOURCE = '''
import fxpasses
class Inference(fxpasses.GraphPass):
    """A pass named like the built-in preset."""
    name = "inference"
    def run(self, gm, ctx):
        return False
@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register(Inference)
    register(Inference)  # twice: rejected (and reported) once
@fxpasses.hookimpl
def fxpasses_register_presets(register):
    register("remove_dropout", "eliminate_dead_code", "A preset named like the built-in pass.")
'''


def test_a_plugin_pass_named_like_a_preset_and_a_preset_named_like_a_pass_are_rejected(site):
    """Pass and preset names share one namespace: a plugin's pass named like a registered
    preset, or preset named like a registered pass (built-in or another distribution's), is
    rejected as a pass named like a built-in pass is, with a reason naming both."""
    from click.testing import CliRunner

    from fxpasses.cli import cli

    make_dist(site, "cross-named", "0.3", "fxp_cross_named", CROSS_NAMED_SOURCE)
    # between two plugins: the one loaded first (sorted by distribution) keeps the name
    make_dist(
        site, "cross-a", "1.0", "fxp_cross_a",
        good_pass_source("cross_pass") + '''
@fxpasses.hookimpl
def fxpasses_register_presets(register):
    register("cross_shared", "cross_pass", "A preset of cross-a.")
''',
    )
    make_dist(site, "cross-b", "2.0", "fxp_cross_b", good_pass_source("cross_shared"))
    modules = ("fxp_cross_named", "fxp_cross_a", "fxp_cross_b")
    forget_modules(*modules)
    with pytest.warns(fxpasses.PluginWarning) as caught:
        reg = Registry()
    said = [str(w.message) for w in caught if "cross" in str(w.message)]
    pass_why = (
        "the name is taken by the built-in preset of fxpasses 0.1.0 (pass and preset names share one "
        "namespace; rename the plugin's pass)"
    )
    preset_why = (
        "the name is taken by the built-in pass of fxpasses 0.1.0 (pass and preset names share one "
        "namespace; rename the plugin's preset)"
    )
    other_why = (
        "the name is taken by the preset of cross-a 1.0 (pass and preset names share one namespace; "
        "rename the plugin's pass)"
    )
    assert said == [
        "plugin cross-b 2.0 (entry point cross-b = fxp_cross_b): pass 'cross_shared' "
        f"(fxp_cross_b.CrossSharedPass) skipped: {other_why}",
        "plugin cross-named 0.3 (entry point cross-named = fxp_cross_named): pass 'inference' "
        f"(fxp_cross_named.Inference) skipped: {pass_why}",
        f"plugin cross-named 0.3 (entry point cross-named = fxp_cross_named): preset 'remove_dropout' skipped: {preset_why}",
    ]
    (rec,) = [r for r in reg.plugins if r.distribution == "cross-named"]
    assert rec.rejected == [Rejection("pass", "inference", pass_why), Rejection("preset", "remove_dropout", preset_why)]
    # the names keep their built-in meaning
    assert "inference" not in reg and reg.preset("inference").distribution == "fxpasses"
    assert reg.info("remove_dropout").distribution == "fxpasses" and "remove_dropout" not in reg.presets()
    assert "cross_shared" not in reg and reg.preset("cross_shared").distribution == "cross-a"
    with pytest.raises(UnknownPassError) as info:
        fxpasses.Pipeline.from_string("inference", registry=reg)
    lines = str(info.value).splitlines()
    assert lines[1] == (
        "(pass 'inference' was found in plugin cross-named 0.3 (entry point cross-named = fxp_cross_named) but "
        f"rejected when the plugin was loaded, so it is not registered until the plugin is fixed: {pass_why})"
    )
    assert lines[2].startswith("('inference' is a preset (a named pipeline), not a pass: ")
    steps = fxpasses.Pipeline.from_preset("inference", registry=reg).plan().steps
    assert [s.name for s in steps] == [s.name for s in fxpasses.Pipeline.from_string(reg.preset("inference").pipeline, registry=reg).plan().steps]
    assert all(s.cls.__module__.startswith("fxpasses.") for s in steps)  # not the plugin's pass
    # `fxpasses list` shows them in its rejected table; `fxpasses show` the built-in preset
    forget_modules(*modules)
    r = CliRunner().invoke(cli, ["list"])
    assert r.exit_code == 0, r.output
    rows = [line.split()[:4] for line in r.output.splitlines() if line.startswith(("cross-named 0.3", "cross-b 2.0"))]
    assert ["cross-named", "0.3", "pass", "inference"] in rows
    assert ["cross-named", "0.3", "preset", "remove_dropout"] in rows
    assert ["cross-b", "2.0", "pass", "cross_shared"] in rows
    forget_modules(*modules)
    r = CliRunner().invoke(cli, ["show", "inference"])
    assert r.exit_code == 0, r.output
    assert "inference (preset)" in r.output and "source:   fxpasses 0.1.0" in r.output
    forget_modules(*modules)
    with pytest.raises(PluginError) as info:
        Registry(strict=True)
    assert str(info.value) == said[0].replace(") skipped:", ") refused (strict mode):")  # (an error, not skipped)
    forget_modules(*modules)


def test_a_misspelled_unmarked_hook_beside_a_marked_one_is_reported(site):
    """``fxpasses_register_pass`` beside a marked hook was ignored in silence (it was reported
    only when it was the plugin's only function); a helper without the prefix is not."""
    make_dist(
        site,
        "typo-hook",
        "0.1",
        "fxp_typo_hook",
        good_pass_source("typo_hook_pass")
        + """
def fxpasses_register_pass(register):  # misspelled, not marked
    register(None)

def register_passes(register):  # the plugin's own helper
    pass
""",
    )
    forget_modules("fxp_typo_hook")
    with pytest.warns(fxpasses.PluginWarning) as caught:
        reg = Registry()
    assert [str(w.message) for w in caught if "typo-hook" in str(w.message)] == [
        "plugin typo-hook 0.1 (entry point typo-hook = fxp_typo_hook): misspelled hook: fxpasses_register_pass is "
        "not an fxpasses hook; did you mean 'fxpasses_register_passes' or 'fxpasses_register_presets'? (a hook method "
        "is named exactly after its "
        "hook, fxpasses_..., and marked @fxpasses.hookimpl; rename a method that is not meant as one, or start its "
        "name with '_')"
    ]
    (rec,) = [r for r in reg.plugins if r.distribution == "typo-hook"]
    assert rec.status == "partial" and rec.passes == ["typo_hook_pass"]
    forget_modules("fxp_typo_hook")


def test_an_instrument_plugin_with_a_misspelled_helper_is_partial_not_failed(site):
    """A plugin of instrument hooks only, beside a misspelled one, was listed "failed" and said
    to have failed to load, while its marked hooks ran on every pass (an adversarial check)."""
    make_dist(
        site,
        "instr-typo",
        "0.1",
        "fxp_instr_typo",
        """
import fxpasses

SEEN = []

@fxpasses.hookimpl
def fxpasses_before_pass(pass_name, gm, ctx):
    SEEN.append(pass_name)

def fxpasses_pass_faild(pass_name, error):  # misspelled, not marked
    pass
""",
    )
    forget_modules("fxp_instr_typo")
    with pytest.warns(fxpasses.PluginWarning, match="misspelled hook: fxpasses_pass_faild"):
        reg = Registry()
    (rec,) = [r for r in reg.plugins if r.distribution == "instr-typo"]
    assert rec.status == "partial"
    import fxp_instr_typo

    fxpasses.Pipeline(["eliminate_dead_code"], registry=reg).run(torch.fx.symbolic_trace(torch.nn.ReLU()))
    assert fxp_instr_typo.SEEN == ["eliminate_dead_code"]
    forget_modules("fxp_instr_typo")


def test_an_unmarked_hook_beside_a_marked_one_is_reported(site):
    """An unmarked function named after a hook is never called, whether or not the plugin's
    other hooks are marked: reported then too (not only when it is the plugin's only one)."""
    make_dist(
        site,
        "half-marked",
        "0.7",
        "fxp_half_marked",
        good_pass_source("half_marked_pass")
        + '''
def fxpasses_register_presets(register):  # not marked
    register("half_marked_preset", "half_marked_pass", "Never registered.")
''',
    )
    forget_modules("fxp_half_marked")
    with pytest.warns(fxpasses.PluginWarning) as caught:
        reg = Registry()
    message = (
        "plugin half-marked 0.7 (entry point half-marked = fxp_half_marked): unmarked hook: "
        "fxpasses_register_presets is named after the hook but not marked @fxpasses.hookimpl, so pluggy "
        "never calls it: decorate it with @fxpasses.hookimpl"
    )
    assert [str(w.message) for w in caught if "half-marked" in str(w.message)] == [message]
    (rec,) = [r for r in reg.plugins if r.distribution == "half-marked"]
    assert rec.status == "partial" and rec.passes == ["half_marked_pass"]
    assert rec.error == message.split(": ", 1)[1]  # the problem itself, without the plugin's name
    assert "half_marked_pass" in reg and "half_marked_preset" not in reg.presets()
    forget_modules("fxp_half_marked")
    with pytest.raises(PluginError) as info:
        Registry(strict=True)
    assert str(info.value) == message
    forget_modules("fxp_half_marked")


def test_a_misspelt_op_kind_in_on_gets_the_closest_kind():
    """`@on(op="call_fuction")` named the kinds but not the one meant (found by a new-user check)."""
    from fxpasses import PassDefinitionError, on

    with pytest.raises(PassDefinitionError) as info:
        on(op=("call_fuction", "call_metod"))
    assert str(info.value) == (
        "on(): unknown op kind(s) ['call_fuction', 'call_metod']; expected one of placeholder, get_attr, "
        "call_function, call_method, call_module, output; did you mean 'call_function' for 'call_fuction', "
        "'call_method' for 'call_metod'?"
    )
    with pytest.raises(PassDefinitionError) as info:
        on(op="zzz")
    assert str(info.value).endswith("call_module, output")


def test_warnings_point_at_the_users_line_not_at_fxpasses(site, monkeypatch):
    """A plugin's problem, a broken instrument and a misspelt @on were attributed to a line of
    fxpasses (``registry.py:384``: the default registry is made inside fxpasses) or of pluggy:
    each now points at the user's line that caused it, as Python 3.12's ``skip_file_prefixes``
    would."""
    import warnings

    import torch

    from fxpasses import Pipeline

    make_dist(site, "broken-w", "1.0", "fxp_broken_w", "raise ImportError('no such dependency: missing_lib')\n")
    forget_modules("fxp_broken_w")
    monkeypatch.setattr(sys.modules["fxpasses.registry"], "_default", None)  # the test's own, put back after
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        fxpasses.registry()
    (w,) = [w for w in record if "broken-w" in str(w.message)]
    assert (w.filename, w.lineno) == (__file__, line)

    class Broken:
        @fxpasses.hookimpl
        def fxpasses_after_pass(self, pass_name, gm, ctx, report):
            raise ValueError("broken instrument")

    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Dropout(), torch.nn.ReLU()))
    pipe = Pipeline.from_string("remove_dropout", registry=fxpasses.registry())
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        pipe.run(gm, [torch.ones(2)], instruments=[Broken()])
    (w,) = [w for w in record if "broken instrument" in str(w.message)]
    assert (w.filename, w.lineno) == (__file__, line)

    class Typo(fxpasses.NodePass):
        """Subscribes to a misspelt op."""

        name = "typo_where"

        @fxpasses.on("mull")
        def h(self, node, ctx):
            return None

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        Registry(autoload=False).register(Typo)
    (w,) = record
    assert (w.filename, w.lineno) == (__file__, line)

    # the torch.compile backend, called from inside torch
    compiled = torch.compile(torch.nn.ReLU(), backend="fxpasses", options={"pipeline": "eliminate_dead_code", "plugins": {"disable": ["no-such-plugin-dist"]}})
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        compiled(torch.randn(3))
    (w,) = [w for w in record if "no-such-plugin-dist" in str(w.message)]
    assert (w.filename, w.lineno) == (__file__, line), (w.filename, w.lineno)


TWICE_SOURCE = """
import fxpasses


class NoName(fxpasses.GraphPass):
    '''Has no name.'''

    def run(self, gm, ctx):
        return False


@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register(NoName)
    register(NoName)
"""


def test_a_bad_class_registered_twice_is_one_problem(site):
    """It was warned about twice (the rejected table listed it once; a new-user check)."""
    make_dist(site, "twice-dist", "1.0", "fxp_twice", TWICE_SOURCE)
    forget_modules("fxp_twice")
    reg = Registry()
    (rec,) = [r for r in reg.plugins if r.distribution == "twice-dist"]
    assert rec.status == "failed" and len(rec.problems) == 1
    assert len([p for p in reg.problems if "twice-dist" in str(p)]) == 1


def test_a_failed_entry_point_of_a_distribution_with_several_is_named(site):
    """Both entry points of one distribution failed: each was "failed to load", as if the
    distribution had one; each is named (a new-user check)."""
    make_dist(
        site, "two-bad", "1.0", "fxp_two_bad_a", "raise ImportError('no a')\n",
        entry_points={"first": "fxp_two_bad_a", "second": "fxp_two_bad_b"},
    )
    (site / "fxp_two_bad_b.py").write_text("raise ImportError('no b')\n")
    forget_modules("fxp_two_bad_a", "fxp_two_bad_b")
    reg = Registry()
    with pytest.raises(UnknownPassError) as info:
        reg.get("nothing_like_it")
    not_loaded = str(info.value).split("installed but not loaded: ")[1]
    assert "two-bad 1.0 (entry point 'first = fxp_two_bad_a' failed to load: import failed: ImportError: no a" in not_loaded
    assert "two-bad 1.0 (entry point 'second = fxp_two_bad_b' failed to load: import failed: ImportError: no b" in not_loaded


RAISES_AND_UNMARKED_SOURCE = """
import fxpasses


@fxpasses.hookimpl
def fxpasses_register_passes(register):
    raise RuntimeError("not today")


def fxpasses_register_presets(register):  # not marked: pluggy never calls it
    register("fast", "eliminate_dead_code", "")
"""


def test_an_unmarked_hook_is_reported_beside_a_hook_that_raises(site):
    """The plugin failed on the raising hook alone; the unmarked hook beside it was said
    only once that was fixed (a plugin author then fixes two things one at a time)."""
    make_dist(site, "raises-unmarked", "1.0", "fxp_raises_unmarked", RAISES_AND_UNMARKED_SOURCE)
    forget_modules("fxp_raises_unmarked")
    reg = Registry()
    (rec,) = [r for r in reg.plugins if r.distribution == "raises-unmarked"]
    assert rec.status == "failed"
    assert re.match(
        r"fxpasses_register_passes raised RuntimeError: not today \(at .*fxp_raises_unmarked\.py, line \d+: .*\); also: fxpasses_register_presets ",
        rec.error,
    ), rec.error
    assert "@fxpasses.hookimpl" in rec.error


class _Mode(enum.Enum):
    safe = "safe"
    fast = "fast"


def test_show_gives_defaults_as_a_config_writes_them_and_lists_enum_choices(capsys):
    """`show` gave an Enum default as "<Mode.safe: 'safe'>" and a Path as
    "PosixPath('x.txt')", text and JSON, and listed no choices for an Enum option (found by a
    new-user check); a config writes `mode = "safe"`."""
    import json

    from fxpasses.cli import _show_text

    Mode = _Mode

    class Modal(fxpasses.GraphPass):
        """Modal."""

        name = "modal_pass"

        class Options(fxpasses.PassOptions):
            mode: _Mode = _Mode.safe
            maybe: Optional[_Mode] = None
            out: Path = Path("x.txt")
            sizes: tuple[int, ...] = (1, 2)

        def run(self, gm, ctx):
            return False

    reg = Registry(autoload=False)
    reg.register(Modal)
    d = reg.describe("modal_pass")
    assert [o.default for o in d.options] == [Mode.safe, None, Path("x.txt"), (1, 2)]  # the Python values
    as_json = json.loads(json.dumps(d.as_dict()))
    assert [o["default"] for o in as_json["options"]] == ["safe", None, "x.txt", [1, 2]]
    assert [o.constraints for o in d.options] == ["one of 'safe', 'fast'", "one of 'safe', 'fast'", "", ""]
    _show_text(d)
    out = capsys.readouterr().out
    # as a pipeline string writes them: --pipeline takes what the column shows
    rows = {line.split()[0]: line.split()[-1] for line in out.splitlines() if line.split()[:1] in (["mode"], ["maybe"], ["out"], ["sizes"])}
    assert rows == {"mode": "safe", "maybe": "none", "out": "x.txt", "sizes": "[1,2]"}
    assert "Mode.safe" not in out and "PosixPath" not in out
    assert "_Mode (one of 'safe', 'fast')" in out


def test_show_gives_a_nested_models_default_as_a_table_that_reads_back(capsys):
    """A nested model's default was shown as a Python dict (`{'low': -1.0, 'tag': None}`),
    which a pipeline string does not read (a new-user check)."""
    from fxpasses.cli import _show_text

    class Inner(fxpasses.PassOptions):
        low: float = -1.0
        tag: Optional[str] = None

    class Options(fxpasses.PassOptions):
        inner: Inner = Inner()

    reg = Registry(autoload=False)
    reg.register(type("NestedShow", (fxpasses.GraphPass,), {"__doc__": "x", "name": "nested_show", "Options": Options, "run": lambda self, gm, ctx: False}))
    _show_text(reg.describe("nested_show"))
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("inner ")]
    shown = row.split()[2]
    assert shown == "{low=-1.0,tag=none}"
    assert fxpasses.Pipeline.from_string(f"nested_show{{inner={shown}}}", registry=reg).plan().steps[0].options == Options()


def _shown_option_rows(options, name, capsys, *, notes=True):
    """The option rows `fxpasses show` prints for a pass ``name`` with ``options`` (cells
    joined by one space; ``notes``: the line under the table too)."""
    from fxpasses.cli import _show_text

    reg = Registry(autoload=False)
    reg.register(type("Shown", (fxpasses.GraphPass,), {"__doc__": "x", "name": name, "Options": options, "run": lambda self, gm, ctx: False}))
    _show_text(reg.describe(name))
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("option "))
    return [" ".join(line.split()) for line in lines[start + 2 :] if line.strip() and (notes or not line.startswith("("))], reg


class _ShownTiling(fxpasses.PassOptions):
    """A nested options model (for the `show` tests below)."""

    size: int = pydantic.Field(16, ge=1, description="tile edge in elements")
    order: Literal["row.major", "col.major"] = "row.major"


class _ShownItem(fxpasses.PassOptions):
    low: float = -1.0
    need: int


class _ShownTree(fxpasses.PassOptions):
    child: Optional["_ShownTree"] = None
    v: int = 1


def test_show_lists_the_fields_of_nested_options_models_by_their_paths(capsys):
    """`fxpasses show` printed a nested model option as one row (`tiling  Tiling
    {size=16,...}`): its fields' types, constraints, defaults and descriptions were nowhere to
    be read (noticed in an earlier session)."""

    class Options(fxpasses.PassOptions):
        tiling: _ShownTiling = _ShownTiling(size=8)
        alt: Optional[_ShownTiling] = None
        many: list[_ShownItem] = []
        by_name: dict[str, _ShownItem] = {}
        tree: _ShownTree = _ShownTree()

    rows, reg = _shown_option_rows(Options, "nested_rows", capsys)
    assert rows == [
        "tiling _ShownTiling {size=8,order=row.major}",
        # a field's own default: what a table given for `tiling` leaves out takes (the
        # loader validates the table as a whole), said in the line under the table
        "tiling.size int (>= 1) 16 tile edge in elements",
        "tiling.order Literal['row.major', 'col.major'] row.major",
        "alt Optional[_ShownTiling] none",
        "alt.size int (>= 1) 16 tile edge in elements",
        "alt.order Literal['row.major', 'col.major'] row.major",
        "many list[_ShownItem] []",
        "many[].low float -1.0",
        "many[].need int (required)",
        "by_name dict[str, _ShownItem] {}",
        "by_name.<key>.low float -1.0",
        "by_name.<key>.need int (required)",
        "tree _ShownTree {child=none,v=1}",
        # a model inside itself is listed once
        "tree.child Optional[_ShownTree] none",
        "tree.v int 1",
        "(a table given for an option holding a model replaces the option's default as a whole: the fields it "
        "leaves out take the defaults listed for them)",
    ]
    # which is what the loader does
    steps = fxpasses.Pipeline.from_string("nested_rows{tiling={order=col.major}}", registry=reg).plan().steps
    assert steps[0].options.tiling == _ShownTiling(size=16, order="col.major")
    shown = reg.describe("nested_rows").as_dict()["options"][0]
    assert shown["default"] == {"size": 8, "order": "row.major"}
    assert [(f["name"], f["default"], f["constraints"]) for f in shown["fields"]] == [
        ("tiling.size", 16, ">= 1"),
        ("tiling.order", "row.major", ""),
    ]


def test_enabling_a_missing_plugin_does_not_suggest_the_built_in_passes_distribution():
    """`enable = ["acme-passes"]` with the plugin uninstalled said "did you mean 'fxpasses'?",
    the built-in passes' distribution, always loaded (a new-user check)."""
    from fxpasses.errors import PluginError

    with pytest.raises(PluginError) as info:
        Registry(enable=["acme-passes"])
    assert "did you mean" not in str(info.value) and "requested with enable/-p but not installed" in str(info.value)
    with pytest.raises(PluginError) as info:
        Registry(enable=["fxpasses-example-pases"])
    assert "did you mean 'fxpasses-example-passes'?" in str(info.value)


def test_a_bare_sys_exit_is_named_as_such_in_messages():
    from fxpasses.errors import exception_text

    assert exception_text(SystemExit()) == "SystemExit (sys.exit() with no code)"
    assert exception_text(SystemExit(3)) == "SystemExit: 3"


EAGER_REGISTERING = """
import fxpasses


class EagerPass(fxpasses.GraphPass):
    \"\"\"Registered at import time.\"\"\"

    name = "eager_pass"

    def run(self, gm, ctx):
        return False


fxpasses.registry().register(EagerPass)
""" + good_pass_source("hooked_pass")


SLOW_IMPORT = """
import sys

gate = sys.modules["_fxp_gate"]
gate.started.set()
gate.release.wait(30)  # the import goes on when the test says so
""" + good_pass_source("slow_pass")


def test_registries_loading_in_two_threads_at_once_both_load_every_plugin(site, monkeypatch):
    """The first use of the registry from several threads at once (a server optimizing models
    in worker threads; a new-user check: 1 or 2 of 8 threads found the built-in passes): a
    thread whose registry found a plugin module another thread was importing took it as
    half-imported ("was still being imported ... fxpasses.registry() at import time?"), and
    fxpasses.registry() called while another thread's registry imported a plugin raised
    "called while a registry is importing its plugins". Now the second waits for the import,
    as Python's import lock makes it, and each registry loads the plugin."""
    import threading
    import types

    registry_module = sys.modules["fxpasses.registry"]
    gate = types.ModuleType("_fxp_gate")
    gate.started, gate.release = threading.Event(), threading.Event()
    monkeypatch.setitem(sys.modules, "_fxp_gate", gate)
    make_dist(site, "slow-dist", "1.0", "fxp_slow", SLOW_IMPORT)
    forget_modules("fxp_slow")
    monkeypatch.setattr(registry_module, "_default", None)
    made: dict[str, object] = {}

    def build(key, make):
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                made[key] = (make(), [str(w.message) for w in caught])
        except Exception as exc:  # noqa: BLE001 - the test reads it
            made[key] = exc

    first = threading.Thread(target=build, args=("first", Registry))
    first.start()
    assert gate.started.wait(30)  # the first registry is importing fxp_slow now
    second = threading.Thread(target=build, args=("second", fxpasses.registry))
    second.start()
    second.join(3)
    assert second.is_alive(), made.get("second")  # waiting for the import, not failed
    gate.release.set()
    first.join(30)
    second.join(30)
    for key in ("first", "second"):
        reg, said = made[key]
        assert "slow_pass" in reg, (key, said)
        assert [p.status for p in reg.plugins if p.distribution == "slow-dist"] == ["loaded"]
        assert not [m for m in said if "slow-dist" in m or "still being imported" in m], said
    assert registry_module._default is made["second"][0]


def test_a_plugin_building_the_default_registry_as_it_is_imported_is_named(site, monkeypatch):
    """A plugin calling fxpasses.registry() at import time: (a) while the default registry was
    being built, its pass went into an inner registry the outer one then replaced, lost
    without a word; (b) imported first, the registry it built loaded it half-imported (no
    hooks yet) and became the default, without its hook passes (an adversarial check)."""
    import sys

    registry_module = sys.modules["fxpasses.registry"]
    make_dist(site, "eager-dist", "1.0", "fxp_eager", EAGER_REGISTERING)
    forget_modules("fxp_eager")
    monkeypatch.setattr(registry_module, "_default", None)
    with pytest.warns(fxpasses.errors.PluginWarning) as caught:
        reg = fxpasses.registry()
    said = [str(w.message) for w in caught if "eager-dist" in str(w.message)]
    assert len(said) == 1 and "import failed: UserError: fxpasses.registry() was called while a registry is importing its plugins" in said[0], said
    assert "fxp_eager.py, line 14: fxpasses.registry().register(EagerPass)" in said[0]  # (the plugin's line)
    assert "eager_pass" not in reg and "hooked_pass" not in reg and reg is fxpasses.registry()
    # the same where a registry is built directly, as the CLI does (the plugin showed as
    # loaded there, its import-time pass lost without a word: a second check)
    for default in (None, reg):  # (with a default registry the plugin's pass went into that one)
        forget_modules("fxp_eager")
        monkeypatch.setattr(registry_module, "_default", default)
        with pytest.warns(fxpasses.errors.PluginWarning, match="import failed: UserError: fxpasses.registry"):
            direct = Registry()
        assert [p.status for p in direct.plugins if p.distribution == "eager-dist"] == ["failed"]
        assert "eager_pass" not in reg
    # (b) the plugin imported first: the registry its import built is not kept
    forget_modules("fxp_eager")
    monkeypatch.setattr(registry_module, "_default", None)
    with pytest.warns(fxpasses.errors.PluginWarning, match="was still being imported when the registry loaded it"):
        import fxp_eager  # noqa: F401
    assert registry_module._default is None
    reg = fxpasses.registry()  # built anew, now that the plugin is imported: its hooks are there
    assert "hooked_pass" in reg and "eager_pass" not in reg
    assert not [p for p in reg.plugins if p.distribution == "eager-dist" and p.status != "loaded"]
    forget_modules("fxp_eager")
    sys.modules.pop("fxp_eager", None)


def test_show_names_the_union_member_of_each_nested_field_and_a_fixed_tuples_positions(capsys):
    """A union's members' fields were listed under one path with nothing saying whose each
    was (`pet.kind` twice), and `tuple[Cat, Dog]` as `pets[].kind`, as if a list (an
    adversarial check)."""
    from typing import Union

    class Cat(pydantic.BaseModel):
        kind: Literal["cat"] = "cat"
        lives: int = 9

    class Dog(pydantic.BaseModel):
        kind: Literal["dog"] = "dog"

    class Options(fxpasses.PassOptions):
        pet: Union[Cat, Dog] = Cat()
        pair: tuple[Cat, Dog] = (Cat(), Dog())

    rows, _ = _shown_option_rows(Options, "pets_shown", capsys, notes=False)
    assert rows == [
        "pet Union[Cat, Dog] {kind=cat,lives=9}",
        "pet.kind Literal['cat'] cat (Cat)",
        "pet.lives int 9 (Cat)",
        "pet.kind Literal['dog'] dog (Dog)",
        "pair tuple[Cat, Dog] [{kind=cat,lives=9},{kind=dog}]",
        "pair[0].kind Literal['cat'] cat",
        "pair[0].lives int 9",
        "pair[1].kind Literal['dog'] dog",
    ]


def test_show_lists_a_model_met_again_under_one_option_once_and_enum_literals_by_name(capsys):
    """A model reached twice under one option was listed in full each time: a chain of models
    each holding two of the next gave 2**depth rows (depth 17: 393,215 rows, 5.7 s); and a
    Literal of enum members printed as `Literal[<RED: 'red, ...]` (a second check)."""
    import enum as enum_module
    from typing import Optional

    class Color(enum_module.Enum):
        RED = "red"
        BLUE = "blue"

    level = None
    for i in range(12):
        ann = {"v": int} if level is None else {"a": Optional[level], "b": Optional[level]}
        level = type(f"L{i}", (pydantic.BaseModel,), {"__annotations__": ann, **({"v": 0} if i == 0 else {"a": None, "b": None})})

    class Options(fxpasses.PassOptions):
        top: Optional[level] = None
        color: Literal[Color.RED, Color.BLUE] = Color.RED

    rows, _ = _shown_option_rows(Options, "dag_shown", capsys, notes=False)
    assert len(rows) < 40, len(rows)  # linear in the models, not 2**12
    assert "top.b Optional[L10] none (L10's fields as under top.a)" in rows, rows[:6]
    assert "color Literal[Color.RED, Color.BLUE] red" in rows, rows[-3:]


CYCLE_SOURCE = '''
import fxpasses
from fxpasses import GraphPass


def declaring(name, **ordering):
    return type(name, (GraphPass,), {"__doc__": "A pass.", "name": name, "run": lambda self, gm, ctx: False, **ordering})


CLASSES = [
    declaring("cyc_a", requires=("cyc_b",)),
    declaring("cyc_b", requires=("cyc_a",)),
    declaring("req_missing", requires=("no_such_required",)),
]


@fxpasses.hookimpl
def fxpasses_register_passes(register):
    for cls in CLASSES:
        register(cls)
'''


_CYCLE_DECLARATIONS = '''    declaring("cyc_a", requires=("cyc_b",)),
    declaring("cyc_b", requires=("cyc_a",)),
    declaring("req_missing", requires=("no_such_required",)),'''


def declaring_source(declarations: str) -> str:
    """:data:`CYCLE_SOURCE` registering the passes of these ``declaring(...)`` lines instead."""
    assert _CYCLE_DECLARATIONS in CYCLE_SOURCE
    return CYCLE_SOURCE.replace(_CYCLE_DECLARATIONS, declarations)


def test_passes_whose_requires_form_a_cycle_are_reported_when_their_plugin_loads(site):
    """Plugin passes cyc_a and cyc_b, each requiring the other, were listed as loaded with no
    warning and could never be used; the ordering error came only when one was used, and did
    not name their distribution (an adversarial check)."""
    make_dist(site, "advcfg-cycle", "0.0.1", "fxp_advcfg_cycle", CYCLE_SOURCE)
    forget_modules("fxp_advcfg_cycle")
    problem = (
        "pass ordering cycle: cyc_a -> cyc_b -> cyc_a (because: cyc_b (advcfg-cycle 0.0.1) requires cyc_a; "
        "cyc_a (advcfg-cycle 0.0.1) requires cyc_b): cyc_a and cyc_b can never be used (a pipeline holding one "
        "pulls in the passes it requires, and with them the cycle); fix their requires, after and before"
    )
    with pytest.warns(fxpasses.errors.PluginWarning) as caught:
        reg = Registry()
    assert [str(w.message) for w in caught if "ordering cycle" in str(w.message)] == [f"plugin advcfg-cycle 0.0.1: {problem}"]
    (rec,) = [r for r in reg.plugins if r.distribution == "advcfg-cycle"]
    missing = (
        "pass 'req_missing' requires 'no_such_required', which no installed plugin registers: it can never be used "
        "until one is registered (a pipeline holding it pulls in what it requires)"
    )
    assert (rec.status, rec.problems) == ("partial", [problem, missing])
    # using one: the ordering error names the distribution too, as an unknown required pass's does
    with pytest.raises(fxpasses.CycleError) as info:
        fxpasses.Pipeline.from_string("cyc_a", registry=reg)
    assert str(info.value) == (
        "pass ordering cycle: cyc_b -> cyc_a -> cyc_b\n"
        "because: cyc_a (advcfg-cycle 0.0.1) requires cyc_b; cyc_b (advcfg-cycle 0.0.1) requires cyc_a"
    )
    # a requires no registered pass has is reported as the plugin loads too (a pass-author
    # check: it came only when a pipeline named the pass)
    assert [str(w.message) for w in caught if "req_missing" in str(w.message)] == [f"plugin advcfg-cycle 0.0.1: {missing}"]
    with pytest.raises(UnknownPassError, match=r"required by pass 'req_missing' \(advcfg-cycle 0.0.1\)"):
        fxpasses.Pipeline.from_string("req_missing", registry=reg)
    forget_modules("fxp_advcfg_cycle")
    with pytest.raises(PluginError) as raised:
        Registry(strict=True)
    assert str(raised.value) == f"plugin advcfg-cycle 0.0.1: {problem}"
    forget_modules("fxp_advcfg_cycle")


def test_a_cycle_report_says_which_passes_are_on_it_and_which_on_other_cycles_through_it(site):
    """The report of an ordering cycle said "cyc_pass, eliminate_dead_code, fuse_linear_act and
    remove_dropout cannot all be in one pipeline" of a cycle through three of them, naming an
    unrelated plugin's pass (a pass-author check): that pass is on another cycle through them
    (its own after/before close one), and is now said to be so."""
    make_dist(
        site,
        "order-scc",
        "1.0",
        "fxp_order_scc",
        declaring_source(
            '''    declaring("scc_a", after=("scc_b",)),
    declaring("scc_b", after=("scc_a",)),
    declaring("scc_c", after=("scc_b",), before=("scc_a",)),''',
        ),
    )
    forget_modules("fxp_order_scc")
    with pytest.warns(fxpasses.errors.PluginWarning) as caught:
        Registry()
    assert [str(w.message) for w in caught if "cycle" in str(w.message)] == [
        "plugin order-scc 1.0: pass ordering cycle: scc_a -> scc_b -> scc_a (because: scc_b (order-scc 1.0) declares "
        "after = scc_a; scc_a (order-scc 1.0) declares after = scc_b): scc_a and scc_b cannot all be in one pipeline, "
        "nor with them scc_c (on other cycles through them); fix their requires, after and before",
    ]
    forget_modules("fxp_order_scc")


def test_every_ordering_cycle_among_plugin_passes_is_reported_once_with_what_it_stops(site):
    """The whole kind: cycles through after/before too (such passes can each be used alone, not
    together), a pass requiring one into a cycle (never usable), and a cycle across two
    distributions (each pass named with its own)."""
    make_dist(
        site,
        "order-one",
        "1.0",
        "fxp_order_one",
        declaring_source(
            '''    declaring("aft_a", after=("aft_b",)),
    declaring("aft_b", before=("aft_a",), after=("aft_a",)),
    declaring("mix_a", requires=("mix_b",)),
    declaring("mix_b", after=("mix_a",)),
    declaring("two_a", requires=("two_b",)),''',
        ),
    )
    make_dist(
        site,
        "order-two",
        "2.0",
        "fxp_order_two",
        declaring_source(
            '''    declaring("two_b", requires=("two_a",)),
    declaring("uses_two", requires=("two_b",)),''',
        ),
    )
    forget_modules("fxp_order_one", "fxp_order_two")
    with pytest.warns(fxpasses.errors.PluginWarning) as caught:
        reg = Registry()
    assert [str(w.message) for w in caught if "cycle" in str(w.message)] == [
        "plugin order-one 1.0: pass ordering cycle: aft_a -> aft_b -> aft_a (because: aft_b (order-one 1.0) declares "
        "after = aft_a; aft_a (order-one 1.0) declares after = aft_b): aft_a and aft_b cannot all be in one pipeline; "
        "fix their requires, after and before",
        "plugin order-one 1.0: pass ordering cycle: mix_a -> mix_b -> mix_a (because: mix_b (order-one 1.0) declares "
        "after = mix_a; mix_a (order-one 1.0) requires mix_b): mix_a and mix_b cannot all be in one pipeline; mix_a can "
        "never be used (a pipeline holding it pulls in the passes it requires, and with them the cycle); fix their "
        "requires, after and before",
        "plugin order-one 1.0 and order-two 2.0: pass ordering cycle: two_a -> two_b -> two_a (because: two_b "
        "(order-two 2.0) requires two_a; two_a (order-one 1.0) requires two_b): two_a, two_b and uses_two can never "
        "be used (a pipeline holding one pulls in the passes it requires, and with them the cycle); fix their "
        "requires, after and before",
    ]
    assert {r.distribution: r.status for r in reg.plugins if r.distribution.startswith("order-")} == {
        "order-one": "partial",
        "order-two": "partial",
    }
    # each alone is fine; mix_b alone too
    for usable in ("aft_a", "aft_b", "mix_b"):
        assert fxpasses.Pipeline.from_string(usable, registry=reg).plan().names() == [usable]
    with pytest.raises(fxpasses.CycleError) as info:
        fxpasses.Pipeline.from_string("aft_a,aft_b", registry=reg)
    assert str(info.value).splitlines()[1] == (
        "because: aft_b (order-one 1.0) declares after = aft_a; aft_a (order-one 1.0) declares after = aft_b"
    )
    with pytest.raises(fxpasses.CycleError) as info:
        fxpasses.Pipeline.from_string("uses_two", registry=reg)
    assert str(info.value).splitlines()[1] == "because: two_b (order-two 2.0) requires two_a; two_a (order-one 1.0) requires two_b"
    forget_modules("fxp_order_one", "fxp_order_two")


def test_a_plugin_object_whose_passes_close_a_cycle_is_reported_once():
    """register_plugin checks the cycles its passes make with those registered already; a
    cycle is reported once however often the check runs."""

    def declaring(name, **ordering):
        return type(name, (fxpasses.GraphPass,), {"__doc__": "A pass.", "name": name, "run": lambda self, gm, ctx: False, **ordering})

    first, second = declaring("obj_a", after=("obj_b",)), declaring("obj_b", after=("obj_a",))

    class One:
        @fxpasses.hookimpl
        def fxpasses_register_passes(self, register):
            register(first)

    class Two:
        @fxpasses.hookimpl
        def fxpasses_register_passes(self, register):
            register(second)

    reg = Registry(autoload=False)
    reg.register_plugin(One(), name="obj-one")
    assert reg.problems == []
    reg.register_plugin(Two(), name="obj-two")
    reg.register_plugin(type("Three", (), {})(), name="obj-three")  # (no hooks: its own problem only)
    assert [str(p) for p in reg.problems if "cycle" in str(p)] == [
        "plugin obj-one and obj-two: pass ordering cycle: obj_a -> obj_b -> obj_a (because: obj_b (obj-two) declares "
        "after = obj_a; obj_a (obj-one) declares after = obj_b): obj_a and obj_b cannot all be in one pipeline; fix "
        "their requires, after and before"
    ]


def test_a_plugin_pass_requiring_a_misspelt_pass_is_reported_as_it_loads():
    """`requires = ("propagate_shape",)` was listed as loaded; only a pipeline holding the pass
    said "unknown pass 'propagate_shape'; did you mean 'propagate_shapes'?" (a pass-author
    check). The plugin is now partial, with that said when it loads."""
    import types

    class MissingReq(fxpasses.GraphPass):
        """Requires a misspelt pass."""

        name = "missing_req"
        requires = ("propagate_shape",)

        def run(self, gm, ctx):
            return False

    plugin = types.SimpleNamespace(
        fxpasses_register_passes=fxpasses.hookimpl(lambda register: register(MissingReq)), __name__="misspelt_requires"
    )
    reg = Registry()
    rec = reg.register_plugin(plugin, name="misspelt_requires")
    assert rec.status == "partial" and rec.problems == [
        "pass 'missing_req' requires 'propagate_shape', which no installed plugin registers; did you mean "
        "'propagate_shapes'?: it can never be used until one is registered (a pipeline holding it pulls in what it "
        "requires)"
    ]
    assert str(reg.problems[-1]) == f"plugin misspelt_requires: {rec.problems[0]}"


REQUIRES_SHARED_SOURCE = """
import fxpasses
class Needs(fxpasses.GraphPass):
    "Requires a pass two plugins clash on, and one its plugin had rejected."
    name = "needs_shared"
    requires = ({required})
    def run(self, gm, ctx):
        return False
@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register(Needs)
"""


def test_a_requires_naming_a_clashing_or_rejected_pass_is_said_as_such_at_load(site):
    """A plugin pass requiring a name two other plugins clash on was reported as requiring a
    pass "which no installed plugin registers; did you mean 'needs_shared'?" (the pass itself),
    and its plugin listed as partial, though `prefer` makes it usable (the clash is the other
    plugins' problem, reported as such). A name a plugin registered but had rejected is said
    as that (the show note's and the preset check's wording agreed; the load check did not)."""
    make_dist(site, "clash-a", "1.0", "fxp_req_clash_a", good_pass_source("twice_needed"))
    make_dist(site, "clash-b", "2.0", "fxp_req_clash_b", good_pass_source("twice_needed"))
    make_dist(site, "needs-dist", "3.0", "fxp_req_needs", REQUIRES_SHARED_SOURCE.format(required='"twice_needed",'))
    make_dist(site, "rejecting", "0.5", "fxp_req_rejecting", BAD_OPTIONS_SOURCE)
    make_dist(
        site,
        "needs-rejected",
        "4.0",
        "fxp_req_needs_rejected",
        REQUIRES_SHARED_SOURCE.replace('"needs_shared"', '"needs_rejected"').format(required='"bad_options",'),
    )
    modules = ("fxp_req_clash_a", "fxp_req_clash_b", "fxp_req_needs", "fxp_req_rejecting", "fxp_req_needs_rejected")
    forget_modules(*modules)
    with pytest.warns(fxpasses.errors.PluginWarning) as caught:
        reg = Registry()
    status = {r.distribution: (r.status, r.problems) for r in reg.plugins}
    assert status["needs-dist"] == ("loaded", [])
    assert [str(w.message) for w in caught if "needs_shared" in str(w.message)] == []
    assert status["needs-rejected"] == (
        "partial",
        [
            "pass 'needs_rejected' requires 'bad_options', which rejecting 0.5 registered but which was rejected as "
            "it loaded (see its warning): it can never be used until one is registered (a pipeline holding it pulls "
            "in what it requires)"
        ],
    )
    # using it: the clash is said, and `prefer` makes it usable
    with pytest.raises(DuplicatePassError, match="pass name 'twice_needed' is registered by more than one plugin"):
        fxpasses.Pipeline.from_string("needs_shared", registry=reg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fxpasses.errors.PluginWarning)
        chosen = Registry(prefer={"twice_needed": "clash-b"})
    assert fxpasses.Pipeline.from_string("needs_shared", registry=chosen).plan().names() == [
        "twice_needed",
        "needs_shared",
    ]
    forget_modules(*modules)


def test_a_cycle_one_plugin_declares_through_built_in_passes_blames_that_plugin_alone():
    """A plugin pass declaring after = eliminate_dead_code and before = remove_dropout puts
    the built-in passes on a cycle (the built-in pipeline orders remove_dropout first): the
    built-in plugin was listed as partial with it (an adversarial check)."""
    import types

    class Between(fxpasses.GraphPass):
        """Declares an order no pipeline can give with the built-in passes."""

        name = "between_p"
        after = ("eliminate_dead_code",)
        before = ("remove_dropout",)

        def run(self, gm, ctx):
            return None

    plugin = types.SimpleNamespace(
        fxpasses_register_passes=fxpasses.hookimpl(lambda register: register(Between)), __name__="between_plug"
    )
    reg = Registry()
    rec = reg.register_plugin(plugin, name="between_plug")
    builtin = [r for r in reg.plugins if r.entry_point == "builtin = fxpasses.builtin_passes"]
    assert [r.status for r in builtin] == ["loaded"]
    assert rec.status == "partial" and "pass ordering cycle: " in rec.problems[0]


def test_a_hook_implemented_under_another_name_with_pluggys_specname_is_taken():
    """`@fxpasses.hookimpl(specname="fxpasses_register_passes") def more(register)`, which
    pluggy supports, was refused as "no fxpasses hook has that name" and the whole plugin failed
    (a new-user check); a specname no hook has is named as such."""
    import types

    class SpecNamed(fxpasses.GraphPass):
        """Registered through a hook of another name."""

        name = "spec_named"

        def run(self, gm, ctx):
            return False

    good = types.SimpleNamespace(
        more=fxpasses.hookimpl(specname="fxpasses_register_passes")(lambda register: register(SpecNamed))
    )
    reg = Registry(autoload=False)
    rec = reg.register_plugin(good, name="spec_plug")
    assert rec.status == "loaded" and "spec_named" in reg
    bad = types.SimpleNamespace(more=fxpasses.hookimpl(specname="fxpasses_register_pases")(lambda register: None))
    rec = reg.register_plugin(bad, name="bad_spec_plug")
    assert rec.status == "failed"
    assert "more is marked @fxpasses.hookimpl(specname='fxpasses_register_pases') but no fxpasses hook has that name; " in rec.error
    assert "did you mean 'fxpasses_register_passes'" in rec.error


def test_show_notes_a_requires_no_registered_pass_has():
    """`fxpasses show` noted a misspelt `after` but said nothing of a misspelt `requires`
    (`propagate_shape`; a new-user check)."""

    class NeedsShapes(fxpasses.GraphPass):
        """Requires a misspelt pass."""

        name = "needs_shapes"
        requires = ("propagate_shape",)

        def run(self, gm, ctx):
            return False

    reg = Registry()
    reg.register(NeedsShapes)
    assert reg.describe("needs_shapes").notes[0] == (
        "needs_shapes: requires names 'propagate_shape', which no registered pass has (the pass cannot be used until "
        "a plugin registering it is installed); did you mean 'propagate_shapes'?"
    )


def test_a_preset_naming_a_misspelt_pass_is_told_the_close_name(site):
    """The load-time warning for a preset naming an unknown pass offered no close name, where
    `fxpasses check --preset` did (a new-user check)."""
    make_dist(
        site,
        "typo-preset",
        "0.1",
        "fxp_typo_preset",
        '''
import fxpasses


@fxpasses.hookimpl
def fxpasses_register_presets(register):
    register("typo_cleanup", "remove_dropout,eliminate_dead_cod", "Misspelt.")
''',
    )
    forget_modules("fxp_typo_preset")
    with pytest.warns(fxpasses.errors.PluginWarning) as caught:
        Registry()
    (message,) = [str(w.message) for w in caught if "typo_cleanup" in str(w.message)]
    assert message.endswith(
        "preset 'typo_cleanup' names pass(es) no installed plugin registers: eliminate_dead_cod (did you mean "
        "'eliminate_dead_code'?)"
    ), message
    forget_modules("fxp_typo_preset")


@pytest.mark.parametrize("method", ["get", "info", "describe", "candidates", "preset", "preset_problems", "unknown_name"])
@pytest.mark.parametrize("given, shown", [(None, "None of type NoneType"), (3, "3 of type int")])
def test_a_lookup_by_a_value_that_is_no_name_is_a_type_error_naming_the_method(method, given, shown):
    """``Registry().get(None)`` failed as ``AttributeError: 'NoneType' object has no attribute
    'lower'``, raised deep in the lookup, naming neither the method nor the value (a new-user
    check); every lookup by name now says which method took what."""
    reg = Registry()
    kind = {"preset": "preset", "preset_problems": "preset", "unknown_name": "pass or preset"}.get(method, "pass")
    with pytest.raises(TypeError) as info:
        getattr(reg, method)(given)
    assert str(info.value) == f"Registry.{method} takes a {kind} name (a str), got {shown}"


def test_a_lookup_by_a_pass_class_or_bytes_says_what_to_give_instead():
    reg = Registry()
    cls = reg.get("remove_dropout")
    with pytest.raises(TypeError) as info:
        reg.get(cls)
    assert str(info.value).endswith(
        "of type type (a pass class needs no lookup: give it to Pipeline([...]) as it is, or look it up by "
        "its name, 'remove_dropout')"
    )
    with pytest.raises(TypeError) as info:
        reg.describe(b"fold_constants")
    assert str(info.value) == (
        "Registry.describe takes a pass name (a str), got b'fold_constants' of type bytes "
        "(decode it first: 'fold_constants')"
    )
    assert reg.describe("fold_constants").name == "fold_constants"  # names still work


@pytest.mark.parametrize("value", ["fxp_shadowed", "fxp_shadowed.plugin", "fxp_shadowed:hooks"])
def test_a_plugin_shadowed_by_a_checkout_folder_of_its_name_says_so(tmp_path, monkeypatch, value):
    """A plugin's checkout named like its package (``work/fxp_shadowed/pyproject.toml`` beside
    ``work/fxp_shadowed/fxp_shadowed/__init__.py``), with ``work`` first on ``sys.path`` (a
    script run from there), imports as an empty namespace package: the plugin was reported as
    "implements no fxpasses hook (nothing was loaded from it)", or a failed import, with no
    word of the folder that shadowed the installed package (a new-user check)."""
    site, work = tmp_path / "site", tmp_path / "work"
    make_dist(site, "shadowed-dist", "1.0", "fxp_shadowed_real", good_pass_source("shadowed_pass"),
              entry_points={"shadowed": value})
    checkout = work / "fxp_shadowed"
    (checkout / "fxp_shadowed").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("[project]\nname = 'shadowed-dist'\n")
    (checkout / "fxp_shadowed" / "__init__.py").write_text(good_pass_source("shadowed_pass"))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(work))  # the working directory, first
    importlib.invalidate_caches()
    forget_modules("fxp_shadowed", "fxp_shadowed.plugin")
    try:
        with pytest.warns(fxpasses.PluginWarning) as caught:
            reg = Registry()
        [rec] = [r for r in reg.plugins if r.distribution == "shadowed-dist"]
        assert rec.status in ("failed", "empty")
        [message] = [str(w.message) for w in caught if "shadowed-dist" in str(w.message)]
        assert message.endswith(
            f"; note: 'fxp_shadowed' was imported as a namespace package (a folder without __init__.py) from "
            f"{checkout}, a project checkout named like the package, not from the installed distribution: "
            "Python looks in the working directory (or the script's folder) first, so run from another folder, "
            "or rename the checkout"
        )
    finally:
        forget_modules("fxp_shadowed", "fxp_shadowed.plugin")


def test_a_real_namespace_package_plugin_gets_no_shadow_note(site):
    """A PEP 420 namespace package that is no checkout (no project file, no package of its
    name inside) is left alone: its plugin's own problem is reported as it was."""
    (site / "fxp_nsreal").mkdir()
    make_dist(site, "nsreal-dist", "1.0", "fxp_nsreal_unused", good_pass_source("nsreal_pass"),
              entry_points={"nsreal": "fxp_nsreal"})
    forget_modules("fxp_nsreal")
    try:
        with pytest.warns(fxpasses.PluginWarning) as caught:
            Registry()
        [message] = [str(w.message) for w in caught if "nsreal-dist" in str(w.message)]
        assert message.endswith("implements no fxpasses hook (nothing was loaded from it)")
    finally:
        forget_modules("fxp_nsreal")


HOOK_SIGNATURES_SOURCE = '''
import fxpasses
from fxpasses import GraphPass, NodePass, on


class TwoArgs(NodePass):
    """A hook without ctx."""
    name = "two_args"

    @on("relu")
    def relu(self, node):
        return None


class RunWithoutCtx(GraphPass):
    """run() without ctx."""
    name = "run_without_ctx"

    def run(self, gm):
        return False


class Flexible(NodePass):
    """A hook taking (self, node, ctx) with a default and *args: called as hook(self, node, ctx)."""
    name = "flexible_hook"

    @on("relu")
    def relu(self, node, ctx=None, *rest):
        return None


@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register(TwoArgs)
    register(RunWithoutCtx)
    register(Flexible)
'''


def test_a_method_with_a_wrong_signature_is_rejected_naming_the_file_and_line_it_is_defined_at(site):
    """The plugin's rejection (`fxpasses list`, the warning, the error of a pipeline naming
    the pass) said `hook relu must take (self, node, ctx), takes (self, node)` and nothing of
    where: the check runs when the registry loads, far from the class, and a plugin module
    holds many hooks named alike. Now it ends with the method's FILE:LINE, as the warning
    about a misspelt @on name does; a hook taking (self, node, ctx) with a default or *args,
    which run() was already allowed, is accepted."""
    make_dist(site, "sig-dist", "1.0", "fxp_sigs", HOOK_SIGNATURES_SOURCE)
    forget_modules("fxp_sigs")
    with pytest.warns(fxpasses.PluginWarning):
        reg = Registry()
    path = str(site / "fxp_sigs.py")
    reasons = {r.name: r.reason for r in reg.plugins if r.distribution == "sig-dist" for r in r.rejected}
    assert reasons == {
        "two_args": "pass 'two_args' (fxp_sigs.TwoArgs): hook relu must take (self, node, ctx), takes (self, node); "
                    f"the hook TwoArgs.relu is defined at {path}:10",
        "run_without_ctx": "pass 'run_without_ctx' (fxp_sigs.RunWithoutCtx): run() must take (self, gm, ctx), takes "
                           f"(self, gm); run() is defined at {path}:19",
    }
    assert "flexible_hook" in reg
    with pytest.raises(UnknownPassError, match=re.escape(f"is defined at {path}:10")):
        reg.get("two_args")
    forget_modules("fxp_sigs")


def test_on_written_without_its_call_says_so():
    """`@on` written bare gave `on(): op names must be non-empty strings, got <function ...>`."""
    with pytest.raises(PassDefinitionError) as info:

        class Bare(fxpasses.NodePass):
            name = "bare"

            @fxpasses.on
            def relu(self, node, ctx):
                return None

    message = str(info.value)
    assert message.startswith("on() was given the function 'test_on_written_without_its_call_says_so.<locals>.Bare.relu' (")
    assert f"{__file__}:" in message
    assert message.endswith('as an op name: @on is called with what the hook subscribes to, e.g. @on("relu") or '
                            "@on(target=torch.relu), not written bare")


@pytest.mark.parametrize(
    "given, said",
    [
        (torch.relu, "the callable 'relu': give a callable or a module class as target=, e.g. @on(target=relu), or its name, @on('relu')"),
        (torch.nn.ReLU, "the class 'ReLU': give a callable or a module class as target=, e.g. @on(target=ReLU), or its name, @on('relu')"),
    ],
)
def test_on_given_a_target_where_names_go_says_to_give_it_as_target(given, said):
    """`@on(torch.relu)` was told it had been "written bare" (the check for a bare `@on` took any
    callable for the decorated method); a target where names go says to give it as target=."""
    with pytest.raises(PassDefinitionError) as info:
        fxpasses.on(given)
    assert str(info.value) == f"on(): op names are strings, got {said}"
