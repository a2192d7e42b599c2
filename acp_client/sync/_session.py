"""The blocking session handle: :class:`SyncSessionHandle`."""

from __future__ import annotations

import concurrent.futures
import copy
from collections.abc import Awaitable, Iterable
from typing import Any, Protocol, TypeVar

from ..client import SessionHandle
from ..config import USE_CLIENT_DEFAULT, UseClientDefault
from ..state import PromptResult
from ..transcript import Transcript
from ..types import ContentBlock, Session, SessionConfigOption

__all__ = ["SyncSessionHandle"]

T = TypeVar("T")

Timeout = float | None | UseClientDefault


class _Owner(Protocol):
    """What a handle needs of its :class:`~acp_client.sync.SyncAcpClient`."""

    def _run(self, method: str, awaitable: Awaitable[T], timeout: Timeout) -> T: ...

    def prompt(
        self, session_id: str, prompt: str | ContentBlock | Iterable[ContentBlock], *, timeout: Timeout = ...
    ) -> PromptResult: ...

    def prompt_async(
        self, session_id: str, prompt: str | ContentBlock | Iterable[ContentBlock], *, timeout: Timeout = ...
    ) -> concurrent.futures.Future[PromptResult]: ...

    def forget_session(self, session_id: str, *, timeout: Timeout = ...) -> None: ...


class SyncSessionHandle:
    """A blocking handle on one session (see :class:`~acp_client.client.SessionHandle`). It follows
    the session across recoveries: after a new-session recovery :attr:`session_id` is the new id."""

    def __init__(self, owner: _Owner, handle: SessionHandle) -> None:
        self._owner = owner
        self._handle = handle

    def __repr__(self) -> str:
        return f"<SyncSessionHandle {self.session_id}>"

    @property
    def session_id(self) -> str:
        """The current session id."""
        return self._handle.session_id

    @property
    def record(self) -> Session:
        """The latest :class:`~acp_client.types.Session` record."""
        return self._handle.record

    @property
    def abandoned(self) -> bool:
        """Whether recovery gave up on this session."""
        return self._handle.abandoned

    @property
    def turn_running(self) -> bool:
        return self._handle.turn_running

    @property
    def cwd(self) -> str:
        """The working directory the session was opened with."""
        return self._handle.cwd

    @property
    def endpoint(self) -> str | None:
        """With several endpoints: the name of the instance the session lives on now."""
        return self._handle.endpoint

    @property
    def transcript(self) -> Transcript:
        """A snapshot (a copy) of the conversation so far, taken on the loop thread.

        Raises:
            LoopThreadError: Read on the loop thread (use :attr:`SessionHandle.transcript` there).
            ClientClosed: The client is not connected, or is closed.
        """
        return self._owner._run("transcript", self._snapshot(), USE_CLIENT_DEFAULT)

    async def _snapshot(self) -> Transcript:
        return copy.deepcopy(self._handle.transcript)

    def prompt(self, prompt: str | ContentBlock | Iterable[ContentBlock], *, timeout: Timeout = None) -> PromptResult:
        """Run one turn and block until it ends (no time limit by default; see
        :meth:`SyncAcpClient.prompt`)."""
        return self._owner.prompt(self.session_id, prompt, timeout=timeout)

    def prompt_async(
        self, prompt: str | ContentBlock | Iterable[ContentBlock], *, timeout: Timeout = None
    ) -> concurrent.futures.Future[PromptResult]:
        """Start a turn without blocking (see :meth:`SyncAcpClient.prompt_async`)."""
        return self._owner.prompt_async(self.session_id, prompt, timeout=timeout)

    def cancel(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """Ask the agent to end the running turn."""
        self._owner._run("session/cancel", self._handle.cancel(), timeout)

    def session_status(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> Session:
        """Probe ``session/status``."""
        return self._owner._run("session/status", self._handle.session_status(), timeout)

    def close_session(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """``session/close``: end the session on the agent and stop tracking it."""
        self._owner._run("session/close", self._handle.close_session(), timeout)

    def forget_session(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """Stop tracking the session; nothing is sent."""
        self._owner.forget_session(self._handle.session_id, timeout=timeout)

    def set_mode(self, mode_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """``session/set_mode``."""
        self._owner._run("session/set_mode", self._handle.set_mode(mode_id), timeout)

    def set_model(self, model_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> None:
        """``session/set_model``."""
        self._owner._run("session/set_model", self._handle.set_model(model_id), timeout)

    def set_config_option(
        self, config_id: str, value: Any, *, type: str | None = None, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> tuple[SessionConfigOption, ...]:
        """``session/set_config_option``; every option with its new value."""
        coro = self._handle.set_config_option(config_id, value, type=type)
        return self._owner._run("session/set_config_option", coro, timeout)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SyncSessionHandle) and other._handle == self._handle

    def __hash__(self) -> int:
        return hash(self._handle)
