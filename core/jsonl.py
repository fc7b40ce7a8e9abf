"""Line-exact JSONL reading and writing.

Every entry keeps the bytes it came with, so a stage that leaves an entry alone writes it back
byte-identical. Lines are split on b"\\n" only: JSON strings may legally hold U+2028/U+2029,
which str.splitlines() would break on.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import re
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import repeat
from typing import Any, BinaryIO, Literal, TypeVar, overload

import orjson

from .errors import CHANGED, InputError, SettingsError
from .fields import MAX_DEPTH, depth_headroom, moment, read_blocks
from .folds import Fold

OnError = Literal["fail", "skip"]
ON_ERRORS: tuple[OnError, ...] = ("fail", "skip")


def check_on_error(value: object) -> None:
    """SettingsError for an on_error that is neither: a library caller's typo is not taken for "skip"."""
    if value not in ON_ERRORS:
        raise SettingsError("on_error", f"{value!r} is not one of {', '.join(ON_ERRORS)}")


BOM = b"\xef\xbb\xbf"


class Entry:
    """One JSONL line: its parsed object plus the exact bytes it was read from.

    `raw` is None for an entry a stage built or changed; it is then serialised with orjson,
    which reproduces Claude Code's own compact encoding.
    """

    __slots__ = ("line", "obj", "raw", "eol", "_blocks", "_refs")

    def __init__(self, obj: dict[str, Any], raw: bytes | None = None, line: int = 0, eol: bytes = b"\n") -> None:
        self.obj = obj
        self.raw = raw
        self.line = line
        self.eol = eol
        self._blocks: tuple[Any, list[int], list[dict[str, Any]]] | None = None
        self._refs: tuple[int, list[tuple[int, int]]] | None = None

    def blocks(self, content: Any, position: int) -> tuple[list[tuple[int, int]], list[dict[str, Any]]]:
        """The readable blocks of this line's message content (read_blocks) and where each is, as
        (position, index in the content) for a line read at `position`: walked once however many
        times messages are built from the line (a count builds them more than once, a line may hold
        a hundred thousand blocks). The lists are the caller's own; the blocks are the line's."""
        known = self._blocks
        if known is None or known[0] is not content:  # a line's objects are never changed in place: the same content reads the same
            known = self._blocks = (content, *read_blocks(content))
            self._refs = None
        refs = self._refs
        if refs is None or refs[0] != position:
            refs = self._refs = (position, list(zip(repeat(position), known[1])))
        return list(refs[1]), list(known[2])

    @property
    def changed(self) -> bool:
        return self.raw is None

    def encode(self) -> bytes:
        """The line's bytes without its terminator."""
        if self.raw is None:
            self.raw = dumps(self.obj)
        return self.raw

    def replace(self, obj: dict[str, Any]) -> Entry:
        """A changed copy at the same position (the caller hands in a new object, not a mutated one)."""
        return Entry(obj, None, self.line, b"\r\n" if self.eol == b"\r\n" else b"\n")

    def __repr__(self) -> str:
        return f"Entry(line={self.line}, type={self.obj.get('type')!r}, changed={self.changed})"


@dataclass
class ReadStats:
    """What a read had to leave out under --on-error=skip."""

    skipped: int = 0
    problems: list[tuple[int, str]] = field(default_factory=list)  # (line, what was wrong)


TRUNCATED = (
    "truncated last line: the file ends in the middle of a JSON object (it was probably cut off while the agent was writing it; --on-error=skip drops it)"
)


def _describe_bad_line(raw: bytes, is_last_unterminated: bool, error: orjson.JSONDecodeError) -> str:
    if b"\x00" in raw:
        return BINARY
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A file cut off at an arbitrary byte often ends inside a multi-byte character.
        if is_last_unterminated and exc.reason == "unexpected end of data":
            return TRUNCATED
        return f"invalid UTF-8 at byte {exc.start + 1} of the line"
    if error.msg.startswith("depth limit"):
        return TOO_DEEP
    if is_last_unterminated:
        return TRUNCATED
    return f"invalid JSON: {error.msg} (column {error.colno})"


TOO_DEEP = f"a JSON value nested deeper than {MAX_DEPTH} levels (the most a line may hold)"

# The longest line any reader takes. Claude Code's longest lines are a few MB (its requests are at most
# 32 MB), so a longer one is not a transcript's; without a bound, a device such as /dev/zero or a
# stream without newlines would be read into memory until it ran out.
MAX_LINE_BYTES = 256 << 20
LINE_PIECE = 1 << 20  # a long line is read in pieces this size, so a binary one is refused at its first
TOO_LONG = f"a line longer than {MAX_LINE_BYTES >> 20} MiB, the most a line may hold (Claude Code's longest are a few MB)"
BINARY = "binary data, not a JSONL transcript (the line contains NUL bytes)"
ENDLESS = f"a line longer than {2 * MAX_LINE_BYTES >> 20} MiB and not yet ended: not a transcript (a device such as /dev/zero never ends)"


class NonFiniteNumber(ValueError):
    """A number no double holds (1e400): read, it would be infinity, and written back `Infinity`,
    which is not JSON (orjson refuses it as it reads; so does this reader)."""


NON_FINITE = "invalid JSON: number is infinity when parsed as double"


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NonFiniteNumber(f"{NON_FINITE} ({text[:40]})")
    return value


def loads_with_lone_surrogates(raw: bytes) -> Any:
    """A JSON text orjson refused for a lone surrogate escape: JavaScript writes a string cut inside an
    emoji as one ("\\ud83d"); that is legal JSON, which the standard library reads. What orjson also
    refuses stays refused (ValueError): invalid UTF-8, NaN and Infinity, and numbers beyond a double."""
    # Decoded strictly first: the standard library would read raw surrogate bytes (invalid UTF-8) as text.
    return json.loads(raw.decode("utf-8"), parse_constant=_not_json, parse_float=_finite)


LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(value: Any, sort_keys: bool = False) -> bytes:
    """Compact JSON of any value a line parsed to, as orjson (and Claude Code) writes it.

    orjson refuses what a parsed line may still hold: nesting deeper than 254 levels, integers
    beyond 64 bits and lone surrogates (both from lines the standard library read); those go
    through the standard library, given the stack a value nested MAX_DEPTH levels needs.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else None)
    except orjson.JSONEncodeError:
        with depth_headroom():
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys)
        return LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text).encode()


def as_text(value: Any) -> str:
    """A string as it is, any other value a line parsed to as its JSON (str() would recurse
    through a deeply nested one)."""
    return value if isinstance(value, str) else dumps(value).decode()


def _kind_of(value: object) -> str:
    return {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(type(value), "null")


class _BadLine(str):
    """What is wrong with a line (a str, so it cannot be mistaken for a parsed object)."""


# A blank line, told apart from a line that is JSON `null` (a bad line).
_BLANK: Any = object()


def _parse_slowly(raw: bytes, is_last_unterminated: bool, error: orjson.JSONDecodeError) -> Any:
    """The parsed line after orjson refused it, _BLANK for a blank line, or a _BadLine."""
    if not raw.strip():
        return _BLANK
    if "surrogate" in error.msg:
        try:
            return loads_with_lone_surrogates(raw)
        except RecursionError:
            return _BadLine(TOO_DEEP)
        except NonFiniteNumber as exc:
            return _BadLine(str(exc))
        except ValueError:
            pass
    return _BadLine(_describe_bad_line(raw, is_last_unterminated, error))


def _bad_line(source: str, line: int, parsed: Any, on_error: OnError, stats: ReadStats | None) -> None:
    what = str(parsed) if isinstance(parsed, _BadLine) else f"expected a JSON object, found {_kind_of(parsed)}"
    if on_error == "fail":
        raise InputError(source, line, what)
    if stats is not None:
        stats.skipped += 1
        stats.problems.append((line, what))


class EndlessLine(Exception):
    """A line that went on past twice MAX_LINE_BYTES while being skipped: no end is coming."""


def _ends_line(piece: bytes) -> bool:
    """Whether a piece readline(LINE_PIECE) gave ends its line: at a newline, or short (the stream's end)."""
    return len(piece) < LINE_PIECE or piece.endswith(b"\n")


def bounded_lines(stream: BinaryIO) -> Iterator[bytes | _BadLine]:
    """The lines of a stream, each with its terminator, as iterating it gives them, except that a
    line longer than MAX_LINE_BYTES, or a long line holding a NUL byte, comes as the _BadLine
    saying so, as soon as that is known, and the rest of it is read and dropped (not held) when
    the reader asks for the next line. Memory stays within MAX_LINE_BYTES whatever the stream."""
    readline = stream.readline
    while True:
        line = readline(LINE_PIECE)
        if _ends_line(line):
            if not line:
                return
            yield line
            continue
        pieces, size, bad = [line], len(line), BINARY if b"\x00" in line else None
        while bad is None:
            piece = readline(LINE_PIECE)
            pieces.append(piece)
            size += len(piece)
            if size > MAX_LINE_BYTES:
                bad = TOO_LONG
            elif b"\x00" in piece:
                bad = BINARY
            elif _ends_line(piece):
                break
        if bad is None:
            yield b"".join(pieces)
            continue
        ended = _ends_line(pieces[-1])
        del pieces
        yield _BadLine(bad)
        while not ended:  # the reader skips bad lines: drop the rest of this one
            piece = readline(LINE_PIECE)
            size += len(piece)
            ended = _ends_line(piece)
            if not ended and size > 2 * MAX_LINE_BYTES:
                raise EndlessLine(ENDLESS)


def iter_entries(
    stream: BinaryIO | Iterable[bytes | str],
    source: str,
    on_error: OnError = "fail",
    stats: ReadStats | None = None,
) -> Iterator[Entry]:
    """Parse a binary line stream into entries, raising InputError at the first bad line.

    Accepted: a UTF-8 BOM (dropped), CRLF endings (the CR is kept in `eol` so untouched lines are
    written back as they came), blank lines (skipped), lines up to MAX_LINE_BYTES. A stream is read
    through bounded_lines, so no line longer than that is ever held.
    """
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    number = 0
    # Lines already split may come from bounded_lines too: a str among them says what is wrong with a line.
    lines: Iterable[bytes | str] = bounded_lines(stream) if hasattr(stream, "readline") else stream  # type: ignore[arg-type]
    try:
        for chunk in lines:
            number += 1
            if isinstance(chunk, str):
                _bad_line(source, number, _BadLine(chunk), on_error, stats)
                continue
            if number == 1 and chunk.startswith(BOM):
                chunk = chunk[3:]
            if chunk.endswith(b"\n"):
                if chunk.endswith(b"\r\n"):
                    raw, eol = chunk[:-2], b"\r\n"
                else:
                    raw, eol = chunk[:-1], b"\n"
            else:
                raw, eol = chunk, b""
            try:
                obj = loads(raw)
            except decode_error as exc:
                obj = _parse_slowly(raw, eol == b"", exc)
                if obj is _BLANK:
                    continue
            if type(obj) is dict:
                yield Entry(obj, raw, number, eol)
            else:
                _bad_line(source, number, obj, on_error, stats)
    except EndlessLine as exc:
        raise InputError(source, number, str(exc)) from None


def write_entries(entries: Iterable[Entry], out: BinaryIO, flush_each: bool = False) -> None:
    """Write entries as JSONL; an unterminated last input line gets a newline only if more follows.

    flush_each pushes every line out at once (for `tail -f … | ctxpipe … -u`), at some cost.
    """
    write = out.write
    pending_newline = False
    for entry in entries:
        if pending_newline:
            write(b"\n")
        raw = entry.raw if entry.raw is not None else entry.encode()
        eol = entry.eol
        write(raw + eol if eol else raw)
        pending_newline = not eol
        if flush_each:
            out.flush()


def _sliced(buffer: Any) -> contextlib.AbstractContextManager[Any]:
    """Something to slice `buffer` with, without copies where it can: a memoryview of bytes or an
    mmap; the buffer itself for one that fetches what is sliced (storage.RangedObject)."""
    try:
        return memoryview(buffer)
    except TypeError:
        return contextlib.nullcontext(buffer)


def _release(part: Any) -> None:
    if isinstance(part, memoryview):
        part.release()


def _long_line_problem(buffer: Any, start: int, end: int) -> _BadLine | None:
    """What is wrong with a line of more than LINE_PIECE bytes, told in place (orjson copies a view
    it is given): binary, or longer than any reader takes; None when it is to be parsed."""
    if _has_nul(buffer, start, end):
        return _BadLine(BINARY)
    return _BadLine(TOO_LONG) if end - start > MAX_LINE_BYTES else None


def _has_nul(buffer: Any, start: int, end: int) -> bool:
    """Whether buffer[start:end] holds a NUL byte, found in place: a crash-zeroed tail of hundreds of
    megabytes is told binary without copying it."""
    return bool(buffer.find(b"\x00", start, end) >= 0)


def line_number(buffer: Any, offset: int, chunk: int = 1 << 24) -> int:
    """The 1-based number of the line that starts at byte `offset` (counts the newlines before it)."""
    count = 0
    for position in range(0, offset, chunk):
        count += bytes(buffer[position : min(offset, position + chunk)]).count(b"\n")
    return count + 1


def iter_lines_reversed(buffer: Any, stop: int | None = None) -> Iterator[tuple[int, int, bytes]]:
    """(start, content end, eol) of each line of a bytes-like buffer, from the last to the first;
    with `stop` (where a line starts), of the lines before it."""
    if stop == 0:
        return
    size = len(buffer) if stop is None else stop
    terminated = size > 0 and buffer[size - 1 : size] == b"\n"
    line_end = size - 1 if terminated else size
    searched_end = min(line_end, zero_tail(buffer))  # a hole holds no newline: it is not searched
    while True:
        start = buffer.rfind(b"\n", 0, searched_end) + 1
        if terminated and line_end > start and buffer[line_end - 1 : line_end] == b"\r":
            yield start, line_end - 1, b"\r\n"
        else:
            yield start, line_end, b"\n" if terminated else b""
        if start == 0:
            return
        line_end, terminated = start - 1, True
        searched_end = line_end


def zero_tail(buffer: Any) -> int:
    """Where the hole that ends a mapped file starts (inputs.MappedFile: bytes never written, read as
    NULs, such as a crash leaves), or the buffer's length: no reader scans a hole for newlines."""
    return int(getattr(buffer, "zero_tail", len(buffer)))


# A reader that needs no image's data (a count: an image costs a flat estimate, whatever it holds) may
# have a long line parsed without it (iter_entries_reversed's `skim`). A pasted screenshot is a line
# of megabytes of base64, most of the bytes a count of a session's end would parse otherwise.
SKIM_FROM = 32 << 10  # bytes: a line this long may hold data worth leaving out
SKIM_LOOK = 8 << 10  # bytes looked through for a source: from the line's start, and after each one left out
SKIM_DATA_FROM = 1 << 10  # bytes: shorter data is parsed
LEFT_OUT = "\x00"  # what data left out reads as (a line that holds it anywhere is parsed whole)
_LEFT_OUT_JSON = b"\\u0000"
# A base64 source as Claude Code and the Messages API write it, up to where its data starts. Matched
# in the bytes, its quotes are structure (inside a string a quote is escaped), so what follows is that
# source's data, a string that ends at the next quote when it holds no backslash.
_BASE64_SOURCE = re.compile(rb'\{"type":"base64","media_type":"[\w.+/-]{1,100}","data":"')


def _skimmed(buffer: Any, begin: int, end: int, left_out_in: Callable[[dict[str, Any]], int]) -> dict[str, Any] | None:
    """The object of the line buffer[begin:end] with the data of its base64 sources left out
    (LEFT_OUT in its place), when `left_out_in` finds each one where no reader needs it; else None
    (none left out, or one may be needed: the line is parsed whole). The data is not checked: like
    the lines above a session's active context, what a count does not read it does not validate."""
    pieces: list[bytes] = []
    kept_from = look = begin
    left_out = 0
    while found := _BASE64_SOURCE.search(buffer[look : min(end, look + SKIM_LOOK)]):
        data = look + found.end()
        close = buffer.find(b'"', data, end)
        if close < 0:
            break
        look = data
        if close - data >= SKIM_DATA_FROM and buffer[close + 1 : close + 2] == b"}" and buffer.find(b"\\", data, close) < 0:
            kept = buffer[kept_from:data]
            if _LEFT_OUT_JSON in kept:
                return None
            pieces += (kept, _LEFT_OUT_JSON)
            kept_from = look = close
            left_out += 1
    if not left_out:
        return None
    rest = buffer[kept_from:end]
    if _LEFT_OUT_JSON in rest:
        return None
    try:
        obj = orjson.loads(b"".join((*pieces, rest)))
    except orjson.JSONDecodeError:
        return None
    return obj if type(obj) is dict and left_out_in(obj) == left_out else None


# Lines of a buffer parsed once, for another read of it: where the line starts -> its object (each
# reader finds the same line end from there). Shared only between reads that change no object in place.
ParsedLines = dict[int, dict[str, Any]]


def iter_entries_reversed(
    buffer: Any,
    source: str,
    on_error: OnError = "fail",
    stats: ReadStats | None = None,
    keep_raw: bool = False,
    stop: int | None = None,
    skim: Callable[[dict[str, Any]], int] | None = None,
) -> Iterator[tuple[int, Entry]]:
    """(byte offset, entry) from the last line of a buffer (an mmap) back to the first; with
    `stop` (where a line starts), from the line before it.

    For readers that need only the end of a file: nothing before the point where they stop is
    parsed or copied. Entries carry line 0 and, unless keep_raw, no raw bytes; a bad line is
    located on demand. `skim` (without keep_raw): a long line's base64 sources are read without
    their data (_skimmed) when this counts as many of them, in an object, where no reader needs it.
    """
    loads = orjson.loads
    with _sliced(buffer) as view:
        for start, content_end, eol in iter_lines_reversed(buffer, stop):
            if content_end - start > LINE_PIECE and (too_long := _long_line_problem(buffer, start, content_end)):
                _bad_line(source, line_number(buffer, start), too_long, on_error, stats)
                continue
            begin = start + 3 if start == 0 and view[:3] == BOM else start
            if skim is not None and not keep_raw and content_end - begin >= SKIM_FROM and (skimmed := _skimmed(buffer, begin, content_end, skim)) is not None:
                yield start, Entry(skimmed, None, 0, eol)
                continue
            raw = view[begin:content_end]
            try:
                obj = loads(raw)
            except orjson.JSONDecodeError as exc:
                obj = _parse_slowly(bytes(raw), eol == b"", exc)
            kept = bytes(raw) if keep_raw and type(obj) is dict else None
            _release(raw)  # no view may outlive the loop: the caller closes the mmap behind it
            if obj is _BLANK:
                continue
            if type(obj) is dict:
                yield start, Entry(obj, kept, 0, eol)
            else:
                _bad_line(source, line_number(buffer, start), obj, on_error, stats)


def iter_buffer_entries(
    buffer: Any, source: str, on_error: OnError = "fail", stats: ReadStats | None = None, parsed: ParsedLines | None = None
) -> Iterator[Entry]:
    """Entries of a whole bytes-like buffer (an mmap), numbered, without copying their bytes.
    `parsed`: objects of lines another read parsed already, taken as they are; those parsed here are added.

    For reports that read everything but write nothing: entries keep no raw bytes.
    """
    for *_, entry in iter_buffer_spans(buffer, source, on_error, stats, parsed=parsed):
        yield entry


def iter_buffer_spans(
    buffer: Any, source: str, on_error: OnError = "fail", stats: ReadStats | None = None, stop: int | None = None, parsed: ParsedLines | None = None
) -> Iterator[tuple[int, int, int, Entry]]:
    """(start, content end, line number, entry without raw bytes) of each line of buffer[:stop], as
    iter_buffer_entries reads them: where each entry's bytes are, so a reader can parse it again
    (LineIndex) instead of keeping it."""
    loads = orjson.loads
    size = len(buffer) if stop is None else stop
    searched_end = min(size, zero_tail(buffer))
    start = 3 if buffer[:3] == BOM and size >= 3 else 0
    number = 0
    with _sliced(buffer) as view:
        while start < size:
            number += 1
            newline = buffer.find(b"\n", start, searched_end)
            end = size if newline < 0 else newline
            content_end, eol = (end - 1, b"\r\n") if newline >= 0 and end > start and buffer[end - 1 : end] == b"\r" else (end, b"" if newline < 0 else b"\n")
            if content_end - start > LINE_PIECE and (too_long := _long_line_problem(buffer, start, content_end)):
                start = end + 1
                _bad_line(source, number, too_long, on_error, stats)
                continue
            line_start, start = start, end + 1
            obj = parsed.get(line_start) if parsed else None  # (a line after a BOM starts at 0 there: parsed again)
            if obj is None:
                raw = view[line_start:content_end]
                try:
                    obj = loads(raw)
                except orjson.JSONDecodeError as exc:
                    obj = _parse_slowly(bytes(raw), eol == b"", exc)
                _release(raw)  # no view may outlive the loop: the caller closes the mmap behind it
                if parsed is not None and type(obj) is dict:
                    parsed[line_start] = obj
            if obj is _BLANK:
                continue
            if type(obj) is dict:
                yield line_start, content_end, number, Entry(obj, None, number, eol)
            else:
                _bad_line(source, number, obj, on_error, stats)


# --- entries read in place ---------------------------------------------------------------------
#
# A transcript may be most of a gigabyte, and parsed whole it takes several times that. `count
# --full` reads every line, and restore reads all of the history above the active context (a uuid's
# latest line, the last permission mode, the latest time) but keeps only the chain it restores from:
# a LineIndex gives them every line by position, parsed when asked for, holding no more than each
# line's place in the file.


_EOLS = (b"\n", b"\r\n", b"")


class LineIndex(Sequence[Entry]):
    """The entries of buffer[:stop] (an mmap; the whole buffer by default) as iter_buffer_entries
    reads them (numbered, blank lines left out, bad lines reported through `on_error` and `stats`
    once, when it is built), each parsed again from the buffer when it is read: the memory is where
    each line lies (about 25 bytes a line), not its objects. The last lines read by position are
    kept, up to `cached` bytes of them (restore's walk back and forth over a chain reads the same
    lines again: it keeps CACHED; `count --full` reads each line where it needs it and keeps none).
    The last LONG_KEPT long lines parsed (LONG_LINE bytes or more each) are kept whatever `cached`
    says: readers come back to a few lines many times (the response a count anchors on, a line of a
    hundred thousand blocks), parsing a long one costs milliseconds, and keeping them adds a few
    lines' objects to a peak that parsing one of them reached anyway. A slice is a view; `memo`
    keeps whole-file scans several readers repeat (see memoized), and `folds` are folded over the
    lines as they are parsed to be checked (see folded). With `raw`, each entry carries its bytes,
    as iter_entries gives them."""

    CACHED = 8 << 20
    LONG_LINE = LINE_PIECE
    LONG_KEPT = 4

    def __init__(
        self,
        buffer: Any,
        source: str,
        on_error: OnError = "fail",
        stats: ReadStats | None = None,
        stop: int | None = None,
        raw: bool = False,
        cached: int = 0,
        folds: Sequence[Fold[Any]] = (),
    ) -> None:
        self.buffer, self.source, self.stop, self.raw, self.cached = buffer, source, len(buffer) if stop is None else stop, raw, cached
        self._starts, self._ends, self._lines = array("q"), array("q"), array("q")
        self._eols = bytearray()
        states = [fold.start() for fold in folds]
        # A fold over prefixes: the positions where its state changed, and the state from each on.
        self._changes: dict[str, tuple[array[int], list[Any]]] = {fold.key: (array("q"), []) for fold in folds if fold.prefixes}
        changes = [self._changes.get(fold.key) for fold in folds]
        for start, content_end, number, entry in iter_buffer_spans(buffer, source, on_error, stats, stop):
            position = len(self._starts)
            self._starts.append(start)
            self._ends.append(content_end)
            self._lines.append(number)
            self._eols.append(_EOLS.index(entry.eol))
            for which, fold in enumerate(folds):
                state = fold.step(states[which], entry)
                kept = changes[which]
                if kept is not None and state is not states[which]:
                    kept[0].append(position)
                    kept[1].append(state)
                states[which] = state
        self._positions = range(len(self._starts))
        self._cache: OrderedDict[int, Entry] = OrderedDict()
        self._cached_bytes = 0  # of the lines in the cache
        self._long: OrderedDict[int, Entry] = OrderedDict()  # the last long lines parsed, the latest last
        self.memo: dict[str, Any] = {fold.key: state for fold, state in zip(folds, states)}

    def verbatim(self) -> bool:
        """Whether the entries, written back, are buffer[:stop] itself: no BOM, blank or bad line."""
        stop = self.stop
        return self.buffer[:3] != BOM and (stop == 0 or self.buffer[stop - 1 : stop] == b"\n") and line_number(self.buffer, stop) - 1 == len(self._starts)

    def __len__(self) -> int:
        return len(self._positions)

    def _entry(self, position: int) -> Entry:
        long = self._long.get(position)
        if long is not None:
            self._long.move_to_end(position)
            return long
        start, end = self._starts[position], self._ends[position]
        raw, eol = bytes(self.buffer[start:end]), _EOLS[self._eols[position]]
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            obj = _parse_slowly(raw, eol == b"", exc)  # read once already: a dict, or it would not be here
            if type(obj) is not dict:  # ... unless the file was cut short under the map since
                raise InputError(self.source, None, CHANGED) from None
        entry = Entry(obj, raw if self.raw else None, self._lines[position], eol)
        if end - start >= self.LONG_LINE:
            self._long[position] = entry
            if len(self._long) > self.LONG_KEPT:
                self._long.popitem(last=False)
        return entry

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Entry]: ...
    def __getitem__(self, index: int | slice) -> Entry | Sequence[Entry]:
        if isinstance(index, slice):
            view = object.__new__(LineIndex)
            view.__dict__.update(self.__dict__)
            view._positions, view._cache, view._cached_bytes, view._long, view.memo = self._positions[index], OrderedDict(), 0, OrderedDict(), {}
            return view
        position = self._positions[index]
        found = self._cache.get(position)
        if found is None:
            found = self._entry(position)
            if not self.cached:
                return found
            self._cache[position] = found
            self._cached_bytes += self._ends[position] - self._starts[position]
            while self._cached_bytes > self.cached and len(self._cache) > 1:
                gone = self._cache.popitem(last=False)[0]
                self._cached_bytes -= self._ends[gone] - self._starts[gone]
        else:
            self._cache.move_to_end(position)
        return found

    def __iter__(self) -> Iterator[Entry]:
        for position in self._positions:
            yield self._cache.get(position) or self._entry(position)

    def __reversed__(self) -> Iterator[Entry]:
        for position in reversed(self._positions):
            yield self._cache.get(position) or self._entry(position)


def memoized(entries: Iterable[Entry], key: str, scan: Callable[[], Any]) -> Any:
    """scan(), kept on `entries` when they are a LineIndex (each of its reads parses again, so a
    whole-file scan that several readers make is made once); a list is scanned every time."""
    if not isinstance(entries, LineIndex):
        return scan()
    if key not in entries.memo:
        entries.memo[key] = scan()
    return entries.memo[key]


State = TypeVar("State")


def folded(entries: Iterable[Entry], fold: Fold[State]) -> State:
    """`fold` over every entry: a LineIndex's lines folded once (while it was built, else at the
    first ask) and the state kept, a Joined's upper part as such and the lines below it on from
    there. A fold over prefixes that the LineIndex was built with answers for its first lines too
    (index[:n]) from the state kept at the last change before them. The state is the caller's to
    read, not to change."""
    if isinstance(entries, Joined):
        state = fold.resume(folded(entries.above, fold))
        below: Iterable[Entry] = entries.below
    elif isinstance(entries, LineIndex):
        changes = entries._changes.get(fold.key) if fold.key not in entries.memo else None
        positions = entries._positions
        if changes is not None and positions.start == 0 and positions.step == 1:  # the file's first lines
            changed = bisect_left(changes[0], positions.stop)  # the changes on lines before the stop
            return changes[1][changed - 1] if changed else fold.start()
        return memoized(entries, fold.key, lambda: folded(iter(entries), fold))  # type: ignore[no-any-return]
    else:
        state, below = fold.start(), entries
    step = fold.step
    for entry in below:
        state = step(state, entry)
    return state


def _later(latest: datetime | None, entry: Entry) -> datetime | None:
    when = moment(entry.obj.get("timestamp"))
    return when if when is not None and (latest is None or when > latest) else latest


def _no_time() -> datetime | None:
    return None


LATEST_TIME: Fold[datetime | None] = Fold("latest time", _no_time, _later)  # the latest `timestamp` of the lines (None: none has one)


class Window(Sequence[Entry]):
    """entries[start:stop] of a sequence read in place, without reading it."""

    def __init__(self, entries: Sequence[Entry], start: int, stop: int) -> None:
        self.entries, self.start, self.stop = entries, start, max(start, stop)

    def __len__(self) -> int:
        return self.stop - self.start

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Entry]: ...
    def __getitem__(self, index: int | slice) -> Entry | Sequence[Entry]:
        if isinstance(index, slice):
            start, stop = index.indices(len(self))[:2]
            return Window(self.entries, self.start + start, self.start + stop)
        return self.entries[self.start + range(len(self))[index]]

    def __iter__(self) -> Iterator[Entry]:
        return (self.entries[position] for position in range(self.start, self.stop))


class Joined(Sequence[Entry]):
    """`above` (read in place) then `below` (a list), as one sequence: what restore reads."""

    def __init__(self, above: Sequence[Entry], below: Sequence[Entry]) -> None:
        self.above, self.below = above, below

    def __len__(self) -> int:
        return len(self.above) + len(self.below)

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Entry]: ...
    def __getitem__(self, index: int | slice) -> Entry | Sequence[Entry]:
        if isinstance(index, slice):
            return Window(self, *index.indices(len(self))[:2])
        position = range(len(self))[index]
        split = len(self.above)
        return self.above[position] if position < split else self.below[position - split]

    def __iter__(self) -> Iterator[Entry]:
        yield from self.above
        yield from self.below


@contextlib.contextmanager
def no_cycle_collection() -> Iterator[None]:
    """The cycle collector off while a file is read whole and checked, and its findings listed.
    Parsed lines and findings hold no reference cycles, so there is nothing for it to free; but as
    they pile up it walks all of them again and again (about a third of validate's time on 200,000
    lines, and as much again while the rows of as many failing lines are made and written). What
    is dropped before the end is freed without it; what is still held then is walked once more."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
