"""State an upper layer keeps per device is registered with the Device (Device.state_for):
made once per device, closed with it, forgotten when it is lost; never a cache keyed by
id(device), which a device opened after another was closed can reuse. A Model's weights and
bound runs, a stream map's pipeline clones."""

import ast
import contextlib
import gc
import os
import weakref

import numpy as np
import pytest

import wgcompute as wgc

onnx = pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime (pip install 'wgcompute[ml]')")

from test_ml_models import reference, rel_err, tiny_net  # noqa: E402

PACKAGE = os.path.join(os.path.dirname(wgc.__file__))


def _second_device() -> wgc.Device:
    dev = wgc.current_device()
    index = next(a.index for a in wgc.devices() if a.name == dev.name and a.backend == dev.backend)
    return wgc.device(index, new=True)


class _Thing:
    def __init__(self, device):
        self.device = device
        self.closed = False

    def close(self):
        self.closed = True


@pytest.mark.needs("several-devices")
def test_state_for_is_made_once_and_closed_with_the_device():
    dev = _second_device()
    owner = type("Owner", (), {})()
    made = []

    def make(d):
        made.append(d)
        return _Thing(d)

    s = dev.state_for(owner, make)
    assert dev.state_for(owner, make) is s and made == [dev] and s.device is dev
    dev.close()
    assert s.closed
    with pytest.raises(wgc.DeviceError, match="closed"):
        dev.state_for(owner, make)


@pytest.mark.needs("several-devices")
def test_state_for_goes_with_its_owner_and_drop_state_hands_it_back():
    dev = _second_device()
    try:
        owner = type("Owner", (), {})()
        s = dev.state_for(owner, _Thing)
        assert dev.drop_state(owner) is s and not s.closed
        assert dev.drop_state(owner) is None
        dev.state_for(owner, _Thing)
        del owner
        gc.collect()
        assert not dev._states
    finally:
        dev.close()


@pytest.mark.needs("several-devices")
def test_a_lost_device_forgets_the_states():
    dev = _second_device()
    owner = type("Owner", (), {})()
    dev.state_for(owner, _Thing)
    dev.mark_lost("test")
    assert not dev._states
    with pytest.raises(wgc.DeviceLostError):
        dev.state_for(owner, _Thing)
    dev.close()


@pytest.mark.needs("several-devices")
def test_a_model_on_two_devices_and_one_closed():
    """Right on both devices; closing one releases that device's weights and bound runs (its
    buffers) while the model still runs on the other."""
    data = tiny_net()
    model = wgc.ml.load_onnx(data)
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    (want,) = reference(data, {"x": x})
    other = _second_device()
    home = wgc.current_device()
    assert rel_err(model(x), want) < 1e-5
    with wgc.use_device(other):
        assert rel_err(model(x), want) < 1e-5
        out = model(wgc.from_numpy(x))
        assert out.device is other and rel_err(out.to_numpy(), want) < 1e-5
        out.free()
    # the model's weights (4 of them) and its bound run's input and output on the other device
    assert other.live_buffers() >= 6
    state = other._states[weakref.ref(model)]
    assert len(state.weights) == 4
    other.close()
    assert other.live_buffers() == 0 and not state.weights and not state.exes
    assert rel_err(model(x), want) < 1e-5
    assert home.state_for(model, None) is not None
    # free() releases the model's state on every device it ran on
    before = home.live_buffers()
    model.free()
    assert home.live_buffers() <= before - 6
    assert weakref.ref(model) not in home._states


@pytest.mark.slow  # eight devices opened and closed
@pytest.mark.needs("several-devices")
def test_a_new_device_never_sees_a_closed_ones_weights():
    """A closed device is not kept alive by a model that ran on it, so a device opened after
    it may get its id(): the model uploads its weights to the new one, it never reuses the
    closed one's (freed) buffers."""
    data = tiny_net()
    model = wgc.ml.load_onnx(data)
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    (want,) = reference(data, {"x": x})
    seen, reused = set(), 0
    for _ in range(8):  # a new device often lands at the address of the one collected
        dev = _second_device()
        reused += id(dev) in seen
        seen.add(id(dev))
        with dev:
            assert rel_err(model(x), want) < 1e-5
            out = model(wgc.from_numpy(x))
            assert rel_err(out.to_numpy(), want) < 1e-5
        dev.close()
        gone = weakref.ref(dev)
        del dev, out
        gc.collect()
        assert gone() is None, "a closed device is kept alive"
    model.free()
    print(f"{reused} of 8 devices reused a closed one's id")


@pytest.mark.slow  # eight devices opened and closed
@pytest.mark.needs("several-devices")
def test_a_new_device_never_sees_a_closed_ones_stream_map_pipeline():
    """The same for a stream map's pipeline clones: one per device, closed with it."""
    from wgcompute.stream_map import _Work

    x = wgc.empty(8, "f32")
    p = wgc.pipeline("map")
    p.add(kernel="relu", inputs=[x])
    work = _Work(p, None, None, None)
    assert work.pipeline_on(x.device) is p
    for _ in range(8):
        dev = _second_device()
        clone = work.pipeline_on(dev)
        assert clone is not p and clone.device is dev and work.pipeline_on(dev) is clone
        dev.close()
        gone = weakref.ref(dev)
        del dev, clone
        gc.collect()
        assert gone() is None, "a closed device is kept alive"


def _sources(*parts):
    root = os.path.join(PACKAGE, *parts)
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(dirpath, f)


def _id_of_a_device(tree) -> list[str]:
    """Calls id(x) where x names a device (dev, device, x.device, ...)."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "id" and node.args):
            text = ast.unparse(node.args[0])
            if "dev" in text.split(".")[-1]:
                found.append(f"line {node.lineno}: id({text})")
    return found


def test_no_cache_is_keyed_by_id_of_a_device():
    """runtime.py keeps its table of open devices by id (entries leave it on close); no
    other module keys anything by a device's id."""
    bad = {}
    for path in _sources():
        if os.path.basename(path) == "runtime.py":
            continue
        with open(path, encoding="utf-8") as f:
            hits = _id_of_a_device(ast.parse(f.read()))
        if hits:
            bad[os.path.relpath(path, PACKAGE)] = hits
    assert not bad, bad


def test_the_id_finder_finds_one():
    assert _id_of_a_device(ast.parse("k = id(self.device)\nj = id(dev)\nid(b)")) == [
        "line 1: id(self.device)", "line 2: id(dev)"]


def test_binding_knows_no_model():
    """kernels/core binds what a kernel's passes() return; it never reaches into a model."""
    for path in _sources("kernels", "core"):
        with open(path, encoding="utf-8") as f:
            text = f.read().lower()
        assert "model" not in text, os.path.relpath(path, PACKAGE)


@pytest.mark.needs("several-devices")
def test_a_model_that_ran_is_collected_with_its_state():
    """The device holds a model's state, not the model: a model dropped by its user goes,
    and its weights and bound runs with it."""
    dev = _second_device()
    with contextlib.closing(dev), dev:
        model = wgc.ml.load_onnx(tiny_net())
        model(np.zeros((1, 3, 8, 8), np.float32))
        assert dev._states and dev.live_buffers() >= 6
        gone = weakref.ref(model)
        del model
        gc.collect()
        assert gone() is None and not dev._states and dev.live_buffers() == 0
        # run on Buffers too (the device caches that bound run)
        model = wgc.ml.load_onnx(tiny_net())
        model(np.zeros((1, 3, 8, 8), np.float32))
        model(wgc.from_numpy(np.zeros((1, 3, 8, 8), np.float32))).free()
        gone = weakref.ref(model)
        del model
        gc.collect()
        assert gone() is None and not dev._states
