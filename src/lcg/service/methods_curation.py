"""Curation and cross-group methods (API.md §2.25-2.27, §2.32-2.33): merge, corrections, cross-group pointers."""

from __future__ import annotations
