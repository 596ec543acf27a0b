"""Models that run interpreted (node by node on Buffers): single-node models built with
onnx.helper against onnxruntime, over dtypes (int64 and bool tensors computed at run time,
float64, float16), host values (shapes) mixed with computed ones, a model mixing the planned
path's operators with the interpreter's, and what the interpreter refuses (at load where the
model says it, else at the first call, the node named)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime (the reference)")
# interpreted models carry int64 (shapes, indices, token ids) and float64 tensors on the
# GPU: on adapters without shader-int64 (wgpu's GL backend) load_onnx refuses them, naming
# the feature (tests/test_onnx_backend.py checks those refusals)
pytestmark = pytest.mark.needs("shader-int64")

from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import wgcompute as wgc  # noqa: E402
from wgcompute.errors import ModelError  # noqa: E402

NP = {T.FLOAT: np.float32, T.DOUBLE: np.float64, T.FLOAT16: np.float16, T.INT32: np.int32,
      T.INT64: np.int64, T.BOOL: np.bool_, T.UINT8: np.uint8, T.UINT32: np.uint32,
      T.INT8: np.int8}


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _vi(name, elem=T.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _data(rng, shape, elem, positive=False):
    t = NP[elem]
    if t == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(t, np.integer):
        lo = 1 if positive else (0 if np.issubdtype(t, np.unsignedinteger) else -9)
        return rng.integers(lo, 10, shape).astype(t)
    x = rng.standard_normal(shape)
    return (np.abs(x) + 0.5 if positive else x).astype(t)


def _check(m, feeds, rtol=1e-5, atol=1e-6, path=None):
    """Run ``m`` on ``feeds`` (name -> array) with wgcompute and onnxruntime: same dtypes,
    same shapes, values within tolerance (exact for integers and bools); ``path``: the one
    the model must run on (a model of the planned path's operators on integer inputs may
    fold them on the host)."""
    model = wgc.ml.load_onnx(m)
    assert path is None or model.path == path, model.interpreted_because
    got = model.run(feeds)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = s.run(None, feeds)
    for g, r in zip(got, ref, strict=True):
        assert g.dtype == r.dtype and g.shape == r.shape, (g.dtype, g.shape, r.dtype, r.shape)
        if r.dtype.kind in "biu":
            np.testing.assert_array_equal(g, r)
        else:
            np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), rtol=rtol,
                                       atol=atol)
    return model


# -- elementwise, over types -------------------------------------------------------------------
UNARY = [("Abs", T.INT64), ("Neg", T.INT32), ("Neg", T.DOUBLE), ("Floor", T.FLOAT),
         ("Ceil", T.DOUBLE), ("Round", T.FLOAT), ("Sign", T.INT64), ("Exp", T.DOUBLE),
         ("Log", T.FLOAT), ("Sqrt", T.FLOAT), ("Sin", T.FLOAT), ("Cos", T.DOUBLE),
         ("Tan", T.FLOAT), ("Atan", T.FLOAT), ("Sinh", T.FLOAT), ("Cosh", T.FLOAT),
         ("Asinh", T.FLOAT), ("Tanh", T.FLOAT), ("Tanh", T.FLOAT16), ("Reciprocal", T.FLOAT),
         ("Not", T.BOOL), ("IsNaN", T.FLOAT), ("IsInf", T.DOUBLE), ("Exp", T.FLOAT16),
         ("Relu", T.INT32), ("Sigmoid", T.DOUBLE), ("BitwiseNot", T.INT32)]


@pytest.mark.parametrize("op, elem", UNARY, ids=[f"{o}-{NP[e].__name__}" for o, e in UNARY])
def test_unary_matches_onnxruntime(op, elem):
    rng = np.random.default_rng(0)
    x = _data(rng, (3, 5), elem, positive=op in ("Log", "Sqrt"))
    if op in ("IsNaN", "IsInf"):
        x.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    out = T.BOOL if op in ("IsNaN", "IsInf", "Not") else elem
    first = [] if elem == T.BOOL else [helper.make_node("Max", ["x0"], ["x"])]  # see below
    m = _model(first + [helper.make_node(op, ["x"], ["y"])],
               [_vi("x0" if first else "x", elem, [3, 5])], [_vi("y", out)], opset=18)
    _check(m, {"x0" if first else "x": x}, rtol=1e-3 if elem == T.FLOAT16 else 1e-5,
           path="interpreted")


BINARY = [("Add", T.INT64), ("Sub", T.INT32), ("Mul", T.DOUBLE), ("Div", T.INT32),
          ("Div", T.INT64), ("Div", T.FLOAT16), ("Pow", T.FLOAT), ("Equal", T.INT64),
          ("Less", T.FLOAT), ("GreaterOrEqual", T.INT32), ("LessOrEqual", T.DOUBLE),
          ("And", T.BOOL), ("Or", T.BOOL), ("Xor", T.BOOL), ("BitwiseAnd", T.INT32),
          ("BitwiseXor", T.UINT8), ("Max", T.INT64), ("Min", T.FLOAT), ("Sum", T.DOUBLE),
          ("Mean", T.FLOAT), ("Add", T.UINT8), ("Mul", T.FLOAT16)]


@pytest.mark.parametrize("op, elem", BINARY, ids=[f"{o}-{NP[e].__name__}" for o, e in BINARY])
def test_binary_broadcast_matches_onnxruntime(op, elem):
    """(3, 1, 5) with (4, 1): numpy's broadcasting, ONNX's type rules (integer Div truncates
    toward zero)."""
    rng = np.random.default_rng(1)
    a = _data(rng, (3, 1, 5), elem, positive=op == "Pow")
    b = _data(rng, (4, 1), elem, positive=op in ("Div", "Pow"))
    if op == "Div" and elem in (T.INT32, T.INT64):
        b = b * np.where(rng.random(b.shape) < 0.5, -1, 1).astype(b.dtype)
    cmp = op in ("Equal", "Less", "GreaterOrEqual", "LessOrEqual")
    # Max of one input (a copy) runs interpreted only: the planned path folds integer inputs
    # on the host, and the operator must compute on the GPU here
    first = [] if elem == T.BOOL else [helper.make_node("Max", ["a0"], ["a"])]
    m = _model(first + [helper.make_node(op, ["a", "b"], ["y"])],
               [_vi("a0" if first else "a", elem, [3, 1, 5]), _vi("b", elem, [4, 1])],
               [_vi("y", T.BOOL if cmp else elem)], opset=18)
    _check(m, {"a0" if first else "a": a, "b": b}, rtol=1e-3 if elem == T.FLOAT16 else 1e-5,
           path="interpreted")


@pytest.mark.parametrize("elem, fmod", [(T.INT32, 0), (T.INT64, 1), (T.FLOAT, 1),
                                        (T.DOUBLE, 1), (T.INT64, 0)])
def test_mod_takes_the_sign_fmod_says(elem, fmod):
    a = np.array([-7, 7, -7, 7, 5, -3], NP[elem])
    b = np.array([3, -3, -3, 3, 2, 4], NP[elem])
    m = _model([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)],
               [_vi("a", elem, [6]), _vi("b", elem, [6])], [_vi("y", elem)])
    _check(m, {"a": a, "b": b})


def test_pow_of_a_float_to_an_integer_exponent():
    x = np.array([1.5, -2.0, 3.0], np.float32)
    e = np.array([2, 3, -1], np.int64)
    m = _model([helper.make_node("Pow", ["x", "e"], ["y"])],
               [_vi("x", T.FLOAT, [3]), _vi("e", T.INT64, [3])], [_vi("y")])
    _check(m, {"x": x, "e": e})


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift(direction):
    x = np.array([1, 16, 255, 7], np.uint32)
    s = np.array([1, 2, 3, 0], np.uint32)
    m = _model([helper.make_node("BitShift", ["x", "s"], ["y"], direction=direction)],
               [_vi("x", T.UINT32, [4]), _vi("s", T.UINT32, [4])], [_vi("y", T.UINT32)])
    _check(m, {"x": x, "s": s})


def test_where_with_a_computed_bool_condition():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3,)).astype(
        np.float32)
    m = _model([helper.make_node("Greater", ["a", "b"], ["c"]),
                helper.make_node("Where", ["c", "a", "b"], ["y"])],
               [_vi("a", T.FLOAT, [2, 3]), _vi("b", T.FLOAT, [3])], [_vi("y")])
    _check(m, {"a": a, "b": b})


@pytest.mark.parametrize("to", [T.INT64, T.INT32, T.BOOL, T.DOUBLE, T.FLOAT16, T.UINT8])
def test_cast_of_a_computed_tensor(to):
    x = np.array([-2.7, -0.5, 0.0, 0.5, 3.9, 100.2], np.float32)
    if to == T.UINT8:
        x = np.abs(x)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=to)], [_vi("x", T.FLOAT, [6])],
               [_vi("y", to)])
    _check(m, {"x": x}, rtol=1e-3)


def test_castlike_and_size():
    x = np.array([[1.7, -2.2, 3.0]], np.float32)
    like = np.array([0], np.int32)
    m = _model([helper.make_node("CastLike", ["x", "like"], ["y"]),
                helper.make_node("Size", ["x"], ["n"])],
               [_vi("x", T.FLOAT, [1, 3]), _vi("like", T.INT32, [1])],
               [_vi("y", T.INT32), _vi("n", T.INT64)])
    _check(m, {"x": x, "like": like})


# -- reductions, argmax, softmax ---------------------------------------------------------------
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                                "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
                                "ReduceLogSumExp"])
@pytest.mark.parametrize("axes, keepdims", [([1], 1), ([0, 2], 0), ([-1], 1), (None, 0)])
def test_reductions_with_axes_as_an_input(op, axes, keepdims):
    """opset 18: axes are an input (a constant here); none: every axis."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    inits = [] if axes is None else [numpy_helper.from_array(np.array(axes, np.int64), "ax")]
    m = _model([helper.make_node(op, ["x", "ax"] if axes is not None else ["x"], ["y"],
                                 keepdims=keepdims)],
               [_vi("x", T.FLOAT, [2, 3, 4])], [_vi("y")], inits, opset=18)
    _check(m, {"x": x}, rtol=1e-5, atol=1e-5)


def test_reduce_sum_of_int64_with_axes_as_attribute_and_noop():
    x = np.arange(24, dtype=np.int64).reshape(2, 3, 4) - 7
    m = _model([helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0,
                                 name="old")], [_vi("x", T.INT64, [2, 3, 4])],
               [_vi("y", T.INT64)], opset=11)
    _check(m, {"x": x})
    empty = numpy_helper.from_array(np.array([], np.int64), "none")
    m = _model([helper.make_node("ReduceSum", ["x", "none"], ["y"], noop_with_empty_axes=1)],
               [_vi("x", T.INT64, [2, 3, 4])], [_vi("y", T.INT64)], [empty], opset=13)
    _check(m, {"x": x})


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_argmax_with_ties(op, last):
    x = np.array([[1, 3, 3, 0], [2, 2, -1, -1]], np.int32)
    m = _model([helper.make_node(op, ["x"], ["y"], axis=1, keepdims=0,
                                 select_last_index=last)],
               [_vi("x", T.INT32, [2, 4])], [_vi("y", T.INT64)])
    _check(m, {"x": x})


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis, opset", [(0, 13), (1, 13), (-1, 13), (1, 11), (0, 11)])
def test_softmax_on_every_axis(op, axis, opset):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4)).astype(np.float64)
    m = _model([helper.make_node(op, ["x"], ["y"], axis=axis)], [_vi("x", T.DOUBLE, [2, 3, 4])],
               [_vi("y", T.DOUBLE)], opset=opset)
    _check(m, {"x": x}, rtol=1e-10, atol=1e-12)


# -- host values mixed with computed ones ------------------------------------------------------
def test_shape_arithmetic_on_the_host_reshapes_a_computed_tensor():
    """Shape -> Gather -> Mul -> Concat -> Reshape: the shape folds on the host each call,
    the data computes on the GPU; a new input shape gives a new target."""
    c = {n: numpy_helper.from_array(np.array(v, np.int64), n)
         for n, v in [("i0", 0), ("i1", [1, 2]), ("m1", [-1])]}
    nodes = [helper.make_node("Exp", ["x"], ["e"]),
             helper.make_node("Shape", ["e"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["b"]),
             helper.make_node("Gather", ["s", "i1"], ["hw"]),
             helper.make_node("ReduceProd", ["hw"], ["p"], keepdims=1),
             helper.make_node("Unsqueeze", ["b", "i0"], ["b1"]),
             helper.make_node("Concat", ["b1", "p"], ["t"], axis=0),
             helper.make_node("Reshape", ["e", "t"], ["y"])]
    m = _model(nodes, [_vi("x", T.FLOAT, ["n", "h", "w"])], [_vi("y")], list(c.values()))
    rng = np.random.default_rng(5)
    model = _check(m, {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)}, path="interpreted")
    assert model.run([np.zeros((1, 5, 2), np.float32)])[0].shape == (1, 10)


def test_int64_and_bool_tensors_computed_at_run_time():
    """Indices computed on the GPU (int64 arithmetic), a bool mask from them, then Gather of
    the data at the computed indices."""
    nodes = [helper.make_node("Add", ["i", "one"], ["j"]),
             helper.make_node("Less", ["j", "three"], ["mask"]),
             helper.make_node("Where", ["mask", "j", "zero"], ["k"]),
             helper.make_node("Gather", ["x", "k"], ["y"], axis=1),
             helper.make_node("Not", ["mask"], ["nm"])]
    inits = [numpy_helper.from_array(np.array(v, np.int64), n)
             for n, v in [("one", 1), ("three", 3), ("zero", 0)]]
    m = _model(nodes, [_vi("x", T.FLOAT, [2, 4]), _vi("i", T.INT64, [5])],
               [_vi("y"), _vi("nm", T.BOOL)], inits)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    _check(m, {"x": x, "i": np.array([0, 1, 2, 3, -1], np.int64)}, path="interpreted")


def test_slice_of_a_computed_tensor_with_steps():
    inits = [numpy_helper.from_array(np.array(v, np.int64), n)
             for n, v in [("s", [5, 0]), ("e", [-100, 3]), ("a", [0, 1]), ("st", [-2, 1])]]
    m = _model([helper.make_node("Neg", ["x"], ["n"]),
                helper.make_node("Slice", ["n", "s", "e", "a", "st"], ["y"])],
               [_vi("x", T.FLOAT, [6, 4])], [_vi("y")], inits, opset=13)
    _check(m, {"x": np.arange(24, dtype=np.float32).reshape(6, 4)}, path="interpreted")


def test_a_model_mixing_planned_operators_with_the_interpreters():
    """Conv, BatchNormalization, Relu, MaxPool, Gemm (planned-path kernels, run one node at a
    time) around ReduceMean, Sqrt, Div (the interpreter's own)."""
    rng = np.random.default_rng(6)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    stats = [rng.random(4).astype(np.float32) + 0.5 for _ in range(4)]
    g = rng.standard_normal((4, 5)).astype(np.float32)
    ax = np.array([2, 3], np.int64)
    inits = [numpy_helper.from_array(v, n) for v, n in
             [(w, "w"), (stats[0], "sc"), (stats[1], "bi"), (stats[2], "mu"), (stats[3], "va"),
              (g, "g"), (ax, "ax")]]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "sc", "bi", "mu", "va"], ["b"]),
             helper.make_node("Relu", ["b"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("ReduceSumSquare", ["p", "ax"], ["ss"], keepdims=0),
             helper.make_node("Sqrt", ["ss"], ["n"]),
             helper.make_node("Gemm", ["n", "g"], ["y"])]
    m = _model(nodes, [_vi("x", T.FLOAT, [2, 3, 8, 8])], [_vi("y")], inits, opset=18)
    _check(m, {"x": rng.standard_normal((2, 3, 8, 8)).astype(np.float32)}, rtol=1e-4,
           atol=1e-4, path="interpreted")


def test_buffers_in_buffers_out():
    m = _model([helper.make_node("Equal", ["a", "b"], ["y"])],
               [_vi("a", T.INT64, [3]), _vi("b", T.INT64, [3])], [_vi("y", T.BOOL)])
    model = wgc.ml.load_onnx(m)
    a, b = wgc.buffer(np.array([1, 2, 3])), wgc.buffer(np.array([1, 0, 3]))
    out = model(a, b)
    assert isinstance(out, wgc.Buffer) and out.dtype == "bool"
    np.testing.assert_array_equal(out.to_numpy(), [True, False, True])


def test_a_cnn_stays_on_the_planned_path():
    w = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
    m = _model([helper.make_node("Conv", ["x", "w"], ["c"]),
                helper.make_node("Relu", ["c"], ["y"])], [_vi("x", T.FLOAT, [1, 1, 5, 5])],
               [_vi("y")], [w])
    model = _check(m, {"x": np.ones((1, 1, 5, 5), np.float32)}, path="planned")
    assert "planned" in repr(model) and model.interpreted_because is None


# -- refusals ----------------------------------------------------------------------------------
def test_an_interpreted_model_says_why_in_its_repr():
    m = _model([helper.make_node("Exp", ["x"], ["y"])], [_vi("x", T.FLOAT, [2])], [_vi("y")])
    model = wgc.ml.load_onnx(m)
    assert "interpreted" in repr(model) and "Exp" in model.interpreted_because
    with pytest.raises(ModelError, match="plan needs the planned path"):
        model.plan((2,))
    if wgc.current_device().has("shader-f16"):  # f16 storage (tests/test_onnx_f16.py)
        half = wgc.ml.load_onnx(m, dtype="f16")
        assert "interpreted" in repr(half) and "f16" in repr(half)


def test_a_computed_shape_is_refused_at_the_first_call():
    """A Reshape whose target is computed on the GPU from data (a large tensor): the
    interpreter needs it on the host."""
    inits = [numpy_helper.from_array(np.array(v, np.int64), n)
             for n, v in [("s", [0]), ("e", [2])]]
    m = _model([helper.make_node("Slice", ["x", "s", "e"], ["xs"]),
                helper.make_node("Cast", ["xs"], ["t"], to=T.INT64),
                helper.make_node("Reshape", ["x", "t"], ["y"], name="rs")],
               [_vi("x", T.FLOAT, [6000])], [_vi("y")], inits)
    model = wgc.ml.load_onnx(m)
    x = np.ones(6000, np.float32)
    x[:2] = [2, -1]
    with pytest.raises(ModelError, match="Reshape 'rs'.*must be known when the model is "
                                         "planned"):
        model.run([x])


def test_a_shape_computed_on_the_gpu_from_an_integer_input_is_recomputed_on_the_host():
    """Abs of an int64 input runs on the GPU; the Reshape that takes it as its target gets
    it computed again on the host from the input's values (small: shape arithmetic)."""
    m = _model([helper.make_node("Abs", ["t"], ["ta"]),
                helper.make_node("Neg", ["ta"], ["tn"]),
                helper.make_node("Neg", ["tn"], ["tt"]),
                helper.make_node("Reshape", ["x", "tt"], ["y"], name="rs")],
               [_vi("x", T.FLOAT, [6]), _vi("t", T.INT64, [2])], [_vi("y")])
    _check(m, {"x": np.arange(6, dtype=np.float32), "t": np.array([-2, 3])},
           path="interpreted")


def test_a_shape_given_as_an_input_is_read_from_the_input():
    m = _model([helper.make_node("Exp", ["x"], ["e"]),
                helper.make_node("Reshape", ["e", "t"], ["y"])],
               [_vi("x", T.FLOAT, [6]), _vi("t", T.INT64, [2])], [_vi("y")])
    _check(m, {"x": np.ones(6, np.float32), "t": np.array([3, -1], np.int64)}, path="interpreted")


@pytest.mark.parametrize("to, why", [(T.BFLOAT16, "BFLOAT16"), (T.STRING, "STRING")])
def test_casts_to_types_wgcompute_lacks_are_refused_at_load(to, why):
    m = _model([helper.make_node("Exp", ["x"], ["e"]),
                helper.make_node("Cast", ["e"], ["y"], to=to, name="c")],
               [_vi("x", T.FLOAT, [2])], [_vi("y", to)])
    with pytest.raises(ModelError, match=f"Cast 'c'.*{why}"):
        wgc.ml.load_onnx(m)


def test_mixed_input_types_are_refused_naming_the_node():
    m = _model([helper.make_node("BitwiseOr", ["a", "b"], ["y"], name="mix")],
               [_vi("a", T.INT32, [2]), _vi("b", T.INT64, [2])], [_vi("y", T.INT64)])
    model = wgc.ml.load_onnx(m)
    with pytest.raises(ModelError, match="BitwiseOr 'mix'.*s32 and s64"):
        model.run([np.ones(2, np.int32), np.ones(2, np.int64)])


def test_an_integer_input_out_of_its_declared_range_is_refused():
    m = _model([helper.make_node("Neg", ["a"], ["y"])], [_vi("a", T.INT32, [2])],
               [_vi("y", T.INT32)])
    with pytest.raises(wgc.WgComputeError, match="'a'"):
        wgc.ml.load_onnx(m).run([np.array([1, 2**40])])


def test_float16_matmul_concat_and_fill():
    """The array namespace has no float16: the interpreter moves it through float32 (exact
    for Concat and the fill, MatMul rounded once)."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 3, 4)).astype(np.float16)
    b = rng.standard_normal((4, 5)).astype(np.float16)
    fill = helper.make_tensor("v", T.FLOAT16, [1], [0.5])
    shape = numpy_helper.from_array(np.array([2, 3, 5], np.int64), "shape")
    m = _model([helper.make_node("Neg", ["a0"], ["a"]),  # (interpreted only)
                helper.make_node("MatMul", ["a", "b"], ["p"]),
                helper.make_node("ConstantOfShape", ["shape"], ["h"], value=fill),
                helper.make_node("Concat", ["p", "h", "p"], ["y"], axis=-1)],
               [_vi("a0", T.FLOAT16, [2, 3, 4]), _vi("b", T.FLOAT16, [4, 5])],
               [_vi("y", T.FLOAT16)], [shape])
    _check(m, {"a0": a, "b": b}, rtol=2e-3, atol=2e-3, path="interpreted")


def test_float16_softmax_rounds_each_step_as_onnx_reference_does():
    """float16 Softmax: exp, sum and divide each rounded to float16, as ONNX's reference
    computes it (a float32 softmax rounded once differs by an ulp here and there)."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(8)
    x = (rng.standard_normal((4, 3, 16)) * 3).astype(np.float16)
    m = _model([helper.make_node("Neg", ["x0"], ["x"]),
                helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
               [_vi("x0", T.FLOAT16, [4, 3, 16])], [_vi("y", T.FLOAT16)])
    got = wgc.ml.load_onnx(m).run([x])[0]
    ref = ReferenceEvaluator(m).run(None, {"x0": x})[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=1e-3,
                               atol=0)


def test_results_that_outgrow_their_inputs_are_not_folded_on_the_host():
    """Range and Expand of small constants into large results compute on the GPU (a
    folded Range(0, 10**9) would take 8 GB on the host at load)."""
    import tracemalloc

    c = {n: numpy_helper.from_array(np.array(v, np.int64), n)
         for n, v in [("zero", 0), ("big", 10**9), ("one", 1), ("n", 5000), ("shape", [3, 5000])]}
    huge = _model([helper.make_node("Range", ["zero", "big", "one"], ["r"]),
                   helper.make_node("Add", ["r", "x"], ["y"])],
                  [_vi("x", T.INT64, [1])], [_vi("y", T.INT64)], list(c.values()))
    tracemalloc.start()
    try:
        wgc.ml.load_onnx(huge)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20
    m = _model([helper.make_node("Range", ["zero", "n", "one"], ["r"]),
                helper.make_node("Expand", ["r", "shape"], ["e"]),
                helper.make_node("Mul", ["e", "x"], ["y"])],
               [_vi("x", T.INT64, [3, 1])], [_vi("y", T.INT64)], list(c.values()))
    _check(m, {"x": np.array([[1], [-2], [3]], np.int64)}, path="interpreted")


def test_integer_inputs_read_as_data_run_interpreted_and_as_parameters_planned():
    """An Add of int64 inputs computes on the GPU (interpreted), not with numpy on the host;
    an int64 input that is a Reshape's target stays a parameter of the planned path."""
    m = _model([helper.make_node("Add", ["a", "b"], ["y"])],
               [_vi("a", T.INT64, [3]), _vi("b", T.INT64, [3])], [_vi("y", T.INT64)])
    model = _check(m, {"a": np.array([1, -2, 2**40]), "b": np.array([5, 7, 1])},
                   path="interpreted")
    assert "integer input 'a'" in model.interpreted_because
    m = _model([helper.make_node("Reshape", ["x", "t"], ["y"])],
               [_vi("x", T.FLOAT, [6]), _vi("t", T.INT64, [2])], [_vi("y")])
    _check(m, {"x": np.arange(6, dtype=np.float32), "t": np.array([2, 3])}, path="planned")


@pytest.mark.parametrize("elem", [T.UINT8, T.INT8])
def test_max_pooling_of_8_bit_integers(elem):
    x = _data(np.random.default_rng(9), (1, 2, 5, 5), elem)
    m = _model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 1])],
               [_vi("x", elem, [1, 2, 5, 5])], [_vi("y", elem)])
    _check(m, {"x": x}, path="interpreted")


def test_berts_token_type_embedding_folds_on_the_host():
    """transformers' BertEmbeddings exports token types as Expand of a (1, 512) buffer, a
    GatherElements by the (1, seq) position ids, and Expand to (batch, seq), all of them host
    values; onnx's reference GatherElements reads one element there (a reshape error), the
    fold is numpy's take_along_axis. Compared with onnxruntime."""
    import onnxruntime as ort

    seq = 128
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.arange(512, dtype=np.int64)[None], "pos_buf"),
             numpy_helper.from_array(np.zeros((1, 512), np.int64), "tt_buf"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array([2], np.int64), "two"),
             numpy_helper.from_array(np.array([-1], np.int64), "m1"),
             numpy_helper.from_array(rng.standard_normal((2, 8)).astype(np.float32), "emb")]
    ones = numpy_helper.from_array(np.array([1], np.int64))
    nodes = [helper.make_node("Shape", ["ids"], ["sh"]),
             helper.make_node("Gather", ["sh", "one"], ["seq"], axis=0),
             helper.make_node("Gather", ["sh", "zero"], ["bat"], axis=0),
             helper.make_node("Slice", ["pos_buf", "zero", "seq", "one"], ["pos"]),
             helper.make_node("Shape", ["pos"], ["psh"]),
             helper.make_node("Gather", ["psh", "zero"], ["p0"], axis=0),
             helper.make_node("Concat", ["p0", "m1"], ["eshape"], axis=0),
             helper.make_node("Equal", ["eshape", "m1"], ["eq"]),
             helper.make_node("ConstantOfShape", ["two"], ["ones"], value=ones),
             helper.make_node("Where", ["eq", "ones", "eshape"], ["eshape2"]),
             helper.make_node("Expand", ["tt_buf", "eshape2"], ["tte"]),
             helper.make_node("GatherElements", ["tte", "pos"], ["ttg"], axis=1),
             helper.make_node("Concat", ["bat", "seq"], ["bshape"], axis=0),
             helper.make_node("Expand", ["ttg", "bshape"], ["tt"]),
             helper.make_node("Gather", ["emb", "tt"], ["y"], axis=0)]
    graph = helper.make_graph(nodes, "emb", [helper.make_tensor_value_info("ids", T.INT64,
                                                                           ["N", seq])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["N", seq, 8])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    ids = np.zeros((2, seq), np.int64)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"ids": ids})[0]
    got = wgc.ml.load_onnx(model).run({"ids": ids})[0]
    np.testing.assert_array_equal(got, want)
