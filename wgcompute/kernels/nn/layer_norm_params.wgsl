// The head of layer_norm.wgsl and layer_norm_rows.wgsl: f16's enable (F16) and the params
// (rows, n, eps, groups, cpg, spatial) that kernels/nn/layer_norm.py fills in for both.
#if F16
enable f16;
#endif

struct Params {
    rows: u32,
    n: u32,
    eps: f32,
    groups: u32,
    cpg: u32,
    spatial: u32,
}
