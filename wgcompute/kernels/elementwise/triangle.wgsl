// triangle: the elements of stacked matrices (rows × cols) on one side of diagonal k, as
// bits: "eye" writes ONE on diagonal k and zero elsewhere; "tril" ("triu") keeps x where
// col - row <= k (>= k) and writes zero elsewhere. Zero is all-zero bits in every dtype, so
// no dtype's feature is needed.
// Bindings: (tril/triu: 0 x (read)), out (read_write), params (uniform: n elements, rows,
// cols, k, upper flag, the bits of one as words one0, one1).
// Templates: T (an element as bits: u32 or vec2<u32>), HAS_X, PACKED (1- and 2-byte items:
// LANES per u32 word, BITS each, MASK), ONE (WGSL of one's bits), WG (workgroup size).

struct Params {
    n: u32,
    rows: u32,
    cols: u32,
    k: i32,
    upper: u32,
    one0: u32,
    one1: u32,
}

#if HAS_X
@group(0) @binding(0) var<storage, read> x: array<${T}>;
@group(0) @binding(1) var<storage, read_write> out: array<${T}>;
@group(0) @binding(2) var<uniform> p: Params;
#else
@group(0) @binding(0) var<storage, read_write> out: array<${T}>;
@group(0) @binding(1) var<uniform> p: Params;
#endif

// whether element e (flat, row-major over the stack) is kept (x) or set (ONE)
fn inside(e: u32) -> bool {
    let m = e % (p.rows * p.cols);
    let d = i32(m % p.cols) - i32(m / p.cols);
#if HAS_X
    return select(d <= p.k, d >= p.k, p.upper != 0u);
#else
    return d == p.k;
#endif
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
        let e = g * ${LANES}u + l;
        if (e < p.n && inside(e)) {
#if HAS_X
            w = w | (x[g] & (${MASK}u << (l * ${BITS}u)));
#else
            w = w | (${ONE} << (l * ${BITS}u));
#endif
        }
    }
    out[g] = w;
#else
    if (g >= p.n) {
        return;
    }
#if HAS_X
    out[g] = select(${T}(0u), x[g], inside(g));
#else
    out[g] = select(${T}(0u), ${ONE}, inside(g));
#endif
#endif
}
