"""The ACP JSON schemas (copied under ``data/``) and validation helpers for the type tests."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

DATA = Path(__file__).parent / "data"

#: schema set key -> (protocol version, path). ``v1``/``v2``: the spec's 2026-08 schemas;
#: ``s1``/``s2``: the newer ones bundled with the TypeScript SDK 2.4.0.
SCHEMA_SETS: dict[str, tuple[int, Path]] = {
    "v1": (1, DATA / "schemas" / "v1" / "schema.unstable.json"),
    "v2": (2, DATA / "schemas" / "v2" / "schema.unstable.json"),
    "s1": (1, DATA / "schemas" / "sdk-2.4.0" / "v1" / "schema.unstable.json"),
    "s2": (2, DATA / "schemas" / "sdk-2.4.0" / "v2" / "schema.unstable.json"),
}

TRANSCRIPTS = sorted((DATA / "transcripts").glob("*.jsonl"))


@functools.cache
def document(key: str) -> dict[str, Any]:
    """The whole schema document of a schema set."""
    data: dict[str, Any] = json.loads(SCHEMA_SETS[key][1].read_text())
    return data


def version_of(key: str) -> int:
    return SCHEMA_SETS[key][0]


def defs(key: str) -> dict[str, Any]:
    result: dict[str, Any] = document(key)["$defs"]
    return result


def has_def(key: str, name: str) -> bool:
    return name in defs(key)


@functools.cache
def _validator(key: str, name: str | None) -> Draft202012Validator:
    doc = document(key)
    schema = doc if name is None else {"$ref": f"#/$defs/{name}", "$defs": doc["$defs"]}
    return Draft202012Validator(schema)


def errors(key: str, name: str | None, instance: Any) -> list[str]:
    """Validation errors of ``instance`` against ``$defs[name]`` (``None``: the whole document)."""
    return [
        f"{'/'.join(str(p) for p in error.absolute_path)}: {error.message}"
        for error in _validator(key, name).iter_errors(instance)
    ]


def assert_valid(key: str, name: str | None, instance: Any) -> None:
    found = errors(key, name, instance)
    assert not found, f"{key} {name or 'document'} rejects {json.dumps(instance)}: {found}"


def transcript_messages(path: Path) -> list[dict[str, Any]]:
    """The recorded messages of a transcript (``{"dir", "conn", "msg"}`` lines; notes skipped)."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [line for line in lines if "msg" in line]


def transcript_version(path: Path) -> int:
    return 2 if "-v2-" in path.name else 1
