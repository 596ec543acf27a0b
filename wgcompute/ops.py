"""Array operations built from kernels: astype (a conversion checked on the GPU, or defined
by an explicit casting), and the numpy-style operators, views and indexing of Buffer."""

from __future__ import annotations

import numpy as np

from . import transfers
from .buffer import Buffer, check_buffer, empty
from .commands import run_kernel
from .dtypes import DTYPES
from .dtypes import dtype as resolve_dtype
from .errors import ArgumentError, DtypeError, ShapeError
from .kernels.cast import ASTYPE_CHECK, check_options, exact_by_type
from .kernels.layout import contiguous_strides
from .pipeline import Pipeline

_NONE = 0xFFFFFFFF


def astype(x: Buffer, dtype, *, rounding: str | None = None, casting: str = "exact",
           out: Buffer | None = None) -> Buffer:
    """A new buffer (or ``out``) holding ``x`` converted to ``dtype``.

    casting="exact" (the default): every value must survive the conversion. Integers must
    fit, floats going to integers must be whole (or ``rounding`` given: 'trunc', 'round'
    (half to even), 'floor', 'ceil') and in range, integers going to floats must be
    representable, floats may narrow (f64 to f32 rounds) but not overflow to inf. Pairs that
    hold every value of the source (u8 to anything, s32/u32 to s64 or f64, a float to a wider
    float, the same dtype) need no check; the others are checked on the GPU, and astype
    waits for that check and reads its one-word result back: a DtypeError names the first
    value that would change.

    casting="unsafe": no check and nothing read back, numpy's unsafe conversion made
    definite: integers wrap (keep their low bits), floats round to nearest and overflow to
    ±inf, floats go to integers by ``rounding`` (default 'trunc'), saturating at the target's
    range, nan to 0."""
    check_buffer(x, "x")
    target = resolve_dtype(dtype, "dtype")
    src = DTYPES[x.dtype].name
    where = f"astype({target.name!r})"
    check_options(src, target.name, rounding, casting, where)
    if out is None:
        out = empty(x.shape, target, label="astype-out", device=x.device)
    else:
        check_buffer(out, "out")
        if out.dtype != target.name:
            raise DtypeError(f"{where}: out is {out.dtype}, expected {target.name}")
        if out.shape != x.shape:
            raise ShapeError(f"{where}: out is {out.shape}, expected {x.shape} (x's shape)")
        if out is x:
            raise ArgumentError(f"{where}: out is x; converting in place is not supported")
    params = {"rounding": rounding, "casting": "unsafe"}
    needs_check = casting == "exact" and not (
        exact_by_type(src, target.name) and rounding is None)
    if not needs_check or x.size == 0:
        return run_kernel("astype", [x], out, params)
    flag = empty((1,), "u32", label="astype-check", device=x.device)
    try:
        p = Pipeline("astype", device=x.device)
        p.add(kernel="fill", inputs=[], output=flag, params={"value": _NONE})
        p.add(kernel=ASTYPE_CHECK, inputs=[x], output=flag,
              params={"target": target.name, "rounding": rounding})
        p.add(kernel="astype", inputs=[x], output=out, params=params)
        p.run()
        bad = int(flag.to_numpy()[0])  # the documented read: one word
        p.free()
    finally:
        flag.free()
    if bad != _NONE:
        value = read_element(x, bad)
        raise DtypeError(_refusal(where, value, bad, src, target.name, rounding))
    return out


def read_element(buf: Buffer, index: int):
    """Element ``index`` (flat) of ``buf`` as a numpy scalar: one small read, blocking."""
    dt = DTYPES[buf.dtype]
    at = index * dt.itemsize
    alloc = max(16, -(-buf.nbytes // 16) * 16)
    start = min(at // 4 * 4, alloc - 16)  # copies move whole 4-byte words
    buf._pin()
    try:
        raw = transfers.download(buf.device, buf._gpu, start, 16)
    finally:
        buf._release()
    return raw[at - start:at - start + dt.itemsize].view(dt.numpy)[0]


def _refusal(where: str, value, index: int, src: str, dst: str, rounding) -> str:
    v = value.item()
    shown = f"{v!r} (element {index} of x)"
    s, d = DTYPES[src], DTYPES[dst]
    if s.is_float and d.is_float:
        return (f"{where}: {shown} is out of range for {dst} (max "
                f"{float(np.finfo(d.numpy).max):g}); pass casting='unsafe' to get inf")
    if s.is_float and not np.isfinite(v):
        return (f"{where}: {shown} has no {dst} value; pass casting='unsafe' (nan becomes "
                f"0, ±inf the nearest end of {dst}'s range)")
    info = np.iinfo(d.numpy) if not d.is_float else None
    if s.is_float and rounding is None and v != np.trunc(v):
        return (f"{where}: {shown} is not an integer; pass rounding='trunc'|'round'|'floor'"
                f"|'ceil'")
    if info is not None:
        return (f"{where}: {shown} is out of range for {dst} ({info.min}..{info.max}); pass "
                f"casting='unsafe' to " + ("saturate" if s.is_float else "wrap around as "
                                           "numpy does"))
    return (f"{where}: {shown} cannot be stored exactly as {dst}; pass casting='unsafe' to "
            f"round it to the nearest {dst}")


def transpose(a: Buffer, out: Buffer | None = None, *, axes=None) -> Buffer:
    """numpy's transpose into a new buffer (or ``out``): see wgc.transpose."""
    check_buffer(a, "a")
    perm = normalize_permutation(axes, a.ndim, "transpose")
    shape = tuple(a.shape[d] for d in perm)
    if out is None:
        out = empty(shape, a.dtype, label="transpose-out", device=a.device)
    if a.ndim == 2 and perm == (1, 0) and a.dtype != "u8":
        return run_kernel("transpose", [a], out)
    check_buffer(out, "out")
    if out.shape != shape:
        raise ShapeError(f"transpose: out is {out.shape}, expected {shape} for a {a.shape} "
                         f"with axes {perm}")
    strides = contiguous_strides(a.shape)
    return run_kernel("strided_copy", [a], out,
                      {"strides": tuple(strides[d] for d in perm), "offset": 0})


def normalize_permutation(axes, ndim: int, where: str) -> tuple[int, ...]:
    """numpy's ``axes`` of a transpose: None (reversed) or a permutation of range(ndim)."""
    if axes is None:
        return tuple(range(ndim - 1, -1, -1))
    try:
        perm = tuple(axes)
        ok = all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in perm)
    except TypeError:
        ok = False
    if not ok:
        raise ArgumentError(f"{where}: axes must be a tuple of ints, got {axes!r}")
    norm = tuple(int(d) % ndim if -ndim <= d < ndim else -1 for d in perm) if ndim else perm
    if sorted(norm) != list(range(ndim)):
        raise ArgumentError(f"{where}: axes {perm} is not a permutation of the {ndim} axes "
                            f"of a")
    return norm
