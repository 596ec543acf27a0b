"""Matrix multiplication: the tiled matmul program (2-D block and register tiling, f16 inputs at
two precisions) and its tile configurations, chosen per adapter by the autotuner."""
