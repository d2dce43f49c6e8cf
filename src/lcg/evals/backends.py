"""Backend specs of `lcg eval --backend NAME=SPEC`, parsed and checked before any call.

anthropic[:model=M]
oai-http:url=U[,model=M]
oai-uds:path=P[,model=M]
cassette:path=P          (replay only: zero network; a miss fails loudly)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lcg.errors import InvalidRequestError

__all__ = ["BackendSpec", "parse_backend"]

_REQUIRED = {"anthropic": (), "oai-http": ("url",), "oai-uds": ("path",), "cassette": ("path",)}
_ALLOWED = {
    "anthropic": ("model",),
    "oai-http": ("url", "model"),
    "oai-uds": ("path", "model"),
    "cassette": ("path",),
}


@dataclass(frozen=True)
class BackendSpec:
    name: str
    kind: str
    options: dict[str, str] = field(default_factory=dict)
    record_to: Path | None = None

    @property
    def replay(self) -> bool:
        return self.kind == "cassette"

    @property
    def cassette_path(self) -> Path | None:
        return Path(self.options["path"]) if self.kind == "cassette" else None

    def describe(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return f"{self.kind}:{opts}" if opts else self.kind


def parse_backend(text: str) -> BackendSpec:
    """`NAME=SPEC` as a BackendSpec.

    Raises:
        InvalidRequestError: malformed text, unknown kind, missing or unknown option.
    """
    name, sep, spec = text.partition("=")
    if not sep or not name.strip() or not spec.strip():
        raise InvalidRequestError(f"--backend must be NAME=SPEC, got {text!r}", field="backend")
    kind, _, rest = spec.strip().partition(":")
    if kind not in _REQUIRED:
        known = ", ".join(sorted(_REQUIRED))
        raise InvalidRequestError(f"unknown backend kind {kind!r} (known: {known})", "backend")
    options: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq or key not in _ALLOWED[kind] or not value:
            allowed = ", ".join(_ALLOWED[kind]) or "none"
            raise InvalidRequestError(
                f"backend {name}: bad option {part!r} for {kind} (options: {allowed})", "backend"
            )
        options[key] = value
    missing = [k for k in _REQUIRED[kind] if k not in options]
    if missing:
        raise InvalidRequestError(f"backend {name}: {kind} needs {', '.join(missing)}", "backend")
    return BackendSpec(name.strip(), kind, options)
