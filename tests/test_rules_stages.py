"""The stages under the rules of the Claude Code release that wrote the session (issue 21, item 2).

2.1.332 dropped the time-based microcompact trigger (its keep-recent pass clears only when that
frees ≥ 20,000 tokens) and session-memory compaction, and writes `<tools-used-before-summary>` in
its summary and cumulativeDroppedTokens in the boundary. A session of 2.1.88 keeps the seed's rules.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import Session, usage
from helpers import ok, run_cli
from test_summarize import NOTES, SESSION_ID, cli, summary_of, work_session


def reads_session(version: str, result_words: int) -> Session:
    """Eight Reads whose results are `result_words` words each, the last response an hour old."""
    session = Session(version=version)
    session.user("Read the eight modules.")
    for number in range(8):
        tool = session.tool_id()
        session.response([{"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": f"/m{number}.py"}}], usage(20_000 + 9000 * number))
        session.tool_result(tool, " ".join(f"word{n}" for n in range(result_words)))
    session.text("Read them all.", usage(95_000))
    return session


def microcompact(session: Session, tmp_path: Path, *flags: str) -> Any:
    path = session.write(tmp_path / "s.jsonl")
    return ok(run_cli("microcompact", "--now", "2026-05-05T10:00:00Z", *flags, path))


def test_2_1_332_clears_old_results_only_when_that_frees_20000_tokens(tmp_path: Path) -> None:
    small = reads_session("2.1.332", 500)  # three old results of ~1,000 tokens: under 20,000
    result = microcompact(small, tmp_path)
    assert b"[Old tool result content cleared]" not in result.stdout and b"20,000" in result.stderr
    forced = microcompact(small, tmp_path, "--force")
    assert forced.stdout.count(b"[Old tool result content cleared]") == 3
    big = reads_session("2.1.332", 5000)  # three of ~10,000 tokens
    assert microcompact(big, tmp_path).stdout.count(b"[Old tool result content cleared]") == 3


def test_2_1_88_clears_on_the_time_trigger_alone(tmp_path: Path) -> None:
    small = reads_session("2.1.88", 500)
    assert microcompact(small, tmp_path).stdout.count(b"[Old tool result content cleared]") == 3


def tools_session(version: str, calls: list[tuple[str, str]]) -> Session:
    """A Read of big.py, then `calls` (tool name, result text), each answered; the last response an hour old."""
    session = Session(version=version)
    session.user("Work on big.py.")
    total = 20_000
    for name, result in [("Read", " ".join(f"word{n}" for n in range(3000))), *calls]:
        tool = session.tool_id()
        total += 4000
        session.response([{"type": "tool_use", "id": tool, "name": name, "input": {"file_path": "/w/big.py"}}], usage(total))
        session.tool_result(tool, result)
    session.text("Done.", usage(total + 4000))
    return session


@pytest.mark.parametrize("version", ["2.1.88", "2.1.332"])
def test_notebook_and_multi_edits_are_not_compactable_and_take_no_slot(tmp_path: Path, version: str) -> None:
    # Claude Code's set has neither: five of them after a Read leave the Read among the last five
    # compactable results, so nothing is cleared (as Claude Code clears nothing there).
    session = tools_session(version, [("NotebookEdit", "edited cell " * 200)] * 3 + [("MultiEdit", "applied " * 200)] * 2)
    result = microcompact(session, tmp_path, "--force")
    assert b"[Old tool result content cleared]" not in result.stdout and b"nothing to clear" in result.stderr


def test_2_1_332_clears_container_tools_and_leaves_a_persisted_result(tmp_path: Path) -> None:
    persisted = (
        "<persisted-output>Tool result saved to: /tmp/r.txt (truncated to the first 2000 characters)\n" + "x " * 1500 + "\nUse Read to view</persisted-output>"
    )
    container = " ".join(f"cword{n}" for n in range(3000))
    calls = [("mcp__container__Read", container), ("Bash", persisted), *[("Bash", f"ok {n}") for n in range(5)]]
    for version in ("2.1.88", "2.1.332"):
        out = microcompact(tools_session(version, calls), tmp_path, "--force").stdout.decode()
        current = version == "2.1.332"
        assert ("cword2999" in out) == (not current), version  # 2.1.332 clears the container form of Read
        assert ("Use Read to view</persisted-output>" in out) == current, version  # and leaves what it saved to disk
        assert "word2999" not in out.replace("cword2999", ""), version  # the first Read is cleared either way


def test_compact_rules_flag_reaches_the_stages(tmp_path: Path) -> None:
    small = reads_session("2.1.88", 500).write(tmp_path / "s.jsonl")
    today = ok(run_cli("compact", "--rules", "2.1.332", "--now", "2026-05-05T10:00:00Z", small))
    assert b"[Old tool result content cleared]" not in today.stdout and b"Claude Code 2.1.332's keep-recent pass" in today.stderr
    seed = ok(run_cli("compact", "--now", "2026-05-05T10:00:00Z", small))
    assert seed.stdout.count(b"[Old tool result content cleared]") == 3


def boundary_and_summary(stdout: bytes) -> tuple[dict[str, Any], str]:
    lines = [json.loads(line) for line in stdout.splitlines()]
    boundary = next(line for line in lines if line.get("subtype") == "compact_boundary")
    return boundary["compactMetadata"], summary_of(stdout)


def test_a_2_1_332_summary_lists_the_tools_used_and_the_dropped_total() -> None:
    session = work_session()
    for line in session.lines:
        line["version"] = "2.1.332"
    result = ok(cli(session.to_bytes(), "--keep-last", "3"))
    metadata, summary = boundary_and_summary(result.stdout)
    assert "<system-reminder>\n<tools-used-before-summary>Read, Edit" in summary
    assert summary.index("This session is being continued") < summary.index("<tools-used-before-summary>") < summary.index("1. Primary Request")
    assert metadata["cumulativeDroppedTokens"] == metadata["preTokens"] - metadata["postTokens"] > 0
    # A later summary adds what it drops to the earlier total: carry on after the summary, summarize again.
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    next(line for line in lines if line.get("subtype") == "compact_boundary")["compactMetadata"]["cumulativeDroppedTokens"] = 1_000_000
    last = lines[-1]
    for number, (role, content) in enumerate(
        [("user", "Now add a test for the endpoint."), ("assistant", [{"type": "text", "text": "Added tests/test_health.py."}])]
    ):
        line = {key: last[key] for key in ("sessionId", "version", "cwd", "userType", "isSidechain") if key in last}
        line.update(
            {"type": role, "parentUuid": last["uuid"], "uuid": f"99999999-0000-4000-8000-00000000000{number}", "timestamp": f"2026-06-01T00:00:0{number}.000Z"}
        )
        line["message"] = {"role": role, "content": content} | (
            {"id": "msg_new", "model": "claude-sonnet-4-6", "usage": usage(30_000)} if role == "assistant" else {}
        )
        lines.append(line)
        last = line
    again = ok(cli(b"".join(json.dumps(line).encode() + b"\n" for line in lines), "--keep-last", "1"))
    later = [json.loads(line)["compactMetadata"] for line in again.stdout.splitlines() if b'"compact_boundary"' in line][-1]
    assert later["cumulativeDroppedTokens"] == 1_000_000 + later["preTokens"] - later["postTokens"]


def test_a_2_1_88_summary_has_neither() -> None:
    result = ok(cli(work_session().to_bytes(), "--keep-last", "3"))
    metadata, summary = boundary_and_summary(result.stdout)
    assert "tools-used-before-summary" not in summary and "cumulativeDroppedTokens" not in metadata


def test_2_1_332_has_no_session_memory_compaction_so_auto_passes_the_notes_by(tmp_path: Path) -> None:
    transcript = tmp_path / "proj" / f"{SESSION_ID}.jsonl"
    transcript.parent.mkdir(parents=True)
    session = work_session()
    for line in session.lines:
        line["version"] = "2.1.332"
    transcript.write_bytes(session.to_bytes())
    memory = transcript.parent / SESSION_ID / "session-memory" / "summary.md"
    memory.parent.mkdir(parents=True)
    memory.write_text(NOTES)
    auto = ok(cli(None, "--keep-last", "3", transcript))
    assert "Code word: MARIGOLD." not in summary_of(auto.stdout) and "has no session-memory compaction" in auto.stderr.decode()
    asked = ok(cli(None, "--engine", "session-memory", "--keep-last", "3", transcript))
    assert "Code word: MARIGOLD." in summary_of(asked.stdout)
