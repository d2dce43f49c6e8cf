"""The scripted 9-episode changelog an agent-style client writes with knowledge_add_facts, and
the exact answers every read of time must give afterwards (tests/integration/ingest/test_add_facts.py
over the socket, test_mcp_add_facts.py over MCP).

The changelog (group `changelog`, dates in 2025) retires facts in every way the method knows:
lcg's built-in families (a new lead, a new team, a moved deadline, a rewrite), a uuid the client
names (a database migration), and not at all for an additive fact ("also joined") or a fact
given with its own end. The expected answers are written out by hand.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
G = "changelog"

LEAD_MARIA = "Maria Lopez leads the Atlas project."
LEAD_PRIYA = "Priya Shah now leads the Atlas project."
TOM_PAYMENTS = "Tom Reed is on the Payments Team."
TOM_SEARCH = "Tom Reed moved to the Search Team."
TOM_PLATFORM = "Tom Reed also joined the Platform Team."
DB_MYSQL = "Billing Service stores its data in MySQL."
DB_POSTGRES = "Billing Service migrated from MySQL to PostgreSQL."
OWNER = "Billing Service is owned by the Payments Team."
PYTHON = "atlas-core is written in Python."
RUST = "atlas-core was rewritten in Rust."
DEADLINE_JUNE = "The Atlas launch is due on 2025-06-30."
DEADLINE_SEPT = "The Atlas launch moved to 2025-09-15."
MENTOR = "Maria Lopez also mentors Tom Reed."
ONCALL = "Maria Lopez was on call for Billing Service in January."


def fact(source: str, relation: str, target: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"source": source, "target": target, "relation_type": relation, "fact": text, **extra}


async def add(call: Call, day: str, entities: list[str], facts: list[dict[str, Any]]) -> Any:
    return await call(
        "knowledge_add_facts",
        {
            "group_id": G,
            "reference_time": day,
            "name": f"changelog {day}",
            "body": " ".join(f["fact"] for f in facts),
            "entities": [{"name": n} for n in entities],
            "facts": facts,
        },
    )


async def write_changelog(call: Call) -> dict[str, Any]:
    """The nine episodes; returns what the checks need (uuids, results)."""
    seen: dict[str, Any] = {}
    r1 = await add(
        call,
        "2025-01-06",
        ["Maria Lopez", "Atlas", "Tom Reed", "Payments Team", "2025-06-30"],
        [
            fact("Maria Lopez", "LEADS", "Atlas", LEAD_MARIA),
            fact("Tom Reed", "MEMBER_OF", "Payments Team", TOM_PAYMENTS),
            fact("Atlas", "DEADLINE", "2025-06-30", DEADLINE_JUNE),
        ],
    )
    seen["lead_maria"], seen["tom_payments"], seen["june"] = r1["fact_uuids"]
    r2 = await add(
        call,
        "2025-02-03",
        ["Billing Service", "MySQL", "atlas-core", "Python"],
        [
            fact("Billing Service", "PRIMARY_DATABASE", "MySQL", DB_MYSQL),
            fact("Billing Service", "OWNED_BY", "Payments Team", OWNER),
            fact("atlas-core", "WRITTEN_IN", "Python", PYTHON),
        ],
    )
    seen["mysql"], seen["owner"], seen["python"] = r2["fact_uuids"]
    r3 = await add(
        call,
        "2025-03-03",
        ["Search Team"],
        [fact("Tom Reed", "MEMBER_OF", "Search Team", TOM_SEARCH)],
    )
    seen["r3"] = r3
    r4 = await add(
        call,
        "2025-03-17",
        ["PostgreSQL"],
        [
            fact(
                "Billing Service",
                "MIGRATED_TO",
                "PostgreSQL",
                DB_POSTGRES,
                supersedes=[seen["mysql"]],
            )
        ],
    )
    seen["r4"] = r4
    r5 = await add(
        call, "2025-04-01", ["Priya Shah"], [fact("Priya Shah", "LEADS", "Atlas", LEAD_PRIYA)]
    )
    seen["r5"] = r5
    seen["lead_priya"] = r5["fact_uuids"][0]
    r6 = await add(
        call,
        "2025-04-14",
        ["Platform Team"],
        [
            fact("Tom Reed", "MEMBER_OF", "Platform Team", TOM_PLATFORM),
            fact("Maria Lopez", "MENTORS", "Tom Reed", MENTOR),
        ],
    )
    seen["r6"] = r6
    r7 = await add(
        call,
        "2025-05-05",
        ["2025-09-15"],
        [fact("Atlas", "DEADLINE", "2025-09-15", DEADLINE_SEPT)],
    )
    seen["r7"] = r7
    r8 = await add(call, "2025-06-02", ["Rust"], [fact("atlas-core", "WRITTEN_IN", "Rust", RUST)])
    seen["r8"] = r8
    r9 = await add(
        call,
        "2025-06-16",
        [],
        [
            fact(
                "Maria Lopez",
                "ON_CALL_FOR",
                "Billing Service",
                ONCALL,
                valid_at="2025-01-01",
                invalid_at="2025-02-01",
            ),
            fact("Priya Shah", "LEADS", "Atlas", LEAD_PRIYA),  # a repeat: deduplicated
        ],
    )
    seen["r9"] = r9
    return seen


def retired(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(s["fact"], s["reason"], s["invalid_at"]) for s in result["edges_superseded"]]


async def check_changelog(call: Call) -> None:
    seen = await write_changelog(call)
    # What each episode retired, and why.
    assert retired(seen["r3"]) == [(TOM_PAYMENTS, "builtin", "2025-03-03 00:00:00")]
    assert retired(seen["r4"]) == [(DB_MYSQL, "caller", "2025-03-17 00:00:00")]
    assert retired(seen["r5"]) == [(LEAD_MARIA, "builtin", "2025-04-01 00:00:00")]
    assert retired(seen["r6"]) == []  # additive: "also joined", "also mentors"
    assert retired(seen["r7"]) == [(DEADLINE_JUNE, "builtin", "2025-05-05 00:00:00")]
    assert retired(seen["r8"]) == [(PYTHON, "builtin", "2025-06-02 00:00:00")]
    assert retired(seen["r9"]) == []
    assert seen["r9"]["fact_uuids"][1] == seen["lead_priya"]
    assert seen["r9"]["edges_duplicate"] == 1
    for key in ("r3", "r4", "r5", "r6", "r7", "r8", "r9"):
        assert seen[key]["extractor"] == {"kind": "caller"}
        assert seen[key]["cost"]["llm_calls"] == 0
    superseded_by = {s["fact"]: s["superseded_by"] for s in seen["r5"]["edges_superseded"]}
    assert superseded_by == {LEAD_MARIA: seen["lead_priya"]}

    # Every fact, with its bi-temporal columns.
    everything = await call("knowledge_get_edges_by_group", {"group_ids": [G]})
    edges = {e["fact"]: e for e in everything["edges"]}
    assert len(everything["edges"]) == 14
    ended = {
        LEAD_MARIA: "2025-04-01 00:00:00",
        TOM_PAYMENTS: "2025-03-03 00:00:00",
        DB_MYSQL: "2025-03-17 00:00:00",
        DEADLINE_JUNE: "2025-05-05 00:00:00",
        PYTHON: "2025-06-02 00:00:00",
        ONCALL: "2025-02-01 00:00:00",
    }
    assert {t: e["invalid_at"] for t, e in edges.items() if e["invalid_at"]} == ended
    expired = await call(
        "knowledge_query_cypher",
        {
            "query": f"MATCH (f:Fact) WHERE f.group_id = '{G}' AND f.expired_at IS NOT NULL "
            "RETURN f.fact"
        },
    )
    assert sorted(r[0] for r in expired["rows"]) == sorted(set(ended) - {ONCALL})

    # What is true now.
    now = await call(
        "knowledge_get_edges_by_group", {"group_ids": [G], "include_invalidated": False}
    )
    assert sorted(e["fact"] for e in now["edges"]) == sorted(
        [LEAD_PRIYA, TOM_SEARCH, TOM_PLATFORM, DB_POSTGRES, OWNER, RUST, DEADLINE_SEPT, MENTOR]
    )

    # What was true on 2025-02-15.
    then = await call(
        "knowledge_get_edges_by_group", {"group_ids": [G], "as_of": "2025-02-15T00:00:00Z"}
    )
    assert sorted(e["fact"] for e in then["edges"]) == sorted(
        [LEAD_MARIA, TOM_PAYMENTS, DEADLINE_JUNE, DB_MYSQL, OWNER, PYTHON]
    )

    # What changed in [2025-03-01, 2025-05-01).
    changes = await call(
        "knowledge_get_changes",
        {"group_ids": [G], "since": "2025-03-01T00:00:00Z", "until": "2025-05-01T00:00:00Z"},
    )
    assert [(c["kind"], c["at"], c["fact"]["fact"]) for c in changes["changes"]] == [
        ("started", "2025-03-03 00:00:00", TOM_SEARCH),
        ("ended", "2025-03-03 00:00:00", TOM_PAYMENTS),
        ("started", "2025-03-17 00:00:00", DB_POSTGRES),
        ("ended", "2025-03-17 00:00:00", DB_MYSQL),
        ("started", "2025-04-01 00:00:00", LEAD_PRIYA),
        ("ended", "2025-04-01 00:00:00", LEAD_MARIA),
        # Two facts of one episode start together: ordered by their sentence (a stable key,
        # not the randomly minted uuid), so the same graph lists them in the same order.
        *sorted(
            [
                ("started", "2025-04-14 00:00:00", MENTOR),
                ("started", "2025-04-14 00:00:00", TOM_PLATFORM),
            ],
            key=lambda c: c[2],
        ),
    ]

    # Atlas's timeline links the old lead to the new one.
    timeline = await call("knowledge_get_entity_timeline", {"name": "Atlas", "group_id": G})
    by_text = {f["fact"]: f for f in timeline["facts"]}
    assert by_text[LEAD_MARIA]["status"] == "superseded"
    assert by_text[LEAD_MARIA]["superseded_by"] == [seen["lead_priya"]]
    assert by_text[LEAD_PRIYA]["status"] == "current"
