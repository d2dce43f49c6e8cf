"""Tokenisation for the lexical index: the one place that decides what a "term" is.

Text is lower-cased and split into runs of Unicode letters and digits; English stopwords are
dropped and every word is reduced by the Porter stemmer — the same stemmer Kuzu's full-text
indexes are built with (`stemmer := 'porter'`), so a word matches the same inflections in both.
Unlike Kuzu's default, digits are kept: "Apollo 11" and "Apollo 13" are different queries.

Terms get dense integer ids from one `Vocabulary` per search index; ids are never reused, so a
posting list built at any time stays valid.

A query's terms are weighed (`Vocabulary.query_terms`): the words a question uses to ask about
what was said rather than to name what it was about ("summarize", "in which order", "mentioned
throughout our conversations", `QUESTION_WORDS`) weigh `QUESTION_WEIGHT` of their idf, so that a
rare one of them ("summary" in a chat that never says it) does not outrank the topic; a query of
only such words keeps their full weight. Indexed text is not affected.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from itertools import chain

import numpy as np
import numpy.typing as npt
import Stemmer

__all__ = ["QUESTION_WEIGHT", "QUESTION_WORDS", "STOPWORDS", "Vocabulary", "tokens"]

_WORD = re.compile(r"[^\W_]+")
# For ASCII text (the common case) the same split, twice as fast: every ASCII character that is
# not a letter or digit becomes a space.
_ASCII_GAPS = str.maketrans({c: " " for c in map(chr, range(128)) if not c.isalnum()})
# `Vocabulary.analyze` splits many texts as one string, joined by `_SEP` (a word of its own that
# no text holds): `_SEP_ID` marks where each text ends. The same split as `tokens`, but one C
# pass over the batch instead of four Python calls per text.
_SEP = "\x00"
_SEP_ID = -2
_BATCH_GAPS = {**_ASCII_GAPS, 0: _SEP}
_BATCH_WORD = re.compile(r"[^\W_]+|\x00")
# Texts split at once by `analyze`: bounds the batch's word list (~60 bytes a word).
_BATCH_TEXTS = 8192

# fmt: off
STOPWORDS = frozenset((
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
    "by", "can", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from",
    "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him",
    "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me",
    "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only",
    "or", "other", "our", "ours", "ourselves", "out", "over", "own", "s", "same", "she", "should",
    "so", "some", "such", "t", "than", "that", "the", "their", "theirs", "them", "themselves",
    "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
    "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves",
))
# Words that ask about a conversation or a set of notes instead of naming a topic: requests
# ("summarize", "list", "walk me through"), the record itself ("conversations", "sessions",
# "mentioned", "brought up", "discussed") and its extent ("throughout", "across", "so far").
QUESTION_WORDS = frozenset((
    "across", "aspects", "brought", "chat", "chats", "chronological", "chronologically",
    "comprehensive", "conversation", "conversations", "describe", "discuss", "discussed",
    "discussing", "discussion", "discussions", "far", "give", "items", "list", "mention",
    "mentioned", "mentioning", "mentions", "order", "overview", "please", "provide", "recall",
    "recap", "remind", "sequence", "session", "sessions", "summaries", "summarise",
    "summarised", "summarize", "summarized", "summary", "talk", "talked", "tell", "throughout",
    "various", "walk",
))
# fmt: on
# The share of its idf a question word weighs in a query (a topic word weighs all of it).
# Measured with bench/evidence.py (docs/search.md, "Context").
QUESTION_WEIGHT = 0.25

Ids = npt.NDArray[np.int64]


def tokens(text: str) -> list[str]:
    """The raw words of `text`: lower-cased runs of letters and digits (stopwords included)."""
    lowered = text.lower()
    if lowered.isascii():
        return lowered.translate(_ASCII_GAPS).split()
    return _WORD.findall(lowered)


class Vocabulary:
    """Word -> term id (stemmed; stopwords map to -1). Thread-safe; ids only ever grow.

    The stemmer runs only under the lock (PyStemmer objects are not thread-safe); lookups of
    known words take no lock.
    """

    def __init__(self) -> None:
        self._stemmer = Stemmer.Stemmer("porter")
        # Each word is stemmed once (`_word_ids` remembers it): PyStemmer's own cache only adds
        # its upkeep (70k new words: 0.13 s with it, 0.04 s without).
        self._stemmer.maxCacheSize = 0
        self._word_ids: dict[str, int] = dict.fromkeys(STOPWORDS, -1)
        self._word_ids[_SEP] = _SEP_ID  # never a word of a text (`analyze`)
        self._term_ids: dict[str, int] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._term_ids)

    def export(self) -> dict[str, dict[str, int]]:
        """Every word and stem with its id (lcg.search.snapshot)."""
        with self._lock:
            words = {w: i for w, i in self._word_ids.items() if w != _SEP}
            return {"words": words, "terms": dict(self._term_ids)}

    def restore(self, saved: dict[str, dict[str, int]]) -> None:
        """Take the ids `export` gave (before any text was analysed: ids must not collide).

        Raises:
            ValueError: texts were analysed already, or `saved` is malformed.
        """
        with self._lock:
            if self._term_ids:
                raise ValueError("the vocabulary is in use")
            words, terms = dict(saved["words"]), dict(saved["terms"])
            if sorted(terms.values()) != list(range(len(terms))):
                raise ValueError("term ids are not 0..n-1")
            self._word_ids.update(words)
            self._term_ids.update(terms)

    def _register(self, words: set[str]) -> None:
        with self._lock:
            todo = [w for w in words if w not in self._word_ids]
            for word, stem in zip(todo, self._stemmer.stemWords(todo), strict=True):
                term = self._term_ids.get(stem)
                if term is None:
                    term = self._term_ids[stem] = len(self._term_ids)
                self._word_ids[word] = term

    def analyze(self, texts: Sequence[str]) -> tuple[Ids, Ids]:
        """Term ids of many texts at once: (per-text term counts, all term ids concatenated)."""
        lengths = np.zeros(len(texts), dtype=np.int64)
        parts: list[Ids] = []
        for lo in range(0, len(texts), _BATCH_TEXTS):
            batch = texts[lo : lo + _BATCH_TEXTS]
            counts, ids = self._analyze_batch(batch)
            lengths[lo : lo + len(batch)] = counts
            parts.append(ids)
        return lengths, np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def _analyze_batch(self, texts: Sequence[str]) -> tuple[Ids, Ids]:
        joined = f" {_SEP} ".join(texts).lower()
        if joined.count(_SEP) != len(texts) - 1:  # a text holds the separator: one at a time
            words = list(chain.from_iterable([*tokens(t), _SEP] for t in texts))
        elif joined.isascii():
            words = joined.translate(_BATCH_GAPS).split()
            words.append(_SEP)
        else:
            words = _BATCH_WORD.findall(joined)
            words.append(_SEP)
        known = self._word_ids
        new = set(words).difference(known)
        if new:
            self._register(new)
        flat = np.fromiter(map(known.__getitem__, words), dtype=np.int64, count=len(words))
        ends = flat == _SEP_ID
        owner = np.cumsum(ends) - ends  # the text each word belongs to
        keep = flat >= 0
        lengths = np.bincount(owner[keep], minlength=len(texts)).astype(np.int64)
        return lengths, flat[keep]

    def query(self, text: str) -> list[int]:
        """Distinct term ids of a query, in order; words never indexed are dropped."""
        return list(self.query_terms(text)[0])

    def query_terms(self, text: str) -> tuple[dict[int, float], float]:
        """A query's distinct term ids, in order, each with its weight (module docstring: 1,
        or `QUESTION_WEIGHT` for a term only question words give), and the summed weight of
        its words no text ever held (stopwords are neither)."""
        found: list[tuple[int | None, float]] = []
        for word in dict.fromkeys(tokens(text)):
            term = self._word_ids.get(word)
            if term is None:
                with self._lock:  # a PyStemmer object is not thread-safe
                    stem = self._stemmer.stemWord(word)
                term = self._term_ids.get(stem)
            if term is None or term >= 0:
                found.append((term, QUESTION_WEIGHT if word in QUESTION_WORDS else 1.0))
        if all(w < 1.0 for _, w in found):  # only question words: they are the topic
            found = [(t, 1.0) for t, _ in found]
        weights: dict[int, float] = {}
        unknown = 0.0
        for term, w in found:
            if term is None:
                unknown += w
            else:
                weights[term] = max(weights.get(term, 0.0), w)
        return weights, unknown
