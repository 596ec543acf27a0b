"""Devices as CuPy and torch users expect them: ``wgc.device(i)`` hands out the open device of
an adapter (the default one included) until it is closed; ``with d:`` makes d the current device
for a block (per thread and per asyncio task) and leaves it open; ``synchronize()`` waits for a
device's work; ``memory_stats()`` counts its memory; a Command's ``future()`` works with
concurrent.futures. Every kernel runs on the adapter under test and is compared with numpy."""

import asyncio
import concurrent.futures
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import wgcompute as wgc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def _index(dev: wgc.Device) -> int:
    """The index in wgc.devices() of ``dev``'s adapter."""
    return next(a.index for a in wgc.devices() if a.name == dev.name and a.backend == dev.backend)


@pytest.fixture
def second():
    """A second logical device on the default device's adapter (new=True), closed after."""
    d = wgc.device(_index(wgc.default_device()), new=True)
    yield d
    d.close()


def _relu_on(dev: wgc.Device) -> wgc.Buffer:
    x = np.arange(-8, 8, dtype=np.float32)
    out = wgc.relu(wgc.from_numpy(x, device=dev))
    np.testing.assert_array_equal(out.to_numpy(), np.maximum(x, 0))
    return out


# -- 1. wgc.device() hands out the open device of an adapter ----------------------------------

_ON_GL = wgc.device_info()["backend"] == "OpenGL"
_GL = pytest.mark.skipif(_ON_GL, reason="wgpu's GL backend opens one device a process, and "
                         "lists llvmpipe twice (GL and Vulkan) under one name")


@_GL
def test_device_returns_the_open_device_of_its_adapter_the_default_one_included():
    dflt = wgc.default_device()
    i = _index(dflt)
    before = len(wgc.runtime.open_devices())
    got = [wgc.device(i) for _ in range(10)]
    assert all(d is dflt for d in got)
    assert wgc.device() is dflt
    assert wgc.device(dflt.name.upper()) is dflt  # by a part of its name
    assert wgc.device(i, backend=dflt.backend.lower()) is dflt
    assert wgc.device(wgc.devices()[i]) is dflt  # an AdapterInfo
    assert len(wgc.runtime.open_devices()) == before  # nothing new was opened
    assert _relu_on(wgc.device(i)).device is dflt


def test_threads_asking_at_once_in_a_fresh_process_get_one_device():
    r = _run("import threading, wgcompute as wgc\n"
             "go, got = threading.Barrier(8), []\n"
             "def ask():\n"
             "    go.wait(); got.append(wgc.device(0))\n"
             "ts = [threading.Thread(target=ask) for _ in range(8)]\n"
             "[t.start() for t in ts]; [t.join() for t in ts]\n"
             "print(len({id(d) for d in got}), len(wgc.runtime.open_devices()),\n"
             "      wgc.relu(wgc.buffer([-1.0, 2.0], device=got[0])).tolist())\n")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "1 1 [0.0, 2.0]"


@_GL
def test_after_close_the_next_call_opens_a_new_device_which_is_the_default():
    r = _run("import wgcompute as wgc\n"
             "d = wgc.device(0)\n"
             "same = wgc.device(0) is d\n"
             "d.close()\n"
             "e = wgc.device(0)\n"
             "print(same, e is not d, d.state, e.state, wgc.device(0) is e,\n"
             "      wgc.relu(wgc.buffer([-3.0, 3.0], device=e)).tolist())\n"
             "dflt = wgc.default_device()\n"
             "print(dflt is wgc.device(dflt.name), wgc.device() is dflt)\n")
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "True True closed open True [0.0, 3.0]"
    assert lines[1] == "True True"


@pytest.mark.needs("several-devices")
def test_new_true_opens_a_second_device_and_leaves_the_shared_one(second):
    dflt = wgc.default_device()
    assert second is not dflt and second.state == "open"
    assert wgc.device(_index(dflt)) is dflt
    assert _relu_on(second).device is second


def test_hold_clocks_that_differ_from_the_open_devices_are_refused():
    dflt = wgc.default_device()
    i = _index(dflt)
    held = dflt.clocks_held
    assert wgc.device(i, hold_clocks=held) is dflt  # what it has: the open device
    assert wgc.device(i, hold_clocks=None) is dflt
    want = "True" if not held else "False"
    with pytest.raises(wgc.ArgumentError, match=f"hold_clocks={want}: .* is open with its "
                                                f"clocks {'not ' if not held else ''}held"):
        wgc.device(i, hold_clocks=not held)
    with pytest.raises(wgc.ArgumentError, match="new: expected True or False, got 'yes'"):
        wgc.device(i, new="yes")


# -- 2. with d: selects d for the block and leaves it open --------------------------------------

@pytest.mark.needs("several-devices")
def test_with_device_makes_it_current_restores_the_previous_and_leaves_it_open(second):
    dflt = wgc.default_device()
    assert wgc.current_device() is dflt
    with second as entered:
        assert entered is second and wgc.current_device() is second
        a = wgc.from_numpy(np.arange(6, dtype=np.float32))  # no device=: the current one
        assert a.device is second
        assert _relu_on(second).device is second
        with dflt:
            assert wgc.current_device() is dflt
            with second:  # entered again, inside
                assert wgc.current_device() is second
            assert wgc.current_device() is dflt
        assert wgc.current_device() is second
        np.testing.assert_array_equal(wgc.scale(a, 2.0).to_numpy(), np.arange(6) * 2.0)
    assert wgc.current_device() is dflt
    assert second.state == "open"  # not closed by the block
    assert _relu_on(second).device is second


@pytest.mark.needs("several-devices")
def test_use_device_is_the_same_as_with_device(second):
    with wgc.use_device(second) as entered:
        assert entered is second and wgc.current_device() is second
    assert wgc.use_device(second) is second
    assert second.state == "open"
    with pytest.raises(wgc.ArgumentError, match="dev: expected a wgc.Device"):
        wgc.use_device("gpu0")


@pytest.mark.needs("several-devices")
def test_with_a_closed_device_is_refused():
    d = wgc.device(_index(wgc.default_device()), new=True)
    d.close()
    with pytest.raises(wgc.DeviceError, match="is closed"):
        with d:
            pass
    assert wgc.current_device() is wgc.default_device()


@pytest.mark.needs("several-devices")
def test_two_threads_with_different_current_devices_each_compute_on_their_own(second):
    dflt = wgc.default_device()
    go = threading.Barrier(2)
    seen: dict = {}

    def work(dev, key):
        with dev:
            go.wait()  # both blocks are open at once
            x = np.arange(-100, 100, dtype=np.float32) * (1 + len(key))
            for _ in range(5):
                out = wgc.relu(wgc.from_numpy(x))
                np.testing.assert_array_equal(out.to_numpy(), np.maximum(x, 0))
            seen[key] = (wgc.current_device(), out.device)
            go.wait()

    ts = [threading.Thread(target=work, args=(second, "a")),
          threading.Thread(target=work, args=(dflt, "bb"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert seen["a"] == (second, second) and seen["bb"] == (dflt, dflt)
    assert wgc.current_device() is dflt


@pytest.mark.needs("several-devices")
def test_asyncio_tasks_each_see_their_own_current_device(second):
    dflt = wgc.default_device()

    async def task(dev):
        with dev:
            await asyncio.sleep(0.01)  # the other task runs meanwhile
            out = await wgc.run_kernel_async("relu", [wgc.buffer([-1.0, 5.0])], None)
            await asyncio.sleep(0.01)
            return wgc.current_device(), out.device, out.tolist()

    async def main():
        return await asyncio.gather(task(second), task(dflt))

    (c1, o1, r1), (c2, o2, r2) = asyncio.run(main())
    assert (c1, o1, c2, o2) == (second, second, dflt, dflt)
    assert r1 == r2 == [0.0, 5.0]


# -- 3. synchronize ------------------------------------------------------------------------------

def _spin_kernel() -> str:
    name = "semantics_spin"
    if name not in wgc.kernels():
        wgc.register_kernel(name, """
struct Params { n: u32, iters: u32, }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x >= p.n) { return; }
    var v = x[g.x];
    for (var k = 0u; k < p.iters; k = k + 1u) { v = v * 0.5 + 1.0; }
    out[g.x] = v;
}
""", bindings=[("x", "read"), ("out", "read_write"), ("p", "uniform")],
                            params={"n": "u32", "iters": "u32"}, workgroup_size=64)
    return name


def test_synchronize_waits_for_every_command_submitted_to_the_device():
    name = _spin_kernel()
    x = wgc.from_numpy(np.zeros(4096, np.float32))
    cmds = [wgc.run_kernel_async(name, [x], wgc.empty((4096,), "f32"),
                                 {"iters": 2000}) for _ in range(6)]
    wgc.synchronize()
    assert [c.status for c in cmds] == ["completed"] * 6  # done without waiting on them
    for c in cmds:
        np.testing.assert_allclose(c.output.to_numpy(), np.full(4096, 2.0), rtol=1e-6)
    more = [wgc.run_kernel_async("relu", [x], None) for _ in range(3)]
    wgc.default_device().synchronize()
    assert all(c.done() for c in more)
    wgc.synchronize(wgc.default_device(), timeout=60)
    with pytest.raises(wgc.ArgumentError, match="device: expected a wgc.Device"):
        wgc.synchronize("gpu")
    with pytest.raises(wgc.ArgumentError, match="timeout"):
        wgc.synchronize(timeout=-1)


@pytest.mark.needs("several-devices")
def test_synchronize_waits_for_what_streams_were_given(second):
    name = _spin_kernel()
    s = wgc.create_stream(device=second)
    x = wgc.from_numpy(np.zeros(4096, np.float32), device=second)
    outs = [s.run_kernel(name, [x], wgc.empty((4096,), "f32", device=second),
                         params={"iters": 2000}) for _ in range(4)]
    second.synchronize()
    assert s.query() and all(c.status == "completed" for c in outs)
    with second:
        wgc.synchronize()  # the current device: nothing left to wait for
    second.close()
    with pytest.raises(wgc.DeviceError, match="is closed"):
        second.synchronize()


# -- 4. memory statistics ------------------------------------------------------------------------

@pytest.mark.needs("several-devices")
def test_memory_stats_count_live_buffers_pooled_memory_and_the_peak(second):
    s0 = second.memory_stats()
    for key in ("used", "pooled", "peak_used", "buffers", "pooled_buffers", "pool_limit"):
        assert isinstance(s0[key], int), key
    a = wgc.empty((1000,), "f32", device=second)  # 4000 bytes, allocated in 16-byte steps
    b = wgc.from_numpy(np.ones((64, 64), np.float32), device=second)
    s1 = second.memory_stats()
    assert s1["used"] - s0["used"] == 4000 + 64 * 64 * 4
    assert s1["buffers"] - s0["buffers"] == 2
    assert s1["peak_used"] >= s1["used"]
    r = wgc.relu(b)  # an operator's result: memory from the pool, back to it when freed
    s2 = second.memory_stats()
    assert s2["used"] >= s1["used"] + 64 * 64 * 4
    peak = s2["peak_used"]
    del r
    b.free()
    a.free()
    second.synchronize()  # (queued work keeps its buffers until it is done)
    s3 = second.memory_stats()
    assert s3["used"] == s0["used"] and s3["buffers"] == s0["buffers"]
    assert s3["pooled"] >= 64 * 64 * 4 and s3["pooled_buffers"] >= 1
    assert s3["peak_used"] == peak  # the peak stays
    released = second.release_memory_pool()
    s4 = second.memory_stats()
    assert released == s3["pooled"] and s4["pooled"] == 0 and s4["pooled_buffers"] == 0
    with second:
        assert wgc.memory_stats() == second.memory_stats()
    assert wgc.memory_stats(second)["used"] == s4["used"]


# -- 5. concurrent.futures -----------------------------------------------------------------------

def test_command_futures_work_with_wait_and_as_completed():
    name = _spin_kernel()
    x = wgc.from_numpy(np.arange(4096, dtype=np.float32))
    cmds = [wgc.run_kernel_async(name, [x], wgc.empty((4096,), "f32"),
                                 {"iters": 50 * (i + 1)}) for i in range(4)]
    futs = [c.future() for c in cmds]
    assert cmds[0].future() is futs[0]  # one Future per command
    assert not futs[-1].cancel()  # GPU work cannot be called back
    done, not_done = concurrent.futures.wait(futs, timeout=120)
    assert len(done) == 4 and not not_done
    seen = []
    for f in concurrent.futures.as_completed(futs, timeout=120):
        seen.append(f.result())
    assert {id(b) for b in seen} == {id(c.output) for c in cmds}
    ref = np.arange(4096, dtype=np.float64)
    for i, c in enumerate(cmds):
        want = ref.copy()
        for _ in range(50 * (i + 1)):
            want = want * 0.5 + 1.0
        np.testing.assert_allclose(c.output.to_numpy(), want, rtol=1e-5)
    rd = x.read_async().future()  # a readback's future holds the numpy array
    np.testing.assert_array_equal(rd.result(60), np.arange(4096, dtype=np.float32))


@pytest.mark.needs("several-devices")
def test_a_failed_commands_future_holds_its_error():
    d = wgc.device(_index(wgc.default_device()), new=True)
    x = wgc.from_numpy(np.ones(1 << 18, np.float32), device=d)
    y = wgc.empty(x.shape, device=d)
    p = wgc.pipeline(device=d)
    for i in range(60):
        p.add(kernel="relu", inputs=[x if i % 2 == 0 else y], output=y if i % 2 == 0 else x)
    cmd = p.submit()
    fut = cmd.future()
    d.gpu_device.destroy()  # a driver reset, as far as wgcompute can tell
    with pytest.raises(wgc.DeviceLostError, match="was lost"):
        d.synchronize()  # finds the loss: the pending command fails with it
    done, _ = concurrent.futures.wait([fut], timeout=60)
    assert done == {fut}
    if cmd.status == "failed":  # the GPU may have finished it before it went
        assert isinstance(fut.exception(), wgc.CommandFailedError)
        assert isinstance(fut.exception().cause, wgc.DeviceLostError)
    else:
        assert fut.exception() is None
    d.close()


# -- 6, 7. the latency floor and a process's first submit ---------------------------------------

def test_a_fresh_processs_first_tiny_op_completes():
    r = _run("import numpy as np, wgcompute as wgc\n"
             "x = wgc.from_numpy(np.ones(4, np.float32)) * 2\n"
             "print(x.to_numpy().tolist())\n")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "[2.0, 2.0, 2.0, 2.0]"


@pytest.mark.skipif(_ON_GL, reason="wgpu's GL backend runs the first op through other "
                    "native calls (wgpu-py's), whose C types are not primed")
def test_a_fresh_processs_first_op_parses_no_c_type_alone():
    """cffi parses each new C type string over a prelude of every webgpu.h typedef (15-30 ms
    each): wgcompute parses those of a first use in one batch, so opening the device, compiling,
    running and reading back parse none alone (before, 41 of them: 1.3 s of 1.4 s)."""
    r = _run("import cffi.cparser as cp\n"
             "parse, alone = cp.Parser.parse_type_and_quals, []\n"
             "def counted(self, cdecl):\n"
             "    alone.append(cdecl)\n"
             "    return parse(self, cdecl)\n"
             "cp.Parser.parse_type_and_quals = counted\n"
             "import numpy as np, wgcompute as wgc\n"
             "if wgc.device_info()['native'] != 'fast':\n"
             "    print('portable'); raise SystemExit\n"
             "at_import = len(alone)\n"
             "x = wgc.from_numpy(np.ones(4, np.float32)) * 2\n"
             "assert x.to_numpy().tolist() == [2.0] * 4\n"
             "wgc.synchronize()\n"
             "print(at_import, alone[at_import:])\n")
    assert r.returncode == 0, r.stderr[-3000:]
    if r.stdout.strip() == "portable":
        pytest.skip("wgcompute uses wgpu-py's public API here (no fast native path)")
    assert r.stdout.strip() == "2 []"  # the two wgpu-py itself asks for while importing


def test_c_types_parsed_in_a_batch_are_the_ones_cffi_makes():
    fast = pytest.importorskip("wgcompute._native.fast")
    from wgcompute._native import _ctypes

    ffi = fast.ffi
    names = [c for c in _ctypes.FIRST_USE if c in ffi._parsed_types]
    assert len(names) > 40
    for cdecl in names:  # parse each again, alone, as cffi does: the very same type
        batched = ffi._parsed_types.pop(cdecl)
        ffi._typeof(cdecl, consider_function_as_funcptr=True)
        assert ffi._parsed_types[cdecl] == batched, cdecl
    assert _ctypes.prime(ffi) == 0  # nothing left to parse
    assert _ctypes.prime(ffi, ["WGPUNoSuchType *"]) == 0  # unknown names are left alone


def test_latency_floor_benchmark_runs_and_prints_the_ratio():
    r = _run("import runpy, sys\n"
             "sys.argv = ['latency_floor.py', '--n', '30']\n"
             "runpy.run_path('benchmarks/latency_floor.py', run_name='__main__')\n")
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    for row in ("wgpu-native C calls", "wgc.run_kernel", "run_kernel_async(...).wait()"):
        assert row in out, out
    assert "ratio" in out


def test_first_submit_benchmark_prints_the_breakdown():
    r = _run("import runpy, sys\n"
             "sys.argv = ['first_submit.py', '--runs', '1']\n"
             "runpy.run_path('benchmarks/first_submit.py', run_name='__main__')\n", 300)
    assert r.returncode == 0, r.stderr[-3000:]
    for part in ("import", "device open", "shader compile", "submit+wait", "total"):
        assert part in r.stdout, r.stdout
