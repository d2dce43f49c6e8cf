"""The resolution index of one group: what ingestion matches new entities and facts against.

Per group, in memory: the entities with their name keys (normalised name, punctuation-free
key, aliases, acronym) and name vectors, and the active facts with their vectors and adjacency.
Superseded facts (ended in the world and retired by the graph) are kept apart, keyed by
their endpoints, relation type, sentence and start, so that the same fact told again by a new
episode becomes a mention of the stored one instead of a second copy (docs/facts.md).
It is loaded from the committed graph on first use, updated from each episode the pipeline
commits, and reloaded whenever the group's WAL moved past the position it was built at (any
other writer — a direct assert, a merge, a delete, raw Cypher — shows up there). It is one of
the projections of the WAL (lcg.wal.projection): `apply` takes other processes' committed
batches of the group in place (server mode, lcg.ingest.catchup), `reload` marks it for a reload. Resolution thus
costs O(extracted items), not O(graph): no scan per episode, no per-entity query.

Only the event loop thread mutates an index; loading runs in a worker thread and is swapped in.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from lcg.embedding.base import Vectors
from lcg.models import EmbeddingRow, Entity, Fact, normalize_name
from lcg.wal.changes import (
    Change,
    CypherExec,
    EntityUpsert,
    EpisodeAdd,
    EpisodeDelete,
    FactInvalidate,
    FactUpsert,
    GroupPurge,
    MentionsAdd,
)

RetiredKey = tuple[str, str, str, str, str]  # source, target, relation type, sentence, valid_at

__all__ = [
    "GroupIndex",
    "Matrix",
    "RetiredKey",
    "acronym",
    "aliases_of",
    "canon",
    "is_acronym_like",
    "numbers",
    "retired_key",
    "sentence_key",
]

_STOPWORDS = frozenset({"of", "and", "the", "for", "a", "an", "in", "on", "at", "to", "de", "&"})
_PAREN_ACRONYM = re.compile(r"\(([A-Z][A-Z0-9.&-]{1,11})\)")
_WORD = re.compile(r"[^\W\d_][\w'’-]*|\d+")
_POSSESSIVES = ("'s", "’s")  # cut from a word's end
_MENTION_WORDS = 6  # the longest name run `GroupIndex.mentioned` looks up
_NON_WORD = re.compile(r"[\W_]+")
# `VIRTUAL_ENV`, `NO_PROXY`, `PY_3_12`: upper-case letters and digits joined by underscores.
_CONSTANT = re.compile(r"[A-Z][A-Z0-9]*(?:_+[A-Z0-9]+)+")
_NON_WORD_KEPT_UNDERSCORE = re.compile(r"[^\w]+")
_DIGITS = re.compile(r"\d+")
# The name keys below are pure functions of a string, asked again and again for the same words
# and names (every word of every episode by `mentioned`, every candidate by resolution): each
# remembers its last answers.
_KEYS_CACHED = 1 << 13  # strings a function (a few MB at most)


def sentence_key(text: str) -> str:
    """A fact sentence for comparison: case-folded, whitespace collapsed, no final period."""
    return " ".join(text.casefold().split()).rstrip(".")


def retired_key(fact: Fact) -> RetiredKey | None:
    """What makes two facts the same told twice; None for a fact with no start."""
    if fact.valid_at is None:
        return None
    return (
        fact.source_uuid,
        fact.target_uuid,
        fact.relation_type or "",
        sentence_key(fact.fact),
        fact.valid_at.isoformat(),
    )


@lru_cache(maxsize=_KEYS_CACHED)
def canon(name: str) -> str:
    """Case-folded with every non-word character removed: `N.A.S.A.` -> `nasa`.

    An ALL_CAPS identifier with an underscore (`VIRTUAL_ENV`, an environment variable or a
    constant) keeps its underscores: its case and punctuation are what tell it from the word
    its letters spell (the `virtualenv` package), so the two never share a key.
    """
    if _CONSTANT.fullmatch(name.strip()):
        return _NON_WORD_KEPT_UNDERSCORE.sub("", name.casefold())
    key = _NON_WORD.sub("", name.casefold())
    return key or normalize_name(name)


@lru_cache(maxsize=_KEYS_CACHED)
def numbers(name: str) -> tuple[str, ...]:
    """The digit runs of a name: names with different numbers never match fuzzily."""
    return tuple(_DIGITS.findall(name))


@lru_cache(maxsize=_KEYS_CACHED)
def is_acronym_like(name: str) -> bool:
    """`NASA`, `N.A.S.A.`, `ESA`: 2-8 letters, all upper case."""
    if name[:1].isalpha() and not name[:1].isupper():
        return False  # most words: decided by their first letter
    letters = [c for c in name if c.isalpha()]
    return 2 <= len(letters) <= 8 and all(c.isupper() for c in letters) and not numbers(name)


@lru_cache(maxsize=_KEYS_CACHED)
def acronym(name: str) -> str | None:
    """Initials of the significant words of a multi-word name without digits, or None."""
    words = _WORD.findall(name)
    if any(w.isdigit() for w in words):
        return None
    significant = [w for w in words if w.casefold() not in _STOPWORDS]
    if len(significant) < 2:
        return None
    return "".join(w[0] for w in significant).casefold()


def aliases_of(entity: Entity) -> list[str]:
    """Other names an entity is known by: its `aliases` attribute and `(ACRONYM)`s in its summary."""
    out: list[str] = []
    try:
        raw = json.loads(entity.attributes or "{}").get("aliases")
        listed = json.loads(raw) if isinstance(raw, str) and raw.startswith("[") else raw
    except (ValueError, AttributeError):
        listed = None
    if isinstance(listed, list):
        out += [a for a in listed if isinstance(a, str) and a.strip()]
    elif isinstance(listed, str) and listed.strip():
        out.append(listed)
    out += _PAREN_ACRONYM.findall(entity.summary or "")
    return out


class Matrix:
    """Rows of vectors addressed by owner id, growing by doubling (amortised O(1) appends)."""

    def __init__(self, dim: int) -> None:
        self._rows: Vectors = np.zeros((64, dim), dtype=np.float32)
        self._count = 0
        self.ids: list[str] = []
        self._row_of: dict[str, int] = {}

    def put(self, owner: str, vec: Vectors) -> None:
        row = self._row_of.get(owner)
        if row is None:
            if self._count == len(self._rows):
                grown = np.zeros((len(self._rows) * 2, self._rows.shape[1]), dtype=np.float32)
                grown[: self._count] = self._rows[: self._count]
                self._rows = grown
            row = self._count
            self._count += 1
            self.ids.append(owner)
            self._row_of[owner] = row
        self._rows[row] = vec

    def get(self, owner: str) -> Vectors | None:
        row = self._row_of.get(owner)
        return None if row is None else self._rows[row]

    def view(self) -> Vectors:
        return self._rows[: self._count]

    def scores(self, owners: Sequence[str], query: Vectors, missing: float) -> Vectors:
        """`query`'s dot product with each owner's row (`missing` for owners without one)."""
        rows = np.array([self._row_of.get(o, -1) for o in owners], dtype=np.int64)
        out = np.full(len(owners), missing, dtype=np.float32)
        known = rows >= 0
        out[known] = self._rows[rows[known]] @ query
        return out


@dataclass
class GroupIndex:
    """Entities and active facts of one group, keyed for resolution."""

    group_id: str
    dim: int
    # (WAL generation, next seq) the index reflects; None: must be reloaded before use.
    position: tuple[str | None, int] | None = None
    entities: dict[str, Entity] = field(default_factory=dict)
    by_norm: dict[str, str] = field(default_factory=dict)
    by_key: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    by_acronym: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    names: Matrix | None = None
    facts: dict[str, Fact] = field(default_factory=dict)
    facts_of: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    fact_vectors: Matrix | None = None
    # Superseded facts (invalid_at and expired_at set), by `retired_key`.
    retired: dict[RetiredKey, Fact] = field(default_factory=dict)
    retired_keys: dict[str, RetiredKey] = field(default_factory=dict)  # uuid -> its key

    def __post_init__(self) -> None:
        self.names = self.names or Matrix(self.dim)
        self.fact_vectors = self.fact_vectors or Matrix(self.dim)

    # -- following the WAL (lcg.wal.projection.Projection) --------------------------------------

    def apply(self, group: str, changes: Sequence[Change], vectors: Sequence[EmbeddingRow]) -> None:
        """Take a committed batch of the group in place when it holds only what ingestion itself
        writes (new or updated entities under their name, facts, supersessions, episodes,
        mentions); anything else (a merge, a rename, a delete, a purge, a raw statement) marks
        the index for a reload instead. `vectors`: the batch's rows, of which the `entity_name`
        rows of new entities and the `fact` rows are used. The position is the caller's."""
        if group != self.group_id:
            return
        if not all(self._takes(change) for change in changes):
            self.reload()
            return
        new = {
            c.entity.uuid
            for c in changes
            if isinstance(c, EntityUpsert) and c.entity.uuid not in self.entities
        }
        vec = {row.key: row.vec for row in vectors}
        for change in changes:
            match change:
                case EntityUpsert(entity):
                    known = entity.uuid not in new
                    self.put_entity(
                        entity, None if known else vec.get(f"entity_name:{entity.uuid}")
                    )
                case FactUpsert(fact):
                    self.put_fact(fact, vec.get(f"fact:{fact.uuid}"))
                case FactInvalidate(uuid, invalid_at, expired_at):
                    held = self.facts.get(uuid)
                    if held is not None:
                        self.put_fact(
                            dataclasses.replace(held, invalid_at=invalid_at, expired_at=expired_at),
                            None,
                        )
                case EpisodeAdd() | MentionsAdd() | EpisodeDelete() | GroupPurge() | CypherExec():
                    pass

    def _takes(self, change: Change) -> bool:
        """Whether `apply` takes the change in place."""
        match change:
            case EntityUpsert(entity):
                known = self.entities.get(entity.uuid)
                return "Merged" not in entity.labels and (
                    known is None or known.name == entity.name
                )
            case FactUpsert() | FactInvalidate() | EpisodeAdd() | MentionsAdd():
                return True
            case EpisodeDelete() | GroupPurge() | CypherExec():
                return False

    def reload(self, groups: Sequence[str] | None = None) -> None:
        """Mark the index for a reload from the committed graph before its next use (the
        pipeline's), when `groups` (None: every group) holds its group."""
        if groups is None or self.group_id in groups:
            self.position = None

    # -- entities ------------------------------------------------------------------------------

    def put_entity(self, entity: Entity, name_vec: Vectors | None) -> None:
        if "Merged" in entity.labels:
            return
        self.entities[entity.uuid] = entity
        self.by_norm.setdefault(normalize_name(entity.name), entity.uuid)
        for key in [canon(entity.name), *map(canon, aliases_of(entity))]:
            if entity.uuid not in self.by_key[key]:
                self.by_key[key].append(entity.uuid)
        acr = acronym(entity.name)
        if acr and entity.uuid not in self.by_acronym[acr]:
            self.by_acronym[acr].append(entity.uuid)
        if name_vec is not None:
            assert self.names is not None
            self.names.put(entity.uuid, name_vec)

    def lookup_norm(self, name: str) -> str | None:
        return self.by_norm.get(normalize_name(name))

    def lookup_keys(self, name: str, aliases: Iterable[str] = ()) -> str | None:
        """Exact key matches: the name or an alias without punctuation, and acronyms both ways."""
        for alias in (name, *aliases):
            hits = self.by_key.get(canon(alias))
            if hits:
                return hits[0]
            if is_acronym_like(alias) and (hits := self.by_acronym.get(canon(alias))):
                return hits[0]
        acr = acronym(name)
        if acr:
            for uuid in self.by_key.get(acr, ()):
                if is_acronym_like(self.entities[uuid].name) or uuid in self.by_acronym.get(
                    acr, ()
                ):
                    return uuid
        return None

    def mentioned(self, text: str, limit: int) -> list[str]:
        """Entities the text names, in order of first mention, at most `limit`.

        A mention is a run of up to six words (other than one stopword alone) whose
        punctuation-free key is an entity's name or alias key ("N.A.S.A." finds "NASA"), or an
        acronym-like word matching a name's initials. Costs O(words), never a pass over the group.
        """
        words = [w[:-2] if w.endswith(_POSSESSIVES) else w for w in _WORD.findall(text)]
        keys = [canon(w) for w in words]
        by_key, count = self.by_key, len(words)
        out: dict[str, None] = {}
        for i, word in enumerate(words):
            if is_acronym_like(word):
                out.update(dict.fromkeys(self.by_acronym.get(keys[i], ())))
            key = ""
            for j in range(i, min(i + _MENTION_WORDS, count)):
                key += keys[j]
                # Most runs name nothing: look up first, build nothing for a miss (this loop
                # ran ~4 ms an episode on a 3,000-character article).
                hits = by_key.get(key)
                if hits and (j > i or key not in _STOPWORDS):
                    out.update(dict.fromkeys(hits))
            if len(out) >= limit:
                break
        return list(out)[:limit]

    # -- facts ---------------------------------------------------------------------------------

    def put_fact(self, fact: Fact, vec: Vectors | None) -> None:
        if fact.expired_at is not None:
            self.drop_fact(fact.uuid)
            self.retire(fact)
            return
        self.facts[fact.uuid] = fact
        self.facts_of[fact.source_uuid].add(fact.uuid)
        self.facts_of[fact.target_uuid].add(fact.uuid)
        if vec is not None:
            assert self.fact_vectors is not None
            self.fact_vectors.put(fact.uuid, vec)

    def drop_fact(self, uuid: str) -> None:
        fact = self.facts.pop(uuid, None)
        if fact is not None:
            self.facts_of[fact.source_uuid].discard(uuid)
            self.facts_of[fact.target_uuid].discard(uuid)
        key = self.retired_keys.pop(uuid, None)
        if key is not None:
            self.retired.pop(key, None)

    def retire(self, fact: Fact) -> None:
        """Remember a superseded fact (a retracted one, never valid, is not remembered)."""
        key = retired_key(fact) if fact.invalid_at is not None else None
        if key is not None and fact.expired_at is not None:
            self.retired[key] = fact
            self.retired_keys[fact.uuid] = key

    def retired_like(self, fact: Fact) -> Fact | None:
        """The superseded fact `fact` repeats: same endpoints, relation type, sentence, start."""
        key = retired_key(fact)
        return self.retired.get(key) if key is not None else None

    def current_facts_about(self, entity_uuids: Sequence[str]) -> list[Fact]:
        """Active facts touching any of the entities that are not yet invalidated."""
        seen: dict[str, Fact] = {}
        for entity in entity_uuids:
            for uuid in self.facts_of.get(entity, ()):
                fact = self.facts[uuid]
                if fact.invalid_at is None:
                    seen[uuid] = fact
        return list(seen.values())

    def current_facts_among(self, entity_uuids: Sequence[str]) -> tuple[list[Fact], set[str]]:
        """`current_facts_about(entity_uuids)`, and which of those facts join two of the
        entities (both endpoints among them): one pass over the facts the entities touch."""
        named = set(entity_uuids)
        seen: dict[str, Fact] = {}
        joined: set[str] = set()
        for entity in entity_uuids:
            for uuid in self.facts_of.get(entity, ()):
                fact = self.facts[uuid]
                if fact.invalid_at is None:
                    seen[uuid] = fact
                    if fact.source_uuid in named and fact.target_uuid in named:
                        joined.add(uuid)
        return list(seen.values()), joined

    def between(self, source: str, target: str) -> list[Fact]:
        ids = self.facts_of.get(source, set()) & self.facts_of.get(target, set())
        return [
            self.facts[u]
            for u in ids
            if self.facts[u].source_uuid == source and self.facts[u].target_uuid == target
        ]
