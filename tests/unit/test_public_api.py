"""The curated public API of `lcg`: `__all__` is pinned, sorted and importable."""

from __future__ import annotations

import importlib
import subprocess
import sys

import lcg

PUBLIC = [
    "ConfigError",
    "ConflictError",
    "Engine",
    "Entity",
    "Episode",
    "EpisodeCommit",
    "Fact",
    "Graph",
    "InvalidRequestError",
    "Invalidation",
    "LcgError",
    "NotFoundError",
    "Settings",
    "StorageError",
    "UnavailableError",
    "WalCorruptError",
    "WalError",
    "WalGenerationError",
    "load_settings",
    "open",
    "open_engine",
]


def test_all_is_pinned() -> None:
    assert lcg.__all__ == PUBLIC


def test_all_is_sorted_without_duplicates() -> None:
    assert lcg.__all__ == sorted(set(lcg.__all__))


def test_every_public_name_is_importable_from_the_package() -> None:
    namespace: dict[str, object] = {}
    exec("from lcg import *", namespace)  # the star import is what `__all__` governs
    for name in lcg.__all__:
        assert getattr(lcg, name) is namespace[name], name
        assert getattr(importlib.import_module("lcg"), name) is not None, name


def test_public_classes_and_functions_say_they_belong_to_lcg() -> None:
    for name in lcg.__all__:
        module = getattr(lcg, name).__module__
        assert module == "lcg" or module.startswith("lcg."), (name, module)


def test_every_error_is_an_lcg_error() -> None:
    errors = [getattr(lcg, n) for n in lcg.__all__ if n.endswith("Error")]
    assert errors
    assert all(issubclass(e, lcg.LcgError) for e in errors)


def test_the_package_has_a_version() -> None:
    assert isinstance(lcg.__version__, str) and lcg.__version__


def _loaded_by(statement: str) -> list[str]:
    """The lcg modules a fresh interpreter holds after running `statement`."""
    script = (
        f"import sys\n{statement}\nprint(sorted(m for m in sys.modules if m.startswith('lcg')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    loaded: list[str] = eval(done.stdout)  # a printed list of strings
    return loaded


def test_importing_the_errors_loads_only_the_errors() -> None:
    """A caller that only catches lcg's errors (a transport, a script) does not pay for the
    engine, the storage and the search index: the package imports its other names on first use."""
    assert _loaded_by("import lcg.errors") == ["lcg", "lcg.errors"]
    assert "lcg.engine.kernel" in _loaded_by("import lcg\nlcg.open_engine")
