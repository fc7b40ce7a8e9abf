"""Properties of the transforming stages (microcompact, collapse, snip) over generated sessions.

The sessions come from strategies.stage_sessions(): claude_sessions() with tool results swapped for
longer ones from a small pool so that results repeat (collapse has something to fold) and outgrow
the placeholder (microcompact has something to clear). The invariant checks live in stage_checks.py.
"""

from __future__ import annotations

import io
from datetime import timedelta

import orjson
from ctxpipe.core.jsonl import ReadStats, iter_entries
from ctxpipe.core.microcompact import COMPACTABLE_TOOLS, PLACEHOLDER, MicrocompactSettings, timestamp_of
from ctxpipe.core.placeholders import STUB_PREFIX, UNCHANGED_STUB
from ctxpipe.core.stage import expand
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from stage_checks import (
    FMT,
    PIPELINES,
    STAGES,
    Stage,
    apply,
    check_idempotent,
    check_keep_last,
    check_pipeline,
    check_step,
    co,
    mc,
    message_uuids,
    objects,
    result_blocks,
    sn,
)
from strategies import stage_sessions as sessions

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FEWER = settings(SETTINGS, max_examples=60)

# --- the invariants, for every stage and pipeline --------------------------------------------


@SETTINGS
@given(sessions())
def test_every_stage_keeps_the_invariants(data: bytes) -> None:
    for stage in STAGES:
        check_step(apply(stage, data))


@SETTINGS
@given(sessions())
def test_every_stage_is_idempotent(data: bytes) -> None:
    for stage in STAGES:
        check_idempotent(stage, data)


@FEWER
@given(sessions(), st.sampled_from(PIPELINES))
def test_pipelines_keep_the_invariants_and_one_ledger_undoes_them(data: bytes, pipeline: tuple[Stage, ...]) -> None:
    runs = check_pipeline(pipeline, data)
    # The whole pipe run again on its own output changes nothing.
    again = [run.after for run in check_pipeline(pipeline, runs[-1].after)]
    assert again[-1] == runs[-1].after


@SETTINGS
@given(sessions(), st.sampled_from(STAGES))
def test_a_ledger_record_applied_to_other_bytes_is_skipped(data: bytes, stage: Stage) -> None:
    run = apply(stage, data)
    assume(run.record is not None)
    other = run.after + orjson.dumps({"type": "user", "message": {"role": "user", "content": "later"}}) + b"\n"
    assert expand(other, [run.record]) == (other, 0)
    assert expand(run.before, [run.record]) == (run.before, 0)  # the input is not the output it was made for
    # The record of another stage in the list does not disturb the right one.
    assert expand(run.after, [run.record, {**run.record, "output_sha256": "0" * 64}]) == (data, 1)


# --- microcompact --------------------------------------------------------------------------------


def _text_size(content) -> tuple[int, bool]:
    if isinstance(content, str):
        return len(content), False
    texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    images = any(isinstance(b, dict) and b.get("type") in ("image", "document") for b in content)
    return sum(len(t) for t in texts), images


def expected_cleared(data: bytes, tools: frozenset[str], keep_recent: int) -> list[str]:
    """An oracle: the compactable calls of the active context older than the last max(1, k),
    whose result is longer than the placeholder (and not the placeholder already)."""
    entries = FMT.read_region(data, "x", "fail", ReadStats())[1]
    messages = FMT.messages(entries)
    calls = [(b["id"], b["name"]) for m in messages for b in m.content if b.get("type") == "tool_use"]
    results = {b["tool_use_id"]: b for m in messages for b in m.content if b.get("type") == "tool_result"}
    compactable = [tool_id for tool_id, name in calls if name in tools and name not in ("Task", "Agent") and not name.startswith("mcp__")]
    older = compactable[: -max(1, keep_recent)]
    chosen = []
    for tool_id in older:
        block = results.get(tool_id)
        if block is None or block.get("content") == PLACEHOLDER:
            continue
        size, images = _text_size(block.get("content"))
        if size > len(PLACEHOLDER) or (images and size > 0):
            chosen.append(tool_id)
    return chosen


@SETTINGS
@given(sessions(), st.integers(0, 6), st.sampled_from([None, ("Read", "Task"), ("Bash", "Grep", "mcp__github__search", "Edit")]))
def test_microcompact_clears_exactly_the_old_compactable_results(data: bytes, keep_recent: int, tools) -> None:
    stage = mc(keep_recent=keep_recent, tools=tools)
    chosen = frozenset(tools) if tools else COMPACTABLE_TOOLS
    run = apply(stage, data)
    cleared = [item["tool_use_id"] for item in run.outcome.removed]
    assert cleared == expected_cleared(data, chosen, keep_recent)
    check_step(run)
    for item in run.outcome.removed:
        assert item["tool"] in chosen and item["tool"] not in ("Task",) and not item["tool"].startswith("mcp__")


@SETTINGS
@given(sessions(), st.integers(0, 180))
def test_microcompact_time_trigger(data: bytes, gap_minutes: int) -> None:
    entries = list(iter_entries(io.BytesIO(data), "x"))
    messages = FMT.messages(entries)
    last = next((m for m in reversed(messages) if m.role == "assistant"), None)
    assume(last is not None)
    moment = timestamp_of(entries[last.entries[-1]].obj)
    assert moment is not None
    forced = apply(mc(keep_recent=1), data)

    def at(now):
        settings = MicrocompactSettings(keep_recent=1, gap_minutes=gap_minutes)
        return apply(Stage("microcompact", ("microcompact",), settings, now), data)

    early = at(moment + timedelta(minutes=gap_minutes) - timedelta(seconds=1))
    assert early.after == data and not early.outcome.changed
    if forced.outcome.changed:
        assert early.outcome.note.startswith("not triggered")
    for now in (moment + timedelta(minutes=gap_minutes), moment + timedelta(minutes=gap_minutes, hours=5)):
        late = at(now)
        # Triggered: the same results as --force, only the trigger differs.
        assert late.outcome.removed == forced.outcome.removed
        if late.outcome.changed:
            assert late.outcome.report.cleared == forced.outcome.report.cleared
            assert orjson.loads(late.after.splitlines()[-1])["microcompactMetadata"]["trigger"] == "auto"


# --- collapse ------------------------------------------------------------------------------------


@SETTINGS
@given(sessions())
def test_collapse_folds_only_into_a_later_identical_result_that_stays_whole(data: bytes) -> None:
    run = apply(co(), data)
    check_step(run)
    before = {obj.get("uuid"): obj for obj in objects(data)}
    entries = list(iter_entries(io.BytesIO(data), "x"))
    messages = FMT.messages(entries)
    calls = {b["id"]: b for m in messages for b in m.content if b.get("type") == "tool_use"}
    order = [b["id"] for m in messages for b in m.content if b.get("type") == "tool_use"]
    results_in = {tool_id: block for obj in before.values() for tool_id, block in result_blocks(obj).items()}
    results_out = {tool_id: block for obj in objects(run.after) for tool_id, block in result_blocks(obj).items()}
    for fold in run.outcome.report.folds if run.outcome.report else []:
        folded, survivor = fold.tool_use_id, fold.survivor
        assert order.index(folded) < order.index(survivor), "the later copy survives"
        assert calls[folded]["name"] == calls[survivor]["name"] == fold.tool
        assert calls[folded]["input"] == calls[survivor]["input"]
        original = results_in[folded]["content"]
        assert results_in[survivor]["content"] == original
        assert results_out[survivor]["content"] == original, "the survivor stays whole"
        text = original if isinstance(original, str) else orjson.dumps(original).decode()
        assert not text.startswith((UNCHANGED_STUB, STUB_PREFIX)) and text != PLACEHOLDER
        stub = results_out[folded]["content"]
        assert stub.startswith(STUB_PREFIX) and survivor in stub and fold.tool in stub
    # Nothing repeated and worth folding is left behind.
    in_context = {b["tool_use_id"] for m in FMT.messages(list(iter_entries(io.BytesIO(run.after), "y"))) for b in m.content if b.get("type") == "tool_result"}
    seen: dict[tuple, list[str]] = {}
    for tool_id in order:
        if tool_id not in in_context:
            continue
        content = results_out[tool_id]["content"]
        text = content if isinstance(content, str) else orjson.dumps(content).decode()
        if text.startswith((UNCHANGED_STUB, STUB_PREFIX)) or text == PLACEHOLDER or len(text) < 200:
            continue
        key = (calls[tool_id]["name"], orjson.dumps(calls[tool_id]["input"], option=orjson.OPT_SORT_KEYS), text)
        seen.setdefault(key, []).append(tool_id)
    assert all(len(ids) == 1 for ids in seen.values()), seen


# --- snip ------------------------------------------------------------------------------------------


@SETTINGS
@given(sessions(), st.integers(1, 12))
def test_snip_keep_last_keeps_the_opening_message_and_a_whole_tail(data: bytes, keep_last: int) -> None:
    run = apply(sn(keep_last=keep_last), data)
    check_step(run)
    check_keep_last(run, keep_last)
    check_idempotent(sn(keep_last=keep_last), data)


@SETTINGS
@given(sessions(), st.data())
def test_snip_before_and_range_keep_the_invariants(data: bytes, draw) -> None:
    messages = message_uuids(data)
    assume(len(messages) >= 3)
    uuids = [uuid for message in messages for uuid in message]
    before = draw.draw(st.sampled_from(uuids[1:]))
    run = apply(sn(before=before), data)
    check_step(run)
    if run.outcome.changed:
        after = message_uuids(run.after)
        assert after[0] == messages[0]
        assert any(before in message for message in after), "the --before line stays"
    check_idempotent(sn(before=before), data)
    start, end = sorted(draw.draw(st.lists(st.sampled_from(uuids), min_size=2, max_size=2)), key=uuids.index)
    ranged = apply(sn(span=(start, end)), data)
    check_step(ranged)
    assert ranged.outcome.changed
    assert {start, end} <= {item["uuid"] for item in ranged.outcome.removed}, "the range's ends go"
    check_idempotent(sn(span=(start, end)), data)
    # The same range by line numbers removes the same lines.
    lines = {obj.get("uuid"): number for number, obj in enumerate(objects(data), 1)}
    by_line = apply(sn(span=(str(lines[start]), str(lines[end]))), data)
    assert by_line.after == ranged.after
    check_step(by_line)
