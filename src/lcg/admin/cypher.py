"""`knowledge_query_cypher`: one Cypher statement run verbatim
(docs/api.md §knowledge_query_cypher), and the lexer that decides whether it may run and whether it
mutates.

A read runs on the writer under the write lock; a mutation is one `Engine.write` whose batch
(one `cypher.exec` line in the default group's WAL) the statement itself applies, in the
kernel's commit — so a statement that fails is never logged, and a commit that fails after the
append is recovered as every other write is.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lcg.engine import Batch, Engine
from lcg.errors import InvalidRequestError
from lcg.models import DEFAULT_GROUP_ID
from lcg.storage.backend import GraphReader
from lcg.wal.changes import CypherExec, encode

__all__ = ["check_statement", "is_mutation", "query_cypher"]

_MUTATION_TOKENS = frozenset(
    {"CREATE", "MERGE", "SET", "DELETE", "DETACH", "DROP", "REMOVE", "COPY", "ALTER"}
)


def _code_only(query: str) -> str:
    """`query` with string literals, backquoted names and comments blanked out.

    Follows Kuzu's lexer: a backslash escapes the next character inside quotes, and `//` and
    `/* */` are comments (a quote inside one opens no literal).
    """
    out: list[str] = []
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch in "'\"`":
            i += 1
            while i < n and query[i] != ch:
                i += 2 if query[i] == "\\" and ch != "`" else 1
            i += 1
            out.append(" ")
        elif query.startswith("//", i):
            end = query.find("\n", i)
            i = n if end < 0 else end
            out.append(" ")
        elif query.startswith("/*", i):
            end = query.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        else:
            out.append(ch)
            i += 1
    return "".join(out)


_TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK")
_DATABASE_ADMIN = frozenset(
    {"ATTACH", "INSTALL", "LOAD", "IMPORT", "EXPORT", "USE", "CHECKPOINT", "UNINSTALL"}
)


def check_statement(query: str) -> None:
    """Refuse what `knowledge_query_cypher` cannot run safely: several statements in one query,
    or transaction control (a transaction left open on a pooled connection blocks every write).

    Raises:
        InvalidRequestError: naming `query`.
    """
    code = _code_only(query).strip().rstrip(";")
    if ";" in code:
        raise InvalidRequestError(
            "query must be a single Cypher statement (it contains ';')", field="query"
        )
    words = code.split(None, 2)
    if words and words[0].upper().startswith(_TRANSACTION_CONTROL):
        raise InvalidRequestError(
            f"query must not control transactions ({words[0]}): lcg runs "
            "each statement in a transaction of its own",
            field="query",
        )
    first = words[0].upper() if words else ""
    if first in _DATABASE_ADMIN or (
        first == "DETACH" and len(words) > 1 and words[1].upper() == "DATABASE"
    ):
        raise InvalidRequestError(
            f"query must not manage the database ({first}): lcg owns the "
            "database file, its extensions and its checkpoints",
            field="query",
        )
    upper = code.upper()
    if "_FTS_INDEX" in upper.replace("QUERY_FTS_INDEX", "") or "_VECTOR_INDEX" in upper:
        raise InvalidRequestError(
            "query must not create or drop indexes: lcg keeps no Kuzu full-text or vector "
            "index, search is served by its own index (knowledge_build_indices rebuilds it)",
            field="query",
        )


def is_mutation(query: str) -> bool:
    """The reference's heuristic: a whole-word mutating keyword outside string literals."""
    upper = _code_only(query).upper()
    for sep in "()[]{},;:.=<>-":
        upper = upper.replace(sep, " ")
    return bool(set(upper.split()) & _MUTATION_TOKENS)


async def query_cypher(engine: Engine, query: str) -> dict[str, Any]:
    """Run a Cypher statement verbatim; mutations are logged to the default group's WAL."""
    check_statement(query)
    if not is_mutation(query):
        return await engine.write(lambda conn: ({"rows": _stringify_rows(conn.rows(query))}, []))
    rows: list[list[Any]] = []

    def run(tx: GraphReader) -> None:  # in the commit's transaction, before the WAL append
        rows.extend(tx.rows(query))

    batch = Batch(DEFAULT_GROUP_ID, [encode(CypherExec(query))], apply=run)
    await engine.write(lambda conn: (None, [batch]))
    return {"rows": _stringify_rows(rows)}


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, datetime):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(_cell(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_cell(v)}" for k, v in value.items()) + "}"
    return str(value)


def _stringify_rows(rows: list[list[Any]]) -> list[list[str]]:
    return [[_cell(v) for v in row] for row in rows]
