"""Sorting, searching and sets on the GPU: a stable radix sort along the last axis (values or
permutation), searchsorted, and unique's flag / scan / compact programs."""
