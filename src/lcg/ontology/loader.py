"""Finding, parsing and caching ontology files; the drift and `.wal-ontology.json` sidecars.

Where files live (docs/api.md §ingest-pipeline, the ontology file, §layout), with `<root>` =
`$LIMINIS_WORKSPACE_ROOT/.lcg` when that is set, else lcg's home directory (`.lcg`):

    <root>/ontology.yaml                    the workspace ontology (legacy: <root>/../.graphiti/)
    <root>/ontology/<enc(group_id)>.yaml    a group's own ontology; replaces the workspace one
    <root>/ontology-hash.json               what the last ingest/rebuild ran with (drift)

A group resolves to its own file if that exists and is valid, else to the workspace file, else to
no ontology. A malformed file never fails a call: it is logged (once per version of the file) and
resolution falls through. Parsed files are cached by (mtime, size), so an edit is seen at the next
use without a restart.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from lcg.config import Settings
from lcg.errors import InvalidRequestError
from lcg.fsmodes import open_private, private_dir
from lcg.ontology.model import (
    EMPTY_ONTOLOGY,
    EntityType,
    Ontology,
    RelationType,
    normalize_entity_type,
    normalize_relation_type,
)
from lcg.wal.layout import encode_group, group_dir

__all__ = [
    "HASH_FILE",
    "WAL_ONTOLOGY_FILE",
    "OntologyError",
    "group_ontology_path",
    "load_ontology",
    "load_workspace_ontology",
    "ontology_root",
    "ontology_status",
    "parse_ontology",
    "record_ingested_ontology",
    "write_wal_ontology",
]

logger = logging.getLogger(__name__)

HASH_FILE = "ontology-hash.json"
WAL_ONTOLOGY_FILE = ".wal-ontology.json"
_ENTITY_KEYS = frozenset({"name", "parent", "description", "aliases", "keywords"})
_RELATION_KEYS = frozenset(
    {
        "name",
        "description",
        "aliases",
        "keywords",
        "source_type",
        "target_type",
        "source_types",
        "target_types",
        "cardinality",
    }
)

_cache_lock = threading.Lock()
_cache: dict[Path, tuple[tuple[int, int, int], Ontology | None]] = {}


class OntologyError(ValueError):
    """An ontology file is malformed (the loader logs it and falls back; never raised to callers)."""


# -- locations ------------------------------------------------------------------------------


def ontology_root(settings: Settings) -> Path:
    """The directory holding `ontology.yaml`, `ontology/` and `ontology-hash.json`."""
    if settings.workspace_root:
        return Path(settings.workspace_root).expanduser().resolve() / ".lcg"
    return settings.home


def _workspace_candidates(settings: Settings) -> list[Path]:
    root = ontology_root(settings)
    return [root / "ontology.yaml", root.parent / ".graphiti" / "ontology.yaml"]


def group_ontology_path(settings: Settings, group_id: str) -> Path | None:
    """Where the group's own ontology would be (None: the id cannot name a file)."""
    try:
        name = encode_group(group_id)
    except InvalidRequestError:
        return None
    return ontology_root(settings) / "ontology" / f"{name}.yaml"


# -- parsing --------------------------------------------------------------------------------


def _text(entry: dict[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if value is None:
        return ""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise OntologyError(f"{where}: {key} must be a string")
    return str(value).strip()


def _names(entry: dict[str, Any], keys: tuple[str, ...], where: str) -> tuple[str, ...]:
    out: list[str] = []
    for key in keys:
        value = entry.get(key)
        if value is None:
            continue
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
            raise OntologyError(f"{where}: {key} must be a string or a list of strings")
        out += [v.strip() for v in items if v.strip()]
    return tuple(dict.fromkeys(out))


def _entries(doc: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise OntologyError(f"{key} must be a list")
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise OntologyError(f"{key}[{i}] must be a mapping with a name")
    return value


def _warn_unknown(entry: dict[str, Any], known: frozenset[str], where: str, path: str) -> None:
    unknown = sorted(str(k) for k in entry if k not in known)
    if unknown:
        logger.warning("ontology %s: %s: ignoring unknown keys %s", path, where, unknown)


def _entity_types(doc: dict[str, Any], path: str) -> list[EntityType]:
    types: dict[str, EntityType] = {}
    for i, entry in enumerate(_entries(doc, "entity_types")):
        where = f"entity_types[{i}]"
        name = normalize_entity_type(_text(entry, "name", where))
        if not name:
            raise OntologyError(f"{where}: name is required")
        _warn_unknown(entry, _ENTITY_KEYS, where, path)
        if name == "Entity":
            logger.warning("ontology %s: %s: Entity is implicit; entry ignored", path, where)
            continue
        if name in types:
            logger.warning("ontology %s: %s: duplicate entity type %s ignored", path, where, name)
            continue
        parent = normalize_entity_type(_text(entry, "parent", where)) or None
        types[name] = EntityType(
            name=name,
            parent=parent if parent != "Entity" else None,
            description=_text(entry, "description", where),
            aliases=_names(entry, ("aliases",), where),
            keywords=tuple(k.lower() for k in _names(entry, ("keywords",), where)),
        )
    for name, t in list(types.items()):
        if t.parent is not None and t.parent not in types:
            logger.warning(
                "ontology %s: entity type %s: undeclared parent %s cleared", path, name, t.parent
            )
            types[name] = EntityType(name, None, t.description, t.aliases, t.keywords)
    for name in types:
        seen = [name]
        current = types[name]
        while current.parent is not None:
            if current.parent in seen:
                logger.warning(
                    "ontology %s: entity type hierarchy cycle %s; cut at %s",
                    path,
                    " -> ".join([*seen, current.parent]),
                    current.name,
                )
                types[current.name] = EntityType(
                    current.name, None, current.description, current.aliases, current.keywords
                )
                break
            seen.append(current.parent)
            current = types[current.parent]
    return list(types.values())


def _relation_types(doc: dict[str, Any], path: str) -> list[RelationType]:
    types: dict[str, RelationType] = {}
    for i, entry in enumerate(_entries(doc, "relation_types")):
        where = f"relation_types[{i}]"
        name = normalize_relation_type(_text(entry, "name", where))
        if not name:
            raise OntologyError(f"{where}: name is required")
        _warn_unknown(entry, _RELATION_KEYS, where, path)
        cardinality = _text(entry, "cardinality", where).lower() or "many"
        if cardinality not in ("many", "one"):
            raise OntologyError(f"{where}: cardinality must be 'many' or 'one'")
        if name in types:
            logger.warning("ontology %s: %s: duplicate relation type %s ignored", path, where, name)
            continue
        ends = {
            side: tuple(
                normalize_entity_type(t)
                for t in _names(entry, (f"{side}_type", f"{side}_types"), where)
            )
            for side in ("source", "target")
        }
        types[name] = RelationType(
            name=name,
            description=_text(entry, "description", where),
            aliases=_names(entry, ("aliases",), where),
            source_types=ends["source"],
            target_types=ends["target"],
            cardinality="one" if cardinality == "one" else "many",
            keywords=tuple(k.lower() for k in _names(entry, ("keywords",), where)),
        )
    return list(types.values())


def parse_ontology(text: str, path: str = "<string>") -> Ontology:
    """Parse ontology YAML. Structural errors raise; repairable ones are logged and repaired
    (duplicate names dropped, undeclared parents cleared, hierarchy cycles cut).

    Returns `EMPTY_ONTOLOGY` for an empty file or one that declares no type.

    Raises:
        OntologyError: the text is not valid YAML or not a valid ontology.
    """
    if not text.strip():
        return EMPTY_ONTOLOGY
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise OntologyError(f"not valid YAML: {exc}") from None
    if doc is None:
        return EMPTY_ONTOLOGY
    if not isinstance(doc, dict):
        raise OntologyError("the top level must be a mapping")
    _warn_unknown(doc, frozenset({"mode", "entity_types", "relation_types"}), "top level", path)
    mode = doc.get("mode")
    mode = "open" if mode is None else mode
    if mode not in ("open", "strict"):
        raise OntologyError("mode must be 'open' or 'strict'")
    entities = _entity_types(doc, path)
    relations = _relation_types(doc, path)
    if not entities and not relations:
        return EMPTY_ONTOLOGY
    return Ontology(
        "strict" if mode == "strict" else "open", tuple(entities), tuple(relations), path
    )


# -- loading --------------------------------------------------------------------------------


def _load_file(path: Path) -> Ontology | None:
    """The ontology in `path`; None if it is missing, malformed or declares nothing."""
    try:
        st = path.stat()
    except OSError:
        return None
    key = (st.st_mtime_ns, st.st_size, st.st_ino)
    with _cache_lock:
        cached = _cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
    try:
        parsed: Ontology | None = parse_ontology(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, OntologyError) as exc:
        logger.warning("ontology %s is unusable (%s); falling back", path, exc)
        parsed = None
    if parsed is not None and not parsed.present:
        parsed = None
    with _cache_lock:
        _cache[path] = (key, parsed)
    return parsed


def load_workspace_ontology(settings: Settings) -> Ontology:
    """The workspace-wide ontology (`EMPTY_ONTOLOGY` if none is usable)."""
    for path in _workspace_candidates(settings):
        if path.exists():
            return _load_file(path) or EMPTY_ONTOLOGY
    return EMPTY_ONTOLOGY


def load_ontology(settings: Settings, group_id: str) -> Ontology:
    """The ontology governing `group_id`: its own file if usable, else the workspace one.

    Never raises for a bad file: it is logged and skipped. `EMPTY_ONTOLOGY` means none.
    """
    path = group_ontology_path(settings, group_id)
    own = _load_file(path) if path is not None else None
    return own if own is not None else load_workspace_ontology(settings)


# -- sidecars -------------------------------------------------------------------------------


def _write_json(path: Path, value: dict[str, Any]) -> None:
    """Write pretty JSON atomically: a unique temp file in the same directory, then rename."""
    private_dir(path.parent)
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        with os.fdopen(open_private(tmp, flags), "w", encoding="utf-8") as fh:
            json.dump(value, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _best_effort(what: str, write: Callable[[], None]) -> None:
    try:
        write()
    except OSError as exc:
        logger.warning("could not write %s: %s", what, exc)


def write_wal_ontology(settings: Settings, group_id: str, ontology: Ontology) -> None:
    """Record in the group's WAL directory which ontology guided its extraction
    (docs/api.md §wal-ontology).

    Informational only, never read back; a failure is logged, not raised.
    """
    try:
        directory = group_dir(settings.wal_dir, group_id)
    except InvalidRequestError:
        return
    if not directory.is_dir():  # the stream does not exist yet: nothing to describe
        return
    path = directory / WAL_ONTOLOGY_FILE
    _best_effort(str(path), lambda: _write_json(path, ontology.summary()))


def record_ingested_ontology(settings: Settings) -> None:
    """Write the drift sidecar for the current workspace ontology: what the graph now reflects.

    Called after a successful ingest and after a non-dry-run rebuild; clears `drifted`.
    """
    path = ontology_root(settings) / HASH_FILE
    summary = load_workspace_ontology(settings).summary()
    _best_effort(str(path), lambda: _write_json(path, summary))


def _recorded(settings: Settings) -> dict[str, Any] | None:
    path = ontology_root(settings) / HASH_FILE
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) and isinstance(value.get("hash"), str) else None


def _drift_summary(recorded: dict[str, Any], current: Ontology) -> str:
    if not current.present:
        return "ontology removed since the last ingest"
    if recorded.get("hash") == "none":
        return "ontology added since the last ingest"
    parts = []
    for label, now in (
        ("entity types", current.entity_type_names()),
        ("relation types", current.relation_type_names()),
    ):
        before = recorded.get(label.replace(" ", "_"))
        before = set(before) if isinstance(before, list) else set()
        added = sorted(set(now) - before)
        removed = sorted(before - set(now))
        if added:
            parts.append(f"{label} added: [{', '.join(added)}]")
        if removed:
            parts.append(f"{label} removed: [{', '.join(removed)}]")
    if recorded.get("mode") != current.mode:
        parts.append(f"mode changed to {current.mode}")
    return "; ".join(parts) or "type definitions changed (descriptions, hierarchy or aliases)"


def ontology_status(settings: Settings, *, has_episodes: bool = False) -> dict[str, Any]:
    """The `ontology` object of `knowledge_status` (docs/api.md §status-ontology): the workspace
    file only.

    `drifted` compares the ontology's content hash with the one recorded by the last ingest or
    rebuild; with no record, a graph that already holds episodes counts as drifted once an
    ontology exists.
    """
    current = load_workspace_ontology(settings)
    recorded = _recorded(settings)
    if recorded is None:
        drifted = current.present and has_episodes
        summary = "no record of the ontology the graph was built with" if drifted else None
    else:
        drifted = recorded["hash"] != current.content_hash()
        summary = _drift_summary(recorded, current) if drifted else None
    return {
        "present": current.present,
        "loaded": current.present,
        "mode": current.mode if current.present else None,
        "entity_type_count": len(current.entity_types),
        "relation_type_count": len(current.relation_types),
        "drifted": drifted,
        "drift_summary": summary,
    }


def no_ontology() -> dict[str, Any]:
    """The `ontology` object of `knowledge_status` when no ontology is loaded
    (docs/api.md §status-ontology)."""
    return {
        "present": False,
        "loaded": False,
        "mode": None,
        "entity_type_count": 0,
        "relation_type_count": 0,
        "drifted": False,
        "drift_summary": None,
    }
