"""The DataLoader pattern: a generator that loads batches slowly (simulated disk reads)
feeds wgc.stream_map, which loads batch i+depth on its own thread while the GPU works on
batch i. Runs depth=1 (no prefetch) and depth=3 on the same data and prints both totals."""

import time

from _common import FMA, PARAMS, check, make_batch, now, parse_args, register_fma, report

import wgcompute as wgc
from wgcompute import Timeline

LOAD_SECONDS = 0.01  # per batch: a slow disk


def loader(count: int, n: int):
    for i in range(count):
        time.sleep(LOAD_SECONDS)
        yield make_batch(i, n)


def main():
    args = parse_args(__doc__)
    register_fma()
    list(wgc.stream_map(FMA, loader(2, args.size), depth=3, params=PARAMS))  # warm up
    totals = {}
    for depth in (1, 3):
        tl = Timeline()
        t0 = now()
        results = list(wgc.stream_map(FMA, loader(args.batches, args.size), depth=depth,
                                      params=PARAMS, timeline=tl))
        totals[depth] = now() - t0
        check(results, args.size, f"dataloader depth={depth}")
        report(f"07_dataloader_depth{depth}", tl, args, totals[depth])
    print(f"prefetching (depth=3) vs none (depth=1): {totals[1] / totals[3]:.2f}x "
          f"faster with {LOAD_SECONDS * 1e3:.0f} ms of loading per batch")


if __name__ == "__main__":
    main()
