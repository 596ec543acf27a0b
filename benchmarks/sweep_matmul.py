"""Every matmul tile configuration candidate that fits the adapter, timed on the shapes the
goals name, with the autotuner bypassed (each config pinned through ``_config``): f32, f16 at
precision "mixed" (f16 sums within each k slice) and f16 at precision "f32". One table row per
(dtype, precision, shape, config): ms, TFLOP/s, max relative error against numpy, and torch's
TFLOP/s for the same shape when torch and CUDA are importable. Pick defaults from it.

    python -m benchmarks.sweep_matmul [--quick] [--out PATH.json] [--only KIND[,KIND]]
                                      [--configs NAME[,NAME]] [--extra NAME[,NAME]]
                                      [--shapes MxNxK[,MxNxK]]

Shapes: 4096³, 4096×4096×8192 and 8192×64×8192 (--quick: 128³, 128×128×256, 256×64×256, for
CPU adapters such as lavapipe). KINDs: f32, f16-mixed, f16-f32. Times are the median of 5
repetitions after a warm-up, each repetition several matmuls in one compute pass (enough for
a few ms of GPU work), measured with GPU timestamps where the adapter has them (wall time of
submit + wait otherwise). The error is max|C − A·B| / max|A·B| of the timed result against
numpy's f64 product of the same (f16-rounded) inputs, computed once per dtype and shape.
torch runs f32 with TF32 off and f16 with its default settings (tensor cores: not the same
arithmetic, listed for scale). A config that fails to build or run is printed with its
error and the sweep goes on."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback

import numpy as np

from benchmarks.harness import CUDA_EVENT, cuda_time, env_info, gpu_time, max_rel_err, peers

FULL_SHAPES = [(4096, 4096, 4096), (4096, 4096, 8192), (8192, 64, 8192)]
QUICK_SHAPES = [(128, 128, 128), (128, 128, 256), (256, 64, 256)]
KINDS = {"f32": ("f32", "f32"), "f16-mixed": ("f16", "mixed"), "f16-f32": ("f16", "f32")}
REPEAT = 5
# FLOPs of GPU work per timed repetition: enough matmuls in the pass that launch gaps and
# timestamp resolution do not matter (1 for the big shapes, up to 10 for the skinny one)
TARGET_FLOPS = {"full": 2.5e11, "quick": 4e6}
MAX_INNER = 10


def parse_shape(text: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape {text!r} is not MxNxK") from None
    if min(m, n, k) < 1:
        raise argparse.ArgumentTypeError(f"shape {text!r}: sizes must be positive")
    return m, n, k


def inner_count(flops: float, quick: bool) -> int:
    return max(1, min(MAX_INNER, round(TARGET_FLOPS["quick" if quick else "full"] / flops)))


class Sweep:
    def __init__(self, args):
        import wgcompute as wgc
        from wgcompute import current_device as get_device
        from wgcompute.kernels import bind, get
        from wgcompute.kernels.matmul import matmul as mm

        self.wgc, self.mm, self.bind = wgc, mm, bind
        self.kernel = get("matmul")
        self.device = get_device()
        self.args = args
        self.rows: list[dict] = []
        self.torch = peers().get("torch")
        self.rng = np.random.default_rng(7)
        self.inputs: dict = {}  # (dtype, shape) -> (a, b, want) numpy, made once
        self.torch_results: dict = {}  # (dtype, shape) -> (TFLOP/s or None, note)

    # -- one (dtype, shape) ------------------------------------------------------------------
    def operands(self, dtype: str, shape):
        """Random inputs of this dtype and their f64 product (once per dtype and shape)."""
        key = (dtype, shape)
        if key not in self.inputs:
            for old in [x for x in self.inputs if x[1] != shape]:
                del self.inputs[old]  # keep one shape's arrays in memory at a time
            m, n, k = shape
            npd = self.wgc.DTYPES[dtype].numpy
            t0 = time.perf_counter()
            a = self.rng.uniform(-1, 1, (m, k)).astype(npd)
            b = self.rng.uniform(-1, 1, (k, n)).astype(npd)
            want = a.astype(np.float64) @ b.astype(np.float64)
            took = time.perf_counter() - t0
            if took > 2:
                print(f"    (numpy reference for {dtype} {fmt_shape(shape)}: {took:.1f} s)",
                      flush=True)
            self.inputs[key] = (a, b, want)
        return self.inputs[key]

    def torch_tflops(self, dtype: str, shape, a, b, want) -> tuple[float | None, str]:
        """torch's TFLOP/s for this dtype and shape (CUDA events), once per dtype and shape."""
        key = (dtype, shape)
        if key in self.torch_results:
            return self.torch_results[key]
        result: tuple[float | None, str] = (None, "")
        if self.torch is not None:
            torch = self.torch
            try:
                ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
                tout = torch.empty((shape[0], shape[1]), device="cuda", dtype=ta.dtype)
                t = cuda_time(torch, lambda: torch.matmul(ta, tb, out=tout), repeat=REPEAT)
                err = max_rel_err(tout.cpu().numpy(), want)
                note = ("f32, TF32 off" if dtype == "f32"
                        else "f16 default settings: tensor cores")
                result = (flops(shape) / t / 1e12, f"torch {torch.__version__} ({note}) "
                          f"{t * 1e3:.3f} ms, err {err:.1e} [{CUDA_EVENT}]")
                del ta, tb, tout
                torch.cuda.empty_cache()
            except Exception as e:  # a peer failing must not stop the sweep
                result = (None, f"torch failed: {first_line(e)}")
        self.torch_results[key] = result
        return result

    def configs(self, kind: str) -> list:
        dtype, precision = KINDS[kind]
        configs = self.mm.Matmul.candidates(dtype, self.device, precision)
        if self.args.configs:
            configs = [c for c in configs if c.name in self.args.configs]
        known = {c.name for c in configs}
        for name in self.args.extra:  # configs to try that are no candidate (yet)
            c = self.mm.TileConfig.parse(name)
            elem = 2 if precision == "mixed" else self.wgc.DTYPES[dtype].itemsize
            if name not in known and c.fits(self.device, elem) and (c.split == 1 or
                                                                    dtype == "f32"):
                configs.append(c)
        return configs

    def run_kind(self, kind: str, shape) -> None:
        """Every config of this kind on this shape."""
        dtype, precision = KINDS[kind]
        feature = self.wgc.DTYPES[dtype].feature
        if feature and not self.device.has(feature):
            print(f"{kind}: skipped, the adapter lacks {feature}", flush=True)
            return
        configs = self.configs(kind)
        if not configs:
            print(f"{kind}: no config fits this adapter (or matches --configs)", flush=True)
            return
        a, b, want = self.operands(dtype, shape)
        ttf, tnote = self.torch_tflops(dtype, shape, a, b, want)
        if tnote:
            print(f"  {kind} {fmt_shape(shape)}: {tnote}"
                  + (f" = {fmt_tf(ttf)} TFLOP/s" if ttf else ""), flush=True)
        A, B = self.wgc.from_numpy(a), self.wgc.from_numpy(b)
        out = self.wgc.empty((shape[0], shape[1]), dtype)
        try:
            for cfg in configs:
                self.time_config(kind, dtype, precision, shape, cfg, A, B, out, want, ttf)
        finally:
            for x in (A, B, out):
                x.free()

    def time_config(self, kind, dtype, precision, shape, cfg, A, B, out, want, torch_tf):
        m, n, k = shape
        inner = inner_count(flops(shape), self.args.quick)
        row = {"kind": kind, "dtype": dtype, "precision": precision, "shape": [m, n, k],
               "config": cfg.name, "default": cfg.name == default_config(self.mm, dtype,
                                                                          precision, shape),
               "ms": None, "tflops": None, "max_rel_err": None, "timing": None,
               "inner": inner, "torch_tflops": torch_tf, "pct_of_torch": None, "error": None}
        t0 = time.perf_counter()
        try:
            d = self.bind(self.kernel, [A, B], out, {"_config": cfg, "precision": precision})
            t, how = gpu_time(None, record_pass=d.encode, warmup=1, repeat=REPEAT, inner=inner)
            row.update(ms=t * 1e3, tflops=flops(shape) / t / 1e12 if t > 0 else None,
                       timing=how)
            row["max_rel_err"] = max_rel_err(out.to_numpy(), want)
            if torch_tf and row["tflops"]:
                row["pct_of_torch"] = 100 * row["tflops"] / torch_tf
        except Exception as e:  # a config the driver rejects: say so, go on with the next
            row["error"] = f"{type(e).__name__}: {first_line(e)}"
            if self.args.verbose:
                traceback.print_exc()
        row["seconds"] = time.perf_counter() - t0
        self.rows.append(row)
        print("  " + fmt_row(row), flush=True)


def flops(shape) -> float:
    m, n, k = shape
    return 2.0 * m * n * k


def fmt_shape(shape) -> str:
    return "x".join(str(v) for v in shape)


def fmt_tf(v: float) -> str:
    """TFLOP/s: two decimals on GPUs, three significant digits below 1 (CPU adapters)."""
    return f"{v:.2f}" if v >= 1 else f"{v:.3g}"


def first_line(e: Exception) -> str:
    """The error in one line: a shader's compiler message without the listed source."""
    text = getattr(e, "compiler_message", None) or str(e)
    text = text.split("\n\nsource:\n")[0]
    text = " / ".join(line.strip() for line in text.splitlines() if line.strip())
    return text[:400] if text else repr(e)


def default_config(mm, dtype: str, precision: str, shape) -> str:
    """The config an untuned run (lavapipe, WGCOMPUTE_AUTOTUNE=0) uses for this shape."""
    cls = mm.problem_class(*shape)
    if mm.is_bucket(cls) and precision != "mixed":  # products between the classes
        return mm.bucket_default(*shape, {c.name for c in mm.CANDIDATES})
    table = mm._MIXED_DEFAULTS if precision == "mixed" else mm._DEFAULTS
    return table[cls if cls in table else
                 ("skinny" if max(shape[:2]) >= 1024 and min(shape[:2]) <= 256 else "small")]


def fmt_row(r: dict) -> str:
    head = f"{r['kind']:<9} {fmt_shape(r['shape']):<15} {r['config']:<26}"
    if r["error"]:
        return f"{head} FAILED {r['error']}"
    pct = f"{r['pct_of_torch']:5.0f}%" if r["pct_of_torch"] is not None else "     -"
    return (f"{head} {r['ms']:10.3f} ms {fmt_tf(r['tflops']):>8} TFLOP/s {pct} of torch  "
            f"err {r['max_rel_err']:.1e}  x{r['inner']} [{r['timing']}]"
            + ("  (untuned default)" if r["default"] else ""))


def markdown(rows) -> str:
    lines = ["| kind | dtype | precision | shape | config | ms | TFLOP/s | torch TFLOP/s | "
             "% of torch | max rel err | timing |",
             "|---|---|---|---|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        cells = [r["kind"], r["dtype"], r["precision"], fmt_shape(r["shape"]),
                 r["config"] + (" (default)" if r["default"] else "")]
        if r["error"]:
            cells += ["failed", "", "", "", "", r["error"].replace("|", "/")]
        else:
            cells += [f"{r['ms']:.3f}", fmt_tf(r["tflops"]),
                      "" if r["torch_tflops"] is None else fmt_tf(r["torch_tflops"]),
                      "" if r["pct_of_torch"] is None else f"{r['pct_of_torch']:.0f}%",
                      f"{r['max_rel_err']:.1e}", r["timing"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def best_rows(rows) -> list[dict]:
    """The fastest config per (kind, shape), with f16 against the best f32 of the shape."""
    best: dict = {}
    for r in rows:
        if r["error"] or r["tflops"] is None:
            continue
        key = (r["kind"], tuple(r["shape"]))
        if key not in best or r["tflops"] > best[key]["tflops"]:
            best[key] = r
    out = []
    for (kind, shape), r in best.items():
        f32 = best.get(("f32", shape))
        out.append({"kind": kind, "shape": list(shape), "config": r["config"],
                    "tflops": r["tflops"], "pct_of_torch": r["pct_of_torch"],
                    "x_best_f32": (r["tflops"] / f32["tflops"]
                                   if f32 and kind != "f32" else None),
                    "max_rel_err": r["max_rel_err"]})
    return out


def summary(best) -> str:
    lines = ["| kind | shape | fastest config | TFLOP/s | % of torch | × best f32 | "
             "max rel err |", "|---|---|---|---:|---:|---:|---:|"]
    for b in best:
        lines.append("| " + " | ".join([
            b["kind"], fmt_shape(b["shape"]), b["config"], fmt_tf(b["tflops"]),
            "" if b["pct_of_torch"] is None else f"{b['pct_of_torch']:.0f}%",
            "" if b["x_best_f32"] is None else f"{b['x_best_f32']:.2f}×",
            f"{b['max_rel_err']:.1e}"]) + " |")
    return "\n".join(lines)


def run(argv=None) -> int:
    p = argparse.ArgumentParser(prog="sweep_matmul", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="small shapes (CPU adapters such as lavapipe, CI)")
    p.add_argument("--out", default="", help="write the table as JSON here")
    p.add_argument("--only", default="",
                   help=f"comma-separated subset of {', '.join(KINDS)} (default: all)")
    p.add_argument("--configs", default="",
                   help="comma-separated config names to time (default: every candidate)")
    p.add_argument("--extra", default="",
                   help="comma-separated config names to time besides the candidates (e.g. "
                   "64x128x16_4x8_u), where they fit the adapter")
    p.add_argument("--shapes", default="", help="comma-separated MxNxK (default: the goals' "
                   "shapes, or --quick's)")
    p.add_argument("--verbose", action="store_true", help="print tracebacks of failures")
    args = p.parse_args(argv)
    kinds = [s.strip() for s in args.only.split(",") if s.strip()] or list(KINDS)
    bad = [s for s in kinds if s not in KINDS]
    if bad:
        p.error(f"--only: unknown {', '.join(bad)}; expected {', '.join(KINDS)}")
    args.configs = {s.strip() for s in args.configs.split(",") if s.strip()}
    args.extra = [s.strip() for s in args.extra.split(",") if s.strip()]
    from wgcompute.errors import ArgumentError
    from wgcompute.kernels.matmul.matmul import TileConfig

    for name in args.extra:
        try:
            TileConfig.parse(name)
        except ArgumentError as e:
            p.error(f"--extra: {e}")
    try:
        shapes = ([parse_shape(s.strip()) for s in args.shapes.split(",") if s.strip()]
                  or (QUICK_SHAPES if args.quick else FULL_SHAPES))
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    t_start = time.perf_counter()
    env = env_info()
    print(f"device: {env['device']} ({env['backend']}, {env['driver']}); torch: "
          f"{'yes' if 'torch' in env['peers'] else 'no'}; timing: "
          f"{'GPU timestamps' if 'timestamp-query' in env['features'] else 'wall'}; shapes: "
          f"{', '.join(fmt_shape(s) for s in shapes)}", flush=True)
    sweep = Sweep(args)
    if args.configs:
        from wgcompute.kernels.matmul.matmul import CANDIDATES, MIXED_CANDIDATES

        known = {c.name for c in CANDIDATES + MIXED_CANDIDATES}
        unknown = sorted(args.configs - known)
        if unknown:
            print(f"--configs: not candidates, ignored: {', '.join(unknown)}", flush=True)
    for kind in kinds:
        print(f"{kind}: {len(sweep.configs(kind))} configs", flush=True)
    complete = False

    def write_json() -> None:
        """The rows so far (after each shape, so a run cut short still leaves its table)."""
        if not args.out:
            return
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        tmp = args.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(_finite({
                "title": "matmul tile config sweep" + (" (--quick)" if args.quick else ""),
                "env": env, "shapes": [list(s) for s in shapes], "kinds": kinds,
                "repeat": REPEAT, "complete": complete,
                "seconds": time.perf_counter() - t_start, "rows": sweep.rows,
                "best": best_rows(sweep.rows)}), f, indent=1, default=str)
        os.replace(tmp, args.out)

    try:
        for shape in shapes:
            print(f"\n{fmt_shape(shape)} ({flops(shape) / 1e9:.1f} GFLOP, "
                  f"{inner_count(flops(shape), args.quick)} per timed pass)", flush=True)
            for kind in kinds:
                sweep.run_kind(kind, shape)
            write_json()
        complete = True
    except KeyboardInterrupt:
        print("\ninterrupted: the table below has the rows so far", flush=True)
    total = time.perf_counter() - t_start
    failed = sum(1 for r in sweep.rows if r["error"])
    print()
    print(markdown(sweep.rows))
    print()
    print(summary(best_rows(sweep.rows)))
    print(f"\n{len(sweep.rows)} rows ({failed} failed) in {total:.1f} s", flush=True)
    write_json()
    if args.out:
        print(f"JSON: {args.out}")
    return 0 if complete else 130


def _finite(v):
    """JSON has no inf or nan: they become null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


if __name__ == "__main__":
    sys.exit(run())
