// unique's programs over a sorted array of n elements whose groups of equal values start
// where flags[i] is 1 (pos: the exclusive prefix sum of flags, so group g starts at the i
// whose pos[i] is g and flags[i] is 1):
//   compact  out[pos[i]] = src[i] (W words; IOTA: the position i itself) where flags[i] is 1
//   counts   out[g] = the next group's start (or n) - starts[g], for the m groups
//   inverse  out[idx[i]] = pos[i] + flags[i] - 1: the group of the element sorted to i
// Bindings: compact and inverse: 0 src (inverse: idx), 1 flags, 2 pos, 3 out, 4 params;
//   counts: 0 starts, 1 out, 2 params.
// Templates: STEP, W (words per element), IOTA, WG.
struct Params {
    n: u32,
    m: u32,
}

#if STEP == "counts"
@group(0) @binding(0) var<storage, read> starts: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;
#else
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read> flags: array<u32>;
@group(0) @binding(2) var<storage, read> pos: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;
@group(0) @binding(4) var<uniform> p: Params;
#endif

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
#if STEP == "counts"
    if (i >= p.m) {
        return;
    }
    var end = p.n;
    if (i + 1u < p.m) {
        end = starts[i + 1u];
    }
    out[i] = end - starts[i];
#elif STEP == "compact"
    if (i >= p.n || flags[i] == 0u) {
        return;
    }
#if IOTA
    out[pos[i]] = i;
#else
#for k in range(W)
    out[pos[i] * ${W}u + ${k}u] = src[i * ${W}u + ${k}u];
#endfor
#endif
#else
    if (i >= p.n) {
        return;
    }
    out[src[i]] = pos[i] + flags[i] - 1u;
#endif
}
