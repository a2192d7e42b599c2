"""Answers to agent->client requests: safe defaults, fs confinement, capability advertisement."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest

from acp_client import ClientHandlers, ConfigurationError
from acp_client.exceptions import InvalidParams, MethodNotFound
from acp_client.handlers import FileSystemPolicy, RequestRouter
from acp_client.types import CancelledPermissionOutcome, SelectedPermissionOutcome
from tests._harness import Harness


def router(handlers: ClientHandlers, roots: list[Path] | None = None) -> RequestRouter:
    return RequestRouter(handlers, session_roots=lambda sid: roots or [], protocol_version=lambda: 1)


PERMISSION = {
    "sessionId": "s1",
    "toolCall": {"toolCallId": "t1", "title": "rm -rf", "status": "pending"},
    "options": [
        {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
        {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    ],
}


async def test_permission_defaults_to_cancelled() -> None:
    assert await router(ClientHandlers())("session/request_permission", PERMISSION) == {
        "outcome": {"outcome": "cancelled"}
    }


async def test_permission_handler_sync_and_async() -> None:
    def sync_handler(request: Any) -> Any:
        assert request.options[0].option_id == "allow"
        return SelectedPermissionOutcome(option_id="allow")

    async def async_handler(request: Any) -> Any:
        return CancelledPermissionOutcome()

    assert (await router(ClientHandlers(permission=sync_handler))("session/request_permission", PERMISSION)) == {
        "outcome": {"outcome": "selected", "optionId": "allow"}
    }
    assert (await router(ClientHandlers(permission=async_handler))("session/request_permission", PERMISSION)) == {
        "outcome": {"outcome": "cancelled"}
    }


async def test_bad_permission_params_are_invalid_params() -> None:
    with pytest.raises(InvalidParams):
        await router(ClientHandlers())("session/request_permission", {"sessionId": 5})


@pytest.mark.parametrize(
    "method", ["fs/read_text_file", "fs/write_text_file", "terminal/create", "terminal/output", "unknown/x", "_ext/x"]
)
async def test_fs_terminal_and_unknown_are_method_not_found_by_default(method: str) -> None:
    with pytest.raises(MethodNotFound):
        await router(ClientHandlers())(method, {"sessionId": "s1", "path": "/etc/passwd"})


async def test_fs_read_and_write_inside_roots(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\nthree\n")
    r = router(ClientHandlers(file_system=FileSystemPolicy(read=True, write=True)), [tmp_path])
    read = await r("fs/read_text_file", {"sessionId": "s1", "path": str(tmp_path / "a.txt")})
    assert read == {"content": "one\ntwo\nthree\n"}
    sliced = await r("fs/read_text_file", {"sessionId": "s1", "path": str(tmp_path / "a.txt"), "line": 2, "limit": 1})
    assert sliced == {"content": "two\n"}
    assert await r("fs/write_text_file", {"sessionId": "s1", "path": str(tmp_path / "new.txt"), "content": "x"}) == {}
    assert (tmp_path / "new.txt").read_text() == "x"


@pytest.mark.parametrize(
    "path_of",
    [
        lambda root, out: "relative/path.txt",
        lambda root, out: str(out / "secret.txt"),
        lambda root, out: str(root / ".." / out.name / "secret.txt"),
        lambda root, out: str(root / "link" / "secret.txt"),  # symlink pointing outside
        lambda root, out: str(Path(str(root) + "-sibling") / "x.txt"),  # prefix match is not containment
        lambda root, out: str(root / "missing-dir" / "x.txt"),
        lambda root, out: str(root) + "/a\x00b",
    ],
)
async def test_fs_is_confined_to_roots_by_path_component(tmp_path: Path, path_of: Any) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (root / "link").symlink_to(outside)
    Path(str(root) + "-sibling").mkdir()
    (Path(str(root) + "-sibling") / "x.txt").write_text("x")
    r = router(ClientHandlers(file_system=FileSystemPolicy(read=True, write=True)), [root])
    target = path_of(root, outside)
    with pytest.raises(InvalidParams):
        await r("fs/read_text_file", {"sessionId": "s1", "path": target})
    with pytest.raises(InvalidParams):
        await r("fs/write_text_file", {"sessionId": "s1", "path": target, "content": "pwned"})
    assert (outside / "secret.txt").read_text() == "secret"


async def test_fs_write_through_a_symlinked_file_outside_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "target.txt").write_text("keep")
    (root / "innocent.txt").symlink_to(outside / "target.txt")
    r = router(ClientHandlers(file_system=FileSystemPolicy(read=True, write=True)), [root])
    with pytest.raises(InvalidParams):
        await r("fs/write_text_file", {"sessionId": "s1", "path": str(root / "innocent.txt"), "content": "x"})
    assert (outside / "target.txt").read_text() == "keep"


async def test_fs_read_cap_holds_for_files_whose_size_is_not_known_up_front() -> None:
    assert Path("/proc/self/maps").exists(), "this test needs Linux procfs"
    # procfs reports st_size 0 for a file with kilobytes of content (so would a file still growing):
    # the cap must bound what is actually read, not what stat() claims.
    policy = FileSystemPolicy(read=True, roots=[Path("/proc/self")], max_read_bytes=16)
    with pytest.raises(InvalidParams):
        await router(ClientHandlers(file_system=policy))(
            "fs/read_text_file", {"sessionId": "s1", "path": "/proc/self/maps"}
        )


async def test_fs_read_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")  # reading it would block a worker thread until a writer came
    r = router(ClientHandlers(file_system=FileSystemPolicy(read=True)), [tmp_path])
    with pytest.raises(InvalidParams):
        await r("fs/read_text_file", {"sessionId": "s1", "path": str(tmp_path / "pipe")})


async def test_no_roots_allows_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    r = router(ClientHandlers(file_system=FileSystemPolicy(read=True)), [])
    with pytest.raises(InvalidParams):
        await r("fs/read_text_file", {"sessionId": "s1", "path": str(tmp_path / "a.txt")})
    explicit_empty = router(ClientHandlers(file_system=FileSystemPolicy(read=True, roots=())), [tmp_path])
    with pytest.raises(InvalidParams):
        await explicit_empty("fs/read_text_file", {"sessionId": "s1", "path": str(tmp_path / "a.txt")})


async def test_read_only_policy_refuses_writes(tmp_path: Path) -> None:
    r = router(ClientHandlers(file_system=FileSystemPolicy(read=True, write=False)), [tmp_path])
    with pytest.raises(MethodNotFound):
        await r("fs/write_text_file", {"sessionId": "s1", "path": str(tmp_path / "x"), "content": "x"})


def test_policy_roots_must_be_absolute() -> None:
    with pytest.raises(ConfigurationError):
        FileSystemPolicy(roots=["relative"])


async def test_capabilities_follow_the_handlers_and_fs_uses_session_roots(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello from disk")
    async with Harness(client_kwargs={"handlers": ClientHandlers(file_system=FileSystemPolicy(read=True))}) as h:
        init = next(m for m in h.connector.sent() if m.get("method") == "initialize")
        assert init["params"]["clientCapabilities"]["fs"]["readTextFile"] is True
        assert not init["params"]["clientCapabilities"]["fs"].get("writeTextFile")
        assert init["params"]["clientCapabilities"].get("terminal") in (False, None)
        session = (await h.client.new_session(tmp_path)).record
        handle = h.client.session(session.session_id)
        await h.clock.run(handle.prompt(f"/read {tmp_path / 'notes.txt'}"))
        assert "hello from disk" in handle.transcript.text()
        await h.clock.run(handle.prompt(f"/read {os.path.abspath('/etc/hostname')}"))
        assert "hello from disk" in handle.transcript.text()
        assert "outside the allowed roots" in handle.transcript.messages[-1].text or "rror" in (
            handle.transcript.messages[-1].text
        )


async def test_cancel_answers_pending_permission_requests_cancelled() -> None:
    import asyncio

    gate = asyncio.Event()

    async def slow_user(request: Any) -> Any:
        await gate.wait()
        return SelectedPermissionOutcome(option_id="allow")

    async with Harness(client_kwargs={"handlers": ClientHandlers(permission=slow_user)}) as h:
        session = (await h.client.new_session("/work")).record
        handle = h.client.session(session.session_id)
        turn = asyncio.ensure_future(handle.prompt("/permission"))
        await h.clock.settle()
        await handle.cancel()
        result = await h.clock.run(turn)
        assert result.stop_reason in ("cancelled", "end_turn")
        replies = [m for m in h.connector.sent() if "result" in m and "outcome" in m["result"]]
        assert replies and replies[0]["result"]["outcome"] == {"outcome": "cancelled"}


async def test_cancel_wins_over_a_permission_handler_that_ignores_its_cancellation() -> None:
    import asyncio

    started = asyncio.Event()

    async def stubborn_user(request: Any) -> Any:
        started.set()
        with contextlib.suppress(asyncio.CancelledError):  # swallows it and answers anyway
            await asyncio.Event().wait()
        return SelectedPermissionOutcome(option_id="allow")

    r = router(ClientHandlers(permission=stubborn_user))
    asking = asyncio.ensure_future(r("session/request_permission", PERMISSION))
    await started.wait()
    r.cancel_session("s1")
    assert await asking == {"outcome": {"outcome": "cancelled"}}  # the protocol's answer after a cancel
    assert not r._cancelled and not r._permissions  # nothing kept


class _HalfTerminal:
    async def create(self, request: Any) -> Any: ...


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"permission": "allow"}, r"ClientHandlers\.permission must be a function .*'allow'"),
        ({"elicitation": 3}, r"ClientHandlers\.elicitation must be a function"),
        ({"extension": {"_x": 1}}, r"ClientHandlers\.extension must be a function"),
        ({"file_system": True}, r"ClientHandlers\.file_system must be a FileSystemPolicy"),
        ({"terminal": _HalfTerminal()}, r"lacks output, wait_for_exit, kill, release"),
    ],
)
def test_handlers_are_validated_at_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ClientHandlers(**kwargs)
