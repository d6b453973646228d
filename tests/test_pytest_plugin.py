"""The pytest11 plugin: registered, light to import, fixtures and assertion messages."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

pytest_plugins = ["pytester"]


def test_importing_the_plugin_does_not_import_torch():
    code = "import sys, fxpasses.pytest_plugin; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_plugin_is_active_in_a_fresh_pytest_run(pytester):
    pytester.makepyfile(
        """
        import torch
        def test_it(fxpasses_registry, fxpasses_run):
            assert "count_ops" in fxpasses_registry
            gm = torch.fx.symbolic_trace(torch.nn.ReLU())
            assert fxpasses_run(gm, "count_ops").passes[0].counters == {"placeholder": 1, "relu": 1, "output": 1}
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_failure_message_names_pass_dialect_and_output():
    from fxpasses import NodePass, Registry, Replace, on
    from fxpasses.pytest_plugin import assert_preserves_outputs

    class DropRelu(NodePass):
        """Wrong on purpose: relu(x) -> x."""

        name = "drop_relu"

        @on("relu")
        def r(self, node, ctx):
            return Replace(node.args[0])

    reg = Registry(autoload=False)
    reg.register(DropRelu)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    with pytest.raises(AssertionError) as info:
        assert_preserves_outputs("drop_relu", model, [torch.randn(8, 4)], registry=reg, dialects=("export",))
    msg = str(info.value)
    assert "drop_relu changed the outputs of Sequential captured with export" in msg
    assert "max abs error" in msg and "output" in msg


def test_fixture_verifies_numerically_when_given_inputs(pytester):
    pytester.makepyfile(
        """
        import pytest, torch, fxpasses

        class DropRelu(fxpasses.NodePass):
            "Wrong on purpose."
            name = "drop_relu_fixture"
            @fxpasses.on("relu")
            def r(self, node, ctx):
                return fxpasses.Replace(node.args[0])

        def test_it(fxpasses_run):
            gm = torch.fx.symbolic_trace(torch.nn.ReLU())
            with pytest.raises(fxpasses.PassFailedError, match="verification failed"):
                fxpasses_run(gm, [DropRelu], [torch.tensor([-1.0, 2.0])])
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
