"""The WGSL bodies of complex64's and complex128's inverse functions (asinh, acosh, atanh,
acos; asin and atan as -i asinh(iz) and -i atanh(iz), as the array API standard defines
them): Kahan's formulas from
square roots of 1 ± z for finite z ("Branch cuts for complex elementary functions"), the
standard's tables for nan and ±inf, its symmetries (conj, odd) carrying the signs."""

from __future__ import annotations

from ...dtypes import DType
from .mathcomplex import _LIMITS, _arg, _c, _isinf, _isnan, _lines, _ret, part
from .mathfuncs import inf, nan
from .mathkernels import PI, PIO2, PIO4, K, indent, log1p_of, log_of, with_sign

_3PIO4 = "2.356194490192345"


def _csqrt(a: str, b: str, out: str, p: str, w: str) -> list[str]:
    """out = sqrt(a + bi) for finite a, b (Kahan's, scaled away from over- and underflow)."""
    lim = _LIMITS[w]
    return [f"let {p}a = {a};",
            f"let {p}b = {b};",
            f"var {out} = vec2({w}(0), {p}b);",
            f"if (!({p}a == 0.0 && {p}b == 0.0)) {{",
            f"    let {p}m = max(abs({p}a), abs({p}b));",
            f"    var {p}s = {w}(1.0);",
            f"    var {p}sa = {p}a;",
            f"    var {p}sb = {p}b;",
            f"    if ({p}m > {lim['big']}) {{",
            f"        {p}sa = {p}a * 0.25;",
            f"        {p}sb = {p}b * 0.25;",
            f"        {p}s = 2.0;",
            f"    }} else if ({p}m < {lim['small']}) {{",
            f"        {p}sa = {p}a * {lim['up']};",
            f"        {p}sb = {p}b * {lim['up']};",
            f"        {p}s = {lim['down']};",
            "    }",
            f"    let {p}hm = max(abs({p}sa), abs({p}sb));",
            f"    let {p}hr = min(abs({p}sa), abs({p}sb)) / {p}hm;",
            f"    let {p}h = {p}hm * sqrt(1.0 + {p}hr * {p}hr);",
            f"    let {p}t = sqrt((abs({p}sa) + {p}h) * 0.5);",
            f"    if ({p}sa >= 0.0) {{",
            f"        {out} = vec2({p}t, {p}sb / (2.0 * {p}t)) * {p}s;",
            "    } else {",
            f"        {out} = vec2(abs({p}sb) / (2.0 * {p}t), "
            f"{with_sign(f'{p}t', f'{p}sb', w)}) * {p}s;",
            "    }",
            "}"]


def _asinh(v: str, out: str, p: str, w: str) -> list[str]:
    """out = asinh(v) for finite v (as mathfuncs' asinh)."""
    return [f"let {p}v = {v};",
            f"let {p}t = abs({p}v);",
            f"var {out} = {p}v;",
            f"if ({p}t >= {K[w]['tiny']}) {{",
            f"    var {p}r = {w}(0.0);",
            f"    if ({p}t > {K[w]['big']}) {{",
            *indent(indent(log_of(f"{p}t", f"{p}r", w, p + "l_"))),
            f"        {p}r = {p}r + 0.6931471805599453;",
            "    } else {",
            f"        let {p}u = {p}t + {p}t * {p}t / (1.0 + sqrt(1.0 + {p}t * {p}t));",
            *indent(indent(log1p_of(f"{p}u", f"{p}r", w, p + "p_"))),
            "    }",
            f"    {out} = {with_sign(f'{p}r', f'{p}v', w)};",
            "}"]


def _log_abs(a: str, b: str, out: str, p: str, w: str) -> list[str]:
    """out = log|a + bi| for finite a, b (-inf for 0), without overflow."""
    return [f"let {p}a = abs({a});",
            f"let {p}b = abs({b});",
            f"let {p}m = max({p}a, {p}b);",
            f"var {out} = -{inf(w)};",
            f"if ({p}m > 0.0) {{",
            f"    let {p}r = min({p}a, {p}b) / {p}m;",
            *indent(log_of(f"{p}m", out, w, p + "l_")),
            f"    let {p}rr = {p}r * {p}r;",
            f"    var {p}h = {w}(0.0);",
            *indent(log1p_of(f"{p}rr", f"{p}h", w, p + "p_")),
            f"    {out} = {out} + 0.5 * {p}h;",
            "}"]


def _atan2(y: str, x: str, out: str, p: str, w: str) -> list[str]:
    return [f"let {p}y = {y};", f"let {p}x = {x};", *_arg(f"{p}y", f"{p}x", out, w)]


def _special(*cases: tuple[str, str]) -> list[str]:
    return [f"if ({c}) {{ {r} }}" for c, r in cases]


def _asinh_lines(ret, w: str) -> list[str]:
    """asinh(a + bi): the table for nan and inf, else -i asin(i z) by Kahan's asin."""
    return [
        f"if ({_isnan('a', w)}) {{",
        *indent(_special(("b == 0.0", ret(nan(w), "b")), (_isinf("b", w), ret(inf(w), nan(w))))),
        f"    {ret(nan(w), nan(w))}",
        "}",
        f"if ({_isnan('b', w)}) {{",
        f"    if ({_isinf('a', w)}) {{ {ret('a', nan(w))} }}",
        f"    {ret(nan(w), nan(w))}",
        "}",
        f"if ({_isinf('a', w)} || {_isinf('b', w)}) {{",
        f"    var th = {w}({PIO2});",
        f"    if ({_isinf('a', w)}) {{ th = select({w}(0), {PIO4}, {_isinf('b', w)}); }}",
        f"    {ret(with_sign(inf(w), 'a', w), with_sign('th', 'b', w))}",
        "}",
        # asin(w) for w = iz = (-b, a): (atan2(u, Re(s1 s2)), asinh(Im(conj(s1) s2))),
        # s1 = sqrt(1 - w), s2 = sqrt(1 + w); asinh(z) = -i asin(w)
        "let u = -b;",
        "let v = a;",
        *_csqrt("1.0 - u", "-v", "s1", "r1_", w),
        *_csqrt("1.0 + u", "v", "s2", "r2_", w),
        *_atan2("u", "s1.x * s2.x - s1.y * s2.y", "re", "t_", w),
        *_asinh("s1.x * s2.y - s1.y * s2.x", "im", "h_", w),
        ret("im", "-re")]


def _acos_lines(ret, w: str) -> list[str]:
    """acos(a + bi): the table for nan and inf (conj symmetric: the imaginary part's sign is
    -b's), else Kahan's: (2 atan2(Re s1, Re s2), asinh(Im(conj(s2) s1))), s1 = sqrt(1 - z),
    s2 = sqrt(1 + z)."""
    neg_inf_b = f"-{with_sign(inf(w), 'b', w)}"
    return [
        f"if ({_isnan('a', w)}) {{",
        f"    if ({_isinf('b', w)}) {{ {ret(nan(w), neg_inf_b)} }}",
        f"    {ret(nan(w), nan(w))}",
        "}",
        f"if ({_isnan('b', w)}) {{",
        f"    if (a == 0.0) {{ {ret(PIO2, nan(w))} }}",
        f"    if ({_isinf('a', w)}) {{ {ret(nan(w), inf(w))} }}",
        f"    {ret(nan(w), nan(w))}",
        "}",
        f"if ({_isinf('b', w)}) {{",
        f"    var re = {w}({PIO2});",
        f"    if ({_isinf('a', w)}) {{ re = select({w}({PIO4}), {_3PIO4}, a < 0.0); }}",
        f"    {ret('re', neg_inf_b)}",
        "}",
        f"if ({_isinf('a', w)}) {{ {ret(f'select({w}(0), {PI}, a < 0.0)', neg_inf_b)} }}",
        *_csqrt("1.0 - a", "-b", "s1", "r1_", w),
        *_csqrt("1.0 + a", "b", "s2", "r2_", w),
        *_atan2("s1.x", "s2.x", "re", "t_", w),
        *_asinh("s2.x * s1.y - s2.y * s1.x", "im", "h_", w),
        ret("2.0 * re", "im")]


def _acosh_lines(ret, w: str) -> list[str]:
    """acosh(a + bi): the table for nan and inf (conj symmetric), else Kahan's:
    (asinh(Re(conj(s1) s2)), 2 atan2(Im s1, Re s2)), s1 = sqrt(z - 1), s2 = sqrt(z + 1)."""
    return [
        f"if ({_isnan('a', w)}) {{",
        f"    if ({_isinf('b', w)}) {{ {ret(inf(w), nan(w))} }}",
        f"    {ret(nan(w), nan(w))}",
        "}",
        f"if ({_isnan('b', w)}) {{",
        f"    if ({_isinf('a', w)}) {{ {ret(inf(w), nan(w))} }}",
        f"    if (a == 0.0) {{ {ret(nan(w), PIO2)} }}",
        f"    {ret(nan(w), nan(w))}",
        "}",
        f"if ({_isinf('a', w)} || {_isinf('b', w)}) {{",
        f"    var th = {w}({PIO2});",
        f"    if ({_isinf('a', w)}) {{",
        f"        th = select(select({w}(0), {PI}, a < 0.0), "
        f"select({w}({PIO4}), {_3PIO4}, a < 0.0), {_isinf('b', w)});",
        "    }",
        f"    {ret(inf(w), with_sign('th', 'b', w))}",
        "}",
        *_csqrt("a - 1.0", "b", "s1", "r1_", w),
        *_csqrt("a + 1.0", "b", "s2", "r2_", w),
        *_asinh("s1.x * s2.x + s1.y * s2.y", "re", "h_", w),
        *_atan2("s1.y", "s2.x", "im", "t_", w),
        ret("re", "2.0 * im")]


def _atanh_lines(ret, w: str) -> list[str]:
    """atanh(a + bi): the table for nan and inf (odd and conj symmetric), else
    (log1p(4a / ((1 - a)² + b²)) / 4, atan2(2b, (1 - a)(1 + a) - b²) / 2), and 1/z's value
    past |z| = 1e18 (the squares would overflow)."""
    zero_a = with_sign(_c("0.0", w), "a", w)
    return [
        f"if ({_isnan('a', w)}) {{",
        f"    if ({_isinf('b', w)}) {{ {ret('0.0', with_sign(_c(PIO2, w), 'b', w))} }}",
        f"    {ret(nan(w), nan(w))}",
        "}",
        f"if ({_isnan('b', w)}) {{",
        f"    if (a == 0.0) {{ {ret('a', nan(w))} }}",
        f"    if ({_isinf('a', w)}) {{ {ret(zero_a, nan(w))} }}",
        f"    {ret(nan(w), nan(w))}",
        "}",
        f"if ({_isinf('a', w)} || {_isinf('b', w)}) {{ "
        f"{ret(zero_a, with_sign(_c(PIO2, w), 'b', w))} }}",
        f"if (abs(a) == 1.0 && b == 0.0) {{ {ret(with_sign(inf(w), 'a', w), 'b')} }}",
        "let m = max(abs(a), abs(b));",
        f"if (m > {_LIMITS[w]['atanh']}) {{",
        "    let r = min(abs(a), abs(b)) / m;",
        "    let re = (a / m) / (m * (1.0 + r * r));",
        f"    {ret('re', with_sign(_c(PIO2, w), 'b', w))}",
        "}",
        "let q = 4.0 * a / ((1.0 - a) * (1.0 - a) + b * b);",
        f"var re = {w}(0.0);",
        "if (abs(q) < 0.5) {",
        *indent(log1p_of("q", "re", w)),
        "} else {  // z near ±1 (q would cancel or overflow): log|1 + z| - log|1 - z|",
        *indent(_log_abs("1.0 + a", "b", "lp", "n1_", w)),
        *indent(_log_abs("1.0 - a", "b", "lm", "n2_", w)),
        "    re = 2.0 * (lp - lm);",
        "}",
        *_atan2("2.0 * b", "(1.0 - a) * (1.0 + a) - b * b", "im", "t_", w),
        ret("0.25 * re", "0.5 * im")]


def _inverse_body(lines, circular: bool):
    """The body of an inverse function of x, or (``circular``) of its circular twin as the
    hyperbolic one of ix = (-x.y, x.x), turned back by -i."""
    ret = _ret(circular)
    args = ["let a = -x.y;", "let b = x.x;"] if circular else ["let a = x.x;", "let b = x.y;"]

    def body(dt: DType, w: str) -> str:
        return _lines(*args, *lines(ret, part(dt)))
    return body


casinh_body = _inverse_body(_asinh_lines, False)
casin_body = _inverse_body(_asinh_lines, True)
cacosh_body = _inverse_body(_acosh_lines, False)
catanh_body = _inverse_body(_atanh_lines, False)
catan_body = _inverse_body(_atanh_lines, True)
cacos_body = _inverse_body(_acos_lines, False)
