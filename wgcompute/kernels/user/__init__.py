"""User kernels in CuPy's shape: ElementwiseKernel and ReductionKernel, a typed argument
list and a WGSL body, rendered from the templates beside these modules."""
