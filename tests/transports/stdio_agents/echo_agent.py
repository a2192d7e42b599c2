"""A tiny stdio agent for the transport tests: stdlib only, synchronous, one request per line.

Every line on stdin is a JSON-RPC request; the method says what to do (see ``handle``). Flags:

* ``--linger``: on end of stdin, keep running instead of exiting (tests the SIGTERM path).
* ``--ignore-term``: ignore SIGTERM (tests the SIGKILL path).
* ``--crlf``: end every output line with CRLF and put blank lines between messages.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

CRLF = "--crlf" in sys.argv
out = sys.stdout.buffer


def write_raw(data: bytes) -> None:
    out.write(data)
    out.flush()


def reply(request_id: object, result: object) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()
    if CRLF:
        write_raw(b"\r\n" + line + b"\r\n\r\n")
    else:
        write_raw(line + b"\n")


def handle(message: dict) -> None:
    method = message.get("method")
    params = message.get("params") or {}
    request_id = message.get("id")
    if method == "echo":
        reply(request_id, params)
    elif method == "env":
        reply(request_id, dict(os.environ))
    elif method == "raw":
        # Write the given lines verbatim (latin-1 keeps arbitrary bytes), then answer.
        for raw in params["lines"]:
            write_raw(raw.encode("latin-1"))
        reply(request_id, {"done": True})
    elif method == "big_line":
        # One line of `size` bytes (not valid JSON), written in pieces, then an answer.
        size, piece = params["size"], b"x" * 65536
        while size > 0:
            write_raw(piece[: min(size, len(piece))])
            size -= len(piece)
        write_raw(b"\n")
        reply(request_id, {"done": True})
    elif method == "stderr":
        # `size` bytes of stderr in `line`-byte lines, then an answer.
        line = b"e" * (params.get("line", 100) - 1) + b"\n"
        size = params["size"]
        err = sys.stderr.buffer
        chunk = line * max(1, 65536 // len(line))
        written = 0
        while written < size:
            err.write(chunk)
            written += len(chunk)
        err.write(params.get("last", "stderr done").encode() + b"\n")
        err.flush()
        reply(request_id, {"written": written})
    elif method == "exit":
        sys.stderr.write(params.get("stderr", "") + "\n")
        sys.stderr.flush()
        os._exit(params.get("code", 0))
    elif method == "signal":
        sys.stderr.write("about to die by signal\n")
        sys.stderr.flush()
        os.kill(os.getpid(), params["signum"])
        time.sleep(10)
    elif method == "grandchild":
        # A child in our process group that would outlive us; answer with its pid.
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL if params.get("quiet") else None,
            stderr=subprocess.DEVNULL if params.get("quiet") else None,
        )
        reply(request_id, {"pid": child.pid})
    elif method == "close_stdout":
        reply(request_id, {})
        os.close(1)
        time.sleep(60)
    elif method == "exit_after_reply":
        reply(request_id, {"bye": True})
        os._exit(params.get("code", 0))
    else:
        write_raw(
            json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no"}}).encode()
            + b"\n"
        )


def main() -> None:
    if "--ignore-term" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        message = json.loads(line)
        if isinstance(message, list):  # a batch of echoes: answer with a batch
            answers = [{"jsonrpc": "2.0", "id": m["id"], "result": m.get("params")} for m in message]
            write_raw(json.dumps(answers).encode() + b"\n")
        else:
            handle(message)
    if "--linger" in sys.argv:
        while True:
            time.sleep(60)


if __name__ == "__main__":
    main()
