"""From parsed files to the graph's shape: entity keys, their attributes, and keyed facts.

Owns the mapping rules (docs/code-graph.md): a `File` DEFINES its module and its top-level
symbols, a `Class` CONTAINS its members, a `Module` IMPORTS modules, a `Class` INHERITS the
classes it names, a function or method CALLS what it calls. Names are resolved only within the
repository (the symbols of the files given plus those the graph already knows), by the rules a
reader would apply: `self.x` in a method is its class's `x`, a bare name is its module's or
what an import bound it to, `alias.name` goes through the import. A call or base that resolves
to nothing is counted, never guessed. Pure: no I/O, no engine.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from lcg.code.extract import FileStructure, Symbol

__all__ = [
    "DesiredFact",
    "DesiredFile",
    "EntitySpec",
    "desired_file",
    "file_key",
    "module_key",
    "symbol_key",
]

PREDICATES = ("DEFINES", "CONTAINS", "IMPORTS", "INHERITS", "CALLS")

LABELS = {"class": "Class", "function": "Function", "method": "Method"}


def file_key(path: str) -> str:
    return f"file:{path}"


def module_key(name: str) -> str:
    return f"module:{name}"


def symbol_key(qualified: str) -> str:
    return f"sym:{qualified}"


@dataclass(frozen=True)
class EntitySpec:
    """An entity a file wants to exist: key, display name, label, attributes (no body)."""

    key: str
    name: str
    label: str
    attributes: dict[str, object]
    local: str = ""  # a symbol's name inside its module: what a rename keeps


@dataclass(frozen=True)
class DesiredFact:
    """A fact a file asserts, by entity keys; `detail` distinguishes versions (a signature)."""

    predicate: str
    source: str
    target: str
    detail: str
    text: str


@dataclass
class DesiredFile:
    path: str
    entities: list[EntitySpec] = field(default_factory=list)
    facts: list[DesiredFact] = field(default_factory=list)
    unresolved_calls: int = 0
    unresolved_bases: int = 0


def qualified(structure: FileStructure, symbol: Symbol) -> str:
    return f"{structure.module}.{symbol.local}"


def _candidates(raw: str, module: str, parent: str | None, aliases: Mapping[str, str]) -> list[str]:
    if raw.startswith("self."):
        rest = raw[5:]
        return [f"{module}.{parent}.{rest}"] if parent else []
    head, _, rest = raw.partition(".")
    out = [f"{module}.{raw}"]
    target = aliases.get(head)
    if target is not None:
        out.append(f"{target}.{rest}" if rest else target)
    return out


def desired_file(
    structure: FileStructure,
    known_symbols: Collection[str],
    known_modules: Collection[str],
    content_hash: str,
) -> DesiredFile:
    """What one file asserts. `known_symbols`/`known_modules`: every qualified name and module
    of the repository as it will be after this run (this file's own included)."""
    path, module = structure.path, structure.module
    out = DesiredFile(path)
    fkey, mkey = file_key(path), module_key(module)
    out.entities.append(
        EntitySpec(
            fkey,
            path,
            "File",
            {
                "code": "file",
                "path": path,
                "language": structure.language,
                "module": module,
                "lines": structure.lines,
                "content_hash": content_hash,
            },
        )
    )
    out.entities.append(
        EntitySpec(mkey, module, "Module", {"code": "module", "language": structure.language})
    )
    out.facts.append(DesiredFact("DEFINES", fkey, mkey, "", f"{path} defines module {module}"))

    aliases: dict[str, str] = {}
    for imp in structure.imports:
        aliases.update(imp.names)
        target = imp.target
        for bound in imp.names.values():  # `from pkg import sub`: the module imported is pkg.sub
            if bound in known_modules:
                target = bound
                _import(out, module, bound, known_modules)
        if target == imp.target:
            _import(out, module, target, known_modules)

    bases_of: dict[str, list[str]] = {}
    for s in structure.symbols:
        if s.kind == "impl":  # Rust `impl Trait for Type`: Type INHERITS Trait
            bases_of.setdefault(s.local, []).extend(b for b in s.bases if b)
            continue
        q = qualified(structure, s)
        key = symbol_key(q)
        attrs: dict[str, object] = {
            "code": s.kind,
            "path": path,
            "language": structure.language,
            "module": module,
            "signature": s.signature,
            "line_start": s.line_start,
            "line_end": s.line_end,
        }
        if s.doc:
            attrs["doc"] = s.doc
        if s.variants:
            attrs["variants"] = list(s.variants)
        if s.body_hash:
            attrs["body_hash"] = s.body_hash
        out.entities.append(EntitySpec(key, q, LABELS[s.kind], attrs, s.local))
        # An overloaded name is one fact whose detail holds every variant: adding or changing
        # one ends it and starts the next, so one signature set is current at a time.
        detail = "\n".join(s.variants) if s.variants else s.signature
        shown = s.signature + (f" ({len(s.variants)} variants)" if s.variants else "")
        if s.parent is None:
            out.facts.append(
                DesiredFact("DEFINES", fkey, key, detail, f"{path} defines {q}: {shown}")
            )
        else:
            pq = f"{module}.{s.parent}"
            parent_key = symbol_key(pq)
            if pq not in known_symbols:  # a Go method or Rust impl of a type of another file
                out.entities.append(
                    EntitySpec(
                        parent_key, pq, "Class", {"code": "class", "module": module}, s.parent
                    )
                )
            out.facts.append(
                DesiredFact("CONTAINS", parent_key, key, detail, f"{pq} contains {q}: {shown}")
            )
        if s.bases:
            bases_of.setdefault(s.local, []).extend(s.bases)
        for raw in s.calls:
            found = next(
                (c for c in _candidates(raw, module, s.parent, aliases) if c in known_symbols), None
            )
            if found is None:
                out.unresolved_calls += 1
            elif found != q:
                out.facts.append(
                    DesiredFact("CALLS", key, symbol_key(found), "", f"{q} calls {found}")
                )
    for local, bases in bases_of.items():
        q = f"{module}.{local}"
        for raw in dict.fromkeys(bases):
            found = next(
                (
                    c
                    for c in _candidates(raw, module, None, aliases)
                    if c in known_symbols and c != q
                ),
                None,
            )
            if found is None:
                out.unresolved_bases += 1
            else:
                out.facts.append(
                    DesiredFact(
                        "INHERITS", symbol_key(q), symbol_key(found), "", f"{q} inherits {found}"
                    )
                )
    out.facts = list({(f.predicate, f.source, f.target, f.detail): f for f in out.facts}.values())
    return out


def _import(out: DesiredFile, module: str, target: str, known_modules: Collection[str]) -> None:
    if not target or target == module:
        return
    tkey = module_key(target)
    if target not in known_modules:
        out.entities.append(
            EntitySpec(tkey, target, "Module", {"code": "module", "external": True})
        )
    out.facts.append(
        DesiredFact("IMPORTS", module_key(module), tkey, "", f"{module} imports {target}")
    )
