"""`SearchIndex.build_from_rows`: the partitions a bulk replay builds from its folded rows equal the
ones `_build` makes of the same rows read back from a real Kuzu database."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from lcg.embedding import HashEmbedder
from lcg.embedding.base import EmbedderIdentity
from lcg.engine.replay import replay_group
from lcg.models import Entity, Episode, Fact
from lcg.search import index as index_mod
from lcg.search import vectors as vectors_mod
from lcg.search.index import ALWAYS, FAMILIES, NEVER, SearchIndex, micros
from lcg.search.partition import Partition
from lcg.search.vectors import Vectors as VectorStore
from lcg.storage.backend import GraphReader
from lcg.storage.kuzu_backend import KuzuBackend
from lcg.storage.store import Store
from lcg.wal.fold import FoldedGroup
from lcg.wal.records import Op, entity_op, episode_op, fact_op
from lcg.wal.writer import Wal

AT = datetime(2024, 1, 1, 12, 30, 15, 123456, tzinfo=UTC)


def _stream(tmp_path: Path) -> Path:
    """Entities (labels, empty and non-ASCII texts, a merge, a replaced row), facts (times
    present and absent, an invalidation, a relation type or none, a dangling endpoint: that one
    a bulk replay leaves out and reports) and episodes (one deleted, one empty)."""
    wal = Wal(tmp_path / "wal", 1 << 20, 1000)
    entities = [
        Entity(
            "a",
            "g",
            "Ada Lovelace",
            ("Entity", "Person"),
            "Wrote the first program.",
            created_at=AT,
        ),
        Entity("b", "g", "Charles Babbage", summary="", created_at=AT),
        Entity("c", "g", "Ἀριστοτέλης Σωκράτης", summary="ΣΟΦΟΣ φιλόσοφος", created_at=None),
        Entity("d", "g", "", summary="no name at all"),
        Entity("e", "g", "Analytical Engine", merged_into="b", created_at=AT),
    ]
    facts = [
        Fact(
            "f1",
            "g",
            "a",
            "b",
            "WORKED_WITH",
            "Ada worked with Babbage",
            "WORKED_WITH",
            valid_at=AT,
            created_at=AT,
        ),
        Fact("f2", "g", "a", "c", "READ", "", None, valid_at=None, created_at=AT),
        Fact(
            "f3",
            "g",
            "b",
            "zz",
            "DESIGNED",
            "Babbage designed the engine",
            "DESIGNED",
            valid_at=AT - timedelta(days=3650),
            invalid_at=AT,
            created_at=AT,
            expired_at=AT,
        ),
        Fact("f4", "g", "c", "a", "", "the 1843 notes, 2nd edition", None, created_at=AT),
    ]
    episodes = [
        Episode(
            "p1",
            "g",
            "one",
            "Ada Lovelace wrote notes on the Analytical Engine.",
            created_at=AT,
            valid_at=AT,
        ),
        Episode("p2", "g", "two", "", created_at=AT),
        Episode("p3", "g", "three", "deleted later", created_at=AT),
    ]
    ops = [*map(episode_op, episodes), *map(entity_op, entities), *map(fact_op, facts)]
    wal.append("g", ops)
    wal.append(
        "g",
        [
            entity_op(
                Entity(
                    "a",
                    "g",
                    "Ada King",
                    ("Entity", "Person"),
                    "Countess of Lovelace.",
                    created_at=AT,
                )
            ),
            Op(
                "fact.invalidate",
                {"uuid": "f1", "invalid_at": AT.isoformat(), "expired_at": AT.isoformat()},
            ),
            Op("episode.delete", {"uuid": "p3"}),
            Op("mentions.add", {"episode": "p1", "entities": ["a", "b"]}),
        ],
    )
    wal.close()
    return tmp_path / "wal" / "g"


def _doc(index: SearchIndex, part: Partition) -> dict[str, Any]:
    """Everything a partition answers with, per document uuid (terms by their stems, codes by
    their strings): independent of the order documents, terms and codes were numbered in."""
    view = part.view()
    stems = {term: stem for stem, term in index.vocab.export()["terms"].items()}
    out: dict[str, Any] = {}
    terms: dict[int, dict[str, int]] = {}
    for term in range(view.base_terms):
        docs, tf = view.postings(term)
        for doc, count in zip(docs.tolist(), tf.tolist(), strict=True):
            terms.setdefault(doc, {})[stems[term]] = count
    assert not len(view.delta_term)  # compacted
    for doc, uuid in enumerate(view.uuids[: view.n]):
        columns = {}
        for name, col in view.columns.items():
            value = int(col[doc])
            coded = name in ("name", "relation_type", "source", "target")
            columns[name] = index.decode([value])[0] if coded else value
        out[uuid] = {
            "alive": bool(view.alive[doc]),
            "len": int(view.doc_len[doc]),
            "terms": terms.get(doc, {}),
            "has": {k: bool(m[doc]) for k, m in view.has_vector.items()},
            "vectors": {
                k: v.get(np.array([doc])).round(6).tolist()
                for k, v in view.vectors.items()
                if view.has_vector[k][doc]
            },
            "columns": columns,
            "tags": view.tags[doc],
        }
    assert (view.live_docs, view.live_len) == (
        sum(d["alive"] for d in out.values()),
        sum(d["len"] for d in out.values() if d["alive"]),
    )
    return out


def _reader(backend: KuzuBackend) -> Callable[[Callable[[GraphReader], Any]], Any]:
    def read(fn: Callable[[GraphReader], Any]) -> Any:
        with backend.read() as conn:
            return fn(conn)

    return read


@pytest.mark.parametrize("quantized", [False, True])
def test_partitions_from_folded_rows_equal_those_read_back_from_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quantized: bool
) -> None:
    if quantized:  # the int8 layout a large partition gets
        monkeypatch.setattr(vectors_mod, "QUANTIZE_MIN_ROWS", 1)
    store = Store(tmp_path / "db" / "g.db")
    backend = KuzuBackend(store)
    embedder = HashEmbedder(64)
    folded: list[FoldedGroup] = []

    class Keep:
        def build(self, rows: FoldedGroup) -> None:
            folded.append(rows)

        def discard(self) -> None:
            raise AssertionError("the load failed")

    try:
        report = replay_group(
            backend,
            _stream(tmp_path),
            "g",
            embedder,
            generation=None,
            bulk_load=True,
            loaded=Keep(),
        )
        assert report.mode == "bulk" and len(folded) == 1
        rows = folded[0]
        assert len(rows.entities) == 5 and len(rows.facts) == 3 and len(rows.episodes) == 2
        assert report.dangling == ["f3"]  # its target "zz" is no entity: not served
        from_db = SearchIndex(_reader(backend), embedder)
        built = {family: from_db._build(family, "g") for family in FAMILIES}

        def no_reads(fn: Any) -> Any:
            raise AssertionError("build_from_rows read the database")

        from_rows = SearchIndex(no_reads, embedder)
        made = from_rows.build_from_rows(
            list(rows.entities.values()), list(rows.facts.values()), list(rows.episodes.values())
        )
        assert set(made) == set(FAMILIES)
        for family in FAMILIES:
            expected = _doc(from_db, built[family])
            assert expected  # every family has rows here
            assert _doc(from_rows, made[family]) == expected, family
            layout = {k: v.layout for k, v in made[family]._vectors.items()}
            assert layout == {k: v.layout for k, v in built[family]._vectors.items()}
            assert all((lay != "f32") is quantized for lay in layout.values())
    finally:
        store.close()


def test_install_serves_the_partitions_and_refuses_another_models(tmp_path: Path) -> None:
    embedder = HashEmbedder(64)

    def no_reads(fn: Any) -> Any:
        raise AssertionError("an installed partition is not loaded")

    index = SearchIndex(no_reads, embedder)
    index.reset()
    index.invalidate(["g"])
    made = index.build_from_rows(
        [Entity("a", "g", "Ada", summary="first programmer")],
        [Fact("f", "g", "a", "a", "IS", "Ada is Ada")],
        [Episode("p", "g", "one", "Ada wrote")],
    )
    assert not index.install("g", made, "another-model")
    assert index.install("g", made, embedder.identity.model)
    for family in FAMILIES:
        ((group, view),) = index.views(family, ["g"])
        assert group == "g" and view.uuids[: view.n] == [made[family].view().uuids[0]]


class _Dense:
    """Dense vectors (every cell non-zero, unlike the hash embedder's): the "dense" layout."""

    def __init__(self, dim: int) -> None:
        self._hash = HashEmbedder(dim)
        rotation, _ = np.linalg.qr(np.random.default_rng(3).standard_normal((dim, dim)))
        self._rotation = rotation.astype(np.float32)

    @property
    def identity(self) -> EmbedderIdentity:
        return EmbedderIdentity(model="dense-test", dim=self._hash.identity.dim)

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        # Row by row: a text's vector must not depend on the batch it came in (a matrix
        # product's rounding does), as a cached vector does not.
        out = np.zeros((len(texts), self.identity.dim), dtype=np.float32)
        for i, row in enumerate(self._hash.embed(texts)):
            out[i] = row @ self._rotation
        return out


@pytest.mark.parametrize("dense", [False, True])
def test_vectors_quantised_as_looked_up_equal_those_quantised_at_compaction(
    monkeypatch: pytest.MonkeyPatch, dense: bool
) -> None:
    """A large partition's build quantises its vectors chunk by chunk (no float32 matrix of
    the whole family): the same int8 store as quantising the float32 rows afterwards."""
    monkeypatch.setattr(index_mod, "_EMBED_CHUNK", 7)
    monkeypatch.setattr(vectors_mod, "SAMPLE_ROWS", 5)
    monkeypatch.setattr(index_mod, "SAMPLE_ROWS", 5)
    embedder: Any = _Dense(64) if dense else HashEmbedder(64)
    texts = [
        "" if (i % 3 == 0 and i < 35) or 20 <= i < 35 else f"moon landing {i} crew {i % 7}"
        for i in range(60)
    ]
    built, present = SearchIndex._vectors(embedder, texts, quantize=True)
    rows, present_f32 = SearchIndex._vectors(embedder, texts)
    assert isinstance(built, VectorStore) and not isinstance(rows, VectorStore)
    assert np.array_equal(present, present_f32)
    old = VectorStore(64)
    old.adopt(rows)
    old.quantize(len(texts), present)
    assert built.layout == old.layout == ("dense" if dense else "sparse")
    assert built.capacity == old.capacity
    n = len(texts)
    mine, theirs = built.view(n), old.view(n)
    assert np.array_equal(mine.rows, theirs.rows)
    assert np.array_equal(mine.scale, theirs.scale)
    assert np.array_equal(mine.bits, theirs.bits)
    assert not mine.scale[:n][~present].any()  # an absent vector stays a zero row


def test_a_large_partition_is_built_int8_without_a_float32_matrix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vectors_mod, "QUANTIZE_MIN_ROWS", 3)
    adopted: list[str] = []
    real = VectorStore.adopt

    def adopt(self: VectorStore, rows: Any) -> None:
        adopted.append("f32")
        real(self, rows)

    monkeypatch.setattr(VectorStore, "adopt", adopt)
    index = SearchIndex(lambda fn: None, HashEmbedder(64))
    made = index.build_from_rows(
        [Entity(str(i), "g", f"Ada {i}", summary="first programmer") for i in range(4)],
        [Fact("f", "g", "0", "1", "IS", "Ada is Ada")],
        [Episode("p", "g", "one", "Ada wrote")],
    )
    assert {k: v.layout for k, v in made["entity"]._vectors.items()} == {
        "entity_name": "sparse",
        "entity_summary": "sparse",
    }
    assert adopted == ["f32", "f32"]  # the fact and episode partitions: below the threshold


def test_times_converted_at_once_equal_micros_one_at_a_time() -> None:
    zone = timezone(timedelta(hours=5, minutes=30))
    values = [
        AT,
        None,
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(1900, 1, 1, tzinfo=UTC),
        datetime(2024, 2, 29, 1, 2, 3, 456789, tzinfo=zone),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ]
    for missing in (ALWAYS, NEVER):
        assert index_mod._micros_of(values, missing).tolist() == [
            micros(v, missing) for v in values
        ]
    assert index_mod._micros_of([], NEVER).tolist() == []
