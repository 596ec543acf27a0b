"""Two wgcompute versions in ONE process, the tiny-kernel round trip measured in alternating
blocks: both see the same process, memory layout, threads and GPU clock, which fresh processes
do not (on an H200 the same round trip measured 37 to 60 us between fresh processes of one
version, so process-to-process comparisons of a few us need many rounds and still mislead).

The other version comes from a wheel or a package folder (a source checkout's ``wgcompute``;
a version older than the kernel family folders also takes its ``shaders`` folder from beside
it); it is imported as ``wgc_other``
(unpacked into a temporary folder, its package renamed). Rows: ``run_kernel`` (blocking) and
``submit(...).wait()``, the latter split in phases: submit() returning, the polling wait for
its fence, and Command.wait() after it. Each row: both medians, the median of the per-round
ratios (this version / the other) and its 95% bootstrap interval (the rounds resampled): a
difference is shown only where the interval excludes 1. ``--other`` naming this checkout's own
package folder (``--other wgcompute``) compares the version with itself: the noise floor.

    python -m benchmarks.ab_versions --other wgcompute-0.1.0-py3-none-any.whl \
        [--rounds 30] [--block 300] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import zipfile

import numpy as np

NAME = "wgc_other"
N_TINY = 256


def import_other(source: str, folder: str):
    """Unpack (a wheel) or copy (a package folder) ``source`` into ``folder`` as package
    wgc_other, with its own-resource lookups renamed, and import it."""
    dest = os.path.join(folder, NAME)
    if os.path.isdir(source):
        shutil.copytree(source, dest)
        # a version older than the kernel family folders: its WGSL in shaders/, as _wgsl
        old_wgsl = os.path.join(os.path.dirname(os.path.abspath(source)), "shaders")
        if not os.path.isdir(os.path.join(dest, "_wgsl")) and os.path.isdir(old_wgsl):
            shutil.copytree(old_wgsl, os.path.join(dest, "_wgsl"))
    else:
        with zipfile.ZipFile(source) as z:
            z.extractall(os.path.join(folder, "unpacked"))
        shutil.copytree(os.path.join(folder, "unpacked", "wgcompute"), dest)
    for root, _, files in os.walk(dest):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(root, f)
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                fixed = text.replace('"wgcompute.', f'"{NAME}.')
                if fixed != text:
                    with open(path, "w", encoding="utf-8") as fh:
                        fh.write(fixed)
    sys.path.insert(0, folder)
    import importlib

    return importlib.import_module(NAME)


def contestant(w):
    """The timed calls of one version, warmed up, each checked once against numpy."""
    x = np.arange(N_TINY, dtype=np.float32)
    a, b, out = w.from_numpy(x), w.from_numpy(2 * x), w.empty((N_TINY,), "f32")
    cmd = {"op": "run_kernel", "kernel": "elementwise_add", "inputs": [a, b], "output": out}
    wait_fence = sys.modules[w.__name__ + "._queue"].wait
    pc = time.perf_counter

    def run_kernel():
        t = pc()
        w.run_kernel("elementwise_add", [a, b], out)
        return (pc() - t,)

    def submit_wait():
        t0 = pc()
        c = w.submit(cmd)
        t1 = pc()
        wait_fence(c._fence)
        t2 = pc()
        c.wait()
        t3 = pc()
        return t3 - t0, t1 - t0, t2 - t1, t3 - t2

    for _ in range(300):
        run_kernel()
        submit_wait()
    if not np.array_equal(out.to_numpy(), 3 * x):
        raise AssertionError(f"{w.__name__}: elementwise_add gave a wrong result")
    return {"run_kernel": run_kernel, "submit+wait": submit_wait}


ROWS = {"run_kernel": ("run_kernel",),
        "submit+wait": ("submit + wait", "  submit() returns", "  polling wait for the fence",
                        "  Command.wait() after it")}


def work_rows(w, size: int, batch: int, n_add: int, n_mm: int) -> dict:
    """Rows of real work, each call blocking as a user's script does: an elementwise add, a
    whole-buffer sum, a matmul and MobileNetV2 (random weights, numpy in -> numpy out) at
    batch 1 and ``batch``. Warmed up (the model's first calls tune), checked once."""
    from wgcompute.ml.builders import mobilenet_v2

    rng = np.random.default_rng(0)
    x = rng.standard_normal(n_add, dtype=np.float32)
    a, b, out = w.from_numpy(x), w.from_numpy(x), w.empty((n_add,), "f32")
    ma = rng.standard_normal((n_mm, n_mm), dtype=np.float32)
    ga, gb, gc = w.from_numpy(ma), w.from_numpy(ma), w.empty((n_mm, n_mm), "f32")
    model = w.ml.load_onnx(mobilenet_v2(seed=0, size=size, softmax=True).SerializeToString())
    img1 = rng.random((1, 3, size, size), dtype=np.float32)
    imgs = rng.random((batch, 3, size, size), dtype=np.float32)
    pc = time.perf_counter
    # a version whose functions queue their work is waited for as a script that reads the
    # result would (the older versions' calls wait themselves)
    sync = getattr(w, "synchronize", None) or (lambda: None)

    def timed(fn):
        def row():
            t = pc()
            fn()
            return (pc() - t,)
        return row

    def total():
        s = w.reduce_sum(a, axis=None)
        sync()
        s.free()

    rows = {f"add {n_add >> 20}M f32": timed(lambda: w.run_kernel("elementwise_add", [a, b],
                                                                     out)),
            f"sum {n_add >> 20}M f32": timed(total),
            f"matmul {n_mm}x{n_mm}x{n_mm} f32": timed(lambda: (w.matmul(ga, gb, gc), sync())),
            f"MobileNetV2 {size}px batch 1": timed(lambda: model(img1)),
            f"MobileNetV2 {size}px batch {batch}": timed(lambda: model(imgs))}
    for fn in rows.values():
        for _ in range(3):
            fn()
    if not np.array_equal(out.to_numpy(), 2 * x):
        raise AssertionError(f"{w.__name__}: elementwise_add gave a wrong result")
    got = gc.to_numpy()
    if not np.allclose(got, ma.astype(np.float64) @ ma, rtol=1e-3, atol=1e-2 * np.sqrt(n_mm)):
        raise AssertionError(f"{w.__name__}: matmul gave a wrong result")
    return {"work": rows, "model": model, "img": img1}


def bootstrap_interval(ratios: np.ndarray, level: float = 0.95, n: int = 4000):
    """The ``level`` percentile interval of the median of ``ratios`` over ``n`` resamples of
    the rounds (fixed seed: the same data give the same interval)."""
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(ratios), size=(n, len(ratios)))
    medians = np.median(ratios[picks], axis=1)
    tail = (1 - level) / 2 * 100
    return float(np.percentile(medians, tail)), float(np.percentile(medians, 100 - tail))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--other", required=True, help="the other version: a wheel or a package "
                                                   "folder")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--block", type=int, default=300, help="calls per version per round")
    ap.add_argument("--json")
    ap.add_argument("--work", action="store_true",
                    help="also rows of real work: add and sum of 16M f32, a 1024 matmul, "
                         "MobileNetV2 224px at batch 1 and 32 (blocks of --block / 15 calls)")
    ap.add_argument("--small", action="store_true",
                    help="with --work: sizes for a CPU adapter (1M add, 256 matmul, 96px, "
                         "batch 4)")
    args = ap.parse_args(argv)
    import wgcompute as this

    if this.device_info()["backend"] == "OpenGL":
        # each copy opens its own device, and wgpu's GL backend shares one EGL context among
        # an adapter's devices: used from two threads it aborts the process (wgcompute itself
        # refuses a second GL device; two copies cannot see each other's)
        print("ab_versions: wgpu's GL backend shares one GL context among devices, and the two "
              "versions would each open one; compare them on Vulkan, Metal or D3D12",
              file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory() as folder:
        other = import_other(args.other, folder)
        versions = {"other": contestant(other), "this": contestant(this)}
        rows_of = dict(ROWS)
        blocks = dict.fromkeys(ROWS, args.block)
        if args.work:
            sizes = (96, 4, 1 << 20, 256) if args.small else (224, 32, 1 << 24, 1024)
            work = {v: work_rows(w, *sizes) for v, w in (("other", other), ("this", this))}
            same = np.abs(work["other"]["model"](work["other"]["img"])
                          - work["this"]["model"](work["this"]["img"])).max()
            print(f"MobileNetV2 batch 1: the two versions' outputs differ by at most {same:.2e}")
            for name in work["this"]["work"]:
                rows_of[name] = (name,)
                blocks[name] = max(3, args.block // 15)
                for v in versions:
                    versions[v][name] = work[v]["work"][name]
        medians = {}  # (version, row) -> per-round medians (us)
        for r in range(args.rounds):
            order = ("other", "this") if r % 2 == 0 else ("this", "other")
            for kind, names in rows_of.items():
                for v in order:
                    fn = versions[v][kind]
                    samples = [fn() for _ in range(blocks[kind])]
                    for i, name in enumerate(names):
                        medians.setdefault((v, name), []).append(
                            statistics.median(s[i] for s in samples) * 1e6)
        print(f"this {this.__version__} ({this.__file__}) against {other.__version__} "
              f"({args.other}); {args.rounds} alternating rounds of {args.block} calls, one "
              f"process; device: {this.device_info()['name']}")
        print("| row | other (us) | this (us) | this / other, median of rounds | 95% interval |")
        print("|---|---:|---:|---:|---:|")
        rows = []
        for names in rows_of.values():
            for name in names:
                o, t = medians[("other", name)], medians[("this", name)]
                ratios = np.array(t) / np.array(o)
                ratio = float(np.median(ratios))
                lo, hi = bootstrap_interval(ratios)
                rows.append({"row": name.strip(), "other_us": statistics.median(o),
                             "this_us": statistics.median(t), "ratio": ratio,
                             "interval": [lo, hi]})
                print(f"| {name} | {rows[-1]['other_us']:.2f} | {rows[-1]['this_us']:.2f} | "
                      f"{ratio:.3f} | {lo:.3f} – {hi:.3f} |")
        if callable(getattr(other, "current_device", None)):  # a runtime object: close it
            other.current_device().close()
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"this": this.__version__, "other": other.__version__,
                           "device": this.device_info()["name"], "rounds": args.rounds,
                           "block": args.block, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
