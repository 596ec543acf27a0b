// fft_pass: one Stockham autosort pass of radix R over complex64 (vec2<f32>) or complex128
// (vec2<f64>) data, batched.
// Bindings: 0 x (read), 1 y (read_write), 2 params (uniform); with TABLE: 0 x, 1 wt (read),
// 2 y, 3 params.
// The data is O × N × Q (the transformed axis of length N between O outer and Q inner
// elements). A pass of radix R after passes whose radices multiply to P reads, for each
// column (o, i, q) with i < N/R, the R elements t = i + r·N/R, multiplies element r by
// W_{P·R}^{r·(i mod P)}, takes their R-point DFT in workgroup memory (steps of radix 2 to 16,
// fft.sub_steps; radix-3 and -5 steps where R, a single pass over the whole axis, has those
// factors; radix 8 and 16 as two DFTs in registers) and writes result r to t = (i - i mod P)·R +
// i mod P + r·P: after the last pass y holds the DFT in natural order, times p.scale.
// A workgroup moves C columns: consecutive columns are consecutive in memory, so reads and
// writes move C·8 contiguous bytes at least (R·C·8 when the axis is contiguous).
// Templates: R, C, WG (threads), PER (values a thread holds), STEPS ((radix, product of the
// earlier steps' radices) of the sub-transform), SIGN (-1 forward, +1 inverse), READ_R /
// WRITE_R (r varies fastest between threads: the R elements of a column are contiguous
// there), SC (workgroup memory's row stride: C + 1 where r varies fastest, so that those
// threads hit different banks), Q1 (Q is 1), COLUMN_FIXED (C divides WG and r does not
// vary fastest: a thread loads one column), STORE_FIXED (the same for the store), TW
// ((cos, sin) of 2πm/16 for m < 16: radix-8 and -16 steps' twiddles), F (the parts' type),
// TABLE (the twiddles W^j = exp(SIGN·2πi·j/N) read from wt, made in float64 on the host:
// complex128, as WGSL's sines and cosines are float32 only on Vulkan; else computed here).

struct Params {
    cols: u32,     // O · (N / R) · Q columns
    N: u32,
    Q: u32,
    nr_bits: u32,  // log2(N / R)
    p_bits: u32,   // log2(P), P the product of the earlier passes' radices
    scale: ${F},
#if TABLE
    tw_bits: u32,  // log2(B): wt is W^j for j < B, then W^(B·j) for j < N / B (rounded up)
#else
    inv_pr: f32,   // 1 / (P · R), exact (a power of two)
#endif
}

@group(0) @binding(0) var<storage, read> x: array<vec2<${F}>>;
#if TABLE
@group(0) @binding(1) var<storage, read> wt: array<vec2<f64>>;
@group(0) @binding(2) var<storage, read_write> y: array<vec2<f64>>;
@group(0) @binding(3) var<uniform> p: Params;
#else
@group(0) @binding(1) var<storage, read_write> y: array<vec2<f32>>;
@group(0) @binding(2) var<uniform> p: Params;
#endif

const R: u32 = ${R}u;
const C: u32 = ${C}u;
const SC: u32 = ${SC}u;
const WG: u32 = ${WG}u;
#if not TABLE
const TAU: f32 = 6.283185307179586;
#endif

var<workgroup> s: array<vec2<${F}>, ${R * SC}u>;

fn cmul(a: vec2<${F}>, b: vec2<${F}>) -> vec2<${F}> {
    return vec2<${F}>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

#if TABLE
// W^j for j < N: wt[j mod B] · wt[B + j / B] (exact for j < B: wt[B] is 1), conjugated for
// the inverse (wt holds the forward sign's)
fn tw(j: u32) -> vec2<f64> {
    let b = 1u << p.tw_bits;
    let z = cmul(wt[j & (b - 1u)], wt[b + (j >> p.tw_bits)]);
    return vec2<f64>(z.x, ${-SIGN}.0 * z.y);
}

#else
// exp(SIGN · 2πi · f) for a fraction f = m / L in [0, 1) (exact: L is a power of two),
// taken into [-1/2, 1/2) turns, where sin and cos are most accurate.
fn turn(f0: f32) -> vec2<f32> {
    var f = f0;
    if (f >= 0.5) {
        f = f - 1.0;
    }
    let a = ${SIGN}.0 * TAU * f;
    return vec2<f32>(cos(a), sin(a));
}
#endif

// multiplies by SIGN · i
fn rot(z: vec2<${F}>) -> vec2<${F}> {
    return ${SIGN}.0 * vec2<${F}>(-z.y, z.x);
}

struct Column {
    ok: bool,
    base: u32,  // element (o, 0, q)
    i: u32,
}

fn column(g: u32) -> Column {
    var col: Column;
    col.ok = g < p.cols;
#if Q1
    let q = 0u;
    let rest = g;
#else
    let q = g % p.Q;
    let rest = g / p.Q;
#endif
    col.i = rest & ((1u << p.nr_bits) - 1u);
    col.base = (rest >> p.nr_bits) * p.N * p.Q + q;
    return col;
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g0 = (wid.y * nwg.x + wid.x) * C;
    // load, with the twiddles of the earlier passes (unrolled: every load in flight at once)
    var v: array<vec2<${F}>, ${PER}>;
#if COLUMN_FIXED
    // each thread keeps one column c (C divides WG) and takes r = r0 + k·WG/C: its earlier
    // passes' twiddles W^(r·kp) are W^(r0·kp) times (W^(kp·WG/C))^k, two sines and cosines
    let c = lid % C;
    let col = column(g0 + c);
#if not TABLE
    let kp = col.i & ((1u << p.p_bits) - 1u);
    var w = turn(f32((lid / C) * kp) * p.inv_pr);
    let w_step = turn(f32(${WG // C}u * kp) * p.inv_pr);
#endif
#endif
#for k in range(PER)
    {
        let e = lid + ${k}u * WG;
#if READ_R
        let r = e % R;
        let c = e / R;
#elif COLUMN_FIXED
        let r = e / C;
#else
        let c = e % C;
        let r = e / C;
#endif
#if not COLUMN_FIXED
        let col = column(g0 + c);
#endif
        var val = vec2<${F}>(0.0, 0.0);
        if (col.ok) {
            val = x[col.base + (col.i + (r << p.nr_bits)) * p.Q];
        }
        if (p.p_bits > 0u) {  // r · (i mod P) < R · P <= N: no overflow
#if TABLE
            let kq = col.i & ((1u << p.p_bits) - 1u);
            val = cmul(val, tw((r * kq) << (p.nr_bits - p.p_bits)));
#elif COLUMN_FIXED
            val = cmul(val, w);
            w = cmul(w, w_step);
#else
            let kq = col.i & ((1u << p.p_bits) - 1u);
            val = cmul(val, turn(f32(r * kq) * p.inv_pr));
#endif
        }
        s[r * SC + c] = val;
    }
#endfor
    workgroupBarrier();
#for step in STEPS
    // radix-${step[0]} step over the sub-transform, ${step[1]} = product of earlier steps'
    // radices; unrolled, so that v stays in registers
#for k in range(PER // step[0])
    {
        let b = lid + ${k}u * WG;
        let c = b % C;
        let u = b / C;
#for m in range(step[0])
        v[${k * step[0] + m}] = s[(u + ${m * (R // step[0])}u) * SC + c];
#endfor
#if step[1] > 1 and TABLE
        // W_L^(kk·m) = W^(kk·m·N/L), L = ${step[0] * step[1]} (N / L = N / R · ${R // (step[0] * step[1])})
#for m in range(1, step[0])
        v[${k * step[0] + m}] = cmul(v[${k * step[0] + m}], tw(((u % ${step[1]}u) * ${m * (R // (step[0] * step[1]))}u) << p.nr_bits));
#endfor
#elif step[1] > 1
        // W^kk from one sine and cosine, its powers by products
        let w1 = turn(f32(u % ${step[1]}u) * ${1.0 / (step[0] * step[1])});
        var wm = w1;
#for m in range(1, step[0])
        v[${k * step[0] + m}] = cmul(v[${k * step[0] + m}], wm);
#if m + 1 < step[0]
        wm = cmul(wm, w1);
#endif
#endfor
#endif
    }
#endfor
    workgroupBarrier();
#for k in range(PER // step[0])
    {
        let b = lid + ${k}u * WG;
        let c = b % C;
        let u = b / C;
        let kk = u % ${step[1]}u;
        let j = (u - kk) * ${step[0]}u + kk;
#if step[0] >= 8
        // the radix-(4·B) DFT in registers (B = 2 or 4): element n = B·n1 + n2 and result
        // k1 + 4·k2; a 4-point DFT over n1 for each n2, times W^(n2·k1), then a B-point DFT
        // over n2 for each k1
#for n2 in range(step[0] // 4)
        {
            let a0 = v[${k * step[0] + n2}];
            let a1 = v[${k * step[0] + step[0] // 4 + n2}];
            let a2 = v[${k * step[0] + step[0] // 2 + n2}];
            let a3 = v[${k * step[0] + 3 * step[0] // 4 + n2}];
            let t0 = a0 + a2;
            let t1 = a0 - a2;
            let t2 = a1 + a3;
            let t3 = rot(a1 - a3);
            v[${k * step[0] + n2}] = t0 + t2;
#for k1 in range(1, 4)
#if n2 == 0
            v[${k * step[0] + k1 * step[0] // 4 + n2}] = ${("t1 + t3", "t0 - t2", "t1 - t3")[k1 - 1]};
#else
            v[${k * step[0] + k1 * step[0] // 4 + n2}] = cmul(${("t1 + t3", "t0 - t2", "t1 - t3")[k1 - 1]}, vec2<${F}>(${lit(TW[n2 * k1 * 16 // step[0]][0])}, ${SIGN}.0 * ${lit(TW[n2 * k1 * 16 // step[0]][1])}));
#endif
#endfor
        }
#endfor
#for k1 in range(4)
        {
#if step[0] == 8
            let y0 = v[${k * 8 + 2 * k1}];
            let y1 = v[${k * 8 + 2 * k1 + 1}];
            s[(j + ${k1 * step[1]}u) * SC + c] = y0 + y1;
            s[(j + ${(k1 + 4) * step[1]}u) * SC + c] = y0 - y1;
#else
            let t0 = v[${k * 16 + 4 * k1}] + v[${k * 16 + 4 * k1 + 2}];
            let t1 = v[${k * 16 + 4 * k1}] - v[${k * 16 + 4 * k1 + 2}];
            let t2 = v[${k * 16 + 4 * k1 + 1}] + v[${k * 16 + 4 * k1 + 3}];
            let t3 = rot(v[${k * 16 + 4 * k1 + 1}] - v[${k * 16 + 4 * k1 + 3}]);
            s[(j + ${k1 * step[1]}u) * SC + c] = t0 + t2;
            s[(j + ${(k1 + 4) * step[1]}u) * SC + c] = t1 + t3;
            s[(j + ${(k1 + 8) * step[1]}u) * SC + c] = t0 - t2;
            s[(j + ${(k1 + 12) * step[1]}u) * SC + c] = t1 - t3;
#endif
        }
#endfor
#elif step[0] == 4
        let t0 = v[${4 * k}] + v[${4 * k + 2}];
        let t1 = v[${4 * k}] - v[${4 * k + 2}];
        let t2 = v[${4 * k + 1}] + v[${4 * k + 3}];
        let t3 = rot(v[${4 * k + 1}] - v[${4 * k + 3}]);
        s[j * SC + c] = t0 + t2;
        s[(j + ${step[1]}u) * SC + c] = t1 + t3;
        s[(j + ${2 * step[1]}u) * SC + c] = t0 - t2;
        s[(j + ${3 * step[1]}u) * SC + c] = t1 - t3;
#elif step[0] == 2
        s[j * SC + c] = v[${2 * k}] + v[${2 * k + 1}];
        s[(j + ${step[1]}u) * SC + c] = v[${2 * k}] - v[${2 * k + 1}];
#elif step[0] == 3
        let t1 = v[${3 * k + 1}] + v[${3 * k + 2}];
        let m1 = v[${3 * k}] - 0.5 * t1;
        let m2 = 0.8660254037844386 * rot(v[${3 * k + 1}] - v[${3 * k + 2}]);
        s[j * SC + c] = v[${3 * k}] + t1;
        s[(j + ${step[1]}u) * SC + c] = m1 + m2;
        s[(j + ${2 * step[1]}u) * SC + c] = m1 - m2;
#else
        let t1 = v[${5 * k + 1}] + v[${5 * k + 4}];
        let t2 = v[${5 * k + 2}] + v[${5 * k + 3}];
        let t3 = v[${5 * k + 1}] - v[${5 * k + 4}];
        let t4 = v[${5 * k + 2}] - v[${5 * k + 3}];
        let a0 = v[${5 * k}];
        let b1 = a0 + 0.30901699437494745 * t1 - 0.8090169943749475 * t2;
        let b2 = a0 - 0.8090169943749475 * t1 + 0.30901699437494745 * t2;
        let d1 = rot(0.9510565162951535 * t3 + 0.5877852522924731 * t4);
        let d2 = rot(0.5877852522924731 * t3 - 0.9510565162951535 * t4);
        s[j * SC + c] = a0 + t1 + t2;
        s[(j + ${step[1]}u) * SC + c] = b1 + d1;
        s[(j + ${2 * step[1]}u) * SC + c] = b2 + d2;
        s[(j + ${3 * step[1]}u) * SC + c] = b2 - d2;
        s[(j + ${4 * step[1]}u) * SC + c] = b1 - d1;
#endif
    }
#endfor
    workgroupBarrier();
#endfor
    // store r to (i - i mod P)·R + i mod P + r·P
#if STORE_FIXED
    let c_out = lid % C;
    let col_out = column(g0 + c_out);
    let kp_out = col_out.i & ((1u << p.p_bits) - 1u);
    let t_out = (col_out.i - kp_out) * R + kp_out;
#endif
#for k in range(PER)
    {
        let e = lid + ${k}u * WG;
#if STORE_FIXED
        let r = e / C;
        if (col_out.ok) {
            y[col_out.base + (t_out + (r << p.p_bits)) * p.Q] = s[r * SC + c_out] * p.scale;
        }
#else
#if WRITE_R
        let r = e % R;
        let c = e / R;
#else
        let c = e % C;
        let r = e / C;
#endif
        let col = column(g0 + c);
        if (col.ok) {
            let kp = col.i & ((1u << p.p_bits) - 1u);
            let t = (col.i - kp) * R + kp + (r << p.p_bits);
            y[col.base + t * p.Q] = s[r * SC + c] * p.scale;
        }
#endif
    }
#endfor
}
