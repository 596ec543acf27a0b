// linalg_lu for small matrices (n ≤ NMAX): the results of lu.wgsl, in the same places of the
// workspace (X, det, sign, log|det|; no LU region is used), with the matrix and X in
// workgroup memory (CAP elements) and the row exchanges kept as a permutation that every
// invocation computes alike: each one scans the pivot column itself, so a column costs one
// barrier instead of a reduction's eight, and each invocation updates whole rows. One launch
// (phase 4), one workgroup per matrix.
#include "linalg/common.wgsl"

struct Params {
    n: u32,
    k: u32,
    batch: u32,
    nanv: f32,
    ninf: f32,
    phase: u32,
    j0: u32,
    j1: u32,
}

@group(0) @binding(0) var<storage, read> a: array<${T}>;
@group(0) @binding(1) var<storage, read> b: array<${T}>;
@group(0) @binding(2) var<storage, read_write> ws: array<${T}>;
@group(0) @binding(3) var<uniform> p: Params;

// the rows of a (n of them, ld = n rounded up to odd apart: a row per invocation then reads
// distinct banks), then those of X (n · k)
var<workgroup> sm: array<${T}, ${CAP}>;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
    let mat = wid.y * nwg.x + wid.x;
    if (mat >= p.batch) {
        return;
    }
    let n = p.n;
    let k = p.k;
    let ld = n | 1u;
    let xo = n * ld;
    for (var e = t; e < n * n; e = e + ${WG}u) {
        sm[e / n * ld + e % n] = a[mat * n * n + e];
    }
#if MODE == "solve"
    for (var e = t; e < n * k; e = e + ${WG}u) {
        sm[xo + e] = b[mat * n * k + e];
    }
#elif MODE == "inv"
    for (var e = t; e < n * n; e = e + ${WG}u) {
        sm[xo + e] = from_real(select(${R}(0), ${R}(1), e / n == e % n));
    }
#endif
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
    let zo = p.batch * n * k + mat;
    let so = zo + p.batch;
#if MODE == "det"
    if (t == 0u) {
        var det = from_real(sign);
        var sgn = from_real(sign);
        var logabs = ${R}(0);
        for (var j = 0u; j < n; j = j + 1u) {
            let d = sm[perm[j] * ld + j];
            det = mul(det, d);
            let m = mag(d);
            sgn = mul(sgn, d / m);
            logabs = logabs + ln(m);
        }
        if (singular) {
            sgn = from_real(${R}(0));
            logabs = ${R}(p.ninf);
        }
        ws[zo] = det;
        ws[so] = sgn;
        ws[so + p.batch] = from_real(logabs);
    }
#else
    // back-substitution, the last row first: row j's X is final once the rows above have
    // taken it out
    for (var jj = 0u; jj < n; jj = jj + 1u) {
        let j = n - 1u - jj;
        let pr = perm[j];
        let inv_d = div(from_real(${R}(1)), sm[pr * ld + j]);
        for (var i = t; i < j; i = i + ${WG}u) {
            let r = perm[i];
            let l = mul(sm[r * ld + j], inv_d);
            for (var c = 0u; c < k; c = c + 1u) {
                sm[xo + r * k + c] = sm[xo + r * k + c] - mul(l, sm[xo + pr * k + c]);
            }
        }
        workgroupBarrier();
    }
    let wx = mat * n * k;
    for (var e = t; e < n * k; e = e + ${WG}u) {
        let pr = perm[e / k];
        let x = mul(sm[xo + pr * k + e % k], div(from_real(${R}(1)), sm[pr * ld + e / k]));
        ws[wx + e] = select(x, ${T}(p.nanv), singular);
    }
#endif
}
