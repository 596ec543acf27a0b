"""Asynchronous commands: submit → poll → wait / await on real GPU fences, callbacks,
failures, threads. numpy is the reference for every result."""

import asyncio
import threading
import time

import numpy as np
import pytest

import wgcompute as wgc

SPIN = """
struct Params { n: u32, iters: u32, }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * 64u + lid;
    if (i >= p.n) { return; }
    var v = x[i];
    for (var k = 0u; k < p.iters; k = k + 1u) { v = v * 0.5 + 1.0; }
    out[i] = v;
}
"""


@pytest.fixture(scope="module")
def spin():
    """A kernel that takes a while: iters steps of v = v/2 + 1 (converges to 2)."""
    if "test_spin" not in wgc.kernels():
        wgc.register_kernel("test_spin", SPIN, bindings=[("x", "read"), ("out", "read_write"),
                                                        ("p", "uniform")],
                            params={"n": "u32", "iters": "u32"}, workgroup_size=64)
    return "test_spin"


_ITERS = {}


def long_iters(spin, target_s=0.4, n=65_536):
    """Iterations that make the spin kernel take about ``target_s`` on this adapter
    (a GPU runs tens of thousands of iterations in a millisecond, lavapipe does not)."""
    if "iters" not in _ITERS:
        x = wgc.from_numpy(np.zeros(n, np.float32))
        out = wgc.empty((n,), "f32")
        iters = 1000
        while True:
            wgc.run_kernel(spin, [x], out, {"iters": iters})
            t = time.perf_counter()
            wgc.run_kernel(spin, [x], out, {"iters": iters})
            dt = time.perf_counter() - t
            if dt > 0.05 or iters >= 1 << 26:
                break
            iters *= 8
        _ITERS["iters"] = max(1000, min(int(iters * target_s / dt), 1 << 28))
    return _ITERS["iters"]


def long_command(spin, iters=None, n=65_536):
    iters = long_iters(spin) if iters is None else iters
    x = wgc.from_numpy(np.zeros(n, np.float32))
    out = wgc.empty((n,), "f32")
    return wgc.submit({"op": "run_kernel", "kernel": spin, "inputs": [x], "output": out,
                       "params": {"iters": iters}}), out


@pytest.mark.needs("async-submit")
def test_submit_returns_before_the_gpu_finishes_and_poll_sees_the_states(spin):
    iters = long_iters(spin)  # calibrated (and compiled) outside the timing
    n = 65_536
    x = wgc.from_numpy(np.zeros(n, np.float32))
    out = wgc.empty((n,), "f32")
    t0 = time.perf_counter()
    cmd = wgc.submit({"op": "run_kernel", "kernel": spin, "inputs": [x], "output": out,
                      "params": {"iters": iters}})
    submit_s = time.perf_counter() - t0
    seen = []
    poll_times = []
    while True:
        t = time.perf_counter()
        status = wgc.poll(cmd)
        poll_times.append(time.perf_counter() - t)
        if not seen or seen[-1] != status:
            seen.append(status)
        if status in ("completed", "failed"):
            break
        time.sleep(0.002)
    total_s = time.perf_counter() - t0
    assert seen[0] in ("pending", "running")
    assert seen[-1] == "completed" and seen[-1] == wgc.Status.COMPLETED
    assert len(seen) >= 2, "the long kernel finished before the first poll"
    assert submit_s < total_s / 3, (submit_s, total_s)
    assert max(poll_times) < 0.01  # poll never waits for the GPU
    np.testing.assert_allclose(out.to_numpy(), 2.0, rtol=1e-6)
    assert wgc.poll(cmd.id) == "completed"  # poll accepts the id too


@pytest.mark.needs("async-submit")
def test_wait_with_timeout_then_without(spin):
    cmd, out = long_command(spin)
    with pytest.raises(wgc.TimeoutError) as info:
        wgc.wait(cmd, timeout=0.001)
    assert isinstance(info.value, TimeoutError)  # also the builtin
    assert cmd.wait() is out
    assert cmd.done()
    with pytest.raises(wgc.ArgumentError, match="timeout"):
        cmd.wait(timeout=-1)


@pytest.mark.needs("async-submit")
def test_wait_releases_the_gil(spin):
    cmd, _ = long_command(spin)
    counter = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counter[0] += 1

    t = threading.Thread(target=count)
    t.start()
    t0 = time.perf_counter()
    cmd.wait()
    waited = time.perf_counter() - t0
    stop.set()
    t.join()
    assert waited > 0.01
    assert counter[0] > 10_000, "another Python thread could not run while wait() blocked"


@pytest.mark.parametrize("how", ["Command.wait", "run_kernel"])
def test_a_long_wait_does_not_spin_the_cpu(spin, how):
    """Waiters poll without pausing only for their first millisecond, then sleep between
    polls: the waiting thread's own CPU time stays a small part of the wait."""
    iters = long_iters(spin)
    x = wgc.from_numpy(np.zeros(65_536, np.float32))
    out = wgc.empty((65_536,), "f32")
    wall, cpu = time.perf_counter(), time.thread_time()
    if how == "run_kernel":
        wgc.run_kernel(spin, [x], out, {"iters": iters})
    else:
        wgc.submit({"op": "run_kernel", "kernel": spin, "inputs": [x], "output": out,
                    "params": {"iters": iters}}).wait()
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    assert wall > 0.1
    assert cpu < 0.2 * wall, f"the waiting thread used {cpu:.3f} s of CPU in {wall:.3f} s"
    np.testing.assert_allclose(out.to_numpy()[:4], 2.0, rtol=1e-5)


def test_done_callback_runs_without_polling(spin):
    cmd, _ = long_command(spin, iters=long_iters(spin) // 8)
    called = threading.Event()
    got = []
    cmd.add_done_callback(lambda c: (got.append(c.status), called.set()))
    assert called.wait(30), "callback never ran: nothing progressed the command"
    assert got == ["completed"]
    late = []
    cmd.add_done_callback(lambda c: late.append(c.id))  # already done: runs at once
    assert late == [cmd.id]


def test_failed_command_reports_reason_and_raises():
    # The shader needs a 4096-element binding; a 4-element buffer passes wgcompute's own
    # checks (custom kernels declare no shapes) and fails wgpu's validation of the dispatch.
    src = """
@group(0) @binding(0) var<storage, read_write> out: array<f32, 4096>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < 4096u) { out[g.x] = 1.0; }
}"""
    if "test_fixed_size" not in wgc.kernels():
        wgc.register_kernel("test_fixed_size", src, bindings=[("out", "read_write")],
                            workgroup_size=64)
    out = wgc.empty((4,), "f32")
    cmd = wgc.submit({"op": "run_kernel", "kernel": "test_fixed_size", "inputs": [],
                      "output": out})
    assert wgc.poll(cmd) == "failed"
    assert "binding" in str(cmd.error).lower() or "size" in str(cmd.error).lower()
    with pytest.raises(wgc.CommandFailedError) as info:
        wgc.wait(cmd)
    assert info.value.cause is cmd.error
    with pytest.raises(wgc.CommandFailedError, match="test_fixed_size") as info:
        wgc.run_kernel("test_fixed_size", [], out)  # the synchronous path, no Command
    assert "binding" in str(info.value.cause).lower() or "size" in str(info.value.cause).lower()
    # the engine keeps working after a failed command
    assert wgc.add(wgc.buffer([1.0]), wgc.buffer([2.0])).tolist() == [3.0]


def test_asyncio_1000_concurrent_commands_and_the_loop_stays_free(rng):
    n = 257
    xs = [rng.standard_normal(n).astype(np.float32) for _ in range(1000)]
    bufs = [wgc.from_numpy(x) for x in xs]
    outs = [wgc.empty((n,), "f32") for _ in xs]

    async def main():
        ticks = 0
        done = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0)

        t = asyncio.create_task(ticker())
        cmds = [wgc.run_kernel_async("relu", [b], o) for b, o in zip(bufs, outs)]
        results = await asyncio.gather(*cmds)
        done.set()
        await t
        return results, ticks

    results, ticks = asyncio.run(main())
    assert ticks > 0
    for r, o in zip(results, outs):
        assert r is o
    for x, o in zip(xs[::50], outs[::50]):
        np.testing.assert_array_equal(o.to_numpy(), np.maximum(x, 0))
    wgc.free_many(bufs + outs)


def test_eight_threads_times_500_submits(rng):
    n = 64
    errors = []

    def worker(seed):
        r = np.random.default_rng(seed)
        try:
            a_np = r.standard_normal(n).astype(np.float32)
            b_np = r.standard_normal(n).astype(np.float32)
            a, b = wgc.from_numpy(a_np), wgc.from_numpy(b_np)
            outs = [wgc.empty((n,), "f32") for _ in range(10)]
            for i in range(500):
                o = outs[i % 10]
                cmd = wgc.submit({"op": "run_kernel", "kernel": "elementwise_add",
                                  "inputs": [a, b], "output": o})
                if i % 10 == 9:
                    cmd.wait()
                    for oo in outs:
                        np.testing.assert_array_equal(oo.to_numpy(), a_np + b_np)
                    a_np = r.standard_normal(n).astype(np.float32)
                    a.write(a_np)
        except Exception as e:  # surfaced in the main thread below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_buffer_freed_while_in_flight_stays_alive(spin):
    n = 65_536
    x = wgc.from_numpy(np.full(n, 7.0, np.float32))
    out = wgc.empty((n,), "f32")
    cmd = wgc.submit({"op": "run_kernel", "kernel": spin, "inputs": [x], "output": out,
                      "params": {"iters": 3}})
    x.free()  # the command still owns x's GPU memory until it completes
    assert x.freed
    with pytest.raises(wgc.BufferFreedError):
        x.read()
    cmd.wait()
    np.testing.assert_allclose(out.to_numpy(), 7.0 / 8 + 1.75, rtol=1e-6)


def test_copy_buffer_and_barrier_ops(rng):
    a_np = rng.standard_normal(1000).astype(np.float32)
    a = wgc.from_numpy(a_np)
    b = wgc.empty((1000,), "f32")
    c1 = wgc.submit({"op": "copy_buffer", "inputs": [a], "output": b})
    c2 = wgc.submit({"op": "barrier"})
    c2.wait()
    assert c1.done()  # the queue is in order: a barrier implies everything before it
    np.testing.assert_array_equal(b.to_numpy(), a_np)


def test_bad_specs_are_rejected_at_submit():
    a = wgc.buffer([1.0])
    with pytest.raises(wgc.ArgumentError, match="spec"):
        wgc.submit("relu")
    with pytest.raises(wgc.ArgumentError, match="op"):
        wgc.submit({"op": "dance"})
    with pytest.raises(wgc.ArgumentError, match="unknown key"):
        wgc.submit({"op": "run_kernel", "kernel": "relu", "inputs": [a], "ouput": a})
    with pytest.raises(wgc.KernelNotFoundError):
        wgc.submit({"op": "run_kernel", "kernel": "nope", "inputs": [a]})
    with pytest.raises(wgc.ArgumentError, match="cmd"):
        wgc.poll(10**12)
    with pytest.raises(wgc.ArgumentError, match="cmd"):
        wgc.wait("1")
