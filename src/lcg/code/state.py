"""What the graph already holds of a group's code: its code entities and their live facts.

Owns the two reads a code sync starts from (one snapshot): every entity labelled `Code` in the
group, and every code fact (DEFINES, CONTAINS, IMPORTS, INHERITS, CALLS with a `file` attribute)
that is still current, grouped by the file that asserted it. The graph is the only record: the
content hash of each file is an attribute of its `File` entity, so a rebuild from the WAL keeps
what a re-run compares against.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import orjson

from lcg.code.resolve import PREDICATES, file_key, module_key, symbol_key
from lcg.engine import Engine
from lcg.models import Entity, Fact
from lcg.storage.backend import GraphReader
from lcg.storage.rows import stored_time

__all__ = ["CodeState", "is_symbol", "load_state", "read_file_hashes"]


_SYMBOL_LABELS = ("Class", "Function", "Method")


def is_symbol(entity: Entity) -> bool:
    return any(label in entity.labels for label in _SYMBOL_LABELS)


@dataclass
class CodeState:
    """The group's code entities and live code facts, with the indexes a sync looks things up
    by (so a history of many commits costs per commit what its files hold, not what the whole
    graph holds). Change it only through `put_entity`, `add_fact` and `end_fact`."""

    entities: dict[str, Entity] = field(default_factory=dict)  # uuid -> entity
    attrs: dict[str, dict[str, Any]] = field(default_factory=dict)  # uuid -> attributes
    by_key: dict[str, str] = field(default_factory=dict)  # entity key -> uuid
    # file uuid -> its live facts (fact uuid -> fact)
    owned: dict[str, dict[str, Fact]] = field(default_factory=lambda: defaultdict(dict))
    fact_keys: dict[str, tuple[str, str, str, str]] = field(default_factory=dict)
    fact_owner: dict[str, str] = field(default_factory=dict)  # fact uuid -> file uuid
    # entity uuid -> the live facts with it as an endpoint
    touching: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    # path -> uuids of the File and symbol entities (removed or not) whose path it is
    by_path: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    live_symbols: set[str] = field(default_factory=set)  # names of symbols not removed
    live_modules: dict[str, str] = field(default_factory=dict)  # path -> module of live files

    def key_of(self, entity: Entity) -> str:
        if "File" in entity.labels:
            return file_key(entity.name)
        if "Module" in entity.labels:
            return module_key(entity.name)
        return symbol_key(entity.name)

    def files(self) -> dict[str, str]:
        """path -> uuid of every File entity whose file exists (not deleted)."""
        return {
            e.name: u
            for u, e in self.entities.items()
            if "File" in e.labels and not self.attrs[u].get("removed")
        }

    def put_entity(self, entity: Entity, attrs: dict[str, Any]) -> None:
        """Record an entity's current version (new, or replacing the one of its uuid)."""
        previous = self.entities.get(entity.uuid)
        if previous is not None:
            self._unindex(previous, self.attrs[entity.uuid])
        self.entities[entity.uuid] = entity
        self.attrs[entity.uuid] = attrs
        self.by_key.setdefault(self.key_of(entity), entity.uuid)
        path = attrs.get("path")
        if isinstance(path, str):
            self.by_path[path].add(entity.uuid)
            if not attrs.get("removed"):
                if is_symbol(entity):
                    self.live_symbols.add(entity.name)
                elif "File" in entity.labels and attrs.get("module"):
                    self.live_modules[path] = str(attrs["module"])

    def _unindex(self, entity: Entity, attrs: dict[str, Any]) -> None:
        path = attrs.get("path")
        if not isinstance(path, str):
            return
        self.by_path[path].discard(entity.uuid)
        if not attrs.get("removed"):
            if is_symbol(entity):
                self.live_symbols.discard(entity.name)
            elif "File" in entity.labels:
                self.live_modules.pop(path, None)

    def add_fact(self, fact: Fact, key: tuple[str, str, str, str], owner: str) -> None:
        self.owned[owner][fact.uuid] = fact
        self.fact_keys[fact.uuid] = key
        self.fact_owner[fact.uuid] = owner
        self.touching[fact.source_uuid].add(fact.uuid)
        self.touching[fact.target_uuid].add(fact.uuid)

    def end_fact(self, uuid: str) -> None:
        owner = self.fact_owner.pop(uuid, None)
        if owner is None:
            return
        fact = self.owned[owner].pop(uuid)
        self.fact_keys.pop(uuid, None)
        self.touching[fact.source_uuid].discard(uuid)
        self.touching[fact.target_uuid].discard(uuid)


_ENTITY = (
    "MATCH (e:Entity) WHERE e.group_id = $g AND 'Code' IN e.labels "
    "RETURN e.uuid, e.name, e.labels, e.summary, e.attributes, e.created_at"
)
_FACTS = (
    "MATCH (f:Fact) WHERE f.group_id = $g AND f.invalid_at IS NULL AND f.expired_at IS NULL "
    "AND f.name IN $p {extra} RETURN f.uuid, f.name, f.source_uuid, f.target_uuid, f.attributes"
)
# Only the facts a batch of files can change: those the files asserted (their owner's uuid is
# in the attributes), and those of other files that point at the files' symbols.
_OWNED = "AND f.attributes CONTAINS $owner"
_TOUCHING = "AND (f.source_uuid IN $syms OR f.target_uuid IN $syms)"


def read_state(conn: GraphReader, group_id: str, paths: Collection[str] | None = None) -> CodeState:
    """The group's code entities, and its live code facts: all of them, or (`paths`) only
    those a batch of changes to these files can end."""
    state = CodeState()
    entities: list[tuple[Entity, dict[str, Any]]] = []
    for uuid, name, labels, summary, attributes, created in conn.rows(_ENTITY, {"g": group_id}):
        entity = Entity(
            uuid,
            group_id,
            name,
            tuple(labels or ()),
            summary or "",
            attributes or "{}",
            stored_time(created),
        )
        entities.append((entity, orjson.loads(attributes or "{}")))
    # The oldest entity of a key is the one its key designates.
    for entity, attrs in sorted(entities, key=lambda ea: (str(ea[0].created_at), ea[0].uuid)):
        state.put_entity(entity, attrs)
    params: dict[str, Any] = {"g": group_id, "p": list(PREDICATES)}
    if paths is None:
        rows = conn.rows(_FACTS.format(extra=""), params)
    else:
        owners = [state.by_key[file_key(p)] for p in paths if file_key(p) in state.by_key]
        syms = [u for u, a in state.attrs.items() if a.get("path") in paths]
        rows = []
        for owner in owners:
            rows += conn.rows(_FACTS.format(extra=_OWNED), {**params, "owner": owner})
        if syms:
            rows += conn.rows(_FACTS.format(extra=_TOUCHING), {**params, "syms": syms})
    seen: set[str] = set()
    for uuid, name, src, tgt, attributes in rows:
        if uuid in seen:
            continue
        seen.add(uuid)
        attrs = orjson.loads(attributes or "{}")
        owner = attrs.get("file")
        if not isinstance(owner, str):
            continue
        fact = Fact(uuid, group_id, src, tgt, name, "", attributes=attributes or "{}")
        state.add_fact(fact, (name, src, tgt, str(attrs.get("detail", ""))), owner)
    return state


async def load_state(
    engine: Engine, group_id: str, paths: Collection[str] | None = None
) -> CodeState:
    return await engine.read(lambda conn: read_state(conn, group_id, paths))


def read_file_hashes(conn: GraphReader, group_id: str) -> dict[str, str]:
    """path -> content hash of every file of the group that exists (what a re-run compares)."""
    out: dict[str, str] = {}
    for name, attributes in conn.rows(
        "MATCH (e:Entity) WHERE e.group_id = $g AND 'File' IN e.labels AND 'Code' IN e.labels "
        "RETURN e.name, e.attributes",
        {"g": group_id},
    ):
        attrs = json.loads(attributes or "{}")
        if not attrs.get("removed"):
            out[name] = str(attrs.get("content_hash", ""))
    return out
