"""Assertions for pass authors (also used by fxpasses' own test suite).

``assert_preserves_outputs`` captures a module in each dialect, runs a pass or pipeline over
each captured graph and compares the outputs with those of the graph before the pass;
``assert_graph_equal`` compares two graphs by their normalised generated code.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Mapping, Sequence

import torch
import torch.fx

from .capture import DIALECTS, capture
from .errors import FxPassesError, PassFailedError, UserError, exception_line, short_repr, without_own_frames
from .journal import JournalMismatch, check_journals
from .report import RunReport

__all__ = ["assert_preserves_outputs", "assert_graph_equal", "normalized_code"]


def _as_pipeline(p: Any, registry: Any = None) -> Any:
    """``p`` as a Pipeline: one already, a pipeline string, or whatever ``Pipeline(...)`` takes
    (one pass, a ``(name, options)`` pair, a list of entries)."""
    from .pipeline import Pipeline

    if isinstance(p, Pipeline):
        return p
    if isinstance(p, str):
        return Pipeline.from_string(p, registry=registry) if registry else Pipeline.from_string(p)
    return Pipeline(p, registry=registry) if registry else Pipeline(p)


def assert_preserves_outputs(
    pass_or_pipeline: Any,
    module: torch.nn.Module,
    example_inputs: Sequence[Any] | None = None,
    *,
    example_kwargs: Mapping[str, Any] | None = None,
    atol: float = 1e-5,
    rtol: float = 1e-5,
    dialects: Sequence[str] | str = DIALECTS,
    registry: Any = None,
    check_inputs: Sequence[Sequence[Any]] = (),
    check_kwargs: Sequence[Mapping[str, Any]] = (),
    dynamic_shapes: Any = None,
) -> dict[str, tuple[torch.fx.GraphModule, RunReport]]:
    """Check that a pass (or pipeline) keeps ``module``'s outputs in every dialect.

    For each dialect: capture ``module`` called as
    ``module(*example_inputs, **example_kwargs)``, compute the captured graph's outputs, run
    the pass over the graph (with the capture's inputs as the run's example inputs, keywords
    included), and compare (every call on fresh copies of the inputs, with the module's
    tensors as captured and ``torch.manual_seed(0)``) (dtype, shape, NaN positions, values
    within ``atol + rtol * |expected|``; and what :func:`fxpasses.verify.compare_facts`
    compares: each tensor output's ``requires_grad``, the input, module tensor or other output
    it shares storage with, its strides, and, when an output requires grad, the gradients with
    respect to the inputs that require grad, within ``atol + rtol * max|expected gradient|``
    (a gradient sums over every use of its input, so its rounding error scales with its
    largest entries); not of the module's own parameters, which a pass may re-parametrise,
    except in a TorchDynamo graph, which takes them as inputs) on the example inputs and on every further input set:
    ``check_inputs[k]`` (positional) with ``check_kwargs[k]`` (keywords); when only one of the
    two is given, the other's entries are empty. ``pass_or_pipeline`` is a pass class or
    instance, a pipeline string, a list of entries or a :class:`~fxpasses.Pipeline`.

    The captures are specialised to the example inputs' sizes, but for ``dynamic_shapes``
    (``torch.export.export``'s argument: ``({0: Dim("batch")},)``), with which the export
    capture keeps the sizes it names symbolic and the dynamo capture marks them dynamic (see
    :func:`fxpasses.capture.capture`; its graph takes each size as an input, which the check
    input sets' tensors give), so that ``check_inputs`` of other sizes test that a pass did
    not specialise the graph to the example's; ``symbolic_trace`` graphs hold no sizes and
    take any.

    The pipeline runs in the journal check mode (:func:`fxpasses.journal.check_journals`): a
    pass that declares ``journal_edits = True`` is rolled back through its journal, compared
    with a snapshot and redone, so that an edit its journal cannot see fails here.

    Returns ``{dialect: (transformed GraphModule, RunReport)}``.

    Raises:
        AssertionError: naming the pass, the dialect, the input set, the first differing
            output and its largest absolute error, or the first output whose facts differ
            (``output[0]: no longer requires grad ...``, ``output: shares storage with
            input[0] ...``, ``output: strides (1, 4) vs (4, 1) ...``, ``gradient of
            input[0]: ...``) (or the error the module raises on that
            input set after the pass); :class:`fxpasses.journal.JournalMismatch` (an
            ``AssertionError``) naming what a journaled pass edited out of its journal's sight.
        UserError: example inputs of the wrong type (``example_kwargs`` not a mapping with
            ``str`` keys; see :meth:`fxpasses.Pipeline.run`), ``dynamic_shapes`` a capture
            cannot take, ``check_inputs`` and
            ``check_kwargs`` of different lengths, a keyword in ``check_kwargs`` that
            ``example_kwargs`` lacks (dynamo), a capture that fails, or a captured module
            that does not run on an input set before any pass (e.g. ``check_inputs`` of
            another batch size than the capture was specialised to).
    """
    __tracebackhide__ = True  # (pytest shows the test's line, not this function's body)
    from .inputs import check_example_inputs
    from .reference64 import float64_reference
    from .verify import TensorState, compare_results

    if not isinstance(module, torch.nn.Module):
        swapped = isinstance(pass_or_pipeline, torch.nn.Module)
        raise UserError(
            f"module: {short_repr(module)} is not a torch.nn.Module"
            + ("; the pass comes first: assert_preserves_outputs(pass_or_pipeline, module, example_inputs)" if swapped else "")
        )
    if isinstance(dialects, str):  # one dialect: not its letters
        dialects = (dialects,)
    dialects = tuple(dialects)
    if not dialects:
        raise UserError(f"dialects is empty: name at least one of {', '.join(DIALECTS)} (a check of none checks nothing)")
    # (checked before any capture: a bare tensor is no capture's problem, which the note on a
    # failed capture would suggest)
    kwargs = check_example_inputs(example_inputs, example_kwargs)[1] or {}
    checks = _check_sets(check_inputs, check_kwargs)
    if checks:
        _warn_shared_example_tensors(example_inputs, kwargs)
    pipeline = _as_pipeline(pass_or_pipeline, registry)
    results = {}
    try:
        for dialect in dialects:
            model = copy.deepcopy(module)
            try:
                cap = capture(model, example_inputs, dialect, kwargs, dynamic_shapes=dynamic_shapes)
            except UserError as exc:  # (GPT-2 cannot be traced with symbolic_trace, for one)
                others = tuple(d for d in dialects if d != dialect) or tuple(d for d in DIALECTS if d != dialect)
                raise UserError(
                    f"{exc}\n  note: assert_preserves_outputs captures with each of dialects={dialects!r}; "
                    f"dialects={others!r} checks the others"
                ) from exc
            gm = cap.gm
            extra = [_with_params(cap, dialect, inp, kw, example_inputs, kwargs) for inp, kw in checks]
            sets = [(cap.inputs, cap.kwargs), *extra]
            # Each call starts from the same state (fxpasses.verify.call_isolated): fresh copies
            # of the inputs, the module's tensors as captured, the same RNG seed. So modules that
            # write their inputs or buffers, or draw random numbers, compare like for like.
            state = TensorState(gm)
            before = [_call(gm, inp, state, module, dialect, k, None) for k, inp in enumerate(sets)]
            # float16/bfloat16 results outside the tolerances are judged against float64 runs
            # (fxpasses.reference64): one per input set, of the module before the pipeline
            refs64 = [float64_reference(gm, inp[0], inp[1], b[0], b[1], state) for inp, b in zip(sets, before)]
            with check_journals():  # a pass declaring journal_edits is held to it
                try:
                    report = pipeline.run(gm, cap.inputs, example_kwargs=cap.kwargs or None)
                except PassFailedError as exc:  # which capture it failed in
                    exc.notes.append(f"in the graph of {type(module).__name__} captured with {dialect}")
                    raise
            written = _written_tensors(gm, state)  # module tensors the run wrote in place
            state = TensorState(gm)  # as the pipeline left it (a pass may write weights)
            after = [_call(gm, inp, state, module, dialect, k, (pipeline, report)) for k, inp in enumerate(sets)]
            for k, ((a, a_facts), (b, b_facts), ref64) in enumerate(zip(after, before, refs64)):
                cmp = compare_results(a, a_facts, b, b_facts, atol, rtol, ref64)
                if cmp.message:
                    label = _label(k)
                    # (the figure once: a values mismatch's message gives it already; none
                    # after a shape, dtype or structure change, where no values were compared)
                    figure = cmp.error_figure()
                    figure = f" ({figure})" if figure and "max abs error" not in cmp.message else ""
                    raise AssertionError(
                        f"{pipeline.plan().as_pipeline_string()} changed the outputs of "
                        f"{type(module).__name__} captured with {dialect} on {label}: {cmp.message}{figure}"
                        f"\nthe run (status: the pipeline's own verification, verify={pipeline.verify!r}; compared after it; "
                        "with verify='numeric' the failing pass is rolled back and the nodes it changed named, and "
                        "fxpasses.bisect.bisect finds the rewrite):"
                        f"\n{report.table()}" + _written_note(written, pipeline)
                    )
            results[dialect] = (gm, report)
    except (FxPassesError, JournalMismatch) as exc:
        # the failure's message says what and where; fxpasses' own frames (the pipeline's run
        # loop: about 480 lines that pytest printed before a raising pass's message, a
        # new-user check) are left out of it and of its causes, a pass's own code stays
        raise without_own_frames(exc) from exc.__cause__
    return results


def _written_tensors(gm: torch.nn.Module, state: Any) -> list[str]:
    """The names of the module tensors recorded in ``state`` (a :class:`~fxpasses.verify.TensorState`
    taken before the run) whose bits the run changed, as ``gm`` names them."""
    from .verify import _same_bits

    changed = {id(t) for t, value in state.saved if not _same_bits(t, value)}
    if not changed:
        return []
    named = [*gm.named_parameters(remove_duplicate=False), *gm.named_buffers(remove_duplicate=False)]
    names = {}
    for name, t in named:
        names.setdefault(id(t), name)
    return [names.get(i, "a tensor attribute") for i in changed]


def _written_note(written: list[str], pipeline: Any) -> str:
    """A note line naming the module tensors the run wrote in place, and the passes that
    declare they write none (whose write no rollback restores), or ``""``."""
    if not written:
        return ""
    quiet = [step.name for step in pipeline.plan().steps if not getattr(step.cls, "writes_tensors", True)]
    return f"\nnote: the run wrote the module's tensors {', '.join(sorted(written))} in place" + (
        f"; {', '.join(quiet)} declare{'s' if len(quiet) == 1 else ''} writes_tensors=False, so such a write by "
        "one of them is not expected, and no rollback restores it"
        if quiet
        else ""
    )


def _warn_shared_example_tensors(example_inputs: Sequence[Any] | None, kwargs: Mapping[str, Any]) -> None:
    """Warn when one tensor object is given for two example inputs while further input sets
    are checked: TorchDynamo merges such inputs into one placeholder and ``torch.export``
    specialises its graph to them being one, so a check set giving them different values does
    not test what it seems to (symbolic_trace alone keeps them apart)."""
    from .errors import warn

    named = [(f"example_inputs[{i}]", v) for i, v in enumerate(example_inputs or ())]
    named += [(f"example_kwargs[{k!r}]", v) for k, v in kwargs.items()]
    first: dict[int, str] = {}
    for name, value in named:
        if isinstance(value, torch.Tensor):
            if id(value) in first:
                warn(
                    UserWarning(
                        f"{first[id(value)]} and {name} are one tensor: the dynamo and export captures take "
                        "them as one input, so check_inputs giving them different values test them as one "
                        "there (give each input a tensor of its own, e.g. x.clone())"
                    )
                )
                return
            first[id(value)] = name


def _check_sets(
    check_inputs: Sequence[Sequence[Any]], check_kwargs: Sequence[Mapping[str, Any]]
) -> list[tuple[Sequence[Any], dict[str, Any]]]:
    """``(positional, keywords)`` of each further input set (see assert_preserves_outputs)."""
    from .inputs import check_example_inputs

    check_inputs, check_kwargs = list(check_inputs), list(check_kwargs)
    if check_inputs and check_kwargs and len(check_inputs) != len(check_kwargs):
        raise UserError(
            f"check_inputs ({len(check_inputs)} sets) and check_kwargs ({len(check_kwargs)} sets) must "
            "have one entry per input set each"
        )
    n = max(len(check_inputs), len(check_kwargs))
    sets = []
    for k in range(n):
        args = check_inputs[k] if check_inputs else ()
        args, kw = check_example_inputs(args, check_kwargs[k] if check_kwargs else None, where=f"check_inputs[{k}]")
        sets.append((args, kw or {}))
    return sets


def _label(k: int) -> str:
    return "example_inputs" if k == 0 else f"check_inputs[{k - 1}]"


def _call(gm: Any, inputs: Any, state: Any, module: Any, dialect: str, k: int, after: Any) -> Any:
    """``call_isolated(gm, *inputs, facts=True)`` (``inputs``: positional and keyword inputs):
    ``(outputs, OutputFacts)``; a failure
    names the input set: before the pass (``after`` None) it is the test's inputs that the
    capture cannot take, after it the pass's doing."""
    __tracebackhide__ = True
    from .verify import call_isolated

    args, kwargs = inputs
    try:
        return call_isolated(gm, args, state, kwargs, facts=True)
    except Exception as exc:
        what = exception_line(exc)
        if after is None:
            if k:  # other inputs than those of the capture
                why = (
                    "captures are specialised to the example inputs' shapes and types: give check inputs like them, "
                    "or the sizes that vary as dynamic_shapes"
                )
            elif dialect == "symbolic_trace":
                why = (
                    "the capture was made with these inputs: does the model itself run on them? symbolic_trace "
                    "also keeps what does not depend on the inputs as constants, and records an argument they "
                    "leave to a default other than None or a plain number, bool or string (a tensor, a list) as "
                    "an input: give every argument, or check the other dialects"
                )
            else:
                why = "the capture was made with these inputs: does the model itself run on them?"
            raise UserError(
                f"the {dialect} capture of {type(module).__name__} does not run on {_label(k)}, before "
                f"any pass: {what} ({why})"
            ) from exc
        from .context import describe_node, user_source_line
        from .errors import node_text
        from .pipeline import _running_node

        pipeline, report = after
        node = _running_node(gm, exc)  # the node whose code raised
        where = ""
        if node is not None:
            where = f"\n  at node {node_text(describe_node(node))}"
            line = user_source_line(node)
            if line:
                where += f"\n  user code: {line}"
        hint = (
            "" if pipeline.verify == "numeric"
            else "\n  (verify='numeric' runs the module after each pass: it names the pass that broke it and rolls it back)"
        )
        # (the module's own traceback is torch's frames and FX's generated code: the node
        # and the user's line say where, in a short message; a new-user check)
        raise AssertionError(
            f"{pipeline.plan().as_pipeline_string()} broke {type(module).__name__} captured with "
            f"{dialect}: it no longer runs on {_label(k)}: {what}{where}{hint}\n{report.table()}"
        ) from None


def _with_params(
    cap: Any,
    dialect: str,
    inputs: Sequence[Any],
    kwargs: Mapping[str, Any],
    example_inputs: Sequence[Any] | None,
    example_kwargs: Mapping[str, Any],
) -> tuple[list[Any], dict[str, Any]]:
    """A check input set as the capture takes it. Dynamo graphs also take the parameters and
    buffers as inputs, in the graph's own order, and keyword inputs positionally: keep the
    captured ones and put each new user input (positional or keyword) where the example input
    it stands for was passed (dynamo hands the backend the caller's tensors themselves)."""
    if dialect != "dynamo":
        return list(inputs), dict(kwargs)
    out = list(cap.inputs)
    unknown = [k for k in kwargs if k not in example_kwargs]
    if unknown:
        raise UserError(
            f"check_kwargs name keyword input(s) that example_kwargs does not: {', '.join(map(repr, unknown))} "
            "(the dynamo capture takes the example's keyword inputs positionally)"
        )
    pairs = [*zip(example_inputs or (), inputs)]
    pairs += [(example_kwargs[k], v) for k, v in kwargs.items()]
    for example, value in pairs:
        for i, captured in enumerate(cap.inputs):
            if captured is example:
                out[i] = value
    # a graph captured with dynamic sizes takes each size symbol as an input: the size of
    # the new tensor that holds it
    placeholders = list(cap.gm.graph.find_nodes(op="placeholder"))
    sizes: dict[Any, int] = {}  # size symbol -> its size in the first new tensor that holds it
    for j, node in enumerate(placeholders):
        value = node.meta.get("example_value")
        if isinstance(value, torch.Tensor) and isinstance(out[j], torch.Tensor):
            for d, s in enumerate(value.shape[: out[j].dim()]):
                if isinstance(s, torch.SymInt):
                    sizes.setdefault(s.node.expr, out[j].shape[d])
    for i, node in enumerate(placeholders):
        size = node.meta.get("example_value")
        if isinstance(size, torch.SymInt) and size.node.expr in sizes:
            out[i] = sizes[size.node.expr]
    return out, {}


def normalized_code(gm: torch.fx.GraphModule | torch.fx.Graph) -> str:
    """The graph's generated Python code with blank lines and trailing space removed."""
    graph = _graph_of(gm, "normalized_code", "gm")
    src = graph.python_code("self").src
    return "\n".join(line.rstrip() for line in src.splitlines() if line.strip())


def _graph_of(value: Any, function: str, argument: str, text: bool = False) -> torch.fx.Graph:
    """The graph of ``value`` (a ``GraphModule`` or a ``Graph``).

    Raises:
        TypeError: anything else (a number, an ``nn.Module`` not captured, an exported
            program), naming ``function``, its ``argument``, what it takes and the type given:
            it failed as ``AttributeError: 'int' object has no attribute 'python_code'``."""
    if isinstance(value, torch.fx.GraphModule):
        return value.graph
    if isinstance(value, torch.fx.Graph):
        return value
    takes = "a torch.fx.GraphModule, a torch.fx.Graph or the expected code (a str)" if text else (
        "a torch.fx.GraphModule or a torch.fx.Graph"
    )
    hint = ""
    if isinstance(value, torch.nn.Module):
        hint = " (capture the model first: torch.fx.symbolic_trace(model), or torch.export.export(model, args).module())"
    elif isinstance(value, str) and not text:
        hint = " (the graph comes first, the expected code second: assert_graph_equal(gm, expected))"
    elif type(value).__name__ == "ExportedProgram":
        hint = " (an exported program's module is its .module())"
    raise TypeError(f"{function}: {argument} must be {takes}, got {type(value).__name__}{hint}")


#: the suffix torch's code generator adds to free values after their last use
#: (``add = x + y;  x = y = None``): it follows from the graph, so code written by hand need
#: not spell it
_FREES = re.compile(r";\s+(?:[A-Za-z_]\w*\s*=\s*)+None\s*$")


def assert_graph_equal(gm: Any, expected: Any) -> None:
    """Assert that two graphs generate the same code (``expected``: a graph or code text),
    blank lines, trailing space and the generator's ``;  x = None`` suffixes aside.

    Raises:
        AssertionError: with a unified diff of the expected and actual code.
    """
    __tracebackhide__ = True  # (pytest shows the test's line, not this function's body)
    _graph_of(gm, "assert_graph_equal", "gm")
    if not isinstance(expected, str):
        _graph_of(expected, "assert_graph_equal", "expected", text=True)
    got = _without_frees(normalized_code(gm))
    want = expected if isinstance(expected, str) else normalized_code(expected)
    want = _without_frees("\n".join(line.rstrip() for line in want.strip("\n").splitlines() if line.strip()))
    if got != want:
        from ._diff import unified_diff

        diff = "\n".join(unified_diff(want.splitlines(), got.splitlines(), "expected", "actual", lineterm=""))
        raise AssertionError(f"graphs differ:\n{diff}")


def _without_frees(code: str) -> str:
    return "\n".join(_FREES.sub("", line) for line in code.splitlines())
