// Elementwise kernels: out[i] = op(a[i], b[i]) (binary) or op(a[i]) (unary).
// Bindings: 0 a (read), [1 b (read)], then out (read_write), then params (uniform).
// Params: n (items in this launch), p0 (scalar).
// Templates: T (WGSL scalar type), V (item type: vec4<T> for 2- and 4-byte types, T for 8-byte
//            ones; packed items are vec4<u32>: four words of N_LANES lanes), OV (op's item
//            type: V, or vec4<T> of one lane of each word), ENABLE, WG (workgroup size),
//            U (items per invocation), EXPR (op on x, y, p.p0), ARGS / OP_ARGS / CALL
//            (apply's and op's signatures and apply's arguments), OPERANDS (x, y as op
//            takes them), PACKED (1- and 2-byte integers, bool: apply runs PUT, op on lane l
//            of each word read by packed.wgsl's functions and repacked, for each lane).
// An item is a vector where the type allows: buffers are allocated in 16-byte multiples, so
// the last vector may run into padding, which is computed and never read back. Invocation
// lid of a workgroup handles items base + lid + j*WG (j < U): each load stays coalesced.
// The 1-D index folds over a 2-D grid, so any n fits under 65,535 workgroups per dimension.
${ENABLE}

struct Params {
    n: u32,
    p0: ${PT},
}

${BINDINGS}
@group(0) @binding(${UB}) var<uniform> p: Params;
#if PACKED

#include "elementwise/packed.wgsl"
#endif

fn op(${OP_ARGS}) -> ${OV} {
    return ${EXPR};
}

fn apply(${ARGS}) -> ${V} {
#if PACKED
    var r = ${V}(0u);
    for (var l = 0u; l < ${N_LANES}u; l = l + 1u) {
        r = r | ${PUT};
    }
    return r;
#else
    return op(${OPERANDS});
#endif
}

#include "elementwise/items_main.wgsl"
        out[i] = apply(${CALL});
    }
}
