// linalg_cholesky: the lower Cholesky factor L (a = L·Lᴴ) of each n × n matrix a (f32, f64
// or complex64), one workgroup per matrix, computed in place in `out` (storage: any n); UPPER
// writes U = Lᴴ instead. Only a's lower triangle is read. A matrix that is not positive definite (a pivot
// ≤ 0, or nan) gives nan in every element of its factor. Launched several times in one
// compute pass, by `phase`: 0 copies a's lower triangle, 1 factors columns j0 .. j1 (sized by
// the caller so that no dispatch runs long), 2 checks the pivots and writes the result.
#include "linalg/common.wgsl"

struct Params {
    n: u32,
    batch: u32,
    nanv: f32,
    phase: u32,
    j0: u32,
    j1: u32,
}

@group(0) @binding(0) var<storage, read> a: array<${T}>;
@group(0) @binding(1) var<storage, read_write> out: array<${T}>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
    let mat = wid.y * nwg.x + wid.x;
    if (mat >= p.batch) {
        return;
    }
    let n = p.n;
    let o = mat * n * n;
    if (p.phase == 0u) {
        for (var e = t; e < n * n; e = e + ${WG}u) {
            out[o + e] = select(${T}(0), a[o + e], e % n <= e / n);
        }
        return;
    }
    if (p.phase == 1u) {
        for (var j = p.j0; j < p.j1; j = j + 1u) {
            // a pivot ≤ 0 or nan makes s nan or 0: phase 2 finds it on the diagonal
            let s = sqrt(real_of(out[o + j * n + j]));
            for (var i = j + 1u + t; i < n; i = i + ${WG}u) {
                out[o + i * n + j] = out[o + i * n + j] / s;
            }
            storageBarrier();
            if (t == 0u) {
                out[o + j * n + j] = from_real(s);
            }
            // the trailing lower triangle: rows i > j, columns j < c ≤ i
            let rest = n - j - 1u;
            for (var e = t; e < rest * rest; e = e + ${WG}u) {
                let i = j + 1u + e / rest;
                let c = j + 1u + e % rest;
                if (c <= i) {
                    out[o + i * n + c] = out[o + i * n + c] -
                                         mul(out[o + i * n + j], conjugate(out[o + c * n + j]));
                }
            }
            storageBarrier();
        }
        return;
    }
    var bad = false;
    for (var j = 0u; j < n; j = j + 1u) {
        bad = bad || !(real_of(out[o + j * n + j]) > ${R}(0));
    }
    if (bad) {
        for (var e = t; e < n * n; e = e + ${WG}u) {
            out[o + e] = ${T}(${R}(p.nanv));
        }
    }
#if UPPER
    else {
        for (var e = t; e < n * n; e = e + ${WG}u) {
            let i = e / n;
            let c = e % n;
            if (c < i) {
                out[o + c * n + i] = conjugate(out[o + e]);
                out[o + e] = ${T}(0);
            }
        }
    }
#endif
}
