"""Hook specifications of fxpasses (pluggy project name ``"fxpasses"``).

Every hook is prefixed ``fxpasses_``. Plugins implement them with :data:`hookimpl`. As in any
pluggy hookimpl, do not give hook parameters default values: pluggy does not pass arguments
that have defaults (``def fxpasses_register_passes(register=None)`` receives ``None``);
fxpasses rejects such plugins with an error naming them.

Phases:

1. Registration (called once per plugin, at load time)
   - :func:`fxpasses_register_passes`, :func:`fxpasses_register_presets`
2. Instrumentation (called around every pass of every run)
   - :func:`fxpasses_before_pass`, :func:`fxpasses_after_pass`, :func:`fxpasses_pass_failed`
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, Callable, Sequence

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    import torch.fx

    from .context import PassContext
    from .errors import PassFailedError
    from .report import PassReport

__all__ = ["hookspec", "hookimpl", "PROJECT", "REGISTRATION_HOOKS", "INSTRUMENT_HOOKS", "close_hook_names"]

PROJECT = "fxpasses"
PREFIX = "fxpasses_"
#: The hooks called once per plugin when a registry loads it.
REGISTRATION_HOOKS = ("fxpasses_register_passes", "fxpasses_register_presets")
#: The hooks called around every pass (what an instrument implements).
INSTRUMENT_HOOKS = ("fxpasses_before_pass", "fxpasses_after_pass", "fxpasses_pass_failed")
hookspec = pluggy.HookspecMarker(PROJECT)
#: Marker for hook implementations: ``@fxpasses.hookimpl``.
hookimpl = pluggy.HookimplMarker(PROJECT)


# ---------------------------------------------------------------------------- registration


@hookspec
def fxpasses_register_passes(register: Callable[[type], None]) -> None:
    """Register pass classes.

    Call ``register(PassClass)`` once per pass the plugin provides. Each class must subclass
    :class:`fxpasses.NodePass` or :class:`fxpasses.GraphPass`, have a unique ``name`` and an
    ``Options`` pydantic model. A class that is malformed, or whose name another distribution
    already registers, is reported with this plugin's distribution name and version.

    :param register: the callback that adds one pass class to the registry.
    """


@hookspec
def fxpasses_register_presets(register: Callable[[str, str, str], None]) -> None:
    """Register named pipelines (presets), usable as ``preset = "NAME"`` in a config and as
    ``fxpasses run --preset NAME``.

    Call ``register(name, pipeline, description)`` once per preset: ``pipeline`` is a
    pipeline string (``"remove_dropout,eliminate_dead_code"``), ``description`` one sentence.
    A name another distribution also registers is reported naming both, and neither preset is
    used until the ``[plugins]`` setting ``prefer = {name = "<distribution>"}`` chooses one (a
    built-in preset's name is kept unless ``prefer`` chooses the plugin's); a preset whose name
    is not an identifier or whose pipeline string is empty or malformed is skipped on its own
    (the plugin's other presets and passes stay registered; ``fxpasses list`` shows the
    rejected ones with the reason).

    :param register: the callback that adds one preset.
    """


# ---------------------------------------------------------------------------- instrumentation


@hookspec
def fxpasses_before_pass(pass_name: str, gm: "torch.fx.GraphModule", ctx: "PassContext") -> None:
    """Called before a pass runs over ``gm``.

    :param pass_name: the registry name of the pass about to run.
    :param gm: the GraphModule, before the pass (do not modify it).
    :param ctx: the pass's context (``ctx.dialect``, ``ctx.example_inputs``, ``ctx.example_kwargs``).
    """


@hookspec
def fxpasses_after_pass(
    pass_name: str, gm: "torch.fx.GraphModule", ctx: "PassContext", report: "PassReport"
) -> None:
    """Called after a pass ran and was verified.

    :param pass_name: the pass's registry name.
    :param gm: the GraphModule after the pass (its code is not recompiled yet: read
        ``gm.graph``, or ``gm.graph.python_code("self").src`` for the code).
    :param ctx: the pass's context, with its counters.
    :param report: the pass's :class:`~fxpasses.PassReport`.
    """


@hookspec
def fxpasses_pass_failed(
    pass_name: str, gm: "torch.fx.GraphModule", error: "PassFailedError"
) -> None:
    """Called when a pass raised or failed verification, after the graph was rolled back.

    :param pass_name: the pass's registry name.
    :param gm: the GraphModule, restored to its state before the pass.
    :param error: the :class:`~fxpasses.errors.PassFailedError` describing the failure.
    """


def _all_specs() -> dict[str, Any]:
    return {k: v for k, v in globals().items() if k.startswith(PREFIX)}


def close_hook_names(
    name: str, hooks: Sequence[str] = REGISTRATION_HOOKS + INSTRUMENT_HOOKS, cutoff: float = 0.6
) -> list[str]:
    """The (at most two) hook names of ``hooks`` close to ``name`` (:func:`difflib.get_close_matches`), best
    first: ``name`` is compared without the ``fxpasses_`` prefix, and whole when it lacks it, so that
    ``after_pas``, ``fxpasses_afterpass`` and ``fxpass_after_pass`` all find
    ``fxpasses_after_pass``."""
    bare = name[len(PREFIX) :] if name.startswith(PREFIX) else name
    # (a name with the right prefix is compared without it: the shared prefix alone would
    # make every fxpasses_* name look close to every hook)
    whole = [] if bare != name else difflib.get_close_matches(name, hooks, n=2, cutoff=cutoff)
    short = difflib.get_close_matches(bare, [h[len(PREFIX) :] for h in hooks], n=2, cutoff=cutoff)
    return list(dict.fromkeys(whole + [PREFIX + h for h in short]))[:2]
