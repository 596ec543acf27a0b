// A fused elementwise program: a DAG of op table rows evaluated per output element, writing
// one or several of its values (kernels/elementwise/fused.py renders it for one DAG).
// Bindings: the inputs x0.. (read), then the outputs out0.. (read_write), then params.
// Params: n (items in this launch), start (the output element this launch begins at), total
//   (output elements in all), opaque (always 0: see below), the scalars s0.. in their
//   dtypes, then the coalesced sizes and each strided input's offset and strides (and the
//   step k0.. between an invocation's items, where HEAD decodes once).
// Templates: ENABLE, SCALARS and DIMS (uniform fields), BINDINGS, UB, WG, U (items per
//   invocation), PACKED (an input or output is packed: packed.wgsl's lane8 and put8),
//   WORDS (the item is four elements: a packed output is written a u32 word at a time),
//   WORD_VARS and WORD_STORES (the packed outputs' words of an item and their stores),
//   HELPERS, FUNCTIONS (one fn per distinct row application), HEAD (once per invocation:
//   the stepped index decode of its first item, layout.stepped_index_wgsl), ELEMENT (the
//   lines computing one element's values and storing them); with WORDS, LANE_START and
//   LANE_NEXT (the lanes' coordinates: from the item's, then one element on,
//   layout.lane_index_wgsl) and ADVANCE (the item's coordinates to the next item's); VEC
//   (4-byte dtypes, every input flat: the item is a vec4 of four elements), VEC_HEAD (its
//   inputs' loads xv.., its outputs' vectors ov..) and VEC_STORES (their stores: only the
//   elements before p.total).
// Every row's result goes through keep32 / keep64, an exclusive or with p.opaque: a value the
// compiler cannot know, so it cannot contract one row's product into the next row's sum (an
// fma rounds once where separate kernels round twice). f16 values are rounded to f16 between
// rows (computed in f32, as the one-op kernels do) by round16: NVIDIA's compiler removed a
// bare conversion to f16 and back (f32(f16(x)) taken as x).
${ENABLE}

struct Params {
    n: u32,
    start: u32,
    total: u32,
    opaque: u32,
${SCALARS}
${DIMS}
}

${BINDINGS}
@group(0) @binding(${UB}) var<uniform> p: Params;
#if PACKED

#include "elementwise/packed.wgsl"
#endif

fn keep32(v: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(v) ^ p.opaque);
}
#if KEEP16

// x rounded to binary16 (to nearest, ties to even) and kept as the f32 of that value, as
// storing it as f16 rounds it: in integer arithmetic on its bits where binary16 is normal (no
// float operation a compiler could remove), through a scale by 2^24 where it is subnormal
// (quantizeToF16 flushed those to 0 on lavapipe); nan stays, |x| >= 65520 is inf.
fn round16(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    let mag = bits & 0x7fffffffu;
    if (mag > 0x7f800000u) {
        return x;
    }
    if (mag >= 0x477ff000u) {
        return bitcast<f32>((bits & 0x80000000u) | 0x7f800000u);
    }
    if (mag < 0x38800000u) {
        return ldexp(round(ldexp(x, 24)), -24);
    }
    return bitcast<f32>((bits + 0xfffu + ((bits >> 13u) & 1u)) & 0xffffe000u);
}
#endif
#if KEEP64

fn keep64(v: f64) -> f64 {
    return bitcast<f64>(bitcast<u64>(v) ^ u64(p.opaque));
}
#endif

${HELPERS}
#for fn in FUNCTIONS
${fn}

#endfor
#include "elementwise/items_main.wgsl"
#if WORDS
#for line in WORD_VARS
        ${line}
#endfor
#for line in LANE_START
        ${line}
#endfor
        for (var l = 0u; l < 4u; l = l + 1u) {
            let e = i * 4u + l;
            let g = p.start + e;
            if (g < p.total) {
#for line in ELEMENT
                ${line}
#endfor
            }
#for line in LANE_NEXT
            ${line}
#endfor
        }
#for line in WORD_STORES
        ${line}
#endfor
#for line in ADVANCE
        ${line}
#endfor
#elif VEC
#for line in VEC_HEAD
        ${line}
#endfor
#for line in ELEMENT
        ${line}
#endfor
#for line in VEC_STORES
        ${line}
#endfor
#else
        let e = i;
        let g = p.start + e;
#for line in ELEMENT
        ${line}
#endfor
#endif
    }
}
