// fft_freq: the sample frequencies of a length-n transform, in cycles per unit of spacing d:
// out[i] = i / (d·n) for i < (n + 1) / 2 (every i for rfft's), (i - n) / (d·n) above.
// Bindings: 0 out (read_write), 1 params (uniform: total, n, inv = 1 / (d·n) in f64 where T
// is f64). Templates: T, WG, RFFT.
${ENABLE}

struct Params {
    total: u32,
    n: u32,
    inv: ${T},
}

@group(0) @binding(0) var<storage, read_write> out: array<${T}>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (i >= p.total) {
        return;
    }
    var k = ${T}(i);
#if not RFFT
    if (i >= (p.n + 1u) / 2u) {
        k = -${T}(p.n - i);
    }
#endif
    out[i] = k * p.inv;
}
