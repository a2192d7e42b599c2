"""The fan-out: every instance asked about some sessions at once, each within its own bound.

Each instance is asked by :func:`acp_client._probing.ask` (over the client's live link to it
where there is one, else over a link of its own, closed again); finding ten sessions costs one
connect and one ``initialize`` per instance, not ten.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from .. import _probing
from .._probing import Live, Opener
from ..clock import Clock
from ..location import Endpoint, Location

__all__ = ["fan_out"]

logger = logging.getLogger("acp_client.locate")


async def fan_out(
    session_ids: Sequence[str],
    endpoints: Sequence[Endpoint],
    *,
    timeout: float | None,
    opener: Opener,
    clock: Clock,
    live: Mapping[Endpoint, Live],
) -> dict[str, Location]:
    """One :class:`~acp_client.location.Location` per distinct session id, in the order given
    (empty for no ids: nothing is connected). Every endpoint carries its connector."""
    ids = tuple(dict.fromkeys(session_ids))
    if not ids:
        return {}
    settings = _probing.settings(ids, timeout=timeout, opener=opener, clock=clock, live=live)
    results = await asyncio.gather(*(_probing.ask(e, settings) for e in endpoints), return_exceptions=True)
    per_instance: list[_probing.Answers] = []
    for result in results:
        if isinstance(result, BaseException):  # not one instance's failure: a bug or a cancellation
            raise result
        per_instance.append(result)
    elapsed = clock.monotonic() - settings.start
    located = {
        sid: Location(sid, tuple(answers[index] for answers in per_instance), elapsed) for index, sid in enumerate(ids)
    }
    for location in located.values() if logger.isEnabledFor(logging.DEBUG) else ():
        logger.debug(
            "located %s in %.3fs: %s",
            location.session_id,
            location.elapsed,
            ", ".join(f"{answer.endpoint}={answer.probe.value}" for answer in location.answers),
        )
    return located
