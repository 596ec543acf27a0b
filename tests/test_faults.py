"""Fault scenarios that wgcompute must survive and report: allocation past the adapter's
limits and past the host's memory (then recovery), a command that fails on the GPU among
good ones, shaders that do not compile, failures inside streams, stream_map and pipelines.
Device loss and the other faults the core still gets wrong are in test_reliability_core.py.
Each case returns what happened; tests/reliability_report.py lists them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import wgcompute as wgc

ENV = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))

OUT_OF_MEMORY = '''
import json, resource, numpy as np, psutil, wgcompute as wgc
wgc.buffer([1.0]).tolist()
vms = psutil.Process().memory_info().vms
resource.setrlimit(resource.RLIMIT_AS, (vms + (1 << 30), resource.RLIM_INFINITY))
held, error = [], None
for i in range(64):  # 64 MiB each: past the 1 GiB cap well before the end
    try:
        held.append(wgc.empty((16 << 20,), "f32"))
    except Exception as e:
        error = [type(e).__name__, isinstance(e, wgc.DeviceError), str(e)[:160]]
        break
n_held = len(held)
for b in held:
    b.free()
resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
b = wgc.from_numpy(np.arange(16 << 20, dtype=np.float32))
ok = bool((wgc.relu(b).to_numpy() == np.arange(16 << 20, dtype=np.float32)).all())
print(json.dumps({"held": n_held, "error": error, "recovered": ok}))
'''


def case_allocation_past_max_buffer_size() -> str:
    limit = wgc.device_info()["limits"]["max-buffer-size"]
    with pytest.raises(wgc.DeviceError, match=r"^shape: .*max-buffer-size"):
        wgc.empty((limit // 4 + 16,), "f32")
    b = wgc.buffer([1.0, 2.0])
    assert b.tolist() == [1.0, 2.0]
    return "DeviceError 'shape: a buffer of N bytes exceeds ... max-buffer-size'; next works"


def case_allocation_until_out_of_memory() -> str:
    """Allocate 64 MiB buffers under a 1 GiB address-space cap (a subprocess) until the
    driver refuses; then free them, lift the cap, and compute."""
    r = subprocess.run([sys.executable, "-c", OUT_OF_MEMORY], capture_output=True,
                       text=True, env=ENV, timeout=300)
    assert r.returncode == 0, f"rc {r.returncode}: {r.stderr[-1500:]}"
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["error"] is not None, "1 GiB of 64 MiB buffers never ran out"
    name, is_device_error, message = res["error"]
    assert is_device_error and message.startswith("shape: could not allocate"), res
    assert res["recovered"], res
    return (f"DeviceError after {res['held']} buffers of 64 MiB ('shape: could not allocate "
            f"...'); freed, then a 64 MiB relu is exact")


def case_failed_command_among_good_ones() -> str:
    """A dispatch past 65,535 workgroups fails on the GPU (a user grid() asked for it):
    that command fails with the cause, the commands around it complete."""
    src = """
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(1)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < arrayLength(&out)) { out[g.x] = 1.0; }
}
"""
    wgc.register_kernel("faults_too_many_groups", src, bindings=[("out", "read_write")],
                        grid=lambda ins, out, params: (70_000,), replace=True)
    a = wgc.from_numpy(np.arange(-3, 3, dtype=np.float32))
    before = wgc.run_kernel_async("relu", [a])
    try:
        bad = wgc.run_kernel_async("faults_too_many_groups", [], wgc.empty((4,)))
    except wgc.WgComputeError as e:  # refused before the GPU: also a clean outcome
        bad = e
    after = wgc.run_kernel_async("scale", [a], None, {"scalar": 2.0})
    np.testing.assert_array_equal(before.wait().to_numpy(), np.maximum(np.arange(-3, 3), 0))
    np.testing.assert_array_equal(after.wait().to_numpy(), np.arange(-3, 3) * 2.0)
    if isinstance(bad, wgc.WgComputeError):
        return f"refused before submit ({type(bad).__name__}); the others completed"
    with pytest.raises(wgc.CommandFailedError) as e:
        bad.wait()
    assert bad.status == "failed" and e.value.cause is not None
    return "that command failed (CommandFailedError with its cause); before and after exact"


def case_shader_that_does_not_compile() -> str:
    before = set(wgc.kernels())
    with pytest.raises(wgc.ShaderCompileError) as e:
        wgc.register_kernel("faults_broken", "fn main( {", bindings=[("o", "read_write")])
    assert "   1 | fn main( {" in str(e.value) and set(wgc.kernels()) == before
    assert wgc.relu(wgc.buffer([-1.0, 1.0])).tolist() == [0.0, 1.0]
    return "ShaderCompileError with numbered source; registry unchanged; others run"


def case_failure_inside_a_stream() -> str:
    s = wgc.create_stream("faults")
    a = wgc.from_numpy(np.ones(4, np.float32))
    b = wgc.empty((4,))
    s.run_kernel("relu", [a], b)
    a.free()  # the stream's next operation finds it freed
    bad = s.download(b)
    s.write(b, np.full(4, 7.0, np.float32))
    got = s.download(b)
    s.sync()  # nothing failed: download(b) is fine, a was used before it was freed
    assert bad.wait().tolist() == [1.0] * 4 and got.wait().tolist() == [7.0] * 4
    c = wgc.empty((4,))
    c.free()
    with pytest.raises(wgc.BufferFreedError):
        s.download(c)  # checked when given, not later on the stream's thread
    s.write(b, [2.0] * 4)
    assert s.download(b).wait().tolist() == [2.0] * 4
    s.close()
    return "use of a freed buffer refused when given (BufferFreedError); the stream goes on"


def case_stream_map_bad_batch() -> str:
    batches = [np.ones(4, np.float32), np.array([1j]), np.full(4, -2.0, np.float32)]
    it = iter(wgc.stream_map("relu", batches, depth=2))
    assert next(it).tolist() == [1.0] * 4
    with pytest.raises(wgc.DtypeError) as e:
        next(it)
    assert "batch 1" in " ".join(getattr(e.value, "__notes__", [])) + str(e.value)
    assert next(it).tolist() == [0.0] * 4
    with pytest.raises(StopIteration):
        next(it)
    return "DtypeError raised at position 1 (noted 'batch 1'); batches 0 and 2 exact"


def case_pipeline_with_a_freed_buffer() -> str:
    a = wgc.from_numpy(np.arange(-2, 2, dtype=np.float32))
    p = wgc.pipeline()
    p.add(kernel="relu", inputs=[a])
    out = p.stages[0]["output"]
    p.run()
    out.free()
    with pytest.raises(wgc.PipelineError, match="stage 0"):
        p.run()
    p2 = wgc.pipeline().add(kernel="relu", inputs=[a])
    p2.run()
    assert p2.stages[0]["output"].tolist() == [0.0, 0.0, 0.0, 1.0]
    return "PipelineError naming stage 0; a rebuilt pipeline runs exact"


def case_timeout_then_wait() -> str:
    a = wgc.from_numpy(np.ones(1 << 20, np.float32))
    cmds = [wgc.run_kernel_async("relu", [a]) for _ in range(20)]
    last = cmds[-1]
    try:
        last.wait(0)
        first = "done at once"
    except wgc.TimeoutError:
        first = "TimeoutError at timeout=0"
    assert last.wait(120).to_numpy()[0] == 1.0
    return f"{first}; wait() then returns the result"


CASES = {
    "allocation past max-buffer-size": case_allocation_past_max_buffer_size,
    "allocation until out of memory (1 GiB cap), then recovery":
        case_allocation_until_out_of_memory,
    "a GPU-side failed command among good ones": case_failed_command_among_good_ones,
    "a shader that does not compile": case_shader_that_does_not_compile,
    "freed buffers in a stream": case_failure_inside_a_stream,
    "stream_map with a bad batch in the middle": case_stream_map_bad_batch,
    "a pipeline whose buffer was freed": case_pipeline_with_a_freed_buffer,
    "wait(timeout=0) on queued work, then wait()": case_timeout_then_wait,
}


NEEDS = {"allocation until out of memory (1 GiB cap), then recovery": "out-of-memory-errors"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.needs(NEEDS[n]),
                                                         pytest.mark.slow]) if n in NEEDS
                                  else n for n in CASES])
def test_fault(name):
    CASES[name]()
