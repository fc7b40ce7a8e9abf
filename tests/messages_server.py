"""A local fake of the Anthropic Messages API, for tests that run real clients offline.

It listens on 127.0.0.1 (an OS-chosen port) in a background thread and speaks enough of the API
for the real `anthropic` Python client and for Claude Code (Node): `POST /v1/messages` (JSON, or an
SSE stream with `"stream": true`), `POST /v1/messages/count_tokens`, and a harmless answer for
anything else. Replies are scripted: queue text, tool_use, error or timeout replies with
`server.enqueue(...)`; once the queue is empty every request gets the default reply.

    from messages_server import MessagesServer, Reply

    with MessagesServer() as server:
        server.enqueue(Reply.overloaded(), Reply.text("hello"))
        client = anthropic.Anthropic(base_url=server.url, api_key="test-key", max_retries=2)
        client.messages.create(model="claude-sonnet-4-5", max_tokens=100, messages=[...])
        assert [r.status for r in server.message_requests()] == [529, 200]

Every request is recorded (`server.requests`): method, path, lower-cased headers with the
credentials redacted (only `api_key_present` says whether one was sent), and the parsed JSON body.

Hostile replies, for tests of what a client does with a server that misbehaves: `Reply.raw(body,
status, content_type)` sends any bytes (plain text with 200, broken JSON, a message whose content
is null...), `Reply.drip(interval)` sends a valid message one byte every `interval` seconds (each
read is quick, the whole never ends in time), and `Reply.echo_credentials()` is an error whose
message repeats the x-api-key and Authorization values the client sent (as a careless proxy might).
"""

from __future__ import annotations

import http.server
import itertools
import json
import socket
import sys
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Union
from urllib.parse import urlsplit

# Headers whose values are credentials: never kept, so a failing assert or a log cannot leak them.
_SECRET_HEADERS = frozenset({"x-api-key", "authorization", "proxy-authorization", "cookie"})
_MAX_BODY = 64 * 1024 * 1024  # a request body bigger than this is a bug in the test, not a prompt


@dataclass(frozen=True)
class Reply:
    """One scripted answer to a `POST /v1/messages`; build it with the class methods."""

    kind: str  # "text" | "tool_use" | "error" | "timeout" | "raw" | "drip" | "echo_credentials"
    reply_text: str = ""  # the text block (a tool_use reply may have one before its call)
    tool_name: str = ""
    tool_input: dict[str, Any] = field(default_factory=dict)
    tool_id: str = ""
    status: int = 200
    error_type: str = ""
    message: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    seconds: float | None = None
    body: bytes = b""  # a raw reply's bytes, sent as they are
    content_type: str = "application/json"

    @classmethod
    def text(cls, text: str) -> Reply:
        return cls("text", reply_text=text)

    @classmethod
    def tool_use(cls, name: str, input: dict[str, Any], *, id: str | None = None, text: str = "") -> Reply:
        """A `tool_use` block (after an optional text block), stop_reason "tool_use"."""
        return cls("tool_use", reply_text=text, tool_name=name, tool_input=dict(input), tool_id=id or f"toolu_{uuid.uuid4().hex[:24]}")

    @classmethod
    def error(cls, status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> Reply:
        return cls("error", status=status, error_type=error_type, message=message, headers=tuple((headers or {}).items()))

    @classmethod
    def rate_limit(cls, retry_after: float = 1) -> Reply:
        """429 with `retry-after` (seconds; the SDK accepts fractions, so tests can keep it short)."""
        value = str(int(retry_after)) if float(retry_after).is_integer() else str(retry_after)
        return cls.error(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", {"retry-after": value})

    @classmethod
    def overloaded(cls) -> Reply:
        return cls.error(529, "overloaded_error", "Overloaded")

    @classmethod
    def server_error(cls) -> Reply:
        return cls.error(500, "api_error", "Internal server error")

    @classmethod
    def prompt_too_long(cls, tokens: int = 250000, maximum: int = 200000) -> Reply:
        return cls.error(400, "invalid_request_error", f"prompt is too long: {tokens} tokens > {maximum} maximum")

    @classmethod
    def timeout(cls, seconds: float | None = None) -> Reply:
        """Answer only after `seconds` (default: the server's `timeout_seconds`), so a client with a shorter timeout gives up."""
        return cls("timeout", seconds=seconds)

    @classmethod
    def raw(cls, body: bytes | str, status: int = 200, content_type: str = "application/json") -> Reply:
        """Exactly these bytes as the answer (no Messages API shape is checked or added)."""
        return cls("raw", status=status, body=body.encode() if isinstance(body, str) else body, content_type=content_type)

    @classmethod
    def drip(cls, interval: float = 0.2) -> Reply:
        """A valid text message sent one byte every `interval` seconds, until done, the client hangs up,
        or the server's `max_sleep` runs out: no single read is slow, only the whole."""
        return cls("drip", seconds=interval)

    @classmethod
    def echo_credentials(cls, status: int = 500) -> Reply:
        """An error whose message quotes the x-api-key and Authorization headers the client sent."""
        return cls("echo_credentials", status=status, error_type="api_error")


DefaultReply = Union[str, Callable[[dict], Union[str, Reply]]]


def _default_reply(body: dict) -> str:
    return f"Fake reply to {len(body.get('messages') or [])} messages."


def rough_tokens(value: Any) -> int:
    """About 4 characters a token: the fake needs plausible numbers, not exact ones."""
    return max(1, len(json.dumps(value, ensure_ascii=False)) // 4)


@dataclass
class RecordedRequest:
    method: str
    path: str  # without the query string
    query: str
    headers: dict[str, str]  # lower-cased names; credential values replaced by "<redacted>"
    api_key_present: bool  # an x-api-key or Authorization header was sent
    body: Any  # parsed JSON, or None (empty or not JSON)
    status: int | None = None  # what the fake answered (None while it is still answering)
    reply_kind: str = ""  # a Reply kind ("text", "error", "drip"...), or "count_tokens", "other", "external"

    @property
    def betas(self) -> list[str]:
        return [b.strip() for b in self.headers.get("anthropic-beta", "").split(",") if b.strip()]

    @property
    def is_messages(self) -> bool:
        return self.method == "POST" and self.path == "/v1/messages"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, as clients expect of the real API
    timeout = 30  # an idle keep-alive connection cannot pin a thread for ever
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # Every method goes through one dispatcher so nothing Claude Code tries can hang or crash the fake.
    def do_GET(self) -> None:
        self.server.owner._handle(self)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = do_CONNECT = do_GET


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: MessagesServer

    def process_request(self, request: socket.socket, client_address: Any) -> None:
        # Our own threads, tracked with their sockets, so stop() can wake and join every one.
        thread = threading.Thread(target=self._serve_connection, args=(request, client_address), name=f"{self.owner._name}-conn", daemon=True)
        with self.owner._lock:
            self.owner._connections[thread] = request
        thread.start()

    def _serve_connection(self, request: socket.socket, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self.owner._lock:
                self.owner._connections.pop(threading.current_thread(), None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up (timeouts, shutdown) are normal here; anything else is a bug worth seeing.
        exc = sys.exc_info()[1]
        if not isinstance(exc, (ConnectionError, TimeoutError, OSError)):
            super().handle_error(request, client_address)


class MessagesServer:
    """The fake API. Use as a context manager (or call start()/stop()); `url` is the base URL for clients."""

    secret_headers = _SECRET_HEADERS  # recorded as "<redacted>"

    def __init__(
        self, *, default_reply: DefaultReply = _default_reply, timeout_seconds: float = 3.0, max_sleep: float = 10.0, model: str | None = None
    ) -> None:
        self.default_reply = default_reply
        self.timeout_seconds = timeout_seconds
        self.max_sleep = max_sleep  # whatever a test asks, a timeout reply never holds a thread longer
        self.model = model  # the model named in responses; None echoes the request's
        self._queue: deque[Reply] = deque()
        self._records: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: dict[threading.Thread, socket.socket] = {}
        self._ids = itertools.count(1)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._name = "fake-messages-api"

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> MessagesServer:
        if self._httpd is not None:
            raise RuntimeError("already started")
        self._stopping.clear()
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._name = f"fake-messages-api-{self.port}"
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=self._name, daemon=True)
        self._thread.start()
        return self

    def stop(self, join_timeout: float = 5.0) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()  # wakes timeout replies at once
        httpd.shutdown()
        with self._lock:
            connections = list(self._connections.items())
        for _, sock in connections:  # wakes handlers blocked reading the next keep-alive request
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread, _ in connections:
            thread.join(join_timeout)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(join_timeout)
            self._thread = None

    def __enter__(self) -> MessagesServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("not started")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def threads(self) -> list[threading.Thread]:
        """The live threads this server started (empty after stop(): tests check nothing leaked)."""
        return [t for t in threading.enumerate() if t.name in (self._name, f"{self._name}-conn")]

    # -- scripting and inspection -------------------------------------------------------------

    def enqueue(self, *replies: Reply | str) -> None:
        """Queue replies for the next `POST /v1/messages` requests, in order (a str is a text reply)."""
        with self._lock:
            self._queue.extend(Reply.text(r) if isinstance(r, str) else r for r in replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._records)

    def message_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.is_messages]

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
            self._queue.clear()

    # -- serving ------------------------------------------------------------------------------

    def _recorded(self, h: _Handler, key_headers: tuple[str, ...]) -> tuple[RecordedRequest, bool]:
        """The request recorded (its body parsed, secrets redacted) and whether it aimed at the
        internet through the stand-in as a proxy; `key_headers` carry the API key."""
        split = urlsplit(h.path)
        external = h.command == "CONNECT" or h.path.startswith(("http://", "https://"))
        headers = {k.lower(): ("<redacted>" if k.lower() in self.secret_headers else v) for k, v in h.headers.items()}
        api_key_present = any(h.headers.get(name) for name in key_headers)
        raw = b"" if h.command == "CONNECT" else self._read_body(h)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:  # a compressed body, say: recorded as None, answered anyway
            body = None
        record = RecordedRequest(h.command, h.path if external else split.path, split.query, headers, api_key_present, body)
        with self._lock:
            self._records.append(record)
        return record, external

    def _handle(self, h: _Handler) -> None:
        record, external = self._recorded(h, ("x-api-key", "authorization"))
        body = record.body
        if external:
            # Reached only through the proxy the Claude Code harness sets: traffic meant for the internet, refused.
            record.reply_kind = "external"
            record.status = 403
            h.close_connection = True
            return self._send_json(h, 403, {"type": "error", "error": {"type": "permission_error", "message": "the fake API does not proxy"}})
        path = record.path.rstrip("/")
        if h.command == "POST" and path == "/v1/messages":
            return self._answer_messages(h, record, body if isinstance(body, dict) else {})
        if h.command == "POST" and path == "/v1/messages/count_tokens":
            record.reply_kind = "count_tokens"
            return self._send_json(h, 200, {"input_tokens": rough_tokens((body or {}).get("messages", []))}, record)
        record.reply_kind = "other"
        if h.command == "HEAD":  # Claude Code preconnects with HEAD on the base URL
            return self._send_json(h, 200, None, record)
        if h.command == "GET" and path == "/v1/models":
            return self._send_json(h, 200, {"data": [], "has_more": False, "first_id": None, "last_id": None}, record)
        return self._send_json(h, 404, {"type": "error", "error": {"type": "not_found_error", "message": f"the fake API has no {h.command} {path}"}}, record)

    def _read_body(self, h: _Handler) -> bytes:
        if "chunked" in h.headers.get("transfer-encoding", "").lower():
            parts, total = [], 0
            while total <= _MAX_BODY:
                size = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while h.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                        pass
                    break
                parts.append(h.rfile.read(size))
                h.rfile.readline()
                total += size
            return b"".join(parts)
        length = int(h.headers.get("content-length") or 0)
        return h.rfile.read(min(length, _MAX_BODY)) if length > 0 else b""

    def _next_reply(self, body: dict) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return self._default(body)

    def _default(self, body: dict) -> Reply:
        made = self.default_reply(body) if callable(self.default_reply) else self.default_reply
        return Reply.text(made) if isinstance(made, str) else made

    def _answer_messages(self, h: _Handler, record: RecordedRequest, body: dict) -> None:
        reply = self._next_reply(body)
        record.reply_kind = reply.kind
        if reply.kind == "timeout":
            seconds = min(self.timeout_seconds if reply.seconds is None else reply.seconds, self.max_sleep)
            if self._stopping.wait(seconds):
                h.close_connection = True
                return
            # The client has most likely gone; answer anyway, as a slow server would.
            reply = self._default(body)
            if reply.kind == "timeout":  # a default that times out must not sleep twice
                reply = Reply.text(_default_reply(body))
        if reply.kind == "echo_credentials":
            sent = f"x-api-key: {h.headers.get('x-api-key', '')}; authorization: {h.headers.get('authorization', '')}"
            reply = Reply.error(reply.status, reply.error_type, f"upstream rejected the request ({sent})")
        if reply.kind == "error":
            payload = {"type": "error", "error": {"type": reply.error_type, "message": reply.message}, "request_id": self._request_id()}
            return self._send_json(h, reply.status, payload, record, dict(reply.headers))
        if reply.kind == "raw":
            return self._send_bytes(h, reply.status, reply.body, reply.content_type, record)
        if reply.kind == "drip":
            return self._send_drip(h, json.dumps(self._message(Reply.text(_default_reply(body)), body)).encode(), reply.seconds or 0.2, record)
        message = self._message(reply, body)
        if body.get("stream"):
            return self._send_stream(h, message, record)
        return self._send_json(h, 200, message, record)

    def _request_id(self) -> str:
        return f"req_fake{next(self._ids):06d}"

    def _message(self, reply: Reply, body: dict) -> dict:
        content: list[dict] = []
        if reply.reply_text or reply.kind == "text":
            content.append({"type": "text", "text": reply.reply_text})
        if reply.kind == "tool_use":
            content.append({"type": "tool_use", "id": reply.tool_id, "name": reply.tool_name, "input": reply.tool_input})
        return {
            "id": f"msg_fake{uuid.uuid4().hex[:20]}",
            "type": "message",
            "role": "assistant",
            "model": self.model or body.get("model") or "claude-fake",
            "content": content,
            "stop_reason": "tool_use" if reply.kind == "tool_use" else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": rough_tokens([body.get("system"), body.get("messages"), body.get("tools")]),
                "output_tokens": rough_tokens(content),
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }

    def _send_json(self, h: _Handler, status: int, payload: Any, record: RecordedRequest | None = None, headers: dict[str, str] | None = None) -> None:
        if record is not None:
            record.status = status
        data = b"" if payload is None else json.dumps(payload).encode()
        try:
            h.send_response(status)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(data)))
            h.send_header("request-id", self._request_id())
            for name, value in (headers or {}).items():
                h.send_header(name, value)
            h.end_headers()
            if h.command != "HEAD":
                h.wfile.write(data)
            h.wfile.flush()
        except OSError:  # the client gave up (a timeout reply) or the server is stopping
            h.close_connection = True

    def _send_bytes(self, h: _Handler, status: int, data: bytes, content_type: str, record: RecordedRequest) -> None:
        record.status = status
        try:
            h.send_response(status)
            h.send_header("content-type", content_type)
            h.send_header("content-length", str(len(data)))
            h.send_header("request-id", self._request_id())
            h.end_headers()
            h.wfile.write(data)
            h.wfile.flush()
        except OSError:
            h.close_connection = True

    def _send_drip(self, h: _Handler, data: bytes, interval: float, record: RecordedRequest) -> None:
        record.status = 200
        h.close_connection = True  # a body cut short leaves the connection unusable
        try:
            h.send_response(200)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(data)))
            h.send_header("request-id", self._request_id())
            h.end_headers()
            h.wfile.flush()
            spent = 0.0
            for index in range(len(data)):
                if spent >= self.max_sleep or self._stopping.wait(interval):
                    return
                spent += interval
                h.wfile.write(data[index : index + 1])
                h.wfile.flush()
        except OSError:  # the client gave up, as it should
            pass

    def _send_stream(self, h: _Handler, message: dict, record: RecordedRequest) -> None:
        self._send_sse(h, record, "request-id", _stream_events(message))

    def _send_sse(self, h: Any, record: RecordedRequest, id_header: str, events: Iterable[tuple[str, Any]]) -> None:
        """A 200 of server-sent events, chunked as the API sends them; the request's id in `id_header`."""
        record.status = 200
        try:
            h.send_response(200)
            h.send_header("content-type", "text/event-stream; charset=utf-8")
            h.send_header("cache-control", "no-cache")
            h.send_header("transfer-encoding", "chunked")
            h.send_header(id_header, self._request_id())
            h.end_headers()
            for event, data in events:
                chunk = f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
                h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                h.wfile.flush()
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        except OSError:
            h.close_connection = True


def _stream_events(message: dict) -> Iterator[tuple[str, dict]]:
    """The SSE events the real API sends for `message`, in its order (text in small deltas)."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            text = block["text"]
            for i in range(0, len(text), 16):
                yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text[i : i + 16]}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}}
            partial = json.dumps(block["input"])
            for i in range(0, len(partial), 16):
                yield (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": partial[i : i + 16]}},
                )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": usage["output_tokens"]}}
    yield "message_stop", {"type": "message_stop"}
