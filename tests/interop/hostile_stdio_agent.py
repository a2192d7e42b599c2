"""A hostile stdio agent for ``test_hostile_agents.py``: stdlib only, one JSON-RPC message per stdin line.

It answers ``initialize`` like an ACP v1 agent with no capabilities, and the test method ``_hostile``
as the test tells it in the params:

- ``before``: frames to write first, each on its own line; a string is written as given (``$ID`` is
  replaced with the request's id, JSON-encoded), ``{"raw": TEXT}`` writes TEXT verbatim with no newline
  added (encoded as latin-1, so it can carry any byte, including invalid UTF-8).
- ``answer`` (default true): then answer ``{"echo": params["tag"]}``.
- ``exit``: instead of answering, exit at once with this status (mid-request).

Every client message received is appended, as one JSON line, to the file named by ``--log`` (so a
test can see the client's replies, ``$/cancel_request`` notifications...).

Flags: ``--garbage-at-start`` writes a few non-JSON lines before reading anything;
``--silent-initialize`` never answers ``initialize``; ``--exit-on-initialize N`` exits with N instead.
"""

from __future__ import annotations

import json
import sys

out = sys.stdout.buffer
INIT_RESULT = {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "hostile", "version": "0"}}


def write(data: bytes) -> None:
    out.write(data)
    out.flush()


def send(message: dict[str, object]) -> None:
    write(json.dumps(message, separators=(",", ":")).encode() + b"\n")


def main(argv: list[str]) -> int:
    log_path = argv[argv.index("--log") + 1] if "--log" in argv else None
    if "--garbage-at-start" in argv:
        write(b"Starting hostile agent v0.0.1...\n\x00\x01 not json at all\n{broken\n")
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        message = json.loads(line)
        if log_path is not None:
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(json.dumps(message) + "\n")
        if not isinstance(message, dict):  # e.g. the client's batch of error replies
            continue
        method = message.get("method")
        request_id = message.get("id")
        if method == "initialize":
            if "--silent-initialize" in argv:
                continue
            if "--exit-on-initialize" in argv:
                return int(argv[argv.index("--exit-on-initialize") + 1])
            send({"jsonrpc": "2.0", "id": request_id, "result": INIT_RESULT})
        elif method == "_hostile":
            params = message.get("params") or {}
            for frame in params.get("before", []):
                if isinstance(frame, dict):
                    write(str(frame["raw"]).encode("latin-1"))
                else:
                    write(str(frame).replace("$ID", json.dumps(request_id)).encode("utf-8") + b"\n")
            if "exit" in params:
                return int(params["exit"])
            if params.get("answer", True):
                send({"jsonrpc": "2.0", "id": request_id, "result": {"echo": params.get("tag")}})
        elif request_id is not None and method is not None:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
