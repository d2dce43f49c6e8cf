"""Every method lcg serves, one module per area: each declares its methods (name, MCP scope,
params model, handler, description) in its own `declare` table.

`TABLES` is the order the registry lists them in (and so MCP's tools/list and HTTP's routes):
lifecycle, the graph, administration, then the areas alphabetically.
"""

from lcg.service.declare import Declarations
from lcg.service.methods import (
    admin,
    code,
    curation,
    embedding,
    graph,
    ingest,
    lifecycle,
    ontology,
    search,
    temporal,
)

__all__ = ["TABLES"]

TABLES: tuple[Declarations, ...] = (
    lifecycle.declare,
    graph.declare,
    admin.declare,
    curation.declare,
    embedding.declare,
    ingest.declare,
    search.declare,
    temporal.declare,
    ontology.declare,
    code.declare,
)
