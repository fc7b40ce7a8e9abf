"""`snip`: remove a range of the active context on request, keeping every pair and response whole.

The cut is widened until no tool_use is separated from its tool_result and no API response (the
lines of one message.id) is split. Lines whose parent was removed are re-parented to their nearest
surviving ancestor, and a `snip_boundary` record lists the removed uuids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .blocks import call_id, content_of, is_tool_result, is_tool_use
from .count import Estimates, anchor_index, calibrate, priced_blocks
from .errors import CtxpipeError, SettingsError
from .fields import iso
from .fields import text as field_text
from .jsonl import Entry
from .model import Message
from .placeholders import survivor_named
from .reports import SnipExtras
from .setting import no_marker, setting
from .stage import Outcome, Stage, StageContext
from .tokens import PiecesCounter
from .transcript_format import WritableFormat


def _index_of(messages: Sequence[Message], entries: Sequence[Entry], key: str) -> int | None:
    """The message holding the line with this uuid, or starting at this line number."""
    for index, message in enumerate(messages):
        for position in message.entries:
            obj = entries[position].obj
            if obj.get("uuid") == key or (key.isdigit() and entries[position].line == int(key)):
                return index
    return None


def _widen(messages: Sequence[Message], first: int, last: int) -> tuple[int, int]:
    """Grow [first, last] until every tool pair touching it lies wholly inside it."""
    home: dict[str, int] = {}
    answer: dict[str, int] = {}
    for index, message in enumerate(messages):
        for block in message.content:
            # str(): a tool block without an id files under "None", as it always has.
            if is_tool_use(block):
                home[str(call_id(block))] = index
            elif is_tool_result(block):
                answer[str(call_id(block))] = index
    changed = True
    while changed:
        changed = False
        for tool_id, use in home.items():
            result = answer.get(tool_id)
            if result is None:
                continue
            if first <= use <= last < result:
                last, changed = result, True
            elif use < first <= result <= last:
                first, changed = use, True
    return first, last


def message_lines(messages: Sequence[Message], entries: Sequence[Entry], most: int = 8) -> str:
    """Where a bound may fall, for the error: the lines the active context's messages are on, as
    runs ("lines 3-5, 9, 12-40"), the first and last runs when there are many."""
    lines = sorted({entries[position].line for m in messages for position in m.entries if entries[position].line})
    if not lines:
        return "its messages have no line numbers here: give a uuid"
    runs: list[list[int]] = []
    for line in lines:
        if runs and line == runs[-1][1] + 1:
            runs[-1][1] = line
        else:
            runs.append([line, line])
    shown = [f"{first}-{last}" if last > first else f"{first}" for first, last in runs]
    if len(shown) > most:
        shown = shown[: most // 2] + ["…"] + shown[-most // 2 :]
    return f"its {len(messages):,} messages are on lines {', '.join(shown)}"


def _crossing(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """(tool_use message, tool_result message) index pairs."""
    uses: dict[str, int] = {}
    pairs = []
    for index, message in enumerate(messages):
        for block in message.content:
            if is_tool_use(block):
                uses[str(call_id(block))] = index
            elif is_tool_result(block) and (tool_id := str(call_id(block))) in uses:
                pairs.append((uses[tool_id], index))
    return pairs


def _after_the_opening(messages: Sequence[Message], last: int) -> int:
    """The first message the cut may take after the opening one that stays: past the results of any
    tool call the opening message makes (a context that opens with a response, such as the tail
    of a session, would otherwise keep a tool_use whose result is gone)."""
    first = 1
    pairs = _crossing(messages)
    moved = True
    while moved and first <= last:
        moved = False
        for use, result in pairs:
            if use < first <= result:
                first, moved = result + 1, True
    return first


def _pointed_to(removed: Sequence[Message], staying: Sequence[Message]) -> str | None:
    """A call whose result the cut removes while a collapse stub that stays points to it (the stub
    would then point to nothing, and no copy of that result would be left), or None."""
    results = {str(call_id(block)) for message in removed for block in message.content if is_tool_result(block)}
    for message in staying:
        for block in message.content:
            content = content_of(block) if is_tool_result(block) else None
            named = survivor_named(content) if isinstance(content, str) else None
            if named is not None and named in results:
                return named
    return None


def _tail_start(messages: Sequence[Message], wanted: int) -> int | None:
    """The latest index at or before `wanted` where the kept tail can begin: no tool pair crosses
    it. The opening message (the task, or the compact summary) always stays, so the context still
    starts with a user turn; None when nothing between it and the tail can go."""
    pairs = _crossing(messages)
    for cut in range(min(wanted, len(messages) - 1), 1, -1):
        if not any(use < cut <= result for use, result in pairs):
            return cut
    return None


def snip(entries: list[Entry], transcript_format: WritableFormat, settings: SnipSettings, now: datetime, previously_removed: set[str] | None = None) -> Outcome:
    """Remove what the settings name; `now` dates the marker, `previously_removed` makes a repeated snip a no-op."""
    messages = transcript_format.messages(entries)
    if not messages:
        return Outcome(entries, False, "nothing to snip: the active context is empty")
    previously_removed = previously_removed or set()
    if settings.keep_last is not None or settings.before is not None:
        if settings.keep_last is not None:
            wanted = len(messages) - settings.keep_last
        elif settings.before is not None:
            found = _index_of(messages, entries, settings.before)
            if found is None:
                if settings.before in previously_removed:
                    return Outcome(entries, False, f"nothing to snip: {settings.before} was snipped already")
                raise CtxpipeError(f"--before {settings.before}: no message of the active context has this uuid")
            wanted = found
        cut = _tail_start(messages, wanted)
        if cut is None:
            return Outcome(entries, False, "nothing to snip: only the opening message lies before the tail")
        first, last = _after_the_opening(messages, cut - 1), cut - 1
        if first > last:
            return Outcome(entries, False, "nothing to snip: what lies before the tail answers the opening message's tool calls")
    elif settings.range is not None:
        start_key, end_key = settings.range
        start, end = _index_of(messages, entries, start_key), _index_of(messages, entries, end_key)
        if start is None or end is None:
            missing = start_key if start is None else end_key
            if missing in previously_removed:
                return Outcome(entries, False, f"nothing to snip: {missing} was snipped already")
            raise CtxpipeError(f"--range: {missing} is not a line or uuid of a message in the active context; {message_lines(messages, entries)}")
        first, last = _widen(messages, min(start, end), max(start, end))
    else:
        raise SettingsError("snip", "give exactly one of --before, --range, --keep-last")
    kept = {position for message in messages[:first] + messages[last + 1 :] for position in message.entries}
    # A line holding a message that stays stays whole (a Codex compacted line holds the summary and
    # the messages it kept): the messages it holds are not removed, and not counted as removed.
    removed_messages = [message for message in messages[first : last + 1] if not kept.intersection(message.entries)]
    if not removed_messages:
        return Outcome(entries, False, "nothing to snip: what lies before the tail shares its line with a message that stays")
    doomed = {position for message in removed_messages for position in message.entries}
    orphaned = _pointed_to(removed_messages, [message for message in messages if doomed.isdisjoint(message.entries)])
    if orphaned:
        raise CtxpipeError(
            f"the cut would remove the result of {orphaned}, the one copy a collapse pointer that stays refers to "
            "(collapse folded the earlier copies into it): cut a range that keeps it, or snip before collapse"
        )
    # Lines of the chain between the removed messages (progress, attachments, hooks) go with them;
    # a line of the session's state (a Codex turn_context) stays for what follows it.
    low, high = min(doomed), max(doomed)
    for position in transcript_format.context_positions(entries):
        kind = entries[position].obj.get("type")
        if low < position < high and position not in kept and kind not in ("user", "assistant") and kind not in transcript_format.state_lines:
            doomed.add(position)
    estimates = Estimates(messages, PiecesCounter())
    calibration = calibrate(estimates)
    saved = sum(priced_blocks([block for message in removed_messages for block in message.content], estimates.counter, calibration))
    # The marker says what the usage that will anchor the output counted: the cut, when that
    # response comes after it; nothing when the cut took the last responses (the output is then
    # anchored earlier, and what followed is estimated as it now is).
    survivors = list(messages[:first]) + list(messages[last + 1 :])
    new_anchor = anchor_index(survivors)
    counted = saved if new_anchor is not None and new_anchor >= first else 0
    removed_uuids = [entries[p].obj["uuid"] for p in sorted(doomed) if isinstance(entries[p].obj.get("uuid"), str)]
    parent_of = {entries[p].obj["uuid"]: entries[p].obj.get("parentUuid") for p in doomed if isinstance(entries[p].obj.get("uuid"), str)}
    result: list[Entry] = []
    # Only the active context is re-linked: history above a boundary may share uuids with a kept tail.
    context_start = min(transcript_format.context_positions(entries), default=0)
    survivor = _survivors(parent_of)
    for position, entry in enumerate(entries):
        if position in doomed:
            continue
        parent = entry.obj.get("parentUuid")
        if position >= context_start and isinstance(parent, str) and parent in parent_of:
            entry = entry.replace({**entry.obj, "parentUuid": survivor(parent)})
        result.append(entry)
    metadata = {"removedUuids": removed_uuids, "removedMessages": len(removed_messages), "tokensSaved": counted}
    if not settings.no_marker:
        marker = transcript_format.marker(result, "snip_boundary", "History snipped", "snipMetadata", metadata, iso(now))
        if marker is not None:
            result.append(marker)
    removed = [{"uuid": field_text(entries[p].obj, "uuid"), "line": entries[p].line or None} for p in sorted(doomed)]
    report = SnipExtras(stage="snip", removed_messages=len(removed_messages), removed_lines=len(doomed), removed_estimate=saved, tokens_saved=counted)
    return Outcome(result, True, f"removed {len(removed_messages)} message{'s' if len(removed_messages) != 1 else ''} ({len(doomed)} lines)", report, removed)


def _survivors(parent_of: dict[str, Any]) -> Callable[[str], Any]:
    """The nearest ancestor of a removed line that is not removed, each chain walked once.

    Removed lines whose parentUuids loop (a hostile file) have none: their children become roots.
    """
    resolved: dict[str, Any] = {}

    def survivor(uuid: str) -> Any:
        path: list[str] = []
        on_path: set[str] = set()
        parent: Any = uuid
        while isinstance(parent, str) and parent in parent_of and parent not in resolved:
            if parent in on_path:
                parent = None
                break
            path.append(parent)
            on_path.add(parent)
            parent = parent_of[parent]
        else:
            if isinstance(parent, str) and parent in resolved:
                parent = resolved[parent]
        for removed in path:
            resolved[removed] = parent
        return parent

    return survivor


# --- the stage, declared once ----------------------------------------------------------------------


@dataclass(frozen=True)
class SnipSettings:
    """snip's settings as the command line spells them (see core.setting.Flag)."""

    before: str | None = setting(None, "--before", "Remove what lies between the opening message and the message holding this uuid.")
    range: tuple[str, str] | None = setting(None, "--range", "Remove A..B (uuids or line numbers), inclusive.", parse="span")
    keep_last: int | None = setting(None, "--keep-last", "Keep the opening message and the last N messages of the active context.", min=1)
    no_marker: bool = no_marker()


def check(settings: SnipSettings) -> None:
    if sum(value is not None for value in (settings.before, settings.range, settings.keep_last)) != 1:
        raise SettingsError("snip", "give exactly one of --before, --range, --keep-last")


def by_line(settings: SnipSettings) -> bool:
    """Line numbers need every line counted; uuids and --keep-last need only the active context."""
    return settings.range is not None and any(part.isdigit() for part in settings.range)


def snipped_before(entries: Sequence[Entry]) -> set[str]:
    """uuids earlier snip records removed, so a repeated snip is a quiet no-op, not an error."""
    found: set[str] = set()
    for entry in entries:
        metadata = entry.obj.get("snipMetadata")
        if entry.obj.get("subtype") == "snip_boundary" and isinstance(metadata, dict):
            found.update(str(u) for u in metadata.get("removedUuids", []))
    return found


def run(entries: list[Entry], transcript_format: WritableFormat, settings: SnipSettings, context: StageContext) -> Outcome:
    return snip(entries, transcript_format, settings, context.now, snipped_before(entries))


STAGE = Stage(
    "snip",
    SnipSettings,
    run,
    """Remove a range of the active context, widened so no tool pair or response is split.

    Give exactly one of --before, --range, --keep-last. The opening message of the active context
    (the task, or the compact summary) stays with --before and --keep-last, so the context still
    starts with a user turn; a tail that would begin inside a tool pair keeps a little more. Lines
    whose parent was removed are
    re-parented to the nearest line that stays; a snip_boundary record lists the removed uuids
    and the tokens they held (which `count` subtracts). Line numbers count from 1 in the input.

    Example:  ctxpipe snip --keep-last 40 --ledger undo.jsonl session.jsonl > shorter.jsonl
    """,
    in_compact=False,
    every_line=by_line,
    check=check,
)
