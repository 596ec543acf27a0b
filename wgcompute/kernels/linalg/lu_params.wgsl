// What the LU programs (lu.wgsl, lu_small.wgsl, lu_rows.wgsl) bind: the matrices a, the
// right-hand sides b, the workspace ws (its layout in lu.wgsl) and the uniform p.
struct Params {
    n: u32,
    k: u32,
    batch: u32,
    nanv: f32,
    ninf: f32,
    phase: u32,
    j0: u32,
    j1: u32,
}

@group(0) @binding(0) var<storage, read> a: array<${T}>;
@group(0) @binding(1) var<storage, read> b: array<${T}>;
@group(0) @binding(2) var<storage, read_write> ws: array<${T}>;
@group(0) @binding(3) var<uniform> p: Params;
