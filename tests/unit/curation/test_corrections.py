"""Stamping `applied_at` into the corrections file keeps the rest of its text (lcg.curation.corrections)."""

from __future__ import annotations

from pathlib import Path

import yaml

from lcg.curation.corrections import stamp_applied

STAMP = "2026-01-01T00:00:00+00:00"


def test_stamp_adds_or_replaces_applied_at_in_every_style(tmp_path: Path) -> None:
    text = (
        "# header comment\n"
        "corrections:\n"
        "  - {id: a, type: retract, edge_uuid: e}  # flow style\n"
        "  - id: b\n"
        "    type: same_as\n"
        "    applied_at: old\n"
        "    aliases: [x]\n"
        "  - id: c\n"
        "    aliases:\n"
        "    - z\n"
        "  - id: untouched\n"
        "    type: retract\n"
    )
    path = tmp_path / "knowledge-corrections.yaml"
    path.write_text(text, encoding="utf-8")
    stamp_applied(path, text, [0, 1, 2], STAMP)
    out = path.read_text(encoding="utf-8")
    entries = yaml.safe_load(out)["corrections"]
    assert [e.get("applied_at") for e in entries] == [STAMP, STAMP, STAMP, None]
    assert entries[2]["aliases"] == ["z"] and entries[1]["aliases"] == ["x"]
    assert "# header comment" in out and "# flow style" in out
    assert not (tmp_path / "knowledge-corrections.yaml.tmp").exists()
    # Only the stamps changed: without them, the original text (minus the replaced stamp).
    restored = out.replace(f', applied_at: "{STAMP}"', "")
    assert [line for line in restored.splitlines() if STAMP not in line] == [
        line for line in text.splitlines() if "applied_at: old" not in line
    ]
