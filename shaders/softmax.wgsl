// softmax over rows: out[r, i] = exp(x[r, i] - max_r) / sum_j exp(x[r, j] - max_r).
// Bindings: 0 x (read), 1 out (read_write), 2 params (uniform).
// Params: rows, n (elements per row; rows = 1 and n = everything for axis=None).
// Templates: ENABLE, T (element type; f16 is computed in f32), WG (workgroup size),
//   COMBINE (subgroup or workgroup-memory merge of (max, sum) pairs into wm[0], ws[0]),
//   SGARG / SID (the subgroup_invocation_id argument, or a stand-in).
// One workgroup per row. The first pass keeps a running (max, sum of exp(x - max)) per
// invocation ("online softmax"), so x is read twice, not three times.
${ENABLE}

struct Params {
    rows: u32,
    n: u32,
}

@group(0) @binding(0) var<storage, read> x: array<${T}>;
@group(0) @binding(1) var<storage, read_write> out: array<${T}>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> wm: array<f32, ${WG}>;
var<workgroup> ws: array<f32, ${WG}>;
var<workgroup> wslot: atomic<u32>;

fn neg_inf() -> f32 {
    return bitcast<f32>(0xff800000u);
}

// s · exp(m_from - m_to), and 0 for s = 0 (avoids -inf - -inf = NaN for empty partials)
fn scaled(s: f32, m_from: f32, m_to: f32) -> f32 {
    if (s == 0.0) {
        return 0.0;
    }
    return s * exp(m_from - m_to);
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32${SGARG}) {
    ${SID}
    let row = wid.y * nwg.x + wid.x;
    let base = row * p.n;
    var m = neg_inf();
    var s = 0.0;
    if (row < p.rows) {
        for (var i = lid; i < p.n; i = i + ${WG}u) {
            let v = f32(x[base + i]);
            if (v > m) {
                s = scaled(s, m, v) + 1.0;
                m = v;
            } else if (v > neg_inf()) {
                s = s + exp(v - m);
            }
        }
    }
    let mine = vec2<f32>(m, s);
    ${COMBINE}
    let row_max = wm[0];
    let row_sum = ws[0];
    if (row < p.rows) {
        for (var i = lid; i < p.n; i = i + ${WG}u) {
            out[base + i] = ${T}(exp(f32(x[base + i]) - row_max) / row_sum);
        }
    }
}
