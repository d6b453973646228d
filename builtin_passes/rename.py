"""``rename_nodes``: rename graph nodes with a regular expression."""

from __future__ import annotations

import re
from typing import Literal

import torch
import torch.fx
from pydantic import Field, field_validator, model_validator

from fxpasses import GraphPass, PassContext, PassOptions, UserError

__all__ = ["RenameNodes", "RenameNodesOptions"]

_RENAMABLE_OPS = ("placeholder", "get_attr", "call_function", "call_method", "call_module")


class RenameNodesOptions(PassOptions):
    """Options of ``rename_nodes``."""

    pattern: str = Field(description="regular expression (re syntax) searched in each node name")
    replacement: str = Field(description=r"re.sub template for the new name (\1, \g<name> refer to groups)")
    on_conflict: Literal["suffix", "error"] = Field(
        "suffix",
        description='when the new name is taken: "suffix" gives FX\'s numbered variant, "error" fails '
        "the pass naming what holds the name (rolled back)",
    )
    ops: tuple[Literal["placeholder", "get_attr", "call_function", "call_method", "call_module"], ...] = Field(
        _RENAMABLE_OPS, description="node kinds to rename (the output node never is)"
    )

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return v

    @model_validator(mode="after")
    def _template_fits(self) -> "RenameNodesOptions":
        # An empty alternative makes a match object with the pattern's groups (all unset),
        # on which the template can be expanded to check its group references.
        match = re.compile(f"(?:{self.pattern})|").match("")
        try:
            if match is not None:
                match.expand(self.replacement)
        except (re.error, IndexError) as exc:
            raise ValueError(f"replacement {self.replacement!r} does not fit pattern {self.pattern!r}: {exc}") from None
        return self


class RenameNodes(GraphPass):
    """Rename the nodes whose name matches ``pattern`` to ``re.sub(pattern, replacement, name)``.

    Nodes are renamed in graph order through :meth:`PassContext.rename`, which makes the new
    name a valid identifier (characters other than ASCII letters, digits and ``_`` become
    ``_``; a leading digit gets a ``_``).
    A new name is *taken* when a node has it or had it earlier in this graph (FX never reuses a
    name, so in a swap ``a -> b``, ``b -> a`` both get suffixes), or when it is reserved (a
    Python keyword or builtin, ``torch``, ``self``, ...). A taken name gets FX's numbered
    variant with ``on_conflict="suffix"`` (``conv`` -> ``conv_1``; ``relu_1`` -> ``relu_2``)
    and raises a :class:`~fxpasses.errors.UserError` naming the pass, the node, the name and
    what holds it with ``on_conflict="error"`` (the graph is rolled back to its state before
    the pass): never a silent change.

    Renaming a placeholder keeps the ``forward`` signature (FX binds it by the placeholder's
    target); only the graph-internal name changes. The output node is never renamed.

    Result: the old-to-new mapping of the renamed nodes, in graph order, in
    ``ctx.analyses["rename_nodes"]`` (for later passes of the same run) and in
    ``gm.meta["rename_nodes"]`` (for the caller). Counters: ``renamed``; ``made_identifier``
    for requested names that were not identifiers and were changed to be (``"1 bad"`` ->
    ``_1_bad``, ``""`` -> ``_``); ``suffixed`` for names that got a suffix because the
    requested one was taken.

    Options: ``pattern`` (required), ``replacement`` (required),
    ``on_conflict: "suffix" | "error" = "suffix"``, ``ops`` (node kinds, default all but
    output).
    """

    name = "rename_nodes"
    writes_tensors = False  # rewrites the graph; new tensors only (no rollback guard needed)
    journal_edits = True  # edits only through torch.fx's editing methods and the context
    Options = RenameNodesOptions

    def run(self, gm: torch.fx.GraphModule, ctx: PassContext) -> bool:
        opts = self.options
        regex = re.compile(opts.pattern)
        mapping: dict[str, str] = {}
        for node in list(gm.graph.nodes):
            if node.op not in opts.ops or not regex.search(node.name):
                continue
            old = node.name
            wanted = regex.sub(opts.replacement, old)
            if wanted == old:
                continue
            ctx.node = node
            try:
                got = ctx.rename(node, wanted, on_conflict=opts.on_conflict)
            except UserError as exc:
                raise UserError(f"rename_nodes (pattern {opts.pattern!r}, on_conflict='error'): {exc}") from None
            ctx.node = None
            if got == old:
                continue
            mapping[old] = got
            ctx.count("renamed")
            asked = _as_identifier(wanted)
            if asked != wanted:
                ctx.count("made_identifier")
            if got != asked:
                ctx.count("suffixed")
        ctx.analyses[self.name] = dict(mapping)
        meta = gm.__dict__.get("meta")
        if not isinstance(meta, dict):
            # a GraphModule subclass whose __init__ skips GraphModule's (torchvision's
            # create_feature_extractor returns one) has no meta dict: give it the one
            # GraphModule.__init__ would have (a rollback removes it again)
            meta = gm.meta = {}
        meta[self.name] = dict(mapping)
        return bool(mapping)


def _as_identifier(name: str) -> str:
    """The name :meth:`PassContext.rename` asks FX for (before any conflict suffix)."""
    clean = re.sub(r"[^0-9a-zA-Z_]", "_", name)
    return clean if clean and not clean[0].isdigit() else "_" + clean
