"""Budget settings from the environment, as Claude Code reads them, with flags taking precedence."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ..core.budget import BudgetSettings, Setting
from .options import Reading, percentage

if TYPE_CHECKING:
    from ..file_count import CountOptions

ENVIRONMENT = {
    "auto_compact_window": "CLAUDE_CODE_AUTO_COMPACT_WINDOW",
    "autocompact_pct": "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
    "max_output_tokens": "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
    "blocking_limit": "CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE",
    "disable_auto_compact": "DISABLE_AUTO_COMPACT",
    "disable_compact": "DISABLE_COMPACT",
    "disable_1m": "CLAUDE_CODE_DISABLE_1M_CONTEXT",
}

Window = Annotated[
    Optional[int], typer.Option("--window", help="Context window in tokens (default: from the model; 1M for [1m] names).", min=1, show_default=False)
]
AutocompactPct = Annotated[
    Optional[float],
    typer.Option(
        "--autocompact-pct",
        help="Autocompact at this percentage (above 0, at most 100) of the effective window (can only lower the threshold).",
        show_default=False,
        callback=percentage,
    ),
]
MaxOutput = Annotated[
    Optional[int], typer.Option("--max-output-tokens", help="The model's max output tokens (sets the reserve: min(this, 20,000)).", min=1, show_default=False)
]
BlockingLimit = Annotated[Optional[int], typer.Option("--blocking-limit", help="Replace the blocking limit.", min=1, show_default=False)]
NoAutoCompact = Annotated[bool, typer.Option("--no-auto-compact", help="As DISABLE_AUTO_COMPACT: no autocompact level.")]
Baseline = Annotated[
    Optional[int],
    typer.Option(
        "--baseline",
        help="The fixed part of every request (system prompt, tools, first-turn context) in tokens, instead of measuring it on the first response; for files that record no usage.",
        min=0,
        show_default=False,
    ),
]
Model = Annotated[Optional[str], typer.Option("--model", "-m", help="Model name (default: the one recorded in the transcript).", show_default=False)]
# convert's --model is another thing, declared beside it: the model written on the lines it makes.
RecordedModel = Annotated[Optional[str], typer.Option("--model", help="Model recorded on assistant lines written as claude-code.", show_default=False)]


def budget_settings(
    environ: Mapping[str, str] | None = None,
    autocompact_pct: float | None = None,
    max_output_tokens: int | None = None,
    blocking_limit: int | None = None,
    no_auto_compact: bool = False,
) -> BudgetSettings:
    environ = os.environ if environ is None else environ
    values: dict[str, Setting | None] = {field: Setting(environ[name], name) if environ.get(name, "") != "" else None for field, name in ENVIRONMENT.items()}
    flags = {
        "autocompact_pct": (autocompact_pct, "--autocompact-pct"),
        "max_output_tokens": (max_output_tokens, "--max-output-tokens"),
        "blocking_limit": (blocking_limit, "--blocking-limit"),
    }
    for field, (value, flag) in flags.items():
        if value is not None:
            values[field] = Setting(f"{value:g}" if isinstance(value, float) else str(value), flag)
    if no_auto_compact:
        values["disable_auto_compact"] = Setting("1", "--no-auto-compact")
    return BudgetSettings(**values)


@dataclass(frozen=True)
class Threshold:
    """The options that set the window and the autocompact threshold (count, warn, api-edits, compact)."""

    model: Model = None
    window: Window = None
    autocompact_pct: AutocompactPct = None
    max_output_tokens: MaxOutput = None
    no_auto_compact: NoAutoCompact = False

    def settings(self, blocking_limit: int | None = None) -> BudgetSettings:
        """The environment's budget settings with these flags over them."""
        return budget_settings(
            autocompact_pct=self.autocompact_pct, max_output_tokens=self.max_output_tokens, blocking_limit=blocking_limit, no_auto_compact=self.no_auto_compact
        )

    def counted(self, reading: Reading, baseline: int | None = None, blocking_limit: int | None = None, **more: Any) -> CountOptions:
        """count's options for transcripts read as `reading` says, with these budget flags."""
        from ..file_count import CountOptions

        return CountOptions(
            model=self.model,
            window=self.window,
            format=reading.format,
            on_error=reading.errors,
            baseline=baseline,
            budget=self.settings(blocking_limit),
            **more,
        )


@dataclass(frozen=True)
class Budget(Threshold):
    """The threshold options and the two that only a count needs: the fixed baseline and the blocking limit (count, warn)."""

    baseline: Baseline = None
    blocking_limit: BlockingLimit = None

    def count_options(self, reading: Reading, **more: Any) -> CountOptions:
        return self.counted(reading, self.baseline, self.blocking_limit, **more)
