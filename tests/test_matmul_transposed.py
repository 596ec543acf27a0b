"""matmul reading a transposed operand in place (params "_ta" / "_tb"), and automatic fusion
holding a queued transpose of the last two axes so that a matmul of its result reads the
source transposed: `x = (x @ w).T` runs one kernel per product. Checked against numpy on the
adapter the suite runs on."""

import numpy as np
import pytest
from conftest import assert_product_close, float_dtype, queued_labels

import wgcompute as wgc
from wgcompute import _lazy
from wgcompute import array_api as xp
from wgcompute.errors import ShapeError


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16"])
@pytest.mark.parametrize("a_shape,b_shape,ta,tb", [
    ((5, 7), (5, 3), True, False),
    ((7, 5), (3, 5), False, True),
    ((8, 4), (12, 8), True, True),
    ((64, 64), (64, 64), True, False),
    ((2, 3, 5, 7), (5, 6), True, False),       # a batch of transposed a, b shared
    ((2, 3, 7, 5), (2, 1, 6, 5), False, True),  # b broadcast over a batch dimension
    ((3, 9, 4), (3, 9, 8), True, False),
    ((33, 17), (40, 33), True, True),
    ((300, 1500), (300, 20), True, False),     # a skinny product (split-K where tuned so)
    ((2, 3, 8, 12), (8, 16), True, False),     # vec4 loads of a along m, batched
    ((12, 16), (20, 16), False, True),         # vec4 loads of b along k
    ((128, 96), (64, 128), True, True),
])
def test_matmul_reads_transposed_operands(a_shape, b_shape, ta, tb, dtype, rng):
    dt = float_dtype(dtype)
    a = rng.standard_normal(a_shape).astype(dt)
    b = rng.standard_normal(b_shape).astype(dt)
    want = np.matmul(np.swapaxes(a, -1, -2) if ta else a,
                     np.swapaxes(b, -1, -2) if tb else b, dtype=np.float64)
    params = {**({"_ta": True} if ta else {}), **({"_tb": True} if tb else {})}
    got = _lazy.enqueue("matmul", [wgc.buffer(a), wgc.buffer(b)], None, params).to_numpy()
    assert_product_close(got, want, dtype)


@pytest.mark.parametrize("config", ["32x64x16_4x4_s8", "128x128x16_8x8_u_sb",
                                    "64x64x16_8x8_u_s16"])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_transposed_operands_under_each_kind_of_tile(config, dtype, rng):
    """Split-K (an f16 product through its f32 temporary), one workgroup tile stage, and
    register tiles of 8x8, with both operands transposed, odd and vec4 sizes."""
    from wgcompute.kernels.matmul.configs import TileConfig

    dt = float_dtype(dtype)
    for m, k, n in ((70, 260, 36), (64, 256, 32)):
        a = rng.standard_normal((k, m)).astype(dt)
        b = rng.standard_normal((n, k)).astype(dt)
        params = {"_ta": True, "_tb": True, "_config": TileConfig.parse(config)}
        if not params["_config"].fits(wgc.current_device(), 4):
            pytest.skip(f"{config} does not fit this adapter")
        got = _lazy.enqueue("matmul", [wgc.buffer(a), wgc.buffer(b)], None, params)
        assert_product_close(got.to_numpy(), np.matmul(a.T, b.T, dtype=np.float64), dtype)


def test_mixed_precision_reads_transposed_operands(rng):
    dt = float_dtype("f16")
    a = rng.standard_normal((48, 64)).astype(dt)
    b = rng.standard_normal((40, 48)).astype(dt)
    got = _lazy.enqueue("matmul", [wgc.buffer(a), wgc.buffer(b)], None,
                        {"_ta": True, "_tb": True, "precision": "mixed"}).to_numpy()
    want = np.matmul(a.T, b.T, dtype=np.float64)
    bound = np.matmul(np.abs(a.T), np.abs(b.T), dtype=np.float64)
    assert np.all(np.abs(got - want) <= 0.02 * bound + 1e-2)


def test_matmul_refuses_a_transposed_vector():
    with pytest.raises(ShapeError, match="'_ta'.*at least 2 dimensions"):
        _lazy.enqueue("matmul", [wgc.buffer(np.ones(4, np.float32)),
                                 wgc.buffer(np.ones((4, 2), np.float32))], None, {"_ta": True})


def test_chain_of_products_and_transposes_queues_no_copies(autofused, held_copies, rng):
    xn = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    wn = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    x, w = wgc.buffer(xn), wgc.buffer(wn)
    dev = x.device
    dev.synchronize()
    y = x
    for _ in range(10):
        y = y @ w
        y = y.T
    # one kernel per product; only the last transpose, whose result is alive, is copied
    assert queued_labels(dev) == ["matmul"] * 10
    want = xn.astype(np.float64)
    for _ in range(10):
        want = (want @ wn).T
    assert_product_close(y.to_numpy(), want, "f32")
    assert not queued_labels(dev)


def test_small_transposes_are_copied_and_large_ones_read_in_place(autofused, rng):
    """A transpose under 1 MiB is queued as a copy (holding it costs the host more than the
    copy costs the GPU); from 1 MiB up the product reads its source in place. Both give
    numpy's product."""
    from wgcompute import _fusion_auto

    assert _fusion_auto.HOLD_BYTES == 1 << 20
    dev = wgc.current_device()
    for n, want in ((64, ["transpose", "matmul"]), (511, ["transpose", "matmul"]),
                    (512, ["matmul"])):  # (512 x 512 f32: 1 MiB)
        an = (rng.standard_normal((n, n)) / 8).astype(np.float32)
        bn = (rng.standard_normal((n, n)) / 8).astype(np.float32)
        a, b = wgc.buffer(an), wgc.buffer(bn)
        dev.synchronize()
        y = a.T @ b
        assert queued_labels(dev) == want, n
        assert_product_close(y.to_numpy(), an.T.astype(np.float64) @ bn, "f32")


def test_batched_matrix_transpose_is_read_in_place(autofused, held_copies, rng):
    an = rng.standard_normal((3, 6, 5)).astype(np.float32)
    bn = rng.standard_normal((3, 4, 5)).astype(np.float32)
    a, b = wgc.buffer(an), wgc.buffer(bn)
    dev = a.device
    dev.synchronize()
    c = a @ b.mT
    d = xp.matmul(b, xp.matrix_transpose(a))
    assert queued_labels(dev) == ["matmul", "matmul"]
    assert_product_close(c.to_numpy(), an.astype(np.float64) @ np.swapaxes(bn, -1, -2), "f32")
    assert_product_close(d.to_numpy(), bn.astype(np.float64) @ np.swapaxes(an, -1, -2), "f32")


def test_held_transpose_sees_the_source_as_it_was(autofused, rng):
    an = rng.standard_normal((6, 4)).astype(np.float32)
    a = wgc.buffer(an)
    t = a.T
    a += 1.0  # writes the source: the held transpose is queued first
    p = t @ a  # reads the updated a, and t as it was
    np.testing.assert_array_equal(t.to_numpy(), an.T)
    np.testing.assert_allclose(p.to_numpy(), an.T.astype(np.float64) @ (an + 1), rtol=2e-5,
                               atol=2e-5)


def test_held_transpose_outlives_a_freed_source(autofused, rng):
    an = rng.standard_normal((5, 3)).astype(np.float32)
    a = wgc.buffer(an)
    t = a.T
    a.free()
    np.testing.assert_array_equal(t.to_numpy(), an.T)


def test_dead_transpose_is_never_run(autofused, rng):
    a = wgc.buffer(rng.standard_normal((8, 8)).astype(np.float32))
    dev = a.device
    dev.synchronize()
    t = a.T
    del t
    dev.lazy.flush()
    assert not queued_labels(dev)
    dev.synchronize()


def test_transpose_read_by_other_ops_is_copied_first(autofused, rng):
    an = rng.standard_normal((4, 6)).astype(np.float32)
    a = wgc.buffer(an)
    t = a.T
    s = t + 1.0  # an elementwise op reads the transpose: it is queued before it
    u = t[1:3]   # a view of it
    np.testing.assert_array_equal(s.to_numpy(), an.T + 1)
    np.testing.assert_array_equal(u.to_numpy(), an.T[1:3])
