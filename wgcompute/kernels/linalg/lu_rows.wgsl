// linalg_lu for small matrices (n ≤ NMAX) on adapters with subgroups (f32 and complex64: the
// pivot's magnitude is an f32): lu_small.wgsl's results, with the matrix and X in workgroup
// memory, but rows never move and no invocation scans a column. Invocation t owns row t of
// the matrix and of X; the pivot of column j is the largest |a[i][j]| among the rows not yet
// chosen (the lowest i among equals), found by subgroupMax / subgroupMin and the subgroups'
// results combined in workgroup memory (a slot per subgroup taken atomically: nothing assumed
// about how subgroups lie over the invocations; three sets of slots in turn, so that a column
// needs ONE barrier: an invocation reads its own row's element for the next pivot, and the
// pivot row, which others read, is complete before that barrier). perm[j] is the row chosen
// at step j. One launch (phase 4), one workgroup per matrix.
#include "linalg/common.wgsl"
#include "linalg/lu_params.wgsl"

// the rows of a (ld = n rounded up to odd apart), then those of X (n · k)
var<workgroup> sm: array<${T}, ${CAP}>;
var<workgroup> perm: array<u32, ${NMAX}>;
var<workgroup> slot_v: array<f32, ${3 * WG}>;
var<workgroup> slot_i: array<u32, ${3 * WG}>;
var<workgroup> slots: array<atomic<u32>, 3>;

// The row of the pivot of column j (every invocation calls it, in uniform control flow):
// v is this invocation's candidate (|a[t][j]|; -1 for nan, -2 for a row already chosen).
fn pivot_row(t: u32, sid: u32, j: u32, v: f32) -> u32 {
    let group = j % 3u;
    let best = subgroupMax(v);
    let who = subgroupMin(select(0xffffffffu, t, v == best));
    if (sid == 0u) {
        let s = atomicAdd(&slots[group], 1u);
        slot_v[group * ${WG}u + s] = best;
        slot_i[group * ${WG}u + s] = who;
    }
    workgroupBarrier();
    let count = atomicLoad(&slots[group]);
    var bv = slot_v[group * ${WG}u];
    var bi = slot_i[group * ${WG}u];
    for (var s = 1u; s < count; s = s + 1u) {
        let sv = slot_v[group * ${WG}u + s];
        let si = slot_i[group * ${WG}u + s];
        if (sv > bv || (sv == bv && si < bi)) {
            bv = sv;
            bi = si;
        }
    }
    if (t == 0u) {
        // the group the step before this one used: every invocation read it before the barrier
        atomicStore(&slots[(j + 2u) % 3u], 0u);
        perm[j] = bi;
    }
    return bi;
}

// The sign of the permutation perm (its parity from its cycles; n ≤ 64).
fn order_sign(n: u32) -> ${R} {
    var seen = vec2<u32>(0u, 0u);
    var cycles = 0u;
    for (var i = 0u; i < n; i = i + 1u) {
        if ((seen[i / 32u] & (1u << (i % 32u))) != 0u) {
            continue;
        }
        cycles = cycles + 1u;
        var c = i;
        while ((seen[c / 32u] & (1u << (c % 32u))) == 0u) {
            seen[c / 32u] = seen[c / 32u] | (1u << (c % 32u));
            c = perm[c];
        }
    }
    return select(${R}(1), ${R}(-1), (n - cycles) % 2u == 1u);
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32,
        @builtin(subgroup_invocation_id) sid: u32) {
#include "linalg/lu_load.wgsl"
    if (t < 3u) {
        atomicStore(&slots[t], 0u);
    }
    workgroupBarrier();
    var chosen = t >= n;  // rows past n are never candidates
    var step = 0u;  // the step at which this row was chosen
    var singular = false;
    for (var j = 0u; j < n; j = j + 1u) {
        var v = -2.0;
        if (!chosen) {
            let mg = f32(mag(sm[t * ld + j]));
            v = select(mg, -1.0, is_nan(mg));
        }
        let pr = pivot_row(t, sid, j, v);
        if (t == pr) {
            chosen = true;
            step = j;
        }
        let d = sm[pr * ld + j];
        if (is_zero(d)) {
            singular = true;  // the column's other candidates are zero too
        } else if (!chosen) {
            let l = mul(sm[t * ld + j], div(from_real(${R}(1)), d));
            for (var c = j + 1u; c < n; c = c + 1u) {
                sm[t * ld + c] = sm[t * ld + c] - mul(l, sm[pr * ld + c]);
            }
            for (var c = 0u; c < k; c = c + 1u) {
                sm[xo + t * k + c] = sm[xo + t * k + c] - mul(l, sm[xo + pr * k + c]);
            }
        }
    }
    workgroupBarrier();
#include "linalg/lu_store.wgsl"
}
