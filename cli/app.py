"""The `ctxpipe` command: registers each command and turns known errors into exit codes."""

from __future__ import annotations

import functools
import io
import os
import sys
from collections.abc import Callable

import typer

from .commands.api_edits import api_edits
from .commands.collapse import collapse
from .commands.compact import compact
from .commands.convert import convert
from .commands.count import count
from .commands.expand import expand
from .commands.microcompact import microcompact
from .commands.restore import restore
from .commands.snip import snip
from .commands.summarize import summarize
from .commands.validate import validate
from .commands.warn import warn
from .status import ExitStatus

HELP = """Manage the context window of saved AI coding-agent sessions (Claude Code JSONL and more).

Every stage is a Unix filter: JSONL in, JSONL out. Reports go to stdout as a table on a terminal,
JSON otherwise; diagnostics go to stderr.

Example:  ctxpipe convert --to anthropic session.jsonl | head
"""

app = typer.Typer(
    name="ctxpipe",
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)


class PipeClosed(Exception):
    """stdout's reader went away; not an OSError, so typer does not turn it into exit 1."""


def pipe_safe(command: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(command)
    def run(*args: object, **kwargs: object) -> None:
        try:
            command(*args, **kwargs)
            sys.stdout.flush()
        except BrokenPipeError:
            raise PipeClosed() from None

    return run


for command in (convert, validate, count, warn, microcompact, collapse, snip, summarize, restore, compact, expand):
    app.command()(pipe_safe(command))
app.command("api-edits")(pipe_safe(api_edits))


def main() -> None:
    """Console entry point: one place for bad input, broken pipes and interrupts."""
    from typer.exceptions import Abort, TyperException

    from ..core.errors import CtxpipeError
    from .terminal import shown

    try:
        # standalone_mode=False: click would otherwise turn a closed pipe into exit 1 itself.
        status = app(prog_name="ctxpipe", standalone_mode=False)
    except TyperException as exc:  # usage errors (typer vendors click; these derive from it)
        show = getattr(exc, "show", None)
        if show is not None:
            # The usage text quotes arguments (a path found by a shell glob can hold escapes).
            shown_lines = io.StringIO()
            show(shown_lines)
            sys.stderr.write("\n".join(shown(line) for line in shown_lines.getvalue().split("\n")))
        else:
            print(f"ctxpipe: error: {shown(exc.format_message())}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except Abort:
        print("Aborted.", file=sys.stderr)
        sys.exit(ExitStatus.INTERRUPTED)
    except CtxpipeError as exc:
        if os.environ.get("CTXPIPE_DEBUG"):
            raise
        print(f"ctxpipe: error: {shown(exc)}", file=sys.stderr)  # names files, quotes transcript values
        sys.exit(ExitStatus.ERROR)
    except (BrokenPipeError, PipeClosed):
        _quiet_broken_pipe()
    except KeyboardInterrupt:
        sys.exit(ExitStatus.INTERRUPTED)
    sys.exit(status if isinstance(status, int) else ExitStatus.OK)


def _quiet_broken_pipe() -> None:
    # The reader went away (`| head`): point stdout at devnull so the interpreter's final flush
    # cannot raise again, and end quietly with success, as ripgrep and jc do.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(ExitStatus.OK)
