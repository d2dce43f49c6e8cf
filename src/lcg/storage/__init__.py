"""The graph store on Kuzu; the only package that imports kuzu."""

from lcg.storage.store import Store

__all__ = ["Store"]
