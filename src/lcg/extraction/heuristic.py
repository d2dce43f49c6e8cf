"""The offline heuristic extractor: entities and facts from text with no model at all.

Rules only, and labelled so (`extractor.kind = "heuristic"` in every result and in status).
Entities are capitalised noun phrases ("Kennedy Space Center", "Apollo 11", "NASA"), code-style
names (`atlas-core`) and, as fact targets only, dates and short status values. Headings,
document headers (`Document: …`) and lines of fewer than three words are never read as
sentences; a heading that is a date (`## 2025-03-03`) dates the sentences under it.

Each sentence gives at most one fact: its first entity (the subject) to the next one (the
object), typed by the verb phrase between them with auxiliaries, adverbs and articles dropped
("is now led by" -> `LED_BY`, "was rewritten in" -> `REWRITTEN_IN`, "launch moved to" ->
`MOVED_TO`); `MENTIONED_WITH` only when no verb phrase reads as one. "from X to Y" makes Y the
object; "replaced X as <role> of Z" makes Z the object of `<ROLE>_OF`. A sentence naming one
entity gives a fact about it when a value follows the verb: a status ("is now deprecated",
"left the company" -> `STATUS`). A date in the sentence (or its heading) becomes `valid_at`
unless the date is the fact's object.

Change cues retire facts through the pipeline's rules: the verb phrase itself lands in a
built-in single-valued family (`lcg.ontology.supersession`: "now leads", "moved to the Search Team",
"migrated from MySQL to PostgreSQL", "promoted to", "rewritten in"), and "from X", "replaced
X", "left", "no longer" flag the existing facts they end (reason `cue`). A sentence with
"also"/"as well" never retires anything. It answers in the JSON shapes of the LLM prompts, so
its output goes through the same salvage, resolution and commit path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lcg.extraction.changelog import changelog_graph
from lcg.ontology.supersession import family_of

__all__ = ["HEURISTIC_VERSION", "heuristic_entities", "heuristic_facts", "sentences"]

HEURISTIC_VERSION = "heuristic-2"

_MAX_ENTITIES = 40
_MAX_FACTS = 60
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
    maintained heads headed member part""".split()  # noqa: SIM905 -- a word list
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
    kind: str = "entity"  # entity | date | value


@dataclass
class _Analysis:
    entities: dict[str, tuple[str, str, str]] = field(
        default_factory=dict
    )  # key -> name, type, summary
    facts: list[dict[str, Any]] = field(default_factory=list)


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


def _spans(tokens: Sequence[_Token], known: set[str]) -> list[_Mention]:
    """Capitalised phrases, code names and dates, in order (char-free: token indexes)."""
    out: list[_Mention] = []
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
        while j < len(tokens):
            nxt = tokens[j]
            if _cap(nxt) or nxt.kind == "num" or _ROMAN.fullmatch(nxt.text):
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
        words = [_clean(t.text) for t in tokens[i:j]]
        phrase = " ".join(w for w in words if w)
        opener = i == 0 and j == 1 and not phrase.isupper() and phrase.casefold() not in known
        if phrase and not phrase.isdigit() and not opener:
            out.append(_Mention(i, j, phrase))
        i = j
    return out


def _words(tokens: Sequence[_Token]) -> list[str]:
    return [t.text.casefold().rstrip(".,;") for t in tokens if t.kind == "word"]


def _relation(words: Sequence[str]) -> str | None:
    """The verb phrase as a relation type, or None when it does not read as one."""
    kept = [w for w in words if w not in _FILLER]
    # "launch moved to", "deadline is due on": an attribute noun before the verb is dropped.
    while len(kept) > 1 and kept[0] not in _VERBISH and not kept[0].endswith(("ed", "s")):
        kept = kept[1:]
    if not kept or len(kept) > 4 or not all(_RELATION_WORD.fullmatch(w) for w in kept):
        return None
    if kept[-1] in ("and", "or", "with", "but"):
        return None
    return "_".join(w.replace("'", "").replace("-", "_") for w in kept).upper()


def _value(words: Sequence[str]) -> str | None:
    """A short lowercase status value after a copula or an ending verb."""
    text = " ".join(w for w in words if w not in ("now", "currently", "officially", "also"))
    return text if _STATUS_VALUE.fullmatch(text) and len(text.split()) <= 4 else None


class _Reader:
    """One pass over a text: sentences, their dates, entities and at most one fact each."""

    def __init__(self, text: str, names: Sequence[str] = ()) -> None:
        self.lines = self._sentences(text)
        self.known = {n.casefold() for n in names}
        # Names written capitalised in mid-sentence anywhere count as entities at an opening too.
        for _, sentence in self.lines:
            for m in _spans(_tokens(sentence), set()):
                self.known.add(m.name.casefold())

    @staticmethod
    def _sentences(text: str) -> list[tuple[str | None, str]]:
        out: list[tuple[str | None, str]] = []
        current: str | None = None
        for raw in text.splitlines():
            line = raw.strip()
            if not line:
                continue
            if m := _HEADING_DATE.fullmatch(line):
                current = _iso(m.group(1))
                continue
            if line.startswith("#") or _HEADER.match(line) or line.endswith(":"):
                continue
            line = _BULLET.sub("", line)
            when = current
            if m := _LEADING_DATE.match(line):
                when = _iso(m.group(1))
                line = line[m.end() :]
            for sentence in sentences(line):
                if len(sentence.split()) >= 3:
                    out.append((when, sentence))
        return out


def _analyse(text: str, names: Sequence[str] = (), existing: Sequence[Any] = ()) -> _Analysis:
    reader = _Reader(text, names)
    out = _Analysis()

    def entity(name: str, kind: str, sentence: str) -> None:
        key = name.casefold()
        if key not in out.entities and len(out.entities) < _MAX_ENTITIES:
            label = {"date": "Date", "value": "Status"}.get(kind, "Entity")
            out.entities[key] = (name, label, sentence[:_SUMMARY_CHARS])

    seen: set[tuple[str, str, str]] = set()
    for when, sentence in reader.lines:
        tokens = _tokens(sentence)
        mentions = _spans(tokens, reader.known)
        for m in mentions:
            if m.kind == "entity":
                entity(m.name, m.kind, sentence)
        if len(out.facts) >= _MAX_FACTS:
            continue
        fact = _sentence_fact(sentence, tokens, mentions, when, existing)
        if fact is None:
            continue
        key = (fact["source"].casefold(), fact["predicate"], fact["target"].casefold())
        if key in seen:
            continue
        seen.add(key)
        for m in mentions:
            if m.name == fact["target"] and m.kind == "date":
                entity(m.name, "date", sentence)
        if fact.pop("_value", False):
            entity(fact["target"], "value", sentence)
        out.facts.append(fact)
    return out


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


def _sentence_fact(
    sentence: str,
    tokens: Sequence[_Token],
    mentions: Sequence[_Mention],
    when: str | None,
    existing: Sequence[Any],
) -> dict[str, Any] | None:
    subjects = [m for m in mentions if m.kind == "entity"]
    if not subjects:
        return None
    subject = subjects[0]
    after = [m for m in mentions if m.start >= subject.end]
    lower = sentence.casefold()
    additive = bool(re.search(r"\b(?:also|as well|in addition|additionally)\b", lower))
    ended: str | None = None
    relation: str | None = None
    target: _Mention | None = None
    # "from X to Y": Y is the object, X's fact ends.
    words_after = [t.text.casefold() for t in tokens[subject.end :]]
    if "from" in words_after and "to" in words_after:
        src = next((m for m in after if tokens[m.start - 1].text.casefold() == "from"), None)
        dst = next((m for m in after if tokens[m.start - 1].text.casefold() == "to"), None)
        if src is not None and dst is not None and dst.start > src.start:
            relation = _relation([*_words(tokens[subject.end : src.start - 1]), "to"])
            if relation is not None:  # else no change is read: the plain reading below
                target, ended = dst, src.name
    # "replaced X as <role> of Z": Z is the object of <ROLE>_OF, X's fact about Z ends.
    if target is None and after and tokens[subject.end :]:
        verb = _words(tokens[subject.end : after[0].start])
        if verb and verb[-1] in ("replaced", "replaces", "succeeded") and len(after) >= 2:
            old, obj = after[0], after[1]
            role = _words(tokens[old.end : obj.start])
            if role and role[0] == "as":
                relation = _relation(role[1:])
                target = obj
                ended = old.name
                if relation is not None:
                    flagged = _flag(existing, old.name, obj.name, None)
                    return _fact(subject.name, relation, obj, sentence, when, flagged, ended)
            return None
    if target is None and after:
        target = after[0]
        relation = _relation(_words(tokens[subject.end : target.start]))
        if relation is None:
            relation = "MENTIONED_WITH"
    if target is None:
        # One entity: a status value after the verb ("is now deprecated", "left the company").
        rest = _words(tokens[subject.end :])
        cue = next((c for c in _ENDING_CUES if lower.find(c) > 0), None)
        if cue is not None:
            value = _value(rest)
            if value is None:
                return None
            place = next((p for p in _GENERIC_PLACES if value.endswith(p)), None)
            family = _GENERIC_PLACES[place] if place else None
            flagged = _flag(existing, subject.name, None, family) if family else []
            m = _Mention(0, 0, value, "value")
            out = _fact(subject.name, "STATUS", m, sentence, when, flagged, None)
            out["_value"] = True
            return out
        if rest and rest[0] in ("is", "was", "became", "becomes", "are"):
            value = _value(rest[1:])
            if value is None:
                return None
            out = _fact(subject.name, "STATUS", _Mention(0, 0, value, "value"), sentence, when)
            out["_value"] = True
            return out
        return None
    assert relation is not None and target is not None
    flagged = [] if additive or ended is None else _flag(existing, subject.name, ended, None)
    if "no longer" in lower:
        flagged = _flag(existing, subject.name, target.name, None)
    return _fact(subject.name, relation, target, sentence, when, flagged, ended)


def _fact(
    source: str,
    relation: str,
    target: _Mention,
    sentence: str,
    when: str | None,
    flagged: Sequence[int] = (),
    ended: str | None = None,
) -> dict[str, Any]:
    own = (
        find_date(sentence.replace(target.name, ""))
        if target.kind == "date"
        else find_date(sentence)
    )
    if ended is not None:
        own = find_date(sentence.replace(target.name, "").replace(ended, "")) or own
    return {
        "source": source,
        "target": target.name,
        "predicate": relation,
        "fact": sentence[:_FACT_CHARS],
        "valid_at": own or when,
        "invalid_at": None,
        "supersedes": list(flagged),
    }


def heuristic_entities(text: str) -> dict[str, Any]:
    """The entities answer, in the shape of the entities prompt's schema."""
    if (release := changelog_graph(text)) is not None:  # a changelog release: by its structure
        return {"entities": release["entities"]}
    found = _analyse(text)
    return {
        "entities": [
            {"name": name, "type": kind, "summary": summary}
            for name, kind, summary in found.entities.values()
        ]
    }


def heuristic_graph(text: str, existing: Sequence[Any] = ()) -> dict[str, Any]:
    """Entities and facts in one pass (the single-call shape); `existing`: the facts shown to a
    model (objects with `source`, `predicate`, `target`), which cue flags index into."""
    if (release := changelog_graph(text, existing)) is not None:  # by the release's structure
        return release
    found = _analyse(text, (), existing)
    return {
        "entities": [
            {"name": name, "type": kind, "summary": summary}
            for name, kind, summary in found.entities.values()
        ],
        "facts": found.facts,
    }


def heuristic_facts(
    text: str, entity_names: Sequence[str], existing: Sequence[Any] = ()
) -> dict[str, Any]:
    """The facts answer: at most one fact per sentence, between the entities of `entity_names`
    (and the dates and status values the sentences give)."""
    if (release := changelog_graph(text, existing)) is not None:  # by the release's structure
        return {"facts": release["facts"]}
    known = {n.casefold() for n in entity_names}
    found = _analyse(text, entity_names, existing)
    facts = [
        f
        for f in found.facts
        if f["source"].casefold() in known
        and (f["target"].casefold() in known or f["target"].casefold() in found.entities)
    ]
    return {"facts": facts[:_MAX_FACTS]}
