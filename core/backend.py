"""``torch.compile(model, backend="fxpasses")``: run a pipeline on every TorchDynamo graph.

Registered through torch's ``torch_dynamo_backends`` entry-point group, so it works as soon as
fxpasses is installed. The pipeline is taken from, in order:

1. ``torch.compile(..., options={"pipeline": "remove_dropout,eliminate_dead_code"})``
   (a pipeline string or a list of entries), or ``options={"preset": "inference"}``;
2. the ``FXPASSES_PIPELINE`` environment variable (a pipeline string);
3. ``pipeline`` in ``[tool.fxpasses]`` of the nearest ``pyproject.toml`` (from the working
   directory up);
4. :data:`DEFAULT_BACKEND_PIPELINE`.

After the pipeline the graph goes to the backend named by ``options={"then": ...}``
(default ``"inductor"``; ``"eager"`` runs the optimized graph as is). Other options:
``verify`` (``none``/``lint``/``numeric``, default ``lint``), ``on_error`` (default
``rollback``).

Every graph's :class:`~fxpasses.RunReport` is appended to :data:`reports` (the last 100) and
logged at INFO level on the ``fxpasses.backend`` logger. With graph breaks, each graph
TorchDynamo produces goes through the pipeline on its own.
"""

from __future__ import annotations

import collections
import logging
import os
from typing import Any, Callable, Sequence

import torch
import torch.fx

__all__ = ["fxpasses_backend", "reports", "DEFAULT_BACKEND_PIPELINE"]

#: The pipeline used when no option, environment variable or pyproject.toml names one.
DEFAULT_BACKEND_PIPELINE = "remove_dropout,simplify_algebra,eliminate_common_subexpressions,eliminate_dead_code"

#: Reports of the most recent compiled graphs, newest last.
reports: collections.deque[Any] = collections.deque(maxlen=100)

log = logging.getLogger("fxpasses.backend")

_KNOWN = {"pipeline", "preset", "then", "verify", "on_error"}


def _pipeline_spec(options: dict[str, Any]) -> tuple[Any, str]:
    from .errors import ConfigError

    if "pipeline" in options and "preset" in options:
        raise ConfigError("torch.compile options for backend 'fxpasses': give either 'pipeline' or 'preset', not both")
    if "preset" in options:
        from .registry import registry

        name = options["preset"]
        if not isinstance(name, str):
            raise ConfigError(f"torch.compile option 'preset' must be a preset name, got {name!r}")
        return registry().preset(name, source="options['preset']").pipeline, f"options['preset'] {name!r}"
    if "pipeline" in options:
        spec = options["pipeline"]
        if isinstance(spec, str) and not spec.strip() or isinstance(spec, (list, tuple)) and not spec:
            raise ConfigError("torch.compile option 'pipeline' is empty: name at least one pass")
        if not isinstance(spec, (str, list, tuple)):
            raise ConfigError(f"torch.compile option 'pipeline' must be a pipeline string or a list, got {spec!r}")
        return spec, "options['pipeline']"
    env = os.environ.get("FXPASSES_PIPELINE", "").strip()
    if env:
        return env, "FXPASSES_PIPELINE"
    from .config import find_pyproject, load_config_file

    found = find_pyproject()
    if found is not None:
        cfg = load_config_file(found)
        if cfg.pipeline is not None:
            return cfg.pipeline, f"{found} [tool.fxpasses]"
    return DEFAULT_BACKEND_PIPELINE, "default"


def _concrete(example_inputs: Sequence[Any]) -> list[Any] | None:
    """The example inputs with symbolic scalars (a dynamic size TorchDynamo passes as a graph
    input, e.g. ``s0``) replaced by the value they had when the graph was traced; None when a
    value is unknown (an unbacked symbol) or a tensor has symbolic sizes or is fake."""
    from torch._subclasses.fake_tensor import FakeTensor

    out: list[Any] = []
    for v in example_inputs:
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            node = v.node
            if not node.has_hint():
                return None
            out.append(node.hint)
        elif isinstance(v, torch.Tensor):
            if isinstance(v, FakeTensor) or any(not isinstance(d, int) for d in v.shape):
                return None
            out.append(v)
        else:
            out.append(v)
    return out


def fxpasses_backend(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any
) -> Callable[..., Any]:
    """TorchDynamo backend: run the fxpasses pipeline over ``gm``, then hand it on.

    Raises:
        ConfigError: unknown keys in ``options`` (naming them), or a bad pipeline.
        PassFailedError: a pass failed (with ``on_error="rollback"`` the graph is restored
            first; TorchDynamo then reports the backend failure).
    """
    from .errors import ConfigError
    from .pipeline import Pipeline
    from .spec import parse_pipeline_string

    options = dict(kwargs.get("options") or {})
    unknown = set(options) - _KNOWN
    if unknown:
        raise ConfigError(
            f"unknown torch.compile option(s) for backend 'fxpasses': {', '.join(sorted(unknown))} "
            f"(known: {', '.join(sorted(_KNOWN))})"
        )
    spec, source = _pipeline_spec(options)
    verify = options.get("verify", "lint")
    inputs = _concrete(example_inputs)
    if inputs is None:
        inputs = list(example_inputs)
        if verify == "numeric":
            log.warning(
                "fxpasses backend: verify='numeric' needs concrete example inputs, and this graph's have "
                "symbolic sizes without a value (dynamic shapes); verifying with 'lint' instead"
            )
            verify = "lint"
    common = dict(verify=verify, on_error=options.get("on_error", "rollback"))
    then = options.get("then", "inductor")
    if not (isinstance(then, str) or callable(then)):
        raise ConfigError(
            f"torch.compile option 'then' must be a backend name (e.g. 'inductor', 'eager') or a "
            f"backend callable, got {then!r}"
        )
    if isinstance(spec, str):
        pipeline = Pipeline(parse_pipeline_string(spec, source), source=source, **common)
    else:
        pipeline = Pipeline(list(spec), source=source, **common)
    report = pipeline.run(gm, inputs)
    reports.append(report)
    log.info("fxpasses pipeline (%s) on a %d-node graph:\n%s", source, report.nodes_before, report.table())
    if then == "eager":
        return gm.forward
    if callable(then):
        return then(gm, example_inputs)
    from torch._dynamo.backends.registry import lookup_backend

    return lookup_backend(then)(gm, example_inputs)
