"""Writes docs/configuration.md, the configuration reference, from the declarations in
`lcg.config.SETTINGS`: one table row per setting (its variable, default, meaning, what an
invalid value does, its deprecated aliases), in declaration order, under the section headings
below. The prose around the tables is kept here, so the whole file is generated.

`python -m lcg.configdoc` (run by `make generate`) rewrites the file;
`tests/unit/test_configdoc.py` fails while it differs from what `render()` returns.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from lcg.config import SETTINGS, Setting

__all__ = ["DOC", "SECTIONS", "render"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"

# (heading, the setting that opens the section, prose under the heading). A setting declared
# after another falls in that one's section.
SECTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "Workspace, WAL and database",
        "home",
        "`LCG_HOME` relocates all state; the database, WAL, socket and export paths default to "
        "places inside it (the layout: [design.md](design.md#workspace-layout)).",
    ),
    (
        "Embeddings",
        "embedding_model",
        "Which embedder `auto` picks, the model cache and re-embedding: "
        "[embeddings.md](embeddings.md).",
    ),
    (
        "Extraction providers",
        "replay_llm",
        "The extractor is resolved lazily, first match wins: `LCG_REPLAY_LLM` > "
        "`--extractor-uds` > `--extractor-http` > `ANTHROPIC_API_KEY` > `LCG_EXTRACTION_URL` "
        "> unconfigured (the service starts and reads work; extraction calls fail with a "
        "`configuration error` naming what to set). Details: [extraction.md](extraction.md).",
    ),
    ("Ingestion", "extractor", ""),
    ("Ontology", "workspace_root", "The file format: [ontology.md](ontology.md)."),
    (
        "HTTP API and UI",
        "http_host",
        "Routes and the security model: [http.md](http.md).",
    ),
    (
        "Server mode (FalkorDB)",
        "storage",
        "With `LCG_STORAGE=falkordb` the engine keeps the graph and each group's WAL on a "
        "FalkorDB server or cluster (`pip install 'lcg[server]'`; "
        "[server-mode.md](server-mode.md)).",
    ),
)

_HEAD = """\
# Configuration

<!-- Generated from lcg.config.SETTINGS by `make generate` (python -m lcg.configdoc): edit the
declarations, not this file. tests/unit/test_configdoc.py fails while it is stale. -->

Every setting is declared once, in `lcg.config.SETTINGS`. Precedence, lowest first: the
default < `<home>/config.toml` (keys are the setting names below, e.g. `replay_batch_size =
32`) < the environment variable < command-line flags. Settings are read once, at startup.

An invalid value stops startup with a `ConfigError` naming the variable, except where the
reference service warns and falls back to the default (*warns* below). A deprecated alias is
read, with a warning, when the `LCG_*` variable is not set.
"""


def _default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, str):
        return f"`{value}`" if value else "empty"
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(setting: Setting) -> str:
    meaning = setting.help
    if setting.on_invalid == "warn":
        meaning += " *Warns* on an invalid value."
    if setting.aliases:
        names = ", ".join(f"`{a}`" for a in setting.aliases)
        meaning += f" Deprecated alias: {names}."
    return (
        f"| `{setting.env}` | `{setting.name}` | {_cell(_default(setting.default))} "
        f"| {_cell(meaning)} |"
    )


def render(settings: tuple[Setting, ...] = SETTINGS) -> str:
    """The whole of docs/configuration.md."""
    starts = {first: (title, prose) for title, first, prose in SECTIONS}
    unknown = sorted(set(starts) - {s.name for s in settings})
    if unknown:
        raise ValueError(f"SECTIONS names settings that are not declared: {unknown}")
    out = [_HEAD]
    if settings and settings[0].name not in starts:
        raise ValueError(f"the first setting, {settings[0].name!r}, opens no section")
    for setting in settings:
        if setting.name in starts:
            title, prose = starts[setting.name]
            out.append(f"\n## {title}\n")
            if prose:
                out.append(f"\n{prose}\n")
            out.append("\n| variable | setting | default | meaning |\n| --- | --- | --- | --- |\n")
        out.append(_row(setting) + "\n")
    return "".join(out)


def main() -> int:
    DOC.write_text(render(), encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
