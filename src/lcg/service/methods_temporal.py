"""Temporal and context methods: knowledge_get_changes, knowledge_get_entity_timeline, knowledge_get_context."""

from __future__ import annotations
