"""The standard's utility functions all and any: whether every (any) element is true, over
axes, as reductions on the GPU (the reduce family's "all" and "any" kernels), giving bool;
diff (differences of neighbours along an axis, n times); and where (exposed by _searching),
the elementwise "where" kernel."""

from __future__ import annotations

import builtins

from .._lazy import enqueue
from ..buffer import Buffer
from ..dtypes import DTYPES
from ..errors import ArgumentError, DtypeError
from ..kernels.core.registry import get as kernel
from ..kernels.elementwise.where import WHERE
from ._creation import full
from ._helpers import SCALARS, array, new, normalize_axes, operands, same_device

__all__ = ["all", "any", "diff"]  # (where is listed by _searching)


def _truth(name: str, x, axis, keepdims) -> Buffer:
    x = array(x, "x")
    if not isinstance(keepdims, builtins.bool):
        raise ArgumentError(f"{name}: keepdims must be True or False, got {keepdims!r}")
    axes = normalize_axes(axis, x.ndim)  # checks range and repeats; () reduces nothing
    if x.dtype.kind == "c":  # true where either part is: any over the parts (a last f32 axis)
        parts = x.reshape(x.shape + (1,)).view(DTYPES["f32"])
        return _truth(name, _truth("any", parts, (x.ndim,), False), axis, keepdims)
    params = {"axis": None if len(axes) == x.ndim else axes, "keepdims": keepdims}
    k = kernel(name)
    shape, dt = k.output_spec([x], params)
    return enqueue(k, [x], new(shape, DTYPES[dt], x.device, name), params)


def all(x: Buffer, /, *, axis: int | tuple[int, ...] | None = None,  # noqa: A001
        keepdims: bool = False) -> Buffer:
    """Whether every element of ``x`` along ``axis`` (None: all axes; an int or a tuple of
    ints, negative counting from the end) is true: not zero, nan counting as true. A bool
    array; the reduced axes go, or stay as 1 with ``keepdims``. Of no elements: True."""
    return _truth("all", x, axis, keepdims)


def any(x: Buffer, /, *, axis: int | tuple[int, ...] | None = None,  # noqa: A001
        keepdims: bool = False) -> Buffer:
    """Whether any element of ``x`` along ``axis`` (as in ``all``) is true: not zero, nan
    counting as true. A bool array; of no elements: False."""
    return _truth("any", x, axis, keepdims)


def where(condition: Buffer, x1, x2, /) -> Buffer:
    """x1 where ``condition`` (a bool array) is true, else x2, elementwise; the three broadcast
    together. x1 and x2 are promoted to one dtype by the standard's rules; either may be a
    Python scalar (taking the other's dtype)."""
    c = array(condition, "condition")
    if c.dtype != "bool":
        raise DtypeError(f"where: condition: {c.dtype} array; expected a bool array (compare "
                         f"first, e.g. x != 0)")
    a, b, dt = operands("where", x1, x2)
    if isinstance(b, SCALARS):  # one of them is a scalar: a 0-d array of the other's dtype
        s = full((), b, dtype=dt, device=a.device)
        a, b = (s, a) if isinstance(x1, SCALARS) else (a, s)
    same_device("where", c, a, b)
    shape, _ = WHERE.output_spec([c, a, b], {})
    return enqueue(WHERE, [c, a, b], new(shape, dt, a.device, "where"))


def diff(x: Buffer, /, *, axis: int = -1, n: int = 1, prepend: Buffer | None = None,
         append: Buffer | None = None) -> Buffer:
    """The ``n``-th differences of neighbours along ``axis``: ``x[i+1] - x[i]`` (bool: whether
    they differ), after ``prepend`` and ``append`` (arrays shaped as ``x`` but along ``axis``)
    were joined to ``x`` along it. Each difference is one subtraction of two views on the
    GPU; the axis shrinks by one each time."""
    from ._elementwise import not_equal, subtract
    from ._manipulation import concat

    x = array(x, "x")
    if x.ndim == 0:
        raise ArgumentError("x: diff needs at least one dimension, got a 0-d array")
    if isinstance(n, builtins.bool) or not isinstance(n, int) or n < 0:
        raise ArgumentError(f"n: expected an int >= 0, got {n!r}")
    ax = normalize_axes(axis, x.ndim)[0]
    parts = [p for p in (prepend, x, append) if p is not None]
    for name, p in (("prepend", prepend), ("append", append)):
        if p is not None:
            array(p, name)
            if p.ndim != x.ndim:
                raise ArgumentError(f"{name}: {p.ndim} dimensions, x has {x.ndim}")
    y = concat(parts, axis=ax) if len(parts) > 1 else x
    for _ in range(n):
        length = y.shape[ax]
        if length == 0:
            break
        hi = tuple(slice(1, None) if i == ax else slice(None) for i in range(y.ndim))
        lo = tuple(slice(None, length - 1) if i == ax else slice(None) for i in range(y.ndim))
        y = not_equal(y[hi], y[lo]) if y.dtype.kind == "b" else subtract(y[hi], y[lo])
    return y
