"""Real transcripts from ../shared/corpus: lossless reading, clean validation, valid conversion."""

from __future__ import annotations

from pathlib import Path

import ctxpipe
import orjson
import pytest
from helpers import corpus_files, needs_corpus, run_cli

pytestmark = needs_corpus
CLAUDE = corpus_files("claude-code")
ALL = CLAUDE + corpus_files("codex")


def _id(path: Path) -> str:
    return path.name[-40:]


@pytest.mark.parametrize("path", CLAUDE, ids=_id)
def test_identity_convert_is_byte_identical(path: Path) -> None:
    transcript = ctxpipe.read_transcript(path)
    result = run_cli("convert", "--to", transcript.format, path, stdin=None)
    assert result.returncode == 0, result.stderr
    assert result.stdout == path.read_bytes()


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_real_files_validate_without_errors(path: Path) -> None:
    findings = ctxpipe.validate_transcript(ctxpipe.read_transcript(path))
    assert [f for f in findings if f.severity == "error"] == []


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_conversion_to_the_messages_api_keeps_every_tool_pair(path: Path) -> None:
    transcript = ctxpipe.read_transcript(path)
    converted, report = ctxpipe.convert_with_report(transcript, "anthropic")
    assert report.orphans == [] and report.unanswered == []
    roles = [e.obj["role"] for e in converted.entries]
    assert all(a != b for a, b in zip(roles, roles[1:])), "roles must alternate"
    assert ctxpipe.validate_transcript(converted) == []


@pytest.mark.parametrize("path", CLAUDE, ids=_id)
def test_usage_is_taken_once_per_response(path: Path) -> None:
    """Every assistant message carries the usage of its last line, never a sum over lines."""
    transcript = ctxpipe.read_transcript(path)
    last_usage: dict[str, dict] = {}
    for entry in transcript.entries:
        message = entry.obj.get("message")
        if entry.obj.get("type") == "assistant" and isinstance(message, dict) and "usage" in message:
            last_usage[message["id"]] = message["usage"]
    messages = ctxpipe.formats.get("claude-code").messages(transcript.entries)
    responses = [m for m in messages if m.role == "assistant" and m.message_id]
    assert responses
    for message in responses:
        assert message.usage == last_usage[message.message_id]


def test_all_corpus_lines_match_their_schema() -> None:
    from ctxpipe.jobs import schemas

    checked = 0
    for path in ALL:
        transcript = ctxpipe.read_transcript(path)
        schema = ctxpipe.formats.get(transcript.format).schema
        for entry in transcript.entries:
            assert schemas.errors(schema, entry.obj) == [], (path.name, entry.line)
            checked += 1
    assert checked > 3000


def test_corpus_round_trips_through_orjson_byte_for_byte() -> None:
    """The premise of cheap lossless rewriting: orjson reproduces Claude Code's own encoding."""
    for path in CLAUDE:
        for line in path.read_bytes().splitlines():
            assert orjson.dumps(orjson.loads(line)) == line
