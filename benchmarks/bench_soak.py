"""Soak: the mixed sequence of a long-lived program (64M-element adds, a 4096^3 matmul, tiny
round trips, 100-stage pipelines, 256 MB transfers) repeated for --minutes in ONE process,
with four figures measured between passes next to their fresh-process values: the 5x5 blur
on 4096^2 f32 (Mpix/s), the 4096^3 f32 matmul (TFLOP/s), the tiny round trip (us), the 64-FMA
kernel (Gelem/s) and its stream_map (GB/s); plus live GPU objects, live wgcompute buffers and
the process's RSS. Each fresh value comes from a process of its own that measures only it.
Every figure is wall clock of launches queued the way the docs recommend (one wait), with the
GPU time of the same dispatch beside it where the adapter has timestamps.

    python -m benchmarks.bench_soak [--minutes 10] [--torch-at SECONDS] [--small]
                                    [--json PATH] [--png PATH] [--fresh-from JSON]
    python -m benchmarks.bench_soak --plot-from PATH.json [--png PATH]

Goal: every figure within 10% of fresh for the whole run; objects and RSS flat after
warm-up. --torch-at initializes CUDA through torch at that second (when torch is importable).
--small: sizes for lavapipe, one minute."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks import steady

TOLERANCE = 0.10
# figure key -> (label, unit, higher is better)
SERIES = {
    "blur": ("5x5 blur 4096² f32", "Mpix/s", "wall_mpix_s", "gpu_mpix_s", True),
    "matmul": ("f32 matmul 4096³", "TFLOP/s", "wall_tflops", "gpu_tflops", True),
    "round_trip": ("tiny round trip", "µs", "round_trip_us", None, False),
    "fma": ("64-FMA kernel", "Gelem/s", "fma_wall_gelem_s", "fma_gpu_gelem_s", True),
    "stream": ("64-FMA stream_map", "GB/s", "stream_gb_s", None, True),
}
_FIGURE_OF = {"blur": "blur", "matmul": "matmul", "round_trip": "round_trip", "fma": "fma",
              "stream": "fma"}


def measure(name: str, sizes) -> dict:
    return steady.FIGURES[name](sizes)


def fresh_values(small: bool, log=print, runs: int = 3) -> dict:
    """Each figure measured in new processes of its own, ``runs`` of them, alternating
    figures; the median of each value. (Host latencies are bimodal from process to process:
    the same tiny round trip measured 37 to 60 us in four fresh processes on an H200, so one
    fresh process is no reference.) ``runs_<key>`` keeps every process's value."""
    per: dict[str, list] = {}
    for _ in range(max(1, runs)):
        for name in steady.FIGURES:
            cmd = [sys.executable, "-m", "benchmarks.bench_soak", "--fresh", name]
            cmd += ["--small"] if small else []
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                raise RuntimeError(f"fresh {name} failed:\n{r.stderr[-2000:]}")
            for k, v in json.loads(r.stdout.strip().splitlines()[-1]).items():
                per.setdefault(k, []).append(v)
            log(f"  fresh {name}: {time.perf_counter() - t0:.1f} s")
    out = {}
    for k, vs in per.items():
        nums = [v for v in vs if isinstance(v, (int, float))]
        out[k] = statistics.median(nums) if len(nums) == len(vs) else vs[-1]
        if len(nums) == len(vs) and len(vs) > 1:
            out[f"runs_{k}"] = vs
    return out


def values(fig: dict) -> dict:
    """The plotted values of one measurement: {series: (wall, gpu)}."""
    return {k: (fig.get(wk), fig.get(gk) if gk else None)
            for k, (_l, _u, wk, gk, _h) in SERIES.items() if wk in fig}


def ratio(series: str, value, fresh) -> float | None:
    """value as a fraction of fresh, oriented so that 1.0 is as fast and < 1 is slower."""
    if not value or not fresh:
        return None
    return value / fresh if SERIES[series][4] else fresh / value


def soak(args, sizes, fresh: dict, log=print) -> dict:
    t_start = time.perf_counter()
    deadline = t_start + args.minutes * 60
    torch_done = None
    samples = []
    passes = 0
    batches = None
    while True:
        now = time.perf_counter() - t_start
        if args.torch_at is not None and torch_done is None and now >= args.torch_at:
            torch_done = start_cuda(log)
            torch_done["t"] = time.perf_counter() - t_start
        steady.mixed_sequence(sizes, log=lambda _t: None)
        passes += 1
        fig = {}
        for name in ("blur", "matmul", "round_trip"):
            fig.update(measure(name, sizes))
        if batches is None:
            import numpy as np

            base = np.linspace(-1, 1, sizes.fma, dtype=np.float32)
            batches = [base + np.float32(i) for i in range(sizes.fma_batches)]
        fig.update(steady.fma_figure(sizes, batches))
        snap = steady.live_objects()
        sample = {"t": time.perf_counter() - t_start, "passes": passes, **fig,
                  "sm_mhz": steady.sm_clock(),
                  "gpu_objects": snap["gpu_objects"], "wgc_buffers": snap["wgc_buffers"],
                  "rss_mb": steady.rss_mb(), "cuda": torch_done is not None
                  and "error" not in torch_done}
        samples.append(sample)
        log(line(sample, fresh))
        if time.perf_counter() >= deadline:
            break
    return {"samples": samples, "torch": torch_done, "passes": passes}


def start_cuda(log) -> dict:
    try:
        import torch
    except ImportError:
        log("  --torch-at: torch is not importable; CUDA not started")
        return {"error": "torch not importable"}
    if not torch.cuda.is_available():
        log("  --torch-at: torch sees no CUDA device")
        return {"error": "no CUDA device"}
    t0 = time.perf_counter()
    torch.zeros(1, device="cuda")
    log(f"  CUDA started through torch ({time.perf_counter() - t0:.1f} s)")
    return {"init_s": time.perf_counter() - t0}


def line(s: dict, fresh: dict) -> str:
    parts = [f"{s['t']:6.0f} s"]
    for k, (_label, unit, wk, _gk, _h) in SERIES.items():
        if wk in s:
            r = ratio(k, s[wk], fresh.get(wk))
            parts.append(f"{k} {s[wk]:,.4g} {unit}" + (f" ({r:.2f})" if r else ""))
    parts.append(f"objects {s['gpu_objects']} buffers {s['wgc_buffers']} "
                 f"RSS {s['rss_mb']:.0f} MB" + (" [CUDA]" if s.get("cuda") else "")
                 + (f" SM {s['sm_mhz']} MHz" if s.get("sm_mhz") else ""))
    return " | ".join(parts)


def summary(data: dict) -> tuple[str, dict]:
    fresh, samples = data["fresh"], data["samples"]
    rows = ["| figure | fresh | median | worst | worst / fresh | within 10% | worst minute's "
            "median / fresh | samples within 10% |", "|---|---:|---:|---:|---:|---|---:|---:|"]
    verdict = {}
    for k, (label, unit, wk, gk, higher) in SERIES.items():
        vals = [s[wk] for s in samples if s.get(wk)]
        if not vals or not fresh.get(wk):
            continue
        worst = min(vals) if higher else max(vals)
        r = ratio(k, worst, fresh[wk])
        ok = r >= 1 - TOLERANCE
        verdict[k] = ok
        minutes: dict[int, list] = {}
        for smp in samples:
            if smp.get(wk):
                minutes.setdefault(int(smp["t"] // 60), []).append(smp[wk])
        per_minute = [ratio(k, statistics.median(v), fresh[wk]) for v in minutes.values()]
        share = sum(ratio(k, v, fresh[wk]) >= 1 - TOLERANCE for v in vals) / len(vals)
        rows.append(f"| {label} ({unit}, wall) | {fresh[wk]:,.4g} | {statistics.median(vals):,.4g}"
                    f" | {worst:,.4g} | {r:.2f} | {'yes' if ok else '**no**'} | "
                    f"{min(per_minute):.2f} | {share:.1%} |")
        gv = [s[gk] for s in samples if gk and s.get(gk)]
        if gv and fresh.get(gk):
            gworst = min(gv)
            rows.append(f"| {label} ({unit}, GPU time) | {fresh[gk]:,.4g} | "
                        f"{statistics.median(gv):,.4g} | {gworst:,.4g} | "
                        f"{gworst / fresh[gk]:.2f} | "
                        f"{'yes' if gworst / fresh[gk] >= 1 - TOLERANCE else 'no'} | | |")
    warm_i = min(len(samples) - 1, max(1, len(samples) // 5))
    # CUDA's own context (--torch-at) adds its memory once: growth is measured on each side
    cuda_i = next((i for i, smp in enumerate(samples) if smp.get("cuda")), None)
    segments = [(warm_i, len(samples) - 1)]
    if cuda_i is not None and cuda_i > warm_i:
        segments = [(warm_i, cuda_i - 1), (cuda_i, len(samples) - 1)]
    warm, last = samples[warm_i], samples[-1]
    for key, label, tol in (("gpu_objects", "live GPU objects", 0.02),
                            ("wgc_buffers", "live wgcompute buffers", 0.02),
                            ("rss_mb", "RSS (MB)", 0.05)):
        grew = sum(samples[b][key] - samples[a][key] for a, b in segments)
        flat = grew <= max(tol * warm[key], 2 if key != "rss_mb" else 64)
        verdict[key] = flat
        step = ""
        if len(segments) == 2:
            jump = samples[cuda_i][key] - samples[cuda_i - 1][key]
            step = f" (CUDA's start at t={samples[cuda_i]['t']:.0f} s: {jump:+,.0f}, left out)"
        rows.append(f"| {label}: after warm-up (t={warm['t']:.0f} s) → end{step} | "
                    f"{warm[key]:,.0f} | | {last[key]:,.0f} | {grew:+,.0f} | "
                    f"{'flat' if flat else '**grows**'} | | |")
    return "\n".join(rows), verdict


def plot(data: dict, path: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    samples, fresh = data["samples"], data["fresh"]
    keys = [k for k in SERIES if any(SERIES[k][2] in s for s in samples)]
    fig, axes = plt.subplots(len(keys) + 1, 1, figsize=(10, 2.4 * (len(keys) + 1)), sharex=True)
    t = [s["t"] for s in samples]
    torch_t = (data.get("torch") or {}).get("t")
    for ax, k in zip(axes, keys, strict=False):
        label, unit, wk, gk, _h = SERIES[k]
        ax.plot(t, [s.get(wk) for s in samples], "o-", ms=3, label="wall")
        if gk and any(s.get(gk) for s in samples):
            ax.plot(t, [s.get(gk) for s in samples], "s--", ms=3, label="GPU time")
        if fresh.get(wk):
            ax.axhline(fresh[wk], color="k", lw=1, label="fresh process (wall)")
            for f in (1 - TOLERANCE, 1 + TOLERANCE):
                ax.axhline(fresh[wk] * f, color="grey", lw=0.6, ls=":")
        if torch_t is not None:
            ax.axvline(torch_t, color="r", lw=1, label="CUDA started")
        ax.set_ylabel(f"{label}\n{unit}", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    ax = axes[-1]
    ax.plot(t, [s["gpu_objects"] for s in samples], label="live GPU objects")
    ax.plot(t, [s["wgc_buffers"] for s in samples], label="live wgcompute buffers")
    ax2 = ax.twinx()
    ax2.plot(t, [s["rss_mb"] for s in samples], color="m", label="RSS (MB)")
    ax2.set_ylabel("RSS MB", fontsize=8)
    ax.legend(fontsize=7, loc="upper left")
    ax2.legend(fontsize=7, loc="upper right")
    ax.set_xlabel("seconds in the process")
    fig.suptitle(f"soak: {data.get('env', {}).get('device', '?')}", fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=None, help="how long (10; --small: 1)")
    ap.add_argument("--torch-at", type=float, default=None, metavar="SECONDS",
                    help="initialize CUDA through torch at this second of the soak")
    ap.add_argument("--small", action="store_true", help="lavapipe sizes")
    ap.add_argument("--hold-clocks", action="store_true",
                    help="WGCOMPUTE_HOLD_CLOCKS=1 here and in the fresh processes: keep an "
                         "NVIDIA GPU's SM clock up between bursts (docs/guide/devices.md)")
    ap.add_argument("--json", default="", help="results (default $OUT/bench_soak.json)")
    ap.add_argument("--png", default="", help="plot (default next to the JSON)")
    ap.add_argument("--fresh-from", default="", metavar="JSON",
                    help="take the fresh values from an earlier run's JSON")
    ap.add_argument("--fresh-runs", type=int, default=3, metavar="N",
                    help="fresh processes per figure; the median is the reference (3)")
    ap.add_argument("--fresh-only", action="store_true",
                    help="measure the fresh values, write them, stop")
    ap.add_argument("--plot-from", default="", metavar="JSON", help="only redraw the PNG")
    ap.add_argument("--summary-from", default="", metavar="JSON",
                    help="only print the summary table of an earlier run")
    ap.add_argument("--fresh", choices=tuple(steady.FIGURES), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.summary_from:
        with open(args.summary_from, encoding="utf-8") as f:
            table, verdict = summary(json.load(f))
        print(table)
        return 0 if all(verdict.values()) else 1
    if args.plot_from:
        with open(args.plot_from, encoding="utf-8") as f:
            data = json.load(f)
        png = args.png or os.path.splitext(args.plot_from)[0] + ".png"
        ok = plot(data, png)
        print(f"PNG: {png}" if ok else "PNG: matplotlib not installed")
        return 0 if ok else 1
    if args.hold_clocks:
        os.environ["WGCOMPUTE_HOLD_CLOCKS"] = "1"  # before any device opens; children too
    if args.minutes is not None and args.minutes <= 0:
        ap.error("--minutes: expected a positive number")
    sizes = steady.fit(steady.SMALL if args.small else steady.FULL)
    if args.fresh:  # child: one figure in a fresh process
        print(json.dumps(measure(args.fresh, sizes)))
        return 0
    minutes = args.minutes if args.minutes is not None else (1.0 if args.small else 10.0)
    args.minutes = minutes
    out_dir = os.environ.get("OUT", "")
    path = args.json or (os.path.join(out_dir, "bench_soak.json") if out_dir else "")
    info = steady.wgc().device_info()
    print(f"device: {info['name']} ({info['backend']}); sizes {sizes}", flush=True)
    if args.fresh_from:
        with open(args.fresh_from, encoding="utf-8") as f:
            fresh = json.load(f)["fresh"]
    else:
        print("fresh processes:", flush=True)
        fresh = fresh_values(args.small, lambda t: print(t, flush=True), args.fresh_runs)
    data = {"env": {"device": info["name"], "backend": info["backend"],
                    "driver": info["driver"], "wgpu": info["wgpu_version"],
                    "wgcompute": info["version"], "command": " ".join(sys.argv),
                    "clocks_held": info.get("clocks_held", False)},
            "sizes": sizes.__dict__, "fresh": fresh, "minutes": minutes,
            "torch_at": args.torch_at}
    print("fresh: " + ", ".join(f"{k} {v:,.4g}" for k, v in fresh.items()
                                if isinstance(v, float)), flush=True)
    if not args.fresh_only:
        print(f"soak, {minutes:g} min:", flush=True)
        data.update(soak(args, sizes, fresh, lambda t: print(t, flush=True)))
        table, verdict = summary(data)
        data["verdict"] = verdict
        data["summary"] = table
        print("\n" + table)
        print("\ngoal " + ("MET" if all(verdict.values()) else "MISSED") + ": every figure "
              "within 10% of fresh, objects and RSS flat after warm-up")
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, default=str)
        print(f"JSON: {path}")
        if not args.fresh_only:
            png = args.png or os.path.splitext(path)[0] + ".png"
            print(f"PNG: {png}" if plot(data, png) else "PNG: matplotlib not installed "
                  "(redraw with --plot-from)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
