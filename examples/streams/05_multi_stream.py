"""Pattern 5, kernels on several streams: independent jobs spread over four streams, each
uploading, computing and downloading on its own thread; nothing orders one stream against
another, so their host copies and submissions interleave freely."""

from _common import FMA, PARAMS, check, make_batch, now, parse_args, report, warm_up

import wgcompute as wgc
from wgcompute import Timeline

STREAMS = 4


def main():
    args = parse_args(__doc__)
    warm_up([wgc.empty(args.size, "f32")], [wgc.empty(args.size, "f32")])
    tl = Timeline()
    streams = [wgc.create_stream(f"lane{i}", timeline=tl) for i in range(STREAMS)]
    data = []
    with tl.span(-1, "load"):  # every job's data, made up front
        data = [make_batch(i, args.size) for i in range(args.batches)]
    t0 = now()
    reads = []
    for i, x in enumerate(data):
        s = streams[i % STREAMS]
        inp = s.upload(x, batch=i)
        out = wgc.empty(args.size, "f32")
        s.run_kernel(FMA, [inp], out, PARAMS, batch=i)
        reads.append(s.download(out, batch=i))
    queries = sum(s.query() for s in streams)  # never blocks: most are still busy
    for s in streams:
        s.sync()
    total = now() - t0
    results = [r.wait() for r in reads]
    check(results, args.size, "multi-stream")
    print(f"{queries} of {STREAMS} streams were idle right after queueing")
    report("05_multi_stream", tl, args, total)


if __name__ == "__main__":
    main()
