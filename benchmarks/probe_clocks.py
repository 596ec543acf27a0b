"""Probe: does the blur's speed follow the GPU's clocks (power management) or what the process
has allocated? One process, nvidia-smi sampling every 50 ms beside it, each measurement tagged
with the clocks sampled while it ran. Prints a table; JSON under $OUT."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import wgcompute as wgc
from benchmarks.harness import GPU_TS, gpu_time

BLUR = {"radius": 2, "sigma": 1.0}
QUERY = "timestamp,clocks.sm,clocks.mem,power.draw,pstate,clocks_event_reasons.active"


def now() -> float:
    return time.time()


class Sampler:
    def __init__(self):
        self.path = tempfile.mktemp(suffix=".csv")
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                 "-lms", "50"], stdout=open(self.path, "w"), stderr=subprocess.DEVNULL)
        except FileNotFoundError:
            self.proc = None

    def stop(self) -> list[tuple]:
        if self.proc is None:
            return []
        self.proc.terminate()
        self.proc.wait()
        rows = []
        for line in open(self.path):
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 6:
                continue
            try:
                ts = time.mktime(time.strptime(parts[0].split(".")[0], "%Y/%m/%d %H:%M:%S"))
                ts += float("0." + parts[0].split(".")[1]) if "." in parts[0] else 0.0
                rows.append((ts, float(parts[1]), float(parts[2]), float(parts[3]), parts[4],
                             parts[5]))
            except (ValueError, IndexError):
                continue
        return rows


class Blur:
    def __init__(self, n=4096):
        self.n = n
        self.src = wgc.empty((n, n), "f32")
        self.out = wgc.empty((n, n), "f32")
        wgc.fill(self.src, 0.5)

    def gpu_us(self) -> float:
        from wgcompute.commands import bound

        d = bound(wgc.kernel_info("gaussian_blur"), [self.src], self.out, BLUR)
        t, how = gpu_time(None, record_pass=d.encode, warmup=1, repeat=5)
        return t * 1e6 if how == GPU_TS else float("nan")

    def wall_us(self, count=10) -> float:
        wgc.run_kernel_async("gaussian_blur", [self.src], self.out, BLUR).wait()
        t0 = time.perf_counter()
        last = None
        for _ in range(count):
            last = wgc.run_kernel_async("gaussian_blur", [self.src], self.out, BLUR)
        last.wait()
        return (time.perf_counter() - t0) / count * 1e6


def main() -> int:
    out_dir = os.environ.get("OUT", "/tmp")
    sampler = Sampler()
    time.sleep(0.5)
    events = []
    blur = Blur()
    mpix = blur.n * blur.n / 1e6

    def measure(label):
        t0 = now()
        g = blur.gpu_us()
        w = blur.wall_us()
        t1 = now()
        events.append({"label": label, "t0": t0, "t1": t1, "gpu_mpix_s": mpix / g * 1e6,
                       "wall_mpix_s": mpix / w * 1e6})
        print(f"  {label:<44} GPU {mpix / g * 1e6:9,.0f}  wall {mpix / w * 1e6:9,.0f} Mpix/s",
              flush=True)

    def busy(seconds):
        a = wgc.empty((4096, 4096), "f32")
        b = wgc.empty((4096, 4096), "f32")
        c = wgc.empty((4096, 4096), "f32")
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            cmds = [wgc.run_kernel_async("matmul", [a, b], c) for _ in range(4)]
            cmds[-1].wait()
        for x in (a, b, c):
            x.free()

    print("fresh process, 4096^2 f32 5x5 blur", flush=True)
    for i in range(3):
        measure(f"fresh #{i}")
        time.sleep(0.3)
    time.sleep(3)
    measure("after 3 s idle")
    busy(2.0)
    measure("right after 2 s of matmuls")
    time.sleep(3)
    measure("after 3 s idle")
    big = np.ones(64 << 20, np.float32)  # 256 MB
    hold = wgc.from_numpy(big)
    got = hold.to_numpy()
    assert got[0] == 1
    measure("256 MB up+down done (staging pooled)")
    released = wgc.release_staging()
    measure(f"release_staging ({released >> 20} MB)")
    hold.write(big)
    _ = hold.to_numpy()
    measure("256 MB up+down again")
    adds = [wgc.empty((64 << 20,), "f32") for _ in range(3)]
    wgc.add(adds[0], adds[1], adds[2])
    measure("3 x 256 MB buffers alive")
    for x in adds + [hold]:
        x.free()
    wgc.release_staging()
    measure("all freed")
    busy(2.0)
    measure("right after 2 s of matmuls")
    # sustained: 300 blurs queued back to back
    t0 = now()
    tt = time.perf_counter()
    last = None
    for _ in range(300):
        last = wgc.run_kernel_async("gaussian_blur", [blur.src], blur.out, BLUR)
    last.wait()
    per = (time.perf_counter() - tt) / 300
    events.append({"label": "300 queued back to back", "t0": t0, "t1": now(),
                   "gpu_mpix_s": None, "wall_mpix_s": mpix / per})
    print(f"  {'300 queued back to back':<44} wall {mpix / per:9,.0f} Mpix/s", flush=True)
    measure("right after that")
    time.sleep(3)
    measure("after 3 s idle")
    # the clock under a continuous queue: 4 s of blurs, never waiting in between
    t0 = now()
    tt = time.perf_counter()
    n = 0
    while time.perf_counter() - tt < 4.0:
        cmds = [wgc.run_kernel_async("gaussian_blur", [blur.src], blur.out, BLUR)
                for _ in range(50)]
        n += 50
        cmds[-1].wait()
    per = (time.perf_counter() - tt) / n
    events.append({"label": f"4 s of blurs queued ({n})", "t0": t0, "t1": now(),
                   "gpu_mpix_s": None, "wall_mpix_s": mpix / per})
    print(f"  {'4 s of blurs queued':<44} wall {mpix / per:9,.0f} Mpix/s", flush=True)
    measure("right after that")
    time.sleep(3)
    measure("after 3 s idle")
    try:
        import torch

        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        measure("a CUDA context made (torch)")
        time.sleep(3)
        measure("after 3 s idle, CUDA context alive")
    except Exception as e:  # noqa: BLE001 - torch is optional here
        print("  (no CUDA context:", e, ")")
    time.sleep(0.2)
    samples = sampler.stop()
    print("\nclocks while each measurement ran (nvidia-smi, 50 ms samples):")
    print(f"  {'measurement':<44} {'GPU Mpix/s':>11} {'SM MHz':>14} {'mem MHz':>14} "
          f"{'W':>9}  pstate  reasons")
    for e in events:
        inside = [s for s in samples if e["t0"] - 0.05 <= s[0] <= e["t1"] + 0.05]
        if not inside:
            inside = sorted(samples, key=lambda s: abs(s[0] - e["t0"]))[:1]
        e["samples"] = inside
        sm = [s[1] for s in inside]
        mem = [s[2] for s in inside]
        pw = [s[3] for s in inside]
        fmt = (lambda v: f"{min(v):.0f}-{max(v):.0f}" if v else "-")
        g = e["gpu_mpix_s"]
        g = "-" if g is None else f"{g:,.0f}"
        print(f"  {e['label']:<44} {g:>11} {fmt(sm):>14} "
              f"{fmt(mem):>14} {fmt(pw):>9}  {','.join(sorted({s[4] for s in inside}))}  "
              f"{','.join(sorted({s[5] for s in inside}))}")
    print("\nthe clock, every 250 ms:")
    if samples:
        t_start = samples[0][0]
        marks = sorted((e["t0"], e["label"]) for e in events)
        last = -1.0
        for s_ in samples:
            if s_[0] - last < 0.25:
                continue
            last = s_[0]
            here = [lab for t, lab in marks if s_[0] - 0.25 < t <= s_[0]]
            print(f"  {s_[0] - t_start:6.2f} s  SM {s_[1]:5.0f}  mem {s_[2]:5.0f}  "
                  f"{s_[3]:6.1f} W  {s_[5]}  {'<- ' + '; '.join(here) if here else ''}")
    with open(os.path.join(out_dir, "probe_clocks.json"), "w") as f:
        json.dump({"events": events, "samples": samples}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
