"""The standard's creation functions whose values come from their index (arange, linspace,
eye, tril, triu, meshgrid; computed by GPU kernels) and from_dlpack."""

from __future__ import annotations

import builtins
import math

import numpy as np

from .._lazy import enqueue
from ..buffer import Buffer
from ..errors import ArgumentError, DtypeError, ShapeError
from ..kernels.elementwise.iota import EYE, IOTA, TRIL, TRIU
from ..runtime import Device
from ._creation import asarray
from ._dtypes import NAMES, as_dtype, standard_name
from ._helpers import array, new, same_device
from ._manipulation import broadcast_to, permute_dims, reshape

__all__ = ["arange", "eye", "from_dlpack", "linspace", "meshgrid", "tril", "triu"]


def _number(value, argument: str):
    if isinstance(value, (builtins.bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise ArgumentError(f"{argument}: expected an int or a float, got {value!r}")
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        raise ArgumentError(f"{argument}: {value!r} is not finite")
    return int(value) if isinstance(value, (int, np.integer)) else float(value)


def _int(value, argument: str, low: int | None = 0) -> int:
    if isinstance(value, (builtins.bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"{argument}: expected an int, got {value!r}")
    if low is not None and value < low:
        raise ArgumentError(f"{argument}: {value} is below {low}")
    return int(value)


def _wrapped(value: int, dt) -> int:
    """An integer as the dtype's wrapping arithmetic sees it (two's complement modulo)."""
    bits = 8 * dt.itemsize
    value %= 1 << bits
    return value - (1 << bits) if dt.kind == "i" and value >= 1 << (bits - 1) else value


def _iota(n: int, dt, device, start, step, last=None, label: str = "arange") -> Buffer:
    if n >= 2**32:
        raise ShapeError(f"{label}: {n} elements; at most 2**32 - 1")
    out = new((n,), dt, device, label)
    if n:
        enqueue(IOTA, [], out, {"start": start, "step": step,
                                   "last": start if last is None else last,
                                   "endpoint": last is not None})
    return out


def arange(start, /, stop=None, step=1, *, dtype=None, device: Device | None = None
           ) -> Buffer:
    """start, start + step, ... before stop: ceil((stop - start) / step) values, computed on
    the GPU in the result's dtype (floats as numpy: start + i·(the first step as stored))."""
    start, step = _number(start, "start"), _number(step, "step")
    start, stop = (0, start) if stop is None else (start, _number(stop, "stop"))
    if step == 0:
        raise ArgumentError("step: 0 makes no progress; expected a non-zero number")
    ints = all(isinstance(v, int) for v in (start, stop, step))
    if dtype is None:
        dt = NAMES["int32" if ints else "float32"]
    else:
        dt = as_dtype(dtype)
    if dt.kind not in "fiu":
        raise DtypeError(f"dtype: arange makes real numbers, not {standard_name(dt)}")
    n = max(0, -((start - stop) // step) if ints else math.ceil((stop - start) / step))
    if dt.kind == "f":
        first = np.asarray(start, dt.numpy)
        delta = np.asarray(np.asarray(start + step, dt.numpy) - first, dt.numpy) if n > 1 \
            else np.asarray(step, dt.numpy)
        return _iota(n, dt, device, float(first), float(delta))
    if not ints:
        raise DtypeError(f"dtype: arange of floats (start={start!r}, stop={stop!r}, step="
                         f"{step!r}) into {standard_name(dt)}; give integers or a float dtype")
    info = np.iinfo(dt.numpy)
    if n and not (info.min <= start <= info.max and
                  info.min <= start + (n - 1) * step <= info.max):
        raise ArgumentError(f"start, stop, step: arange({start}, {stop}, {step}) has values "
                            f"outside {standard_name(dt)} ({info.min}..{info.max})")
    return _iota(n, dt, device, start, _wrapped(step, dt))


def linspace(start, stop, /, num, *, dtype=None, device: Device | None = None,
             endpoint: builtins.bool = True) -> Buffer:
    """num evenly spaced values from start to stop (included with endpoint), computed on the
    GPU as start + i·step in the dtype, the last one stop exactly."""
    start, stop = _number(start, "start"), _number(stop, "stop")
    num = _int(num, "num")
    if not isinstance(endpoint, (builtins.bool, np.bool_)):
        raise ArgumentError(f"endpoint: expected True or False, got {endpoint!r}")
    dt = NAMES["float32"] if dtype is None else as_dtype(dtype)
    if dt.kind != "f":
        raise DtypeError(f"dtype: linspace takes a real floating dtype, got "
                         f"{standard_name(dt)}")
    div = num - 1 if endpoint else num
    step = (stop - start) / div if div > 0 else 0.0
    cast = dt.numpy.type
    last = float(cast(stop)) if endpoint and num > 1 else None
    return _iota(num, dt, device, float(cast(start)), float(cast(step)), last, "linspace")


def eye(n_rows, n_cols=None, /, *, k: int = 0, dtype=None, device: Device | None = None
        ) -> Buffer:
    rows = _int(n_rows, "n_rows")
    cols = rows if n_cols is None else _int(n_cols, "n_cols")
    k = _int(k, "k", None)
    dt = NAMES["float32"] if dtype is None else as_dtype(dtype)
    out = new((rows, cols), dt, device, "eye")
    if out.size:
        enqueue(EYE, [], out, {"k": max(-rows, min(cols, k))})
    return out


def _triangle(kernel, x, k) -> Buffer:
    x = array(x, "x")
    if x.ndim < 2:
        raise ShapeError(f"x: {kernel.name} takes an array of at least two dimensions "
                         f"(matrices), got shape {x.shape}")
    k = _int(k, "k", None)
    if x._base is not None:  # the kernel reads x from its first element
        x = permute_dims(x, tuple(range(x.ndim)))
    out = new(x.shape, x._dt, x.device, kernel.name)
    if out.size:
        enqueue(kernel, [x], out, {"k": max(-x.shape[-2], min(x.shape[-1], k))})
    return out


def tril(x, /, *, k: int = 0) -> Buffer:
    """x on and below diagonal k of each matrix (its last two axes), zero above."""
    return _triangle(TRIL, x, k)


def triu(x, /, *, k: int = 0) -> Buffer:
    """x on and above diagonal k of each matrix (its last two axes), zero below."""
    return _triangle(TRIU, x, k)


def meshgrid(*arrays, indexing: str = "xy") -> list[Buffer]:
    """Coordinate arrays from 1-D arrays (of one dtype): "xy" indexing swaps the first two
    output axes (Cartesian), "ij" keeps them (matrix)."""
    if indexing not in ("xy", "ij"):
        raise ArgumentError(f"indexing: expected 'xy' or 'ij', got {indexing!r}")
    xs = [array(a, f"arrays[{i}]") for i, a in enumerate(arrays)]
    if not xs:
        return []
    same_device("meshgrid", *xs)
    for i, a in enumerate(xs):
        if a.ndim != 1:
            raise ShapeError(f"arrays[{i}]: meshgrid takes 1-D arrays, got shape {a.shape}")
        if a._dt != xs[0]._dt:
            raise DtypeError(f"arrays[{i}]: {standard_name(a._dt)}, and arrays[0] is "
                             f"{standard_name(xs[0]._dt)}; meshgrid takes arrays of one dtype")
    shape = [a.size for a in xs]
    axes = list(range(len(xs)))
    if indexing == "xy" and len(xs) > 1:
        shape[0], shape[1] = shape[1], shape[0]
        axes[0], axes[1] = 1, 0
    out = []
    for a, d in zip(xs, axes):
        view = [1] * len(xs)
        view[d] = a.size
        out.append(broadcast_to(reshape(a, tuple(view)), tuple(shape)))
    return out


def from_dlpack(x, /, *, device: Device | None = None, copy: builtins.bool | None = None
                ) -> Buffer:
    """An array from an object with ``__dlpack__``: one of this namespace's arrays (as
    asarray takes it), or host memory (numpy and others on the CPU), copied to the GPU;
    ``copy=False`` refuses that copy."""
    if isinstance(x, Buffer):
        return asarray(x, device=device, copy=copy)
    if not hasattr(x, "__dlpack__"):
        raise ArgumentError(f"x: expected an object with __dlpack__, got {type(x).__name__}")
    if copy is False:
        raise ArgumentError(f"copy: False, but a {type(x).__name__} in host memory must be "
                            f"copied to the GPU")
    try:
        host = np.from_dlpack(x)
    except (TypeError, BufferError, RuntimeError) as e:
        raise ArgumentError(f"x: its DLPack capsule cannot be read on the host ({e})") from None
    return asarray(host, device=device)
