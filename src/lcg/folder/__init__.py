"""Folder ingest: turn a directory of documents into `knowledge_process_chunk` calls (`lcg ingest`)."""
