"""The package's attribute surface after a plain ``import fxpasses`` (a new-user check: the
README's ``fxpasses.bisect.bisect(...)`` and ``fxpasses.function_pass.function_pass(...)``
raised AttributeError until something else had imported the submodule)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fxpasses.errors import close_names

SUBMODULES = ["bisect", "function_pass", "effects", "ops", "testing", "job", "guards", "node_meta", "reference64", "verify"]


def test_every_public_submodule_is_an_attribute_after_import_fxpasses_alone():
    code = (
        "import sys, fxpasses\n"
        "assert 'torch' not in sys.modules, 'import fxpasses imported torch'\n"
        f"for name in {SUBMODULES!r}:\n"
        "    mod = getattr(fxpasses, name)\n"
        "    assert mod.__name__ == 'fxpasses.' + name, mod\n"
        "print(fxpasses.bisect.bisect.__name__, fxpasses.function_pass.function_pass.__name__)\n"
        "try:\n"
        "    fxpasses.bisekt\n"
        "except AttributeError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "bisect function_pass",
        "module 'fxpasses' has no attribute 'bisekt'; did you mean 'bisect'?",
    ]


@pytest.mark.parametrize(
    "typed, names, expected",
    [
        ("cnnn", ["CNN", "cnn"], ["cnn"]),  # the factory function, not the class listed first
        ("CNNN", ["cnn", "CNN"], ["CNN"]),
        ("remove_dropot", ["REMOVE_DROPOUT", "remove_dropout"], ["remove_dropout"]),
        ("REMOVE_DROPOUT", ["remove_dropout"], ["remove_dropout"]),  # case alone still found
    ],
)
def test_of_names_alike_but_for_case_the_one_closest_as_typed_is_suggested(typed, names, expected):
    assert close_names(typed, names, n=1) == expected
