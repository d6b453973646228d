"""Pass classes, their options, node hooks and the actions a hook returns.

A pass is a class. Node passes (:class:`NodePass`) subscribe methods to nodes with
:func:`on`; the runner calls each subscribed hook once per matching node, in graph order, and
applies what it returns:

- ``None`` or :data:`KEEP`: leave the node alone.
- :class:`Replace` ``(value)``: replace every use of the node with ``value`` (another node or a
  Python constant); the runner erases the node once it is dead.
- :data:`ERASE`: erase the node; raises :class:`~fxpasses.errors.NodeHasUsersError` (naming
  every user) if other nodes still use it.

Whole-graph passes (:class:`GraphPass`) implement :meth:`GraphPass.run` over the
``GraphModule`` and share everything else: options, ordering, verification, rollback, reports.
"""

from __future__ import annotations

import enum
import inspect
import keyword
import types
import typing
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable

from pydantic import BaseModel, ConfigDict, model_validator

from ._names import not_normal
from .errors import PassDefinitionError, exception_text

if TYPE_CHECKING:  # pragma: no cover
    import torch.fx

    from .context import PassContext

__all__ = [
    "PassOptions",
    "Pass",
    "NodePass",
    "GraphPass",
    "on",
    "Subscription",
    "Keep",
    "Replace",
    "Erase",
    "KEEP",
    "ERASE",
    "NODE_OPS",
    "DIALECTS",
]

#: The six FX op kinds, in the order torch.fx.Interpreter names its methods.
NODE_OPS = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output")
#: The graph dialects built-in passes handle.
DIALECTS = ("symbolic_trace", "dynamo", "export")


class PassOptions(BaseModel):
    """Base class of pass options: unknown keys are rejected, instances are immutable, and
    values are not coerced between types (pydantic strict mode: ``true`` is not an ``int``,
    ``"12"`` is not a number, ``1.5`` is not an ``int``; an ``int`` is accepted for a
    ``float``). Values from config files and pipeline strings are read as pydantic reads JSON
    (:func:`fxpasses.config.validate_options`): a string is an ``Enum`` member (by value), a
    ``Path``, a ``date``, and a list a ``tuple``; Python values are taken as they are (an
    ``Enum`` member, a ``Path``), except that a list is accepted for a ``tuple``, ``set`` or
    ``frozenset`` field too.
    Defaults are validated too (pydantic ``validate_default``): registering a pass whose
    ``Options`` has a default that does not fit its own field is an error."""

    # (an option with an alias, `from_: int = Field(alias="from")`, is printed by its alias and
    # read by either name: plans, reports and reproducers read back)
    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, validate_default=True, validate_by_alias=True, validate_by_name=True
    )

    @model_validator(mode="before")
    @classmethod
    def _lists_to_tuples(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = dict(data)
        fields = cls.model_fields
        for name, value in data.items():
            if not isinstance(value, list):
                continue
            f = fields.get(name) or next((f for f in fields.values() if f.alias == name), None)
            kind = _sequence_type(f.annotation) if f is not None else None
            if kind is not None:
                out[name] = kind(value)
        return out


def _sequence_type(annotation: Any) -> type | None:
    """``tuple``, ``set`` or ``frozenset`` when ``annotation`` is one of them (or a union
    holding one): a list given for such a field is converted (JSON, and so a config file,
    a report or a reproducer, writes each as a list)."""
    origin = typing.get_origin(annotation) or annotation
    if origin in (tuple, set, frozenset):
        return origin
    if origin in (typing.Union, types.UnionType):
        return next(filter(None, map(_sequence_type, typing.get_args(annotation))), None)
    return None


# ---------------------------------------------------------------------------------------------
# actions


class Keep:
    """Leave the node as it is (same as returning ``None``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "KEEP"


class Erase:
    """Erase the node; an error naming its users if it still has any."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ERASE"


@dataclass(frozen=True, slots=True)
class Replace:
    """Replace every use of the node with ``value`` (a ``Node`` or a Python constant).

    The node itself is erased by the runner once nothing uses it.
    """

    value: Any


KEEP = Keep()
ERASE = Erase()


# ---------------------------------------------------------------------------------------------
# hooks


@dataclass(frozen=True)
class Subscription:
    """Which nodes a hook wants: op kinds, op names/families and exact targets.

    Empty ``names`` and ``targets`` mean every node of the op kinds in ``ops``.
    """

    ops: frozenset[str]
    names: frozenset[str]
    targets: tuple[Any, ...]

    def wants_all_of_op(self) -> bool:
        return not self.names and not self.targets


def on(
    *names: str,
    op: str | Iterable[str] | None = None,
    target: Any | Iterable[Any] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Subscribe a :class:`NodePass` method to nodes.

    Args:
        *names: op names or family names (see :mod:`fxpasses.ops`): ``"mul"`` matches
            ``operator.mul``, ``torch.mul``, ``Tensor.mul``, call_method ``mul`` and every
            ``aten.mul`` overload; ``"conv"`` matches ``nn.Conv1d/2d/3d`` modules,
            ``torch.conv2d``, ``F.conv2d``, ``aten.conv2d`` and ``aten.convolution``.
            In-place calls have their own name in every dialect and never match the
            out-of-place one: ``"relu_"`` matches ``torch.relu_``, ``Tensor.relu_``,
            ``F.relu(x, inplace=True)``, ``nn.ReLU(inplace=True)`` and ``aten.relu_``;
            ``"relu"`` none of them (see :mod:`fxpasses.ops`).
        op: restrict to these op kinds (``"call_module"``, ...); default: every op kind that
            can carry a name (``call_function``, ``call_method``, ``call_module``) when names or
            targets are given. Required when neither is given.
        target: exact targets: a callable or ``OpOverload`` (call_function), a method name
            (call_method), an ``nn.Module`` subclass (call_module, matched with ``isinstance``),
            an attribute path (get_attr).

    The hook is called as ``hook(self, node, ctx)`` and returns ``None``/:data:`KEEP`,
    :class:`Replace` or :data:`ERASE`.

    Raises:
        PassDefinitionError: an unknown op kind, or no op, name or target at all.
    """
    if op is None:
        ops: frozenset[str] = frozenset()
    elif isinstance(op, str):
        ops = frozenset({op})
    else:
        ops = frozenset(op)
    unknown = ops - set(NODE_OPS)
    if unknown:
        from .errors import close_names

        close = [(u, close_names(u, NODE_OPS, n=1)) for u in sorted(unknown, key=str) if isinstance(u, str)]
        meant = [f"{c[0]!r} for {u!r}" for u, c in close if c]
        raise PassDefinitionError(
            f"on(): unknown op kind(s) {sorted(unknown, key=str)}; expected one of {', '.join(NODE_OPS)}"
            + ("; did you mean " + ", ".join(meant) + "?" if meant else "")
        )
    if target is None:
        targets: tuple[Any, ...] = ()
    elif isinstance(target, (list, tuple, set, frozenset)):
        targets = tuple(target)
    else:
        targets = (target,)
    for n in names:
        if callable(n) and not isinstance(n, str):
            if _looks_like_hook(n) and len(names) == 1 and op is None and target is None:
                # ``@on`` written without its call: the decorated function arrives as the name
                raise PassDefinitionError(
                    f"on() was given the function {getattr(n, '__qualname__', n)!r} "
                    f"({_defined_at(n) or 'defined where unknown'}) as an op name: @on is called with what the "
                    'hook subscribes to, e.g. @on("relu") or @on(target=torch.relu), not written bare'
                )
            # a target given where names go: @on(torch.relu), @on(nn.ReLU)
            shown = getattr(n, "__name__", None) or repr(n)
            raise PassDefinitionError(
                f"on(): op names are strings, got the {'class' if isinstance(n, type) else 'callable'} {shown!r}: "
                f"give a callable or a module class as target=, e.g. @on(target={shown}), or its name, "
                f"@on({shown.lower() if isinstance(n, type) else shown!r})"
            )
        if not isinstance(n, str) or not n:
            raise PassDefinitionError(f"on(): op names must be non-empty strings, got {n!r}")
    if not ops and not names and not targets:
        raise PassDefinitionError("on() needs at least one op name, an op= kind or a target=")
    if not ops:
        ops = frozenset({"call_function", "call_method", "call_module"})
    sub = Subscription(ops=ops, names=frozenset(names), targets=targets)

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        subs = getattr(fn, "_fxpasses_subscriptions", ())
        fn._fxpasses_subscriptions = (*subs, sub)  # type: ignore[attr-defined]
        return fn

    return decorate


# ---------------------------------------------------------------------------------------------
# pass classes


class Pass:
    """Base of every pass. Subclass :class:`NodePass` or :class:`GraphPass`, not this.

    Class attributes a pass declares:

    - ``name``: the registry name (a Python identifier, e.g. ``"fuse_conv_bn"``).
    - docstring: its first line is the one-line summary shown by ``fxpasses list``.
    - ``Options``: a :class:`PassOptions` (pydantic) subclass; unknown keys are rejected.
    - ``requires``: passes that must run before this one; pulled into a pipeline when missing.
    - ``after`` / ``before``: ordering only, applied when both passes are in the pipeline.
    - ``kind``: ``"transform"`` (may change the graph) or ``"analysis"`` (must not).
    - ``preserves``: for a transform, the analyses whose results stay valid when it changes
      the graph (``"all"``: every one); the others are computed again when next needed
      (see :mod:`fxpasses.analyses`).
    - ``dialects``: the graph dialects the pass handles (informational; a pass must leave
      alone what it does not recognise).
    - ``writes_tensors``: whether the pass may write existing parameters, buffers or tensor
      attributes in place. While True (the default), a pipeline runs the pass under a
      :class:`fxpasses.write_guard.WriteGuard`, which clones each such tensor before its first
      write so that rollback restores it (about 3 us per tensor operator the pass runs). A pass
      that only rewrites the graph or only makes new tensors declares False and runs without
      the guard. The declaration is trusted: an in-place write it makes anyway through the
      tensor itself or a view moves ``Tensor._version`` and is named by a failed run, while one
      through ``.data``, ``.numpy()`` or the raw storage moves nothing and goes unnoticed;
      only ``snapshot_tensors=True`` restores them. ``torch.export`` and ``torch.compile``
      work inside a guarded pass, but TorchDynamo cannot capture one whole graph
      (``fullgraph``) while a dispatch mode is on: a pass that does so declares False.
    - ``journal_edits``: whether every edit the pass makes can be journaled, so that rollback
      records only what the pass touches instead of snapshotting the whole graph and module
      tree before it (:mod:`fxpasses.journal`; about 0.23 s a pass saved on a 100k-node
      graph), and lint checks only the nodes it touched. True promises that the pass changes
      the graph only through torch.fx's editing methods (``Graph.create_node`` and what
      builds on it, ``Graph.erase_node``, ``Node.replace_all_uses_with``,
      ``Node.replace_input_with``) and the :class:`~fxpasses.PassContext`'s helpers, sets
      ``meta`` only on nodes it creates, moves no node, and changes modules only through the
      context (``add_constant``, ``add_submodule``, or after ``ctx.before_module_edit(m)``);
      it needs ``writes_tensors = False``. Not allowed then: ``node.args = ...`` and other
      assignments to an existing node, ``prepend``/``append`` of an existing node, module
      attributes set directly, ``replace_all_uses_with(..., propagate_meta=True)`` onto an
      existing node (it writes that node's ``meta``). The graph of a nested GraphModule (a
      ``torch.cond`` branch) is edited after ``ctx.before_module_edit(branch)``, which
      records its nodes. The declaration is trusted (default False: a snapshot before
      the pass); with ``FXPASSES_CHECK_JOURNAL=1`` (and in
      :func:`fxpasses.testing.assert_preserves_outputs`) each journal is checked against a
      snapshot and a miss fails with an ``AssertionError`` saying what it missed.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[BaseModel]] = PassOptions
    requires: ClassVar[tuple[str, ...]] = ()
    after: ClassVar[tuple[str, ...]] = ()
    before: ClassVar[tuple[str, ...]] = ()
    kind: ClassVar[str] = "transform"
    preserves: ClassVar[tuple[str, ...] | str] = ()
    dialects: ClassVar[tuple[str, ...]] = DIALECTS
    writes_tensors: ClassVar[bool] = True
    journal_edits: ClassVar[bool] = False

    def __init__(self, options: BaseModel | typing.Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        """``MyPass()``: the default options; ``MyPass(MyPass.Options(k=2))``,
        ``MyPass({"k": 2})`` or ``MyPass(k=2)``: those, validated against ``Options`` as a
        pipeline validates Python options.

        Raises:
            OptionsError: a bad or unknown option (named, with "did you mean"), options that
                are another model's instance or not a mapping, or options given both ways.
            PassDefinitionError: the class is not a well-formed pass (see
                :func:`validate_pass_class`), e.g. an ``Options`` default that does not fit
                its own field.
        """
        cls = type(self)
        if kwargs or (options is not None and not isinstance(options, cls.Options)):
            self.options = _validated_options(cls, options, kwargs)
        elif options is not None:
            self.options = options
        else:
            try:
                self.options = _default_options(cls.Options)
            except Exception:
                validate_pass_class(cls)  # a default that does not fit its field: named as a pipeline names it
                raise

    @classmethod
    def summary(cls) -> str:
        """The first line of the class docstring ('' when there is none)."""
        doc = inspect.getdoc(cls) or ""
        if cls.__doc__ is None or doc == inspect.getdoc(Pass):
            return ""
        return doc.strip().splitlines()[0] if doc.strip() else ""

    def setup(self, gm: "torch.fx.GraphModule", ctx: "PassContext") -> None:
        """Called once before each run of the pass over a graph (reset per-run state here)."""

    def __repr__(self) -> str:
        return f"<pass {self.name} {self.options!r}>"


def _validated_options(cls: type[Pass], options: Any, kwargs: dict[str, Any]) -> BaseModel:
    """``cls``'s options from ``cls(options, **kwargs)`` (see :meth:`Pass.__init__`)."""
    from .config import validate_options
    from .errors import OptionsError

    source = f"{cls.__name__}(...)"
    if options is not None and kwargs:
        raise OptionsError(
            cls.name or cls.__name__,
            [("(options)", f"given both as {type(options).__name__} and as keywords ({', '.join(kwargs)}): give one", options)],
            source=source,
        )
    return validate_options(cls.name or cls.__name__, cls.Options, kwargs if kwargs else options, source)


def _default_options(model: type[BaseModel]) -> BaseModel:
    """``model()``, shared between instances when nothing about it can differ or change: no
    fields, no private attributes, no extra keys, no ``model_post_init``. Validating an empty
    model is most of what making a pass costs (68 us when pydantic's code is out of cache,
    against 17 us for the rest; a 1k-node pass takes ~0.5 ms)."""
    shared = vars(model).get("_fxpasses_default_options")
    if shared is not None:
        return shared
    options = model()
    if (
        not model.model_fields
        and not model.__private_attributes__
        and model.model_config.get("extra") != "allow"
        and getattr(model, "__pydantic_post_init__", None) is None
    ):
        type.__setattr__(model, "_fxpasses_default_options", options)
    return options


class NodePass(Pass):
    """A pass made of node hooks (see :func:`on`); the runner does the graph surgery."""

    #: (method name, subscription) pairs, collected from the class and its bases.
    _hooks: ClassVar[tuple[tuple[str, Subscription], ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        hooks: dict[str, tuple[Subscription, ...]] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                subs = getattr(value, "_fxpasses_subscriptions", None)
                if subs:
                    hooks[attr] = subs
                elif attr in hooks:  # overridden without a decorator: no longer a hook
                    del hooks[attr]
        cls._hooks = tuple((attr, s) for attr, subs in hooks.items() for s in subs)

    def finish(self, gm: "torch.fx.GraphModule", ctx: "PassContext") -> None:
        """Called once after all hooks ran (graph-level clean-up of the pass's own making)."""


class GraphPass(Pass):
    """A pass over the whole ``GraphModule``: implement :meth:`run`."""

    def run(self, gm: "torch.fx.GraphModule", ctx: "PassContext") -> bool | None:
        """Transform or analyse ``gm`` in place.

        Return whether the graph changed (``True``/``False``, or a count of changes: any
        ``int``), or ``None`` to let the runner find out by comparing with its snapshot.
        Raising leaves the graph rolled back, and so does returning anything else (a string,
        a list, a tensor): the pipeline fails the pass with a ``PassFailedError`` saying what
        it returned.
        """
        raise NotImplementedError(f"{type(self).__name__}.run")


def _is_torch_pass_base(cls: type) -> bool:
    """Whether ``cls`` subclasses torch's ``torch.fx.passes.infra.pass_base.PassBase`` (looked
    up only where torch's pass infrastructure is imported: no import of torch here)."""
    import sys

    infra = sys.modules.get("torch.fx.passes.infra.pass_base")
    base = getattr(infra, "PassBase", None)
    return isinstance(base, type) and issubclass(cls, base)


def _looks_like_hook(fn: Any) -> bool:
    """Whether ``fn`` is a Python function whose first parameter is ``self``: a method being
    decorated (a bare ``@on`` passes it), not a target such as ``torch.relu``."""
    if not isinstance(fn, types.FunctionType):
        return False
    try:
        first = next(iter(inspect.signature(fn).parameters), None)
    except (TypeError, ValueError):  # pragma: no cover - every Python function has one
        return False
    return first == "self"


def _defined_at(fn: Any) -> str:
    """``"FILE:LINE"``: where ``fn`` (a function, or a static or class method) is defined,
    for errors about a pass's methods, which the pipeline raises far from the class; ``""``
    when unknown."""
    fn = getattr(fn, "__func__", fn)
    code = getattr(inspect.unwrap(fn), "__code__", None) if callable(fn) else None
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else ""


def _warn_misspelled_names(cls: type, name: str, where: str) -> None:
    """Warn about ``@on`` names that no op has but that are close to one (a typo such as
    ``"mull"`` would make the hook never run, silently)."""
    from .errors import PassDefinitionWarning, warn
    from .ops import misspelled_op_name

    for attr, sub in cls._hooks:  # type: ignore[attr-defined]
        for n in sorted(sub.names):
            close = misspelled_op_name(n)
            if close:
                defined = _defined_at(getattr(cls, attr, None))
                at = f", {defined}" if defined else ""
                warn(
                    PassDefinitionWarning(
                        f"pass {name!r} ({where}): @on({n!r}) on the hook {cls.__name__}.{attr}{at} names no known op or family; "
                        f"did you mean {' or '.join(map(repr, close))}? (custom ops may have any name; "
                        "subscribe them by target= to silence this)"
                    ),
                )


def _check_option_defaults(opts: type[BaseModel], name: str, where: str) -> None:
    """Validate the defaults of ``opts`` (pydantic ``validate_default``; an ``Options`` that is
    a plain ``BaseModel`` is checked through a subclass that turns it on).

    Raises:
        PassDefinitionError: naming the pass, each option whose default is invalid, why, and
            the default.
    """
    from pydantic import ValidationError

    from .config import validation_problems

    checked = opts
    if not opts.model_config.get("validate_default"):
        checked = type(opts.__name__, (opts,), {
            "__module__": opts.__module__,
            "__qualname__": opts.__qualname__,
            "model_config": ConfigDict(validate_default=True),
        })
    # (by name and by alias: pydantic names a missing field by its alias)
    required = {k for f, info in opts.model_fields.items() if info.is_required() for k in (f, info.alias) if k}

    def invalid(bad: list[tuple[str, str, Any]]) -> PassDefinitionError:
        lines = [f"pass {name!r} ({where}): invalid default option value(s) in {opts.__qualname__}"]
        lines += [f"  {name}.{path}: {msg} (default: {value!r})" for path, msg, value in bad]
        return PassDefinitionError("\n".join(lines))

    # a nested options model made by a default factory that validates its own defaults raises
    # its own error, whose paths lack the field's name: each factory is called here first
    for field_name, info in opts.model_fields.items():
        if info.default_factory is None:
            continue
        try:
            info.default_factory()  # type: ignore[call-arg]
        except ValidationError as exc:
            inner = [(f"{field_name}.{path}", msg, value) for path, msg, value in validation_problems(exc)]
            raise invalid(inner) from None
        except Exception:
            pass  # (said below, as the default options that cannot be built)
    try:
        defaults = checked.model_validate({})
    except ValidationError as exc:
        bad = [
            (path, msg, value)
            for path, msg, value in validation_problems(exc, opts)
            if path not in required  # pydantic's "missing": a required option has no default
        ]
        if bad:
            raise invalid(bad) from None
    except Exception as exc:  # a validator of the model's own that needs the required options
        if not required:  # ... or Options() itself fails, whatever the user gives
            raise PassDefinitionError(
                f"pass {name!r} ({where}): its default options cannot be built: "
                f"{opts.__qualname__}() raised {exception_text(exc)}"
            ) from exc
    else:
        # a nested model given as an instance is taken as it is (pydantic does not validate
        # instances again), so a default inside it that its own field refuses (an InnerModel()
        # whose model does not validate defaults, a model_construct()) got through, where the
        # same value given in a config is refused: its fields are validated as given ones are
        nested = {k: _models_dumped(v) for k, v in defaults if k not in required and _holds_model(v)}
        if nested:
            try:
                opts.model_validate(nested)  # (the other fields: their defaults, checked above)
            except ValidationError as exc:
                bad = [p for p in validation_problems(exc, opts) if p[0].split(".", 1)[0] in nested]
                if bad:
                    raise invalid(bad) from None
            except Exception:  # a validator of the model's own: not about the nested defaults
                pass


def _holds_model(value: Any) -> bool:
    """Whether ``value`` is a pydantic model, or a list, tuple or dict holding one (what
    :func:`_models_dumped` dumps)."""
    if isinstance(value, BaseModel):
        return True
    if isinstance(value, dict):
        return any(map(_holds_model, value.values()))
    if isinstance(value, (list, tuple)):
        return any(map(_holds_model, value))
    return False


def _models_dumped(value: Any) -> Any:
    """``value`` with every model in it (through lists, tuples and dicts) as the data
    that validates to it (``model_dump(round_trip=True)``), the containers kept."""
    if isinstance(value, BaseModel):
        return value.model_dump(round_trip=True)
    if isinstance(value, dict):
        return {k: _models_dumped(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(map(_models_dumped, value)) if type(value) in (list, tuple) else list(map(_models_dumped, value))
    return value


_ATOMS = (int, float, complex, str, bytes, bool, type(None), enum.Enum, PurePath)


def options_state(options: Any) -> Any:
    """What a run may change in place of a pass's options: a comparable picture of every
    field that holds a mutable value (lists, dicts, sets, models, tensors, other objects),
    containers by their items, pydantic models by their fields, a tensor by identity and
    version (``_version``, which an in-place write increments), any other object by
    identity (and version, when it has one); None when no field can change in place (numbers, strings, enums, paths,
    tuples of them: the frozen model keeps them). See :func:`changed_option`."""
    if not isinstance(options, BaseModel):
        return None
    fields = {k: _picture(v) for k, v in options.__dict__.items() if not _is_atom(v)}
    return fields or None


def changed_option(options: Any, state: Any) -> str | None:
    """The first field of ``options`` whose picture differs from ``state``
    (:func:`options_state` before a run), as ``name (before -> now)``, or None."""
    now = options_state(options) or {}
    for name in dict.fromkeys([*state, *now]):
        if state.get(name) != now.get(name):
            return f"{name!r} (now {_short(getattr(options, name, None))})"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_atom(value: Any) -> bool:
    if isinstance(value, _ATOMS):
        return True
    return type(value) is tuple and all(map(_is_atom, value))


def _picture(value: Any) -> Any:
    if _is_atom(value):
        return value
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(map(_picture, value)))
    if isinstance(value, dict):
        return (type(value), tuple((_picture(k), _picture(v)) for k, v in value.items()))
    if isinstance(value, (set, frozenset)):
        return (type(value), frozenset(map(_picture, value)))
    if isinstance(value, BaseModel):
        return (type(value), tuple((k, _picture(v)) for k, v in value.__dict__.items()))
    try:  # a tensor's count of in-place writes (an inference tensor has none)
        version = getattr(value, "_version", None)
    except RuntimeError:
        version = None
    return (object, id(value), version)


def validate_pass_class(cls: Any) -> None:
    """Check that ``cls`` is a well-formed pass class.

    Raises:
        PassDefinitionError: ``cls`` is not a class (the message gives its repr and type, and
            for a pass instance says to give its class); or naming the class and what is wrong
            with it.
    """
    if not isinstance(cls, type):
        kind = type(cls).__qualname__
        what = f"an instance of {kind}" if isinstance(cls, Pass) else f"{'an' if kind[:1] in 'aeiouAEIOU' else 'a'} {kind}"
        advice = "; give the class itself, not an instance" if isinstance(cls, Pass) else ""
        raise PassDefinitionError(
            f"expected a pass class (a subclass of fxpasses.NodePass or fxpasses.GraphPass), got {cls!r} "
            f"({what}, not a class){advice}"
        )
    where = f"{cls.__module__}.{cls.__qualname__}"
    if not issubclass(cls, Pass) and _is_torch_pass_base(cls):
        raise PassDefinitionError(
            f"{where} is a torch PassBase class: give an instance, {cls.__name__}(...), which the pipeline "
            "runs as a pass function (or subclass fxpasses.NodePass or GraphPass)"
        )
    if cls in (Pass, NodePass, GraphPass):
        raise PassDefinitionError(
            f"{where} is fxpasses' own base class, not a pass: register a subclass of it that defines the pass "
            "(its name, and hooks or run())"
        )
    if not issubclass(cls, Pass):
        raise PassDefinitionError(f"{where} is not a subclass of fxpasses.NodePass or GraphPass")
    if not issubclass(cls, (NodePass, GraphPass)):
        raise PassDefinitionError(f"{where} must subclass fxpasses.NodePass or fxpasses.GraphPass")
    name = cls.name
    if name == "" and not any("name" in vars(c) for c in cls.__mro__ if c not in (Pass, NodePass, GraphPass)):
        raise PassDefinitionError(
            f"{where} has no `name`: give the class one (`name = \"my_pass\"`, a Python identifier), the name "
            "pipelines and configs call it by"
        )
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise PassDefinitionError(f"{where}: `name` must be a Python identifier, got {name!r}")
    if not_normal(name):
        raise PassDefinitionError(f"{where}: `name` {not_normal(name)}")
    opts = cls.Options
    if not (isinstance(opts, type) and issubclass(opts, BaseModel)):
        raise PassDefinitionError(
            f"pass {name!r} ({where}): Options must be a pydantic BaseModel subclass "
            f"(e.g. fxpasses.PassOptions), got {opts!r}"
        )
    _check_option_defaults(opts, name, where)
    for attr in ("requires", "after", "before"):
        value = getattr(cls, attr)
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise PassDefinitionError(
                f"pass {name!r} ({where}): `{attr}` must be a tuple of pass names, got {value!r}"
            )
        bad = [not_normal(v) for v in value if not_normal(v)]
        if bad:  # never equal to a registered name: a required pass would be pulled in again
            raise PassDefinitionError(f"pass {name!r} ({where}): `{attr}` names " + "; ".join(bad))
        if name in value:  # a dependency cycle of one pass, or an order against itself
            raise PassDefinitionError(
                f"pass {name!r} ({where}): `{attr}` names the pass itself ({attr} = {tuple(value)!r})"
            )
    preserves = cls.preserves
    if preserves != "all" and (isinstance(preserves, str) or not all(isinstance(v, str) for v in preserves)):
        raise PassDefinitionError(
            f"pass {name!r} ({where}): `preserves` must be a tuple of analysis names or \"all\", "
            f"got {preserves!r}"
        )
    if not isinstance(cls.writes_tensors, bool):
        raise PassDefinitionError(
            f"pass {name!r} ({where}): `writes_tensors` must be True or False, got {cls.writes_tensors!r}"
        )
    if not isinstance(cls.journal_edits, bool):
        raise PassDefinitionError(
            f"pass {name!r} ({where}): `journal_edits` must be True or False, got {cls.journal_edits!r}"
        )
    if cls.journal_edits and cls.writes_tensors:
        raise PassDefinitionError(
            f"pass {name!r} ({where}): `journal_edits = True` needs `writes_tensors = False` (tensors "
            "written in place are restored from a snapshot's write guard, which a journal does not keep)"
        )
    if cls.kind not in ("transform", "analysis"):
        raise PassDefinitionError(
            f"pass {name!r} ({where}): kind must be 'transform' or 'analysis', got {cls.kind!r}"
        )
    if issubclass(cls, NodePass):
        if not cls._hooks:
            raise PassDefinitionError(f"pass {name!r} ({where}) is a NodePass with no @on hooks")
        _warn_misspelled_names(cls, name, where)
        for attr, _ in cls._hooks:
            fn = getattr(cls, attr)
            try:
                hook_signature = inspect.signature(fn)
            except (TypeError, ValueError):  # pragma: no cover - builtins
                continue
            params = hook_signature.parameters
            try:  # called as hook(self, node, ctx): defaults and *args are fine, as for run()
                hook_signature.bind(None, None, None)
                fits = True
            except TypeError:
                fits = False
            if not fits:
                raise PassDefinitionError(
                    f"pass {name!r} ({where}): hook {attr} must take (self, node, ctx), "
                    f"takes ({', '.join(params)}); the hook {cls.__name__}.{attr} is defined at "
                    f"{_defined_at(fn) or 'an unknown place'}"
                )
    elif cls.run is GraphPass.run:
        raise PassDefinitionError(f"pass {name!r} ({where}) is a GraphPass without run()")
    dialects = cls.dialects
    if isinstance(dialects, str) or not isinstance(dialects, (tuple, list)) or not dialects:
        raise PassDefinitionError(
            f"pass {name!r} ({where}): `dialects` must be a non-empty tuple of {', '.join(map(repr, DIALECTS))}, got {dialects!r}"
        )
    unknown = [d for d in dialects if d not in DIALECTS]
    if unknown:
        raise PassDefinitionError(
            f"pass {name!r} ({where}): `dialects` names {', '.join(map(repr, unknown))}, not a graph dialect "
            f"(one of {', '.join(map(repr, DIALECTS))})"
        )
    # the methods the pipeline calls as (self, gm, ctx): a wrong signature failed only when run
    for attr in ("run", "setup", "finish") if issubclass(cls, GraphPass) else ("setup", "finish"):
        fn = getattr(cls, attr, None)
        if fn is None or fn is getattr(Pass, attr, None) or fn is getattr(GraphPass, attr, None) or fn is getattr(NodePass, attr, None):
            continue
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):  # pragma: no cover - builtins
            continue
        try:
            signature.bind(None, None, None)
        except TypeError:
            raise PassDefinitionError(
                f"pass {name!r} ({where}): {attr}() must take (self, gm, ctx), takes ({', '.join(signature.parameters)})"
                f"; {attr}() is defined at {_defined_at(fn) or 'an unknown place'}"
            ) from None
