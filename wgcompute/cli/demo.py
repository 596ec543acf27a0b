"""`wgcompute demo`: the quick start, run for real, with results and timings."""

from __future__ import annotations

import statistics
import time

import numpy as np

import wgcompute as wgc

DESCRIPTION = ("wgcompute's quick start on your GPU: device info, buffers, "
               "elementwise add, relu, matmul, read back; each step timed.")


def add_arguments(p) -> None:
    p.add_argument("--size", type=int, default=512, help="matmul size N for N×N×N (512)")
    p.add_argument("--image", default=None,
                   help="photo for the image pipeline (default: the bundled cat)")
    p.add_argument("--out", default=None,
                   help="where to write the processed photo (default: next to --image, or "
                        "a wgcompute-demo folder in the system's temporary folder for the "
                        "bundled one)")


def _timed(label: str, fn, repeat: int = 1):
    fn()  # warm-up: compiles the pipeline once
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    ms = statistics.median(times) * 1e3
    runs = f"median of {repeat}" if repeat > 1 else "1 run"
    print(f"  {label:<44} {ms:9.3f} ms  ({runs})")
    return out


def run(args) -> int:
    n = args.size
    if n < 1:
        raise wgc.ArgumentError(f"--size: expected a positive int, got {n}")
    info = wgc.device_info()
    print(f"device: {info['name']} [{info['backend']}, {info['adapter_type']}] "
          f"gpu={info['gpu']} wgcompute {info['version']} wgpu {info['wgpu_version']}")
    print("\nquick start")
    a = wgc.buffer([1.0, 2.0, 3.0], shape=(3,), dtype="f32")
    b = wgc.buffer([4.0, 5.0, 6.0], shape=(3,), dtype="f32")
    c = wgc.buffer_zeros((3,), "f32")
    wgc.run_kernel("elementwise_add", [a, b], c, {})
    print(f"  a + b          = {wgc.read_list(c)}   (bytes: {wgc.read(c)!r})")
    r = wgc.relu(wgc.buffer([-2.0, -0.5, 0.0, 1.5]))
    print(f"  relu           = {r.tolist()}")
    lr = wgc.relu(wgc.buffer([-2.0, -0.5, 0.0, 1.5]), slope=0.1)
    print(f"  leaky relu 0.1 = {[round(v, 6) for v in lr.tolist()]}")
    m = wgc.matmul(wgc.buffer([[1.0, 2.0], [3.0, 4.0]]), wgc.buffer([[5.0, 6.0], [7.0, 8.0]]))
    print(f"  matmul 2x2     = {m.tolist()}")
    wgc.free_many([a, b, c, r, lr, m])

    print("\ntimings (after one warm-up call; `wgcompute bench` compares with numpy and peers)")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1 << 22, dtype=np.float32)
    bx = _timed("upload 4M f32 (16 MiB)", lambda: wgc.from_numpy(x))
    by = wgc.from_numpy(x)
    out = wgc.empty(x.shape, "f32")
    _timed("add 4M f32 (sync, incl. Python overhead)", lambda: wgc.add(bx, by, out), 5)
    _timed("relu 4M f32", lambda: wgc.relu(bx, out), 5)
    got = _timed("read back 4M f32", out.to_numpy)
    assert np.array_equal(got, np.maximum(x, 0)), "relu result differs from numpy"
    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    ga, gb, gc = wgc.from_numpy(A), wgc.from_numpy(B), wgc.empty((n, n), "f32")
    t = time.perf_counter()
    wgc.matmul(ga, gb, gc)
    t = time.perf_counter() - t
    err = float(np.abs(gc.to_numpy() - A.astype(np.float64) @ B).max())
    print(f"  matmul {n}x{n}x{n}: {t * 1e3:.2f} ms, {2 * n ** 3 / t / 1e9:.1f} GFLOP/s, "
          f"max abs error vs float64 numpy {err:.2e}")
    _image_demo(args)
    print("\nall results checked against numpy: OK")
    return 0


def _image_demo(args) -> None:
    import os
    import tempfile

    from wgcompute.cli.process import PIPELINE_DEMO, bundled_photo

    path = args.image or bundled_photo()
    if path is None:
        print("\nimage pipeline: no bundled photo in this install; pass --image PATH")
        return
    stem = os.path.splitext(os.path.basename(path))[0]
    if args.out:
        out = args.out
    elif args.image:
        out = os.path.join(os.path.dirname(path), f"{stem}_processed.png")
    else:  # the bundled photo: never litter the user's current folder
        folder = os.path.join(tempfile.gettempdir(), "wgcompute-demo")
        os.makedirs(folder, exist_ok=True)
        out = os.path.join(folder, f"{stem}_processed.png")
    stages = wgc.image.parse_pipeline(PIPELINE_DEMO)
    img = wgc.image.load(path)
    t = time.perf_counter()
    cmd, result = wgc.image.submit_stages(img, stages, label="demo")
    cmd.wait()
    t = time.perf_counter() - t
    wgc.image.save(result, out)
    h, w = img.shape[:2]
    print(f"\nimage pipeline: {PIPELINE_DEMO}\n  {path} ({w}x{h}) -> {out} in {t * 1e3:.1f} ms "
          f"({w * h / t / 1e6:.1f} Mpix/s incl. first-use compiles)")
