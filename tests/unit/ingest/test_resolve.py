"""Entity resolution without model calls: keys, acronyms, fuzzy names, digits and types."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from lcg.embedding.hashing import HashEmbedder
from lcg.extraction.salvage import CleanEntity, CleanFact
from lcg.ingest.index import GroupIndex, Matrix, acronym, canon, is_acronym_like
from lcg.ingest.resolve import (
    entity_labels,
    match_entities,
    merge_summary,
    plan_entities,
    resolve_facts,
)
from lcg.models import Entity
from lcg.ontology import EMPTY_ONTOLOGY

EMBEDDER = HashEmbedder(384)


def _index(*entities: Entity) -> GroupIndex:
    index = GroupIndex("g", 384)
    vectors = EMBEDDER.embed([e.name for e in entities]) if entities else None
    for i, e in enumerate(entities):
        index.put_entity(e, vectors[i] if vectors is not None else None)
    return index


def _match(
    index: GroupIndex, *names: str, types: tuple[str, ...] = ()
) -> list[tuple[str, str | None]]:
    extracted = [
        CleanEntity(n, types[i] if types else "Entity", "", (), {}) for i, n in enumerate(names)
    ]
    labels = [entity_labels(EMPTY_ONTOLOGY, e.type)[0] for e in extracted]
    matches = match_entities(index, extracted, labels, EMBEDDER.embed(list(names)), 0.92)
    return [(m.how, m.uuid) for m in matches]


def test_keys_ignore_case_and_punctuation() -> None:
    assert canon("N.A.S.A.") == canon("nasa") == "nasa"
    assert is_acronym_like("N.A.S.A.") and is_acronym_like("NASA")
    assert not is_acronym_like("Nasa") and not is_acronym_like("STS-1")
    assert acronym("National Aeronautics and Space Administration") == "nasa"
    assert acronym("Apollo 11") is None


def test_nasa_variants_resolve_to_one_entity() -> None:
    index = _index(Entity("u1", "g", "NASA"))
    assert _match(index, "N.A.S.A.") == [("key", "u1")]
    assert _match(index, "nasa") == [("exact", "u1")]
    assert _match(index, "National Aeronautics and Space Administration") == [("key", "u1")]


def test_a_long_name_is_found_from_its_acronym_or_summary_alias() -> None:
    long_name = Entity("u1", "g", "National Aeronautics and Space Administration")
    assert _match(_index(long_name), "NASA") == [("key", "u1")]
    aliased = Entity("u2", "g", "The space agency", summary="The US space agency (NASA).")
    assert _match(_index(aliased), "NASA") == [("key", "u2")]


def test_numbers_must_match_exactly() -> None:
    index = _index(Entity("u1", "g", "Apollo 1"))
    assert _match(index, "Apollo 11", "Apollo 1") == [("new", None), ("exact", "u1")]


def test_fuzzy_names_merge_when_long_enough_and_types_agree() -> None:
    index = _index(Entity("u1", "g", "Neil Armstrong", labels=("Entity", "Person")))
    assert _match(index, "Neil A. Armstrong", types=("Person",)) == [("fuzzy", "u1")]
    assert _match(index, "Neil A. Armstrong", types=("Ship",)) == [("new", None)]


def test_an_environment_variable_is_not_the_package_its_letters_spell() -> None:
    # `VIRTUAL_ENV` (an ALL_CAPS identifier with an underscore) and the `virtualenv` package
    # differ only in case and punctuation, yet name different things; case alone still matches.
    assert canon("VIRTUAL_ENV") != canon("virtualenv")
    assert canon("VIRTUAL_ENV") == "virtual_env" and canon("N.A.S.A.") == "nasa"
    index = _index(Entity("u1", "g", "VIRTUAL_ENV"))
    assert _match(index, "virtualenv") == [("new", None)]
    assert _match(index, "Virtual Env") == [("new", None)]
    assert _match(index, "virtual_env") == [("exact", "u1")]
    assert _match(_index(Entity("u2", "g", "virtualenv")), "VIRTUAL_ENV") == [("new", None)]
    assert _match(_index(), "VIRTUAL_ENV", "virtualenv") == [("new", None), ("new", None)]
    assert _match(_index(Entity("u3", "g", "MAX_RETRIES")), "MAX-RETRIES") == [("new", None)]
    assert _match(_index(Entity("u4", "g", "NO_PROXY")), "NO_PROXY") == [("exact", "u4")]


def test_short_names_never_match_fuzzily() -> None:
    index = _index(Entity("u1", "g", "ESA"))
    assert _match(index, "ISA") == [("new", None)]


def test_names_within_one_episode_collapse() -> None:
    index = _index()
    assert _match(index, "NASA", "N.A.S.A.", "National Aeronautics and Space Administration") == [
        ("new", None),
        ("batch", None),
        ("batch", None),
    ]


def test_summaries_merge_newest_first_distinct_and_bounded() -> None:
    merged = merge_summary("Old fact. Shared fact.", "New fact. shared fact.", 40)
    assert merged == "New fact. shared fact. Old fact."
    assert len(merge_summary("A" * 50 + ".", "B" * 50 + ".", 60)) <= 60


def test_fact_endpoints_written_differently_still_resolve_within_the_episode() -> None:

    index = _index()
    extracted = [
        CleanEntity("Neil Armstrong", "Person", "", (), {}),
        CleanEntity("Buzz Aldrin", "Person", "", (), {}),
        CleanEntity("National Aeronautics and Space Administration", "Org", "", (), {}),
        CleanEntity("Apollo 11", "Mission", "", (), {}),
    ]
    labels = [entity_labels(EMPTY_ONTOLOGY, e.type) for e in extracted]
    matches = match_entities(
        index,
        extracted,
        [lab for lab, _ in labels],
        EMBEDDER.embed([e.name for e in extracted]),
        0.92,
    )
    plan = plan_entities(
        index,
        extracted,
        labels,
        matches,
        group_id="g",
        reference_time=datetime(2020, 1, 1, tzinfo=UTC),
        summary_cap=200,
    )
    uuid = {row.name: u for u, row in plan.rows.items()}

    def ends(source: str, target: str) -> tuple[str | None, str | None]:
        fact = CleanFact(source, target, "P", "f", None, None, None, ())
        [r] = resolve_facts(index, plan, [fact])
        return r.source_uuid, r.target_uuid

    nasa = uuid["National Aeronautics and Space Administration"]
    assert ends("Armstrong", "NASA") == (uuid["Neil Armstrong"], nasa)
    assert ends("neil armstrong", "Apollo 11") == (uuid["Neil Armstrong"], uuid["Apollo 11"])
    assert ends("Aldrin", "Apollo 1") == (uuid["Buzz Aldrin"], None)
    assert ends("Neil", "Collins") == (uuid["Neil Armstrong"], None)


def test_mentions_are_names_aliases_and_acronyms_in_the_text_in_order() -> None:
    index = _index(
        Entity("u1", "g", "Apollo 11"),
        Entity("u2", "g", "Apollo"),
        Entity("u3", "g", "NASA"),
        Entity("u4", "g", "Neil Armstrong"),
        Entity("u5", "g", "National Aeronautics and Space Administration"),
        Entity("u6", "g", "lcg"),
        Entity("u7", "g", "The"),
        Entity("u8", "g", "Apollo 1"),
        Entity("u9", "g", "Kuzu", summary="A graph database (KDB)."),
    )
    text = "Neil Armstrong's Apollo 11 flight for N.A.S.A. (NASA) is in lcg's notes. The KDB paper."
    # u3 by the dotted spelling, u5 by its initials, u9 by the acronym alias in its summary;
    # never "Apollo 1" inside "Apollo 11", never a lone stopword.
    assert index.mentioned(text, 10) == ["u4", "u2", "u1", "u3", "u5", "u6", "u9"]
    assert index.mentioned(text, 2) == ["u4", "u2"]
    assert index.mentioned("nothing known here", 10) == []


def test_matrix_scores_rows_by_owner_and_marks_the_missing() -> None:
    m = Matrix(2)
    for i in range(100):  # past the initial capacity, so the rows have moved once
        m.put(f"u{i}", np.array([float(i), 1.0], dtype=np.float32))
    scores = m.scores(["u3", "nobody", "u99"], np.array([1.0, 2.0], dtype=np.float32), -1.0)
    assert scores.tolist() == [5.0, -1.0, 101.0]
