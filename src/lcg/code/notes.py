"""Notes meet code: MENTIONS from a group's text episodes to the code symbols they name.

Owns the matching rules and the linking pass. A note names a symbol when its text contains the
symbol's qualified name (`billing.service.BillingService.charge`), its file's path
(`billing/service.py`), or a short name that is unambiguous in the group and cannot be an
ordinary word: it has an underscore or an inner capital (`parse_config`, `BillingService`), or
is written as a call (`charge()`), and is at least 4 characters long. Matches are whole words
(not inside a longer identifier or dotted name). Episodes the code graph wrote itself (`git:`
and `code:` sources) are not notes. The pass runs after each code ingest, adds only the links
that are missing (one `mentions.add` per episode through `Engine.write`), so a re-run with
nothing new writes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from lcg.engine import Engine
from lcg.storage.backend import GraphReader
from lcg.wal.changes import MentionsAdd, encode
from lcg.wal.records import Op

__all__ = ["link_notes", "names_in"]

_MIN_SHORT = 4
_WORDY = re.compile(r"^[a-z]+$|^[A-Z][a-z]+$")


def _distinctive(short: str) -> bool:
    """A short name that cannot be an ordinary word of prose."""
    if len(short) < _MIN_SHORT or short.startswith("__"):
        return False
    return "_" in short.strip("_") or any(c.isupper() for c in short[1:])


def names_in(text: str, names: dict[str, str], shorts: dict[str, str]) -> set[str]:
    """uuids of the symbols `text` names: `names` maps qualified names and paths to a uuid,
    `shorts` unambiguous short names to a uuid."""
    found: set[str] = set()
    for token in re.finditer(r"[\w./-]+(\(\))?", text):
        word = token.group(0)
        call = word.endswith("()")
        word = word.removesuffix("()").rstrip(".")
        if word in names:
            found.add(names[word])
            continue
        if "." in word or "/" in word:
            continue
        uuid = shorts.get(word)
        if uuid is not None and (call or (_distinctive(word) and not _WORDY.match(word))):
            found.add(uuid)
    return found


def _plan(conn: GraphReader, group_id: str) -> tuple[dict[str, Any], list[tuple[str, list[Op]]]]:
    names: dict[str, str] = {}
    by_short: dict[str, set[str]] = {}
    for uuid, name, labels, attributes in conn.rows(
        "MATCH (e:Entity) WHERE e.group_id = $g AND 'Code' IN e.labels "
        "RETURN e.uuid, e.name, e.labels, e.attributes",
        {"g": group_id},
    ):
        attrs = json.loads(attributes or "{}")
        if attrs.get("removed") or attrs.get("external") or "Module" in labels:
            continue
        names[name] = uuid
        if "File" not in labels:
            by_short.setdefault(name.rsplit(".", 1)[-1], set()).add(uuid)
    shorts = {s: next(iter(u)) for s, u in by_short.items() if len(u) == 1}
    linked = 0
    ops: list[Op] = []
    for episode, content in conn.rows(
        "MATCH (ep:Episode) WHERE ep.group_id = $g AND NOT (ep.source_description STARTS WITH "
        "'git:') AND NOT (ep.source_description STARTS WITH 'code:') RETURN ep.uuid, ep.content",
        {"g": group_id},
    ):
        wanted = names_in(content or "", names, shorts)
        if not wanted:
            continue
        have = {
            row[0]
            for row in conn.rows(
                "MATCH (ep:Episode {uuid: $u})-[:MENTIONS]->(e:Entity) RETURN e.uuid",
                {"u": episode},
            )
        }
        missing = sorted(wanted - have)
        if missing:
            ops.append(encode(MentionsAdd(episode, tuple(missing))))
            linked += len(missing)
    return {"notes_linked": len(ops), "mentions_added": linked}, [(group_id, ops)] if ops else []


async def link_notes(engine: Engine, group_id: str) -> dict[str, Any]:
    """Add the MENTIONS from the group's notes to the code symbols they name."""

    def plan(conn: GraphReader) -> tuple[dict[str, Any], Sequence[tuple[str, list[Op]]]]:
        return _plan(conn, group_id)

    return await engine.write(plan)
