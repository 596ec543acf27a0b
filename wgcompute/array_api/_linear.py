"""The standard's linear algebra functions: matmul, matrix_transpose, tensordot and vecdot,
on the GPU (the tiled matmul for floats, an integer matmul, strided copies for transposes),
and what the linalg extension shares: stacks of matrices, strided copies, identities, the real
parts of complex results."""

from __future__ import annotations

import builtins
import math

import numpy as np

from .._lazy import enqueue
from ..array import astype, reshape, transpose, view
from ..buffer import Buffer
from ..dtypes import DTYPES
from ..errors import ArgumentError, DtypeError, ShapeError
from ..kernels.core.layout import broadcast_shapes, broadcast_strides, contiguous_strides
from ..kernels.linalg.elementwise import Small, Take
from ..kernels.linalg.products import MatmulInt
from ..kernels.matmul.matmul import matmul_shape
from ._dtypes import standard_name
from ._helpers import array, new, normalize_axis, operands

__all__ = ["matmul", "matrix_transpose", "tensordot", "vecdot"]

_MATMUL_INT, _SMALL, _TAKE = MatmulInt(), Small(), Take()


def _numeric_pair(where: str, x1, x2) -> tuple[Buffer, Buffer]:
    """Two arrays (Python scalars refused) promoted to one numeric dtype."""
    for name, x in (("x1", x1), ("x2", x2)):
        array(x, name)
    a, b, dt = operands(where, x1, x2)
    if dt.kind not in "iufc":
        raise DtypeError(f"{where}: {standard_name(dt)} arrays are not accepted; expected "
                         f"numeric arrays")
    return a, b


def _product(a: Buffer, b: Buffer, conj: bool = False, exact: bool = False) -> Buffer:
    """a @ b by numpy's matmul rules, for arrays of one numeric dtype (``conj``: complex a
    conjugated; ``exact``: floats by the one-element-per-invocation kernel, whose single
    product is exactly the elementwise one, for outer products)."""
    dt = DTYPES[a.dtype]
    out_shape = matmul_shape(a.shape, b.shape).out
    if dt.name == "u64":  # as int64 bits: wrapping sums and products are the same bits
        wide = _product(view(a, "s64"), view(b, "s64"), exact=exact)
        return view(wide, "u64")
    if dt.packed and dt.kind in "iu":  # lanes of words: computed in 32 bits, wrapped back
        w = "s32" if dt.kind == "i" else "u32"
        wide = _product(astype(a, w), astype(b, w), exact=exact)
        return astype(wide, dt.name, casting="unsafe")
    if a.size == 0 or b.size == 0:  # nothing to add up (or nothing to write): zeros
        from ._creation import zeros

        return zeros(out_shape, dtype=dt, device=a.device)
    out = new(out_shape, dt, a.device, "matmul")
    if dt.kind == "f" and not exact:
        return enqueue("matmul", [a, b], out)
    a, b = _bindable(a), _bindable(b)
    if dt.name not in _MATMUL_INT.dtypes:
        raise DtypeError(f"matmul: {standard_name(dt)} arrays are not supported; expected "
                         f"int32, int64, uint8, uint32, float32, float64, complex64 or "
                         f"complex128")
    return enqueue(_MATMUL_INT, [a, b], out, {"conj": conj and dt.kind == "c"})


def matmul(x1, x2, /) -> Buffer:
    """x1 @ x2 by the standard's rules: (..., M, K) @ (..., K, N) with the batch dimensions
    broadcast; a 1-D x1 is a row and a 1-D x2 a column, their added axis removed."""
    a, b = _numeric_pair("matmul", x1, x2)
    for name, x in (("x1", a), ("x2", b)):
        if x.ndim == 0:
            raise ShapeError(f"matmul: {name} is 0-dimensional; matmul takes arrays of one or "
                             f"more dimensions")
    ka, kb = a.shape[-1], b.shape[0] if b.ndim == 1 else b.shape[-2]
    if ka != kb:
        raise ShapeError(f"matmul: x1 is {a.shape} and x2 is {b.shape}; the contracted "
                         f"dimensions {ka} and {kb} differ")
    broadcast_shapes("matmul", [("x1's batch shape", a.shape[:-2]),
                                ("x2's batch shape", b.shape[:-2])])
    return _product(a, b)


def matrix_transpose(x, /) -> Buffer:
    """x with its last two axes swapped, copied on the GPU."""
    x = array(x, "x")
    if x.ndim < 2:
        raise ShapeError(f"matrix_transpose: x is {x.shape}; it needs at least two dimensions")
    axes = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return transpose(_bindable(x), axes=axes)


def _permuted(x: Buffer, axes: tuple[int, ...]) -> Buffer:
    return x if axes == tuple(range(x.ndim)) else transpose(_bindable(x), axes=axes)


def _tensordot_axes(axes, a: Buffer, b: Buffer) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, builtins.bool):
        n = int(axes)
        if n < 0:
            raise ArgumentError(f"tensordot: axes {n} is negative; expected a nonnegative int")
        if n > a.ndim or n > b.ndim:
            raise ShapeError(f"tensordot: axes {n} contracts more axes than x1 {a.shape} or "
                             f"x2 {b.shape} has")
        return tuple(range(a.ndim - n, a.ndim)), tuple(range(n))
    try:
        ax1, ax2 = axes
        ax1, ax2 = list(ax1), list(ax2)
    except (TypeError, ValueError):
        raise ArgumentError(f"tensordot: axes {axes!r}; expected an int or two sequences of "
                            f"ints") from None
    if len(ax1) != len(ax2):
        raise ArgumentError(f"tensordot: axes {axes!r}: the two sequences differ in length")
    n1 = tuple(normalize_axis(d, a.ndim, "axes") for d in ax1)
    n2 = tuple(normalize_axis(d, b.ndim, "axes") for d in ax2)
    if a.ndim == 0 or b.ndim == 0:
        if n1:
            raise ShapeError("tensordot: a 0-dimensional array has no axes to contract")
    for n in (n1, n2):
        if len(set(n)) != len(n):
            raise ArgumentError(f"tensordot: axes {axes!r} repeats an axis")
    return n1, n2


def tensordot(x1, x2, /, *, axes=2) -> Buffer:
    """The contraction of x1 and x2 over ``axes`` (an int N: x1's last N with x2's first N;
    or two sequences of axes): the free axes moved out of the way on the GPU, then one
    matrix product."""
    a, b = _numeric_pair("tensordot", x1, x2)
    ax1, ax2 = _tensordot_axes(axes, a, b)
    for i, j in zip(ax1, ax2):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(f"tensordot: axis {i} of x1 {a.shape} has size {a.shape[i]} and "
                             f"axis {j} of x2 {b.shape} has size {b.shape[j]}; contracted "
                             f"axes must match")
    free1 = tuple(d for d in range(a.ndim) if d not in ax1)
    free2 = tuple(d for d in range(b.ndim) if d not in ax2)
    k = math.prod(a.shape[d] for d in ax1)
    s1 = tuple(a.shape[d] for d in free1)
    s2 = tuple(b.shape[d] for d in free2)
    a2 = reshape(_permuted(a, free1 + ax1), (math.prod(s1), k))
    b2 = reshape(_permuted(b, ax2 + free2), (k, math.prod(s2)))
    return reshape(_product(a2, b2), s1 + s2)


def vecdot(x1, x2, /, *, axis: int = -1) -> Buffer:
    """The dot product of x1 and x2 along ``axis`` (negative counts from the end of their
    broadcast shape), the other axes broadcast, complex x1 conjugated; one batched matrix
    product."""
    a, b = _numeric_pair("vecdot", x1, x2)
    nd = max(a.ndim, b.ndim)
    if nd == 0:
        raise ShapeError("vecdot: x1 and x2 are 0-dimensional; vecdot needs an axis")
    ax = normalize_axis(axis, nd, "axis") - nd  # negative: the same axis of both
    if -ax > a.ndim or -ax > b.ndim or a.shape[ax] != b.shape[ax]:
        raise ShapeError(f"vecdot: axis {axis} of x1 {a.shape} and x2 {b.shape} differ; the "
                         f"contracted axis must have one size in both")
    rest = broadcast_shapes("vecdot", [
        ("x1 without the axis", a.shape[:ax] + (a.shape[ax + 1:] if ax != -1 else ())),
        ("x2 without the axis", b.shape[:ax] + (b.shape[ax + 1:] if ax != -1 else ()))])

    def last(x):  # the contracted axis moved to the end
        d = x.ndim + ax
        return _permuted(x, tuple(i for i in range(x.ndim) if i != d) + (d,))

    pa, pb = last(a), last(b)
    n = pa.shape[-1]
    out = _product(reshape(pa, pa.shape[:-1] + (1, n)), reshape(pb, pb.shape[:-1] + (n, 1)),
                   conj=True)
    return reshape(out, rest)


# -- what linalg shares ---------------------------------------------------------------------------
def _stack(x: Buffer) -> Buffer:
    """x (..., m, n) as (batch, m, n): a view, no copy (but see _bindable); x itself where it
    already is one, so that an op given the same arrays again reuses its bindings."""
    x = _bindable(x)
    return x if x.ndim == 3 else reshape(x, (math.prod(x.shape[:-2]),) + x.shape[-2:])


def _bindable(x: Buffer) -> Buffer:
    """x, or for a complex view that kernels cannot bind where it lies (its offset is not
    aligned), a copy made as pairs of its parts: the copy kernel that gathers such views has
    no complex type."""
    if x.dtype.kind == "c" and x.size and not x._bindable():
        return _strided(x, x.shape, contiguous_strides(x.shape))
    return x


def _strided(x: Buffer, shape: tuple[int, ...], strides, offset: int = 0) -> Buffer:
    """A new array of ``shape`` read from x's elements through element strides (on the GPU)."""
    if x.dtype.kind == "c":  # copied as pairs of parts: the copy kernel has no complex type
        pairs = view(reshape(x, (x.size,)), x.dtype.part.name)
        out = _strided(pairs, tuple(shape) + (2,), tuple(2 * s for s in strides) + (1,),
                       2 * offset)
        return reshape(view(out, x.dtype.name), tuple(shape))
    out = new(shape, DTYPES[x.dtype], x.device, "linalg")
    if out.size == 0:
        return out
    return enqueue("strided_copy", [x], out, {"strides": tuple(strides), "offset": offset})


def _broadcast_to(x: Buffer, shape: tuple[int, ...]) -> Buffer:
    if x.shape == shape:
        return x
    return _strided(x, shape, broadcast_strides(x.shape, shape))


def _at(ws: Buffer, start: int, shape: tuple[int, ...]) -> Buffer:
    """A new array of ``shape`` holding ws's elements from ``start`` on (a result a program
    left in its workspace), copied on the GPU: an array of its own, not a view into ws."""
    out = new(shape, DTYPES[ws.dtype], ws.device, "linalg")
    if out.size:
        enqueue(_TAKE, [ws], out, {"offset": start})
    return out


def _identity(shape: tuple[int, ...], dt, device) -> Buffer:
    out = new(shape, dt, device, "eye")
    if out.size:
        unused = new((1,), dt, device, "unused")  # the eye mode reads no input
        enqueue(_SMALL, [unused, unused], out, {"mode": "eye"})
    return out


def _real_part(ws: Buffer, start: int, shape: tuple[int, ...]) -> Buffer:
    """The real parts of complex ws's elements from ``start`` on, as an array of its parts'
    dtype and ``shape`` (copied on the GPU)."""
    pairs = view(reshape(ws, (ws.size,)), ws.dtype.part.name)
    strides = tuple(2 * st for st in contiguous_strides(shape))
    return _strided(pairs, shape, strides, 2 * start)
