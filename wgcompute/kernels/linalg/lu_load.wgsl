// The start of lu_small.wgsl's main: this workgroup's matrix, and its rows (n | 1 apart) then
// X (a's right-hand sides b, or the identity) copied into workgroup memory.
    let mat = wid.y * nwg.x + wid.x;
    if (mat >= p.batch) {
        return;
    }
    let n = p.n;
    let k = p.k;
    let ld = n | 1u;
    let xo = n * ld;
    for (var e = t; e < n * n; e = e + ${WG}u) {
        sm[e / n * ld + e % n] = a[mat * n * n + e];
    }
#if MODE == "solve"
    for (var e = t; e < n * k; e = e + ${WG}u) {
        sm[xo + e] = b[mat * n * k + e];
    }
#elif MODE == "inv"
    for (var e = t; e < n * n; e = e + ${WG}u) {
        sm[xo + e] = from_real(select(${R}(0), ${R}(1), e / n == e % n));
    }
#endif
