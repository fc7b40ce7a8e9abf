"""Context windows, output reserves and the warning/autocompact/blocking thresholds.

Formulas from Claude Code 2.1.88 (services/compact/autoCompact.ts, utils/context.ts):
effective window = window − min(max output tokens, 20,000); autocompact threshold = effective −
13,000; warning = error = threshold − 20,000 (the effective window stands in for the threshold when
autocompact is off); blocking = effective − 3,000. Settings arrive as plain values: the CLI reads
the environment and the flags, the core never does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from .fields import MAX_COUNT

DEFAULT_WINDOW = 200_000
ONE_MILLION = 1_000_000
SUMMARY_OUTPUT_RESERVE = 20_000
AUTOCOMPACT_BUFFER = 13_000
WARNING_BUFFER = 20_000
BLOCKING_BUFFER = 3_000

Level = Literal["normal", "warning", "autocompact", "blocking"]
LEVELS: tuple[Level, ...] = ("normal", "warning", "autocompact", "blocking")

# (substring of the model name, default max output, upper limit); first match wins.
MAX_OUTPUT_TABLE: tuple[tuple[str, int, int], ...] = (
    ("opus-4-6", 64_000, 128_000),
    ("sonnet-4-6", 32_000, 128_000),
    ("opus-4-5", 32_000, 64_000),
    ("sonnet-4", 32_000, 64_000),
    ("haiku-4", 32_000, 64_000),
    ("opus-4-1", 32_000, 32_000),
    ("opus-4", 32_000, 32_000),
    ("claude-3-opus", 4_096, 4_096),
    ("claude-3-sonnet", 8_192, 8_192),
    ("claude-3-haiku", 4_096, 4_096),
    ("3-5-sonnet", 8_192, 8_192),
    ("3-5-haiku", 8_192, 8_192),
    ("3-7-sonnet", 32_000, 64_000),
)
FALLBACK_MAX_OUTPUT = (32_000, 64_000)


@dataclass(frozen=True)
class Setting:
    """A value given by the user, and where it came from (an environment variable or a flag)."""

    value: str
    source: str


@dataclass(frozen=True)
class BudgetSettings:
    auto_compact_window: Setting | None = None  # CLAUDE_CODE_AUTO_COMPACT_WINDOW / --window
    autocompact_pct: Setting | None = None  # CLAUDE_AUTOCOMPACT_PCT_OVERRIDE / --autocompact-pct
    max_output_tokens: Setting | None = None  # CLAUDE_CODE_MAX_OUTPUT_TOKENS / --max-output-tokens
    blocking_limit: Setting | None = None  # CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE / --blocking-limit
    disable_auto_compact: Setting | None = None  # DISABLE_AUTO_COMPACT / --no-auto-compact
    disable_compact: Setting | None = None  # DISABLE_COMPACT
    disable_1m: Setting | None = None  # CLAUDE_CODE_DISABLE_1M_CONTEXT


@dataclass(frozen=True)
class Thresholds:
    window: int
    max_output_tokens: int
    reserve: int
    effective_window: int
    autocompact: int | None  # None when autocompact is off
    warning: int
    error: int
    blocking: int
    explanations: tuple[str, ...] = field(default_factory=tuple)
    ignored: tuple[str, ...] = field(default_factory=tuple)

    def level(self, tokens: int) -> Level:
        if tokens >= self.blocking:
            return "blocking"
        if self.autocompact is not None and tokens >= self.autocompact:
            return "autocompact"
        if tokens >= self.warning:
            return "warning"
        return "normal"

    def percent_left(self, tokens: int) -> int:
        """Claude Code's figure: how far below the autocompact threshold (or effective window)."""
        threshold = self.autocompact if self.autocompact is not None else self.effective_window
        return max(0, round((threshold - tokens) / threshold * 100)) if threshold > 0 else 0


def truthy(setting: Setting | None) -> bool:
    """An environment flag as Claude Code reads it: set and not 0/false/no/off."""
    return setting is not None and setting.value.strip().lower() not in ("", "0", "false", "no", "off")


def _source(setting: Setting | None) -> str:
    """Where a setting came from (an environment variable or a flag), for the explanation."""
    return setting.source if setting is not None else "unset"


def _positive_int(setting: Setting | None, ignored: list[str]) -> int | None:
    if setting is None:
        return None
    try:
        value = int(setting.value)
    except ValueError:
        ignored.append(f"{setting.source}={setting.value!r} ignored: not a whole number")
        return None
    if value <= 0:
        ignored.append(f"{setting.source}={setting.value!r} ignored: must be positive")
        return None
    if value >= MAX_COUNT:  # no window or output is that large; every figure must stay a number a page can draw
        ignored.append(f"{setting.source}={setting.value!r} ignored: over {MAX_COUNT - 1:,}")
        return None
    return value


def model_window(model: str | None, disable_1m: bool = False) -> tuple[int, str]:
    if model and "[1m]" in model.lower():
        if disable_1m:
            return DEFAULT_WINDOW, f"{model} asks for 1M, but 1M windows are disabled"
        return ONE_MILLION, f"the model name {model} carries [1m]"
    return DEFAULT_WINDOW, "the default window"


def max_output_for(model: str | None) -> tuple[int, int]:
    name = (model or "").lower()
    for needle, default, upper in MAX_OUTPUT_TABLE:
        if needle in name:
            return default, upper
    return FALLBACK_MAX_OUTPUT


def thresholds(
    model: str | None, settings: BudgetSettings = BudgetSettings(), window: int | None = None, window_reason: str | None = None, window_flag: bool = False
) -> Thresholds:
    """Every level for `model` under `settings`, with a line of explanation for each value.

    `window` overrides the model's window (e.g. one inferred from recorded usage); with
    window_flag it was given on the command line and the environment's cap does not apply.
    """
    explain: list[str] = []
    ignored: list[str] = []
    if window is None:
        window, reason = model_window(model, truthy(settings.disable_1m))
    else:
        reason = window_reason or "given"
    explain.append(f"window {window:,}: {reason}")
    cap = _positive_int(settings.auto_compact_window, ignored)
    cap_source = _source(settings.auto_compact_window)
    if cap is not None and window_flag:
        ignored.append(f"{cap_source}={cap} ignored: --window was given")
    elif cap is not None:
        if cap < window:
            explain.append(f"window {cap:,}: {cap_source} caps the window")
            window = cap
        else:
            ignored.append(f"{cap_source}={cap} ignored: it is not below the window {window:,}")

    default_out, upper_out = max_output_for(model)
    max_out = default_out
    override_out = _positive_int(settings.max_output_tokens, ignored)
    if override_out is not None:
        max_out = min(override_out, upper_out)
        capped = " (capped at the model's limit)" if override_out > upper_out else ""
        explain.append(f"max output {max_out:,}: {_source(settings.max_output_tokens)}{capped}")
    else:
        explain.append(f"max output {max_out:,}: the default for {model or 'an unknown model'}")
    reserve = min(max_out, SUMMARY_OUTPUT_RESERVE)
    effective = window - reserve
    explain.append(f"effective window {effective:,} = window {window:,} − reserve {reserve:,} (min(max output, 20,000))")

    auto_off = truthy(settings.disable_compact) or truthy(settings.disable_auto_compact)
    threshold = effective - AUTOCOMPACT_BUFFER
    autocompact: int | None = threshold
    if auto_off:
        source = _source(settings.disable_compact if truthy(settings.disable_compact) else settings.disable_auto_compact)
        explain.append(f"autocompact off: {source}")
        autocompact = None
        if settings.autocompact_pct is not None:
            ignored.append(f"{settings.autocompact_pct.source} ignored: autocompact is off")
    else:
        explain.append(f"autocompact {autocompact:,} = effective {effective:,} − 13,000")
        if settings.autocompact_pct is not None:
            try:
                pct = float(settings.autocompact_pct.value)
            except ValueError:
                pct = math.nan
            if not 0 < pct <= 100:
                ignored.append(f"{settings.autocompact_pct.source}={settings.autocompact_pct.value!r} ignored: must be a percentage above 0 and at most 100")
            else:
                lowered = math.floor(effective * pct / 100)
                if lowered < threshold:
                    explain.append(f"autocompact {lowered:,} = {pct:g}% of the effective window ({settings.autocompact_pct.source})")
                    autocompact = lowered
                else:
                    ignored.append(
                        f"{settings.autocompact_pct.source}={pct:g} ignored: {pct:g}% of {effective:,} is {lowered:,}, "
                        f"which would raise the threshold above {autocompact:,}; the override can only lower it"
                    )
    base = autocompact if autocompact is not None else effective
    warning = base - WARNING_BUFFER
    explain.append(f"warning {warning:,} = {'autocompact' if autocompact is not None else 'effective window'} {base:,} − 20,000 (the error level is the same)")
    blocking = effective - BLOCKING_BUFFER
    override_block = _positive_int(settings.blocking_limit, ignored)
    if override_block is not None:
        blocking = override_block
        explain.append(f"blocking {blocking:,}: {_source(settings.blocking_limit)}")
    else:
        explain.append(f"blocking {blocking:,} = effective {effective:,} − 3,000")
    return Thresholds(window, max_out, reserve, effective, autocompact, warning, warning, blocking, tuple(explain), tuple(ignored))
