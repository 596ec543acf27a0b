"""The WGSL statements of the op table's math functions (exp, log, trigonometry, rounding, bits):
each ``body(dt, w)`` is the body of ``fn op(x[, y]) -> w`` for operands of dtype ``dt``
computed in work type ``w`` (f32 for f16 and f32, f64 for f64).

WGSL's transcendental builtins are only loosely specified (sin is 2^-11 absolute in [-pi, pi],
log 2^-21 absolute near 1, exp 3 + 2|x| ulp; nan and inf undefined), GPUs use fast
approximations, and Vulkan has none for f64: exp, log, sin, cos, tan, atan and asin here are
range reductions and polynomials (mathkernels.py) that stay within a few ulp everywhere, with
the standard's special cases (nan, ±inf, ±0) handled first and nan, inf and signs read from
the bits (NVIDIA's compiler assumes no nan in comparisons; lavapipe's ignores the sign of
zero). f64 reads its bits as u64 (shader-int64). sqrt, floor, ceil, trunc and round (half to
even) are exact builtins."""

from __future__ import annotations

from ...dtypes import DType
from ..core.base import wgsl_is_nan
from .mathkernels import (
    PI,
    PIO2,
    PIO4,
    K,
    asin_poly,
    atan_of,
    bits,
    exp_of,
    expm1_of,
    flip_sign,
    indent,
    log1p_of,
    log_of,
    log_parts,
    reduce_pio2,
    sincos,
    with_sign,
)

_F64_MAX = "f64(1.7976931348623157e308)"


def nan(w: str) -> str:
    return f"{w}(bitcast<f32>(0x7fc00000u))"


def inf(w: str) -> str:
    return f"{w}(bitcast<f32>(0x7f800000u))"


def is_inf(v: str, w: str) -> str:
    """WGSL: whether ``v`` (f32 or f64) is ±inf; by its bits in f32."""
    if w == "f64":
        return f"(abs({v}) > {_F64_MAX})"
    return f"((bitcast<u32>({v}) & 0x7fffffffu) == 0x7f800000u)"


def _lines(*parts: str) -> str:
    return "\n    ".join(parts)


def _special(*cases: tuple[str, str]) -> list[str]:
    return [f"if ({cond}) {{ return {value}; }}" for cond, value in cases]


def _is_nan(w: str, *names: str) -> str:
    return " || ".join(wgsl_is_nan(n, w) for n in names)


# -- exp and log ----------------------------------------------------------------------------
def exp_body(dt: DType, w: str) -> str:
    k = K[w]
    return _lines(*_special((_is_nan(w, "x"), "x"), (f"x > {k['exp_max']}", inf(w)),
                            (f"x < {k['exp_min']}", f"{w}(0)")),
                  f"var r = {w}(0);", *exp_of("x", "r", w), "return r;")


def expm1_body(dt: DType, w: str) -> str:
    k = K[w]
    return _lines(*_special((_is_nan(w, "x"), "x"), (f"x > {k['exp_max']}", inf(w))),
                  f"var r = {w}(0);",
                  f"if (x > {k['em1_big']}) {{", *indent(exp_of("x", "r", w)), "    return r;",
                  "}", *expm1_of("x", "r", w), "return r;")


def _log_special(w: str) -> list[str]:
    return _special((_is_nan(w, "x"), "x"), (f"x == {w}(0)", f"-{inf(w)}"),
                    (f"x < {w}(0)", nan(w)), (is_inf("x", w), "x"))


def log_body(dt: DType, w: str) -> str:
    return _lines(*_log_special(w), f"var r = {w}(0);", *log_of("x", "r", w), "return r;")


def log2_body(dt: DType, w: str) -> str:
    return _lines(*_log_special(w), *log_parts("x", w),
                  "return l_e + l_m * 1.4426950408889634;")


def log10_body(dt: DType, w: str) -> str:
    hi, lo = (("0.301029995663611771306", "3.69423907715893078616e-13") if w == "f64" else
              ("0.30102920532", "7.9034151668e-07"))
    return _lines(*_log_special(w), *log_parts("x", w),
                  f"return l_e * {hi} + (l_e * {lo} + l_m * 0.4342944819032518);")


def log1p_body(dt: DType, w: str) -> str:
    return _lines(*_special((_is_nan(w, "x"), "x"), ("x == -1.0", f"-{inf(w)}"),
                            ("x < -1.0", nan(w)), (is_inf("x", w), "x")),
                  f"var r = {w}(0);", *log1p_of("x", "r", w), "return r;")


def logaddexp_body(dt: DType, w: str) -> str:
    """log(exp(x) + exp(y)) = max + log1p(exp(-|x - y|)); +inf wins over anything but nan."""
    return _lines(*_special((_is_nan(w, "x", "y"), nan(w)),
                            (f"x == {inf(w)} || y == {inf(w)}", inf(w))),
                  "let m = max(x, y);",
                  f"if (m == -{inf(w)}) {{ return m; }}",
                  "let d = -abs(x - y);",
                  f"var e = {w}(0);",
                  f"if (d > {K[w]['exp_min']}) {{", *indent(exp_of("d", "e", w)), "}",
                  f"var l = {w}(0);", *log1p_of("e", "l", w), "return m + l;")


# -- hyperbolic -----------------------------------------------------------------------------
def sinh_body(dt: DType, w: str) -> str:
    k = K[w]
    return _lines(*_special((_is_nan(w, "x"), "x"), (is_inf("x", w), "x"),
                            (f"abs(x) < {k['tiny']}", "x")),
                  "let a = abs(x);",
                  f"var r = {w}(0);",
                  f"if (a > {k['em1_big']}) {{",
                  f"    if (a > {k['half_max']}) {{ return {with_sign(inf(w), 'x', w)}; }}",
                  *indent(exp_of("a", "r", w, half=True)),
                  "} else {",
                  f"    var m = {w}(0);",
                  *indent(expm1_of("a", "m", w)),
                  "    r = 0.5 * (m + m / (m + 1.0));",
                  "}",
                  f"return {with_sign('r', 'x', w)};")


def cosh_body(dt: DType, w: str) -> str:
    k = K[w]
    return _lines(*_special((_is_nan(w, "x"), "x"), (is_inf("x", w), inf(w))),
                  "let a = abs(x);",
                  f"var r = {w}(0);",
                  f"if (a > {k['em1_big']}) {{",
                  f"    if (a > {k['half_max']}) {{ return {inf(w)}; }}",
                  *indent(exp_of("a", "r", w, half=True)),
                  "    return r;",
                  "}",
                  *exp_of("a", "r", w),
                  "return 0.5 * (r + 1.0 / r);")


def tanh_body(dt: DType, w: str) -> str:
    """expm1(2|x|) / (expm1(2|x|) + 2), accurate near 0 and 1 alike (fdlibm's tanh)."""
    k = K[w]
    return _lines(*_special((_is_nan(w, "x"), "x"), (f"abs(x) < {k['tiny']}", "x")),
                  "let a = abs(x);",
                  f"var r = {w}(1);",
                  f"if (a < {k['tanh_one']}) {{",
                  f"    var m = {w}(0);",
                  "    let a2 = a + a;",
                  *indent(expm1_of("a2", "m", w)),
                  "    r = m / (m + 2.0);",
                  "}",
                  f"return {with_sign('r', 'x', w)};")


def asinh_body(dt: DType, w: str) -> str:
    k = K[w]
    return _lines(*_special((_is_nan(w, "x"), "x"), (is_inf("x", w), "x"),
                            (f"abs(x) < {k['tiny']}", "x")),
                  "let a = abs(x);",
                  f"var r = {w}(0);",
                  f"if (a > {k['big']}) {{",
                  *indent(log_of("a", "r", w)),
                  "    r = r + 0.6931471805599453;",
                  "} else {",
                  "    let t = a + a * a / (1.0 + sqrt(1.0 + a * a));",
                  *indent(log1p_of("t", "r", w)),
                  "}",
                  f"return {with_sign('r', 'x', w)};")


def acosh_body(dt: DType, w: str) -> str:
    return _lines(*_special((_is_nan(w, "x"), "x"), ("x < 1.0", nan(w)), (is_inf("x", w), "x")),
                  f"var r = {w}(0);",
                  f"if (x > {K[w]['big']}) {{",
                  *indent(log_of("x", "r", w)),
                  "    return r + 0.6931471805599453;",
                  "}",
                  "var t = x - 1.0;",
                  "if (x > 2.0) {",
                  "    t = x + x - 1.0 / (x + sqrt(x * x - 1.0)) - 1.0;",
                  "} else {",
                  "    t = t + sqrt(2.0 * t + t * t);",
                  "}",
                  *log1p_of("t", "r", w), "return r;")


def atanh_body(dt: DType, w: str) -> str:
    return _lines(*_special((_is_nan(w, "x"), "x"), ("abs(x) > 1.0", nan(w)),
                            ("abs(x) == 1.0", with_sign(inf(w), "x", w)),
                            (f"abs(x) < {K[w]['tiny']}", "x")),
                  "let a = abs(x);",
                  "var t = (a + a) / (1.0 - a);",
                  "if (a < 0.5) {",
                  "    t = a + a + (a + a) * a / (1.0 - a);",
                  "}",
                  f"var r = {w}(0);", *log1p_of("t", "r", w),
                  f"return {with_sign('0.5 * r', 'x', w)};")


# -- trigonometry ---------------------------------------------------------------------------
def _trig_body(which: str):
    """sin, cos or tan of |x| after the reduction by pi/2, the sign put back (sin, tan)."""
    def body(dt: DType, w: str) -> str:
        small = f"{w}(1)" if which == "cos" else "x"
        lines = [*_special((f"{_is_nan(w, 'x')} || {is_inf('x', w)}", nan(w)),
                           (f"abs(x) < {K[w]['tiny']}", small)),
                 "let a = abs(x);", *reduce_pio2("a", w), *sincos("t_r", "c_", w)]
        odd = "(t_q & 1u) == 1u"
        if which == "sin":
            lines += [f"var r = select(c_s, c_c, {odd});", "r = select(r, -r, t_q >= 2u);",
                      f"return {flip_sign('r', 'x', w)};"]
        elif which == "cos":
            lines += [f"let r = select(c_c, c_s, {odd});",
                      "return select(r, -r, t_q == 1u || t_q == 2u);"]
        elif w == "f64":
            lines += [f"let r = select(c_s / c_c, -c_c / c_s, {odd});",
                      f"return {flip_sign('r', 'x', w)};"]
        else:  # Cephes's tanf: its own polynomial (sin / cos loses an ulp or two more)
            lines = [*lines[:-len(sincos("t_r", "c_", w))],
                     "let z = t_r * t_r;",
                     "var r = (((((0.00938540185543 * z + 0.00311992232697) * z + "
                     "0.0244301354525) * z + 0.0534112807005) * z + 0.133387994085) * z + "
                     "0.333331568548) * z * t_r + t_r;",
                     f"r = select(r, -1.0 / r, {odd});",
                     f"return {flip_sign('r', 'x', w)};"]
        return _lines(*lines)
    return body


sin_body, cos_body, tan_body = _trig_body("sin"), _trig_body("cos"), _trig_body("tan")


def atan_body(dt: DType, w: str) -> str:
    return _lines(*_special((_is_nan(w, "x"), "x")),
                  f"var r = {w}(0);", *atan_of("abs(x)", "r", w),
                  f"return {with_sign('r', 'x', w)};")


def asin_body(dt: DType, w: str) -> str:
    return _lines(*_special((_is_nan(w, "x"), "x"), ("abs(x) > 1.0", nan(w)),
                            (f"abs(x) < {K[w]['tiny']}", "x")),
                  "let a = abs(x);",
                  f"var r = {w}(0);",
                  "if (a > 0.5) {",
                  "    let z = 0.5 * (1.0 - a);",
                  "    let s = sqrt(z);",
                  f"    r = {PIO2} - 2.0 * {asin_poly('s', 'z', w)};",
                  "} else {",
                  "    let z = a * a;",
                  f"    r = {asin_poly('a', 'z', w)};",
                  "}",
                  f"return {with_sign('r', 'x', w)};")


def acos_body(dt: DType, w: str) -> str:
    return _lines(*_special((_is_nan(w, "x"), "x"), ("abs(x) > 1.0", nan(w))),
                  "if (x < -0.5) {",
                  "    let z = 0.5 * (1.0 + x);",
                  "    let s = sqrt(z);",
                  f"    return {PI} - 2.0 * {asin_poly('s', 'z', w)};",
                  "}",
                  "if (x > 0.5) {",
                  "    let z = 0.5 * (1.0 - x);",
                  "    let s = sqrt(z);",
                  f"    return 2.0 * {asin_poly('s', 'z', w)};",
                  "}",
                  "let z = x * x;",
                  f"return {PIO2} - {asin_poly('x', 'z', w)};")


def atan2_body(dt: DType, w: str) -> str:
    """atan2(x1, x2) with x1 (the ordinate) as x and x2 as y: the standard's table of ±0 and
    ±inf, then atan(|x1 / x2|) moved to its quadrant; the sign is x1's."""
    u, sign, _ = bits(w)
    return _lines(*_special((_is_nan(w, "x", "y"), nan(w))),
                  f"let left = (bitcast<{u}>(y) & {sign}) != {u}(0);",
                  "let ay = abs(x);",
                  "let ax = abs(y);",
                  f"var r = {w}(0);",
                  "if (ay == 0.0) {",
                  f"    r = select({w}(0), {PI}, left);",
                  "} else if (ax == 0.0) {",
                  f"    r = {PIO2};",
                  f"}} else if ({is_inf('ay', w)}) {{",
                  f"    r = select({w}({PIO2}), select({w}({PIO4}), 2.356194490192345, left), "
                  f"{is_inf('ax', w)});",
                  f"}} else if ({is_inf('ax', w)}) {{",
                  f"    r = select({w}(0), {PI}, left);",
                  "} else {",
                  "    let q = ay / ax;",
                  *indent(atan_of("q", "r", w)),
                  f"    r = select(r, {PI} - r, left);",
                  "}",
                  f"return {with_sign('r', 'x', w)};")


# -- exact ones: every float dtype, f64 included --------------------------------------------
def sqrt_body(dt: DType, w: str) -> str:
    return _lines(*_special((f"{wgsl_is_nan('x', w)} || x == {w}(0)", "x"),
                            (f"x < {w}(0)", nan(w)), (is_inf("x", w), "x")),
                  "return sqrt(x);")


def _rounding_body(fn: str):
    def body(dt: DType, w: str) -> str:
        if not dt.is_float:
            return "return x;"
        whole = "4503599627370496.0" if w == "f64" else "8388608.0"  # 2^52, 2^23
        return _lines(*_special((f"{wgsl_is_nan('x', w)} || !(abs(x) < {w}({whole}))",
                                    "x")),
                      f"return {fn}(x);")
    return body


floor_body, ceil_body = _rounding_body("floor"), _rounding_body("ceil")
trunc_body, round_body = _rounding_body("trunc"), _rounding_body("round")  # (ties to even)


def sign_body(dt: DType, w: str) -> str:
    if dt.kind == "u":
        return f"return select({w}(0), {w}(1), x > {w}(0));"
    lines = _special((wgsl_is_nan("x", w), "x")) if dt.is_float else []
    if dt.is_float:  # through an int: lavapipe's compiler gave -0 for 0 from float selects
        return _lines(*lines, f"return {w}(select(select(0, -1, x < {w}(0)), 1, x > {w}(0)));")
    return f"return select(select({w}(0), {w}(-1), x < {w}(0)), {w}(1), x > {w}(0));"


def hypot_body(dt: DType, w: str) -> str:
    """max * sqrt(1 + (min / max)^2): no overflow or underflow on the way; an infinite
    operand gives inf even beside a nan."""
    return _lines(*_special((f"{is_inf('x', w)} || {is_inf('y', w)}", inf(w)),
                            (f"{wgsl_is_nan('x', w)} || {wgsl_is_nan('y', w)}", nan(w))),
                  "let a = max(abs(x), abs(y));",
                  "let b = min(abs(x), abs(y));",
                  f"if (a == {w}(0)) {{ return {w}(0); }}",
                  "let r = b / a;",
                  f"return a * sqrt({w}(1) + r * r);")


def copysign_body(dt: DType, w: str) -> str:
    u, sign, _ = bits(w)
    return (f"return bitcast<{w}>((bitcast<{u}>(x) & ~{sign}) | "
            f"(bitcast<{u}>(y) & {sign}));")


def signbit_expr(w: str) -> str:
    u, sign, _ = bits(w)
    return f"(bitcast<{u}>(x) & {sign}) != {u}(0)"


def nextafter_body(dt: DType, w: str) -> str:
    """The next representable value of x's dtype toward y: one step of the bits (f16 steps,
    computed in f32, by the size of an f16 ulp at x)."""
    lines = _special((f"{wgsl_is_nan('x', w)} || {wgsl_is_nan('y', w)}", nan(w)),
                     ("x == y", "y"))
    if dt.name == "f16":
        return _lines(*lines,
                      "if (x == 0.0) { return select(-5.960464477539063e-08, "
                      "5.960464477539063e-08, y > 0.0); }",
                      f"if ({is_inf('x', w)}) {{ return {with_sign('65504.0', 'x', w)}; }}",
                      "let a = abs(x);",
                      "let fr = frexp(a);",
                      "let e = max(fr.exp - 1, -14);",
                      "var u = ldexp(1.0, e - 10);",
                      "let up = (y > x) == (x > 0.0);",
                      "if (!up && fr.fract == 0.5 && fr.exp - 1 > -14) { u = u * 0.5; }",
                      "var r = select(a - u, a + u, up);",
                      f"if (r > 65504.0) {{ r = {inf(w)}; }}",
                      f"return {with_sign('r', 'x', w)};")
    u, sign, one = bits(w)
    return _lines(*lines,
                  f"if (x == {w}(0)) {{ return bitcast<{w}>(select({sign} | {one}, {one}, "
                  f"y > {w}(0))); }}",
                  f"let b = bitcast<{u}>(x);",
                  f"let up = (y > x) == (x > {w}(0));",
                  f"return bitcast<{w}>(select(b - {one}, b + {one}, up));")


def maxmin_body(fn: str):
    """numpy's maximum / minimum: nan if either is (x + y is then nan)."""
    def body(dt: DType, w: str) -> str:
        if not dt.is_float:
            return f"return {fn}(x, y);"
        return _lines(*_special((f"{wgsl_is_nan('x', w)} || {wgsl_is_nan('y', w)}",
                                    "x + y")), f"return {fn}(x, y);")
    return body


# -- integers: shifts as numpy's (a count past the width, or negative, shifts everything out)
def _width(dt: DType, w: str) -> int:
    return 64 if w in ("i64", "u64") else 32


def left_shift_body(dt: DType, w: str) -> str:
    out = f"if (y >= {w}({_width(dt, w)})"
    if dt.kind == "i":
        out += f" || y < {w}(0)"
    return _lines(f"{out}) {{ return {w}(0); }}", "return x << u32(y);")


def right_shift_body(dt: DType, w: str) -> str:
    if dt.kind == "i":
        return _lines(f"if (y >= {w}({_width(dt, w)}) || y < {w}(0)) {{",
                      f"    return select({w}(0), {w}(-1), x < {w}(0));", "}",
                      "return x >> u32(y);")
    return _lines(f"if (y >= {w}({_width(dt, w)})) {{ return {w}(0); }}", "return x >> u32(y);")
