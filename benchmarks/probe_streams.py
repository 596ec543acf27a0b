"""Where a stream_map batch's time goes: bench_streams' workload (N × 16M f32, upload → 64 FMA
→ download) at one depth with a Timeline, after a warm-up run. Prints each stage's mean span,
the mean interval between batches (the pipeline's throughput), the gaps where the submit
thread had no upload to do, and the Gantt chart of the last batches.

    python -m benchmarks.probe_streams [--depth 3] [--batches 32] [--size N] [--small]"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from benchmarks.bench_streams import FMA_WGSL, KERNEL, A, B


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--batches", type=int, default=32)
    ap.add_argument("--size", type=int, default=1 << 24)
    ap.add_argument("--small", action="store_true", help="8 batches of 1M (lavapipe)")
    ap.add_argument("--keep", action="store_true", help="keep every result (as a list)")
    args = ap.parse_args(argv)
    if args.small:
        args.batches, args.size = 8, 1 << 20
    import wgcompute as wgc
    from wgcompute.streams import Timeline

    if KERNEL not in wgc.kernels():
        wgc.register_kernel(KERNEL, FMA_WGSL, bindings=[("x", "read"), ("out", "read_write"),
                                                        ("p", "uniform")],
                            params={"n": "u32", "a": "f32", "b": "f32"})
    rng = np.random.default_rng(0)
    base = rng.standard_normal(args.size).astype(np.float32)
    batches = [base + np.float32(i) for i in range(args.batches)]

    def run(tl=None):
        kept = []
        for r in wgc.stream_map(KERNEL, batches, depth=args.depth, params={"a": A, "b": B},
                                timeline=tl):
            if args.keep:
                kept.append(r)
        return kept

    run()
    tl = Timeline()
    t0 = time.perf_counter()
    run(tl)
    total = time.perf_counter() - t0
    print(f"# {wgc.device_info()['name']}: depth {args.depth}, {args.batches} × "
          f"{args.size:,} f32, results {'kept' if args.keep else 'dropped'}: "
          f"{total * 1e3:.1f} ms, {total / args.batches * 1e3:.2f} ms a batch")
    for st, mean in tl.stage_means().items():
        print(f"  {st:<9} mean span {mean * 1e3:6.2f} ms")
    by = {}
    for b, st, s, e in tl.spans:
        by[(b, st)] = (s, e)
    ups = sorted(by[(b, "upload")] for b in range(args.batches) if (b, "upload") in by)
    starts = [s for s, _ in ups]
    if len(starts) > 1:
        steps = [b - a for a, b in zip(starts, starts[1:])]
        idle = [b[0] - a[1] for a, b in zip(ups, ups[1:])]
        print(f"  upload starts every {statistics.mean(steps) * 1e3:.2f} ms; the submit "
              f"thread idles {statistics.mean(idle) * 1e3:.2f} ms between uploads")
    last = set(range(max(0, args.batches - 6), args.batches))
    sub = Timeline()
    sub.t0 = tl.t0
    sub.spans = [x for x in tl.spans if x[0] in last]
    print(sub.gantt(96))


if __name__ == "__main__":
    main()
