"""What a check is given (:class:`CheckContext`) and what it gives back (:class:`Verdict`)."""

from __future__ import annotations

import uuid
from typing import Any, Literal

import attrs

from ._link import CheckFailed, Link, WireEntry, WireLog
from ._protocol import Handshake, Turn, finish_prompt, new_session, start_prompt
from ._shared import RunState, open_initialized
from ._target import AgentHost, Target

Status = Literal["pass", "fail", "warn", "skip"]


@attrs.frozen
class Settings:
    """The run's options (the CLI's flags).

    Attributes:
        target: The agent under check.
        protocol_version: The version proposed in ``initialize``.
        cwd: The ``cwd`` of every session the checker creates.
        timeout: Seconds to wait for one answer or one turn.
        prompt: The text of an ordinary turn.
        cancel_prompt: A prompt whose turn lasts long enough to be cancelled.
        tool_prompt: A prompt that makes the agent call a tool (``load.message-ids`` then checks the
            tool call ids of a replay); ``None``: no tool turn.
        verbose: Wire excerpts for every check, passing ones included.
    """

    target: Target
    protocol_version: int = 1
    cwd: str = "."
    timeout: float = 10.0
    prompt: str = "hello"
    cancel_prompt: str = "Count slowly from 1 to 300, one number per line."
    tool_prompt: str | None = None
    verbose: bool = False


@attrs.frozen
class Verdict:
    """A check's outcome: a status, one line that says what was found, and the wire lines that show it."""

    status: Status
    finding: str
    lines: tuple[str, ...] = ()

    @property
    def evidence(self) -> str:
        return "\n".join((self.finding, *self.lines))


class Skip(Exception):
    """Raised by a check that does not apply (``skip`` with the reason)."""


class CheckContext:
    """One check's access to the agent: the run's shared link, fresh links, restarts, its own wire log.

    Args:
        handshake: What the preflight ``initialize`` found (capabilities, version).
        run: What the checks of the run share (the shared link, the scenarios run once).
    """

    def __init__(self, settings: Settings, handshake: Handshake, run: RunState) -> None:
        self.settings = settings
        self.handshake = handshake
        self.run = run
        self.log = WireLog()
        self.used_shared = False
        self.host = AgentHost(
            settings.target, self.log, timeout=settings.timeout, proposed=settings.protocol_version, first_name="B"
        )

    @property
    def version(self) -> int:
        return self.handshake.version

    @property
    def cwd(self) -> str:
        return self.settings.cwd

    @property
    def timeout(self) -> float:
        return self.settings.timeout

    def supports(self, method: str) -> bool:
        return self.handshake.supports(method)

    def capability_path(self, method: str) -> str:
        return self.handshake.response.agent_capabilities.capability_path(method, self.version)

    def require(self, method: str) -> None:
        """Raises: Skip: ``method`` is not advertised."""
        if not self.supports(method):
            where = self.capability_path(method)
            raise Skip(f"{method} is not advertised ({where})" if where else f"{method} is not advertised")

    def require_restart(self) -> None:
        """Raises: Skip: The agent cannot be restarted by the checker."""
        if not self.settings.target.can_restart:
            raise Skip("needs an agent restart: pass --restart-cmd CMD for a network target")

    @staticmethod
    def unknown_id() -> str:
        """A session id no agent ever issued."""
        return f"acp-check-unknown-{uuid.uuid4().hex}"

    async def shared_link(self) -> Link:
        """The run's shared link (its agent process reused from check to check), recording into this check's log.

        Raises:
            Inconclusive: A fresh agent did not start in time.
            CheckFailed: It could not be opened or initialized, or it speaks another version.
        """
        self.used_shared = True
        return await self.run.link(self.log, self.version)

    async def link(self) -> Link:
        """A fresh, initialized link of this check's own (for stdio: a fresh agent process).

        Raises:
            Inconclusive: The agent did not start in time.
            CheckFailed: It could not be opened or initialized, or it speaks another version.
        """
        link, handshake = await open_initialized(self.host, self.settings.protocol_version)
        if handshake.version != self.version:
            raise CheckFailed(f"this link agreed on protocol version {handshake.version}, the first on {self.version}")
        return link

    async def restart(self) -> None:
        """Restart the agent: the shared one included (stdio: every process is killed)."""
        self.run.kill()
        await self.run.retire()
        await self.host.restart()

    async def new_session(self, link: Link, *, reuse: bool = False) -> str:
        """``session/new``, then a moment until the agent is quiet: a greeting some agents send right after
        the answer, before any prompt, is no part of the first turn.

        Args:
            link: Where.
            reuse: On the shared link, take a session an earlier check created and never used, if any.
        """
        if reuse and self.run.is_shared(link) and self.run.idle_sessions:
            return self.run.idle_sessions.pop(0)
        session_id = await new_session(link, self.cwd)
        await link.settle(quiet=0.25, limit=1.0)
        return session_id

    async def turn(self, link: Link, session_id: str, text: str | None = None) -> Turn:
        pending = await start_prompt(link, session_id, text or self.settings.prompt)
        return await finish_prompt(link, self.version, pending, self.timeout)

    def mark(self) -> int:
        """A position in the wire log (for :meth:`lines`)."""
        return len(self.log.entries)

    def lines(self, start: int = 0, end: int | None = None, **kwargs: Any) -> tuple[str, ...]:
        """Rendered wire lines of this check from position ``start`` to ``end``."""
        entries: list[WireEntry] = self.log.entries[start:end]
        return tuple(self.log.excerpt(entries, **kwargs))

    def verdict(self, status: Status, finding: str, start: int = 0, end: int | None = None, **kwargs: Any) -> Verdict:
        return Verdict(status, finding, self.lines(start, end, **kwargs))

    async def aclose(self) -> None:
        await self.host.aclose()
