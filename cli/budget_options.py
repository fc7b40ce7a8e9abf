"""Budget settings from the environment, as Claude Code reads them, with flags taking precedence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Optional

from ..core.budget import BudgetSettings
from ..core.limits import MAX_COUNT
from . import declare
from .budget_environment import ENVIRONMENT, budget_settings  # noqa: F401  # re-exported: declared beside the settings statusline reads without typer
from .options import Reading, claude_code_rules, percentage

if TYPE_CHECKING:
    from ..api import CountOptions

Window = Annotated[
    Optional[int],
    declare.Option(
        "--window", help="Context window in tokens (default: the model catalog's; 1M for [1m] names).", min=1, max=MAX_COUNT - 1, show_default=False
    ),
]
AutocompactPct = Annotated[
    Optional[float],
    declare.Option(
        "--autocompact-pct",
        help="Autocompact at this percentage (above 0, at most 100) of the effective window (can only lower the threshold).",
        show_default=False,
        callback=percentage,
    ),
]
MaxOutput = Annotated[
    Optional[int],
    declare.Option(
        "--max-output-tokens", help="The model's max output tokens (sets the reserve: min(this, 20,000)).", min=1, max=MAX_COUNT - 1, show_default=False
    ),
]
BlockingLimit = Annotated[Optional[int], declare.Option("--blocking-limit", help="Replace the blocking limit.", min=1, max=MAX_COUNT - 1, show_default=False)]
NoAutoCompact = Annotated[bool, declare.Option("--no-auto-compact", help="As DISABLE_AUTO_COMPACT: no autocompact level.")]
Baseline = Annotated[
    Optional[int],
    declare.Option(
        "--baseline",
        help="The fixed part of every request (system prompt, tools, first-turn context) in tokens, instead of measuring it on the first response; for files that record no usage.",
        min=0,
        show_default=False,
    ),
]
ClaudeCodeRules = Annotated[
    Optional[str],
    declare.Option(
        "--rules",
        help="Apply the rules of this Claude Code release (2.1.88, 2.1.332 or latest) instead of those of the version that wrote the session.",
        metavar="VERSION",
        show_default=False,
        callback=claude_code_rules,
    ),
]
Model = Annotated[Optional[str], declare.Option("--model", "-m", help="Model name (default: the one recorded in the transcript).", show_default=False)]
# convert's --model is another thing, declared beside it: the model written on the lines it makes.
RecordedModel = Annotated[Optional[str], declare.Option("--model", help="Model recorded on assistant lines written as claude-code.", show_default=False)]


@dataclass(frozen=True)
class Threshold:
    """The options that set the window and the autocompact threshold (count, warn, api-edits, compact)."""

    model: Model = None
    window: Window = None
    autocompact_pct: AutocompactPct = None
    max_output_tokens: MaxOutput = None
    no_auto_compact: NoAutoCompact = False
    rules: ClaudeCodeRules = None

    def settings(self, blocking_limit: int | None = None) -> BudgetSettings:
        """The environment's budget settings with these flags over them."""
        return budget_settings(
            autocompact_pct=self.autocompact_pct,
            max_output_tokens=self.max_output_tokens,
            blocking_limit=blocking_limit,
            no_auto_compact=self.no_auto_compact,
            rules=self.rules,
        )

    def counted(self, reading: Reading, baseline: int | None = None, blocking_limit: int | None = None, **more: Any) -> CountOptions:
        """count's options for transcripts read as `reading` says, with these budget flags."""
        from ..api import CountOptions

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
