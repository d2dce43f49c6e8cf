"""From resolved facts to rows: dedup, supersession (bi-temporal), and what was dropped.

A new fact supersedes an active one when its writer flagged it (an index into the bounded list
of existing facts the prompt showed — reason `model`, or `caller`/`cue` for the other
extractors), when its relation type is single-valued in the ontology (`cardinality: one`: same
source, same relation type, another target — reason `ontology`), or, for writers that ask for it
(the caller and the heuristic extractor; a model judges for itself), by lcg's built-in
single-valued families (reason `builtin`; `lcg.ontology.supersession` defines them). The old fact is
never deleted: it gets `invalid_at` = the new fact's `valid_at` (world time) and `expired_at` =
now (system time). If the new fact turns out to be *older* than the one it would supersede, the
roles swap: the old one stays, and the new one is stored already ended at the old one's
`valid_at`. A fact extracted with its own `invalid_at` keeps it and supersedes nothing; facts
that only add information never invalidate anything. The same rules apply among the new facts
of one episode (a dated changelog in one text): the one that starts earlier is stored already
ended where the later one starts (reported with `same_episode: true`). Without a date from the
model, a fact is valid from the episode's reference time.

Duplicates — an active fact between the same endpoints with the same predicate, relation type
or sentence — are not stored twice: the existing fact gains the episode in its provenance. So
does an ended fact (superseded, or stored already ended) that a new episode tells again with the
same endpoints, relation type, sentence and `valid_at`: a re-ingested history adds mentions,
not copies.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from lcg.engine import Invalidation
from lcg.ingest.index import GroupIndex, retired_key, sentence_key
from lcg.ingest.resolve import ResolvedFact, relation_type_for
from lcg.models import Fact, canonical_attributes
from lcg.ontology import UNCLASSIFIED_RELATION, Ontology
from lcg.ontology.supersession import Reason, contradicted, rule_for
from lcg.timeutil import to_read_format

__all__ = ["FactPlan", "plan_facts", "superseded_report"]


@dataclass
class FactPlan:
    """Rows and invalidations one episode's facts produce, and what was dropped or merged."""

    new_facts: list[Fact] = field(default_factory=list)
    updated: dict[str, Fact] = field(default_factory=dict)  # duplicates gaining provenance
    invalidations: dict[str, Invalidation] = field(default_factory=dict)
    # Per invalidated uuid: why, and the uuid of the new fact that retired it.
    reasons: dict[str, tuple[Reason, str]] = field(default_factory=dict)
    # Per resolved fact, in input order: the uuid it was stored as (new or the duplicate it
    # merged into), or None when it was dropped (unresolvable endpoint, self-loop).
    outcomes: list[str | None] = field(default_factory=list)
    # New facts of this episode that a later-starting new fact of the same episode replaced:
    # stored already ended (uuid -> reason, successor uuid), and the endpoint names they use.
    ended: dict[str, tuple[Reason, str]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    dropped: list[dict[str, Any]] = field(default_factory=list)
    duplicates: int = 0
    self_loops: int = 0
    reclassified: int = 0

    @property
    def rows(self) -> list[Fact]:
        return [*self.new_facts, *self.updated.values()]


def _duplicate_of(
    existing: Sequence[Fact], predicate: str, relation_type: str, text: str
) -> Fact | None:
    for fact in existing:
        if fact.invalid_at is not None:
            continue
        if (
            fact.name.casefold() == predicate.casefold()
            or (fact.relation_type or "") == relation_type != UNCLASSIFIED_RELATION
            or sentence_key(fact.fact) == sentence_key(text)
        ):
            return fact
    return None


def _repeated(index: GroupIndex, existing: Sequence[Fact], fact: Fact) -> Fact | None:
    """The ended fact `fact` tells again: the same endpoints, relation type, sentence and
    `valid_at` (a superseded fact, or one stored already ended); None if there is none."""
    key = retired_key(fact)
    if key is None:
        return None
    for old in existing:
        if old.invalid_at is not None and retired_key(old) == key:
            return old
    return index.retired_like(fact)


def _superseded(
    index: GroupIndex,
    ontology: Ontology,
    fact: Fact,
    flagged: Sequence[int],
    candidates: Sequence[Fact],
    *,
    flag_reason: Reason,
    builtin: bool,
    target_name: str,
) -> list[tuple[Fact, Reason]]:
    out: list[tuple[Fact, Reason]] = [
        (candidates[i], flag_reason) for i in flagged if 0 <= i < len(candidates)
    ]
    target = index.entities.get(fact.target_uuid)
    rule = rule_for(
        ontology,
        fact,
        builtin=builtin and not flagged,
        target_name=target.name if target is not None else target_name,
        target_labels=target.labels if target is not None else (),
    )
    if rule is not None:
        held = fact.source_uuid if rule.side == "source" else fact.target_uuid
        out += [
            (old, rule.reason)
            for old in contradicted(
                rule, fact, index.current_facts_about([held]), ontology, _describe(index)
            )
        ]
    live: list[tuple[Fact, Reason]] = []
    for old, reason in out:
        current = index.facts.get(old.uuid)  # still active now, at commit time?
        if (
            current is not None
            and current.invalid_at is None
            and all(current.uuid != x.uuid for x, _ in live)
        ):
            live.append((current, reason))
    return live


def _describe(index: GroupIndex) -> Callable[[str], tuple[str, tuple[str, ...]]]:
    def describe(uuid: str) -> tuple[str, tuple[str, ...]]:
        entity = index.entities.get(uuid)
        return (entity.name, entity.labels) if entity is not None else ("", ())

    return describe


def plan_facts(
    index: GroupIndex,
    resolved: Sequence[ResolvedFact],
    candidates: Sequence[Fact],
    *,
    ontology: Ontology,
    group_id: str,
    episode_uuid: str,
    reference_time: datetime,
    now: datetime,
    flag_reason: Reason = "model",
    builtin: bool = False,
) -> FactPlan:
    """Turn resolved facts into new rows, provenance updates and invalidations.

    `flag_reason` names who flagged the facts in each fact's `supersedes`; `builtin` turns on
    lcg's built-in single-valued families (for writers that do not judge contradiction
    themselves).
    """
    plan = FactPlan()
    seen: dict[tuple[str, str, str], str] = {}
    for item in resolved:
        f = item.fact
        if item.unresolved is not None:
            plan.dropped.append(
                {
                    "source_name": f.source,
                    "target_name": f.target,
                    "relation_type": f.relation_type,
                    "fact": f.fact,
                    "unresolved_endpoint": item.unresolved,
                }
            )
            plan.outcomes.append(None)
            continue
        assert item.source_uuid is not None and item.target_uuid is not None
        if item.source_uuid == item.target_uuid:
            plan.self_loops += 1
            plan.outcomes.append(None)
            continue
        relation_type, original = relation_type_for(ontology, f.predicate, f.relation_type)
        key = (item.source_uuid, f.predicate.casefold(), item.target_uuid)
        flagged = {candidates[i].uuid for i in f.supersedes if 0 <= i < len(candidates)}
        existing = [
            plan.updated.get(x.uuid, x)
            for x in index.between(item.source_uuid, item.target_uuid)
            if x.uuid not in flagged  # a fact the text says ended is not a duplicate
        ]
        dup = _duplicate_of(existing, f.predicate, relation_type, f.fact)
        if dup is None and key not in seen:
            dup = _repeated(
                index,
                existing,
                Fact(
                    uuid="",
                    group_id=group_id,
                    source_uuid=item.source_uuid,
                    target_uuid=item.target_uuid,
                    name=f.predicate,
                    fact=f.fact,
                    relation_type=relation_type,
                    valid_at=f.valid_at or reference_time,
                ),
            )
            dup = plan.updated.get(dup.uuid, dup) if dup is not None else None
        if dup is not None or key in seen:
            plan.duplicates += 1
            if dup is not None and episode_uuid not in dup.episodes:
                plan.updated[dup.uuid] = replace(dup, episodes=(*dup.episodes, episode_uuid))
            plan.outcomes.append(dup.uuid if dup is not None else seen[key])
            continue
        if original is not None:
            plan.reclassified += 1
        attrs = canonical_attributes({"original_relation_type": original} if original else {})
        starts = f.valid_at or reference_time
        fact = Fact(
            uuid=str(uuidlib.uuid4()),
            group_id=group_id,
            source_uuid=item.source_uuid,
            target_uuid=item.target_uuid,
            name=f.predicate,
            fact=f.fact,
            relation_type=relation_type,
            attributes=attrs,
            episodes=(episode_uuid,),
            valid_at=starts,
            invalid_at=f.invalid_at,
            created_at=now,
        )
        if fact.invalid_at is None:
            retired = _superseded(
                index,
                ontology,
                fact,
                f.supersedes,
                candidates,
                flag_reason=flag_reason,
                builtin=builtin,
                target_name=f.target,  # the extracted name, for a target new in this episode
            )
            for old, reason in retired:
                if old.uuid in plan.invalidations or old.uuid in plan.updated:
                    continue
                if old.valid_at is not None and starts < old.valid_at:
                    # The new fact is the older truth: it ended when the stored one began.
                    fact = replace(fact, invalid_at=old.valid_at)
                    break
                # `old` is current (no invalid_at of its own): it ends where the new one starts.
                plan.invalidations[old.uuid] = Invalidation(old.uuid, starts, now)
                plan.reasons[old.uuid] = (reason, fact.uuid)
        plan.names.setdefault(fact.source_uuid, f.source)
        plan.names.setdefault(fact.target_uuid, f.target)
        if fact.invalid_at is None:
            fact = _within_episode(plan, index, ontology, fact, builtin=builtin and not flagged)
        seen[key] = fact.uuid
        plan.outcomes.append(fact.uuid)
        plan.new_facts.append(fact)
    return plan


def _within_episode(
    plan: FactPlan, index: GroupIndex, ontology: Ontology, fact: Fact, *, builtin: bool
) -> Fact:
    """Apply the rules among the episode's own new facts (a dated changelog in one text): the
    one that starts earlier is stored ended where the later one starts; equal starts are left
    alone (no order to go by). Returns `fact`, ended when it is the earlier one."""

    def describe(uuid: str) -> tuple[str, tuple[str, ...]]:
        entity = index.entities.get(uuid)
        return (entity.name, entity.labels) if entity else (plan.names.get(uuid, ""), ())

    target, labels = describe(fact.target_uuid)
    rule = rule_for(ontology, fact, builtin=builtin, target_name=target, target_labels=labels)
    if rule is None or fact.valid_at is None:
        return fact
    for i, other in enumerate(plan.new_facts):
        if other.invalid_at is not None or other.valid_at is None:
            continue
        if not contradicted(rule, fact, [other], ontology, describe):
            continue
        if other.valid_at < fact.valid_at:
            plan.new_facts[i] = replace(other, invalid_at=fact.valid_at)
            plan.ended[other.uuid] = (rule.reason, fact.uuid)
        elif fact.valid_at < other.valid_at:
            plan.ended[fact.uuid] = (rule.reason, other.uuid)
            return replace(fact, invalid_at=other.valid_at)
    return fact


def superseded_report(
    plan: FactPlan, index: GroupIndex, names: Mapping[str, str]
) -> list[dict[str, Any]]:
    """What each invalidation retired, for the ingestion result (names, not just uuids)."""
    out: list[dict[str, Any]] = []
    for inv in plan.invalidations.values():
        old = index.facts[inv.fact_uuid]
        out.append(
            {
                "uuid": old.uuid,
                "fact": old.fact,
                "source_name": names.get(old.source_uuid, ""),
                "target_name": names.get(old.target_uuid, ""),
                "invalid_at": to_read_format(inv.invalid_at),
                "reason": plan.reasons[old.uuid][0],
                "superseded_by": plan.reasons[old.uuid][1],
            }
        )
    for fact in plan.new_facts:
        if fact.uuid in plan.ended:
            reason, successor = plan.ended[fact.uuid]
            out.append(
                {
                    "uuid": fact.uuid,
                    "fact": fact.fact,
                    "source_name": plan.names.get(fact.source_uuid, ""),
                    "target_name": plan.names.get(fact.target_uuid, ""),
                    "invalid_at": to_read_format(fact.invalid_at),
                    "reason": reason,
                    "superseded_by": successor,
                    "same_episode": True,
                }
            )
    return out
