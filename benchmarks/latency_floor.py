"""The latency floor: one empty compute dispatch (one workgroup of a kernel that does nothing)
recorded, submitted and waited for through wgpu-native's C calls alone (the cffi ``lib`` that
wgcompute's fast native path uses: encoder, pass, finish, wgpuQueueSubmit,
wgpuQueueOnSubmittedWorkDone and non-blocking wgpuDevicePoll until its callback fired), next
to ``wgc.run_kernel`` of a tiny kernel and ``run_kernel_async(...).wait()``: median, p10 and
p90 over N round trips on one device, and each one's ratio to the floor.

    python benchmarks/latency_floor.py [--n 2000] [--warmup 200] [--size 64]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

NOOP_WGSL = """
@compute @workgroup_size(1)
fn main() {}
"""


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    """(median, p10, p90) in microseconds."""
    q = statistics.quantiles(samples, n=10, method="inclusive")
    return statistics.median(samples) * 1e6, q[0] * 1e6, q[-1] * 1e6


def measure(fn, n: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    clock = time.perf_counter
    for _ in range(n):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return times


class NativeFloor:
    """An empty dispatch through wgpu-native's C API on ``gpu_device`` (a wgpu-py GPUDevice):
    no Python object per call beyond what cffi itself makes."""

    def __init__(self, gpu_device):
        from wgpu.backends.wgpu_native._ffi import ffi, lib

        self.ffi, self.lib = ffi, lib
        module = gpu_device.create_shader_module(code=NOOP_WGSL)
        self.pipeline = gpu_device.create_compute_pipeline(
            layout="auto", compute={"module": module, "entry_point": "main"})
        self.dev = gpu_device._internal
        self.queue = gpu_device.queue._internal
        self.pipe = self.pipeline._internal
        self.enc_desc = ffi.new("WGPUCommandEncoderDescriptor *")
        self.pass_desc = ffi.new("WGPUComputePassDescriptor *")
        self.cb_desc = ffi.new("WGPUCommandBufferDescriptor *")
        self.cbs = ffi.new("WGPUCommandBuffer[]", 1)
        self.done = [False]
        done = self.done

        @ffi.callback("void(WGPUQueueWorkDoneStatus, WGPUStringView, void *, void *)")
        def work_done(_status, _message, _u1, _u2):
            done[0] = True

        self.callback = work_done  # kept alive for the object's life
        self.info = ffi.new("WGPUQueueWorkDoneCallbackInfo *")
        self.info.mode = lib.WGPUCallbackMode_AllowProcessEvents
        self.info.callback = work_done

    def round_trip(self, calls=None) -> None:
        """One submit and wait: the empty dispatch, or ``calls`` ((pipeline, bind group, x, y,
        z) handles: the very dispatch wgcompute records for a kernel)."""
        lib, dev, null = self.lib, self.dev, self.ffi.NULL
        enc = lib.wgpuDeviceCreateCommandEncoder(dev, self.enc_desc)
        cpass = lib.wgpuCommandEncoderBeginComputePass(enc, self.pass_desc)
        if calls is None:
            lib.wgpuComputePassEncoderSetPipeline(cpass, self.pipe)
            lib.wgpuComputePassEncoderDispatchWorkgroups(cpass, 1, 1, 1)
        else:
            for pipeline, bind_group, x, y, z in calls:
                lib.wgpuComputePassEncoderSetPipeline(cpass, pipeline)
                lib.wgpuComputePassEncoderSetBindGroup(cpass, 0, bind_group, 0, null)
                lib.wgpuComputePassEncoderDispatchWorkgroups(cpass, x, y, z)
        lib.wgpuComputePassEncoderEnd(cpass)
        lib.wgpuComputePassEncoderRelease(cpass)
        cb = lib.wgpuCommandEncoderFinish(enc, self.cb_desc)
        lib.wgpuCommandEncoderRelease(enc)
        self.cbs[0] = cb
        lib.wgpuQueueSubmit(self.queue, 1, self.cbs)
        lib.wgpuCommandBufferRelease(cb)
        done = self.done
        done[0] = False
        lib.wgpuQueueOnSubmittedWorkDone(self.queue, self.info[0])
        poll = lib.wgpuDevicePoll
        while not done[0]:
            poll(dev, False, null)


def main(argv=None) -> list[tuple[str, float, float, float]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="round trips timed per row")
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--size", type=int, default=64, help="elements of the tiny kernel's input")
    args = ap.parse_args(argv)

    import wgcompute as wgc

    dev = wgc.default_device()
    floor = NativeFloor(dev.gpu_device)
    x = wgc.from_numpy(np.linspace(-1, 1, args.size, dtype=np.float32))
    out = wgc.empty(x.shape, "f32")

    # the dispatch run_kernel records for relu (its pipeline and bound buffers), through the
    # same C calls: what run_kernel costs beyond it is wgcompute's host work
    from wgcompute.commands import bound
    from wgcompute.kernels import registry

    dispatch = bound(registry.get("relu"), [x], out, None)
    relu_calls = dispatch.raw_calls()
    rows = [
        ("wgpu-native C calls (empty dispatch)", floor.round_trip),
        ("wgpu-native C calls (relu's dispatch)", lambda: floor.round_trip(relu_calls)),
        ("wgc.run_kernel (relu, waits)", lambda: wgc.run_kernel("relu", [x], out)),
        ("wgc.run_kernel_async(...).wait()", lambda: wgc.run_kernel_async("relu", [x],
                                                                          out).wait()),
    ]
    results = []
    for label, fn in rows:
        med, p10, p90 = percentiles(measure(fn, args.n, args.warmup))
        results.append((label, med, p10, p90))
    np.testing.assert_array_equal(out.to_numpy(), np.maximum(x.to_numpy(), 0))

    info = dev.info()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"# latency floor on {info['name']} ({info['backend']}, {info['native']} native "
          f"calls), {args.n} round trips per row, not pinned ({cpus} CPUs usable)")
    print(f"{'path':40} {'median us':>10} {'p10':>8} {'p90':>8} {'ratio':>7}")
    base = results[0][1]
    for label, med, p10, p90 in results:
        print(f"{label:40} {med:10.1f} {p10:8.1f} {p90:8.1f} {med / base:6.2f}x")
    print(f"ratio run_kernel / floor: {results[2][1] / base:.2f}; "
          f"run_kernel_async().wait() / floor: {results[3][1] / base:.2f}; host work of "
          f"run_kernel beyond its own dispatch's C calls: "
          f"{results[2][1] - results[1][1]:.1f} us")
    return results


if __name__ == "__main__":
    main()
