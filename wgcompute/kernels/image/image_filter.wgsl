// Separable filter passes (gaussian_blur, blur, sharpen): one 1-D pass along x or y.
// Bindings: src (read) along x, or tmp (read) [and src (read) for the unsharp pass] along y;
// wts (read: the 2r+1 normalized weights, computed once on the CPU), out (read_write).
// Params: radius (taps each side), amount (unsharp mask: o + amount (o - blur)).
// Templates: POS, LEN (coordinate along the axis and the axis length), STEP (elements
// between neighbours along it), LD (the input's accessor), STORE (plain or unsharp).
// Pixels whose whole window is inside take a loop without border handling.

@compute @workgroup_size(${WGX}, ${WGY})
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x >= p.W * C || g.y >= p.rows) {
        return;
    }
    let y = p.y0 + g.y;
    let x = g.x / C;
    let c = g.x % C;
    let i = (y * p.W + x) * C + c;
    let r = i32(p.radius);
    let pos = i32(${POS});
    let n = i32(${LEN});
    let step = ${STEP};
    var acc = V(0.0);
    if (pos >= r && pos + r < n) {
        var j = i - u32(r) * step;
        for (var k = 0u; k <= 2u * p.radius; k = k + 1u) {
            acc = acc + wts_ld(k) * ${LD}(j);
            j = j + step;
        }
    } else {
        for (var k = -r; k <= r; k = k + 1) {
            let q = border(pos + k, n);
            if (q >= 0) {
                // u32 arithmetic wraps, so a negative offset works as a subtraction
                acc = acc + wts_ld(u32(k + r)) * ${LD}(i + u32(q - pos) * step);
            }
        }
    }
    ${STORE}
}
