"""The library logger is quiet: an app that configures no logging sees nothing on stderr; and what
it logs shows agent text as printable text.

``acp_client`` puts a ``NullHandler`` on its ``"acp_client"`` logger, as libraries do, so Python's
last-resort handler never prints the client's warnings and tracebacks: what the app should see
reaches it through callbacks and exceptions. Checked in a fresh interpreter that configures no
logging and goes through the three loudest events: an agent killed by SIGKILL, an invalid JSON
frame from the agent, and an app handler that raises.
"""

from __future__ import annotations

import logging
import shlex
import subprocess
import sys
import textwrap
import unicodedata

import pytest

import acp_client
from acp_client import AcpClient, RpcError
from acp_client.testing.reference_agent import ESCAPES
from tests._harness import Harness
from tests._support import FAST_RETRY, eventually

# The agent writes one line that is not JSON before it starts serving (again after each restart).
_AGENT = textwrap.dedent(
    """
    import sys
    sys.stdout.write("this is not json\\n")
    sys.stdout.flush()
    from acp_client.testing.reference_agent.__main__ import main
    sys.exit(main(["--stdio"]))
    """
)

_APP = textwrap.dedent(
    """
    import asyncio, os, shlex, signal, sys
    from acp_client import AcpClient, Callbacks, ClientHandlers, RetryPolicy, State

    AGENT = sys.argv[1]
    errors = []

    def refuse(request):
        raise ValueError("the app's handler is broken")

    async def main():
        retry = RetryPolicy(initial_delay=0.05, max_delay=0.2, jitter=False, max_elapsed=20)
        connected = asyncio.Event()
        def state_changed(state):
            if state.state is State.CONNECTED:
                connected.set()
        callbacks = Callbacks(on_protocol_error=errors.append, on_state_change=state_changed)
        command = "stdio:" + shlex.join([sys.executable, "-c", AGENT])
        async with AcpClient(command, retry=retry, callbacks=callbacks,
                             handlers=ClientHandlers(permission=refuse)) as client:
            session = await client.new_session(cwd=os.getcwd())
            await session.prompt("/permission")          # the handler raises: answered -32603
            pid = client.transport_info.pid
            connected.clear()
            os.kill(pid, signal.SIGKILL)                 # the agent dies; the client restarts it
            await asyncio.wait_for(connected.wait(), 20)
            assert client.transport_info.pid != pid
            await session.prompt("hello again")
        assert errors, "the invalid frame reached on_protocol_error"
        print("DONE", len(errors))

    asyncio.run(main())
    """
)


def test_the_package_logger_has_a_null_handler() -> None:
    handlers = logging.getLogger("acp_client").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)
    assert acp_client.__name__ == "acp_client"


def test_an_app_without_logging_sees_nothing_on_stderr() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _APP, _AGENT], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("DONE"), done.stdout
    assert done.stderr == ""


# --------------------------------------------------------------------------------------------
# Agent text in the library's records is shown as printable text


def _unsafe(text: str) -> list[str]:
    return [
        f"U+{ord(char):04X}"
        for char in text
        if char not in "\t\u200c\u200d" and unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp")
    ]


def _formatted(records: list[logging.LogRecord]) -> list[str]:
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    # The client's records (the reference agent's own, under acp_client.testing, are the hostile side's).
    mine = [r for r in records if r.name.startswith("acp_client") and not r.name.startswith("acp_client.testing")]
    return [formatter.format(record) for record in mine]


async def test_the_agents_stderr_is_logged_as_printable_text(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="acp_client.agent.stderr")
    command = [sys.executable, "-m", "acp_client.testing.reference_agent", "--stdio", "--fault", "escapes"]
    async with AcpClient("stdio:" + shlex.join(command), retry=FAST_RETRY):

        def stderr() -> list[str]:
            return [r.getMessage() for r in caplog.records if r.name == "acp_client.agent.stderr"]

        await eventually(lambda: any("pwned-title" in line for line in stderr()))
    line = next(line for line in stderr() if "pwned-title" in line)
    assert _unsafe(line) == [] and "\n" not in line
    assert "␛]52;c;cHduZWQ=␇" in line and "\\u202etxt.exe" in line


async def test_session_ids_and_agent_errors_in_records_are_printable(caplog: pytest.LogCaptureFixture) -> None:
    # Session ids, error messages and every other text of a hostile agent, through a session's
    # life: a turn, a failed turn, a drop (resume), a restart (replay), an eviction (new session).
    caplog.set_level(logging.DEBUG, logger="acp_client")
    async with Harness(faults=["escapes", "escape-ids"]) as h:
        session = await h.client.new_session(cwd="/work/project")
        assert ESCAPES in session.session_id
        await h.clock.run(session.prompt("hello"))
        with pytest.raises(RpcError):
            await h.clock.run(session.prompt("/fail"))
        await h.drop_and_recover()
        h.agent.lose_memory()
        await h.drop_and_recover()
        h.agent.evict(session.session_id)
        await h.drop_and_recover()
    lines = _formatted(caplog.records)
    assert any("pwned-title" in line for line in lines), "the records carry agent text"
    for line in lines:
        assert _unsafe(line) == [], line
        assert "\n" not in line, line


def test_a_traceback_with_agent_text_is_printable() -> None:
    from acp_client._util._logging import get_logger

    logger = get_logger("acp_client.test_logging")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        try:
            raise ValueError(ESCAPES)
        except ValueError:
            logger.exception("the agent said %s", ESCAPES)
    finally:
        logger.removeHandler(handler)
    [record] = records
    text = logging.Formatter().format(record)
    assert _unsafe(text.replace("\n", "")) == [] and "ValueError: ␛]52;c;" in text


def test_numbers_keep_their_formats_and_text_is_shown_printable() -> None:
    from decimal import Decimal

    from acp_client._util._logging import get_logger

    logger = get_logger("acp_client.test_logging")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        logger.warning("%d %.1f %.2f %s %r", 3, 2.5, Decimal("1.5"), "a\x1b[2Jb\nc", "\u202e")
        logger.warning("%(who)s said %(what)s", {"who": "agent\x9b", "what": 7})
    finally:
        logger.removeHandler(handler)
    assert records[0].getMessage() == "3 2.5 1.50 a␛[2Jb c '\\\\u202e'"
    assert records[1].getMessage() == "agent\\x9b said 7"
