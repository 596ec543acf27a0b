// linalg_lu: LU factorisation with partial pivoting of each n × n matrix a, one workgroup per
// matrix (f32, f64 or complex64). MODE "solve" carries the n × k right-hand sides b through the elimination and
// back-substitutes (X = a⁻¹ b), "inv" does so for the identity, "det" keeps det, its sign and
// log|det|. The matrix and X live in the workspace `ws` (any n; small matrices take
// lu_small.wgsl, in workgroup memory), and the program is launched several times in one
// compute pass, by `phase`: 0 copies a (and b), 1 eliminates columns j0 .. j1, 2
// back-substitutes rows n - 1 - j0 down to n - j1, 3 writes det or the nan of a singular
// matrix (the caller sizes j0 .. j1 so that no dispatch runs long).
// ws: X of every matrix (batch · n · k) | det (batch; whether a zero pivot was met, until the
// last phase) | sign (batch) | log|det| (batch) | LU (batch · n · n).
// A zero pivot (a singular matrix) makes that matrix's X nan; det is then 0, sign 0 and
// log|det| -inf, as LAPACK's getrf goes on past a zero pivot.
#include "linalg/common.wgsl"
#include "linalg/lu_params.wgsl"

// where this matrix's LU and X start in ws
var<private> lo: u32;
var<private> xo: u32;

fn lu_at(i: u32) -> ${T} { return ws[lo + i]; }
fn lu_set(i: u32, v: ${T}) { ws[lo + i] = v; }
fn x_at(i: u32) -> ${T} { return ws[xo + i]; }
fn x_set(i: u32, v: ${T}) { ws[xo + i] = v; }
fn sync() { storageBarrier(); }

var<workgroup> pv: array<${R}, ${WG}>;

// the row of the largest |LU[i, j]| for i ≥ j (the first of equals), in every invocation
fn pivot_row(t: u32, n: u32, j: u32) -> u32 {
    var bv = ${R}(-1);
    var bi = j;
    for (var i = j + t; i < n; i = i + ${WG}u) {
        let v = mag(lu_at(i * n + j));
        if (v > bv) {
            bv = v;
            bi = i;
        }
    }
    pv[t] = bv;
    redi[t] = bi;
    workgroupBarrier();
#for i in range(LOG2WG)
    if (t < ${WG >> (i + 1)}u) {
        let o = t + ${WG >> (i + 1)}u;
        if (pv[o] > pv[t] || (pv[o] == pv[t] && redi[o] < redi[t])) {
            pv[t] = pv[o];
            redi[t] = redi[o];
        }
    }
    workgroupBarrier();
#endfor
    let row = redi[0];
    workgroupBarrier();
    return row;
}

fn load(t: u32, mat: u32, n: u32, k: u32) {
    for (var e = t; e < n * n; e = e + ${WG}u) {
        lu_set(e, a[mat * n * n + e]);
    }
#if MODE == "solve"
    for (var e = t; e < n * k; e = e + ${WG}u) {
        x_set(e, b[mat * n * k + e]);
    }
#elif MODE == "inv"
    for (var e = t; e < n * n; e = e + ${WG}u) {
        x_set(e, from_real(select(${R}(0), ${R}(1), e / n == e % n)));
    }
#endif
}

// columns j0 .. j1: pivot, swap, scale, update the trailing matrix and X; (sign, singular)
// carried in and out
fn eliminate(t: u32, n: u32, k: u32, j0: u32, j1: u32, carried: vec2<${R}>) -> vec2<${R}> {
    var sign = carried.x;
    var singular = carried.y != ${R}(0);
    for (var j = j0; j < j1; j = j + 1u) {
        let piv = pivot_row(t, n, j);
        if (piv != j) {
            for (var c = t; c < n; c = c + ${WG}u) {
                let x = lu_at(j * n + c);
                lu_set(j * n + c, lu_at(piv * n + c));
                lu_set(piv * n + c, x);
            }
            for (var c = t; c < k; c = c + ${WG}u) {
                let x = x_at(j * k + c);
                x_set(j * k + c, x_at(piv * k + c));
                x_set(piv * k + c, x);
            }
            sign = -sign;
        }
        sync();
        let d = lu_at(j * n + j);
        if (is_zero(d)) {
            singular = true;  // the column below is zero too: nothing to eliminate
        } else {
            for (var i = j + 1u + t; i < n; i = i + ${WG}u) {
                lu_set(i * n + j, div(lu_at(i * n + j), d));
            }
        }
        sync();
        let rest = n - j - 1u;
        let w = rest + k;
        for (var e = t; e < rest * w; e = e + ${WG}u) {
            let i = j + 1u + e / w;
            let c = e % w;
            let l = lu_at(i * n + j);
            if (c < rest) {
                let at = i * n + j + 1u + c;
                lu_set(at, lu_at(at) - mul(l, lu_at(j * n + j + 1u + c)));
            } else {
                let at = i * k + c - rest;
                x_set(at, x_at(at) - mul(l, x_at(j * k + c - rest)));
            }
        }
        sync();
    }
    return vec2<${R}>(sign, select(${R}(0), ${R}(1), singular));
}

// rows n - 1 - j0 down to n - j1 of the back-substitution U·X = X
fn substitute(t: u32, n: u32, k: u32, j0: u32, j1: u32) {
    for (var jj = j0; jj < j1; jj = jj + 1u) {
        let j = n - 1u - jj;
        let d = lu_at(j * n + j);
        for (var c = t; c < k; c = c + ${WG}u) {
            x_set(j * k + c, div(x_at(j * k + c), d));
        }
        sync();
        for (var e = t; e < j * k; e = e + ${WG}u) {
            let i = e / k;
            let c = e % k;
            x_set(i * k + c, x_at(i * k + c) - mul(lu_at(i * n + j), x_at(j * k + c)));
        }
        sync();
    }
}

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
    let wx = mat * n * k;  // this matrix's X in ws
    lo = p.batch * (n * k + 3u) + mat * n * n;
    xo = wx;
    let zo = p.batch * n * k + mat;  // det, or whether a zero pivot was met
    let so = zo + p.batch;  // the sign of the row permutation
    if (p.phase == 0u) {
        load(t, mat, n, k);
        if (t == 0u) {
            ws[so] = from_real(${R}(1));
            ws[zo] = from_real(${R}(0));
        }
        return;
    }
    // (sign, singular) carried between the launches in ws
    var carried = vec2<${R}>(real_of(ws[so]), real_of(ws[zo]));
    if (p.phase == 1u) {
        storageBarrier();  // read by all before invocation 0 writes them back
        carried = eliminate(t, n, k, p.j0, p.j1, carried);
        if (t == 0u) {
            ws[so] = from_real(carried.x);
            ws[zo] = from_real(carried.y);
        }
        return;
    }
#if MODE == "det"
    if (t == 0u) {
        let sign = carried.x;
        let singular = carried.y != ${R}(0);
#include "linalg/lu_det.wgsl"
    }
#else
    if (p.phase == 2u) {
        substitute(t, n, k, p.j0, p.j1);
        return;
    }
    if (carried.y != ${R}(0)) {
        for (var e = t; e < n * k; e = e + ${WG}u) {
            ws[wx + e] = ${T}(${R}(p.nanv));
        }
    }
#endif
}
