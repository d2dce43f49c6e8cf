"""One TLS context per process for every provider call.

Building a verifying SSL context loads the trust store (around 100 ms here); providers open an
HTTP client per event loop they are called from (a client's pool belongs to one loop), so they
share this one context instead of building one per client.
"""

from __future__ import annotations

import functools
import ssl

import httpx2

__all__ = ["shared_ssl_context"]


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """httpx2's default verifying context, built on first use."""
    return httpx2.create_ssl_context()
