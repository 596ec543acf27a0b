// scatter_reduce: out[idx[j]·inner + c] = op(out[idx[j]·inner + c], v[j·inner + c]) for every
// row j of v in order (ONNX's ScatterND / ScatterElements reductions). One invocation per
// column c walks the rows in order, so repeated indices combine deterministically.
// Filled in by wgcompute/kernels/gather/scatter_reduce.py.
// Bindings: 0 v (read), 1 idx (read: rows of out, in range), 2 out (read_write), 3 params.
// Params: m (rows of v), inner (elements per row).
// Templates: T (the element type), IT ("s32" or "s64": the index dtype, s64 read as two
//   words), COMBINE (the WGSL of op on a and b), F16, WG.
#if F16
enable f16;
#endif

struct Params {
    m: u32,
    inner: u32,
}

@group(0) @binding(0) var<storage, read> v: array<${T}>;
#if IT == "s64"
@group(0) @binding(1) var<storage, read> idx: array<vec2<u32>>;
#else
@group(0) @binding(1) var<storage, read> idx: array<u32>;
#endif
@group(0) @binding(2) var<storage, read_write> out: array<${T}>;
@group(0) @binding(3) var<uniform> p: Params;

fn combine(a: ${T}, b: ${T}) -> ${T} {
    return ${COMBINE};
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let c = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (c >= p.inner) {
        return;
    }
    for (var j = 0u; j < p.m; j = j + 1u) {
#if IT == "s64"
        let r = idx[j].x;
#else
        let r = idx[j];
#endif
        let d = r * p.inner + c;
        out[d] = combine(out[d], v[j * p.inner + c]);
    }
}
