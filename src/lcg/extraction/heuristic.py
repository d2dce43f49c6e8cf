"""The offline heuristic extractor: entities and facts from text with no model at all.

Rules only, and labelled so (`extractor.kind = "heuristic"` in every result and in status);
docs/offline-extraction.md describes what it reads and what it was measured on. Entities are
capitalised noun phrases ("Kennedy Space Center", "Apollo 11"), code-style names (`atlas-core`),
common-noun phrases after an article as fact endpoints ("the search team" -> `search team`,
"promoted to principal engineer"), and, as fact targets only, dates and short status values.
Literals, pronouns, interjections, single letters and a verb opening a title ("Pin Werkzeug")
are never entities (`lexicon.is_noise`). Headings, headers, fenced code, tables, questions and
lines of fewer than three words are not read as statements; a date heading dates what follows.

Each sentence gives at most one fact: its subject — the mention that opens the clause after a
leading adverbial ("In March", "After the reorg,") — to the next mention, typed by the verb
phrase between them with auxiliaries, adverbs and articles dropped ("was rewritten in" ->
`REWRITTEN_IN`). "We moved X under Y" is a fact about X; "X is led by Y" is said the active way
(`Y LEADS X`); "he"/"she"/"it"/"they" stand for the last compatible entity of the episode, and
in a `message` episode ("speaker: text") "I" is the speaker. A relation type maps onto the
ontology's declared types by name, alias or the same stemmed words. A sentence whose verb phrase
does not read as a relation gives no fact (counted in `unread`; there is no co-mention pair).

`valid_at` is the sentence's own date, else a relative date ("yesterday", "last Friday", "in
March") resolved against the heading's date or the episode's reference time
(`relative_dates`), else the heading's date; an event verb's date object dates the fact.

Change cues retire facts through the pipeline's rules: the verb phrase itself lands in a
built-in single-valued family (`lcg.ontology.supersession`), and "from X", "replaced X (as /
with)", "took over X from Y", "left", "stepped down", "no longer" flag the existing facts they
end (reason `cue`); the same cues and families end the earlier facts of the same text (a dated
changelog read as one episode) by setting their `invalid_at`. A sentence with "also"/"as well"
never retires anything. It answers in the JSON shapes of the LLM prompts, so its output goes
through the same salvage, resolution and commit path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lcg.extraction.changelog import changelog_graph
from lcg.extraction.lexicon import (
    DETERMINERS,
    GENERIC_NOUNS,
    IMPERATIVE_VERBS,
    INTERJECTIONS,
    NP_STOP,
    PARTICIPLES,
    PRONOUNS,
    VERBS,
    is_noise,
)
from lcg.extraction.relative_dates import resolve_relative
from lcg.ontology import Ontology
from lcg.ontology.supersession import family_of, is_additive, relation_words
from lcg.timeutil import MONTHS

__all__ = ["HEURISTIC_VERSION", "heuristic_entities", "heuristic_facts", "sentences"]

HEURISTIC_VERSION = "heuristic-3"

_MAX_ENTITIES = 40
_MAX_FACTS = 60
_SUMMARY_CHARS = 240
_FACT_CHARS = 300

_MONTHS = {m: i + 1 for i, m in enumerate(MONTHS)}
_STOP = frozenset(
    """a an the in on at of for to from by with and or but as it its he she they we i you his her
    their our this that these those there here when where while after before during since until
    then however also some many most several other another each every all both one two three
    first second later early today yesterday tomorrow if because so not no yes who what which why
    how was were is are be been being has have had do does did can could will would may might
    must shall should now mr mrs ms dr st references response history overview see notes monday
    tuesday wednesday thursday friday saturday sunday""".split()  # noqa: SIM905 -- a word list
) | frozenset(_MONTHS)
# "and" never joins: "NASA and Blue Origin" is two names far more often than one.
_CONNECTORS = frozenset({"of", "the", "for", "de", "von", "van", "du"})
_ROMAN = re.compile(r"(?:I{1,3}|IV|VI{0,3}|IX|X)")
_RELATION_WORD = re.compile(r"[a-z][a-z'-]*")

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


# `sentences` splits a text in windows of about this many characters: one regex call over a
# whole 15 MB line held the GIL for over a second, stalling the service's event loop.
_SPLIT_WINDOW = 64 * 1024
_TWO_NON_SPACES = re.compile(r"\S\S")


def _windows(text: str) -> list[str]:
    """`text` cut in pieces of about `_SPLIT_WINDOW` characters, each cut between two
    non-space characters: no `_SENTENCE_END` match (a run of spaces) or its look-around spans
    a cut, so splitting each piece gives the same pieces as splitting the whole, with each
    piece that straddles a cut in two parts."""
    out: list[str] = []
    start = 0
    while len(text) - start > _SPLIT_WINDOW:
        pair = _TWO_NON_SPACES.search(text, start + _SPLIT_WINDOW - 1)
        if pair is None:
            break
        cut = pair.start() + 1
        out.append(text[start:cut])
        start = cut
    out.append(text[start:])
    return out


def sentences(text: str) -> list[str]:
    """The text split into sentences (and lines); blank pieces dropped."""
    pieces: list[str] = []
    for i, window in enumerate(_windows(text)):
        parts = _SENTENCE_END.split(window)
        if i:  # the window's first part continues the previous window's last
            parts[0] = pieces.pop() + parts[0]
        pieces += parts
    return [s.strip() for s in pieces if s and s.strip()]


def _is_cap(token: str) -> bool:
    key = token.casefold().strip(".").replace("’", "'")
    return token[:1].isupper() and key not in _STOP and key not in PRONOUNS


def _clean(token: str) -> str:
    for suffix in ("'s", "’s"):
        if token.endswith(suffix):
            return token[: -len(suffix)]
    return token.rstrip(".,") if not re.fullmatch(r"(?:[A-Z]\.)+", token) else token


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


_MONTH_NAMES = "|".join(m.capitalize() for m in _MONTHS)
_TOKENS = re.compile(
    rf"(?P<date>\d{{4}}-\d{{2}}-\d{{2}}|(?:{_MONTH_NAMES})\s+\d{{1,2}},?\s+\d{{4}}"
    rf"|\d{{1,2}}\s+(?:{_MONTH_NAMES}),?\s+\d{{4}})"
    r"|(?P<word>[A-Za-z][\w'’.&+#-]*)|(?P<num>\d+(?:[.,]\d+)*)|(?P<punct>[^\sA-Za-z\d])"
)
_CODE_NAME = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)+")
_HEADER = re.compile(
    r"^(?:document|title|source|date|author|tags|section|chunk|file|summary)\s*:", re.IGNORECASE
)
_HEADING_DATE = re.compile(r"[#\s*-]*(\d{4}-\d{2}-\d{2})\s*:?\s*")
_LEADING_DATE = re.compile(r"^(\d{4}-\d{2}-\d{2})\s*[:—–-]\s*")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
# Words dropped from a verb phrase: auxiliaries, adverbs, articles, possessives.
_FILLER = frozenset(
    """is are was were be been being has have had will would shall now currently also still
    officially formally just recently finally already then today the a an its their his her our
    well too""".split()  # noqa: SIM905 -- a word list
)
_VERBISH = frozenset(
    """due led left leads lead uses use owns own runs run joined joins moved moves became becomes
    took takes wrote written rewritten ported migrated switched transferred promoted replaced
    renamed manages managed reports works lives located hosted deployed based stores maintains
    maintained heads headed member part head chair owner manager maintainer director vp
    president chief hired stored kept""".split()  # noqa: SIM905 -- a word list
)
_STATUS_VALUE = re.compile(r"[a-z][a-z -]{1,40}")
_ENDING_CUES = ("left", "no longer", "stepped down", "retired")
_GENERIC_PLACES = {"company": "employer", "team": "membership", "project": "lead"}


@dataclass
class _Token:
    text: str
    kind: str  # date | word | num | punct


@dataclass
class _Mention:
    start: int
    end: int
    name: str
    kind: str = "entity"  # entity | date | value | common | self | we | pronoun


@dataclass
class _Analysis:
    entities: dict[str, tuple[str, str, str]] = field(
        default_factory=dict
    )  # key -> name, type, summary
    facts: list[dict[str, Any]] = field(default_factory=list)
    unread: int = 0  # sentences that gave no fact


def _tokens(sentence: str) -> list[_Token]:
    out = []
    for m in _TOKENS.finditer(sentence):
        kind = m.lastgroup or "punct"
        out.append(_Token(m.group(0), kind))
    return out


def _iso(date_text: str) -> str | None:
    return find_date(date_text)


def _cap(token: _Token) -> bool:
    return token.kind == "word" and _is_cap(token.text)


def _names_subject(tokens: Sequence[_Token], j: int) -> bool:
    """Whether a capitalised opener is a subject: a finite verb follows it ("Hermes is written
    in Ruby"), where an adverb or an interjection is followed by anything else."""
    if j >= len(tokens) or tokens[0].text.casefold() in IMPERATIVE_VERBS | INTERJECTIONS:
        return False
    nxt = tokens[j].text.casefold()
    return nxt in ("is", "was", "has", "had", "uses", "runs", "leads", "owns") or (
        nxt in VERBS and nxt.endswith(("ed", "s")) and not tokens[0].text.endswith("ly")
    )


def _spans(tokens: Sequence[_Token], known: set[str]) -> list[_Mention]:
    """Capitalised phrases, code names and dates, in order (char-free: token indexes)."""
    out: list[_Mention] = []
    # The sentence's first word, after any opening quote or bracket.
    first_word = next((k for k, t in enumerate(tokens) if t.kind != "punct"), 0)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.kind == "date":
            out.append(_Mention(i, i + 1, tok.text, "date"))
            i += 1
            continue
        if tok.kind == "word" and _CODE_NAME.fullmatch(tok.text.rstrip(".,")):
            out.append(_Mention(i, i + 1, tok.text.rstrip(".,")))
            i += 1
            continue
        if not _cap(tok):
            i += 1
            continue
        j = i + 1
        possessive = tok.text.endswith(("'s", "’s"))  # "Robert's 1985 essay" names Robert
        while j < len(tokens) and not possessive:
            nxt = tokens[j]
            pronoun_i = nxt.text == "I" and j + 1 < len(tokens) and tokens[j + 1].text[:1].islower()
            if _cap(nxt) or nxt.kind == "num" or (_ROMAN.fullmatch(nxt.text) and not pronoun_i):
                j += 1
            elif (
                nxt.text.casefold() in _CONNECTORS
                and j + 1 < len(tokens)
                and _cap(tokens[j + 1])
                and tokens[j + 1].text.casefold() not in _CONNECTORS
            ):
                j += 2
            else:
                break
            last = tokens[j - 1].text
            if last.endswith(("'s", "’s", ",")) or (
                last.endswith(".") and not re.fullmatch(r"(?:[A-Z]\.)+", last)
            ):
                break
        start = i
        if i == first_word and j - i >= 2 and tokens[i].text.casefold() in IMPERATIVE_VERBS:
            start = i + 1  # "Pin Werkzeug": a verb opening a title or a bullet is no name
        words = [_clean(t.text) for t in tokens[start:j]]
        phrase = " ".join(w for w in words if w)
        opener = (
            i == first_word
            and j == i + 1
            and not phrase.isupper()
            and phrase.casefold() not in known
            and not _names_subject(tokens, j)
        )
        verbish = j - start == 1 and (
            phrase.casefold() in IMPERATIVE_VERBS
            or (start == first_word and phrase.endswith("ing"))
        )
        if phrase and not phrase.isdigit() and not opener and not verbish and not is_noise(phrase):
            out.append(_Mention(start, j, phrase))
        i = j
    return out


def _words(tokens: Sequence[_Token]) -> list[str]:
    return [t.text.casefold().rstrip(".,;") for t in tokens if t.kind == "word"]


def _relation(words: Sequence[str]) -> str | None:
    """The verb phrase as a relation type, or None when it does not read as one."""
    kept = [w for w in words if w not in _FILLER]
    # "launch moved to", "deadline is due on": an attribute noun before the verb is dropped.
    # Only when a verb follows: "went up to space on" has no attribute noun to drop.
    while (
        len(kept) > 1
        and kept[0] not in _VERBISH
        and not kept[0].endswith(("ed", "s"))
        and any(w in _VERBISH or w.endswith(("ed", "s")) for w in kept[1:])
    ):
        kept = kept[1:]
    # "became head of", "took over as lead of": the role is the relation.
    if len(kept) > 1 and kept[0] in ("became", "becomes", "remains", "remained"):
        kept = kept[1:]
    if len(kept) > 3 and kept[:3] == ["took", "over", "as"]:
        kept = kept[3:]
    if not kept or len(kept) > 4 or not all(_RELATION_WORD.fullmatch(w) for w in kept):
        return None
    if kept[-1] in ("and", "or", "with", "but") or kept[0] in ("and", "or", "but"):
        return None
    if any(w in PRONOUNS for w in kept):
        return None
    return "_".join(w.replace("'", "").replace("-", "_") for w in kept).upper()


def _value(words: Sequence[str]) -> str | None:
    """A short lowercase status value after a copula or an ending verb."""
    text = " ".join(w for w in words if w not in ("now", "currently", "officially", "also"))
    return text if _STATUS_VALUE.fullmatch(text) and len(text.split()) <= 4 else None


_TEAMISH = re.compile(r"\b(?:team|squad|guild|crew|group|department|org|organi[sz]ation)\b", re.I)
_PERSONISH = re.compile(r"[A-Z][a-z'’-]+(?: [A-Z][a-z'’-]+){1,3}")
_ORGISH = re.compile(
    r"\b(?:team|project|service|inc|corp|corporation|company|ltd|llc|group|labs?|office|board|"
    r"committee|guild|university|agency|center|centre|station|program|programme|mission|"
    r"industries|enterprises|systems|cloud|pages|api)\b",
    re.I,
)
_ACTIVE = {
    "LED_BY": "LEADS",
    "HEADED_BY": "HEADS",
    "OWNED_BY": "OWNS",
    "MAINTAINED_BY": "MAINTAINS",
    "MANAGED_BY": "MANAGES",
    "RUN_BY": "RUNS",
    "CHAIRED_BY": "CHAIRS",
}
_MEMBERSHIP = frozenset({"ON", "IN", "PUT_ON", "PLACED_ON", "PUT_IN", "ASSIGNED_TO", "ADDED_TO"})
_STORED = frozenset({"STORED_IN", "KEPT_IN", "KEEPS_IN", "STORE_IN", "KEEP_IN"})
_LEAD_PREPS = frozenset(
    """in on at after before since during following as by until when once from for with
    without like unlike despite regarding besides""".split()  # noqa: SIM905 -- a word list
)
_FIRST_PERSON = frozenset({"i", "me", "i'm", "i've", "i'd", "i'll", "i’m", "i’ve"})
_SUBJECT_PRONOUNS = frozenset(
    {"i", "i'm", "i've", "i'd", "i'll", "i’m", "i’ve", "he", "she", "it", "they"}
)
_EXPLETIVE = frozenset(
    """seems seemed looks looked appears appeared might may can could would will should must
    makes sounds feels depends helps""".split()  # noqa: SIM905 -- a word list
)


def _expletive(tokens: Sequence[_Token], k: int) -> bool:
    """Whether "it" at `k - 1` is expletive: "it seems", "it is common to" — not "it was
    launched", where a participle follows the copula."""
    word = tokens[k].text.casefold()
    if word in _EXPLETIVE:
        return True
    if word not in ("is", "was", "'s"):
        return False
    nxt = tokens[k + 1].text.casefold() if k + 1 < len(tokens) else ""
    return not (nxt.endswith(("ed", "en")) or nxt in VERBS)


_POSSESSIVE = frozenset({"my", "your", "our", "their"})
_OPENING = frozenset(
    "then so and but now also still actually really just however well yes no okay ok".split()  # noqa: SIM905 -- a word list
)
_HE_SHE = frozenset({"he", "she", "him", "her"})
_IT = frozenset({"it", "its"})
_THEY = frozenset({"they", "them"})
_ROLE_VERBS = frozenset(
    """promoted hired appointed named elected works worked serves served joined joins became
    becomes""".split()  # noqa: SIM905 -- a word list
)
_LEAVING = {"left": "LEFT", "quit": "LEFT", "resigned": "RESIGNED_FROM", "stepped": "STEPPED_DOWN"}
_EVENT = re.compile(r"[A-Z]+(?:ED|EN|UNG|ANG|OOK|OT|LT)_(?:ON|IN|AT)")
_ORPHAN = re.compile(r"\b(?:since|from|until|by|as of|after|before|on|in|of)\s*$", re.I)
_LABEL = re.compile(r"^[*_]*[A-Z][\w'’ -]{0,40}?[*_]*:\s+(?=\S)")
_SPEAKER = re.compile(r"^([A-Za-z][\w .'-]{0,30}?)\s*:\s+(\S.*)$")
_CODE_CHARS = re.compile(r"[{}()\[\];=<>_`|\\/*]")


def _code_chars(line: str) -> int:
    """How many of `_CODE_CHARS` the line holds, counted window by window (see `sentences`)."""
    return sum(
        len(_CODE_CHARS.findall(line, i, i + _SPLIT_WINDOW))
        for i in range(0, len(line), _SPLIT_WINDOW)
    )


def _person(name: str) -> bool:
    return bool(_PERSONISH.fullmatch(name)) and not _ORGISH.search(name)


def _common(tokens: Sequence[_Token], taken: set[int], role: bool = False) -> list[_Mention]:
    """Common-noun phrases after a determiner ("the search team", "a staff engineer"), without
    the determiner; words that are verbs, prepositions or adverbs end the phrase."""
    out: list[_Mention] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if i in taken or tok.kind != "word" or tok.text.casefold() not in DETERMINERS:
            i += 1
            continue
        j = i + 1
        words: list[str] = []
        while j < len(tokens) and len(words) < 4:
            nxt = tokens[j]
            w = nxt.text.casefold()
            if j in taken or nxt.kind != "word" or not nxt.text[:1].islower():
                break
            w = w.rstrip(".,;:")
            modifier = (
                w in _PLURAL_MODIFIERS
                and j + 1 < len(tokens)
                and tokens[j + 1].kind == "word"
                and tokens[j + 1].text[:1].islower()
                and tokens[j + 1].text.casefold().rstrip(".,;:")
                not in NP_STOP | DETERMINERS | VERBS | PRONOUNS
            )
            if not modifier and (
                w in NP_STOP
                or w in DETERMINERS
                or w in VERBS
                or w in PRONOUNS
                or w.endswith("ly")
                or not re.fullmatch(r"[a-z][a-z0-9-]*", w)
            ):
                break
            if w.endswith("ed") and words:
                break
            words.append(w)
            j += 1
            if nxt.text.endswith((",", ".", ";", ":")):
                break
        # "head of infrastructure", "VP of engineering": one "of" + a noun stays in the phrase.
        if (
            words
            and j + 1 < len(tokens)
            and tokens[j].text.casefold() == "of"
            and tokens[j + 1].kind == "word"
            and tokens[j + 1].text[:1].islower()
            and tokens[j + 1].text.casefold().rstrip(".,") not in NP_STOP | DETERMINERS | VERBS
            and words[-1] in _ROLE_HEADS
        ):
            words += ["of", tokens[j + 1].text.casefold().rstrip(".,;")]
            j += 2
        while words and words[0] in _ADJECTIVES:
            words.pop(0)
        if words and not all(w in GENERIC_NOUNS for w in words) and not is_noise(" ".join(words)):
            out.append(_Mention(i, j, " ".join(words), "common"))
            i = j
            continue
        i = max(j, i + 1)
    return out


# Plurals that are verbs too, kept as modifiers before a noun ("the reports service").
_PLURAL_MODIFIERS = frozenset(
    "reports payments sales tracks ships hosts releases fixes updates supports".split()  # noqa: SIM905 -- a word list
)
_ADJECTIVES = frozenset(
    """new old current same other whole entire first last next previous former great good nice
    best better simple basic quick solid excellent awesome perfect right wrong big small huge cool
    little specific certain main various different several few more most""".split()  # noqa: SIM905 -- a word list
)
_ROLE_HEADS = frozenset(
    """head vp director chair lead manager owner president member vice chief""".split()  # noqa: SIM905 -- a word list
)


def _role(tokens: Sequence[_Token], start: int) -> _Mention | None:
    """A role right after "to"/"as" with no determiner: "promoted to principal engineer"."""
    if start >= len(tokens) or tokens[start].text.casefold() in DETERMINERS:
        return None
    words: list[str] = []
    j = start
    while j < len(tokens) and len(words) < 4:
        tok = tokens[j]
        w = tok.text.casefold().rstrip(".,;:")
        if tok.kind != "word" or w in NP_STOP or w in PRONOUNS or w.endswith("ly"):
            break
        words.append(w if tok.text[:1].islower() else _clean(tok.text))
        j += 1
        if tok.text.endswith((",", ".", ";", ":")):
            break
    if (
        j + 1 < len(tokens)
        and tokens[j].text.casefold() == "of"
        and words
        and tokens[j + 1].kind == "word"
        and tokens[j + 1].text.casefold() not in DETERMINERS
    ):
        words += ["of", _clean(tokens[j + 1].text)]
        j += 2
    if not words or all(w in GENERIC_NOUNS for w in words):
        return None
    return _Mention(start, j, " ".join(words), "common")


def _mentions(tokens: Sequence[_Token], known: set[str]) -> list[_Mention]:
    """Names, dates, common-noun phrases and pronouns, in order."""
    named = _spans(tokens, known)
    taken = {k for m in named for k in range(m.start, m.end)}
    commons = _common(tokens, taken)
    taken |= {k for m in commons for k in range(m.start, m.end)}
    # A determiner just before a name belongs to it ("the Atlas project" is Atlas).
    out = [*named, *commons]
    for i, tok in enumerate(tokens):
        if i in taken or tok.kind != "word":
            continue
        w = tok.text.casefold().replace("’", "'")
        if w in _FIRST_PERSON or w == "my":
            out.append(_Mention(i, i + 1, w, "self"))
        elif w in ("we", "our"):
            out.append(_Mention(i, i + 1, w, "we"))
        elif w in _HE_SHE or w in _IT or w in _THEY:
            out.append(_Mention(i, i + 1, w, "pronoun"))
    return sorted(out, key=lambda m: m.start)


class _Reader:
    """One pass over a text: sentences, their dates and speakers, entities and facts."""

    def __init__(self, text: str, names: Sequence[str] = (), message: bool = False) -> None:
        self.lines = self._sentences(text, message)
        self.known = {n.casefold() for n in names}
        # Names written capitalised in mid-sentence anywhere count as entities at an opening too.
        for _, _, sentence in self.lines:
            for m in _spans(_tokens(sentence), set()):
                self.known.add(m.name.casefold())

    @staticmethod
    def _sentences(text: str, message: bool) -> list[tuple[str | None, str | None, str]]:
        out: list[tuple[str | None, str | None, str]] = []
        current: str | None = None
        speaker: str | None = None
        speakers: set[str] = set()
        fenced = False
        for raw in text.splitlines():
            line = raw.strip()
            if line.startswith(("```", "~~~")):
                fenced = not fenced
                continue
            if not line or fenced:
                continue
            m = _SPEAKER.match(line)
            if (
                message
                and m is not None
                and len(m.group(1).split()) <= 3
                and (not speakers or m.group(1).strip() in speakers)
            ):
                # A turn's speaker: on its first line, or a speaker seen before (a label
                # such as "Situation:" inside a turn is no speaker).
                speaker, line = m.group(1).strip(), m.group(2)
                speakers.add(speaker)
            if m := _HEADING_DATE.fullmatch(line):
                current = _iso(m.group(1))
                continue
            if line.startswith(("#", "|", ">")) or _HEADER.match(line) or line.endswith(":"):
                continue
            line = _BULLET.sub("", line).replace("**", "").replace("__", "")
            if _code_chars(line) * 8 > len(line):
                continue  # code, a table or a path, not prose
            if (m := _LABEL.match(line)) is not None:
                line = line[m.end() :]  # "Legacy: Euclid's Elements remained ...": a label
            when = current
            if m := _LEADING_DATE.match(line):
                when = _iso(m.group(1))
                line = line[m.end() :]
            for sentence in sentences(line):
                if len(sentence.split()) >= 3:
                    out.append((when, speaker, sentence))
        return out


def _parse_iso(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass
class _Context:
    """What one episode's sentences share: antecedents for pronouns, the reference time."""

    reference: datetime | None
    existing: Sequence[Any]
    ontology: Ontology | None = None
    person: str | None = None
    thing: str | None = None
    last: str | None = None
    earlier: list[dict[str, Any]] = field(default_factory=list)  # the facts read so far

    def remember(self, *mentions: _Mention) -> None:
        for m in mentions:
            if m.kind not in ("entity", "common"):
                continue
            if m.kind == "entity" and _person(m.name):
                self.person = m.name
            else:
                self.thing = m.name
            self.last = m.name


def _analyse(
    text: str,
    names: Sequence[str] = (),
    existing: Sequence[Any] = (),
    *,
    reference_time: datetime | None = None,
    source_type: str = "text",
    ontology: Ontology | None = None,
) -> _Analysis:
    reader = _Reader(text, names, message=source_type == "message")
    out = _Analysis()
    ctx = _Context(reference_time, existing, ontology, earlier=out.facts)

    def entity(name: str, kind: str, sentence: str) -> None:
        key = name.casefold()
        if kind in ("entity", "common") and is_noise(name):
            return
        if key not in out.entities and len(out.entities) < _MAX_ENTITIES:
            label = {"date": "Date", "value": "Status"}.get(kind, "Entity")
            if kind == "entity" and name.islower():
                kind = "common"
            if kind == "common" and ontology is not None and ontology.present:
                label = ontology.canonical_entity_type(name.split()[-1]) or label
            out.entities[key] = (name, label, sentence[:_SUMMARY_CHARS])

    seen: set[tuple[str, str, str]] = set()
    for when, speaker, sentence in reader.lines:
        anchor = _parse_iso(when) if when else reference_time
        relative = resolve_relative(sentence, anchor) if anchor is not None else None
        parsed = sentence
        if relative is not None:
            before = _ORPHAN.sub("", sentence[: relative.start])
            parsed = before + sentence[relative.end :]
        tokens = _tokens(parsed)
        mentions = _mentions(tokens, reader.known)
        for m in mentions:
            if m.kind == "entity":
                entity(m.name, m.kind, sentence)
        if len(out.facts) >= _MAX_FACTS:
            continue
        if "?" in sentence[-16:] or "`" in sentence:
            out.unread += 1  # a question asserts nothing; inline code is not prose
            continue
        rel_when = relative.date.strftime("%Y-%m-%dT00:00:00Z") if relative else None
        fact = _sentence_fact(sentence, tokens, mentions, rel_when or when, ctx, speaker)
        if fact is None:
            out.unread += 1
            continue
        _end_earlier(out.facts, fact, ontology)
        key = (fact["source"].casefold(), fact["predicate"], fact["target"].casefold())
        if key in seen:
            continue
        seen.add(key)
        entity(fact["source"], fact.pop("_source_kind", "entity"), sentence)
        kind = fact.pop("_kind", "entity")
        entity(fact["target"], kind, sentence)
        if ontology is not None and ontology.present:
            mapped = ontology_relation(ontology, fact["predicate"])
            if mapped is not None:
                fact["relation_type"] = mapped
        out.facts.append(fact)
    return out


def _end_earlier(
    facts: Sequence[dict[str, Any]], fact: dict[str, Any], ontology: Ontology | None
) -> None:
    """Change cues and single-valued families among the facts of one text (a dated changelog
    read as one episode): an earlier fact `fact` ends gets `invalid_at` = its `valid_at`.

    The families are applied as the pipeline applies them among an episode's facts (never for
    a type the ontology declares, nor for an additive sentence); here first, because a fact a
    cue has already ended retires nothing there."""
    ends = fact.pop("_ends", None)
    by_family = fact.pop("_ends_family", None)
    if fact["valid_at"] is None:
        return
    declared = ontology is not None and ontology.canonical_relation_type(fact["predicate"])
    family = (
        None
        if declared or is_additive(fact["fact"])
        else family_of(fact["predicate"], fact["target"])
    )
    for old in facts:
        if old["invalid_at"] is not None or old["valid_at"] is None:
            continue
        if not old["valid_at"] < fact["valid_at"]:
            continue
        pair = (old["source"].casefold(), old["target"].casefold())
        hit = ends is not None and pair == (ends[0].casefold(), ends[1].casefold())
        if not hit and family is not None and family_of(old["predicate"], old["target"]) == family:
            held = "source" if family.side == "source" else "target"
            other = "target" if held == "source" else "source"
            hit = (
                old[held].casefold() == fact[held].casefold()
                and old[other].casefold() != fact[other].casefold()
            )
        if not hit and by_family is not None:
            found = family_of(old["predicate"], old["target"])
            hit = pair[0] == by_family[0].casefold() and (
                found is not None and found.name == by_family[1]
            )
        if hit:
            old["invalid_at"] = fact["valid_at"]


def ontology_relation(ontology: Ontology, relation: str) -> str | None:
    """The declared relation type `relation` stands for: by name or alias (any case or
    separator), or by the same words once stemmed ("JOINED" for a type aliased "join",
    "WROTE_IN" for "written in"); None when none fits."""
    declared = ontology.canonical_relation_type(relation)
    if declared is not None:
        return declared
    words = relation_words(relation)
    if not words:
        return None
    for r in ontology.relation_types:
        if any(relation_words(n) == words for n in (r.name, *r.aliases)):
            return r.name
    return None


def _flag(
    existing: Sequence[Any], source: str, target: str | None, family: str | None
) -> list[int]:
    """Indexes of existing facts a cue ends: from `source` to `target`, or of `family`."""
    out = []
    for i, e in enumerate(existing):
        if e.source.casefold() != source.casefold():
            continue
        if target is not None and e.target.casefold() == target.casefold():
            out.append(i)
        elif family is not None:
            found = family_of(e.predicate, e.target)
            if found is not None and found.name == family:
                out.append(i)
    return out


def _subject(
    tokens: Sequence[_Token], mentions: Sequence[_Mention], ctx: _Context, speaker: str | None
) -> tuple[_Mention, str] | None:
    """The clause's subject mention and the name it stands for, after a leading adverbial
    ("In March", "After the reorg,"); None when it cannot be named."""
    skip = 0
    while skip < len(tokens) and (
        tokens[skip].kind == "punct" or tokens[skip].text.casefold() in ("and", "but", "so", "then")
    ):
        skip += 1
    if skip < len(tokens) and tokens[skip].text.casefold() in _LEAD_PREPS:
        lead = skip
        comma = next((k for k, t in enumerate(tokens[:10]) if t.text == "," and k > lead), None)
        if comma is not None:
            skip = comma + 1
        else:
            first = next((m for m in mentions if m.start > lead), None)
            skip = first.end if first is not None and first.start <= lead + 2 else lead + 1
    if skip == 0 and tokens and tokens[0].text.casefold() in IMPERATIVE_VERBS:
        # "Pin Werkzeug to 2.0", "Set the flag": an imperative has no subject in the sentence.
        nxt = tokens[1].text.casefold() if len(tokens) > 1 else ""
        if nxt not in ("is", "was", "are", "has"):
            return None
    candidates = [m for m in mentions if m.start >= skip and m.kind != "date"]
    if not candidates:
        return None
    subject = candidates[0]
    if (
        len(candidates) > 1
        and subject.end < len(tokens)
        and tokens[subject.end].text == ","
        and candidates[1].start == subject.end + 1
        and candidates[1].kind == "self"
    ):
        subject = candidates[1]  # "Joshua, I really appreciate ...": a vocative, then "I"
    if subject.name == "it" and subject.end < len(tokens) and _expletive(tokens, subject.end):
        return None  # "it is common to ...", "it seems": no thing is talked about
    # The subject opens the clause ("The new billing service", "Then I"): a mention further in
    # is an object, and a sentence whose subject is not named ("You can ...") gives no fact.
    if any(
        t.kind == "word"
        and t.text.casefold() not in _OPENING
        and not t.text.endswith("ly")
        and "-" not in t.text  # "then-Major Glenn", "ex-CEO Ana"
        and not t.text[:1].isupper()
        for t in tokens[skip : _start(tokens, subject)]
    ):
        return None
    if subject.kind in ("self", "pronoun") and (
        subject.name not in _SUBJECT_PRONOUNS
        or any(
            t.kind == "word" and t.text.casefold() not in _OPENING
            for t in tokens[skip : subject.start]
        )
    ):
        return None  # "Decreasing it will ...": a pronoun after a verb is its object
    if subject.kind == "common" and tokens[subject.start].text.casefold() in _POSSESSIVE:
        return None  # "My goal is ...": the speaker's goal is no entity of its own
    if subject.kind == "self":
        return (subject, speaker) if speaker and subject.name != "my" else None
    if subject.kind == "pronoun":
        w = subject.name
        name = ctx.person if w in _HE_SHE else ctx.thing if w in _IT else ctx.last
        return (subject, name) if name else None
    if subject.kind == "we":
        return (subject, "") if subject.name == "we" else None
    if subject.kind == "value":
        return None
    return subject, subject.name


def _sentence_fact(
    sentence: str,
    tokens: Sequence[_Token],
    mentions: Sequence[_Mention],
    when: str | None,
    ctx: _Context,
    speaker: str | None = None,
) -> dict[str, Any] | None:
    found = _subject(tokens, mentions, ctx, speaker)
    if found is None:
        return None
    subject, source = found
    existing = ctx.existing
    ends: tuple[str, str] | None
    lower = sentence.casefold()
    additive = bool(re.search(r"\b(?:also|as well|in addition|additionally)\b", lower))
    after = [m for m in mentions if m.start >= subject.end and m.kind not in ("self", "we")]
    after = [m for m in after if m.kind != "pronoun"]
    # "is a member of the Infra Team", "is the head of finance": the role noun is the relation.
    if (
        len(after) > 1
        and after[0].kind == "common"
        and after[0].name in _ROLE_HEADS | {"part", "maintainer", "owner", "member"}
        and after[0].end < len(tokens)
        and tokens[after[0].end].text.casefold() == "of"
    ):
        after = after[1:]
    if subject.kind == "we":
        return _we_fact(sentence, tokens, subject, after, when, existing, additive)
    ctx.remember(subject)
    ended: str | None = None
    relation: str | None = None
    target: _Mention | None = None
    verb = _words(tokens[subject.end : after[0].start]) if after else _words(tokens[subject.end :])
    verb_head = next((w for w in verb if w not in _FILLER), "")
    # "promoted to principal engineer", "works as a staff engineer": a role with no determiner.
    role_at = next(
        (
            k
            for k in range(subject.end, min(len(tokens), subject.end + 6))
            if tokens[k].text.casefold() in ("to", "as")
            and k > subject.end
            and tokens[k - 1].text.casefold() in _ROLE_VERBS | {"promoted", "works"}
        ),
        None,
    )
    if role_at is not None and (not after or after[0].start > role_at + 1):
        role = _role(tokens, role_at + 1)
        if role is not None and not any(m.start == role.start for m in after):
            after = sorted([*after, role], key=lambda m: m.start)
            verb = _words(tokens[subject.end : after[0].start])
            verb_head = next((w for w in verb if w not in _FILLER), "")
    # "from X to Y": Y is the object, X's fact ends.
    words_after = [t.text.casefold() for t in tokens[subject.end :]]
    if "from" in words_after and "to" in words_after:
        src = next((m for m in after if _before(tokens, m) == "from"), None)
        dst = next((m for m in after if _before(tokens, m) == "to"), None)
        if src is not None and dst is not None and dst.start > src.start:
            relation = _relation([*_words(tokens[subject.end : _start(tokens, src) - 1]), "to"])
            if relation is not None:  # else no change is read: the plain reading below
                target, ended = dst, src.name
    # "replaced X as <role> of Z": Z is the object of <ROLE>_OF, X's fact about Z ends.
    if target is None and after and verb and verb[-1] in ("replaced", "replaces", "succeeded"):
        if len(after) < 2:
            return None
        old, obj = after[0], after[1]
        between = _words(tokens[old.end : obj.start])
        if between and between[0] == "as":
            relation = _relation(between[1:])
            if relation is None:
                return None
            flagged = _flag(existing, old.name, obj.name, None)
            ends = (old.name, obj.name)
            return _fact(source, relation, obj, sentence, when, flagged, old.name, ends)
        if between == ["with"]:
            # "replaced Memcached with Redis": the new value takes the old one's relation.
            flagged = _flag(existing, source, old.name, None)
            earlier = [
                f["predicate"]
                for f in ctx.earlier
                if (f["source"].casefold(), f["target"].casefold())
                == (source.casefold(), old.name.casefold())
            ]
            if flagged:
                relation = str(existing[flagged[0]].predicate)
            elif earlier:
                relation = earlier[-1]
            else:
                return None
            ends = (source, old.name)
            return _fact(source, relation, obj, sentence, when, flagged, old.name, ends)
        return None
    if target is None and after and verb_head in _LEAVING:
        # "left Umbrella", "stepped down as chair of the board": the facts about it end.
        target = after[0]
        relation = "STEPPED_DOWN_FROM" if verb_head == "stepped" else _LEAVING[verb_head]
        flagged = _flag(existing, source, target.name, None)
        ends = (source, target.name)
        return _fact(source, relation, target, sentence, when, flagged, None, ends)
    if target is None and len(after) >= 2 and verb[:2] == ["took", "over"]:
        # "took over the research lab from Luca Moretti": the new lead; the old one's ends.
        obj, old = after[0], after[1]
        if _before(tokens, old) != "from":
            return None
        flagged = _flag(existing, old.name, obj.name, None)
        ends = (old.name, obj.name)
        return _fact(source, "LEADS", obj, sentence, when, flagged, old.name, ends)
    if target is None and after:
        target = after[0]
        relation = _relation(_words(tokens[subject.end : _start(tokens, target)]))
        if relation is None:
            return None
        relation = _normalise(relation, target.name)
        if _bare(relation):
            return None
        active = _ACTIVE.get(relation)
        if active is not None and target.kind in ("entity", "common"):
            # "The Borealis project is now led by Dana Kim": said the active way, so that it
            # and "Dana Kim leads the Borealis project" are one relation with one lead.
            ctx.remember(target)
            fact = _fact(target.name, active, subject, sentence, when)
            fact["_source_kind"] = subject.kind
            return fact
    if target is None:
        return _status_fact(source, tokens[subject.end :], sentence, when, existing, lower)
    assert relation is not None and target is not None
    ctx.remember(target)
    flagged = [] if additive or ended is None else _flag(existing, source, ended, None)
    ends = None if additive or ended is None else (source, ended)
    if "no longer" in lower:
        # "is no longer a member of X" holds no membership: what it says is that it ended.
        relation = "LEFT"
        flagged = _flag(existing, source, target.name, None)
        ends = (source, target.name)
    return _fact(source, relation, target, sentence, when, flagged, ended, ends)


def _start(tokens: Sequence[_Token], m: _Mention) -> int:
    """Where a mention starts, its determiner included ("the Mobile Team")."""
    k = m.start
    if k > 0 and tokens[k - 1].text.casefold() in DETERMINERS:
        k -= 1
    return k


def _before(tokens: Sequence[_Token], m: _Mention) -> str:
    """The word before a mention and its determiner ("from" in "from the Mobile Team")."""
    k = _start(tokens, m)
    return tokens[k - 1].text.casefold() if k > 0 else ""


def _bare(relation: str) -> bool:
    """Whether a relation type is a bare preposition ("AROUND", "TO"): it names no relation."""
    words = relation.casefold().split("_")
    return all(w in NP_STOP or w in ("who", "which", "whom") for w in words)


def _normalise(relation: str, target: str) -> str:
    """Verb phrases that say one thing many ways, said one way: "is on the Billing Team" and
    "put on the infra team" are MEMBER_OF; "stored in", "kept in" are STORED_IN."""
    if (relation in _MEMBERSHIP or relation == "PART_OF") and _TEAMISH.search(target):
        return "MEMBER_OF"
    if relation in _STORED:
        return "STORED_IN"
    return relation


def _we_fact(
    sentence: str,
    tokens: Sequence[_Token],
    we: _Mention,
    after: Sequence[_Mention],
    when: str | None,
    existing: Sequence[Any],
    additive: bool,
) -> dict[str, Any] | None:
    """ "We moved the ledger repository under the payments organization": a fact about the
    object, read as its passive ("the ledger repository moved under ...")."""
    k = we.end
    while k < len(tokens) and tokens[k].text.casefold() in _FILLER:
        k += 1
    if k >= len(tokens) or tokens[k].kind != "word" or not after:
        return None
    verb = tokens[k].text.casefold()
    if (
        verb in ("replaced", "replace", "need", "want", "like", "love", "think", "know")
        or verb in NP_STOP
        or verb in GENERIC_NOUNS
        or not re.fullmatch(r"[a-z][a-z-]+", verb)
    ):
        return None
    obj = after[0]
    if obj.start > k + 2 or obj.kind not in ("entity", "common"):
        return None
    rest = [m for m in after[1:] if m.kind in ("entity", "common", "date")]
    participle = PARTICIPLES.get(verb, verb)
    words_after = [t.text.casefold() for t in tokens[obj.end :]]
    ended: str | None = None
    target: _Mention | None = None
    if "from" in words_after and "to" in words_after:
        src = next((m for m in rest if _before(tokens, m) == "from"), None)
        dst = next((m for m in rest if _before(tokens, m) == "to"), None)
        if src is not None and dst is not None and dst.start > src.start:
            target, ended, particles = dst, src.name, ["to"]
    if target is None:
        particle_at = obj.end
        if particle_at < len(tokens) and tokens[particle_at].text.casefold() in ("to", "as"):
            role = _role(tokens, particle_at + 1)
            if role is not None and not any(m.start == role.start for m in rest):
                rest = sorted([*rest, role], key=lambda m: m.start)
        if not rest:
            return None
        target = rest[0]
        particles = _words(tokens[obj.end : target.start])
        if not particles or len(particles) > 2:
            return None
    relation = _relation([participle, *particles])
    if relation is None:
        return None
    relation = _normalise(relation, target.name)
    if _bare(relation):
        return None
    flagged = [] if additive or ended is None else _flag(existing, obj.name, ended, None)
    ends = None if additive or ended is None else (obj.name, ended)
    return _fact(obj.name, relation, target, sentence, when, flagged, ended, ends)


_STATUS_WORDS = frozenset(
    """deprecated archived retired active inactive stable experimental live dead cancelled
    canceled paused shut down discontinued obsolete unmaintained frozen beta alpha released
    deployed launched complete completed done on hold in production generally available ga
    open closed abandoned sunset sunsetted""".split()  # noqa: SIM905 -- a word list
)


def _status_fact(
    source: str,
    rest_tokens: Sequence[_Token],
    sentence: str,
    when: str | None,
    existing: Sequence[Any],
    lower: str,
) -> dict[str, Any] | None:
    """One entity: a status value after the verb ("is now deprecated", "left the company")."""
    rest = _words(rest_tokens)
    cue = next((c for c in _ENDING_CUES if lower.find(c) > 0), None)
    if cue is not None:
        value = _value(rest)
        if value is None:
            return None
        place = next((p for p in _GENERIC_PLACES if value.endswith(p)), None)
        family = _GENERIC_PLACES[place] if place else None
        flagged = _flag(existing, source, None, family) if family else []
        value_mention = _Mention(0, 0, value, "value")
        out = _fact(source, "STATUS", value_mention, sentence, when, flagged)
        out["_ends_family"] = (source, family) if family else None
        out["_kind"] = "value"
        return out
    if rest and rest[0] in ("is", "was", "became", "becomes", "are"):
        value = _value(rest[1:])
        if value is None or not all(w in _STATUS_WORDS for w in value.split()):
            return None
        out = _fact(source, "STATUS", _Mention(0, 0, value, "value"), sentence, when)
        out["_kind"] = "value"
        return out
    return None


def _fact(
    source: str,
    relation: str,
    target: _Mention,
    sentence: str,
    when: str | None,
    flagged: Sequence[int] = (),
    ended: str | None = None,
    ends: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The fact's answer item; `ends`: the (source, target) whose earlier fact in the same
    text this one ends (a change cue)."""
    own = (
        find_date(sentence.replace(target.name, ""))
        if target.kind == "date"
        else find_date(sentence)
    )
    if ended is not None:
        own = find_date(sentence.replace(target.name, "").replace(ended, "")) or own
    # "Apollo 12 was launched on November 14, 1969": an event is true from its date ("is due
    # on 2025-06-30" is a deadline's value, not when it became one).
    event = target.kind == "date" and bool(_EVENT.fullmatch(relation))
    if own is None and event and family_of(relation, target.name) is None:
        own = find_date(target.name)
    return {
        "source": source,
        "target": target.name,
        "predicate": relation,
        "fact": sentence[:_FACT_CHARS],
        "valid_at": own or when,
        "invalid_at": None,
        "supersedes": list(flagged),
        "_kind": "date" if target.kind == "date" else "entity",
        "_ends": ends,
    }


def _options(reference_time: datetime | None, source_type: str, ontology: Ontology | None) -> Any:
    return {"reference_time": reference_time, "source_type": source_type, "ontology": ontology}


def heuristic_entities(
    text: str,
    *,
    reference_time: datetime | None = None,
    source_type: str = "text",
    ontology: Ontology | None = None,
) -> dict[str, Any]:
    """The entities answer, in the shape of the entities prompt's schema."""
    if (release := changelog_graph(text)) is not None:  # a changelog release: by its structure
        return {"entities": release["entities"]}
    found = _analyse(text, **_options(reference_time, source_type, ontology))
    return {
        "entities": [
            {"name": name, "type": kind, "summary": summary}
            for name, kind, summary in found.entities.values()
        ]
    }


def heuristic_graph(
    text: str,
    existing: Sequence[Any] = (),
    *,
    reference_time: datetime | None = None,
    source_type: str = "text",
    ontology: Ontology | None = None,
) -> dict[str, Any]:
    """Entities and facts in one pass (the single-call shape); `existing`: the facts shown to a
    model (objects with `source`, `predicate`, `target`), which cue flags index into.

    `unread` counts the sentences that gave no fact (reported, never guessed at)."""
    if (release := changelog_graph(text, existing)) is not None:  # by the release's structure
        return release
    found = _analyse(text, (), existing, **_options(reference_time, source_type, ontology))
    return {
        "entities": [
            {"name": name, "type": kind, "summary": summary}
            for name, kind, summary in found.entities.values()
        ],
        "facts": found.facts,
        "unread": found.unread,
    }


def heuristic_facts(
    text: str,
    entity_names: Sequence[str],
    existing: Sequence[Any] = (),
    *,
    reference_time: datetime | None = None,
    source_type: str = "text",
    ontology: Ontology | None = None,
) -> dict[str, Any]:
    """The facts answer: at most one fact per sentence, between the entities of `entity_names`
    (and the dates and status values the sentences give)."""
    if (release := changelog_graph(text, existing)) is not None:  # by the release's structure
        return {"facts": release["facts"]}
    known = {n.casefold() for n in entity_names}
    found = _analyse(
        text, entity_names, existing, **_options(reference_time, source_type, ontology)
    )
    facts = [
        f
        for f in found.facts
        if f["source"].casefold() in known
        and (f["target"].casefold() in known or f["target"].casefold() in found.entities)
    ]
    return {"facts": facts[:_MAX_FACTS], "unread": found.unread}
