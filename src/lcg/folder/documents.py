"""Reading one source file into documents: text, title and a reference time with its origin.

A Markdown or plain-text file is one document; a JSON Lines file is one document per record that
has a text field. The reference time comes from YAML front matter (`date`, `created`, `updated`,
`published`, first found), else a `YYYY-MM-DD` date in the file name, else the file's
modification time — the last is flagged (`time_origin == "mtime"`), because a reformatting pass
rewrites it and it is a poor anchor for a temporal graph.

Nothing in front matter stops a run. A date value that is not a date (`2025-13-45`,
`next tuesday`, `12/03/2025`) is skipped for the next source of a time, and a front-matter block
that is not valid YAML is dropped from the text (it is metadata, not prose) and read as empty;
either way the document carries a note (`Document.notes`) naming the value and the fallback,
which `lcg ingest` prints per file.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any, Literal

import yaml
from yaml.constructor import SafeConstructor

from lcg.folder import changelog

__all__ = [
    "FRONT_MATTER_DATE_KEYS",
    "JSONL_TEXT_FIELDS",
    "Document",
    "DocumentError",
    "DocumentKind",
    "TimeOrigin",
    "content_hash",
    "read_documents",
    "split_front_matter",
]

FRONT_MATTER_DATE_KEYS = ("date", "created", "updated", "published")
JSONL_TEXT_FIELDS = ("text", "content", "body", "prose", "message")
_JSONL_TITLE_FIELDS = ("title", "name", "subject")
_JSONL_ID_FIELDS = ("id", "uuid", "revision_id")
_FILE_NAME_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_H1 = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)

TimeOrigin = Literal["front_matter", "file_name", "record", "mtime", "release"]
DocumentKind = Literal["auto", "document", "changelog"]


class DocumentError(ValueError):
    """A file could not be read as a document (undecodable, malformed JSON Lines record)."""


@dataclass(frozen=True)
class Document:
    """One unit of source text with the metadata chunking and dating need."""

    source_file: str  # path relative to the root given, with forward slashes
    key: str  # "" for a whole file; the record's id or line number for a JSON Lines record
    title: str
    text: str  # body without front matter
    reference_time: datetime
    time_origin: TimeOrigin
    notes: tuple[str, ...] = ()  # what was wrong in the metadata and what was used instead
    context: str = ""  # a line every chunk's header carries (a changelog release's)


def content_hash(data: bytes) -> str:
    """The hash a sync compares to decide whether a file changed."""
    return hashlib.sha256(data).hexdigest()


class _FrontMatterLoader(yaml.SafeLoader):
    """SafeLoader whose impossible timestamps (`2025-13-45`) stay strings instead of raising
    ValueError out of the parser, so they are reported like any other bad date."""


def _timestamp_or_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    try:
        return SafeConstructor.construct_yaml_timestamp(loader, node)
    except ValueError:
        return loader.construct_scalar(node)


_FrontMatterLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_or_text)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error in one line: what, and where in the file (the block starts on line 2)."""
    what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 2})" if mark is not None else ""
    return f"{' '.join(str(what).split())}{where}"


def split_front_matter(text: str) -> tuple[dict[str, Any], str, str | None]:
    """YAML front matter, the text after it, and what was wrong with the front matter (or None).

    No block, or a block that is YAML but not a mapping (a list, a line of prose between rules):
    not front matter, `({}, text, None)`. A block that is not valid YAML is still front matter
    (it is not prose either): it is dropped from the text, read as empty, and the problem said.
    """
    match = _FRONT_MATTER.match(text)
    if match is None:
        return {}, text, None
    try:
        meta = yaml.load(match.group(1), Loader=_FrontMatterLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        problem = _yaml_problem(exc)
        return (
            {},
            text[match.end() :],
            f"front matter is not valid YAML, so it was skipped: {problem}",
        )
    if meta is None:
        return {}, text[match.end() :], None
    if not isinstance(meta, dict):
        return {}, text, None
    return meta, text[match.end() :], None


def _as_datetime(value: Any) -> datetime | None:
    """A front-matter or record value as an aware UTC datetime, or None if it is not a date."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):
        return datetime.combine(value, time(), tzinfo=UTC)
    if isinstance(value, str) and value.strip():
        text = value.strip().replace("Z", "+00:00")
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            return None
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    return None


def _date_in_name(name: str) -> datetime | None:
    for match in _FILE_NAME_DATE.finditer(name):
        try:
            year, month, day = (int(g) for g in match.groups())
            return datetime(year, month, day, tzinfo=UTC)
        except ValueError:
            continue
    return None


def _mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)


def _title(meta: dict[str, Any], body: str, fallback: str) -> str:
    title = meta.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    match = _H1.search(body)
    return match.group(1).strip() if match else fallback


_ORIGIN_WORDS: dict[str, str] = {
    "front_matter": "front matter",
    "file_name": "the date in the file name",
    "mtime": "modification time",
}


def _undated(name: str, path: Path) -> tuple[datetime, TimeOrigin]:
    """The time of a file without a usable front-matter date: its name's date, else its mtime."""
    named = _date_in_name(name)
    return (named, "file_name") if named is not None else (_mtime(path), "mtime")


def _dated(
    meta: dict[str, Any], name: str, path: Path
) -> tuple[datetime, TimeOrigin, tuple[str, ...]]:
    """The reference time, where it came from, and a note per front-matter date not used."""
    bad: list[str] = []
    found: tuple[datetime, TimeOrigin] | None = None
    for key in FRONT_MATTER_DATE_KEYS:
        value = meta.get(key)
        when = _as_datetime(value)
        if when is not None:
            found = (when, "front_matter")
            break
        if value is not None and value != "":
            bad.append(f"{key}: {value!r}")
    when, origin = found if found is not None else _undated(name, path)
    notes = tuple(
        f"front matter {item} is not a date (use YYYY-MM-DD or RFC 3339); dated by "
        f"{_ORIGIN_WORDS[origin]} instead: {when.isoformat()}"
        for item in bad
    )
    return when, origin, notes


_MARKUP_SUFFIXES = frozenset((".md", ".markdown", ".rst"))


def read_documents(
    path: Path,
    source_file: str,
    data: bytes,
    kind: DocumentKind = "auto",
    project: str | None = None,
) -> list[Document]:
    """The documents in one file's bytes (`path` is only used for its name and mtime).

    A changelog (`kind="changelog"`, or recognised with `"auto"`: lcg.folder.changelog) gives
    one document per dated release, about `project` (default: derived from the file).

    Raises:
        DocumentError: the file is not UTF-8, a JSON Lines line is not a JSON object, or a
            file read as a changelog has no dated release heading.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"{source_file}: not UTF-8 text ({exc.reason})") from exc
    if path.suffix.lower() == ".jsonl":
        return _jsonl_documents(path, source_file, text)
    meta, body, problem = split_front_matter(text)
    when, origin, notes = _dated(meta, path.name, path)
    if problem is not None:
        notes = (problem, *notes)
    title = _title(meta, body, path.stem)
    doc = Document(source_file, "", title, body, when, origin, notes)
    if kind == "document" or (kind == "auto" and not changelog.is_changelog(body)):
        if path.suffix.lower() in _MARKUP_SUFFIXES:
            # Hard-wrapped paragraphs and list items joined before anything splits sentences,
            # so a statement wrapped at a line break is read whole (docs/folder-ingest.md).
            doc = replace(doc, text=changelog.unwrap(body))
        return [doc]
    folder = path.absolute().parent.name
    name = project or changelog.project_name(meta.get("project"), title, source_file, folder)
    releases, left_out = _release_documents(doc, name)
    if not releases:
        raise DocumentError(
            f"{source_file}: read as a changelog, but no release heading has a date"
        )
    if left_out:
        releases[0] = replace(releases[0], notes=(*notes, *left_out))
    return releases


def _release_documents(doc: Document, project: str) -> tuple[list[Document], list[str]]:
    """One document per dated release of the changelog `doc` (and one per requirement
    bullet), and notes on the sections left out."""
    releases, unreleased = changelog.parse_releases(doc.text)
    docs: list[Document] = []
    notes = [f"changelog: section '{h}' has no release date; not ingested" for h in unreleased]
    for release in releases:
        if release.day is None:
            notes.append(
                f"changelog: release heading '{release.heading}' has no date; not ingested"
            )
            continue
        day = release.day.isoformat()
        context = changelog.RELEASE_CONTEXT.format(
            project=project, version=release.version, day=day
        )
        when = datetime(release.day.year, release.day.month, release.day.day, tzinfo=UTC)
        body = changelog.unwrap("\n".join(release.lines)).splitlines()
        requires = [line for line in body if changelog.requirement_bullet(line)]
        rest = "\n".join(line for line in body if not changelog.requirement_bullet(line)).strip()
        title = f"{project} {release.version}"
        base = replace(doc, title=title, reference_time=when, time_origin="release", notes=())
        if rest:
            docs.append(replace(base, key=release.version, text=rest, context=context))
        docs.extend(
            replace(base, key=f"{release.version}/requires/{n}", text=line, context=context)
            for n, line in enumerate(requires)
        )
    # Oldest first: each release's facts meet the ones of the releases before it; within a
    # release its requirement bullets first, while its own change facts do not yet crowd the
    # bounded list of existing facts extraction is shown.
    docs.sort(key=lambda d: (d.reference_time, "/requires/" not in d.key))
    return docs, notes


def _jsonl_documents(path: Path, source_file: str, text: str) -> list[Document]:
    docs: list[Document] = []
    file_time, file_origin, _ = _dated({}, path.name, path)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DocumentError(f"{source_file}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise DocumentError(f"{source_file}:{number}: a record must be a JSON object")
        body = next((record[f] for f in JSONL_TEXT_FIELDS if isinstance(record.get(f), str)), None)
        if body is None or not body.strip():
            continue  # headers and records without text carry nothing to ingest
        title = next(
            (str(record[f]) for f in _JSONL_TITLE_FIELDS if record.get(f)), f"{path.stem}:{number}"
        )
        key = next((str(record[f]) for f in _JSONL_ID_FIELDS if record.get(f)), f"L{number}")
        when, origin = file_time, file_origin
        for field in (*FRONT_MATTER_DATE_KEYS, "timestamp"):
            found = _as_datetime(record.get(field))
            if found is not None:
                when, origin = found, "record"
                break
        docs.append(Document(source_file, key, title, body, when, origin))
    return docs
