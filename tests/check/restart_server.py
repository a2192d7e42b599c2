"""Start, or restart, a reference agent server on a fixed port: the ``--restart-cmd`` of the CLI tests.

``python restart_server.py PIDFILE PORT STORE``: ends the server whose pid is in PIDFILE (if any),
starts a new one in its own session on PORT with its sessions in STORE, waits until the port
accepts connections, writes the new pid to PIDFILE and exits (the server keeps running).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time


def main(pidfile: str, port: int, store: str) -> int:
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
        with open(pidfile, encoding="ascii") as previous:
            old = int(previous.read().strip())
        os.kill(old, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(old, 0)
            except ProcessLookupError:
                break
            time.sleep(0.02)
    command = [sys.executable, "-m", "acp_client.testing.reference_agent", "--serve", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--store", store],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    with open(pidfile, "w", encoding="ascii") as out:
        out.write(str(process.pid))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return 0
        time.sleep(0.05)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
