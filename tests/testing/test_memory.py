"""``acp_client.testing.MemoryConnector``: links to an in-process agent, and its refusals."""

from __future__ import annotations

import pytest

from acp_client.exceptions import ConnectError
from acp_client.testing import MemoryConnector, ReferenceAgent


async def test_refusals_are_counted_and_told() -> None:
    connector = MemoryConnector(ReferenceAgent())
    assert not connector.refusing
    connector.refuse(1)
    assert connector.refusing
    with pytest.raises(ConnectError, match="refused"):
        await connector.connect()
    assert not connector.refusing and connector.refused == 1
    connector.refuse()  # until accept()
    for _ in range(2):
        with pytest.raises(ConnectError):
            await connector.connect()
    assert connector.refusing and connector.refused == 3
    connector.accept()
    assert not connector.refusing
    await connector.connect()
    assert connector.connects == 1 and connector.live_links == 1
    assert connector.drop() == 1 and connector.live_links == 0
    await connector.aclose()
