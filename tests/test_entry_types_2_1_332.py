"""Claude Code 2.1.332's new entry types, system subtypes and attachments, through every command,
and the rules by which 2.1.332 picks the usage a count anchors on (issue 21, item 3).

2.1.332 writes about 30 entry types that 2.1.88 did not (reference/claude-code-2.1.332.md §7; their
payloads are unknown, so the ones here are plausible guesses, with and without the envelope). Every
command that reads a transcript takes a session that holds all of them; every command that writes
one writes each of those lines back byte for byte; they count as nothing, so `count` gives the same
figures as for the session without them; `validate` finds nothing wrong with them.

The anchor rules (§2, "Token counting"): an `isUnmetered` record never anchors; with
`usage.iterations` the last iteration that is not a compaction or advisor pass gives the figures;
a usage whose figures are all 0 does not anchor.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from builders import SONNET, Session, usage
from ctxpipe.core.count import Estimates, count_context
from ctxpipe.core.jsonl import ReadStats, iter_buffer_entries
from ctxpipe.core.reports import CountReport
from ctxpipe.core.tokens import RoughCounter
from ctxpipe.formats import get
from ctxpipe.jobs.count import CountOptions, count_buffer
from helpers import CLEAN_ENV, no_traceback, run_cli
from test_bad_input import (
    CHANGES,
    IDENTITY,
    READER_IDS,
    READERS,
    REPORTS_BAD_LINES,
    REPORTS_TOKENS,
    STATUS_LINES,
    WRITES_TRANSCRIPTS,
    assert_status_line,
    reports,
    run_reader,
)

VERSION = "2.1.332"
NOW = "2026-06-01T00:00:00Z"
OTHER_SESSION = "66666666-6666-4666-8666-666666666666"
# The commands that copy this session byte for byte: there is no summary for restore to follow, and
# expand's empty ledger has nothing to undo (microcompact, collapse, compact and snip change it).
COPIES = {"restore", "expand"}

# The entry types new since 2.1.88 (§7), each with a plausible small payload. `True`: the line carries
# the envelope (uuid, parentUuid, sessionId, timestamp) and hangs off the conversation without being a
# parent of it, as Claude Code writes its bookkeeping lines; `False`: a bare record.
NEW_ENTRY_TYPES: dict[str, tuple[bool, dict[str, Any]]] = {
    "file-history-delta": (
        True,
        {"messageId": "m-2", "delta": {"src/limits.py": {"backupFileName": "3f2a9c@v2", "version": 2}}, "isSnapshotUpdate": False},
    ),
    "continued-in": (False, {"sessionId": OTHER_SESSION, "continuedAt": "2026-05-04T11:00:00.000Z"}),
    "resume-head-vouch": (True, {"leafUuid": "00000000-0000-4000-8000-000000000003", "vouchedBy": "resume"}),
    "data-flow-records": (True, {"records": [{"source": "Read", "sink": "Bash", "toolUseId": "toolu_01T00001", "labels": ["file:src/limits.py"]}]}),
    "data-flow-incomplete": (False, {"toolUseId": "toolu_01T00002", "reason": "output truncated"}),
    "derived-from": (False, {"sessionId": OTHER_SESSION, "leafUuid": "00000000-0000-4000-8000-000000000099", "kind": "fork"}),
    "api-request-shape": (True, {"requestId": "req_msg_01R00002", "shape": {"system": 3, "tools": 17, "messages": 6}, "betas": ["context-1m-2025-08-07"]}),
    # Looks like a message: a reader that took any line with a `message` for one would count it.
    "api-request-blob": (
        True,
        {"blobId": "sha256:9b1c", "message": {"role": "user", "content": "BLOB TEXT " * 400}, "bytes": 4000},
    ),
    "api-request": (
        True,
        {"requestId": "req_msg_01R00003", "model": SONNET, "content": [{"type": "text", "text": "REQUEST COPY " * 300}], "messageCount": 8},
    ),
    "api-request-resumed": (False, {"requestId": "req_msg_01R00003", "attempt": 2}),
    "fork-context-ref": (True, {"forkId": "fork_01", "parentSessionId": OTHER_SESSION, "upToUuid": "00000000-0000-4000-8000-000000000005"}),
    "frame-link": (True, {"frameId": "frame_2", "parentFrameId": "frame_1"}),
    "ended-by-model": (True, {"messageId": "msg_01R00004", "stopReason": "end_turn"}),
    "relocated": (False, {"from": "/home/dev/old-app", "to": "/home/dev/app"}),
    "artifact-comment-monitor": (True, {"artifactId": "art_7", "cursor": 3, "comments": []}),
    "artifact-autoreact-ledger": (False, {"artifactId": "art_7", "reacted": ["c1", "c2"]}),
    "bridge-session": (False, {"bridgeSessionId": "br_42", "status": "connected", "host": "ide"}),
    "history-suppression": (True, {"suppressed": ["00000000-0000-4000-8000-000000000002"], "reason": "user"}),
    "permission-mode": (False, {"permissionMode": "acceptEdits"}),
    "isolation-latch": (False, {"latched": True, "since": "2026-05-04T10:00:05.000Z"}),
    "session-owner": (False, {"owner": {"kind": "user", "id": "dev@example.com"}}),
    "dev-mods": (False, {"mods": {"verboseHooks": True}}),
    "memory-mode": (True, {"mode": "auto", "path": "/home/dev/.claude/projects/-home-dev-app/memory"}),
    "atis-latch": (False, {"value": 1}),
    "tools-used": (False, {"tools": ["Read", "Bash", "Edit"], "counts": {"Read": 2, "Bash": 1, "Edit": 1}}),
    "cost-state": (False, {"totalCostUsd": 0.4231, "modelUsage": {SONNET: {"inputTokens": 120, "outputTokens": 900}}}),
    "observer-ref": (True, {"observerId": "obs_3", "kind": "statusline"}),
    "host-row": (False, {"host": "devbox", "pid": 4242, "platform": "linux"}),
    "repl-mode": (False, {"replMode": False}),
    "hybrid-organization": (False, {"organizationUuid": "7a7a7a7a-0000-4000-8000-000000000001", "hybrid": True}),
}
NEW_SYSTEM_SUBTYPES: dict[str, dict[str, Any]] = {
    "thinking": {"content": "Thinking…", "durationMs": 1800},
    "read_divider": {"content": "Read up to here"},
    "model_fallback": {
        "content": "Fell back to claude-sonnet-4-6 (claude-opus-4-7 overloaded)",
        "fromModel": "claude-opus-4-7",
        "toModel": "claude-sonnet-4-6",
    },
    "model_consent_fallback": {
        "content": "Continuing with claude-sonnet-4-6",
        "fromModel": "claude-opus-4-7",
        "toModel": "claude-sonnet-4-6",
        "consented": True,
    },
}
NEW_ATTACHMENTS: dict[str, dict[str, Any]] = {
    "thinking_stripped": {"count": 2, "reason": "model switch"},
    "thinking_drop": {"droppedTurns": 1},
    "hook_additional_context": {"hookName": "UserPromptSubmit", "hookEvent": "UserPromptSubmit", "content": ["Branch main is protected. " * 30]},
    "message_pdf_reads": {"reads": [{"filePath": "/home/dev/app/docs/spec.pdf", "pages": [1, 2, 3]}], "pageCount": 3},
    "compaction_reminder": {"content": "Context is 82% full; a summary is being prepared."},
    "current_session_memory": {"content": "# Session notes\n\n- rate limit: 100 req/min per key\n" * 10, "path": "session-memory/summary.md"},
}
BIG_FILE = "".join(f"def handler_{n}(request):\n    return respond(request, {n})\n\n" for n in range(60))


class Builder:
    """A 2.1.332 session; with `new`, lines of every new kind interleaved through the conversation."""

    def __init__(self, new: bool) -> None:
        self.session = Session(SONNET, VERSION)
        self.new = new
        self.lines: list[dict[str, Any]] = []  # the new kinds' lines, as written

    def entry(self, kind: str) -> None:
        """A line of a new entry type: with the envelope, hung off the last line (but no line's
        parent: Claude Code's walk up the chain never passes one), or bare."""
        if not self.new:
            return
        enveloped, payload = NEW_ENTRY_TYPES[kind]
        s = self.session
        if enveloped:
            obj = {"parentUuid": s.last, "isSidechain": False, "type": kind, **payload, "sessionId": s.lines[0]["sessionId"], "version": VERSION}
            obj["uuid"] = s.uuid()
            obj["timestamp"] = f"2026-05-04T10:{len(s.lines) // 60 % 60:02d}:{len(s.lines) % 60:02d}.500Z"
        else:
            obj = {"type": kind, **payload}
        s.raw(obj)
        self.lines.append(obj)

    def system(self, subtype: str) -> None:
        if self.new:
            self.session.system(subtype, **NEW_SYSTEM_SUBTYPES[subtype])
            self.lines.append(self.session.lines[-1])

    def attachment(self, kind: str) -> None:
        if self.new:
            self.session.line("attachment", attachment={"type": kind, **NEW_ATTACHMENTS[kind]})
            self.lines.append(self.session.lines[-1])


def build(new: bool) -> tuple[bytes, list[bytes]]:
    """The session's bytes, and each new kind's line as written (empty without `new`)."""
    b = Builder(new)
    s = b.session
    s.user("Add rate limiting to the API: 100 requests a minute per key.")
    b.attachment("hook_additional_context")
    for kind in ("permission-mode", "session-owner", "host-row", "dev-mods", "isolation-latch"):
        b.entry(kind)
    read_1 = s.tool_id()
    s.response(
        [
            {"type": "thinking", "thinking": "Look at the handlers first.", "signature": "sig-1"},
            {"type": "text", "text": "I'll read the handlers."},
            {"type": "tool_use", "id": read_1, "name": "Read", "input": {"file_path": "/home/dev/app/src/handlers.py"}},
        ],
        usage(20_000, output=120),
    )
    b.entry("file-history-delta")
    s.tool_result(read_1, BIG_FILE)
    b.system("thinking")
    bash = s.tool_id()
    s.response([{"type": "tool_use", "id": bash, "name": "Bash", "input": {"command": "pytest -q tests/test_limits.py"}}], usage(22_400, output=60))
    for kind in ("data-flow-records", "data-flow-incomplete", "api-request-shape", "api-request-blob", "api-request"):
        b.entry(kind)
    s.tool_result(bash, "3 failed, 12 passed in 0.41s\nFAILED tests/test_limits.py::test_burst - AssertionError: 429 expected")
    b.attachment("thinking_stripped")
    read_2 = s.tool_id()
    s.response(
        [{"type": "tool_use", "id": read_2, "name": "Read", "input": {"file_path": "/home/dev/app/src/handlers.py"}}],
        usage(22_700, output=45),
    )
    s.tool_result(read_2, BIG_FILE)  # the same read again: collapse folds the first
    b.entry("derived-from")
    for number in range(6):  # enough old results for microcompact to clear some
        grep = s.tool_id()
        s.response(
            [{"type": "tool_use", "id": grep, "name": "Grep", "input": {"pattern": f"limit_{number}", "path": "/home/dev/app"}}],
            usage(22_900 + 2_500 * number, output=30),
        )
        s.tool_result(grep, "".join(f"src/module_{number}_{n}.py:{n}: limit_{number} = {n}\n" for n in range(80)))
    edit = s.tool_id()
    s.response(
        [
            {"type": "text", "text": "The limiter belongs in the middleware."},
            {
                "type": "tool_use",
                "id": edit,
                "name": "Edit",
                "input": {"file_path": "/home/dev/app/src/limits.py", "old_string": "pass", "new_string": "bucket.take()"},
            },
        ],
        usage(40_100, output=180),
    )
    b.system("model_fallback")
    b.system("model_consent_fallback")
    s.tool_result(edit, "The file /home/dev/app/src/limits.py has been updated.")
    for kind in ("tools-used", "cost-state", "ended-by-model"):
        b.entry(kind)
    s.text("Rate limiting is in place: a token bucket of 100 per minute per API key.", usage(40_500, output=40))
    b.system("read_divider")
    s.user("Now document it in docs/spec.pdf, pages 1 to 3 describe the API.")
    b.attachment("message_pdf_reads")
    for kind in ("fork-context-ref", "frame-link", "artifact-comment-monitor", "artifact-autoreact-ledger", "bridge-session"):
        b.entry(kind)
    b.attachment("compaction_reminder")
    b.attachment("current_session_memory")
    write = s.tool_id()
    s.response(
        [
            {
                "type": "tool_use",
                "id": write,
                "name": "Write",
                "input": {"file_path": "/home/dev/app/docs/limits.md", "content": "# Rate limits\n\n100 per minute.\n"},
            }
        ],
        usage(43_300, output=90),
    )
    b.attachment("thinking_drop")
    s.tool_result(write, "File created successfully at: /home/dev/app/docs/limits.md")
    b.entry("history-suppression")
    s.text("Documented in docs/limits.md.", usage(43_450, output=25))
    for kind in ("memory-mode", "atis-latch", "observer-ref", "repl-mode", "hybrid-organization", "relocated"):
        b.entry(kind)
    # After the last response (the estimated part): a prompt, and more of the new kinds around it.
    s.user("Thanks. Run the whole suite once more and tell me what is left.")
    b.attachment("message_pdf_reads")
    b.attachment("hook_additional_context")
    for kind in ("api-request-resumed", "continued-in", "resume-head-vouch"):
        b.entry(kind)
    return s.to_bytes(), [orjson.dumps(line) for line in b.lines]


@pytest.fixture(scope="module")
def sessions() -> tuple[bytes, bytes, list[bytes]]:
    """(the session with the new kinds, the same session without them, the new kinds' lines)."""
    data, lines = build(True)
    plain, none = build(False)
    assert not none
    return data, plain, lines


def test_the_session_holds_every_new_kind(sessions) -> None:
    data, plain, lines = sessions
    objs = [json.loads(line) for line in data.splitlines()]
    assert {obj["type"] for obj in objs} >= set(NEW_ENTRY_TYPES)
    assert {obj["subtype"] for obj in objs if obj["type"] == "system"} >= set(NEW_SYSTEM_SUBTYPES)
    assert {obj["attachment"]["type"] for obj in objs if obj["type"] == "attachment"} == set(NEW_ATTACHMENTS)
    assert all(line + b"\n" in data for line in lines)
    assert {obj["version"] for obj in objs if "version" in obj} == {VERSION}
    # Interleaved: between the first and the last conversation lines, and after the last response.
    last_response = max(n for n, obj in enumerate(objs) if obj["type"] == "assistant")
    assert any(obj["type"] in NEW_ENTRY_TYPES for obj in objs[last_response:])
    assert any(obj["type"] == "attachment" for obj in objs[last_response:])
    assert len(plain.splitlines()) == len(objs) - len(lines)


# --- every command ------------------------------------------------------------------------------


@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_every_command_takes_the_new_kinds(reader, argv, sessions, tmp_path) -> None:
    data, _, lines = sessions
    result, _ = run_reader(argv, data, "path", tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    no_traceback(result)
    if reader in STATUS_LINES:
        assert_status_line(result)
    if reader in IDENTITY | COPIES:
        assert result.stdout == data
    if reader in WRITES_TRANSCRIPTS - {"convert-anthropic"} - CHANGES:
        missing = [line for line in lines if line + b"\n" not in result.stdout]
        assert not missing, [json.loads(line)["type"] for line in missing]
    if reader in CHANGES:
        # Every line of a new entry type is still there (test_snip_keeps_every_new_entry_type: as it was).
        def unlinked(obj: dict[str, Any]) -> dict[str, Any]:
            return {key: value for key, value in obj.items() if key != "parentUuid"}

        kept = [unlinked(json.loads(line)) for line in result.stdout.splitlines()]
        for line in lines:
            obj = json.loads(line)
            if obj["type"] in NEW_ENTRY_TYPES:
                assert unlinked(obj) in kept, obj["type"]
    if reader == "convert-anthropic":
        messages = reports(result)
        assert [m["role"] for m in messages][:2] == ["user", "assistant"]
        assert b"BLOB TEXT" not in result.stdout and b"REQUEST COPY" not in result.stdout  # not messages
    if reader in REPORTS_BAD_LINES:
        [report] = reports(result)
        assert report["entries"] == len(data.splitlines())
        assert report["valid"] is True, report["findings"]
        new_lines = {n for n, line in enumerate(data.splitlines(), 1) if line in lines}
        assert not [f for f in report["findings"] if f["severity"] == "error"], report["findings"]
        assert not [f for f in report["findings"] if f["line"] in new_lines], report["findings"]
    if reader in REPORTS_TOKENS:
        [report] = reports(result)
        assert report["tokens"] > 43_450


def test_the_stages_change_the_session(sessions) -> None:
    """The stages run on the session do their work (so the lines above passed a real rewrite)."""
    data, _, lines = sessions
    for argv, subtype in (
        (["microcompact", "--force", "--now", NOW], b'"subtype":"microcompact_boundary"'),
        (["collapse", "--now", NOW], b"collapse"),
        (["summarize", "--engine", "offline", "--keep-last", "1", "--now", NOW], b'"subtype":"compact_boundary"'),
    ):
        result = run_cli(*argv, "-", stdin=data)
        assert result.returncode == 0, result.stderr.decode()
        assert result.stdout != data and subtype in result.stdout, argv
        assert all(line + b"\n" in result.stdout for line in lines), argv


def test_a_pipe_of_stages_keeps_every_new_line(sessions) -> None:
    """microcompact | collapse | summarize | restore | snip: each line of a new kind comes out as it went in."""
    data, _, lines = sessions
    stages = [
        ["microcompact", "--force", "--now", NOW],
        ["collapse", "--now", NOW],
        ["summarize", "--engine", "offline", "--keep-last", "2", "--now", NOW],
        ["restore", "--source", "transcript", "--now", NOW],
    ]
    current = data
    for argv in stages:
        result = run_cli(*argv, "-", stdin=current)
        assert result.returncode == 0, (argv, result.stderr.decode())
        no_traceback(result)
        current = result.stdout
        missing = [json.loads(line)["type"] for line in lines if line + b"\n" not in current]
        assert not missing, (argv, missing)
    counted = run_cli("count", "--json", "-", stdin=current, env=CLEAN_ENV)
    assert counted.returncode == 0, counted.stderr.decode()
    validated = run_cli("validate", "--json", "-", stdin=current)
    [report] = reports(validated)
    assert not [f for f in report["findings"] if f["severity"] == "error"], report["findings"]


def test_snip_keeps_every_new_entry_type_and_relinks_only_the_parent(sessions) -> None:
    """snip removes a range of the conversation (and the conversation lines in it). A line of a new
    type outside the range stays as it was, except that one whose parent was removed is re-linked
    to the line before the range (a reader walking parentUuid must not meet a dangling uuid): its
    parentUuid is then the only field that changes."""
    data, _, lines = sessions
    result = run_cli("snip", "--keep-last", "1", "--now", NOW, "-", stdin=data)
    assert result.returncode == 0, result.stderr.decode()
    assert len(result.stdout) < len(data)
    written = {json.loads(line).get("uuid") or line: json.loads(line) for line in result.stdout.splitlines()}
    relinked = 0
    for line in lines:
        obj = json.loads(line)
        if obj["type"] not in NEW_ENTRY_TYPES or line + b"\n" in result.stdout:
            continue
        after = written.get(obj.get("uuid"))
        assert after is not None, obj["type"]
        assert {**after, "parentUuid": obj.get("parentUuid")} == obj and after["parentUuid"] != obj.get("parentUuid")
        assert after["parentUuid"] is None or after["parentUuid"] in written
        relinked += 1
    assert relinked < len([line for line in lines if json.loads(line)["type"] in NEW_ENTRY_TYPES])


def test_compact_writes_every_new_line(sessions, tmp_path) -> None:
    data, _, lines = sessions
    path = tmp_path / "session.jsonl"
    path.write_bytes(data)
    result = run_cli("compact", "--engine", "offline", "--source", "transcript", "--now", NOW, "--in-place", path)
    assert result.returncode == 0, result.stderr.decode()
    written = path.read_bytes()
    assert written != data
    assert all(line + b"\n" in written for line in lines)


# --- they count as nothing ------------------------------------------------------------------------

FIGURES = ("tokens", "exact_tokens", "estimated_tokens", "messages", "estimated_messages", "calibration", "baseline_tokens")


@pytest.mark.parametrize(
    "command, flags",
    [
        ("count", []),
        ("count", ["--full"]),
        ("count", ["--as-claude-code"]),
        ("count", ["--full", "--as-claude-code"]),
        ("count", ["--tokenizer", "rough"]),
        ("count", ["--tokenizer", "tiktoken:o200k_base"]),
        ("count", ["--by", "block"]),
        ("warn", []),
    ],
    ids=lambda value: value if isinstance(value, str) else " ".join(value) or "default",
)
def test_the_new_kinds_count_as_nothing(command, flags, sessions) -> None:
    data, plain, _ = sessions
    figures = []
    for transcript in (data, plain):
        result = run_cli(command, "--json", *flags, "-", stdin=transcript, env=CLEAN_ENV)
        assert result.returncode == 0, result.stderr.decode()
        [report] = reports(result)
        figures.append({key: report.get(key) for key in FIGURES})
    with_new, without = figures
    assert with_new == without
    assert with_new["tokens"] > 43_450
    if command == "count":
        assert with_new["exact_tokens"] == 43_450


def test_attachments_of_another_shape_count_as_nothing(sessions) -> None:
    """The session's message_pdf_reads and thinking_stripped are not of the shapes 2.1.332 writes
    (pages a list, no scope): they change nothing, as every other new line."""
    data, plain, _ = sessions
    with_new = count_buffer(data, "-", CountOptions()).count_report()
    without = count_buffer(plain, "-", CountOptions()).count_report()
    assert with_new.tokens == without.tokens and not [a for a in with_new.adjustments if a.kind != "microcompact_boundary"]


def budget_session(*attachments: dict[str, Any], before_the_response: bool = False) -> bytes:
    """A response with a thinking block and 30,000 tokens of usage, and the attachments after it
    (or before it)."""
    session = Session(version="2.1.332")
    session.user("Read the spec.")
    if before_the_response:
        for attachment in attachments:
            session.line("attachment", attachment=attachment)
    session.response([{"type": "thinking", "thinking": "t" * 4000, "signature": "sig"}, {"type": "text", "text": "Read it."}], usage(30_000))
    if not before_the_response:
        for attachment in attachments:
            session.line("attachment", attachment=attachment)
    return session.to_bytes()


PDF = {"type": "message_pdf_reads", "reads": [{"path": "/home/dev/spec.pdf", "pages": 3, "result": {"type": "page_texts", "file_uuid": "f1"}}]}


def test_pdf_pages_read_after_the_last_response_add_3000_tokens_each() -> None:
    plain = count_buffer(budget_session(), "-", CountOptions()).count_report()
    text = {"path": "/home/dev/notes.pdf", "pages": 9, "result": {"type": "text", "text": "x" * 400}}  # a text result: its length / 4
    read = count_buffer(budget_session(PDF | {"reads": PDF["reads"] + [text]}), "-", CountOptions()).count_report()
    assert read.tokens == plain.tokens + 3 * 3000 + 100 and read.exact_tokens == plain.exact_tokens
    assert [(a.kind, a.tokens) for a in read.adjustments] == [("message_pdf_reads", 9100)]
    earlier = count_buffer(budget_session(PDF, before_the_response=True), "-", CountOptions()).count_report()
    assert earlier.tokens == plain.tokens  # the usage of the response after it counted the pages already


@pytest.mark.parametrize(("pages", "added"), [(0, 0), (-2, 0), ("3", 0), (None, 0), (True, 0), (10**18, 0), (10**14, 3000 * (10**15 // 3000))])
def test_an_odd_page_count_adds_nothing_or_stays_a_number(pages: Any, added: int) -> None:
    odd = {"type": "message_pdf_reads", "reads": [{"path": "/x.pdf", "pages": pages, "result": {"type": "document"}}, "junk", {"result": 5}]}
    report = count_buffer(budget_session(odd), "-", CountOptions()).count_report()
    plain = count_buffer(budget_session(), "-", CountOptions()).count_report()
    assert report.tokens - plain.tokens == added


def test_thinking_stripped_after_the_last_response_takes_the_thinking_out_of_the_count() -> None:
    plain = count_buffer(budget_session(), "-", CountOptions()).count_report()
    stripped = count_buffer(budget_session({"type": "thinking_stripped", "scope": "all"}), "-", CountOptions()).count_report()
    assert stripped.exact_tokens == plain.exact_tokens - 1000  # 4,000 characters of thinking, Claude Code's len / 4
    assert [(a.kind, a.tokens) for a in stripped.adjustments] == [("thinking_stripped", -1000)]
    partial = count_buffer(
        budget_session({"type": "thinking_stripped", "scope": "partial", "from": {"messageId": "m", "thinkingIndex": 0}}), "-", CountOptions()
    )
    assert partial.count_report().tokens == plain.tokens  # where a partial strip starts is not followed


# --- the anchor rules ---------------------------------------------------------------------------


def entries_of(data: bytes) -> list:
    return list(iter_buffer_entries(data, "-", "fail", ReadStats()))


def context(data: bytes, **options: Any) -> CountReport:
    """count --json's figures for `data`: the fast tail read and the full parse agree."""
    fast = count_buffer(data, "-", CountOptions(**options)).count_report()
    full = count_buffer(data, "-", CountOptions(top=1, **options)).count_report()
    for key in ("tokens", "exact_tokens", "estimated_tokens", "anchor_uuid"):
        assert getattr(fast, key) == getattr(full, key), (key, getattr(fast, key), getattr(full, key))
    return full


def two_responses(second: dict[str, Any], **line_fields: Any) -> tuple[Session, str]:
    """user, a response of 10,000, user, a response with `second` as its usage (and `line_fields` on
    its line); returns the session and the first response's uuid."""
    s = Session(SONNET, VERSION)
    s.user("Check the build.")
    [first] = s.text("The build is green.", usage(10_000, output=40))
    s.user("And the lint?")
    s.response([{"type": "text", "text": "Lint is clean too."}], None)
    s.lines[-1]["message"]["usage"] = second
    s.lines[-1].update(line_fields)
    return s, first


def test_an_unmetered_response_never_anchors() -> None:
    s, first = two_responses(usage(50_000, output=30), isUnmetered=True)
    counted = context(s.to_bytes())
    assert counted.anchor_uuid == first
    assert counted.exact_tokens == 10_000
    assert 10_000 < counted.tokens < 11_000  # the unmetered response's content is estimated, its usage is not
    claude = context(s.to_bytes(), as_claude_code=True)
    assert claude.exact_tokens == 10_000


def test_an_unmetered_response_over_several_lines_never_anchors() -> None:
    s = Session(SONNET, VERSION)
    s.user("Check the build.")
    [first] = s.text("The build is green.", usage(10_000, output=40))
    s.user("And the lint?")
    s.response([{"type": "thinking", "thinking": "Run ruff.", "signature": "s"}, {"type": "text", "text": "Lint is clean."}], usage(60_000, output=20))
    s.lines[-2]["isUnmetered"] = True  # only its first line says so: the response is unmetered
    counted = context(s.to_bytes())
    assert (counted.anchor_uuid, counted.exact_tokens) == (first, 10_000)


def test_unmetered_false_or_odd_still_anchors() -> None:
    for value in (False, "true", 1, None):
        s, _ = two_responses(usage(50_000, output=30), isUnmetered=value)
        assert context(s.to_bytes()).exact_tokens == 50_000, value


def test_an_unmetered_call_still_costs() -> None:
    """The cost reads every API call: leaving the usage out of the count does not drop the call."""
    s, _ = two_responses(usage(50_000, output=30), isUnmetered=True)
    calls = get("claude-code").api_calls(entries_of(s.to_bytes()))
    assert len(calls) == 2 and calls[-1].usage is not None


def iteration(kind: Any, total: int, output: int = 30) -> dict[str, Any]:
    return {"type": kind, **usage(total, output=output)}


def test_the_last_message_iteration_gives_the_figures() -> None:
    # A server-side compaction ran first: the top level adds up both passes; the context is the second's.
    top = usage(190_000, output=2_030)
    top["iterations"] = [iteration("compaction", 160_000, output=2_000), iteration("message", 30_000)]
    s, _ = two_responses(top)
    counted = context(s.to_bytes())
    assert counted.exact_tokens == 30_000
    assert context(s.to_bytes(), as_claude_code=True).exact_tokens == 30_000


@pytest.mark.parametrize(
    "iterations, expected",
    [
        ([iteration("message", 30_000), iteration("advisor_message", 80_000)], 30_000),
        ([iteration("message", 25_000), iteration("fallback_message", 31_000)], 31_000),
        ([iteration("message", 31_000), iteration("compaction", 80_000)], 31_000),
        ([{"input_tokens": 5, "cache_read_input_tokens": 33_000, "output_tokens": 10}], 33_015),  # no type: an iteration like any other
        ([iteration("compaction", 80_000)], 50_000),  # no iteration of the context: the top level
        ([], 50_000),
        ("iterations", 50_000),
        ([None, 7, "x", iteration("message", 32_000), ["a"]], 32_000),
        ([iteration(["compaction"], 34_000)], 34_000),
        ([{"type": "message", "input_tokens": "NaN", "cache_read_input_tokens": -4, "output_tokens": 12_000}, iteration("compaction", 1_000)], 12_000),
    ],
    ids=["advisor-last", "fallback", "compaction-last", "untyped", "only-compaction", "empty", "not-a-list", "junk-entries", "odd-type", "odd-figures"],
)
def test_iterations(iterations: Any, expected: int) -> None:
    top: dict[str, Any] = {**usage(50_000, output=30), "iterations": iterations}
    s, _ = two_responses(top)
    assert context(s.to_bytes()).exact_tokens == expected


def test_the_iteration_output_tokens_give_the_shortfall() -> None:
    """The response's own content past what its output_tokens cover is estimated: the iteration's
    output_tokens are those of the response the context ends on."""
    long_text = "The lint report, in full. " * 400
    top = usage(60_000, output=3_000)  # the compaction pass wrote a long summary
    top["iterations"] = [iteration("compaction", 40_000, output=2_990), iteration("message", 20_000, output=10)]
    s = Session(SONNET, VERSION)
    s.user("Lint?")
    s.text(long_text, top)
    counted = context(s.to_bytes())
    assert counted.exact_tokens == 20_000
    assert counted.estimated_tokens > 1_000  # 10 output tokens cover almost none of it


def test_a_zero_usage_does_not_anchor() -> None:
    zero = {"input_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 0, "service_tier": "standard"}
    for second in (
        zero,
        {},
        {"input_tokens": None, "output_tokens": "0"},
        {**usage(40_000), "iterations": [{"type": "message", "input_tokens": 0, "output_tokens": 0}]},
    ):
        s, first = two_responses(second)
        counted = context(s.to_bytes())
        assert (counted.anchor_uuid, counted.exact_tokens) == (first, 10_000), second
        assert 10_000 < counted.tokens < 11_000


def test_a_zero_usage_is_no_end_of_a_calibration_gap() -> None:
    """A response whose usage is all zeros says nothing about its prompt: the gaps of the fit run
    from the response before it to the one after."""
    from ctxpipe.core.count import calibration_pairs

    s = Session(SONNET, VERSION)
    total = 10_000
    for turn in range(6):
        s.user(f"Step {turn}: " + "details " * 200)
        total += 500
        s.text(f"Done with step {turn}.", usage(total, output=20) if turn != 3 else {"input_tokens": 0, "output_tokens": 0})
    messages = get("claude-code").messages(entries_of(s.to_bytes()))
    pairs = calibration_pairs(Estimates(messages, RoughCounter()))
    assert len(pairs) == 4  # five measured responses
    assert all(recorded < 2_000 for _, recorded in pairs)  # none is a whole prompt against nothing


def test_count_context_skips_what_does_not_anchor() -> None:
    """The core rule, on messages from any format: an all-zero usage does not anchor."""
    from ctxpipe.core.model import Message

    messages = [
        Message("user", [{"type": "text", "text": "hi"}]),
        Message("assistant", [{"type": "text", "text": "hello"}], usage=usage(8_000), model=SONNET),
        Message("user", [{"type": "text", "text": "more"}]),
        Message("assistant", [{"type": "text", "text": "sure"}], usage={"input_tokens": 0}, model=SONNET),
    ]
    counted = count_context(Estimates(messages, RoughCounter()))
    assert (counted.anchor, counted.exact_tokens) == (1, 8_000)


def test_pdf_pages_count_in_a_context_no_response_has_measured_yet() -> None:
    """No usage at all: every message is estimated, and the pages read are added to that estimate."""
    with_pdf, plain = Session(version="2.1.332"), Session(version="2.1.332")
    for session in (with_pdf, plain):
        session.user("Read the spec.")
    with_pdf.line("attachment", attachment=PDF)
    read, unread = (count_buffer(session.to_bytes(), "-", CountOptions()).count_report() for session in (with_pdf, plain))
    assert read.tokens - unread.tokens == 9000 == read.estimated_tokens - unread.estimated_tokens
    assert read.exact_tokens == 0 and read.adjustments[0].kind == "message_pdf_reads"
