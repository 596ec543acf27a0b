// copy: out = a, bit for bit, moved as 16-byte words whatever the dtype.
// Bindings: 0 a (read), 1 out (read_write), 2 params (uniform: n = 16-byte words in this
// launch). Templates: WG (workgroup size). Buffers are allocated in 16-byte granules, so
// the last word never reaches past an allocation. A shader copy runs at ~4x the bandwidth
// of the encoder's copy_buffer_to_buffer on an H200 (measured in bench_kernels).

struct Params {
    n: u32,
    p0: u32,
}

@group(0) @binding(0) var<storage, read> a: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<u32>>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (i < p.n) {
        out[i] = a[i];
    }
}
