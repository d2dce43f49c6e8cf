"""Administration: status, rebuild jobs, recovery, WAL administration, re-embedding (see
README.md in this directory)."""
