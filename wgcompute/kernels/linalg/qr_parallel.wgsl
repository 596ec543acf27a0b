// linalg_qr_r: R of the Householder QR of each m × n matrix a (f32, f64 or complex64; m ≥ n)
// over the whole GPU, for the SVD of a tall matrix (R, n × n, has its singular values: the
// Jacobi sweeps then work on columns of n instead of m; qr_apply.wgsl makes U = Q·U_R). The columns are kept as rows (At =
// aᵀ, n × m: contiguous for the workgroup that owns one). By `phase`: 0 loads At; 1 makes the
// reflector of column 0 (LAPACK's larfg, as qr.wgsl: a workgroup per matrix); 2 applies that
// of column j to the columns right of j (a workgroup per column), the workgroup of column
// j + 1 then making its reflector; 3 writes R (n × n, row-major) from At's upper part. A
// dispatch a column.
// wq: At (batch · n · m) | R (batch · n · n) | tau (batch · n).
#include "linalg/common.wgsl"

struct Params {
    m: u32,
    n: u32,
    batch: u32,
    phase: u32,
    j: u32,
}

@group(0) @binding(0) var<storage, read> a: array<${T}>;
@group(0) @binding(1) var<storage, read_write> wq: array<${T}>;
@group(0) @binding(2) var<uniform> p: Params;

fn at_of(mat: u32) -> u32 {
    return mat * p.n * p.m;
}

fn r_of(mat: u32) -> u32 {
    return p.batch * p.n * p.m + mat * p.n * p.n;
}

fn tau_of(mat: u32, j: u32) -> u32 {
    return p.batch * (p.n * p.m + p.n * p.n) + mat * p.n + j;
}

// phase 1: the reflector H = I - tau·v·vᴴ (v = 1, then At[j][j+1..] once scaled) that makes
// column j (β, 0, ..., 0), β real
fn reflector(mat: u32, j: u32, t: u32) {
    let m = p.m;
    let col = at_of(mat) + j * m;
    let alpha = wq[col + j];  // read before wg_sum's barriers: invocation 0 writes it last
    var part = ${R}(0);
    for (var i = j + 1u + t; i < m; i = i + ${WG}u) {
        let v = mag(wq[col + i]);
        part = part + v * v;
    }
    let sigma = real_of(wg_sum(t, from_real(part)));
    let ar = real_of(alpha);
    var tau = ${T}(0);
    var beta = alpha;
    var scale = ${T}(0);
    if (sigma != ${R}(0) || imag_of(alpha) != ${R}(0)) {
        let am = mag(alpha);
        let b = -select(${R}(1), ${R}(-1), ar < ${R}(0)) * sqrt(am * am + sigma);
        tau = (from_real(b) - alpha) / b;
        scale = div(from_real(${R}(1)), alpha - from_real(b));
        beta = from_real(b);
    }
    for (var i = j + 1u + t; i < m; i = i + ${WG}u) {
        wq[col + i] = mul(wq[col + i], scale);
    }
    if (t == 0u) {
        wq[col + j] = beta;
        wq[tau_of(mat, j)] = tau;
    }
}

// phase 2: Hᴴ applied to column c (> j): c -= conj(tau)·(vᴴ·c)·v
fn apply(mat: u32, j: u32, c: u32, t: u32) {
    let m = p.m;
    let v = at_of(mat) + j * m;
    let col = at_of(mat) + c * m;
    let top = wq[col + j];  // read before wg_sum's barriers: invocation 0 writes it last
    var part = ${T}(0);
    for (var i = j + 1u + t; i < m; i = i + ${WG}u) {
        part = part + mul(conjugate(wq[v + i]), wq[col + i]);
    }
    let tau = wq[tau_of(mat, j)];
    let d = mul(conjugate(tau), wg_sum(t, part) + top);
    for (var i = j + 1u + t; i < m; i = i + ${WG}u) {
        wq[col + i] = wq[col + i] - mul(d, wq[v + i]);
    }
    if (t == 0u) {
        wq[col + j] = wq[col + j] - d;
    }
}

#include "linalg/grid_main.wgsl"
    if (p.phase == 0u) {
        let e = w * ${WG}u + t;
        if (e < p.batch * m * n) {
            let mat = e / (m * n);
            let r = e % (m * n);
            wq[at_of(mat) + r] = a[mat * m * n + (r % m) * n + r / m];
        }
        return;
    }
    if (p.phase == 1u) {
        if (w < p.batch) {
            reflector(w, p.j, t);
        }
        return;
    }
    if (p.phase == 2u) {
        // j: in the uniform, or (0xffffffff there) from the count of workgroups, batch ·
        // (n - 1 - j): every column's launch is then alike, one bind group for all
        let j = select(p.j, n - 1u - nwg.x / p.batch, p.j == 0xffffffffu);
        let cols = n - 1u - j;
        if (w < p.batch * cols) {
            let c = j + 1u + w % cols;
            apply(w / cols, j, c, t);
            if (c == j + 1u) {
                // column j + 1 is final: its workgroup makes its reflector at once
                storageBarrier();
                reflector(w / cols, c, t);
            }
        }
        return;
    }
    let e = w * ${WG}u + t;  // phase 3: R[i][c] = At[c][i] (i ≤ c)
    if (e < p.batch * n * n) {
        let mat = e / (n * n);
        let i = e % (n * n) / n;
        let c = e % n;
        wq[r_of(mat) + i * n + c] = select(${T}(0), wq[at_of(mat) + c * m + i], i <= c);
    }
}
