"""Signatures and overloads as `lcg.code.extract` parses them: a signature ends at the
declaration (no body line, no comment of the body), and the declarations of one overloaded name
are one symbol with its variants (docs/code-graph.md)."""

from __future__ import annotations

import pytest

pytest.importorskip("tree_sitter_language_pack")

from lcg.code.extract import parse_file


def _signatures(path: str, source: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {s.local: (s.signature, s.variants) for s in parse_file(path, source.encode()).symbols}


def test_a_signature_holds_no_comment_of_the_body() -> None:
    python = (
        "def f(a,  # the first\n      b):\n    # a comment of the body\n    return a\n\n"
        "class C:  # trailing\n    # inside the class\n    def m(self):  # trailing\n"
        "        # inside m\n        pass\n"
    )
    assert _signatures("m.py", python) == {
        "f": ("def f(a, b)", ()),
        "C": ("class C", ()),
        "C.m": ("def m(self)", ()),
    }
    ts = "export function g(a: number): number // why\n{\n  // body\n  return a;\n}\n"
    assert _signatures("m.ts", ts) == {"g": ("function g(a: number): number", ())}
    rust = "fn f(a: i32) -> i32 // why\n{\n    // body\n    a\n}\n"
    assert _signatures("m.rs", rust) == {"f": ("fn f(a: i32) -> i32", ())}
    go = "package p\n\nfunc F(a int) int { // why\n\t// body\n\treturn a\n}\n"
    assert _signatures("m.go", go) == {"F": ("func F(a int) int", ())}


def test_overloads_are_one_symbol_with_their_variants() -> None:
    python = (
        "from typing import overload\n\n"
        "@overload\ndef get(key: int) -> int: ...\n"
        "@overload\ndef get(key: str) -> str: ...\n"
        "def get(key):\n    return key\n\n"
        "class P:\n    @property\n    def x(self):\n        return 1\n"
        "    @x.setter\n    def x(self, value):\n        pass\n"
    )
    symbols = {s.local: s for s in parse_file("m.py", python.encode()).symbols}
    assert sorted(symbols) == ["P", "P.x", "get"]
    get = symbols["get"]
    assert get.signature == "def get(key)"
    assert get.variants == ("def get(key: int) -> int", "def get(key: str) -> str", "def get(key)")
    assert (get.line_start, get.line_end) == (3, 8)
    assert symbols["P.x"].variants == ("def x(self)", "def x(self, value)")

    ts = (
        "export function h(a: string): string;\nexport function h(a: number): number;\n"
        "export function h(a: any): any { return a; }\n"
        "class K {\n  m(a: string): void;\n  m(a: any) { }\n}\n"
    )
    assert _signatures("m.ts", ts) == {
        "h": (
            "function h(a: any): any",
            (
                "function h(a: string): string",
                "function h(a: number): number",
                "function h(a: any): any",
            ),
        ),
        "K": ("class K", ()),
        "K.m": ("m(a: any)", ("m(a: string): void", "m(a: any)")),
    }
