"""What probe_steady and bench_soak share: the four figures a long-lived process must keep
(5x5 blur, f32 matmul, tiny round trip, 64-FMA kernel and its stream_map), the mixed
sequence of work that slowed them, and snapshots of the process (live objects, RSS, threads,
caches, nvidia-smi, Vulkan memory heaps).

Every figure is measured the way a user's loop runs: launches queued with the asynchronous
API, one wait at the end, wall clock; where the adapter has timestamp queries the same
dispatch's GPU time is measured beside it, so a slowdown can be placed on the device or on
the host. wgcompute internals are reached only through the small adapter functions at the top
of this module (one place to change when the core moves)."""

from __future__ import annotations

import gc
import glob
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

BLUR = {"radius": 2, "sigma": 1.5, "mode": "clamp"}
FMA_KERNEL = "bench_fma64"
FMA_A, FMA_B = 0.999, 0.001


# -- adapters: the only places that touch wgcompute internals ----------------------------------

def wgc():
    import wgcompute

    return wgcompute


def device():
    """The wgcompute device in effect (the process default before the Device API existed)."""
    w = wgc()
    current = getattr(w, "current_device", None)
    if current is not None:
        return current()
    from wgcompute.device import get_device

    return get_device()


def gpu_device():
    return device().gpu_device


def dispatch_of(kernel: str, inputs, out, params):
    """The bound Dispatch that run_kernel / run_kernel_async use for these arguments (the
    bind cache's entry), so that its GPU time is the GPU time of the user's launches."""
    from wgcompute import commands

    return commands.bound(wgc().kernel_info(kernel), list(inputs), out, params)


def dispatch_parts(d) -> list[dict]:
    """A bound Dispatch taken apart, one entry per pass (a MultiDispatch has several): its
    pipeline, bind-group layout, grid, params buffer and the params' byte size. Only for
    dispatches of one launch per pass (no binding ranges)."""
    from wgcompute.kernels.core.base import pack_uniform

    parts = getattr(d, "parts", None) or [d]
    out = []
    for part in parts:
        if len(part.launches) != 1 or part.launches[0].ranges is not None:
            raise ValueError(f"{part.kernel.name}: more than one launch; cannot take apart")
        la = part.launches[0]
        fields = part.compiled.uniform_fields
        out.append({"pipeline": part.compiled.pipeline, "layout": part.compiled.layout,
                    "workgroups": la.workgroups, "uniform": part.uniform,
                    "uniform_size": len(pack_uniform(fields, la.uniform)) if fields else 0})
    return out


def submit_and_wait(command_buffers) -> None:
    """Submit wgpu command buffers through wgcompute's queue and wait for their fence."""
    from wgcompute._queue import wait

    wait(device().submitter.submit(list(command_buffers)))


def cache_sizes() -> dict:
    """Sizes of the device's caches and tables that keep GPU objects alive."""
    dev = device()
    return {"bind_cache": len(dev.binds), "commands_finished_kept": len(dev.finished),
            "commands_pending": len(dev.commands), "pipeline_cache": len(dev.pipelines),
            "staging_free_bytes": dev.staging.free_bytes(),
            "staging_created": dev.staging.created(),
            "staging_leases_out": dev.staging.leases_out()}


def clear_caches() -> None:
    """Drop the bind cache (its Dispatches hold bind groups and params buffers)."""
    dev = device()
    with dev.binds_lock:
        dev.binds.clear()
    gc.collect()


def shut_down_helper_threads() -> list[str]:
    """Stop the threads wgcompute leaves behind after transfers: the staging idle-trim timer
    and the copy / fault / readback pools (made again on next use). Returns what was
    stopped."""
    dev = device()
    stopped = []
    st = dev.staging
    with st._trim_lock:
        timer, st._trim_timer = st._trim_timer, None
    if timer is not None:
        timer.cancel()
        stopped.append("staging idle-trim timer")
    w = dev.workers
    for name in ("_copy", "_fault", "_readback"):
        with w._lock:
            pool = getattr(w, name)
            setattr(w, name, None)
        if pool is not None:
            pool.shutdown(wait=True)
            stopped.append(f"workers.{name}")
    from wgcompute import _queue  # let wgpu-py's poll thread go back to sleep

    time.sleep(2 * _queue._LINGER)
    dev.submitter.release_idle_token()
    return stopped


def sm_clock() -> int | None:
    """The SM clock of the device's GPU now (MHz), where the device can read it (NVML)."""
    try:
        readings = device().clocks()
    except Exception:  # noqa: BLE001 - not NVIDIA, or no nvidia-ml-py: nothing to record
        return None
    return min(r.sm_mhz for r in readings) if readings else None


def release_staging() -> int:
    return wgc().release_staging()


# -- process snapshots -------------------------------------------------------------------------

def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def live_objects() -> dict:
    """Live wgpu-py objects by kind (Python wrappers), their total, and wgcompute Buffers."""
    from wgpu._classes import object_tracker

    counts = {k: v for k, v in object_tracker.counts.items() if v}
    return {"gpu_objects": sum(counts.values()), "by_kind": counts,
            "wgc_buffers": wgc().live_buffers()}


def thread_cpu() -> dict:
    """CPU seconds used so far by each thread of this process, by thread name."""
    tick = os.sysconf("SC_CLK_TCK")
    names = {t.native_id: t.name for t in threading.enumerate()}
    out = {}
    for path in glob.glob("/proc/self/task/*/stat"):
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        tid = int(path.split("/")[-2])
        comm = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        cpu = (int(fields[11]) + int(fields[12])) / tick
        out[names.get(tid, f"native:{comm}:{tid}")] = cpu
    return out


def cpu_delta(before: dict, after: dict) -> dict:
    return {k: round(after[k] - before.get(k, 0.0), 3) for k in after
            if after[k] - before.get(k, 0.0) > 0.005}


def nvidia_smi() -> dict | None:
    """Memory, clocks, power state and throttle reasons of GPU 0, or None without the tool."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    fields = ("memory.used,memory.total,clocks.sm,clocks.mem,clocks.max.sm,pstate,"
              "temperature.gpu,power.draw,clocks_throttle_reasons.active,"
              "clocks_throttle_reasons.hw_slowdown,clocks_throttle_reasons.sw_thermal_slowdown,"
              "clocks_throttle_reasons.sw_power_cap")
    try:
        text = subprocess.run([exe, f"--query-gpu={fields}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = text.strip().splitlines()[:1]
    if not first:
        return None
    return dict(zip(fields.split(","), (v.strip() for v in first[0].split(",")), strict=False))


def find_vulkaninfo() -> str | None:
    """vulkaninfo from PATH, else unpacked from the .deb files in $VULKAN_TOOLS_DEBS (Debian's
    vulkan-tools and the libraries it links, fetched with `apt-get download`) into a folder
    of their own, for a machine where vulkan-tools cannot be installed."""
    exe = shutil.which("vulkaninfo")
    if exe:
        return exe
    folder = os.environ.get("VULKAN_TOOLS_DEBS")
    debs = sorted(glob.glob(os.path.join(folder, "*.deb"))) if folder else []
    if not debs or shutil.which("dpkg") is None:
        return None
    root = os.path.join(tempfile.gettempdir(), "wgc-vulkan-tools")
    exe = os.path.join(root, "usr", "bin", "vulkaninfo")
    if not os.path.exists(exe):
        for d in debs:
            subprocess.run(["dpkg", "-x", d, root], check=False)
    return exe if os.path.exists(exe) else None


def vulkan_memory() -> dict | None:
    """Memory heaps (size, flags, VK_EXT_memory_budget's budget and usage) and memory types
    as the driver reports them, per device, from vulkaninfo run in a child process (its budget
    is what the driver would give a new process; the usage is the child's own)."""
    exe = find_vulkaninfo()
    if exe is None:
        return None
    env = dict(os.environ)
    lib = os.path.join(os.path.dirname(os.path.dirname(exe)), "lib", "x86_64-linux-gnu")
    if os.path.isdir(lib):
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"]
                                        if env.get("LD_LIBRARY_PATH") else "")
    try:
        text = subprocess.run([exe], capture_output=True, text=True, timeout=60,
                              env=env).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": f"vulkaninfo failed: {e}"}
    return {"devices": parse_vulkaninfo(text)}


def parse_vulkaninfo(text: str) -> list[dict]:
    """The memory section of each device in vulkaninfo's text output."""
    names = [line.split("=", 1)[1].strip() for line in text.splitlines()
             if line.strip().startswith("deviceName")]
    devices = []
    for i, block in enumerate(text.split("VkPhysicalDeviceMemoryProperties:")[1:]):
        heaps, types, cur = [], [], None
        for line in block.splitlines()[2:]:
            if line and not line[0].isspace() and not line.startswith("memory"):
                break
            t = line.strip()
            if t.startswith("memoryHeaps["):
                cur = {"index": len(heaps), "flags": []}
                heaps.append(cur)
            elif t.startswith("memoryTypes["):
                cur = {"index": len(types), "flags": []}
                types.append(cur)
            elif cur is None or not t:
                continue
            elif "=" in t and t.split("=")[0].strip() in ("size", "budget", "usage"):
                cur[t.split("=")[0].strip() + "_mb"] = _mb(t.split("=")[1].split()[0])
            elif t.startswith("heapIndex"):
                cur["heap"] = int(t.split("=")[1])
            elif t.startswith(("MEMORY_HEAP_", "MEMORY_PROPERTY_")):
                cur["flags"].append(t.replace("MEMORY_HEAP_", "").replace("MEMORY_PROPERTY_", "")
                                    .replace("_BIT", ""))
            elif t.startswith("usable for"):
                cur = None
        devices.append({"device": names[i] if i < len(names) else f"device {i}",
                        "heaps": heaps, "types": types})
    return devices


def _mb(v):
    try:
        return round(int(v) / 2**20, 1)
    except (TypeError, ValueError):
        return v


def snapshot(label: str) -> dict:
    gc.collect()
    return {"label": label, "t": time.time(), "rss_mb": round(rss_mb(), 1),
            **live_objects(), "caches": cache_sizes(),
            "threads": sorted(t.name for t in threading.enumerate()),
            "nvidia_smi": nvidia_smi()}


# -- figures -----------------------------------------------------------------------------------

@dataclass
class Sizes:
    image: int  # blur image side (f32)
    matmul: int  # square f32 matmul side
    tiny: int  # elements of the tiny kernel
    fma: int  # elements of the 64-FMA kernel (and of each stream_map batch)
    fma_batches: int
    add: int  # elements of the big adds (three buffers)
    transfer_mb: int
    blur_launches: int = 10
    matmul_launches: int = 3
    round_trips: int = 200


FULL = Sizes(image=4096, matmul=4096, tiny=256, fma=1 << 24, fma_batches=16, add=1 << 26,
             transfer_mb=256)
SMALL = Sizes(image=512, matmul=256, tiny=256, fma=1 << 18, fma_batches=6, add=1 << 20,
              transfer_mb=8, blur_launches=5, matmul_launches=2, round_trips=50)


def fit(sizes: Sizes) -> Sizes:
    """Shrink what one storage binding or one buffer of this adapter cannot hold (the add's
    and the transfers' buffers are split into binding ranges by wgcompute itself)."""
    limit = device().limit("max-storage-buffer-binding-size")
    s = Sizes(**asdict(sizes))
    while 4 * s.image * s.image > limit:
        s.image //= 2
    while 4 * s.matmul * s.matmul > limit:
        s.matmul //= 2
    while 4 * s.fma > limit:
        s.fma //= 2
    return s


def gpu_seconds(record_pass, repeat: int = 5) -> float | None:
    """Median GPU time of one compute pass recorded by ``record_pass``, from timestamp
    queries; None if the adapter has none."""
    from benchmarks.harness import GPU_TS, gpu_time

    t, how = gpu_time(None, record_pass=record_pass, warmup=1, repeat=repeat)
    return t if how == GPU_TS else None


def queued_wall(launch, count: int, repeat: int = 3) -> float:
    """Median wall seconds per launch of ``count`` launches queued with the asynchronous API
    and one wait at the end (how the docs tell users to launch work)."""
    launch().wait()  # warm
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        last = None
        for _ in range(count):
            last = launch()
        last.wait()
        times.append((time.perf_counter() - t0) / count)
    return statistics.median(times)


class Blur:
    """The 5x5 gaussian on an n x n f32 image, with its own input and output buffers."""

    def __init__(self, n: int, fill: bool = True):
        w = wgc()
        self.n = n
        self.src = w.empty((n, n), "f32", label="blur-in")
        self.out = w.empty((n, n), "f32", label="blur-out")
        if fill:
            w.fill(self.src, 0.5)

    def launch(self):
        return wgc().run_kernel_async("gaussian_blur", [self.src], self.out, BLUR)

    def dispatch(self):
        return dispatch_of("gaussian_blur", [self.src], self.out, BLUR)

    def measure(self, launches: int) -> dict:
        mpix = self.n * self.n / 1e6
        wall = queued_wall(self.launch, launches)
        gpu = gpu_seconds(self.dispatch().encode)
        return {"wall_mpix_s": mpix / wall, "gpu_mpix_s": mpix / gpu if gpu else None,
                "wall_us": wall * 1e6, "gpu_us": gpu * 1e6 if gpu else None}

    def check(self) -> float:
        """max rel error against scipy.ndimage on random contents (fresh figures only)."""
        from scipy import ndimage

        from benchmarks.harness import max_rel_err

        x = np.random.default_rng(1).random((self.n, self.n), dtype=np.float32)
        self.src.write(x)
        self.launch().wait()
        want = ndimage.gaussian_filter(x.astype(np.float64), BLUR["sigma"],
                                       radius=BLUR["radius"], mode="nearest")
        return max_rel_err(self.out.to_numpy(), want)

    def free(self) -> None:
        self.src.free()
        self.out.free()


def blur_figure(sizes: Sizes) -> dict:
    b = Blur(sizes.image)
    try:
        return b.measure(sizes.blur_launches)
    finally:
        b.free()


def matmul_figure(sizes: Sizes) -> dict:
    w = wgc()
    m = sizes.matmul
    a = w.empty((m, m), "f32")
    b = w.empty((m, m), "f32")
    c = w.empty((m, m), "f32")
    try:
        w.fill(a, 0.25)
        w.fill(b, 0.5)
        launch = lambda: w.run_kernel_async("matmul", [a, b], c)  # noqa: E731
        wall = queued_wall(launch, sizes.matmul_launches)
        gpu = gpu_seconds(dispatch_of("matmul", [a, b], c, None).encode, repeat=3)
        flop = 2.0 * m ** 3
        return {"wall_tflops": flop / wall / 1e12,
                "gpu_tflops": flop / gpu / 1e12 if gpu else None}
    finally:
        for x in (a, b, c):
            x.free()


def round_trip_figure(sizes: Sizes, a=None) -> dict:
    w = wgc()
    x = np.arange(sizes.tiny, dtype=np.float32)
    own = a is None
    a = w.from_numpy(x) if own else a
    out = w.empty((sizes.tiny,), "f32")
    try:
        for _ in range(20):
            w.run_kernel("elementwise_add", [a, a], out)
        ts = []
        for _ in range(sizes.round_trips):
            t0 = time.perf_counter()
            w.run_kernel("elementwise_add", [a, a], out)
            ts.append(time.perf_counter() - t0)
        return {"round_trip_us": statistics.median(ts) * 1e6}
    finally:
        out.free()
        if own:
            a.free()


FMA_WGSL = """
struct P { n: u32, a: f32, b: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: P;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * 256u + lid;
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


def register_fma() -> None:
    """The 64-FMA kernel of bench_streams (the one that slowed ~4x after CUDA started)."""
    w = wgc()
    if FMA_KERNEL not in w.kernels():
        w.register_kernel(FMA_KERNEL, FMA_WGSL, bindings=[("x", "read"), ("out", "read_write"),
                                                          ("p", "uniform")],
                          params={"n": "u32", "a": "f32", "b": "f32"})


def fma_figure(sizes: Sizes, batches: list | None = None) -> dict:
    """The 64-FMA kernel alone (queued launches, wall and GPU time) and stream_map of
    ``fma_batches`` batches through it, results consumed as they come (GB/s moved)."""
    w = wgc()
    register_fma()
    n = sizes.fma
    params = {"a": FMA_A, "b": FMA_B}
    x = w.empty((n,), "f32")
    y = w.empty((n,), "f32")
    try:
        w.fill(x, 1.0)
        launch = lambda: w.run_kernel_async(FMA_KERNEL, [x], y, params)  # noqa: E731
        wall = queued_wall(launch, 10)
        gpu = gpu_seconds(dispatch_of(FMA_KERNEL, [x], y, params).encode)
    finally:
        x.free()
        y.free()
    if batches is None:
        base = np.linspace(-1, 1, n, dtype=np.float32)
        batches = [base + np.float32(i) for i in range(sizes.fma_batches)]
    for r in w.stream_map(FMA_KERNEL, batches[:2], depth=3, params=params):
        del r  # warm
    t0 = time.perf_counter()
    last = None
    for r in w.stream_map(FMA_KERNEL, batches, depth=3, params=params):
        last = r
    t = time.perf_counter() - t0
    ok = bool(np.isfinite(np.asarray(last)).all())
    del last
    moved = 2 * 4 * n * len(batches)
    return {"fma_wall_gelem_s": n / wall / 1e9, "fma_gpu_gelem_s": n / gpu / 1e9 if gpu else None,
            "stream_gb_s": moved / t / 1e9, "stream_ok": ok}


FIGURES = {"blur": blur_figure, "matmul": matmul_figure, "round_trip": round_trip_figure,
           "fma": fma_figure}


# -- the mixed sequence ------------------------------------------------------------------------

def mixed_sequence(sizes: Sizes, keep: list | None = None, log=print) -> dict:
    """One pass of the work that slowed later kernels on the H200: 64M-element adds through
    three 256 MB buffers (queued and blocking) and a 50-stage pipeline over them, a 4096^3
    matmul, 200 tiny round trips, 100-stage pipelines, 256 MB write_async / to_numpy /
    from_numpy / read_async. Buffers are freed at the end unless ``keep`` (a list) takes
    them. Returns seconds per part."""
    w = wgc()
    times = {}
    made = []

    def new(shape, dtype="f32"):
        b = w.empty(shape, dtype)
        made.append(b)
        return b

    t0 = time.perf_counter()
    n = sizes.add
    a, b, c = new((n,)), new((n,)), new((n,))
    w.fill(a, 1.0)
    w.fill(b, 2.0)
    cmds = [w.run_kernel_async("elementwise_add", [a, b], c) for _ in range(10)]
    cmds[-1].wait()
    for _ in range(10):
        w.add(a, b, c)
    p = w.pipeline("mixed-50")
    src, dst = a, c
    for _ in range(50):
        p.add(kernel="elementwise_add", inputs=[src, b], output=dst)
        src, dst = dst, src
    p.run()
    times["adds"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    m = sizes.matmul
    ma, mb, mc = new((m, m)), new((m, m)), new((m, m))
    w.fill(ma, 0.25)
    w.fill(mb, 0.5)
    w.run_kernel_async("matmul", [ma, mb], mc).wait()
    times["matmul"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    round_trip_figure(Sizes(**{**asdict(sizes), "round_trips": 200}))
    times["round_trips"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    small = [new((sizes.tiny,)) for _ in range(101)]
    w.fill(small[0], 1.0)
    p100 = w.pipeline("mixed-100")
    for i in range(100):
        p100.add(kernel="elementwise_add", inputs=[small[i], small[0]], output=small[i + 1])
    for _ in range(5):
        p100.run()
    times["pipelines"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    count = sizes.transfer_mb * (1 << 20) // 4
    host = np.full(count, 3.0, np.float32)
    t = new((count,))
    t.write_async(host).wait()
    got = t.to_numpy()
    u = w.from_numpy(got)
    made.append(u)
    back = u.read_async().wait()
    if back[0] != 3.0 or back[-1] != 3.0:
        raise RuntimeError("mixed sequence: a 256 MB round trip came back wrong")
    del got, back, host
    times["transfers"] = time.perf_counter() - t0

    for pipe in (p, p100):
        pipe.free()
    if keep is None:
        for x in made:
            x.free()
    else:
        keep.extend(made)
    log("  mixed sequence: " + ", ".join(f"{k} {v:.2f} s" for k, v in times.items()))
    return times
