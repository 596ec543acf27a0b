// linalg_svd_parallel: one-sided Jacobi (Hestenes) SVD of each m × n matrix a (m ≥ n; f32,
// f64 or complex64) spread over the whole GPU: each round of a sweep rotates its np / 2
// disjoint column pairs (jacobi.wgsl's round-robin order) at once, ONE WORKGROUP PER PAIR,
// a round a dispatch (the dispatches of a compute pass run in order: no grid-wide barrier is
// needed). The working columns are kept as rows (Wt = aᵀ, n × m; Vt = Vᵀ, n × n) so that a
// pair's workgroup reads and writes contiguous memory. The results go where linalg_svd puts
// them (U, S, Vh of its workspace), so that its completion of U (phase 3) runs after this.
// By `phase`: 0 loads Wt and Vt = I, 1 clears the sweep's flag, 2 runs round `round` (or, for
// 0xffffffff there, the count of workgroups past the pairs; a pair whose columns are not
// orthogonal to tol · ‖x‖ · ‖y‖ is rotated, and sets the flag), 3 writes the column norms, 4
// sorts them descending into S and (`vectors`) writes U and Vh (all nan after a nan).
// ws (as linalg_svd's): U (batch · m · UC) | S (batch · n) | Vh (batch · n · n) |
// Wt (batch · n · m) | Vt (batch · n · n) | per matrix 3 · np / 2 + 2 elements: the flag
// (matrix 0's first element) and the column norms.
#include "linalg/common.wgsl"
#include "linalg/jacobi.wgsl"

struct Params {
#include "linalg/svd_fields.wgsl"
    round: u32,
    vectors: u32,
    tol: f32,
    nanv: f32,
}

@group(0) @binding(0) var<storage, read> a: array<${T}>;
@group(0) @binding(1) var<storage, read_write> ws: array<${T}>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> ra: array<${R}, ${WG}>;
var<workgroup> rb: array<${R}, ${WG}>;
var<workgroup> nans: atomic<u32>;

struct Places {
    u: u32,  // U
    s: u32,  // S
    h: u32,  // Vh
    w: u32,  // Wt
    v: u32,  // Vt
    c: u32,  // the flag, then the norms
}

fn places(mat: u32) -> Places {
    let m = p.m;
    let n = p.n;
    let bt = p.batch;
    let mu = m * p.uc;
    let cw = 3u * (p.np / 2u) + 2u;
    return Places(mat * mu, bt * mu + mat * n, bt * (mu + n) + mat * n * n,
                  bt * (mu + n + n * n) + mat * m * n, bt * (mu + n + n * n + m * n) + mat * n * n,
                  bt * (mu + n + 2u * n * n + m * n) + mat * cw);
}

// phase 0: one invocation per element of Wt (a transposed), then of Vt (the identity)
fn load(e: u32) {
    let m = p.m;
    let n = p.n;
    let mn = m * n;
    if (e < p.batch * mn) {
        let mat = e / mn;
        let r = e % mn;
        ws[places(mat).w + r] = a[mat * mn + (r % m) * n + r / m];
        return;
    }
    let f = e - p.batch * mn;
    if (f < p.batch * n * n) {
        let mat = f / (n * n);
        let r = f % (n * n);
        ws[places(mat).v + r] = from_real(select(${R}(0), ${R}(1), r / n == r % n));
    }
}

// The sums of every invocation's x and y, and of their z (red), for all of them.
fn sum3(t: u32, x: ${R}, y: ${R}, z: ${T}) -> array<${T}, 3> {
    ra[t] = x;
    rb[t] = y;
    red[t] = z;
    workgroupBarrier();
#for i in range(LOG2WG)
    if (t < ${WG >> (i + 1)}u) {
        ra[t] = ra[t] + ra[t + ${WG >> (i + 1)}u];
        rb[t] = rb[t] + rb[t + ${WG >> (i + 1)}u];
        red[t] = red[t] + red[t + ${WG >> (i + 1)}u];
    }
    workgroupBarrier();
#endfor
    return array<${T}, 3>(from_real(ra[0]), from_real(rb[0]), red[0]);
}

// phase 2: the workgroup of pair kp of matrix mat in this round
fn rotate_pair(mat: u32, kp: u32, r: u32, t: u32) {
    let pq = pair_of(r, kp, p.np);
    if (pq.x >= p.n || pq.y >= p.n) {
        return;  // the padding column: the same for the whole workgroup
    }
    let m = p.m;
    let n = p.n;
    let at = places(mat);
    let xo = at.w + pq.x * m;
    let yo = at.w + pq.y * m;
    var al = ${R}(0);
    var be = ${R}(0);
    var ga = ${T}(0);
#if HELD
    // the invocation's rows of both columns stay in registers between the dot products and
    // the rotation: the columns are read once instead of twice
    var xs: array<${T}, ${HELD}>;
    var ys: array<${T}, ${HELD}>;
#for h in range(HELD)
    if (t + ${h * WG}u < m) {
        xs[${h}] = ws[xo + t + ${h * WG}u];
        ys[${h}] = ws[yo + t + ${h * WG}u];
    } else {
        xs[${h}] = ${T}(0);
        ys[${h}] = ${T}(0);
    }
#endfor
#for h in range(HELD)
    al = al + mag(xs[${h}]) * mag(xs[${h}]);
    be = be + mag(ys[${h}]) * mag(ys[${h}]);
    ga = ga + mul(conjugate(xs[${h}]), ys[${h}]);
#endfor
#else
    for (var i = t; i < m; i = i + ${WG}u) {
        let x = ws[xo + i];
        let y = ws[yo + i];
#include "linalg/gram.wgsl"
    }
#endif
    let s = sum3(t, al, be, ga);
    al = real_of(s[0]);
    be = real_of(s[1]);
    ga = s[2];
    // the Gram matrix [[al, ga], [conj(ga), be]] made diagonal (nan compares false: kept)
    if (!(mag(ga) > ${R}(p.tol) * sqrt(al) * sqrt(be))) {
        return;
    }
    let cs = rotation(al, be, mag(ga));
    let c = cs.x;
    let sn = cs.y;
    let ph = conjugate(unit(ga));
#if HELD
#for h in range(HELD)
    if (t + ${h * WG}u < m) {
        let py = mul(ph, ys[${h}]);
        ws[xo + t + ${h * WG}u] = c * xs[${h}] - sn * py;
        ws[yo + t + ${h * WG}u] = sn * xs[${h}] + c * py;
    }
#endfor
#else
    for (var i = t; i < m; i = i + ${WG}u) {
        let x = ws[xo + i];
        let py = mul(ph, ws[yo + i]);
        ws[xo + i] = c * x - sn * py;
        ws[yo + i] = sn * x + c * py;
    }
#endif
    let vx = at.v + pq.x * n;
    let vy = at.v + pq.y * n;
    for (var i = t; i < n; i = i + ${WG}u) {
        let x = ws[vx + i];
        let py = mul(ph, ws[vy + i]);
        ws[vx + i] = c * x - sn * py;
        ws[vy + i] = sn * x + c * py;
    }
    if (t == 0u) {
        ws[places(0u).c] = from_real(${R}(1));
    }
}

// phase 3: the norm of column j (row j of Wt)
fn norm_of(mat: u32, j: u32, t: u32) {
    let at = places(mat);
    var part = ${R}(0);
    for (var i = t; i < p.m; i = i + ${WG}u) {
        let x = mag(ws[at.w + j * p.m + i]);
        part = part + x * x;
    }
    let s = sum3(t, part, ${R}(0), ${T}(0));
    if (t == 0u) {
        ws[at.c + 1u + j] = from_real(sqrt(real_of(s[0])));
    }
}

// whether norm si (column i) goes before sj (column j): descending, nan first, ties by index
fn before(si: ${R}, i: u32, sj: ${R}, j: u32) -> bool {
    let ni = is_nan(si);
    let nj = is_nan(sj);
    return (ni && !nj) || si > sj || ((si == sj || (ni && nj)) && i < j);
}

// phase 4: column j's place in S, then its column of U (scaled) and row of Vh; a nan in the
// matrix (a nan norm: its rotations were skipped) makes all of them nan
fn place_column(mat: u32, j: u32, t: u32) {
    let at = places(mat);
    let n = p.n;
    let m = p.m;
    let sj = real_of(ws[at.c + 1u + j]);
    var count = 0u;
    if (t == 0u) {
        atomicStore(&nans, 0u);
    }
    workgroupBarrier();
    for (var i = t; i < n; i = i + ${WG}u) {
        let si = real_of(ws[at.c + 1u + i]);
        count = count + select(0u, 1u, before(si, i, sj, j));
        if (is_nan(si)) {
            atomicStore(&nans, 1u);
        }
    }
    redi[t] = count;
    workgroupBarrier();
#for i in range(LOG2WG)
    if (t < ${WG >> (i + 1)}u) {
        redi[t] = redi[t] + redi[t + ${WG >> (i + 1)}u];
    }
    workgroupBarrier();
#endfor
    let rank = redi[0];
    let poisoned = atomicLoad(&nans) != 0u;
    if (t == 0u) {
        ws[at.s + rank] = from_real(select(sj, ${R}(p.nanv), poisoned));
    }
    if (p.vectors == 0u) {
        return;
    }
    let inv = select(select(${R}(0), ${R}(1) / sj, sj > ${R}(0)), ${R}(p.nanv), poisoned);
    for (var i = t; i < m; i = i + ${WG}u) {
        ws[at.u + i * p.uc + rank] = ws[at.w + j * m + i] * inv;
    }
    for (var i = t; i < n; i = i + ${WG}u) {
        ws[at.h + rank * n + i] = conjugate(ws[at.v + j * n + i]) * select(${R}(1), inv, poisoned);
    }
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
    let w = wid.y * nwg.x + wid.x;
    if (p.phase == 0u) {
        load(w * ${WG}u + t);
        return;
    }
    if (p.phase == 1u) {
        if (w == 0u && t == 0u) {
            ws[places(0u).c] = ${T}(0);
        }
        return;
    }
    let half = p.np / 2u;
    if (p.phase == 2u) {
        // the round: in the uniform, or (0xffffffff there) the workgroups past the pairs
        // (then every round's launch is alike: one bind group for all)
        let r = select(p.round, nwg.x - p.batch * half, p.round == 0xffffffffu);
        if (w < p.batch * half) {
            rotate_pair(w / half, w % half, r, t);
        }
        return;
    }
    if (w >= p.batch * p.n) {
        return;
    }
    if (p.phase == 3u) {
        norm_of(w / p.n, w % p.n, t);
    } else {
        place_column(w / p.n, w % p.n, t);
    }
}
