"""argmax, argmin, searchsorted and count_nonzero on the GPU: the reduction family's argmax
(argmin: the argmax of order-reversing keys) and sums, and the sort family's binary search."""

from __future__ import annotations

import builtins

from .._lazy import enqueue
from ..array import astype
from ..buffer import Buffer
from ..commands import prepare_output
from ..errors import ArgumentError, IndexingError, ShapeError
from ..kernels.sort.search import GATHER_1D, NONZERO_MASK, ORDER_KEYS, SEARCHSORTED
from ..kernels.sort.sort import ORDERED
from ._dtypes import promote
from ._helpers import array, normalize_axes, normalize_axis, refuse_dtype, same_device
from ._sorting import sortable
from ._utility import where  # noqa: F401 - the elementwise "where" kernel

__all__ = ["argmax", "argmin", "count_nonzero", "searchsorted", "where"]

_INDEX = "s32"  # the namespace's default index dtype (int32)


def _free(*buffers) -> None:
    for b in buffers:
        b.free()


def _arg(name: str, x, axis, keepdims) -> Buffer:
    x = array(x, "x")
    if x.dtype.kind not in "fiub":
        raise refuse_dtype(name, x.dtype, "a real-valued dtype")
    if axis is not None:
        normalize_axis(axis, x.ndim)
    if not isinstance(keepdims, builtins.bool):
        raise ArgumentError(f"{name}: keepdims must be True or False, got {keepdims!r}")
    if (x.size == 0 if axis is None or not x.ndim else x.shape[axis] == 0):
        raise ShapeError(f"{name}: x {x.shape} has no elements along axis={axis!r}; the "
                         f"{name} of nothing is undefined")
    if name == "argmax" and x.dtype.kind != "b":
        keys = x
    else:
        wide = sortable(name, x)
        keys = enqueue(ORDER_KEYS, [wide], None, {"reverse": name == "argmin"})
        if wide is not x:
            wide.free()
    if x.ndim == 0:
        axis = None
    found = enqueue("argmax", [keys], None, {"axis": axis, "keepdims": keepdims})
    if keys is not x:
        keys.free()
    try:
        return astype(found, _INDEX, casting="unsafe")  # indices < 2**31 (the sort's limit)
    finally:
        found.free()


def argmax(x, /, *, axis: int | None = None, keepdims: builtins.bool = False) -> Buffer:
    """The int32 index of the first largest element (over everything, flattened, or along
    ``axis``); a nan counts as the largest (its first one wins, as in numpy)."""
    return _arg("argmax", x, axis, keepdims)


def argmin(x, /, *, axis: int | None = None, keepdims: builtins.bool = False) -> Buffer:
    """The int32 index of the first smallest element; a nan wins as in argmax (numpy)."""
    return _arg("argmin", x, axis, keepdims)


def _sorted_by(x1: Buffer, sorter) -> Buffer:
    """``x1[sorter]``: sorter is checked to be int indices of x1 (one read of its smallest
    and largest value, which waits for the GPU)."""
    s = array(sorter, "sorter")
    same_device("searchsorted", x1, s)
    if s.dtype.kind not in "iu" or s.shape != x1.shape:
        raise IndexingError(f"searchsorted: sorter is {s.shape} {s.dtype}; expected integer "
                            f"indices of x1, shape {x1.shape}")
    if not s.size:
        return x1
    lo, hi = (int(enqueue(op, [s], None, {"axis": None}).to_numpy()) for op in ("min", "max"))
    if lo < 0 or hi >= x1.size:
        raise IndexingError(f"searchsorted: sorter holds {lo if lo < 0 else hi}; indices of "
                            f"x1 go from 0 to {x1.size - 1}")
    idx = s if s.dtype == _INDEX else astype(s, _INDEX, casting="unsafe")
    try:
        return enqueue(GATHER_1D, [x1, idx], None, {})
    finally:
        if idx is not s:
            idx.free()


def searchsorted(x1, x2, /, *, side: str = "left", sorter=None) -> Buffer:
    """For each element of ``x2``, the int32 position in the sorted 1-D ``x1`` (ascending,
    nan last, as sort gives it; ``sorter``: the indices that sort x1) where it would go:
    before its equals (side "left") or after them ("right"). A binary search per element."""
    a, v = array(x1, "x1"), array(x2, "x2")
    same_device("searchsorted", a, v)
    if a.ndim != 1:
        raise ShapeError(f"searchsorted: x1 is {a.shape}; expected a 1-D array")
    if side not in ("left", "right"):
        raise ArgumentError(f"searchsorted: side is {side!r}; expected 'left' or 'right'")
    for b in (a, v):
        if b.dtype.kind not in "fiub":
            raise refuse_dtype("searchsorted", b.dtype, "real-valued dtypes")
    dt = promote(a.dtype, v.dtype, "searchsorted")
    temps = []

    def keep(made: Buffer, given: Buffer) -> Buffer:
        if made is not given:
            temps.append(made)
        return made

    def convert(b: Buffer) -> Buffer:
        c = keep(b if b.dtype == dt else astype(b, dt), b)  # promotions keep every value
        return keep(sortable("searchsorted", c), c)

    try:
        a = convert(a)
        if sorter is not None:
            a = keep(_sorted_by(a, sorter), a)
        ins, params = [a, convert(v)], {"side": side}
        # into pooled memory (the search writes every position): a repeated search finds
        # its binding
        return enqueue(SEARCHSORTED, ins, prepare_output(SEARCHSORTED, ins, None, params,
                                                         pooled=True), params)
    finally:
        _free(*temps)


def count_nonzero(x, /, *, axis=None, keepdims: builtins.bool = False) -> Buffer:
    """How many elements are not zero (nan is not zero, -0.0 is; a complex number is zero when
    both its parts are), as int32, over ``axis`` (None: all; an int or a tuple of ints)."""
    x = array(x, "x")
    if x.dtype.kind not in "fiubc":
        raise refuse_dtype("count_nonzero", x.dtype, "a numeric or bool dtype")
    axes = normalize_axes(axis, x.ndim)
    if not isinstance(keepdims, builtins.bool):
        raise ArgumentError(f"count_nonzero: keepdims must be True or False, got "
                            f"{keepdims!r}")
    if x.dtype.name not in ORDERED and x.dtype.kind == "c":  # complex128: its != 0 counted
        from ._elementwise import binary

        return count_nonzero(binary("not_equal", x, 0j), axis=axis, keepdims=keepdims)
    wide = x if x.dtype.kind == "c" else sortable("count_nonzero", x)
    mask = enqueue(NONZERO_MASK, [wide], None, {})
    if wide is not x:
        wide.free()
    try:
        counts = enqueue("sum", [mask], None, {"axis": axes if x.ndim else None,
                                                  "keepdims": keepdims})
    finally:
        mask.free()
    try:
        return astype(counts, _INDEX, casting="unsafe")  # counts < 2**31 elements
    finally:
        counts.free()
