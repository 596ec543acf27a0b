"""The op table: every elementwise operation's math, once. A row names the op, its arity, the
dtypes it accepts (and what it returns), its WGSL and the numpy function that is its
reference. The kernels build their shaders from the rows (the built-in elementwise kernels in
builtin.py, Buffer's operators in arrayops.py, the activations and binaries fused into the nn
kernels); the tests draw their cases from them (tests/test_optable.py).

``wgsl`` is a template of a WGSL expression on ``x`` (and ``y``): ``${V}`` is the operands'
type (a vector on vectorized paths), ``${T}`` its scalar type, ``${nan_x}`` whether x is nan
(by its bits: see wgsl_is_nan), ``${a}`` and ``${b}`` the op's parameters (uniform fields).
Integers take ``wgsl_int`` (unsigned ones ``wgsl_uint``) where the float form does not fit.
An op whose numpy semantics need statements gives ``body``: the WGSL statements of its
function for a dtype and a work type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...dtypes import DType
from ..core import shaders
from ..core.base import wgsl_is_nan
from . import mathcomplex as mc
from . import mathcomplex_inv as mi
from . import matherf
from . import mathfuncs as m
from . import mathkernels as mk

INTEGERS = ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")
FLOATS = ("f32", "f64", "f16")
ALL = FLOATS + INTEGERS
SIGNED = FLOATS + ("s8", "s16", "s32", "s64")

# dtype rules: the dtypes an op accepts and what it returns for one of them
DTYPE_RULES = {
    "any": (ALL, "same"),  # every dtype, the result in the operands' dtype
    "signed": (SIGNED, "same"),  # floats and signed integers
    "float": (FLOATS, "same"),
    "integer": (INTEGERS, "same"),  # bitwise ops
    "float_test": (FLOATS, "bool"),  # a truth value of a float (signbit)
    # the complex dtypes' own rows (vec2<f32> or vec2<f64>: real, imaginary)
    "complex": (("c64", "c128"), "same"),
    "compare": (ALL, "bool"),  # a truth value (bool: the bytes 0 and 1)
    "equality": (ALL + ("bool",), "bool"),  # == and !=, of bools too
    "logical": (("bool",), "bool"),  # bool operands only (their lanes are 0 or 1)
}


@dataclass(frozen=True)
class OpDef:
    """One elementwise op. ``params``: names of the op's parameters, ``${a}`` and ``${b}`` in
    the WGSL and the reference's arguments after the operands. ``keeps_nan``: the WGSL selects
    x where x is nan (WGSL's max, min and clamp of a nan are undefined). ``domain``: the
    operands the op is defined on ("all", or "positive": WGSL's pow of x <= 0 is undefined).
    ``helpers``: the WGSL functions the op calls ("divmod": floor_divide and remainder)."""

    name: str
    arity: int
    dtypes: str
    wgsl: str
    reference: Callable
    wgsl_int: str | None = None
    wgsl_uint: str | None = None
    wgsl_f64: str | None = None
    body: Callable[[DType, str], str] | None = None
    params: tuple[str, ...] = ()
    keeps_nan: bool = False
    domain: str = "all"
    helpers: str = ""
    description: str = ""

    def accepts(self) -> tuple[str, ...]:
        return DTYPE_RULES[self.dtypes][0]

    @property
    def truth(self) -> bool:
        """Whether the op gives truth values (its WGSL is a WGSL bool)."""
        return DTYPE_RULES[self.dtypes][1] == DTYPE_RULES["compare"][1]

    def out_dtype(self, dtype: str) -> str:
        rule = DTYPE_RULES[self.dtypes][1]
        return dtype if rule == "same" else rule

    def template(self, dt: DType) -> str:
        """The expression template for operands of dtype ``dt``."""
        if dt.is_float:
            return self.wgsl_f64 if dt.name == "f64" and self.wgsl_f64 else self.wgsl
        if dt.kind == "u" and self.wgsl_uint is not None:
            return self.wgsl_uint
        return self.wgsl_int if self.wgsl_int is not None else self.wgsl

    def expr(self, dt: DType, v: str, t: str, a: str = "p.p0", b: str = "p.p1",
             nan_type: str | None = None, where: str | None = None) -> str:
        """The op's WGSL expression on ``x`` (``y``) of item type ``v`` and scalar type ``t``
        (nan tested as ``nan_type``, ``v`` unless given), parameters ``a`` and ``b``."""
        return shaders.render(self.template(dt), {
            "V": v, "T": t, "nan_x": wgsl_is_nan("x", nan_type or v), "a": a, "b": b,
            "big": _BIG_DIVISOR.get(t, "0.0")}, name=f"{where or self.name} op")


# The smallest power of two whose reciprocal is subnormal, per float type (see "div").
_BIG_DIVISOR = {"f16": "16384.0", "f32": "8.507059173023462e37", "f64": "4.49423283715579e307"}


# -- numpy references (f64 math for the nn activations, computed in f32 on the GPU) ---------
def _trunc_divide(x, y):
    """WGSL's integer x / y: truncated toward zero; x / 0 is x."""
    if x.dtype.kind == "f":
        return np.true_divide(x, y)
    safe = np.where(y == 0, np.ones_like(y), y)
    q = np.abs(x) // np.abs(safe) if x.dtype.kind == "i" else x // safe
    if x.dtype.kind == "i":
        q = np.where((x < 0) != (safe < 0), -q, q).astype(x.dtype)
    return q


def _relu(x, slope=0.0):
    if x.dtype.kind != "f":
        return np.maximum(x, 0)
    neg = np.zeros_like(x) if slope == 0 else x * x.dtype.type(slope)
    return np.where(np.isnan(x) | (x > 0), x, neg)


def _power(x, y):
    """numpy's power, with integer x ** -n as C's truncated 1 / x**n (numpy refuses it)."""
    if x.dtype.kind != "i" or not (y < 0).any():
        return np.power(x, y)
    pos = np.power(x, np.where(y < 0, 0, y))
    neg = np.where(x == 1, 1, np.where(x == -1, np.where(y % 2 == 0, 1, -1), 0))
    return np.where(y < 0, neg, pos).astype(x.dtype)


def _hard_sigmoid(v, alpha, beta):
    return np.clip(alpha * v + beta, 0, 1)


# -- statements of the ops that need more than one expression --------------------------------
def _float_pow(w: str) -> str:
    """Body of op(x, y) = x ** y in float work type ``w``, as numpy's (C's pow).

    C's special values first (x ** ±0 and 1 ** y are 1 even for nan; any other nan gives nan;
    ±inf exponents and ±0 / ±inf bases by their sizes: integer exponents multiply them,
    exactly, keeping the sign of -0 and -inf), nan read from its bits: WGSL's pow is
    exp2(y·log2(x)), undefined for x <= 0. Then an integer exponent up to 16 multiplies
    (exact for small ones, any sign of x: repeated squaring's error doubles with each square,
    so larger ones take the general path); any other takes exp(y·log|x|) from mathkernels'
    exp and log (WGSL's pow, exp2(y·log2(x)), was 37 ulp off at 0.9999 ** 64 on lavapipe;
    Vulkan has no f64 pow), its sign by the exponent's parity (nan for a negative base and a
    non-integer exponent): off by about |y·log x| ulp, the rounding of that product. (nan
    and inf from their bits: NVIDIA's compiler folds a run-time 0 / 0 to 1, H100.)"""
    nan = f"{w}(bitcast<f32>(0x7fc00000u))"
    inf = f"{w}(bitcast<f32>(0x7f800000u))"
    k = mk.K[w]
    general = "\n    ".join([
        f"var lg = {w}(0);", *mk.log_of("ax", "lg", w),
        "let t = y * lg;",
        f"var r = {w}(0);",
        f"if (t > {k['exp_max']}) {{", "    r = inf;",
        f"}} else if (t >= {k['exp_min']}) {{", *mk.indent(mk.exp_of("t", "r", w)),
        "}"])
    return f"""let nan = {nan};
    let inf = {inf};
    if (y == {w}(0) && !({wgsl_is_nan("y", w)})) {{
        return {w}(1);
    }}
    if (x == {w}(1) && !({wgsl_is_nan("x", w)})) {{
        return {w}(1);
    }}
    if ({wgsl_is_nan("x", w)} || {wgsl_is_nan("y", w)}) {{
        return nan;
    }}
    let ax = abs(x);
    if (abs(y) == inf) {{  // |x| = 1: 1; else 0 or inf by whether |x|^y grows
        return select(select({w}(0), inf, (ax > {w}(1)) == (y > {w}(0))), {w}(1), ax == {w}(1));
    }}
    let whole = y == floor(y);
    let odd = whole && fract(y * 0.5) != {w}(0);  // (past 2^mantissa every whole y is even)
    let exact = ax == inf || ax == {w}(0);  // multiplied exactly, -0 and -inf keep their sign
    if (whole && (abs(y) <= {w}(16) || (exact && abs(y) < {w}(4294967296.0)))) {{
        var e = u32(abs(y));
        var b = x;
        var r = {w}(1);
        loop {{
            if (e == 0u) {{ break; }}
            if ((e & 1u) != 0u) {{ r = r * b; }}
            b = b * b;
            e = e >> 1u;
        }}
        return select(r, {w}(1) / r, y < {w}(0));
    }}
    if (exact) {{  // (a whole y here is past 2^32: f64's, which may be odd)
        let big = select({w}(0), inf, (ax == inf) == (y > {w}(0)));
        return select(big, -big, odd && (x < {w}(0) || {w}(1) / x < {w}(0)));
    }}
    if (x < {w}(0) && !whole) {{
        return nan;
    }}
    {general}
    return select(r, -r, x < {w}(0) && odd);"""


def _pow_body(dt: DType, w: str) -> str:
    if dt.is_float:
        return _float_pow(w)
    # integers: square and multiply, wrapping; a negative exponent gives the truncated
    # quotient 1 / x**|y|: 1 for x = 1, ±1 for x = -1, 0 otherwise
    lines = []
    if dt.kind == "i":
        lines += [f"if (y < {w}(0)) {{",
                  f"    if (x == {w}(1)) {{ return {w}(1); }}",
                  f"    if (x == {w}(-1)) {{ return select({w}(1), {w}(-1), "
                  f"(y & {w}(1)) != {w}(0)); }}",
                  f"    return {w}(0);", "}"]
    lines += [f"var r = {w}(1);", "var b = x;", "var e = y;",
              "loop {", f"    if (e == {w}(0)) {{ break; }}",
              f"    if ((e & {w}(1)) != {w}(0)) {{ r = r * b; }}",
              "    b = b * b;", "    e = e >> 1u;",
              "}", "return r;"]
    return "\n    ".join(lines)


def _floordiv_body(dt: DType, w: str) -> str:
    if dt.is_float:  # (see arrayops._float_divmod)
        return "return floor_divide(x, y);"
    lines = [f"if (y == {w}(0)) {{", f"    return {w}(0);", "}", "var q = x / y;"]
    if dt.kind == "i":  # WGSL truncates; numpy floors. No `%` of a negative value: NVIDIA's
        # Vulkan driver took it of the unsigned bit pattern (docs/architecture.md)
        lines += [f"if (x - q * y != {w}(0) && ((x < {w}(0)) != (y < {w}(0)))) {{",
                  f"    q = q - {w}(1);", "}"]
    return "\n    ".join(lines + ["return q;"])


def _mod_body(dt: DType, w: str) -> str:
    if dt.is_float:  # the sign of the divisor, as numpy's remainder
        return "return remainder(x, y);"
    signed = dt.kind == "i"
    rem = "x - (x / y) * y" if signed else "x % y"  # (no signed `%`: see floordiv)
    lines = [f"if (y == {w}(0)) {{", f"    return {w}(0);", "}", f"var r = {rem};"]
    if signed:
        lines += [f"if (r != {w}(0) && ((r < {w}(0)) != (y < {w}(0)))) {{",
                  "    r = r + y;", "}"]
    return "\n    ".join(lines + ["return r;"])


# max and min of a nan are nan, as numpy's maximum and minimum (x + y: nan when either is)
_EITHER_NAN = "max(bitcast<u32>(x) & 0x7fffffffu, bitcast<u32>(y) & 0x7fffffffu) > 0x7f800000u"

_ROWS = (
    # arithmetic: the built-in kernels, Buffer's operators and nn_binary
    OpDef("add", 2, "any", "x + y", np.add, description="a + b"),
    OpDef("sub", 2, "any", "x - y", np.subtract, description="a - b"),
    OpDef("mul", 2, "any", "x * y", np.multiply, description="a * b"),
    # x / 0 is x by WGSL's rule, but naga's GLSL output leaves it to GL, where it is
    # undefined (llvmpipe: 0, or all ones unsigned): divide by 1 instead, on every backend
    # A divisor past 2^126 (f16: 2^14) has a subnormal reciprocal, which GPUs that divide as
    # x * (1 / y) and flush subnormals (NVIDIA) make 0: inf / 2^127 gave nan, 3 / 2^127 gave
    # 0. Dividing both by 4 first is exact there (a quotient that small x could lose is 0).
    OpDef("div", 2, "any", "select(x / y, (x * 0.25) / (y * 0.25), abs(y) > ${V}(${big}))",
          _trunc_divide,
          wgsl_int="x / select(y, ${V}(1), y == ${V}(0))",
          description="a / b (integers: truncated; x / 0 gives x, as in WGSL)"),
    OpDef("floordiv", 2, "any", "floor_divide(x, y)", np.floor_divide, body=_floordiv_body,
          helpers="divmod", description="numpy's floor_divide"),
    OpDef("mod", 2, "any", "remainder(x, y)", np.remainder, body=_mod_body, helpers="divmod",
          description="numpy's remainder (the sign of the divisor)"),
    OpDef("pow", 2, "any", "pow(x, y)", _power, body=_pow_body,
          description="numpy's power (C's pow's special values)"),
    OpDef("neg", 1, "any", "-x", np.negative, wgsl_int="${V}(0) - x", description="-a"),
    OpDef("abs", 1, "any", "abs(x)", np.abs, wgsl_uint="x", description="|a|"),
    # comparisons: "!(==)": nan != nan holds whatever the comparison's order
    OpDef("lt", 2, "compare", "x < y", np.less),
    OpDef("le", 2, "compare", "x <= y", np.less_equal),
    OpDef("gt", 2, "compare", "x > y", np.greater),
    OpDef("ge", 2, "compare", "x >= y", np.greater_equal),
    OpDef("eq", 2, "equality", "x == y", np.equal),
    OpDef("ne", 2, "equality", "!(x == y)", np.not_equal),
    # logical ops of bools (their lanes are 0 or 1), as WGSL bools
    OpDef("logical_and", 2, "logical", "(x != ${V}(0)) & (y != ${V}(0))", np.logical_and,
          description="a and b"),
    OpDef("logical_or", 2, "logical", "(x != ${V}(0)) | (y != ${V}(0))", np.logical_or,
          description="a or b"),
    OpDef("logical_xor", 2, "logical", "(x != ${V}(0)) != (y != ${V}(0))", np.logical_xor,
          description="a xor b"),
    OpDef("logical_not", 1, "logical", "x == ${V}(0)", np.logical_not, description="not a"),
    # the built-in one-operand kernels (a nan stays nan: tested by its bits)
    OpDef("scale", 1, "any", "x * ${a}", lambda x, s: x * x.dtype.type(s), params=("scalar",),
          description="a * scalar"),
    OpDef("relu", 1, "signed",
          "select(select(select(x * ${a}, ${V}(0), ${a} == ${T}(0)), x, x > ${V}(0)), x, "
          "${nan_x})", _relu, wgsl_int="max(x, ${V}(0))", params=("slope",), keeps_nan=True,
          description="max(x, 0), or x * slope for x < 0 (leaky ReLU)"),
    OpDef("fill", 0, "any", "${V}(${a})", lambda value: value, params=("value",),
          description="value"),
    OpDef("identity", 1, "any", "x", lambda x, *_: x, description="a"),
    # nn: f32 arithmetic (f16 stored), alpha and beta from the launch. max, min and clamp of a
    # nan are undefined in WGSL (0 or a bound on lavapipe): those select x where it is nan
    OpDef("maximum", 2, "any", f"select(max(x, y), x + y, {_EITHER_NAN})", np.maximum,
          body=m.maxmin_body("max"), description="numpy's maximum (nan if either is)"),
    OpDef("minimum", 2, "any", f"select(min(x, y), x + y, {_EITHER_NAN})", np.minimum,
          body=m.maxmin_body("min"), description="numpy's minimum (nan if either is)"),
    OpDef("pow_f32", 2, "float", "pow(x, y)", np.power, domain="positive",
          description="WGSL's pow, for x > 0"),
    OpDef("nn_relu", 1, "float", "select(max(x, 0.0), x, ${nan_x})",
          lambda v, a=0.0, b=0.0: np.maximum(v, 0), keeps_nan=True,
          description="max(x, 0) in f32"),
    OpDef("leaky_relu", 1, "float", "select(x * ${a}, x, x >= 0.0)",
          lambda v, a, b=0.0: np.where(v >= 0, v, v * a), params=("alpha",),
          description="x, or alpha * x for x < 0"),
    OpDef("clip", 1, "float", "select(min(max(x, ${a}), ${b}), x, ${nan_x})",
          lambda v, a, b: np.minimum(np.maximum(v, a), b), params=("alpha", "beta"),
          keeps_nan=True, description="x clamped to [alpha, beta]"),
    OpDef("sigmoid", 1, "float", "1.0 / (1.0 + exp(-x))",
          lambda v, a=0.0, b=0.0: 1 / (1 + np.exp(-v)), description="1 / (1 + exp(-x))"),
    OpDef("hard_sigmoid", 1, "float", "select(clamp(${a} * x + ${b}, 0.0, 1.0), x, ${nan_x})",
          _hard_sigmoid, params=("alpha", "beta"), keeps_nan=True,
          description="clamp(alpha * x + beta, 0, 1)"),
    OpDef("hard_swish", 1, "float", "x * clamp(${a} * x + ${b}, 0.0, 1.0)",
          lambda v, a, b: v * _hard_sigmoid(v, a, b), params=("alpha", "beta"),
          description="x * clamp(alpha * x + beta, 0, 1)"),
    OpDef("tanh", 1, "float", "select(tanh(clamp(x, -20.0, 20.0)), x, ${nan_x})",
          lambda v, a=0.0, b=0.0: np.tanh(v), body=m.tanh_body, keeps_nan=True,
          description="tanh(x)"),
)


def _math_row(name: str, reference, arity: int = 1) -> OpDef:
    """A transcendental function, computed by its body in mathfuncs.py (f16 in f32; f64 reads
    bits as u64: shader-int64)."""
    return OpDef(name, arity, "float", name, reference, body=getattr(m, f"{name}_body"),
                 description=f"numpy's {reference.__name__}")


# The array API standard's math functions beyond the operators (see mathfuncs.py)
_MATH_ROWS = (
    *(_math_row(n, getattr(np, ref)) for n, ref in (
        ("exp", "exp"), ("expm1", "expm1"), ("log", "log"), ("log1p", "log1p"),
        ("log2", "log2"), ("log10", "log10"), ("sin", "sin"), ("cos", "cos"), ("tan", "tan"),
        ("asin", "arcsin"), ("acos", "arccos"), ("atan", "arctan"), ("sinh", "sinh"),
        ("cosh", "cosh"), ("asinh", "arcsinh"), ("acosh", "arccosh"), ("atanh", "arctanh"))),
    _math_row("atan2", np.arctan2, 2),
    _math_row("logaddexp", np.logaddexp, 2),
    OpDef("erf", 1, "float", "erf", matherf.erf_reference, body=matherf.erf_body,
          description="the error function (math.erf)"),
    # exact in every float dtype (f64's bits need shader-int64: copysign, signbit, nextafter)
    OpDef("sqrt", 1, "float", "sqrt(x)", np.sqrt, body=m.sqrt_body),
    OpDef("hypot", 2, "float", "hypot", np.hypot, body=m.hypot_body),
    OpDef("copysign", 2, "float", "copysign", np.copysign, body=m.copysign_body),
    OpDef("nextafter", 2, "float", "nextafter", np.nextafter, body=m.nextafter_body),
    OpDef("reciprocal", 1, "float", "select(${V}(1) / x, ${V}(0.25) / (x * 0.25), "
          "abs(x) > ${V}(${big}))", np.reciprocal, description="1 / a"),
    # every dtype: integers are their own floor, ceil, trunc and round
    *(OpDef(n, 1, "any", n, getattr(np, ref), body=getattr(m, f"{n}_body"))
      for n, ref in (("floor", "floor"), ("ceil", "ceil"), ("trunc", "trunc"),
                     ("round", "round"), ("sign", "sign"))),
    OpDef("square", 1, "any", "x * x", np.square, description="a * a"),
    OpDef("isnan", 1, "compare", "${nan_x}", np.isnan, wgsl_int="false"),
    OpDef("isinf", 1, "compare", m.is_inf("x", "f32"), np.isinf,
          wgsl_f64=m.is_inf("x", "f64"), wgsl_int="false"),
    OpDef("isfinite", 1, "compare", "(bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u",
          np.isfinite, wgsl_f64=f"!({m.is_inf('x', 'f64')}) && !(${{nan_x}})",
          wgsl_int="true"),
    OpDef("signbit", 1, "float_test", m.signbit_expr("f32"), np.signbit,
          wgsl_f64=m.signbit_expr("f64")),
    # integers' bits (u8 lanes computed in u32 and masked)
    OpDef("bitwise_and", 2, "integer", "x & y", np.bitwise_and, description="a & b"),
    OpDef("bitwise_or", 2, "integer", "x | y", np.bitwise_or, description="a | b"),
    OpDef("bitwise_xor", 2, "integer", "x ^ y", np.bitwise_xor, description="a ^ b"),
    OpDef("bitwise_invert", 1, "integer", "~x", np.invert, description="~a"),
    OpDef("bitwise_left_shift", 2, "integer", "x << y", np.left_shift,
          body=m.left_shift_body, description="a << b (0 once b reaches the width)"),
    OpDef("bitwise_right_shift", 2, "integer", "x >> y", np.right_shift,
          body=m.right_shift_body, description="a >> b (arithmetic for signed integers)"),
    # complex64 and complex128 (see mathcomplex.py; named for complex64, whose rows they were)
    *(OpDef(f"{n}_c64", 1, "complex", n, getattr(np, n), body=getattr(mc, f"c{n}_body"),
            description=f"numpy's {n} of complex numbers") for n in (
                "exp", "log", "log2", "log10", "sqrt", "sinh", "cosh", "tanh", "sin", "cos",
                "tan", "expm1", "log1p", "sign")),
    *(OpDef(f"{n}_c64", 1, "complex", n, getattr(np, ref), body=getattr(mi, f"c{n}_body"),
            description=f"numpy's {ref} of complex numbers") for n, ref in (
                ("asinh", "arcsinh"), ("asin", "arcsin"), ("acosh", "arccosh"),
                ("acos", "arccos"), ("atanh", "arctanh"), ("atan", "arctan"))),
)

OPS: dict[str, OpDef] = {row.name: row for row in _ROWS + _MATH_ROWS}
