"""ctxpipe's hooks inside the real Claude Code 2.1.332, in a fresh HOME, against the local Messages API
stand-in: `ctxpipe hooks install`, then `claude -p --resume ID /compact` runs a real compaction whose
summary carries nothing, then a resumed turn.

What must hold: the compaction request's instructions name the message queued mid-turn and the last
request; the session file then holds ctxpipe's SessionStart context with what the summary lost; the
next request carries it to the model; `hooks uninstall` leaves the user's settings as they were.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from builders import Session, usage
from claude_code import CURRENT_CLAUDE_CODE_VERSION, needs_claude_code, resume
from helpers import child_env
from messages_server import MessagesServer

pytestmark = needs_claude_code

REQUEST = "Add retries to the HTTP client in src/http/client.py"
QUEUED = "also log each retry at debug level"
NOTHING = "<summary>The conversation so far.</summary>"  # a summary that carries no fact


def text_of(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False)


def test_hooks_keep_what_claude_code_s_summary_loses(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    users = json.dumps({"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}, indent=2).encode()
    settings.write_bytes(users)
    env = child_env({"HOME": str(home), "CLAUDE_CONFIG_DIR": ""})
    install = subprocess.run([sys.executable, "-m", "ctxpipe", "hooks", "install"], env=env, capture_output=True, timeout=120)
    assert install.returncode == 0, install.stderr

    s = Session(version="2.1.332")
    s.user(REQUEST)
    tool = s.tool_id()
    s.response([{"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": str(project / "src/http/client.py")}}], usage(20_000))
    s.raw({"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-05-04T10:00:30.000Z", "sessionId": s.lines[0]["sessionId"], "content": QUEUED})
    s.raw({"type": "queue-operation", "operation": "remove", "timestamp": "2026-05-04T10:00:31.000Z", "sessionId": s.lines[0]["sessionId"]})
    s.tool_result(tool, "class Client: ...")
    s.text("Reading the client first.", usage(21_000))
    for line in s.lines:
        if "cwd" in line:
            line["cwd"] = str(project)
    session_id = s.lines[0]["sessionId"]

    with MessagesServer(default_reply=lambda body: NOTHING) as server:
        compacted = resume(s.to_bytes(), session_id, project, "/compact", server, home=home, version=CURRENT_CLAUDE_CODE_VERSION)
        assert compacted.returncode == 0, compacted.debug()
        summary_requests = [r for r in compacted.requests if r.is_messages and "Additional Instructions" in text_of(r.body)]
        assert summary_requests, f"no compaction request carried ctxpipe's instructions\n{compacted.debug()}"
        instructions = text_of(summary_requests[0].body).split("Additional Instructions:", 1)[1]
        assert QUEUED in instructions and f"Last request: {QUEUED}" in instructions and REQUEST in instructions, instructions[:1500]

        session_file = home / ".claude" / "projects" / compacted_folder(home) / f"{session_id}.jsonl"
        turn = resume(session_file.read_bytes(), session_id, project, "what next?", server, home=home, version=CURRENT_CLAUDE_CODE_VERSION)
        assert turn.returncode == 0, turn.debug()
    lines = [json.loads(line) for line in turn.session_after.splitlines() if line.strip()]
    attachments = [
        line["attachment"] for line in lines if line.get("type") == "attachment" and line.get("attachment", {}).get("type") == "hook_additional_context"
    ]
    ours = [a for a in attachments if "ctxpipe: the summary of the conversation above left out" in text_of(a.get("content"))]
    assert ours, "the session holds ctxpipe's SessionStart context"
    assert QUEUED in text_of(ours[-1]["content"]) and REQUEST in text_of(ours[-1]["content"])
    assert QUEUED in text_of(turn.body) and "left out" in text_of(turn.body), "the next request carries it to the model"
    audit = home / ".claude" / "ctxpipe" / "hooks" / f"{session_id}.audit.jsonl"
    [record] = [json.loads(line) for line in audit.read_text().splitlines()]
    assert record["trigger"] == "manual" and record["carried"] < record["facts"]

    uninstall = subprocess.run([sys.executable, "-m", "ctxpipe", "hooks", "uninstall"], env=env, capture_output=True, timeout=120)
    assert uninstall.returncode == 0 and settings.read_bytes() == users


def compacted_folder(home: Path) -> str:
    [folder] = [p.name for p in (home / ".claude" / "projects").iterdir() if p.is_dir()]
    return folder


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)


def test_pre_compact_can_block_a_compaction_not_worth_it(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    settings = home / ".claude" / "settings.json"
    env = child_env({"HOME": str(home), "CLAUDE_CONFIG_DIR": ""})
    assert subprocess.run([sys.executable, "-m", "ctxpipe", "hooks", "install"], env=env, capture_output=True, timeout=120).returncode == 0
    merged = json.loads(settings.read_bytes())
    hook = merged["hooks"]["PreCompact"][0]["hooks"][0]
    hook["command"] += " --block-when 'tokens<1000k'"
    settings.write_text(json.dumps(merged))
    s = Session(version="2.1.332")
    s.user(REQUEST)
    s.text("On it.", usage(20_000))
    for line in s.lines:
        line["cwd"] = str(project)
    session_id = s.lines[0]["sessionId"]
    with MessagesServer(default_reply=lambda body: NOTHING) as server:
        run = resume(s.to_bytes(), session_id, project, "/compact", server, home=home, version=CURRENT_CLAUDE_CODE_VERSION, expect_request=False)
    assert run.returncode == 0, run.debug()
    assert not any("Additional Instructions" in text_of(r.body) or "<summary>" in text_of(r.body) for r in run.requests if r.is_messages)
    assert b"compact_boundary" not in run.session_after, "the compaction did not run"
    assert "Compaction blocked by PreCompact hook" in run.stdout and "not worth compacting: the context holds 20,000 tokens" in run.stdout
