// A user's ElementwiseKernel: op() is the user's body over one element's inputs, returning
// every output; main() reads each array input at the element's index (its own for an input
// of the output's shape, through its strides when broadcast), or its scalar from p.
// Bindings: the array inputs (read), the outputs after the first (read_write), the first
//   output (read_write), then the params (uniform); numbered in that order from 0.
// Params: total (output elements), the broadcast inputs' sizes, offsets and strides (see
//   wgcompute/kernels/core/layout.py), then each scalar input as u_<name>.
// Templates: ENABLE, ALIASES (alias lines of the generic types), PREAMBLE (the user's
//   functions), FIELDS (name, type), STORAGE (binding, access, name, WGSL element), UB,
//   OUTS (name, body type), OUT_NAMES, OP_PARAMS (", x: f32, ..."), OP_ARGS (their read
//   expressions),
//   INDEX (lines setting the broadcast inputs' i_ indexes from g), BODY, WG, PACKED (a
//   packed dtype is read or written: packed.wgsl's lane_u and put_u), WORDS (an output is
//   packed: one invocation computes the four elements of one u32 word), WRITES (name,
//   packed kind "" / "u8" / "bool").
#include "user/params.wgsl"

struct WgcOuts {
#for o in OUTS
    ${o[0]}: ${o[1]},
#endfor
}

${PREAMBLE}

fn wgc_op(i: u32, n: u32${OP_PARAMS}) -> WgcOuts {
#for o in OUTS
    var ${o[0]}: ${o[1]};
#endfor
    {
        ${BODY}
    }
    return WgcOuts(${OUT_NAMES});
}

fn wgc_element(g: u32) -> WgcOuts {
#for line in INDEX
    ${line}
#endfor
    return wgc_op(g, p.total${OP_ARGS});
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let q = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
#if WORDS
    if (q * 4u >= p.total) {
        return;
    }
#for w in WRITES
#if w[1]
    var wgc_w_${w[0]} = 0u;
#endif
#endfor
    for (var e = 0u; e < 4u; e = e + 1u) {
        let g = q * 4u + e;
        if (g >= p.total) {
            break;
        }
        let r = wgc_element(g);
#for w in WRITES
#if w[1] == "u8"
        wgc_w_${w[0]} = wgc_w_${w[0]} | put_u(r.${w[0]}, g, 8u);
#elif w[1] == "bool"
        wgc_w_${w[0]} = wgc_w_${w[0]} | put_u(select(0u, 1u, r.${w[0]}), g, 8u);
#else
        wgc_out_${w[0]}[g] = r.${w[0]};
#endif
#endfor
    }
#for w in WRITES
#if w[1]
    wgc_out_${w[0]}[q] = wgc_w_${w[0]};
#endif
#endfor
#else
    if (q >= p.total) {
        return;
    }
    let r = wgc_element(q);
#for w in WRITES
    wgc_out_${w[0]}[q] = r.${w[0]};
#endfor
#endif
}
