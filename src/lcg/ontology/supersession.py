"""Which active facts a new fact retires, by rule — shared by ingestion and direct asserts.

Three sources of supersession, each reported with its reason:

- `caller` (or `model`): the writer named the facts it replaces (uuids from an agent, indexes
  into the existing facts a model was shown);
- `ontology`: the group's ontology declares the relation type `cardinality: one` — a new fact
  with the same source and the same relation type but another target retires the old one. An
  ontology that declares the relation type decides alone: a declared type with the default
  cardinality (`many`) supersedes nothing, whatever the built-in families say;
- `builtin`: lcg's own, conservative check, used only where the writer named nothing and the
  ontology does not declare the type. A relation type belongs to a *single-valued family* when
  its normalised words (case-folded, split on `_`/space/`-`, crudely stemmed, leading
  `now`/`currently`/`is`/`has` dropped) equal one of the family's phrases exactly — never a
  substring match. Each family holds one value per *side*: `source` (a person reports to one
  manager, a service is written in one language) or `target` (a project has one lead, a
  repository one owner). An active fact of the same family, with the same entity on the held
  side and another entity on the other side, is retired. A few families also take movement
  verbs ("moved to", "switched to", "migrated to", "joined") when the new target's name says
  what kind of value it is (a team, a database, a date). A fact whose text is additive
  ("also", "as well", "in addition", "another", "co-…") never retires anything by this rule.

The families are data (`FAMILIES`), listed in the README; anything not listed is multi-valued.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from lcg.models import Fact
from lcg.ontology import Ontology

__all__ = [
    "FAMILIES",
    "Family",
    "Reason",
    "Rule",
    "contradicted",
    "family_of",
    "is_additive",
    "relation_words",
    "rule_for",
]

Reason = Literal["caller", "model", "cue", "ontology", "builtin"]
Side = Literal["source", "target"]

_IRREGULAR = {
    "led": "lead",
    "leading": "lead",
    "ran": "run",
    "wrote": "write",
    "written": "write",
    "rewritten": "rewrite",
    "is": "be",
    "are": "be",
    "was": "be",
    "were": "be",
    "has": "have",
    "had": "have",
    "having": "have",
    "based": "base",
    "uses": "use",
    "used": "use",
    "moved": "move",
    "moves": "move",
    "lives": "live",
    "lived": "live",
    "manages": "manage",
    "managed": "manage",
    "owned": "own",
    "joined": "join",
    "joins": "join",
    "migrated": "migrate",
    "migrates": "migrate",
    "located": "locate",
    "hosted": "host",
    "scheduled": "schedule",
    "promoted": "promote",
    "named": "name",
    "renamed": "rename",
    "implemented": "implement",
    "employed": "employ",
    "maintained": "maintain",
    "headed": "head",
    "switched": "switch",
    "transferred": "transfer",
    "deployed": "deploy",
    "stored": "store",
    "stores": "store",
    "backed": "back",
    "slipped": "slip",
    "postponed": "postpone",
    "delayed": "delay",
    "headquartered": "headquarter",
    "became": "become",
    "hired": "hire",
    "becomes": "become",
}
_LEADING = frozenset({"now", "currently", "still", "be", "have", "the", "a", "an", "new"})
_ADDITIVE = re.compile(
    r"\b(?:also|as well|in addition|additionally|another|too|co-\w+|alongside)\b", re.IGNORECASE
)
_TEAM = re.compile(
    r"\b(?:team|squad|group|department|guild|crew|org|organi[sz]ation|division)\b", re.IGNORECASE
)
_DATE = re.compile(
    r"^(?:\d{4}-\d{2}(?:-\d{2})?|(?:q[1-4]\s+\d{4})|(?:(?:early|mid|late)[- ])?"
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december)"
    r"(?:\s+\d{1,2})?,?(?:\s+\d{4})?)$",
    re.IGNORECASE,
)
_DATABASES = frozenset(
    """postgres postgresql mysql mariadb sqlite mongodb dynamodb cassandra oracle cockroachdb
    clickhouse spanner aurora redshift snowflake bigquery firestore couchdb neo4j kuzu
    timescaledb scylladb""".split()  # noqa: SIM905 -- a word list
)
_LANGUAGES = frozenset(
    """python go golang rust java kotlin scala typescript javascript ruby elixir erlang haskell
    c c++ c# csharp swift php clojure ocaml zig dart""".split()  # noqa: SIM905 -- a word list
)


def _stem(word: str) -> str:
    w = word.casefold()
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ches", "ch"), ("shes", "sh")):
        if w.endswith(suffix) and len(w) > len(suffix) + 1:
            return w[: -len(suffix)] + keep
    if w.endswith("s") and not w.endswith(("ss", "us", "is")) and len(w) > 3:
        return w[:-1]
    return w


def relation_words(relation_type: str) -> tuple[str, ...]:
    """`NOW_LEADS` / `leads` / `Reports-To` -> `("lead",)` / `("lead",)` / `("report", "to")`."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", relation_type.strip())
    words = [_stem(w) for w in re.split(r"[\s_\-]+", spaced) if w]
    while words and words[0] in _LEADING:
        words.pop(0)
    return tuple(words)


@dataclass(frozen=True)
class Family:
    """A single-valued relation family: `side` holds one current value of it."""

    name: str
    side: Side
    phrases: frozenset[tuple[str, ...]]
    # Movement verbs that belong to the family only when the target's name says what it is.
    moves: frozenset[tuple[str, ...]] = frozenset()
    target_kind: str = ""  # "team" | "database" | "language" | "date"


def _phrases(*texts: str) -> frozenset[tuple[str, ...]]:
    return frozenset(relation_words(t) for t in texts)


_MOVES = _phrases("moved to", "switched to", "migrated to", "transferred to", "joined")

FAMILIES: tuple[Family, ...] = (
    Family(
        "lead",
        "target",
        _phrases(
            "leads",
            "heads",
            "manages",
            "owns",
            "maintains",
            "directs",
            "chairs",
            "lead of",
            "head of",
            "manager of",
            "owner of",
            "maintainer of",
            "in charge of",
            "is lead of",
        ),
    ),
    Family(
        "owned_by",
        "source",
        _phrases("owned by", "maintained by", "managed by", "led by", "headed by", "run by"),
    ),
    Family("reports_to", "source", _phrases("reports to", "manager", "has manager")),
    Family(
        "employer",
        "source",
        _phrases("works at", "works for", "employed by", "employed at", "employer", "hired by"),
    ),
    Family(
        "residence",
        "source",
        _phrases("lives in", "lives at", "based in", "resides in", "home city"),
    ),
    Family(
        "location",
        "source",
        _phrases(
            "located in",
            "located at",
            "hosted on",
            "hosted in",
            "hosted at",
            "deployed on",
            "deployed to",
            "deployed in",
            "headquartered in",
            "region",
        ),
    ),
    Family(
        "membership",
        "source",
        _phrases("member of", "on team", "in team", "part of team", "belongs to team", "team"),
        _MOVES,
        "team",
    ),
    Family(
        "role",
        "source",
        _phrases(
            "role",
            "title",
            "has role",
            "has title",
            "serves as",
            "works as",
            "promoted to",
            "hired as",
            "job title",
            "position",
        ),
    ),
    Family(
        "primary_store",
        "source",
        _phrases(
            "uses as primary",
            "uses as primary database",
            "primary database",
            "primary store",
            "database",
            "stores data in",
            "stored in",
            "backed by",
            "persists to",
        ),
        _MOVES | _phrases("runs on", "run on"),
        "database",
    ),
    Family(
        "language",
        "source",
        _phrases("written in", "implemented in", "rewritten in", "language", "ported to"),
        _MOVES,
        "language",
    ),
    Family("status", "source", _phrases("status", "has status", "state")),
    Family(
        "deadline",
        "source",
        _phrases(
            "deadline",
            "due",
            "due on",
            "due by",
            "scheduled for",
            "launches on",
            "ships on",
            "release date",
            "launch date",
            "target date",
            "moved to date",
        ),
        _phrases("moved to", "slipped to", "postponed to", "delayed to", "rescheduled to"),
        "date",
    ),
)


def _kind_matches(kind: str, target_name: str, target_labels: Iterable[str]) -> bool:
    name = target_name.strip()
    labels = {label.casefold() for label in target_labels}
    if kind == "team":
        return bool(_TEAM.search(name)) or "team" in labels
    if kind == "database":
        words = {w.casefold() for w in re.findall(r"[\w+#]+", name)}
        return bool(words & _DATABASES) or "database" in labels
    if kind == "language":
        return name.casefold() in _LANGUAGES or "language" in labels
    if kind == "date":
        return bool(_DATE.match(name)) or "date" in labels
    return False


def family_of(
    relation_type: str, target_name: str = "", target_labels: Iterable[str] = ()
) -> Family | None:
    """The single-valued family a relation type belongs to, or None (multi-valued)."""
    words = relation_words(relation_type)
    if not words:
        return None
    labels = tuple(target_labels)
    for family in FAMILIES:
        if words in family.phrases:
            return family
    for family in FAMILIES:
        if words in family.moves and _kind_matches(family.target_kind, target_name, labels):
            return family
    return None


def is_additive(text: str) -> bool:
    """Whether a fact's sentence says it adds to what holds ("also", "as well", "co-leads")."""
    return bool(_ADDITIVE.search(text))


@dataclass(frozen=True)
class Rule:
    """How a new fact retires others: by `reason`, holding one value on `side`."""

    reason: Reason
    side: Side
    family: Family | None = None  # builtin only
    relation_type: str | None = None  # ontology only: the canonical declared type


def rule_for(
    ontology: Ontology,
    fact: Fact,
    *,
    builtin: bool,
    target_name: str = "",
    target_labels: Iterable[str] = (),
) -> Rule | None:
    """The rule that makes `fact` retire others, or None (it only adds).

    The ontology decides for a type it declares; the built-in families apply (when `builtin`)
    to undeclared types and never to an additive sentence.
    """
    for name in dict.fromkeys(n for n in (fact.relation_type, fact.name) if n):
        declared = ontology.canonical_relation_type(name)
        if declared is not None:
            return (
                Rule("ontology", "source", relation_type=declared)
                if (ontology.is_single_valued(declared))
                else None
            )
    if not builtin or is_additive(fact.fact):
        return None
    for name in dict.fromkeys(n for n in (fact.relation_type, fact.name) if n):
        family = family_of(name, target_name, target_labels)
        if family is not None:
            return Rule("builtin", family.side, family=family)
    return None


def _same_slot(rule: Rule, new: Fact, old: Fact) -> bool:
    if rule.side == "source":
        return old.source_uuid == new.source_uuid and old.target_uuid != new.target_uuid
    return old.target_uuid == new.target_uuid and old.source_uuid != new.source_uuid


def contradicted(
    rule: Rule,
    new: Fact,
    active: Iterable[Fact],
    ontology: Ontology,
    describe: Callable[[str], tuple[str, tuple[str, ...]]],
) -> list[Fact]:
    """The active facts `new` retires under `rule` (`describe`: entity uuid -> name, labels)."""
    out: list[Fact] = []
    for old in active:
        if old.uuid == new.uuid or old.invalid_at is not None or old.expired_at is not None:
            continue
        if not _same_slot(rule, new, old):
            continue
        if rule.reason == "ontology":
            kinds = {
                ontology.canonical_relation_type(n) for n in (old.relation_type, old.name) if n
            }
            if rule.relation_type in kinds:
                out.append(old)
            continue
        target, labels = describe(old.target_uuid)
        families = {family_of(n, target, labels) for n in (old.relation_type, old.name) if n}
        if rule.family in families:
            out.append(old)
    return out
