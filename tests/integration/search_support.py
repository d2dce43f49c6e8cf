"""What lcg's in-process search index holds, for tests that check it agrees with the stored rows.

lcg keeps no Kuzu full-text index: its lexical index (lcg.search) is the text index that must
agree with the rows after commits, replays, crashes, rebuilds and reopens.
"""

from __future__ import annotations

from lcg.engine import Engine

__all__ = ["FAMILIES", "indexed"]

# Kind of row -> the search index family that holds its text (entity: name + summary; fact:
# predicate + sentence; episode: content).
FAMILIES = {"Entity": "entity", "Fact": "fact", "Episode": "episode"}


def indexed(engine: Engine, table: str, word: str) -> set[str]:
    """Uuids of the live documents of `table`'s search family, in every group, whose text holds
    `word` as a term (as the index itself analyses it: tokenised, stop words out, stemmed)."""
    index = engine.parts.search
    found: set[str] = set()
    for _, view in index.views(FAMILIES[table], None):
        live = view.live()
        for term in index.vocab.query(word):
            docs, _ = view.postings(term)
            found.update(view.uuids[int(d)] for d in docs if live[int(d)])
    return found
