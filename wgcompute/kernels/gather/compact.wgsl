// Compaction: the flat positions of x's nonzero elements, in order. Filled in by
// wgcompute/kernels/gather/gather.py. x is read as bits: items of 4, 8 or 16 bytes as u32,
// vec2<u32>, vec4<u32>, items of 1 or 2 bytes as LANES lanes of a u32 word; an element is
// nonzero where any bit under NZ is set (for floats NZ leaves out the sign bits: -0.0 is
// zero, nan is not).
// Modes (TILE = WG·ITEMS elements per workgroup, ITEMS consecutive ones per invocation):
//   "count": out[t] = the nonzero elements of tile t.
//   "compact": out[off[t] + k] = the position of tile t's k-th nonzero element (off: the
//     tiles' exclusive prefix sums of the counts).
//   "unravel": out[j] = (x[j] / stride) % size, a coordinate of flat positions.
// Bindings: 0 x, [1 off (compact)], then out, then params.
// Params: total (elements of x), stride, size.
// Templates: T, PACKED, LANES, BITS, MASK, NZ (a T of bit masks), MODE, WG, ITEMS.

struct Params {
    total: u32,
    stride: u32,
    size: u32,
}

#if MODE == "unravel"
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let j = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (j < p.total) {
        out[j] = (x[j] / p.stride) % p.size;
    }
}
#else
#if PACKED
@group(0) @binding(0) var<storage, read> x: array<u32>;
#else
@group(0) @binding(0) var<storage, read> x: array<${T}>;
#endif
#if MODE == "compact"
@group(0) @binding(1) var<storage, read> off: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;
#else
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;
#endif

var<workgroup> tot: array<u32, ${WG}>;

fn nonzero(e: u32) -> u32 {
    if (e >= p.total) {
        return 0u;
    }
#if PACKED
    let v = (x[e / ${LANES}u] >> ((e % ${LANES}u) * ${BITS}u)) & ${MASK}u;
    return u32((v & ${NZ}) != 0u);
#elif T == "u32"
    return u32((x[e] & ${NZ}) != 0u);
#else
    return u32(any((x[e] & ${NZ}) != ${T}(0u)));
#endif
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = wid.y * nwg.x + wid.x;
    if (t * ${WG * ITEMS}u >= p.total) {
        return;
    }
    let first = t * ${WG * ITEMS}u + lid * ${ITEMS}u;
    var flags: array<u32, ${ITEMS}>;
    var c = 0u;
    for (var k = 0u; k < ${ITEMS}u; k = k + 1u) {
        flags[k] = nonzero(first + k);
        c = c + flags[k];
    }
    tot[lid] = c;
    workgroupBarrier();
#if MODE == "count"
    for (var s = ${WG // 2}u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            tot[lid] = tot[lid] + tot[lid + s];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        out[t] = tot[0];
    }
#else
    for (var d = 1u; d < ${WG}u; d = d << 1u) {
        var v = 0u;
        if (lid >= d) {
            v = tot[lid - d];
        }
        workgroupBarrier();
        if (lid >= d) {
            tot[lid] = tot[lid] + v;
        }
        workgroupBarrier();
    }
    var at = off[t] + tot[lid] - c;
    for (var k = 0u; k < ${ITEMS}u; k = k + 1u) {
        if (flags[k] == 1u) {
            out[at] = first + k;
            at = at + 1u;
        }
    }
#endif
}
#endif
