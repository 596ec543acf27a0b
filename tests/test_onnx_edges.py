"""ONNX models at the edges of what load_onnx accepts: fusions whose shapes must make them
exact (against onnxruntime), types wgcompute does not compute (refused, not approximated),
graphs that are not valid ONNX, nodes the run could not do (refused at load, named), external
data outside a model's folder, and constants that fold into more memory than the file
promises (refused before anything is allocated)."""

import os
import tracemalloc

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime (the reference)")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import wgcompute as wgc  # noqa: E402
from wgcompute.errors import ModelError  # noqa: E402


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _ort(model, feeds):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


# -- fusions: only where the shapes make them exact ------------------------------------------------
@pytest.mark.parametrize("sa, sb, sc", [
    ((4,), (2, 4, 5), (2, 5)),        # the bias's batch axis must not meet the product's row
    ((4,), (2, 4, 5), (5,)),
    ((4,), (2, 4, 5), (2, 1)),
    ((3, 4), (4,), (3,)),
    ((2, 3, 4), (4,), (2, 3)),
    ((2, 3, 4), (4,), (2, 1)),
    ((4,), (4,), ()),
    ((2, 3, 4), (4, 5), (3, 5)),
    ((2, 3, 4), (2, 4, 5), (2, 1, 5)),
    ((3, 4), (4, 5), (3, 1)),
])
def test_matmul_bias_fusion_matches_onnxruntime(sa, sb, sc):
    rng = np.random.default_rng(0)
    b = rng.standard_normal(sb).astype(np.float32)
    c = rng.standard_normal(sc).astype(np.float32)
    out_shape = np.matmul(np.zeros(sa, np.float32), b).shape
    out_shape = np.broadcast_shapes(out_shape, c.shape)
    m = _model([helper.make_node("MatMul", ["a", "b"], ["p"], name="mm"),
                helper.make_node("Add", ["p", "c"], ["y"], name="bias")],
               [_vi("a", list(sa))], [_vi("y", list(out_shape))], [_init("b", b), _init("c", c)])
    a = rng.standard_normal(sa).astype(np.float32)
    ref = _ort(m, {"a": a})[0]
    got = wgc.ml.load_onnx(m)(a)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("sc", [(3, 1), (1, 3), (3,), (3, 3), (1,)])
def test_gemm_bias_shapes_match_onnxruntime(sc, trans_b):
    """A classifier Gemm runs as a 1×1 convolution adding one bias per output column: a
    (M, 1) c on a square output holds as many values, one per row."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((3, 4) if trans_b else (4, 3)).astype(np.float32)
    c = rng.standard_normal(sc).astype(np.float32)
    m = _model([helper.make_node("Gemm", ["x", "w", "c"], ["y"], name="fc", transB=trans_b)],
               [_vi("x", [3, 4])], [_vi("y", [3, 3])], [_init("w", w), _init("c", c)])
    x = rng.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(wgc.ml.load_onnx(m)(x), _ort(m, {"x": x})[0], rtol=1e-5,
                               atol=1e-5)


# -- types: computed exactly or refused ------------------------------------------------------------
@pytest.mark.parametrize("to", [TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E4M3FN,
                                TensorProto.BFLOAT16, TensorProto.INT4])
def test_cast_to_types_wgcompute_lacks_is_refused(to):
    m = _model([helper.make_node("Cast", ["x"], ["y"], name="narrow", to=to)],
               [_vi("x", [2])], [_vi("y", [2], to)])
    with pytest.raises(ModelError, match=r"Cast 'narrow'.*a cast to"):
        wgc.ml.load_onnx(m)


def test_cast_of_a_constant_to_float8_is_refused():
    m = _model([helper.make_node("Cast", ["k"], ["k8"], name="narrow",
                                 to=TensorProto.FLOAT8E5M2),
                helper.make_node("Cast", ["k8"], ["k32"], name="back", to=TensorProto.FLOAT),
                helper.make_node("Add", ["x", "k32"], ["y"], name="add")],
               [_vi("x", [2])], [_vi("y", [2])],
               [_init("k", np.array([0.479, 1e6], np.float32))])
    with pytest.raises(ModelError, match="narrow"):
        wgc.ml.load_onnx(m)


def test_double_arithmetic_runs_in_float64():
    """float64 arithmetic runs interpreted in float64 (never float32 with a float64 label);
    an adapter without shader-f64 refuses it at load."""
    m = _model([helper.make_node("Add", ["a", "b"], ["y"], name="add64")],
               [_vi("a", [2], TensorProto.DOUBLE), _vi("b", [2], TensorProto.DOUBLE)],
               [_vi("y", [2], TensorProto.DOUBLE)])
    if not wgc.default_device().has("shader-f64"):
        with pytest.raises(ModelError, match=r"'a'.*shader-f64"):
            wgc.ml.load_onnx(m)
        return
    a, b = np.array([0.1, 1e300]), np.array([0.2, 1e-300])
    got = wgc.ml.load_onnx(m).run([a, b])[0]
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, _ort(m, {"a": a, "b": b})[0])  # 0.1 + 0.2 in f64


def test_exact_double_casts_still_run():
    """float32 -> float64 and float64 -> float32 are exact where computed in float32."""
    m = _model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                helper.make_node("Cast", ["r"], ["y"], name="up", to=TensorProto.DOUBLE),
                helper.make_node("Cast", ["d"], ["z"], name="down", to=TensorProto.FLOAT)],
               [_vi("x", [3]), _vi("d", [3], TensorProto.DOUBLE)],
               [_vi("y", [3], TensorProto.DOUBLE), _vi("z", [3])])
    x = np.array([-1.0, 0.1, 3e38], np.float32)
    d = np.array([1e300, 0.1, -2.5], np.float64)
    with np.errstate(over="ignore"):  # 1e300 is inf in float32, as Cast says
        got = wgc.ml.load_onnx(m).run([x, d])
    ref = _ort(m, {"x": x, "d": d})
    for g, r in zip(got, ref, strict=True):
        assert g.dtype == r.dtype
        np.testing.assert_array_equal(g, r)


@pytest.mark.needs("shader-f16")
def test_cast_to_float16_feeding_arithmetic_keeps_its_rounding():
    """The cast rounds to float16 before the Add reads it (interpreted, in float16)."""
    m = _model([helper.make_node("Cast", ["x"], ["h"], name="half", to=TensorProto.FLOAT16),
                helper.make_node("Add", ["h", "h"], ["y"], name="twice")],
               [_vi("x", [2])], [_vi("y", [2], TensorProto.FLOAT16)])
    x = np.array([0.1, 1000.3], np.float32)
    got = wgc.ml.load_onnx(m).run([x])[0]
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, _ort(m, {"x": x})[0])


# -- graphs that are not valid ONNX ----------------------------------------------------------------
def test_two_nodes_writing_one_value_are_refused():
    m = _model([helper.make_node("Relu", ["x"], ["t"], name="first"),
                helper.make_node("Sigmoid", ["x"], ["t"], name="second"),
                helper.make_node("Identity", ["t"], ["y"], name="out")],
               [_vi("x", [2])], [_vi("y", [2])])
    with pytest.raises(ModelError, match=r"Sigmoid 'second' writes 't', already written by "
                                         r"Relu 'first'"):
        wgc.ml.load_onnx(m)


def test_node_writing_its_own_input_is_refused():
    m = _model([helper.make_node("Relu", ["x"], ["x"], name="loop"),
                helper.make_node("Identity", ["x"], ["y"], name="out")],
               [_vi("x", [2])], [_vi("y", [2])])
    with pytest.raises(ModelError, match=r"Relu 'loop' writes 'x', already written by the "
                                         r"graph's input"):
        wgc.ml.load_onnx(m)


def test_node_reading_its_own_output_is_refused():
    m = _model([helper.make_node("Add", ["x", "t"], ["t"], name="cycle"),
                helper.make_node("Identity", ["t"], ["y"], name="out")],
               [_vi("x", [2])], [_vi("y", [2])])
    with pytest.raises(ModelError, match=r"Add 'cycle' reads 't', its own output"):
        wgc.ml.load_onnx(m)


# -- what the run cannot do is refused at load, the node named -------------------------------------
def test_slice_of_a_computed_tensor_runs():
    m = _model([helper.make_node("Slice", ["x", "s", "e"], ["y"], name="cut")],
               [_vi("x", [4])], [_vi("y", [2])],
               [_init("s", np.array([1])), _init("e", np.array([3]))], opset=13)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(wgc.ml.load_onnx(m).run([x])[0], x[1:3])


def _convtranspose_3d():
    w = np.ones((1, 1, 2, 2, 2), np.float32)
    return _model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up3")],
                  [_vi("x", [1, 1, 2, 2, 2])], [_vi("y", [1, 1, 3, 3, 3])], [_init("w", w)])


def test_training_mode_given_at_run_time_is_refused_when_true():
    """Dropout's training_mode as an input: known only at the call, refused there if True."""
    m = _model([helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="drop")],
               [_vi("x", [4]), _vi("t", [], TensorProto.BOOL)], [_vi("y", [4])],
               [_init("r", np.array(0.5, np.float32))])
    model = wgc.ml.load_onnx(m)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(model.run([x, np.array(False)])[0], x)
    with pytest.raises(ModelError, match=r"Dropout 'drop'.*training_mode"):
        model.run([x, np.array(True)])


def _integer_pool():
    """int32 does not fit float32 exactly (uint8 and int16 max-pool through it, exactly)."""
    return _model([helper.make_node("MaxPool", ["x"], ["y"], name="pool8",
                                    kernel_shape=[2, 2])],
                  [_vi("x", [1, 1, 4, 4], TensorProto.INT32)],
                  [_vi("y", [1, 1, 3, 3], TensorProto.INT32)])


@pytest.mark.parametrize("make, node", [(_convtranspose_3d, "ConvTranspose 'up3'"),
                                        (_integer_pool, "MaxPool 'pool8'")])
def test_what_the_run_cannot_do_is_refused_at_load(make, node):
    with pytest.raises(ModelError, match=node):
        wgc.ml.load_onnx(make())


# -- external data ---------------------------------------------------------------------------------
def _external_model(location):
    t = TensorProto()
    t.name, t.data_type = "c", TensorProto.FLOAT
    t.dims.extend([4])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "16")):
        e = t.external_data.add()
        e.key, e.value = k, v
    return _model([helper.make_node("Add", ["x", "c"], ["y"], name="add")],
                  [_vi("x", [4])], [_vi("y", [4])], [t])


SECRET = np.array([1.5, 2.5, 3.5, 4.5], np.float32)


@pytest.mark.parametrize("as_bytes", [True, False])
def test_external_data_of_bytes_or_proto_is_refused(tmp_path, monkeypatch, as_bytes):
    (tmp_path / "secret.bin").write_bytes(SECRET.tobytes())
    monkeypatch.chdir(tmp_path)
    m = _external_model("secret.bin")
    with pytest.raises(ModelError, match="secret.bin"):
        wgc.ml.load_onnx(m.SerializeToString() if as_bytes else m)


def test_external_data_inside_the_folder_loads(tmp_path):
    (tmp_path / "w.bin").write_bytes(SECRET.tobytes())
    path = tmp_path / "model.onnx"
    path.write_bytes(_external_model("w.bin").SerializeToString())
    np.testing.assert_array_equal(wgc.ml.load_onnx(path)(np.zeros(4, np.float32)), SECRET)


@pytest.mark.parametrize("where", ["absolute", "parent", "symlink"])
def test_external_data_outside_the_folder_is_refused(tmp_path, where):
    outside = tmp_path / "outside"
    folder = tmp_path / "model"
    outside.mkdir()
    folder.mkdir()
    (outside / "secret.bin").write_bytes(SECRET.tobytes())
    if where == "absolute":
        location = str(outside / "secret.bin")
    elif where == "parent":
        location = "../outside/secret.bin"
    else:
        os.symlink(outside / "secret.bin", folder / "link.bin")
        location = "link.bin"
    path = folder / "model.onnx"
    path.write_bytes(_external_model(location).SerializeToString())
    with pytest.raises(ModelError, match="external data"):
        wgc.ml.load_onnx(path)


# -- constants folded within a budget --------------------------------------------------------------
def _constant_of_shape(n):
    return _model([helper.make_node("ConstantOfShape", ["s"], ["k"], name="fill"),
                   helper.make_node("Add", ["x", "k"], ["y"], name="add")],
                  [_vi("x", [n])], [_vi("y", [n])], [_init("s", np.array([n], np.int64))])


def _concat_doublings(times):
    nodes, prev = [], "k0"
    for i in range(times):
        nodes.append(helper.make_node("Concat", [prev, prev], [f"k{i + 1}"], name=f"cat{i}",
                                      axis=0))
        prev = f"k{i + 1}"
    nodes.append(helper.make_node("Add", ["x", prev], ["y"], name="add"))
    return _model(nodes, [_vi("x", [4 << times])], [_vi("y", [4 << times])],
                  [_init("k0", np.ones(4, np.float32))])


@pytest.mark.parametrize("make, node", [(lambda: _constant_of_shape(2 ** 27), "fill"),
                                        (lambda: _constant_of_shape(2 ** 32), "fill"),
                                        (lambda: _concat_doublings(25), "cat")])
def test_folding_past_the_cap_is_refused_before_allocating(make, node):
    data = make().SerializeToString()
    assert len(data) < 2048
    tracemalloc.start()
    try:
        with pytest.raises(ModelError, match=rf"'{node}\d*' would fold into .* over the "
                                             r"limit of 67,108,864 bytes"):
            wgc.ml.load_onnx(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 70 << 20, peak


def test_max_folded_bytes_raises_the_cap(monkeypatch):
    data = _constant_of_shape(2 ** 20).SerializeToString()  # folds into 4 MiB
    with pytest.raises(ModelError, match="max_folded_bytes"):
        wgc.ml.load_onnx(data, max_folded_bytes=1 << 20)
    x = np.arange(2 ** 20, dtype=np.float32)
    np.testing.assert_array_equal(wgc.ml.load_onnx(data, max_folded_bytes=4 << 20)(x), x)
    monkeypatch.setenv("WGCOMPUTE_MAX_FOLDED_BYTES", str(1 << 20))
    with pytest.raises(ModelError, match="WGCOMPUTE_MAX_FOLDED_BYTES"):
        wgc.ml.load_onnx(data)
    monkeypatch.setenv("WGCOMPUTE_MAX_FOLDED_BYTES", "lots")
    with pytest.raises(wgc.ArgumentError, match="WGCOMPUTE_MAX_FOLDED_BYTES"):
        wgc.ml.load_onnx(data)


def test_max_folded_bytes_is_checked():
    with pytest.raises(wgc.ArgumentError, match="max_folded_bytes"):
        wgc.ml.load_onnx(_constant_of_shape(4), max_folded_bytes=-1)
