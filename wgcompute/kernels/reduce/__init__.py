"""Reductions: sum, max, min, mean and argmax over any axes (keepdims) and softmax, with
subgroups where the adapter has them."""
