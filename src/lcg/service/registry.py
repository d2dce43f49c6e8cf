"""The method registry: the table of every method lcg serves, and `dispatch`.

It only registers and dispatches: each area's methods are declared once in
`lcg.service.methods.<area>` (`lcg.service.declare`: name, MCP scope, params model, handler,
description), and `REGISTRY` gathers those tables in the fixed order `methods.TABLES` gives.
Transports (JSON-RPC, MCP, HTTP, the CLI) are derived from this table; they parse, call
`dispatch`, and map results and errors.
"""

from __future__ import annotations

from typing import Any

from lcg.engine import Engine
from lcg.errors import InvalidRequestError, UnavailableError
from lcg.service import params as p
from lcg.service.declare import Context, Declarations, Method
from lcg.service.methods import TABLES

__all__ = ["REGISTRY", "Context", "Method", "check_params", "dispatch"]


def check_params(name: str, raw_params: Any, *, strict: bool = False) -> Method:
    """The method `name`, after refusing params it does not declare: always for lcg's own
    methods, for the reference's only when `strict` (HTTP; docs/api.md §envelope).

    Raises:
        InvalidRequestError: unknown method, or an unknown parameter (naming the known ones).
    """
    method = REGISTRY.get(name)
    if method is None:
        raise InvalidRequestError(f"Method not found: {name}")
    if strict or not method.reference:
        p.refuse_unknown(name, method.params, raw_params)
    return method


async def dispatch(
    engine: Engine, name: str, raw_params: Any, ctx: Context | None = None
) -> dict[str, Any]:
    """Validate `raw_params` for method `name` and run it.

    Raises:
        InvalidRequestError: unknown method or invalid params (nothing was changed).
        UnavailableError: the database is not open and the method needs it.
        LcgError: anything the method itself raises.
    """
    method = check_params(name, raw_params)
    parsed = p.parse_params(method.params, raw_params)
    if engine.state.degraded_reason is not None and not method.degraded_ok:
        raise UnavailableError(engine.state.degraded_reason)
    return await method.handler(engine, parsed, ctx or Context())


# -- the table ----------------------------------------------------------------------------------


def _gather(*modules: Declarations) -> dict[str, Method]:
    table: dict[str, Method] = {}
    for declared in modules:
        for method in declared.methods:
            if method.name in table:
                raise RuntimeError(f"method {method.name} declared twice")
            table[method.name] = method
    return table


REGISTRY: dict[str, Method] = _gather(*TABLES)
