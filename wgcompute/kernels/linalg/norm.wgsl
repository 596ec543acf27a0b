// linalg_norm: out[r] = the ORD norm of row r of x (rows × len, contiguous), one workgroup
// per row: "2" √Σx², "1" Σ|x|, "inf" max|x|, "-inf" min|x|, "0" the count of nonzeros, "p"
// (Σ|x|^p)^(1/p) (f32: WGSL's pow), "sum" Σx (any numeric T). A nan reaches max and min.
#include "linalg/common.wgsl"

struct Params {
    rows: u32,
    len: u32,
    pw: f32,
}

@group(0) @binding(0) var<storage, read> x: array<${T}>;
@group(0) @binding(1) var<storage, read_write> out: array<${T}>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
    let row = wid.y * nwg.x + wid.x;
    if (row >= p.rows) {
        return;
    }
    let o = row * p.len;
#if ORD == "inf" or ORD == "-inf"
    var acc = abs(x[o]);
    var nan = false;
    for (var i = t; i < p.len; i = i + ${WG}u) {
        let v = abs(x[o + i]);
        nan = nan || is_nan(v);
    #if ORD == "inf"
        acc = max(acc, v);
    #else
        acc = min(acc, v);
    #endif
    }
    red[t] = select(acc, ${T}(p.pw), nan);  // pw carries a nan here
    workgroupBarrier();
    #for i in range(LOG2WG)
    if (t < ${WG >> (i + 1)}u) {
        let u = red[t + ${WG >> (i + 1)}u];
        let v = red[t];
        #if ORD == "inf"
        red[t] = select(max(u, v), ${T}(p.pw), is_nan(u) || is_nan(v));
        #else
        red[t] = select(min(u, v), ${T}(p.pw), is_nan(u) || is_nan(v));
        #endif
    }
    workgroupBarrier();
    #endfor
    let total = red[0];
#else
    var acc = ${T}(0);
    for (var i = t; i < p.len; i = i + ${WG}u) {
        let v = x[o + i];
    #if ORD == "2"
        acc = acc + v * v;
    #elif ORD == "1"
        acc = acc + abs(v);
    #elif ORD == "0"
        acc = acc + select(${T}(0), ${T}(1), v != ${T}(0));
    #elif ORD == "p"
        // pow is undefined at 0: |0|^p is 0 for p > 0 and inf for p < 0
        let a = abs(v);
        acc = acc + select(select(bitcast<f32>(0x7f800000u), 0.0, p.pw > 0.0), pow(a, p.pw),
                           a > 0.0);
    #else
        acc = acc + v;
    #endif
    }
    var total = wg_sum(t, acc);
    #if ORD == "2"
    total = sqrt(total);
    #elif ORD == "p"
    let root = select(pow(total, 1.0 / p.pw), 0.0, total == 0.0 ||
                      (p.pw < 0.0 && total > 3.4028234663852886e38));
    total = select(root, total, p.pw > 0.0 && total > 3.4028234663852886e38);
    #endif
#endif
    if (t == 0u) {
        out[row] = total;
    }
}
