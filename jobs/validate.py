"""`validate`: line schemas plus the structural invariants of a transcript."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..core.jsonl import Entry
from ..core.model import Finding
from . import schemas


def schema_findings(entries: Iterable[Entry], schema_name: str) -> list[Finding]:
    findings: list[Finding] = []
    for _ in checked_entries(entries, schema_name, findings):
        pass
    return findings


def checked_entries(entries: Iterable[Entry], schema_name: str, findings: list[Finding]) -> Iterator[Entry]:
    """The entries as they come, each checked against the line schema on its way (while the line
    just parsed is still in the processor's cache); what is wrong with it goes to `findings`."""
    errors = schemas.errors
    for entry in entries:
        for problem in errors(schema_name, entry.obj, entry.raw):
            findings.append(Finding("error", "schema", problem, entry.line))
        yield entry


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.line if f.line is not None else 0, f.severity != "error", f.code))
