// matmul: out (M×N) = a (M×K) · b (K×N), row-major, any M, N, K.
// Bindings: 0 a (read), 1 b (read), 2 out (read_write), 3 params (uniform: M, N, K).
// Templates: T (element type), ACC (accumulator type: f32 for f16 inputs), ENABLE, TILE.
// Each workgroup computes a TILE×TILE block of out, staging TILE×TILE blocks of a and b in
// workgroup memory; edges are padded with zeros so no shape needs to be a tile multiple.
${ENABLE}

struct Params {
    M: u32,
    N: u32,
    K: u32,
}

@group(0) @binding(0) var<storage, read> a: array<${T}>;
@group(0) @binding(1) var<storage, read> b: array<${T}>;
@group(0) @binding(2) var<storage, read_write> out: array<${T}>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> ta: array<array<${ACC}, ${TILE}>, ${TILE}>;
var<workgroup> tb: array<array<${ACC}, ${TILE}>, ${TILE}>;

@compute @workgroup_size(${TILE}, ${TILE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wid.y * ${TILE}u + lid.y;
    let col = wid.x * ${TILE}u + lid.x;
    var acc: ${ACC} = ${ACC}(0);
    let tiles = (p.K + ${TILE}u - 1u) / ${TILE}u;
    for (var t = 0u; t < tiles; t = t + 1u) {
        let ka = t * ${TILE}u + lid.x;
        let kb = t * ${TILE}u + lid.y;
        var va: ${ACC} = ${ACC}(0);
        var vb: ${ACC} = ${ACC}(0);
        if (row < p.M && ka < p.K) {
            va = ${ACC}(a[row * p.K + ka]);
        }
        if (col < p.N && kb < p.K) {
            vb = ${ACC}(b[kb * p.N + col]);
        }
        ta[lid.y][lid.x] = va;
        tb[lid.y][lid.x] = vb;
        workgroupBarrier();
        for (var k = 0u; k < ${TILE}u; k = k + 1u) {
            acc = acc + ta[lid.y][k] * tb[k][lid.x];
        }
        workgroupBarrier();
    }
    if (row < p.M && col < p.N) {
        out[row * p.N + col] = ${T}(acc);
    }
}
