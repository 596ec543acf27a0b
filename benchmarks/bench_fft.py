"""The fft extension against CuPy / torch (cuFFT), in ONE run: complex64 fft and ifft of 2^24
points, rfft of 2^24 float32, fftn of 4096², batched rows and a strided axis, and a length
that is not a power of two (Bluestein). Wall times are of the user's call (median, result
kept as a loop keeps it); GPU time is the transform's dispatches alone; the peers' GPU time
is by CUDA events.

    python -m benchmarks.bench_fft [--small] [--json PATH]

--small: sizes lavapipe finishes in about a minute. With $OUT set the JSON also goes to
$OUT/bench_fft.json."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from benchmarks.harness import (
    CUDA_EVENT,
    WALL,
    Results,
    cuda_time,
    gpu_time,
    max_rel_err,
    peers,
    wall_time,
)


def _cases(small: bool):
    big = 1 << (16 if small else 24)
    side = 256 if small else 4096
    return [("fft", (big,), {}, "c64"), ("ifft", (big,), {}, "c64"),
            ("rfft", (big,), {}, "f32"), ("fftn", (side, side), {}, "c64"),
            ("fft", (side * 4, side // 4), {}, "c64"), ("fft", (side, side), {"axis": 0}, "c64"),
            ("fft", (1000, 1000) if not small else (100, 100), {}, "c64")]


def _gpu(fn_name, x, kw, repeat):
    """GPU time of the transform's dispatches, recorded as the namespace records them."""
    from wgcompute.array_api import fft as F

    calls = []
    real = F._Work.finish

    def keep(self, result):
        calls[:] = self.calls
        return real(self, result)

    F._Work.finish = keep
    try:
        getattr(F, fn_name)(x, **kw)
    finally:
        F._Work.finish = real
    link = x.device.link
    return gpu_time(None, record_pass=lambda cpass: link.record_wgpu_pass(cpass, calls),
                    repeat=repeat)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--repeat", type=int, default=None)
    args = ap.parse_args(argv)

    import wgcompute as wgc
    import wgcompute.array_api as xp

    repeat = args.repeat or (5 if args.small else 20)
    dev = wgc.current_device()
    res = Results("wgcompute fft" + (" (--small)" if args.small else ""),
                  reference="wgcompute.array_api.fft")
    print(f"{dev.name} ({dev.backend})", flush=True)
    rng = np.random.default_rng(0)
    found = peers()
    for name, shape, kw, dt in _cases(args.small):
        a = rng.standard_normal(shape).astype(np.float32)
        if dt == "c64":
            a = (a + 1j * rng.standard_normal(shape)).astype(np.complex64)
        case = f"{name} {dt} {shape}" + (f" {kw}" if kw else "")
        x = wgc.from_numpy(a)
        f = getattr(xp.fft, name)
        want = getattr(np.fft, name)(a, **kw)
        holder = {}

        def ours(f=f, x=x, kw=kw, holder=holder):
            holder["y"] = f(x, **kw)

        t = wall_time(ours, warmup=2, repeat=repeat)
        err = max_rel_err(holder["y"].to_numpy(), want)
        res.add(case, "wgcompute", t, timing=WALL, max_rel_err=err)
        print(f"  {case:<40} wgcompute {t * 1e3:9.3f} ms [{WALL}] err {err:.1e}", flush=True)
        tg, how = _gpu(name, x, kw, repeat)
        res.add(case, "wgcompute (GPU)", tg, timing=how)
        print(f"  {case:<40} wgcompute {tg * 1e3:9.3f} ms [{how}]", flush=True)
        holder.clear()
        for peer, mod in found.items():
            try:
                xa = mod.from_numpy(a).cuda() if peer == "torch" else mod.asarray(a)
                pf = getattr(mod.fft, name)
                pkw = {"dim": kw["axis"]} if peer == "torch" and "axis" in kw else kw

                def theirs(pf=pf, xa=xa, pkw=pkw, mod=mod, peer=peer, holder=holder):
                    holder["p"] = pf(xa, **pkw)
                    (mod.cuda.synchronize() if peer == "torch"
                     else mod.cuda.runtime.deviceSynchronize())

                tw = wall_time(theirs, warmup=2, repeat=repeat)
                res.add(case, f"{peer} (wall, synchronized)", tw, timing=WALL)
                tc = cuda_time(mod, lambda pf=pf, xa=xa, pkw=pkw: pf(xa, **pkw), repeat=repeat)
                res.add(case, peer, tc, timing=CUDA_EVENT)
                print(f"  {case:<40} {peer} {tw * 1e3:9.3f} ms wall, {tc * 1e3:.3f} ms GPU",
                      flush=True)
                holder.clear()
            except Exception as e:  # a peer failing must not stop the run
                print(f"  {peer} failed: {e}", file=sys.stderr)
        x.free()
    res.report(args.json, "bench_fft.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
