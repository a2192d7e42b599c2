"""Typed ACP wire values: frozen attrs classes with snake_case fields.

Pure declarations: these modules know nothing of the wire. camelCase exists only there: the
private codec (:mod:`acp_client._codec`) maps these values to and from JSON for protocol v1 and
the v2 draft; ``_fields.wire(...)`` metadata on a field only declares how it differs from the
codec's defaults. Modules by concern: :mod:`.content` (content blocks),
:mod:`.capabilities` (``initialize`` capabilities), :mod:`.lifecycle` (client→agent requests and
their answers), :mod:`.updates` (``session/update`` variants), :mod:`.agent_requests`
(agent→client requests and the client's answers), :mod:`.session` (the :class:`Session` record).
Every ``meta`` field is the message's ``_meta`` extension object, as sent.
"""

from __future__ import annotations

from . import agent_requests, capabilities, content, lifecycle, session, updates

# Each module's ``__all__`` is its public names; nothing here uses them, so the star imports hide nothing.
from .agent_requests import *  # noqa: F403
from .capabilities import *  # noqa: F403
from .content import *  # noqa: F403
from .lifecycle import *  # noqa: F403
from .session import *  # noqa: F403
from .updates import *  # noqa: F403

__all__ = []
__all__ += agent_requests.__all__
__all__ += capabilities.__all__
__all__ += content.__all__
__all__ += lifecycle.__all__
__all__ += session.__all__
__all__ += updates.__all__
__all__.sort()  # isort's order: the names are classes, then functions
