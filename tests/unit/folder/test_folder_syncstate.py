"""The sync journal: last line wins, removals, torn lines, compaction, one file per group."""

from __future__ import annotations

from pathlib import Path

from lcg.folder.syncstate import SourceRecord, SyncState


def test_records_survive_a_reload_and_the_last_line_wins(tmp_path: Path) -> None:
    state = SyncState(tmp_path, "g")
    state.record_done(SourceRecord("a.md", "h1", 2, 2))
    state.record_done(SourceRecord("b.md", "h2", 1, 1))
    state.record_done(SourceRecord("a.md", "h3", 3, 3))
    state.record_removed("b.md")
    again = SyncState(tmp_path, "g")
    assert again.is_current("a.md", "h3") and not again.is_current("a.md", "h1")
    assert "b.md" not in again.sources
    assert not SyncState(tmp_path, "other").sources


def test_a_torn_last_line_is_ignored(tmp_path: Path) -> None:
    state = SyncState(tmp_path, "g")
    state.record_done(SourceRecord("a.md", "h1", 1, 1))
    with open(state.path, "a") as f:
        f.write('{"source_file": "b.md", "content_ha')
    assert set(SyncState(tmp_path, "g").sources) == {"a.md"}


def test_the_journal_is_compacted_when_it_grows(tmp_path: Path) -> None:
    state = SyncState(tmp_path, "g/with slash")
    for i in range(200):
        state.record_done(SourceRecord("a.md", f"h{i}", 1, 1))
    assert len(state.path.read_text().splitlines()) == 200
    reloaded = SyncState(tmp_path, "g/with slash")
    assert reloaded.is_current("a.md", "h199")
    assert len(reloaded.path.read_text().splitlines()) == 1
    assert "/" not in reloaded.path.name
