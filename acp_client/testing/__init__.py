"""The test kit: what you need to test your own recovery callbacks against real faults.

* :class:`ReferenceAgent` — an ACP v1/v2 echo agent implementing ``session/status`` per the
  proposal, with controls: :meth:`~ReferenceAgent.lose_memory` (memory cleared, store kept →
  ``inactive``), :meth:`~ReferenceAgent.evict` (→ ``-32002``), :meth:`~ReferenceAgent.stall`,
  capability toggles, chunks per prompt and their delay.
* :class:`ReferenceServer` — serves it on loopback over WebSocket and Streamable HTTP (HTTP/1.1
  and HTTP/2, under hypercorn: install the ``testing`` extra), with
  :meth:`~ReferenceServer.drop_connections`, :meth:`~ReferenceServer.restart` and
  :meth:`~ReferenceServer.refuse_connections`, and ``GET /health`` for load balancers.
  ``python -m acp_client.testing.reference_agent --stdio`` serves it over stdio. Several agents
  sharing one :class:`SessionStore` (or one ``--store DIR``) act as instances with shared storage.
* :class:`FaultProxy` — a TCP proxy on loopback: :meth:`~FaultProxy.cut` every connection,
  :meth:`~FaultProxy.blackhole` (half-open links), :meth:`~FaultProxy.refuse` for N seconds.
* :class:`MemoryConnector` — connects a client to an in-process agent over memory transports,
  with :meth:`~MemoryConnector.drop` and :meth:`~MemoryConnector.refuse`.
* :class:`RecordingConnector` — wraps any connector and records every link the client opens and
  every message it sends (and receives) on each, optionally rewriting what the agent sends.
* :class:`FakeClock` — drives the retry policy, timeouts and the supervisor without real sleeps.
* :func:`inside` — the parts of a client (its links, session table, engine), for tests that must
  see what the public API does not show.
"""

from .clock import FakeClock
from .inside import Inside, inside
from .memory import MemoryConnector
from .proxy import FaultProxy
from .recording import RecordingConnector, RecordingTransport
from .reference_agent import (
    HistoryEntry,
    ReferenceAgent,
    ReferenceServer,
    RequestRecord,
    SessionSnapshot,
    SessionStore,
    StoredSession,
    serve_stdio,
)

__all__ = [
    "FakeClock",
    "FaultProxy",
    "HistoryEntry",
    "Inside",
    "MemoryConnector",
    "RecordingConnector",
    "RecordingTransport",
    "ReferenceAgent",
    "ReferenceServer",
    "RequestRecord",
    "SessionSnapshot",
    "SessionStore",
    "StoredSession",
    "inside",
    "serve_stdio",
]
