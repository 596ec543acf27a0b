// Elementwise kernels with numpy broadcasting: out[g] = op(a[i_a(g)], b[i_b(g)]), where an
// operand of the output's shape ("full") is read at the output's own index and the others
// through their element strides (0 along the dimensions they are broadcast over).
// Bindings: 0 a (read), [1 b (read)], then out (read_write), then params (uniform).
// Params: n (items in this launch), start (the output element this launch begins at),
//   total (output elements in all), then the coalesced sizes and each strided operand's
//   offset and strides (see wgcompute/kernels/layout.py).
// Templates: ENABLE, T (WGSL scalar type: i32 or u32 for packed dtypes, whose lanes are
//   unpacked), AT (array element: T, or u32 words of lanes), DIMS (the size and stride
//   fields), BINDINGS, UB, WG, U (items per invocation), ARGS (op's signature), BODY (op's
//   statements on x, y), ITEM (the lines of one item: one element, or one u32 word of
//   packed elements), HELPERS
//   (functions op calls), PACKED (an operand or the output is packed: packed.wgsl's lane_*
//   and put_* read and write its lanes), HEAD (lines run once per invocation: where the
//   strided dims are few, its first item's index is decoded there and each item only adds
//   the step k0.. between items, see layout.stepped_index_wgsl).
// The output (and every full operand) is bound per launch at the same element range; the
// broadcast operands are bound whole, or, larger than a binding, at a window around the
// elements the launch reads (their offset o<name> then counts from the window). An item is
// one element (one word of lanes for packed dtypes, so that no two invocations write the
// same word); a launch's first element is a multiple of 1024, so a packed launch starts on
// a word.
${ENABLE}

struct Params {
    n: u32,
    start: u32,
    total: u32,
${DIMS}
}

${BINDINGS}
@group(0) @binding(${UB}) var<uniform> p: Params;
#if PACKED

#include "elementwise/packed.wgsl"
#endif

${HELPERS}
fn op(${ARGS}) -> ${T} {
    ${BODY}
}

#include "elementwise/items_main.wgsl"
#for line in ITEM
        ${line}
#endfor
    }
}
