"""Running the transforming stages in-process, and checking the invariants every stage must keep.

Shared by test_stages.py and test_stage_properties.py (import with `from stage_checks import ...`).

`apply(stage, data)` does what `cli/stages.run_stage` does, without a subprocess: read the region the
stage may edit (`read_region`, or every line for a snip by line numbers), transform it, and write
`prefix + entries`, with the ledger record `expand` needs. `check_step` then compares input and
output bytes line by line and asserts the invariants of DESIGN.md:

- no tool_use without its tool_result and no orphan tool_result in the active context that the
  input did not already have (`convert_with_report(...).unanswered/orphans`);
- the lines of one message.id kept or removed together;
- thinking blocks and their signatures untouched;
- every line the stage did not change byte-identical: the changed lines are exactly the ones whose
  results were cleared or folded (microcompact, collapse) or re-parented (snip), the removed ones
  exactly the ones listed in snipMetadata.removedUuids, plus one appended marker line;
- the ledger record rebuilds the input, and `validate` finds no new error nor dangling parent.
"""

from __future__ import annotations

import copy
import io
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import ctxpipe
import orjson
from ctxpipe.core import collapse, microcompact, snip
from ctxpipe.core.collapse import STUB_PREFIX, CollapseSettings
from ctxpipe.core.fields import iso, moment
from ctxpipe.core.jsonl import Entry, ReadStats, iter_entries
from ctxpipe.core.microcompact import PLACEHOLDER, MicrocompactSettings
from ctxpipe.core.snip import SnipSettings
from ctxpipe.core.stage import Outcome, StageContext, expand, ledger_record, split_lines
from ctxpipe.formats import get

FMT = get("claude-code")
NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
NOW_ISO = "2030-01-02T03:04:05.000Z"

RUNS = {"microcompact": microcompact.run, "collapse": collapse.run, "snip": snip.run}
MARKER_SUBTYPE = {"microcompact": "microcompact_boundary", "collapse": "ctxpipe_collapse", "snip": "snip_boundary"}
MARKER_KEY = {"microcompact": "microcompactMetadata", "collapse": "ctxpipeMetadata", "snip": "snipMetadata"}


@dataclass(frozen=True)
class Stage:
    """One stage with its settings, runnable in-process (`transform`) and through the CLI (`argv`)."""

    name: str  # microcompact | collapse | snip
    argv: tuple[str, ...]
    settings: Any  # the stage's Settings, as the CLI builds them from argv
    now: datetime = NOW  # the clock the CLI gets from --now

    @property
    def label(self) -> str:
        return " ".join(self.argv)

    @property
    def marker(self) -> bool:
        return not self.settings.no_marker

    @property
    def whole(self) -> bool:
        """Whether the CLI reads every line (a snip range given by line numbers) or only the region."""
        return self.name == "snip" and snip.by_line(self.settings)

    def transform(self, entries: list[Entry]) -> Outcome:
        # The stage's own run, as the CLI calls it, with the clock --now gives.
        return RUNS[self.name](entries, FMT, self.settings, StageContext(now=self.now))


def mc(keep_recent: int = 5, marker: bool = True, tools: Sequence[str] | None = None) -> Stage:
    argv = ["microcompact", "--force", "--keep-recent", str(keep_recent), "--now", NOW_ISO]
    if tools is not None:
        argv += ["--tools", ",".join(tools)]
    if not marker:
        argv.append("--no-marker")
    names = None if tools is None else frozenset(tools)
    return Stage("microcompact", tuple(argv), MicrocompactSettings(keep_recent=keep_recent, tools=names, force=True, no_marker=not marker))


def co(marker: bool = True) -> Stage:
    argv = ["collapse", "--now", NOW_ISO] + ([] if marker else ["--no-marker"])
    return Stage("collapse", tuple(argv), CollapseSettings(no_marker=not marker))


def sn(keep_last: int | None = None, before: str | None = None, span: tuple[str, str] | None = None, marker: bool = True) -> Stage:
    argv = ["snip", "--now", NOW_ISO]
    if keep_last is not None:
        argv += ["--keep-last", str(keep_last)]
    if before is not None:
        argv += ["--before", before]
    if span is not None:
        argv += ["--range", f"{span[0]}..{span[1]}"]
    if not marker:
        argv.append("--no-marker")
    return Stage("snip", tuple(argv), SnipSettings(before=before, range=span, keep_last=keep_last, no_marker=not marker))


# The stages every invariant is checked on, and pipelines of two or three of them.
STAGES: list[Stage] = [mc(), mc(keep_recent=1), mc(keep_recent=0, marker=False), co(), co(marker=False), sn(keep_last=1), sn(keep_last=3), sn(keep_last=6)]
PIPELINES: list[tuple[Stage, ...]] = [
    (mc(keep_recent=1), co()),
    (co(), mc(keep_recent=1)),
    (sn(keep_last=4), mc(keep_recent=1)),
    (mc(keep_recent=2), co(), sn(keep_last=4)),
    (co(), sn(keep_last=2), mc(keep_recent=1)),
    (sn(keep_last=6), co(), mc(keep_recent=0)),
]


@dataclass
class Run:
    stage: Stage
    before: bytes
    after: bytes
    outcome: Outcome
    record: dict[str, Any] | None  # the ledger record, None when nothing changed


def apply(stage: Stage, data: bytes, source: str = "in.jsonl") -> Run:
    """What `ctxpipe <stage> --ledger L` writes for `data`, and the record it appends to L."""
    stats = ReadStats()
    if stage.whole:
        offset, entries = 0, list(iter_entries(io.BytesIO(data), source, "fail", stats))
    else:
        offset, entries = FMT.read_region(data, source, "fail", stats)
    outcome = stage.transform(entries)
    if not outcome.changed:
        return Run(stage, data, data, outcome, None)
    record, pieces = ledger_record(stage.name, data[:offset], entries, outcome.entries, outcome.removed)
    return Run(stage, data, data[:offset] + b"".join(pieces), outcome, record)


def apply_all(stages: Sequence[Stage], data: bytes) -> list[Run]:
    runs = []
    for stage in stages:
        runs.append(apply(stage, data))
        data = runs[-1].after
    return runs


# --- reading what a transcript holds ------------------------------------------------------------


def objects(data: bytes) -> list[dict[str, Any]]:
    return [entry.obj for entry in iter_entries(io.BytesIO(data), "x")]


def tool_problems(data: bytes) -> tuple[set[str], set[str]]:
    """(unanswered tool_use ids, orphan tool_result ids) of the active context."""
    _, report = ctxpipe.convert_with_report(ctxpipe.read_transcript(data, "claude-code"), "anthropic")
    return {p.tool_use_id for p in report.unanswered}, {p.tool_use_id for p in report.orphans}


def response_groups(objs: Sequence[dict[str, Any]]) -> dict[str, set[Any]]:
    """message.id -> the uuids of its assistant lines."""
    groups: dict[str, set[Any]] = {}
    for obj in objs:
        message = obj.get("message")
        if obj.get("type") == "assistant" and isinstance(message, dict) and isinstance(message.get("id"), str):
            groups.setdefault(message["id"], set()).add(obj.get("uuid"))
    return groups


def thinking_blocks(objs: Sequence[dict[str, Any]]) -> Counter:
    found: Counter = Counter()
    for obj in objs:
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") in ("thinking", "redacted_thinking"):
                found[(obj.get("uuid"), orjson.dumps(block, option=orjson.OPT_SORT_KEYS))] += 1
    return found


def findings(data: bytes) -> list[Any]:
    return ctxpipe.validate_transcript(ctxpipe.read_transcript(data, "claude-code"))


def result_blocks(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """tool_use_id -> tool_result block of a line."""
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return (
        {str(block.get("tool_use_id")): block for block in content if isinstance(block, dict) and block.get("type") == "tool_result"}
        if isinstance(content, list)
        else {}
    )


def context_uuids(data: bytes) -> list[str]:
    entries = list(iter_entries(io.BytesIO(data), "x"))
    return [entries[p].obj["uuid"] for p in FMT.context_positions(entries) if isinstance(entries[p].obj.get("uuid"), str)]


def message_uuids(data: bytes) -> list[tuple[str, ...]]:
    """The active context's messages, each as the uuids of its lines."""
    entries = list(iter_entries(io.BytesIO(data), "x"))
    return [tuple(entries[p].obj.get("uuid") for p in message.entries) for message in FMT.messages(entries)]


# --- the invariants -----------------------------------------------------------------------------


def _same_line(old: bytes, new: bytes) -> bool:
    """Byte-identical, allowing only an unterminated last line to gain its newline."""
    return old == new or (not old.endswith(b"\n") and old + b"\n" == new)


def check_marker(run: Run, kept: list[bytes]) -> dict[str, Any] | None:
    """The appended marker (when the stage writes one): its shape, parent and metadata."""
    stage = run.stage
    out = split_lines(run.after)
    kept_objs = [orjson.loads(line) for line in kept]
    if not stage.marker or not any(isinstance(obj.get("uuid"), str) for obj in kept_objs):
        # No marker asked for, or nothing left for it to hang off (a snip of everything).
        assert len(out) == len(kept)
        return None
    assert len(out) == len(kept) + 1, "exactly one marker line is appended"
    marker = orjson.loads(out[-1])
    assert marker["type"] == "system"
    assert marker["subtype"] == MARKER_SUBTYPE[stage.name]
    # Stamped with the run's clock, or a millisecond after the newest line above it when that is later
    # (an earlier stage's marker at the same clock): Claude Code resumes from the newest line.
    stamps = [t for obj in kept_objs if (t := moment(obj.get("timestamp"))) is not None]
    newest = max(stamps, default=None)
    now = moment(NOW_ISO)
    assert now is not None
    assert marker["timestamp"] == (NOW_ISO if newest is None or now > newest else iso(newest + timedelta(milliseconds=1)))
    # It joins the conversation it hangs off: the main chain, or a subagent file's side chain (its agentId too).
    with_uuid = [obj for obj in kept_objs if isinstance(obj.get("uuid"), str)]
    conversation = [obj for obj in with_uuid if obj.get("type") in ("user", "assistant", "system", "attachment")]
    main_chain = [obj for obj in conversation if obj.get("isSidechain") is not True]
    parent = (main_chain or conversation or with_uuid)[-1]
    assert marker["parentUuid"] == parent["uuid"], "the marker hangs off the last conversation line"
    assert marker["isSidechain"] is (parent.get("isSidechain") is True)
    if marker["isSidechain"] and "agentId" in parent:
        assert marker["agentId"] == parent["agentId"]
    metadata = marker[MARKER_KEY[stage.name]]
    assert isinstance(metadata["tokensSaved"], int) and metadata["tokensSaved"] >= 0
    return metadata


def check_result_edits(run: Run) -> None:
    """microcompact/collapse: the changed lines are exactly those holding a cleared/folded result."""
    stage = run.stage
    lines_in, lines_out = split_lines(run.before), split_lines(run.after)
    kept = lines_out[: len(lines_in)]
    assert len(kept) == len(lines_in)
    metadata = check_marker(run, kept)
    edited_ids = [item["tool_use_id"] for item in run.outcome.removed]
    assert edited_ids and len(set(edited_ids)) == len(edited_ids)
    if metadata is not None:
        listed = metadata["compactedToolIds"] if stage.name == "microcompact" else metadata["foldedToolIds"]
        assert sorted(listed) == sorted(edited_ids)
        assert metadata["tokensSaved"] == run.outcome.report.tokens_saved <= run.outcome.report.removed_estimate
    seen: list[str] = []
    changed_uuids = set()
    for old, new in zip(lines_in, kept):
        if _same_line(old, new):
            continue
        old_obj, new_obj = orjson.loads(old), orjson.loads(new)
        changed_uuids.add(old_obj.get("uuid"))
        old_results, new_results = result_blocks(old_obj), result_blocks(new_obj)
        assert old_results.keys() == new_results.keys()
        restored = copy.deepcopy(new_obj)
        for tool_id, block in result_blocks(restored).items():
            if old_results[tool_id] != block:
                assert tool_id in edited_ids, f"{tool_id} changed but the stage does not say it cleared it"
                seen.append(tool_id)
                if stage.name == "microcompact":
                    assert block["content"] == PLACEHOLDER
                else:
                    assert block["content"].startswith(STUB_PREFIX)
                # Nothing but the content changes: tool_use_id, is_error and the rest stay.
                assert {k: v for k, v in block.items() if k != "content"} == {k: v for k, v in old_results[tool_id].items() if k != "content"}
                block["content"] = old_results[tool_id]["content"]
        assert restored == old_obj, "a changed line differs elsewhere than in the cleared result"
        assert new.endswith(b"\r\n") == old.endswith(b"\r\n")
    assert sorted(seen) == sorted(edited_ids), "every cleared/folded result is on exactly one changed line"
    assert changed_uuids == {item["uuid"] for item in run.outcome.removed}


def check_snip_edits(run: Run) -> None:
    """snip: lines are kept byte-identical, re-parented (parentUuid only), or removed and listed."""
    lines_in, lines_out = split_lines(run.before), split_lines(run.after)
    removed_count = sum(1 for _ in run.outcome.removed)
    kept = lines_out[: len(lines_in) - removed_count]
    metadata = check_marker(run, kept)
    removed_uuids = [item["uuid"] for item in run.outcome.removed]
    if metadata is not None:
        assert metadata["removedUuids"] == [u for u in removed_uuids if u is not None]
        assert metadata["removedMessages"] == run.outcome.report.removed_messages >= 1
    gone = set(removed_uuids)
    j = 0
    dropped = []
    for old in lines_in:
        old_obj = orjson.loads(old)
        new = kept[j] if j < len(kept) else None
        if new is not None and _same_line(old, new):
            j += 1
            continue
        new_obj = orjson.loads(new) if new is not None else None
        if new_obj is not None and new_obj.get("uuid") == old_obj.get("uuid") and old_obj.get("uuid") not in gone:
            # Re-parented: only parentUuid changed, from a removed line to a surviving ancestor.
            assert old_obj.get("parentUuid") in gone
            assert new_obj["parentUuid"] not in gone
            assert {**new_obj, "parentUuid": old_obj["parentUuid"]} == old_obj
            j += 1
            continue
        assert old_obj.get("uuid") in gone, f"line {old_obj.get('uuid')} vanished without being listed as removed"
        dropped.append(old_obj.get("uuid"))
    assert j == len(kept)
    assert sorted(dropped, key=str) == sorted(removed_uuids, key=str)
    # No survivor points into the removed range. Where a uuid is on several lines (history above a
    # compact boundary repeated in the kept tail) the later line wins, as Claude Code loads it, and a
    # removed uuid is dropped on resume whatever line holds it.
    winners = {obj.get("uuid"): obj for obj in map(orjson.loads, kept)}
    for line_uuid, obj in winners.items():
        if line_uuid not in gone:
            assert obj.get("parentUuid") not in gone


def check_step(run: Run) -> None:
    """Every invariant of one stage run on one input."""
    if not run.outcome.changed:
        assert run.after == run.before, "a stage that changes nothing passes its input through byte for byte"
        assert run.record is None
        return
    before, after = run.before, run.after
    # Tool pairs: the output has no pairing problem the input did not have.
    unanswered_in, orphans_in = tool_problems(before)
    unanswered_out, orphans_out = tool_problems(after)
    assert unanswered_out <= unanswered_in, f"new unanswered tool_use: {unanswered_out - unanswered_in}"
    assert orphans_out <= orphans_in, f"new orphan tool_result: {orphans_out - orphans_in}"
    objs_in, objs_out = objects(before), objects(after)
    # The lines of one response are kept or removed together.
    groups_in, groups_out = response_groups(objs_in), response_groups(objs_out)
    assert set(groups_out) <= set(groups_in)
    for message_id, uuids in groups_out.items():
        assert uuids == groups_in[message_id], f"response {message_id} split"
    # Thinking blocks and signatures untouched (snip may drop whole lines that hold them).
    thinking_in, thinking_out = thinking_blocks(objs_in), thinking_blocks(objs_out)
    if run.stage.name == "snip":
        assert not thinking_out - thinking_in
        surviving = {obj.get("uuid") for obj in objs_out}
        assert +Counter({k: v for k, v in thinking_in.items() if k[0] in surviving}) == thinking_out
    else:
        assert thinking_out == thinking_in
    # Byte identity of every line the stage did not change.
    if run.stage.name == "snip":
        check_snip_edits(run)
    else:
        check_result_edits(run)
    # The ledger record gives the input back.
    assert run.record is not None
    assert expand(after, [run.record]) == (before, 1)
    # validate: no new error, no new dangling parent.
    found_in, found_out = findings(before), findings(after)
    errors_in = {(f.code, f.message) for f in found_in if f.severity == "error"}
    assert {(f.code, f.message) for f in found_out if f.severity == "error"} <= errors_in
    dangling_in = {f.message for f in found_in if f.code == "dangling-parent"}
    assert {f.message for f in found_out if f.code == "dangling-parent"} <= dangling_in


def check_idempotent(stage: Stage, data: bytes) -> None:
    once = apply(stage, data).after
    twice = apply(stage, once)
    assert twice.after == once, f"{stage.label} changed its own output again: {twice.outcome.note}"
    assert not twice.outcome.changed


def check_pipeline(stages: Sequence[Stage], data: bytes) -> list[Run]:
    """Each step keeps the invariants; one ledger shared by the steps gives the input back."""
    runs = apply_all(stages, data)
    for run in runs:
        check_step(run)
    records = [run.record for run in runs if run.record is not None]
    assert expand(runs[-1].after, records) == (data, len(records))
    unanswered_in, orphans_in = tool_problems(data)
    unanswered_out, orphans_out = tool_problems(runs[-1].after)
    assert unanswered_out <= unanswered_in and orphans_out <= orphans_in
    return runs


def check_keep_last(run: Run, keep_last: int) -> None:
    """snip --keep-last N: the opening message and at least the last N messages stay, whole."""
    before, after = message_uuids(run.before), message_uuids(run.after)
    if not run.outcome.changed:
        return
    assert after[0] == before[0], "the opening message stays"
    assert len(after) >= min(len(before), keep_last + 1)
    assert after[-keep_last:] == before[-keep_last:], "the last N messages stay"
    assert after[1:] == before[len(before) - len(after) + 1 :], "what stays after the opening message is a tail"
