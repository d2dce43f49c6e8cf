"""Settings: the one place that reads `os.environ`, and the frozen object built from it.

Each setting is declared once in `SETTINGS` as (name, variable, default, parser, help). Precedence,
lowest first: the declared default < `<home>/config.toml` < `LCG_*` variables (deprecated
`GRAPHITI_*` aliases are read when the `LCG_*` name is absent) < explicit overrides (CLI flags).
`LCG_HOME` relocates all state (default `.lcg` under the working directory); the database, WAL
and socket paths default to places inside it.

An invalid value is a `ConfigError` at startup, except for the settings where the reference
service warns and falls back to its default (`on_invalid="warn"`).
"""

from __future__ import annotations

import logging
import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from lcg.errors import ConfigError

__all__ = ["SETTINGS", "Setting", "Settings", "load_settings"]

logger = logging.getLogger(__name__)


def _int_range(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if value < low or (high is not None and value > high):
            bound = f"{low}..{high}" if high is not None else f">= {low}"
            raise ValueError(f"must be an integer in {bound}")
        return value

    return parse


def _fraction(text: str) -> float:
    value = float(text.strip())
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError("must be a number between 0 and 1")
    return value


def _path(text: str) -> str:
    if not text.strip():
        raise ValueError("must be a non-empty path")
    return text.strip()


def _embedder(text: str) -> str:
    value = text.strip().lower()
    if value not in ("hash",):
        raise ValueError("must be one of: hash")
    return value


@dataclass(frozen=True)
class Setting:
    """One configurable value: its field name, variable, default, parser and documentation."""

    name: str
    env: str
    default: Any
    parse: Callable[[str], Any]
    help: str
    on_invalid: Literal["error", "warn"] = "error"
    aliases: tuple[str, ...] = ()


SETTINGS: tuple[Setting, ...] = (
    Setting("home", "LCG_HOME", ".lcg", _path, "Directory holding all lcg state."),
    Setting(
        "db_path",
        "LCG_DB_PATH",
        None,
        _path,
        "Kuzu database file (default `<home>/db/liminis.db`).",
        aliases=("GRAPHITI_DB_PATH",),
    ),
    Setting(
        "wal_dir",
        "LCG_WAL_DIR",
        None,
        _path,
        "WAL root, one subdirectory per group (default `<home>/wal`).",
        aliases=("GRAPHITI_WAL_DIR",),
    ),
    Setting(
        "socket_path",
        "LCG_SOCKET_PATH",
        None,
        _path,
        "JSON-RPC Unix socket (default `<home>/service.sock`).",
        aliases=("GRAPHITI_SOCKET_PATH",),
    ),
    Setting(
        "wal_max_bytes_per_file",
        "LCG_WAL_MAX_BYTES_PER_FILE",
        5_242_880,
        _int_range(0),
        "Start a new WAL file before one would pass this many bytes (0 disables).",
    ),
    Setting(
        "wal_max_events_per_file",
        "LCG_WAL_MAX_EVENTS_PER_FILE",
        10_000,
        _int_range(1),
        "Start a new WAL file before one would pass this many lines.",
    ),
    Setting(
        "replay_batch_size",
        "LCG_REPLAY_BATCH_SIZE",
        64,
        _int_range(1, 256),
        "WAL operations per transaction when replaying a tail.",
        on_invalid="warn",
    ),
    Setting(
        "replay_failure_samples",
        "LCG_REPLAY_FAILURE_SAMPLES",
        10,
        _int_range(0),
        "Distinct failure categories kept in a replay report.",
        on_invalid="warn",
    ),
    Setting(
        "replay_fidelity_threshold",
        "LCG_REPLAY_FIDELITY_THRESHOLD",
        0.10,
        _fraction,
        "Warn when more than this fraction of replayed lines had no effect.",
        on_invalid="warn",
    ),
    Setting(
        "shutdown_timeout_ms",
        "LCG_SHUTDOWN_TIMEOUT_MS",
        5000,
        _int_range(0),
        "How long shutdown waits for in-flight requests.",
        on_invalid="warn",
    ),
    Setting(
        "chunk_text_advisory_max_chars",
        "LCG_CHUNK_TEXT_ADVISORY_MAX_CHARS",
        8000,
        _int_range(1),
        "Chunks longer than this many characters get an advisory warning.",
        on_invalid="warn",
    ),
    Setting(
        "embedder",
        "LCG_EMBEDDER",
        "hash",
        _embedder,
        "Embedding provider: `hash` (deterministic, lexical-only).",
    ),
    Setting(
        "embedding_dim",
        "LCG_EMBEDDING_DIM",
        384,
        _int_range(8, 8192),
        "Embedding dimension (the hash embedder's output size).",
        aliases=("GRAPHITI_EMBEDDING_DIM",),
    ),
    Setting(
        "kuzu_buffer_pool_mb",
        "LCG_KUZU_BUFFER_POOL_MB",
        1024,
        _int_range(64),
        "Kuzu buffer pool size in MiB.",
    ),
    Setting(
        "checkpoint_wal_bytes",
        "LCG_CHECKPOINT_WAL_BYTES",
        16 * 1024 * 1024,
        _int_range(0),
        "Checkpoint Kuzu's own journal when idle and larger than this (0: only at close).",
    ),
    Setting(
        "attached_call_timeout_ms",
        "LCG_ATTACHED_CALL_TIMEOUT_MS",
        30_000,
        _int_range(1),
        "Attached MCP mode: how long one read from the service may stay silent.",
        on_invalid="warn",
    ),
    # -- embeddings (issue 3) --
    # -- search (issue 3) --
    # -- extraction providers (issue 4) --
    # -- ingestion pipeline (issue 4) --
    # -- ontology (issue 4) --
    # -- http and ui (issue 7) --
    # -- curation and export (issue 6) --
    # -- folder ingest (issue 8) --
)


@dataclass(frozen=True)
class Settings:
    """The resolved configuration. Paths are absolute; `database_path_text` is as configured."""

    home: Path
    db_path: Path
    database_path_text: str
    wal_dir: Path
    socket_path: Path
    wal_max_bytes_per_file: int = 5_242_880
    wal_max_events_per_file: int = 10_000
    replay_batch_size: int = 64
    replay_failure_samples: int = 10
    replay_fidelity_threshold: float = 0.10
    shutdown_timeout_ms: int = 5000
    chunk_text_advisory_max_chars: int = 8000
    embedder: str = "hash"
    embedding_dim: int = 384
    kuzu_buffer_pool_mb: int = 1024
    checkpoint_wal_bytes: int = 16 * 1024 * 1024
    attached_call_timeout_ms: int = 30_000
    # -- embeddings (issue 3) --
    # -- search (issue 3) --
    # -- extraction providers (issue 4) --
    # -- ingestion pipeline (issue 4) --
    # -- ontology (issue 4) --
    # -- http and ui (issue 7) --
    # -- curation and export (issue 6) --
    # -- folder ingest (issue 8) --

    @classmethod
    def for_home(cls, home: Path, **values: Any) -> Settings:
        """Settings rooted at `home` with the default layout (for tests and embedding lcg)."""
        return load_settings(env={}, cwd=home.parent, overrides={"home": str(home), **values})


def _raw_value(setting: Setting, env: Mapping[str, str], toml: Mapping[str, Any]) -> str | None:
    for name in (setting.env, *setting.aliases):
        if name in env and env[name].strip() != "":
            if name != setting.env:
                logger.warning("%s is deprecated; use %s", name, setting.env)
            return env[name]
    if setting.name in toml:
        return str(toml[setting.name])
    return None


def load_settings(
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings once, at an entry point.

    Args:
        env: the environment to read (default `os.environ`).
        cwd: the directory relative paths are resolved against (default the working directory).
        overrides: values that win over everything (CLI flags), keyed by setting name.

    Raises:
        ConfigError: a value is invalid and the setting has no documented fallback.
    """
    env = os.environ if env is None else env
    base = (cwd or Path.cwd()).resolve()
    overrides = dict(overrides or {})
    by_name = {s.name: s for s in SETTINGS}

    home_raw = overrides.get("home") or _raw_value(by_name["home"], env, {}) or ".lcg"
    home = (base / home_raw).resolve()
    toml: dict[str, Any] = {}
    config_file = home / "config.toml"
    if config_file.is_file():
        try:
            toml = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read {config_file}: {exc}") from exc
        unknown = sorted(set(toml) - set(by_name))
        if unknown:
            raise ConfigError(f"{config_file}: unknown settings {', '.join(unknown)}")

    values: dict[str, Any] = {}
    for setting in SETTINGS:
        if setting.name == "home":
            continue
        if setting.name in overrides and overrides[setting.name] is not None:
            values[setting.name] = overrides[setting.name]
            continue
        raw = _raw_value(setting, env, toml)
        if raw is None:
            values[setting.name] = setting.default
            continue
        try:
            values[setting.name] = setting.parse(raw)
        except ValueError as exc:
            if setting.on_invalid == "warn":
                logger.warning(
                    "invalid %s=%r (%s); using %r", setting.env, raw, exc, setting.default
                )
                values[setting.name] = setting.default
            else:
                raise ConfigError(f"invalid {setting.env}={raw!r}: {exc}") from exc

    db_text = values.pop("db_path") or str(Path(home_raw) / "db" / "liminis.db")
    wal_text = values.pop("wal_dir") or str(Path(home_raw) / "wal")
    socket_text = values.pop("socket_path") or str(Path(home_raw) / "service.sock")
    known = {f.name for f in fields(Settings)}
    return Settings(
        home=home,
        db_path=(base / db_text).resolve(),
        database_path_text=db_text,
        wal_dir=(base / wal_text).resolve(),
        socket_path=(base / socket_text).resolve(),
        **{k: v for k, v in values.items() if k in known},
    )
