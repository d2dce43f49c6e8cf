"""Extraction: turning text into entities and facts (LLM providers, prompts, heuristics)."""
