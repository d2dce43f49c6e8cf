"""Supersession precision and recall of the offline heuristic extractor; prints one JSON object.

    python bench/offline_extraction.py [--set FILE ...] [--chats DIR] [--chats-limit N] [--details]

Default sets: examples/changelog/eval.jsonl and bench/change_corpus.jsonl; default chats:
../shared/data/beam/100K (skipped when absent).

The evaluation set is a hand-written dated changelog (examples/changelog/eval.jsonl): scenarios
in which people change roles, teams and managers, a service moves databases and clouds, a
repository changes owner and language, a deadline moves — and additive facts that must retire
nothing. Each scenario lists, by hand, the sentences whose facts must end and the date they end.
It is split into a `dev` part (the rules were written against it) and a `heldout` part (written
at the same time, not used to write the rules); both are reported.

Each scenario is ingested into its own group of a fresh workspace with `LCG_EXTRACTOR=heuristic`
(no model) through `knowledge_add_episode`, two ways: `per_entry`, one episode per entry with
`reference_time` = the entry's date; and `whole_text`, the scenario as one dated changelog text
(a `## YYYY-MM-DD` heading per entry) in one episode. A *predicted* supersession is a fact of
the group that ended (`invalid_at` set: retired by a later episode, or stored already ended by a
later fact of its own episode), keyed by (sentence, end date). Precision = correct / predicted,
recall = correct / expected, over all scenarios of a split.

The change corpus (bench/change_corpus.jsonl) was written in one sitting before the extractor
was changed for it, in styles the rules had not seen: lowercase common-noun entities ("the
ledger team"), passive voice, "we"-sentences, relative dates ("yesterday", "last month") and
additive facts that must retire nothing; its splits name the style. Its entries also list the
endpoints of the facts a reader expects (`facts`: [source, target] pairs): `fact_recall` is the
share of them that some stored fact of the entry's group joins (names compared case-folded, a
leading article dropped), and `facts_per_sentence` counts what was stored.

`chats` reads the dated multi-session conversations of BEAM (`--chats DIR`, one `N/chat.json`
each): every turn is one `message` episode `"<role>: <content>"` dated by the last
`time_anchor` seen in its chat, extracted by the offline extractor directly (no store: these are
figures about extraction). Reported: facts per turn; `subject_right`, the share of facts whose
source is right — the speaker when the fact's sentence speaks in the first person ("I", "my",
"I'm"), a name written earlier in the turn when it opens with "he", "she", "it" or "they", else a
name written in the sentence; `first_person_speaker`, the share of first-person
facts whose source is the speaker; `relative_dates`, facts whose sentence names a relative date
("yesterday", "last week", "two days ago", "next month", "in March") and how many of those got
a `valid_at` other than the turn's own date; and `entity_noise`, entities that are pronouns,
interjections or literals (booleans, None, numbers, single letters, contractions like "I'm").
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from lcg import Settings, open_engine
from lcg.engine import Engine
from lcg.extraction.extractor import Cost, HeuristicExtractor
from lcg.extraction.prompts import EpisodeContext
from lcg.extraction.salvage import SalvageReport
from lcg.service.registry import dispatch

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SETS = [
    ROOT / "examples" / "changelog" / "eval.jsonl",
    ROOT / "bench" / "change_corpus.jsonl",
]
DEFAULT_CHATS = ROOT.parent / "shared" / "data" / "beam" / "100K"


def _key(name: str) -> str:
    return re.sub(r"^(?:the|a|an|our)\s+", "", " ".join(name.casefold().split()))


async def _stored_pairs(engine: Engine, group: str) -> list[tuple[str, str]]:
    rows = await dispatch(
        engine,
        "knowledge_query_cypher",
        {
            "query": "MATCH (f:Fact), (s:Entity), (t:Entity) "
            f"WHERE f.group_id = '{group}' AND s.uuid = f.source_uuid AND t.uuid = f.target_uuid "
            "RETURN s.name, t.name"
        },
    )
    return [(_key(a), _key(b)) for a, b in rows["rows"]]


async def run_scenario(
    engine: Engine, group: str, scenario: dict[str, Any], whole: bool, tally: dict[str, int]
) -> set[tuple[str, str]]:
    entries = scenario["entries"]
    if whole:
        text = "\n".join(f"## {e['date']}\n- {e['text']}" for e in entries)
        entries = [{"date": entries[-1]["date"], "text": text}]
    for i, entry in enumerate(entries):
        await dispatch(
            engine,
            "knowledge_add_episode",
            {
                "name": f"{scenario['scenario']} {i}",
                "episode_body": entry["text"],
                "reference_time": f"{entry['date']}T00:00:00Z",
                "group_id": group,
            },
        )
    rows = await dispatch(
        engine,
        "knowledge_query_cypher",
        {
            "query": f"MATCH (f:Fact) WHERE f.group_id = '{group}' AND f.invalid_at IS NOT NULL "
            "RETURN f.fact, f.invalid_at"
        },
    )
    expected_pairs = [
        (_key(a), _key(b)) for e in scenario["entries"] for a, b in e.get("facts", ())
    ]
    if expected_pairs or any("facts" in e for e in scenario["entries"]):
        stored = await _stored_pairs(engine, group)
        tally["sentences"] += len(scenario["entries"])
        tally["facts_stored"] += len(stored)
        tally["facts_expected"] += len(expected_pairs)
        tally["facts_found"] += sum(1 for p in expected_pairs if p in stored)
    return {(text, str(ended)[:10]) for text, ended in rows["rows"]}


def score(predicted: set[tuple[str, ...]], expected: set[tuple[str, ...]]) -> dict[str, Any]:
    correct = len(predicted & expected)
    return {
        "expected": len(expected),
        "predicted": len(predicted),
        "correct": correct,
        "precision": round(correct / len(predicted), 3) if predicted else None,
        "recall": round(correct / len(expected), 3) if expected else None,
    }


async def evaluate(
    engine: Engine, scenarios: list[dict[str, Any]], details: bool, whole: bool, tag: str
) -> dict[str, Any]:
    splits: dict[str, tuple[set[tuple[str, ...]], set[tuple[str, ...]]]] = {}
    misses: list[dict[str, Any]] = []
    tally = {"sentences": 0, "facts_stored": 0, "facts_expected": 0, "facts_found": 0}
    for n, scenario in enumerate(scenarios):
        group = f"{tag}-{'w' if whole else 'e'}{n}"
        predicted = await run_scenario(engine, group, scenario, whole, tally)
        expected = {(x["fact"], x["ended"]) for x in scenario["expected_superseded"]}
        pred, exp = splits.setdefault(scenario["split"], (set(), set()))
        pred |= {(scenario["scenario"], *p) for p in predicted}
        exp |= {(scenario["scenario"], *e) for e in expected}
        if details and predicted != expected:
            misses.append(
                {
                    "split": scenario["split"],
                    "scenario": scenario["scenario"],
                    "missed": sorted(expected - predicted),
                    "wrong": sorted(predicted - expected),
                }
            )
    out: dict[str, Any] = {}
    for split, (pred, exp) in splits.items():
        out[split] = score(pred, exp)
    every: tuple[set[tuple[str, ...]], set[tuple[str, ...]]] = (set(), set())
    for pred, exp in splits.values():
        every[0].update(pred)
        every[1].update(exp)
    out["all"] = score(*every)
    if tally["sentences"]:
        out["facts"] = {
            "sentences": tally["sentences"],
            "facts_per_sentence": round(tally["facts_stored"] / tally["sentences"], 3),
            "expected": tally["facts_expected"],
            "found": tally["facts_found"],
            "fact_recall": round(tally["facts_found"] / max(1, tally["facts_expected"]), 3),
        }
    if details:
        out["mismatches"] = misses
    return out


# First person: "I ...", or after an opening phrase and a comma ("However, I'm ...").
_FIRST_PERSON = re.compile(
    r"^(?:[^.,]{0,60},)?\W*(?:(?:and|but|so|then|now)\s+)?(?:i|i'm|i've|i'd|i'll|my|me)\b",
    re.IGNORECASE,
)
_PRONOUN_SUBJECT = re.compile(r"^\W*(?:he|she|it|they)\b", re.IGNORECASE)
_RELATIVE = re.compile(
    r"\b(?:yesterday|tomorrow|(?:last|next|this)\s+(?:week|month|year|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday|spring|summer|autumn|fall|winter)|"
    r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|several)\s+"
    r"(?:days?|weeks?|months?|years?)\s+ago|in\s+(?:january|february|march|april|may|june|"
    r"july|august|september|october|november|december)\b(?!\s+\d))",
    re.IGNORECASE,
)
_PRONOUNS = frozenset(
    """i me my mine myself you your yours yourself he him his she her hers it its itself we us
    our ours they them their theirs this that these those i'm i've i'd i'll you're we're
    they're it's that's there's let's""".split()  # noqa: SIM905 -- a word list
)
_INTERJECTIONS = frozenset(
    """hi hello hey thanks thank glad sure okay ok yes no yeah wow great awesome oh please sorry
    cool nice perfect absolutely certainly alright hmm well welcome congrats""".split()  # noqa: SIM905 -- a word list
)
# Words that make a two-word name an interjection too ("Welcome Ashlee", "Thanks Tom"); not
# adjectives, which open real names ("Great Valley", "Perfect Fit").
_OPENERS = frozenset(
    """hi hello hey thanks thank glad sure okay ok yes no yeah wow oh please sorry absolutely
    certainly alright hmm welcome congrats""".split()  # noqa: SIM905 -- a word list
)


def _noise(name: str) -> str | None:
    key = name.casefold().strip(" .,!?'\"")
    first = key.split(" ")[0] if key else ""
    if key in ("true", "false", "none", "null") or re.fullmatch(r"[\d.,:%$-]+", key):
        return "literal"
    if len(key) <= 1:
        return "literal"
    if key in _PRONOUNS or first in ("i'm", "i've", "i'd", "i'll", "i’m"):
        return "pronoun"
    if key in _INTERJECTIONS or (first in _OPENERS and len(key.split()) <= 2):
        return "interjection"
    return None


def _anchor(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.strptime(text, "%B-%d-%Y").replace(tzinfo=UTC)
    except ValueError:
        return None


async def chats(paths: list[Path], details: bool) -> dict[str, Any]:
    extractor = HeuristicExtractor()
    turns = facts = right = first_person = first_right = co_mentions = 0
    relative = relative_resolved = 0
    entities = 0
    noise: dict[str, int] = {}
    noise_examples: dict[str, list[str]] = {}
    wrong_examples: list[dict[str, str]] = []
    started = time.perf_counter()
    for path in paths:
        when = datetime(2024, 1, 1, tzinfo=UTC)
        for batch in json.loads(path.read_text(encoding="utf-8")):
            for group in batch["turns"]:
                for turn in group if isinstance(group, list) else [group]:
                    when = _anchor(turn.get("time_anchor")) or when
                    body = f"{turn['role']}: {turn['content']}"
                    ctx = EpisodeContext(f"turn {turn.get('id')}", body, "message", when)
                    found, got = await extractor.episode(ctx, [], SalvageReport(), Cost())
                    turns += 1
                    entities += len(found)
                    for e in found:
                        if (kind := _noise(e.name)) is not None:
                            noise[kind] = noise.get(kind, 0) + 1
                            examples = noise_examples.setdefault(kind, [])
                            if len(examples) < 8 and e.name not in examples:
                                examples.append(e.name)
                    for f in got:
                        facts += 1
                        co_mentions += f.predicate == "MENTIONED_WITH"
                        speaker = turn["role"]
                        if _FIRST_PERSON.match(f.fact):
                            first_person += 1
                            ok = f.source.casefold() == speaker
                            first_right += ok
                        elif _PRONOUN_SUBJECT.match(f.fact):
                            # A pronoun resolved to an entity named earlier in the turn.
                            ok = f.source.casefold() in body.casefold() and not _noise(f.source)
                        else:
                            ok = f.source.casefold() in f.fact.casefold() and not _noise(f.source)
                        right += ok
                        if not ok and details and len(wrong_examples) < 15:
                            wrong_examples.append({"source": f.source, "fact": f.fact[:160]})
                        if _RELATIVE.search(f.fact):
                            relative += 1
                            if f.valid_at is not None and f.valid_at.date() != when.date():
                                relative_resolved += 1
    out: dict[str, Any] = {
        "chats": len(paths),
        "turns": turns,
        "facts": facts,
        "facts_per_turn": round(facts / max(1, turns), 3),
        "mentioned_with": co_mentions,
        "subject_right": round(right / max(1, facts), 3),
        "first_person_facts": first_person,
        "first_person_speaker": round(first_right / max(1, first_person), 3),
        "relative_dates": {"facts": relative, "resolved": relative_resolved},
        "entities": entities,
        "entity_noise": noise,
        "entity_noise_examples": noise_examples,
        "seconds": round(time.perf_counter() - started, 2),
    }
    if details:
        out["wrong_subject_examples"] = wrong_examples
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, action="append", help="repeatable; default: both")
    parser.add_argument("--details", action="store_true", help="list each scenario's misses")
    parser.add_argument("--split", help="only this split; default: all")
    parser.add_argument("--chats", type=Path, default=DEFAULT_CHATS)
    parser.add_argument("--chats-limit", type=int, default=20, help="first N chats")
    args = parser.parse_args()
    started = time.perf_counter()
    result: dict[str, Any] = {"bench": "offline_extraction", "extractor": "heuristic"}
    sets: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.for_home(Path(tmp) / ".lcg", extractor="heuristic", embedder="hash")
        engine = open_engine(settings)
        try:
            for n, path in enumerate(args.set or DEFAULT_SETS):
                lines = path.read_text(encoding="utf-8").splitlines()
                scenarios = [json.loads(line) for line in lines if line.strip()]
                scenarios = [s for s in scenarios if args.split in (None, s["split"])]
                name = str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
                sets[name] = {
                    "scenarios": len(scenarios),
                    "sentences": sum(len(s["entries"]) for s in scenarios),
                    "per_entry": anyio.run(
                        evaluate, engine, scenarios, args.details, False, f"s{n}"
                    ),
                    "whole_text": anyio.run(
                        evaluate, engine, scenarios, args.details, True, f"s{n}"
                    ),
                }
        finally:
            engine.close()
    result["sets"] = sets
    if args.chats.is_dir() and args.chats_limit > 0:
        paths = sorted(args.chats.glob("*/chat.json"), key=lambda p: int(p.parent.name))
        result["chats"] = anyio.run(chats, paths[: args.chats_limit], args.details)
    result["seconds"] = round(time.perf_counter() - started, 2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
