"""The modules that register a saved graph's pytree types: recorded on saving, imported on loading.

An exported program's input and output specs (``torch.utils._pytree.TreeSpec``) are saved by
the registered name of each node type (``transformers.modeling_outputs.CausalLMOutputWithCrossAttentions``,
a user's dataclass registered with ``torch.export.register_dataclass``). Reading them back
(``treespec_loads``, ``torch.export.load``) needs that name registered again, and only
importing the module that defines the type registers it (a Hugging Face ``ModelOutput``
subclass registers itself when its class is made; a user's module calls
``register_dataclass`` or ``register_pytree_node``). A fresh process that has not imported it
cannot load the program.

So a saving writer records :func:`spec_modules` (the ``__module__`` of every node type in the
specs), and the loader imports them first (:func:`import_modules`). For a file saved without
that record (by ``torch.export.save`` itself) :func:`loading` imports the module its
unregistered type name names, when it is installed, and retries; when that does not register
it, :func:`unregistered_error` names the type and the module to import.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

from .errors import ConfigError, exception_text

__all__ = ["spec_modules", "program_specs", "import_modules", "unregistered_type", "unregistered_error", "loading"]

T = TypeVar("T")

#: Modules whose node types are registered whenever torch is imported.
_ALWAYS_REGISTERED = frozenset({"builtins", "collections"})

_UNREGISTERED = re.compile(r"Deserializing (\S+) in pytree is not registered")


def spec_modules(specs: Iterable[Any]) -> list[str]:
    """The modules (sorted) that define the node types of the pytree ``specs`` (``TreeSpec``
    objects; None and leaves are skipped), other than the ones torch always registers
    (``builtins``, ``collections``)."""
    found: set[str] = set()
    for typ in _node_types(specs):
        module = getattr(typ, "__module__", None)
        if isinstance(module, str) and module not in _ALWAYS_REGISTERED:
            found.add(module)
    return sorted(found)


def _node_types(specs: Iterable[Any]) -> Iterator[type]:
    """The type of each node (not leaf) of the pytree ``specs`` (``TreeSpec`` objects; None
    skipped), outer nodes first, repeats included."""
    todo = [s for s in specs if s is not None]
    while todo:
        spec = todo.pop(0)
        if not spec.is_leaf():
            yield spec.type
            todo.extend(spec.children())


def unserializable_types(specs: Iterable[Any]) -> list[type]:
    """The node types of the pytree ``specs`` that ``torch.export.save`` cannot write: those
    registered without a ``serialized_type_name`` (``torch.export.register_dataclass(Out)``
    with none: torch's ``treespec_dumps`` raises ``NotImplementedError``), in the order found."""
    from torch.utils import _pytree

    found: list[type] = []
    for typ in _node_types(specs):
        entry = _pytree.SUPPORTED_SERIALIZED_TYPES.get(typ)
        name = getattr(entry, "serialized_type_name", None)
        if entry is not None and name in (None, _pytree.NO_SERIALIZED_TYPE_NAME_FOUND) and typ not in found:
            found.append(typ)
    return found


def unserializable_note(types: list[type]) -> str:
    """What to do about :func:`unserializable_types`: register each with a serialized name."""
    named = ", ".join(f"{t.__module__}.{t.__qualname__}" for t in types)
    first = types[0]
    return (
        f"the model takes or returns {named}, registered as a pytree node without a serialized_type_name, "
        "which torch.export.save needs to write the program: register it with "
        f"torch.export.register_dataclass({first.__qualname__}, serialized_type_name=\"{first.__module__}.{first.__qualname__}\") "
        "(or run with --no-save)"
    )


def program_specs(ep: Any) -> list[Any]:
    """The input and output specs of an ``ExportedProgram``: its call spec and the signature of
    every entry of its module call graph (submodules kept with ``preserve_module_call_signature``)."""
    specs = [ep.call_spec.in_spec, ep.call_spec.out_spec]
    for entry in ep.module_call_graph:
        if entry.signature is not None:
            specs += [entry.signature.in_spec, entry.signature.out_spec]
    return specs


def import_modules(modules: Iterable[str], what: str, *, base_dir: Path | None = None, source: str | None = None) -> None:
    """Import each of ``modules`` (with ``base_dir`` first on ``sys.path``: a user's module
    next to the config or graph file), so that the pytree types they define are registered.

    Raises:
        ConfigError: a module cannot be imported; the message names it, ``what`` needs it,
            and the package to install.
    """
    from .job import _on_path

    for module in modules:
        try:
            with _on_path(base_dir):
                importlib.import_module(module)
        except Exception as exc:
            raise ConfigError(
                f"{what} needs module {module} (it defines the pytree types of its inputs or outputs, or "
                f"custom operators its graph calls), which cannot be imported ({exception_text(exc)}); install the "
                "package that provides it"
                f"{_install_hint(module)}",
                source=source,
            ) from None


def unregistered_type(exc: BaseException | None) -> str | None:
    """The serialized name of the pytree type whose missing registration made ``exc`` (or an
    exception it was raised from), or None when it is not such an error."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, NotImplementedError):
            match = _UNREGISTERED.search(str(exc))
            if match:
                return match.group(1)
        exc = exc.__cause__ or exc.__context__
    return None


def _module_of(type_name: str) -> str:
    """The module a serialized type name names: the longest dotted prefix that is an
    installed module, else all but the last part (the name of the class)."""
    parts = type_name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        name = ".".join(parts[:i])
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except (ImportError, ValueError):
            break  # a parent that is not a package: shorter prefixes are the packages
    return ".".join(parts[:-1]) or type_name


def _install_hint(module: str) -> str:
    top = module.split(".")[0]
    try:
        import importlib.metadata as md

        dists = md.packages_distributions().get(top, [])
    except Exception:  # noqa: BLE001 - a hint only
        dists = []
    if dists:
        return f" ({top} comes from the distribution {dists[0]}: pip install {dists[0]})"
    return f" (pip install {top}, or put the module {top} on the Python path, if it is that package)"


def unregistered_error(type_name: str, what: str, *, problem: str | None = None, source: str | None = None) -> ConfigError:
    """The error for ``what`` (a file) whose pytree type ``type_name`` is not registered;
    ``problem``: what importing the module it names did (see :func:`loading`)."""
    module = _module_of(type_name)
    head = (
        f"cannot load {what}: its inputs or outputs hold the pytree type {type_name}, which is not "
        "registered in this process"
    )
    if problem is not None and problem.startswith("imported"):
        return ConfigError(
            f"{head}; importing {module} did not register it (the type is registered under a name "
            "that is not its module's): import the module that registers it before loading the file",
            source=source,
        )
    raised = f" (importing it raised {problem})" if problem else ""
    return ConfigError(
        f"{head}; the module that defines it, {module}, registers it when imported{raised}: install "
        f"it{_install_hint(module)} and make it importable here (fxpasses imports it by itself "
        "then), or import it before loading the file",
        source=source,
    )


def loading(load: Callable[[], T], what: str, *, base_dir: Path | None = None, source: str | None = None) -> T:
    """``load()``; when it fails on a pytree type that is not registered, import the module its
    serialized name names (if installed; ``base_dir`` first on ``sys.path``) and try again, as
    long as each try registers a new type.

    Raises:
        ConfigError: a pytree type that importing its module does not register (see
            :func:`unregistered_error`).
        Exception: whatever else ``load`` raises.
    """
    tried: set[str] = set()
    while True:
        try:
            return load()
        except Exception as exc:
            type_name = unregistered_type(exc)
            if type_name is None:
                raise
            problem = "imported, not registered" if type_name in tried else _import_registering(type_name, base_dir)
            if problem is not None:
                raise unregistered_error(type_name, what, problem=problem, source=source) from exc
            tried.add(type_name)


def _import_registering(type_name: str, base_dir: Path | None) -> str | None:
    """Import the module ``type_name`` names. None when that registered the name, else what
    went wrong: ``""`` (no such module), the exception its import raised, or ``"imported, not
    registered"``."""
    from torch.utils._pytree import SERIALIZED_TYPE_TO_PYTHON_TYPE

    from .job import _on_path

    with _on_path(base_dir):
        module = _module_of(type_name)
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            return "" if exc.name is not None and module.startswith(exc.name) else f"{exception_text(exc)}"
        except Exception as exc:  # noqa: BLE001 - reported in the error
            return f"{exception_text(exc)}"
    return None if type_name in SERIALIZED_TYPE_TO_PYTHON_TYPE else "imported, not registered"
