// The sort family's programs, sharing one order-preserving key of an element's bits:
//   count    a radix pass's digit histogram per segment of tiles (hist[segment * D + d])
//   scatter  a radix pass's stable move of each tile's records to their digit's place
//   extract  sorted records -> values (W words each) or row-local indices (payload % rowlen)
//   flag     out[i] = 1 where sorted element i starts a group of equal values, else 0 (and
//            out[n] = 0)
//   search   searchsorted: out[j] = where v[j] goes in the sorted x (binary search)
//   gather   out[j] = x[v[j]]
//   okey     argmin's keys: order-reversing u32 (64-bit: int64) keys, nan the largest
//   nonzero  out[i] = 1 where element i is not zero (nan is not zero), else 0
// Elements are bits, never values: W u32 words each (1: 32-bit dtypes, 2: f64 and s64, low
// word first), so a sort moves nan payloads and -0.0 exactly; only key_of reads them as numbers.
// A record is the element's W words and, with PAY, a payload word: its index in x (rows of
// rowlen elements: row = payload / rowlen). FIRST: the source is x itself (the payload is the
// element's index).
// Bindings: inputs from 0 (count, extract, flag, okey, nonzero: src; scatter: src, offs;
//   search, gather: x, v),
//   then the output, then the params uniform.
// Templates: STEP, KIND ("u", "i", "f", "c"), W, DESC (descending: the key's bits inverted), ROW
//   (count/scatter: the digit is the row's, not the key's), PAY, FIRST, SR and DR (words per
//   source / destination record), WG, ITEMS (elements per invocation), SHM (workgroup words),
//   SIDE ("left" or "right", search), SUB (subgroup scans) and SGARGS (their builtins), D
//   (count/scatter: the digits, 2^8 or 2^11), ROUNDS (scatter: 4-bit ranking rounds), and
//   FB, CW and LANES (scatter: the bits of a nibble counter, the words holding 16, their
//   indices), VEC (count/scatter: records of one source word, read as vec4s), TH (scatter:
//   one tile a segment of 8-bit digits, whose histograms it reads: th).
struct Params {
    n: u32,
    blocks: u32,
    shift: u32,
    word: u32,
    rowlen: u32,
    nv: u32,
    per: u32,
}

#if STEP == "search" or STEP == "gather"
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read> v: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;
#elif STEP == "scatter"
#if VEC
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
#else
@group(0) @binding(0) var<storage, read> src: array<u32>;
#endif
@group(0) @binding(1) var<storage, read> offs: array<u32>;
#if TH
@group(0) @binding(2) var<storage, read> th: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;
@group(0) @binding(4) var<uniform> p: Params;
#else
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;
#endif
#elif STEP == "count" and VEC
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;
#else
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;
#endif

const TILE: u32 = ${WG * ITEMS}u;

// A 32-bit float's key: -0.0 is +0.0 (equal elements keep their order in a stable sort) and
// every nan is above +inf.
fn fkey(b: u32) -> u32 {
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        return 0xffffffffu;
    }
    if (b == 0x80000000u) {
        return 0x80000000u;
    }
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

// The element's key: unsigned integers whose order is the elements' order (y the high word).
// Floats as fkey; complex numbers by their real part, then their imaginary part.
fn key_of(lo: u32, hi: u32) -> vec2<u32> {
#if KIND == "u"
    var k = vec2<u32>(lo, hi);
#elif KIND == "i" and W == 1
    var k = vec2<u32>(lo ^ 0x80000000u, 0u);
#elif KIND == "i"
    var k = vec2<u32>(lo, hi ^ 0x80000000u);
#elif KIND == "c"
    var k = vec2<u32>(fkey(hi), fkey(lo));
#elif W == 1
    var k = vec2<u32>(fkey(lo), 0u);
#else
    let mag = hi & 0x7fffffffu;
    var k = vec2<u32>(lo, hi | 0x80000000u);
    if (mag > 0x7ff00000u || (mag == 0x7ff00000u && lo != 0u)) {
        k = vec2<u32>(0xffffffffu, 0xffffffffu);
    } else if (hi == 0x80000000u && lo == 0u) {
        k = vec2<u32>(0u, 0x80000000u);
    } else if ((hi & 0x80000000u) != 0u) {
        k = ~vec2<u32>(lo, hi);
    }
#endif
#if DESC
    k = ~k;
#endif
    return k;
}

#if STEP == "count" or STEP == "scatter"
// the digit (D values) of record r: (low word, high word, payload)
fn digit(r: vec3<u32>) -> u32 {
#if ROW
    return ((r.z / p.rowlen) >> p.shift) & ${D - 1}u;
#else
    let k = key_of(r.x, r.y);
    return (select(k.x, k.y, p.word == 1u) >> p.shift) & ${D - 1}u;
#endif
}

#if not VEC
// record e of the source (VEC: the callers read vec4s themselves)
fn load(e: u32) -> vec3<u32> {
    let b = e * ${SR}u;
    var r = vec3<u32>(src[b], 0u, 0u);
#if W == 2
    r.y = src[b + 1u];
#endif
#if PAY and FIRST
    r.z = e;
#elif PAY
    r.z = src[b + ${W}u];
#endif
    return r;
}
#endif
#endif

#if STEP == "count"
// One histogram of D words. (Measured on an H200: 32 histograms, one per lane, so that no
// two invocations of a subgroup add to one word, made the count 30% slower, not faster.)
var<workgroup> hist: array<atomic<u32>, ${D}>;

// The histogram of a segment: p.per tiles from tile blk * p.per (the scatter runs through
// the same tiles in order)
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let blk = wid.y * nwg.x + wid.x;
    if (blk >= p.blocks) {
        return;
    }
#for k in range(D // WG)
    atomicStore(&hist[${k * WG}u + lid], 0u);
#endfor
    workgroupBarrier();
    for (var t = 0u; t < p.per; t = t + 1u) {
        let first = (blk * p.per + t) * TILE;
        if (first >= p.n) {
            break;
        }
        let count = min(TILE, p.n - first);
#if VEC
        // four records a load (measured on an H200: a pass's count 145 -> 86 us)
#for j in range(ITEMS // 4)
        if (${j * WG * 4}u + lid * 4u < count) {
            let v = src[first / 4u + ${j * WG}u + lid];
#for c in range(4)
            if (${j * WG * 4 + c}u + lid * 4u < count) {
                atomicAdd(&hist[digit(vec3<u32>(v[${c}], 0u, 0u))], 1u);
            }
#endfor
        }
#endfor
#else
#for j in range(ITEMS)
        if (${j * WG}u + lid < count) {
            atomicAdd(&hist[digit(load(first + ${j * WG}u + lid))], 1u);
        }
#endfor
#endif
    }
    workgroupBarrier();
#for k in range(D // WG)
    out[blk * ${D}u + ${k * WG}u + lid] = atomicLoad(&hist[${k * WG}u + lid]);
#endfor
}
#endif

#if STEP == "scatter"
// The staged records, or (while the records are in registers) the packed counters of a 4-bit
// ranking round: counter k * WG + t (at cidx of it) holds invocation t's counts of nibbles k
// (low 16 bits) and k + 8 (high 16 bits). (Measured on an H200: the counters in words of their
// own beside the tile, two barriers fewer a round, made the sort 30% slower: 21.6 KiB a
// workgroup instead of 12.4, fewer workgroups resident.)
var<workgroup> shm: array<u32, ${SHM}>;
var<workgroup> tot: array<u32, ${WG}>;
var<workgroup> shift: array<u32, ${D}>;
var<workgroup> gofs: array<u32, ${D}>;
var<workgroup> grp: array<u32, 16>;

// record q's first word: a word of padding after every 8 records, so that invocations
// reading their ITEMS consecutive records (8 * DR + 1 words apart, an odd number) hit
// different memory banks
fn at(q: u32) -> u32 {
    return q * ${DR}u + (q >> 3u);
}

fn stage(q: u32, r: vec3<u32>) {
    let a = at(q);
    shm[a] = r.x;
#if W == 2
    shm[a + 1u] = r.y;
#endif
#if PAY
    shm[a + ${W}u] = r.z;
#endif
}

fn staged(q: u32) -> vec3<u32> {
    let a = at(q);
    var r = vec3<u32>(shm[a], 0u, 0u);
#if W == 2
    r.y = shm[a + 1u];
#endif
#if PAY
    r.z = shm[a + ${W}u];
#endif
    return r;
}

// a counter's place: one word of padding after every 8 (the scan's invocations read 8
// consecutive counters each: unpadded, 8 of them would share a memory bank)
fn cidx(i: u32) -> u32 {
    return i + (i >> 3u);
}

// (the exclusive prefix sum of s over the workgroup's invocations, the sum of all); the
// caller passes a barrier before the next call (tot is read until then)
fn wg_scan(lid: u32, sid: u32, ssize: u32, s: u32) -> vec2<u32> {
#if SUB
    let incl = subgroupInclusiveAdd(s);
    if (sid == ssize - 1u) {
        tot[lid / ssize] = incl;
    }
    workgroupBarrier();
    var before = 0u;
    var total = 0u;
    for (var w = 0u; w < ${WG}u / ssize; w = w + 1u) {
        let t = tot[w];
        before = before + select(0u, t, w < lid / ssize);
        total = total + t;
    }
    return vec2<u32>(before + incl - s, total);
#else
    // 16 invocations scan 16 sums each, then every invocation adds the groups before its own
    tot[lid] = s;
    workgroupBarrier();
    if (lid < 16u) {
        var run = 0u;
        for (var i = lid * 16u; i < lid * 16u + 16u; i = i + 1u) {
            let t = tot[i];
            tot[i] = run;
            run = run + t;
        }
        grp[lid] = run;
    }
    workgroupBarrier();
    var before = tot[lid];
    var total = 0u;
    for (var g = 0u; g < 16u; g = g + 1u) {
        before = before + select(0u, grp[g], g < lid / 16u);
        total = total + grp[g];
    }
    return vec2<u32>(before, total);
#endif
}

// One tile of ``count`` records from ``first``, sorted stably by their digit in workgroup memory
// (rounds of 4-bit ranking, 2 for 8-bit digits and 3 for 11-bit ones: each invocation owns
// ITEMS consecutive records, read from the source by the first round (measured on an H200: 2%
// faster than staging the tile in stripes first), and counts their nibbles in registers; the
// counters are scanned nibble-major, invocation-minor), then written out to where their digit
// goes next (gofs) + their place among its records (shift: gofs less the digit's first place
// in the tile); then gofs moves past the tile's records of each digit.
fn sort_tile(lid: u32, sid: u32, ssize: u32, tile: u32, first: u32, count: u32) {
    var rec: array<vec3<u32>, ${ITEMS}>;
    var dg: array<u32, ${ITEMS}>;
    var rk: array<u32, ${ITEMS}>;
#if TH
    {
        // the count's histogram of this tile (one tile a segment, a digit an invocation): a
        // digit's first place in the sorted tile is the count of the digits below it
        let c = th[tile * ${D}u + lid];
        let sc = wg_scan(lid, sid, ssize, c);
        shift[lid] = gofs[lid] - sc.x;
        gofs[lid] = gofs[lid] + c;
    }
#endif
#if VEC
    // the invocation's records, four to a load
    var vv: array<vec4<u32>, ${ITEMS // 4}>;
#for k in range(ITEMS // 4)
    vv[${k}] = vec4<u32>(0u);
    if (lid * ${ITEMS}u + ${4 * k}u < count) {
        vv[${k}] = src[(first + lid * ${ITEMS}u) / 4u + ${k}u];
    }
#endfor
#endif
#for r in range(ROUNDS)
    // this invocation's count of each nibble so far, in registers: nibble k in the FB bits
    // from FB * k of the packed words (FB = 4 holds counts up to 15 of ITEMS <= 8 records, 8
    // up to 255); a record's rank among the invocation's records of its nibble is that count
    // before it (no read-modify-write of workgroup memory in program order)
    var cn${r} = vec${CW}<u32>(0u);
#for j in range(ITEMS)
    dg[${j}] = 256u;
    if (lid * ${ITEMS}u + ${j}u < count) {
#if r == 0 and VEC and PAY and FIRST
        rec[${j}] = vec3<u32>(vv[${j // 4}][${j % 4}], 0u, first + lid * ${ITEMS}u + ${j}u);
#elif r == 0 and VEC
        rec[${j}] = vec3<u32>(vv[${j // 4}][${j % 4}], 0u, 0u);
#elif r == 0
        rec[${j}] = load(first + lid * ${ITEMS}u + ${j}u);
#else
        rec[${j}] = staged(lid * ${ITEMS}u + ${j}u);
#endif
        let d = (digit(rec[${j}]) >> ${4 * r}u) & 15u;
        dg[${j}] = d;
        let lane = vec${CW}<u32>(d / ${32 // FB}u) == vec${CW}<u32>(${LANES});
        let sh = (d % ${32 // FB}u) * ${FB}u;
        let w = dot(select(vec${CW}<u32>(0u), cn${r}, lane), vec${CW}<u32>(1u));
        rk[${j}] = (w >> sh) & ${(1 << FB) - 1}u;
        cn${r} = cn${r} + select(vec${CW}<u32>(0u), vec${CW}<u32>(1u << sh), lane);
    }
#endfor
#if r > 0
    workgroupBarrier();  // the staged records are read: their words hold the counters now
#endif
#for k in range(8)
    shm[cidx(${k * WG}u + lid)] = ((cn${r}[${k * FB // 32}] >> ${k * FB % 32}u) & ${(1 << FB) - 1}u)
        | (((cn${r}[${(k + 8) * FB // 32}] >> ${(k + 8) * FB % 32}u) & ${(1 << FB) - 1}u) << 16u);
#endfor
    workgroupBarrier();
    {
        var s = 0u;
#for k in range(8)
        let v${k} = shm[cidx(lid * 8u + ${k}u)];
        shm[cidx(lid * 8u + ${k}u)] = s;
        s = s + v${k};
#endfor
        let sc = wg_scan(lid, sid, ssize, s);
#for k in range(8)
        shm[cidx(lid * 8u + ${k}u)] = shm[cidx(lid * 8u + ${k}u)] + sc.x;
#endfor
        // nibbles 8..15 come after all of 0..7: their lane adds the low lanes' total
        let low = sc.y & 0xffffu;
        workgroupBarrier();
#for j in range(ITEMS)
        if (dg[${j}] < 16u) {
            let w = shm[cidx((dg[${j}] & 7u) * ${WG}u + lid)];
            rk[${j}] = rk[${j}] + select(w & 0xffffu, (w >> 16u) + low, dg[${j}] >= 8u);
        }
#endfor
    }
    workgroupBarrier();  // the counters are read: the words take the records again
#for j in range(ITEMS)
    if (dg[${j}] < 16u) {
        stage(rk[${j}], rec[${j}]);
    }
#endfor
    workgroupBarrier();
#endfor
#if not TH
    // The tile is sorted by digit. Each invocation takes its ITEMS consecutive records again: a
    // digit's first place in the tile is where it differs from the record before, and there
    // its shift (where its records go, less that place) is written; its last place is where
    // it differs from the record after (0xffffffff: no record).
    var ds: array<u32, ${ITEMS}>;
    var prev = 0xffffffffu;
    if (lid > 0u && lid * ${ITEMS}u < count) {
        prev = digit(staged(lid * ${ITEMS}u - 1u));
    }
#for j in range(ITEMS)
    ds[${j}] = 0xffffffffu;
    if (lid * ${ITEMS}u + ${j}u < count) {
        ds[${j}] = digit(staged(lid * ${ITEMS}u + ${j}u));
        if (ds[${j}] != prev) {
            shift[ds[${j}]] = gofs[ds[${j}]] - (lid * ${ITEMS}u + ${j}u);
        }
        prev = ds[${j}];
    }
#endfor
    var after = 0xffffffffu;
    if ((lid + 1u) * ${ITEMS}u < count) {
        after = digit(staged((lid + 1u) * ${ITEMS}u));
    }
    workgroupBarrier();
#endif
    // written in stripes: neighbouring invocations write neighbouring places (measured on an
    // H200: each invocation writing its own consecutive records, held from above, made the
    // scatter twice as slow)
#for j in range(ITEMS)
    if (${j * WG}u + lid < count) {
        let q = ${j * WG}u + lid;
        let r = staged(q);
        let o = (shift[digit(r)] + q) * ${DR}u;
        out[o] = r.x;
#if W == 2
        out[o + 1u] = r.y;
#endif
#if PAY
        out[o + ${W}u] = r.z;
#endif
    }
#endfor
#if not TH
    workgroupBarrier();  // every record has read its digit's shift
#for j in range(ITEMS)
#if j + 1 < ITEMS
    if (ds[${j}] != 0xffffffffu && ds[${j}] != ds[${j + 1}]) {
#else
    if (ds[${j}] != 0xffffffffu && ds[${j}] != after) {
#endif
        gofs[ds[${j}]] = shift[ds[${j}]] + lid * ${ITEMS}u + ${j + 1}u;
    }
#endfor
#endif
}

// The tiles of a segment in order; offs: where each digit of the segment goes.
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32${SGARGS}) {
#if not SUB
    let sid = 0u;
    let ssize = 1u;
#endif
    let blk = wid.y * nwg.x + wid.x;
    if (blk >= p.blocks) {
        return;
    }
#for k in range(D // WG)
    gofs[${k * WG}u + lid] = offs[blk * ${D}u + ${k * WG}u + lid];
#endfor
    for (var t = 0u; t < p.per; t = t + 1u) {
        let first = (blk * p.per + t) * TILE;
        if (first >= p.n) {
            break;
        }
        workgroupBarrier();  // the last tile's records have left the workgroup memory
        sort_tile(lid, sid, ssize, blk * p.per + t, first, min(TILE, p.n - first));
    }
}
#endif

#if STEP == "extract" or STEP == "flag" or STEP == "okey" or STEP == "nonzero"
fn src_key(i: u32) -> vec2<u32> {
#if W == 2
    return key_of(src[i * 2u], src[i * 2u + 1u]);
#else
    return key_of(src[i], 0u);
#endif
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
#if STEP == "flag"
    if (e == p.n) {
        out[e] = 0u;  // a last word, so that the flags' exclusive scan ends with their sum
    }
#endif
    if (e >= p.n) {
        return;
    }
#if STEP == "extract" and PAY
    out[e] = src[e * ${SR}u + ${W}u] % p.rowlen;
#elif STEP == "extract"
    out[e * ${W}u] = src[e * ${SR}u];
#if W == 2
    out[e * 2u + 1u] = src[e * ${SR}u + 1u];
#endif
#elif STEP == "okey"
    // argmin as an argmax: the inverted key (DESC), but nan still the largest (the first nan
    // wins, as numpy's); 64-bit keys as int64 bits (the high word's top bit flipped)
    var k = src_key(e);
#if KIND == "f"
    if (all(k == key_of(0xffffffffu, 0xffffffffu))) {
        k = vec2<u32>(0xffffffffu, 0xffffffffu);
    }
#endif
#if W == 2
    out[e * 2u] = k.x;
    out[e * 2u + 1u] = k.y ^ 0x80000000u;
#else
    out[e] = k.x;
#endif
#elif STEP == "nonzero"
    out[e] = select(0u, 1u, any(src_key(e) != key_of(0u, 0u)));
#else
    // a group starts at a row's first element and wherever the key changes; a nan (a complex
    // number with a nan part) is never equal to anything, itself included
    var start = e % p.rowlen == 0u;
    if (!start) {
        let a = src_key(e);
        start = any(a != src_key(e - 1u));
#if KIND == "f"
        start = start || all(a == key_of(0xffffffffu, 0xffffffffu));
#elif KIND == "c"
        start = start || any(a == vec2<u32>(0xffffffffu));
#endif
    }
    out[e] = select(0u, 1u, start);
#endif
}
#endif

#if STEP == "gather"
// out[j] = x[v[j]] (W words each); an index past x's n elements (the caller checked there
// are none) reads nothing
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let j = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (j >= p.nv) {
        return;
    }
    let i = v[j];
    if (i < p.n) {
#for k in range(W)
        out[j * ${W}u + ${k}u] = x[i * ${W}u + ${k}u];
#endfor
    }
}
#endif

#if STEP == "search"
// the key of x's element i
fn xkey(i: u32) -> vec2<u32> {
#if W == 2
    return key_of(x[i * 2u], x[i * 2u + 1u]);
#else
    return key_of(x[i], 0u);
#endif
}

// a < b for keys
fn less(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.y < b.y || (a.y == b.y && a.x < b.x);
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let j = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (j >= p.nv) {
        return;
    }
#if W == 2
    let key = key_of(v[j * 2u], v[j * 2u + 1u]);
#else
    let key = key_of(v[j], 0u);
#endif
    var lo = 0u;
    var hi = p.n;
    while (lo < hi) {
        let mid = lo + (hi - lo) / 2u;
#if SIDE == "left"
        let go_right = less(xkey(mid), key);
#else
        let go_right = !less(key, xkey(mid));
#endif
        if (go_right) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    out[j] = lo;
}
#endif
