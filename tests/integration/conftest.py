"""The integration run says where the browser tests left their screenshots (CI keeps that
folder as an artifact; `ui_support.SCREENSHOTS`)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from ui_support import SCREENSHOTS

_STARTED = time.time()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    shots = [p for p in SCREENSHOTS.glob("*.png") if p.stat().st_mtime >= _STARTED - 1]
    if shots:
        terminalreporter.write_line(f"UI screenshots ({len(shots)}): {SCREENSHOTS}")
