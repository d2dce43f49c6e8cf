"""Two `lcg serve` processes on one real FalkorDB (at the engine level).

Both ingest episodes into the same group at once, through the scripted OpenAI-compatible LLM
(`heuristic_responder`), from one shared set of names, so they keep creating the same entities
and racing for the group's position. A process that loses a race catches up and resolves the
episode again (lcg.engine.follow). The group must end as one process writing the same
episodes in sequence, in the order the race committed them: the same entities, facts,
episodes and mentions, by name and time, and nothing twice.

A second test writes through one process and measures how long the other takes to find it
(each follows the group streams into its search index); the figures are printed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from rpc_support import ServiceProcess, short_socket_dir, wait_healthy

from lcg.service.rpc.client import RpcClient
from lcg.testing.falkordb_workload import duplicates
from lcg.testing.heuristic_llm import heuristic_responder
from lcg.testing.scripted_llm import ScriptedLlmServer

FIRST = ["Ada", "Bruno", "Clara", "Dmitri", "Elena", "Farid", "Greta", "Hugo"]
LAST = ["Quill", "Marsh", "Okafor", "Lindqvist"]
NAMES = [f"{f} {la}" for f in FIRST for la in LAST][:24]
PER_PROCESS = 150
CLIENTS_PER_PROCESS = 3
T0 = datetime(2025, 3, 1, tzinfo=UTC)


def _episodes(writer: str, offset: int) -> list[dict[str, Any]]:
    """`PER_PROCESS` episodes of `writer`, each naming two people of the shared set."""
    out = []
    for i in range(PER_PROCESS):
        a, b = NAMES[(i * 7 + offset) % len(NAMES)], NAMES[(i * 5 + 3 * offset + 1) % len(NAMES)]
        if a == b:
            b = NAMES[(NAMES.index(b) + 1) % len(NAMES)]
        when = T0 + timedelta(hours=2 * i + offset)
        out.append(
            {
                "name": f"{writer}-{i}",
                "episode_body": f"{a} works with {b} on task k{i:03d}q of team {writer}.",
                "reference_time": when.isoformat().replace("+00:00", "Z"),
            }
        )
    return out


def _env(url: str, llm: str) -> dict[str, str]:
    return {
        "LCG_STORAGE": "falkordb",
        "LCG_FALKORDB_URL": url,
        "LCG_EMBEDDER": "hash",
        "LCG_EXTRACTION_URL": llm,
    }


class _Services:
    def __init__(self, root: Path, url: str, llm: str, n: int, sockets: Path) -> None:
        self.procs = [
            ServiceProcess(
                _mkdir(root / f"p{i}"), sockets / f"p{i}.sock", env=_env(url, llm)
            ).start()
            for i in range(n)
        ]

    def paths(self) -> list[Path]:
        return [p.socket_path for p in self.procs]

    def stop(self) -> list[int]:
        return [p.stop() for p in self.procs]


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def services(
    tmp_path: Path, falkordb_url: str, request: pytest.FixtureRequest
) -> Iterator[_Services]:
    from lcg.storage.falkordb.backend import FalkorBackend

    admin = FalkorBackend(falkordb_url)
    try:
        admin.client.flushall()
    finally:
        admin.close()
    n = getattr(request, "param", 2)
    with ScriptedLlmServer(heuristic_responder) as llm, short_socket_dir() as sockets:
        running = _Services(tmp_path, falkordb_url, llm.url, n, sockets)
        try:
            for path in running.paths():
                wait_healthy(path)
            yield running
        finally:
            codes = running.stop()
        assert codes == [0] * n, [p.stderr_path.read_text()[-3000:] for p in running.procs]


def _summary(url: str, group: str) -> dict[str, list[Any]]:
    """The group by names and times: entities (name, created_at, summary), facts (source,
    predicate, target, fact, valid_at, invalid_at, still current), episodes (body,
    valid_at) and mentions (body, name); duplicates kept."""
    from lcg.storage.falkordb.backend import FalkorBackend

    backend = FalkorBackend(url)
    try:
        with backend.read() as r:
            entities = r.entities_in_groups([group])
            facts = r.facts_with_hops([group])
            episodes = r.episodes_recent(group, 1_000_000)
            mentions = r.episode_mentions([e.uuid for e in episodes])
    finally:
        backend.close()
    name = {e.uuid: e.name for e in entities}
    body = {e.uuid: e.content for e in episodes}
    return {
        "entities": sorted((e.name, str(e.created_at), e.summary) for e in entities),
        "facts": sorted(
            (
                name[f.source_uuid],
                f.name,
                name[f.target_uuid],
                f.fact,
                str(f.valid_at),
                str(f.invalid_at),
                f.expired_at is None,
            )
            for f in facts
        ),
        "episodes": sorted((e.content, str(e.valid_at)) for e in episodes),
        "mentions": sorted((body[ep], name[ent]) for ep, ents in mentions.items() for ent in ents),
    }


def _commit_order(url: str, group: str) -> list[str]:
    """The episode names in the order the group's stream committed them."""
    from lcg.storage.falkordb.backend import FalkorBackend

    backend = FalkorBackend(url)
    try:
        return [r.data["name"] for r in backend.stream_records(group) if r.op == "episode.add"]
    finally:
        backend.close()


def _send(path: Path, group: str, episodes: list[dict[str, Any]], errors: list[str]) -> None:
    try:
        with RpcClient(path, timeout=120) as client:
            for ep in episodes:
                client.call("knowledge_add_episode", {**ep, "group_id": group})
    except Exception as exc:  # reported by the test, with the process's side
        errors.append(f"{type(exc).__name__}: {exc}")


def test_two_processes_ingesting_one_group_end_as_one_process_in_sequence(
    services: _Services, falkordb_url: str
) -> None:
    a, b = services.paths()
    work = {a: _episodes("alpha", 0), b: _episodes("beta", 1)}
    errors: list[str] = []
    threads = [
        threading.Thread(target=_send, args=(path, "race", eps[k::CLIENTS_PER_PROCESS], errors))
        for path, eps in work.items()
        for k in range(CLIENTS_PER_PROCESS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(900)
    assert errors == []
    raced = _summary(falkordb_url, "race")
    for part, rows in raced.items():
        assert duplicates(rows) == [], part
    by_name = {ep["name"]: ep for eps in work.values() for ep in eps}
    order = _commit_order(falkordb_url, "race")
    assert sorted(order) == sorted(by_name)  # every episode committed once
    assert {r[0] for r in raced["entities"]} == {n for n in NAMES if n in str(by_name)}

    with RpcClient(b, timeout=60) as client:
        other = client.call("knowledge_status", {})["storage"]["follower"]
    # One process, the same episodes in the order the race committed them.
    with RpcClient(a, timeout=120) as client:
        lost = client.call("knowledge_status", {})["storage"]["follower"]["lost_races"]
        for name in order:
            client.call("knowledge_add_episode", {**by_name[name], "group_id": "sequence"})
        status = client.call("knowledge_status", {})
    assert raced == _summary(falkordb_url, "sequence")
    follower = status["storage"]["follower"]
    assert follower["running"] is True
    assert follower["groups"]["race"]["lag"] == 0  # nothing left to apply once quiet
    assert follower["applied_commits"] > 0  # it did apply the other process's commits
    assert lost + other["lost_races"] > 0  # they did race
    assert follower["lost_races"] == lost  # writing alone, nothing was lost
    print(json.dumps({"race_episodes": len(order), "lost_races": [lost, other["lost_races"]]}))


def test_a_write_through_one_process_is_found_through_the_other(services: _Services) -> None:
    from lcg.testing.follow_delay import follow_delay

    a, b = services.paths()
    with RpcClient(a, timeout=60) as writer, RpcClient(b, timeout=60) as reader:
        delay = follow_delay(writer, reader, writes=50)
        back = follow_delay(reader, writer, writes=10, group="follow-back")
    print(json.dumps({"follow_delay": delay, "follow_delay_back": back}))
    assert delay["missed"] == 0 and back["missed"] == 0
    assert delay["found"] == 50


@pytest.mark.anyio
async def test_an_ingest_index_takes_in_another_process_commits_in_place(
    tmp_path: Path, falkordb_url: str
) -> None:
    """Two engines on one server (as two processes): B's resolution index of a group applies
    A's later entity and fact operations from the stream instead of reloading the group, and
    B then resolves A's new name to A's entity (never a second one)."""
    from lcg import Settings, open_engine
    from lcg.ingest.catchup import catch_up_index
    from lcg.ingest.pipeline import pipeline_for
    from lcg.service.registry import dispatch
    from lcg.storage.falkordb.backend import FalkorBackend

    admin = FalkorBackend(falkordb_url)
    admin.client.flushall()
    admin.close()

    def settings(name: str) -> Settings:
        return Settings.for_home(
            tmp_path / name,
            embedder="hash",
            extractor="heuristic",
            storage="falkordb",
            falkordb_url=falkordb_url,
        )

    a, b = open_engine(settings("a")), open_engine(settings("b"))
    try:
        add = {"name": "e", "group_id": "g"}
        await dispatch(a, "knowledge_add_episode", {**add, "episode_body": "Ada Quill met Bo."})
        await dispatch(b, "knowledge_add_episode", {**add, "episode_body": "Bo met Cy Marsh."})
        index = pipeline_for(b)._indexes["g"]
        before = index.position
        body = "Dag Lindqvist met Ada Quill."  # a sentence the offline extractor reads as a fact
        await dispatch(a, "knowledge_add_episode", {**add, "episode_body": body})
        b._follow.sync("g")  # what B's follower thread does within a moment
        assert catch_up_index(b, index) is True
        assert index.position is not None and before is not None
        assert index.position[1] > before[1]
        dag = index.lookup_norm("Dag Lindqvist")
        assert dag is not None and any(
            dag in (f.source_uuid, f.target_uuid) for f in index.facts.values()
        )
        await dispatch(b, "knowledge_add_episode", {**add, "episode_body": "Dag Lindqvist left."})
        nodes = await dispatch(b, "knowledge_get_nodes_by_group", {"group_ids": ["g"]})
        names = sorted(n["name"] for n in nodes["nodes"])
        assert names.count("Dag Lindqvist") == 1
        assert pipeline_for(b)._indexes["g"] is index  # taken in place, not reloaded
    finally:
        a.close()
        b.close()
