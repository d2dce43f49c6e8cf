"""lcg.service.params: validation at the wire edge (docs/api.md §parameters).

Where the reference treats a wrongly typed value as absent, lcg refuses it with an error naming
the field; these tests pin both the reference's accepted shapes and lcg's refusals.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

import pydantic
import pytest

from lcg.errors import InvalidRequestError
from lcg.service import params as p
from lcg.service.methods import admin as admin_methods
from lcg.service.methods import embedding as embedding_methods
from lcg.service.methods import graph as graph_methods
from lcg.service.methods import search as search_methods
from lcg.service.methods import temporal as temporal_methods
from lcg.service.params import parse_params
from lcg.service.registry import REGISTRY

VARIANT_C = "group_ids is required and must be a non-empty array of non-empty strings"


M = TypeVar("M", bound=p.Params)


def parsed(model: type[M], raw: Any) -> M:
    result = parse_params(model, raw)
    assert isinstance(result, model)
    return result


def refused(model: type[p.Params], raw: Any) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as info:
        parse_params(model, raw)
    return info.value


# -- group_ids -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({}, None),
        ({"group_ids": None}, None),
        ({"group_ids": []}, []),
        ({"group_ids": "g"}, ["g"]),
        ({"group_ids": ["a", "b"]}, ["a", "b"]),
        ({"group_ids": ["b", "a", "b"]}, ["b", "a"]),
        ({"group_ids": [""]}, [""]),
    ],
)
def test_variant_a_omitted_means_all_and_empty_means_none(
    raw: dict[str, Any], expected: list[str] | None
) -> None:
    assert parsed(graph_methods.GroupsParams, raw).group_ids == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({}, None),
        ({"group_ids": None}, None),
        ({"group_ids": []}, None),
        ({"group_ids": "g"}, ["g"]),
        ({"group_ids": ["a", "b", "a"]}, ["a", "b"]),
    ],
)
@pytest.mark.parametrize(
    "model",
    [
        graph_methods.ListEntitiesParams,
        graph_methods.ListRelationshipsParams,
        graph_methods.NeighborsParams,
        graph_methods.BySourceParams,
        search_methods.SearchPassagesParams,
        temporal_methods.ChangesParams,
        temporal_methods.ContextParams,
        embedding_methods.BackfillEmbeddingsParams,
    ],
)
def test_variant_b_omitted_or_empty_means_all(
    model: type[p.Params], raw: dict[str, Any], expected: list[str] | None
) -> None:
    required = {"entity_uuid": "e", "source": "s", "query": "q", "since": "2024-01-01"}
    fields = {k: v for k, v in required.items() if k in model.model_fields}
    assert parsed(model, {**fields, **raw}).group_ids == expected


@pytest.mark.parametrize("model", [graph_methods.GroupsParams, graph_methods.ListEntitiesParams])
@pytest.mark.parametrize("value", [5, True, {"g": 1}, ["g", 5], [None]])
def test_optional_group_ids_of_the_wrong_type_are_refused(
    model: type[p.Params], value: Any
) -> None:
    err = refused(model, {"group_ids": value})
    assert err.field == "group_ids"


@pytest.mark.parametrize(
    "raw",
    [
        {},
        {"group_ids": None},
        {"group_ids": []},
        {"group_ids": "g"},
        {"group_ids": [""]},
        {"group_ids": ["g", ""]},
        {"group_ids": [5]},
        {"group_ids": 5},
        {"group_ids": {"g": 1}},
    ],
    ids=[
        "omitted",
        "null",
        "empty",
        "bare-string",
        "empty-string",
        "one-empty",
        "number-element",
        "number",
        "object",
    ],
)
@pytest.mark.parametrize(
    "model",
    [
        graph_methods.DeleteBySourceParams,
        graph_methods.DeleteChunkParams,
        graph_methods.DeleteByGroupParams,
    ],
)
def test_variant_c_requires_a_non_empty_array_of_non_empty_strings(
    model: type[p.Params], raw: dict[str, Any]
) -> None:
    other = {"source_file": "notes.md", "chunk_id": "c"}
    fields = {k: v for k, v in other.items() if k in model.model_fields}
    err = refused(model, {**fields, **raw})
    assert err.field == "group_ids"
    assert err.message == VARIANT_C


def test_variant_c_removes_duplicates_keeping_first_seen_order() -> None:
    a = parsed(graph_methods.DeleteByGroupParams, {"group_ids": ["b", "a", "b", "c", "a"]})
    assert a.group_ids == ["b", "a", "c"]


def test_variant_c_checks_the_source_file_first() -> None:
    assert refused(graph_methods.DeleteBySourceParams, {}).field == "source_file"
    assert refused(graph_methods.DeleteChunkParams, {"group_ids": []}).field == "chunk_id"


# -- knowledge_rebuild_from_wal (docs/api.md §knowledge_rebuild_from_wal) --------------------------


@pytest.mark.parametrize("name", ["from_seq", "to_seq"])
@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "{} must be a non-negative integer, not a boolean"),
        (False, "{} must be a non-negative integer, not a boolean"),
        (-1, "{} must be non-negative, got -1"),
        (-42, "{} must be non-negative, got -42"),
        (1.5, "{} must be a non-negative integer"),
        (2.0, "{} must be a non-negative integer"),
        ("3", "{} must be a non-negative integer"),
        ([1], "{} must be a non-negative integer"),
        ({"n": 1}, "{} must be a non-negative integer"),
    ],
)
def test_rebuild_seqs_are_validated_strictly_with_the_reference_messages(
    name: str, value: Any, message: str
) -> None:
    err = refused(admin_methods.RebuildParams, {name: value})
    assert err.field == name
    assert err.message == message.format(name)
    assert err.wire_message() == "IPC error: " + message.format(name)


def test_to_seq_before_from_seq_is_refused_with_the_reference_message() -> None:
    err = refused(admin_methods.RebuildParams, {"from_seq": 5, "to_seq": 3})
    assert err.field == "to_seq"
    assert err.message == (
        "knowledge_rebuild_from_wal: to_seq (3) must not be less than from_seq (5) — bounded "
        "replay requires from_seq <= to_seq."
    )


def test_to_seq_before_the_default_from_seq_is_impossible() -> None:
    assert parsed(admin_methods.RebuildParams, {"to_seq": 0}).to_seq == 0


def test_from_seq_is_checked_before_to_seq() -> None:
    assert refused(admin_methods.RebuildParams, {"from_seq": -1, "to_seq": "x"}).field == "from_seq"


def test_seqs_are_checked_before_the_group_id() -> None:
    assert refused(admin_methods.RebuildParams, {"group_id": 5, "from_seq": -1}).field == "from_seq"
    assert (
        refused(admin_methods.RebuildParams, {"group_id": "/" * 67, "to_seq": True}).field
        == "to_seq"
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({}, ("liminis", 0, None, False, False)),
        ({"from_seq": None, "to_seq": None}, ("liminis", 0, None, False, False)),
        ({"group_id": ""}, ("liminis", 0, None, False, False)),
        ({"group_id": "g", "from_seq": 3, "to_seq": 3}, ("g", 3, 3, False, False)),
        (
            {"from_seq": 2**64, "dry_run": True, "force_clear": True},
            ("liminis", 2**64, None, True, True),
        ),
    ],
)
def test_rebuild_defaults_and_accepted_values(
    raw: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    a = parsed(admin_methods.RebuildParams, raw)
    assert (a.group_id, a.from_seq, a.to_seq, a.dry_run, a.force_clear) == expected


# -- single group ids ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group_id", "fragment"),
    [
        ("", 'writes to group "" cannot be logged'),
        (5, "group_id must be a string"),
        ("/" * 67, "1-200"),
        ("é" * 34, "1-200"),
    ],
)
@pytest.mark.parametrize(
    "model", [graph_methods.AssertEntityParams, graph_methods.AssertRelationshipParams]
)
def test_write_group_ids_must_be_loggable(
    model: type[p.Params], group_id: Any, fragment: str
) -> None:
    base = {"name": "n", "source_name": "a", "target_name": "b", "predicate": "P"}
    err = refused(
        model, {**{k: v for k, v in base.items() if k in model.model_fields}, "group_id": group_id}
    )
    assert err.field == "group_id"
    assert fragment in err.message


def test_a_read_may_name_the_empty_group() -> None:
    assert parsed(graph_methods.GetEpisodesParams, {"group_id": ""}).group_id == ""
    assert refused(graph_methods.GetEpisodesParams, {"group_id": 5}).field == "group_id"


# -- other fields --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "raw", "field"),
    [
        (graph_methods.AssertEntityParams, {}, "name"),
        (graph_methods.AssertEntityParams, {"name": "  "}, "name"),
        (graph_methods.AssertEntityParams, {"name": "n", "entity_uuid": ""}, "entity_uuid"),
        (graph_methods.AssertEntityParams, {"name": "n", "labels": "Person"}, "labels"),
        (graph_methods.AssertEntityParams, {"name": "n", "labels": ["Person", None]}, "labels"),
        (graph_methods.AssertEntityParams, {"name": "n", "summary": 3}, "summary"),
        (graph_methods.AssertEntityParams, {"name": "n", "attributes": "{}"}, "attributes"),
        (graph_methods.AssertEntityParams, {"name": "n", "attributes": [["a", 1]]}, "attributes"),
        (
            graph_methods.AssertRelationshipParams,
            {"source_name": "a", "target_name": "b"},
            "predicate",
        ),
        (
            graph_methods.AssertRelationshipParams,
            {"source_name": "a", "target_name": "b", "predicate": "P", "valid_at": "soon"},
            "valid_at",
        ),
        (
            graph_methods.AssertRelationshipParams,
            {"source_name": "a", "target_name": "b", "predicate": "P", "valid_at": 0},
            "valid_at",
        ),
        (graph_methods.DeleteByGroupParams, {"group_ids": ["g"], "confirm": "true"}, "confirm"),
        (graph_methods.DeleteByGroupParams, {"group_ids": ["g"], "dry_run": 1}, "dry_run"),
        (graph_methods.ClearAllParams, {"confirm": "true"}, "confirm"),
        (graph_methods.ClearAllParams, {"confirm": True, "preserve_wal": "false"}, "preserve_wal"),
        (graph_methods.ListEntitiesParams, {"num_results": 0}, "num_results"),
        (graph_methods.ListEntitiesParams, {"num_results": "5"}, "num_results"),
        (graph_methods.ListEntitiesParams, {"num_results": 5.0}, "num_results"),
        (graph_methods.NeighborsParams, {"entity_uuid": "e", "num_results": -1}, "num_results"),
        (graph_methods.GetEpisodesParams, {"last_n": True}, "last_n"),
        (graph_methods.EdgesByUuidsParams, {"uuids": "u"}, "uuids"),
        (admin_methods.QueryCypherParams, {"query": ""}, "query"),
    ],
)
def test_wrongly_typed_fields_are_refused_by_name(
    model: type[p.Params], raw: dict[str, Any], field: str
) -> None:
    err = refused(model, raw)
    assert err.field == field
    assert field in err.wire_message()


def test_the_reference_messages_for_required_text() -> None:
    assert refused(graph_methods.AssertEntityParams, {}).message == "name is required"
    assert refused(graph_methods.AssertEntityParams, {"name": " "}).message == (
        "name is required and must be a non-empty string"
    )
    assert refused(
        graph_methods.AssertRelationshipParams,
        {"source_name": "a", "target_name": "b", "predicate": "P", "valid_at": "soon"},
    ).message == ("valid_at 'soon' is not a valid RFC-3339 or 'YYYY-MM-DD HH:MM:SS' timestamp")


def test_valid_at_is_parsed_to_aware_utc() -> None:
    a = parsed(
        graph_methods.AssertRelationshipParams,
        {
            "source_name": "a",
            "target_name": "b",
            "predicate": "P",
            "valid_at": "1969-07-20 20:17:40",
        },
    )
    assert a.valid_at == datetime(1969, 7, 20, 20, 17, 40, tzinfo=UTC)


def test_null_means_absent_and_unknown_members_are_ignored() -> None:
    a = parsed(
        graph_methods.AssertEntityParams,
        {"name": "n", "summary": None, "labels": None, "_progress_token": 7, "extra": {"x": 1}},
    )
    assert (a.summary, a.labels, a.group_id) == ("", None, "liminis")


@pytest.mark.parametrize("raw", [None, [], ["n"], "n", 5])
def test_params_that_are_not_an_object_read_as_empty(raw: Any) -> None:
    assert parsed(graph_methods.ClearAllParams, raw) == graph_methods.ClearAllParams()
    assert refused(graph_methods.AssertEntityParams, raw).field == "name"


def test_parsed_params_are_frozen() -> None:
    a = parsed(graph_methods.ClearAllParams, {"confirm": True})
    with pytest.raises(pydantic.ValidationError):
        a.confirm = False  # type: ignore[misc]  # assigning is the point


def test_every_registered_method_has_a_params_model() -> None:
    assert REGISTRY
    for method in REGISTRY.values():
        assert issubclass(method.params, p.Params), method.name


def test_a_bare_date_is_its_midnight_utc_wherever_a_timestamp_is_accepted() -> None:
    # `since: "2025-05-01"` was refused by knowledge_get_changes. All four
    # param modules share one validator (lcg.service.params.timestamp), so all accept it.
    from lcg.service.methods.curation import CrossGroupEdgeParams
    from lcg.service.methods.graph import EdgesByGroupParams
    from lcg.service.methods.ingest import ProcessChunkParams
    from lcg.service.methods.search import FindRelationshipsParams
    from lcg.service.methods.temporal import ChangesParams

    midnight = datetime(2025, 5, 1, tzinfo=UTC)
    assert parsed(ChangesParams, {"since": "2025-05-01"}).since == midnight
    assert parsed(EdgesByGroupParams, {"as_of": "2025-05-01"}).as_of == midnight
    assert parsed(FindRelationshipsParams, {"query": "q", "known_at": "2025-05-01"}).known_at == (
        midnight
    )
    edge = {"source_name": "a", "target_name": "b", "predicate": "P", "valid_at": "2025-05-01"}
    assert parsed(graph_methods.AssertRelationshipParams, edge).valid_at == midnight
    cross = {"source": {"uuid": "u1"}, "target": {"uuid": "u2"}, "valid_at": "2025-05-01"}
    assert parsed(CrossGroupEdgeParams, cross).valid_at == midnight
    chunk = {"chunk_text": "t", "chunk_id": "c", "source_file": "f", "reference_time": "2025-05-01"}
    assert parsed(ProcessChunkParams, chunk).reference_time == midnight
    # Still refused, with the reference's message: an impossible date, a US-style date.
    for bad in ("2025-02-30", "05/01/2025"):
        assert refused(ChangesParams, {"since": bad}).message == (
            f"since '{bad}' is not a valid RFC-3339 or 'YYYY-MM-DD HH:MM:SS' timestamp"
        )
