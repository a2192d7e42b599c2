"""The checker's tests run it against the reference agent in this process, which answers at once and
saves its sessions as it goes: the margins the checker keeps for real agents (how long nothing must
arrive before the agent counts as quiet; how long a session gets to be saved before the restart) are
shortened here, far above the reference agent's own delays (its pre-prompt greeting comes 0.05 s after
the ``session/new`` answer). The real agents' report cards (``tests/interop``) run with the real
margins."""

from __future__ import annotations

import pytest

from acp_client.check import _checks_cancel, _checks_history


@pytest.fixture(autouse=True)
def _reference_agent_margins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_checks_cancel, "QUIET", 0.2)
    monkeypatch.setattr(_checks_history, "SAVED_AFTER", 0.3)
