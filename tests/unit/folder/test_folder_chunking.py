"""Chunking: size bound, boundaries (heading, paragraph, sentence, word), context, stable ids."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from lcg.folder.chunking import chunk_document
from lcg.folder.documents import Document

WHEN = datetime(2025, 3, 14, tzinfo=UTC)


def doc(text: str, title: str = "Notes", key: str = "") -> Document:
    return Document("notes/a.md", key, title, text, WHEN, "front_matter")


def body_words(chunk_text: str) -> list[str]:
    """The words of a chunk after its context header."""
    return chunk_text.split("\n\n", 1)[1].split()


def test_a_small_document_is_one_chunk_with_its_context_header() -> None:
    chunks = chunk_document(doc("# Launch\n\nApollo 13 launched on April 11, 1970."), 1000)
    assert len(chunks) == 1
    assert chunks[0].text.startswith("Document: Notes\nSection: Launch\n\n")
    assert chunks[0].heading_path == ("Launch",)
    assert chunks[0].chunk_id == "notes/a.md#Launch#0"


def test_sections_that_do_not_fit_together_split_at_headings_and_keep_their_paths() -> None:
    text = (
        "# Mission\n\n"
        + "Intro sentence. " * 20
        + "\n\n## Crew\n\n"
        + "Lovell flew. " * 20
        + "\n\n## Return\n\n"
        + "They came home. " * 20
    )
    chunks = chunk_document(doc(text), 420)
    assert [c.heading_path for c in chunks] == [
        ("Mission",),
        ("Mission", "Crew"),
        ("Mission", "Return"),
    ]
    assert "Section: Mission > Crew" in chunks[1].text
    assert all(len(c.text) <= 420 for c in chunks)


def test_small_sections_are_packed_into_one_chunk() -> None:
    text = "# A\n\nOne.\n\n# B\n\nTwo.\n\n# C\n\nThree."
    chunks = chunk_document(doc(text), 1000)
    assert len(chunks) == 1
    assert "# B" in chunks[0].text and "Three." in chunks[0].text


def test_headings_inside_fenced_code_are_not_boundaries() -> None:
    text = "# Real\n\n```sh\n# not a heading\necho hi\n```\n\nAfter the code."
    (chunk,) = chunk_document(doc(text), 1000)
    assert chunk.heading_path == ("Real",)
    assert "# not a heading" in chunk.text


def test_a_long_paragraph_splits_at_sentences_and_a_long_sentence_at_words() -> None:
    sentences = " ".join(f"Sentence number {i} is here." for i in range(60))
    chunks = chunk_document(doc(sentences), 300)
    assert len(chunks) > 1
    for chunk in chunks:
        assert len(chunk.text) <= 300
        assert body_words(chunk.text)[-1].endswith(".")  # cut after a sentence end
    long_sentence = " ".join(f"word{i}" for i in range(400))
    chunks = chunk_document(doc(long_sentence), 300)
    assert [w for c in chunks for w in body_words(c.text)] == long_sentence.split()


def test_ordinals_count_chunks_that_share_a_heading_path_and_ids_are_unique() -> None:
    text = "# Big\n\n" + "\n\n".join(f"Paragraph {i}. " * 10 for i in range(20))
    chunks = chunk_document(doc(text), 400)
    ids = [c.chunk_id for c in chunks]
    assert len(set(ids)) == len(ids)
    assert ids[:3] == ["notes/a.md#Big#0", "notes/a.md#Big#1", "notes/a.md#Big#2"]


def test_record_keys_are_part_of_the_id() -> None:
    (chunk,) = chunk_document(doc("Text.", key="r7"), 1000)
    assert chunk.chunk_id == "notes/a.md#r7##0"


def test_the_same_text_gives_the_same_chunks() -> None:
    text = "# A\n\n" + "Words and more words. " * 100
    assert chunk_document(doc(text), 500) == chunk_document(doc(text), 500)


_word = st.text(alphabet="abcdefghij", min_size=1, max_size=12)
_sentence = st.lists(_word, min_size=1, max_size=30).map(lambda ws: " ".join(ws) + ".")
_paragraph = st.lists(_sentence, min_size=1, max_size=8).map(" ".join)
_section = st.tuples(st.integers(1, 3), _word, st.lists(_paragraph, max_size=4)).map(
    lambda t: "#" * t[0] + " " + t[1] + "\n\n" + "\n\n".join(t[2])
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_section, min_size=1, max_size=6), st.integers(300, 2000))
def test_no_chunk_exceeds_the_limit_and_no_word_is_cut_or_lost(
    sections: list[str], max_chars: int
) -> None:
    text = "\n\n".join(sections)
    chunks = chunk_document(doc(text), max_chars)
    assert all(len(c.text) <= max_chars for c in chunks)
    # Words of 12 letters never exceed the budget, so none is cut: every word survives, in order.
    assert [w for c in chunks for w in body_words(c.text)] == text.split()
