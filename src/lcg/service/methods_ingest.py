"""Ingestion methods: knowledge_process_chunk, knowledge_add_episode (API.md §2.0.1, §2.4, §2.5)."""

from __future__ import annotations
