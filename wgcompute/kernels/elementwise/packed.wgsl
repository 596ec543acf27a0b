// Packed elements (u8, s8 and bool four to a u32 word; s16 and u16 two): element e in lane
// e % (32 / bits), the first in the low bits, so that a kernel writing them writes whole
// words. Included wherever a dtype is packed; `bits` is the element's width (8 or 16). A
// lane reads as u32 (lane_u: u8, u16, bool) or as i32, its sign extended (lane_s: s8, s16);
// put_u / put_s keep a value's low `bits` (integers wrap as numpy's do). The x4 forms take
// lane l of four words at once (vectorized paths).
fn lane_u(word: u32, e: u32, bits: u32) -> u32 {
    return extractBits(word, (e % (32u / bits)) * bits, bits);
}

fn lane_s(word: u32, e: u32, bits: u32) -> i32 {
    return extractBits(bitcast<i32>(word), (e % (32u / bits)) * bits, bits);
}

fn put_u(v: u32, e: u32, bits: u32) -> u32 {
    return insertBits(0u, v, (e % (32u / bits)) * bits, bits);
}

fn put_s(v: i32, e: u32, bits: u32) -> u32 {
    return put_u(bitcast<u32>(v), e, bits);
}

fn lane_ux4(words: vec4<u32>, l: u32, bits: u32) -> vec4<u32> {
    return extractBits(words, l * bits, bits);
}

fn lane_sx4(words: vec4<u32>, l: u32, bits: u32) -> vec4<i32> {
    return extractBits(bitcast<vec4<i32>>(words), l * bits, bits);
}

fn put_ux4(v: vec4<u32>, l: u32, bits: u32) -> vec4<u32> {
    return insertBits(vec4<u32>(0u), v, l * bits, bits);
}

fn put_sx4(v: vec4<i32>, l: u32, bits: u32) -> vec4<u32> {
    return put_ux4(bitcast<vec4<u32>>(v), l, bits);
}
