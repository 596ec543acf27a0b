"""Fusion's edges: relu in automatic fusion and as a method (one function runs fused or
plain), values a row reads twice, f16 rounding that a compiler must not drop, programs of
many distinct rows: each against the operations run one at a time, or numpy."""

import sys

import numpy as np
import pytest
from test_fusion import _queued_ops, data, one_at_a_time, unfused_then_queued

import wgcompute as wgc


@pytest.mark.parametrize("dtype", ["f32", "f16", "s32"])
def test_wgc_relu_joins_the_chain_and_a_slope_does_not(rng, unfused, adapter_lacks, dtype):
    """wgc.relu (slope 0) fuses with the operators around it: one kernel, the bits of the
    unfused kernels' (nan stays nan, -0.0 + 0.0 is +0.0). A leaky slope runs its own kernel."""
    if adapter_lacks(dtype):
        pytest.skip(adapter_lacks(dtype))
    npt = {"f32": np.float32, "f16": np.float16, "s32": np.int32}[dtype]
    xn = (rng.standard_normal(4096) * 8).astype(npt)
    bn = (rng.standard_normal(4096) * 8).astype(npt)
    if dtype != "s32":
        xn[:4] = [np.nan, -0.0, 0.0, -np.inf]
        bn[:4] = [1.0, 0.0, -0.0, 1.0]
    x0, b = wgc.from_numpy(xn), wgc.from_numpy(bn)

    def run():
        x = x0
        for _ in range(6):
            x = wgc.relu(x + b)
        return x

    dev = b.device
    x, want = unfused_then_queued(run, unfused, dev)
    assert _queued_ops(dev) == ["fused (12 operators)"]
    assert x.to_numpy().tobytes() == want.tobytes()
    ref = xn + bn
    for _ in range(5):
        ref = np.where(ref > 0, ref, np.where(np.isnan(ref), ref, npt(0))).astype(npt) + bn
    np.testing.assert_array_equal(want, np.where(ref > 0, ref, np.where(np.isnan(ref), ref,
                                                                         npt(0))))
    if dtype != "s32":
        dev.synchronize()
        y = wgc.relu(x0 + b, slope=0.25)
        assert _queued_ops(dev) == ["elementwise_add", "relu"]
        s = xn + bn
        np.testing.assert_array_equal(y.to_numpy(), np.where(s > 0, s, s * npt(0.25)))


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_a_value_read_twice_by_one_row_keeps_inf_and_nan(adapter_lacks, dtype):
    """y - y, y / y and y != y of a value computed in the same fused program: the shader
    compiler may fold them (to 0, 1, false) where y is inf or nan (lavapipe folded y - y);
    they keep numpy's answers, as separate kernels give them."""
    if adapter_lacks(dtype):
        pytest.skip(adapter_lacks(dtype))
    npt = {"f32": np.float32, "f16": np.float16}[dtype]
    xn = np.array([np.inf, -np.inf, np.nan, 1.0, 0.0, -0.0, 3.0e4], npt)
    x = wgc.from_numpy(xn)
    y = x + x
    got = [(y - y).to_numpy(), (y != y).to_numpy(), (y / y).to_numpy()]
    with np.errstate(all="ignore"):
        yn = xn + xn
        want = [yn - yn, yn != yn, yn / yn]
    for g, w in zip(got[:2], want[:2]):
        np.testing.assert_array_equal(g, w)
    # a division is within 2.5 ULP in WGSL (NVIDIA's f16 y / y is 1 - 2^-11): nan where
    # numpy's is (inf / inf, nan / nan), near 1 elsewhere
    np.testing.assert_array_equal(np.isnan(got[2]), np.isnan(want[2]))
    np.testing.assert_allclose(got[2], want[2], rtol=3 * float(np.finfo(npt).eps))


def test_one_function_runs_fused_and_plain(rng):
    """Buffer.relu() is wgc.relu as a method, as a fused function's arrays have it: the same
    function runs through wgc.fuse, with automatic fusion and one kernel at a time, to the
    same bits (and refuses a slope on integers as wgc.relu does)."""
    x = wgc.from_numpy(data(rng, "f32"))
    b = wgc.from_numpy(data(rng, "f32"))

    def chain(x, b):
        for _ in range(5):
            x = (x + b).relu()
        return (x * 0.5).relu(0.125)

    plain = chain(x, b).to_numpy()
    fused = wgc.fuse(chain)(x, b).to_numpy()
    eager = one_at_a_time(chain, x, b).to_numpy()
    assert plain.tobytes() == fused.tobytes() == eager.tobytes()
    np.testing.assert_array_equal(x.relu().to_numpy(), wgc.relu(x).to_numpy())
    with pytest.raises(wgc.DtypeError, match="slope"):
        wgc.from_numpy(np.arange(4, dtype=np.int32)).relu(0.5)


def test_forty_distinct_row_functions_compile():
    """Each distinct (row, parameters) of a fused program is one WGSL function: forty of them
    (the 17th and 33rd once named f16 and f32, WGSL's types, and did not compile)."""
    xn = np.linspace(-1, 1, 1000).astype(np.float32)
    slopes = [0.5 + i / 64 for i in range(40)]

    @wgc.fuse
    def chain(x):
        for s in slopes:
            x = (x - 0.25).relu(slope=s)
        return x

    want = xn
    for s in slopes:
        t = want - np.float32(0.25)
        want = np.where(t > 0, t, t * np.float32(s)).astype(np.float32)
    assert chain(wgc.from_numpy(xn)).to_numpy().tobytes() == want.tobytes()


def test_held_transposes_and_the_products_reading_them_name_the_users_line(autofused, held_copies):
    """The call site an error of queued work names: a transpose automatic fusion holds, and
    the product that reads its source in place, each at the line that asked for it (the
    frames looked at skip wgcompute's own callers)."""
    dev = wgc.current_device()
    dev.synchronize()
    a = wgc.from_numpy(np.arange(32, dtype=np.float32).reshape(4, 8))
    q = wgc.from_numpy(np.eye(4, dtype=np.float32))
    t = a.T; line_t = sys._getframe().f_lineno  # noqa: E702 - the line of the call
    held = dev.lazy.fusion
    assert [e[4] for e in held.transposes.values()] == [f"{__file__}:{line_t}"]
    y = t @ q; line_y = sys._getframe().f_lineno  # noqa: E702
    assert [op.site for op in dev.lazy.ops] == [f"{__file__}:{line_y}"]
    z = wgc.matmul(t, q); line_z = sys._getframe().f_lineno  # noqa: E702 - through a function
    assert [op.site for op in dev.lazy.ops][1:] == [f"{__file__}:{line_z}"]
    want = np.arange(32, dtype=np.float32).reshape(4, 8).T
    np.testing.assert_array_equal(y.to_numpy(), want)
    np.testing.assert_array_equal(z.to_numpy(), want)
