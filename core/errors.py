"""Exceptions raised by fxpasses.

Every error a user can cause derives from :class:`FxPassesError`; the CLI turns those into one
message and exit status 2. Errors raised *inside* a pass are wrapped in :class:`PassFailedError`,
which keeps the original exception as ``__cause__``.
"""

from __future__ import annotations

import difflib
import errno
import os
import re
import sys
import types
import warnings
from typing import TYPE_CHECKING, Any, Collection, Iterable, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    import torch.fx

__all__ = [
    "FxPassesError",
    "UserError",
    "ConfigError",
    "UnknownPassError",
    "OptionsError",
    "CycleError",
    "DuplicatePassError",
    "PluginError",
    "PassDefinitionError",
    "NodeHasUsersError",
    "PassFailedError",
    "VerificationError",
    "InputGraphError",
    "PluginWarning",
    "ConfigWarning",
    "CaptureWarning",
    "SkippedPassWarning",
    "PassDefinitionWarning",
    "raising_frame",
    "exception_line",
    "exception_message",
    "exception_text",
    "node_text",
]


def _package_dirs() -> tuple[str, ...]:
    """The folders of fxpasses' own code (the package and its built-in passes), of pluggy,
    which calls the plugins' hooks, and of torch, whose ``torch.compile`` calls the backend:
    frames there are never where a user's warning belongs."""
    import pluggy

    from . import builtin_passes  # (installed: fxpasses/builtin_passes; editable: a folder of its own)

    packages = [sys.modules[__package__], builtin_passes, pluggy]
    if "torch" in sys.modules:  # (not imported for this: a warning before torch is fxpasses' own)
        packages.append(sys.modules["torch"])
    dirs = {os.path.dirname(os.path.abspath(m.__file__)) for m in packages}
    return tuple(d + os.sep for d in sorted(dirs))


def warn(warning: Warning | str, category: type[Warning] | None = None) -> None:
    """``warnings.warn`` attributed to the innermost frame outside fxpasses, pluggy and torch:
    the user's line that made the registry, built the pipeline, defined the pass or called
    the ``torch.compile``-d model, not a line of fxpasses (what Python 3.12's
    ``skip_file_prefixes`` does, on every supported Python)."""
    own = _package_dirs()  # (each time: torch may have been imported since; warnings are rare)
    frame = sys._getframe(1)
    level = 2  # stacklevel 2: warn()'s caller
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(own):
        frame = frame.f_back
        level += 1
    warnings.warn(warning, category, stacklevel=level)


#: the graph torch.fx's ``Node`` constructor prints in its errors ("Node [graph = graph():
#: ...the whole graph..., name = 'sum'] target sum has type str but a Callable is expected")
_GRAPH_IN_NODE_ERROR = re.compile(r"Node \[graph = graph\(.*?, name = ", re.DOTALL)


def exception_message(exc: BaseException) -> str:
    """``str(exc)``, for a message that quotes it, without the whole graph that torch.fx's
    ``Node`` errors print; never raises: an exception whose ``str()``
    raises (a user's exception class) is quoted as ``<str() of the BadError raised
    RuntimeError: ...>``, so the error that quotes it still says what was raised."""
    try:
        text = str(exc)
        # torch.fx's Node() errors print the whole graph first (megabytes on a big graph)
        return _GRAPH_IN_NODE_ERROR.sub("Node [name = ", text) if text.startswith("Node [graph = graph(") else text
    except Exception as err:  # noqa: BLE001 - a message only
        try:
            inner = str(err)
        except Exception:  # noqa: BLE001
            inner = "?"
        return f"<str() of the {type(exc).__name__} raised {type(err).__name__}: {inner}>"


def _sysconfig_folders(*names: str) -> tuple[str, ...]:
    """sysconfig's folders ``names``, absolute, each ending in a separator."""
    import sysconfig

    return tuple({os.path.join(os.path.abspath(p), "") for p in map(sysconfig.get_path, names) if p})


#: fxpasses' own folder (``core/`` in a checkout), ending in a separator
CORE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "")
#: the standard library's folders, and the installed packages' (inside them outside a venv)
_STDLIB_DIRS = _sysconfig_folders("stdlib", "platstdlib")
_PACKAGE_DIRS = _sysconfig_folders("purelib", "platlib")


def without_own_frames(exc: BaseException) -> BaseException:
    """``exc`` with fxpasses' own frames taken out of its traceback and its causes' (the
    frames of the code that called fxpasses, and of a pass's code that raised, stay): for the
    test helpers (the pytest plugin's ``fxpasses_run``, ``fxpasses.testing``), whose failures
    pytest printed with hundreds of lines of fxpasses' source before the message."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        kept = []
        tb = current.__traceback__
        while tb is not None:
            if not tb.tb_frame.f_code.co_filename.startswith(CORE_DIR):
                kept.append(tb)
            tb = tb.tb_next
        rebuilt = None
        for entry in reversed(kept):
            rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
        current.__traceback__ = rebuilt
        current = current.__cause__
    return exc


def in_stdlib(filename: str) -> bool:
    """Whether ``filename`` is the standard library's (not an installed package's, which may
    lie inside the standard library's folder)."""
    path = os.path.abspath(filename)
    return path.startswith(_STDLIB_DIRS) and not path.startswith(_PACKAGE_DIRS) and "site-packages" not in path


def _library_code() -> tuple[tuple[str, ...], frozenset[str]]:
    """The folders (each ending in a separator) and single files whose code is not a pass's
    own: fxpasses' core, torch, pluggy and pydantic (a package is its folder; a one-file module,
    such as ``typing_extensions.py``, its file alone: its folder is site-packages, where the
    plugins are too)."""
    folders = [CORE_DIR]
    files = set()
    for name in ("torch", "pluggy", "pydantic", "pydantic_core", "typing_extensions"):
        file = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(file, str):
            file = os.path.abspath(file)
            if os.path.basename(file) == "__init__.py":
                folders.append(os.path.join(os.path.dirname(file), ""))
            else:
                files.add(file)
    return tuple(folders), frozenset(files)


def raising_frame(exc: BaseException) -> str | None:
    """``FILE:LINE, in FUNCTION`` of the innermost frame of ``exc``'s traceback that is in a
    pass's own code (not fxpasses' core, torch, pluggy, pydantic, the standard library or
    generated code such as FX's ``<eval_with_key>``), or None. A pass whose helper raised a
    ``KeyError`` was named, with the node, but not where in the pass's code it raised."""
    found = None
    folders, files = _library_code()
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        file = code.co_filename
        path = os.path.abspath(file)
        if not file.startswith("<") and not path.startswith(folders) and path not in files and not in_stdlib(path):
            found = (file, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return None if found is None else f"{found[0]}:{found[1]}, in {found[2]}"


def root_cause_note(exc: BaseException) -> str:
    """`` (its root cause: TypeName: message)``: the innermost exception ``exc`` was raised
    from or while handling (``__cause__``, else ``__context__`` unless suppressed), or ``""``
    when there is none. A model factory's ``ModuleNotFoundError`` from transformers' lazy
    import hid the real cause (torchvision's ``RuntimeError`` two levels down: a new-user check)."""
    seen = {id(exc)}
    current: BaseException | None = exc
    root = None
    while current is not None:
        nxt = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
        if nxt is None or id(nxt) in seen:
            break
        seen.add(id(nxt))
        root = current = nxt
    return "" if root is None else f" (its root cause: {exception_text(root)})"


def exception_text(exc: BaseException) -> str:
    """``"TypeName: message"``: an exception as a message quotes it (never raises, see
    :func:`exception_message`); ``SystemExit`` of a bare ``sys.exit()`` as ``SystemExit
    (sys.exit() with no code)``, not ``SystemExit: ``."""
    message = exception_message(exc)
    if isinstance(exc, SystemExit) and not message:
        return "SystemExit (sys.exit() with no code)"
    return f"{type(exc).__name__}: {message}"


def exception_line(exc: BaseException) -> str:
    """``"TypeName: first line of the message"``: an exception in one line, for a message
    that quotes it (never raises, see :func:`exception_message`)."""
    text = exception_message(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for a message (never raises)."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a message only
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: what an errno means for a path the user named, in words (else the OS's own words)
_ERRNO_REASONS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.ENOTDIR: "not a directory",
    errno.EISDIR: "is a directory",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EEXIST: "already exists",
    # an existing directory refusing a new entry this way: a virtual file system (/proc, /sys)
    errno.ENOENT: "no such file or directory (nothing can be created there: a virtual file system such as /proc?)",
}


def os_reason(exc: OSError) -> str:
    """Why an ``OSError`` happened, in words, with its errno name: ``"read-only file system
    (EROFS)"``."""
    code = exc.errno
    name = errno.errorcode.get(code, "") if code is not None else ""
    reason = _ERRNO_REASONS.get(code) if code is not None else None  # type: ignore[arg-type]
    reason = reason or (exc.strerror or str(exc)).lower()
    return f"{reason} ({name})" if name else reason


def nearest_existing(path: "Path") -> "Path":
    """``path`` or the nearest of its parents that exists (the last one looked at when none
    does): where a path that is to be made would be made, and so what decides whether it can
    be (a file there is no folder to make it in)."""
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return probe


def require_file(path: "Path", what: str, expected: str, *, source: str | None = None) -> None:
    """Raise a :class:`ConfigError` unless ``path`` is a file: ``"<what> not found: X"``, or
    ``"X is a directory, expected a file (<expected>)"``."""
    if path.is_dir():
        raise ConfigError(f"{path} is a directory, expected a file ({expected})", source=source)
    if not path.is_file():
        raise ConfigError(f"{what} not found: {path}", source=source)


def close_names(name: str, names: Iterable[str], *, n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The (at most ``n``) names of ``names`` close to ``name``, best first
    (:func:`difflib.get_close_matches`), compared lower-cased so that a name differing only in
    case is found (``REMOVE_DROPOUT``: ``remove_dropout``); each as spelt in ``names``."""
    spellings: dict[str, list[str]] = {}
    for known in names:
        spellings.setdefault(known.lower(), []).append(known)
    close = difflib.get_close_matches(name.lower(), list(spellings), n=n, cutoff=cutoff)

    def as_typed(known: str) -> float:  # of names alike but for case, the one closest as typed first
        return -difflib.SequenceMatcher(None, name, known).ratio()

    return [known for lowered in close for known in sorted(spellings[lowered], key=as_typed)][:n]


def did_you_mean(names: Sequence[str]) -> str:
    """``"; did you mean 'a' or 'b'?"`` (close names, best first), or ``""`` for no names."""
    return "; did you mean " + " or ".join(map(repr, names)) + "?" if names else ""


def not_one_of(what: str, value: Any, allowed: Sequence[str]) -> str:
    """``"verify must be one of none, lint, numeric, got 'numerc'; did you mean 'numeric'?"``:
    the message for a setting ``what`` given ``value``, not one of ``allowed``."""
    return f"{what} must be one of {', '.join(allowed)}, got {value!r}" + did_you_mean_value(value, allowed)


def prefer_hint(name: str, distribution: str = "<distribution>") -> str:
    """How to choose ``distribution``'s pass or preset ``name`` over another of that name, in
    each place plugins are selected: the config's ``[plugins]`` section (also the
    ``torch.compile`` backend's ``plugins`` option) and ``Registry(prefer=...)`` in Python."""
    return (
        f'`prefer = {{{name} = "{distribution}"}}` in the [plugins] config section, or '
        f'`Registry(prefer={{"{name}": "{distribution}"}})` in Python'
    )


def plugin_setting_hint(setting: str, value: str) -> str:
    """Where the plugin setting ``setting`` (``enable``/``disable``) naming ``value`` goes: the
    config's ``[plugins]`` section, the CLI's ``-p``, Python's ``Registry(...)``."""
    flag = f"-p {value}" if setting == "enable" else f"-p no:{value}"
    return (
        f'`{setting} = ["{value}"]` in the [plugins] config section, `{flag}`, or '
        f'`Registry({setting}=["{value}"])` in Python'
    )


def did_you_mean_value(value: Any, allowed: Iterable[Any]) -> str:
    """:func:`did_you_mean` for a string ``value`` that is not one of the choices ``allowed``
    (``verify="numerc"``: ``"; did you mean 'numeric'?"``), or ``""`` (no close choice, or
    ``value`` is not a string)."""
    if not isinstance(value, str):
        return ""
    return did_you_mean(close_names(value, [str(a) for a in allowed]))


class FxPassesError(Exception):
    """Base class of every error raised by fxpasses."""


class UserError(FxPassesError):
    """An error caused by what the user asked for (bad config, unknown pass, ...).

    The CLI reports these with exit status 2 and no traceback.
    """


class ConfigError(UserError):
    """A config file, dict or pipeline string is malformed.

    ``source`` says where the bad value came from (a file and section, or a position in a
    pipeline string) when that is known.
    """

    def __init__(self, message: str, *, source: str | None = None) -> None:
        self.source = source
        self.detail = message  # without the source
        super().__init__(f"{source}: {message}" if source else message)


class UnknownPassError(UserError):
    """A pass (or preset) name that no installed plugin registers.

    Attributes: ``name``, ``suggestions`` (close names, best first), ``plugins`` (installed
    distributions as ``"name version"``), ``not_loaded`` (installed distributions that were
    not loaded, as ``"name version (why)"``), ``kind`` (``"pass"`` or ``"preset"``). ``hint``:
    one or more lines saying why the name is missing (each printed in parentheses), e.g. that a
    plugin registered it but it was rejected when the plugin loaded.
    """

    def __init__(
        self,
        name: str,
        suggestions: Sequence[str],
        plugins: Sequence[str],
        *,
        source: str | None = None,
        kind: str = "pass",
        available: Sequence[str] | None = None,
        hint: str | Sequence[str] | None = None,
        not_loaded: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.suggestions = list(suggestions)
        self.plugins = list(plugins)
        self.not_loaded = list(not_loaded)
        self.source = source
        self.kind = kind
        if isinstance(name, str) and not name.strip():  # nothing to look up: no close names, no plugin to blame
            msg = f"empty {kind} name {name!r}: give the name of one (`fxpasses list` shows them)"
            super().__init__(f"{source}: {msg}" if source else msg)
            return
        msg = f"unknown {kind} {name!r}"
        if source:
            msg = f"{source}: {msg}"
        msg += did_you_mean(self.suggestions)
        for h in [hint] if isinstance(hint, str) else hint or ():
            # a hint of several lines (a rejection reason quoting a pipeline string with its
            # caret line) is indented under its first line, not closed by a ")" after the caret
            first, sep, rest = h.partition("\n")
            msg += f"\n({first})" if not sep else f"\n{first}\n" + "\n".join("  " + line for line in rest.splitlines())
        if kind == "pass" and any(c in name for c in "{}[]=,"):
            msg += (
                "\n(a list entry is one pass name; give its options as a table, "
                '{name = "...", options = {...}}, or write the whole pipeline as one string)'
            )
        if available is not None:
            msg += f"\navailable {kind}s: " + (", ".join(available) or "(none)")
        msg += "\ninstalled pass plugins: " + (", ".join(self.plugins) or "(none)")
        if self.not_loaded:
            msg += "\ninstalled but not loaded: " + ", ".join(self.not_loaded)
        super().__init__(msg)


def _reads_as_number(text: str) -> bool:
    """Whether Python reads ``text`` as a number (underscores only between digits: not ``1_``)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def is_yaml_source(source: str | None) -> bool:
    """Whether a config ``source`` (a path, maybe with a location after it) names a YAML file."""
    return bool(source) and (".yaml" in source.lower() or ".yml" in source.lower())  # type: ignore[union-attr]


def model_table(source: str | None) -> str:
    """How the config file at ``source`` writes its model table, for messages: ``[model]
    section`` (TOML), ``[tool.fxpasses.model] section`` (``pyproject.toml``), ``model:``
    mapping (YAML), ``"model" object`` (JSON)."""
    src = (source or "").lower()
    if is_yaml_source(src):
        return "`model:` mapping"
    if ".json" in src:
        return '"model" object'
    if "pyproject.toml" in src:
        return "[tool.fxpasses.model] section"
    return "[model] section"


#: a number as YAML 1.1 reads one only with a dot (PyYAML): 1e3 without one is a string
_YAML11_FLOAT = re.compile(r"[-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+][0-9]+)?")
#: a decimal int or float, as config files write them
_NUMBER = re.compile(r"[-+]?([0-9][0-9_]*(\.[0-9_]*)?|\.[0-9][0-9_]*)([eE][-+]?[0-9]+)?")
#: YAML 1.2's octal, a string to YAML 1.1
_YAML12_OCTAL = re.compile(r"[-+]?0o[0-7_]+")
#: a decimal number with a leading zero, which PyYAML reads as a string when it holds 8 or 9
_LEADING_ZERO = re.compile(r"[-+]?0[0-9_]+")


def _yaml11_float(number: float) -> str:
    """``number`` written so that PyYAML (YAML 1.1) reads it as a float: a dot in the
    mantissa and a sign on the exponent (``1.0e+20``, ``1500.0``, ``1.0e-05``)."""
    text = repr(number)
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}e{exponent if exponent[0] in '+-' else '+' + exponent}"


def value_hint(value: Any, source: str | None, message: str = "", *, python: bool = False) -> str:
    """Why a value that failed validation (pydantic's ``message``) may not be what was
    written, or "": a YAML 1.1 reading (PyYAML's) when ``source`` is a YAML file; a number or
    ``true``/``false`` in quotes, which is a string (config values are never converted), when
    a number or a boolean was wanted (``python``: the value was given from Python, whose
    booleans are ``True``/``False``)."""
    yaml = is_yaml_source(source)
    if isinstance(value, bool) and yaml:
        return "; YAML reads yes/no/on/off (any case) as true/false: quote the word to mean the string"
    if isinstance(value, str) and yaml and _YAML12_OCTAL.fullmatch(value):
        return f"; YAML 1.1 (PyYAML) reads 0o octal as a string: write {int(value.replace('_', ''), 8)}"
    if isinstance(value, str) and value.lower() in ("true", "false") and "valid boolean" in message:
        word = value.capitalize() if python else value.lower()
        return f"; a boolean in quotes is a string: write {word} without the quotes"
    if not isinstance(value, str) or not _NUMBER.fullmatch(value) or not _reads_as_number(value):
        return ""
    if yaml and _LEADING_ZERO.fullmatch(value):
        return (
            "; YAML 1.1 reads a number with a leading zero as octal, or as a string when it holds "
            "an 8 or 9: write it without the leading zero"
        )
    if yaml and not _YAML11_FLOAT.fullmatch(value) and not value.replace("_", "").lstrip("+-").isdigit():
        number = float(value)
        if "valid integer" in message:  # an int option: only the digits read as one
            written = str(int(number)) if number.is_integer() else "a whole number"
        else:  # a float option, or a union: a form PyYAML reads as a float
            written = _yaml11_float(number)
        mantissa, _, exponent = value.lower().partition("e")
        missing = [w for w, gone in (("no dot", "." not in mantissa), ("no exponent sign", exponent[:1] not in ("+", "-"))) if gone]
        why = f" ({', '.join(missing)})" if missing else ""
        return (
            f"; YAML 1.1 (PyYAML) reads an exponent number as a float only with a dot and a signed exponent "
            f"(1.0e+3), so {value}{why} is a string: write {written}"
        )
    if "valid integer" in message or "valid number" in message:
        written = value
        if "valid integer" in message and not value.replace("_", "").lstrip("+-").isdigit() and float(value).is_integer():
            written = str(int(float(value)))  # "1e3" for an int: 1e3 unquoted is a float still
        return f"; a number in quotes is a string: write {written} without the quotes"
    return ""


class OptionsError(UserError):
    """Options given to a pass do not match its ``Options`` model.

    Each entry of ``problems`` is ``(field_path, message, given_value)``. ``places``: where
    each option a pipeline string gave stands in it (``"column 16"``, ``"line 2, column 5"``),
    where the options came from one: each problem of such an option names its place.
    ``others``: the errors of the pipeline's later entries with invalid options (a pipeline
    reports every such entry at once, first this one); their messages follow this one's.
    ``python_keys``: the options given as Python values (not read from a config file or a
    pipeline string), whose hints are worded in Python (``True``, not ``true``). ``note``: a
    line on the pass itself, e.g. that ``prefer`` chose another distribution's pass of this
    name than the one the options were written for.
    """

    def __init__(
        self,
        pass_name: str,
        problems: Sequence[tuple[str, str, Any]],
        *,
        source: str | None = None,
        places: Mapping[str, str] | None = None,
        others: Sequence[OptionsError] = (),
        python_keys: Collection[str] = (),
        note: str | None = None,
    ) -> None:
        self.pass_name = pass_name
        self.note = note
        self.problems = list(problems)
        self.source = source
        self.places = dict(places or {})
        self.others = list(others)
        self.python_keys = frozenset(python_keys)
        where = f" ({source})" if source else ""
        lines = [f"invalid options for pass {pass_name!r}{where}:"]
        for path, message, value in self.problems:
            place = self.places.get(str(path).split(".")[0])
            at = f" ({place})" if place else ""
            python = str(path).split(".")[0] in self.python_keys
            hint = value_hint(value, source, message, python=python)
            lines.append(f"  {pass_name}.{path}{at}: {message} (given: {value!r}{hint})")
        if note:
            lines.append(f"  ({note})")
        lines += (str(o) for o in self.others)
        super().__init__("\n".join(lines))


class CycleError(UserError):
    """The ordering constraints of a pipeline form a cycle; ``cycle`` is its path, first == last."""

    def __init__(self, cycle: Sequence[str], detail: str = "") -> None:
        self.cycle = list(cycle)
        msg = "pass ordering cycle: " + " -> ".join(self.cycle)
        if detail:
            msg += f"\n{detail}"
        super().__init__(msg)


class DuplicatePassError(UserError):
    """Two sources register a pass (or, ``kind="preset"``, a preset) under the same name.

    ``sources`` names each registering distribution (``"dist version"``) or Python module.
    """

    def __init__(self, name: str, sources: Sequence[str], *, kind: str = "pass", message: str | None = None) -> None:
        self.name = name
        self.sources = list(sources)
        self.kind = kind
        super().__init__(
            message
            or f"{kind} name {name!r} is registered by more than one plugin: "
            + " and ".join(self.sources)
            + f"; choose one with {prefer_hint(name)}, or uninstall one of them"
        )


class PluginError(FxPassesError):
    """A plugin could not be loaded or misbehaved.

    ``distribution`` and ``version`` name the installed package, ``entry_point`` the entry
    point (``name = value``); the original exception, if any, is ``__cause__``.
    """

    def __init__(
        self, message: str, *, distribution: str, version: str, entry_point: str | None = None
    ) -> None:
        self.distribution = distribution
        self.version = version
        self.entry_point = entry_point
        super().__init__(f"{plugin_label(distribution, version, entry_point)}: {message}")


def plugin_label(distribution: str, version: str, entry_point: str | None = None) -> str:
    """``"plugin dist version (entry point name = value)"``: how messages name a plugin."""
    ep = f" (entry point {entry_point})" if entry_point else ""
    return f"plugin {f'{distribution} {version}'.strip()}{ep}"


class PassDefinitionError(FxPassesError, TypeError):
    """A pass class is malformed (no name, Options not a pydantic model, bad hook, ...)."""


class NodeHasUsersError(FxPassesError):
    """A pass asked to erase a node that other nodes still use. Names the node and each user."""

    def __init__(self, node: "torch.fx.Node") -> None:
        self.node = node
        users = ", ".join(f"%{u.name} (op={u.op})" for u in node.users)
        super().__init__(
            f"cannot erase node %{node.name} (op={node.op}, target={_target_str(node.target)}): "
            f"it still has {len(node.users)} user(s): {users}"
        )


#: why a node names no user source line (when it has no recorded stack trace)
NO_STACK_TRACE = (
    "no stack trace recorded: symbolic_trace records one with record_stack_traces = True "
    "(fxpasses.capture.capture sets it)"
)


def node_text(node: dict[str, Any]) -> str:
    """``%name (op=..., target=..., args=..., kwargs=...)`` from a node's description
    (:func:`fxpasses.context.describe_node`); for a node the pass erased, what is left of it."""
    again = f" (named %{node['name_after_rollback']} again after the rollback)" if node.get("name_after_rollback") else ""
    if node.get("erased"):
        return f"%{node['name']}{again} (op={node['op']}, target={node['target']}), which the pass had erased from the graph"
    after = node.get("after_rollback")
    restored = (
        " (as the pass left it; after the rollback: " + ", ".join(f"{k}={v}" for k, v in after.items()) + ")"
        if after
        else ""
    )
    return (
        f"%{node['name']}{again} (op={node['op']}, target={node['target']}, args={node['args']}, "
        f"kwargs={node['kwargs']}){restored}"
    )


class PassFailedError(FxPassesError):
    """A pass raised, or broke the graph. The graph was rolled back when ``rolled_back``.

    Attributes: ``pass_name``, ``reason``, ``node`` (a dict with ``name``, ``op``, ``target``,
    ``args``, ``kwargs``, or None), ``source_line`` (the user's source line from
    ``node.meta["stack_trace"]``), ``no_source_line`` (why there is none, when there is a node
    without one: :func:`fxpasses.context.no_source_line_reason`; None: it has no stack
    trace), ``rolled_back``, ``from_journal`` (the rollback undid what the journal of a pass
    declaring ``journal_edits=True`` recorded: exact only if the pass kept that promise); the
    original exception is ``__cause__``. ``node["erased"]`` is set for a node the pass had
    erased (its ``args`` and ``kwargs`` are then "?"). The node is described as the pass left
    it; ``node["name_after_rollback"]`` is the name a rollback gave it back, where it differs,
    and ``node["after_rollback"]`` the fields of ``op``, ``target``, ``args``, ``kwargs`` that
    differ after the rollback (described the same way).
    ``report``: raised by ``Pipeline.run``, the run's :class:`~fxpasses.report.RunReport` up to
    this failure (the passes that ran, the failed one's row last); None otherwise.
    """

    from_journal: bool = False
    report: Any = None
    #: what was running when the pass failed: ``"creating the pass"`` (its class's constructor
    #: raised), ``"the pass"`` (its own code raised, a hook's included), ``"checking what the pass changed"``, ``"graph lint"``, ``"recompiling the
    #: module"`` or ``"numeric verification"`` (the pass returned, and what it left failed)
    stage: str | None = None
    #: where in the pass's own code the exception was raised (:func:`raising_frame`), with the
    #: distribution of a plugin's pass: ``bad_plugin/passes.py:12, in helper (bad-plugin 0.1)``
    raised_at: str | None = None
    #: for a numeric verification failure, the ``(atol, rtol)`` the check used (the entry's
    #: own or the pipeline's, raised to what earlier passes were allowed); None otherwise
    tolerances: tuple[float, float] | None = None

    def __init__(
        self,
        pass_name: str,
        reason: str,
        *,
        node: dict[str, Any] | None = None,
        source_line: str | None = None,
        rolled_back: bool = False,
        notes: Sequence[str] = (),
        no_source_line: str | None = None,
    ) -> None:
        self.pass_name = pass_name
        self.reason = reason
        self.node = node
        self.source_line = source_line
        self.no_source_line = no_source_line
        self.rolled_back = rolled_back
        self.notes = list(notes)
        super().__init__(pass_name, reason)

    def __str__(self) -> str:
        lines = [f"pass {self.pass_name!r} failed: {self.reason}"]
        node = self.node
        if node is not None:
            lines.append(f"  at node {node_text(node)}")
        if self.source_line:
            lines.append("  user code: " + self.source_line.replace("\n", "\n  "))
        elif node is not None:
            lines.append(f"  user code: unknown ({self.no_source_line or NO_STACK_TRACE})")
        if self.raised_at:
            lines.append(f"  raised in the pass's code at {self.raised_at}")
        if self.rolled_back and self.from_journal:
            lines.append(f"  the graph was restored to its state before {self.pass_name!r}, as far as its journal records (see the note)")
        elif self.rolled_back:
            lines.append(f"  the graph was restored to its state before {self.pass_name!r}")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


class VerificationError(FxPassesError):
    """The graph after a pass failed verification (lint or numeric)."""


class InputGraphError(UserError):
    """The graph given to a pipeline fails its lint (``Graph.lint()``, every ``call_module``
    target a submodule, every argument spellable in code) as it was given, before any pass
    changed it: no pass is at fault. With ``verify="lint"`` or ``"numeric"``: where passes
    are rolled back (``on_error`` ``"rollback"`` or ``"skip"``), once the first pass that
    changed the graph failed the lint and was rolled back, and the graph as given failed the
    same lint; before a pass run with ``on_error="raise"`` (nothing would be rolled back to
    tell), when the graph as given fails it. Either way the graph is left as given."""


def reports_users_mistake(exc: BaseException) -> bool:
    """Whether an exception raised in a pass's code reports a mistake of the user running the
    pass, raised as it is after the rollback (whatever ``on_error`` says), rather than the
    pass's failure: a :class:`UserError` (a pass raises one, or a subclass of its own, to say
    what the user must change: ``propagate_shapes`` without example inputs, a name clash
    ``rename_nodes`` was told to refuse), but not fxpasses' errors of building passes and
    pipelines (:class:`ConfigError`, :class:`UnknownPassError`, :class:`OptionsError`,
    :class:`CycleError`, :class:`DuplicatePassError`) nor :class:`InputGraphError`: raised in a
    pass's code (it builds a pass with options the pass does not take, runs a pipeline of its
    own on a broken graph), they are that pass's bug, so its failure."""
    return isinstance(exc, UserError) and not isinstance(
        exc, (ConfigError, UnknownPassError, OptionsError, CycleError, DuplicatePassError, InputGraphError)
    )


def _target_str(target: Any) -> str:
    """A readable name for a node target: ``operator.add``, ``torch.relu``, ``aten.add.Tensor``."""
    if isinstance(target, str):
        return target
    if hasattr(target, "_schema") and hasattr(target, "namespace"):  # OpOverload
        return f"{target.namespace}.{target.__name__}"
    try:
        from torch.fx.node import _get_qualified_name

        name = _get_qualified_name(target)
    except Exception:
        return repr(target)
    return name.replace("_operator.", "operator.").replace("torch._C._nn.", "torch.nn.functional.")


class PassDefinitionWarning(UserWarning):
    """A pass class is probably wrong but not malformed, e.g. ``@on("mull")``: a name no op has
    but close to one that does (custom ops may have any name, so this is not an error)."""


class PluginWarning(UserWarning):
    """Issued once per plugin problem when a :class:`~fxpasses.Registry` loads plugins
    (non-strict mode), so Python API users see what the CLI prints as ``warning:`` lines."""


class ConfigWarning(UserWarning):
    """A config is probably not what was meant but is not invalid, e.g. a ``pyproject.toml``
    with a ``[tool.fxpass]`` table (close to ``[tool.fxpasses]``, which is the one read)."""


class SkippedPassWarning(UserWarning):
    """A pass failed under ``on_error="skip"`` and left changes no rollback undoes (example
    inputs it wrote in place, which in a TorchDynamo graph are the model's parameters; tensors
    written where no write guard saw it): the run went on, so nothing else would say so."""


class CaptureWarning(UserWarning):
    """Capturing a model changed something of the caller's that could not be put back (the
    TorchDynamo capture runs the model: a parameter its forward writes in place)."""
