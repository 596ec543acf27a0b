"""Queued operators against recorded pipelines and the CUDA peers: (a) a chain of dependent
ops alternating an n x n f32 matmul and a transpose, written with plain operators (queued, one
read at the end), the same operators in eager mode (each waits), the same chain recorded as a
wgc.pipeline, and torch / CuPy when importable: microseconds per op; (b) a tiny op's launch +
wait latency (median). Prints the ratios.

    python -m benchmarks.bench_lazy [--small] [--ops N] [--n N] [--repeat R]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import wgcompute as wgc
from benchmarks.harness import peers, wall_time


def _chain_operators(a: wgc.Buffer, q: wgc.Buffer, ops: int) -> np.ndarray:
    x = a
    for i in range(ops):
        x = x @ q if i % 2 == 0 else x.T
    return x.to_numpy()


def _chain_pipeline(a: wgc.Buffer, q: wgc.Buffer, ops: int):
    """The chain recorded once: stage i writes its own buffer."""
    p = wgc.pipeline("bench-lazy-chain", device=a.device)
    x, bufs = a, []
    for i in range(ops):
        out = wgc.empty(a.shape, "f32", device=a.device)
        if i % 2 == 0:
            p.add(kernel="matmul", inputs=[x, q], output=out)
        else:
            p.add(kernel="transpose", inputs=[x], output=out)
        bufs.append(out)
        x = out
    return p, x, bufs


def chain_rows(n: int, ops: int, repeat: int) -> dict:
    """Microseconds per op of each way of running the chain (and the results checked)."""
    rng = np.random.default_rng(0)
    an = rng.standard_normal((n, n)).astype(np.float32)
    qn = np.linalg.qr(rng.standard_normal((n, n)))[0].astype(np.float32)  # keeps norms
    want = an.astype(np.float64)
    for i in range(ops):
        want = want @ qn if i % 2 == 0 else want.T
    a, q = wgc.from_numpy(an), wgc.from_numpy(qn)
    rows = {}
    got = _chain_operators(a, q, ops)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
    rows["operators (queued)"] = wall_time(lambda: _chain_operators(a, q, ops), repeat=repeat)
    wgc.set_eager(True)
    try:
        rows["operators (eager)"] = wall_time(lambda: _chain_operators(a, q, ops), repeat=repeat)
    finally:
        wgc.set_eager(False)
    p, last, _bufs = _chain_pipeline(a, q, ops)
    p.run()
    np.testing.assert_allclose(last.to_numpy(), got, rtol=1e-5, atol=1e-5)
    rows["wgc.pipeline"] = wall_time(lambda: (p.run(), last.to_numpy()), repeat=repeat)
    p.free()
    for name, mod in peers().items():
        rows[name] = wall_time(_peer_chain(name, mod, an, qn, ops), repeat=repeat)
    return {k: v / ops * 1e6 for k, v in rows.items()}


def _peer_chain(name: str, mod, an, qn, ops: int):
    if name == "torch":
        a, q = mod.from_numpy(an).cuda(), mod.from_numpy(qn).cuda()

        def run():
            x = a
            for i in range(ops):
                x = x @ q if i % 2 == 0 else x.T.contiguous()
            return x.cpu().numpy()
    else:
        a, q = mod.asarray(an), mod.asarray(qn)

        def run():
            x = a
            for i in range(ops):
                x = x @ q if i % 2 == 0 else mod.ascontiguousarray(x.T)
            return mod.asnumpy(x)
    return run


def tiny_rows(repeat: int) -> dict:
    """Median microseconds of one tiny op launched and waited for (and launched and read)."""
    x = wgc.from_numpy(np.arange(256, dtype=np.float32))
    dev = x.device
    rows = {}

    def queued():
        y = x + 1.0  # (held: a result nobody holds is never computed, automatic fusion
        dev.synchronize()  # drops it)
        return y

    rows["operator + synchronize"] = wall_time(queued, warmup=20, repeat=repeat)
    rows["operator + read"] = wall_time(lambda: (x + 1.0).to_numpy(), warmup=20, repeat=repeat)
    wgc.set_eager(True)
    try:
        rows["operator (eager)"] = wall_time(lambda: x + 1.0, warmup=20, repeat=repeat)
        rows["operator (eager) + read"] = wall_time(lambda: (x + 1.0).to_numpy(), warmup=20,
                                                        repeat=repeat)
    finally:
        wgc.set_eager(False)
    for name, mod in peers().items():
        rows[name] = wall_time(_peer_tiny(name, mod), warmup=20, repeat=repeat)
    return {k: v * 1e6 for k, v in rows.items()}


def _peer_tiny(name: str, mod):
    if name == "torch":
        t = mod.arange(256, dtype=mod.float32, device="cuda")
        return lambda: (t + 1.0, mod.cuda.synchronize())
    c = mod.arange(256, dtype=mod.float32)
    return lambda: (c + 1.0, mod.cuda.runtime.deviceSynchronize())


def _print(title: str, rows: dict, base: str, unit: str) -> None:
    print(title)
    for name, v in rows.items():
        print(f"  {name:<24} {v:10.1f} {unit}   {v / rows[base]:6.2f}x of {base}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="tiny sizes: seconds on a CPU adapter")
    ap.add_argument("--ops", type=int, default=None, help="ops in the chain (default 100)")
    ap.add_argument("--n", type=int, default=None, help="matrix size (default 256)")
    ap.add_argument("--repeat", type=int, default=None, help="timed runs (median)")
    args = ap.parse_args(argv)
    ops = args.ops or (20 if args.small else 100)
    n = args.n or (32 if args.small else 256)
    repeat = args.repeat or (3 if args.small else 20)
    print(f"device: {wgc.device_info()['name']} ({wgc.device_info()['backend']}); "
          f"chain of {ops} ops on {n}x{n} f32")
    chain = chain_rows(n, ops, repeat)
    _print("(a) dependent matmul/transpose chain, per op", chain, "operators (queued)", "us")
    tiny = tiny_rows(repeat * 10)
    _print("(b) tiny op, launch + wait (median)", tiny, "operator + synchronize", "us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
