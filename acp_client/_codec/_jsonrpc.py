"""JSON-RPC 2.0 framing: decoding, classification and encoding of messages. Pure: no I/O, no asyncio.

Transports call :func:`decode_frame` on each inbound frame and :func:`encode` on each outbound
message; the connection calls :func:`classify` to tell requests, notifications and responses
apart. Every failure is a :class:`~acp_client.exceptions.MalformedFrame` carrying an excerpt of
the frame, so a broken frame is always reported, never dropped silently.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

import attrs

from ..exceptions import MalformedFrame

RequestId: TypeAlias = int | str
#: A decoded JSON-RPC message (an object) or a batch (a non-empty array of objects).
Message: TypeAlias = dict[str, Any] | list[Any]

_EXCERPT_CHARS: Final = 200
_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_ascii_encoder = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), allow_nan=False)
_SURROGATE = re.compile("[\ud800-\udfff]")
_decode = json.JSONDecoder().decode
#: Built once: an ``X | Y`` written inside ``isinstance()`` is built again on every call.
_BINARY: Final = (bytes, bytearray, memoryview)

# msgspec, when installed (the ``speed`` extra), decodes frames several times faster. It is only a
# fast path for objects: anything it refuses is decoded again by the standard library, so what is
# accepted and every error raised stay exactly the standard library's (tests pin this).


def _load_fast_decoder(data: str | bytes) -> Any:
    """msgspec's stand-in until the first frame, which imports it (msgspec brings decimal, uuid and
    datetime: a tenth of the package's import time); raises ImportError, once, without msgspec."""
    global _fast_loads  # noqa: PLW0603  # the module-level fast path replaces its stand-in once
    try:
        from msgspec.json import Decoder
    except ImportError:  # pragma: no cover - depends on the environment
        _fast_loads = None
        raise
    _fast_loads = Decoder().decode
    return _fast_loads(data)


_fast_loads: Callable[[str | bytes], Any] | None = _load_fast_decoder


def excerpt(data: str | bytes | Any) -> str:
    """A short printable start of ``data`` for error messages and logs."""
    if isinstance(data, _BINARY):
        return bytes(data[:_EXCERPT_CHARS]).decode("utf-8", "replace")
    return (data if isinstance(data, str) else repr(data))[:_EXCERPT_CHARS]


def decode_frame(data: str | bytes) -> Message:
    """Decode one frame (bytes as UTF-8) into a message (a dict) or a batch (a list).

    Batch members are not checked here (:func:`classify` checks each), and an empty batch is
    returned as ``[]`` (the receiver answers it with one ``Invalid Request``).

    Raises:
        MalformedFrame: Invalid UTF-8 or JSON, JSON nested too deep, a number too long to parse,
            or a value that is neither an object nor an array.
    """
    if _fast_loads is not None:
        try:
            fast = _fast_loads(data)
        except Exception:  # the standard library below decides what the error is
            fast = None
        if type(fast) is dict:
            return fast
    try:
        if isinstance(data, _BINARY):
            data = bytes(data).decode("utf-8")
        value = _decode(data)
    except UnicodeDecodeError as exc:
        raise MalformedFrame(f"frame is not valid UTF-8: {exc.reason}", excerpt=excerpt(data)) from exc
    except json.JSONDecodeError as exc:
        raise MalformedFrame(f"invalid JSON: {exc.msg} at {exc.pos}", excerpt=excerpt(data)) from exc
    except RecursionError as exc:
        raise MalformedFrame("JSON nested too deeply", excerpt=excerpt(data)) from exc
    except ValueError as exc:  # e.g. an integer beyond sys.get_int_max_str_digits()
        raise MalformedFrame(f"unreadable JSON value: {exc}", excerpt=excerpt(data)) from exc
    if isinstance(value, dict | list):
        return value
    raise MalformedFrame(
        f"a JSON-RPC message must be an object or an array, got {type(value).__name__}", excerpt=excerpt(data)
    )


def encode(message: Message) -> str:
    """Encode a message compactly (UTF-8 kept, no NaN/Infinity).

    A lone surrogate (a peer may send one as a ``\\udc80``-style escape, e.g. in a request id the reply
    echoes) cannot be written as UTF-8; a message holding one is encoded with ASCII escapes instead.
    """
    text = _encoder.encode(message)
    if _SURROGATE.search(text) is not None:
        return _ascii_encoder.encode(message)
    return text


@attrs.frozen(slots=True)
class Request:
    """A call that expects an answer."""

    id: RequestId
    method: str
    params: Any = None


@attrs.frozen(slots=True)
class Notification:
    """A call without an id: no answer is sent."""

    method: str
    params: Any = None


@attrs.frozen(slots=True)
class Response:
    """A successful answer."""

    id: RequestId
    result: Any


@attrs.frozen(slots=True)
class ErrorResponse:
    """An error answer. ``id`` is ``None`` when the peer could not tell which request failed."""

    id: RequestId | None
    code: int
    message: str
    data: Any = None


Classified: TypeAlias = Request | Notification | Response | ErrorResponse


def _is_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def classify(message: Any) -> Classified:
    """Tell what kind of JSON-RPC message ``message`` is, checking it on the way.

    Raises:
        MalformedFrame: Not an object, ``jsonrpc`` missing or not ``"2.0"``, a bad id, a
            non-string method, params that are not an object or array, or a response that has
            both or neither of ``result`` and ``error``.
    """
    if not isinstance(message, dict):
        raise MalformedFrame(
            f"a JSON-RPC message must be an object, got {type(message).__name__}",
            excerpt=excerpt(message),
        )
    if message.get("jsonrpc") != "2.0":
        raise MalformedFrame('"jsonrpc" must be "2.0"', excerpt=excerpt(message))
    method = message.get("method")
    if method is not None:
        if not isinstance(method, str):
            raise MalformedFrame('"method" must be a string', excerpt=excerpt(message))
        params = message.get("params")
        if params is not None and not isinstance(params, dict | list):
            raise MalformedFrame('"params" must be an object or an array', excerpt=excerpt(message))
        if "id" not in message:
            return Notification(method, params)
        request_id = message["id"]
        if not _is_id(request_id):
            raise MalformedFrame('a request "id" must be a string or an integer', excerpt=excerpt(message))
        return Request(request_id, method, params)
    if "id" not in message:
        raise MalformedFrame("neither a request, a notification nor a response", excerpt=excerpt(message))
    request_id = message["id"]
    has_result = "result" in message
    error = message.get("error")
    if has_result == (error is not None):
        raise MalformedFrame('a response needs exactly one of "result" and "error"', excerpt=excerpt(message))
    if has_result:
        if not _is_id(request_id):
            raise MalformedFrame('a response "id" must be a string or an integer', excerpt=excerpt(message))
        return Response(request_id, message["result"])
    if request_id is not None and not _is_id(request_id):
        raise MalformedFrame('a response "id" must be a string, an integer or null', excerpt=excerpt(message))
    if not isinstance(error, dict):
        raise MalformedFrame('"error" must be an object', excerpt=excerpt(message))
    code = error.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        raise MalformedFrame('"error.code" must be an integer', excerpt=excerpt(message))
    text = error.get("message")
    return ErrorResponse(request_id, code, text if isinstance(text, str) else "", error.get("data"))


def notification_message(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A notification object; ``params`` is omitted when ``None``."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def request_message(request_id: RequestId, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A request object; ``params`` is omitted when ``None``."""
    return {"jsonrpc": "2.0", "id": request_id, **notification_message(method, params)}


def result_message(request_id: RequestId, result: Any) -> dict[str, Any]:
    """A success response. ACP results are objects, so ``None`` is sent as ``{}``."""
    return {"jsonrpc": "2.0", "id": request_id, "result": {} if result is None else result}


def error_message(request_id: RequestId | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """An error response; ``data`` is omitted when ``None``."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


class IdAllocator:
    """Hands out increasing integer request ids, starting at 0."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = 0

    def __call__(self) -> int:
        value = self._next
        self._next = value + 1
        return value
