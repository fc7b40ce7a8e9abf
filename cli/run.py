"""Running a command line, by typer (cli/app.py) or without it (cli/direct.py): one place for bad
input, broken pipes, failed writes and interrupts, and the exit code each becomes. Imports no typer:
typer's usage errors are recognised by their class once typer has been loaded."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import NoReturn

from .status import ExitStatus


class PipeClosed(Exception):
    """stdout's reader went away; not an OSError, so typer does not turn it into exit 1."""


def quit_while_loading(_signum: int, _frame: object) -> None:
    os._exit(ExitStatus.INTERRUPTED)


@contextlib.contextmanager
def loading() -> Iterator[None]:
    """Ctrl-C while a command's modules load ends the process at once with 130, quietly: nothing is
    open or written yet, and a KeyboardInterrupt raised in the middle of an import (a C extension's,
    or the interpreter's own machinery) can escape any handler and end the process by the signal instead."""
    try:
        before = signal.signal(signal.SIGINT, quit_while_loading)
    except ValueError:  # not the main thread (a library's caller): signals are not ours to set there
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before if before is not None else signal.default_int_handler)


def usage_error(message: str, command_path: str) -> str:
    """A bad flag or value: one line saying what is wrong, and where the usage is."""
    from .terminal import shown

    return f"ctxpipe: error: {shown(' '.join(message.split()))} (see '{shown(command_path)} --help')"


def say_usage_error(message: str, command_path: str) -> None:
    print(usage_error(message, command_path), file=sys.stderr)


def flush_stdout() -> None:
    """A command's output out before its status is decided (a closed pipe is reported as such)."""
    if sys.stdout is not None:
        sys.stdout.flush()


def run_command_line(invoke: Callable[[], int | None], in_process: bool, name: str | None = None) -> NoReturn:
    """Run `invoke` (the command) and exit with its status, or with the one its failure means.
    `in_process`: called by a test with its own argv, not as the process's entry point. `name`: the
    command's, for what it says while it waits on a terminal's stdin."""
    if not in_process:
        from ..api import unwind_on_termination

        unwind_on_termination()
    try:
        status = _outcome(invoke, name)
        if not in_process:
            # The outcome is written and decided: a Ctrl-C from here on changes nothing, and would
            # otherwise kill the exiting interpreter by the signal (it restores the default handler).
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            # The interpreter's last cycle collection at exit walks every object the modules made
            # (about 8 ms of a small command's run) and has nothing to free that matters: the
            # command's files are closed and its output written. Frozen objects are not walked.
            gc.freeze()
    except KeyboardInterrupt:  # at any moment, even while an error is being reported
        _interrupted()
    sys.exit(status)


def _say(text: str) -> None:
    if sys.stderr is not None:
        sys.stderr.write(text)
        sys.stderr.flush()


def stdin_hint(name: str | None) -> str:
    """Said on stderr when command `name` reads stdin and stdin is a terminal (it would wait without a word)."""
    return (
        f"ctxpipe: reading a transcript from the terminal: paste its lines and end with Ctrl-D, or give a file or folder (ctxpipe {name or 'COMMAND'} PATH)\n"
    )


def _typer_exceptions() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """typer's usage errors and Abort, where typer has been loaded (nothing else can raise them)."""
    found = sys.modules.get("typer.exceptions")
    if found is None:
        return (), ()
    return (found.TyperException,), (found.Abort,)


def _outcome(invoke: Callable[[], int | None], name: str | None) -> int:
    from ..api import guard_truncation, when_stdin_is_a_terminal
    from ..core.errors import CHANGED, InputError
    from .encoding import tolerant_standard_streams
    from .terminal import shown

    _hold_standard_descriptors()
    tolerant_standard_streams()
    guard_truncation(lambda name: f"ctxpipe: error: {shown(InputError(name, None, CHANGED))}", ExitStatus.ERROR)
    when_stdin_is_a_terminal(lambda: _say(stdin_hint(name)))
    try:
        status = invoke()
    except Exception as exc:
        try:
            return _failure(exc, name)
        except BrokenPipeError:
            # stderr's reader went away while the failure was said: it still fails (1, as click ends a
            # run whose pipe broke), and the interpreter's final flush must not fail again.
            return pipe_broke()
    return status if isinstance(status, int) else ExitStatus.OK


def pipe_broke() -> int:
    """A run whose stderr (or, outside the command, any stream) lost its reader: exit 1, as click's
    parsing ends it, with stdout and stderr pointed at /dev/null for the interpreter's final flush."""
    from .emit import detach

    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            detach(stream)
    return ExitStatus.ERROR


def _failure(exc: Exception, name: str | None) -> int:
    """Say what `exc` means, once, and the exit status it becomes."""
    import io

    from ..core.errors import CtxpipeError, InternalError
    from . import declare
    from .terminal import shown

    if isinstance(exc, declare.BadParameter):  # the direct path's usage errors (cli/direct.py), as click says them
        what = f"Invalid value for {exc.param_hint}: {exc.message}" if exc.param_hint is not None else f"Invalid value: {exc.message}"
        say_usage_error(what, f"ctxpipe {name}")
        return ExitStatus.USAGE
    usage, abort = _typer_exceptions()
    if isinstance(exc, usage):  # usage errors (typer vendors click; these derive from it)
        show = getattr(exc, "show", None)
        context = getattr(exc, "ctx", None)
        if context is not None and type(exc).__name__ != "NoArgsIsHelpError":
            say_usage_error(exc.format_message(), context.command_path)  # type: ignore[attr-defined]
        elif show is not None:
            # The usage text quotes arguments (a path found by a shell glob can hold escapes).
            shown_lines = io.StringIO()
            show(shown_lines)
            sys.stderr.write("\n".join(shown(line) for line in shown_lines.getvalue().split("\n")))
        else:
            print(f"ctxpipe: error: {shown(exc.format_message())}", file=sys.stderr)  # type: ignore[attr-defined]
        return int(exc.exit_code)  # type: ignore[attr-defined]
    if isinstance(exc, abort):
        print("Aborted.", file=sys.stderr)
        return ExitStatus.INTERRUPTED
    if isinstance(exc, CtxpipeError):
        if os.environ.get("CTXPIPE_DEBUG"):
            raise
        print(f"ctxpipe: error: {shown(exc)}", file=sys.stderr)  # names files, quotes transcript values
        return ExitStatus.ERROR
    if isinstance(exc, (BrokenPipeError, PipeClosed)):
        return _quiet_broken_pipe()
    if isinstance(exc, OSError):  # a failure no command put into words, e.g. a table printed to a full stdout
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"ctxpipe: error: {shown(where + (exc.strerror or str(exc)))}", file=sys.stderr)
        _detach_stdout()
        return ExitStatus.ERROR
    # A bug: one line naming it, as a batch row does (CTXPIPE_DEBUG=1 shows the traceback).
    if os.environ.get("CTXPIPE_DEBUG"):
        raise
    print(f"ctxpipe: error: {shown(InternalError.of(None, exc))}", file=sys.stderr)
    return ExitStatus.ERROR


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
    from .emit import detach

    if sys.stdout is not None:
        detach(sys.stdout)
