"""validate holds of each line only what the format's structural check reads (checked_part): the
check must find exactly the same on those parts as on the whole lines, on real, fixture and
generated transcripts, hostile values included."""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from ctxpipe import formats
from ctxpipe.core.errors import InputError
from ctxpipe.core.jsonl import Entry, iter_entries
from ctxpipe.core.transcript_format import TranscriptFormat
from ctxpipe.formats import claude_code
from helpers import FIXTURES, corpus_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import claude_sessions


def _findings(transcript_format: TranscriptFormat, entries: list[Entry], parts: bool) -> list[tuple[Any, ...]]:
    if parts:
        entries = [Entry(transcript_format.checked_part(entry.obj), None, entry.line) for entry in entries]
    return [(f.severity, f.code, f.message, f.line) for f in transcript_format.check(entries)]


def _entries(data: bytes) -> list[Entry]:
    return list(iter_entries(io.BytesIO(data), "test", "skip"))


def _claimed(path: Path) -> bool:
    """Whether a format claims the file (validate checks a file no format claims no further)."""
    try:
        formats.detect(_entries(path.read_bytes()), str(path))
    except InputError:
        return False
    return True


def _transcripts() -> list[Path]:
    found = sorted(path for path in FIXTURES.rglob("*.jsonl") if path.is_file())
    return [path for path in found + corpus_files() + corpus_files("codex") if _claimed(path)]


@pytest.mark.parametrize("path", _transcripts(), ids=lambda path: str(path.relative_to(path.parents[1])))
def test_the_check_finds_the_same_on_the_checked_parts_of_a_real_or_fixture_transcript(path: Path) -> None:
    entries = _entries(path.read_bytes())
    transcript_format = formats.detect(entries, str(path))
    assert _findings(transcript_format, entries, parts=True) == _findings(transcript_format, entries, parts=False)


def test_the_claude_code_part_is_a_small_copy_that_leaves_the_line_as_it_was() -> None:
    line = {
        "type": "assistant",
        "uuid": "u2",
        "parentUuid": "u1",
        "isSidechain": False,
        "requestId": "req_1",
        "cwd": "/w",
        "message": {
            "id": "msg_1",
            "role": "assistant",
            "content": [
                {"type": "text", "text": "long words " * 100},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/w/x.py"}},
                "not a block",
            ],
            "usage": {"input_tokens": 10},
        },
    }
    before = copy.deepcopy(line)
    part = claude_code.FORMAT.checked_part(line)
    assert line == before
    assert part == {
        "type": "assistant",
        "subtype": None,
        "uuid": "u2",
        "parentUuid": "u1",
        "isSidechain": False,
        "requestId": "req_1",
        "message": {"id": "msg_1", "content": [{"type": "tool_use", "id": "toolu_1", "tool_use_id": None}]},
    }
    assert len(orjson.dumps(part)) * 5 < len(orjson.dumps(line))


# Values a hostile line may hold where check() looks: wrong types, unhashable ones, near misses.
ODD = st.one_of(
    st.sampled_from(["u1", "req_x", "compact_boundary", "tool_use", "tool_result", "assistant", "user", "system", True]),
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from(["", "u0", "u1", "u3", "msg_0000", "toolu_0000", "toolu_0001", "req_x", "compact_boundary", "tool_use", "tool_result", "system"]),
    st.just([]),
    st.just({}),
    st.just(["u1"]),
    st.just({"id": "toolu_0000"}),
)
FIELDS = ("type", "subtype", "uuid", "parentUuid", "logicalParentUuid", "isSidechain", "requestId", "message", "cwd")
MESSAGE_FIELDS = ("id", "content", "role")
BLOCK_FIELDS = ("type", "id", "tool_use_id", "name", "content")


@st.composite
def broken_sessions(draw: Any) -> list[dict[str, Any]]:
    """A generated session whose lines are then moved, copied and given odd values where the
    structural check reads (links, types, ids, tool blocks)."""
    lines = [orjson.loads(line) for line in draw(claude_sessions()).splitlines()]
    uuids = [line["uuid"] for line in lines if isinstance(line.get("uuid"), str)] or ["u0"]
    for _ in range(draw(st.integers(0, 8))):
        line = lines[draw(st.integers(0, len(lines) - 1))]
        where = draw(st.sampled_from(("line", "link", "message", "block", "copy", "move", "request", "boundary")))
        if where == "request":  # one line of a response with another requestId, or on the other chain
            line[draw(st.sampled_from(("requestId", "isSidechain")))] = draw(st.sampled_from(("req_x", True, False)))
        elif where == "boundary":  # a compact boundary that names a parent, or a line that is one
            line.update(type="system", subtype="compact_boundary", parentUuid=draw(st.sampled_from(uuids)))
        elif where == "line":
            line[draw(st.sampled_from(FIELDS))] = draw(ODD)
        elif where == "link":
            line[draw(st.sampled_from(("parentUuid", "logicalParentUuid", "uuid")))] = draw(st.sampled_from(uuids))
        elif where == "copy":
            lines.insert(draw(st.integers(0, len(lines))), copy.deepcopy(line))
        elif where == "move":
            lines.insert(draw(st.integers(0, len(lines))), lines.pop(draw(st.integers(0, len(lines) - 1))))
        elif isinstance(line.get("message"), dict):
            message = line["message"]
            blocks = message.get("content")
            if where == "message" or not isinstance(blocks, list) or not blocks:
                message[draw(st.sampled_from(MESSAGE_FIELDS))] = draw(st.one_of(ODD, st.just([{"type": "tool_result", "tool_use_id": "toolu_0000"}])))
            elif isinstance(block := blocks[draw(st.integers(0, len(blocks) - 1))], dict):
                block[draw(st.sampled_from(BLOCK_FIELDS))] = draw(ODD)
    return [line for line in lines if isinstance(line, dict)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(broken_sessions())
def test_the_check_finds_the_same_on_the_checked_parts_of_a_broken_session(lines: list[dict[str, Any]]) -> None:
    entries = [Entry(line, None, number) for number, line in enumerate(lines, 1)]
    assert _findings(claude_code.FORMAT, entries, parts=True) == _findings(claude_code.FORMAT, entries, parts=False)
    parts = [Entry(claude_code.FORMAT.checked_part(entry.obj), None, entry.line) for entry in entries]
    assert claude_code.context_positions(parts) == claude_code.context_positions(entries)  # what check() reads through
