"""What ctxpipe says inside a live session, through the agent's hooks (the texts; jobs/hooks.py runs them).

Before a compaction: the facts the summary must keep, most important first, within the characters
the agent appends of a hook's answer. After it: the facts the summary lost, to put back, and a
one-line verdict. The facts are the audit's and the verifier's (core/facts.py, summarize.key_facts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .facts import Facts
from .fields import rounded_percent
from .summarize import FACT_LABELS, Fact

PRE_COMPACT_CHARS = 10_000  # Claude Code 2.1.332 appends at most this much of a PreCompact hook's answer
REINJECT_CHARS = 8_000  # what is put back after a compaction, at most (about 2,000 tokens)
ITEM_CHARS = 600  # one fact, at most: a giant paste is named by its start
FILES_LISTED = 60

# The order a summary must keep facts in when it cannot keep them all.
ORDER = ("last-request", "queued", "instruction", "task", "error", "current-work", "file", "fixed-error")


def _cut(text: str, limit: int = ITEM_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _within(lines: Sequence[str], limit: int, more: str) -> str:
    """`lines` joined, as many as fit in `limit` characters, then how many were left out."""
    kept: list[str] = []
    used = 0
    for number, line in enumerate(lines):
        tail = more.format(len(lines) - number) if number < len(lines) - 1 else ""
        if used + len(line) + 1 + len(tail) > limit and kept:
            kept.append(more.format(len(lines) - number))
            break
        kept.append(line)
        used += len(line) + 1
    return "\n".join(kept)


@dataclass(frozen=True)
class KeepList:
    """The facts a compaction must keep, in the order they matter."""

    facts: list[Fact]
    queued: frozenset[str]  # texts of the messages typed while the agent worked (delivered mid-turn)

    def rank(self, fact: Fact) -> int:
        kind = "queued" if fact.kind == "instruction" and fact.text in self.queued else fact.kind
        return ORDER.index(kind) if kind in ORDER else len(ORDER)


def keep_list(key: Sequence[Fact], gathered: Facts) -> KeepList:
    """`key` (summarize.key_facts) ranked: the last request, the messages queued mid-turn, the other
    typed messages latest first, open tasks, unresolved errors, the current work, edited files."""
    queued = frozenset(typed.text for typed in gathered.typed if typed.source == "queued")
    listing = KeepList(list(key), queued)
    typed_order = {typed.text: number for number, typed in enumerate(gathered.typed)}
    ordered = sorted(listing.facts, key=lambda fact: (listing.rank(fact), -typed_order.get(fact.text, 0)))
    return KeepList(ordered, queued)


def shorter_path(path: str, cwd: str | None) -> str:
    """`path` from the project's folder when it is below it (a tail the verifier accepts for it)."""
    if cwd and path.startswith(cwd.rstrip("/") + "/") and path.count("/") - cwd.rstrip("/").count("/") >= 2:
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def _listed(facts: Sequence[Fact]) -> list[Fact]:
    """The facts as listed: the last request once (not again as a message the user typed)."""
    last = {fact.text for fact in facts if fact.kind == "last-request"}
    return [fact for fact in facts if not (fact.kind == "instruction" and fact.text in last)]


def pre_compact_text(listing: KeepList, plan: str | None, cwd: str | None = None, limit: int = PRE_COMPACT_CHARS) -> str:
    """The Additional Instructions for the summary: what it must carry, quoted, most important first."""
    if not listing.facts and not plan:
        return ""
    lines = ["ctxpipe: the summary must keep these facts of the conversation, quoted exactly, most important first:"]
    files = [shorter_path(fact.text, cwd) for fact in listing.facts if fact.kind == "file"]
    for fact in _listed(listing.facts):
        if fact.kind == "file":
            continue
        label = "Message the user typed while you worked (it reached you mid-turn)" if listing.rank(fact) == 1 else FACT_LABELS.get(fact.kind, fact.kind)
        lines.append(f"- {label}: {_cut(fact.text)}")
    if files:
        lines.append(f"- Files edited or written ({len(files)}): " + ", ".join(files[:FILES_LISTED]) + (" …" if len(files) > FILES_LISTED else ""))
    if plan:
        lines.append(f"- The plan being followed is in {plan}: say so.")
    return _within(lines, limit, "- … and {} more (keep every user message and open task)")


def reinjection_text(lost: Sequence[Fact], limit: int = REINJECT_CHARS) -> str:
    """What is put back after a compaction whose summary lost facts (empty when it lost none)."""
    if not lost:
        return ""
    lines = [f"ctxpipe: the summary of the conversation above left out {len(lost)} fact(s) from before it; they still hold:"]
    lines += [f"- {FACT_LABELS.get(fact.kind, fact.kind)}: {_cut(fact.text)}" for fact in _listed(lost)]
    return _within(lines, limit, "- … and {} more (the transcript holds them)")


def verdict(facts: int, lost: int) -> str:
    """post-compact's line: what the summary carried, and what happens to what it lost."""
    if not facts:
        return "ctxpipe: no fact to check in the history this summary replaced"
    carried = facts - lost
    share = rounded_percent(carried / facts)
    if not lost:
        return f"ctxpipe: the summary carried all {facts} facts ({share})"
    return f"ctxpipe: the summary carried {carried} of {facts} facts ({share}); the {lost} it lost go back in at the next turn"
