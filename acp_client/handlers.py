"""Answers to agent→client requests, with safe defaults.

=============================  ==============================================================
agent asks                     the client answers
=============================  ==============================================================
session/request_permission     the app's ``permission`` handler; without one: ``cancelled``
fs/read_text_file, write       only when the app passes a :class:`FileSystemPolicy`; paths must
                               be absolute and resolve (symlinks followed) under an allowed
                               root, compared by path component; only regular files are opened;
                               a write to a protected path (:data:`DEFAULT_PROTECTED_PATHS`)
                               needs the ``permission`` handler's yes; no write leaves a file
                               executable; otherwise method-not-found
terminal/*                     only when the app passes a :class:`TerminalHandler`
elicitation/create             the app's ``elicitation`` handler; without one: ``cancel``
anything else                  the app's ``extension`` handler for ``_``-prefixed methods;
                               otherwise method-not-found
=============================  ==============================================================

Handlers may be plain functions or coroutines. A handler that raises :class:`~acp_client.exceptions.RpcError` answers
with that error; any other exception is answered as an internal error (and logged), never crashing the client.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import attrs

from ._codec import from_wire, to_wire
from ._util._fs_guard import DEFAULT_PROTECTED_PATHS, is_protected, read_regular_file, write_regular_file
from ._util._logging import get_logger
from .exceptions import ConfigurationError, InvalidMessage, InvalidParams, RpcError
from .types import (
    CancelledPermissionOutcome,
    CreateElicitationRequest,
    CreateElicitationResponse,
    CreateTerminalRequest,
    CreateTerminalResponse,
    KillTerminalCommandRequest,
    PermissionOption,
    PermissionOutcome,
    ReadTextFileRequest,
    ReadTextFileResponse,
    ReleaseTerminalRequest,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SelectedPermissionOutcome,
    TerminalOutputRequest,
    TerminalOutputResponse,
    ToolCallLocation,
    ToolCallPermissionSubject,
    ToolCallUpdate,
    WaitForTerminalExitRequest,
    WaitForTerminalExitResponse,
    WriteTextFileRequest,
)

__all__ = [
    "DEFAULT_PROTECTED_PATHS",
    "ClientHandlers",
    "ElicitationHandler",
    "FileSystemPolicy",
    "PermissionHandler",
    "TerminalHandler",
]

logger = get_logger(__name__)

T = TypeVar("T")

#: Decides a permission request: return the outcome (or a coroutine resolving to it).
PermissionHandler = Callable[[RequestPermissionRequest], "PermissionOutcome | Awaitable[PermissionOutcome]"]
#: Answers an elicitation request.
ElicitationHandler = Callable[
    [CreateElicitationRequest], "CreateElicitationResponse | Awaitable[CreateElicitationResponse]"
]
#: Handles a ``_``-prefixed extension request: ``(method, params) -> result``.
ExtensionHandler = Callable[[str, Any], Awaitable[Any]]

#: Option ids of the permission request for a write to a protected path.
_ALLOW_WRITE = "acp-client-allow-write"
_REJECT_WRITE = "acp-client-reject-write"


class TerminalHandler(Protocol):
    """What the app implements to let the agent run commands (``terminal/*``)."""

    async def create(self, request: CreateTerminalRequest) -> CreateTerminalResponse: ...

    async def output(self, request: TerminalOutputRequest) -> TerminalOutputResponse: ...

    async def wait_for_exit(self, request: WaitForTerminalExitRequest) -> WaitForTerminalExitResponse: ...

    async def kill(self, request: KillTerminalCommandRequest) -> None: ...

    async def release(self, request: ReleaseTerminalRequest) -> None: ...


def _to_roots(value: Sequence[str | os.PathLike[str]] | None) -> tuple[Path, ...] | None:
    roots = None if value is None else tuple(Path(item) for item in value)
    for root in roots or ():
        if not root.is_absolute():
            raise ConfigurationError(f"file-system root must be absolute: {root}")
    return roots


def _to_patterns(value: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(item, str) for item in value):
        raise ConfigurationError("protected_paths must be a sequence of pattern strings")
    return tuple(value)


@attrs.frozen
class FileSystemPolicy:
    """Lets the agent read and/or write text files under allowed roots.

    Attributes:
        read: Answer ``fs/read_text_file``.
        write: Answer ``fs/write_text_file``.
        roots: The allowed roots. ``None`` (the default) means each session's own roots: its ``cwd`` and additional
            directories. An empty tuple allows nothing.
        max_read_bytes: The largest file ``fs/read_text_file`` will return.
        protected_paths: Paths whose writes always ask the app's ``permission`` handler (refused without one), even with
            ``write`` on. :data:`DEFAULT_PROTECTED_PATHS` (VCS hooks, shell start-up files, editor, CI and
            package-manager configs, ...; pattern syntax in :mod:`acp_client._util._fs_guard`) extends as
            ``(*DEFAULT_PROTECTED_PATHS, "deploy/**")``.
    """

    read: bool = True
    write: bool = False
    roots: tuple[Path, ...] | None = attrs.field(default=None, converter=_to_roots)
    max_read_bytes: int = 16 * 1024 * 1024
    protected_paths: tuple[str, ...] = attrs.field(default=DEFAULT_PROTECTED_PATHS, converter=_to_patterns)

    def is_protected(self, path: Path) -> bool:
        """Whether a write to the resolved ``path`` needs the user's permission."""
        return is_protected(path, self.protected_paths)

    def resolve(self, path: str, roots: Sequence[Path], *, for_write: bool) -> Path:
        """The real path ``path`` names, if the policy allows it.

        Raises:
            InvalidParams: Not absolute, contains NUL, missing (for a read), or outside every root.
        """
        if not isinstance(path, str) or "\x00" in path:
            raise InvalidParams("path must be a string without NUL")
        candidate = Path(path)
        if not candidate.is_absolute():
            raise InvalidParams(f"path must be absolute: {path!r}")
        try:
            if for_write and not candidate.exists() and not candidate.is_symlink():
                real = candidate.parent.resolve(strict=True) / candidate.name
            else:
                real = candidate.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise InvalidParams(f"cannot resolve {path!r}: {exc.__class__.__name__}") from exc
        for root in roots:
            try:
                real_root = Path(root).resolve(strict=True)
            except (OSError, RuntimeError):
                continue
            if real == real_root or real_root in real.parents:
                return real
        raise InvalidParams(f"path is outside the allowed roots: {path!r}", {"path": path})


def _handler(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not callable(value):
        raise ConfigurationError(
            f"ClientHandlers.{attribute.name} must be a function (plain or async) or None, "
            f"not {type(value).__name__} ({value!r})"
        )


#: The request type of each ``terminal/<name>`` method, answered by the :class:`TerminalHandler` method ``<name>``.
_TERMINAL: dict[str, type[Any]] = {
    "create": CreateTerminalRequest,
    "output": TerminalOutputRequest,
    "wait_for_exit": WaitForTerminalExitRequest,
    "kill": KillTerminalCommandRequest,
    "release": ReleaseTerminalRequest,
}


def _terminal(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    missing = [name for name in _TERMINAL if not callable(getattr(value, name, None))]
    if missing:
        raise ConfigurationError(
            f"ClientHandlers.terminal must implement TerminalHandler ({', '.join(_TERMINAL)}); "
            f"{type(value).__name__} lacks {', '.join(missing)}"
        )


def _file_system(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, FileSystemPolicy):
        raise ConfigurationError(
            f"ClientHandlers.file_system must be a FileSystemPolicy or None, not {type(value).__name__} ({value!r})"
        )


@attrs.frozen
class ClientHandlers:
    """Everything the client answers on the app's behalf. Unset means the safe default.

    Attributes:
        permission: Decides ``session/request_permission`` (default: ``cancelled``).
        file_system: Enables ``fs/*`` under a policy (default: not offered).
        terminal: Enables ``terminal/*`` (default: not offered).
        elicitation: Answers ``elicitation/create`` (default: ``cancel``; not advertised).
        extension: Handles ``_``-prefixed extension requests (default: method-not-found).

    Raises:
        ConfigurationError: A handler that is not a function (``permission="allow"``), a ``file_system`` that is not a
            :class:`FileSystemPolicy`, or a ``terminal`` without the :class:`TerminalHandler` methods — refused here,
            not at the agent's first request.
    """

    permission: PermissionHandler | None = attrs.field(default=None, validator=_handler)
    file_system: FileSystemPolicy | None = attrs.field(default=None, validator=_file_system)
    terminal: TerminalHandler | None = attrs.field(default=None, validator=_terminal)
    elicitation: ElicitationHandler | None = attrs.field(default=None, validator=_handler)
    extension: ExtensionHandler | None = attrs.field(default=None, validator=_handler)


async def _maybe_await(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


class RequestRouter:
    """Routes each agent→client request to the app's handlers (internal). ``session_roots`` gives a session's roots
    (its cwd and additional directories) for a policy without roots of its own."""

    def __init__(
        self,
        handlers: ClientHandlers,
        *,
        session_roots: Callable[[str], Sequence[Path]],
        protocol_version: Callable[[], int],
    ) -> None:
        self._handlers = handlers
        self._session_roots = session_roots
        self._version = protocol_version
        self._permissions: dict[str, set[asyncio.Task[Any]]] = {}
        self._cancelled: set[asyncio.Task[Any]] = set()
        self._write_asks = itertools.count(1)

    def cancel_session(self, session_id: str) -> None:
        """The app cancelled the session's turn: answer its pending permission requests ``cancelled`` (as the protocol
        requires)."""
        for task in self._permissions.pop(session_id, set()):
            if not task.done():
                self._cancelled.add(task)
                task.cancel()

    async def _ask_permission(self, request: RequestPermissionRequest) -> PermissionOutcome:
        handler = self._handlers.permission
        if handler is None:
            return CancelledPermissionOutcome()
        task: asyncio.Task[PermissionOutcome] = asyncio.ensure_future(_maybe_await(handler(request)))
        self._permissions.setdefault(request.session_id, set()).add(task)
        try:
            try:
                outcome = await asyncio.shield(task)
            except asyncio.CancelledError:
                if task not in self._cancelled:
                    task.cancel()
                    raise
            if task in self._cancelled:  # even if the handler ignored its cancellation and answered
                return CancelledPermissionOutcome()
            return outcome
        finally:
            self._cancelled.discard(task)
            waiting = self._permissions.get(request.session_id, set())
            waiting.discard(task)
            if not waiting:
                self._permissions.pop(request.session_id, None)

    def _decode(self, cls: type[T], params: Any) -> T:
        try:
            return from_wire(cls, params, protocol_version=self._version())
        except InvalidMessage as exc:
            raise InvalidParams(str(exc)) from exc

    def _encode(self, value: Any) -> Any:
        return to_wire(value, protocol_version=self._version())

    async def __call__(self, method: str, params: Any) -> Any:
        handlers = self._handlers
        if method == "session/request_permission":
            request = self._decode(RequestPermissionRequest, params)
            outcome = await self._ask_permission(request)
            return self._encode(RequestPermissionResponse(outcome=outcome))
        if method.startswith("fs/") and handlers.file_system is not None:
            return await self._file_system(method, params, handlers.file_system)
        if method.startswith("terminal/") and handlers.terminal is not None:
            return await self._terminal(method, params, handlers.terminal)
        if method == "elicitation/create":
            elicitation = self._decode(CreateElicitationRequest, params)
            if handlers.elicitation is None:
                return {"action": {"action": "cancel"}} if self._version() >= 2 else {"action": "cancel"}
            return self._encode(await _maybe_await(handlers.elicitation(elicitation)))
        if method.startswith("_") and handlers.extension is not None:
            return await handlers.extension(method, params)
        raise RpcError.method_not_found(method)

    async def _file_system(self, method: str, params: Any, policy: FileSystemPolicy) -> Any:
        if method == "fs/read_text_file" and policy.read:
            read = self._decode(ReadTextFileRequest, params)
            roots = policy.roots if policy.roots is not None else self._session_roots(read.session_id)
            content = await asyncio.to_thread(_confined_read, policy, read, roots)
            return self._encode(ReadTextFileResponse(content=content))
        if method == "fs/write_text_file" and policy.write:
            write = self._decode(WriteTextFileRequest, params)
            roots = policy.roots if policy.roots is not None else self._session_roots(write.session_id)
            path = await asyncio.to_thread(policy.resolve, write.path, roots, for_write=True)
            if policy.is_protected(path):
                await self._confirm_protected_write(write, path)
            await asyncio.to_thread(_confined_write, policy, write, roots, path)
            return {}
        raise RpcError.method_not_found(method)

    async def _confirm_protected_write(self, write: WriteTextFileRequest, path: Path) -> None:
        """Ask the app's permission handler about a write to a protected path; raise ``InvalidParams`` unless it picks
        "allow"."""
        title = f"Write to {path} (a configuration or hook file that can run code later)"
        tool_call = ToolCallUpdate(
            tool_call_id=f"acp-client-protected-write-{next(self._write_asks)}",
            title=title,
            tool_kind="edit",
            status="pending",
            locations=(ToolCallLocation(path=str(path)),),
            raw_input={"path": write.path},
        )
        request = RequestPermissionRequest(
            session_id=write.session_id,
            tool_call=tool_call,
            subject=ToolCallPermissionSubject(tool_call=tool_call) if self._version() >= 2 else None,
            options=(
                PermissionOption(option_id=_ALLOW_WRITE, name="Allow this write", kind="allow_once"),
                PermissionOption(option_id=_REJECT_WRITE, name="Reject", kind="reject_once"),
            ),
            title=title,
        )
        outcome = await self._ask_permission(request)
        if isinstance(outcome, SelectedPermissionOutcome) and outcome.option_id == _ALLOW_WRITE:
            logger.info("the app allowed a write to protected path %s", path)
            return
        logger.warning("refused the agent's write to protected path %s", path)
        raise InvalidParams(f"writing {write.path!r} needs the user's permission, not given", {"path": write.path})

    async def _terminal(self, method: str, params: Any, terminal: TerminalHandler) -> Any:
        name = method.removeprefix("terminal/")
        if name not in _TERMINAL:
            raise RpcError.method_not_found(method)
        answer = await getattr(terminal, name)(self._decode(_TERMINAL[name], params))
        return {} if name in ("kill", "release") else self._encode(answer)


def _confined_read(policy: FileSystemPolicy, request: ReadTextFileRequest, roots: Sequence[Path]) -> str:
    """Resolve and read in a worker thread (file I/O never blocks the event loop)."""
    cap = policy.max_read_bytes
    path = policy.resolve(request.path, roots, for_write=False)
    data = read_regular_file(path, cap)  # a FIFO or device could block or never end: refused
    if len(data) > cap:
        raise InvalidParams(f"file is larger than {cap} bytes")
    # What read_text() gave before the read was bounded: universal newlines.
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    if request.line is None and request.limit is None:
        return text
    lines = text.splitlines(keepends=True)
    start = max(0, (request.line or 1) - 1)
    end = len(lines) if request.limit is None else start + max(0, request.limit)
    return "".join(lines[start:end])


def _confined_write(
    policy: FileSystemPolicy, request: WriteTextFileRequest, roots: Sequence[Path], checked: Path
) -> None:
    """Write in a worker thread, to the path checked (and maybe approved) before."""
    path = policy.resolve(request.path, roots, for_write=True)
    if path != checked:  # moved under us while the user was asked: not what was approved
        raise InvalidParams(f"the path changed while the write was pending: {request.path!r}")
    write_regular_file(path, request.content)
