"""The first episode of a group with no WAL stream reads nothing of the graph for its resolution
index (those group-filtered reads scan every group's rows, 5.4 s at 1M facts), and is
resolved exactly as before; a group that has rows still loads them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ingest_support import ARMSTRONG_ENTITIES, ARMSTRONG_FACTS, ARMSTRONG_TEXT, chunk

from lcg import Settings, open_engine
from lcg.extraction.providers.openai_compat import OpenAICompatProvider
from lcg.service.registry import dispatch
from lcg.storage.falkordb.backend import FalkorReader
from lcg.storage.kuzu_backend import KuzuReader
from lcg.testing.scripted_llm import ScriptedLlmServer

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio


async def test_a_new_groups_first_episode_reads_no_rows(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[list[str] | None] = []

    def spying(real: Any) -> Any:
        def spy(reader: Any, groups: list[str] | None, *args: Any, **kwargs: Any) -> Any:
            reads.append(groups)
            return real(reader, groups, *args, **kwargs)

        return spy

    for reader in (KuzuReader, FalkorReader):  # whichever store the engine runs on
        monkeypatch.setattr(reader, "entities_in_groups", spying(reader.entities_in_groups))
    answer = json.dumps({**json.loads(ARMSTRONG_ENTITIES), **json.loads(ARMSTRONG_FACTS)})
    with ScriptedLlmServer() as server:
        engine = open_engine(settings, llm=OpenAICompatProvider(base_url=server.url, model="s"))
        try:
            server.push(answer)
            first = await dispatch(
                engine,
                "knowledge_process_chunk",
                {**chunk(ARMSTRONG_TEXT, "c1", "1969-07-21T00:00:00Z"), "group_id": "fresh"},
            )
        finally:
            engine.close()
        assert (first["nodes_extracted"], first["edges_extracted"]) == (2, 1)
        assert ["fresh"] not in reads
        # The same text again in that group, now with rows, after a reopen (a new pipeline
        # that has loaded nothing): it resolves to the entities already there.
        engine = open_engine(settings, llm=OpenAICompatProvider(base_url=server.url, model="s"))
        try:
            reads.clear()  # what the ingest reads, not the open
            server.push(answer)
            again = await dispatch(
                engine,
                "knowledge_process_chunk",
                {**chunk(ARMSTRONG_TEXT, "c2", "1969-07-22T00:00:00Z"), "group_id": "fresh"},
            )
            assert ["fresh"] in reads
            found = await dispatch(engine, "knowledge_list_entities", {"group_ids": ["fresh"]})
            assert found["count"] == 2, again
        finally:
            engine.close()
