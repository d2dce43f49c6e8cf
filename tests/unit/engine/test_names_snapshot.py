"""`NameIndex.save` / `restore`: the index read back equals the one saved (any characters in
names, uuids and groups, entities without created_at), only under the stamp it was saved
with, and only while its bytes are the ones saved; an untrusted index is never saved."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lcg.engine.names import NameIndex

STAMP = {"positions": {"wal_position:g": '{"applied_seq": 7}'}, "entities": 5}


def _index() -> NameIndex:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    index = NameIndex()
    index.load(
        [
            ("g", "Alice", "e-2", at, False),
            ("g", " alice ", "e-1", at, True),
            ("g", "line\nbreak\0nul", "e-3", None, False),
            ("grüppe\n", "Zoë ☃", "ü-4", at - timedelta(days=400), False),
            ("g", "", "e-5", at + timedelta(microseconds=1), False),
        ]
    )
    return index


def _same(a: NameIndex, b: NameIndex) -> None:
    assert dict(a._by_key) == dict(b._by_key)
    assert a._key_of == b._key_of


def test_restore_gives_back_the_saved_index(tmp_path: Path) -> None:
    index = _index()
    index.save(tmp_path, STAMP)
    back = NameIndex()
    assert back.restore(tmp_path, STAMP)
    _same(back, index)
    assert back.lookup("g", "ALICE") == [("e-1", True), ("e-2", False)]
    assert back.lookup("grüppe\n", "zoë ☃") == [("ü-4", False)]
    back.put("g", "Alice", "e-0", datetime(2025, 1, 1, tzinfo=UTC), False)  # still updatable
    assert back.lookup("g", "alice")[0] == ("e-0", False)


def test_an_empty_index_round_trips(tmp_path: Path) -> None:
    NameIndex().save(tmp_path, STAMP)
    back = _index()
    assert back.restore(tmp_path, STAMP)
    assert len(back) == 0


def test_another_stamp_or_changed_bytes_are_refused(tmp_path: Path) -> None:
    _index().save(tmp_path, STAMP)
    other = {**STAMP, "entities": 6}
    untouched = NameIndex()
    assert not untouched.restore(tmp_path, other)
    assert not untouched.restore(tmp_path, {"positions": STAMP["positions"]})
    data = tmp_path / "names.npz"
    raw = bytearray(data.read_bytes())
    raw[-40] ^= 1
    data.write_bytes(bytes(raw))
    assert not untouched.restore(tmp_path, STAMP)
    assert len(untouched) == 0


def test_an_unchanged_index_rewrites_only_its_stamp(tmp_path: Path) -> None:
    index = _index()
    index.save(tmp_path, STAMP)
    data = tmp_path / "names.npz"
    before = data.stat().st_mtime_ns
    moved = {**STAMP, "positions": {"wal_position:g": '{"applied_seq": 9}'}}
    index.save(tmp_path, moved)
    assert data.stat().st_mtime_ns == before
    assert json.loads((tmp_path / "stamp.json").read_text())["positions"] == moved["positions"]
    index.remove("e-5")
    index.save(tmp_path, STAMP)
    back = NameIndex()
    assert back.restore(tmp_path, STAMP)
    _same(back, index)


def test_an_untrusted_index_is_not_saved(tmp_path: Path) -> None:
    index = _index()
    index.save(tmp_path, STAMP)
    index.trusted = False
    index.save(tmp_path, STAMP)
    assert not NameIndex().restore(tmp_path, STAMP)
