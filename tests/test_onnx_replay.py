"""Replayed interpreted models (wgcompute/ml/replay.py): a call on numpy inputs of a shape the
model has seen submits the dispatches of its first call again. What may not be replayed is
not: a graph whose work depends on the inputs' values; checks of the inputs' values (an index
out of range) still raise on a replay. Results against numpy and scipy."""

import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")

from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import wgcompute as wgc  # noqa: E402
from wgcompute.ml import eager  # noqa: E402


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return wgc.ml.load_onnx(m)


def _walks(monkeypatch) -> list:
    walks = []
    walk = eager._run_nodes
    monkeypatch.setattr(eager, "_run_nodes", lambda *a: walks.append(1) or walk(*a))
    return walks


def _erf_gelu():
    """x -> gelu(x) * w + b through Erf (a chain fusion takes), one float input of any shape."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    c = {k: numpy_helper.from_array(np.float32(v), k) for k, v in
         (("half", 0.5), ("one", 1.0), ("rsqrt2", 1 / np.sqrt(2)))}
    nodes = [helper.make_node("Mul", ["x", "rsqrt2"], ["s"]),
             helper.make_node("Erf", ["s"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]),
             helper.make_node("Mul", ["x", "e1"], ["g0"]),
             helper.make_node("Mul", ["g0", "half"], ["g"]),
             helper.make_node("MatMul", ["g", "wm"], ["y0"]),
             helper.make_node("Add", ["y0", "b"], ["y"])]
    wm = numpy_helper.from_array(np.outer(np.ones(8), numpy_helper.to_array(w))
                                 .astype(np.float32), "wm")
    model = _model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, ["n", 8])],
                   [helper.make_tensor_value_info("y", T.FLOAT, ["n", 8])],
                   [b, wm, *c.values()])

    def ref(x):
        from scipy.special import erf

        g = x * (1 + erf(x / np.sqrt(2))) * 0.5
        return g @ numpy_helper.to_array(wm) + numpy_helper.to_array(b)

    return model, ref


def test_replays_match_numpy_for_new_values_and_shapes(monkeypatch):
    model, ref = _erf_gelu()
    walks = _walks(monkeypatch)
    rng = np.random.default_rng(1)
    for n in (5, 5, 5, 3, 5, 3, 3):
        x = rng.standard_normal((n, 8)).astype(np.float32)
        np.testing.assert_allclose(model(x), ref(x), rtol=1e-5, atol=1e-5)
    assert model.replayed is None and len(walks) == 2


def test_no_replay_when_asked(monkeypatch):
    monkeypatch.setenv("WGCOMPUTE_REPLAY", "0")
    model, ref = _erf_gelu()
    walks = _walks(monkeypatch)
    x = np.ones((2, 8), np.float32)
    for _ in range(3):
        np.testing.assert_allclose(model(x), ref(x), rtol=1e-5, atol=1e-5)
    assert len(walks) == 3 and model.replayed == "WGCOMPUTE_REPLAY=0"


@pytest.mark.needs("shader-int64")
def test_work_that_depends_on_the_values_is_not_replayed(monkeypatch):
    """Reshape to a shape given as an input tensor: the shape is read from the input's values
    at each call."""
    model = _model([helper.make_node("Reshape", ["x", "s"], ["y0"]),
                    helper.make_node("Neg", ["y0"], ["y"])],
                   [helper.make_tensor_value_info("x", T.FLOAT, [2, 6]),
                    helper.make_tensor_value_info("s", T.INT64, [2])],
                   [helper.make_tensor_value_info("y", T.FLOAT, None)])
    walks = _walks(monkeypatch)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for shape in ((3, 4), (4, 3), (6, 2), (3, 4)):
        got = model(x, np.array(shape, np.int64))
        np.testing.assert_array_equal(got, -x.reshape(shape))
    assert len(walks) == 4
    assert "reads" in model.replayed and "inputs' values" in model.replayed


@pytest.mark.needs("shader-int64")
def test_an_index_out_of_range_raises_on_a_replay(monkeypatch):
    model = _model([helper.make_node("Gather", ["d", "i"], ["y0"], axis=0),
                    helper.make_node("Erf", ["y0"], ["y"])],
                   [helper.make_tensor_value_info("d", T.FLOAT, [5, 3]),
                    helper.make_tensor_value_info("i", T.INT64, [4])],
                   [helper.make_tensor_value_info("y", T.FLOAT, [4, 3])])
    assert model.path == "interpreted"
    walks = _walks(monkeypatch)
    data = np.linspace(-2, 2, 15, dtype=np.float32).reshape(5, 3)
    from scipy.special import erf

    for k, idx in enumerate(([0, 1, 2, 3], [4, -1, 0, 0], [1, 7, 0, 2], [3, 3, -5, 1])):
        i = np.array(idx, np.int64)
        if max(idx) >= 5:
            with pytest.raises(wgc.IndexingError, match=r"index 7 \(element 1"):
                model(data, i)
            continue
        d = data * (k + 1)
        np.testing.assert_allclose(model(d, i), erf(d)[i], rtol=1e-6, atol=1e-6)
    assert len(walks) == 1 and model.replayed is None


def test_threads_calling_one_model():
    model, ref = _erf_gelu()
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(12):
                x = rng.standard_normal((4, 8)).astype(np.float32)
                np.testing.assert_allclose(model(x), ref(x), rtol=1e-5, atol=1e-5)
        except Exception as e:  # noqa: BLE001 - reported by the test's thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_a_freed_model_lets_go_of_its_replays():
    model, ref = _erf_gelu()
    dev = wgc.default_device()
    x = np.ones((64, 8), np.float32)
    model(x)
    model(x)
    held = dev.memory_stats()["used"]
    model.free()
    assert dev.memory_stats()["used"] < held
    with pytest.raises(wgc.WgComputeError):
        model(x)


@pytest.mark.needs("timestamp-query")
def test_profile_of_an_interpreted_model_names_its_nodes(tmp_path):
    """profile() times each operation of the replayed call, named by its ONNX node; the Chrome
    trace holds one event per operation."""
    import json

    model, _ = _erf_gelu()
    rows = model.profile(np.ones((16, 8), np.float32), repeat=2, trace=tmp_path / "t.json")
    layers = [r["layer"] for r in rows]
    assert rows and all(r["ms"] >= 0 for r in rows)
    # (a linear layer and its activation are one node, FusedMatMul, named after its nodes)
    assert any(x.startswith(("MatMul ", "FusedMatMul MatMul")) for x in layers), layers
    assert all(x.split(" ")[0] in {"Mul", "Erf", "Add", "MatMul", "FusedMatMul"}
               for x in layers), layers
    events = [e for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"]
              if e.get("ph") == "X"]
    assert len(events) == len(rows)


def test_a_scalar_gather_on_the_first_axis_is_a_view_that_replays():
    """Gather of one constant index on axis 0 (a transformer's q, k, v split) reads a slab of
    its input in place; the replay sees the new input through it."""
    nodes = [helper.make_node("Gather", ["x", "i"], ["g"], axis=0),
             helper.make_node("Gather", ["x", "j"], ["h"], axis=0),
             helper.make_node("Sub", ["g", "h"], ["d"]),
             helper.make_node("Erf", ["d"], ["y"])]  # (interpreted)
    model = _model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [3, 4, 64])],
                   [helper.make_tensor_value_info("y", T.FLOAT, [4, 64])],
                   [numpy_helper.from_array(np.array(2, np.int64), "i"),
                    numpy_helper.from_array(np.array(-3, np.int64), "j")])
    rng = np.random.default_rng(2)
    for _ in range(3):
        x = rng.standard_normal((3, 4, 64)).astype(np.float32)
        from scipy.special import erf

        np.testing.assert_allclose(model(x), erf(x[2] - x[0]), rtol=1e-6, atol=1e-6)
    assert model.path == "interpreted" and model.replayed is None
    if "timestamp-query" in wgc.device_info()["features"]:  # no GPU work of its own
        assert not [r for r in model.profile(x) if r["layer"].startswith("Gather")]


def test_attention_scores_read_k_transposed_in_place():
    """Q·Kᵀ as exporters write it (Transpose of K's last two axes, then MatMul): the product
    reads K in place, no copy kernel; replayed with new values, as numpy."""
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Erf", ["s"], ["y"])]  # (interpreted)
    shape = [1, 3, 67, 24]  # (larger than the values the interpreter keeps for host folds)
    model = _model(nodes, [helper.make_tensor_value_info(n, T.FLOAT, shape) for n in "qk"],
                   [helper.make_tensor_value_info("y", T.FLOAT, None)])
    from scipy.special import erf

    rng = np.random.default_rng(3)
    for _ in range(3):
        q, k = (rng.standard_normal(shape).astype(np.float32) * 0.3 for _ in range(2))
        np.testing.assert_allclose(model(q, k), erf(q @ np.swapaxes(k, -1, -2)), rtol=1e-5,
                                   atol=1e-5)
    assert model.replayed is None
    if "timestamp-query" in wgc.device_info()["features"]:
        kernels = [r["kernel"] for r in model.profile(q, k)]
        assert not [x for x in kernels if "copy" in x], kernels


@pytest.mark.parametrize("trans_b, bias", [(1, (5,)), (0, (1, 5)), (1, (3, 5)), (0, None),
                                           (1, (3, 1))])
def test_a_linear_layer_in_an_interpreted_model(trans_b, bias):
    """Gemm of a constant weight (transposed or not) and a constant bias, as exporters write a
    linear layer, in an interpreted model: as numpy, and replayed."""
    rng = np.random.default_rng(4)
    w = rng.standard_normal((5, 4) if trans_b else (4, 5)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if bias is not None:
        c = rng.standard_normal(bias).astype(np.float32)
        inits.append(numpy_helper.from_array(c, "c"))
        ins.append("c")
    nodes = [helper.make_node("Gemm", ins, ["g"], transB=trans_b),
             helper.make_node("Erf", ["g"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [3, 4])],
                   [helper.make_tensor_value_info("y", T.FLOAT, [3, 5])], inits)
    from scipy.special import erf

    for _ in range(3):
        x = rng.standard_normal((3, 4)).astype(np.float32)
        want = x @ (w.T if trans_b else w) + (0 if bias is None else c)
        np.testing.assert_allclose(model(x), erf(want), rtol=1e-5, atol=1e-5)
    assert model.path == "interpreted" and model.replayed is None
    if "timestamp-query" in wgc.device_info()["features"]:  # the namespace's matmul
        kernels = [r["kernel"] for r in model.profile(x)]
        assert any(k.startswith("matmul") for k in kernels), kernels


@pytest.mark.needs("shader-int64")
def test_a_replay_reads_every_output_of_every_type_and_view():
    """A replayed call reads all its outputs right behind its work: a view at an offset
    (4-byte aligned or not), bool, int64 and uint8 outputs, and one known on the host, come
    back as onnxruntime's, each
    call's arrays its own (a later call does not write into an earlier call's results)."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime (pip install 'wgcompute[ml]')")
    nodes = [helper.make_node("Erf", ["x"], ["e"]),
             helper.make_node("Gather", ["e", "i"], ["row"], axis=0),
             helper.make_node("Greater", ["e", "zero"], ["pos"]),
             helper.make_node("Mul", ["e", "hundred"], ["big"]),
             helper.make_node("Cast", ["big"], ["ints"], to=T.INT64),
             helper.make_node("Abs", ["big"], ["mag"]),
             helper.make_node("Cast", ["mag"], ["bytes"], to=T.UINT8),
             helper.make_node("Gather", ["bytes", "i"], ["byte_row"], axis=0),
             helper.make_node("Shape", ["x"], ["shape"])]  # (known on the host)
    inits = [numpy_helper.from_array(np.array(1, np.int64), "i"),
             numpy_helper.from_array(np.float32(0), "zero"),
             numpy_helper.from_array(np.float32(100), "hundred")]
    outs = [("row", T.FLOAT, [5]), ("pos", T.BOOL, [3, 5]), ("ints", T.INT64, [3, 5]),
            ("byte_row", T.UINT8, [5]), ("e", T.FLOAT, [3, 5]), ("shape", T.INT64, [2])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [3, 5])],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    model = wgc.ml.load_onnx(m)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    calls = []
    for _ in range(4):
        x = rng.standard_normal((3, 5)).astype(np.float32)
        got, want = model(x), sess.run(None, {"x": x})
        calls.append((got, want))
    for got, want in calls:  # (read after every call ran: no call's arrays were reused)
        for (name, _, _), a, b in zip(outs, got, want, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape, name
            if a.dtype == np.float32:
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=name)
            else:  # (the casts truncate values 1e-5 apart from an integer alike)
                assert np.abs(a.astype(np.int64) - b.astype(np.int64)).max() <= 1, name
    assert model.path == "interpreted" and model.replayed is None
