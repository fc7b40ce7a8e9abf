"""`validate`: line schemas plus the structural invariants of a transcript."""

from __future__ import annotations

from collections.abc import Sequence

from . import schemas
from .jsonl import Entry
from .model import Finding


def schema_findings(entries: Sequence[Entry], schema_name: str) -> list[Finding]:
    findings = []
    for entry in entries:
        for problem in schemas.errors(schema_name, entry.obj):
            findings.append(Finding("error", "schema", problem, entry.line))
    return findings


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.line if f.line is not None else 0, f.severity != "error", f.code))
