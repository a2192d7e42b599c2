"""The library logger is quiet: an app that configures no logging sees nothing on stderr.

``acp_client`` puts a ``NullHandler`` on its ``"acp_client"`` logger, as libraries do, so Python's
last-resort handler never prints the client's warnings and tracebacks: what the app should see
reaches it through callbacks and exceptions. Checked in a fresh interpreter that configures no
logging and goes through the three loudest events: an agent killed by SIGKILL, an invalid JSON
frame from the agent, and an app handler that raises.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import acp_client

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
