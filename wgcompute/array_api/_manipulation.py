"""The standard's manipulation functions: reshapes and new axes as views, everything that
moves elements (concat, stack, flip, roll, tile, repeat, permutations) as region copies."""

from __future__ import annotations

import builtins
import itertools
import math

import numpy as np

from .._lazy import enqueue
from ..array import astype
from ..array import reshape as _reshape
from ..buffer import Buffer, BufferView, buffer
from ..errors import ArgumentError, DtypeError, IndexingError, ShapeError
from ..kernels.core.layout import broadcast_shapes, broadcast_strides, contiguous_strides
from ..kernels.elementwise.regions import REGION_COPY, REPEAT_GATHER
from ._dtypes import promote
from ._helpers import array, new, normalize_axes, normalize_axis, same_device

__all__ = ["broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis",
           "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile",
           "unstack"]


def _region(a: Buffer, out: Buffer, shape, a_strides, out_strides, a_offset: int = 0,
            out_offset: int = 0) -> None:
    """out[out_offset + i·out_strides] = a[a_offset + i·a_strides] for every i of shape."""
    if math.prod(shape) == 0:
        return
    if a._base is not None and a._offset % a.device.limit("min-storage-buffer-offset-alignment"):
        # a view whose offset cannot start a binding is read from its base's memory at its
        # element offset (bound as it is, it would first be gathered into a temporary)
        item = a._dt.itemsize
        a_offset += a._offset // item
        a = BufferView(a._base, (a._base.nbytes // item,), 0, a._dt)
    enqueue(REGION_COPY, [a], out, {
        "shape": tuple(shape), "a_strides": tuple(a_strides), "a_offset": a_offset,
        "out_strides": tuple(out_strides), "out_offset": out_offset})


def _strided(x: Buffer, shape, strides, offset: int = 0, label: str = "copy") -> Buffer:
    """A new contiguous array of ``shape`` read from x through element strides."""
    out = new(shape, x._dt, x.device, label)
    _region(x, out, shape, strides, contiguous_strides(tuple(shape)), offset)
    return out


def _copy(x: Buffer) -> Buffer:
    """A new array holding x's elements (any dtype)."""
    return _strided(x, x.shape, contiguous_strides(x.shape))


def _ints(value, argument: str) -> tuple[int, ...]:
    items = value if isinstance(value, (tuple, list)) else (value,)
    for v in items:
        if isinstance(v, (builtins.bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise ArgumentError(f"{argument}: expected an int or a tuple of ints, got "
                                f"{value!r}")
    return tuple(int(v) for v in items)


def _shape_arg(shape, argument: str = "shape") -> tuple[int, ...]:
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    dims = _ints(tuple(shape), argument)
    if any(d < 0 for d in dims):
        raise ShapeError(f"{argument}: {dims} has a negative size")
    return dims


# -- views ---------------------------------------------------------------------------------
def reshape(x, /, shape, *, copy: builtins.bool | None = None) -> Buffer:
    """``x`` with a new shape (one -1 may stand for the rest). Always a view of the same
    memory unless ``copy=True``: every array is contiguous, so no copy is ever needed."""
    x = array(x, "x")
    if copy not in (None, True, False):
        raise ArgumentError(f"copy: expected True, False or None, got {copy!r}")
    dims = _ints(tuple(shape) if isinstance(shape, (tuple, list)) else (shape,), "shape")
    out = _reshape(x, dims)
    return _copy(out) if copy else out


def expand_dims(x, /, axis: int = 0) -> Buffer:
    x = array(x, "x")
    if isinstance(axis, (int, np.integer)) and not isinstance(axis, builtins.bool) and \
            not -x.ndim - 1 <= axis <= x.ndim:
        raise IndexingError(f"axis: {axis} is out of range for inserting an axis into "
                            f"{x.ndim} dimensions ({-x.ndim - 1}..{x.ndim})")
    d = normalize_axis(axis, x.ndim + 1)
    return _reshape(x, x.shape[:d] + (1,) + x.shape[d:])


def squeeze(x, /, axis) -> Buffer:
    x = array(x, "x")
    if axis is None:
        raise ArgumentError("axis: expected an int or a tuple of ints (squeeze takes the "
                            "axes to remove), got None")
    axes = normalize_axes(axis, x.ndim)
    for d in axes:
        if x.shape[d] != 1:
            raise ShapeError(f"axis: axis {d} of x {x.shape} has size {x.shape[d]}; only "
                             f"axes of size 1 can be squeezed")
    return _reshape(x, tuple(n for d, n in enumerate(x.shape) if d not in axes))


# -- broadcasting ----------------------------------------------------------------------------
def broadcast_to(x, /, shape) -> Buffer:
    x = array(x, "x")
    shape = _shape_arg(shape)
    if len(shape) < x.ndim or broadcast_shapes(
            "broadcast_to", [("x", x.shape), ("shape", shape)]) != shape:
        raise ShapeError(f"shape: x {x.shape} does not broadcast to {shape} (numpy's rule: "
                         f"aligned from the last dimension, x's sizes equal or 1)")
    if shape == x.shape:
        return x
    return _strided(x, shape, broadcast_strides(x.shape, shape), label="broadcast_to")


def broadcast_arrays(*arrays) -> list[Buffer]:
    xs = [array(a, f"arrays[{i}]") for i, a in enumerate(arrays)]
    if not xs:
        return []
    shape = broadcast_shapes("broadcast_arrays", [(f"arrays[{i}]", a.shape)
                                                  for i, a in enumerate(xs)])
    return [broadcast_to(a, shape) for a in xs]


# -- joining and splitting ---------------------------------------------------------------------
def _joined(arrays, where: str) -> list[Buffer]:
    """The arrays to join, on one device and converted to their promoted dtype."""
    if isinstance(arrays, Buffer) or not isinstance(arrays, (tuple, list)):
        raise ArgumentError(f"arrays: {where} takes a tuple or list of arrays, got "
                            f"{type(arrays).__name__}")
    if not arrays:
        raise ArgumentError(f"arrays: {where} needs at least one array")
    xs = [array(a, f"arrays[{i}]") for i, a in enumerate(arrays)]
    same_device(where, *xs)
    dt = xs[0]._dt
    for a in xs[1:]:
        dt = promote(dt, a._dt, "arrays")
    return [a if a._dt == dt else astype(a, dt) for a in xs]


def concat(arrays, /, *, axis: int | None = 0) -> Buffer:
    """The arrays joined along ``axis`` (None: each flattened first), in their promoted
    dtype."""
    xs = _joined(arrays, "concat")
    if axis is None:
        xs = [_reshape(a, (a.size,)) for a in xs]
        axis = 0
    ndim = xs[0].ndim
    if ndim == 0:
        raise ShapeError("arrays: concat needs arrays of at least one dimension (0-d arrays "
                         "have no axis to join along); use stack()")
    d = normalize_axis(axis, ndim)
    for i, a in enumerate(xs):
        if a.ndim != ndim or any(n != m for k, (n, m) in enumerate(zip(a.shape, xs[0].shape))
                                 if k != d):
            raise ShapeError(f"arrays: arrays[{i}] is {a.shape} and arrays[0] is "
                             f"{xs[0].shape}; their shapes must match except along axis {d}")
    shape = list(xs[0].shape)
    shape[d] = sum(a.shape[d] for a in xs)
    out = new(shape, xs[0]._dt, xs[0].device, "concat")
    ost = contiguous_strides(tuple(shape))
    at = 0
    for a in xs:
        _region(a, out, a.shape, contiguous_strides(a.shape), ost, 0, at * ost[d])
        at += a.shape[d]
    return out


def stack(arrays, /, *, axis: int = 0) -> Buffer:
    xs = _joined(arrays, "stack")
    for i, a in enumerate(xs):
        if a.shape != xs[0].shape:
            raise ShapeError(f"arrays: arrays[{i}] is {a.shape} and arrays[0] is "
                             f"{xs[0].shape}; stack needs arrays of one shape")
    base = xs[0].shape
    d = normalize_axis(axis, len(base) + 1)
    shape = base[:d] + (len(xs),) + base[d:]
    out = new(shape, xs[0]._dt, xs[0].device, "stack")
    ost = contiguous_strides(shape)
    inner = ost[:d] + ost[d + 1:]
    for k, a in enumerate(xs):
        _region(a, out, base, contiguous_strides(base), inner, 0, k * ost[d])
    return out


def unstack(x, /, *, axis: int = 0) -> tuple[Buffer, ...]:
    x = array(x, "x")
    if x.ndim == 0:
        raise ShapeError("x: unstack needs an array of at least one dimension, got a 0-d one")
    d = normalize_axis(axis, x.ndim)
    st = contiguous_strides(x.shape)
    shape = x.shape[:d] + x.shape[d + 1:]
    strides = st[:d] + st[d + 1:]
    return tuple(_strided(x, shape, strides, k * st[d], "unstack") for k in range(x.shape[d]))


# -- moving elements -------------------------------------------------------------------------
def _permutation(axes, ndim: int) -> tuple[int, ...]:
    axes = _ints(axes, "axes") if isinstance(axes, (tuple, list)) else None
    if axes is None or len(axes) != ndim or sorted(a % max(ndim, 1) if -ndim <= a < ndim
                                                   else -1 for a in axes) != list(range(ndim)):
        raise ArgumentError(f"axes: expected a permutation of the {ndim} axes of x, got "
                            f"{axes!r}")
    return tuple(a % ndim for a in axes)


def permute_dims(x, /, axes) -> Buffer:
    x = array(x, "x")
    perm = _permutation(axes, x.ndim)
    if perm == tuple(range(x.ndim)):
        return _copy(x)
    st = contiguous_strides(x.shape)
    return _strided(x, tuple(x.shape[d] for d in perm), tuple(st[d] for d in perm),
                    label="permute_dims")


def moveaxis(x, source, destination, /) -> Buffer:
    x = array(x, "x")
    src = _ints(source, "source")
    dst = _ints(destination, "destination")
    if len(src) != len(dst):
        raise ArgumentError(f"source and destination: {source!r} and {destination!r} must "
                            f"name as many axes")
    src = tuple(normalize_axis(a, x.ndim, "source") for a in src)
    dst = tuple(normalize_axis(a, x.ndim, "destination") for a in dst)
    for name, axes in (("source", src), ("destination", dst)):
        if len(set(axes)) != len(axes):
            raise ArgumentError(f"{name}: {axes} repeats an axis")
    order = [d for d in range(x.ndim) if d not in src]
    for s, t in sorted(zip(dst, src)):
        order.insert(s, t)
    return permute_dims(x, tuple(order))


def flip(x, /, *, axis=None) -> Buffer:
    x = array(x, "x")
    axes = normalize_axes(axis, x.ndim)
    st = contiguous_strides(x.shape)
    strides = tuple(-s if d in axes else s for d, s in enumerate(st))
    offset = sum((x.shape[d] - 1) * st[d] for d in axes if x.shape[d])
    return _strided(x, x.shape, strides, offset, "flip")


def roll(x, /, shift, *, axis=None) -> Buffer:
    """Elements shifted along axes (None: over the flattened array), wrapping around."""
    x = array(x, "x")
    if axis is None:
        if not isinstance(shift, (int, np.integer)) or isinstance(shift, builtins.bool):
            raise ArgumentError(f"shift: with axis=None, shift must be an int, got {shift!r}")
        flat = roll(_reshape(x, (x.size,)), int(shift), axis=0)
        return _reshape(flat, x.shape)
    shifts, axes = _ints(shift, "shift"), _ints(axis, "axis")
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    if len(shifts) != len(axes):
        raise ArgumentError(f"shift and axis: {shift!r} and {axis!r} must have as many "
                            f"entries")
    by = [0] * x.ndim
    for s, a in zip(shifts, axes):
        by[normalize_axis(a, x.ndim)] += s
    out = new(x.shape, x._dt, x.device, "roll")
    st = contiguous_strides(x.shape)
    pieces = []  # per axis: (source start, length, destination start) of each piece
    for n, s in zip(x.shape, by):
        s = s % n if n else 0
        pieces.append([(0, n, 0)] if s == 0 else [(0, n - s, s), (n - s, s, 0)])
    for combo in itertools.product(*pieces):
        shape = tuple(p[1] for p in combo)
        a_off = sum(p[0] * t for p, t in zip(combo, st))
        o_off = sum(p[2] * t for p, t in zip(combo, st))
        _region(x, out, shape, st, st, a_off, o_off)
    return out


def tile(x, repetitions, /) -> Buffer:
    x = array(x, "x")
    reps = _ints(repetitions, "repetitions")
    if any(r < 0 for r in reps):
        raise ArgumentError(f"repetitions: {reps} has a negative count")
    n = max(len(reps), x.ndim)
    reps = (1,) * (n - len(reps)) + reps
    shape = (1,) * (n - x.ndim) + x.shape
    st = contiguous_strides(shape)
    # out seen as (r0, s0, r1, s1, ...) is row-major: one region reads x with stride 0 on
    # every repetition axis
    region = tuple(v for r, s in zip(reps, shape) for v in (r, s))
    strides = tuple(v for t in st for v in (0, t))
    out = new(tuple(r * s for r, s in zip(reps, shape)), x._dt, x.device, "tile")
    _region(x, out, region, strides, contiguous_strides(region))
    return out


def repeat(x, repeats, /, *, axis: int | None = None) -> Buffer:
    """Each element (along ``axis``; None: of the flattened array) repeated. ``repeats`` is
    an int or a 1-D integer array (one count per element, or one for all); an array's counts
    decide the result's shape, so they are read back (which waits for the GPU)."""
    x = array(x, "x")
    if axis is None:
        x, d = _reshape(x, (x.size,)), 0
    else:
        d = normalize_axis(axis, x.ndim)
    n = x.shape[d] if x.ndim else 1
    if isinstance(repeats, Buffer):
        counts = _counts(repeats, n)
    elif isinstance(repeats, (int, np.integer)) and not isinstance(repeats, builtins.bool):
        if repeats < 0:
            raise ArgumentError(f"repeats: {repeats} is negative")
        counts = None
    else:
        raise ArgumentError(f"repeats: expected an int or an integer array, got "
                            f"{type(repeats).__name__}")
    if x.ndim == 0:
        x = _reshape(x, (1,))
    outer, inner = x.shape[:d], x.shape[d + 1:]
    st = contiguous_strides(x.shape)
    if counts is None:
        r = int(repeats)
        region = outer + (n, r) + inner
        out = new(outer + (n * r,) + inner, x._dt, x.device, "repeat")
        _region(x, out, region, st[:d] + (st[d], 0) + st[d + 1:], contiguous_strides(region))
        return out
    total = int(sum(counts))
    if total >= 2**32:
        raise ShapeError(f"repeats: {total} elements along axis {d}; at most 2**32 - 1")
    out = new(outer + (total,) + inner, x._dt, x.device, "repeat")
    if out.size == 0:
        return out
    # the counts' running sums (from the counts read back, as a shape is): where each
    # element's repeats start along the axis
    offsets = buffer(np.concatenate([[0], np.cumsum(counts)]).astype(np.uint32),
                     device=x.device)
    if x._base is not None and x._offset:
        x = _copy(x)  # the kernel reads x from its first element
    enqueue(REPEAT_GATHER, [x, offsets], out, {"outer": math.prod(outer),
                                                   "inner": math.prod(inner)})
    return out


def _counts(repeats: Buffer, n: int) -> list[int]:
    repeats = array(repeats, "repeats")
    if repeats._dt.kind not in "iu":
        raise DtypeError(f"repeats: expected an integer array, got {repeats._dt}")
    if repeats.ndim != 1 or repeats.shape[0] not in (1, n):
        raise ShapeError(f"repeats: expected a 1-D array of {n} counts (or 1), got shape "
                         f"{repeats.shape}")
    counts = [int(c) for c in repeats.to_numpy()]
    if any(c < 0 for c in counts):
        raise ArgumentError(f"repeats: {min(counts)} is negative")
    return counts * n if len(counts) == 1 and n != 1 else counts
