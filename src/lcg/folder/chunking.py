"""Splitting a document into chunks that fit the chunk-size advisory.

Boundaries are tried in order: Markdown headings (outside fenced code), then paragraphs (blank
lines), then sentences, then whitespace — a chunk is never cut inside a word unless one word is
longer than the whole budget. Consecutive small sections are packed into one chunk (fewer LLM
calls per document), each keeping its heading line. Every chunk starts with a context header
naming the document title and the heading path of its first section, so the extractor sees
where the text comes from.

`chunk_id` is stable for unchanged text: `<source_file>[#<record key>]#<heading path>#<ordinal>`,
the ordinal counting chunks that share a heading path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from lcg.folder.documents import Document

__all__ = ["Chunk", "chunk_document"]

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+")
# A header smaller than this leaves no room for text; chunk sizes are clamped to it.
_MIN_BODY = 200


@dataclass(frozen=True)
class Chunk:
    """One `knowledge_process_chunk` call's worth of a document."""

    chunk_id: str
    text: str
    heading_path: tuple[str, ...]


@dataclass(frozen=True)
class _Section:
    path: tuple[str, ...]
    text: str  # heading line (if any) plus body, stripped


def _sections(body: str) -> list[_Section]:
    """The document split at headings outside fenced code blocks."""
    sections: list[_Section] = []
    stack: list[tuple[int, str]] = []
    lines: list[str] = []
    path: tuple[str, ...] = ()
    in_fence = False

    def flush() -> None:
        text = "\n".join(lines).strip()
        if text:
            sections.append(_Section(path, text))

    for line in body.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else _HEADING.match(line)
        if heading is None:
            lines.append(line)
            continue
        flush()
        level, title = len(heading.group(1)), heading.group(2).strip()
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        path = tuple(t for _, t in stack)
        lines = [line]
    flush()
    return sections


def _split_words(text: str, budget: int) -> Iterator[str]:
    """`text` cut at whitespace into pieces of at most `budget` characters."""
    piece = ""
    for word in text.split():
        while len(word) > budget:  # one word longer than the budget: the only mid-word cut
            if piece:
                yield piece
                piece = ""
            yield word[:budget]
            word = word[budget:]
        candidate = f"{piece} {word}" if piece else word
        if len(candidate) > budget:
            yield piece
            piece = word
        else:
            piece = candidate
    if piece:
        yield piece


def _pieces(text: str, budget: int) -> Iterator[str]:
    """`text` as pieces of at most `budget` characters, cut at the coarsest boundary that works."""
    if len(text) <= budget:
        yield text
        return
    for splitter, joiner in ((_PARAGRAPH_BREAK, "\n\n"), (_SENTENCE_END, " ")):
        parts = [p.strip() for p in splitter.split(text) if p.strip()]
        if len(parts) > 1:
            yield from _pack(
                (small for part in parts for small in _pieces(part, budget)), budget, joiner
            )
            return
    yield from _split_words(text, budget)


def _pack(parts: Iterator[str], budget: int, joiner: str) -> Iterator[str]:
    """Consecutive parts joined while the result stays within `budget`."""
    current = ""
    for part in parts:
        candidate = f"{current}{joiner}{part}" if current else part
        if len(candidate) <= budget:
            current = candidate
            continue
        if current:
            yield current
        current = part
    if current:
        yield current


def _header(doc: Document, path: tuple[str, ...]) -> str:
    lines = [f"Document: {doc.title}"]
    if doc.context:
        lines.append(doc.context)
    if path:
        lines.append(f"Section: {' > '.join(path)}")
    return "\n".join(lines) + "\n\n"


def chunk_document(doc: Document, max_chars: int) -> list[Chunk]:
    """The chunks of `doc`, each at most `max_chars` characters including its context header
    (for any `max_chars` of at least a header plus 200 characters; smaller values are raised
    to that)."""
    base = doc.source_file + (f"#{doc.key}" if doc.key else "")
    groups: list[tuple[tuple[str, ...], list[str]]] = []
    for section in _sections(doc.text):
        budget = max(max_chars - len(_header(doc, section.path)), _MIN_BODY)
        pieces = list(_pieces(section.text, budget))
        # Pack a small section into the previous chunk when the whole still fits.
        if groups and len(pieces) == 1:
            path, texts = groups[-1]
            joined = "\n\n".join([*texts, pieces[0]])
            if len(_header(doc, path)) + len(joined) <= max(max_chars, _MIN_BODY):
                texts.append(pieces[0])
                continue
        groups.extend((section.path, [piece]) for piece in pieces)

    chunks: list[Chunk] = []
    ordinals: dict[tuple[str, ...], int] = {}
    for path, texts in groups:
        ordinal = ordinals.get(path, 0)
        ordinals[path] = ordinal + 1
        chunk_id = f"{base}#{' > '.join(path)}#{ordinal}"
        chunks.append(Chunk(chunk_id, _header(doc, path) + "\n\n".join(texts), path))
    return chunks
