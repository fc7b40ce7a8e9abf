"""The Claude Code harness (tests/claude_code.py): the real Claude Code 2.1.88 resumes a session against the fake API.

The first run installs Claude Code with npm (about 100 MB; seconds with a warm npm cache, up to a
minute or so cold); each resume then takes about 2 s. Skipped when node or npm is missing, when the
install fails, or with CTXPIPE_SKIP_CLAUDE_CODE=1.
"""

from __future__ import annotations

import json
import uuid

import pytest
from claude_code import main_request, needs_claude_code, project_dir_name, resume
from messages_server import MessagesServer, RecordedRequest, Reply

FIRST_PROMPT = "Rename the helper in utils.py and remember the code word PAPAYA."
FIRST_REPLY = "Done: the helper is now called `normalize_path`. I will remember PAPAYA."
NEW_PROMPT = "Which code word did I ask you to remember?"


def small_session(cwd: str, session_id: str) -> tuple[bytes, dict[str, str]]:
    """A two-line Claude Code session (a user prompt and the assistant's text reply), as 2.1.88 writes them."""
    ids = {"user": str(uuid.uuid4()), "assistant": str(uuid.uuid4())}
    envelope = {"isSidechain": False, "userType": "external", "cwd": cwd, "sessionId": session_id, "version": "2.1.88", "gitBranch": ""}
    lines = [
        {"parentUuid": None, **envelope, "type": "user", "message": {"role": "user", "content": FIRST_PROMPT},
         "uuid": ids["user"], "timestamp": "2026-03-01T10:00:00.000Z"},
        {"parentUuid": ids["user"], **envelope, "type": "assistant", "requestId": "req_011CTest",
         "message": {"id": "msg_011CTest", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                     "content": [{"type": "text", "text": FIRST_REPLY}], "stop_reason": "end_turn", "stop_sequence": None,
                     "usage": {"input_tokens": 12, "output_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}},
         "uuid": ids["assistant"], "timestamp": "2026-03-01T10:00:03.000Z"},
    ]  # fmt: skip
    return "".join(json.dumps(line) + "\n" for line in lines).encode(), ids


def texts(message: dict) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)


@pytest.fixture
def server():
    with MessagesServer() as s:
        yield s


@needs_claude_code
def test_claude_code_resumes_the_session_and_sends_it_with_the_new_prompt(tmp_path, server):
    project = tmp_path / "my.project"  # a "." in the name: Claude Code encodes it as "-" too
    session_id = str(uuid.uuid4())
    data, ids = small_session(str(project), session_id)
    server.enqueue("The code word was PAPAYA.")

    result = resume(data, session_id, project, NEW_PROMPT, server, home=tmp_path / "home")

    assert result.returncode == 0, result.debug()
    assert "The code word was PAPAYA." in result.stdout
    assert result.external == [], "Claude Code tried to reach the internet"
    assert all(r.api_key_present for r in result.requests if r.is_messages)
    messages = result.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"], result.debug()
    assert FIRST_PROMPT in texts(messages[0])
    assert texts(messages[1]) == FIRST_REPLY
    assert texts(messages[2]).endswith(NEW_PROMPT)
    assert result.body["stream"] is True and result.body["system"] and result.body["tools"]

    # Claude Code appended the new turn to the same file, chained onto the resumed assistant line.
    session_file = tmp_path / "home" / ".claude" / "projects" / project_dir_name(project) / f"{session_id}.jsonl"
    assert session_file.read_bytes() == result.session_after and result.session_after.startswith(data)
    appended = [json.loads(line) for line in result.session_after[len(data) :].splitlines()]
    new_user = next(e for e in appended if e.get("type") == "user")
    assert new_user["parentUuid"] == ids["assistant"] and new_user["message"]["content"] == NEW_PROMPT
    reply = next(e for e in appended if e.get("type") == "assistant")
    assert reply["parentUuid"] == new_user["uuid"] and reply["message"]["content"][0]["text"] == "The code word was PAPAYA."


@needs_claude_code
def test_claude_code_retries_an_overloaded_fake_and_the_temporary_home_is_removed(tmp_path, server):
    project = tmp_path / "proj"
    session_id = str(uuid.uuid4())
    data, _ = small_session(str(project), session_id)
    server.enqueue(Reply.overloaded(), "second try")

    result = resume(data, session_id, project, NEW_PROMPT, server)

    assert result.returncode == 0, result.debug()
    assert [r.status for r in result.requests if r.is_messages] == [529, 200], result.debug()
    assert "second try" in result.stdout
    assert result.home is None and result.session_after.startswith(data)
    assert not list(tmp_path.glob("**/.claude")), "the temporary HOME belongs outside the project"


def test_project_dir_name_replaces_every_non_alphanumeric(tmp_path):
    cwd = tmp_path / "a.b_c d"
    cwd.mkdir()
    name = project_dir_name(cwd)
    assert name.startswith("-") and name.endswith("-a-b-c-d")
    assert set(name) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")


def test_main_request_prefers_the_conversation_carrying_the_prompt():
    def req(messages: list[dict], path: str = "/v1/messages") -> RecordedRequest:
        return RecordedRequest("POST", path, "", {}, True, {"model": "m", "messages": messages})

    title = req([{"role": "user", "content": "Write a title for: " + "x" * 500}])
    main = req([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}, {"role": "user", "content": [{"type": "text", "text": "go on"}]}])
    count = req(main.body["messages"] * 2, "/v1/messages/count_tokens")
    assert main_request([title, main, count], "go on") is main
    assert main_request([title], "go on") is title  # no request carries it: the largest one, for debugging
    assert main_request([count], "go on") is None
