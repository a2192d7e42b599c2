"""The guides' examples run as written (docs/testing.md, docs/many-instances.md), and docs/api.md names every
public name."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


async def test_testing_guide_example_runs() -> None:
    text = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    example = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    namespace: dict[str, Any] = {}
    exec(compile(example, "docs/testing.md", "exec"), namespace)
    await namespace["test_my_app_rebuilds_its_view_after_a_restart"]()


async def test_testing_guide_recording_example_runs() -> None:
    text = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    example = next(block for block in re.findall(r"```python\n(.*?)```", text, re.S) if "RecordingConnector(" in block)
    namespace: dict[str, Any] = {}
    exec(compile(example, "docs/testing.md", "exec"), namespace)
    await namespace["test_a_drop_is_followed_by_a_probe_and_a_resume"]()


def test_api_reference_mentions_every_public_name() -> None:
    import acp_client

    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    missing = [name for name in acp_client.__all__ if name != "__version__" and name not in text]
    assert not missing


def test_many_instances_guide_shows_the_haproxy_config_the_tests_use() -> None:
    from tests.peers.haproxy import haproxy_config

    text = (ROOT / "docs" / "many-instances.md").read_text(encoding="utf-8")
    shown = re.findall(r"```haproxy\n(.*?)```", text, re.S)
    assert shown == [haproxy_config(8000, {"a": 9001, "b": 9002})]


async def test_many_instances_guide_pool_example_runs() -> None:
    text = (ROOT / "docs" / "many-instances.md").read_text(encoding="utf-8")
    example = next(block for block in re.findall(r"```python\n(.*?)```", text, re.S) if "async def test_" in block)
    namespace: dict[str, Any] = {}
    exec(compile(example, "docs/many-instances.md", "exec"), namespace)
    await namespace["test_the_fan_out_finds_the_session_where_it_lives"]()
