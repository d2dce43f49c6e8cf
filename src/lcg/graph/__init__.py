"""Graph: reads, and (to come) writes and deletes, as functions on the kernel (see README.md)."""
