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
    a list of entries) over a GraphModule; returns the report. With example inputs it verifies
    numerically unless ``verify=`` says otherwise, a given Pipeline too (a copy of it runs with
    the settings given: ``verify``, ``on_error``, ``atol``, ``rtol``).

    Raises (when called): TypeError when ``gm`` is not a GraphModule; ``Pipeline(...)``'s errors
    (a ConfigError naming an entry that is not a pass, UnknownPassError, ...) for ``pipeline``.
    """
    from .errors import FxPassesError, without_own_frames
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
        elif isinstance(pipeline, Pipeline):
            # the given pipeline's passes with these settings (verify=numeric with inputs, as
            # for the other forms): a copy, the caller's Pipeline left as it is
            pipeline = _with_settings(pipeline, options)
        else:
            # Pipeline's own reading: one pass alone (a class, an instance, a (name, options)
            # pair) is a one-pass pipeline, a list is its entries, anything else a ConfigError
            pipeline = Pipeline(pipeline, registry=fxpasses_registry, **options)
        __tracebackhide__ = True
        try:
            return pipeline.run(gm, example_inputs, example_kwargs=example_kwargs)
        except FxPassesError as exc:
            # the failure's message says what and where; fxpasses' own frames (the pipeline's
            # long run loop, which pytest printed whole: 790 lines before the message, a
            # new-user check) are left out of it and of its causes, a pass's own code stays
            raise without_own_frames(exc) from exc.__cause__

    return run


#: the settings of a built Pipeline that ``fxpasses_run(..., **options)`` can change
_SETTINGS = ("verify", "on_error", "atol", "rtol")


def _with_settings(pipeline: Any, options: dict[str, Any]) -> Any:
    """A copy of ``pipeline`` with ``options`` (among :data:`_SETTINGS`) applied, each checked
    as ``Pipeline(...)`` checks it.

    Raises:
        TypeError: an option a built Pipeline cannot take (its passes and options are fixed).
        ConfigError: a bad setting value.
    """
    import copy

    from .errors import ConfigError, not_one_of
    from .pipeline import _ON_ERROR, _VERIFY, tolerance

    other = sorted(set(options) - set(_SETTINGS))
    if other:
        raise TypeError(
            f"fxpasses_run: {', '.join(other)} cannot be applied to a built Pipeline (its passes and options "
            f"are fixed): give them to Pipeline(...), or give fxpasses_run the passes instead; a Pipeline "
            f"takes {', '.join(_SETTINGS)} here"
        )
    if not options:
        return pipeline
    out = copy.copy(pipeline)
    for key, value in options.items():
        if key in ("atol", "rtol"):
            value = tolerance(key, value)
        else:
            allowed = _VERIFY if key == "verify" else _ON_ERROR
            if value not in allowed:
                raise ConfigError(not_one_of(key, value, allowed))
        setattr(out, key, value)
    return out
