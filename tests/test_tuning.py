"""The one tuner: a kernel's key never times anything (it only looks up a choice); binding tunes
first, for matmul, gemm and conv2d alike; tune() keeps the fastest, choice() serves it."""

import json

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute import autotune
from wgcompute.dtypes import DTYPES
from wgcompute.kernels import bind, get
from wgcompute.kernels.core import tuning
from wgcompute.kernels.core.tuning import TuneProblem


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh, empty tuning cache (file and every open device's choices)."""
    monkeypatch.setenv("WGCOMPUTE_CACHE_DIR", str(tmp_path))
    autotune.autotune_reset()
    yield tmp_path
    autotune.autotune_reset()


@pytest.fixture
def submits(monkeypatch):
    """Every submission to the current device's queue, counted."""
    submitter = wgc.current_device().submitter
    seen = []
    real = type(submitter).submit

    def counting(self, *args, **kwargs):
        seen.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(submitter), "submit", counting)
    return seen


# kernel: (input shapes, output shape, params); each has a problem class with several candidates
CASES = {
    "matmul": ([(100, 100), (100, 100)], (100, 100), {}),
    "gemm": ([(8, 16), (16, 8), (8,)], (8, 8), {}),
    "conv2d": ([(1, 96, 7, 7), (40, 96, 1, 1), (40,)], (1, 40, 7, 7), {"activation": "relu"}),
}


@pytest.mark.parametrize("name", CASES)
def test_key_never_times_and_binding_tunes_first(name, cache, submits, monkeypatch, rng):
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
    assert not (cache / "autotune.json").exists()
    [problem] = kernel.tune_problems(ins, out, resolved)
    assert len(problem.candidates) > 1 and before == problem.fallback
    bind(kernel, ins, out, params)
    assert submits  # the candidates were timed on the GPU
    chosen = json.loads((cache / "autotune.json").read_text())[
        autotune.adapter_key(wgc.current_device())][problem.key]
    assert chosen in problem.candidates
    submits.clear()
    assert dict(kernel.key(ins, out, resolved).constants)["config"] == chosen
    assert submits == []


def test_tune_keeps_the_fastest_and_choice_only_looks_up(cache, monkeypatch):
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
    stored = json.loads((cache / "autotune.json").read_text())
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
    assert not (cache / "autotune.json").exists()
    assert tuning.choice(dev, problem) == "a"
