"""The tiled matmul against numpy at awkward shapes, every tile configuration that fits the
adapter (and each tile option), the f16 paths at both precisions, f64, and the autotuner's
on-disk choice.

Tolerances: each entry of a·b may differ from the f64 product by K·eps·(|a|·|b|) (the
classic bound for a dot product of K terms) with eps the accumulator's unit roundoff: 2^-24
for f32 and for f16 inputs at precision "f32" (accumulated in f32), 2^-53 for f64; f16 results
are also rounded once to f16 (relative 2^-11).

f16 at precision "mixed" (the Matmul docstring's bound): against the f64 product of the
f16 inputs, |C − A·B| ≤ (γ(2·BK, 2^-11) + γ(⌈K/BK⌉, 2^-24))·(|A|·|B|) + 2^-11·|A·B|
+ 2K·2^-14, γ(n, u) = n·u/(1 − n·u): two f16 roundings per product within each BK slice
(at most BK = 16), the f32 sum of the slices, the f16 result, and f16 subnormals. For BK = 16
the first term is 1.6 % of |A|·|B|."""

import dataclasses
import json

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute import autotune
from wgcompute.kernels import bind, get
from wgcompute.kernels.matmul.matmul import (
    _DEFAULTS,
    _MIXED_DEFAULTS,
    _MIXED_TUNE_SETS,
    _TUNE_REVISION,
    _TUNE_SETS,
    CANDIDATES,
    F16_DEFAULT_PRECISION,
    MIXED_CANDIDATES,
    Matmul,
    TileConfig,
    problem_class,
)
from wgcompute.runtime import current_device as get_device

EPS = {"f32": 2.0**-24, "f16": 2.0**-24, "f64": 2.0**-53}
ELEM = {"f32": 4, "f64": 8, "mixed": 2}


def need(dt):
    feature = wgc.DTYPES[dt].feature
    if feature and feature not in wgc.device_info()["features"]:
        pytest.skip(f"adapter lacks {feature} for {dt}")


def gamma(n, u):
    return n * u / (1 - n * u)


def check(rng, m, n, k, dt, config=None, precision=None):
    npd = wgc.DTYPES[dt].numpy
    a = rng.uniform(-1, 1, (m, k)).astype(npd)
    b = rng.uniform(-1, 1, (k, n)).astype(npd)
    out = wgc.empty((m, n), dt)
    params = {"_config": config} if config else {}
    if precision:
        params["precision"] = precision
    wgc.run_kernel("matmul", [wgc.from_numpy(a), wgc.from_numpy(b)], out, params)
    got = out.to_numpy().astype(np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64 @ b64
    absprod = np.abs(a64) @ np.abs(b64)
    mixed = dt == "f16" and (precision or F16_DEFAULT_PRECISION) == "mixed"
    if mixed:
        bk = (config or Matmul().config_for(m, n, k, "f16", get_device(), "mixed")).bk
        bound = ((gamma(2 * bk, 2.0**-11) + gamma(-(-k // bk), 2.0**-24)) * absprod
                 + 2.0**-11 * np.abs(want) + 2 * k * 2.0**-14) * 1.01
    else:
        bound = max(k, 1) * EPS[dt] * absprod * 2
        if dt == "f16":
            bound = bound + np.abs(want) * 2.0**-11 + 2.0**-24
    assert got.shape == (m, n)
    err = np.abs(got - want)
    name = config.name if config else "default"
    assert np.all(err <= bound + 1e-300), f"{m}x{n}x{k} {dt} {name}: max err {err.max():.3g}"


def runnable(cfg, elem):
    """``cfg``, or where its workgroup tiles exceed this adapter, the same config with BK
    halved (then one stage) until it fits: every option still runs here."""
    dev = get_device()
    while not cfg.fits(dev, elem):
        if cfg.bk > 8:
            cfg = dataclasses.replace(cfg, bk=cfg.bk // 2)
        elif cfg.stages == 2:
            cfg = dataclasses.replace(cfg, stages=1, early=False)
        else:
            return None
    return cfg


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 7), (129, 67, 255), (64, 68, 36),
                                   (2, 300, 9), (0, 4, 3), (3, 4, 0)])
@pytest.mark.parametrize("dt", ["f32", "f16", "f64"])
def test_matmul_awkward_shapes(rng, dt, shape):
    need(dt)
    check(rng, *shape, dt)


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 7), (129, 67, 255), (64, 68, 36),
                                   (2, 300, 9), (0, 4, 3), (3, 4, 0)])
def test_f16_mixed_awkward_shapes(rng, shape):
    """precision="mixed" with the default (untuned) config, within the mixed bound."""
    need("f16")
    check(rng, *shape, "f16", precision="mixed")


def test_matmul_512_cubed_f32(rng):
    check(rng, 512, 512, 512, "f32")


def test_every_fitting_tile_config(rng):
    """Each candidate at ragged M, N, K (vec4 loads and stores: what big GPU problems run),
    tiny and empty; the loop-form ones also with scalar, edge-guarded loads (K, N odd). The
    unrolled ones take the scalar path in test_tile_options_at_awkward_shapes (each option,
    smaller tiles): on lavapipe every big unrolled shader costs seconds to compile. One whose
    tiles exceed this adapter's workgroup memory runs with a smaller BK."""
    for cfg in CANDIDATES:
        run = runnable(cfg, 4)
        assert run is not None, f"{cfg.name} cannot be shrunk to fit this adapter"
        for shape in [(130, 136, 40), (3, 4, 8), (0, 8, 4)]:
            check(rng, *shape, "f32", run)
        if not cfg.unroll:
            check(rng, 67, 45, 33, "f32", run)


# Each tile option alone and together, small enough for any adapter: unrolled k loop, one
# stage, grouped rasterization (3 rows: the last group of 10 block rows is short), 8×16 and
# 16×8 per invocation, 64-thread workgroups, split-K with all of them, the next tile stored
# early (before the multiply-adds).
KNOBS = [TileConfig(32, 32, 8, 4, 4, unroll=True),
         TileConfig(32, 32, 8, 4, 4, stages=1),
         TileConfig(32, 32, 16, 4, 4, unroll=True, stages=1),
         TileConfig(32, 32, 16, 4, 4, group=3),
         TileConfig(64, 128, 4, 8, 16, unroll=True),
         TileConfig(128, 64, 4, 16, 8, group=2),
         TileConfig(64, 64, 8, 8, 8, unroll=True, stages=1, group=3, split=3),
         TileConfig(64, 64, 16, 4, 4, warp=True),
         TileConfig(128, 64, 8, 8, 8, unroll=True, warp=True, split=2),
         TileConfig(32, 32, 8, 4, 4, unroll=True, early=True, group=3),
         TileConfig(64, 64, 16, 8, 8, early=True, split=2)]
# f16 "mixed" takes BK 8 or 16 and no split-K (lavapipe compiles f16 code slowly: the big
# per-invocation blocks go with one stage here; MIXED_CANDIDATES has them double-buffered)
MIXED_KNOBS = [TileConfig(32, 32, 8, 4, 4, unroll=True),
               TileConfig(32, 32, 8, 4, 4, stages=1),
               TileConfig(32, 32, 16, 4, 4, unroll=True, stages=1),
               TileConfig(32, 32, 16, 4, 4, group=3),
               TileConfig(64, 128, 8, 8, 16, unroll=True, stages=1),
               TileConfig(128, 64, 8, 16, 8, stages=1, group=2),
               TileConfig(64, 64, 8, 8, 8, unroll=True, stages=1, group=3),
               TileConfig(64, 64, 16, 4, 4, stages=1, warp=True),
               TileConfig(32, 32, 16, 4, 4, early=True)]
# tiny, ragged, empty; every (K % 4 == 0, N % 4 == 0) combination: vec4 or scalar loads
KNOB_SHAPES = [(1, 1, 1), (3, 5, 7), (67, 45, 33), (130, 136, 40), (300, 130, 20),
               (45, 36, 7), (0, 4, 3), (3, 4, 0)]


@pytest.mark.parametrize("cfg", KNOBS, ids=lambda c: c.name)
def test_tile_options_at_awkward_shapes(rng, cfg):
    assert cfg.fits(get_device(), 4)
    for shape in KNOB_SHAPES:
        check(rng, *shape, "f32", cfg)


def test_mixed_f16_every_candidate(rng):
    """Every f16 "mixed" candidate (f16 tiles, f16 sums over each BK slice, f32 across) within
    the mixed bound, as test_every_fitting_tile_config does f32, and one K that spans many
    slices."""
    need("f16")
    for cfg in MIXED_CANDIDATES:
        run = runnable(cfg, 2)
        assert run is not None, f"{cfg.name} cannot be shrunk to fit this adapter"
        for shape in [(130, 136, 40), (3, 4, 8), (0, 8, 4)]:
            check(rng, *shape, "f16", run, "mixed")
        if not cfg.unroll:
            check(rng, 67, 45, 33, "f16", run, "mixed")
    check(rng, 33, 20, 1000, "f16", MIXED_CANDIDATES[0], "mixed")


@pytest.mark.parametrize("cfg", MIXED_KNOBS, ids=lambda c: c.name)
def test_mixed_f16_tile_options_at_awkward_shapes(rng, cfg):
    need("f16")
    for shape in KNOB_SHAPES:
        if shape != (45, 36, 7):  # vec4 b with scalar a: the f32 tests cover it
            check(rng, *shape, "f16", cfg, "mixed")


def test_f16_f32_precision_and_f64_with_new_options(rng):
    """The f32-accumulating f16 path and f64 with the new tile options (they share all but
    the loads and stores with f32; split-K is f32 only)."""
    need("f16")
    for cfg in (KNOBS[0], KNOBS[1], KNOBS[3]):
        check(rng, 67, 45, 33, "f16", cfg, "f32")
    if "shader-f64" in wgc.device_info()["features"]:
        for cfg in (KNOBS[0], KNOBS[1], KNOBS[3]):
            check(rng, 67, 45, 33, "f64", cfg)


def test_precision_param():
    """"mixed" is an f16 choice; f32 and f64 take "f32" or nothing; bad values name the
    param; a mixed config needs BK 8 or 16 and no split-K; the param picks the shader."""
    xs = [wgc.empty((4, 4))]
    if "shader-f64" in wgc.device_info()["features"]:
        xs.append(wgc.empty((4, 4), "f64"))
    for x in xs:
        with pytest.raises(wgc.ArgumentError, match="'precision' 'mixed'.*needs f16"):
            wgc.run_kernel("matmul", [x, x], wgc.empty((4, 4), x.dtype),
                           {"precision": "mixed"})
        wgc.run_kernel("matmul", [x, x], wgc.empty((4, 4), x.dtype), {"precision": "f32"})
    need("f16")
    h = wgc.from_numpy(np.eye(4, dtype=np.float16))
    for bad in ("f16", "MIXED", 16, 0.5):
        with pytest.raises(wgc.ArgumentError, match="param 'precision' must be one of"):
            wgc.run_kernel("matmul", [h, h], wgc.empty((4, 4), "f16"), {"precision": bad})
    with pytest.raises(wgc.ArgumentError, match="BK=32.*takes BK 8 or 16"):
        wgc.run_kernel("matmul", [h, h], wgc.empty((4, 4), "f16"),
                       {"precision": "mixed", "_config": TileConfig(32, 32, 32, 4, 4)})
    with pytest.raises(wgc.ArgumentError, match="needs f32"):
        wgc.run_kernel("matmul", [h, h], wgc.empty((4, 4), "f16"),
                       {"precision": "mixed", "_config": TileConfig(32, 32, 16, 4, 4, split=2)})
    mm = get("matmul")
    mixed = bind(mm, [h, h], wgc.empty((4, 4), "f16"), {"precision": "mixed"})
    full = bind(mm, [h, h], wgc.empty((4, 4), "f16"), {"precision": "f32"})
    default = bind(mm, [h, h], wgc.empty((4, 4), "f16"), None)
    assert "var<workgroup> As: array<vec4<f16>" in mixed.compiled.source
    assert "h0_0 = fma(" in mixed.compiled.source
    assert "var<workgroup> As: array<vec4<f32>" in full.compiled.source
    assert default.params["precision"] == F16_DEFAULT_PRECISION
    assert mixed.params["precision"] == "mixed"
    got = wgc.run_kernel("matmul", [h, h], wgc.empty((4, 4), "f16"), {"precision": "mixed"})
    assert got.to_numpy().tolist() == np.eye(4).tolist()


def test_tile_config_names_round_trip():
    configs = list(CANDIDATES) + list(MIXED_CANDIDATES) + KNOBS + MIXED_KNOBS
    for cfg in configs:
        assert TileConfig.parse(cfg.name) == cfg
    assert len({c.name for c in configs}) == len(set(configs))  # names are unique
    cfg = TileConfig.parse("128x64x16_8x8_s4_g8_sb_u")  # options in any order
    assert cfg == TileConfig(128, 64, 16, 8, 8, split=4, unroll=True, stages=1, group=8)
    assert cfg.name == "128x64x16_8x8_u_sb_g8_s4"
    assert TileConfig.parse("32x64x16_4x4_s8") == TileConfig(32, 64, 16, 4, 4, split=8)
    for bad in ("128x128_8x8", "128x128x8", "128x128x8_8x8_q", "axbxc_1x1", "128x128x8_8x8_g"):
        with pytest.raises(wgc.ArgumentError, match="tile config name"):
            TileConfig.parse(bad)
    for kw in ({"stages": 3}, {"group": 0}, {"split": 0}, {"unroll": 1}, {"bk": 0},
               {"early": 1}, {"early": True, "stages": 1}):
        with pytest.raises(wgc.ArgumentError, match=next(iter(kw))):
            TileConfig(**{"bm": 32, "bn": 32, "bk": 8, "tm": 4, "tn": 4, **kw})
    assert TileConfig.parse("32x32x8_4x4_e_u").name == "32x32x8_4x4_u_e"
    with pytest.raises(wgc.ArgumentError, match="early needs stages 2"):
        TileConfig.parse("32x32x8_4x4_e_sb")


def test_fits_counts_stages_and_element_size():
    dev = get_device()
    limit = dev.limit("max-compute-workgroup-storage-size")
    two = TileConfig(128, 128, 32, 8, 8)
    one = dataclasses.replace(two, stages=1)
    assert two.workgroup_bytes(4) == 2 * 32 * 256 * 4 == 2 * one.workgroup_bytes(4)
    assert one.workgroup_bytes(2) == 32 * 256 * 2
    for cfg in (two, one):
        for elem in (2, 4, 8):
            assert cfg.fits(dev, elem) == (cfg.workgroup_bytes(elem) <= limit)
    assert not TileConfig(128, 128, 8, 8, 12).fits(dev, 4)  # TN not a multiple of 4
    assert not TileConfig(128, 128, 4, 8, 8).fits(dev, 4)  # a tile is not a whole number of
    #                                                        vec4 loads per invocation
    assert {c.bk for c in MIXED_CANDIDATES} <= {8, 16}
    assert not any(c.split > 1 for c in MIXED_CANDIDATES)


def test_tuning_sets_name_candidates():
    names = {c.name for c in CANDIDATES}
    mixed = {c.name for c in MIXED_CANDIDATES}
    for cls in ("large", "skinny", "small"):
        assert set(_TUNE_SETS[cls]) <= names, cls
        assert set(_MIXED_TUNE_SETS[cls]) <= mixed, cls


def test_defaults_are_candidates():
    names = {c.name for c in CANDIDATES}
    mixed = {c.name for c in MIXED_CANDIDATES}
    assert set(_DEFAULTS.values()) <= names
    assert set(_MIXED_DEFAULTS.values()) <= mixed
    for name in _DEFAULTS.values():
        assert TileConfig.parse(name).fits(get_device(), 4)
    for name in _MIXED_DEFAULTS.values():
        assert TileConfig.parse(name).fits(get_device(), 2)


def test_split_k_configs_on_skinny_shapes(rng):
    """Split-K sums k slices into out by compare-and-swap after zeroing it: slices that end
    inside a BK step, K shorter than one slice, and K = 0 must all give the plain product."""
    splits = [c for c in CANDIDATES if c.split > 1]
    assert splits
    for cfg in splits:
        run = runnable(cfg, 4)
        if cfg.unroll:  # vec4 loads only (compile time, see test_every_fitting_tile_config)
            shapes = [(300, 64, 1000), (77, 8, 4), (64, 64, 132)]
        else:
            shapes = [(300, 64, 1000), (77, 5, 3), (9, 8, 0), (64, 64, 129)]
        for m, n, k in shapes:
            check(rng, m, n, k, "f32", run)
    with pytest.raises(wgc.ArgumentError, match="needs f32"):
        wgc.run_kernel("matmul", [wgc.empty((4, 4), "f64"), wgc.empty((4, 4), "f64")],
                       wgc.empty((4, 4), "f64"), {"_config": splits[0]})
    assert TileConfig.parse(splits[0].name) == splits[0]


def test_f16_split_k_goes_through_an_f32_temporary(rng):
    """f16 at precision "f32" takes split-K configs: the k slices meet by compare-and-swap in
    an f32 temporary, converted to f16 by a second step of the same pass. Same shapes as
    f32's split-K test, the f32-accumulation bound; "mixed" still refuses them."""
    need("f16")
    splits = [c for c in CANDIDATES if c.split > 1]
    assert all(c in Matmul.candidates("f16", get_device()) for c in splits
               if c.fits(get_device(), 4))
    for cfg in splits:
        run = runnable(cfg, 4)
        shapes = ([(300, 64, 1000), (77, 8, 4)] if cfg.unroll else
                  [(300, 64, 1000), (77, 5, 3), (9, 8, 0), (64, 64, 129)])
        for m, n, k in shapes:
            check(rng, m, n, k, "f16", run)
    h = wgc.from_numpy(rng.uniform(-1, 1, (40, 24)).astype(np.float16))
    g = wgc.from_numpy(rng.uniform(-1, 1, (24, 12)).astype(np.float16))
    out = wgc.empty((40, 12), "f16")
    d = bind(get("matmul"), [h, g], out, {"_config": runnable(splits[0], 4)})
    assert [p.kernel.name for p in d.parts] == ["matmul", "matmul_to_f16"]
    assert [(t.shape, t.dtype) for t in d.temps] == [((40, 12), "f32")]
    p = wgc.pipeline().add(kernel="matmul", inputs=[h, g], output=out,
                           params={"_config": runnable(splits[0], 4)})
    p.run()
    want = h.to_numpy().astype(np.float64) @ g.to_numpy().astype(np.float64)
    np.testing.assert_allclose(out.to_numpy(), want, rtol=2.0**-10, atol=24 * 2.0**-20)
    with pytest.raises(wgc.ArgumentError, match="needs f32 sums"):
        wgc.run_kernel("matmul", [h, g], out, {"precision": "mixed", "_config": splits[0]})
    with pytest.raises(wgc.ArgumentError, match="_f32_out"):
        wgc.run_kernel("matmul", [h, g], wgc.empty((40, 12), "f32"), {"_f32_out": True})


def test_configs_that_do_not_fit_are_refused():
    huge = TileConfig(256, 256, 32, 8, 8)
    assert not huge.fits(get_device(), 4)
    with pytest.raises(wgc.ArgumentError, match="does not fit"):
        wgc.run_kernel("matmul", [wgc.empty((4, 4)), wgc.empty((4, 4))], wgc.empty((4, 4)),
                       {"_config": huge})


def test_shape_and_dtype_errors_name_the_operands():
    with pytest.raises(wgc.ShapeError, match="contracted dimensions 4 and 5"):
        wgc.matmul(wgc.empty((3, 4)), wgc.empty((5, 2)))
    with pytest.raises(wgc.ShapeError, match="inner dimensions 4 and 5"):  # the kernel's words
        wgc.run_kernel("matmul", [wgc.empty((3, 4)), wgc.empty((5, 2))])
    with pytest.raises(wgc.ShapeError, match="contracted dimensions 1 and 4"):  # batched
        wgc.matmul(wgc.empty((3, 4, 1)), wgc.empty((4, 2)))
    with pytest.raises(wgc.DtypeError, match="b is f64"):
        wgc.run_kernel("matmul", [wgc.empty((2, 2)), wgc.empty((2, 2), "f64")],
                       wgc.empty((2, 2)))
    with pytest.raises(wgc.DtypeError, match="not supported"):
        wgc.run_kernel("matmul", [wgc.empty((2, 2), "s32"), wgc.empty((2, 2), "s32")])
    with pytest.raises(wgc.ShapeError, match="out is"):
        wgc.matmul(wgc.empty((2, 3)), wgc.empty((3, 4)), wgc.empty((4, 2)))


def test_problem_classes():
    assert problem_class(4096, 4096, 4096) == "large"
    assert problem_class(8192, 64, 8192) == "skinny"
    assert problem_class(100, 100, 100) == "small"
    # between the classes: the product's own shape, each size rounded up to a sixteenth of
    # its power of two
    assert problem_class(128, 768, 3072) == "m128 n768 k3072"
    assert problem_class(197, 2304, 768) == "m208 n2304 k768"
    assert problem_class(6304, 768, 3072) == "m6656 n768 k3072"
    # large products up to OWN_SHAPE_MACS are timed on their own rounded shape, bigger ones
    # on the class's
    from wgcompute.kernels.matmul.configs import tune_shape

    key = Matmul().tune_problem(6304, 3072, 768, "f32", get_device()).key
    assert key.startswith("matmul f32 large m6656 n3072 k768 r")
    assert tune_shape(key.split(" ", 2)[2].rsplit(" ", 1)[0]) == (6656, 3072, 768)
    assert " large r" in Matmul().tune_problem(4096, 4096, 4096, "f32", get_device()).key


def test_between_the_classes_defaults_fill_a_big_gpu_and_are_tuned_on_their_shape(rng):
    """A transformer's batch-1 products: the default launches BUSY workgroups (splitting K
    where the output is too small) and is right; the tuning set names candidates, timed on
    the bucket's shape."""
    from wgcompute.kernels.matmul.configs import BUSY, bucket_default, bucket_set, tune_shape

    names = {c.name for c in CANDIDATES}
    assert set(bucket_set()) <= names
    assert tune_shape("m128 n768 k3072") == (128, 768, 3072)
    for m, n, k in ((128, 768, 768), (128, 3072, 768), (197, 768, 3072), (197, 2304, 768)):
        cfg = TileConfig.parse(bucket_default(m, n, k, names))
        blocks = -(-m // cfg.bm) * -(-n // cfg.bn) * cfg.split
        assert blocks >= BUSY or k // (cfg.split * 2) < 128, (m, n, k, cfg.name)
        assert Matmul().config_for(m, n, k, "f32", get_device()) == cfg  # untuned: it
        check(rng, m, n, k, "f32")


def test_autotune_measures_real_matmuls_on_this_adapter(tuning_cache, monkeypatch, rng):
    """Forced on (lavapipe skips tuning by default): times the "small" class's tuning set on
    its 256³ problem, keeps the winner, and the matmul uses it correctly; f16
    "mixed" is its own problem, tuned among the mixed candidates."""
    monkeypatch.setenv("WGCOMPUTE_AUTOTUNE", "1")
    check(rng, 100, 100, 100, "f32")  # the first matmul of the class tunes it, then runs
    cfg = Matmul().config_for(100, 100, 100, "f32", get_device())
    assert cfg in CANDIDATES
    stored = json.loads((tuning_cache / "autotune.json").read_text())
    key = autotune.adapter_key(get_device())
    assert stored[key][f"matmul f32 small r{_TUNE_REVISION}"] == cfg.name
    if "shader-f16" in wgc.device_info()["features"]:
        check(rng, 100, 100, 100, "f16", precision="mixed")
        cfg = Matmul().config_for(100, 100, 100, "f16", get_device(), "mixed")
        assert cfg in MIXED_CANDIDATES
        stored = json.loads((tuning_cache / "autotune.json").read_text())
        assert (stored[key][f"matmul f16 mixed small r{_TUNE_REVISION}"]
                == cfg.name)


def test_autotune_default_without_tuning(tuning_cache, monkeypatch):
    monkeypatch.setenv("WGCOMPUTE_AUTOTUNE", "0")
    assert Matmul().config_for(4096, 4096, 4096, "f32", get_device()).name == "128x128x8_8x8"
    assert (Matmul().config_for(4096, 4096, 4096, "f16", get_device(), "mixed").name
            == _MIXED_DEFAULTS["large"])
    assert not (tuning_cache / "autotune.json").exists()


def test_sweep_times_each_config_and_goes_on_past_a_failing_one(tmp_path, monkeypatch):
    """benchmarks/sweep_matmul.py on a tiny shape: a row per (kind, config), each checked
    against numpy; a config that fails to build is reported and the sweep goes on."""
    import importlib
    import pathlib

    kernels = importlib.import_module("wgcompute.kernels")  # wgc.kernels is a function
    monkeypatch.syspath_prepend(str(pathlib.Path(__file__).resolve().parent.parent))
    from benchmarks import sweep_matmul

    real_bind = kernels.bind

    def bind(kernel, inputs, output, params):
        if params["_config"].name == "32x64x16_4x4":
            raise wgc.ShaderCompileError("matmul[f32]", "", "a driver said no")
        return real_bind(kernel, inputs, output, params)

    monkeypatch.setattr(kernels, "bind", bind)
    out = tmp_path / "sweep.json"
    kinds = "f32,f16-mixed" if "shader-f16" in wgc.device_info()["features"] else "f32"
    assert sweep_matmul.run(["--shapes", "40x36x20", "--only", kinds, "--configs",
                             "64x64x16_4x4,32x64x16_4x4", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 2 * len(kinds.split(","))
    for r in rows:
        assert r["shape"] == [40, 36, 20]
        if r["config"] == "32x64x16_4x4":
            assert "a driver said no" in r["error"] and r["ms"] is None
        else:
            assert r["error"] is None and r["ms"] > 0 and r["tflops"] > 0
            assert r["max_rel_err"] < (2e-3 if r["precision"] == "mixed" else 1e-5)


def test_facade_takes_precision(rng):
    """wgc.matmul(..., precision="mixed") runs the mixed path (within its bound, and not
    bit-equal to the f32-accumulated result); a bad precision names the param."""
    need("f16")
    a = rng.uniform(-1, 1, (70, 300)).astype(np.float16)
    b = rng.uniform(-1, 1, (300, 50)).astype(np.float16)
    ga, gb = wgc.from_numpy(a), wgc.from_numpy(b)
    mixed = wgc.matmul(ga, gb, precision="mixed").to_numpy().astype(np.float64)
    exact = wgc.matmul(ga, gb).to_numpy().astype(np.float64)
    want = a.astype(np.float64) @ b.astype(np.float64)
    absprod = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    bk = Matmul().config_for(70, 50, 300, "f16", get_device(), "mixed").bk
    bound = ((gamma(2 * bk, 2.0**-11) + gamma(-(-300 // bk), 2.0**-24)) * absprod
             + 2.0**-11 * np.abs(want) + 2 * 300 * 2.0**-14) * 1.01
    assert np.all(np.abs(mixed - want) <= bound)
    assert np.abs(exact - want).max() < np.abs(mixed - want).max()
    with pytest.raises(wgc.ArgumentError, match="precision"):
        wgc.matmul(ga, gb, precision="f8")
    f32 = wgc.from_numpy(a.astype(np.float32))
    with pytest.raises(wgc.ArgumentError, match="precision"):
        wgc.matmul(f32, wgc.from_numpy(b.astype(np.float32)), precision="mixed")


@pytest.mark.parametrize("epilogue", [False, True], ids=["matmul", "matmul_bias"])
def test_a_choice_tuned_during_binding_does_not_split_shader_and_grid(monkeypatch, rng,
                                                                      epilogue):
    """Background tuning may remember a new tile between a binding's key (its shader) and its
    launches (its grid): each binding looks its choice up once. Here the choice changes at
    every lookup, from 32x32 tiles to 128x128 ones; a grid of the second for a shader of the
    first would leave most of out unwritten."""
    from wgcompute.kernels.core import tuning
    from wgcompute.kernels.matmul.epilogue import MATMUL_BIAS

    names = iter(["32x32x16_4x4", "128x128x8_8x8"] * 8)
    monkeypatch.setattr(tuning, "choice", lambda device, problem: next(names))
    a = rng.uniform(-1, 1, (256, 96)).astype(np.float32)
    b = rng.uniform(-1, 1, (96, 256)).astype(np.float32)
    out = wgc.empty((256, 256), "f32")
    out.write(np.full((256, 256), np.nan, np.float32))
    ins = [wgc.buffer(a), wgc.buffer(b)]
    kernel = MATMUL_BIAS if epilogue else get("matmul")
    if epilogue:
        ins.append(ins[0])
    wgc.run_kernel(kernel, ins, out, {"has_bias": False} if epilogue else {})
    np.testing.assert_allclose(out.to_numpy(), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
