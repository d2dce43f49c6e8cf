"""LLM providers behind the `LlmClient` seam: OpenAI-compatible (HTTP or a Unix socket) and Anthropic.

The only package that may import model SDKs (anthropic, openai); SDK and transport exceptions
are translated to `ExtractionError` / `ProviderTransportError` here.
"""
