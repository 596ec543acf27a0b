"""Pattern 6, the non-blocking query: while a stream works through its batches, the host
keeps doing its own work (here: preparing the next batches) and asks ``stream.query()``
between pieces, never blocking, until the stream is idle."""

import numpy as np
from _common import FMA, PARAMS, check, make_batch, now, parse_args, report, warm_up

import wgcompute as wgc
from wgcompute import Timeline


def main():
    args = parse_args(__doc__)
    n = args.size
    warm_up([wgc.empty(n, "f32")], [wgc.empty(n, "f32")])
    tl = Timeline()
    s = wgc.create_stream("work", timeline=tl)
    first = [make_batch(i, n) for i in range(args.batches)]
    t0 = now()
    reads = []
    for i, x in enumerate(first):
        inp = s.upload(x, batch=i)
        out = wgc.empty(n, "f32")
        s.run_kernel(FMA, [inp], out, PARAMS, batch=i)
        reads.append(s.download(out, batch=i))
    prepared, queries, slowest = [], 0, 0.0
    while True:
        q0 = now()
        idle = s.query()
        slowest = max(slowest, now() - q0)
        queries += 1
        if idle:
            break
        i = len(prepared)
        with tl.span(args.batches + i, "host"):  # CPU work while the GPU is busy
            prepared.append(np.sort(make_batch(args.batches + i, n)))
    total = now() - t0
    check([r.wait() for r in reads], n, "stream query")
    print(f"{queries} query() calls, the slowest took {slowest * 1e6:.0f} us; prepared "
          f"{len(prepared)} batches on the host meanwhile")
    report("06_stream_query", tl, args, total)


if __name__ == "__main__":
    main()
