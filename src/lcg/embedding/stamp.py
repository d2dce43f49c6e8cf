"""Which embedder made a group's vectors: the identity stamp, one `Meta` row per group.

`embedding_identity:<group>` holds `{"model", "dim"}`. It exists exactly while the group holds
vectors: it is written in the transaction of the group's first write of vectors, removed with
its last ones (a purge, deletes), and rewritten when a rebuild or a backfill has re-embedded the
whole group with the embedder in use — so a database rebuilt from the WAL has the same stamps. A write made with
another embedder than the stamped one leaves the stamp alone: the group then holds vectors of
two models, which `knowledge_status` reports as a mismatch until a rebuild
(`knowledge_rebuild_from_wal` with `force_clear`) or `knowledge_backfill_summary_embeddings`
re-embeds it.

Per group, and in `knowledge_status.embedding_model_status` (worst first):
- `mismatch`: vectors stamped by another model or dimension — they are not comparable with
  vectors of the embedder in use;
- `unstamped`: vectors with no stamp (written before stamps existed): their model is unknown;
- `ok`: every group holding vectors was stamped by the embedder in use (also: no vectors).
"""

from __future__ import annotations

import json
from typing import Any

from lcg.embedding.base import EmbedderIdentity
from lcg.storage.backend import GraphReader, GraphWriter

__all__ = [
    "STAMP_PREFIX",
    "clear_if_empty",
    "clear_stamp",
    "encode_stamp",
    "foreign_stamp",
    "is_unstamped_and_empty",
    "model_status",
    "read_stamps",
    "restamp_group",
    "stamp_key",
    "vectors_per_group",
    "write_stamp",
]

STAMP_PREFIX = "embedding_identity:"
_SEVERITY = {"ok": 0, "unstamped": 1, "mismatch": 2}


def stamp_key(group_id: str) -> str:
    return f"{STAMP_PREFIX}{group_id}"


def encode_stamp(identity: EmbedderIdentity) -> str:
    return json.dumps({"model": identity.model, "dim": identity.dim}, sort_keys=True)


def _decode(raw: str) -> tuple[str | None, int | None]:
    try:
        value = json.loads(raw)
    except ValueError:
        return None, None
    if not isinstance(value, dict):
        return None, None
    model, dim = value.get("model"), value.get("dim")
    return (
        model if isinstance(model, str) else None,
        dim if isinstance(dim, int) and not isinstance(dim, bool) else None,
    )


def write_stamp(conn: GraphWriter, group_id: str, identity: EmbedderIdentity) -> None:
    """Stamp the group with `identity` (in the caller's transaction)."""
    conn.set_meta(stamp_key(group_id), encode_stamp(identity), group_id)


def _has_vectors(conn: GraphReader, group_id: str) -> bool:
    return bool(conn.embedding_hashes(group_id, limit=1))


def is_unstamped_and_empty(conn: GraphReader, group_id: str) -> bool:
    """Whether vectors written now would be the group's first: it has no stamp and no vectors.

    (A group with vectors but no stamp was written before stamps existed: its vectors' model
    is unknown, and it stays unstamped until re-embedded whole.)
    """
    return conn.get_meta(stamp_key(group_id), group_id) is None and not _has_vectors(conn, group_id)


def clear_if_empty(conn: GraphWriter, group_id: str) -> None:
    """Remove the stamp of a group whose last vectors were deleted."""
    if conn.get_meta(stamp_key(group_id), group_id) is not None and not _has_vectors(
        conn, group_id
    ):
        clear_stamp(conn, group_id)


def restamp_group(conn: GraphWriter, group_id: str, identity: EmbedderIdentity) -> None:
    """After the whole group was (re-)embedded with `identity`: stamp it, or, if it holds no
    vectors at all, remove its stamp (its next vectors will set one)."""
    if _has_vectors(conn, group_id):
        write_stamp(conn, group_id, identity)
    else:
        clear_stamp(conn, group_id)


def restamp_wanted(conn: GraphReader, group_id: str, identity: EmbedderIdentity) -> bool:
    """Whether `restamp_group` would change the group's stamp: when not, its transaction is
    spared (on LadybugDB a commit that is not a bulk load ends the database's bulk-only state,
    and with it COPY for the groups loaded after it: lcg.storage.bulk)."""
    raw = conn.get_meta(stamp_key(group_id))
    if _has_vectors(conn, group_id):
        return raw != encode_stamp(identity)
    return raw is not None


def clear_stamp(conn: GraphWriter, group_id: str) -> None:
    conn.set_meta(stamp_key(group_id), None, group_id)


def read_stamps(conn: GraphReader) -> dict[str, tuple[str | None, int | None]]:
    """Every group's stamp as (model, dim); an unreadable stamp reads as (None, None)."""
    return {
        key.removeprefix(STAMP_PREFIX): _decode(raw)
        for key, raw in conn.meta_with_prefix(STAMP_PREFIX).items()
    }


def vectors_per_group(conn: GraphReader) -> dict[str, int]:
    return conn.embedding_counts()


def model_status(conn: GraphReader, identity: EmbedderIdentity) -> dict[str, Any]:
    """`embedding_model_status` and, per group holding vectors, its stamp and status."""
    stamps = read_stamps(conn)
    groups: dict[str, dict[str, Any]] = {}
    for group_id, count in sorted(vectors_per_group(conn).items()):
        model, dim = stamps.get(group_id, (None, None))
        if group_id not in stamps:
            status = "unstamped"
        elif (model, dim) == (identity.model, identity.dim):
            status = "ok"
        else:
            status = "mismatch"
        groups[group_id] = {"model": model, "dim": dim, "vectors": count, "status": status}
    worst = max((g["status"] for g in groups.values()), key=_SEVERITY.__getitem__, default="ok")
    return {"embedding_model_status": worst, "embedding_groups": groups}


def foreign_stamp(conn: GraphReader, identity: EmbedderIdentity) -> tuple[str, int] | None:
    """The (model, dim) of another embedder than `identity` when it stamped groups of the
    workspace and no third model did (then search can answer from that model's vectors until
    a re-embed completes); None when every stamp is `identity`'s, or the stamps name several
    other models, or an unreadable one."""
    foreign = {v for v in read_stamps(conn).values() if v != (identity.model, identity.dim)}
    if len(foreign) != 1:
        return None
    model, dim = foreign.pop()
    return None if model is None or dim is None else (model, dim)
