// softmax over rows: out[r, i] = exp(x[r, i] - max_r) / sum_j exp(x[r, j] - max_r).
// Bindings: 0 x (read), 1 out (read_write), 2 params (uniform).
// Params: rows, n (elements per row; rows = 1 and n = everything for axis=None).
// Templates: ENABLE, T (element type; f16 is computed in f32), WG (workgroup size), XT (x's
//   and out's array element: vec4<T> when rows are whole vec4s, else T), PASS1 / PASS2 (the
//   two passes over a row, vector or scalar),
//   COMBINE (subgroup or workgroup-memory merge of (max, sum) pairs into wm[0], ws[0]),
//   SGARG / SID (the subgroup_invocation_id argument, or a stand-in).
// One workgroup per row. The first pass keeps a running (max, sum of exp(x - max)) per
// invocation ("online softmax"), so x is read twice, not three times.
${ENABLE}

struct Params {
    rows: u32,
    n: u32,
}

@group(0) @binding(0) var<storage, read> x: array<${XT}>;
@group(0) @binding(1) var<storage, read_write> out: array<${XT}>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> wm: array<f32, ${WG}>;
var<workgroup> ws: array<f32, ${WG}>;
var<workgroup> wslot: atomic<u32>;

fn neg_inf() -> f32 {
    return bitcast<f32>(0xff800000u);
}

// s · exp(m_from - m_to), and 0 for s = 0 (avoids -inf - -inf = NaN for empty partials).
// Zero and nan by their bits: NVIDIA's compiler assumes no nan in comparisons.
fn scaled(s: f32, m_from: f32, m_to: f32) -> f32 {
    if ((bitcast<u32>(s) & 0x7fffffffu) == 0u) {
        return 0.0;
    }
    return s * exp(m_from - m_to);
}

// one element into the running (max m, sum s of exp(x - m)); a nan makes the sum nan, so
// that its whole row is nan (as numpy's and onnxruntime's softmax)
fn online(ms: vec2<f32>, v: f32) -> vec2<f32> {
    if ((bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u) {
        return vec2<f32>(ms.x, v);
    }
    if (v > ms.x) {
        return vec2<f32>(v, scaled(ms.y, ms.x, v) + 1.0);
    }
    if (v > neg_inf()) {
        return vec2<f32>(ms.x, ms.y + exp(v - ms.x));
    }
    return ms;
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32${SGARG}) {
    ${SID}
    let row = wid.y * nwg.x + wid.x;
    let base = row * p.n;
    var ms = vec2<f32>(neg_inf(), 0.0);
    if (row < p.rows) {
        ${PASS1}
    }
    let mine = ms;
    ${COMBINE}
    let row_max = wm[0];
    let row_sum = ws[0];
    if (row < p.rows) {
        ${PASS2}
    }
}
