"""What every function of the namespace does with its arguments: arrays checked and named,
Python scalars combined by the standard's rules, devices resolved, outputs allocated."""

from __future__ import annotations

import builtins

import numpy as np

from ..array import astype
from ..buffer import Buffer, check_buffer, result_buffer
from ..dtypes import DType
from ..errors import ArgumentError, DeviceError, DtypeError
from ..runtime import Device, resolve
from ._dtypes import check_scalar_kind, promote, standard_name

SCALARS = (builtins.bool, int, float, complex)


def array(x, argument: str) -> Buffer:
    """``x`` as a live Buffer, or an error naming ``argument``."""
    if not isinstance(x, Buffer):
        raise ArgumentError(f"{argument}: expected an array of this namespace (a wgcompute "
                            f"Buffer; make one with asarray()), got {type(x).__name__}")
    return check_buffer(x, argument)


def same_device(where: str, *arrays: Buffer) -> Device:
    dev = arrays[0].device
    for a in arrays[1:]:
        if a.device is not dev:
            raise DeviceError(f"{where}: arrays on two devices ({dev.label} and "
                              f"{a.device.label}); move one with to_device() first")
    return dev


def operands(where: str, x1, x2) -> tuple[Buffer, Buffer | builtins.bool | int | float,
                                           DType]:
    """The two operands of a binary function and their promoted dtype. One may be a Python
    scalar (it takes the array's dtype); two arrays of different dtypes are promoted by the
    standard's table (the narrower one is converted on the GPU)."""
    if isinstance(x1, SCALARS) and isinstance(x2, SCALARS):
        raise ArgumentError(f"{where}: at least one of x1 and x2 must be an array")
    if isinstance(x1, SCALARS) or isinstance(x2, SCALARS):
        a, s = (x2, x1) if isinstance(x1, SCALARS) else (x1, x2)
        a = array(a, "x2" if a is x2 else "x1")
        check_scalar_kind(s, a.dtype, where)
        return a, s, a.dtype
    a, b = array(x1, "x1"), array(x2, "x2")
    same_device(where, a, b)
    try:
        dt = promote(a.dtype, b.dtype, where)
    except DtypeError:
        raise DtypeError(f"{where}: x1 is {standard_name(a.dtype)} and x2 is "
                         f"{standard_name(b.dtype)}, which have no promoted dtype in the array "
                         f"API standard; convert one with astype() first") from None
    if a.dtype != dt:
        a = astype(a, dt)
    if b.dtype != dt:
        b = astype(b, dt)
    return a, b, dt


def new(shape, dt: DType, device: Device | None, label: str) -> Buffer:
    """An uninitialised result buffer (from the device's pool) for a kernel to overwrite."""
    return result_buffer(tuple(shape), dt, resolve(device), label)


def normalize_axis(axis: int, ndim: int, argument: str = "axis") -> int:
    if isinstance(axis, builtins.bool) or not isinstance(axis, (int, np.integer)):
        raise ArgumentError(f"{argument}: expected an int, got {type(axis).__name__}")
    if not -ndim <= axis < max(ndim, 1):
        raise ArgumentError(f"{argument}: {axis} is out of range for {ndim} dimensions")
    return int(axis) % max(ndim, 1)


def normalize_axes(axis, ndim: int, argument: str = "axis") -> tuple[int, ...]:
    """``axis`` (None, an int or a tuple of ints) as sorted non-negative axes, no repeats."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, tuple):
        axes = tuple(normalize_axis(a, ndim, argument) for a in axis)
        if len(set(axes)) != len(axes):
            raise ArgumentError(f"{argument}: {axis} repeats an axis")
        return tuple(sorted(axes))
    return (normalize_axis(axis, ndim, argument),)


def refuse_dtype(where: str, dt: DType, allowed: str) -> DtypeError:
    from ._dtypes import standard_name

    return DtypeError(f"{where}: {standard_name(dt)} arrays are not accepted; expected "
                      f"{allowed}")
