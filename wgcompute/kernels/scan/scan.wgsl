// Prefix scans (sum or product) along the rows of a (rows, n) batch, in tiles of TILE = WG·ITEMS
// elements. Filled in by wgcompute/kernels/scan/scan.py.
// Modes: "serial" (invocation r scans row r alone: short rows), "reduce" (workgroup
// g = r·tiles + t combines tile t of row r into out[g]) and "scan"
// (workgroup g scans tiles t0..t1 of one row in order, carrying the running value from one
// tile to the next, starting from the identity or, with PREFIX, from pre[r·(tiles + 1) + t0];
// row r of out starts at r·(n + shift), and shift = 1 writes the identity first).
// A long row is scanned as reduce (tile totals), scan of the totals (shift 1: exclusive
// prefixes, the row's total last), then scan of the tiles from their prefixes: x is read twice
// and out written once, and no workgroup waits for another.
// Bindings: 0 x (read), [1 pre (read, PREFIX only)], then out (read_write), then params.
// Params: rows, n (elements per row of x), tiles (tiles per row), per (tiles per workgroup,
//   scan mode), shift (0, or 1 to write the identity first), groups (workgroups in all).
// Templates: ENABLE, XT (x's element), ACC (the accumulator), OT (out's element), WG, ITEMS,
//   MODE, PREFIX, IDENT (the identity as ACC), COMBINE (a ⊕ b of two ACC).
${ENABLE}

struct Params {
    rows: u32,
    n: u32,
    tiles: u32,
    per: u32,
    shift: u32,
    groups: u32,
}

@group(0) @binding(0) var<storage, read> x: array<${XT}>;
#if PREFIX
@group(0) @binding(1) var<storage, read> pre: array<${ACC}>;
@group(0) @binding(2) var<storage, read_write> out: array<${OT}>;
@group(0) @binding(3) var<uniform> p: Params;
#else
@group(0) @binding(1) var<storage, read_write> out: array<${OT}>;
@group(0) @binding(2) var<uniform> p: Params;
#endif

const TILE: u32 = ${WG * ITEMS}u;

// the tile, one padding slot every 32 so that invocations reading ITEMS consecutive
// elements hit different banks
var<workgroup> sh: array<${ACC}, ${WG * ITEMS + WG * ITEMS // 32}>;
var<workgroup> tot: array<${ACC}, ${WG}>;

fn combine(a: ${ACC}, b: ${ACC}) -> ${ACC} {
    return ${COMBINE};
}

fn pad(j: u32) -> u32 {
    return j + (j >> 5u);
}

#if MODE == "serial"
// one invocation per row (rows of a few elements: a workgroup each would idle)
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let r = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (r >= p.rows) {
        return;
    }
    let xrow = r * p.n;
    let orow = r * (p.n + p.shift) + p.shift;
    var a = ${IDENT};
    if (p.shift == 1u) {
        out[orow - 1u] = ${OT}(a);
    }
    for (var j = 0u; j < p.n; j = j + 1u) {
        a = combine(a, ${ACC}(x[xrow + j]));
        out[orow + j] = ${OT}(a);
    }
}
#elif MODE == "reduce"
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = wid.y * nwg.x + wid.x;
    if (g >= p.groups) {
        return;
    }
    let r = g / p.tiles;
    let start = (g % p.tiles) * TILE;
    let base = r * p.n + start;
    let cnt = min(TILE, p.n - start);
    var a = ${IDENT};
#for k in range(ITEMS)
    if (${k * WG}u + lid < cnt) {
        a = combine(a, ${ACC}(x[base + ${k * WG}u + lid]));
    }
#endfor
    tot[lid] = a;
    workgroupBarrier();
    for (var s = ${WG // 2}u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            tot[lid] = combine(tot[lid], tot[lid + s]);
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        out[g] = tot[0];
    }
}
#else
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = wid.y * nwg.x + wid.x;
    if (g >= p.groups) {
        return;
    }
    let chunks = (p.tiles + p.per - 1u) / p.per;
    let r = g / chunks;
    let t0 = (g % chunks) * p.per;
    let t1 = min(p.tiles, t0 + p.per);
    let xrow = r * p.n;
    let orow = r * (p.n + p.shift) + p.shift;
#if PREFIX
    var carry = pre[r * (p.tiles + 1u) + t0];
#else
    var carry = ${IDENT};
#endif
    if (p.shift == 1u && t0 == 0u && lid == 0u) {
        out[orow - 1u] = ${OT}(${IDENT});
    }
    for (var t = t0; t < t1; t = t + 1u) {
        let start = t * TILE;
        let cnt = min(TILE, p.n - start);
        // coalesced loads into the tile (the identity past the row's end)
#for k in range(ITEMS)
        if (${k * WG}u + lid < cnt) {
            sh[pad(${k * WG}u + lid)] = ${ACC}(x[xrow + start + ${k * WG}u + lid]);
        } else {
            sh[pad(${k * WG}u + lid)] = ${IDENT};
        }
#endfor
        workgroupBarrier();
        // each invocation scans its ITEMS consecutive elements
        var a = ${IDENT};
#for k in range(ITEMS)
        a = combine(a, sh[pad(lid * ${ITEMS}u + ${k}u)]);
        sh[pad(lid * ${ITEMS}u + ${k}u)] = a;
#endfor
        // the invocations' totals scanned (Hillis-Steele, inclusive)
        tot[lid] = a;
        workgroupBarrier();
        for (var d = 1u; d < ${WG}u; d = d << 1u) {
            var v = ${IDENT};
            if (lid >= d) {
                v = tot[lid - d];
            }
            workgroupBarrier();
            if (lid >= d) {
                tot[lid] = combine(v, tot[lid]);
            }
            workgroupBarrier();
        }
        var before = carry;
        if (lid > 0u) {
            before = combine(carry, tot[lid - 1u]);
        }
#for k in range(ITEMS)
        sh[pad(lid * ${ITEMS}u + ${k}u)] = combine(before, sh[pad(lid * ${ITEMS}u + ${k}u)]);
#endfor
        carry = combine(carry, tot[${WG - 1}u]);
        workgroupBarrier();
#for k in range(ITEMS)
        if (${k * WG}u + lid < cnt) {
            out[orow + start + ${k * WG}u + lid] = ${OT}(sh[pad(${k * WG}u + lid)]);
        }
#endfor
        workgroupBarrier();
    }
}
#endif
