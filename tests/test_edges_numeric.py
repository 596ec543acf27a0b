"""Numeric edge cases against numpy and onnxruntime: NaN through every reduction path (numpy's
rule: max, min, sum and mean give nan, argmax the first nan), NaN through the activations and
elementwise maxima (kept, as IEEE, numpy and onnxruntime keep it), float ``%`` and ``//`` over
a grid of special values (bit for bit, numpy's remainder and floor_divide), yes/no kernel
params that take a bool or 0/1 and nothing else, and work larger than one dispatch's grid or
one storage binding (the adapter's limits read from the device)."""

import operator

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.kernels.nn.nn import ACTIVATION_DEFAULTS, activation_numpy
from wgcompute.kernels.reduce import reduce as reduce_mod

try:
    import onnxruntime as ort
    from onnx import TensorProto, helper
except ImportError:
    ort = None
needs_onnx = pytest.mark.skipif(ort is None, reason="onnx and onnxruntime (pip install "
                                "'wgcompute[ml]')")

NAN = float("nan")


def need(dt):
    feature = wgc.DTYPES[dt].feature
    if feature and feature not in wgc.device_info()["features"]:
        pytest.skip(f"{wgc.device_info()['name']} lacks {feature} for {dt}")


def same_or_both_nan(got, want):
    """Equal values (0.0 == -0.0) with nan exactly where the reference has nan."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


def bits_or_both_nan(got, want) -> np.ndarray:
    """Mask of the elements that differ: not the same bits and not both nan."""
    got, want = np.asarray(got), np.asarray(want)
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    same = got.view(uint) == want.astype(got.dtype).view(uint)
    return ~(same | (np.isnan(got) & np.isnan(want)))


# -- 1. NaN in reductions ---------------------------------------------------------------------
@pytest.fixture(params=[True, False], ids=["subgroups", "workgroup-memory"])
def subgroups(request, monkeypatch):
    monkeypatch.setattr(reduce_mod, "use_subgroups", request.param)


def test_the_reported_case():
    b = wgc.buffer([1, NAN, 3, 2])
    assert np.isnan(b.max().item()) and np.isnan(b.min().item())
    assert b.argmax().item() == 1
    assert np.isnan(b.sum().item()) and np.isnan(b.mean().item())
    col = wgc.from_numpy(np.array([[1, NAN], [NAN, NAN], [3, NAN]], np.float32))
    same_or_both_nan(col.max(axis=0).to_numpy(), np.array([NAN, NAN], np.float32))
    same_or_both_nan(col.min(axis=0).to_numpy(), np.array([NAN, NAN], np.float32))
    assert col.argmax(axis=0).tolist() == [1, 0]
    assert col.argmax(axis=1).tolist() == [1, 0, 1]


def _with_nans(rng, shape, dt, rate=0.02):
    x = rng.standard_normal(shape) * 10
    x[rng.random(shape) < rate] = np.nan
    return x.astype(wgc.DTYPES[dt].numpy)


# every way a reduction runs: everything (one value; argmax in its own four phases), rows,
# columns in one and in two steps, a gathered copy then rows
SHAPES = [((4,), None), ((1000,), None), ((300_001,), None), ((7, 33), -1), ((5, 1024), 1),
          ((33, 7), 0), ((5000, 3), 0), ((4, 5, 6), (0, 2)), ((3, 40, 2, 9), (1, 3))]


@pytest.mark.parametrize("dt", ["f32", "f16", "f64"])
@pytest.mark.parametrize("shape,axis", SHAPES)
@pytest.mark.parametrize("op", ["max", "min", "argmax", "sum", "mean"])
def test_nan_propagates_through_every_reduction_path(rng, subgroups, dt, shape, axis, op):
    need(dt)
    x = _with_nans(rng, shape, dt)
    if op == "argmax" and isinstance(axis, tuple):  # one axis or None, as numpy's
        with pytest.raises(wgc.ArgumentError, match="axis"):
            wgc.from_numpy(x).argmax(axis=axis)
        return
    if len(shape) > 1:
        x[(slice(None),) * (len(shape) - 1) + (0,)] = np.nan  # whole slices of nan
        x[(1,) + (slice(None),) * (len(shape) - 1)] = np.nan
        x[(2,) + (slice(None),) * (len(shape) - 1)] = 5.0  # and one slice without any
    got = getattr(wgc.from_numpy(x), op)(axis=axis).to_numpy()
    want = getattr(np, op)(x.astype(np.float64) if op in ("sum", "mean") else x, axis=axis)
    if op in ("sum", "mean"):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-2 if dt == "f16" else 1e-5, atol=1e-2)
    else:
        same_or_both_nan(got, np.asarray(want, got.dtype))


@pytest.mark.parametrize("dt", ["f32", "f16", "f64"])
@pytest.mark.parametrize("n", [5, 300_001])
def test_argmax_gives_the_first_nan(subgroups, dt, n):
    need(dt)
    x = (np.arange(n) % 100).astype(wgc.DTYPES[dt].numpy)
    first = 1 if n < 10 else n // 3
    x[[n - 2, n // 2, first]] = np.nan
    x[n - 1] = np.inf
    assert wgc.from_numpy(x).argmax().item() == np.argmax(x) == first


def test_an_all_nan_column_and_infinities():
    x = np.array([[NAN, np.inf, -np.inf, 1], [NAN, 1, -np.inf, NAN]], np.float32)
    b = wgc.from_numpy(x)
    for op in ("max", "min", "argmax"):
        for axis in (0, 1, None):
            same_or_both_nan(getattr(b, op)(axis=axis).to_numpy(),
                             np.asarray(getattr(np, op)(x, axis=axis)).astype(
                                 "u4" if op == "argmax" else "f4"))


@pytest.mark.parametrize("axis", [-1, None])
def test_softmax_of_a_row_with_nan_is_nan(axis):
    x = np.array([[1.0, NAN, 3.0], [1.0, 2.0, 3.0]], np.float32)
    got = wgc.softmax(wgc.from_numpy(x), axis=axis).to_numpy()
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    same_or_both_nan(got.round(5), (e / e.sum(axis=axis, keepdims=True)).round(5))


@needs_onnx
def test_nn_softmax_of_a_row_with_nan_is_nan_like_onnxruntime():
    x = np.array([[1.0, NAN, 3.0], [1.0, 2.0, 3.0]], np.float32)
    for log, op in ((False, "Softmax"), (True, "LogSoftmax")):
        got = wgc.run_kernel("nn_softmax", [wgc.from_numpy(x)], None, {"log": log}).to_numpy()
        want = _run_onnx(op, {"x": x})
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-5)


# -- 2. NaN through activations and elementwise maxima ---------------------------------------
SPECIAL = np.array([NAN, -NAN, np.inf, -np.inf, -3.0, -0.5, -0.0, 0.0, 0.25, 2.0, 40.0],
                   np.float32)


@pytest.mark.parametrize("dt", ["f32", "f16", "f64"])
@pytest.mark.parametrize("slope", [0.0, 0.1])
def test_relu_keeps_nan(dt, slope):
    need(dt)
    x = SPECIAL.astype(wgc.DTYPES[dt].numpy)
    got = wgc.relu(wgc.from_numpy(x), slope=slope).to_numpy()
    want = np.where(x > 0, x, x * slope) if slope else np.maximum(x, 0)
    same_or_both_nan(got, want.astype(x.dtype))


@pytest.mark.parametrize("name", sorted(ACTIVATION_DEFAULTS))
@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_every_activation_keeps_nan(name, dt):
    need(dt)
    x = np.tile(SPECIAL, 3).astype(wgc.DTYPES[dt].numpy)
    alpha, beta = {"clip": (-1.0, 1.5)}.get(name, ACTIVATION_DEFAULTS[name])
    got = wgc.run_kernel("nn_activation", [wgc.from_numpy(x)], None,
                         {"activation": (name, alpha, beta)}).to_numpy()
    with np.errstate(invalid="ignore"):  # hard_swish(-inf) = -inf · 0: nan, as onnxruntime's
        want = activation_numpy(name, alpha, beta, x.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3 if dt == "f16" else 1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("op,ref", [("max", np.maximum), ("min", np.minimum)])
def test_elementwise_max_and_min_keep_nan_like_numpy(op, ref):
    a = np.repeat(SPECIAL, SPECIAL.size)
    b = np.tile(SPECIAL, SPECIAL.size)
    got = wgc.run_kernel("nn_binary", [wgc.from_numpy(a), wgc.from_numpy(b)], None,
                         {"op": op}).to_numpy()
    same_or_both_nan(got, ref(a, b))


def test_fused_epilogues_keep_nan():
    """gemm's activation (the matmul and convolution epilogues share it) and batch norm's."""
    a = np.ones((2, 3), np.float32)
    a[0, 1] = np.nan
    b = np.ones((3, 2), np.float32)
    c = np.zeros((2, 2), np.float32)
    for act in ("relu", ("clip", 0.0, 6.0), "tanh", "hard_sigmoid"):
        got = wgc.run_kernel("gemm", [wgc.from_numpy(a), wgc.from_numpy(b), wgc.from_numpy(c)],
                             None, {"activation": act}).to_numpy()
        assert np.isnan(got[0]).all() and not np.isnan(got[1]).any(), (act, got)
    x = np.array([[[[NAN, -1.0]]]], np.float32)
    one = wgc.from_numpy(np.ones(1, np.float32))
    zero = wgc.from_numpy(np.zeros(1, np.float32))
    got = wgc.run_kernel("nn_batchnorm", [wgc.from_numpy(x), one, zero, zero, one], None,
                         {"activation": "relu", "epsilon": 0.0}).to_numpy()
    same_or_both_nan(got.reshape(-1), np.array([NAN, 0.0], np.float32))


def _one_node(op, attrs=None, consts=(), inputs=1):
    """A model of one node on input x (and computed inputs i1..), with constant inputs."""
    names = ["x"] + [f"i{k}" for k in range(1, inputs)]
    inits = [helper.make_tensor(f"c{k}", TensorProto.FLOAT, [], [v]) for k, v in enumerate(consts)]
    node = helper.make_node(op, names + [t.name for t in inits], ["y"], **(attrs or {}))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT,
                                                    [SPECIAL.size] if n == "x" else [])
                      for n in names],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [SPECIAL.size])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _run_onnx(op, feeds, attrs=None):
    names = list(feeds)
    node = helper.make_node(op, names, ["y"], **(attrs or {}))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, feeds[n].shape)
                      for n in names], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                      None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


@needs_onnx
@pytest.mark.parametrize("op,attrs,consts,inputs", [
    ("Relu", {}, (), 1), ("Tanh", {}, (), 1), ("Sigmoid", {}, (), 1),
    ("LeakyRelu", {"alpha": 0.1}, (), 1), ("HardSigmoid", {}, (), 1), ("HardSwish", {}, (), 1),
    ("Clip", {}, (-1.0, 2.0), 1),  # constant bounds: the activation kernel
    ("Clip", {}, (), 3),  # computed bounds: elementwise max, then min
])
def test_onnx_activations_keep_nan_like_onnxruntime(op, attrs, consts, inputs):
    data = _one_node(op, attrs, consts, inputs)
    feeds = {"x": SPECIAL}
    feeds.update({f"i{k}": np.array(v, np.float32) for k, v in zip(range(1, inputs),
                                                                     (-1.0, 2.0))})
    (want,) = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = wgc.ml.load_onnx(data)(*feeds.values())
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# -- 3. float % and // over special values ----------------------------------------------------
def _grid(dt):
    info = np.finfo(wgc.DTYPES[dt].numpy)
    vals = [0.0, 1.0, 3.5, np.inf, float(info.tiny), float(info.max), 7.0, 0.1, 5.5e3,
            float(info.max) / 3]
    v = np.array(vals + [-x for x in vals] + [NAN], wgc.DTYPES[dt].numpy)
    return v


@pytest.mark.parametrize("dt", ["f32", "f16", "f64"])
@pytest.mark.parametrize("op", ["mod", "floordiv"])
def test_float_remainder_and_floor_division_match_numpy_bit_for_bit(dt, op):
    need(dt)
    v = _grid(dt)
    a, b = v[:, None], v[None, :]
    ref = {"mod": np.remainder, "floordiv": np.floor_divide}[op]
    with np.errstate(all="ignore"):
        want = ref(a, b)
    fwd = {"mod": lambda x, y: x % y, "floordiv": lambda x, y: x // y}[op]
    got = fwd(wgc.from_numpy(a), wgc.from_numpy(b)).to_numpy()  # broadcast path
    bad = bits_or_both_nan(got, want)
    assert not bad.any(), [(a[i, 0], b[0, j], got[i, j], want[i, j])
                           for i, j in zip(*np.nonzero(bad))][:12]
    flat = np.broadcast_to(a, want.shape).copy()
    got = fwd(wgc.from_numpy(flat), wgc.from_numpy(np.broadcast_to(b, want.shape).copy()))
    assert not bits_or_both_nan(got.to_numpy(), want).any()  # same shapes
    for s in (3.5, -np.inf, -0.0, 0.1):  # a scalar on either side
        s = wgc.DTYPES[dt].numpy.type(s)
        with np.errstate(all="ignore"):
            assert not bits_or_both_nan(fwd(wgc.from_numpy(v), s).to_numpy(), ref(v, s)).any()
            assert not bits_or_both_nan(fwd(s, wgc.from_numpy(v)).to_numpy(), ref(s, v)).any()


@pytest.mark.parametrize("dt", ["f32", "f16", "f64"])
def test_float_remainder_and_floor_division_of_random_bits(rng, dt):
    """Every finite and infinite float (random bit patterns, subnormals left out: GPUs may
    flush them), and pairs of close magnitude, where the quotient's rounding matters."""
    need(dt)
    npd = wgc.DTYPES[dt].numpy
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[npd.itemsize]
    x = rng.integers(0, np.iinfo(uint).max, 40000, dtype=uint, endpoint=True).view(npd)
    x = x[np.abs(x) >= np.finfo(npd).tiny]  # no subnormals
    a, b = x[: x.size // 2], x[x.size // 2: x.size // 2 * 2]
    close = (rng.standard_normal(4000) * 1e3).astype(npd)
    a = np.concatenate([a, close, close * npd.type(7)])
    b = np.concatenate([b, (close * rng.random(4000)).astype(npd), close / npd.type(3)])
    ga, gb = wgc.from_numpy(a), wgc.from_numpy(b)
    with np.errstate(all="ignore"):
        for got, want in (((ga // gb).to_numpy(), np.floor_divide(a, b)),
                          ((ga % gb).to_numpy(), np.remainder(a, b))):
            bad = bits_or_both_nan(got, want)
            assert not bad.any(), list(zip(a[bad], b[bad], got[bad], want[bad]))[:8]


@pytest.mark.parametrize("dt", ["f32", "f16", "f64"])
def test_comparisons_with_nan_match_numpy(dt):
    need(dt)
    v = _grid(dt)
    a, b = wgc.from_numpy(v[:, None]), wgc.from_numpy(v[None, :])
    for fn in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne):
        want = fn(v[:, None], v[None, :]).astype(np.uint8)
        np.testing.assert_array_equal(fn(a, b).to_numpy(), want, err_msg=fn.__name__)
        got = fn(a, v.dtype.type(np.nan)).to_numpy()  # a scalar nan
        assert got.all() if fn is operator.ne else not got.any(), fn.__name__


@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_power_of_special_values_matches_numpy(dt):
    """nan, ±inf, ±0 and ±1 on either side of ** give numpy's (C's pow) values: x ** 0 and
    1 ** y are 1 even for nan, a nan otherwise gives nan, a negative base takes integer
    exponents only; other results within the GPU's pow accuracy."""
    need(dt)
    npd = wgc.DTYPES[dt].numpy
    with np.errstate(over="ignore"):  # 2 ** 25 is inf in f16
        v = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, 3.5, -3.0, 1e-3, 30.0,
                      2.0 ** 25, -(2.0 ** 25), np.inf, -np.inf, np.nan]).astype(npd)
    a, b = np.broadcast_arrays(v[:, None], v[None, :])
    with np.errstate(all="ignore"):
        want = np.power(a, b)
    got = (wgc.from_numpy(a.copy()) ** wgc.from_numpy(b.copy())).to_numpy()
    special = ~np.isfinite(want) | (want == 0) | (np.abs(want) == 1)
    bad = bits_or_both_nan(got, want) & special
    bad |= ~special & ~np.isclose(got, want, rtol=4e-6 if dt == "f32" else 2e-3, atol=0)
    assert not bad.any(), list(zip(a[bad], b[bad], got[bad], want[bad]))[:12]


@pytest.mark.parametrize("e", [0, 1, 2, 3, -1, -2, -3, 40])
def test_f64_integer_powers_of_special_values(e):
    need("f64")
    v = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -0.5, np.inf, -np.inf, np.nan])
    with np.errstate(all="ignore"):
        want = np.power(v, float(e))
    assert not bits_or_both_nan((wgc.from_numpy(v) ** e).to_numpy(), want).any()


def test_the_reported_remainders():
    x = wgc.buffer([3.5, np.inf, 2.0])
    y = wgc.buffer([np.inf, 2.0, -np.inf])
    assert (x % y).tolist()[0] == 3.5
    q = (x // y).to_numpy()
    assert np.isnan(q[1]) and q[2] == -1.0


# -- 13. yes/no params -------------------------------------------------------------------------
def _bufs(*arrays):
    return [wgc.from_numpy(np.asarray(a, np.float32)) for a in arrays]


BAD_FLAGS = ["no", "yes", 2, -1, 0.0, None, pytest.param(object(), id="object()"),
             np.array([True])]


@pytest.mark.parametrize("bad", BAD_FLAGS, ids=repr)
@pytest.mark.parametrize("kernel,flag,inputs", [
    ("nn_softmax", "log", lambda: _bufs([[1.0, 2.0]])),
    ("nn_softmax", "flatten", lambda: _bufs([[1.0, 2.0]])),
    ("gemm", "trans_a", lambda: _bufs(np.ones((2, 3)), np.ones((3, 2)), np.zeros((2, 2)))),
    ("gemm", "trans_b", lambda: _bufs(np.ones((2, 3)), np.ones((3, 2)), np.zeros((2, 2)))),
    ("nn_pool", "count_include_pad", lambda: _bufs(np.ones((1, 1, 4, 4)))),
    ("nn_pool", "ceil_mode", lambda: _bufs(np.ones((1, 1, 4, 4)))),
    ("sum", "keepdims", lambda: _bufs(np.ones((2, 3)))),
    ("argmax", "keepdims", lambda: _bufs(np.ones((2, 3)))),
])
def test_a_flag_takes_a_bool_or_0_or_1_only(kernel, flag, inputs, bad):
    params = {flag: bad}
    if kernel == "nn_pool":
        params.update(kernel=(2, 2), mode="avg")
    with pytest.raises(wgc.ArgumentError, match=flag) as e:
        wgc.run_kernel(kernel, inputs(), None, params)
    assert "bool" in str(e.value) or "True or False" in str(e.value)


def test_flags_take_bools_and_0_1():
    x = wgc.from_numpy(np.array([[1.0, 2.0]], np.float32))
    soft = np.exp([1.0, 2.0]) / np.exp([1.0, 2.0]).sum()
    for on in (True, 1, np.bool_(True), np.int64(1)):
        got = wgc.run_kernel("nn_softmax", [x], None, {"log": on}).to_numpy()
        np.testing.assert_allclose(got[0], np.log(soft), rtol=1e-6)
    for off in (False, 0, np.bool_(False)):
        got = wgc.run_kernel("nn_softmax", [x], None, {"log": off}).to_numpy()
        np.testing.assert_allclose(got[0], soft, rtol=1e-6)
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    got = wgc.run_kernel("gemm", _bufs(a, np.eye(3), np.zeros((2, 3))), None,
                         {"trans_a": 1}).to_numpy()
    np.testing.assert_array_equal(got, a.T)
    assert wgc.from_numpy(a).sum(axis=0, keepdims=1).shape == (1, 2)


# -- 23. past one dispatch's grid and one storage binding --------------------------------------
def test_transpose_folds_a_grid_wider_than_the_limit():
    limit = wgc.device_info()["limits"]["max-compute-workgroups-per-dimension"]
    cols = (limit + 90) * 32  # one more row of 32×32 tiles than one dimension allows
    x = np.arange(2 * cols, dtype=np.float32).reshape(2, cols)
    np.testing.assert_array_equal(wgc.from_numpy(x).T.to_numpy(), x.T)


@pytest.fixture(scope="module")
def over_binding():
    """An f32 buffer 16 KiB over the adapter's max-storage-buffer-binding-size, with a nan."""
    limit = wgc.device_info()["limits"]["max-storage-buffer-binding-size"]
    if limit > 512 * 2**20:
        pytest.skip(f"{wgc.device_info()['name']} binds {limit} bytes: a buffer past that "
                    f"is too large for this test")
    n = limit // 4 + 4099
    x = np.random.default_rng(7).random(n, dtype=np.float32)
    b = wgc.from_numpy(x)
    assert b.nbytes > limit
    yield x, b
    b.free()


@pytest.mark.bigmem
def test_sum_past_the_binding_limit(over_binding):
    x, b = over_binding
    for op in ("sum", "mean"):
        want = getattr(np, op)(x.astype(np.float64))
        assert abs(getattr(b, op)().item() - want) <= 1e-5 * abs(want)
    assert b.max().item() == x.max() and b.min().item() == x.min()
    assert b.argmax().item() == np.argmax(x)


def test_max_and_argmax_past_the_binding_limit_see_a_late_nan(over_binding):
    x, b = over_binding
    at = x.size - 5
    y = b.copy()
    try:
        y[at:].write(np.array([NAN, 2.0, NAN, 0.5, 0.25], np.float32))
        assert np.isnan(y.max().item()) and np.isnan(y.sum().item())
        assert y.argmax().item() == at
    finally:
        y.free()


def test_strided_slice_past_the_binding_limit(over_binding):
    x, b = over_binding
    np.testing.assert_array_equal(b[::-3].to_numpy(), x[::-3])
    np.testing.assert_array_equal(b[5::7].to_numpy(), x[5::7])


def test_rows_past_the_binding_limit(over_binding):
    """Reductions over the last axis run in windows of whole rows; over columns they refuse."""
    x, b = over_binding
    n = 1000
    rows = x.size // n
    xv, v = x[:rows * n].reshape(rows, n), b[:rows * n].reshape(rows, n)
    assert v.nbytes > wgc.device_info()["limits"]["max-storage-buffer-binding-size"]
    np.testing.assert_allclose(v.sum(axis=-1).to_numpy(), xv.astype(np.float64).sum(axis=-1),
                               rtol=1e-5)
    np.testing.assert_array_equal(v.max(axis=-1).to_numpy(), xv.max(axis=-1))
    np.testing.assert_array_equal(v.argmax(axis=-1).to_numpy(), xv.argmax(axis=-1))
    np.testing.assert_array_equal(v[::2, 1::3].to_numpy(), xv[::2, 1::3])
    # u8 results, four rows to a word: windows of whole words of rows
    u, xu = b.view("u8")[:rows * 4 * n].reshape(rows, 4 * n), x.view(np.uint8)
    np.testing.assert_array_equal(u.max(axis=-1).to_numpy(),
                                  xu[:rows * 4 * n].reshape(rows, 4 * n).max(axis=-1))
    with pytest.raises(wgc.ShapeError, match="max-storage-buffer-binding-size"):
        v.sum(axis=0)


@pytest.fixture
def small_binding(monkeypatch):
    """The default device binding at most 16 KiB per buffer: every path that splits its work
    over windows, in launches of a few thousand elements."""
    dev = wgc.current_device()
    monkeypatch.setitem(dev.limits, "max-storage-buffer-binding-size", 16384)
    return 16384


@pytest.mark.parametrize("dt", ["f32", "f16", "f64", "u8", "s64", "u32"])
def test_reductions_in_windows(rng, subgroups, small_binding, dt):
    need(dt)
    npd = wgc.DTYPES[dt].numpy
    if dt.startswith("f"):
        x = _with_nans(rng, (37, 1001), dt, rate=0.001)
        x[:, 5] = 1.0  # rows without a nan too
        x[::3] = rng.standard_normal((13, 1001))
    else:
        x = rng.integers(0, 200, (37, 1001)).astype(npd)
    b = wgc.from_numpy(x)
    assert b.nbytes > small_binding
    wide = dt in ("f64", "s64")
    for op in ("sum", "max", "min", "mean", "argmax"):
        for axis in (None, -1):
            if op == "argmax" and axis is None and wide:  # one row of everything
                with pytest.raises(wgc.ShapeError, match="one row"):
                    b.argmax()
                continue
            got = getattr(b, op)(axis=axis).to_numpy()
            want = getattr(np, op)(x, axis=axis, **({"dtype": got.dtype} if op == "sum"
                                                    else {}))
            if op == "mean" or (op == "sum" and dt.startswith("f")):  # (f32 division)
                np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
                np.testing.assert_allclose(got, want, rtol=1e-2 if dt == "f16" else 1e-5)
            else:
                same_or_both_nan(got, np.asarray(want).astype(got.dtype))
    with pytest.raises(wgc.ShapeError, match="columns"):
        b.sum(axis=0)


@pytest.mark.parametrize("dt", ["f32", "u8", "f64"])
def test_strided_and_broadcast_operands_in_windows(rng, monkeypatch, dt):
    """Operands read through strides and larger than the binding limit (4096 elements here)
    are bound at windows around what each launch reads."""
    need(dt)
    npd = wgc.DTYPES[dt].numpy
    monkeypatch.setitem(wgc.current_device().limits, "max-storage-buffer-binding-size",
                        4096 * npd.itemsize)
    x = rng.integers(0, 100, 30011).astype(npd)
    b = wgc.from_numpy(x)
    for key in (slice(None, None, -3), slice(5, None, 2), slice(None, None, 3)):
        np.testing.assert_array_equal(b[key].to_numpy(), x[key])
    m = x[:8 * 2048].reshape(8, 2048)
    np.testing.assert_array_equal(b[:8 * 2048].reshape(8, 2048)[::-1, 1::2].to_numpy(),
                                  m[::-1, 1::2])
    p, q = rng.integers(1, 100, (5, 1, 4096)).astype(npd), rng.integers(1, 100, (2, 4096))
    q = q.astype(npd)
    got = (wgc.from_numpy(p) + wgc.from_numpy(q)).to_numpy()
    np.testing.assert_array_equal(got, (p + q).astype(npd))
    got = (wgc.from_numpy(p) < wgc.from_numpy(q)).to_numpy()  # bool out, an ArrayOp
    np.testing.assert_array_equal(got, p < q)
    got = (wgc.from_numpy(p) % wgc.from_numpy(q)).to_numpy()
    np.testing.assert_array_equal(got, np.remainder(p, q))
    # copies that cannot be windowed: 1024 outputs read places further apart than 4096
    with pytest.raises(wgc.ShapeError, match="too far apart"):
        b[::7].to_numpy()
    with pytest.raises(wgc.ShapeError, match="too far apart"):
        wgc.transpose(b[:30000].reshape(3, 100, 100), axes=(2, 1, 0))
