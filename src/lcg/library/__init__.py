"""The library front: `lcg.open(path)` yields a `Graph` with one typed async method per wire
method (`graph.py`; the methods are generated into `methods.py` by `codegen.py` from the
method declarations; result TypedDicts in `results.py`)."""

from lcg.library.graph import Graph, open, to_wire

__all__ = ["Graph", "open", "to_wire"]
