"""The write-ahead log: plain JSONL of semantic operations, the source of truth for the graph."""

from lcg.wal.records import OPS, Op, WalRecord
from lcg.wal.writer import Wal

__all__ = ["OPS", "Op", "Wal", "WalRecord"]
