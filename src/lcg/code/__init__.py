"""The code graph: a repository's structure — files, modules, classes, functions and
methods with their signatures, first docstring lines and line ranges, never their bodies — and
its history from git, as entities and bi-temporal facts of one group. See README.md here."""
