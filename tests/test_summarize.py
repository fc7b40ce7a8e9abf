"""`summarize`: the split, the shape written back, the engines, the verifier, and a real resume.

- The split (core.summarize.tail_start) is checked on hand-sized messages and, through the whole
  stage, on generated sessions: the kept tail's size rules, --keep-last and --keep-fraction, and
  that no tool pair and no response (message.id) is ever cut.
- The Claude Code shape: history above, compact_boundary, the isCompactSummary line with the
  continuation preamble, the tail under its original uuids; count, validate, the tool pairs and a
  second run agree with it. Messages-API input gets a summary message and the tail.
- The engines: offline (nine sections built from the transcript), session memory (the notes file
  beside the transcript), and the LLM engine with the real anthropic client against the fake
  Messages API of tests/messages_server.py (retries, prompt-too-long, timeouts, tool-call
  refusals, the circuit breaker, the repair request), in-process and through the CLI.
- The end-to-end check: the real Claude Code 2.1.88 resumes what summarize wrote
  (tests/claude_code.py; skipped without node/npm).

No test reaches the internet; the LLM tests talk to 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import time
import uuid as uuidlib
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ctxpipe
import orjson
import pytest
from builders import _SAME, Session, usage
from claude_code import needs_claude_code
from ctxpipe.core.jsonl import ReadStats
from ctxpipe.core.model import Message
from ctxpipe.core.reports import MissingFact
from ctxpipe.core.stage import StageContext, line_bytes
from ctxpipe.core.summarize import SummarizeSettings, key_facts, padded_tokens, tail_start
from ctxpipe.core.summarize_engines import TRUNCATION_MARKER, Breaker, SummaryFailed
from ctxpipe.formats import get
from ctxpipe.jobs.llm import ModelAccess, llm_summary
from ctxpipe.jobs.summary import summarize_entries
from helpers import FIXTURES, ok, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from messages_server import MessagesServer, Reply
from stage_checks import findings, message_uuids, objects, response_groups, tool_problems
from strategies import claude_sessions

CC = get("claude-code")
API = get("anthropic")
NOW_ISO = "2026-05-01T00:00:00Z"  # after every timestamp of the sessions built here (March 2026)
NOW = datetime(2026, 5, 1, tzinfo=timezone.utc)
SESSION_ID = "7d3c9a52-1f0e-4b8a-9c61-2e5f8d4a7b10"
MODEL = "claude-sonnet-4-6"
SECRET = "sk-ant-api03-CTXPIPE-TEST-SECRET-9f8e7d6c5b4a"  # never a real key; must never be printed

# Written out here rather than imported, so a change to the wording is caught.
PREAMBLE = (
    "This session is being continued from a previous conversation that ran out of context. The summary below covers the earlier portion of the conversation."
)
SECTION_NAMES = [
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code Sections",
    "Errors and fixes",
    "Problem Solving",
    "All user messages",
    "Pending Tasks",
    "Current Work",
    "Optional Next Step",
]

# The typed messages of work_session(), in order.
ASK_HEALTH = 'Add a /health endpoint to server.py that returns {"ok": true}.'
ASK_LOGGING = "Now log every request to logs/access.log, one JSON object per line."
ASK_ROTATION = "Keep the log rotation at 10 MB and keep 5 files."
ASK_README = "Great. Last thing: mention the health endpoint in the README."

if TYPE_CHECKING:
    import anthropic


# --- sessions -----------------------------------------------------------------------------------


class Convo(Session):
    """builders.Session with a chosen cwd and session id, uuid4-looking uuids and March 2026 timestamps."""

    def __init__(self, cwd: str = "/home/dev/shop", session_id: str = SESSION_ID, seed: int = 1) -> None:
        super().__init__(model=MODEL, version="2.1.88")
        self.cwd, self.session_id = cwd, session_id
        self._rng = random.Random(seed)

    def uuid(self) -> str:
        return str(uuidlib.UUID(int=self._rng.getrandbits(128), version=4))

    def line(self, kind: str, parent: Any = _SAME, sidechain: bool = False, **fields: Any) -> str:
        line_uuid = super().line(kind, parent, sidechain, **fields)
        n = len(self.lines) - 1
        self.lines[-1].update(cwd=self.cwd, sessionId=self.session_id, timestamp=f"2026-03-04T10:{n // 60:02d}:{n % 60:02d}.000Z")
        return line_uuid

    def result(self, tool_id: str, content: Any, error: bool = False, parent: Any = _SAME) -> str:
        block: dict[str, Any] = {"tool_use_id": tool_id, "type": "tool_result", "content": content}
        if error:
            block["is_error"] = True
        return self.user([block], parent, toolUseResult={"stdout": "", "stderr": ""})

    def call(self, name: str, tool_input: dict[str, Any], output: Any, total: int, error: bool = False, text: str | None = None) -> str:
        """One response (an optional text, then one tool_use) and its result; returns the tool id."""
        tool_id = self.tool_id()
        blocks = ([{"type": "text", "text": text}] if text else []) + [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}]
        self.response(blocks, usage(total))
        self.result(tool_id, output, error)
        return tool_id


def work_session(cwd: str = "/home/dev/shop", session_id: str = SESSION_ID, seed: int = 1, paste: str | None = None, image: bool = False) -> Convo:
    """Four typed requests, reads, edits, a write, a failing then passing test run, two todo lists,
    a thinking block, a parallel pair of reads whose results branch off their tool_use lines."""
    s = Convo(cwd, session_id, seed)
    first: Any = ASK_HEALTH if paste is None else ASK_HEALTH + "\n" + paste
    if image:
        first = [
            {"type": "text", "text": ASK_HEALTH},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"}},
        ]
    s.user(first)
    read_id = s.tool_id()
    s.response(
        [
            {"type": "thinking", "thinking": "Look at the app factory first.", "signature": "EqsigTEST=="},
            {"type": "text", "text": "Reading the server first."},
            {"type": "tool_use", "id": read_id, "name": "Read", "input": {"file_path": f"{cwd}/server.py"}},
        ],
        usage(9000),
    )
    s.result(read_id, "from app import create_app\n\ndef main():\n    create_app().run()\n" * 30)
    s.call(
        "Edit",
        {
            "file_path": f"{cwd}/server.py",
            "old_string": "def main():",
            "new_string": "@route('/health')\ndef health():\n    return {'ok': True}\n\ndef main():",
        },
        f"The file {cwd}/server.py has been updated.",
        10000,
    )
    s.call("Bash", {"command": "pytest -q tests/test_health.py"}, "FAILED tests/test_health.py::test_health - assert 404 == 200", 10500, error=True)
    s.call(
        "Edit",
        {"file_path": f"{cwd}/app.py", "old_string": "routes = []", "new_string": "routes = [health]"},
        f"The file {cwd}/app.py has been updated.",
        11000,
        text="The route is not registered in create_app(); registering it.",
    )
    s.call("Bash", {"command": "pytest -q"}, "3 passed in 0.12s", 11500)
    s.text("The endpoint works: 3 tests pass.", usage(11800))
    s.user(ASK_LOGGING)
    s.call(
        "TodoWrite",
        {
            "todos": [
                {"content": "Add the request-logging middleware", "status": "in_progress", "activeForm": "Adding"},
                {"content": "Rotate logs/access.log", "status": "pending", "activeForm": "Rotating"},
                {"content": "Document the log format", "status": "pending", "activeForm": "Documenting"},
            ]
        },
        "Todos have been modified successfully.",
        12200,
    )
    s.call(
        "Write",
        {"file_path": f"{cwd}/logging_mw.py", "content": "import json\n\ndef middleware(request):\n    ...\n"},
        f"File created successfully at: {cwd}/logging_mw.py",
        12600,
    )
    s.call(
        "TodoWrite",
        {
            "todos": [
                {"content": "Add the request-logging middleware", "status": "completed", "activeForm": "Adding"},
                {"content": "Rotate logs/access.log", "status": "in_progress", "activeForm": "Rotating"},
                {"content": "Document the log format", "status": "pending", "activeForm": "Documenting"},
            ]
        },
        "Todos have been modified successfully.",
        13000,
    )
    config_id, readme_id = s.tool_id(), s.tool_id()
    lines = s.response(
        [
            {"type": "text", "text": "Checking the config and the README."},
            {"type": "tool_use", "id": config_id, "name": "Read", "input": {"file_path": f"{cwd}/config.py"}},
            {"type": "tool_use", "id": readme_id, "name": "Read", "input": {"file_path": f"{cwd}/README.md"}},
        ],
        usage(13500),
    )
    s.result(config_id, "LOG_DIR = 'logs'\n", parent=lines[1])
    s.result(readme_id, "# Shop\n\nA small web shop.\n", parent=lines[2])
    s.text("Middleware added; rotation is next.", usage(14000))
    s.user(ASK_ROTATION)
    s.call("Bash", {"command": "ls logs"}, "access.log", 14300)
    s.text("Rotation set to 10 MB with 5 files kept.", usage(14600))
    s.user(ASK_README)
    s.call(
        "Edit",
        {"file_path": f"{cwd}/README.md", "old_string": "A small web shop.", "new_string": 'A small web shop.\n\nGET /health returns {"ok": true}.'},
        f"The file {cwd}/README.md has been updated.",
        15000,
    )
    s.text("README updated: it documents GET /health.", usage(15400))
    return s


# --- running the stage --------------------------------------------------------------------------


def in_process(
    data: bytes,
    fmt: Any = CC,
    engine: str = "offline",
    split: SummarizeSettings | None = None,
    breaker: Breaker | None = None,
    transcript_path: str | None = None,
    key: str | None = None,
    **settings: Any,
) -> tuple[bytes, Any]:
    """What `ctxpipe summarize` writes for `data` (read_region, summarize_entries, prefix + lines):
    `split` (default: keep the last 4) with `settings` over it; `key`, the model's (ANTHROPIC_API_KEY)."""
    offset, entries = fmt.read_region(data, "in.jsonl", "fail", ReadStats())
    chosen = replace(split or SummarizeSettings(keep_last=4), engine=engine, **settings)
    context = StageContext(NOW, transcript_path=transcript_path, api_key=key)
    notes: list[str] = []
    outcome = summarize_entries(entries, fmt, chosen, context, breaker or Breaker(), notes.append)
    outcome.progress = notes
    if not outcome.changed:
        return data, outcome
    return data[:offset] + b"".join(line_bytes(outcome.entries)), outcome


def cli(data: bytes | None, *args: str | os.PathLike[str], env: dict[str, str] | None = None) -> Any:
    """`ctxpipe summarize --now NOW ARGS` with no API key and no base URL from the caller's environment."""
    clean = {"ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": "", **(env or {})}
    return run_cli("summarize", "--now", NOW_ISO, *args, stdin=data, env=clean)


def lines_of(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


@dataclass
class Compaction:
    """A Claude Code output split into its parts."""

    above: list[bytes]  # the input's lines, as written
    boundary: dict[str, Any]
    summary: dict[str, Any]
    tail: list[dict[str, Any]]  # the lines re-emitted after the summary
    marker: dict[str, Any] | None

    @property
    def summary_text(self) -> str:
        return self.summary["message"]["content"]


def compaction(output: bytes, input_lines: int) -> Compaction:
    raw = output.splitlines(keepends=True)
    above, rest = raw[:input_lines], [orjson.loads(line) for line in raw[input_lines:]]
    boundary, summary, *tail = rest
    marker = tail.pop() if tail and tail[-1].get("subtype") == "ctxpipe_compact" else None
    return Compaction(above, boundary, summary, tail, marker)


def summary_of(output: bytes) -> str:
    """The text of the last isCompactSummary line (Claude Code) or of the first message (Messages API)."""
    objs = lines_of(output)
    found = [o for o in objs if o.get("isCompactSummary")]
    content = found[-1]["message"]["content"] if found else objs[0]["content"]
    return content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)


def section(summary: str, number: int) -> str:
    """The body of section `number` of a nine-section summary."""
    match = re.search(
        rf"(?ms)^{number}\. {re.escape(SECTION_NAMES[number - 1])}:\n(.*?)(?=^\d\. |^Earlier summary|^Facts to keep|^If you need specific|^Recent messages are preserved|\Z)",
        summary,
    )
    assert match, f"no section {number} in:\n{summary}"
    return match.group(1)


def context_messages(data: bytes, fmt: str = "claude-code") -> list[dict[str, Any]]:
    return ctxpipe.api_messages(ctxpipe.read_transcript(data, fmt))


def count_json(path: Path, *extra: str) -> dict[str, Any]:
    result = ok(run_cli("count", "--json", *extra, path))
    return json.loads(result.stdout)


def count_json_bytes(data: bytes) -> dict[str, Any]:
    return json.loads(ok(run_cli("count", "--json", "-", stdin=data)).stdout)


# --- the split ----------------------------------------------------------------------------------


def sized(role: str, tokens: int, text: bool = True) -> Message:
    """A message of exactly `tokens` padded tokens (a multiple of 4): 3 characters a token after padding."""
    assert tokens % 4 == 0
    body = "x" * (3 * tokens)
    block = {"type": "text", "text": body} if text else {"type": "thinking", "thinking": body, "signature": "s"}
    return Message(role, [block])  # type: ignore[arg-type]


def conversation(sizes: list[tuple[int, bool]]) -> list[Message]:
    return [sized("user" if i % 2 == 0 else "assistant", tokens, text) for i, (tokens, text) in enumerate(sizes)]


def test_padded_tokens_is_the_rough_estimate_times_four_thirds() -> None:
    assert padded_tokens(sized("user", 100)) == 100  # 300 characters: 75 rough tokens, × 4/3
    assert padded_tokens(Message("user", [{"type": "text", "text": "abcde"}])) == 2  # round(1.25) = 1, ceil(4/3) = 2


def test_the_tail_grows_until_both_minimums_are_met() -> None:
    msgs = conversation([(100, True)] * 10)
    # 250 tokens need 3 messages; 4 messages with text need 4: the larger wins.
    assert tail_start(msgs, SummarizeSettings(keep_min_tokens=250, keep_min_text_messages=4, keep_max_tokens=10_000)) == 6
    assert tail_start(msgs, SummarizeSettings(keep_min_tokens=450, keep_min_text_messages=2, keep_max_tokens=10_000)) == 5
    # Messages without text count for tokens only.
    msgs = conversation([(100, True), (100, True), (100, True), (100, False), (100, False), (100, True)])
    assert tail_start(msgs, SummarizeSettings(keep_min_tokens=100, keep_min_text_messages=2, keep_max_tokens=10_000)) == 2


def test_the_tail_stops_as_soon_as_it_reaches_the_maximum() -> None:
    msgs = conversation([(100, True)] * 10)
    # The minimums would want 8 messages; the maximum (300) stops the walk at the third.
    assert tail_start(msgs, SummarizeSettings(keep_min_tokens=10_000, keep_min_text_messages=8, keep_max_tokens=300)) == 7
    # One message larger than the maximum is still kept whole: the tail is never empty by size.
    big = conversation([(100, True), (100, True), (2000, True)])
    assert tail_start(big, SummarizeSettings(keep_min_tokens=10, keep_min_text_messages=1, keep_max_tokens=500)) == 2


def test_nothing_is_summarized_when_the_whole_context_fits() -> None:
    msgs = conversation([(100, True)] * 4)
    assert tail_start(msgs, SummarizeSettings(keep_min_tokens=10_000, keep_min_text_messages=5, keep_max_tokens=40_000)) == 0


split_configs = st.builds(
    lambda least, texts, most: SummarizeSettings(keep_min_tokens=least, keep_min_text_messages=texts, keep_max_tokens=most),
    st.integers(0, 1200),
    st.integers(0, 6),
    st.integers(1, 2000),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 120).map(lambda n: 4 * n), st.booleans()), min_size=1, max_size=25), split_configs, st.booleans())
def test_tail_size_rules_hold_for_any_sizes(sizes: list[tuple[int, bool]], config: SummarizeSettings, earlier_summary: bool) -> None:
    msgs = conversation(sizes)
    if earlier_summary:
        msgs[0].compact_summary = True
    floor = 1 if earlier_summary else 0
    start = tail_start(msgs, config)
    tail = msgs[start:]

    def tokens(part: list[Message]) -> int:
        return sum(padded_tokens(m) for m in part)

    def texts(part: list[Message]) -> int:
        return sum(1 for m in part if any(b["type"] == "text" for b in m.content))

    def enough(part: list[Message]) -> bool:
        return tokens(part) >= config.keep_max_tokens or (tokens(part) >= config.keep_min_tokens and texts(part) >= config.keep_min_text_messages)

    assert floor <= start <= len(msgs)
    if start > floor:
        assert enough(tail), "the tail stopped growing before it held the minimums (or the maximum)"
    if tail:
        # Never more than needed: without its oldest message the tail would not be enough, so it
        # exceeds keep-max-tokens by at most that one message.
        assert not enough(tail[1:])
        assert tokens(tail[1:]) < config.keep_max_tokens


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 60).map(lambda n: 4 * n), min_size=1, max_size=20), st.integers(0, 25), st.booleans())
def test_keep_last_keeps_exactly_n_messages(sizes: list[int], n: int, earlier_summary: bool) -> None:
    msgs = conversation([(size, True) for size in sizes])
    if earlier_summary:
        msgs[0].compact_summary = True
    start = tail_start(msgs, SummarizeSettings(keep_last=n))
    assert start == max(1 if earlier_summary else 0, len(msgs) - n)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 60).map(lambda n: 4 * n), min_size=1, max_size=20), st.floats(0.01, 1.0))
def test_keep_fraction_keeps_the_smallest_tail_holding_that_share_of_tokens(sizes: list[int], fraction: float) -> None:
    msgs = conversation([(size, True) for size in sizes])
    start = tail_start(msgs, SummarizeSettings(keep_fraction=fraction))
    total, kept = sum(sizes), sum(sizes[start:])
    assert kept >= fraction * total
    assert sum(sizes[start + 1 :]) < fraction * total


def test_keep_last_is_widened_only_to_keep_a_tool_pair_whole() -> None:
    use = Message("assistant", [{"type": "text", "text": "Running it."}, {"type": "tool_use", "id": "toolu_A", "name": "Bash", "input": {"command": "make"}}])
    result = Message("user", [{"type": "tool_result", "tool_use_id": "toolu_A", "content": "ok"}])
    msgs = [sized("user", 40), sized("assistant", 40), sized("user", 40), use, result, sized("assistant", 40)]
    assert tail_start(msgs, SummarizeSettings(keep_last=2)) == 3  # the result's tool_use comes along: 3 messages
    assert tail_start(msgs, SummarizeSettings(keep_last=1)) == 5  # no pair at the cut: exactly 1
    assert tail_start(msgs, SummarizeSettings(keep_last=3)) == 3
    # A parallel batch: two results answering one response, the cut between them.
    batch = Message(
        "assistant", [{"type": "tool_use", "id": "toolu_B", "name": "Read", "input": {}}, {"type": "tool_use", "id": "toolu_C", "name": "Read", "input": {}}]
    )
    first = Message("user", [{"type": "tool_result", "tool_use_id": "toolu_B", "content": "b"}])
    second = Message("user", [{"type": "tool_result", "tool_use_id": "toolu_C", "content": "c"}])
    msgs = [sized("user", 40), batch, first, second, sized("assistant", 40)]
    assert tail_start(msgs, SummarizeSettings(keep_last=2)) == 1
    assert tail_start(msgs, SummarizeSettings(keep_min_tokens=1, keep_min_text_messages=0, keep_max_tokens=10_000)) == 4


def test_keep_last_through_the_cli_reemits_exactly_n_messages() -> None:
    data = work_session().to_bytes()
    before = message_uuids(data)
    for n, expected in ((1, 1), (2, 3), (4, 4), (5, 5)):
        # The last 2 messages start at a tool_result: its tool_use message comes along (3 messages).
        out = ok(cli(data, "--engine", "offline", "--keep-last", str(n))).stdout
        after = message_uuids(out)
        assert len(after) == 1 + expected, (n, after)
        assert after[1:] == before[-expected:]


def test_keep_fraction_through_the_cli(tmp_path: Path) -> None:
    data = work_session().to_bytes()
    out = ok(cli(data, "--engine", "offline", "--keep-fraction", "0.3", "--report-json", tmp_path / "r.json")).stdout
    report = json.loads((tmp_path / "r.json").read_text())
    messages = CC.messages(list(ctxpipe.read_transcript(data, "claude-code").entries))
    sizes = [padded_tokens(m) for m in messages]
    kept = report["tail_messages"]
    assert report["history_messages"] + kept == len(messages)
    assert sum(sizes[-kept:]) >= 0.3 * sum(sizes) > sum(sizes[-kept + 1 :])
    assert message_uuids(out)[1:] == message_uuids(data)[-kept:]


SPLITS = [
    SummarizeSettings(keep_last=0),
    SummarizeSettings(keep_last=1),
    SummarizeSettings(keep_last=2),
    SummarizeSettings(keep_last=5),
    SummarizeSettings(keep_min_tokens=20, keep_min_text_messages=1, keep_max_tokens=60),
    SummarizeSettings(keep_min_tokens=1, keep_min_text_messages=1, keep_max_tokens=1),
    SummarizeSettings(keep_min_tokens=200, keep_min_text_messages=3, keep_max_tokens=400),
    SummarizeSettings(keep_fraction=0.5),
]


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(claude_sessions(), st.sampled_from(SPLITS))
def test_generated_sessions_keep_pairs_and_responses_whole(data: bytes, split: SummarizeSettings) -> None:
    after, outcome = in_process(data, split=split)
    if not outcome.changed:
        assert after == data
        return
    # No tool_use loses its result, no result its tool_use, in the new active context.
    unanswered_in, orphans_in = tool_problems(data)
    unanswered_out, orphans_out = tool_problems(after)
    assert unanswered_out <= unanswered_in and orphans_out <= orphans_in
    # Every message of the new context after the summary is a message of the old one with all its lines.
    old = {m[0]: m for m in message_uuids(data)}
    new = message_uuids(after)
    assert new and all(old.get(m[0]) == m for m in new[1:])
    assert set(response_groups(objects(after))) <= set(response_groups(objects(data)))
    # The input comes first, unchanged; validate finds no error the input did not have.
    assert after.startswith(data if data.endswith(b"\n") else data + b"\n")
    errors_in = {f.code for f in findings(data) if f.severity == "error"}
    assert {f.code for f in findings(after) if f.severity == "error"} <= errors_in
    # A second run finds nothing left to summarize (a fraction of a smaller whole may still cut).
    if split.keep_fraction is None:
        again, second = in_process(after, split=split)
        assert not second.changed and again == after, second.note


def test_nothing_to_summarize_passes_the_input_through_byte_for_byte() -> None:
    for name in ("basic", "parallel", "compacted", "sidechain"):
        data = (FIXTURES / "claude-code" / f"{name}.jsonl").read_bytes()
        result = ok(cli(data, "--engine", "offline"))  # default keep window: 10,000 tokens, 5 text messages
        assert result.stdout == data, name
        assert "nothing to summarize" in result.stderr.decode()
    data = (FIXTURES / "anthropic" / "basic.jsonl").read_bytes()
    result = ok(cli(data, "--engine", "offline", "--keep-last", "50"))
    assert result.stdout == data and "nothing to summarize" in result.stderr.decode()


def test_an_earlier_compact_summary_is_carried_into_the_new_one() -> None:
    data = (FIXTURES / "claude-code" / "compacted.jsonl").read_bytes()
    earlier = next(o for o in lines_of(data) if o.get("isCompactSummary"))["message"]["content"]
    out = ok(cli(data, "--engine", "offline", "--keep-last", "1")).stdout
    summary = summary_of(out)
    assert "Earlier summary" in summary
    assert earlier in summary  # every word of it, not a digest
    assert "1. Primary Request and Intent: add rate limiting to /login." in summary
    # It is summarized, never kept as if it were a tail message, whatever the keep values.
    out = ok(cli(data, "--engine", "offline", "--keep-last", "99", "--keep-min-tokens", "0")).stdout
    assert out == data


# --- the Claude Code shape ----------------------------------------------------------------------


def test_claude_code_output_shape(tmp_path: Path) -> None:
    data = work_session().to_bytes()
    input_lines = data.splitlines(keepends=True)
    result = ok(cli(data, "--engine", "offline", "--keep-last", "4", "--report-json", tmp_path / "r.json"))
    out = result.stdout
    parts = compaction(out, len(input_lines))
    report = json.loads((tmp_path / "r.json").read_text())

    assert parts.above == input_lines, "the original lines stay above, byte for byte"
    b = parts.boundary
    assert (b["type"], b["subtype"], b["parentUuid"]) == ("system", "compact_boundary", None)
    assert b["logicalParentUuid"] == lines_of(data)[-1]["uuid"]
    assert b["compactMetadata"] == {
        "trigger": "manual",
        "preTokens": report["pre_tokens"],
        "postTokens": report["post_tokens"],
        "ctxpipe": {"engine": "offline", "baseline": count_json_bytes(data)["baseline_tokens"]},
    }
    assert report["pre_tokens"] == 15400 > report["post_tokens"]  # the last response's recorded usage
    # Stamped just before the kept tail, so Claude Code (newest leaf by time) resumes the compacted chain.
    assert b["timestamp"] < parts.tail[0]["timestamp"] and b["timestamp"] > lines_of(data)[0]["timestamp"]
    assert (b["sessionId"], b["cwd"], b["version"]) == (SESSION_ID, "/home/dev/shop", "2.1.88")

    s = parts.summary
    assert s["type"] == "user" and s["isCompactSummary"] is True and s["parentUuid"] == b["uuid"]
    assert s["isSidechain"] is False and s["sessionId"] == SESSION_ID
    assert parts.summary_text.startswith(PREAMBLE + "\n")
    assert "Recent messages are preserved verbatim." in parts.summary_text

    # The kept tail: the last 4 messages' lines, original uuids and content; only the first is re-parented.
    originals = {o["uuid"]: o for o in lines_of(data)}
    tail_uuids = [u for m in message_uuids(data)[-4:] for u in m]
    assert [line["uuid"] for line in parts.tail] == tail_uuids
    assert parts.tail[0]["parentUuid"] == s["uuid"]
    assert {**parts.tail[0], "parentUuid": originals[tail_uuids[0]]["parentUuid"]} == originals[tail_uuids[0]]
    assert all(line == originals[line["uuid"]] for line in parts.tail[1:])
    # The record below the kept tail: the usage above it was measured on the old prompt, so none of it anchors a count.
    assert parts.marker is not None and parts.marker["parentUuid"] == tail_uuids[-1]
    assert parts.marker["ctxpipeMetadata"] == {"stage": "summarize", "keptMessages": 4}
    assert f"kept 4; verifier: the summary carried 13 of the 13 facts it checks (100%); 15,400 → {report['post_tokens']:,} tokens" in result.stderr.decode()
    assert report["post_tokens"] == count_json_bytes(out)["tokens"]


def test_the_active_context_after_summarizing(tmp_path: Path) -> None:
    data = work_session().to_bytes()
    out = ok(cli(data, "--engine", "offline", "--keep-last", "7")).stdout
    path, original = tmp_path / "out.jsonl", tmp_path / "in.jsonl"
    path.write_bytes(out)
    original.write_bytes(data)
    # count: the new, smaller size, the same on the fast path and with --full.
    assert count_json(original)["tokens"] == 15400
    fast, full = count_json(path), count_json(path, "--full")
    boundary = next(o for o in lines_of(out) if o.get("subtype") == "compact_boundary")
    assert fast["tokens"] == full["tokens"] == boundary["compactMetadata"]["postTokens"]
    # No usage anchors it: the session baseline plus the summary and the kept messages, far below the 15,400.
    assert fast["baseline_in_total"] and fast["tokens"] - fast["baseline_tokens"] < (15400 - fast["baseline_tokens"]) / 4
    assert full["messages"] == 8  # the summary and the 7 kept messages
    # validate: no error; the tool pairs of the new context are whole.
    report = json.loads(ok(run_cli("validate", "--json", path)).stdout)
    assert report["errors"] == 0 and report["valid"] is True
    assert {f["code"] for f in report["findings"]} <= {"duplicate-uuid"}  # the tail, written again
    assert tool_problems(out) == (set(), set())
    messages = context_messages(out)
    assert messages[0]["role"] == "user" and messages[0]["content"].startswith(PREAMBLE)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user", "assistant", "user", "assistant"]


def test_summarizing_twice_is_a_no_op() -> None:
    data = work_session().to_bytes()
    for args in (["--keep-last", "4"], ["--keep-min-tokens", "300", "--keep-min-text-messages", "2", "--keep-max-tokens", "2000"], ["--keep-last", "0"]):
        once = ok(cli(data, "--engine", "offline", *args)).stdout
        assert once != data
        twice = ok(cli(once, "--engine", "offline", *args))
        assert twice.stdout == once, args
        assert "nothing to summarize" in twice.stderr.decode()


def test_drop_history_writes_only_the_compacted_context_and_the_ledger_undoes_it(tmp_path: Path) -> None:
    data = work_session().to_bytes()
    ledger = tmp_path / "undo.jsonl"
    out = ok(cli(data, "--engine", "offline", "--keep-last", "3", "--drop-history", "--ledger", ledger)).stdout
    objs = lines_of(out)
    assert objs[0]["subtype"] == "compact_boundary" and objs[1]["isCompactSummary"] is True
    assert [o["uuid"] for o in objs[2:-1]] == [u for m in message_uuids(data)[-3:] for u in m]
    assert objs[-1]["subtype"] == "ctxpipe_compact"
    assert context_messages(out) == context_messages(ok(cli(data, "--engine", "offline", "--keep-last", "3")).stdout)
    path = tmp_path / "out.jsonl"
    path.write_bytes(out)
    assert ok(run_cli("expand", "--ledger", ledger, path)).stdout == data


def test_messages_api_input_becomes_a_summary_message_and_the_tail() -> None:
    data = ok(run_cli("convert", "--to", "anthropic", "-", stdin=work_session().to_bytes())).stdout
    lines = data.splitlines(keepends=True)
    out = ok(cli(data, "--engine", "offline", "--keep-last", "3")).stdout
    out_lines = out.splitlines(keepends=True)
    first = orjson.loads(out_lines[0])
    assert first["role"] == "user" and first["content"].startswith(PREAMBLE)
    assert out_lines[1:] == lines[-3:], "the tail's lines are the input's, byte for byte"
    assert "6. All user messages:" in first["content"] and ASK_HEALTH in first["content"]
    report = json.loads(ok(run_cli("validate", "--json", "-", stdin=out)).stdout)
    assert report["format"] == "anthropic" and report["errors"] == 0


def test_messages_api_summarizing_twice_is_a_no_op() -> None:
    data = ok(run_cli("convert", "--to", "anthropic", "-", stdin=work_session().to_bytes())).stdout
    once = ok(cli(data, "--engine", "offline", "--keep-last", "3")).stdout
    twice = ok(cli(once, "--engine", "offline", "--keep-last", "3"))
    assert twice.stdout == once
    assert "nothing to summarize" in twice.stderr.decode()


def test_count_is_smaller_even_when_now_is_before_the_transcript(tmp_path: Path) -> None:
    data = work_session().to_bytes()
    result = ok(run_cli("summarize", "--engine", "offline", "--keep-last", "4", "--now", "2026-01-01T00:00:00Z", stdin=data, env={"ANTHROPIC_API_KEY": ""}))
    path = tmp_path / "out.jsonl"
    path.write_bytes(result.stdout)
    assert count_json(path)["tokens"] < 15400


# --- the offline engine -------------------------------------------------------------------------


def offline_summary_of(data: bytes, *args: str, fmt: str | None = None) -> str:
    return summary_of(ok(cli(data, "--engine", "offline", *args, *(["-f", fmt] if fmt else []))).stdout)


def test_offline_summary_has_the_nine_sections_in_order() -> None:
    summary = offline_summary_of(work_session().to_bytes(), "--keep-last", "2")
    body = summary.split(PREAMBLE, 1)[1]
    assert body.lstrip().startswith("Summary:\n1. Primary Request and Intent:\n")
    headings = re.findall(r"(?m)^(\d)\. ([A-Za-z ]+):$", body)
    assert headings == [(str(n), name) for n, name in enumerate(SECTION_NAMES, 1)]


def test_offline_summary_lists_every_typed_message_verbatim_and_trims_a_giant_paste() -> None:
    paste = "\n".join(f"{n:05d} ERROR worker-{n % 7} timed out after {n}ms" for n in range(400))  # ~17,000 characters
    s = work_session(paste=paste)
    s.user("<command-name>/clear</command-name>")  # injected by Claude Code: not something the user typed
    s.user("Caveat: The messages below were generated by the user while running local commands.", isMeta=True)
    s.user("And add a LOG_LEVEL setting.")
    s.text("Added LOG_LEVEL.", usage(16000))
    summary = offline_summary_of(s.to_bytes(), "--keep-last", "1")
    typed = section(summary, 6)
    for message in (ASK_LOGGING, ASK_ROTATION, ASK_README, "And add a LOG_LEVEL setting."):
        assert f"   - {message}\n" in typed
    # The paste: kept verbatim up to 2,000 characters, then trimmed and marked as such.
    first = ASK_HEALTH + "\n" + paste
    assert first[:2000] in typed and first[:2100] not in typed
    assert f"[… {len(first) - 2000:,} more characters of a long paste trimmed …]" in typed
    assert "/clear" not in typed and "Caveat" not in typed and "3 passed" not in typed
    assert [line for line in typed.splitlines() if line.startswith("   - ")][0].startswith(f"   - {ASK_HEALTH}")
    assert typed.count("   - ") == 5


def test_offline_summary_files_failures_todos_and_last_request() -> None:
    s = work_session()
    s.call("Read", {"file_path": "/home/dev/shop/logging_mw.py"}, "import json\n", 15600)  # written, then read: last action wins
    s.call("Bash", {"command": "ruff check ."}, "E501 line too long", 15800, error=True)
    s.text("Lint fails on one long line.", usage(16000))
    s.user("Ignore the linter for now.")
    s.text("OK.", usage(16200))
    summary = offline_summary_of(s.to_bytes(), "--keep-last", "1")

    files = section(summary, 3)
    assert "   - /home/dev/shop/server.py — edited\n" in files
    assert "   - /home/dev/shop/app.py — edited\n" in files
    assert "   - /home/dev/shop/README.md — edited\n" in files  # read first, edited last
    assert "   - /home/dev/shop/config.py — read\n" in files
    assert "   - /home/dev/shop/logging_mw.py — written, then read\n" in files
    errors = section(summary, 4)
    # Unresolved first; each with its call, the line naming the failure, and how it was fixed.
    assert errors.startswith("   - [UNRESOLVED] Bash ruff check .\n     error: E501 line too long\n")
    assert (
        "   - [fixed] Bash pytest -q tests/test_health.py\n     error: FAILED tests/test_health.py::test_health - assert 404 == 200\n"
        "     then succeeded: Bash pytest -q — The route is not registered in create_app(); registering it.\n"
    ) in errors
    assert errors.count("   - [") == 2  # the run that passed is no failure
    # Only the last todo list, only its open items.
    todos = section(summary, 7)
    assert "   - [in_progress] Rotate logs/access.log\n" in todos
    assert "   - [pending] Document the log format\n" in todos
    assert "middleware" not in todos
    assert section(summary, 9).strip().splitlines() == [
        'Continue with the latest request: "Ignore the linter for now."',
        "   In progress: Rotate logs/access.log",
        "   Unresolved: Bash ruff check . — E501 line too long",
    ]
    assert "Ignore the linter for now." in section(summary, 6)
    assert section(summary, 1).strip().startswith(ASK_HEALTH)


def test_offline_summary_keeps_text_typed_next_to_a_tool_result() -> None:
    data = (FIXTURES / "anthropic" / "basic.jsonl").read_bytes()  # line 5: a tool_result and "Also add a docstring."
    summary = offline_summary_of(data, "--keep-last", "1")
    assert "Also add a docstring." in section(summary, 6)
    assert "Also add a docstring." in section(summary, 9)


# --- engines and auto ---------------------------------------------------------------------------

NOTES = """# Session Title
_A short and distinctive 5-10 word descriptive title for the session_

Health endpoint and request logging for the shop

# Current State
_What is actively being worked on right now?_

Request logging is in; log rotation (10 MB, 5 files) is being configured. Code word: MARIGOLD.
"""
TEMPLATE = """# Session Title
_A short and distinctive 5-10 word descriptive title for the session_

# Current State
_What is actively being worked on right now?_

# Task specification
_What did the user ask to build?_
"""


def project(tmp_path: Path, notes: str | None) -> Path:
    """<project>/<session>.jsonl, with <project>/<session>/session-memory/summary.md when `notes`."""
    transcript = tmp_path / "proj" / f"{SESSION_ID}.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_bytes(work_session().to_bytes())
    if notes is not None:
        memory = transcript.parent / SESSION_ID / "session-memory" / "summary.md"
        memory.parent.mkdir(parents=True)
        memory.write_text(notes)
    return transcript


def test_session_memory_engine_uses_the_notes_beside_the_transcript(tmp_path: Path) -> None:
    transcript = project(tmp_path, NOTES)
    for engine in ("session-memory", "auto"):
        result = ok(cli(None, "--engine", engine, "--keep-last", "3", transcript))
        summary = summary_of(result.stdout)
        assert "Code word: MARIGOLD." in summary and "Health endpoint and request logging for the shop" in summary
        assert "1. Primary Request and Intent:" not in summary  # not the offline engine
        assert f"read the full transcript at: {transcript}" in summary
        err = result.stderr.decode()
        assert "with the session-memory engine" in err
        if engine == "auto":
            assert "found the session notes at" in err and "session-memory/summary.md" in err


def test_session_memory_file_given_explicitly(tmp_path: Path) -> None:
    notes = tmp_path / "elsewhere.md"
    notes.write_text(NOTES.replace("MARIGOLD", "TULIP"))
    data = work_session().to_bytes()
    result = ok(cli(data, "--engine", "session-memory", "--session-memory", notes, "--keep-last", "3"))
    assert "Code word: TULIP." in summary_of(result.stdout)
    assert "with the session-memory engine" in result.stderr.decode()
    # Asked for, with no notes anywhere: a clear error, not an offline summary.
    result = cli(data, "--engine", "session-memory", "--keep-last", "3")
    assert result.returncode == 1 and result.stdout == b""
    assert "no notes file found" in result.stderr.decode() and b"Traceback" not in result.stderr


def test_auto_does_not_use_notes_that_are_only_the_template(tmp_path: Path) -> None:
    transcript = project(tmp_path, TEMPLATE)
    result = ok(cli(None, "--keep-last", "3", transcript))
    assert "with the offline engine" in result.stderr.decode()
    summary = summary_of(result.stdout)
    assert "1. Primary Request and Intent:" in summary and "_What did the user ask to build?_" not in summary


def test_session_memory_engine_refuses_template_only_notes(tmp_path: Path) -> None:
    transcript = project(tmp_path, TEMPLATE)
    result = cli(None, "--engine", "session-memory", "--keep-last", "3", transcript)
    assert result.returncode == 1 and result.stdout == b""
    assert "template" in result.stderr.decode()


def summary_reply(text: str = "Summary body.") -> str:
    return "<analysis>\nWalking through it.\n</analysis>\n\n<summary>\n" + text + "\n</summary>"


def nine_sections(*extra: str) -> str:
    """A plausible model summary carrying every key fact of work_session() (and `extra`)."""
    facts = [
        ASK_HEALTH,
        ASK_LOGGING,
        ASK_ROTATION,
        ASK_README,
        "/home/dev/shop/server.py",
        "/home/dev/shop/app.py",
        "/home/dev/shop/logging_mw.py",
        "/home/dev/shop/README.md",
        "Rotate logs/access.log",
        "Document the log format",
        "FAILED tests/test_health.py::test_health - assert 404 == 200",
        *extra,
    ]
    return "\n".join(f"{n}. {name}:\n   " + (" | ".join(facts) if n == 6 else "see section 6") for n, name in enumerate(SECTION_NAMES, 1))


@pytest.fixture
def server():
    with MessagesServer() as s:
        yield s
    assert s.threads() == []


def test_auto_picks_the_llm_engine_when_a_key_is_set_and_never_prints_the_key(tmp_path: Path, server: MessagesServer) -> None:
    server.enqueue(summary_reply(nine_sections()))
    data = work_session().to_bytes()
    report_path = tmp_path / "r.json"
    result = ok(cli(data, "--keep-last", "3", "--base-url", server.url, "--report-json", report_path, env={"ANTHROPIC_API_KEY": SECRET}))
    err = result.stderr.decode()
    assert "with the llm engine (ANTHROPIC_API_KEY is set)" in err
    (request,) = server.message_requests()
    assert request.api_key_present and request.body["model"] == MODEL  # the transcript's model
    summary = summary_of(result.stdout)
    assert "Summary:\n1. Primary Request and Intent:" in summary and "Walking through it." not in summary
    report = json.loads(report_path.read_text())
    assert report["engine"] == "llm" and report["llm_attempts"] == 1 and report["dropped_api_rounds"] == 0
    for blob in (result.stdout, result.stderr, report_path.read_bytes()):
        assert SECRET.encode() not in blob and b"CTXPIPE-TEST-SECRET" not in blob

    # Without a key: offline, and stderr says why.
    result = ok(cli(data, "--keep-last", "3", "--base-url", server.url))
    assert "with the offline engine (no session notes and no ANTHROPIC_API_KEY)" in result.stderr.decode()
    assert len(server.message_requests()) == 1


def test_a_rejected_key_falls_back_without_printing_it(tmp_path: Path, server: MessagesServer) -> None:
    server.enqueue(Reply.error(401, "authentication_error", "invalid x-api-key"))
    result = ok(
        cli(
            work_session().to_bytes(),
            "--engine",
            "llm",
            "--keep-last",
            "3",
            "--base-url",
            server.url,
            "--report-json",
            tmp_path / "r.json",
            env={"ANTHROPIC_API_KEY": SECRET},
        )
    )
    err = result.stderr.decode()
    assert "so the offline engine ran" in err and "401" in err
    assert "1. Primary Request and Intent:" in summary_of(result.stdout)
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["engine"] == "offline" and "401" in report["fallback_reason"]
    for blob in (result.stdout, result.stderr, (tmp_path / "r.json").read_bytes()):
        assert SECRET.encode() not in blob


def test_engine_llm_without_a_key_is_an_error() -> None:
    result = cli(work_session().to_bytes(), "--engine", "llm", "--keep-last", "3")
    assert result.returncode == 1 and result.stdout == b""
    assert "ANTHROPIC_API_KEY" in result.stderr.decode() and b"Traceback" not in result.stderr


# --- the LLM engine against the fake Messages API -----------------------------------------------


def history_of(s: Session, keep_last: int = 3) -> list[Message]:
    entries = list(ctxpipe.read_transcript(s.to_bytes(), "claude-code").entries)
    messages = CC.messages(entries)
    return messages[: tail_start(messages, SummarizeSettings(keep_last=keep_last))]


def client_for(server: MessagesServer, **kw: Any) -> anthropic.Anthropic:
    import anthropic  # on first use: the SDK takes a second to import, in every worker that collects this module

    return anthropic.Anthropic(base_url=server.url, api_key="test-key", **{"max_retries": 2, **kw})


def request_text(request: Any) -> str:
    (message,) = request.body["messages"]
    return "\n".join(block.get("text", "") for block in message["content"] if block.get("type") == "text")


def test_the_summary_request_asks_for_text_and_the_nine_sections(server: MessagesServer) -> None:
    server.enqueue(summary_reply("1. Primary Request and Intent: the health endpoint."))
    result = llm_summary(history_of(work_session()), SummarizeSettings(instructions="Mention MARIGOLD."), ModelAccess(MODEL), client=client_for(server))
    assert result.text == "Summary:\n1. Primary Request and Intent: the health endpoint."
    assert (result.attempts, result.dropped_groups) == (1, 0) and result.usage["input_tokens"] > 0
    (request,) = server.message_requests()
    body = request.body
    assert "tools" not in body and body["model"] == MODEL
    assert "no tools" in body["system"]
    text = request_text(request)
    assert "Answer with text only. Do not call any tool" in text
    for number, name in enumerate(SECTION_NAMES, 1):
        assert f"\n{number}. {name}\n" in text
    assert "<analysis>" in text and "<summary>" in text and "Mention MARIGOLD." in text
    # The conversation is in the request: typed messages, calls and results.
    assert f"[user]: {ASK_HEALTH}" in text and "[result of Bash (error)]: FAILED tests/test_health.py" in text
    assert "Look at the app factory first." not in text  # thinking is not the conversation's content
    assert "README updated: it documents GET /health." not in text  # in the kept tail, not in what is summarized


def test_analysis_is_stripped_and_summary_tags_become_a_heading(server: MessagesServer) -> None:
    server.enqueue(
        "<analysis>\nStep 1: read.\n\n\nStep 2: <b>edit</b>.\n</analysis>\nPreface line.\n<summary>\n1. Primary Request and Intent:\n   Health.\n</summary>\nTrailer."
    )
    result = llm_summary(history_of(work_session()), SummarizeSettings(), ModelAccess(MODEL), client=client_for(server))
    assert result.text == "Preface line.\nSummary:\n1. Primary Request and Intent:\n   Health.\nTrailer."


def test_images_become_markers_unless_asked_to_describe_them(server: MessagesServer) -> None:
    s = work_session(image=True)
    shot = s.tool_id()
    s.response([{"type": "tool_use", "id": shot, "name": "Screenshot", "input": {}}], usage(15600))
    s.result(shot, [{"type": "text", "text": "The page:"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJDREVGR0g="}}])
    s.text("The page renders.", usage(15800))
    history = history_of(s, keep_last=1)
    server.enqueue(summary_reply(), summary_reply())
    llm_summary(history, SummarizeSettings(), ModelAccess(MODEL), client=client_for(server))
    llm_summary(history, SummarizeSettings(describe_images=True), ModelAccess(MODEL), client=client_for(server))
    plain, described = server.message_requests()
    blocks = plain.body["messages"][0]["content"]
    assert all(block["type"] == "text" for block in blocks)
    assert request_text(plain).count("[image]") == 2
    assert "iVBORw0KGgo" not in json.dumps(plain.body) and "QUJDREVGR0g=" not in json.dumps(plain.body)
    images = [block for block in described.body["messages"][0]["content"] if block["type"] == "image"]
    assert [image["source"]["data"] for image in images] == ["iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk", "QUJDREVGR0g="]
    assert "describe it in one line" in request_text(described)


def test_describe_images_through_the_cli(server: MessagesServer) -> None:
    server.enqueue(summary_reply(nine_sections()))
    ok(
        cli(
            work_session(image=True).to_bytes(),
            "--engine",
            "llm",
            "--describe-images",
            "--keep-last",
            "3",
            "--base-url",
            server.url,
            env={"ANTHROPIC_API_KEY": SECRET},
        )
    )
    (request,) = server.message_requests()
    assert [b["type"] for b in request.body["messages"][0]["content"]].count("image") == 1


def test_rate_limit_with_retry_after_then_success(server: MessagesServer) -> None:
    server.enqueue(Reply.rate_limit(0.4), summary_reply())
    started = time.monotonic()
    result = llm_summary(history_of(work_session()), SummarizeSettings(), ModelAccess(MODEL), client=client_for(server))
    assert time.monotonic() - started >= 0.4, "retry-after was not honoured"
    assert result.text == "Summary:\nSummary body."
    assert [r.status for r in server.message_requests()] == [429, 200]


def test_overloaded_then_success(server: MessagesServer) -> None:
    server.enqueue(Reply.overloaded(), summary_reply())
    result = llm_summary(history_of(work_session()), SummarizeSettings(), ModelAccess(MODEL), client=client_for(server))
    assert result.text == "Summary:\nSummary body."
    assert [r.status for r in server.message_requests()] == [529, 200]
    first, second = server.message_requests()
    assert first.body == second.body


def test_prompt_too_long_drops_the_oldest_rounds_and_retries(server: MessagesServer) -> None:
    server.enqueue(Reply.prompt_too_long(200_010, 200_000), Reply.prompt_too_long(200_010, 200_000), summary_reply())
    progress: list[str] = []
    result = llm_summary(history_of(work_session()), SummarizeSettings(), ModelAccess(MODEL), progress.append, client=client_for(server))
    assert (result.attempts, result.dropped_groups) == (3, 2)
    requests = server.message_requests()
    assert [r.status for r in requests] == [400, 400, 200]
    texts = [request_text(r) for r in requests]
    sizes = [len(json.dumps(r.body)) for r in requests]
    assert sizes[0] > sizes[1] > sizes[2]
    assert TRUNCATION_MARKER not in texts[0] and TRUNCATION_MARKER in texts[1] and TRUNCATION_MARKER in texts[2]
    assert f"[user]: {ASK_HEALTH}" in texts[0] and f"[user]: {ASK_HEALTH}" not in texts[1]  # the oldest round went first
    assert texts[1].count("[assistant") > texts[2].count("[assistant")
    assert len(progress) == 2 and "prompt too long" in progress[0]


def test_prompt_too_long_through_the_cli_is_in_the_report(tmp_path: Path, server: MessagesServer) -> None:
    server.enqueue(Reply.prompt_too_long(200_010, 200_000), Reply.prompt_too_long(200_010, 200_000), summary_reply(nine_sections()))
    ok(
        cli(
            work_session().to_bytes(),
            "--engine",
            "llm",
            "--keep-last",
            "3",
            "--base-url",
            server.url,
            "--report-json",
            tmp_path / "r.json",
            env={"ANTHROPIC_API_KEY": SECRET},
        )
    )
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["engine"], report["llm_attempts"], report["dropped_api_rounds"]) == ("llm", 3, 2)
    assert [r.status for r in server.message_requests()] == [400, 400, 200]


def test_a_prompt_too_long_that_never_fits_raises(server: MessagesServer) -> None:
    server.default_reply = lambda body: Reply.prompt_too_long()
    with pytest.raises(SummaryFailed, match="refused"):
        llm_summary(history_of(work_session()), SummarizeSettings(), ModelAccess(MODEL), client=client_for(server))
    assert 2 <= len(server.message_requests()) <= 4


def test_a_timeout_falls_back_to_the_offline_engine(server: MessagesServer) -> None:
    server.enqueue(Reply.timeout(3))
    llm = dict(model=MODEL, key="test-key", base_url=server.url, timeout=0.3, max_retries=0)
    started = time.monotonic()
    out, outcome = in_process(work_session().to_bytes(), engine="llm", **llm)
    assert time.monotonic() - started < 2.5
    assert outcome.report.engine == "offline" and "timed out" in outcome.report.fallback_reason
    assert f"the model failed (the summary request to {server.url} timed out: a summary may take 0.3 s in all" in outcome.note
    assert outcome.note.rstrip().endswith("facts it checks (100%)") and "so the offline engine ran" in outcome.note
    assert "1. Primary Request and Intent:" in summary_of(out)


def test_a_tool_call_answer_gets_one_retry_with_a_reminder(server: MessagesServer) -> None:
    server.enqueue(Reply.tool_use("Read", {"file_path": "/home/dev/shop/server.py"}, text="Let me look."), summary_reply())
    result = llm_summary(history_of(work_session()), SummarizeSettings(), ModelAccess(MODEL), client=client_for(server))
    assert result.text == "Summary:\nSummary body." and result.attempts == 2
    first, second = server.message_requests()
    reminder = "Your previous answer called a tool. Answer with the text summary only."
    assert reminder not in request_text(first) and request_text(second).endswith(reminder)


def test_two_tool_call_answers_fall_back_to_the_offline_engine(tmp_path: Path, server: MessagesServer) -> None:
    server.enqueue(Reply.tool_use("Bash", {"command": "ls"}), Reply.tool_use("Read", {"file_path": "x"}))
    result = ok(
        cli(
            work_session().to_bytes(),
            "--engine",
            "llm",
            "--keep-last",
            "3",
            "--base-url",
            server.url,
            "--report-json",
            tmp_path / "r.json",
            env={"ANTHROPIC_API_KEY": SECRET},
        )
    )
    assert len(server.message_requests()) == 2
    err = result.stderr.decode()
    assert "the model failed (the model answered with a tool call instead of a summary), so the offline engine ran" in err
    assert json.loads((tmp_path / "r.json").read_text())["engine"] == "offline"
    assert "1. Primary Request and Intent:" in summary_of(result.stdout)


def test_the_breaker_stops_asking_after_three_failed_summaries(server: MessagesServer) -> None:
    server.default_reply = lambda body: Reply.server_error()
    llm = dict(model=MODEL, key="test-key", base_url=server.url, max_retries=0)
    breaker = Breaker()
    data = work_session().to_bytes()
    seen = []
    for _ in range(5):  # five files summarized in one run
        _, outcome = in_process(data, engine="auto", **llm, breaker=breaker)
        seen.append((len(server.message_requests()), outcome.report.engine, outcome.note))
    assert [count for count, _, _ in seen] == [1, 2, 3, 3, 3]
    assert all(engine == "offline" for _, engine, _ in seen)
    assert all("the model failed" in note for _, _, note in seen[:3])
    assert all("3 summaries in a row failed in this run: the model is not asked again" in note for _, _, note in seen[3:])


def test_a_success_resets_the_breaker(server: MessagesServer) -> None:
    llm = dict(model=MODEL, key="test-key", base_url=server.url, max_retries=0)
    breaker = Breaker()
    data = work_session().to_bytes()
    server.enqueue(Reply.server_error(), Reply.server_error(), summary_reply(nine_sections()), Reply.server_error(), Reply.server_error())
    engines = [in_process(data, engine="auto", **llm, breaker=breaker)[1].report.engine for _ in range(5)]
    assert engines == ["offline", "offline", "llm", "offline", "offline"]
    assert len(server.message_requests()) == 5 and not breaker.open


def test_the_breaker_also_holds_for_engine_llm(server: MessagesServer) -> None:
    server.default_reply = lambda body: Reply.server_error()
    llm = dict(model=MODEL, key="test-key", base_url=server.url, max_retries=0)
    breaker = Breaker()
    data = work_session().to_bytes()
    for _ in range(5):
        in_process(data, engine="llm", **llm, breaker=breaker)
    assert len(server.message_requests()) == 3


# --- the verifier -------------------------------------------------------------------------------


def test_recall_is_in_the_report(tmp_path: Path) -> None:
    ok(cli(work_session().to_bytes(), "--engine", "offline", "--keep-last", "3", "--report-json", tmp_path / "r.json"))
    report = json.loads((tmp_path / "r.json").read_text())
    v = report["verification"]
    # At least: 4 typed instructions in the history, 3 files edited or written there, the last request, 2 open todos.
    assert v["facts"] >= 10 and v["carried"] == v["facts"] and v["recall"] == 1.0 and v["missing"] == []
    assert report["verification_before_repair"]["recall"] == 1.0


def test_a_summary_missing_an_instruction_is_repaired_by_the_model(server: MessagesServer) -> None:
    partial = nine_sections().replace(ASK_ROTATION + " | ", "")
    server.enqueue(summary_reply(partial), summary_reply(nine_sections()))
    llm = dict(model=MODEL, key="test-key", base_url=server.url, max_retries=0)
    out, outcome = in_process(work_session().to_bytes(), engine="llm", **llm, keep_last=1)
    first, repair = server.message_requests()
    text = repair.body["messages"][0]["content"]
    assert "It leaves out these facts" in text and f"- {ASK_ROTATION}" in text
    assert ASK_LOGGING not in text.split("It leaves out these facts")[1]  # only what was missing is listed
    report = outcome.report
    assert report.verification_before_repair.missing == [MissingFact(kind="instruction", text=ASK_ROTATION)]
    assert report.repaired is True and report.verification.recall == 1.0
    summary = summary_of(out)
    assert ASK_ROTATION in summary and "Facts to keep" not in summary


def test_a_summary_still_missing_an_instruction_gets_facts_to_keep(tmp_path: Path, server: MessagesServer) -> None:
    partial = nine_sections().replace(ASK_ROTATION + " | ", "")
    server.enqueue(summary_reply(partial), summary_reply(partial))
    result = ok(
        cli(
            work_session().to_bytes(),
            "--engine",
            "llm",
            "--keep-last",
            "1",
            "--base-url",
            server.url,
            "--report-json",
            tmp_path / "r.json",
            env={"ANTHROPIC_API_KEY": SECRET},
        )
    )
    assert len(server.message_requests()) == 2  # the summary, one repair request, nothing more
    summary = summary_of(result.stdout)
    facts = summary.split("Facts to keep (checked by ctxpipe; the summary above did not carry them):\n", 1)
    assert len(facts) == 2 and facts[1].startswith(f"- User instruction: {ASK_ROTATION}")
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["verification_before_repair"]["recall"] < 1.0 and report["verification"]["recall"] == 1.0
    # The rewrite carried no more than the first summary: not taken, and not called a repair.
    assert "(missing instruction 3/4; 1 added as Facts to keep); recall now 100%" in result.stderr.decode()
    assert "repaired" not in report and "carried no more of the facts" in report["repair_error"]
    assert report["verification_before_repair"]["kinds"]["instruction"] == {"facts": 4, "carried": 3, "recall": 0.75}


def test_a_fixed_error_is_not_an_unresolved_fact(server: MessagesServer) -> None:
    s = work_session()  # pytest fails, the assistant explains, edits, and `pytest -q` then passes (3 passed)
    entries = list(ctxpipe.read_transcript(s.to_bytes(), "claude-code").entries)
    messages = CC.messages(entries)
    start = tail_start(messages, SummarizeSettings(keep_last=3))
    facts = key_facts(messages[:start], messages[start:])
    assert [f for f in facts if f.kind == "error"] == []
    assert [f.text for f in facts if f.kind == "fixed-error"] == ["FAILED tests/test_health.py::test_health - assert 404 == 200"]
    server.enqueue(summary_reply(nine_sections()))  # it names the failure, as every error met must be
    out, outcome = in_process(s.to_bytes(), engine="llm", model=MODEL, key="test-key", base_url=server.url, max_retries=0, keep_last=3)
    assert len(server.message_requests()) == 1 and "Unresolved error" not in summary_of(out)


def test_summarize_goldens_match_their_format_schema() -> None:
    from ctxpipe.jobs import schemas

    outputs = sorted((FIXTURES / "summarize").glob("*.out.jsonl"))
    assert len(outputs) >= 3
    for path in outputs:
        objs = lines_of(path.read_bytes())
        schema = "anthropic.message.schema.json" if "role" in objs[0] else "claude-code.entry.schema.json"
        for obj in objs:
            assert schemas.errors(schema, obj) == [], (path.name, obj.get("uuid"))
    shapes = {path.name: [o.get("subtype") or o.get("type") or o.get("role") for o in lines_of(path.read_bytes())] for path in outputs}
    assert "compact_boundary" in shapes["compacted-keep-last.out.jsonl"] and "ctxpipe_compact" in shapes["compacted-keep-last.out.jsonl"]
    assert shapes["repeats-drop-history.out.jsonl"] == ["compact_boundary", "user", "assistant", "ctxpipe_compact"]


@pytest.mark.parametrize("reply", ["<analysis>Only my notes on the session.</analysis>", "<analysis>notes</analysis>\n\n<summary>  </summary>"])
def test_a_reply_with_no_summary_in_it_is_a_failed_summary_and_offline_stands_in(server: MessagesServer, reply: str) -> None:
    """Issue 22, case 2: the reply held only its <analysis> (or an empty <summary>): an empty summary
    would have replaced the history (with --drop-history, lost it)."""
    data = (FIXTURES / "claude-code" / "compacted.jsonl").read_bytes()
    server.enqueue(reply)
    out, outcome = in_process(data, engine="llm", model=MODEL, key="test-key", base_url=server.url, max_retries=0, keep_last=1, drop_history=True)
    assert outcome.report.engine == "offline" and "holds no summary" in outcome.report.fallback_reason
    assert "1. Primary Request and Intent" in summary_of(out)


def test_a_server_that_is_down_is_named_with_its_url_and_offline_stands_in() -> None:
    """Issue 22, case 18: the note said "offline engine (asked for)" and "Connection error." alone."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    data = (FIXTURES / "claude-code" / "compacted.jsonl").read_bytes()
    out, outcome = in_process(data, engine="llm", model=MODEL, key="test-key", base_url=url, max_retries=0, keep_last=1)
    assert outcome.report.engine == "offline" and outcome.report.engine_reason == "llm engine: asked for"
    # The client's own words follow the URL ("Connection error." in anthropic 0.x–2.16; newer
    # releases name the refused address): the note must carry them, whatever they are.
    said = re.search(rf"the model failed \(the API call to {re.escape(url)} failed: (.+?)\), so the offline engine ran", outcome.note)
    assert said is not None and said.group(1).strip(), outcome.note
    assert "with the offline engine (llm engine: asked for)" in outcome.note


def with_more_history(data: bytes, exchanges: int = 6) -> bytes:
    """`data` with long exchanges appended below its last line (chained to it), then a short one: a
    history a summary can shrink."""
    lines = [orjson.loads(line) for line in data.splitlines() if line.strip()]
    last = lines[-1]
    added = []
    for number in range(exchanges + 1):
        text = "Short question?" if number == exchanges else f"Exchange {number}: " + "the limiter keeps a window per address and resets it " * 60
        for role in ("user", "assistant"):
            uuid = f"00000000-0000-4000-9000-{len(added):012d}"
            line = {key: last[key] for key in ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch") if key in last}
            message: dict[str, Any] = {"role": role, "content": text if role == "user" else [{"type": "text", "text": "Noted. " + text}]}
            if role == "assistant":
                message |= {"id": f"msg_more{len(added)}", "type": "message", "model": MODEL, "usage": usage(12_000 + 800 * len(added))}
            line |= {"parentUuid": last["uuid"], "type": role, "message": message, "uuid": uuid, "timestamp": f"2026-05-04T11:{len(added):02d}:00.000Z"}
            added.append(line)
            last = line
    return data + b"".join(orjson.dumps(line) + b"\n" for line in added)


def test_the_llm_engine_never_drops_an_earlier_summary(server: MessagesServer) -> None:
    data = with_more_history((FIXTURES / "claude-code" / "compacted.jsonl").read_bytes())
    server.enqueue("<summary>1. Primary Request and Intent: 5 requests per minute per IP.</summary>")  # shorter than the history it replaces
    llm = dict(model=MODEL, key="test-key", base_url=server.url, max_retries=0)
    out, outcome = in_process(data, engine="llm", **llm, keep_last=1)
    assert outcome.report.engine == "llm", outcome.note
    assert "add rate limiting to /login" in summary_of(out)


# --- the real Claude Code resumes it ------------------------------------------------------------

NEW_PROMPT = "What is left to do?"


def blocks_in_order(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The conversation's blocks as (kind, text or tool id), without Claude Code's reminders, thinking and the new prompt."""
    out = []
    for message in messages:
        content = message["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            kind = block.get("type")
            if kind == "text":
                text = block["text"].strip()
                if text and not text.startswith(("<system-reminder>", PREAMBLE)) and text != NEW_PROMPT:
                    out.append(("text", text))
            elif kind == "tool_use":
                out.append(("tool_use", block["id"]))
            elif kind == "tool_result":
                out.append(("tool_result", block["tool_use_id"]))
    return out


def pairs_whole(messages: list[dict[str, Any]]) -> bool:
    for index, message in enumerate(messages):
        content = message["content"] if isinstance(message["content"], list) else []
        uses = {b["id"] for b in content if b.get("type") == "tool_use"}
        if uses:
            following = messages[index + 1]["content"] if index + 1 < len(messages) and isinstance(messages[index + 1]["content"], list) else []
            if uses != {b["tool_use_id"] for b in following if b.get("type") == "tool_result"}:
                return False
        results = {b["tool_use_id"] for b in content if b.get("type") == "tool_result"}
        if results:
            previous = messages[index - 1]["content"] if index and isinstance(messages[index - 1]["content"], list) else []
            if not results <= {b["id"] for b in previous if b.get("type") == "tool_use"}:
                return False
    return True


@needs_claude_code
@pytest.mark.parametrize(
    "now",
    [
        pytest.param("2026-03-01T00:00:00Z", id="boundary-stamped-before-the-tail"),
        pytest.param(None, id="real-clock"),
    ],
)
def test_claude_code_resumes_the_summarized_session(tmp_path: Path, now: str | None) -> None:
    from claude_code import resume

    cwd = tmp_path / "shop"
    session_id = str(uuidlib.uuid4())
    original = work_session(str(cwd), session_id, seed=5).to_bytes()
    args = ["summarize", "--engine", "offline", "--keep-last", "6", *(["--now", now] if now else [])]
    compacted = ok(run_cli(*args, stdin=original, env={"ANTHROPIC_API_KEY": ""})).stdout
    kept = context_messages(compacted)[1:]  # what the tail holds, in Messages-API form
    assert len(kept) == 7  # 6, widened by one to keep the `ls logs` pair whole

    with MessagesServer() as server:
        before = resume(original, session_id, cwd, NEW_PROMPT, server)
        after = resume(compacted, session_id, cwd, NEW_PROMPT, server)
    assert before.returncode == 0 and after.returncode == 0, after.debug()
    assert after.external == []
    sent = after.body["messages"]
    first = sent[0]["content"]
    first_text = first if isinstance(first, str) else "\n".join(b.get("text", "") for b in first if b.get("type") == "text")
    assert PREAMBLE in first_text, f"Claude Code did not resume the summary:\n{after.debug()}"
    assert "6. All user messages:" in first_text and ASK_HEALTH in first_text
    assert blocks_in_order(sent) == blocks_in_order(kept), "the kept tail is not what Claude Code sent after the summary"
    assert pairs_whole(sent)
    assert len(sent) < len(before.body["messages"]) and len(json.dumps(sent)) < len(json.dumps(before.body["messages"]))
    # Claude Code chained the new turn onto the last line summarize wrote (the ctxpipe_compact record
    # below the kept tail, stamped after it: the newest line), so the kept tail is in the new turn's chain.
    written = lines_of(compacted)
    assert written[-1]["subtype"] == "ctxpipe_compact" and written[-1]["parentUuid"] == [o for o in written if o["type"] in ("user", "assistant")][-1]["uuid"]
    appended = [orjson.loads(line) for line in after.session_after[len(compacted) :].splitlines()]
    new_user = next(o for o in appended if o.get("type") == "user")
    assert new_user["parentUuid"] == written[-1]["uuid"]


# --- one acceptance rule: a summary shrinks the context (issue 22, case 3) -------------------------


def test_a_model_reply_larger_than_the_history_is_no_summary_and_offline_stands_in(server: MessagesServer) -> None:
    """A 2 MB reply once turned a 6,655-token session into 1,034,013 tokens."""
    data = with_more_history((FIXTURES / "claude-code" / "compacted.jsonl").read_bytes())
    server.enqueue("<summary>1. Primary Request and Intent: " + "the limiter " * 150_000 + "</summary>")
    llm = dict(model=MODEL, key="test-key", base_url=server.url, max_retries=0)
    # Without the verifier: its repair would ask the model again, and the server's next answer is short.
    out, outcome = in_process(data, engine="llm", **llm, keep_last=1, verify=False)
    assert outcome.report.engine == "offline" and outcome.report.engine_reason == "llm engine: asked for"
    reason = outcome.report.fallback_reason
    assert reason.startswith("the llm summary would leave ") and "a summary that does not shrink the context is not one" in reason
    assert f"the model failed ({reason}), so the offline engine ran" in outcome.note
    assert outcome.report.post_tokens < outcome.report.pre_tokens
    assert "the limiter the limiter" not in summary_of(out)


def test_an_automatic_compaction_that_would_grow_the_context_is_not_taken(tmp_path: Path) -> None:
    """compacted.jsonl's history is its earlier summary and two short messages: a new summary, which
    carries the earlier one, leaves more than it replaces."""
    path = tmp_path / "s.jsonl"
    shutil.copy(FIXTURES / "claude-code" / "compacted.jsonl", path)
    # --window 40000: the autocompact threshold is 7,000 tokens, which the session is over.
    args = ("--window", "40000", "--keep-last", "1", "--engine", "offline", "--now", "2026-05-05T00:00:00Z")
    result = ok(run_cli("compact", *args, path))
    err = result.stderr.decode()
    assert f"summarize: {path}: not summarized: the offline summary would leave " in err and "no fewer than the " in err, err
    assert result.stdout == path.read_bytes()  # and nothing else had anything to do


def test_a_summary_asked_for_that_would_grow_the_context_is_written_with_a_warning(tmp_path: Path) -> None:
    path = FIXTURES / "claude-code" / "compacted.jsonl"
    result = ok(run_cli("summarize", "--keep-last", "1", "--now", "2026-05-05T00:00:00Z", path))
    err = result.stderr.decode()
    assert "ctxpipe: warning: the offline summary would leave " in err and "written as asked" in err, err
    assert b"compact_boundary" in result.stdout[len(path.read_bytes()) :]


def test_a_file_cut_out_of_a_longer_session_is_not_measured_on_history_it_does_not_hold(tmp_path: Path) -> None:
    """Its first response was sent the history before the cut: 142,444 → 147,739 'summarized' once."""
    built = Session()
    built.user("Start the work.")
    for number in range(30):
        built.text(f"Step {number}: " + "the work goes on and on " * 200, usage(130_000 + 400 * number, input_tokens=5, cache_creation=400))
        built.user(f"Next, step {number + 1}.")
    built.text("Done.", usage(143_000))
    lines = built.to_bytes().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(lines[len(lines) // 2 :]))  # starts mid-session: its first parent is not in it
    counted = json.loads(ok(run_cli("count", cut)).stdout)
    assert counted["baseline"]["source"] == "default" and "starts mid-session" in counted["baseline"]["note"]
    out = tmp_path / "small.jsonl"
    result = ok(run_cli("summarize", "--keep-last", "2", "--now", "2026-05-05T00:00:00Z", "--report-json", tmp_path / "r.json", "-o", out, cut))
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["post_tokens"] < report["pre_tokens"], report
    assert "warning" not in result.stderr.decode()
    assert json.loads(ok(run_cli("count", out)).stdout)["tokens"] == report["post_tokens"]


def with_lone_surrogates(data: bytes) -> bytes:
    """The session with a string cut inside an emoji (a lone high surrogate, as Claude Code writes one)
    in a user's text and in a tool call's input."""
    out = []
    for line in data.splitlines():
        obj = orjson.loads(line)
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str) and obj.get("type") == "user":
            line = line.replace(orjson.dumps(content), orjson.dumps(content)[:-1] + b' \\ud83d"', 1)
        elif isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content):
            line = line.replace(b'"input":{', b'"input":{"note":"cut \\ud83d",', 1)
        out.append(line)
    return b"\n".join(out) + b"\n"


def test_a_lone_surrogate_in_the_history_reaches_the_model_as_a_replacement_character(server: MessagesServer) -> None:
    data = with_lone_surrogates(work_session().to_bytes())
    assert b"\\ud83d" in data
    server.enqueue(summary_reply(nine_sections()))
    result = ok(cli(data, "--engine", "llm", "--keep-last", "1", "--base-url", server.url, env={"ANTHROPIC_API_KEY": SECRET}))
    request = server.message_requests()[0]
    sent = request.body["messages"][0]["content"]
    text = "".join(part["text"] for part in sent if part["type"] == "text")
    # The user's text carries U+FFFD for the lone half; a tool's input goes as its JSON, the half escaped.
    assert '"note":"cut \\ud83d"' in text and f"{ASK_HEALTH} \ufffd" in text and "\ud83d" not in text
    assert "with the llm engine" in result.stderr.decode() and "internal error" not in result.stderr.decode()
    # compact, its engine chosen by the key: the same.
    server.enqueue(summary_reply(nine_sections()))
    compacted = run_cli(
        "compact", "--force", "--keep-last", "1", "--base-url", server.url, "--now", NOW_ISO, "-", stdin=data, env={"ANTHROPIC_API_KEY": SECRET}
    )
    assert compacted.returncode == 0 and b"llm engine" in compacted.stderr, compacted.stderr.decode()


@pytest.mark.parametrize(
    "answer",
    [
        Reply.text("I am sorry, but I cannot help with rewriting this."),
        Reply.tool_use("Read", {"file_path": "/home/dev/shop/server.py"}, text="Let me read the file first."),
        Reply.text("<summary>\n1. Primary Request and Intent: things.\n</summary>"),  # a summary, but one that carries less
    ],
    ids=["a refusal", "a tool call", "a worse summary"],
)
def test_a_repair_that_is_no_better_summary_leaves_the_model_s_summary(server: MessagesServer, answer: Reply) -> None:
    partial = nine_sections("IMPORTANT_DETAIL_XYZ").replace(ASK_ROTATION + " | ", "")
    server.enqueue(summary_reply(partial), answer)
    llm = dict(model=MODEL, key="test-key", base_url=server.url, max_retries=0)
    out, outcome = in_process(work_session().to_bytes(), engine="llm", **llm, keep_last=1)
    assert len(server.message_requests()) == 2
    summary = summary_of(out)
    assert "IMPORTANT_DETAIL_XYZ" in summary and "Facts to keep" in summary and ASK_ROTATION in summary
    assert "cannot help" not in summary and "Let me read" not in summary
    assert outcome.report.repaired is None and outcome.report.repair_error


def test_an_answer_cut_off_inside_its_analysis_is_no_summary(server: MessagesServer) -> None:
    body = {
        "id": "msg_cut",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": "<analysis>\nThe user asked for margins on details elements and"}],
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 100, "output_tokens": 20_000},
    }
    server.enqueue(Reply.raw(json.dumps(body)))
    llm = dict(model=MODEL, key="test-key", base_url=server.url, max_retries=0)
    out, outcome = in_process(work_session().to_bytes(), engine="llm", **llm, keep_last=1, verify=False)
    summary = summary_of(out)
    assert "<analysis>" not in summary and "margins on details" not in summary
    assert outcome.report.engine == "offline" and "stops inside its <analysis> block" in outcome.report.fallback_reason
