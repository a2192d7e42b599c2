"""A hostile stdio agent for the checker's tests: stdlib only, ACP v1, one JSON-RPC message per line.

It behaves (initialize, session/new, status, load, resume, list, prompt) until a method named with
``--on METHOD=MODE`` arrives, then for that method:

- ``hang``: never answers;
- ``flood``: writes 20000 ``session/update`` notifications and never answers;
- ``garbage``: writes lines that are not JSON and never answers;
- ``exit``: exits at once with status 3.

Two modes are for ``initialize`` only: ``v1-only`` refuses a v2 proposal with ``-32602`` (as agentao
0.5 does) and answers a v1 one; ``slow-later`` answers after 3 s in every process but the first
(it needs ``--pids``: an agent slow to start on a loaded machine).

``--pids FILE`` appends this process's pid to FILE (so a test can check that none is left running).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid

out = sys.stdout.buffer


def send(message: dict[str, object]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def answer(request_id: object, result: object) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def error(request_id: object, code: int, text: str, data: object = None) -> None:
    body: dict[str, object] = {"code": code, "message": text}
    if data is not None:
        body["data"] = data
    send({"jsonrpc": "2.0", "id": request_id, "error": body})


def main(argv: list[str]) -> int:
    modes: dict[str, str] = {}
    earlier = 0
    for index, arg in enumerate(argv):
        if arg == "--on":
            method, _, mode = argv[index + 1].partition("=")
            modes[method] = mode
        if arg == "--pids":
            with open(argv[index + 1], "a+", encoding="utf-8") as pids:
                pids.seek(0)
                earlier = len(pids.read().split())
                pids.write(f"{os.getpid()}\n")
    known: set[str] = set()
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict) or "method" not in message:
            continue
        method, request_id = message["method"], message.get("id")
        params = message.get("params") or {}
        mode = modes.get(method)
        if mode == "exit":
            return 3
        if mode == "hang":
            continue
        if mode == "v1-only" and (params.get("protocolVersion") if isinstance(params, dict) else None) != 1:
            error(request_id, -32602, "Invalid params", {"protocolVersion": "expected 1"})
            continue
        if mode == "slow-later" and earlier:
            time.sleep(3)  # the scenario: an agent that takes longer to start than the checker waits
        if mode == "flood":
            for tick in range(20000):
                update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"{tick} "}}
                send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "flood", "update": update}})
            continue
        if mode == "garbage":
            out.write(b'this is not JSON\n{"jsonrpc": broken\n\x00\x01\x02\n')
            out.flush()
            continue
        if request_id is None:
            continue  # notifications: session/cancel and the like
        sid = params.get("sessionId") if isinstance(params, dict) else None
        if method == "initialize":
            capabilities = {"loadSession": True, "sessionCapabilities": {"status": {}, "resume": {}, "list": {}}}
            answer(
                request_id,
                {
                    "protocolVersion": 1,
                    "agentCapabilities": capabilities,
                    "agentInfo": {"name": "hostile", "version": "0"},
                },
            )
        elif method == "session/new":
            new_id = uuid.uuid4().hex
            known.add(new_id)
            answer(request_id, {"sessionId": new_id})
        elif method == "session/status":
            if sid in known:
                answer(request_id, {"status": "active"})
            else:
                error(request_id, -32002, "Resource not found", {"sessionId": sid})
        elif method in ("session/load", "session/resume"):
            if sid in known:
                answer(request_id, {})
            else:
                error(request_id, -32002, "Resource not found", {"sessionId": sid})
        elif method == "session/list":
            answer(request_id, {"sessions": []})
        elif method == "session/prompt":
            chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ok"}}
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": chunk}})
            answer(request_id, {"stopReason": "end_turn"})
        else:
            error(request_id, -32601, f"Method not found: {method}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
