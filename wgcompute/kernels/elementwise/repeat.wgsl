// repeat: x (outer × n × inner) with element i of the middle axis repeated counts[i] times:
// out (outer × total × inner). offsets[i] = counts[0] + ... + counts[i - 1] (offsets[n] =
// total); output position j of the middle axis reads the i whose offsets[i] <= j <
// offsets[i + 1], found by binary search (the last i with offsets[i] <= j skips zero counts).
// Bindings: 0 x (read), 1 offsets (read, u32), 2 out (read_write), 3 params (uniform: size
// (out's elements), n, total, inner). Templates: T (an element as bits: u32, vec2<u32>,
// vec4<u32>), PACKED (1- and 2-byte items: LANES per u32 word, BITS each, MASK; an
// invocation writes one word), WG (workgroup size).

struct Params {
    size: u32,
    n: u32,
    total: u32,
    inner: u32,
}

@group(0) @binding(0) var<storage, read> x: array<${T}>;
@group(0) @binding(1) var<storage, read> offsets: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<${T}>;
@group(0) @binding(3) var<uniform> p: Params;

// the element of x that output element e reads
fn source(e: u32) -> u32 {
    let c = e % p.inner;
    let r = e / p.inner;
    let j = r % p.total;
    let o = r / p.total;
    var lo = 0u;
    var hi = p.n - 1u;
    while (lo < hi) {
        let mid = (lo + hi + 1u) / 2u;
        if (offsets[mid] <= j) {
            lo = mid;
        } else {
            hi = mid - 1u;
        }
    }
    return (o * p.n + lo) * p.inner + c;
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
#if PACKED
    if (g * ${LANES}u >= p.size) {
        return;
    }
    var w = 0u;
    for (var l = 0u; l < ${LANES}u; l = l + 1u) {
        let e = g * ${LANES}u + l;
        if (e < p.size) {
            let s = source(e);
            let v = (x[s / ${LANES}u] >> ((s % ${LANES}u) * ${BITS}u)) & ${MASK}u;
            w = w | (v << (l * ${BITS}u));
        }
    }
    out[g] = w;
#else
    if (g < p.size) {
        out[g] = x[source(g)];
    }
#endif
}
