// complex_axis: one output element per invocation, read from x along one axis.
// Bindings: 0 x (read), 1 out (read_write), 2 params (uniform).
// out is O × n_out × Q and x is O × n_in × Q around the axis; element (o, t, q) of out is:
//   pad        x[o, t, q] as complex where t < n_in, else 0 (conj: its conjugate)
//   hermitian  the full spectrum of length n_out from its first half in x: x[t] for
//              t <= n_out / 2, conj(x[n_out - t]) above (0 where that is not in x)
//   real, imag, abs, conj of x[o, t, q] (n_in = n_out)
//   chirp_in   x[o, t, q] · w(t) where t < n_in, else 0; w(t) = exp(SIGN·iπ t² / n_in)
//   chirp_out  x[o, t, q] · w(t) with n_in = the chirp's length (t < n_out <= n_in... see
//              the kernel), i.e. the Bluestein transform's last step
//   chirp_b    conj(w(s)) with s = t for t < n_in, n_out - t for t > n_out - n_in, else 0
//   pack, r2c_post, c2r_pre, unpack: a real transform of even length 2M as a complex one of
//              length M (see each below)
// every result times p.scale. Templates: MODE, TIN (x's element type), TOUT, R (the complex
// parts' type: f32, or f64 for complex128, which has no chirp modes and turns by angles only
// with TABLE: WGSL's cos and sin are f32 only on Vulkan), RMAX (R's largest finite value),
// WG, SIGN, ENABLE, TABLE (r2c_post and c2r_pre of complex128: exp(-2πi·t/2M) read from wt,
// the twiddle table of 2M made in float64 on the host; bindings 0 x, 1 wt, 2 out, 3 params).
${ENABLE}

struct Params {
    total: u32,
    n_out: u32,
    n_in: u32,
    Q: u32,
    chirp: u32,  // the length whose chirp w is
#if TABLE
    scale: f64,
    tw_bits: u32,  // log2(B): wt is W^j for j < B, then W^(B·j)
}

@group(0) @binding(0) var<storage, read> x: array<${TIN}>;
@group(0) @binding(1) var<storage, read> wt: array<vec2<f64>>;
@group(0) @binding(2) var<storage, read_write> out: array<${TOUT}>;
@group(0) @binding(3) var<uniform> p: Params;
#else
    scale: f32,
}

@group(0) @binding(0) var<storage, read> x: array<${TIN}>;
@group(0) @binding(1) var<storage, read_write> out: array<${TOUT}>;
@group(0) @binding(2) var<uniform> p: Params;
#endif

const TAU: ${R} = 6.283185307179586;

fn cmul(a: vec2<${R}>, b: vec2<${R}>) -> vec2<${R}> {
    return vec2<${R}>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

fn conj(a: vec2<${R}>) -> vec2<${R}> {
    return vec2<${R}>(a.x, -a.y);
}

fn load(i: u32) -> vec2<${R}> {
#if TIN == "vec2<" + R + ">"
    return x[i];
#elif TIN[:4] == "vec2"
    return vec2<${R}>(x[i]);  // the other complex dtype's parts, converted
#else
    return vec2<${R}>(${R}(x[i]), 0.0);
#endif
}

#if TABLE
// exp(-2πi · t / 2M) for t < 2M: wt[t mod B] · wt[B + t / B]
fn turn_at(t: u32) -> vec2<f64> {
    let b = 1u << p.tw_bits;
    return cmul(wt[t & (b - 1u)], wt[b + (t >> p.tw_bits)]);
}

#endif
#if R == "f32"
// exp(-2πi · f)
fn turn(f: ${R}) -> vec2<${R}> {
    var g = f;
    if (g >= 0.5) {
        g = g - 1.0;
    }
    let a = -TAU * g;
    return vec2<${R}>(cos(a), sin(a));
}

// (a · b) mod m for a, b < m < 2^31, by doubling: no product passes 32 bits
fn mulmod(a: u32, b: u32, m: u32) -> u32 {
    var r = 0u;
    var s = a;
    var k = b;
    while (k > 0u) {
        if ((k & 1u) == 1u) {
            r = (r + s) % m;
        }
        s = (s + s) % m;
        k = k >> 1u;
    }
    return r;
}

// exp(SIGN · iπ t² / n) = exp(SIGN · 2πi · (t² mod 2n) / 2n)
fn chirp(t: u32, n: u32) -> vec2<${R}> {
    let m = 2u * n;
    var f = ${R}(mulmod(t % m, t % m, m)) / ${R}(m);
    if (f >= 0.5) {
        f = f - 1.0;
    }
    let a = ${SIGN}.0 * TAU * f;
    return vec2<${R}>(cos(a), sin(a));
}
#endif

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (i >= p.total) {
        return;
    }
    let q = i % p.Q;
    let t = (i / p.Q) % p.n_out;
    let base = (i / (p.Q * p.n_out)) * p.n_in * p.Q + q;  // element (o, 0, q) of x
    var v = vec2<${R}>(0.0, 0.0);
#if MODE == "pad" or MODE == "pad_conj"
    if (t < p.n_in) {
        v = load(base + t * p.Q);
    }
#if MODE == "pad_conj"
    v = conj(v);
#endif
#elif MODE == "hermitian" or MODE == "hermitian_conj"
    if (t <= p.n_out / 2u) {
        if (t < p.n_in) {
            v = load(base + t * p.Q);
        }
    } else if (p.n_out - t < p.n_in) {
        v = conj(load(base + (p.n_out - t) * p.Q));
    }
#if MODE == "hermitian_conj"
    v = conj(v);
#endif
#elif MODE == "chirp_in"
    if (t < p.n_in) {
        v = cmul(load(base + t * p.Q), chirp(t, p.chirp));
    }
#elif MODE == "chirp_out"
    v = cmul(load(base + t * p.Q), chirp(t, p.chirp));
#elif MODE == "pack"
    // a real signal of length 2·n_out as n_out complex values (even, odd samples)
    if (2u * t < p.n_in) {
        v.x = ${R}(x[base + 2u * t * p.Q]);
    }
    if (2u * t + 1u < p.n_in) {
        v.y = ${R}(x[base + (2u * t + 1u) * p.Q]);
    }
#elif MODE == "r2c_post" or MODE == "r2c_post_conj"
    // Z = DFT of the packed signal (length M = n_in): X[t] = E + W^t·O for t <= M, with
    // E = (Z[t] + conj Z[M - t]) / 2, O = (Z[t] - conj Z[M - t]) / 2i, W = exp(-2πi / 2M)
    let m = p.n_in;
    let a = load(base + (t % m) * p.Q);
    let b = conj(load(base + ((m - t) % m) * p.Q));
    let e = 0.5 * (a + b);
    let d = 0.5 * (a - b);
    let o = vec2<${R}>(d.y, -d.x);
#if TABLE
    v = e + cmul(turn_at(t), o);
#else
    v = e + cmul(turn(${R}(t) / ${R}(2u * m)), o);
#endif
#if MODE == "r2c_post_conj"
    v = conj(v);
#endif
#elif MODE == "c2r_pre" or MODE == "c2r_pre_conj"
    // the inverse: Z[t] = E + i·O for t < M = n_out from the spectrum's bins 0..M (bins at
    // or past n_in are 0; the imaginary parts of bins 0 and M are dropped, as a real
    // signal's are 0), E = X[t] + conj X[M - t], O = (X[t] - conj X[M - t])·W^-t
    let m = p.n_out;
    var a = vec2<${R}>(0.0, 0.0);
    var b = vec2<${R}>(0.0, 0.0);
    if (t < p.n_in) {
        a = load(base + t * p.Q);
    }
    if (m - t < p.n_in) {
        b = load(base + (m - t) * p.Q);
    }
#if MODE == "c2r_pre_conj"
    a = conj(a);
    b = conj(b);
#endif
    if (t == 0u) {
        a.y = 0.0;
        b.y = 0.0;
    }
    b = conj(b);
#if TABLE
    let o = cmul(a - b, conj(turn_at(t)));
#else
    let o = cmul(a - b, conj(turn(${R}(t) / ${R}(2u * m))));
#endif
    v = (a + b) + vec2<${R}>(-o.y, o.x);
#elif MODE == "unpack"
    // the real signal of length n_out from n_in = n_out / 2 complex (even, odd) pairs
    let z = load(base + (t / 2u) * p.Q);
    v = vec2<${R}>(select(z.y, z.x, t % 2u == 0u), 0.0);
#elif MODE == "chirp_b"
    if (t < p.chirp) {
        v = conj(chirp(t, p.chirp));
    } else if (p.n_out - t < p.chirp) {
        v = conj(chirp(p.n_out - t, p.chirp));
    }
#else
    v = load(i);
#endif
#if MODE == "real" or MODE == "unpack"
    out[i] = v.x * ${R}(p.scale);
#elif MODE == "imag"
    out[i] = v.y * ${R}(p.scale);
#elif MODE == "abs"
    let m = max(abs(v.x), abs(v.y));
    var r = m;
    if (m > 0.0 && m <= ${RMAX}) {
        r = m * sqrt((v.x / m) * (v.x / m) + (v.y / m) * (v.y / m));
    }
    out[i] = r * ${R}(p.scale);
#elif MODE == "conj"
    out[i] = conj(v) * ${R}(p.scale);
#else
    out[i] = v * ${R}(p.scale);
#endif
}
