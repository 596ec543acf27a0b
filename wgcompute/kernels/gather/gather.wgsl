// Gathers along an axis and index checks. Filled in by wgcompute/kernels/gather/gather.py.
// Elements move as bits (no dtype feature is needed): items of 4, 8 or 16 bytes as u32,
// vec2<u32>, vec4<u32>; items of 1 or 2 bytes as LANES lanes of BITS bits in u32 words (an
// invocation then writes one whole word of out).
// Modes:
//   "take": x viewed as (outer, n, inner), out as (outer, m, inner):
//     out[o, j, c] = x[o, idx(j), c], idx(j) = idx[j] (ALONG: idx[o, j, c]); a negative
//     index counts from the end; one out of range is clamped here (the caller runs "check"
//     too and refuses it).
//   "check": out[0] = the smallest i whose idx[i] is out of range (atomicMin; the caller
//     fills out[0] with 0xffffffff first).
//   "scatter": out[off + (idx(j)·inner + c)] = x[j, c] (x[0] where vscalar is 1): x's
//     values written into rows of a (n, inner) region of out at element off. Items of 1 or
//     2 bytes are written lane by lane with atomics (the lanes of a word are others').
//     Indices must be in range (the caller checks them first).
// Bindings: take, scatter: 0 x, 1 idx, 2 out, 3 params; check: 0 idx, 1 out, 2 params.
// Params: total (items of out, indices checked, or elements scattered), n (the axis length),
//   m, inner, off, vscalar.
// Templates: T (x's item as bits), IT ("s32", "u32", "s64": the index dtype), MODE, ALONG,
//   PACKED, LANES, BITS, MASK, WG.

struct Params {
    total: u32,
    n: u32,
    m: u32,
    inner: u32,
    off: u32,
    vscalar: u32,
}

#if IT == "s64"
@group(0) @binding(${0 if MODE == "check" else 1}) var<storage, read> idx: array<vec2<u32>>;
#else
@group(0) @binding(${0 if MODE == "check" else 1}) var<storage, read> idx: array<u32>;
#endif
#if MODE == "check"
@group(0) @binding(1) var<storage, read_write> out: array<atomic<u32>>;
@group(0) @binding(2) var<uniform> p: Params;
#elif MODE == "scatter" and PACKED
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<atomic<u32>>;
@group(0) @binding(3) var<uniform> p: Params;
#else
#if PACKED
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
#else
@group(0) @binding(0) var<storage, read> x: array<${T}>;
@group(0) @binding(2) var<storage, read_write> out: array<${T}>;
#endif
@group(0) @binding(3) var<uniform> p: Params;
#endif

// (position along the axis, 1 if it is in range) of index i
fn resolve(i: u32) -> vec2<u32> {
#if IT == "s64"
    let w = idx[i];
    if (w.y == 0u) {
        return vec2<u32>(w.x, u32(w.x < p.n));
    }
    if (w.y == 0xffffffffu && p.n > 0u && w.x >= 0u - p.n) {
        return vec2<u32>(w.x + p.n, 1u);
    }
    return vec2<u32>(0u, 0u);
#elif IT == "s32"
    let w = idx[i];
    var pos = w;
    if (bitcast<i32>(w) < 0) {
        pos = w + p.n;
    }
    return vec2<u32>(pos, u32(pos < p.n));
#else
    let w = idx[i];
    return vec2<u32>(w, u32(w < p.n));
#endif
}

#if MODE == "check"
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (i < p.total && resolve(i).y == 0u) {
        atomicMin(&out[0], i);
    }
}
#elif MODE == "scatter"
#include "elementwise/element_main.wgsl"
    let r = resolve(e / p.inner);
    if (r.y == 0u) {
        return;
    }
    let d = p.off + r.x * p.inner + e % p.inner;
    let s = select(e, 0u, p.vscalar == 1u);
#if PACKED
    let v = (x[s / ${LANES}u] >> ((s % ${LANES}u) * ${BITS}u)) & ${MASK}u;
    let shift = (d % ${LANES}u) * ${BITS}u;
    atomicAnd(&out[d / ${LANES}u], ~(${MASK}u << shift));
    atomicOr(&out[d / ${LANES}u], v << shift);
#else
    out[d] = x[s];
#endif
}
#else
// the flat element of x that element e of out reads
fn source(e: u32) -> u32 {
    let c = e % p.inner;
    let q = e / p.inner;
    let j = q % p.m;
    let o = q / p.m;
#if ALONG
    let r = resolve(e);
#else
    let r = resolve(j);
#endif
    let pos = select(p.n - 1u, r.x, r.y == 1u);
    return (o * p.n + pos) * p.inner + c;
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (p.n == 0u) {
        return;
    }
#if PACKED
    // out word i: elements i·LANES.. of out
    if (i * ${LANES}u >= p.total) {
        return;
    }
    var word = 0u;
    for (var l = 0u; l < ${LANES}u; l = l + 1u) {
        let e = i * ${LANES}u + l;
        if (e < p.total) {
            let s = source(e);
            let v = (x[s / ${LANES}u] >> ((s % ${LANES}u) * ${BITS}u)) & ${MASK}u;
            word = word | (v << (l * ${BITS}u));
        }
    }
    out[i] = word;
#else
    if (i < p.total) {
        out[i] = x[source(i)];
    }
#endif
}
#endif
