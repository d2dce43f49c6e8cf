"""Reading one source file into documents: text, title and a reference time with its origin.

A Markdown or plain-text file is one document; a JSON Lines file is one document per record that
has a text field. The reference time comes from YAML front matter (`date`, `created`, `updated`,
`published`, first found), else a `YYYY-MM-DD` date in the file name, else the file's
modification time — the last is flagged (`time_origin == "mtime"`), because a reformatting pass
rewrites it and it is a poor anchor for a temporal graph.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any, Literal

import yaml

__all__ = [
    "FRONT_MATTER_DATE_KEYS",
    "JSONL_TEXT_FIELDS",
    "Document",
    "DocumentError",
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

TimeOrigin = Literal["front_matter", "file_name", "record", "mtime"]


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


def content_hash(data: bytes) -> str:
    """The hash a sync compares to decide whether a file changed."""
    return hashlib.sha256(data).hexdigest()


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """YAML front matter (empty when absent or not a mapping) and the text after it."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return {}, text
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return {}, text
    if not isinstance(meta, dict):
        return {}, text
    return meta, text[match.end() :]


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


def _dated(meta: dict[str, Any], name: str, path: Path) -> tuple[datetime, TimeOrigin]:
    for key in FRONT_MATTER_DATE_KEYS:
        when = _as_datetime(meta.get(key))
        if when is not None:
            return when, "front_matter"
    when = _date_in_name(name)
    if when is not None:
        return when, "file_name"
    return _mtime(path), "mtime"


def read_documents(path: Path, source_file: str, data: bytes) -> list[Document]:
    """The documents in one file's bytes (`path` is only used for its name and mtime).

    Raises:
        DocumentError: the file is not UTF-8, or a JSON Lines line is not a JSON object.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"{source_file}: not UTF-8 text ({exc.reason})") from exc
    if path.suffix.lower() == ".jsonl":
        return _jsonl_documents(path, source_file, text)
    meta, body = split_front_matter(text)
    when, origin = _dated(meta, path.name, path)
    return [Document(source_file, "", _title(meta, body, path.stem), body, when, origin)]


def _jsonl_documents(path: Path, source_file: str, text: str) -> list[Document]:
    docs: list[Document] = []
    file_time, file_origin = _dated({}, path.name, path)
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
