"""The offline heuristic extractor: entities and facts from text with no model at all.

Entities are capitalised noun phrases ("Kennedy Space Center", "Apollo 11", "National
Aeronautics and Space Administration", "NASA"); facts are co-occurrences of two entities in one
sentence, named by the few words between them when those read like a relation ("commanded",
"was launched by") and `MENTIONED_WITH` otherwise; a date found in the sentence becomes the
fact's `valid_at`. It answers in the same JSON shapes the LLM prompts ask for, so its output
goes through the same salvage, resolution and commit path — and a scripted test LLM can reuse it.
Deterministic and crude by design: it makes the whole pipeline runnable without a model, and
says so (`extractor.kind = "heuristic"` in every result and in status).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["HEURISTIC_VERSION", "heuristic_entities", "heuristic_facts", "sentences"]

HEURISTIC_VERSION = "heuristic-1"

_MAX_ENTITIES = 40
_MAX_FACTS = 60
_MAX_PAIRS_PER_SENTENCE = 4
_SUMMARY_CHARS = 240
_FACT_CHARS = 300

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        )
    )
}
_STOP = frozenset(
    """a an the in on at of for to from by with and or but as it its he she they we i you his her
    their our this that these those there here when where while after before during since until
    then however also some many most several other another each every all both one two three
    first second later early today yesterday tomorrow if because so not no yes who what which why
    how was were is are be been being has have had do does did can could will would may might
    must shall should mr mrs ms dr st references response history overview see notes monday
    tuesday wednesday thursday friday saturday sunday""".split()  # noqa: SIM905 -- a word list
) | frozenset(_MONTHS)
# "and" never joins: "NASA and Blue Origin" is two names far more often than one.
_CONNECTORS = frozenset({"of", "the", "for", "de", "von", "van", "du"})
_ROMAN = re.compile(r"(?:I{1,3}|IV|VI{0,3}|IX|X)")
_RELATION_WORD = re.compile(r"[a-z][a-z'-]*")
_WEAK = frozenset({"and", "or", "the", "a", "an", "with", "as", "to", "of", "in", "on", "at"})

_TOKEN = re.compile(r"[A-Za-z][\w'’.&-]*|\d+(?:[.,]\d+)*|[^\sA-Za-z\d]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\d\"'(])|\n+")
_DATE_MDY = re.compile(
    r"\b(January|February|March|April|May|June|July|August|September|October|November|December)"
    r"\s+(\d{1,2}),?\s+(\d{4})\b"
)
_DATE_DMY = re.compile(
    r"\b(\d{1,2})\s+(January|February|March|April|May|June|July|August|September|October|November|December)"
    r",?\s+(\d{4})\b"
)
_DATE_MY = re.compile(
    r"\b(January|February|March|April|May|June|July|August|September|October|November|December)"
    r",?\s+(\d{4})\b"
)
_DATE_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_YEAR = re.compile(r"\b(1[89]\d\d|20\d\d)\b")


def sentences(text: str) -> list[str]:
    """The text split into sentences (and lines); blank pieces dropped."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _is_cap(token: str) -> bool:
    return token[:1].isupper() and token.casefold().strip(".") not in _STOP


def _clean(token: str) -> str:
    for suffix in ("'s", "’s"):
        if token.endswith(suffix):
            return token[: -len(suffix)]
    return token.rstrip(".,") if not re.fullmatch(r"(?:[A-Z]\.)+", token) else token


def _mentions(sentence: str) -> list[tuple[int, int, str]]:
    """(first token, end token, phrase) of each capitalised noun phrase, in order.

    A one-word phrase opening the sentence ("Shortly", "Over") is kept only when the word is an
    acronym: sentence case capitalises any word there.
    """
    tokens = _TOKEN.findall(sentence)
    out: list[tuple[int, int, str]] = []
    i = 0
    while i < len(tokens):
        if not (_is_cap(tokens[i]) and re.match(r"[A-Za-z]", tokens[i])):
            i += 1
            continue
        j = i + 1
        while j < len(tokens):
            tok = tokens[j]
            if (
                (_is_cap(tok) and re.match(r"[A-Za-z]", tok))
                or re.fullmatch(r"\d+", tok)
                or _ROMAN.fullmatch(tok)
            ):
                j += 1
            elif (
                tok.casefold() in _CONNECTORS
                and j + 1 < len(tokens)
                and _is_cap(tokens[j + 1])
                and tokens[j + 1].casefold() not in _CONNECTORS
            ):
                j += 2
            else:
                break
            if tokens[j - 1].endswith(("'s", "’s", ",")) or (
                tokens[j - 1].endswith(".") and not re.fullmatch(r"(?:[A-Z]\.)+", tokens[j - 1])
            ):
                break
        words = [_clean(t) for t in tokens[i:j]]
        phrase = " ".join(w for w in words if w)
        opener = i == 0 and j == 1 and not phrase.isupper()
        if phrase and not phrase.isdigit() and not opener:
            out.append((i, j, phrase))
        i = j
    return out


def _first_sentence_index(sents: Sequence[str], name: str) -> int:
    return next((k for k, s in enumerate(sents) if name in s), 0)


def heuristic_entities(text: str) -> dict[str, Any]:
    """The entities answer, in the shape of the entities prompt's schema."""
    sents = sentences(text)
    found: dict[str, str] = {}
    for sentence in sents:
        if len(sentence.split()) < 3:  # headings ("References.") are not sentences
            continue
        for _, _, phrase in _mentions(sentence):
            key = phrase.casefold()
            if key not in found and len(found) < _MAX_ENTITIES:
                found[key] = phrase
    entities = []
    for phrase in found.values():
        summary = sents[_first_sentence_index(sents, phrase)][:_SUMMARY_CHARS] if sents else ""
        entities.append({"name": phrase, "type": "Entity", "summary": summary})
    return {"entities": entities}


def find_date(sentence: str) -> str | None:
    """The first date the sentence names, as an ISO 8601 UTC timestamp (a bare year: Jan 1)."""
    if m := _DATE_MDY.search(sentence):
        month, day, year = _MONTHS[m.group(1).lower()], int(m.group(2)), int(m.group(3))
    elif m := _DATE_DMY.search(sentence):
        day, month, year = int(m.group(1)), _MONTHS[m.group(2).lower()], int(m.group(3))
    elif m := _DATE_ISO.search(sentence):
        year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    elif m := _DATE_MY.search(sentence):
        month, day, year = _MONTHS[m.group(1).lower()], 1, int(m.group(2))
    elif m := _YEAR.search(sentence):
        year, month, day = int(m.group(1)), 1, 1
    else:
        return None
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return f"{year:04d}-{month:02d}-{day:02d}T00:00:00Z"


def _predicate(between: Sequence[str]) -> str:
    words = [w.casefold() for w in between if w not in ("(", ")")]
    if 1 <= len(words) <= 4 and all(_RELATION_WORD.fullmatch(w) for w in words):
        core = [w for w in words if w not in _WEAK]
        if core:
            return "_".join(w.replace("'", "").replace("-", "_") for w in words).upper()
    return "MENTIONED_WITH"


def heuristic_facts(text: str, entity_names: Sequence[str]) -> dict[str, Any]:
    """The facts answer: co-occurring entities of each sentence, in the facts schema's shape."""
    known = {n.casefold(): n for n in entity_names}
    facts: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()
    for sentence in sentences(text):
        if len(facts) >= _MAX_FACTS:
            break
        tokens = _TOKEN.findall(sentence)
        mentions = [
            (i, j, known[p.casefold()]) for i, j, p in _mentions(sentence) if p.casefold() in known
        ]
        when = find_date(sentence)
        pairs = 0
        for (_, end_a, a), (start_b, _, b) in itertools.pairwise(mentions):
            if a.casefold() == b.casefold() or pairs >= _MAX_PAIRS_PER_SENTENCE:
                continue
            predicate = _predicate(tokens[end_a:start_b])
            if (a, predicate, b) in seen:
                continue
            seen.add((a, predicate, b))
            pairs += 1
            facts.append(
                {
                    "source": a,
                    "target": b,
                    "predicate": predicate,
                    "fact": sentence[:_FACT_CHARS],
                    "valid_at": when,
                    "invalid_at": None,
                    "supersedes": [],
                }
            )
    return {"facts": facts[:_MAX_FACTS]}
