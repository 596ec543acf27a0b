${enable}
struct Params {
${fields}
}
${bindings}
${acts}
@compute @workgroup_size(${wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let o = (wid.y * nwg.x + wid.x) * ${wg}u + lid;
    if (o >= p.n) {
        return;
    }
    let pix = o % p.P;
    let k = (o / p.P) % p.KO;
    let n = o / (p.P * p.KO);
    let oh = pix / p.OW;
    let ow = pix % p.OW;
    let xb = (n * p.C + k / p.mult) * p.H;
    let wb = k * ${kh * kw}u;
    let ih0 = i32(oh * ${sh}u) - i32(p.pt);
    let iw0 = i32(ow * ${sw}u) - i32(p.pl);
    var v0 = 0.0;
    for (var a = 0u; a < ${kh}u; a = a + 1u) {
        let ih = ih0 + i32(a * ${dh}u);
        if (ih < 0 || ih >= i32(p.H)) {
            continue;
        }
        let xr = (xb + u32(ih)) * p.W;
        for (var b = 0u; b < ${kw}u; b = b + 1u) {
            let iw = iw0 + i32(b * ${dw}u);
            if (iw >= 0 && iw < i32(p.W)) {
                v0 = v0 + f32(x[xr + u32(iw)]) * f32(w[wb + a * ${kw}u + b]);
            }
        }
    }
    var v = act0(v0 + f32(bias[k]));
#if residual
    v = act1(v + f32(residual[o]));
#endif
    out[o] = ${t}(v);
}
