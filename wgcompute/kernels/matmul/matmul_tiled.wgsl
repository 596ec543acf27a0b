// matmul: out (M×N) = a (M×K) · b (K×N), row-major, any M, N, K; 2-D block tiling.
// Bindings: 0 a (read), 1 b (read), 2 out (read_write), 3 params (uniform: M, N, K).
// Templates (filled by wgcompute/kernels/matmul.py from a TileConfig):
//   ENABLE, T (storage element type), ACC (accumulator type: f32 for f16 inputs),
//   S (workgroup tile element: ACC, or f16 for f16 "mixed" precision),
//   AT / BT (a's and b's array element: vec4<T> when K, resp. N, is a multiple of 4, else T),
//   BM×BN (the workgroup's block of out), BK (k step), TM×TN (each invocation's block),
//   THREADS = (BM/TM)·(BN/TN), STAGES (1 or 2 workgroup tiles of a and of b),
//   BLOCK (which BM×BN block this workgroup owns: bx, by; grouped when the config says so),
//   MAIN (the k loop: LOAD global -> registers, STORE registers -> workgroup memory, COMPUTE
//   one k step's multiply-adds, all generated straight-line with constant offsets),
//   WRITE (accumulators -> out, edge-guarded), HELPERS (guarded scalar loads, for the
//   operands that are not vec4), OT (out's element: BT, or atomic<u32> for split-K),
//   PHASE0 (split-K: the launch that zeroes out), EXTRA and KBEGIN (batched products: the
//   batch's sizes and strides, and the batch index and k slice taken from workgroup z).
// Split-K (f32 sums: f32, or f16 a and b writing an f32 temporary that a second kernel
// converts): workgroup z multiplies the k range [z·kchunk, (z+1)·kchunk) and adds its block
// into out by compare-and-swap, after a first launch (phase 0) zeroed out; skinny outputs
// (8192×64) then still fill the GPU.
// STAGES = 2: two BK×BM (a transposed) and two BK×BN tiles; the next tile is read from global
// memory into registers while the current one is multiplied, one barrier per k step, and the
// loop is generated twice (tile 0 then tile 1) so every workgroup-memory offset is a constant.
// STAGES = 1: one tile each (half the memory: bigger BK, or more workgroups per SM), the
// register prefetch stays, two barriers per k step.
// Each invocation owns TM×TN accumulators in registers (straight-line code, no private arrays);
// its rows and columns are spread BM/TM resp. BN/TN apart so workgroup reads do not conflict.
// All index math is u32 (naga's i32 % of a negative dividend misbehaves on NVIDIA).
${ENABLE}

struct Params {
    M: u32,
    N: u32,
    K: u32,
    phase: u32,
    kchunk: u32,${EXTRA}
}

@group(0) @binding(0) var<storage, read> a: array<${AT}>;
@group(0) @binding(1) var<storage, read> b: array<${BT}>;
@group(0) @binding(2) var<storage, read_write> out: array<${OT}>;
@group(0) @binding(3) var<uniform> p: Params;

const ASZ: u32 = ${BK}u * ${BM}u / 4u;  // one a tile, in vec4
const BSZ: u32 = ${BK}u * ${BN}u / 4u;
var<workgroup> As: array<vec4<${S}>, ${STAGES}u * ASZ>;
var<workgroup> Bs: array<vec4<${S}>, ${STAGES}u * BSZ>;

${HELPERS}
@compute @workgroup_size(${THREADS})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    ${PHASE0}
    ${BLOCK}
    let row0 = by * ${BM}u;
    let col0 = bx * ${BN}u;
    ${TXTY}
    ${DECLARE}
    ${KBEGIN}
    let kend = min(p.K, kbegin + p.kchunk);
    let tiles = select(0u, (kend - kbegin + ${BK}u - 1u) / ${BK}u, kend > kbegin);
    var k0 = kbegin;
    ${MAIN}
    ${WRITE}
}
