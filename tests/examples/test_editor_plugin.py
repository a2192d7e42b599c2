"""``examples/editor_plugin.py`` runs headless: a fake editor loop over the sync facade survives a
connection cut in the middle of a turn."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "editor_plugin.py"


def run_example(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("version", ["1", "2"])
def test_the_demo_survives_a_cut_mid_turn(tmp_path: Path, version: str) -> None:
    done = run_example("--protocol-version", version, "--cwd", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()

    def index(text: str) -> int:
        matches = [n for n, line in enumerate(lines) if text in line]
        assert matches, f"{text!r} not in the output:\n{done.stdout}"
        return matches[0]

    assert index("connection: connected") < index("you> hello from the editor")
    assert index("[dialog] user clicked: Allow") < index("agent> permission: selected allow")
    cut = index("[fault] cutting the connection in the middle of the answer")
    assert index("agent> echo: please explain") < cut
    recovered = index("[editor] recovered: resume")
    assert cut < index("turn interrupted by the drop") < recovered
    assert cut < index("connection: reconnecting") < index("connection: recovering") < recovered
    last = index("you> are you still there?")
    assert recovered < last < index("agent> echo: are you still there?")
    assert lines[-1] == "[editor] done: 3 turns completed, recoveries: resume"


def test_help_documents_the_example(tmp_path: Path) -> None:
    done = run_example("--help", cwd=tmp_path)
    assert done.returncode == 0
    for text in ("usage: editor_plugin.py", "--poll-ms", "--deadline", "bundled reference agent", "Exit status"):
        assert text in done.stdout


def test_an_abandoned_session_is_not_reported_as_recovered(capsys: pytest.CaptureFixture[str]) -> None:
    # The client gives up on the session (the agent forgot it and cannot create a new one): the
    # editor must not print "recovered" nor exit 0 ("finished, and the session was recovered").
    import queue
    from typing import Any

    sys.path.insert(0, str(EXAMPLE.parent))
    import editor_plugin

    from acp_client.sync import SyncAcpClient, SyncEvent
    from acp_client.testing import MemoryConnector, ReferenceAgent, SessionStore
    from tests._support import FAST_RETRY

    class FailingStore(SessionStore):
        broken = False

        def save(self, record: Any) -> None:
            if self.broken:
                raise OSError("disk full")
            super().save(record)

    store = FailingStore()
    agent = ReferenceAgent(store=store, chunks_per_prompt=10, chunk_delay=0.05)
    connector = MemoryConnector(agent)
    events: queue.Queue[SyncEvent] = queue.Queue()
    client = SyncAcpClient(connector, event_queue=events, retry=FAST_RETRY, default_timeout=10.0)

    async def evict_and_drop() -> None:
        for session_id in list(agent.sessions):
            agent.evict(session_id)  # -32002 -> new session, which the agent cannot create
        store.broken = True
        connector.drop()

    try:
        client.connect()
        editor = editor_plugin.FakeEditor(
            client, events, cut=lambda: client.submit(evict_and_drop(), timeout=5.0).result(5.0), cwd="/work"
        )
        code = editor.run(deadline=20.0, poll=0.005)
    finally:
        client.close()
    out = capsys.readouterr().out
    assert editor.recoveries == ["abandon"], out
    assert "recovered: abandon" not in out
    assert code == editor_plugin.EXIT_GAVE_UP, out
