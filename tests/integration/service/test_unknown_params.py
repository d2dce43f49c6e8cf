"""A parameter a method does not know is refused, naming the method's parameters: over HTTP for
every method, and on every transport for lcg's own methods; the reference's methods over its
own transports (the socket, MCP) keep ignoring them (docs/api.md §envelope)."""

from __future__ import annotations

import anyio
import pytest
from ui_support import request, running_http

from lcg import Engine, Settings
from lcg.errors import InvalidRequestError
from lcg.service.registry import dispatch


def test_http_refuses_a_misspelled_parameter_and_writes_nothing(
    settings: Settings, engine: Engine
) -> None:
    with running_http(settings, engine) as service:
        status, _, body = request(
            service,
            "POST",
            "/api/knowledge_find_entities",
            {"query": "Apollo", "max_nodes": 5, "bogus": 1},
        )
        assert status == 400
        assert body["error"]["data"] == {"field": "max_nodes"}
        message = body["error"]["message"]
        assert "'max_nodes', 'bogus'" in message
        assert "query" in message and "num_results" in message  # the names it does know
        status, _, body = request(
            service,
            "POST",
            "/api/knowledge_assert_entity",
            {"name": "Ada Lovelace", "sumary": "a typo"},
        )
        assert status == 400 and body["error"]["data"] == {"field": "sumary"}
        status, _, listed = request(service, "POST", "/api/knowledge_list_entities", {})
        assert listed["count"] == 0
        # The protocol's own members still ride along.
        status, _, _ = request(
            service, "POST", "/api/knowledge_status", {"_progress_token": "t", "verbose": None}
        )
        assert status == 200


def test_lcg_s_own_methods_refuse_unknown_parameters_on_every_transport(engine: Engine) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        anyio.run(
            dispatch, engine, "knowledge_get_changes", {"since": "2025-01-01", "untill": "2026"}
        )
    assert caught.value.field == "untill"
    assert "since, until, group_ids, entity_uuid, num_results" in caught.value.message
    # The reference's methods keep ignoring them there.
    out = anyio.run(dispatch, engine, "knowledge_find_entities", {"query": "x", "max_nodes": 5})
    assert out["count"] == 0
