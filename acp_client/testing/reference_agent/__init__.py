"""The reference agent: an ACP v1/v2 echo agent with the controls that recovery tests need.

* :class:`ReferenceAgent` is the transport-independent core (sessions, history, behaviour,
  controls such as :meth:`~ReferenceAgent.lose_memory`, :meth:`~ReferenceAgent.evict` and
  :meth:`~ReferenceAgent.stall`).
* :class:`ReferenceServer` serves it on loopback over WebSocket and Streamable HTTP (hypercorn,
  the ``testing`` extra), with :meth:`~ReferenceServer.drop_connections`,
  :meth:`~ReferenceServer.restart` and :meth:`~ReferenceServer.refuse_connections`.
* :func:`serve_stdio` serves it over stdin / stdout; :meth:`ReferenceAgent.serve` over any
  :class:`~acp_client.transports.base.Transport` (e.g. an in-memory pair).
* :class:`MetaLog` (``agent.meta_log``) records the ``_meta`` of every request received (trace
  context included), and carries a prompt's trace on in the requests the agent sends for it.
* :class:`SessionStore` keeps sessions across restarts (in memory, or JSON files in a directory).
  Several agents may share one store — one object in a process, or one directory across
  processes (``--store DIR``): a session one instance saved is ``inactive`` on the others, as
  behind a load balancer with shared storage. Give each instance its own ``--name``.

From a shell::

    python -m acp_client.testing.reference_agent --stdio [--store DIR] [--no-status] [--no-resume]
        [--no-load] [--vocabulary proposal|sdk] [--chunks N] [--chunk-delay S] [--record-meta FILE]
        [--fault NAME ...]
    python -m acp_client.testing.reference_agent --serve [--host H] [--port P] [--store DIR] [--name NAME]

Faults: ``ReferenceAgent(faults=[...])`` / ``--fault NAME`` give it deliberate defects (:data:`FAULTS`,
all off by default), each one a deviation measured in real agents, so that ``acp-reconnect check``
can be seen to catch it.

Prompts: any text is echoed as ``"echo: <text>"`` in ``chunks_per_prompt`` pieces. Special
prompts make the agent call the client: ``/permission`` (``session/request_permission``),
``/write PATH TEXT`` (``fs/write_text_file``), ``/read PATH`` (``fs/read_text_file``),
``/terminal CMD`` (``terminal/create``, ``wait_for_exit``, ``output``, ``release``), ``/elicit``
(``elicitation/create``), ``/slow`` streams until cancelled (at most 10 minutes), and ``/fail``
answers the prompt with an error (``-32603``); ``/as SESSION_ID [PATH]`` speaks for another session, as a
hostile member of a group of instances would (an update into its transcript, a permission request,
a read of PATH in its name).

A hostile agent: the ``escapes`` fault puts :data:`ESCAPES` (terminal escapes, C1 and bidi controls,
a newline) into every text the agent controls, and ``escape-ids`` into session ids.
"""

from __future__ import annotations

from ._agent import AgentConnection, ReferenceAgent, SendCallable, SessionSnapshot, split_text
from ._faults import ESCAPES, FAULTS
from ._meta_log import MetaLog, MetaRecord
from ._server import ReferenceServer, RequestRecord
from ._stdio import LineWriter, serve_stdio
from ._store import HistoryEntry, SessionStore, StoredSession

__all__ = [
    "AgentConnection",
    "ESCAPES",
    "FAULTS",
    "HistoryEntry",
    "LineWriter",
    "MetaLog",
    "MetaRecord",
    "ReferenceAgent",
    "ReferenceServer",
    "RequestRecord",
    "SendCallable",
    "SessionSnapshot",
    "SessionStore",
    "StoredSession",
    "serve_stdio",
    "split_text",
]
