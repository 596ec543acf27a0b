// Separable filter passes (gaussian_blur, blur, sharpen): one 1-D pass along x or y.
// Bindings: src (read) [or tmp (read), src (read) for the unsharp pass], out (read_write).
// Params: radius (taps each side), inv2s2 (1 / (2 sigma^2); 0 gives a box), inv_sum (1 /
// the sum of the 2r+1 weights: they are normalized), amount (unsharp mask only).
// Templates: TAP (one tap along the axis), STORE (plain, or unsharp: o + amount (o - blur)).
// The weights are computed once per workgroup into workgroup memory.

var<workgroup> wts: array<f32, ${NW}>;

@compute @workgroup_size(${WGX}, ${WGY})
fn main(@builtin(global_invocation_id) g: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let r = i32(p.radius);
    for (var k = li; k <= 2u * p.radius; k = k + ${WGN}u) {
        let d = f32(i32(k) - r);
        wts[k] = exp(-d * d * p.inv2s2) * p.inv_sum;
    }
    workgroupBarrier();
    if (g.x >= p.W * p.C || g.y >= p.rows) {
        return;
    }
    let y = p.y0 + g.y;
    let x = g.x / p.C;
    let c = g.x % p.C;
    let i = (y * p.W + x) * p.C + c;
    var acc = V(0.0);
    for (var k = -r; k <= r; k = k + 1) {
        ${TAP}
    }
    ${STORE}
}
