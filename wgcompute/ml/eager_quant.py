"""The interpreter's QuantizeLinear and DequantizeLinear for the integer types wgcompute has
(uint8, int8, uint16, int16): per tensor, per axis or per block of an axis, computed in float32
(the 8-, 4- and 2-bit float types and 4- and 2-bit integers do not exist in wgcompute)."""

from __future__ import annotations

import numpy as np

from .. import array_api as xp
from ..array import astype
from ..buffer import Buffer
from .eager import dtype_of_onnx, eager
from .eager_args import back, floats, work
from .eager_index import axis_of

_QUANTIZED = ("u8", "s8", "u16", "s16")


def _per_element(ctx, node, p: Buffer, x: Buffer, what: str) -> Buffer:
    """A scale or zero point shaped to broadcast against x: a scalar, one per element of
    ``axis``, or one per block of ``block_size`` elements of it."""
    block = int(ctx.attr(node, "block_size", 0) or 0)
    if p.ndim == 0 or (p.size == 1 and not block):
        return xp.reshape(p, ())
    axis = axis_of(ctx, node, int(ctx.attr(node, "axis", 1)), x.ndim)
    n = x.shape[axis]
    if block:
        want = x.shape[:axis] + (-(-n // block),) + x.shape[axis + 1:]
        if p.shape != want:
            raise ctx.fail(node, f"{what} is {p.shape}; blocks of {block} along axis {axis} "
                                 f"of {x.shape} need {want}")
        full = xp.repeat(p, block, axis=axis)
        return xp.asarray(full[(slice(None),) * axis + (slice(0, n),)], copy=True)
    if p.shape != (n,):
        raise ctx.fail(node, f"{what} is {p.shape}; expected one value per element of axis "
                             f"{axis} of {x.shape} ({n},)")
    return xp.reshape(p, tuple(n if a == axis else 1 for a in range(x.ndim)))


def _quantized_type(ctx, node, zp: Buffer | None):
    if zp is not None:
        dt = zp.dtype
    else:
        elem = int(ctx.attr(node, "output_dtype", 0) or 2)  # (uint8 by default)
        dt = dtype_of_onnx(elem, ctx.device, "output_dtype")
    if dt.name not in _QUANTIZED:
        raise ctx.fail(node, f"the quantized type is {dt.name}; wgcompute quantizes to "
                             f"{', '.join(_QUANTIZED)}")
    return dt


@eager("QuantizeLinear")
def _quantize(ctx, node, ins):
    x = work(floats(ctx, node, ins[0], "x"))
    scale = work(floats(ctx, node, ins[1], "y_scale"))
    zp = ctx.buffer(ins[2], "y_zero_point") if len(ins) > 2 and ins[2] is not None else None
    dt = _quantized_type(ctx, node, zp)
    q = xp.round(x / _per_element(ctx, node, astype(scale, x.dtype), x, "y_scale"))
    if zp is not None:
        q = q + _per_element(ctx, node, astype(zp, x.dtype), x, "y_zero_point")
    info = np.iinfo(dt.numpy)
    q = xp.clip(q, float(info.min), float(info.max))  # saturate
    return [astype(q, dt, rounding="trunc", casting="unsafe")]


@eager("DequantizeLinear")
def _dequantize(ctx, node, ins):
    x = ctx.buffer(ins[0], "x")
    if x.dtype.name not in _QUANTIZED + ("s32",):
        raise ctx.fail(node, f"x is {x.dtype}; wgcompute dequantizes "
                             f"{', '.join(_QUANTIZED + ('s32',))}")
    scale0 = floats(ctx, node, ins[1], "x_scale")
    scale = work(scale0)
    v = astype(x, "f32")
    if len(ins) > 2 and ins[2] is not None:
        zp = ctx.buffer(ins[2], "x_zero_point")
        v = v - _per_element(ctx, node, astype(zp, "f32"), x, "x_zero_point")
    y = v * _per_element(ctx, node, astype(scale, "f32"), x, "x_scale")
    return [back(y, scale0)]
