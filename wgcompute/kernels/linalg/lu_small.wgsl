// linalg_lu for small matrices (n ≤ NMAX): the results of lu.wgsl, in the same places of the
// workspace (X, det, sign, log|det|; no LU region is used), with the matrix and X in
// workgroup memory (CAP elements) and the row exchanges kept as a permutation that every
// invocation computes alike: each one scans the pivot column itself, so a column costs one
// barrier instead of a reduction's eight, and each invocation updates whole rows. One launch
// (phase 4), one workgroup per matrix.
#include "linalg/common.wgsl"
#include "linalg/lu_params.wgsl"

// the rows of a (n of them, ld = n rounded up to odd apart: a row per invocation then reads
// distinct banks), then those of X (n · k)
var<workgroup> sm: array<${T}, ${CAP}>;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
#include "linalg/lu_load.wgsl"
    workgroupBarrier();
    // perm[j]: the row of sm that is row j of the factorisation
    var perm: array<u32, ${NMAX}>;
    for (var i = 0u; i < n; i = i + 1u) {
        perm[i] = i;
    }
    var sign = ${R}(1);
    var singular = false;
    for (var j = 0u; j < n; j = j + 1u) {
        var best = ${R}(-1);
        var bi = j;
        for (var i = j; i < n; i = i + 1u) {
            let v = mag(sm[perm[i] * ld + j]);
            if (v > best) {
                best = v;
                bi = i;
            }
        }
        if (bi != j) {
            let r = perm[j];
            perm[j] = perm[bi];
            perm[bi] = r;
            sign = -sign;
        }
        let pr = perm[j];
        let d = sm[pr * ld + j];
        if (is_zero(d)) {
            singular = true;  // the column below is zero too: nothing to eliminate
        } else {
            let inv_d = div(from_real(${R}(1)), d);
            // a row per invocation: its multiplier once, then the row and its X
            for (var i = j + 1u + t; i < n; i = i + ${WG}u) {
                let r = perm[i];
                let l = mul(sm[r * ld + j], inv_d);
                for (var c = j + 1u; c < n; c = c + 1u) {
                    sm[r * ld + c] = sm[r * ld + c] - mul(l, sm[pr * ld + c]);
                }
                for (var c = 0u; c < k; c = c + 1u) {
                    sm[xo + r * k + c] = sm[xo + r * k + c] - mul(l, sm[xo + pr * k + c]);
                }
            }
        }
        workgroupBarrier();
    }
#include "linalg/lu_store.wgsl"
}
