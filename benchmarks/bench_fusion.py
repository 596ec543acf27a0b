"""Fused elementwise chains against the same operators one kernel each: ``ops`` chained
``x = relu(x + b)`` on f32 vectors (64K elements, 100 ops; 64M elements, 10 ops), run as
queued operators one kernel each (automatic fusion off: ``xp.maximum(x + b, 0.0)``), the
same operators with automatic fusion (and ``(x + b).relu()`` with it), one ``wgc.fuse``
kernel (``(x + b).relu()``), one add alone, and torch / CuPy when importable (eager
kernels, as the operators; no torch.compile).
Wall clock per chain, host to host (each run ends with a read of one element, which waits for
the chain). Prints the ratios.

    python -m benchmarks.bench_fusion [--small] [--repeat R]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import wgcompute as wgc
from benchmarks.harness import peers, wall_time
from wgcompute import _fusion_auto
from wgcompute import array_api as xp


def _chain(relu):
    def chain(x, b, ops):
        for _ in range(ops):
            x = relu(x + b)
        return x
    return chain


_NAMED = _chain(lambda v: v.relu())  # (the reference, in eager mode; and automatically fused)
_QUEUED = _chain(lambda v: xp.maximum(v, 0.0))


def _unfused(x, b, ops):
    _fusion_auto.set_enabled(False)
    try:
        y = _QUEUED(x, b, ops)
        _sync(y)
    finally:
        _fusion_auto.set_enabled(True)
    return y
_FUSED = {}  # ops -> the fused chain (traced once per signature)


def _fused(ops: int):
    if ops not in _FUSED:
        chain = _chain(lambda v: v.relu())
        _FUSED[ops] = wgc.fuse(lambda x, b: chain(x, b, ops))
    return _FUSED[ops]


def _sync(buf) -> None:
    buf[:1].to_numpy()  # a read waits for everything queued before it


def rows(n: int, ops: int, repeat: int) -> dict:
    """Milliseconds per chain of each way of running it (the results checked equal)."""
    rng = np.random.default_rng(0)
    xn = rng.standard_normal(n).astype(np.float32)
    bn = (rng.standard_normal(n) * 0.1).astype(np.float32)
    x, b = wgc.from_numpy(xn), wgc.from_numpy(bn)
    fused = _fused(ops)
    wgc.set_eager(True)  # the reference: one kernel per operator, each waited for
    try:
        want = _NAMED(x, b, ops).to_numpy()
    finally:
        wgc.set_eager(False)
    if not np.array_equal(fused(x, b).to_numpy(), want):
        raise SystemExit(f"bench_fusion: the fused chain of {ops} ops on {n} elements differs "
                         f"from the operators'")
    if not np.array_equal(_QUEUED(x, b, ops).to_numpy(), _unfused(x, b, ops).to_numpy()):
        raise SystemExit(f"bench_fusion: the automatically fused chain of {ops} ops on {n} "
                         f"elements differs from the operators'")
    if not np.array_equal(_NAMED(x, b, ops).to_numpy(), want):
        raise SystemExit(f"bench_fusion: the automatically fused .relu() chain of {ops} ops "
                         f"on {n} elements differs from the eager one")
    out = {"operators": wall_time(lambda: _unfused(x, b, ops), repeat=repeat) * 1e3,
           "auto-fused": wall_time(lambda: _sync(_QUEUED(x, b, ops)), repeat=repeat) * 1e3,
           "auto-fused .relu()": wall_time(lambda: _sync(_NAMED(x, b, ops)),
                                            repeat=repeat) * 1e3,
           "fused": wall_time(lambda: _sync(fused(x, b)), repeat=repeat) * 1e3,
           "one add": wall_time(lambda: _sync(x + b), repeat=repeat) * 1e3}
    for name, mod in peers().items():
        if name == "torch":
            tx, tb = mod.from_numpy(xn).cuda(), mod.from_numpy(bn).cuda()

            def run(tx=tx, tb=tb, mod=mod):
                y = tx
                for _ in range(ops):
                    y = mod.relu(y + tb)
                mod.cuda.synchronize()
        else:
            cx, cb = mod.asarray(xn), mod.asarray(bn)

            def run(cx=cx, cb=cb, mod=mod):
                y = cx
                for _ in range(ops):
                    y = mod.maximum(y + cb, 0)
                mod.cuda.runtime.deviceSynchronize()
        out[name] = wall_time(run, repeat=repeat) * 1e3
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="tiny sizes: seconds on a CPU adapter")
    ap.add_argument("--repeat", type=int, default=None, help="timed runs per row (median)")
    args = ap.parse_args(argv)
    cases = ((1 << 12, 100), (1 << 16, 10)) if args.small else ((1 << 16, 100), (1 << 26, 10))
    repeat = args.repeat or (3 if args.small else 10)
    dev = wgc.current_device()
    print(f"# {dev.name}: x = (x + b).relu(), f32, median of {repeat} (ms per chain, "
          f"host to host)")
    for n, ops in cases:
        r = rows(n, ops, repeat)
        line = ", ".join(f"{k} {v:.3f}" for k, v in r.items())
        print(f"{n} elements x {ops} ops: {line}; operators / fused "
              f"{r['operators'] / r['fused']:.1f}x, operators / auto-fused "
              f"{r['operators'] / r['auto-fused']:.1f}x, fused / one add "
              f"{r['fused'] / r['one add']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
