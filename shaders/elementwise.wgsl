// Elementwise kernels: out[i] = op(a[i], b[i]) (binary) or op(a[i]) (unary).
// Bindings: 0 a (read), [1 b (read)], then out (read_write), then params (uniform).
// Params: n (items in this launch: elements, or u32 words of four u8 lanes), p0 (scalar).
// Templates: T (WGSL type), ENABLE, WG (workgroup size), EXPR (op on x, y, p.p0),
//            ARGS / CALL (unary or binary signature), APPLY (plain, or per u8 lane).
// The 1-D index folds over a 2-D grid, so any n fits under 65,535 workgroups per dimension.
${ENABLE}

struct Params {
    n: u32,
    p0: ${PT},
}

${BINDINGS}
@group(0) @binding(${UB}) var<uniform> p: Params;

fn op(${ARGS}) -> ${T} {
    return ${EXPR};
}

fn apply(${ARGS}) -> ${T} {
    ${APPLY}
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (i >= p.n) {
        return;
    }
    out[i] = apply(${CALL});
}
