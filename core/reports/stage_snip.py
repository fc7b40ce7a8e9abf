"""snip's --report-json (schemas/snip.report.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..wire import Wire, sometimes
from .stages import StageReport


@dataclass(kw_only=True, slots=True)
class SnipExtras(Wire):
    stage: Literal["snip"] | None = sometimes()
    removed_messages: int | None = sometimes()
    removed_lines: int | None = sometimes()
    removed_estimate: int | None = sometimes()
    tokens_saved: int | None = sometimes()


SnipReport = StageReport[SnipExtras]
