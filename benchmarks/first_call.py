"""A model's first call on a fresh tuning cache, in a fresh process, and its steady state
before and after the background tuning: MobileNetV2 (wgcompute's builder, torchvision's
architecture, random weights) and ResNet-50 (torchvision's, exported, where torch and
torchvision are importable), at each --batches size; numpy in -> numpy out, wall clock.

Each case runs in its own interpreter with an empty WGCOMPUTE_CACHE_DIR (no tuned choices;
one `import wgcompute` before it leaves there what any earlier process leaves, wgpu-native's C
header parsed): "load" is load_onnx, "first call" the first model(x) (device opening,
compiling, binding; tuning in the background unless --tune now), "steady (defaults)" the
median of --repeat calls right after it, "steady (tuned)" the same after wgc.autotune_wait().

    python -m benchmarks.first_call [--batches 1,32] [--models mobilenetv2,resnet50]
        [--tune background|now] [--repeat 20] [--small] [--json PATH]"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks.harness import save_rows

CHILD = r"""
import json, statistics, sys, time
t0 = time.perf_counter()
import numpy as np
import wgcompute as wgc
path, batch, size, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
t1 = time.perf_counter()
m = wgc.ml.load_onnx(path)
t2 = time.perf_counter()
x = np.random.default_rng(0).standard_normal((batch, 3, size, size)).astype(np.float32)
y0 = m(x)
t3 = time.perf_counter()
def steady():
    ts = []
    for _ in range(repeat):
        a = time.perf_counter(); m(x); ts.append(time.perf_counter() - a)
    return statistics.median(ts)
s_default = steady()
t4 = time.perf_counter()
wgc.autotune_wait(timeout=900)
t5 = time.perf_counter()
m(x)
s_tuned = steady()
y1 = m(x)
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "first": t3 - t2, "steady_default":
                  s_default, "tuning_left": t5 - t4, "steady_tuned": s_tuned,
                  "max_abs_diff": float(np.abs(y1 - y0).max()),
                  "device": wgc.current_device().name}))
"""


def export_resnet50(folder: str) -> str | None:
    try:
        import torch
        import torchvision
    except ImportError as e:
        print(f"resnet50: skipped ({e.name} is not importable)")
        return None
    net = torchvision.models.resnet50(weights=None).eval()
    path = os.path.join(folder, "resnet50.onnx")
    torch.onnx.export(net, torch.zeros(1, 3, 224, 224), path, input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "N"}},
                      opset_version=17, dynamo=False)
    return path


def models(folder: str, names: list[str], small: bool) -> dict[str, tuple[str, int]]:
    import onnx

    from wgcompute.ml.builders import mobilenet_v2

    out = {}
    size = 64 if small else 224
    if "mobilenetv2" in names:
        path = os.path.join(folder, "mobilenetv2.onnx")
        onnx.save(mobilenet_v2(size=size, width=0.5 if small else 1.0), path)
        out["MobileNetV2"] = (path, size)
    if "resnet50" in names and not small:
        path = export_resnet50(folder)
        if path:
            out["ResNet-50"] = (path, 224)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--models", default="mobilenetv2,resnet50")
    ap.add_argument("--tune", choices=("background", "now"), default="background")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--small", action="store_true", help="sizes that run in seconds on lavapipe")
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    if args.small:
        batches, args.repeat = [1, 2], 3
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name, (path, size) in models(folder, args.models.split(","), args.small).items():
            for b in batches:
                cache = tempfile.mkdtemp(dir=folder)
                env = dict(os.environ, WGCOMPUTE_CACHE_DIR=cache, WGCOMPUTE_AUTOTUNE=args.tune
                           if not args.small else "background")
                subprocess.run([sys.executable, "-c", "import wgcompute"], env=env, timeout=300,
                               check=True)
                t0 = time.perf_counter()
                r = subprocess.run([sys.executable, "-c", CHILD, path, str(b), str(size),
                                    str(args.repeat)], capture_output=True, text=True,
                                   env=env, timeout=1800)
                if r.returncode != 0:
                    print(f"{name} batch {b}: failed\n{r.stderr[-2000:]}")
                    return 1
                res = json.loads(r.stdout.strip().splitlines()[-1])
                res.update(model=name, batch=b, process=time.perf_counter() - t0)
                rows.append(res)
                print(f"{name} batch {b}: first call {res['first']:.2f} s (load "
                      f"{res['load']:.2f} s, import {res['import']:.2f} s), steady "
                      f"{res['steady_default'] * 1e3:.2f} ms with defaults, "
                      f"{res['steady_tuned'] * 1e3:.2f} ms tuned ({res['tuning_left']:.1f} s "
                      f"of tuning left after the defaults' runs)", flush=True)
    print("\n| model | batch | import | load | first call | steady, defaults | steady, tuned |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | {r['batch']} | {r['import']:.2f} s | {r['load']:.2f} s | "
              f"{r['first']:.2f} s | {r['steady_default'] * 1e3:.2f} ms | "
              f"{r['steady_tuned'] * 1e3:.2f} ms |")
    if rows:
        print(f"\ndevice: {rows[0]['device']}; tuning: {args.tune}")
    save_rows(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
