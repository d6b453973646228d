"""Fast lookups of qualified attribute paths in a module tree (``layers.3.conv``).

``nn.Module.get_submodule`` costs a ``hasattr`` and a ``getattr`` per path element, both going
through ``nn.Module.__getattr__``'s fallback; on graphs with tens of thousands of
``call_module`` nodes that dominates passes that look at every module. :class:`ModulePaths`
finds the same objects through the modules' own registries (``__dict__``, ``_modules``,
``_parameters``, ``_buffers``) with dict lookups, memoizing the module paths it resolved (the
targets of one graph share their parents).

It only answers what ``getattr`` would answer too: a path element that a class attribute could
shadow (a property, a method, a class constant of that name), a non-module in the middle of a
path, or a name in none of the registries is *not resolved* (``None``), and callers fall back to
``get_submodule``/``getattr``, which give the exact result or error. A memo is valid while the
module tree does not change: make a new :class:`ModulePaths` after changing it.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["ModulePaths", "MISSING"]

#: "not resolved by the fast path" (the caller falls back to getattr/get_submodule)
MISSING: Any = object()


class ModulePaths:
    """Resolves qualified names under ``root`` through the registries (see the module doc)."""

    __slots__ = ("root", "_modules", "_shadow", "_class_names")

    def __init__(self, root: torch.nn.Module) -> None:
        self.root = root
        self._modules: dict[str, Any] = {"": root}
        self._shadow: dict[tuple[type, str], bool] = {}
        self._class_names: dict[type, frozenset[str]] = {}

    def _shadowed(self, obj: Any, atom: str) -> bool:
        key = (type(obj), atom)
        try:
            return self._shadow[key]
        except KeyError:
            pass
        cls = type(obj)
        names = self._class_names.get(cls)
        if names is None:  # the attribute names on the class or a base, once per class
            names = self._class_names[cls] = frozenset().union(*(vars(c) for c in cls.__mro__))
        found = atom in names
        self._shadow[key] = found
        return found

    def member(self, obj: Any, atom: str, module: bool = False) -> Any:
        """``getattr(obj, atom)`` for module ``obj`` when found in its registries (only
        ``__dict__`` and ``_modules`` with ``module``), else :data:`MISSING`."""
        if not isinstance(obj, torch.nn.Module) or self._shadowed(obj, atom):
            return MISSING
        d = obj.__dict__
        if atom in d:
            return d[atom]
        value = d["_modules"].get(atom, MISSING)
        if value is MISSING and not module:
            value = d["_parameters"].get(atom, MISSING)
            if value is MISSING:
                value = d["_buffers"].get(atom, MISSING)
        return value

    def module(self, path: str) -> Any:
        """``root.get_submodule(path)`` when resolved through the registries, else
        :data:`MISSING` (memoized)."""
        memo = self._modules
        try:
            return memo[path]
        except KeyError:
            pass
        parent, _, atom = path.rpartition(".")
        try:
            pm = memo[parent]
        except KeyError:
            pm = self.module(parent)
        value = MISSING
        if pm is not MISSING:  # member(pm, atom, module=True), inlined: the hot path
            key = (type(pm), atom)
            shadowed = self._shadow.get(key)
            if shadowed is None:
                shadowed = self._shadowed(pm, atom)
            if not shadowed:
                d = pm.__dict__
                value = d[atom] if atom in d else d["_modules"].get(atom, MISSING)
                if not isinstance(value, torch.nn.Module):
                    value = MISSING
        memo[path] = value
        return value

    def attr(self, path: str) -> Any:
        """The object at ``path`` (any attribute kind) when resolved, else :data:`MISSING`."""
        parent, _, atom = path.rpartition(".")
        pm = self.module(parent)
        if pm is MISSING:
            return MISSING
        return self.member(pm, atom)

    def all_modules(self) -> dict[str, torch.nn.Module]:
        """Every module reachable through ``_modules`` by the paths ``getattr`` resolves the
        same way (no shadowing class or instance attribute), in one walk of the tree; a module
        met again (shared, or a cycle) is recorded under each path but not walked twice."""
        out: dict[str, Any] = {"": self.root}
        walked = {id(self.root)}
        stack: list[tuple[str, torch.nn.Module]] = [("", self.root)]
        names: dict[type, frozenset[str]] = {}  # class -> attribute names on it or a base
        while stack:
            prefix, m = stack.pop()
            shadow = names.get(type(m))
            if shadow is None:
                shadow = names[type(m)] = frozenset().union(*(vars(c) for c in type(m).__mro__))
            d = m.__dict__
            for name, child in d["_modules"].items():
                if child is None or name in shadow or name in d:
                    continue
                q = f"{prefix}.{name}" if prefix else name
                out[q] = child
                if id(child) not in walked:
                    walked.add(id(child))
                    stack.append((q, child))
        self._modules.update(out)
        return out

    def get_submodule(self, path: str) -> torch.nn.Module:
        """Exactly ``root.get_submodule(path)`` (its result or its ``AttributeError``)."""
        mod = self.module(path)
        if mod is MISSING:
            return self.root.get_submodule(path)
        return mod

    def current_submodule(self, path: Any) -> torch.nn.Module:
        """Exactly ``root.get_submodule(path)``, looked up now (no memo: for module trees that
        may change between calls)."""
        obj: Any = self.root
        if isinstance(path, str) and path:
            for atom in path.split("."):
                shadowed = self._shadow.get((type(obj), atom))
                if shadowed is None:
                    shadowed = self._shadowed(obj, atom)
                d = obj.__dict__
                # nn.Module.__getattr__ looks in _parameters and _buffers before _modules
                if shadowed or atom in d or atom in d["_parameters"] or atom in d["_buffers"]:
                    return self.root.get_submodule(path)
                obj = d["_modules"].get(atom)
                if not isinstance(obj, torch.nn.Module):
                    return self.root.get_submodule(path)
            return obj
        return self.root.get_submodule(path)
