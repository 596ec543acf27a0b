"""Reductions over any axis, any tuple of axes and with keepdims, against numpy: every dtype,
every way a reduction runs (rows, columns in one or two steps, a gathered copy, everything,
nothing), u8 outputs packed four to a word, and numpy's rules for empty axes."""

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.kernels.reduce import reduce as reduce_mod
from wgcompute.kernels.reduce.reduce import reduce_plan

DTYPES = ["f32", "f16", "f64", "s32", "s64", "u32", "u8"]
# the reduction kernels along any axes (wgc.sum and the others are the array namespace's)
FNS = {op: getattr(wgc, f"reduce_{op}") for op in ("sum", "max", "min", "mean", "argmax")}
# (shape, axes): the plan each one takes is asserted in test_plans_cover_every_mode
CASES = [
    ((6, 7), 0),  # columns, outer 1
    ((3, 5, 9), 1),  # columns with outer and inner
    ((5, 9), (0, 1)),  # everything
    ((2, 3, 4, 5), (1, 2)),  # a middle block of two axes: columns
    ((2, 3, 4, 5), (0, 2)),  # two blocks: gathered, then rows
    ((4, 3, 5), (0, 2)),
    ((2, 3, 4), (2, 1)),  # trailing block given out of order -> rows
    ((3, 1, 5), 1),  # a size-1 axis: nothing to reduce, one element per output
    ((7, 9), -2),  # u8 packing across several column workgroups' words
    ((130, 3), 0),  # 3 columns: packed u8 word with a ragged end
    ((2, 4100, 3), 1),  # few columns, a long axis: two steps (parts)
    ((5000, 2), 0),
    ((3, 4), ()),  # no axis: every element is its own result
]


def need(dt):
    feature = wgc.DTYPES[dt].feature
    if feature and feature not in wgc.device_info()["features"]:
        pytest.skip(f"adapter lacks {feature} for {dt}")


def make(rng, dt, shape):
    npd = wgc.DTYPES[dt].numpy
    if dt.startswith("f"):
        return rng.standard_normal(shape).astype(npd)
    if dt == "u8":
        return rng.integers(0, 256, shape).astype(npd)
    lo = 0 if dt.startswith("u") else -1000
    return rng.integers(lo, 1000, shape).astype(npd)


def reference(op, a, axis, keepdims):
    if op == "sum":
        if a.dtype.kind == "f":
            return np.sum(a.astype(np.float64), axis=axis, keepdims=keepdims)
        return np.sum(a, axis=axis, keepdims=keepdims,
                      dtype=np.uint32 if a.dtype == np.uint8 else a.dtype)
    if op == "mean":
        return np.mean(a.astype(np.float64), axis=axis, keepdims=keepdims)
    return {"max": np.max, "min": np.min, "argmax": np.argmax}[op](a, axis=axis,
                                                                   keepdims=keepdims)


def compare(op, got, a, want, axis, dt):
    assert got.shape == want.shape, (a.shape, axis, got.shape, want.shape)
    if op in ("max", "min", "argmax") or (op == "sum" and dt[0] != "f"):
        np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=f"{a.shape} {axis}")
        return
    n = a.size // max(want.size, 1)
    eps = {"f64": 2.3e-16}.get(dt, 1.2e-7)  # f16 and integers accumulate in f32
    scale = np.sum(np.abs(a.astype(np.float64)), axis=axis, keepdims=True).reshape(want.shape)
    if op == "mean":
        scale = scale / n
    tol = n * eps * scale + (np.abs(want) * 1e-3 if got.dtype == np.float16 else 0)
    assert np.all(np.abs(got.astype(np.float64) - want) <= tol), (a.shape, axis)


@pytest.fixture(params=[True, False], ids=["subgroup", "workgroup-memory"])
def path(request, monkeypatch):
    if request.param and "subgroup" not in wgc.device_info()["features"]:
        pytest.skip("adapter has no subgroup feature")
    monkeypatch.setattr(reduce_mod, "use_subgroups", request.param)


@pytest.mark.parametrize("op", list(FNS))
@pytest.mark.parametrize("dt", DTYPES)
def test_any_axes_match_numpy(rng, path, op, dt):
    need(dt)
    for shape, axis in CASES:
        if op == "argmax" and not isinstance(axis, int):
            continue
        a = make(rng, dt, shape)
        x = wgc.from_numpy(a)
        for keepdims in (False, True):
            got = FNS[op](x, axis=axis, keepdims=keepdims).to_numpy()
            compare(op, got, a, reference(op, a, axis, keepdims), axis, dt)


def test_plans_cover_every_mode():
    how = {(shape, axis): reduce_plan("sum", shape, axis, False).how for shape, axis in CASES}
    assert {h for h in how.values()} == {"rows", "cols", "all", "gather"}
    assert how[((2, 3, 4, 5), (0, 2))] == "gather"
    assert how[((2, 3, 4), (2, 1))] == "rows"
    plan = reduce_plan("sum", (2, 4100, 3), 1, False)
    assert plan.how == "cols" and plan.parts > 1
    assert reduce_plan("argmax", (2, 4100, 3), 1, False, True).parts == 1
    assert reduce_plan("sum", (3, 0), -1, False).how == "empty"
    assert reduce_plan("sum", (0, 3), -1, False).how == "none"


def test_column_reduction_of_a_long_axis(rng):
    """Two steps: column partials over parts of the axis, then the parts; the mean divides
    by the whole axis once."""
    a = rng.standard_normal((20_000, 5)).astype(np.float32)
    x = wgc.from_numpy(a)
    np.testing.assert_allclose(wgc.reduce_sum(x, axis=0).to_numpy(), a.astype(np.float64).sum(0),
                               rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(wgc.reduce_mean(x, axis=0).to_numpy(), a.astype(np.float64).mean(0),
                               rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(wgc.reduce_max(x, axis=0).to_numpy(), a.max(0))
    np.testing.assert_array_equal(wgc.reduce_argmax(x, axis=0).to_numpy(), a.argmax(0))


def test_argmax_over_columns_takes_the_first_of_equal_maxima():
    a = np.zeros((9, 3), np.float32)
    a[[2, 7], 0] = 5.0  # slices 2 and 3 of the column both hold the maximum
    a[[6, 5], 1] = 1.0
    a[:, 2] = -1.0
    got = wgc.reduce_argmax(wgc.from_numpy(a), axis=0).to_numpy()
    np.testing.assert_array_equal(got, [2, 5, 0])


@pytest.mark.parametrize("shape,axis", [((3, 0), -1), ((0, 3), 0), ((2, 0, 3), 1),
                                        ((0,), None), ((2, 0), (0, 1))])
def test_empty_axes_follow_numpy(shape, axis):
    """max/min/argmax of nothing raise (numpy raises too), sum is 0 and mean nan."""
    a = np.zeros(shape, np.float32)
    x = wgc.from_numpy(a)
    arg = (wgc.reduce_argmax,) if not isinstance(axis, tuple) else ()
    for fn in (wgc.reduce_max, wgc.reduce_min) + arg:
        with pytest.raises(wgc.ShapeError, match="no elements along axis"):
            fn(x, axis=axis)
    np.testing.assert_array_equal(wgc.reduce_sum(x, axis=axis).to_numpy(), np.sum(a, axis=axis))
    got = wgc.reduce_mean(x, axis=axis).to_numpy()  # numpy: nan, with a RuntimeWarning
    assert got.shape == np.sum(a, axis=axis).shape and np.isnan(got).all()
    s = wgc.from_numpy(np.zeros(shape, np.int32))
    np.testing.assert_array_equal(wgc.reduce_sum(s, axis=axis).to_numpy(), np.sum(s.to_numpy(),
                                                                          axis=axis))


def test_nothing_to_reduce_along_a_nonempty_axis_is_no_error():
    x = wgc.from_numpy(np.zeros((0, 3), np.float32))
    assert wgc.reduce_max(x, axis=1).shape == (0,)
    assert wgc.reduce_argmax(x, axis=-1, keepdims=True).shape == (0, 1)


def test_axis_errors_name_the_argument():
    x = wgc.from_numpy(np.ones((2, 3), np.float32))
    with pytest.raises(wgc.ArgumentError, match="axis' 2 is out of range for a 2-D"):
        wgc.reduce_sum(x, axis=2)
    with pytest.raises(wgc.ArgumentError, match="names axis 0 twice"):
        wgc.reduce_sum(x, axis=(0, -2))
    with pytest.raises(wgc.ArgumentError, match="must be an int or None"):
        wgc.reduce_argmax(x, axis=(0, 1))
    with pytest.raises(wgc.ArgumentError, match="axis"):
        wgc.reduce_sum(x, axis=1.0)
    with pytest.raises(wgc.ArgumentError, match="keepdims"):
        wgc.reduce_sum(x, keepdims="yes")
    with pytest.raises(wgc.ShapeError, match=r"out is \(3,\), expected \(1, 3\) for x \(2, 3\) "
                                             r"with axis=0, keepdims=True"):
        wgc.reduce_sum(x, axis=0, keepdims=True, out=wgc.empty((3,)))


def test_keepdims_output_shares_the_layout():
    """A keepdims result is the plain one with size-1 axes: same values, same order."""
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = wgc.from_numpy(a)
    assert wgc.reduce_sum(x, axis=1, keepdims=True).to_numpy().tolist() == \
        a.sum(axis=1, keepdims=True).tolist()
    assert wgc.reduce_sum(x, axis=None, keepdims=True).shape == (1, 1, 1)


def test_pipeline_stage_reduces_any_axis():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = wgc.from_numpy(a)
    out = wgc.empty((2, 4))
    p = wgc.pipeline().add(kernel="sum", inputs=[x], output=out, params={"axis": 1})
    p.run()
    np.testing.assert_array_equal(out.to_numpy(), a.sum(axis=1))
