"""The ontology: parsing, hierarchy, lookups, file resolution, fallbacks, sidecars, status."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from lcg import Settings
from lcg.ontology import (
    EMPTY_ONTOLOGY,
    load_ontology,
    ontology_status,
    parse_ontology,
    record_ingested_ontology,
    write_wal_ontology,
)
from lcg.ontology.loader import OntologyError, group_ontology_path

DOCS = """
mode: strict
entity_types:
  - name: Document
    description: Any written artefact.
  - name: rfc
    parent: Document
    aliases: [Request For Comments]
  - name: sub_doc
    parent: Rfc
  - name: Person
    keywords: [human, astronaut]
relation_types:
  - name: authored
    description: A person wrote a document.
    source_type: Person
    target_types: [Document, Rfc]
    aliases: [WROTE, penned]
    keywords: [author]
  - name: livesIn
    cardinality: one
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _bump(path: Path, text: str) -> None:
    """Rewrite a file and move its mtime on, so a cache keyed by mtime must notice."""
    stat = path.stat()
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_names_are_normalised_and_mode_defaults_to_open() -> None:
    onto = parse_ontology(
        "entity_types: [{name: peer_reviewed_paper}, {name: PERSON}]\n"
        "relation_types: [{name: affiliatedWith}]"
    )
    assert onto.mode == "open"
    assert onto.entity_type_names() == ["PeerReviewedPaper", "Person"]
    assert onto.relation_type_names() == ["AFFILIATED_WITH"]


def test_hierarchy_gives_ancestor_labels_most_general_first() -> None:
    onto = parse_ontology(DOCS)
    assert onto.mode == "strict"
    assert onto.ancestors("SubDoc") == ("Document", "Rfc", "SubDoc")
    assert onto.ancestors("rfc") == ("Document", "Rfc")
    assert onto.ancestors("Person") == ("Person",)
    assert onto.ancestors("Spaceship") == ("Spaceship",)  # undeclared: just itself
    assert onto.ancestors("Entity") == ()
    assert onto.has_hierarchy


def test_a_hierarchy_cycle_is_cut_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    text = "entity_types:\n  - {name: A, parent: B}\n  - {name: B, parent: C}\n  - {name: C, parent: A}\n"
    with caplog.at_level(logging.WARNING, logger="lcg.ontology"):
        onto = parse_ontology(text)
    assert "cycle" in caplog.text
    for name in ("A", "B", "C"):
        chain = onto.ancestors(name)
        assert chain[-1] == name and len(set(chain)) == len(chain) <= 3
    assert sum(1 for t in onto.entity_types if t.parent is None) == 1


def test_an_undeclared_parent_is_cleared_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="lcg.ontology"):
        onto = parse_ontology("entity_types: [{name: Rfc, parent: Paperwork}]")
    assert "undeclared parent" in caplog.text
    assert onto.ancestors("Rfc") == ("Rfc",)
    assert not onto.has_hierarchy


def test_entity_types_resolve_by_name_alias_and_keyword_ignoring_case() -> None:
    onto = parse_ontology(DOCS)
    assert onto.canonical_entity_type("DOCUMENT") == "Document"
    assert onto.canonical_entity_type("request-for-comments") == "Rfc"
    assert onto.canonical_entity_type("Astronaut") == "Person"  # keyword substring
    assert onto.canonical_entity_type("Spaceship") is None
    assert onto.canonical_entity_type("  ") is None


def test_relation_types_resolve_by_name_and_alias_and_keywords_only_when_asked() -> None:
    onto = parse_ontology(DOCS)
    assert onto.canonical_relation_type("authored") == "AUTHORED"
    assert onto.canonical_relation_type("wrote") == "AUTHORED"
    assert onto.canonical_relation_type("Penned") == "AUTHORED"
    assert onto.canonical_relation_type("co-author") is None
    assert onto.canonical_relation_type("co-author", keywords=True) == "AUTHORED"
    rel = next(r for r in onto.relation_types if r.name == "AUTHORED")
    assert rel.source_types == ("Person",) and rel.target_types == ("Document", "Rfc")


def test_cardinality_one_marks_a_relation_type_single_valued() -> None:
    onto = parse_ontology(DOCS)
    assert onto.is_single_valued("LIVES_IN")
    assert onto.is_single_valued("lives in")
    assert not onto.is_single_valued("AUTHORED")
    assert not onto.is_single_valued("UNKNOWN_TYPE")


@pytest.mark.parametrize(
    "text",
    [
        "mode: strict\nentity_types: [{name: A}\n",  # not YAML
        "- just\n- a list\n",
        "mode: lenient\nentity_types: [{name: A}]",
        "entity_types: {name: A}",
        "entity_types: [{description: no name}]",
        "entity_types: [Person]",
        "relation_types: [{name: R, cardinality: two}]",
        "relation_types: [{name: R, aliases: 7}]",
    ],
)
def test_malformed_text_raises(text: str) -> None:
    with pytest.raises(OntologyError):
        parse_ontology(text)


def test_empty_or_typeless_files_are_no_ontology() -> None:
    assert parse_ontology("") is EMPTY_ONTOLOGY
    assert parse_ontology("# nothing\n") is EMPTY_ONTOLOGY
    assert parse_ontology("mode: strict\nentity_types: []\n") is EMPTY_ONTOLOGY
    assert not EMPTY_ONTOLOGY.present and EMPTY_ONTOLOGY.prompt_block() == ""


def test_the_content_hash_ignores_comments_and_formatting() -> None:
    a = parse_ontology("entity_types: [{name: A}, {name: B}]")
    b = parse_ontology("# comment\nentity_types:\n  - name: B\n  - name: a\n")
    c = parse_ontology("entity_types: [{name: A, description: changed}, {name: B}]")
    assert a.content_hash() == b.content_hash() != c.content_hash()
    assert EMPTY_ONTOLOGY.content_hash() == "none"


def test_prompt_block_lists_the_vocabulary_within_bounds() -> None:
    block = parse_ontology(DOCS).prompt_block()
    assert "Rfc (is a Document" in block and "LIVES_IN (single-valued)" in block
    assert "strict" in block
    huge = "entity_types:\n" + "".join(
        f"  - {{name: Type{i}, description: {'x' * 500}}}\n" for i in range(500)
    )
    text = parse_ontology(huge).prompt_block()
    assert len(text) <= 6000 and "Type0" in text


# -- files ----------------------------------------------------------------------------------


def test_a_group_file_replaces_the_workspace_file_for_that_group_only(settings: Settings) -> None:
    _write(settings.home / "ontology.yaml", "entity_types: [{name: Workspace}]")
    _write(settings.home / "ontology" / "team.yaml", "entity_types: [{name: Team}]")
    assert load_ontology(settings, "team").entity_type_names() == ["Team"]
    assert load_ontology(settings, "other").entity_type_names() == ["Workspace"]


def test_group_file_names_are_percent_encoded(settings: Settings) -> None:
    path = group_ontology_path(settings, "team 3/ü")
    assert path == settings.home / "ontology" / "team%203%2F%C3%BC.yaml"
    _write(path, "relation_types: [{name: KNOWS}]")
    assert load_ontology(settings, "team 3/ü").relation_type_names() == ["KNOWS"]
    assert group_ontology_path(settings, "") is None
    assert load_ontology(settings, "") is EMPTY_ONTOLOGY


def test_a_malformed_group_file_falls_back_to_the_workspace_with_a_warning(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    _write(settings.home / "ontology.yaml", "entity_types: [{name: Workspace}]")
    bad = _write(settings.home / "ontology" / "team.yaml", "entity_types: [{name: Team}\n")
    with caplog.at_level(logging.WARNING, logger="lcg.ontology"):
        assert load_ontology(settings, "team").entity_type_names() == ["Workspace"]
        assert load_ontology(settings, "team").entity_type_names() == ["Workspace"]
    warnings = [r for r in caplog.records if str(bad) in r.getMessage()]
    assert len(warnings) == 1  # logged once per version of the file, not per call
    assert warnings[0].levelno == logging.WARNING


def test_a_malformed_workspace_file_means_no_ontology_with_a_warning(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    _write(settings.home / "ontology.yaml", "mode: sideways\n")
    with caplog.at_level(logging.WARNING, logger="lcg.ontology"):
        assert load_ontology(settings, "liminis") is EMPTY_ONTOLOGY
    assert "mode must be" in caplog.text


def test_an_edited_file_is_seen_without_a_restart(settings: Settings) -> None:
    path = _write(settings.home / "ontology.yaml", "entity_types: [{name: First}]")
    assert load_ontology(settings, "g").entity_type_names() == ["First"]
    _bump(path, "entity_types: [{name: Second}]")
    assert load_ontology(settings, "g").entity_type_names() == ["Second"]
    path.unlink()
    assert load_ontology(settings, "g") is EMPTY_ONTOLOGY


def test_the_workspace_root_setting_and_the_legacy_location(tmp_path: Path) -> None:
    ws = tmp_path / "project"
    settings = Settings.for_home(tmp_path / "state" / ".lcg", workspace_root=str(ws))
    _write(ws / ".graphiti" / "ontology.yaml", "entity_types: [{name: Legacy}]")
    assert load_ontology(settings, "g").entity_type_names() == ["Legacy"]
    _write(ws / ".lcg" / "ontology.yaml", "entity_types: [{name: Current}]")
    assert load_ontology(settings, "g").entity_type_names() == ["Current"]
    _write(ws / ".lcg" / "ontology" / "g.yaml", "entity_types: [{name: Own}]")
    assert load_ontology(settings, "g").entity_type_names() == ["Own"]


# -- sidecars and status --------------------------------------------------------------------


def test_wal_ontology_sidecar_records_the_guiding_ontology(settings: Settings) -> None:
    onto = parse_ontology(DOCS)
    write_wal_ontology(settings, "team 3/ü", onto)  # no stream yet: nothing written
    directory = settings.wal_dir / "team%203%2F%C3%BC"
    assert not directory.exists()
    directory.mkdir(parents=True)
    write_wal_ontology(settings, "team 3/ü", onto)
    record = json.loads((directory / ".wal-ontology.json").read_text())
    assert record == {
        "hash": onto.content_hash(),
        "mode": "strict",
        "entity_types": ["Document", "Person", "Rfc", "SubDoc"],
        "relation_types": ["AUTHORED", "LIVES_IN"],
    }
    assert [p.name for p in directory.iterdir()] == [".wal-ontology.json"]


def test_status_reports_the_workspace_ontology_and_its_drift(settings: Settings) -> None:
    assert ontology_status(settings) == {
        "present": False,
        "loaded": False,
        "mode": None,
        "entity_type_count": 0,
        "relation_type_count": 0,
        "drifted": False,
        "drift_summary": None,
    }
    path = _write(settings.home / "ontology.yaml", DOCS)
    _write(settings.home / "ontology" / "g.yaml", "entity_types: [{name: Ignored}]")
    fresh = ontology_status(settings)
    assert (fresh["present"], fresh["loaded"], fresh["mode"]) == (True, True, "strict")
    assert (fresh["entity_type_count"], fresh["relation_type_count"]) == (4, 2)
    assert fresh["drifted"] is False  # no sidecar and no episodes: nothing was built without it
    assert ontology_status(settings, has_episodes=True)["drifted"] is True

    record_ingested_ontology(settings)
    assert ontology_status(settings, has_episodes=True)["drifted"] is False
    _bump(path, DOCS + "  - name: cites\n")
    changed = ontology_status(settings, has_episodes=True)
    assert changed["drifted"] is True
    assert changed["drift_summary"] == "relation types added: [CITES]"
    path.unlink()
    removed = ontology_status(settings)
    assert removed["drifted"] is True and removed["present"] is False
    assert removed["drift_summary"] == "ontology removed since the last ingest"


def test_duplicates_the_implicit_entity_type_and_unknown_keys_are_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = (
        "entity_types:\n"
        "  - {name: Person, description: first}\n"
        "  - {name: person, description: second}\n"
        "  - {name: Entity}\n"
        "relation_types:\n"
        "  - {name: KNOWS, cardinalty: one}\n"
    )
    with caplog.at_level(logging.WARNING, logger="lcg.ontology"):
        onto = parse_ontology(text)
    assert [(t.name, t.description) for t in onto.entity_types] == [("Person", "first")]
    assert not onto.is_single_valued("KNOWS")  # the misspelt key is ignored, and said so
    messages = caplog.text
    assert "duplicate entity type Person" in messages
    assert "Entity is implicit" in messages
    assert "unknown keys ['cardinalty']" in messages
