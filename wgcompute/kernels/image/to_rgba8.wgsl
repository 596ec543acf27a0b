// to_rgba8: converts an image buffer into a surface frame, one packed RGBA8 u32 word per
// pixel (R in the low byte). One invocation per pixel.
// Sources: u8 with C = 1 or 3 channels (bytes packed four to a word; RGBA u8 needs no
// shader, it is a buffer copy), f32 with C = 1, 3 or 4 channels in [0, 1] (clamped,
// rounded by pack4x8unorm). C = 1 is grey (R = G = B); a missing alpha is opaque.
// Bindings: 0 src (read, array<${SRC_T}>), 1 out (read_write, array<u32>),
//           2 params (uniform: n = pixels).
// Templates: SRC_T (u32 for packed u8, f32), C (channels), FETCH (reads channel k of
//            pixel i as a f32 in [0, 1]), WG (workgroup size).

struct Params {
    n: u32,
}

@group(0) @binding(0) var<storage, read> src: array<${SRC_T}>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

fn fetch(k: u32) -> f32 {
    ${FETCH}
}

fn rgba(i: u32) -> vec4<f32> {
    let b = i * ${C}u;
    if (${C}u == 1u) {
        let v = fetch(b);
        return vec4<f32>(v, v, v, 1.0);
    }
    if (${C}u == 3u) {
        return vec4<f32>(fetch(b), fetch(b + 1u), fetch(b + 2u), 1.0);
    }
    return vec4<f32>(fetch(b), fetch(b + 1u), fetch(b + 2u), fetch(b + 3u));
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (i >= p.n) {
        return;
    }
    out[i] = pack4x8unorm(rgba(i));
}
