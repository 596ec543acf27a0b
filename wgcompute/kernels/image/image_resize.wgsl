// Bilinear resize with half-pixel centers (as OpenCV INTER_LINEAR and PIL upscaling):
// source = (dst + 0.5) * in / out - 0.5, clamped to the image. resize keeps the layout;
// preprocess also normalizes ((v - mean[c]) / std[c]) and writes planar CHW f32.
// Bindings: src (read), out (read_write). Params: sx, sy (in / out per axis), m0..m3, s0..s3
// (mean and 1 / std per channel, preprocess). Templates: MAIN (the resize or preprocess body).

fn sample(oy: u32, ox: u32, c: u32) -> V {
    let sy = clamp((f32(oy) + 0.5) * p.sy - 0.5, 0.0, f32(p.H - 1u));
    let sx = clamp((f32(ox) + 0.5) * p.sx - 0.5, 0.0, f32(p.W - 1u));
    let y0 = u32(floor(sy));
    let x0 = u32(floor(sx));
    let y1 = min(y0 + 1u, p.H - 1u);
    let x1 = min(x0 + 1u, p.W - 1u);
    let fy = sy - f32(y0);
    let fx = sx - f32(x0);
    let a = src_ld((y0 * p.W + x0) * C + c);
    let b = src_ld((y0 * p.W + x1) * C + c);
    let d = src_ld((y1 * p.W + x0) * C + c);
    let e = src_ld((y1 * p.W + x1) * C + c);
    return mix(mix(a, b, fx), mix(d, e, fx), fy);
}

@compute @workgroup_size(${WGX}, ${WGY})
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    ${MAIN}
}
