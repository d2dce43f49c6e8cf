"""lcg.admin.cypher's lexer: how a raw Cypher statement is classified and checked.

`is_mutation` decides whether a `knowledge_query_cypher` statement runs in the logged write path
or on a reader connection, so a mutation it misses is applied without ever reaching the WAL.
"""

from __future__ import annotations

import pytest

from lcg.admin.cypher import check_statement, is_mutation
from lcg.errors import InvalidRequestError


@pytest.mark.parametrize(
    "query",
    [
        "CREATE (n:Entity {uuid: 'x'})",
        "MATCH (e:Entity) SET e.summary = 'x'",
        "match (e:Entity) detach delete e",
        "MERGE (m:Meta {key: 'k'})",
        "MATCH (e:Entity) REMOVE e.summary",
        "DROP TABLE Foo",
        "COPY Entity FROM 'x.csv'",
        "ALTER TABLE Entity ADD x INT64",
        "MATCH (e:Entity {name: 'it\\'s'}) SET e.summary = 'x'",
        'MATCH (e:Entity {name: "say \\"hi\\""}) SET e.summary = "x"',
        "MATCH (e:Entity) // don't worry\nSET e.summary = 'x'",
        "MATCH (e:Entity) /* it's fine */ SET e.summary = 'x'",
        "MATCH (e:Entity {name: 'a\\\\'}) SET e.summary = 'x'",
    ],
    ids=[
        "create",
        "set",
        "lower-case-detach-delete",
        "merge",
        "remove",
        "drop",
        "copy",
        "alter",
        "escaped-single-quote-before-set",
        "escaped-double-quote-before-set",
        "quote-in-line-comment",
        "quote-in-block-comment",
        "escaped-backslash-ends-the-literal",
    ],
)
def test_mutations_are_recognised(query: str) -> None:
    assert is_mutation(query)


@pytest.mark.parametrize(
    "query",
    [
        "MATCH (e:Entity) RETURN e.name",
        "MATCH (e:Entity {name: 'CREATE SET DELETE'}) RETURN e",
        'RETURN "MERGE"',
        "MATCH (e:Entity {name: 'it\\'s a SET'}) RETURN e",
        "MATCH (e:Entity) RETURN e // then DELETE everything",
        "MATCH (n:`SET`) RETURN n",
        "CALL CREATE_FTS_INDEX('Entity', 'entity_text', ['name'])",
        "CALL DROP_FTS_INDEX('Entity', 'entity_text')",
        "MATCH (e:Entity) WHERE e.created_at < timestamp('2024-01-01') RETURN e",
    ],
    ids=[
        "read",
        "keywords-in-a-literal",
        "keyword-in-a-double-quoted-literal",
        "keyword-after-an-escaped-quote",
        "keyword-in-a-comment",
        "keyword-as-a-quoted-name",
        "fts-index-creation",
        "fts-index-drop",
        "reserved-looking-words",
    ],
)
def test_reads_and_index_ddl_are_not_mutations(query: str) -> None:
    assert not is_mutation(query)


@pytest.mark.parametrize(
    "query",
    [
        "RETURN 1",
        "RETURN 1;",
        "  RETURN 1 ;  ",
        "RETURN 'a;b'",
        'RETURN "it\\"s; here"',
        "RETURN 1 // ; not a second statement",
        "MATCH (n:`a;b`) RETURN n",
        "MATCH (e:Entity) RETURN e.name AS beginning",
        "CALL QUERY_FTS_INDEX('Entity', 'entity_text', 'apollo') RETURN node.uuid",
    ],
)
def test_single_statements_pass_the_check(query: str) -> None:
    check_statement(query)


@pytest.mark.parametrize(
    "query",
    [
        "RETURN 1; RETURN 2",
        "MATCH (e:Entity) SET e.summary = 'x'; MATCH (e:Entity) RETURN e",
        "RETURN 'it\\'s'; RETURN 2",
        "BEGIN TRANSACTION",
        "begin transaction read only",
        "COMMIT",
        "ROLLBACK;",
        "COMMIT_SKIP_CHECKPOINT",
    ],
    ids=[
        "two-reads",
        "write-then-read",
        "after-an-escaped-quote",
        "begin",
        "begin-read-only",
        "commit",
        "rollback",
        "commit-skip-checkpoint",
    ],
)
def test_several_statements_or_transaction_control_are_refused(query: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        check_statement(query)
    assert info.value.field == "query"


@pytest.mark.parametrize(
    "query",
    [
        "CHECKPOINT",
        "INSTALL json",
        "LOAD EXTENSION fts",
        "ATTACH '/tmp/other.db' AS other (dbtype kuzu)",
        "detach database other",
        "EXPORT DATABASE '/tmp/out'",
        "CALL CREATE_FTS_INDEX('Entity', 'entity_text', ['name'])",
        "CALL DROP_FTS_INDEX('Entity', 'entity_text')",
        "CALL CREATE_VECTOR_INDEX('Entity', 'v', 'name')",
    ],
)
def test_database_and_index_management_is_refused(query: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        check_statement(query)
    assert info.value.field == "query"
    if "INDEX" in query:  # lcg owns the indexes: the refusal says it keeps none in Kuzu
        assert "lcg keeps no Kuzu full-text or vector index" in str(info.value)
