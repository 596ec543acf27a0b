"""Why a long-lived process gets slower: one run that rules each suspect in or out with a
measurement and prints a verdict table (JSON and markdown under $OUT, or --json).

Reproduces the slowdown (5x5 gaussian on 4096^2 f32, ten queued launches and one wait, wall
clock and GPU timestamps, fresh, then after the mixed sequence of bench_soak) and then varies
one thing at a time: the buffers made before the mixed work; new buffers; new buffers after
every big buffer and the staging are freed; images of 16 MB to 1 GB (sub-allocated vs given
a memory block of their own); buffers allocated in another order; each buffer the blur binds
(image in and out, its temporary, its weights, the params buffers of its two passes) swapped
alone between a fresh set and a set made after the mixed work (GPU time); the helper threads
present vs shut down (CPU time each thread used meanwhile); the caches cleared; clocks,
throttle reasons and memory from nvidia-smi; Vulkan's memory heaps, types and budget from
vulkaninfo; and, in a fresh child process, the same before and after CUDA starts through
torch. Uses wgcompute internals through benchmarks/steady.py's adapters.

    python -m benchmarks.probe_steady [--small] [--json PATH] [--no-cuda]

wgpu-native 29's memory allocation (wgpu-hal's Vulkan backend, read in gfx-rs/wgpu): since
wgpu 28 it sub-allocates with gpu-allocator (gpu-alloc before). Memory blocks per memory type
start at 128 MB for device memory and 64 MB for host memory (wgt::MemoryHints::Performance)
and double with each new block up to 256 / 128 MB; a request larger than the current block
gets a block of its own; a block is freed once its last allocation is. Buffers without
MAP_READ/MAP_WRITE (every wgcompute Buffer, params buffers, the blur's temporaries) ask for
GpuOnly memory (DEVICE_LOCAL required); MAP_WRITE staging for CpuToGpu (HOST_VISIBLE |
HOST_COHERENT, DEVICE_LOCAL preferred: the BAR aperture where the driver exposes one);
MAP_READ staging for GpuToCpu (HOST_CACHED preferred). So: the 16 and 64 MB images are
sub-allocated, 256 MB fills a block, 1 GB gets its own; a 1 GB spacer allocated first pushes
the images into the next block; small buffers (weights, params) share blocks with whatever
came before them."""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks import steady
from benchmarks.steady import FULL, SMALL, Blur

SLOW = 0.85  # a figure below 85% of fresh counts as slow


# -- the blur's parts, each buffer it binds swappable ------------------------------------------

ROLES = ("image in", "weights", "tmp", "image out", "params x", "params y")


class BlurSet:
    """A Blur with its bound dispatch taken apart: the GPU buffer behind each role."""

    def __init__(self, blur: Blur):
        self.blur = blur
        d = blur.dispatch()
        self.parts = steady.dispatch_parts(d)
        tmp, wts = d.temps[0].gpu_buffer, d.temps[1].gpu_buffer
        self.buffers = {"image in": blur.src.gpu_buffer, "weights": wts, "tmp": tmp,
                        "image out": blur.out.gpu_buffer,
                        "params x": self.parts[0]["uniform"], "params y": self.parts[1]["uniform"]}
        # storage bindings of the x pass (src, wts -> tmp) and the y pass (tmp, wts -> out)
        self.storage = [("image in", "weights", "tmp"), ("tmp", "weights", "image out")]


def mixed_gpu_us(old: BlurSet, new: BlurSet, from_new: set) -> float | None:
    """GPU time of the two blur passes binding ``new``'s buffer for the roles in ``from_new``
    and ``old``'s for the others."""
    dev = steady.gpu_device()
    pick = {r: (new if r in from_new else old).buffers[r] for r in ROLES}
    steps = []
    for i, part in enumerate(old.parts):
        entries = [{"binding": j, "resource": {"buffer": pick[r]}}
                   for j, r in enumerate(old.storage[i])]
        entries.append({"binding": len(entries), "resource": {
            "buffer": pick["params x" if i == 0 else "params y"], "offset": 0,
            "size": part["uniform_size"]}})
        bg = dev.create_bind_group(layout=part["layout"], entries=entries)
        steps.append((part["pipeline"], bg, part["workgroups"]))

    def record(cpass):
        for pipeline, bg, wg in steps:
            cpass.set_pipeline(pipeline)
            cpass.set_bind_group(0, bg)
            cpass.dispatch_workgroups(*wg)

    t = steady.gpu_seconds(record, repeat=9)
    return None if t is None else t * 1e6


# -- the probe ---------------------------------------------------------------------------------

class Probe:
    def __init__(self, sizes, log=print):
        self.s = sizes
        self.rows = []
        self.fresh = {}
        self.log = log

    def row(self, phase, variant, fig: dict, ref_key="4096"):
        ref = self.fresh.get(ref_key, {})
        r = {"phase": phase, "variant": variant, **{k: v for k, v in fig.items()}}
        for k in ("wall_mpix_s", "gpu_mpix_s"):
            if fig.get(k) and ref.get(k):
                r[k.replace("mpix_s", "ratio")] = fig[k] / ref[k]
        self.rows.append(r)
        self.log(f"  {phase:<12} {variant:<48} wall {fig.get('wall_mpix_s', 0):>10,.0f} "
                 f"GPU {fig.get('gpu_mpix_s') or 0:>10,.0f} Mpix/s"
                 + (f"  ({r.get('wall_ratio', 0):.2f} / {r.get('gpu_ratio', 0):.2f} of fresh)"
                    if "wall_ratio" in r else ""))
        return r


def image_sizes(s) -> list[int]:
    limit = steady.device().limit("max-storage-buffer-binding-size")
    sides = [2048, 4096, 8192, 16384] if s.image >= 4096 else [128, 256, 512, 1024]
    return [n for n in sides if 4 * n * n <= limit]


def run_main(s, no_cuda: bool, log=print) -> dict:
    w = steady.wgc()
    out = {"sizes": s.__dict__, "env": {}, "snapshots": []}
    info = w.device_info()
    out["env"] = {"device": info["name"], "backend": info["backend"], "driver": info["driver"],
                  "wgpu": info["wgpu_version"], "wgcompute": info["version"]}
    log(f"device: {info['name']} ({info['backend']}, {info['driver']})")
    out["vulkan_memory_before"] = steady.vulkan_memory()
    out["snapshots"].append(steady.snapshot("start"))
    p = Probe(s, log)
    ref = str(s.image)

    # 1. fresh: every image size, plus the sets kept for later
    log("fresh process:")
    keep = {}
    for n in image_sizes(s):
        b = Blur(n)
        fig = b.measure(s.blur_launches)
        p.fresh[str(n)] = fig
        if n == s.image:
            fig["max_rel_err"] = b.check()
            keep["A"] = b
            p.fresh["4096"] = fig
        else:
            b.free()
        p.row("fresh", f"{n}x{n} ({4 * n * n >> 20} MB)", fig, str(n))
    a_set = BlurSet(keep["A"])
    base = steady.thread_cpu()

    # 2. the mixed sequence, its buffers kept alive for now
    log("mixed sequence:")
    held = []
    out["mixed_seconds"] = steady.mixed_sequence(s, keep=held, log=log)
    out["snapshots"].append(steady.snapshot("after mixed"))

    # 3. after it
    log("after the mixed sequence:")
    p.row("after", "(a) buffers made before", keep["A"].measure(s.blur_launches), ref)
    cpu0 = steady.thread_cpu()
    b_new = Blur(s.image)
    r = p.row("after", "(b) new buffers", b_new.measure(s.blur_launches), ref)
    r["thread_cpu_s"] = steady.cpu_delta(cpu0, steady.thread_cpu())
    b_set = BlurSet(b_new)

    # one buffer at a time between the fresh set and the new one (GPU time only)
    log("each buffer the blur binds, swapped alone (GPU us of both passes):")
    swap = {"all fresh": mixed_gpu_us(a_set, b_set, set()),
            "all new": mixed_gpu_us(a_set, b_set, set(ROLES))}
    for role in ROLES:
        swap[f"fresh set, new {role}"] = mixed_gpu_us(a_set, b_set, {role})
        swap[f"new set, fresh {role}"] = mixed_gpu_us(a_set, b_set, set(ROLES) - {role})
    for k, v in swap.items():
        log(f"  {k:<36} {'' if v is None else f'{v:9.1f} us'}")
    out["swap_gpu_us"] = swap

    # (e) allocation order
    for label, make in (("(e) output allocated before input", _reversed_blur),
                        ("(e) after a 4 KB buffer", _after_small),
                        ("(e) after a 1 GB spacer (freed)", _after_spacer)):
        b = make(s.image)
        p.row("after", label, b.measure(s.blur_launches), ref)
        b.free()

    # (d) sizes
    for n in image_sizes(s):
        b = Blur(n)
        p.row("after", f"(d) new {n}x{n} ({4 * n * n >> 20} MB)", b.measure(s.blur_launches),
              str(n))
        b.free()

    # (c) free every big buffer and the staging
    for x in held:
        x.free()
    held.clear()
    released = steady.release_staging()
    gc.collect()
    b = Blur(s.image)
    p.row("after", f"(c) new, after freeing all + release_staging ({released >> 20} MB)",
          b.measure(s.blur_launches), ref)
    b.free()

    # threads: their CPU while the blur ran, then shut down
    out["threads_before_shutdown"] = sorted(t for t in steady.thread_cpu())
    out["thread_cpu_whole_run_s"] = steady.cpu_delta(base, steady.thread_cpu())
    stopped = steady.shut_down_helper_threads()
    b = Blur(s.image)
    p.row("after", "(t) new, helper threads shut down", b.measure(s.blur_launches), ref)
    b.free()
    p.row("after", "(t) buffers made before, threads shut down",
          keep["A"].measure(s.blur_launches), ref)
    out["threads_stopped"] = stopped

    # caches
    out["caches_before_clear"] = steady.cache_sizes()
    steady.clear_caches()
    p.row("after", "(k) buffers made before, caches cleared (new params)",
          keep["A"].measure(s.blur_launches), ref)
    p.row("after", "(k) new buffers, caches cleared", b_new.measure(s.blur_launches), ref)
    out["caches_after_clear"] = steady.cache_sizes()
    out["snapshots"].append(steady.snapshot("end"))
    out["vulkan_memory_after"] = steady.vulkan_memory()
    b_new.free()
    keep["A"].free()
    out["fresh"] = p.fresh
    out["rows"] = p.rows

    if not no_cuda:
        log("CUDA started through torch, in a fresh child process:")
        out["cuda"] = run_child(["--part", "cuda"] + (["--small"] if s is SMALL else []), log)
    out["verdicts"] = verdicts(out)
    return out


def _reversed_blur(n):
    w = steady.wgc()
    b = Blur.__new__(Blur)
    b.n = n
    b.out = w.empty((n, n), "f32", label="blur-out")
    b.src = w.empty((n, n), "f32", label="blur-in")
    w.fill(b.src, 0.5)
    return b


def _after_small(n):
    w = steady.wgc()
    pad = w.empty((1024,), "f32")
    b = Blur(n)
    pad.free()
    return b


def _after_spacer(n):
    w = steady.wgc()
    limit = steady.device().limit("max-buffer-size")
    pad = w.empty((min(1 << 28, limit // 4),), "f32")
    b = Blur(n)
    pad.free()
    return b


# -- CUDA, in a child process ------------------------------------------------------------------

def run_cuda(s, log=print) -> dict:
    """Blur, 64-FMA kernel and matmul before and after ``torch.zeros(1, device="cuda")``, with
    the sets made before and new ones, and the swaps of the blur's buffers."""
    out = {"rows": []}
    try:
        import torch
    except ImportError:
        return {"skipped": "torch is not importable"}
    if not torch.cuda.is_available():
        return {"skipped": "torch sees no CUDA device"}
    p = Probe(s, log)
    a = Blur(s.image)
    p.fresh["4096"] = a.measure(s.blur_launches)
    p.row("before CUDA", "blur, buffers made now", p.fresh["4096"])
    a_set = BlurSet(a)
    fma_before = steady.fma_figure(s)
    mm_before = steady.matmul_figure(s)
    out["nvidia_smi_before"] = steady.nvidia_smi()
    t0 = time.perf_counter()
    torch.zeros(1, device="cuda")
    out["cuda_init_s"] = time.perf_counter() - t0
    out["nvidia_smi_after"] = steady.nvidia_smi()
    p.row("after CUDA", "blur, buffers made before", a.measure(s.blur_launches))
    b = Blur(s.image)
    p.row("after CUDA", "blur, new buffers", b.measure(s.blur_launches))
    b_set = BlurSet(b)
    swap = {"all fresh": mixed_gpu_us(a_set, b_set, set()),
            "all new": mixed_gpu_us(a_set, b_set, set(ROLES))}
    for role in ROLES:
        swap[f"fresh set, new {role}"] = mixed_gpu_us(a_set, b_set, {role})
        swap[f"new set, fresh {role}"] = mixed_gpu_us(a_set, b_set, set(ROLES) - {role})
    out["swap_gpu_us"] = swap
    out["fma"] = {"before": fma_before, "after": steady.fma_figure(s)}
    out["matmul"] = {"before": mm_before, "after": steady.matmul_figure(s)}
    out["rows"] = p.rows
    out["fresh"] = p.fresh
    a.free()
    b.free()
    return out


def run_child(args: list[str], log=print) -> dict:
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    cmd = [sys.executable, "-m", "benchmarks.probe_steady", *args, "--json", path, "--quiet"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            return {"error": r.stderr[-2000:]}
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return {"error": str(e)}
    finally:
        os.unlink(path)
    for line in data.pop("log", []):
        log(line)
    return data


# -- verdicts ----------------------------------------------------------------------------------

def _ratio_of(rows, variant_start):
    for r in rows:
        if r["variant"].startswith(variant_start):
            return r
    return None


def _fmt_ratio(r) -> str:
    if r is None:
        return "not measured"
    g = r.get("gpu_ratio")
    return (f"wall {r.get('wall_ratio', float('nan')):.2f}x fresh"
            + (f", GPU {g:.2f}x" if g else ""))


def _slow(r) -> bool | None:
    if r is None:
        return None
    v = r.get("gpu_ratio") or r.get("wall_ratio")
    return None if v is None else v < SLOW


def verdicts(out: dict) -> list[dict]:
    rows = out.get("rows", [])
    v = []

    def add(suspect, evidence, verdict):
        v.append({"suspect": suspect, "evidence": evidence, "verdict": verdict})

    new = _ratio_of(rows, "(b)")
    old = _ratio_of(rows, "(a)")
    add("slowdown reproduced (new buffers after the mixed sequence)", _fmt_ratio(new),
        "reproduced" if _slow(new) else "not reproduced")
    if new and new.get("gpu_ratio") and new.get("wall_ratio"):
        dev = new["gpu_ratio"] < SLOW
        add("on the device or on the host", _fmt_ratio(new),
            "device: the kernels themselves run slower" if dev else
            ("host: GPU time as fresh, wall slower" if new["wall_ratio"] < SLOW else "neither"))
    add("buffers made before the mixed work", _fmt_ratio(old),
        "slow too" if _slow(old) else "stay fast")
    swap = out.get("swap_gpu_us") or {}
    fresh_us, new_us = swap.get("all fresh"), swap.get("all new")
    if fresh_us and new_us and new_us > fresh_us / SLOW:
        add("the gap the swaps below explain (GPU time of both passes)",
            f"all fresh {fresh_us:.0f} us, all new {new_us:.0f} us", "gap")
    elif fresh_us and new_us:
        add("the swaps of single buffers", f"all fresh {fresh_us:.0f} us, all new "
            f"{new_us:.0f} us: no gap to explain", "not needed")
    if fresh_us and new_us and new_us > fresh_us / SLOW:
        for role in ROLES:
            one_new = swap.get(f"fresh set, new {role}")
            one_old = swap.get(f"new set, fresh {role}")
            if one_new is None or one_old is None:
                continue
            hurts = one_new > fresh_us / SLOW
            heals = one_old < new_us * SLOW
            add(f"placement of the blur's {role} buffer",
                f"fresh set {fresh_us:.0f} us, with a new {role} {one_new:.0f} us; new set "
                f"{new_us:.0f} us, with the fresh {role} {one_old:.0f} us",
                "IN: a new one alone slows the blur and the fresh one heals it"
                if hurts and heals else "partly: a new one alone slows it" if hurts else
                "partly: the fresh one alone heals it" if heals else "out")
    for start, suspect in (("(c)", "freeing every big buffer and release_staging()"),
                           ("(t) new", "helper threads (trim timer, copy/fault/readback "
                            "pools, poll thread) shut down"),
                           ("(k) new", "caches cleared (bind cache: bind groups, params)")):
        r = _ratio_of(rows, start)
        add(suspect, _fmt_ratio(r), "does not restore speed" if _slow(r) else
            ("restores speed" if _slow(new) else "as fresh"))
    sizes = [r for r in rows if r["variant"].startswith("(d)")]
    if sizes:
        add("image size (sub-allocated vs a block of its own)",
            "; ".join(f"{r['variant'][8:].split(' ')[0]} "
                      f"{r.get('gpu_ratio') or r.get('wall_ratio', 0):.2f}x" for r in sizes),
            "size matters" if len({bool(_slow(r)) for r in sizes}) > 1 else
            ("all slow" if all(_slow(r) for r in sizes) else "no size is slow"))
    for r in (x for x in rows if x["variant"].startswith("(e)")):
        add(f"allocation order: {r['variant'][4:]}", _fmt_ratio(r),
            "slow" if _slow(r) else "fast")
    threads = out.get("rows") and new and new.get("thread_cpu_s")
    if threads:
        add("threads' CPU while the new-buffer blur ran",
            ", ".join(f"{k} {t:.2f} s"
                      for k, t in sorted(threads.items(), key=lambda x: -x[1])[:6]),
            "see wall vs GPU above")
    smi0 = (out.get("snapshots") or [{}])[0].get("nvidia_smi")
    smi1 = (out.get("snapshots") or [{}])[-1].get("nvidia_smi")
    if smi0 and smi1:
        keys = ("clocks.sm", "clocks.mem", "pstate", "clocks_throttle_reasons.active",
                "memory.used")
        add("clocks, throttling, memory (nvidia-smi start -> end)",
            "; ".join(f"{k.split('.')[-1]} {smi0.get(k)} -> {smi1.get(k)}" for k in keys),
            "compare")
    vk0 = _vk_device(out.get("vulkan_memory_before"), out["env"].get("device", ""))
    vk1 = _vk_device(out.get("vulkan_memory_after"), out["env"].get("device", ""))
    if vk0 and vk1:
        add("Vulkan memory types (index: heap, flags)",
            "; ".join(f"{t['index']}: heap {t.get('heap')} {'|'.join(t['flags']) or '-'}"
                      for t in vk0["types"]), "as reported")
        add("Vulkan heaps: size, budget start -> end (MB)",
            "; ".join(f"heap {h0['index']} {'|'.join(h0['flags']) or '-'} {h0.get('size_mb')}: "
                      f"{h0.get('budget_mb')} -> {h1.get('budget_mb')}"
                      for h0, h1 in zip(vk0["heaps"], vk1["heaps"], strict=False)),
            "compare" if any("budget_mb" in h for h in vk0["heaps"]) else
            "no VK_EXT_memory_budget")
    else:
        add("Vulkan heaps and budget", "vulkaninfo not found (install vulkan-tools)",
            "not measured")
    cuda = out.get("cuda") or {}
    if cuda.get("rows"):
        r_old = _ratio_of(cuda["rows"], "blur, buffers made before")
        r_new = _ratio_of(cuda["rows"], "blur, new buffers")
        add("CUDA started (torch) after the device: blur, buffers made before",
            _fmt_ratio(r_old), "slow" if _slow(r_old) else "fast")
        add("CUDA started (torch) after the device: blur, new buffers",
            _fmt_ratio(r_new), "slow" if _slow(r_new) else "fast")
        fb, fa = cuda["fma"]["before"], cuda["fma"]["after"]
        add("CUDA started: 64-FMA kernel (GPU Gelem/s, before -> after)",
            f"{fb.get('fma_gpu_gelem_s') or fb['fma_wall_gelem_s']:.1f} -> "
            f"{fa.get('fma_gpu_gelem_s') or fa['fma_wall_gelem_s']:.1f}",
            "slow" if (fa.get("fma_gpu_gelem_s") or fa["fma_wall_gelem_s"]) <
            SLOW * (fb.get("fma_gpu_gelem_s") or fb["fma_wall_gelem_s"]) else "fast")
        cs = cuda.get("swap_gpu_us") or {}
        if cs.get("all fresh") and cs.get("all new"):
            worst = max(ROLES, key=lambda r: cs.get(f"fresh set, new {r}") or 0)
            add("CUDA started: which buffer's placement (the swap that hurts most)",
                f"fresh {cs['all fresh']:.0f} us, all new {cs['all new']:.0f} us, fresh set "
                f"with a new {worst}: {cs.get(f'fresh set, new {worst}'):.0f} us", "see row")
    elif cuda:
        add("CUDA started through torch", cuda.get("skipped") or cuda.get("error", "")[:200],
            "not measured")
    return v


def _vk_device(mem, name: str):
    devices = (mem or {}).get("devices") or []
    for d in devices:
        if name and (name in d["device"] or d["device"] in name):
            return d
    return devices[0] if devices else None


def markdown(out: dict) -> str:
    lines = ["| suspect | measured | verdict |", "|---|---|---|"]
    for v in out.get("verdicts", []):
        lines.append(f"| {v['suspect']} | {v['evidence']} | {v['verdict']} |")
    lines += ["", "| phase | variant | wall Mpix/s | GPU Mpix/s | wall / fresh | GPU / fresh |",
              "|---|---|---:|---:|---:|---:|"]
    for r in out.get("rows", []) + (out.get("cuda") or {}).get("rows", []):
        lines.append(f"| {r['phase']} | {r['variant']} | {r.get('wall_mpix_s', 0):,.0f} | "
                     f"{r.get('gpu_mpix_s') or 0:,.0f} | {r.get('wall_ratio', 1):.2f} | "
                     f"{r.get('gpu_ratio') or 0:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="small sizes (lavapipe, CI)")
    ap.add_argument("--json", default="", help="write the results here (default $OUT/...)")
    ap.add_argument("--no-cuda", action="store_true", help="skip the CUDA child process")
    ap.add_argument("--part", choices=("main", "cuda"), default="main", help=argparse.SUPPRESS)
    ap.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    lines: list[str] = []

    def log(text):
        lines.append(text)
        if not args.quiet:
            print(text, flush=True)

    sizes = steady.fit(SMALL if args.small else FULL)
    t0 = time.perf_counter()
    out = run_cuda(sizes, log) if args.part == "cuda" else run_main(sizes, args.no_cuda, log)
    out["seconds"] = time.perf_counter() - t0
    if args.quiet:
        out["log"] = lines
    path = args.json or (os.path.join(os.environ["OUT"], "probe_steady.json")
                         if os.environ.get("OUT") else "")
    if args.part == "main":
        md = markdown(out)
        print("\n" + md)
        print(f"\n({out['seconds']:.0f} s)")
        if os.environ.get("OUT") and not args.json:
            os.makedirs(os.environ["OUT"], exist_ok=True)
            with open(os.path.join(os.environ["OUT"], "probe_steady.md"), "w",
                      encoding="utf-8") as f:
                f.write(md + "\n")
    if path:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
