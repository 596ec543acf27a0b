// Reductions sum, max, min, mean, argmax over trailing axes ("rows" mode), over one block of
// axes with kept axes after it ("cols" mode; "colpart" for the first of two steps), or over
// everything ("partial" then "finish" modes; argmax: "full" mode). Filled in by
// wgcompute/kernels/reduce.py.
// Bindings: 0 x (read), 1 out (read_write; array<atomic<u32>> in full mode, the partials
//   array<ACC> in partial and colpart modes), 2 params (uniform).
// Params: rows (rows of this launch), n (elements per row, or in all), phase (full mode:
//   0 init, 1 accumulate, 2 argmax indices, 3 finalize; other modes ignore it), groups
//   (workgroups of the accumulate phases / partials), xoff (rows mode: where this launch's
//   first row starts in its window of x), first (the first row, partial slot or, full mode,
//   element index of this launch: x past the binding limit runs in windows), total (finish,
//   cols: elements of the whole reduction, mean's divisor), inner / parts / chunk (cols
//   modes: output o is ((q·parts + part)·inner + c) and reads rows part·chunk.. of n, inner
//   elements apart, from q·n·inner + c), ident (the reduction's identity, as ACC).
// Partial mode: workgroup g's grid-stride pass over x into out[first + g]; finish mode: one
// workgroup merges the partials into out[0].
// Templates: ENABLE, ACC (accumulator type), XT (x's array element: T, vec4<T>, or u32 words of
//   four u8), OT (out's element in rows mode), WG (workgroup size), MERGE (combine two VI),
//   NONE, ELEMVI, VALUE (an element as a VI, and a merged VI's result), FNS (more functions),
//   ELEM (element i as ACC), LOAD4 (vec4 item q as vec4<ACC>, vector path only), SCAN (one
//   invocation's strided pass), WGREDUCE (subgroup or workgroup-memory reduction), MAIN.
// Rows mode: one workgroup per row (RPW rows for a packed output, whose lanes share a word).
// Cols modes: 64 outputs per workgroup, each read by 4 invocations (a slice of rows each)
// that meet in workgroup memory; packed outputs (1- and 2-byte) share words there.
// Full mode (argmax): grid-stride partials per workgroup combined into out's padding words 1
// and 2 (buffers are allocated in 16-byte multiples) by compare-and-swap; phase 3 writes word 0.
${ENABLE}

struct Params {
    rows: u32,
    n: u32,
    phase: u32,
    groups: u32,
    xoff: u32,
    first: u32,
    total: u32,
    inner: u32,
    parts: u32,
    chunk: u32,
    ident: ${ACC},
}

struct VI {
    v: ${ACC},
    i: u32,
}

@group(0) @binding(0) var<storage, read> x: array<${XT}>;
@group(0) @binding(1) var<storage, read_write> out: array<${OT}>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> wv: array<${ACC}, ${WG}>;
var<workgroup> wi: array<u32, ${WG}>;
var<workgroup> wslot: atomic<u32>;

// the index of "no element" (f32 max and min: no nan seen, see elem_vi)
const NONE: u32 = ${NONE};

fn merge(a: VI, b: VI) -> VI {
    ${MERGE}
}

// element v (index i) as a VI; f32 max and min keep its magnitude bits in i instead, so
// that a nan among the merged elements shows in i and value() returns nan
fn elem_vi(v: ${ACC}, i: u32) -> VI {
    ${ELEMVI}
}

fn value(r: VI) -> ${ACC} {
    ${VALUE}
}

${FNS}
fn elem(i: u32) -> ${ACC} {
    ${ELEM}
}

${LOAD4}

// One invocation's pass over elements start, start + stride, ... < count of the row at base
// (indices are relative to base), merged into one VI.
fn scan(base: u32, count: u32, start: u32, stride: u32) -> VI {
    var acc = VI(p.ident, NONE);
    ${SCAN}
    return acc;
}

// The workgroup's merge of every invocation's VI; all invocations get the result.
fn reduce_wg(lid: u32, sid: u32, mine: VI) -> VI {
    ${WGREDUCE}
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32${SGARG}) {
    let g = wid.y * nwg.x + wid.x;
    ${MAIN}
}
