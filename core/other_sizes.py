"""Inputs of other sizes for a graph with dynamic shapes: numeric verification's second run.

Numeric verification runs the module on the example inputs, at their sizes. A graph with
dynamic shapes (``torch.export`` with ``dynamic_shapes``, ``torch.compile(dynamic=True)``)
accepts other sizes too, and a pass that baked a size of the example into the graph (a ``view``
to the example's sizes, a division by the example's sequence length) keeps the example's
outputs and gets every other size wrong. :func:`other_sizes` derives a second input set from
the example inputs at other values of the graph's size symbols, which the pipeline then
verifies each pass on as well:

- the symbols are those of the placeholders' recorded values (``meta["val"]``, TorchDynamo's
  ``meta["example_value"]``): a tensor's symbolic sizes and the symbolic numbers TorchDynamo
  passes as inputs; each is read from the example input at its place (a size ``s27`` of the
  example's 6), or solved from a size that is an expression of it alone (torch.export's
  derived dims: ``2*s27`` of the example's 6 gives 3);
- each symbol moves to the first of its candidates (:func:`_candidates`: half as much again,
  double, then small steps up and down) that keeps it within its range (the shape
  environment's ``var_to_range``, and at least 2: TorchDynamo and torch.export specialise sizes
  0 and 1), every symbol at once, else one alone, so that every guard and runtime assert of
  the shape environment that the new values decide stays true;
- each tensor input is the example's, cut (``narrow``) or repeated along each dimension whose
  size changes, so its values stay the example's kind of values (token ids stay valid ids, a
  mask stays a mask), in the example's memory format.

The pipeline runs the module before the passes on the new inputs once; where it does not run
(a constraint of the model the guards do not say), only the example's sizes are verified, and
the report's notes say so.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import torch
import torch.fx

__all__ = ["OtherSizes", "other_sizes"]


@dataclasses.dataclass
class OtherSizes:
    """A second input set of other sizes (see the module doc).

    Attributes:
        args: positional inputs, as the module is called with them.
        kwargs: keyword inputs.
        values: each size that moved, its value in them, by the input and dimension it is the
            size of (``{"x.size(1)": 9}``; a symbol no input size is alone, by its name).
        hints: the same sizes in the example inputs (``{"x.size(1)": 6}``).
    """

    args: list[Any]
    kwargs: dict[str, Any]
    values: dict[str, int]
    hints: dict[str, int]

    def description(self) -> str:
        """``x.size(1) = 9 (6 in the example inputs), x.size(0) = 3 (2 ...)``."""
        parts = [f"{k} = {v} ({self.hints[k]} in the example inputs)" for k, v in self.values.items()]
        return ", ".join(parts)


def _symbolic(v: Any) -> bool:
    return isinstance(v, torch.SymInt) and bool(getattr(v.node.expr, "free_symbols", None))


def other_sizes(
    gm: torch.fx.GraphModule, args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None
) -> tuple[OtherSizes | None, str | None]:
    """A second input set at other values of ``gm``'s size symbols, from the example inputs
    ``args``/``kwargs`` (see the module doc).

    Returns ``(OtherSizes, None)``; ``(None, None)`` for a graph without symbolic sizes (a
    ``symbolic_trace`` graph, a static one); ``(None, why)`` for one with symbolic sizes for
    which no other input set could be made (in words, for the report's note). Never raises
    for an odd graph or input: what it cannot read is a reason.
    """
    try:
        return _other_sizes(gm, list(args or ()), dict(kwargs or {}))
    except Exception as exc:  # noqa: BLE001 - torch's symbolic internals or an odd input: no second set
        return None, f"{type(exc).__name__}: {exc}"[:200]


def _other_sizes(gm: torch.fx.GraphModule, args: list[Any], kwargs: dict[str, Any]) -> tuple[OtherSizes | None, str | None]:
    import sympy

    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    metas = [p.meta.get("val", p.meta.get("example_value")) for p in placeholders]
    env = None
    for mv in metas:
        sizes = list(mv.shape) if isinstance(mv, torch.Tensor) else [mv]
        found = next((s for s in sizes if _symbolic(s)), None)
        if found is not None:
            env = found.node.shape_env
            break
    if env is None:
        return None, None  # no symbolic size: nothing else to try
    spec = getattr(gm, "_in_spec", None)
    if spec is not None:  # a torch.export module: placeholders are the flattened (args, kwargs)
        import torch.fx._pytree as fx_pytree
        from torch.utils._pytree import tree_unflatten

        leaves = list(fx_pytree.tree_flatten_spec((tuple(args), kwargs), spec))

        def rebuild(new: list[Any]) -> tuple[list[Any], dict[str, Any]]:
            a, k = tree_unflatten(new, spec)
            return list(a), dict(k)

    elif kwargs:
        return None, "the module takes keyword inputs, which cannot be matched to its placeholders"
    else:
        leaves = list(args)

        def rebuild(new: list[Any]) -> tuple[list[Any], dict[str, Any]]:
            return list(new), {}

    if len(leaves) != len(placeholders):
        return None, f"{len(leaves)} inputs for {len(placeholders)} placeholders"
    # each symbol's value in the example inputs, from a size (or a number) that is the symbol alone
    hints: dict[Any, int] = {}
    names: dict[Any, str] = {}  # how each symbol is said: the input and dimension it is the size of,
    dim_names: dict[Any, str] = {}  # (a tensor's size before a number input's name)
    derived: dict[Any, tuple[Any, int]] = {}  # a symbol solved from a size: that size's expression, example value
    exprs: list[tuple[int, list[Any] | Any]] = []  # (placeholder index, its size expressions or number's)
    for i, (mv, leaf) in enumerate(zip(metas, leaves)):
        if isinstance(mv, torch.Tensor):
            dims = [d.node.expr if isinstance(d, torch.SymInt) else sympy.Integer(int(d)) for d in mv.shape]
            if not any(e.free_symbols for e in dims):
                continue
            if not isinstance(leaf, torch.Tensor) or leaf.dim() != len(dims):
                return None, f"input {i} is not a tensor of {len(dims)} dimensions as the graph records"
            for d, (e, n) in enumerate(zip(dims, leaf.shape)):
                if isinstance(e, sympy.Symbol) and e not in dim_names:
                    hints.setdefault(e, int(n))
                    dim_names[e] = f"{_input_name(placeholders[i])}.size({d})"
            exprs.append((i, dims))
        elif _symbolic(mv):
            e = mv.node.expr
            value = leaf.node.hint if isinstance(leaf, torch.SymInt) else leaf
            if not isinstance(value, int) or isinstance(value, bool):
                return None, f"input {i} is not a number as the graph records"
            if isinstance(e, sympy.Symbol) and e not in hints:
                hints[e] = value
                names.setdefault(e, _input_name(placeholders[i]))  # (a tensor's size it is says more)
            exprs.append((i, e))
    names.update(dim_names)
    # a size that is an expression of one symbol no size gives alone (torch.export's derived
    # dims: Dim("s") * 2): the symbol's value solved from it
    for i, e in exprs:
        for x, n in zip(e, leaves[i].shape) if isinstance(e, list) else ():
            unknown = x.free_symbols - set(hints)
            if len(unknown) == 1:
                sym = next(iter(unknown))
                found = [r for r in sympy.solve(sympy.Eq(_at(x, hints), int(n)), sym) if getattr(r, "is_integer", False)]
                if len(found) == 1:
                    hints[sym] = int(found[0])
                    # said by the size it was solved from (the symbol's own name is the shape
                    # environment's, s44, and changes from run to run)
                    d = e.index(x)
                    names[sym] = f"{_input_name(placeholders[i])}.size({d})"
                    derived[sym] = (x, int(n))
    if not hints:
        return None, "no size of an input is a symbol alone"
    # the example's sizes are what the expressions give with these values
    for i, e in exprs:
        if isinstance(e, list):
            got = [int(v) if not (v := _at(x, hints)).free_symbols else None for x in e]
            if got != list(leaves[i].shape):
                return None, f"input {i}'s sizes {tuple(leaves[i].shape)} are not the graph's {tuple(e)}"
        elif _at(e, hints).free_symbols:
            return None, f"input {i} is {e}, of symbols no input size gives alone"
    facts = [g.expr for g in getattr(env, "guards", ())]
    for asserts in getattr(env, "deferred_runtime_asserts", {}).values():
        facts.extend(a.expr for a in asserts)
    ranges = getattr(env, "var_to_range", {})
    symbolic = [x for _, e in exprs for x in (e if isinstance(e, list) else [e]) if getattr(x, "free_symbols", None)]

    def allowed(values: dict[Any, int]) -> bool:
        return not any(_decided_false(f, values) for f in facts) and all(int(_at(x, values)) >= 1 for x in symbolic)

    candidates = {s: [v for v in _candidates(h) if _in_range(v, ranges.get(s))] for s, h in hints.items()}
    chosen: dict[Any, int] | None = None
    # every symbol moved at once (the k-th value of each: its own when it has fewer), else one
    # symbol alone (the others at the example's: a batch at its range's lower end beside a
    # length at its upper end)
    trials = [
        {s: (c[min(k, len(c) - 1)] if c else hints[s]) for s, c in candidates.items()}
        for k in range(max(map(len, candidates.values()), default=0))
    ]
    trials += [{**hints, s: v} for s, c in candidates.items() for v in c]
    for values in trials:
        if values != hints and allowed(values):
            chosen = values
            break
    if chosen is None:
        return None, (
            "no other sizes found that keep every size within its range and the shape environment's guards "
            f"true (tried {', '.join(f'{names[s]} in {sorted(set(c))}' for s, c in candidates.items())})"
        )
    new = list(leaves)
    for i, e in exprs:
        if isinstance(e, list):
            new[i] = _resized(leaves[i], [int(_at(x, chosen)) for x in e])
        else:
            new[i] = int(_at(e, chosen))
    a, k = rebuild(new)
    moved = [s for s in chosen if chosen[s] != hints[s]]
    values = {names[s]: int(_at(derived[s][0], chosen)) if s in derived else chosen[s] for s in moved}
    return OtherSizes(a, k, values, {names[s]: derived[s][1] if s in derived else hints[s] for s in moved}), None


def _input_name(p: torch.fx.Node) -> str:
    """How an input is said: its placeholder's name as the module's signature has it (``x``,
    ``input_ids``; TorchDynamo's ``L_x_``)."""
    return str(p.target).lstrip("*")


def _candidates(h: int) -> list[int]:
    """The other values tried for a size that is ``h`` in the example inputs, in order: half as
    much again, then double (both change ``h // 2``, ``h // 4`` and keep a multiple of 2 or 4
    one, where a step of 1 from an even size keeps ``h // 2``: a pooled size), then small steps
    up and down, then half (a helper check found sizes of floor divisions and divisibility
    guards that +1 alone missed)."""
    out = [h + max(1, h // 2), 2 * h, h + 1, h + 2, h - 1, h + 3, h - 2, h + 4, h - 4, h // 2]
    return list(dict.fromkeys(v for v in out if v != h))


def _at(expr: Any, values: Mapping[Any, int]) -> Any:
    """``expr`` (a sympy expression) with each symbol of ``values`` replaced by its value."""
    import sympy

    return sympy.sympify(expr).xreplace({s: sympy.Integer(v) for s, v in values.items()})


def _in_range(value: int, bounds: Any) -> bool:
    """``value`` within ``bounds`` (a ValueRanges, or None: any), and at least 2."""
    if value < 2:
        return False
    if bounds is None:
        return True
    try:
        return bool(bounds.lower <= value) and bool(value <= bounds.upper)
    except TypeError:  # an unbounded end torch spells as its own infinity
        return True


def _decided_false(expr: Any, values: Mapping[Any, int]) -> bool:
    """Whether a guard or assert ``expr`` is false at ``values`` (one these values do not
    decide, naming other symbols, counts as not false)."""
    import sympy

    if not expr.free_symbols <= set(values):
        return False
    try:
        decided = _at(expr, values)
    except Exception:  # noqa: BLE001 - torch's sympy functions on these numbers
        return True
    return decided is sympy.false or decided == sympy.false


def _resized(t: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """``t`` cut (``narrow``) or repeated along each dimension to ``sizes``, in ``t``'s memory
    format, with its ``requires_grad``."""
    out = t.detach()
    for d, (old, new) in enumerate(zip(t.shape, sizes)):
        if new == old:
            continue
        if new < old:
            out = out.narrow(d, 0, new)
        else:
            if old == 0:
                raise ValueError(f"dimension {d} of an input has size 0 in the example inputs")
            reps = -(-new // old)
            out = torch.cat([out] * reps, dim=d).narrow(d, 0, new)
    fmt = torch.channels_last if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous() else torch.contiguous_format
    out = out.clone(memory_format=fmt)
    return out.requires_grad_(t.requires_grad) if t.is_floating_point() or t.is_complex() else out
