"""Dispatch overhead, side by side in one run: the round trip of a tiny kernel
(submit → completed), a 100-stage pipeline of small kernels (µs per stage), a small add as a
user writes it (blocking, queued, and `a + b` where the operator exists), and how long
submit() takes to return. wgcompute vs raw wgpu-py written the obvious way, vs torch/cupy
when importable.

    python -m benchmarks.bench_dispatch [--repeat N] [--json PATH]
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

from benchmarks.harness import Results, env_info, gpu_device, peers, queued_wall, wall_time

N_TINY = 256
STAGES = 100

ADD_WGSL = """
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < arrayLength(&out)) { out[g.x] = a[g.x] + b[g.x]; }
}
"""


def median_us(fn, repeat: int, warmup: int = 20) -> float:
    return wall_time(fn, warmup=warmup, repeat=repeat) * 1e6


class RawWgpu:
    """The obvious raw wgpu-py program: auto layout, a pass and a submit per dispatch,
    queue.read_buffer of a small buffer to wait."""

    def __init__(self, dev, n):
        import wgpu

        self.dev = dev
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        self.bufs = [dev.create_buffer(size=4 * n, usage=usage) for _ in range(STAGES + 2)]
        module = dev.create_shader_module(code=ADD_WGSL)
        self.pipe = dev.create_compute_pipeline(layout="auto",
                                                compute={"module": module, "entry_point": "main"})
        layout = self.pipe.get_bind_group_layout(0)
        self.bgs = [dev.create_bind_group(layout=layout, entries=[
            {"binding": 0, "resource": {"buffer": self.bufs[i]}},
            {"binding": 1, "resource": {"buffer": self.bufs[0]}},
            {"binding": 2, "resource": {"buffer": self.bufs[i + 1]}}]) for i in range(STAGES)]
        self.groups = (n + 255) // 256

    def wait(self):
        self.dev.queue.read_buffer(self.bufs[-1], 0, 4)

    def tiny(self):
        enc = self.dev.create_command_encoder()
        p = enc.begin_compute_pass()
        p.set_pipeline(self.pipe)
        p.set_bind_group(0, self.bgs[0])
        p.dispatch_workgroups(self.groups)
        p.end()
        self.dev.queue.submit([enc.finish()])
        self.wait()

    def chain(self, one_pass: bool):
        enc = self.dev.create_command_encoder()
        p = enc.begin_compute_pass() if one_pass else None
        for i in range(STAGES):
            if not one_pass:
                p = enc.begin_compute_pass()
            p.set_pipeline(self.pipe)
            p.set_bind_group(0, self.bgs[i])
            p.dispatch_workgroups(self.groups)
            if not one_pass:
                p.end()
        if one_pass:
            p.end()
        self.dev.queue.submit([enc.finish()])
        self.wait()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=300, help="timed repetitions (300)")
    ap.add_argument("--json", help="write the results as JSON here")
    ap.add_argument("--small", action="store_true", help="fewer repetitions (lavapipe)")
    args = ap.parse_args(argv)
    repeat = 50 if args.small else args.repeat

    import wgcompute as wgc

    res = Results("dispatch overhead (µs; lower is better)")
    x = np.arange(N_TINY, dtype=np.float32)
    a, b, out = wgc.from_numpy(x), wgc.from_numpy(x), wgc.empty((N_TINY,), "f32")

    # 1. round trip of a tiny kernel, submit -> completed
    t = median_us(lambda: wgc.run_kernel("elementwise_add", [a, b], out), repeat)
    res.add("tiny kernel round trip", "wgcompute", t * 1e-6, note="run_kernel")
    t = median_us(lambda: wgc.submit({"op": "run_kernel", "kernel": "elementwise_add",
                                      "inputs": [a, b], "output": out}).wait(), repeat)
    res.add("tiny kernel round trip", "wgcompute", t * 1e-6, note="submit + wait")
    raw = RawWgpu(gpu_device(), N_TINY)
    t = median_us(raw.tiny, repeat)
    res.add("tiny kernel round trip", "raw wgpu-py", t * 1e-6, note="read_buffer fence")

    # 2. a 100-stage pipeline of small kernels, per stage
    bufs = [a] + [wgc.empty((N_TINY,), "f32") for _ in range(STAGES)]
    p = wgc.pipeline("bench-100")
    for i in range(STAGES):
        p.add(kernel="elementwise_add", inputs=[bufs[i], a], output=bufs[i + 1])
    t = median_us(p.run, max(repeat // 5, 10), warmup=5)
    res.add("100-stage pipeline, per stage", "wgcompute", t * 1e-6 / STAGES)
    t = median_us(lambda: raw.chain(True), max(repeat // 5, 10), warmup=5)
    res.add("100-stage pipeline, per stage", "raw wgpu-py", t * 1e-6 / STAGES,
            note="one pass")
    t = median_us(lambda: raw.chain(False), max(repeat // 5, 10), warmup=5)
    res.add("100-stage pipeline, per stage", "raw wgpu-py", t * 1e-6 / STAGES,
            note="pass per dispatch")
    assert np.allclose(bufs[-1].to_numpy(), x * (STAGES + 1))
    if "timestamp-query" in wgc.device_info()["features"]:
        per_stage = [statistics.median(p.run(profile=True)) for _ in range(5)]
        res.add("100-stage pipeline, per stage", "wgcompute", statistics.median(per_stage)
                * 1e-3, timing="gpu-timestamp", note="GPU time of one stage, own pass")

    # 2b. a small add as a user writes it: blocking call, queued calls, and the `a + b`
    #     operator where this version has one (feature-detected: the same code runs on both)
    per = "small add (256 f32), per op"
    t = median_us(lambda: wgc.add(a, b, out), repeat)
    res.add(per, "wgcompute", t * 1e-6, note="wgc.add(a, b, out), blocking")
    t = queued_wall(lambda: wgc.run_kernel_async("elementwise_add", [a, b], out), count=100,
                    repeat=max(3, repeat // 50))
    res.add(per, "wgcompute", t, note="100 × run_kernel_async, one wait")
    if hasattr(type(a), "__add__"):
        def operator_loop():
            c = None
            for _ in range(100):
                c = a + b
            np.asarray(c.to_numpy())  # the program's next read waits for the last one

        t = wall_time(operator_loop, warmup=2, repeat=max(3, repeat // 50)) / 100
        res.add(per, "wgcompute", t, note="100 × (a + b), then one read")
    else:
        print(f"  {per}: this wgcompute has no `a + b` operator; row left out")

    # 3. how long submit() takes to return (never waits for the GPU)
    cmds = []

    def submit_only():
        cmds.append(wgc.submit({"op": "run_kernel", "kernel": "elementwise_add",
                                "inputs": [a, b], "output": out}))

    t = median_us(submit_only, repeat)
    cmds[-1].wait()
    res.add("submit() returns", "wgcompute", t * 1e-6, note="tiny kernel")
    cmds.clear()
    t = median_us(lambda: cmds.append(p.submit()), max(repeat // 5, 10), warmup=5)
    cmds[-1].wait()
    res.add("submit() returns", "wgcompute", t * 1e-6, note="100-stage pipeline")

    for name, mod in peers().items():
        xp = (mod.arange(N_TINY, dtype=mod.float32, device="cuda") if name == "torch"
              else mod.arange(N_TINY, dtype=mod.float32))
        sync = mod.cuda.synchronize if name == "torch" else mod.cuda.Device().synchronize
        t = median_us(lambda xp=xp, sync=sync: (xp + xp, sync()), repeat)
        res.add("tiny kernel round trip", name, t * 1e-6, note="add + synchronize")

        def chain(xp=xp, sync=sync):
            y = xp
            for _ in range(STAGES):
                y = y + xp
            sync()

        t = median_us(chain, max(repeat // 5, 10), warmup=5)
        res.add("100-stage pipeline, per stage", name, t * 1e-6 / STAGES, note="eager")

    print(f"device: {env_info().get('device')}")
    print(res.markdown())
    if args.json:
        res.write_json(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
