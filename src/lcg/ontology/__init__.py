"""The ontology: declared entity and relation types, per workspace or per group (docs/ontology.md).

`load_ontology(settings, group_id)` resolves the ontology governing a group; the typing
maintenance passes over a group (knowledge_reprocess_entity_types and friends) are the curation
area's (`lcg.curation.retyping`): they take the engine, which sits above this package.
"""

from lcg.ontology.loader import (
    load_ontology,
    load_workspace_ontology,
    no_ontology,
    ontology_status,
    parse_ontology,
    record_ingested_ontology,
    write_wal_ontology,
)
from lcg.ontology.model import (
    EMPTY_ONTOLOGY,
    UNCLASSIFIED_ENTITY,
    UNCLASSIFIED_RELATION,
    EntityType,
    Ontology,
    RelationType,
    normalize_entity_type,
    normalize_relation_type,
)

__all__ = [
    "EMPTY_ONTOLOGY",
    "UNCLASSIFIED_ENTITY",
    "UNCLASSIFIED_RELATION",
    "EntityType",
    "Ontology",
    "RelationType",
    "load_ontology",
    "load_workspace_ontology",
    "no_ontology",
    "normalize_entity_type",
    "normalize_relation_type",
    "ontology_status",
    "parse_ontology",
    "record_ingested_ontology",
    "write_wal_ontology",
]
