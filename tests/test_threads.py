"""8 threads × 400 mixed operations at once (buffers made and freed, kernels sync and async,
pipelines, transfers sync and async, streams, reductions), each result compared exactly
with numpy; nothing deadlocks, no thread sees another's data. (test_async.py covers one
kind of submit from 8 threads; this mixes every kind.)"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import wgcompute as wgc

THREADS = 8
OPS = 400
KINDS = ["create_read_free", "run_kernel", "run_kernel_async", "submit", "pipeline",
         "write_read", "write_async_read_async", "stream", "sum", "matmul"]


def worker(seed: int, counts: dict, errors: list) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    x_np = rng.integers(-50, 50, n).astype(np.float32)
    x = wgc.from_numpy(x_np)
    out = wgc.empty((n,))
    pipe = wgc.pipeline()
    pipe.add(kernel="relu", inputs=[x], output=out)
    pipe.add(kernel="scale", inputs=[out], params={"scalar": 2.0})
    pipe_out = pipe.stages[-1]["output"]
    stream = wgc.create_stream(f"thread-{seed}")
    try:
        for i in range(OPS):  # noqa: B007 - i is reported with an error
            kind = KINDS[int(rng.integers(len(KINDS)))]
            counts[kind] = counts.get(kind, 0) + 1
            if kind == "create_read_free":
                d = rng.integers(0, 255, int(rng.integers(0, 500))).astype(np.uint8)
                b = wgc.buffer(d)
                assert np.array_equal(b.to_numpy(), d)
                b.free()
            elif kind == "run_kernel":
                np.testing.assert_array_equal(wgc.run_kernel("relu", [x], out).to_numpy(),
                                              np.maximum(x_np, 0))
            elif kind == "run_kernel_async":
                r = wgc.run_kernel_async("scale", [x], out, {"scalar": -1.0}).wait()
                np.testing.assert_array_equal(r.to_numpy(), -x_np)
            elif kind == "submit":
                cmd = wgc.submit({"op": "run_kernel", "kernel": "elementwise_add",
                                  "inputs": [x, x], "output": out})
                assert cmd.wait() is out
                np.testing.assert_array_equal(out.to_numpy(), x_np + x_np)
            elif kind == "pipeline":
                pipe.run()
                np.testing.assert_array_equal(pipe_out.to_numpy(), np.maximum(x_np, 0) * 2)
            elif kind == "write_read":
                x_np = rng.integers(-50, 50, n).astype(np.float32)
                x.write(x_np)
                np.testing.assert_array_equal(x.to_numpy(), x_np)
            elif kind == "write_async_read_async":
                x_np = rng.integers(-50, 50, n).astype(np.float32)
                x.write_async(x_np)
                np.testing.assert_array_equal(x.read_async().wait(), x_np)
            elif kind == "stream":
                d = rng.integers(-50, 50, n).astype(np.float32)
                b = stream.upload(d)
                c = stream.run_kernel("relu", [b])
                got = stream.download(c.wait()).wait()
                np.testing.assert_array_equal(got, np.maximum(d, 0))
                b.free()
            elif kind == "sum":
                s = wgc.sum(x).to_numpy()
                assert s == x_np.sum(dtype=np.float64)  # small integers: exact in f32
            else:
                m = int(rng.integers(1, 20))
                a_np = rng.integers(-4, 4, (m, 7)).astype(np.float32)
                b_np = rng.integers(-4, 4, (7, m)).astype(np.float32)
                got = wgc.matmul(wgc.from_numpy(a_np), wgc.from_numpy(b_np)).to_numpy()
                np.testing.assert_array_equal(got, a_np @ b_np)  # integers: exact
    except Exception as e:  # noqa: BLE001 - surfaced in the main thread
        errors.append((seed, kind, i, e))
    finally:
        stream.close()
        pipe.free()
        for b in (x, out, pipe_out):
            b.free()


def run_threads(threads: int = THREADS, timeout: float = 600) -> dict:
    counts = [dict() for _ in range(threads)]
    errors: list = []
    ts = [threading.Thread(target=worker, args=(s, counts[s], errors), daemon=True)
          for s in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
    hung = sum(t.is_alive() for t in ts)
    total: dict = {}
    for c in counts:
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    return {"threads": threads, "ops": sum(total.values()), "by_kind": total,
            "errors": errors, "hung": hung, "seconds": time.perf_counter() - t0}


@pytest.mark.slow
def test_eight_threads_times_400_mixed_operations():
    r = run_threads()
    assert r["hung"] == 0, f"{r['hung']} threads still running after 600 s (deadlock?)"
    assert not r["errors"], r["errors"][:3]
    assert r["ops"] == THREADS * OPS
    assert set(r["by_kind"]) == set(KINDS)
