"""A small transformer encoder built with onnx.helper, as exporters write one (token embedding
Gather, LayerNormalization, MatMul + Add projections, the decomposed attention: MatMul, Div by
sqrt(d), Add of the padding mask, Softmax, MatMul; heads split and merged with Reshape and
Transpose of shapes computed from Shape; GELU through Erf; residual Adds), run interpreted and
compared with onnxruntime; the layer norm also in its decomposed form (ReduceMean, Sub, Pow,
Sqrt, Div)."""

import math

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

VOCAB, D, HEADS, FF, LAYERS, MAX_LEN = 50, 32, 4, 64, 2, 16


class _Builder:
    """Nodes and initializers of the graph being built, with fresh value names."""

    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.k = rng, [], [], 0

    def const(self, value, dtype=np.float32):
        self.k += 1
        name = f"c{self.k}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def weight(self, *shape):
        return self.const(self.rng.standard_normal(shape) / math.sqrt(shape[0]))

    def op(self, op, *ins, **attrs):
        self.k += 1
        out = f"v{self.k}"
        self.nodes.append(helper.make_node(op, list(ins), [out], name=f"{op}_{self.k}", **attrs))
        return out


def _layer_norm(b, x, decomposed):
    gamma = b.const(1 + 0.1 * b.rng.standard_normal(D))
    beta = b.const(0.1 * b.rng.standard_normal(D))
    if not decomposed:
        return b.op("LayerNormalization", x, gamma, beta, axis=-1, epsilon=1e-5)
    axes = b.const([-1], np.int64)
    mean = b.op("ReduceMean", x, axes)
    d = b.op("Sub", x, mean)
    var = b.op("ReduceMean", b.op("Pow", d, b.const(2.0)), axes)
    std = b.op("Sqrt", b.op("Add", var, b.const(1e-5)))
    return b.op("Add", b.op("Mul", b.op("Div", d, std), gamma), beta)


def _linear(b, x, n_in, n_out):
    return b.op("Add", b.op("MatMul", x, b.weight(n_in, n_out)),
                b.const(0.1 * b.rng.standard_normal(n_out)))


def _attention(b, x, mask_add, bsd):
    """Multi-head self-attention: heads split with Reshape (B, S, H, dh) and Transpose."""
    dh = D // HEADS
    heads_shape = b.op("Concat", bsd[0], bsd[1], b.const([HEADS, dh], np.int64), axis=0)

    def split(t):
        return b.op("Transpose", b.op("Reshape", t, heads_shape), perm=[0, 2, 1, 3])

    q, k, v = (split(_linear(b, x, D, D)) for _ in range(3))
    scores = b.op("Div", b.op("MatMul", q, b.op("Transpose", k, perm=[0, 1, 3, 2])),
                  b.const(math.sqrt(dh)))
    probs = b.op("Softmax", b.op("Add", scores, mask_add), axis=-1)
    ctx = b.op("Transpose", b.op("MatMul", probs, v), perm=[0, 2, 1, 3])
    merged = b.op("Reshape", ctx, b.op("Concat", bsd[0], bsd[1], b.const([D], np.int64),
                                      axis=0))
    return _linear(b, merged, D, D)


def _gelu(b, x):
    erf = b.op("Erf", b.op("Div", x, b.const(math.sqrt(2.0))))
    return b.op("Mul", b.op("Mul", x, b.op("Add", erf, b.const(1.0))), b.const(0.5))


def encoder(decomposed_norm: bool, seed: int = 0):
    """The ONNX model: input_ids (B, S) int64 and attention_mask (B, S) float32 (1 = a token,
    0 = padding) -> hidden states (B, S, D)."""
    b = _Builder(np.random.default_rng(seed))
    emb = b.op("Gather", b.weight(VOCAB, D), "input_ids", axis=0)
    shape = b.op("Shape", "input_ids")
    bsd = [b.op("Slice", shape, b.const([i], np.int64), b.const([i + 1], np.int64))
           for i in (0, 1)]
    pos = b.op("Slice", b.weight(MAX_LEN, D), b.const([0], np.int64), bsd[1],
               b.const([0], np.int64))
    x = b.op("Add", emb, pos)
    # (1 - mask) * -10000, as (B, 1, 1, S): added to every head's scores
    mask = b.op("Unsqueeze", "attention_mask", b.const([1, 2], np.int64))
    mask_add = b.op("Mul", b.op("Sub", b.const(1.0), mask), b.const(-10000.0))
    for _ in range(LAYERS):
        x = b.op("Add", x, _attention(b, _layer_norm(b, x, decomposed_norm), mask_add, bsd))
        h = _gelu(b, _linear(b, _layer_norm(b, x, decomposed_norm), D, FF))
        x = b.op("Add", x, _linear(b, h, FF, D))
    b.nodes.append(helper.make_node("Identity", [_layer_norm(b, x, decomposed_norm)],
                                    ["hidden"]))
    graph = helper.make_graph(
        b.nodes, "encoder",
        [helper.make_tensor_value_info("input_ids", T.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", T.FLOAT, ["batch", "seq"])],
        [helper.make_tensor_value_info("hidden", T.FLOAT, ["batch", "seq", D])], b.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _inputs(rng, batch, seq):
    ids = rng.integers(0, VOCAB, (batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), np.float32)
    mask[0, seq // 2:] = 0  # the first sequence is padded
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("decomposed_norm", [False, True], ids=["LayerNormalization",
                                                                 "decomposed-norm"])
def test_encoder_matches_onnxruntime(decomposed_norm):
    m = encoder(decomposed_norm)
    model = wgc.ml.load_onnx(m)
    assert model.path == "interpreted"
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for batch, seq in ((2, 7), (3, 16)):  # the shapes are dynamic: each call its own
        feeds = _inputs(rng, batch, seq)
        got = model.run(feeds)[0]
        ref = s.run(None, feeds)[0]
        assert got.shape == ref.shape == (batch, seq, D) and got.dtype == np.float32
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_encoder_on_buffers_gives_a_buffer():
    m = encoder(False, seed=2)
    model = wgc.ml.load_onnx(m)
    feeds = _inputs(np.random.default_rng(3), 1, 5)
    out = model(wgc.buffer(feeds["input_ids"]), wgc.buffer(feeds["attention_mask"]))
    assert isinstance(out, wgc.Buffer) and out.shape == (1, 5, D)
    np.testing.assert_allclose(out.to_numpy(), model.run(feeds)[0], rtol=1e-6, atol=1e-6)


def test_encoder_calls_of_a_seen_shape_are_replayed(monkeypatch):
    """The second call of a shape replays the first's dispatches without walking the graph
    (ml/replay.py): other token ids and masks, then a new shape (traced), all as onnxruntime."""
    from wgcompute.ml import eager

    m = encoder(False, seed=4)
    model = wgc.ml.load_onnx(m)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    walks = []
    walk = eager._run_nodes
    monkeypatch.setattr(eager, "_run_nodes", lambda *a: walks.append(1) or walk(*a))
    rng = np.random.default_rng(5)
    for batch, seq in ((2, 9), (2, 9), (2, 9), (3, 4), (2, 9), (3, 4)):
        feeds = _inputs(rng, batch, seq)
        feeds["attention_mask"][-1, rng.integers(1, seq):] = 0  # padding differs each call
        got = model.run(feeds)[0]
        ref = s.run(None, feeds)[0]
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    assert model.replayed is None
    assert len(walks) == 2  # each shape's first call; the other four were replays
