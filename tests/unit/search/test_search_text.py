"""The lexical analysis (lcg.search.text): `Vocabulary.analyze` splits a batch of texts as one
string; every text must get the terms `tokens` and the Porter stemmer give it alone."""

from __future__ import annotations

import random

import pytest
import Stemmer
from hypothesis import given, settings
from hypothesis import strategies as st

from lcg.search import text as text_mod
from lcg.search.text import STOPWORDS, Vocabulary, tokens

_STEM = Stemmer.Stemmer("porter")


def reference(texts: list[str]) -> list[list[str]]:
    """Each text's stems, one text at a time, stopwords dropped."""
    return [[_STEM.stemWord(w) for w in tokens(t) if w not in STOPWORDS] for t in texts]


def analysed(vocab: Vocabulary, texts: list[str]) -> list[list[str]]:
    lengths, ids = vocab.analyze(texts)
    assert len(lengths) == len(texts) and int(lengths.sum()) == len(ids)
    stems = {i: s for s, i in vocab.export()["terms"].items()}
    out, at = [], 0
    for n in lengths.tolist():
        out.append([stems[i] for i in ids[at : at + n].tolist()])
        at += n
    return out


def test_batches_match_one_text_at_a_time() -> None:
    rng = random.Random(7)
    words = [
        "Apollo",
        "13's",
        "crew",
        "LANDED",
        "the",
        "of",
        "Σίσυφος",
        "ΟΔΟΣ",
        "İstanbul",
        "naïve",
        "x_y",
        "a-b",
        "42",
        "",
        "\x00",
        "über",
        "日本語",
        "\t\n",
    ]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randrange(0, 9))) for _ in range(500)]
    ascii_only = [t for t in texts if t.isascii() and "\x00" not in t]
    no_sep = [t for t in texts if "\x00" not in t]
    for batch in (texts, ascii_only, no_sep, [], [""], ["", ""], ["\x00"]):
        assert analysed(Vocabulary(), batch) == reference(batch)


def test_batches_span_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text_mod, "_BATCH_TEXTS", 3)
    texts = [f"moon {i} landings" if i % 4 else "" for i in range(20)]
    assert analysed(Vocabulary(), texts) == reference(texts)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=20))
def test_any_texts(texts: list[str]) -> None:
    assert analysed(Vocabulary(), texts) == reference(texts)


def test_the_separator_is_no_word_of_the_saved_vocabulary() -> None:
    vocab = Vocabulary()
    vocab.analyze(["one small step", "for a man"])
    saved = vocab.export()
    assert "\x00" not in saved["words"]
    again = Vocabulary()
    again.restore(saved)
    assert again.analyze(["small man"])[1].tolist() == vocab.analyze(["small man"])[1].tolist()


def test_question_words_weigh_less_than_the_topic() -> None:
    vocab = Vocabulary()
    vocab.analyze(["a summary of the quokka order", "quokka orders"])
    ids = vocab.export()["words"]
    weights, unknown = vocab.query_terms("Summarize the quokka summary, in order, and wombats")
    assert weights == {
        ids["summary"]: text_mod.QUESTION_WEIGHT,
        ids["quokka"]: 1.0,
        ids["order"]: text_mod.QUESTION_WEIGHT,
    }
    # "summarize" and "wombats" were never indexed: a question word and a topic word.
    assert unknown == pytest.approx(text_mod.QUESTION_WEIGHT + 1.0)
    # A topic word that stems like a question word keeps its weight ("orders", "order").
    assert vocab.query_terms("quokka orders in order")[0][ids["order"]] == 1.0
    # Only question words: they are the topic, at full weight.
    assert vocab.query_terms("the summary, in order")[0] == {ids["summary"]: 1.0, ids["order"]: 1.0}
    assert vocab.query("summary of quokka") == [ids["summary"], ids["quokka"]]
