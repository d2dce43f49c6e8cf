"""The time part of `lcg demo`: a short project changelog in, then what is true now, what was
true on an earlier date, what changed between two dates, and one entity's timeline.

examples/changelog/atlas.md is written the way projects write theirs (Keep a Changelog release
headings, sections, imperative and hard-wrapped bullets). It is read as `lcg ingest` reads a
changelog (lcg.folder.documents: one dated document per release, oldest first; docs/changelogs.md)
and each chunk is one episode (`knowledge_add_episode`, `reference_time` = its release date)
through whatever extractor the demo runs — offline, the heuristic one, which reads a release by
its structure: a new dependency minimum ends the previous one, a dropped Python version ends its
support, a removal ends what an earlier release added.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from lcg.engine import Engine
from lcg.folder.chunking import chunk_document
from lcg.folder.documents import read_documents
from lcg.service.registry import dispatch
from lcg.timeutil import to_iso_z

__all__ = ["CHANGELOG_GROUP", "example_file", "show_time"]

CHANGELOG_GROUP = "changelog"
CHANGELOG = "examples/changelog/atlas.md"
EARLIER = "2025-02-15"
WINDOW = ("2025-03-01", "2025-07-01")
TIMELINE_OF = "Atlas"
_CHUNK_CHARS = 4000


def example_file(relative: str) -> Path:
    """A file of examples/: in the installed package (lcg/examples/ carries the demo's files as
    package data), in the source checkout it runs from, or in the working directory."""
    for parent in [*Path(__file__).resolve().parents, Path.cwd()]:
        candidate = parent / relative
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{relative} not found: run `lcg demo` from an lcg source checkout")


def _flat(text: str) -> str:
    return " ".join(text.split())


def _line(console: Console, text: str) -> None:
    console.print(f"  {text}", no_wrap=True, overflow="ellipsis", markup=False)


async def _ingest(engine: Engine) -> int:
    path = example_file(CHANGELOG)
    releases = read_documents(path, CHANGELOG, path.read_bytes(), "changelog")
    for doc in releases:
        for chunk in chunk_document(doc, _CHUNK_CHARS):
            await dispatch(
                engine,
                "knowledge_add_episode",
                {
                    "name": f"changelog {chunk.chunk_id}",
                    "episode_body": chunk.text,
                    "source_description": CHANGELOG,
                    "reference_time": to_iso_z(doc.reference_time),
                    "group_id": CHANGELOG_GROUP,
                },
            )
    return len({doc.title for doc in releases})


def _sentences(edges: list[dict[str, Any]]) -> list[str]:
    """Each fact's sentence once, in valid-time order."""
    ordered = sorted(edges, key=lambda e: (e["valid_at"] or "", e["fact"]))
    return list(dict.fromkeys(e["fact"] for e in ordered))


async def show_time(engine: Engine, console: Console) -> None:
    """Ingest the changelog, then print the four views of time (no model needed)."""
    count = await _ingest(engine)
    group = {"group_ids": [CHANGELOG_GROUP]}
    console.print(
        f"\n[bold]Time[/]: {count} releases of {CHANGELOG} ingested into group "
        f"'{CHANGELOG_GROUP}', as dated episodes of their release."
    )
    now = await dispatch(
        engine, "knowledge_get_edges_by_group", {**group, "include_invalidated": False}
    )
    console.print("\n[bold]What is true now[/] (knowledge_get_edges_by_group, current facts):")
    for sentence in _sentences(now["edges"]):
        _line(console, _flat(sentence))

    then = await dispatch(
        engine, "knowledge_get_edges_by_group", {**group, "as_of": f"{EARLIER}T00:00:00Z"}
    )
    console.print(f"\n[bold]What was true on {EARLIER}[/] (as_of):")
    for sentence in _sentences(then["edges"]):
        _line(console, _flat(sentence))

    since, until = WINDOW
    changes = await dispatch(
        engine,
        "knowledge_get_changes",
        {**group, "since": f"{since}T00:00:00Z", "until": f"{until}T00:00:00Z"},
    )
    console.print(f"\n[bold]What changed from {since} to {until}[/] (knowledge_get_changes):")
    seen: set[tuple[str, str, str]] = set()
    for entry in changes["changes"]:
        key = (entry["at"][:10], entry["kind"], entry["fact"]["fact"])
        if entry["kind"] in ("started", "ended") and key not in seen:
            seen.add(key)
            _line(console, f"{key[0]}  {key[1]:<7}  {_flat(key[2])}")

    timeline = await dispatch(
        engine,
        "knowledge_get_entity_timeline",
        {"name": TIMELINE_OF, "group_id": CHANGELOG_GROUP},
    )
    sentence_of = {f["uuid"]: f["fact"] for f in timeline["facts"]}
    console.print(f"\n[bold]Timeline of {TIMELINE_OF}[/] (knowledge_get_entity_timeline):")
    shown: set[str] = set()
    for f in timeline["facts"]:
        if f["fact"] in shown:
            continue
        shown.add(f["fact"])
        span = f"{(f['valid_at'] or '?')[:10]} → {(f['invalid_at'] or 'now')[:10]}"
        _line(console, f"{span:<24}  {f['status']:<10}  {_flat(f['fact'])}")
        for successor in f["superseded_by"]:
            later = _flat(sentence_of.get(successor, successor))
            _line(console, f"  └ superseded by: {later}")
