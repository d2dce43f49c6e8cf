"""The ontology as values: entity types (a single-parent hierarchy), relation types, a mode.

Type names are normalised the way the reference does it: entity types to PascalCase
(`peer_reviewed_paper` -> `PeerReviewedPaper`), relation types to SCREAMING_SNAKE_CASE
(`affiliatedWith` -> `AFFILIATED_WITH`). Lookups (`canonical_entity_type`,
`canonical_relation_type`) normalise their input the same way, so they are insensitive to case
and separators. An `Ontology` is immutable and already repaired when built by the loader: no
duplicate names, no undeclared parent, no cycle — but `ancestors` stays cycle-safe anyway.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

__all__ = [
    "EMPTY_ONTOLOGY",
    "UNCLASSIFIED_ENTITY",
    "UNCLASSIFIED_RELATION",
    "EntityType",
    "Ontology",
    "RelationType",
    "normalize_entity_type",
    "normalize_relation_type",
]

Mode = Literal["open", "strict"]
Cardinality = Literal["many", "one"]

UNCLASSIFIED_ENTITY = "Unclassified"
UNCLASSIFIED_RELATION = "UNCLASSIFIED"

# Bounds on what `prompt_block` renders, so a huge ontology cannot blow up a prompt.
_PROMPT_TYPES = 80
_PROMPT_DESCRIPTION = 160
_PROMPT_CHARS = 6000


def _words(text: str) -> list[str]:
    """Words split at non-alphanumerics and case changes: `"HTTPServer"` -> HTTP, Server."""
    words: list[str] = []
    current = ""
    for i, ch in enumerate(text):
        if not ch.isalnum():
            if current:
                words.append(current)
            current = ""
            continue
        if ch.isupper() and current:
            before = current[-1]
            after_lower = i + 1 < len(text) and text[i + 1].islower()
            if before.islower() or (before.isupper() and after_lower):
                words.append(current)
                current = ""
        current += ch
    if current:
        words.append(current)
    return words


# The normalisations are pure and asked for the same few type names again and again (every
# extracted entity and fact, every supersession rule lookup): answers are remembered.
@lru_cache(maxsize=4096)
def normalize_entity_type(text: str) -> str:
    """PascalCase: `"person"` -> `"Person"`, `"PEER_REVIEWED paper"` -> `"PeerReviewedPaper"`."""
    return "".join(w[:1].upper() + w[1:].lower() for w in _words(text))


@lru_cache(maxsize=4096)
def normalize_relation_type(text: str) -> str:
    """SCREAMING_SNAKE_CASE: `"authored by"` -> `"AUTHORED_BY"`, `"worksAt"` -> `"WORKS_AT"`."""
    return "_".join(w.upper() for w in _words(text))


@dataclass(frozen=True)
class EntityType:
    """A declared entity type; `parent` names another declared entity type, or is None."""

    name: str
    parent: str | None = None
    description: str = ""
    aliases: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()  # lowercase substrings that suggest this type


@dataclass(frozen=True)
class RelationType:
    """A declared relation type; `cardinality="one"`: a source holds one current value of it."""

    name: str
    description: str = ""
    aliases: tuple[str, ...] = ()
    source_types: tuple[str, ...] = ()  # informational signature constraints
    target_types: tuple[str, ...] = ()
    cardinality: Cardinality = "many"
    keywords: tuple[str, ...] = ()  # lowercase substrings used by knowledge_canonicalize_relations


@dataclass(frozen=True)
class Ontology:
    """A resolved ontology. `source` is the file it came from (None: no ontology)."""

    mode: Mode = "open"
    entity_types: tuple[EntityType, ...] = ()
    relation_types: tuple[RelationType, ...] = ()
    source: str | None = None
    _entities: dict[str, EntityType] = field(
        init=False, repr=False, compare=False, hash=False, default_factory=dict
    )
    _relations: dict[str, RelationType] = field(
        init=False, repr=False, compare=False, hash=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        entities = self._entities
        for t in self.entity_types:
            entities.setdefault(t.name, t)
        relations = self._relations
        for r in self.relation_types:
            relations.setdefault(r.name, r)

    @property
    def present(self) -> bool:
        """Whether anything is declared (an ontology declaring nothing counts as none)."""
        return bool(self.entity_types or self.relation_types)

    @property
    def has_hierarchy(self) -> bool:
        return any(t.parent for t in self.entity_types)

    def entity_type_names(self) -> list[str]:
        return sorted(self._entities)

    def relation_type_names(self) -> list[str]:
        return sorted(self._relations)

    def ancestors(self, type_name: str) -> tuple[str, ...]:
        """The labels an entity of this type carries besides `"Entity"`, most general first.

        The type itself comes last: `ancestors("Rfc")` is `("Document", "Rfc")` when `Rfc`'s
        parent is `Document`. An undeclared type is just itself; a cycle is cut where it closes.
        """
        name = self.canonical_entity_type(type_name) or type_name.strip()
        if not name or name == "Entity":
            return ()
        chain = [name]
        current = self._entities.get(name)
        while current is not None and current.parent and current.parent not in chain:
            chain.append(current.parent)
            current = self._entities.get(current.parent)
        return tuple(t for t in reversed(chain) if t != "Entity")

    def canonical_entity_type(self, name: str) -> str | None:
        """The declared entity type `name` stands for — by name, alias, then keyword — or None."""
        key = normalize_entity_type(name)
        if not key:
            return None
        lower = key.lower()
        for t in self.entity_types:
            if t.name.lower() == lower:
                return t.name
        for t in self.entity_types:
            if any(normalize_entity_type(a).lower() == lower for a in t.aliases):
                return t.name
        for t in self.entity_types:
            if any(k and k in lower for k in t.keywords):
                return t.name
        return None

    def canonical_relation_type(self, name: str, *, keywords: bool = False) -> str | None:
        """The declared relation type `name` stands for — by name, then alias — or None.

        With `keywords`, a declared keyword found in the normalised name also matches (the
        offline canonicalisation pass; ingestion matches names and aliases only).
        """
        key = normalize_relation_type(name)
        if not key:
            return None
        if key in self._relations:
            return key
        for r in self.relation_types:
            if any(normalize_relation_type(a) == key for a in r.aliases):
                return r.name
        if keywords:
            lower = key.lower()
            for r in self.relation_types:
                if any(k and k in lower for k in r.keywords):
                    return r.name
        return None

    def is_single_valued(self, relation_type: str) -> bool:
        """Whether the relation type (by name or alias) is declared `cardinality: one`."""
        name = self.canonical_relation_type(relation_type)
        return name is not None and self._relations[name].cardinality == "one"

    def prompt_block(self) -> str:
        """The vocabulary as compact prompt text: bounded in types, descriptions and length."""
        if not self.present:
            return ""
        lines: list[str] = []
        if self.mode == "strict":
            lines.append(
                "Ontology (strict): use only these types; anything else is "
                f"{UNCLASSIFIED_ENTITY} / {UNCLASSIFIED_RELATION}."
            )
        else:
            lines.append("Ontology (open): prefer these types; invent a new one only if none fits.")
        if self.entity_types:
            lines.append("Entity types:")
            for t in self.entity_types[:_PROMPT_TYPES]:
                extra = [f"is a {t.parent}"] if t.parent else []
                if t.aliases:
                    extra.append("also: " + ", ".join(t.aliases))
                lines.append(_prompt_line(t.name, t.description, extra))
            if len(self.entity_types) > _PROMPT_TYPES:
                lines.append(f"- ... and {len(self.entity_types) - _PROMPT_TYPES} more")
        if self.relation_types:
            lines.append("Relation types:")
            for r in self.relation_types[:_PROMPT_TYPES]:
                extra = []
                if r.source_types or r.target_types:
                    src = "|".join(r.source_types) or "any"
                    dst = "|".join(r.target_types) or "any"
                    extra.append(f"{src} -> {dst}")
                if r.cardinality == "one":
                    extra.append("single-valued")
                if r.aliases:
                    extra.append("also: " + ", ".join(r.aliases))
                lines.append(_prompt_line(r.name, r.description, extra))
            if len(self.relation_types) > _PROMPT_TYPES:
                lines.append(f"- ... and {len(self.relation_types) - _PROMPT_TYPES} more")
        text = "\n".join(lines)
        if len(text) > _PROMPT_CHARS:
            text = text[: _PROMPT_CHARS - 4].rsplit("\n", 1)[0] + "\n..."
        return text

    def content_hash(self) -> str:
        """A hash of what the ontology declares (not of its file's bytes): comments and
        formatting do not change it. `"none"` when nothing is declared."""
        if not self.present:
            return "none"
        canonical = {
            "mode": self.mode,
            "entity_types": sorted(
                [t.name, t.parent, t.description, sorted(t.aliases), sorted(t.keywords)]
                for t in self.entity_types
            ),
            "relation_types": sorted(
                [
                    r.name,
                    r.description,
                    sorted(r.aliases),
                    sorted(r.keywords),
                    sorted(r.source_types),
                    sorted(r.target_types),
                    r.cardinality,
                ]
                for r in self.relation_types
            ),
        }
        text = json.dumps(canonical, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def summary(self) -> dict[str, object]:
        """`{"hash", "mode", "entity_types", "relation_types"}`: the sidecar shape
        (docs/api.md §wal-ontology)."""
        return {
            "hash": self.content_hash(),
            "mode": self.mode if self.present else None,
            "entity_types": self.entity_type_names(),
            "relation_types": self.relation_type_names(),
        }


def _prompt_line(name: str, description: str, extra: list[str]) -> str:
    text = " ".join(description.split())
    if len(text) > _PROMPT_DESCRIPTION:
        text = text[: _PROMPT_DESCRIPTION - 3].rstrip() + "..."
    tail = f" ({'; '.join(extra)})" if extra else ""
    return f"- {name}{tail}" + (f": {text}" if text else "")


EMPTY_ONTOLOGY = Ontology()
