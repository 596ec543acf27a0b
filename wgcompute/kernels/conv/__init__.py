"""Convolutions and Gemm: the conv-as-GEMM and skinny programs, depthwise and transposed
convolutions, and the per-shape tile configurations they choose among."""
