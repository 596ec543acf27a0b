// astype: out[i] = conv(x[i]) (the conversion), or astype_check: the smallest i whose
// bad(x[i]) holds, into out[0] by atomicMin. Filled in by wgcompute/kernels/cast.py.
// Bindings: 0 x (read), 1 out (read_write), 2 params (uniform: n = items, total = elements).
// Templates: ENABLE, XT (x's array element: its WGSL type, u32 words for packed dtypes), OT
//   (out's array element: its WGSL type, u32 words for packed dtypes, atomic<u32> for the
//   check), W (the work type values are loaded as: f32 for f16, i32 or u32 for packed
//   dtypes), LOAD (element i of x as W), FN (conv or bad), ITEM (one item: an element, or a
//   word of packed results), WG, U, PACKED (x or out is packed: packed.wgsl's lane_* and
//   put_* read and write its lanes).
// An item is one element (a word of lanes for a packed output, so no two invocations write
// one word); invocation lid of a workgroup handles items base + lid + j*WG (j < U).
${ENABLE}

struct Params {
    n: u32,
    total: u32,
}

@group(0) @binding(0) var<storage, read> x: array<${XT}>;
@group(0) @binding(1) var<storage, read_write> out: array<${OT}>;
@group(0) @binding(2) var<uniform> p: Params;
#if PACKED

#include "elementwise/packed.wgsl"
#endif

fn load(i: u32) -> ${W} {
    ${LOAD}
}

${FN}

#include "elementwise/items_main.wgsl"
        ${ITEM}
    }
}
