"""The op table's error function erf: its Taylor series below 1, and above 1 as 1 - erfc from
Chebyshev fits of erfc on a few intervals (to the last bit of erf), in f32 and f64.

The fits' coefficients were computed once in float64 from Python's math.erfc (least squares
on 20,001 points of each interval, refined three times): their error is below half an ulp of
erf (f64: 5.6e-17; f32: 7.7e-10), so the rounding of the evaluation is what remains (a few
ulp; tests/test_onnx_nn.py measures it against math.erf). erf(x) rounds to ±1 past 6 (f64)
and 4 (f32). No bits are read: f64 needs no shader-int64."""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import DType
from ..core.base import wgsl_is_nan

# erfc on [lo, hi]: Chebyshev coefficients in y = (2x - lo - hi) / (hi - lo)
_ERFC = {
    "f64": (
        (1.0, 2.0, (
            0.05714774426361082, -0.07216411186037618, 0.02355566241254105,
            -0.004179719271557276, 0.00029384471334866294, 3.2638635138919955e-05,
            -8.853742394383414e-06, 4.6810084713940507e-07, 7.330109350898643e-08,
            -1.1752407125941187e-08, 7.52477497358443e-11, 1.1428281979326659e-10,
            -7.87460115888446e-12, -5.467635584193192e-13, 9.403731042972448e-14,
            -5.034832828488713e-16, -6.612869983601796e-16, 3.286695310416523e-17)),
        (2.0, 3.5, (
            0.0010345166103163175, -0.0017660940873977424, 0.0011098062312503386,
            -0.0005218450226764775, 0.00018540294195185813, -4.945621151983896e-05,
            9.508013182478734e-06, -1.1279276819808993e-06, 1.0888101076317906e-08,
            2.6869930356614115e-08, -5.687118546755977e-09, 4.5308598169580526e-10,
            4.0576473890742505e-11, -1.5136207585451415e-11, 1.4806919739628978e-12,
            5.559077688887843e-14, -3.101471650055755e-14, 2.9078460047960953e-15,
            1.146970505011245e-16, -5.295537693592332e-17)),
        (3.5, 6.0, (
            9.846270350410738e-08, -1.8632077897911578e-07, 1.5783315303876407e-07,
            -1.1974926037137232e-07, 8.141515081043787e-08, -4.962614212848843e-08,
            2.7127824415561445e-08, -1.329697159109155e-08, 5.83894889587693e-09,
            -2.2922785172990426e-09, 8.014481321188903e-10, -2.4786866273255385e-10,
            6.701449025324701e-11, -1.549694232592049e-11, 2.92862752072489e-12,
            -3.993267371542469e-13, 1.7994101872560254e-14, 9.62770988523694e-15,
            -3.654506404418322e-15, 7.391518897460107e-16, -8.554115577626294e-17)),
    ),
    "f32": (
        (1.0, 2.5, (
            0.044498130679130554, -0.06868056952953339, 0.032814789563417435,
            -0.009756490588188171, 0.0015927249332889915, -1.9131457520416006e-05,
            -5.245095962891355e-05, 1.0314586688764393e-05, -1.5039958611851034e-07,
            -2.529320113353606e-07, 3.6882966014673e-08, 1.2699141738181652e-09,
            -9.227957287194499e-10)),
        (2.5, 4.0, (
            8.189629443222657e-05, -0.00014369538985192776, 9.760895045474172e-05,
            -5.196350684855133e-05, 2.1932548406766728e-05, -7.38801236366271e-06,
            1.9816914118564455e-06, -4.1568566189198464e-07, 6.454155254687066e-08,
            -6.158905829778405e-09)),
    ),
}
# terms of erf(x) / x = 2/sqrt(pi) sum (-1)^n x^2n / (n! (2n + 1)) kept for |x| < 1 (the first
# one dropped is below a quarter ulp)
_TAYLOR_TERMS = {"f64": 18, "f32": 11}


def _taylor(w: str) -> str:
    """Horner's form of erf(x) / x in t = x * x."""
    c = [2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))
         for n in range(_TAYLOR_TERMS[w])]
    expr = repr(c[-1])
    for v in reversed(c[:-1]):
        expr = f"{v!r} + t * ({expr})"
    return expr


def _clenshaw(coefs, lo: float, hi: float, w: str) -> list[str]:
    """Statements setting ``e`` to the Chebyshev series ``coefs`` at ``a`` in [lo, hi]."""
    lines = [f"let y = ({2.0 / (hi - lo)!r} * a - {(lo + hi) / (hi - lo)!r});",
             "let y2 = y + y;", f"var b1 = {w}(0);", f"var b2 = {w}(0);"]
    for c in reversed(coefs[1:]):
        lines.append(f"{{ let b0 = {c!r} + y2 * b1 - b2; b2 = b1; b1 = b0; }}")
    lines.append(f"e = {coefs[0]!r} + y * b1 - b2;")
    return lines


def erf_body(dt: DType, w: str) -> str:
    """The body of fn erf(x) -> w: nan stays nan, the sign of x (and of -0) kept."""
    fits = _ERFC[w]
    lines = [f"if ({wgsl_is_nan('x', w)}) {{ return x; }}", "let a = abs(x);",
             "if (a < 1.0) {", "    let t = x * x;", f"    return x * ({_taylor(w)});", "}",
             f"var e = {w}(0);"]
    for i, (lo, hi, coefs) in enumerate(fits):
        lines.append(f"{'if' if i == 0 else '} else if'} (a < {hi!r}) {{")
        lines += ["    " + s for s in _clenshaw(coefs, lo, hi, w)]
    lines.append("}")
    lines.append(f"return select({w}(-1), {w}(1), x > 0.0) * ({w}(1) - e);")
    return "\n    ".join(lines)


def erf_reference(x):
    """numpy has no erf: Python's math.erf of each element, in x's dtype."""
    x = np.asarray(x)
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)
