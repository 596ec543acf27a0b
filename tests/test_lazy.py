"""Lazy execution: operators queue their dispatches on their device's open batch and return;
reads, host writes, other submits, synchronize() and device close run what is queued, in
program order. Checked against numpy on the adapter the suite runs on."""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute import _lazy
from wgcompute.commands import bound
from wgcompute.kernels import registry


def _queued(dev) -> int:
    return len(dev.lazy.ops) if dev.lazy is not None else 0


@pytest.fixture
def unfused(monkeypatch):
    """The batch alone: no hook holds ops back (automatic fusion would hold elementwise ones,
    which these tests count or put raw ops beside)."""
    monkeypatch.setitem(_lazy.hooks, "enqueue", None)
    monkeypatch.setitem(_lazy.hooks, "flush", None)


@pytest.fixture
def other():
    """A device of its own (adopted from wgpu) on the default device's adapter."""
    from conftest import lacks

    why = lacks("several-devices")
    if why is not None:
        pytest.skip(why)
    d = wgc.Device.from_wgpu(wgc.current_device().adapter.request_device_sync())
    yield d
    d.close()


def test_an_operator_returns_before_its_work_runs(rng, unfused):
    a = wgc.from_numpy(rng.standard_normal((384, 384)).astype(np.float32))
    dev = a.device
    ((a @ a) * 0.05).to_numpy()  # compiled and bound once
    dev.synchronize()
    submitted = dev.submitter.submissions
    x = a
    for _ in range(12):
        x = (x @ a) * 0.05
    # nothing submitted yet: the batch holds every dispatch (a GPU as fast as an H200 runs
    # them in less time than a CPU queues them, so the test counts instead of timing)
    assert _queued(dev) == 24 and dev.submitter.submissions == submitted
    got = x.to_numpy()
    assert _queued(dev) == 0 and dev.submitter.submissions > submitted
    want = a.to_numpy().astype(np.float64)
    ref = want
    for _ in range(12):
        ref = (ref @ want) * 0.05
    np.testing.assert_allclose(got, ref, rtol=2e-3, atol=1e-3)


def test_queued_results_equal_numpy(rng):
    an = rng.standard_normal((33, 17)).astype(np.float32)
    bn = rng.standard_normal((17, 33)).astype(np.float32)
    a, b = wgc.from_numpy(an), wgc.from_numpy(bn)
    c = (a @ b).T + 1.5
    d = (c * c - c.T / 2.0)[3:20:2, ::3]
    e = (d > 0.25).astype("f32") + d.sum(axis=0, keepdims=True)
    f = -e
    f += e * 3.0
    cn = (an @ bn).T + np.float32(1.5)
    dn = (cn * cn - cn.T / np.float32(2.0))[3:20:2, ::3]
    en = (dn > 0.25).astype(np.float32) + dn.sum(axis=0, keepdims=True)
    fn = -en + en * np.float32(3.0)
    assert _queued(a.device) > 0
    np.testing.assert_allclose(f.to_numpy(), fn, rtol=1e-5, atol=1e-4)
    assert float(f.max()) == pytest.approx(float(fn.max()), rel=1e-5)


def test_item_assignment_and_cumulative_sums_are_queued(rng, unfused):
    from wgcompute import array_api as xp

    xn = rng.standard_normal(5000).astype(np.float32)
    x = wgc.from_numpy(xn)
    dev = x.device
    x[10:20] = 7.0
    xp.cumulative_sum(x).to_numpy()  # compiled (and tuned, on a GPU that tunes) first
    x.write(xn)
    dev.synchronize()
    x[10:20] = 7.0  # a region copy into x's memory
    y = xp.cumulative_sum(x)  # the scan's kernels
    labels = [op.label for op in dev.lazy.ops]
    assert labels[0] == "region_copy" and len(labels) >= 2, labels  # nothing submitted yet
    want = xn.astype(np.float64)
    want[10:20] = 7.0
    np.testing.assert_allclose(y.to_numpy(), np.cumsum(want), rtol=1e-5, atol=1e-3)
    assert _queued(dev) == 0


def test_assigning_a_held_transpose_into_a_held_value_lands_after_it(rng):
    """y = clip(a @ b) is held (automatic fusion), t = c.T is held (a copy nobody has needed
    yet); y[...] = t must land after y's own write, and twice in a row the last one wins."""
    from wgcompute import array_api as xp

    an, bn, cn, dn = (rng.integers(-3, 4, (4, 4)).astype(np.float32) for _ in range(4))
    a, b, c, d = map(wgc.from_numpy, (an, bn, cn, dn))
    t = c.T
    y = xp.clip(a @ b, -16.0, 16.0)
    y[...] = t
    np.testing.assert_array_equal(xp.stack([t, y]).to_numpy(), np.stack([cn.T, cn.T]))
    z = a + 1.0
    z[...] = c.T
    z[...] = d.T  # both held: the last one wins
    np.testing.assert_array_equal(z.to_numpy(), dn.T)


def test_image_and_nn_functions_are_queued(rng, unfused):
    from wgcompute.ml import functional as F

    img = wgc.from_numpy(rng.random((16, 20, 3), dtype=np.float32))
    x = wgc.from_numpy(rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    w = wgc.from_numpy(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    dev = img.device
    dev.synchronize()
    gray = wgc.image.apply("grayscale", img)
    assert [op.label for op in dev.lazy.ops] == ["grayscale"]  # queued, not run
    y = F.conv2d(x, w, padding=1)
    assert [op.label for op in dev.lazy.ops][-1] == "conv2d"
    want = img.to_numpy() @ np.array([0.299, 0.587, 0.114], np.float32)
    np.testing.assert_allclose(gray.to_numpy().reshape(16, 20), want, rtol=1e-4, atol=1e-4)
    xn, wn = x.to_numpy().astype(np.float64), w.to_numpy().astype(np.float64)
    pad = np.pad(xn, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((1, 4, 8, 8))
    for i in range(8):
        for j in range(8):
            ref[0, :, i, j] = np.tensordot(wn, pad[0, :, i:i + 3, j:j + 3], axes=3)
    np.testing.assert_allclose(y.to_numpy(), ref, rtol=1e-4, atol=1e-4)


def test_the_batch_is_submitted_at_its_size_bound(unfused):
    x = wgc.from_numpy(np.zeros(1000, np.float32))
    dev = x.device
    dev.synchronize()
    for _ in range(_lazy.MAX_OPS + 3):
        x = x + 1.0
    assert _queued(dev) == 3  # the first MAX_OPS went to the GPU by themselves
    np.testing.assert_array_equal(x.to_numpy(), np.full(1000, _lazy.MAX_OPS + 3.0))


def test_a_synchronize_or_a_read_of_queued_work_wakes_no_poll_thread(unfused):
    """The caller polls for what it waits on: the poll thread is not woken for it (its
    wake-ups took the GIL from the caller: a queued tiny op and its synchronize cost ~15-30
    us more than the eager op on an H200 host)."""
    x = wgc.from_numpy(np.arange(256, dtype=np.float32))
    dev = x.device
    dev.synchronize()
    deadline = time.monotonic() + 10  # the poll thread lets go once earlier fences are done
    while dev.submitter._token is not None and time.monotonic() < deadline:
        time.sleep(0.005)  # (past its linger)
        dev.submitter.release_idle_token()
    assert dev.submitter._token is None, "the poll thread kept polling with nothing pending"
    for _ in range(3):
        y = x + 1.0
        dev.synchronize()
        assert dev.submitter._token is None
        np.testing.assert_array_equal((y * 2.0).to_numpy(), (np.arange(256) + 1.0) * 2.0)
        assert dev.submitter._token is None
    assert dev.submitter.pending_count() == 0


def test_synchronize_submits_nothing_of_its_own_and_times_out_on_long_work(rng):
    """synchronize waits for the work-done callback of what was submitted (no empty command
    buffer, no fence of its own), and still times out while that work runs."""
    a = wgc.from_numpy(rng.standard_normal((512, 512)).astype(np.float32))
    dev = a.device
    (a @ a).to_numpy()
    before = dev.submitter.submissions
    dev.synchronize()
    assert dev.submitter.submissions == before  # nothing queued: nothing submitted
    if dev.info()["backend"] == "OpenGL" or dev.link.mode != "fast":
        pytest.skip("wgpu's GL backend runs the work inside its submit, and the portable "
                    "calls' fence copy waits for it: nothing is still running when the wait "
                    "starts, so no timeout can be seen")
    x = a
    for _ in range(40):
        x = (x @ a) * 0.04
    with pytest.raises(wgc.TimeoutError):
        dev.synchronize(timeout=0.0)
    dev.synchronize()
    assert dev.submitter.submissions > before
    want = a.to_numpy().astype(np.float64)
    an = want.copy()
    for _ in range(40):
        want = (want @ an) * 0.04
    np.testing.assert_allclose(x.to_numpy(), want, rtol=2e-3, atol=1e-3)


def test_a_batch_submitted_at_its_bound_is_reaped_by_the_next_flush(unfused):
    """The batch's own fence wakes no poll thread either: the next flush's poll completes it
    (its buffers let go); a wait that gives up wakes the poll thread for what is pending."""
    from wgcompute import _queue

    x = wgc.from_numpy(np.zeros(1000, np.float32))
    dev = x.device
    if dev.link.mode != "fast":
        pytest.skip("the portable calls complete fences on a thread of their own")
    (x + 1.0).to_numpy()  # compiled and bound first (a first use may submit work of its own)
    dev.synchronize()
    n = 0
    while True:  # until a batch goes at its bound (a first use may have submitted one op)
        x = x + 1.0
        n += 1
        if _queued(dev) == 0:
            break
        assert n < 2 * _lazy.MAX_OPS
    assert dev.submitter.pending_count() <= 1
    # (a GPU as fast as an H200 may finish the batch within its submit: nothing pending)
    first = dev.submitter._pending[0] if dev.submitter._pending else _queue.Fence.completed()
    added = 0
    deadline = time.monotonic() + 30
    while not first.done() and time.monotonic() < deadline:
        time.sleep(0.01)
        x = x + 1.0  # the next flush polls first
        added += 1
        dev.flush()
    assert first.done()
    # a wait that times out leaves the poll thread polling for what it gave up on
    y = x
    for _ in range(_lazy.MAX_OPS):
        y = y * 1.0
    fence = dev.submitter._pending[-1] if dev.submitter._pending else _queue.Fence.completed()
    _queue.wait(fence, timeout=0.0) if not fence.done() else None
    deadline = time.monotonic() + 30
    while not fence.done() and time.monotonic() < deadline:
        time.sleep(0.01)  # nothing in this thread polls
    assert fence.done()
    np.testing.assert_array_equal(y.to_numpy(), np.full(1000, n + added))


def test_memory_stats_count_what_a_batch_submitted_at_its_bound_gave_back(unfused):
    """Results freed while their batch ran go back to the pool once it is done; the batch's
    fence wakes no poll thread, so memory_stats() polls once itself."""
    x = wgc.from_numpy(np.zeros(1 << 14, np.float32))
    dev = x.device
    if dev.link.mode != "fast":
        pytest.skip("the portable calls complete fences on a thread of their own")
    dev.synchronize()
    dev.release_memory_pool()
    ys = [x + 1.0 for _ in range(_lazy.MAX_OPS)]  # the batch goes at its bound
    assert _queued(dev) == 0
    del ys  # freed while queued: their memory waits for the batch
    time.sleep(0.5)  # the GPU is done; nothing in this thread polled
    stats = dev.memory_stats()
    assert stats["pooled_buffers"] >= _lazy.MAX_OPS, stats
    assert dev.release_memory_pool() >= _lazy.MAX_OPS * x.nbytes


def _bad_op(a: wgc.Buffer, out: wgc.Buffer, site: str):
    """A dispatch WebGPU refuses: elementwise_add's pipeline with scale's bind group (their
    layouts differ), as the library's own queue records it."""
    add = bound(registry.get("elementwise_add"), [a, a], out, None)
    scale = bound(registry.get("scale"), [a], out, {"scalar": 2.0})
    pipeline = add.raw_calls()[0][0]
    calls = [(pipeline, *call[1:]) for call in scale.raw_calls()]
    return _lazy.Op("mismatched_add", calls, [add, scale], [a, out], site)


def test_a_validation_error_of_queued_work_raises_at_the_read_naming_op_and_call_site(unfused):
    a = wgc.from_numpy(np.arange(8, dtype=np.float32))
    dev = a.device
    dev.synchronize()
    before = a + 1.0
    junk = wgc.empty((8,), "f32")
    site = _lazy.call_site()  # as enqueue() takes it: the first frame outside wgcompute
    _lazy.batch_of(dev).enqueue(_bad_op(a, junk, site))
    after = a * 3.0
    with pytest.raises(wgc.CommandFailedError) as info:
        after.to_numpy()
    msg = str(info.value)
    assert f"mismatched_add (queued at {site})" in msg, msg
    assert site.startswith(__file__ + ":")
    assert "the 1 operation(s) queued after it did not run" in msg
    assert info.value.cause is not None
    # the work queued before the failing op ran; the device goes on working
    np.testing.assert_array_equal(before.to_numpy(), np.arange(8) + 1.0)
    np.testing.assert_array_equal((a * 3.0).to_numpy(), np.arange(8) * 3.0)
    assert all(not b._holds for b in (a, junk, before, after))


def test_a_validation_error_raises_at_synchronize(unfused):
    a = wgc.from_numpy(np.arange(8, dtype=np.float32))
    dev = a.device
    _lazy.batch_of(dev).enqueue(_bad_op(a, wgc.empty((8,), "f32"), _lazy.call_site()))
    with pytest.raises(wgc.CommandFailedError, match="mismatched_add.*test_lazy.py"):
        dev.synchronize()
    dev.synchronize()  # raised once


def test_a_buffer_freed_while_queued_stays_valid_for_the_queued_work():
    a = wgc.from_numpy(np.arange(5000, dtype=np.float32))
    b = a * 2.0
    c = b + a
    a.free()
    b.free()
    assert a.freed and b.freed
    with pytest.raises(wgc.BufferFreedError):
        a + 1.0  # freed is freed for new work at once
    np.testing.assert_array_equal(c.to_numpy(), np.arange(5000) * 3.0)
    assert a._gpu is None and b._gpu is None  # the memory went once the work was done


def test_a_host_write_after_queued_work_lands_after_it():
    x = wgc.from_numpy(np.arange(100, dtype=np.float32))
    y = x + 1.0  # reads x's old contents
    x.write(np.zeros(100, np.float32))
    z = x + 1.0  # reads the new ones
    np.testing.assert_array_equal(y.to_numpy(), np.arange(100) + 1.0)
    np.testing.assert_array_equal(z.to_numpy(), np.ones(100))


def test_a_synchronous_run_after_queued_work_sees_its_results():
    x = wgc.from_numpy(np.arange(64, dtype=np.float32))
    y = x + 1.0
    out = wgc.empty((64,), "f32")
    wgc.run_kernel("scale", [y], out, {"scalar": 2.0})  # the queue's order is the program's
    np.testing.assert_array_equal(out.to_numpy(), (np.arange(64) + 1.0) * 2)
    p = wgc.Pipeline("after-queued")
    z = x * 4.0
    p.add(kernel="scale", inputs=[z], output=out, params={"scalar": 0.5})
    p.run()
    np.testing.assert_array_equal(out.to_numpy(), np.arange(64) * 2.0)
    p.free()


def test_threads_enqueue_on_one_device_at_once():
    errors = []

    def work(seed: int):
        try:
            base = np.full(4096, seed, np.float32)
            x = wgc.from_numpy(base)
            for _ in range(150):
                x = x + 1.0
            np.testing.assert_array_equal(x.to_numpy(), base + 150)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_closing_a_device_runs_its_queued_work_and_lets_go_of_its_buffers(other, unfused):
    x = wgc.from_numpy(np.arange(10, dtype=np.float32), device=other)
    y = x + 1.0
    assert _queued(other) == 1
    other.close()
    assert _queued(other) == 0 and not x._holds and not y._holds
    with pytest.raises(wgc.DeviceError):
        y.to_numpy()


def test_a_buffer_of_another_device_flushes_its_own_device(other):
    x = wgc.from_numpy(np.arange(10, dtype=np.float32))
    y = x * 2.0
    moved = y.to(other)  # reads y: its device's batch runs first
    np.testing.assert_array_equal((moved + 1.0).to_numpy(), np.arange(10) * 2.0 + 1.0)


def test_eager_mode_waits_at_every_operator():
    x = wgc.from_numpy(np.arange(10, dtype=np.float32))
    _lazy.set_eager(True)
    try:
        y = x * 2.0 + 1.0
        assert _queued(x.device) == 0
    finally:
        _lazy.set_eager(False)
    np.testing.assert_array_equal(y.to_numpy(), np.arange(10) * 2.0 + 1.0)
    with pytest.raises(wgc.ArgumentError, match="on: expected True or False"):
        wgc.set_eager(1)


def test_wgcompute_eager_in_the_environment_makes_operators_wait():
    code = ("import numpy as np, wgcompute as wgc\n"
            "x = wgc.from_numpy(np.arange(4, dtype=np.float32))\n"
            "y = x + 1.0\n"
            "b = x.device.lazy\n"
            "assert b is None or not b.ops, 'queued'\n"
            "print(y.tolist())\n")
    env = dict(os.environ, WGCOMPUTE_EAGER="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[1.0, 2.0, 3.0, 4.0]"


def test_a_with_stream_block_runs_its_operators_on_the_stream(unfused):
    x = wgc.from_numpy(np.arange(50, dtype=np.float32))
    dev = x.device
    before = x * 10.0  # queued on the device before the block: it runs first
    s = wgc.create_stream("lazy-block")
    try:
        with s:
            y = x + 1.0
            z = y * 2.0 + before
            block = _lazy._route.get()
            assert block.stream is s and len(block.ops) == 3 and _queued(dev) == 0
            np.testing.assert_array_equal(y.to_numpy(), np.arange(50) + 1.0)  # a read inside
            # the read had the stream submit the block's ops, as one command of the stream
            labels = [c.label for c in s._lane.outstanding]
            assert any(f"queued from {__file__}" in label for label in labels), labels
            w = z - 1.0
        assert _lazy._route.get() is None and s.query()
        np.testing.assert_array_equal(w.to_numpy(), (np.arange(50) + 1.0) * 2 +
                                      np.arange(50) * 10.0 - 1.0)
    finally:
        s.close()


def test_a_validation_error_in_a_stream_block_raises_when_it_ends(unfused):
    a = wgc.from_numpy(np.arange(8, dtype=np.float32))
    s = wgc.create_stream("lazy-block-error")
    try:
        with pytest.raises(wgc.CommandFailedError, match="mismatched_add.*test_lazy.py"):
            with s:
                _lazy._route.get().enqueue(_bad_op(a, wgc.empty((8,), "f32"),
                                                   _lazy.call_site()))
        np.testing.assert_array_equal((a + 1.0).to_numpy(), np.arange(8) + 1.0)
    finally:
        s.close()


def test_a_lost_device_drops_its_queued_work_and_reads_raise(other, unfused):
    x = wgc.from_numpy(np.arange(10, dtype=np.float32), device=other)
    y = x + 1.0
    z = y * 2.0
    assert _queued(other) == 2
    other.gpu_device.destroy()  # a driver reset, as far as wgcompute can tell
    with pytest.raises(wgc.DeviceLostError, match="was lost"):
        z.to_numpy()
    assert _queued(other) == 0 and not x._holds and not y._holds
    with pytest.raises(wgc.DeviceLostError):
        x + 1.0


def test_a_lost_device_found_at_the_size_bound_raises_at_the_next_use(other, unfused):
    x = wgc.from_numpy(np.arange(10, dtype=np.float32), device=other)
    y = x + 1.0
    other.gpu_device.destroy()
    batch = other.lazy
    batch.flush()  # as the size bound does: nothing native is called, the loss is kept
    assert not batch.ops and not y._holds
    with pytest.raises(wgc.DeviceLostError):
        other.synchronize()


def test_reads_in_one_thread_see_its_queued_work_while_others_submit():
    """Six threads: synchronous runs, streams, queued operators and their reads. A submit in
    another thread while this thread's queued op is being submitted by a third must still come
    after it in the queue (a read once came first and saw the old contents)."""
    wrong, errors = [], []
    x = np.arange(4096, dtype=np.float32) - 20

    def hammer(kind: int):
        try:
            for _ in range(150):
                a = wgc.from_numpy(x)
                if kind == 0:  # a synchronous run and reads: each submits what is queued
                    out = wgc.relu(a)
                    out.to_numpy()
                    a.read_async().wait()
                    out.free()
                elif kind == 1:  # a stream's thread submits
                    s = wgc.create_stream()
                    u = s.upload(x)
                    s.run_kernel("relu", [u])
                    s.download(u)
                    s.sync()
                    s.close()
                else:  # a queued operator (not elementwise: never fused) and its read
                    b = wgc.empty(4096)
                    b.write(x)
                    got = b.reshape(64, 64).T.to_numpy()
                    if not np.array_equal(got, x.reshape(64, 64).T):
                        wrong.append(got[:3])
                    b.free()
                a.free()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=hammer, args=(k % 3,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert not wrong, wrong[:3]


def test_the_lazy_benchmark_runs_small_and_checks_its_results(capsys):
    from benchmarks import bench_lazy

    assert bench_lazy.main(["--small", "--repeat", "1", "--ops", "6", "--n", "16"]) == 0
    out = capsys.readouterr().out
    for row in ("operators (queued)", "operators (eager)", "wgc.pipeline",
                "operator + synchronize", "operator (eager) + read"):
        assert row in out, out
