"""The WGSL fragments mathfuncs.py builds its functions from, in f32 and in f64: exp and
expm1 (reduced by ln2, a Taylor polynomial), log and log1p (fdlibm's), atan and asin (Cephes's
in f32, fdlibm's in f64), and sin/cos's reduction by pi/2 (Cody and Waite's near 0, Payne and
Hanek's with 2/pi's bits beyond). Each fragment is statements that set a named variable;
names carry a prefix so that a body may hold several. f64 ones read bits as u64."""

from __future__ import annotations

# the largest x with finite exp(x), the smallest with a nonzero one, the largest with finite
# exp(x) / 2; ln2 in a high part (exact times k) and the rest; |x| below which f(x) = x to
# the last bit for sin, tan, tanh...; above which asinh(x) = log(2x); where tanh(x) is 1;
# where expm1(x) is exp(x) to the last bit; where it is -1
K = {
    "f32": dict(exp_max="88.72283935546875", exp_min="-103.97207708",
                half_max="89.41598629223294", ln2_hi="0.693145751953125",
                ln2_lo="1.4286068203094173e-06", tiny="0.000244140625", big="4096.0",
                tanh_one="9.0", em1_big="20.0", em1_neg="-88.0", terms=10,
                normal="1.1754943508222875e-38", scale="33554432.0", scale_e="25.0",
                cw_max="65536.0"),
    "f64": dict(exp_max="709.782712893384", exp_min="-745.1332191019412",
                half_max="710.4758600739439", ln2_hi="0.6931471803691238",
                ln2_lo="1.9082149292705877e-10", tiny="7.450580596923828e-09",
                big="268435456.0", tanh_one="22.0", em1_big="36.0", em1_neg="-40.0",
                terms=14, normal="2.2250738585072014e-308", scale="18014398509481984.0",
                scale_e="54.0", cw_max="823549.0"),
}
PI = "3.141592653589793"
PIO2 = "1.5707963267948966"
PIO4 = "0.7853981633974483"


def bits(w: str) -> tuple[str, str, str]:
    """(unsigned type, sign bit, one) of float work type ``w``'s bits."""
    return ("u64", "0x8000000000000000lu", "1lu") if w == "f64" else ("u32", "0x80000000u",
                                                                       "1u")


def with_sign(v: str, like: str, w: str) -> str:
    """``v`` (not negative) with the sign bit of ``like``."""
    u, sign, _ = bits(w)
    return f"bitcast<{w}>(bitcast<{u}>({v}) | (bitcast<{u}>({like}) & {sign}))"


def flip_sign(v: str, like: str, w: str) -> str:
    """``v`` with its sign flipped where ``like``'s sign bit is set."""
    u, sign, _ = bits(w)
    return f"bitcast<{w}>(bitcast<{u}>({v}) ^ (bitcast<{u}>({like}) & {sign}))"


def indent(lines: list[str]) -> list[str]:
    return ["    " + s for s in lines]


# -- exp ------------------------------------------------------------------------------------
def em1_poly(r: str, w: str) -> str:
    """expm1(r) for |r| <= ln2 / 2: Taylor to r^10 (f32) or r^14 (f64)."""
    import math

    n = K[w]["terms"]
    inner = repr(1 / math.factorial(n))
    for k in range(n - 1, 1, -1):
        inner = f"{1 / math.factorial(k)!r} + {r} * ({inner})"
    return f"{r} * (1.0 + {r} * ({inner}))"


def _reduce_ln2(v: str, p: str, w: str) -> list[str]:
    """k (a whole float) and r with v = k ln2 + r, |r| <= ln2 / 2 (Cody and Waite)."""
    k = K[w]
    return [f"let {p}k = round({v} * 1.4426950408889634);",
            f"let {p}r = ({v} - {p}k * {k['ln2_hi']}) - {p}k * {k['ln2_lo']};"]


def exp_of(v: str, out: str, w: str, p: str = "e_", half: bool = False) -> list[str]:
    """out = exp(v) for v in [exp_min, exp_max] (the caller takes the rest); exp(v) / 2 with
    ``half``, for v up to half_max (sinh and cosh: v - ln2 would round)."""
    return [*_reduce_ln2(v, p, w),
            f"let {p}h = i32({p}k) / 2;",
            f"{out} = ldexp(ldexp(1.0 + {em1_poly(p + 'r', w)}, {p}h), i32({p}k) - {p}h"
            f"{' - 1' if half else ''});"]


def expm1_of(v: str, out: str, w: str, p: str = "m_") -> list[str]:
    """out = expm1(v) for v <= em1_big: the polynomial near 0, else 2^k (1 + p) - 1 as
    2^k p + (2^k - 1), whose second term is exact."""
    return [f"if (abs({v}) < 0.34657359027997264) {{",
            f"    {out} = {em1_poly(v, w)};",
            f"}} else if ({v} < {K[w]['em1_neg']}) {{",
            f"    {out} = -1.0;",
            "} else {",
            *indent(_reduce_ln2(v, p, w)),
            f"    {out} = ldexp({em1_poly(p + 'r', w)}, i32({p}k)) + "
            f"(ldexp({w}(1), i32({p}k)) - 1.0);",
            "}"]


# -- log ------------------------------------------------------------------------------------
def _log1p_poly(f: str, p: str, w: str) -> list[str]:
    """{p}m = log(1 + f) for 1 + f in [sqrt(1/2), sqrt(2)) (fdlibm's log:
    f - hfsq + s (hfsq + R))."""
    if w == "f64":
        r = (f"{p}w * (0.3999999999940941908 + {p}w * (0.2222219843214978396 + {p}w * "
             f"0.1531383769920937332)) + {p}z * (0.6666666666666735130 + {p}w * "
             f"(0.2857142874366239149 + {p}w * (0.1818357216161805012 + {p}w * "
             f"0.1479819860511658591)))")
    else:
        r = (f"{p}z * (0.66666662693 + {p}w * 0.28498786688) + "
             f"{p}w * (0.40000972152 + {p}w * 0.24279078841)")
    return [f"let {p}s = {f} / (2.0 + {f});",
            f"let {p}z = {p}s * {p}s;",
            f"let {p}w = {p}z * {p}z;",
            f"let {p}R = {r};",
            f"let {p}h = 0.5 * {f} * {f};",
            f"let {p}m = {f} - ({p}h - {p}s * ({p}h + {p}R));"]


def log_parts(v: str, w: str, p: str = "l_") -> list[str]:
    """For finite v > 0: {p}e (a whole float) and {p}m = log(m) with v = 2^e m,
    m in [sqrt(1/2), sqrt(2))."""
    k = K[w]
    return [f"var {p}v = {v};",
            f"var {p}e = {w}(0);",
            f"if ({p}v < {k['normal']}) {{  // subnormal: scale up",
            f"    {p}v = {p}v * {k['scale']};",
            f"    {p}e = -{k['scale_e']};",
            "}",
            f"let {p}fr = frexp({p}v);",
            f"var {p}x = {p}fr.fract;",
            f"{p}e = {p}e + {w}({p}fr.exp);",
            f"if ({p}x < 0.7071067811865476) {{",
            f"    {p}x = {p}x * 2.0;",
            f"    {p}e = {p}e - 1.0;",
            "}",
            f"let {p}f = {p}x - 1.0;",
            *_log1p_poly(f"{p}f", p, w)]


_LN2 = {"f32": ("0.69313812256", "9.0580006145e-06"),
        "f64": ("0.6931471803691238", "1.9082149292705877e-10")}


def log_of(v: str, out: str, w: str, p: str = "l_") -> list[str]:
    """out = log(v) for finite v > 0 (ln2 split in two, so e ln2_hi is exact)."""
    hi, lo = _LN2[w]
    return [*log_parts(v, w, p), f"{out} = {p}e * {hi} + ({p}m + {p}e * {lo});"]


def log1p_of(v: str, out: str, w: str, p: str = "p_") -> list[str]:
    """out = log1p(v) for finite v > -1: where 1 + v is in [sqrt(1/2), sqrt(2)) the
    polynomial takes v itself (1 + v is never rounded: compilers fold the usual corrections
    such as (1 + v) - 1 to v), elsewhere log(1 + v), whose rounding is then harmless."""
    return [f"if ({v} > -0.2928932188134524 && {v} < 0.41421356237309503) {{",
            *indent(_log1p_poly(v, p, w)),
            f"    {out} = {p}m;",
            "} else {",
            *indent(log_of(f"1.0 + {v}", out, w, p + "l_")),
            "}"]


# -- atan, asin -------------------------------------------------------------------------------
_ATAN64 = ("0.333333333333329318027", "-0.199999999998764832476", "0.142857142725034663711",
           "-0.111111104054623557880", "0.0909088713343650656196", "-0.0769187620504482999495",
           "0.0666107313738753120669", "-0.0583357013379057348645", "0.0497687799461593236017",
           "-0.0365315727442169155270", "0.0162858201153657823623")
_ATAN64_HI = ("0.463647609000806093515", PIO4, "0.982793723247329054082", PIO2)
_ATAN64_LO = ("2.26987774529616870924e-17", "3.06161699786838301793e-17",
              "1.39033110312309984516e-17", "6.12323399573676603587e-17")


def atan_of(v: str, out: str, w: str, p: str = "a_") -> list[str]:
    """out = atan(v) for v >= 0 or inf: Cephes's atanf (reduced by tan(pi/8) and
    tan(3pi/8)) in f32, fdlibm's atan (four ranges, an 11-term odd polynomial) in f64."""
    if w == "f32":
        return [f"var {p}x = {v};",
                f"var {p}y = 0.0;",
                f"if ({v} > 2.414213562373095) {{",
                f"    {p}y = {PIO2};",
                f"    {p}x = -1.0 / {v};",
                f"}} else if ({v} > 0.41421356237309503) {{",
                f"    {p}y = {PIO4};",
                f"    {p}x = ({v} - 1.0) / ({v} + 1.0);",
                "}",
                f"let {p}z = {p}x * {p}x;",
                f"{out} = {p}y + ((((0.0805374449538 * {p}z - 0.138776856032) * {p}z + "
                f"0.199777106478) * {p}z - 0.333329491539) * {p}z * {p}x + {p}x);"]
    t = _ATAN64
    ranges = (("0.6875", "(2.0 * {v} - 1.0) / (2.0 + {v})"),
              ("1.1875", "({v} - 1.0) / ({v} + 1.0)"),
              ("2.4375", "({v} - 1.5) / (1.0 + 1.5 * {v})"), (None, "-1.0 / {v}"))
    lines = [f"var {p}x = {v};", f"var {p}hi = f64(0);", f"var {p}lo = f64(0);",
             f"var {p}id = -1;", f"if ({v} >= 0.4375) {{"]
    for i, (limit, expr) in enumerate(ranges):
        if limit is None:
            lines.append("    } else {")
        else:
            lines.append(f"    {'if' if i == 0 else '} else if'} ({v} < {limit}) {{")
        lines += [f"        {p}x = {expr.format(v=v)};", f"        {p}hi = {_ATAN64_HI[i]};",
                  f"        {p}lo = {_ATAN64_LO[i]};", f"        {p}id = {i};"]
    lines += ["    }", "}",
              f"let {p}z = {p}x * {p}x;",
              f"let {p}w = {p}z * {p}z;",
              f"let {p}s1 = {p}z * ({t[0]} + {p}w * ({t[2]} + {p}w * ({t[4]} + {p}w * ({t[6]} + "
              f"{p}w * ({t[8]} + {p}w * {t[10]})))));",
              f"let {p}s2 = {p}w * ({t[1]} + {p}w * ({t[3]} + {p}w * ({t[5]} + {p}w * ({t[7]} + "
              f"{p}w * {t[9]}))));",
              f"if ({p}id < 0) {{",
              f"    {out} = {p}x - {p}x * ({p}s1 + {p}s2);",
              "} else {",
              f"    {out} = {p}hi - (({p}x * ({p}s1 + {p}s2) - {p}lo) - {p}x);",
              "}"]
    return lines


def asin_poly(v: str, z: str, w: str) -> str:
    """asin(v) for |v| <= 1/2, z = v * v: Cephes's asinf, fdlibm's rational asin in f64."""
    if w == "f64":
        num = (f"{z} * (0.166666666666666657415 + {z} * (-0.325565818622400915405 + {z} * "
               f"(0.201212532134862925881 + {z} * (-0.0400555345006794114027 + {z} * "
               f"(0.000791534994289814532176 + {z} * 3.47933107596021167570e-05)))))")
        den = (f"(1.0 + {z} * (-2.40339491173441421878 + {z} * (2.02094576023350569471 + {z} * "
               f"(-0.688283971605453293030 + {z} * 0.0770381505559019352791))))")
        return f"({v} + {v} * ({num} / {den}))"
    return (f"(((((0.042163199048 * {z} + 0.024181311049) * {z} + 0.045470025998) * {z} + "
            f"0.074953002686) * {z} + 0.16666752422) * {z} * {v} + {v})")


# -- sin, cos, tan: the reduction by pi / 2 -----------------------------------------------------
# pi / 2 in pieces: f32's of 12 bits (k times one is exact for k < 2^12; k is split in two
# such halves) and an f32 rest; f64's of 33 bits (fdlibm's pio2_1, _2, _3: exact for k < 2^20)
_PIO2_F32 = ("1.5703125", "0.0004837512969970703", "7.549533620476723e-08",
             "2.5632829192545614e-12", "6.123031769111886e-17")
_PIO2_F32_REST = "2.022266160358745e-21"
_PIO2_F64 = ("1.57079632673412561417", "6.07710050630396597660e-11",
             "2.02226624871116645580e-21", "8.47842766036889956997e-32")
# 2/pi's bits, 32 a word, after words of zeros (windows may start before its first bit)
_TWO_OVER_PI = (
    "0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u, "
    "0xfe5163abu, 0xdebbc561u, 0xb7246e3au, 0x424dd2e0u, 0x06492eeau, 0x09d1921cu, "
    "0xfe1deb1cu, 0xb129a73eu, 0xe88235f5u, 0x2ebb4484u, 0xe99c7026u, 0xb45f7e41u, "
    "0x3991d639u, 0x835339f4u, 0x9c845f8bu, 0xbdf9283bu, 0x1ff897ffu, 0xde05980fu, "
    "0xef2f118bu, 0x5a0a6d1fu, 0x6d367ecfu, 0x27cb09b7u, 0x4f463f66u, 0x9e5fea2du, "
    "0x7527bac7u, 0xebe5f17bu, 0x3d0739f7u, 0x8a5292eau, 0x6bfb5fb1u, 0x1f8d5d08u")


def _cody_waite(a: str, p: str, w: str) -> list[str]:
    """{p}r = a - k pi/2 in [-pi/4, pi/4] (about) and {p}q = k mod 4, for 0 <= a < cw_max."""
    lines = [f"let {p}k = round({a} * 0.6366197723675814);", f"{p}r = {a};"]
    if w == "f64":
        lines += [f"{p}r = {p}r - {p}k * {piece};" for piece in _PIO2_F64]
    else:
        lines += [f"let {p}kh = floor({p}k * 0.000244140625) * 4096.0;",
                  f"let {p}kl = {p}k - {p}kh;"]
        for piece in _PIO2_F32:
            lines += [f"{p}r = {p}r - {p}kh * {piece};", f"{p}r = {p}r - {p}kl * {piece};"]
        lines.append(f"{p}r = {p}r - {p}k * {_PIO2_F32_REST};")
    return lines + [f"{p}q = u32({p}k) & 3u;"]


def _window(p: str, n: int, zeros: int) -> list[str]:
    """{p}w0 .. {p}w<n-1>: n words of 2/pi's bits from table bit {p}g on."""
    table = ["0x00000000u"] * zeros + _TWO_OVER_PI.split(", ")[:n + 4 if zeros == 2 else 36]
    lines = [f"let {p}o = {p}g >> 5u;", f"let {p}s = {p}g & 31u;",
             f"var {p}t = array<u32, {len(table)}>({', '.join(table)});"]
    for j in range(n):
        lines.append(f"let {p}w{j} = ({p}t[{p}o + {j}u] << {p}s) | select({p}t[{p}o + {j + 1}u] "
                     f">> (32u - {p}s), 0u, {p}s == 0u);")
    return lines


def _mul_wide(a: str, b: str, p: str) -> list[str]:
    """{p}h, {p}l: the high and low words of the u32 product a * b, from 16-bit halves."""
    return [f"let {p}ll = ({a} & 0xffffu) * ({b} & 0xffffu);",
            f"let {p}lh = ({a} & 0xffffu) * ({b} >> 16u);",
            f"let {p}hl = ({a} >> 16u) * ({b} & 0xffffu);",
            f"let {p}md = ({p}ll >> 16u) + ({p}lh & 0xffffu) + ({p}hl & 0xffffu);",
            f"let {p}l = ({p}ll & 0xffffu) | ({p}md << 16u);",
            f"let {p}h = ({a} >> 16u) * ({b} >> 16u) + ({p}lh >> 16u) + ({p}hl >> 16u) + "
            f"({p}md >> 16u);"]


def _payne_hanek_f32(a: str, p: str, r: str, q: str) -> list[str]:
    """r and q as _cody_waite's for any finite f32 a >= 1, in u32 arithmetic: a = m 2^e (m of
    24 bits) times the 128 bits of 2/pi that matter (those worth 2^-96 .. 2^31 once
    multiplied by 2^e); the product's bits 96-97 are k mod 4, the 64 below the fraction."""
    lines = [f"let {p}ux = bitcast<u32>({a});",
             f"let {p}m = ({p}ux & 0x7fffffu) | 0x800000u;",
             f"let {p}g = ({p}ux >> 23u) - 150u + 32u;  // the table's bit worth 2^31",
             *_window(p, 4, 2)]
    for j in range(1, 4):
        lines += _mul_wide(f"{p}m", f"{p}w{j}", f"{p}p{j}")
    return lines + [
        f"let {p}s1 = {p}p3h + {p}p2l;",
        f"let {p}c1 = select(0u, 1u, {p}s1 < {p}p3h);",
        f"let {p}s2a = {p}p2h + {p}p1l;",
        f"let {p}s2 = {p}s2a + {p}c1;",
        f"let {p}c2 = select(0u, 1u, {p}s2a < {p}p2h) + select(0u, 1u, {p}s2 < {p}s2a);",
        f"var {p}k = {p}p1h + {p}m * {p}w0 + {p}c2;",
        f"var {p}fh = {p}s2;",
        f"var {p}fl = {p}s1;",
        f"let {p}neg = {p}fh >= 0x80000000u;",
        f"if ({p}neg) {{  // a fraction past 1/2: the next k, and 1 - fraction",
        f"    {p}k = {p}k + 1u;",
        f"    {p}fh = ~{p}fh + select(0u, 1u, {p}fl == 0u);",
        f"    {p}fl = 0u - {p}fl;",
        "}",
        f"var {p}f = ldexp(f32({p}fl), -64);",
        f"if ({p}fh != 0u) {{",
        f"    let {p}n = countLeadingZeros({p}fh);",
        f"    let {p}top = ({p}fh << {p}n) | select({p}fl >> (32u - {p}n), 0u, {p}n == 0u);",
        f"    {p}f = ldexp(f32({p}top), -32 - i32({p}n));",
        "}",
        f"{r} = select({p}f, -{p}f, {p}neg) * {PIO2};",
        f"{q} = {p}k & 3u;"]


def _payne_hanek_f64(a: str, p: str, r: str, q: str) -> list[str]:
    """_payne_hanek_f32 for f64 a >= 2^19, in u64 arithmetic: m of 53 bits in two words
    times six words of 2/pi (worth 2^-160 .. 2^31 times 2^e); the product's column words
    2-4 are the fraction, bits 0-1 of word 5 k mod 4."""
    lines = [f"let {p}ux = bitcast<u64>({a});",
             f"let {p}mm = ({p}ux & 0xffffffffffffflu) | 0x10000000000000lu;",
             f"let {p}m0 = u32({p}mm & 0xfffffffflu);",
             f"let {p}m1 = u32({p}mm >> 32u);",
             f"let {p}g = u32({p}ux >> 52u) - 1075u + 64u;  // the table's bit worth 2^31",
             *_window(p, 6, 3)]
    pp = {}
    for i in range(2):
        for j in range(6):  # word j of the window is column 5 - j
            name = f"{p}q{i}{j}"
            lines.append(f"let {name} = u64({p}m{i}) * u64({p}w{5 - j});")
            pp[i, j] = name
    carry = "0lu"
    for c in range(6):
        terms = [f"({pp[i, c - i]} & 0xfffffffflu)" for i in range(2) if 0 <= c - i < 6]
        terms += [f"({pp[i, c - 1 - i]} >> 32u)" for i in range(2) if 0 <= c - 1 - i < 6]
        lines.append(f"let {p}c{c} = {' + '.join(terms)} + {carry};")
        carry = f"({p}c{c} >> 32u)"
    return lines + [
        f"var {p}k = u32({p}c5);",
        f"var {p}fh = ((({p}c4 & 0xfffffffflu) << 32u) | ({p}c3 & 0xfffffffflu));",
        f"var {p}fl = u32({p}c2);",
        f"let {p}neg = {p}fh >= 0x8000000000000000lu;",
        f"if ({p}neg) {{  // a fraction past 1/2: the next k, and 1 - fraction",
        f"    {p}k = {p}k + 1u;",
        f"    {p}fh = ~{p}fh + select(0lu, 1lu, {p}fl == 0u);",
        f"    {p}fl = 0u - {p}fl;",
        "}",
        f"let {p}f = ldexp(f64({p}fh), -64) + ldexp(f64({p}fl), -96);",
        f"{r} = select({p}f, -{p}f, {p}neg) * {PIO2};",
        f"{q} = {p}k & 3u;"]


def reduce_pio2(a: str, w: str, p: str = "t_") -> list[str]:
    """{p}r = a - k pi/2 in [-pi/4, pi/4] and {p}q = k mod 4 for finite a >= 0."""
    ph = _payne_hanek_f64 if w == "f64" else _payne_hanek_f32
    return [f"var {p}r = {w}(0);",
            f"var {p}q = 0u;",
            f"if ({a} < {K[w]['cw_max']}) {{", *indent(_cody_waite(a, p, w)),
            "} else {", *indent(ph(a, p + "h_", f"{p}r", f"{p}q")), "}"]


def sincos(r: str, p: str, w: str) -> list[str]:
    """{p}s = sin(r), {p}c = cos(r) for |r| <= pi/4: Cephes's sinf and cosf, fdlibm's kernel
    sin and cos in f64."""
    if w == "f64":
        return [f"let {p}z = {r} * {r};",
                f"let {p}s = {r} + {r} * {p}z * (-0.166666666666666324348 + {p}z * "
                f"(0.00833333333332248946124 + {p}z * (-0.000198412698298579493134 + {p}z * "
                f"(2.75573137070700676789e-06 + {p}z * (-2.50507602534068634195e-08 + {p}z * "
                f"1.58969099521155010221e-10)))));",
                f"let {p}c = 1.0 - 0.5 * {p}z + {p}z * {p}z * (0.0416666666666666019037 + "
                f"{p}z * (-0.00138888888888741095749 + {p}z * (2.48015872894767294178e-05 + "
                f"{p}z * (-2.75573143513906633035e-07 + {p}z * (2.08757232129817482790e-09 + "
                f"{p}z * -1.13596475577881948265e-11)))));"]
    return [f"let {p}z = {r} * {r};",
            f"let {p}s = ((-0.00019515295891 * {p}z + 0.0083321608736) * {p}z - "
            f"0.16666654611) * {p}z * {r} + {r};",
            f"let {p}c = ((2.443315711809948e-05 * {p}z - 0.001388731625493765) * {p}z + "
            f"0.04166664568298827) * {p}z * {p}z - 0.5 * {p}z + 1.0;"]
