"""Hybrid search methods: knowledge_find_entities, knowledge_find_relationships, knowledge_search_passages (API.md §2.8-2.10)."""

from __future__ import annotations
