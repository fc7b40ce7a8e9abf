"""Bounded work on hostile trees and long sessions: a parentUuid chain 1e4-1e5 lines deep is walked
without recursion, a chain that loops back ends every command (a visited set, never an endless
walk), and the summary's verifier and split, rewritten to take linear time, decide exactly as the
plain definitions they replaced (kept here as the reference).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from builders import Session, usage
from ctxpipe.core.jsonl import Entry
from ctxpipe.core.model import Message
from ctxpipe.core.summarize import GIANT_PASTE, Fact, _pairs_inside, verify
from ctxpipe.formats.claude_code import context_positions, main_chain, parent_cycles
from helpers import run_cli, run_process
from hypothesis import given, settings
from hypothesis import strategies as st


def chain_lines(depth: int) -> list[dict[str, Any]]:
    """One chain `depth` lines deep: short user and assistant lines in turn."""
    lines = []
    for k in range(depth):
        envelope = {
            "parentUuid": f"u{k - 1}" if k else None,
            "isSidechain": False,
            "sessionId": "s",
            "uuid": f"u{k}",
            "timestamp": f"2026-05-04T10:00:00.{k % 1000:03d}Z",
        }
        if k % 2 == 0:
            lines.append({**envelope, "type": "user", "message": {"role": "user", "content": f"step {k}"}})
        else:
            lines.append(
                {
                    **envelope,
                    "type": "assistant",
                    "message": {
                        "id": f"msg_{k}",
                        "role": "assistant",
                        "model": "claude-sonnet-4-5-20250929",
                        "content": [{"type": "text", "text": f"ok {k}"}],
                        "usage": usage(1000 + k),
                    },
                }
            )
    return lines


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return path


def test_a_chain_1e5_deep_is_walked_whole_without_recursion() -> None:
    entries = [Entry(line) for line in chain_lines(100_000)]
    assert main_chain(entries) == list(range(100_000))
    assert context_positions(entries) == list(range(100_000))
    assert parent_cycles(entries) == []


COMMANDS = [
    ["count", "--json"],
    ["warn", "--json"],
    ["convert", "--to", "anthropic"],
    ["summarize", "--engine", "offline", "--keep-last", "2"],
    ["compact", "--force", "--engine", "offline"],  # microcompact, collapse, summarize, restore
    ["restore"],
    ["snip", "--keep-last", "2"],
    ["microcompact", "--force"],
    ["collapse"],
    ["validate", "--json"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
def test_every_command_reads_a_chain_10k_deep(tmp_path: Path, command: list[str]) -> None:
    # Python's recursion limit is 1000: any recursive walk of the chain would fail here.
    path = write(tmp_path / "deep.jsonl", chain_lines(10_000))
    done = run_cli(*command, path)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"Traceback" not in done.stderr and done.stdout


def _loops(tmp_path: Path) -> list[Path]:
    """Three hostile trees: a whole session that loops (no root), a leaf that is its own parent, and
    two system lines that loop above the opening message (which snip removes with the history)."""
    whole = Session()
    whole.user("Please fix the parser " * 10)
    for k in range(6):
        tool = whole.tool_id()
        whole.response(
            [{"type": "text", "text": f"Reading {k}"}, {"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": "/a.py"}}], usage(2000 + 100 * k)
        )
        whole.tool_result(tool, "same long output " * 40)
    whole.text("Done.", usage(4000))
    whole.lines[0]["parentUuid"] = whole.lines[-1]["uuid"]

    own = Session()
    own.user("hello")
    own.text("hi", usage(1000))
    own.lines[-1]["parentUuid"] = own.lines[-1]["uuid"]

    above = Session()
    opening = above.user("Please fix the parser " * 20)
    above.text("Looking " * 20, usage(1000))
    middle = above.user("More " * 20)
    first = above.system("stop_hook_summary", parent=None)
    second = above.system("stop_hook_summary", parent=first)
    above.text("Done " * 20, usage(2000), parent=middle)
    above.user("Thanks " * 20)
    above.text("Welcome " * 20, usage(3000))
    above.lines[0]["parentUuid"] = first  # opening -> first -> second -> first -> ...
    above.lines[3]["parentUuid"] = second
    assert opening == above.lines[0]["uuid"]
    return [whole.write(tmp_path / "whole.jsonl"), own.write(tmp_path / "own.jsonl"), above.write(tmp_path / "above.jsonl")]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
def test_every_command_ends_on_a_chain_that_loops(tmp_path: Path, command: list[str]) -> None:
    for path in _loops(tmp_path):
        done = run_process(*command, path)  # in a child: its timeout ends an endless walk as a failure
        stderr = done.stderr.decode()
        assert b"Traceback" not in done.stderr, stderr
        # validate reports the loop (exit 1); every other command tolerates it.
        assert done.returncode == (1 if command[0] == "validate" else 0), (path.name, stderr)
        if command[0] == "validate":
            assert b'"code":"parent-cycle"' in done.stdout


def test_a_boundary_whose_logical_parent_loops_back_ends_the_history_walk(tmp_path: Path) -> None:
    session = Session()
    session.user("first " * 10)
    session.text("a " * 10, usage(1000))
    session.compact()
    session.user("after " * 10)
    session.text("b " * 10, usage(2000))
    session.lines[2]["logicalParentUuid"] = session.lines[-1]["uuid"]  # the boundary names a line below it
    session.lines[0]["parentUuid"] = session.lines[2]["uuid"]  # and the first line names the boundary
    path = session.write(tmp_path / "boundary.jsonl")
    for command in (["convert", "--to", "anthropic", "--history"], ["count", "--json", "--full"], ["compact", "--force", "--engine", "offline"]):
        done = run_cli(*command, path)
        assert done.returncode == 0 and b"Traceback" not in done.stderr, (command, done.stderr.decode())
    entries = [Entry(line) for line in session.lines]
    # Each line once. No line above the boundary has the uuid it names, so its history is the lines
    # above it (the last message there, then its parents; the first names the boundary: the walk ends).
    assert main_chain(entries, history=True) == [0, 1, 2, 3, 4, 5]


def test_snip_makes_a_root_of_a_kept_line_whose_removed_ancestors_loop(tmp_path: Path) -> None:
    path = _loops(tmp_path)[2]
    done = run_cli("snip", "--keep-last", "2", path)
    assert done.returncode == 0, done.stderr.decode()
    out = [orjson.loads(line) for line in done.stdout.splitlines()]
    kept = {line["uuid"] for line in out}
    opening = next(line for line in out if line["type"] == "user")
    assert opening["parentUuid"] is None  # its ancestors were removed and only loop among themselves
    assert all(line["parentUuid"] in kept for line in out if line is not opening)


# --- the verifier and the split decide as the plain definitions do ----------------------------------


def carried_reference(fact: Fact, context_text: str) -> bool:
    """The verifier's rule written plainly (one search per fact and word): quadratic.

    A fact is carried verbatim (whitespace and case aside); one of at most 12 characters with no
    space only as a whole token, bare or without the punctuation around it; an instruction of 5+
    words also when 80 % of its words are words of the text.
    """

    def normal(text: str) -> str:
        return re.sub(r"\s+", " ", text).strip().lower()

    word = r"[a-z0-9_./'-]{4,}|(?<![\w'])(?:not|no|nor)(?![\w'])"
    needle, haystack = normal(fact.text[:GIANT_PASTE]), normal(context_text)
    if 0 < len(needle) <= 12 and " " not in needle:
        if any(needle in (token, token.strip("\"'()[]{}<>,;:!?`*").rstrip(".")) for token in haystack.split()):
            return True
    elif needle in haystack:
        return True
    if fact.kind in ("instruction", "last-request"):
        words = set(re.findall(word, needle))
        if len(words) >= 5:
            return sum(1 for w in words if w in re.findall(word, haystack)) / len(words) >= 0.8
    return False


# A small alphabet so that facts and context share words, prefixes and overlaps.
WORDS = st.sampled_from(
    ["fix", "the", "parser", "parsers", "cache", "src/a.py", "a.py", "(a.py)", "tests", "Tests", "  ", "\n", "error:", "retry_budget", "don't", "not", "x" * 70]
)
TEXT = st.lists(WORDS, max_size=14).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["instruction", "last-request", "file", "todo", "error"]), TEXT), max_size=8), st.lists(TEXT, max_size=6))
def test_the_verifier_decides_as_the_plain_definition(raw_facts: list[tuple[str, str]], context: list[str]) -> None:
    facts = [Fact(kind, text) for kind, text in raw_facts]
    text = "\n".join(context)
    expected = [fact for fact in facts if not carried_reference(fact, text)]
    assert verify(facts, text).missing == expected


def test_the_verifier_finds_a_fact_longer_than_its_search_anchor_only_when_whole() -> None:
    long = "keep the retry budget at three attempts " * 5  # longer than ANCHOR characters
    facts = [Fact("todo", long), Fact("todo", long[:-10] + "different ending here")]
    assert verify(facts, "Open: " + long.upper()).missing == [facts[1]]


def pairs_inside_reference(messages: list[Message], start: int) -> int:
    """The split's pair rule as it was: recompute the tail's pairs at every candidate start."""
    while start > 0:
        asked = {str(b.get("id")) for m in messages[start:] for b in m.content if b.get("type") == "tool_use"}
        missing = {str(b.get("tool_use_id")) for m in messages[start:] for b in m.content if b.get("type") == "tool_result"} - asked
        if not missing:
            return start
        start = max(i for i in range(start) if any(b.get("type") == "tool_use" and str(b.get("id")) in missing for b in messages[i].content))
    return start


@st.composite
def tool_conversations(draw: Any) -> list[Message]:
    """Messages whose tool_use and tool_result ids (from a small set) land anywhere, in any order."""
    messages = []
    for k in range(draw(st.integers(0, 12))):
        role = "assistant" if k % 2 else "user"
        kinds = st.sampled_from(["tool_use", "text"] if role == "assistant" else ["tool_result", "text"])
        blocks = []
        for kind, tool in draw(st.lists(st.tuples(kinds, st.sampled_from("abcde")), max_size=3)):
            blocks.append(
                {"type": kind, "id": tool}
                if kind == "tool_use"
                else {"type": kind, "tool_use_id": tool}
                if kind == "tool_result"
                else {"type": "text", "text": "t"}
            )
        messages.append(Message(role, blocks))
    return messages


@settings(max_examples=400, deadline=None)
@given(tool_conversations(), st.integers(0, 13))
def test_the_split_keeps_pairs_whole_as_the_plain_rule_did(messages: list[Message], start: int) -> None:
    start = min(start, len(messages))
    used = {b["id"] for m in messages for b in m.content if b["type"] == "tool_use"}
    unpairable = any(b["type"] == "tool_result" and b["tool_use_id"] not in used for m in messages for b in m.content)
    if unpairable:
        # The old rule failed (max() of nothing) on a result nothing asked for; now it is let be.
        tail = _pairs_inside(messages, start)
        asked = {b["id"] for m in messages[tail:] for b in m.content if b["type"] == "tool_use"}
        assert tail == 0 or all(
            b["tool_use_id"] in asked for m in messages[tail:] for b in m.content if b["type"] == "tool_result" and b["tool_use_id"] in used
        )
        return
    assert _pairs_inside(messages, start) == pairs_inside_reference(messages, start)


def test_an_orphan_result_in_the_tail_no_longer_breaks_the_split() -> None:
    messages = [
        Message("user", [{"type": "text", "text": "go"}]),
        Message("assistant", [{"type": "tool_use", "id": "a"}]),
        Message("user", [{"type": "tool_result", "tool_use_id": "a"}]),
        Message("assistant", [{"type": "text", "text": "ok"}]),
        Message("user", [{"type": "tool_result", "tool_use_id": "nobody"}]),
    ]
    with pytest.raises(ValueError):
        pairs_inside_reference(messages, 3)
    assert _pairs_inside(messages, 3) == 3
