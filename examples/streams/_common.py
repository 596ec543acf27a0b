"""Shared by the stream examples: the 64-FMA kernel, batch generation, command-line flags,
and the report (text Gantt chart, PNG timeline, total time)."""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import wgcompute as wgc
from wgcompute import Timeline

FMA = "example_fma64"
FMA_A, FMA_B = 0.999, 0.001

# out[i] = 64 dependent fused multiply-adds of in[i]: enough work per element that the
# compute stage is visible next to the transfers.
FMA_WGSL = """
struct P { n: u32, a: f32, b: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: P;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (i >= p.n) {
        return;
    }
    var v = x[i];
    for (var k = 0u; k < 64u; k = k + 1u) {
        v = fma(v, p.a, p.b);
    }
    out[i] = v;
}
"""

PARAMS = {"a": FMA_A, "b": FMA_B}


def register_fma() -> str:
    if FMA not in wgc.kernels():
        wgc.register_kernel(FMA, FMA_WGSL, bindings=[("x", "read"), ("out", "read_write"),
                                                     ("p", "uniform")],
                            params={"n": "u32", "a": "f32", "b": "f32"})
    return FMA


def warm_up(ins, outs) -> None:
    """Compile the kernel and touch every buffer and staging size once, outside the timing."""
    register_fma()
    for i, o in zip(ins, outs, strict=True):
        i.write(make_batch(0, i.size))
        wgc.run_kernel(FMA, [i], o, PARAMS)
        o.to_numpy()


def fma_ref(x: np.ndarray) -> np.ndarray:
    """The kernel's result computed on the host (float64: compare with a tolerance)."""
    v = x.astype(np.float64)
    for _ in range(64):
        v = v * np.float32(FMA_A) + np.float32(FMA_B)
    return v


def make_batch(i: int, n: int) -> np.ndarray:
    """Batch i: n f32 values that differ per batch (so a mix-up would show)."""
    return (np.arange(n, dtype=np.float32) % 97) * np.float32(0.01) + np.float32(i)


def check(results, batches_or_n, what: str) -> None:
    """Compare every result with the host reference; raise if any differs."""
    for i, got in enumerate(results):
        src = batches_or_n[i] if isinstance(batches_or_n, list) else make_batch(i, batches_or_n)
        want = fma_ref(src)
        if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
            raise SystemExit(f"{what}: batch {i} differs from numpy "
                             f"(max error {np.abs(got - want).max():.3g})")


def parse_args(description: str, size: int = 1 << 16, batches: int = 6) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--size", type=int, default=size,
                   help=f"f32 elements per batch (default {size}; 16777216 on a GPU)")
    p.add_argument("--batches", type=int, default=batches,
                   help=f"number of batches (default {batches}; 32 on a GPU)")
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "wgcompute-streams"),
                   help="folder for the timeline PNGs")
    p.add_argument("--width", type=int, default=72, help="columns of the text Gantt chart")
    return p.parse_args()


def report(name: str, tl: Timeline, args, total: float | None = None) -> float:
    """Print the Gantt chart and the total; write the PNG. Returns the total seconds."""
    total = tl.total() if total is None else total
    print(f"== {name}: {args.batches} batches of {args.size:,} f32 on "
          f"{wgc.device_info()['name']}")
    print(tl.gantt(args.width))
    means = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in tl.stage_means().items())
    print(f"mean per batch: {means}")
    png = plot(tl, name, os.path.join(args.out, f"{name}.png"))
    if png:
        print(f"timeline PNG: {png}")
    print(f"total: {total * 1e3:.1f} ms")
    return total


def plot(tl: Timeline, title: str, path: str) -> str | None:
    """A PNG Gantt chart of the timeline (one row per batch, colour per stage)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib is not installed: no PNG)")
        return None
    stages = tl.stages()
    colours = dict(zip(stages, plt.cm.tab10.colors, strict=False))
    batches = sorted({b for b, *_ in tl.spans})
    fig, ax = plt.subplots(figsize=(10, 0.6 + 0.35 * len(batches) * max(1, len(stages)) / 2))
    band = 0.8 / max(1, len(stages))
    for b, stage, start, end in tl.spans:
        row = batches.index(b) + stages.index(stage) * band - 0.4
        ax.barh(row, (end - start) * 1e3, left=start * 1e3, height=band,
                color=colours[stage], label=stage)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles, strict=True))
    ax.legend(uniq.values(), uniq.keys(), loc="upper right", fontsize=8)
    ax.set_yticks(range(len(batches)), [f"batch {b}" for b in batches])
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    ax.set_title(f"{title}: total {tl.total() * 1e3:.1f} ms")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def now() -> float:
    return time.perf_counter()
