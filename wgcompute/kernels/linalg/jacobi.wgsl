// The round-robin order of the parallel Jacobi methods: in each of the np - 1 rounds of a sweep
// (np: the columns rounded up to even) the np / 2 pairs share no column. A pair holding the
// padding column np - 1 ≥ n is skipped.
fn pair_of(r: u32, kp: u32, np: u32) -> vec2<u32> {
    if (kp == 0u) {
        return vec2<u32>(r, np - 1u);
    }
    return vec2<u32>((r + kp) % (np - 1u), (r + np - 1u - kp) % (np - 1u));
}

// The rotation (c, s) that zeroes the off-diagonal of the real symmetric 2 × 2 [[app, apq],
// [apq, aqq]]: with J = [[c, s], [-s, c]], Jᵀ·A·J is diagonal (Golub and Van Loan's
// sym.schur2).
fn rotation(app: ${R}, aqq: ${R}, apq: ${R}) -> vec2<${R}> {
    if (apq == ${R}(0)) {
        return vec2<${R}>(${R}(1), ${R}(0));
    }
    let tau = (aqq - app) / (${R}(2) * apq);
    let sg = select(${R}(1), ${R}(-1), tau < ${R}(0));
    let tt = sg / (abs(tau) + sqrt(${R}(1) + tau * tau));
    let c = ${R}(1) / sqrt(${R}(1) + tt * tt);
    return vec2<${R}>(c, tt * c);
}

// The unitary G = [[c, s], [-s·ph, c·ph]] (c, s real, |ph| = 1) that makes the Hermitian
// [[app, apq], [conj(apq), aqq]] diagonal as Gᴴ·A·G: the phase ph = conj(apq) / |apq| makes
// the off-diagonal real, then the real rotation. Kept in ws as three elements: c, s, ph.
fn store_rotation(at: u32, app: ${R}, aqq: ${R}, apq: ${T}) {
    let cs = rotation(app, aqq, mag(apq));
    let ph = conjugate(unit(apq));
    ws[at] = from_real(cs.x);
    ws[at + 1u] = from_real(cs.y);
    ws[at + 2u] = ph;
}

// columns p and q (x, y) times G
fn rotate_columns(at: u32, x: ${T}, y: ${T}) -> array<${T}, 2> {
    let c = real_of(ws[at]);
    let s = real_of(ws[at + 1u]);
    let py = mul(ws[at + 2u], y);
    return array<${T}, 2>(c * x - s * py, s * x + c * py);
}

// rows p and q (x, y) times Gᴴ from the left
fn rotate_rows(at: u32, x: ${T}, y: ${T}) -> array<${T}, 2> {
    let c = real_of(ws[at]);
    let s = real_of(ws[at + 1u]);
    let py = mul(conjugate(ws[at + 2u]), y);
    return array<${T}, 2>(c * x - s * py, s * x + c * py);
}
