"""The standard's elementwise functions, each one row of the op table
(kernels/elementwise/optable.py) run by one path: operands checked and promoted, broadcast,
one kernel on the GPU (complex64 goes to _complex's kernels)."""

from __future__ import annotations

import builtins
import cmath

import numpy as np

from .._fusion_quick import learn, quick
from .._lazy import enqueue
from ..buffer import Buffer
from ..dtypes import DTYPES, DType
from ..errors import DtypeError, UnsupportedDtypeError
from ..kernels.core.layout import broadcast_shapes
from ..kernels.elementwise.arrayops import array_op
from ..kernels.elementwise.optable import OPS, OpDef
from ._dtypes import check_scalar_kind, standard_name
from ._helpers import SCALARS, array, new, operands

# the standard's name -> the op table row it runs
_UNARY = {
    "abs": "abs", "acos": "acos", "acosh": "acosh", "asin": "asin", "asinh": "asinh",
    "atan": "atan", "atanh": "atanh", "bitwise_invert": "bitwise_invert", "ceil": "ceil",
    "cos": "cos", "cosh": "cosh", "exp": "exp", "expm1": "expm1", "floor": "floor",
    "isfinite": "isfinite", "isinf": "isinf", "isnan": "isnan", "log": "log",
    "log1p": "log1p", "log2": "log2", "log10": "log10", "logical_not": "logical_not",
    "negative": "neg", "positive": "identity", "reciprocal": "reciprocal", "round": "round",
    "sign": "sign", "signbit": "signbit", "sin": "sin", "sinh": "sinh", "square": "square",
    "sqrt": "sqrt", "tan": "tan", "tanh": "tanh", "trunc": "trunc",
}
_BINARY = {
    "add": "add", "atan2": "atan2", "bitwise_and": "bitwise_and",
    "bitwise_left_shift": "bitwise_left_shift", "bitwise_or": "bitwise_or",
    "bitwise_right_shift": "bitwise_right_shift", "bitwise_xor": "bitwise_xor",
    "copysign": "copysign", "divide": "div", "equal": "eq", "floor_divide": "floordiv",
    "greater": "gt", "greater_equal": "ge", "hypot": "hypot", "less": "lt",
    "less_equal": "le", "logaddexp": "logaddexp", "logical_and": "logical_and",
    "logical_or": "logical_or", "logical_xor": "logical_xor", "maximum": "maximum",
    "minimum": "minimum", "multiply": "mul", "nextafter": "nextafter", "not_equal": "ne",
    "pow": "pow", "remainder": "mod", "subtract": "sub",
}
ROWS = {**_UNARY, **_BINARY}  # every function's row (the tests draw their cases from it)
# a scalar on the left of these is the same op with the scalar on the right
_SWAPPED = {"add": "add", "mul": "mul", "eq": "eq", "ne": "ne", "lt": "gt", "gt": "lt",
            "le": "ge", "ge": "le", "maximum": "maximum", "minimum": "minimum",
            "hypot": "hypot", "logaddexp": "logaddexp", "bitwise_and": "bitwise_and",
            "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
            "logical_and": "logical_and", "logical_or": "logical_or",
            "logical_xor": "logical_xor"}
# f64 rows that take the bits of f64 values apart in 64-bit integers (signs, 2/pi's bits);
# tests/array_api/test_elementwise.py checks the list against the rows' WGSL
F64_BITS = {"copysign", "signbit", "nextafter", "sin", "cos", "tan", "asin", "atan", "atan2",
            "sinh", "tanh", "asinh", "atanh"}
_ALLOWED = {"any": "a numeric dtype", "signed": "a signed numeric dtype",
            "float": "a real floating-point dtype",
            "float_test": "a real floating-point dtype",
            "integer": "an integer dtype", "compare": "a numeric dtype",
            "equality": "a numeric or bool dtype", "logical": "bool"}
# complex64 arithmetic lives in _complex (its own kernels)
_COMPLEX = {"add": "complex_add", "subtract": "complex_subtract",
            "multiply": "complex_multiply", "divide": "complex_divide", "abs": "complex_abs"}
# complex64 tests made of its parts' (real and imaginary): the function on each part, and how
# the two truths combine
_COMPLEX_PARTS = {"isnan": ("isnan", "logical_or"), "isinf": ("isinf", "logical_or"),
                  "isfinite": ("isfinite", "logical_and"), "equal": ("equal", "logical_and"),
                  "not_equal": ("not_equal", "logical_or")}
# complex64's own rows (its functions that are not arithmetic)
COMPLEX_ROWS = {n: f"{n}_c64" for n in ("exp", "log", "log2", "log10", "sqrt", "sinh", "cosh",
                                         "tanh", "sin", "cos", "tan", "expm1", "log1p",
                                         "sign", "asinh", "asin", "acosh", "acos", "atanh",
                                         "atan")}
# the standard's bitwise functions of bools are the logical ones
_BOOL = {"bitwise_and": "logical_and", "bitwise_or": "logical_or",
         "bitwise_xor": "logical_xor", "bitwise_invert": "logical_not"}


def _check_dtype(where: str, row: OpDef, dt: DType, device) -> None:
    if dt.name not in row.accepts():
        raise DtypeError(f"{where}: {standard_name(dt)} arrays are not accepted; expected "
                         f"{_ALLOWED.get(row.dtypes, ', '.join(row.accepts()))}")
    if dt.feature is not None and not device.has(dt.feature):  # its own feature first
        raise UnsupportedDtypeError(
            f"{where}: {standard_name(dt)} needs the adapter feature {dt.feature!r}, which "
            f"{device.name} does not have (storing and copying it still works)", dt.feature)
    if (dt.name == "f64" and row.name in F64_BITS or dt.name == "c128") and \
            not device.has("shader-int64"):
        raise UnsupportedDtypeError(
            f"{where}: {standard_name(dt)} {where} reads the bits of float64 values as 64-bit "
            f"integers, "
            f"which need the adapter feature 'shader-int64'; {device.name} does not have it",
            "shader-int64")


def _complex(where: str, *args):
    from . import _complex

    if where in _COMPLEX_PARTS:  # e.g. isnan(z) = isnan(real(z)) | isnan(imag(z))
        part, join = _COMPLEX_PARTS[where]
        parts = [[getattr(_complex, f)(a) if isinstance(a, Buffer) else
                  getattr(complex(a), f) for a in args] for f in ("real", "imag")]
        fn = unary if len(args) == 1 else binary
        return binary(join, fn(part, *parts[0]), fn(part, *parts[1]))
    if where == "positive":
        from ..array import copy

        return copy(args[0])
    if where == "square":
        return _complex.complex_multiply(args[0], args[0])
    if where == "pow":  # the standard's: as exp(x2 log(x1)); z ** 2 multiplies (exactly)
        base, exponent = args
        if isinstance(base, Buffer) and not isinstance(exponent, Buffer) and exponent == 2:
            return _complex.complex_multiply(base, base)
        log = unary("log", base) if isinstance(base, Buffer) else cmath.log(complex(base))
        return unary("exp", _complex.complex_multiply(exponent, log))
    if where in _BY_PARTS:  # each part on its own: the real function of the parts' view
        x = args[0]
        dt = DTYPES[x.dtype]
        parts = unary(where, x.reshape(x.size).view(dt.part.name))
        return parts.view(dt.name).reshape(x.shape)
    return getattr(_complex, _COMPLEX[where])(*args)


# the largest finite value of each float dtype: a Python float within it rounds without
# overflow (scalar_value skips numpy's error-state context, a per-operator cost, for those)
_FMAX = {name: float(np.finfo(dt.numpy).max) for name, dt in DTYPES.items() if dt.kind == "f"}
_BY_PARTS = ("negative", "round")  # complex64 functions of each part alone


def _is_complex(where: str, dt: DType) -> bool:
    return dt.kind == "c" and (where in _COMPLEX or where in _COMPLEX_PARTS
                               or where in _BY_PARTS or where in ("positive", "square", "pow"))


def unary(where: str, x) -> Buffer:
    """The standard's elementwise function ``where`` of one array."""
    if type(x) is not Buffer:
        return _unary(where, x)
    out = quick(where, "xp", x, None)  # a signature seen before: its plan, checked once
    return out if out is not None else learn(where, "xp", x, None, _unary, where, x)


def _unary(where: str, x) -> Buffer:
    x = array(x, "x")
    dt = DTYPES[x.dtype]
    if where == "reciprocal" and dt.kind == "c":
        return binary("divide", 1 + 0j, x)
    if _is_complex(where, dt):
        return _complex(where, x)
    if dt.kind == "b" and where in _BOOL:
        row = OPS[_BOOL[where]]
    elif dt.kind == "c" and where in COMPLEX_ROWS:
        row = OPS[COMPLEX_ROWS[where]]
    else:
        row = OPS[_UNARY[where]]
    _check_dtype(where, row, dt, x.device)
    out = new(x.shape, DTYPES[row.out_dtype(dt.name)], x.device, where)
    if out.size == 0:
        return out
    return enqueue(array_op(row.name, 1), [x], out)


def scalar_value(where: str, value, dt: DType):
    """A Python scalar as a value of the array's dtype ``dt``: floats round to it (overflow
    gives ±inf, as numpy), integers must fit."""
    if dt.kind == "b":
        return int(value)
    if dt.kind == "f":
        if type(value) is float and -_FMAX[dt.name] <= value <= _FMAX[dt.name]:
            return float(dt.numpy.type(value))  # (in range: rounding cannot overflow)
        with np.errstate(over="ignore"):
            return float(dt.numpy.type(value))
    info = np.iinfo(dt.numpy)
    if not info.min <= value <= info.max:
        raise DtypeError(f"{where}: the Python int {value} is out of range for a "
                         f"{standard_name(dt)} array ({info.min}..{info.max})")
    return int(value)


def binary(where: str, x1, x2) -> Buffer:
    """The standard's elementwise function ``where`` of two arrays, or an array and a
    Python scalar (either side): the standard's promotion, numpy's broadcasting."""
    if type(x1) is not Buffer:
        return _binary(where, x1, x2)
    out = quick(where, "xp", x1, x2)  # a signature seen before: its plan, checked once
    return out if out is not None else learn(where, "xp", x1, x2, _binary, where, x1, x2)


def _binary(where: str, x1, x2) -> Buffer:
    op = _BINARY[where]
    left_scalar = isinstance(x1, SCALARS)
    if isinstance(x1, Buffer) and isinstance(x2, Buffer):
        broadcast_shapes(where, [("x1", x1.shape), ("x2", x2.shape)])
    a, b, dt = operands(where, x1, x2)
    if _is_complex(where, dt):  # (the operands promoted, in their order)
        return _complex(where, *((b, a) if left_scalar else (a, b)))
    if dt.kind == "b" and where in _BOOL:
        op = _BOOL[where]
    row = OPS[op]
    _check_dtype(where, row, dt, a.device)
    _check_op(where, op, dt, b, left_scalar)
    out_dt = DTYPES[row.out_dtype(dt.name)]
    if isinstance(b, Buffer):
        k = array_op(op, 2)
        shape, _ = k.output_spec([a, b], {})
        out = new(shape, out_dt, a.device, where)
        return enqueue(k, [a, b], out) if out.size else out
    s = scalar_value(where, b, dt)
    reflected = False
    if left_scalar:
        op, reflected = (_SWAPPED[op], False) if op in _SWAPPED else (op, True)
    out = new(a.shape, out_dt, a.device, where)
    if out.size == 0:
        return out
    return enqueue(array_op(op, 1, scalar=True, reflected=reflected), [a], out,
                      {"scalar": s})


def _check_op(where: str, op: str, dt: DType, b, left_scalar: bool) -> None:
    """What the rows cannot do for some operands: integer true division (the standard leaves
    it to the implementation), and integer powers that are not integers."""
    name = standard_name(dt)
    if op == "div" and dt.kind in "iu":
        raise DtypeError(f"{where}: true division of {name} arrays gives floats, and the "
                         f"standard leaves it to the implementation; convert first "
                         f"(astype(x, float32)), or use floor_divide")
    if op != "pow":
        return
    scalar_exponent = not isinstance(b, Buffer) and not left_scalar
    if dt.kind in "iu" and scalar_exponent and b < 0:
        raise DtypeError(f"{where}: a {name} array to the negative power {b!r}; integers to "
                         f"negative powers are not integers (convert to a float dtype)")


def _clip_bound(where: str, x: Buffer, bound, argument: str, lower: bool):
    """A bound of clip in x's dtype: a Python scalar (an int outside an integer dtype's range
    that clips nothing is dropped), or an array of x's kind, converted."""
    dt = DTYPES[x.dtype]
    if isinstance(bound, SCALARS):
        check_scalar_kind(bound, dt, f"{where}: {argument}")
        if dt.kind in "iu" and not isinstance(bound, builtins.bool):
            info = np.iinfo(dt.numpy)
            if (bound < info.min and lower) or (bound > info.max and not lower):
                return None  # below (above) every value of x: nothing to clip
        return scalar_value(f"{where}: {argument}", bound, dt)
    b = array(bound, argument)
    if DTYPES[b.dtype].kind != dt.kind:
        raise DtypeError(f"{where}: {argument} is {standard_name(b.dtype)} and x is "
                         f"{standard_name(dt)}; clip takes bounds of x's kind")
    return b


def clip(x, /, min=None, max=None) -> Buffer:  # noqa: A002 - the standard's names
    """Each element of x clamped to [min, max] (either may be None: no bound), in x's dtype
    and the shape x and the array bounds broadcast to; a nan in x, min or max gives nan.
    Array bounds must be of x's kind (one of another dtype of that kind is converted to x's
    exactly: a value x's dtype cannot hold is refused)."""
    x = array(x, "x")
    dt = DTYPES[x.dtype]
    if dt.kind not in "iuf":
        raise DtypeError(f"clip: {standard_name(dt)} arrays are not accepted; expected a "
                         f"real numeric dtype")
    out = x
    for bound, argument, op in ((min, "min", "maximum"), (max, "max", "minimum")):
        if bound is None:
            continue
        b = _clip_bound("clip", x, bound, argument, op == "maximum")
        if b is None:
            continue
        if isinstance(b, Buffer) and b.dtype != dt:
            from ..array import astype

            b = astype(b, dt)  # exact: a bound x's dtype cannot hold is refused
        out = binary(op, out, b)
    if out is x:  # no bound: a new array with x's elements
        from ..array import copy

        return copy(x)
    return out


def _make(name: str, arity: int):
    if arity == 1:
        def f(x, /):
            return unary(name, x)
        f.__doc__ = f"The standard's {name} of each element of x, on the GPU."
    else:
        def f(x1, x2, /):
            return binary(name, x1, x2)
        f.__doc__ = (f"The standard's {name} of x1 and x2, elementwise with broadcasting "
                     f"(either may be a Python scalar), on the GPU.")
    f.__name__ = f.__qualname__ = name
    return f


# the functions whose rows exist (logical_* come with the bool dtype)
_PUBLIC = {name: _make(name, 1) for name, row in _UNARY.items() if row in OPS}
_PUBLIC.update({name: _make(name, 2) for name, row in _BINARY.items() if row in OPS})
globals().update(_PUBLIC)

__all__ = sorted([*_PUBLIC, "clip"])
