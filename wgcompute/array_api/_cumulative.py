"""The standard's cumulative_sum and cumulative_prod: prefix scans on the GPU along one axis
(kernels/scan), the axis moved last by a GPU copy when it is not already."""

from __future__ import annotations

import builtins
import math

from .._gather import scan_rows
from ..array import astype, transpose
from ..buffer import Buffer
from ..dtypes import DTYPES
from ..errors import ArgumentError, DtypeError, ShapeError
from ..kernels.scan.scan import SCAN_DTYPES
from ._dtypes import NAMES, as_dtype, standard_name
from ._helpers import array, new, normalize_axis

__all__ = ["cumulative_prod", "cumulative_sum"]


def cumulative_sum(x: Buffer, /, *, axis: int | None = None, dtype=None,
                   include_initial: bool = False) -> Buffer:
    """The cumulative sum of ``x`` along ``axis`` (optional for 1-D ``x`` only). Integers
    wrap around in their dtype; bool sums as int32 and uint8 as uint32 (the standard's
    default integer's width) unless ``dtype`` says otherwise. A ``dtype`` other than x's
    converts x first as ``astype(x, dtype, casting="unsafe")`` does (integers wrap, floats
    truncate towards zero), as the standard and numpy do. ``include_initial`` puts a 0
    first (the axis grows by one)."""
    return _cumulative("cumulative_sum", "sum", x, axis, dtype, include_initial)


def cumulative_prod(x: Buffer, /, *, axis: int | None = None, dtype=None,
                    include_initial: bool = False) -> Buffer:
    """The cumulative product of ``x`` along ``axis``, as cumulative_sum (a 1 first with
    ``include_initial``)."""
    return _cumulative("cumulative_prod", "prod", x, axis, dtype, include_initial)


# packed results: scanned in 32 bits, wrapped back after
_WIDE = {"u8": "u32", "u16": "u32", "s8": "s32", "s16": "s32"}


def _result_dtype(where: str, x: Buffer, dtype):
    """The result's dtype, and the dtype the scan runs in (1- and 2-byte integer results: 32
    bits, wrapped after)."""
    if dtype is not None:
        dt = as_dtype(dtype)
    elif x.dtype.kind == "b":
        dt = NAMES["int32"]  # the default integer dtype
    elif x.dtype.kind in "iu" and x.dtype.itemsize < 4:  # the default integer's width
        dt = NAMES["uint32" if x.dtype.kind == "u" else "int32"]
    else:
        dt = DTYPES[x.dtype.name]
    run = _WIDE.get(dt.name, dt.name)
    if run not in SCAN_DTYPES:
        allowed = ", ".join(n for n, d in NAMES.items()
                            if d.name in SCAN_DTYPES or d.name in _WIDE)
        raise DtypeError(f"{where}: dtype {standard_name(dt)} is not supported; the result "
                         f"may be one of {allowed}")
    return dt, DTYPES[run]


def _cumulative(where: str, op: str, x, axis, dtype, include_initial) -> Buffer:
    x = array(x, "x")
    if x.ndim == 0:
        raise ShapeError(f"{where}: x is 0-d; a cumulative {op} needs an axis (reshape it "
                         f"to (1,) first)")
    if not isinstance(include_initial, builtins.bool):
        raise ArgumentError(f"{where}: include_initial must be True or False, got "
                            f"{include_initial!r}")
    if axis is None:
        if x.ndim != 1:
            raise ArgumentError(f"{where}: axis=None is allowed for 1-D x only; x is "
                                f"{x.shape}: give the axis")
        axis = 0
    ax = normalize_axis(axis, x.ndim)
    dt, run = _result_dtype(where, x, dtype)
    if x.dtype != run:  # the standard's cast before the scan (numpy's unsafe conversion)
        x = astype(x, run, casting="unsafe")
    out = _scan(where, op, x, ax, run, include_initial)
    if dt != run:  # 1- and 2-byte sums wrap as 32-bit ones do, in their low bits
        wide, out = out, astype(out, dt, casting="unsafe")
        wide.free()
    return out


def _scan(where: str, op: str, x: Buffer, ax: int, dt, include_initial: bool) -> Buffer:
    shift = int(include_initial)
    n = x.shape[ax]
    out_shape = x.shape[:ax] + (n + shift,) + x.shape[ax + 1:]
    rows = math.prod(x.shape[:ax] + x.shape[ax + 1:])
    last = ax == x.ndim - 1 or math.prod(x.shape[ax + 1:]) == 1
    if last:
        out = new(out_shape, dt, x.device, where)
        scan_rows(where, op, x, rows, out, include_initial)
        return out
    # the axis moved last (a GPU copy), scanned, and moved back
    perm = tuple(d for d in range(x.ndim) if d != ax) + (ax,)
    moved = transpose(x, axes=perm)
    scanned = new(tuple(out_shape[d] for d in perm), dt, x.device, where)
    scan_rows(where, op, moved, rows, scanned, include_initial)
    moved.free()
    back = tuple(perm.index(d) for d in range(x.ndim))
    out = transpose(scanned, axes=back)
    scanned.free()
    return out
