"""The Responses API stand-in (tests/responses_server.py), spoken to with plain HTTP: the events Codex
reads, the compaction answers, and the refusals (the real Codex runs in tests/test_codex_resume.py)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from responses_server import COMPACTION_PROMPT, STAND_IN_COMPACTION, Reply, ResponsesServer

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello"}]}


@pytest.fixture
def server():
    with ResponsesServer() as s:
        yield s
    assert s.threads() == [], "the stand-in left threads running after stop()"


def post(server: ResponsesServer, body: dict, path: str = "/v1/responses", headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(server.url + path, json.dumps(body).encode(), {"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def events(data: bytes) -> list[dict]:
    """The SSE stream's events, each `event:` name checked against its data's `type`."""
    found = []
    for block in data.decode().split("\n\n"):
        if block.strip():
            name, payload = block.split("\n", 1)
            event = json.loads(payload.removeprefix("data: "))
            assert name == f"event: {event['type']}"
            found.append(event)
    return found


def test_a_turn_streams_the_queued_text_with_the_usage_and_is_recorded(server):
    server.enqueue("It is 42.")
    status, data = post(server, {"model": "gpt-5.5", "stream": True, "input": [USER]}, headers={"authorization": "Bearer test-key"})

    assert status == 200
    created, done, completed = events(data)
    assert (created["type"], done["type"], completed["type"]) == ("response.created", "response.output_item.done", "response.completed")
    assert done["item"]["role"] == "assistant" and done["item"]["content"][0] == {"type": "output_text", "text": "It is 42.", "annotations": []}
    usage = completed["response"]["usage"]
    assert usage["input_tokens"] > 0 and usage["input_tokens_details"] == {"cached_tokens": 0}
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] and usage["output_tokens_details"] == {"reasoning_tokens": 0}
    (request,) = server.response_requests()
    assert request.body["input"] == [USER] and request.reply_kind == "text" and request.api_key_present
    assert "test-key" not in json.dumps(request.headers)
    # The queue is empty now: the default reply.
    assert "Stand-in reply to 1 input items." in events(post(server, {"input": [USER]})[1])[1]["item"]["content"][0]["text"]


def test_compaction_requests_get_the_summary_the_way_they_asked(server):
    trigger = events(post(server, {"input": [USER, {"type": "compaction_trigger"}]})[1])[1]["item"]
    assert trigger == {"type": "compaction", "encrypted_content": STAND_IN_COMPACTION + server.summary}
    prompt = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": COMPACTION_PROMPT + " Create a handoff summary."}]}
    inline = events(post(server, {"input": [USER, prompt]})[1])[1]["item"]
    assert inline["content"][0]["text"] == server.summary
    assert [r.reply_kind for r in server.requests] == ["compact", "compact"] == [r.reply_kind for r in server.compaction_requests()]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([{"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"}], "No tool output found for function call c1."),
        ([{"type": "function_call_output", "call_id": "c2", "output": "x"}], "No tool call found for function call output with call_id c2."),
        ([{"type": "custom_tool_call_output", "call_id": "c3", "output": "x"}], "No tool call found for custom tool call output with call_id c3."),
    ],
)
def test_a_split_call_is_refused_as_the_api_does(server, items, message):
    server.enqueue("never sent")
    status, data = post(server, {"input": [USER, *items]})
    assert status == 400 and json.loads(data)["error"]["message"] == message
    assert server.requests[0].reply_kind == "rejected" and server.pending == 1


def test_an_answered_call_passes_and_errors_can_be_scripted(server):
    pair = [
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"},
    ]
    server.enqueue(Reply.error(400, "Invalid 'input[3]'"), "fine")
    status, data = post(server, {"input": [USER, *pair]})
    assert status == 400 and json.loads(data)["error"]["message"] == "Invalid 'input[3]'"
    status, data = post(server, {"input": [USER, *pair]})
    assert status == 200 and events(data)[1]["item"]["content"][0]["text"] == "fine"


def test_websocket_upgrades_get_426_and_proxied_requests_403(server):
    request = urllib.request.Request(server.url + "/v1/responses", headers={"connection": "Upgrade", "upgrade": "websocket"})
    with pytest.raises(urllib.error.HTTPError) as upgrade:
        urllib.request.urlopen(request, timeout=10)
    assert upgrade.value.code == 426
    proxy = urllib.request.build_opener(urllib.request.ProxyHandler({"http": server.url}))
    with pytest.raises(urllib.error.HTTPError) as external:
        proxy.open("http://example.invalid/update-check", timeout=10)
    assert external.value.code == 403
    assert [(r.reply_kind, r.status) for r in server.requests] == [("websocket", 426), ("external", 403)]
    assert server.requests[1].path == "http://example.invalid/update-check"
