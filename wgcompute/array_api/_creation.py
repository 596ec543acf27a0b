"""Creation functions that take their values from the caller: asarray, empty, zeros, ones,
full and their ``_like`` forms. Nothing is computed on the host; ``full`` fills on the GPU."""

from __future__ import annotations

import builtins

import numpy as np

from .._lazy import enqueue
from ..array import astype as _astype
from ..array import copy as _copy
from ..buffer import Buffer, buffer, check_buffer, normalize_shape
from ..errors import ArgumentError, DtypeError
from ..runtime import Device, resolve
from ._dtypes import NAMES, as_dtype, check_scalar_kind, standard_name
from ._helpers import SCALARS, new


def _default_for(value) -> str:
    """The dtype a Python scalar (or nested lists of them) gets without a dtype."""
    if isinstance(value, builtins.bool):
        return "bool"
    if isinstance(value, int):
        return "int32"
    if isinstance(value, float):
        return "float32"
    if isinstance(value, complex):
        return "complex64"
    raise ArgumentError(f"obj: expected numbers, got {type(value).__name__}")


def _scalars_dtype(obj, argument: str):
    """The default dtype of nested sequences of Python scalars (their widest kind)."""
    kinds = set()
    stack = [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, Buffer):
            raise ArgumentError(f"{argument}: a sequence holding arrays; use stack() to join "
                                f"arrays")
        else:
            kinds.add(_default_for(v))
    for name in ("complex64", "float32", "int32", "bool"):
        if name in kinds:
            if name not in NAMES:
                raise DtypeError(f"{argument}: {name} values have no dtype here")
            return NAMES[name]
    return NAMES["float32"]  # an empty list


def asarray(obj, /, *, dtype=None, device: Device | None = None, copy: bool | None = None
            ) -> Buffer:
    """An array from an array, a Python scalar, nested sequences of scalars, an object with
    the buffer protocol or DLPack. ``copy=False`` refuses a conversion that would copy."""
    dt = None if dtype is None else as_dtype(dtype)
    if isinstance(obj, Buffer):
        check_buffer(obj, "obj")
        moves = device is not None and resolve(device) is not obj.device
        converts = dt is not None and dt != obj.dtype
        if copy is False and (moves or converts):
            raise ArgumentError("copy: False, but the array would be converted or moved")
        out = obj.to(resolve(device)) if moves else obj
        if converts:
            return _astype(out, dt, casting="unsafe")
        return _copy(out) if copy and out is obj else out
    if copy is False:
        raise ArgumentError(f"copy: False, but a {type(obj).__name__} must be copied to the "
                            f"GPU")
    if isinstance(obj, SCALARS) or isinstance(obj, (list, tuple)):
        if dt is None:
            dt = _scalars_dtype(obj, "obj")
        if isinstance(obj, SCALARS):
            check_scalar_kind(obj, dt, "obj")
        data = np.array(obj, dtype=object if dt.kind != "b" else np.bool_)
        if dt.kind == "b" and data.dtype != np.bool_:
            raise DtypeError("obj: bool arrays take True and False")
        arr = np.array(obj) if data.size else np.zeros(data.shape, dt.numpy)
    elif hasattr(obj, "__dlpack__") and not isinstance(obj, np.ndarray):
        arr = np.from_dlpack(obj)
    else:
        arr = np.asarray(obj)
    if dt is None:
        try:
            dt = as_dtype(standard_name(_from_numpy(arr.dtype)), "obj")
        except DtypeError:
            raise DtypeError(f"obj: numpy dtype {arr.dtype} has no dtype in this namespace "
                             f"(expected one of {', '.join(NAMES)})") from None
    if dt.kind in "fc" and arr.dtype.kind in "iu":  # integers round to the nearest float, as
        arr = arr.astype(dt.numpy)  # the standard's asarray(2**24 + 1, dtype=float32) does
    return buffer(arr, None, dt, device=device)


def _from_numpy(npd):
    from ..dtypes import dtype as resolve_dtype

    return resolve_dtype(npd, "obj")


def empty(shape, *, dtype=None, device: Device | None = None) -> Buffer:
    """An array whose values are unspecified (here: zero, as WebGPU zeroes allocations)."""
    return zeros(shape, dtype=dtype, device=device)


def zeros(shape, *, dtype=None, device: Device | None = None) -> Buffer:
    from ..buffer import empty as _empty

    dt = NAMES["float32"] if dtype is None else as_dtype(dtype)
    return _empty(_shape(shape), dt, device=device)


def ones(shape, *, dtype=None, device: Device | None = None) -> Buffer:
    dt = NAMES["float32"] if dtype is None else as_dtype(dtype)
    return full(shape, True if dt.kind == "b" else 1, dtype=dt, device=device)


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, builtins.bool):
        shape = (int(shape),)
    return normalize_shape(shape)


def full(shape, fill_value, *, dtype=None, device: Device | None = None) -> Buffer:
    if not isinstance(fill_value, SCALARS):
        raise ArgumentError(f"fill_value: expected a Python bool, int, float or complex, got "
                            f"{type(fill_value).__name__}")
    dt = NAMES[_default_for(fill_value)] if dtype is None else as_dtype(dtype)
    check_scalar_kind(fill_value, dt, "fill_value")
    shape = _shape(shape)
    if dt.kind == "c":  # one complex value uploaded, then copied to every place on the GPU
        from ._manipulation import broadcast_to

        one = buffer(np.asarray(complex(fill_value), dt.numpy), None, dt, device=device)
        return _copy(broadcast_to(one, shape)) if shape else one
    out = new(shape, dt, device, "full")
    if out.size:
        value = fill_value
        if dt.kind in "iu":
            info = np.iinfo(dt.numpy)
            if not info.min <= int(value) <= info.max:
                raise ArgumentError(f"fill_value: {fill_value!r} does not fit {standard_name(dt)}")
        enqueue("fill", [], out, {"value": value})
    return out


def _like(x, dtype, device, argument="x"):
    if not isinstance(x, Buffer):
        raise ArgumentError(f"{argument}: expected an array, got {type(x).__name__}")
    check_buffer(x, argument)
    return x.shape, x.dtype if dtype is None else as_dtype(dtype), \
        x.device if device is None else device


def empty_like(x, /, *, dtype=None, device: Device | None = None) -> Buffer:
    shape, dt, dev = _like(x, dtype, device)
    return empty(shape, dtype=dt, device=dev)


def zeros_like(x, /, *, dtype=None, device: Device | None = None) -> Buffer:
    shape, dt, dev = _like(x, dtype, device)
    return zeros(shape, dtype=dt, device=dev)


def ones_like(x, /, *, dtype=None, device: Device | None = None) -> Buffer:
    shape, dt, dev = _like(x, dtype, device)
    return ones(shape, dtype=dt, device=dev)


def full_like(x, /, fill_value, *, dtype=None, device: Device | None = None) -> Buffer:
    shape, dt, dev = _like(x, dtype, device)
    return full(shape, fill_value, dtype=dt, device=dev)


def astype(x, dtype, /, *, copy: bool = True, device: Device | None = None) -> Buffer:
    """``x`` converted to ``dtype`` as the standard (and numpy's ``astype``) convert: floats
    to integers truncate toward zero and saturate at the target's range (nan gives 0), wider
    integers keep their low bits, to bool is ``x != 0``. ``copy=False`` returns ``x`` itself
    when nothing changes. For conversions that refuse any change of value, use
    ``Buffer.astype`` (``casting="exact"``)."""
    if not isinstance(x, Buffer):
        raise ArgumentError(f"x: expected an array, got {type(x).__name__}")
    check_buffer(x, "x")
    dt = as_dtype(dtype)
    if device is not None and resolve(device) is not x.device:
        x = x.to(resolve(device))
        copy = False  # the move made a new array
    if dt == x.dtype:
        return _copy(x) if copy else x
    if dt.kind == "c" and x.dtype.kind != "c" and x.dtype != dt.part:
        x = _astype(x, dt.part, casting="unsafe")  # as the parts' real dtype first
    return _astype(x, dt, casting="unsafe")
