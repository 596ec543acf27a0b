"""Pattern 1, the sequential baseline: load, upload, compute and download each batch, one
stage after another, with blocking calls. Total = N x (sum of the stages)."""

from _common import FMA, PARAMS, check, make_batch, now, parse_args, report, warm_up

import wgcompute as wgc
from wgcompute import Timeline


def main():
    args = parse_args(__doc__)
    inp, out = wgc.empty(args.size, "f32"), wgc.empty(args.size, "f32")
    warm_up([inp], [out])
    tl = Timeline()
    results = []
    t0 = now()
    for i in range(args.batches):
        with tl.span(i, "load"):
            data = make_batch(i, args.size)
        with tl.span(i, "upload"):
            inp.write(data)  # returns once copied into staging; the GPU copy is queued
        with tl.span(i, "gpu"):
            wgc.run_kernel(FMA, [inp], out, PARAMS)  # blocks until done
        with tl.span(i, "download"):
            results.append(out.to_numpy())
    total = now() - t0
    check(results, args.size, "sequential")
    report("01_sequential", tl, args, total)


if __name__ == "__main__":
    main()
