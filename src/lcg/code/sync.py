"""Committing changed files as one episode: the diff between what the graph holds and what the
files now say, written through `Engine.commit_episode`.

Owns entity identity and the bi-temporal diff. An entity's uuid is derived from the group and
its key (`file:<path>`, `module:<name>`, `sym:<qualified name>`) the first time it appears, so
a re-run or a rebuild finds the same one; a key already in the graph keeps its entity, and a
file renamed by git keeps its `File` entity (and so its facts). Symbols are keyed by qualified
name: where the module name follows the file name (Python, TypeScript) a rename ends them under
the old name and starts them under the new one; where it does not (a Go file renamed within its
package) nothing about them changes. A fact is keyed by (predicate,
source, target, detail — the signature for DEFINES/CONTAINS) and owned by the file that
asserted it: a fact the file no longer asserts ends (`invalid_at` = the episode's reference
time, `expired_at` = now), a new one starts at the reference time. Nothing is deleted.
"""

from __future__ import annotations

import itertools
import json
import uuid as uuidlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio

from lcg.code.extract import FileStructure
from lcg.code.resolve import DesiredFact, EntitySpec, desired_file, qualified
from lcg.code.state import CodeState, is_symbol, load_state
from lcg.engine import Engine, EpisodeCommit, Invalidation
from lcg.engine.follow import lost_race
from lcg.models import Entity, Episode, Fact, canonical_attributes
from lcg.storage.backend import GroupMovedError
from lcg.timeutil import now, to_wal

__all__ = ["BatchResult", "FileChange", "commit_changes", "plan_changes"]

_NAMESPACE = uuidlib.UUID("6c5b1e9e-6a43-4f0e-9a3c-2f7d0c0de000")


@dataclass(frozen=True)
class FileChange:
    """One file of a batch: its new structure (None: deleted), and its old path if renamed."""

    path: str
    structure: FileStructure | None
    content_hash: str = ""
    old_path: str | None = None


@dataclass
class BatchResult:
    episode_uuid: str | None = None
    files: int = 0
    symbols_added: list[str] = field(default_factory=list)
    symbols_removed: list[str] = field(default_factory=list)
    signatures_changed: list[str] = field(default_factory=list)
    symbols_renamed: list[tuple[str, str]] = field(default_factory=list)  # (old, new) names
    facts_started: int = 0
    facts_ended: int = 0
    entities_written: int = 0
    unresolved_calls: int = 0
    unresolved_bases: int = 0


def _uuid(*parts: str) -> str:
    return str(uuidlib.uuid5(_NAMESPACE, "\x00".join(parts)))


async def commit_changes(
    engine: Engine,
    group_id: str,
    changes: Sequence[FileChange],
    *,
    when: datetime,
    name: str,
    description: str,
    content: str = "",
    state: CodeState | None = None,
) -> BatchResult:
    """Write one batch of file changes as one episode at reference time `when`.

    `state`: what the graph holds, read before (None: read now). It is updated with what the
    batch wrote; a failed commit leaves it unusable (the caller stops). In server mode a commit
    that lost the race to another process (nothing applied, the engine caught up) reads the
    state again and plans again (no model call; the episode's vectors are computed outside
    the write lock), up to `follow.ATTEMPTS` times, then `ConflictError`.
    """
    paths = {c.path for c in changes} | {c.old_path for c in changes if c.old_path}
    for attempt in itertools.count(1):
        if state is None:  # only the facts these files can end are read
            state = await load_state(engine, group_id, paths)
        planned = plan_changes(state, group_id, changes, when, name, description, content)
        if planned is None:
            return BatchResult(files=len(changes))
        commit, result = planned
        try:
            await engine.commit_episode(commit)
        except GroupMovedError as exc:
            await anyio.sleep(lost_race(exc, attempt))
            state = None  # `plan_changes` changed it as if committed: read it again
            continue
        return result
    raise AssertionError("unreachable: lost_race raises after the last attempt")


def plan_changes(
    state: CodeState,
    group_id: str,
    changes: Sequence[FileChange],
    when: datetime,
    name: str,
    description: str,
    content: str = "",
) -> tuple[EpisodeCommit, BatchResult] | None:
    """The episode a batch of file changes is (None: it changes nothing), with `state` brought
    up to date as if it were committed: a caller planning commit after commit (history) reads
    the graph once and may commit several planned episodes together
    (`Engine.commit_episode` of a list). If the episode is then not committed, `state` is
    unusable."""
    planned = _plan(state, group_id, changes, when, name, description, content)
    if planned is not None:
        _apply(state, planned[0])
    return planned


def _apply(state: CodeState, commit: EpisodeCommit) -> None:
    """Bring `state` up to date with a committed batch."""
    for entity in commit.entities:
        state.put_entity(entity, json.loads(entity.attributes))
    for inv in commit.invalidations:
        state.end_fact(inv.fact_uuid)
    for fact in commit.facts:
        attrs = json.loads(fact.attributes)
        if "file" not in attrs:  # RENAMED_TO: owned by no file, never ended by a sync
            continue
        key = (fact.name, fact.source_uuid, fact.target_uuid, str(attrs.get("detail", "")))
        state.add_fact(fact, key, str(attrs["file"]))


def _plan(
    state: CodeState,
    group_id: str,
    changes: Sequence[FileChange],
    when: datetime,
    name: str,
    description: str,
    content: str,
) -> tuple[EpisodeCommit, BatchResult] | None:
    result = BatchResult(files=len(changes))
    stamp = now()
    taken = set(state.entities)

    def new_uuid(key: str) -> str:
        n = 0
        while True:
            candidate = _uuid(group_id, key, str(n))
            if candidate not in taken:
                taken.add(candidate)
                return candidate
            n += 1

    changed_paths = {c.path for c in changes} | {c.old_path for c in changes if c.old_path}
    # Renames: the File entity follows the file (its facts with it: they are owned by its uuid).
    renamed: dict[str, str] = {}  # new path -> old path
    for change in changes:
        if change.old_path and f"file:{change.old_path}" in state.by_key:
            file_uuid = state.by_key.pop(f"file:{change.old_path}")
            state.by_key[f"file:{change.path}"] = file_uuid
            renamed[change.path] = change.old_path
    # Everything the repository defines once this batch is applied.
    in_changed = sorted(
        (u for p in changed_paths for u in state.by_path.get(p, ())),
        key=lambda u: (state.entities[u].name, u),
    )
    known_symbols = state.live_symbols - {
        state.entities[u].name
        for u in in_changed
        if is_symbol(state.entities[u]) and not state.attrs[u].get("removed")
    }
    known_modules = {m for p, m in state.live_modules.items() if p not in changed_paths}
    for c in changes:
        if c.structure is not None:
            known_modules.add(c.structure.module)
            known_symbols.update(
                qualified(c.structure, s) for s in c.structure.symbols if s.kind != "impl"
            )
    desired = [
        desired_file(c.structure, known_symbols, known_modules, c.content_hash)
        for c in changes
        if c.structure is not None
    ]
    # Entity specs, merged by key: a real definition wins over a placeholder.
    specs: dict[str, EntitySpec] = {}
    for d in desired:
        result.unresolved_calls += d.unresolved_calls
        result.unresolved_bases += d.unresolved_bases
        for spec in d.entities:
            old = specs.get(spec.key)
            if old is None or len(spec.attributes) >= len(old.attributes):
                specs[spec.key] = spec
    uuids: dict[str, str] = {}

    def uuid_of(key: str) -> str:
        found = uuids.get(key) or state.by_key.get(key)
        if found is None:
            found = new_uuid(key)
        uuids[key] = found
        return found

    entities: dict[str, Entity] = {}
    defined: set[str] = set()
    appeared: dict[str, EntitySpec] = {}  # uuid -> spec of each symbol new (or back) in this batch
    for key, spec in specs.items():
        u = uuid_of(key)
        attrs = dict(spec.attributes)
        previous = state.entities.get(u)
        if spec.label == "File":
            # The paths a file had before (canonical_attributes keeps a list as JSON text).
            earlier = json.loads(state.attrs[u].get("renamed_from") or "[]") if previous else []
            if spec.attributes.get("path") in renamed:
                earlier.append(renamed[str(spec.attributes["path"])])
            if earlier:
                attrs["renamed_from"] = earlier
        if previous is not None and "path" not in attrs:  # a placeholder: keep what is known
            attrs = {**state.attrs[u], **attrs}
        if "path" in attrs:
            defined.add(u)
        entity = Entity(
            u,
            group_id,
            spec.name,
            ("Entity", "Code", spec.label),
            _summary(attrs),
            canonical_attributes(attrs),
            previous.created_at if previous is not None else stamp,
        )
        if previous is None or (
            previous.name,
            previous.labels,
            previous.summary,
            previous.attributes,
        ) != (entity.name, entity.labels, entity.summary, entity.attributes):
            entities[u] = entity
        defines_symbol = spec.label in ("Class", "Function", "Method") and "path" in attrs
        if defines_symbol and (previous is None or state.attrs[u].get("removed")):
            result.symbols_added.append(spec.name)
            appeared[u] = spec
    # Symbols and files of the changed paths that nothing defines any more.
    gone_uuids: set[str] = set()
    for u in in_changed:
        e, attrs = state.entities[u], state.attrs[u]
        if u in defined or attrs.get("removed"):
            continue
        if is_symbol(e) or "File" in e.labels:
            gone = {**attrs, "removed": True}
            entities[u] = Entity(
                u, group_id, e.name, e.labels, e.summary, canonical_attributes(gone), e.created_at
            )
            if is_symbol(e):
                result.symbols_removed.append(e.name)
                gone_uuids.add(u)
    # Renames: the old symbol is superseded by the new one (a RENAMED_TO fact), not removed.
    episode_uuid = _uuid(group_id, "episode", name, to_wal(when) or "")
    new_facts: list[Fact] = []
    for old_u, new_u in _renames(state, gone_uuids, appeared, renamed):
        was, now_spec = state.entities[old_u], appeared[new_u]
        result.symbols_removed.remove(was.name)
        result.symbols_added.remove(now_spec.name)
        result.symbols_renamed.append((was.name, now_spec.name))
        superseded = {**state.attrs[old_u], "removed": True, "renamed_to": now_spec.name}
        entities[old_u] = Entity(
            old_u,
            group_id,
            was.name,
            was.labels,
            was.summary,
            canonical_attributes(superseded),
            was.created_at,
        )
        earlier = json.loads(state.attrs[old_u].get("renamed_from") or "[]")
        renamed_entity = entities[new_u]
        new_attrs = {**json.loads(renamed_entity.attributes), "renamed_from": [*earlier, was.name]}
        entities[new_u] = Entity(
            new_u,
            group_id,
            renamed_entity.name,
            renamed_entity.labels,
            renamed_entity.summary,
            canonical_attributes(new_attrs),
            renamed_entity.created_at,
        )
        # No `file` attribute: no file asserts a rename, so no later change of a file ends it.
        new_facts.append(
            Fact(
                _uuid(group_id, "RENAMED_TO", old_u, new_u, to_wal(when) or ""),
                group_id,
                old_u,
                new_u,
                "RENAMED_TO",
                f"{was.name} renamed to {now_spec.name}",
                relation_type="RENAMED_TO",
                episodes=(episode_uuid,),
                valid_at=when,
                created_at=stamp,
            )
        )
    # Facts: per changed file, what it asserts now against what it asserted.
    ended: list[Invalidation] = []
    by_path = {d.path: d for d in desired}
    for change in changes:
        owner = state.by_key.get(f"file:{change.path}") or uuids.get(f"file:{change.path}")
        if owner is None:
            continue
        current = {state.fact_keys[u]: f for u, f in state.owned.get(owner, {}).items()}
        wanted: dict[tuple[str, str, str, str], DesiredFact] = {}
        asserted = by_path.get(change.path)
        for want in asserted.facts if asserted is not None else []:
            wanted[(want.predicate, uuid_of(want.source), uuid_of(want.target), want.detail)] = want
        for fkey, stale in current.items():
            if fkey not in wanted:
                ended.append(Invalidation(stale.uuid, when, stamp))
        for fkey, want in wanted.items():
            if fkey in current:
                continue
            predicate, source, target, detail = fkey
            fact_attrs: dict[str, Any] = {"file": owner}
            if detail:
                fact_attrs["detail"] = detail
            new_facts.append(
                Fact(
                    _uuid(group_id, *fkey, owner, to_wal(when) or ""),
                    group_id,
                    source,
                    target,
                    predicate,
                    want.text,
                    relation_type=predicate,
                    attributes=canonical_attributes(fact_attrs),
                    episodes=(episode_uuid,),
                    valid_at=when,
                    created_at=stamp,
                )
            )
    # Facts of unchanged files about a symbol that is gone (a call into it) end with it.
    ending = {inv.fact_uuid for inv in ended}
    for fact_uuid in sorted({f for u in gone_uuids for f in state.touching.get(u, ())}):
        if fact_uuid not in ending:
            ended.append(Invalidation(fact_uuid, when, stamp))
            ending.add(fact_uuid)
    # A symbol whose defining fact was replaced by one with another signature.
    started = {f.target_uuid for f in new_facts if f.name in ("DEFINES", "CONTAINS")}
    replaced = {
        state.fact_keys[inv.fact_uuid][2]
        for inv in ended
        if state.fact_keys[inv.fact_uuid][0] in ("DEFINES", "CONTAINS")
    }
    added = set(result.symbols_added)
    result.signatures_changed = sorted(
        state.entities[u].name
        for u in started & replaced
        if u in state.entities
        and is_symbol(state.entities[u])
        and state.entities[u].name not in added
    )
    result.facts_started, result.facts_ended = len(new_facts), len(ended)
    result.entities_written = len(entities)
    if not new_facts and not ended and not entities:
        return None
    result.episode_uuid = episode_uuid
    episode = Episode(
        episode_uuid,
        group_id,
        name,
        content or _episode_text(changes, result),
        source_description=description,
        created_at=stamp,
        valid_at=when,
    )
    mentions = [u for u in entities if u in defined]
    commit = EpisodeCommit(
        group_id, episode, list(entities.values()), new_facts, ended, mentions=mentions
    )
    return commit, result


def _renames(
    state: CodeState,
    gone: set[str],
    added: dict[str, EntitySpec],
    renamed: dict[str, str],
) -> list[tuple[str, str]]:
    """(old uuid, new uuid) of the symbols a batch renamed or moved: one gone and one new of
    the same kind that either keep their name inside the module of a file git renamed, or have
    the same body (a body hash no other gone or new symbol of the batch shares)."""
    old_paths = {old: new for new, old in renamed.items()}
    pairs: list[tuple[str, str]] = []
    taken_old: set[str] = set()
    taken_new: set[str] = set()

    def label(labels: tuple[str, ...]) -> str:
        return next((x for x in labels if x in ("Class", "Function", "Method")), "")

    by_local: dict[tuple[str, str, str], str] = {}  # (new path, label, local) -> new uuid
    for u, spec in added.items():
        by_local[(str(spec.attributes.get("path")), spec.label, spec.local)] = u
    for u in sorted(gone, key=lambda u: state.entities[u].name):
        attrs, e = state.attrs[u], state.entities[u]
        new_path = old_paths.get(str(attrs.get("path")))
        if new_path is None:
            continue
        module = str(attrs.get("module", ""))
        local = e.name[len(module) + 1 :] if module and e.name.startswith(module + ".") else e.name
        found = by_local.get((new_path, label(e.labels), local))
        if found is not None and found not in taken_new:
            pairs.append((u, found))
            taken_old.add(u)
            taken_new.add(found)
    olds: dict[tuple[str, str], list[str]] = {}
    for u in gone - taken_old:
        digest = str(state.attrs[u].get("body_hash") or "")
        if digest:
            olds.setdefault((label(state.entities[u].labels), digest), []).append(u)
    news: dict[tuple[str, str], list[str]] = {}
    for u, spec in added.items():
        digest = str(spec.attributes.get("body_hash") or "")
        if digest and u not in taken_new:
            news.setdefault((spec.label, digest), []).append(u)
    for key, candidates in sorted(olds.items()):
        if len(candidates) == 1 and len(news.get(key, ())) == 1:
            pairs.append((candidates[0], news[key][0]))
    return pairs


def _summary(attrs: dict[str, Any]) -> str:
    """What search and knowledge_get_context show of a symbol: where it is, its signature and
    the first line of its docstring (`src/a.py:4-7 def foo(x) — Return x doubled.`)."""
    where = ""
    if attrs.get("path") and attrs.get("line_start"):
        where = f"{attrs['path']}:{attrs['line_start']}-{attrs['line_end']}"
    elif attrs.get("path") and attrs.get("code") == "file":
        where = f"{attrs.get('language', '')} file, {attrs.get('lines', 0)} lines"
    parts = [p for p in (where, str(attrs.get("signature") or "")) if p]
    doc = str(attrs.get("doc") or "")
    return " ".join(parts) + (f" — {doc}" if doc else "")


def _episode_text(changes: Sequence[FileChange], result: BatchResult) -> str:
    lines = [f"code: {len(changes)} files"]
    for label, names in (
        ("added", result.symbols_added),
        ("removed", result.symbols_removed),
        ("signature changed", result.signatures_changed),
        ("renamed", [f"{a} -> {b}" for a, b in result.symbols_renamed]),
    ):
        if names:
            shown = ", ".join(names[:20]) + (
                f" and {len(names) - 20} more" if len(names) > 20 else ""
            )
            lines.append(f"{label}: {shown}")
    return "\n".join(lines)
