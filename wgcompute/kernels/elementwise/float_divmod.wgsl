fn clz(v: ${u}) -> u32 {
#if u == "u64"
    let hi = u32(v >> 32u);
    return select(countLeadingZeros(hi), 32u + countLeadingZeros(u32(v)), hi == 0u);
#else
    return countLeadingZeros(v);
#endif
}

// nonzero finite |v| as an integer mantissa m (top bit at bit ${mb}) and an exponent e:
// |v| = m·2^(e - ${bias} - ${mb}), subnormals normalized (e < 1)
fn unpack(v: ${w}) -> vec2<${u}> {
    let a = bitcast<${u}>(v) & ${ABSM};
    var e = i32(u32(a >> ${mb}u));
    var m = a & ${MMASK};
    if (e == 0) {
        let lz = clz(m) - ${bits - 1 - mb}u;
        m = m << lz;
        e = 1 - i32(lz);
    } else {
        m = m | ${HID};
    }
    return vec2<${u}>(m, ${u}(bitcast<u32>(e)));
}

fn exponent(p: vec2<${u}>) -> i32 {
    return bitcast<i32>(u32(p.y));
}

// s | r·2^(e - ${bias} - ${mb}) for 0 < r < 2^${mb + 1}, exactly representable (subnormal too)
fn pack(s: ${u}, r: ${u}, e0: i32) -> ${w} {
    let lz = clz(r) - ${bits - 1 - mb}u;
    let e = e0 - i32(lz);
    if (e >= 1) {
        return bitcast<${w}>(s | (${u}(u32(e)) << ${mb}u) | ((r << lz) & ${MMASK}));
    }
    return bitcast<${w}>(s | ((r << lz) >> u32(1 - e)));
}

// C's fmod(x, y)·2^k for finite x and y != 0 (or ±inf), exactly: the remainder of
// mx·2^(ex - ey) by my, scaled back by 2^ey
fn fmod_scaled(x: ${w}, y: ${w}, k: i32) -> ${w} {
    let ux = bitcast<${u}>(x);
    let s = ux & ${SIGN};
    if ((ux & ${ABSM}) == ${ZERO}) {
        return x;
    }
    let px = unpack(x);
    if ((ux & ${ABSM}) < (bitcast<${u}>(y) & ${ABSM})) {
        return pack(s, px.x, exponent(px) + k);
    }
    let py = unpack(y);
    let my = py.x;
    var r = px.x;
    var d = exponent(px) - exponent(py);  // >= 0
    loop {  // one step while x / y < 2^${step + 1}
        let n = min(d, ${step});
        r = (r << u32(n)) % my;
        d = d - n;
        if (d <= 0 || r == ${ZERO}) { break; }
    }
    if (r == ${ZERO}) {
        return bitcast<${w}>(s);
    }
    return pack(s, r, exponent(py) + k);
}

// z / b correctly rounded, for finite z, b != 0 (see _float_divmod)
fn div_rn(z: ${w}, b: ${w}) -> ${w} {
    let q0 = z / b;
    let aq = bitcast<${u}>(q0) & ${ABSM};
    if (aq < ${BIG} && (bitcast<${u}>(b) & ${ABSM}) < ${HUGE_B}) {
        return q0;
    }
    let pz = unpack(z);
    let pb = unpack(b);
    let mb = pb.x;
    // ${mb + 2} bits of mz / mb (in [1/2, 2)) below the point, and whether a remainder is left
    var q = pz.x / mb;
    var r = pz.x % mb;
    var need = ${mb + 2};
    loop {
        if (need <= 0) { break; }
        let n = min(need, ${step});
        r = r << u32(n);
        q = (q << u32(n)) | (r / mb);
        r = r % mb;
        need = need - n;
    }
    let shift = select(1u, 2u, (q >> ${mb + 2}u) != ${ZERO});  // keep ${mb + 1} bits
    var m = q >> shift;
    let rest = q & (((${ONE}) << shift) - ${ONE});
    let half = ${ONE} << (shift - 1u);
    if (rest > half || (rest == half && (r != ${ZERO} || (m & ${ONE}) != ${ZERO}))) {
        m = m + ${ONE};
    }
    let s = (bitcast<${u}>(z) ^ bitcast<${u}>(b)) & ${SIGN};
    // m·2^(shift - ${mb + 2})·2^(ez - eb) as m·2^(e - bias - ${mb})
    var e = i32(shift) - 2 + exponent(pz) - exponent(pb) + ${bias};
    if (m == (${HID} << 1u)) {
        m = m >> 1u;
        e = e + 1;
    }
    if (e >= ${2 * bias + 1}) {
        return bitcast<${w}>(s | ${INF});
    }
    if (e < 1) {
        return pack(s, m, e);
    }
    return bitcast<${w}>(s | (${u}(u32(e)) << ${mb}u) | (m & ${MMASK}));
}

// numpy's remainder(a, b): fmod, then b's sign
fn remainder(a: ${w}, b: ${w}) -> ${w} {
    let ua = bitcast<${u}>(a);
    let ub = bitcast<${u}>(b);
    let ab = ub & ${ABSM};
    if ((ua & ${ABSM}) >= ${INF} || ab > ${INF} || ab == ${ZERO}) {
        return bitcast<${w}>(${QNAN});  // nan in, a = ±inf, b = ±0: fmod's nan
    }
    let m = fmod_scaled(a, b, 0);
    let um = bitcast<${u}>(m);
    if ((um & ${ABSM}) == ${ZERO}) {
        return bitcast<${w}>(ub & ${SIGN});
    }
    if ((ub & ${SIGN}) == (um & ${SIGN})) {
        return m;
    }
    if (ab >= ${TINY}) {  // m + b, both large enough to stay normal
        return m + b;
    }
    let r = fmod_scaled(a, b, 64) + b * ${w}(18446744073709551616.0);  // scaled by 2^64
    let pr = unpack(r);
    return pack(bitcast<${u}>(r) & ${SIGN}, pr.x, exponent(pr) - 64);
}

// numpy's floor_divide(a, b): (a - fmod(a, b)) / b, then the floor of the quotient
fn floor_divide(a: ${w}, b: ${w}) -> ${w} {
    let ua = bitcast<${u}>(a);
    let ub = bitcast<${u}>(b);
    let aa = ua & ${ABSM};
    let ab = ub & ${ABSM};
    let nan = bitcast<${w}>(${QNAN});
    let sq = (ua ^ ub) & ${SIGN};  // the sign of a / b
    if (aa > ${INF} || ab > ${INF}) {
        return nan;
    }
    if (ab == ${ZERO}) {  // a / ±0
        return select(bitcast<${w}>(sq | ${INF}), nan, aa == ${ZERO});
    }
    if (aa == ${INF}) {
        return nan;
    }
    let small = ab < ${TINY};
    if (small && aa >= ${HUGE_A}) {  // the quotient overflows
        return bitcast<${w}>(sq | ${INF});
    }
    // a small b: a, b and fmod scaled by 2^64 (exact), so that nothing is subnormal
    let k = select(0, 64, small);
    let f = select(${w}(1), ${w}(18446744073709551616.0), small);
    let m = fmod_scaled(a, b, k);
    let z = a * f - m;
    var d = bitcast<${w}>(sq);  // z = ±0: numpy's division gives a signed zero
    if ((bitcast<${u}>(z) & ${ABSM}) != ${ZERO}) {
        d = div_rn(z, b * f);
    }
    let um = bitcast<${u}>(m);
    if ((um & ${ABSM}) != ${ZERO} && (ub & ${SIGN}) != (um & ${SIGN})) {
        d = d - ${w}(1);  // the remainder takes b's sign
    }
    var q = bitcast<${w}>(sq);
    if ((bitcast<${u}>(d) & ${ABSM}) != ${ZERO}) {
        q = floor(d);
        if (d - q > ${w}(0.5)) {
            q = q + ${w}(1);
        }
    }
    return q;
}
