"""Array operations built from kernels: astype (a conversion checked on the GPU, or defined
by an explicit casting), and the numpy-style operators, views and indexing of Buffer."""

from __future__ import annotations

import sys

import numpy as np

from . import transfers
from .buffer import Buffer, check_buffer, empty, install_array_ops, result_buffer
from .commands import run_kernel
from .dtypes import DTYPES
from .dtypes import dtype as resolve_dtype
from .errors import ArgumentError, DtypeError, ShapeError
from .kernels.core.layout import contiguous_strides
from .kernels.core.registry import get as kernel
from .kernels.elementwise.arrayops import COMPARISONS, array_op
from .kernels.elementwise.cast import ASTYPE_CHECK, check_options, exact_by_type
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
        out = result_buffer(shape, DTYPES[a.dtype], a.device, label="transpose-out")
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


# -- operators ---------------------------------------------------------------------------------
# Buffer's operators run one kernel each and wait for it, as wgc.add does; their results come
# from the device's memory pool (result_buffer), so a loop of ``c = a + b`` reuses memory and
# the kernel runs bound to it. Python scalars are converted exactly to the buffer's dtype
# (a dtype never changes behind the user's back); numpy arrays are refused (no hidden upload
# or download).

_BUILTIN = {"add": "elementwise_add", "sub": "elementwise_sub", "mul": "elementwise_multiply",
            "div": "elementwise_divide"}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
           "pow": "**", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
           "matmul": "@"}


def _is_scalar(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating, np.bool_)) and not (
        isinstance(v, np.ndarray))


def _scalar(value, dt, where: str):
    """``value`` as a number of dtype ``dt``, exactly, or a DtypeError saying what to do."""
    from .dtypes import convert_exact

    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    try:
        return convert_exact(np.atleast_1d(np.asarray(value)), dt, where)[0].item()
    except DtypeError:
        kind = "integer" if not dt.is_float else "value"
        raise DtypeError(f"{where}: {value!r} is not an {dt.name} {kind}; a buffer keeps its "
                         f"dtype (convert it first, e.g. buf.astype('f32'))") from None


def _other(value, where: str):
    if isinstance(value, np.ndarray) or hasattr(value, "__array_interface__"):
        raise ArgumentError(f"{where}: the other operand is a numpy array; wgcompute does not "
                            f"move data behind an operator: make it a buffer first "
                            f"(wgc.from_numpy)")


def _check_pair(where: str, op: str, x: Buffer, y: Buffer, div_hint: str, pow_hint: str):
    """What an operator between two buffers refuses: two dtypes, true division of integers,
    f64 to an f64 power (no 64-bit pow on the GPU)."""
    if x.dtype != y.dtype:
        raise DtypeError(f"{where}: {x.dtype} and {y.dtype} buffers; wgcompute does not "
                         f"convert implicitly: make them one dtype with .astype()")
    dt = DTYPES[x.dtype]
    if op == "div" and not dt.is_float:
        raise DtypeError(f"{where}: true division of {dt.name} buffers gives floats; "
                         f"{div_hint}")
    if op == "pow" and dt.name == "f64":
        raise DtypeError(f"{where}: f64 to the power of an f64 buffer; the GPU has no 64-bit "
                         f"pow ({pow_hint})")


def binary(op: str, a: Buffer, b, reflected: bool = False) -> Buffer:
    """``a op b`` (``b op a`` when ``reflected``) for a Buffer ``a`` and a Buffer or scalar
    ``b``; NotImplemented for other operand types, as Python's protocol expects."""
    where = f"operator {_SYMBOL[op]}"
    check_buffer(a, where)
    dt = DTYPES[a.dtype]
    if isinstance(b, Buffer):
        check_buffer(b, where)
        x, y = (b, a) if reflected else (a, b)
        _check_pair(where, op, x, y, "convert first (.astype('f32')), or use // (floor "
                    "division)", "f64 takes integer scalar exponents, f32 any")
        if op in _BUILTIN:  # same shapes (the common case) need no broadcasting rules
            k = kernel(_BUILTIN[op])
            if x.shape == y.shape:
                return run_kernel(k, [x, y], result_buffer(x.shape, dt, a.device, _SYMBOL[op]))
        else:
            k = array_op(op, 2)
        shape, out_dt = k.output_spec([x, y], {})
        out = result_buffer(shape, DTYPES[out_dt], a.device, label=_SYMBOL[op])
        return run_kernel(k, [x, y], out)
    if not _is_scalar(b):
        _other(b, where)
        return NotImplemented
    if op == "div" and not dt.is_float:
        raise DtypeError(f"{where}: true division of a {dt.name} buffer gives floats; "
                         f"convert first (.astype('f32')), or use // (floor division)")
    if op == "pow" and dt.name == "f64" and (reflected or float(b) != int(b)):
        raise DtypeError(f"{where}: f64 to a non-integer power; the GPU has no 64-bit pow "
                         f"(f64 takes integer scalar exponents, f32 any)")
    if op == "pow" and not dt.is_float and not reflected and b < 0:
        raise DtypeError(f"{where}: a {dt.name} buffer to the negative power {b!r}; integers "
                         f"to negative powers are not integers (convert to a float dtype)")
    s = _scalar(b, dt, where)
    out_dt = DTYPES["u8"] if op in COMPARISONS else dt
    out = result_buffer(a.shape, out_dt, a.device, label=_SYMBOL[op])
    if op == "mul":
        return run_kernel("scale", [a], out, {"scalar": s})
    if op == "add" and reflected:
        reflected = False  # s + a is a + s
    if reflected and op in COMPARISONS:  # s < a is a > s
        op = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}.get(op, op)
        reflected = False
    return run_kernel(array_op(op, 1, scalar=True, reflected=reflected), [a], out,
                      {"scalar": s})


def unary(op: str, a: Buffer) -> Buffer:

    check_buffer(a, f"operator {'-' if op == 'neg' else op}")
    out = result_buffer(a.shape, DTYPES[a.dtype], a.device, label=op)
    return run_kernel(array_op(op, 1), [a], out)


def matmul_op(a: Buffer, b, reflected: bool = False) -> Buffer:
    if not isinstance(b, Buffer):
        _other(b, "operator @")
        return NotImplemented
    from .kernels.matmul.matmul import matmul_shape

    x, y = (b, a) if reflected else (a, b)
    check_buffer(x, "operator @")
    check_buffer(y, "operator @")
    if x.dtype != y.dtype:
        raise DtypeError(f"operator @: {x.dtype} and {y.dtype} buffers; make them one dtype "
                         f"with .astype()")
    shape = matmul_shape(x.shape, y.shape).out
    out = result_buffer(shape, DTYPES[x.dtype], x.device, label="@")
    return run_kernel("matmul", [x, y], out)


def reduction(name: str, x: Buffer, axis, keepdims: bool, out: Buffer | None
              ) -> Buffer:
    """A Buffer method's reduction: numpy's default axis (None: everything)."""

    check_buffer(x, "self")
    k = kernel(name)
    params = {"axis": axis, "keepdims": keepdims}
    if out is None:
        shape, dt = k.output_spec([x], params)
        out = result_buffer(shape, DTYPES[dt], x.device, label=name)
    return run_kernel(k, [x], out, params)


# -- shapes, views, indexing ---------------------------------------------------------------------
def reshape(x: Buffer, shape) -> Buffer:
    """numpy's reshape: one -1 may stand for the rest; always a view (every buffer and view is
    contiguous in memory, so no copy is ever needed)."""
    from .buffer import BufferView

    check_buffer(x, "self")
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    dims = []
    unknown = None
    for i, d in enumerate(shape):
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < -1:
            raise ShapeError(f"reshape: shape {shape!r}: expected ints (one of them may be "
                             f"-1)")
        if d == -1:
            if unknown is not None:
                raise ShapeError(f"reshape: shape {shape!r}: only one dimension can be -1")
            unknown = i
        dims.append(int(d))
    if unknown is not None:
        rest = int(np.prod([d for i, d in enumerate(dims) if i != unknown]))
        if rest == 0 or x.size % rest:
            raise ShapeError(f"reshape: shape {shape!r} does not fit {x.shape} ({x.size} "
                             f"elements)")
        dims[unknown] = x.size // rest
    dims = tuple(dims)
    if int(np.prod(dims)) != x.size:
        raise ShapeError(f"reshape: shape {dims} holds {int(np.prod(dims))} elements and "
                         f"{x.shape} holds {x.size}")
    return BufferView(x, dims, 0)


def view(x: Buffer, dtype=None) -> Buffer:
    """The same memory as another dtype (numpy's view): same item size, or the last
    dimension scaled by the item sizes' ratio. No copy."""
    from .buffer import BufferView

    check_buffer(x, "self")
    if dtype is None:
        return BufferView(x, x.shape, 0)
    dt = resolve_dtype(dtype, "dtype")
    old = DTYPES[x.dtype].itemsize
    if dt.itemsize == old:
        return BufferView(x, x.shape, 0, dt)
    if x.ndim == 0 or (x.shape[-1] * old) % dt.itemsize:
        raise ShapeError(f"view: the last dimension of {x.shape} {x.dtype} is not a whole "
                         f"number of {dt.name} items")
    if x._offset % dt.itemsize:
        raise ShapeError(f"view: this view starts at byte {x._offset}, not on a {dt.name} "
                         f"item")
    shape = x.shape[:-1] + (x.shape[-1] * old // dt.itemsize,)
    return BufferView(x, shape, 0, dt)


_ALLOWED_KEYS = (int, np.integer, slice, type(Ellipsis), type(None))


def getitem(x: Buffer, key) -> Buffer:
    """numpy's basic indexing (ints, slices, ..., None): a view when the result is contiguous
    in memory, else a copy made on the GPU. Advanced indexing (index arrays, masks) is
    refused."""
    from .buffer import BufferView, result_buffer
    from .errors import IndexingError

    check_buffer(x, "self")
    items = key if isinstance(key, tuple) else (key,)
    for k in items:
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, _ALLOWED_KEYS):
            raise IndexingError(
                f"index {k!r} of type {type(k).__name__}: buffers take ints, slices, ... and "
                f"None (numpy's basic indexing); index arrays and masks are not supported")
    item = DTYPES[x.dtype].itemsize
    # numpy computes the view's layout from a stand-in with these strides (one byte per
    # element); basic indexing never touches the stand-in's memory
    stand_in = np.lib.stride_tricks.as_strided(
        np.zeros(1, np.uint8), shape=x.shape, strides=contiguous_strides(x.shape),
        writeable=False)
    if not any(k is Ellipsis for k in items):
        items = items + (Ellipsis,)  # an array even when every axis takes an int
    try:
        v = stand_in[items]
    except IndexError as e:
        raise IndexingError(f"index {key!r} for shape {x.shape}: {e}") from None
    offset = v.__array_interface__["data"][0] - stand_in.__array_interface__["data"][0]
    shape = tuple(v.shape)
    strides = tuple(v.strides)
    contiguous = all(s == c for s, c, n in zip(strides, contiguous_strides(shape), shape)
                     if n > 1)
    if contiguous or v.size == 0:
        return BufferView(x, shape, offset * item)
    out = result_buffer(shape, DTYPES[x.dtype], x.device, label="slice")
    root = x._base if x._base is not None else x
    base_elems = x._offset // item if x._base is not None else 0
    alias = BufferView(root, (root.nbytes // item,), 0, DTYPES[x.dtype])
    return run_kernel("strided_copy", [alias], out,
                      {"strides": strides, "offset": base_elems + offset})


def copy(x: Buffer) -> Buffer:
    """A new buffer with ``x``'s elements, made on the GPU."""
    from .buffer import BufferView, result_buffer

    check_buffer(x, "self")
    out = result_buffer(x.shape, DTYPES[x.dtype], x.device, label="copy")
    if x.size == 0:
        return out
    item = DTYPES[x.dtype].itemsize
    root = x._base if x._base is not None else x
    alias = BufferView(root, (root.nbytes // item,), 0, DTYPES[x.dtype])
    return run_kernel("strided_copy", [alias], out,
                      {"strides": contiguous_strides(x.shape),
                       "offset": x._offset // item})


def item(x: Buffer):
    """The one element of ``x`` as a Python number: a read (blocks until ready)."""
    check_buffer(x, "self")
    if x.size != 1:
        raise ShapeError(f"item: {x.shape} holds {x.size} elements; only a buffer of one "
                         f"element converts to a Python number")
    return x.to_numpy().reshape(()).item()


def inplace(op: str, a: Buffer, b) -> Buffer:
    """``a op= b``: the kernel writes ``a`` itself (numpy's in-place operators), so every
    reference to ``a`` sees the result. A view is refused: its memory is its base's."""

    where = f"operator {_SYMBOL[op]}="
    check_buffer(a, where)
    if a._base is not None:
        raise ArgumentError(f"{where}: {a!r} is a view; an in-place operator would write its "
                            f"base's memory, which kernels do not do (compute into a buffer "
                            f"of its own)")
    dt = DTYPES[a.dtype]
    if isinstance(b, Buffer):
        check_buffer(b, where)
        _check_pair(where, op, a, b, "use //= (floor division)",
                    "f64 takes integer scalar exponents")
        k = kernel(_BUILTIN[op]) if op in _BUILTIN else array_op(op, 2)
        return run_kernel(k, [a, b], a)
    if not _is_scalar(b):
        _other(b, where)
        return NotImplemented
    if op == "div" and not dt.is_float:
        raise DtypeError(f"{where}: true division of a {dt.name} buffer gives floats; use //=")
    if op == "pow" and dt.name == "f64" and float(b) != int(b):
        raise DtypeError(f"{where}: f64 to a non-integer power; the GPU has no 64-bit pow")
    if op == "pow" and not dt.is_float and b < 0:
        raise DtypeError(f"{where}: a {dt.name} buffer to the negative power {b!r}")
    s = _scalar(b, dt, where)
    if op == "mul":
        return run_kernel("scale", [a], a, {"scalar": s})
    return run_kernel(array_op(op, 1, scalar=True), [a], a, {"scalar": s})


# Buffer's operators, views, indexing, reductions and astype call this module (buffer.py sits
# below it, so it cannot import it)
install_array_ops(sys.modules[__name__])
