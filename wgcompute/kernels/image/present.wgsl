// present: draws a surface's frame into its colour target(s) with one full-screen triangle.
// The frame is packed RGBA8 (one u32 word per pixel, R in the low byte), fw×fh pixels; the
// target is tw×th; sizes that differ are resampled nearest-neighbour (integer maths, so
// equal sizes copy every byte exactly). The frame is read from a storage buffer: nothing
// travels through the CPU.
// Bindings: 0 frame (read storage, array<u32>), 1 params (uniform: fw, fh, tw, th).
// Templates: OUTPUTS (fields of the fragment output struct, one per colour target),
//            ASSIGN (the statements writing the colour to each field).

struct Params {
    fw: u32,
    fh: u32,
    tw: u32,
    th: u32,
}

@group(0) @binding(0) var<storage, read> frame: array<u32>;
@group(0) @binding(1) var<uniform> p: Params;

@vertex
fn vs_main(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
    // (-1,-1), (3,-1), (-1,3): one triangle that covers the whole target
    let x = f32((i << 1u) & 2u) * 2.0 - 1.0;
    let y = f32(i & 2u) * 2.0 - 1.0;
    return vec4<f32>(x, y, 0.0, 1.0);
}

struct Out {
${OUTPUTS}
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> Out {
    let tx = u32(pos.x);
    let ty = u32(pos.y);
    let fx = min(tx * p.fw / p.tw, p.fw - 1u);
    let fy = min(ty * p.fh / p.th, p.fh - 1u);
    let c = unpack4x8unorm(frame[fy * p.fw + fx]);
    var o: Out;
${ASSIGN}
    return o;
}
