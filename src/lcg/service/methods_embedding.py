"""Embedding maintenance methods: knowledge_backfill_summary_embeddings."""

from __future__ import annotations
