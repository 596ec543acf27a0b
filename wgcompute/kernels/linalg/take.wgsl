// linalg_take: out[g] = a[offset + g], a contiguous run of any element type (complex64 too),
// one invocation per element: the results a linalg program leaves in its workspace.
struct Params {
    total: u32,
    offset: u32,
}

@group(0) @binding(0) var<storage, read> a: array<${T}>;
@group(0) @binding(1) var<storage, read_write> out: array<${T}>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (g < p.total) {
        out[g] = a[p.offset + g];
    }
}
