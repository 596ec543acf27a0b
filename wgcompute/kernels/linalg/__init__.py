"""Linear algebra on the GPU: factorisations (LU, Cholesky, QR), eigen- and singular value
decompositions, one workgroup per matrix of a batch, and the products and norms around them."""
