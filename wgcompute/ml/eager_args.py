"""What the interpreter's operators share: parameters read on the host (shapes, pads, scalars:
known, computed again on the host, or read back when small) and Buffers of any dtype (typed
constants, empty results, stacks, float16 computed in float32)."""

from __future__ import annotations

import numpy as np

from .. import array_api as xp
from ..array import astype
from ..buffer import Buffer
from ..dtypes import DTYPES
from ..errors import ModelError

FLOATS = ("f16", "f32", "f64")


# a shape-making parameter (pads, repeats, K...) computed on the GPU is read back when it has
# at most this many elements: the result's shape depends on it
READ_BACK_ELEMENTS = 1024


def host_value(ctx, node, v, what: str) -> np.ndarray:
    """A shape-making parameter on the host: a host value, a graph input's own data or a
    value the interpreter computes again on the host (ctx.host), else a small tensor computed
    on the GPU read back (waits: the result's shape depends on it)."""
    if isinstance(v, (np.generic, int, float)):
        v = np.asarray(v)
    if isinstance(v, Buffer):
        try:
            return np.asarray(ctx.host(node, v, what))
        except ModelError:
            if v.size > READ_BACK_ELEMENTS:
                raise
            return v.to_numpy()
    return np.asarray(ctx.host(node, v, what))


def ints(ctx, node, v, what: str) -> list[int]:
    """A shape-making parameter (shape, pads, repeats...) as a list of ints."""
    return [int(d) for d in host_value(ctx, node, v, what).reshape(-1)]


def scalar(ctx, node, v, what: str):
    """A scalar parameter (K, depth, start, axis...) as a numpy scalar."""
    a = host_value(ctx, node, v, what)
    if a.size != 1:
        raise ctx.fail(node, f"{what} has shape {a.shape}; expected one value")
    return a.reshape(-1)[0]


def const(ctx, value, dt) -> Buffer:
    """A 0-d Buffer of dtype ``dt`` holding ``value`` (any dtype: f16 too)."""
    return ctx.buffer(np.asarray(value, dtype=DTYPES[dt].numpy))


def empty(shape, dt, device) -> Buffer:
    """An uninitialised Buffer of any dtype (the namespace's empty takes the standard's)."""
    from ..array_api._helpers import new

    return new(tuple(shape), DTYPES[dt], device, "onnx")


def stack(values: list, axis: int = 0) -> Buffer:
    """Buffers of one shape and dtype (any: f16 too) stacked along a new ``axis``."""
    first = values[0]
    out = empty((len(values),) + first.shape, first.dtype, first.device)
    for i, v in enumerate(values):
        out[i] = v
    return xp.moveaxis(out, 0, axis) if axis else out


def floats(ctx, node, v, what: str = "X") -> Buffer:
    """Input ``v`` on the GPU, refused unless it is a float tensor."""
    b = ctx.buffer(v, what)
    if b.dtype.name not in FLOATS:
        raise ctx.fail(node, f"{what} is {b.dtype}; this operator takes float tensors "
                             f"(float16, float32, float64)")
    return b


def work(x: Buffer) -> Buffer:
    """f16 computed in f32 (the normalizations' stash type)."""
    return astype(x, "f32") if x.dtype.name == "f16" else x


def back(y: Buffer, like: Buffer) -> Buffer:
    """``y`` in ``like``'s dtype (f32 results to f16 round to nearest, as numpy's)."""
    return astype(y, like.dtype, casting="unsafe") if y.dtype != like.dtype else y
