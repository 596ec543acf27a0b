// matmul: out (M×N) = a (M×K) · b (K×N), row-major, any M, N, K; 2-D block tiling.
// Bindings: 0 a (read), 1 b (read), 2 out (read_write), 3 params (uniform: M, N, K).
// Params (wgcompute/kernels/matmul/tiling.py, from a TileConfig):
//   ENABLE, T (storage element type), AT / BT (a's, b's array element: vec4<T> when K,
//   resp. N, is a multiple of 4, else T; vec_a / vec_b say which), S (workgroup tile
//   element: f32 for f16 inputs, or f16 for f16 "mixed" precision), BM×BN (the workgroup's block of out), BK (k step), THREADS =
//   (BM/TM)·(BN/TN), STAGES (1 or 2 workgroup tiles of a and of b), split (the split-K
//   factor: out is atomic<u32> and phase 0 zeroes it), batch (batched products: EXTRA, the
//   batch's sizes and strides; INDEX, the WGSL that sets i_a and i_b from the batch index bz),
//   AO/BO/OO ("aoff + " etc. for batched products, else ""), ta / tb (a held as K×M, b as
//   N×K in memory: a's tile is loaded along m, as As holds it, with vec_a meaning M % 4 == 0;
//   b's along k, with vec_bt for K % 4 == 0; OT, out's element, is vec4 when vec_b);
//   tiling.wgsl's parts, rendered:
//   BLOCK (which BM×BN block this workgroup owns: bx, by), TXTY, DECLARE, MAIN (the k loop:
//   loads global -> registers -> workgroup memory, multiply-adds, all straight-line with
//   constant offsets), WRITE (accumulators -> out, edge-guarded).
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
    kchunk: u32,
#for name, wtype in EXTRA
    ${name}: ${wtype},
#endfor
}

@group(0) @binding(0) var<storage, read> a: array<${AT}>;
@group(0) @binding(1) var<storage, read> b: array<${BT}>;
#if epilogue
    #if ebias
@group(0) @binding(2) var<storage, read> bias: array<${BIAST}>;
    #endif
@group(0) @binding(3) var<storage, read_write> out: array<${OT}>;
@group(0) @binding(4) var<uniform> p: Params;
#else
    #if split > 1
@group(0) @binding(2) var<storage, read_write> out: array<atomic<u32>>;
    #else
@group(0) @binding(2) var<storage, read_write> out: array<${OT}>;
    #endif
@group(0) @binding(3) var<uniform> p: Params;
#endif

const ASZ: u32 = ${BK}u * ${BM}u / 4u;  // one a tile, in vec4
const BSZ: u32 = ${BK}u * ${BN}u / 4u;
var<workgroup> As: array<vec4<${S}>, ${STAGES}u * ASZ>;
var<workgroup> Bs: array<vec4<${S}>, ${STAGES}u * BSZ>;

#if batch
// this workgroup's element offsets into a, b and out
var<private> aoff: u32;
var<private> boff: u32;
var<private> ooff: u32;

#endif
#if not vec_a
fn load_a(r: u32, k: u32, kend: u32) -> ${S} {
    if (r < p.M && k < kend) {
    #if ta
        return ${S}(a[${AO}k * ${LDA} + r]);
    #else
        return ${S}(a[${AO}r * ${LDA} + k]);
    #endif
    }
    return ${S}(0);
}

#endif
#if (tb and not vec_bt) or (not tb and not vec_b)
fn load_b(k: u32, c: u32, kend: u32) -> ${S} {
    if (k < kend && c < p.N) {
    #if tb
        return ${S}(b[${BO}c * ${LDB} + k]);
    #else
        return ${S}(b[${BO}k * ${LDB} + c]);
    #endif
    }
    return ${S}(0);
}

#endif
#if epilogue
// The epilogue (kernels/matmul/epilogue.py's matmul_bias): out = act(a · b + bias), bias
// (N,) added to every row (binding 2, declared where ebias; out and params move to 3 and 4),
// in f32 before the store: WRITE applies act4 to each accumulator. ACT is the WGSL of
// fn act(x: f32) -> f32; BIAST, bias's element, is vec4<T> when out is written as vec4.
${ACT}
fn act4(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(act(v.x), act(v.y), act(v.z), act(v.w));
}

    #if ebias
// bias[c..c+3] (0 past N)
fn bias4(c: u32) -> vec4<f32> {
        #if BIAST != T
    if (c < p.N) {
        return vec4<f32>(bias[c / 4u]);
    }
    return vec4<f32>(0.0);
        #else
    var v = vec4<f32>(0.0);
    for (var l = 0u; l < 4u; l = l + 1u) {
        if (c + l < p.N) {
            v[l] = f32(bias[c + l]);
        }
    }
    return v;
        #endif
}

    #endif
#endif
#if split > 1
fn add_out(i: u32, v: f32) {
    var old = atomicLoad(&out[i]);
    loop {
        let res = atomicCompareExchangeWeak(&out[i], old, bitcast<u32>(bitcast<f32>(old) + v));
        if (res.exchanged) {
            break;
        }
        old = res.old_value;
    }
}

#endif
@compute @workgroup_size(${THREADS})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
#if split > 1
    if (p.phase == 0u) {
        let i = (wid.y * nwg.x + wid.x) * ${THREADS}u + lid;
    #if batch
        if (i < p.M * p.N * p.nbatch) {
    #else
        if (i < p.M * p.N) {
    #endif
            atomicStore(&out[i], 0u);
        }
        return;
    }
#endif
    ${BLOCK}
    let row0 = by * ${BM}u;
    let col0 = bx * ${BN}u;
    ${TXTY}
    ${DECLARE}
#if batch
    let bz = p.zbase + wid.z / p.kslices;
    {
        ${INDEX}
        aoff = i_a;
        boff = i_b;
    }
    ooff = bz * p.M * p.N;
    let kbegin = (wid.z % p.kslices) * p.kchunk;
#else
    let kbegin = wid.z * p.kchunk;
#endif
    let kend = min(p.K, kbegin + p.kchunk);
    let tiles = select(0u, (kend - kbegin + ${BK}u - 1u) / ${BK}u, kend > kbegin);
    var k0 = kbegin;
    ${MAIN}
    ${WRITE}
}
