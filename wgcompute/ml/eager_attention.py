"""The interpreter's FusedAttention (ml/fuse_attention.py): softmax(scale · Q·Kᵀ + mask) · V
by the attention kernel (kernels/nn/attention.py) where it takes the operands, else by the
same steps the pattern had (products, softmax, the Where of empty rows)."""

from __future__ import annotations

import math

from .. import array_api as xp
from .._lazy import enqueue
from ..buffer import Buffer
from ..kernels.nn.attention import ATTENTION, attention_fits, attention_params
from .eager import eager
from .eager_args import back, empty, floats, work
from .eager_fold import NO_HOST_FOLD
from .fuse_attention import OP

NO_HOST_FOLD.add(OP)  # its own operator: never folded through onnx's reference
KERNEL_DTYPES = ("f32", "f16")  # (f16 storage: the kernel computes in f32)


def _contiguous_strides(shape: tuple) -> tuple:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def _mask_view(mask: Buffer, batch: tuple, sq: int, skv: int):
    """((sb, sh, si, sj), 0) reading ``mask`` broadcast to (B, H, Sq, Skv), where ``batch``
    (Q's leading dimensions) folds into B = prod(batch[:-1]) and H = batch[-1]; None where
    the broadcast does not fold so."""
    full = (*batch, sq, skv)
    if mask.ndim > len(full):
        return None
    shape = (1,) * (len(full) - mask.ndim) + tuple(mask.shape)
    st = _contiguous_strides(shape)
    strides = []
    for n, want, s in zip(shape, full, st, strict=True):
        if n == want and n != 1:
            strides.append(s)
        elif n == 1:
            strides.append(0)
        else:
            return None
    lead, lead_full = strides[:-3], full[:-3]
    if any(lead) and any(s == 0 and n > 1 for s, n in zip(lead, lead_full, strict=True)):
        return None  # some of B's dimensions broadcast, some not: no single stride
    sb = next((s for s in reversed(lead) if s), 0)
    return (sb, *strides[-3:]), 0


def _kernel(q: Buffer, kt: Buffer, v: Buffer, mask, scale: float, empty_rows: str):
    """The kernel's result, or None where it does not take these operands."""
    if q.ndim < 3 or not (q.ndim == kt.ndim == v.ndim) or q.dtype.name not in KERNEL_DTYPES \
            or kt.dtype != q.dtype or v.dtype != q.dtype:
        return None
    batch, (sq, d), (d2, skv), (skv2, dv) = q.shape[:-2], q.shape[-2:], kt.shape[-2:], \
        v.shape[-2:]
    if kt.shape[:-2] != batch or v.shape[:-2] != batch or d2 != d or skv2 != skv:
        return None
    if not attention_fits(q.device, d, dv):
        return None
    view = None
    if mask is not None:
        if mask.dtype != q.dtype:
            return None
        view = _mask_view(mask, batch, sq, skv)
        if view is None:
            return None
    b, h = math.prod(batch[:-1]), batch[-1]
    k = xp.matrix_transpose(kt)
    out = empty((*batch, sq, dv), q.dtype.name, q.device)
    if out.size == 0:
        return out
    params = attention_params(b, h, sq, skv, d, dv, scale, has_bias=mask is not None,
                              empty=empty_rows, bias=view)
    return enqueue(ATTENTION, [q, k, v, mask if mask is not None else q], out, params)


def _decomposed(q: Buffer, kt: Buffer, v: Buffer, mask, scale: float, empty_rows: str):
    """The pattern's own steps (f16 in f32)."""
    q, kt, v = work(q), work(kt), work(v)
    mask = work(mask) if mask is not None else None
    s = xp.matmul(q, kt) * scale
    if mask is not None:
        s = s + mask
    m = xp.max(s, axis=-1, keepdims=True)
    e = xp.exp(s - m)
    p = e / xp.sum(e, axis=-1, keepdims=True)
    if empty_rows == "zero":
        p = xp.where(xp.isnan(p), xp.zeros((), dtype=p.dtype, device=p.device), p)
    return xp.matmul(p, v)


@eager(OP)
def _fused_attention(ctx, node, ins):
    q, kt, v = (floats(ctx, node, ins[i], w) for i, w in enumerate(("Q", "K^T", "V")))
    mask = ctx.buffer(ins[3], "mask") if len(ins) > 3 and ins[3] is not None else None
    scale = float(node.attrs.get("scale", 1.0))
    empty_rows = node.attrs.get("empty", "nan")
    y = _kernel(q, kt, v, mask, scale, empty_rows)
    return [y if y is not None else back(_decomposed(q, kt, v, mask, scale, empty_rows), q)]
