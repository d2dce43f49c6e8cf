"""Facts from one changelog release, offline: every bullet a dated change of that release.

A release text opens with the context line `Release: <project> <version> (<YYYY-MM-DD>)`
(lcg.folder.changelog writes it into every chunk of a release; a caller of
`knowledge_add_episode` may write it too — docs/changelogs.md). Its lines are Markdown: section
headings (`### Fixed`), bold labels (`**Deprecations**:`) and one bullet per line (hard-wrapped
bullets already joined). Prose paragraphs give nothing, nor do lists of new contributors:
precision first.

Entities: the project, the release (`<project> <version>`), and what each bullet is about.
Facts, each valid from the release date, each sentence starting `<project> <version>`:

- per bullet, `<release> <KIND> <thing>`: KIND from the bullet's verb, else its section
  (Keep a Changelog and the usual GitHub release-note headings): `ADDED`, `REMOVED`,
  `DEPRECATED`, `CHANGED`, `FIXED`, `SECURITY_FIX` (a security section, or a vulnerability or
  CVE named). The thing is the first code-span name (`FunctionAuth`), else the pull request
  the bullet cites (`httpx #3699`), else the bullet's place in the release
  (`httpx 0.28.1 change 3`). A `REMOVED` bullet ends the existing facts of the same project
  that added, changed or deprecated that thing (reason `cue`);
- supported Python versions: `<project> SUPPORTS Python 3.12` ("Add support for Python 3.12",
  "Python 3.9 support", "Add official support for Python 3.14"), and
  `<project> DROPPED_SUPPORT_FOR Python 3.8` ("Drop support for Python 3.8", "Remove Python
  3.8 support"), which ends the existing `SUPPORTS` fact of that version (a `SUPPORTS` fact
  read after the drop that ends it flags that drop, and is stored already ended);
- dependency constraints: `<project> REQUIRES <package>` ("Require `installer>=1.0.0`",
  "Allow `dulwich>=1.0`", "Bump `pydantic-core` to v2.27.1", "now requires Werkzeug >= 3.1"),
  which ends the existing `REQUIRES` fact of the same package: one constraint is current.

Ends are flagged against the existing facts the pipeline shows (`supersedes` indexes), like a
model's, so they go through the same supersession path as every other fact. The pipeline shows
a bounded list of the existing facts most similar to the text about the entities it names, so
the project entity holds only the requirement facts (no per-release "released" fact: that
would crowd them out); the release entity holds the changes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ReleaseRef", "changelog_graph", "release_of"]

_MAX_FACTS = 200
_FACT_CHARS = 600
_CONTEXT = re.compile(
    r"^Release: (?P<project>.+?) (?P<version>v?\d[\w.+-]*) \((?P<day>\d{4}-\d{2}-\d{2})\)\s*$",
    re.MULTILINE,
)
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
_SECTION_HEADER = re.compile(r"^Section:\s*(.+)$")
_LABEL = re.compile(r"^\*\*([^*]+?)\*\*:?\s*:?\s*$|^([A-Z][\w ]{2,40}):\s*$")
_ITEM = re.compile(r"^(?:[-*+]|\d+[.)])\s+(.+)$")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_CONTRIBUTOR = re.compile(r"^@\S+ made (?:their|his|her|a) first contribution", re.I)
_CODE = re.compile(r"`([^`]+)`")
_PULL = re.compile(r"(?:\bpull\s+|\bPR\s+)?#(\d{2,6})\b", re.IGNORECASE)
_CONSTANT = re.compile(r"[A-Z][A-Z0-9]*(?:_+[A-Z0-9]+)+")  # as lcg.ingest.index keys it
_SECURITY = re.compile(r"\b(?:CVE-\d{4}-\d+|GHSA-[\w-]+|vulnerabilit(?:y|ies)|security)\b", re.I)

_SECTION_KINDS = (
    (re.compile(r"secur", re.I), "SECURITY_FIX"),
    (re.compile(r"deprecat", re.I), "DEPRECATED"),
    (re.compile(r"remov|drop|delet|breaking.*remov", re.I), "REMOVED"),
    (re.compile(r"\bfix|bug", re.I), "FIXED"),
    (re.compile(r"\badd|new|feature|enhancement", re.I), "ADDED"),
    (re.compile(r"chang|improv|updat|perform|packag|refactor|internal|dependenc", re.I), "CHANGED"),
)
_VERB_KINDS = {
    "ADDED": "add added adds adding introduce introduced introduces new support supports expose",
    "REMOVED": "remove removed removes removing drop dropped drops delete deleted",
    "DEPRECATED": "deprecate deprecated deprecates deprecating",
    "FIXED": "fix fixed fixes fixing bugfix correct corrected resolve resolved",
    "CHANGED": "change changed changes update updated bump bumped upgrade upgraded require "
    "requires allow rename renamed replace replaced make made use switch improve improved",
}
_VERB = {word: kind for kind, words in _VERB_KINDS.items() for word in words.split()}
_ENDABLE = frozenset({"ADDED", "CHANGED", "DEPRECATED"})

_PY = r"python\s+(3\.\d{1,2})(?![\d.]*\d)"
_PY_ADD = (
    re.compile(
        rf"^(?:add(?:ed|s)?\s+)?(?:initial\s+|official\s+|basic\s+|proper\s+|full\s+)?"
        rf"support\s+(?:for\s+)?{_PY}\b(?!\s*[+]|\s+and\s+(?:greater|later|newer)|\s+(?:on|in)\b)",
        re.I,
    ),
    re.compile(rf"^(?:add(?:ed)?\s+)?(?:initial\s+|basic\s+)?{_PY}\s+support\b", re.I),
    re.compile(
        rf"^add(?:ed)?\s+{_PY}\s+to\s+(?:the\s+)?(?:officially\s+)?supported\s+versions", re.I
    ),
)
_PY_DROP = re.compile(
    rf"^(?:drop(?:ped|s)?|remove[ds]?)\s+(?:support\s+for\s+)?{_PY}(?:\s+support)?\b", re.I
)
_PY_MORE = re.compile(
    r"\s*(?:,|and|&|or)\s*(?:and\s+)?(?:python\s+)?(3\.\d{1,2})(?![\d.]*\d)", re.I
)
_PKG = r"([A-Za-z][\w.-]*[\w])"
_DEP = (
    re.compile(
        r"^(?:bump|bumped|require|requires|allow|re-allow|change dependency to|"
        rf"update requirement to|update (?:the )?{_PKG[1:-1]} dependency to)\s+"
        rf"{_PKG}\s*(>=|==|~=|<=|<|>)\s*v?(\d[\w.]*\w|\d)",
        re.I,
    ),
    re.compile(rf"^bump(?:ed)?\s+{_PKG}\s+(?:version\s+)?to\s+v?(\d[\w.]*\w|\d)", re.I),
    re.compile(rf"\bnow requires\s+{_PKG}\s*(>=|==|~=)\s*v?(\d[\w.]*\w|\d)", re.I),
)


@dataclass(frozen=True)
class ReleaseRef:
    """Which release a text is about."""

    project: str
    version: str
    day: str  # YYYY-MM-DD

    @property
    def name(self) -> str:
        return f"{self.project} {self.version}"

    @property
    def valid_at(self) -> str:
        return f"{self.day}T00:00:00Z"


def release_of(text: str) -> ReleaseRef | None:
    """The release a text's context line names (within its first lines), or None."""
    head = "\n".join(text.splitlines()[:6])
    # A context line holds "Release: ": looking for it first spares the regex's pass over a
    # huge head (a 15 MB one-line chunk held the GIL for 0.1-0.5 s there).
    m = _CONTEXT.search(head) if "Release: " in head else None
    if m is None:
        return None
    return ReleaseRef(m.group("project").strip(), m.group("version"), m.group("day"))


def _plain(text: str) -> str:
    """A bullet with its Markdown links as their text and no bold markers."""
    text = _LINK.sub(r"\1", text)
    text = text.replace("**", "")
    return " ".join(text.split())


def _package(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.casefold()).strip("-")


def _thing(bullet: str, skip: set[str]) -> str | None:
    """The first code-span name a bullet gives (`FunctionAuth`, `verify`) that is not one of
    `skip` (casefolded), or None."""
    for m in _CODE.finditer(bullet):
        name = m.group(1).strip()
        name = re.sub(r"\(.*\)$", "", name).strip()  # `Request()` -> Request
        if name.casefold() in skip:
            continue
        if 1 < len(name) <= 60 and re.search(r"[A-Za-z]", name) and "\n" not in name:
            return name
    return None


def _kind(bullet: str, section: str) -> str:
    if _SECURITY.search(section) or re.search(r"\b(?:CVE-\d{4}-\d+|vulnerabilit)", bullet, re.I):
        return "SECURITY_FIX"
    first = re.sub(r"^[^A-Za-z]+", "", bullet).split(" ", 1)[0].casefold().rstrip(":,")
    if first in _VERB:
        return _VERB[first]
    low = bullet.casefold()
    if re.search(r"\b(?:is|are) now deprecated\b|\b(?:has|have) been deprecated\b", low):
        return "DEPRECATED"
    if re.search(r"\b(?:has|have)(?: now)? been removed\b|\b(?:is|are) now removed\b", low):
        return "REMOVED"
    for pattern, kind in _SECTION_KINDS:
        if section and pattern.search(section):
            return kind
    return "CHANGED"


class _Release:
    """Accumulates one release text's entities and facts."""

    def __init__(self, ref: ReleaseRef, existing: Sequence[Any]) -> None:
        self.ref = ref
        self.existing = existing
        self.entities: dict[str, tuple[str, str, str]] = {}
        self.facts: list[dict[str, Any]] = []
        self.used: set[tuple[str, str, str]] = set()
        self.count = 0
        self.entity(ref.project, "Project", f"The project whose changelog lists {ref.name}.")
        self.entity(ref.name, "Release", f"{ref.name}, released {ref.day}.")

    def entity(self, name: str, kind: str, summary: str) -> None:
        self.entities.setdefault(name.casefold(), (name, kind, summary[:240]))

    def fact(
        self, source: str, predicate: str, target: str, text: str, ends: Sequence[int] = ()
    ) -> bool:
        key = (source.casefold(), predicate, target.casefold())
        if key in self.used or len(self.facts) >= _MAX_FACTS:
            return False
        self.used.add(key)
        self.facts.append(
            {
                "source": source,
                "target": target,
                "predicate": predicate,
                "fact": text[:_FACT_CHARS],
                "valid_at": self.ref.valid_at,
                "invalid_at": None,
                "supersedes": list(ends),
            }
        )
        return True

    def ending(self, target: str, predicates: frozenset[str], *, same_source: bool) -> list[int]:
        """Indexes of existing facts of this project to `target` with one of `predicates`."""
        out = []
        project = self.ref.project.casefold()
        prefix = f"{project} "
        for i, e in enumerate(self.existing):
            source = str(e.source).casefold()
            mine = source == project if same_source else source.startswith(prefix)
            relation = str(e.predicate).upper()
            if mine and relation in predicates and _same_target(str(e.target), target):
                out.append(i)
        return out

    def bullet(self, raw: str, section: str) -> None:
        text = _plain(raw)
        if len(text.split()) < 2 or _CONTRIBUTOR.match(text) or "contributor" in section.lower():
            return  # who contributed is not a change of the software
        self.count += 1
        sentence = f"{self.ref.name}: {text}"
        words = re.sub(r"[`*]", "", text)
        if self._python(words, sentence) or self._dependency(words, sentence):
            return
        kind = _kind(text, section)
        # The project itself is not what one of its changes is about.
        thing = _thing(text, {self.ref.project.casefold(), "python"})
        pull = _PULL.search(text)
        candidates = [
            thing,
            f"{self.ref.project} #{pull.group(1)}" if pull else None,
            f"{self.ref.name} change {self.count}",
        ]
        for target in (c for c in candidates if c):
            if (self.ref.name.casefold(), kind, target.casefold()) in self.used:
                continue
            ends = self.ending(target, _ENDABLE, same_source=False) if kind == "REMOVED" else []
            label = "Change" if target.startswith(self.ref.name) else "Entity"
            self.entity(target, label, sentence)
            self.fact(self.ref.name, kind, target, sentence, ends)
            return

    def _python(self, words: str, sentence: str) -> bool:
        if m := _PY_DROP.match(words):
            wrote = False
            for version in _versions(m, words):
                self.entity(version, "Software", sentence)
                ends = self.ending(version, frozenset({"SUPPORTS"}), same_source=True)
                wrote |= self.fact(self.ref.project, "DROPPED_SUPPORT_FOR", version, sentence, ends)
            return wrote
        for pattern in _PY_ADD:
            if m := pattern.match(words):
                wrote = False
                for version in _versions(m, words):
                    self.entity(version, "Software", sentence)
                    # A later release's drop, read first: the support is stored already ended.
                    dropped = frozenset({"DROPPED_SUPPORT_FOR"})
                    ends = self.ending(version, dropped, same_source=True)
                    wrote |= self.fact(self.ref.project, "SUPPORTS", version, sentence, ends)
                return wrote
        return False

    def _dependency(self, words: str, sentence: str) -> bool:
        for n, pattern in enumerate(_DEP):
            m = pattern.match(words) if n < 2 else pattern.search(words)
            if m is None:
                continue
            groups = [g for g in m.groups() if g is not None]
            if n == 1:
                name, constraint = groups[0], f"=={groups[1]}"
            else:
                name, constraint = groups[-3], f"{groups[-2]}{groups[-1]}"
            if name.casefold() in ("python", "support", "to", "the"):
                return False
            self.entity(name, "Software", sentence)
            ends = self.ending(name, frozenset({"REQUIRES"}), same_source=True)
            text = f"{self.ref.name} requires {name}{constraint}: {sentence.split(': ', 1)[1]}"
            return self.fact(self.ref.project, "REQUIRES", name, text, ends)
        return False


def _versions(m: re.Match[str], words: str) -> list[str]:
    """The Python version matched and those listed right after it ("3.12 and 3.13")."""
    out = [f"Python {m.group(1)}"]
    rest = words[m.end(1) :]
    while more := _PY_MORE.match(rest):
        out.append(f"Python {more.group(1)}")
        rest = rest[more.end() :]
    return out


def _same_target(existing: str, target: str) -> bool:
    """One name, the way entity resolution keys names (`Poetry-Core` is `poetry_core`; an
    ALL_CAPS identifier such as `VIRTUAL_ENV` keeps its underscores, so it is not `virtualenv`)."""
    return _target_key(existing) == _target_key(target)


def _target_key(name: str) -> str:
    if _CONSTANT.fullmatch(name.strip()):
        return re.sub(r"\W+", "", name.casefold())
    return re.sub(r"[\W_]+", "", name.casefold())


def changelog_graph(text: str, existing: Sequence[Any] = ()) -> dict[str, Any] | None:
    """The entities and facts of one release text (the heuristic answer shapes), or None when
    the text names no release (module docstring)."""
    ref = release_of(text)
    if ref is None:
        return None
    release = _Release(ref, existing)
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("Document:", "Release:")):
            continue
        if m := _SECTION_HEADER.match(line):
            section = m.group(1).split(">")[-1].strip()
            continue
        if m := _HEADING.match(line):
            section = m.group(1)
            continue
        if m := _LABEL.match(line):
            section = m.group(1) or m.group(2)
            continue
        if raw[:1] in (" ", "\t"):
            continue  # a nested item: a detail of the bullet above
        if m := _ITEM.match(line):
            release.bullet(m.group(1), section)
    return {
        "entities": [
            {"name": name, "type": kind, "summary": summary}
            for name, kind, summary in release.entities.values()
        ],
        "facts": release.facts,
    }
