// layer_norm_rows: layer_norm.wgsl's plain layer (and RMS) normalization of rows of n
// elements, n a multiple of 4 (groups 1, one scale and bias per element of a row):
//   out[r, i] = (x[r, i] - mean_r) / sqrt(var_r + eps) * scale[i] (+ bias[i])
// TPR invocations share a row and ROWS = WG / TPR rows share a workgroup; each invocation
// holds its V vec4 of the row (vec4 t + TPR·j) in registers, so the row is read from memory
// once, a vec4 at a time; the sums of a row's invocations meet in workgroup memory (a tree of
// log2(TPR) steps that every row of the workgroup takes together). The mean and variance are
// two passes over the registers, as layer_norm.wgsl's over memory.
// Filled in by wgcompute/kernels/nn/layer_norm.py.
// Bindings: 0 x, 1 scale (n), 2 bias (n; scale again without BIAS), 3 out, 4 params (as
//   layer_norm.wgsl's: rows, n, eps, groups, cpg, spatial; only rows, n and eps are read).
// Templates: T (f32 or f16), F16, BIAS, CENTER, WG, TPR, ROWS, V, HALVES (TPR / 2, ..., 1).
#include "nn/layer_norm_params.wgsl"

@group(0) @binding(0) var<storage, read> x: array<vec4<${T}>>;
@group(0) @binding(1) var<storage, read> scale: array<vec4<${T}>>;
@group(0) @binding(2) var<storage, read> bias: array<vec4<${T}>>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<${T}>>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> red: array<f32, ${WG}>;

// the sum of v over the TPR invocations of this invocation's row (every invocation calls it)
fn row_total(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
#for h in HALVES
    if (lid % ${TPR}u < ${h}u) {
        red[lid] = red[lid] + red[lid + ${h}u];
    }
    workgroupBarrier();
#endfor
    let t = red[lid - lid % ${TPR}u];
    workgroupBarrier();
    return t;
}

fn hsum(v: vec4<f32>) -> f32 {
    return (v.x + v.y) + (v.z + v.w);
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    // no early return: a row past the end still takes its part in the barriers
    let row = (wid.y * nwg.x + wid.x) * ${ROWS}u + lid / ${TPR}u;
    let t = lid % ${TPR}u;
    let n4 = p.n / 4u;
    let base = row * n4;
    let live = row < p.rows;
#for j in range(V)
    let in${j} = live && t + ${j * TPR}u < n4;
    var x${j} = vec4<f32>(0.0);
    if (in${j}) {
        x${j} = vec4<f32>(x[base + t + ${j * TPR}u]);
    }
#endfor
#if CENTER
    var s = vec4<f32>(0.0);
    #for j in range(V)
    s = s + x${j};
    #endfor
    let mean = row_total(lid, hsum(s)) / f32(p.n);
#else
    let mean = 0.0;  // RMS normalization: the mean square, not the variance
#endif
    var q = vec4<f32>(0.0);
#for j in range(V)
    if (in${j}) {
        let d${j} = x${j} - vec4<f32>(mean);
        q = q + d${j} * d${j};
    }
#endfor
    let inv = 1.0 / sqrt(row_total(lid, hsum(q)) / f32(p.n) + p.eps);
#for j in range(V)
    if (in${j}) {
        let c = t + ${j * TPR}u;
    #if BIAS
        let b = vec4<f32>(bias[c]);
    #else
        let b = vec4<f32>(0.0);
    #endif
        out[base + c] = vec4<${T}>((x${j} - vec4<f32>(mean)) * inv * vec4<f32>(scale[c]) + b);
    }
#endfor
}
