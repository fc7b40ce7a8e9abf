"""`validate`: line schemas plus the structural invariants of a transcript."""

from __future__ import annotations

import bisect
import contextlib
import os
import stat
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, BinaryIO, NamedTuple, TypeVar

from ..core.jsonl import Entry, ReadStats, iter_entries
from ..core.model import Finding
from . import schemas

if TYPE_CHECKING:  # types only
    from ..core.reports import FindingRow

# (line, message) of one schema error: a file where every line fails has as many, so they stay
# plain pairs until they are listed (a Finding, then a row, for each cost more than finding it).
SchemaProblem = tuple[int, str]


def schema_findings(entries: Iterable[Entry], schema_name: str) -> list[Finding]:
    problems: list[SchemaProblem] = []
    for _ in checked_entries(entries, schema_name, problems):
        pass
    return [Finding("error", "schema", message, line) for line, message in problems]


def checked_entries(entries: Iterable[Entry], schema_name: str, problems: list[SchemaProblem], last_line: int | None = None) -> Iterator[Entry]:
    """The entries as they come, each checked against the line schema on its way (while the line
    just parsed is still in the processor's cache); what is wrong with it goes to `problems`. Past
    `last_line` they come unchecked (another process checks them: see SchemaSplit)."""
    errors = schemas.errors
    add = problems.append
    rest = iter(entries)
    for entry in rest:
        if last_line is not None and entry.line > last_line:
            yield entry
            yield from rest
            return
        for problem in errors(schema_name, entry.obj, entry.raw):
            add((entry.line, problem))
        yield entry


# A file this large is checked against its schema on two processes: on lines that fail it, the
# schema's check and its messages are most of validate's work. The other process takes the lines
# from a point on and parses them again (this one still reads every line, for the structural
# check, which needs them all): it takes the larger share of the bytes, since this one has more to
# do with each of its lines.
SPLIT_MIN_BYTES = 32 << 20
OTHER_SHARE = 0.7
_SCAN = 1 << 20  # bytes read at a time while looking for a line's start and counting lines


class SchemaSplit(NamedTuple):
    """Where the other process starts: the first byte of a line (`offset`); `file`: a handle of
    its own on the file, opened before the work starts (a file removed meanwhile is still read
    whole)."""

    file: BinaryIO
    offset: int


@contextlib.contextmanager
def schema_split(path: str) -> Iterator[SchemaSplit | None]:
    """Where to split `path`'s schema check, or None to check it here alone: a file under
    SPLIT_MIN_BYTES, not a regular file, one that cannot be read, or a document a format reads
    (its lines are not the file's); and wherever there is no fork."""
    if not hasattr(os, "fork"):
        yield None
        return
    try:
        file = open(path, "rb")
    except OSError:
        yield None
        return
    with file:
        yield _split_point(file)


def _split_point(file: BinaryIO) -> SchemaSplit | None:
    """The first line that starts at or after OTHER_SHARE of the bytes from the end."""
    from ..formats import DOCUMENT_HEAD, is_document

    try:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size < SPLIT_MIN_BYTES or is_document(file.read(DOCUMENT_HEAD)):
            return None
        offset = int(info.st_size * (1 - OTHER_SHARE))
        file.seek(offset - 1)  # a line starts right after a newline
        while (chunk := file.read(_SCAN)) and (newline := chunk.find(b"\n")) < 0:
            offset += len(chunk)
        return SchemaSplit(file, offset + newline) if chunk else None  # (none: no line starts after the point)
    except OSError:
        return None


def lines_before(split: SchemaSplit) -> int:
    """How many lines come before the split (its first line is the next one), counted by reading
    at given offsets: the other process reads the same handle meanwhile."""
    lines, at, descriptor = 0, 0, split.file.fileno()
    while at < split.offset and (chunk := os.pread(descriptor, min(_SCAN, split.offset - at), at)):
        lines += chunk.count(b"\n")
        at += len(chunk)
    return lines


def schema_problems_from(split: SchemaSplit, schema_name: str) -> tuple[list[SchemaProblem], int]:
    """The schema problems of the file's lines from the split on, numbered from 1 there, and how
    many lines were read. Read as validate reads a file: a line that is not an entry (unreadable,
    blank) has no problem here."""
    problems: list[SchemaProblem] = []
    lines = 0
    split.file.seek(split.offset)
    for entry in checked_entries(iter_entries(split.file, split.file.name, "skip", ReadStats()), schema_name, problems):
        lines = entry.line
    return problems, lines


def joined_problems(mine: list[SchemaProblem], theirs: list[SchemaProblem], before: int, unread: set[int], last_line: int) -> list[SchemaProblem]:
    """This process's problems, then the other's (whose line 1 is line `before + 1`), numbered as
    the file's lines, for the lines this process read as entries only: not those it could not read
    (`unread`: the two read a line differently where a byte order mark starts it, dropped from a
    file's first line only), nor those past its last (a file that grew in between)."""
    return mine + [(before + line, message) for line, message in theirs if before + line <= last_line and before + line not in unread]


def finding_rows(bad_lines: list[Finding], problems: list[SchemaProblem], structure: list[Finding]) -> list[FindingRow]:
    """What validate lists: the unreadable lines, the schema errors (`problems`) and the structural
    findings as rows, in the order sort_findings gives all three lists one after the other.

    The schema errors are in that order already, as checked_entries gives them (a file where every line fails has 100,000 of
    them, and sorting them costs a key each): the few other rows are sorted and each put where
    that sort would put it, before the schema errors of its line whose key is above its own (and,
    for an unreadable line, listed first, whose key is the same)."""
    from ..core.reports import FindingRow

    schema = [FindingRow(severity="error", code="schema", line=line, message=message) for line, message in problems]
    first = [finding.row() for finding in bad_lines]
    lines = [line for line, _ in problems]
    if lines != sorted(lines):  # not as checked_entries gives them (sorted() of sorted numbers is one pass)
        return sort_findings(first + schema + [finding.row() for finding in structure])
    others = sort_findings(first + [finding.row() for finding in structure])
    if not others:
        return schema
    firsts = {id(row) for row in first}
    rows: list[FindingRow] = []
    taken = 0
    for row in others:
        order = _order(row)
        before = order[1:] < _SCHEMA_REST or (order[1:] == _SCHEMA_REST and id(row) in firsts)
        place = (bisect.bisect_left if before else bisect.bisect_right)(lines, order[0], taken)
        rows += schema[taken:place]
        rows.append(row)
        taken = place
    rows += schema[taken:]
    return rows


_Sorted = TypeVar("_Sorted", Finding, "FindingRow")


def sort_findings(findings: list[_Sorted]) -> list[_Sorted]:
    return sorted(findings, key=_order)


def _order(finding: Finding | FindingRow) -> tuple[int, bool, str]:
    """Where a finding is listed: by line (a finding of the whole file first), errors before
    warnings, then by code."""
    return finding.line if finding.line is not None else 0, finding.severity != "error", finding.code


# _order of a schema error, past its line.
_SCHEMA_REST = (False, "schema")
