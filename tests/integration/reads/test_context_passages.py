"""Passages as evidence: knowledge_get_context quotes the window of a long episode that answers
the query, with its date and source, and knowledge_search_passages finds a passage by its words
with a non-zero score unless the client asks for the reference's cosine floor."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest

from lcg import Engine
from lcg.engine import EpisodeCommit
from lcg.graph import hybrid
from lcg.models import Entity, Episode
from lcg.search.passages import WINDOW_CHARS
from lcg.search.strategy import HYBRID_RRF
from lcg.service.registry import dispatch
from lcg.temporal import context, evidence, turns

pytestmark = pytest.mark.anyio

G = "liminis"
MARCH = datetime(2024, 3, 15, tzinfo=UTC)
APRIL = datetime(2024, 4, 25, tzinfo=UTC)

FILLER = (
    "We went through the plan for the week, the meetings on the calendar and what the team "
    "wants to look at next. Nothing here is decided yet and most of it will change. "
)
ANSWER = "The quokka migration finished on the 29th, two days before the sprint review."


def _long_text() -> str:
    """Several windows of filler with the answer in a paragraph of its own in the middle."""
    block = (FILLER * 6).strip()
    return f"{block}\n\n{block}\n\n{ANSWER}\n\n{block}\n\n{block}"


async def _episode(
    engine: Engine, uuid: str, content: str, at: datetime, source: str, source_file: str = ""
) -> None:
    ep = Episode(
        uuid=uuid,
        group_id=G,
        name=f"turn {uuid}",
        content=content,
        source_description=source,
        source_file=source_file,
        created_at=at,
        valid_at=at,
    )
    await engine.commit_episode(EpisodeCommit(G, ep))


async def _call(engine: Engine, method: str, **params: Any) -> dict[str, Any]:
    return await dispatch(engine, method, params)


async def test_context_quotes_the_window_that_answers(engine: Engine) -> None:
    text = _long_text()
    assert len(text) > 3 * WINDOW_CHARS
    await _episode(engine, "ep-long", text, MARCH, "user turn")
    await _episode(engine, "ep-other", FILLER, MARCH, "assistant turn")
    got = await _call(engine, "knowledge_get_context", query="when did the quokka migration finish")
    assert got["token_estimate"] == math.ceil(len(got["context"].encode()) / 4) <= 2000
    assert got["included_episode_ids"][0] == "ep-long"
    lines = [line for line in got["context"].splitlines() if line.startswith("[P1]")]
    assert len(lines) == 1
    line = lines[0]
    start = text.index(ANSWER)
    # The verbatim window, its date, the episode's name and source, and offsets; the uuid is
    # the label's entry of included_episode_ids, not repeated on the line.
    assert line.startswith("[P1] 2024-03-15 · turn ep-long · user turn: …")
    assert ANSWER in line and FILLER.strip() not in line
    assert line.endswith(f"(chars {start}-{start + len(ANSWER)} of {len(text)})")
    assert "(episode " not in got["context"]
    assert got["context"].index("Passages:\n") > got["context"].index("Facts:\n")


async def test_a_past_read_quotes_no_later_episode(engine: Engine) -> None:
    await _episode(engine, "ep-march", "The quokka lived in Perth.", MARCH, "user turn")
    await _episode(engine, "ep-april", "The quokka moved to Albany.", APRIL, "user turn")
    now = await _call(engine, "knowledge_get_context", query="where does the quokka live")
    assert set(now["included_episode_ids"]) == {"ep-march", "ep-april"}
    past = await _call(
        engine, "knowledge_get_context", query="where does the quokka live", as_of="2024-04-01"
    )
    assert past["included_episode_ids"] == ["ep-march"]
    assert "Albany" not in past["context"]


async def test_an_entity_line_cites_the_quoted_passages_that_mention_it(engine: Engine) -> None:
    quokka = Entity(uuid="e-quokka", group_id=G, name="quokka", summary="a marsupial")
    perth = Episode(
        uuid="ep-perth",
        group_id=G,
        name="turn ep-perth",
        content="The quokka lived in Perth.",
        created_at=MARCH,
        valid_at=MARCH,
    )
    await engine.commit_episode(EpisodeCommit(G, perth, [quokka], mentions=[quokka.uuid]))
    # Quoted too, but it records no mention of the entity: not cited on its line.
    await _episode(engine, "ep-photo", "A quokka photo went around the office.", APRIL, "chat")
    got = await _call(engine, "knowledge_get_context", query="quokka")
    assert set(got["included_episode_ids"]) == {"ep-perth", "ep-photo"}
    label = f"P{got['included_episode_ids'].index('ep-perth') + 1}"
    line = next(x for x in got["context"].splitlines() if "(entity e-quokka" in x)
    assert line.endswith(f"(entity e-quokka; passages {label})")
    assert f"[{label}] 2024-03-15 · turn ep-perth" in got["context"]


async def test_a_past_read_cites_no_later_episode_on_an_entity_line(engine: Engine) -> None:
    quokka = Entity(uuid="e-quokka", group_id=G, name="quokka")
    for uuid, text, at in (
        ("ep-march", "The quokka lived in Perth.", MARCH),
        ("ep-april", "The quokka moved to Albany.", APRIL),
    ):
        ep = Episode(uuid=uuid, group_id=G, name=uuid, content=text, created_at=at, valid_at=at)
        await engine.commit_episode(EpisodeCommit(G, ep, [quokka], mentions=[quokka.uuid]))
    now = await _call(engine, "knowledge_get_context", query="quokka")
    line = next(x for x in now["context"].splitlines() if "(entity e-quokka" in x)
    assert line.endswith("(entity e-quokka; passages P1, P2)")
    past = await _call(engine, "knowledge_get_context", query="quokka", as_of="2024-04-01")
    assert past["included_episode_ids"] == ["ep-march"]
    line = next(x for x in past["context"].splitlines() if "(entity e-quokka" in x)
    assert line.endswith("(entity e-quokka; passages P1)")
    assert "Albany" not in past["context"] and "ep-april" not in past["context"]


async def test_passage_search_finds_words_with_a_score(engine: Engine) -> None:
    text = _long_text()
    await _episode(engine, "ep-long", text, MARCH, "user turn")
    await _episode(engine, "ep-other", FILLER, MARCH, "assistant turn")
    query = "quokka migration"
    got = await _call(engine, "knowledge_search_passages", query=query)
    assert [p["uuid"] for p in got["passages"]] == ["ep-long"]
    assert 0.0 < got["passages"][0]["score"] <= 1.0
    # The reference's meaning of min_score: a cosine floor. The long passage's hashed vector is
    # far from the two-word query's, so the floor drops it.
    floored = await _call(engine, "knowledge_search_passages", query=query, min_score=0.5)
    assert floored["passages"] == []
    anything = await _call(engine, "knowledge_search_passages", query=query, min_score=0)
    assert "ep-long" in [p["uuid"] for p in anything["passages"]]
    assert (await _call(engine, "knowledge_search_passages", query="zeppelin"))["count"] == 0


@pytest.mark.parametrize("share", [0.75, 1.0])
async def test_passages_never_push_the_block_over_its_budget(
    engine: Engine, share: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(context, "PASSAGE_SHARE", share)
    for i in range(6):
        await _episode(engine, f"ep-{i}", _long_text(), MARCH, "user turn")
    query = "quokka migration sprint review " * 12  # a long first line
    got = await _call(engine, "knowledge_get_context", query=query, token_budget=256)
    assert math.ceil(len(got["context"].encode()) / 4) == got["token_estimate"] <= 256
    assert got["included_episode_ids"] and got["omitted_passages"] > 0


async def test_a_rare_question_word_does_not_outrank_the_topic(engine: Engine) -> None:
    # "summary" is in one turn, "quokka" and "colony" in four: by idf alone that one turn,
    # which shares nothing with the topic, would rank first.
    for i in range(4):
        await _episode(
            engine, f"ep-quokka-{i}", f"The quokka colony grew by {i + 2} pups.", MARCH, "user turn"
        )
    for i in range(5):
        await _episode(engine, f"ep-filler-{i}", f"Lunch was soup number {i}.", MARCH, "user turn")
    await _episode(
        engine, "ep-summary", "Here is a summary of the Friday menu.", MARCH, "assistant turn"
    )
    query = "Give me a summary of the quokka colony throughout our conversations"
    found = await _call(engine, "knowledge_search_passages", query=query)
    ranked = [p["uuid"] for p in found["passages"]]
    assert set(ranked[:4]) == {f"ep-quokka-{i}" for i in range(4)}, ranked
    got = await _call(engine, "knowledge_get_context", query=query)
    assert got["included_episode_ids"][:4] == ranked[:4]
    # A query of question words alone keeps their weight: the turn that holds them is found.
    alone = await _call(engine, "knowledge_search_passages", query="give me the summary")
    assert [p["uuid"] for p in alone["passages"]][:1] == ["ep-summary"]


async def test_hybrid_mmr_passage_search_moves_a_different_passage_up(engine: Engine) -> None:
    # Three turns say the same thing; a fourth says something else about the quokka. Fused by
    # rank, the three repeats come first; maximal marginal relevance (hybrid_mmr, lambda 0.5)
    # puts the different one right after the first repeat.
    for i in range(3):
        await _episode(
            engine, f"ep-same-{i}", "The quokka colony in Perth grew by two pups.", MARCH, "user"
        )
    await _episode(
        engine, "ep-other", "A quokka was seen near the ferry dock at dawn.", MARCH, "user"
    )
    query = "quokka colony Perth pups"
    for min_score in (None, 0.0):
        extra = {} if min_score is None else {"min_score": min_score}
        fused = await _call(engine, "knowledge_search_passages", query=query, **extra)
        diverse = await _call(
            engine, "knowledge_search_passages", query=query, search_strategy="hybrid_mmr", **extra
        )
        fused_ids = [p["uuid"] for p in fused["passages"]]
        diverse_ids = [p["uuid"] for p in diverse["passages"]]
        assert fused_ids[3:] == ["ep-other"], (min_score, fused_ids)
        assert diverse_ids[1] == "ep-other", (min_score, diverse_ids)
        assert sorted(diverse_ids) == sorted(fused_ids)


async def test_context_quotes_from_the_window_the_search_found(engine: Engine) -> None:
    # Three index windows: a long paragraph that says the query's words twice (the piece a
    # scan of the whole text would quote: repeats score more), filler, and a short closing
    # paragraph that says them once. The short one is the episode's best window in the index
    # (BM25 favours a short document, the vector too): the quote is cut from it.
    repeats = (
        f"{FILLER}{FILLER}The quokka migration came up twice: the quokka migration again. "
        f"{FILLER}{FILLER}"
    )
    closing = "The quokka migration is done."
    text = f"{repeats}\n\n{(FILLER * 6).strip()}\n\n{closing}"
    await _episode(engine, "ep-long", text, MARCH, "user turn")
    await _episode(engine, "ep-other", FILLER, MARCH, "assistant turn")
    query = "quokka migration"
    hits = hybrid.episode_hits(engine, query, [G], 5, HYBRID_RRF)
    start = text.index(closing)
    assert hits[0][1].window == (start, len(text))  # the premise: the index found it there
    got = await _call(engine, "knowledge_get_context", query=query)
    label = f"[P{got['included_episode_ids'].index('ep-long') + 1}]"
    line = next(x for x in got["context"].splitlines() if x.startswith(label))
    assert closing in line and "came up twice" not in line, line
    assert line.endswith(f"(chars {start}-{len(text)} of {len(text)})")
    assert text[start : len(text)] == closing


async def test_context_quotes_no_barely_related_episode_to_fill_its_budget(engine: Engine) -> None:
    # Three turns answer; six others share only "island", a word every turn says. The budget
    # holds them all, but their scores are far below the best passage's: not quoted.
    for i in range(3):
        await _episode(
            engine,
            f"ep-answer-{i}",
            f"The quokka colony on Rottnest island had {i + 3} pups.",
            MARCH,
            "user turn",
        )
    for i in range(6):
        text = f"Ferry timetables, parking fees and weather: Zanzibar island logistics {i}."
        await _episode(engine, f"ep-island-{i}", text, MARCH, "chat")
    query = "how many pups did the quokka colony on Rottnest island have"
    found = await _call(engine, "knowledge_search_passages", query=query, num_results=20)
    scores = {p["uuid"]: p["score"] for p in found["passages"]}
    best = max(scores.values())
    weak = {u for u in scores if u.startswith("ep-island")}
    assert weak and all(scores[u] < evidence.RELATIVE_FLOOR * best for u in weak), scores
    got = await _call(engine, "knowledge_get_context", query=query)
    assert sorted(got["included_episode_ids"]) == [f"ep-answer-{i}" for i in range(3)]


async def _chat(engine: Engine, turns: list[tuple[str, str, str]], at: datetime) -> None:
    for uuid, source, text in turns:
        await _episode(engine, uuid, text, at, source)


async def test_context_quotes_the_reply_to_a_turn_the_search_found(engine: Engine) -> None:
    # The user's question names the quokka; the assistant's answer says none of the query's
    # words. It is the turn after a hit, by the other speaker, on the same day: quoted.
    await _chat(
        engine,
        [
            ("ep-ask", "user turn", "Where should I go to see a quokka colony?"),
            ("ep-answer", "assistant turn", "Take the morning ferry from Fremantle to Rottnest."),
            ("ep-later", "user turn", "Thanks. Now a different topic: tax forms."),
        ],
        MARCH,
    )
    found = await _call(engine, "knowledge_search_passages", query="quokka colony")
    assert [p["uuid"] for p in found["passages"]] == ["ep-ask"]
    got = await _call(engine, "knowledge_get_context", query="quokka colony")
    assert got["included_episode_ids"][:2] == ["ep-ask", "ep-answer"]
    assert "Fremantle" in got["context"] and "tax forms" not in got["context"]
    saved = turns.REPLY_SHARE
    turns.REPLY_SHARE = 0.0
    try:
        got = await _call(engine, "knowledge_get_context", query="quokka colony")
    finally:
        turns.REPLY_SHARE = saved
    assert got["included_episode_ids"] == ["ep-ask"]


async def test_one_sources_text_and_another_days_turn_lend_no_score(engine: Engine) -> None:
    # Releases of one changelog (one source description): the next one is no reply.
    await _chat(
        engine,
        [
            ("ep-r1", "CHANGES.md", "Added quokka colony support."),
            ("ep-r2", "CHANGES.md", "Fixed the ferry timetable parser."),
        ],
        MARCH,
    )
    got = await _call(engine, "knowledge_get_context", query="quokka colony")
    assert got["included_episode_ids"] == ["ep-r1"]
    # A turn of another speaker a month later is another session: no reply either.
    await _episode(engine, "ep-ask", "Is the quokka colony open?", MARCH, "user turn")
    await _episode(engine, "ep-next", "Ferries run hourly in summer.", APRIL, "assistant turn")
    got = await _call(engine, "knowledge_get_context", query="is the quokka colony open")
    assert "ep-next" not in got["included_episode_ids"]


async def test_a_files_chunk_lends_no_score_to_the_next_file(engine: Engine) -> None:
    # One-chunk files of a folder, each its own source description: documents, not turns.
    for i, text in enumerate(["Quokka colony census notes.", "Ferry timetable for May."]):
        await _episode(engine, f"ep-file-{i}", text, MARCH, f"notes/{i}.md", f"notes/{i}.md")
    await _episode(engine, "ep-file-2", "Parking fees at the harbour.", MARCH, "notes/2.md")
    got = await _call(engine, "knowledge_get_context", query="quokka colony census")
    assert got["included_episode_ids"] == ["ep-file-0"]
    # The chunk is no reply to a turn either.
    got = await _call(engine, "knowledge_get_context", query="parking fees at the harbour")
    assert got["included_episode_ids"] == ["ep-file-2"]


INSTRUCTION = (
    "Always format code snippets with syntax highlighting when I ask about implementation."
)


async def _login_turns(engine: Engine, n: int, at: datetime = APRIL) -> None:
    """`n` turns about the login feature, each sharing more of the question's words than the
    standing instruction does, and 24 about something else (the question's words are not in
    every turn of a chat)."""
    for i in range(24):
        await _episode(engine, f"ep-lunch-{i}", f"Lunch was soup number {i}.", at, "user")
    for i in range(n):
        await _episode(
            engine,
            f"ep-login-{i}",
            f"Step {i} to implement the login feature: show the form, check the password, set "
            f"cookie {i}.",
            at,
            "assistant turn",
        )


async def test_context_quotes_a_standing_instruction_the_ranking_alone_would_drop(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evidence, "MAX_PASSAGES", 5)
    await _episode(engine, "ep-rule", INSTRUCTION, MARCH, "user turn")
    await _login_turns(engine, 8)
    query = "Show me how to implement the login feature"
    # By passage search alone the instruction is not among the first MAX_PASSAGES episodes.
    ranked = hybrid.episode_hits(engine, query, [G], evidence.MAX_PASSAGES, HYBRID_RRF)
    assert len(ranked) == evidence.MAX_PASSAGES
    assert "ep-rule" not in [ep.uuid for ep, _ in ranked]
    got = await _call(engine, "knowledge_get_context", query=query)
    assert got["included_episode_ids"][0] == "ep-rule"
    assert (
        "[P1] 2024-03-15 · turn ep-rule · user turn: Always format code snippets"
        in (got["context"])
    )
    # An instruction holds for every later answer: quoted whatever the question. A preference
    # is quoted only where it shares enough of the question's words.
    await _episode(engine, "ep-taste", "I prefer oat milk in the office coffee.", MARCH, "user")
    other = await _call(engine, "knowledge_get_context", query="what did the cookie hold")
    assert other["included_episode_ids"][0] == "ep-rule"
    assert "ep-taste" not in other["included_episode_ids"]
    coffee = await _call(engine, "knowledge_get_context", query="which milk for the coffee")
    assert set(coffee["included_episode_ids"][:2]) == {"ep-rule", "ep-taste"}


async def test_a_standing_instruction_follows_the_episode_and_the_clock(engine: Engine) -> None:
    await _episode(engine, "ep-rule", INSTRUCTION, APRIL, "user turn")
    await _login_turns(engine, 3, MARCH)
    query = "how do I implement the login feature"
    got = await _call(engine, "knowledge_get_context", query=query)
    assert got["included_episode_ids"][0] == "ep-rule"
    # Said after the reference instant: not quoted in a past-time read.
    past = await _call(engine, "knowledge_get_context", query=query, as_of="2024-04-01")
    assert past["included_episode_ids"] and "ep-rule" not in past["included_episode_ids"]
    await _call(engine, "knowledge_delete_episode", episode_uuid="ep-rule")
    gone = await _call(engine, "knowledge_get_context", query=query)
    assert "ep-rule" not in gone["included_episode_ids"]


async def test_a_context_read_embeds_its_query_once(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _login_turns(engine, 3)
    index = engine.parts.search
    inner = getattr(index._embedder, "inner", index._embedder)
    calls: list[list[str]] = []
    embed = inner.embed

    def counted(texts: list[str]) -> Any:
        calls.append(list(texts))
        return embed(texts)

    monkeypatch.setattr(inner, "embed", counted)
    query = "how do I implement the login feature"
    await _call(engine, "knowledge_get_context", query=query)
    assert calls.count([query]) == 1
    vector = index.embed_query(query)
    assert not vector.flags.writeable  # shared between reads: nobody may change it
    assert calls.count([query]) == 1


async def test_a_standing_line_quotes_the_instruction_not_the_turn_around_it(
    engine: Engine,
) -> None:
    chatter = "We went through the login feature form and its password check again today. " * 5
    text = f"{chatter.strip()} Always answer with numbered steps when I ask how to do something."
    assert len(text) > 2 * evidence.QUOTE_CHARS
    await _episode(engine, "ep-rule", text, MARCH, "user turn")
    await _login_turns(engine, 3)
    got = await _call(engine, "knowledge_get_context", query="the login feature form")
    assert got["included_episode_ids"][0] == "ep-rule"
    line = next(x for x in got["context"].splitlines() if x.startswith("[P1]"))
    start = text.index("Always answer")
    assert ": …Always answer with numbered steps" in line
    assert line.endswith(f"(chars {start}-{len(text)} of {len(text)})")
