// The skinny implicit GEMM (wgcompute/kernels/conv.py and conv_configs.SkinnyConfig): for
// convolutions with few output columns (pixels × batch) and a long K, where the tiled kernel
// (conv_gemm.wgsl) leaves most of the GPU idle and walks K one barrier-bound step at a time.
// A workgroup owns RY·TR rows × 4·CX columns; invocation (cx, s, ry) sums its TR rows × 4
// columns over k = s, s + S, s + 2S... reading w and x straight from memory (consecutive
// invocations read consecutive columns of x, or consecutive k of w and x when CX = 1); the
// loop has no barrier and is unrolled 4 deep so the loads of several k are in flight at once.
// The S partial sums of each output meet in workgroup memory, then store4 (conv.py: bias,
// activation, residual, second activation) writes them.
// Templates: ENABLE, FIELDS, BINDINGS, HELPERS (store4 and the activations), CX, S, RY, TR,
// SETUP (per-invocation column state: the lanes' offsets into x), LOADX (sets xv, the 4
// columns of x at reduction index k), ROWS (per-invocation row offsets into w).
${ENABLE}

struct Params {
${FIELDS}
}

${BINDINGS}

const CX: u32 = ${CX}u;
const S: u32 = ${S}u;
const RY: u32 = ${RY}u;
const TR: u32 = ${TR}u;
const BR: u32 = RY * TR;  // rows per workgroup
const THREADS: u32 = CX * S * RY;
${PARTIALS}

${HELPERS}
@compute @workgroup_size(${THREADS})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let cx = lid % CX;
    let s = (lid / CX) % S;
    let ry = lid / (CX * S);
    let c = wid.x * 4u * CX + cx * 4u;  // this invocation's first column
    let r0 = wid.y * BR + ry * TR;  // and first row
    ${SETUP}
    ${ROWS}
    var k = s;
    for (; k + 3u * S < p.K; k = k + 4u * S) {
        ${BODY4}
    }
    for (; k < p.K; k = k + S) {
        ${BODY1}
    }
    ${FINISH}
}
