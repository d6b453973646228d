"""``fxpasses bisect``: the first pass, then the first rewrite in it, that breaks the outputs.

Like LLVM's ``-opt-bisect-limit``, on the global rewrite counter of :mod:`fxpasses.rewrites`:

1. Run the pipeline once with numeric verification after every pass (outputs against the
   module before the pipeline, ``atol``/``rtol``), counting rewrites. The first pass that
   fails is the *first bad pass*; its rewrites are numbers ``first .. last``. A pass whose
   own code raised is reported at once (a hook's error names the node; nothing to bisect).
2. Binary search for the smallest limit ``N`` in ``first .. last`` for which the run with
   rewrites ``1..N`` applied (and no rewrite after) gives wrong outputs or a broken graph:
   rewrite ``N`` is the *first bad rewrite*. With ``N - 1`` the outputs still match.

Every trial starts from the same graph: the module is snapshotted once
(:class:`~fxpasses.snapshot.Snapshot` with tensor copies) and restored exactly before each run,
so the model is captured once. A search takes about ``log2(last - first + 1) + 3`` runs.
"""

from __future__ import annotations

import copy
import dataclasses
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.fx

from .errors import PassFailedError, UserError
from .inputs import check_accepted, check_example_inputs
from .pipeline import Pipeline, Plan, _gc_paused, _outputs_at, _run_module
from .other_sizes import other_sizes
from .verify import TensorState, compare_results
from .reference64 import float64_reference
from .rewrites import RewriteLimit, RewriteRecord
from .snapshot import Snapshot

__all__ = ["BisectResult", "Trial", "bisect"]


@dataclass
class Trial:
    """One run with a rewrite limit (``limit``; None for the first, full run, which had
    none: its ``message`` says how many rewrites it made): whether it was bad and what was
    seen."""

    limit: int | None
    bad: bool
    message: str


@dataclass
class BisectResult:
    """What :func:`bisect` found.

    Attributes:
        status: ``"clean"`` (every pass keeps the outputs), ``"found"`` (``culprit`` is the
            first bad rewrite), ``"raised"`` (the first bad pass's own code raised: ``error``
            says what, and names the node when a hook raised), ``"unreported"`` (the first bad pass broke the outputs without
            returning any rewrite: a hook that edits the graph and returns keep) or
            ``"not-reproducible"`` (the full run was bad, the same run with a limit not).
        pass_name / step: the first bad pass and its 1-based position in the plan;
            ``iteration``: its fixpoint iteration (0 outside a fixpoint group).
        steps: the plan's length. ``error``: the first bad pass's failure message.
        first / last: the global numbers of that pass's rewrites (``last < first``: none).
        culprit: the first bad rewrite; ``good`` / ``bad``: the trials just before and at it.
        trials: every run made, in order (the first is the verified full run).
        total_rewrites: rewrites applied by the verified full run up to the failure.
        reproduce_args: for ``"found"``, the options of ``fxpasses run CONFIG`` that reproduce
            the first bad rewrite: ``--rewrite-limit N``, and ``--on-error rollback`` when the
            first bad pass runs with ``on_error = "skip"`` (the trials roll a failing pass
            back and stop; with ``skip`` that run would roll the pass back and go on, past the
            rewrite it is meant to show; another pass's ``skip`` does not matter: the run
            stops at this one). Bisection looks at every pass, those the pipeline
            skips on failure too: it finds the first rewrite that changes the outputs, which
            may be in a pass whose failure the real run tolerates.
    """

    status: str
    pass_name: str | None = None
    step: int | None = None
    steps: int = 0
    iteration: int = 0
    error: str | None = None
    first: int | None = None
    last: int | None = None
    culprit: RewriteRecord | None = None
    good: Trial | None = None
    bad: Trial | None = None
    trials: list[Trial] = field(default_factory=list)
    total_rewrites: int = 0
    reproduce_args: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["culprit"] = self.culprit.as_dict() if self.culprit is not None else None
        return d

    def reproduce_command(
        self, config: str | None = None, *, run_args: Sequence[str] = (), needs_config: bool = True
    ) -> list[str]:
        """The ``fxpasses run`` command line (argv) that reproduces the first bad rewrite:
        ``config`` (``"CONFIG"`` when None, or nothing when not ``needs_config``: the run
        without CONFIG, of the bundled example model), ``run_args`` (what the run needs besides
        :attr:`reproduce_args`: the ``--pipeline`` and ``-p`` plugin options bisect was
        given), then :attr:`reproduce_args`; ``[]`` unless ``status`` is ``"found"``."""
        if self.status != "found" or self.culprit is None:
            return []
        args = [*run_args, *(self.reproduce_args or ["--rewrite-limit", str(self.culprit.index)])]
        where = [config] if config else ["CONFIG"] if needs_config else []
        return ["fxpasses", "run", *where, *args]

    def text(self, config: str | None = None, *, run_args: Sequence[str] = (), needs_config: bool = True) -> str:
        """The human-readable report printed by ``fxpasses bisect`` (``config``: its path;
        ``run_args``: options the reproducing ``fxpasses run`` needs besides
        :attr:`reproduce_args`, such as the ``--pipeline`` bisect was given; ``needs_config``:
        see :meth:`reproduce_command`)."""
        if self.status == "clean":
            return (
                f"no failure: {'the pass keeps' if self.steps == 1 else f'each of the {self.steps} passes keeps'} the outputs "
                f"({_rewrites(self.total_rewrites)}); nothing to bisect"
            )
        at = f", fixpoint iteration {self.iteration}" if self.iteration else ""
        lines = [f"first bad pass: {self.pass_name!r} (step {self.step} of {self.steps}{at})"]
        if self.error:
            lines.append("  " + self.error.replace("\n", "\n  "))
        if self.status == "raised":
            lines.append(
                "the pass raised (in a hook: the node above)" if "\n  at node %" in (self.error or "") else "the pass raised"
            )
            lines[-1] += "; there is no rewrite to bisect"
            return "\n".join(lines)
        if self.status == "unreported":
            lines.append(
                f"{self.pass_name!r} changed the graph or the module's tensors without returning a rewrite "
                "(a hook that edits the graph, or writes a parameter or buffer in place, and returns keep): "
                "no rewrite to blame inside it"
            )
            return "\n".join(lines)
        n = (self.last or 0) - (self.first or 0) + 1
        lines.append(f"its rewrites: #{self.first}..#{self.last} ({n}); {len(self.trials)} runs")
        if self.status == "not-reproducible":
            lines.append(
                "not reproducible: the run with every rewrite up to #{} applied keeps the outputs "
                "(a pass that does not always do the same thing?)".format(self.last)
            )
            return "\n".join(lines)
        assert self.culprit is not None
        lines.append("first bad " + self.culprit.describe())
        for t in (self.good, self.bad):
            if t is not None:
                applied = _applied(t.limit)
                lines.append(f"  with {applied}: {t.message}")
        command = self.reproduce_command(config, run_args=run_args, needs_config=needs_config)
        lines.append(f"reproduce with: {shlex.join(command)}")
        if "--on-error" in self.reproduce_args:
            lines.append(
                f'  (--on-error rollback: the pipeline skips a failing pass (on_error = "skip"), so '
                f"without it {self.pass_name!r} would be rolled back and the run would go on past "
                "this rewrite)"
            )
        return "\n".join(lines)


def _variant(pipeline: Pipeline, verify: str, on_error: str) -> Pipeline:
    """A copy of ``pipeline`` with one verify/on_error for every step (per-entry ones dropped;
    per-entry tolerances kept)."""
    p = copy.copy(pipeline)
    p.verify = verify
    p.on_error = on_error
    p._plan = Plan([dataclasses.replace(s, verify=None, on_error=None) for s in pipeline.plan().steps])
    return p


def bisect(
    pipeline: Pipeline,
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any] | None,
    *,
    example_kwargs: Mapping[str, Any] | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    log: Callable[[str], None] | None = None,
    reference_module: torch.fx.GraphModule | None = None,
) -> BisectResult:
    """Find the first pass, then the first rewrite in it, after which ``gm``'s outputs change.

    ``gm`` is left as it was (restored from a snapshot). ``atol``/``rtol`` default to the
    pipeline's; an entry's own tolerances (``[atol=...]``) apply as in a run (from that pass
    on: see :class:`~fxpasses.Pipeline`). ``log`` receives one line per run. ``example_inputs``/``example_kwargs``: the
    positional and keyword inputs ``gm`` is called with (see :meth:`Pipeline.run`).
    ``reference_module``: the module the outputs are held to instead of ``gm`` (a
    reproducer's ``reference.py``; see :meth:`Pipeline.run`).

    Raises:
        UserError: no example inputs (neither positional nor keyword), inputs of the wrong
            type or that the module does not take (see :meth:`Pipeline.run`), a module that
            does not run on them, or a pass that reports a user error.
    """
    example_inputs, example_kwargs = check_example_inputs(example_inputs, example_kwargs)
    if example_inputs is None:
        raise UserError("bisect needs example inputs (example_inputs or example_kwargs)")
    check_accepted(gm, example_inputs, example_kwargs)
    atol = pipeline.atol if atol is None else float(atol)
    rtol = pipeline.rtol if rtol is None else float(rtol)
    say = log or (lambda _line: None)
    steps = pipeline.plan().steps
    result = BisectResult("clean", steps=len(steps))
    with _gc_paused():
        ref_gm = reference_module if reference_module is not None else gm
        state = TensorState(ref_gm)
        reference, reference_facts = _run_module(ref_gm, example_inputs, state, example_kwargs, facts=True)
        reference64 = float64_reference(ref_gm, example_inputs, example_kwargs, reference, reference_facts, state)
        # a graph with dynamic shapes: trials are judged at other sizes too, as numeric
        # verification judged the failing pass (a failure there alone was "not reproducible")
        other, _ = other_sizes(gm, example_inputs, example_kwargs)
        other_reference = None
        if other is not None:
            try:
                other_reference = _outputs_at(ref_gm, other, state)
            except UserError:
                other = None
        snap = Snapshot(gm, copy_tensors=True)

    def restore() -> None:
        snap.restore()
        gm.recompile()

    # 1. the first bad pass, with numeric verification after each pass
    verified = _variant(pipeline, "numeric", "rollback")
    verified.atol, verified.rtol = atol, rtol
    counter = RewriteLimit(None)
    try:
        verified.run(gm, example_inputs, example_kwargs=example_kwargs, rewrite_limit=counter, reference_module=reference_module)
        failure: PassFailedError | None = None
    except PassFailedError as exc:
        failure = exc
    finally:
        restore()
    result.total_rewrites = counter.count
    if failure is None:
        said = f"every pass keeps the outputs ({_rewrites(counter.count)})"
        say(f"full run: {said}")
        result.trials.append(Trial(None, False, said))
        return result
    span = counter.spans[-1]
    result.pass_name, result.step, result.iteration = span.name, span.step + 1, span.iteration
    # without the rollback line (bisect restores the graph itself), with the notes (e.g. a
    # pass that said it changes the outputs on purpose)
    result.error = str(failure).split("\n  the graph was restored")[0].split("\n  note: ")[0]
    result.error += "".join(f"\n  note: {n}" for n in failure.notes)
    result.first, result.last = span.first, span.first + span.count - 1
    result.trials.append(Trial(None, True, f"{result.error.splitlines()[0]} (after {_rewrites(counter.count)})"))
    rewrites = f"its rewrites #{result.first}..#{result.last}" if span.count else "it reported no rewrite"
    at = f", fixpoint iteration {span.iteration}" if span.iteration else ""
    say(f"full run: pass {span.name!r} (step {span.step + 1}{at}) fails; {rewrites}")
    if failure.stage in (None, "the pass"):
        # the pass's own code raised: a hook at that node, or a whole-graph pass's run() (a
        # module that no longer runs names a node too, the node whose code raised, but that
        # is a verification failure some rewrite before it caused: bisected below; so is a
        # graph that fails torch's lint after the pass returned, which was taken for a pass
        # that raised). It was taken for a pass that changed the graph without reporting a
        # rewrite
        result.status = "raised"
        return result
    if span.count == 0:
        result.status = "unreported"
        return result

    # 2. binary search over that pass's rewrites, each trial judged as the failing check was
    # (its tolerances: the entry's own, raised to what the passes before it were allowed)
    trial_pipeline = _variant(pipeline, "lint", "rollback")
    trial_pipeline.atol, trial_pipeline.rtol = atol, rtol
    checked = failure.tolerances
    records: dict[int, RewriteRecord | None] = {}

    def trial(n: int) -> Trial:
        limit = RewriteLimit(n, probe=False)  # cut_off is not read here
        try:
            ran = trial_pipeline.run(gm, example_inputs, example_kwargs=example_kwargs, rewrite_limit=limit)
            with _gc_paused():
                actual, facts = _run_module(gm, example_inputs, TensorState(gm), example_kwargs, facts=True)
                # requires_grad, aliases, strides and gradients too, as numeric verification,
                # within what the passes run were allowed (entries' own tolerances)
                tol = checked if checked is not None else (ran.atol, ran.rtol)
                cmp = compare_results(actual, facts, reference, reference_facts, *tol, reference64)
                message = cmp.message
                if not message and other is not None and other_reference is not None:
                    actual, facts = _run_module(gm, other.args, TensorState(gm), other.kwargs, facts=True)
                    there = compare_results(actual, facts, other_reference[0], other_reference[1], *tol, other_reference[2])
                    if there.message:
                        message = f"at other sizes the graph accepts ({other.description()}): {there.message}"
            t = Trial(n, bool(message), message or f"outputs match (max abs error {cmp.max_abs:.3g})")
        except PassFailedError as exc:
            t = Trial(n, True, str(exc).splitlines()[0])
        except UserError as exc:  # the module no longer runs (it ran before the pipeline): bad
            t = Trial(n, True, str(exc).splitlines()[0])
        finally:
            restore()
        records[n] = limit.last
        result.trials.append(t)
        say(f"{_applied(n)}: {'bad' if t.bad else 'good'} ({t.message})")
        return t

    lo, hi = result.first - 1, result.last
    bad = trial(hi)
    if not bad.bad:
        result.status = "not-reproducible"
        return result
    good: Trial | None = None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        t = trial(mid)
        if t.bad:
            hi, bad = mid, t
        else:
            lo, good = mid, t
    if good is None:
        good = trial(lo)
        if good.bad:  # not monotone: the rewrites before this pass alone are bad now
            result.status = "not-reproducible"
            return result
    result.status = "found"
    result.culprit = records[hi]
    result.reproduce_args = ["--rewrite-limit", str(hi)]
    culprit_step = steps[span.step]
    if (culprit_step.on_error or pipeline.on_error) == "skip":  # the run would skip it and go on
        result.reproduce_args += ["--on-error", "rollback"]
    result.good, result.bad = good, bad
    return result


def _rewrites(n: int) -> str:
    """``n`` rewrites in words: ``1 rewrite``, ``3 rewrites``."""
    return f"{n} rewrite" + ("" if n == 1 else "s")


def _applied(n: int | None) -> str:
    """The first ``n`` rewrites in words: ``rewrites #1..#5``, ``rewrite #1``, ``no rewrite``."""
    return f"rewrites #1..#{n}" if n and n > 1 else "rewrite #1" if n == 1 else "no rewrite"
