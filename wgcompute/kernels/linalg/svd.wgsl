// linalg_svd: the singular value decomposition a = U·diag(S)·Vh of each m × n matrix a (f32,
// f64 or complex64; S real, kept as (s, 0)) with m ≥ n (the caller transposes a wider one), by one-sided Jacobi (Hestenes): pairs of columns
// of a copy of a rotated until every pair is orthogonal to TOL (a bounded number of sweeps), the
// rotations gathered in V. S descending; U has UC columns (n, or m with full matrices): those
// of a zero singular value and those past n are completed to an orthonormal basis (e_i minus
// its projection, twice). One workgroup per matrix, in the workspace `ws`, launched several
// times in one compute pass, by `phase`: 0 copies a, 1 runs rounds g0 .. g1 of the sweeps, 2
// writes S, U and Vh, 3 completes U's columns g0 .. g1 (the caller sizes the slices so that
// no dispatch runs long).
// ws: U (batch · m · UC) | S (batch · n) | Vh (batch · n · n) | Uw (batch · m · n) |
// Vw (batch · n · n) | cs (batch · (3 · np / 2 + 2): the rotations (c, s, phase), 1 once
// converged, whether the current sweep has rotated).
#include "linalg/common.wgsl"
#include "linalg/jacobi.wgsl"

struct Params {
#include "linalg/svd_fields.wgsl"
    g0: u32,
    g1: u32,
}

@group(0) @binding(0) var<storage, read> a: array<${T}>;
@group(0) @binding(1) var<storage, read_write> ws: array<${T}>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> rotated: atomic<u32>;
var<workgroup> pv: array<${R}, ${WG}>;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
    let mat = wid.y * nwg.x + wid.x;
    if (mat >= p.batch) {
        return;
    }
    let m = p.m;
    let n = p.n;
    let uc = p.uc;
    let np = p.np;
    let bt = p.batch;
    let uo = mat * m * uc;
    let so = bt * m * uc + mat * n;
    let ho = bt * (m * uc + n) + mat * n * n;
    let wo = bt * (m * uc + n + n * n) + mat * m * n;
    let vo = bt * (m * uc + n + n * n + m * n) + mat * n * n;
    let cw = 3u * (np / 2u) + 2u;  // the rotations' elements per matrix, and two flags
    let co = bt * (m * uc + n + 2u * n * n + m * n) + mat * cw;
    if (p.phase == 0u) {
        for (var e = t; e < m * n; e = e + ${WG}u) {
            ws[wo + e] = a[mat * m * n + e];
        }
        for (var e = t; e < n * n; e = e + ${WG}u) {
            ws[vo + e] = from_real(select(${R}(0), ${R}(1), e / n == e % n));
        }
        if (t == 0u) {
            ws[co + cw - 2u] = ${T}(0);
            ws[co + cw - 1u] = ${T}(0);
        }
        return;
    }
    let half = np / 2u;
    let rows = max(m, n);
    // phase 1: rounds g0 .. g1 of the sweeps, counted across sweeps. A sweep starts by
    // looking back: no rotation in the last one means converged, and the rest are skipped.
    let done = co + cw - 2u;
    let turned = co + cw - 1u;  // whether the current sweep rotated (in earlier launches)
    for (var g = p.g0; g < p.g1 && p.phase == 1u; g = g + 1u) {
        let r = g % (np - 1u);
        if (r == 0u) {
            workgroupBarrier();
            if (t == 0u) {
                let any = atomicLoad(&rotated) != 0u || real_of(ws[turned]) != ${R}(0);
                if (g > 0u && !any) {
                    ws[done] = from_real(${R}(1));
                }
                ws[turned] = ${T}(0);
                atomicStore(&rotated, 0u);
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
                    var al = ${R}(0);
                    var be = ${R}(0);
                    var ga = ${T}(0);
                    for (var i = 0u; i < m; i = i + 1u) {
                        let x = ws[wo + i * n + pq.x];
                        let y = ws[wo + i * n + pq.y];
#include "linalg/gram.wgsl"
                    }
                    // the columns' Gram matrix [[al, ga], [conj(ga), be]] made diagonal
                    if (mag(ga) > ${R}(${TOL}) * sqrt(al) * sqrt(be)) {
                        store_rotation(co + 3u * kp, al, be, ga);
                        atomicStore(&rotated, 1u);
                    } else {
                        store_rotation(co + 3u * kp, al, be, ${T}(0));
                    }
                }
            }
            storageBarrier();
            for (var e = t; e < half * rows; e = e + ${WG}u) {
                let kp = e / rows;
                let row = e % rows;
                let pq = pair_of(r, kp, np);
                if (pq.x < n && pq.y < n) {
                    if (row < m) {
                        let xy = rotate_columns(co + 3u * kp, ws[wo + row * n + pq.x],
                                                ws[wo + row * n + pq.y]);
                        ws[wo + row * n + pq.x] = xy[0];
                        ws[wo + row * n + pq.y] = xy[1];
                    }
                    if (row < n) {
                        let xy = rotate_columns(co + 3u * kp, ws[vo + row * n + pq.x],
                                                ws[vo + row * n + pq.y]);
                        ws[vo + row * n + pq.x] = xy[0];
                        ws[vo + row * n + pq.y] = xy[1];
                    }
                }
            }
            storageBarrier();
        }
    }
    if (p.phase == 1u) {
        workgroupBarrier();
        if (t == 0u && atomicLoad(&rotated) != 0u) {
            ws[turned] = from_real(${R}(1));
        }
        return;
    }
    // the column norms are the singular values: sorted descending, ties by index
    for (var j = t; j < n && p.phase == 2u; j = j + ${WG}u) {
        var s2 = ${R}(0);
        for (var i = 0u; i < m; i = i + 1u) {
            let x = mag(ws[wo + i * n + j]);
            s2 = s2 + x * x;
        }
        ws[co + j] = from_real(sqrt(s2));
    }
    storageBarrier();
    for (var j = t; j < n && p.phase == 2u; j = j + ${WG}u) {
        let sj = real_of(ws[co + j]);
        var rank = 0u;
        for (var i = 0u; i < n; i = i + 1u) {
            let si = real_of(ws[co + i]);
            rank = rank + select(0u, 1u, si > sj || (si == sj && i < j));
        }
        ws[so + rank] = from_real(sj);
        let inv = select(${R}(0), ${R}(1) / sj, sj > ${R}(0));
        for (var i = 0u; i < m; i = i + 1u) {
            ws[uo + i * uc + rank] = ws[wo + i * n + j] * inv;
        }
        for (var i = 0u; i < n; i = i + 1u) {
            ws[ho + rank * n + i] = conjugate(ws[vo + i * n + j]);
        }
    }
    if (p.phase == 2u) {
        return;
    }
    // completion: column c of U (a zero singular value, or c ≥ n) becomes e_i minus its
    // projection on columns 0..c-1, e_i the row of U least covered by them
    for (var c = p.g0; c < p.g1; c = c + 1u) {
        workgroupBarrier();  // every invocation has read the last column's flag
        if (t == 0u) {
            flag = select(0u, 1u, c >= n || !(real_of(ws[so + min(c, n - 1u)]) > ${R}(0)));
        }
        if (workgroupUniformLoad(&flag) == 0u) {
            continue;
        }
        var best = ${R}(3);
        var bi = 0u;
        for (var i = t; i < m; i = i + ${WG}u) {
            var cover = ${R}(0);
            for (var q = 0u; q < c; q = q + 1u) {
                let u = mag(ws[uo + i * uc + q]);
                cover = cover + u * u;
            }
            if (cover < best) {
                best = cover;
                bi = i;
            }
        }
        pv[t] = best;
        redi[t] = bi;
        workgroupBarrier();
#for i in range(LOG2WG)
        if (t < ${WG >> (i + 1)}u) {
            let o = t + ${WG >> (i + 1)}u;
            if (pv[o] < pv[t] || (pv[o] == pv[t] && redi[o] < redi[t])) {
                pv[t] = pv[o];
                redi[t] = redi[o];
            }
        }
        workgroupBarrier();
#endfor
        let pick = redi[0];
        workgroupBarrier();
        for (var i = t; i < m; i = i + ${WG}u) {
            var v = from_real(select(${R}(0), ${R}(1), i == pick));
            for (var q = 0u; q < c; q = q + 1u) {
                v = v - mul(conjugate(ws[uo + pick * uc + q]), ws[uo + i * uc + q]);
            }
            ws[uo + i * uc + c] = v;
        }
        storageBarrier();
        // once more against rounding: d_q = u_qᴴ·v into Uw's first c places, v -= Σ d_q u_q
        for (var q = t; q < c; q = q + ${WG}u) {
            var d = ${T}(0);
            for (var i = 0u; i < m; i = i + 1u) {
                d = d + mul(conjugate(ws[uo + i * uc + q]), ws[uo + i * uc + c]);
            }
            ws[wo + q] = d;
        }
        storageBarrier();
        var part = ${R}(0);
        for (var i = t; i < m; i = i + ${WG}u) {
            var v = ws[uo + i * uc + c];
            for (var q = 0u; q < c; q = q + 1u) {
                v = v - mul(ws[wo + q], ws[uo + i * uc + q]);
            }
            ws[uo + i * uc + c] = v;
            let vm = mag(v);
            part = part + vm * vm;
        }
        let norm = sqrt(real_of(wg_sum(t, from_real(part))));
        for (var i = t; i < m; i = i + ${WG}u) {
            ws[uo + i * uc + c] = ws[uo + i * uc + c] / norm;
        }
        storageBarrier();
    }
}
