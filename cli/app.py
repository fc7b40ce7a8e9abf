"""The `ctxpipe` command: declares each command (loaded when it runs) and turns known errors into exit codes."""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import os
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn

from .status import ExitStatus


def _quit_while_loading(_signum: int, _frame: object) -> None:
    os._exit(ExitStatus.INTERRUPTED)


# Ctrl-C while the commands load ends the process at once with 130, quietly: nothing is open or
# written yet, and a KeyboardInterrupt raised in the middle of an import (a C extension's, or the
# interpreter's own machinery) can escape any handler and end the process by the signal instead.
# The handler the process had comes back once typer and the api are loaded (the end of this module); a
# command's own modules load later, under the same handler again (_loading).
_HANDLER_BEFORE: Any = None  # signal.signal's answer: a handler, SIG_DFL or SIG_IGN (None: not set from Python)
try:
    _HANDLER_BEFORE = signal.signal(signal.SIGINT, _quit_while_loading)
except ValueError:  # imported outside the main thread: signals are not ours to set there
    pass

try:
    import typer
    from typer.main import get_command_from_info
    from typer.models import CommandInfo

    from .. import api  # noqa: F401  # every command's face and main's, loaded while Ctrl-C is handled as above
    from .coercion import Command, Group
    from .metavars import readable
except KeyboardInterrupt:  # Ctrl-C while starting up: as quiet as at any other moment
    raise SystemExit(ExitStatus.INTERRUPTED) from None

HELP = """Manage the context window of saved AI coding-agent sessions (Claude Code JSONL and more).

Every stage is a Unix filter: JSONL in, JSONL out. Reports go to stdout as a table on a terminal,
JSON otherwise; diagnostics go to stderr.

Example:  ctxpipe convert --to anthropic session.jsonl | head
"""


class PipeClosed(Exception):
    """stdout's reader went away; not an OSError, so typer does not turn it into exit 1."""


def pipe_safe(command: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(command)
    def run(*args: object, **kwargs: object) -> None:
        try:
            command(*args, **kwargs)
            if sys.stdout is not None:
                sys.stdout.flush()
        except BrokenPipeError:
            raise PipeClosed() from None

    return run


# The commands, each (module under cli/commands, function), in `ctxpipe --help`'s order; the stage
# registry's commands go after warn (cli/stages.py makes them; restore's is its own, for --from and --plan).
# A command's module is imported when that command runs, or when every command is listed.
OWN_COMMANDS: dict[str, tuple[str, str]] = {
    "convert": ("convert", "convert"),
    "validate": ("validate", "validate"),
    "count": ("count", "count"),
    "warn": ("warn", "warn"),
    "restore": ("restore", "restore"),
    "compact": ("compact", "compact"),
    "report": ("report", "report"),
    "audit": ("audit", "audit"),
    "expand": ("expand", "expand"),
    "api-edits": ("api_edits", "api_edits"),
    "statusline": ("statusline", "statusline"),  # its module's SETTINGS: its own parser takes its arguments (cli/statusline.py)
    "hooks": ("hooks", "hooks"),
}
STAGES_AFTER = "warn"


def command_names() -> list[str]:
    """Every command's name, in `ctxpipe --help`'s order."""
    from ..api import STAGES

    own = list(OWN_COMMANDS)
    at = own.index(STAGES_AFTER) + 1
    stages = [stage.name for stage in STAGES]
    return own[:at] + stages + [name for name in own[at:] if name not in stages]


def command_function(name: str) -> tuple[Callable[..., None], dict[str, Any]]:
    """The function of command `name` and typer's keywords for it (KeyError: no such command)."""
    if name in OWN_COMMANDS:
        module_name, function = OWN_COMMANDS[name]
        module = importlib.import_module(f"{__package__}.commands.{module_name}")
        return getattr(module, function), getattr(module, "SETTINGS", {})
    from ..api import STAGES
    from .stages import stage_command

    stage = next((stage for stage in STAGES if stage.name == name), None)
    if stage is None:
        raise KeyError(name)
    return stage_command(stage), {}


class _Commands(Mapping[str, Any]):
    """The group's commands by name, each made (its module imported) when first asked for."""

    def __init__(self) -> None:
        self._made: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._made:
            with _loading():
                function, settings = command_function(name)
                info = CommandInfo(name=name, cls=Command, callback=pipe_safe(function), **settings)
                made = get_command_from_info(info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=None)
                self._made[name] = readable(made)
        return self._made[name]

    def __iter__(self) -> Iterator[str]:
        return iter(command_names())

    def __len__(self) -> int:
        return len(command_names())


class _LazyGroup(Group):
    """ctxpipe: a command's module is imported when it runs (click's lazy loading, as its docs show)."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.commands = _Commands()  # type: ignore[assignment]  # read-only: commands are declared above, not added

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)


app = typer.Typer(
    name="ctxpipe",
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    cls=_LazyGroup,
)


# No command is registered with typer (_LazyGroup makes them): a callback is what makes typer build a group.
@app.callback()
def _group() -> None:
    pass


@contextlib.contextmanager
def _loading() -> Iterator[None]:
    """Ctrl-C while a command's modules load ends the process at once, as while this module loads."""
    try:
        before = signal.signal(signal.SIGINT, _quit_while_loading)
    except ValueError:  # not the main thread (a library's caller): signals are not ours to set there
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before if before is not None else signal.default_int_handler)


if _HANDLER_BEFORE is not None:
    signal.signal(signal.SIGINT, _HANDLER_BEFORE)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: one place for bad input, broken pipes, failed writes and interrupts.
    `argv` (default: sys.argv[1:]) lets the tests run a command in-process."""
    if argv is None:
        from ..api import unwind_on_termination

        unwind_on_termination()
    try:
        status = _main(argv)
        if argv is None:
            # The outcome is written and decided: a Ctrl-C from here on changes nothing, and would
            # otherwise kill the exiting interpreter by the signal (it restores the default handler).
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:  # at any moment, even while an error is being reported
        _interrupted()
    sys.exit(status)


def _main(argv: list[str] | None = None) -> int:
    from typer.exceptions import Abort, TyperException

    from ..api import guard_truncation
    from ..core.errors import CtxpipeError, InputError, InternalError
    from .encoding import tolerant_standard_streams
    from .terminal import shown

    _hold_standard_descriptors()
    tolerant_standard_streams()
    guard_truncation(lambda name: f"ctxpipe: error: {shown(InputError(name, None, 'changed while being read'))}", ExitStatus.ERROR)
    try:
        # standalone_mode=False: click would otherwise turn a closed pipe into exit 1 itself.
        status = app(args=argv, prog_name="ctxpipe", standalone_mode=False)
    except TyperException as exc:  # usage errors (typer vendors click; these derive from it)
        show = getattr(exc, "show", None)
        context = getattr(exc, "ctx", None)
        if context is not None and type(exc).__name__ != "NoArgsIsHelpError":
            # A bad flag or value: one line saying what is wrong, and where the usage is.
            message = " ".join(exc.format_message().split())
            print(f"ctxpipe: error: {shown(message)} (see '{shown(context.command_path)} --help')", file=sys.stderr)
        elif show is not None:
            # The usage text quotes arguments (a path found by a shell glob can hold escapes).
            shown_lines = io.StringIO()
            show(shown_lines)
            sys.stderr.write("\n".join(shown(line) for line in shown_lines.getvalue().split("\n")))
        else:
            print(f"ctxpipe: error: {shown(exc.format_message())}", file=sys.stderr)
        return int(exc.exit_code)
    except Abort:
        print("Aborted.", file=sys.stderr)
        return ExitStatus.INTERRUPTED
    except CtxpipeError as exc:
        if os.environ.get("CTXPIPE_DEBUG"):
            raise
        print(f"ctxpipe: error: {shown(exc)}", file=sys.stderr)  # names files, quotes transcript values
        return ExitStatus.ERROR
    except (BrokenPipeError, PipeClosed):
        return _quiet_broken_pipe()
    except OSError as exc:  # a failure no command put into words, e.g. a table printed to a full stdout
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"ctxpipe: error: {shown(where + (exc.strerror or str(exc)))}", file=sys.stderr)
        _detach_stdout()
        return ExitStatus.ERROR
    except Exception as exc:  # a bug: one line naming it, as a batch row does (CTXPIPE_DEBUG=1 shows the traceback)
        if os.environ.get("CTXPIPE_DEBUG"):
            raise
        print(f"ctxpipe: error: {shown(InternalError.of(None, exc))}", file=sys.stderr)
        return ExitStatus.ERROR
    return status if isinstance(status, int) else ExitStatus.OK


def _interrupted() -> NoReturn:
    # Ctrl-C: the `with` blocks have removed their temporary files on the way out. A second Ctrl-C
    # while the interpreter shuts down ends it at once, by the signal (the shell still sees 130).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(ExitStatus.INTERRUPTED)


def _hold_standard_descriptors() -> None:
    # Started with `>&-` or `2>&-`: descriptors 0–2 get /dev/null, so no file opened later takes one
    # of their numbers (a message for stderr would land in it); sys.stdout stays None, so output
    # still fails with "stdout is closed". Messages for a closed stderr are dropped, not printed
    # to stdout (print(file=None) would).
    for number in (0, 1, 2):
        try:
            os.fstat(number)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # the lowest free number: this one
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")


def _quiet_broken_pipe() -> int:
    # The reader went away (`| head`): point stdout at devnull so the interpreter's final flush
    # cannot raise again, and end quietly with success, as ripgrep and jc do.
    _detach_stdout()
    return ExitStatus.OK


def _detach_stdout() -> None:
    if sys.stdout is not None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
