"""Gathers and compactions: take along an axis, index checks, the positions of nonzero
elements (the compaction behind boolean masks and nonzero)."""
