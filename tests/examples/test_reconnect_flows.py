"""``examples/reconnect_flows.py`` runs end to end and documents its flows."""

from __future__ import annotations

import sys

import pytest

from tests.examples._chat_support import FLOWS, run_process

# -- reconnect_flows.py -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "transport"), [(1, "ws"), (2, "http")])
async def test_reconnect_flows_run_and_pass(version: int, transport: str) -> None:
    code, out, err = await run_process(
        sys.executable, str(FLOWS), "--protocol-version", str(version), "--transport", transport
    )
    assert code == 0, out + err
    assert "10/10 checks passed" in out
    for callback in (
        "[decide]",
        "[on_resume]",
        "[on_replay]",
        "[on_new_session]",
        "[on_recovery_failed]",
        "[ask_user]",
    ):
        assert callback in out
    assert "FAIL" not in out


async def test_reconnect_flows_help_documents_the_flows() -> None:
    code, out, _ = await run_process(sys.executable, str(FLOWS), "--help")
    assert code == 0
    for words in ("decide_recovery", "--protocol-version", "--transport", "abandon", "re-sends"):
        assert words in out
