"""Edge cases of the runtime layer: a malformed tuning cache, closing a device under other
threads, buffers freed while a stream or a pipeline still holds work on them, a Buffer given
where a list of buffers is expected, custom kernels given inputs of disagreeing shapes, and
gemm given a c that does not broadcast to its output.

References are numpy; every test opens what it needs and closes it."""

import contextlib
import json
import logging
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute import autotune

# -- a malformed autotune.json ----------------------------------------------------------------

MALFORMED = {
    "adapter entry a string": lambda key: {key: "a string"},
    "adapter entry a list": lambda key: {key: ["a", "b"]},
    "adapter entry null": lambda key: {key: None},
    "adapter entry a number": lambda key: {key: 3},
    "choice a number": lambda key: {key: {"matmul f32 small r2": 7, "other": "x"}},
    "choice a dict": lambda key: {key: {"anything": {"deeper": [1]}}},
    "choice null": lambda key: {key: {"anything": None}},
    "top level a list": lambda key: [key, "x"],
    "top level a string": lambda key: "autotune",
}


def _conv_ref(x, w):
    """A plain numpy 'valid' convolution (N, C, H, W) * (K, C, kh, kw), stride 1."""
    n, c, h, wd = x.shape
    k, _, kh, kw = w.shape
    out = np.zeros((n, k, h - kh + 1, wd - kw + 1), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + h - kh + 1, j:j + wd - kw + 1]
            out += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j])
    return out


@pytest.mark.needs("several-devices")
@pytest.mark.parametrize("shape", list(MALFORMED))
@pytest.mark.parametrize("tune", ["0", "1"])
def test_malformed_autotune_cache_never_breaks_matmul_or_conv(tmp_path, monkeypatch, caplog,
                                                               shape, tune):
    """Whatever autotune.json holds, matmul and a convolution compute right (on a fresh device,
    so the file is read), the malformed entries are dropped from the file with one warning,
    and well-formed entries of other adapters are kept."""
    monkeypatch.setenv("WGCOMPUTE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WGCOMPUTE_AUTOTUNE", tune)
    path = tmp_path / "autotune.json"
    rng = np.random.default_rng(5)
    with contextlib.closing(wgc.device(new=True)) as d:  # a device of its own, closed after
        key = autotune.adapter_key(d)
        data = MALFORMED[shape](key)
        if isinstance(data, dict):
            data["another adapter | x | wgcompute 0"] = {"matmul f32 small r2": "32x32x16_4x4"}
        path.write_text(json.dumps(data))
        a, b = rng.standard_normal((33, 20)), rng.standard_normal((20, 17))
        x, w = rng.standard_normal((2, 3, 7, 6)), rng.standard_normal((4, 3, 3, 3))
        bias = rng.standard_normal(4)
        with caplog.at_level(logging.WARNING, logger="wgcompute"), wgc.use_device(d):
            got = wgc.matmul(wgc.from_numpy(a.astype(np.float32)),
                             wgc.from_numpy(b.astype(np.float32))).to_numpy()
            np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)
            conv = wgc.run_kernel("conv2d", [wgc.from_numpy(v.astype(np.float32))
                                             for v in (x, w, bias)]).to_numpy()
            np.testing.assert_allclose(conv, _conv_ref(x, w) + bias[:, None, None],
                                       rtol=1e-4, atol=1e-4)
            # again: the warning is said once per malformed file, not per lookup
            wgc.matmul(wgc.from_numpy(a.astype(np.float32)),
                       wgc.from_numpy(b.astype(np.float32))).to_numpy()
        warned = [r for r in caplog.records if "autotune cache" in r.getMessage()]
        assert len(warned) == 1, [r.getMessage() for r in caplog.records]
        assert "malformed" in warned[0].getMessage()
        stored = json.loads(path.read_text())  # rewritten, well formed
        assert isinstance(stored, dict)
        for adapter, choices in stored.items():
            assert isinstance(adapter, str) and isinstance(choices, dict)
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in choices.items())
        if isinstance(data, dict):
            assert stored["another adapter | x | wgcompute 0"] == {
                "matmul f32 small r2": "32x32x16_4x4"}
            if shape == "choice a number":
                assert stored[key].get("other") == "x"
    if tune == "1":  # tuning went on and remembered its choices for both
        assert any(p.startswith("matmul") for p in stored[key]), stored[key]
        assert any(not p.startswith("matmul") for p in stored[key]), stored[key]


# -- closing a device while other threads use it ----------------------------------------------

def _hammer(d, outcome, stop):
    """Allocate, run a kernel, read back and free on ``d`` until it closes under us."""
    x = np.arange(64, dtype=np.float32) - 20
    try:
        while not stop.is_set():
            a = wgc.from_numpy(x, device=d)
            b = wgc.run_kernel("relu", [a])
            got = b.to_numpy()
            np.testing.assert_array_equal(got, np.maximum(x, 0))
            c = wgc.run_kernel_async("add", [a, b])
            s = c.wait()
            a.free()
            b.free()
            s.free()
        outcome.append(None)
    except BaseException as e:  # noqa: BLE001 - what the test is looking for
        outcome.append(e)


def _device_error(e) -> bool:
    """A DeviceError, or an async command's failure (CommandFailedError) caused by one."""
    return isinstance(e, wgc.DeviceError) or (isinstance(e, wgc.CommandFailedError)
                                              and isinstance(e.cause, wgc.DeviceError))


@pytest.mark.needs("several-devices")
def test_close_under_other_threads_gives_each_a_device_error():
    """Device.close() while four threads compute on the device, ten times over: each thread
    ends either unharmed (it finished before the close) or with a DeviceError (a command's
    wait: a CommandFailedError whose cause is one), never another Python error, a crash or a
    hang."""
    seen = []
    for run in range(10):
        d = wgc.device(new=True)
        outcome, stop = [], threading.Event()
        threads = [threading.Thread(target=_hammer, args=(d, outcome, stop), daemon=True)
                   for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.02 * (run % 5))
        d.close()
        stop.set()  # a thread that never saw the close stops by itself
        for t in threads:
            t.join(20)
        assert not any(t.is_alive() for t in threads), f"run {run}: a thread hung after close()"
        assert len(outcome) == len(threads)
        wrong = [e for e in outcome if e is not None and not _device_error(e)]
        assert not wrong, [f"run {run}: {type(e).__name__}: {e}" for e in wrong]
        assert d.state == "closed"
        seen += outcome
    assert any(e is not None for e in seen)  # the close did come mid-run


# -- buffers freed while a stream (or submitted work) still holds them -----------------------

def _gate(n=1 << 18, stages=120):
    """A pipeline slow enough on lavapipe that a stream is still busy with it for a while."""
    x = wgc.from_numpy(np.ones(n, np.float32))
    y = wgc.empty(x.shape)
    p = wgc.pipeline()
    for i in range(stages):
        p.add(kernel="relu", inputs=[x if i % 2 == 0 else y], output=y if i % 2 == 0 else x)
    return p, x, y


class _Gate:
    """Work a stream runs (anything with submit()) that holds the stream's thread until the
    test opens it: what the stream is given after it waits, deterministically."""

    label = "gate"

    def __init__(self):
        self.open = threading.Event()

    def submit(self):
        assert self.open.wait(60)
        return wgc.submit({"op": "barrier"})


def test_a_stream_holds_what_it_was_given_until_it_is_done():
    """Freeing is always safe: buffers handed to a stream (download, write, run_kernel, a
    pipeline run), freed before the stream reached them, still serve that work."""
    s = wgc.create_stream()
    gate = _Gate()
    src = np.array([1.0, -2.0, 3.0], np.float32)
    b = wgc.from_numpy(src)
    w = wgc.buffer([0.0, 0.0, 0.0])
    k_in = wgc.from_numpy(src)
    k_out = wgc.empty(3)
    copy_to = wgc.empty(3)
    p = wgc.pipeline().add(kernel="scale", inputs=[k_out], output=copy_to,
                           params={"scalar": 2.0})
    s.run(gate)
    down = s.download(b)
    wrote = s.write(w, [9.0, 8.0, 7.0])
    after = s.download(w)
    ran = s.run_kernel("relu", [k_in], k_out)
    piped = s.run(p)
    last = s.download(copy_to)
    for buf in (b, w, k_in, k_out, copy_to):
        buf.free()
    assert not down.done()
    gate.open.set()
    s.sync(timeout=60)
    np.testing.assert_array_equal(down.wait(), src)
    assert wrote.status == "completed"
    np.testing.assert_array_equal(after.wait(), [9.0, 8.0, 7.0])
    assert ran.status == "completed" and piped.status == "completed"
    np.testing.assert_array_equal(last.wait(), np.maximum(src, 0) * 2)
    assert all(buf.freed for buf in (b, w, k_in, k_out, copy_to))
    s.close()


def test_a_stream_refuses_a_buffer_freed_before_it_was_handed_over():
    s = wgc.create_stream()
    b = wgc.buffer([1.0])
    b.free()
    with pytest.raises(wgc.BufferFreedError, match="buf"):
        s.download(b)
    p = wgc.pipeline().add(kernel="relu", inputs=[wgc.buffer([1.0])])
    p.buffers()[0].free()
    with pytest.raises(wgc.WgComputeError, match="freed"):
        s.run(p)
    s.close()


def test_submitted_work_holds_its_buffers_when_they_are_freed():
    """The same rule for commands: pipeline.submit() and wgc.submit() hold their buffers."""
    gate, gx, gy = _gate()
    first = gate.submit()
    src = np.array([4.0, -5.0], np.float32)
    a, out = wgc.from_numpy(src), wgc.empty(2)
    cmd = wgc.submit({"op": "run_kernel", "kernel": "relu", "inputs": [a], "output": out})
    c2 = wgc.empty(2)
    copy = wgc.submit({"op": "copy_buffer", "inputs": [out], "output": c2})
    read = c2.read_async()
    a.free()
    out.free()
    c2.free()
    first.wait(120)
    cmd.wait(120)
    copy.wait(120)
    np.testing.assert_array_equal(read.wait(120), np.maximum(src, 0))
    for buf in (gx, gy):
        buf.free()


# -- a Buffer where a list of buffers is expected ---------------------------------------------

def test_a_buffer_given_as_inputs_is_refused_naming_inputs():
    """run_kernel refuses a bare Buffer as ``inputs``; so does every other entry point taking a
    list of buffers, with the same message (never bool() of the buffer)."""
    buf, out = wgc.buffer([1.0]), wgc.empty(1)
    s = wgc.create_stream()
    calls = {
        "run_kernel": lambda: wgc.run_kernel("relu", buf),
        "run_kernel_async": lambda: wgc.run_kernel_async("relu", buf),
        "submit run_kernel": lambda: wgc.submit({"op": "run_kernel", "kernel": "relu",
                                                 "inputs": buf}),
        "submit copy_buffer": lambda: wgc.submit({"op": "copy_buffer", "inputs": buf,
                                                  "output": out}),
        "pipeline run_kernel": lambda: wgc.pipeline().add(kernel="relu", inputs=buf),
        "pipeline copy_buffer": lambda: wgc.pipeline().add(op="copy_buffer", inputs=buf,
                                                           output=out),
        "stream": lambda: s.run_kernel("relu", buf),
    }
    for what, call in calls.items():
        with pytest.raises(wgc.WgComputeError) as e:
            call()
        msg = str(e.value)
        assert "inputs" in msg and "Buffer" in msg and "list" in msg, (what, msg)
        assert "would read the GPU" not in msg, (what, msg)
    # the list form works everywhere
    wgc.submit({"op": "copy_buffer", "inputs": [buf], "output": out}).wait()
    assert out.tolist() == [1.0]
    s.close()


# -- custom kernels given inputs of disagreeing shapes ----------------------------------------

_HEAD = """
struct Params {{ n: u32, }}
{bindings}
@group(0) @binding({u}) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{
    let i = gid.x;
    if (i >= p.n) {{
        return;
    }}
    {body}
}}
"""


def _custom(name, reads, body, out="array<f32>", **kw):
    decl = [f"@group(0) @binding({j}) var<storage, read> {r}: array<f32>;"
            for j, r in enumerate(reads)]
    decl.append(f"@group(0) @binding({len(reads)}) var<storage, read_write> out: {out};")
    src = _HEAD.format(bindings="\n".join(decl), u=len(reads) + 1, body=body)
    return wgc.register_kernel(name, src, replace=True, **kw)


def test_an_elementwise_custom_kernel_refuses_inputs_of_other_sizes():
    """out[i] = x[i] + y[i]: each input is read where the output is written, so each needs the
    output's element count; a mismatch is a ShapeError naming the inputs and their shapes
    (it used to run and read past y's end: [11, 2, 3])."""
    _custom("edge_add", ["x", "y"], "out[i] = x[i] + y[i];")
    x, y = wgc.buffer([1.0, 2.0, 3.0]), wgc.buffer([10.0])
    with pytest.raises(wgc.ShapeError) as e:
        wgc.run_kernel("edge_add", [x, y])
    msg = str(e.value)
    assert "edge_add" in msg and "'x' (3,)" in msg and "'y' (1,)" in msg, msg
    with pytest.raises(wgc.ShapeError, match=r"'y' \(4,\)"):  # larger is as wrong
        wgc.run_kernel("edge_add", [x, wgc.buffer([1.0, 2.0, 3.0, 4.0])])
    with pytest.raises(wgc.ShapeError, match=r"output 'out' \(2,\)"):  # a given output too
        wgc.run_kernel("edge_add", [x, x], wgc.empty(2))
    with pytest.raises(wgc.PipelineError, match="stage 0.*'y'") as e:  # a pipeline's stage
        wgc.pipeline().add(kernel="edge_add", inputs=[x, y])
    assert isinstance(e.value.cause, wgc.ShapeError)
    s = wgc.create_stream()
    with pytest.raises(wgc.ShapeError, match="'y'"):
        s.run_kernel("edge_add", [x, y])
    s.close()
    # equal element counts compute (shapes may differ, as for any flat kernel)
    a = np.arange(6, dtype=np.float32)
    got = wgc.run_kernel("edge_add", [wgc.from_numpy(a.reshape(2, 3)), wgc.from_numpy(a)])
    np.testing.assert_array_equal(got.to_numpy().ravel(), 2 * a)


def test_custom_kernels_that_read_other_elements_keep_their_shapes():
    """What the shader reads decides: a table read at other indices, an input read past the
    output's index (pairs), and a kernel with its own grid= take inputs of any size; an input
    read at the output's index and elsewhere must hold at least the output's elements."""
    _custom("edge_lut", ["x", "lut"], "out[i] = lut[u32(x[i])];")
    x = np.array([2, 0, 1, 2, 2], np.float32)
    lut = np.array([10, 20, 30], np.float32)
    got = wgc.run_kernel("edge_lut", [wgc.from_numpy(x), wgc.from_numpy(lut)]).to_numpy()
    np.testing.assert_array_equal(got, lut[x.astype(int)])
    _custom("edge_pairs", ["x"], "out[i] = x[i] + x[i + p.n];")
    x = np.arange(8, dtype=np.float32)
    got = wgc.run_kernel("edge_pairs", [wgc.from_numpy(x)], wgc.empty(4)).to_numpy()
    np.testing.assert_array_equal(got, x[:4] + x[4:])
    with pytest.raises(wgc.ShapeError, match=r"'x' \(3,\).*at least"):
        wgc.run_kernel("edge_pairs", [wgc.buffer([1.0, 2.0, 3.0])], wgc.empty(4))
    _custom("edge_grid", ["x", "y"], "out[i] = x[i] + y[0];",
            grid=lambda ins, out, params: ((out.size + 63) // 64,))
    got = wgc.run_kernel("edge_grid", [wgc.buffer([1.0, 2.0]), wgc.buffer([5.0])]).tolist()
    assert got == [6.0, 7.0]


# -- closing a device while threads record and submit on it -----------------------------------

_CLOSE_RACE = r'''
import collections, json, sys, threading, time
import numpy as np
import wgcompute as wgc

def dev_err(e):
    return isinstance(e, wgc.DeviceError) or (isinstance(e, wgc.CommandFailedError)
                                              and isinstance(e.cause, wgc.DeviceError))

def hammer(d, outcome, stop, kind):
    x = np.arange(4096, dtype=np.float32) - 20
    want = np.maximum(x, 0)
    try:
        while not stop.is_set():
            a = wgc.from_numpy(x, device=d)
            if kind == 0:  # an operator, its read, an asynchronous read
                b = wgc.relu(a)
                assert np.array_equal(b.to_numpy(), want)
                a.read_async().wait()
                b.free()
            elif kind == 1:  # a pipeline run, then submitted (no read: as often as it can)
                p = wgc.pipeline(device=d)
                p.add(kernel="relu", inputs=[a])
                p.run()
                p.submit().wait()
                p.free()
            elif kind == 2:  # a stream: upload, kernel, download
                s = wgc.create_stream(device=d)
                u = s.upload(x)
                s.run_kernel("relu", [u])
                got = s.download(u)
                s.sync()
                got.wait()
                u.free()
                s.close()
            else:  # a write, then operators on two buffers
                b = wgc.empty(4096, device=d)
                b.write(x)
                assert np.array_equal(wgc.add(a, b).to_numpy(), 2 * x)
                (a + b).free()
                b.free()
            a.free()
        outcome.append(None)
    except BaseException as e:
        outcome.append(e)

counts, wrong, hung = collections.Counter(), [], 0
for run in range(int(sys.argv[1])):
    d = wgc.device(new=True)
    outcome, stop = [], threading.Event()
    threads = [threading.Thread(target=hammer, args=(d, outcome, stop, k % 4), daemon=True)
               for k in range(6)]
    for t in threads:
        t.start()
    time.sleep(0.03 * (run % 6))
    d.close()
    stop.set()
    for t in threads:
        t.join(20)
    hung += sum(t.is_alive() for t in threads)
    for e in outcome:
        if e is None or dev_err(e):
            counts[type(e).__name__] += 1
        else:
            wrong.append(f"run {run}: {type(e).__name__}: {e}")
print(json.dumps({"counts": counts, "wrong": wrong, "hung": hung}))
'''


@pytest.mark.slow
def test_close_under_recording_threads_never_aborts_the_process():
    """Device.close() while six threads record and submit on the device (operators, reads,
    pipeline runs and submits, streams, writes), thirty times, in a child process so that a
    native abort fails this test: every thread ends unharmed or with a DeviceError (or a
    command failure caused by one), none hangs, and the process exits normally. (A pipeline
    recorded while the device released its bind groups used to abort the process inside
    wgpu-native.)"""
    runs = 30  # about 5 s on lavapipe; the abort came in about one close in fifty
    r = subprocess.run([sys.executable, "-c", _CLOSE_RACE, str(runs)], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert not got["wrong"], got["wrong"][:5]
    assert got["hung"] == 0, got
    assert sum(got["counts"].values()) == runs * 6, got
    assert sum(n for k, n in got["counts"].items() if k != "NoneType") > 0, got  # mid-run


# -- gemm's c must broadcast to the output, not only with it ----------------------------------

def test_gemm_refuses_a_c_that_does_not_broadcast_to_the_output():
    """c (2, 5) against an output of (2, 1, 5) broadcasts with it (to (2, 2, 5)) but not to
    it: refused naming c and both shapes (it used to run and read c wrongly). The shapes of
    c that do broadcast to the output compute as numpy does."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((2, 1, 3)).astype(np.float32)
    b = rng.standard_normal((3, 5)).astype(np.float32)
    bufs = [wgc.from_numpy(a), wgc.from_numpy(b)]
    for bad in [(2, 5), (3, 1, 5), (2, 2, 5), (4, 2, 1, 5)]:
        with pytest.raises(wgc.ShapeError) as e:
            wgc.run_kernel("gemm", bufs + [wgc.from_numpy(np.ones(bad, np.float32))])
        msg = str(e.value)
        assert "gemm" in msg and f"c is {bad}" in msg and "(2, 1, 5)" in msg, msg
    for good in [(5,), (1, 5), (2, 1, 5), (1, 1, 1), (2, 1, 1), ()]:
        c = rng.standard_normal(good).astype(np.float32)
        got = wgc.run_kernel("gemm", bufs + [wgc.from_numpy(c)]).to_numpy()
        np.testing.assert_allclose(got, a @ b + c, rtol=1e-5, atol=1e-5, err_msg=str(good))


# -- what records a bound kernel holds it until it is recorded --------------------------------

_NO_BIND_CACHE = r'''
import numpy as np
import wgcompute as wgc
from wgcompute import commands

commands._BIND_CACHE_SIZE = 0  # the cache lets go of every bound run at once
x = [np.arange(i, i + 1000, dtype=np.float32) - 500 for i in range(6)]
got = list(wgc.stream_map("relu", x, depth=2))
assert all(np.array_equal(g, np.maximum(v, 0)) for g, v in zip(got, x))
a = wgc.from_numpy(x[0])
assert np.array_equal(wgc.run_kernel("relu", [a]).to_numpy(), np.maximum(x[0], 0))
s = wgc.create_stream()
out = s.run_kernel("relu", [a])
s.sync()
assert np.array_equal(out.wait().to_numpy(), np.maximum(x[0], 0))
s.close()
print("ok")
'''


def test_recording_holds_the_bound_kernel_when_the_bind_cache_lets_go():
    """stream_map, run_kernel and a stream record a kernel's dispatch from the native handles
    of its bind groups; each holds the bound run (which owns them) until it is recorded, so a
    bind cache that lets go of it meanwhile (here: at once, with no room at all) changes
    nothing. (stream_map used to drop it first: the process aborted in wgpu-native.)"""
    r = subprocess.run([sys.executable, "-c", _NO_BIND_CACHE], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-3000:])
