"""An OpenAI-compatible embeddings endpoint (`POST /v1/embeddings`) over HTTP or a Unix socket.

This is the reference service's sidecar contract (docs/api.md §startup, the embedding endpoint).
`connect_http` probes the endpoint once at startup to learn the dimension (and the model name it
reports):
- a transport failure (nothing listening, refused, timed out) is fatal;
- any other probe failure (an HTTP error status, an unusable body) is fatal unless
  `LCG_EMBEDDING_DIM` is set, in which case startup goes on with that dimension;
- a probe that succeeds with a dimension other than a configured `LCG_EMBEDDING_DIM` is fatal.

Unlike the reference (one text per request), texts are sent in batches of `batch_size`. The
embedder keeps one synchronous client (a thread-safe keep-alive pool, bound to no event loop)
across calls; it is closed by `close()`, or when the embedder is collected or the process exits.
Rows are L2-normalised on arrival.
"""

from __future__ import annotations

import logging
import socket
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
import numpy as np

from lcg.embedding.base import EmbedderIdentity, Vectors
from lcg.errors import ConfigError, ExtractionError
from lcg.loopclients import KEEPALIVE

__all__ = ["DEFAULT_HTTP_MODEL", "Endpoint", "HttpEmbedder", "connect_http", "embeddings_url"]

logger = logging.getLogger(__name__)

DEFAULT_HTTP_MODEL = "bge-base-en-v1.5"  # the reference's LCG_EMBEDDING_MODEL default
_PROBE_TEXT = "dimension probe"
_ERROR_BODY_CHARS = 200
# Idle connections reused for at most `KEEPALIVE` s (lcg.loopclients says why).
_LIMITS = httpx2.Limits(keepalive_expiry=KEEPALIVE)


def embeddings_url(base: str) -> str:
    """The endpoint for a configured URL: `<base>/v1/embeddings` unless it already names one."""
    parts = urlsplit(base.strip())
    path = parts.path.rstrip("/")
    if not path.endswith("/embeddings"):
        path = f"{path}/embeddings" if path.endswith("/v1") else f"{path}/v1/embeddings"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


@dataclass(frozen=True)
class Endpoint:
    """Where the embeddings are served: an http(s) URL, or a Unix socket path."""

    url: str | None = None
    uds: str | None = None

    @property
    def where(self) -> str:
        """The endpoint as error messages name it."""
        return f"unix:{self.uds}" if self.uds else embeddings_url(self.url or "")

    @property
    def request_url(self) -> str:
        return "http://localhost/v1/embeddings" if self.uds else embeddings_url(self.url or "")

    def client(self, timeout_s: float) -> httpx2.Client:
        transport = (
            httpx2.HTTPTransport(uds=self.uds, limits=_LIMITS)
            if self.uds
            # Headers and body go out as two writes: without TCP_NODELAY the body can wait
            # for a delayed ACK (~40 ms a request on loopback).
            else httpx2.HTTPTransport(
                socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)], limits=_LIMITS
            )
        )
        return httpx2.Client(
            transport=transport,
            timeout=httpx2.Timeout(timeout_s, connect=min(timeout_s, 5.0)),
            trust_env=False,  # never route a local sidecar through a proxy from the environment
        )


class _ProbeError(Exception):
    """The endpoint answered, but not usefully (a status or a body we cannot use)."""


class HttpEmbedder:
    """Embeds through an OpenAI-compatible endpoint, `batch_size` texts per request."""

    def __init__(
        self,
        endpoint: Endpoint,
        identity: EmbedderIdentity,
        batch_size: int,
        timeout_s: float,
        request_model: str | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._identity = identity
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        # The name sent in requests: the configured one, even when the server reports another.
        self._request_model = request_model or identity.model
        self._client = endpoint.client(timeout_s)
        # Closes the pool's sockets before the client is collected (no ResourceWarning).
        self._close = weakref.finalize(self, self._client.close)

    def close(self) -> None:
        """Close the kept connections (idempotent)."""
        self._close()

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity

    def embed(self, texts: list[str]) -> Vectors:
        """Vectors for `texts`, one request per `batch_size` texts.

        Raises:
            ExtractionError: the endpoint failed or answered with vectors we cannot use; the
                message names the endpoint.
        """
        dim = self._identity.dim
        out = np.empty((len(texts), dim), dtype=np.float32)
        if not texts:
            return out
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            try:
                rows, _ = _request(self._client, self.endpoint, self._request_model, batch)
            except httpx2.TransportError as exc:
                raise ExtractionError(
                    f"embedder at {self.endpoint.where} unreachable: {_describe(exc)}"
                ) from exc
            except _ProbeError as exc:
                raise ExtractionError(f"embedder at {self.endpoint.where}: {exc}") from exc
            if rows.shape[1] != dim:
                raise ExtractionError(
                    f"embedder at {self.endpoint.where} returned {rows.shape[1]}-dimensional "
                    f"vectors; this workspace embeds with {dim} dimensions "
                    f"({self._identity.model})"
                )
            out[start : start + len(batch)] = rows
        return out


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _request(
    client: httpx2.Client, endpoint: Endpoint, model: str, texts: list[str]
) -> tuple[Vectors, Any]:
    """One `POST /v1/embeddings`: the rows in input order, L2-normalised, and the `model` the
    response names (if any).

    Raises:
        httpx2.TransportError: nothing usable came back at the transport level.
        _ProbeError: an error status, or a body that is not n vectors of one dimension.
    """
    response = client.post(endpoint.request_url, json={"model": model, "input": texts})
    if response.status_code != 200:
        body = response.text[:_ERROR_BODY_CHARS].strip()
        raise _ProbeError(f"HTTP {response.status_code}" + (f": {body}" if body else ""))
    try:
        payload: Any = response.json()
        data = payload["data"]
        reported = payload.get("model")
        ordered = sorted(data, key=lambda item: int(item.get("index", 0)))
        rows = np.asarray([item["embedding"] for item in ordered], dtype=np.float32)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _ProbeError(f"unusable response body ({_describe(exc)})") from exc
    if rows.ndim != 2 or rows.shape[0] != len(texts) or rows.shape[1] == 0:
        raise _ProbeError(
            f"expected {len(texts)} vectors, got an array of shape {tuple(rows.shape)}"
        )
    if not np.isfinite(rows).all():
        raise _ProbeError("the vectors contain NaN or infinite values")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    np.divide(rows, norms, out=rows, where=norms > 0)
    return rows, reported


def _reported_model(response_model: Any, configured: str) -> str:
    return response_model if isinstance(response_model, str) and response_model else configured


def connect_http(
    endpoint: Endpoint,
    *,
    model: str | None,
    dim: int | None,
    batch_size: int = 64,
    timeout_s: float = 30.0,
) -> HttpEmbedder:
    """Probe the endpoint and return an embedder for it (docs/api.md §startup, the embedding
    endpoint).

    Args:
        endpoint: the URL or Unix socket.
        model: the model name to request (default the reference's `bge-base-en-v1.5`).
        dim: `LCG_EMBEDDING_DIM`, if set: the dimension the endpoint must produce, and the one
            used when the probe fails for a reason other than the transport.
        batch_size: texts per request.
        timeout_s: the time one request may take.

    Raises:
        ConfigError: the socket does not exist, the endpoint cannot be reached, its probe
            failed (and no dimension is configured), or it produces another dimension than the
            configured one. The message names the endpoint.
    """
    requested = model or DEFAULT_HTTP_MODEL
    if endpoint.uds is not None and not Path(endpoint.uds).exists():
        raise ConfigError(f"embedder socket {endpoint.uds} does not exist")
    try:
        with endpoint.client(timeout_s) as client:
            rows, reported = _request(client, endpoint, requested, [_PROBE_TEXT])
    except httpx2.TransportError as exc:
        raise ConfigError(
            f"embedder at {endpoint.where} is unreachable: {_describe(exc)}. Start the "
            "embedding server, or choose another embedder (LCG_EMBEDDER)."
        ) from exc
    except _ProbeError as exc:
        if dim is None:
            raise ConfigError(
                f"embedder probe at {endpoint.where} failed: {exc}. Fix the endpoint, or set "
                "LCG_EMBEDDING_DIM to start without the probe."
            ) from exc
        logger.warning(
            "embedder probe at %s failed (%s); using LCG_EMBEDDING_DIM=%d", endpoint.where, exc, dim
        )
        identity = EmbedderIdentity(model=requested, dim=dim)
        return HttpEmbedder(endpoint, identity, batch_size, timeout_s)
    found = int(rows.shape[1])
    if dim is not None and dim != found:
        raise ConfigError(
            f"LCG_EMBEDDING_DIM={dim}, but the embedder at {endpoint.where} returns "
            f"{found}-dimensional vectors; unset LCG_EMBEDDING_DIM or set it to {found}"
        )
    identity = EmbedderIdentity(model=_reported_model(reported, requested), dim=found)
    return HttpEmbedder(endpoint, identity, batch_size, timeout_s, request_model=requested)
