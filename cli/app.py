"""The `ctxpipe` command: declares each command (loaded when it runs) and turns known errors into exit codes."""

from __future__ import annotations

import functools
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .commands import OWN_COMMANDS, STAGES_AFTER, command_function, command_names  # noqa: F401  # re-exported: the registry's old place
from .run import PipeClosed, flush_stdout, loading, quit_while_loading, run_command_line
from .status import ExitStatus

# Ctrl-C while the commands load ends the process at once with 130, quietly: nothing is open or
# written yet, and a KeyboardInterrupt raised in the middle of an import (a C extension's, or the
# interpreter's own machinery) can escape any handler and end the process by the signal instead.
# The handler the process had comes back once typer and the api are loaded (the end of this module); a
# command's own modules load later, under the same handler again (run.loading).
_HANDLER_BEFORE: Any = None  # signal.signal's answer: a handler, SIG_DFL or SIG_IGN (None: not set from Python)
try:
    _HANDLER_BEFORE = signal.signal(signal.SIGINT, quit_while_loading)
except ValueError:  # imported outside the main thread: signals are not ours to set there
    pass

try:
    import typer
    from typer.main import get_command_from_info
    from typer.models import CommandInfo

    from .. import api  # noqa: F401  # every command's face and main's, loaded while Ctrl-C is handled as above
    from .coercion import Command, Group
    from .metavars import readable
    from .version import VERSION_FLAGS, print_version
except KeyboardInterrupt:  # Ctrl-C while starting up: as quiet as at any other moment
    raise SystemExit(ExitStatus.INTERRUPTED) from None

HELP = """Manage the context window of saved AI coding-agent sessions (Claude Code JSONL and more).

Every stage is a Unix filter: JSONL in, JSONL out. Reports go to stdout as a table on a terminal,
JSON otherwise; diagnostics go to stderr.

Example:  ctxpipe convert --to anthropic session.jsonl | head
"""


def pipe_safe(command: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(command)
    def run(*args: object, **kwargs: object) -> None:
        try:
            command(*args, **kwargs)
            flush_stdout()
        except BrokenPipeError:
            raise PipeClosed() from None

    return run


class _Commands(Mapping[str, Any]):
    """The group's commands by name, each made (its module imported) when first asked for."""

    def __init__(self) -> None:
        self._made: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._made:
            with loading():
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


def _version(given: bool) -> None:
    if given:
        print_version()


# No command is registered with typer (_LazyGroup makes them): a callback is what makes typer build a
# group. `--version` alone is answered before typer loads (cli/entry.py); here it is listed in the help.
@app.callback()
def _group(
    version: bool = typer.Option(False, *VERSION_FLAGS, is_eager=True, callback=_version, help="Print the version and exit."),
) -> None:
    pass


if _HANDLER_BEFORE is not None:
    signal.signal(signal.SIGINT, _HANDLER_BEFORE)


def main(argv: list[str] | None = None) -> None:
    """Console entry point on the typer path (cli/direct.py runs a plain command line without it).
    `argv` (default: sys.argv[1:]) lets the tests run a command in-process."""
    given = sys.argv[1:] if argv is None else argv
    name = next((word for word in given if not word.startswith("-")), None)  # the command, for what it says while it waits
    run_command_line(lambda: app(args=argv, prog_name="ctxpipe", standalone_mode=False), in_process=argv is not None, name=name)
