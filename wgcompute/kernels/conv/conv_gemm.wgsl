// Implicit GEMM on matmul's tiling (wgcompute/kernels/matmul.py generates DECLARE, MAIN and
// WRITE for a TileConfig with hooks): the tiles are filled by load_a4 / load_b4 and results
// leave through store4, all three defined in HELPERS by wgcompute/kernels/conv.py.
//   conv2d: rows = the output channels of one group, columns = the (n, oh, ow) pixels of the
//     whole batch, k = (c, kh, kw); b is gathered from x (im2col, never materialized) and
//     the epilogue adds the bias, applies the activation, the residual and a second
//     activation before writing NCHW.
//   gemm: out = act(alpha * op(a) · op(b) + beta * c) per batch (workgroup z), c broadcast.
// Templates: ENABLE, FIELDS (the Params struct), BINDINGS, S (tile element), BM, BN, BK,
// STAGES, THREADS, HELPERS, BLOCK, TXTY, DECLARE, MAIN, WRITE, BATCH (sets the private
// batch offsets from wid.z), COL0 (the first column of this launch: gemm splits wide
// weights into column bands that each fit one binding).
${ENABLE}

struct Params {
${FIELDS}
}

${BINDINGS}

const ASZ: u32 = ${BK}u * ${BM}u / 4u;  // one a tile, in vec4
const BSZ: u32 = ${BK}u * ${BN}u / 4u;
var<workgroup> As: array<vec4<${S}>, ${STAGES}u * ASZ>;
var<workgroup> Bs: array<vec4<${S}>, ${STAGES}u * BSZ>;
var<private> za: u32;  // this workgroup's batch offsets into a, b, c and out (gemm)
var<private> zb: u32;
var<private> zc: u32;
var<private> zo: u32;

${HELPERS}
@compute @workgroup_size(${THREADS})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    ${BATCH}
    ${BLOCK}
    let row0 = by * ${BM}u;
    let col0 = bx * ${BN}u + ${COL0};
    ${TXTY}
    ${DECLARE}
    let kbegin = 0u;
    let kend = p.K;
    let tiles = (kend + ${BK}u - 1u) / ${BK}u;
    var k0 = kbegin;
    ${MAIN}
    ${WRITE}
}
