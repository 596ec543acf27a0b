"""Pipelines: one encoder and one submit for many stages, validation at add(), reruns that
create no GPU objects, set_params, profiling. numpy is the reference."""

import contextlib
import gc
import threading
import time
import traceback

import numpy as np
import pytest
from wgpu._classes import object_tracker

import wgcompute as wgc


def stages_by_hand(x_np):
    s1 = x_np + x_np
    s2 = np.maximum(s1, 0)
    s3 = s2 * np.float32(3.0)
    return s1, s2, s3


def build(x, n):
    s1, s2, s3, s4 = (wgc.empty((n,), "f32") for _ in range(4))
    p = wgc.pipeline("test")
    p.add({"op": "run_kernel", "kernel": "elementwise_add", "inputs": [x, x], "output": s1})
    p.add({"op": "run_kernel", "kernel": "relu", "inputs": [s1], "output": s2,
           "params": {}})
    p.add({"op": "run_kernel", "kernel": "scale", "inputs": [s2], "output": s3,
           "params": {"scalar": 3.0}})
    p.add({"op": "copy_buffer", "inputs": [s3], "output": s4})
    return p, (s1, s2, s3, s4)


def test_pipeline_equals_stages_run_one_by_one(rng):
    n = 100_003
    x_np = rng.standard_normal(n).astype(np.float32)
    x = wgc.from_numpy(x_np)
    p, (s1, s2, s3, s4) = build(x, n)
    assert p.stage_count == len(p) == 4
    assert [s["kernel"] for s in p.stages[:3]] == ["elementwise_add", "relu", "scale"]
    wgc.pipeline_run(p)
    # the same work, one kernel at a time
    r1 = wgc.add(x, x)
    r2 = wgc.relu(r1)
    r3 = wgc.scale(r2, 3.0)
    for got, want in ((s1, r1), (s2, r2), (s3, r3), (s4, r3)):
        np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())
    for got, want in zip((s1, s2, s3), stages_by_hand(x_np)):
        np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-6)


def test_repeated_and_alternating_kernels_and_a_stage_added_after_a_run(rng):
    """Consecutive stages of one kernel share its pipeline in the pass (set once), kernels
    alternate, a barrier splits the pass, and a stage added after a run is recorded too."""
    n = 4099
    x_np = rng.standard_normal(n).astype(np.float32)
    x = wgc.from_numpy(x_np)
    b = [wgc.empty((n,), "f32") for _ in range(6)]
    p = wgc.pipeline("alternating")
    p.add(kernel="elementwise_add", inputs=[x, x], output=b[0])
    p.add(kernel="elementwise_add", inputs=[b[0], x], output=b[1])
    p.add(kernel="relu", inputs=[b[1]], output=b[2])
    p.add(kernel="elementwise_add", inputs=[b[2], b[0]], output=b[3])
    p.add(op="barrier")
    p.add(kernel="elementwise_add", inputs=[b[3], b[3]], output=b[4])
    p.run()
    want = [x_np * 2, x_np * 3]
    want.append(np.maximum(want[1], 0))
    want.append(want[2] + want[0])
    want.append(want[3] * 2)
    for got, w in zip(b, want):
        np.testing.assert_allclose(got.to_numpy(), w, rtol=1e-6)
    p.add(kernel="scale", inputs=[b[4]], output=b[5], params={"scalar": -1.0})
    p.run()
    np.testing.assert_allclose(b[5].to_numpy(), -want[4], rtol=1e-6)


def test_rerun_on_new_contents_and_set_params(rng):
    n = 1000
    x = wgc.from_numpy(rng.standard_normal(n).astype(np.float32))
    p, (_, _, s3, s4) = build(x, n)
    p.run()
    for _ in range(3):
        x_np = rng.standard_normal(n).astype(np.float32)
        x.write(x_np)
        p.run()
        np.testing.assert_allclose(s4.to_numpy(), stages_by_hand(x_np)[2], rtol=1e-6)
    p.set_params(2, scalar=-0.5)
    p.run()
    np.testing.assert_allclose(s3.to_numpy(), np.maximum(x_np + x_np, 0) * -0.5, rtol=1e-6)
    assert p.stages[2]["params"]["scalar"] == -0.5
    with pytest.raises(wgc.PipelineError, match="stage 2"):
        p.set_params(2, scalar="big")
    with pytest.raises(wgc.ArgumentError, match="stage_index"):
        p.set_params(9, scalar=1.0)


_KINDS = ("GPUBuffer", "GPUBindGroup", "GPUComputePipeline", "GPUBindGroupLayout",
          "GPUShaderModule", "GPUPipelineLayout", "GPUQuerySet")


def _settle() -> None:
    """Let work started before this point finish (earlier tests' commands, fences the poll
    thread has not completed yet) and collect its garbage, so that only what happens next is
    measured. On a real GPU, work submitted earlier is still running when a test starts."""
    for dev in wgc.runtime.open_devices():
        for cmd in list(dev.commands.values()):
            try:
                cmd.wait(timeout=60)
            except wgc.WgComputeError:
                pass  # an earlier test's failed command: finished, all that matters here
        deadline = time.monotonic() + 60
        while dev.submitter.pending_count() and time.monotonic() < deadline:
            dev.submitter.poll()
            time.sleep(1e-3)
    for _ in range(2):
        gc.collect()


@contextlib.contextmanager
def _creations():
    """Every GPU object of _KINDS created meanwhile, on any thread, with where it was made
    (the object tracker's counts alone net creations against objects that die meanwhile)."""
    made = []
    original = object_tracker.increase

    def increase(name, *args):
        if name in _KINDS:
            stack = "".join(traceback.format_stack(limit=8)[:-1])
            made.append(f"{name} on thread {threading.current_thread().name}:\n{stack}")
        return original(name, *args)

    object_tracker.increase = increase
    try:
        yield made
    finally:
        object_tracker.increase = original


@pytest.mark.slow
def test_thousand_runs_create_no_gpu_objects_after_the_first(rng):
    n = 4096
    x = wgc.from_numpy(rng.standard_normal(n).astype(np.float32))
    p, (_, _, _, s4) = build(x, n)
    p.run()
    # Two warm-up bursts of the same work: a pool of fences or staging grows to the depth of
    # the work in flight (the portable calls' fence buffers under a loaded CPU), and only
    # then is a run free of creations; a leak would still create in the burst measured.
    for _ in range(2):
        [p.submit() for _ in range(1000)][-1].wait()
    _settle()
    before = {k: object_tracker.counts.get(k, 0) for k in _KINDS}
    stats_before = dict(wgc.kernels_stats())
    with _creations() as made:
        cmds = [p.submit() for _ in range(1000)]
        cmds[-1].wait()
        assert all(c.done() for c in cmds)
        _settle()
    assert not made, f"{len(made)} GPU object(s) created by 1000 submits:\n" + "\n".join(made[:5])
    after = {k: object_tracker.counts.get(k, 0) for k in _KINDS}
    # none was made (above); the count may only fall, when an earlier test's objects die
    # meanwhile (the staging idle timer, its garbage collected)
    assert all(after[k] <= before[k] for k in _KINDS), (before, after)
    assert wgc.kernels_stats() == stats_before
    np.testing.assert_allclose(s4.to_numpy(), np.maximum(2 * x.to_numpy(), 0) * 3, rtol=1e-6)


def test_invalid_stages_are_rejected_at_add_with_their_index():
    a = wgc.buffer([1.0, 2.0, 3.0])
    b = wgc.empty((3,), "f32")
    p = wgc.pipeline().add({"kernel": "relu", "inputs": [a], "output": b})
    with pytest.raises(wgc.PipelineError, match=r"stage 1 .*no kernel named 'reluu'"):
        p.add({"op": "run_kernel", "kernel": "reluu", "inputs": [b], "output": a})
    with pytest.raises(wgc.PipelineError, match=r"stage 1 .*takes 2 input"):
        p.add({"op": "run_kernel", "kernel": "elementwise_add", "inputs": [b], "output": a})
    with pytest.raises(wgc.PipelineError, match=r"stage 1 .*\(4,\)"):
        p.add({"op": "run_kernel", "kernel": "relu", "inputs": [b],
               "output": wgc.empty((4,), "f32")})
    with pytest.raises(wgc.PipelineError, match=r"stage 1 .*s32"):
        p.add({"op": "run_kernel", "kernel": "elementwise_add",
               "inputs": [b, wgc.buffer([1, 2, 3], dtype="s32")], "output": a})
    with pytest.raises(wgc.PipelineError, match=r"stage 1 .*op"):
        p.add({"op": "teleport"})
    with pytest.raises(wgc.PipelineError, match="stage 1"):
        p.add("relu")
    assert p.stage_count == 1  # nothing half-added
    p.run()
    np.testing.assert_array_equal(b.to_numpy(), [1.0, 2.0, 3.0])


def test_a_stage_reads_what_an_earlier_stage_wrote_without_barriers(rng):
    n = 65_537
    x_np = rng.standard_normal(n).astype(np.float32)
    x = wgc.from_numpy(x_np)
    bufs = [x] + [wgc.empty((n,), "f32") for _ in range(50)]
    p = wgc.pipeline()
    for i in range(50):
        p.add(kernel="elementwise_add", inputs=[bufs[i], x], output=bufs[i + 1])
    p.run()
    np.testing.assert_allclose(bufs[-1].to_numpy(), x_np * 51, rtol=1e-5)


def test_submit_returns_a_command_and_facade_names(rng):
    x = wgc.buffer([-1.0, 4.0])
    y = wgc.empty((2,), "f32")
    p = wgc.pipeline()
    assert wgc.pipeline_add(p, {"kernel": "relu", "inputs": [x], "output": y}) is p
    cmd = p.submit()
    assert wgc.wait(cmd) is None
    assert y.tolist() == [0.0, 4.0]
    wgc.free_pipeline(p)
    with pytest.raises(wgc.PipelineError, match="freed"):
        p.run()
    with pytest.raises(wgc.ArgumentError, match="pipeline"):
        wgc.pipeline_run("not a pipeline")


def test_output_allocated_when_missing():
    x = wgc.buffer([[1.0, -2.0], [3.0, -4.0]])
    p = wgc.pipeline().add(kernel="relu", inputs=[x])
    out = p.stages[0]["output"]
    p.run()
    assert out.tolist() == [[1.0, 0.0], [3.0, 0.0]]


@pytest.mark.skipif("timestamp-query" not in wgc.device_info()["features"],
                    reason="adapter lacks timestamp-query")
def test_profile_returns_per_stage_gpu_milliseconds(rng):
    n = 1 << 20
    x = wgc.from_numpy(rng.standard_normal(n).astype(np.float32))
    p, _ = build(x, n)
    times = p.run(profile=True)
    assert len(times) == 4
    assert times[3] is None or times[3] >= 0  # a copy is timed when it runs as a kernel
    assert all(t is not None and 0 <= t < 10_000 for t in times[:3])
