"""ONNX Runtime (no torch): the recommended local embedder, the extra `lcg[embeddings]`.

A model directory holds `model.onnx` (or `onnx/model.onnx`) and its `tokenizer.json` (Hugging
Face tokenizers format); optionally `sentence_bert_config.json` (its `max_seq_length`) and
`lcg-model.json` (written by `lcg models pull`: the model's name, dimension and measured cost).
The model's first output is either per-token states `[batch, tokens, dim]`, mean-pooled over
the attention mask (the sentence-transformers recipe of all-MiniLM-L6-v2 and its kin), or
sentence vectors `[batch, dim]`; rows are L2-normalised.

Only onnxruntime and tokenizers are imported: no torch, no hub client. Nothing is ever
downloaded here (`lcg models pull` does that, on request). Loaded models are kept per process.

Cost (bench/embeddings.py `onnx`): texts are sorted by token count and cut into the
batches that cost least to run (`plan_batches`: each batch is padded to its longest text, and
each run costs about 12 tokens' worth on top). Each `run` uses one thread and never spins:
ONNX Runtime's intra-op threads spin-wait between operators, and on a loaded machine (another process, or
lcg's own ingestion) two spinning threads of one run wait on each other and burn the CPU the
other needs (measured on the shared 2-core machine: 1 thread 560 ms wall for 64 names, 2
spinning threads 1240 ms). Parallelism comes instead from running up to `threads` batches at
once on the one session (its `run` is thread-safe and releases the GIL), so a descheduled
worker delays only its own batch. A query (one text) is one run on the caller's thread.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lcg.embedding.base import EmbedderIdentity, Vectors
from lcg.errors import ConfigError

__all__ = [
    "DEFAULT_MAX_LENGTH",
    "MANIFEST",
    "OnnxEmbedder",
    "find_model_file",
    "load_onnx",
    "onnx_installed",
    "plan_batches",
    "session_options",
]

MANIFEST = "lcg-model.json"
DEFAULT_MAX_LENGTH = 256  # all-MiniLM-L6-v2's max_seq_length in sentence-transformers


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def onnx_installed() -> bool:
    return (
        importlib.util.find_spec("onnxruntime") is not None
        and importlib.util.find_spec("tokenizers") is not None
    )


def find_model_file(directory: Path) -> Path | None:
    """The ONNX graph of a model directory: `model.onnx`, else `onnx/model.onnx`."""
    for candidate in (directory / "model.onnx", directory / "onnx" / "model.onnx"):
        if candidate.is_file():
            return candidate
    return None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _max_length(directory: Path, model_file: Path) -> int:
    for folder in (directory, model_file.parent):
        for name, key in (
            (MANIFEST, "max_length"),
            ("sentence_bert_config.json", "max_seq_length"),
        ):
            value = _read_json(folder / name).get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return DEFAULT_MAX_LENGTH


def session_options(intra_op_threads: int = 1, spinning: bool = False) -> Any:
    """ONNX Runtime session options of a loaded model: one thread per run, never spinning, by
    default (see the module docstring; bench/embeddings.py measures the other settings)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = 1
    spin = "1" if spinning else "0"
    options.add_session_config_entry("session.intra_op.allow_spinning", spin)
    options.add_session_config_entry("session.inter_op.allow_spinning", spin)
    # The arena keeps the largest batch's activations forever; without it memory follows use.
    options.enable_cpu_mem_arena = False
    options.log_severity_level = 3
    return options


@functools.lru_cache(maxsize=8)
def _load(directory: str, intra_op_threads: int, spinning: bool) -> tuple[Any, Any]:
    import onnxruntime
    from tokenizers import Tokenizer

    root = Path(directory)
    model_file = find_model_file(root)
    if model_file is None:
        raise ConfigError(f"{directory} holds no model.onnx (nor onnx/model.onnx)")
    tokenizer_file = next(
        (p for p in (root / "tokenizer.json", model_file.parent / "tokenizer.json") if p.is_file()),
        None,
    )
    if tokenizer_file is None:
        raise ConfigError(f"{directory} holds no tokenizer.json")
    options = session_options(intra_op_threads, spinning)
    session = onnxruntime.InferenceSession(
        str(model_file), options, providers=["CPUExecutionProvider"]
    )
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.enable_truncation(_max_length(root, model_file))
    # No padding here (tokenizer.json may pad every text to a fixed length): `embed` pads each
    # batch to its own longest text.
    tokenizer.no_padding()
    return session, tokenizer


# What one `session.run` costs beyond its tokens, in tokens: measured with all-MiniLM-L6-v2
# (CPU time, float32 and int8 alike) as ~3-5 ms a run against ~0.25-0.45 ms a padded token.
RUN_OVERHEAD_TOKENS = 12


def plan_batches(token_counts: list[int], cap: int) -> list[list[int]]:
    """Batches (lists of row indices) of at most `cap` texts that cost least to run, each
    padded to its longest text: texts sorted by token count, cut where the padding saved
    outweighs another run (RUN_OVERHEAD_TOKENS). A short name is not padded to an episode's
    length, and a jump in length starts a new batch. Exact (dynamic programming over the cut
    points, O(texts x cap))."""
    n = len(token_counts)
    order = sorted(range(n), key=token_counts.__getitem__)
    lengths = np.array([token_counts[i] for i in order], dtype=np.float64)
    best = np.zeros(n + 1)  # best[j]: the least cost of the j shortest texts
    cut = np.zeros(n + 1, dtype=np.int64)
    for j in range(1, n + 1):
        first = max(0, j - cap)
        starts = np.arange(first, j)
        # A batch of texts starts..j-1 is padded to the longest, lengths[j - 1].
        costs = best[first:j] + RUN_OVERHEAD_TOKENS + (j - starts) * lengths[j - 1]
        k = int(np.argmin(costs))
        best[j], cut[j] = costs[k], first + k
    batches: list[list[int]] = []
    j = n
    while j > 0:
        batches.append(order[int(cut[j]) : j])
        j = int(cut[j])
    return batches[::-1]


class OnnxEmbedder:
    """A loaded ONNX sentence-embedding model; rows are L2-normalised float32."""

    def __init__(
        self, session: Any, tokenizer: Any, name: str, batch_size: int, threads: int = 0
    ) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._inputs = {i.name for i in session.get_inputs()}
        self._pad_id = int(tokenizer.token_to_id("[PAD]") or 0)
        self.batch_size = batch_size
        # Batches run at once (0: one per usable CPU); the pool starts on the first big embed.
        self.threads = threads if threads > 0 else usable_cpus()
        self._pool: ThreadPoolExecutor | None = None
        dim = int(self._encode(["dimension probe"]).shape[1])
        self._identity = EmbedderIdentity(model=name, dim=dim)

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity

    def _encode(self, texts: list[str]) -> Vectors:
        return self._run(self._tokenizer.encode_batch(texts))

    def _run(self, encoded: list[Any]) -> Vectors:
        """Vectors of tokenised texts, padded to the longest of them."""
        width = max(len(e.ids) for e in encoded)
        ids = np.full((len(encoded), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encoded), width), dtype=np.int64)
        for row, e in enumerate(encoded):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        feed: dict[str, npt.NDArray[np.int64]] = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        output = np.asarray(self._session.run(None, feed)[0], dtype=np.float32)
        if output.ndim == 3:  # per-token states: mean over the real tokens
            weights = mask[:, :, None].astype(np.float32)
            output = (output * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(output, axis=1, keepdims=True)
        np.divide(output, norms, out=output, where=norms > 0)
        return output.astype(np.float32, copy=False)

    def token_counts(self, texts: list[str]) -> list[int]:
        """How many tokens each text is, as the model sees it (truncated)."""
        return [len(e.ids) for e in self._tokenizer.encode_batch(texts)]

    def plan(self, token_counts: list[int]) -> list[list[int]]:
        """The batches `embed` runs for texts of these token counts (see `plan_batches`):
        enough to keep every worker busy, none above batch_size rows (nor capped below 8)."""
        cap = max(8, min(self.batch_size, -(-len(token_counts) // self.threads)))
        return plan_batches(token_counts, cap)

    def embed(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.empty((0, self._identity.dim), dtype=np.float32)
        out = np.empty((len(texts), self._identity.dim), dtype=np.float32)
        # Tokenised all at once (tokenizers' own threads), then batched by token count: a batch
        # is padded to its longest text (bench/embeddings.py, the Apollo entity and fact texts:
        # 48% of the tokens were padding in input order, 17% in equal batches sorted by
        # tokens, 1.5% with plan_batches).
        encoded = self._tokenizer.encode_batch(texts)
        counts = [len(e.ids) for e in encoded]
        batches = self.plan(counts)

        def encode(rows: list[int]) -> None:
            out[rows] = self._run([encoded[i] for i in rows])

        if len(batches) == 1 or self.threads == 1:
            for rows in batches:
                encode(rows)
            return out
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="lcg-onnx")
        # Costliest batches first, so the last one to finish is a cheap one.
        batches.sort(key=lambda rows: len(rows) * counts[rows[-1]], reverse=True)
        for done in [self._pool.submit(encode, rows) for rows in batches]:
            done.result()
        return out


def load_onnx(
    directory: Path,
    name: str | None,
    *,
    batch_size: int,
    intra_op_threads: int = 1,
    spinning: bool = False,
    workers: int = 0,
) -> OnnxEmbedder:
    """Load the ONNX model in `directory`; its identity is `name`, else the manifest's name,
    else the directory's name. The defaults of `intra_op_threads`, `spinning` and `workers`
    (batches run at once; 0: one per usable CPU) are lcg's (see the module docstring);
    bench/embeddings.py measures the others.

    Raises:
        ConfigError: onnxruntime/tokenizers are missing, or the directory holds no usable model;
            the message names the directory.
    """
    if not onnx_installed():
        raise ConfigError(
            "the onnx embedder needs onnxruntime and tokenizers: pip install 'lcg[embeddings]'"
        )
    if not directory.is_dir():
        raise ConfigError(f"embedding model directory {directory} does not exist")
    manifest_name = _read_json(directory / MANIFEST).get("name")
    identity_name = name or (manifest_name if isinstance(manifest_name, str) else directory.name)
    try:
        session, tokenizer = _load(str(directory.resolve()), intra_op_threads, spinning)
        return OnnxEmbedder(session, tokenizer, identity_name, batch_size, workers)
    except ConfigError:
        raise
    except Exception as exc:  # onnxruntime and tokenizers raise their own exception types
        raise ConfigError(f"could not load the ONNX model in {directory}: {exc}") from exc
