"""Where a tiny kernel's round trip goes: ``run_kernel``'s synchronous path taken apart
(argument checks and binding, recording, finish, submit, waiting for the fence), with the
cost of one non-blocking device poll on an idle queue and the number of polls a wait makes.
The measurements behind issue 3's round-trip goal; uses wgcompute's internals on purpose.

    python -m benchmarks.probe_dispatch [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

N = 256


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3000, help="timed round trips (3000)")
    args = ap.parse_args(argv)

    import wgcompute as wgc
    from wgcompute import _queue, commands
    from wgcompute._encode import Encoder

    print(f"adapter: {wgc.device_info()['name']} {wgc.device_info()['backend']}")
    x = np.arange(N, dtype=np.float32)
    a, b, out = wgc.from_numpy(x), wgc.from_numpy(x), wgc.empty((N,), "f32")
    s = _queue.submitter()
    polls = [0]
    real_poll = s.poll

    def counting_poll():
        polls[0] += 1
        real_poll()

    s.poll = counting_poll
    names = ["check+bind", "record", "finish", "submit", "wait", "total"]
    rows: dict[str, list[float]] = {k: [] for k in names}
    npolls = []
    for i in range(args.repeat + 200):
        t0 = time.perf_counter_ns()
        _k, _o, d = commands._bound_run("elementwise_add", [a, b], out, None)
        t1 = time.perf_counter_ns()
        enc = Encoder()
        enc.record(d)
        t2 = time.perf_counter_ns()
        cb = enc.finish()
        t3 = time.perf_counter_ns()
        fence = _queue.submit([cb], background=False)
        t4 = time.perf_counter_ns()
        polls[0] = 0
        _queue.wait(fence)
        t5 = time.perf_counter_ns()
        if i >= 200:
            for k, v in zip(names, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0)):
                rows[k].append(v / 1e3)
            npolls.append(polls[0])
    s.poll = real_poll
    assert np.array_equal(out.to_numpy(), 2 * x)
    for k in names:
        v = sorted(rows[k])
        print(f"{k:>11}: median {statistics.median(v):7.2f} us   p10 {v[len(v) // 10]:7.2f}"
              f"   p90 {v[9 * len(v) // 10]:7.2f}")
    print(f"polls per wait: median {statistics.median(npolls)}, max {max(npolls)}")

    # one non-blocking poll on an idle queue
    for _ in range(100):
        s.poll()
    t0 = time.perf_counter_ns()
    for _ in range(10000):
        s.poll()
    print(f"one poll, idle queue: {(time.perf_counter_ns() - t0) / 1e7:.2f} us")

    t = []
    for i in range(args.repeat + 200):
        t0 = time.perf_counter_ns()
        wgc.run_kernel("elementwise_add", [a, b], out)
        if i >= 200:
            t.append((time.perf_counter_ns() - t0) / 1e3)
    print(f"run_kernel round trip: median {statistics.median(t):.2f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
