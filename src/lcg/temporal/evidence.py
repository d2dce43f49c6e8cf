"""The verbatim passages a context quotes: what the query's own passage search finds and what the
facts it shows were read from.

`find_passages` ranks episodes by hybrid passage search (BM25 + vector, fused by reciprocal rank,
each list on its own evidence: lcg.search.floor), keeps those scoring at least `RELATIVE_FLOOR`
of the best one, ranks with them the turns that asked or answered the best of them in a
conversation (lcg.temporal.turns), puts first the standing instructions and preferences of the
queried groups that concern the question (lcg.search.standing, `_standing`: an instruction
holds for every later answer however few of the question's words it shares, so similarity
alone ranks it far down), and appends the episodes the seed facts cite; an
episode recorded after the reference instant (`as_of`) is never quoted. Each passage quotes the
piece of its episode that holds the most of the query's weight (lcg.search.passages), cut from
the index window the search found the episode by (`Hit.window`; an episode a fact cites: from
its whole text), with the piece's offsets in the episode, the episode's date, name and source
description, so every line names its source. `pack_passages` writes them into a byte allowance, best first; one that does not fit is
skipped and later, shorter ones may still fit (`MISFITS` as in lcg.temporal.context).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from lcg.graph import hybrid
from lcg.models import Episode, Fact
from lcg.search.passages import best_window, passage_scores, query_stems, standing_hits, windows
from lcg.search.standing import INSTRUCTION, PREFERENCE, where
from lcg.search.strategy import HYBRID_RRF
from lcg.temporal.turns import with_replies

if TYPE_CHECKING:
    from lcg.engine import Engine
    from lcg.search.index import SearchIndex

__all__ = [
    "MAX_PASSAGES",
    "QUOTE_CHARS",
    "RELATIVE_FLOOR",
    "Passage",
    "find_passages",
    "pack_passages",
    "passage_line",
]

# Episodes ranked by passage search for one context (more than a 2,000-token block holds, ~40
# lines, so a misfit leaves room for the next).
MAX_PASSAGES = 60
MISFITS = 8
# The longest piece of an episode one passage line quotes (lcg.search.passages.windows): the
# sentence or two of it that hold the most of the query's weight, so a block reaches further
# down the ranking. Measured with bench/evidence.py (docs/search.md, "Context").
QUOTE_CHARS = 150
# A passage search hit is quoted only if its score (lcg.search.passages.passage_scores: the
# better of its cosine and the share of the query's idf weight it holds) is at least this share
# of the best hit's, so the budget is not topped up with barely related episodes. The largest
# that lowers neither share of `python bench/evidence.py --quick` (`hash`; BEAM / changelogs
# budget share, one ingest, load 8-15): 0 0.672 / 1.0; 0.1, 0.2, 0.22, 0.25, 0.28 0.672 / 1.0;
# 0.3 0.663 / 1.0; 0.4 0.646; 0.5 0.601 / 0.987; 0.7 0.403 / 0.868 (docs/search.md, "Context").
RELATIVE_FLOOR = 0.28
# The standing instructions and preferences (lcg.search.standing) a context quotes before the
# ranked passages (`_standing`), best first by passage score (as for `RELATIVE_FLOOR`).
INSTRUCTIONS_MAX = 5
PREFERENCES_MAX = 3
PREFERENCE_FLOOR = 0.1
# Episodes whose cut into quote windows is kept (the same episodes answer many questions of a
# conversation; cutting a long one is most of a quote's cost).
CUTS_KEPT = 4096
_CUTS: OrderedDict[tuple[str, int, int, int], tuple[str, list[tuple[int, int]]]] = OrderedDict()
_CUTS_LOCK = threading.Lock()


def _cut(episode: Episode, size: int, span: tuple[int, int]) -> list[tuple[int, int]]:
    """`windows` of `episode.content[span]` at `size`, as offsets in the whole content, kept
    for the last `CUTS_KEPT` (episode, span) pairs (by uuid, and only while the content is the
    same)."""
    key = (episode.uuid, size, *span)
    with _CUTS_LOCK:
        held = _CUTS.get(key)
        if held is not None and held[0] == episode.content:
            _CUTS.move_to_end(key)
            return held[1]
    lo, hi = span
    pieces = [(lo + a, lo + b) for a, b in windows(episode.content[lo:hi], size)]
    with _CUTS_LOCK:
        _CUTS[key] = (episode.content, pieces)
        while len(_CUTS) > CUTS_KEPT:
            _CUTS.popitem(last=False)
    return pieces


class Passage:
    """The window `[start, end)` of an episode's content that best matches the query, chosen
    on first use (a packing reads only the passages it tries: ~30 of `MAX_PASSAGES`) among the
    pieces of `span`: the index window the search found the episode by (`Hit.window`), or the
    whole content (an episode a fact cites)."""

    __slots__ = ("_span", "_stems", "_window", "episode")

    def __init__(
        self,
        episode: Episode,
        stems: Mapping[str, float],
        span: tuple[int, int] | None = None,
    ) -> None:
        self.episode = episode
        self._stems = stems
        size = len(episode.content)
        lo, hi = span if span is not None else (0, size)
        self._span = (max(0, min(lo, size)), max(0, min(hi, size)))
        if self._span[0] >= self._span[1]:  # the content changed since the index cut it
            self._span = (0, size)
        self._window: tuple[int, int] | None = None

    def _bounds(self) -> tuple[int, int]:
        if self._window is None:
            content = self.episode.content
            pieces = _cut(self.episode, QUOTE_CHARS, self._span)
            w = best_window(content, self._stems, QUOTE_CHARS, pieces)
            self._window = (w.start, w.end)
        return self._window

    @property
    def start(self) -> int:
        return self._bounds()[0]

    @property
    def end(self) -> int:
        return self._bounds()[1]

    @property
    def text(self) -> str:
        start, end = self._bounds()
        return self.episode.content[start:end]


def _when(ep: Episode) -> datetime | None:
    return ep.valid_at or ep.created_at


def _standing(
    index: SearchIndex, query: str, groups: list[str] | None
) -> dict[str, tuple[int, int]]:
    """The standing instructions and preferences (lcg.search.standing) a context quotes first:
    the best `INSTRUCTIONS_MAX` instructions whatever their score (one holds for every later
    answer; whether it applies is the reader's to judge) and the best `PREFERENCES_MAX`
    preferences scoring at least `PREFERENCE_FLOOR`; uuid -> the offsets of the marked window,
    best first."""
    vector = None if index.lexical_only else index.embed_query(query)
    out: dict[str, tuple[int, int]] = {}
    taken = {INSTRUCTION: 0, PREFERENCE: 0}
    for uuid, span, score, marks in standing_hits(index, query, groups, vector):
        if marks & INSTRUCTION and taken[INSTRUCTION] < INSTRUCTIONS_MAX:
            taken[INSTRUCTION] += 1
        elif marks & PREFERENCE and taken[PREFERENCE] < PREFERENCES_MAX:
            if score < PREFERENCE_FLOOR:
                continue
            taken[PREFERENCE] += 1
        else:
            continue
        out[uuid] = span
    return out


def find_passages(
    engine: Engine,
    query: str,
    groups: list[str] | None,
    facts: Sequence[Fact],
    as_of: datetime | None,
    limit: int | None = None,
) -> list[Passage]:
    """Passages for `query` (module docstring), best first (at most `limit`, default
    `MAX_PASSAGES`, from passage search); runs in a worker thread."""
    index = engine.parts.search
    limit = MAX_PASSAGES if limit is None else limit
    hits = hybrid.episode_hits(engine, query, groups, limit, HYBRID_RRF)
    if hits and RELATIVE_FLOOR > 0:
        scores = passage_scores(
            index, query, groups, [(h.group_id, h.doc, h.cosine) for _, h in hits]
        )
        least = RELATIVE_FLOOR * max(scores)
        hits = [hit for hit, score in zip(hits, scores, strict=True) if score >= least]
    episodes = with_replies(engine, hits)[:limit]
    spans = {ep.uuid: hit.window for ep, hit in hits if hit.window is not None}
    standing = _standing(index, query, groups)
    seen = {ep.uuid for ep in episodes}
    cited = [u for f in facts for u in f.episodes if u not in seen]
    wanted = list(dict.fromkeys([*standing, *cited]))
    rows = {}
    if wanted:
        with engine.reader() as conn:
            rows = conn.episodes_by_uuids(wanted)
    first = [rows[u] for u in standing if u in rows]
    for said in first:  # quoted from the sentence that holds its mark
        lo, hi = standing[said.uuid]
        spans[said.uuid] = (lo + (where(said.content[lo:hi]) or 0), hi)
    firsts = {ep.uuid for ep in first}
    episodes = first + [ep for ep in episodes if ep.uuid not in firsts]
    seen |= firsts
    for uuid in dict.fromkeys(cited):
        ep = rows.get(uuid)
        if ep is not None and uuid not in seen and (groups is None or ep.group_id in groups):
            episodes.append(ep)
            seen.add(uuid)
    if as_of is not None:
        episodes = [ep for ep in episodes if (_when(ep) or as_of) <= as_of]
    stems = query_stems(index, query, groups)
    return [
        Passage(ep, {} if ep.uuid in firsts else stems, spans.get(ep.uuid))
        for ep in episodes
        if ep.content.strip()
    ]


def passage_line(label: str, p: Passage) -> str:
    """`[P1] 2024-03-15 · turn 28 · user turn: …text… (chars 0-812 of 2189)` (the name left out
    when the source description holds it): the episode's uuid
    is not on the line (36 bytes, a fifth of a typical line) but in the result's
    `included_episode_ids`, in label order."""
    ep = p.episode
    when = _when(ep)
    parts = [when.date().isoformat() if when else "undated"]
    name, source = " ".join(ep.name.split())[:80], " ".join(ep.source_description.split())[:80]
    # A file's chunks often carry their name inside their source description: said once.
    parts += [x for x in (name if name not in source else "", source) if x]
    text = " ".join(p.text.split())
    before = "…" if p.start > 0 else ""
    after = "…" if p.end < len(ep.content) else ""
    offsets = f"chars {p.start}-{p.end} of {len(ep.content)}"
    return f"[{label}] {' · '.join(parts)}: {before}{text}{after} ({offsets})\n"


def pack_passages(
    passages: Sequence[Passage], room: int, first_label: int = 1, skip: frozenset[str] = frozenset()
) -> tuple[list[str], list[str], int]:
    """Lines of `passages` (best first) that fit in `room` bytes: (lines, episode uuids, bytes
    used). Episodes in `skip` (already written) are passed over."""
    lines: list[str] = []
    uuids: list[str] = []
    used = 0
    misfits = 0
    for p in passages:
        if p.episode.uuid in skip or p.episode.uuid in uuids:
            continue
        if misfits >= MISFITS:
            break
        line = passage_line(f"P{first_label + len(lines)}", p)
        size = len(line.encode())
        if used + size > room:
            misfits += 1
            continue
        lines.append(line)
        uuids.append(p.episode.uuid)
        used += size
    return lines, uuids, used
