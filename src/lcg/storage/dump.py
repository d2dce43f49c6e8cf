"""Paged reads of whole groups, for `knowledge_dump_wal` (a compacted WAL of the current graph).

Pages are keyset-paginated by uuid, so a page costs one indexed range scan however deep it is.
"""

from __future__ import annotations

from collections.abc import Iterator

from lcg.models import Entity, Episode, Fact
from lcg.storage.graph import ENTITY_COLS, EPISODE_COLS, FACT_COLS, _entity, _episode, _fact
from lcg.storage.store import Conn

__all__ = ["dump_groups", "entity_pages", "episode_pages", "fact_pages", "mention_pages"]


def dump_groups(conn: Conn) -> list[str]:
    """Every group id that owns an entity, fact or episode, sorted."""
    groups: set[str] = set()
    for table, alias in (("Entity", "e"), ("Fact", "f"), ("Episode", "ep")):
        groups.update(
            row[0]
            for row in conn.rows(f"MATCH ({alias}:{table}) RETURN DISTINCT {alias}.group_id")
            if isinstance(row[0], str)
        )
    return sorted(groups)


def _pages(
    conn: Conn, table: str, alias: str, cols: str, group: str, size: int
) -> Iterator[list[list[object]]]:
    after = ""
    while True:
        rows = conn.rows(
            f"MATCH ({alias}:{table}) WHERE {alias}.group_id = $g AND {alias}.uuid > $after "
            f"RETURN {cols} ORDER BY {alias}.uuid LIMIT $n",
            {"g": group, "after": after, "n": size},
        )
        if not rows:
            return
        yield rows
        if len(rows) < size:
            return
        after = str(rows[-1][0])


def entity_pages(conn: Conn, group: str, size: int = 500) -> Iterator[list[Entity]]:
    for rows in _pages(conn, "Entity", "e", ENTITY_COLS, group, size):
        yield [_entity(r) for r in rows]


def fact_pages(conn: Conn, group: str, size: int = 500) -> Iterator[list[Fact]]:
    for rows in _pages(conn, "Fact", "f", FACT_COLS, group, size):
        yield [_fact(r) for r in rows]


def episode_pages(conn: Conn, group: str, size: int = 500) -> Iterator[list[Episode]]:
    for rows in _pages(conn, "Episode", "ep", EPISODE_COLS, group, size):
        yield [_episode(r) for r in rows]


def mention_pages(conn: Conn, group: str, size: int = 500) -> Iterator[list[tuple[str, list[str]]]]:
    """(episode uuid, [entity uuids]) of the group's episodes that mention entities of the
    same group, `size` episodes a page."""
    after = ""
    while True:
        eps = conn.rows(
            "MATCH (ep:Episode)-[:MENTIONS]->(:Entity) WHERE ep.group_id = $g AND ep.uuid > $after "
            "RETURN DISTINCT ep.uuid ORDER BY ep.uuid LIMIT $n",
            {"g": group, "after": after, "n": size},
        )
        if not eps:
            return
        uuids = [str(r[0]) for r in eps]
        rows = conn.rows(
            "UNWIND $uuids AS u MATCH (ep:Episode {uuid: u})-[:MENTIONS]->(e:Entity) "
            "WHERE e.group_id = $g RETURN ep.uuid, e.uuid ORDER BY ep.uuid, e.uuid",
            {"uuids": uuids, "g": group},
        )
        linked: dict[str, list[str]] = {}
        for ep, ent in rows:
            linked.setdefault(ep, []).append(ent)
        page = [(u, linked[u]) for u in uuids if u in linked]
        if page:
            yield page
        if len(eps) < size:
            return
        after = uuids[-1]
