"""Op families: one name for every dialect's spelling of an operation.

FX graphs spell the same operation differently depending on how they were captured:

=====================  ====================================================================
dialect                how ``x * y`` and a 2-d convolution appear
=====================  ====================================================================
``symbolic_trace``     ``operator.mul``; ``call_module`` of an ``nn.Conv2d``
TorchDynamo            ``operator.mul`` / ``torch.mul``; ``torch.conv2d`` with parameters
                       as placeholders
``torch.export``       ``aten.mul.Tensor``; ``aten.conv2d.default`` (or
                       ``aten.convolution.default`` after ``run_decompositions()``)
=====================  ====================================================================

:func:`op_name` maps a node to its *canonical op name* (``"mul"``, ``"conv2d"``, ``"add_"``
for the in-place add, ...). A *family* is a set of canonical names: ``"conv"`` covers
``conv1d``/``conv2d``/``conv3d``/``convolution``/``_convolution``. A hook that subscribes to a
name matches every canonical name of the family of that name (a name that is no family matches
itself).

In-place variants (trailing ``_``) are never in the family of their out-of-place op: a rewrite
of ``relu(x)`` that dropped the write of ``relu_(x)`` would change what the graph computes. A
call is in-place by what it does, whatever its spelling, so the three dialects agree:
``torch.relu_``, ``Tensor.relu_``, ``aten.relu_``, ``F.relu(x, inplace=True)`` (a true
``inplace`` argument, by keyword or position) and a call of ``nn.ReLU(inplace=True)`` (a
module whose ``inplace`` attribute is true) are all ``"relu_"``; ``operator.iadd`` is
``"add_"``. The in-place twin of a family ``F`` is ``F_``: ``"dropout_"`` covers
``dropout_``/``feature_dropout_``/``alpha_dropout_``/..., ``"mul_"`` covers ``mul_`` and
``multiply_``.

``relu6`` is ``hardtanh`` with bounds ``(0, 6)``, and the dialects spell it either way
(``nn.ReLU6`` is a ``call_module`` under ``symbolic_trace``, ``F.hardtanh(x, 0.0, 6.0)`` under
TorchDynamo and ``aten.hardtanh.default(x, 0.0, 6.0)`` under ``torch.export``, while
``F.relu6`` stays ``F.relu6`` / ``aten.relu6``). A call is named by what it computes here too:
a hardtanh call whose bounds are the literal numbers 0 and 6 (``F.hardtanh``,
``F.hardtanh_``, ``aten.hardtanh``, ``aten.hardtanh_``, by keyword or position; a call of an
``nn.Hardtanh``/``nn.ReLU6`` module by its ``min_val``/``max_val`` attributes) is ``"relu6"``
(``"relu6_"`` in place); one with other bounds, the default ``(-1, 1)``, or bounds known only
when the graph runs is ``"hardtanh"``. The family ``"hardtanh"`` covers ``"relu6"`` (and
``"hardtanh_"`` covers ``"relu6_"``): a hook for hardtanh sees every relu6, in every dialect,
while one for ``"relu6"`` sees only the calls with bounds ``(0, 6)``.
"""

from __future__ import annotations

import difflib
import inspect
import operator
from typing import Any, Callable, Iterable

import torch

__all__ = [
    "op_name",
    "matches",
    "family_members",
    "define_family",
    "is_inplace_name",
    "module_op_name",
    "module_call_name",
    "module_call_names",
    "call_op_name",
    "inplace_position",
    "names_per_call",
    "FAMILIES",
]

# operator-module functions and their torch names.
_OPERATOR_NAMES: dict[Callable[..., Any], str] = {
    operator.add: "add",
    operator.sub: "sub",
    operator.mul: "mul",
    operator.truediv: "div",
    operator.floordiv: "floor_divide",
    operator.mod: "remainder",
    operator.pow: "pow",
    operator.neg: "neg",
    operator.pos: "positive",
    operator.matmul: "matmul",
    operator.and_: "bitwise_and",
    operator.or_: "bitwise_or",
    operator.xor: "bitwise_xor",
    operator.invert: "bitwise_not",
    operator.lshift: "bitwise_left_shift",
    operator.rshift: "bitwise_right_shift",
    operator.lt: "lt",
    operator.le: "le",
    operator.gt: "gt",
    operator.ge: "ge",
    operator.eq: "eq",
    operator.ne: "ne",
    operator.abs: "abs",
    operator.getitem: "getitem",
    operator.setitem: "setitem",
    operator.iadd: "add_",
    operator.isub: "sub_",
    operator.imul: "mul_",
    operator.itruediv: "div_",
    operator.ifloordiv: "floor_divide_",
    operator.imod: "remainder_",
    operator.ipow: "pow_",
    operator.imatmul: "matmul_",
    operator.iand: "bitwise_and_",
    operator.ior: "bitwise_or_",
    operator.ixor: "bitwise_xor_",
    operator.ilshift: "bitwise_left_shift_",
    operator.irshift: "bitwise_right_shift_",
}

# Module classes whose lower-cased class name is not their functional op name.
_MODULE_NAMES: dict[type, str] = {
    torch.nn.Conv1d: "conv1d",
    torch.nn.Conv2d: "conv2d",
    torch.nn.Conv3d: "conv3d",
    torch.nn.ConvTranspose1d: "conv_transpose1d",
    torch.nn.ConvTranspose2d: "conv_transpose2d",
    torch.nn.ConvTranspose3d: "conv_transpose3d",
    torch.nn.BatchNorm1d: "batch_norm",
    torch.nn.BatchNorm2d: "batch_norm",
    torch.nn.BatchNorm3d: "batch_norm",
    torch.nn.SyncBatchNorm: "batch_norm",
    torch.nn.LayerNorm: "layer_norm",
    torch.nn.GroupNorm: "group_norm",
    torch.nn.Dropout: "dropout",
    torch.nn.Dropout1d: "dropout1d",
    torch.nn.Dropout2d: "dropout2d",
    torch.nn.Dropout3d: "dropout3d",
    torch.nn.AlphaDropout: "alpha_dropout",
    torch.nn.FeatureAlphaDropout: "feature_alpha_dropout",
    torch.nn.Identity: "identity",
    torch.nn.Linear: "linear",
    torch.nn.ReLU: "relu",
    torch.nn.ReLU6: "relu6",
    torch.nn.GELU: "gelu",
    torch.nn.SiLU: "silu",
    torch.nn.Sigmoid: "sigmoid",
    torch.nn.Tanh: "tanh",
    torch.nn.Softmax: "softmax",
    torch.nn.Flatten: "flatten",
    torch.nn.Embedding: "embedding",
    torch.nn.MaxPool2d: "max_pool2d",
    torch.nn.AvgPool2d: "avg_pool2d",
    torch.nn.AdaptiveAvgPool2d: "adaptive_avg_pool2d",
}

#: family name -> canonical op names. Extend with :func:`define_family`.
FAMILIES: dict[str, frozenset[str]] = {
    "conv": frozenset({"conv1d", "conv2d", "conv3d", "convolution", "_convolution"}),
    "conv_transpose": frozenset(
        {"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}
    ),
    "batch_norm": frozenset(
        {
            "batch_norm",
            "_native_batch_norm_legit_no_training",
            "_native_batch_norm_legit",
            "_native_batch_norm_legit_functional",
            "native_batch_norm",
            "_batch_norm_with_update",
            "_batch_norm_no_update",
            "cudnn_batch_norm",
            "miopen_batch_norm",
        }
    ),
    "dropout": frozenset(
        {
            "dropout",
            "dropout1d",
            "dropout2d",
            "dropout3d",
            "feature_dropout",
            "alpha_dropout",
            "feature_alpha_dropout",
            "native_dropout",
        }
    ),
    "div": frozenset({"div", "true_divide", "divide"}),
    "mul": frozenset({"mul", "multiply"}),
    # (not rsub, `rsub(x, c)` is `c - x`; not addmm, `addmm(bias, x, w)` takes w transposed
    # and its operands in another order: a hook for sub or linear would misread them)
    "sub": frozenset({"sub", "subtract"}),
    "neg": frozenset({"neg", "negative"}),
    # relu6 is hardtanh(0, 6): see _BOUNDED_NAMES for which calls are named "relu6"
    "hardtanh": frozenset({"hardtanh", "relu6"}),
    # torch's other aliases of one op (the alias map of torch/csrc/jit/passes/normalize_ops.cpp,
    # which TorchScript normalizes them by): a subscription to the op matches every spelling
    "clamp": frozenset({"clamp", "clip"}),
    "abs": frozenset({"abs", "absolute"}),
    "acos": frozenset({"acos", "arccos"}),
    "asin": frozenset({"asin", "arcsin"}),
    "atan": frozenset({"atan", "arctan"}),
    "atan2": frozenset({"atan2", "arctan2"}),
    "acosh": frozenset({"acosh", "arccosh"}),
    "asinh": frozenset({"asinh", "arcsinh"}),
    "atanh": frozenset({"atanh", "arctanh"}),
    "trunc": frozenset({"trunc", "fix"}),
    "gt": frozenset({"gt", "greater"}),
    "ge": frozenset({"ge", "greater_equal"}),
    "lt": frozenset({"lt", "less"}),
    "le": frozenset({"le", "less_equal"}),
    "ne": frozenset({"ne", "not_equal"}),
    "transpose": frozenset({"transpose", "swapaxes", "swapdims"}),
    "movedim": frozenset({"movedim", "moveaxis"}),
    "cat": frozenset({"cat", "concat", "concatenate"}),
    "vstack": frozenset({"vstack", "row_stack"}),
    "outer": frozenset({"outer", "ger"}),
    "linalg_det": frozenset({"linalg_det", "det"}),
    "linalg_matrix_power": frozenset({"linalg_matrix_power", "matrix_power"}),
    "linalg_matrix_exp": frozenset({"linalg_matrix_exp", "matrix_exp"}),
    "matmul": frozenset({"matmul", "linalg_matmul"}),
    "linalg_inv": frozenset({"linalg_inv", "inverse"}),
    "linalg_householder_product": frozenset({"linalg_householder_product", "orgqr"}),
    "mH": frozenset({"mH", "adjoint"}),
    "erf": frozenset({"erf", "special_erf"}),
    "erfc": frozenset({"erfc", "special_erfc"}),
    "erfinv": frozenset({"erfinv", "special_erfinv"}),
    "sigmoid": frozenset({"sigmoid", "special_expit"}),
    "exp2": frozenset({"exp2", "special_exp2"}),
    "expm1": frozenset({"expm1", "special_expm1"}),
    "logit": frozenset({"logit", "special_logit"}),
    "logsumexp": frozenset({"logsumexp", "special_logsumexp"}),
    "round": frozenset({"round", "special_round"}),
    "log1p": frozenset({"log1p", "special_log1p"}),
    "sinc": frozenset({"sinc", "special_sinc"}),
    "digamma": frozenset({"digamma", "special_digamma", "special_psi"}),
    "i0": frozenset({"i0", "special_i0"}),
    "xlogy": frozenset({"xlogy", "special_xlogy"}),
    "softmax": frozenset({"softmax", "special_softmax"}),
    "log_softmax": frozenset({"log_softmax", "special_log_softmax"}),
    "mvlgamma": frozenset({"mvlgamma", "special_multigammaln"}),
    "polygamma": frozenset({"polygamma", "special_polygamma"}),
    "igamma": frozenset({"igamma", "special_gammainc"}),
    "igammac": frozenset({"igammac", "special_gammaincc"}),
    "lgamma": frozenset({"lgamma", "special_gammaln"}),
}

#: op names whose call is another op for the literal bounds ``(min_val, max_val)``: the op
#: name of a hardtanh call with bounds (0, 6) is ``"relu6"`` (see :func:`call_op_name` and
#: :func:`module_call_name`)
_BOUNDED_NAMES: dict[str, tuple[float, float, str]] = {
    "hardtanh": (0, 6, "relu6"),
    "hardtanh_": (0, 6, "relu6_"),
}
#: the bounds' parameter names, in the order of their positions
_BOUND_PARAMS = ("min_val", "max_val")

_name_cache: dict[Any, str | None] = {}
_module_name_cache: dict[type, str] = {}
_families_changed = 0  # how many times define_family changed FAMILIES


def ops_generation() -> int:
    """A number that changes whenever :func:`define_family` changes what a name matches (for
    caches of subscription answers, such as the runner's per pass class)."""
    return _families_changed


def define_family(name: str, members: Iterable[str]) -> None:
    """Add canonical op names to the family ``name`` (created when missing).

    ``members`` is a collection of op names (``["relu", "gelu"]``); a single name must be
    given as a one-item list. A member that is itself a family adds that family's members as
    they are now (``["conv"]`` adds ``conv1d``, ``conv2d``, ...: a call's name is its op's,
    never its family's). A member that is no known op's name but close to one
    (``"rleu"``) is warned about (:class:`~fxpasses.errors.PassDefinitionWarning`), as ``@on``
    warns; a name unlike every known one (a custom op's) is taken as it is.

    Raises:
        TypeError: ``name`` is not a string, ``members`` is a string (it would be read as
            its characters) or not iterable, or a member is not a string.
        ValueError: a name is not an identifier (op names are: ``relu6``, ``max_pool2d``), no
            member is given, or a member is in place (``add_``) and the family is not, or the
            other way round: in-place ops must never match a hook written for the out-of-place
            op, nor out-of-place ops one written for the in-place op.
    """
    if not isinstance(name, str):
        raise TypeError(f"define_family: the family name must be a str, not {type(name).__name__} ({name!r})")
    if isinstance(members, str):
        raise TypeError(
            f"define_family({name!r}, {members!r}): members must be a collection of op names, not one "
            f"string (it would be read as its characters); write [{members!r}]"
        )
    if isinstance(members, bytes):
        raise TypeError(f"define_family({name!r}, {members!r}): members must be a collection of op names (str), not bytes")
    try:
        members = frozenset(members)
    except TypeError as exc:
        raise TypeError(
            f"define_family({name!r}, ...): members must be an iterable of op names, not {type(members).__name__}"
        ) from exc
    wrong = [m for m in members if not isinstance(m, str)]
    if wrong:
        raise TypeError(f"define_family({name!r}, ...): members must be op names (str), not {wrong[0]!r}")
    if not members:
        raise ValueError(f"define_family({name!r}, ...): give at least one member")
    odd = sorted(n for n in (name, *members) if not n.isidentifier())
    if odd:
        raise ValueError(f"define_family({name!r}, ...): {odd[0]!r} is not an op name (op names are identifiers)")
    inplace = is_inplace_name(name)
    bad = sorted(m for m in members if is_inplace_name(m) != inplace)
    if bad:
        kind = "out-of-place" if inplace else "in-place"
        raise ValueError(f"family {name!r} may not contain {kind} op names {bad}")
    for m in sorted(members):
        close = [] if m in FAMILIES else misspelled_op_name(m)
        if close:
            from .errors import PassDefinitionWarning, warn

            warn(
                PassDefinitionWarning(
                    f"define_family({name!r}, ...): {m!r} names no known op or family; did you mean "
                    + " or ".join(map(repr, close))
                    + "?"
                ),
            )
    expanded = frozenset().union(*map(family_members, members))
    global _families_changed
    FAMILIES[name] = FAMILIES.get(name, frozenset()) | expanded
    _families_changed += 1


def family_members(name: str) -> frozenset[str]:
    """The canonical op names a subscription to ``name`` matches (``{name}`` if no family).

    An in-place name ``F_`` whose ``F`` is a family (and that is no family itself) matches the
    in-place twin of every member of ``F``: ``"div_"`` -> ``{"div_", "true_divide_",
    "divide_"}``.
    """
    if name not in FAMILIES and is_inplace_name(name) and name[:-1] in FAMILIES:
        return frozenset(m + "_" for m in FAMILIES[name[:-1]]) | {name}
    return FAMILIES.get(name, frozenset()) | {name}


def is_inplace_name(name: str) -> bool:
    """``True`` for the name of an in-place op (``add_``, ``relu_``), not for dunders."""
    return name.endswith("_") and not name.endswith("__") and name.strip("_") != ""


def module_op_name(module_cls: type) -> str:
    """Canonical op name of an ``nn.Module`` class (``nn.Conv2d`` -> ``"conv2d"``); see
    :func:`module_call_name` for a call of an instance."""
    try:
        return _module_name_cache[module_cls]
    except KeyError:
        pass
    name = module_cls.__name__.lower()
    for cls in module_cls.__mro__:
        if cls in _MODULE_NAMES:
            name = _MODULE_NAMES[cls]
            break
    _module_name_cache[module_cls] = name
    return name


def module_call_name(mod: torch.nn.Module) -> str:
    """Canonical op name of a call of the module ``mod``: :func:`module_op_name` of its class,
    with a trailing ``_`` when its ``inplace`` attribute is true (``nn.ReLU(inplace=True)`` ->
    ``"relu_"``: the call writes its input, as ``torch.relu_`` does).

    An ``nn.Hardtanh`` (``nn.ReLU6`` included) is named by its ``min_val``/``max_val``
    attributes, as its call is in the other dialects: ``"relu6"`` for the literal bounds
    ``(0, 6)`` (``nn.ReLU6()``, ``nn.Hardtanh(0, 6)``), ``"hardtanh"`` for any others."""
    from .effects import _module_attr  # getattr without nn.Module's exception for a missing one

    name = module_op_name(type(mod))
    if name in _RELU6_MODULE_NAMES and isinstance(mod, torch.nn.Hardtanh):
        lo, hi, _ = _BOUNDED_NAMES["hardtanh"]
        bounds = (_module_attr(mod, "min_val", None), _module_attr(mod, "max_val", None))
        name = "relu6" if _is_bound(bounds[0], lo) and _is_bound(bounds[1], hi) else "hardtanh"
    if _module_attr(mod, "inplace", False) is True and not is_inplace_name(name):
        return name + "_"
    return name


def module_call_names(module_cls: type) -> frozenset[str]:
    """Every name :func:`module_call_name` can give a call of an instance of ``module_cls``,
    whatever its attributes: the class's op name and its in-place spelling, and for
    ``nn.Hardtanh`` (``nn.ReLU6`` included) ``"relu6"`` and ``"hardtanh"`` and theirs. A caller
    that finds none of them wanted need not name each call (cached per class)."""
    try:
        return _module_names_cache[module_cls]
    except KeyError:
        pass
    name = module_op_name(module_cls)
    names = {name}
    if name in _RELU6_MODULE_NAMES and isinstance(module_cls, type) and issubclass(module_cls, torch.nn.Hardtanh):
        names = set(_RELU6_MODULE_NAMES)
    names |= {n + "_" for n in names if not is_inplace_name(n)}
    out = _module_names_cache[module_cls] = frozenset(names)
    return out


_module_names_cache: dict[type, frozenset[str]] = {}


#: module op names renamed by their bounds (a subclass of nn.Hardtanh named otherwise, by its
#: own class name, may compute something else: it keeps its name)
_RELU6_MODULE_NAMES = frozenset({"hardtanh", "relu6"})


def _is_bound(value: Any, wanted: float) -> bool:
    """``value`` is the literal number ``wanted`` (a bool, a node or a tensor is not)."""
    return type(value) in (int, float) and value == wanted


_inplace_positions: dict[Any, int | None] = {}


def inplace_position(target: Any) -> int | None:
    """Position of the ``inplace`` parameter of a ``call_function`` target (``F.relu`` -> 1;
    -1 when it is keyword-only), or None when it has none (``torch.relu``, ``operator.add``,
    most ``OpOverload`` s) or its signature cannot be read. Cached per target."""
    try:
        return _inplace_positions[target]
    except KeyError:
        pass
    except TypeError:  # unhashable target
        return None
    positions = _param_positions(target, ("inplace",))
    pos = positions[0] if positions is not None else None
    _inplace_positions[target] = pos
    return pos


def _param_positions(target: Any, names: tuple[str, ...]) -> tuple[int | None, ...] | None:
    """Positions of the parameters ``names`` of a ``call_function`` target (-1: keyword-only,
    None: no such parameter), from an ``OpOverload``'s schema, a Python function's signature,
    or for a torch builtin without one (``F.hardtanh_``) the schema of the ATen op of its name;
    None when none of these can be read."""
    schema = None
    if isinstance(target, torch._ops.OpOverload):
        schema = target._schema
    elif callable(target) and not isinstance(target, torch._ops.OpOverloadPacket):
        try:
            params = list(inspect.signature(target).parameters.values())
        except (TypeError, ValueError):
            params = None
        if params is not None:
            found = {
                p.name: (-1 if p.kind is p.KEYWORD_ONLY else i)
                for i, p in enumerate(params)
                if p.name in names and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
            }
            return tuple(found.get(n) for n in names)
        module = getattr(target, "__module__", None) or ""
        packet = getattr(torch.ops.aten, getattr(target, "__name__", ""), None)
        if module.split(".", 1)[0] == "torch" and isinstance(packet, torch._ops.OpOverloadPacket):
            schema = getattr(packet, "default", None)
            schema = getattr(schema, "_schema", None)
    if schema is None:
        return None
    found = {a.name: (-1 if a.kwarg_only else i) for i, a in enumerate(schema.arguments) if a.name in names}
    return tuple(found.get(n) for n in names)


#: target -> (its name, inplace position, bound positions) when its calls are named per call
_call_namings: dict[Any, tuple[str, int | None, tuple[int | None, ...] | None] | None] = {}


def _call_naming(target: Any) -> tuple[str, int | None, tuple[int | None, ...] | None] | None:
    """What the name of a call of ``target`` depends on besides the target: its name, the
    position of its ``inplace`` parameter (:func:`inplace_position`) and those of its bounds
    (for a name in ``_BOUNDED_NAMES``); None when the name is the target's alone. Cached."""
    try:
        return _call_namings[target]
    except KeyError:
        pass
    except TypeError:  # unhashable target
        return None
    naming = None
    name = callable_op_name(target)
    if name is not None:
        pos = inplace_position(target)
        bounds = _param_positions(target, _BOUND_PARAMS) if name in _BOUNDED_NAMES else None
        if bounds is not None and None in bounds:
            bounds = None
        if bounds is not None or (pos is not None and not is_inplace_name(name)):
            naming = (name, pos, bounds)
    _call_namings[target] = naming
    return naming


def names_per_call(target: Any) -> bool:
    """Whether the op name of a ``call_function`` node of ``target`` depends on the call's
    arguments (:func:`call_op_name`): it has an ``inplace`` parameter (``F.relu``) or bounds
    that can make it another op (``F.hardtanh``, ``aten.hardtanh``). For every other target
    it is :func:`callable_op_name` of the target, the same for all its nodes."""
    return _call_naming(target) is not None


def call_op_name(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """Canonical op name of the call ``target(*args, **kwargs)``: :func:`callable_op_name`,
    with a trailing ``_`` when the target has an ``inplace`` parameter (see
    :func:`inplace_position`) and the call gives it a value that is not false: a literal
    ``True`` (``F.relu(x, inplace=True)``, ``F.dropout(x, 0.5, False, True)``) or a value
    known only when the graph runs, which may be true (such a call is not the out-of-place op
    for a rewrite).

    A hardtanh call (``F.hardtanh``, ``F.hardtanh_``, ``aten.hardtanh``, ``aten.hardtanh_``)
    whose ``min_val`` and ``max_val`` are the literal numbers 0 and 6, by keyword or position,
    is ``"relu6"`` (``"relu6_"`` in place): ``F.hardtanh(x, 0.0, 6.0, True)`` is ``"relu6_"``,
    ``aten.hardtanh.default(x, 0.0, 6.0)`` (what ``torch.export`` makes of ``nn.ReLU6``) is
    ``"relu6"``. A bound left to its default (-1 or 1), another number, or a value known only
    when the graph runs leaves the call ``"hardtanh"``. See :func:`names_per_call` for the
    targets whose calls are named per call."""
    naming = _call_naming(target)
    if naming is None:
        return callable_op_name(target)
    name, pos, bounds = naming
    if bounds is not None:
        lo, hi, other = _BOUNDED_NAMES[name]
        if _is_bound(_argument(args, kwargs, bounds[0], "min_val"), lo) and _is_bound(
            _argument(args, kwargs, bounds[1], "max_val"), hi
        ):
            name = other
    if pos is None or is_inplace_name(name):
        return name
    if "inplace" in kwargs:
        flag = kwargs["inplace"]
    elif 0 <= pos < len(args):
        flag = args[pos]
    else:
        return name  # the default: False in torch
    if flag is None or (isinstance(flag, (bool, int)) and not flag):
        return name
    return name + "_"


def _argument(args: tuple[Any, ...], kwargs: dict[str, Any], pos: int | None, name: str) -> Any:
    """The value a call gives the parameter ``name`` at ``pos`` (None when it gives none)."""
    if name in kwargs:
        return kwargs[name]
    if pos is not None and 0 <= pos < len(args):
        return args[pos]
    return None


def callable_op_name(target: Any) -> str | None:
    """Canonical op name of a ``call_function`` target, or None when it has none.

    ``OpOverload``/``OpOverloadPacket`` use the overload packet's name
    (``aten.add.Tensor`` -> ``"add"``), ``operator`` functions their torch name
    (``operator.truediv`` -> ``"div"``), torch functions and ``Tensor`` methods their
    ``__name__``.
    """
    try:
        return _name_cache[target]
    except KeyError:
        pass
    except TypeError:  # unhashable target
        return None
    name: str | None
    if target in _OPERATOR_NAMES:
        name = _OPERATOR_NAMES[target]
    elif isinstance(target, torch._ops.OpOverload):
        name = target.overloadpacket.__name__
    elif isinstance(target, torch._ops.OpOverloadPacket):
        name = target.__name__
    else:
        name = getattr(target, "__name__", None)
        if not isinstance(name, str):
            name = None
    _name_cache[target] = name
    return name


def op_name(node: torch.fx.Node, gm: torch.nn.Module | None = None) -> str | None:
    """Canonical op name of ``node``.

    - ``call_function``: see :func:`call_op_name` (:func:`callable_op_name` of the target,
      in-place for a true ``inplace`` argument).
    - ``call_method``: the method name (``"add"``, ``"add_"``, ``"view"``).
    - ``call_module``: :func:`module_call_name` of the called submodule; needs ``gm``
      (or the graph's owning module) to look the submodule up.
    - ``placeholder``/``get_attr``/``output``: None.
    """
    op = node.op
    if op == "call_function":
        return call_op_name(node.target, node.args, node.kwargs)
    if op == "call_method":
        return node.target  # type: ignore[return-value]
    if op == "call_module":
        root = gm if gm is not None else node.graph.owning_module
        if root is None:
            return None
        try:
            mod = root.get_submodule(node.target)  # type: ignore[arg-type]
        except AttributeError:
            return None
        return module_call_name(mod)
    return None


def matches(node: torch.fx.Node, name: str, gm: torch.nn.Module | None = None) -> bool:
    """Whether ``node`` is a call that ``@on(name)`` subscribes to: its :func:`op_name` is
    among :func:`family_members` of ``name`` (``matches(n, "transpose")`` is true of a
    ``swapaxes`` call, whose op name is ``"swapaxes"``; ``op_name(n) == "transpose"`` is not).
    What a hook tests of the nodes around the one it got (``x.transpose(...).transpose(...)``:
    is the input a transpose too?). ``gm``: as :func:`op_name` (for a ``call_module`` node)."""
    found = op_name(node, gm)
    return found is not None and found in family_members(name)


_known_names: frozenset[str] | None = None


def known_op_names() -> frozenset[str]:
    """Every name ``@on(...)`` can match without a custom op: families and their members, the
    nn module names above, ``torch``, ``torch.Tensor``, ``torch.nn.functional`` and
    ``operator`` functions, and every ATen operator (computed once)."""
    global _known_names
    if _known_names is None:
        names: set[str] = set(FAMILIES)
        for members in FAMILIES.values():
            names |= members
        names |= set(_MODULE_NAMES.values())
        for space in (torch, torch.Tensor, torch.nn.functional, operator):
            names |= {n for n in dir(space) if not n.startswith("__")}
        names |= {
            n.split("::", 1)[1].split(".")[0]
            for n in torch._C._dispatch_get_all_op_names()
            if n.startswith("aten::")
        }
        _known_names = frozenset(names)
    return _known_names


def misspelled_op_name(name: str) -> list[str]:
    """Close known names when ``name`` is not one itself (``"mull"`` -> ``["mul"]``); empty
    for a known name or one unlike any (a custom op's, say)."""
    known = known_op_names()
    if name in known or name.rstrip("_") in known:
        return []
    # two neighbouring letters swapped ("reul" for "relu") reads as a typo at once, though
    # difflib rates it below its cutoff for short names
    swapped = [name[:i] + name[i + 1] + name[i] + name[i + 2:] for i in range(len(name) - 1)]
    # names differing only in case first: op names are lower case ("Relu" is "relu", not "elu")
    close = [w for w in (name.lower(), name.lower().rstrip("_")) if w in known and w != name][:1]
    close += [w for w in dict.fromkeys(swapped) if w in known and w != name and w not in close]
    close += [w for w in difflib.get_close_matches(name.lower(), sorted(known), n=3, cutoff=0.8) if w not in close]
    return close[:3]

