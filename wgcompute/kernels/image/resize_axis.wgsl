// resize_axis: one axis of a separable resize (ONNX's Resize, linear and cubic). x viewed as
// (outer, n, inner), out as (outer, m, inner):
//   out[o, j, i] = sum over t < TAPS of w[j, t] · x[o, idx[j, t], i], or `value` where
//   w[j, TAPS] is 1 (an extrapolated position: tf_crop_and_resize).
// The taps' indices (in range) and weights are computed on the host per output position.
// Filled in by wgcompute/kernels/image/resize_axis.py.
// Bindings: 0 x, 1 idx (i32, m·TAPS), 2 w (W, m·(TAPS + 1)), 3 out, 4 params.
// Templates: T (x's and out's type), W (the work type: f32, or f64 for f64), TAPS, F16, WG.
#if F16
enable f16;
#endif

struct Params {
    total: u32,
    n: u32,
    m: u32,
    inner: u32,
    value: f32,
}

@group(0) @binding(0) var<storage, read> x: array<${T}>;
@group(0) @binding(1) var<storage, read> idx: array<i32>;
@group(0) @binding(2) var<storage, read> w: array<${W}>;
@group(0) @binding(3) var<storage, read_write> out: array<${T}>;
@group(0) @binding(4) var<uniform> p: Params;

#include "elementwise/element_main.wgsl"
    let i = e % p.inner;
    let q = e / p.inner;
    let j = q % p.m;
    let o = q / p.m;
    let row = j * ${TAPS + 1}u;
    if (w[row + ${TAPS}u] != ${W}(0)) {
        out[e] = ${T}(p.value);
        return;
    }
    let base = o * p.n * p.inner + i;
    var acc = ${W}(0);
#for t in range(TAPS)
    acc = acc + w[row + ${t}u] * ${W}(x[base + u32(idx[j * ${TAPS}u + ${t}u]) * p.inner]);
#endfor
    out[e] = ${T}(acc);
}
