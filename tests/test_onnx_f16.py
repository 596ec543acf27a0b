"""dtype="f16" for interpreted ONNX models (transformers): the graph's float32 tensors live on
the GPU as float16, normalizations, softmax and reductions compute in float32, products sum in
float32 (or, precision="mixed", in float16 k slices), and outputs come back float32. Compared
with onnxruntime's float32 results on the same inputs: a small transformer encoder and graphs
of one operator under test (after a Neg, exact in float16, that keeps them interpreted)."""

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime (the reference)")
# float16 storage needs the adapter's shader-f16; the encoder's shapes and token ids are int64
pytestmark = pytest.mark.needs("shader-f16", "shader-int64")

from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402
from test_onnx_transformer import D, _inputs, encoder  # noqa: E402

import wgcompute as wgc  # noqa: E402
from wgcompute.errors import ModelError  # noqa: E402

# float16 has 11 significant bits: storing a value rounds it by up to 2^-11 ≈ 4.9e-4 of
# itself. One operator reads float16 inputs (the reference gets the same rounded inputs) and
# stores its result as float16, computing in float32 in between: a few such roundings, 2e-3
# of the largest output (measured 2e-4 to 7e-4 on lavapipe).
ONE_OP = 2e-3
# The encoder: every activation of two layers (about 25 operators each) is stored as float16
# and the residual stream carries the roundings on; LayerNormalization rescales them to the
# output's O(1) values. The products of D = 32 and FF = 64 terms sum in float32. Measured
# 1.5e-3 to 2.7e-3 of the largest output (lavapipe); 5e-3 leaves room for another adapter's
# exp and erf, and stays below what a wrong policy gives (a mask turned to -inf is nan).
ENCODER = 5e-3
# precision="mixed": each product's k slices of 8 or 16 terms also sum in float16, about
# 2^-11·√16 ≈ 2e-3 of |a|·|b| more per product with random signs, over the 8 products of a
# layer, which LayerNormalization rescales: ~1e-2 of the largest output at most (measured
# 2.7e-3 to 3.6e-3).
MIXED = 1e-2


def _ort(m, feeds):
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _rel(got, want) -> float:
    return float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())


# -- the encoder ------------------------------------------------------------------------------
@pytest.mark.parametrize("decomposed_norm", [False, True], ids=["LayerNormalization",
                                                                 "decomposed-norm"])
def test_encoder_f16_matches_onnxruntime(decomposed_norm):
    m = encoder(decomposed_norm, seed=6)
    model = wgc.ml.load_onnx(m, dtype="f16")
    assert model.path == "interpreted" and "f16" in repr(model)
    rng = np.random.default_rng(7)
    for batch, seq in ((2, 7), (3, 16)):
        feeds = _inputs(rng, batch, seq)
        got = model.run(feeds)[0]
        (ref,) = _ort(m, feeds)
        assert got.shape == ref.shape == (batch, seq, D) and got.dtype == np.float32
        assert _rel(got, ref) < ENCODER


def test_encoder_f16_takes_float16_inputs_and_buffers():
    """A float32 input is converted to float16 on the GPU, as numpy rounds it: float16
    arrays give the same result. Buffers in (float32 or float16), a float32 Buffer out."""
    m = encoder(False, seed=8)
    model = wgc.ml.load_onnx(m, dtype="f16")
    feeds = _inputs(np.random.default_rng(9), 2, 6)
    feeds["attention_mask"] = feeds["attention_mask"] + 0.1  # not exact in float16
    want = model.run(feeds)[0]
    half = dict(feeds, attention_mask=feeds["attention_mask"].astype(np.float16))
    np.testing.assert_array_equal(model.run(half)[0], want)
    for mask in (feeds["attention_mask"], half["attention_mask"]):
        out = model(wgc.buffer(feeds["input_ids"]), wgc.buffer(mask))
        assert isinstance(out, wgc.Buffer) and out.dtype == "f32" and out.shape == want.shape
        np.testing.assert_array_equal(out.to_numpy(), want)


def test_encoder_f16_calls_are_replayed(monkeypatch):
    """The second call of a shape replays the first's dispatches (ml/replay.py): the same
    result for the same inputs, and other inputs' own results."""
    from wgcompute.ml import eager

    m = encoder(False, seed=10)
    model = wgc.ml.load_onnx(m, dtype="f16")
    walks = []
    walk = eager._run_nodes
    monkeypatch.setattr(eager, "_run_nodes", lambda *a: walks.append(1) or walk(*a))
    rng = np.random.default_rng(11)
    feeds = _inputs(rng, 2, 9)
    first = model.run(feeds)[0]
    np.testing.assert_array_equal(model.run(feeds)[0], first)
    other = _inputs(rng, 2, 9)
    assert _rel(model.run(other)[0], _ort(m, other)[0]) < ENCODER
    assert model.replayed is None and len(walks) == 1


def test_encoder_f16_results_become_float32_on_the_gpu(monkeypatch):
    """A dtype="f16" model's float results are converted to the float32 the graph declares on
    the GPU: the first call and the replayed ones read float32 Buffers back (numpy's float16
    conversion is slow on a large output), equal to the float16 values widened."""
    from wgcompute.ml import eager

    m = encoder(False, seed=14)
    model = wgc.ml.load_onnx(m, dtype="f16")
    read = []
    to_host = eager.to_host
    monkeypatch.setattr(eager, "to_host", lambda v, elem: read.append(
        getattr(v, "dtype", None)) or to_host(v, elem))
    feeds = _inputs(np.random.default_rng(15), 2, 9)
    first = model.run(feeds)[0]
    again = model.run(feeds)[0]
    assert read and {str(d) for d in read} == {"f32"}
    assert first.dtype == again.dtype == np.float32
    np.testing.assert_array_equal(first, first.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(again, first)
    assert _rel(first, _ort(m, feeds)[0]) < ENCODER


def _precisions(monkeypatch) -> list:
    """The precision each product of activations is given (eager_half.sums' answers)."""
    from wgcompute.ml import eager_half

    seen = []
    sums = eager_half.sums
    monkeypatch.setattr(eager_half, "sums", lambda *a: seen.append(sums(*a)) or seen[-1])
    return seen


def test_encoder_f16_mixed_precision(monkeypatch):
    """precision="mixed": every product of activations whose output fills the GPU runs the
    matmul kernel at precision "mixed" (k slices summed in float16; here every product, the
    threshold set to 0); within the mixed bound of onnxruntime."""
    from wgcompute.ml import eager_half

    m = encoder(False, seed=12)
    model = wgc.ml.load_onnx(m, dtype="f16", precision="mixed")
    assert "mixed precision" in repr(model)
    monkeypatch.setattr(eager_half, "MIXED_MIN_BLOCKS", 0)
    seen = _precisions(monkeypatch)
    feeds = _inputs(np.random.default_rng(13), 2, 8)
    got = model.run(feeds)[0]
    assert got.dtype == np.float32
    assert _rel(got, _ort(m, feeds)[0]) < MIXED
    # 4 products a layer (Q, K and V as one; attention's two run in the attention kernel,
    # in f32)
    assert len(seen) >= 2 * 4 and set(seen) == {"mixed"}
    with pytest.raises(wgc.ArgumentError, match="precision.*dtype='f16'"):
        wgc.ml.load_onnx(m, precision="mixed")


def test_small_products_of_a_mixed_model_sum_in_f32(monkeypatch):
    """Products whose output has fewer than MIXED_MIN_BLOCKS blocks of 64 x 64 (every one of
    this small encoder's; a transformer's at batch 1) sum in float32 under precision="mixed"
    (the mixed tiles have no split-K); the result is within f16's bound."""
    from wgcompute.ml import eager_half

    assert eager_half.sums("mixed", 128, 768) == "f32"
    assert eager_half.sums("mixed", 4096, 768) == "mixed"
    assert eager_half.sums("mixed", 197, 197, batch=384) == "mixed"
    assert eager_half.sums("f32", 4096, 768) == "f32"
    m = encoder(False, seed=12)
    model = wgc.ml.load_onnx(m, dtype="f16", precision="mixed")
    seen = _precisions(monkeypatch)
    feeds = _inputs(np.random.default_rng(13), 2, 8)
    assert _rel(model.run(feeds)[0], _ort(m, feeds)[0]) < ENCODER
    assert len(seen) >= 2 * 4 and set(seen) == {"f32"}


def test_f16_is_refused_without_shader_f16(monkeypatch):
    """An adapter without shader-f16 cannot store float16: load_onnx says so, naming it
    (the feature removed from the device's set for this test)."""
    dev = wgc.current_device()
    monkeypatch.setattr(dev, "features", dev.features - {"shader-f16"})
    with pytest.raises(ModelError, match="dtype 'f16' needs the adapter feature 'shader-f16'"):
        wgc.ml.load_onnx(encoder(False), dtype="f16")


# -- one operator at a time -------------------------------------------------------------------
def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _one_op(op, data_inputs, inits=(), out_shape=None, **attrs):
    """A graph of ``op`` on Neg(x) and the other inputs ``data_inputs`` (name, elem, shape),
    float32 initializers ``inits`` (name -> array): interpreted (Neg is the interpreter's)."""
    (x, _, shape), rest = data_inputs[0], [n for n, _, _ in data_inputs[1:]]
    nodes = [helper.make_node("Neg", [x], ["nx"]),
             helper.make_node(op, ["nx", *rest, *[n for n, _ in inits]], ["y"], **attrs)]
    graph = helper.make_graph(nodes, op, [_vi(*v) for v in data_inputs],
                              [_vi("y", T.FLOAT, out_shape or shape)],
                              [numpy_helper.from_array(np.asarray(a, np.float32), n)
                               for n, a in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _check(m, feeds, bound=ONE_OP, **load):
    """The model's float16 result against onnxruntime's float32 one of the inputs as the
    model stores them (rounded to float16: the rounding of the input is not the operator's
    error; at 50, float16's step is 1/32)."""
    model = wgc.ml.load_onnx(m, dtype="f16", **load)
    assert model.path == "interpreted"
    got = model.run(feeds)[0]
    (ref,) = _ort(m, {k: v.astype(np.float16).astype(np.float32) if v.dtype == np.float32
                      else v for k, v in feeds.items()})
    assert got.dtype == np.float32 and got.shape == ref.shape
    assert _rel(got, ref) < bound, _rel(got, ref)
    np.testing.assert_array_equal(model.run(feeds)[0], got)  # replayed: the same
    return got


def _rand(rng, *shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def test_layer_normalization():
    """Offset rows (mean 50, spread 1) of 64: the statistics in float32. A float16 sum of a
    row (about 3200, where float16's step is 2) would move the mean by more than the bound
    allows."""
    rng = np.random.default_rng(0)
    m = _one_op("LayerNormalization", [("x", T.FLOAT, [3, 5, 64])],
                [("g", 1 + 0.1 * rng.standard_normal(64)), ("b", 0.1 * rng.standard_normal(64))],
                axis=-1, epsilon=1e-5)
    _check(m, {"x": _rand(rng, 3, 5, 64) + 50})


def test_softmax_of_wide_rows():
    """Rows of 1000 values (standard deviation 2): the exponentials summed in float32 (a
    float16 sum would round at each of the 1000 additions)."""
    rng = np.random.default_rng(1)
    m = _one_op("Softmax", [("x", T.FLOAT, [4, 1000])], axis=-1)
    _check(m, {"x": _rand(rng, 4, 1000, scale=2.0)})


@pytest.mark.parametrize("alpha", [1.0, 0.5], ids=["linear", "alpha"])
@pytest.mark.parametrize("precision", ["f32", "mixed"])
def test_gemm(alpha, precision):
    """A linear layer (B transposed, a bias) by the matmul kernel; alpha 0.5 through the
    planned path's kernel, as a one-node float16 model. K = 256: float32 sums keep the error
    at the roundings of storage; "mixed" adds its float16 slice sums (2^-11·√16 of |a|·|b|
    with random signs: within 4 × ONE_OP)."""
    rng = np.random.default_rng(2)
    m = _one_op("Gemm", [("a", T.FLOAT, [8, 256])],
                [("w", rng.standard_normal((48, 256)) / 16), ("c", rng.standard_normal(48))],
                out_shape=[8, 48], transB=1, alpha=alpha)
    _check(m, {"a": _rand(rng, 8, 256)}, ONE_OP if precision == "f32" else 4 * ONE_OP,
           precision=precision)


def test_erf_gelu():
    """GELU as exporters write it: x · (erf(x / √2) + 1) · 0.5."""
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Neg", ["x"], ["nx"]),
             helper.make_node("Div", ["nx", "sqrt2"], ["s"]),
             helper.make_node("Erf", ["s"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]),
             helper.make_node("Mul", ["nx", "e1"], ["p"]),
             helper.make_node("Mul", ["p", "half"], ["y"])]
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), n)
             for n, v in (("sqrt2", math.sqrt(2)), ("one", 1.0), ("half", 0.5))]
    graph = helper.make_graph(nodes, "gelu", [_vi("x", T.FLOAT, [6, 40])],
                              [_vi("y", T.FLOAT, [6, 40])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    _check(m, {"x": _rand(rng, 6, 40, scale=3.0)})


def test_where_and_expand_of_floats():
    """Expand a float row to a shape, then Where between it and a float32 constant (which
    the model stores as float16), as attention masks are built."""
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Neg", ["x"], ["nx"]),
             helper.make_node("Expand", ["nx", "shape"], ["ex"]),
             helper.make_node("Where", ["cond", "ex", "fill"], ["y"])]
    inits = [numpy_helper.from_array(np.array([3, 5, 7], np.int64), "shape"),
             numpy_helper.from_array(np.array(-1e4, np.float32), "fill")]
    graph = helper.make_graph(nodes, "where", [_vi("x", T.FLOAT, [5, 1]),
                                               _vi("cond", T.BOOL, [3, 5, 7])],
                              [_vi("y", T.FLOAT, [3, 5, 7])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    _check(m, {"x": _rand(rng, 5, 1), "cond": rng.random((3, 5, 7)) < 0.5})


def test_constants_beyond_float16_saturate():
    """A float32 constant past float16's range (a mask of float32's lowest value) is stored
    as -65504, not -inf: a row masked everywhere stays finite (equal probabilities, as in
    float32), where -inf would give nan."""
    lowest = float(np.finfo(np.float32).min)
    nodes = [helper.make_node("Neg", ["x"], ["nx"]),
             helper.make_node("Mul", ["mask", "lowest"], ["bias"]),
             helper.make_node("Add", ["nx", "bias"], ["s"]),
             helper.make_node("Softmax", ["s"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "masked", [_vi("x", T.FLOAT, [2, 4]),
                                                _vi("mask", T.FLOAT, [2, 4])],
                              [_vi("y", T.FLOAT, [2, 4])],
                              [numpy_helper.from_array(np.array(lowest, np.float32),
                                                       "lowest")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    x = np.array([[0.5, 1, 2, 3], [1, 2, 3, 4]], np.float32)
    mask = np.array([[0, 0, 1, 1], [1, 1, 1, 1]], np.float32)
    got = wgc.ml.load_onnx(m, dtype="f16").run({"x": x, "mask": mask})[0]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got[1], 0.25, rtol=ONE_OP)
    np.testing.assert_allclose(got[0], _ort(m, {"x": x, "mask": mask})[0][0], atol=ONE_OP)
