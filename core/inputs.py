"""Example inputs: positional ones (``example_inputs``) and keyword ones (``example_kwargs``).

They are named as ``torch.export.export(model, args, kwargs)`` names them: a module is called
``gm(*example_inputs, **example_kwargs)``. A module exported with keyword inputs
(``torch.export.export(model, (), {"input_ids": ids, "attention_mask": mask})``) must be
called with those keywords: its ``forward`` flattens ``(args, kwargs)`` against the input
spec torch.export recorded, and its input check refuses anything else.

- :func:`check_example_inputs`: the types (a list or tuple; a mapping with ``str`` keys).
- :func:`check_accepted`: whether the module takes these keywords (before any pass runs).
- :func:`placeholder_values`: the value each placeholder of the graph gets from a call
  ``gm(*args, **kwargs)``, for code that runs the graph node by node (an interpreter), using
  torch's own flattening for graphs with a pytree input spec.
"""

from __future__ import annotations

import inspect
from typing import Any, Mapping, Sequence

import torch
import torch.fx

from .errors import UserError

__all__ = ["check_example_inputs", "check_accepted", "placeholder_values", "keyword_spec", "in_spec_order"]


def check_example_inputs(
    example_inputs: Any, example_kwargs: Any, *, where: str = "example_inputs"
) -> tuple[Sequence[Any] | None, dict[str, Any] | None]:
    """Validate the types of the example inputs; return ``(positional, keywords)``.

    ``positional`` is ``example_inputs`` as given, or ``()`` when only ``example_kwargs`` are
    given (a module called with keywords only); ``keywords`` is a plain ``dict`` copy of
    ``example_kwargs`` (None when not given).

    Raises:
        UserError: ``example_inputs`` is not a list or tuple (a dict: the message points at
            ``example_kwargs=``), ``example_kwargs`` is not a mapping, or one of its keys is
            not a ``str`` (the message names the key and its type).
    """
    if example_inputs is not None and (
        isinstance(example_inputs, (Mapping, str, bytes)) or not isinstance(example_inputs, Sequence)
    ):
        if isinstance(example_inputs, Mapping):
            hint = (
                "keyword inputs go in example_kwargs=, e.g. run(gm, example_kwargs={'input_ids': ids}), "
                "as torch.export.export(model, args, kwargs) takes them"
            )
        else:
            hint = "wrap a single input in a list: [x]"
        raise UserError(
            f"{where} must be a list or tuple of the module's positional inputs, got "
            f"{type(example_inputs).__name__} ({hint})"
        )
    kwargs: dict[str, Any] | None = None
    if example_kwargs is not None:
        if not isinstance(example_kwargs, Mapping):
            raise UserError(
                f"example_kwargs must be a mapping of keyword name -> input (a dict), got "
                f"{type(example_kwargs).__name__}"
            )
        for key in example_kwargs:
            if not isinstance(key, str):
                raise UserError(
                    f"example_kwargs keys must be keyword names (str): got the key {key!r} "
                    f"({type(key).__name__})"
                )
        kwargs = dict(example_kwargs)
        if example_inputs is None:
            example_inputs = ()
    return example_inputs, kwargs


def keyword_spec(gm: torch.nn.Module) -> tuple[int, list[str]] | None:
    """``(number of positional inputs, keyword names)`` that ``gm`` was exported to take, for a
    graph whose code flattens ``(args, kwargs)`` against a pytree input spec (``torch.export``'s
    ``.module()``, or a graph rebuilt from one); None for other modules."""
    graph = getattr(gm, "graph", None)
    info = getattr(getattr(graph, "_codegen", None), "pytree_info", None)
    spec = getattr(info, "in_spec", None)
    if spec is None:
        return None
    try:
        if not (
            spec.type is tuple
            and spec.num_children == 2
            and spec.child(0).type is tuple
            and spec.child(1).type is dict
        ):
            return None
        return spec.child(0).num_children, [str(k) for k in spec.child(1).context]
    except Exception:  # noqa: BLE001 - another kind of spec: not one to check against
        return None


def in_spec_order(gm: torch.nn.Module, kwargs: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``kwargs`` in the order of ``gm``'s keyword input spec (:func:`keyword_spec`: an exported
    module's), the others after them in their own order; as given for other modules.

    ``torch.export.export`` of an exported module binds its keyword inputs by position: given
    in another order than the spec's (``attention_mask`` before ``input_ids``), the program it
    makes feeds each into the other's place (torch 2.13). Calling the module is not affected."""
    if kwargs is None:
        return None
    spec = keyword_spec(gm)
    if spec is None:
        return dict(kwargs)
    ordered = {k: kwargs[k] for k in spec[1] if k in kwargs}
    ordered.update((k, v) for k, v in kwargs.items() if k not in ordered)
    return ordered


def _names(keys: Sequence[str]) -> str:
    return ", ".join(repr(k) for k in keys) if keys else "none"


def _generate_pending_code(gm: torch.nn.Module) -> None:
    """Generate the code of a lazily recompiled GraphModule that has not generated it yet (a
    ``copy.deepcopy`` of one, or one TorchDynamo handed over): until then its ``forward`` is
    ``_lazy_forward(*args, **kwargs)``, whose signature binds anything, so the inputs would
    only be refused by the call itself, without the graph's parameter names or the dialect's
    hint. Its first call generates the same code from the same graph."""
    try:
        from torch.fx._lazy_graph_module import _LazyGraphModule
    except ImportError:  # pragma: no cover - older torch
        return
    if isinstance(gm, _LazyGraphModule) and gm._needs_recompile():
        gm.real_recompile()


def check_accepted(gm: torch.nn.Module, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> None:
    """Raise a :class:`~fxpasses.errors.UserError` when ``gm`` does not take these inputs.

    For a graph with a pytree input spec (an exported module): the keywords must be the ones
    it was exported with, all of them (a missing keyword, one it does not take, or keyword
    inputs given positionally are named), and the number of positional inputs must match
    too. For other modules: ``forward``'s signature must bind ``(*args, **kwargs)`` (one input
    too many was taken silently by passes that run the graph, ``propagate_shapes``).

    Raises:
        UserError: naming the keywords the module does not take or misses, and what it takes.
    """
    spec = keyword_spec(gm)
    given = list(kwargs or {})
    if spec is not None:
        n_args, expected = spec
        unknown = [k for k in given if k not in expected]
        missing = [k for k in expected if k not in given]
        keywords = f"and the keyword input(s) {_names(expected)}" if expected else "and no keyword input"
        takes = f"the module takes {n_args} positional input(s) {keywords}, as torch.export recorded them"
        if unknown:
            raise UserError(f"example_kwargs has keyword input(s) the module does not take: {_names(unknown)}; {takes}")
        if missing:
            how = " (give them as example_kwargs={...})" if kwargs is None else ""
            raise UserError(f"the example inputs miss the keyword input(s) {_names(missing)}{how}; {takes}")
        if len(args) != n_args:
            with_kwargs = " with example_kwargs" if kwargs is not None else ""
            raise UserError(f"got {len(args)} positional example input(s){with_kwargs}; {takes}")
        return
    _generate_pending_code(gm)
    try:
        sig = inspect.signature(gm.forward)
    except (TypeError, ValueError):  # no signature to check against: the call will say
        return
    try:
        sig.bind(*args, **(kwargs or {}))
    except TypeError as exc:
        hint = ""
        from .dialect import detect_dialect

        if isinstance(gm, torch.fx.GraphModule) and detect_dialect(gm) == "dynamo":
            hint = (
                "; a TorchDynamo graph takes every input positionally, keyword inputs and parameters "
                "included, in the order of its placeholders"
            )
        given = f"{len(args)} positional" + (f" and {len(kwargs)} keyword" if kwargs else "")
        raise UserError(
            f"the module does not take these example inputs: {exc} (it is forward{_signature_text(sig)}; "
            f"{given} given){hint}"
        ) from None


def _signature_text(sig: inspect.Signature, shown: int = 8) -> str:
    """``sig`` as Python writes it, or for a long one (a TorchDynamo graph's, which takes every
    parameter of the model: hundreds) the names of its first ``shown`` parameters and how many
    there are."""
    params = list(sig.parameters.values())
    if len(params) <= shown + 2:
        return str(sig)
    head = ", ".join(p.name for p in params[:shown])
    return f"({head}, ... {len(params) - shown} more: {len(params)} parameters)"


def placeholder_values(
    gm: torch.fx.GraphModule, args: Sequence[Any], kwargs: Mapping[str, Any] | None
) -> list[Any]:
    """The value each placeholder of ``gm`` gets from the call ``gm(*args, **kwargs)``, in
    placeholder order (what ``torch.fx.Interpreter.run(..., enable_io_processing=False)``
    takes).

    A graph with a pytree input spec (``torch.export``) is flattened as its own generated code
    does it: ``torch.fx._pytree.tree_flatten_spec((args, kwargs), in_spec)``. For a plain graph
    the inputs are bound to ``forward``'s signature (its parameters are the placeholders'
    targets), defaults applied: keywords go to the placeholders of their name.

    Raises:
        UserError: the inputs do not fit the module (see :func:`check_accepted`), or a plain
            graph with a ``**kwargs`` placeholder (an interpreter cannot pass it keywords).
    """
    import torch.fx._pytree as fx_pytree

    check_accepted(gm, args, kwargs)
    kwargs = dict(kwargs or {})
    codegen = gm.graph._codegen
    info = getattr(codegen, "pytree_info", None)
    if keyword_spec(gm) is not None:
        return list(fx_pytree.tree_flatten_spec((list(args), kwargs), info.in_spec))
    if not kwargs:
        return list(gm.graph.process_inputs(*args))
    sig = inspect.signature(gm.forward)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    if info is not None:  # a pytree graph without keywords in its spec: its inputs positionally
        return list(gm.graph.process_inputs(*bound.args))
    values: list[Any] = []
    for node in gm.graph.find_nodes(op="placeholder"):
        target = str(node.target)
        if target.startswith("**"):
            raise UserError(
                f"cannot give keyword inputs to the graph's placeholder %{node.name} ({target}) node by node"
            )
        name = target.lstrip("*")
        if name not in bound.arguments:
            raise UserError(f"the graph's placeholder %{node.name} ({target}) is not a parameter of forward{sig}")
        if target.startswith("*"):
            values.extend(bound.arguments[name])
        else:
            values.append(bound.arguments[name])
    return values
