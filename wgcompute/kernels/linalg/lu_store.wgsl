// The end of lu_small.wgsl's main, once the elimination has run: det, its sign and log|det|
// (MODE "det"), or the back-substitution and X, into ws as lu.wgsl lays it out. perm[j] is
// the row of sm that is row j of the factorisation; `singular` whether a zero pivot was met;
// `sign` the permutation's.
    let zo = p.batch * n * k + mat;
    let so = zo + p.batch;
#if MODE == "det"
    if (t == 0u) {
#include "linalg/lu_det.wgsl"
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
        ws[wx + e] = select(x, ${T}(${R}(p.nanv)), singular);
    }
#endif
