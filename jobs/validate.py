"""`validate`: line schemas plus the structural invariants of a transcript."""

from __future__ import annotations

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
    """What validate lists: the unreadable lines, the schema errors and the structural findings as
    rows, in sort_findings's order."""
    from ..core.reports import FindingRow

    rows = [finding.row() for finding in bad_lines]
    rows += [FindingRow(severity="error", code="schema", line=line, message=message) for line, message in problems]
    rows += [finding.row() for finding in structure]
    return sort_findings(rows)


_Sorted = TypeVar("_Sorted", Finding, "FindingRow")


def sort_findings(findings: list[_Sorted]) -> list[_Sorted]:
    return sorted(findings, key=lambda f: (f.line if f.line is not None else 0, f.severity != "error", f.code))
