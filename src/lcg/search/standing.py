"""Standing instructions and stated preferences: the text a context hands an agent whatever else
ranks above it.

A person tells an assistant once how to answer from then on ("Always include version numbers when
I ask about libraries", "Never suggest paid tools", "From now on, reply in French") or what they
prefer ("I prefer step-by-step explanations"). Later questions rarely repeat those words, so by
similarity alone such a turn ranks far below the turns about the question's topic, and the answer
ignores it. The index marks each episode window that holds one (`kind`, a column of the episode
partitions: lcg.search.index), and lcg.temporal.evidence ranks the marked windows of the queried
groups on their own, so the few that concern a question are quoted first.

What is marked, in English only (as the rest of the lexical analysis, lcg.search.text):

- `INSTRUCTION`: a sentence that opens with "always", "never", "from now on", "going forward",
  "whenever I", "make sure to always", "do not ever" / "don't ever" or "remember to always"
  (optionally after "please"): an imperative meant to hold beyond the turn that says it;
- `PREFERENCE`: a first-person preference anywhere in the text: "I prefer", "I'd prefer",
  "I would prefer", "my preference", "I'd rather", "I would rather".

The rules are lexical and deliberately narrow: advice ("you should always ...") or a sentence in
the middle of a list is not marked. docs/search.md ("Standing instructions") has what they mark
on the benchmark's chats and what marking them changed.
"""

from __future__ import annotations

import re

__all__ = ["INSTRUCTION", "PREFERENCE", "STANDING", "kind", "where"]

# The episode partitions' column of the marks.
STANDING = "standing"
INSTRUCTION = 1
PREFERENCE = 2

_INSTRUCTION = re.compile(
    r"(?:^|[.!?]\s+|\n\s*)(?P<said>(?:please\s+)?"
    r"(?:always|never|from now on|going forward|whenever i|make sure to always"
    r"|do not ever|don't ever|don’t ever|remember to always)\b)",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(?:i prefer|i'd prefer|i’d prefer|i would prefer|my preference"
    r"|i'd rather|i’d rather|i would rather)\b",
    re.IGNORECASE,
)


def kind(text: str) -> int:
    """The marks of `text`: `INSTRUCTION | PREFERENCE` bits, 0 for neither."""
    out = INSTRUCTION if _INSTRUCTION.search(text) else 0
    return out | PREFERENCE if _PREFERENCE.search(text) else out


_SENTENCE_END = re.compile(r"[.!?]\s+|\n")


def where(text: str) -> int | None:
    """The offset of the sentence that holds `text`'s first mark (None: no mark): where a quote
    of the instruction or preference starts."""
    found = [m.start("said") for m in [_INSTRUCTION.search(text)] if m]
    preference = _PREFERENCE.search(text)
    if preference:
        ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, preference.start())]
        found.append(ends[-1] if ends else 0)
    return min(found) if found else None
