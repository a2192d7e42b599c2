"""The Streamable HTTP routing decisions, driven without sockets or an event loop."""

from __future__ import annotations

from typing import Any

from acp_client.transports._routing import Route, Router, is_session_404


def request(id_: Any, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def answer(id_: Any, **result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def test_session_scoped_methods_always_carry_the_header() -> None:
    router = Router()
    assert router.route(request(1, "session/prompt", sessionId="s1")) == Route("s1", with_header=True)
    assert router.route(request(2, "session/new", cwd="/")) == Route()


def test_other_session_methods_start_without_the_header_and_adapt() -> None:
    router = Router()
    route = router.route(request(1, "session/load", sessionId="s1"))
    assert route == Route("s1", with_header=False, adaptable=True)
    # The TypeScript server: 400 naming the session -> retry with the header, and remember it.
    assert router.retry_header(route, False, 400, b"Missing Acp-Session-Id") is True
    assert router.header_everywhere is True
    assert router.route(request(2, "session/status", sessionId="s1")).with_header is True
    # The Python server: 404 "unknown session" to the header -> retry without, and remember it.
    route = router.route(request(3, "session/resume", sessionId="s2"))
    assert router.retry_header(route, True, 404, b"Unknown session id") is False
    assert router.header_everywhere is False
    assert router.route(request(4, "session/status", sessionId="s2")).with_header is False


def test_refusals_that_teach_nothing_stand() -> None:
    router = Router()
    route = router.route(request(1, "session/load", sessionId="s1"))
    assert router.retry_header(route, False, 400, b"bad json") is None
    assert router.retry_header(route, True, 404, b"Unknown connection id") is None
    assert router.retry_header(route, False, 500, b"session exploded") is None
    scoped = router.route(request(2, "session/prompt", sessionId="s1"))
    assert router.retry_header(scoped, True, 404, b"Unknown session") is None  # not adaptable
    assert router.header_everywhere is None


def test_replies_go_back_the_way_the_agent_request_came() -> None:
    router = Router()
    agent_request = request("perm-1", "session/request_permission", sessionId="s1")
    assert router.inbound(agent_request, "s1") == []
    reply = {"jsonrpc": "2.0", "id": "perm-1", "result": {}}
    assert router.route(reply) == Route("s1", with_header=True, adaptable=True)
    assert router.route(reply) == Route()  # routed once


def test_a_batch_naming_two_sessions_goes_without_the_header() -> None:
    router = Router()
    batch = [request(1, "session/prompt", sessionId="a"), request(2, "session/prompt", sessionId="b")]
    assert router.route(batch) == Route()
    same = [request(3, "session/prompt", sessionId="a"), request(4, "session/status", sessionId="a")]
    assert router.route(same) == Route("a", with_header=True, adaptable=False)


def test_an_establishing_answer_opens_its_session_stream() -> None:
    router = Router()
    router.sent(request(1, "session/new", cwd="/"))
    assert router.inbound(answer(1, sessionId="s1"), None) == [("open", "s1")]
    router.sent(request(2, "session/load", sessionId="s2"))
    assert router.inbound(answer(2), None) == [("open", "s2")]  # the params name it when the result does not


def test_forged_answers_open_no_session_stream() -> None:
    router = Router()
    # Ids the client never sent.
    assert [router.inbound(answer(f"x{n}", sessionId=f"forged-{n}"), None) for n in range(300)] == [[]] * 300
    # An answer to a request that establishes nothing, whatever it carries.
    router.sent(request(1, "session/status", sessionId="s1"))
    assert router.inbound(answer(1, sessionId="forged"), None) == []
    # A request whose POST failed is forgotten: a late forged answer to it opens nothing.
    keys = router.sent(request(2, "session/new", cwd="/"))
    router.forget(keys)
    assert router.inbound(answer(2, sessionId="forged"), None) == []
    # An id is answered once.
    router.sent(request(3, "session/new", cwd="/"))
    assert router.inbound(answer(3, sessionId="s3"), None) == [("open", "s3")]
    assert router.inbound(answer(3, sessionId="forged"), None) == []


def test_close_and_unknown_session() -> None:
    router = Router()
    router.header_everywhere = True
    router.sent(request(1, "session/close", sessionId="s1"))
    assert router.inbound(answer(1), None) == [("close", "s1")]
    router.sent(request(2, "session/load", sessionId="s2"))
    error = {"jsonrpc": "2.0", "id": 2, "error": {"code": -32002, "message": "not found"}}
    assert router.inbound(error, None) == [("abandon", "s2")]
    # The Python convention keeps a closed session's stream (its server keeps routing there).
    router.header_everywhere = False
    router.sent(request(3, "session/close", sessionId="s3"))
    assert router.inbound(answer(3), None) == []


def test_which_404_is_which() -> None:
    assert is_session_404(b"Unknown session id", False)
    assert not is_session_404(b"Unknown connection id", True)
    assert is_session_404(b"", True) and not is_session_404(b"", False)
