// linalg_qr: the Householder QR of each m × n matrix a, f32, f64 or complex64 (LAPACK's
// geqrf + orgqr conventions: R's diagonal is real, -sign(re x₀)·‖x‖), one workgroup per matrix, in the workspace `ws`
// (storage: any size). k = min(m, n); Q is m × QC and R is RR × n (QC = RR = k "reduced",
// m "complete"). Launched several times in one compute pass, by `phase`: 0 copies a, 1 makes
// the reflectors of columns j0 .. j1, 2 writes R and starts Q, 3 applies reflectors
// k - 1 - j0 down to k - j1 to Q (the caller sizes j0 .. j1 so that no dispatch runs long).
// ws: Q of every matrix (batch · m · QC) | R (batch · RR · n) | work (batch · m · n) | tau (batch · k).
#include "linalg/common.wgsl"

struct Params {
    m: u32,
    n: u32,
    qc: u32,
    rr: u32,
    batch: u32,
    phase: u32,
    j0: u32,
    j1: u32,
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
    let m = p.m;
    let n = p.n;
    let k = min(m, n);
    let qo = mat * m * p.qc;
    let ro = p.batch * m * p.qc + mat * p.rr * n;
    let wo = p.batch * (m * p.qc + p.rr * n) + mat * m * n;
    let to = p.batch * (m * p.qc + p.rr * n + m * n) + mat * k;
    if (p.phase == 0u) {
        for (var e = t; e < m * n; e = e + ${WG}u) {
            ws[wo + e] = a[mat * m * n + e];
        }
        return;
    }
    for (var j = p.j0; j < p.j1 && p.phase == 1u; j = j + 1u) {
        // the reflector that zeroes work[j+1.., j] (LAPACK's larfg: beta real, H = I - tau·v·vᴴ)
        var part = ${R}(0);
        for (var i = j + 1u + t; i < m; i = i + ${WG}u) {
            let v = mag(ws[wo + i * n + j]);
            part = part + v * v;
        }
        let sigma = real_of(wg_sum(t, from_real(part)));
        let alpha = ws[wo + j * n + j];
        let ar = real_of(alpha);
        let reflect = sigma != ${R}(0) || imag_of(alpha) != ${R}(0);
        var tau = ${T}(0);
        var beta = alpha;
        var scale = ${T}(0);
        if (reflect) {
            let am = mag(alpha);
            let b = -select(${R}(1), ${R}(-1), ar < ${R}(0)) * sqrt(am * am + sigma);
            tau = (from_real(b) - alpha) / b;
            scale = div(from_real(${R}(1)), alpha - from_real(b));
            beta = from_real(b);
        }
        storageBarrier();
        for (var i = j + 1u + t; i < m; i = i + ${WG}u) {
            ws[wo + i * n + j] = mul(ws[wo + i * n + j], scale);
        }
        if (t == 0u) {
            ws[to + j] = tau;
        }
        storageBarrier();
        // Hᴴ = I - conj(tau)·v·vᴴ (v = 1, work[j+1.., j]) applied to the columns right of j
        for (var c = j + 1u + t; c < n; c = c + ${WG}u) {
            var dot = ws[wo + j * n + c];
            for (var i = j + 1u; i < m; i = i + 1u) {
                dot = dot + mul(conjugate(ws[wo + i * n + j]), ws[wo + i * n + c]);
            }
            dot = mul(conjugate(tau), dot);
            ws[wo + j * n + c] = ws[wo + j * n + c] - dot;
            for (var i = j + 1u; i < m; i = i + 1u) {
                ws[wo + i * n + c] = ws[wo + i * n + c] - mul(dot, ws[wo + i * n + j]);
            }
        }
        if (t == 0u) {
            ws[wo + j * n + j] = beta;
        }
        storageBarrier();
    }
    if (p.phase == 1u) {
        return;
    }
    // R: the upper triangle of work's first RR rows
    for (var e = t; e < p.rr * n && p.phase == 2u; e = e + ${WG}u) {
        let i = e / n;
        let c = e % n;
        ws[ro + e] = select(${T}(0), ws[wo + i * n + c], c >= i && i < m);
    }
    // Q = H₀·H₁·…·H_{k-1} applied to the first QC columns of the identity, last reflector first
    for (var e = t; e < m * p.qc && p.phase == 2u; e = e + ${WG}u) {
        ws[qo + e] = from_real(select(${R}(0), ${R}(1), e / p.qc == e % p.qc));
    }
    for (var jj = p.j0; jj < p.j1 && p.phase == 3u; jj = jj + 1u) {
        let j = k - 1u - jj;
        let tau = ws[to + j];
        for (var c = t; c < p.qc; c = c + ${WG}u) {
            var dot = ws[qo + j * p.qc + c];
            for (var i = j + 1u; i < m; i = i + 1u) {
                dot = dot + mul(conjugate(ws[wo + i * n + j]), ws[qo + i * p.qc + c]);
            }
            dot = mul(tau, dot);
            ws[qo + j * p.qc + c] = ws[qo + j * p.qc + c] - dot;
            for (var i = j + 1u; i < m; i = i + 1u) {
                ws[qo + i * p.qc + c] = ws[qo + i * p.qc + c] - mul(dot, ws[wo + i * n + j]);
            }
        }
        storageBarrier();
    }
}
