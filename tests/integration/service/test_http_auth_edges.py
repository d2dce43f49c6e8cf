"""The bearer-token and Origin checks at their edges, against a real uvicorn server on loopback.

`test_http_security.py` covers the common cases (no header, a wrong token, a bare token, a
cross-origin POST). These pin the edges a lax check would let through: any prefix of the token,
an empty `Bearer `, the token with something appended, and a cross-origin GET (the guard must
not skip the Origin rule for safe methods: a GET returns graph data).
"""

from __future__ import annotations

import pytest
from ui_support import assert_error_shape, request, running_http

from lcg import Engine, Settings

TOKEN = "s3cret-token"


@pytest.mark.parametrize(
    "header",
    [
        "Bearer ",  # empty token
        "Bearer",  # the scheme alone
        "Bearer  ",  # only spaces
        f"Bearer {TOKEN[:1]}",  # a one-character prefix
        f"Bearer {TOKEN[:-1]}",  # every character but the last
        f"Bearer {TOKEN}x",  # the token with a suffix
        f"Basic {TOKEN}",  # the right secret under another scheme
    ],
)
def test_near_miss_tokens_are_refused(settings: Settings, engine: Engine, header: str) -> None:
    guarded = Settings.for_home(settings.home, api_token=TOKEN)
    with running_http(guarded, engine) as service:
        for method, path, body in (
            ("POST", "/api/knowledge_status", {}),
            ("GET", "/api/health", None),
        ):
            status, found, reply = request(
                service, method, path, body, headers={"Authorization": header}
            )
            assert status == 401, (header, path)
            assert found["www-authenticate"] == "Bearer"
            assert_error_shape(reply)
        # The same server does accept the exact token: the refusals above are about the header.
        good = {"Authorization": f"Bearer {TOKEN}"}
        status, _, reply = request(service, "GET", "/api/health", headers=good)
        assert status == 200 and reply["auth"] is True


def test_a_cross_origin_get_is_refused(settings: Settings, engine: Engine) -> None:
    with running_http(settings, engine) as service:
        foreign = {"Origin": "https://evil.example"}
        status, found, body = request(service, "GET", "/api/health", headers=foreign)
        assert status == 403 and "access-control-allow-origin" not in found
        assert_error_shape(body)
        status, _, body = request(service, "GET", "/api/knowledge_status", headers=foreign)
        assert status == 403
        assert_error_shape(body)
        own = {"Origin": f"http://127.0.0.1:{service.port}"}
        status, _, body = request(service, "GET", "/api/health", headers=own)
        assert status == 200 and body["state"] == "healthy"


def test_a_cross_origin_get_is_refused_with_a_token_too(settings: Settings, engine: Engine) -> None:
    guarded = Settings.for_home(settings.home, api_token=TOKEN)
    with running_http(guarded, engine) as service:
        headers = {"Authorization": f"Bearer {TOKEN}", "Origin": "https://evil.example"}
        status, _, body = request(service, "GET", "/api/health", headers=headers)
        assert status == 403
        assert_error_shape(body)
