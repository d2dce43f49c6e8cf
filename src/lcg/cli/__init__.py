"""The `lcg` command line."""
