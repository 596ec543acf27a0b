"""Side-by-side benchmark suite: wgcompute vs raw wgpu-py, numpy, torch/cupy when present."""
