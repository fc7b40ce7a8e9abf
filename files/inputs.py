"""The one way in: every command and the library read their inputs here, a path or stdin, whatever kind of file it is.

Two shapes of the same input: `opened` (a stream, read line by line: the stages, convert, validate,
the library) and `mapped` (the whole input as a buffer: count and the commands built on it). For
`mapped`, a regular file is memory-mapped (count reads only its end); anything else — stdin, a pipe,
a FIFO, `<(…)`, a character device, a file in /proc that claims 0 bytes — has no size to map, so it
is read whole. Missing, unreadable and folder inputs are bad input (InputError), never a traceback:
the mapping of OS errors to messages is `open_file` and the readers here, nowhere else. Every
stream is read through core.jsonl.bounded_lines, and a small file an option names through
`read_side_file`: nothing is read without a bound. `detect_format` tells a buffer's format from its
first lines, and `stream_entries` a stream's; both refuse another agent's file first
(formats.other_agents), before a line of it is parsed.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import mmap
import os
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from ..core.errors import CHANGED, IS_A_FOLDER, InputError
from ..core.jsonl import BINARY, BOM, EndlessLine, Entry, LineIndex, OnError, ReadStats, bounded_lines, iter_entries
from ..formats import DOCUMENT_HEAD, SNIFF_LINES, TranscriptFormat, claim, detect, document_lines, get, is_document, other_agents, refuse_other_agent
from . import storage

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
    try:
        return open(path, "rb", buffering=buffering)
    except FileNotFoundError:
        raise InputError(name, None, "no such file") from None
    except OSError as exc:
        # A folder fails with IsADirectoryError, or with another error (no permission to it): only
        # then is it looked at, so a file opened costs no stat.
        if isinstance(exc, IsADirectoryError) or os.path.isdir(path):
            reason = IS_A_FOLDER
        elif isinstance(exc, PermissionError):
            reason = "permission denied"
        else:
            reason = exc.strerror or str(exc)
        raise InputError(name, None, reason) from None


SIDE_FILE_LIMIT = 16 << 20  # a price table or a notes file: Claude Code's notes are some 12K tokens
IN_MEMORY_LIMIT = 64 << 20  # a stream read whole beyond this goes to a temporary file that is mapped
# A regular file up to this size is read, not mapped: the same bytes, without the map's guard against
# truncation (ctypes, about 2 ms of a small command's start) that a copy does not need.
READ_NOT_MAPPED = 1 << 20
# A reader of a file's ends (count) touches about half of a file of some hundred KiB: above this size
# it maps such a file (only what it reads is paged in) instead of copying all of it, once the guard
# is armed (as a batch of counts does first): a map cut short without it would end the process with a
# bare SIGBUS. Below it a copy costs less than the map's page faults (the bench's trees: 64-512 KiB tried).
ENDS_READ_NOT_MAPPED = 256 << 10


def read_side_file(path: str, what: str) -> bytes:
    """The whole of a small file an option names (`what` it should be), at most SIDE_FILE_LIMIT bytes:
    a device or a stream that goes on (/dev/zero) is refused once it passes that, not read on."""
    with open_file(path) as handle:
        try:
            data = handle.read(SIDE_FILE_LIMIT + 1)
        except OSError as exc:
            raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > SIDE_FILE_LIMIT:
        raise InputError(path, None, f"larger than {SIDE_FILE_LIMIT >> 20} MiB, more than {what} holds")
    return data


@contextlib.contextmanager
def read_whole(stream: BinaryIO, name: str, on_error: OnError = "fail") -> Iterator[Any]:
    """A stream with no size to map (stdin, a pipe, a device), read whole as the one bounded line
    reader reads it: a line too long or binary is refused as soon as it shows (`count /dev/zero` ends
    at once), or with on_error="skip" kept as a one-byte bad line the readers skip. Up to
    IN_MEMORY_LIMIT it is held as bytes; beyond, in a temporary file that is mapped, so a long stream
    costs disk, not memory."""
    held: list[bytes] = []
    size, number, spool = 0, 0, None
    binary_at: int | None = None  # the first short line holding a NUL byte
    try:
        try:
            for line in bounded_lines(stream):
                number += 1
                if isinstance(line, str):  # what is wrong with it
                    if on_error == "fail":
                        raise InputError(name, number, line)
                    line = b"\x00\n"  # the line keeps its number, and the reader that skips it says why
                elif binary_at is None and on_error == "fail" and b"\x00" in line:
                    binary_at = number
                if spool is None and size + len(line) > IN_MEMORY_LIMIT:
                    if binary_at is not None:
                        # Short lines of binary data (/dev/urandom has a newline every 256 bytes or so): a
                        # stream too long to hold is refused here, not spooled until the disk is full.
                        raise InputError(name, binary_at, BINARY)
                    import tempfile  # here: only a stream over IN_MEMORY_LIMIT needs it

                    spool = tempfile.TemporaryFile()  # already unlinked: nothing is left behind
                    spool.writelines(held)
                    held.clear()
                if spool is None:
                    held.append(line)
                else:
                    spool.write(line)
                size += len(line)
        except EndlessLine as exc:
            raise InputError(name, number, str(exc)) from None
        except OSError as exc:  # e.g. stdin redirected from a folder, or a device that fails
            raise InputError(name, None, f"cannot read: {exc.strerror or exc}") from None
        if spool is None:
            yield b"".join(held)
            return
        spool.flush()
        buffer = mmap.mmap(spool.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield buffer
        finally:
            with contextlib.suppress(BufferError):  # a view still held by a traceback: the map goes with it
                buffer.close()
    finally:
        if spool is not None:
            spool.close()


# What to do before reading a terminal's stdin: nothing for the library; the command line says how to
# end the input or give a file instead (cli/run.py sets it), since a command waiting on a terminal
# without a word looks hung.
_on_terminal_stdin: list[Callable[[], None]] = []


def when_stdin_is_a_terminal(notice: Callable[[], None]) -> None:
    """Call `notice` (once per run) before stdin is read from a terminal."""
    _on_terminal_stdin[:] = [notice]


def stdin_stream() -> BinaryIO:
    if sys.stdin is None:  # started with `<&-`
        raise InputError(STDIN, None, "stdin is closed")
    if _on_terminal_stdin and sys.stdin.isatty():
        _on_terminal_stdin.pop()()
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
    first = _first_object(buffer)
    if first is not None:
        # What nearly every input is: a JSONL file whose first line some format claims. Told from
        # that line alone, parsed once (examine_buffer and the sniff below make the same of it).
        refuse_other_agent(source, other_agents.examine_first(first))
        found = claim(first)
        if found is not None:
            return found
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


def _first_object(buffer: Any) -> dict[str, Any] | None:
    """The buffer's first line as an object, when it starts at the first byte with `{` and ends within
    the bytes examine_buffer looks at first; else None."""
    if buffer[:1] != b"{":
        return None
    end = buffer.find(b"\n", 0, other_agents.FIRST_LOOK)
    if end < 0:
        return None
    try:
        first = orjson.loads(bytes(buffer[:end]).rstrip(b"\r"))
    except orjson.JSONDecodeError:
        return None
    return first if isinstance(first, dict) else None


@dataclass
class EntryStream:
    """Entries of one input, read lazily, with the format detected from its first lines."""

    source: str
    format: TranscriptFormat
    entries: Iterator[Entry]
    stats: ReadStats


def stream_entries(stream: BinaryIO, source: str, format_name: str | None, on_error: OnError) -> EntryStream:
    """The entries of an opened input, with its format: `format_name`, else the first line some format
    claims (detect_format's rule, for a stream: nothing is read beyond that line until asked). A
    document a format reads (a Gemini CLI .json chat) is read whole, as the JSONL it stands for."""
    stats = ReadStats()
    lines = bounded_lines(stream)
    if format_name:
        first = next(lines, None)
        raw: list[bytes | str] = [] if first is None else [first]
        if isinstance(first, bytes) and first.removeprefix(BOM).strip() == b"{":  # perhaps a document: its head tells
            size = len(first)
            for line in lines:
                raw.append(line)
                size += len(line)
                if size >= DOCUMENT_HEAD or not isinstance(line, bytes):
                    break
            converted = _document_of(raw, lines, source)
            if converted is not None:
                return stream_entries(io.BytesIO(converted), source, format_name, on_error)
        return EntryStream(source, get(format_name), iter_entries(itertools.chain(raw, lines), source, on_error, stats), stats)
    # Another agent's file is told by its raw first lines, before one is parsed (a pretty-printed
    # document would fail at its first line); they are read again as entries.
    raw, found = other_agents.examine_lines(lines)
    converted = _document_of(raw, lines, source)
    if converted is not None:
        return stream_entries(io.BytesIO(converted), source, format_name, on_error)
    refuse_other_agent(source, found)
    entries = iter_entries(itertools.chain(raw, lines), source, on_error, stats)
    # Read only until a line gives the format away, so `tail -f` pipes are not held up.
    head: list[Entry] = []
    for entry in entries:
        head.append(entry)
        if claim(entry.obj) is not None or len(head) >= SNIFF_LINES:
            break
    return EntryStream(source, detect(head, source), itertools.chain(head, entries), stats)


# A regular file larger than this is read in place by held_entries: below it, the list is small.
HELD_IN_PLACE_FROM = 64 << 10


@contextlib.contextmanager
def held_entries(path: Source, read: EntryStream, on_error: OnError) -> Iterator[tuple[Sequence[Entry], ReadStats]]:
    """Every entry of an input whose first lines `read` has begun, for a reader that goes back and
    forth over them (a conversion of the active context): a regular file over HELD_IN_PLACE_FROM
    is read in place, a core.jsonl.LineIndex over its map (a line parsed again where it is read, a
    few MB of them kept), so memory holds the map and the index, not every line's objects (about
    3.5 times the file); anything else is the rest of `read`, in a list."""
    local = None if path is None or path == STDIN or storage.is_remote(str(path)) else storage.local_path(str(path))
    if local is None or not is_regular(local) or os.path.getsize(local) <= HELD_IN_PLACE_FROM:
        yield list(read.entries), read.stats
        return
    with mapped(path, on_error=on_error) as buffer:
        stats = ReadStats()
        yield LineIndex(buffer, read.source, on_error, stats, cached=LineIndex.CACHED, folds=read.format.line_folds), stats


def _document_of(raw: list[bytes | str], lines: Iterator[bytes | str], source: str) -> bytes | None:
    """When the stream's first lines `raw` start a document a format reads: the whole stream (the rest
    is `lines`) as the JSONL it stands for (formats.document_lines); else None, nothing more read."""
    if not is_document(b"".join(line for line in raw[:64] if isinstance(line, bytes))[:DOCUMENT_HEAD]):
        return None
    whole: list[bytes] = []
    for number, line in enumerate(itertools.chain(raw, lines), 1):
        if not isinstance(line, bytes):  # what is wrong with a line too long or binary to hold
            raise InputError(source, number, line)
        whole.append(line)
    return document_lines(b"".join(whole), source)


@contextlib.contextmanager
def mapped(path: Source, ranged: bool = False, on_error: OnError = "fail") -> Iterator[Any]:
    """The whole input as a bytes-like object: an mmap for a regular file, else what read_whole
    makes of the stream (`on_error` says what it does with a line no reader can hold). A document a
    format reads (a Gemini CLI .json chat) comes as the JSONL it stands for (formats.document_lines),
    each line where it starts in the file.

    An object in a store is fetched whole, or with `ranged` (for a reader of its ends: count) is a
    storage.RangedObject that fetches only the blocks read (len, slices, find and rfind; no buffer
    protocol, see core/jsonl._sliced)."""
    with _mapped(path, ranged, on_error) as buffer:
        yield as_lines(buffer, source_name(path))


def as_lines(buffer: Any, source: str) -> Any:
    """`buffer`, or the JSONL a document in it stands for (formats.document_lines). Every input is
    asked, from its first bytes only: a JSONL file's first line tells at once."""
    if not is_document(bytes(buffer[:DOCUMENT_HEAD])):
        return buffer
    converted = document_lines(bytes(buffer[: len(buffer)]), source)
    return buffer if converted is None else converted


@contextlib.contextmanager
def _mapped(path: Source, ranged: bool, on_error: OnError) -> Iterator[Any]:
    if path is None or path == STDIN:
        with read_whole(stdin_stream(), STDIN, on_error) as buffer:
            yield buffer
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
    with open_file(name) as handle:
        info = os.fstat(handle.fileno())
        if stat.S_ISREG(info.st_mode) and 0 < info.st_size <= (ENDS_READ_NOT_MAPPED if ranged and _GUARD.get("handler") else READ_NOT_MAPPED):
            try:
                whole = handle.read(info.st_size)
            except OSError as exc:
                raise InputError(name, None, f"cannot read: {exc.strerror or exc}") from None
            yield whole
            return
        buffer = _map(handle) if stat.S_ISREG(info.st_mode) and info.st_size else None
        if buffer is None:  # a stream, or a file system that cannot map (some FUSE ones)
            with read_whole(handle, name, on_error) as whole:
                yield whole
            return
        _MAPPED.append(_truncation_message(name))
        arm_truncation_guard()
        try:
            yield buffer
        except BaseException as exc:
            # Ctrl-C or an error: a view of the map may still be held by the traceback's frames,
            # and closing under it raises BufferError. The map goes when the last view does.
            with contextlib.suppress(BufferError):
                buffer.close()
            if isinstance(exc, InputError) and _shrunk(handle, info.st_size):
                # Cut short under the map: its last page reads as zeros past the new end (pages
                # beyond it fault, see _on_sigbus), which a reader took for a bad line.
                raise InputError(name, None, CHANGED) from None
            raise
        else:
            buffer.close()
        finally:
            _MAPPED.pop()


def _shrunk(handle: BinaryIO, mapped_size: int) -> bool:
    """Whether the file behind `handle` is now shorter than when it was mapped."""
    try:
        return os.fstat(handle.fileno()).st_size < mapped_size
    except OSError:
        return False


class MappedFile(mmap.mmap):
    """A file's map, knowing where the hole that ends it starts (core.jsonl.zero_tail)."""

    zero_tail: int


def _map(handle: BinaryIO) -> MappedFile | None:
    try:
        buffer = MappedFile(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    buffer.zero_tail = trailing_hole(handle.fileno(), len(buffer))
    return buffer


def trailing_hole(descriptor: int, size: int) -> int:
    """Where the hole that ends a file starts, or `size` when its last byte was written. A file a crash
    left zero-filled, or a sparse one, reads as a run of NULs there; the file system tells holes apart
    (SEEK_DATA) without reading them, so no reader pages in a gigabyte of zeros to find a newline."""
    seek_data, seek_hole = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None or size == 0:
        return size
    try:
        os.lseek(descriptor, size - 1, seek_data)
        return size  # data at the last byte (or a file system that reports no holes)
    except OSError:
        pass
    low, high = 0, size - 1  # the last position with data at or after it is in [low, high)
    try:
        os.lseek(descriptor, 0, seek_data)
    except OSError:
        return 0  # all of it is a hole
    try:
        while high - low > 1:
            middle = (low + high) // 2
            try:
                os.lseek(descriptor, middle, seek_data)
                low = middle
            except OSError:
                high = middle
        return max(os.lseek(descriptor, low, seek_hole), low + 1)
    except OSError:
        return size
    finally:
        os.lseek(descriptor, 0, os.SEEK_SET)


class Spliced:
    """The bytes a stage writes — the input's first `head` bytes, then `tail` — read in place, never
    joined: what count_buffer's readers use of a buffer (len, slices, find and rfind, the way they read
    a storage.RangedObject), so the output is counted as `count` will count it, without a copy of the
    head (which may be most of a gigabyte)."""

    def __init__(self, base: Any, head: int, tail: bytes) -> None:
        self.base, self.head, self.tail = base, head, tail

    def __len__(self) -> int:
        return self.head + len(self.tail)

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, slice):
            position = range(len(self))[index]  # IndexError past either end, as bytes raises it
            return self.base[position] if position < self.head else self.tail[position - self.head]
        start, stop, step = index.indices(len(self))
        if step != 1:
            raise ValueError("Spliced slices are contiguous")
        stop = max(start, stop)
        left = bytes(self.base[start : min(stop, self.head)]) if start < self.head else b""
        right = self.tail[max(start - self.head, 0) : stop - self.head] if stop > self.head else b""
        return left + right if left and right else left or right

    def _bounds(self, start: int | None, end: int | None) -> tuple[int, int]:
        return slice(start, end).indices(len(self))[:2]

    def find(self, sub: bytes, start: int | None = None, end: int | None = None) -> int:
        start, end = self._bounds(start, end)
        if start < self.head:
            found = int(self.base.find(sub, start, min(end, self.head)))
            if found >= 0:
                return found
        across = self._across(sub, start, end, last=False)
        if across >= 0:
            return across
        if end <= self.head:
            return -1
        found = self.tail.find(sub, max(start - self.head, 0), end - self.head)
        return found + self.head if found >= 0 else -1

    def rfind(self, sub: bytes, start: int | None = None, end: int | None = None) -> int:
        start, end = self._bounds(start, end)
        if end > self.head:
            found = self.tail.rfind(sub, max(start - self.head, 0), end - self.head)
            if found >= 0:
                return found + self.head
        across = self._across(sub, start, end, last=True)
        if across >= 0:
            return across
        if start >= self.head:
            return -1
        return int(self.base.rfind(sub, start, min(end, self.head)))

    def _across(self, sub: bytes, start: int, end: int, last: bool) -> int:
        """The first (`last`: the last) place in [start, end) where `sub` spans the join. The window
        searched is the len(sub) - 1 bytes on either side: no match fits in one side of it alone."""
        if len(sub) < 2 or not start < self.head < end:
            return -1
        low = max(start, self.head - len(sub) + 1)
        window = self[low : min(end, self.head + len(sub) - 1)]
        found = window.rfind(sub) if last else window.find(sub)
        return low + found if found >= 0 else -1


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


def arm_truncation_guard() -> None:
    """Armed on the first map; armed sooner by a caller about to read the ends of many files (then
    those above ENDS_READ_NOT_MAPPED are mapped, not copied whole; processes forked after have it too).
    Nothing without guard_truncation first."""
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
    # The temporary files of a run that writes (ctxpipe.files.atomic, not loaded by a run that only reads).
    atomic = sys.modules.get(f"{__package__}.atomic")
    for name in list(getattr(atomic, "TEMPORARY", ())):
        with contextlib.suppress(OSError):
            os.unlink(name)
    os.write(2, _MAPPED[-1])
    os._exit(_GUARD["status"])
