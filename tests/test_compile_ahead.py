"""Pipelines compile once per device and program, and different programs compile side by side:
a model's first call compiles the distinct pipelines of its plan on several threads (wgpu-native
releases the GIL while naga and the driver compile), with the same results as one by one."""

import gc
import threading
import time

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.kernels.core import base

SOURCE = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < arrayLength(&out)) { out[g.x] = x[g.x] * SCALE; }
}
"""


class Probe(base.Kernel):
    """A kernel whose render() calls ``hook`` first: what the tests time compiles with."""

    name = "compile_probe"
    inputs = ("x",)

    def __init__(self, hook, name="compile_probe"):
        self.hook = hook
        self.name = name
        self.renders = []
        self.scale = "1.0"

    def key(self, inputs, output, params):
        return _key(self.scale, self.name)

    def launches(self, inputs, output, params, device):
        return [base.Launch(((output.size + 63) // 64, 1, 1), {})]

    def render(self, key):
        self.renders.append(key)
        self.hook(key)
        return SOURCE.replace("SCALE", key.constants[0][1]), ()


def _key(scale: str, name="compile_probe") -> base.PipelineKey:
    return base.PipelineKey(name, ("f32",), (("scale", scale),))


def test_different_programs_compile_at_the_same_time():
    """Two threads compiling two programs are both inside the compile at once: the device's
    cache lock is not held while a program compiles."""
    dev = wgc.default_device()
    both = threading.Barrier(2, timeout=20)
    k = Probe(lambda key: both.wait(), name=f"compile_probe_{time.monotonic_ns()}")
    got, errors = {}, []

    def compile_one(scale):
        try:
            got[scale] = k.compiled(_key(scale, k.name), dev)
        except Exception as e:  # a broken barrier: the other compile waited for this one
            errors.append(e)

    threads = [threading.Thread(target=compile_one, args=(s,)) for s in ("2.0", "3.0")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert sorted(got) == ["2.0", "3.0"] and got["2.0"].pipeline is not got["3.0"].pipeline


def test_one_program_compiles_once_when_many_threads_ask():
    dev = wgc.default_device()
    k = Probe(lambda key: time.sleep(0.2), name=f"compile_probe_{time.monotonic_ns()}")
    k.scale = "4.0"
    before = dev.stats["pipelines_created"]
    got = []
    threads = [threading.Thread(target=lambda: got.append(k.compiled(_key("4.0", k.name), dev)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(got) == 4 and all(c is got[0] for c in got)
    assert len(k.renders) == 1 and dev.stats["pipelines_created"] - before == 1
    x = wgc.from_numpy(np.arange(5, dtype=np.float32))
    assert wgc.run_kernel(k, [x], wgc.empty((5,), "f32")).to_numpy().tolist() == \
        [0.0, 4.0, 8.0, 12.0, 16.0]


def test_a_failed_compile_is_not_cached_and_raises_again():
    dev = wgc.default_device()
    fail = [True]

    def hook(key):
        if fail[0]:
            raise wgc.ShapeError("compile_probe: refused on purpose")

    k = Probe(hook, name=f"compile_probe_{time.monotonic_ns()}")
    with pytest.raises(wgc.ShapeError, match="on purpose"):
        k.compiled(_key("5.0", k.name), dev)
    fail[0] = False
    assert k.compiled(_key("5.0", k.name), dev) is k.compiled(_key("5.0", k.name), dev)
    assert len(k.renders) == 2


def _cnn(seed: int, c_in: int = 3):
    """A ~20-convolution network of many distinct layer shapes (each its own program):
    widths change every block, strides 1 and 2, 3x3 and 1x1 kernels, ReLU between."""
    pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits, prev, c = [], [], "x", c_in
    widths = [5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26]
    for i, w in enumerate(widths):
        k = 3 if i % 3 != 2 else 1
        stride = 2 if i in (3, 9) else 1
        wt = (rng.standard_normal((w, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
        inits += [numpy_helper.from_array(wt, f"w{i}"),
                  numpy_helper.from_array(rng.standard_normal(w).astype(np.float32) * 0.1,
                                          f"b{i}")]
        nodes.append(helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"],
                                      pads=[k // 2] * 4, strides=[stride, stride]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        prev, c = f"r{i}", w
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c_in, 20, 20])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _first_call(model, x, dev, monkeypatch):
    """The model's first call on ``dev``: its output, the programs compiled and the threads
    that compiled them."""
    threads, keys = set(), []
    compile_fn = base.Kernel._compile

    def recorded(self, key, device):
        if device is dev:
            threads.add(threading.get_ident())
            keys.append(key)
        return compile_fn(self, key, device)

    monkeypatch.setattr(base.Kernel, "_compile", recorded)
    before = dev.stats["pipelines_created"]
    with wgc.use_device(dev):
        y = model(x)
    monkeypatch.setattr(base.Kernel, "_compile", compile_fn)
    assert dev.stats["pipelines_created"] - before == len(keys)
    return y, keys, threads


@pytest.mark.needs("several-devices")
def test_a_models_first_call_compiles_its_programs_in_parallel_once_each(monkeypatch):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime (pip install 'wgcompute[ml]')")
    from wgcompute.kernels.core import warm

    several = warm.THREADS > 1
    proto = _cnn(seed=3, c_in=3)
    data = proto.SerializeToString()
    x = np.random.default_rng(1).standard_normal((1, 3, 20, 20)).astype(np.float32)
    (want,) = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    devices = []
    index = next(a.index for a in wgc.devices() if a.name == wgc.default_device().name
                 and a.backend == wgc.default_device().backend)
    try:
        for _ in range(2):
            devices.append(wgc.device(index, new=True))
        parallel, keys, threads = _first_call(wgc.ml.load_onnx(data), x, devices[0],
                                              monkeypatch)
        monkeypatch.setattr(warm, "THREADS", 1)  # one by one, as each step binds
        serial, serial_keys, serial_threads = _first_call(wgc.ml.load_onnx(data), x,
                                                          devices[1], monkeypatch)
    finally:
        for d in devices:
            d.close()
    assert len(keys) == len(set(keys)) >= 8, "each program compiles once"
    assert set(keys) == set(serial_keys)
    assert len(serial_threads) == 1
    if several:
        assert len(threads) > 1, "the first call compiled on one thread"
    np.testing.assert_array_equal(parallel, serial)
    assert float(np.abs(parallel - want).max() / np.abs(want).max()) < 1e-4


def test_template_expressions_parse_on_several_threads_at_once():
    """Templates render on the compiling threads. CPython 3.11's ast.parse fails on two threads
    at once when a garbage collection runs a finalizer that lets another thread in (as wgpu
    objects' finalizers do): the template parser takes its expressions one at a time."""
    from wgcompute.kernels.core import template

    class Cycle:
        def __init__(self):
            self.me = self

        def __del__(self):
            time.sleep(0)  # lets another thread run, as a released wgpu object's finalizer does

    errors = []

    def parse_many(t):
        for i in range(500):
            for _ in range(20):
                Cycle()
            try:
                template._parse(f"((a{t}_{i} + b) * (c if d > {i} else e)) // f(g, [h, {i}])",
                                "test")
            except Exception as e:
                errors.append(e)
                return

    threshold = gc.get_threshold()
    gc.set_threshold(50)
    try:
        threads = [threading.Thread(target=parse_many, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        gc.set_threshold(*threshold)
        template._parse.cache_clear()
    assert not errors, errors[0]
