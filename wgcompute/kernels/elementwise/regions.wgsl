// region_copy: out[o_out + Σ i_d·s_out_d] = a[o_a + Σ i_d·s_a_d] for every index i of a
// region (sizes sh_d): a strided read into a strided place of out, so that concatenations,
// stacks, rolls and flips write parts of one output. Elements of out outside the region are
// left as they are.
// Bindings: 0 a (read), 1 out (read_write; atomic u32 words for one-byte dtypes, whose four
// lanes share a word: each invocation clears and sets its own lane), 2 params (uniform: n
// (region elements), then the sizes, offsets and strides of layout.uniform_fields).
// Templates: T (the item as bits: u32, vec2<u32>, vec4<u32>), WG (workgroup size), U
// (items per invocation), PACKED (items of 1 or 2 bytes: LANES per word, BITS each, MASK),
// DIMS (uniform fields), HEAD (once per invocation) and INDEX (per item: statements setting
// i_a and i_o for region element i; layout.stepped_index_wgsl's, or index_wgsl's per item).
struct Params {
    n: u32,
${DIMS}
}

#if PACKED
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<atomic<u32>>;
#else
@group(0) @binding(0) var<storage, read> a: array<${T}>;
@group(0) @binding(1) var<storage, read_write> out: array<${T}>;
#endif
@group(0) @binding(2) var<uniform> p: Params;

#include "elementwise/items_main.wgsl"
#for line in INDEX
        ${line}
#endfor
#if PACKED
        let v = (a[i_a / ${LANES}u] >> ((i_a % ${LANES}u) * ${BITS}u)) & ${MASK}u;
        let shift = (i_o % ${LANES}u) * ${BITS}u;
        atomicAnd(&out[i_o / ${LANES}u], ~(${MASK}u << shift));
        atomicOr(&out[i_o / ${LANES}u], v << shift);
#else
        out[i_o] = a[i_a];
#endif
    }
}
