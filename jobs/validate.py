"""`validate`: line schemas plus the structural invariants of a transcript."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar

from ..core.jsonl import Entry
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


def checked_entries(entries: Iterable[Entry], schema_name: str, problems: list[SchemaProblem]) -> Iterator[Entry]:
    """The entries as they come, each checked against the line schema on its way (while the line
    just parsed is still in the processor's cache); what is wrong with it goes to `problems`."""
    errors = schemas.errors
    add = problems.append
    for entry in entries:
        for problem in errors(schema_name, entry.obj, entry.raw):
            add((entry.line, problem))
        yield entry


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
