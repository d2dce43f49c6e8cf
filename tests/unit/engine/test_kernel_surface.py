"""The kernel stays small: `Engine` has at most 15 public names and
`engine/kernel.py` at most 600 lines.

A public name is what a reader of the class can reach without an underscore: its methods and
properties (the class's own and inherited ones) and the attributes an engine sets on itself,
counted on a real, open engine.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from lcg.config import Settings
from lcg.engine import kernel
from lcg.engine.kernel import Engine, open_engine

MAX_PUBLIC_NAMES = 15
MAX_KERNEL_LINES = 600


def public_names(engine: Engine) -> set[str]:
    on_class = {name for name in dir(type(engine)) if not name.startswith("_")}
    on_instance = {name for name in vars(engine) if not name.startswith("_")}
    return on_class | on_instance


def test_engine_has_at_most_15_public_names(settings: Settings) -> None:
    engine = open_engine(settings)
    try:
        names = public_names(engine)
    finally:
        engine.close()
    assert len(names) <= MAX_PUBLIC_NAMES, sorted(names)
    # The count sees what it should: the kernel's own primitives are among the names.
    assert {"read", "write", "commit_episode", "close"} <= names


def test_kernel_module_is_at_most_600_lines() -> None:
    lines = Path(inspect.getfile(kernel)).read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_KERNEL_LINES, len(lines)
