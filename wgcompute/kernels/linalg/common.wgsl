// What the linalg programs share: one workgroup of ${WG} invocations owns one matrix of the
// batch; reductions go through workgroup memory. Templates: T (f32, f64, or vec2<f32> for
// complex64 and vec2<f64> for complex128: re, im), R (T's real type), WG (a power of two), LOG2WG, IS_NAN. The arithmetic
// helpers (mul, div, mag, ...) are written once for real and complex T.
var<workgroup> red: array<${T}, ${WG}>;
var<workgroup> redi: array<u32, ${WG}>;
var<workgroup> flag: u32;

#if R in ("f32", "f64")
fn is_nan(v: ${R}) -> bool {
    return ${IS_NAN};
}
#endif

// The sum of every invocation's v, returned to all of them (called in uniform control flow).
fn wg_sum(t: u32, v: ${T}) -> ${T} {
    red[t] = v;
    workgroupBarrier();
#for i in range(LOG2WG)
    if (t < ${WG >> (i + 1)}u) {
        red[t] = red[t] + red[t + ${WG >> (i + 1)}u];
    }
    workgroupBarrier();
#endfor
    let total = red[0];
    workgroupBarrier();
    return total;
}

// The sign of v as -1, 0 or 1.
#if T in ("f32", "f64")
fn sign_of(v: ${T}) -> ${T} {
    return select(select(${T}(0), ${T}(-1), v < ${T}(0)), ${T}(1), v > ${T}(0));
}
#endif

#if R == "f64"
// ln(x) for a positive f64 (the GPU has no 64-bit log): x = m·2^e with m in [1, 2), then
// ln(m) = 2·atanh((m - 1) / (m + 1)) by its series (z ≤ 1/3: 24 terms reach 1e-23).
fn ln(x: f64) -> f64 {
    if (!(x <= 1.7976931348623157e308) || !(x > 0.0)) {
        return x;  // inf or nan: no scaling loop runs on them
    }
    var m = x;
    var e: f64 = 0.0;
    while (m >= 4294967296.0) { m = m * 2.3283064365386963e-10; e = e + 32.0; }
    while (m < 2.3283064365386963e-10) { m = m * 4294967296.0; e = e - 32.0; }
    while (m >= 2.0) { m = m * 0.5; e = e + 1.0; }
    while (m < 1.0) { m = m * 2.0; e = e - 1.0; }
    let z = (m - 1.0) / (m + 1.0);
    let z2 = z * z;
    var term = z;
    var s: f64 = 0.0;
    for (var i = 0u; i < 24u; i = i + 1u) {
        s = s + term / f64(2u * i + 1u);
        term = term * z2;
    }
    return 2.0 * s + e * 0.6931471805599453;
}
#elif R == "f32"
fn ln(x: f32) -> f32 {
    return log(x);
}
#endif

#if T[:4] == "vec2"
fn mul(a: vec2<${R}>, b: vec2<${R}>) -> vec2<${R}> {
    return vec2<${R}>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
// a / b, scaled by |b|'s larger part first (Smith's idea): no overflow of |b|² for large b
fn div(a: vec2<${R}>, b: vec2<${R}>) -> vec2<${R}> {
    let s = max(abs(b.x), abs(b.y));
    let bs = b / s;
    let as_ = a / s;
    return vec2<${R}>(as_.x * bs.x + as_.y * bs.y, as_.y * bs.x - as_.x * bs.y) / dot(bs, bs);
}
// |a|, scaled first so that tiny parts do not underflow when squared (nor huge ones overflow)
fn mag(a: vec2<${R}>) -> ${R} {
    let s = max(abs(a.x), abs(a.y));
    if (s == 0.0) {
        return 0.0;
    }
    return s * length(a / s);
}
// a / |a| (1 for 0), of modulus 1 however small a is
fn unit(a: vec2<${R}>) -> vec2<${R}> {
    let s = max(abs(a.x), abs(a.y));
    if (s == 0.0) {
        return vec2<${R}>(1.0, 0.0);
    }
    return normalize(a / s);
}
fn conjugate(a: vec2<${R}>) -> vec2<${R}> {
    return vec2<${R}>(a.x, -a.y);
}
fn is_zero(a: vec2<${R}>) -> bool {
    return a.x == 0.0 && a.y == 0.0;
}
fn from_real(r: ${R}) -> vec2<${R}> {
    return vec2<${R}>(r, 0.0);
}
fn real_of(a: vec2<${R}>) -> ${R} {
    return a.x;
}
fn imag_of(a: vec2<${R}>) -> ${R} {
    return a.y;
}
#elif T in ("f32", "f64")
fn mul(a: ${T}, b: ${T}) -> ${T} {
    return a * b;
}
fn div(a: ${T}, b: ${T}) -> ${T} {
    return a / b;
}
fn mag(a: ${T}) -> ${T} {
    return abs(a);
}
fn unit(a: ${T}) -> ${T} {
    return select(${T}(1), ${T}(-1), a < ${T}(0));
}
fn conjugate(a: ${T}) -> ${T} {
    return a;
}
fn is_zero(a: ${T}) -> bool {
    return a == ${T}(0);
}
fn from_real(r: ${T}) -> ${T} {
    return r;
}
fn real_of(a: ${T}) -> ${T} {
    return a;
}
fn imag_of(a: ${T}) -> ${T} {
    return ${T}(0);
}
#endif
