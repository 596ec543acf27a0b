// where: out[g] = condition[g] ? x1[g] : x2[g], the three operands broadcast to the output's
// shape as numpy does: an operand of the output's size ("full") is read at the output's own
// index, the others through their element strides (0 along the dimensions they are
// broadcast over). Filled in by wgcompute/kernels/elementwise/where.py.
// Bindings: 0 condition (read; bool, four a u32 word), 1 x1, 2 x2 (read), 3 out (read_write),
//   4 params (uniform).
// Params: n (items in this launch), start (the output element this launch begins at), total
//   (output elements in all), then the coalesced sizes and each strided operand's offset and
//   strides (see wgcompute/kernels/core/layout.py).
// Templates: ENABLE, AT (x1's, x2's and out's array element: their WGSL type, or u32 words of
//   LANES elements of BITS bits), PACKED (x1, x2 and out are packed), DIMS (the size and stride
//   fields), INDEX (the statements setting i_<name> from g), C, X1, X2 (element e's index
//   into each operand: e for a full one, i_<name> for a strided one), WG, U; STEPPED (an
//   unpacked output: HEAD decodes an invocation's first element once, ITEM sets i_<name>
//   per item and carries to the next; INDEX is then empty).
// An item is one element (one word of LANES for a packed output, so that no two invocations
// write one word); a launch's first element is a multiple of 1024 (whole words), and the
// full operands are bound from it. Invocation lid of a workgroup handles items
// base + lid + j*WG (j < U).
${ENABLE}

struct Params {
    n: u32,
    start: u32,
    total: u32,
${DIMS}
}

@group(0) @binding(0) var<storage, read> condition: array<u32>;
@group(0) @binding(1) var<storage, read> x1: array<${AT}>;
@group(0) @binding(2) var<storage, read> x2: array<${AT}>;
@group(0) @binding(3) var<storage, read_write> out: array<${AT}>;
@group(0) @binding(4) var<uniform> p: Params;

#include "elementwise/packed.wgsl"

#if not STEPPED
// element e of this launch (global index g = p.start + e)
fn pick(e: u32) -> ${AT} {
    let g = p.start + e;
#for line in INDEX
    ${line}
#endfor
#if PACKED
    return select(lane_u(x2[${X2} / ${LANES}u], ${X2}, ${BITS}u),
                  lane_u(x1[${X1} / ${LANES}u], ${X1}, ${BITS}u),
                  lane_u(condition[${C} / 4u], ${C}, 8u) != 0u);
#else
    return select(x2[${X2}], x1[${X1}], lane_u(condition[${C} / 4u], ${C}, 8u) != 0u);
#endif
}
#endif

#include "elementwise/items_main.wgsl"
#if PACKED
        var word = 0u;
        for (var l = 0u; l < ${LANES}u; l = l + 1u) {
            if (p.start + i * ${LANES}u + l < p.total) {
                word = word | put_u(pick(i * ${LANES}u + l), l, ${BITS}u);
            }
        }
        out[i] = word;
#elif STEPPED
        let e = i;
#for line in ITEM
        ${line}
#endfor
        out[i] = select(x2[${X2}], x1[${X1}], lane_u(condition[${C} / 4u], ${C}, 8u) != 0u);
#else
        out[i] = pick(i);
#endif
    }
}
