"""The on-disk cache of judge answers, so a re-run of the same evaluation asks nothing.

A JSON Lines file of `{"key", "answer"}`; the key is a SHA-256 over the judge model, the judge
prompt version, the task and its exact inputs. Appends are flushed per answer, so an interrupted
run keeps what it paid for.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from lcg.fsmodes import open_private, private_dir

__all__ = ["JudgeCache", "judge_key"]


def judge_key(model: str, prompt_version: str, task: str, payload: Any) -> str:
    body = json.dumps(
        {"model": model, "version": prompt_version, "task": task, "payload": payload},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(body.encode()).hexdigest()


class JudgeCache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._answers: dict[str, Any] = {}
        self.hits = 0
        self.misses = 0
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line: that answer is asked again
                if isinstance(row, dict) and "key" in row:
                    self._answers[row["key"]] = row.get("answer")

    def get(self, key: str) -> Any | None:
        if key in self._answers:
            self.hits += 1
            return self._answers[key]
        self.misses += 1
        return None

    def put(self, key: str, answer: Any) -> None:
        self._answers[key] = answer
        private_dir(self.path.parent)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        with os.fdopen(open_private(self.path, flags), "a", encoding="utf-8") as f:
            f.write(json.dumps({"key": key, "answer": answer}, ensure_ascii=False) + "\n")
