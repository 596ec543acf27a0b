// The end of an LU program's det: a singular matrix's sign 0 and log|det| -inf, then det, its
// sign and log|det| written at zo, so and so + batch of ws (lu_det.wgsl, lu_rows.wgsl).
        if (singular) {
            sgn = from_real(${R}(0));
            logabs = ${R}(p.ninf);
        }
        ws[zo] = det;
        ws[so] = sgn;
        ws[so + p.batch] = from_real(logabs);
