"""The interpreter's FusedAttention (ml/fuse_attention.py): softmax(scale · Q·Kᵀ + mask) · V
by the attention kernel (kernels/nn/attention.py) where it takes the operands, else by the
nodes it replaced, run (or folded on the host) as they ran before."""

from __future__ import annotations

import math

import numpy as np

from .. import array_api as xp
from .._lazy import enqueue
from ..buffer import Buffer
from ..kernels.core.layout import contiguous_strides
from ..kernels.nn.attention import ATTENTION, attention_fits, attention_params
from .eager import eager
from .eager_args import back, empty, work
from .eager_fold import _NUMPY_FOLDS
from .eager_shape import fold_originals, run_originals
from .fuse_attention import OP

_NUMPY_FOLDS[OP] = fold_originals  # (all of it known on the host: its nodes fold there)
KERNEL_DTYPES = ("f32", "f16")  # (f16 storage: the kernel computes in f32)


def _mask_view(mask: Buffer, batch: tuple, sq: int, skv: int):
    """((sb, sh, si, sj), 0) reading ``mask`` broadcast to (B, H, Sq, Skv), where ``batch``
    (Q's leading dimensions) folds into B = prod(batch[:-1]) and H = batch[-1]; None where
    the broadcast does not fold so."""
    full = (*batch, sq, skv)
    if mask.ndim > len(full):
        return None
    shape = (1,) * (len(full) - mask.ndim) + tuple(mask.shape)
    st = contiguous_strides(shape)
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


def run_attention(q: Buffer, k: Buffer, v: Buffer, mask, scale: float, empty_rows: str,
                  out_perm=None):
    """softmax(scale · q kᵀ + mask) · v by the attention kernel: q (..., H, Sq, D), k and v
    (..., H/g, Skv, D or Dv) (g query heads to a key/value head), mask broadcasting to
    (..., H, Sq, Skv) or None; the result (..., H, Sq, Dv), or None where the kernel does not
    take these operands. ``out_perm``: the result's axes permuted so (the last one last), the
    kernel writing each row where the permuted array holds it."""
    if q.ndim < 3 or not (q.ndim == k.ndim == v.ndim) or q.dtype.name not in KERNEL_DTYPES \
            or k.dtype != q.dtype or v.dtype != q.dtype or (
                out_perm is not None and len(out_perm) != q.ndim):
        return None
    batch, (sq, d), (skv, d2), (skv2, dv) = q.shape[:-2], q.shape[-2:], k.shape[-2:], \
        v.shape[-2:]
    hk = k.shape[-3]
    if (k.shape[:-3] != batch[:-1] or v.shape[:-2] != k.shape[:-2] or d2 != d or skv2 != skv
            or hk == 0 or batch[-1] % hk or not attention_fits(q.device, d, dv)):
        return None
    view = None
    if mask is not None:
        view = _mask_view(mask, batch, sq, skv) if mask.dtype == q.dtype else None
        if view is None:
            return None
    b, h = math.prod(batch[:-1]), batch[-1]
    shape = (*batch, sq, dv)
    out_view = _permuted_out(shape, out_perm)
    if out_view is None:
        out = empty(shape, q.dtype.name, q.device)
    else:
        out = empty(tuple(shape[p] for p in out_perm), q.dtype.name, q.device)
    if out.size:
        params = attention_params(b, h, sq, skv, d, dv, scale, group=h // hk,
                                  has_bias=mask is not None, empty=empty_rows, bias=view,
                                  out=out_view)
        out = enqueue(ATTENTION, [q, k, v, mask if mask is not None else q], out, params)
    if out_perm is not None and out_view is None:  # (not one stride for the batch: a copy)
        out = xp.permute_dims(out, tuple(out_perm))
    return out


def _permuted_out(shape: tuple, perm) -> tuple | None:
    """The attention kernel's out view ((sb, sh, ss), 0) writing an array of ``shape`` (...,
    H, Sq, Dv) into a contiguous one of its axes permuted by ``perm`` (the last one last), or
    None: no perm, or the batch axes before H not one stride (the caller permutes a copy)."""
    if perm is None or perm[-1] != len(shape) - 1:
        return None
    dense = contiguous_strides(tuple(shape[p] for p in perm))
    strides = [0] * len(shape)
    for pos, axis in enumerate(perm):
        strides[axis] = dense[pos]
    lead = [(n, s) for n, s in zip(shape[:-3], strides[:-3], strict=True) if n > 1]
    for (_, s0), (n1, s1) in zip(lead, lead[1:]):
        if s0 != s1 * n1:  # (the kernel's b is the lead axes flattened: one stride)
            return None
    sb = lead[-1][1] if lead else 0
    return (sb, strides[-3], strides[-2]), 0


def _kernel(q: Buffer, kt: Buffer, v: Buffer, mask, scale: float, empty_rows: str,
            out_perm=None):
    """The fused node's kernel result (Kᵀ of q's batch shape), or None."""
    if q.ndim < 3 or kt.ndim != q.ndim or kt.shape[:-2] != q.shape[:-2]:
        return None
    return run_attention(q, xp.matrix_transpose(kt), v, mask, scale, empty_rows, out_perm)


def _host_scalar(v) -> float | None:
    """A factor known on the host as one finite, nonzero float; else None."""
    if not isinstance(v, np.ndarray) or v.size != 1 or v.dtype.kind not in "fiu":
        return None
    f = float(v.reshape(()))
    return f if math.isfinite(f) and f != 0.0 else None


def _factors(ctx, node, ins, q: Buffer, kt: Buffer) -> tuple | None:
    """(Q, Kᵀ, scale) once the node's run-time factors are in: host scalars fold into the
    scale, tensors multiply (divide) Q or Kᵀ; None where a tensor scales the scores (the
    original nodes run)."""
    scale = float(node.attrs.get("scale", 1.0))
    for kind, val in zip(node.attrs.get("factors", ()), ins[4:], strict=True):
        c = _host_scalar(val)
        if c is not None:
            scale *= c if kind[1] == "*" else 1.0 / c
            continue
        if kind[0] == "s":
            return None
        f = ctx.buffer(val, "a factor of Q or K^T")
        x = q if kind[0] == "q" else kt
        y = back(work(x) * work(f) if kind[1] == "*" else work(x) / work(f), x)
        q, kt = (y, kt) if kind[0] == "q" else (q, y)
    return q, kt, scale


@eager(OP)
def _fused_attention(ctx, node, ins):
    y = None
    if all(isinstance(x, Buffer) and x.dtype.name in KERNEL_DTYPES for x in ins[:3]):
        got = _factors(ctx, node, ins, ins[0], ins[1])
        if got is not None:
            mask = ctx.buffer(ins[3], "mask") if len(ins) > 3 and ins[3] is not None else None
            y = _kernel(*got[:2], ins[2], mask, got[2], node.attrs.get("empty", "nan"),
                        node.attrs.get("out_perm"))
    return [y] if y is not None else run_originals(ctx, node, ins)
