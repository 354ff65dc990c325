"""A fake LLM server on 127.0.0.1 for tests: the Anthropic Messages API and the OpenAI Chat Completions API.

It is a real HTTP server (ThreadingHTTPServer, port 0) that the real SDKs talk to through their base URL:

* ``POST /v1/messages`` (Anthropic): a JSON message, or with ``"stream": true`` the SSE events
  message_start, content_block_start, content_block_delta (text_delta), content_block_stop,
  message_delta (stop_reason + usage) and message_stop;
* ``POST /v1/chat/completions`` (OpenAI): a JSON chat.completion, or with ``"stream": true``
  ``data: {chunk}`` lines, a final usage chunk when ``stream_options.include_usage`` is set, and
  ``data: [DONE]``.

Replies are scripted per test with :meth:`FakeLLMServer.script`: :class:`Text` replies, or failures
(:class:`Status` -- e.g. 429 with retry-after, 500, 400 context-length --, :class:`Malformed` JSON or an
empty / ``{}`` body, :class:`Hang`, a slow stream with ``Text(interval=...)``; impossible usage counts
such as ``Text(input_tokens=-5)`` are sent as given).  An empty script answers 500 with ``x-should-retry: false`` so a test that asks more than
it scripted fails loudly.  Every request is recorded (path, headers, JSON body) in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Text:
    """A successful reply.  Usage is given in normalised terms (input excludes cached tokens)."""

    text: str
    input_tokens: int = 100
    output_tokens: int = 50
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    stop_reason: str = "end_turn"  # Anthropic spelling; mapped to "stop" / "length" for OpenAI
    model: str | None = None  # the model the reply claims; default: the one asked for
    chunk: int = 7  # characters per streamed delta
    interval: float = 0.0  # seconds between streamed events (a server that trickles its reply)


@dataclass(frozen=True)
class Status:
    """An error status with a vendor-shaped error body."""

    status: int
    message: str = "error"
    error_type: str = "api_error"
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Malformed:
    """200 with a body that is not valid JSON (or, when streaming, one SSE event that is not)."""

    body: str = '{"id": "msg_broken", "content": [ {"type": "te'


@dataclass(frozen=True)
class Hang:
    """Hold the request open for `seconds` (longer than the client's timeout), then drop it."""

    seconds: float = 10.0


Reply = Text | Status | Malformed | Hang


def rate_limited(retry_after_ms: int = 20) -> Status:
    return Status(
        429,
        "rate limited",
        "rate_limit_error",
        headers={"retry-after-ms": str(retry_after_ms), "retry-after": "0"},
    )


def server_error(retry_after_ms: int = 20) -> Status:
    return Status(500, "internal error", "api_error", headers={"retry-after-ms": str(retry_after_ms)})


def context_overflow(provider: str) -> Status:
    if provider == "anthropic":
        return Status(400, "prompt is too long: 250000 tokens > 200000 maximum", "invalid_request_error")
    return Status(
        400,
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 250000 tokens.",
        "invalid_request_error",
        code="context_length_exceeded",
    )


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)  # when it arrived (time.monotonic)


class FakeLLMServer:
    def __init__(self) -> None:
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.requests: list[Request] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-llm", daemon=True
        )

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeLLMServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # releases hanging handlers
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The base URL for the Anthropic SDK; the OpenAI SDK wants ``url + "/v1"``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # ------------------------------------------------------------------ script

    def script(self, *replies: Reply | str) -> None:
        with self._lock:
            self._replies.extend(Text(r) if isinstance(r, str) else r for r in replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    def _next(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._replies:
                return self._replies.popleft()
        return Status(500, "the fake server has no scripted reply left", headers={"x-should-retry": "false"})


def _handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            headers = {k.lower(): v for k, v in self.headers.items()}
            if self.path.rstrip("/") == "/v1/messages":
                kind = "anthropic"
            elif self.path.rstrip("/") == "/v1/chat/completions":
                kind = "openai"
            else:
                self._json(404, {"error": {"type": "not_found_error", "message": f"no route {self.path}"}})
                return
            reply = server._next(Request(self.path, headers, body))
            if isinstance(reply, Hang):
                server._stop.wait(reply.seconds)
                self.close_connection = True
                return
            if isinstance(reply, Status):
                self._json(reply.status, _error_body(kind, reply), reply.headers)
                return
            stream = bool(body.get("stream"))
            if isinstance(reply, Malformed):
                if stream:
                    prefix = "data: " if kind == "openai" else "event: message_start\ndata: "
                    self._sse([prefix + reply.body])
                else:
                    self._raw(200, reply.body.encode(), "application/json")
                return
            model = reply.model or str(body.get("model", "fake-model"))
            if kind == "anthropic":
                if stream:
                    self._sse(_anthropic_events(reply, model), reply.interval)
                else:
                    self._json(200, _anthropic_message(reply, model))
            else:
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                if stream:
                    self._sse(_openai_chunks(reply, model, include_usage), reply.interval)
                else:
                    self._json(200, _openai_completion(reply, model))

        # -------------------------------------------------------------- writers

        def _raw(self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _json(self, status: int, doc: Any, headers: dict[str, str] | None = None) -> None:
            self._raw(status, json.dumps(doc).encode(), "application/json", headers)

        def _sse(self, events: list[str], interval: float = 0.0) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            for i, event in enumerate(events):
                if i and interval and server._stop.wait(interval):
                    break  # the server is stopping
                try:
                    self.wfile.write(f"{event}\n\n".encode())
                    self.wfile.flush()
                except OSError:  # the client hung up (it gave up on a slow stream)
                    break
            self.close_connection = True

    return Handler


# ---------------------------------------------------------------------- Anthropic shapes


def _error_body(kind: str, reply: Status) -> dict[str, Any]:
    if kind == "anthropic":
        return {"type": "error", "error": {"type": reply.error_type, "message": reply.message}}
    return {"error": {"message": reply.message, "type": reply.error_type, "param": None, "code": reply.code}}


def _anthropic_usage(reply: Text, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": reply.input_tokens,
        "output_tokens": output_tokens,
        "cache_read_input_tokens": reply.cache_read_tokens,
        "cache_creation_input_tokens": reply.cache_write_tokens,
    }


def _msg_id() -> str:
    return f"msg_fake{time.monotonic_ns()}"


def _anthropic_message(reply: Text, model: str) -> dict[str, Any]:
    return {
        "id": _msg_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": reply.text}],
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": _anthropic_usage(reply, reply.output_tokens),
    }


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}"


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(size, 1))]


def _anthropic_events(reply: Text, model: str) -> list[str]:
    start = _anthropic_message(reply, model) | {"content": [], "stop_reason": None}
    start["usage"] = _anthropic_usage(reply, 1)
    events = [
        _event("message_start", {"type": "message_start", "message": start}),
        _event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        _event("ping", {"type": "ping"}),
    ]
    for piece in _pieces(reply.text, reply.chunk):
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}
        events.append(_event("content_block_delta", delta))
    events += [
        _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": reply.output_tokens},
            },
        ),
        _event("message_stop", {"type": "message_stop"}),
    ]
    return events


# ---------------------------------------------------------------------- OpenAI shapes


def _finish(reply: Text) -> str:
    return "length" if reply.stop_reason == "max_tokens" else "stop"


def _openai_usage(reply: Text) -> dict[str, Any]:
    prompt = reply.input_tokens + reply.cache_read_tokens  # OpenAI counts cached tokens inside prompt_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": reply.output_tokens,
        "total_tokens": prompt + reply.output_tokens,
        "prompt_tokens_details": {"cached_tokens": reply.cache_read_tokens},
    }


def _openai_completion(reply: Text, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.text},
                "finish_reason": _finish(reply),
                "logprobs": None,
            }
        ],
        "usage": _openai_usage(reply),
    }


def _openai_chunks(reply: Text, model: str, include_usage: bool) -> list[str]:
    base = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return "data: " + json.dumps(base | {"choices": [choice]})

    events = [chunk({"role": "assistant", "content": ""}, None)]
    events += [chunk({"content": piece}, None) for piece in _pieces(reply.text, reply.chunk)]
    events.append(chunk({}, _finish(reply)))
    if include_usage:
        events.append("data: " + json.dumps(base | {"choices": [], "usage": _openai_usage(reply)}))
    events.append("data: [DONE]")
    return events
