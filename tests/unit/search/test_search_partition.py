"""A search partition (lcg.search.partition) against a brute-force model of its documents:
postings after adds, replacements, removals and compactions; vectors and columns stay aligned;
views taken earlier stay consistent while writes continue."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lcg.search.partition import Partition
from lcg.search.text import Vocabulary, tokens

WORDS = ["apollo", "lunar", "module", "saturn", "rocket", "crew", "moon", "orbit", "the", "13"]


def expected_postings(vocab: Vocabulary, docs: dict[str, str]) -> dict[int, dict[str, int]]:
    out: dict[int, dict[str, int]] = {}
    for uuid, text in docs.items():
        _, ids = vocab.analyze([text])
        for term, tf in Counter(ids.tolist()).items():
            out.setdefault(term, {})[uuid] = tf
    return out


def actual_postings(part: Partition, vocab: Vocabulary) -> dict[int, dict[str, int]]:
    view = part.view()
    out: dict[int, dict[str, int]] = {}
    for term in range(len(vocab)):
        docs, tf = view.postings(term)
        for d, t in zip(docs.tolist(), tf.tolist(), strict=True):
            if view.alive[d]:
                out.setdefault(term, {})[view.uuids[d]] = t
    return out


ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "compact"]),
        st.integers(0, 7),
        st.lists(st.sampled_from(WORDS), max_size=6),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_postings_vectors_and_columns_match_a_model(
    steps: list[tuple[str, int, list[str]]],
) -> None:
    vocab = Vocabulary()
    part = Partition(vocab, ["v"], 4, ["c"])
    model: dict[str, str] = {}
    vec: dict[str, float] = {}
    for step, (kind, key, words) in enumerate(steps):
        uuid = f"u{key}"
        if kind == "add":
            text = " ".join(words)
            part.add(
                [uuid],
                [text],
                {"v": (np.full((1, 4), step, dtype=np.float32), np.array([True]))},
                {"c": np.array([step])},
            )
            model[uuid], vec[uuid] = text, step
        elif kind == "remove":
            part.remove([uuid])
            model.pop(uuid, None)
        else:
            part.compact()
    assert actual_postings(part, vocab) == expected_postings(vocab, model)
    view = part.view()
    live = {view.uuids[d]: d for d in np.flatnonzero(view.live())}
    assert set(live) == set(model)
    assert view.live_docs == len(model)
    assert view.live_len == sum(len(vocab.analyze([t])[1]) for t in model.values())
    for uuid, d in live.items():
        assert view.vectors_of("v", np.array([d]))[0][0] == vec[uuid]
        assert view.columns["c"][d] == vec[uuid]


def test_views_stay_consistent_while_writes_continue() -> None:
    vocab = Vocabulary()
    part = Partition(vocab, [], 4)
    rng = random.Random(3)
    part.add([f"d{i}" for i in range(50)], [" ".join(rng.choices(WORDS, k=5)) for _ in range(50)])
    before = part.view()
    snapshot = {t: before.postings(t)[0].tolist() for t in range(len(vocab))}
    for i in range(3000):  # enough to trigger compactions (renumbering)
        part.add([f"d{i % 80}"], [" ".join(rng.choices(WORDS, k=5))])
    assert {t: before.postings(t)[0].tolist() for t in range(len(vocab))} == snapshot
    assert before.n == 50 and len(before.uuids) >= 50
    after = part.view()
    assert after.live_docs == 80 and after.n <= 3050


def test_tokens_stem_and_stop_words() -> None:
    assert tokens("Apollo-13's crew, LANDED!") == ["apollo", "13", "s", "crew", "landed"]
    vocab = Vocabulary()
    lengths, ids = vocab.analyze(["The astronauts landed", "an astronaut lands", ""])
    assert lengths.tolist() == [2, 2, 0]  # "the", "an" are stopwords
    assert ids[0] == ids[2] and ids[1] == ids[3]  # astronauts/astronaut, landed/lands
    assert vocab.query("LANDING astronaut of the") == [int(ids[1]), int(ids[0])]
    assert vocab.query("unseenword the") == []
