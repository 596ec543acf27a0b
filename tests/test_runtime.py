"""Devices: choosing one in code, several in one process computing at once, mixing refused,
close() releasing every GPU object, device loss and recovery, adopting a wgpu device,
stream_map over several devices, the portable native backend and the GL backend beside
Vulkan. Every result is compared with numpy."""

import asyncio
import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import wgpu

import wgcompute as wgc


def _run(code: str, **env) -> subprocess.CompletedProcess:
    full = dict(os.environ)
    full.setdefault("XDG_RUNTIME_DIR", "/tmp")
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=180)


def _counts() -> dict:
    gc.collect()
    return {k: v["count"] for k, v in wgpu.diagnostics.object_counts.get_dict().items()}


@pytest.fixture
def two():
    d0, d1 = wgc.device(new=True), wgc.device(new=True)
    yield d0, d1
    d0.close()
    d1.close()


def test_devices_lists_the_adapters_and_device_opens_them():
    found = wgc.devices()
    assert found and all(isinstance(a, wgc.AdapterInfo) for a in found)
    assert [a.index for a in found] == list(range(len(found)))
    d = wgc.device(0)
    assert d.name == found[0].name and d.backend == found[0].backend
    assert d.info()["name"] == d.name and d.state == "open"
    part = found[0].name.split()[0].upper()  # a case-insensitive substring of the name
    assert part.lower() in wgc.device(part).name.lower()
    with pytest.raises(wgc.ArgumentError, match="which: adapter index 99 out of range"):
        wgc.device(99)
    with pytest.raises(wgc.DeviceError, match="no adapter matches which='no-such-gpu'"):
        wgc.device("no-such-gpu")
    with pytest.raises(wgc.ArgumentError, match="backend: expected one of"):
        wgc.device(backend="directx9")
    with pytest.raises(wgc.ArgumentError, match="which: expected an adapter index"):
        wgc.device(1.5)


@pytest.mark.needs("several-devices")
def test_two_devices_compute_at_once_from_several_threads(two, rng):
    errors, done = [], []

    def worker(dev, seed):
        r = np.random.default_rng(seed)
        try:
            with wgc.use_device(dev):
                for i in range(25):
                    a = r.standard_normal((33, 17)).astype(np.float32)
                    b = r.standard_normal((17, 9)).astype(np.float32)
                    x, y = wgc.from_numpy(a), wgc.from_numpy(b)
                    assert x.device is dev
                    np.testing.assert_allclose(wgc.matmul(x, y).to_numpy(), a @ b, rtol=1e-5,
                                               atol=1e-5)
                    np.testing.assert_array_equal(wgc.relu(x).to_numpy(), np.maximum(a, 0))
                    z = wgc.run_kernel_async("elementwise_add", [x, x]).wait()
                    np.testing.assert_array_equal(z.to_numpy(), a + a)
                    ints = wgc.buffer(np.arange(i, i + 100, dtype=np.int32))
                    assert int(wgc.sum(ints, axis=None).to_numpy()) == sum(range(i, i + 100))
            done.append(seed)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(dev, s))
               for s, dev in enumerate([two[0], two[1], two[0], two[1]])]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[0]
    assert sorted(done) == [0, 1, 2, 3]
    assert two[0].submitter.submissions > 0 and two[1].submitter.submissions > 0


@pytest.mark.needs("several-devices")
def test_use_device_is_per_thread_and_per_task(two):
    d0, d1 = two
    seen = {}

    def thread():
        seen["thread"] = wgc.current_device()

    with wgc.use_device(d1):
        t = threading.Thread(target=thread)
        t.start()
        t.join()
        assert wgc.current_device() is d1
        assert wgc.empty((2,)).device is d1
    assert seen["thread"] is wgc.default_device()  # a new thread starts with the default

    async def task(dev, key):
        with wgc.use_device(dev):
            await asyncio.sleep(0.01)
            seen[key] = wgc.current_device()
            buf = wgc.buffer([1.0, -2.0])
            seen[key + "_result"] = (await wgc.run_kernel_async("relu", [buf])).tolist()

    async def both():
        await asyncio.gather(task(d0, "a"), task(d1, "b"))

    asyncio.run(both())
    assert seen["a"] is d0 and seen["b"] is d1
    assert seen["a_result"] == seen["b_result"] == [1.0, 0.0]
    with pytest.raises(wgc.ArgumentError, match="dev: expected a wgc.Device"):
        with wgc.use_device("gpu0"):
            pass


@pytest.mark.needs("several-devices")
def test_mixing_devices_is_a_device_error_naming_the_argument(two):
    d0, d1 = two
    a0 = wgc.buffer([1.0, 2.0], device=d0)
    a1 = wgc.buffer([1.0, 2.0], device=d1)
    with pytest.raises(wgc.DeviceError, match="arrays on two devices"):
        wgc.add(a0, a1)
    with pytest.raises(wgc.DeviceError, match="output is on device"):
        wgc.relu(a0, wgc.empty((2,), device=d1))
    p = wgc.pipeline(device=d0)
    with pytest.raises(wgc.PipelineError, match=r"inputs\[0\] is on device"):
        p.add(kernel="relu", inputs=[a1])
    with pytest.raises(wgc.DeviceError, match="destination is on device"):
        wgc.submit({"op": "copy_buffer", "inputs": [a0], "output": wgc.empty((2,), device=d1)})
    s = wgc.create_stream(device=d0)
    with pytest.raises(wgc.DeviceError, match="buf: .* this stream on"):
        s.write(a1, [3.0, 4.0])
    s.close()
    # copying across is explicit, and exact
    moved = a1.to(d0)
    assert moved.device is d0 and wgc.add(a0, moved).tolist() == [2.0, 4.0]
    assert a0.to(d0) is a0


@pytest.mark.needs("several-devices")
def test_close_releases_every_gpu_object_and_later_use_raises():
    before = _counts()
    d = wgc.device(new=True)
    a = wgc.from_numpy(np.arange(1 << 14, dtype=np.float32), device=d)
    b = wgc.relu(a)
    total = wgc.sum(a, axis=None)
    p = wgc.pipeline(device=d)
    p.add(kernel="scale", inputs=[a], output=b, params={"scalar": 2.0})
    p.run()
    s = wgc.create_stream(device=d)
    got = s.download(b)
    s.sync()
    mapped = [r.copy() for r in wgc.stream_map("relu", [np.ones(5000, np.float32)] * 4,
                                               devices=[d])]
    during = _counts()
    assert during["Buffer"] > before["Buffer"] and during["BindGroup"] > before["BindGroup"]
    d.close()
    after = _counts()
    for kind in ("Buffer", "BindGroup", "BindGroupLayout", "ComputePipeline", "ShaderModule",
                 "PipelineLayout", "QuerySet"):
        assert after[kind] <= before[kind], (kind, before[kind], after[kind])
    assert d.state == "closed" and not d.alive
    with pytest.raises(wgc.DeviceError, match="is closed"):
        a.to_numpy()
    with pytest.raises(wgc.DeviceError, match="is closed"):
        wgc.empty((2,), device=d)
    with pytest.raises(wgc.DeviceError, match="is closed"):
        p.run()
    with pytest.raises(wgc.DeviceError, match="is closed"):  # closed with its device
        s.download(b)
    d.close()  # twice is harmless
    np.testing.assert_array_equal(got.wait(), np.maximum(np.arange(1 << 14), 0) * 2)
    assert all(np.array_equal(m, np.ones(5000)) for m in mapped)
    assert float(total.device is d) == 1.0
    del a, b, total, p, s, d, got
    final = _counts()
    assert final["Device"] <= before["Device"] and final["Queue"] <= before["Queue"]


@pytest.mark.needs("several-devices")
def test_a_lost_device_fails_its_work_and_others_go_on(two):
    d0, d1 = two
    x = wgc.from_numpy(np.ones(1 << 18, np.float32), device=d0)
    y = wgc.empty(x.shape, device=d0)
    p = wgc.pipeline(device=d0)
    for i in range(60):
        p.add(kernel="relu", inputs=[x if i % 2 == 0 else y], output=y if i % 2 == 0 else x)
    cmd = p.submit()
    d0.gpu_device.destroy()  # a driver reset, as far as wgcompute can tell
    try:  # the GPU may have finished it before it went; otherwise it fails with the loss
        cmd.wait(timeout=30)
    except wgc.CommandFailedError as e:
        assert isinstance(e.cause, wgc.DeviceLostError)
    for _name, op in [("write", lambda: x.write(np.zeros(1 << 18, np.float32))),
                     ("write_async", lambda: x.write_async(np.zeros(1 << 18, np.float32))),
                     ("to_numpy", x.to_numpy), ("read_async", x.read_async),
                     ("run_kernel", lambda: wgc.relu(x, y)), ("pipeline", p.run),
                     ("submit", p.submit), ("empty", lambda: wgc.empty((4,), device=d0))]:
        with pytest.raises(wgc.DeviceLostError, match="was lost"):
            op()
    assert d0.state == "lost" and "lost" in repr(x)
    # the other device never noticed
    z = wgc.from_numpy(np.arange(-4, 4, dtype=np.float32), device=d1)
    assert wgc.relu(z).tolist() == [0, 0, 0, 0, 0, 1, 2, 3]


@pytest.mark.needs("several-devices")
def test_a_device_lost_under_stream_map_ends_the_iteration_with_the_loss():
    d = wgc.device(new=True)

    def batches():
        for i in range(40):
            if i == 5:
                # the GPU goes between two of the issuer's submits (wgpu-native aborts the
                # process on a submit that races its device's destroy: no library can guard
                # a destroy() it does not make; a driver's loss does not destroy objects)
                with d.submitter._lock:
                    d.gpu_device.destroy()
            yield np.full(1 << 16, i, np.float32)

    got, failure = [], None
    try:
        for r in wgc.stream_map("scale", batches(), depth=3, params={"scalar": 2.0},
                                devices=[d]):
            got.append(float(r[0]))
    except wgc.WgComputeError as e:
        failure = e
    assert got == [2.0 * i for i in range(len(got))]  # what came is right and in order
    assert failure is not None and len(got) < 40
    cause = getattr(failure, "cause", None) or failure
    assert isinstance(cause, wgc.DeviceError) and "lost" in str(cause)
    d.close()


@pytest.mark.slow
def test_the_default_device_reopens_after_it_is_lost():
    r = _run("import wgcompute as wgc\n"
             "a = wgc.buffer([1.0, 2.0])\n"
             "first = wgc.current_device()\n"
             "first.gpu_device.destroy()\n"
             "try:\n    a.tolist()\nexcept wgc.DeviceLostError as e:\n    print('lost:', e)\n"
             "b = wgc.buffer([3.0, -4.0])\n"
             "print(wgc.relu(b).tolist(), wgc.current_device() is not first, first.state)\n")
    assert r.returncode == 0, r.stderr
    assert "lost:" in r.stdout and "device 0" in r.stdout and "was lost" in r.stdout
    assert r.stdout.strip().endswith("[3.0, 0.0] True lost")


def test_adopting_a_wgpu_device_that_its_owner_keeps():
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    gd = adapter.request_device_sync()
    d = wgc.Device.from_wgpu(gd)
    a = wgc.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3), device=d)
    b = wgc.from_numpy(np.ones((3, 2), np.float32), device=d)
    np.testing.assert_array_equal(wgc.matmul(a, b).to_numpy(),
                                  np.arange(6, dtype=np.float32).reshape(2, 3) @ np.ones((3, 2)))
    assert a.gpu_buffer._device is gd  # the user's own wgpu device holds the memory
    d.close()
    buf = gd.create_buffer(size=16, usage=wgpu.BufferUsage.COPY_DST)  # still the owner's
    buf.destroy()
    with pytest.raises(wgc.ArgumentError, match="gpu_device: expected a wgpu.GPUDevice"):
        wgc.Device.from_wgpu("not a device")


@pytest.mark.parametrize("same", [False, True], ids=["two devices", "one device twice"])
@pytest.mark.needs("several-devices")
def test_stream_map_over_several_devices_keeps_input_order(two, same, rng):
    devs = [two[0], two[0]] if same else list(two)
    batches = [rng.standard_normal(3000 + 7 * i).astype(np.float32) for i in range(17)]
    subs = [d.submitter.submissions for d in two]
    out = list(wgc.stream_map("scale", batches, depth=2, params={"scalar": 3.0}, devices=devs))
    assert len(out) == len(batches)
    for got, b in zip(out, batches):
        np.testing.assert_array_equal(got, b * np.float32(3.0))
    if not same:
        assert all(d.submitter.submissions > s for d, s in zip(two, subs))
    # a Pipeline is copied to each device once; the natural map form works everywhere
    inp = wgc.empty((3000,), device=two[0])
    p = wgc.pipeline(device=two[0])
    p.add(kernel="relu", inputs=[inp])
    p.add(kernel="scale", inputs=[p.stages[0]["output"]], params={"scalar": 2.0})
    same_shape = [b[:3000] for b in batches]
    for got, b in zip(wgc.stream_map(p, same_shape, devices=devs), same_shape):
        np.testing.assert_array_equal(got, np.maximum(b, 0) * 2)
    for got, b in zip(wgc.stream_map(lambda x: wgc.relu(x), same_shape, devices=devs),
                      same_shape):
        np.testing.assert_array_equal(got, np.maximum(b, 0))


@pytest.mark.needs("several-devices")
def test_stream_map_checks_its_devices(two):
    with pytest.raises(wgc.ArgumentError, match="devices: expected a non-empty list"):
        wgc.stream_map("relu", [np.ones(4, np.float32)], devices=[])
    with pytest.raises(wgc.ArgumentError, match=r"devices\[1\]: expected a wgc.Device"):
        wgc.stream_map("relu", [np.ones(4, np.float32)], devices=[two[0], "gpu"])
    with pytest.raises(wgc.ArgumentError, match="depth: expected an int from 1 to 64"):
        wgc.stream_map("relu", [np.ones(4, np.float32)], depth=10**9)


def test_the_portable_backend_computes_the_same():
    r = _run("import numpy as np, wgcompute as wgc\n"
             "i = wgc.device_info(); print(i['native'], '|', i['native_note'])\n"
             "x = np.arange(-50000, 50000, dtype=np.float32)\n"
             "a = wgc.from_numpy(x)\n"
             "assert np.array_equal(wgc.relu(a).to_numpy(), np.maximum(x, 0))\n"
             "c = wgc.run_kernel_async('scale', [a], None, {'scalar': 2.0})\n"
             "assert np.array_equal(c.wait().to_numpy(), x * 2)\n"
             "p = wgc.pipeline(); p.add(kernel='relu', inputs=[a]); p.run()\n"
             "assert np.array_equal(p.stages[0]['output'].read_async().wait(), "
             "np.maximum(x, 0))\n"
             "res = list(wgc.stream_map('relu', [x, -x, x], depth=2))\n"
             "assert all(np.array_equal(r, np.maximum(b, 0)) for r, b in zip(res, [x, -x, x]))\n"
             "big = np.random.default_rng(0).standard_normal(9_000_000).astype(np.float32)\n"
             "assert np.array_equal(wgc.from_numpy(big).to_numpy(), big)\n"
             "print('ok')\n", WGCOMPUTE_NATIVE="portable")
    assert r.returncode == 0, r.stderr
    first, last = r.stdout.splitlines()[0], r.stdout.splitlines()[-1]
    assert first.startswith("portable | WGCOMPUTE_NATIVE=portable")
    assert last == "ok"


@pytest.mark.needs("several-devices")
def test_gl_and_vulkan_devices_compute_side_by_side(rng):
    backends = {a.backend for a in wgc.devices()}
    if "OpenGL" not in backends or "Vulkan" not in backends:
        pytest.skip(f"needs both an OpenGL and a Vulkan adapter; this machine has "
                    f"{sorted(backends)}")
    try:
        gl = wgc.device(backend="gl")
    except wgc.DeviceError as e:  # NVIDIA's GL adapter lacks compute shaders: wgpu refuses
        pytest.skip(f"this machine's OpenGL adapter cannot compute: {str(e)[:200]}")
    vk = wgc.device(backend="vulkan", new=True)
    try:
        assert gl.backend == "OpenGL" and vk.backend == "Vulkan"
        a = rng.standard_normal((40, 30)).astype(np.float32)
        b = rng.standard_normal((30, 20)).astype(np.float32)
        for d in (gl, vk):
            x, y = wgc.from_numpy(a, device=d), wgc.from_numpy(b, device=d)
            np.testing.assert_allclose(wgc.matmul(x, y).to_numpy(), a @ b, rtol=1e-5,
                                       atol=1e-5)
            np.testing.assert_array_equal(wgc.relu(x).to_numpy(), np.maximum(a, 0))
    finally:
        gl.close()
        vk.close()


@pytest.mark.slow
def test_asking_for_adapters_while_a_gl_device_works_never_aborts():
    """wgpu's GL backend aborts the process (EGL BadAccess) when adapters are enumerated or
    requested while one of its devices works in another thread: wgcompute asks wgpu once.
    Here wgc.devices(), wgc.device() and wgc.device(backend="vulkan") run over and over while
    another thread computes on a GL device."""
    if "OpenGL" not in {a.backend for a in wgc.devices()}:
        pytest.skip("this machine has no OpenGL adapter")
    r = _run("import threading, numpy as np, wgcompute as wgc\n"
             "try:\n    gl = wgc.device(backend='gl')\n"
             "except wgc.DeviceError as e:\n    print('no GL device:', e); raise SystemExit\n"
             "x = wgc.from_numpy(np.arange(-32768, 32768, dtype=np.float32), device=gl)\n"
             "stop, runs = threading.Event(), []\n"
             "def work():\n"
             "    while not stop.is_set():\n"
             "        runs.append(wgc.run_kernel_async('relu', [x], None).wait().to_numpy())\n"
             "t = threading.Thread(target=work); t.start()\n"
             "refused = 0\n"
             "for _ in range(40):\n"
             "    assert any(a.backend == 'OpenGL' for a in wgc.devices())\n"
             "    try:\n        wgc.device(backend='gl', new=True)\n"
             "    except wgc.DeviceError:\n        refused += 1\n"
             "    if any(a.backend == 'Vulkan' for a in wgc.devices()):\n"
             "        vk = wgc.device(backend='vulkan', new=True)\n"
             "        assert wgc.relu(wgc.buffer([-1.0, 1.0], device=vk)).tolist() == [0, 1]\n"
             "        vk.close()\n"
             "stop.set(); t.join()\n"
             "want = np.maximum(np.arange(-32768, 32768), 0)\n"
             "print('ok', refused, len(runs) > 0 and all(np.array_equal(r, want) for r in runs))\n")
    assert r.returncode == 0, r.stderr[-3000:]
    if r.stdout.startswith("no GL device:"):
        pytest.skip(f"this machine's OpenGL adapter cannot compute: {r.stdout[:200]}")
    assert r.stdout.strip() == "ok 40 True"


@pytest.mark.slow
def test_exit_with_unclosed_streams_never_crashes():
    code = ("import numpy as np, wgcompute as wgc\n"
            "ss = [wgc.create_stream() for _ in range(4)]\n"
            "bs = [s.upload(np.arange(65536, dtype=np.float32)) for s in ss]\n"
            "for s in ss: s.sync()\n")
    env = dict(os.environ, XDG_RUNTIME_DIR="/tmp")
    for _ in range(4):  # three interpreters side by side, as the crash needed
        procs = [subprocess.Popen([sys.executable, "-c", code], env=env,
                                  stderr=subprocess.PIPE) for _ in range(3)]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()[-2000:]


def _nvidia_with_clock_tools() -> str | None:
    """None when this machine can hold an NVIDIA GPU's clocks, else why not."""
    d = wgc.current_device()
    try:
        d.clocks()
    except wgc.DeviceError as e:
        return str(e)
    import importlib.util

    if importlib.util.find_spec("cuda") is None:
        return "cuda-python is not installed"
    return None


@pytest.mark.needs("several-devices")
def test_hold_clocks_where_it_cannot_be_done_says_why():
    if _nvidia_with_clock_tools() is None:
        pytest.skip("this machine can hold its GPU's clocks (tested below)")
    with pytest.raises(wgc.DeviceError, match="hold_clocks: cannot hold"):
        wgc.device(hold_clocks=True, new=True)
    with pytest.raises(wgc.ArgumentError, match="hold_clocks: expected True, False or None"):
        wgc.device(hold_clocks="yes")
    with pytest.raises(wgc.DeviceError, match="clocks: "):
        wgc.current_device().clocks()
    # through the environment it is a wish for every device: CPU adapters open without it
    r = _run("import wgcompute as wgc; d = wgc.device(); print(d.clocks_held, "
             "wgc.relu(wgc.buffer([-1.0, 1.0], device=d)).tolist())", WGCOMPUTE_HOLD_CLOCKS="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False [0.0, 1.0]"


def test_clocks_are_held_by_default_only_where_the_means_exist(monkeypatch):
    """The default holds an NVIDIA GPU's clocks on a thread of its own; where the nvidia
    extra or the GPU is missing it does nothing and the idle-clock watch stays on; a CPU
    adapter starts no thread at all; WGCOMPUTE_HOLD_CLOCKS=0 turns the default off."""
    from wgcompute import clocks

    if _nvidia_with_clock_tools() is None:
        pytest.skip("this machine can hold its GPU's clocks (tested below)")
    monkeypatch.delenv("WGCOMPUTE_HOLD_CLOCKS", raising=False)
    nvidia = {"vendor_id": clocks.NVIDIA, "device": "NVIDIA H200"}
    keeper = clocks.Keeper(nvidia, "NVIDIA H200", None)
    assert keeper._thread is not None  # the context is made off the caller's path
    keeper._thread.join(30)
    assert not keeper.held and keeper.watch  # cannot hold here: the warning names the remedy
    keeper.release()
    # the hold starts HOLD_DELAY_S after the device opens (off a first submit's path); a
    # device closed before then never starts it, and its close does not wait for the delay
    early = clocks.Keeper(nvidia, "NVIDIA H200", None)
    import time

    start = time.perf_counter()
    early.release()
    assert time.perf_counter() - start < clocks.HOLD_DELAY_S / 2
    assert not early._thread.is_alive() and not early.held
    cpu = clocks.Keeper({"vendor_id": 0x10005, "device": "llvmpipe"}, "llvmpipe", None)
    assert cpu._thread is None and not cpu.held and not cpu.watch
    monkeypatch.setenv("WGCOMPUTE_HOLD_CLOCKS", "0")
    off = clocks.Keeper(nvidia, "NVIDIA H200", None)
    assert off._thread is None and not off.held and off.watch
    d = wgc.current_device()
    assert d.clocks_held is False


def test_held_clocks_stay_up_through_idle_pauses():
    why = _nvidia_with_clock_tools()
    if why is not None:
        pytest.skip(f"needs an NVIDIA GPU, nvidia-ml-py and cuda-python: {why}")
    import time

    d = wgc.device(hold_clocks=True, new=True)
    try:
        assert d.clocks_held and d.info()["clocks_held"]
        x = wgc.from_numpy(np.ones(1 << 20, np.float32), device=d)
        wgc.relu(x)
        time.sleep(3.0)  # a pause that idles an unheld GPU's SM clock (345 of 1980 MHz, H100)
        wgc.relu(x)
        readings = d.clocks()
        assert readings and all(r.sm_fraction > 0.9 for r in readings), readings
        assert all("idle" not in r.reasons for r in readings), readings
    finally:
        d.close()
