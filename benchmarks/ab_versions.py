"""Two wgcompute versions in ONE process, the tiny-kernel round trip measured in alternating
blocks: both see the same process, memory layout, threads and GPU clock, which fresh processes
do not (on an H200 the same round trip measured 37 to 60 us between fresh processes of one
version, so process-to-process comparisons of a few us need many rounds and still mislead).

The other version comes from a wheel or a package folder (a source checkout's ``wgcompute``;
a version older than the kernel family folders also takes its ``shaders`` folder from beside
it); it is imported as ``wgc_other``
(unpacked into a temporary folder, its package renamed). Rows: ``run_kernel`` (blocking) and
``submit(...).wait()``, the latter split in phases: submit() returning, the polling wait for
its fence, and Command.wait() after it. Each row: both medians and the median of the per-round
ratios (this version / the other).

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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--other", required=True, help="the other version: a wheel or a package "
                                                   "folder")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--block", type=int, default=300, help="calls per version per round")
    ap.add_argument("--json")
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
        medians = {}  # (version, row) -> per-round medians (us)
        for r in range(args.rounds):
            order = ("other", "this") if r % 2 == 0 else ("this", "other")
            for kind, names in ROWS.items():
                for v in order:
                    fn = versions[v][kind]
                    samples = [fn() for _ in range(args.block)]
                    for i, name in enumerate(names):
                        medians.setdefault((v, name), []).append(
                            statistics.median(s[i] for s in samples) * 1e6)
        print(f"this {this.__version__} ({this.__file__}) against {other.__version__} "
              f"({args.other}); {args.rounds} alternating rounds of {args.block} calls, one "
              f"process; device: {this.device_info()['name']}")
        print("| row | other (us) | this (us) | this / other, median of rounds |")
        print("|---|---:|---:|---:|")
        rows = []
        for names in ROWS.values():
            for name in names:
                o, t = medians[("other", name)], medians[("this", name)]
                ratio = statistics.median(b / a for a, b in zip(o, t, strict=True))
                rows.append({"row": name.strip(), "other_us": statistics.median(o),
                             "this_us": statistics.median(t), "ratio": ratio})
                print(f"| {name} | {rows[-1]['other_us']:.2f} | {rows[-1]['this_us']:.2f} | "
                      f"{ratio:.3f} |")
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
