"""The standard's ``fft`` extension on the GPU: complex64 and complex128 transforms (float32
and float64 data for the real ones; complex128 where the adapter has shader-f64) by Stockham
passes in workgroup memory (powers of two; products of 2s, 3s and 5s up to a workgroup's
size), Bluestein's algorithm for other lengths, sample frequencies and shifts. Each call is
one submit. complex64 computes its twiddles in the shader (f32 arithmetic: the error of a
result is within 1e-4 of its largest magnitude, measured 1e-7 to 7e-6 up to 2^24 points);
complex128 reads them, and Bluestein's chirps, from tables made in float64 on the host
(WGSL's sines and cosines are float32 only on Vulkan) and kept on the device (tables.py)."""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence

import numpy as np

from .._lazy import bind_and_queue, enqueue
from ..buffer import Buffer
from ..dtypes import DTYPES
from ..errors import ArgumentError, DtypeError, ShapeError
from ..kernels.fft.complex import COMPLEX_AXIS, COMPLEX_AXIS_C128, COMPLEX_BINARY
from ..kernels.fft.fft import (
    FFT,
    FFT_PASS,
    FFT_PASS_C128,
    axis_layout,
    pass_params,
    single_pass_params,
    storage_elements,
    workgroup_elements,
)
from ..kernels.fft.shift import FFT_FREQ, ROLL, check_roll_dtype
from ..kernels.fft.tables import table
from ._dtypes import as_dtype, standard_name
from ._helpers import array, new, normalize_axis

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft",
           "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_C64, _C128 = DTYPES["c64"], DTYPES["c128"]
_F32, _F64 = DTYPES["f32"], DTYPES["f64"]
_NORMS = ("backward", "ortho", "forward")


# -- arguments ---------------------------------------------------------------------------------
def _complex_input(x, where: str) -> Buffer:
    x = array(x, "x")
    if x.dtype.kind != "c":
        raise DtypeError(f"{where}: x is {standard_name(x.dtype)}; expected a complex64 or "
                         f"complex128 array (convert real data with astype(x, complex64))")
    return x


def _real_input(x, where: str) -> Buffer:
    x = array(x, "x")
    if x.dtype not in ("f32", "f64"):
        raise DtypeError(f"{where}: x is {standard_name(x.dtype)}; expected a float32 or "
                         f"float64 array")
    return x


def _complex_of(x: Buffer):
    """The complex dtype x's transform computes in: complex64 for float32 and complex64 data,
    complex128 for float64 and complex128."""
    return _C128 if x.dtype in ("c128", "f64") else _C64


def _check_norm(norm) -> None:
    if norm not in _NORMS:
        raise ArgumentError(f"norm: {norm!r} is not one of {', '.join(map(repr, _NORMS))}")


def _scale(norm: str, n: int, inverse: bool) -> float:
    """The factor of a transform of length ``n``: 1, 1/sqrt(n) or 1/n by ``norm``."""
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 / n if (norm == "forward") != inverse else 1.0


def _length(n, argument: str = "n") -> int:
    if isinstance(n, (builtins.bool, np.bool_)) or not isinstance(n, (int, np.integer)) or \
            n < 1:
        raise ArgumentError(f"{argument}: expected a positive int, got {n!r}")
    return int(n)


def _axis(x: Buffer, axis, where: str) -> int:
    if x.ndim == 0:
        raise ShapeError(f"{where}: x is 0-dimensional; a transform needs an axis")
    return normalize_axis(axis, x.ndim, "axis")


def _size(x: Buffer, ax: int, n) -> int:
    """n, or x's length along ax (which must not be 0: a transform of no points)."""
    if n is not None:
        return _length(n)
    if x.shape[ax] == 0:
        raise ShapeError(f"x: axis {ax} of {x.shape} has no elements to transform; pass n")
    return x.shape[ax]


# -- building blocks: kernels queued in order on the device's open batch ----------------------
class _Work:
    """The kernels of one transform, queued in order on the device's open batch (dispatches of
    one compute pass run in order, each seeing the last one's writes) like any other op: the
    call returns at once. Its temporaries come from the device's memory pool and go back to it
    when the queued work that reads them is done."""

    def __init__(self, device):
        self.device = device
        self.temps: list[Buffer] = []

    def sizes(self, dt) -> tuple[int, int]:
        """fft_pass's values per workgroup and the most that fit its memory, for dt."""
        return (workgroup_elements(self.device, dt.itemsize),
                storage_elements(self.device, dt.itemsize))

    def new(self, shape, dt, label: str, temp: bool = True) -> Buffer:
        b = new(shape, dt, self.device, label)
        if temp:
            self.temps.append(b)
        return b

    def run(self, kernel, inputs, out: Buffer, params: dict) -> Buffer:
        if out.size:
            bind_and_queue(kernel, list(inputs), out, params, "fft")
        return out

    def finish(self, result: Buffer) -> Buffer:
        """Release the temporaries (not ``result``): each stays alive until the queued work
        reading it is done."""
        for t in self.temps:
            if t is not result:
                t.free()
        return result


def _along(w: _Work, x: Buffer, axis: int, n_out: int, mode: str, dt=_C64,
           **params) -> Buffer:
    """complex_axis over ``axis`` of x into a new array whose axis has ``n_out`` elements
    (complex128's real-transform steps read exp(-2πi·t/2M) from the twiddle table of 2M)."""
    o, m, q = axis_layout(x.shape, axis)
    shape = x.shape[:axis] + (n_out,) + x.shape[axis + 1:]
    kernel, inputs = COMPLEX_AXIS, [x]
    if x.dtype == "c128" and mode.startswith(("r2c_post", "c2r_pre")):
        half = m if mode.startswith("r2c") else n_out
        kernel, inputs = COMPLEX_AXIS_C128, [x, table(w.device, "twiddles", 2 * half)]
    return w.run(kernel, inputs, w.new(shape, dt, f"fft-{mode}"),
                 {"mode": mode, "outer": o, "inner": q, **params})


def _resized(w: _Work, x: Buffer, axis: int, n: int, conj: bool = False) -> Buffer:
    """x (complex, or real made complex of its width) with ``axis`` cropped or zero-padded to
    n."""
    dt = _complex_of(x)
    if x.shape[axis] == n and x.dtype == dt and not conj:
        return x
    return _along(w, x, axis, n, "pad_conj" if conj else "pad", dt)


def _transform(w: _Work, x: Buffer, axis: int, sign: int, scale: float) -> Buffer:
    """The unnormalised DFT (sign -1) or inverse DFT (sign 1) of complex x along axis, times
    scale: Stockham passes for a power of two, one Stockham pass of radix-2/3/4/5 steps for a
    product of 2s, 3s and 5s that fits a workgroup, Bluestein's chirp convolution otherwise.
    complex128 reads its twiddles from the table of n (one per length, kept on the device)."""
    n, dt = x.shape[axis], DTYPES[x.dtype]
    if x.size == 0:
        return w.new(x.shape, dt, "fft")
    capacity, storage = w.sizes(dt)
    if n & (n - 1):  # 2s, 3s and 5s in one pass where they fit, else Bluestein's
        plan = single_pass_params(x.shape, axis, sign, scale, capacity, storage)
        if plan is None:
            return _bluestein(w, x, axis, sign, scale)
    elif dt == _C64:  # one op of its passes: one binding, its temporary the shared scratch
        return w.run(FFT, [x], w.new(x.shape, dt, "fft"),
                     {"axis": axis, "sign": sign, "scale": scale})
    else:
        plan = pass_params(x.shape, axis, sign, scale, capacity, storage)
    kernel, extra = (FFT_PASS, []) if dt == _C64 else \
        (FFT_PASS_C128, [table(w.device, "twiddles", n)])
    out = w.new(x.shape, dt, "fft")
    tmp = w.new(x.shape, dt, "fft-tmp") if len(plan) > 1 else None
    src = x
    for i, p in enumerate(plan):  # ping-pong so that the last pass writes out
        dst = out if (len(plan) - 1 - i) % 2 == 0 else tmp
        src = w.run(kernel, [src, *extra], dst, p)
    return out


def _bluestein(w: _Work, x: Buffer, axis: int, sign: int, scale: float) -> Buffer:
    """X[k] = w(k) · Σ_t x[t] w(t) conj(w(k - t)), w(t) = exp(sign·iπt²/n): a convolution,
    computed by power-of-two FFTs of length m >= 2n - 1."""
    n = x.shape[axis]
    m = 1 << (2 * n - 2).bit_length()
    if x.dtype == "c128":
        return _bluestein_tables(w, x, axis, sign, scale, m)
    a = _along(w, x, axis, m, "chirp_in", chirp=n, sign=sign)
    shape = tuple(m if d == axis else 1 for d in range(x.ndim))  # broadcast along the rest
    b = w.run(COMPLEX_AXIS, [x], w.new(shape, _C64, "fft-chirp"),
              {"mode": "chirp_b", "outer": 1, "inner": 1, "chirp": n, "sign": sign})
    fa = _transform(w, a, axis, -1, 1.0)
    fb = _transform(w, b, axis, -1, 1.0)
    prod = w.run(COMPLEX_BINARY, [fa, fb], w.new(fa.shape, _C64, "fft-mul"), {"op": "mul"})
    conv = _transform(w, prod, axis, 1, 1.0 / m)
    return _along(w, conv, axis, n, "chirp_out", chirp=n, sign=sign, scale=scale)


def _bluestein_tables(w: _Work, x: Buffer, axis: int, sign: int, scale: float,
                      m: int) -> Buffer:
    """Bluestein's convolution of complex128 x with its chirps read from float64 tables (the
    chirp w padded to m, and the kernel's spectrum times scale / m): products broadcast
    along the axis, the same power-of-two transforms as complex64's."""
    n = x.shape[axis]
    shape = tuple(m if d == axis else 1 for d in range(x.ndim))
    chirp = _table_view(table(w.device, "chirp", n, m, sign), shape)
    spectrum = _table_view(table(w.device, "chirp_spectrum", n, m, sign, float(scale)),
                             shape)
    padded = _along(w, x, axis, m, "pad", _C128)
    a = w.run(COMPLEX_BINARY, [padded, chirp], w.new(padded.shape, _C128, "fft-chirp"),
              {"op": "mul"})
    fa = _transform(w, a, axis, -1, 1.0)
    prod = w.run(COMPLEX_BINARY, [fa, spectrum], w.new(fa.shape, _C128, "fft-mul"),
                 {"op": "mul"})
    conv = _transform(w, prod, axis, 1, 1.0)
    full = w.run(COMPLEX_BINARY, [conv, chirp], w.new(conv.shape, _C128, "fft-chirp"),
                 {"op": "mul"})
    return _along(w, full, axis, n, "pad", _C128)


def _table_view(t: Buffer, shape) -> Buffer:
    """A 1-D table viewed with ``shape`` (its length along one axis, 1 along the others)."""
    return t if t.shape == tuple(shape) else t.reshape(shape)


def _c2c(w: _Work, x: Buffer, axis: int, n: int, norm: str, inverse: bool) -> Buffer:
    return _transform(w, _resized(w, x, axis, n), axis, 1 if inverse else -1,
                      _scale(norm, n, inverse))


def _r2c(w: _Work, x: Buffer, axis: int, n: int, norm: str, conj: bool = False) -> Buffer:
    """The first n // 2 + 1 bins of the DFT of real x (conjugated: ihfft's). An even length
    is one complex transform of half the length: the even and odd samples as one complex
    signal, taken apart after."""
    if n % 2 == 0:
        z = _along(w, x, axis, n // 2, "pack", _complex_of(x))
        big = _transform(w, z, axis, -1, 1.0)
        return _along(w, big, axis, n // 2 + 1, "r2c_post_conj" if conj else "r2c_post",
                      big.dtype, scale=_scale(norm, n, False))
    full = _transform(w, _resized(w, x, axis, n), axis, -1, _scale(norm, n, False))
    if n // 2 + 1 == n and not conj:
        return full
    return _along(w, full, axis, n // 2 + 1, "pad_conj" if conj else "pad", _complex_of(x))


def _c2r(w: _Work, x: Buffer, axis: int, n: int, norm: str, conj: bool = False) -> Buffer:
    """The real inverse DFT of length n whose first half (Hermitian symmetry) is x's. An even
    length is one complex inverse transform of half the length (see _r2c)."""
    dt = DTYPES[x.dtype]
    if n % 2 == 0:
        z = _along(w, x, axis, n // 2, "c2r_pre_conj" if conj else "c2r_pre", dt)
        half = _transform(w, z, axis, 1, _scale(norm, n, True))
        return _along(w, half, axis, n, "unpack", dt.part)
    full = _along(w, x, axis, n, "hermitian_conj" if conj else "hermitian", dt)
    z = _transform(w, full, axis, 1, _scale(norm, n, True))
    return _along(w, z, axis, n, "real", dt.part)


def _swap(norm: str) -> str:
    return {"backward": "forward", "forward": "backward"}.get(norm, norm)


# -- one-dimensional transforms ----------------------------------------------------------------
def _one(kind: str, where: str, x, n, axis, norm) -> Buffer:
    """A one-dimensional transform: kind c2c / ic2c (complex in), r2c / ihfft (float32 in),
    c2r / hfft (complex in, float32 out)."""
    x = _real_input(x, where) if kind in ("r2c", "ihfft") else _complex_input(x, where)
    _check_norm(norm)
    ax = _axis(x, axis, where)
    w = _Work(x.device)
    if kind in ("c2c", "ic2c"):
        out = _c2c(w, x, ax, _size(x, ax, n), norm, kind == "ic2c")
    elif kind in ("r2c", "ihfft"):
        out = _r2c(w, x, ax, _size(x, ax, n), norm if kind == "r2c" else _swap(norm),
                   conj=kind == "ihfft")
    else:
        out = _c2r(w, x, ax, _c2r_length(x, ax, n), norm if kind == "c2r" else _swap(norm),
                   conj=kind == "hfft")
    return w.finish(out)


def fft(x, /, *, n=None, axis=-1, norm="backward"):
    """The one-dimensional DFT of complex64 x along ``axis`` (cropped or zero-padded to n)."""
    return _one("c2c", "fft", x, n, axis, norm)


def ifft(x, /, *, n=None, axis=-1, norm="backward"):
    """The one-dimensional inverse DFT of complex64 x along ``axis``."""
    return _one("ic2c", "ifft", x, n, axis, norm)


def rfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The non-negative frequency bins (n // 2 + 1) of the DFT of float32 x: complex64."""
    return _one("r2c", "rfft", x, n, axis, norm)


def _c2r_length(x: Buffer, ax: int, n) -> int:
    if n is not None:
        return _length(n)
    m = x.shape[ax]
    if m < 2:
        raise ShapeError(f"n: the default 2·(m - 1) is {2 * (m - 1)} for an axis of {m}; pass "
                         f"a positive n")
    return 2 * (m - 1)


def irfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The inverse of rfft: float32 of length n (default 2·(m - 1)) from complex64 x."""
    return _one("c2r", "irfft", x, n, axis, norm)


def hfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The DFT of a signal with Hermitian symmetry given by its first half x: float32."""
    return _one("hfft", "hfft", x, n, axis, norm)


def ihfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The inverse of hfft: n // 2 + 1 complex64 bins from float32 x."""
    return _one("ihfft", "ihfft", x, n, axis, norm)


# -- n-dimensional transforms ------------------------------------------------------------------
def _axes_and_sizes(x: Buffer, s, axes, where: str) -> tuple[list[int], list[int]]:
    """The transformed axes (in the order given) and their lengths (s, -1 meaning x's)."""
    if x.ndim == 0:
        raise ShapeError(f"{where}: x is 0-dimensional; a transform needs an axis")
    if axes is None:
        axes = tuple(range(x.ndim - len(s), x.ndim)) if s is not None else tuple(range(x.ndim))
    elif isinstance(axes, int) or not isinstance(axes, Sequence):
        raise ArgumentError(f"axes: expected a sequence of ints, got {axes!r}")
    axes = [normalize_axis(a, x.ndim, "axes") for a in axes]
    if s is None:
        sizes = [_size(x, a, None) for a in axes]
    else:
        if isinstance(s, int) or not isinstance(s, Sequence) or len(s) != len(axes):
            raise ArgumentError(f"s: expected a sequence of {len(axes)} ints (one per axis), "
                                f"got {s!r}")
        sizes = [_size(x, a, None) if v == -1 else _length(v, "s") for a, v in zip(axes, s)]
    return axes, sizes


def _c2c_n(x: Buffer, s, axes, norm: str, inverse: bool, where: str) -> Buffer:
    _check_norm(norm)
    axes, sizes = _axes_and_sizes(x, s, axes, where)
    w = _Work(x.device)
    if not axes:  # no axes: a copy
        return w.finish(_along(w, x, 0, x.shape[0], "pad", DTYPES[x.dtype]))
    y = x
    for a, n in zip(axes, sizes):
        y = _c2c(w, y, a, n, norm, inverse)
    return w.finish(y)


def fftn(x, /, *, s=None, axes=None, norm="backward"):
    """The n-dimensional DFT of complex64 x over ``axes`` (default all), sizes ``s``."""
    return _c2c_n(_complex_input(x, "fftn"), s, axes, norm, False, "fftn")


def ifftn(x, /, *, s=None, axes=None, norm="backward"):
    """The n-dimensional inverse DFT of complex64 x."""
    return _c2c_n(_complex_input(x, "ifftn"), s, axes, norm, True, "ifftn")


def rfftn(x, /, *, s=None, axes=None, norm="backward"):
    """The n-dimensional DFT of float32 x: rfft over the last of ``axes``, fft over the rest."""
    x = _real_input(x, "rfftn")
    _check_norm(norm)
    axes, sizes = _axes_and_sizes(x, s, axes, "rfftn")
    if not axes:
        raise ArgumentError("axes: rfftn needs at least one axis")
    w = _Work(x.device)
    y = _r2c(w, x, axes[-1], sizes[-1], norm)
    for a, n in zip(axes[:-1], sizes[:-1]):
        y = _c2c(w, y, a, n, norm, False)
    return w.finish(y)


def irfftn(x, /, *, s=None, axes=None, norm="backward"):
    """The inverse of rfftn: ifft over all but the last of ``axes``, irfft over the last."""
    x = _complex_input(x, "irfftn")
    _check_norm(norm)
    axes, sizes = _axes_and_sizes(x, s, axes, "irfftn")
    if not axes:
        raise ArgumentError("axes: irfftn needs at least one axis")
    last = _c2r_length(x, axes[-1], None if s is None else sizes[-1])
    w = _Work(x.device)
    y = x
    for a, n in zip(axes[:-1], sizes[:-1]):
        y = _c2c(w, y, a, n, norm, True)
    return w.finish(_c2r(w, y, axes[-1], last, norm))


# -- frequencies and shifts --------------------------------------------------------------------
def _freq(n, d, dtype, device, rfft_bins: bool) -> Buffer:
    n = _length(n)
    if isinstance(d, builtins.bool) or not isinstance(d, (int, float)) or not d or \
            not math.isfinite(d):
        raise ArgumentError(f"d: expected a finite non-zero number, got {d!r}")
    dt = _F32 if dtype is None else as_dtype(dtype)
    if dt.kind != "f":
        raise DtypeError(f"dtype: expected a real floating-point dtype, got "
                         f"{standard_name(dt)}")
    out = new((n // 2 + 1 if rfft_bins else n,), dt, device, "fftfreq")
    return enqueue(FFT_FREQ, [], out, {"n": n, "d": float(d), "rfft": rfft_bins})


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of a length-n DFT with sample spacing d (float32 unless
    ``dtype`` says float64, as the standard's 2024.12 revision allows)."""
    return _freq(n, d, dtype, device, False)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The n // 2 + 1 non-negative sample frequencies of rfft (float32 unless ``dtype``)."""
    return _freq(n, d, dtype, device, True)


def _shift(x, axes, where: str, inverse: bool) -> Buffer:
    x = array(x, "x")
    check_roll_dtype(DTYPES[x.dtype], where)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, int):
        axes = (axes,)
    elif not isinstance(axes, Sequence):
        raise ArgumentError(f"axes: expected an int or a sequence of ints, got {axes!r}")
    shifts = [0] * x.ndim
    for a in axes:
        a = normalize_axis(a, x.ndim, "axes")
        n = x.shape[a]
        shifts[a] += -(n // 2) if inverse else n // 2
    out = new(x.shape, DTYPES[x.dtype], x.device, where)
    if out.size == 0:
        return out
    return enqueue(ROLL, [x], out, {"shifts": tuple(shifts)})


def fftshift(x, /, *, axes=None):
    """x with the zero-frequency bin moved to the centre of each of ``axes`` (default all)."""
    return _shift(x, axes, "fftshift", False)


def ifftshift(x, /, *, axes=None):
    """The inverse of fftshift."""
    return _shift(x, axes, "ifftshift", True)
