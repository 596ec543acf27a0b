#if vec_w
fn load_a4(r: u32, k: u32, kend: u32) -> vec4<${s}> {
    if (r >= p.M || k >= kend) {
        return vec4<${s}>(0);
    }
    return vec4<${s}>(w[((p.g * p.M + r) * p.K + k) / 4u]);
}
#else
fn ld_w(i: u32, ok: bool) -> ${s} {
    if (ok) {
        return ${s}(w[i]);
    }
    return ${s}(0);
}
fn load_a4(r: u32, k: u32, kend: u32) -> vec4<${s}> {
    let i = (p.g * p.M + r) * p.K + k;
    let ok = r < p.M;
    return vec4<${s}>(ld_w(i, ok && k < kend), ld_w(i + 1u, ok && k + 1u < kend), ld_w(i + 2u, ok && k + 2u < kend), ld_w(i + 3u, ok && k + 3u < kend));
}
#endif
fn load_b4(k: u32, c: u32, kend: u32) -> vec4<${s}> {
    var v = vec4<${s}>(0);
    if (k >= kend) {
        return v;
    }
#if vec_p
    if (c < p.N) {
        let n = c / ${P};
        v = vec4<${s}>(x[((n * p.C + p.g * p.Cg + k) * ${P} + c % ${P}) / 4u]);
    }
#elif pointwise
    let base = p.g * p.Cg + k;
    var col = c;
    var n = col / ${P};
    var pix = col % ${P};
    for (var lane = 0u; lane < 4u; lane = lane + 1u) {
        if (col < p.N) {
            v[lane] = ${s}(x[(n * p.C + base) * ${P} + pix]);
        }
        col = col + 1u;
        pix = pix + 1u;
        if (pix == ${P}) {
            pix = 0u;
            n = n + 1u;
        }
    }
#else
    let ci = k / ${kh * kw}u;
    let rr = k % ${kh * kw}u;
    let ih0 = i32((rr / ${kw}u) * ${dh}u) - i32(p.pt);
    let iw0 = i32((rr % ${kw}u) * ${dw}u) - i32(p.pl);
    let chan = p.g * p.Cg + ci;
    var col = c;
    var n = col / ${P};
    let pix = col % ${P};
    var oh = pix / ${OW};
    var ow = pix % ${OW};
    for (var lane = 0u; lane < 4u; lane = lane + 1u) {
        if (col < p.N) {
            let ih = ih0 + i32(oh * ${sh}u);
            let iw = iw0 + i32(ow * ${sw}u);
            if (ih >= 0 && ih < i32(p.H) && iw >= 0 && iw < i32(p.W)) {
                v[lane] = ${s}(x[((n * p.C + chan) * p.H + u32(ih)) * p.W + u32(iw)]);
            }
        }
        col = col + 1u;
        ow = ow + 1u;
        if (ow == ${OW}) {
            ow = 0u;
            oh = oh + 1u;
            if (oh == p.OH) {
                oh = 0u;
                n = n + 1u;
            }
        }
    }
#endif
    return v;
}
