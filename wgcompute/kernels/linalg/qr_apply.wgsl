// linalg_qr_apply: U = Q·diag(U_R, I) of a tall matrix a = Q·R whose R = U_R·S·Vh was
// decomposed on its own: wq holds linalg_qr_r's reflectors (Q = H₀·H₁·…·H_{n-1}), wr
// linalg_svd's workspace of the R's (U_R, S, Vh: n × n each). ws gets linalg_svd's layout
// for a: U (m × UC) | S | Vh. By `phase`: 0 writes diag(U_R, I) into U; 1 applies reflectors
// n - 1 - j0 down to n - j1 to it (a workgroup per 32 columns of U, which are independent of
// the others: 8 rows of 32 invocations, each row of 32 reading and writing 32 neighbouring
// elements of a row of U); 2 copies S and Vh.
#include "linalg/common.wgsl"

struct Params {
    m: u32,
    n: u32,
    uc: u32,
    batch: u32,
    phase: u32,
    j0: u32,
    j1: u32,
}

@group(0) @binding(0) var<storage, read> wq: array<${T}>;
@group(0) @binding(1) var<storage, read> wr: array<${T}>;
@group(0) @binding(2) var<storage, read_write> ws: array<${T}>;
@group(0) @binding(3) var<uniform> p: Params;

// phase 1: rows j.. of 32 columns of U times H_j = I - tau·v·vᴴ (v = 1, At[j][j+1..])
fn reflect(mat: u32, block: u32, j: u32, t: u32) {
    let m = p.m;
    let uc = p.uc;
    let cx = t % 32u;
    let ry = t / 32u;
    let c = block * 32u + cx;
    let live = c < uc;
    let u = mat * m * uc + c;
    let v = mat * p.n * m + j * m;
    var part = ${T}(0);
    if (live) {
        if (ry == 0u) {
            part = ws[u + j * uc];
        }
        for (var i = j + 1u + ry; i < m; i = i + ${WG // 32}u) {
            part = part + mul(conjugate(wq[v + i]), ws[u + i * uc]);
        }
    }
    red[t] = part;
    workgroupBarrier();
#for h in range(LOG2WG - 5)
    if (ry < ${(WG // 32) >> (h + 1)}u) {
        red[t] = red[t] + red[t + ${((WG // 32) >> (h + 1)) * 32}u];
    }
    workgroupBarrier();
#endfor
    let d = mul(wq[p.batch * (p.n * m + p.n * p.n) + mat * p.n + j], red[cx]);
    if (!live) {
        return;
    }
    if (ry == 0u) {
        ws[u + j * uc] = ws[u + j * uc] - d;
    }
    for (var i = j + 1u + ry; i < m; i = i + ${WG // 32}u) {
        ws[u + i * uc] = ws[u + i * uc] - mul(d, wq[v + i]);
    }
}

#include "linalg/grid_main.wgsl"
    let uc = p.uc;
    let bt = p.batch;
    if (p.phase == 1u) {
        let blocks = (uc + 31u) / 32u;
        if (w < bt * blocks) {
            for (var jj = p.j0; jj < p.j1; jj = jj + 1u) {
                reflect(w / blocks, w % blocks, n - 1u - jj, t);
                storageBarrier();  // the next reflector's rows go to other invocations
            }
        }
        return;
    }
    let e = w * ${WG}u + t;
    if (p.phase == 0u) {
        if (e < bt * m * uc) {
            let mat = e / (m * uc);
            let i = e % (m * uc) / uc;
            let c = e % uc;
            var x = from_real(select(${R}(0), ${R}(1), i == c));
            if (i < n && c < n) {
                x = wr[mat * n * n + i * n + c];
            } else if (i < n || c < n) {
                x = ${T}(0);
            }
            ws[e] = x;
        }
        return;
    }
    // phase 2: S (bt · n) then Vh (bt · n · n), which follow U in both workspaces
    if (e < bt * (n + n * n)) {
        ws[bt * m * uc + e] = wr[bt * n * n + e];
    }
}
