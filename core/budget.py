"""Context windows, output reserves and the warning/autocompact/blocking thresholds.

Formulas from Claude Code 2.1.88 (services/compact/autoCompact.ts, utils/context.ts):
effective window = window − min(max output tokens, 20,000); autocompact threshold = effective −
13,000; warning = error = threshold − 20,000 (the effective window stands in for the threshold when
autocompact is off); blocking = effective − 3,000. The same in 2.1.332, except that
CLAUDE_CODE_AUTO_COMPACT_WINDOW caps only the window autocompact works in, so the blocking limit is
window − reserve − 3,000 of the model's window (core.rules says which release a session follows).
A model's window and max output come from the model catalog (core.catalog). Settings arrive as plain
values: the CLI reads the environment and the flags, the core never does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from .catalog import asks_for_1m, catalog
from .limits import MAX_COUNT
from .rules import CURRENT, Rules, rules_for

DEFAULT_WINDOW = 200_000
ONE_MILLION = 1_000_000
SUMMARY_OUTPUT_RESERVE = 20_000
AUTOCOMPACT_BUFFER = 13_000
WARNING_BUFFER = 20_000
BLOCKING_BUFFER = 3_000

Level = Literal["normal", "warning", "autocompact", "blocking"]
LEVELS: tuple[Level, ...] = ("normal", "warning", "autocompact", "blocking")

# Other agents' models, which the catalog (Claude Code's) does not list: (name, or a prefix ending in
# "-" or ".", window), first match wins. Gemini CLI's tokenLimit() (packages/core/src/core/tokenLimits.ts,
# 2026-08): Gemma 4 256,000; every Gemini model (2.5, 3, 3.1, 3.5 …) 1,048,576, its DEFAULT_TOKEN_LIMIT.
# Codex's GPT-5 family: 272,000, the model_context_window every rollout records for gpt-5, gpt-5-codex,
# gpt-5.1-codex-max and gpt-5.2-codex (as is, or as its 95 %); a rollout's own figure comes first
# (formats.codex recorded_window): this is for one with no reply yet.
GEMINI_LIMITS = "Gemini CLI's token limits"
CODEX_LIMITS = "the model_context_window Codex records for it"
OTHER_WINDOWS: tuple[tuple[str, int, str], ...] = (
    ("gemma-4-31b-it", 256_000, GEMINI_LIMITS),
    ("gemma-4-26b-a4b-it", 256_000, GEMINI_LIMITS),
    ("gemini-", 1_048_576, GEMINI_LIMITS),
    ("gpt-5", 272_000, CODEX_LIMITS),
    ("gpt-5-", 272_000, CODEX_LIMITS),
    ("gpt-5.", 272_000, CODEX_LIMITS),
)


def other_window(model: str) -> tuple[int, str] | None:
    """The window OTHER_WINDOWS gives `model` and where the figure comes from, or None."""
    name = model.lower()
    return next(((window, source) for key, window, source in OTHER_WINDOWS if name == key or (key.endswith(("-", ".")) and name.startswith(key))), None)


# Claude Code's fallbacks for old models the catalog no longer lists (both releases); first match wins.
OLD_MODELS_MAX_OUTPUT: tuple[tuple[str, int, int], ...] = (
    ("claude-3-opus", 4_096, 4_096),
    ("claude-3-sonnet", 8_192, 8_192),
    ("claude-3-haiku", 4_096, 4_096),
)


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
    max_context_tokens: Setting | None = None  # CLAUDE_CODE_MAX_CONTEXT_TOKENS (2.1.332: unknown models; every model with DISABLE_COMPACT)
    rules: Setting | None = None  # --rules: a Claude Code release, or latest, over the session's version


@dataclass(frozen=True)
class Thresholds:
    window: int  # the model's window (2.1.88: after CLAUDE_CODE_AUTO_COMPACT_WINDOW's cap)
    max_output_tokens: int
    reserve: int
    effective_window: int
    autocompact: int | None  # None when autocompact is off
    warning: int
    error: int
    blocking: int
    explanations: tuple[str, ...] = field(default_factory=tuple)
    ignored: tuple[str, ...] = field(default_factory=tuple)
    rules: str = CURRENT.release  # the Claude Code release whose rules gave these figures
    compact_window: int | None = None  # the autocompact window when a cap makes it smaller than the window (2.1.332)

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


def settings_rules(settings: BudgetSettings, version: str | None) -> tuple[Rules, str]:
    """The rules that apply, and why: settings.rules (--rules, or what its source names) over the
    session's `version` (core.rules)."""
    asked = settings.rules
    if asked is None:
        return rules_for(version)
    return rules_for(version, asked.value, None if asked.source == "--rules" else asked.source)


def model_window(model: str | None, settings: BudgetSettings = BudgetSettings(), rules: Rules = CURRENT) -> tuple[int, str]:
    """The model's context window under `rules`, and why (see core.catalog and core.rules)."""
    disabled = truthy(settings.disable_1m)
    limit = _positive_int(settings.max_context_tokens, []) if rules.max_context_tokens else None
    if limit is not None and truthy(settings.disable_compact):
        return limit, f"{_source(settings.max_context_tokens)} with {_source(settings.disable_compact)}"
    if asks_for_1m(model):
        if disabled:
            return DEFAULT_WINDOW, f"{model} asks for 1M, but 1M windows are disabled ({_source(settings.disable_1m)})"
        return ONE_MILLION, f"the model name {model} carries [1m]"
    if not model:
        return DEFAULT_WINDOW, "no model recorded: the default window"
    known = catalog().find(model)
    if known is not None:
        if known.native_1m and disabled:
            return DEFAULT_WINDOW, f"{known.id} has a native 1M window, but 1M windows are disabled ({_source(settings.disable_1m)})"
        if known.native_1m:
            return known.window, f"{known.id} has a native 1M window (the model catalog)"
        more = " (1M only with [1m] or the 1M beta)" if known.maximum_window else ""
        return known.window, f"the model catalog's window for {known.id}{more}"
    other = other_window(model)
    if other is not None:
        return other[0], f"{model}'s window ({other[1]})"
    unknown = f"{model} is not in the model catalog (Claude Code {catalog().release})"
    if limit is not None:
        return limit, f"{unknown}: {_source(settings.max_context_tokens)}"
    if disabled and rules.unknown_model_window > DEFAULT_WINDOW:
        return DEFAULT_WINDOW, f"{unknown}, and 1M windows are disabled ({_source(settings.disable_1m)})"
    return rules.unknown_model_window, f"{unknown}: Claude Code {rules.release} gives such a model {rules.unknown_model_window:,}"


def agent_thresholds(window: int, window_reason: str, fraction: float, format_name: str) -> Thresholds:
    """The levels of a format whose agent compacts on its own at `fraction` of the window (Gemini CLI
    compresses once its last prompt reaches it, Codex once its last token_count does): that is the
    compaction point, and the warning too, as neither agent warns before it (Gemini CLI colours its
    context figure at the same fraction); the window itself blocks. No output is reserved: the agent's threshold is of the window itself.
    `rules` names the format: no Claude Code release gave these figures."""
    point = math.floor(window * fraction)
    explain = (
        f"the thresholds of the agent that writes the {format_name} format, not Claude Code's",
        f"window {window:,}: {window_reason}",
        f"autocompact {point:,} = {fraction:g} of the window (the agent compacts there; the warning is the same)",
        f"blocking {window:,} = the window",
    )
    return Thresholds(window, 0, 0, window, point, point, point, window, explain, (), format_name)


def max_output_for(model: str | None, rules: Rules = CURRENT) -> tuple[int, int, str]:
    """(default, upper, where from) for the model's output tokens."""
    known = catalog().find(model)
    if known is not None:
        return known.max_output[0], known.max_output[1], f"the model catalog's default for {known.id}"
    name = (model or "").lower()
    for needle, default, upper in OLD_MODELS_MAX_OUTPUT:
        if needle in name:
            return default, upper, f"Claude Code's default for {needle} models"
    what = f"{model}, not in the model catalog" if model else "an unknown model"
    return rules.fallback_max_output[0], rules.fallback_max_output[1], f"Claude Code {rules.release}'s default for {what}"


def _window_cap(setting: Setting | None, rules: Rules, explain: list[str], ignored: list[str]) -> int | None:
    """CLAUDE_CODE_AUTO_COMPACT_WINDOW: a number of tokens, 500k or 1.5m too (as 2.1.332 reads it;
    2.1.88 read only whole numbers, and a user who writes 500k means 500,000 whichever release wrote
    the session); under 2.1.332's rules a value below 100,000 counts as 100,000."""
    if setting is None:
        return None
    value = setting.value.strip()
    scale = {"k": 1_000, "m": 1_000_000}.get(value[-1:].lower())
    try:
        tokens = round(float(value[:-1] if scale else value) * (scale or 1))
    except (ValueError, OverflowError):
        tokens = 0
    if tokens < 1 or tokens >= MAX_COUNT:
        ignored.append(f"{setting.source}={setting.value!r} ignored: not a number of tokens (e.g. 500000, 500k, 1.5m)")
        return None
    if scale and not rules.window_env_suffixes:
        explain.append(f"{setting.source}={setting.value!r} read as {tokens:,} (Claude Code {rules.release} itself reads whole numbers only)")
    if tokens < rules.window_env_minimum:
        explain.append(f"{setting.source}={setting.value!r} counts as {rules.window_env_minimum:,}, the minimum of Claude Code {rules.release}")
        return rules.window_env_minimum
    return tokens


def thresholds(
    model: str | None,
    settings: BudgetSettings = BudgetSettings(),
    window: int | None = None,
    window_reason: str | None = None,
    window_flag: bool = False,
    version: str | None = None,
) -> Thresholds:
    """Every level for `model` under `settings`, with a line of explanation for each value.

    `window` overrides the model's window (e.g. one inferred from recorded usage); with
    window_flag it was given on the command line and the environment's cap does not apply.
    `version` is the Claude Code version that wrote the session: its release's rules apply
    (core.rules), unless settings.rules names others.
    """
    explain: list[str] = []
    ignored: list[str] = []
    rules, why_rules = settings_rules(settings, version)
    explain.append(why_rules)
    if window is None:
        window, reason = model_window(model, settings, rules)
    else:
        reason = window_reason or "given"
    explain.append(f"window {window:,}: {reason}")
    model_window_size = window
    cap = _window_cap(settings.auto_compact_window, rules, explain, ignored)
    cap_source = _source(settings.auto_compact_window)
    compact_window = window
    if cap is not None and window_flag:
        ignored.append(f"{cap_source}={cap} ignored: --window was given")
    elif cap is not None:
        if cap < window and rules.window_env_caps_blocking:
            explain.append(f"window {cap:,}: {cap_source} caps the window")
            window = model_window_size = compact_window = cap
        elif cap < window:
            explain.append(f"autocompact window {cap:,}: {cap_source} caps the window autocompact works in (not the blocking limit)")
            compact_window = cap
        else:
            ignored.append(f"{cap_source}={cap} ignored: it is not below the window {window:,}")

    default_out, upper_out, out_reason = max_output_for(model, rules)
    max_out = default_out
    override_out = _positive_int(settings.max_output_tokens, ignored)
    if override_out is not None:
        max_out = min(override_out, upper_out)
        capped = " (capped at the model's limit)" if override_out > upper_out else ""
        explain.append(f"max output {max_out:,}: {_source(settings.max_output_tokens)}{capped}")
    else:
        explain.append(f"max output {max_out:,}: {out_reason}")
    reserve = min(max_out, SUMMARY_OUTPUT_RESERVE)
    effective = compact_window - reserve
    which = "autocompact window" if compact_window != window else "window"
    explain.append(f"effective window {effective:,} = {which} {compact_window:,} − reserve {reserve:,} (min(max output, 20,000))")

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
    blocking = model_window_size - reserve - BLOCKING_BUFFER
    override_block = _positive_int(settings.blocking_limit, ignored)
    if override_block is not None:
        blocking = override_block
        explain.append(f"blocking {blocking:,}: {_source(settings.blocking_limit)}")
    elif compact_window != model_window_size:
        explain.append(f"blocking {blocking:,} = window {model_window_size:,} − reserve {reserve:,} − 3,000 (Claude Code {rules.release}: the model's window)")
    else:
        explain.append(f"blocking {blocking:,} = effective {effective:,} − 3,000")
    return Thresholds(
        window,
        max_out,
        reserve,
        effective,
        autocompact,
        warning,
        warning,
        blocking,
        tuple(explain),
        tuple(ignored),
        rules.release,
        compact_window if compact_window != window else None,
    )
