"""One worker process per device: stream_map(processes=...) over real worker processes (two on
the test adapter: what spreading over two GPUs does, without a second GPU), against the same
map in this process; errors raised where they would be in one process; workers killed mid-map;
no process or shared memory left behind."""

import os
import signal
import time

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute import _multiproc

pytestmark = pytest.mark.timeout(600)

# the adapter the rest of the suite runs on, by its index (what a worker process opens)
ADAPTER = _multiproc.adapter_index(wgc.default_device(), "device")


@pytest.fixture(scope="module")
def pool():
    with wgc.device_processes([ADAPTER, ADAPTER]) as p:
        yield p
    assert _multiproc.leftover_shm(p._state.prefix) == []
    _assert_ended(p)


def _assert_ended(p):
    for info in p.devices:
        assert not info["alive"]
        with pytest.raises(ProcessLookupError):  # reaped: not even a zombie is left
            os.kill(info["pid"], 0)


# -- work that travels to the workers (module level: pickled by reference) ----------------------
def relu_into(inp, out):
    return wgc.run_kernel_async("relu", [inp], out)


def fail_on_seven(inp, out):
    if inp.shape[0] == 7:
        raise wgc.ShapeError("fail_on_seven: batch of 7 rows")
    return wgc.run_kernel_async("relu", [inp], out)


def slow_relu(inp, out):
    time.sleep(0.15)
    return wgc.run_kernel_async("relu", [inp], out)


def exit_on_seven(inp, out):
    if inp.shape[0] == 7:
        os._exit(3)  # the process ends, whichever worker runs it
    return wgc.run_kernel_async("relu", [inp], out)


def make_batch(i):
    if i == 4:
        raise wgc.ArgumentError("make_batch: item 4 is missing")
    return np.linspace(-1, 1, 300_000, dtype=np.float32) * (i + 1)


def make_with_note(i):
    return np.full((4, 5), i - 2.5, np.float32), {"item": i}


def _batches(n=12, size=100_000):
    rng = np.random.default_rng(7)
    # sizes vary (a few are large enough to come back as shared memory itself)
    return [rng.standard_normal(size * (1 + i % 3) + i).astype(np.float32) for i in range(n)]


# -- results --------------------------------------------------------------------------------------
def test_kernel_results_in_order_equal_one_process(pool):
    batches = _batches()
    want = list(wgc.stream_map("scale", batches, params={"scalar": -3.0}))
    got = list(wgc.stream_map("scale", batches, params={"scalar": -3.0}, processes=pool))
    assert len(got) == len(want)
    for g, w, b in zip(got, want, batches):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(g, b * np.float32(-3.0))
    assert any(not g.flags.owndata for g in got)  # large results: the shared memory itself


def test_results_outlive_their_pool():
    batches = [np.full(400_000, i, np.float32) for i in range(4)]  # 1.6 MB: shared memory
    with wgc.device_processes([wgc.default_device()]) as p:  # an open device: its adapter
        assert [d["adapter"] for d in p.devices] == [ADAPTER]
        got = list(wgc.stream_map("scale", batches, params={"scalar": 3.0}, processes=p))
    assert not any(g.flags.owndata for g in got)
    import gc

    gc.collect()  # the pool's mappings are gone; the results keep theirs
    for g, b in zip(got, batches):
        np.testing.assert_array_equal(g, b * 3)
    assert _multiproc.leftover_shm(p._state.prefix) == []


def test_callable_pipeline_and_custom_kernel_travel(pool, rng):
    batches = [rng.standard_normal((64, 33)).astype(np.float32) for _ in range(6)]
    got = list(wgc.stream_map(relu_into, batches, depth=2, processes=pool))
    for g, b in zip(got, batches):
        np.testing.assert_array_equal(g, np.maximum(b, 0))

    p = wgc.pipeline("relu then scale")
    x = wgc.empty((64, 33), "f32")
    p.add(kernel="relu", inputs=[x])
    p.add(kernel="scale", inputs=[p.stages[-1]["output"]], params={"scalar": 0.5})
    got = list(wgc.stream_map(p, batches, processes=pool))
    want = list(wgc.stream_map(p, batches))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)

    wgc.register_kernel("mp_plus_one", """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < arrayLength(&y)) { y[gid.x] = x[gid.x] + 1.0; }
}""", replace=True)
    got = list(wgc.stream_map("mp_plus_one", batches, processes=pool))
    for g, b in zip(got, batches):
        np.testing.assert_array_equal(g, b + 1)


def test_load_each_is_read_by_the_workers_with_notes(pool):
    got = list(wgc.stream_map("relu", wgc.load_each(make_with_note, range(5)), processes=pool))
    here = list(wgc.stream_map("relu", wgc.load_each(make_with_note, range(5))))
    assert [n for _, n in got] == [{"item": i} for i in range(5)] == [n for _, n in here]
    for (g, _), (h, _), i in zip(got, here, range(5)):
        np.testing.assert_array_equal(g, np.maximum(np.full((4, 5), i - 2.5, np.float32), 0))
        np.testing.assert_array_equal(g, h)


def test_a_pool_is_reused_and_runs_one_map_at_a_time(pool, rng):
    a = rng.standard_normal(1000).astype(np.float32)
    first = wgc.stream_map("relu", [a] * 3, processes=pool)
    with pytest.raises(wgc.ArgumentError, match="runs another map"):
        wgc.stream_map("relu", [a], processes=pool)
    first.close()
    with wgc.stream_map("relu", [a] * 50, processes=pool) as m:  # left early
        np.testing.assert_array_equal(next(m), np.maximum(a, 0))
    assert [np.array_equal(r, np.maximum(a, 0))
            for r in wgc.stream_map("relu", [a] * 4, processes=pool)] == [True] * 4


# -- errors: where one process raises them, the same ---------------------------------------------
def _collect(it):
    out = []
    while True:
        try:
            out.append(next(it))
        except StopIteration:
            return out
        except wgc.WgComputeError as e:
            out.append(e)


def test_an_error_in_a_worker_is_raised_at_its_batch_as_in_one_process(pool, rng):
    batches = [rng.standard_normal((n, 3)).astype(np.float32) for n in (5, 6, 7, 8, 7, 9)]
    here = _collect(wgc.stream_map(fail_on_seven, batches))
    there = _collect(wgc.stream_map(fail_on_seven, batches, processes=pool))
    assert [type(x) for x in there] == [type(x) for x in here]
    for i, (h, t) in enumerate(zip(here, there)):
        if isinstance(h, Exception):
            assert isinstance(t, wgc.ShapeError) and str(t) == str(h)
            notes = " ".join(t.__notes__)
            assert f"stream_map batch {i} on device" in notes and "worker process" in notes
        else:
            np.testing.assert_array_equal(t, h)


def test_bad_batches_are_refused_at_their_place(pool):
    good = np.ones(4, np.float32)
    batches = [good, "text", np.ones(3, np.longdouble), np.ones(2, np.complex64), good]
    got = _collect(wgc.stream_map("relu", batches, processes=pool))
    here = _collect(wgc.stream_map("relu", batches))
    assert isinstance(got[1], wgc.ArgumentError) and "batches[1]" in str(got[1])
    assert isinstance(got[2], wgc.DtypeError) and "batches[2]" in str(got[2])
    assert isinstance(got[3], wgc.DtypeError) and "c64 is not supported" in str(got[3])
    assert [(type(g), str(g)) for g in got[1:4]] == [(type(h), str(h)) for h in here[1:4]]
    np.testing.assert_array_equal(got[4], good)


def test_a_failed_load_is_raised_at_its_item_and_the_rest_run(pool):
    for processes in (False, pool):
        got = _collect(wgc.stream_map("relu", wgc.load_each(make_batch, range(6)),
                                      processes=processes))
        assert len(got) == 6
        assert isinstance(got[4], wgc.ArgumentError) and "item 4 is missing" in str(got[4])
        np.testing.assert_array_equal(got[5], np.maximum(make_batch(5), 0))


def test_arguments_are_checked_before_any_process_starts(rng):
    a = rng.standard_normal(8).astype(np.float32)
    with pytest.raises(wgc.ArgumentError, match=r"devices\[1\]: expected an adapter index"):
        wgc.stream_map("relu", [a], processes=True, devices=[ADAPTER, 99])
    with pytest.raises(wgc.ArgumentError, match="processes: expected True, False"):
        wgc.stream_map("relu", [a], processes="yes")
    with pytest.raises(wgc.ArgumentError, match="timeline"):
        wgc.stream_map("relu", [a], processes=True, timeline=wgc.Timeline())
    with pytest.raises(wgc.ArgumentError, match="does not pickle"):
        wgc.stream_map(_Unpicklable(), [a], processes=True)


class _Unpicklable:
    def __call__(self, inp, out):
        return None

    def __reduce__(self):
        raise TypeError("no")


# -- workers that die ----------------------------------------------------------------------------
@pytest.mark.slow
def test_a_worker_killed_mid_map_loses_nothing(rng):
    batches = [rng.standard_normal(20_000 + i).astype(np.float32) for i in range(16)]
    with wgc.device_processes([ADAPTER, ADAPTER]) as p:
        victim = p.devices[0]["pid"]
        got = []
        with pytest.warns(RuntimeWarning, match=r"worker process \d+\) was killed by SIGKILL; "
                                                r"its batches [\d, ]+ go to the other processes"), \
                wgc.stream_map(slow_relu, batches, depth=2, processes=p) as m:
            for r in m:
                got.append(r)
                if len(got) == 2:
                    os.kill(victim, signal.SIGKILL)
        assert len(got) == len(batches)
        for g, b in zip(got, batches):
            np.testing.assert_array_equal(g, np.maximum(b, 0))
        assert [d["alive"] for d in p.devices] == [False, True]
        # the next map runs on the one left
        assert np.array_equal(next(iter(wgc.stream_map("relu", batches[:1], processes=p))),
                              np.maximum(batches[0], 0))
    _assert_ended(p)
    assert _multiproc.leftover_shm(p._state.prefix) == []


@pytest.mark.filterwarnings("ignore:stream_map:RuntimeWarning")
def test_a_batch_that_ends_every_worker_fails_clearly(rng):
    batches = [rng.standard_normal((n, 4)).astype(np.float32) for n in (5, 6, 7, 8, 9)]
    m = wgc.stream_map(exit_on_seven, batches, depth=1, processes=True,
                       devices=[ADAPTER, ADAPTER])
    pool_ = m._pool
    got = _collect(m)
    for i in (0, 1):
        np.testing.assert_array_equal(got[i], np.maximum(batches[i], 0))
    assert isinstance(got[2], wgc.DeviceLostError)
    assert "batch 2" in str(got[2]) and "exited with code 3" in str(got[2])
    # the batches after it ran before the second worker ended, or fail saying why
    for i, g in enumerate(got[3:], 3):
        if isinstance(g, Exception):
            assert isinstance(g, wgc.DeviceLostError) and "exited with code 3" in str(g)
        else:
            np.testing.assert_array_equal(g, np.maximum(batches[i], 0))
    assert pool_.closed  # processes=True: the pool ended with its map
    _assert_ended(pool_)
    assert _multiproc.leftover_shm(pool_._state.prefix) == []


def test_a_worker_that_cannot_open_its_device_says_so():
    count = len(wgc.devices())
    with pytest.raises(wgc.ArgumentError, match=r"devices\[0\]"):
        wgc.device_processes([count])


# -- wgcompute infer --devices ------------------------------------------------------------------
@pytest.mark.slow
def test_infer_devices_gives_the_bytes_of_one_process(tmp_path, capsys):
    """Batches of 2 (the last padded) with a corrupt image among the good ones, classified by
    two worker processes that decode their own files: the same JSON, byte for byte, as in
    one process, the same failure report and exit code."""
    onnx = pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")
    pytest.importorskip("PIL", reason="pillow decodes the images")
    from pathlib import Path

    from wgcompute.cli import main
    from wgcompute.ml.builders import mobilenet_v2

    model = tmp_path / "mnv2.onnx"
    onnx.save(mobilenet_v2(seed=5, size=64, num_classes=10), str(model))
    photos = sorted(str(p) for p in (Path(__file__).resolve().parents[1] / "examples" /
                                     "data").glob("*.jpg"))
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"not an image")
    files = [photos[0], str(bad), *photos[1:]]

    def run(*extra):
        rc = main(["infer", str(model), *files, "--json", "--top", "3", "--batch", "2",
                   "--no-progress", *extra])
        out = capsys.readouterr()
        return rc, out.out, out.err

    rc1, out1, err1 = run()
    rc2, out2, err2 = run("--devices", f"{ADAPTER},{ADAPTER}")
    assert rc1 == rc2 == 1, err2
    assert out1 == out2
    failure = f"1 failed:\n  {bad}: ArgumentError: path: cannot decode"
    assert failure in err1 and failure in err2
    for extra in (["--devices", "x"], ["--devices", "99"], ["--devices", "0", "--workers", "2"]):
        rc, out, err = run(*extra)
        assert rc == 2 and err.startswith("wgcompute infer: error: --devices: "), (extra, err)


_ORPHAN_SCRIPT = """
import sys, time
import numpy as np
sys.path.insert(0, {tests!r})
import wgcompute as wgc
from test_multi_process import slow_relu

if __name__ == "__main__":
    pool = wgc.device_processes([{adapter}, {adapter}])
    print(" ".join(str(d["pid"]) for d in pool.devices), pool._state.prefix, flush=True)
    for r in wgc.stream_map(slow_relu, [np.ones(300_000, np.float32)] * 1000, processes=pool):
        print("result", flush=True)
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1].startswith("Z")  # a zombie: ended, not reaped
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
@pytest.mark.slow
def test_worker_processes_end_when_their_parent_is_killed(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "parent.py"
    script.write_text(_ORPHAN_SCRIPT.format(tests=str(Path(__file__).parent), adapter=ADAPTER))
    env = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              env=env)
    try:
        first = parent.stdout.readline().split()
        pids, prefix = [int(p) for p in first[:2]], first[2]
        assert parent.stdout.readline().strip() == "result"  # mid-map
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(30)
        deadline = time.monotonic() + 60
        while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(_gone(p) for p in pids), "a worker process outlived its parent"
        while _multiproc.leftover_shm(prefix) and time.monotonic() < deadline:
            time.sleep(0.1)  # the parent's inputs: removed by the resource tracker it left
        assert _multiproc.leftover_shm(prefix) == []
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


@pytest.mark.slow
@pytest.mark.needs("several-devices")  # its one-process reference opens a device per adapter
def test_the_multi_gpu_benchmark_runs_and_checks_its_results(tmp_path):
    import json

    from benchmarks import multi_gpu

    out = tmp_path / "multi.json"
    assert multi_gpu.main(["--small", "--only", "fma,torch", "--devices",
                           f"{ADAPTER},{ADAPTER}", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    impls = [r["impl"] for r in doc["rows"]]
    assert [i for i in impls if i.endswith("process(es)")] == \
        ["wgcompute, 1 process(es)", "wgcompute, 2 process(es)"]
    assert len(impls) == 5  # and batches handed over from here, and threads in one process
    assert all(r["err"] < 1e-5 for r in doc["rows"] if r["err"] is not None)
    assert list(doc["ratios"]) == [doc["rows"][0]["case"]]
