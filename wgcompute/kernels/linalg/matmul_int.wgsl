// linalg_matmul_int: out = a · b for integer, complex and (outer products) float arrays
// (numpy's matmul shapes, batch dimensions broadcast through element strides), one output
// element per invocation, integer arithmetic wrapping as numpy's does; complex (vec2<f32>
// or vec2<f64>: re, im) multiplied as complex, with CONJ a's conjugate. Templates: T, WG,
// COMPLEX, CONJ, INDEX (the WGSL that sets i_a and
// i_b, each operand's first element of batch bi), FIELDS (the uniform's fields).
struct Params {
${FIELDS}
}

@group(0) @binding(0) var<storage, read> a: array<${T}>;
@group(0) @binding(1) var<storage, read> b: array<${T}>;
@group(0) @binding(2) var<storage, read_write> out: array<${T}>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    let mn = p.m * p.n;
    if (g >= p.total) {
        return;
    }
    let bi = g / mn;
    let i = (g % mn) / p.n;
    let j = g % p.n;
${INDEX}
    // the sum starts from the first product, not from 0: a product of one term (an outer
    // product) is exactly the elementwise product, -0.0 and all
    var acc = ${T}(0);
    for (var l = 0u; l < p.k; l = l + 1u) {
        let x = a[i_a + i * p.k + l];
        let y = b[i_b + l * p.n + j];
#if COMPLEX
    #if CONJ
        let xy = ${T}(x.x * y.x + x.y * y.y, x.x * y.y - x.y * y.x);
    #else
        let xy = ${T}(x.x * y.x - x.y * y.y, x.x * y.y + x.y * y.x);
    #endif
#else
        let xy = x * y;
#endif
        acc = select(acc + xy, xy, l == 0u);
    }
    out[g] = acc;
}
