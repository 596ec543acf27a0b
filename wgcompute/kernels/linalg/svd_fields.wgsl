    // the first fields of svd.wgsl's and svd_parallel.wgsl's Params: the sizes that place
    // U, S, Vh and their working copies in the shared workspace, and the launch's phase
    m: u32,
    n: u32,
    uc: u32,
    np: u32,
    batch: u32,
    phase: u32,
