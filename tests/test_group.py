"""Endpoint groups (``acp_client.group``): the one seam through which a client of several instances
gets its links. The common case pays nothing for the special one: a client of one endpoint never
imports the pool package, and no module outside ``acp_client/pool/`` refers to it (that nothing
below the pool imports it is the layers contract's, ``tests/test_layers.py``)."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from acp_client import AcpClient, ConfigurationError
from acp_client.group import LinksPlan
from acp_client.location import Endpoint
from acp_client.pool import EndpointGroup, Pool
from acp_client.testing import FakeClock, MemoryConnector, ReferenceAgent, inside

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "acp_client"

#: Where the word "pool" means something else, and why.
OTHER_POOLS = {
    "transports": "the HTTP libraries' connection pools",
    "store": "psycopg's connection pools, and store.pool_key() (the key a group's sessions are filed under)",
    "_util/_version.py": "the psycopg-pool package of the postgres extra",
}


def _outside_the_pool() -> list[pathlib.Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] != "pool")


def test_no_module_outside_the_pool_mentions_it() -> None:
    """Not in code, docstrings or comments either: the core is written for one link and a seam."""
    mentions: list[str] = []
    for path in _outside_the_pool():
        relative = path.relative_to(PACKAGE).as_posix()
        if any(relative == place or relative.startswith(place + "/") for place in OTHER_POOLS):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\bpool(s|ed|'s)?\b", line, re.IGNORECASE):
                mentions.append(f"{relative}:{number}: {line.strip()}")
    assert mentions == []


def _run(code: str) -> None:
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_single_endpoint_client_never_imports_pool_code() -> None:
    """A client of one endpoint connects, opens a session, prompts, locates it and closes without
    ``acp_client.pool`` ever loading (checked in a fresh interpreter); a client given a pool loads
    it."""
    _run(
        "import asyncio, sys\n"
        "import acp_client\n"
        "from acp_client import AcpClient\n"
        "from acp_client.testing import MemoryConnector, ReferenceAgent\n"
        "async def main():\n"
        "    async with AcpClient(MemoryConnector(ReferenceAgent())) as client:\n"
        "        session = await client.new_session('/tmp')\n"
        "        await session.prompt('hello')\n"
        "        await client.locate(session.session_id)\n"
        "    assert not [m for m in sys.modules if m.startswith('acp_client.pool')], 'pool code imported'\n"
        "    from acp_client.location import Endpoint\n"
        "    from acp_client.pool import Pool\n"
        "    agents = [Endpoint(n, connector=MemoryConnector(ReferenceAgent())) for n in ('a', 'b')]\n"
        "    async with AcpClient(Pool(agents)) as client:\n"
        "        await client.new_session('/tmp')\n"
        "    assert 'acp_client.pool._links' in sys.modules\n"
        "asyncio.run(main())\n"
    )


def test_a_single_endpoint_sync_client_never_imports_pool_code() -> None:
    _run(
        "import sys\n"
        "from acp_client.sync import SyncAcpClient\n"
        "from acp_client.testing import MemoryConnector, ReferenceAgent\n"
        "with SyncAcpClient(MemoryConnector(ReferenceAgent())) as client:\n"
        "    client.new_session('/tmp').prompt('hello')\n"
        "assert not [m for m in sys.modules if m.startswith('acp_client.pool')], 'pool code imported'\n"
    )


def test_a_pool_is_an_endpoint_group_with_a_plan() -> None:
    connectors = [MemoryConnector(ReferenceAgent(), name=n) for n in "ab"]
    pool = Pool([Endpoint(n, connector=c) for n, c in zip("ab", connectors, strict=True)])
    assert isinstance(pool, EndpointGroup)
    plan = pool.links_plan(lambda url: pytest.fail(f"no URL to build a connector for: {url}"))
    assert isinstance(plan, LinksPlan)
    assert plan.first is connectors[0]
    assert plan.store_key is None  # connectors have no key: the app names one
    urls = Pool(["ws://b:1/acp", "ws://a:1/acp"]).links_plan(lambda url: MemoryConnector(ReferenceAgent(), name=url))
    assert urls.store_key == "pool:ws://a:1/acp ws://b:1/acp"
    assert urls.first.target == "memory://ws://b:1/acp"  # built by the client's connector factory


async def test_a_client_given_a_pool_has_its_links() -> None:
    clock = FakeClock()
    connectors = [MemoryConnector(ReferenceAgent(clock=clock, name=f"agent-{n}"), name=n) for n in "ab"]
    pool = Pool([Endpoint(n, connector=c) for n, c in zip("ab", connectors, strict=True)])
    async with AcpClient(pool, clock=clock) as client:
        assert [e.name for e in client.endpoints] == ["a", "b"]
        assert client.connector is connectors[0]
        handle = await client.new_session("/tmp")
        assert handle.endpoint == "a"
        assert len(inside(client).links.supervisors()) >= 1
    async with AcpClient(connectors[0], clock=clock) as single:
        assert single.endpoints == ()
        assert (await single.new_session("/tmp")).endpoint is None


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: AcpClient(["ws://a:1/acp", "ws://b:1/acp"]), "not a list: several instances"),  # type: ignore[arg-type]
        (lambda: AcpClient(42), "endpoint must be"),  # type: ignore[arg-type]
        (lambda: Pool([]), "at least one endpoint"),
        (lambda: Pool("ws://a:1/acp"), "a list of URLs"),  # type: ignore[arg-type]
        (lambda: Pool(["ws://a:1/acp", "ws://a:1/acp"]), "distinct"),
        (lambda: Pool(["ws://a:1/acp"], placement="closest"), "placement must be"),  # type: ignore[arg-type]
        (lambda: Pool(["ws://a:1/acp"], failover_delay=float("nan")), "failover_delay"),
    ],
)
def test_bad_endpoints_are_refused_naming_what_to_do(make: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        make()  # type: ignore[operator]
