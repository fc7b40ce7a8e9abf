"""A local stand-in of the OpenAI Responses API, for running the real Codex CLI offline.

It listens on 127.0.0.1 (an OS-chosen port) in a background thread and speaks enough of the API
for Codex 0.171.0: `POST /v1/responses` answered as a server-sent event stream (`response.created`,
one `response.output_item.done`, `response.completed` with the usage), a `426 Upgrade Required` for
the WebSocket transport Codex tries first (so it falls back to HTTP at once, instead of retrying
five times), and a harmless answer for anything else. Replies are scripted: queue text or error
replies with `server.enqueue(...)`; once the queue is empty every request gets the default reply.

    from responses_server import ResponsesServer, Reply

    with ResponsesServer() as server:
        server.enqueue(Reply.text("done"))
        ... run codex with base_url = server.url + "/v1" ...
        (request,) = server.response_requests()
        request.body["input"]   # the items Codex sent: what it resumed, plus the new prompt

Compaction. Codex 0.171.0 asks for one through `POST /v1/responses` too, in one of two ways (there
is no `/v1/responses/compact` in it): with the built-in OpenAI provider (remote compaction v2) the
input ends with a `{"type": "compaction_trigger"}` item and the answer must be exactly one
`{"type": "compaction", "encrypted_content": ...}` output item; with any other provider the input
ends with a user message holding Codex's compaction prompt (`COMPACTION_PROMPT`) and the answer's
text is the summary. The stand-in answers both with its `summary` and records them with
`reply_kind` "compact": a test sees when Codex compacts.

As the real API does, a request whose input splits a call from its output is refused with 400 and
the API's message (`reply_kind` "rejected").

The HTTP plumbing (life cycle, threads, recording with the credentials redacted, body reading) is
the Messages API fake's (tests/messages_server.py); only the routes and the wire format differ.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Union

from messages_server import MessagesServer, RecordedRequest, rough_tokens

# The first words of the prompt Codex sends to have the conversation summarized (compact.rs,
# templates/compact/prompt.md; read from the 0.171.0 binary with `strings`).
COMPACTION_PROMPT = "You are performing a CONTEXT CHECKPOINT COMPACTION."
# The stand-in's `compaction` item carries this, then the summary, in the field the real API encrypts.
STAND_IN_COMPACTION = "stand-in compaction; summary: "
# What Codex puts before a summary in the user message that stands for the compacted history (0.171.0's text).
SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking process. You also have access to the "
    "state of the tools that were used by that language model. Use this to build on the work that has already been done and avoid "
    "duplicating work. Here is the summary produced by the other language model, use the information in this summary to assist with "
    "your own analysis:"
)


@dataclass(frozen=True)
class Reply:
    """One scripted answer to a `POST /v1/responses`; build it with the class methods."""

    kind: str  # "text" | "error"
    reply_text: str = ""
    status: int = 200
    code: str = ""
    message: str = ""

    @classmethod
    def text(cls, text: str) -> Reply:
        """An assistant message with one output_text part."""
        return cls("text", reply_text=text)

    @classmethod
    def error(cls, status: int, message: str, code: str = "invalid_request_error") -> Reply:
        """An HTTP error with the API's error body (Codex does not retry a 400)."""
        return cls("error", status=status, code=code, message=message)


DefaultReply = Union[str, Callable[[dict], Union[str, Reply]]]


def _default_reply(body: dict) -> str:
    return f"Stand-in reply to {len(body.get('input') or [])} input items."


def item_text(item: Any) -> str:
    """The text of a message item (its input_text/output_text parts joined), "" for other items."""
    if not isinstance(item, dict) or item.get("type", "message") != "message":
        return ""
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if isinstance(p, dict) and isinstance(p.get("text"), str))


def compaction_kind(body: Any) -> str:
    """How a streamed request asks for a compaction: "trigger" (remote compaction v2, the OpenAI provider's:
    the input ends with a `compaction_trigger` item), "prompt" (inline, other providers': the input ends
    with Codex's compaction prompt), or "" for a plain turn."""
    items = body.get("input") if isinstance(body, dict) else None
    if not isinstance(items, list) or not items:
        return ""
    if isinstance(items[-1], dict) and items[-1].get("type") == "compaction_trigger":
        return "trigger"
    return "prompt" if item_text(items[-1]).lstrip().startswith(COMPACTION_PROMPT) else ""


CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")


def call_pairing_error(items: Any) -> str:
    """What the real API answers (400) when the input splits a call from its output: every call needs
    its output later in the input, every output a call before it. "" when the input is well formed.
    (The messages are the API's for function calls; for custom tool calls the same words are assumed.)"""
    calls: dict[str, str] = {}
    answered: set[str] = set()
    for item in items if isinstance(items, list) else []:
        kind = item.get("type") if isinstance(item, dict) else None
        call_id = item.get("call_id") if isinstance(item, dict) else None
        if kind in CALLS and isinstance(call_id, str):
            calls[call_id] = kind
        elif kind in OUTPUTS:
            if call_id not in calls:
                return f"No tool call found for {kind.replace('_', ' ')} with call_id {call_id}."
            answered.add(call_id)
    missing = [call_id for call_id in calls if call_id not in answered]
    return f"No tool output found for function call {missing[0]}." if missing else ""


class ResponsesServer(MessagesServer):
    """The stand-in. Use as a context manager (or call start()/stop()); `url` is the origin (add "/v1" for a base_url)."""

    secret_headers = frozenset({"authorization", "proxy-authorization", "cookie", "chatgpt-account-id"})

    def __init__(
        self,
        *,
        default_reply: DefaultReply = _default_reply,
        summary: str = "Stand-in summary: the user asked for changes; the work so far is described here.",
        model: str | None = None,
    ) -> None:
        super().__init__(model=model)
        self.default_reply = default_reply  # type: ignore[assignment]
        self.summary = summary  # the answer to a compaction request, either way
        self._name = "fake-responses-api"

    def start(self) -> ResponsesServer:
        super().start()
        self._name = f"fake-responses-api-{self.port}"
        if self._thread is not None:
            self._thread.name = self._name
        return self

    def __enter__(self) -> ResponsesServer:
        return self.start()

    def enqueue(self, *replies: Reply | str) -> None:  # type: ignore[override]
        """Queue replies for the next `POST /v1/responses` requests, in order (a str is a text reply)."""
        with self._lock:
            self._queue.extend(Reply.text(r) if isinstance(r, str) else r for r in replies)  # type: ignore[misc]

    def response_requests(self) -> list[RecordedRequest]:
        """The `POST /v1/responses` requests (turns and compactions), in order."""
        return [r for r in self.requests if r.method == "POST" and r.path.rstrip("/") == "/v1/responses"]

    def compaction_requests(self) -> list[RecordedRequest]:
        """The requests that asked for a compaction, either way."""
        return [r for r in self.requests if r.reply_kind == "compact"]

    # -- serving ------------------------------------------------------------------------------

    def _handle(self, h: Any) -> None:
        record, external = self._recorded(h, ("authorization",))
        body = record.body
        if external:
            # Reached only when a harness makes the stand-in the proxy: traffic meant for the internet, refused.
            record.reply_kind = "external"
            h.close_connection = True
            return self._send_json(h, 403, {"error": {"message": "the stand-in does not proxy", "type": "permission_error"}}, record)
        path = record.path.rstrip("/")
        if h.headers.get("upgrade", "").lower() == "websocket":
            # Codex tries the WebSocket transport first; 426 makes it fall back to HTTP without retrying.
            record.reply_kind = "websocket"
            h.close_connection = True
            return self._send_json(h, 426, {"error": {"message": "the stand-in speaks HTTP only", "type": "invalid_request_error"}}, record)
        if h.command == "POST" and path == "/v1/responses":
            return self._answer_responses(h, record, body if isinstance(body, dict) else {})
        record.reply_kind = "other"
        if h.command == "GET" and path == "/v1/models":
            return self._send_json(h, 200, {"object": "list", "data": [], "models": []}, record)
        return self._send_json(h, 404, {"error": {"message": f"the stand-in has no {h.command} {path}", "type": "invalid_request_error"}}, record)

    def _answer_responses(self, h: Any, record: RecordedRequest, body: dict) -> None:
        error = call_pairing_error(body.get("input"))
        if error:  # as the real API does: a client that sends this would be refused, so the test must see it
            record.reply_kind = "rejected"
            return self._send_json(h, 400, {"error": {"message": error, "type": "invalid_request_error", "param": "input", "code": None}}, record)
        kind = compaction_kind(body)
        if kind:
            record.reply_kind = "compact"
            if kind == "trigger":  # exactly one `compaction` item, whose opaque content the real API encrypts
                return self._send_events(h, record, body, {"type": "compaction", "encrypted_content": STAND_IN_COMPACTION + self.summary})
            return self._send_events(h, record, body, self.summary)
        with self._lock:
            queued = self._queue.popleft() if self._queue else None
        reply = queued if isinstance(queued, Reply) else self._default(body)
        record.reply_kind = reply.kind
        if reply.kind == "error":
            return self._send_json(h, reply.status, {"error": {"message": reply.message, "type": reply.code, "code": reply.code}}, record)
        return self._send_events(h, record, body, reply.reply_text)

    def _default(self, body: dict) -> Reply:  # type: ignore[override]
        made = self.default_reply(body) if callable(self.default_reply) else self.default_reply
        return Reply.text(made) if isinstance(made, str) else made  # type: ignore[return-value]

    def _send_events(self, h: Any, record: RecordedRequest, body: dict, output: str | dict) -> None:
        self._send_sse(h, record, "x-request-id", ((event["type"], event) for event in stream_events(body, output, self.model)))


def stream_events(body: dict, output: str | dict, model: str | None = None) -> Iterator[dict]:
    """The events of a streamed response whose output is one item: an assistant message holding `output`
    when it is a str, else `output` itself."""
    response_id = f"resp_stand_in_{uuid.uuid4().hex[:20]}"
    message = (
        output
        if isinstance(output, dict)
        else {
            "type": "message",
            "id": f"msg_stand_in_{uuid.uuid4().hex[:20]}",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": output, "annotations": []}],
        }
    )
    input_tokens = rough_tokens([body.get("instructions"), body.get("input"), body.get("tools")])
    output_tokens = rough_tokens(message)
    usage = {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }
    shell = {"id": response_id, "object": "response", "model": model or body.get("model") or "gpt-stand-in", "status": "in_progress", "output": []}
    yield {"type": "response.created", "sequence_number": 0, "response": shell}
    yield {"type": "response.output_item.done", "sequence_number": 1, "output_index": 0, "item": message}
    yield {"type": "response.completed", "sequence_number": 2, "response": {**shell, "status": "completed", "output": [message], "usage": usage}}
