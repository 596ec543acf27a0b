"""The standard's statistical functions (sum, prod, mean, var, std, min, max) over any axes,
on the reduction kernels; var and std in two passes (the mean, then squared deviations)."""

from __future__ import annotations

import builtins
import math

import numpy as np

from .._lazy import enqueue
from ..array import astype
from ..buffer import Buffer, BufferView
from ..errors import ArgumentError, DtypeError
from ..kernels.core.base import Param
from ..kernels.elementwise.elementwise import Elementwise
from ..kernels.elementwise.optable import OpDef
from ..kernels.reduce.cprod import COMPLEX_PROD
from ._dtypes import NAMES, as_dtype, standard_name
from ._helpers import array, new, normalize_axes
from ._manipulation import permute_dims

__all__ = ["max", "mean", "min", "prod", "std", "sum", "var"]

# var and std's elementwise steps (not ops of the table: they exist for these two only)
_SQUARED_DEVIATION = Elementwise("array_api.squared_deviation", OpDef(
    "squared_deviation", 2, "float", "(x - y) * (x - y)", lambda x, y: (x - y) ** 2,
    description="(a - b)²"))
_DIVISOR = Param("divisor", "T", doc="N - correction")
_DIVIDE = Elementwise("array_api.divide_by", OpDef(
    "divide_by", 1, "float", "x / ${a}", lambda x, d: x / d, params=("divisor",),
    description="a / divisor"), param=_DIVISOR)
_SQRT_DIVIDE = Elementwise("array_api.sqrt_divide_by", OpDef(
    "sqrt_divide_by", 1, "float", "sqrt(x / ${a})", lambda x, d: np.sqrt(x / d),
    params=("divisor",), description="sqrt(a / divisor)"), param=_DIVISOR)


def _real(x: Buffer, where: str, floats_only: builtins.bool = False) -> None:
    kind = x._dt.kind
    if kind not in ("f" if floats_only else "fiu"):
        allowed = "a real floating-point array" if floats_only else \
            "a real-valued array (integers or floats)"
        raise DtypeError(f"x: {where} of a {standard_name(x._dt)} array; expected {allowed}")


def _reduce(op: str, x: Buffer, axis, keepdims) -> Buffer:
    if not isinstance(keepdims, (builtins.bool, np.bool_)):
        raise ArgumentError(f"keepdims: expected True or False, got {keepdims!r}")
    axes = normalize_axes(axis, x.ndim)
    return enqueue(op, [x], None, {"axis": axes, "keepdims": builtins.bool(keepdims)})


def _accumulating(op: str, x, axis, dtype, keepdims) -> Buffer:
    """sum and prod: integers in their kind's default dtype unless x's holds more (int32 and
    int64 stay, int8 and int16 go to int32, uint8 and uint16 to uint32), or in ``dtype`` (x
    is converted to it first)."""
    x = array(x, "x")
    if x._dt.kind == "c":
        if dtype is not None and as_dtype(dtype) != x._dt:
            want = as_dtype(dtype)
            if want.kind != "c" or want.itemsize < x._dt.itemsize:
                raise DtypeError(f"dtype: {op} of a {standard_name(x._dt)} array into "
                                 f"{standard_name(want)}; expected {standard_name(x._dt)} "
                                 f"or a wider complex dtype")
            x = astype(x, want, casting="unsafe")
        return (_complex_sum if op == "sum" else _complex_prod)(x, axis, keepdims)
    _real(x, op)
    want = x._dt if dtype is None else as_dtype(dtype)
    if dtype is None and want.kind in "iu" and want.itemsize < 4:
        want = NAMES["uint32" if want.kind == "u" else "int32"]
    if dtype is not None and want.kind not in "fiu":
        raise DtypeError(f"dtype: {op} into {standard_name(want)}; expected a real numeric "
                         f"dtype")
    if want != x._dt and not (x._dt.kind in "iu" and x._dt.itemsize < 4 and
                              want == NAMES["uint32" if x._dt.kind == "u" else "int32"]):
        x = astype(x, want, casting="unsafe")
    out = _reduce(op, x, axis, keepdims)
    return out if out._dt == want else astype(out, want, casting="unsafe")


def _complex_sum(x: Buffer, axis, keepdims) -> Buffer:
    """complex summed as its (real, imaginary) pairs of its parts' dtype: one more axis, not
    reduced."""
    parts = BufferView(x, x.shape + (2,), 0, x._dt.part)
    out = _reduce("sum", parts, normalize_axes(axis, x.ndim), keepdims)
    return BufferView(out, out.shape[:-1], 0, x._dt)


def _complex_prod(x: Buffer, axis, keepdims) -> Buffer:
    """complex products: the reduced axes moved last (a copy, unless they are), then
    complex_prod over the rows until one value per row is left."""
    axes = normalize_axes(axis, x.ndim)
    if not isinstance(keepdims, (builtins.bool, np.bool_)):
        raise ArgumentError(f"keepdims: expected True or False, got {keepdims!r}")
    kept = [d for d in range(x.ndim) if d not in axes]
    shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape) if keepdims or
                  d not in axes)
    rows = math.prod(x.shape[d] for d in kept)
    if rows == 0:
        return new(shape, x._dt, x.device, "prod")
    if kept + list(axes) != list(range(x.ndim)):
        x = permute_dims(x, tuple(kept) + axes)
    n = x.size // rows
    while True:
        part = new((rows * COMPLEX_PROD.parts(n),), x._dt, x.device, "prod")
        enqueue(COMPLEX_PROD, [x], part, {"rows": rows})
        x, n = part, part.size // rows
        if n == 1:
            return BufferView(part, shape, 0)


def sum(x, /, *, axis=None, dtype=None, keepdims: builtins.bool = False) -> Buffer:  # noqa: A001
    """The sum over ``axis`` (None: every element; a tuple: several). Integers wrap around in
    their dtype (see the standard's rule for the result's dtype); an empty sum is 0."""
    return _accumulating("sum", x, axis, dtype, keepdims)


def prod(x, /, *, axis=None, dtype=None, keepdims: builtins.bool = False) -> Buffer:
    """The product over ``axis``, with sum's dtype rules; an empty product is 1."""
    return _accumulating("prod", x, axis, dtype, keepdims)


def max(x, /, *, axis=None, keepdims: builtins.bool = False) -> Buffer:  # noqa: A001
    """The maximum over ``axis`` (a nan gives nan); refused over an axis with no elements."""
    x = array(x, "x")
    _real(x, "max")
    return _reduce("max", x, axis, keepdims)


def min(x, /, *, axis=None, keepdims: builtins.bool = False) -> Buffer:  # noqa: A001
    """The minimum over ``axis`` (a nan gives nan); refused over an axis with no elements."""
    x = array(x, "x")
    _real(x, "min")
    return _reduce("min", x, axis, keepdims)


def mean(x, /, *, axis=None, keepdims: builtins.bool = False) -> Buffer:
    """The mean over ``axis`` of a floating-point array; nan over no elements."""
    x = array(x, "x")
    _real(x, "mean", floats_only=True)
    return _reduce("mean", x, axis, keepdims)


def _moment(where: str, x, axis, correction, keepdims, root: builtins.bool) -> Buffer:
    x = array(x, "x")
    _real(x, where, floats_only=True)
    if isinstance(correction, builtins.bool) or not isinstance(
            correction, (int, float, np.integer, np.floating)) or not math.isfinite(correction):
        raise ArgumentError(f"correction: expected a finite int or float, got {correction!r}")
    axes = normalize_axes(axis, x.ndim)
    n = math.prod(x.shape[d] for d in axes)
    work = x if x._dt.itemsize >= 4 else astype(x, "f32")  # f16: accumulated in f32
    m = _reduce("mean", work, axes, True)
    dev = enqueue(_SQUARED_DEVIATION, [work, m], new(work.shape, work._dt, work.device,
                                                        where))
    s = _reduce("sum", dev, axes, keepdims)
    divisor = n - float(correction)
    if divisor <= 0 or n == 0:  # the standard: nan where N - correction <= 0
        if s.size:
            enqueue("fill", [], s, {"value": float("nan")})
        out = s
    elif s.size:
        d = float(np.asarray(divisor, work._dt.numpy))  # exact in the dtype the kernel reads
        out = enqueue(_SQRT_DIVIDE if root else _DIVIDE, [s], new(s.shape, s._dt, s.device,
                                                                     where), {"divisor": d})
    else:
        out = s
    return out if out._dt == x._dt else astype(out, x._dt, casting="unsafe")


def var(x, /, *, axis=None, correction: int | float = 0.0,
        keepdims: builtins.bool = False) -> Buffer:
    """The variance over ``axis``: the squared deviations from the mean (computed first)
    summed and divided by N - correction (nan where that is not positive)."""
    return _moment("var", x, axis, correction, keepdims, False)


def std(x, /, *, axis=None, correction: int | float = 0.0,
        keepdims: builtins.bool = False) -> Buffer:
    """The standard deviation over ``axis``: the square root of var's result."""
    return _moment("std", x, axis, correction, keepdims, True)
