"""`lcg models list` with an empty model cache: the default model (the int8 variant) is marked
and pulled with no name; the float32 model is pulled by its name."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from lcg.cli.main import cli

FP32 = "all-MiniLM-L6-v2"
INT8 = "all-MiniLM-L6-v2-int8"


def test_models_list_names_the_default_and_how_to_pull_each(tmp_path: Path) -> None:
    env = {"LCG_MODELS_DIR": str(tmp_path / "models"), "LCG_HOME": str(tmp_path)}
    listed = CliRunner().invoke(cli, ["models", "list"], env=env)
    assert listed.exit_code == 0, listed.output
    lines = {line.split()[0]: line for line in listed.output.splitlines()[1:]}
    assert "(default)" in lines[INT8] and lines[INT8].rstrip().endswith("lcg models pull")
    assert "(default)" not in lines[FP32]
    assert lines[FP32].rstrip().endswith(f"lcg models pull {FP32}")
