"""Read-only views of content blocks: what a block is and the fields the core reads of it.

A block is the object parsed from the line, in the Anthropic Messages shapes:

    {"type": "text", "text": …}
    {"type": "tool_use", "id": …, "name": …, "input": {…}}
    {"type": "tool_result", "tool_use_id": …, "content": "…" or [blocks], "is_error": …}
    {"type": "thinking", "thinking": …, "signature": …}    {"type": "redacted_thinking", "data": …}
    {"type": "image", "source": {…}}    {"type": "document", "source": {…}}

These functions only read it: no copy, no new key, no re-encoding, so a line whose blocks were only
looked at is written back with the bytes it came with (a stage that changes a block builds a new
one and replaces the entry). They are plain functions, not objects, because they run for every
block of files with millions of them.

The rule of core.fields holds: a field with the wrong type reads as absent, and anything that is
not an object is no block (every kind test is False for it). A block of a Message went through
fields.read_block already, so on it these read exactly what `block.get(...)` did.
"""

from __future__ import annotations

from typing import Any, Literal, TypeGuard

# The kinds the core tells apart; a block of another kind (server_tool_use, …) is counted as its JSON.
Kind = Literal["text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"]
# Tuples, not sets: a hostile `type` may be a list, which a set lookup cannot hash.
THINKING_KINDS: tuple[Kind, ...] = ("thinking", "redacted_thinking")
FLAT_KINDS: tuple[Kind, ...] = ("image", "document")  # a flat token cost, whatever they hold


def kind_of(block: object) -> str | None:
    """The block's `type` (any string, kinds this module does not name included), else None."""
    if isinstance(block, dict):
        value = block.get("type")
        if isinstance(value, str):
            return value
    return None


def is_text(block: object) -> TypeGuard[dict[str, Any]]:
    return isinstance(block, dict) and block.get("type") == "text"


def is_tool_use(block: object) -> TypeGuard[dict[str, Any]]:
    return isinstance(block, dict) and block.get("type") == "tool_use"


def is_tool_result(block: object) -> TypeGuard[dict[str, Any]]:
    return isinstance(block, dict) and block.get("type") == "tool_result"


def is_thinking(block: object) -> TypeGuard[dict[str, Any]]:
    """A thinking block or a redacted one."""
    return isinstance(block, dict) and block.get("type") in THINKING_KINDS


def call_id(block: dict[str, Any]) -> str | None:
    """The tool call a block belongs to: a tool_use's `id`, a tool_result's `tool_use_id`; None for
    another block or an id that is not a string."""
    kind = block.get("type")
    value = block.get("id") if kind == "tool_use" else block.get("tool_use_id") if kind == "tool_result" else None
    return value if isinstance(value, str) else None


def tool_event(block: dict[str, Any]) -> tuple[bool, str] | None:
    """(True, id) for a tool_use block, (False, id) for a tool_result, None for anything else
    (a tool block without a string id included)."""
    tool_id = call_id(block)
    return None if tool_id is None else (block.get("type") == "tool_use", tool_id)


def name_of(block: dict[str, Any]) -> str | None:
    """A tool_use's `name`."""
    value = block.get("name")
    return value if isinstance(value, str) else None


def input_of(block: dict[str, Any]) -> dict[str, Any] | None:
    """A tool_use's `input` (an object)."""
    value = block.get("input")
    return value if isinstance(value, dict) else None


def content_of(block: dict[str, Any]) -> Any:
    """A tool_result's `content` as it is: a string, a list of blocks, or whatever the line holds
    (absent: None). Each reader decides what it makes of a value of another type."""
    return block.get("content")


def is_error(block: dict[str, Any]) -> bool:
    """Whether a tool_result says the call failed: any truthy `is_error`, as the readers always took it."""
    return bool(block.get("is_error"))


def text_of(block: dict[str, Any]) -> str | None:
    """A text block's `text`."""
    value = block.get("text")
    return value if isinstance(value, str) else None


def thinking_of(block: dict[str, Any]) -> str | None:
    """A thinking block's `thinking`."""
    value = block.get("thinking")
    return value if isinstance(value, str) else None


def data_of(block: dict[str, Any]) -> str | None:
    """A redacted_thinking block's `data` (the encrypted thinking)."""
    value = block.get("data")
    return value if isinstance(value, str) else None


def thinking_text(block: dict[str, Any]) -> str | None:
    """What Claude Code's rough count reads of a thinking or redacted_thinking block: its `thinking`,
    else (unset or empty) its `data`, when that is a string."""
    value = block.get("thinking") or block.get("data")
    return value if isinstance(value, str) else None
