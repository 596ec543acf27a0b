// Exclusive prefix sum of n u32 words in three steps (reduce, then scan, in chunks of CH):
//   reduce  out[g] = the sum of chunk g of a
//   top     one workgroup: out = the exclusive scan of a (the chunk sums), CH at a time
//   down    out[i] = the exclusive scan of a at i: chunk g's own scan plus b[g] (top's result)
// and of the radix sort's histograms a[tile][digit] (n tiles of D digits, tile-major, so that
// each tile's counts are written and its offsets read as one run) in digit-major order
// (offset of (tile t, digit d) = the count of every smaller digit + d's count in tiles < t):
//   colreduce  out[g][d] = the sum of a[t][d] over the ITEMS tiles t of group g
//   coltop     one workgroup: out[g][d] = the exclusive scan of a[.][d] over groups g (the
//              column sums), and out[n][d] = the exclusive scan of the digits' totals
//   coldown    out[t][d] = b[g][d] + b[n][d] + the scan of a[.][d] inside group g
// Bindings: 0 a (read), [1 b (read), down and coldown], then out (read_write), then params
//   (uniform: n, words or tiles or groups).
// Templates: STEP, WG, ITEMS (consecutive words or tiles per invocation; CH = WG * ITEMS), D
//   (the histograms' digits, a multiple of WG: col steps run D / WG workgroups a group).
struct Params {
    n: u32,
}

@group(0) @binding(0) var<storage, read> a: array<u32>;
#if STEP == "down" or STEP == "coldown"
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;
#else
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;
#endif

const CH: u32 = ${WG * ITEMS}u;

var<workgroup> tot: array<u32, ${WG}>;

// the exclusive scan of ``v`` over the workgroup's invocations (and, in tot[WG - 1], the
// total); every invocation calls it
fn wg_scan(lid: u32, v: u32) -> u32 {
    tot[lid] = v;
    workgroupBarrier();
    for (var off = 1u; off < ${WG}u; off = off << 1u) {
        var t = 0u;
        if (lid >= off) {
            t = tot[lid - off];
        }
        workgroupBarrier();
        tot[lid] = tot[lid] + t;
        workgroupBarrier();
    }
    return tot[lid] - v;
}

#if STEP == "colreduce"
// workgroup f: the group of tiles f / (D / WG), its digits from (f % (D / WG)) * WG
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let f = wid.y * nwg.x + wid.x;
    let g = f / ${D // WG}u;
    let d = (f % ${D // WG}u) * ${WG}u + lid;
    if (g * ${ITEMS}u >= p.n) {
        return;
    }
    let t0 = g * ${ITEMS}u;
    let t1 = min(t0 + ${ITEMS}u, p.n);
    var s = 0u;
    for (var t = t0; t < t1; t = t + 1u) {
        s = s + a[t * ${D}u + d];
    }
    out[g * ${D}u + d] = s;
}
#elif STEP == "coltop"
#if D > WG
// the digits' totals, for their scan (an invocation scans D / WG consecutive ones)
var<workgroup> dtot: array<u32, ${D}>;
#endif

@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_index) lid: u32) {
#for j in range(D // WG)
    {
        let d = ${j * WG}u + lid;
        var run = 0u;
        var g = 0u;
        for (; g + 8u <= p.n; g = g + 8u) {
#for k in range(8)
            let v${k} = a[(g + ${k}u) * ${D}u + d];
#endfor
#for k in range(8)
            out[(g + ${k}u) * ${D}u + d] = run;
            run = run + v${k};
#endfor
        }
        for (; g < p.n; g = g + 1u) {
            let v = a[g * ${D}u + d];
            out[g * ${D}u + d] = run;
            run = run + v;
        }
#if D > WG
        dtot[d] = run;
#else
        out[p.n * ${D}u + d] = wg_scan(lid, run);
#endif
    }
#endfor
#if D > WG
    workgroupBarrier();
    var s = 0u;
    for (var k = 0u; k < ${D // WG}u; k = k + 1u) {
        s = s + dtot[lid * ${D // WG}u + k];
    }
    var before = wg_scan(lid, s);
    for (var k = 0u; k < ${D // WG}u; k = k + 1u) {
        let d = lid * ${D // WG}u + k;
        out[p.n * ${D}u + d] = before;
        before = before + dtot[d];
    }
#endif
}
#elif STEP == "coldown"
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let f = wid.y * nwg.x + wid.x;
    let g = f / ${D // WG}u;
    let d = (f % ${D // WG}u) * ${WG}u + lid;
    let groups = (p.n + ${ITEMS - 1}u) / ${ITEMS}u;
    if (g >= groups) {
        return;
    }
    var run = b[g * ${D}u + d] + b[groups * ${D}u + d];
    let t0 = g * ${ITEMS}u;
    let t1 = min(t0 + ${ITEMS}u, p.n);
    for (var t = t0; t < t1; t = t + 1u) {
        let v = a[t * ${D}u + d];
        out[t * ${D}u + d] = run;
        run = run + v;
    }
}
#elif STEP == "reduce"
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = wid.y * nwg.x + wid.x;
    var s = 0u;
#for j in range(ITEMS)
    if (g * CH + ${j * WG}u + lid < p.n) {
        s = s + a[g * CH + ${j * WG}u + lid];
    }
#endfor
    let before = wg_scan(lid, s);
    if (lid == ${WG - 1}u) {
        out[g] = before + s;
    }
}
#else
// chunk ``c`` of a scanned from ``carry`` into out; returns the carry after it
fn scan_chunk(lid: u32, c: u32, carry: u32) -> u32 {
    let first = c * CH + lid * ${ITEMS}u;
    var v: array<u32, ${ITEMS}>;
    var s = 0u;
#for j in range(ITEMS)
    v[${j}] = 0u;
    if (first + ${j}u < p.n) {
        v[${j}] = a[first + ${j}u];
    }
    s = s + v[${j}];
#endfor
    var run = carry + wg_scan(lid, s);
    let total = tot[${WG - 1}u];
#for j in range(ITEMS)
    if (first + ${j}u < p.n) {
        out[first + ${j}u] = run;
    }
    run = run + v[${j}];
#endfor
    workgroupBarrier();
    return carry + total;
}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
#if STEP == "top"
    var carry = 0u;
    for (var c = 0u; c * CH < p.n; c = c + 1u) {
        carry = scan_chunk(lid, c, carry);
    }
#else
    let g = wid.y * nwg.x + wid.x;
    if (g * CH < p.n) {
        _ = scan_chunk(lid, g, b[g]);
    }
#endif
}
#endif
