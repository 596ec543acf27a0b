"""WGSL sources of wgcompute's built-in kernels (installed as wgcompute._wgsl)."""
