"""The only module that touches the standard streams and the file system for commands.

Inputs: a path, or stdin for "-" / no path, opened by files/inputs.py (the one reader, shared with the
library: file, stdin, pipe, a memory map for a regular file, OS errors put into words once).
Transcripts are read as bytes, line by line (inputs.stream_entries, re-exported here).
Outputs: stdout, or a file written atomically (temporary file in the same folder, fsync, rename),
so an interrupted run never leaves a half-written file behind.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, BinaryIO

from ..api import INPUT_BUFFER, STDIN, EntryStream, atomic_file, is_regular, opened, source_name, stream_entries, writer
from ..core.errors import IS_A_FOLDER, CtxpipeError, InputError
from ..core.jsonl import Entry, ReadStats, write_entries
from .terminal import json_shown, json_shown_bytes, shown


def open_input(path: str | None) -> contextlib.AbstractContextManager[BinaryIO]:
    """inputs.opened with a large buffer: a missing file or a folder is bad input (exit 1)."""
    return opened(path, buffering=INPUT_BUFFER)


@contextlib.contextmanager
def one_transcript(path: str | None, command: str, compact_runs_it: bool = False) -> Iterator[None]:
    """A filter reads one transcript: a folder (or a store's prefix) given as its PATH is refused in
    one line that names the batch command taking it: compact, for a stage compact runs; else count,
    which lists the sessions below it."""
    try:
        yield
    except InputError as exc:
        if path is None or exc.source != path or exc.line is not None or exc.what != IS_A_FOLDER:
            raise
        batch = (
            f"ctxpipe compact --out-dir DIR {path} compacts every session below it" if compact_runs_it else f"ctxpipe count {path} lists the sessions below it"
        )
        raise InputError(path, None, f"is a directory; {command} reads one transcript file ({batch})") from None


@contextlib.contextmanager
def open_output(path: str | None, like: str | None = None, if_version: tuple[object, ...] | None = None) -> Iterator[BinaryIO]:
    """stdout, or `path` written atomically (files/atomic.py: a regular file is replaced only when the
    block finishes without error; a device or a FIFO is written to). A failed write is one error.
    `like`: the transcript read, whose permissions a new file gets (no wider); `if_version`: what
    rewrite_guard said of it, when `path` is that transcript: replaced only if it is still so."""
    if path in (None, STDIN):
        if sys.stdout is None:  # started with `>&-`
            raise CtxpipeError("stdout is closed: nowhere to write the output (give -o FILE, or redirect it)")
        sys.stdout.flush()
        try:
            descriptor = sys.stdout.fileno()
        except (OSError, ValueError):  # io.UnsupportedOperation: a stdout in memory (an embedding program, CliRunner)
            out = sys.stdout.buffer
            yield out
            out.flush()
            return
        out = writer(descriptor, "stdout", closefd=False, pipe_errors=True)
        try:
            yield out
            out.flush()
        finally:
            out.close()  # after a failure, a no-op: nothing more is written
        return
    warn_hard_links(path)
    with atomic_file(path, if_version, like=None if like in (None, STDIN) else like) as out:
        yield out


def is_the_input(output: str | None, path: str | None) -> bool:
    """Whether `-o output` names the very file `path` that is read (a local file, or a store's object)."""
    if output in (None, STDIN) or path in (None, STDIN):
        return False
    from ..api import identity, is_remote

    assert output is not None and path is not None
    try:
        if is_remote(output) or is_remote(path):
            return bool(identity(output) == identity(path))
        return os.path.exists(output) and os.path.samefile(output, path)
    except (OSError, ValueError, CtxpipeError):
        return False


def rewrite_guard(output: str | None, path: str | None) -> tuple[object, ...] | None:
    """When `-o` names the transcript read (`-o FILE FILE`, what the report advises, or another name
    of the same file): its version before it is read, for open_output to check that no program
    wrote to it meanwhile (a session still being written would lose the lines appended); else None."""
    from ..api import version

    return version(path) if path is not None and is_the_input(output, path) else None


def same_place(one: str, other: str) -> bool:
    """Whether two names given for outputs are one file (or object), made or not yet. A device or a
    pipe is written through, not replaced: two outputs to /dev/null are no clash."""
    from ..api import identity, is_remote

    try:
        if is_remote(one) or is_remote(other):
            return bool(identity(one) == identity(other))
        if os.path.exists(one) and os.path.exists(other):
            return os.path.samefile(one, other) and is_regular(one)
        return os.path.realpath(os.path.expanduser(one)) == os.path.realpath(os.path.expanduser(other))
    except (OSError, ValueError, CtxpipeError):
        return False


def stdin_twice(path: str | None, other: str | None, flag: str) -> None:
    """A usage error when `flag` reads stdin (`-`) and so does the transcript (no path, or `-`):
    whichever came first would take it all, and the other would read nothing."""
    from . import declare

    if other == STDIN and path in (None, STDIN):
        raise declare.BadParameter(f"reads stdin, and so does the transcript: give the transcript's path, or {flag} a file", param_hint=flag)


def refuse_clashing_outputs(path: str | None, output: str | None, side: Mapping[str, str | None]) -> None:
    """A usage error when a file a flag names beside the transcript (--report-json, --ledger) is the
    transcript read, the -o file or another such flag's: writing it would destroy what the run reads
    or writes."""
    from . import declare

    to_stdout = [flag for flag, name in side.items() if name == STDIN]
    if to_stdout and output in (None, STDIN):
        raise declare.BadParameter(f"- is stdout, where the transcript goes: {to_stdout[0]} names a file of its own (or give -o FILE)", param_hint=to_stdout[0])
    named = [(flag, name) for flag, name in side.items() if name not in (None, STDIN)]
    for number, (flag, name) in enumerate(named):
        assert name is not None
        if is_the_input(name, path):
            raise declare.BadParameter(f"{name} is the transcript read: {flag} names a file of its own", param_hint=flag)
        if output not in (None, STDIN) and same_place(name, str(output)):
            raise declare.BadParameter(f"{name} is also the -o file: {flag} names a file of its own", param_hint=flag)
        for other_flag, other in named[number + 1 :]:
            if other is not None and same_place(name, other):
                raise declare.BadParameter(f"{other} is also {flag}'s file: each names a file of its own", param_hint=other_flag)


def warn_hard_links(path: str) -> None:
    # The file is replaced, not rewritten, so a crash never leaves it half-written: its other names
    # (hard links) keep the old content, as with `sed -i`. A symbolic link is followed instead.
    with contextlib.suppress(OSError):
        links = os.stat(path).st_nlink
        if links > 1 and is_regular(path):
            others = links - 1
            warn(
                f"{path}: has {others} other hard link{'s' if others != 1 else ''}; replaced by a new file, "
                f"{'they keep' if others != 1 else 'it keeps'} the old content"
            )


def write_transcript(entries: Iterable[Entry], out: BinaryIO, unbuffered: bool = False) -> None:
    """Write JSONL; line by line when asked or when a person is watching the terminal."""
    write_entries(entries, out, flush_each=unbuffered or out.isatty())


def report_skipped(stats: ReadStats, source: str) -> None:
    if stats.skipped:
        first = ", ".join(str(line) for line, _ in stats.problems[:5])
        more = "…" if stats.skipped > 5 else ""
        skipped_lines(source, stats.skipped, f" (line {first}{more})")


def skipped_lines(source: str, skipped: int, where: str = "") -> None:
    """--on-error skip: how many bad lines a reader left out of `source` (nothing when none)."""
    if skipped:
        warn(f"{source}: skipped {skipped} bad line{'s' if skipped != 1 else ''}{where}")


# Messages name files and quote transcript values: shown() keeps each one line and inert.
def warn(message: str) -> None:
    print(f"ctxpipe: warning: {shown(message)}", file=sys.stderr)


def note(message: str) -> None:
    print(f"ctxpipe: {shown(message)}", file=sys.stderr)


def error(message: str) -> None:
    print(f"ctxpipe: error: {shown(message)}", file=sys.stderr)


def stdout_is_terminal() -> bool:
    return sys.stdout is not None and sys.stdout.isatty()


def write_json_lines(objects: Iterable[Mapping[str, Any]], indent: bool = False) -> None:
    """Each object as JSON on stdout: one line each, or pretty-printed (indent) for a person."""
    with open_output(None) as out:
        for obj in objects:
            out.write(json_bytes(obj, indent))


def explain(lines: Iterable[str]) -> None:
    """Lines of explanation on stderr, each shown() (they quote transcript values), without a prefix."""
    for line in lines:
        print(shown(line), file=sys.stderr)


def json_bytes(obj: Any, indent: bool = False) -> bytes:
    """A report as one JSON document and a newline: the true values, inert on a terminal (see json_shown)."""
    import orjson

    try:
        return json_shown_bytes(orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE | (orjson.OPT_INDENT_2 if indent else 0)))
    except TypeError:  # a lone surrogate from the transcript, or a value nested deeper than orjson writes
        import json

        from ..core.fields import depth_headroom

        with depth_headroom():
            text = json.dumps(obj, ensure_ascii=False, indent=2 if indent else None, separators=(",", ": ") if indent else (",", ":")) + "\n"
    return json_shown(text).encode()


@contextlib.contextmanager
def progress(label: str) -> Iterator[Any]:
    """A spinner on stderr while waiting, on a terminal only; yields a function that shows a note."""
    if not sys.stderr.isatty():
        yield lambda text: note(text)
        return
    from rich.text import Text

    console = stderr_console()
    # Text, not str: a status line reads a str as markup whatever the console says.
    with console.status(Text(f"{label}…")) as status:
        yield lambda text: status.update(Text(f"{label}… {shown(text)}"))


def batch_progress(label: str) -> Any:
    """A batch's progress (the api's `progress=`): a bar on stderr saying `label` ("counting"), the
    files done and the errors, on a terminal and for more than one file only."""
    import functools

    return functools.partial(_progress_bar, label=label)


@contextlib.contextmanager
def _progress_bar(total: int, label: str) -> Iterator[Any]:
    """The bar of batch_progress: yields advance(ok), or None without one (no terminal, one file)."""
    if total < 2 or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    errors = 0
    with Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[errors]} errors"), TimeElapsedColumn(), console=stderr_console()
    ) as progress:
        task = progress.add_task("files", total=total, errors=0)

        def advance(ok: bool) -> None:
            nonlocal errors
            errors += 0 if ok else 1
            progress.update(task, advance=1, errors=errors)

        yield advance


def stderr_console() -> Any:
    """A rich console on stderr; no colour when NO_COLOR is set or stderr is not a terminal."""
    return _console(sys.stderr, soft_wrap=True)


def stdout_console() -> Any:
    return _console(sys.stdout, soft_wrap=not sys.stdout.isatty())


def _console(file: Any, soft_wrap: bool) -> Any:
    from rich.console import Console

    # No markup, emoji codes or highlighting: printed strings may hold transcript text (`[link=…]`,
    # `:smile:`); styles come from rich.text.Text (cli/terminal.py's shown_text) instead.
    return Console(file=file, no_color=bool(os.environ.get("NO_COLOR")) or None, soft_wrap=soft_wrap, markup=False, emoji=False, highlight=False)


__all__ = [
    "EntryStream",
    "STDIN",
    "error",
    "explain",
    "note",
    "open_input",
    "open_output",
    "report_skipped",
    "source_name",
    "stderr_console",
    "stdout_console",
    "stdout_is_terminal",
    "stream_entries",
    "warn",
    "write_json_lines",
    "write_transcript",
]
