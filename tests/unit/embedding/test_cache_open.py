"""Opening the embedding cache reads its hashes a step at a time (its pages handed back after
each, so a large file is never resident whole): every vector is found again whatever the step,
and the hashes' integers are the same through the fast and the digit-by-digit paths."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lcg.embedding import HashEmbedder
from lcg.embedding import cache as cache_mod
from lcg.embedding.cache import CachedEmbedder, _as_u64


@pytest.mark.parametrize("step", [1, 7, 64, 10_000])
def test_a_reopened_cache_finds_every_vector_whatever_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: int
) -> None:
    inner = HashEmbedder(16)
    texts = [f"text {i}" for i in range(300)]
    CachedEmbedder(inner, tmp_path).embed(texts)
    monkeypatch.setattr(cache_mod, "_LOAD_ROWS", step)
    reopened = CachedEmbedder(inner, tmp_path)
    assert len(reopened) == 300
    found = reopened.cached([*texts[::-1], "never embedded"])
    assert found[-1] is None
    assert np.array_equal(np.stack(found[:-1]), inner.embed(texts[::-1]))  # type: ignore[arg-type]  # no None left


def test_hash_integers_match_the_digit_by_digit_reading() -> None:
    rng = np.random.default_rng(3)
    hexes = np.array(
        [bytes(rng.choice(list(b"0123456789abcdef"), 16).tolist()) for _ in range(200)],
        dtype="S16",
    )
    expected = np.array([int(h.decode(), 16) for h in hexes.tolist()], dtype=np.uint64)
    assert np.array_equal(_as_u64(hexes), expected)
    # A damaged hash (not lowercase hex) reads as before: unknown digits count as 0.
    odd = np.array([b"00000000000000fF", b"zzzzzzzzzzzzzzz1", b"0123456789abcdef"], dtype="S16")
    assert _as_u64(odd).tolist() == [0xF0, 1, 0x0123456789ABCDEF]


_PEAK = """
import sys
from pathlib import Path
from lcg.embedding import HashEmbedder
from lcg.embedding.cache import CachedEmbedder

def hwm_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

before = hwm_kb()
cache = CachedEmbedder(HashEmbedder(16), Path(sys.argv[1]))
print(len(cache), hwm_kb() - before)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
def test_opening_a_large_cache_never_has_the_whole_file_resident(tmp_path: Path) -> None:
    """The open reads every record's hash, so every page of the file; it hands each step's
    pages back, so the process's peak resident set grows by far less than the file (at 1M
    facts the 3.1 GB file was the 3.4 GB high-water of `lcg serve`)."""
    rows = 1_000_000  # 80-byte records (16-byte hash, 16 float32): an 80 MB file
    rng = np.random.default_rng(5)
    hashes = np.frombuffer(rng.bytes(rows * 8), dtype=np.uint8).reshape(rows, 8)
    hexes = np.frombuffer(bytes(hashes).hex().encode(), dtype=np.uint8).reshape(rows, 16)
    vectors = np.zeros((rows, 16), dtype=np.float32).view(np.uint8)
    path = CachedEmbedder(HashEmbedder(16), tmp_path).path
    path.write_bytes(np.concatenate([hexes, vectors], axis=1).tobytes())
    out = subprocess.run(
        [sys.executable, "-c", _PEAK, str(tmp_path)], check=True, capture_output=True, text=True
    )
    count, grew_kb = map(int, out.stdout.split())
    assert count == rows
    assert grew_kb < 40_000, grew_kb  # the file is 78,125 KB; its keys and order 16,000 KB
