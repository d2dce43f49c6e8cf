"""Writes `lcg/library/methods.py`, the typed methods of `lcg.open`'s `Graph`, from the
method declarations (`lcg.service.registry.REGISTRY`: each method's params model, its
MCP-required list, `long_running`, description) and `lcg.library.results`.

Run `python -m lcg.library.codegen` after adding or changing a method;
`tests/unit/library/test_library_front.py` fails while the checked-in file differs from what this
renders, and mypy then checks every call of the front against the declarations statically.

The rules, per method:
- the Python name is the wire name without `knowledge_` (`NAMES` overrides a few); `EXCLUDED`
  lists the methods the library does not offer, with why;
- a parameter per params-model field, in the model's order: required (positional or keyword)
  when the model requires it or the declaration lists it as required, else keyword-only with
  the model's default (`None`, meaning "absent", where the model builds its default);
- its type from the field's annotation (`_TYPES`): timestamps take a `datetime`, a `date` or
  a string, lists any sequence, a field advertised as an enum a `Literal`;
- a long-running method also takes `progress`, a callback for its progress frames;
- the result is the method's TypedDict from `results.RESULTS`, else `dict[str, Any]`.
"""

from __future__ import annotations

import json
import keyword
import sys
import textwrap
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from lcg.curation.pointers import Endpoint
from lcg.ingest.caller import GivenEntity, GivenFact
from lcg.library import results
from lcg.service.declare import Method
from lcg.service.registry import REGISTRY

__all__ = ["EXCLUDED", "NAMES", "TARGET", "python_name", "render"]

TARGET = Path(__file__).with_name("methods.py")

NAMES: dict[str, str] = {
    "health_check": "health",
    "knowledge_get_entity_timeline": "timeline",
    "knowledge_get_changes": "changes",
}
"""Wire name -> Python name, where dropping `knowledge_` is not the whole story."""

EXCLUDED: dict[str, str] = {
    "knowledge_close": "it asks a transport to shut its service down; the library's engine "
    "closes when the `async with lcg.open(...)` block ends",
}
"""Methods the library front does not offer, and why. Every other method has one."""


def python_name(wire: str) -> str:
    return NAMES.get(wire) or wire.removeprefix("knowledge_")


@dataclass
class _Imports:
    names: set[str]

    def use(self, name: str) -> str:
        self.names.add(name)
        return name


def _plain(annotation: Any) -> Any:
    """The annotation without `Annotated` metadata."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


_TYPES: dict[Any, Callable[[_Imports], str]] = {
    str: lambda i: "str",
    int: lambda i: "int",
    float: lambda i: "float",
    bool: lambda i: "bool",
    type(None): lambda i: "None",
    datetime: lambda i: f"{i.use('datetime')} | {i.use('date')} | str",
    list[str]: lambda i: f"{i.use('Sequence')}[str]",
    dict[str, Any]: lambda i: f"{i.use('Mapping')}[str, {i.use('Any')}]",
    Endpoint: lambda i: f"{i.use('Endpoint')} | {i.use('Mapping')}[str, str]",
    tuple[GivenEntity, ...]: lambda i: (
        f"{i.use('Sequence')}[{i.use('GivenEntity')} | {i.use('Mapping')}[str, {i.use('Any')}]]"
    ),
    tuple[GivenFact, ...]: lambda i: (
        f"{i.use('Sequence')}[{i.use('GivenFact')} | {i.use('Mapping')}[str, {i.use('Any')}]]"
    ),
}


def _type(annotation: Any, where: str, imports: _Imports) -> list[str]:
    """The alternatives of the library type of one (plain or union) annotation."""
    annotation = _plain(annotation)
    if _is_union(annotation):
        return [alt for arg in typing.get_args(annotation) for alt in _type(arg, where, imports)]
    render = _TYPES.get(annotation)
    if render is None:
        raise TypeError(f"{where}: no library type for {annotation!r}; add one to _TYPES")
    return [render(imports)]


def _literal(value: Any) -> str:
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if value == ():
        return "()"
    raise TypeError(f"no literal for default {value!r}")


@dataclass(frozen=True)
class _Param:
    name: str
    type: str
    default: str | None  # None: required

    def line(self) -> str:
        if self.default is None:
            return f"{self.name}: {self.type},"
        return f"{self.name}: {self.type} = {self.default},"


def _param(method: Method, name: str, field: FieldInfo, imports: _Imports) -> _Param:
    where = f"{method.name}.{name}"
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"{where} is not a Python parameter name")
    extra = field.json_schema_extra
    enum = extra.get("enum") if isinstance(extra, dict) else None
    if isinstance(enum, list):
        alternatives = [f"{imports.use('Literal')}[{', '.join(json.dumps(v) for v in enum)}]"]
    else:
        alternatives = _type(field.annotation, where, imports)
    required = field.is_required() or name in (method.required or ())
    default: str | None = None
    if not required:
        if field.default_factory is not None or field.default is None:
            default = "None"
            if "None" not in alternatives:
                alternatives.append("None")
        else:
            default = _literal(field.default)
    return _Param(name, " | ".join(dict.fromkeys(alternatives)), default)


def _docstring(method: Method) -> list[str]:
    text = f"{method.description} Wire method `{method.name}` (docs/api.md §{method.name})."
    lines = textwrap.wrap(text, width=88, break_on_hyphens=False, break_long_words=False)
    if len(lines) == 1:
        return [f'"""{lines[0]}"""']
    return [f'"""{lines[0]}', *lines[1:], '"""']


def _method(method: Method, imports: _Imports) -> list[str]:
    fields = method.params.model_fields
    params = [_param(method, name, field, imports) for name, field in fields.items()]
    required = [p for p in params if p.default is None]
    optional = [p for p in params if p.default is not None]
    signature = ["self,", *(p.line() for p in required)]
    if optional or method.long_running:
        signature.append("*,")
    signature += [p.line() for p in optional]
    if method.long_running:
        signature.append(f"progress: {imports.use('Progress')} | None = None,")
    typed = results.RESULTS.get(method.name)
    # Results by module attribute: a renamed TypedDict leaves the stale file importable (the
    # annotations are strings), so the generator can still run to fix it.
    result = f"{imports.use('results')}.{typed.__name__}" if typed is not None else "dict[str, Any]"
    imports.use("Any")
    if len(signature) == 1:
        out = [f"    async def {python_name(method.name)}(self) -> {result}:"]
    else:
        out = [f"    async def {python_name(method.name)}("]
        out += [f"        {line}" for line in signature]
        out.append(f"    ) -> {result}:")
    out += [f"        {line}" if line != '"""' else '        """' for line in _docstring(method)]
    if not params and not method.long_running:
        out.append(f'        answer = await self._call("{method.name}", {{}})')
    else:
        out.append("        answer = await self._call(")
        out.append(f'            "{method.name}",')
        if params:
            out.append("            {")
            out += [f'                "{p.name}": {p.name},' for p in params]
            out.append("            },")
        else:
            out.append("            {},")
        if method.long_running:
            out.append("            progress,")
        out.append("        )")
    if typed is not None:
        out.append(f"        return {imports.use('cast')}({result}, answer)")
    else:
        out.append("        return answer")
    return out


_MODULES = {
    "ABC": "abc",
    "abstractmethod": "abc",
    "Mapping": "collections.abc",
    "Sequence": "collections.abc",
    "date": "datetime",
    "datetime": "datetime",
    "Any": "typing",
    "Literal": "typing",
    "cast": "typing",
    "Endpoint": "lcg.curation.pointers",
    "GivenEntity": "lcg.ingest.caller",
    "GivenFact": "lcg.ingest.caller",
    "Progress": "lcg.service.declare",
    "results": "lcg.library",
}


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's isort order inside one import: constants, then classes, then the rest."""
    if name.isupper():
        return 0, name
    return (1 if name[0].isupper() else 2), name


def _import_lines(names: set[str]) -> list[str]:
    by_module: dict[str, list[str]] = {}
    for name in names:
        module = _MODULES[name]
        by_module.setdefault(module, []).append(name)
    stdlib = sorted(m for m in by_module if not m.startswith("lcg"))
    own = sorted(m for m in by_module if m.startswith("lcg"))
    out: list[str] = []
    for group in (stdlib, own):
        for module in group:
            ordered = sorted(by_module[module], key=_isort_key)
            listed = ", ".join(ordered)
            line = f"from {module} import {listed}"
            if len(line) <= 100:
                out.append(line)
            else:
                out.append(f"from {module} import (")
                out += [f"    {n}," for n in ordered]
                out.append(")")
        out.append("")
    return out


_HEADER = '''\
# Generated by `python -m lcg.library.codegen` from the method declarations: do not edit.
"""The typed methods of `lcg.open`'s `Graph`, one per registered method (see
`lcg.library.codegen` for the rules and the excluded methods). Each validates and runs exactly
as the wire method it names: it passes its arguments to `lcg.service.registry.dispatch`."""

from __future__ import annotations

'''

_CLASS = '''\
class GraphMethods(ABC):
    """One async method per wire method; `Graph` supplies `_call`."""

    @abstractmethod
    async def _call(
        self,
        method: str,
        params: dict[str, Any],
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Run wire method `method` with `params` (Python values, converted to wire values)."""
'''


def render() -> str:
    """The text of `methods.py` for the methods registered now."""
    imports = _Imports({"ABC", "abstractmethod", "Any", "Progress"})
    bodies: list[list[str]] = []
    seen: dict[str, str] = {}
    for method in REGISTRY.values():
        if method.name in EXCLUDED:
            continue
        name = python_name(method.name)
        if name in seen:
            raise ValueError(f"{method.name} and {seen[name]} both map to {name}")
        seen[name] = method.name
        bodies.append(_method(method, imports))
    lines = [*_import_lines(imports.names), "", _CLASS.rstrip("\n")]
    for body in bodies:
        lines += ["", *body]
    return _HEADER + "\n".join(lines) + "\n"


def main() -> None:
    TARGET.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {TARGET}\n")


if __name__ == "__main__":
    main()
