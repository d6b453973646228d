r"""The one-line pipeline syntax: ``name{key=value,...}[verify=...,on_error=...,atol=...],name2``.

Grammar (white space between tokens is ignored: spaces, tabs and line breaks; other Unicode
white space, such as a no-break space, is an error outside quotes)::

    pipeline := item ("," item)*
    item     := entry | group
    group    := "fixpoint" ["{" "max_iterations" "=" INT "}"] "(" entry ("," entry)* ")"
                (a fixpoint group: see :mod:`fxpasses.fixpoint`; groups do not nest)
    entry    := NAME ["{" [option ("," option)*] "}"] ["[" setting ("," setting)* "]"]
    option   := KEY "=" value
    setting  := "verify" "=" (none | lint | numeric)
              | "on_error" "=" (rollback | raise | skip)
              | ("atol" | "rtol") "=" a finite number >= 0
    value    := "[" [value ("," value)*] "]" | table | string | bare
    table    := "{" [key "=" value ("," key "=" value)*] "}"   (a dict: a nested options
                model's fields, or a mapping option's items)
    key      := string | a run of characters other than ``,{}[]="'`` and white space
    string   := '...' or "...": the characters between the quotes, where each backslash
                escape that Python's repr() writes is decoded (\\ \' \" \n \r \t \xhh
                \uhhhh \Uhhhhhhhh) and any other backslash stays as it is
    bare     := true | false (any case) | none | null (any case: None) | an int
                (``1_000``) | a float (``1e-3``, ``inf``, ``nan``) | any other run of
                characters other than ``,{}[]="'`` and white space (a string: ``0x10``);
                a number with a leading zero (``017``) is an error, as in Python

Options (in braces) go to the pass; settings (in brackets) say how the pipeline runs this entry,
overriding the pipeline's ``verify`` / ``on_error`` for it alone, as ``verify`` and ``on_error``
keys of a list entry in a config file do; ``atol`` / ``rtol`` are the tolerances of numeric
verification from this entry on (see :class:`fxpasses.Pipeline`).

Examples: ``remove_dropout,fold_constants{max_numel=4096},eliminate_dead_code``,
``print_graph{format=code}``, ``my_pass{names=[a, b],scale=0.5,verbose=true}``,
``my_pass{thresholds={low=-1.0,high=2.0}}``,
``fuse_conv_bn[verify=numeric,on_error=skip],eliminate_dead_code``,
``fixpoint{max_iterations=4}(simplify_algebra,fold_constants),eliminate_dead_code``.

A quoted string reads back what :func:`format_value` and Python's ``repr`` write, whatever it
holds: both quote kinds, backslashes, newlines, any Unicode. Backslashes other than those
escapes stay as they are, so a regular expression or ``re.sub`` template is written as it
reads (``pattern='^relu(_\d+)?$'``, ``replacement='act\1'``); a backslash meant literally
before another backslash, a quote or one of those escapes is doubled (``'\\n'``).

Errors are :class:`~fxpasses.errors.ConfigError` naming the column and showing a caret.
"""

from __future__ import annotations

import codecs
import contextlib
import enum
import pathlib
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ._names import normal_name
from .errors import ConfigError, not_one_of

__all__ = ["SpecEntry", "SpecGroup", "parse_pipeline_string", "pass_entries", "format_value"]


@dataclass(frozen=True)
class SpecEntry:
    """One entry of a pipeline string: pass name, raw options, and where it stood."""

    name: str
    options: dict[str, Any]
    source: str
    verify: str | None = None
    on_error: str | None = None
    atol: float | None = None
    rtol: float | None = None
    #: where each option's key stands in the pipeline string (``"column 16"``; ``"line 2,
    #: column 5"`` in a string of several lines)
    option_places: dict[str, str] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class SpecGroup:
    """A fixpoint group of a pipeline string, ``fixpoint{max_iterations=N}(entry,...)``: its
    entries, the ``max_iterations`` given (None: the default), and where it stood."""

    entries: tuple[SpecEntry, ...]
    max_iterations: Any
    source: str


#: entry settings and the values each takes (the same as Pipeline's verify / on_error)
SETTINGS = {"verify": ("none", "lint", "numeric"), "on_error": ("rollback", "raise", "skip")}
#: entry settings that take a number: the tolerances of numeric verification (finite, >= 0)
TOLERANCES = ("atol", "rtol")
#: every setting of an entry, in the order messages list them
SETTING_NAMES = (*SETTINGS, *TOLERANCES)

#: the white space allowed between tokens (other Unicode white space is an error)
_WHITE_SPACE = " \t\r\n"
#: a pass, option or setting name: a Python identifier, as the registry takes pass names
#: (``str.isidentifier``: letters of any script, ``Ünïcode_pass``)
_NAME = re.compile(r"[^\W\d]\w*")
_NAME_CONTINUE = re.compile(r"\w")
#: a name with hyphens inside (``remove-dropout``): an error, with the name with '_' suggested
_HYPHENATED = re.compile(r"[^\W\d]\w*(?:-\w+)+")
_BARE = re.compile(r"[^,{}\[\]=\"'\s]+")
#: a quoted string; a backslash-escaped quote does not end it
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'" + r'|"(?:[^"\\]|\\.)*"', re.DOTALL)
#: a brace, or a quoted string (whose braces do not count)
_BRACES_OR_STRING = re.compile(r"[{}]|" + _STRING.pattern, re.DOTALL)
#: the escapes repr() writes in a string (decoded); every other backslash is kept
_ESCAPE = re.compile(r"""\\(?:[\\'"nrt]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})""")
_INT = re.compile(r"[+-]?(0|[1-9][0-9_]*)$")
#: a number whose whole part has a leading zero (``017``, ``00``, ``007.5``): an error, not 17
_LEADING_ZERO = re.compile(r"[+-]?0[0-9_]")
#: lists and tables nested deeper than this in one value are an error (the parser recurses)
_MAX_DEPTH = 100
_FLOAT = re.compile(r"[+-]?(\d[\d_]*\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf|nan)$")
#: after an option's name: the rest of a dotted path and its '=' (``tiling.size=8``: ``.size=``)
_DOTTED_REST = re.compile(r"((?:\.[^\W\d]\w*)+)[ \t\r\n]*=")


class _Parser:
    def __init__(self, text: str, where: str | None = None) -> None:
        self.where = f"{where}: pipeline string" if where else "pipeline string"
        self.text = text
        self.pos = 0

    def place(self, pos: int) -> str:
        """Where ``pos`` is, in words: ``"column 16"``; ``"line 2, column 5"`` in a text of
        several lines (a TOML multi-line string). Columns count characters (code points)."""
        if "\n" not in self.text:
            return f"column {pos + 1}"
        line = self.text.count("\n", 0, pos) + 1
        return f"line {line}, column {pos - (self.text.rfind(chr(10), 0, pos) + 1) + 1}"

    def error(self, message: str, pos: int | None = None) -> ConfigError:
        """The error at ``pos``: ``message``, then the line of the text holding ``pos`` with a
        caret under it, placed by terminal cells (``rich.cells.cell_len``: a combining mark
        takes none, a CJK character or an emoji two; a tab is copied)."""
        from rich.cells import cell_len

        pos = self.pos if pos is None else pos
        start = self.text.rfind("\n", 0, pos) + 1
        end = self.text.find("\n", pos)
        line = self.text[start : end if end >= 0 else len(self.text)]
        # a tab stays a tab (the line above is shown with its tabs: both reach the same stop)
        caret = "".join("\t" if ch == "\t" else " " * cell_len(ch) for ch in self.text[start:pos]) + "^"
        return ConfigError(f"{message}\n  {line}\n  {caret}", source=f"{self.where}, {self.place(pos)}")

    def ws(self) -> None:
        """Skip white space: ASCII's (space, tab, line breaks).

        Raises:
            ConfigError: at other Unicode white space (a no-break space, an em space, ...),
                naming it: usually pasted in by accident, and a word processor's look-alike.
        """
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            ch = self.text[self.pos]
            if ch not in _WHITE_SPACE:
                name = unicodedata.name(ch, f"U+{ord(ch):04X}")
                raise self.error(
                    f"{name.lower()} (U+{ord(ch):04X}) is not white space here (pasted from a document?): "
                    "use a plain space, or quote the value that holds it"
                )
            self.pos += 1

    def peek(self) -> str:
        self.ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch: str, what: str) -> None:
        if self.peek() != ch:
            found = repr(self.text[self.pos]) if self.pos < len(self.text) else "end of string"
            raise self.error(f"expected {ch!r} {what}, found {found}")
        self.pos += 1

    def name(self, what: str) -> tuple[str, int]:
        """A name, NFKC-normalized as Python normalizes identifiers: ``Ü`` typed decomposed
        (``U`` and a combining diaeresis, as some keyboards and macOS file names give it) is
        the registry's ``Ü``."""
        self.ws()
        m = _NAME.match(self.text, self.pos)
        if not m:
            found = repr(self.text[self.pos]) if self.pos < len(self.text) else "end of string"
            raise self.error(f"expected {what}, found {found}")
        end = m.end()
        text = self.text
        # \w leaves out combining marks (category M), which identifiers may hold
        while end < len(text) and (unicodedata.category(text[end]).startswith("M") or _NAME_CONTINUE.match(text[end])):
            end += 1
        raw = text[m.start() : end]
        if not raw.isidentifier():  # \w takes a few characters no identifier has (x²)
            raise self.error(f"expected {what}, found {raw!r}, which is not a Python identifier", m.start())
        hyphenated = _HYPHENATED.match(text, m.start())
        if hyphenated and hyphenated.end() > end:
            # a name never holds '-' (nothing may follow a name with one), but distribution
            # names and command-line flags do: remove-dropout for remove_dropout
            typed = hyphenated.group()
            meant = typed.replace("-", "_")
            raise self.error(
                f"expected {what}, found {typed!r}: names are Python identifiers, written with '_' where "
                f"a distribution name or a command-line flag has '-' (did you mean {meant!r}?)",
                m.start(),
            )
        self.pos = end
        return normal_name(raw), m.start()

    def sequence(self, close: str, where: str, item: Callable[[], None]) -> None:
        """``item ("," item)* close``, the opening bracket already read; ``where`` ends the
        error message (``"in list"``, ``"in the options of 'x'"``)."""
        while True:
            item()
            ch = self.peek()
            if ch == ",":
                self.pos += 1
                continue
            if ch == close:
                self.pos += 1
                return
            raise self.error(f"expected ',' or {close!r} {where}")

    def value(self, depth: int = 0) -> Any:
        ch = self.peek()
        if depth >= _MAX_DEPTH and ch in ("[", "{"):
            raise self.error(f"values nested more than {_MAX_DEPTH} lists or tables deep (no option needs that)")
        if ch == "[":
            self.pos += 1
            items: list[Any] = []
            if self.peek() == "]":
                self.pos += 1
                return items
            self.sequence("]", "in list", lambda: items.append(self.value(depth + 1)))
            return items
        if ch == "{":
            self.pos += 1
            table: dict[str, Any] = {}
            if self.peek() == "}":
                self.pos += 1
                return table
            self.sequence("}", "in table", lambda: self.table_item(table, depth + 1))
            return table
        if ch in ("'", '"'):
            return self.string()
        m = _BARE.match(self.text, self.pos)
        if not m:
            found = repr(ch) if ch else "end of string"
            raise self.error(f"expected a value, found {found}")
        self.pos = m.end()
        token = m.group()
        if _LEADING_ZERO.match(token) and _FLOAT.match(token.lower()):
            plain = token.replace("_", "")
            number = plain.lstrip("+-").lstrip("0") or "0"
            number = ("-" if plain.startswith("-") else "") + ("0" + number if number[0] in ".eE" else number)
            raise self.error(
                f"{token} has a leading zero (octal to YAML 1.1, an error to TOML and to Python's int): "
                f"write {number}, or quote it ('{token}') to mean the string",
                m.start(),
            )
        return _scalar(token)

    def table_item(self, table: dict[str, Any], depth: int = 0) -> None:
        """``key=value`` inside a table's braces, into ``table``."""
        ch = self.peek()
        kpos = self.pos
        if ch in ("'", '"'):
            key = self.string()
        else:
            m = _BARE.match(self.text, self.pos)
            if not m:
                found = repr(ch) if ch else "end of string"
                raise self.error(f"expected a key in table, found {found}")
            key = m.group()
            self.pos = m.end()
        self.expect("=", f"after key {key!r} in table (a table is written {{key=value,...}})")
        if key in table:
            raise self.error(f"key {key!r} given twice in table", kpos)
        table[key] = self.value(depth)

    def string(self) -> str:
        """A quoted string (its opening quote is next), its escapes decoded (see the module doc)."""
        start = self.pos
        m = _STRING.match(self.text, start)
        if not m:
            raise self.error("unterminated string", start)
        body_start = start + 1

        def decode(esc: re.Match[str]) -> str:
            try:
                return codecs.decode(esc.group(), "unicode_escape")
            except UnicodeDecodeError as exc:  # \U beyond the last code point
                raise self.error(f"invalid escape {esc.group()} in a string: {exc.reason}", body_start + esc.start()) from None

        self.pos = m.end()
        return _ESCAPE.sub(decode, m.group()[1:-1])

    def entries(self) -> list[SpecEntry | SpecGroup]:
        if not self.text.strip(_WHITE_SPACE):
            raise ConfigError("the pipeline string is empty", source=self.where)
        return self.entry_list(None)

    def entry_list(self, group: int | None) -> list[SpecEntry | SpecGroup]:
        """Entries up to the end of the text, or (``group``: where the group's ``(`` is) up
        to the ``)`` that closes the group."""
        out: list[SpecEntry | SpecGroup] = []
        while True:
            name, start = self.name("a pass name")
            if name == "fixpoint" and self._opens_group():
                if group is not None:
                    raise self.error("fixpoint groups do not nest: list the inner group's passes in the outer one", start)
                out.append(self.group(start))
            else:
                out.append(self.entry(name, start, len(out) + 1, group))
                if name == "fixpoint" and self.peek() == "(":  # fixpoint{...}[...](...)
                    raise self.error(
                        "a fixpoint group takes no settings in [...]: give each pass in it its own "
                        "(fixpoint(fold_constants[on_error=skip],eliminate_dead_code))"
                    )
            ch = self.peek()
            if group is not None and ch == ")":
                self.pos += 1
                return out
            if ch == "" and group is None:
                return out
            if ch == "":
                raise self.error(f"the fixpoint group opened at {self.place(group)} is not closed: expected ')'")
            if ch != ",":
                raise self.error(f"expected ',' between passes, found {ch!r}")
            self.pos += 1

    def _opens_group(self) -> bool:
        """After the word ``fixpoint``: whether a group follows (``(``, or options in braces
        and then ``(``), rather than a pass named ``fixpoint``."""
        ch = self.peek()
        if ch == "(":
            return True
        if ch != "{":
            return False
        depth, pos = 0, self.pos
        for m in _BRACES_OR_STRING.finditer(self.text, pos):
            tok = m.group()
            if tok == "{":
                depth += 1
            elif tok == "}":
                depth -= 1
                if depth == 0:
                    rest = self.text[m.end() :].lstrip(_WHITE_SPACE)
                    return rest.startswith("(")
        return False

    def group(self, start: int) -> SpecGroup:
        """``fixpoint{max_iterations=N}(entry,...)``, the word read (at ``start``)."""
        options: dict[str, Any] = {}
        if self.peek() == "{":
            self.pos += 1
            if self.peek() == "}":
                self.pos += 1
            else:
                self.sequence("}", "in the options of the fixpoint group", lambda: self.group_option(options))
        self.expect("(", "to open the fixpoint group")
        opened = self.pos - 1
        if self.peek() == ")":
            raise self.error("the fixpoint group is empty: name at least one pass in it")
        members = self.entry_list(opened)
        return SpecGroup(tuple(members), options.get("max_iterations"), f"pipeline string, fixpoint group at {self.place(start)}")  # type: ignore[arg-type]

    def group_option(self, options: dict[str, Any]) -> None:
        key, kpos = self.name("an option of the fixpoint group (max_iterations)")
        if key != "max_iterations":
            raise self.error(f"unknown option {key!r} of the fixpoint group: it takes max_iterations", kpos)
        if key in options:
            raise self.error("option 'max_iterations' of the fixpoint group given twice", kpos)
        self.expect("=", "after option 'max_iterations' of the fixpoint group")
        vpos = self.pos
        value = self.value()
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
            raise self.error(f"fixpoint max_iterations must be an integer from 1 to 1000, got {value!r}", vpos)
        options[key] = value

    def entry(self, name: str, start: int, number: int, group: int | None) -> SpecEntry:
        """One pass entry, its name read (at ``start``): options and settings."""
        options: dict[str, Any] = {}
        places: dict[str, str] = {}
        spellings: dict[str, str] = {}  # each option's key as typed (its NFKC form is the key)
        if self.peek() == "{":
            self.pos += 1
            if self.peek() == "}":
                self.pos += 1
            else:
                self.sequence(
                    "}", f"in the options of {name!r}", lambda: self.option(name, options, places, spellings)
                )
        settings = self.settings(name) if self.peek() == "[" else {}
        where = f"entry {number} of the fixpoint group" if group is not None else f"entry {number}"
        return SpecEntry(
            name,
            options,
            f"pipeline string, {where} ({name!r}) at {self.place(start)}",
            **settings,
            option_places=places,
        )

    def option(self, name: str, options: dict[str, Any], places: dict[str, str], spellings: dict[str, str]) -> None:
        """``key=value`` inside the braces of pass ``name``, into ``options`` (and the key's
        place into ``places``, its spelling into ``spellings``)."""
        self.ws()
        if self.peek() in ("'", '"'):  # a quoted name: an option whose alias is no identifier ("my-opt")
            kpos = self.pos
            key = self.string()
        else:
            key, kpos = self.name(f"an option name for {name!r}")
        spelt = self.text[kpos : self.pos]  # as typed (key is its NFKC form)
        if self.peek() == "":  # `fold_constants{max_numel=4096,eliminate_dead_code`: a } missing
            raise self.error(
                f"expected '=' after option {key!r} of {name!r}, found end of string (the options of {name!r} "
                "have no closing '}': is one missing before a pass name read as an option?)"
            )
        if self.peek() == ".":  # tiling.size=8: a nested field by the path `fxpasses show` lists it as
            self._dotted_option(name, key)
        self.expect("=", f"after option {key!r} of {name!r}")
        if key in options:
            first = spellings[key]
            forms = f", as {ascii(first)} and as {ascii(spelt)} (one name in two Unicode forms)" if first != spelt else ""
            raise self.error(f"option {key!r} of {name!r} given twice{forms}", kpos)
        spellings[key] = spelt
        options[key] = self.value()
        places[key] = self.place(kpos)
        ch = self.peek()
        if ch not in (",", "}", ""):
            # a regular expression or other text with , { } [ ] = quotes or spaces, unquoted
            raise self.error(
                f"expected ',' or '}}' after the value of option {key!r} of {name!r}, found {ch!r}: "
                f"a value holding , {{ }} [ ] = quotes or spaces is quoted ({key}=\"...\", or '...')"
            )

    def _dotted_option(self, name: str, key: str) -> None:
        """Raise the error for ``key.field=value`` in the options of pass ``name`` (the ``.`` is
        next): the name of a nested options model's field as ``fxpasses show`` lists it
        (``tiling.size``), which is given in a table for its option (``tiling={size=8}``)."""
        dot = self.pos
        m = _DOTTED_REST.match(self.text, dot)
        if not m:
            return  # not a dotted name: expect() says what was found
        path = [key, *m.group(1)[1:].split(".")]
        self.pos = m.end()
        try:
            value: Any = self.value()
        except ConfigError:
            value = _NO_VALUE
        self.pos = dot
        raise self.error(
            f"expected '=' after option {key!r} of {name!r}, found '.': {'.'.join(path)} names a field of option "
            f"{key!r} (as fxpasses show lists a nested options model's fields), "
            + nested_field_hint(path, value, python=False)
        )

    def settings(self, name: str) -> dict[str, Any]:
        """``[verify=...,on_error=...,atol=...,rtol=...]`` after an entry (the ``[`` is next)."""
        self.pos += 1
        out: dict[str, Any] = {}
        self.sequence("]", f"in the settings of {name!r}", lambda: self.setting(name, out))
        return out

    def setting(self, name: str, out: dict[str, Any]) -> None:
        """``verify=...``, ``on_error=...``, ``atol=...`` or ``rtol=...`` inside the brackets of
        pass ``name``."""
        key, kpos = self.name(f"a setting of {name!r} ({', '.join(SETTING_NAMES)})")
        if key not in SETTING_NAMES:
            raise self.error(
                f"unknown setting {key!r} for {name!r}: settings in [...] are "
                f"{', '.join(SETTING_NAMES[:-1])} and {SETTING_NAMES[-1]} (pass options go in {{...}})",
                kpos,
            )
        if key in out:
            raise self.error(f"setting {key!r} of {name!r} given twice", kpos)
        self.expect("=", f"after setting {key!r} of {name!r}")
        self.ws()
        vpos = self.pos
        if key in TOLERANCES:
            value = self.value()
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise self.error(f"{key} of {name!r} must be a finite number >= 0, such as 1e-3, got {value!r}", vpos)
            out[key] = float(value)
            return
        if self.peek() in ("'", '"'):
            value = self.value()  # a quoted string, as option values may be
        else:
            value, vpos = self.name(f"a value for setting {key!r} of {name!r} ({', '.join(SETTINGS[key])})")
        if value not in SETTINGS[key]:
            raise self.error(not_one_of(f"{key} of {name!r}", value, SETTINGS[key]), vpos)
        out[key] = value


def _scalar(token: str) -> Any:
    low = token.lower()
    if low == "true":
        return True
    if low == "false":
        return False
    if low in ("none", "null"):
        return None
    # (the patterns take underscores anywhere; Python only between digits: 1_ is text)
    if _INT.match(token):
        with contextlib.suppress(ValueError):
            return int(token)
    if _FLOAT.match(low):
        with contextlib.suppress(ValueError):
            return float(token)
    return token


def format_value(value: Any) -> str:
    """``value`` as a pipeline-string option value that :func:`parse_pipeline_string` reads back
    as an equal value: a string bare when it would read back as itself, else as a Python string
    literal (``repr``); ``true``/``false``/``none``; numbers; lists (tuples too) in brackets,
    and sets as lists, their items in sorted order of their text;
    an enum member as its value and a path as its string (what an option of that type reads
    from text: ``Mode.slow`` would not read back); a mapping (a nested options model, dumped)
    as a table, ``{key=value,...}``, a key that is not a string as its text.
    """
    if isinstance(value, enum.Enum):
        return format_value(value.value)
    if isinstance(value, pathlib.PurePath):
        return format_value(str(value))
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if isinstance(value, (set, frozenset)):  # a list, which a set field reads; in a stable order
        items = [format_value(v) for v in value]
        return "[" + ",".join(sorted(items)) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{_format_key(k)}={format_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (bytes, bytearray)):  # (a bytes option reads text: b'abc' would not read back)
        try:
            return format_value(bytes(value).decode("utf-8"))
        except UnicodeDecodeError:
            return repr(bytes(value))
    if isinstance(value, str):
        # (a control or invisible character, \x00 or a zero-width space, is quoted: repr()
        # escapes it, so the printed string shows it and a shell can pass it)
        bare = _BARE.fullmatch(value) and value.isprintable() and type(_scalar(value)) is str
        return value if bare else repr(value)
    return repr(value) if isinstance(value, float) else str(value)


def format_option_name(name: str) -> str:
    """An option's name as :meth:`_Parser.option` reads it back: bare when it is an identifier,
    else quoted (an alias such as ``my-opt`` or ``a.b``)."""
    return name if name.isidentifier() and name.isprintable() and unicodedata.normalize("NFKC", name) == name else repr(name)


def _format_key(key: Any) -> str:
    """A table key as :meth:`_Parser.table_item` reads it back (always a string)."""
    key = key.value if isinstance(key, enum.Enum) else key
    key = key if isinstance(key, str) else str(key)
    return key if _BARE.fullmatch(key) and key.isprintable() else repr(key)


_NO_VALUE: Any = object()


def nested_field_hint(path: list[str], value: Any = _NO_VALUE, *, python: bool = True) -> str:
    """How a field of a nested options model, named by its path as ``fxpasses show`` and
    :meth:`Registry.describe <fxpasses.registry.Registry.describe>` list it (``["tiling",
    "size"]`` for ``tiling.size``), is given: in a table for its option, as no option's name
    holds a ``.``. ``value``: the value given for it (left out: ``...``); ``python``: also as a
    Python dict, and the TOML key that makes that table (the unknown-option error of options
    given from Python or a config file; a pipeline string's error gives its own form only).

    ``given in a table for it: tiling={size=8} in a pipeline string, {'tiling': {'size': 8}} in
    Python (...); a table given for an option replaces its default as a whole ...``"""
    text = "..." if value is _NO_VALUE else format_value(value)
    for key in reversed(path[1:]):
        text = f"{{{_format_key(key)}={text}}}"
    forms = f"{format_option_name(path[0])}={text}"
    if python:
        forms += " in a pipeline string"
        nested: Any = ... if value is _NO_VALUE else value
        for key in reversed(path):
            nested = {key: nested}
        forms += f", {nested!r} in Python (in a TOML file, the key {'.'.join(path)} unquoted makes that table)"
    return (
        f"given in a table for it: {forms}; a table given for an option replaces its default as a whole "
        "(the fields it leaves out take their own defaults)"
    )


def pass_entries(entries: list[SpecEntry | SpecGroup]) -> list[SpecEntry]:
    """The pass entries of a parsed pipeline string, those of its fixpoint groups in place."""
    return [m for e in entries for m in (e.entries if isinstance(e, SpecGroup) else (e,))]


def parse_pipeline_string(text: str, where: str | None = None) -> list[SpecEntry | SpecGroup]:
    """Parse a pipeline string (see the module doc); ``where`` names what holds it (a config
    file, an option) in error messages.

    Raises:
        ConfigError: with the column of the fault and a caret under it; or, when ``text`` is
            not a ``str`` (None, a list of names, bytes), naming the type found.
    """
    parser = _Parser(text, where)
    if not isinstance(text, str):
        hint = " (a list of pass names goes to Pipeline([...]))" if isinstance(text, (list, tuple)) else ""
        raise ConfigError(f"a pipeline string must be a str, got {type(text).__name__}{hint}", source=parser.where)
    return parser.entries()
