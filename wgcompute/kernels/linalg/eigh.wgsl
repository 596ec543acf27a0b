// linalg_eigh: eigenvalues (ascending) and eigenvectors of each symmetric (or, complex64,
// Hermitian) n × n matrix a (its lower triangle read), by parallel cyclic Jacobi sweeps until the off-diagonal is below
// TOL² of the whole, one workgroup per matrix, in the workspace `ws`. Launched several times
// in one compute pass, by `phase`: 0 copies a, 1 runs rounds g0 .. g1 of the sweeps (the
// caller sizes them so that no dispatch runs long), 2 sorts and writes the results.
// ws: w (batch · n) | V (batch · n · n, eigenvectors in columns) | A (batch · n · n) |
// Vw (batch · n · n) | cs (batch · (3 · np / 2 + 1): the rotations (c, s, phase), then 1
// once converged). Eigenvalues are real: complex64 keeps them as (w, 0). A nan in a matrix
// makes all its results nan.
#include "linalg/common.wgsl"
#include "linalg/jacobi.wgsl"

struct Params {
    n: u32,
    np: u32,
    batch: u32,
    nanv: f32,
    phase: u32,
    g0: u32,
    g1: u32,
}

@group(0) @binding(0) var<storage, read> a: array<${T}>;
@group(0) @binding(1) var<storage, read_write> ws: array<${T}>;
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
    let np = p.np;
    let nn = n * n;
    let wo = mat * n;
    let vo = p.batch * n + mat * nn;
    let ao = p.batch * (n + nn) + mat * nn;
    let uo = p.batch * (n + 2u * nn) + mat * nn;
    let cw = 3u * (np / 2u) + 1u;  // the rotations' elements per matrix, and the flag
    let co = p.batch * (n + 3u * nn) + mat * cw;
    if (p.phase == 0u) {
        for (var e = t; e < nn; e = e + ${WG}u) {
            let i = e / n;
            let j = e % n;
            // the Hermitian matrix the lower triangle stands for (the diagonal's real part)
            let low = a[mat * nn + max(i, j) * n + min(i, j)];
            ws[ao + e] = select(select(conjugate(low), low, j <= i), from_real(real_of(low)),
                                i == j);
            ws[uo + e] = from_real(select(${R}(0), ${R}(1), i == j));
        }
        if (t == 0u) {
            ws[co + cw - 1u] = ${T}(0);
        }
        return;
    }
    let half = np / 2u;
    // phase 1: rounds g0 .. g1 of the sweeps, counted across sweeps; a sweep starts by
    // measuring the off-diagonal, and once it is small the rest are skipped
    let done = co + cw - 1u;
    for (var g = p.g0; g < p.g1 && p.phase == 1u; g = g + 1u) {
        let r = g % (np - 1u);
        if (r == 0u) {
            var off = ${R}(0);
            var all = ${R}(0);
            for (var e = t; e < nn; e = e + ${WG}u) {
                let v = mag(ws[ao + e]);
                all = all + v * v;
                off = off + select(v * v, ${R}(0), e / n == e % n);
            }
            let offs = real_of(wg_sum(t, from_real(off)));
            let alls = real_of(wg_sum(t, from_real(all)));
            if (t == 0u && !(offs > ${R}(${TOL}) * ${R}(${TOL}) * alls)) {
                ws[done] = from_real(${R}(1));
            }
        }
        if (t == 0u) {
            flag = select(0u, 1u, real_of(ws[done]) != ${R}(0));
        }
        if (workgroupUniformLoad(&flag) == 1u) {
            break;
        }
        {
            for (var kp = t; kp < half; kp = kp + ${WG}u) {
                let pq = pair_of(r, kp, np);
                if (pq.x < n && pq.y < n) {
                    store_rotation(co + 3u * kp, real_of(ws[ao + pq.x * n + pq.x]),
                                   real_of(ws[ao + pq.y * n + pq.y]), ws[ao + pq.x * n + pq.y]);
                }
            }
            storageBarrier();
            // rows p and q of A: Gᴴ·A
            for (var e = t; e < half * n; e = e + ${WG}u) {
                let kp = e / n;
                let col = e % n;
                let pq = pair_of(r, kp, np);
                if (pq.x < n && pq.y < n) {
                    let xy = rotate_rows(co + 3u * kp, ws[ao + pq.x * n + col],
                                         ws[ao + pq.y * n + col]);
                    ws[ao + pq.x * n + col] = xy[0];
                    ws[ao + pq.y * n + col] = xy[1];
                }
            }
            storageBarrier();
            // columns p and q of A and of V: ·G
            for (var e = t; e < half * n; e = e + ${WG}u) {
                let kp = e / n;
                let row = e % n;
                let pq = pair_of(r, kp, np);
                if (pq.x < n && pq.y < n) {
                    let xy = rotate_columns(co + 3u * kp, ws[ao + row * n + pq.x],
                                            ws[ao + row * n + pq.y]);
                    ws[ao + row * n + pq.x] = xy[0];
                    ws[ao + row * n + pq.y] = xy[1];
                    let v = rotate_columns(co + 3u * kp, ws[uo + row * n + pq.x],
                                           ws[uo + row * n + pq.y]);
                    ws[uo + row * n + pq.x] = v[0];
                    ws[uo + row * n + pq.y] = v[1];
                }
            }
            storageBarrier();
        }
    }
    if (p.phase == 1u) {
        return;
    }
    // sorted ascending: eigenvalue i goes to its rank (ties by index)
    if (t == 0u) {
        flag = 0u;
    }
    workgroupBarrier();
    for (var i = t; i < n; i = i + ${WG}u) {
        let wi = real_of(ws[ao + i * n + i]);
        var rank = 0u;
        for (var j = 0u; j < n; j = j + 1u) {
            let wj = real_of(ws[ao + j * n + j]);
            rank = rank + select(0u, 1u, wj < wi || (wj == wi && j < i));
        }
        if (is_nan(wi)) {
            flag = 1u;
        }
        ws[wo + rank] = from_real(wi);
        for (var row = 0u; row < n; row = row + 1u) {
            ws[vo + row * n + rank] = ws[uo + row * n + i];
        }
    }
    workgroupBarrier();
    storageBarrier();
    if (flag == 1u) {
        for (var e = t; e < nn; e = e + ${WG}u) {
            ws[vo + e] = ${T}(${R}(p.nanv));
        }
        for (var e = t; e < n; e = e + ${WG}u) {
            ws[wo + e] = ${T}(${R}(p.nanv));
        }
    }
}
