"""Fixtures of the examples' tests (``chat_script``, ``tmux``). Importing ``_chat_support`` here puts
``examples/`` on ``sys.path`` before any test module imports ``chat`` or ``chat_ui``."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import pytest_asyncio

from tests.examples._chat_support import CHAT, ChatProcess, Tmux, _env


@pytest_asyncio.fixture
async def chat_script(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[ChatProcess]]]:
    processes: list[asyncio.subprocess.Process] = []

    async def start(urls: str | Sequence[str], lines: list[str], *extra: str) -> ChatProcess:
        """``chat.py URL [URL ...] --script FILE --json [extra...]``, killed at teardown if still running."""
        script = tmp_path / f"script-{len(processes)}.txt"
        script.write_text("\n".join(lines) + "\n", encoding="utf-8")
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(CHAT),
            *([urls] if isinstance(urls, str) else urls),
            "--script",
            str(script),
            "--json",
            *extra,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=_env(),
        )
        processes.append(process)
        return ChatProcess(process)

    yield start
    for process in processes:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest_asyncio.fixture
async def tmux(tmp_path: Path) -> AsyncIterator[Tmux]:
    assert shutil.which("tmux"), "tmux is needed for the interactive UI tests"
    terminal = Tmux(tmp_path)
    try:
        yield terminal
    finally:
        await terminal.kill()
