"""Hypothesis strategies generated from the ACP JSON schema definitions.

A small schema-to-strategy compiler covering what the ACP schemas use (``$ref``, ``allOf``,
``anyOf``/``oneOf``, ``const``, ``enum``, typed scalars, arrays, objects). It generates mostly valid
instances, and on purpose some that are not: extra unknown members, unknown union tags (the schemas'
``other`` alternatives), and, with ``garbage=True``, random JSON in place of optional members, to
exercise the decoder's leniency. ``not`` constraints are ignored.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.codec import _schemas

_KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzXYZ_", min_size=1, max_size=8)
_SCALARS = st.none() | st.booleans() | st.integers(-(2**31), 2**31) | st.text(max_size=12)
JSON = st.recursive(
    _SCALARS | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=6,
)


def _merge_objects(parts: list[dict[str, Any]]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for part in parts:
        properties.update(part.get("properties", {}))
        required.extend(part.get("required", []))
    return {"type": "object", "properties": properties, "required": sorted(set(required))}


class SchemaStrategies:
    """Builds strategies for the ``$defs`` of one schema set."""

    def __init__(self, key: str, *, garbage: bool = False, max_depth: int = 5) -> None:
        self.defs = _schemas.defs(key)
        self.garbage = garbage
        self.max_depth = max_depth  # optional members are left out below this depth
        self.hard_depth = max_depth + 10  # required members become arbitrary JSON below this one

    def for_def(self, name: str) -> st.SearchStrategy[Any]:
        return self.build({"$ref": f"#/$defs/{name}"}, 0)

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:  # a reference, maybe annotated (title, description, defaults...)
            target = self.defs[schema["$ref"].rsplit("/", 1)[1]]
            schema = {**target, **{k: v for k, v in schema.items() if k not in ("$ref", "title", "description")}}
        return schema

    def _flatten(self, schema: dict[str, Any]) -> list[dict[str, Any]]:
        """The object parts an ``allOf`` combines (references resolved)."""
        schema = self._resolve(schema)
        parts = [schema]
        for part in schema.get("allOf", []):
            parts.extend(self._flatten(part))
        return parts

    def build(self, schema: Any, depth: int) -> st.SearchStrategy[Any]:
        if not isinstance(schema, dict) or depth > self.hard_depth:
            return JSON
        schema = self._resolve(schema)
        if "const" in schema:
            return st.just(schema["const"])
        if "enum" in schema:
            return st.sampled_from(schema["enum"])
        for combinator in ("anyOf", "oneOf"):
            if combinator in schema:
                base = {k: v for k, v in schema.items() if k not in (combinator, "discriminator", "not", "title")}
                alternatives = []
                for option in schema[combinator]:
                    alternative = self._resolve(option)
                    if base.get("properties") or base.get("allOf"):
                        merged = _merge_objects([*self._flatten(base), *self._flatten(alternative)])
                        alternatives.append(self._object(merged, depth))
                    else:
                        alternatives.append(self.build(alternative, depth + 1))
                return st.one_of(alternatives)
        if "allOf" in schema:
            if len(schema["allOf"]) == 1 and "properties" not in schema and "type" not in schema:
                return self.build(schema["allOf"][0], depth)  # a described reference
            parts = self._flatten(schema)
            for index, part in enumerate(parts):
                for combinator in ("anyOf", "oneOf"):
                    if combinator in part:  # an allOf part that is itself a choice: pick one, merge
                        rest = parts[:index] + parts[index + 1 :]
                        options = [
                            self._object(_merge_objects([*rest, *self._flatten(alt)]), depth)
                            for alt in part[combinator]
                        ]
                        return st.one_of(options)
            return self._object(_merge_objects(parts), depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            return st.one_of([self.build({**schema, "type": k}, depth) for k in kind])
        if kind == "object" or (kind is None and "properties" in schema):
            return self._object(schema, depth)
        if kind == "array":
            items = self.build(schema.get("items", {}), depth + 1)
            return st.lists(items, min_size=schema.get("minItems", 0), max_size=min(schema.get("maxItems", 3), 3))
        if kind == "string":
            return st.text(max_size=12)
        if kind == "integer":
            low = schema.get("minimum", -(2**31))
            high = schema.get("maximum", 2**31)
            return st.integers(int(low), int(high))
        if kind == "number":
            return st.floats(allow_nan=False, allow_infinity=False, width=32)
        if kind == "boolean":
            return st.booleans()
        if kind == "null":
            return st.none()
        return JSON

    def _object(self, schema: dict[str, Any], depth: int) -> st.SearchStrategy[dict[str, Any]]:
        properties: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        required_parts = {name: self.build(prop, depth + 1) for name, prop in properties.items() if name in required}
        optional_parts: dict[str, st.SearchStrategy[Any]] = {}
        for name, prop in properties.items():
            if name in required or depth >= self.max_depth:
                continue
            value = self.build(prop, depth + 1)
            if self.garbage:
                value = st.one_of(value, value, value, JSON)
            optional_parts[name] = value
        base = st.fixed_dictionaries(required_parts, optional=optional_parts)
        extra = st.dictionaries(_KEYS.map(lambda k: f"x{k}"), JSON, max_size=2)
        return st.builds(lambda b, e: {**e, **b}, base, extra)
