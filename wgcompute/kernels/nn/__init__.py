"""Neural-network operators on NCHW tensors: activations, broadcasting binaries, batch norm,
pools, softmax, transpose, copies, LRN (the convolutions and Gemm are in conv/)."""
