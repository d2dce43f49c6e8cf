"""knowledge_add_facts over MCP: the tool an agent sees (description, schema), and the scripted
changelog of changelog_support written and read back through the SDK's own client."""

from __future__ import annotations

from typing import Any

import pytest
from changelog_support import check_changelog
from mcp import Client

from lcg import Engine
from lcg.service.mcp import LocalBackend, build_server, parse_scopes, tool_table

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio


async def test_the_changelog_over_mcp(engine: Engine) -> None:
    scopes = parse_scopes("read,write,cypher")
    server = build_server(LocalBackend(engine), tool_table(scopes), scopes=scopes)
    async with Client(server, mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        description = tools["knowledge_add_facts"].description or ""
        assert "supersedes" in description and "knowledge_get_context" in description
        schema = tools["knowledge_add_facts"].input_schema
        assert schema["required"] == ["reference_time"]
        assert set(schema["properties"]["facts"]["items"]["required"]) == {
            "source",
            "target",
            "relation_type",
            "fact",
        }

        async def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
            result = await client.call_tool(method, params)
            assert not result.is_error, result.content
            assert isinstance(result.structured_content, dict)
            return result.structured_content

        await check_changelog(call)
