"""core.blocks: the read-only views of content blocks.

Each kind is told apart and its fields read; anything hostile (not an object, a type that is no
string, a field missing or of the wrong type) reads as absent, never raises; and a view never
changes the block or the bytes of the line it came from.
"""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import pytest
from ctxpipe.core import blocks
from ctxpipe.core.blocks import (
    call_id,
    content_of,
    data_of,
    input_of,
    is_error,
    is_text,
    is_thinking,
    is_tool_result,
    is_tool_use,
    kind_of,
    name_of,
    text_of,
    thinking_of,
    thinking_text,
    tool_event,
)
from ctxpipe.core.fields import read_block, read_blocks
from ctxpipe.core.jsonl import ReadStats, iter_entries
from ctxpipe.core.tokens import PiecesCounter, RoughCounter, block_texts, estimate_with_flats
from hypothesis import given
from hypothesis import strategies as st

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "claude-code"

TEXT = {"type": "text", "text": "hello"}
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.py"}}
TOOL_RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "x"}], "is_error": True}
THINKING = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
REDACTED = {"type": "redacted_thinking", "data": "ZW5j"}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
DOCUMENT = {"type": "document", "source": {"type": "text", "data": "doc"}}
PREDICATES = (is_text, is_tool_use, is_tool_result, is_thinking)


@pytest.mark.parametrize(
    ("block", "kind", "true_predicate"),
    [
        (TEXT, "text", is_text),
        (TOOL_USE, "tool_use", is_tool_use),
        (TOOL_RESULT, "tool_result", is_tool_result),
        (THINKING, "thinking", is_thinking),
        (REDACTED, "redacted_thinking", is_thinking),
        (IMAGE, "image", None),
        (DOCUMENT, "document", None),
        ({"type": "server_tool_use", "id": "srvtoolu_1"}, "server_tool_use", None),
    ],
)
def test_each_kind_is_told_apart(block: dict[str, Any], kind: str, true_predicate: Any) -> None:
    assert kind_of(block) == kind
    assert [predicate(block) for predicate in PREDICATES] == [predicate is true_predicate for predicate in PREDICATES]


def test_the_fields_of_each_kind() -> None:
    assert text_of(TEXT) == "hello"
    assert (call_id(TOOL_USE), name_of(TOOL_USE), input_of(TOOL_USE)) == ("toolu_1", "Read", {"file_path": "a.py"})
    assert tool_event(TOOL_USE) == (True, "toolu_1")
    assert (call_id(TOOL_RESULT), content_of(TOOL_RESULT), is_error(TOOL_RESULT)) == ("toolu_1", [{"type": "text", "text": "x"}], True)
    assert tool_event(TOOL_RESULT) == (False, "toolu_1")
    assert thinking_of(THINKING) == "hmm" and thinking_text(THINKING) == "hmm"
    assert data_of(REDACTED) == "ZW5j" and thinking_text(REDACTED) == "ZW5j"
    assert kind_of(IMAGE) in blocks.FLAT_KINDS and kind_of(DOCUMENT) in blocks.FLAT_KINDS


def test_a_tool_id_is_read_from_the_field_of_its_kind_only() -> None:
    # A tool_use's id is `id`, a result's is `tool_use_id`; the other field, or a text block's id, is no tool id.
    assert call_id({"type": "tool_use", "tool_use_id": "toolu_1"}) is None
    assert call_id({"type": "tool_result", "id": "toolu_1"}) is None
    assert call_id({"type": "text", "id": "toolu_1", "tool_use_id": "toolu_1"}) is None
    assert tool_event({"type": "text", "id": "toolu_1"}) is None


@pytest.mark.parametrize("value", [None, "tool_use", 5, 1.5, True, ["tool_use"], [{"type": "tool_use"}]])
def test_a_value_that_is_no_object_is_no_block(value: Any) -> None:
    assert kind_of(value) is None
    assert not any(predicate(value) for predicate in PREDICATES)


@pytest.mark.parametrize("kind", [None, 5, True, ["tool_use"], {"tool_use": 1}])
def test_a_type_that_is_no_string_reads_as_none(kind: Any) -> None:
    block = {"type": kind, "id": "toolu_1", "tool_use_id": "toolu_1", "text": "t"}
    assert kind_of(block) is None
    assert not any(predicate(block) for predicate in PREDICATES)
    assert call_id(block) is None and tool_event(block) is None


def test_missing_fields_read_as_absent() -> None:
    for kind in ("text", "tool_use", "tool_result", "thinking", "redacted_thinking"):
        block = {"type": kind}
        assert (call_id(block), tool_event(block), name_of(block), input_of(block), content_of(block)) == (None, None, None, None, None)
        assert (text_of(block), thinking_of(block), data_of(block), thinking_text(block), is_error(block)) == (None, None, None, None, False)
    assert kind_of({}) is None


@pytest.mark.parametrize("wrong", [5, 1.5, True, None, ["toolu_1"], {"id": "toolu_1"}])
def test_a_field_of_the_wrong_type_reads_as_absent(wrong: Any) -> None:
    use = {"type": "tool_use", "id": wrong, "name": wrong, "input": [wrong] if isinstance(wrong, dict) else wrong}
    assert (call_id(use), tool_event(use), name_of(use), input_of(use)) == (None, None, None, None)
    assert call_id({"type": "tool_result", "tool_use_id": wrong}) is None
    assert text_of({"type": "text", "text": wrong}) is None
    assert thinking_of({"type": "thinking", "thinking": wrong}) is None
    assert data_of({"type": "redacted_thinking", "data": wrong}) is None


def test_content_and_is_error_are_read_as_they_are() -> None:
    # A result's content may be a string, blocks or garbage; each reader decides (tokens counts its JSON).
    for content in ("out", [{"type": "text", "text": "x"}], 5, {"a": 1}, None):
        assert content_of({"type": "tool_result", "content": content}) == content
    # is_error is taken as truthy, as every reader always did ("false" is a non-empty string).
    assert [is_error({"is_error": value}) for value in (True, 1, "false", [0], False, 0, "", None)] == [True] * 4 + [False] * 4


def test_thinking_text_falls_back_to_data_as_claude_codes_rough_count_does() -> None:
    assert thinking_text({"type": "thinking", "thinking": "", "data": "d"}) == "d"
    assert thinking_text({"type": "thinking", "thinking": 7, "data": "d"}) is None  # a set thinking that is no text: nothing
    assert thinking_text({"type": "redacted_thinking", "data": ["d"]}) is None


def test_field_readers_hand_back_the_blocks_own_values_not_copies() -> None:
    assert input_of(TOOL_USE) is TOOL_USE["input"]
    assert content_of(TOOL_RESULT) is TOOL_RESULT["content"]


def every_view(block: Any) -> list[Any]:
    views: list[Any] = [kind_of(block), *(predicate(block) for predicate in PREDICATES)]
    if isinstance(block, dict):
        views += [reader(block) for reader in (call_id, tool_event, name_of, input_of, content_of, is_error, text_of, thinking_of, data_of, thinking_text)]
    return views


def test_a_view_never_changes_the_block_or_its_lines_bytes() -> None:
    raw = b"\n".join(path.read_bytes().rstrip(b"\n") for path in sorted(FIXTURES.glob("*.jsonl")))
    entries = list(iter_entries(io.BytesIO(raw), "fixtures", "fail", ReadStats()))
    before = [(copy.deepcopy(entry.obj), entry.raw) for entry in entries]
    seen = 0
    for entry in entries:
        message = entry.obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            every_view(block)
            seen += 1
    assert seen > 50
    assert all(entry.obj == obj and not entry.changed and entry.encode() == raw_line for entry, (obj, raw_line) in zip(entries, before))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
field_names = st.sampled_from(["type", "id", "tool_use_id", "name", "input", "content", "is_error", "text", "thinking", "data", "other"])
kinds = st.sampled_from(["text", "tool_use", "tool_result", "thinking", "redacted_thinking", "image", "other"])
hostile_blocks = st.dictionaries(field_names, kinds | json_values, max_size=8) | json_values


@given(hostile_blocks)
def test_on_a_read_block_the_views_read_what_get_did(value: Any) -> None:
    # Every block the core reads went through fields.read_block; on such a block each view reads
    # exactly what the modules' `block.get(...)` did before they moved onto the views.
    block = read_block(value)
    if block is None:
        assert every_view(value)[:5] == [None, False, False, False, False]
        return
    snapshot = copy.deepcopy(block)
    kind = block.get("type")
    assert kind_of(block) == kind
    assert is_tool_use(block) == (kind == "tool_use") and is_tool_result(block) == (kind == "tool_result")
    assert is_text(block) == (kind == "text") and is_thinking(block) == (kind in ("thinking", "redacted_thinking"))
    assert name_of(block) == block.get("name") and input_of(block) == block.get("input")
    assert text_of(block) == block.get("text") and thinking_of(block) == block.get("thinking") and data_of(block) == block.get("data")
    old_id = block.get("id") if kind == "tool_use" else block.get("tool_use_id") if kind == "tool_result" else None
    assert call_id(block) == old_id
    assert content_of(block) == block.get("content") and is_error(block) == bool(block.get("is_error"))
    assert block == snapshot


@given(st.lists(hostile_blocks, max_size=6) | json_values)
def test_read_blocks_is_read_block_on_each_item(content: Any) -> None:
    # The one walk the messages are built with reads what read_block reads, item by item (a plain
    # string is one text block at index -1; anything else that is no list holds no block).
    indices, found = read_blocks(content)
    if isinstance(content, str):
        assert (indices, found) == ([-1], [{"type": "text", "text": content}])
        return
    items = content if isinstance(content, list) else []
    expected = [(index, block) for index, value in enumerate(items) if (block := read_block(value)) is not None]
    assert list(zip(indices, found)) == expected
    # A block left as it is is the very object (no copy): a line only read is written back as it came.
    assert all(block is items[index] for index, block in zip(indices, found) if block == items[index])


@given(st.lists(hostile_blocks.filter(lambda value: isinstance(value, dict)), max_size=6))
def test_estimate_with_flats_is_block_texts_counted(values: list[Any]) -> None:
    # The one walk gives each block what block_texts and the counter give it one by one.
    blocks = [block for value in values if (block := read_block(value)) is not None]
    for counter in (PiecesCounter(), RoughCounter()):
        totals, flats = estimate_with_flats(blocks, counter)
        assert flats == [block_texts(block)[1] for block in blocks]
        assert totals == [sum(counter.count(text) for text in block_texts(block)[0]) + block_texts(block)[1] for block in blocks]


@given(st.lists(st.sampled_from(["", "x", " a1  b", "word " * 300, "é\u3000z" * 400, "9" * 5000]), max_size=12))
def test_the_pieces_counter_counts_a_text_that_comes_again_as_the_first_time(texts: list[str]) -> None:
    counter = PiecesCounter()
    assert counter.count_many(texts) == [counter.count(text) for text in texts]
