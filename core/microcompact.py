"""`microcompact`: clear old tool results without a model call, as Claude Code's time-based path does.

The content of older results of compactable tools becomes the exact placeholder Claude Code uses;
the most recent `keep_recent` stay. It fires only when the prompt cache has expired anyway (the
last response is at least `gap_minutes` old), unless forced or judged worth it by the cache-aware
cost model. That time trigger is Claude Code 2.1.88's; 2.1.332 dropped it for a keep-recent pass
that clears only when it frees at least 20,000 tokens, so a session of 2.1.332 must free that much
too. Results of subagent (Task/Agent) and MCP tools are never cleared: they cannot be reproduced by
running the tool again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .blocks import content_of, name_of, tool_event
from .cache import CacheDecision, CachePolicy, decide
from .count import Calibration, Estimates, anchor_index, calibrate, count_context
from .fields import iso, moment
from .fields import text as field_text
from .jsonl import Entry
from .model import Message
from .placeholders import PLACEHOLDER
from .prices import CacheModel
from .reports import MicrocompactExtras, ToolFigures
from .rules import Rules, session_rules
from .setting import no_marker, setting
from .stage import Outcome, Stage, StageContext
from .tokens import PiecesCounter, block_texts
from .transcript_format import WritableFormat

# Claude Code's COMPACTABLE_TOOLS, the same in 2.1.88 and 2.1.332 (notebook, agent and MCP tools are
# not among them; --tools may name others).
CLAUDE_CODE_TOOLS = frozenset({"Read", "Bash", "PowerShell", "Grep", "Glob", "WebSearch", "WebFetch", "Edit", "Write"})
CONTAINER_PREFIX = "mcp__container__"  # 2.1.332 clears these forms of its compactable tools too
PERSISTED = "<persisted-output>"  # 2.1.332 leaves a result it has saved to disk as it is
# Codex CLI's tools of the same kinds (shell and file reads, searches, patches): their outputs can be
# had again by running the tool again, as Claude Code's can.
CODEX_TOOLS = frozenset({"shell", "shell_command", "exec_command", "local_shell", "read_file", "list_dir", "grep_files", "apply_patch"})
COMPACTABLE_TOOLS = CLAUDE_CODE_TOOLS | CODEX_TOOLS
NEVER_CLEARED = frozenset({"Task", "Agent"})
# Claude Code 2.1.332 has no time-based trigger: its keep-recent pass clears only when that frees at
# least this many tokens. ctxpipe keeps the time trigger (clearing is free once the cache has
# expired) and, under 2.1.332's rules, asks for this floor as well.
KEEP_RECENT_MINIMUM = 20_000


def never_cleared(name: str) -> bool:
    return name in NEVER_CLEARED or name.startswith("mcp__")


def cleared_as(name: str, rules: Rules | None) -> str:
    """The tool name the compactable set is asked about: under 2.1.332's rules, an mcp__container__
    form is its tool's."""
    if rules is not None and rules.container_tools_and_persisted_output and name.startswith(CONTAINER_PREFIX):
        return name[len(CONTAINER_PREFIX) :]
    return name


@dataclass
class ToolCall:
    id: str
    name: str
    result: tuple[Message, int] | None = None  # the user message and the block index holding the result


def tool_calls(messages: Sequence[Message]) -> list[ToolCall]:
    """Every tool_use of the context in order, with the block that answers it (by id)."""
    calls: dict[str, ToolCall] = {}
    for message in messages:
        for index, block in enumerate(message.content):
            event = tool_event(block)
            if event is None:
                continue
            is_use, tool_id = event
            if is_use:
                calls.setdefault(tool_id, ToolCall(tool_id, name_of(block) or ""))
            elif tool_id in calls:
                calls[tool_id].result = (message, index)
    return list(calls.values())


def result_text_size(block: dict[str, Any]) -> int:
    texts, flat = block_texts(block)
    return sum(len(text) for text in texts) + (len(PLACEHOLDER) if flat else 0)


def timestamp_of(obj: dict[str, Any]) -> datetime | None:
    return moment(obj.get("timestamp"))


@dataclass
class Plan:
    """What would be cleared, and what it is worth."""

    calls: list[ToolCall] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)

    @property
    def tokens_freed(self) -> int:
        return sum(self.tokens)


def plan(messages: Sequence[Message], settings: MicrocompactSettings, calibration: Calibration, rules: Rules | None = None) -> Plan:
    """The results to clear: compactable, not among the most recent, and longer than the placeholder
    (`rules`: the Claude Code release whose set and skips apply; None: the seed's)."""
    tools = {name for name in settings.compactable if not never_cleared(name)}
    compactable = [call for call in tool_calls(messages) if cleared_as(call.name, rules) in tools]
    keeps_persisted = rules is not None and rules.container_tools_and_persisted_output
    keep = max(1, settings.keep_recent)
    chosen = Plan()
    counter = PiecesCounter()
    placeholder_tokens = counter.count(PLACEHOLDER)
    for call in compactable[:-keep]:
        if call.result is None:
            continue
        message, index = call.result
        block = message.content[index]
        texts, flat = block_texts(block)
        if content_of(block) == PLACEHOLDER or (not flat and result_text_size(block) <= len(PLACEHOLDER)):
            continue  # an image always outweighs the placeholder
        if keeps_persisted and texts and texts[0].lstrip().startswith(PERSISTED):
            continue
        raw = sum(counter.count_many(texts)) if texts else 0
        chosen.calls.append(call)
        chosen.tokens.append(max(0, round(calibration.slope * (raw - placeholder_tokens)) + flat))
    return chosen


def microcompact(entries: list[Entry], transcript_format: WritableFormat, settings: MicrocompactSettings, now: datetime, rules: Rules | None = None) -> Outcome:
    """Clear what `plan` chooses when the trigger fires. `now` is the clock the time trigger and the
    marker read; `rules` those of --rules (None: the session's version's, core.rules)."""
    messages = transcript_format.messages(entries)
    estimates = Estimates(messages, PiecesCounter())
    calibration = calibrate(estimates)
    rules = rules or session_rules(entries)[0]
    chosen = plan(messages, settings, calibration, rules)
    if not chosen.calls:
        return Outcome(
            entries, False, f"nothing to clear: no compactable tool result older than the last {max(1, settings.keep_recent)} is longer than the placeholder"
        )
    trigger = "manual" if settings.force else "auto"
    decision: CacheDecision | None = None
    cache = settings.cache_policy()
    if cache is not None and not settings.force:
        decision = decide(messages, entries, chosen.tokens_freed, first_changed_block_tokens(messages, chosen, estimates), cache, now)
        if not decision.clear:
            return Outcome(entries, False, f"not clearing: {decision.reason}", MicrocompactExtras(cache=decision.report()))
        trigger = "cache-aware"
    elif not settings.force:
        if not rules.time_based_microcompact and chosen.tokens_freed < KEEP_RECENT_MINIMUM:
            return Outcome(
                entries,
                False,
                f"not triggered: clearing frees about {chosen.tokens_freed:,} tokens, under the {KEEP_RECENT_MINIMUM:,} that Claude Code "
                f"{rules.release}'s keep-recent pass asks for (--force clears anyway)",
            )
        last = next((entries[m.entries[-1]].obj for m in reversed(messages) if m.role == "assistant"), None)
        moment = timestamp_of(last) if last else None
        if moment is None:
            return Outcome(entries, False, "not triggered: the transcript records no time for its last response (use --force)")
        gap = (now - moment).total_seconds() / 60
        if gap < settings.gap_minutes:
            return Outcome(
                entries,
                False,
                f"not triggered: {gap:.0f} min since the last response, under --gap-minutes {settings.gap_minutes:g} "
                "(the prompt cache may still be warm; --force clears anyway)",
            )
    pre_tokens = count_context(estimates, calibration).tokens
    counted = counted_by_anchor(messages, [call.result[0] for call in chosen.calls if call.result], chosen.tokens)
    by_entry: dict[int, dict[int, dict[str, Any]]] = {}
    removed = []
    per_tool: dict[str, ToolFigures] = {}
    for call, tokens in zip(chosen.calls, chosen.tokens):
        if call.result is None:  # never: plan() chooses answered calls only
            continue
        message, index = call.result
        position, block_index = message.refs[index]
        block = dict(message.content[index])
        block["content"] = PLACEHOLDER
        by_entry.setdefault(position, {})[block_index] = block
        removed.append({"uuid": field_text(entries[position].obj, "uuid"), "block": block_index, "tool_use_id": call.id, "tool": call.name})
        figures = per_tool.setdefault(call.name, ToolFigures(results=0, tokens=0))
        figures.results += 1
        figures.tokens += tokens
    result = list(entries)
    for position, blocks in by_entry.items():
        result[position] = transcript_format.replace_blocks(entries[position], blocks)
    metadata = {
        "trigger": trigger,
        "preTokens": pre_tokens,
        "tokensSaved": counted,
        "compactedToolIds": [call.id for call in chosen.calls],
    }
    if not settings.no_marker:
        marker = transcript_format.marker(result, "microcompact_boundary", "Context microcompacted", "microcompactMetadata", metadata, iso(now))
        if marker is not None:
            result.append(marker)
    report = MicrocompactExtras(
        stage="microcompact",
        cleared=len(chosen.calls),
        removed_estimate=chosen.tokens_freed,
        tokens_saved=counted,
        by_tool=per_tool,
        cache=decision.report() if decision is not None else None,
    )
    note = f"cleared {len(chosen.calls)} tool result{'s' if len(chosen.calls) != 1 else ''}"
    return Outcome(result, True, note, report, removed)


def counted_by_anchor(messages: Sequence[Message], holders: Sequence[Message], tokens: Sequence[int]) -> int:
    """The part of the removed tokens that the last recorded usage counted: what the stage's marker
    says it saved. Content after that response is estimated as it now is, so it is not in it."""
    anchor = anchor_index(messages)
    if anchor is None:
        return 0
    index = {id(message): number for number, message in enumerate(messages)}
    return sum(amount for holder, amount in zip(holders, tokens) if index[id(holder)] <= anchor)


def first_changed_block_tokens(messages: Sequence[Message], chosen: Plan, estimates: Estimates) -> int:
    """Estimated tokens of the prompt before the first cleared result: the part whose cache survives."""
    first = min((messages.index(call.result[0]) for call in chosen.calls if call.result), default=0)
    return estimates.between(0, first)


# --- the stage, declared once ----------------------------------------------------------------------


@dataclass(frozen=True)
class MicrocompactSettings(CacheModel):
    """microcompact's settings as the command line spells them (see core.setting.Flag)."""

    keep_recent: int = setting(5, "--keep-recent", "Old tool results: keep those of the last N compactable calls (0 keeps 1, as Claude Code).", min=0)
    tools: frozenset[str] | None = setting(
        None,
        "--tools",
        "Comma-separated tool names whose old results are cleared (default: Claude Code's Read,Bash,PowerShell,Grep,Glob,WebSearch,WebFetch,Edit,Write, "
        "and Codex's shell,shell_command,exec_command,local_shell,read_file,list_dir,grep_files,apply_patch). "
        "Task, Agent and mcp__ tools are never cleared (under 2.1.332's rules, mcp__container__ forms of the tools named are).",
        parse="names",
    )
    gap_minutes: float = setting(
        60.0, "--gap-minutes", "Clear old tool results only when the last response is at least this many minutes old (the prompt cache has expired).", min=0.0
    )
    force: bool = setting(False, "--force", "Clear regardless of the time since the last response.")
    no_marker: bool = no_marker()
    cache_aware: bool = setting(
        False,
        "--cache-aware",
        "Clear old tool results only when the tokens freed pay for the prompt-cache break within --horizon turns (replaces the time trigger).",
    )
    clear_at_least: int = setting(10_000, "--clear-at-least", "With --cache-aware: the fewest tokens worth a cache break.", min=0)
    model: str | None = setting(None, "--model", "Model for the price table (default: the transcript's).", short="-m")

    # Derived, not set: --tools left out means Claude Code's own list.
    @property
    def compactable(self) -> frozenset[str]:
        return COMPACTABLE_TOOLS if self.tools is None else self.tools

    # Derived, not set: the cache model's terms, with --cache-aware only (it replaces the time trigger).
    def cache_policy(self) -> CachePolicy | None:
        return CachePolicy(self.clear_at_least, self.horizon, self.prices or (), self.model) if self.cache_aware else None


def run(entries: list[Entry], transcript_format: WritableFormat, settings: MicrocompactSettings, context: StageContext) -> Outcome:
    rules = session_rules(entries, context.rules)[0] if context.rules is not None else None
    outcome = microcompact(entries, transcript_format, settings, context.now, rules)
    cache = outcome.report.cache if isinstance(outcome.report, MicrocompactExtras) else None
    if cache:  # what keeping and clearing cost: the figures behind the decision
        outcome.notes.append(
            f"microcompact: cache {'warm' if cache.cache_warm else 'expired'} (TTL {cache.ttl_minutes} min); "
            f"over {cache.horizon} turns keeping costs ${cache.cost_keep_usd:.4f}, clearing ${cache.cost_clear_usd:.4f}"
            + (f"; break-even at turn {cache.break_even_turn}" if cache.break_even_turn else "")
        )
    return outcome


STAGE = Stage(
    "microcompact",
    MicrocompactSettings,
    run,
    """Replace old tool results with "[Old tool result content cleared]", as Claude Code does.

    Only the active context is touched; results of Task/Agent and MCP tools are never cleared, and
    the last --keep-recent compactable results stay. By default it fires only when the last
    response is --gap-minutes old (the prompt cache has expired, so clearing costs nothing extra);
    otherwise the input passes through unchanged. A microcompact_boundary record with tokensSaved
    is appended, which `count` uses. Running it twice changes nothing more.

    Example:  ctxpipe microcompact --force --ledger undo.jsonl session.jsonl > smaller.jsonl
    """,
)
