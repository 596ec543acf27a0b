"""The FFT and complex64 kernels."""
