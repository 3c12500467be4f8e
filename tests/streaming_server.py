"""A real local HTTP server speaking OpenAI's streaming chat-completions protocol (server-sent
events over HTTP/1.1 chunked transfer), for the streaming tests and benchmarks."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ("StreamReply", "StreamServer", "stream_server")


@dataclass
class StreamReply:
    """One scripted streamed reply.

    Attributes:
        tokens: the content deltas, one chunk each.
        first_delay: seconds before the first chunk; ``delay``: seconds between chunks.
        usage: the final usage chunk's ``usage`` (``None``: no usage chunk is sent).
        drop_after: close the connection abruptly after this many content chunks (no
            ``finish_reason``, no ``[DONE]``, the chunked body left unterminated).
        finish_reason: the last chunk's ``finish_reason``.
        reasoning: reasoning deltas sent before the content (``delta.reasoning_content``).
    """

    tokens: list[str]
    first_delay: float = 0.0
    delay: float = 0.0
    usage: dict[str, int] | None = field(default_factory=lambda: {"prompt_tokens": 7, "completion_tokens": 3})
    drop_after: int | None = None
    finish_reason: str = "stop"
    reasoning: list[str] = field(default_factory=list)


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None, choices: bool = True) -> bytes:
    body: dict[str, Any] = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}] if choices else []
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class StreamServer:
    """Answers each POST with the next ``replies`` item (the last one repeats), streamed when
    the request asks ``stream: true``. ``received`` holds the request bodies."""

    def __init__(self, replies: list[StreamReply] | None = None) -> None:
        self.replies = replies or [StreamReply(["hel", "lo"])]
        self.received: list[dict[str, Any]] = []
        self.sent_first: list[float] = []  # time.monotonic() when each reply's first content chunk was written
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _write(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length))
                with server._lock:
                    server.received.append(body)
                    reply = server.replies[min(len(server.received), len(server.replies)) - 1]
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    self._write(_chunk({"role": "assistant", "content": ""}))
                    time.sleep(reply.first_delay)
                    for piece in reply.reasoning:
                        self._write(_chunk({"reasoning_content": piece}))
                    for i, token in enumerate(reply.tokens):
                        if reply.drop_after is not None and i >= reply.drop_after:
                            self.connection.shutdown(socket.SHUT_RDWR)
                            self.close_connection = True
                            return
                        if i:
                            time.sleep(reply.delay)
                        else:
                            server.sent_first.append(time.monotonic())
                        self._write(_chunk({"content": token}))
                    self._write(_chunk({}, finish=reply.finish_reason))
                    if reply.usage is not None and (body.get("stream_options") or {}).get("include_usage"):
                        self._write(_chunk({}, usage=reply.usage, choices=False))
                    self._write(b"data: [DONE]\n\n")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError, OSError):
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join()


def stream_server(replies: list[StreamReply] | None = None) -> Iterator[StreamServer]:
    """A fixture body: a server for the test, closed after it."""
    server = StreamServer(replies)
    try:
        yield server
    finally:
        server.close()
