"""Benchmark what a CHECKPOINT costs after one entity summary update, round after round;
prints one JSON object.

    python bench/checkpoint.py [--entities 20000] [--rounds 8] [--copy]

Writes `--entities` entities (ordinary `upsert_entities`, or `COPY` through the bulk replay's
loader, `storage.bulk.load_folded`, with `--copy`), checkpoints, then `--rounds` times: update
one entity's summary, CHECKPOINT. Per round: the checkpoint's wall and CPU time and the bytes of the Entity
summary dictionary Kuzu keeps (`CALL storage_info`, column `summary_data`). Kuzu 0.11.3 appends
a full copy of the node group's live summaries at every such checkpoint and never prunes it
(storage/README.md, "String columns"), so both grow by round.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from lcg.models import Entity
from lcg.storage import bulk, graph
from lcg.storage.store import Store
from lcg.wal.fold import FoldedGroup

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _entity(i: int) -> Entity:
    return Entity(
        uuid=f"e{i:07d}",
        group_id="g",
        name=f"name {i}",
        summary=f"summary of entity {i} " + "x" * 150,
        created_at=T0,
    )


def _summary_bytes(store: Store) -> int:
    with store.writer() as w:
        rows = w.rows("CALL storage_info('Entity') RETURN column_name, num_values")
    return sum(int(r[1]) for r in rows if r[0] == "summary_data")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entities", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--copy", action="store_true", help="load with COPY (as the bulk replay)")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="lcg-ckpt-"))
    store = Store(home / "g.db")
    try:
        entities = [_entity(i) for i in range(args.entities)]
        with store.transaction() as tx:
            if args.copy:  # the bulk replay's loader, as a rebuild runs it
                group = FoldedGroup("g", entities={e.uuid: e for e in entities})
                bulk.load_folded(tx, group, [])
            else:
                graph.upsert_entities(tx, entities, new={e.uuid for e in entities})
        store.checkpoint(force=True)
        rounds = []
        for k in range(args.rounds):
            changed = replace(entities[k], summary=f"changed {k}")
            with store.transaction() as tx:
                graph.upsert_entities(tx, [changed])
            wall, cpu = time.perf_counter(), time.process_time()
            store.checkpoint(force=True)
            rounds.append(
                {
                    "checkpoint": k + 1,
                    "wall_ms": round(1000 * (time.perf_counter() - wall), 1),
                    "cpu_ms": round(1000 * (time.process_time() - cpu), 1),
                    "summary_dictionary_bytes": _summary_bytes(store),
                }
            )
        print(
            json.dumps(
                {
                    "entities": args.entities,
                    "load": "copy" if args.copy else "upsert",
                    "live_summary_bytes": sum(len(e.summary) for e in entities),
                    "load_average": os.getloadavg()[0],
                    "rounds": rounds,
                }
            )
        )
    finally:
        store.close()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
