"""The fake Messages API (tests/messages_server.py) against the real anthropic client."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from helpers import skip_unless_installed
from messages_server import MessagesServer, Reply

skip_unless_installed("anthropic", reason="the fake Messages API is tested with the real anthropic client")

MODEL = "claude-sonnet-4-6"
HELLO = [{"role": "user", "content": "Hello"}]


@pytest.fixture
def server():
    with MessagesServer() as s:
        yield s
    assert s.threads() == [], "the fake left threads running after stop()"


def sdk() -> Any:
    """The anthropic package, imported by the first test that uses it (not by collecting this module)."""
    import anthropic

    return anthropic


def client(server: MessagesServer, **kw) -> Any:
    return sdk().Anthropic(base_url=server.url, api_key="test-key", **{"max_retries": 0, **kw})


def test_create_returns_the_queued_text_and_records_what_was_sent(server):
    server.enqueue("It is 42.")
    tools = [{"name": "Read", "description": "read a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]
    msg = client(server).messages.create(model=MODEL, max_tokens=321, system="Be brief.", tools=tools, messages=[{"role": "user", "content": "What is it?"}])

    assert [b.type for b in msg.content] == ["text"] and msg.content[0].text == "It is 42."
    assert (msg.role, msg.model, msg.stop_reason, msg.stop_sequence) == ("assistant", MODEL, "end_turn", None)
    assert msg.id.startswith("msg_") and msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
    assert msg.usage.cache_read_input_tokens == 0

    (req,) = server.requests
    assert (req.method, req.path, req.status, req.reply_kind) == ("POST", "/v1/messages", 200, "text")
    assert req.body["messages"] == [{"role": "user", "content": "What is it?"}]
    assert (req.body["system"], req.body["model"], req.body["max_tokens"], req.body["tools"]) == ("Be brief.", MODEL, 321, tools)
    assert req.headers["anthropic-version"] and req.headers["content-type"] == "application/json"


def test_the_api_key_is_never_recorded(server):
    client(server).messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    (req,) = server.requests
    assert req.api_key_present
    assert "test-key" not in repr(req) and "test-key" not in json.dumps(req.headers)
    assert "<redacted>" in req.headers.values()


def test_default_reply_when_the_queue_is_empty_and_custom_defaults(server):
    two = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    assert client(server).messages.create(model=MODEL, max_tokens=10, messages=two).content[0].text == "Fake reply to 3 messages."
    with MessagesServer(default_reply="always this") as other:
        assert client(other).messages.create(model=MODEL, max_tokens=10, messages=HELLO).content[0].text == "always this"
    with MessagesServer(default_reply=lambda body: Reply.tool_use("Bash", {"command": body["model"]})) as other:
        block = client(other).messages.create(model=MODEL, max_tokens=10, messages=HELLO).content[0]
        assert (block.type, block.input) == ("tool_use", {"command": MODEL})


def test_stream_helper_accumulates_the_text(server):
    text = "A reply long enough to arrive in several text deltas, ünïcode included."
    server.enqueue(text)
    with client(server).messages.stream(model=MODEL, max_tokens=100, messages=HELLO) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(pieces) > 1 and "".join(pieces) == text
    assert final.content[0].text == text and final.stop_reason == "end_turn" and final.usage.output_tokens > 1
    assert server.requests[0].body["stream"] is True


def test_create_stream_true_yields_the_events_in_the_api_order(server):
    server.enqueue("short")
    events = list(client(server).messages.create(model=MODEL, max_tokens=10, messages=HELLO, stream=True))
    kinds = [e.type for e in events]
    assert kinds == ["message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    assert events[2].delta.type == "text_delta" and events[2].delta.text == "short"
    assert events[4].delta.stop_reason == "end_turn" and events[4].usage.output_tokens > 0
    assert events[0].message.usage.input_tokens > 0


def test_tool_use_reply_is_a_tool_use_block(server):
    server.enqueue(Reply.tool_use("Read", {"file_path": "/src/app.py", "limit": 20}, id="toolu_01ABC", text="Let me look."))
    msg = client(server).messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert msg.stop_reason == "tool_use"
    assert [b.type for b in msg.content] == ["text", "tool_use"]
    call = msg.content[1]
    assert (call.id, call.name, call.input) == ("toolu_01ABC", "Read", {"file_path": "/src/app.py", "limit": 20})


def test_tool_use_reply_streams_as_input_json_deltas(server):
    big_input = {"command": "pytest -q tests/test_something_with_a_long_name.py", "timeout": 120}
    server.enqueue(Reply.tool_use("Bash", big_input))
    with client(server).messages.stream(model=MODEL, max_tokens=10, messages=HELLO) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    (call,) = final.content
    assert (call.type, call.name, call.input) == ("tool_use", "Bash", big_input) and call.id.startswith("toolu_")


@pytest.mark.parametrize(
    "faults",
    [[Reply.rate_limit(0.01)], [Reply.overloaded()], [Reply.server_error()], [Reply.overloaded(), Reply.rate_limit(0.01)]],
    ids=["429", "529", "500", "529-then-429"],
)
def test_the_client_retries_faults_and_then_succeeds(server, faults):
    server.enqueue(*faults, "finally")
    msg = client(server, max_retries=2).messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert msg.content[0].text == "finally"
    reqs = server.message_requests()
    assert [r.status for r in reqs] == [f.status for f in faults] + [200]
    assert [r.headers["x-stainless-retry-count"] for r in reqs] == [str(i) for i in range(len(faults) + 1)]
    assert server.pending == 0


def test_rate_limit_sends_retry_after_and_the_client_honours_it(server):
    server.enqueue(Reply.rate_limit(1))
    started = time.monotonic()
    client(server, max_retries=1).messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert time.monotonic() - started >= 0.9  # a backoff of its own would be about 0.5 s
    assert len(server.message_requests()) == 2


def test_faults_beyond_max_retries_surface_as_the_matching_errors(server):
    server.enqueue(Reply.overloaded(), Reply.overloaded(), Reply.overloaded())
    with pytest.raises(sdk().OverloadedError) as info:
        client(server, max_retries=2).messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert info.value.status_code == 529 and info.value.body["error"]["type"] == "overloaded_error"
    assert len(server.message_requests()) == 3

    server.enqueue(Reply.rate_limit(0.01))
    with pytest.raises(sdk().RateLimitError) as info:
        client(server).messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert info.value.response.headers["retry-after"] == "0.01"


def test_prompt_too_long_is_a_bad_request_and_not_retried(server):
    server.enqueue(Reply.prompt_too_long())
    with pytest.raises(sdk().BadRequestError) as info:
        client(server, max_retries=2).messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert info.value.status_code == 400
    assert info.value.body["error"] == {"type": "invalid_request_error", "message": "prompt is too long: 250000 tokens > 200000 maximum"}
    assert "prompt is too long: 250000 tokens > 200000 maximum" in str(info.value)
    assert len(server.message_requests()) == 1


def test_timeout_surfaces_as_api_timeout_error_and_does_not_hold_up_shutdown():
    with MessagesServer(timeout_seconds=5) as server:
        server.enqueue(Reply.timeout())
        started = time.monotonic()
        with pytest.raises(sdk().APITimeoutError):
            client(server, timeout=0.3).messages.create(model=MODEL, max_tokens=10, messages=HELLO)
        assert time.monotonic() - started < 3
        (req,) = server.requests
        assert req.reply_kind == "timeout"  # recorded on arrival, although never answered in time
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 2, "stop() waited for the sleeping timeout reply"
    assert server.threads() == []


def test_timeout_then_success_with_a_retry(server):
    server.enqueue(Reply.timeout(2), "after the timeout")
    msg = client(server, timeout=0.3, max_retries=1).messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert msg.content[0].text == "after the timeout"
    assert [r.reply_kind for r in server.message_requests()] == ["timeout", "text"]


def test_count_tokens_models_and_unknown_paths_answer_without_consuming_replies(server):
    server.enqueue("kept for the next message")
    c = client(server)
    counted = c.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "word " * 400}])
    assert 300 < counted.input_tokens < 1000
    assert list(c.models.list()) == []
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(urllib.request.Request(server.url + "/api/oauth/profile", method="GET"), timeout=5)
    assert info.value.code == 404
    assert urllib.request.urlopen(urllib.request.Request(server.url + "/", method="HEAD"), timeout=5).status == 200
    assert [(r.method, r.path, r.status) for r in server.requests] == [
        ("POST", "/v1/messages/count_tokens", 200), ("GET", "/v1/models", 200), ("GET", "/api/oauth/profile", 404), ("HEAD", "/", 200),
    ]  # fmt: skip
    assert server.pending == 1


def test_beta_requests_record_the_betas_header_and_query(server):
    c = client(server)
    c.beta.messages.create(model=MODEL, max_tokens=10, messages=HELLO, betas=["context-management-2025-06-27", "token-efficient-tools-2025-02-19"])
    (req,) = server.requests
    assert req.path == "/v1/messages" and req.is_messages  # Claude Code's Node SDK adds "?beta=true": kept apart in req.query
    assert req.betas == ["context-management-2025-06-27", "token-efficient-tools-2025-02-19"]


def test_proxy_style_requests_are_refused_and_marked_external(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"CONNECT statsig.anthropic.com:443 HTTP/1.1\r\nHost: statsig.anthropic.com:443\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 403")
    (req,) = server.requests
    assert (req.method, req.path, req.reply_kind, req.status) == ("CONNECT", "statsig.anthropic.com:443", "external", 403)


def test_stop_closes_the_port_and_idle_keep_alive_connections():
    server = MessagesServer().start()
    c = client(server)
    c.messages.create(model=MODEL, max_tokens=10, messages=HELLO)  # leaves a pooled keep-alive connection open
    port = server.port
    assert len(server.threads()) >= 2
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 2
    assert server.threads() == []
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    c.close()
