"""The one way in: every command and the library read their inputs here, a path or stdin, whatever kind of file it is.

Two shapes of the same input: `opened` (a stream, read line by line: the stages, convert, validate,
the library) and `mapped` (the whole input as a buffer: count and the commands built on it). For
`mapped`, a regular file is memory-mapped (count reads only its end); anything else — stdin, a pipe,
a FIFO, `<(…)`, a character device, a file in /proc that claims 0 bytes — has no size to map, so it
is read whole. Missing, unreadable and folder inputs are bad input (InputError), never a traceback:
the mapping of OS errors to messages is `open_file` and `read_all`, nowhere else. `detect_format`
tells a buffer's format from its first lines, and `stream_entries` a stream's; both refuse another
agent's file first (formats.other_agents), before a line of it is parsed.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import mmap
import os
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from . import storage
from .core.errors import InputError
from .core.jsonl import Entry, OnError, ReadStats, iter_entries
from .formats import SNIFF_LINES, TranscriptFormat, claim, detect, get, other_agents, refuse_other_agent

STDIN = "-"
Source = str | os.PathLike[str] | None  # a path; None or "-" is stdin


def source_name(path: Source) -> str:
    """How messages name the input: "-" for stdin."""
    return STDIN if path in (None, STDIN) else str(path)


def open_file(path: str | os.PathLike[str], buffering: int = -1) -> BinaryIO:
    """`path` opened for reading; a missing, forbidden or folder path is bad input. An object in a
    store (storage.is_remote) is fetched whole, in one request."""
    name = str(path)
    if storage.is_remote(name):
        return io.BytesIO(storage.read_whole(name))
    path = storage.local_path(name)
    if os.path.isdir(path):
        raise InputError(name, None, "is a directory, expected a transcript file")
    try:
        return open(path, "rb", buffering=buffering)
    except FileNotFoundError:
        raise InputError(name, None, "no such file") from None
    except PermissionError:
        raise InputError(name, None, "permission denied") from None
    except OSError as exc:
        raise InputError(name, None, exc.strerror or str(exc)) from None


def read_all(stream: BinaryIO, name: str) -> bytes:
    try:
        return stream.read()
    except OSError as exc:  # e.g. stdin redirected from a folder, or a device that fails
        raise InputError(name, None, f"cannot read: {exc.strerror or exc}") from None


def stdin_stream() -> BinaryIO:
    if sys.stdin is None:  # started with `<&-`
        raise InputError(STDIN, None, "stdin is closed")
    return sys.stdin.buffer


def is_regular(path: str | os.PathLike[str]) -> bool:
    """Whether `path` (a symbolic link followed) is a regular file, the only kind that is mapped or
    replaced; or an object in a store."""
    if storage.is_remote(path):
        return storage.info(str(path)) is not None
    path = storage.local_path(str(path))
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def opened(path: Source, buffering: int = -1) -> Iterator[BinaryIO]:
    """The input as a binary stream: stdin for None or "-"; a pipe, a FIFO or a device is read as the
    stream it is (so `tail -f` is not held up). A missing, forbidden or folder path is bad input."""
    if path is None or path == STDIN:
        yield stdin_stream()
        return
    with open_file(path, buffering) as stream:
        yield stream


def detect_format(buffer: Any, source: str, named: str | None = None) -> TranscriptFormat:
    """The format `named` (--format), else the one the buffer's first parseable lines give away,
    read one line at a time up to formats.SNIFF_LINES without reading the rest. Another agent's
    file is refused (formats.other_agents), unless `named` says how to read it."""
    if named:
        return get(named)
    refuse_other_agent(source, other_agents.examine_buffer(buffer))
    head_end = 0
    sample: list[Entry] = []
    for _ in range(SNIFF_LINES):
        next_end = buffer.find(b"\n", head_end)
        chunk = bytes(buffer[head_end : len(buffer) if next_end < 0 else next_end + 1])
        if not chunk:
            break
        sample += list(iter_entries([chunk], source, "skip"))
        if sample and claim(sample[-1].obj) is not None:
            break
        if next_end < 0:
            break
        head_end = next_end + 1
    return detect(sample, source)


@dataclass
class EntryStream:
    """Entries of one input, read lazily, with the format detected from its first lines."""

    source: str
    format: TranscriptFormat
    entries: Iterator[Entry]
    stats: ReadStats


def stream_entries(stream: BinaryIO, source: str, format_name: str | None, on_error: OnError) -> EntryStream:
    """The entries of an opened input, with its format: `format_name`, else the first line some format
    claims (detect_format's rule, for a stream: nothing is read beyond that line until asked)."""
    stats = ReadStats()
    if format_name:
        return EntryStream(source, get(format_name), iter_entries(stream, source, on_error, stats), stats)
    # Another agent's file is told by its raw first lines, before one is parsed (a pretty-printed
    # document would fail at its first line); they are read again as entries.
    lines = iter(stream)
    raw, found = other_agents.examine_lines(lines)
    refuse_other_agent(source, found)
    entries = iter_entries(itertools.chain(raw, lines), source, on_error, stats)
    # Read only until a line gives the format away, so `tail -f` pipes are not held up.
    head: list[Entry] = []
    for entry in entries:
        head.append(entry)
        if claim(entry.obj) is not None or len(head) >= SNIFF_LINES:
            break
    return EntryStream(source, detect(head, source), itertools.chain(head, entries), stats)


@contextlib.contextmanager
def mapped(path: Source, ranged: bool = False) -> Iterator[Any]:
    """The whole input as a bytes-like object: an mmap for a regular file, bytes for anything else.

    An object in a store is fetched whole, or with `ranged` (for a reader of its ends: count) is a
    storage.RangedObject that fetches only the blocks read (len, slices, find and rfind; no buffer
    protocol, see core/jsonl._sliced)."""
    if path is None or path == STDIN:
        yield read_all(stdin_stream(), STDIN)
        return
    name = str(path)
    if storage.is_remote(name):
        if not ranged:
            yield storage.read_whole(name)
            return
        remote = storage.RangedObject(name)
        yield remote
        remote.check_unchanged()  # blocks of two versions would make a wrong figure
        return
    name = storage.local_path(name)
    with open_file(name) as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
            yield read_all(handle, name)
            return
        try:
            buffer = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # a file system that cannot map (some FUSE ones)
            yield read_all(handle, name)
            return
        _MAPPED.append(_truncation_message(name))
        _arm_truncation_guard()
        try:
            yield buffer
        except BaseException:
            # Ctrl-C or an error: a view of the map may still be held by the traceback's frames,
            # and closing under it raises BufferError. The map goes when the last view does.
            with contextlib.suppress(BufferError):
                buffer.close()
            raise
        else:
            buffer.close()
        finally:
            _MAPPED.pop()


@contextlib.contextmanager
def view(buffer: Any, start: int = 0, stop: int | None = None) -> Iterator[memoryview]:
    """buffer[start:stop] without a copy, released when the block ends so the map can close (quietly
    when an exception, Ctrl-C included, leaves views of it in the traceback)."""
    part = memoryview(buffer)[start:stop]
    try:
        yield part
    except BaseException:
        with contextlib.suppress(BufferError):
            part.release()
        raise
    part.release()


# --- a file truncated while it is mapped ------------------------------------------------------
#
# Reading a page of a map past the file's new end raises SIGBUS; the faulting instruction runs
# again after any handler that returns, so Python's signal module (which only sets a flag) would
# loop forever. A C-level handler registered through ctypes runs Python code at once instead (the
# faulting thread holds the GIL, and PyGILState_Ensure accepts that): it writes one line and exits.
# Reading without a map would cost count its tail-first read of big files (it would read all of
# every file) and the memory to hold them.

_MAPPED: list[bytes] = []  # the message for each file mapped now, innermost last
_GUARD: dict[str, Any] = {}


def guard_truncation(message: Callable[[str], str], status: int) -> None:
    """From now on, a file truncated while it is mapped ends the process with `message(file)` on
    stderr and exit `status`, instead of a bare SIGBUS. For programs: it takes over SIGBUS for the
    whole process (armed on the first map, so a run that maps nothing pays nothing)."""
    _GUARD.update(message=message, status=status)


def _truncation_message(name: str) -> bytes:
    describe = _GUARD.get("message")
    return (describe(name) + "\n").encode("utf-8", "backslashreplace") if describe else b""


def _arm_truncation_guard() -> None:
    if "message" not in _GUARD or "handler" in _GUARD:
        return
    _GUARD["handler"] = None  # one attempt only
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None)
        install = libc.signal
        install.restype = ctypes.c_void_p
        install.argtypes = [ctypes.c_int, ctypes.c_void_p]
        handler = ctypes.CFUNCTYPE(None, ctypes.c_int)(_on_sigbus)
        _GUARD.update(handler=handler, install=install, signum=signal.SIGBUS)  # kept: the handler must outlive this call
        install(signal.SIGBUS, ctypes.cast(handler, ctypes.c_void_p))
    except (ImportError, AttributeError, OSError):  # no ctypes, no libc, no SIGBUS: the default stays
        pass


def _on_sigbus(signum: int) -> None:
    if not _MAPPED or not _MAPPED[-1]:  # not ours to explain: the default action runs when the fault repeats
        _GUARD["install"](_GUARD["signum"], None)
        return
    # The temporary files of a run that writes (ctxpipe.atomic, not loaded by a run that only reads).
    atomic = sys.modules.get(f"{__package__}.atomic")
    for name in list(getattr(atomic, "TEMPORARY", ())):
        with contextlib.suppress(OSError):
            os.unlink(name)
    os.write(2, _MAPPED[-1])
    os._exit(_GUARD["status"])
