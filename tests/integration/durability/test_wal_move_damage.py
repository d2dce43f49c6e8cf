"""`lcg wal export` says what its WAL lacks, and `lcg wal import` refuses an incomplete WAL
(seqs missing, a line failing its checksum, a lost head) and changes nothing, unless
`--accept-damage` is given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner  # noqa: TID251  CLI tests drive click's own runner
from wal_faults import GROUP, commit_episode, lines, problems

from lcg import Settings, open_engine
from lcg.admin.walmove import export_wal, import_wal
from lcg.cli.main import cli
from lcg.errors import InvalidRequestError
from lcg.service.registry import dispatch
from lcg.wal.layout import group_dir, ordered_files

pytestmark = pytest.mark.anyio

SETTINGS_OVERRIDES = {"wal_max_events_per_file": 8}  # one episode batch per file


async def _three_files(settings: Settings) -> list[Path]:
    engine = open_engine(settings)
    try:
        for n in range(3):
            await commit_episode(engine, n, [3 * n + 1, 3 * n + 2, 3 * n + 3])
    finally:
        engine.close()
    files = ordered_files(group_dir(settings.wal_dir, GROUP))
    assert len(files) == 3
    return files


def _export(settings: Settings, target: Path) -> dict[str, Any]:
    engine = open_engine(settings)
    try:
        result: dict[str, Any] = export_wal(engine, target)["groups"][GROUP]
        return result
    finally:
        engine.close()


def _fresh(tmp_path: Path) -> Settings:
    return Settings.for_home(tmp_path / "other" / ".lcg", embedder="hash")


async def _refused(settings: Settings, source: Path, match: str) -> None:
    engine = open_engine(settings)
    try:
        with pytest.raises(InvalidRequestError, match=match):
            import_wal(engine, source)
        status = await dispatch(engine, "knowledge_status", {})
        assert (status["entity_count"], status["episode_count"]) == (0, 0)
        assert engine.parts.wal.bounds(GROUP).max_seq is None
    finally:
        engine.close()


async def test_a_gap_is_reported_by_export_and_refused_by_import(
    settings: Settings, tmp_path: Path
) -> None:
    files = await _three_files(settings)
    files[1].unlink()  # seqs 8..15
    exported = _export(settings, tmp_path / "out")
    assert exported["problems"] == [
        {"kind": "seq_gap", "file": files[2].name, "first_seq": 8, "last_seq": 15}
    ]
    other = _fresh(tmp_path)
    await _refused(other, tmp_path / "out", r"seq_gap: seqs 8\.\.15")

    engine = open_engine(other)
    try:
        imported = import_wal(engine, tmp_path / "out", accept_damage=True)
        assert imported["groups"][GROUP]["lines"] == 16
        assert [(p["kind"], p["first_seq"], p["last_seq"]) for p in await problems(engine)] == [
            ("seq_gap", 8, 15)
        ]
    finally:
        engine.close()


async def test_a_line_failing_its_checksum_is_reported_by_export_and_refused_by_import(
    settings: Settings, tmp_path: Path
) -> None:
    await _three_files(settings)
    path, index, raw = lines(settings)[10]  # a line of the second episode's batch
    middle = len(raw) // 2
    flipped = raw[:middle] + bytes([raw[middle] ^ 0x04]) + raw[middle + 1 :]
    data = path.read_bytes().split(b"\n")
    data[index] = flipped
    path.write_bytes(b"\n".join(data))
    exported = _export(settings, tmp_path / "out")
    kinds = [p["kind"] for p in exported["problems"]]
    assert kinds == ["batch_not_applied", "unreadable_lines"]
    assert (exported["problems"][0]["first_seq"], exported["problems"][0]["last_seq"]) == (8, 15)
    await _refused(_fresh(tmp_path), tmp_path / "out", "seq_gap: seqs 8..15")


async def test_a_lost_first_file_is_reported_by_export_and_refused_by_import(
    settings: Settings, tmp_path: Path
) -> None:
    files = await _three_files(settings)
    files[0].unlink()
    exported = _export(settings, tmp_path / "out")
    assert exported["problems"] == [
        {"kind": "wal_start_missing", "file": files[1].name, "first_seq": 0, "last_seq": 7}
    ]
    await _refused(_fresh(tmp_path), tmp_path / "out", "wal_start_missing")


async def test_the_cli_refuses_a_damaged_export_without_accept_damage(
    settings: Settings, tmp_path: Path
) -> None:
    files = await _three_files(settings)
    files[1].unlink()
    _export(settings, tmp_path / "out")
    home = str(tmp_path / "other" / ".lcg")
    env = {"LCG_EMBEDDER": "hash", "LCG_EXTRACTOR": "heuristic"}
    runner = CliRunner()
    refused = runner.invoke(cli, ["--home", home, "wal", "import", str(tmp_path / "out")], env=env)
    assert isinstance(refused.exception, InvalidRequestError)  # `main` prints it on one line
    assert "--accept-damage" in str(refused.exception)
    accepted = runner.invoke(
        cli,
        ["--home", home, "wal", "import", "--accept-damage", str(tmp_path / "out")],
        env=env,
    )
    assert accepted.exit_code == 0, accepted.output
