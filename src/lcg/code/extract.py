"""Parsing one source file into its structure: symbols, imports, bases and raw calls.

Owns the per-language rules (Python, TypeScript/TSX, JavaScript, Go, Rust) over tree-sitter's
concrete syntax trees. The output (`FileStructure`) holds names, signatures, the first line of
each docstring and line ranges — never a body. Nothing here resolves a name across files: calls
and bases are kept as written (`self.save`, `pkg.Run`), and `lcg.code.resolve` resolves them
against the whole repository. Deterministic and pure: the same bytes give the same structure.

tree-sitter is an optional dependency (`pip install 'lcg[code]'`): it is imported on first use,
and `CodeParserUnavailable` says how to install it when it is missing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import PurePosixPath
from typing import Any

from lcg.errors import LcgError

__all__ = [
    "EXTENSIONS",
    "CodeParserUnavailable",
    "FileStructure",
    "Import",
    "ParseFailure",
    "Symbol",
    "language_of",
    "parse_file",
]

INSTALL_HINT = "code ingestion needs tree-sitter: pip install 'lcg[code]'"

EXTENSIONS = {
    ".py": "python",
    ".pyi": "python",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".go": "go",
    ".rs": "rust",
}

_SIGNATURE_MAX = 240
_DOC_MAX = 200
_BODY_MIN = 32


class CodeParserUnavailable(LcgError):
    """tree-sitter or its grammars are not installed."""

    def __init__(self) -> None:
        super().__init__(INSTALL_HINT)


class ParseFailure(Exception):
    """A file that cannot be taken: its reason is reported per file, and the run goes on."""


@dataclass(frozen=True)
class Symbol:
    """A class (or struct, interface, trait, enum), function or method of one file.

    `local` is the name inside its module (`Engine.commit`); `parent` the `local` of the class
    holding it (None at the top level). `bases` and `calls` are as written in the source.
    `variants`: the signatures of every declaration of an overloaded name (Python `@overload`,
    TypeScript overload signatures, a name defined twice), in source order, when there are
    several; `signature` is then the implementation's (the last one with a body, else the last).
    `body_hash`: a digest of the body's text, whitespace collapsed (a move with an unchanged
    body is recognised by it); never the body itself.
    """

    kind: str  # "class" | "function" | "method"
    local: str
    name: str
    signature: str
    doc: str
    line_start: int
    line_end: int
    parent: str | None = None
    bases: tuple[str, ...] = ()
    calls: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    body_hash: str = ""


@dataclass(frozen=True)
class Import:
    """One imported module (`target`, absolute where the language allows), and the local
    names it binds: alias -> the qualified name it stands for (a module or a member of one)."""

    target: str
    names: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FileStructure:
    path: str
    language: str
    module: str
    lines: int
    symbols: tuple[Symbol, ...]
    imports: tuple[Import, ...]


def language_of(path: str) -> str | None:
    return EXTENSIONS.get(PurePosixPath(path).suffix.lower())


@cache
def _parser(language: str) -> Any:
    try:
        from tree_sitter_language_pack import get_parser
    except ImportError as exc:
        raise CodeParserUnavailable() from exc
    return get_parser(language)  # type: ignore[arg-type]  # the pack types names as a Literal


_CALL_QUERIES = {
    "python": "(call function: [(identifier) (attribute)] @fn)",
    "typescript": "(call_expression function: [(identifier) (member_expression)] @fn)"
    " (new_expression constructor: (identifier) @fn)",
    "tsx": "(call_expression function: [(identifier) (member_expression)] @fn)"
    " (new_expression constructor: (identifier) @fn)",
    "javascript": "(call_expression function: [(identifier) (member_expression)] @fn)"
    " (new_expression constructor: (identifier) @fn)",
    "go": "(call_expression function: [(identifier) (selector_expression)] @fn)",
    "rust": "(call_expression function: [(identifier) (scoped_identifier) (field_expression)] @fn)",
}


@cache
def _cursor(language: str, source: str) -> Any:
    import tree_sitter
    from tree_sitter_language_pack import get_language

    query = tree_sitter.Query(get_language(language), source)  # type: ignore[arg-type]  # the pack types names as a Literal
    return tree_sitter.QueryCursor(query)


def _query(language: str, source: str, root: Any) -> list[Any]:
    """The nodes `source`'s captures match under `root`, in document order."""
    found = [n for nodes in _cursor(language, source).captures(root).values() for n in nodes]
    return sorted(found, key=lambda n: n.start_byte)


_CALL_NAME = re.compile(r"^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$")


def _text(node: Any) -> str:
    return str(node.text.decode("utf-8", "replace"))


def _squash(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_COMMENTS = ("comment", "line_comment", "block_comment")


def _comments_in(node: Any, end: int) -> Iterator[tuple[int, int]]:
    """The byte spans of the comments under `node` that start before `end` (absolute)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.start_byte >= end:
            continue
        if n.type in _COMMENTS:
            yield n.start_byte, n.end_byte
        else:
            stack.extend(n.children)


def _header(node: Any, body: Any) -> str:
    """The declaration's text up to its body (the signature), comments dropped (tree-sitter
    puts a comment between `def f():` and the first statement before the body, and one
    between `)` and `{` before the block), whitespace collapsed."""
    source = node.text
    base = node.start_byte
    end = (body.start_byte - base) if body is not None else len(source)
    kept = bytearray()
    at = 0
    for start, stop in sorted(_comments_in(node, base + end)):
        if start - base >= at:
            kept += source[at : start - base] + b" "
            at = min(stop - base, end)
    kept += source[at:end]
    text = kept.decode("utf-8", "replace").rstrip().rstrip(":{;").rstrip()
    return _squash(text, _SIGNATURE_MAX)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip().strip("*").strip()
        if line and line != "/":
            return _squash(line, _DOC_MAX)
    return ""


def _python_doc(body: Any) -> str:
    if body is None:
        return ""
    for child in body.named_children:
        if child.type == "comment":
            continue
        string = child
        if child.type == "expression_statement" and child.named_children:
            string = child.named_children[0]
        if string.type == "string":
            parts = [_text(c) for c in string.named_children if c.type == "string_content"]
            return _first_line("".join(parts))
        return ""
    return ""


def _comment_doc(node: Any) -> str:
    """The comment block right above `node` (`//`, `///`, `/** */`, `#[...]` passed over)."""
    lines: list[str] = []
    row = node.start_point[0]
    prev = node.prev_named_sibling
    while prev is not None and prev.end_point[0] >= row - 1:
        if prev.type == "attribute_item":
            row = prev.start_point[0]
            prev = prev.prev_named_sibling
            continue
        if prev.type not in ("comment", "line_comment", "block_comment"):
            break
        lines.insert(0, _text(prev))
        row = prev.start_point[0]
        prev = prev.prev_named_sibling
    text = "\n".join(
        re.sub(r"^\s*(///?!?|/\*\*?|\*/|\*)", "", line)
        for block in lines
        for line in block.splitlines()
    )
    return _first_line(text)


class _Collector:
    """Walks the definitions of one file (never into function bodies) and collects symbols."""

    def __init__(self, language: str) -> None:
        self.language = language
        self.symbols: list[Symbol] = []
        self.spans: list[tuple[int, int, int]] = []  # (start_byte, end_byte, symbol index)
        self.receivers: dict[int, str] = {}  # symbol index -> Go receiver / Python self name
        self.declarations: set[int] = set()  # symbol indexes of overload declarations (no body)

    def add(
        self,
        kind: str,
        local: str,
        name: str,
        node: Any,
        body: Any,
        doc: str,
        *,
        parent: str | None = None,
        bases: tuple[str, ...] = (),
        outer: Any = None,
    ) -> int:
        outer = outer if outer is not None else node
        self.symbols.append(
            Symbol(
                kind,
                local,
                name,
                _header(node, body),
                doc,
                outer.start_point[0] + 1,
                outer.end_point[0] + 1,
                parent,
                bases,
                body_hash=_body_hash(body),
            )
        )
        index = len(self.symbols) - 1
        if body is None or _is_overload(outer):
            self.declarations.add(index)
        if kind != "class":
            self.spans.append((node.start_byte, node.end_byte, index))
        return index


def _body_hash(body: Any) -> str:
    if body is None:
        return ""
    text = b" ".join(body.text.split())
    if len(text) < _BODY_MIN:  # `pass`, `return x`: too common to tell one move from another
        return ""
    return hashlib.blake2b(text, digest_size=12).hexdigest()


def _is_overload(outer: Any) -> bool:
    """A Python definition decorated `@overload` / `@typing.overload`."""
    if outer.type != "decorated_definition":
        return False
    return any(
        d.type == "decorator" and _text(d).lstrip("@").strip().rsplit(".", 1)[-1] == "overload"
        for d in outer.named_children
    )


def _merge_variants(c: _Collector) -> list[Symbol]:
    """One symbol per (kind, name): the declarations of an overloaded name become its variants."""
    groups: dict[tuple[str, str], list[int]] = {}
    for i, s in enumerate(c.symbols):
        groups.setdefault((s.kind, s.local), []).append(i)
    out: list[Symbol] = []
    for indexes in groups.values():
        if len(indexes) == 1:
            out.append(c.symbols[indexes[0]])
            continue
        parts = [c.symbols[i] for i in indexes]
        implementations = [i for i in indexes if i not in c.declarations]
        main = c.symbols[implementations[-1] if implementations else indexes[-1]]
        calls = tuple(dict.fromkeys(x for p in parts for x in p.calls))
        bases = tuple(dict.fromkeys(x for p in parts for x in p.bases))
        variants = tuple(dict.fromkeys(p.signature for p in parts))
        out.append(
            Symbol(
                main.kind,
                main.local,
                main.name,
                main.signature,
                main.doc or next((p.doc for p in parts if p.doc), ""),
                min(p.line_start for p in parts),
                max(p.line_end for p in parts),
                main.parent,
                bases,
                calls,
                variants if len(variants) > 1 else (),
                main.body_hash,
            )
        )
    return out


def _name(node: Any, field_name: str = "name") -> str | None:
    child = node.child_by_field_name(field_name)
    return _text(child) if child is not None else None


# -- Python ---------------------------------------------------------------------------------


def _python_defs(c: _Collector, block: Any, prefix: str, parent: str | None) -> None:
    for child in block.named_children:
        outer, node = child, child
        if node.type == "decorated_definition":
            inner = node.child_by_field_name("definition")
            if inner is None:
                continue
            node = inner
        name = _name(node)
        if name is None:
            continue
        body = node.child_by_field_name("body")
        if node.type == "class_definition":
            supers = node.child_by_field_name("superclasses")
            bases = tuple(
                _text(b)
                for b in (supers.named_children if supers is not None else ())
                if b.type in ("identifier", "attribute")
            )
            local = prefix + name
            c.add(
                "class",
                local,
                name,
                node,
                body,
                _python_doc(body),
                parent=parent,
                bases=bases,
                outer=outer,
            )
            if body is not None:
                _python_defs(c, body, local + ".", local)
        elif node.type == "function_definition":
            kind = "method" if parent is not None else "function"
            c.add(
                kind, prefix + name, name, node, body, _python_doc(body), parent=parent, outer=outer
            )


def _python_module(path: str, root_packages: set[str]) -> str:
    """Dotted module name: the path below the outermost directory chain holding `__init__.py`."""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    # Drop leading directories that are not packages (src/, lib/, the repository's own name).
    directories = PurePosixPath(path).parent.parts
    start = len(directories)
    while start > 0 and "/".join(directories[:start]) in root_packages:
        start -= 1
    return ".".join(parts[start:]) if parts[start:] else PurePosixPath(path).stem


def _python_imports(root: Any, module: str, is_package: bool) -> list[Import]:
    out: list[Import] = []
    package = module if is_package else module.rpartition(".")[0]

    for stmt in _query("python", "(import_statement) @i (import_from_statement) @i", root):
        if stmt.type == "import_statement":
            for item in stmt.named_children:
                if item.type == "dotted_name":
                    target = _text(item)
                    out.append(Import(target, {target.split(".")[0]: target.split(".")[0]}))
                elif item.type == "aliased_import":
                    target = _name(item) or ""
                    alias = _name(item, "alias") or target
                    out.append(Import(target, {alias: target}))
            continue
        source = stmt.child_by_field_name("module_name")
        if source is None:
            continue
        raw = _text(source)
        if raw.startswith("."):
            dots = len(raw) - len(raw.lstrip("."))
            base = package.split(".") if package else []
            base = base[: len(base) - (dots - 1)] if dots > 1 else base
            rest = raw[dots:]
            target = ".".join([*base, rest] if rest else base)
        else:
            target = raw
        names: dict[str, str] = {}
        for item in stmt.children_by_field_name("name"):
            if item.type == "dotted_name":
                names[_text(item)] = f"{target}.{_text(item)}"
            elif item.type == "aliased_import":
                original = _name(item) or ""
                names[_name(item, "alias") or original] = f"{target}.{original}"
        if target:
            out.append(Import(target, names))
    return out


# -- TypeScript / JavaScript ----------------------------------------------------------------


def _ts_module(path: str) -> str:
    p = PurePosixPath(path).with_suffix("")
    return str(p.parent) if p.name == "index" and str(p.parent) != "." else str(p)


def _ts_target(spec: str, module_path: str) -> str:
    if spec.startswith("."):
        here = PurePosixPath(module_path).parent
        parts: list[str] = []
        for part in (here / spec).parts:
            if part == "..":
                if parts:
                    parts.pop()
            elif part != ".":
                parts.append(part)
        resolved = "/".join(parts)
        for ext in (".js", ".ts", ".tsx", ".mjs", ".jsx"):
            if resolved.endswith(ext):
                resolved = resolved[: -len(ext)]
        return resolved
    return spec


def _ts_defs(c: _Collector, block: Any, prefix: str, parent: str | None) -> None:
    for child in block.named_children:
        outer, node = child, child
        if node.type == "export_statement":
            inner = node.child_by_field_name("declaration")
            if inner is None:
                continue
            node = inner
        doc_node = outer
        t = node.type
        if t in (
            "class_declaration",
            "abstract_class_declaration",
            "class",
            "interface_declaration",
        ):
            name = _name(node)
            if name is None:
                continue
            bases: list[str] = []
            for part in node.named_children:
                if part.type in ("class_heritage", "extends_type_clause"):
                    for clause in part.named_children:
                        if clause.type in ("extends_clause", "implements_clause"):
                            bases += [
                                _text(x)
                                for x in clause.named_children
                                if x.type in ("identifier", "type_identifier", "member_expression")
                            ]
                        elif clause.type in ("identifier", "type_identifier", "member_expression"):
                            bases.append(_text(clause))
            body = node.child_by_field_name("body")
            local = prefix + name
            c.add(
                "class",
                local,
                name,
                node,
                body,
                _comment_doc(doc_node),
                parent=parent,
                bases=tuple(bases),
                outer=outer,
            )
            if body is not None:
                for member in body.named_children:
                    if member.type in (
                        "method_definition",
                        "method_signature",
                        "abstract_method_signature",
                    ):
                        mname = _name(member)
                        if mname:
                            c.add(
                                "method",
                                f"{local}.{mname}",
                                mname,
                                member,
                                member.child_by_field_name("body"),
                                _comment_doc(member),
                                parent=local,
                            )
        elif t in ("function_declaration", "generator_function_declaration", "function_signature"):
            name = _name(node)
            if name:
                c.add(
                    "function",
                    prefix + name,
                    name,
                    node,
                    node.child_by_field_name("body"),
                    _comment_doc(doc_node),
                    parent=parent,
                    outer=outer,
                )
        elif t in ("lexical_declaration", "variable_declaration"):
            for decl in node.named_children:
                value = (
                    decl.child_by_field_name("value")
                    if decl.type == "variable_declarator"
                    else None
                )
                name = _name(decl) if value is not None else None
                functions = ("arrow_function", "function_expression", "function")
                if name and value is not None and value.type in functions:
                    c.add(
                        "function",
                        prefix + name,
                        name,
                        decl,
                        value.child_by_field_name("body") if value is not None else None,
                        _comment_doc(doc_node),
                        parent=parent,
                        outer=outer,
                    )


def _ts_imports(root: Any, module: str) -> list[Import]:
    out: list[Import] = []
    for stmt in root.named_children:
        if stmt.type not in ("import_statement", "export_statement"):
            continue
        source = stmt.child_by_field_name("source")
        if source is None:
            continue
        spec = "".join(_text(x) for x in source.named_children if x.type == "string_fragment")
        if not spec:
            continue
        target = _ts_target(spec, module)
        names: dict[str, str] = {}
        for clause in stmt.named_children:
            if clause.type != "import_clause":
                continue
            for part in clause.named_children:
                if part.type == "identifier":  # default import
                    names[_text(part)] = f"{target}.default"
                elif part.type == "namespace_import":
                    ident = [x for x in part.named_children if x.type == "identifier"]
                    if ident:
                        names[_text(ident[0])] = target
                elif part.type == "named_imports":
                    for spec_node in part.named_children:
                        if spec_node.type != "import_specifier":
                            continue
                        original = _name(spec_node) or ""
                        names[_name(spec_node, "alias") or original] = f"{target}.{original}"
        out.append(Import(target, names))
    return out


# -- Go ---------------------------------------------------------------------------------------


def _go_receiver(node: Any) -> tuple[str | None, str | None]:
    receiver = node.child_by_field_name("receiver")
    if receiver is None:
        return None, None
    for param in receiver.named_children:
        if param.type != "parameter_declaration":
            continue
        kind = param.child_by_field_name("type")
        var = _name(param)
        while kind is not None and kind.type in ("pointer_type", "generic_type"):
            kind = kind.named_children[0] if kind.named_children else None
        return (_text(kind) if kind is not None else None), var
    return None, None


def _go_defs(c: _Collector, root: Any) -> None:
    for node in root.named_children:
        if node.type == "function_declaration":
            name = _name(node)
            if name:
                c.add(
                    "function",
                    name,
                    name,
                    node,
                    node.child_by_field_name("body"),
                    _comment_doc(node),
                )
        elif node.type == "method_declaration":
            name = _name(node)
            owner, var = _go_receiver(node)
            if name and owner:
                index = c.add(
                    "method",
                    f"{owner}.{name}",
                    name,
                    node,
                    node.child_by_field_name("body"),
                    _comment_doc(node),
                    parent=owner,
                )
                if var:
                    c.receivers[index] = var
        elif node.type == "type_declaration":
            for spec in node.named_children:
                if spec.type != "type_spec":
                    continue
                name = _name(spec)
                kind = spec.child_by_field_name("type")
                if not name or kind is None or kind.type not in ("struct_type", "interface_type"):
                    continue
                bases: list[str] = []
                if kind.type == "struct_type":
                    for fields in kind.named_children:
                        for fd in fields.named_children:
                            if (
                                fd.type == "field_declaration"
                                and fd.child_by_field_name("name") is None
                            ):
                                t = fd.child_by_field_name("type")
                                if t is not None:
                                    bases.append(_text(t).lstrip("*"))
                else:
                    for elem in kind.named_children:
                        if elem.type in ("type_elem", "constraint_elem"):
                            bases += [
                                _text(x)
                                for x in elem.named_children
                                if x.type in ("type_identifier", "qualified_type")
                            ]
                doc = _comment_doc(node) or _comment_doc(spec)
                c.add("class", name, name, spec, kind, doc, bases=tuple(bases), outer=node)


def _go_imports(root: Any) -> list[Import]:
    out: list[Import] = []
    for node in root.named_children:
        if node.type != "import_declaration":
            continue
        specs = [
            s
            for part in node.named_children
            for s in ([part] if part.type == "import_spec" else part.named_children)
            if s.type == "import_spec"
        ]
        for spec in specs:
            path_node = spec.child_by_field_name("path")
            if path_node is None:
                continue
            target = _text(path_node).strip('"`')
            alias = _name(spec) or target.rsplit("/", 1)[-1]
            out.append(Import(target, {alias: target} if alias not in ("_", ".") else {}))
    return out


# -- Rust ---------------------------------------------------------------------------------------


def _rust_module(path: str) -> str:
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if "src" in parts:
        parts = parts[parts.index("src") + 1 :]
    if parts and parts[-1] in ("lib", "main", "mod"):
        parts.pop()
    return ".".join(["crate", *parts])


def _rust_type_name(node: Any) -> str | None:
    while node is not None and node.type in (
        "generic_type",
        "reference_type",
        "scoped_type_identifier",
    ):
        inner = node.child_by_field_name("type") or node.child_by_field_name("name")
        if inner is None:
            break
        node = inner
    return _text(node) if node is not None else None


def _rust_defs(c: _Collector, block: Any, prefix: str) -> None:
    for node in block.named_children:
        t = node.type
        if t in ("struct_item", "enum_item", "trait_item", "union_item"):
            name = _name(node)
            if name:
                body = node.child_by_field_name("body")
                local = prefix + name
                c.add("class", local, name, node, body, _comment_doc(node))
                if t == "trait_item" and body is not None:
                    for member in body.named_children:
                        if member.type in ("function_item", "function_signature_item"):
                            mname = _name(member)
                            if mname:
                                c.add(
                                    "method",
                                    f"{local}.{mname}",
                                    mname,
                                    member,
                                    member.child_by_field_name("body"),
                                    _comment_doc(member),
                                    parent=local,
                                )
        elif t == "function_item":
            name = _name(node)
            if name:
                c.add(
                    "function",
                    prefix + name,
                    name,
                    node,
                    node.child_by_field_name("body"),
                    _comment_doc(node),
                )
        elif t == "impl_item":
            owner = _rust_type_name(node.child_by_field_name("type"))
            body = node.child_by_field_name("body")
            if not owner or body is None:
                continue
            local = prefix + owner
            trait = node.child_by_field_name("trait")
            if trait is not None:
                c.symbols.append(
                    Symbol(
                        "impl",
                        local,
                        owner,
                        "",
                        "",
                        node.start_point[0] + 1,
                        node.end_point[0] + 1,
                        None,
                        (_rust_type_name(trait) or "",),
                    )
                )
            for member in body.named_children:
                if member.type == "function_item":
                    mname = _name(member)
                    if mname:
                        c.add(
                            "method",
                            f"{local}.{mname}",
                            mname,
                            member,
                            member.child_by_field_name("body"),
                            _comment_doc(member),
                            parent=local,
                        )
        elif t == "mod_item":
            name = _name(node)
            body = node.child_by_field_name("body")
            if name and body is not None:
                _rust_defs(c, body, f"{prefix}{name}.")


def _rust_imports(root: Any, module: str) -> list[Import]:
    out: list[Import] = []

    def expand(node: Any, base: str) -> Iterator[tuple[str, str]]:
        t = node.type
        if t in ("identifier", "crate", "self", "super", "scoped_identifier"):
            full = _rust_path(_text(node), module)
            target = f"{base}.{full}" if base else full
            yield target.rsplit(".", 1)[-1], target
        elif t == "use_as_clause":
            path = node.child_by_field_name("path")
            alias = node.child_by_field_name("alias")
            if path is not None and alias is not None:
                target = _rust_path(_text(path), module)
                yield _text(alias), f"{base}.{target}" if base else target
        elif t == "scoped_use_list":
            path = node.child_by_field_name("path")
            items = node.child_by_field_name("list")
            head = _rust_path(_text(path), module) if path is not None else ""
            head = f"{base}.{head}" if base and head else head or base
            if items is not None:
                for item in items.named_children:
                    yield from expand(item, head)
        elif t == "use_list":
            for item in node.named_children:
                yield from expand(item, base)

    for node in root.named_children:
        if node.type != "use_declaration":
            continue
        argument = node.child_by_field_name("argument")
        if argument is None:
            continue
        for alias, target in expand(argument, ""):
            if alias == "self":
                alias, target = target.rsplit(".", 2)[-2], target.rsplit(".", 1)[0]
            owner = target.rsplit(".", 1)[0] if "." in target else target
            out.append(Import(owner, {alias: target}))
    return out


def _rust_path(text: str, module: str) -> str:
    parts = text.replace("::", ".").split(".")
    if parts and parts[0] == "self":
        parts = [*module.split("."), *parts[1:]]
    elif parts and parts[0] == "super":
        base = module.split(".")
        while parts and parts[0] == "super":
            base = base[:-1] if len(base) > 1 else base
            parts = parts[1:]
        parts = base + parts
    return ".".join(parts)


# -- the entry point ----------------------------------------------------------------------------


def _calls(language: str, root: Any, collector: _Collector) -> None:
    """Attach each call expression to the innermost function or method holding it."""
    spans = sorted(collector.spans)
    if not spans:
        return
    found: dict[int, list[str]] = {}
    captures = _query(language, _CALL_QUERIES[language], root)
    starts = [s[0] for s in spans]
    import bisect

    for node in captures:
        text = _text(node).replace("::", ".").replace("?.", ".")
        text = re.sub(r"\s+", "", text)
        if not _CALL_NAME.match(text):
            continue
        i = bisect.bisect_right(starts, node.start_byte) - 1
        owner = None
        while i >= 0:
            start, end, index = spans[i]
            if start <= node.start_byte < end:
                owner = index  # spans are sorted by start: the last containing one is innermost
                break
            i -= 1
        if owner is None:
            continue
        receiver = collector.receivers.get(owner)
        if receiver and text.startswith(receiver + "."):
            text = "self." + text[len(receiver) + 1 :]
        text = re.sub(r"^(this|Self)\.", "self.", text)
        calls = found.setdefault(owner, [])
        if text not in calls:
            calls.append(text)
    for index, calls in found.items():
        s = collector.symbols[index]
        collector.symbols[index] = Symbol(
            s.kind,
            s.local,
            s.name,
            s.signature,
            s.doc,
            s.line_start,
            s.line_end,
            s.parent,
            s.bases,
            tuple(calls),
            body_hash=s.body_hash,
        )


def parse_file(
    path: str, data: bytes, *, module: str | None = None, python_roots: set[str] | None = None
) -> FileStructure:
    """The structure of one file, `path` relative to the repository root (forward slashes).

    `module` overrides the module name (Go: the package's import path); `python_roots` are the
    directories (relative paths) that hold an `__init__.py`, so Python module names start at
    the outermost package.

    Raises:
        ParseFailure: an unknown language, text that is not UTF-8, or syntax errors.
        CodeParserUnavailable: tree-sitter is not installed.
    """
    language = language_of(path)
    if language is None:
        raise ParseFailure("not a source file of a supported language")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseFailure(f"not UTF-8 text (byte {exc.start})") from exc
    tree = _parser(language).parse(data)
    root = tree.root_node
    if root.has_error:
        raise ParseFailure(f"syntax error near line {_first_error_line(root)}")
    c = _Collector(language)
    imports: list[Import]
    if language == "python":
        name = module or _python_module(path, python_roots or set())
        _python_defs(c, root, "", None)
        imports = _python_imports(root, name, PurePosixPath(path).stem == "__init__")
    elif language in ("typescript", "tsx", "javascript"):
        name = module or _ts_module(path)
        _ts_defs(c, root, "", None)
        imports = _ts_imports(root, name)
    elif language == "go":
        directory = str(PurePosixPath(path).parent)
        package = next((c for c in root.named_children if c.type == "package_clause"), None)
        fallback = (
            _text(package.named_children[0]) if package and package.named_children else "main"
        )
        name = module or (directory if directory != "." else fallback)
        _go_defs(c, root)
        imports = _go_imports(root)
    else:
        name = module or _rust_module(path)
        _rust_defs(c, root, "")
        imports = _rust_imports(root, name)
    _calls(language, root, c)
    return FileStructure(
        path, language, name, data.count(b"\n") + 1, tuple(_merge_variants(c)), tuple(imports)
    )


def _first_error_line(root: Any) -> int:
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            return int(node.start_point[0]) + 1
        stack.extend(reversed([c for c in node.children if c.has_error or c.is_missing]))
    return int(root.start_point[0]) + 1
