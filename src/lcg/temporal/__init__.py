"""Time: the bi-temporal read filter, fact history (changes, timeline), and context packing
(see README.md in this directory)."""
