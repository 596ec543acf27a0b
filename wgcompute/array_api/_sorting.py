"""sort and argsort: the sort family's stable radix sort along any axis (other axes than the
last go through a transpose); every sort is stable, descending ones too."""

from __future__ import annotations

import builtins

from .._lazy import enqueue
from ..array import astype, reshape, transpose
from ..buffer import Buffer
from ..commands import prepare_output
from ..errors import ArgumentError
from ..kernels.sort.sort import SORT, SORTABLE
from ._helpers import array, normalize_axis, refuse_dtype

__all__ = ["argsort", "sort"]

# dtypes sorted as a wider one holding every value exactly (and converted back)
_WIDER = {"u8": "u32", "u16": "u32", "s8": "s32", "s16": "s32", "bool": "u32", "f16": "f32"}


def _flag(where: str, name: str, value) -> builtins.bool:
    if not isinstance(value, builtins.bool):
        raise ArgumentError(f"{where}: {name} must be True or False, got "
                            f"{type(value).__name__} {value!r}")
    return value


def sortable(where: str, x: Buffer) -> Buffer:
    """``x`` in a dtype the sort kernels take: u8 and bool as uint32, f16 as f32 (exact)."""
    name = x.dtype.name
    if name in SORTABLE:
        return x
    if name in _WIDER:
        return astype(x, _WIDER[name])
    raise refuse_dtype(where, x.dtype, "a real-valued dtype (integers, floats or bool)")


def sort_last(where: str, x: Buffer, axis: int, descending: builtins.bool,
              indices: builtins.bool) -> Buffer:
    """The stable sort of ``x`` (already sortable) along ``axis``: values or int32 indices."""
    params = {"descending": descending, "indices": indices}
    if x.ndim == 0:
        return reshape(_sorted(reshape(x, (1,)), params), ())
    last = x.ndim - 1
    if axis == last:
        return _sorted(x, params)
    perm = tuple(d for d in range(x.ndim) if d != axis) + (axis,)
    back = tuple(perm.index(d) for d in range(x.ndim))
    moved = transpose(x, axes=perm)
    try:
        out = _sorted(moved, params)
    finally:
        moved.free()
    try:
        return transpose(out, axes=back)
    finally:
        out.free()


def _sorted(x: Buffer, params: dict) -> Buffer:
    """SORT of ``x`` queued into pooled memory (the sort writes all of it): a repeated sort
    of one shape finds its binding, and its temporaries, made by the first."""
    return enqueue(SORT, [x], prepare_output(SORT, [x], None, params, pooled=True), params)


def _args(where: str, x, axis, descending, stable) -> tuple[Buffer, int]:
    x = array(x, "x")
    _flag(where, "descending", descending)
    _flag(where, "stable", stable)
    if x.ndim == 0:
        if isinstance(axis, builtins.bool) or axis not in (0, -1):
            raise ArgumentError(f"{where}: axis {axis!r} is out of range for a 0-d x "
                                f"(0 or -1)")
        return x, 0
    return x, normalize_axis(axis, x.ndim)


def sort(x, /, *, axis: int = -1, descending: builtins.bool = False,
         stable: builtins.bool = True) -> Buffer:
    """A sorted copy of ``x`` along ``axis``. Always stable (``stable=False`` is allowed and
    gives the same order). Floats: -0.0 and +0.0 are equal (they keep their order) and nan
    goes last (descending: first, as the order is reversed)."""
    x, ax = _args("sort", x, axis, descending, stable)
    wide = sortable("sort", x)
    out = sort_last("sort", wide, ax, descending, False)
    if wide is x:
        return out
    wide.free()
    try:
        return astype(out, x.dtype, casting="unsafe")  # every value came from x's dtype
    finally:
        out.free()


def argsort(x, /, *, axis: int = -1, descending: builtins.bool = False,
            stable: builtins.bool = True) -> Buffer:
    """The int32 indices along ``axis`` that sort ``x`` (stably; see sort for floats)."""
    x, ax = _args("argsort", x, axis, descending, stable)
    wide = sortable("argsort", x)
    try:
        return sort_last("argsort", wide, ax, descending, True)
    finally:
        if wide is not x:
            wide.free()
