"""`lcg eval`: compare extraction backends on frozen inputs (lcg.evals does the work)."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Any

import anyio
import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from lcg.config import load_settings
from lcg.evals.backends import BackendSpec, parse_backend
from lcg.evals.judge import Judge
from lcg.evals.judgecache import JudgeCache
from lcg.evals.plan import build_client, check_plan, describe_plan
from lcg.evals.runner import BackendRun, evaluate, extract_all, extraction_calls, load_articles
from lcg.ontology import Ontology
from lcg.ontology.loader import parse_ontology
from lcg.telemetry import NullSink

__all__ = ["eval_command"]

console = Console(stderr=True)
# The repository's test corpus, run from a source checkout (it is not in the package).
_DEFAULT_CORPUS = Path("examples/apollo/corpus_prose.jsonl")


def _corpus(path: Path | None) -> Path:
    if path is not None:
        return path
    if _DEFAULT_CORPUS.is_file():
        return _DEFAULT_CORPUS
    raise click.UsageError(
        f"no corpus found: pass --corpus PATH (JSON Lines as {_DEFAULT_CORPUS}, which is read "
        "from the working directory of a source checkout)"
    )


def _ontology(path: Path | None, mode: str | None) -> Ontology | None:
    if path is None:
        return None
    ontology = parse_ontology(path.read_text(encoding="utf-8"), str(path))
    if mode is None:
        return ontology
    return dataclasses.replace(ontology, mode="strict" if mode == "strict" else "open")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _table(report: dict[str, Any]) -> Table:
    table = Table(
        title=escape(f"lcg eval: {report['articles']} articles, reference {report['reference']}")
    )
    for column in (
        "backend",
        "ent F1",
        "fact F1",
        "ent F1 (judged)",
        "fact F1 (judged)",
        "clean/recov/malf/invalid",
        "errors",
        "p50 s",
        "tokens in/out",
        "USD",
    ):
        table.add_column(column)
    for name, b in report["backends"].items():
        judged = b["judged"]
        out = b["structured_output"]
        table.add_row(
            escape(name),
            _pct(b["strict"]["entities"]["f1"]),
            _pct(b["strict"]["facts"]["f1"]),
            _pct(judged["entities"]["f1"]) if judged else "-",
            _pct(judged["facts"]["f1"]) if judged else "-",
            f"{out['clean']}/{out['recovered']}/{out['malformed']}/{out['schema_invalid']}",
            str(b["errors"]),
            _pct(b["latency_s"]["p50"]),
            f"{b['tokens']['input']}/{b['tokens']['output']}",
            "-" if b["estimated_usd"] is None else f"{b['estimated_usd']:.4f}",
        )
    return table


@click.command("eval")
@click.option(
    "--backend",
    "backend_specs",
    multiple=True,
    required=True,
    help="NAME=SPEC: anthropic[:model=M] | oai-http:url=U[,model=M] | "
    "oai-uds:path=P[,model=M] | cassette:path=P (repeatable).",
)
@click.option(
    "--record-cassette",
    "records",
    multiple=True,
    help="NAME=PATH: record backend NAME's calls to a cassette.",
)
@click.option(
    "--reference", default=None, help="Backend the others are scored against (default: the first)."
)
@click.option("--corpus", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--limit", type=click.IntRange(1), default=10, show_default=True)
@click.option("--all", "all_articles", is_flag=True, help="Every article of the corpus.")
@click.option(
    "--judge", "judge_spec", default=None, help="Judge backend SPEC (as --backend, without NAME=)."
)
@click.option("--judge-model", default=None, help="Judge model (default judge: anthropic).")
@click.option(
    "--judge-mode",
    type=click.Choice(["reference", "pairwise", "both"]),
    default="reference",
    show_default=True,
)
@click.option(
    "--judge-cache",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Judge answer cache (default: <home>/eval/judge-cache.jsonl).",
)
@click.option(
    "--ontology",
    "ontology_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
)
@click.option("--ontology-mode", type=click.Choice(["open", "strict"]), default=None)
@click.option("--concurrency", type=click.IntRange(1, 64), default=4, show_default=True)
@click.option(
    "--single-call-max-chars",
    type=click.IntRange(0),
    default=None,
    help="Articles up to this length are extracted in one call, longer ones in two; 0: always "
    "two (default: LCG_EXTRACTION_SINGLE_CALL_MAX_CHARS, as ingestion does).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan and check every guard; no calls.")
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the report as JSON here.",
)
@click.pass_context
def eval_command(
    ctx: click.Context,
    backend_specs: tuple[str, ...],
    records: tuple[str, ...],
    reference: str | None,
    corpus: Path | None,
    limit: int,
    all_articles: bool,
    judge_spec: str | None,
    judge_model: str | None,
    judge_mode: str,
    judge_cache: Path | None,
    ontology_path: Path | None,
    ontology_mode: str | None,
    concurrency: int,
    single_call_max_chars: int | None,
    dry_run: bool,
    output: Path | None,
) -> None:
    """Compare extraction backends on the same frozen articles, against a reference."""
    home = ctx.obj.get("home")
    settings = load_settings(overrides={"home": home} if home else {})
    backends = [parse_backend(text) for text in backend_specs]
    for text in records:
        name, sep, path = text.partition("=")
        matches = [i for i, b in enumerate(backends) if b.name == name]
        if not sep or not path or not matches:
            raise click.BadParameter(
                f"{text!r}: expected NAME=PATH naming a backend", param_hint="--record-cassette"
            )
        backends[matches[0]] = dataclasses.replace(backends[matches[0]], record_to=Path(path))
    reference = reference or backends[0].name
    judge_backend: BackendSpec | None = None
    if judge_spec or judge_model:
        judge_backend = parse_backend(f"judge={judge_spec or 'anthropic'}")
        if judge_model:
            judge_backend = dataclasses.replace(
                judge_backend, options={**judge_backend.options, "model": judge_model}
            )
    cassettes = check_plan(backends, reference)
    articles = load_articles(_corpus(corpus), None if all_articles else limit)
    ontology = _ontology(ontology_path, ontology_mode)
    if single_call_max_chars is None:
        single_call_max_chars = settings.extraction_single_call_max_chars
    if dry_run:
        plan = describe_plan(
            backends,
            cassettes,
            len(articles),
            extraction_calls(articles, single_call_max_chars),
            judge=judge_backend.describe() if judge_backend else None,
            judge_mode=judge_mode,
        )
        click.echo(json.dumps(plan, indent=2))
        return

    events = NullSink()
    clients = {b.name: build_client(b, settings, events) for b in backends}
    judge = None
    if judge_backend is not None:
        cache = JudgeCache(judge_cache or settings.home / "eval" / "judge-cache.jsonl")
        judge_client = build_client(judge_backend, settings, events)
        judge = Judge(judge_client, judge_backend.describe(), cache)

    async def run() -> dict[str, Any]:
        runs: dict[str, BackendRun] = {}
        with Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console
        ) as progress:
            for b in backends:
                task = progress.add_task(escape(b.name), total=len(articles))
                runs[b.name] = await extract_all(
                    b.name,
                    clients[b.name],
                    articles,
                    ontology=ontology,
                    concurrency=concurrency,
                    single_call_max_chars=single_call_max_chars,
                    on_article=functools.partial(progress.advance, task),
                )
        return await evaluate(
            runs, articles, reference, judge=judge, judge_mode=judge_mode, ontology=ontology
        )

    report = anyio.run(run)
    console.print(_table(report))
    for warning in report["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    for pair in report["pairwise"]:
        console.print(
            escape(
                f"{pair['left']} vs {pair['right']}: {pair['wins']} wins, {pair['losses']} "
                f"losses, {pair['ties']} ties ({pair['inconsistent']} order-inconsistent)"
            ),
            highlight=False,
        )
    if output is not None:
        output.write_text(json.dumps(report, indent=2), encoding="utf-8")
    else:
        click.echo(json.dumps(report, indent=2))
