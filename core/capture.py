"""Capturing a model as an FX graph in each of the three dialects.

=================  ==========================================================================
dialect            how
=================  ==========================================================================
``symbolic_trace`` ``torch.fx.symbolic_trace(model)`` (recording stack traces; arguments the
                   call gives as, or leaves to, ``None`` or a plain number, bool or string
                   are its ``concrete_args``, asserted in the graph): torch-level
                   ops, submodules as ``call_module``, parameters read through the modules;
                   buffers are read as constants, so an in-place write of one in ``forward``
                   runs once while tracing and is not in the graph: it is put back, with a
                   :class:`~fxpasses.errors.CaptureWarning` naming the buffer; a graph that
                   does not return what the model does on the example inputs (what tracing
                   ran once and kept as a constant) is a ``CaptureWarning`` too
``dynamo``         ``torch.compile(model, backend=<capture>, fullgraph=True)``: the graph
                   TorchDynamo hands a backend (it runs the model once to capture it; what
                   that writes in buffers and inputs is put back after it); parameters and
                   buffers arrive as placeholders,
                   so the captured inputs are the model's inputs with its parameters and
                   buffers, in the order of the graph's placeholders (TorchDynamo's order of
                   first use: ``[conv.weight, conv.bias, x, bn.running_mean, ...]``)
``export``         ``torch.export.export(model, inputs, kwargs).module()``: ATen ops,
                   parameters and buffers as ``get_attr``
=================  ==========================================================================

Keyword inputs (``example_kwargs``): the ``symbolic_trace`` and ``export`` captures are called
with them as the model is (``gm(*inputs, **kwargs)``: an exported module checks that it gets
exactly the keywords it was exported with); TorchDynamo hands its backend every input
positionally, so the ``dynamo`` capture's keyword inputs are among ``inputs`` and its
``kwargs`` are empty.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import torch
import torch.fx

from .dialect import DIALECTS
from .errors import UserError, exception_message

__all__ = ["Captured", "capture", "DIALECTS"]


@dataclass
class Captured:
    """A captured graph and the inputs it takes: ``gm(*inputs, **kwargs)``."""

    gm: torch.fx.GraphModule
    inputs: list[Any]
    dialect: str
    kwargs: dict[str, Any] = field(default_factory=dict)



def _control_flow_operator(exc: BaseException) -> str | None:
    """The name of torch's control-flow operator (``cond``, ``while_loop``, ``map``, ...: the
    modules of ``torch._higher_order_ops``) that raised ``exc`` while symbolic_trace traced
    it, when one did (its frames are in the traceback), else None."""
    import traceback

    for frame in traceback.extract_tb(exc.__traceback__):  # (the outermost: the operator's own module)
        parts = frame.filename.replace("\\", "/").split("/")
        if "_higher_order_ops" in parts and parts[-1].endswith(".py"):
            return parts[-1][:-3]
    return None


#: torch's own source folder: a frame there is torch's code, not the model's
_TORCH_DIR = os.path.dirname(torch.__file__)


def _traced_value_hint(exc: BaseException) -> str | None:
    """What to say when ``symbolic_trace`` failed because the model's own line gave a traced
    value (a ``Proxy``: ``x.shape[0]`` is one) to a C function that needs a real one, where that
    line is (``file:line: code``), or None for another failure.

    Two shapes of it (a ``TypeError`` raised in the model's frame itself, by the C function it
    called): a torch factory given its sizes as separate traced values (``torch.ones(a, b)``:
    torch's argument parser says "ones() takes 1 positional argument but 2 were given"; the
    sizes as one tuple trace), and a Python builtin given a traced value (``range(x.shape[0])``,
    ``int(...)``: "'Proxy' object cannot be interpreted as an integer")."""
    import re
    import traceback

    if not isinstance(exc, TypeError):
        return None
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    last = frames[-1]
    if os.path.abspath(last.filename).startswith(_TORCH_DIR + os.sep):
        return None  # raised inside torch's own Python code: not the model's call
    where = f"{last.filename}:{last.lineno}" + (f": {last.line.strip()}" if last.line and last.line.strip() else "")
    message = str(exc)
    # torch's argument parser, of a factory given separate traced sizes: "ones() takes 1
    # positional argument but 2 were given", "randn() received an invalid combination of
    # arguments - got (Proxy, Proxy), but expected one of: * (tuple of ints size, ..."
    m = re.match(r"(\w+)\(\) takes \d+ positional arguments? but \d+ (?:were|was) given", message) or re.match(
        r"(\w+)\(\) received an invalid combination of arguments - got \([^)]*Proxy[^)]*\).*\bints size\b", message, re.S
    )
    if m and callable(getattr(torch, m.group(1), None)):
        name = m.group(1)
        return (
            f"at {where}: torch.{name} was given its sizes as separate arguments, some of them traced values "
            f"(sizes read from a traced tensor, as x.shape[0]), which symbolic_trace cannot pass to it: give the "
            f"sizes as one tuple (torch.{name}((a, b))), or use the export or dynamo capture"
        )
    if "Proxy" in message:
        return (
            f"at {where}: a traced value (a Proxy: symbolic_trace records calls and computes no values; a size "
            "read from a traced tensor, as x.shape[0], is one) was given to Python code that needs a real value "
            "(range(), int(), a loop over a size); the export and dynamo captures take such code"
        )
    return None


def _short(exc: BaseException, max_lines: int = 6) -> str:
    """The informative head of a torch error: up to its hints/debug context, a few lines."""
    lines = []
    for line in exception_message(exc).strip().splitlines():
        if line.strip().startswith(("Hint:", "Developer debug context", "For more details", "from user code:")):
            break
        if line.strip():
            lines.append(line.rstrip())
    text = "\n".join(lines[:max_lines])
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _cache_hint(model: torch.nn.Module, exc: BaseException) -> str:
    """For a Hugging Face model whose output holds its key/value cache (``use_cache=True``, the
    default of GPT-2 and other decoders), which torch.export cannot return: how to turn it off."""
    config = getattr(model, "config", None)
    if not getattr(config, "use_cache", False) or "Cache" not in exception_message(exc):
        return ""
    return (
        f" ({type(model).__name__} returns its key/value cache, config.use_cache=True: build it with "
        "use_cache=False, or set model.config.use_cache = False, to capture the forward without it)"
    )


def capture(
    model: torch.nn.Module,
    example_inputs: Sequence[Any] | None,
    dialect: str,
    example_kwargs: Mapping[str, Any] | None = None,
    *,
    check_outputs: bool = True,
    dynamic_shapes: Any = None,
    freeze: bool = False,
) -> Captured:
    """Capture ``model`` called as ``model(*example_inputs, **example_kwargs)`` in ``dialect``
    (see the module doc). ``check_outputs`` (symbolic_trace only): call the model and the graph
    once each on the example inputs and warn when they differ (two more forward calls; see
    :func:`_check_traced_outputs`). ``dynamic_shapes``: ``torch.export.export``'s argument of
    that name (``Dim``s of the inputs' sizes): the export capture keeps those sizes symbolic,
    and the dynamo capture marks them dynamic (``torch._dynamo.mark_dynamic``, with the
    ``Dim``'s range; sizes of top-level tensor inputs only): its graph then takes each size
    symbol as an input of its own (an ``int`` in :attr:`Captured.inputs`); a
    ``symbolic_trace`` graph records no sizes and takes any (it is not used there).
    ``freeze`` (dynamo only): the graph as the ``torch.compile`` backend's ``freeze`` option
    hands it to the pipeline, its parameters and buffers made constants of the graph where
    that is safe (:func:`fxpasses.backend._freeze`, which decides by the grad mode the capture
    runs under, as the backend does by the one the model was compiled under), and
    :attr:`Captured.inputs` without them: to bisect a failure the backend met under freeze.

    Raises:
        UserError: an unknown dialect, example inputs of the wrong type (see
            :func:`fxpasses.inputs.check_example_inputs`), ``dynamic_shapes`` the dynamo
            capture cannot mark (naming the entry), ``freeze`` with another dialect, or the
            capture failed (the message names the dialect and keeps the original error as
            ``__cause__``).
    """
    from .inputs import check_example_inputs, in_spec_order

    if isinstance(example_inputs, (Mapping, str, bytes, torch.Tensor)):
        # refused: a dict pointing at example_kwargs, a tensor at [x]
        check_example_inputs(example_inputs, None)
    kwargs = check_example_inputs(None, example_kwargs)[1] or {}
    inputs = tuple(example_inputs or ())
    if freeze is not False and (dialect != "dynamo" or freeze is not True):
        raise UserError(
            f"capture: freeze={freeze!r} with the {dialect!r} capture; freeze=True is the dynamo capture's (the "
            "torch.compile backend's freeze option: TorchDynamo makes parameters and buffers graph inputs; an "
            "exported graph reads them with get_attr already, a symbolic_trace graph through its modules)"
        )
    if dialect == "symbolic_trace":
        try:
            # as torch.fx.symbolic_trace, but recording each node's stack trace so that
            # errors can name the user's source line
            tracer = torch.fx.Tracer()
            tracer.record_stack_traces = True
            concrete = _constant_arguments(model, inputs, kwargs)
            with _state_put_back(model, (), {}, "symbolic_trace") as written:
                graph = tracer.trace(model, concrete_args=concrete or None)
            _keep_argument_names(graph, concrete)
            gm = torch.fx.GraphModule(tracer.root, graph, type(model).__name__)
        except Exception as exc:
            op = _control_flow_operator(exc)
            hint = (
                f"symbolic_trace cannot trace a control-flow operator ({op}) on tensor values, which the export and "
                "dynamo captures take"
                if op is not None
                else _traced_value_hint(exc)
                or "symbolic_trace cannot follow *args/**kwargs forwards and much of what model libraries do, which "
                "the export and dynamo captures take; Python control flow on tensor values needs torch.cond in any capture"
            )
            raise UserError(f"symbolic_trace could not trace {type(model).__name__}: {_short(exc)} ({hint})") from exc
        _copy_container_modes(model, gm)
        if written:
            _warn_untraced_buffer_writes(model, written)
        if check_outputs:
            _check_traced_outputs(model, gm, inputs, kwargs)
        return Captured(gm, list(inputs), dialect, dict(kwargs))
    if dialect == "export":
        try:
            with _quiet_fake_tensor_log():
                # (an exported module given again: its keywords in its spec's order, see in_spec_order)
                gm = torch.export.export(model, inputs, in_spec_order(model, kwargs) or None, dynamic_shapes=dynamic_shapes).module()
        except Exception as exc:
            raise UserError(f"torch.export could not capture {type(model).__name__}: {_short(exc)}{_cache_hint(model, exc)}") from exc
        return Captured(gm, list(inputs), dialect, dict(kwargs))
    if dialect == "dynamo":
        return _capture_dynamo(model, inputs, kwargs, dynamic_shapes, freeze)
    raise UserError(f"unknown capture {dialect!r}; expected one of {', '.join(DIALECTS)}")


def _copy_container_modes(model: torch.nn.Module, gm: torch.fx.GraphModule) -> None:
    """Give each container that the ``GraphModule`` made for a path of ``model`` (a plain
    ``torch.nn.Module()``, in training mode whatever the model's mode: torch.fx rebuilds the
    submodules it traced through that way) the mode of ``model``'s module at that path.

    The mode of the module holding a parameter is what ``fold_constants`` asks to tell a
    trainable parameter from a frozen one (an eval-mode model's ``self.inner.w * 2`` folded
    only after ``gm.eval()``); the called (leaf) modules are the model's own objects and keep
    their mode."""
    for name, m in gm.named_modules():
        if not name or type(m) is not torch.nn.Module:
            continue
        try:
            m.training = model.get_submodule(name).training
        except AttributeError:  # a path the model does not have as a module
            continue


@contextlib.contextmanager
def _quiet_fake_tensor_log() -> Iterator[None]:
    """Keep torch's fake-tensor logger from printing a traceback (at ERROR level) for an op
    that fails on the example inputs: the capture error that follows says the same in one
    line, and the original exception stays its ``__cause__``."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def _state_put_back(
    model: torch.nn.Module,
    inputs: tuple[Any, ...],
    kwargs: dict[str, Any],
    dialect: str = "TorchDynamo",
    *,
    warn_parameters: bool = True,
) -> Iterator[list[str]]:
    """Put back, after the block, the values of ``model``'s buffers and of the tensors among
    ``inputs``/``kwargs`` that it wrote in place (each is copied before: buffers and example
    inputs are small next to the parameters). A parameter written in place cannot be put
    back without a copy of every parameter: it is warned about (a
    :class:`~fxpasses.errors.CaptureWarning` naming it and ``dialect``). The list yielded is
    filled, after the block, with the names of the buffers that were written and put back.
    ``warn_parameters=False``: no warning about parameters (the forward ran before, and that
    call warned)."""
    import warnings

    from torch.utils._pytree import tree_leaves

    from .snapshot import _versions  # (None for an inference tensor: it keeps no version counter)

    leaves = [v for v in tree_leaves((inputs, kwargs)) if isinstance(v, torch.Tensor)]
    buffer_names: dict[int, str] = {}
    for name, b in model.named_buffers(remove_duplicate=False):
        buffer_names.setdefault(id(b), name)
    tensors = [
        t for t in dict.fromkeys([*model.buffers(), *leaves]) if not isinstance(t, torch.nn.Parameter) and t.layout == torch.strided
    ]
    saved = [(t, v, t.detach().clone()) for t, v in zip(tensors, _versions(tensors)) if v is not None]
    params = list(model.named_parameters())
    param_versions = _versions([p for _, p in params])
    written_buffers: list[str] = []
    try:
        yield written_buffers
    finally:
        with torch.no_grad():
            for (t, v, copy), now in zip(saved, _versions([t for t, _, _ in saved])):
                # (by value: batch norm updates its running statistics without counting a version)
                if now != v or not torch.equal(t, copy):
                    t.copy_(copy)
                    if id(t) in buffer_names:
                        written_buffers.append(buffer_names[id(t)])
        now_versions = _versions([p for _, p in params])
        written = [name for (name, _), v, now in zip(params, param_versions, now_versions) if v is not None and now != v]
        if written and warn_parameters:
            from .errors import CaptureWarning

            warnings.warn(
                CaptureWarning(
                    f"capturing {type(model).__name__} with {dialect} ran its forward, which wrote parameter(s) "
                    f"{', '.join(written[:5])}{' ...' if len(written) > 5 else ''} in place: they keep the new values"
                ),
                stacklevel=4,
            )


def _warn_untraced_buffer_writes(model: torch.nn.Module, written: list[str]) -> None:
    """symbolic_trace reads a buffer as the tensor itself, not a proxy (torch.fx's
    ``Tracer.proxy_buffer_attributes`` is False), so an in-place write of one in ``forward``
    (``self.count += 1``) ran once on the real buffer while tracing and is not in the graph:
    the captured module never updates it. Warn, naming the buffers (they were put back)."""
    import warnings

    from .errors import CaptureWarning

    names = ", ".join(written[:5]) + (" ..." if len(written) > 5 else "")
    warnings.warn(
        CaptureWarning(
            f"symbolic_trace ran the in-place write(s) of {type(model).__name__}'s buffer(s) {names} while tracing, "
            "on the buffers themselves: the graph does not contain them (torch.fx reads buffers as constants), so "
            "the captured module never updates them; the buffers were put back. The export and dynamo captures "
            "keep buffer writes in the graph"
        ),
        stacklevel=3,
    )


def _constant_arguments(model: torch.nn.Module, inputs: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of ``model.forward`` that the example call gives as, or leaves to a
    default that is, ``None`` or a plain Python number, bool or string: ``symbolic_trace``'s
    ``concrete_args``, so the graph is what the call computes (torch.fx asserts in the graph
    that a call gives the same value). Traced as inputs, ``mask is not None`` took the branch
    for a given mask and the graph raised on the example inputs, and ``if flag:`` failed the
    trace (an adversarial check)."""
    import inspect

    try:
        signature = inspect.signature(model.forward)
        given = signature.bind_partial(*inputs, **kwargs).arguments
    except (TypeError, ValueError):  # no signature to read, or the call does not bind: traced as it is
        return {}
    out: dict[str, Any] = {}
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        value = given.get(p.name, p.default)
        if value is not p.empty and (value is None or type(value) in (bool, int, float, str)):
            out[p.name] = value
    return out


def _keep_argument_names(graph: torch.fx.Graph, concrete: Mapping[str, Any]) -> None:
    """Give the placeholders of ``concrete`` arguments their own names back in the graph's
    signature: torch.fx names them ``b_1`` (the argument ``b`` specialised), and a call
    ``gm(x, b=None)`` then failed, "unexpected keyword argument 'b'". A NaN's check
    (``eps == nan``, never true: every call failed it) is left out."""
    if not concrete:
        return
    for node in graph.find_nodes(op="placeholder"):
        target = node.target
        if isinstance(target, str) and target not in concrete:
            base, _, suffix = target.rpartition("_")
            if base in concrete and suffix.isdigit():
                node.target = base  # (the node keeps its name: the code binds it from the argument)
                value = concrete[base]
                if type(value) is float and value != value:
                    _drop_equality_checks(graph, node)


def _drop_equality_checks(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    """Erase torch.fx's ``torch._assert(node == value)`` checks of a specialised argument."""
    import operator

    for eq in [u for u in node.users if u.op == "call_function" and u.target is operator.eq]:
        for check in list(eq.users):
            if check.op == "call_function" and check.target is torch._assert and not check.users:
                graph.erase_node(check)
        if not eq.users:
            graph.erase_node(eq)


def _check_traced_outputs(model: torch.nn.Module, gm: torch.fx.GraphModule, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Warn (:class:`~fxpasses.errors.CaptureWarning`) when the symbolic_trace graph ``gm``
    does not return what ``model`` returns on the example inputs, or raises where the model
    does not. symbolic_trace runs what does not depend on the inputs once, while tracing, and
    keeps its result as a constant: a tensor made in ``forward`` and then written in place
    with an input (``t = torch.zeros(3); t.add_(x)``) stays the value it had while tracing,
    and Python values read from tensors are frozen, with no error.

    Both are called in the caller's grad mode from the same torch and Python ``random`` seeds
    and the same states of the generators the model holds (the graph calls what the model
    calls, in order; every generator is put back after),
    with what each writes in parameters (through a :class:`~fxpasses.write_guard.WriteGuard`),
    buffers and inputs put back after it and what they print dropped; outputs are compared
    within ``atol = rtol = 1e-5`` (the same operations, so they agree but for nondeterministic
    kernels). The calls are seen by what the model does
    besides (forward hooks run, Python attributes it counts move). Nothing is said when the
    model itself raises on the inputs (what is wrong with them is reported where they are
    used), or when the outputs cannot be compared (a dataclass, a sparse tensor)."""
    import io
    import random
    import warnings

    from .errors import CaptureWarning
    from .verify import clone_outputs, compare_outputs, module_generators
    from .write_guard import WriteGuard

    from torch.utils._pytree import tree_leaves

    def call(fn: Any) -> tuple[Any, list[tuple[torch.dtype, bool]]]:
        """``fn``'s outputs (detached copies) and each output tensor's (dtype, requires_grad)."""
        state = random.getstate()
        held = [(g, g.get_state()) for g in generators]  # (their own: fork_rng keeps the global one)
        printed = io.StringIO()
        # parameters a forward writes in place are put back too (tracing itself reads them as
        # proxies and writes none); a copy is made of a parameter only when it is written
        guard = WriteGuard(dict(model.named_parameters(remove_duplicate=False)))
        try:
            with (
                _state_put_back(model, inputs, kwargs, "symbolic_trace", warn_parameters=False),
                torch.random.fork_rng(devices=[]),
                contextlib.redirect_stdout(printed),
                contextlib.redirect_stderr(printed),
                guard,
            ):
                torch.manual_seed(0)
                random.seed(0)
                # in the caller's grad mode, as the model runs (a no_grad region the trace
                # dropped shows as requires_grad); the copies are detached at once, which frees
                # what autograd kept
                out = fn(*inputs, **kwargs)
                facts = [(t.dtype, t.requires_grad) for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
                return clone_outputs(out), facts
        finally:
            guard.restore()
            random.setstate(state)
            for g, saved in held:
                g.set_state(saved)

    generators = list({id(g): g for g in (*module_generators(model), *module_generators(gm))}.values())
    try:
        expected, expected_facts = call(model)
    except Exception:  # noqa: BLE001 - the inputs do not fit the model: reported where they are used
        return
    cause = _CONSTANTS_CAUSE
    try:
        actual, actual_facts = call(gm)
    except Exception as exc:  # noqa: BLE001 - the graph raises where the model does not
        problem = f"the graph raises {_short(exc, 2)}"
    else:
        try:
            problem = compare_outputs(actual, expected, 1e-5, 1e-5).message
        except Exception:  # noqa: BLE001 - outputs compare_outputs cannot compare: nothing to say
            return
        if len(actual_facts) == len(expected_facts):
            grads = [(a[1], e[1]) for a, e in zip(actual_facts, expected_facts) if a[1] != e[1]]
            if any(a[0] != e[0] for a, e in zip(actual_facts, expected_facts)):
                cause = _AUTOCAST_CAUSE
            elif grads:
                cause = _GRAD_MODE_CAUSE
                problem = problem or f"an output's requires_grad is {grads[0][0]} where the model's is {grads[0][1]}"
    if problem:
        warnings.warn(
            CaptureWarning(
                f"the symbolic_trace graph of {type(model).__name__} does not compute what the model does on the example "
                f"inputs ({problem}): {cause}; passes and verification would work on that graph. The export and dynamo "
                "captures trace such code"
            ),
            stacklevel=3,
        )


#: why a symbolic_trace graph computes otherwise than its model, by what differs
_CONSTANTS_CAUSE = (
    "symbolic_trace runs what does not depend on the inputs once, while tracing, and keeps the result as a "
    "constant (a tensor made in forward and then written in place, a Python value read from a tensor), and "
    "records no context manager (torch.autocast, torch.no_grad regions run as plain code)"
)
_AUTOCAST_CAUSE = (
    "symbolic_trace records no context manager, so the code of a torch.autocast region runs in the dtypes of "
    "its inputs"
)
_GRAD_MODE_CAUSE = (
    "symbolic_trace records no context manager, so the code of a torch.no_grad (enable_grad, set_grad_enabled, "
    "inference_mode) region runs in the caller's grad mode"
)


#: the attributes torch._dynamo.mark_dynamic sets on a tensor
_DYNAMO_MARKS = ("_dynamo_dynamic_indices", "_dynamo_dynamic_range", "_dynamo_hint_overrides", "_has_dynamo_dim_marking")


def _dynamic_marks(
    model: torch.nn.Module, inputs: tuple[Any, ...], kwargs: dict[str, Any], dynamic_shapes: Any
) -> list[tuple[torch.Tensor, int, Any, Any]]:
    """``(tensor, dim, min, max)`` for each size that ``dynamic_shapes`` (``torch.export``'s
    argument: a tuple in the order of ``forward``'s parameters, or a dict by their names, of
    ``{dim: Dim}`` or a list with an entry per dim) makes dynamic, for the dynamo capture.

    Raises:
        UserError: the inputs do not fit ``forward``, or an entry that is not for a tensor
            input or not ``{dim: Dim}`` / a list per dim (nested inputs are not marked).
    """
    import inspect

    from torch.export import Dim
    from torch.utils._sympy.numbers import int_oo

    try:
        arguments = inspect.signature(model.forward).bind(*inputs, **kwargs).arguments
    except (TypeError, ValueError) as exc:
        raise UserError(f"dynamic_shapes: the example inputs do not fit {type(model).__name__}.forward: {exc}") from None
    if isinstance(dynamic_shapes, Mapping):
        named = dict(dynamic_shapes)
        unknown = [k for k in named if k not in arguments]
        if unknown:
            raise UserError(
                f"dynamic_shapes names {', '.join(map(repr, unknown))}, which {type(model).__name__}.forward is not "
                f"given (its inputs: {', '.join(arguments)})"
            )
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(arguments):
            raise UserError(
                f"dynamic_shapes has {len(dynamic_shapes)} entries for the {len(arguments)} inputs of "
                f"{type(model).__name__}.forward ({', '.join(arguments)})"
            )
        named = dict(zip(arguments, dynamic_shapes))
    else:
        raise UserError(f"dynamic_shapes must be a tuple or a dict by input name, as torch.export takes it, got {type(dynamic_shapes).__name__}")
    marks = []
    for name, spec in named.items():
        if spec is None:
            continue
        value = arguments[name]
        dims = dict(spec) if isinstance(spec, Mapping) else dict(enumerate(spec)) if isinstance(spec, (tuple, list)) else None
        if not isinstance(value, torch.Tensor) or dims is None:
            raise UserError(
                f"dynamic_shapes[{name!r}]: the dynamo capture marks the sizes of tensor inputs given as "
                f"{{dim: Dim}} (or a list with an entry per dim); got {spec!r} for {type(value).__name__}"
            )
        for d, dim in dims.items():
            if dim is None or dim is Dim.STATIC:
                continue
            low, high = getattr(dim, "min", None), getattr(dim, "max", None)
            low = low if isinstance(low, int) else None
            high = high if isinstance(high, int) and high is not int_oo else None
            if low is not None or high is not None:  # mark_dynamic takes both bounds or neither
                low, high = (0 if low is None else low), (int_oo if high is None else high)
            marks.append((value, int(d), low, high))
    return marks


def _eager_exception(model: torch.nn.Module, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Exception | None:
    """What ``model(*inputs, **kwargs)`` raises run as plain Python (what it writes in place put
    back), or None: after a failed TorchDynamo capture, whether the model's own code raises
    (TorchDynamo reports that as "Unsupported: Observed exception", without the exception)."""
    try:
        with _quiet_fake_tensor_log(), _state_put_back(model, inputs, kwargs):
            model(*inputs, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the model's own exception, whatever it is
        return exc
    return None


def _capture_dynamo(
    model: torch.nn.Module,
    inputs: tuple[Any, ...],
    kwargs: dict[str, Any],
    dynamic_shapes: Any = None,
    freeze: bool = False,
) -> Captured:
    import torch._dynamo

    graphs: list[tuple[torch.fx.GraphModule, list[Any]]] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        if freeze:
            # now, while the placeholders hold their TorchDynamo sources (the `grapharg`
            # meta TorchDynamo drops after compiling), and on a copy: the function handed back
            # runs the graph TorchDynamo made, with every input
            from .backend import _copy_dynamo_module, _freeze

            frozen = _copy_dynamo_module(gm)
            freezing = _freeze(frozen, example_inputs)
            graphs.append((frozen, [example_inputs[i] for i in freezing.kept]))
        else:
            graphs.append((gm, list(example_inputs)))
        return gm.forward

    # Each capture adds a compiled entry for the model class's forward; TorchDynamo stops
    # compiling a code object after `recompile_limit` (8) entries. Drop this code object's
    # entries first so that repeated captures (tests, benchmarks) keep reaching our backend.
    code = getattr(getattr(type(model), "forward", None), "__code__", None)
    if code is not None and hasattr(torch._dynamo, "reset_code"):
        torch._dynamo.reset_code(code)
    marks = _dynamic_marks(model, inputs, kwargs, dynamic_shapes) if dynamic_shapes is not None else []
    # (the caller's tensors are marked: TorchDynamo reads the marks off them; put back after)
    held = [(t, {a: t.__dict__[a] for a in _DYNAMO_MARKS if a in t.__dict__}) for t in dict.fromkeys(t for t, *_ in marks)]
    try:
        for tensor, dim, low, high in marks:
            torch._dynamo.mark_dynamic(tensor, dim, min=low, max=high)
        for attempt in range(2):
            try:
                # TorchDynamo runs the model to capture it: what that call writes in place (batch
                # norm statistics, an input the forward adds to) is put back after it, so the
                # capture leaves the caller's model and inputs as they were, as the other two do
                with _quiet_fake_tensor_log(), _state_put_back(model, inputs, kwargs):
                    torch.compile(model, backend=backend, fullgraph=True, dynamic=None if marks else False)(*inputs, **kwargs)
            except Exception as exc:
                own = _eager_exception(model, inputs, kwargs)
                if own is not None:  # (TorchDynamo says "Observed exception", not what the model raised)
                    raise UserError(
                        f"TorchDynamo could not capture {type(model).__name__}: the model raises {_short(own)} on "
                        "these inputs (run without TorchDynamo too)"
                    ) from own
                raise UserError(
                    f"TorchDynamo could not capture {type(model).__name__} as one graph: {_short(exc)}"
                ) from exc
            if graphs:
                break
            torch._dynamo.reset()  # a cached compilation for another backend answered the call
    finally:
        for tensor, before in held:
            for attr in _DYNAMO_MARKS:
                tensor.__dict__.pop(attr, None)
            tensor.__dict__.update(before)
    if not graphs:
        # TorchDynamo calls no backend for a frame with no tensor operation in it (`return y, x`):
        # it runs such a forward as Python; export and symbolic_trace trace it still
        raise UserError(
            f"TorchDynamo produced no graph for {type(model).__name__}: TorchDynamo makes none for a forward with "
            "no tensor operation to compile (one that returns its inputs as they are, rearranged, or values "
            'computed without tensors); capture it with capture = "export" or "symbolic_trace" (the dialect '
            "argument of fxpasses.capture.capture), which capture it"
        )
    gm, real_inputs = graphs[-1]
    # a dynamic size is an input of its own, handed to the backend as a SymInt: its value
    real_inputs = [_concrete(v) if isinstance(v, torch.SymInt) else v for v in real_inputs]
    return Captured(gm, real_inputs, "dynamo")


def _concrete(size: torch.SymInt) -> int:
    """The value of a size TorchDynamo handed its backend as a ``SymInt``."""
    hint = getattr(size.node, "hint", None)
    return int(hint) if hint is not None else int(size)
