"""The interpreter's float16 policy, for a model loaded with dtype="f16": the graph's float32
tensors live on the GPU as float16 (its constants converted once, its inputs converted on the
GPU, its results read back as the float32 it declares); host values (shapes, small folded
constants) stay float32 on the host, and the numerically sensitive steps compute in float32."""

from __future__ import annotations

import numpy as np

from .._lazy import tracing
from ..array import astype
from ..buffer import Buffer
from ..kernels.matmul.configs import BUSY

F16_MAX = 65504.0  # the largest finite float16
F16_TINY = 2.0 ** -24  # the smallest positive float16 (a subnormal)
FLOAT = 1  # ONNX's FLOAT: the element type the policy stores as float16


def to_half(a: np.ndarray) -> np.ndarray:
    """A float32 host array as float16. Finite values past float16's range saturate to
    ±65504 instead of becoming ±inf (an attention mask's -3.4e38 stays a large negative
    number: a row whose every key is masked stays finite), and nonzero values below its
    smallest subnormal become ±2^-24 instead of 0 (an epsilon added before a division stays
    nonzero); inf and nan stay as they are."""
    with np.errstate(over="ignore", under="ignore"):
        h = a.astype(np.float16)
    big = np.isinf(h) & np.isfinite(a)
    tiny = (h == 0) & (a != 0)
    if big.any():
        h[big] = np.copysign(F16_MAX, a[big])
    if tiny.any():
        h[tiny] = np.copysign(F16_TINY, a[tiny])
    return h


def inputs(ctx, env: dict) -> None:
    """The graph's float32 inputs in ``env`` converted to float16 on the GPU (an input given
    as float16 is taken as it is); the converted Buffer's host copy stays known."""
    cap = tracing(ctx.device)
    for name, _, elem in ctx.graph.inputs:
        v = env.get(name)
        if elem == FLOAT and isinstance(v, Buffer) and v.dtype == "f32":
            if cap is not None:  # (a trace: profiles name the conversion by its input)
                cap.tag = f"input {name} to float16"
            h = env[name] = astype(v, "f16", casting="unsafe")
            hit = ctx.known.get(id(v))
            if hit is not None and hit[0] is v:
                ctx.known[id(h)] = (h, hit[1])


def output(v: Buffer, elem: int) -> Buffer:
    """An output Buffer in the type the graph declares (float16 back to float32)."""
    if elem == FLOAT and v.dtype == "f16":
        return astype(v, "f32")
    return v


# A product with fewer output blocks of 64 x 64 than this (a transformer's at batch 1) sums in
# float32 under precision "mixed": the mixed tiles have no split-K, so its few workgroups
# ran each its whole K (H200: ViT-B/16 batch 1 5.3 ms mixed against 3.9-4.4 in f16 with
# float32 sums, benchmarks/results/h200/2026-11-27j); float32 sums are the more accurate.
MIXED_MIN_BLOCKS = BUSY  # (the matmul's: two workgroups per SM of a large GPU)


def sums(precision: str, m: int, n: int, batch: int = 1) -> str:
    """The precision an (batch ×) m × n product of a dtype="f16" model runs at: "mixed" only
    where its output fills the GPU (MIXED_MIN_BLOCKS), else "f32"."""
    if precision == "mixed" and batch * -(-m // 64) * -(-n // 64) < MIXED_MIN_BLOCKS:
        return "f32"
    return precision


def matmul(a: Buffer, b: Buffer, precision: str) -> Buffer:
    """a @ b of float16 Buffers by numpy's matmul rules, with the matmul kernel: every
    product summed in float32 (precision "f32") or each k slice of 8 or 16 in float16
    ("mixed", where the output fills the GPU: ``sums``), the result rounded to float16
    once."""
    from .. import array_api as xp
    from .._lazy import enqueue
    from ..array_api._helpers import new
    from ..dtypes import DTYPES
    from ..kernels.matmul.matmul import matmul_shape

    shape = matmul_shape(a.shape, b.shape).out
    if a.size == 0 or b.size == 0:  # nothing to add up: zeros
        return astype(xp.zeros(shape, dtype=xp.float32, device=a.device), "f16")
    out = new(shape, DTYPES["f16"], a.device, "matmul")
    m, n = (shape[-2] if len(shape) > 1 else 1), shape[-1] if shape else 1
    batch = out.size // max(m * n, 1)
    return enqueue("matmul", [a, b], out, {"precision": sums(precision, m, n, batch)})
