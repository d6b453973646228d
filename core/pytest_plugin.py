"""pytest plugin for pass authors (entry point ``pytest11``: ``fxpasses``).

Fixtures:
    ``fxpasses_registry``: a fresh :class:`fxpasses.Registry` loaded from the installed plugins.
    ``fxpasses_run``: ``fxpasses_run(gm, pipeline, example_inputs=None, *, example_kwargs=None,
    **options)`` runs ``pipeline`` over ``gm`` with the test's registry and returns the report
    (the same argument order as :func:`fxpasses.run`). ``pipeline`` is a pipeline string, a
    :class:`fxpasses.Pipeline`, or whatever ``Pipeline(...)`` takes: one pass (a name, a pass
    class or instance, a ``(name or class, options)`` pair) or a list of entries. With example
    inputs (positional or keyword) it verifies numerically unless ``verify=`` says otherwise.

Assertions (also importable from :mod:`fxpasses.testing`):
    ``assert_preserves_outputs(pass_or_pipeline, module, example_inputs, example_kwargs=None,
    atol=..., rtol=..., dialects=("symbolic_trace", "dynamo", "export"))`` and
    ``assert_graph_equal(gm, expected)``.

This module is imported by every pytest run in an environment where fxpasses is installed, so
it imports torch and fxpasses lazily, inside the fixtures.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

__all__ = ["fxpasses_registry", "fxpasses_run", "assert_preserves_outputs", "assert_graph_equal"]


def assert_preserves_outputs(*args: Any, **kwargs: Any) -> Any:
    """See :func:`fxpasses.testing.assert_preserves_outputs`."""
    __tracebackhide__ = True
    from .testing import assert_preserves_outputs as impl

    return impl(*args, **kwargs)


def assert_graph_equal(*args: Any, **kwargs: Any) -> None:
    """See :func:`fxpasses.testing.assert_graph_equal`."""
    __tracebackhide__ = True
    from .testing import assert_graph_equal as impl

    impl(*args, **kwargs)


@pytest.fixture
def fxpasses_registry() -> Any:
    """A fresh registry with every installed pass plugin loaded."""
    from . import Registry

    return Registry()


@pytest.fixture
def fxpasses_run(fxpasses_registry: Any) -> Callable[..., Any]:
    """Run a pipeline (a pipeline string, a Pipeline, or what ``Pipeline(...)`` takes: one pass or
    a list of entries) over a GraphModule; returns the report.

    Raises (when called): TypeError when ``gm`` is not a GraphModule; ``Pipeline(...)``'s errors
    (a ConfigError naming an entry that is not a pass, UnknownPassError, ...) for ``pipeline``.
    """
    from .pipeline import Pipeline

    def run(gm: Any, pipeline: Any, example_inputs: Any = None, *, example_kwargs: Any = None, **options: Any) -> Any:
        import torch.fx

        if not isinstance(gm, torch.fx.GraphModule):
            raise TypeError(
                f"fxpasses_run(gm, pipeline, example_inputs=None): gm must be a GraphModule, "
                f"got {type(gm).__name__}"
            )
        if example_inputs is not None or example_kwargs is not None:
            options.setdefault("verify", "numeric")  # a test with inputs checks the outputs
        if isinstance(pipeline, str):
            pipeline = Pipeline.from_string(pipeline, registry=fxpasses_registry, **options)
        elif not isinstance(pipeline, Pipeline):
            # Pipeline's own reading: one pass alone (a class, an instance, a (name, options)
            # pair) is a one-pass pipeline, a list is its entries, anything else a ConfigError
            pipeline = Pipeline(pipeline, registry=fxpasses_registry, **options)
        return pipeline.run(gm, example_inputs, example_kwargs=example_kwargs)

    return run
