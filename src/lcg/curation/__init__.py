"""Curation: merges, the corrections file, cross-group pointers, portable export/import (see
README.md in this directory)."""
