"""Where a tiny kernel's round trip goes: ``run_kernel``'s synchronous path taken apart
(argument checks and binding, recording, finish, submit, waiting for the fence), with the
cost of one non-blocking device poll on an idle queue, and the same C calls made from the
least Python possible (the floor), with each part of wgcompute's path put back in turn.
The measurements behind issue 3's round-trip goal; uses wgcompute's internals on purpose.

    python -m benchmarks.probe_dispatch [--repeat N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np

N = 256


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3000, help="timed round trips (3000)")
    args = ap.parse_args(argv)

    import wgcompute as wgc
    from wgcompute import _queue, commands
    from wgcompute._encode import Encoder

    print(f"adapter: {wgc.device_info()['name']} {wgc.device_info()['backend']}")
    x = np.arange(N, dtype=np.float32)
    a, b, out = wgc.from_numpy(x), wgc.from_numpy(x), wgc.empty((N,), "f32")
    s = _queue.submitter()
    names = ["check+bind", "record", "finish", "submit+wait", "total"]
    rows: dict[str, list[float]] = {k: [] for k in names}
    for i in range(args.repeat + 200):
        t0 = time.perf_counter_ns()
        _k, _o, d = commands._bound_run("elementwise_add", [a, b], out, None)
        t1 = time.perf_counter_ns()
        enc = Encoder()
        enc.record(d)
        t2 = time.perf_counter_ns()
        cb = enc.finish()
        t3 = time.perf_counter_ns()
        s.submit_and_wait(cb)
        t4 = time.perf_counter_ns()
        if i >= 200:
            for k, v in zip(names, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)):
                rows[k].append(v / 1e3)
    assert np.array_equal(out.to_numpy(), 2 * x)
    for k in names:
        v = sorted(rows[k])
        print(f"{k:>11}: median {statistics.median(v):7.2f} us   p10 {v[len(v) // 10]:7.2f}"
              f"   p90 {v[9 * len(v) // 10]:7.2f}")

    # one non-blocking poll on an idle queue
    for _ in range(100):
        s.poll()
    t0 = time.perf_counter_ns()
    for _ in range(10000):
        s.poll()
    print(f"one poll, idle queue: {(time.perf_counter_ns() - t0) / 1e7:.2f} us")

    # the floor: the same C calls from the least Python possible (handles resolved once, one
    # flag set by the work-done callback, spin on non-blocking polls), and hybrids that put
    # one part of wgcompute's path back at a time; interleaved rounds, since hosts drift
    from wgpu.backends.wgpu_native._ffi import ffi, lib

    from wgcompute._encode import _BUFFER_DESC, _ENCODER_DESC, _PASS_DESC, CommandBuffer

    ((pipe, bg, gx, gy, gz),) = d.raw_calls()
    dev_id, queue_id, null = s._dev_id, s._queue_id, ffi.NULL
    arr = ffi.new("WGPUCommandBuffer[]", 1)
    flag = [False]

    @ffi.callback("void(WGPUQueueWorkDoneStatus, WGPUStringView, void *, void *)")
    def done(_status, _message, _u1, _u2):
        flag[0] = True

    info = ffi.new("WGPUQueueWorkDoneCallbackInfo *")
    info.mode = lib.WGPUCallbackMode_AllowProcessEvents
    info.callback = done

    def raw_record():
        enc = lib.wgpuDeviceCreateCommandEncoder(dev_id, _ENCODER_DESC)
        cp = lib.wgpuCommandEncoderBeginComputePass(enc, _PASS_DESC)
        lib.wgpuComputePassEncoderSetPipeline(cp, pipe)
        lib.wgpuComputePassEncoderSetBindGroup(cp, 0, bg, 0, null)
        lib.wgpuComputePassEncoderDispatchWorkgroups(cp, gx, gy, gz)
        lib.wgpuComputePassEncoderEnd(cp)
        lib.wgpuComputePassEncoderRelease(cp)
        return enc

    def raw_finish(enc):
        cb = lib.wgpuCommandEncoderFinish(enc, _BUFFER_DESC)
        lib.wgpuCommandEncoderRelease(enc)
        return cb

    def raw_submit_wait(cb):
        arr[0] = cb
        lib.wgpuQueueSubmitForIndex(queue_id, 1, arr)
        lib.wgpuCommandBufferRelease(cb)
        flag[0] = False
        lib.wgpuQueueOnSubmittedWorkDone(queue_id, info[0])
        while not flag[0]:
            lib.wgpuDevicePoll(dev_id, False, null)

    def ours_encode():
        enc = Encoder()
        enc.record(d)
        cb = enc.finish()
        h, cb._internal = cb._internal, None
        return h

    def ours_submit(h):
        return _queue.submit([CommandBuffer(h)])

    def spin(fence):
        while not fence.event.is_set():
            lib.wgpuDevicePoll(dev_id, False, null)

    variants = {
        "C calls, minimal Python": lambda: raw_submit_wait(raw_finish(raw_record())),
        "+ our encoder (record, finish)": lambda: raw_submit_wait(ours_encode()),
        "+ submit (Fence), spin": lambda: spin(ours_submit(raw_finish(raw_record()))),
        "+ submit (Fence), wait": lambda: _queue.wait(ours_submit(raw_finish(raw_record()))),
        "+ submit_and_wait": lambda: s.submit_and_wait(CommandBuffer(raw_finish(raw_record()))),
        "+ our bind check": lambda: (commands._bound_run("elementwise_add", [a, b], out, None),
                                     raw_submit_wait(raw_finish(raw_record()))),
        "run_kernel": lambda: wgc.run_kernel("elementwise_add", [a, b], out),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    order = list(variants)
    rounds = 10
    for r in range(rounds):
        random.Random(r).shuffle(order)
        for name in order:
            fn = variants[name]
            for i in range(args.repeat // rounds + 100):
                t0 = time.perf_counter_ns()
                fn()
                if i >= 100:
                    times[name].append((time.perf_counter_ns() - t0) / 1e3)
    for name, v in times.items():
        print(f"{name:>32}: median {statistics.median(v):7.2f} us")

    # the asynchronous path: a Command, the poll thread woken at submit, wait() on the fence;
    # "no poll thread" pretends a token is held so that submit does not wake it
    spec = {"op": "run_kernel", "kernel": "elementwise_add", "inputs": [a, b], "output": out}

    class _Held:
        def set_done(self):
            pass

    def no_poll_thread():
        token = s._token  # a real one lingers after the other variants' commands: end it
        if token is not None and not isinstance(token, _Held):
            token.set_done()
        s._token = _Held()
        try:
            wgc.run_kernel_async("elementwise_add", [a, b], out).wait()
        finally:
            s._token = None  # the next command takes (and wakes) a real one

    async_variants = {
        "run_kernel": lambda: wgc.run_kernel("elementwise_add", [a, b], out),
        "run_kernel_async + wait": lambda: wgc.run_kernel_async("elementwise_add", [a, b],
                                                                out).wait(),
        "  the same, no poll thread": no_poll_thread,
        "submit(spec) + wait": lambda: wgc.submit(spec).wait(),
    }
    atimes: dict[str, list[float]] = {k: [] for k in async_variants}
    order = list(async_variants)
    for r in range(rounds):
        random.Random(r).shuffle(order)
        for name in order:
            for i in range(args.repeat // rounds + 100):
                t0 = time.perf_counter_ns()
                async_variants[name]()
                if i >= 100:
                    atimes[name].append((time.perf_counter_ns() - t0) / 1e3)
    for name, v in atimes.items():
        print(f"{name:>32}: median {statistics.median(v):7.2f} us")

    # a 100-stage pipeline (each stage adds a to the previous stage's output): Pipeline.run
    # against the same dispatches recorded by the least Python possible, and the GPU alone
    stages = 100
    bufs = [a] + [wgc.empty((N,), "f32") for _ in range(stages)]
    p = wgc.pipeline("probe-100")
    for i in range(stages):
        p.add(kernel="elementwise_add", inputs=[bufs[i], a], output=bufs[i + 1])
    calls = [c for st in p._stages for c in st.dispatch.raw_calls()]

    def chain_cb():
        enc = lib.wgpuDeviceCreateCommandEncoder(dev_id, _ENCODER_DESC)
        cp = lib.wgpuCommandEncoderBeginComputePass(enc, _PASS_DESC)
        lib.wgpuComputePassEncoderSetPipeline(cp, calls[0][0])
        for _pipe, group, x, y, z in calls:
            lib.wgpuComputePassEncoderSetBindGroup(cp, 0, group, 0, null)
            lib.wgpuComputePassEncoderDispatchWorkgroups(cp, x, y, z)
        lib.wgpuComputePassEncoderEnd(cp)
        lib.wgpuComputePassEncoderRelease(cp)
        return raw_finish(enc)

    def raw_chain():
        raw_submit_wait(chain_cb())

    def host_only():
        cb = chain_cb()
        arr[0] = cb
        t0 = time.perf_counter_ns()
        lib.wgpuQueueSubmitForIndex(queue_id, 1, arr)
        host[0] += time.perf_counter_ns() - t0
        lib.wgpuCommandBufferRelease(cb)
        flag[0] = False
        lib.wgpuQueueOnSubmittedWorkDone(queue_id, info[0])
        while not flag[0]:
            lib.wgpuDevicePoll(dev_id, False, null)

    host = [0]
    chain = {"Pipeline.run": p.run, "C calls, minimal Python": raw_chain}
    ctimes: dict[str, list[float]] = {k: [] for k in chain}
    for r in range(rounds):
        for name in sorted(chain, key=lambda _k: random.Random(r).random()):
            for i in range(30):
                t0 = time.perf_counter_ns()
                chain[name]()
                if i >= 5:
                    ctimes[name].append((time.perf_counter_ns() - t0) / 1e3 / stages)
    for name, v in ctimes.items():
        print(f"100-stage pipeline, {name:>24}: median {statistics.median(v):6.2f} us per stage")
    for _ in range(50):
        host_only()
    print(f"100-stage pipeline, wgpuQueueSubmit alone: {host[0] / 50 / 1e3 / stages:.2f} us per "
          f"stage")
    if "timestamp-query" in wgc.device_info()["features"]:
        from benchmarks.harness import gpu_time

        def rec(cpass):
            cpass.set_pipeline(p._stages[0].dispatch.compiled.pipeline)
            for st in p._stages:
                cpass.set_bind_group(0, st.dispatch.bind_groups[0])
                cpass.dispatch_workgroups(*st.dispatch.launches[0].workgroups)

        sec, how = gpu_time(None, record_pass=rec, warmup=2, repeat=10)
        print(f"100-stage pipeline, GPU time of the pass: {sec * 1e6 / stages:.2f} us per stage "
              f"({how})")
    assert np.allclose(bufs[-1].to_numpy(), x * (stages + 1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
