"""Streams and stream_map: order within a stream, events across streams, query() never
blocking, stream_map results equal to the sequential run and to numpy, bounded memory with an
endless generator, an error in batch k surfacing at position k."""

import gc
import importlib.util
import itertools
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute import Timeline, _pools

# A kernel that runs as long as asked: ``iters`` dependent fused multiply-adds per element.
LOOP_WGSL = """
struct P { n: u32, iters: u32, a: f32, b: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: P;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (i >= p.n) {
        return;
    }
    var v = x[i];
    for (var k = 0u; k < p.iters; k = k + 1u) {
        v = fma(v, p.a, p.b);
    }
    out[i] = v;
}
"""
LOOP = "test_streams_loop"


@pytest.fixture(scope="module", autouse=True)
def loop_kernel():
    wgc.register_kernel(LOOP, LOOP_WGSL, bindings=[("x", "read"), ("out", "read_write"),
                                                   ("p", "uniform")],
                        params={"n": "u32", "iters": "u32", "a": "f32", "b": "f32"},
                        replace=True)


def loop_ref(x: np.ndarray, iters: int, a=0.999, b=0.001) -> np.ndarray:
    v = x.astype(np.float64)
    for _ in range(iters):
        v = v * np.float32(a) + np.float32(b)
    return v


def loop_params(iters, a=0.999, b=0.001):
    return {"iters": iters, "a": a, "b": b}


# -- streams ---------------------------------------------------------------------------------

def test_work_within_a_stream_runs_in_program_order(rng):
    s = wgc.create_stream("order")
    n = 500_000
    buf = wgc.empty(n, "f32")
    values = [rng.standard_normal(n).astype(np.float32) for _ in range(4)]
    outs, copies = [], []
    for v in values:  # reuse one buffer: each step must see exactly the write before it
        s.write(buf, v)
        copies.append(s.download(buf))
        out = wgc.empty(n, "f32")
        s.run_kernel("scale", [buf], out, {"scalar": 2.0})
        outs.append(s.download(out))
    s.sync()
    assert s.query()
    for v, c, o in zip(values, copies, outs, strict=True):
        np.testing.assert_array_equal(c.wait(), v)
        np.testing.assert_array_equal(o.wait(), v * 2)


def test_stream_upload_run_download_match_numpy(rng):
    a = rng.standard_normal((64, 33)).astype(np.float32)
    with wgc.create_stream() as s:
        x = s.upload(a)
        y = wgc.empty(a.shape, "f32")
        s.run_kernel("relu", [x], y)
        got = s.download(y)
    np.testing.assert_array_equal(got.wait(), np.maximum(a, 0))


def test_event_orders_work_across_streams(rng):
    big = rng.standard_normal(4_000_000).astype(np.float32)  # its host copy takes a while
    producer, consumer = wgc.create_stream("producer"), wgc.create_stream("consumer")
    x = producer.upload(big)
    y, z = wgc.empty(big.shape, "f32"), wgc.empty(big.shape, "f32")
    producer.run_kernel(LOOP, [x], y, loop_params(16))
    ev = producer.record_event()
    consumer.wait_event(ev)
    # Without the event the consumer would be submitted long before the producer's
    # upload (a 16 MB host copy) and would read zeros.
    consumer.run_kernel("scale", [y], z, {"scalar": -1.0})
    got = consumer.download(z).wait()
    assert ev.query()
    np.testing.assert_allclose(got, -loop_ref(big, 16), rtol=1e-5, atol=1e-6)


def test_query_never_blocks_on_a_long_kernel():
    n = 1 << 16
    x = wgc.upload(np.linspace(-1, 1, n, dtype=np.float32))
    s = wgc.create_stream("long")
    # Calibrate a kernel of about half a second on this adapter.
    iters = 2000
    while True:
        t0 = time.perf_counter()
        wgc.run_kernel(LOOP, [x], None, loop_params(iters))
        dt = time.perf_counter() - t0
        if dt > 0.25 or iters >= 1 << 26:
            break
        iters *= 4
    iters = int(iters * 0.5 / max(dt, 1e-3))
    t_start = time.perf_counter()
    cmd = s.run_kernel(LOOP, [x], None, loop_params(iters))
    ev = s.record_event()
    worst, answers = 0.0, []
    for _ in range(50):
        t0 = time.perf_counter()
        answers.append((s.query(), ev.query()))
        worst = max(worst, time.perf_counter() - t0)
    still_running = time.perf_counter() - t_start < 0.2
    assert worst < 0.02, f"query() took {worst * 1e3:.1f} ms"
    if still_running:
        assert answers[-1] == (False, False)
    s.sync()
    assert s.query() and ev.query() and cmd.done()
    np.testing.assert_allclose(cmd.result().to_numpy()[:5],
                               loop_ref(x.to_numpy()[:5], iters), rtol=1e-4, atol=1e-5)


def test_stream_sync_reports_a_failed_operation():
    class Broken:
        label = "broken"

        def submit(self):
            raise RuntimeError("submit exploded")

    s = wgc.create_stream()
    cmd = s.run(Broken())
    with pytest.raises(wgc.CommandFailedError, match="submit exploded"):
        s.sync()
    assert cmd.status == "failed"
    s.sync()  # reported once


def test_stream_runs_a_pipeline_in_order(rng):
    a = rng.standard_normal(10_000).astype(np.float32)
    x = wgc.upload(a)
    p = wgc.pipeline("scale-relu")
    p.add(kernel="scale", inputs=[x], params={"scalar": -3.0})
    mid = p.stages[0]["output"]
    p.add(kernel="relu", inputs=[mid])
    out = p.stages[1]["output"]
    s = wgc.create_stream()
    s.write(x, a + 1)
    s.run(p)
    got = s.download(out)
    np.testing.assert_array_equal(got.wait(), np.maximum((a + 1) * np.float32(-3), 0))


def test_stream_argument_errors():
    s = wgc.create_stream()
    with pytest.raises(wgc.ArgumentError, match="array"):
        s.upload([1, 2, 3])
    with pytest.raises(wgc.ArgumentError, match="event"):
        s.wait_event("ev")
    with pytest.raises(wgc.ArgumentError, match="pipeline"):
        s.run(42)
    with pytest.raises(wgc.KernelNotFoundError):
        s.run_kernel("no_such_kernel", [])
    with pytest.raises(wgc.ShapeError):
        s.write(wgc.empty(3), np.zeros(4, np.float32))
    with pytest.raises(wgc.ArgumentError, match="label"):
        wgc.create_stream(3)
    s.close()
    with pytest.raises(wgc.ArgumentError, match="closed"):
        s.upload(np.zeros(2, np.float32))


# -- stream_map ---------------------------------------------------------------------------------

ITERS = 64


def test_stream_map_depths_equal_sequential_and_numpy(rng):
    batches = [rng.standard_normal(50_000).astype(np.float32) for _ in range(7)]
    batches.insert(3, rng.standard_normal((40, 41)).astype(np.float32))  # a shape change
    runs = {d: list(wgc.stream_map(LOOP, batches, depth=d, params=loop_params(ITERS)))
            for d in (1, 2, 3)}
    for d in (2, 3):
        assert len(runs[d]) == len(batches)
        for got, want in zip(runs[d], runs[1], strict=True):
            assert got.shape == want.shape
            np.testing.assert_array_equal(got, want)
    for got, b in zip(runs[1], batches, strict=True):
        plain = wgc.run_kernel(LOOP, [wgc.upload(b)], None, loop_params(ITERS)).to_numpy()
        np.testing.assert_array_equal(got, plain)  # the plain blocking calls, bit for bit
        np.testing.assert_allclose(got, loop_ref(b, ITERS), rtol=1e-5, atol=1e-6)


def test_stream_map_with_a_callable_and_other_output_dtype(rng):
    batches = [rng.integers(-100, 100, 1000 + i, dtype=np.int32) for i in range(5)]

    def work(inp, out):
        return wgc.run_kernel_async("scale", [inp], out, {"scalar": 3})

    got = list(wgc.stream_map(work, batches, depth=2))
    for g, b in zip(got, batches, strict=True):
        np.testing.assert_array_equal(g, b * 3)


def test_stream_map_with_a_pipeline(rng):
    x = wgc.empty(5000, "f32")
    p = wgc.pipeline("map")
    p.add(kernel="scale", inputs=[x], params={"scalar": 0.5})
    p.add(kernel="relu", inputs=[p.stages[0]["output"]])
    batches = [rng.standard_normal(5000).astype(np.float32) for _ in range(6)]
    got = list(wgc.stream_map(p, batches, depth=3))
    for g, b in zip(got, batches, strict=True):
        np.testing.assert_array_equal(g, np.maximum(b * np.float32(0.5), 0))


def test_stream_map_bounded_memory_with_an_endless_generator():
    depth = 3
    produced = itertools.count()
    made = [0]

    def endless():
        for i in produced:
            made[0] = i + 1
            yield np.full(20_000, i % 1000, dtype=np.float32)

    gc.collect()  # earlier tests' garbage must not leave during this one

    base = wgc.live_buffers()
    most_buffers, most_ahead = 0, 0
    results = wgc.stream_map("scale", endless(), depth=depth, params={"scalar": 2.0})
    for k, r in enumerate(results):
        assert r[0] == 2 * (k % 1000) and r[-1] == r[0]
        most_buffers = max(most_buffers, wgc.live_buffers() - base)
        most_ahead = max(most_ahead, made[0] - (k + 1))
        if k == 40:
            break
    results.close()
    assert most_buffers <= 2 * depth  # one input and one output per slot, reused
    assert most_ahead <= 2 * depth + 1  # in flight + loaded ahead
    assert wgc.live_buffers() == base


def test_stream_map_reuses_slot_buffers_and_bindings(rng):
    depth = 3
    batches = [rng.standard_normal(4096).astype(np.float32) for _ in range(24)]
    gc.collect()  # earlier tests' garbage must not leave during this one
    before_stats, before_live = wgc.kernels_stats(), wgc.live_buffers()
    created = []
    it = wgc.stream_map("scale", batches, depth=depth, params={"scalar": 0.5})
    for b, got in zip(batches, it, strict=True):
        np.testing.assert_array_equal(got, b * np.float32(0.5))
        created.append(wgc.live_buffers() - before_live)
    after = wgc.kernels_stats()
    # one input and one output per slot, one bind group and params buffer per slot: the
    # count follows depth, not the 24 batches
    assert max(created) <= 2 * depth
    assert after["bind_groups_created"] - before_stats["bind_groups_created"] <= depth
    assert after["uniform_buffers_created"] - before_stats["uniform_buffers_created"] <= depth


LEASE_N = (1 << 20) // 4 + 37  # f32 elements: just past the 1 MB where results lease staging


@pytest.mark.needs("leased-results")
def test_stream_map_large_results_view_staging_and_stay_intact(rng):
    """A result of 1 MB or more is an array over the readback staging (no copy) when free
    staging can take its place in the slot. It keeps that staging until it and its views are
    dropped: results kept while later batches run stay intact, and give theirs back when
    dropped."""
    gc.collect()
    before = wgc.current_device().staging.leases_out()
    batches = [rng.standard_normal(LEASE_N).astype(np.float32) for _ in range(8)]
    # enough free staging in the pool that no result waits for another to come back
    free = [wgc.current_device().staging.down.acquire(4 * LEASE_N) for _ in batches]
    for buf in free:
        wgc.current_device().staging.down.release(buf)
    owned = []
    for g, b in zip(wgc.stream_map("scale", batches, depth=3, params={"scalar": 3.0}),
                    batches, strict=True):
        np.testing.assert_array_equal(g, b * np.float32(3.0))
        owned.append(g.flags.owndata)
    del g
    assert owned == [False] * len(batches)  # every result leased
    gc.collect()
    assert wgc.current_device().staging.leases_out() == before
    got = list(wgc.stream_map("scale", batches, depth=3, params={"scalar": 3.0}))
    leased = [i for i, g in enumerate(got) if not g.flags.owndata]
    assert leased and wgc.current_device().staging.leases_out() - before == len(leased)
    for g, b in zip(got, batches, strict=True):
        assert g.flags.writeable and g.shape == b.shape
        np.testing.assert_array_equal(g, b * np.float32(3.0))
    i = leased[0]
    got[i][:] = 0  # the user's to change
    view = got[i][5:9]
    del got, g
    gc.collect()
    # the view keeps its batch's staging
    assert wgc.current_device().staging.leases_out() - before == 1
    np.testing.assert_array_equal(view, 0)
    del view
    gc.collect()
    assert wgc.current_device().staging.leases_out() == before
    for g, b in zip(wgc.stream_map("scale", batches, depth=1, params={"scalar": -1.0}),
                    batches, strict=True):  # depth 1 leases too; returned staging reused
        np.testing.assert_array_equal(g, -b)
        assert not g.flags.owndata


def test_release_staging_gives_back_the_free_pool_and_transfers_go_on(rng):
    batches = [rng.standard_normal(LEASE_N).astype(np.float32) for _ in range(4)]
    kept = next(iter(wgc.stream_map("scale", batches, depth=2, params={"scalar": 2.0})))
    # the abandoned map's work in flight gives its leases back as it completes, and what
    # earlier tests dropped (cycles) gives back its leases when collected
    wgc.current_device().synchronize()
    gc.collect()
    assert wgc.current_device().staging.free_bytes() > 0
    held = wgc.current_device().staging.leases_out()
    released = wgc.release_staging()
    assert released > 0 and wgc.current_device().staging.free_bytes() == 0
    # a result's staging is not the pool's to free
    assert wgc.current_device().staging.leases_out() == held
    np.testing.assert_array_equal(kept, batches[0] * np.float32(2.0))
    for g, b in zip(wgc.stream_map("scale", batches, depth=2, params={"scalar": 2.0}),
                    batches, strict=True):
        np.testing.assert_array_equal(g, b * np.float32(2.0))
    buf = wgc.upload(batches[1])
    np.testing.assert_array_equal(buf.to_numpy(), batches[1])
    assert wgc.release_staging() > 0


def _pooled_bytes(min_size=0, max_size=1 << 62):
    staging = wgc.current_device().staging
    return sum(entry[0].size for pool in (staging.up, staging.down)
               for size, free in pool._free.items() if min_size <= size < max_size
               for entry in free)


def test_idle_large_staging_is_given_back(rng, monkeypatch):
    """Free staging of 1 MB or more that no transfer took for the idle time is destroyed by
    a timer (pinned host memory is not held forever); small staging stays, transfers go on."""
    monkeypatch.setattr(wgc.current_device().staging, "idle_s", 0.3)
    wgc.release_staging()
    big = rng.standard_normal(3 << 20).astype(np.float32)  # 12 MB: one 16 MB class buffer
    small = rng.standard_normal(256).astype(np.float32)
    b, s = wgc.upload(big), wgc.upload(small)
    np.testing.assert_array_equal(b.to_numpy(), big)
    np.testing.assert_array_equal(s.to_numpy(), small)
    assert _pooled_bytes(min_size=_pools._IDLE_MIN_SIZE) > 0
    kept_small = _pooled_bytes(max_size=_pools._IDLE_MIN_SIZE)
    assert kept_small > 0
    deadline = time.monotonic() + 10
    while _pooled_bytes(min_size=_pools._IDLE_MIN_SIZE) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _pooled_bytes(min_size=_pools._IDLE_MIN_SIZE) == 0
    assert _pooled_bytes(max_size=_pools._IDLE_MIN_SIZE) == kept_small
    np.testing.assert_array_equal(b.to_numpy(), big)  # new staging, same data
    b.free()
    s.free()


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("n", [100, LEASE_N])
def test_an_iterator_collected_in_a_reference_cycle_leaves_no_dead_staging(depth, n):
    """The garbage collector may finalize a stream_map's staging buffers (wgpu-py releases
    them) before the iterator's close() hands them back to the pools: those must not be
    pooled, or the next transfer gets a dead buffer."""
    batches = [np.full(n, 3, np.float32)] * 4
    it = wgc.stream_map("scale", batches, depth=depth, params={"scalar": 2.0})
    first = next(it)
    cycle = [it, first]
    cycle.append(cycle)
    del it, first, cycle
    gc.collect()
    for pool in (wgc.current_device().staging.up, wgc.current_device().staging.down):
        for free in pool._free.values():
            assert all(entry[0]._internal is not None for entry in free)
    for got in wgc.stream_map("scale", batches, depth=depth, params={"scalar": 2.0}):
        assert got[0] == 6 and got[-1] == 6
    buf = wgc.upload(batches[0])
    np.testing.assert_array_equal(buf.read_async().wait(), batches[0])


def test_stream_map_copies_results_past_the_lease_limit(rng, monkeypatch):
    gc.collect()
    monkeypatch.setattr(_pools, "_LEASE_MAX", wgc.current_device().staging.leases_out() + 2)
    batches = [rng.standard_normal(LEASE_N).astype(np.float32) for _ in range(5)]
    got = list(wgc.stream_map("scale", batches, depth=2, params={"scalar": 2.0}))
    assert sum(not g.flags.owndata for g in got) <= 2
    for g, b in zip(got, batches, strict=True):
        np.testing.assert_array_equal(g, b * np.float32(2.0))


def test_stream_map_error_in_batch_k_surfaces_at_k(rng):
    batches = [np.full(1000, i, dtype=np.float32) for i in range(7)]

    def work(inp, out):
        if work.calls == 3:
            work.calls += 1
            raise ValueError("bad batch")
        work.calls += 1
        return wgc.run_kernel_async("scale", [inp], out, {"scalar": 10.0})

    for depth in (1, 3):
        work.calls = 0
        it = wgc.stream_map(work, batches, depth=depth)
        seen = []
        with pytest.raises(ValueError, match="bad batch") as info:
            for r in it:
                seen.append(r[0])
        assert seen == [0, 10, 20]
        assert any("batch 3" in n for n in info.value.__notes__)
        assert [r[0] for r in it] == [40, 50, 60]  # the rest still comes, in order


def test_stream_map_bad_batch_and_failing_source():
    good = np.ones(100, np.float32)
    it = wgc.stream_map("scale", [good, np.zeros(100, np.complex64), good], depth=2,
                        params={"scalar": 2.0})
    assert next(it)[0] == 2
    with pytest.raises(wgc.DtypeError):
        next(it)
    assert next(it)[0] == 2

    def source():
        yield good
        yield good
        raise OSError("disk gone")

    for depth in (1, 3):
        it = wgc.stream_map("scale", source(), depth=depth, params={"scalar": 3.0})
        assert [next(it)[0], next(it)[0]] == [3, 3]
        with pytest.raises(OSError, match="disk gone"):
            next(it)
        assert list(it) == []


def test_stream_map_timeline_records_every_stage(rng):
    tl = Timeline()
    batches = [rng.standard_normal(30_000).astype(np.float32) for _ in range(5)]
    out = list(wgc.stream_map(LOOP, batches, depth=3, params=loop_params(8), timeline=tl))
    assert len(out) == 5
    for k in range(5):
        stages = {s for b, s, _, _ in tl.spans if b == k}
        assert stages == {"load", "upload", "gpu", "download"}
    for _b, _, start, end in tl.spans:
        assert end >= start
    text = tl.gantt(40)
    assert text.count("\n") >= 20 and "batch   4 download" in text
    means = tl.stage_means()
    assert set(means) == {"load", "upload", "gpu", "download"}


def test_stream_map_argument_errors():
    a = np.zeros(4, np.float32)
    with pytest.raises(wgc.ArgumentError, match="depth"):
        wgc.stream_map("relu", [a], depth=0)
    with pytest.raises(wgc.ArgumentError, match="batches"):
        wgc.stream_map("relu", a)
    with pytest.raises(wgc.ArgumentError, match="batches"):
        wgc.stream_map("relu", 5)
    with pytest.raises(wgc.ArgumentError, match="one input"):
        wgc.stream_map("elementwise_add", [a])
    with pytest.raises(wgc.ArgumentError, match="work"):
        wgc.stream_map(3.5, [a])
    with pytest.raises(wgc.ArgumentError, match="params"):
        wgc.stream_map(lambda i, o: None, [a], params={"x": 1})
    with pytest.raises(wgc.DtypeError):
        wgc.stream_map(lambda i, o: None, [a], out_dtype="f99")


# -- the examples --------------------------------------------------------------------------------

EXAMPLES = sorted(p.name for p in
                  (Path(__file__).resolve().parents[1] / "examples" / "streams").glob("0*.py"))


def test_all_seven_stream_examples_are_here():
    assert len(EXAMPLES) == 7, EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.slow
def test_stream_example_runs(name, tmp_path):
    """Each example checks its own results against numpy, prints a Gantt chart and its total
    time, and writes a PNG timeline."""
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    r = subprocess.run([sys.executable, str(root / "examples" / "streams" / name),
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "total:" in r.stdout and "|" in r.stdout
    assert re.search(r"batch +\d+ \w+ *\|", r.stdout)
    if importlib.util.find_spec("matplotlib") is not None:
        assert list(tmp_path.glob("*.png")), "no timeline PNG written"


@pytest.mark.parametrize("value, want", [("", 30.0), ("2.5", 2.5), ("0", 30.0), ("abc", 30.0),
                                         ("-1", 30.0), ("inf", 30.0)])
def test_staging_idle_time_from_the_environment(monkeypatch, value, want):
    monkeypatch.setenv("WGCOMPUTE_STAGING_IDLE_S", value)
    if want == 30.0 and value:
        with pytest.warns(UserWarning, match="WGCOMPUTE_STAGING_IDLE_S"):
            assert _pools.idle_seconds() == want
    else:
        assert _pools.idle_seconds() == want
