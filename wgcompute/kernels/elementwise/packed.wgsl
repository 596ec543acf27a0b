// Packed elements (u8 and bool): four to a u32 word, element e in byte e % 4 (the first in
// the low byte), so that a kernel writing them writes whole words. Included by the
// elementwise, broadcast and astype templates where a dtype is packed; a lane's value is
// 0..255 (bool: 0 or 1). The x4 forms take four words at once (vectorized paths).
fn lane8(word: u32, e: u32) -> u32 {
    return (word >> ((e % 4u) * 8u)) & 0xffu;
}

fn put8(v: u32, e: u32) -> u32 {
    return (v & 0xffu) << ((e % 4u) * 8u);
}

fn lane8x4(words: vec4<u32>, l: u32) -> vec4<u32> {
    return (words >> vec4<u32>(l * 8u)) & vec4<u32>(0xffu);
}

fn put8x4(v: vec4<u32>, l: u32) -> vec4<u32> {
    return (v & vec4<u32>(0xffu)) << vec4<u32>(l * 8u);
}
