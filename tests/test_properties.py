"""Properties over generated Claude Code sessions (see strategies.py)."""

from __future__ import annotations

import io

import ctxpipe
from ctxpipe.core.jsonl import iter_entries, write_entries
from ctxpipe.formats import WriteOptions
from hypothesis import HealthCheck, given, settings
from strategies import claude_sessions

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(claude_sessions())
def test_reading_and_writing_back_is_byte_identical(data: bytes) -> None:
    out = io.BytesIO()
    write_entries(iter_entries(io.BytesIO(data), "gen"), out)
    assert out.getvalue() == data


@SETTINGS
@given(claude_sessions())
def test_generated_sessions_validate_without_errors(data: bytes) -> None:
    findings = ctxpipe.validate_transcript(ctxpipe.read_transcript(data))
    assert [f for f in findings if f.severity == "error"] == []


@SETTINGS
@given(claude_sessions())
def test_api_conversion_pairs_every_tool_use_and_alternates_roles(data: bytes) -> None:
    transcript = ctxpipe.read_transcript(data)
    converted, report = ctxpipe.convert_with_report(transcript, "anthropic", repair=True)
    messages = [entry.obj for entry in converted.entries]
    assert report.orphans == []
    assert all(a["role"] != b["role"] for a, b in zip(messages, messages[1:]))
    for index, message in enumerate(messages):
        if message["role"] != "assistant" or isinstance(message["content"], str):
            continue
        asked = [block["id"] for block in message["content"] if block["type"] == "tool_use"]
        if asked:
            answer = messages[index + 1]["content"]
            answered = [block["tool_use_id"] for block in answer if block.get("type") == "tool_result"]
            assert answered[: len(asked)] == asked or sorted(answered) == sorted(asked)
    # Without --repair only a final interrupted call may be unanswered.
    _, plain = ctxpipe.convert_with_report(transcript, "anthropic")
    assert len({problem.line for problem in plain.unanswered}) <= 3
    assert plain.repaired == 0


@SETTINGS
@given(claude_sessions())
def test_thinking_blocks_and_signatures_survive_conversion(data: bytes) -> None:
    transcript = ctxpipe.read_transcript(data)
    before = [
        block for message in ctxpipe.formats.get("claude-code").messages(transcript.entries) for block in message.content if block.get("type") == "thinking"
    ]
    after = [
        block
        for message in ctxpipe.api_messages(transcript)
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "thinking"
    ]
    assert after == before


@SETTINGS
@given(claude_sessions())
def test_messages_round_trip_through_the_claude_code_writer(data: bytes) -> None:
    transcript = ctxpipe.read_transcript(data)
    first = ctxpipe.convert(transcript, "anthropic", repair=True)
    rebuilt = ctxpipe.convert(first, "claude-code", options=WriteOptions(session_id="s", start_time="2026-01-01T00:00:00Z"))
    again = ctxpipe.convert(rebuilt, "anthropic")
    # The same messages; a time the first conversion kept stays, one it had none for (a synthetic repair) is the writer's.
    assert [{k: v for k, v in e.obj.items() if k != "timestamp"} for e in again.entries] == [
        {k: v for k, v in e.obj.items() if k != "timestamp"} for e in first.entries
    ]
    assert all(a.obj["timestamp"] == f.obj["timestamp"] for a, f in zip(again.entries, first.entries) if "timestamp" in f.obj)
