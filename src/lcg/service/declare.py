"""How a method is declared: its name, MCP scope, params model, handler and description.

Every methods module (`lcg.service.methods.<area>`) collects its declarations in a
`Declarations` of its own; the registry gathers them into one table, in the fixed order of
`lcg.service.methods.TABLES`. Nothing registers itself by being imported.

Scopes come in two groupings derived from the same declarations (`Method.scope_for`): the
reference's, where `scope` is used as declared, and lcg's own (HTTP, and `lcg mcp` unless
`--reference-scopes`), where a method declared `destructive` (it wipes data of a whole
workspace or group) needs `admin` whatever its declared scope. A method declared `replaced_by`
is deprecated: its description says so and names the replacement.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from lcg.engine import Engine
from lcg.service import params as p

__all__ = ["REFERENCE_METHODS", "Context", "Declarations", "Handler", "Method", "Scope"]

# The reference service's methods. Over its transports (the socket, MCP) they keep its reading of
# params: members a method does not know are ignored. lcg's own methods, and every method over
# HTTP, refuse them (docs/api.md §envelope).
REFERENCE_METHODS = frozenset(
    {
        "health_check",
        "knowledge_status",
        "knowledge_close",
        "knowledge_process_chunk",
        "knowledge_add_episode",
        "knowledge_assert_entity",
        "knowledge_assert_relationship",
        "knowledge_find_entities",
        "knowledge_find_relationships",
        "knowledge_search_passages",
        "knowledge_query_cypher",
        "knowledge_get_episodes",
        "knowledge_get_nodes_by_group",
        "knowledge_get_edges_by_group",
        "knowledge_get_edges_by_uuids",
        "knowledge_list_entities",
        "knowledge_list_relationships",
        "knowledge_get_entity_neighbors",
        "knowledge_get_entities_by_source",
        "knowledge_delete_episode",
        "knowledge_delete_by_source",
        "knowledge_delete_chunk_episode",
        "knowledge_delete_by_group",
        "knowledge_clear_all",
        "knowledge_merge_entities",
        "knowledge_validate_corrections",
        "knowledge_apply_corrections",
        "knowledge_reprocess_entity_types",
        "knowledge_canonicalize_relations",
        "knowledge_backfill_relation_types",
        "knowledge_reprocess_relation_types",
        "knowledge_add_cross_group_edge",
        "knowledge_rebind_pointers",
        "knowledge_rebuild_from_wal",
        "knowledge_rebuild_status",
        "knowledge_build_indices",
        "knowledge_dump_wal",
        "knowledge_prepare_checkpoint",
        "knowledge_wal_mark_create",
        "knowledge_wal_mark_list",
        "knowledge_wal_mark_delete",
        "knowledge_recover",
        "knowledge_recover_full",
    }
)

Scope = Literal["read", "write", "cypher", "admin"]
Progress = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Context:
    """Per-call context a transport passes in: where progress frames go, if anywhere."""

    progress: Progress | None = None


Handler = Callable[[Engine, Any, Context], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Method:
    name: str
    scope: Scope | None
    params: type[p.Params]
    handler: Handler
    description: str
    long_running: bool = False
    degraded_ok: bool = False
    destructive: bool = False
    replaced_by: str | None = None
    required: tuple[str, ...] | None = None

    @property
    def reference(self) -> bool:
        """One of the reference service's methods (it ignores params it does not know)."""
        return self.name in REFERENCE_METHODS

    def scope_for(self, reference: bool) -> Scope | None:
        """The scope that exposes this method: as declared in the reference's grouping; in
        lcg's own, `admin` for a destructive method."""
        if self.scope is None or reference or not self.destructive:
            return self.scope
        return "admin"


class Declarations:
    """One module's declared methods, in declaration order (`@declare(name, scope, ...)`)."""

    def __init__(self) -> None:
        self.methods: list[Method] = []

    def __call__(
        self,
        name: str,
        scope: Scope | None,
        params: type[p.Params],
        description: str,
        *,
        long_running: bool = False,
        degraded_ok: bool = False,
        destructive: bool = False,
        replaced_by: str | None = None,
        required: tuple[str, ...] | None = None,
    ) -> Callable[[Handler], Handler]:
        """Declare a method.

        `destructive`: the method deletes a whole workspace's or group's data (lcg's own scopes
        put it behind `admin`). `replaced_by`: the method is deprecated in favour of that one;
        the description is prefixed with a notice naming it. `required`: the arguments MCP
        advertises as required, where the reference lists more than the params model alone would
        (a model default the reference still requires); None: the model's own list.
        """
        if replaced_by is not None:
            description = f"Deprecated (use {replaced_by} instead): {description}"

        def wrap(handler: Handler) -> Handler:
            self.methods.append(
                Method(
                    name,
                    scope,
                    params,
                    handler,
                    description,
                    long_running,
                    degraded_ok,
                    destructive,
                    replaced_by,
                    required,
                )
            )
            return handler

        return wrap
