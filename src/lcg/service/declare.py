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

__all__ = ["Context", "Declarations", "Handler", "Method", "Scope"]

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
