"""The typing maintenance methods (docs/api.md §ontology) and `knowledge_status.ontology`, through
the registry against a real Kuzu database; the LLM is a scripted client at the LlmClient seam
(and, once, a real scripted chat-completions server on loopback)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lcg import Engine, Episode, EpisodeCommit, Settings, open_engine
from lcg.admin import rebuild
from lcg.errors import ExtractionError, InvalidRequestError
from lcg.extraction.llm import LlmClient, LlmRequest, LlmResponse
from lcg.extraction.providers.openai_compat import OpenAICompatProvider
from lcg.models import Entity, Fact
from lcg.service.registry import Context, dispatch
from lcg.testing.scripted_llm import ScriptedLlmServer

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio

ONTOLOGY = """
mode: strict
entity_types:
  - name: Document
  - name: Rfc
    parent: Document
  - name: Person
relation_types:
  - name: AUTHORED
    description: a person wrote a document
    aliases: [WROTE]
    keywords: [author]
  - name: LIVES_IN
    cardinality: one
"""


class ScriptedTypes:
    """An LlmClient answering each numbered item with `answer(item)` (item: the prompt's JSON)."""

    def __init__(self, answer: Callable[[dict[str, Any]], str]) -> None:
        self.answer = answer
        self.requests: list[LlmRequest] = []

    @property
    def name(self) -> str:
        return "scripted:types"

    async def complete(self, request: LlmRequest) -> LlmResponse:
        self.requests.append(request)
        items = [json.loads(line) for line in request.user.splitlines() if line.startswith('{"id"')]
        data = {"classifications": [{"id": it["id"], "type": self.answer(it)} for it in items]}
        return LlmResponse(data=data, text=json.dumps(data), model="scripted")


class Seat:
    """The language model each engine here is opened with: a test seats the client it scripts
    (and may seat another mid-test); the engine's model is fixed at open."""

    def __init__(self) -> None:
        self.client: LlmClient | None = None

    @property
    def name(self) -> str:
        return self.client.name if self.client is not None else "scripted:empty"

    async def complete(self, request: LlmRequest) -> LlmResponse:
        assert self.client is not None, "the test seated no model"
        return await self.client.complete(request)


@pytest.fixture
def model() -> Seat:
    return Seat()


@pytest.fixture
def engine(settings: Settings, model: Seat) -> Iterator[Engine]:
    eng = open_engine(settings, llm=model)
    try:
        yield eng
    finally:
        eng.close()


class FailingClient:
    @property
    def name(self) -> str:
        return "scripted:down"

    async def complete(self, request: LlmRequest) -> LlmResponse:
        raise ExtractionError("model is down")


class ProseClient:
    """Answers with text that holds no JSON object."""

    @property
    def name(self) -> str:
        return "scripted:prose"

    async def complete(self, request: LlmRequest) -> LlmResponse:
        return LlmResponse(data=None, text="I think it is a person.", model="scripted")


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _ontology(engine: Engine, text: str = ONTOLOGY, group: str | None = None) -> None:
    home = engine.settings.home
    path = home / "ontology.yaml" if group is None else home / "ontology" / f"{group}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


async def _entity(engine: Engine, name: str, labels: list[str] | None = None, **kw: Any) -> str:
    params: dict[str, Any] = {"name": name, **kw}
    if labels is not None:
        params["labels"] = labels
    result = await dispatch(engine, "knowledge_assert_entity", params)
    return str(result["entity_uuid"])


async def _edge(
    engine: Engine, source: str, predicate: str, target: str, fact: str, rtype: str | None = None
) -> str:
    params: dict[str, Any] = {
        "source_name": source,
        "predicate": predicate,
        "target_name": target,
        "fact": fact,
    }
    if rtype is not None:
        params["relation_type"] = rtype
    result = await dispatch(engine, "knowledge_assert_relationship", params)
    return str(result["edge_uuid"])


async def _rows(engine: Engine, group: str = "liminis") -> tuple[list[Entity], list[Fact]]:
    def read(conn: Any) -> tuple[list[Entity], list[Fact]]:
        entities = sorted(conn.entities_in_groups([group]), key=lambda e: e.uuid)
        facts = sorted(conn.facts_with_hops([group]), key=lambda f: f.uuid)
        return entities, facts

    return await engine.read(read)


async def _labels(engine: Engine) -> dict[str, list[str]]:
    entities, _ = await _rows(engine)
    return {e.name: list(e.labels) for e in entities}


async def _types(engine: Engine) -> dict[str, str | None]:
    _, facts = await _rows(engine)
    return {f.fact: f.relation_type for f in facts}


def _max_seq(engine: Engine, group: str = "liminis") -> int | None:
    return engine.parts.wal.bounds(group).max_seq


async def _survives_rebuild(engine: Engine, group: str = "liminis") -> None:
    before = await _rows(engine, group)
    result = await rebuild.rebuild_from_wal(engine, group, force_clear=True)
    assert result["success"] is True
    assert await _rows(engine, group) == before


# -- knowledge_reprocess_entity_types -----------------------------------------------------------


async def test_reprocess_entity_types_types_untyped_entities_with_ancestor_labels(
    engine: Engine,
    model: Seat,
) -> None:
    _ontology(engine)
    rfc = await _entity(engine, "RFC 2119", summary="Key words for use in RFCs")
    neil = await _entity(engine, "Neil Armstrong")
    await _entity(engine, "Apollo 11", ["Mission"])  # typed: not a candidate of "untyped"
    llm = ScriptedTypes(lambda it: {"RFC 2119": "rfc", "Neil Armstrong": "Person"}[it["name"]])
    model.client = llm
    seq = _max_seq(engine)

    plan = await dispatch(engine, "knowledge_reprocess_entity_types", {"dry_run": True})
    assert plan["would_reclassify_count"] == 2
    assert sorted(plan["plan"], key=lambda p: p["entity_name"]) == [
        {
            "entity_id": neil,
            "entity_name": "Neil Armstrong",
            "old_type": None,
            "new_type": "Person",
        },
        {"entity_id": rfc, "entity_name": "RFC 2119", "old_type": None, "new_type": "Rfc"},
    ]
    prompt = llm.requests[0].user
    assert "Key words for use in RFCs" in prompt and "Types:" not in prompt  # open-ended
    assert _max_seq(engine) == seq  # a dry run writes nothing

    frames: list[dict[str, Any]] = []
    done = await dispatch(
        engine, "knowledge_reprocess_entity_types", {}, Context(progress=frames.append)
    )
    assert done == {
        "success": True,
        "reclassified_count": 2,
        "unchanged_count": 0,
        "restamped_count": 0,
        "group_id": "liminis",
    }
    assert await _labels(engine) == {
        "RFC 2119": ["Entity", "Document", "Rfc"],
        "Neil Armstrong": ["Entity", "Person"],
        "Apollo 11": ["Entity", "Mission"],
    }
    assert frames[0] == {"type": "progress", "phase": "classifying", "processed": 0, "total": 2}
    assert {"type": "progress", "phase": "writing", "total_mutations": 2} in frames
    assert {"type": "progress", "phase": "restamping"} in frames
    await _survives_rebuild(engine)


async def test_off_ontology_scope_retypes_undeclared_labels_and_restamps_the_hierarchy(
    engine: Engine,
    model: Seat,
) -> None:
    _ontology(engine)
    await _entity(engine, "Memo", ["Gadget"])  # undeclared label: a candidate
    await _entity(engine, "RFC 791", ["Rfc"])  # declared but missing its ancestor: restamped
    await _entity(engine, "Buzz", ["Person"])  # fine as it is
    await _entity(engine, "Mystery")  # untyped: a candidate; the model abstains
    answers = {"Memo": "Document", "Mystery": ""}
    llm = ScriptedTypes(lambda it: answers.get(it["name"], ""))
    model.client = llm

    done = await dispatch(engine, "knowledge_reprocess_entity_types", {"scope": "off_ontology"})
    assert done == {
        "success": True,
        "reclassified_count": 1,
        "unchanged_count": 1,
        "restamped_count": 1,
        "group_id": "liminis",
    }
    menu = llm.requests[0].user
    assert "- Document" in menu and "- Rfc" in menu and "- Person" in menu
    assert await _labels(engine) == {
        "Memo": ["Entity", "Document"],
        "RFC 791": ["Entity", "Document", "Rfc"],
        "Buzz": ["Entity", "Person"],
        "Mystery": ["Entity"],
    }
    await _survives_rebuild(engine)
    # Nothing left to do: a second run changes nothing and writes nothing.
    seq = _max_seq(engine)
    again = await dispatch(engine, "knowledge_reprocess_entity_types", {"scope": "all"})
    assert again["reclassified_count"] == 0 and again["restamped_count"] == 0
    assert _max_seq(engine) == seq


async def test_an_edit_made_while_the_model_thinks_is_kept(engine: Engine, model: Seat) -> None:
    _ontology(engine)
    await _entity(engine, "Neil Armstrong", summary="Pilot")

    class EditingClient(ScriptedTypes):
        async def complete(self, request: LlmRequest) -> LlmResponse:
            await _entity(engine, "Neil Armstrong", summary="Commander of Apollo 11")
            return await super().complete(request)

    model.client = EditingClient(lambda it: "Person")
    done = await dispatch(engine, "knowledge_reprocess_entity_types", {})
    assert done["reclassified_count"] == 1
    entities, _ = await _rows(engine)
    assert [(e.labels, e.summary) for e in entities] == [
        (("Entity", "Person"), "Commander of Apollo 11")
    ]
    await _survives_rebuild(engine)


async def test_reprocess_entity_types_uses_the_groups_own_ontology(
    engine: Engine, model: Seat
) -> None:
    _ontology(engine, "entity_types: [{name: Workspace}]")
    _ontology(engine, "entity_types: [{name: Vehicle}]", group="fleet")
    await dispatch(engine, "knowledge_assert_entity", {"name": "Saturn V", "group_id": "fleet"})
    model.client = ScriptedTypes(lambda it: "vehicle")
    done = await dispatch(
        engine, "knowledge_reprocess_entity_types", {"group_id": "fleet", "scope": "all"}
    )
    assert done["reclassified_count"] == 1 and done["group_id"] == "fleet"
    entities, _ = await _rows(engine, "fleet")
    assert [e.labels for e in entities] == [("Entity", "Vehicle")]


async def test_reprocess_entity_types_domain_failures_are_results(
    engine: Engine, model: Seat
) -> None:
    await _entity(engine, "Someone")
    seq = _max_seq(engine)
    call = "knowledge_reprocess_entity_types"
    assert await dispatch(engine, call, {"scope": "everything"}) == {
        "success": False,
        "error": "unknown scope 'everything'; valid values: untyped, off_ontology, all",
    }
    assert await dispatch(engine, call, {"scope": "off_ontology"}) == {
        "success": False,
        "error": "scope 'off_ontology' requires an ontology to be configured",
    }
    _ontology(engine, "relation_types: [{name: KNOWS}]")
    no_types = await dispatch(engine, call, {"scope": "all"})
    assert no_types["success"] is False
    assert no_types["error"].startswith("the configured ontology declares no entity types; ")

    model.client = FailingClient()
    failed = await dispatch(engine, call, {})
    assert failed == {
        "success": False,
        "group_id": "liminis",
        "error": "Failed to reprocess entity types: IPC error: model is down",
    }
    assert _max_seq(engine) == seq


async def test_an_unconfigured_llm_is_a_failure_result_only_when_needed(settings: Settings) -> None:
    engine = open_engine(settings)  # no model given, none configured
    try:
        call = "knowledge_reprocess_entity_types"
        assert await dispatch(engine, call, {}) == {
            "success": True,
            "reclassified_count": 0,
            "unchanged_count": 0,
            "group_id": "liminis",
        }
        assert await dispatch(engine, call, {"dry_run": True}) == {
            "would_reclassify_count": 0,
            "plan": [],
        }
        await _entity(engine, "Someone")
        failed = await dispatch(engine, call, {})
        assert failed["success"] is False and failed["group_id"] == "liminis"
        assert failed["error"].startswith("Failed to reprocess entity types: configuration error: ")
    finally:
        engine.close()


async def test_reprocess_entity_types_through_a_real_scripted_server(
    engine: Engine, model: Seat
) -> None:
    _ontology(engine)
    await _entity(engine, "Neil Armstrong")
    reply = json.dumps({"classifications": [{"id": 0, "type": "Person"}]})
    with ScriptedLlmServer([reply]) as server:
        model.client = OpenAICompatProvider(base_url=server.url)
        done = await dispatch(engine, "knowledge_reprocess_entity_types", {})
        assert server.count == 1
    assert done["reclassified_count"] == 1
    assert await _labels(engine) == {"Neil Armstrong": ["Entity", "Person"]}


# -- knowledge_reprocess_relation_types ---------------------------------------------------------


async def _crew(engine: Engine) -> None:
    await _entity(engine, "Neil")
    await _entity(engine, "Memo")
    await _entity(engine, "Houston")


async def test_reprocess_relation_types_classifies_facts_and_abstains_to_unclassified(
    engine: Engine,
    model: Seat,
) -> None:
    _ontology(engine)
    await _crew(engine)
    wrote = await _edge(engine, "Neil", "WROTE_IT", "Memo", "Neil wrote the memo")
    vague = await _edge(engine, "Neil", "NEAR", "Houston", "Neil was near Houston")
    await _edge(engine, "Neil", "HOME", "Houston", "Neil lives in Houston", "LIVES_IN")
    await _edge(engine, "Memo", "ABOUT", "Houston", "The memo mentions Houston", "MENTIONS")
    answers = {
        "Neil wrote the memo": "wrote",  # an alias: normalised to AUTHORED
        "Neil was near Houston": "",  # abstained
        "The memo mentions Houston": "NOT_A_TYPE",
        "Neil lives in Houston": "LIVES_IN",
    }
    llm = ScriptedTypes(lambda it: answers[it["fact"]])
    model.client = llm
    call = "knowledge_reprocess_relation_types"
    seq = _max_seq(engine)

    plan = await dispatch(engine, call, {"dry_run": True})
    assert plan["would_reclassify_count"] == 2
    assert plan["breakdown"] == {"AUTHORED": 1, "UNCLASSIFIED": 1}
    assert sorted(plan["plan"], key=lambda p: p["fact"]) == [
        {"edge_id": vague, "fact": "Neil was near Houston", "old_type": None,
         "new_type": "UNCLASSIFIED"},
        {"edge_id": wrote, "fact": "Neil wrote the memo", "old_type": None, "new_type": "AUTHORED"},
    ]  # fmt: skip
    assert "AUTHORED: a person wrote a document" in llm.requests[0].user
    assert _max_seq(engine) == seq

    done = await dispatch(engine, call, {"scope": "off_ontology"})
    assert done == {
        "success": True,
        "reclassified_count": 3,
        "unchanged_count": 0,
        "group_id": "liminis",
        "breakdown": {"AUTHORED": 1, "UNCLASSIFIED": 2},
    }
    assert await _types(engine) == {
        "Neil wrote the memo": "AUTHORED",
        "Neil was near Houston": "UNCLASSIFIED",
        "Neil lives in Houston": "LIVES_IN",
        "The memo mentions Houston": "UNCLASSIFIED",
    }
    all_scope = await dispatch(engine, call, {"scope": "all"})
    assert all_scope["reclassified_count"] == 0 and all_scope["unchanged_count"] == 4
    await _survives_rebuild(engine)


async def test_reprocess_relation_types_domain_failures_are_results(
    engine: Engine, model: Seat
) -> None:
    await _crew(engine)
    await _edge(engine, "Neil", "NEAR", "Houston", "Neil was near Houston")
    seq = _max_seq(engine)
    call = "knowledge_reprocess_relation_types"
    assert await dispatch(engine, call, {"scope": "some"}) == {
        "success": False,
        "error": "unknown scope 'some'; valid values: untyped, off_ontology, all",
    }
    none = await dispatch(engine, call, {})
    assert none["success"] is False
    assert none["error"].startswith(
        "knowledge_reprocess_relation_types requires a resolved ontology with relation_types defined — "
    )
    _ontology(engine, "entity_types: [{name: Person}]")
    assert await dispatch(engine, call, {}) == {
        "success": False,
        "error": "the configured ontology declares no relation types; "
        "knowledge_reprocess_relation_types requires at least one",
    }
    _ontology(engine)
    model.client = FailingClient()
    assert await dispatch(engine, call, {}) == {
        "success": False,
        "group_id": "liminis",
        "error": "Failed to reprocess relation types: IPC error: model is down",
    }
    model.client = ProseClient()
    unusable = await dispatch(engine, call, {"dry_run": True})
    assert unusable == {
        "success": False,
        "group_id": "liminis",
        "error": "Failed to reprocess relation types: "
        "IPC error: the model's answer has no classifications array",
    }
    assert await dispatch(engine, call, {"group_id": "empty", "dry_run": True}) == {
        "would_reclassify_count": 0,
        "plan": [],
        "breakdown": {},
    }
    assert _max_seq(engine) == seq


# -- knowledge_canonicalize_relations -----------------------------------------------------------


async def test_canonicalize_relations_maps_noise_and_residuals(engine: Engine) -> None:
    _ontology(engine)
    await _crew(engine)
    await _edge(engine, "Neil", "WROTE", "Memo", "Neil put the memo on paper")  # alias
    await _edge(engine, "Memo", "co-authored", "Neil", "Memo co-authored")  # keyword
    await _edge(engine, "Neil", "NEIL → HOUSTON", "Houston", "Neil and Houston")  # noise, blank
    await _edge(engine, "Memo", "MEMO -> HOUSTON", "Houston", "Memo and Houston", "FILED_IN")
    await _edge(engine, "Houston", "DID", "Memo", "a person wrote a document")  # gloss match
    await _edge(engine, "Houston", "LIKES", "Neil", "Houston likes Neil")  # residual
    await _edge(engine, "Neil", "CALLED", "Memo", "Neil called it", "lives_in")  # by its type
    seq = _max_seq(engine)
    call = "knowledge_canonicalize_relations"
    expected = {
        "group_id": "liminis",
        "total_edges": 7,
        "mapped_count": 4,
        "noise_count": 2,
        "residual_count": 1,
        "embedding_fallback_promoted": 1,
        "mapped_pct": 57.0,
        "noise_pct": 29.0,
        "residual_pct": 14.0,
    }
    assert await dispatch(engine, call, {"group_id": "liminis", "dry_run": True}) == {
        **expected,
        "dry_run": True,
    }
    assert _max_seq(engine) == seq

    frames: list[dict[str, Any]] = []
    done = await dispatch(engine, call, {"group_id": "liminis"}, Context(progress=frames.append))
    assert done == {**expected, "dry_run": False}
    assert {"type": "progress", "phase": "writing", "total_mutations": 7} in frames
    assert await _types(engine) == {
        "Neil put the memo on paper": "AUTHORED",
        "Memo co-authored": "AUTHORED",
        "Neil and Houston": "UNCLASSIFIED",
        "Memo and Houston": "FILED_IN",  # noise keeps an existing type
        "a person wrote a document": "AUTHORED",
        "Houston likes Neil": "UNCLASSIFIED",
        "Neil called it": "LIVES_IN",
    }
    await _survives_rebuild(engine)
    seq = _max_seq(engine)
    again = await dispatch(engine, call, {"group_id": "liminis"})
    # The promoted edge now maps by its relation_type: same classes, no embedding needed.
    assert again == {**expected, "embedding_fallback_promoted": 0, "dry_run": False}
    assert _max_seq(engine) == seq  # idempotent: no new WAL lines


async def test_canonicalize_relations_warns_when_no_type_has_a_description(engine: Engine) -> None:
    _ontology(engine, "relation_types: [{name: AUTHORED}]")
    await _crew(engine)
    await _edge(engine, "Neil", "LIKES", "Houston", "a person wrote a document")
    call = "knowledge_canonicalize_relations"
    dry = await dispatch(engine, call, {"group_id": "liminis", "dry_run": True})
    assert "embedding_warning" not in dry and dry["residual_count"] == 1
    done = await dispatch(engine, call, {"group_id": "liminis", "embedding_threshold": 0})
    assert done["embedding_fallback_promoted"] == 0
    assert (
        done["embedding_warning"]
        == "embedding fallback skipped: no canonical types have description glosses"
    )


async def test_canonicalize_relations_errors_are_rpc_errors(engine: Engine) -> None:
    await _crew(engine)
    call = "knowledge_canonicalize_relations"
    with pytest.raises(InvalidRequestError) as missing:
        await dispatch(engine, call, {})
    assert missing.value.field == "group_id"
    assert missing.value.message == "group_id is required and must be a non-empty string"
    with pytest.raises(InvalidRequestError) as no_ontology:
        await dispatch(engine, call, {"group_id": "liminis"})
    assert no_ontology.value.message.startswith(
        "knowledge_canonicalize_relations requires a resolved ontology with relation_types defined"
    )
    _ontology(engine, "entity_types: [{name: Person}]")
    with pytest.raises(InvalidRequestError) as no_types:
        await dispatch(engine, call, {"group_id": "liminis"})
    assert no_types.value.message == (
        "knowledge_canonicalize_relations requires at least one relation_type in the ontology"
    )


# -- knowledge_backfill_relation_types ----------------------------------------------------------


async def test_backfill_relation_types_derives_pseudo_types_where_blank(engine: Engine) -> None:
    await _crew(engine)
    await _edge(engine, "Neil", "works at", "Houston", "Neil works at Houston")
    await _edge(engine, "Neil", "Neil → Memo", "Memo", "Neil signed the memo yesterday afternoon")
    await _edge(engine, "Memo", "ABOUT", "Houston", "The memo is about Houston", "MENTIONS")
    call = "knowledge_backfill_relation_types"
    seq = _max_seq(engine)
    expected = {"group_id": "liminis", "total_edges": 3, "backfilled": 2}
    assert await dispatch(engine, call, {"group_id": "liminis", "dry_run": True}) == {
        **expected,
        "dry_run": True,
    }
    assert _max_seq(engine) == seq
    assert await dispatch(engine, call, {"group_id": "liminis"}) == {**expected, "dry_run": False}
    assert await _types(engine) == {
        "Neil works at Houston": "WORKS_AT",
        "Neil signed the memo yesterday afternoon": "NEIL_SIGNED_THE_MEMO",
        "The memo is about Houston": "MENTIONS",
    }
    await _survives_rebuild(engine)
    seq = _max_seq(engine)
    again = await dispatch(engine, call, {"group_id": "liminis"})
    assert again == {"group_id": "liminis", "total_edges": 3, "backfilled": 0, "dry_run": False}
    assert _max_seq(engine) == seq


# -- parameters, status -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("knowledge_reprocess_entity_types", {"scope": 5}, "scope"),
        ("knowledge_reprocess_entity_types", {"dry_run": "yes"}, "dry_run"),
        ("knowledge_reprocess_entity_types", {"group_id": ""}, "group_id"),
        ("knowledge_reprocess_relation_types", {"group_id": 7}, "group_id"),
        ("knowledge_canonicalize_relations", {"group_id": ""}, "group_id"),
        (
            "knowledge_canonicalize_relations",
            {"group_id": "liminis", "embedding_threshold": 2},
            "embedding_threshold",
        ),
        (
            "knowledge_canonicalize_relations",
            {"group_id": "liminis", "embedding_threshold": "high"},
            "embedding_threshold",
        ),
        ("knowledge_backfill_relation_types", {"group_id": ["liminis"]}, "group_id"),
        ("knowledge_backfill_relation_types", {"group_id": "liminis", "dry_run": 1}, "dry_run"),
    ],
)
async def test_bad_params_are_rejected_naming_the_field_and_change_nothing(
    engine: Engine, model: Seat, method: str, params: dict[str, Any], field: str
) -> None:
    _ontology(engine)
    await _crew(engine)
    await _edge(engine, "Neil", "NEAR", "Houston", "Neil was near Houston")
    model.client = ScriptedTypes(lambda it: "Person")
    before, seq = await _rows(engine), _max_seq(engine)
    with pytest.raises(InvalidRequestError) as err:
        await dispatch(engine, method, params)
    assert err.value.field == field
    assert await _rows(engine) == before and _max_seq(engine) == seq


async def test_status_reports_the_workspace_ontology_and_drift(engine: Engine) -> None:
    status = await dispatch(engine, "knowledge_status", {})
    assert status["ontology"] == {
        "present": False,
        "loaded": False,
        "mode": None,
        "entity_type_count": 0,
        "relation_type_count": 0,
        "drifted": False,
        "drift_summary": None,
    }
    _ontology(engine)
    shown = (await dispatch(engine, "knowledge_status", {}))["ontology"]
    assert (shown["present"], shown["mode"], shown["entity_type_count"]) == (True, "strict", 3)
    assert shown["relation_type_count"] == 2 and shown["drifted"] is False

    when = datetime(2026, 1, 1, tzinfo=UTC)
    episode = Episode(
        "ep-1", "liminis", "note", "Neil wrote a memo", created_at=when, valid_at=when
    )
    await engine.commit_episode(EpisodeCommit("liminis", episode))
    drifted = (await dispatch(engine, "knowledge_status", {}))["ontology"]
    assert drifted["drifted"] is True and drifted["drift_summary"]

    await rebuild.rebuild_from_wal(engine, "liminis", force_clear=True)  # the graph now reflects it
    assert (await dispatch(engine, "knowledge_status", {}))["ontology"]["drifted"] is False
    recorded = _read_json(engine.settings.home / "ontology-hash.json")
    assert recorded["mode"] == "strict" and recorded["relation_types"] == ["AUTHORED", "LIVES_IN"]
