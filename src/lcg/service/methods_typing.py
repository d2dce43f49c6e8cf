"""Typing maintenance methods (API.md §2.28-2.31): reprocess entity types, canonicalize / backfill / reprocess relation types."""

from __future__ import annotations
