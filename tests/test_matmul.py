"""The tiled matmul against numpy at awkward shapes, every tile configuration that fits the
adapter, the f16 and f64 paths, and the autotuner's on-disk choice.

Tolerances: each entry of a·b may differ from the f64 product by K·eps·(|a|·|b|) (the
classic bound for a dot product of K terms) with eps the accumulator's unit roundoff: 2^-24
for f32 and for f16 inputs (accumulated in f32), 2^-53 for f64; f16 results are also rounded
once to f16 (relative 2^-11)."""

import json

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute import autotune
from wgcompute.device import get_device
from wgcompute.kernels.matmul import CANDIDATES, Matmul, TileConfig, problem_class

EPS = {"f32": 2.0**-24, "f16": 2.0**-24, "f64": 2.0**-53}


def need(dt):
    feature = wgc.DTYPES[dt].feature
    if feature and feature not in wgc.device_info()["features"]:
        pytest.skip(f"adapter lacks {feature} for {dt}")


def check(rng, m, n, k, dt, config=None):
    npd = wgc.DTYPES[dt].numpy
    a = rng.uniform(-1, 1, (m, k)).astype(npd)
    b = rng.uniform(-1, 1, (k, n)).astype(npd)
    out = wgc.empty((m, n), dt)
    params = {"_config": config} if config else None
    wgc.run_kernel("matmul", [wgc.from_numpy(a), wgc.from_numpy(b)], out, params)
    got = out.to_numpy().astype(np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64 @ b64
    bound = max(k, 1) * EPS[dt] * (np.abs(a64) @ np.abs(b64)) * 2
    if dt == "f16":
        bound = bound + np.abs(want) * 2.0**-11 + 2.0**-24
    assert got.shape == (m, n)
    err = np.abs(got - want)
    assert np.all(err <= bound + 1e-300), f"{m}x{n}x{k} {dt}: max err {err.max():.3g}"


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 7), (129, 67, 255), (64, 68, 36),
                                   (2, 300, 9), (0, 4, 3), (3, 4, 0)])
@pytest.mark.parametrize("dt", ["f32", "f16", "f64"])
def test_matmul_awkward_shapes(rng, dt, shape):
    need(dt)
    check(rng, *shape, dt)


def test_matmul_512_cubed_f32(rng):
    check(rng, 512, 512, 512, "f32")


def test_every_fitting_tile_config(rng):
    """Each candidate on a vec4-aligned shape and on a ragged one (scalar loads, guards)."""
    dev = get_device()
    fitting = [c for c in CANDIDATES if c.fits(dev, 4)]
    assert fitting, "no candidate fits this adapter"
    for cfg in fitting:
        check(rng, 130, 136, 40, "f32", cfg)  # K and N multiples of 4: vec4 loads and stores
        check(rng, 67, 45, 33, "f32", cfg)  # neither: scalar, edge-guarded


def test_split_k_configs_on_skinny_shapes(rng):
    """Split-K sums k slices into out by compare-and-swap after zeroing it: slices that end
    inside a BK step, K shorter than one slice, and K = 0 must all give the plain product."""
    splits = [c for c in CANDIDATES if c.split > 1 and c.fits(get_device(), 4)]
    assert splits
    for cfg in splits:
        for m, n, k in [(300, 64, 1000), (77, 5, 3), (9, 8, 0), (64, 64, 129)]:
            check(rng, m, n, k, "f32", cfg)
    with pytest.raises(wgc.ArgumentError, match="needs f32"):
        wgc.run_kernel("matmul", [wgc.empty((4, 4), "f64"), wgc.empty((4, 4), "f64")],
                       wgc.empty((4, 4), "f64"), {"_config": splits[0]})
    assert TileConfig.parse(splits[0].name) == splits[0]


def test_configs_that_do_not_fit_are_refused():
    huge = TileConfig(256, 256, 32, 8, 8)
    assert not huge.fits(get_device(), 4)
    with pytest.raises(wgc.ArgumentError, match="does not fit"):
        wgc.run_kernel("matmul", [wgc.empty((4, 4)), wgc.empty((4, 4))], wgc.empty((4, 4)),
                       {"_config": huge})


def test_shape_and_dtype_errors_name_the_operands():
    with pytest.raises(wgc.ShapeError, match="inner dimensions 4 and 5"):
        wgc.matmul(wgc.empty((3, 4)), wgc.empty((5, 2)))
    with pytest.raises(wgc.ShapeError, match="2-D"):
        wgc.matmul(wgc.empty((3, 4, 1)), wgc.empty((4, 2)))
    with pytest.raises(wgc.DtypeError, match="b is f64"):
        wgc.run_kernel("matmul", [wgc.empty((2, 2)), wgc.empty((2, 2), "f64")],
                       wgc.empty((2, 2)))
    with pytest.raises(wgc.DtypeError, match="not supported"):
        wgc.matmul(wgc.empty((2, 2), "s32"), wgc.empty((2, 2), "s32"))
    with pytest.raises(wgc.ShapeError, match="out is"):
        wgc.matmul(wgc.empty((2, 3)), wgc.empty((3, 4)), wgc.empty((4, 2)))


def test_problem_classes():
    assert problem_class(4096, 4096, 4096) == "large"
    assert problem_class(8192, 64, 8192) == "skinny"
    assert problem_class(100, 100, 100) == "small"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("WGCOMPUTE_CACHE_DIR", str(tmp_path))
    yield tmp_path
    autotune.autotune_reset()


def test_autotune_picks_the_fastest_caches_it_and_resets(cache, monkeypatch):
    monkeypatch.setenv("WGCOMPUTE_AUTOTUNE", "1")
    timings = {"a": 3.0, "b": 1.0, "c": 2.0}
    calls = []

    def measure(name):
        calls.append(name)
        if name == "c":
            raise RuntimeError("this config does not compile here")
        return timings[name]

    assert autotune.choose("demo f32 large", ["a", "b", "c"], "a", measure) == "b"
    assert sorted(calls) == ["a", "b", "c"]
    stored = json.loads((cache / "autotune.json").read_text())
    assert stored[autotune.adapter_key()]["demo f32 large"] == "b"
    calls.clear()
    assert autotune.choose("demo f32 large", ["a", "b", "c"], "a", measure) == "b"
    assert calls == []  # served from the cache
    wgc.autotune_reset()
    assert not (cache / "autotune.json").exists()
    monkeypatch.setenv("WGCOMPUTE_AUTOTUNE", "0")
    assert autotune.choose("demo f32 large", ["a", "b", "c"], "a", measure) == "a"
    assert calls == []  # disabled: the default, nothing measured


def test_autotune_measures_real_matmuls_on_this_adapter(cache, monkeypatch, rng):
    """Forced on (lavapipe skips tuning by default): times every fitting config on the
    "small" class's 256³ problem, keeps the winner, and the matmul uses it correctly."""
    monkeypatch.setenv("WGCOMPUTE_AUTOTUNE", "1")
    cfg = Matmul().config_for(100, 100, 100, "f32")
    assert cfg in CANDIDATES
    stored = json.loads((cache / "autotune.json").read_text())
    assert stored[autotune.adapter_key()]["matmul f32 small"] == cfg.name
    check(rng, 100, 100, 100, "f32")


def test_autotune_default_without_tuning(cache, monkeypatch):
    monkeypatch.setenv("WGCOMPUTE_AUTOTUNE", "0")
    assert Matmul().config_for(4096, 4096, 4096, "f32").name == "128x128x8_8x8"
    assert not (cache / "autotune.json").exists()
