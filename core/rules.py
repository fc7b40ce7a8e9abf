"""The rules of the Claude Code release that wrote a session, where 2.1.332 differs from the seed's 2.1.88.

Every Claude Code line records the `version` that wrote it. A session follows the rules of the newest
known release not after its version (the highest its lines record: a session resumed by a newer
client runs by the newer rules now); a version before every known release gets the oldest, a file with no version
the latest. `--rules VERSION` (a known release, or `latest`) applies another.

What differs (read from the npm packages; ../shared/reference/claude-code-2.1.332.md has the diff):
- the window of a model not in the catalog: 200,000 in 2.1.88; 1M in 2.1.332 (or
  CLAUDE_CODE_MAX_CONTEXT_TOKENS; 200,000 when 1M windows are disabled);
- CLAUDE_CODE_AUTO_COMPACT_WINDOW: a whole number in 2.1.88 that caps the model window; in 2.1.332 it
  takes `k`/`m` (500k, 1.5m), a value below 100,000 counts as 100,000, and it caps only the
  autocompact window: the blocking limit stays the model window's;
- CLAUDE_CODE_MAX_CONTEXT_TOKENS with DISABLE_COMPACT sets every window (2.1.332);
- the max output of a model not in the catalog: 32,000 (upper 64,000) in 2.1.88, (32,000, 128,000) in 2.1.332;
- mechanisms 2.1.332 dropped: the time-based microcompact trigger (60 minutes idle) and session-memory
  compaction; it no longer writes microcompact_boundary lines;
- what a 2.1.332 summary carries: `<tools-used-before-summary>` in its message, and postTokens,
  durationMs, cumulativeDroppedTokens and preservedMessages in its boundary's compactMetadata.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .folds import Fold

LATEST = "latest"


@dataclass(frozen=True)
class Rules:
    release: str
    unknown_model_window: int
    window_env_suffixes: bool  # CLAUDE_CODE_AUTO_COMPACT_WINDOW takes k/m
    window_env_minimum: int  # a smaller value counts as this (0: none)
    window_env_caps_blocking: bool  # the cap lowers the blocking limit too (2.1.88)
    max_context_tokens: bool  # CLAUDE_CODE_MAX_CONTEXT_TOKENS is read
    fallback_max_output: tuple[int, int]
    time_based_microcompact: bool
    session_memory_compaction: bool
    summary_lists_tools: bool  # <tools-used-before-summary> in the summary message
    compact_metadata_totals: bool  # cumulativeDroppedTokens in compactMetadata
    # microcompact: the compactable tools' mcp__container__ forms are compactable too, and a result
    # already persisted to disk (it starts with <persisted-output>) is left as it is.
    container_tools_and_persisted_output: bool

    @property
    def version(self) -> tuple[int, ...]:
        return version_key(self.release) or ()


RULES: tuple[Rules, ...] = (
    Rules(
        release="2.1.88",
        unknown_model_window=200_000,
        window_env_suffixes=False,
        window_env_minimum=0,
        window_env_caps_blocking=True,
        max_context_tokens=False,
        fallback_max_output=(32_000, 64_000),
        time_based_microcompact=True,
        session_memory_compaction=True,
        summary_lists_tools=False,
        compact_metadata_totals=False,
        container_tools_and_persisted_output=False,
    ),
    Rules(
        release="2.1.332",
        unknown_model_window=1_000_000,
        window_env_suffixes=True,
        window_env_minimum=100_000,
        window_env_caps_blocking=False,
        max_context_tokens=True,
        fallback_max_output=(32_000, 128_000),
        time_based_microcompact=False,
        session_memory_compaction=False,
        summary_lists_tools=True,
        compact_metadata_totals=True,
        container_tools_and_persisted_output=True,
    ),
)
RELEASES = tuple(rules.release for rules in RULES)
SEED, CURRENT = RULES[0], RULES[-1]


def version_key(version: str | None) -> tuple[int, ...] | None:
    """'2.1.114' → (2, 1, 114); None for anything that is not a dotted version."""
    found = re.fullmatch(r"\s*v?(\d{1,6}(?:\.\d{1,6}){1,3})(?:[-+][\w.]*)?\s*", version or "")
    return tuple(int(part) for part in found.group(1).split(".")) if found else None


def known_rules(name: str) -> Rules:
    """The rules `--rules NAME` asks for; ValueError naming the known ones for anything else."""
    if name.strip().lower() == LATEST:
        return CURRENT
    for rules in RULES:
        if name.strip() == rules.release:
            return rules
    raise ValueError(f"unknown Claude Code release {name!r}: the rules ctxpipe knows are {', '.join(RELEASES)} and {LATEST}")


def rules_for(version: str | None, asked: str | None = None, asked_by: str | None = None) -> tuple[Rules, str]:
    """The rules to apply, and why: `asked` (--rules, or what `asked_by` names) over the session's `version`."""
    if asked is not None:
        rules = known_rules(asked)
        return rules, f"rules of Claude Code {rules.release}: {asked_by or f'--rules {asked}'}"
    key = version_key(version)
    if key is None:
        return CURRENT, f"rules of Claude Code {CURRENT.release}: the session records no version (the latest known release)"
    earlier = [rules for rules in RULES if rules.version <= key]
    if not earlier:
        return SEED, f"rules of Claude Code {SEED.release}: the session's version {version} is older than every known release"
    rules = earlier[-1]
    if rules.version == key:
        return rules, f"rules of Claude Code {rules.release}: the session's version"
    return rules, f"rules of Claude Code {rules.release}: the newest known release not after the session's version {version}"


VersionState = tuple[tuple[tuple[int, ...], str] | None, object]  # the highest (key, version) so far; the last line's version


def _newer(state: VersionState, entry: Any) -> VersionState:
    version = entry.obj.get("version") if isinstance(entry.obj, dict) else None
    if not isinstance(version, str) or version == state[1]:
        return state  # most lines repeat the version of the line above: its key changes nothing
    best, key = state[0], version_key(version)
    return ((key, version) if key is not None and (best is None or key > best[0]) else best), version


def _no_version() -> VersionState:
    return None, None


# The version of Claude Code that wrote a session: the highest dotted version its lines record.
VERSION: Fold[VersionState] = Fold("version", _no_version, _newer)


def session_version(entries: Iterable[Any]) -> str | None:
    """The Claude Code version that wrote a session's entries (core.jsonl.Entry): the highest its lines record."""
    from .jsonl import folded

    best = folded(entries, VERSION)[0]
    return best[1] if best else None


def session_rules(entries: Iterable[Any], asked: str | None = None) -> tuple[Rules, str]:
    """The rules for a session's entries (its session_version), or `asked`."""
    return rules_for(session_version(entries), asked)
