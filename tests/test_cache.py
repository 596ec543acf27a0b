"""The caches: a second identical run compiles no pipeline and creates no bind group or
uniform buffer; what differs (dtype, buffers, params) creates only what it must."""

import dataclasses

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.kernels.core import base


def counts():
    return wgc.kernels_stats()


def delta(before):
    now = wgc.kernels_stats()
    return {k: now[k] - v for k, v in before.items()}


NONE = {"pipelines_created": 0, "bind_groups_created": 0, "uniform_buffers_created": 0,
        "buffers_created": 0}


def test_second_identical_run_creates_nothing():
    a = wgc.from_numpy(np.arange(1000, dtype=np.float32))
    b = wgc.from_numpy(np.ones(1000, np.float32))
    out = wgc.empty((1000,), "f32")
    wgc.add(a, b, out)  # may compile (first use in this process) and binds
    wgc.synchronize()  # (queued: compiled and bound when the queue runs)
    before = counts()
    n_cached = base.pipeline_cache_size(wgc.current_device())
    for _ in range(3):
        wgc.add(a, b, out)
        wgc.synchronize()
    assert delta(before) == NONE
    assert base.pipeline_cache_size(wgc.current_device()) == n_cached
    np.testing.assert_array_equal(out.to_numpy(), np.arange(1000, dtype=np.float32) + 1)


def test_new_buffers_bind_again_but_compile_nothing():
    a, b = wgc.buffer([1.0, 2.0]), wgc.buffer([3.0, 4.0])
    first = wgc.empty((2,))  # (held: a result nobody can read is never computed)
    wgc.multiply(a, b, first)
    wgc.synchronize()  # (queued: compiled and bound when the queue runs)
    before = counts()
    c, d, out = wgc.buffer([5.0]), wgc.buffer([6.0]), wgc.empty((1,))
    wgc.multiply(c, d, out)
    wgc.synchronize()
    got = delta(before)
    assert got["pipelines_created"] == 0
    assert got["bind_groups_created"] == 1
    assert out.tolist() == [30.0]


def test_each_dtype_compiles_once():
    name = "cache_probe_scale_t"
    src = """
${ENABLE}
struct Params { n: u32, k: ${T} }
@group(0) @binding(0) var<storage, read> a: array<${T}>;
@group(0) @binding(1) var<storage, read_write> out: array<${T}>;
@group(0) @binding(2) var<uniform> p: Params;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (i < p.n) { out[i] = a[i] * p.k; }
}
"""
    before = counts()
    wgc.register_kernel(name, src, bindings=[("a", "read"), ("out", "read_write"),
                                             ("p", "uniform")],
                        params={"n": "u32", "k": "T"}, dtypes=("f32", "s32"), replace=True)
    assert delta(before)["pipelines_created"] == 1  # compiled at registration, for f32
    f = wgc.buffer([1.0, 2.0])
    s = wgc.buffer([1, 2], dtype="s32")
    before = counts()
    assert wgc.run_kernel(name, [f], None, {"k": 3.0}).tolist() == [3.0, 6.0]
    assert delta(before)["pipelines_created"] == 0
    assert wgc.run_kernel(name, [s], None, {"k": -2}).tolist() == [-2, -4]
    assert delta(before)["pipelines_created"] == 1  # s32 is a new pipeline key
    assert wgc.run_kernel(name, [s], None, {"k": 5}).tolist() == [5, 10]
    assert delta(before)["pipelines_created"] == 1


def test_params_change_the_uniform_not_the_pipeline():
    x = wgc.buffer([-2.0, 4.0])
    out = wgc.empty((2,))
    wgc.relu(x, out, slope=0.5)
    before = counts()
    assert wgc.relu(x, out, slope=0.25).tolist() == [-0.5, 4.0]
    assert delta(before)["pipelines_created"] == 0
    before = counts()
    assert wgc.relu(x, out, slope=0.5).tolist() == [-1.0, 4.0]  # both bindings cached now
    assert wgc.relu(x, out, slope=0.25).tolist() == [-0.5, 4.0]
    assert delta(before) == NONE


def test_pipeline_key_is_a_frozen_dataclass():
    key = base.PipelineKey("elementwise_add", ("f32",), ())
    assert dataclasses.is_dataclass(key)
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.kernel = "x"
    assert key == base.PipelineKey("elementwise_add", ("f32",), ())
    assert hash(key) == hash(base.PipelineKey("elementwise_add", ("f32",), ()))
    wgc.run_kernel("elementwise_add", [wgc.buffer([1.0]), wgc.buffer([2.0])])
    pipelines = wgc.current_device().pipelines
    cached = [k for k in pipelines if k.kernel == "elementwise_add" and "f32" in k.dtypes]
    assert cached, "the f32 add pipeline is not in the cache"
    for k in cached:
        assert dataclasses.is_dataclass(k) and k.__dataclass_params__.frozen
        assert pipelines[k].pipeline is not None and pipelines[k].layout is not None


def test_freed_buffer_is_not_served_from_the_bind_cache():
    a, b, out = wgc.buffer([1.0]), wgc.buffer([2.0]), wgc.empty((1,))
    wgc.add(a, b, out)
    b.free()
    with pytest.raises(wgc.BufferFreedError):
        wgc.add(a, b, out)
