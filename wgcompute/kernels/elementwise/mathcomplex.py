"""The WGSL bodies of the op table's complex64 rows (exp, expm1, log, log1p, log2, log10,
sqrt, sinh, cosh, tanh, sin, cos, tan, sign): ``fn op(x: vec2<f32>) -> vec2<f32>`` with
x = (real, imaginary), from mathkernels' f32 fragments, with C99 Annex G's special values (the
array API standard's tables; FreeBSD's cexpf, csqrtf, csinhf, ccoshf, ctanhf): nan, ±inf and
±0 in either part are decided first, from the bits where a sign matters."""

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
    exp_of,
    flip_sign,
    indent,
    log1p_of,
    log_of,
    reduce_pio2,
    sincos,
    with_sign,
)

_W = "f32"
NAN, INF = nan(_W), inf(_W)


def _lines(*parts: str) -> str:
    return "\n    ".join(parts)


def _isnan(v: str) -> str:
    return wgsl_is_nan(v, _W)


def _isinf(v: str) -> str:
    return is_inf(v, _W)


def _sincos_of(v: str, s_out: str, c_out: str, p: str = "") -> list[str]:
    """s_out = sin(v), c_out = cos(v) for finite v (names prefixed by ``p``)."""
    q, k = f"{p}q_", f"{p}k_"
    return [f"let {q}a = abs({v});", *reduce_pio2(f"{q}a", _W, q), *sincos(f"{q}r", k, _W),
            f"var {s_out} = select({k}s, {k}c, ({q}q & 1u) == 1u);",
            f"{s_out} = select({s_out}, -{s_out}, {q}q >= 2u);",
            f"{s_out} = {flip_sign(s_out, v, _W)};",
            f"var {c_out} = select({k}c, {k}s, ({q}q & 1u) == 1u);",
            f"{c_out} = select({c_out}, -{c_out}, {q}q == 1u || {q}q == 2u);"]


def _real_exp(v: str, out: str) -> list[str]:
    """out = exp(v) for any f32 v (nan, ±inf too)."""
    k = K[_W]
    return [f"var {out} = {v};",
            f"if ({v} > {k['exp_max']}) {{ {out} = {INF}; }}",
            f"else if ({v} < {k['exp_min']}) {{ {out} = 0.0; }}",
            f"else if (!({_isnan(v)})) {{", *indent(exp_of(v, out, _W)), "}"]


def cexp_body(dt: DType, w: str) -> str:
    """exp(a + bi) = e^a (cos b + i sin b), e^a taken as e^(a/2) twice so that a result past
    e^88.7 with a small cos or sin stays finite (FreeBSD's cexpf's cases)."""
    return _lines(
        "let a = x.x;",
        "let b = x.y;",
        "if (b == 0.0) {  // a real argument keeps b (and its sign)",
        *indent(_real_exp("a", "e")),
        "    return vec2<f32>(e, b);",
        "}",
        f"if ({_isinf('b')} || {_isnan('b')}) {{",
        f"    if (!({_isinf('a')})) {{ return vec2<f32>({NAN}, {NAN}); }}",
        f"    if (a < 0.0) {{ return vec2<f32>(0.0, {with_sign('0.0', 'b', _W)}); }}",
        f"    return vec2<f32>(a, {NAN});",
        "}",
        *_sincos_of("b", "s", "c"),
        "if (a == 0.0) { return vec2<f32>(c, s); }",
        f"if ({_isnan('a')}) {{ return vec2<f32>({NAN}, {NAN}); }}",
        "let half = a * 0.5;",
        *_real_exp("half", "h"),
        "return vec2<f32>(h * (h * c), h * (h * s));")


def _arg(y: str, x: str, out: str) -> list[str]:
    """out = atan2(y, x) with the standard's table of ±0, ±inf and nan (as mathfuncs'
    atan2)."""
    return [f"var {out} = 0.0;",
            f"let g_left = (bitcast<u32>({x}) & 0x80000000u) != 0u;",
            f"let g_ay = abs({y});",
            f"let g_ax = abs({x});",
            f"if ({_isnan(y)} || {_isnan(x)}) {{",
            f"    {out} = {NAN};",
            "} else if (g_ay == 0.0) {",
            f"    {out} = select(0.0, {PI}, g_left);",
            "} else if (g_ax == 0.0) {",
            f"    {out} = {PIO2};",
            f"}} else if ({_isinf('g_ay')}) {{",
            f"    {out} = select({PIO2}, select({PIO4}, 2.356194490192345, g_left), "
            f"{_isinf('g_ax')});",
            f"}} else if ({_isinf('g_ax')}) {{",
            f"    {out} = select(0.0, {PI}, g_left);",
            "} else {",
            "    let g_q = g_ay / g_ax;",
            *indent(atan_of("g_q", out, _W)),
            f"    {out} = select({out}, {PI} - {out}, g_left);",
            "}",
            f"if (!({_isnan(out)})) {{ {out} = {with_sign(out, y, _W)}; }}"]


def _clog_lines(scale: str) -> list[str]:
    """log(a + bi) = log|z| + i arg(z), both times ``scale`` (1, or 1/ln2 and 1/ln10 for
    log2 and log10: the standard's change of base); log|z| = log(m) + log1p((n/m)^2) / 2
    with m, n the larger and smaller of |a|, |b| (exact near |z| = 1, no overflow)."""
    return ["let a = x.x;",
            "let b = x.y;",
            "var lr = 0.0;",
            f"if ({_isinf('a')} || {_isinf('b')}) {{",
            f"    lr = {INF};",
            f"}} else if ({_isnan('a')} || {_isnan('b')}) {{",
            f"    lr = {NAN};",
            "} else {",
            "    let m = max(abs(a), abs(b));",
            "    let n = min(abs(a), abs(b));",
            "    if (m == 0.0) {",
            f"        lr = -{INF};",
            "    } else {",
            *indent(indent(log_of("m", "lr", _W))),
            "        let r = n / m;",
            "        let rr = r * r;",
            "        var l1 = 0.0;",
            *indent(indent(log1p_of("rr", "l1", _W))),
            "        lr = lr + 0.5 * l1;",
            "    }",
            "}",
            *_arg("b", "a", "th"),
            f"return vec2<f32>(lr * {scale}, th * {scale});"]


def clog_body(dt: DType, w: str) -> str:
    return _lines(*_clog_lines("1.0"))


def clog2_body(dt: DType, w: str) -> str:
    return _lines(*_clog_lines("1.4426950408889634"))


def clog10_body(dt: DType, w: str) -> str:
    return _lines(*_clog_lines("0.4342944819032518"))


def csqrt_body(dt: DType, w: str) -> str:
    """sqrt(a + bi) by Kahan's formula, t = sqrt((|a| + |z|) / 2), scaled away from overflow
    and underflow; C99's cases for ±0, ±inf and nan (musl's csqrtf)."""
    neg_a = "(bitcast<u32>(a) & 0x80000000u) != 0u"
    return _lines(
        "let a = x.x;",
        "let b = x.y;",
        "if (a == 0.0 && b == 0.0) { return vec2<f32>(0.0, b); }",
        f"if ({_isinf('b')}) {{ return vec2<f32>({INF}, b); }}",
        f"if ({_isnan('a')}) {{ return vec2<f32>({NAN}, {NAN}); }}",
        f"if ({_isinf('a')}) {{",
        f"    if ({neg_a}) {{",
        f"        return vec2<f32>(select(0.0, {NAN}, {_isnan('b')}), {with_sign(INF, 'b', _W)});",
        "    }",
        f"    return vec2<f32>(a, select({with_sign('0.0', 'b', _W)}, {NAN}, {_isnan('b')}));",
        "}",
        f"if ({_isnan('b')}) {{ return vec2<f32>({NAN}, {NAN}); }}",
        "let m = max(abs(a), abs(b));",
        "var sa = a;",
        "var sb = b;",
        "var s = 1.0;",
        "if (m > 1e37) {",
        "    sa = a * 0.25;",
        "    sb = b * 0.25;",
        "    s = 2.0;",
        "} else if (m < 1e-30) {",
        "    sa = a * 16777216.0;",
        "    sb = b * 16777216.0;",
        "    s = 0.000244140625;",
        "}",
        "let hm = max(abs(sa), abs(sb));",
        "let hn = min(abs(sa), abs(sb));",
        "let hr = hn / hm;",
        "let h = hm * sqrt(1.0 + hr * hr);",
        "let t = sqrt((abs(sa) + h) * 0.5);",
        "if (sa >= 0.0) {",
        "    return vec2<f32>(t * s, (sb / (2.0 * t)) * s);",
        "}",
        f"return vec2<f32>((abs(sb) / (2.0 * t)) * s, {with_sign('t', 'sb', _W)} * s);")


# -- hyperbolic and circular (FreeBSD's csinhf, ccoshf, ctanhf; sin(z) = -i sinh(iz),
# cos(z) = cosh(iz), tan(z) = -i tanh(iz), as C99 defines them) ----------------------------
def _ret(swap: bool):
    """The return of a hyperbolic body: (re, im), or for its circular twin -i (re + i im)."""
    if swap:
        return lambda re, im: f"return vec2<f32>({im}, -({re}));"
    return lambda re, im: f"return vec2<f32>({re}, {im});"


def _isfinite(v: str) -> str:
    return f"((bitcast<u32>({v}) & 0x7f800000u) != 0x7f800000u)"


def _sinh_cosh(v: str) -> list[str]:
    """sh = sinh(v), ch = cosh(v) for |v| < 9, from expm1(|v|) (no cancellation near 0)."""
    from .mathkernels import expm1_of

    return [f"let hv = abs({v});", "var hm = 0.0;", *expm1_of("hv", "hm", _W),
            f"let sh = {with_sign('0.5 * (hm + hm / (hm + 1.0))', v, _W)};",
            "let ch = 1.0 + 0.5 * hm * hm / (hm + 1.0);"]


def _finite_part(kind: str, ret) -> list[str]:
    """sinh or cosh of finite a + bi: (sinh a cos b, cosh a sin b) or (cosh a cos b,
    sinh a sin b); past |a| = 9 both are e^|a| / 2 (as two halves of e^(|a| / 2), so that
    a result short of overflow is not lost to one), the sign of a put back. b = ±0 keeps its
    own sign (sinh) or a's times b's (cosh), as C99."""
    im_zero = "b" if kind == "sinh" else flip_sign("b", "a", _W)
    first, second = ("sh * c", "ch * s") if kind == "sinh" else ("ch * c", "sh * s")
    big = ((flip_sign("hr", "a", _W), "hi") if kind == "sinh" else
           ("hr", flip_sign("hi", "a", _W)))
    return ["var s = 0.0;",
            "var c = 1.0;",
            "if (b != 0.0) {",
            *indent(_sincos_of("b", "qs", "qc")),
            "    s = qs;",
            "    c = qc;",
            "}",
            "var re = 0.0;",
            "var im = 0.0;",
            "if (abs(a) < 9.0) {",
            *indent(_sinh_cosh("a")),
            f"    re = {first};",
            f"    im = {second};",
            "} else {",
            "    let ha = abs(a) * 0.5;",
            *indent(_real_exp("ha", "he")),
            "    let hr = 0.5 * he * (he * c);",
            "    let hi = 0.5 * he * (he * s);",
            f"    re = {big[0]};",
            f"    im = {big[1]};",
            "}",
            f"if (b == 0.0) {{ im = {im_zero}; }}",
            ret("re", "im")]


def _infinite_part(kind: str, ret) -> list[str]:
    """sinh or cosh where a part is ±inf or nan (FreeBSD's cases)."""
    a_inf = "((bitcast<u32>(a) & 0x7fffffffu) == 0x7f800000u)"
    if kind == "sinh":
        zero_a, zero_b, inf_a = ret("a", NAN), ret("a", "b"), ret("a * c", f"{INF} * s")
    else:
        zero_a = ret(NAN, "0.0")
        zero_b = ret(f"select({INF}, {NAN}, {_isnan('a')})",
                     f"select({flip_sign('b', 'a', _W)}, b, {_isnan('a')})")
        inf_a = ret(f"{INF} * c", "a * s")
    return [f"if (a == 0.0) {{ {zero_a} }}",  # b inf or nan
            f"if (b == 0.0) {{ {zero_b} }}",  # a inf or nan
            f"if ({_isfinite('a')}) {{ {ret(NAN, NAN)} }}",  # b inf or nan
            f"if ({a_inf}) {{",
            f"    if (!({_isfinite('b')})) {{ {ret(INF, NAN)} }}",
            *indent(_sincos_of("b", "s", "c")),
            f"    {inf_a}",
            "}",
            ret(NAN, NAN)]


def _tanh_lines(ret) -> list[str]:
    """FreeBSD's ctanhf: +-1 past |a| = 11, else from tan b and sinh a (Kahan's formula)."""
    return [f"if (!({_isfinite('a')})) {{",
            f"    if ({_isnan('a')}) {{ {ret('a', f'select({NAN}, b, b == 0.0)')} }}",
            f"    let one = {with_sign('1.0', 'a', _W)};",  # (± 0i by b's sign, the standard's)
            f"    {ret('one', with_sign('0.0', 'b', _W))}",
            "}",
            f"if (!({_isfinite('b')})) {{ {ret(f'select({NAN}, a, a == 0.0)', NAN)} }}",
            *_sincos_of("b", "s", "c"),
            "if (abs(a) >= 11.0) {",
            "    let ma = -abs(a);",
            *indent(_real_exp("ma", "em")),
            f"    {ret(with_sign('1.0', 'a', _W), '4.0 * s * c * em * em')}",
            "}",
            "let t = s / c;",
            "let beta = 1.0 + t * t;",
            *_sinh_cosh("a"),
            "let rho = sqrt(1.0 + sh * sh);",
            "let den = 1.0 + beta * sh * sh;",
            ret("(beta * rho * sh) / den", "t / den")]


def _hyperbolic_body(kind: str, circular: bool):
    """The body of sinh, cosh or tanh of x, or (``circular``) of sin, cos or tan of x as the
    hyperbolic function of ix = (-x.y, x.x), its result turned back by -i (not for cos)."""
    ret = _ret(circular and kind != "cosh")
    args = ["let a = -x.y;", "let b = x.x;"] if circular else ["let a = x.x;", "let b = x.y;"]

    def body(dt: DType, w: str) -> str:
        if kind == "tanh":
            return _lines(*args, *_tanh_lines(ret))
        return _lines(*args, f"if ({_isfinite('a')} && {_isfinite('b')}) {{",
                      *indent(_finite_part(kind, ret)), "}", *_infinite_part(kind, ret))
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

    return _lines(
        "let a = x.x;",
        "let b = x.y;",
        "if (b == 0.0) {  // a real argument keeps b (and its sign)",
        f"    if ({_isnan('a')}) {{ return vec2<f32>(a, b); }}",
        "    if (a == 0.0) { return vec2<f32>(0.0, b); }  // (+0 for ±0: the standard's)",
        f"    if (a > {K[_W]['exp_max']}) {{ return vec2<f32>({INF}, b); }}",
        "    var m = 0.0;",
        *indent(expm1_of("a", "m", _W)),
        "    return vec2<f32>(m, b);",
        "}",
        f"if ({_isinf('b')} || {_isnan('b')}) {{",
        f"    if (!({_isinf('a')})) {{ return vec2<f32>({NAN}, {NAN}); }}",
        f"    if (a < 0.0) {{ return vec2<f32>(-1.0, {with_sign('0.0', 'b', _W)}); }}",
        f"    return vec2<f32>(a, {NAN});",
        "}",
        f"if ({_isnan('a')}) {{ return vec2<f32>({NAN}, {NAN}); }}",
        *_sincos_of("b", "s", "c"),
        f"if (a == -{INF}) {{ return vec2<f32>(-1.0, {with_sign('0.0', 's', _W)}); }}",
        "if (abs(a) < 20.0) {",
        "    var m = 0.0;",
        *indent(expm1_of("a", "m", _W)),
        "    let hb = b * 0.5;",
        *indent(_sincos_of("hb", "s2", "c2", "h")),
        *indent(_real_exp("a", "ea")),  # (not m + 1: that cancels for a well below 0)
        "    return vec2<f32>(m * c - 2.0 * s2 * s2, ea * s);",
        "}",
        "let half = a * 0.5;",
        *_real_exp("half", "h"),
        "return vec2<f32>(h * (h * c) - 1.0, h * (h * s));")


def clog1p_body(dt: DType, w: str) -> str:
    """log1p(a + bi) = log|1 + z| + i arg(1 + z), log|1 + z| as log1p(a (2 + a) + b²) / 2
    near 0 (exact as z goes to 0); log's lines on 1 + z past |z| = 2^20 and where
    |1 + z|² < 1/2 (1 + a is exact there, and a (2 + a) + b² would cancel)."""
    big = ["let a = 1.0 + x.x;", "let b = x.y;", *_clog_lines("1.0")[2:]]
    return _lines(
        f"if (max(abs(x.x), abs(x.y)) > 1048576.0 || !({_isfinite('x.x')}) || "
        f"!({_isfinite('x.y')}) || x.x * (2.0 + x.x) + x.y * x.y < -0.5) {{",
        *indent(big),
        "}",
        "let a = x.x;",
        "let b = x.y;",
        "let t = max(a * (2.0 + a) + b * b, -1.0);",
        f"var lr = -{INF};",
        "if (t > -1.0) {",
        *indent(log1p_of("t", "lr", _W)),
        "    lr = 0.5 * lr;",
        "}",
        "let a1 = 1.0 + a;",
        *_arg("b", "a1", "th"),
        "return vec2<f32>(lr, th);")


def csign_body(dt: DType, w: str) -> str:
    """sign(z) = z / |z|: 0 for 0, nan if a part is nan, else complex division's values (an
    infinite part over |z| = inf is nan, a finite one 0)."""
    return _lines(
        "let a = x.x;",
        "let b = x.y;",
        f"if ({_isnan('a')} || {_isnan('b')}) {{ return vec2<f32>({NAN}, {NAN}); }}",
        "if (a == 0.0 && b == 0.0) { return vec2<f32>(0.0, 0.0); }",
        "let m = max(abs(a), abs(b));",
        "var h = m;",
        f"if (!({_isinf('m')})) {{",
        "    let r = min(abs(a), abs(b)) / m;",
        "    h = m * sqrt(1.0 + r * r);",
        "}",
        "return vec2<f32>(a / h, b / h);")
