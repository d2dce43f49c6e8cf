"""One TLS context per process for every provider call.

Building a verifying SSL context loads the trust store (around 100 ms here); providers open a
fresh HTTP client per call (a client's pool belongs to one event loop), so they share this one
context instead of building one per call.
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
