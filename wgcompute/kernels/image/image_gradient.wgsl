// generate_gradient: fills its output from its shape and params (no inputs).
// Bindings: out (read_write). Params: direction (0 horizontal, 1 vertical, 2 diagonal,
// 3 radial), start, end (values at t = 0 and t = 1). RGBA8 gets v in R, G, B and alpha 1.
// Templates: PACK (V from the scalar value v).

@compute @workgroup_size(${WGX}, ${WGY})
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x >= p.OW * OC || g.y >= p.rows) {
        return;
    }
    let y = p.y0 + g.y;
    let x = g.x / OC;
    let fx = select(f32(x) / f32(p.OW - 1u), 0.0, p.OW == 1u);
    let fy = select(f32(y) / f32(p.OH - 1u), 0.0, p.OH == 1u);
    var t = fx;
    if (p.direction == 1u) {
        t = fy;
    } else if (p.direction == 2u) {
        t = 0.5 * (fx + fy);
    } else if (p.direction == 3u) {
        t = min(1.0, length(vec2<f32>(fx - 0.5, fy - 0.5)) / length(vec2<f32>(0.5, 0.5)));
    }
    let v = p.start + (p.end - p.start) * t;
    out_st(y * p.OW * OC + g.x, ${PACK});
}
