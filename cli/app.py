"""The `ctxpipe` command: registers each command and turns known errors into exit codes."""

from __future__ import annotations

import os
import sys

import typer

from .commands.convert import convert
from .commands.validate import validate
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
app.command()(convert)
app.command()(validate)


def main() -> None:
    """Console entry point: one place for bad input, broken pipes and interrupts."""
    from ..core.errors import CtxpipeError

    try:
        app(prog_name="ctxpipe")
    except CtxpipeError as exc:
        if os.environ.get("CTXPIPE_DEBUG"):
            raise
        print(f"ctxpipe: error: {exc}", file=sys.stderr)
        sys.exit(ExitStatus.ERROR)
    except BrokenPipeError:
        _quiet_broken_pipe()
    except KeyboardInterrupt:
        sys.exit(ExitStatus.INTERRUPTED)


def _quiet_broken_pipe() -> None:
    # The reader went away (`| head`): point stdout at devnull so the interpreter's final flush
    # cannot raise again, and end quietly with success, as ripgrep and jc do.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(ExitStatus.OK)
