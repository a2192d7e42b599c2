"""What ``_meta`` the reference agent received and sent: how tests check trace propagation.

Every request the agent receives is recorded with its ``_meta`` (``None`` when it had none). When
that request carried a W3C ``traceparent`` (the ACP meta-propagation RFD reserves
``_meta.traceparent`` / ``_meta.tracestate``), the requests the agent sends the client on its
behalf (permission, fs, terminal...) carry one too, as an instrumented agent's would: the same trace,
a fresh span id of the agent's own, the same flags and ``tracestate``. Those are recorded as sent.
"""

from __future__ import annotations

import collections
import re
import secrets
from collections.abc import Callable
from typing import Any, Final, Literal

import attrs

from ..._codec._jsonrpc import RequestId

_TRACEPARENT: Final = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
#: Requests whose trace context is remembered for the agent's calls on their behalf.
_REMEMBERED: Final = 256


@attrs.frozen
class MetaRecord:
    """One request's ``_meta``.

    Attributes:
        direction: ``"received"`` (from the client) or ``"sent"`` (to it).
        meta: Its ``_meta`` object, or ``None`` when it had none.
    """

    direction: Literal["received", "sent"]
    method: str
    meta: dict[str, Any] | None


def child_traceparent(parent: str) -> str | None:
    """A ``traceparent`` in ``parent``'s trace with a fresh span id (``None``: not a valid one)."""
    found = _TRACEPARENT.match(parent)
    if found is None or found.group(2) == "0" * 32:
        return None
    version, trace_id, _, flags = found.groups()
    return f"{version}-{trace_id}-{secrets.token_hex(8)}-{flags}"


class MetaLog:
    """The agent's record (``ReferenceAgent.meta_log``); ``on_record`` sees each entry as made."""

    def __init__(self) -> None:
        self.records: list[MetaRecord] = []
        self.on_record: Callable[[MetaRecord], None] | None = None
        self._contexts: collections.OrderedDict[str, dict[str, str]] = collections.OrderedDict()

    @property
    def received(self) -> list[MetaRecord]:
        return [record for record in self.records if record.direction == "received"]

    @property
    def sent(self) -> list[MetaRecord]:
        return [record for record in self.records if record.direction == "sent"]

    def _add(self, record: MetaRecord) -> None:
        self.records.append(record)
        if self.on_record is not None:
            self.on_record(record)

    def request_received(self, request_id: RequestId, method: str, params: Any) -> None:
        meta = params.get("_meta") if isinstance(params, dict) else None
        meta = dict(meta) if isinstance(meta, dict) else None
        self._add(MetaRecord("received", method, meta))
        if meta is None or not isinstance(meta.get("traceparent"), str):
            return
        context = {key: meta[key] for key in ("traceparent", "tracestate") if isinstance(meta.get(key), str)}
        self._contexts[str(request_id)] = context
        while len(self._contexts) > _REMEMBERED:
            self._contexts.popitem(last=False)

    def outgoing(self, cause: RequestId | None, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` of a request the agent sends on behalf of request ``cause``, with its trace."""
        context = self._contexts.get(str(cause)) if cause is not None else None
        child = child_traceparent(context["traceparent"]) if context is not None else None
        if context is None or child is None:
            return params
        meta = {**context, "traceparent": child}
        self._add(MetaRecord("sent", method, meta))
        return {**params, "_meta": {**meta, **(params.get("_meta") or {})}}
