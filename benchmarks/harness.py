"""Benchmark harness: warm-up then median of N, GPU kernel time from timestamp queries where the
adapter has them (wall time otherwise), and beside it the wall clock a user's loop gets
(``queued_wall``: launches queued with the asynchronous API, one wait at the end; the goals are
judged on it); peers (torch/cupy) only if importable, timed both ways; markdown + JSON.

Use it from any benchmark script::

    from benchmarks.harness import Results, gpu_time, wall_time, peers
    res = Results("my benchmarks")
    t, how = gpu_time(lambda enc: record_my_work(enc))
    res.add("add 64M f32", "wgcompute", t, timing=how, nbytes=3 * 4 * n)
    print(res.markdown()); res.write_json("out.json")

Rows of one case are compared against the case's ``reference`` implementation (default
"wgcompute"): the "wgcompute at" column is the wgcompute throughput as a percentage of that
row's, so "95%" next to torch means wgcompute reached 95% of torch's bandwidth. It compares
wall clocks of a user's loop where both rows have one (``Row.wall``, or a row timed by wall
clock), the primary times (``seconds``, whose kind the timing column names) otherwise."""

from __future__ import annotations

import datetime
import importlib
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

WALL = "wall"
GPU_TS = "gpu-timestamp"
CUDA_EVENT = "cuda-event"


# -- timing ---------------------------------------------------------------------------------

def settle() -> None:
    """Wait for the device's background tuning (started by the warm-up's first bindings): the
    runs timed next bind the tuned configurations, a long-running program's steady state."""
    import wgcompute as wgc

    wgc.autotune_wait(timeout=600)


def median_time(fn, repeat: int = 10, warmup: int = 1) -> float:
    """Median wall seconds of ``repeat`` calls of ``fn()`` (which must block until its work is
    done) after ``warmup`` untimed ones; the device's background tuning is not waited for
    (``wall_time`` waits)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def wall_time(fn, warmup: int = 2, repeat: int = 10) -> float:
    """Median wall seconds of ``fn()`` (which must block until its work is done), timed once
    the warm-up's background tuning is done."""
    for _ in range(warmup):
        fn()
    settle()
    return median_time(fn, repeat, warmup=1)


def save_rows(path: str, rows) -> None:
    """``rows`` (JSON-able: a list of dicts) written to ``path`` as JSON; nothing without a
    path (a script's unset --json)."""
    if path:
        with open(path, "w") as f:
            json.dump(rows, f, indent=1)


class _Timestamps:
    """A 2-entry timestamp query set with its resolve and readback buffers (one per device)."""

    def __init__(self, dev):
        import wgpu

        self.dev = dev
        self.qs = dev.create_query_set(label="bench-timestamps", type="timestamp", count=2)
        self.resolve = dev.create_buffer(
            label="bench-ts-resolve", size=16,
            usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
        self.read = dev.create_buffer(
            label="bench-ts-read", size=16,
            usage=wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.COPY_SRC)


_ts_cache: dict = {}


def _device():
    """The wgcompute device in effect: ``wgc.current_device()`` where the Device API exists,
    the process-wide device of older versions otherwise (benchmarks run on both)."""
    import wgcompute as wgc

    current = getattr(wgc, "current_device", None)
    if current is not None:
        return current()
    from wgcompute.device import get_device

    return get_device()


def gpu_device():
    """The wgpu GPUDevice under wgcompute (for the raw wgpu-py comparisons)."""
    return _device().gpu_device


def binding_limit() -> int:
    return int(_device().limit("max-storage-buffer-binding-size"))


def bound(kernel: str, inputs, output, params=None):
    """The Dispatch wgcompute records for a kernel launch (for its GPU time), or None where
    this wgcompute version does not expose one (then only wall clock is measured)."""
    try:
        from wgcompute.kernels import bind, get

        return bind(get(kernel), list(inputs), output, params)
    except (ImportError, TypeError, AttributeError):
        return None


def queued_wall(launch, count: int = 10, warmup: int = 1, repeat: int = 3) -> float:
    """Median wall seconds per launch of a user's loop: ``count`` calls of ``launch()`` (each
    returns something with ``wait()``: a wgcompute Command) and one wait for the last."""
    for _ in range(warmup):
        launch().wait()
    settle()
    launch().wait()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        last = None
        for _ in range(count):
            last = launch()
        last.wait()
        times.append((time.perf_counter() - t0) / count)
    return statistics.median(times)


class _RawWait:
    def __init__(self, dev):
        self.dev = dev

    def wait(self):
        _sync(self.dev)


def raw_launcher(record_pass, dev=None):
    """``launch()`` for raw wgpu-py work written the obvious way: one encoder, one compute
    pass recorded by ``record_pass`` and one submit per launch; its wait() is a read_buffer
    of a small buffer (what a raw program does to wait)."""
    dev = dev or gpu_device()
    waiter = _RawWait(dev)

    def launch():
        enc = dev.create_command_encoder()
        cpass = enc.begin_compute_pass()
        record_pass(cpass)
        cpass.end()
        dev.queue.submit([enc.finish()])
        return waiter

    return launch


def peer_wall(mod, fn, count: int = 10, warmup: int = 1, repeat: int = 3) -> float:
    """torch / CuPy as a user's loop: ``count`` calls of ``fn()``, one synchronize."""
    sync = mod.cuda.synchronize if mod.__name__ == "torch" else \
        (lambda: mod.cuda.Device().synchronize())

    class _W:
        def wait(self):
            sync()

    w = _W()

    def launch():
        fn()
        return w

    return queued_wall(launch, count, warmup, repeat)


def timestamp_mode() -> str | None:
    """"encoder" if timestamps can be written anywhere in an encoder, "pass" if only at
    compute pass boundaries, None if the adapter has no timestamp queries."""
    d = _device()
    if d.has("timestamp-query-inside-encoders"):
        return "encoder"
    if d.has("timestamp-query"):
        return "pass"
    return None


def gpu_time(record, warmup: int = 2, repeat: int = 10, inner: int = 1,
             record_pass=None) -> tuple[float, str]:
    """Median seconds of GPU work per repetition, and how it was measured.

    ``record(encoder)`` records the work (passes, copies) into a command encoder;
    alternatively ``record_pass(compute_pass)`` records into one compute pass, which also
    works on adapters whose timestamps only sit at pass boundaries. The work is recorded
    ``inner`` times per submission (amortizes launch cost for tiny kernels). Timestamps
    assume a 1 ns tick, which Vulkan reports on NVIDIA and lavapipe; where the adapter
    has no timestamp queries, the wall time of submit + wait is returned instead."""
    from wgpu.backends.wgpu_native.extras import write_timestamp

    d = _device()
    dev = d.gpu_device
    mode = timestamp_mode()
    if record is None and record_pass is None:
        raise ValueError("gpu_time: pass record or record_pass")
    if mode == "pass" and record_pass is None:
        mode = None
    ts = _ts_cache.get(id(dev))
    if mode and ts is None:
        ts = _ts_cache[id(dev)] = _Timestamps(dev)

    def encode(enc, with_ts: bool):
        if record_pass is not None:
            tw = ({"query_set": ts.qs, "beginning_of_pass_write_index": 0,
                   "end_of_pass_write_index": 1} if with_ts and mode == "pass" else None)
            if with_ts and mode == "encoder":
                write_timestamp(enc, ts.qs, 0)
            cpass = enc.begin_compute_pass(label="bench", timestamp_writes=tw)
            for _ in range(inner):
                record_pass(cpass)
            cpass.end()
            if with_ts and mode == "encoder":
                write_timestamp(enc, ts.qs, 1)
        else:
            if with_ts:
                write_timestamp(enc, ts.qs, 0)
            for _ in range(inner):
                record(enc)
            if with_ts:
                write_timestamp(enc, ts.qs, 1)

    def once(with_ts: bool) -> float:
        enc = dev.create_command_encoder(label="bench")
        encode(enc, with_ts)
        if with_ts:
            enc.resolve_query_set(ts.qs, 0, 2, ts.resolve, 0)
            enc.copy_buffer_to_buffer(ts.resolve, 0, ts.read, 0, 16)
        t0 = time.perf_counter()
        dev.queue.submit([enc.finish()])
        if with_ts:
            raw = dev.queue.read_buffer(ts.read, 0, 16)  # waits for the submission
            t = np.frombuffer(raw, dtype=np.uint64)
            return max(int(t[1]) - int(t[0]), 0) * 1e-9
        _sync(dev)
        return time.perf_counter() - t0

    for _ in range(warmup):
        once(False)
    settle()
    once(False)
    _sync(dev)
    times = [once(bool(mode)) for _ in range(repeat)]
    return statistics.median(times) / inner, (GPU_TS if mode else WALL)


_sync_buf: dict = {}


def _sync(dev) -> None:
    """Block until everything submitted so far has finished (read_buffer waits on the queue)."""
    import wgpu

    b = _sync_buf.get(id(dev))
    if b is None:
        b = _sync_buf[id(dev)] = dev.create_buffer(
            label="bench-sync", size=16, usage=wgpu.BufferUsage.COPY_SRC)
    dev.queue.read_buffer(b, 0, 4)


# -- peers ------------------------------------------------------------------------------------

def peers() -> dict:
    """GPU peers that are importable here and see a GPU: {"torch": torch, "cupy": cupy}.
    Neither is a dependency; a missing one is simply left out, and WGCOMPUTE_BENCH_PEERS=0
    leaves both out (runs that compare wgcompute with itself)."""
    out = {}
    if os.environ.get("WGCOMPUTE_BENCH_PEERS", "").strip() == "0":
        return out
    try:
        torch = importlib.import_module("torch")
        if torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = False  # FP32 against FP32: TF32 off
            torch.backends.cudnn.allow_tf32 = False
            out["torch"] = torch
    except Exception:
        pass
    try:
        cupy = importlib.import_module("cupy")
        if cupy.cuda.runtime.getDeviceCount() > 0:
            out["cupy"] = cupy
    except Exception:
        pass
    return out


def cuda_time(mod, fn, warmup: int = 2, repeat: int = 10) -> float:
    """Median seconds of ``fn()`` on the GPU, timed with CUDA events of torch or cupy."""
    for _ in range(warmup):
        fn()
    times = []
    if mod.__name__ == "torch":
        for _ in range(repeat):
            s, e = mod.cuda.Event(enable_timing=True), mod.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) * 1e-3)
    else:
        for _ in range(repeat):
            s, e = mod.cuda.Event(), mod.cuda.Event()
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(mod.cuda.get_elapsed_time(s, e) * 1e-3)
    return statistics.median(times)


# -- results ----------------------------------------------------------------------------------

@dataclass
class Row:
    case: str
    impl: str
    seconds: float
    timing: str = WALL
    nbytes: int | None = None  # bytes moved (read + written), for GB/s
    flops: float | None = None  # for TFLOP/s
    size: float | None = None  # x axis of the plot (elements, or M*N*K)
    group: str = ""  # plot series: cases with the same group are one line
    max_rel_err: float | None = None
    note: str = ""
    wall: float | None = None  # seconds per launch of a user's loop (queued, one wait)

    @property
    def gbps(self) -> float | None:
        return self.nbytes / self.seconds / 1e9 if self.nbytes and self.seconds > 0 else None

    @property
    def tflops(self) -> float | None:
        return self.flops / self.seconds / 1e12 if self.flops and self.seconds > 0 else None

    def wall_seconds(self) -> float | None:
        """Wall clock of a user's loop: ``wall`` where measured, ``seconds`` when that is
        already wall time (CPU peers, host-side cases), else None."""
        if self.wall:
            return self.wall
        return self.seconds if self.timing == WALL else None

    @property
    def user_seconds(self) -> float:
        """What the goals are judged on: the user loop's wall time where measured."""
        return self.wall_seconds() or self.seconds

    def wall_rate(self) -> str:
        if not self.wall:
            return ""
        if self.flops:
            return f"{self.flops / self.wall / 1e12:,.2f} TFLOP/s"
        if self.nbytes:
            return f"{self.nbytes / self.wall / 1e9:,.1f} GB/s"
        return ""


@dataclass
class Results:
    title: str
    reference: str = "wgcompute"
    rows: list = field(default_factory=list)

    def add(self, case: str, impl: str, seconds: float, **kw) -> Row:
        row = Row(case, impl, float(seconds), **kw)
        self.rows.append(row)
        return row

    def cases(self) -> list[str]:
        seen = []
        for r in self.rows:
            if r.case not in seen:
                seen.append(r.case)
        return seen

    def ratio(self, row: Row) -> float | None:
        """The reference's throughput as a fraction of this row's (same case)."""
        ref = next((r for r in self.rows if r.case == row.case and r.impl == self.reference),
                   None)
        if ref is None or ref.seconds <= 0:
            return None
        a, b = row.wall_seconds(), ref.wall_seconds()
        if a and b:  # the goals are judged on the user loop's wall clock
            return a / b
        return row.seconds / ref.seconds

    def markdown(self) -> str:
        lines = [f"### {self.title}", "",
                 f"| case | impl | time | GB/s | TFLOP/s | timing | wall, user loop | "
                 f"wall rate | {self.reference} at | max rel err |",
                 "|---|---|---:|---:|---:|---|---:|---:|---:|---:|"]
        for case in self.cases():
            for r in (x for x in self.rows if x.case == case):
                ratio = self.ratio(r)
                lines.append("| " + " | ".join([
                    case, r.impl + (f" ({r.note})" if r.note else ""), _fmt_time(r.seconds),
                    _fmt(r.gbps, 1), _fmt(r.tflops, 2), r.timing,
                    _fmt_time(r.wall) if r.wall else ("=" if r.timing == WALL else ""),
                    r.wall_rate(),
                    "" if ratio is None or r.impl == self.reference else f"{100 * ratio:.0f}%",
                    "" if r.max_rel_err is None else f"{r.max_rel_err:.1e}"]) + " |")
        return "\n".join(lines)

    def to_json(self) -> dict:
        rows = []
        for r in self.rows:
            d = asdict(r)
            d["gbps"], d["tflops"], d["reference_ratio"] = r.gbps, r.tflops, self.ratio(r)
            d["user_seconds"] = r.user_seconds
            rows.append(d)
        return {"title": self.title, "reference": self.reference, "env": env_info(),
                "rows": rows}

    def report(self, json_path: str | None, name: str) -> None:
        """Print the markdown table; write the JSON to ``json_path`` (a script's --json) and,
        where $OUT names a folder, to ``name`` in it."""
        print()
        print(self.markdown())
        out = os.environ.get("OUT")
        for path in (json_path, os.path.join(out, name) if out else None):
            if path:
                self.write_json(path)

    @classmethod
    def load(cls, path: str) -> Results:
        """Results read back from write_json's file (e.g. to plot a GPU run elsewhere)."""
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        res = cls(data["title"], data.get("reference", "wgcompute"))
        names = set(Row.__dataclass_fields__)
        for d in data["rows"]:
            res.rows.append(Row(**{k: v for k, v in d.items() if k in names}))
        global _env
        _env = _env or data.get("env")
        return res

    def write_json(self, path: str) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, indent=2, default=str)

    def plot(self, path: str) -> bool:
        """A PNG of GB/s (bandwidth cases) and TFLOP/s (flop cases) against size, one line
        per (group, impl). Returns False when matplotlib is not installed."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return False
        fig, axes = plt.subplots(1, 2, figsize=(13, 5))
        for ax, metric, label in ((axes[0], "gbps", "GB/s"), (axes[1], "tflops", "TFLOP/s")):
            series: dict = {}
            for r in self.rows:
                v = getattr(r, metric)
                if v is None or r.size is None or not r.group:
                    continue
                if metric == "gbps" and r.flops:
                    continue  # matmuls go on the TFLOP/s side only
                series.setdefault((r.group, r.impl), []).append((r.size, v))
            for (group, impl), pts in sorted(series.items()):
                pts.sort()
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                        label=f"{group}: {impl}")
            ax.set_xscale("log")
            ax.set_xlabel("elements" if metric == "gbps" else "M·N·K")
            ax.set_ylabel(label)
            ax.grid(True, which="both", alpha=0.3)
            if series:
                ax.legend(fontsize=7)
        fig.suptitle(f"{self.title} — {env_info().get('device', '?')}")
        fig.tight_layout()
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return True


def _fmt(v, digits) -> str:
    return "" if v is None else f"{v:,.{digits}f}"


def _fmt_time(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


_env: dict | None = None


def env_info() -> dict:
    """Device, driver, versions and command line: what a reader needs to trust a number."""
    global _env
    if _env is None:
        import wgcompute as wgc

        # A CUDA peer's context keeps an NVIDIA GPU's SM clock up for every API while it
        # exists; without one, Vulkan work in bursts runs at the idle clock (docs/
        # architecture.md, "Steady speed"). Run with WGCOMPUTE_HOLD_CLOCKS=1 for figures
        # that do not depend on which peer ran before.
        found = sorted(peers())
        info = wgc.device_info()
        _env = {"device": info["name"], "backend": info["backend"], "driver": info["driver"],
                "gpu": info["gpu"], "features": info["features"],
                "wgcompute": wgc.__version__, "wgpu": info["wgpu_version"],
                "numpy": np.__version__, "python": platform.python_version(),
                "machine": platform.machine(), "command": " ".join(sys.argv),
                "utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "peers": found, "clocks_held": info.get("clocks_held", False)}
    return _env


def max_rel_err(got, want) -> float:
    """max |got - want| / max(|want|), in f64; 0 for empty arrays."""
    import numpy as np

    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if want.size == 0:
        return 0.0
    scale = float(np.max(np.abs(want))) or 1.0
    err = float(np.max(np.abs(got - want))) / scale
    return err if math.isfinite(err) else float("inf")
