${acts}
#if vec_p
fn act0(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(act0s(v.x), act0s(v.y), act0s(v.z), act0s(v.w));
}
#if residual
fn act1(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(act1s(v.x), act1s(v.y), act1s(v.z), act1s(v.w));
}
#endif
fn store4(r: u32, c: u32, acc: vec4<f32>) {
    if (c >= p.N) {
        return;
    }
    let k = p.g * p.M + r;
    let o = ((c / ${P}) * p.KO + k) * ${P} + c % ${P};
    var v = act0(acc + vec4<f32>(f32(bias[k])));
#if residual
    v = act1(v + vec4<f32>(residual[o / 4u]));
#endif
    out[o / 4u] = vec4<${t}>(v);
}
#else
fn store4(r: u32, c: u32, acc: vec4<f32>) {
    let k = p.g * p.M + r;
    var col = c;
    var n = col / ${P};
    var pix = col % ${P};
    for (var lane = 0u; lane < 4u; lane = lane + 1u) {
        if (col < p.N) {
            let o = (n * p.KO + k) * ${P} + pix;
            let v0 = acc[lane];
            var v = act0(v0 + f32(bias[k]));
#if residual
            v = act1(v + f32(residual[o]));
#endif
            out[o] = ${t}(v);
        }
        col = col + 1u;
        pix = pix + 1u;
        if (pix == ${P}) {
            pix = 0u;
            n = n + 1u;
        }
    }
}
#endif
