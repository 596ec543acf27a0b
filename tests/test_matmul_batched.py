"""matmul with numpy's rules beyond 2-D: batches over leading dimensions (broadcast, folded
into one 2-D product where b has no batch), 1-D operands as vectors, against numpy's f64
product within the dot-product error bound (see test_matmul.py), every dtype, split-K and
every tile config on a batch, launches split over the grid's z limit, errors."""

import dataclasses

import numpy as np
import pytest
from conftest import lacks

import wgcompute as wgc
from wgcompute.kernels import bind, get
from wgcompute.kernels.matmul.matmul import CANDIDATES, MIXED_CANDIDATES, Matmul, matmul_shape
from wgcompute.runtime import current_device

EPS = {"f32": 2.0**-24, "f16": 2.0**-24, "f64": 2.0**-53}
PAIRS = [
    ((2, 3, 4), (2, 4, 5)),  # plain batch
    ((2, 3, 4), (4, 5)),  # b shared: folded into one (6, 4) · (4, 5)
    ((3, 4), (2, 4, 5)),  # a shared: a's batch stride is 0
    ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),  # vectors
    ((7,), (3, 7, 2)), ((3, 2, 7), (7,)),
    ((2, 1, 3, 4), (1, 5, 4, 6)),  # both broadcast: two batch dimensions
    ((4, 1, 2, 3, 8), (1, 8, 12)),  # b shared over a 3-D batch
    ((2, 3, 0), (2, 0, 4)), ((0, 3, 4), (0, 4, 2)), ((2, 3, 4), (2, 4, 0)),  # empty
    ((5, 33, 67), (5, 67, 19)),  # ragged tiles in every product
    ((3, 17, 8), (1, 8, 20)),  # vec4 loads (K and N multiples of 4) at batch offsets
]


def need(dt):
    feature = wgc.DTYPES[dt].feature
    if feature and feature not in wgc.device_info()["features"]:
        pytest.skip(f"adapter lacks {feature} for {dt}")


def check(got, a, b, dt, slack=2.0):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = np.matmul(a64, b64)
    assert got.shape == want.shape, (a.shape, b.shape)
    assert got.dtype == wgc.DTYPES[dt].numpy
    k = a.shape[-1]
    bound = max(k, 1) * EPS[dt] * np.matmul(np.abs(a64), np.abs(b64)) * slack
    if dt == "f16":
        bound = bound + np.abs(want) * 2.0**-11 + 2.0**-24
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= bound + 1e-300), f"{a.shape} @ {b.shape}: max err {err.max():.3g}"


def run(rng, sa, sb, dt, params=None):
    npd = wgc.DTYPES[dt].numpy
    a = rng.uniform(-1, 1, sa).astype(npd)
    b = rng.uniform(-1, 1, sb).astype(npd)
    ga, gb = wgc.from_numpy(a), wgc.from_numpy(b)
    if params:
        out = wgc.empty(matmul_shape(sa, sb).out, dt)
        wgc.run_kernel("matmul", [ga, gb], out, params)
    else:
        out = wgc.matmul(ga, gb)
    return out.to_numpy(), a, b


@pytest.mark.parametrize("dt", ["f32", "f16", "f64"])
def test_numpy_matmul_rules(rng, dt):
    need(dt)
    for sa, sb in PAIRS:
        got, a, b = run(rng, sa, sb, dt)
        check(got, a, b, dt)


def test_shared_b_folds_into_one_2d_product():
    sh = matmul_shape((4, 1, 2, 3, 8), (1, 8, 12))
    assert (sh.m, sh.k, sh.n, sh.batch) == (4 * 2 * 3, 8, 12, ())
    assert matmul_shape((4, 1, 2, 3, 8), (1, 8, 12)).out == np.matmul(
        np.empty((4, 1, 2, 3, 8)), np.empty((1, 8, 12))).shape
    sh = matmul_shape((2, 1, 3, 4), (1, 5, 4, 6))
    assert sh.batch == (2, 5) and sh.a_strides == (12, 0) and sh.b_strides == (0, 24)
    # the 2-D path's pipeline key is what it was before batching existed
    k = get("matmul")
    key2 = k.key([wgc.empty((6, 4)), wgc.empty((4, 5))], wgc.empty((6, 5)), {"precision": "f32"})
    key3 = k.key([wgc.empty((2, 3, 4)), wgc.empty((4, 5))], wgc.empty((2, 3, 5)),
                 {"precision": "f32"})
    assert key2 == key3 and "batch" not in dict(key2.constants)


def fitting(cfgs, elem):
    dev = current_device()
    out = []
    for cfg in cfgs:
        while not cfg.fits(dev, elem) and cfg.bk > 8:
            cfg = dataclasses.replace(cfg, bk=cfg.bk // 2)
        if cfg.fits(dev, elem):
            out.append(cfg)
    return out


def test_every_tile_config_on_a_batch(rng):
    """Every candidate (split-K ones zero all the products first, then add each k slice by
    compare-and-swap at its product's offset), with a broadcast batch."""
    for cfg in fitting(CANDIDATES, 4):
        k = 36 if cfg.unroll else 37  # unrolled configs compile only vec4 loads here
        got, a, b = run(rng, (3, 1, 20, k), (2, k, 24), "f32", {"_config": cfg})
        check(got, a, b, "f32")


@pytest.mark.parametrize("precision", ["f32", "mixed"])
def test_f16_batched_at_both_precisions(rng, precision):
    need("f16")
    cands = CANDIDATES if precision == "f32" else MIXED_CANDIDATES
    elem = 4 if precision == "f32" else 2
    for cfg in fitting([c for c in cands if not c.unroll][:3] +
                       [c for c in cands if c.split > 1][:2], elem):
        got, a, b = run(rng, (4, 9, 16), (4, 16, 12), "f16",
                        {"_config": cfg, "precision": precision})
        if precision == "f32":
            check(got, a, b, "f16")
        else:  # the mixed bound of Matmul's docstring, for BK <= 16
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            want = a64 @ b64
            bound = 0.02 * (np.abs(a64) @ np.abs(b64)) + 2.0**-11 * np.abs(want) + 1e-3
            assert np.all(np.abs(got - want) <= bound)


def test_f16_split_k_temporary_has_the_batched_shape(rng):
    need("f16")
    split = fitting([c for c in CANDIDATES if c.split > 1], 4)[0]
    a = wgc.from_numpy(rng.uniform(-1, 1, (3, 40, 24)).astype(np.float16))
    b = wgc.from_numpy(rng.uniform(-1, 1, (3, 24, 12)).astype(np.float16))
    out = wgc.empty((3, 40, 12), "f16")
    d = bind(get("matmul"), [a, b], out, {"_config": split})
    assert [(t.shape, t.dtype) for t in d.temps] == [((3, 40, 12), "f32")]


def test_batches_past_the_grid_z_limit(rng, monkeypatch):
    """More products than workgroups allowed along z: several launches, each from its own
    first batch (here a limit of 4 splits 11 products, and 11 split-K products of 2 slices)."""
    dev = current_device()
    monkeypatch.setitem(dev.limits, "max-compute-workgroups-per-dimension", 4)
    got, a, b = run(rng, (11, 5, 7), (11, 7, 3), "f32")
    check(got, a, b, "f32")
    split = next(c for c in fitting(CANDIDATES, 4) if c.split > 1 and not c.unroll)
    two = dataclasses.replace(split, split=2)
    k = 2 * split.bk + 3
    got, a, b = run(rng, (11, 5, k), (11, k, 3), "f32", {"_config": two})
    check(got, a, b, "f32")
    # a zeroing launch, then 2 products (4 slices) per launch
    assert len(Matmul().launches([wgc.empty((11, 5, k)), wgc.empty((11, k, 3))],
                                 wgc.empty((11, 5, 3)), {"precision": "f32", "_config": two},
                                 dev)) == 1 + 6
    assert len(Matmul().launches([wgc.empty((11, 5, 7)), wgc.empty((11, 7, 3))],
                                 wgc.empty((11, 5, 3)), {"precision": "f32"}, dev)) == 3


def test_errors_name_the_operands():
    with pytest.raises(wgc.ShapeError, match=r"x1 is \(2, 3, 4\) and x2 is \(2, 5, 2\); the "
                                             r"contracted dimensions 4 and 5 differ"):
        wgc.matmul(wgc.empty((2, 3, 4)), wgc.empty((2, 5, 2)))
    with pytest.raises(wgc.ShapeError, match=r"x1's batch shape is \(2,\) and x2's batch shape "
                                             r"is \(3,\); they do not broadcast"):
        wgc.matmul(wgc.empty((2, 3, 4)), wgc.empty((3, 4, 2)))
    with pytest.raises(wgc.ShapeError, match="x1 is 0-dimensional"):
        wgc.matmul(wgc.empty(()), wgc.empty((3,)))
    with pytest.raises(wgc.ShapeError, match=r"out is \(3, 5\), expected \(2, 3, 5\)"):
        wgc.matmul(wgc.empty((2, 3, 4)), wgc.empty((4, 5)), wgc.empty((3, 5)))
    with pytest.raises(wgc.DtypeError, match="a is f32 and b is f64"):  # the kernel's check
        wgc.run_kernel("matmul", [wgc.empty((2, 3, 4)), wgc.empty((4, 5), "f64")])
    # the array namespace's matmul (wgc.matmul) promotes f32 with f64, as the standard says
    if lacks("f64") is None:
        assert wgc.matmul(wgc.empty((2, 3, 4)), wgc.empty((4, 5), "f64")).dtype == "f64"
