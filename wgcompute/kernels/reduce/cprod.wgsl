// complex_prod: the products of complex rows in chunks: out[r·m + j] = x[r·n + j·C] ·
// x[r·n + j·C + 1] · ... (up to C elements, the row's end), complex multiplication in R.
// Run again on its output until one value per row is left (m = 1).
// Bindings: 0 x (read, rows × n), 1 out (read_write, rows × m), 2 params (uniform: rows, n,
// m, chunk C). Templates: WG (workgroup size), R (the parts' type: f32 for complex64, f64
// for complex128).

struct Params {
    rows: u32,
    n: u32,
    m: u32,
    chunk: u32,
}

@group(0) @binding(0) var<storage, read> x: array<vec2<${R}>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec2<${R}>>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (g >= p.rows * p.m) {
        return;
    }
    let r = g / p.m;
    let j = g % p.m;
    let first = j * p.chunk;
    let last = min(p.n, first + p.chunk);
    var acc = vec2<${R}>(1.0, 0.0);
    for (var i = first; i < last; i = i + 1u) {
        let v = x[r * p.n + i];
        acc = vec2<${R}>(acc.x * v.x - acc.y * v.y, acc.x * v.y + acc.y * v.x);
    }
    out[g] = acc;
}
