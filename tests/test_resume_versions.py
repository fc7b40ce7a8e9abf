"""Every compacted session resumes, whatever the clock said, in the Claude Code of the seed and of today (issue 29).

Claude Code 2.1.88 resumes `--resume ID` from the non-sidechain line with the latest timestamp and
walks parentUuid up from it; a line ctxpipe appends that is not the newest leaves what it added
(the summarized tail's end, the restored files) out of the resumed context, or resumes from a line
above it. So every line ctxpipe appends is stamped later than every line above it, and the last one
it writes is the line Claude Code resumes from, whatever `--now` is: milliseconds 0 and 999 (a
second's edges), a clock before the session (a stamp taken from the session's own lines), the real
clock (a different output each run).

Sessions: every Claude Code transcript in fixtures/claude-code/, and the shared corpus when it is
beside the checkout. The rule is checked on each output without node (project_sessions.resumed_from
models 2.1.88's getLastSessionLog); then the real Claude Code 2.1.88 and 2.1.332 resume each output
once, with no retry: a failure fails.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import orjson
import pytest
from claude_code import CLAUDE_CODE_VERSION, CLAUDE_CODE_VERSIONS, needs_claude_code, resume
from ctxpipe.core.fields import moment
from helpers import FIXTURES, corpus_files, run_cli
from messages_server import MessagesServer
from project_sessions import resumed_from, subagent_resumed_from

SUMMARY_PREAMBLE = "This session is being continued from a previous conversation"
RESTORED_PREFIX = "[restored"
PROMPT = "Say hi."

# --now values: a second's first and last millisecond, a clock before every session here (so the
# appended lines take their stamps from the session's own), and the real clock (None).
NOWS = ["2026-12-01T10:00:00.000Z", "2026-12-01T10:00:00.999Z", "2020-01-01T00:00:00.000Z", None]


def sessions(subagents: bool = True) -> list[Any]:
    """The Claude Code sessions here; `subagents=False` leaves out a subagent's own file, which Claude
    Code continues as that agent's side chain, never as a session to `--resume` (its original is not found)."""
    fixtures = sorted((FIXTURES / "claude-code").glob("*.jsonl"))
    corpus = [f for f in corpus_files() if "acompact" not in f.name]  # a compaction side-call is refused, not a session
    found = [pytest.param(f, id=f"fixture-{f.stem}") for f in fixtures] + [pytest.param(f, id=f"corpus-{f.stem[-12:]}") for f in corpus]
    return [p for p in found if subagents or agent_of(p.values[0]) is None]


def agent_of(path: Path) -> str | None:
    """The agentId of a subagent's file (every conversation line on its side chain), else None."""
    conversation = [o for o in lines_of(path.read_bytes()) if o.get("type") in ("user", "assistant", "system", "attachment")]
    if conversation and all(o.get("isSidechain") is True for o in conversation):
        return next((o["agentId"] for o in conversation if isinstance(o.get("agentId"), str)), None)
    return None


def compacted(path: Path, now: str | None) -> bytes:
    """compact's output; with a fixed `now` the same bytes every time, made once for the rule's test
    and both versions' resumes (the real clock's is made anew at each call)."""
    return _compacted_at(path, now) if now else _compact(path, now)


@functools.cache
def _compacted_at(path: Path, now: str) -> bytes:
    return _compact(path, now)


def _compact(path: Path, now: str | None) -> bytes:
    # --keep-last 2: the small sessions are summarized too (the default tail holds their whole context).
    args = ["compact", "--force", "--engine", "offline", "--keep-last", "2", *(["--now", now] if now else []), str(path)]
    result = run_cli(*args, env={"ANTHROPIC_API_KEY": ""})
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def lines_of(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in data.splitlines()]


def session_id(objs: list[dict[str, Any]]) -> str:
    return next(o["sessionId"] for o in reversed(objs) if isinstance(o.get("sessionId"), str))


@pytest.mark.parametrize("now", NOWS, ids=lambda n: n or "real-clock")
@pytest.mark.parametrize("path", sessions())
def test_the_last_line_compact_writes_is_the_one_claude_code_resumes_from(path: Path, now: str | None) -> None:
    before = path.read_bytes()
    written = len(before.splitlines())
    after = compacted(path, now)
    objs = lines_of(after)
    if len(objs) == written:  # nothing to do (a side-chain file's tail is all of it): nothing written either
        assert after == before
        return
    agent = agent_of(path)
    if agent is None:
        assert resumed_from(after) == objs[-1]["uuid"], "Claude Code 2.1.88 would resume from another line than ctxpipe's last"
    else:  # a subagent's file: what ctxpipe appends joins that agent's side chain, or Claude Code never reads it
        assert all(o.get("isSidechain") is True and o.get("agentId") == agent for o in objs[written:])
        assert subagent_resumed_from(after, agent) == objs[-1]["uuid"], "Claude Code 2.1.88 would continue the subagent from another line"
    # The lines ctxpipe appends after the kept tail (the summary's marker, the restored items) are
    # each newer than every line above them; the boundary and summary stay older than the tail.
    stamps = [moment(o.get("timestamp")) for o in objs]
    last_tail = max(i for i, o in enumerate(objs) if o.get("type") in ("user", "assistant") and not o.get("isMeta") and not o.get("isCompactSummary"))
    for position in range(max(last_tail + 1, written), len(objs)):
        above = [t for t in stamps[:position] if t is not None]
        assert stamps[position] is not None and above and stamps[position] > max(above), f"appended line {position + 1} is not newer than every line above it"


def reaches_summary_in_2_1_88(objs: list[dict[str, Any]]) -> bool:
    """Whether 2.1.88's walk up from the last line gets to the summary: it reads user, assistant,
    attachment and system lines (the later line of a uuid wins), bridges progress lines to their
    parent, and stops at a parent it has not read."""
    read = {o["uuid"]: o for o in objs if o.get("type") in ("user", "assistant", "attachment", "system") and isinstance(o.get("uuid"), str)}
    progress = {o["uuid"]: o.get("parentUuid") for o in objs if o.get("type") == "progress" and isinstance(o.get("uuid"), str)}
    current: dict[str, Any] | None = objs[-1]
    seen: set[str] = set()
    while current is not None and current["uuid"] not in seen:
        if current.get("isCompactSummary"):
            return True
        seen.add(current["uuid"])
        parent = current.get("parentUuid")
        while parent in progress:
            parent = progress[parent]
        current = read.get(parent) if isinstance(parent, str) else None
    return False


def sent_text(messages: list[dict[str, Any]]) -> str:
    parts = []
    for message in messages:
        content = message["content"]
        parts += [content] if isinstance(content, str) else [b.get("text", "") for b in content if isinstance(b, dict)]
    return "\n".join(parts)


@needs_claude_code
@pytest.mark.parametrize("version", CLAUDE_CODE_VERSIONS)
@pytest.mark.parametrize("now", [NOWS[0], NOWS[1], None], ids=lambda n: n or "real-clock")
@pytest.mark.parametrize("path", sessions(subagents=False))
def test_claude_code_resumes_every_compacted_session(tmp_path: Path, path: Path, now: str | None, version: str) -> None:
    after = compacted(path, now)
    objs = lines_of(after)
    with MessagesServer() as server:
        result = resume(after, session_id(objs), tmp_path / "work", PROMPT, server, version=version)
    assert result.returncode == 0, result.debug()
    assert result.external == []
    sent = sent_text(result.body["messages"])
    if any(o.get("isCompactSummary") for o in objs):
        if version == CLAUDE_CODE_VERSION and not reaches_summary_in_2_1_88(objs):
            # A line of a type 2.1.88 does not read sits in the kept tail (fixtures/claude-code/basic.jsonl
            # has one on purpose): its walk up stops there, in the original as in the output.
            assert SUMMARY_PREAMBLE not in sent, result.debug()
        else:
            assert SUMMARY_PREAMBLE in sent, f"Claude Code {version} did not resume the summary\n{result.debug()}"
    # What ctxpipe wrote last is in what Claude Code sent: it resumed from ctxpipe's leaf.
    restored = [o["message"]["content"] for o in objs if o.get("isMeta") and str(o.get("message", {}).get("content", "")).startswith(RESTORED_PREFIX)]
    if restored:
        assert restored[-1].strip()[:200] in sent, f"Claude Code {version} left the last restored item out\n{result.debug()}"


ENDINGS = ["progress-then-unknown-type", "inline-side-chain"]


def ends_off_the_tree(tmp_path: Path, stage: str, ending: str = ENDINGS[0]) -> tuple[Path, list[dict[str, Any]], dict[str, Any]]:
    """A session whose last lines are not the main conversation's: a progress line and a line of a type
    Claude Code does not keep in its tree (2.1.332 writes several such types), or a subagent's side chain
    written inline (as Claude Code 1.x did). Its lines, and its last main-chain conversation line."""
    # restore brings files back after a summary: a summarized session whose reads it finds in the transcript.
    base = (FIXTURES / "restore" / "transcript.in.jsonl" if stage == "restore" else FIXTURES / "claude-code" / "repeats.jsonl").read_bytes()
    objs = lines_of(base)
    last = [o for o in objs if o.get("type") in ("user", "assistant") and not o.get("isSidechain")][-1]
    envelope = {k: last[k] for k in ("sessionId", "cwd", "version") if k in last}
    if ending == "inline-side-chain":
        first: dict[str, Any] = {"parentUuid": None, "isSidechain": True, **envelope, "type": "user", "message": {"role": "user", "content": "Sub-task: list the files."},
                                 "uuid": "7e0c1a2b-0000-4000-8000-00000000e001", "timestamp": "2026-04-02T09:59:00.000Z"}  # fmt: skip
        reply = {"role": "assistant", "type": "message", "id": "msg_side", "model": "claude-sonnet-4-6", "content": [{"type": "text", "text": "Listed."}],
                 "stop_reason": "end_turn", "usage": {"input_tokens": 5, "output_tokens": 5}}  # fmt: skip
        second = {"parentUuid": first["uuid"], "isSidechain": True, **envelope, "type": "assistant", "message": reply,
                  "uuid": "7e0c1a2b-0000-4000-8000-00000000e002", "timestamp": "2026-04-02T09:59:01.000Z"}  # fmt: skip
    else:
        first = {"parentUuid": last["uuid"], "isSidechain": False, **envelope, "type": "progress", "data": {"type": "hook_progress"},
                 "uuid": "7e0c1a2b-0000-4000-8000-00000000f001", "timestamp": "2026-04-02T09:59:00.000Z"}  # fmt: skip
        second = {"parentUuid": first["uuid"], "isSidechain": False, **envelope, "type": "api-request-shape", "shape": {},
                  "uuid": "7e0c1a2b-0000-4000-8000-00000000f002", "timestamp": "2026-04-02T09:59:01.000Z"}  # fmt: skip
    path = tmp_path / "s.jsonl"
    path.write_bytes(base + orjson.dumps(first) + b"\n" + orjson.dumps(second) + b"\n")
    return path, [*objs, first, second], last


def run_stage(tmp_path: Path, stage: str, path: Path) -> bytes:
    extra = {"compact": ["--engine", "offline", "--keep-last", "2"], "restore": ["--source", "transcript"]}.get(stage, [])
    force = ["--force"] if stage in ("microcompact", "compact") else []
    result = run_cli(stage, *force, *extra, "--now", NOWS[0], str(path), cwd=tmp_path, env={"ANTHROPIC_API_KEY": ""})
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


STAGES_THAT_APPEND = ["microcompact", "collapse", "restore", "compact"]


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("stage", STAGES_THAT_APPEND)
def test_appended_lines_hang_off_the_last_conversation_line_not_a_progress_or_unknown_line(tmp_path: Path, stage: str, ending: str) -> None:
    """Hung off the progress line or the unknown one, a line is a dead end when Claude Code walks up
    from it; hung off a side chain, Claude Code resumes the subagent's conversation instead."""
    path, objs, last = ends_off_the_tree(tmp_path, stage, ending)
    written = run_stage(tmp_path, stage, path)
    out = lines_of(written)
    added = out[len(objs) :]
    assert added, f"{stage} appended nothing: the case tests nothing"
    off_the_tree = {o["uuid"] for o in objs[-2:]}
    first_below = next(o for o in added if o.get("parentUuid") in off_the_tree | {last["uuid"]} or o.get("logicalParentUuid"))
    hung = first_below.get("parentUuid") or first_below.get("logicalParentUuid")
    assert hung == last["uuid"], f"{stage}'s line hangs off {hung}, not the last conversation line"
    assert resumed_from(written) == out[-1]["uuid"]


@needs_claude_code
@pytest.mark.parametrize("version", CLAUDE_CODE_VERSIONS)
@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("stage", ["microcompact", "compact"])
def test_claude_code_resumes_the_conversation_above_a_line_it_does_not_keep(tmp_path: Path, stage: str, ending: str, version: str) -> None:
    """2.1.88 resumed a microcompacted session of the first shape as the new prompt alone (the marker,
    the newest line, hung off the unknown line and its walk up found nothing; 2.1.332 bridged it), and
    of the second as the subagent's three messages: the marker hung off the side chain."""
    path, objs, last = ends_off_the_tree(tmp_path, stage, ending)
    written = run_stage(tmp_path, stage, path)
    with MessagesServer() as server:
        result = resume(written, session_id(objs), tmp_path / "work", PROMPT, server, version=version)
    assert result.returncode == 0, result.debug()
    sent = result.body["messages"]
    assert len(sent) > 1, f"Claude Code {version} resumed nothing of the conversation\n{result.debug()}"
    last_text = next(b["text"] for b in last["message"]["content"] if b.get("type") == "text")
    assert last_text in sent_text(sent)
    assert "Sub-task: list the files." not in sent_text(sent)
