// iota: out[i] = start + T(i) * step, computed in the output's dtype as numpy's arange and
// linspace compute it; with endpoint, the last element is `last` exactly (linspace's stop).
// Bindings: 0 out (read_write), 1 params (uniform: n elements, endpoint flag, start, step,
// last). Templates: ENABLE, T (the WGSL type values are computed in: i32 or u32 for packed
// dtypes), OT (out's element: T, or u32 words of LANES lanes of BITS bits), WG (workgroup
// size), PACKED (1- and 2-byte integers).
${ENABLE}

struct Params {
    n: u32,
    endpoint: u32,
    start: ${T},
    step: ${T},
    last: ${T},
}

@group(0) @binding(0) var<storage, read_write> out: array<${OT}>;
@group(0) @binding(1) var<uniform> p: Params;

fn value(e: u32) -> ${T} {
    if (p.endpoint != 0u && e + 1u == p.n) {
        return p.last;
    }
    return p.start + ${T}(e) * p.step;
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
#if PACKED
    if (g * ${LANES}u >= p.n) {
        return;
    }
    var w = 0u;
    for (var l = 0u; l < ${LANES}u; l = l + 1u) {
        if (g * ${LANES}u + l < p.n) {
            w = insertBits(w, u32(value(g * ${LANES}u + l)), l * ${BITS}u, ${BITS}u);
        }
    }
    out[g] = w;
#else
    if (g < p.n) {
        out[g] = value(g);
    }
#endif
}
