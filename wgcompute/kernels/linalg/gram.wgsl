        // one row's terms of the Gram matrix [[al, ga], [conj(ga), be]] of the column pair
        // (x, y): al = Σ |x|², be = Σ |y|², ga = Σ conj(x)·y (svd.wgsl, svd_parallel.wgsl)
        let xm = mag(x);
        let ym = mag(y);
        al = al + xm * xm;
        be = be + ym * ym;
        ga = ga + mul(conjugate(x), y);
