"""Windows of an episode's text: the pieces the index holds one BM25 document and one vector of.

An embedder reads only the start of a long text (all-MiniLM-L6-v2: 256 word pieces), so a word
deep in a long conversation turn or release would be invisible to the vector half. `windows`
cuts a text into pieces of at most `WINDOW_CHARS` characters at paragraph, then sentence, then
word boundaries, with their offsets `[start, end)` in the text (whitespace between pieces left
out). `episode_windows` is what the index stores for an episode: the whole text as one window
when it fits (its vector is then the episode's own), else its pieces.
"""

from __future__ import annotations

import re

__all__ = ["WINDOW_CHARS", "episode_windows", "windows"]

# ~250 estimated tokens (bytes / 4), about what all-MiniLM-L6-v2 reads of English prose (256
# word pieces); small enough that a 2,000-token context holds a dozen passages.
WINDOW_CHARS = 1000
_BREAKS = (re.compile(r"\n\s*\n"), re.compile(r"(?<=[.!?])\s+|\n"))


def windows(text: str, size: int = WINDOW_CHARS) -> list[tuple[int, int]]:
    """`[start, end)` pieces covering `text` (whitespace between them left out), each at most
    `size` characters unless a single word is longer."""
    out: list[tuple[int, int]] = []
    _split(text, 0, len(text), size, 0, out)
    return out


def episode_windows(text: str, size: int = WINDOW_CHARS) -> list[tuple[int, int]]:
    """The windows the index holds for an episode's text: `[(0, len(text))]` when the text fits
    in `size` characters (or is blank), else `windows(text, size)`."""
    if len(text) <= size:
        return [(0, len(text))]
    return windows(text, size) or [(0, len(text))]


def _split(text: str, lo: int, hi: int, size: int, level: int, out: list[tuple[int, int]]) -> None:
    """Pieces of `text[lo:hi]`: runs of the segments between this level's breaks, as long as
    they fit; a segment longer than `size` is cut at the next level's breaks."""
    while lo < hi and text[lo].isspace():
        lo += 1
    while hi > lo and text[hi - 1].isspace():
        hi -= 1
    if lo >= hi:
        return
    if hi - lo <= size:
        out.append((lo, hi))
        return
    if level >= len(_BREAKS):  # between words: the last space that keeps the piece in size
        while hi - lo > size:
            cut = max(
                text.rfind(" ", lo + 1, lo + size + 1), text.rfind("\n", lo + 1, lo + size + 1)
            )
            cut = cut if cut > lo else lo + size
            _split(text, lo, cut, size, level + 1, out)
            lo = cut
            while lo < hi and text[lo].isspace():
                lo += 1
        if lo < hi:
            out.append((lo, hi))
        return
    segments: list[tuple[int, int]] = []
    pos = lo
    for m in _BREAKS[level].finditer(text, lo, hi):
        if m.start() > pos:
            segments.append((pos, m.start()))
        pos = max(pos, m.end())
    if pos < hi:
        segments.append((pos, hi))
    run: tuple[int, int] | None = None
    for a, b in segments:
        if b - a > size:
            if run is not None:
                out.append(run)
                run = None
            _split(text, a, b, size, level + 1, out)
        elif run is not None and b - run[0] <= size:
            run = (run[0], b)
        else:
            if run is not None:
                out.append(run)
            run = (a, b)
    if run is not None:
        out.append(run)
