"""Probe how wgpu-native's queue behaves on this adapter — the measurements behind
wgcompute/_queue.py's design: does a submit wait while the GPU is busy, or while another
thread blocks in wgpuDevicePoll(wait=True)? What does each way of waiting for a tiny kernel
cost? Raw wgpu-py only (no wgcompute), so the numbers are the platform's.

    python -m benchmarks.probe_queue
"""

from __future__ import annotations

import statistics
import threading
import time

import wgpu
from wgpu.backends.wgpu_native._api import libf
from wgpu.backends.wgpu_native._ffi import ffi, lib

SPIN = """
struct P { iters: u32, }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x >= arrayLength(&x)) { return; }
  var v = x[g.x];
  for (var i = 0u; i < p.iters; i++) { v = v * 0.999 + 0.5; }
  x[g.x] = v;
}"""


def main() -> int:
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    dev = adapter.request_device_sync()
    print("adapter:", adapter.info["device"], adapter.info["backend_type"])
    pipe = dev.create_compute_pipeline(layout="auto", compute={
        "module": dev.create_shader_module(code=SPIN), "entry_point": "main"})
    n = 1 << 16
    buf = dev.create_buffer(size=4 * n, usage=wgpu.BufferUsage.STORAGE)
    tiny = dev.create_buffer(size=256, usage=wgpu.BufferUsage.STORAGE)

    def bind(b, iters):
        u = dev.create_buffer_with_data(data=memoryview(bytearray(iters.to_bytes(4, "little")
                                                                  + bytes(12))),
                                        usage=wgpu.BufferUsage.UNIFORM)
        return dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
            {"binding": 0, "resource": {"buffer": b}}, {"binding": 1, "resource": {"buffer": u}}])

    iters = 200_000 if adapter.info["adapter_type"] != "CPU" else 2_000
    long_bg, tiny_bg = bind(buf, iters), bind(tiny, 1)

    def cmdbuf(bg, groups):
        e = dev.create_command_encoder()
        p = e.begin_compute_pass()
        p.set_pipeline(pipe)
        p.set_bind_group(0, bg)
        p.dispatch_workgroups(groups)
        p.end()
        return e.finish()

    def submit_index(cb):
        return libf.wgpuQueueSubmitForIndex(dev.queue._internal, 1,
                                            ffi.new("WGPUCommandBuffer[]", [cb._internal]))

    def block_poll(idx=None):
        p = ffi.new("WGPUSubmissionIndex *", idx) if idx is not None else ffi.NULL
        libf.wgpuDevicePoll(dev._internal, True, p)

    # calibrate the long kernel
    t = time.perf_counter()
    block_poll(submit_index(cmdbuf(long_bg, n // 64)))
    long_s = time.perf_counter() - t
    print(f"long kernel: {long_s * 1e3:.1f} ms")

    # 1. does a submit wait while the GPU is busy?
    submit_index(cmdbuf(long_bg, n // 64))
    time.sleep(long_s / 10)
    t = time.perf_counter()
    dev.queue.submit([cmdbuf(tiny_bg, 1)])
    print(f"submit while the GPU is busy: {(time.perf_counter() - t) * 1e6:.0f} us")
    block_poll()

    # 2. ... while another thread blocks in wgpuDevicePoll(wait=True)?
    submit_index(cmdbuf(long_bg, n // 64))
    th = threading.Thread(target=block_poll)
    th.start()
    time.sleep(long_s / 10)
    t = time.perf_counter()
    dev.queue.submit([cmdbuf(tiny_bg, 1)])
    print(f"submit while another thread blocks in poll(wait): "
          f"{(time.perf_counter() - t) * 1e6:.0f} us")
    th.join()
    block_poll()

    # 3. ways to wait for a tiny kernel
    def rt_block():
        block_poll(submit_index(cmdbuf(tiny_bg, 1)))

    done = [False]

    @ffi.callback("void(WGPUQueueWorkDoneStatus, WGPUStringView, void *, void *)")
    def on_done(status, msg, u1, u2):
        done[0] = True

    info = ffi.new("WGPUQueueWorkDoneCallbackInfo *")
    info.mode = lib.WGPUCallbackMode_AllowProcessEvents
    info.callback = on_done

    def rt_spin_callback():
        done[0] = False
        submit_index(cmdbuf(tiny_bg, 1))
        libf.wgpuQueueOnSubmittedWorkDone(dev.queue._internal, info[0])
        while not done[0]:
            libf.wgpuDevicePoll(dev._internal, False, ffi.NULL)

    def rt_spin_empty():
        # wgpu-native 29 returns a Rust bool where the header says WGPUBool (32 bits): only
        # the low byte is the answer, the rest is whatever the register held
        submit_index(cmdbuf(tiny_bg, 1))
        while not libf.wgpuDevicePoll(dev._internal, False, ffi.NULL) & 0xFF:
            pass

    for name, fn in (("submit + poll(wait, index)", rt_block),
                     ("submit + work-done callback, spin poll(no wait)", rt_spin_callback),
                     ("submit + spin poll(no wait) until queue empty", rt_spin_empty)):
        for _ in range(50):
            fn()
        ts = []
        for _ in range(500):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        print(f"tiny kernel round trip, {name}: {statistics.median(ts) * 1e6:.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
