// Per-pixel colour kernels: grayscale, invert, brightness_contrast, threshold.
// Bindings: src (read), out (read_write). Params: brightness, contrast, level (per kernel).
// Templates: OP (body of op(y, x, c) -> V, the output element at row y, pixel x, channel c).
// Values are unorm for RGBA8 (0..1, stored rounded to nearest), as-is for f32.

fn op(y: u32, x: u32, c: u32) -> V {
    ${OP}
}

@compute @workgroup_size(${WGX}, ${WGY})
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x >= p.OW * OC || g.y >= p.rows) {
        return;
    }
    let y = p.y0 + g.y;
    out_st(y * p.OW * OC + g.x, op(y, g.x / OC, g.x % OC));
}
