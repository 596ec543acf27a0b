"""The array API namespace against CuPy and torch, in ONE run: sort of 64M f32,
cumulative_sum of 64M f32, FFT of 2^24 complex64, linalg.solve of a batch of 64×64 systems,
svd of 4096×1024 f32. Each row is the median wall clock of the call as a user makes it
(``xp.sort(x)``, which queues the work) followed by ``wgc.synchronize()``, beside the peers'
call followed by their device synchronize, and the ratio wgcompute / peer; results are
checked against numpy.

    python -m benchmarks.bench_array_api [--small] [--only NAME,...] [--json PATH]

--small: sizes that lavapipe finishes in about a minute. With $OUT set the JSON also goes to
$OUT/bench_array_api.json. The rows' functions are composites of several kernels, so there is
no single GPU-timestamp span to report; the peers' CUDA-event time is printed beside their
wall clock."""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from benchmarks.harness import Results, cuda_time, peers, wall_time


def cases(small: bool) -> dict:
    """name -> (make numpy inputs, numpy reference, wgcompute call, peer call, tolerance)."""
    n = (1 << 20) if small else (64 << 20)
    nfft = (1 << 14) if small else (1 << 24)
    batch = 64 if small else 4096
    m, k = (512, 128) if small else (4096, 1024)  # both past PARALLEL_SVD_N: the parallel path
    rng = np.random.default_rng(0)

    def spd():
        a = rng.standard_normal((batch, 64, 64), dtype=np.float32)
        return (a @ a.transpose(0, 2, 1) / 64 + np.eye(64, dtype=np.float32),
                rng.standard_normal((batch, 64, 1), dtype=np.float32))

    return {
        f"sort {n >> 20}M f32": (
            lambda: (rng.standard_normal(n, dtype=np.float32),), np.sort,
            lambda xp, x: xp.sort(x), lambda mod, x: mod.sort(x), 0.0),
        f"cumulative_sum {n >> 20}M f32": (
            lambda: (rng.random(n, dtype=np.float32),),
            lambda x: np.cumsum(x, dtype=np.float64),
            lambda xp, x: xp.cumulative_sum(x),
            lambda mod, x: mod.cumsum(x, 0) if mod.__name__ == "torch" else mod.cumsum(x),
            1e-3),
        f"fft 2^{nfft.bit_length() - 1} complex64": (
            lambda: ((rng.standard_normal(nfft) + 1j * rng.standard_normal(nfft))
                     .astype(np.complex64),), np.fft.fft,
            lambda xp, x: xp.fft.fft(x), lambda mod, x: mod.fft.fft(x), 1e-3),
        f"linalg.solve {batch}x64x64 f32": (
            spd, np.linalg.solve, lambda xp, a, b: xp.linalg.solve(a, b),
            lambda mod, a, b: mod.linalg.solve(a, b), 1e-3),
        f"svd {m}x{k} f32 (values)": (
            lambda: (rng.standard_normal((m, k), dtype=np.float32),),
            lambda a: np.linalg.svd(a.astype(np.float64), compute_uv=False),
            lambda xp, a: xp.linalg.svdvals(a),
            lambda mod, a: mod.linalg.svdvals(a) if mod.__name__ == "torch"
            else mod.linalg.svd(a, compute_uv=False), 1e-3),
    }


def _peer_inputs(mod, arrays):
    if mod.__name__ == "torch":
        return [mod.from_numpy(a).cuda() for a in arrays]
    return [mod.asarray(a) for a in arrays]


def _peer_sync(mod):
    return mod.cuda.synchronize if mod.__name__ == "torch" else \
        mod.cuda.runtime.deviceSynchronize


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated row-name prefixes")
    ap.add_argument("--json", default=None)
    ap.add_argument("--repeat", type=int, default=None)
    args = ap.parse_args(argv)

    import wgcompute as wgc
    import wgcompute.array_api as xp

    dev = wgc.current_device()
    import time

    for _ in range(30):  # the default hold of an NVIDIA GPU's clocks is made on a thread
        if dev.clocks_held:
            break
        time.sleep(0.1)
    repeat = args.repeat or (3 if args.small else 10)
    res = Results("array API namespace" + (" (--small)" if args.small else ""),
                  reference="wgcompute")
    print(f"{dev.name} ({dev.backend}); clocks held: {dev.clocks_held}", flush=True)
    others = peers()
    only = [p.strip() for p in args.only.split(",") if p.strip()]
    for name, (make, ref, ours, theirs, tol) in cases(args.small).items():
        if only and not any(name.startswith(p) for p in only):
            continue
        arrays = make()
        want = ref(*arrays)
        ins = [xp.asarray(a) for a in arrays]
        holder = {}

        def run(ours=ours, ins=ins, holder=holder):
            holder["r"] = ours(xp, *ins)
            wgc.synchronize()  # the result computed, as the peers' device synchronize

        slow = args.small and name.startswith("svd")  # seconds a call on lavapipe
        try:
            t = wall_time(run, warmup=1, repeat=1 if slow else repeat)
        except Exception as e:  # noqa: BLE001 - a refusal is a row too
            print(f"  {name:<34} wgcompute refused: {type(e).__name__}: {e}", flush=True)
            res.add(name, "wgcompute", float("nan"), note=f"refused: {type(e).__name__}: {e}")
            continue
        got = holder["r"].to_numpy()
        err = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30)) \
            if want.size else 0.0  # relative to the result's scale (complex too)
        ok = err <= tol
        res.add(name, "wgcompute", t, max_rel_err=err, note="" if ok else "WRONG")
        print(f"  {name:<34} {'wgcompute':<10} {t * 1e3:9.3f} ms wall  err {err:.1e}"
              f"{'' if ok else '  WRONG'}", flush=True)
        for pname, mod in others.items():
            pins = _peer_inputs(mod, arrays)
            sync = _peer_sync(mod)

            def prun(mod=mod, pins=pins, sync=sync, theirs=theirs):
                theirs(mod, *pins)
                sync()

            pt = wall_time(prun, warmup=1, repeat=repeat)
            ct = cuda_time(mod, lambda mod=mod, pins=pins, theirs=theirs: theirs(mod, *pins),
                           1, repeat)
            row = res.add(name, pname, pt, note=f"{ct * 1e3:.3f} ms CUDA events")
            print(f"  {name:<34} {pname:<10} {pt * 1e3:9.3f} ms wall  {ct * 1e3:9.3f} ms "
                  f"CUDA events;  wgcompute / {pname} = {t / pt:.2f}", flush=True)
            del row
    print(res.markdown())
    path = args.json or (os.path.join(os.environ["OUT"], "bench_array_api.json")
                         if os.environ.get("OUT") else None)
    if path:
        res.write_json(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
