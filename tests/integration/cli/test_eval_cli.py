"""`lcg eval` end to end: cassettes recorded against a scripted OpenAI-compatible server that
really listens, replayed with it stopped, and a scripted judge server that counts its calls."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from lcg.cli.main import cli
from lcg.errors import InvalidRequestError
from lcg.evals.backends import parse_backend
from lcg.evals.plan import check_plan
from lcg.extraction.cassette import DuplicateCassetteKeyError
from lcg.testing.scripted_llm import ScriptedLlmServer

ARTICLES = [
    ("Apollo 13", "Apollo 13 was commanded by Jim Lovell. It launched from Kennedy Space Center."),
    ("Saturn V", "The Saturn V was built by Boeing and North American Aviation for NASA."),
    ("Gemini 8", "Gemini 8 was commanded by Neil Armstrong. David Scott flew with him."),
]
# What the scripted extractor answers for each article: entities, then facts. Each article is
# short, so by default it is extracted in one call (the `graph` schema, both lists at once).
CALLS = len(ARTICLES)
ANSWERS: dict[str, tuple[list[str], list[tuple[str, str, str]]]] = {
    "Apollo 13": (
        ["Apollo 13", "Jim Lovell", "Kennedy Space Center"],
        [
            ("Jim Lovell", "COMMANDED", "Apollo 13"),
            ("Apollo 13", "LAUNCHED_FROM", "Kennedy Space Center"),
        ],
    ),
    "Saturn V": (
        ["Saturn V", "Boeing", "NASA"],
        [("Boeing", "BUILT", "Saturn V"), ("Saturn V", "BUILT_FOR", "NASA")],
    ),
    "Gemini 8": (
        ["Gemini 8", "Neil Armstrong", "David Scott"],
        [("Neil Armstrong", "COMMANDED", "Gemini 8"), ("David Scott", "FLEW_ON", "Gemini 8")],
    ),
}


def _schema_name(body: dict[str, Any]) -> str:
    return str(body.get("response_format", {}).get("json_schema", {}).get("name", ""))


def _article_of(body: dict[str, Any]) -> str:
    user = body["messages"][-1]["content"]
    return next(title for title in ANSWERS if f"EPISODE NAME: {title}\n" in user)


def extractor(body: dict[str, Any]) -> str:
    """Answers the single-call, entities and facts prompts from ANSWERS."""
    entities, facts = ANSWERS[_article_of(body)]
    answer = {
        "entities": [{"name": n, "type": "Thing", "summary": n} for n in entities],
        "facts": [
            {"source": s, "predicate": p, "target": t, "fact": f"{s} {p} {t}."} for s, p, t in facts
        ],
    }
    schema = _schema_name(body)
    return json.dumps(answer if schema == "graph" else {schema: answer[schema]})


def judge_aligning_everything(body: dict[str, Any]) -> str:
    """A judge that pairs items by position (the fixtures keep the order) and prefers A."""
    if _schema_name(body) == "alignment":
        user = body["messages"][-1]["content"]
        candidate, reference = user.split("\nREFERENCE:\n")
        n = min(candidate.count("\n["), reference.count("[")) + 1
        n = min(n, reference.count("["))
        return json.dumps({"pairs": [[i, i] for i in range(n)]})
    return json.dumps({"winner": "A"})


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    lines = [json.dumps({"_header": True})]
    lines += [
        json.dumps({"title": t, "revision_id": i, "prose": p}) for i, (t, p) in enumerate(ARTICLES)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_cli(*args: str) -> Result:
    return CliRunner().invoke(cli, ["eval", *args], catch_exceptions=False)


def report_of(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout[result.stdout.index("{\n") :])


def record(
    tmp_path: Path, corpus: Path, name: str, responder: Callable[[dict[str, Any]], str]
) -> Path:
    cassette = tmp_path / f"{name}.jsonl"
    with ScriptedLlmServer(responder) as server:
        out = tmp_path / f"{name}-report.json"
        result = run_cli(
            "--corpus",
            str(corpus),
            "--backend",
            f"{name}=oai-http:url={server.url}",
            "--record-cassette",
            f"{name}={cassette}",
            "--output",
            str(out),
        )
        assert result.exit_code == 0, result.output
        assert server.count == CALLS
    return cassette


def renamed_fact_cassette(source: Path, target: Path) -> Path:
    """A copy of `source` in which one fact's predicate is renamed (same meaning)."""
    lines = source.read_text().splitlines()
    out = []
    for line in lines:
        if "BUILT_FOR" in line:
            line = line.replace("BUILT_FOR", "CONSTRUCTED_FOR")
        out.append(line)
    assert out != lines
    target.write_text("\n".join(out) + "\n")
    return target


def test_a_backend_compared_with_itself_scores_one_and_replay_needs_no_server(
    tmp_path: Path, corpus: Path
) -> None:
    cassette = record(tmp_path, corpus, "live", extractor)
    with ScriptedLlmServer(extractor) as again:
        report = report_of(
            run_cli(
                "--corpus",
                str(corpus),
                "--backend",
                f"frozen=cassette:path={cassette}",
                "--backend",
                f"rerun=oai-http:url={again.url}",
                "--reference",
                "frozen",
            )
        )
    # The server that recorded the cassette is stopped: the frozen backend replays offline.
    rerun = report["backends"]["rerun"]
    assert rerun["strict"]["entities"]["f1"] == 1.0
    assert rerun["strict"]["facts"]["f1"] == 1.0
    assert report["backends"]["frozen"]["strict"]["facts"]["f1"] == 1.0
    assert report["backends"]["frozen"]["structured_output"]["clean"] == CALLS
    assert report["judge"] is None
    assert "no judge configured: strict-string scores only" in report["warnings"]


def test_a_renamed_fact_scores_lower_strict_and_the_judge_restores_it(
    tmp_path: Path, corpus: Path
) -> None:
    cassette = record(tmp_path, corpus, "a", extractor)
    renamed = renamed_fact_cassette(cassette, tmp_path / "b.jsonl")
    with ScriptedLlmServer(judge_aligning_everything) as judge:
        args = (
            "--corpus",
            str(corpus),
            "--backend",
            f"a=cassette:path={cassette}",
            "--backend",
            f"b=cassette:path={renamed}",
            "--judge",
            f"oai-http:url={judge.url}",
            "--judge-cache",
            str(tmp_path / "judge.jsonl"),
        )
        report = report_of(run_cli(*args))
        first_calls = judge.count
        b = report["backends"]["b"]
        assert b["strict"]["entities"]["f1"] == 1.0
        assert b["strict"]["facts"]["f1"] < 1.0
        assert b["strict"]["facts"]["matched"] == 5
        assert b["judged"]["facts"]["f1"] == 1.0
        assert first_calls == report["judge_calls"] > 0

        # The same run again: every judge answer comes from the cache.
        again = report_of(run_cli(*args))
        assert judge.count == first_calls
        assert again["judge_calls"] == 0
        assert again["backends"]["b"]["judged"] == b["judged"]


def test_pairwise_counts_a_judge_that_flips_with_the_slot_order(
    tmp_path: Path, corpus: Path
) -> None:
    cassette = record(tmp_path, corpus, "a", extractor)
    renamed = renamed_fact_cassette(cassette, tmp_path / "b.jsonl")
    with ScriptedLlmServer(judge_aligning_everything) as judge:
        report = report_of(
            run_cli(
                "--corpus",
                str(corpus),
                "--backend",
                f"a=cassette:path={cassette}",
                "--backend",
                f"b=cassette:path={renamed}",
                "--judge",
                f"oai-http:url={judge.url}",
                "--judge-mode",
                "pairwise",
                "--judge-cache",
                str(tmp_path / "judge.jsonl"),
            )
        )
        (pair,) = report["pairwise"]
        # The judge always answers "A": every article's two verdicts disagree.
        assert pair["inconsistent"] == len(ARTICLES) == pair["ties"]
        assert pair["wins"] == pair["losses"] == 0
        assert pair["inconsistency_rate"] == 1.0
        assert any("flip with the slot order" in w for w in report["warnings"])
        assert any("position bias" in w for w in report["warnings"])
        # Two articles got identical extractions from a and b, so their two slot orders are
        # the same question, asked once (cache); the renamed article needs both orders.
        assert judge.count == 4


def test_dry_run_prints_the_plan_and_calls_nothing(tmp_path: Path, corpus: Path) -> None:
    cassette = record(tmp_path, corpus, "a", extractor)
    with ScriptedLlmServer(extractor) as server:
        result = run_cli(
            "--corpus",
            str(corpus),
            "--backend",
            f"a=cassette:path={cassette}",
            "--backend",
            f"live=oai-http:url={server.url}",
            "--judge",
            f"oai-http:url={server.url}",
            "--judge-mode",
            "both",
            "--dry-run",
        )
        assert server.count == 0
    plan = json.loads(result.stdout)
    assert plan["dry_run"] is True
    assert [(b["name"], b["mode"], b["cassette_records"]) for b in plan["backends"]] == [
        ("a", "replay", CALLS),
        ("live", "live", None),
    ]
    assert plan["live_llm_calls"] == CALLS
    two_calls = json.loads(
        run_cli(
            "--corpus",
            str(corpus),
            "--backend",
            f"a=cassette:path={cassette}",
            "--single-call-max-chars",
            "0",
            "--dry-run",
        ).stdout
    )
    assert [b["calls"] for b in two_calls["backends"]] == [2 * len(ARTICLES)]


def test_either_extraction_protocol_scores_the_same_answers(tmp_path: Path, corpus: Path) -> None:
    with ScriptedLlmServer(extractor) as server:
        reports = []
        for limit in ("0", "10000"):
            result = run_cli(
                "--corpus",
                str(corpus),
                "--backend",
                f"a=oai-http:url={server.url}",
                "--backend",
                f"b=oai-http:url={server.url}",
                "--single-call-max-chars",
                limit,
            )
            reports.append(report_of(result))
        schemas = [_schema_name(body) for body in server.requests]
    per_protocol = 2 * len(ARTICLES)  # two backends
    assert sorted(set(schemas[: 2 * per_protocol])) == ["entities", "facts"]
    assert set(schemas[2 * per_protocol :]) == {"graph"}
    assert len(schemas) == 3 * per_protocol
    for report in reports:
        b = report["backends"]["b"]
        assert b["errors"] == 0
        assert b["strict"]["entities"]["f1"] == b["strict"]["facts"]["f1"] == 1.0


def test_guards_hold_in_dry_run_too(tmp_path: Path, corpus: Path) -> None:
    cassette = record(tmp_path, corpus, "a", extractor)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(cassette.read_bytes())
    specs = [parse_backend(f"a=cassette:path={cassette}"), parse_backend(f"b=cassette:path={copy}")]
    with pytest.raises(InvalidRequestError, match="byte-identical"):
        check_plan(specs, "a")
    same = [
        parse_backend(f"a=cassette:path={cassette}"),
        parse_backend(f"b=cassette:path={cassette}"),
    ]
    with pytest.raises(InvalidRequestError, match="same cassette"):
        check_plan(same, "a")
    with pytest.raises(InvalidRequestError, match="--reference"):
        check_plan(specs[:1], "zzz")

    duplicated = tmp_path / "dup.jsonl"
    first_line = cassette.read_text().splitlines()[0]
    duplicated.write_text(cassette.read_text() + first_line + "\n")
    with pytest.raises(DuplicateCassetteKeyError):
        check_plan([parse_backend(f"d=cassette:path={duplicated}")], "d")
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            "--corpus",
            str(corpus),
            "--backend",
            f"d=cassette:path={duplicated}",
            "--dry-run",
        ],
    )
    assert result.exit_code != 0
    assert isinstance(result.exception, DuplicateCassetteKeyError)


def test_ontology_compliance_is_the_share_of_types_in_the_vocabulary(
    tmp_path: Path, corpus: Path
) -> None:
    ontology = tmp_path / "ontology.yaml"
    ontology.write_text(
        "entity_types:\n  - name: Thing\nrelation_types:\n  - name: COMMANDED\n  - name: BUILT\n"
    )
    cassette = record(tmp_path, corpus, "a", extractor)
    with ScriptedLlmServer(extractor) as server:
        report = report_of(
            run_cli(
                "--corpus",
                str(corpus),
                "--backend",
                f"live=oai-http:url={server.url}",
                "--backend",
                f"frozen=cassette:path={cassette}",
                "--ontology",
                str(ontology),
            )
        )
    compliance = report["backends"]["live"]["ontology_compliance"]
    assert compliance["entity_types"] == 1.0  # every entity is typed Thing
    # COMMANDED twice and BUILT once, out of six facts.
    assert compliance["relation_types"] == 0.5
    # The ontology is part of the prompt: a cassette recorded without it misses, loudly.
    frozen = report["backends"]["frozen"]
    assert frozen["errors"] == len(ARTICLES)
    assert any("cassette" in sample for sample in frozen["error_samples"])
