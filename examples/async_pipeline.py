"""Asynchronous pipelines in Python: submit → poll → wait, parallel commands,
a multi-stage pipeline, the same pipeline asynchronously, and awaiting from asyncio."""

import asyncio
import time

import numpy as np

import wgcompute as wgc


def submit_poll_wait():
    a = wgc.buffer([1.0, -2.0, 3.0])
    b = wgc.empty((3,), "f32")
    cmd = wgc.submit({"op": "run_kernel", "kernel": "relu", "inputs": [a], "output": b,
                      "params": {}})
    status = wgc.poll(cmd)                    # never blocks
    print(f"submitted command {cmd.id}: {status}")
    while wgc.poll(cmd) not in ("completed", "failed"):
        time.sleep(0.0005)                    # do other work here
    wgc.wait(cmd)                             # returns at once now
    print("relu:", b.tolist())
    assert b.tolist() == [1.0, 0.0, 3.0]


def parallel_commands():
    inputs = [np.linspace(-1, 1, 100, dtype=np.float32) * (i + 1) for i in range(8)]
    outputs = [wgc.empty((100,), "f32") for _ in inputs]
    cmds = [wgc.run_kernel_async("relu", [wgc.from_numpy(x)], out)
            for x, out in zip(inputs, outputs)]
    for cmd in cmds:
        wgc.wait(cmd)
    for x, out in zip(inputs, outputs):
        np.testing.assert_array_equal(out.to_numpy(), np.maximum(x, 0))
    print(f"{len(cmds)} commands in flight together, all completed")


def multi_stage_pipeline():
    inp = wgc.buffer([1.0, 2.0, 3.0], shape=(3,), dtype="f32")
    stage1 = wgc.buffer_zeros((3,), "f32")
    stage2 = wgc.buffer_zeros((3,), "f32")
    p = wgc.pipeline()
    wgc.pipeline_add(p, {"op": "run_kernel", "kernel": "elementwise_add",
                         "inputs": [inp, inp], "output": stage1})
    wgc.pipeline_add(p, {"op": "run_kernel", "kernel": "relu", "inputs": [stage1],
                         "output": stage2})
    wgc.pipeline_run(p)                      # one command buffer, one submit
    print("pipeline:", wgc.read_list(stage2))
    assert wgc.read_list(stage2) == [2.0, 4.0, 6.0]

    cmd = p.submit()                         # the same pipeline, asynchronously
    print("async pipeline:", wgc.poll(cmd))
    wgc.wait(cmd)
    wgc.free_pipeline(p)


async def awaiting():
    x = wgc.from_numpy(np.arange(-5, 5, dtype=np.float32))
    y = await wgc.run_kernel_async("relu", [x])   # the event loop keeps running meanwhile
    print("awaited:", y.tolist())
    assert y.tolist() == [0.0] * 6 + [1.0, 2.0, 3.0, 4.0]


if __name__ == "__main__":
    print(wgc.device_info()["name"])
    submit_poll_wait()
    parallel_commands()
    multi_stage_pipeline()
    asyncio.run(awaiting())
