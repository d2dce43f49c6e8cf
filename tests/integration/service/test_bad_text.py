"""Text no method can mean is refused at the wire edge (lcg.service.params.refuse_bad_text).

- A NUL byte in any string parameter of any method, over the whole registry: the database and
  the file system cannot hold one; it gave "internal error" (a path) or was stored.
- A control character (U+0000-U+001F, U+007F) in a group id or an entity name: `"fuzz\\n"` was
  accepted as a group and logged under `fuzz%0A`.
- A path longer than any the OS accepts (100,000 characters): it gave "internal error".

Each is an `InvalidRequestError` naming the member, and nothing was written (the WAL root and
the graph are unchanged).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lcg import Engine, InvalidRequestError
from lcg.service.params import MAX_PATH_CHARS
from lcg.service.registry import REGISTRY, dispatch

pytestmark = pytest.mark.anyio

GROUP_FIELDS = ("group_id", "group_ids", "source_group_id")


def _kind(schema: dict[str, Any]) -> set[str]:
    """The JSON types a property's schema allows (through anyOf)."""
    kinds = {schema["type"]} if isinstance(schema.get("type"), str) else set()
    for option in schema.get("anyOf", []):
        kinds |= _kind(option)
    if "array" in kinds:
        items = schema.get("items") or next(
            (o.get("items") for o in schema.get("anyOf", []) if o.get("items")), {}
        )
        if "string" in _kind(items):
            kinds.add("array-of-strings")
    return kinds


def _string_members() -> list[tuple[str, str, str]]:
    """(method, member, json kind) for every string or array-of-strings member of every
    method's params."""
    found = []
    for name, method in REGISTRY.items():
        props = method.params.model_json_schema().get("properties", {})
        for member, schema in props.items():
            kinds = _kind(schema)
            if "string" in kinds:
                found.append((name, member, "string"))
            elif "array-of-strings" in kinds:
                found.append((name, member, "array"))
    return found


STRING_MEMBERS = _string_members()


async def _state(engine: Engine) -> tuple[list[tuple[str, bytes]], Any]:
    """Every WAL file's bytes and every entity."""
    wal = engine.settings.wal_dir
    files = sorted((str(p.relative_to(wal)), p.read_bytes()) for p in wal.rglob("*") if p.is_file())
    nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {})
    return files, nodes


def test_the_inventory_covers_the_registry() -> None:
    # Every method with text parameters is in it (the others declare no str member), and the
    # members a path or a group lives in.
    methods = {m for m, _, _ in STRING_MEMBERS}
    for name, method in REGISTRY.items():
        if name not in methods:
            annotations = [str(f.annotation) for f in method.params.model_fields.values()]
            assert not any("str" in a for a in annotations), (name, annotations)
    assert len(STRING_MEMBERS) > 100, len(STRING_MEMBERS)
    members = {f for _, f, _ in STRING_MEMBERS}
    assert {"path", "target_dir", "group_id", "group_ids", "name", "chunk_text"} <= members


@pytest.mark.parametrize(("method", "member", "kind"), STRING_MEMBERS)
async def test_a_nul_byte_in_any_string_parameter_is_refused(
    engine: Engine, method: str, member: str, kind: str
) -> None:
    await dispatch(engine, "knowledge_assert_entity", {"name": "Apollo 11"})
    before = await _state(engine)
    value: Any = "Apollo\x0011" if kind == "string" else ["Apollo\x0011"]
    with pytest.raises(InvalidRequestError, match="NUL byte") as caught:
        await dispatch(engine, method, {member: value})
    assert caught.value.field == member
    assert await _state(engine) == before


@pytest.mark.parametrize(
    ("method", "member"),
    sorted({(m, f) for m, f, _ in STRING_MEMBERS if f in GROUP_FIELDS}),
)
@pytest.mark.parametrize("bad", ["fuzz\n", "a\tb", "x\x7f", "\x1b[31mred"])
async def test_a_control_character_in_a_group_id_is_refused(
    engine: Engine, method: str, member: str, bad: str
) -> None:
    before = await _state(engine)
    value: Any = [bad] if member == "group_ids" else bad
    with pytest.raises(InvalidRequestError, match="control character") as caught:
        await dispatch(engine, method, {member: value})
    assert caught.value.field == member
    assert await _state(engine) == before


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("knowledge_assert_entity", {"name": "Apollo\n11"}),
        ("knowledge_assert_relationship", {"source_name": "A\rB", "target_name": "C"}),
        ("knowledge_assert_relationship", {"source_name": "A", "target_name": "C\x1f"}),
        (
            "knowledge_add_facts",
            {"reference_time": "2024-01-01", "entities": [{"name": "Tab\there"}], "facts": []},
        ),
        (
            "knowledge_add_facts",
            {
                "reference_time": "2024-01-01",
                "facts": [{"source": "A\n", "target": "B", "relation_type": "R", "fact": "A R B."}],
            },
        ),
        ("knowledge_merge_entities", {"canonical_name": "A\x00", "alias_names": ["B"]}),
        ("knowledge_merge_entities", {"canonical_name": "A", "alias_names": ["B\x7f"]}),
    ],
)
async def test_a_control_character_in_an_entity_name_is_refused(
    engine: Engine, method: str, params: dict[str, Any]
) -> None:
    before = await _state(engine)
    with pytest.raises(InvalidRequestError, match=r"control character|NUL byte"):
        extra = {"predicate": "KNOWS"} if method == "knowledge_assert_relationship" else {}
        await dispatch(engine, method, {**extra, **params})
    assert await _state(engine) == before


async def test_printable_names_and_groups_are_still_written(engine: Engine) -> None:
    # Spaces, slashes, accents and emoji are text; only control characters are refused.
    await dispatch(engine, "knowledge_assert_entity", {"name": "Zoë 🚀", "group_id": "team/ops x"})
    nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": ["team/ops x"]})
    assert [n["name"] for n in nodes["nodes"]] == ["Zoë 🚀"]


@pytest.mark.parametrize(
    ("method", "member"),
    [(m, f) for m, f, _ in STRING_MEMBERS if f in ("path", "target_dir")],
)
async def test_an_over_long_path_is_refused(
    engine: Engine, tmp_path: Path, method: str, member: str
) -> None:
    before = await _state(engine)
    for value in ("x" * 100_000, "x" * (MAX_PATH_CHARS + 1)):
        with pytest.raises(InvalidRequestError, match="at most") as caught:
            await dispatch(engine, method, {member: value})
        assert caught.value.field == member
    # Within the limit but with a component the OS refuses (longer than NAME_MAX): refused
    # as a validation error too, not an internal one.
    with pytest.raises(InvalidRequestError):
        await dispatch(engine, method, {member: str(tmp_path / ("y" * 300) / "z.jsonl")})
    assert await _state(engine) == before
