// complex_binary: out = a OP b for complex64 (vec2<${R}>) or complex128 (vec2<f64>) operands
// broadcast as numpy does.
// Bindings: 0 a (read), 1 b (read), 2 out (read_write), 3 params (uniform).
// out's shape is right-aligned into DIMS dimensions d0..; a and b are read through element
// strides sa*, sb* (0 along a broadcast dimension). Templates: OP (add, sub, mul, div), R (the
// parts' type), WG, DIMS.

struct Params {
    total: u32,
#for k in range(DIMS)
    d${k}: u32,
    sa${k}: u32,
    sb${k}: u32,
#endfor
}

@group(0) @binding(0) var<storage, read> a: array<vec2<${R}>>;
@group(0) @binding(1) var<storage, read> b: array<vec2<${R}>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec2<${R}>>;
@group(0) @binding(3) var<uniform> p: Params;

// a / b by Smith's method: the ratio of b's parts first, so that |b|² never overflows
fn cdiv(u: vec2<${R}>, v: vec2<${R}>) -> vec2<${R}> {
    if (abs(v.x) >= abs(v.y)) {
        let r = v.y / v.x;
        let d = v.x + v.y * r;
        return vec2<${R}>((u.x + u.y * r) / d, (u.y - u.x * r) / d);
    }
    let r = v.x / v.y;
    let d = v.x * r + v.y;
    return vec2<${R}>((u.x * r + u.y) / d, (u.y * r - u.x) / d);
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (i >= p.total) {
        return;
    }
    var rest = i;
    var ia = 0u;
    var ib = 0u;
#for k in range(DIMS - 1, -1, -1)
    let j${k} = rest % p.d${k};
    rest = rest / p.d${k};
    ia = ia + j${k} * p.sa${k};
    ib = ib + j${k} * p.sb${k};
#endfor
    let u = a[ia];
    let v = b[ib];
#if OP == "add"
    out[i] = u + v;
#elif OP == "sub"
    out[i] = u - v;
#elif OP == "mul"
    out[i] = vec2<${R}>(u.x * v.x - u.y * v.y, u.x * v.y + u.y * v.x);
#else
    out[i] = cdiv(u, v);
#endif
}
