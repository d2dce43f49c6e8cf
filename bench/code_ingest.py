"""Code graph benchmark: structure ingest of lcg's own src/, re-runs, and history.

1. Full structure ingest of a copy of this repository's `src/` into a fresh workspace (the
   hash embedder, as the tests use: no model time is measured), `--runs` times, median.
2. The same run again with nothing changed (one hash per file, no write).
3. One changed file (a function appended to one module): only that file is parsed and written.
4. The whole git history of this repository (`--history all`, or `--history N`), one episode per
   commit, into a fresh workspace: seconds, seconds per commit, and the process's CPU seconds
   (a shared machine stretches the wall time, much less the CPU time).
5. WAL bytes per symbol after (1), and whether any body line reached the WAL.
6. Public code from PyPI: the sources of a few well-known pure-Python packages, each ingested
   into its own fresh workspace (structure: seconds, files, symbols, facts, WAL bytes per
   symbol, files skipped, an unchanged re-run). By default the packages are the ones installed
   in this environment as lcg's dependencies (their wheels came from the package index; the
   versions are printed); with `--download` each is fetched from the index by `pip download`
   (a wheel, no dependencies) into a temporary directory and unpacked there.

Targets: (1) <= 10 s, (2) and (3) <= 1 s, (4) <= 60 s. The machine may be shared:
medians of `--runs`. Prints one JSON object. Run:
    .venv/bin/python bench/code_ingest.py [--runs 3] [--history all] [--packages rich,click]
        [--download]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio

from lcg import Settings, open_engine
from lcg.code.history import ingest_history
from lcg.code.ingest import ingest_tree

REPO = Path(__file__).resolve().parent.parent
GROUP = "code"
# A line from a function body of src/ that must never reach the WAL.
BODY_PROBE = b"out.append(ch)"


def _wal_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in (home / "wal").rglob("*.jsonl"))


def _wal_text(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (home / "wal").rglob("*.jsonl"))


async def _one_run(
    engine: Any,
    root: Path,
    home: Path,
    full: list[float],
    unchanged: list[float],
    one_file: list[float],
) -> dict[str, Any]:
    started = time.perf_counter()
    first = await ingest_tree(engine, root, GROUP)
    full.append(time.perf_counter() - started)
    wal = _wal_bytes(home)
    started = time.perf_counter()
    again = await ingest_tree(engine, root, GROUP)
    unchanged.append(time.perf_counter() - started)
    target = root / "lcg" / "timeutil.py"
    target.write_text(target.read_text() + "\n\ndef bench_added(x: int) -> int:\n    return x\n")
    started = time.perf_counter()
    changed = await ingest_tree(engine, root, GROUP)
    one_file.append(time.perf_counter() - started)
    return {
        "first": first.to_dict(),
        "again_written": again.batch is not None,
        "changed": changed.to_dict(),
        "wal_bytes": wal,
    }


def structure(runs: int) -> dict[str, Any]:
    full: list[float] = []
    unchanged: list[float] = []
    one_file: list[float] = []
    last: dict[str, Any] = {}
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "src"
            shutil.copytree(REPO / "src", root, ignore=shutil.ignore_patterns("__pycache__"))
            home = Path(tmp) / ".lcg"
            engine = open_engine(Settings.for_home(home, embedder="hash"))
            try:
                last = anyio.run(_one_run, engine, root, home, full, unchanged, one_file)
                last["body_line_in_wal"] = BODY_PROBE in _wal_text(home)
            finally:
                engine.close()
    first = last["first"]
    return {
        "files": first["files_seen"],
        "symbols": first["symbols_added"],
        "facts": first["facts_started"],
        "unresolved_calls": first["unresolved_calls"],
        "skipped": first["skipped"],
        "full_s": round(statistics.median(full), 3),
        "full_runs_s": [round(x, 3) for x in full],
        "unchanged_s": round(statistics.median(unchanged), 3),
        "unchanged_wrote": last["again_written"],
        "one_file_s": round(statistics.median(one_file), 3),
        "one_file_parsed": last["changed"]["files_parsed"],
        "one_file_symbols_added": last["changed"]["symbols_added"],
        "wal_bytes": last["wal_bytes"],
        "wal_bytes_per_symbol": round(last["wal_bytes"] / max(first["symbols_added"], 1), 1),
        "body_line_in_wal": last["body_line_in_wal"],
    }


def history(selection: str) -> dict[str, Any]:
    commits = int(
        subprocess.run(
            ["git", "-C", str(REPO), "rev-list", "--first-parent", "--count", "HEAD"],
            capture_output=True,
            check=True,
        ).stdout
    )
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / ".lcg"
        engine = open_engine(Settings.for_home(home, embedder="hash"))
        try:
            started, cpu_started = time.perf_counter(), time.process_time()
            report = anyio.run(ingest_history, engine, REPO, GROUP, selection)
            seconds = time.perf_counter() - started
            cpu = time.process_time() - cpu_started
            started = time.perf_counter()
            again = anyio.run(ingest_history, engine, REPO, GROUP, selection)
            rerun = time.perf_counter() - started
            wal = _wal_bytes(home)
        finally:
            engine.close()
    return {
        "selection": selection,
        "first_parent_commits_in_repo": commits,
        "commits_walked": report.commits_walked,
        "episodes": report.episodes,
        "symbols_added": sum(len(c["added"]) for c in report.per_commit),
        "symbols_removed": sum(len(c["removed"]) for c in report.per_commit),
        "signatures_changed": sum(len(c["signature_changed"]) for c in report.per_commit),
        "files_skipped": len(report.skipped),
        "seconds": round(seconds, 3),
        "seconds_per_commit": round(seconds / max(report.commits_walked, 1), 4),
        # CPU seconds of this process (all its threads): less sensitive to a shared machine.
        "cpu_s": round(cpu, 3),
        "rerun_commits_walked": again.commits_walked,
        "rerun_s": round(rerun, 3),
        "wal_bytes": wal,
    }


# Well-known pure-Python packages lcg's environment installs anyway (rich: the CLI; pygments:
# rich's highlighter; click, starlette, anyio: the CLI and the service).
PACKAGES = ("rich", "pygments", "click", "starlette", "anyio")


def _copy_installed(name: str, into: Path) -> str:
    """The installed distribution's .py files under `into`; returns its version."""
    dist = metadata.distribution(name)
    for file in dist.files or []:
        if file.suffix == ".py" and ".." not in file.parts:
            target = into / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file.locate(), target)
    return dist.version


def _download(name: str, version: str, into: Path) -> str:
    """`pip download` the package's wheel (no dependencies) and unpack its .py files."""
    wheels = into.parent / f"{name}-wheel"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"),
            *("-d", str(wheels), f"{name}=={version}"),
        ],
        check=True,
    )
    (wheel,) = wheels.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.endswith(".py") and ".." not in member:
                archive.extract(member, into)
    return version


def pypi(names: list[str], download: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"source": "pip download (wheels)" if download else "site-packages"}
    totals = {"files": 0, "symbols": 0, "wal_bytes": 0, "seconds": 0.0}
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / name
            root.mkdir()
            version = metadata.version(name)
            if download:
                _download(name, version, root)
            else:
                _copy_installed(name, root)
            source_bytes = sum(p.stat().st_size for p in root.rglob("*.py"))
            home = Path(tmp) / ".lcg"
            engine = open_engine(Settings.for_home(home, embedder="hash"))
            try:
                started = time.perf_counter()
                first = anyio.run(ingest_tree, engine, root, GROUP)
                seconds = time.perf_counter() - started
                started = time.perf_counter()
                again = anyio.run(ingest_tree, engine, root, GROUP)
                rerun = time.perf_counter() - started
                wal = _wal_bytes(home)
            finally:
                engine.close()
        report = first.to_dict()
        symbols = report["symbols_added"]
        out[name] = {
            "version": version,
            "files": report["files_seen"],
            "source_bytes": source_bytes,
            "symbols": symbols,
            "facts": report["facts_started"],
            "unresolved_calls": report["unresolved_calls"],
            "skipped": len(report["skipped"]),
            "skipped_reasons": sorted({s["reason"].split(" (")[0] for s in report["skipped"]}),
            "seconds": round(seconds, 3),
            "symbols_per_s": round(symbols / seconds, 1),
            "unchanged_s": round(rerun, 3),
            "unchanged_wrote": again.batch is not None,
            "wal_bytes": wal,
            "wal_bytes_per_symbol": round(wal / max(symbols, 1), 1),
        }
        totals["files"] += report["files_seen"]
        totals["symbols"] += symbols
        totals["wal_bytes"] += wal
        totals["seconds"] += seconds
    out["total"] = {
        **totals,
        "seconds": round(totals["seconds"], 3),
        "wal_bytes_per_symbol": round(totals["wal_bytes"] / max(totals["symbols"], 1), 1),
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--history", default="all", help="'all', N, A..B, or 'none'")
    parser.add_argument(
        "--packages", default=",".join(PACKAGES), help="PyPI packages, comma-separated; '' none"
    )
    parser.add_argument(
        "--download", action="store_true", help="fetch the packages' wheels with pip download"
    )
    parser.add_argument("--no-structure", action="store_true", help="skip lcg's own src/")
    args = parser.parse_args()
    out: dict[str, Any] = {}
    if not args.no_structure:
        out["structure"] = structure(args.runs)
    if args.history != "none":
        out["history"] = history(args.history)
    if args.packages:
        out["pypi"] = pypi([n for n in args.packages.split(",") if n], args.download)
    out["targets"] = {"full_s": 10, "unchanged_s": 1, "one_file_s": 1, "history_s": 60}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
