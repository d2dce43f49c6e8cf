"""Ingestion: text to entities, facts and supersessions, committed per episode (docs/design.md)."""
