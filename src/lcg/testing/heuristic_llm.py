"""A responder for `ScriptedLlmServer` that answers lcg's extraction prompts plausibly.

It reads the episode text out of the prompt (between `<episode>` tags) and answers with what the
heuristic extractor finds there — entities for the entities prompt, co-occurrence facts among
the listed entities for the facts prompt, both for the single-call prompt, "nothing is the same"
for the dedup prompt — so tests
and benchmarks drive the real LLM path (HTTP, parsing, salvage, resolution, supersession) with
realistic volumes and no model.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lcg.extraction.heuristic import heuristic_entities, heuristic_facts

__all__ = ["heuristic_responder", "prompt_parts"]

_EPISODE = re.compile(r"<episode>\n(.*)\n</episode>", re.S)
_LISTED = re.compile(r"^- (.*) \(([^()]*)\)$", re.M)


def prompt_parts(body: dict[str, Any]) -> tuple[str, str]:
    """(system text, user text) of a chat-completions request body."""
    system, user = "", ""
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            content = str(message.get("content", ""))
            if message.get("role") == "system":
                system += content
            else:
                user += content
    return system, user


def heuristic_responder(body: dict[str, Any]) -> str:
    """The JSON text answering one lcg extraction request."""
    _, user = prompt_parts(body)
    if "EXISTING:" in user and "NEW:" in user:
        return json.dumps({"same": []})
    match = _EPISODE.search(user)
    text = match.group(1) if match else ""
    if user.startswith("ENTITIES:"):
        listed = user.split("EXISTING FACTS:", 1)[0]
        names = [m.group(1) for m in _LISTED.finditer(listed)]
        return json.dumps(heuristic_facts(text, names))
    found = heuristic_entities(text)
    if user.startswith("EXISTING FACTS:"):  # the single call: entities and facts together
        names = [e["name"] for e in found["entities"]]
        return json.dumps({**found, **heuristic_facts(text, names)})
    return json.dumps(found)
