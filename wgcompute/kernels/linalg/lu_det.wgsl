// The det of lu.wgsl and lu_small.wgsl (lu_rows.wgsl writes its own), written by invocation 0
// once the factors are final: det = sign · Π d over the diagonal d of U, its sign (the phase, complex)
// = sign · Π d / |d|, and log|det|, at zo, so and so + batch of ws; a zero pivot (singular)
// makes the sign 0 and log|det| -inf, as LAPACK's getrf goes on past it. Given: sign (the
// permutation's, real), singular, n, and the factors (SHARED: rows perm[j] of sm, ld apart;
// else lu_at, n × n).
        var det = from_real(sign);
        var sgn = from_real(sign);
        var logabs = ${R}(0);
        for (var j = 0u; j < n; j = j + 1u) {
#if SHARED
            let d = sm[perm[j] * ld + j];
#else
            let d = lu_at(j * n + j);
#endif
            det = mul(det, d);
            let m = mag(d);
            sgn = mul(sgn, d / m);
            logabs = logabs + ln(m);
        }
#include "linalg/lu_det_store.wgsl"
