"""Windows of long episodes (lcg.search.passages): they cover the text, fit the size, break at
paragraphs and sentences before words, and the best one holds the query's words."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from lcg.search.passages import best_window, windows


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("ab .\n!?"), max_size=600),
    st.integers(min_value=5, max_value=120),
)
def test_windows_cover_every_word_and_fit(text: str, size: int) -> None:
    pieces = windows(text, size)
    assert all(0 <= a < b <= len(text) and b - a <= size for a, b in pieces)
    assert all(b1 <= a2 for (_, b1), (a2, _) in pairwise(pieces))
    covered = set()
    for a, b in pieces:
        covered.update(range(a, b))
    # Only whitespace is left out between pieces.
    assert all(text[i].isspace() for i in range(len(text)) if i not in covered)


def test_windows_break_at_paragraphs_then_sentences() -> None:
    first = "One sentence here. " * 3
    second = "Another paragraph follows. It has two sentences."
    text = f"{first.strip()}\n\n{second}"
    pieces = [text[a:b] for a, b in windows(text, 60)]
    assert pieces == [first.strip(), second]
    long = "Alpha beta gamma. Delta epsilon zeta. Eta theta iota."
    assert [long[a:b] for a, b in windows(long, 40)] == [
        "Alpha beta gamma. Delta epsilon zeta.",
        "Eta theta iota.",
    ]


def test_a_short_text_is_one_window() -> None:
    assert windows("just this", 100) == [(0, 9)]
    assert windows("   ", 100) == []


def test_the_best_window_holds_the_query_words() -> None:
    text = (
        "We talked about the weather for a while.\n\n"
        "Then the Sprint: my first sprint ends on March 29 with the auth work.\n\n"
        "Finally some notes about the budget tracker dashboard and the weather."
    )
    w = best_window(text, {"sprint": 1.0, "end": 0.5, "weather": 0.2}, size=80)
    assert text[w.start : w.end].startswith("Then the Sprint") and w.score > 1.5
    # No query weight: the first window.
    w0 = best_window(text, {}, size=80)
    assert text[w0.start : w0.end].startswith("We talked")


def test_a_stem_counts_at_the_start_of_a_word_and_a_number_whole() -> None:
    # "7" is inside "17" and "2019" holds "1" and "9": none of them is the number 7. The
    # second paragraph holds it (as the index splits "3.7" into 3 and 7) and "support".
    text = (
        "Release 0.17 (2019-11-17) Section: Added, supported platforms\n\n"
        "Add support for proxy tunnels on Python 3.7 and asyncio."
    )
    w = best_window(text, {"7": 1.0, "support": 0.6}, size=70)
    assert text[w.start : w.end].startswith("Add support")
    # Inside a word a stem does not count: "port" is not in "support" or "platforms".
    assert best_window(text, {"port": 1.0}, size=70).score == 0.0
    # A mixed-case, non-ASCII text (lower-casing moves offsets) is scored the same way.
    odd = "İstanbul 17 notes\n\nAdd support for 7 tunnels."
    w = best_window(odd, {"7": 1.0}, size=20)
    assert odd[w.start : w.end].startswith("Add support")
