"""Test doubles that really listen: scripted LLM and embedding servers for tests and benchmarks.

No optional extras, so tests, benchmarks and the eval harness can import them anywhere.
"""
