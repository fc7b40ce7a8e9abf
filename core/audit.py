"""The audit of a session's compactions: what each one kept and lost, and what it cost after.

For every compaction a format records (`TranscriptFormat.compactions`), the facts of the history
it replaced (summarize's fact engine: every message the user typed, queued prompts delivered
mid-turn included, the last request, the files edited, the errors met, the open tasks, the current
work) are checked against what it left (its summary, the messages it kept, the attachments added
with them), by the verifier the summary stage uses. A figure is what was counted: recall is
rounded down, never up, and it is None when there was nothing to count.

Around it, from what the session recorded: the tokens before (the boundary's `preTokens`) and
after (the prompt the first response after it was sent), the cache that first call wrote again and
what that cost, how many calls the context took to fill up again since the compaction before it
(thrash, as Claude Code 2.1.332's rapid-refill breaker counts it), and the files read before it
that were read again after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .blocks import call_id, input_of, is_tool_result, is_tool_use, name_of
from .catalog import Prices
from .cost import billed_rate, dollars, inference_scale, token_parts
from .count import is_real_response, usage_prompt
from .fields import rounded_down
from .model import Message
from .prices import price_of
from .summarize import Fact, context_text, key_facts, verify
from .tokens import TextCounter, estimate_blocks
from .transcript_format import CompactionSpan
from .wire import Wire, sometimes

if TYPE_CHECKING:
    from .reports import MissingFact

# Claude Code 2.1.332: "Autocompact is thrashing: the context refilled to the limit within 3 turns of
# the previous compact, 3 times in a row."
REFILL_TURNS = 3
THRASH_RUN = 3


@dataclass(kw_only=True, slots=True)
class CompactionAudit(Wire):
    """A row of `audit --json`: one compaction."""

    file: str
    line: int | None  # the boundary's line
    timestamp: str | None
    trigger: str | None  # "auto", "manual", …; None when the file does not say
    by: str  # "claude-code", "ctxpipe", "codex"
    pre_tokens: int | None  # the boundary's preTokens
    post_tokens: int | None  # the prompt of the first response after it (None: none came)
    summary_tokens: int
    facts: int
    carried: int
    recall: float | None  # carried / facts, rounded down; None with no fact to check
    lost: list[MissingFact]  # the facts not carried
    cache_write_tokens: int | None  # what the first call after it wrote to the cache again
    rebuild_usd: float | None  # what that write cost (None: no call, or no price for its model)
    refill_turns: int  # API calls between the compaction before it (or the session's start) and it
    thrash: bool  # automatic, and within REFILL_TURNS calls of the compaction before it
    rereads: int  # files read before it and read again after it (up to the next compaction)
    reread_tokens: int  # what those reads put back into the context


@dataclass(kw_only=True, slots=True)
class SessionAudit(Wire):
    """The last row of a session in `audit --json`."""

    file: str
    total: Literal[True] = True
    compactions: int
    facts: int
    carried: int
    recall: float | None
    lost_facts: int
    rebuild_usd: float | None
    rereads: int
    reread_tokens: int
    thrash: int  # compactions that refilled within REFILL_TURNS calls
    thrashing: bool  # THRASH_RUN of them in a row: what stops Claude Code 2.1.332's autocompact
    kind: Literal["compaction"] | None = sometimes()  # with note: a compaction side-call, not a session
    note: str | None = sometimes()


def _first_call(messages: Sequence[Message]) -> Message | None:
    return next((m for m in messages if is_real_response(m) and m.usage), None)


def _rebuild(call: Message | None, prices_table: Sequence[tuple[str, Prices]]) -> tuple[int | None, float | None]:
    """(tokens, dollars) the call wrote to the cache again, priced as `count --cost` prices it."""
    if call is None or call.usage is None:
        return None, None
    parts = token_parts(call.usage)
    written = parts.cache_write_5m + parts.cache_write_1h
    prices = price_of(call.model, prices_table)
    if prices is None:
        return written, None
    billed = dollars(parts, billed_rate(call.usage, prices), inference_scale(call.usage))
    return written, round(billed.cache_write_5m + billed.cache_write_1h, 6)


def _read_paths(messages: Sequence[Message]) -> set[str]:
    return {path for m in messages for b in m.content if is_tool_use(b) and (path := _read_path(b)) is not None}


def _read_path(block: dict[str, Any]) -> str | None:
    tool_input = input_of(block)
    path = tool_input.get("file_path") if name_of(block) == "Read" and isinstance(tool_input, dict) else None
    return path if isinstance(path, str) else None


def _rereads(before: Sequence[Message], after: Sequence[Message], counter: TextCounter) -> tuple[int, int]:
    """(files, tokens): the Read calls after a compaction of files read before it, and their results."""
    known = _read_paths(before)
    again: dict[str, str] = {}  # call id -> path
    for message in after:
        for block in message.content:
            if is_tool_use(block) and (path := _read_path(block)) in known:
                again[str(call_id(block))] = str(path)
    # Each result priced as the count prices it (an image its flat cost, not its base64).
    tokens = estimate_blocks([b for m in after for b in m.content if is_tool_result(b) and str(call_id(b)) in again], counter)
    return len(set(again.values())), tokens


# Kinds of which only the latest counts: a new one replaces the one an earlier compaction carried.
LATEST_ONLY = ("last-request", "current-work")


def facts_before(span: CompactionSpan, previous: CompactionSpan | None, inherited: Sequence[Fact]) -> list[Fact]:
    """The facts of the context a compaction replaced: those of the stretch since the compaction
    before it (its summary opens the stretch) and those that compaction carried. A fact an earlier
    compaction lost is counted lost there, not again."""
    since = previous.position if previous is not None else -1
    stretch = [m for m in span.before if m.entries and m.entries[0] > since]
    new = key_facts(stretch, [], [(p, typed) for p, typed in span.typed_before if p > since])
    replaced = {fact.kind for fact in new if fact.kind in LATEST_ONLY}
    unique: dict[tuple[str, str], Fact] = {}
    for fact in [*(f for f in inherited if f.kind not in replaced), *new]:
        unique.setdefault((fact.kind, fact.text), fact)
    return list(unique.values())


def audit_compaction(
    span: CompactionSpan,
    source: str,
    counter: TextCounter,
    previous: CompactionSpan | None = None,
    inherited: Sequence[Fact] = (),
    prices_table: Sequence[tuple[str, Prices]] = (),
) -> tuple[CompactionAudit, list[Fact]]:
    """The audit of one compaction, and the facts it carried (what the next one inherits)."""
    from .reports import MissingFact  # loaded when a session has a compaction to audit

    facts = facts_before(span, previous, inherited)
    checked = verify(facts, context_text(span.left))
    summary_tokens = sum(estimate_blocks(m.content, counter) for m in span.left if m.compact_summary)
    first = _first_call(span.after)
    written, usd = _rebuild(first, prices_table)
    since = previous.position if previous is not None else -1
    refill = sum(1 for m in span.before if is_real_response(m) and m.entries and m.entries[0] > since)
    rereads, reread_tokens = _rereads(span.before, span.after, counter)
    missing = set(map(id, checked.missing))
    audit = CompactionAudit(
        file=source,
        line=span.line,
        timestamp=span.timestamp,
        trigger=span.trigger,
        by=span.by,
        pre_tokens=span.pre_tokens,
        post_tokens=usage_prompt(first.usage) if first is not None and first.usage else None,
        summary_tokens=summary_tokens,
        facts=len(facts),
        carried=len(facts) - len(checked.missing),
        recall=rounded_down(checked.recall) if facts else None,
        lost=[MissingFact(kind=fact.kind, text=fact.text[:300]) for fact in checked.missing],
        cache_write_tokens=written,
        rebuild_usd=usd,
        refill_turns=refill,
        thrash=previous is not None and span.trigger == "auto" and refill <= REFILL_TURNS,
        rereads=rereads,
        reread_tokens=reread_tokens,
    )
    return audit, [fact for fact in facts if id(fact) not in missing]


def audit_session(spans: Sequence[CompactionSpan], source: str, counter: TextCounter, prices_table: Sequence[tuple[str, Prices]] = ()) -> list[CompactionAudit]:
    rows: list[CompactionAudit] = []
    carried: list[Fact] = []
    for number, span in enumerate(spans):
        row, carried = audit_compaction(span, source, counter, spans[number - 1] if number else None, carried, prices_table)
        rows.append(row)
    return rows


def session_total(rows: Sequence[CompactionAudit], source: str) -> SessionAudit:
    facts = sum(row.facts for row in rows)
    carried = sum(row.carried for row in rows)
    run = longest = 0
    for row in rows:
        run = run + 1 if row.thrash else 0
        longest = max(longest, run)
    costs = [row.rebuild_usd for row in rows if row.cache_write_tokens is not None]
    return SessionAudit(
        file=source,
        compactions=len(rows),
        facts=facts,
        carried=carried,
        recall=rounded_down(carried / facts) if facts else None,
        lost_facts=facts - carried,
        rebuild_usd=None if any(cost is None for cost in costs) else round(sum(cost or 0.0 for cost in costs), 6),
        rereads=sum(row.rereads for row in rows),
        reread_tokens=sum(row.reread_tokens for row in rows),
        thrash=sum(row.thrash for row in rows),
        thrashing=longest >= THRASH_RUN,
    )
