// linalg_lu for small matrices (n ≤ NMAX ≤ 64, k ≤ KMAX ≤ 64; f32 and complex64): lu.wgsl's
// results (X, or det, sign and log|det|, where it lays them out) with each row of the matrix
// and of X in an invocation's registers. NMAX invocations per matrix (n rounded up to a power
// of two, at least PER), WG / NMAX matrices per workgroup; rows never move. Gauss-Jordan:
// step j eliminates column j from every row but the pivot's (the rows chosen before too), so
// X is the pivot rows' X over their pivots at the end, with no back-substitution; the pivots
// are LU's (the rows not yet chosen see the same operations). A row's registers shift by one
// column a step: r[0] is always column j, so registers are indexed by constants only. A
// column costs two barriers: the candidates |r[0]| in workgroup memory (every invocation
// scans its matrix's: the largest magnitude, the lowest row among equals, nan below every
// number), then the pivot row there.
#include "linalg/common.wgsl"
#include "linalg/lu_params.wgsl"

// each row's candidate for the pivot of the column: -1 for nan, -2 for a row already chosen
// (and for rows past n), four to a vector (each invocation writes its own component, a memory
// location of its own): a matrix's are read NMAX / 4 vectors at a time
var<workgroup> cand: array<vec4<${R}>, ${WG // 4}>;

#if NMAX >= 4
// The pivot's row: the lowest row holding the largest candidate of the matrix whose
// candidates start at cand[q] (all NMAX of them: the rows past n hold -2).
fn pivot_row(q: u32) -> u32 {
    var best = cand[q];
#for i in range(1, NMAX // 4)
    best = max(best, cand[q + ${i}u]);
#endfor
    let top = vec4<${R}>(max(max(best.x, best.y), max(best.z, best.w)));
    var row = vec4<u32>(${NMAX}u);
#for i in range(NMAX // 4)
    row = min(row, select(vec4<u32>(${NMAX}u), vec4<u32>(${4 * i}u, ${4 * i + 1}u, ${4 * i + 2}u,
                          ${4 * i + 3}u), cand[q + ${i}u] == top));
#endfor
    return min(min(row.x, row.y), min(row.z, row.w));
}
#else
// The pivot's row (NMAX < 4: the matrix's candidates are components cb % 4 .. of cand[cb / 4]).
fn pivot_row(cb: u32) -> u32 {
    let c = cand[cb / 4u];
    var bv = c[cb % 4u];
    var bi = 0u;
#for i in range(1, NMAX)
    if (c[cb % 4u + ${i}u] > bv) {
        bv = c[cb % 4u + ${i}u];
        bi = ${i}u;
    }
#endfor
    return bi;
}
#endif
// each matrix's pivot row: its NMAX columns from j on, then its KMAX elements of X, PER
// elements (4 real, 2 complex) to a vector: read and written a vector at a time
var<workgroup> prow: array<vec4<${R}>, ${WG // NMAX * (NMAX + KMAX) // PER}>;
#if MODE == "det"
// the row chosen at each step, by matrix
var<workgroup> order: array<u32, ${WG}>;

// The sign of the permutation step -> row held at order[o ..] (its parity from its cycles;
// n ≤ 64).
fn order_sign(o: u32, n: u32) -> ${R} {
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
            c = order[o + c];
        }
    }
    return select(${R}(1), ${R}(-1), (n - cycles) % 2u == 1u);
}
#endif

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let n = p.n;
    let k = p.k;
    let t = lid % ${NMAX}u;  // this invocation's row
    let cb = lid - t;  // its matrix's candidates
    let pb = lid / ${NMAX}u * ${(NMAX + KMAX) // PER}u;  // its matrix's pivot row
    let mat = (wid.y * nwg.x + wid.x) * ${WG // NMAX}u + lid / ${NMAX}u;
    // invocations past the batch or past n hold zeros and are never candidates, but they
    // reach every barrier
    let live = mat < p.batch && t < n;
    var r: array<${T}, ${NMAX}>;  // zeros past n
#if KMAX
    var y: array<${T}, ${KMAX}>;
#endif
    if (live) {
        let ao = (mat * n + t) * n;
#for c in range(NMAX)
        if (${c}u < n) {
            r[${c}] = a[ao + ${c}u];
        }
#endfor
#if MODE == "solve"
        let bo = (mat * n + t) * k;
#for c in range(KMAX)
        if (${c}u < k) {
            y[${c}] = b[bo + ${c}u];
        }
#endfor
#elif MODE == "inv"
#for c in range(KMAX)
        y[${c}] = from_real(select(${R}(0), ${R}(1), t == ${c}u));
#endfor
#endif
    }
    var chosen = !live;
    var step = 0u;  // the step at which this row was chosen
    var own = from_real(${R}(1));  // its pivot
    var singular = false;
#if MODE == "det"
    var det = from_real(${R}(1));
    var sgn = from_real(${R}(1));
    var logabs = ${R}(0);
#endif
    for (var j = 0u; j < n; j = j + 1u) {
        var v = ${R}(-2);
        if (!chosen) {
            let mg = mag(r[0]);
            v = select(mg, ${R}(-1), is_nan(mg));
        }
        cand[lid / 4u][lid % 4u] = v;
        workgroupBarrier();
#if NMAX >= 4
        let bi = pivot_row(cb / 4u);
#else
        let bi = pivot_row(cb);
#endif
        let mine = t == bi;
        if (mine) {
            chosen = true;
            step = j;
            own = r[0];
#for i in range((NMAX + KMAX) // PER)
            prow[pb + ${i}u] = vec4<${R}>(
#for e in range(i * PER, i * PER + PER)
                ${("r[%d]" % e) if e < NMAX else ("y[%d]" % (e - NMAX))},
#endfor
            );
#endfor
        }
        workgroupBarrier();
        let d = prow[pb]${".x" if PER == 4 else ".xy"};
        let zero = is_zero(d);
        singular = singular || zero;  // the column's other candidates are zero too
#if MODE == "det"
        det = mul(det, d);
        let m = mag(d);
        sgn = mul(sgn, d / m);
        logabs = logabs + ln(m);
#endif
        // the pivot row (and, a zero pivot, every row) only shifts
        let l = select(mul(r[0], div(from_real(${R}(1)), d)), ${T}(${R}(0)), mine || zero);
        let rest = n - j;  // columns j .. n - 1 are r[0 .. rest - 1]
        // a vector of the pivot row at a time, those holding live columns
#for i in range(NMAX // PER)
        if (${i * PER}u < rest) {
            let q = prow[pb + ${i}u];
#for e in range(max(i * PER, 1), i * PER + PER)
            r[${e - 1}] = r[${e}] - mul(l, q.${"xyzw"[e * 4 // PER % 4:][:4 // PER]});
#endfor
        }
#endfor
#for i in range(NMAX // PER, (NMAX + KMAX) // PER)
        if (${i * PER - NMAX}u < k) {
            let q = prow[pb + ${i}u];
#for e in range(i * PER, i * PER + PER)
            y[${e - NMAX}] = y[${e - NMAX}] - mul(l, q.${"xyzw"[e * 4 // PER % 4:][:4 // PER]});
#endfor
        }
#endfor
    }
#if MODE == "det"
    if (live) {
        order[cb + step] = t;
    }
    workgroupBarrier();
    if (mat < p.batch && t == 0u) {  // n = 0 too: det 1
        let zo = mat;
        let so = zo + p.batch;
        let sign = order_sign(cb, n);
        det = mul(det, from_real(sign));
        sgn = mul(sgn, from_real(sign));
#include "linalg/lu_det_store.wgsl"
    }
#else
    if (live) {
        // this row's X is row `step` of the solution
        let inv_d = div(from_real(${R}(1)), own);
        let xo = (mat * n + step) * k;
#for c in range(KMAX)
        if (${c}u < k) {
            ws[xo + ${c}u] = select(mul(y[${c}], inv_d), ${T}(${R}(p.nanv)), singular);
        }
#endfor
    }
#endif
}
