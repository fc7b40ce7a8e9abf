"""validate's rows (schemas/validate.report.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..wire import Wire, sometimes


@dataclass(kw_only=True, slots=True)
class FindingRow(Wire):
    severity: Literal["error", "warning"]
    code: str
    line: int | None
    message: str


@dataclass(kw_only=True, slots=True)
class ValidateReport(Wire):
    """A row of `validate --json`: one transcript."""

    file: str
    format: str  # a registered format (formats.NAMES)
    entries: int
    valid: bool
    errors: int
    warnings: int
    findings: list[FindingRow]
    kind: Literal["compaction"] | None = sometimes()  # with note: a compaction side-call, not a session
    note: str | None = sometimes()
