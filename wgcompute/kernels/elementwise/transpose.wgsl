// transpose: out (C×R) = a (R×C) transposed, row-major.
// Bindings: 0 a (read), 1 out (read_write), 2 params (uniform: R, C, and TX, TY: tiles
//   along C and R).
// Templates: ENABLE, T (element type), TILE (tile edge), ROWS (rows a workgroup moves per pass).
// A TILE×ROWS workgroup reads a TILE×TILE tile row by row (coalesced), keeps it in workgroup
// memory padded by one column (no bank conflicts on the transposed read), and writes it
// back row by row of out (coalesced again). Edges are guarded: any R and C. Workgroup
// (wid.y · nwg.x + wid.x) moves tile (t % TX, t / TX): the grid folds over x and y, as
// every 1-D grid does, so that neither dimension passes the adapter's limit.
${ENABLE}

struct Params {
    R: u32,
    C: u32,
    TX: u32,
    TY: u32,
}

@group(0) @binding(0) var<storage, read> a: array<${T}>;
@group(0) @binding(1) var<storage, read_write> out: array<${T}>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> tile: array<array<${T}, ${TILE}u + 1u>, ${TILE}>;

@compute @workgroup_size(${TILE}, ${ROWS})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = wid.y * nwg.x + wid.x;
    let tx = t % p.TX;
    let ty = t / p.TX;
    if (ty >= p.TY) {  // a folded grid's last workgroups (the whole workgroup returns)
        return;
    }
    let c = tx * ${TILE}u + lid.x;
    for (var j = lid.y; j < ${TILE}u; j = j + ${ROWS}u) {
        let r = ty * ${TILE}u + j;
        if (r < p.R && c < p.C) {
            tile[j][lid.x] = a[r * p.C + c];
        }
    }
    workgroupBarrier();
    let oc = ty * ${TILE}u + lid.x;  // a column of out is a row of a
    for (var j = lid.y; j < ${TILE}u; j = j + ${ROWS}u) {
        let orow = tx * ${TILE}u + j;
        if (orow < p.C && oc < p.R) {
            out[orow * p.R + oc] = tile[lid.x][j];
        }
    }
}
