"""A cookie store the client created itself does not outlive the client; the app's own store does."""

from __future__ import annotations

import pytest

from acp_client.transports import CookieStore
from tests.e2e._support import Recorder
from tests.e2e.conftest import Target


@pytest.mark.parametrize("transport", ("ws", "http1"))
async def test_the_clients_own_cookie_store_is_cleared_on_close(target: Target) -> None:
    client = target.client(Recorder())
    async with client:
        await client.new_session("/work/project")
        assert len(client.cookies) == 1  # the server's affinity cookie
    assert len(client.cookies) == 0


@pytest.mark.parametrize("transport", ("ws", "http1"))
async def test_a_store_the_app_passed_in_is_left_alone(target: Target) -> None:
    store = CookieStore()
    client = target.client(Recorder(), cookies=store)
    async with client:
        await client.new_session("/work/project")
    assert client.cookies is store
    assert len(store) == 1
    assert f"acp_affinity={target.server.instance_id}" in (store.header_for(target.url) or "")
