"""Ingestion: text to entities, facts and supersessions, committed per episode (DESIGN §5)."""
