// roll: out[j0, j1, ...] = x[offset + ((j0 - s0) mod d0)·e0 + ((j1 - s1) mod d1)·e1 + ...]:
// a cyclic shift (e the contiguous strides) or a strided copy (s = 0, e a view's strides,
// negative ones walking backwards), elements moved as whole words (T: u32 for 4-byte
// dtypes, vec2<u32> for 8-byte ones, vec4<u32> for 16-byte ones). Bindings: 0 x (read),
// 1 out (read_write), 2 params (uniform: total, offset, d*, s* with 0 <= s < d, e*).
// Templates: T, WG, DIMS.

struct Params {
    total: u32,
    offset: i32,
#for k in range(DIMS)
    d${k}: u32,
    s${k}: u32,
    e${k}: i32,
#endfor
}

@group(0) @binding(0) var<storage, read> x: array<${T}>;
@group(0) @binding(1) var<storage, read_write> out: array<${T}>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (i >= p.total) {
        return;
    }
    var rest = i;
    var src = p.offset;
#for k in range(DIMS - 1, -1, -1)
    let j${k} = rest % p.d${k};
    rest = rest / p.d${k};
    src = src + i32((j${k} + p.d${k} - p.s${k}) % p.d${k}) * p.e${k};
#endfor
    out[i] = x[u32(src)];
}
