"""The WGSL bodies of complex64's inverse functions (asinh, acosh, atanh, acos; asin and atan as
-i asinh(iz) and -i atanh(iz), as the array API standard defines them): Kahan's formulas from
square roots of 1 ± z for finite z ("Branch cuts for complex elementary functions"), the
standard's tables for nan and ±inf, its symmetries (conj, odd) carrying the signs."""

from __future__ import annotations

from ...dtypes import DType
from .mathcomplex import INF, NAN, _arg, _isinf, _isnan, _lines, _ret
from .mathkernels import PI, PIO2, PIO4, indent, log1p_of, log_of, with_sign

_W = "f32"
_3PIO4 = "2.356194490192345"


def _csqrt(a: str, b: str, out: str, p: str) -> list[str]:
    """out = sqrt(a + bi) for finite a, b (Kahan's, scaled away from over- and underflow)."""
    return [f"let {p}a = {a};",
            f"let {p}b = {b};",
            f"var {out} = vec2<f32>(0.0, {p}b);",
            f"if (!({p}a == 0.0 && {p}b == 0.0)) {{",
            f"    let {p}m = max(abs({p}a), abs({p}b));",
            f"    var {p}s = 1.0;",
            f"    var {p}sa = {p}a;",
            f"    var {p}sb = {p}b;",
            f"    if ({p}m > 1e37) {{",
            f"        {p}sa = {p}a * 0.25;",
            f"        {p}sb = {p}b * 0.25;",
            f"        {p}s = 2.0;",
            f"    }} else if ({p}m < 1e-30) {{",
            f"        {p}sa = {p}a * 16777216.0;",
            f"        {p}sb = {p}b * 16777216.0;",
            f"        {p}s = 0.000244140625;",
            "    }",
            f"    let {p}hm = max(abs({p}sa), abs({p}sb));",
            f"    let {p}hr = min(abs({p}sa), abs({p}sb)) / {p}hm;",
            f"    let {p}h = {p}hm * sqrt(1.0 + {p}hr * {p}hr);",
            f"    let {p}t = sqrt((abs({p}sa) + {p}h) * 0.5);",
            f"    if ({p}sa >= 0.0) {{",
            f"        {out} = vec2<f32>({p}t, {p}sb / (2.0 * {p}t)) * {p}s;",
            "    } else {",
            f"        {out} = vec2<f32>(abs({p}sb) / (2.0 * {p}t), "
            f"{with_sign(f'{p}t', f'{p}sb', _W)}) * {p}s;",
            "    }",
            "}"]


def _asinh(v: str, out: str, p: str) -> list[str]:
    """out = asinh(v) for finite v (as mathfuncs' asinh)."""
    return [f"let {p}v = {v};",
            f"let {p}t = abs({p}v);",
            f"var {out} = {p}v;",
            f"if ({p}t >= 0.000244140625) {{",
            f"    var {p}r = 0.0;",
            f"    if ({p}t > 4096.0) {{",
            *indent(indent(log_of(f"{p}t", f"{p}r", _W, p + "l_"))),
            f"        {p}r = {p}r + 0.6931471805599453;",
            "    } else {",
            f"        let {p}u = {p}t + {p}t * {p}t / (1.0 + sqrt(1.0 + {p}t * {p}t));",
            *indent(indent(log1p_of(f"{p}u", f"{p}r", _W, p + "p_"))),
            "    }",
            f"    {out} = {with_sign(f'{p}r', f'{p}v', _W)};",
            "}"]


def _log_abs(a: str, b: str, out: str, p: str) -> list[str]:
    """out = log|a + bi| for finite a, b (-inf for 0), without overflow."""
    return [f"let {p}a = abs({a});",
            f"let {p}b = abs({b});",
            f"let {p}m = max({p}a, {p}b);",
            f"var {out} = -{INF};",
            f"if ({p}m > 0.0) {{",
            f"    let {p}r = min({p}a, {p}b) / {p}m;",
            *indent(log_of(f"{p}m", out, _W, p + "l_")),
            f"    let {p}rr = {p}r * {p}r;",
            f"    var {p}h = 0.0;",
            *indent(log1p_of(f"{p}rr", f"{p}h", _W, p + "p_")),
            f"    {out} = {out} + 0.5 * {p}h;",
            "}"]


def _atan2(y: str, x: str, out: str, p: str) -> list[str]:
    return [f"let {p}y = {y};", f"let {p}x = {x};", *_arg(f"{p}y", f"{p}x", out)]


def _special(*cases: tuple[str, str]) -> list[str]:
    return [f"if ({c}) {{ {r} }}" for c, r in cases]


def _asinh_lines(ret) -> list[str]:
    """asinh(a + bi): the table for nan and inf, else -i asin(i z) by Kahan's asin."""
    return [
        f"if ({_isnan('a')}) {{",
        *indent(_special(("b == 0.0", ret(NAN, "b")), (_isinf("b"), ret(INF, NAN)))),
        f"    {ret(NAN, NAN)}",
        "}",
        f"if ({_isnan('b')}) {{",
        f"    if ({_isinf('a')}) {{ {ret('a', NAN)} }}",
        f"    {ret(NAN, NAN)}",
        "}",
        f"if ({_isinf('a')} || {_isinf('b')}) {{",
        f"    var th = {PIO2};",
        f"    if ({_isinf('a')}) {{ th = select(0.0, {PIO4}, {_isinf('b')}); }}",
        f"    {ret(with_sign(INF, 'a', _W), with_sign('th', 'b', _W))}",
        "}",
        # asin(w) for w = iz = (-b, a): (atan2(u, Re(s1 s2)), asinh(Im(conj(s1) s2))),
        # s1 = sqrt(1 - w), s2 = sqrt(1 + w); asinh(z) = -i asin(w)
        "let u = -b;",
        "let v = a;",
        *_csqrt("1.0 - u", "-v", "s1", "r1_"),
        *_csqrt("1.0 + u", "v", "s2", "r2_"),
        *_atan2("u", "s1.x * s2.x - s1.y * s2.y", "re", "t_"),
        *_asinh("s1.x * s2.y - s1.y * s2.x", "im", "h_"),
        ret("im", "-re")]


def _acos_lines(ret) -> list[str]:
    """acos(a + bi): the table for nan and inf (conj symmetric: the imaginary part's sign is
    -b's), else Kahan's: (2 atan2(Re s1, Re s2), asinh(Im(conj(s2) s1))), s1 = sqrt(1 - z),
    s2 = sqrt(1 + z)."""
    neg_inf_b = f"-{with_sign(INF, 'b', _W)}"
    return [
        f"if ({_isnan('a')}) {{",
        f"    if ({_isinf('b')}) {{ {ret(NAN, neg_inf_b)} }}",
        f"    {ret(NAN, NAN)}",
        "}",
        f"if ({_isnan('b')}) {{",
        f"    if (a == 0.0) {{ {ret(PIO2, NAN)} }}",
        f"    if ({_isinf('a')}) {{ {ret(NAN, INF)} }}",
        f"    {ret(NAN, NAN)}",
        "}",
        f"if ({_isinf('b')}) {{",
        f"    var re = {PIO2};",
        f"    if ({_isinf('a')}) {{ re = select({PIO4}, {_3PIO4}, a < 0.0); }}",
        f"    {ret('re', neg_inf_b)}",
        "}",
        f"if ({_isinf('a')}) {{ {ret(f'select(0.0, {PI}, a < 0.0)', neg_inf_b)} }}",
        *_csqrt("1.0 - a", "-b", "s1", "r1_"),
        *_csqrt("1.0 + a", "b", "s2", "r2_"),
        *_atan2("s1.x", "s2.x", "re", "t_"),
        *_asinh("s2.x * s1.y - s2.y * s1.x", "im", "h_"),
        ret("2.0 * re", "im")]


def _acosh_lines(ret) -> list[str]:
    """acosh(a + bi): the table for nan and inf (conj symmetric), else Kahan's:
    (asinh(Re(conj(s1) s2)), 2 atan2(Im s1, Re s2)), s1 = sqrt(z - 1), s2 = sqrt(z + 1)."""
    return [
        f"if ({_isnan('a')}) {{",
        f"    if ({_isinf('b')}) {{ {ret(INF, NAN)} }}",
        f"    {ret(NAN, NAN)}",
        "}",
        f"if ({_isnan('b')}) {{",
        f"    if ({_isinf('a')}) {{ {ret(INF, NAN)} }}",
        f"    if (a == 0.0) {{ {ret(NAN, PIO2)} }}",
        f"    {ret(NAN, NAN)}",
        "}",
        f"if ({_isinf('a')} || {_isinf('b')}) {{",
        f"    var th = {PIO2};",
        f"    if ({_isinf('a')}) {{",
        f"        th = select(select(0.0, {PI}, a < 0.0), select({PIO4}, {_3PIO4}, a < 0.0), "
        f"{_isinf('b')});",
        "    }",
        f"    {ret(INF, with_sign('th', 'b', _W))}",
        "}",
        *_csqrt("a - 1.0", "b", "s1", "r1_"),
        *_csqrt("a + 1.0", "b", "s2", "r2_"),
        *_asinh("s1.x * s2.x + s1.y * s2.y", "re", "h_"),
        *_atan2("s1.y", "s2.x", "im", "t_"),
        ret("re", "2.0 * im")]


def _atanh_lines(ret) -> list[str]:
    """atanh(a + bi): the table for nan and inf (odd and conj symmetric), else
    (log1p(4a / ((1 - a)² + b²)) / 4, atan2(2b, (1 - a)(1 + a) - b²) / 2), and 1/z's value
    past |z| = 1e18 (the squares would overflow)."""
    zero_a = with_sign("0.0", "a", _W)
    return [
        f"if ({_isnan('a')}) {{",
        f"    if ({_isinf('b')}) {{ {ret('0.0', with_sign(PIO2, 'b', _W))} }}",
        f"    {ret(NAN, NAN)}",
        "}",
        f"if ({_isnan('b')}) {{",
        f"    if (a == 0.0) {{ {ret('a', NAN)} }}",
        f"    if ({_isinf('a')}) {{ {ret(zero_a, NAN)} }}",
        f"    {ret(NAN, NAN)}",
        "}",
        f"if ({_isinf('a')} || {_isinf('b')}) {{ {ret(zero_a, with_sign(PIO2, 'b', _W))} }}",
        f"if (abs(a) == 1.0 && b == 0.0) {{ {ret(with_sign(INF, 'a', _W), 'b')} }}",
        "let m = max(abs(a), abs(b));",
        "if (m > 1e18) {",
        "    let r = min(abs(a), abs(b)) / m;",
        "    let re = (a / m) / (m * (1.0 + r * r));",
        f"    {ret('re', with_sign(PIO2, 'b', _W))}",
        "}",
        "let q = 4.0 * a / ((1.0 - a) * (1.0 - a) + b * b);",
        "var re = 0.0;",
        "if (abs(q) < 0.5) {",
        *indent(log1p_of("q", "re", _W)),
        "} else {  // z near ±1 (q would cancel or overflow): log|1 + z| - log|1 - z|",
        *indent(_log_abs("1.0 + a", "b", "lp", "n1_")),
        *indent(_log_abs("1.0 - a", "b", "lm", "n2_")),
        "    re = 2.0 * (lp - lm);",
        "}",
        *_atan2("2.0 * b", "(1.0 - a) * (1.0 + a) - b * b", "im", "t_"),
        ret("0.25 * re", "0.5 * im")]


def _inverse_body(lines, circular: bool):
    """The body of an inverse function of x, or (``circular``) of its circular twin as the
    hyperbolic one of ix = (-x.y, x.x), turned back by -i."""
    ret = _ret(circular)
    args = ["let a = -x.y;", "let b = x.x;"] if circular else ["let a = x.x;", "let b = x.y;"]

    def body(dt: DType, w: str) -> str:
        return _lines(*args, *lines(ret))
    return body


casinh_body = _inverse_body(_asinh_lines, False)
casin_body = _inverse_body(_asinh_lines, True)
cacosh_body = _inverse_body(_acosh_lines, False)
catanh_body = _inverse_body(_atanh_lines, False)
catan_body = _inverse_body(_atanh_lines, True)
cacos_body = _inverse_body(_acos_lines, False)
