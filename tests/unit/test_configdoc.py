"""docs/configuration.md is generated from the setting declarations (`make generate`) and stays
current: it is exactly what `lcg.configdoc.render()` returns, so a setting added, renamed or
re-documented in `lcg.config.SETTINGS` fails here until the file is regenerated."""

from __future__ import annotations

import dataclasses

import pytest

from lcg import configdoc
from lcg.config import SETTINGS


def test_the_configuration_reference_is_current() -> None:
    assert configdoc.DOC.read_text(encoding="utf-8") == configdoc.render(), (
        "docs/configuration.md is stale: run `make generate`"
    )


def test_a_changed_declaration_changes_the_reference() -> None:
    first = dataclasses.replace(SETTINGS[1], help="A new meaning | with a pipe.")
    text = configdoc.render((SETTINGS[0], first, *SETTINGS[2:]))
    assert f"| `{first.env}` | `{first.name}` | unset | A new meaning \\| with a pipe." in text
    assert text != configdoc.render()


def test_every_setting_has_one_row_in_declaration_order() -> None:
    rows = [
        line.split("|")[1].strip().strip("`")
        for line in configdoc.render().splitlines()
        if line.startswith("| `")
    ]
    assert rows == [s.env for s in SETTINGS]


def test_warnings_and_aliases_are_shown() -> None:
    text = configdoc.render()
    batch = next(line for line in text.splitlines() if line.startswith("| `LCG_REPLAY_BATCH_SIZE`"))
    assert "*Warns* on an invalid value." in batch
    db = next(line for line in text.splitlines() if line.startswith("| `LCG_DB_PATH`"))
    assert "Deprecated alias: `GRAPHITI_DB_PATH`." in db


def test_a_section_must_name_a_declared_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(configdoc, "SECTIONS", (("Gone", "no_such_setting", ""),))
    with pytest.raises(ValueError, match="no_such_setting"):
        configdoc.render()
