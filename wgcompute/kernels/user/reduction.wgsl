// A user's ReductionKernel: every output element o reduces r mapped elements j (the inputs
// read at flat index o·r + j of their kept-then-reduced axes, see ReductionKernel) with the
// user's reduce expression, a workgroup-memory tree per workgroup.
// Modes: "direct" and "single" (one workgroup per output, post-map into out; "direct" is
// the one that plans further passes, "single" one of them), "partial" (workgroup g
// reduces part g % parts of output g / parts, chunk elements, into partial g) and "merge"
// (one workgroup per output reduces its parts partials, then post-maps into out).
// Bindings: the array inputs (read; merge: the partials), out (read_write), params (uniform).
// Params: nout (outputs), r (elements per output), parts, chunk, then the inputs' sizes,
//   offsets and strides (wgcompute/kernels/core/layout.py), then each scalar as u_<name>.
// Templates: ENABLE, ALIASES, PREAMBLE, FIELDS, STORAGE, UB, PACKED, MODE, R (the reduce
//   type), OT (the output's body type), OUT (its name), WG, IDENTITY, REDUCE, MAP, POST,
//   SCALARS (let lines of the scalars), OP_PARAMS / OP_ARGS (the map's inputs), INDEX,
//   OUT_ELEM (out's storage element), OUT_KIND ("bool" for a bool output).
#include "user/params.wgsl"

${PREAMBLE}

var<workgroup> wgc_acc: array<${R}, ${WG}>;

fn wgc_reduce(a: ${R}, b: ${R}) -> ${R} {
    return ${REDUCE};
}
#if MODE != "merge"

fn wgc_map(j: u32${OP_PARAMS}) -> ${R} {
#for line in SCALARS
    ${line}
#endfor
    return ${MAP};
}

fn wgc_element(o: u32, j: u32) -> ${R} {
    let g = o * p.r + j;
#for line in INDEX
    ${line}
#endfor
    return wgc_map(j${OP_ARGS});
}
#endif
#if MODE != "partial"

fn wgc_post(a: ${R}) -> ${OT} {
#for line in SCALARS
    ${line}
#endfor
    var ${OUT}: ${OT};
    {
        ${POST}
    }
    return ${OUT};
}

// the output as its storage word: a bool as 0 or 1 (u8 and bool outputs are written as u32
// and packed by a last astype pass)
fn wgc_store(v: ${OT}) -> ${OUT_ELEM} {
#if OUT_KIND == "bool"
    return select(0u, 1u, v);
#else
    return v;
#endif
}
#endif

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = wid.y * nwg.x + wid.x;
    var acc: ${R} = ${IDENTITY};
#if MODE == "merge"
    let o = g;
    if (o < p.nout) {
        for (var k = lid; k < p.parts; k = k + ${WG}u) {
            acc = wgc_reduce(acc, wgc_in_wgc_part[o * p.parts + k]);
        }
    }
#else
    let o = g / p.parts;
    let k = g % p.parts;
    if (o < p.nout) {
        let end = min(p.r, (k + 1u) * p.chunk);
        for (var j = k * p.chunk + lid; j < end; j = j + ${WG}u) {
            acc = wgc_reduce(acc, wgc_element(o, j));
        }
    }
#endif
    // every invocation reaches the barriers (no early return above)
    wgc_acc[lid] = acc;
    workgroupBarrier();
    for (var s = ${WG}u / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            wgc_acc[lid] = wgc_reduce(wgc_acc[lid], wgc_acc[lid + s]);
        }
        workgroupBarrier();
    }
    if (lid == 0u && o < p.nout) {
#if MODE == "partial"
        wgc_out[g] = wgc_acc[0];
#else
        wgc_out[o] = wgc_store(wgc_post(wgc_acc[0]));
#endif
    }
}
