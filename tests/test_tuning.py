"""The one tuner: a kernel's key never times anything (it only looks up a choice); binding tunes
first, for matmul, gemm and conv2d alike; tune() keeps the fastest, choice() serves it."""

import importlib
import json
import threading

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute import autotune
from wgcompute.dtypes import DTYPES
from wgcompute.kernels import bind, get
from wgcompute.kernels.core import tuning
from wgcompute.kernels.core.tuning import TuneProblem

# kernel: (input shapes, output shape, params); each has a problem class with several candidates
CASES = {
    "matmul": ([(100, 100), (100, 100)], (100, 100), {}),
    "gemm": ([(8, 16), (16, 8), (8,)], (8, 8), {}),
    "conv2d": ([(1, 96, 7, 7), (40, 96, 1, 1), (40,)], (1, 40, 7, 7), {"activation": "relu"}),
}


@pytest.mark.parametrize("name", CASES)
def test_key_never_times_and_binding_tunes_first(name, tuning_cache, submits, monkeypatch, rng):
    """Tuning forced on (lavapipe skips it by default), on an empty cache: key() submits
    nothing and writes no choice (the default); binding times the candidates, remembers the
    winner, and key() then gives the tuned choice."""
    monkeypatch.setenv("WGCOMPUTE_AUTOTUNE", "1")
    kernel = get(name)
    in_shapes, out_shape, params = CASES[name]
    ins = [wgc.from_numpy(rng.uniform(-1, 1, s).astype(np.float32)) for s in in_shapes]
    out = wgc.empty(out_shape, "f32")
    resolved = kernel.resolve_params(params, DTYPES["f32"])
    submits.clear()  # the uploads
    before = dict(kernel.key(ins, out, resolved).constants)["config"]
    assert submits == []
    assert not (tuning_cache / "autotune.json").exists()
    [problem] = kernel.tune_problems(ins, out, resolved)
    assert len(problem.candidates) > 1 and before == problem.fallback
    bind(kernel, ins, out, params)
    assert submits  # the candidates were timed on the GPU
    chosen = json.loads((tuning_cache / "autotune.json").read_text())[
        autotune.adapter_key(wgc.current_device())][problem.key]
    assert chosen in problem.candidates
    submits.clear()
    assert dict(kernel.key(ins, out, resolved).constants)["config"] == chosen
    assert submits == []


def test_tune_keeps_the_fastest_and_choice_only_looks_up(tuning_cache, monkeypatch):
    dev = wgc.current_device()
    timings = {"a": 3.0, "b": 1.0, "c": 2.0}
    calls = []

    def measure(name):
        calls.append(name)
        if name == "c":
            raise RuntimeError("this config does not compile here")
        return timings[name]

    problem = TuneProblem("demo", "demo f32 large", ("a", "b", "c"), "a", measure)
    monkeypatch.setenv("WGCOMPUTE_AUTOTUNE", "0")
    tuning.tune(dev, [problem])  # off: nothing measured, the default
    assert calls == [] and tuning.choice(dev, problem) == "a"
    monkeypatch.setenv("WGCOMPUTE_AUTOTUNE", "1")
    assert tuning.choice(dev, problem) == "a" and calls == []  # choice never measures
    tuning.tune(dev, [problem])
    assert sorted(calls) == ["a", "b", "c"]
    assert tuning.choice(dev, problem) == "b"
    stored = json.loads((tuning_cache / "autotune.json").read_text())
    assert stored[autotune.adapter_key(dev)]["demo f32 large"] == "b"
    calls.clear()
    tuning.tune(dev, [problem])
    assert calls == []  # already tuned: served from the cache
    # a remembered choice that is no longer a candidate is tuned again
    fewer = TuneProblem("demo", "demo f32 large", ("a", "c"), "a", measure)
    assert tuning.choice(dev, fewer) == "a"
    tuning.tune(dev, [fewer])
    assert tuning.choice(dev, fewer) == "a" and sorted(calls) == ["a", "c"]
    wgc.autotune_reset()
    assert not (tuning_cache / "autotune.json").exists()
    assert tuning.choice(dev, problem) == "a"


def test_background_tuning_never_waits_and_later_bindings_use_its_choice(tuning_cache, monkeypatch,
                                                                            rng):
    """In the background mode (a GPU's default; forced here on lavapipe) a first matmul binds
    the default configuration without timing anything on the caller; the device's tuning
    thread times the candidates meanwhile; once it is done the choice is remembered, the
    device's autotune generation grew, and a new binding uses the tuned configuration.
    Results are the same either way."""
    monkeypatch.setenv("WGCOMPUTE_AUTOTUNE", "background")
    dev = wgc.current_device()
    kernel = get("matmul")
    a = rng.uniform(-1, 1, (100, 100)).astype(np.float32)
    ins = [wgc.from_numpy(a), wgc.from_numpy(a.T.copy())]
    out = wgc.empty((100, 100), "f32")
    resolved = kernel.resolve_params({}, DTYPES["f32"])
    [problem] = kernel.tune_problems(ins, out, resolved)
    started = threading.Event()
    release = threading.Event()
    mm = importlib.import_module("wgcompute.kernels.matmul.matmul")

    measured = []
    original = mm._measure

    def slow_measure(*args, **kwargs):  # holds the tuning thread until the caller is done
        started.set()
        release.wait(60)
        measured.append(threading.current_thread().name)
        return original(*args, **kwargs)

    monkeypatch.setattr(mm, "_measure", slow_measure)
    generation = dev.autotune_generation
    got = wgc.matmul(ins[0], ins[1], out)  # binds with the default, times nothing here
    np.testing.assert_allclose(got.to_numpy(), a @ a.T, rtol=1e-4, atol=1e-4)
    assert started.wait(60)  # the tuning thread took the problem
    assert autotune.lookup(dev, problem.key) is None  # not remembered yet: the default ran
    assert not wgc.autotune_wait(timeout=0.05)
    release.set()
    assert wgc.autotune_wait(timeout=120)
    assert measured and set(measured) == {"wgcompute-autotune"}
    chosen = autotune.lookup(dev, problem.key)
    assert chosen in problem.candidates
    assert dev.autotune_generation == generation + 1
    assert dict(kernel.key(ins, out, resolved).constants)["config"] == chosen
    again = wgc.matmul(ins[0], ins[1], wgc.empty((100, 100), "f32"))
    np.testing.assert_allclose(again.to_numpy(), a @ a.T, rtol=1e-4, atol=1e-4)


def test_the_autotune_switch_is_checked(monkeypatch):
    monkeypatch.setenv("WGCOMPUTE_AUTOTUNE", "sometimes")
    with pytest.raises(wgc.ArgumentError, match="WGCOMPUTE_AUTOTUNE"):
        autotune.mode(wgc.current_device())
    for flag, want in (("0", "off"), ("1", "now"), ("background", "background")):
        monkeypatch.setenv("WGCOMPUTE_AUTOTUNE", flag)
        assert autotune.mode(wgc.current_device()) == want
    monkeypatch.delenv("WGCOMPUTE_AUTOTUNE")
    assert autotune.mode(wgc.current_device()) == ("background" if wgc.is_gpu() else "off")


def test_a_model_binds_again_after_background_tuning(tuning_cache, monkeypatch, rng):
    """A Model's bound run made before background tuning finished is bound again on the next
    call (its convolutions then use the tuned configurations); the answers stay the same."""
    pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")
    from wgcompute.ml.builders import mobilenet_v2

    monkeypatch.setenv("WGCOMPUTE_AUTOTUNE", "background")
    proto = mobilenet_v2(width=0.25, num_classes=10, size=32)
    model = wgc.ml.load_onnx(proto.SerializeToString())
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    first = model(x)
    assert wgc.autotune_wait(timeout=300)
    dev = wgc.current_device()
    [exe] = dev.state_for(model, lambda d: None).exes.values()
    assert exe.generation < dev.autotune_generation  # bound with the defaults
    second = model(x)
    [fresh] = dev.state_for(model, lambda d: None).exes.values()
    assert fresh is not exe and fresh.generation == dev.autotune_generation
    np.testing.assert_allclose(second, first, rtol=1e-4, atol=1e-5)
