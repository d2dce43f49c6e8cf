"""Keeps the generated parts of docs/api.md (lcg's wire reference) in step with the method
declarations: per method, its scopes, flags, declared description and parameter table, between
`<!-- params:NAME -->` and `<!-- /params -->`. The prose around them (results, errors, lcg's
departures from the reference) is written by hand.

`python -m lcg.service.apidoc` rewrites the blocks in place and appends a section for any
registered method the document lacks (its prose then needs writing);
`tests/unit/service/test_api_doc.py` fails while the file differs from what this renders, and checks
that every `docs/api.md §...` citation in the code names a heading of the document.
"""

from __future__ import annotations

import json
import re
import sys
import types
import typing
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from lcg.service.declare import Method
from lcg.service.registry import REGISTRY

__all__ = ["DOC", "render", "wire_type"]

DOC = Path(__file__).resolve().parents[3] / "docs" / "api.md"

_BLOCK = re.compile(r"<!-- params:(?P<name>[a-z_]+) -->\n.*?<!-- /params -->\n", re.DOTALL)
_NEW_SECTIONS = "## Methods not yet described"


def _plain(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


_WIRE: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    datetime: "timestamp",
    list[str]: "string[]",
    dict[str, Any]: "object",
}


def wire_type(annotation: Any) -> str:
    """The JSON type a field takes on the wire, in the document's notation (`null`, meaning
    absent, is left out)."""
    annotation = _plain(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        parts = [wire_type(a) for a in typing.get_args(annotation) if a is not type(None)]
        return " or ".join(dict.fromkeys(parts))
    if annotation in _WIRE:
        return _WIRE[annotation]
    if typing.get_origin(annotation) is tuple:
        return f"{typing.get_args(annotation)[0].__name__.removeprefix('Given').lower()}[]"
    name = getattr(annotation, "__name__", None)
    if not isinstance(name, str):
        raise TypeError(f"no wire type for {annotation!r}")
    return name.lower()


def _default(field: FieldInfo, required: str) -> str:
    if required == "yes":
        return ""
    if field.default_factory is not None:
        return f"`{json.dumps(field.default_factory())}`"  # type: ignore[call-arg]  # no-arg factories
    value = field.default
    if value is None:
        return ""  # absent
    if isinstance(value, tuple):
        value = list(value)
    return f"`{json.dumps(value)}`"


def _notes(field: FieldInfo) -> str:
    notes: list[str] = []
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    if isinstance(extra.get("enum"), list):
        notes.append("one of " + ", ".join(f"`{v}`" for v in extra["enum"]))  # type: ignore[union-attr]  # a list, checked above
    if "minimum" in extra:
        notes.append(f">= {extra['minimum']}")
    if "maximum" in extra:
        notes.append(f"<= {extra['maximum']}")
    description = field.description or extra.get("description")
    for meta in [*field.metadata, *_metadata(field.annotation)]:
        schema = getattr(meta, "json_schema", None)
        if isinstance(schema, dict) and isinstance(schema.get("description"), str):
            description = description or schema["description"]
    if isinstance(description, str):
        notes.append(description)
    return "; ".join(notes).replace("|", "\\|")


def _metadata(annotation: Any) -> list[Any]:
    """The `Annotated` metadata anywhere inside an annotation (e.g. in `X | None`)."""
    if typing.get_origin(annotation) is typing.Annotated:
        inner, *meta = typing.get_args(annotation)
        return [*meta, *_metadata(inner)]
    return [m for arg in typing.get_args(annotation) for m in _metadata(arg)]


def _required(method: Method, name: str, field: FieldInfo) -> str:
    declared = name in (method.required or ())
    if field.is_required() or (declared and field.validate_default):
        return "yes"
    return "advertised" if declared else ""


def block(method: Method) -> str:
    """The generated part of one method's section."""
    scope = f"`{method.scope}`" if method.scope else "none (every client may call it)"
    own = method.scope_for(reference=False)
    line = f"Scope {scope}"
    if own != method.scope:
        line += f" (lcg's own scopes: `{own}`, it is destructive)"
    flags = []
    if method.long_running:
        flags.append("long-running: streams progress frames when given a `_progress_token`")
    if method.degraded_ok:
        flags.append("answers while the database is unavailable")
    if method.replaced_by:
        flags.append(f"deprecated: use `{method.replaced_by}`")
    lines = [
        f"<!-- params:{method.name} -->",
        "<!-- generated by `python -m lcg.service.apidoc` -->",
    ]
    lines.append(". ".join([line, *(f[0].upper() + f[1:] for f in flags)]) + ".")
    lines += ["", f"> {method.description}", ""]
    fields = method.params.model_fields
    if not fields:
        lines.append("No parameters.")
    else:
        lines += [
            "| param | type | required | default | notes |",
            "| --- | --- | --- | --- | --- |",
        ]
        for name, field in fields.items():
            required = _required(method, name, field)
            cells = [
                f"`{name}`",
                wire_type(field.annotation),
                required,
                _default(field, required),
                _notes(field),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("<!-- /params -->")
    return "\n".join(lines) + "\n"


def render(text: str) -> str:
    """`text` (the document) with every method's block regenerated, and a section appended
    for each registered method it has no block for."""
    seen: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        method = REGISTRY.get(name)
        if method is None:
            raise ValueError(f"docs/api.md documents {name}, which is not registered")
        seen.add(name)
        return block(method)

    out = _BLOCK.sub(replace, text)
    missing = [m for name, m in REGISTRY.items() if name not in seen]
    if missing:
        if _NEW_SECTIONS not in out:
            out = out.rstrip("\n") + f"\n\n{_NEW_SECTIONS}\n"
        for method in missing:
            out = out.rstrip("\n") + f"\n\n### {method.name}\n\n{block(method)}"
    return out


def main() -> None:
    DOC.write_text(render(DOC.read_text(encoding="utf-8")), encoding="utf-8")
    sys.stdout.write(f"wrote {DOC}\n")


if __name__ == "__main__":
    main()
