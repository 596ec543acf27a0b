// linalg_small: helpers with one invocation per output element, by MODE:
// "cross": out (rows × 3) = a × b row by row (a and b rows × 3);
// "eye": out (… × n × n) = the identity in every matrix;
// "rank": out[r] = the count of a[r, j] > b[r]·a[r, 0] over the n values of row r (a's rows
//   are singular values, descending, b the relative tolerances);
// "pinv_w": out[r, j] = 1 / a[r, j] where a[r, j] > b[r]·a[r, 0], else 0;
// "scale_cols": out[…, i, j] = a[…, i, j]·b[…, j] (matrices of r rows × n columns; complex64
//   a takes the real parts of b).
struct Params {
    total: u32,
    n: u32,
    r: u32,
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
    if (g >= p.total) {
        return;
    }
#if MODE == "cross"
    let r = g - g % 3u;
    let i = g % 3u;
    let j = r + (i + 1u) % 3u;
    let k = r + (i + 2u) % 3u;
    out[g] = a[j] * b[k] - a[k] * b[j];
#elif MODE == "eye"
    let e = g % (p.n * p.n);
    out[g] = select(${ZERO}, ${ONE}, e / p.n == e % p.n);
#elif MODE == "rank"
    var count = ${T}(0);
    if (p.n > 0u) {
        let cut = b[g] * a[g * p.n];
        for (var j = 0u; j < p.n; j = j + 1u) {
            count = count + select(${T}(0), ${T}(1), a[g * p.n + j] > cut);
        }
    }
    out[g] = count;
#elif MODE == "pinv_w"
    let row = g / p.n;
    let s = a[g];
    out[g] = select(${T}(0), ${T}(1) / s, s > b[row] * a[row * p.n]);
#else
    let j = g % p.n;
    let mat = g / (p.r * p.n);
    #if T[:4] == "vec2"
    out[g] = a[g] * b[mat * p.n + j].x;  // complex a, real factors kept as (w, 0)
    #else
    out[g] = a[g] * b[mat * p.n + j];
    #endif
#endif
}
