"""Changelogs as documents: one dated document per release, its bullets joined whole.

A changelog is a file with at least two release headings that carry a version and a date, in
any of the forms real projects use (docs/changelogs.md lists them):

    ## 0.28.1 (6th December, 2024)        ## [2.0.0] - 2025-01-05        ## v2.10.0 (2024-11-20)
    Version 3.1.0                          (an underlined RST heading, then "Released 2024-11-13")
    -------------

Each dated release becomes one document (lcg.folder.documents builds them) titled `<project> <version>`, dated by its heading
(`time_origin == "release"`), whose chunks all carry the context line
`Release: <project> <version> (<YYYY-MM-DD>)` the offline extractor reads
(lcg.extraction.changelog). Its body keeps the release's section headings and has every
hard-wrapped paragraph and list item joined onto one line (`unwrap`), so no statement is cut at
a line break. Each bullet about the project's requirements (a supported Python version, a
dependency constraint) becomes a small document of its own in the same release (key
`<version>/requires/<n>`): extraction compares a document with the facts most similar to it,
and a one-bullet text meets the requirement fact it replaces. Releases come oldest first, so
each is read after the releases before it, and a release's requirement documents before its
changes.

A section without a date (`## [Unreleased]`) is not a release yet: it is left out and noted.
The project is the front matter's `project`, else the first heading when it names one
("# httpx changelog"), else the folder holding the file when its name is generic
(`CHANGELOG.md`, `HISTORY.md`, ...), else the file's stem.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import PurePosixPath

from lcg.timeutil import MONTHS

__all__ = [
    "RELEASE_CONTEXT",
    "Release",
    "is_changelog",
    "parse_releases",
    "project_name",
    "requirement_bullet",
    "unwrap",
]

RELEASE_CONTEXT = "Release: {project} {version} ({day})"
_GENERIC_NAMES = frozenset(
    ("changelog", "changes", "history", "news", "releases", "release-notes", "release_notes")
)
_TITLE_WORDS = frozenset(("change", "log", "notes", "of", "the", "for", "version", "release"))
_MONTHS = {m: i + 1 for i, m in enumerate(MONTHS)}
_MONTH_WORD = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_VERSION = r"v?(\d+(?:\.\d+)+(?:[-.]?(?:a|b|rc|alpha|beta|post|dev)\.?\d*)?)"
_DATE_ISO = re.compile(r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)")
_DATE_DMY = re.compile(rf"(?<!\d)(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH_WORD}),?\s+(\d{{4}})", re.I)
_DATE_MDY = re.compile(rf"\b({_MONTH_WORD})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})", re.I)
_ATX = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_UNDERLINE = re.compile(r"^\s*([=\-~^*+#])\1{2,}\s*$")
# A release heading: an optional "Version"/"Release"/project word, the version (maybe in
# brackets or a link), then whatever carries the date.
_RELEASE = re.compile(
    rf"^(?:(?:version|release|v\.)\s+|[\w.-]+\s+(?=v?\d))?\[?{_VERSION}\]?(?:\([^)]*\))?(.*)$",
    re.IGNORECASE,
)
_RELEASED_LINE = re.compile(r"^\s*(?:released|release date|date)\s*:?\s*(.+)$", re.IGNORECASE)
_UNRELEASED = re.compile(r"^\[?\s*unreleased\s*\]?", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(```|~~~)")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+")
_H1 = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)
_REQUIREMENT = re.compile(
    r"^\W*(?:(?:add(?:ed)?|drop(?:ped)?|remove[sd]?)\b.{0,30}\bpython\s+3\.\d+"
    r"|(?:initial\s+|official\s+|basic\s+)?support\s+(?:for\s+)?python\s+3\.\d+"
    r"|python\s+3\.\d+\s+support"
    r"|(?:bump|require|requires|allow|re-allow|change dependency to|update requirement to)\s+"
    r"`?[a-z][\w.-]*`?\s*(?:>=|==|~=|<=|<|>|\s+(?:version\s+)?to\s+`?v?\d))",
    re.IGNORECASE,
)


@dataclass
class Release:
    """One release section: version, date (None when unreleased or undated), body lines."""

    version: str
    day: date | None
    heading: str
    lines: list[str] = field(default_factory=list)


def _month(word: str) -> int | None:
    key = word.casefold().rstrip(".")
    return next((n for name, n in _MONTHS.items() if name.startswith(key) and len(key) >= 3), None)


def parse_date(text: str) -> date | None:
    """The first date `text` names (ISO, "6th December, 2024", "December 6th, 2024")."""
    found: list[tuple[int, date]] = []
    if m := _DATE_ISO.search(text):
        with contextlib.suppress(ValueError):  # 2025-13-45 is not a date
            found.append((m.start(), date(int(m.group(1)), int(m.group(2)), int(m.group(3)))))
    for pattern, order in ((_DATE_DMY, (3, 2, 1)), (_DATE_MDY, (3, 1, 2))):
        if m := pattern.search(text):
            month = _month(m.group(order[1]))
            if month is not None:
                try:
                    day = date(int(m.group(order[0])), month, int(m.group(order[2])))
                except ValueError:
                    continue
                found.append((m.start(), day))
    return min(found)[1] if found else None


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, level, text) of every heading outside fenced code: ATX (`## x`) or an
    underlined RST/setext title (its underline line is the index + 1)."""
    out: list[tuple[int, int, str]] = []
    fence = False
    levels: dict[str, int] = {}
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fence = not fence
            continue
        if fence:
            continue
        if m := _ATX.match(line):
            out.append((i, len(m.group(1)), m.group(2)))
        elif (
            i + 1 < len(lines)
            and line.strip()
            and not _UNDERLINE.match(line)
            and _UNDERLINE.match(lines[i + 1])
            and len(lines[i + 1].strip()) >= len(line.strip()) - 2
        ):
            mark = lines[i + 1].strip()[0]
            levels.setdefault(mark, len(levels) + 1)
            out.append((i, levels[mark], line.strip()))
    return out


def _release_of(heading: str, following: list[str]) -> Release | None:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip()
    m = _RELEASE.match(text)
    if m is None:
        return None
    rest = m.group(2)
    day = parse_date(text[m.start(1) :]) if rest.strip() or "(" in text else None
    if day is None:
        for line in following[:3]:  # "Released 2024-11-13" under an RST heading
            if (r := _RELEASED_LINE.match(line)) and (day := parse_date(r.group(1))):
                break
    return Release(m.group(1), day, heading)


def parse_releases(text: str) -> tuple[list[Release], list[str]]:
    """The release sections in file order, and the headings of unreleased sections.

    A release section runs from its heading to the next heading of the same or a higher level.
    """
    lines = text.splitlines()
    heads = _headings(lines)
    releases: list[Release] = []
    unreleased: list[str] = []
    bounds: list[tuple[int, int, Release | None]] = []  # start line, level, release
    for i, level, title in heads:
        skip = 2 if i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]) else 1
        release = _release_of(title, lines[i + skip : i + skip + 4])
        if release is None and _UNRELEASED.match(title):
            unreleased.append(title)
            bounds.append((i, level, None))
            continue
        if release is not None:
            bounds.append((i, level, release))
            release.lines = []  # filled below
            releases.append(release)
            continue
        bounds.append((i, level, None))
    for n, (start, level, release) in enumerate(bounds):
        if release is None:
            continue
        end = len(lines)
        for later_start, later_level, _ in bounds[n + 1 :]:
            if later_level <= level:
                end = later_start
                break
        skip = 2 if start + 1 < len(lines) and _UNDERLINE.match(lines[start + 1]) else 1
        body = lines[start + skip : end]
        body = [b for b in body if not (_RELEASED_LINE.match(b) and parse_date(b))]
        release.lines = body
    return releases, unreleased


def is_changelog(text: str) -> bool:
    """At least two dated release headings, and most version headings dated."""
    releases, _ = parse_releases(text)
    dated = [r for r in releases if r.day is not None]
    return len(dated) >= 2 and len(dated) * 2 >= len(releases)


def unwrap(text: str) -> str:
    """Markdown/RST with each hard-wrapped paragraph and list item joined onto one line.

    Headings, fenced code, tables, blank lines and RST underlines stay as they are; a nested
    list item starts its own line (indented as it was).
    """
    out: list[str] = []
    fence = False
    joinable = False  # the last output line is prose a continuation line may join
    for raw in text.splitlines():
        line = raw.rstrip()
        if _FENCE.match(line):
            fence = not fence
            out.append(line)
            joinable = False
            continue
        stripped = line.strip()
        if (
            fence
            or not stripped
            or _ATX.match(line)
            or _UNDERLINE.match(line)
            or stripped.startswith(("|", ">", "<!--", ".. "))
        ):
            out.append(line)
            joinable = False
            continue
        if _ITEM.match(line):
            out.append(line)
            joinable = True
            continue
        if joinable:
            out[-1] = f"{out[-1]} {stripped}"
            continue
        out.append(line)
        joinable = True
    return "\n".join(out)


def project_name(meta_project: object, title: str, source_file: str, folder: str = "") -> str:
    """The project a changelog is about (module docstring's order); `folder`: the name of the
    directory holding the file, for a `source_file` given without one."""
    if isinstance(meta_project, str) and meta_project.strip():
        return meta_project.strip()
    words = [w for w in re.split(r"[\s:—–-]+", title) if w]
    named = [w for w in words if w.casefold() not in _GENERIC_NAMES | _TITLE_WORDS]
    digits = any(ch.isdigit() for ch in "".join(named))
    if named and len(named) < len(words) and len(named) <= 3 and not digits:
        return " ".join(named)
    path = PurePosixPath(source_file)
    if path.stem.casefold() in _GENERIC_NAMES and (path.parent.name or folder):
        return path.parent.name or folder
    return path.stem


def requirement_bullet(line: str) -> bool:
    """A bullet about what the project requires: a Python version it supports or drops, or a
    dependency constraint ("Require `installer>=1.0.0`", "Bump `pydantic-core` to v2.27.1")."""
    m = _ITEM.match(line)
    if m is None or m.group(1):
        return False
    body = re.sub(r"[*_]{2}", "", line[m.end() :])
    return _REQUIREMENT.match(body) is not None
