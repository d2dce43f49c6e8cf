"""Item-level salvage of a model's answer: keep every usable item, count everything else.

Weak and local models return almost-right JSON: nested attribute objects, blank keys, empty type
labels, dates in a dozen shapes, items missing a field. One bad item never costs the others:
each is repaired where the repair is unambiguous (nested values become JSON strings, an empty
type becomes `Entity`, a date-only timestamp becomes midnight UTC) and dropped otherwise — and
every repair and drop is counted in a `SalvageReport`, which ends up in the ingestion result and
in telemetry. Nothing is silently lost. (The pydantic answer models in `prompts` describe the schema asked
for; salvage reads the raw objects, so one malformed item cannot fail the whole answer.)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from lcg.timeutil import parse_timestamp

__all__ = [
    "CleanEntity",
    "CleanFact",
    "SalvageReport",
    "normalize_predicate",
    "parse_when",
    "salvage_entities",
    "salvage_facts",
    "salvage_graph",
]

_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")
_YEAR_MONTH = re.compile(r"\d{4}-\d{2}")
_YEAR = re.compile(r"\d{4}")
_PREDICATE_CHARS = re.compile(r"[^A-Za-z0-9]+")


@dataclass(frozen=True)
class CleanEntity:
    name: str
    type: str
    summary: str
    aliases: tuple[str, ...]
    attributes: dict[str, Any]


@dataclass(frozen=True)
class CleanFact:
    source: str
    target: str
    predicate: str
    fact: str
    relation_type: str | None
    valid_at: datetime | None
    invalid_at: datetime | None
    supersedes: tuple[int, ...]


@dataclass
class SalvageReport:
    """Counts of what salvage repaired or dropped (all zero for a clean answer)."""

    entities_dropped_malformed: int = 0
    edges_dropped_malformed: int = 0
    entities_missing_summary: int = 0
    labels_defaulted: int = 0
    attributes_coerced: int = 0
    empty_keys_dropped: int = 0
    timestamps_repaired: int = 0
    timestamps_dropped: int = 0
    answer_unusable: int = 0
    # Sentences the offline extractor read and could not turn into a fact (not a repair).
    sentences_unread: int = 0

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def repaired_or_dropped(self) -> int:
        skip = ("entities_missing_summary", "sentences_unread")
        return sum(v for k, v in self.as_dict().items() if k not in skip)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return ""


def _first(item: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in item and item[key] is not None:
            return item[key]
    return None


def _items(data: dict[str, Any] | None, key: str, report: SalvageReport) -> list[Any]:
    if data is None:
        report.answer_unusable += 1
        return []
    items = data.get(key)
    if items is None and len(data) == 1:  # the model named the list differently
        items = next(iter(data.values()))
    if not isinstance(items, list):
        report.answer_unusable += 1
        return []
    return items


def _attributes(value: Any, report: SalvageReport) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        report.attributes_coerced += 1
        return {}
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = key.strip() if isinstance(key, str) else ""
        if not name:
            report.empty_keys_dropped += 1
            continue
        if isinstance(item, dict | list):
            item = json.dumps(item, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
            report.attributes_coerced += 1
        elif item is not None and not isinstance(item, str | int | float | bool):
            item = str(item)
            report.attributes_coerced += 1
        out[name] = item
    return out


def _entity_type(item: dict[str, Any], report: SalvageReport) -> str:
    raw = _first(item, "type", "entity_type", "label", "labels")
    if isinstance(raw, list):
        raw = next((x for x in raw if _text(x) and _text(x) != "Entity"), None)
    text = _text(raw)
    if not text:
        report.labels_defaulted += 1
        return "Entity"
    return text


def salvage_entities(data: dict[str, Any] | None, report: SalvageReport) -> list[CleanEntity]:
    """Usable entities of an answer's `entities`, deduplicated by name (first wins)."""
    out: list[CleanEntity] = []
    seen: set[str] = set()
    for item in _items(data, "entities", report):
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict):
            report.entities_dropped_malformed += 1
            continue
        name = _text(_first(item, "name", "entity_name", "entity"))
        if not name:
            report.entities_dropped_malformed += 1
            continue
        summary = _text(_first(item, "summary", "description"))
        if not summary:
            report.entities_missing_summary += 1
        raw_aliases = item.get("aliases")
        if isinstance(raw_aliases, str):
            raw_aliases = [raw_aliases]
        aliases = tuple(
            dict.fromkeys(a for a in map(_text, raw_aliases or []) if a and a != name)
            if isinstance(raw_aliases, list)
            else ()
        )
        entity = CleanEntity(
            name,
            _entity_type(item, report),
            summary,
            aliases,
            _attributes(item.get("attributes"), report),
        )
        if name.casefold() not in seen:
            seen.add(name.casefold())
            out.append(entity)
    return out


def parse_when(value: Any, report: SalvageReport) -> datetime | None:
    """A timestamp the model gave, or None (counted when something unusable was given)."""
    text = _text(value)
    if not text or text.lower() in ("null", "none", "unknown", "n/a"):
        return None
    try:
        return parse_timestamp(text)
    except ValueError:
        pass
    for pattern, fmt in ((_DATE_ONLY, "%Y-%m-%d"), (_YEAR_MONTH, "%Y-%m"), (_YEAR, "%Y")):
        if pattern.fullmatch(text):
            try:
                parsed = datetime.strptime(text, fmt).replace(tzinfo=UTC)
            except ValueError:
                break
            report.timestamps_repaired += 1
            return parsed
    report.timestamps_dropped += 1
    return None


def normalize_predicate(text: str) -> str:
    """`works at` / `worksAt` / `WORKS-AT` -> `WORKS_AT`."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", text.strip())
    return _PREDICATE_CHARS.sub("_", spaced).strip("_").upper()


def _indexes(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list):
        value = [value] if value is not None else []
    out: list[int] = []
    for item in value:
        if isinstance(item, bool):
            continue
        if isinstance(item, int):
            out.append(item)
        elif isinstance(item, str) and item.strip().lstrip("[").rstrip("]").isdigit():
            out.append(int(item.strip().lstrip("[").rstrip("]")))
    return tuple(dict.fromkeys(out))


def salvage_facts(data: dict[str, Any] | None, report: SalvageReport) -> list[CleanFact]:
    """Usable facts of an answer's `facts`, in answer order."""
    out: list[CleanFact] = []
    for item in _items(data, "facts", report):
        if not isinstance(item, dict):
            report.edges_dropped_malformed += 1
            continue
        source = _text(_first(item, "source", "source_name", "subject"))
        target = _text(_first(item, "target", "target_name", "object"))
        sentence = _text(_first(item, "fact", "sentence", "description"))
        relation = _text(item.get("relation_type")) or None
        predicate = normalize_predicate(_text(_first(item, "predicate", "relation", "name")))
        if not predicate:
            predicate = normalize_predicate(relation or "") or "RELATES_TO"
        if not (source and target and sentence):
            report.edges_dropped_malformed += 1
            continue
        valid_at = parse_when(item.get("valid_at"), report)
        invalid_at = parse_when(item.get("invalid_at"), report)
        if valid_at and invalid_at and invalid_at < valid_at:
            report.timestamps_dropped += 1
            invalid_at = None
        out.append(
            CleanFact(
                source,
                target,
                predicate,
                sentence,
                relation,
                valid_at,
                invalid_at,
                _indexes(item.get("supersedes")),
            )
        )
    return out


def salvage_graph(
    data: dict[str, Any] | None, report: SalvageReport
) -> tuple[list[CleanEntity], list[CleanFact]]:
    """Entities and facts of the single call's answer.

    A missing list is an empty one (a text with no facts), an answer wrapped in one outer object
    is unwrapped, and an answer with neither list is unusable.
    """
    if data is not None and len(data) == 1:
        inner = next(iter(data.values()))
        if isinstance(inner, dict) and {"entities", "facts"} & inner.keys():
            data = inner
    if data is None or not {"entities", "facts"} & data.keys():
        report.answer_unusable += 1
        return [], []
    entities = salvage_entities({"entities": data.get("entities", [])}, report)
    return entities, salvage_facts({"facts": data.get("facts", [])}, report)
