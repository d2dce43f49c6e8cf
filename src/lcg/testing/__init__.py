"""Test doubles that really listen: scripted LLM and embedding servers for tests and benchmarks.

Standard library only, so tests, benchmarks and the eval harness can import them without extras.
"""
