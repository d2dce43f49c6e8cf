"""The dev tools (the `dev` extra of pyproject.toml) are pinned to exact versions, so that lint,
type checks and tests give the same verdict on every machine, and the virtualenv the Makefile
builds has exactly those versions. Raising a pin is a commit of its own, noted in CHANGELOG.md."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENT = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)(?P<extras>\[[^\]]*\])?(?P<spec>.*)$")


def dev_requirements() -> list[tuple[str, str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    out = []
    for line in project["optional-dependencies"]["dev"]:
        match = REQUIREMENT.match(line.replace(" ", ""))
        assert match, line
        if match["name"] == "lcg":  # the project's own extras, not a tool
            continue
        out.append((match["name"], match["spec"]))
    return out


def test_every_dev_tool_is_pinned_to_one_version() -> None:
    loose = [
        f"{name}{spec}" for name, spec in dev_requirements() if not re.fullmatch(r"==[\w.]+", spec)
    ]
    assert loose == [], "pin these with ==: " + ", ".join(loose)


def test_the_installed_dev_tools_are_the_pinned_versions() -> None:
    wrong = {
        name: (spec[2:], version(name))
        for name, spec in dev_requirements()
        if version(name) != spec[2:]
    }
    assert wrong == {}, "(pinned, installed): rebuild the virtualenv (make clean; make test)"
