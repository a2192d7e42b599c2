"""Hostile agents over stdio: garbage lines, raw bytes, an agent exiting mid-request or during
initialize, one that never answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_client import AcpClient, AcpError, Callbacks, ClientClosed, ConnectionLost, RequestTimeout, State, Timeouts
from acp_client.exceptions import MalformedFrame
from acp_client.transports import AgentExited, TransportClosed
from tests._support import eventually, within
from tests.interop._hostile import stdio_endpoint

# --------------------------------------------------------------------------------------------------
# stdio specifics


async def test_stdio_garbage_before_initialize_is_reported(tmp_path: Path) -> None:
    errors: list[AcpError] = []
    endpoint = stdio_endpoint(tmp_path / "log", "--garbage-at-start")
    async with AcpClient(endpoint, retry=None, callbacks=Callbacks(on_protocol_error=errors.append)) as client:
        assert client.agent_info is not None and client.agent_info.name == "hostile"
        assert len(errors) == 3 and all(isinstance(e, MalformedFrame) for e in errors)
        assert await within(client.request("_hostile", {"tag": "t"})) == {"echo": "t"}


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("\xff\xfe invalid utf-8\n", id="invalid-utf8"),
        pytest.param("\x00\x00\x00\n", id="nul-bytes"),
        pytest.param('{"jsonrpc": "2.0", "method": "x/n"}\r\n', id="crlf-is-fine"),
        pytest.param("\n\n   \n", id="blank-lines"),
    ],
)
async def test_stdio_raw_lines(tmp_path: Path, raw: str) -> None:
    errors: list[AcpError] = []
    async with AcpClient(
        stdio_endpoint(tmp_path / "log"), retry=None, callbacks=Callbacks(on_protocol_error=errors.append)
    ) as client:
        assert await within(client.request("_hostile", {"before": [{"raw": raw}], "tag": "t"})) == {"echo": "t"}
        expected = [MalformedFrame] if raw.startswith(("\xff", "\x00")) else []
        assert [type(e) for e in errors] == expected
        assert await within(client.request("_hostile", {"tag": "next"})) == {"echo": "next"}


async def test_stdio_agent_exiting_mid_request(tmp_path: Path) -> None:
    errors: list[AcpError] = []
    states: list[State] = []
    async with AcpClient(
        stdio_endpoint(tmp_path / "log"),
        retry=None,
        callbacks=Callbacks(on_protocol_error=errors.append, on_state_change=lambda s: states.append(s.state)),
    ) as client:
        with pytest.raises(ConnectionLost) as caught:
            await within(client.request("_hostile", {"before": ["last words {"], "exit": 3}))
        assert caught.value.may_have_executed is True
        cause = caught.value.cause
        assert isinstance(cause, AgentExited), cause
        assert cause.exit_code == 3
        assert [type(e) for e in errors] == [MalformedFrame]  # the garbage it printed before dying
        await eventually(lambda: client.state.state is State.FAILED, what="the failed state")
        assert State.RECONNECTING not in states  # retry=None: no reconnect
        with pytest.raises(ClientClosed):
            await within(client.request("_hostile", {"tag": "after"}))


async def test_stdio_agent_exiting_during_initialize(tmp_path: Path) -> None:
    client = AcpClient(stdio_endpoint(tmp_path / "log", "--exit-on-initialize", "5"), retry=None)
    with pytest.raises(TransportClosed) as caught:
        await within(client.connect())
    assert "exited with code 5" in str(caught.value)
    lost = caught.value.__cause__
    assert isinstance(lost, ConnectionLost) and isinstance(lost.cause, AgentExited)
    assert lost.cause.exit_code == 5
    assert client.state.state is State.FAILED
    await client.aclose()


async def test_stdio_agent_that_never_answers_initialize_times_out(tmp_path: Path) -> None:
    client = AcpClient(
        stdio_endpoint(tmp_path / "log", "--silent-initialize"), retry=None, timeouts=Timeouts(connect=0.5)
    )
    with pytest.raises(RequestTimeout):
        await within(client.connect())
    assert client.state.state is State.FAILED
    await client.aclose()
