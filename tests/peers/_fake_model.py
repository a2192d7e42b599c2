"""What the fake model servers (``fake_openai.py``, ``fake_responses.py``, ``fake_anthropic.py``) share: a
threading HTTP server on loopback, started and stopped by a ``with`` block, its ``base_url``, the handler's
JSON answers, the head of a server-sent-event stream and the pacing of a slow answer, and (for the servers
that record what the agent sent) the request log.

Each server keeps only its API's wire format: its routes, how it reads a request, the events it streams.
It runs in a thread of its own: it does not depend on the test's event loop, and an agent killed mid-stream
only breaks that one response.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["FakeModel", "FakeModelHandler", "Recorded", "RecordingFakeModel"]


class FakeModelHandler(BaseHTTPRequestHandler):
    """The base of a fake model's request handler (``self.server.owner`` is the :class:`FakeModel`)."""

    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        """The request's body (``Content-Length`` bytes)."""
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _start_stream(self) -> None:
        """Answer 200 with a server-sent-event stream, the connection closed after it."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _pace(self, paced: bool) -> None:
        """The pause before each chunk of a slow answer (:attr:`FakeModel.chunk_delay`)."""
        if paced:
            time.sleep(self.server.owner.chunk_delay)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    #: The :class:`FakeModel` (its subclass: what a handler records goes there).
    owner: Any


M = TypeVar("M", bound="FakeModel")


class FakeModel:
    """A fake model endpoint; ``with Fake() as llm:`` serves it on ``llm.base_url`` until the block ends.

    A subclass names its :attr:`handler`, its thread (:attr:`name`) and the path its base URL ends in
    (:attr:`path`).

    Attributes:
        chunk_delay: The pause before each chunk of a slow answer, in seconds.
        lock: Held while a request thread records what it was sent.
    """

    handler: type[FakeModelHandler]
    name: str
    path = ""

    def __init__(self, chunk_delay: float) -> None:
        self.chunk_delay = chunk_delay
        self.lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` and :attr:`path`."""
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.path}"

    def start(self: M) -> M:
        server = _Server(("127.0.0.1", 0), self.handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self: M) -> M:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Recorded(Protocol):
    """A request a :class:`RecordingFakeModel` keeps: its last user text and the history it carried."""

    @property
    def prompt(self) -> str: ...

    @property
    def history(self) -> tuple[tuple[str, str], ...]: ...


R = TypeVar("R", bound=Recorded)


class RecordingFakeModel(FakeModel, Generic[R]):
    """A fake model that keeps every request the agent sent (what the agent remembered then).

    Attributes:
        requests: Every model request, in arrival order.
    """

    def __init__(self, chunk_delay: float) -> None:
        super().__init__(chunk_delay)
        self.requests: list[R] = []

    def record(self, request: R) -> None:
        """Keep ``request`` (from a request thread)."""
        with self.lock:
            self.requests.append(request)

    @property
    def prompts(self) -> list[str]:
        """The last user text of every request, in arrival order."""
        with self.lock:
            return [request.prompt for request in self.requests]

    def asked(self, prompt: str) -> list[R]:
        """The requests whose last user text is ``prompt``, in arrival order."""
        with self.lock:
            return [request for request in self.requests if request.prompt == prompt]
