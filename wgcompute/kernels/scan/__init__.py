"""Prefix scans (cumulative sums and products) along the rows of a batch."""
