"""One raw link to the agent under check: requests, notifications and everything the agent sends, on record.

The checker must see the agent's answers exactly as sent, so it drives a bare
:class:`~acp_client.transports.base.Transport` (the client's own stdio, WebSocket and Streamable HTTP
transports) with the client's JSON-RPC framing, and nothing above it: no connection layer that
would swallow an unexpected response, no recovery that would hide a refusal, no transcript that
would de-duplicate a replay. Every message in either direction goes into the :class:`WireLog`, which
is where a check's evidence comes from.

A link answers the agent's own requests so a turn can go on: a permission request is granted once
(``allow_once``, else the first option), an elicitation is declined, and anything else (``fs/*``,
``terminal/*``) is refused with ``-32601``: the checker offers no file system and no terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any, Final

import attrs

from .._codec._jsonrpc import (
    ErrorResponse,
    Request,
    Response,
    classify,
    error_message,
    notification_message,
    request_message,
    result_message,
)
from ..exceptions import MalformedFrame, MessageTooLarge, TransportClosed, TransportError
from ..transports.base import Transport

#: How much of one message an evidence line shows.
EXCERPT_CHARS: Final = 400
#: The most entries one wire log keeps (a flooding agent must not exhaust memory); later ones are counted.
MAX_ENTRIES: Final = 5000
#: The most bytes of messages (as JSON) one wire log keeps; later ones are counted, not kept.
MAX_LOG_BYTES: Final = 32 * 1024 * 1024


class CheckFailed(Exception):
    """A check cannot go on: the agent did not answer, exited, or answered nonsense.

    Raised by the driver and by checks; the runner turns it into a ``fail`` with ``finding`` as
    the first line of the evidence.
    """

    def __init__(self, finding: str) -> None:
        super().__init__(finding)
        self.finding = finding


@attrs.frozen
class WireEntry:
    """One line of the wire log: ``>`` sent, ``<`` received, ``!`` an event (garbage, exit...)."""

    t: float
    link: str
    direction: str
    message: Any

    def render(self, *, limit: int = EXCERPT_CHARS) -> str:
        text = _as_text(self.message)
        if len(text) > limit:
            text = text[:limit] + f"... ({len(text) - limit} more chars)"
        return f"{self.link} {self.direction} {text}"


def _as_text(message: Any) -> str:
    """``message`` as compact JSON (a string as it is)."""
    if isinstance(message, str):
        return message
    try:
        return json.dumps(message, separators=(",", ":"), ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        return repr(message)


def message_bytes(message: Any) -> int:
    """The size of ``message`` as UTF-8 JSON (what a wire log entry costs)."""
    return len(_as_text(message).encode("utf-8", "replace"))


class WireLog:
    """Every message of one check, on every link, in the order the checker saw them.

    Bounded by count and by bytes (a flooding agent must not exhaust memory): once either is
    reached, later entries are counted (:attr:`dropped`, :attr:`dropped_bytes`), not kept.
    """

    def __init__(self, *, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_LOG_BYTES) -> None:
        self._start = time.monotonic()
        self.entries: list[WireEntry] = []
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        #: Bytes of the entries kept.
        self.bytes = 0
        self.dropped = 0
        self.dropped_bytes = 0

    @property
    def full(self) -> bool:
        """Whether entries have been dropped."""
        return self.dropped > 0

    def add(self, link: str, direction: str, message: Any) -> WireEntry:
        entry = WireEntry(time.monotonic() - self._start, link, direction, message)
        size = message_bytes(message)
        if len(self.entries) < self.max_entries and self.bytes + size <= self.max_bytes:
            self.entries.append(entry)
            self.bytes += size
        else:
            self.dropped += 1
            self.dropped_bytes += size
        return entry

    def excerpt(self, entries: list[WireEntry] | None = None, *, head: int = 6, tail: int = 6) -> list[str]:
        """Rendered lines: the first ``head`` and the last ``tail`` of ``entries`` (default: all)."""
        chosen = self.entries if entries is None else entries
        if len(chosen) <= head + tail:
            lines = [entry.render() for entry in chosen]
        else:
            lines = [entry.render() for entry in chosen[:head]]
            lines.append(f"... {len(chosen) - head - tail} more messages ...")
            lines += [entry.render() for entry in chosen[-tail:]]
        if self.dropped and entries is None:
            lines.append(f"... and {self.dropped} messages ({self.dropped_bytes} bytes) after the log was full")
        return lines


@attrs.frozen
class Answer:
    """The agent's answer to one request: ``result`` or ``error`` (code, message, data)."""

    request: dict[str, Any]
    message: dict[str, Any]
    result: Any = None
    code: int | None = None
    error_text: str = ""
    data: Any = None

    @property
    def ok(self) -> bool:
        return self.code is None

    def describe(self) -> str:
        if self.ok:
            text = json.dumps(self.result, separators=(",", ":"), ensure_ascii=False, default=repr)
            return f"answered {text if len(text) <= 160 else text[:160] + '...'}"
        return f"answered error {self.code} ({self.error_text!r})"


class Link:
    """One transport to the agent, with a reader that records and sorts what arrives.

    Args:
        transport: An open transport (nothing sent yet).
        name: How the link is called in the evidence (``A``, ``B``...).
        timeout: How long :meth:`request` waits for an answer by default.
        describe_exit: Called when the link ends, for the reason (a stdio agent's exit status and
            the end of its stderr).
    """

    def __init__(
        self,
        transport: Transport,
        name: str,
        log: WireLog,
        *,
        timeout: float,
        describe_exit: Callable[[], str] | None = None,
    ) -> None:
        self.transport = transport
        self.name = name
        self.log = log
        self.timeout = timeout
        self._describe_exit = describe_exit
        self._next_id = 0
        self._waiting: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._requests: dict[Any, dict[str, Any]] = {}
        #: Every inbound message (dict), in arrival order (capped like the log).
        self.inbound: list[dict[str, Any]] = []
        #: Answers whose id matches no request of this link (e.g. an answer to a notification).
        self.stray_answers: list[dict[str, Any]] = []
        self.closed_reason: str | None = None
        self._changed = asyncio.Event()
        self._last_inbound = time.monotonic()
        self._reader: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._reader = asyncio.get_running_loop().create_task(self._read(), name=f"acp-check-link-{self.name}")

    async def aclose(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.transport.aclose(), 10.0)
        self._end("closed by the checker")

    @property
    def closed(self) -> bool:
        return self.closed_reason is not None

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def send(self, message: dict[str, Any]) -> None:
        """Send one message as is (recorded first)."""
        self.log.add(self.name, ">", message)
        if self.closed_reason is not None:
            raise CheckFailed(f"link {self.name} is gone: {self.closed_reason}")
        try:
            await asyncio.wait_for(self.transport.send(message), self.timeout)
        except asyncio.TimeoutError:
            raise CheckFailed(
                f"could not send {message.get('method', 'a message')} within {self.timeout:g} s"
            ) from None
        except TransportError as exc:
            raise CheckFailed(f"sending {message.get('method', 'a message')} failed: {exc}") from exc

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> Answer:
        """Send a request and wait for its answer.

        Raises:
            CheckFailed: No answer within the timeout, or the link ended first.
        """
        request_id = self.next_id()
        message = request_message(request_id, method, params)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        self._requests[request_id] = message
        try:
            await self.send(message)
            wait = self.timeout if timeout is None else timeout
            try:
                reply = await asyncio.wait_for(asyncio.shield(future), wait)
            except asyncio.TimeoutError:
                if self.closed_reason is not None:
                    raise CheckFailed(
                        f"link {self.name} ended before {method} was answered: {self.closed_reason}"
                    ) from None
                raise CheckFailed(f"{method} was not answered within {wait:g} s") from None
        finally:
            self._waiting.pop(request_id, None)
        return _answer(message, reply)

    def remember(self, request_id: Any, message: dict[str, Any]) -> None:
        """Note a request sent with :meth:`send` (so its answer is not taken for a stray one)."""
        self._requests[request_id] = message

    def answer_of(self, request_id: Any, reply: dict[str, Any]) -> Answer:
        """``reply`` as the :class:`Answer` to the request ``request_id``."""
        return _answer(self._requests.get(request_id, {}), reply)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self.send(notification_message(method, params))

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], *, start: int = 0, timeout: float
    ) -> dict[str, Any] | None:
        """The first inbound message from position ``start`` that matches, or ``None`` after ``timeout``."""
        deadline = time.monotonic() + timeout
        index = start
        while True:
            while index < len(self.inbound):
                message = self.inbound[index]
                index += 1
                if predicate(message):
                    return message
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.closed_reason is not None:
                return None
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    async def settle(self, *, quiet: float = 0.3, limit: float = 3.0) -> None:
        """Wait until nothing arrived for ``quiet`` seconds (at most ``limit`` seconds in all)."""
        deadline = time.monotonic() + limit
        while self.closed_reason is None:
            now = time.monotonic()
            idle_for = now - self._last_inbound
            if idle_for >= quiet or now >= deadline:
                return
            await asyncio.sleep(min(quiet - idle_for, deadline - now))

    def updates(self, session_id: str | None = None, *, start: int = 0, end: int | None = None) -> list[dict[str, Any]]:
        """The ``update`` objects of the ``session/update`` notifications from position ``start`` to ``end``."""
        found = [update_of(message, session_id) for message in self.inbound[start:end]]
        return [update for update in found if update is not None]

    async def _read(self) -> None:
        try:
            while True:
                try:
                    message = await self.transport.receive()
                except (MalformedFrame, MessageTooLarge) as exc:
                    self.log.add(self.name, "!", f"undecodable frame: {exc}")
                    continue
                self._last_inbound = time.monotonic()
                if isinstance(message, list):
                    self.log.add(self.name, "<", message)
                    for member in message:
                        if isinstance(member, dict):
                            await self._inbound(member, logged=True)
                    continue
                await self._inbound(message)
        except TransportClosed as exc:
            reason = exc.reason if getattr(exc, "reason", None) else str(exc)
            if self._describe_exit is not None:
                extra = self._describe_exit()
                if extra:
                    reason = f"{reason}; {extra}"
            self.log.add(self.name, "!", f"link ended: {reason}")
            self._end(reason)
        except TransportError as exc:
            self.log.add(self.name, "!", f"link failed: {exc}")
            self._end(str(exc))

    async def _inbound(self, message: dict[str, Any], *, logged: bool = False) -> None:
        if not logged:
            self.log.add(self.name, "<", message)
        # What a check waits for is kept while the log keeps it; answers to its requests always.
        if len(self.inbound) < MAX_ENTRIES and (not self.log.full or ("id" in message and "method" not in message)):
            self.inbound.append(message)
        self._changed.set()
        try:
            item = classify(message)
        except MalformedFrame as exc:
            self.log.add(self.name, "!", f"not a JSON-RPC message: {exc}")
            return
        if isinstance(item, Response | ErrorResponse):
            future = self._waiting.get(item.id) if item.id is not None else None
            if future is not None and not future.done():
                future.set_result(message)
            elif item.id not in self._requests:
                self.stray_answers.append(message)
        elif isinstance(item, Request):
            await self._answer_agent(item)

    async def _answer_agent(self, item: Request) -> None:
        params = item.params if isinstance(item.params, dict) else {}
        if item.method == "session/request_permission":
            options = [o for o in params.get("options") or [] if isinstance(o, dict)]
            chosen = next((o for o in options if o.get("kind") == "allow_once"), options[0] if options else None)
            selected = {"outcome": "selected", "optionId": chosen.get("optionId")} if chosen is not None else None
            reply = result_message(item.id, {"outcome": selected or {"outcome": "cancelled"}})
        elif item.method == "elicitation/create":
            reply = result_message(item.id, {"action": "decline"})
        else:
            reply = error_message(item.id, -32601, f"Method not found: the conformance checker offers no {item.method}")
        self.log.add(self.name, ">", reply)
        with contextlib.suppress(TransportError, asyncio.TimeoutError):
            await asyncio.wait_for(self.transport.send(reply), self.timeout)

    def _end(self, reason: str) -> None:
        if self.closed_reason is None:
            self.closed_reason = reason
        self._changed.set()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(CheckFailed(f"link {self.name} ended: {reason}"))


def update_of(message: dict[str, Any], session_id: str | None = None) -> dict[str, Any] | None:
    """The ``update`` of a ``session/update`` notification (about ``session_id``, when given), else ``None``."""
    if message.get("method") != "session/update" or "id" in message:
        return None
    params = message.get("params")
    if not isinstance(params, dict) or (session_id is not None and params.get("sessionId") != session_id):
        return None
    update = params.get("update")
    return update if isinstance(update, dict) else None


def _answer(request: dict[str, Any], reply: dict[str, Any]) -> Answer:
    if "error" in reply and isinstance(reply.get("error"), dict):
        error = reply["error"]
        code = error.get("code")
        return Answer(
            request,
            reply,
            code=code if isinstance(code, int) and not isinstance(code, bool) else -1,
            error_text=str(error.get("message", "")),
            data=error.get("data"),
        )
    return Answer(request, reply, result=reply.get("result"))
