"""Hybrid search: an in-process BM25 + exact-vector index per (group, kind), fused by rank.

- `text`: tokenisation (Porter stems, stopwords) and the term vocabulary;
- `partition`: one (group, kind)'s postings, vectors and columns, with lock-free read views;
- `index`: `SearchIndex`, every partition, loaded from the database and kept in step with commits;
- `scoring`: BM25, top-k, reciprocal-rank fusion, MMR;
- `strategy`: the named strategies (`HYBRID_RRF`, `HYBRID_MMR`, `LEXICAL_ONLY`, `VECTOR_ONLY`);
- `hybrid`: `search_entities`, `search_facts`, `search_episodes`, the API other subsystems use.
"""
