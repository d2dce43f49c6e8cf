"""Local embedding models: the catalog of pullable models, the user's model cache, `pull`.

The cache is `LCG_MODELS_DIR` (default `$XDG_CACHE_HOME/lcg/models`, i.e. `~/.cache/lcg/models`),
one directory per model, each an ONNX model directory (lcg.embedding.onnx_provider) with the
manifest `lcg-model.json` that `pull` writes: name, dimension, checksum, source, size on disk,
and what the model cost when it was pulled here (resident memory, texts per second).

`pull` downloads one archive (`.tar.gz`) with progress, verifies its SHA-256, unpacks it,
loads the model once to check and measure it, and only then moves it into the cache: a failed
or corrupt download leaves the cache as it was. The catalog pins each archive's URL and
checksum. `LCG_MODELS_URL` (a mirror, e.g. an internal server) replaces the source: the archive
is `<url>/<name>.tar.gz` and its checksum the first word of `<url>/<name>.tar.gz.sha256`.

A variant (`all-MiniLM-L6-v2-int8`) is made from its base model's archive at pull time (the
same download and checksum; on a mirror, `<base>.tar.gz`): quantised to int8
(lcg.embedding.quantize) before it is measured and cached under its own name, so its vectors
carry their own identity (a workspace switching to it re-embeds, `lcg models reembed`).

The default (`DEFAULT_MODEL`: what `lcg models pull` fetches with no name, and what `auto` and
`onnx` prefer in the cache) is the int8 variant: the cost target is 5 ms per entity or
fact text on a 2-core machine, which float32 all-MiniLM-L6-v2 misses (CPU ms a text, batched:
6.1 float32, 3.5 int8; bench/embeddings.py) at the same search quality (bench/relevance.py;
docs/search.md, "Embedding cost"). The float32 model stays in the catalog, pulled by name.

Nothing here runs unless asked: `auto` embedder selection only looks into the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from lcg.embedding.onnx_provider import MANIFEST, find_model_file, load_onnx
from lcg.embedding.quantize import QUANTIZATION, quantize_int8, require_quantizer
from lcg.errors import ConfigError, LcgError

__all__ = [
    "CATALOG",
    "DEFAULT_MODEL",
    "CachedModel",
    "CatalogModel",
    "ModelFetchError",
    "cached_model_dir",
    "cached_models",
    "default_models_dir",
    "pull",
]

Progress = Callable[[int, int | None], None]


class ModelFetchError(LcgError):
    """A model download failed or did not verify; the cache is unchanged."""


@dataclass(frozen=True)
class CatalogModel:
    name: str
    dim: int
    url: str
    sha256: str
    download_mb: float
    description: str
    # A variant made here from another entry's archive (same URL and checksum): `int8` is its
    # dynamic int8 quantisation (lcg.embedding.quantize), made at pull time.
    base: str | None = None
    derive: str | None = None

    @property
    def archive_name(self) -> str:
        """The archive's name on a mirror: the base model's for a variant."""
        return self.base or self.name


CATALOG: dict[str, CatalogModel] = {
    m.name: m
    for m in (
        CatalogModel(
            "all-MiniLM-L6-v2",
            384,
            # The ONNX export of sentence-transformers/all-MiniLM-L6-v2 (model.onnx, tokenizer.json
            # and configs) that Chroma publishes; the checksum is the one its client pins.
            "https://chroma-onnx-models.s3.amazonaws.com/all-MiniLM-L6-v2/onnx.tar.gz",
            "913d7300ceae3b2dbc2c50d1de4baacab4be7b9380491c27fab7418616a16ec3",
            79.3,
            "sentence-transformers all-MiniLM-L6-v2 in float32: English, 384-d, mean pooling",
        ),
        CatalogModel(
            "all-MiniLM-L6-v2-int8",
            384,
            "https://chroma-onnx-models.s3.amazonaws.com/all-MiniLM-L6-v2/onnx.tar.gz",
            "913d7300ceae3b2dbc2c50d1de4baacab4be7b9380491c27fab7418616a16ec3",
            79.3,
            "all-MiniLM-L6-v2 quantised to int8 here at pull: ~1.7x less CPU per text than "
            "float32, 23 MB, cosine >= 0.98 to the float32 vectors",
            base="all-MiniLM-L6-v2",
            derive="int8",
        ),
    )
}
DEFAULT_MODEL = "all-MiniLM-L6-v2-int8"

_CHUNK = 1 << 20
_PROBE_TEXTS = [
    f"Apollo {i} carried astronaut number {i} towards the Moon in a Saturn V rocket."
    for i in range(256)
]


def default_models_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lcg" / "models"


@dataclass(frozen=True)
class CachedModel:
    name: str
    path: Path
    size_bytes: int
    manifest: dict[str, Any]


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _manifest(directory: Path) -> dict[str, Any]:
    try:
        value = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def cached_models(models_dir: Path) -> list[CachedModel]:
    """The model directories in the cache (those holding an ONNX model), by name."""
    if not models_dir.is_dir():
        return []
    return [
        CachedModel(d.name, d, _size(d), _manifest(d))
        for d in sorted(models_dir.iterdir())
        if d.is_dir() and not d.name.startswith(".") and find_model_file(d) is not None
    ]


def cached_model_dir(models_dir: Path, name: str | None = None) -> Path | None:
    """The cached directory of model `name` (default: the default model, else the only or
    first cached one), or None when nothing suitable is cached."""
    found = {m.name: m.path for m in cached_models(models_dir)}
    if name is not None:
        return found.get(name)
    return found.get(DEFAULT_MODEL) or next(iter(found.values()), None)


def _source(entry: CatalogModel, mirror: str | None, client: httpx2.Client) -> tuple[str, str]:
    """(archive URL, expected SHA-256) for `entry`, from the catalog or from the mirror."""
    if not mirror:
        return entry.url, entry.sha256
    url = f"{mirror.rstrip('/')}/{entry.archive_name}.tar.gz"
    try:
        response = client.get(f"{url}.sha256")
    except httpx2.TransportError as exc:
        raise ModelFetchError(f"cannot reach {url}.sha256: {exc}") from exc
    words = response.text.split()
    if response.status_code != 200 or not words:
        raise ModelFetchError(f"{url}.sha256: HTTP {response.status_code}, no checksum")
    return url, words[0].lower()


def _download(client: httpx2.Client, url: str, dest: Path, progress: Progress | None) -> str:
    """Stream `url` into `dest`; returns the SHA-256 of what arrived."""
    digest = hashlib.sha256()
    try:
        with client.stream("GET", url) as response:
            if response.status_code != 200:
                raise ModelFetchError(f"{url}: HTTP {response.status_code}")
            length = response.headers.get("content-length")
            total = int(length) if length and length.isdigit() else None
            done = 0
            with dest.open("wb") as fh:
                for chunk in response.iter_bytes(_CHUNK):
                    fh.write(chunk)
                    digest.update(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total)
    except httpx2.TransportError as exc:
        raise ModelFetchError(f"download of {url} failed: {exc}") from exc
    return digest.hexdigest()


def _model_root(unpacked: Path) -> Path:
    """The directory of an unpacked archive that holds the model (and its tokenizer)."""
    files = sorted(unpacked.rglob("model.onnx"), key=lambda p: len(p.parts))
    if not files:
        raise ModelFetchError("the archive holds no model.onnx")
    folder = files[0].parent
    if not (folder / "tokenizer.json").is_file() and (folder.parent / "tokenizer.json").is_file():
        folder = folder.parent
    return folder


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(directory: Path, name: str, batch_size: int = 64) -> dict[str, Any]:
    """Load the model in `directory` and measure it: dim, resident memory it added, texts/s."""
    before = _rss_mb()
    embedder = load_onnx(directory, name, batch_size=batch_size)
    embedder.embed(_PROBE_TEXTS[:8])
    started, cpu = time.perf_counter(), time.process_time()
    embedder.embed(_PROBE_TEXTS)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "dim": embedder.identity.dim,
        "memory_mb": round(_rss_mb() - before, 1),
        "texts_per_s": round(len(_PROBE_TEXTS) / elapsed, 1),
        # CPU time is what the machine's load does not inflate (wall time waits for a CPU).
        "cpu_ms_per_text": round(1000 * cpu / len(_PROBE_TEXTS), 2),
    }


def pull(
    name: str,
    models_dir: Path,
    *,
    mirror: str | None = None,
    progress: Progress | None = None,
    timeout_s: float = 60.0,
) -> CachedModel:
    """Download, verify, unpack, check and cache model `name` (see the module docstring).

    Raises:
        ConfigError: `name` is not in the catalog, or it is made by quantising and the `onnx`
            package is missing (checked before the download).
        ModelFetchError: the download failed, the checksum did not match, or the archive holds
            no loadable model; nothing was written to the cache.
    """
    entry = CATALOG.get(name)
    if entry is None:
        raise ConfigError(f"unknown model {name!r}; known: {', '.join(sorted(CATALOG))}")
    if entry.derive == "int8":
        require_quantizer()  # before a 90 MB download, not after it
    models_dir.mkdir(parents=True, exist_ok=True)
    timeout = httpx2.Timeout(timeout_s, connect=min(timeout_s, 10.0))
    with (
        tempfile.TemporaryDirectory(prefix=f".{name}-", dir=models_dir) as tmp,
        httpx2.Client(timeout=timeout, follow_redirects=True) as client,
    ):
        url, expected = _source(entry, mirror, client)
        archive = Path(tmp) / "archive.tar.gz"
        actual = _download(client, url, archive, progress)
        if actual != expected:
            raise ModelFetchError(
                f"checksum mismatch for {url}: expected sha256 {expected}, got {actual}; "
                "nothing was cached"
            )
        unpacked = Path(tmp) / "unpacked"
        try:
            with tarfile.open(archive, "r:gz") as tar:
                tar.extractall(unpacked, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise ModelFetchError(f"cannot unpack {url}: {exc}") from exc
        root = _model_root(unpacked)
        derived: dict[str, Any] = {}
        if entry.derive == "int8":
            quantize_int8(root)  # ConfigError (no `onnx` package) reaches the caller as is
            derived = {"derived_from": entry.base, "quantization": QUANTIZATION}
        try:
            cost = measure(root, entry.name)
        except ConfigError as exc:
            raise ModelFetchError(f"the model from {url} does not load: {exc.message}") from exc
        manifest = {
            "name": entry.name,
            "source": url,
            "sha256": actual,
            "pulled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **derived,
            **cost,
        }
        (root / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        final = models_dir / entry.name
        if final.exists():
            shutil.rmtree(final)
        root.rename(final)
    return CachedModel(entry.name, final, _size(final), manifest)
