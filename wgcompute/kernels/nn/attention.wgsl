// attention: fused scaled-dot-product attention ("flash attention"), one pass over the keys:
//   out[b, h, i, :] = Σ_j softmax_j(scale · ⟨q[b,h,i,:], k[b,hk,j,:]⟩ + bias[b,h,i,j]) · v[b,hk,j,:]
//   hk = h / group (grouped-query attention). Every operand is a strided view: element
//   (b, h, i, d) of q is q[q_off + b·q_sb + h·q_sh + i·q_ss + d] (k, v, out alike; bias
//   (b, h, i, j) at b_off + b·b_sb + h·b_sh + i·b_si + j·b_sj, 0 strides broadcasting).
// Filled in by wgcompute/kernels/nn/attention.py.
// Bindings: 0 q, 1 k, 2 v, 3 bias (q again without BIAS: not read), 4 out, 5 params.
//   q, k, v, out are arrays of VT: vec4<T> where every view's offset and strides are
//   multiples of 4 and D, Dv are (VEC), else T. Arithmetic is f32 (T f16: storage only).
// Params: total (workgroups), nqb (query blocks per head), H, group, Sq, Skv, scale, and the
//   offset and strides of each view (q_off, q_sb, q_sh, q_ss; k_...; v_...; o_...; b_off,
//   b_sb, b_sh, b_si, b_sj).
// Templates: ENABLE, T (element type), VT, VEC, BIAS, NAN (a bad row's output is nan, else 0;
//   MASKED: 0 for a row whose every score is -inf, nan for one with a nan or +inf score),
//   D, Dv (head sizes), D4 = ⌈D/4⌉, DV4 = ⌈Dv/4⌉, KS (Ks's row stride in vec4: D4 made odd,
//   so that the TX invocations reading TX rows hit different banks), BQ (query rows per
//   workgroup, a multiple of 4), BKV (keys per tile), TX (invocations per 4 rows),
//   THREADS = BQ/4·TX, KPT = BKV/TX (keys per invocation), NC = ⌈DV4/TX⌉ (vec4 columns of out
//   per invocation), NK, NV (vec4 of a K, V tile per invocation), UNROLL (the S and P·V loops
//   written out, constant offsets).
// Algorithm: workgroup w does query rows [qb·BQ, qb·BQ + BQ) of head bh = w / nqb.
//   Invocation (ty, tx) = (lid / TX, lid % TX) owns query rows 4ty..4ty+3: their running max m
//   and sum l (vec4 over the 4 rows) and out columns (vec4) tx + TX·n, n < NC, in registers.
//   Q is read once into Qs (scaled, zero-padded). Per tile of BKV keys: S = Q·Kᵀ from Qs and
//   Ks, each invocation its 4 rows × keys tx + TX·c (c < KPT), bias added; keys past Skv and
//   -inf scores are masked (NEG); a nan or +inf score marks its row bad (its partial max
//   becomes BIG). The partial maxima meet in Ms; every invocation reads its rows' TX to get
//   the tile's max, rescales its l and out by exp(m_old - m_new) and writes P = exp(S - m_new)
//   (0 where masked or bad) into Ps (Pᵀ: a vec4 of 4 rows per key); then out += P·V from Ps
//   and Vs, l += P's rows. Masked scores are the finite NEG and the exponent of the rescale is
//   clamped, so no -inf - -inf ever makes a nan. At the end a row with l = 0 (all masked, or
//   bad) is written as nan (NAN) or 0, the others as out / l.
// K and V tiles are read from memory one tile ahead into registers (kr, vr) and stored into
//   Ks (after the barrier that ends S) and Vs (after the one that ends P·V): three barriers
//   per tile. Rows of K and V past Skv are zero (P·V never meets garbage).
// Workgroup memory: 16·(BQ·D4 + BKV·KS + BKV·TX·NC + BKV·BQ/4 + TX·BQ/4) bytes (attention.py
//   picks BQ, BKV, TX to fit the device). All index math is u32.
${ENABLE}

struct Params {
    total: u32,
    nqb: u32,
    H: u32,
    group: u32,
    Sq: u32,
    Skv: u32,
    scale: f32,
    q_off: u32,
    q_sb: u32,
    q_sh: u32,
    q_ss: u32,
    k_off: u32,
    k_sb: u32,
    k_sh: u32,
    k_ss: u32,
    v_off: u32,
    v_sb: u32,
    v_sh: u32,
    v_ss: u32,
    o_off: u32,
    o_sb: u32,
    o_sh: u32,
    o_ss: u32,
    b_off: u32,
    b_sb: u32,
    b_sh: u32,
    b_si: u32,
    b_sj: u32,
}

@group(0) @binding(0) var<storage, read> q: array<${VT}>;
@group(0) @binding(1) var<storage, read> k: array<${VT}>;
@group(0) @binding(2) var<storage, read> v: array<${VT}>;
@group(0) @binding(3) var<storage, read> bias: array<${T}>;
@group(0) @binding(4) var<storage, read_write> out: array<${VT}>;
@group(0) @binding(5) var<uniform> p: Params;

const NEG: f32 = -3.4028235e38;  // a masked score (finite: NEG - NEG is 0, not nan)
const BIG: f32 = 3.4028235e38;  // a bad row's maximum
const BQ4: u32 = ${BQ // 4}u;

var<workgroup> Qs: array<vec4<f32>, ${BQ * D4}>;  // [row][d4], scaled
var<workgroup> Ks: array<vec4<f32>, ${BKV * KS}>;  // [key][d4], row stride KS
var<workgroup> Vs: array<vec4<f32>, ${BKV * TX * NC}>;  // [key][column vec4]
var<workgroup> Ps: array<vec4<f32>, ${BKV * BQ // 4}>;  // [key][row / 4]: Pᵀ
var<workgroup> Ms: array<vec4<f32>, ${TX * BQ // 4}>;  // [tx][row / 4]: partial maxima

// vec4 c of the row of D (resp. Dv) elements at element `base` of q, k, v (zero past it)
#for name, n in (("q", D), ("k", D), ("v", Dv))
fn ${name}4(base: u32, c: u32) -> vec4<f32> {
#if VEC
    return vec4<f32>(${name}[base / 4u + c]);
#else
    var r = vec4<f32>(0.0);
    let d = base + c * 4u;
    #for e in range(4)
    if (c * 4u + ${e}u < ${n}u) {
        r[${e}] = f32(${name}[d + ${e}u]);
    }
    #endfor
    return r;
#endif
}

#endfor
#if BIAS
// the bias of the thread's 4 rows (from row element `rb`) at key j; 0 past Sq or Skv
fn bias4(rb: u32, row: u32, j: u32) -> vec4<f32> {
    var r = vec4<f32>(0.0);
    if (j < p.Skv) {
        let at = rb + j * p.b_sj;
    #for e in range(4)
        if (row + ${e}u < p.Sq) {
            r[${e}] = f32(bias[at + ${e}u * p.b_si]);
        }
    #endfor
    }
    return r;
}

#endif
// vec4 e of K's (resp. V's) tile of keys from j0 as the tile holds them (zero past Skv)
fn kload(base: u32, j0: u32, e: u32) -> vec4<f32> {
    let r = e / ${D4}u;
    if (e < ${BKV * D4}u && j0 + r < p.Skv) {
        return k4(base + (j0 + r) * p.k_ss, e % ${D4}u);
    }
    return vec4<f32>(0.0);
}

fn vload(base: u32, j0: u32, e: u32) -> vec4<f32> {
    let r = e / ${TX * NC}u;
    let c = e % ${TX * NC}u;
    if (e < ${BKV * TX * NC}u && j0 + r < p.Skv && c < ${DV4}u) {
        return v4(base + (j0 + r) * p.v_ss, c);
    }
    return vec4<f32>(0.0);
}

// writes row `row`'s out columns (vec4 c) from its accumulator, or the bad row's fill
fn put(base: u32, c: u32, x: vec4<f32>) {
#if VEC
    out[base / 4u + c] = ${VT}(x);
#else
    #for e in range(4)
    if (c * 4u + ${e}u < ${Dv}u) {
        out[base + c * 4u + ${e}u] = ${T}(x[${e}]);
    }
    #endfor
#endif
}

@compute @workgroup_size(${THREADS})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let w = wid.y * nwg.x + wid.x;
    if (w >= p.total) {
        return;
    }
    let qb = w % p.nqb;
    let bh = w / p.nqb;
    let b = bh / p.H;
    let h = bh % p.H;
    let hk = h / p.group;
    let tx = lid % ${TX}u;
    let ty = lid / ${TX}u;
    let i0 = qb * ${BQ}u;
    let row = i0 + ty * 4u;  // the first of this invocation's 4 rows
    let qbase = p.q_off + b * p.q_sb + h * p.q_sh;
    let kbase = p.k_off + b * p.k_sb + hk * p.k_sh;
    let vbase = p.v_off + b * p.v_sb + hk * p.v_sh;
#if BIAS
    let rb = p.b_off + b * p.b_sb + h * p.b_sh + row * p.b_si;
#endif
    for (var e = lid; e < ${BQ * D4}u; e = e + ${THREADS}u) {
        let r = e / ${D4}u;
        var x = vec4<f32>(0.0);
        if (i0 + r < p.Sq) {
            x = q4(qbase + (i0 + r) * p.q_ss, e % ${D4}u) * p.scale;
        }
        Qs[e] = x;
    }
    var m = vec4<f32>(NEG);
    var l = vec4<f32>(0.0);
#for n in range(NC)
    #for i in range(4)
    var o${n}_${i} = vec4<f32>(0.0);
    #endfor
#endfor
    // K and V tiles travel through registers (kr, vr): read from memory a tile ahead, while
    // the current one is multiplied, stored into Ks (Vs) once its last reader has passed a
    // barrier
#for i in range(NK)
    var kr${i} = kload(kbase, 0u, lid + ${i * THREADS}u);
#endfor
#for i in range(NV)
    var vr${i} = vload(vbase, 0u, lid + ${i * THREADS}u);
#endfor
#for i in range(NK)
    if (lid + ${i * THREADS}u < ${BKV * D4}u) {
        Ks[(lid + ${i * THREADS}u) / ${D4}u * ${KS}u + (lid + ${i * THREADS}u) % ${D4}u] = kr${i};
    }
    kr${i} = kload(kbase, ${BKV}u, lid + ${i * THREADS}u);
#endfor
    let tiles = (p.Skv + ${BKV - 1}u) / ${BKV}u;
    for (var t = 0u; t < tiles; t = t + 1u) {
        let j0 = t * ${BKV}u;
        // Vs: the last tile's P·V has passed the barrier at the loop's end (or Qs, Ks were
        // just written: the barrier below covers them)
#for i in range(NV)
        if (lid + ${i * THREADS}u < ${BKV * TX * NC}u) {
            Vs[lid + ${i * THREADS}u] = vr${i};
        }
        vr${i} = vload(vbase, j0 + ${BKV}u, lid + ${i * THREADS}u);
#endfor
        workgroupBarrier();
        // S: s{c} holds the scores of the 4 rows at key j0 + tx + TX·c
#for c in range(KPT)
        var s${c} = vec4<f32>(0.0);
#endfor
        let kb = tx * ${KS}u;  // this invocation's first key row in Ks
#for dd in (range(D4) if UNROLL else [None])
    #if dd is None
        for (var d = 0u; d < ${D4}u; d = d + 1u) {
    #else
        {
            let d = ${dd}u;
    #endif
            let qr = ty * ${4 * D4}u + d;
            let a0 = Qs[qr];
            let a1 = Qs[qr + ${D4}u];
            let a2 = Qs[qr + ${2 * D4}u];
            let a3 = Qs[qr + ${3 * D4}u];
            // the 4 rows' d-th elements side by side: 4 fma of vec4 per key, no dot's adds
            let ax = vec4<f32>(a0.x, a1.x, a2.x, a3.x);
            let ay = vec4<f32>(a0.y, a1.y, a2.y, a3.y);
            let az = vec4<f32>(a0.z, a1.z, a2.z, a3.z);
            let aw = vec4<f32>(a0.w, a1.w, a2.w, a3.w);
#for c in range(KPT)
            let k${c} = Ks[kb + ${TX * c * KS}u + d];
            s${c} = fma(aw, vec4<f32>(k${c}.w), fma(az, vec4<f32>(k${c}.z),
                    fma(ay, vec4<f32>(k${c}.y), fma(ax, vec4<f32>(k${c}.x), s${c}))));
#endfor
        }
#endfor
        var bad = vec4<bool>(false);
#for c in range(KPT)
        {
            let j = j0 + tx + ${TX * c}u;
    #if BIAS
            let sc = s${c} + bias4(rb, row, j);
    #else
            let sc = s${c};
    #endif
            let bits = bitcast<vec4<u32>>(sc);  // by the bits: no nan-blind comparisons
            let nonfinite = (bits & vec4<u32>(0x7fffffffu)) >= vec4<u32>(0x7f800000u);
            let live = j < p.Skv;
            bad = bad | (nonfinite & (bits != vec4<u32>(0xff800000u)) & vec4<bool>(live));
            s${c} = select(sc, vec4<f32>(NEG), nonfinite | vec4<bool>(!live));
        }
#endfor
        var pm = s0;
#for c in range(1, KPT)
        pm = max(pm, s${c});
#endfor
        Ms[tx * BQ4 + ty] = select(pm, vec4<f32>(BIG), bad);
        workgroupBarrier();
        var mt = Ms[ty];
#for u in range(1, TX)
        mt = max(mt, Ms[ty + ${u * BQ // 4}u]);
#endfor
        let mn = max(m, mt);
        let alpha = exp(max(m - mn, vec4<f32>(-256.0)));
        m = mn;
        let ok = mn < vec4<f32>(BIG);
#for c in range(KPT)
        Ps[(tx + ${TX * c}u) * BQ4 + ty] = select(vec4<f32>(0.0), exp(s${c} - mn),
                                                 (s${c} > vec4<f32>(NEG)) & ok);
#endfor
        // Ks: this tile's S is done (the barrier above): the next tile's K goes in
#for i in range(NK)
        if (lid + ${i * THREADS}u < ${BKV * D4}u) {
            Ks[(lid + ${i * THREADS}u) / ${D4}u * ${KS}u + (lid + ${i * THREADS}u) % ${D4}u] = kr${i};
        }
        kr${i} = kload(kbase, j0 + ${2 * BKV}u, lid + ${i * THREADS}u);
#endfor
        l = l * alpha;
#for n in range(NC)
    #for i in range(4)
        o${n}_${i} = o${n}_${i} * alpha[${i}];
    #endfor
#endfor
        workgroupBarrier();
#for jj in (range(BKV) if UNROLL else [None])
    #if jj is None
        for (var j = 0u; j < ${BKV}u; j = j + 1u) {
    #else
        {
            let j = ${jj}u;
    #endif
            let pj = Ps[ty + j * BQ4];
            l = l + pj;
#for n in range(NC)
            let v${n} = Vs[tx + j * ${TX * NC}u + ${TX * n}u];
    #for i in range(4)
            o${n}_${i} = fma(vec4<f32>(pj[${i}]), v${n}, o${n}_${i});
    #endfor
#endfor
        }
#endfor
        workgroupBarrier();  // Ps and Vs are read
    }
#if NAN
    let fill = vec4<f32>(bitcast<f32>(0x7fc00000u));
#elif MASKED
    // per row: nan where a score was nan or +inf (m went to BIG), 0 where all were -inf
    let fill = select(vec4<f32>(0.0), vec4<f32>(bitcast<f32>(0x7fc00000u)),
                      !(m < vec4<f32>(BIG)));
#else
    let fill = vec4<f32>(0.0);
#endif
    let inv = vec4<f32>(1.0) / select(vec4<f32>(1.0), l, l > vec4<f32>(0.0));
#for i in range(4)
    if (row + ${i}u < p.Sq) {
        let ob = p.o_off + b * p.o_sb + h * p.o_sh + (row + ${i}u) * p.o_ss;
    #for n in range(NC)
        if (tx + ${TX * n}u < ${DV4}u) {
            put(ob, tx + ${TX * n}u, select(vec4<f32>(fill[${i}]), o${n}_${i} * inv[${i}],
                                            l[${i}] > 0.0));
        }
    #endfor
    }
#endfor
}
