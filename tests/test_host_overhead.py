"""Host work per queued operator: the autotune cache parsed once (and another process's write
still seen), a matmul's tuning problem made once per shape, params buffers shared by queued
bindings with the same bytes, the Python calls of a queued matmul pinned, and no audit event
per frame of a queued operator."""

import cProfile
import json
import os
import pstats
import subprocess
import sys
import time

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute import _lazy, autotune
from wgcompute.errors import ArgumentError
from wgcompute.kernels import get
from wgcompute.kernels.core.bind import bind


def _write(path, data) -> None:
    path.write_text(json.dumps(data))


def _after_recheck() -> None:
    time.sleep(autotune._RECHECK_S * 2)


def test_a_lookup_miss_parses_the_cache_file_once(tuning_cache, monkeypatch):
    dev = wgc.current_device()
    _write(tuning_cache / "autotune.json", {"another adapter": {"p": "x"}})
    parsed = []
    real = json.load
    monkeypatch.setattr(autotune.json, "load", lambda f: parsed.append(1) or real(f))
    for _ in range(50):
        assert autotune.lookup(dev, "matmul f32 nothing tuned") is None
    assert len(parsed) == 1


def test_a_cache_file_written_by_another_process_after_a_miss_is_seen(tuning_cache):
    dev = wgc.current_device()
    key = autotune.adapter_key(dev)
    assert autotune.lookup(dev, "problem p") is None  # a miss: the (missing) file was read
    code = ("import json, os, sys, tempfile\n"
            "folder, key = sys.argv[1], sys.argv[2]\n"
            "fd, tmp = tempfile.mkstemp(dir=folder)\n"
            "with os.fdopen(fd, 'w') as f:\n"
            "    json.dump({key: {'problem p': '64x64x16_4x4'}}, f)\n"
            "os.replace(tmp, os.path.join(folder, 'autotune.json'))\n")
    subprocess.run([sys.executable, "-c", code, str(tuning_cache), key], check=True, timeout=60)
    _after_recheck()
    assert autotune.lookup(dev, "problem p") == "64x64x16_4x4"
    assert autotune.stored(dev) == {"problem p": "64x64x16_4x4"}


def test_a_rewrite_of_the_same_size_in_the_same_clock_tick_is_seen(tuning_cache):
    """mtime, size and inode can all stay the same when a file is rewritten in place within
    the filesystem clock's tick: such a fresh parse is checked again."""
    dev = wgc.current_device()
    key = autotune.adapter_key(dev)
    path = tuning_cache / "autotune.json"
    _write(path, {key: {"p": "aaaa"}})
    assert autotune.lookup(dev, "p") == "aaaa"
    dev.autotune.clear()  # the device keeps what it found: look at the file again
    with open(path, "r+") as f:  # in place: the same inode
        f.write(json.dumps({key: {"p": "bbbb"}}))
    _after_recheck()
    assert autotune.lookup(dev, "p") == "bbbb"


def test_remember_and_reset_are_seen_at_once(tuning_cache):
    dev = wgc.current_device()
    assert autotune.lookup(dev, "p") is None
    autotune.remember(dev, "p", "32x32x16_4x4")
    dev.autotune.clear()
    assert autotune.lookup(dev, "p") == "32x32x16_4x4"  # from the file, no wait
    autotune.autotune_reset()
    assert autotune.lookup(dev, "p") is None
    assert not os.path.exists(autotune.cache_path())


def test_a_matmul_problem_is_made_once_and_its_choice_looked_up_each_time(tuning_cache):
    dev = wgc.current_device()
    mm = get("matmul")
    first = mm.tune_problem(256, 256, 256, "f32", dev)
    assert mm.tune_problem(256, 256, 256, "f32", dev) is first
    assert mm.tune_problem(256, 256, 128, "f32", dev) is not first
    other = next(c for c in first.candidates if c != first.fallback)
    assert mm.config_for(256, 256, 256, "f32", dev).name == first.fallback
    autotune.remember(dev, first.key, other)  # a choice made later is used at once
    assert mm.config_for(256, 256, 256, "f32", dev).name == other
    autotune.autotune_reset()
    assert mm.config_for(256, 256, 256, "f32", dev).name == first.fallback


def test_queued_bindings_share_a_params_buffer_and_compute_right(rng):
    dev = wgc.current_device()
    a_np = rng.standard_normal((33, 20)).astype(np.float32)
    b_np = rng.standard_normal((20, 17)).astype(np.float32)
    a, b = wgc.from_numpy(a_np), wgc.from_numpy(b_np)
    outs = [wgc.empty((33, 17)) for _ in range(5)]
    _lazy.enqueue("matmul", [a, b], outs[0])  # the first binding of this shape makes one
    made = dev.stats["uniform_buffers_created"]
    for out in outs[1:]:  # new outputs: new bindings, the same params
        _lazy.enqueue("matmul", [a, b], out)
    assert dev.stats["uniform_buffers_created"] == made
    for out in outs:
        np.testing.assert_allclose(out.to_numpy(), a_np @ b_np, rtol=1e-4, atol=1e-4)


def test_a_fixed_binding_refuses_new_params_and_a_pipeline_stage_takes_them(rng):
    x_np = rng.standard_normal(100).astype(np.float32)
    x = wgc.from_numpy(x_np)
    d = bind(get("scale"), [x], wgc.empty(100), {"scalar": 2.0}, fixed=True)
    with pytest.raises(ArgumentError, match="fixed"):
        d.set_params(scalar=3.0)
    d.set_params(scalar=2.0)  # the same params: nothing changes
    p = wgc.pipeline()
    out = wgc.empty(100)
    p.add(kernel="scale", inputs=[x], output=out, params={"scalar": 2.0})
    p.set_params(0, scalar=3.0)
    p.run()
    np.testing.assert_allclose(out.to_numpy(), 3.0 * x_np, rtol=1e-6)


def _calls(fn, n: int = 20) -> float:
    fn()
    wgc.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    wgc.synchronize()
    return pstats.Stats(prof).total_calls / n


# Python calls (cProfile) of one queued matmul on lavapipe: 40 and 810 now, 40 and 1,700
# before the autotune cache was parsed once and a product's tuning problem made once
MAX_CALLS_BOUND_AGAIN = 50  # the same buffers as before: the binding is found
MAX_CALLS_NEW_BINDING = 900  # a new output buffer: checks, key, bind group (and the buffer)


def test_the_python_calls_of_a_queued_matmul_stay_few():
    a = wgc.from_numpy(np.ones((64, 64), np.float32))
    b = wgc.from_numpy(np.ones((64, 64), np.float32))
    out = wgc.empty((64, 64))
    again = _calls(lambda: _lazy.enqueue("matmul", [a, b], out))
    new = _calls(lambda: _lazy.enqueue("matmul", [a, b], wgc.empty((64, 64))))
    assert again <= MAX_CALLS_BOUND_AGAIN, again
    assert new <= MAX_CALLS_NEW_BINDING, new


def test_synchronize_submits_the_queued_ops_in_one_submission(submits):
    a = wgc.from_numpy(np.arange(256, dtype=np.float32))
    wgc.synchronize()
    c = _lazy.enqueue("add", [a, a])
    submits.clear()
    wgc.synchronize()
    assert len(submits) == 1
    np.testing.assert_array_equal(c.to_numpy(), 2 * np.arange(256, dtype=np.float32))


def test_params_pack_as_the_struct_layout_field_by_field():
    """pack_uniform packs scalar params in one call: the same bytes as packing each field at
    its natural alignment (numpy's structured layout as the reference), and a value that
    does not fit is refused by name."""
    from wgcompute.kernels.core.base import pack_uniform

    types = {"f32": np.float32, "i32": np.int32, "u32": np.uint32, "f16": np.float16,
             "f64": np.float64, "i64": np.int64, "u64": np.uint64}
    values = {"f32": 1.5, "i32": -3, "u32": 7, "f16": 0.5, "f64": 2.25, "i64": -9, "u64": 11}
    rng = np.random.default_rng(3)
    for _ in range(300):
        fields = tuple((f"x{i}", str(t)) for i, t in enumerate(
            rng.choice(list(types), size=rng.integers(1, 9))))
        layout = np.dtype({"names": [n for n, _ in fields],
                           "formats": [types[t] for _, t in fields]}, align=True)
        record = np.zeros((), layout)
        for n, t in fields:
            record[n] = values[t]
        want = record.tobytes() + b"\0" * ((-layout.itemsize) % 16)
        assert pack_uniform(fields, {n: values[t] for n, t in fields}) == want, fields
    with pytest.raises(ArgumentError, match="'n'"):
        pack_uniform((("m", "u32"), ("n", "u32")), {"m": 1, "n": -1})


@pytest.fixture
def fused():
    from wgcompute import _fusion_auto

    was = _fusion_auto.enabled()
    _fusion_auto.set_enabled(True)
    yield
    _fusion_auto.set_enabled(was)


def test_a_held_transpose_that_a_matmul_reads_in_place_is_never_bound(fused, rng):
    """A chain x = x @ w, x = x.T: the products read each transpose's source in place, so
    the copies are never dispatched and bind nothing (their memory differs on every run,
    so each binding would be new)."""
    dev = wgc.current_device()
    xn = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    wn = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    x, w = xp.asarray(xn), xp.asarray(wn)

    def chain():
        y = x
        for _ in range(20):
            y = xp.matmul(y, w)  # (the held copy dies here: its memory is pooled again)
            y = xp.matrix_transpose(y)
        return y

    for _ in range(2):
        chain()
        wgc.synchronize()
    made = dev.stats["bind_groups_created"]
    y = chain()
    wgc.synchronize()
    # (at most: the last copy, whose result is alive, and a product or two on new memory)
    assert dev.stats["bind_groups_created"] - made <= 4
    want = xn.astype(np.float64)
    for _ in range(20):
        want = (want @ wn).T
    np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-3, atol=1e-4)


def test_a_held_copy_checks_its_arguments_at_the_call(fused, rng):
    """A copy that is held (not bound until it is queued) still refuses bad arguments when it
    is asked for, naming them, as a bound one does."""
    src = wgc.from_numpy(rng.standard_normal((4, 6)).astype(np.float32))
    with pytest.raises(wgc.ShapeError, match=r"strided_copy: out \(6, 4\).*reaches elements"):
        _lazy.enqueue("strided_copy", [src], wgc.empty((6, 4)),
                      {"strides": (1, 7), "offset": 0})
    with pytest.raises(ArgumentError, match="strides"):
        _lazy.enqueue("strided_copy", [src], wgc.empty((6, 4)), {"strides": "x", "offset": 0})
    for shape in [(4, 7), (4, 7)]:  # a new signature (checked in full), then a known one
        gone = wgc.from_numpy(rng.standard_normal(shape).astype(np.float32))
        gone.free()
        with pytest.raises(wgc.BufferFreedError, match="transpose: input 'a'.*was freed"):
            _lazy.enqueue("transpose", [gone], wgc.empty(shape[::-1]))
        _lazy.enqueue("transpose", [wgc.empty(shape)], wgc.empty(shape[::-1]))
    # a composed copy (a copy of a held copy's result) too
    t = _lazy.enqueue("strided_copy", [src], wgc.empty((6, 4)), {"strides": (1, 6), "offset": 0})
    with pytest.raises(wgc.ShapeError, match="transpose: out is"):
        _lazy.enqueue("transpose", [t], wgc.empty((5, 6)))
    tt = _lazy.enqueue("transpose", [t], wgc.empty((4, 6)))
    np.testing.assert_array_equal(tt.to_numpy(), src.to_numpy())
    np.testing.assert_array_equal(t.to_numpy(), src.to_numpy().T)


def test_a_matmul_binding_parses_its_tile_config_once_per_name(monkeypatch):
    """New bindings of a tuned product make no new TileConfig (its name parsed once)."""
    from wgcompute.kernels.matmul.configs import TileConfig

    a = wgc.from_numpy(np.ones((48, 40), np.float32))
    b = wgc.from_numpy(np.ones((40, 24), np.float32))
    _lazy.enqueue("matmul", [a, b], wgc.empty((48, 24)))
    wgc.synchronize()
    made = []
    real = TileConfig.__post_init__
    monkeypatch.setattr(TileConfig, "__post_init__", lambda self: made.append(1) or real(self))
    outs = [_lazy.enqueue("matmul", [a, b], wgc.empty((48, 24))) for _ in range(5)]
    monkeypatch.undo()
    assert not made
    for out in outs:
        np.testing.assert_allclose(out.to_numpy(), np.full((48, 24), 40.0), rtol=1e-6)


def test_fused_kernels_on_new_buffers_share_a_params_buffer(fused, rng):
    """Automatically fused elementwise kernels bound to new buffers (their params the same
    bytes) share the device's read-only params buffer, as queued single kernels do."""
    dev = wgc.current_device()
    xn = rng.standard_normal((40, 24)).astype(np.float32)
    wn = rng.standard_normal((40, 24)).astype(np.float32)
    x, w = xp.asarray(xn), xp.asarray(wn)
    kept = [(x + w) * 2.0 - w]  # the first binding of this program makes one
    wgc.synchronize()
    made = dev.stats["uniform_buffers_created"]
    for _ in range(5):  # the results kept alive: new memory, new bindings, the same params
        kept.append((x + w) * 2.0 - w)
        wgc.synchronize()
    assert dev.stats["uniform_buffers_created"] == made
    want = (xn + wn) * np.float32(2.0) - wn
    for y in kept:
        np.testing.assert_array_equal(y.to_numpy(), want)


def _labels(dev) -> list[str]:
    return [op.label for op in dev.lazy.ops] if dev.lazy is not None else []


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_a_held_permutation_scaled_then_multiplied_is_never_copied(fused, held_copies, rng, dt):
    """Attention's scores: q's heads permuted, scaled, times k's permuted view. The scale
    reads q through the permutation's strides (no copy) and the product reads k's view in
    place; the results equal numpy's."""
    if dt == np.float64 and not wgc.current_device().has("shader-f64"):
        pytest.skip("the adapter has no shader-f64")
    qn = rng.standard_normal((6, 4, 8)).astype(dt)  # (sequence, heads, head size)
    kn = rng.standard_normal((6, 4, 8)).astype(dt)
    q, k = xp.asarray(qn), xp.asarray(kn)
    dev = wgc.current_device()
    wgc.synchronize()
    scaled = xp.permute_dims(q, (1, 0, 2)) * 0.125
    s = scaled @ xp.permute_dims(k, (1, 2, 0))
    labels = _labels(dev)
    assert not [x for x in labels if "copy" in x or "transpose" in x], labels
    assert labels[-1] == "matmul", labels
    want_scaled = np.transpose(qn, (1, 0, 2)) * np.asarray(0.125, dt)
    np.testing.assert_array_equal(scaled.to_numpy(), want_scaled)
    want = want_scaled.astype(np.float64) @ np.transpose(kn, (1, 2, 0)).astype(np.float64)
    tol = 1e-5 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(s.to_numpy(), want, rtol=tol, atol=tol)


def test_a_held_permutation_read_by_elementwise_ops_and_later_as_itself(fused, rng):
    """The permuted buffer itself read after an elementwise op read it through its view:
    the copy is made then, from the source as it was (a write to the source queues the held
    work first)."""
    an = rng.standard_normal((3, 5, 4)).astype(np.float32)
    bn = rng.standard_normal((5, 3, 4)).astype(np.float32)
    a, b = xp.asarray(an), xp.asarray(bn)
    p = xp.permute_dims(a, (1, 0, 2))
    c = p + b
    d = xp.exp(p) * 2.0
    a += 1.0  # the source written: what reads it is queued first
    np.testing.assert_array_equal(c.to_numpy(), np.transpose(an, (1, 0, 2)) + bn)
    np.testing.assert_allclose(d.to_numpy(), np.exp(np.transpose(an, (1, 0, 2))) * 2.0,
                               rtol=1e-6)
    np.testing.assert_array_equal(p.to_numpy(), np.transpose(an, (1, 0, 2)))
    np.testing.assert_array_equal(a.to_numpy(), an + 1.0)


_AUDIT_PROBE = """
import collections, json, sys
import numpy as np
import wgcompute as wgc
a = wgc.from_numpy(np.arange(64 * 64, dtype=np.float32).reshape(64, 64))
q = wgc.from_numpy(np.eye(64, dtype=np.float32))
b = wgc.from_numpy(np.ones(64 * 64, np.float32))
def work():
    x, v = a, b
    for _ in range(10):
        x = (x @ q).T
        v = (v + b).relu()
    return x, v
for _ in range(3):
    x, v = work()
    x.to_numpy(); v.to_numpy()
events, on = collections.Counter(), [False]
sys.addaudithook(lambda event, args: on[0] and events.update([event]))
on[0] = True
x, v = work()
on[0] = False
x.to_numpy(); v.to_numpy()
print(json.dumps(events))
"""


def test_queued_operators_raise_no_audit_event_per_frame(tmp_path):
    """A queued operator of a script raises at most one audit event (sys._getframe, finding
    the user's line): reading a frame's f_code and calling id() are audited, and an audit
    hook (filelock installs one on Python 3.12) ran at every frame of every queued op. In a
    fresh process: a hook cannot be removed once added. (Code without a module file, as
    ``python -c`` or a notebook's, names its line through f_code: one event more.)"""
    script = tmp_path / "probe.py"
    script.write_text(_AUDIT_PROBE)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    events = json.loads(out.strip().splitlines()[-1])
    ops = 40  # 10 products, 10 transposes, 10 adds, 10 relus
    assert set(events) <= {"sys._getframe"}, events
    assert events.get("sys._getframe", 0) <= ops, events
