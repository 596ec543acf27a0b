"""The WGSL bodies of the op table's complex rows (exp, expm1, log, log1p, log2, log10,
sqrt, sinh, cosh, tanh, sin, cos, tan, sign): ``fn op(x: vec2<w>) -> vec2<w>`` with
x = (real, imaginary) and w the parts' type (f32 for complex64, f64 for complex128: its bits
read as u64, shader-int64), from mathkernels' fragments of that type, with C99 Annex G's
special values (the array API standard's tables; FreeBSD's cexpf, csqrtf, csinhf, ccoshf,
ctanhf): nan, ±inf and ±0 in either part are decided first, from the bits where a sign
matters."""

from __future__ import annotations

from ...dtypes import DType
from ..core.base import wgsl_is_nan
from .mathfuncs import inf, is_inf, nan
from .mathkernels import (
    PI,
    PIO2,
    PIO4,
    K,
    atan_of,
    bits,
    exp_of,
    flip_sign,
    indent,
    log1p_of,
    log_of,
    reduce_pio2,
    sincos,
    with_sign,
)

# per parts' type: csqrt's scaling (above BIG by 1/4, below SMALL by UP, the root's factors
# 2 and DOWN), where sinh and cosh of a + bi become e^|a| / 2 and tanh ±1, atanh's 1/z
_LIMITS = {"f32": dict(big="1e37", small="1e-30", up="16777216.0", down="0.000244140625",
                       tanh="11.0", atanh="1e18"),
           "f64": dict(big="1e307", small="1e-300", up="18014398509481984.0",
                       down="7.450580596923828e-09", tanh="22.0", atanh="1e150")}


def part(dt: DType) -> str:
    """The WGSL type of complex ``dt``'s parts: f32 (complex64) or f64 (complex128)."""
    return dt.part.wgsl


def _c(v: str, w: str) -> str:
    """WGSL: the literal ``v`` typed as ``w`` (an untyped one is f32)."""
    return f"{w}({v})"


def _lines(*parts: str) -> str:
    return "\n    ".join(parts)


def _isnan(v: str, w: str) -> str:
    return wgsl_is_nan(v, w)


def _isinf(v: str, w: str) -> str:
    return is_inf(v, w)


def _negative(v: str, w: str) -> str:
    """WGSL: whether ``v``'s sign bit is set (-0.0 too)."""
    u, sign, _ = bits(w)
    return f"(bitcast<{u}>({v}) & {sign}) != {u}(0)"


def _sincos_of(v: str, s_out: str, c_out: str, w: str, p: str = "") -> list[str]:
    """s_out = sin(v), c_out = cos(v) for finite v (names prefixed by ``p``)."""
    q, k = f"{p}q_", f"{p}k_"
    return [f"let {q}a = abs({v});", *reduce_pio2(f"{q}a", w, q), *sincos(f"{q}r", k, w),
            f"var {s_out} = select({k}s, {k}c, ({q}q & 1u) == 1u);",
            f"{s_out} = select({s_out}, -{s_out}, {q}q >= 2u);",
            f"{s_out} = {flip_sign(s_out, v, w)};",
            f"var {c_out} = select({k}c, {k}s, ({q}q & 1u) == 1u);",
            f"{c_out} = select({c_out}, -{c_out}, {q}q == 1u || {q}q == 2u);"]


def _real_exp(v: str, out: str, w: str) -> list[str]:
    """out = exp(v) for any v of type w (nan, ±inf too)."""
    k = K[w]
    return [f"var {out} = {v};",
            f"if ({v} > {k['exp_max']}) {{ {out} = {inf(w)}; }}",
            f"else if ({v} < {k['exp_min']}) {{ {out} = {w}(0); }}",
            f"else if (!({_isnan(v, w)})) {{", *indent(exp_of(v, out, w)), "}"]


def cexp_body(dt: DType, w: str) -> str:
    """exp(a + bi) = e^a (cos b + i sin b), e^a taken as e^(a/2) twice so that a result past
    e^88.7 with a small cos or sin stays finite (FreeBSD's cexpf's cases)."""
    w = part(dt)
    return _lines(
        "let a = x.x;",
        "let b = x.y;",
        "if (b == 0.0) {  // a real argument keeps b (and its sign)",
        *indent(_real_exp("a", "e", w)),
        "    return vec2(e, b);",
        "}",
        f"if ({_isinf('b', w)} || {_isnan('b', w)}) {{",
        f"    if (!({_isinf('a', w)})) {{ return vec2({nan(w)}, {nan(w)}); }}",
        f"    if (a < 0.0) {{ return vec2(0.0, {with_sign(_c('0.0', w), 'b', w)}); }}",
        f"    return vec2(a, {nan(w)});",
        "}",
        *_sincos_of("b", "s", "c", w),
        "if (a == 0.0) { return vec2(c, s); }",
        f"if ({_isnan('a', w)}) {{ return vec2({nan(w)}, {nan(w)}); }}",
        "let half = a * 0.5;",
        *_real_exp("half", "h", w),
        "return vec2(h * (h * c), h * (h * s));")


def _arg(y: str, x: str, out: str, w: str) -> list[str]:
    """out = atan2(y, x) with the standard's table of ±0, ±inf and nan (as mathfuncs'
    atan2)."""
    return [f"var {out} = {w}(0.0);",
            f"let g_left = {_negative(x, w)};",
            f"let g_ay = abs({y});",
            f"let g_ax = abs({x});",
            f"if ({_isnan(y, w)} || {_isnan(x, w)}) {{",
            f"    {out} = {nan(w)};",
            "} else if (g_ay == 0.0) {",
            f"    {out} = select({w}(0), {PI}, g_left);",
            "} else if (g_ax == 0.0) {",
            f"    {out} = {PIO2};",
            f"}} else if ({_isinf('g_ay', w)}) {{",
            f"    {out} = select({w}({PIO2}), select({w}({PIO4}), 2.356194490192345, g_left), "
            f"{_isinf('g_ax', w)});",
            f"}} else if ({_isinf('g_ax', w)}) {{",
            f"    {out} = select({w}(0), {PI}, g_left);",
            "} else {",
            "    let g_q = g_ay / g_ax;",
            *indent(atan_of("g_q", out, w)),
            f"    {out} = select({out}, {PI} - {out}, g_left);",
            "}",
            f"if (!({_isnan(out, w)})) {{ {out} = {with_sign(out, y, w)}; }}"]


def _clog_lines(scale: str, w: str) -> list[str]:
    """log(a + bi) = log|z| + i arg(z), both times ``scale`` (1, or 1/ln2 and 1/ln10 for
    log2 and log10: the standard's change of base); log|z| = log(m) + log1p((n/m)^2) / 2
    with m, n the larger and smaller of |a|, |b| (exact near |z| = 1, no overflow)."""
    return ["let a = x.x;",
            "let b = x.y;",
            f"var lr = {w}(0.0);",
            f"if ({_isinf('a', w)} || {_isinf('b', w)}) {{",
            f"    lr = {inf(w)};",
            f"}} else if ({_isnan('a', w)} || {_isnan('b', w)}) {{",
            f"    lr = {nan(w)};",
            "} else {",
            "    let m = max(abs(a), abs(b));",
            "    let n = min(abs(a), abs(b));",
            "    if (m == 0.0) {",
            f"        lr = -{inf(w)};",
            "    } else {",
            *indent(indent(log_of("m", "lr", w))),
            "        let r = n / m;",
            "        let rr = r * r;",
            f"        var l1 = {w}(0.0);",
            *indent(indent(log1p_of("rr", "l1", w))),
            "        lr = lr + 0.5 * l1;",
            "    }",
            "}",
            *_arg("b", "a", "th", w),
            f"return vec2(lr * {scale}, th * {scale});"]


def clog_body(dt: DType, w: str) -> str:
    return _lines(*_clog_lines("1.0", part(dt)))


def clog2_body(dt: DType, w: str) -> str:
    return _lines(*_clog_lines("1.4426950408889634", part(dt)))


def clog10_body(dt: DType, w: str) -> str:
    return _lines(*_clog_lines("0.4342944819032518", part(dt)))


def csqrt_body(dt: DType, w: str) -> str:
    """sqrt(a + bi) by Kahan's formula, t = sqrt((|a| + |z|) / 2), scaled away from overflow
    and underflow; C99's cases for ±0, ±inf and nan (musl's csqrtf)."""
    w = part(dt)
    neg_a, lim = _negative("a", w), _LIMITS[w]
    return _lines(
        "let a = x.x;",
        "let b = x.y;",
        "if (a == 0.0 && b == 0.0) { return vec2(0.0, b); }",
        f"if ({_isinf('b', w)}) {{ return vec2({inf(w)}, b); }}",
        f"if ({_isnan('a', w)}) {{ return vec2({nan(w)}, {nan(w)}); }}",
        f"if ({_isinf('a', w)}) {{",
        f"    if ({neg_a}) {{",
        f"        return vec2(select({w}(0), {nan(w)}, {_isnan('b', w)}), "
        f"{with_sign(inf(w), 'b', w)});",
        "    }",
        f"    return vec2(a, select({with_sign(_c('0.0', w), 'b', w)}, {nan(w)}, "
        f"{_isnan('b', w)}));",
        "}",
        f"if ({_isnan('b', w)}) {{ return vec2({nan(w)}, {nan(w)}); }}",
        "let m = max(abs(a), abs(b));",
        "var sa = a;",
        "var sb = b;",
        f"var s = {w}(1.0);",
        f"if (m > {lim['big']}) {{",
        "    sa = a * 0.25;",
        "    sb = b * 0.25;",
        "    s = 2.0;",
        f"}} else if (m < {lim['small']}) {{",
        f"    sa = a * {lim['up']};",
        f"    sb = b * {lim['up']};",
        f"    s = {lim['down']};",
        "}",
        "let hm = max(abs(sa), abs(sb));",
        "let hn = min(abs(sa), abs(sb));",
        "let hr = hn / hm;",
        "let h = hm * sqrt(1.0 + hr * hr);",
        "let t = sqrt((abs(sa) + h) * 0.5);",
        "if (sa >= 0.0) {",
        "    return vec2(t * s, (sb / (2.0 * t)) * s);",
        "}",
        f"return vec2((abs(sb) / (2.0 * t)) * s, {with_sign('t', 'sb', w)} * s);")


# -- hyperbolic and circular (FreeBSD's csinhf, ccoshf, ctanhf; sin(z) = -i sinh(iz),
# cos(z) = cosh(iz), tan(z) = -i tanh(iz), as C99 defines them) ----------------------------
def _ret(swap: bool):
    """The return of a hyperbolic body: (re, im), or for its circular twin -i (re + i im)."""
    if swap:
        return lambda re, im: f"return vec2({im}, -({re}));"
    return lambda re, im: f"return vec2({re}, {im});"


def _isfinite(v: str, w: str) -> str:
    if w == "f64":
        return f"((bitcast<u64>({v}) & 0x7ff0000000000000lu) != 0x7ff0000000000000lu)"
    return f"((bitcast<u32>({v}) & 0x7f800000u) != 0x7f800000u)"


def _sinh_cosh(v: str, w: str) -> list[str]:
    """sh = sinh(v), ch = cosh(v) for |v| < 9, from expm1(|v|) (no cancellation near 0)."""
    from .mathkernels import expm1_of

    return [f"let hv = abs({v});", f"var hm = {w}(0.0);", *expm1_of("hv", "hm", w),
            f"let sh = {with_sign('0.5 * (hm + hm / (hm + 1.0))', v, w)};",
            "let ch = 1.0 + 0.5 * hm * hm / (hm + 1.0);"]


def _finite_part(kind: str, ret, w: str) -> list[str]:
    """sinh or cosh of finite a + bi: (sinh a cos b, cosh a sin b) or (cosh a cos b,
    sinh a sin b); past |a| = 9 both are e^|a| / 2 (as two halves of e^(|a| / 2), so that
    a result short of overflow is not lost to one), the sign of a put back. b = ±0 keeps its
    own sign (sinh) or a's times b's (cosh), as C99."""
    im_zero = "b" if kind == "sinh" else flip_sign("b", "a", w)
    first, second = ("sh * c", "ch * s") if kind == "sinh" else ("ch * c", "sh * s")
    big = ((flip_sign("hr", "a", w), "hi") if kind == "sinh" else
           ("hr", flip_sign("hi", "a", w)))
    return [f"var s = {w}(0.0);",
            f"var c = {w}(1.0);",
            "if (b != 0.0) {",
            *indent(_sincos_of("b", "qs", "qc", w)),
            "    s = qs;",
            "    c = qc;",
            "}",
            f"var re = {w}(0.0);",
            f"var im = {w}(0.0);",
            f"if (abs(a) < {K[w]['tanh_one']}) {{",
            *indent(_sinh_cosh("a", w)),
            f"    re = {first};",
            f"    im = {second};",
            "} else {",
            "    let ha = abs(a) * 0.5;",
            *indent(_real_exp("ha", "he", w)),
            "    let hr = 0.5 * he * (he * c);",
            "    let hi = 0.5 * he * (he * s);",
            f"    re = {big[0]};",
            f"    im = {big[1]};",
            "}",
            f"if (b == 0.0) {{ im = {im_zero}; }}",
            ret("re", "im")]


def _infinite_part(kind: str, ret, w: str) -> list[str]:
    """sinh or cosh where a part is ±inf or nan (FreeBSD's cases)."""
    a_inf = _isinf("a", w)
    if kind == "sinh":
        zero_a, zero_b, inf_a = ret("a", nan(w)), ret("a", "b"), ret("a * c", f"{inf(w)} * s")
    else:
        zero_a = ret(nan(w), _c("0.0", w))
        zero_b = ret(f"select({inf(w)}, {nan(w)}, {_isnan('a', w)})",
                     f"select({flip_sign('b', 'a', w)}, b, {_isnan('a', w)})")
        inf_a = ret(f"{inf(w)} * c", "a * s")
    return [f"if (a == 0.0) {{ {zero_a} }}",  # b inf or nan
            f"if (b == 0.0) {{ {zero_b} }}",  # a inf or nan
            f"if ({_isfinite('a', w)}) {{ {ret(nan(w), nan(w))} }}",  # b inf or nan
            f"if ({a_inf}) {{",
            f"    if (!({_isfinite('b', w)})) {{ {ret(inf(w), nan(w))} }}",
            *indent(_sincos_of("b", "s", "c", w)),
            f"    {inf_a}",
            "}",
            ret(nan(w), nan(w))]


def _tanh_lines(ret, w: str) -> list[str]:
    """FreeBSD's ctanhf: +-1 past |a| = 11, else from tan b and sinh a (Kahan's formula)."""
    return [f"if (!({_isfinite('a', w)})) {{",
            f"    if ({_isnan('a', w)}) {{ {ret('a', f'select({nan(w)}, b, b == 0.0)')} }}",
            # (± 0i by b's sign, the standard's)
            f"    let one = {with_sign(_c('1.0', w), 'a', w)};",
            f"    {ret('one', with_sign(_c('0.0', w), 'b', w))}",
            "}",
            f"if (!({_isfinite('b', w)})) {{ {ret(f'select({nan(w)}, a, a == 0.0)', nan(w))} }}",
            *_sincos_of("b", "s", "c", w),
            f"if (abs(a) >= {_LIMITS[w]['tanh']}) {{",
            "    let ma = -abs(a);",
            *indent(_real_exp("ma", "em", w)),
            f"    {ret(with_sign(_c('1.0', w), 'a', w), '4.0 * s * c * em * em')}",
            "}",
            "let t = s / c;",
            "let beta = 1.0 + t * t;",
            *_sinh_cosh("a", w),
            "let rho = sqrt(1.0 + sh * sh);",
            "let den = 1.0 + beta * sh * sh;",
            ret("(beta * rho * sh) / den", "t / den")]


def _hyperbolic_body(kind: str, circular: bool):
    """The body of sinh, cosh or tanh of x, or (``circular``) of sin, cos or tan of x as the
    hyperbolic function of ix = (-x.y, x.x), its result turned back by -i (not for cos)."""
    ret = _ret(circular and kind != "cosh")
    args = ["let a = -x.y;", "let b = x.x;"] if circular else ["let a = x.x;", "let b = x.y;"]

    def body(dt: DType, w: str) -> str:
        w = part(dt)
        if kind == "tanh":
            return _lines(*args, *_tanh_lines(ret, w))
        return _lines(*args, f"if ({_isfinite('a', w)} && {_isfinite('b', w)}) {{",
                      *indent(_finite_part(kind, ret, w)), "}", *_infinite_part(kind, ret, w))
    return body


csinh_body = _hyperbolic_body("sinh", False)
ccosh_body = _hyperbolic_body("cosh", False)
ctanh_body = _hyperbolic_body("tanh", False)
csin_body = _hyperbolic_body("sinh", True)
ccos_body = _hyperbolic_body("cosh", True)
ctan_body = _hyperbolic_body("tanh", True)


# -- expm1 and log1p: exp and log beside 1, without its cancellation --------------------------
def cexpm1_body(dt: DType, w: str) -> str:
    """expm1(a + bi) = (expm1(a) cos b - 2 sin²(b/2)) + i e^a sin b, with exp's cases moved
    by -1 (the standard's table)."""
    from .mathkernels import expm1_of

    w = part(dt)
    return _lines(
        "let a = x.x;",
        "let b = x.y;",
        "if (b == 0.0) {  // a real argument keeps b (and its sign)",
        f"    if ({_isnan('a', w)}) {{ return vec2(a, b); }}",
        "    if (a == 0.0) { return vec2(0.0, b); }  // (+0 for ±0: the standard's)",
        f"    if (a > {K[w]['exp_max']}) {{ return vec2({inf(w)}, b); }}",
        f"    var m = {w}(0.0);",
        *indent(expm1_of("a", "m", w)),
        "    return vec2(m, b);",
        "}",
        f"if ({_isinf('b', w)} || {_isnan('b', w)}) {{",
        f"    if (!({_isinf('a', w)})) {{ return vec2({nan(w)}, {nan(w)}); }}",
        f"    if (a < 0.0) {{ return vec2(-1.0, {with_sign(_c('0.0', w), 'b', w)}); }}",
        f"    return vec2(a, {nan(w)});",
        "}",
        f"if ({_isnan('a', w)}) {{ return vec2({nan(w)}, {nan(w)}); }}",
        *_sincos_of("b", "s", "c", w),
        f"if (a == -{inf(w)}) {{ return vec2(-1.0, {with_sign(_c('0.0', w), 's', w)}); }}",
        f"if (abs(a) < {K[w]['em1_big']}) {{",
        f"    var m = {w}(0.0);",
        *indent(expm1_of("a", "m", w)),
        "    let hb = b * 0.5;",
        *indent(_sincos_of("hb", "s2", "c2", w, "h")),
        *indent(_real_exp("a", "ea", w)),  # (not m + 1: that cancels for a well below 0)
        "    return vec2(m * c - 2.0 * s2 * s2, ea * s);",
        "}",
        "let half = a * 0.5;",
        *_real_exp("half", "h", w),
        "return vec2(h * (h * c) - 1.0, h * (h * s));")


def clog1p_body(dt: DType, w: str) -> str:
    """log1p(a + bi) = log|1 + z| + i arg(1 + z), log|1 + z| as log1p(a (2 + a) + b²) / 2
    near 0 (exact as z goes to 0); log's lines on 1 + z past |z| = 2^20 and where
    |1 + z|² < 1/2 (1 + a is exact there, and a (2 + a) + b² would cancel)."""
    w = part(dt)
    big = ["let a = 1.0 + x.x;", "let b = x.y;", *_clog_lines("1.0", w)[2:]]
    return _lines(
        f"if (max(abs(x.x), abs(x.y)) > 1048576.0 || !({_isfinite('x.x', w)}) || "
        f"!({_isfinite('x.y', w)}) || x.x * (2.0 + x.x) + x.y * x.y < -0.5) {{",
        *indent(big),
        "}",
        "let a = x.x;",
        "let b = x.y;",
        "let t = max(a * (2.0 + a) + b * b, -1.0);",
        f"var lr = -{inf(w)};",
        "if (t > -1.0) {",
        *indent(log1p_of("t", "lr", w)),
        "    lr = 0.5 * lr;",
        "}",
        "let a1 = 1.0 + a;",
        *_arg("b", "a1", "th", w),
        "return vec2(lr, th);")


def csign_body(dt: DType, w: str) -> str:
    """sign(z) = z / |z|: 0 for 0, nan if a part is nan, else complex division's values (an
    infinite part over |z| = inf is nan, a finite one 0)."""
    w = part(dt)
    return _lines(
        "let a = x.x;",
        "let b = x.y;",
        f"if ({_isnan('a', w)} || {_isnan('b', w)}) {{ return vec2({nan(w)}, {nan(w)}); }}",
        "if (a == 0.0 && b == 0.0) { return vec2(0.0, 0.0); }",
        "let m = max(abs(a), abs(b));",
        "var h = m;",
        f"if (!({_isinf('m', w)})) {{",
        "    let r = min(abs(a), abs(b)) / m;",
        "    h = m * sqrt(1.0 + r * r);",
        "}",
        "return vec2(a / h, b / h);")
