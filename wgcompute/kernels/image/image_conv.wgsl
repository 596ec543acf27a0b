// 2-D neighbourhood filters: convolve2d (a user's odd-sized f32 kernel) and sobel.
// Bindings: src (read), [weights (read, f32 KH×KW) for convolve2d], out (read_write).
// Params: KH, KW (convolve2d kernel size). Templates: BODY (the filter over one element).
// convolve2d is a true convolution (the kernel flipped), as scipy.ndimage.convolve;
// sobel is hypot of scipy.ndimage.sobel along y and x. RGBA keeps alpha.

@compute @workgroup_size(${WGX}, ${WGY})
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x >= p.W * C || g.y >= p.rows) {
        return;
    }
    let y = p.y0 + g.y;
    let x = g.x / C;
    let c = g.x % C;
    let i = (y * p.W + x) * C + c;
    ${BODY}
}
