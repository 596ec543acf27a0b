// Shared prelude of the image kernels (prepended to each image_*.wgsl family).
// Bindings: the family's storage buffers in order (reads, then the output), then params
// (uniform) at binding ${UB}. Params: W, H, C (input image: width, height, elements per
// pixel: 1 for RGBA), OW, OH, OC (output), y0 and rows (the output rows of this launch),
// mode (0 clamp, 1 reflect, 2 zero), b0.. (word offset at which each binding starts: a
// launch may bind a band of rows), then the family's own fields.
// Templates: FIELDS, ACCESSORS (NAME_ld(i) / NAME_st(i, v) per binding: RGBA8 unpacks a u32
// word to vec4 unorm, RGBA16 two words, f32 one float), UB, V (vec4<f32> or f32),
// KEEP_ALPHA, C, OC.

struct Params {
${FIELDS}
}

@group(0) @binding(${UB}) var<uniform> p: Params;

alias V = ${V};

// Elements per pixel of the input and of the output (1 for RGBA): constants, so the
// divisions by them compile to shifts or multiplies.
const C: u32 = ${C}u;
const OC: u32 = ${OC}u;

${ACCESSORS}

// Index of i on an axis of n pixels: clamp to the edge, reflect about the edge
// (d c b a | a b c d | d c b a, scipy's "reflect"), or -1 for zero (outside reads 0).
fn border(i: i32, n: i32) -> i32 {
    if (i >= 0 && i < n) {
        return i;
    }
    if (p.mode == 0u) {
        return clamp(i, 0, n - 1);
    }
    if (p.mode == 1u) {
        // Mirror negative indices first (-1 -> 0, -2 -> 1): `%` is then only applied to a
        // non-negative value. (On an NVIDIA H200, naga's i32 `%` of a negative dividend
        // gave the unsigned remainder of its bit pattern: -1 % 10 was 5.)
        let period = 2 * n;
        var k = i;
        if (k < 0) {
            k = -k - 1;
        }
        k = k % period;
        if (k >= n) {
            k = period - 1 - k;
        }
        return k;
    }
    return -1;
}

// RGBA results keep the source pixel's alpha; float images have no alpha to keep.
fn keep_alpha(v: V, orig: V) -> V {
    ${KEEP_ALPHA}
}
