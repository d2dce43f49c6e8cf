"""Real changelogs through `lcg ingest`, offline: what changed between two dates, and what is
true now; prints one JSON object.

    python bench/changelogs.py [--details] [--file NAME ...]

The three changelogs of ../shared/data/changelogs/ (httpx: Keep-a-Changelog sections under
`## 0.28.1 (6th December, 2024)`; poetry: `## [2.0.0] - 2025-01-05` with Added/Changed/Fixed;
pydantic: `## v2.10.0 (2024-11-20)` GitHub release notes with long wrapped bullets) are each
staged as `<project>/<file name>` in a temporary folder (the way a repository checkout holds
them) and ingested into their own group by the same code `lcg ingest` runs (`plan_sync` and
`run_sync` of lcg.folder, `LCG_EXTRACTOR=heuristic`, the hash embedder).

The ground truth comes from the files' own structure, read here by a parser of this script
(never lcg's): a release is a heading with a version and a date; its changes are its top-level
bullets (hard-wrapped continuation lines joined; "New Contributors" lists left out, they are
not changes of the software). Unreleased sections have no date and are not expected.

- **What changed** (`knowledge_get_changes` over a window, `started`/`ended` rows): a `started`
  row is right when its fact names the release (project and version) and holds one of the
  window's bullets; a row that records the release itself (the project released the version)
  is right when that release is in the window; an `ended` row is right when a right `started`
  row of the same instant shares an endpoint with it (the change that ended it). Recall = the
  window's bullets some right row holds / its bullets; precision = right rows / rows.
  The windows: 2025-05-01..2025-09-01 for every file (the window of the issue that asked for
  this benchmark; httpx has no release in it, so every row there would be wrong), and per file
  one window holding a change of supported Python versions (httpx 2023-09-01..2025-01-01: 0.25.0
  adds 3.12 and drops 3.7, the 0.28 deprecations and removals; poetry 2024-10-01..2025-02-01:
  2.0.0 drops 3.8 and raises several minimums; pydantic 2024-11-01..2025-02-01: 2.10 and 2.11
  pre-releases, long wrapped bullets).
- **What is true now**: the project's current facts whose target is a Python version and whose
  relation says it supports it must be exactly the versions the file adds and never drops
  later (written out below by hand from the files, with the line that says so); and for every
  dependency constraint the file states ("Require `installer>=1.0.0`", "Allow `dulwich>=1.0`",
  "Bump `pydantic-core` to v2.40.1"), exactly one current fact must give the dependency's
  constraint, the one of the latest release that states it.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import anyio

from lcg import Settings, open_engine
from lcg.engine import Engine
from lcg.folder.sync import plan_sync, run_sync
from lcg.folder.syncstate import SyncState
from lcg.folder.walk import DEFAULT_GLOBS, scan_sources
from lcg.service.registry import dispatch

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "changelogs"

FILES = {
    "encode__httpx--CHANGELOG.md": ("httpx", "CHANGELOG.md"),
    "python-poetry__poetry--CHANGELOG.md": ("poetry", "CHANGELOG.md"),
    "pydantic__pydantic--HISTORY.md": ("pydantic", "HISTORY.md"),
}
SHARED_WINDOW = ("2025-05-01", "2025-09-01")
WINDOWS = {
    "httpx": [SHARED_WINDOW, ("2023-09-01", "2025-01-01")],
    "poetry": [SHARED_WINDOW, ("2024-10-01", "2025-02-01")],
    "pydantic": [SHARED_WINDOW, ("2024-11-01", "2025-02-01")],
}
# Supported Python versions now, by hand from the released sections (the line saying so):
PYTHON_NOW = {
    # added: 3.9 (l.464), 3.10 (l.356), 3.11 (l.186), 3.12 (l.105); dropped: 3.6 (l.206),
    # 3.7 (l.116); "Drop support for Python 3.8" (l.11) is unreleased.
    "httpx": {"3.9", "3.10", "3.11", "3.12"},
    # added: 3.12 (l.738), 3.13 (l.559), 3.14 (l.205); dropped: 3.7 (l.816), 3.8 (l.455),
    # 3.9 (l.142).
    "poetry": {"3.12", "3.13", "3.14"},
    # added: 3.7 (l.3791), 3.9 (l.3226, l.3246), 3.10 (l.2945), 3.11 (l.2818), 3.13 (l.1522),
    # 3.14 (l.531), 3.15 (l.22); dropped: 3.7 (l.1957), 3.8 (l.803), 3.9 (l.90).
    "pydantic": {"3.10", "3.11", "3.13", "3.14", "3.15"},
}

_VERSION = r"v?\[?(\d+\.\d+(?:\.\d+)?(?:(?:a|b|rc|\.post|\.dev)\d+)?)\]?"
_MONTHS = "january february march april may june july august september october november december"
_MONTH = {m: i + 1 for i, m in enumerate(_MONTHS.split())}
_DATE_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_DATE_WORDS = re.compile(r"(\d{1,2})(?:st|nd|rd|th)?\s+([A-Za-z]+),?\s+(\d{4})")
_DATE_MDY = re.compile(r"([A-Za-z]+)\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})")
_HEADING = re.compile(rf"^#{{1,3}}\s+{_VERSION}\b(.*)$")
_BULLET = re.compile(r"^[*-]\s+(.*)$")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_DEPENDENCY = re.compile(
    r"^(?:require|allow|re-allow|bump|change dependency to|update requirement to)\s+"
    r"`?([A-Za-z][\w.-]*)\s*(>=|==|<|~=)\s*v?(\d[\w.]*)`?"
    r"|^bump\s+([A-Za-z][\w.-]*)\s+(?:version\s+)?to\s+v?(\d[\w.]*)",
    re.IGNORECASE,
)


def _date(text: str) -> date | None:
    if m := _DATE_ISO.search(text):
        return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if (m := _DATE_WORDS.search(text)) and m.group(2).lower() in _MONTH:
        return date(int(m.group(3)), _MONTH[m.group(2).lower()], int(m.group(1)))
    if (m := _DATE_MDY.search(text)) and m.group(1).lower() in _MONTH:
        return date(int(m.group(3)), _MONTH[m.group(1).lower()], int(m.group(2)))
    return None


def normal(text: str) -> str:
    """Markdown-free, casefolded, whitespace-collapsed text for matching."""
    text = _LINK.sub(r"\1", text)
    text = re.sub(r"[`*]", "", text)
    return " ".join(text.casefold().split()).rstrip(".")


@dataclass
class Release:
    version: str
    day: date
    bullets: list[str] = field(default_factory=list)


def releases(text: str) -> list[Release]:
    """The file's dated releases with their top-level bullets (this script's own reading)."""
    out: list[Release] = []
    current: Release | None = None
    skipping = False
    bullet: list[str] | None = None

    def close() -> None:
        nonlocal bullet
        if bullet is not None and current is not None:
            current.bullets.append(" ".join(bullet))
        bullet = None

    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            close()
            day = _date(heading.group(2))
            current = Release(heading.group(1), day) if day else None
            if current is not None:
                out.append(current)
            skipping = False
            continue
        if line.startswith("#"):
            close()
            skipping = "new contributors" in line.casefold()
            continue
        if current is None or skipping:
            continue
        if m := _BULLET.match(line):
            close()
            bullet = [m.group(1).strip()]
        elif bullet is not None and line.startswith((" ", "\t")) and line.strip():
            if _BULLET.match(line.strip()):
                close()  # a nested list: its items are details of the bullet above
            else:
                bullet.append(line.strip())
        elif not line.strip() or not line.startswith((" ", "\t")):
            close()
    close()
    return out


def package(name: str) -> str:
    """A package name normalised the way PyPI compares them."""
    return re.sub(r"[-_.]+", "-", name.casefold().strip("`.")).strip("-")


def dependencies_now(found: list[Release]) -> dict[str, str]:
    """Per dependency, the constraint of the latest release that states one ("op version")."""
    latest: dict[str, tuple[date, str]] = {}
    for release in found:
        for bullet in release.bullets:
            m = _DEPENDENCY.match(normal(bullet))
            if m is None:
                continue
            if m.group(1):
                name, constraint = m.group(1), f"{m.group(2)}{m.group(3)}"
            else:
                name, constraint = m.group(4), f"=={m.group(5)}"
            name = package(name)
            if name not in latest or release.day > latest[name][0]:
                latest[name] = (release.day, constraint.rstrip("."))
    return {name: constraint for name, (_, constraint) in sorted(latest.items())}


class _Caller:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await dispatch(self.engine, method, params)


async def ingest(engine: Engine, settings: Settings, folder: Path, group: str) -> dict[str, Any]:
    scan = scan_sources([folder], DEFAULT_GLOBS, ())
    state = SyncState(settings.home, group)
    plan = plan_sync(scan.sources, state, settings.chunk_text_advisory_max_chars, prune=False)
    started = time.perf_counter()
    stats = await run_sync(_Caller(engine), plan, state, concurrency=2)
    return {
        "episodes": stats.episodes,
        "facts": stats.facts,
        "failed": stats.files_failed,
        "seconds": round(time.perf_counter() - started, 2),
    }


async def current_facts(engine: Engine, group: str) -> list[tuple[str, str, str, str]]:
    """(source name, relation, target name, sentence) of the group's current facts."""
    edges = await dispatch(
        engine,
        "knowledge_get_edges_by_group",
        {"group_ids": [group], "include_invalidated": False},
    )
    entities = await dispatch(
        engine,
        "knowledge_query_cypher",
        {
            "query": "MATCH (e:Entity) WHERE e.group_id = $g RETURN e.uuid, e.name",
            "params": {"g": group},
        },
    )
    name = dict(entities["rows"])
    return [
        (
            name.get(e["source_node_uuid"], "?"),
            e["name"],
            name.get(e["target_node_uuid"], "?"),
            e["fact"],
        )
        for e in edges["edges"]
    ]


def _names_release(text: str, project: str, version: str) -> bool:
    low = text.casefold()
    return (
        project.casefold() in low
        and re.search(rf"(?<![\w.]){re.escape(version)}(?![\w])", low) is not None
    )


async def what_changed(
    engine: Engine, group: str, project: str, found: list[Release], window: tuple[str, str]
) -> dict[str, Any]:
    since, until = (date.fromisoformat(w) for w in window)
    inside = [r for r in found if since <= r.day < until]
    expected = [(r.version, normal(b)) for r in inside for b in r.bullets]
    changes = await dispatch(
        engine,
        "knowledge_get_changes",
        {"since": window[0], "until": window[1], "group_ids": [group], "num_results": 100000},
    )
    rows = [c for c in changes["changes"] if c["kind"] in ("started", "ended")]
    matched: set[int] = set()
    right_started: list[dict[str, Any]] = []
    wrong: list[str] = []
    release_rows = 0
    naming = 0
    started_rows = [c for c in rows if c["kind"] == "started"]
    for row in started_rows:
        text = row["fact"]["fact"]
        low = normal(text)
        own = [r for r in inside if _names_release(text, project, r.version)]
        naming += bool(own)
        hits = [
            i
            for i, (version, bullet) in enumerate(expected)
            if any(r.version == version for r in own) and bullet[:80] in low
        ]
        if hits:
            matched.update(hits)
            right_started.append(row)
        elif own and row["fact"]["name"].upper() == "RELEASED":
            release_rows += 1
            right_started.append(row)
        else:
            wrong.append(f"started {text[:160]}")
    right_ended = 0
    for row in rows:
        if row["kind"] != "ended":
            continue
        ends = {row["fact"]["source_node_uuid"], row["fact"]["target_node_uuid"]}
        if any(
            r["at"] == row["at"]
            and ends & {r["fact"]["source_node_uuid"], r["fact"]["target_node_uuid"]}
            for r in right_started
        ):
            right_ended += 1
        else:
            wrong.append(f"ended {row['fact']['fact'][:160]}")
    right = len(right_started) + right_ended
    missed = [f"{v}: {b[:160]}" for i, (v, b) in enumerate(expected) if i not in matched]
    return {
        "window": list(window),
        "releases": [r.version for r in inside],
        "bullets": len(expected),
        "rows": len(rows),
        "right_rows": right,
        "release_rows": release_rows,
        "recall": round(len(matched) / len(expected), 3) if expected else None,
        "precision": round(right / len(rows), 3) if rows else None,
        "started_rows_naming_release": round(naming / len(started_rows), 3)
        if started_rows
        else None,
        "_missed": missed,
        "_wrong": wrong,
    }


def what_is_true_now(
    facts: list[tuple[str, str, str, str]], project: str, found: list[Release]
) -> dict[str, Any]:
    own = [f for f in facts if f[0].casefold() == project.casefold()]
    pythons = {
        m.group(1)
        for _, predicate, target, _ in own
        if (m := re.fullmatch(r"python (3\.\d+)", target.casefold()))
        and "SUPPORT" in predicate.upper()
        and not re.search("DROP|REMOV|END", predicate.upper())
    }
    expected_deps = dependencies_now(found)
    deps: dict[str, Any] = {}
    for name, constraint in expected_deps.items():
        current = [
            f[3]
            for f in own
            if package(f[2]) == name and re.search("REQUIRE|DEPEND|CONSTRAINT", f[1].upper())
        ]
        flat = [normal(t).replace(" ", "") for t in current]
        ok = len(current) == 1 and constraint.replace(" ", "") in flat[0]
        deps[name] = {"expected": constraint, "current": current, "right": ok}
    return {
        "python_expected": sorted(PYTHON_NOW[project], key=lambda v: int(v.split(".")[1])),
        "python_current": sorted(pythons, key=lambda v: int(v.split(".")[1])),
        "python_right": pythons == PYTHON_NOW[project],
        "dependencies": deps,
        "dependencies_right": sum(d["right"] for d in deps.values()),
        "dependencies_expected": len(deps),
    }


async def run(names: list[str], details: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.for_home(Path(tmp) / ".lcg", extractor="heuristic", embedder="hash")
        engine = open_engine(settings)
        try:
            for name in names:
                project, file_name = FILES[name]
                folder = Path(tmp) / "repos" / project
                folder.mkdir(parents=True)
                shutil.copyfile(DATA / name, folder / file_name)
                found = releases((DATA / name).read_text(encoding="utf-8"))
                group = f"cl-{project}"
                result: dict[str, Any] = {"releases": len(found)}
                result["ingest"] = await ingest(engine, settings, folder, group)
                result["changed"] = [
                    await what_changed(engine, group, project, found, w) for w in WINDOWS[project]
                ]
                facts = await current_facts(engine, group)
                result["now"] = what_is_true_now(facts, project, found)
                if not details:
                    for w in result["changed"]:
                        w["missed"] = len(w.pop("_missed"))
                        w["wrong"] = len(w.pop("_wrong"))
                    for d in result["now"]["dependencies"].values():
                        d["current"] = len(d["current"])
                else:
                    for w in result["changed"]:
                        w["missed"] = w.pop("_missed")
                        w["wrong"] = w.pop("_wrong")
                out[project] = result
        finally:
            engine.close()
    return out


def summary(per_file: dict[str, Any]) -> dict[str, Any]:
    bullets = sum(w["bullets"] for f in per_file.values() for w in f["changed"])
    rows = sum(w["rows"] for f in per_file.values() for w in f["changed"])
    right = sum(w["right_rows"] for f in per_file.values() for w in f["changed"])
    recalled = sum(
        round((w["recall"] or 0) * w["bullets"]) for f in per_file.values() for w in f["changed"]
    )
    deps = defaultdict(int)
    for f in per_file.values():
        deps["right"] += f["now"]["dependencies_right"]
        deps["expected"] += f["now"]["dependencies_expected"]
    return {
        "changed_recall": round(recalled / bullets, 3) if bullets else None,
        "changed_precision": round(right / rows, 3) if rows else None,
        "python_now_right": [p for p, f in per_file.items() if f["now"]["python_right"]],
        "dependencies_now_right": f"{deps['right']}/{deps['expected']}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--details", action="store_true", help="list missed bullets, wrong rows")
    parser.add_argument("--file", action="append", choices=sorted(FILES), help="only these")
    args = parser.parse_args()
    names = args.file or list(FILES)
    started = time.perf_counter()
    per_file = anyio.run(run, names, args.details)
    result = {
        "bench": "changelogs",
        "extractor": "heuristic",
        "summary": summary(per_file),
        "files": per_file,
        "seconds": round(time.perf_counter() - started, 2),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
