"""The ``fxpasses`` command line.

Exit status: 0 on success; 2 for a user error (bad config, unknown pass, bad options, cycle,
unreadable model factory or one that raises, a model that cannot be captured or run, bad
command line, a broken plugin under ``--strict-plugins``), printed as one message without a
traceback (``--traceback`` shows it as well, with the same exit status); 1 when a pass fails or the outputs change (``bisect``:
when it finds a bad pass or rewrite).

The group's options ``--traceback``, ``-p`` and ``--strict-plugins`` are accepted after the
command too (``fxpasses run x.toml --traceback``).

``--format json`` prints exactly one JSON object on stdout: the result with ``"ok": true``, or
``{"ok": false, "exit_status": N, "error": {"type": ..., "message": ..., <the error's fields>}}``
(the ``error:`` line still goes to stderr). While the command runs, what its code writes to
stdout goes to stderr: Python's ``print``, and (in the console script, where ``sys.stdout`` is
file descriptor 1) writes straight to fd 1 (``os.write(1, ...)``, subprocesses, C extensions),
fd 1 pointing at stderr until the JSON object is written. Click's usage errors (an unknown flag, a bad
``--format`` value) are raised before the command runs and stay click's plain text on stderr.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import shlex
import sys
import warnings
from typing import Any, Callable, TypeVar

import click

from ._names import normal_name

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["main", "cli"]


class _State:
    def __init__(self, traceback: bool, plugins: tuple[str, ...], strict: bool) -> None:
        self.traceback = traceback
        self.enable: list[str] = []
        self.disable: list[str] = []
        self.add_plugins(plugins)
        self.strict = strict
        self._registry: Any = None

    def add_plugins(self, plugins: tuple[str, ...]) -> None:
        """``-p NAME`` / ``-p no:NAME`` values."""
        self.enable += [p for p in plugins if not p.startswith("no:")]
        self.disable += [p[3:] for p in plugins if p.startswith("no:")]

    def registry(self, plugins_cfg: Any = None) -> Any:
        from .errors import FxPassesError, PassDefinitionWarning, PluginWarning
        from .registry import Registry

        enable = list(self.enable)
        disable = list(self.disable)
        strict = self.strict
        prefer: dict[str, str] = {}
        if plugins_cfg is not None:
            enable += plugins_cfg.enable
            disable += plugins_cfg.disable
            strict = strict or plugins_cfg.strict
            prefer = dict(plugins_cfg.prefer)
        # a [plugins] section of a config file: its problems name the file
        source = getattr(plugins_cfg, "_source", None) if plugins_cfg is not None else None
        with _warning_lines(PassDefinitionWarning):  # printed after the plugin problems
            warnings.simplefilter("ignore", PluginWarning)  # printed below, once, as warning: lines
            try:
                reg = Registry(enable=enable, disable=disable, strict=strict, prefer=prefer)
            except FxPassesError as exc:
                named = [*plugins_cfg.enable, *plugins_cfg.disable, *plugins_cfg.prefer.values()] if source else []
                if any(n in str(exc) for n in named) or (source and str(exc).startswith("[plugins]")):
                    exc.args = (f"{source}: [plugins]: {exc}",)
                raise
            _end_startup()
            for problem in reg.problems:
                text = str(problem)
                if source and text.startswith("[plugins]"):  # (prefer: the section's own problems)
                    text = f"{source}: {text}"
                click.echo(f"warning: {text}", err=True)
        return reg

    def plugins_table(self, plugins_cfg: Any = None) -> dict[str, Any] | None:
        """The plugin selection in effect (-p flags and config), as a config [plugins] table."""
        table: dict[str, Any] = {}
        enable = [*self.enable, *(plugins_cfg.enable if plugins_cfg is not None else ())]
        disable = [*self.disable, *(plugins_cfg.disable if plugins_cfg is not None else ())]
        if enable:
            table["enable"] = enable
        if disable:
            table["disable"] = disable
        if plugins_cfg is not None and plugins_cfg.prefer:
            table["prefer"] = dict(plugins_cfg.prefer)
        return table or None


def _error_object(exc: BaseException, status: int, **extra: Any) -> dict[str, Any]:
    """The ``--format json`` object of a failure: ``{"ok": false, "exit_status": N, "error":
    {"type", "message", ...}}``; the error's public attributes (a pass name, the node, the
    config source, the suggestions, ...) are fields of ``error``, and so is its ``cause``."""
    from .errors import exception_message

    message = exception_message(exc) or ("interrupted" if isinstance(exc, KeyboardInterrupt) else type(exc).__name__)
    error: dict[str, Any] = {"type": type(exc).__name__, "message": message}
    notes = [str(n).removeprefix("fxpasses: ") for n in getattr(exc, "__notes__", ()) if str(n).startswith("fxpasses: ")]
    if notes:  # what fxpasses added on the way out (an interrupted pass, and its graph)
        error["notes"] = notes
    for key, value in vars(exc).items():
        if key == "report" and hasattr(value, "as_dict"):  # a pass failure's run so far
            error["passes"] = value.as_dict()["passes"]
        elif not key.startswith("_") and key not in error:
            # (a set is not JSON: its items, sorted)
            error[key] = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
    if exc.__cause__ is not None:
        from .errors import exception_line

        error["cause"] = exception_line(exc.__cause__)
    from .errors import OptionsError

    if isinstance(exc, OptionsError):  # (field path, message, given value) triples, by name
        error["problems"] = [{"field": f, "message": m, "given": v} for f, m, v in exc.problems]
        error["others"] = [  # the later entries with invalid options, each as this one
            {
                "pass_name": o.pass_name,
                "source": o.source,
                "places": o.places,
                "problems": [{"field": f, "message": m, "given": v} for f, m, v in o.problems],
            }
            for o in exc.others
        ]
    error.update(extra)
    return {"ok": False, "exit_status": status, "error": error}


#: the real stdout of each ``--format json`` command running (innermost last): while it runs,
#: whatever else writes to stdout (a pass's or the model's print()) goes to stderr instead
_JSON_STDOUT: list[Any] = []

#: for each ``--format json`` command running (innermost last), the duplicate of the real file
#: descriptor 1 while fd 1 points at stderr (:func:`_fd1_to_stderr`), or None when not swapped
_JSON_FD1: list[int | None] = []


def _flush_stdio() -> None:
    """Flush Python's stdout and stderr and C's stdio buffers (what a C extension printf'd)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):  # no C library to ask (Windows): nothing buffered there to lose
        import ctypes

        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def _fd1_to_stderr() -> Any:
    """While a ``--format json`` command runs, file descriptor 1 points at stderr, so that writes
    straight to it (``os.write(1, ...)``, a subprocess's output, a C extension's printf) do not
    come before the JSON object; restored on every way out (errors, KeyboardInterrupt). Only
    when ``sys.stdout`` is fd 1 (the console script; not click's CliRunner, whose stdout is a
    buffer): otherwise nothing is swapped."""
    try:
        swap = sys.stdout.fileno() == 1
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        swap = False
    saved = None
    if swap:
        _flush_stdio()
        saved = os.dup(1)
        os.dup2(2, 1)
    _JSON_FD1.append(saved)
    try:
        yield
    finally:
        _JSON_FD1.pop()
        if saved is not None:
            _flush_stdio()  # what is still buffered for fd 1 goes to stderr too
            os.dup2(saved, 1)
            os.close(saved)


def _echo_json(obj: dict[str, Any], default: Callable[[Any], str] = str) -> None:
    """Print a command's one JSON object on stdout (``ok`` first); ``default`` spells what
    JSON has no type for. While fd 1 points at stderr (:func:`_fd1_to_stderr`), it points at
    the real stdout again just for this."""
    if "ok" not in obj:
        obj = {"ok": True, **obj}
    from ._json import dumps

    _echo_stdout(dumps(obj, indent=2, default=default))


def _echo_stdout(text: str) -> None:
    """Print ``text`` on the command's real stdout (see :func:`_echo_json`)."""
    out = _JSON_STDOUT[-1] if _JSON_STDOUT else None
    saved = _JSON_FD1[-1] if _JSON_FD1 else None
    if saved is None:
        click.echo(text, file=out)
        return
    _flush_stdio()  # anything buffered before it goes to stderr, where fd 1 points now
    os.dup2(saved, 1)
    try:
        click.echo(text, file=out)  # (click.echo flushes)
    finally:
        os.dup2(2, 1)


def _fail(fmt: str | None, exc: BaseException, status: int, text: str | None = None, **extra: Any) -> None:
    """Report a failure and exit with ``status``: the ``error:`` line on stderr and, under
    ``--format json``, the failure's JSON object on stdout (so stdout always holds one)."""
    if fmt == "json":
        _echo_json(_error_object(exc, status, **extra))
    if text is None:
        # what fxpasses added on the way out (e.g. an earlier run's files left in the output folder)
        notes = [str(n).removeprefix("fxpasses: ") for n in getattr(exc, "__notes__", ()) if str(n).startswith("fxpasses: ")]
        text = f"error: {exc}" + "".join(f"\n  note: {n}" for n in notes)
    click.echo(text, err=True)
    sys.exit(status)


#: commands whose stdout is JSON whatever their options (what plugins print goes to stderr)
_JSON_COMMANDS = frozenset({"schema_cmd"})


def _handle_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        state: _State = click.get_current_context().find_object(_State)  # type: ignore[assignment]
        fmt = kwargs.get("fmt")
        if fmt != "json" and fn.__name__ not in _JSON_COMMANDS:
            return _run_reporting_errors(fn, state, fmt, args, kwargs)
        # stdout holds the one JSON object: what passes, plugins and model code print goes
        # to stderr while the command runs
        # (Python's print() by redirecting sys.stdout, writes straight to fd 1 by pointing
        # fd 1 at stderr, each restored on the way out)
        _JSON_STDOUT.append(sys.stdout)
        try:
            with _fd1_to_stderr(), contextlib.redirect_stdout(sys.stderr):
                return _run_reporting_errors(fn, state, fmt, args, kwargs)
        finally:
            _JSON_STDOUT.pop()

    return wrapper  # type: ignore[return-value]


def _run_reporting_errors(fn: Callable[..., Any], state: Any, fmt: str | None, args: Any, kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, each kind of failure reported (:func:`_fail`) with its exit
    status (see :func:`_handle_errors`)."""
    from .errors import (
        CaptureWarning,
        ConfigWarning,
        FxPassesError,
        PassDefinitionWarning,
        PluginError,
        PluginWarning,
        UserError,
        exception_text,
    )
    from .fixpoint import FixpointWarning

    shown = state is not None and state.traceback  # --traceback: the traceback, then the same report

    try:
        # fxpasses' own warnings, whenever issued (a plugin's instrument raising mid-run), as
        # the `warning: ...` lines of the plugin problems, not as Python's file:line: Category
        with _warning_lines(PluginWarning, PassDefinitionWarning, ConfigWarning, CaptureWarning):
            # (a fixpoint group's non-convergence is the run report's note, printed with it)
            warnings.filterwarnings("ignore", category=FixpointWarning)
            return fn(*args, **kwargs)
    except click.exceptions.ClickException:
        raise  # usage errors: click's own text (stderr), even under --format json
    except (UserError, PluginError) as exc:  # PluginError: a broken plugin in strict mode
        _print_traceback(exc, shown)
        _fail(fmt, exc, 2)
    except FxPassesError as exc:
        _print_traceback(exc, shown)
        _fail(fmt, exc, 1)
    except _CommandExit:
        raise  # a command's own exit status
    except SystemExit as exc:
        # sys.exit() in code run for the model (its factory, forward, a [model] graph file):
        # exit status 0 with nothing printed read as success (a new-user check)
        _print_traceback(exc, shown)
        _fail(fmt, UserError(_exit_text(exc)), 2)
    except KeyboardInterrupt as exc:
        # what was interrupted, and what became of the graph (the pipeline's note on it)
        notes = [n.removeprefix("fxpasses: ") for n in getattr(exc, "__notes__", ()) if str(n).startswith("fxpasses: ")]
        _fail(fmt, exc, 130, "interrupted" + "".join(f": {n}" for n in notes))
    except BrokenPipeError:
        # the reader went away (`fxpasses show X | head -1`): stop quietly, as cat does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, (_JSON_STDOUT[-1] if _JSON_STDOUT else sys.stdout).fileno())
        if _JSON_FD1 and _JSON_FD1[-1] is not None:  # fd 1 is restored from this one
            os.dup2(devnull, _JSON_FD1[-1])
        sys.exit(0)
    except Exception as exc:
        _print_traceback(exc, shown)
        # an internal error (a bug in fxpasses or a plugin), not a verdict on the model:
        # exit status 3, as pytest's internal errors (1 means a pass failed or outputs changed)
        text = f"error: unexpected {exception_text(exc)}" + ("" if shown else "\n(run with --traceback for details)")
        _fail(fmt, exc, 3, text, internal=True)


class _CommandExit(SystemExit):
    """A command's own exit with a status (``fxpasses bisect`` finding a bad pass): not
    code run for the model calling ``sys.exit()``."""


def _exit_text(exc: SystemExit) -> str:
    """What to say of a ``sys.exit()`` that code run for the model called: the call, and
    where it was (the innermost frame of the exception's traceback, the caller of
    ``sys.exit``)."""
    tb = exc.__traceback__
    place = ""
    while tb is not None:
        code = tb.tb_frame.f_code
        if not code.co_filename.startswith("<frozen"):  # (quit() and exit() are _sitebuiltins')
            place = f" at {os.path.basename(code.co_filename)}:{tb.tb_lineno} in {code.co_name}"
        tb = tb.tb_next
    return (
        f"sys.exit({exc.code!r}) was called{place}, in code run for the model (its factory, its forward, "
        "or a file [model] names) or by a plugin: fxpasses stopped there; a model must not exit the process"
    )


def _print_traceback(exc: BaseException, shown: bool) -> None:
    """With ``--traceback``, the error's traceback on stderr before its usual report: the
    exit status and the ``--format json`` object stay what they are without it."""
    if shown:
        import traceback

        click.echo("".join(traceback.format_exception(exc)).rstrip("\n"), err=True)


_TRACEBACK_HELP = "Show the full traceback of errors."
_PLUGINS_HELP = (
    "Load plugin NAME (distribution or entry point) even with autoload disabled; "
    "-p no:NAME never loads it. Repeatable."
)
_STRICT_HELP = "A broken plugin is an error, not a warning."


#: command names users reach for, from the Python API or other tools, and the command meant
_SYNONYMS = {
    "describe": "show (the Python API's Registry.describe)",
    "info": "show",
    "ls": "list",
    "validate": "check",
    "lint": "check",
    "optimize": "run",
}


class _Group(click.Group):
    """The command group; an unknown command that is another tool's or the Python API's name
    for one of ours says which (click suggests only close spellings)."""

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError:
            if args and args[0] in _SYNONYMS:
                raise click.UsageError(f"No such command {args[0]!r}: the command is {_SYNONYMS[args[0]]}", ctx) from None
            raise


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--traceback", is_flag=True, help=_TRACEBACK_HELP)
@click.option("-p", "plugins", multiple=True, metavar="NAME", help=_PLUGINS_HELP)
@click.option("--strict-plugins", is_flag=True, help=_STRICT_HELP)
@click.version_option(package_name="fxpasses")
@click.pass_context
def cli(ctx: click.Context, traceback: bool, plugins: tuple[str, ...], strict_plugins: bool) -> None:
    """A plugin-based pass registry for PyTorch FX graphs.

    --traceback, -p and --strict-plugins may also be given after the command
    (`fxpasses run CONFIG --traceback`).
    """
    ctx.obj = _State(traceback, plugins, strict_plugins)


def _global_options(fn: F) -> F:
    """The group's options --traceback, -p and --strict-plugins, accepted after the command
    too (`fxpasses run x.toml --traceback`), where they add to those given before it. They run
    while the command line is parsed, before the command: the registry is made later."""

    def state(ctx: click.Context) -> _State:
        found = ctx.find_object(_State)
        if found is None:  # the command invoked without the group (a test calling it alone)
            found = ctx.obj = _State(False, (), False)
        return found

    def set_traceback(ctx: click.Context, _param: Any, value: bool) -> None:
        if value:
            state(ctx).traceback = True

    def add_plugins(ctx: click.Context, _param: Any, value: tuple[str, ...]) -> None:
        if value:
            state(ctx).add_plugins(value)

    def set_strict(ctx: click.Context, _param: Any, value: bool) -> None:
        if value:
            state(ctx).strict = True

    fn = click.option("--strict-plugins", is_flag=True, expose_value=False, callback=set_strict, help=_STRICT_HELP)(fn)
    fn = click.option(
        "-p", "plugins", multiple=True, metavar="NAME", expose_value=False, callback=add_plugins, help=_PLUGINS_HELP
    )(fn)
    return click.option(  # type: ignore[return-value]
        "--traceback", is_flag=True, expose_value=False, callback=set_traceback, help=_TRACEBACK_HELP
    )(fn)


def _config_source(fn: F) -> F:
    """CONFIG argument and the --pipeline/--preset options that replace its pipeline."""
    fn = click.option("--preset", help="A named pipeline (see `fxpasses list`), instead of the config's.")(fn)
    fn = click.option("--pipeline", help="A pipeline string, instead of the config's.")(fn)
    return click.argument("config", required=False)(fn)  # type: ignore[return-value]


_format = click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
    help="Output for people (text) or machines (json).",
)


@cli.command("list")
@_format
@click.pass_obj
@_handle_errors
@_global_options
def list_cmd(state: _State, fmt: str) -> None:
    """List the registered passes and presets, the plugins they come from, and what a plugin
    registered that was rejected as it loaded (with the reason)."""
    from .console import print_table

    reg = state.registry(_project_plugins())
    conflicts = reg.preset_conflicts()
    rows = []
    for name in reg.names():
        try:
            info = reg.info(name)
            rows.append((name, info.cls.kind, info.source, info.cls.summary()))
        except Exception as exc:  # a name in conflict
            rows.append((name, "?", "CONFLICT", str(exc).split(";")[0]))
    if fmt == "json":
        out = {
            "passes": [dict(zip(("name", "kind", "source", "summary"), r)) for r in rows],
            "presets": [
                {"name": p.name, "pipeline": p.pipeline, "description": p.description, "source": p.source}
                for p in reg.presets().values()
            ]
            + [
                {
                    "name": name,
                    "pipeline": None,
                    "description": _preset_clash(name, candidates),
                    "source": "CONFLICT",
                    "candidates": [{"pipeline": c.pipeline, "description": c.description, "source": c.source} for c in candidates],
                }
                for name, candidates in conflicts.items()
            ],
            "plugins": [
                {
                    "distribution": p.distribution,
                    "version": p.version,
                    "entry_point": p.entry_point,
                    "status": p.status,
                    "off": p.off or None,  # why a disabled one is not loaded: "disabled" or "autoload off"
                    "error": p.error,
                    "problems": p.problems,
                    "passes": p.passes,
                    "presets": p.presets,
                    "rejected": [{"kind": x.kind, "name": x.name, "reason": x.reason} for x in p.rejected],
                }
                for p in reg.plugins
            ],
        }
        _echo_json(out)
        return
    print_table(("pass", "kind", "source", "summary"), rows, title=f"{len(rows)} passes")
    preset_rows = [(p.name, p.source, p.pipeline) for p in reg.presets().values()]
    preset_rows += [(name, "CONFLICT", _preset_clash(name, candidates)) for name, candidates in conflicts.items()]
    if preset_rows:
        click.echo()
        print_table(("preset", "source", "pipeline"), sorted(preset_rows))
    # one row per entry point: a distribution may register several
    # what each registered: its passes, then its presets (a plugin of presets only showed its
    # problems there); its problems when it registered nothing
    plugin_rows = [
        (p.label, p.name, p.off or p.status, ", ".join([*p.passes, *(f"{n} (preset)" for n in p.presets)]) or (p.error or ""))
        for p in reg.plugins
    ]
    click.echo()
    print_table(("plugin", "entry point", "status", "registered"), plugin_rows)
    # what a plugin registered but the registry refused as it loaded (not usable until fixed)
    rejected_rows = [(p.label, x.kind, x.name, x.reason) for p in reg.plugins for x in p.rejected]
    if rejected_rows:
        click.echo()
        print_table(("plugin", "rejected", "name", "reason"), rejected_rows, title=f"{len(rejected_rows)} rejected")


def _preset_clash(name: str, candidates: list[Any]) -> str:
    """What ``list`` says of a preset name several plugins register (no ``prefer`` chose)."""
    from .errors import prefer_hint

    return f"registered by {' and '.join(c.source for c in candidates)}: choose one with {prefer_hint(name)}"


@cli.command("show")
@click.argument("name")
@_format
@click.pass_obj
@_handle_errors
@_global_options
def show_cmd(state: _State, name: str, fmt: str) -> None:
    """Show a pass (options with types and defaults, dependencies, source package) or a preset."""
    from .errors import DuplicatePassError

    reg = state.registry(_project_plugins())
    name = normal_name(name)  # as the registry looks names up (typed decomposed: the same name)
    if name not in reg and (name in reg.presets() or name in reg.preset_conflicts()):
        presets = [bound] if (bound := reg.presets().get(name)) is not None else reg.preset_conflicts()[name]
        if len(presets) > 1:  # show every registration, so the user can choose one with `prefer`
            click.echo(f"warning: {DuplicatePassError(name, [p.source for p in presets], kind='preset')}", err=True)
        # why it cannot be used as it is (the warning when its plugin loaded said it; show did not)
        graph = reg._ordering_graph()
        problems = [[q.message for q in reg._preset_problems(p, graph)] for p in presets]
        if fmt == "json":
            out = [
                {
                    "preset": name,
                    "pipeline": p.pipeline,
                    "description": p.description,
                    "source": p.source,
                    "problems": said,
                }
                for p, said in zip(presets, problems)
            ]
            _echo_json(out[0] if len(out) == 1 else {"candidates": out})
            return
        for i, (preset, said) in enumerate(zip(presets, problems)):
            if i:
                click.echo("\n" + "-" * 60)
            click.echo(f"{name} (preset)" + (f" — {preset.description}" if preset.description else ""))
            click.echo(f"source:   {preset.source}")
            click.echo(f"pipeline: {preset.pipeline}")
            for message in said:
                click.echo(f"problem:  {message}")
        return
    if name not in reg:  # neither a pass nor a preset: suggest from both
        raise reg.unknown_name(name)
    try:
        descriptions = [reg.describe(name)]
    except DuplicatePassError as exc:
        # show every registration, so the user can choose one with `prefer`
        click.echo(f"warning: {exc}", err=True)
        descriptions = [reg.describe(name, distribution=c.distribution) for c in reg.candidates(name)]
    if fmt == "json":
        out = [d.as_dict() for d in descriptions]
        # one pass, or (a name registered twice) each registration under "candidates"
        _echo_json(out[0] if len(out) == 1 else {"candidates": out}, default=repr)
        return
    for i, d in enumerate(descriptions):
        if i:
            click.echo("\n" + "-" * 60)
        _show_text(d)


def _show_text(d: Any) -> None:
    from .console import print_table
    from .registry import config_value
    from .spec import format_value

    click.echo(f"{d.name} ({d.kind})" + (f" — {d.summary}" if d.summary else ""))
    click.echo(f"source:   {d.distribution} {d.version} ({d.module})".rstrip())
    click.echo(f"requires: {', '.join(d.requires) or '-'}")
    click.echo(f"after:    {', '.join(d.after) or '-'}")
    click.echo(f"before:   {', '.join(d.before) or '-'}")
    for note in d.notes:
        click.echo(f"note:     {note}")
    click.echo(f"dialects: {', '.join(d.dialects)}")
    writes = "may write parameters/buffers in place (run under the rollback's write guard)"
    click.echo(f"tensors:  {writes if d.writes_tensors else 'writes none in place (writes_tensors = False)'}")
    click.echo(
        "edits:    "
        + (
            "through torch.fx's editing methods and the context only (journal_edits = True: rollback records "
            "what it touches, lint looks at that)"
            if d.journal_edits
            else "any (a snapshot of the graph and modules before it, a lint of the whole graph after it)"
        )
    )
    click.echo()
    if d.options:
        rows = []
        stack = list(reversed(d.options))
        while stack:  # each option, then the fields of the models it holds (tiling.size)
            o = stack.pop()
            rows.append(
                (
                    o.name,
                    o.type + (f" ({o.constraints})" if o.constraints else ""),
                    # as a pipeline string writes it (--pipeline takes it as shown; a nested
                    # model's default is a table)
                    "(required)" if o.required else format_value(config_value(o.default)),
                    o.description,
                )
            )
            stack.extend(reversed(o.fields))
        print_table(("option", "type", "default", "description"), rows)
        if any(o.fields for o in d.options):
            click.echo(
                "(a table given for an option holding a model replaces the option's default as a whole: the fields "
                "it leaves out take the defaults listed for them)"
            )
    else:
        click.echo("options:  none")
    body = d.doc.split("\n", 1)[1].strip() if "\n" in d.doc else ""
    if body:
        click.echo()
        click.echo(body)


def _project_plugins() -> Any:
    """The ``[plugins]`` section of the nearest project config (``fxpasses.toml``, or
    ``pyproject.toml``'s ``[tool.fxpasses]``; None without one), which ``fxpasses run`` without
    CONFIG applies: ``list``, ``show`` and ``schema`` describe the registry it would use (its
    ``prefer``, ``enable``, ``disable``). One that does not load is a warning line, and no
    section."""
    from .config import find_project_config, load_config_file
    from .errors import ConfigError

    try:  # (a misspelt [tool.fxpass] table is a warning line, as every command's)
        found = find_project_config()
        return load_config_file(found).plugins if found is not None else None
    except ConfigError as exc:
        click.echo(f"warning: {exc} (its [plugins] section is not applied)", err=True)
        return None


def _load_cfg(config: str | None, pipeline: str | None, preset: str | None = None) -> Any:
    """The config from CONFIG (or the nearest project config: ``fxpasses.toml``, or
    ``pyproject.toml``'s ``[tool.fxpasses]``), with --pipeline/--preset applied."""
    from .config import find_project_config, load_config_file, parse_config
    from .errors import ConfigError

    if pipeline is not None and preset is not None:
        raise ConfigError("give either --pipeline or --preset, not both")
    if config is not None:
        cfg = load_config_file(config)
    else:  # (a misspelt [tool.fxpass] table is a warning line, as every command's)
        # (--pipeline/--preset replace its pipeline; its model, options and plugins stay, as a CONFIG's)
        found = find_project_config()
        cfg = load_config_file(found) if found is not None else None
        if cfg is not None:
            cfg._found = found
    if pipeline is not None or preset is not None:
        update = {"pipeline": pipeline, "preset": preset}
        if cfg is None:
            cfg = parse_config(update, source="--pipeline" if pipeline is not None else "--preset")
        else:
            cfg = cfg.model_copy(update=update)  # keeps the private attributes (_source, _base_dir)
            cfg._pipeline_overridden = True
            cfg._preset_from_cli = preset is not None
            cfg._pipeline_from_cli = pipeline is not None
    return cfg


@cli.command("check")
@_config_source
@_format
@click.pass_obj
@_handle_errors
@_global_options
def check_cmd(state: _State, config: str | None, pipeline: str | None, preset: str | None, fmt: str) -> None:
    """Validate CONFIG (or --pipeline/--preset; with none found, the bundled example run uses) and print the ordered plan; no model needed."""
    from .errors import PassDefinitionWarning
    from .job import check_model_sources, default_config, with_default_preset
    from .pipeline import Pipeline

    cfg = _load_cfg(config, pipeline, preset)
    bundled = cfg is None
    if bundled:  # what `fxpasses run` runs then: the bundled example and its preset
        cfg = default_config()
    # the preset `fxpasses run` uses for a config that names no pipeline (without CONFIG,
    # a [tool.fxpasses] without a model runs the bundled example)
    given, cfg = cfg, with_default_preset(cfg, example_model=config is None)
    default = cfg.preset if cfg is not given else None
    check_model_sources(cfg)  # the files and module [model] names are there (nothing is built)
    reg = state.registry(cfg.plugins)
    with warnings.catch_warnings():  # (the misspelt after/before names are among the notes below)
        warnings.simplefilter("ignore", PassDefinitionWarning)
        pipe = Pipeline._from_config_obj(cfg, registry=reg)
    plan = pipe.plan()
    pipe._make_passes()  # a constructor that raises fails here as it fails a run
    # ordering constraints naming no registered pass (a misspelling orders nothing)
    notes = list(dict.fromkeys(n for s in plan.steps for n in reg.order_notes(s.cls)))
    if fmt == "json":
        runs = plan.groups()
        groups = {id(members[0].group): k for k, members in enumerate(runs)}
        position = {id(s): i for i, s in enumerate(plan.steps)}
        _echo_json(
            {
                "steps": [
                    {
                        "name": s.name,
                        "options": s.options.model_dump(mode="json", by_alias=True),
                        "reasons": s.reasons,
                        # the fixpoint group it belongs to (an index into "fixpoint_groups"), or null
                        "fixpoint_group": groups.get(id(s.group)) if s.group is not None else None,
                    }
                    for s in plan.steps
                ],
                "fixpoint_groups": [
                    {"steps": [position[id(m)] for m in members], "max_iterations": members[0].group.max_iterations}
                    for members in runs
                ],
                "pipeline": plan.as_pipeline_string(),
                "order": pipe.order,
                "verify": pipe.verify,
                "on_error": pipe.on_error,
                "atol": pipe.atol,
                "rtol": pipe.rtol,
                "default_preset": default,
                "notes": notes,
            }
        )
        return
    n = len(plan.steps)
    if bundled:
        click.echo(
            "no config found (no fxpasses.toml, nor pyproject.toml with [tool.fxpasses], here or above): "
            f"the bundled example with preset {cfg.preset!r}, as `fxpasses run` uses"
        )
    click.echo(f"{cfg._source}: OK, {n} pass{'' if n == 1 else 'es'} (verify={pipe.verify}, on_error={pipe.on_error})")
    if default is not None:
        click.echo(f"no pipeline or preset given: preset {default!r}, as `fxpasses run` uses")
    click.echo(str(plan))
    for note in notes:
        click.echo(f"note: {note}")


def _not_empty(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A directory option given as ``''`` (an unset shell variable, most likely): a usage
    error, not the current directory."""
    if value is not None and not value.strip():
        raise click.BadParameter(f"an empty path ({value!r}); give a directory", ctx=ctx, param=param)
    return value


def _echo_skipped(report: Any) -> None:
    """Each node a pass of ``report`` left alone (``ctx.skip``) and the pass's reason, under
    the pass's name (stderr); nothing for a run whose passes skipped none."""
    for p in report.passes:
        if p.skipped:
            click.echo(f"{p.label} left {len(p.skipped)} node{'s' if len(p.skipped) > 1 else ''} alone:", err=True)
            for node, why in p.skipped:
                click.echo(f"  %{node}: {why}", err=True)


@cli.command("run")
@_config_source
# (directories are checked by fxpasses, not click: an existing file is an error in the --format)
@click.option("--output", "-o", type=click.Path(), callback=_not_empty, help="Directory for the result.")
@click.option("--no-save", is_flag=True, help="Do not write the result.")
@click.option("--repeat", type=click.IntRange(1), default=20, show_default=True, help="Timed runs per latency figure.")
@click.option("--print-after-all", is_flag=True, help="Print the graph's code after every pass (stderr).")
@click.option(
    "--print-after", metavar="NAME,...",
    help="Print the graph's code after these passes (stderr); each must be in the pipeline.",
)
@click.option("--print-changed", is_flag=True, help="Print a unified diff of the code for each pass that changed it (stderr).")
@click.option("--time-passes", is_flag=True, help="Print wall time per pass, slowest first (stderr).")
@click.option(
    "--print-skipped", is_flag=True,
    help="Print each node a pass left alone and why, as the pass said it (stderr; like LLVM's missed-optimization remarks).",
)
@click.option(
    "--draw", "draw_dir", type=click.Path(), metavar="DIR", callback=_not_empty,
    help="Write the graph before and after each changing pass to DIR (.dot; .svg with Graphviz). Needs fxpasses[draw].",
)
@click.option(
    "--reproducer",
    metavar="DIR",
    type=click.Path(),
    callback=_not_empty,
    help="When a pass fails, write DIR: the graph before it, its tensors and inputs, and a config "
    "that replays the failure with `fxpasses run DIR/fxpasses.json` (no model code needed).",
)
@click.option(
    "--rewrite-limit",
    metavar="N",
    type=click.IntRange(0),
    help="Apply only the first N rewrites of the run, then stop (like LLVM's -opt-bisect-limit; "
    "see `fxpasses bisect`).",
)
@click.option(
    "--on-error",
    type=click.Choice(["rollback", "skip", "raise"]),
    help="What a failing pass does, for every pass: replaces the config's on_error and each "
    "pipeline entry's own (`fxpasses bisect` suggests `--on-error rollback` to reproduce a "
    "failure that on_error = \"skip\" would roll back and go past). With raise, the graph the "
    "failing pass left is written to OUT/broken_graph.txt.",
)
@_format
@click.pass_obj
@_handle_errors
@_global_options
def run_cmd(
    state: _State,
    config: str | None,
    pipeline: str | None,
    preset: str | None,
    output: str | None,
    no_save: bool,
    repeat: int,
    print_after_all: bool,
    print_after: str | None,
    print_changed: bool,
    time_passes: bool,
    print_skipped: bool,
    draw_dir: str | None,
    reproducer: str | None,
    rewrite_limit: int | None,
    on_error: str | None,
    fmt: str,
) -> None:
    """Capture a model, run the pipeline, verify, time and save it.

    Without CONFIG it reads the nearest fxpasses.toml, or pyproject.toml with [tool.fxpasses],
    from here upwards; without one it optimizes the bundled example CNN and saves it under
    fxpasses-out/example.
    """
    from .console import print_table
    from .report import counters_cell, rewrites_cell, rewrites_summary
    from .errors import FxPassesError, PassDefinitionWarning, UserError
    from .job import run_job, with_default_preset
    from .pipeline import Pipeline

    if output is not None and no_save:
        raise UserError(
            f"-o/--output {output} and --no-save conflict: -o says where to save the result, "
            "--no-save not to save it; give one of them"
        )
    cfg, example, stand_in = _with_example_model(_load_cfg(config, pipeline, preset), config, pipeline, preset)
    from .instruments import PrintAfter, PrintChanged, TimePasses

    reg = state.registry(cfg.plugins)
    # what `fxpasses bisect` needs to run this run's pipeline on this model (a failure's note)
    bisect_config, bisect_args = _same_run(state, cfg, config, pipeline, preset, example=example)
    instruments: list[Any] = []
    if print_after is not None and not print_after_all and not print_after.replace(",", "").strip():
        raise UserError(
            f"--print-after {print_after!r} names no pass: give pass names separated by commas "
            "(--print-after fold_constants,eliminate_dead_code), or --print-after-all"
        )
    if print_after_all or print_after:
        # (NFKC-normalized, as the registry and the plan name passes)
        names = None if print_after_all else [normal_name(n.strip()) for n in print_after.split(",") if n.strip()]  # type: ignore[union-attr]
        for n in names or ():
            reg.get(n, source="--print-after")  # unknown names: exit 2 with suggestions
        if names:
            # the pipeline run_job runs: a config that names none gets its default preset
            with warnings.catch_warnings():  # (said once, by the run's own pipeline)
                warnings.simplefilter("ignore", PassDefinitionWarning)
                planned = Pipeline._from_config_obj(with_default_preset(cfg), registry=reg).plan().names()
            _check_in_pipeline("--print-after", names, planned)
        instruments.append(PrintAfter(names, file=sys.stderr))
    if print_changed:
        instruments.append(PrintChanged(file=sys.stderr))
    timer = TimePasses() if time_passes else None
    if timer is not None:
        instruments.append(timer)
    drawer = None
    if draw_dir is not None:
        from .draw import DrawGraphs

        drawer = DrawGraphs(draw_dir)  # a UserError naming the extra when pydot is missing
        instruments.append(drawer)
    writer = None
    if reproducer is not None:
        from .reproducer import ReproducerWriter

        writer = ReproducerWriter(reproducer, None, plugins=state.plugins_table(cfg.plugins))
    try:
        with contextlib.ExitStack() as stack:
            if fmt == "text" and sys.stderr.isatty():
                from .instruments import Progress

                instruments.append(stack.enter_context(Progress(file=sys.stderr)))
            result = run_job(
                cfg,
                registry=reg,
                output=output,
                repeat=repeat,
                save=not no_save,
                instruments=instruments,
                rewrite_limit=rewrite_limit,
                on_error=on_error,
                reproducer=writer,
                snapshot_tensors=writer is not None,
                bisect_command=shlex.join(["fxpasses", "bisect", *filter(None, [bisect_config]), *bisect_args]),
            )
    except FxPassesError as exc:
        report = getattr(exc, "report", None)
        if fmt == "text" and report is not None and report.passes:
            # what ran before the failure, as a run that completes shows it (stdout; the
            # failure itself is the error line)
            click.echo(f"passes run until the failure ({report.dialect}):")
            click.echo(report.table(failures=False))
        if print_skipped and report is not None:
            _echo_skipped(report)
        if timer is not None:
            click.echo(timer.table(), err=True)
        if drawer is not None:
            click.echo(drawer.summary(), err=True)
        if writer is None or (writer.written is None and writer.error is None) or state.traceback:
            raise
        status = 2 if isinstance(exc, UserError) else 1
        if fmt == "json":
            from .reproducer import replay_args

            written = writer.written is not None
            where: dict[str, Any] = (
                {"reproducer": str(writer.written), "replay_command": replay_args(writer.written, writer.rewrite_limit)}
                if written
                else {"reproducer_error": str(writer.error)}
            )
            _echo_json(_error_object(exc, status, **where))
        click.echo(f"error: {exc}", err=True)
        _echo_reproducer(writer)
        raise _CommandExit(status)
    if writer is not None:
        _echo_reproducer(writer)
    if print_skipped:
        _echo_skipped(result.report)
    if timer is not None:
        click.echo(timer.table(), err=True)
    if drawer is not None:
        click.echo(drawer.summary(), err=True)
    model_note = _stand_in_note(stand_in)
    if fmt == "json":
        _echo_json({**result.as_dict(), "model_note": model_note})
        return
    rep = result.report
    how = "captured" if result.captured else "loaded"
    click.echo(f"model: {result.model_name} ({rep.dialect}, {how} in {result.capture_seconds:.2f} s)")
    if model_note:
        click.echo(f"note: {model_note}")
    click.echo(f"pipeline: {result.pipeline}" + (f"  (preset {result.preset})" if result.preset else ""))
    # why the order is not the one given (moves, pulled-in passes), once each, as check says it
    for why in dict.fromkeys(f"{p.name}: {r}" for p in rep.passes for r in p.reasons):
        click.echo(f"  order: {why}")
    limited = rep.rewrite_limit is not None
    rows = []
    for p in rep.passes:
        counters = counters_cell(p)
        name = p.label  # (with a fixpoint group's iteration)
        row = [name, p.status, "yes" if p.changed else "no", str(p.nodes_before), str(p.nodes_after),
               f"{p.seconds * 1000:.1f}", counters]
        if limited:  # under --rewrite-limit: what each pass applied, and whether the limit stopped it
            row.insert(3, rewrites_cell(p))
        rows.append(tuple(row))
    header = ["pass", "status", "changed", "nodes before", "nodes after", "ms", "counters"]
    if limited:
        header.insert(3, "rewrites")
    print_table(tuple(header), rows)
    if limited:
        cut = [p.label for p in rep.passes if p.cut_off]
        click.echo(
            f"rewrite limit {rep.rewrite_limit}: {rewrites_summary(rep)}; "
            + (f"cut off (a rewrite stopped): {', '.join(cut)}" if cut else "no pass was cut off")
        )
    for p in rep.passes:
        if p.status != "ok" and p.error:
            click.echo(f"{p.status}: {p.error}")
    for note in rep.notes:  # (a fixpoint group that did not converge, ...)
        click.echo(f"note: {note}")
    left = sum(len(p.skipped) for p in rep.passes)
    if left and not print_skipped:
        click.echo(f"{left} node{'s' if left > 1 else ''} left alone by a pass, each with a reason: --print-skipped prints them")
    speedup = result.latency_before_ms / result.latency_after_ms if result.latency_after_ms else float("nan")
    click.echo(f"nodes: {rep.nodes_before} -> {rep.nodes_after}")
    click.echo(f"outputs: match (max abs error {result.max_abs_error:.3g})")
    click.echo(
        f"latency: {result.latency_before_ms:.3f} ms -> {result.latency_after_ms:.3f} ms "
        f"(best of {repeat}; {speedup:.2f}x)"
    )
    if result.latency_note:
        click.echo(f"note: {result.latency_note}")
    for path in result.saved:
        click.echo(f"saved: {path}")
    if not result.saved and not no_save and output is None and (cfg is None or cfg.output is None):
        click.echo("saved: nothing (the config has no `output`; give `output = \"DIR\"` or -o DIR to save the model)")


def _check_in_pipeline(option: str, names: list[str], planned: list[str]) -> None:
    """Raise a :class:`~fxpasses.errors.UserError` when a pass that ``option`` names is not in the
    pipeline (``planned``, the plan's pass names in order), which would make the option do
    nothing: naming those passes, each with the pipeline's passes close to it ("did you mean"),
    and listing the pipeline's passes."""
    from .errors import UserError
    from .pipeline import _close_step

    absent = [n for n in dict.fromkeys(names) if n not in planned]
    if not absent:
        return
    steps = list(dict.fromkeys(planned))
    raise UserError(
        f"{option}: pass(es) not in the pipeline, nothing to print: "
        + ", ".join(f"{n}{_close_step(n, steps)}" for n in absent)
        + f"; the pipeline's passes: {', '.join(steps)}"
    )


def _with_example_model(
    cfg: Any, config: str | None, pipeline: str | None, preset: str | None
) -> tuple[Any, bool, str | None]:
    """``cfg`` as ``fxpasses run`` and ``fxpasses bisect`` run it: without CONFIG and without
    a ``[model]`` (no project config found, or one without the table, or a bare
    --pipeline/--preset), the bundled example model stands in, with all of the config's
    settings; its errors still name where they came from. Returns the config, whether the
    example model stands in, and the project config file it stands in for (its source, for
    :func:`_stand_in_note`; None when none was found). A CONFIG given without a ``[model]`` is
    left as it is (the command says it has no model)."""
    from .job import default_config

    if not (cfg is None or cfg.model is None and config is None):
        return cfg, False, None
    stand_in = None  # the config file without a [model] that the bundled example model runs for
    base = default_config()
    if cfg is None:
        cfg = base
    else:
        if cfg._found is not None:  # not a bare --pipeline/--preset
            stand_in = cfg._source
        update: dict[str, Any] = {"model": base.model, "output": cfg.output or base.output}
        if cfg.pipeline is None and cfg.preset is None:
            update["preset"] = base.preset
        cfg = cfg.model_copy(update=update)  # (private attributes, _source among them, are copied)
    cfg._preset_from_cli = preset is not None
    cfg._pipeline_from_cli = pipeline is not None
    return cfg, True, stand_in


def _stand_in_note(stand_in: str | None) -> str:
    """The note that the bundled example model ran for ``stand_in``, a project config without
    a ``[model]`` (see :func:`_with_example_model`); ``""`` for None."""
    if stand_in is None:
        return ""
    return f"{stand_in} has no [model]: this is the bundled example model (add a [model] table for yours)"


def _same_run(
    state: _State, cfg: Any, config: str | None, pipeline: str | None, preset: str | None, *, example: bool = False
) -> tuple[str | None, list[str]]:
    """The CONFIG and the options another command (``fxpasses bisect``, ``fxpasses run``) needs
    to run what this one ran: the pipeline given on the command line (``--pipeline``/
    ``--preset``), the same plugins (``-p NAME``, ``-p no:NAME``: without them a plugin's pass
    was unknown), and the project config by name when it was found, not given (so the command
    runs from anywhere). When the bundled example model stood in (``example``, see
    :func:`_with_example_model`) the found config is not named: given as CONFIG, a config
    without a ``[model]`` has no model to run; the command without it finds the same config
    from here and runs the example model again."""
    args = ["--pipeline", pipeline] if pipeline is not None else ["--preset", preset] if preset is not None else []
    args += [a for p in [*state.enable, *(f"no:{d}" for d in state.disable)] for a in ("-p", p)]
    if config is None and cfg is not None and cfg._found is not None and not example:
        config = os.path.relpath(cfg._found)
    return config, args


def _echo_reproducer(writer: Any) -> None:
    from .reproducer import replay_args

    if writer.written is not None:
        click.echo(
            f"reproducer of the failure of {writer.failed_pass!r} written to {writer.written.parent}; "
            f"replay it with: {shlex.join(replay_args(writer.written, writer.rewrite_limit))}",
            err=True,
        )
        for warning in writer.warnings:
            click.echo(f"warning: {warning}", err=True)
    elif writer.error is not None:
        click.echo(f"warning: no reproducer written for {writer.failed_pass!r}: {writer.error}", err=True)


@cli.command("bisect")
@_config_source
@_format
@click.pass_obj
@_handle_errors
@_global_options
def bisect_cmd(state: _State, config: str | None, pipeline: str | None, preset: str | None, fmt: str) -> None:
    """Find the first pass, then the first rewrite in it, that changes the model's outputs.

    Captures the model of CONFIG (or, without CONFIG, of the nearest fxpasses.toml or
    pyproject.toml's [tool.fxpasses]; without one, or without a [model] in it, the bundled
    example CNN, as `fxpasses run` does) once, runs the pipeline with numeric
    verification after every pass, then bisects the rewrites of the first failing pass with a global rewrite limit
    (see `fxpasses run --rewrite-limit`). Exit status 1 when a bad rewrite (or pass) is found,
    0 when every pass keeps the outputs.
    """
    from .bisect import bisect
    from .errors import ConfigError, model_table
    from .job import prepare_model, with_default_preset
    from .pipeline import Pipeline

    # the model `fxpasses run` runs: without CONFIG and without a [model], the bundled example
    # (the bisect command a run's failure prints must bisect the model that run ran)
    cfg, example, stand_in = _with_example_model(_load_cfg(config, pipeline, preset), config, pipeline, preset)
    if cfg.model is None:  # a CONFIG given without one
        raise ConfigError(f"no {model_table(cfg._source)}: `fxpasses bisect` needs a model factory (or saved graph) and inputs", source=cfg._source)
    reg = state.registry(cfg.plugins)
    cfg = with_default_preset(cfg)  # the pipeline `fxpasses run` would run
    pipe = Pipeline._from_config_obj(cfg, registry=reg)
    prepared = prepare_model(cfg)
    cap = prepared.captured
    log = None if fmt == "json" else (lambda line: click.echo(f"  {line}", err=True))
    with contextlib.ExitStack() as stack:
        if log is not None and sys.stderr.isatty():
            # a spinner with the current trial on a terminal: every trial reruns the pipeline
            from rich.console import Console

            console = Console(stderr=True)
            status = stack.enter_context(console.status("bisect: full run with numeric verification"))

            def log(line: str) -> None:
                console.print(f"  {line}")
                status.update(f"bisect: after {line}")

        from .job import _reference_module

        ref = _reference_module(cfg) if cfg.model.reference is not None else None  # (a reproducer's)
        result = bisect(
            pipe, cap.gm, cap.inputs, example_kwargs=cap.kwargs or None, atol=cfg.atol, rtol=cfg.rtol, log=log,
            reference_module=ref,
        )
    config, run_args = _same_run(state, cfg, config, pipeline, preset, example=example)
    # (the example model: `fxpasses run` without CONFIG runs it again, no "CONFIG" placeholder)
    text = result.text(config, run_args=run_args, needs_config=not example)
    model_note = _stand_in_note(stand_in)
    if fmt == "json":
        # a bad pass found is exit status 1: the object says so as any failure does
        # (the failing pass's own error is "pass_error": "error" is the failure's object)
        found = result.as_dict()
        found["pass_error"] = found.pop("error")
        # the whole command, as the text's "reproduce with" line (reproduce_args alone lacked
        # the --pipeline and -p options it needs; found by a new-user check)
        found["reproduce_command"] = result.reproduce_command(config, run_args=run_args, needs_config=not example)
        found["model_note"] = model_note
        if result.status != "clean":
            error = {"type": "BisectFound", "message": text, "status": result.status, "pass_name": result.pass_name}
            found = {"ok": False, "exit_status": 1, "error": error, **found}
        _echo_json(found)
    else:
        if model_note:
            click.echo(f"note: {model_note}")
        click.echo(text)
    if result.status != "clean":
        raise _CommandExit(1)


@cli.command("schema")
@click.pass_obj
@_handle_errors
@_global_options
def schema_cmd(state: _State) -> None:
    """Print the JSON Schema of the config file (per-pass options selected by pass name)."""
    from .schema import config_schema

    registry = state.registry(_project_plugins())
    schema = config_schema(registry)  # (a plugin's options without a JSON Schema: a warning line)
    from ._json import dumps

    # (what a plugin printed as it loaded went to stderr: stdout holds the schema alone)
    _echo_stdout(dumps(schema, indent=2, default=str))


@contextlib.contextmanager
def _warning_lines(*categories: type[Warning]) -> Any:
    """Print the warnings of ``categories`` issued inside as ``warning: ...`` lines on stderr
    (as the plugin problems are), not as Python's ``file:line: Category: ...``, when they are
    issued, each text once; others are shown as Python would show them."""
    shown = warnings.showwarning
    printed: set[str] = set()  # each text once (bisect reruns the pipeline: its warnings again)

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        if issubclass(category, categories):
            text = f"warning: {message}"
            if text not in printed:
                printed.add(text)
                click.echo(text, err=True)
        else:  # not ours to reformat: let it through as Python would show it
            shown(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        for category in categories:
            warnings.simplefilter("always", category)
        warnings.showwarning = show  # (put back by catch_warnings)
        yield


# Start-up of the console script: the cyclic garbage collector is paused until the registry
# is loaded, then everything loaded so far (torch: about a million long-lived objects) is
# frozen out of later collections, which would otherwise scan it again and again (a sixth of
# `fxpasses list`'s wall time). Only for the console script: `cli` used as a library (tests,
# CliRunner) leaves the collector alone.
_startup_gc: bool | None = None


def _end_startup(freeze: bool = True) -> None:
    global _startup_gc
    if _startup_gc is not None:
        if freeze:
            gc.freeze()
        if _startup_gc:
            gc.enable()
        _startup_gc = None


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``fxpasses`` console script."""
    global _startup_gc
    _startup_gc = gc.isenabled()
    gc.disable()
    try:
        cli.main(args=argv, prog_name="fxpasses")
    finally:
        _end_startup(freeze=False)  # a command that loaded no registry (--help)


if __name__ == "__main__":  # pragma: no cover
    main()
