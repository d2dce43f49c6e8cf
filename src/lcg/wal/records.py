"""The WAL's closed set of semantic operations and their (de)serialisation.

A line is `{"seq": n, "ts": "...", "op": "<name>", "data": {...}, "at": i}`, plus `"more": k` on
the lines of a multi-line batch that k more lines of the same batch follow — so a batch whose write
was cut short by a crash is recognised and dropped whole, never applied by halves. `at` is the
line's place in its batch (0 for the first), so a batch whose head is unreadable is recognised too;
lines written before it existed lack it (the reader then judges from seq continuity). The first
line of each batch of a commit that spans several groups' streams carries `"commit": {"id": ...,
"groups": {group: [first_seq, last_seq], ...}}`, the seqs every group's batch of that commit
takes, so a crash between two groups' appends is recognised at startup (`lcg.wal.writer`).

Every line ends with `"crc": "<8 lowercase hex digits>"`, always its last member: the CRC-32
(`zlib.crc32`) of the line's bytes without that member, i.e. of the line as it reads with
`,"crc":"…"` cut out (up to and including the closing `}`). A reader checks it on every read
(`line_intact`) and treats a line that fails as unreadable: never applied, counted and reported.
CRC-32 catches every single-bit flip and every burst of up to 32 bits. Lines written before the
checksum existed carry no `crc` and stay readable, with only the keys that format had; a line
with a `crc`, or with a key no format wrote, must verify. Operations carry every uuid
and timestamp, so replay is deterministic; they never carry vectors (embeddings are derived data)
nor the group id (the stream a line sits in is its group). Absent keys mean null/empty, which
keeps a fact near 400 bytes.

    episode.add       a whole Episode row
    episode.delete    {uuid}: the episode and its MENTIONS edges
    entity.upsert     a whole Entity row (create or replace)
    fact.upsert       a whole Fact row (create or replace; hops follow source/target)
    fact.invalidate   {uuid, invalid_at, expired_at}: supersession, the row is kept
    mentions.add      {episode, entities: [uuid...]}
    group.purge       {}: every episode, entity and fact of the stream's group
    cypher.exec       {query}: a raw Cypher mutation from `knowledge_query_cypher`, replayed verbatim
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from lcg.models import Entity, Episode, Fact
from lcg.timeutil import from_wal, to_wal

__all__ = [
    "OPS",
    "CommitMark",
    "Op",
    "WalRecord",
    "data_to_entity",
    "data_to_episode",
    "data_to_fact",
    "encode_batch",
    "encode_line",
    "entity_op",
    "episode_op",
    "fact_op",
    "line_intact",
    "made",
    "seal",
]

_T = TypeVar("_T")

OPS = frozenset(
    {
        "episode.add",
        "episode.delete",
        "entity.upsert",
        "fact.upsert",
        "fact.invalidate",
        "mentions.add",
        "group.purge",
        "cypher.exec",
    }
)


@dataclass(frozen=True)
class Op:
    """One semantic mutation, before it has a sequence number."""

    name: str
    data: dict[str, Any]


@dataclass(frozen=True)
class CommitMark:
    """What the head line of each batch of a multi-group commit says of the whole commit: its
    id and, per group, the seqs (first, last) its batch there takes."""

    id: str
    groups: dict[str, tuple[int, int]]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "groups": {g: list(r) for g, r in self.groups.items()}}

    @staticmethod
    def from_json(value: object) -> CommitMark | None:
        """The mark a line carries, or None when the value is not one."""
        if not isinstance(value, dict) or not isinstance(value.get("id"), str):
            return None
        groups = value.get("groups")
        if not isinstance(groups, dict) or not groups:
            return None
        ranges: dict[str, tuple[int, int]] = {}
        for group, span in groups.items():
            if not (
                isinstance(span, list)
                and len(span) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in span)
                and span[0] <= span[1]
            ):
                return None
            ranges[group] = (span[0], span[1])
        return CommitMark(value["id"], ranges)


@dataclass(frozen=True)
class WalRecord:
    """One WAL line as read back."""

    seq: int
    ts: str
    op: str
    data: dict[str, Any]
    more: int = 0  # lines of the same batch that follow this one
    at: int | None = None  # lines of the same batch before this one (None: an older line)
    commit: CommitMark | None = None  # on a multi-group commit's batch heads


# The keys of a line written before checksums: a line with any other key must carry a `crc`.
_LEGACY_KEYS = frozenset({"seq", "ts", "op", "data", "more", "at", "commit"})
_CRC_MEMBER = b',"crc":"'
_CRC_TAIL = len(_CRC_MEMBER) + 8 + 2  # the member, its 8 hex digits, `"}`


def line_intact(line: bytes, value: dict[str, Any]) -> bool:
    """Whether `line` (no newline), parsed as `value`, passes its checksum, or is a line of the
    format before checksums (no `crc`, none but that format's keys)."""
    if "crc" not in value:
        return value.keys() <= _LEGACY_KEYS
    digits = line[-10:-2]
    if (
        len(line) <= _CRC_TAIL
        or line[-_CRC_TAIL : -_CRC_TAIL + len(_CRC_MEMBER)] != _CRC_MEMBER
        or line[-2:] != b'"}'
        or value["crc"] != digits.decode("latin-1")
    ):
        return False
    body = memoryview(line)[:-_CRC_TAIL]
    return b"%08x" % zlib.crc32(b"}", zlib.crc32(body)) == digits


def encode_line(
    seq: int, ts: str, op: Op, more: int = 0, at: int = 0, commit: CommitMark | None = None
) -> bytes:
    """A WAL line, newline-terminated, compact UTF-8 JSON ending with its checksum."""
    payload: dict[str, Any] = {"seq": seq, "ts": ts, "op": op.name, "data": op.data}
    if more:
        payload["more"] = more
    payload["at"] = at
    if commit is not None:
        payload["commit"] = commit.to_json()
    return seal(orjson.dumps(payload))


def seal(body: bytes) -> bytes:
    """The WAL line of `body` (a record as compact JSON, without `crc`): its checksum added as
    its last member, newline-terminated."""
    return b'%s,"crc":"%08x"}\n' % (body[:-1], zlib.crc32(body))


def encode_batch(
    first_seq: int, ts: str, ops: list[Op], commit: CommitMark | None = None
) -> list[bytes]:
    """The lines of one batch: consecutive seqs, one ts, `more` counting down to the last line;
    the first carries the multi-group commit's mark, if any."""
    last = len(ops) - 1
    return [
        encode_line(first_seq + i, ts, op, last - i, i, commit if i == 0 else None)
        for i, op in enumerate(ops)
    ]


def _put(data: dict[str, Any], key: str, value: Any) -> None:
    if value not in (None, "", (), []):
        data[key] = value


def episode_op(ep: Episode) -> Op:
    data: dict[str, Any] = {"uuid": ep.uuid, "name": ep.name}
    _put(data, "content", ep.content)
    if ep.source != "text":
        data["source"] = ep.source
    _put(data, "source_description", ep.source_description)
    _put(data, "source_file", ep.source_file)
    _put(data, "chunk_id", ep.chunk_id)
    _put(data, "created_at", to_wal(ep.created_at))
    _put(data, "valid_at", to_wal(ep.valid_at))
    return Op("episode.add", data)


def entity_op(e: Entity) -> Op:
    data: dict[str, Any] = {"uuid": e.uuid, "name": e.name}
    if e.labels != ("Entity",):
        data["labels"] = list(e.labels)
    _put(data, "summary", e.summary)
    if e.attributes != "{}":
        data["attributes"] = json.loads(e.attributes)
    _put(data, "created_at", to_wal(e.created_at))
    _put(data, "merged_into", e.merged_into)
    return Op("entity.upsert", data)


def fact_op(f: Fact) -> Op:
    data: dict[str, Any] = {
        "uuid": f.uuid,
        "source": f.source_uuid,
        "target": f.target_uuid,
        "name": f.name,
    }
    _put(data, "fact", f.fact)
    _put(data, "relation_type", f.relation_type)
    if f.attributes != "{}":
        data["attributes"] = json.loads(f.attributes)
    _put(data, "episodes", list(f.episodes))
    _put(data, "valid_at", to_wal(f.valid_at))
    _put(data, "invalid_at", to_wal(f.invalid_at))
    _put(data, "created_at", to_wal(f.created_at))
    _put(data, "expired_at", to_wal(f.expired_at))
    return Op("fact.upsert", data)


_FIELDS: dict[type, int] = {}


def made(cls: type[_T], values: dict[str, Any]) -> _T:
    """`cls(**values)` for a frozen dataclass with no `__post_init__` nor slots, given every
    field: the same object (fields, equality, hash), ~5x faster. A frozen dataclass's
    `__init__` sets each field through `object.__setattr__`, a large part of reading a large
    WAL (1.6M records at 1M facts). Only for short-lived objects (the reader's
    records): such an object holds a dict of its own instead of sharing its class's keys,
    528 bytes against 192 for a Fact (tracemalloc), +0.7 GB over the rows of a 1M-fact fold.

    Raises:
        TypeError: `values` does not name as many values as `cls` has fields.
    """
    count = _FIELDS.get(cls)
    if count is None:
        if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
            raise TypeError(f"{cls.__name__} must be built by its __init__")
        count = _FIELDS[cls] = len(dataclasses.fields(cls))  # type: ignore[arg-type]  # a dataclass
    if len(values) != count:
        raise TypeError(f"{cls.__name__} takes {count} fields, not {len(values)}")
    obj = object.__new__(cls)
    obj.__dict__.update(values)
    return obj


def _attrs(value: Any) -> str:
    if value is None:
        return "{}"
    if not isinstance(value, dict):
        raise ValueError("attributes must be an object")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _str(data: dict[str, Any], key: str, default: str = "") -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value


def data_to_episode(data: dict[str, Any], group_id: str) -> Episode:
    """Raises ValueError on a malformed record."""
    return Episode(
        uuid=_str(data, "uuid"),
        group_id=group_id,
        name=_str(data, "name"),
        content=_str(data, "content"),
        source=_str(data, "source", "text"),
        source_description=_str(data, "source_description"),
        source_file=_str(data, "source_file"),
        chunk_id=_str(data, "chunk_id"),
        created_at=from_wal(data.get("created_at")),
        valid_at=from_wal(data.get("valid_at")),
    )


def data_to_entity(data: dict[str, Any], group_id: str) -> Entity:
    """Raises ValueError on a malformed record."""
    labels = data.get("labels", ["Entity"])
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise ValueError("labels must be a list of strings")
    merged = data.get("merged_into")
    return Entity(
        uuid=_str(data, "uuid"),
        group_id=group_id,
        name=_str(data, "name"),
        labels=tuple(labels),
        summary=_str(data, "summary"),
        attributes=_attrs(data.get("attributes")),
        created_at=from_wal(data.get("created_at")),
        merged_into=merged if isinstance(merged, str) else None,
    )


def data_to_fact(data: dict[str, Any], group_id: str) -> Fact:
    """Raises ValueError on a malformed record."""
    episodes = data.get("episodes", [])
    if not isinstance(episodes, list) or not all(isinstance(x, str) for x in episodes):
        raise ValueError("episodes must be a list of strings")
    rtype = data.get("relation_type")
    return Fact(
        uuid=_str(data, "uuid"),
        group_id=group_id,
        source_uuid=_str(data, "source"),
        target_uuid=_str(data, "target"),
        name=_str(data, "name"),
        fact=_str(data, "fact"),
        relation_type=rtype if isinstance(rtype, str) else None,
        attributes=_attrs(data.get("attributes")),
        episodes=tuple(episodes),
        valid_at=from_wal(data.get("valid_at")),
        invalid_at=from_wal(data.get("invalid_at")),
        created_at=from_wal(data.get("created_at")),
        expired_at=from_wal(data.get("expired_at")),
    )
