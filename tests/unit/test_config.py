"""lcg.config: defaults, precedence, invalid values, deprecated aliases, documentation."""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

import pytest

from lcg.config import SETTINGS, Setting, Settings, load_settings
from lcg.errors import ConfigError

CONFIGURATION = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
BY_NAME = {s.name: s for s in SETTINGS}


def load(tmp_path: Path, env: dict[str, str] | None = None, **overrides: object) -> Settings:
    return load_settings(env=env or {}, cwd=tmp_path, overrides=overrides)


def write_toml(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")


def test_defaults_put_all_state_under_dot_lcg_in_the_working_directory(tmp_path: Path) -> None:
    s = load(tmp_path)
    home = (tmp_path / ".lcg").resolve()
    assert s.home == home
    assert s.db_path == home / "db" / "liminis.db"
    assert s.database_path_text == str(Path(".lcg") / "db" / "liminis.db")
    assert s.wal_dir == home / "wal"
    assert s.socket_path == home / "service.sock"


def test_defaults_are_the_declared_ones(tmp_path: Path) -> None:
    s = load(tmp_path)
    for setting in SETTINGS:
        if setting.name in ("home", "db_path", "wal_dir", "socket_path", "export_dir"):
            continue
        assert getattr(s, setting.name) == setting.default, setting.name


def test_the_dataclass_defaults_agree_with_the_declarations() -> None:
    for f in dataclasses.fields(Settings):
        if f.default is not dataclasses.MISSING:
            assert f.default == BY_NAME[f.name].default, f.name


def test_every_setting_has_one_declaration_and_an_lcg_variable() -> None:
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    fields = {f.name for f in dataclasses.fields(Settings)}
    for setting in SETTINGS:
        # Variables the reference names outside LCG_* (ANTHROPIC_API_KEY, LIMINIS_*) keep them.
        assert setting.env == "LCG_" + setting.name.upper() or not setting.env.startswith("LCG_")
        assert setting.help.strip()
        assert setting.name in fields or setting.name == "home"
        assert all(alias.startswith("GRAPHITI_") for alias in setting.aliases)


def test_settings_are_frozen(tmp_path: Path) -> None:
    s = load(tmp_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.replay_batch_size = 1  # type: ignore[misc]  # assigning is the point


# -- precedence ----------------------------------------------------------------------------------


def test_precedence_is_default_then_toml_then_environment_then_overrides(tmp_path: Path) -> None:
    assert load(tmp_path).replay_batch_size == 64
    write_toml(tmp_path / ".lcg", "replay_batch_size = 10\nembedding_dim = 128\n")
    assert load(tmp_path).replay_batch_size == 10
    env = {"LCG_REPLAY_BATCH_SIZE": "20"}
    assert load(tmp_path, env).replay_batch_size == 20
    assert load(tmp_path, env, replay_batch_size=30).replay_batch_size == 30
    assert load(tmp_path, env, replay_batch_size=30).embedding_dim == 128  # other layers stay


def test_toml_values_of_every_kind_are_read(tmp_path: Path) -> None:
    write_toml(
        tmp_path / ".lcg",
        'replay_fidelity_threshold = 0.5\nembedder = "HASH"\nwal_dir = "logs/wal"\n'
        "wal_max_events_per_file = 7\n",
    )
    s = load(tmp_path)
    assert s.replay_fidelity_threshold == 0.5
    assert s.embedder == "hash"
    assert s.wal_dir == (tmp_path / "logs" / "wal").resolve()
    assert s.wal_max_events_per_file == 7


def test_an_override_of_none_does_not_hide_lower_layers(tmp_path: Path) -> None:
    s = load(tmp_path, {"LCG_EMBEDDING_DIM": "64"}, embedding_dim=None)
    assert s.embedding_dim == 64


def test_an_empty_variable_counts_as_unset(tmp_path: Path) -> None:
    write_toml(tmp_path / ".lcg", "replay_batch_size = 10\n")
    assert load(tmp_path, {"LCG_REPLAY_BATCH_SIZE": "  "}).replay_batch_size == 10


def test_lcg_home_relocates_all_state_and_its_config_file(tmp_path: Path) -> None:
    write_toml(tmp_path / "state", "replay_batch_size = 12\n")
    s = load(tmp_path, {"LCG_HOME": "state"})
    home = (tmp_path / "state").resolve()
    assert (s.home, s.db_path, s.wal_dir) == (home, home / "db" / "liminis.db", home / "wal")
    assert s.database_path_text == str(Path("state") / "db" / "liminis.db")
    assert s.replay_batch_size == 12


def test_an_overridden_home_wins_over_lcg_home(tmp_path: Path) -> None:
    s = load(tmp_path, {"LCG_HOME": "state"}, home=str(tmp_path / "flag"))
    assert s.home == (tmp_path / "flag").resolve()


def test_explicit_paths_resolve_against_the_working_directory(tmp_path: Path) -> None:
    s = load(
        tmp_path,
        {
            "LCG_DB_PATH": "data/graph.db",
            "LCG_WAL_DIR": "/abs/wal",
            "LCG_SOCKET_PATH": "run/s.sock",
            "LCG_EXPORT_DIR": "out",
        },
    )
    assert s.exports == (tmp_path / "out").resolve()
    assert load(tmp_path).exports == load(tmp_path).home / "exports"
    assert s.db_path == (tmp_path / "data" / "graph.db").resolve()
    assert s.database_path_text == "data/graph.db"
    assert s.wal_dir == Path("/abs/wal")
    assert s.socket_path == (tmp_path / "run" / "s.sock").resolve()


def test_load_settings_reads_the_process_environment_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LCG_REPLAY_BATCH_SIZE", "7")
    monkeypatch.setenv("LCG_HOME", str(tmp_path / "h"))
    s = load_settings(cwd=tmp_path)
    assert s.replay_batch_size == 7
    assert s.home == (tmp_path / "h").resolve()


def test_for_home_ignores_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LCG_REPLAY_BATCH_SIZE", "7")
    s = Settings.for_home(tmp_path / "h", embedding_dim=32)
    assert s.home == (tmp_path / "h").resolve()
    assert s.replay_batch_size == 64
    assert s.embedding_dim == 32


# -- invalid values ------------------------------------------------------------------------------

WARNED = [s for s in SETTINGS if s.on_invalid == "warn"]
STRICT = [s for s in SETTINGS if s.on_invalid == "error"]

BAD_VALUES = {
    "replay_batch_size": ["0", "257", "-1", "many", "1.5"],
    "replay_failure_samples": ["-1", "ten"],
    "replay_fidelity_threshold": ["1.5", "-0.1", "nan", "inf", "high"],
    "shutdown_timeout_ms": ["-1", "soon"],
    "chunk_text_advisory_max_chars": ["0", "big"],
    "wal_max_bytes_per_file": ["-1", "5MB"],
    "wal_max_events_per_file": ["0", "lots"],
    "embedder": ["openai", "sentence_transformers", ""],
    "embedding_dim": ["4", "8193", "wide"],
    "kuzu_buffer_pool_mb": ["63", "1", "-1", "1GB"],
    "embedded_store": ["lbug", "", "kuzu,ladybug", "neo4j"],
    "checkpoint_wal_bytes": ["-1", "16M"],
    "attached_call_timeout_ms": ["0", "-5", "30s"],
    # embeddings: model names and paths are checked when the embedder is selected
    "embedding_model": [],
    "embedding_model_path": [],
    "embedding_url": ["ftp://host", "localhost:8080", "http://"],
    "search_vector_floor": ["-0.1", "1.5", "nan", "high"],
    "models_dir": [],
    "models_url": ["ftp://host", "mirror.example:80"],
    "embedding_uds": [],
    "embedding_batch_size": ["0", "2049", "many"],
    "embedding_timeout_ms": ["0", "30s"],
    # extraction providers: names and URLs are validated lazily, when extraction is first used
    "replay_llm": [],
    "record_llm": [],
    "extractor_uds": [],
    "extractor_http": [],
    "anthropic_api_key": [],
    "extraction_url": [],
    "extraction_model": [],
    "extraction_llm": [],
    "extraction_max_tokens_ceiling": ["255", "lots"],
    "extraction_timeout_ms": ["0", "2m"],
    "llm_cost_table_path": [],
    # ingestion pipeline
    "extractor": ["gpt", "", "heuristics"],
    "extraction_concurrency": ["0", "257", "eight"],
    "extraction_single_call_max_chars": ["-1", "3k", ""],
    "supersede_candidates": ["-1", "101", "ten"],
    "dedup_llm": ["maybe", "2"],
    "dedup_embedding_threshold": ["1.5", "-0.1", "high"],
    "summary_max_chars": ["79", "long"],
    # ontology: any directory; one without ontology files simply resolves no ontology
    "workspace_root": [],
    # http and ui: the host is checked when the server binds; a token is any text
    "http_host": [],
    "http_port": ["-1", "65536", "http"],
    "api_token": [],
    "http_scope": ["read,everything", "admin;read", ","],
    "http_auth": ["off", "", "token,none", "bearer"],
    "http_cors_origins": ["app.example", "ftp://app.example", "https://app.example/path"],
    "http_allowed_hosts": [],
    # server mode: the password is any text
    "storage": ["neo4j", "", "kuzu,falkordb"],
    "falkordb_url": [
        "http://db:6379",
        "db:6379",
        "redis://",
        "redis://:secret@db:6379",
        "redis://db:99999",
        "redis://a:1,rediss://b:2",
    ],
    "falkordb_password": [],
    "falkordb_replicas": ["-1", "17", "one"],
    "reembed": ["on", "yes", "background"],
}


def test_every_setting_that_can_be_invalid_has_bad_values_here() -> None:
    paths = {"home", "db_path", "wal_dir", "socket_path", "export_dir"}
    assert set(BAD_VALUES) == {s.name for s in SETTINGS} - paths


@pytest.mark.parametrize(
    ("name", "value"),
    [(s.name, v) for s in WARNED for v in BAD_VALUES[s.name]],
)
def test_settings_with_a_fallback_warn_and_use_their_default(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str, value: str
) -> None:
    setting = BY_NAME[name]
    with caplog.at_level(logging.WARNING, logger="lcg.config"):
        s = load(tmp_path, {setting.env: value})
    assert getattr(s, name) == setting.default
    assert any(setting.env in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("name", "value"),
    [(s.name, v) for s in STRICT if s.name in BAD_VALUES for v in BAD_VALUES[s.name] if v],
)
def test_other_invalid_values_are_config_errors_naming_the_variable(
    tmp_path: Path, name: str, value: str
) -> None:
    setting = BY_NAME[name]
    with pytest.raises(ConfigError) as info:
        load(tmp_path, {setting.env: value})
    assert setting.env in info.value.wire_message()
    assert info.value.wire_message().startswith("configuration error: ")
    assert info.value.exit_code == 2


@pytest.mark.parametrize("name", ["db_path", "wal_dir", "socket_path"])
def test_a_blank_path_in_the_config_file_is_a_config_error(tmp_path: Path, name: str) -> None:
    write_toml(tmp_path / ".lcg", f'{name} = "  "\n')
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert BY_NAME[name].env in info.value.message


def test_an_invalid_value_in_the_config_file_is_reported_like_a_variable(tmp_path: Path) -> None:
    write_toml(tmp_path / ".lcg", "embedding_dim = 2\n")
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert "LCG_EMBEDDING_DIM" in info.value.message


def test_an_unreadable_config_file_is_a_config_error(tmp_path: Path) -> None:
    write_toml(tmp_path / ".lcg", "replay_batch_size = = 3\n")
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert "config.toml" in info.value.message


def test_unknown_settings_in_the_config_file_are_config_errors(tmp_path: Path) -> None:
    write_toml(tmp_path / ".lcg", "replay_batch_sise = 3\nzzz = 1\n")
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert "replay_batch_sise" in info.value.message and "zzz" in info.value.message


# -- deprecated aliases --------------------------------------------------------------------------

ALIAS_VALUES = {
    "db_path": ("old/graph.db", "new/graph.db"),
    "wal_dir": ("old/wal", "new/wal"),
    "socket_path": ("old.sock", "new.sock"),
    "embedding_dim": ("128", "256"),
    "embedding_model": ("old-model", "new-model"),
    "embedding_url": ("http://old:1", "http://new:2"),
}
ALIASED = [(s.name, alias) for s in SETTINGS for alias in s.aliases]


def test_every_alias_has_values_here() -> None:
    assert {name for name, _ in ALIASED} == set(ALIAS_VALUES)


def _value(s: Settings, name: str) -> object:
    return s.database_path_text if name == "db_path" else getattr(s, name)


def _expected(tmp_path: Path, name: str, text: str) -> object:
    if name in ("db_path", "embedding_model", "embedding_url"):
        return text
    if name == "embedding_dim":
        return int(text)
    return (tmp_path / text).resolve()


@pytest.mark.parametrize(("name", "alias"), ALIASED)
def test_a_deprecated_graphiti_variable_is_read_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str, alias: str
) -> None:
    old, _ = ALIAS_VALUES[name]
    with caplog.at_level(logging.WARNING, logger="lcg.config"):
        s = load(tmp_path, {alias: old})
    assert _value(s, name) == _expected(tmp_path, name, old)
    assert any(alias in r.getMessage() and "deprecated" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(("name", "alias"), ALIASED)
def test_the_lcg_variable_wins_over_its_deprecated_alias(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str, alias: str
) -> None:
    old, new = ALIAS_VALUES[name]
    with caplog.at_level(logging.WARNING, logger="lcg.config"):
        s = load(tmp_path, {alias: old, BY_NAME[name].env: new})
    assert _value(s, name) == _expected(tmp_path, name, new)
    assert not any("deprecated" in r.getMessage() for r in caplog.records)


def test_a_deprecated_variable_still_beats_the_config_file(tmp_path: Path) -> None:
    write_toml(tmp_path / ".lcg", "embedding_dim = 64\n")
    assert load(tmp_path, {"GRAPHITI_EMBEDDING_DIM": "128"}).embedding_dim == 128


def test_an_invalid_deprecated_value_names_the_variable_to_use(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, {"GRAPHITI_EMBEDDING_DIM": "2"})
    assert "LCG_EMBEDDING_DIM" in info.value.message


# -- documentation -------------------------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.env)
def test_every_setting_is_documented_in_the_configuration_reference(setting: Setting) -> None:
    """docs/configuration.md is generated from SETTINGS (tests/unit/test_configdoc.py keeps it
    current); each variable has its row there."""
    text = CONFIGURATION.read_text(encoding="utf-8")
    assert re.search(rf"^\| `{setting.env}` \|", text, re.M), f"{setting.env} has no row"


# -- server mode ----------------------------------------------------------------------


def test_server_mode_settings_parse_seed_lists_and_tls(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        {
            "LCG_STORAGE": "FalkorDB",
            "LCG_FALKORDB_URL": "rediss://a.example:6380, rediss://b.example:6380",
            "LCG_FALKORDB_PASSWORD": "s3cret",
            "LCG_FALKORDB_REPLICAS": "1",
        },
    )
    assert settings.storage == "falkordb"
    assert settings.falkordb_url == "rediss://a.example:6380,rediss://b.example:6380"
    assert (settings.falkordb_password, settings.falkordb_replicas) == ("s3cret", 1)
    assert "s3cret" not in repr(settings)


def test_falkordb_storage_needs_a_url(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="LCG_FALKORDB_URL"):
        load(tmp_path, {"LCG_STORAGE": "falkordb"})


def test_a_password_in_the_url_is_refused_without_echoing_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, {"LCG_FALKORDB_URL": "redis://admin:hunter2@db:6379"})
    assert "hunter2" not in info.value.wire_message()
    assert "LCG_FALKORDB_PASSWORD" in info.value.wire_message()
