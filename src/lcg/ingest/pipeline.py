"""The ingestion pipeline: one episode in, one atomic commit out (docs/design.md,
docs/api.md §ingest-pipeline).

    extract   (no lock; up to LCG_EXTRACTION_CONCURRENCY episodes at once)
      a long episode: entities call -> names embedded with the body (one batch) -> at most K
        similar active facts about those entities -> facts call -> fact sentences embedded
      a short one (LCG_EXTRACTION_SINGLE_CALL_MAX_CHARS): body embedded -> at most K similar
        active facts about the group's entities the text names -> one call for entities and
        facts -> names and fact sentences embedded (one batch)
    resolve   (per group, strictly in arrival order; reads the group's resolution index)
      entities matched (lcg.ingest.resolve), facts deduplicated and superseded
      (lcg.ingest.supersede)
    commit    (Engine.commit_episode: the write lock, one WAL batch, one transaction)

No model or embedding call runs under the write lock, and an episode whose extraction fails
writes nothing. Episodes of one group commit in the order their calls arrived, whatever order
their extractions finish in; episodes of different groups do not wait for each other.
"""

from __future__ import annotations

import itertools
import time
import uuid as uuidlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

import anyio
import anyio.lowlevel
import anyio.to_thread
import numpy as np

from lcg.embedding.base import Vectors
from lcg.engine import Engine, EpisodeCommit
from lcg.engine.follow import lost_race
from lcg.errors import InvalidRequestError
from lcg.extraction.extractor import Cost, Extractor, HeuristicExtractor, LlmExtractor
from lcg.extraction.prompts import EpisodeContext, ExistingFact, KnownEntity, calls_for
from lcg.extraction.salvage import CleanEntity, CleanFact, SalvageReport
from lcg.extraction.select import llm_client
from lcg.ingest.caller import CallerExtractor, GivenEntity, GivenFact, prepare
from lcg.ingest.catchup import catch_up_index
from lcg.ingest.index import GroupIndex
from lcg.ingest.resolve import (
    Match,
    entity_labels,
    match_entities,
    plan_entities,
    resolve_facts,
    type_of,
)
from lcg.ingest.supersede import FactPlan, plan_facts, superseded_report
from lcg.models import Entity, Episode, Fact
from lcg.ontology import Ontology, load_ontology, record_ingested_ontology, write_wal_ontology
from lcg.ontology.supersession import Reason
from lcg.storage.backend import GroupMovedError
from lcg.timeutil import now

__all__ = ["EpisodeInput", "IngestOutcome", "IngestPipeline", "extractor_for", "pipeline_for"]


@dataclass(frozen=True)
class EpisodeInput:
    """One episode to ingest, as the methods pass it in (already validated)."""

    group_id: str
    name: str
    body: str
    reference_time: datetime
    source: str = "text"  # stored verbatim
    source_type: str = "text"  # what the extractor is told: text | json | message
    source_description: str = ""
    source_file: str = ""
    chunk_id: str = ""


@dataclass
class IngestOutcome:
    """What one ingested episode did (the methods shape it into their results)."""

    episode_uuid: str
    nodes_extracted: int
    edges_extracted: int
    dropped_edges: list[dict[str, Any]]
    entities_created: int
    entities_merged: int
    entities_reclassified_unclassified: int
    edges_reclassified_unclassified: int
    edges_duplicate: int
    edges_self_referential: int
    superseded: list[dict[str, Any]]
    salvage: SalvageReport
    extractor: dict[str, Any]
    cost: Cost
    timings: dict[str, float] = field(default_factory=dict)
    # Per extracted fact, in order: the uuid it is stored as (new, or the duplicate it merged
    # into), or None when it was dropped.
    fact_uuids: list[str | None] = field(default_factory=list)


@dataclass
class _Extracted:
    entities: list[CleanEntity]
    labels: list[tuple[tuple[str, ...], str | None]]
    name_vectors: Vectors | None
    facts: list[CleanFact]
    fact_vectors: dict[str, Vectors]
    candidates: list[Fact]


class _Committer(Protocol):
    """What the commit step needs of an extractor: its description and the same-entity check."""

    def describe(self) -> dict[str, Any]: ...

    async def same(self, pairs: Sequence[tuple[str, str, str, str]], cost: Cost) -> set[int]: ...


@dataclass
class _LoopState:
    """Per event loop: the concurrency bound and each group's last arrival."""

    semaphore: anyio.Semaphore
    tails: dict[str, anyio.Event] = field(default_factory=dict)


# Who flagged a fact's `supersedes`, by extractor kind (a model's judgement otherwise).
_FLAG_REASONS: dict[str, Reason] = {"caller": "caller", "heuristic": "cue"}

# Entities named in a short episode whose active facts may become supersession candidates.
_MENTIONS_CONSIDERED = 64

_LOOP_STATE: anyio.lowlevel.RunVar[dict[int, _LoopState]] = anyio.lowlevel.RunVar("lcg_ingest")


def extractor_for(engine: Engine) -> Extractor:
    """The configured extractor: `heuristic`, or the LLM `llm_client(engine)` resolves.

    Raises:
        ConfigError: LCG_EXTRACTOR=llm and no model is configured (names what to set).
    """
    if engine.settings.extractor == "heuristic":
        return HeuristicExtractor()
    return LlmExtractor(llm_client(engine))


def pipeline_for(engine: Engine) -> IngestPipeline:
    """The engine's pipeline (one per engine: it owns the groups' resolution indexes): the one
    `open_engine(..., ingest=...)` built, else one built now and kept on the engine."""
    pipeline = engine.ingest
    if pipeline is None:
        pipeline = engine.ingest = IngestPipeline(engine)
    if not isinstance(pipeline, IngestPipeline):
        raise TypeError(f"engine.ingest is {type(pipeline).__name__}, not an IngestPipeline")
    return pipeline


def _known_uuids(index: GroupIndex, entities: Sequence[CleanEntity]) -> list[str]:
    out = []
    for e in entities:
        uuid = index.lookup_norm(e.name) or index.lookup_keys(e.name, e.aliases)
        if uuid is not None and uuid not in out:
            out.append(uuid)
    return out


def _existing(index: GroupIndex, candidates: Sequence[Fact]) -> list[ExistingFact]:
    """The candidate facts as the prompts show them, with their endpoints' names."""
    names = _names(index, {u for f in candidates for u in (f.source_uuid, f.target_uuid)})
    return [
        ExistingFact(
            names.get(f.source_uuid, "?"),
            f.name,
            names.get(f.target_uuid, "?"),
            f.fact,
            f.valid_at,
        )
        for f in candidates
    ]


def _names(index: GroupIndex, uuids: set[str]) -> dict[str, str]:
    """Names of some of the group's entities (never a pass over all of them)."""
    return {u: index.entities[u].name for u in uuids if u in index.entities}


def _best(scores: Vectors, facts: Sequence[Fact], limit: int) -> list[Fact]:
    """The `limit` facts of best (score desc, uuid): a linear partition first (a hub entity may
    have thousands of facts), then an exact sort of the few at or above the K-th score."""
    if len(facts) > limit:
        kth = float(np.partition(scores, len(facts) - limit)[len(facts) - limit])
    else:
        kth = float("-inf")
    top = [(float(s), f.uuid, f) for s, f in zip(scores, facts, strict=True) if s >= kth]
    top.sort(key=lambda t: (-t[0], t[1]))
    return [f for _, _, f in top[:limit]]


class IngestPipeline:
    """Extract concurrently, resolve and commit in arrival order per group."""

    def __init__(self, engine: Engine, extractor: Extractor | None = None) -> None:
        self.engine = engine
        self.extractor = extractor
        self._indexes: dict[str, GroupIndex] = {}

    # -- per-loop state and the group indexes -------------------------------------------------

    def _loop(self) -> _LoopState:
        try:
            states = _LOOP_STATE.get()
        except LookupError:
            states = {}
            _LOOP_STATE.set(states)
        state = states.get(id(self))
        if state is None:
            state = states[id(self)] = _LoopState(
                anyio.Semaphore(self.engine.settings.extraction_concurrency)
            )
        return state

    def _position(self, group_id: str) -> tuple[str | None, int]:
        """(generation, next seq) of the group's WAL stream; taken under the write lock."""
        with self.engine.writer() as w:
            return w.position(group_id)

    def _load(self, group_id: str) -> GroupIndex:
        """A fresh index of the group from the committed graph (worker thread)."""
        engine = self.engine
        position = self._position(group_id)
        entities: list[Entity] = []
        facts: list[Fact] = []
        # A group with no WAL stream has no rows (every row is written to the WAL first): its
        # first episode skips the group-filtered reads, which scan the whole Entity and Fact
        # tables (bench/scale.py: the first episode after open took 5.4 s at 1M facts).
        if position != (None, 0):
            with engine.reader() as conn:
                entities = conn.entities_in_groups([group_id])
                facts = conn.facts_with_hops([group_id])
        index = GroupIndex(group_id, engine.parts.embedder.identity.dim, position=position)
        for f in facts:
            if f.expired_at is not None:
                index.retire(f)
        facts = [f for f in facts if f.expired_at is None]
        live = [e for e in entities if "Merged" not in e.labels]
        texts = [e.name for e in live] + [f.fact or f.name for f in facts]
        vectors = engine.parts.embedder.embed(texts) if texts else None
        for i, e in enumerate(live):
            index.put_entity(e, vectors[i] if vectors is not None else None)
        for j, f in enumerate(facts):
            index.put_fact(f, vectors[len(live) + j] if vectors is not None else None)
        return index

    async def _index(self, group_id: str, *, fresh: bool) -> GroupIndex:
        index = self._indexes.get(group_id)
        if index is not None and not fresh:
            return index
        if index is not None:
            position = await anyio.to_thread.run_sync(self._position, group_id)
            if position == index.position:
                return index
            # Server mode: other processes' commits, applied in place when they can be.
            if await anyio.to_thread.run_sync(catch_up_index, self.engine, index):
                return index
        index = await anyio.to_thread.run_sync(self._load, group_id)
        self._indexes[group_id] = index
        return index

    # -- the pipeline --------------------------------------------------------------------------

    async def ingest(self, item: EpisodeInput) -> IngestOutcome:
        """Extract, resolve and commit one episode.

        Raises:
            ConfigError: no extractor is configured.
            ExtractionError: the model failed; nothing was written.
            InvalidRequestError: the episode cannot be written to its group.
        """
        extractor = self.extractor or extractor_for(self.engine)

        async def extract(ontology: Ontology, cost: Cost, report: SalvageReport) -> _Extracted:
            return await self._extract(extractor, item, ontology, cost, report)

        return await self._run(item, extractor, extract)

    async def ingest_given(
        self, item: EpisodeInput, entities: Sequence[GivenEntity], facts: Sequence[GivenFact]
    ) -> IngestOutcome:
        """Resolve and commit what the caller extracted (knowledge_add_facts): no model call.

        Raises:
            InvalidRequestError: a fact endpoint or superseded uuid is not in the group (naming
                the field); nothing was written.
        """

        async def extract(ontology: Ontology, cost: Cost, report: SalvageReport) -> _Extracted:
            index = await self._index(item.group_id, fresh=True)
            prepared = prepare(index, ontology, entities, facts)
            names = [e.name for e in prepared.entities]
            texts = list(dict.fromkeys(f.fact for f in prepared.facts))
            vectors = (
                await anyio.to_thread.run_sync(self.engine.parts.embedder.embed, [*names, *texts])
                if names or texts
                else None
            )
            return _Extracted(
                prepared.entities,
                prepared.labels,
                vectors[: len(names)] if vectors is not None and names else None,
                prepared.facts,
                {t: vectors[len(names) + i] for i, t in enumerate(texts)}
                if vectors is not None
                else {},
                prepared.candidates,
            )

        return await self._run(item, CallerExtractor(), extract, ordered=True)

    async def _run(
        self,
        item: EpisodeInput,
        extractor: _Committer,
        extract: Callable[[Ontology, Cost, SalvageReport], Awaitable[_Extracted]],
        *,
        ordered: bool = False,
    ) -> IngestOutcome:
        """Extract (bounded concurrency), then resolve and commit in the group's arrival order.

        `ordered`: wait for the group's earlier episodes before extracting too (a caller-written
        episode is checked against the group as those left it; it has no model call to overlap).
        """
        started = time.perf_counter()
        state = self._loop()
        previous = state.tails.get(item.group_id)
        done = anyio.Event()
        state.tails[item.group_id] = done
        cost, report = Cost(), SalvageReport()
        waited = 0.0
        try:
            # A stat of two paths; the parsed files are cached by (mtime, size).
            ontology = load_ontology(self.engine.settings, item.group_id)
            queued = time.perf_counter()
            if ordered and previous is not None:
                await previous.wait()
            async with state.semaphore:
                waited += time.perf_counter() - queued
                extracted = await extract(ontology, cost, report)
            if previous is not None:
                queued = time.perf_counter()
                await previous.wait()
                waited += time.perf_counter() - queued
            outcome = await self._commit(extractor, item, ontology, extracted, cost, report)
        finally:
            if previous is not None and not previous.is_set():
                with anyio.CancelScope(shield=True):
                    await previous.wait()
            done.set()
            if state.tails.get(item.group_id) is done:
                del state.tails[item.group_id]
        total = time.perf_counter() - started
        outcome.timings = {
            "total_s": round(total, 6),
            "llm_s": round(cost.llm_seconds, 6),
            "queued_s": round(waited, 6),
            "engine_s": round(max(0.0, total - cost.llm_seconds - waited), 6),
        }
        self._emit(item, report, outcome)
        if ontology.present:
            await anyio.to_thread.run_sync(self._record_ontology, item.group_id, ontology)
        return outcome

    def _record_ontology(self, group_id: str, ontology: Ontology) -> None:
        write_wal_ontology(self.engine.settings, group_id, ontology)
        record_ingested_ontology(self.engine.settings)

    async def _extract(
        self,
        extractor: Extractor,
        item: EpisodeInput,
        ontology: Ontology,
        cost: Cost,
        report: SalvageReport,
    ) -> _Extracted:
        if not item.body.strip():
            return _Extracted([], [], None, [], {}, [])
        ctx = EpisodeContext(
            item.name,
            item.body,
            item.source_type,
            item.reference_time,
            ontology.prompt_block(),
            ontology,
        )
        if calls_for(item.body, self.engine.settings.extraction_single_call_max_chars) == 1:
            return await self._extract_single(extractor, item, ctx, ontology, cost, report)
        entities = await extractor.entities(ctx, report, cost)
        labels = [entity_labels(ontology, e.type) for e in entities]
        embedder = self.engine.parts.embedder
        vectors = await anyio.to_thread.run_sync(
            embedder.embed, [*(e.name for e in entities), item.body]
        )
        index = await self._index(item.group_id, fresh=False)
        candidates = self._candidates(index, _known_uuids(index, entities), vectors[-1])
        known = [
            KnownEntity(e.name, type_of(label_set) or "Entity")
            for e, (label_set, _) in zip(entities, labels, strict=True)
        ]
        facts = (
            await extractor.facts(ctx, known, _existing(index, candidates), report, cost)
            if entities
            else []
        )
        texts = list(dict.fromkeys(f.fact for f in facts))
        fact_vectors = await anyio.to_thread.run_sync(embedder.embed, texts) if texts else None
        return _Extracted(
            entities,
            labels,
            vectors[:-1] if entities else None,
            facts,
            {t: fact_vectors[i] for i, t in enumerate(texts)} if fact_vectors is not None else {},
            candidates,
        )

    async def _extract_single(
        self,
        extractor: Extractor,
        item: EpisodeInput,
        ctx: EpisodeContext,
        ontology: Ontology,
        cost: Cost,
        report: SalvageReport,
    ) -> _Extracted:
        """One call for a short episode; its existing facts are about entities the text names."""
        embedder = self.engine.parts.embedder
        body = await anyio.to_thread.run_sync(embedder.embed, [item.body])
        index = await self._index(item.group_id, fresh=False)
        named = index.mentioned(item.body, _MENTIONS_CONSIDERED)
        candidates = self._candidates(index, named, body[0])
        entities, facts = await extractor.episode(ctx, _existing(index, candidates), report, cost)
        names = [e.name for e in entities]
        texts = list(dict.fromkeys(f.fact for f in facts))
        vectors = (
            await anyio.to_thread.run_sync(embedder.embed, [*names, *texts])
            if names or texts
            else None
        )
        return _Extracted(
            entities,
            [entity_labels(ontology, e.type) for e in entities],
            vectors[: len(names)] if vectors is not None and names else None,
            facts,
            {t: vectors[len(names) + i] for i, t in enumerate(texts)}
            if vectors is not None
            else {},
            candidates,
        )

    def _candidates(self, index: GroupIndex, about: Sequence[str], body: Vectors) -> list[Fact]:
        """The K active facts about the entities `about` most similar to the body, then (up to K
        more, most similar first) those joining two of those entities that missed the cut.

        A fact between two entities the text names is the one a drop or a new minimum of the
        text ends ("Drop support for Python 3.9" ends `pydantic SUPPORTS Python 3.9`), however
        many more similar facts a hub entity has; finding them costs nothing extra (the same
        pass over the entities' facts, in the group's index).
        """
        limit = self.engine.settings.supersede_candidates
        facts, joined = index.current_facts_among(about) if limit else ([], set())
        if len(facts) <= limit:
            return sorted(facts, key=lambda f: f.uuid)
        assert index.fact_vectors is not None
        scores = index.fact_vectors.scores([f.uuid for f in facts], body, missing=-1.0)
        top = _best(scores, facts, limit)
        if joined:
            chosen = {f.uuid for f in top}
            rest = [i for i, f in enumerate(facts) if f.uuid in joined and f.uuid not in chosen]
            if rest:
                top += _best(scores[rest], [facts[i] for i in rest], limit)
        return top

    async def _commit(
        self,
        extractor: _Committer,
        item: EpisodeInput,
        ontology: Ontology,
        extracted: _Extracted,
        cost: Cost,
        report: SalvageReport,
    ) -> IngestOutcome:
        kind = str(extractor.describe().get("kind", ""))
        retried_invalid = False
        for attempt in itertools.count(1):
            index = await self._index(item.group_id, fresh=True)
            matches = match_entities(
                index,
                extracted.entities,
                [labels for labels, _ in extracted.labels],
                extracted.name_vectors,
                self.engine.settings.dedup_embedding_threshold,
            )
            matches = await self._confirm_ambiguous(extractor, index, extracted, matches, cost)
            episode_uuid = str(uuidlib.uuid4())
            plan = plan_entities(
                index,
                extracted.entities,
                extracted.labels,
                matches,
                group_id=item.group_id,
                reference_time=item.reference_time,
                summary_cap=self.engine.settings.summary_max_chars,
            )
            stamp = now()
            facts = plan_facts(
                index,
                resolve_facts(index, plan, extracted.facts),
                extracted.candidates,
                ontology=ontology,
                group_id=item.group_id,
                episode_uuid=episode_uuid,
                reference_time=item.reference_time,
                now=stamp,
                flag_reason=_FLAG_REASONS.get(kind, "model"),
                builtin=kind in ("caller", "heuristic"),
            )
            mentions = list(plan.mentions)
            for f in facts.new_facts:
                mentions += [u for u in (f.source_uuid, f.target_uuid) if u not in mentions]
            episode = Episode(
                uuid=episode_uuid,
                group_id=item.group_id,
                name=item.name,
                content=item.body,
                source=item.source,
                source_description=item.source_description,
                source_file=item.source_file,
                chunk_id=item.chunk_id,
                created_at=item.reference_time,
                valid_at=item.reference_time,
            )
            ends = {
                u
                for inv in facts.invalidations.values()
                for u in (
                    index.facts[inv.fact_uuid].source_uuid,
                    index.facts[inv.fact_uuid].target_uuid,
                )
            }
            superseded = superseded_report(facts, index, _names(index, ends))
            expected = index.position
            try:
                seqs = await self.engine.commit_episode(
                    EpisodeCommit(
                        item.group_id,
                        episode,
                        list(plan.rows.values()),
                        facts.rows,
                        list(facts.invalidations.values()),
                        mentions,
                        # Minted here: created without a lookup (lcg.engine.commits).
                        frozenset([episode_uuid, *plan.minted, *(f.uuid for f in facts.new_facts)]),
                    ),
                    at=expected[1] if expected is not None else None,
                )
            except GroupMovedError as exc:
                # Server mode: another process committed to the group since the index was
                # read. Nothing was written and the engine caught up: resolve again (the
                # extraction and its vectors are kept; no model call), after a backoff.
                await anyio.sleep(lost_race(exc, attempt))
                continue
            except InvalidRequestError as exc:
                # A writer outside the pipeline removed something the index still held.
                index.reload()
                if retried_invalid or exc.field not in ("facts", "invalidations"):
                    raise
                retried_invalid = True
                continue
            self._apply(index, expected, seqs, extracted, plan.rows, facts)
            return IngestOutcome(
                episode_uuid=episode_uuid,
                nodes_extracted=len(plan.mentions),
                edges_extracted=len(facts.new_facts),
                dropped_edges=facts.dropped,
                entities_created=plan.created,
                entities_merged=plan.merged,
                entities_reclassified_unclassified=plan.reclassified,
                edges_reclassified_unclassified=facts.reclassified,
                edges_duplicate=facts.duplicates,
                edges_self_referential=facts.self_loops,
                superseded=superseded,
                salvage=report,
                extractor=extractor.describe(),
                cost=cost,
                fact_uuids=facts.outcomes,
            )
        raise AssertionError("unreachable: the loop returns or raises")

    async def _confirm_ambiguous(
        self,
        extractor: _Committer,
        index: GroupIndex,
        extracted: _Extracted,
        matches: list[Match],
        cost: Cost,
    ) -> list[Match]:
        """The optional LLM check, for the ambiguous remainder only (one call for all pairs)."""
        todo = [i for i, m in enumerate(matches) if m.how == "ambiguous" and m.uuid]
        if not todo or not self.engine.settings.dedup_llm:
            return matches
        pairs = []
        for i in todo:
            e, other = extracted.entities[i], index.entities[matches[i].uuid or ""]
            pairs.append((e.name, e.summary, other.name, other.summary))
        same = await extractor.same(pairs, cost)
        out = list(matches)
        for k, i in enumerate(todo):
            if k in same:
                out[i] = Match("llm", matches[i].uuid, score=matches[i].score)
        return out

    def _apply(
        self,
        index: GroupIndex,
        expected: tuple[str | None, int] | None,
        seqs: list[tuple[int, int]],
        extracted: _Extracted,
        rows: dict[str, Entity],
        facts: FactPlan,
    ) -> None:
        """Bring the index up to date with what was just committed (or mark it for reload)."""
        if expected is None or not seqs or seqs[0][0] != expected[1]:
            index.reload()
            return
        vec_of = {
            e.name: extracted.name_vectors[i]
            for i, e in enumerate(extracted.entities)
            if extracted.name_vectors is not None
        }
        for row in rows.values():
            known = index.names.get(row.uuid) if index.names is not None else None
            vec = known if known is not None else vec_of.get(row.name)
            if vec is None:
                vec = np.asarray(self.engine.parts.embedder.embed([row.name])[0])
            index.put_entity(row, vec)
        for inv in facts.invalidations.values():
            retired = index.facts.get(inv.fact_uuid)
            index.drop_fact(inv.fact_uuid)
            if retired is not None:
                index.retire(replace(retired, invalid_at=inv.invalid_at, expired_at=inv.expired_at))
        for f in facts.rows:
            index.put_fact(f, extracted.fact_vectors.get(f.fact))
        index.position = (expected[0] or self._generation(index.group_id), seqs[-1][1] + 1)

    def _generation(self, group_id: str) -> str | None:
        return self._position(group_id)[0]

    def _emit(self, item: EpisodeInput, report: SalvageReport, outcome: IngestOutcome) -> None:
        events = self.engine.parts.events
        if report.entities_missing_summary:
            events.emit(
                "entities_missing_summary",
                group_id=item.group_id,
                episode=item.name,
                count=report.entities_missing_summary,
            )
        if report.repaired_or_dropped:
            events.emit(
                "structured_output_parse",
                group_id=item.group_id,
                episode=item.name,
                salvage=report.as_dict(),
            )
        events.emit(
            "episode_ingested",
            group_id=item.group_id,
            episode_uuid=outcome.episode_uuid,
            extractor=outcome.extractor["kind"],
            llm_calls=outcome.cost.calls,
            nodes=outcome.nodes_extracted,
            edges=outcome.edges_extracted,
            superseded=len(outcome.superseded),
            dropped_edges=len(outcome.dropped_edges),
            **outcome.timings,
        )
