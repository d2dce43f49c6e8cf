"""The workspace corrections file (docs/api.md §curation): validating it and applying it.

`<LIMINIS_WORKSPACE_ROOT>/.liminis/knowledge-corrections.yaml` holds
`{corrections: [{id, type, canonical?, canonical_uuid?, aliases?, edge_uuid?, applied_at?}]}`.
`same_as` merges the named aliases into the canonical (lcg.curation.merge, in the canonical's group);
`retract` invalidates one fact. Each applied entry gets `applied_at: "<RFC 3339>"` patched into
the file in place — the rest of the text (comments, order, quoting) is kept — written through a
`.yaml.tmp` sibling and a rename. Every graph change is an ordinary WAL batch of the group it
touches.

Each entry is its own pass under the write lock (one commit, planned from the graph as it is
then). In server mode an entry whose commit lost the race to another process is planned again
from the caught-up graph (`follow.retrying`); if it keeps losing, the entries before it stay
applied and are stamped, and `ConflictError` names the entry that was not applied.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import yaml

from lcg.curation.merge import MergeRequest, exact_name_matches, merge_locked
from lcg.engine.follow import retrying
from lcg.errors import ConfigError, ConflictError, NotFoundError
from lcg.fsmodes import write_private
from lcg.timeutil import now
from lcg.wal.changes import FactInvalidate, encode

if TYPE_CHECKING:
    from lcg.engine import Engine, Writer

__all__ = ["apply_corrections", "corrections_path", "stamp_applied", "validate_corrections"]

_RELATIVE = Path(".liminis") / "knowledge-corrections.yaml"


def corrections_path(engine: Engine) -> Path:
    """The corrections file of the configured workspace.

    Raises:
        ConfigError: LIMINIS_WORKSPACE_ROOT is not set.
    """
    root = engine.settings.workspace_root
    if not root:
        raise ConfigError("LIMINIS_WORKSPACE_ROOT not set; corrections unavailable")
    return Path(root).expanduser().resolve() / _RELATIVE


@dataclass(frozen=True)
class _Entry:
    index: int
    raw: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.raw.get("id", f"#{self.index}"))

    @property
    def kind(self) -> str:
        return str(self.raw.get("type", "")).lower()

    def text(self, key: str) -> str | None:
        value = self.raw.get(key)
        return str(value) if value not in (None, "") else None

    @property
    def aliases(self) -> list[str]:
        value = self.raw.get("aliases")
        return [str(a) for a in value] if isinstance(value, list) else []


def _load(path: Path) -> tuple[str, list[_Entry]]:
    """The file's text and its entries. Raises OSError or ValueError (yaml.YAMLError)."""
    text = path.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if data is None:
        return text, []
    if not isinstance(data, dict) or not isinstance(data.get("corrections", []), list):
        raise ValueError("expected a mapping with a 'corrections' list")
    items = data.get("corrections") or []
    if not all(isinstance(i, dict) for i in items):
        raise ValueError("every correction must be a mapping")
    return text, [_Entry(i, item) for i, item in enumerate(items)]


def _cycles(entries: list[_Entry]) -> list[str]:
    """`Alias cycle: a -> b -> a` for each cycle of alias -> canonical among same_as entries."""
    edges: dict[str, str] = {}
    for e in entries:
        target = e.text("canonical") or e.text("canonical_uuid")
        if e.kind == "same_as" and target:
            for alias in e.aliases:
                edges.setdefault(alias, target)
    issues: list[str] = []
    reported: set[str] = set()
    for start in sorted(edges):
        path = [start]
        while path[-1] in edges and edges[path[-1]] not in path:
            path.append(edges[path[-1]])
        if path[-1] in edges and edges[path[-1]] in path:
            loop = path[path.index(edges[path[-1]]) :]
            if not reported.intersection(loop):
                reported.update(loop)
                issues.append("Alias cycle: " + " -> ".join([*loop, loop[0]]))
    return issues


async def validate_corrections(engine: Engine) -> dict[str, Any]:
    """`knowledge_validate_corrections`: check the file against the graph; change nothing."""
    path = corrections_path(engine)

    def run() -> dict[str, Any]:
        if not path.is_file():
            return _report(True, "No corrections file found", 0, 0, [])
        try:
            _, entries = _load(path)
        except (OSError, ValueError) as exc:
            return _report(False, "Failed to read corrections file", 0, 0, [str(exc)])
        issues: list[str] = []
        with engine.reader() as conn:
            for e in entries:
                where = f"Correction '{e.id}'"
                if e.kind == "same_as":
                    if not (e.text("canonical") or e.text("canonical_uuid")):
                        issues.append(f"{where}: same_as needs canonical or canonical_uuid")
                    if not e.aliases:
                        issues.append(f"{where}: same_as needs a non-empty aliases list")
                    uuid = e.text("canonical_uuid")
                    if uuid and conn.entity_by_uuid(uuid) is None:
                        issues.append(f"{where}: canonical_uuid {uuid} not found in graph")
                elif e.kind == "retract":
                    edge = e.text("edge_uuid")
                    if not edge:
                        issues.append(f"{where}: retract needs edge_uuid")
                    elif not conn.facts_with_hops(uuids=[edge]):
                        issues.append(f"{where}: edge_uuid {edge} not found in graph")
                else:
                    issues.append(f"{where}: unknown type '{e.raw.get('type')}'")
        issues += _cycles(entries)
        message = "All corrections are valid" if not issues else f"{len(issues)} issue(s) found"
        unapplied = sum(1 for e in entries if e.raw.get("applied_at") in (None, ""))
        return _report(not issues, message, len(entries), unapplied, issues)

    return await anyio.to_thread.run_sync(run)


def _report(
    valid: bool, message: str, total: int, unapplied: int, issues: list[str]
) -> dict[str, Any]:
    return {
        "valid": valid,
        "message": message,
        "total_corrections": total,
        "unapplied_corrections": unapplied,
        "issues": issues,
        "warnings": [],
    }


async def apply_corrections(engine: Engine, dry_run: bool) -> dict[str, Any]:
    """`knowledge_apply_corrections`: apply the unapplied entries, then stamp them in the file.

    Raises:
        ConflictError: server mode, an entry kept losing the race to other processes' commits
            (nothing of it applied; the entries before it are applied and stamped).
    """
    path = corrections_path(engine)

    def run() -> dict[str, Any]:
        if not path.is_file():
            return _applied(True, 0, 0, [], [], "No corrections file found")
        try:
            text, entries = _load(path)
        except (OSError, ValueError) as exc:
            return _applied(False, 0, 0, [f"Failed to read corrections file: {exc}"], [])
        if not entries:
            return _applied(True, 0, 0, [], [], "Corrections file is empty")
        applied: list[int] = []
        errors: list[str] = []
        details: list[dict[str, str]] = []
        skipped = 0
        for e in entries:
            if e.raw.get("applied_at") not in (None, ""):
                skipped += 1
                continue
            try:
                # One pass per entry, so a lost race (server mode) plans that entry again.
                retrying(functools.partial(_apply_pass, engine, e, dry_run))
            except (NotFoundError, ValueError) as exc:
                message = exc.message if isinstance(exc, NotFoundError) else str(exc)
                errors.append(f"Correction '{e.id}': {message}")
                continue
            except ConflictError as exc:
                if applied:  # those entries are in the graph: say so in the file
                    stamp_applied(path, text, applied, now().isoformat())
                raise ConflictError(
                    f"correction '{e.id}' was not applied: {exc.message}; the {len(applied)} "
                    f"entries before it were applied and stamped, apply the corrections again"
                ) from exc
            details.append({"id": e.id, "action": f"dry_run:{e.kind}" if dry_run else e.kind})
            if not dry_run:
                applied.append(e.index)
        if applied:
            stamp_applied(path, text, applied, now().isoformat())
        return _applied(not errors, len(applied), skipped, errors, details)

    return await anyio.to_thread.run_sync(run)


def _applied(
    success: bool,
    applied: int,
    skipped: int,
    errors: list[str],
    details: list[dict[str, str]],
    message: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "success": success,
        "applied": applied,
        "skipped": skipped,
        "errors": errors,
        "details": details,
    }
    if message is not None:
        out["message"] = message
    return out


def _apply_pass(engine: Engine, e: _Entry, dry_run: bool) -> None:
    """One entry in its own pass under the write lock: each entry is one commit (a retract's
    invalidation or a merge), planned from the graph as it is then, so in server mode a commit
    that lost the race to another process is planned again from the caught-up graph
    (`follow.retrying`, by the caller)."""
    with engine.writer() as w:
        _apply_one(engine, w, e, dry_run)


def _apply_one(engine: Engine, w: Writer, e: _Entry, dry_run: bool) -> None:
    """Apply (or check, in a dry run) one entry, inside the pass holding the writer `w`.

    Raises:
        NotFoundError, ValueError: the entry cannot be applied; nothing was written for it.
    """
    with w.connection() as conn:
        if e.kind == "retract":
            edge = e.text("edge_uuid")
            if not edge:
                raise ValueError("retract needs edge_uuid")
            fact = conn.facts_by_uuids([edge]).get(edge)
            if fact is None:
                raise NotFoundError("edge", edge, f"edge not found: {edge}")
            if not dry_run:
                at = now()
                op = encode(FactInvalidate(edge, at, at))
                w.commit([(fact.group_id, [op])])
            return
        if e.kind != "same_as":
            raise ValueError(f"unknown type '{e.raw.get('type')}'")
        uuid, name = e.text("canonical_uuid"), e.text("canonical")
        if uuid:
            canonical = conn.entity_by_uuid(uuid)
        elif name:
            rows = conn.rows(
                "MATCH (x:Entity) WHERE x.name = $n AND NOT 'Merged' IN x.labels "
                "RETURN x.uuid ORDER BY x.created_at, x.uuid LIMIT 1",
                {"n": name},
            )
            canonical = conn.entity_by_uuid(rows[0][0]) if rows else None
        else:
            raise ValueError("same_as needs canonical or canonical_uuid")
        if canonical is None:
            raise NotFoundError(
                "entity", uuid or name or "", f"canonical not found: {uuid or name}"
            )
        if not e.aliases:
            raise ValueError("same_as needs a non-empty aliases list")
        for alias in e.aliases:
            if not exact_name_matches(conn, engine, canonical.group_id, alias):
                raise NotFoundError(
                    "entity", alias, f"alias '{alias}' not found in group '{canonical.group_id}'"
                )
    result = merge_locked(
        engine,
        w,
        MergeRequest(
            canonical_uuid=canonical.uuid,
            alias_names=tuple(e.aliases),
            group_id=canonical.group_id,
            dry_run=dry_run,
        ),
    )
    if result["errors"]:
        raise ValueError("; ".join(result["errors"]))


def stamp_applied(path: Path, text: str, indexes: list[int], stamp: str) -> None:
    """Add or replace `applied_at` in the given entries, keeping the rest of the text."""
    root = yaml.compose(text)
    assert isinstance(root, yaml.MappingNode)
    items = next(v for k, v in root.value if k.value == "corrections")
    assert isinstance(items, yaml.SequenceNode)
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement), applied back to front
    for index in indexes:
        node = items.value[index]
        assert isinstance(node, yaml.MappingNode)
        existing = [v for k, v in node.value if k.value == "applied_at"]
        if existing:
            edits.append((existing[0].start_mark.index, existing[0].end_mark.index, f'"{stamp}"'))
        elif node.flow_style:
            end = node.end_mark.index - 1  # the closing brace
            edits.append((end, end, f', applied_at: "{stamp}"'))
        else:
            indent = " " * node.value[0][0].start_mark.column
            last = node.value[-1][1].end_mark.index
            line_start = text.rfind("\n", 0, last) + 1
            if not text[line_start:last].strip():  # a block value ends where the next begins
                at = line_start
            else:
                newline = text.find("\n", last)
                at = len(text) if newline < 0 else newline + 1
            prefix = "" if at == 0 or text[at - 1] == "\n" else "\n"
            edits.append((at, at, f'{prefix}{indent}applied_at: "{stamp}"\n'))
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    tmp = path.with_suffix(".yaml.tmp")
    write_private(tmp, text)
    tmp.replace(path)
