// layer_norm: each row of n elements of x normalized to zero mean and unit variance (the
// mean and variance computed in the work type, two passes over the row held in one
// workgroup), then scaled and shifted (ONNX's Layer-, Group- and InstanceNormalization):
//   out[r, i] = (x[r, i] - mean_r) / sqrt(var_r + eps) * scale[c] (+ bias[c]),
//   c = (r % groups) * cpg + i / spatial: i itself for a layer norm (groups 1, cpg 0,
//   spatial 1), the channel of element i of row r for group and instance norms (a row is a
//   group of cpg channels of `spatial` elements each). Without CENTER the mean is taken as 0
//   (ONNX's RMSNormalization: x / sqrt(mean(x²) + eps) · scale).
// Filled in by wgcompute/kernels/nn/layer_norm.py.
// Bindings: 0 x, 1 scale (n), 2 bias (n; scale again without BIAS), 3 out, 4 params.
// Params: rows, n, eps, groups, cpg, spatial. Templates: T (the element type), W (work type: f32, or f64 for
//   f64), F16, BIAS, CENTER, WG (a power of two), HALVES (WG / 2, WG / 4, ..., 1).
#include "nn/layer_norm_params.wgsl"

@group(0) @binding(0) var<storage, read> x: array<${T}>;
@group(0) @binding(1) var<storage, read> scale: array<${T}>;
@group(0) @binding(2) var<storage, read> bias: array<${T}>;
@group(0) @binding(3) var<storage, read_write> out: array<${T}>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> red: array<${W}, ${WG}>;

// the sum of every invocation's v (all of the workgroup call it)
fn total(lid: u32, v: ${W}) -> ${W} {
    red[lid] = v;
    workgroupBarrier();
#for h in HALVES
    if (lid < ${h}u) {
        red[lid] = red[lid] + red[lid + ${h}u];
    }
    workgroupBarrier();
#endfor
    let t = red[0];
    workgroupBarrier();
    return t;
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.y * nwg.x + wid.x;
    if (row >= p.rows) {
        return;
    }
    let base = row * p.n;
#if CENTER
    var s = ${W}(0);
    for (var i = lid; i < p.n; i = i + ${WG}u) {
        s = s + ${W}(x[base + i]);
    }
    let mean = total(lid, s) / ${W}(p.n);
#else
    let mean = ${W}(0);  // RMS normalization: the mean square, not the variance
#endif
    var v = ${W}(0);
    for (var i = lid; i < p.n; i = i + ${WG}u) {
        let d = ${W}(x[base + i]) - mean;
        v = v + d * d;
    }
    let inv = ${W}(1) / sqrt(total(lid, v) / ${W}(p.n) + ${W}(p.eps));
    let first = (row % p.groups) * p.cpg;
    for (var i = lid; i < p.n; i = i + ${WG}u) {
        let c = first + i / p.spatial;
#if BIAS
        let b = ${W}(bias[c]);
#else
        let b = ${W}(0);
#endif
        out[base + i] = ${T}((${W}(x[base + i]) - mean) * inv * ${W}(scale[c]) + b);
    }
}
