"""Elementwise kernels: arithmetic, relu, operators with scalars, comparisons, copies, transposes
and dtype conversions (astype), broadcasting as numpy does; builtin.py lists every built-in."""
