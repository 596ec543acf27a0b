"""Array operations built from kernels: astype (a conversion checked on the GPU, or defined
by an explicit casting), and the numpy-style operators, views and indexing of Buffer."""

from __future__ import annotations

import math
import sys

import numpy as np

from . import transfers
from ._args import normalize_permutation
from ._fusion_quick import learn, quick
from ._gather import array_getitem
from ._lazy import enqueue
from ._setitem import basic_layout, setitem  # noqa: F401 - Buffer.__setitem__ calls it
from .buffer import Buffer, check_buffer, empty, install_array_ops, result_buffer
from .dtypes import DTYPES, complex_holds
from .dtypes import dtype as resolve_dtype
from .errors import ArgumentError, DtypeError, ShapeError
from .kernels.core.layout import contiguous_strides
from .kernels.core.registry import get as kernel
from .kernels.elementwise.arrayops import ARRAY_OPS, COMPARISONS, array_op
from .kernels.elementwise.cast import ASTYPE_CHECK, check_options, exact_by_type
from .kernels.matmul.matmul import matmul_shape
from .pipeline import Pipeline

_NONE = 0xFFFFFFFF


def astype(x: Buffer, dtype, *, rounding: str | None = None, casting: str = "exact",
           out: Buffer | None = None) -> Buffer:
    """A new buffer (or ``out``) holding ``x`` converted to ``dtype``.

    casting="exact" (the default): every value must survive the conversion. Integers must
    fit, floats going to integers must be whole (or ``rounding`` given: 'trunc', 'round'
    (half to even), 'floor', 'ceil') and in range, integers going to floats must be
    representable, floats may narrow (f64 to f32 rounds) but not overflow to inf. Pairs that
    hold every value of the source (bool to anything, an integer to a wider integer that holds
    its range (u8 to s16, s32 to s64), integers to floats whose significand holds them (u8 to
    f16, s32 to f64), a float to a wider float, the same dtype) and conversions to bool
    (x != 0, nan giving True) need no check; the others are checked on the GPU, and astype
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
    if target.kind == "c" or DTYPES[src].kind == "c":
        return _astype_complex(x, target, where, rounding, casting, out)
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
        return enqueue("astype", [x], out, params)
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


def _astype_complex(x: Buffer, target, where: str, rounding, casting: str, out):
    """astype to or from c64 and c128: a real x becomes (x, 0); complex to real is refused."""
    from .kernels.fft.complex import COMPLEX, COMPLEX_AXIS, REAL_INPUTS

    src = DTYPES[x.dtype]
    if target.kind != "c":
        raise DtypeError(f"{where}: {src.name} to {target.name} would drop the imaginary "
                         f"part; take the real or imaginary part first")
    if rounding is not None:
        raise ArgumentError(f"{where}: rounding applies to float -> integer conversions")
    if src.name not in REAL_INPUTS + COMPLEX:
        raise DtypeError(f"{where}: {src.name} to {target.name} is not available; convert to "
                         f"{target.part.name} first")
    if casting == "exact" and not complex_holds(src, target):
        raise DtypeError(f"{where}: {src.name} to {target.name} is not exact (its parts are "
                         f"{target.part.name}); pass casting='unsafe' to round")
    if out is None:
        out = empty(x.shape, target, label="astype-out", device=x.device)
    elif out.dtype != target.name or out.shape != x.shape or out is x:
        raise ArgumentError(f"{where}: out is {out.shape} {out.dtype}; expected a new "
                            f"{x.shape} {target.name} buffer")
    return enqueue(COMPLEX_AXIS, [x], out, {"mode": "pad"}) if x.size else out


def _strided_copy(a: Buffer, out: Buffer, params: dict) -> Buffer:
    """strided_copy; c64 moves through roll (whole 8-byte elements, no shift): the elementwise
    copy has no complex type."""
    if DTYPES[out.dtype].kind == "c":
        from .kernels.fft.shift import ROLL

        return enqueue(ROLL, [a], out, {"shifts": (0,) * out.ndim,
                                           "strides": tuple(params["strides"]),
                                           "offset": params["offset"]})
    return enqueue("strided_copy", [a], out, params)


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
    perm = (1, 0) if axes is None and len(a._shape) == 2 else \
        normalize_permutation(axes, a.ndim, "transpose")  # ((1, 0): x.T, taken directly)
    shape = tuple([a._shape[d] for d in perm])
    if out is None:
        out = result_buffer(shape, a._dt, a._dev, label="transpose-out")
    if a.ndim == 2 and perm == (1, 0) and not a._dt.packed and a._dt.kind != "c":
        return enqueue("transpose", [a], out)
    check_buffer(out, "out")
    if out.shape != shape:
        raise ShapeError(f"transpose: out is {out.shape}, expected {shape} for a {a.shape} "
                         f"with axes {perm}")
    strides = contiguous_strides(a.shape)
    return _strided_copy(a, out, {"strides": tuple(strides[d] for d in perm), "offset": 0})


# -- operators ---------------------------------------------------------------------------------
# Buffer's operators queue one kernel each on their device's batch (wgcompute._lazy) and
# return (a signature seen before takes _fusion_quick's short path); a read runs what is
# queued. Results come from the device's memory pool. Python scalars are converted exactly to
# the buffer's dtype; numpy arrays are refused (no hidden upload or download).

_BUILTIN = {"add": "elementwise_add", "sub": "elementwise_sub", "mul": "elementwise_multiply",
            "div": "elementwise_divide"}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
           "pow": "**", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
           "matmul": "@", "and": "&", "or": "|", "xor": "^", "invert": "~", "lshift": "<<",
           "rshift": ">>", "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^",
           "bitwise_invert": "~", "bitwise_left_shift": "<<", "bitwise_right_shift": ">>",
           "logical_and": "&", "logical_or": "|", "logical_xor": "^", "logical_not": "~"}
_WHERE = {op: f"operator {symbol}" for op, symbol in _SYMBOL.items()}  # made once, not per call
# & | ^ ~ of bool buffers: the op table's logical rows
_LOGICAL = {"and": "logical_and", "or": "logical_or", "xor": "logical_xor",
            "invert": "logical_not"}
# & | ^ ~ << >> of integer buffers: the op table's bitwise rows
_BITWISE = {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
            "invert": "bitwise_invert", "lshift": "bitwise_left_shift",
            "rshift": "bitwise_right_shift"}
_COMMUTE = ("add", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
            "bitwise_xor")  # s op a is a op s


def _logical(where: str, op: str, dt) -> str:
    """The row an operator & | ^ ~ << >> runs: the logical ops of bool buffers, the bitwise
    ops of integer buffers; other dtypes are refused."""
    if dt.kind == "b" and op in _LOGICAL:
        return _LOGICAL[op]
    if dt.kind in "iu":
        return _BITWISE[op]
    raise DtypeError(f"{where}: {dt.name} buffers; & | ^ ~ << and >> take integer buffers "
                     f"(and & | ^ ~ the logical ops of bool buffers: compare first, e.g. "
                     f"x != 0)")


_SIGNED_BY_SIZE = {2: "s16", 4: "s32", 8: "s64"}


def promote(where: str, a, b):
    """The dtype of an operator between buffers of dtypes ``a`` and ``b``: the array API
    standard's promotion table (float16 with a wider float too). Mixing kinds it leaves
    undefined (an integer with a float, bool with a number) is refused."""
    a, b = DTYPES[a], DTYPES[b]
    if a == b:
        return a
    if a.kind == b.kind and a.kind in "iuf":
        return a if a.itemsize >= b.itemsize else b
    if {a.kind, b.kind} == {"i", "u"}:  # a signed type twice the unsigned one's size
        u, i = (a, b) if a.kind == "u" else (b, a)
        name = _SIGNED_BY_SIZE.get(max(i.itemsize, 2 * u.itemsize))
        if name is not None:
            return DTYPES[name]
    raise DtypeError(f"{where}: {a.name} and {b.name} buffers have no common dtype in the "
                     f"array API standard's promotion table; wgcompute does not guess: make "
                     f"them one dtype with .astype()")


def _promoted(where: str, x: Buffer, y: Buffer) -> tuple[Buffer, Buffer]:
    """``x`` and ``y`` in their promoted dtype (the narrower one converted on the GPU; every
    promotion holds every value, so nothing is checked or read back)."""
    if x._dt is y._dt or x._dt == y._dt:
        return x, y
    dt = promote(where, x.dtype, y.dtype)
    return (x if x.dtype == dt else astype(x, dt)), (y if y.dtype == dt else astype(y, dt))


def _is_scalar(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating, np.bool_)) and not (
        isinstance(v, np.ndarray))


def _scalar(value, dt, where: str):
    """``value`` as a number of dtype ``dt``, exactly, or a DtypeError saying what to do."""
    from .dtypes import convert_exact

    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    elif dt.kind in "iub" and isinstance(value, (float, np.floating)):
        raise DtypeError(f"{where}: {value!r} is not an {dt.name} integer: a float scalar does "
                         f"not combine with an integer buffer (the array API standard's rule); "
                         f"convert the buffer first, e.g. buf.astype('f32')")
    try:
        v = convert_exact(np.atleast_1d(np.asarray(value)), dt, where)[0].item()
    except DtypeError:
        if dt.kind == "b":
            raise DtypeError(f"{where}: {value!r} is not a bool (True or False); a buffer "
                             f"keeps its dtype") from None
        kind = "integer" if not dt.is_float else "value"
        raise DtypeError(f"{where}: {value!r} is not an {dt.name} {kind}; a buffer keeps its "
                         f"dtype (convert it first, e.g. buf.astype('f32'))") from None
    return int(v) if dt.kind == "b" else v  # a bool lane's 0 or 1


def _other(value, where: str):
    if isinstance(value, np.ndarray) or hasattr(value, "__array_interface__"):
        raise ArgumentError(f"{where}: the other operand is a numpy array; wgcompute does not "
                            f"move data behind an operator: make it a buffer first "
                            f"(wgc.from_numpy)")


def _check_pair(where: str, op: str, x: Buffer, y: Buffer, div_hint: str):
    """What an operator between two buffers refuses: two dtypes, true division of integers."""
    if x._dt is not y._dt and x._dt != y._dt:
        raise DtypeError(f"{where}: {x.dtype} and {y.dtype} buffers; wgcompute does not "
                         f"convert implicitly: make them one dtype with .astype()")
    dt = x._dt
    if op == "div" and not dt.is_float:
        raise DtypeError(f"{where}: true division of {dt.name} buffers gives floats; "
                         f"{div_hint}")


# complex64 buffers' operators: the array namespace's functions (complex64 has its own kernels)
_COMPLEX_OPS = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide",
                "eq": "equal", "ne": "not_equal", "abs": "abs", "neg": "negative",
                "pow": "pow"}


def install_complex_ops(unary, binary) -> None:
    """Called by wgcompute.array_api as it is imported: its elementwise functions, which run
    complex64's own kernels, become complex64 buffers' operators."""
    _COMPLEX_FNS[:] = [unary, binary]


_COMPLEX_FNS: list = []


def _complex_op(where: str, op: str, a: Buffer, b=None, reflected: bool = False):
    if not _COMPLEX_FNS:
        raise ArgumentError(f"{where}: complex64 operators need wgcompute.array_api, which is "
                            f"not imported yet (import wgcompute does it)")
    unary, binary = _COMPLEX_FNS
    if op not in _COMPLEX_OPS:
        raise DtypeError(f"{where}: {a.dtype} buffers take + - * / ** == != -x and abs()")
    if b is None:
        return unary(_COMPLEX_OPS[op], a)
    if not isinstance(b, (Buffer, int, float, complex, np.number)):
        _other(b, where)
        return NotImplemented
    x1, x2 = (b, a) if reflected else (a, b)
    return binary(_COMPLEX_OPS[op], x1, x2)


def _complex_inplace(where: str, op: str, a: Buffer, b) -> Buffer:
    """``a op= b`` for a complex64 ``a``: the result computed into a new buffer, then copied
    into ``a`` (complex64's kernels write no operand in place)."""
    if DTYPES[a.dtype].kind != "c":
        raise DtypeError(f"{where}: {a.dtype} and c64 promote to c64, and an in-place operator "
                         f"keeps the left buffer's dtype ({a.dtype})")
    out = _complex_op(where, op, a, b)
    if out is NotImplemented:
        return out
    if out.shape != a.shape:
        raise ShapeError(f"{where}: the result is {out.shape} and {a.shape} cannot hold it "
                         f"(an in-place operator keeps the left buffer's shape)")
    return _strided_copy(out, a, {"strides": contiguous_strides(a.shape), "offset": 0})


def binary(op: str, a: Buffer, b, reflected: bool = False) -> Buffer:
    """``a op b`` (``b op a`` when ``reflected``) for a Buffer ``a`` and a Buffer or scalar
    ``b``; NotImplemented for other operand types, as Python's protocol expects."""
    out = quick(op, reflected, a, b)  # a signature seen before: its plan, checked once
    return out if out is not None else learn(op, reflected, a, b, _binary, op, a, b, reflected)


def _binary(op: str, a: Buffer, b, reflected: bool) -> Buffer:
    where = _WHERE[op]
    check_buffer(a, where)
    if a._dt.kind == "c" or isinstance(b, Buffer) and b._dt.kind == "c":
        return _complex_op(where, op, a, b, reflected)
    if isinstance(b, Buffer):  # two dtypes: the standard's promotion
        check_buffer(b, where)
        a, b = _promoted(where, a, b)
    dt = a._dt
    if op in _BITWISE:
        op = _logical(where, op, dt)
    if isinstance(b, Buffer):
        x, y = (b, a) if reflected else (a, b)
        _check_pair(where, op, x, y, "convert first (.astype('f32')), or use // (floor "
                    "division)")
        if op in _BUILTIN:  # same shapes (the common case) need no broadcasting rules
            k = kernel(_BUILTIN[op])
            if x.shape == y.shape:
                return enqueue(k, [x, y], result_buffer(x.shape, dt, a.device, _SYMBOL[op]))
        else:
            k = array_op(op, 2)
        shape, out_dt = k.output_spec([x, y], {})
        out = result_buffer(shape, DTYPES[out_dt], a.device, label=_SYMBOL[op])
        return enqueue(k, [x, y], out)
    if not _is_scalar(b):
        _other(b, where)
        return NotImplemented
    if op == "div" and not dt.is_float:
        raise DtypeError(f"{where}: true division of a {dt.name} buffer gives floats; "
                         f"convert first (.astype('f32')), or use // (floor division)")
    if op == "pow" and not dt.is_float and not reflected and b < 0:
        raise DtypeError(f"{where}: a {dt.name} buffer to the negative power {b!r}; integers "
                         f"to negative powers are not integers (convert to a float dtype)")
    s = _scalar(b, dt, where)
    out_dt = DTYPES[ARRAY_OPS[op].out_dtype(dt.name)] if op in ARRAY_OPS else dt
    out = result_buffer(a.shape, out_dt, a.device, label=_SYMBOL[op])
    if op == "mul":
        return enqueue("scale", [a], out, {"scalar": s})
    if op in _COMMUTE and reflected:
        reflected = False  # s + a is a + s
    if reflected and op in COMPARISONS:  # s < a is a > s
        op = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}.get(op, op)
        reflected = False
    return enqueue(array_op(op, 1, scalar=True, reflected=reflected), [a], out,
                      {"scalar": s})


def unary(op: str, a: Buffer) -> Buffer:
    out = quick(op, "unary", a, None)  # a signature seen before: its plan, checked once
    return out if out is not None else learn(op, "unary", a, None, _unary, op, a)


def _unary(op: str, a: Buffer) -> Buffer:
    where = f"operator {_SYMBOL.get(op, op)}"
    check_buffer(a, where)
    if DTYPES[a.dtype].kind == "c":
        return _complex_op(where, op, a)
    if op in _BITWISE:
        op = _logical(where, op, DTYPES[a.dtype])
    out = result_buffer(a.shape, DTYPES[a.dtype], a.device, label=op)
    return enqueue(array_op(op, 1), [a], out)


def relu(x: Buffer, slope=0.0, argument: str = "self") -> Buffer:
    """x.relu(slope) (and wgc.relu's, ``argument`` naming x in errors): the relu kernel into
    a new result, queued (slope 0 joins automatic fusion, a signature seen before through
    the short path)."""
    if type(slope) in (int, float) and slope == 0 and type(x) is Buffer:
        out = quick("relu", "relu", x, None)
        return out if out is not None else learn("relu", "relu", x, None, _relu, x, slope,
                                                 argument)
    return _relu(x, slope, argument)


def _relu(x: Buffer, slope, argument: str) -> Buffer:
    check_buffer(x, argument)
    out = result_buffer(x._shape, x._dt, x._dev, label="relu")
    return enqueue("relu", [x], out, {"slope": slope})


def matmul_op(a: Buffer, b, reflected: bool = False) -> Buffer:
    if not isinstance(b, Buffer):
        _other(b, "operator @")
        return NotImplemented
    x, y = (b, a) if reflected else (a, b)
    check_buffer(x, "operator @")
    check_buffer(y, "operator @")
    if x._dt is not y._dt and x.dtype != y.dtype:
        raise DtypeError(f"operator @: {x.dtype} and {y.dtype} buffers; make them one dtype "
                         f"with .astype()")
    shape = matmul_shape(x.shape, y.shape).out
    out = result_buffer(shape, DTYPES[x.dtype], x.device, label="@")
    return enqueue("matmul", [x, y], out)


def reduction(name: str, x: Buffer, axis, keepdims: bool, out: Buffer | None
              ) -> Buffer:
    """A Buffer method's reduction: numpy's default axis (None: everything)."""

    check_buffer(x, "self")
    k = kernel(name)
    params = {"axis": axis, "keepdims": keepdims}
    if out is None:
        shape, dt = k.output_spec([x], params)
        out = result_buffer(shape, DTYPES[dt], x.device, label=name)
    return enqueue(k, [x], out, params)


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


def getitem(x: Buffer, key) -> Buffer:
    """numpy's basic indexing (ints, slices, ..., None): a view when the result is contiguous
    in memory, else a copy made on the GPU. A sole array index is a boolean mask of the
    leading dimensions or integer indices along the first axis (gathered on the GPU:
    wgcompute._gather)."""
    from .buffer import BufferView, result_buffer

    check_buffer(x, "self")
    if isinstance(key, Buffer) or (isinstance(key, tuple)
                                   and any(isinstance(k, Buffer) for k in key)):
        return array_getitem(x, key)
    offset, shape, strides = basic_layout(x, key)
    item = DTYPES[x.dtype].itemsize
    contiguous = all(s == c for s, c, n in zip(strides, contiguous_strides(shape), shape)
                     if n > 1)
    if contiguous or math.prod(shape) == 0:
        return BufferView(x, shape, offset * item)
    out = result_buffer(shape, DTYPES[x.dtype], x.device, label="slice")
    root = x._base if x._base is not None else x
    base_elems = x._offset // item if x._base is not None else 0
    alias = BufferView(root, (root.nbytes // item,), 0, DTYPES[x.dtype])
    return _strided_copy(alias, out, {"strides": tuple(strides), "offset": base_elems + offset})


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
    return _strided_copy(alias, out, {"strides": contiguous_strides(x.shape),
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
    if dt.kind == "c" or isinstance(b, Buffer) and DTYPES[b.dtype].kind == "c":
        return _complex_inplace(where, op, a, b)
    if op in _BITWISE:
        op = _logical(where, op, dt)
    if isinstance(b, Buffer):
        check_buffer(b, where)
        if b.dtype != a.dtype:  # b may be converted; a keeps its dtype
            if promote(where, a.dtype, b.dtype) != dt:
                raise DtypeError(f"{where}: {a.dtype} and {b.dtype} buffers promote to "
                                 f"{promote(where, a.dtype, b.dtype)}, and an in-place "
                                 f"operator keeps the left buffer's dtype ({a.dtype}); compute "
                                 f"a new buffer instead (the operator without =)")
            b = astype(b, dt)
        _check_pair(where, op, a, b, "use //= (floor division)")
        k = kernel(_BUILTIN[op]) if op in _BUILTIN else array_op(op, 2)
        return enqueue(k, [a, b], a)
    if not _is_scalar(b):
        _other(b, where)
        return NotImplemented
    if op == "div" and not dt.is_float:
        raise DtypeError(f"{where}: true division of a {dt.name} buffer gives floats; use //=")
    if op == "pow" and not dt.is_float and b < 0:
        raise DtypeError(f"{where}: a {dt.name} buffer to the negative power {b!r}")
    s = _scalar(b, dt, where)
    if op == "mul":
        return enqueue("scale", [a], a, {"scalar": s})
    return enqueue(array_op(op, 1, scalar=True), [a], a, {"scalar": s})


# Buffer's operators, views, indexing, reductions and astype call this module (buffer.py sits
# below it, so it cannot import it)
install_array_ops(sys.modules[__name__])
